/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport_curl: transport.h over one libcurl multi handle (see
 * transport_curl.h). Each exchange gets its own easy handle, duplicated from
 * a prototype that carries the TLS, proxy and User-Agent settings; the
 * multi handle's connection cache is the pool.
 */
#include "transport_curl.h"

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
#include <openssl/ssl.h>

#include "buf.h"
#include "clock.h"
#include "log.h"

#ifndef LEADERD_VERSION
#error "LEADERD_VERSION must be defined by the build"
#endif

/* Bytes of libcurl's receive buffer per exchange (see setup_proto). */
#define RECV_BUFFER 4096L
/* Bytes of its upload buffer (the least libcurl takes). */
#define SEND_BUFFER 16384L
#define UA_BASE "leaderd/" LEADERD_VERSION " (leader-election)"
#define MAX_TIMEOUT_MS (24LL * 3600 * 1000)
#define CONNECT_CAP_MS 3000
/* curl enforces each exchange's timeout; this deadline of our own, a little
 * later, only ends one that curl somehow did not. */
#define DEADLINE_GRACE_MS 2000
/* Longest single wait inside run. The end of run and the exchanges' own
 * deadlines are enforced by a timer (clock.h), which a suspend cannot
 * stretch as it does a poll timeout; this only bounds each wait. */
#define POLL_SLICE_MS 1000
/* Why a round trip that timed out before curl had it was never sent. */
#define WAIT_EXPIRED "not sent: its time ran out before curl had it"

/* The token file is stat()ed before every request and re-read when it
 * changed; this period (client-go's cached file token source: 1 min, 10 s
 * early) still re-reads it for what the stat cannot see: a rewrite in place
 * that keeps size and mtime (one timestamp tick), a permission fix (only
 * ctime moves), and it paces the warning about a file that stays missing. */
#define TOKEN_REFRESH_NS (50LL * 1000000000LL)
#define TOKEN_MAX (64 * 1024)

/* Largest Retry-After honoured; anything longer is a broken header. */
#define RETRY_AFTER_MAX_S (24 * 3600)

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

/* One exchange: in its transport's list from submit until its done callback
 * has returned or it was canceled. A round trip waits in the list, without
 * an easy handle, until a place in curl is free for it (see add_queued);
 * the request is kept here until then. */
struct xfer {
    struct xfer *next, *prev;
    struct tcurl *owner;
    ld_http_id id;
    CURL *easy; /* NULL until handed to curl */
    struct curl_slist *hdrs;
    char *label; /* "VERB /path" without the query, for messages */
    char *url;
    char *verb;
    char *req_body; /* NULL when the request has none; freed once curl copied it */
    size_t req_body_len;
    bool stream;
    bool heartbeat; /* a round trip of LD_PRIO_HEARTBEAT */
    bool added;     /* in the multi handle */
    bool unsent;    /* its time ran out before curl had it */
    bool finished;  /* over (result says how); its callback is due */
    bool dead;      /* canceled while curl was calling us; freed after */
    CURLcode result;
    ld_http_done_fn done;
    ld_http_data_fn data;
    void *ctx;
    struct ld_buf body; /* round trip: the body; stream: a non-200 body's start */
    long status;        /* streams: known once the first bytes arrived */
    uint64_t token_gen; /* of the token the request went out with */
    int64_t started_ns, deadline_ns, timeout_ms;
    char errbuf[CURL_ERROR_SIZE];
};

struct tcurl {
    struct ld_transport iface; /* first: the ops see a struct ld_transport */
    CURLM *multi;
    CURL *proto; /* configured once; each exchange starts as a copy */
    char *base;  /* scheme://host:port[/prefix], no trailing slash */
    struct curl_slist *connect_to;
    char *token; /* NULL when no bearer token is configured */
    char *token_file;
    struct token_stamp token_stamp;
    int64_t token_read_ns; /* monotonic time of the last re-read attempt */
    uint64_t token_gen;    /* bumped whenever the token changes */
    struct xfer *head, *tail;
    ld_http_id last_id;
    /* Inside curl_multi_perform, where handles may be neither added nor
     * removed: cancel then only marks, and submit leaves the adding to run. */
    bool in_curl;
    bool ran; /* a callback ran during this run */
    /* The last answer came over HTTP/2: exchanges share a connection, so
     * more than one per connection can run (see add_queued). */
    bool multiplexed;
    struct ld_timer wait_end; /* fires when run's wait must end */
};

static void free_secret(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
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
 * when force (after a 401). Returns true when the token changed (and bumps
 * token_gen). A file that
 * vanished or cannot be read keeps the previous token, as client-go does;
 * the warning comes when that starts and then once a period, not on every
 * request. */
static bool token_refresh(struct tcurl *t, bool force)
{
    if (!t->token_file)
        return false;
    int64_t now = ld_mono_ns();
    struct token_stamp st;
    token_stamp_take(t->token_file, &st);
    if (!force && now - t->token_read_ns < TOKEN_REFRESH_NS &&
        token_stamp_same(&st, &t->token_stamp))
        return false;
    t->token_read_ns = now;
    t->token_stamp = st;
    if (st.err) {
        ld_log(LD_LOG_WARN, "cannot read token file %s: %s; keeping the previous token",
               t->token_file, strerror(st.err));
        return false;
    }
    struct ld_errinfo e;
    ld_errinfo_clear(&e);
    char *tok = NULL;
    if (token_read(t->token_file, &tok, &e) != LD_OK || !tok) {
        ld_log(LD_LOG_WARN, "%s; keeping the previous token", e.msg);
        return false;
    }
    bool changed = !t->token || strcmp(tok, t->token) != 0;
    free_secret(t->token);
    t->token = tok;
    if (changed) {
        t->token_gen++;
        ld_log(LD_LOG_INFO, "token file %s holds a new token; using it", t->token_file);
    }
    return changed;
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

/* Sets t->base from cfg->server, and for tls_server_name points the URL at
 * that name while CURLOPT_CONNECT_TO sends the connection to the real
 * address: curl then uses the name for SNI and certificate checks (and, as
 * a side effect, in the Host header, which the API server ignores). */
static enum ld_err setup_url(struct tcurl *t, const struct ld_kube_config *cfg,
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
        t->connect_to = curl_slist_append(NULL, ct);
        if (!t->connect_to ||
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
    t->base = strndup(url, len);
    if (!t->base)
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

static enum ld_err setup_tls(struct tcurl *t, CURL *e, const struct ld_kube_config *cfg,
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
    if (t->connect_to)
        TLSOPT(CURLOPT_CONNECT_TO, t->connect_to);
#undef TLSOPT
out:
    return rc;
fail:
    return ld_errinfo_set(err, c == CURLE_OUT_OF_MEMORY ? LD_ENOMEM : LD_ECONFIG,
                          "libcurl rejected a TLS option: %s", curl_easy_strerror(c));
}

/* ---- per-exchange pieces ---- */

static void wipe_slist(struct curl_slist *l)
{
    for (struct curl_slist *p = l; p; p = p->next)
        explicit_bzero(p->data, strlen(p->data));
    curl_slist_free_all(l);
}

static struct curl_slist *build_headers(const struct tcurl *t,
                                        const struct ld_http_request *req)
{
    struct curl_slist *l = NULL, *n;
    char *auth = NULL, *ctype = NULL;

    if (!(n = curl_slist_append(l, "Accept: application/json")))
        goto fail;
    l = n;
    /* Without this curl waits for a 100-continue on larger bodies. */
    if (!(n = curl_slist_append(l, "Expect:")))
        goto fail;
    l = n;
    if (req->body) {
        if (asprintf(&ctype, "Content-Type: %s",
                     req->content_type ? req->content_type : "application/json") < 0) {
            ctype = NULL;
            goto fail;
        }
        n = curl_slist_append(l, ctype);
        free(ctype);
        if (!n)
            goto fail;
        l = n;
    }
    if (t->token) {
        if (asprintf(&auth, "Authorization: Bearer %s", t->token) < 0) {
            auth = NULL;
            goto fail;
        }
        n = curl_slist_append(l, auth);
        free_secret(auth);
        if (!n)
            goto fail;
        l = n;
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

static void list_unlink(struct tcurl *t, struct xfer *x)
{
    if (t->head == x)
        t->head = x->next;
    if (t->tail == x)
        t->tail = x->prev;
    if (x->prev)
        x->prev->next = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->next = x->prev = NULL;
}

/* Frees x, which must already be out of the list. */
static void xfer_destroy(struct tcurl *t, struct xfer *x)
{
    if (x->added)
        curl_multi_remove_handle(t->multi, x->easy);
    if (x->easy)
        curl_easy_cleanup(x->easy);
    wipe_slist(x->hdrs);
    free(x->label);
    free(x->url);
    free(x->verb);
    free(x->req_body);
    ld_buf_free(&x->body);
    free(x);
}

static struct xfer *xfer_find(struct tcurl *t, ld_http_id id)
{
    for (struct xfer *x = t->head; x; x = x->next)
        if (x->id == id && !x->dead)
            return x;
    return NULL;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;

    if (x->dead)
        return 0; /* ends the transfer; run frees it */
    if (!x->stream)
        return ld_buf_append(&x->body, data, n) == LD_OK ? n : 0;
    if (x->status == 0)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->status == 200) {
        x->owner->ran = true;
        x->data(x->ctx, x->id, data, n);
        return n;
    }
    /* Only the start of an error answer is kept: its Status is small. */
    size_t room = x->body.max - x->body.len;
    ld_buf_append(&x->body, data, n < room ? n : room);
    return n;
}

/* Failures before a request can have left this process: no connection, or
 * a server that failed TLS verification (nothing is sent before it). The
 * election engine relies on it: only a write never sent is known not to
 * land. */
static bool never_sent(CURLcode res)
{
    return res == CURLE_COULDNT_RESOLVE_HOST || res == CURLE_COULDNT_RESOLVE_PROXY ||
           res == CURLE_COULDNT_CONNECT || res == CURLE_PEER_FAILED_VERIFICATION;
}

static void finish_result(struct tcurl *t, struct xfer *x, struct ld_http_result *r)
{
    long status = x->status;
    CURLcode res = x->result;

    if (status == 0 && x->easy)
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    if (res == CURLE_OK && status < 100) {
        ld_errinfo_set(&r->err, LD_ETRANSPORT, "%s: no HTTP status in the response",
                       x->label);
    } else if (res == CURLE_OK) {
        r->status = status;
        r->retry_after_ms = header_retry_after_ms(x->easy);
        long version = 0;
        if (curl_easy_getinfo(x->easy, CURLINFO_HTTP_VERSION, &version) == CURLE_OK)
            t->multiplexed = version == CURL_HTTP_VERSION_2_0;
    } else if (res == CURLE_OPERATION_TIMEDOUT && x->unsent) {
        ld_errinfo_set(&r->err, LD_ENOTSENT, "%s: %s (timeout %lld ms)", x->label,
                       WAIT_EXPIRED, (long long)x->timeout_ms);
    } else if (res == CURLE_OPERATION_TIMEDOUT) {
        ld_errinfo_set(&r->err, LD_ETIMEOUT, "%s: no answer within %lld ms%s%s", x->label,
                       (long long)x->timeout_ms, x->errbuf[0] ? ": " : "", x->errbuf);
    } else if (res == CURLE_WRITE_ERROR && x->body.err == LD_ETOOBIG) {
        ld_errinfo_set(&r->err, LD_ETOOBIG, "%s: response body larger than %d bytes",
                       x->label, LD_HTTP_MAX_BODY);
        r->status = status;
    } else {
        enum ld_err code = (res == CURLE_OUT_OF_MEMORY || x->body.err == LD_ENOMEM)
                               ? LD_ENOMEM
                           : never_sent(res) ? LD_ECONNECT
                                             : LD_ETRANSPORT;
        ld_errinfo_set(&r->err, code, "%s: %s%s%s", x->label, curl_easy_strerror(res),
                       x->errbuf[0] ? ": " : "", x->errbuf);
    }
    r->rc = r->err.code;
    r->err.http_status = r->status;
    if (r->rc == LD_OK && r->status == 401) {
        token_refresh(t, true);
        r->auth_renewed = t->token_gen != x->token_gen;
    }
    r->body = x->body.data;
    r->body_len = x->body.len;
    r->seconds = (double)(ld_mono_ns() - x->started_ns) / 1e9;
}

/* Reports x to its owner and frees it. x leaves the list first, so a
 * cancel of its id from the callback is a no-op. */
static void finish(struct tcurl *t, struct xfer *x)
{
    struct ld_http_result r;

    memset(&r, 0, sizeof(r));
    ld_errinfo_clear(&r.err);
    r.retry_after_ms = -1;
    finish_result(t, x, &r);
    list_unlink(t, x);
    t->ran = true;
    x->done(x->ctx, x->id, &r);
    xfer_destroy(t, x);
}

/* Gives x its easy handle, set up from the request it kept; its timeout is
 * what is left of it after the wait in the list (at least 1 ms: add_queued
 * times out one with less). */
static CURLcode xfer_prepare(struct tcurl *t, struct xfer *x, int64_t now)
{
    CURLcode c;
    long left = (long)((x->deadline_ns - now) / 1000000);
    x->easy = curl_easy_duphandle(t->proto);
    if (!x->easy)
        return CURLE_OUT_OF_MEMORY;

#define SETOPT(opt, val)                                                                 \
    do {                                                                                 \
        if ((c = curl_easy_setopt(x->easy, opt, val)) != CURLE_OK)                       \
            return c;                                                                    \
    } while (0)

    SETOPT(CURLOPT_PRIVATE, (char *)x);
    SETOPT(CURLOPT_ERRORBUFFER, x->errbuf);
    SETOPT(CURLOPT_WRITEFUNCTION, on_write);
    SETOPT(CURLOPT_WRITEDATA, x);
    SETOPT(CURLOPT_URL, x->url);
    SETOPT(CURLOPT_HTTPHEADER, x->hdrs);
    SETOPT(CURLOPT_TIMEOUT_MS, left);
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS,
           left < CONNECT_CAP_MS ? left : (long)CONNECT_CAP_MS);
    if (x->req_body) {
        SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->req_body_len);
        SETOPT(CURLOPT_COPYPOSTFIELDS, x->req_body);
        if (strcmp(x->verb, "POST") != 0)
            SETOPT(CURLOPT_CUSTOMREQUEST, x->verb);
    } else if (strcmp(x->verb, "GET") == 0) {
        SETOPT(CURLOPT_HTTPGET, 1L);
    } else {
        SETOPT(CURLOPT_CUSTOMREQUEST, x->verb);
    }
#undef SETOPT
    /* curl holds its own copy now. */
    free(x->req_body);
    x->req_body = NULL;
    free(x->url);
    x->url = NULL;
    x->deadline_ns = x->started_ns + (x->timeout_ms + DEADLINE_GRACE_MS) * 1000000LL;
    return CURLE_OK;
}

/* Ends x, still waiting, as timed out before it was sent. */
static void expire_unsent(struct xfer *x)
{
    x->finished = true;
    x->unsent = true;
    x->result = CURLE_OPERATION_TIMEDOUT;
}

/* Gives waiting x to curl, or ends it when that fails or its time ran out
 * while it waited (the host ran late): its owner counts it timed out, so
 * it must not be sent now with curl's least timeout, which a fast server
 * could still beat. Returns whether curl has it. */
static bool hand_over(struct tcurl *t, struct xfer *x, int64_t now)
{
    if (x->deadline_ns - now < 1000000) {
        expire_unsent(x);
        return false;
    }
    CURLcode c = xfer_prepare(t, x, now);
    CURLMcode mc = c == CURLE_OK ? curl_multi_add_handle(t->multi, x->easy) : CURLM_OK;
    if (c == CURLE_OK && mc == CURLM_OK) {
        x->added = true;
        return true;
    }
    x->finished = true;
    if (c != CURLE_OK) {
        x->result = c;
        snprintf(x->errbuf, sizeof(x->errbuf), "%s", curl_easy_strerror(c));
    } else {
        x->result = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
        snprintf(x->errbuf, sizeof(x->errbuf), "%s", curl_multi_strerror(mc));
    }
    return false;
}

/* Hands waiting exchanges to curl: every stream (each holds its place for
 * its whole life), then heartbeats, then normal round trips, each in
 * submit order, while fewer round trips than the cap are in curl. A round
 * trip curl holds costs an easy handle and its buffers even while it only
 * waits for a connection, so a host of many elections would otherwise keep
 * one per election at every burst. Over HTTP/1.1 each one in curl takes a
 * connection of its own (see LD_TRANSPORT_CURL_H1_ACTIVE); over HTTP/2
 * they multiplex on one. Normal round trips stop short of the cap by
 * LD_TRANSPORT_CURL_HEARTBEAT_LANES: however many of them hang, a renewal
 * still finds a place, and over HTTP/1.1 a connection. */
static void add_queued(struct tcurl *t)
{
    size_t cap =
        t->multiplexed ? LD_TRANSPORT_CURL_MAX_ACTIVE : LD_TRANSPORT_CURL_H1_ACTIVE;
    size_t active = 0;
    for (const struct xfer *x = t->head; x; x = x->next)
        active += x->added && !x->stream && !x->finished && !x->dead;
    int64_t now = ld_mono_ns();
    for (int pass = 0; pass < 2; pass++) {
        bool urgent = pass == 0;
        size_t limit = urgent ? cap : cap - LD_TRANSPORT_CURL_HEARTBEAT_LANES;
        for (struct xfer *x = t->head; x; x = x->next) {
            if (x->added || x->finished || x->dead ||
                (x->stream || x->heartbeat) != urgent)
                continue;
            if (!x->stream && active >= limit)
                continue;
            if (hand_over(t, x, now))
                active += !x->stream;
        }
    }
}

static void reap_dead(struct tcurl *t)
{
    struct xfer *x = t->head;
    while (x) {
        struct xfer *next = x->next;
        if (x->dead) {
            list_unlink(t, x);
            xfer_destroy(t, x);
        }
        x = next;
    }
}

/* The multi handle failed as a whole: every exchange in it is over. */
static void fail_all(struct tcurl *t, CURLMcode mc)
{
    for (struct xfer *x = t->head; x; x = x->next) {
        if (!x->added || x->finished)
            continue;
        x->finished = true;
        x->result = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
        snprintf(x->errbuf, sizeof(x->errbuf), "%s", curl_multi_strerror(mc));
    }
}

static void collect_done(struct tcurl *t)
{
    CURLMsg *m;
    int queued = 0;
    while ((m = curl_multi_info_read(t->multi, &queued))) {
        struct xfer *x = NULL;
        if (m->msg != CURLMSG_DONE ||
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x) !=
                CURLE_OK ||
            !x)
            continue;
        x->finished = true;
        x->result = m->data.result;
    }
}

static void expire(struct tcurl *t, int64_t now)
{
    for (struct xfer *x = t->head; x; x = x->next) {
        if (x->finished || x->dead || now < x->deadline_ns)
            continue;
        if (!x->added) {
            expire_unsent(x);
            continue;
        }
        x->finished = true;
        x->result = CURLE_OPERATION_TIMEDOUT;
        snprintf(x->errbuf, sizeof(x->errbuf), "%s", "curl did not end it in time");
    }
}

static size_t list_len(const struct tcurl *t)
{
    size_t n = 0;
    for (const struct xfer *x = t->head; x; x = x->next)
        n += !x->dead;
    return n;
}

/* Runs the callbacks of every finished exchange. A callback may submit
 * (not finished yet) or cancel (leaves the list), so the list only shrinks
 * in finished entries and one pass per entry present at the start is
 * enough. */
static void complete_finished(struct tcurl *t)
{
    for (size_t budget = list_len(t); budget > 0; budget--) {
        struct xfer *x = t->head;
        while (x && !(x->finished && !x->dead))
            x = x->next;
        if (!x)
            break;
        finish(t, x);
    }
}

/* True when fd is readable or hung up (a closed pipe would otherwise make
 * every poll return at once without ever showing POLLIN). */
static bool wake_ready(int fd)
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

/* ---- the ops ---- */

static bool verb_ok(const char *v)
{
    if (!v || !v[0] || strlen(v) > 16)
        return false;
    for (; *v; v++)
        if (*v < 'A' || *v > 'Z')
            return false;
    return true;
}

static enum ld_err xfer_start(struct tcurl *t, const struct ld_http_request *req,
                              bool stream, ld_http_data_fn data, ld_http_done_fn done,
                              void *ctx, ld_http_id *id, struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    struct xfer *x = NULL;

    ld_errinfo_clear(err);
    if (!req || !verb_ok(req->verb) || !req->path || req->path[0] != '/' || !done ||
        (stream && !data) || (req->body_len > 0 && !req->body) || !id)
        return ld_errinfo_set(err, LD_EINVAL, "transport: bad request");
    token_refresh(t, false);
    x = calloc(1, sizeof(*x));
    if (!x)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    x->owner = t;
    x->stream = stream;
    x->heartbeat = !stream && req->priority == LD_PRIO_HEARTBEAT;
    x->data = data;
    x->done = done;
    x->ctx = ctx;
    ld_buf_init(&x->body, stream ? LD_HTTP_STREAM_ERRBODY_MAX : LD_HTTP_MAX_BODY);
    x->timeout_ms =
        req->timeout_ms > 0 ? req->timeout_ms : LD_TRANSPORT_CURL_DEFAULT_TIMEOUT_MS;
    if (x->timeout_ms > MAX_TIMEOUT_MS)
        x->timeout_ms = MAX_TIMEOUT_MS;
    x->token_gen = t->token_gen;
    x->hdrs = build_headers(t, req);
    x->verb = strdup(req->verb);
    int pathlen = (int)strcspn(req->path, "?");
    if (asprintf(&x->label, "%s %.*s", req->verb, pathlen, req->path) < 0)
        x->label = NULL;
    if (asprintf(&x->url, "%s%s", t->base, req->path) < 0)
        x->url = NULL;
    if (req->body) {
        /* One byte more: curl's COPYPOSTFIELDS reads body_len bytes, the
         * NUL only keeps an empty body a valid pointer. */
        x->req_body = malloc(req->body_len + 1);
        if (x->req_body) {
            memcpy(x->req_body, req->body, req->body_len);
            x->req_body[req->body_len] = '\0';
            x->req_body_len = req->body_len;
        }
    }
    if (!x->hdrs || !x->verb || !x->label || !x->url || (req->body && !x->req_body)) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    x->started_ns = ld_mono_ns();
    /* Until curl has it, only our own deadline can end it: the timeout. */
    x->deadline_ns = x->started_ns + x->timeout_ms * 1000000LL;
    x->id = ++t->last_id;
    x->prev = t->tail;
    if (t->tail)
        t->tail->next = x;
    else
        t->head = x;
    t->tail = x;
    *id = x->id;
    x = NULL;
out:
    if (x)
        xfer_destroy(t, x);
    return rc;
}

static enum ld_err tc_submit(struct ld_transport *base, const struct ld_http_request *req,
                             ld_http_done_fn done, void *ctx, ld_http_id *id,
                             struct ld_errinfo *err)
{
    return xfer_start((struct tcurl *)base, req, false, NULL, done, ctx, id, err);
}

static enum ld_err tc_open_stream(struct ld_transport *base,
                                  const struct ld_http_request *req, ld_http_data_fn data,
                                  ld_http_done_fn done, void *ctx, ld_http_id *id,
                                  struct ld_errinfo *err)
{
    return xfer_start((struct tcurl *)base, req, true, data, done, ctx, id, err);
}

static void tc_cancel(struct ld_transport *base, ld_http_id id)
{
    struct tcurl *t = (struct tcurl *)base;
    struct xfer *x = xfer_find(t, id);
    if (!x)
        return;
    if (t->in_curl) {
        x->dead = true;
        return;
    }
    list_unlink(t, x);
    xfer_destroy(t, x);
}

static enum ld_err tc_run(struct ld_transport *base, int64_t wait_ms, int wake_fd)
{
    struct tcurl *t = (struct tcurl *)base;
    int64_t deadline = ld_mono_ns() + (wait_ms > 0 ? wait_ms : 0) * 1000000LL;

    t->ran = false;
    for (;;) {
        add_queued(t);
        int running = 0;
        t->in_curl = true;
        CURLMcode mc = curl_multi_perform(t->multi, &running);
        t->in_curl = false;
        reap_dead(t);
        if (mc != CURLM_OK)
            fail_all(t, mc);
        collect_done(t);
        int64_t now = ld_mono_ns();
        expire(t, now);
        complete_finished(t);
        if (wake_ready(wake_fd))
            return LD_ECANCELED;
        if (t->ran || now >= deadline)
            return LD_OK;
        int64_t until = deadline;
        for (const struct xfer *x = t->head; x; x = x->next)
            if (x->deadline_ns < until)
                until = x->deadline_ns;
        /* Rounded up: woken before until, the loop would only wait again. */
        ld_timer_arm(&t->wait_end, (until + 999999) / 1000000);
        struct curl_waitfd w[2] = {{.fd = t->wait_end.fd, .events = CURL_WAIT_POLLIN},
                                   {.fd = wake_fd, .events = CURL_WAIT_POLLIN}};
        mc = curl_multi_poll(t->multi, w, wake_fd >= 0 ? 2 : 1, POLL_SLICE_MS, NULL);
        if (mc != CURLM_OK) {
            fail_all(t, mc);
            complete_finished(t);
            return wake_ready(wake_fd) ? LD_ECANCELED : LD_OK;
        }
    }
}

static size_t tc_pending(const struct ld_transport *base)
{
    return list_len((const struct tcurl *)base);
}

static void tc_free(struct ld_transport *base)
{
    struct tcurl *t = (struct tcurl *)base;
    while (t->head) {
        struct xfer *x = t->head;
        list_unlink(t, x);
        xfer_destroy(t, x);
    }
    if (t->multi)
        curl_multi_cleanup(t->multi);
    if (t->proto)
        curl_easy_cleanup(t->proto);
    curl_slist_free_all(t->connect_to);
    ld_timer_close(&t->wait_end);
    free(t->base);
    free_secret(t->token);
    free(t->token_file);
    free(t);
}

static const struct ld_transport_ops tcurl_ops = {
    .submit = tc_submit,
    .open_stream = tc_open_stream,
    .cancel = tc_cancel,
    .run = tc_run,
    .pending = tc_pending,
    .free = tc_free,
};

/* ---- creation ---- */

/* An idle TLS connection (the watch between events, the pooled one between
 * renewals) keeps no read or write buffer: OpenSSL frees them when empty and
 * takes new ones for the next record, about 34 KiB per connection given back. */
static CURLcode release_tls_buffers(CURL *easy, void *ssl_ctx, void *arg)
{
    (void)easy;
    (void)arg;
    SSL_CTX_set_mode((SSL_CTX *)ssl_ctx, SSL_MODE_RELEASE_BUFFERS);
    return CURLE_OK;
}

/* Settings every exchange shares; each one starts as a copy of these. */
static enum ld_err setup_proto(struct tcurl *t, const struct ld_kube_config *cfg,
                               struct ld_errinfo *err)
{
    CURL *e = t->proto;
    CURLcode c;

#define SETOPT(opt, val)                                                                 \
    do {                                                                                 \
        if ((c = curl_easy_setopt(e, opt, val)) != CURLE_OK)                             \
            goto curl_fail;                                                              \
    } while (0)

    SETOPT(CURLOPT_NOSIGNAL, 1L);
    /* A libcurl built without HTTP/2 (the slim one of the container image)
     * refuses the option: it then speaks HTTP/1.1, with the pool cap. */
    (void)curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* No CURLOPT_PIPEWAIT: curl learns that an HTTP/1.1 connection cannot
     * multiplex only from its first answer, so with it every exchange would
     * queue behind a held one. The price: exchanges started together before
     * the first HTTP/2 connection is up may open more (up to the cap). */
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    /* lib/ never reads the environment, so neither may curl's proxy lookup. */
    SETOPT(CURLOPT_PROXY, "");
    SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
    SETOPT(CURLOPT_TCP_KEEPIDLE, 30L);
    SETOPT(CURLOPT_TCP_KEEPINTVL, 10L);
    SETOPT(CURLOPT_USERAGENT, UA_BASE);
    /* Every exchange waiting for one of the few connections holds its
     * receive buffer, and a host of many elections starts many at once:
     * 16 KiB each by default, against answers of about 1 KiB. Bigger
     * bodies (a 1 MiB Lease, a watch) just take more reads. */
    SETOPT(CURLOPT_BUFFERSIZE, RECV_BUFFER);
    /* The same for the send side: an exchange with a body takes an upload
     * buffer of 64 KiB by default for a Lease of about 1 KiB; 16 KiB is
     * curl's least. */
    SETOPT(CURLOPT_UPLOAD_BUFFERSIZE, SEND_BUFFER);
    /* Refused by a libcurl on another TLS library: its buffers stay. */
    (void)curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, release_tls_buffers);
#undef SETOPT
    return setup_tls(t, e, cfg, err);

curl_fail:
    return ld_errinfo_set(err, c == CURLE_OUT_OF_MEMORY ? LD_ENOMEM : LD_ECONFIG,
                          "libcurl rejected an option: %s", curl_easy_strerror(c));
}

static enum ld_err setup_multi(struct tcurl *t, struct ld_errinfo *err)
{
    CURLMcode mc;
    const long conns = LD_TRANSPORT_CURL_MAX_CONNS;
    if ((mc = curl_multi_setopt(t->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX)) ||
        (mc = curl_multi_setopt(t->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, conns)) ||
        (mc = curl_multi_setopt(t->multi, CURLMOPT_MAX_HOST_CONNECTIONS, conns)) ||
        (mc = curl_multi_setopt(t->multi, CURLMOPT_MAXCONNECTS, conns)))
        return ld_errinfo_set(err, LD_ECONFIG, "libcurl rejected a multi option: %s",
                              curl_multi_strerror(mc));
    return LD_OK;
}

struct ld_transport *ld_transport_curl_new(const struct ld_kube_config *cfg,
                                           struct ld_errinfo *err)
{
    struct tcurl *t = NULL;

    ld_errinfo_clear(err);
    if (!cfg || !cfg->server || !cfg->server[0]) {
        ld_errinfo_set(err, LD_ECONFIG, "no API server configured");
        return NULL;
    }
    t = calloc(1, sizeof(*t));
    if (!t)
        goto oom;
    t->iface.ops = &tcurl_ops;
    if (ld_timer_open(&t->wait_end, NULL) != 0) {
        ld_errinfo_set(err, LD_ENOMEM, "transport: timerfd: %s", strerror(errno));
        goto fail;
    }
    if (setup_url(t, cfg, err))
        goto fail;
    if (cfg->token_file && cfg->token_file[0]) {
        t->token_file = strdup(cfg->token_file);
        if (!t->token_file)
            goto oom;
        /* Stamped before the read: a rewrite racing it then shows next time. */
        token_stamp_take(t->token_file, &t->token_stamp);
        if (token_read(t->token_file, &t->token, err))
            goto fail;
        t->token_read_ns = ld_mono_ns();
    } else if (cfg->token && cfg->token[0]) {
        for (const char *p = cfg->token; *p; p++) {
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                ld_errinfo_set(err, LD_ECONFIG, "token contains control characters");
                goto fail;
            }
        }
        t->token = strdup(cfg->token);
        if (!t->token)
            goto oom;
    }
    t->proto = curl_easy_init();
    t->multi = curl_multi_init();
    if (!t->proto || !t->multi)
        goto oom;
    if (setup_proto(t, cfg, err) || setup_multi(t, err))
        goto fail;
    return &t->iface;

oom:
    ld_errinfo_set(err, LD_ENOMEM, "out of memory");
fail:
    if (t)
        tc_free(&t->iface);
    return NULL;
}

void ld_transport_curl_set_user_agent_suffix(struct ld_transport *t, const char *suffix)
{
    if (!t || t->ops != &tcurl_ops)
        return;
    while (suffix && *suffix == ' ')
        suffix++;
    if (!suffix || !suffix[0]) {
        curl_easy_setopt(((struct tcurl *)t)->proto, CURLOPT_USERAGENT, UA_BASE);
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
    curl_easy_setopt(((struct tcurl *)t)->proto, CURLOPT_USERAGENT,
                     ua); /* curl copies it */
    free(ua);
}

/* ---- raw exchanges ---- */

CURL *ld_transport_curl_raw_easy(struct ld_transport *t, const char *target,
                                 struct curl_slist **headers, struct ld_errinfo *err)
{
    CURL *e = NULL;
    char *url = NULL, *auth = NULL;
    struct curl_slist *n = NULL;

    ld_errinfo_clear(err);
    if (!t || t->ops != &tcurl_ops || !target || target[0] != '/' || !headers) {
        ld_errinfo_set(err, LD_EINVAL, "transport: bad raw request");
        return NULL;
    }
    struct tcurl *tc = (struct tcurl *)t;
    token_refresh(tc, false);
    e = curl_easy_duphandle(tc->proto);
    if (!e || asprintf(&url, "%s%s", tc->base, target) < 0) {
        url = NULL;
        goto oom;
    }
    if (curl_easy_setopt(e, CURLOPT_URL, url) != CURLE_OK)
        goto oom;
    if (tc->token) {
        if (asprintf(&auth, "Authorization: Bearer %s", tc->token) < 0) {
            auth = NULL;
            goto oom;
        }
        n = curl_slist_append(*headers, auth);
        free_secret(auth);
        if (!n)
            goto oom;
        *headers = n;
    }
    free(url);
    return e;
oom:
    ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    free(url);
    if (e)
        curl_easy_cleanup(e);
    return NULL;
}

void ld_transport_curl_free_headers(struct curl_slist *headers)
{
    wipe_slist(headers);
}
