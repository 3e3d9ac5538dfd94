/* SPDX-License-Identifier: Apache-2.0 */
#include "certs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "util.h"

#define VALID_SECONDS 86400L
#define RSA_BITS 2048
/* Client certificates and keys live in DIR/CLIENT_DIR. */
#define CLIENT_DIR "certs"
/* Regenerate a CA that would expire during a test run. */
#define MIN_REMAINING_SECONDS 3600L

static void ossl_error(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    snprintf(err, errlen, "%s: %s", what, buf[0] ? buf : "failed");
    ERR_clear_error();
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ex)
        return false;
    int ok = X509_add_ext(cert, ex, -1);
    X509_EXTENSION_free(ex);
    return ok == 1;
}

enum cert_kind { KIND_CA, KIND_SERVER, KIND_CLIENT };

/* The extensions that make x a certificate of kind, as kubeadm's are. */
static bool add_kind_exts(X509 *x, X509 *iss, enum cert_kind kind)
{
    switch (kind) {
    case KIND_CA:
        return add_ext(x, iss, NID_basic_constraints, "critical,CA:TRUE") &&
               add_ext(x, iss, NID_key_usage, "critical,keyCertSign,cRLSign");
    case KIND_SERVER:
        return add_ext(x, iss, NID_basic_constraints, "critical,CA:FALSE") &&
               add_ext(x, iss, NID_key_usage, "critical,digitalSignature") &&
               add_ext(x, iss, NID_ext_key_usage, "serverAuth") &&
               add_ext(x, iss, NID_subject_alt_name, "IP:127.0.0.1,IP:::1,DNS:localhost");
    case KIND_CLIENT:
        return add_ext(x, iss, NID_basic_constraints, "critical,CA:FALSE") &&
               add_ext(x, iss, NID_key_usage, "critical,digitalSignature") &&
               add_ext(x, iss, NID_ext_key_usage, "clientAuth");
    }
    return false;
}

/* Issues a certificate of kind for key. KIND_CA is self-signed (issuer and
 * issuer_key NULL). */
static X509 *issue(EVP_PKEY *key, const char *cn, enum cert_kind kind, X509 *issuer,
                   EVP_PKEY *issuer_key)
{
    X509 *x = X509_new();
    BIGNUM *serial = BN_new();
    bool ok = false;
    if (!x || !serial)
        goto out;
    /* Positive 127-bit serial: Go rejects negative serial numbers. */
    if (!BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
        !BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) || !X509_set_version(x, 2))
        goto out;
    /* Backdated a little so peers with a slightly slow clock accept it. */
    if (!X509_gmtime_adj(X509_getm_notBefore(x), -300) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), VALID_SECONDS) ||
        !X509_set_pubkey(x, key))
        goto out;
    X509_NAME *name = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                    (const unsigned char *)"leaderd test", -1, -1, 0) ||
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn,
                                    -1, -1, 0))
        goto out;
    if (!X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name))
        goto out;
    X509 *iss = issuer ? issuer : x;
    ok = add_kind_exts(x, iss, kind) &&
         add_ext(x, iss, NID_subject_key_identifier, "hash") &&
         add_ext(x, iss, NID_authority_key_identifier, "keyid:always") &&
         X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) > 0;
out:
    BN_free(serial);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static char *bio_string(BIO *b)
{
    char *data;
    long n = BIO_get_mem_data(b, &data);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    return s;
}

static char *cert_pem(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s = NULL;
    if (b && PEM_write_bio_X509(b, x))
        s = bio_string(b);
    BIO_free(b);
    return s;
}

/* PKCS#8 ("BEGIN PRIVATE KEY"), or with traditional set the algorithm's own
 * form (PKCS#1 "BEGIN RSA PRIVATE KEY" for RSA), as kubeadm writes it. */
static char *key_pem(EVP_PKEY *k, bool traditional)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s = NULL;
    int ok = 0;
    if (b && traditional)
        ok = PEM_write_bio_PrivateKey_traditional(b, k, NULL, NULL, 0, NULL, NULL);
    else if (b)
        ok = PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
    if (ok)
        s = bio_string(b);
    BIO_free(b);
    return s;
}

static bool write_pem(const char *path, const char *pem, unsigned mode, char *err,
                      size_t errlen)
{
    if (as_write_file_atomic(path, pem, strlen(pem), mode) == 0)
        return true;
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return false;
}

/* Reads the certificate at cpath and the key at kpath: true (and both
 * returned) when they match and the certificate stays valid long enough. */
static bool load_pair(const char *cpath, const char *kpath, X509 **cert, EVP_PKEY **key)
{
    FILE *cf = fopen(cpath, "r");
    FILE *kf = fopen(kpath, "r");
    X509 *x = cf ? PEM_read_X509(cf, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = kf ? PEM_read_PrivateKey(kf, NULL, NULL, NULL) : NULL;
    time_t soon = time(NULL) + MIN_REMAINING_SECONDS;
    bool ok = x && k && X509_check_private_key(x, k) == 1 &&
              X509_cmp_time(X509_get0_notAfter(x), &soon) > 0;
    if (cf)
        fclose(cf);
    if (kf)
        fclose(kf);
    ERR_clear_error();
    if (!ok) {
        X509_free(x);
        EVP_PKEY_free(k);
        return false;
    }
    *cert = x;
    *key = k;
    return true;
}

/* Loads or creates dir/ca.crt and dir/ca.key. */
static bool setup_ca(const char *dir, X509 **ca_out, EVP_PKEY **key_out, char *err,
                     size_t errlen)
{
    char *cpath = as_path_join(dir, "ca.crt");
    char *kpath = as_path_join(dir, "ca.key");
    X509 *ca = NULL;
    EVP_PKEY *key = NULL;
    char *ca_pem = NULL, *ca_key_pem = NULL;
    bool ok = false;
    if (!cpath || !kpath) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (load_pair(cpath, kpath, &ca, &key)) {
        ok = true;
        goto out;
    }
    key = EVP_EC_gen("P-256");
    ca = key ? issue(key, "leaderd-apiserver test CA", KIND_CA, NULL, NULL) : NULL;
    if (!ca) {
        ossl_error(err, errlen, "generating the CA");
        goto out;
    }
    ca_pem = cert_pem(ca);
    ca_key_pem = key_pem(key, false);
    if (!ca_pem || !ca_key_pem) {
        snprintf(err, errlen, "encoding the CA: out of memory");
        goto out;
    }
    /* Key first: a crash in between leaves a CA without its key, which the
     * next start replaces, never a key that matches nothing. */
    ok = write_pem(kpath, ca_key_pem, 0600, err, errlen) &&
         write_pem(cpath, ca_pem, 0644, err, errlen);
out:
    free(cpath);
    free(kpath);
    free(ca_pem);
    free(ca_key_pem);
    if (!ok) {
        X509_free(ca);
        EVP_PKEY_free(key);
        return false;
    }
    *ca_out = ca;
    *key_out = key;
    return true;
}

/* True when cpath and kpath hold a certificate for c that ca signed, with
 * c's CN and key type, valid long enough. */
static bool client_pair_ok(const char *cpath, const char *kpath,
                           const struct as_cert_client *c, X509 *ca)
{
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    char cn[256];
    if (!load_pair(cpath, kpath, &x, &k))
        return false;
    int want = c->key == AS_KEY_RSA ? EVP_PKEY_RSA : EVP_PKEY_EC;
    bool ok = EVP_PKEY_get_base_id(k) == want && X509_check_issued(ca, x) == X509_V_OK &&
              X509_verify(x, X509_get0_pubkey(ca)) == 1 &&
              X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn,
                                        sizeof cn) > 0 &&
              strcmp(cn, c->name) == 0;
    ERR_clear_error();
    X509_free(x);
    EVP_PKEY_free(k);
    return ok;
}

/* Keeps or replaces dir/certs/NAME.crt and .key for client c. */
static bool setup_client(const char *dir, const struct as_cert_client *c, X509 *ca,
                         EVP_PKEY *ca_key, char *err, size_t errlen)
{
    char *cpath = as_certs_client_path(dir, c->name, ".crt");
    char *kpath = as_certs_client_path(dir, c->name, ".key");
    EVP_PKEY *key = NULL;
    X509 *x = NULL;
    char *x_pem = NULL, *key_text = NULL;
    bool ok = false;
    if (!cpath || !kpath) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (client_pair_ok(cpath, kpath, c, ca)) {
        ok = true;
        goto out;
    }
    key = c->key == AS_KEY_RSA ? EVP_RSA_gen(RSA_BITS) : EVP_EC_gen("P-256");
    x = key ? issue(key, c->name, KIND_CLIENT, ca, ca_key) : NULL;
    if (!x) {
        ossl_error(err, errlen, "issuing a client certificate");
        goto out;
    }
    x_pem = cert_pem(x);
    key_text = key_pem(key, c->key == AS_KEY_RSA);
    if (!x_pem || !key_text) {
        snprintf(err, errlen, "encoding a client certificate: out of memory");
        goto out;
    }
    /* A crash in between leaves a pair that does not match; the next start
     * replaces it. */
    ok = write_pem(kpath, key_text, 0600, err, errlen) &&
         write_pem(cpath, x_pem, 0644, err, errlen);
out:
    if (key_text)
        OPENSSL_cleanse(key_text, strlen(key_text));
    free(cpath);
    free(kpath);
    free(x_pem);
    free(key_text);
    X509_free(x);
    EVP_PKEY_free(key);
    return ok;
}

char *as_certs_client_path(const char *dir, const char *name, const char *ext)
{
    char *path = NULL;
    if (asprintf(&path, "%s/" CLIENT_DIR "/%s%s", dir, name, ext) < 0)
        return NULL;
    return path;
}

void as_certs_clear(struct as_certs *c)
{
    if (!c)
        return;
    free(c->ca);
    free(c->server_cert);
    if (c->server_key)
        OPENSSL_cleanse(c->server_key, strlen(c->server_key));
    free(c->server_key);
    memset(c, 0, sizeof *c);
}

bool as_certs_setup(const char *dir, const struct as_cert_client *clients, size_t n,
                    struct as_certs *out, char *err, size_t errlen)
{
    X509 *ca = NULL, *srv = NULL;
    EVP_PKEY *ca_key = NULL, *srv_key = NULL;
    char *srv_path = NULL, *srv_key_path = NULL, *client_dir = NULL;
    bool ok = false;
    memset(out, 0, sizeof *out);
    srv_path = as_path_join(dir, "server.crt");
    srv_key_path = as_path_join(dir, "server.key");
    client_dir = as_path_join(dir, CLIENT_DIR);
    if (!srv_path || !srv_key_path || !client_dir) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (!setup_ca(dir, &ca, &ca_key, err, errlen))
        goto out;
    srv_key = EVP_EC_gen("P-256");
    srv = srv_key ? issue(srv_key, "127.0.0.1", KIND_SERVER, ca, ca_key) : NULL;
    if (!srv) {
        ossl_error(err, errlen, "issuing the server certificate");
        goto out;
    }
    out->ca = cert_pem(ca);
    out->server_cert = cert_pem(srv);
    out->server_key = key_pem(srv_key, false);
    if (!out->ca || !out->server_cert || !out->server_key) {
        snprintf(err, errlen, "encoding the server certificate: out of memory");
        goto out;
    }
    if (!write_pem(srv_key_path, out->server_key, 0600, err, errlen) ||
        !write_pem(srv_path, out->server_cert, 0644, err, errlen))
        goto out;
    if (mkdir(client_dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", client_dir, strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (!setup_client(dir, &clients[i], ca, ca_key, err, errlen))
            goto out;
    ok = true;
out:
    if (!ok)
        as_certs_clear(out);
    X509_free(ca);
    X509_free(srv);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(srv_key);
    free(srv_path);
    free(srv_key_path);
    free(client_dir);
    return ok;
}
