/*
 * certs: the throw-away PKI of leaderd-apiserver (OpenSSL). A P-256 CA
 * valid for one day, reused from DIR when still good for an hour, and a
 * fresh server certificate for 127.0.0.1, ::1 and localhost signed by it.
 * Test-only: keys are written unencrypted.
 */
#ifndef AS_CERTS_H
#define AS_CERTS_H

#include <stdbool.h>
#include <stddef.h>

/* Loads or creates dir/ca.crt and dir/ca.key, issues a server certificate,
 * writes dir/server.crt and dir/server.key, and returns the server's PEM
 * certificate and key in *cert_pem and *key_pem (new strings, free with
 * free()). Returns false with a message in err (errlen bytes). */
bool as_certs_setup(const char *dir, char **cert_pem, char **key_pem, char *err,
                    size_t errlen);

#endif
