/*
 * kube: the Lease REST client. One curl easy handle driven through a multi
 * handle so a request can also wake on the caller's cancel fd; the multi
 * handle owns the connection cache, so the connection survives between
 * requests (keep-alive).
 */
#include "kube.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "dnsname.h"
#include "log.h"

#ifndef LEADERD_VERSION
#error "LEADERD_VERSION must be defined by the build"
#endif

#define UA_BASE "leaderd/" LEADERD_VERSION " (leader-election)"
#define DEFAULT_TIMEOUT_MS 5000
#define MAX_TIMEOUT_MS (3600 * 1000)
#define CONNECT_CAP_MS 3000
/* The token file is stat()ed before every request and re-read when it
 * changed; this period (client-go's cached file token source: 1 min, 10 s
 * early) still re-reads it for what the stat cannot see: a rewrite in place
 * that keeps size and mtime (one timestamp tick), a permission fix (only
 * ctime moves), and it paces the warning about a file that stays missing. */
#define TOKEN_REFRESH_NS (50LL * 1000000000LL)
#define TOKEN_MAX (64 * 1024)
#define BODY_INITIAL (16 * 1024)
/* A Lease is a few hundred bytes; a buffer grown past this by an odd response
 * (an error page, a hostile object) is given back once the response is handled
 * rather than kept for the life of the process. */
#define BODY_KEEP (64 * 1024)
/* Largest Retry-After honoured; anything longer is a broken header. */
#define RETRY_AFTER_MAX_S (24 * 3600)
/* curl enforces the request timeout; this only bounds our loop if it did not. */
#define LOOP_GRACE_MS 2000

/* The watch runs on a connection of its own, so a long-lived stream never
 * delays a renewal and a renewal never waits behind a stream. */
struct watch_conn {
    CURL *easy;
    CURLM *multi;
    bool running;
    struct curl_slist *hdrs;
    char *path; /* for messages */
    int64_t started_ns;
    long status;   /* HTTP status once known, else 0 */
    char *errbody; /* body of a non-200 answer (capped) */
    size_t errlen;
    ld_kube_watch_data_fn fn; /* valid during ld_kube_watch_wait only */
    void *ctx;
    bool delivered;
    char errbuf[CURL_ERROR_SIZE];
};

/* What stat() said about the token file when it was last read (or when
 * reading it was last attempted). stat follows symlinks, so the kubelet's
 * swap of the ..data link shows as a new inode. */
struct token_stamp {
    int err; /* errno of a failed stat, else 0 */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

struct ld_kube {
    CURL *easy;
    CURLM *multi;
    struct watch_conn watch;
    char *base; /* scheme://host:port[/prefix], no trailing slash */
    struct curl_slist *connect_to;
    char *token; /* NULL when no bearer token is configured */
    char *token_file;
    struct token_stamp token_stamp;
    int64_t token_read_ns; /* monotonic time of the last re-read attempt */
    int64_t timeout_ms;
    int cancel_fd;
    ld_kube_observer_fn observer;
    void *observer_ctx;
    char errbuf[CURL_ERROR_SIZE];
    char *body;
    size_t body_len, body_cap;
    bool body_too_big, body_oom;
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void free_secret(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

/* True when fd is readable or hung up (a closed pipe would otherwise make
 * every poll return at once without ever showing POLLIN). */
static bool cancel_ready(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    do {
        n = poll(&p, 1, 0);
    } while (n < 0 && errno == EINTR);
    return n > 0 && p.revents != 0;
}

/* ---- bearer token ---- */

/* Reads and trims a token file. Returns LD_OK with *out new (free with
 * free_secret), or LD_ECONFIG/LD_ENOMEM with err naming the file. */
static enum ld_err token_read(const char *path, char **out, struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    char *buf = NULL;
    size_t len = 0;
    int fd = -1;

    *out = NULL;
    buf = malloc(TOKEN_MAX + 1);
    if (!buf)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    /* Re-opened by path every time: the kubelet swaps the file atomically. */
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = ld_errinfo_set(err, LD_ECONFIG, "cannot read token file %s: %s", path,
                            strerror(errno));
        goto out;
    }
    while (len <= TOKEN_MAX) {
        ssize_t n = read(fd, buf + len, TOKEN_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = ld_errinfo_set(err, LD_ECONFIG, "cannot read token file %s: %s", path,
                                strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > TOKEN_MAX) {
        rc = ld_errinfo_set(err, LD_ECONFIG, "token file %s is larger than %d bytes",
                            path, TOKEN_MAX);
        goto out;
    }
    size_t start = 0;
    while (start < len && (buf[start] == ' ' || buf[start] == '\t' ||
                           buf[start] == '\r' || buf[start] == '\n'))
        start++;
    while (len > start && (buf[len - 1] == ' ' || buf[len - 1] == '\t' ||
                           buf[len - 1] == '\r' || buf[len - 1] == '\n'))
        len--;
    if (len == start) {
        rc = ld_errinfo_set(err, LD_ECONFIG, "token file %s is empty", path);
        goto out;
    }
    for (size_t i = start; i < len; i++) {
        unsigned char ch = (unsigned char)buf[i];
        if (ch < 0x20 || ch == 0x7f) {
            rc = ld_errinfo_set(err, LD_ECONFIG,
                                "token file %s contains control characters", path);
            goto out;
        }
    }
    *out = strndup(buf + start, len - start);
    if (!*out)
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
out:
    explicit_bzero(buf, TOKEN_MAX + 1);
    free(buf);
    if (fd >= 0)
        close(fd);
    return rc;
}

static void token_stamp_take(const char *path, struct token_stamp *out)
{
    struct stat st;
    memset(out, 0, sizeof(*out));
    if (stat(path, &st) != 0) {
        out->err = errno ? errno : EIO;
        return;
    }
    out->dev = st.st_dev;
    out->ino = st.st_ino;
    out->size = st.st_size;
    out->mtime = st.st_mtim;
}

static bool token_stamp_same(const struct token_stamp *a, const struct token_stamp *b)
{
    if (a->err || b->err)
        return a->err == b->err;
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Re-reads the token file when its stat changed, when the period is due, or
 * when force (after a 401). Returns true when the token changed. A file that
 * vanished or cannot be read keeps the previous token, as client-go does;
 * the warning comes when that starts and then once a period, not on every
 * request. */
static bool token_refresh(struct ld_kube *k, bool force)
{
    if (!k->token_file)
        return false;
    int64_t now = mono_ns();
    struct token_stamp st;
    token_stamp_take(k->token_file, &st);
    if (!force && now - k->token_read_ns < TOKEN_REFRESH_NS &&
        token_stamp_same(&st, &k->token_stamp))
        return false;
    k->token_read_ns = now;
    k->token_stamp = st;
    if (st.err) {
        ld_log(LD_LOG_WARN, "cannot read token file %s: %s; keeping the previous token",
               k->token_file, strerror(st.err));
        return false;
    }
    struct ld_errinfo e;
    ld_errinfo_clear(&e);
    char *t = NULL;
    if (token_read(k->token_file, &t, &e) != LD_OK || !t) {
        ld_log(LD_LOG_WARN, "%s; keeping the previous token", e.msg);
        return false;
    }
    bool changed = !k->token || strcmp(t, k->token) != 0;
    free_secret(k->token);
    k->token = t;
    if (changed)
        ld_log(LD_LOG_INFO, "token file %s holds a new token; using it", k->token_file);
    return changed;
}

/* ---- creation ---- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    struct ld_kube *k = ud;
    size_t n = size * nmemb;

    if (n > LD_KUBE_MAX_BODY - k->body_len) {
        k->body_too_big = true;
        return 0;
    }
    if (k->body_len + n + 1 > k->body_cap) {
        size_t cap = k->body_cap ? k->body_cap : BODY_INITIAL;
        while (cap < k->body_len + n + 1)
            cap *= 2;
        if (cap > LD_KUBE_MAX_BODY + 1)
            cap = LD_KUBE_MAX_BODY + 1;
        char *nb = realloc(k->body, cap);
        if (!nb) {
            k->body_oom = true;
            return 0;
        }
        k->body = nb;
        k->body_cap = cap;
    }
    memcpy(k->body + k->body_len, data, n);
    k->body_len += n;
    k->body[k->body_len] = '\0';
    return n;
}

static void release_large_body(struct ld_kube *k)
{
    if (k->body_cap <= BODY_KEEP)
        return;
    free(k->body);
    k->body = NULL;
    k->body_cap = 0;
    k->body_len = 0;
}

static bool host_name_ok(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > 253)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* Sets k->base from cfg->server, and for tls_server_name points the URL at
 * that name while CURLOPT_CONNECT_TO sends the connection to the real
 * address: curl then uses the name for SNI and certificate checks (and, as
 * a side effect, in the Host header, which the API server ignores). */
static enum ld_err setup_url(struct ld_kube *k, const struct ld_kube_config *cfg,
                             struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *url = NULL, *extra = NULL;
    char *ct = NULL;

    if (!u)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    if (curl_url_set(u, CURLUPART_URL, cfg->server, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
        rc = ld_errinfo_set(err, LD_ECONFIG, "server %s is not a valid URL", cfg->server);
        goto out;
    }
    bool https = strcmp(scheme, "https") == 0;
    if (!https && strcmp(scheme, "http") != 0) {
        rc = ld_errinfo_set(err, LD_ECONFIG, "server %s: scheme must be https or http",
                            cfg->server);
        goto out;
    }
    if (curl_url_get(u, CURLUPART_QUERY, &extra, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_FRAGMENT, &extra, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_USER, &extra, 0) == CURLUE_OK) {
        rc = ld_errinfo_set(err, LD_ECONFIG,
                            "server %s must not contain a query, fragment or user",
                            cfg->server);
        goto out;
    }
    if (https && cfg->tls_server_name && cfg->tls_server_name[0]) {
        if (!host_name_ok(cfg->tls_server_name)) {
            rc = ld_errinfo_set(err, LD_ECONFIG,
                                "tls-server-name %.100s is not a host name",
                                cfg->tls_server_name);
            goto out;
        }
        if (asprintf(&ct, "%s:%s:%s:%s", cfg->tls_server_name, port, host, port) < 0) {
            ct = NULL;
            rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
            goto out;
        }
        k->connect_to = curl_slist_append(NULL, ct);
        if (!k->connect_to ||
            curl_url_set(u, CURLUPART_HOST, cfg->tls_server_name, 0) != CURLUE_OK) {
            rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
            goto out;
        }
    }
    if (curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK) {
        rc = ld_errinfo_set(err, LD_ECONFIG, "server %s is not a valid URL", cfg->server);
        goto out;
    }
    size_t len = strlen(url);
    while (len > 0 && url[len - 1] == '/')
        len--;
    k->base = strndup(url, len);
    if (!k->base)
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
out:
    free(ct);
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(url);
    curl_free(extra);
    curl_url_cleanup(u);
    return rc;
}

static enum ld_err check_readable(const char *path, const char *what,
                                  struct ld_errinfo *err)
{
    if (access(path, R_OK) != 0)
        return ld_errinfo_set(err, LD_ECONFIG, "%s %s is not readable: %s", what, path,
                              strerror(errno));
    return LD_OK;
}

static enum ld_err setup_tls(struct ld_kube *k, CURL *e, const struct ld_kube_config *cfg,
                             struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    CURLcode c = CURLE_OK;

#define TLSOPT(opt, val)                                                                 \
    do {                                                                                 \
        if ((c = curl_easy_setopt(e, opt, val)) != CURLE_OK)                             \
            goto fail;                                                                   \
    } while (0)

    TLSOPT(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (cfg->insecure_skip_tls_verify) {
        TLSOPT(CURLOPT_SSL_VERIFYPEER, 0L);
        TLSOPT(CURLOPT_SSL_VERIFYHOST, 0L);
        if (e == k->easy)
            ld_log(LD_LOG_WARN,
                   "TLS certificate verification for %s is disabled "
                   "(insecure-skip-tls-verify)",
                   cfg->server);
    } else {
        TLSOPT(CURLOPT_SSL_VERIFYPEER, 1L);
        TLSOPT(CURLOPT_SSL_VERIFYHOST, 2L);
    }
    /* A configured CA replaces the system bundle, as in client-go. */
    if (cfg->ca_data && cfg->ca_data[0]) {
        struct curl_blob b = {
            .data = cfg->ca_data, .len = strlen(cfg->ca_data), .flags = CURL_BLOB_COPY};
        TLSOPT(CURLOPT_CAINFO_BLOB, &b);
        TLSOPT(CURLOPT_CAINFO, (char *)NULL);
        TLSOPT(CURLOPT_CAPATH, (char *)NULL);
    } else if (cfg->ca_file && cfg->ca_file[0]) {
        if ((rc = check_readable(cfg->ca_file, "CA file", err)))
            goto out;
        TLSOPT(CURLOPT_CAINFO, cfg->ca_file);
        TLSOPT(CURLOPT_CAPATH, (char *)NULL);
    }
    if (cfg->client_cert_data && cfg->client_cert_data[0]) {
        struct curl_blob b = {.data = cfg->client_cert_data,
                              .len = strlen(cfg->client_cert_data),
                              .flags = CURL_BLOB_COPY};
        TLSOPT(CURLOPT_SSLCERT_BLOB, &b);
        TLSOPT(CURLOPT_SSLCERTTYPE, "PEM");
    } else if (cfg->client_cert_file && cfg->client_cert_file[0]) {
        if ((rc = check_readable(cfg->client_cert_file, "client certificate", err)))
            goto out;
        TLSOPT(CURLOPT_SSLCERT, cfg->client_cert_file);
        TLSOPT(CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (cfg->client_key_data && cfg->client_key_data[0]) {
        struct curl_blob b = {.data = cfg->client_key_data,
                              .len = strlen(cfg->client_key_data),
                              .flags = CURL_BLOB_COPY};
        TLSOPT(CURLOPT_SSLKEY_BLOB, &b);
        TLSOPT(CURLOPT_SSLKEYTYPE, "PEM");
    } else if (cfg->client_key_file && cfg->client_key_file[0]) {
        if ((rc = check_readable(cfg->client_key_file, "client key", err)))
            goto out;
        TLSOPT(CURLOPT_SSLKEY, cfg->client_key_file);
        TLSOPT(CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (k->connect_to)
        TLSOPT(CURLOPT_CONNECT_TO, k->connect_to);
#undef TLSOPT
out:
    return rc;
fail:
    return ld_errinfo_set(err, c == CURLE_OUT_OF_MEMORY ? LD_ENOMEM : LD_ECONFIG,
                          "libcurl rejected a TLS option: %s", curl_easy_strerror(c));
}

static size_t on_watch_data(char *data, size_t size, size_t nmemb, void *ud);

/* Options shared by the request and the watch handle. */
static enum ld_err setup_easy(struct ld_kube *k, CURL *e,
                              const struct ld_kube_config *cfg, struct ld_errinfo *err)
{
    CURLcode c;
    bool watch = e == k->watch.easy;

#define SETOPT(opt, val)                                                                 \
    do {                                                                                 \
        if ((c = curl_easy_setopt(e, opt, val)) != CURLE_OK)                             \
            goto curl_fail;                                                              \
    } while (0)

    SETOPT(CURLOPT_NOSIGNAL, 1L);
    SETOPT(CURLOPT_ERRORBUFFER, watch ? k->watch.errbuf : k->errbuf);
    SETOPT(CURLOPT_WRITEFUNCTION, watch ? on_watch_data : on_body);
    SETOPT(CURLOPT_WRITEDATA, k);
    SETOPT(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    /* lib/ never reads the environment, so neither may curl's proxy lookup. */
    SETOPT(CURLOPT_PROXY, "");
    SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
    SETOPT(CURLOPT_TCP_KEEPIDLE, 30L);
    SETOPT(CURLOPT_TCP_KEEPINTVL, 10L);
    SETOPT(CURLOPT_USERAGENT, UA_BASE);
#undef SETOPT
    return setup_tls(k, e, cfg, err);

curl_fail:
    return ld_errinfo_set(err, c == CURLE_OUT_OF_MEMORY ? LD_ENOMEM : LD_ECONFIG,
                          "libcurl rejected an option: %s", curl_easy_strerror(c));
}

struct ld_kube *ld_kube_new(const struct ld_kube_config *cfg, struct ld_errinfo *err)
{
    struct ld_kube *k = NULL;

    ld_errinfo_clear(err);
    if (!cfg || !cfg->server || !cfg->server[0]) {
        ld_errinfo_set(err, LD_ECONFIG, "no API server configured");
        return NULL;
    }
    k = calloc(1, sizeof(*k));
    if (!k)
        goto oom;
    k->cancel_fd = -1;
    k->timeout_ms = DEFAULT_TIMEOUT_MS;
    if (setup_url(k, cfg, err))
        goto fail;
    if (cfg->token_file && cfg->token_file[0]) {
        k->token_file = strdup(cfg->token_file);
        if (!k->token_file)
            goto oom;
        /* Stamped before the read: a rewrite racing it then shows next time. */
        token_stamp_take(k->token_file, &k->token_stamp);
        if (token_read(k->token_file, &k->token, err))
            goto fail;
        k->token_read_ns = mono_ns();
    } else if (cfg->token && cfg->token[0]) {
        for (const char *p = cfg->token; *p; p++) {
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                ld_errinfo_set(err, LD_ECONFIG, "token contains control characters");
                goto fail;
            }
        }
        k->token = strdup(cfg->token);
        if (!k->token)
            goto oom;
    }
    k->easy = curl_easy_init();
    k->multi = curl_multi_init();
    k->watch.easy = curl_easy_init();
    k->watch.multi = curl_multi_init();
    if (!k->easy || !k->multi || !k->watch.easy || !k->watch.multi)
        goto oom;
    if (setup_easy(k, k->easy, cfg, err) || setup_easy(k, k->watch.easy, cfg, err))
        goto fail;
    return k;

oom:
    ld_errinfo_set(err, LD_ENOMEM, "out of memory");
fail:
    ld_kube_free(k);
    return NULL;
}

void ld_kube_free(struct ld_kube *k)
{
    if (!k)
        return;
    ld_kube_watch_stop(k);
    if (k->watch.easy)
        curl_easy_cleanup(k->watch.easy);
    if (k->watch.multi)
        curl_multi_cleanup(k->watch.multi);
    if (k->easy)
        curl_easy_cleanup(k->easy);
    if (k->multi)
        curl_multi_cleanup(k->multi);
    curl_slist_free_all(k->connect_to);
    free(k->base);
    free_secret(k->token);
    free(k->token_file);
    free(k->body);
    free(k);
}

void ld_kube_set_timeout_ms(struct ld_kube *k, int64_t timeout_ms)
{
    if (!k)
        return;
    if (timeout_ms < 1)
        timeout_ms = 1;
    if (timeout_ms > MAX_TIMEOUT_MS)
        timeout_ms = MAX_TIMEOUT_MS;
    k->timeout_ms = timeout_ms;
}

void ld_kube_set_cancel_fd(struct ld_kube *k, int fd)
{
    if (k)
        k->cancel_fd = fd < 0 ? -1 : fd;
}

void ld_kube_set_observer(struct ld_kube *k, ld_kube_observer_fn fn, void *ctx)
{
    if (!k)
        return;
    k->observer = fn;
    k->observer_ctx = ctx;
}

void ld_kube_set_user_agent_suffix(struct ld_kube *k, const char *suffix)
{
    if (!k)
        return;
    while (suffix && *suffix == ' ')
        suffix++;
    if (!suffix || !suffix[0]) {
        curl_easy_setopt(k->easy, CURLOPT_USERAGENT, UA_BASE);
        curl_easy_setopt(k->watch.easy, CURLOPT_USERAGENT, UA_BASE);
        return;
    }
    size_t n = strlen(suffix);
    char *ua = malloc(sizeof(UA_BASE) + 1 + n);
    if (!ua) {
        ld_log(LD_LOG_WARN, "out of memory setting the User-Agent suffix");
        return;
    }
    char *p = stpcpy(ua, UA_BASE " ");
    /* Control characters would let the suffix forge header lines. */
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)suffix[i];
        if (ch >= 0x20 && ch != 0x7f)
            *p++ = (char)ch;
    }
    *p = '\0';
    curl_easy_setopt(k->easy, CURLOPT_USERAGENT, ua); /* curl copies it */
    curl_easy_setopt(k->watch.easy, CURLOPT_USERAGENT, ua);
    free(ua);
}

/* ---- requests ---- */

enum ld_err ld_kube_map_status(long http_status, const char *reason)
{
    if (http_status >= 200 && http_status < 300)
        return LD_OK;
    switch (http_status) {
    case 400:
        return LD_EBADREQUEST;
    case 401:
        return LD_EUNAUTHORIZED;
    case 403:
        return LD_EFORBIDDEN;
    case 404:
        return LD_ENOTFOUND;
    case 409:
        return reason && strcmp(reason, "AlreadyExists") == 0 ? LD_EEXISTS : LD_ECONFLICT;
    case 410:
        return LD_EGONE;
    case 422:
        return LD_EINVALID;
    case 429:
        return LD_ETOOMANY;
    default:
        break;
    }
    if (http_status >= 500 && http_status < 600)
        return LD_ESERVER;
    return LD_EHTTP;
}

static void wipe_slist(struct curl_slist *l)
{
    for (struct curl_slist *p = l; p; p = p->next)
        explicit_bzero(p->data, strlen(p->data));
    curl_slist_free_all(l);
}

static struct curl_slist *build_headers(const struct ld_kube *k, bool has_body)
{
    struct curl_slist *l = NULL, *t;
    char *auth = NULL;

    if (!(t = curl_slist_append(l, "Accept: application/json")))
        goto fail;
    l = t;
    /* Without this curl waits for a 100-continue on larger bodies. */
    if (!(t = curl_slist_append(l, "Expect:")))
        goto fail;
    l = t;
    if (has_body) {
        if (!(t = curl_slist_append(l, "Content-Type: application/json")))
            goto fail;
        l = t;
    }
    if (k->token) {
        if (asprintf(&auth, "Authorization: Bearer %s", k->token) < 0) {
            auth = NULL;
            goto fail;
        }
        t = curl_slist_append(l, auth);
        free_secret(auth);
        if (!t)
            goto fail;
        l = t;
    }
    return l;
fail:
    wipe_slist(l);
    return NULL;
}

static int64_t header_retry_after_ms(CURL *e)
{
    struct curl_header *h = NULL;
    if (curl_easy_header(e, "Retry-After", 0, CURLH_HEADER, -1, &h) != CURLHE_OK || !h ||
        !h->value)
        return -1;
    const char *v = h->value;
    while (*v == ' ' || *v == '\t')
        v++;
    char *end = NULL;
    errno = 0;
    long long s = strtoll(v, &end, 10);
    if (end == v || errno || s < 0 || s > RETRY_AFTER_MAX_S)
        return -1;
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end)
        return -1; /* an HTTP-date: API servers only send seconds */
    return (int64_t)s * 1000;
}

/* One HTTP exchange. Returns LD_OK when an HTTP answer arrived (any status,
 * in *status, body in k->body), else a transport-level code with err set. */
/* Failures before a request can have left this process: no connection, or
 * a server that failed TLS verification (nothing is sent before it). The
 * engine relies on it: only a write never sent is known not to land. */
static bool never_sent(CURLcode res)
{
    return res == CURLE_COULDNT_RESOLVE_HOST || res == CURLE_COULDNT_RESOLVE_PROXY ||
           res == CURLE_COULDNT_CONNECT || res == CURLE_PEER_FAILED_VERIFICATION;
}

static enum ld_err perform(struct ld_kube *k, const char *verb, const char *url,
                           const char *path, const char *body, long *status,
                           int64_t *retry_after_ms, struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    struct curl_slist *hdrs = NULL;
    CURLcode res = CURLE_OK;
    bool added = false, have_res = false, canceled = false, stuck = false;
    CURLMcode mc = CURLM_OK;
    CURL *e = k->easy;

    *status = 0;
    *retry_after_ms = -1;
    k->body_len = 0;
    k->body_too_big = false;
    k->body_oom = false;
    k->errbuf[0] = '\0';
    hdrs = build_headers(k, body != NULL);
    if (!hdrs) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    long to = (long)k->timeout_ms;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, to);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     to < CONNECT_CAP_MS ? to : CONNECT_CAP_MS);
    if (body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, strcmp(verb, "POST") ? verb : NULL);
    } else {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, (char *)NULL);
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }

    int64_t deadline = mono_ns() + (k->timeout_ms + LOOP_GRACE_MS) * 1000000LL;
    if ((mc = curl_multi_add_handle(k->multi, e)) != CURLM_OK)
        goto multi_fail;
    added = true;
    for (;;) {
        int running = 0;
        if ((mc = curl_multi_perform(k->multi, &running)) != CURLM_OK)
            goto multi_fail;
        if (!running)
            break;
        int64_t left_ms = (deadline - mono_ns()) / 1000000LL;
        if (left_ms <= 0) {
            stuck = true;
            break;
        }
        struct curl_waitfd w = {.fd = k->cancel_fd, .events = CURL_WAIT_POLLIN};
        if ((mc = curl_multi_poll(
                 k->multi, k->cancel_fd >= 0 ? &w : NULL, k->cancel_fd >= 0 ? 1 : 0,
                 (int)(left_ms < 1000 ? left_ms : 1000), NULL)) != CURLM_OK)
            goto multi_fail;
        if (cancel_ready(k->cancel_fd)) {
            canceled = true;
            break;
        }
    }
    if (!canceled && !stuck) {
        CURLMsg *m;
        int q = 0;
        while ((m = curl_multi_info_read(k->multi, &q))) {
            if (m->msg == CURLMSG_DONE && m->easy_handle == e) {
                res = m->data.result;
                have_res = true;
            }
        }
    }
    /* Removing a handle mid-transfer closes its connection; the next
     * request opens a new one. */
    curl_multi_remove_handle(k->multi, e);
    added = false;

    if (canceled) {
        rc = ld_errinfo_set(err, LD_ECANCELED, "%s %s: canceled", verb, path);
        goto out;
    }
    if (stuck || res == CURLE_OPERATION_TIMEDOUT) {
        rc = ld_errinfo_set(err, LD_ETIMEOUT, "%s %s: no answer within %lld ms%s%s", verb,
                            path, (long long)k->timeout_ms, k->errbuf[0] ? ": " : "",
                            k->errbuf);
        goto out;
    }
    if (!have_res) {
        rc = ld_errinfo_set(err, LD_ETRANSPORT, "%s %s: transfer ended without a result",
                            verb, path);
        goto out;
    }
    if (res == CURLE_WRITE_ERROR && k->body_too_big) {
        rc = ld_errinfo_set(err, LD_ETOOBIG, "%s %s: response body larger than %d bytes",
                            verb, path, LD_KUBE_MAX_BODY);
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
        err->http_status = *status;
        goto out;
    }
    if (res != CURLE_OK) {
        enum ld_err code = (res == CURLE_OUT_OF_MEMORY || k->body_oom) ? LD_ENOMEM
                           : never_sent(res)                           ? LD_ECONNECT
                                                                       : LD_ETRANSPORT;
        rc = ld_errinfo_set(err, code, "%s %s: %s%s%s", verb, path,
                            curl_easy_strerror(res), k->errbuf[0] ? ": " : "", k->errbuf);
        goto out;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
    if (*status < 100) {
        rc = ld_errinfo_set(err, LD_ETRANSPORT, "%s %s: no HTTP status in the response",
                            verb, path);
        goto out;
    }
    *retry_after_ms = header_retry_after_ms(e);
    goto out;

multi_fail:
    rc = ld_errinfo_set(err, mc == CURLM_OUT_OF_MEMORY ? LD_ENOMEM : LD_ETRANSPORT,
                        "%s %s: %s", verb, path, curl_multi_strerror(mc));
out:
    if (added)
        curl_multi_remove_handle(k->multi, e);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
    wipe_slist(hdrs);
    return rc;
}

/* Runs verb on path (relative to /apis/coordination.k8s.io/v1), retrying
 * once after a 401 if the token file changed, and turns the answer into
 * a Lease in out (LD_OK) or an error. out is only touched on LD_OK, so it
 * may alias the lease the body was encoded from. */
static enum ld_err do_request(struct ld_kube *k, const char *verb, const char *path,
                              const char *body, const char *want_name,
                              struct ld_lease *out, struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    char *url = NULL;
    long status = 0;
    int64_t retry_after_ms = -1;
    struct ld_lease tmp;

    ld_lease_init(&tmp);
    if (cancel_ready(k->cancel_fd)) {
        rc = ld_errinfo_set(err, LD_ECANCELED, "%s %s: canceled before sending", verb,
                            path);
        goto out;
    }
    token_refresh(k, false);
    /* client-go sends the client timeout so the server gives up first (504). */
    long long tos = k->timeout_ms / 1000 > 0 ? k->timeout_ms / 1000 : 1;
    if (asprintf(&url, "%s/apis/coordination.k8s.io/v1%s?timeout=%llds", k->base, path,
                 tos) < 0) {
        url = NULL;
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        int64_t t0 = mono_ns();
        rc = perform(k, verb, url, path, body, &status, &retry_after_ms, err);
        if (k->observer)
            k->observer(k->observer_ctx, verb, status, (double)(mono_ns() - t0) / 1e9);
        if (rc != LD_OK || status != 401 || attempt > 0 || !token_refresh(k, true))
            break;
        ld_log(LD_LOG_INFO, "%s %s: 401 with a rotated token file; retrying once", verb,
               path);
    }
    if (rc != LD_OK)
        goto out;

    char detail[sizeof(err->msg)];
    if (status < 200 || status >= 300) {
        ld_errinfo_set(err, LD_EHTTP, "%s", "");
        ld_status_decode(k->body, k->body_len, err);
        memcpy(detail, err->msg, sizeof(detail));
        if (detail[0])
            ld_errinfo_set(err, LD_EHTTP, "%s %s: HTTP %ld: %s", verb, path, status,
                           detail);
        else
            ld_errinfo_set(err, LD_EHTTP, "%s %s: HTTP %ld", verb, path, status);
        if (retry_after_ms >= 0)
            err->retry_after_ms = retry_after_ms;
        err->http_status = status;
        err->code = ld_kube_map_status(status, err->reason);
        rc = err->code;
        goto out;
    }
    if (k->body_len == 0) {
        rc = ld_errinfo_set(err, LD_EDECODE, "%s %s: HTTP %ld with an empty body", verb,
                            path, status);
        goto out;
    }
    enum ld_err d = ld_lease_decode(k->body, k->body_len, &tmp, err);
    if (d != LD_OK) {
        memcpy(detail, err->msg, sizeof(detail));
        rc = ld_errinfo_set(err, d == LD_ENOMEM ? LD_ENOMEM : LD_EDECODE,
                            "%s %s: HTTP %ld body is not a Lease: %.120s", verb, path,
                            status, detail);
        err->http_status = status;
        goto out;
    }
    if (!tmp.name || strcmp(tmp.name, want_name) != 0) {
        rc = ld_errinfo_set(err, LD_EDECODE, "%s %s: server returned Lease %.64s", verb,
                            path, tmp.name ? tmp.name : "(unnamed)");
        err->http_status = status;
        goto out;
    }
    ld_lease_clear(out);
    *out = tmp;
    ld_lease_init(&tmp);
    ld_errinfo_clear(err);
    err->http_status = status;
out:
    release_large_body(k);
    ld_lease_clear(&tmp);
    free(url);
    return rc;
}

static enum ld_err check_names(const char *ns, const char *name, struct ld_errinfo *err)
{
    if (!ld_dns1123_label(ns))
        return ld_errinfo_set(err, LD_EINVAL, "namespace %.64s is not a DNS-1123 label",
                              ns ? ns : "(null)");
    if (!ld_dns1123_subdomain(name))
        return ld_errinfo_set(err, LD_EINVAL,
                              "lease name %.64s is not a DNS-1123 subdomain",
                              name ? name : "(null)");
    return LD_OK;
}

enum ld_err ld_kube_lease_get(struct ld_kube *k, const char *ns, const char *name,
                              struct ld_lease *out, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    if (!err)
        err = &local; /* the code below reads fields back */
    enum ld_err rc;
    char *path = NULL;

    ld_errinfo_clear(err);
    if (!k || !out)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    if ((rc = check_names(ns, name, err)))
        return rc;
    if (asprintf(&path, "/namespaces/%s/leases/%s", ns, name) < 0)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    rc = do_request(k, "GET", path, NULL, name, out, err);
    free(path);
    return rc;
}

/* Shared by create and update: both send the encoded lease. */
static enum ld_err write_lease(struct ld_kube *k, const char *verb,
                               const struct ld_lease *lease, struct ld_lease *out,
                               struct ld_errinfo *err)
{
    enum ld_err rc;
    char *path = NULL, *body = NULL, *name = NULL;
    bool create = strcmp(verb, "POST") == 0;

    if ((rc = check_names(lease->namespace_, lease->name, err)))
        goto out;
    if (create && lease->resource_version) {
        rc = ld_errinfo_set(err, LD_EINVAL, "create: the lease has a resourceVersion");
        goto out;
    }
    /* Without a resourceVersion a PUT would overwrite whatever is stored. */
    if (!create && (!lease->resource_version || !lease->resource_version[0])) {
        rc = ld_errinfo_set(err, LD_EINVAL, "update: the lease has no resourceVersion");
        goto out;
    }
    int n = create ? asprintf(&path, "/namespaces/%s/leases", lease->namespace_)
                   : asprintf(&path, "/namespaces/%s/leases/%s", lease->namespace_,
                              lease->name);
    name = strdup(lease->name);
    if (n < 0)
        path = NULL;
    body = ld_lease_encode(lease);
    if (n < 0 || !name || !body) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    rc = do_request(k, verb, path, body, name, out, err);
out:
    free(path);
    free(body);
    free(name);
    return rc;
}

enum ld_err ld_kube_lease_create(struct ld_kube *k, const struct ld_lease *lease,
                                 struct ld_lease *out, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    if (!err)
        err = &local; /* the code below reads fields back */
    ld_errinfo_clear(err);
    if (!k || !lease || !out)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    return write_lease(k, "POST", lease, out, err);
}

enum ld_err ld_kube_lease_update(struct ld_kube *k, const struct ld_lease *lease,
                                 struct ld_lease *out, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    if (!err)
        err = &local; /* the code below reads fields back */
    ld_errinfo_clear(err);
    if (!k || !lease || !out)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    return write_lease(k, "PUT", lease, out, err);
}

/* ---- watch ---- */

/* Largest non-200 watch answer kept for its Status. */
#define WATCH_ERRBODY_MAX (64 * 1024)

static size_t on_watch_data(char *data, size_t size, size_t nmemb, void *ud)
{
    struct ld_kube *k = ud;
    struct watch_conn *w = &k->watch;
    size_t n = size * nmemb;

    if (w->status == 0)
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->status);
    if (w->status != 200) {
        size_t room = WATCH_ERRBODY_MAX - w->errlen;
        size_t take = n < room ? n : room;
        char *nb = realloc(w->errbody, w->errlen + take + 1);
        if (nb) {
            memcpy(nb + w->errlen, data, take);
            w->errlen += take;
            nb[w->errlen] = '\0';
            w->errbody = nb;
        }
        return n;
    }
    if (w->fn)
        w->fn(w->ctx, data, n);
    w->delivered = true;
    return n;
}

bool ld_kube_watch_running(const struct ld_kube *k)
{
    return k && k->watch.running;
}

void ld_kube_watch_stop(struct ld_kube *k)
{
    struct watch_conn *w = &k->watch;
    if (w->running)
        curl_multi_remove_handle(w->multi, w->easy);
    w->running = false;
    if (w->easy)
        curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
    wipe_slist(w->hdrs);
    w->hdrs = NULL;
    free(w->path);
    w->path = NULL;
    free(w->errbody);
    w->errbody = NULL;
    w->errlen = 0;
    w->status = 0;
}

enum ld_err ld_kube_watch_start(struct ld_kube *k, const char *ns, const char *name,
                                const char *resource_version, int timeout_s,
                                struct ld_errinfo *err)
{
    struct watch_conn *w = &k->watch;
    enum ld_err rc;
    char *url = NULL;
    CURLMcode mc;

    ld_errinfo_clear(err);
    ld_kube_watch_stop(k);
    if ((rc = check_names(ns, name, err)))
        return rc;
    if (resource_version) {
        for (const char *p = resource_version; *p; p++) {
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                  (*p >= 'A' && *p <= 'Z') || *p == '-' || *p == '.'))
                return ld_errinfo_set(err, LD_EINVAL, "unexpected resourceVersion");
        }
    }
    if (timeout_s < 1)
        timeout_s = 1;
    token_refresh(k, false);
    if (asprintf(&w->path, "/namespaces/%s/leases?watch=1", ns) < 0) {
        w->path = NULL;
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    }
    /* The name field selector makes RBAC's resourceNames apply to the watch. */
    int n = asprintf(&url,
                     "%s/apis/coordination.k8s.io/v1/namespaces/%s/leases?watch=1"
                     "&fieldSelector=metadata.name%%3D%s&allowWatchBookmarks=true"
                     "&timeoutSeconds=%d%s%s",
                     k->base, ns, name, timeout_s,
                     resource_version && resource_version[0] ? "&resourceVersion=" : "",
                     resource_version ? resource_version : "");
    if (n < 0) {
        url = NULL;
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    w->hdrs = build_headers(k, false);
    if (!w->hdrs) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    w->errbuf[0] = '\0';
    curl_easy_setopt(w->easy, CURLOPT_URL, url);
    curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->hdrs);
    curl_easy_setopt(w->easy, CURLOPT_HTTPGET, 1L);
    /* The server ends the stream after timeoutSeconds; the margin only
     * catches a server that never does. */
    curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, (long)(timeout_s + 30) * 1000L);
    curl_easy_setopt(w->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_CAP_MS);
    if ((mc = curl_multi_add_handle(w->multi, w->easy)) != CURLM_OK) {
        rc = ld_errinfo_set(err, mc == CURLM_OUT_OF_MEMORY ? LD_ENOMEM : LD_ETRANSPORT,
                            "watch: %s", curl_multi_strerror(mc));
        goto out;
    }
    w->running = true;
    w->started_ns = mono_ns();
out:
    free(url);
    if (rc != LD_OK)
        ld_kube_watch_stop(k);
    return rc;
}

/* The stream is over: say why, and release the handle. */
static enum ld_err watch_finished(struct ld_kube *k, CURLcode res, struct ld_errinfo *err)
{
    struct watch_conn *w = &k->watch;
    enum ld_err rc = LD_EEOF;
    long status = w->status;

    if (status == 0)
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
    if (k->observer)
        k->observer(k->observer_ctx, "WATCH", status,
                    (double)(mono_ns() - w->started_ns) / 1e9);
    if (res == CURLE_OPERATION_TIMEDOUT) {
        rc = ld_errinfo_set(err, LD_ETIMEOUT, "watch %s: %s", w->path, w->errbuf);
    } else if (res != CURLE_OK) {
        rc = ld_errinfo_set(err, LD_ETRANSPORT, "watch %s: %s%s%s", w->path,
                            curl_easy_strerror(res), w->errbuf[0] ? ": " : "", w->errbuf);
    } else if (status != 200) {
        ld_status_decode(w->errbody ? w->errbody : "", w->errlen, err);
        err->http_status = status;
        err->code = ld_kube_map_status(status, err->reason);
        if (err->code == LD_OK)
            err->code = LD_EHTTP;
        rc = err->code;
        if (status == 401)
            token_refresh(k, true);
    } else {
        rc = ld_errinfo_set(err, LD_EEOF, "watch %s: the server ended the stream",
                            w->path);
    }
    ld_kube_watch_stop(k);
    return rc;
}

enum ld_err ld_kube_watch_wait(struct ld_kube *k, int64_t wait_ms,
                               ld_kube_watch_data_fn fn, void *ctx,
                               struct ld_errinfo *err)
{
    struct watch_conn *w = &k->watch;
    enum ld_err rc = LD_OK;
    int64_t deadline = mono_ns() + (wait_ms > 0 ? wait_ms : 0) * 1000000LL;

    ld_errinfo_clear(err);
    w->fn = fn;
    w->ctx = ctx;
    w->delivered = false;
    for (;;) {
        if (w->running) {
            int running = 0;
            CURLMcode mc = curl_multi_perform(w->multi, &running);
            if (mc != CURLM_OK) {
                rc = ld_errinfo_set(err, LD_ETRANSPORT, "watch: %s",
                                    curl_multi_strerror(mc));
                ld_kube_watch_stop(k);
                break;
            }
            CURLMsg *m;
            int q = 0;
            CURLcode res = CURLE_OK;
            bool done = false;
            while ((m = curl_multi_info_read(w->multi, &q))) {
                if (m->msg == CURLMSG_DONE && m->easy_handle == w->easy) {
                    res = m->data.result;
                    done = true;
                }
            }
            if (done || !running) {
                rc = watch_finished(k, res, err);
                break;
            }
        }
        if (w->delivered || cancel_ready(k->cancel_fd)) {
            rc = w->delivered ? LD_OK : LD_ECANCELED;
            break;
        }
        int64_t left_ms = (deadline - mono_ns()) / 1000000LL;
        if (left_ms <= 0)
            break;
        int slice = (int)(left_ms < 1000 ? left_ms : 1000);
        if (w->running) {
            struct curl_waitfd cw = {.fd = k->cancel_fd, .events = CURL_WAIT_POLLIN};
            curl_multi_poll(w->multi, k->cancel_fd >= 0 ? &cw : NULL,
                            k->cancel_fd >= 0 ? 1 : 0, slice, NULL);
        } else {
            struct pollfd p = {.fd = k->cancel_fd, .events = POLLIN};
            poll(&p, k->cancel_fd >= 0 ? 1 : 0, slice);
        }
    }
    w->fn = NULL;
    w->ctx = NULL;
    return rc;
}
