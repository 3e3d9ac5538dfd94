/* SPDX-License-Identifier: Apache-2.0 */
#include "auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "certs.h"
#include "util.h"

#define TOKEN_BYTES 24
#define RETIRED_MAX 8
#define CERT_FILE_MAX (64 * 1024) /* a PEM certificate or key, for *-data fields */

struct client {
    char name[AS_CLIENT_MAX];
    char token[AS_TOKEN_MAX]; /* "" when revoked */
    char old_token[AS_TOKEN_MAX];
    int64_t old_until_ms;
    char retired[RETIRED_MAX][AS_TOKEN_MAX];
    size_t retired_next;
    uint64_t uses_current, uses_stale; /* tokens presented, for tests */
};

struct as_auth {
    pthread_mutex_t mu;
    char *dir;
    char *server;
    struct client *clients;
    size_t n;
    char admin[AS_TOKEN_MAX];
};

bool as_valid_client_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= AS_CLIENT_MAX || strcmp(name, AS_ADMIN) == 0 ||
        strcmp(name, "anonymous") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return false;
    }
    return true;
}

/* A token read back from disk must look like one we could have written:
 * printable, no blanks, long enough to be unguessable. */
static bool plausible_token(const char *t)
{
    size_t n = strlen(t);
    if (n < 16 || n >= AS_TOKEN_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (t[i] <= ' ' || t[i] > '~')
            return false;
    return true;
}

/* Loads the token at path or writes a new one; out holds AS_TOKEN_MAX. */
static bool load_or_create_token(const char *path, char *out, char *err, size_t errlen)
{
    size_t len;
    char *text = as_read_file(path, AS_TOKEN_MAX * 2, &len);
    if (text) {
        while (len > 0 &&
               (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
            text[--len] = '\0';
        bool ok = plausible_token(text);
        if (ok)
            snprintf(out, AS_TOKEN_MAX, "%s", text);
        free(text);
        if (ok)
            return true;
    }
    if (!as_random_hex(TOKEN_BYTES, out)) {
        snprintf(err, errlen, "no randomness for tokens");
        return false;
    }
    if (as_write_file_atomic(path, out, strlen(out), 0600) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return false;
    }
    return true;
}

struct as_auth *as_auth_new(const char *dir, char *const *clients, size_t n, char *err,
                            size_t errlen)
{
    struct as_auth *a = calloc(1, sizeof *a);
    char *tokdir = NULL, *path = NULL;
    if (!a)
        goto oom;
    pthread_mutex_init(&a->mu, NULL);
    a->dir = strdup(dir);
    a->clients = n ? calloc(n, sizeof *a->clients) : NULL;
    tokdir = as_path_join(dir, "tokens");
    path = as_path_join(dir, "admin-token");
    if (!a->dir || (n && !a->clients) || !tokdir || !path)
        goto oom;
    if (mkdir(tokdir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", tokdir, strerror(errno));
        goto fail;
    }
    if (!load_or_create_token(path, a->admin, err, errlen))
        goto fail;
    for (size_t i = 0; i < n; i++) {
        struct client *c = &a->clients[a->n];
        snprintf(c->name, sizeof c->name, "%s", clients[i]);
        free(path);
        path = as_path_join(tokdir, c->name);
        if (!path)
            goto oom;
        if (!load_or_create_token(path, c->token, err, errlen))
            goto fail;
        a->n++;
    }
    free(tokdir);
    free(path);
    return a;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    free(tokdir);
    free(path);
    as_auth_free(a);
    return NULL;
}

void as_auth_free(struct as_auth *a)
{
    if (!a)
        return;
    OPENSSL_cleanse(a->admin, sizeof a->admin);
    if (a->clients)
        OPENSSL_cleanse(a->clients, a->n * sizeof *a->clients);
    free(a->clients);
    free(a->dir);
    free(a->server);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* Appends s to buf as a YAML double-quoted scalar. */
static void yaml_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

enum cred {
    CRED_TOKEN,      /* token: inline */
    CRED_TOKEN_FILE, /* tokenFile: DIR/tokens/NAME */
    CRED_CERT_DATA,  /* client-certificate-data and client-key-data */
    CRED_CERT_FILE,  /* client-certificate and client-key: DIR/certs/NAME.* */
};

/* Writes the value of a client-certificate-data or client-key-data field:
 * the file at path in base64, quoted. */
static bool yaml_file_base64(FILE *f, const char *path, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = as_read_file(path, CERT_FILE_MAX, &len);
    unsigned char *b64 = NULL;
    bool ok = false;
    if (!text) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        goto out;
    }
    b64 = malloc(4 * ((len + 2) / 3) + 1);
    if (!b64) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    int n = EVP_EncodeBlock(b64, (const unsigned char *)text, (int)len);
    fprintf(f, "\"%.*s\"", n, (const char *)b64);
    OPENSSL_cleanse(b64, (size_t)n);
    ok = true;
out:
    if (text)
        OPENSSL_cleanse(text, len);
    free(text);
    free(b64);
    return ok;
}

/* Writes the fields of a kubeconfig user entry for cred; token is only
 * used by CRED_TOKEN. */
static bool write_user(struct as_auth *a, FILE *f, const char *user, const char *token,
                       enum cred cred, char *err, size_t errlen)
{
    char *tok_path = NULL, *crt = NULL, *key = NULL;
    char rel[AS_CLIENT_MAX + 8];
    bool ok = false;
    if (cred == CRED_TOKEN) {
        fputs("    token: ", f);
        yaml_quoted(f, token);
        return true;
    }
    snprintf(rel, sizeof rel, "tokens/%s", user);
    tok_path = as_path_join(a->dir, rel);
    crt = as_certs_client_path(a->dir, user, ".crt");
    key = as_certs_client_path(a->dir, user, ".key");
    if (!tok_path || !crt || !key) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (cred == CRED_TOKEN_FILE) {
        fputs("    tokenFile: ", f);
        yaml_quoted(f, tok_path);
        ok = true;
    } else if (cred == CRED_CERT_FILE) {
        fputs("    client-certificate: ", f);
        yaml_quoted(f, crt);
        fputs("\n    client-key: ", f);
        yaml_quoted(f, key);
        ok = true;
    } else {
        fputs("    client-certificate-data: ", f);
        ok = yaml_file_base64(f, crt, err, errlen);
        fputs("\n    client-key-data: ", f);
        ok = ok && yaml_file_base64(f, key, err, errlen);
    }
out:
    free(tok_path);
    free(crt);
    free(key);
    return ok;
}

/* Writes one kubeconfig, DIR/file, for user with credentials cred. */
static bool write_kubeconfig(struct as_auth *a, const char *file, const char *user,
                             const char *token, enum cred cred, char *err, size_t errlen)
{
    char *buf = NULL, *path = NULL, *ca = NULL;
    size_t len = 0;
    bool ok = false;
    FILE *f = open_memstream(&buf, &len);
    path = as_path_join(a->dir, file);
    ca = as_path_join(a->dir, "ca.crt");
    if (!f || !path || !ca) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    fputs("# Written by leaderd-apiserver (test server, not for production).\n"
          "apiVersion: v1\nkind: Config\nclusters:\n- name: leaderd-test\n  cluster:\n"
          "    server: ",
          f);
    yaml_quoted(f, a->server);
    fputs("\n    certificate-authority: ", f);
    yaml_quoted(f, ca);
    fprintf(f, "\nusers:\n- name: %s\n  user:\n", user);
    if (!write_user(a, f, user, token, cred, err, errlen))
        goto out;
    fprintf(
        f,
        "\ncontexts:\n- name: %s@leaderd-test\n  context:\n    cluster: leaderd-test\n"
        "    user: %s\n    namespace: default\ncurrent-context: %s@leaderd-test\n"
        "preferences: {}\n",
        user, user, user);
    if (fclose(f) != 0) {
        f = NULL;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    f = NULL;
    if (as_write_file_atomic(path, buf, len, 0600) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    ok = true;
out:
    if (f)
        fclose(f);
    if (buf)
        OPENSSL_cleanse(buf, len);
    free(buf);
    free(path);
    free(ca);
    return ok;
}

/* The kubeconfigs that carry c's token, rewritten when it rotates. */
static bool write_token_kubeconfigs(struct as_auth *a, const struct client *c, char *err,
                                    size_t errlen)
{
    char file[AS_CLIENT_MAX + 32];
    snprintf(file, sizeof file, "kubeconfig-%s", c->name);
    if (!write_kubeconfig(a, file, c->name, c->token, CRED_TOKEN, err, errlen))
        return false;
    snprintf(file, sizeof file, "kubeconfig-%s-tokenfile", c->name);
    return write_kubeconfig(a, file, c->name, NULL, CRED_TOKEN_FILE, err, errlen);
}

static bool write_cert_kubeconfigs(struct as_auth *a, const struct client *c, char *err,
                                   size_t errlen)
{
    char file[AS_CLIENT_MAX + 32];
    snprintf(file, sizeof file, "kubeconfig-%s-cert", c->name);
    if (!write_kubeconfig(a, file, c->name, NULL, CRED_CERT_DATA, err, errlen))
        return false;
    snprintf(file, sizeof file, "kubeconfig-%s-certfile", c->name);
    return write_kubeconfig(a, file, c->name, NULL, CRED_CERT_FILE, err, errlen);
}

bool as_auth_set_server(struct as_auth *a, const char *server_url, char *err,
                        size_t errlen)
{
    bool ok = false;
    pthread_mutex_lock(&a->mu);
    free(a->server);
    a->server = strdup(server_url);
    if (!a->server) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (!write_kubeconfig(a, "kubeconfig-admin", AS_ADMIN, a->admin, CRED_TOKEN, err,
                          errlen))
        goto out;
    for (size_t i = 0; i < a->n; i++)
        if (!write_token_kubeconfigs(a, &a->clients[i], err, errlen) ||
            !write_cert_kubeconfigs(a, &a->clients[i], err, errlen))
            goto out;
    ok = true;
out:
    pthread_mutex_unlock(&a->mu);
    return ok;
}

static bool token_eq(const char *known, const char *given, size_t glen)
{
    size_t klen = strlen(known);
    return klen > 0 && klen == glen && CRYPTO_memcmp(known, given, glen) == 0;
}

static struct client *find_client(struct as_auth *a, const char *name)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->clients[i].name, name) == 0)
            return &a->clients[i];
    return NULL;
}

enum as_who as_auth_identify(struct as_auth *a, const char *cert_cn, const char *authz,
                             char *name, bool *valid)
{
    enum as_who who = AS_WHO_NONE;
    *valid = false;
    name[0] = '\0';
    if (cert_cn) {
        pthread_mutex_lock(&a->mu);
        bool known = find_client(a, cert_cn) != NULL;
        pthread_mutex_unlock(&a->mu);
        if (known) {
            snprintf(name, AS_CLIENT_MAX, "%s", cert_cn);
            *valid = true;
            return AS_WHO_CLIENT;
        }
    }
    if (!authz || strncasecmp(authz, "Bearer ", 7) != 0)
        return AS_WHO_NONE;
    const char *tok = authz + 7;
    while (*tok == ' ')
        tok++;
    size_t len = strlen(tok);
    while (len > 0 && tok[len - 1] == ' ')
        len--;
    if (len == 0 || len >= AS_TOKEN_MAX)
        return AS_WHO_NONE;
    int64_t now = as_mono_ms();
    pthread_mutex_lock(&a->mu);
    if (token_eq(a->admin, tok, len)) {
        snprintf(name, AS_CLIENT_MAX, "%s", AS_ADMIN);
        *valid = true;
        who = AS_WHO_ADMIN;
        goto out;
    }
    for (size_t i = 0; i < a->n; i++) {
        struct client *c = &a->clients[i];
        bool cur = token_eq(c->token, tok, len);
        bool old = token_eq(c->old_token, tok, len);
        bool retired = false;
        for (size_t k = 0; k < RETIRED_MAX && !cur && !old && !retired; k++)
            retired = token_eq(c->retired[k], tok, len);
        if (cur || old || retired) {
            if (cur)
                c->uses_current++;
            else
                c->uses_stale++;
            snprintf(name, AS_CLIENT_MAX, "%s", c->name);
            *valid = cur || (old && now < c->old_until_ms);
            who = AS_WHO_CLIENT;
            goto out;
        }
    }
out:
    pthread_mutex_unlock(&a->mu);
    return who;
}

static void retire(struct client *c, const char *token)
{
    if (!token[0])
        return;
    snprintf(c->retired[c->retired_next], AS_TOKEN_MAX, "%s", token);
    c->retired_next = (c->retired_next + 1) % RETIRED_MAX;
}

bool as_auth_rotate(struct as_auth *a, const char *client, int64_t grace_ms,
                    char *token_out, char *err, size_t errlen)
{
    bool ok = false;
    char fresh[AS_TOKEN_MAX];
    char *path = NULL;
    pthread_mutex_lock(&a->mu);
    struct client *c = find_client(a, client);
    if (!c) {
        snprintf(err, errlen, "unknown client %s", client);
        goto out;
    }
    char rel[AS_CLIENT_MAX + 8];
    snprintf(rel, sizeof rel, "tokens/%s", c->name);
    path = as_path_join(a->dir, rel);
    if (!path || !as_random_hex(TOKEN_BYTES, fresh)) {
        snprintf(err, errlen, "out of memory or randomness");
        goto out;
    }
    if (as_write_file_atomic(path, fresh, strlen(fresh), 0600) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    retire(c, c->old_token);
    snprintf(c->old_token, AS_TOKEN_MAX, "%s", c->token);
    c->old_until_ms = as_mono_ms() + grace_ms;
    snprintf(c->token, AS_TOKEN_MAX, "%s", fresh);
    if (a->server && !write_token_kubeconfigs(a, c, err, errlen))
        goto out;
    snprintf(token_out, AS_TOKEN_MAX, "%s", fresh);
    ok = true;
out:
    pthread_mutex_unlock(&a->mu);
    free(path);
    return ok;
}

bool as_auth_revoke(struct as_auth *a, const char *client)
{
    pthread_mutex_lock(&a->mu);
    struct client *c = find_client(a, client);
    if (c) {
        retire(c, c->old_token);
        retire(c, c->token);
        c->old_token[0] = '\0';
        c->token[0] = '\0';
    }
    pthread_mutex_unlock(&a->mu);
    return c != NULL;
}

bool as_auth_revoke_previous(struct as_auth *a, const char *client)
{
    pthread_mutex_lock(&a->mu);
    struct client *c = find_client(a, client);
    if (c) {
        /* Retired rather than forgotten: it is still recognised as c's, so
         * its 401s are counted against c. */
        retire(c, c->old_token);
        c->old_token[0] = '\0';
        c->old_until_ms = 0;
    }
    pthread_mutex_unlock(&a->mu);
    return c != NULL;
}

json_t *as_auth_uses_json(struct as_auth *a)
{
    json_t *out = json_object();
    if (!out)
        return NULL;
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->n; i++) {
        const struct client *c = &a->clients[i];
        json_t *one = json_pack("{s:I,s:I}", "current", (json_int_t)c->uses_current,
                                "stale", (json_int_t)c->uses_stale);
        if (!one || json_object_set_new(out, c->name, one) != 0) {
            json_decref(out);
            out = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&a->mu);
    return out;
}
