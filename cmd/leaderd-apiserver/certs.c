#include "certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "util.h"

#define VALID_SECONDS 86400L
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

/* Issues a certificate for key. issuer NULL means self-signed (the CA). */
static X509 *issue(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key)
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
    if (issuer) {
        ok = add_ext(x, iss, NID_basic_constraints, "critical,CA:FALSE") &&
             add_ext(x, iss, NID_key_usage, "critical,digitalSignature") &&
             add_ext(x, iss, NID_ext_key_usage, "serverAuth") &&
             add_ext(x, iss, NID_subject_alt_name, "IP:127.0.0.1,IP:::1,DNS:localhost");
    } else {
        ok = add_ext(x, iss, NID_basic_constraints, "critical,CA:TRUE") &&
             add_ext(x, iss, NID_key_usage, "critical,keyCertSign,cRLSign");
    }
    ok = ok && add_ext(x, iss, NID_subject_key_identifier, "hash") &&
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

static char *key_pem(EVP_PKEY *k)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s = NULL;
    if (b && PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL))
        s = bio_string(b);
    BIO_free(b);
    return s;
}

static bool write_pem(const char *dir, const char *name, const char *pem, unsigned mode,
                      char *err, size_t errlen)
{
    char *path = as_path_join(dir, name);
    bool ok = path && as_write_file_atomic(path, pem, strlen(pem), mode) == 0;
    if (!ok)
        snprintf(err, errlen, "cannot write %s/%s", dir, name);
    free(path);
    return ok;
}

/* Loads dir/ca.crt and dir/ca.key if they match and stay valid long enough. */
static bool load_ca(const char *dir, X509 **ca, EVP_PKEY **key)
{
    char *cpath = as_path_join(dir, "ca.crt");
    char *kpath = as_path_join(dir, "ca.key");
    FILE *cf = cpath ? fopen(cpath, "r") : NULL;
    FILE *kf = kpath ? fopen(kpath, "r") : NULL;
    X509 *x = cf ? PEM_read_X509(cf, NULL, NULL, NULL) : NULL;
    EVP_PKEY *k = kf ? PEM_read_PrivateKey(kf, NULL, NULL, NULL) : NULL;
    time_t soon = time(NULL) + MIN_REMAINING_SECONDS;
    bool ok = x && k && X509_check_private_key(x, k) == 1 &&
              X509_cmp_time(X509_get0_notAfter(x), &soon) > 0;
    if (cf)
        fclose(cf);
    if (kf)
        fclose(kf);
    free(cpath);
    free(kpath);
    ERR_clear_error();
    if (!ok) {
        X509_free(x);
        EVP_PKEY_free(k);
        return false;
    }
    *ca = x;
    *key = k;
    return true;
}

bool as_certs_setup(const char *dir, char **cert_out, char **key_out, char *err,
                    size_t errlen)
{
    X509 *ca = NULL, *srv = NULL;
    EVP_PKEY *ca_key = NULL, *srv_key = NULL;
    char *ca_pem = NULL, *ca_key_pem = NULL, *srv_pem = NULL, *srv_key_pem = NULL;
    bool ok = false;
    if (!load_ca(dir, &ca, &ca_key)) {
        ca_key = EVP_EC_gen("P-256");
        ca = ca_key ? issue(ca_key, "leaderd-apiserver test CA", NULL, NULL) : NULL;
        if (!ca) {
            ossl_error(err, errlen, "generating the CA");
            goto out;
        }
        ca_pem = cert_pem(ca);
        ca_key_pem = key_pem(ca_key);
        if (!ca_pem || !ca_key_pem) {
            snprintf(err, errlen, "encoding the CA: out of memory");
            goto out;
        }
        /* Key first: a crash in between leaves a CA without its key, which
         * the next start replaces, never a key that matches nothing. */
        if (!write_pem(dir, "ca.key", ca_key_pem, 0600, err, errlen) ||
            !write_pem(dir, "ca.crt", ca_pem, 0644, err, errlen))
            goto out;
    }
    srv_key = EVP_EC_gen("P-256");
    srv = srv_key ? issue(srv_key, "127.0.0.1", ca, ca_key) : NULL;
    if (!srv) {
        ossl_error(err, errlen, "issuing the server certificate");
        goto out;
    }
    srv_pem = cert_pem(srv);
    srv_key_pem = key_pem(srv_key);
    if (!srv_pem || !srv_key_pem) {
        snprintf(err, errlen, "encoding the server certificate: out of memory");
        goto out;
    }
    if (!write_pem(dir, "server.key", srv_key_pem, 0600, err, errlen) ||
        !write_pem(dir, "server.crt", srv_pem, 0644, err, errlen))
        goto out;
    *cert_out = srv_pem;
    *key_out = srv_key_pem;
    srv_pem = srv_key_pem = NULL;
    ok = true;
out:
    X509_free(ca);
    X509_free(srv);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(srv_key);
    free(ca_pem);
    free(ca_key_pem);
    free(srv_pem);
    free(srv_key_pem);
    return ok;
}
