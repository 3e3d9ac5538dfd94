/* SPDX-License-Identifier: Apache-2.0 */
/*
 * certs: the throw-away PKI of leaderd-apiserver (OpenSSL). A P-256 CA valid
 * for one day, reused from DIR when still good for an hour; signed by it, a
 * fresh server certificate for 127.0.0.1, ::1 and localhost, and a client
 * certificate per client (Subject CN = its name, like kube-apiserver's x509
 * authentication). Test-only: keys are written unencrypted.
 */
#ifndef AS_CERTS_H
#define AS_CERTS_H

#include <stdbool.h>
#include <stddef.h>

enum as_key_type {
    AS_KEY_EC,  /* P-256, written as PKCS#8 ("BEGIN PRIVATE KEY") */
    AS_KEY_RSA, /* 2048 bits, written as PKCS#1 ("BEGIN RSA PRIVATE KEY") */
};

struct as_cert_client {
    const char *name; /* borrowed; becomes the certificate's Subject CN */
    enum as_key_type key;
};

/* PEM texts the HTTPS server needs; each a new string owned by the struct. */
struct as_certs {
    char *ca;          /* the CA certificate, trusted for client certificates */
    char *server_cert; /* the server certificate */
    char *server_key;  /* its key */
};

/* Loads or creates dir/ca.crt and dir/ca.key, issues a server certificate
 * (dir/server.crt, dir/server.key) and, for each of the n clients, makes sure
 * dir/certs/NAME.crt and dir/certs/NAME.key hold a client certificate (CN =
 * NAME, extended key usage clientAuth) of the requested key type: a pair
 * signed by the current CA that is still good for an hour is kept, anything
 * else is replaced. Fills *out (clear it with as_certs_clear()). Returns
 * false with a message in err (errlen bytes); *out is then empty. */
bool as_certs_setup(const char *dir, const struct as_cert_client *clients, size_t n,
                    struct as_certs *out, char *err, size_t errlen);

/* Frees the strings of c and zeroes it. NULL-safe. */
void as_certs_clear(struct as_certs *c);

/* Path of client name's certificate (ext ".crt") or key (ext ".key") under
 * dir. Returns a new string (free with free()) or NULL when out of memory. */
char *as_certs_client_path(const char *dir, const char *name, const char *ext);

#endif
