/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubeconfig: in-cluster service-account config and kubeconfig files.
 * The YAML is read with libyaml's document API; only the current context's
 * cluster, user and namespace are looked at.
 */
#include "kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <yaml.h>

#include "base64.h"

/* Real kubeconfigs are a few KiB; a large cap still rejects /dev/zero. */
#define KC_MAX_FILE (4 * 1024 * 1024)
/* Service-account files: a JWT token is ~1-2 KiB, the namespace is short. */
#define SA_MAX_FILE (64 * 1024)

static void free_secret(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

void ld_kube_config_init(struct ld_kube_config *c)
{
    if (c)
        memset(c, 0, sizeof(*c));
}

void ld_kube_config_clear(struct ld_kube_config *c)
{
    if (!c)
        return;
    free(c->server);
    free(c->ca_file);
    free(c->ca_data);
    free_secret(c->token);
    free(c->token_file);
    free(c->client_cert_file);
    free(c->client_key_file);
    free(c->client_cert_data);
    free_secret(c->client_key_data);
    free(c->tls_server_name);
    free(c->namespace_);
    memset(c, 0, sizeof(*c));
}

/* Reads a whole regular file of at most max bytes into a new NUL-terminated
 * buffer. Returns 0, or an errno value (EFBIG when over max). */
static int read_small_file(const char *path, size_t max, char **out, size_t *out_len)
{
    int rc = 0;
    char *buf = NULL;
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = errno;
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = EISDIR;
        goto out;
    }
    buf = malloc(max + 1);
    if (!buf) {
        rc = ENOMEM;
        goto out;
    }
    /* Read one byte past max so an oversized file is detected even when
     * fstat cannot tell (pipes, procfs). */
    while (len <= max) {
        ssize_t n = read(fd, buf + len, max + 1 - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = errno;
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > max) {
        rc = EFBIG;
        goto out;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

static char *trim_dup(const char *s, size_t len)
{
    while (len > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n' ||
                       s[len - 1] == '\r'))
        len--;
    return strndup(s, len);
}

static char *path_join(const char *dir, const char *name)
{
    char *p = NULL;
    if (name[0] == '/' || !dir || !dir[0])
        return strdup(name);
    size_t dl = strlen(dir);
    const char *sep = dir[dl - 1] == '/' ? "" : "/";
    if (asprintf(&p, "%s%s%s", dir, sep, name) < 0)
        return NULL;
    return p;
}

enum ld_err ld_kube_config_incluster(struct ld_kube_config *out, const char *host,
                                     const char *port, const char *sa_dir,
                                     struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    struct ld_kube_config c;
    char *ns_path = NULL, *buf = NULL;
    size_t len = 0;

    ld_kube_config_init(&c);
    ld_kube_config_init(out);
    if (!host || !host[0]) {
        rc = ld_errinfo_set(err, LD_ECONFIG,
                            "not in a cluster: KUBERNETES_SERVICE_HOST is empty");
        goto out;
    }
    if (!port || !port[0]) {
        rc = ld_errinfo_set(err, LD_ECONFIG,
                            "not in a cluster: KUBERNETES_SERVICE_PORT is empty");
        goto out;
    }
    char *end = NULL;
    errno = 0;
    long pn = strtol(port, &end, 10);
    if (errno || *end || pn < 1 || pn > 65535 || port[0] == '+' || port[0] == '-') {
        rc = ld_errinfo_set(err, LD_ECONFIG,
                            "KUBERNETES_SERVICE_PORT %.32s is not a port", port);
        goto out;
    }
    for (const char *p = host; *p; p++) {
        if ((unsigned char)*p <= ' ' || *p == '/' || *p == '@' || *p == '[' ||
            *p == ']' || *p == '?' || *p == '#' || (unsigned char)*p >= 0x7f) {
            rc = ld_errinfo_set(err, LD_ECONFIG,
                                "KUBERNETES_SERVICE_HOST has an invalid character");
            goto out;
        }
    }
    /* net.JoinHostPort: a colon means an IPv6 literal, which URLs bracket. */
    int n = strchr(host, ':') ? asprintf(&c.server, "https://[%s]:%ld", host, pn)
                              : asprintf(&c.server, "https://%s:%ld", host, pn);
    if (n < 0) {
        c.server = NULL;
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    if (!sa_dir || !sa_dir[0])
        sa_dir = LD_SA_DIR;
    c.ca_file = path_join(sa_dir, "ca.crt");
    c.token_file = path_join(sa_dir, "token");
    ns_path = path_join(sa_dir, "namespace");
    if (!c.ca_file || !c.token_file || !ns_path) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    int e = read_small_file(c.token_file, SA_MAX_FILE, &buf, &len);
    if (e) {
        rc = ld_errinfo_set(err, LD_ECONFIG,
                            "service-account token %s is not readable: %s", c.token_file,
                            strerror(e));
        goto out;
    }
    free_secret(buf);
    buf = NULL;
    /* The namespace is optional: callers fall back to POD_NAMESPACE or a flag. */
    if (read_small_file(ns_path, SA_MAX_FILE, &buf, &len) == 0) {
        char *ns = trim_dup(buf, len);
        if (!ns) {
            rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
            goto out;
        }
        if (ns[0])
            c.namespace_ = ns;
        else
            free(ns);
    }
    *out = c;
    ld_kube_config_init(&c);
out:
    free(buf);
    free(ns_path);
    ld_kube_config_clear(&c);
    return rc;
}

/* ---- kubeconfig YAML ---- */

struct kc {
    yaml_document_t *doc;
    const char *base_dir;
    struct ld_errinfo *err;
};

static bool scalar_is(const yaml_node_t *n, const char *s)
{
    size_t l = strlen(s);
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == l &&
           memcmp(n->data.scalar.value, s, l) == 0;
}

/* A plain scalar spelled as YAML null counts as absent. */
static bool is_null(const yaml_node_t *n)
{
    if (!n)
        return true;
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    return n->data.scalar.length == 0 || scalar_is(n, "~") || scalar_is(n, "null") ||
           scalar_is(n, "Null") || scalar_is(n, "NULL");
}

static yaml_node_t *map_get(struct kc *k, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
         p < map->data.mapping.pairs.top; p++) {
        if (scalar_is(yaml_document_get_node(k->doc, p->key), key))
            return yaml_document_get_node(k->doc, p->value);
    }
    return NULL;
}

/* Copies the string at map[key] into *out (NULL when absent or null).
 * what names the place for the error message. */
static enum ld_err get_str(struct kc *k, yaml_node_t *map, const char *key,
                           const char *what, char **out)
{
    *out = NULL;
    yaml_node_t *n = map_get(k, map, key);
    if (is_null(n))
        return LD_OK;
    if (n->type != YAML_SCALAR_NODE)
        return ld_errinfo_set(k->err, LD_EDECODE, "%s: %s is not a string", what, key);
    const char *v = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    if (memchr(v, '\0', len))
        return ld_errinfo_set(k->err, LD_EDECODE, "%s: %s contains a NUL byte", what,
                              key);
    *out = strndup(v, len);
    if (!*out)
        return ld_errinfo_set(k->err, LD_ENOMEM, "out of memory");
    return LD_OK;
}

static enum ld_err get_bool(struct kc *k, yaml_node_t *map, const char *key,
                            const char *what, bool *out)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
                                      "YES",  "on",   "On",   "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No",
                                     "NO",    "off",   "Off",   "OFF"};
    *out = false;
    yaml_node_t *n = map_get(k, map, key);
    if (is_null(n))
        return LD_OK;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (scalar_is(n, yes[i])) {
            *out = true;
            return LD_OK;
        }
        if (scalar_is(n, no[i]))
            return LD_OK;
    }
    return ld_errinfo_set(k->err, LD_EDECODE, "%s: %s is not a boolean", what, key);
}

/* A path field: resolved against the kubeconfig's directory. */
static enum ld_err get_path(struct kc *k, yaml_node_t *map, const char *key,
                            const char *what, char **out)
{
    char *raw = NULL;
    enum ld_err rc = get_str(k, map, key, what, &raw);
    if (rc || !raw)
        return rc;
    if (!raw[0]) {
        free(raw);
        return LD_OK;
    }
    *out = path_join(k->base_dir, raw);
    free(raw);
    if (!*out)
        return ld_errinfo_set(k->err, LD_ENOMEM, "out of memory");
    return LD_OK;
}

/* A *-data field: standard base64 (line breaks ignored, as Go's decoder
 * does), decoded to PEM text. */
static enum ld_err get_data(struct kc *k, yaml_node_t *map, const char *key,
                            const char *what, char **out)
{
    enum ld_err rc = LD_OK;
    char *raw = NULL, *clean = NULL;
    unsigned char *dec = NULL;
    size_t rl = 0, n = 0;

    *out = NULL;
    rc = get_str(k, map, key, what, &raw);
    if (rc || !raw)
        goto out;
    rl = strlen(raw);
    clean = malloc(rl + 1);
    if (!clean) {
        rc = ld_errinfo_set(k->err, LD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < rl; i++) {
        if (raw[i] != '\n' && raw[i] != '\r')
            clean[n++] = raw[i];
    }
    clean[n] = '\0';
    if (n == 0)
        goto out;
    size_t bad = 0;
    long want = ld_base64_decoded_len(clean, n, &bad);
    if (want < 0 || n > INT_MAX) {
        rc = ld_errinfo_set(k->err, LD_EDECODE, "%s: %s is not valid base64", what, key);
        goto out;
    }
    dec = malloc(n / 4 * 3 + 1);
    if (!dec) {
        rc = ld_errinfo_set(k->err, LD_ENOMEM, "out of memory");
        goto out;
    }
    /* EVP_DecodeBlock counts '=' padding as zero bytes in its result. */
    int dl = EVP_DecodeBlock(dec, (const unsigned char *)clean, (int)n);
    if (dl < 0 || dl < want) {
        rc = ld_errinfo_set(k->err, LD_EDECODE, "%s: %s is not valid base64", what, key);
        goto out;
    }
    size_t len = (size_t)want;
    if (len == 0 || memchr(dec, '\0', len)) {
        rc = ld_errinfo_set(k->err, LD_EDECODE, "%s: %s does not decode to PEM text",
                            what, key);
        goto out;
    }
    dec[len] = '\0';
    *out = (char *)dec;
    dec = NULL;
out:
    if (dec) {
        explicit_bzero(dec, n / 4 * 3 + 1);
        free(dec);
    }
    if (clean) {
        explicit_bzero(clean, strlen(clean));
        free(clean);
    }
    free_secret(raw);
    return rc;
}

/* Finds the entry of list key ("clusters") named name. Returns LD_OK and
 * sets *found and *inner (entry[inner_key], NULL when absent or null). */
static enum ld_err find_named(struct kc *k, yaml_node_t *root, const char *key,
                              const char *inner_key, const char *name, bool *found,
                              yaml_node_t **inner)
{
    *found = false;
    *inner = NULL;
    yaml_node_t *list = map_get(k, root, key);
    if (is_null(list))
        return LD_OK;
    if (list->type != YAML_SEQUENCE_NODE)
        return ld_errinfo_set(k->err, LD_EDECODE, "kubeconfig: %s is not a list", key);
    for (yaml_node_item_t *it = list->data.sequence.items.start;
         it < list->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(k->doc, *it);
        if (!scalar_is(map_get(k, e, "name"), name))
            continue;
        yaml_node_t *v = map_get(k, e, inner_key);
        *found = true;
        if (is_null(v))
            return LD_OK;
        if (v->type != YAML_MAPPING_NODE)
            return ld_errinfo_set(k->err, LD_EDECODE,
                                  "kubeconfig: %s %s: %s is not a mapping", inner_key,
                                  name, inner_key);
        *inner = v;
        return LD_OK;
    }
    return LD_OK;
}

static enum ld_err load_cluster(struct kc *k, yaml_node_t *cl, const char *name,
                                struct ld_kube_config *c)
{
    enum ld_err rc;
    char what[160];
    snprintf(what, sizeof(what), "cluster %s", name);

    if ((rc = get_str(k, cl, "server", what, &c->server)))
        return rc;
    if (!c->server || !c->server[0])
        return ld_errinfo_set(k->err, LD_ECONFIG, "cluster %s has no server", name);
    /* http:// is accepted for loopback test servers; kubectl allows it too. */
    if (strncmp(c->server, "https://", 8) != 0 && strncmp(c->server, "http://", 7) != 0)
        return ld_errinfo_set(k->err, LD_ECONFIG,
                              "cluster %s: server must start with https:// or http://",
                              name);
    for (const char *p = c->server; *p; p++) {
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            return ld_errinfo_set(k->err, LD_ECONFIG,
                                  "cluster %s: server contains whitespace or control "
                                  "characters",
                                  name);
    }
    /* "https://" and "https:///path" name no host; trimming their slashes
     * below would leave "https:", which no longer even looks like a URL. */
    const char *host = strstr(c->server, "://") + 3;
    if (*host == '\0' || *host == '/')
        return ld_errinfo_set(k->err, LD_ECONFIG, "cluster %s: server has no host", name);
    size_t sl = strlen(c->server);
    while (sl > 0 && c->server[sl - 1] == '/')
        c->server[--sl] = '\0';
    if ((rc = get_data(k, cl, "certificate-authority-data", what, &c->ca_data)))
        return rc;
    /* As in client-go, inline data wins over a file. */
    if (!c->ca_data && (rc = get_path(k, cl, "certificate-authority", what, &c->ca_file)))
        return rc;
    if ((rc = get_bool(k, cl, "insecure-skip-tls-verify", what,
                       &c->insecure_skip_tls_verify)))
        return rc;
    if ((rc = get_str(k, cl, "tls-server-name", what, &c->tls_server_name)))
        return rc;
    if (c->tls_server_name && !c->tls_server_name[0]) {
        free(c->tls_server_name);
        c->tls_server_name = NULL;
    }
    if (c->insecure_skip_tls_verify && (c->ca_data || c->ca_file))
        return ld_errinfo_set(k->err, LD_ECONFIG,
                              "cluster %s: certificate-authority and "
                              "insecure-skip-tls-verify are mutually exclusive",
                              name);
    return LD_OK;
}

static enum ld_err load_user(struct kc *k, yaml_node_t *u, const char *name,
                             struct ld_kube_config *c)
{
    enum ld_err rc;
    char what[160];
    snprintf(what, sizeof(what), "user %s", name);

    if (!is_null(map_get(k, u, "exec")))
        return ld_errinfo_set(k->err, LD_ECONFIG,
                              "user %s uses an exec credential plugin, which is not "
                              "supported; use a token, tokenFile or client certificate",
                              name);
    if (!is_null(map_get(k, u, "auth-provider")))
        return ld_errinfo_set(
            k->err, LD_ECONFIG,
            "user %s uses an auth-provider, which is not supported; use "
            "a token, tokenFile or client certificate",
            name);
    if (!is_null(map_get(k, u, "username")) || !is_null(map_get(k, u, "password")))
        return ld_errinfo_set(k->err, LD_ECONFIG,
                              "user %s uses basic auth (username/password), which is not "
                              "supported",
                              name);
    if ((rc = get_str(k, u, "token", what, &c->token)))
        return rc;
    if (c->token && !c->token[0]) {
        free(c->token);
        c->token = NULL;
    }
    if ((rc = get_path(k, u, "tokenFile", what, &c->token_file)))
        return rc;
    if ((rc = get_data(k, u, "client-certificate-data", what, &c->client_cert_data)))
        return rc;
    if (!c->client_cert_data &&
        (rc = get_path(k, u, "client-certificate", what, &c->client_cert_file)))
        return rc;
    if ((rc = get_data(k, u, "client-key-data", what, &c->client_key_data)))
        return rc;
    if (!c->client_key_data &&
        (rc = get_path(k, u, "client-key", what, &c->client_key_file)))
        return rc;
    bool has_cert = c->client_cert_data || c->client_cert_file;
    bool has_key = c->client_key_data || c->client_key_file;
    if (has_cert != has_key)
        return ld_errinfo_set(
            k->err, LD_ECONFIG, "user %s has a client %s but no client %s", name,
            has_cert ? "certificate" : "key", has_cert ? "key" : "certificate");
    if (!has_cert && !c->token && !c->token_file)
        return ld_errinfo_set(k->err, LD_ECONFIG, "no credentials for user %s", name);
    return LD_OK;
}

static enum ld_err load_doc(struct kc *k, struct ld_kube_config *c)
{
    enum ld_err rc = LD_OK;
    char *cur = NULL, *cl_name = NULL, *user_name = NULL;
    yaml_node_t *root = yaml_document_get_root_node(k->doc);

    if (!root || is_null(root)) {
        rc = ld_errinfo_set(k->err, LD_ECONFIG, "kubeconfig is empty");
        goto out;
    }
    if (root->type != YAML_MAPPING_NODE) {
        rc = ld_errinfo_set(k->err, LD_EDECODE, "kubeconfig is not a YAML mapping");
        goto out;
    }
    if ((rc = get_str(k, root, "current-context", "kubeconfig", &cur)))
        goto out;
    if (!cur || !cur[0]) {
        rc = ld_errinfo_set(k->err, LD_ECONFIG, "kubeconfig has no current-context");
        goto out;
    }
    bool found = false;
    yaml_node_t *ctx = NULL, *cl = NULL, *u = NULL;
    if ((rc = find_named(k, root, "contexts", "context", cur, &found, &ctx)))
        goto out;
    if (!found) {
        rc = ld_errinfo_set(k->err, LD_ECONFIG, "current-context %s is not in contexts",
                            cur);
        goto out;
    }
    char what[160];
    snprintf(what, sizeof(what), "context %s", cur);
    if ((rc = get_str(k, ctx, "cluster", what, &cl_name)) ||
        (rc = get_str(k, ctx, "user", what, &user_name)) ||
        (rc = get_str(k, ctx, "namespace", what, &c->namespace_)))
        goto out;
    if (c->namespace_ && !c->namespace_[0]) {
        free(c->namespace_);
        c->namespace_ = NULL;
    }
    if (!cl_name || !cl_name[0]) {
        rc = ld_errinfo_set(k->err, LD_ECONFIG, "context %s has no cluster", cur);
        goto out;
    }
    if (!user_name || !user_name[0]) {
        rc = ld_errinfo_set(k->err, LD_ECONFIG, "context %s has no user", cur);
        goto out;
    }
    if ((rc = find_named(k, root, "clusters", "cluster", cl_name, &found, &cl)))
        goto out;
    if (!found) {
        rc = ld_errinfo_set(k->err, LD_ECONFIG,
                            "cluster %s (context %s) is not in clusters", cl_name, cur);
        goto out;
    }
    if ((rc = find_named(k, root, "users", "user", user_name, &found, &u)))
        goto out;
    if (!found) {
        rc = ld_errinfo_set(k->err, LD_ECONFIG, "user %s (context %s) is not in users",
                            user_name, cur);
        goto out;
    }
    if ((rc = load_cluster(k, cl, cl_name, c)))
        goto out;
    rc = load_user(k, u, user_name, c);
out:
    free(cur);
    free(cl_name);
    free(user_name);
    return rc;
}

enum ld_err ld_kube_config_load_text(struct ld_kube_config *out, const char *text,
                                     size_t len, const char *base_dir,
                                     struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    yaml_parser_t parser;
    yaml_document_t doc;
    bool have_parser = false, have_doc = false;
    struct ld_kube_config c;

    ld_kube_config_init(&c);
    ld_kube_config_init(out);
    if (!text && len > 0)
        return ld_errinfo_set(err, LD_EINVAL, "kubeconfig text is NULL");
    if (len > KC_MAX_FILE)
        return ld_errinfo_set(err, LD_ETOOBIG, "kubeconfig is larger than %d bytes",
                              KC_MAX_FILE);
    if (!yaml_parser_initialize(&parser))
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    have_parser = true;
    yaml_parser_set_input_string(&parser, (const unsigned char *)(text ? text : ""), len);
    if (!yaml_parser_load(&parser, &doc)) {
        if (parser.error == YAML_MEMORY_ERROR)
            rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        else
            rc = ld_errinfo_set(err, LD_EDECODE,
                                "kubeconfig is not valid YAML: %s at line %zu",
                                parser.problem ? parser.problem : "parse error",
                                parser.problem_mark.line + 1);
        goto out;
    }
    have_doc = true;
    struct kc k = {.doc = &doc, .base_dir = base_dir, .err = err};
    if ((rc = load_doc(&k, &c)))
        goto out;
    *out = c;
    ld_kube_config_init(&c);
    ld_errinfo_clear(err);
out:
    if (have_doc)
        yaml_document_delete(&doc);
    if (have_parser)
        yaml_parser_delete(&parser);
    ld_kube_config_clear(&c);
    return rc;
}

enum ld_err ld_kube_config_load_file(struct ld_kube_config *out, const char *path,
                                     struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    char *buf = NULL, *dir = NULL, *abs = NULL;
    size_t len = 0;

    ld_kube_config_init(out);
    if (!path || !path[0])
        return ld_errinfo_set(err, LD_EINVAL, "no kubeconfig path");
    int e = read_small_file(path, KC_MAX_FILE, &buf, &len);
    if (e == EFBIG) {
        rc = ld_errinfo_set(err, LD_ETOOBIG, "kubeconfig %s is larger than %d bytes",
                            path, KC_MAX_FILE);
        goto out;
    }
    if (e) {
        rc = ld_errinfo_set(err, e == ENOMEM ? LD_ENOMEM : LD_EIO,
                            "cannot read kubeconfig %s: %s", path, strerror(e));
        goto out;
    }
    const char *slash = strrchr(path, '/');
    dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    /* Absolute paths keep working if the process changes directory later. */
    abs = realpath(dir, NULL);
    rc = ld_kube_config_load_text(out, buf, len, abs ? abs : dir, err);
out:
    if (buf) {
        explicit_bzero(buf, len);
        free(buf);
    }
    free(dir);
    free(abs);
    return rc;
}
