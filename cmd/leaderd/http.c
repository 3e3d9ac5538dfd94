/*
 * http: libmicrohttpd server for the sidecar's endpoints.
 */
#include "http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "log.h"
#include "timefmt.h"

/* Probes and scrapers only: a small pool per connection, a bounded number
 * of connections, and idle ones dropped so they cannot pile up. */
#define CONNECTION_LIMIT 512
#define CONNECTION_TIMEOUT_S 15
#define CONNECTION_MEMORY 32768
#define LISTEN_BACKLOG 128

#define CT_JSON "application/json"
#define CT_TEXT "text/plain; charset=utf-8"
#define CT_METRICS "text/plain; version=0.0.4; charset=utf-8"

struct ld_http {
    struct MHD_Daemon *daemon;
    struct ld_state *st;
    struct ld_metrics *m;
    int port;
};

char *ld_http_render_leader(const struct ld_snapshot *snap, int64_t now_ms)
{
    char ts[LD_MICROTIME_LEN];
    json_t *renewed = snap->has_renewed_at
                          ? json_string(ld_microtime_format(snap->renewed_at_us, ts))
                          : json_null();
    /* "o" steals renewed, also when packing fails. */
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:b, s:I, s:o, s:b}", "lease", snap->lease, "identity",
                  snap->identity, "leader", snap->leader, "is_leader",
                  ld_snapshot_is_leader(snap, now_ms), "term", (json_int_t)snap->term,
                  "renewed_at", renewed, "observed", snap->observed);
    if (!o)
        return NULL;
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

bool ld_http_healthy(const struct ld_snapshot *snap, int64_t now_ms, char *why,
                     size_t whylen)
{
    char scratch[1];
    if (!why) {
        why = scratch;
        whylen = sizeof(scratch);
    }
    if (snap->health_error[0] != '\0') {
        snprintf(why, whylen, "%s", snap->health_error);
        return false;
    }
    if (snap->stale_after_ms > 0 && now_ms - snap->heartbeat_ms > snap->stale_after_ms) {
        snprintf(why, whylen,
                 "election loop stalled: its last pass was %lld ms ago (limit %lld ms)",
                 (long long)(now_ms - snap->heartbeat_ms),
                 (long long)snap->stale_after_ms);
        return false;
    }
    if (snap->stale_after_ms > 0 && snap->leading &&
        now_ms - snap->lead_until_ms > snap->stale_after_ms) {
        snprintf(
            why, whylen,
            "leader stopped renewing: leadership lapsed %lld ms ago and the election "
            "loop still claims it",
            (long long)(now_ms - snap->lead_until_ms));
        return false;
    }
    snprintf(why, whylen, "ok");
    return true;
}

void ld_http_reply_clear(struct ld_http_reply *r)
{
    if (!r)
        return;
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static int reply_text(struct ld_http_reply *out, unsigned int status, const char *ct,
                      const char *text)
{
    out->status = status;
    out->content_type = ct;
    out->body = strdup(text);
    if (!out->body)
        return -1;
    out->len = strlen(text);
    return 0;
}

static int reply_owned(struct ld_http_reply *out, unsigned int status, const char *ct,
                       char *body)
{
    if (!body)
        return -1;
    out->status = status;
    out->content_type = ct;
    out->body = body;
    out->len = strlen(body);
    return 0;
}

enum route { R_NONE, R_LEADER, R_HEALTHZ, R_READYZ, R_METRICS, R_ROOT };

static enum route find_route(const char *path)
{
    static const struct {
        const char *path;
        enum route r;
    } table[] = {{"/leader", R_LEADER},
                 {"/healthz", R_HEALTHZ},
                 {"/readyz", R_READYZ},
                 {"/metrics", R_METRICS},
                 {"/", R_ROOT}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(path, table[i].path) == 0)
            return table[i].r;
    }
    return R_NONE;
}

int ld_http_route(const char *method, const char *path, const struct ld_snapshot *snap,
                  struct ld_metrics *m, int64_t now_ms, struct ld_http_reply *out)
{
    char why[512];
    memset(out, 0, sizeof(*out));
    enum route r = find_route(path ? path : "");
    if (r == R_NONE)
        return reply_text(out, 404, CT_JSON, "{\"error\":\"not found\"}");
    if (!method || (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)) {
        out->allow = true;
        return reply_text(out, 405, CT_JSON,
                          "{\"error\":\"method not allowed: use GET or HEAD\"}");
    }
    switch (r) {
    case R_LEADER:
        return reply_owned(out, ld_snapshot_is_leader(snap, now_ms) ? 200 : 503, CT_JSON,
                           ld_http_render_leader(snap, now_ms));
    case R_HEALTHZ:
        if (ld_http_healthy(snap, now_ms, why, sizeof(why)))
            return reply_text(out, 200, CT_TEXT, "ok");
        return reply_text(out, 500, CT_TEXT, why);
    case R_READYZ:
        if (snap->observed)
            return reply_text(out, 200, CT_TEXT, "ok");
        return reply_text(out, 503, CT_TEXT, "lease not observed yet");
    case R_METRICS: {
        struct ld_metrics empty;
        char *text;
        size_t len;
        int rc;
        if (!m) {
            ld_metrics_init(&empty);
            m = &empty;
        }
        rc = ld_metrics_render(m, snap, now_ms, &text, &len);
        if (m == &empty)
            ld_metrics_destroy(&empty);
        if (rc != 0)
            return -1;
        out->status = 200;
        out->content_type = CT_METRICS;
        out->body = text;
        out->len = len;
        return 0;
    }
    case R_ROOT: {
        json_t *o = json_pack("{s:s}", "name", snap->leader);
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return reply_owned(out, 200, CT_JSON, text);
    }
    case R_NONE:
        break;
    }
    return -1;
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned int status,
                             const char *ct, bool allow, void *body, size_t len,
                             enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    enum MHD_Result ret = MHD_NO;
    if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ct) == MHD_YES &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") ==
            MHD_YES &&
        (!allow ||
         MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") == MHD_YES))
        ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version,
                              const char *upload_data, size_t *upload_data_size,
                              void **con_cls)
{
    static char oom[] = "{\"error\":\"out of memory\"}";
    static int seen;
    struct ld_http *h = cls;
    struct ld_snapshot snap;
    struct ld_http_reply r;
    (void)version;
    (void)upload_data;
    /* MHD keeps a connection alive only when the reply is queued after the
     * first call (which just announces the headers) and after any body,
     * which GET and HEAD ignore. Other methods are refused at once: their
     * body is never read and MHD closes the connection after the 405. */
    bool plain = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (plain && *con_cls == NULL) {
        *con_cls = &seen;
        return MHD_YES;
    }
    if (plain && *upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    ld_state_read(h->st, &snap);
    if (ld_http_route(method, url, &snap, h->m, ld_mono_ms(), &r) != 0) {
        ld_http_reply_clear(&r);
        return queue(c, 500, CT_JSON, false, oom, strlen(oom), MHD_RESPMEM_PERSISTENT);
    }
    enum MHD_Result ret =
        queue(c, r.status, r.content_type, r.allow, r.body, r.len, MHD_RESPMEM_MUST_FREE);
    r.body = NULL; /* the response owns it now */
    return ret;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    /* Mostly clients going away mid-reply: not worth more than debug. */
    ld_log(LD_LOG_DEBUG, "http: %s", msg);
}

static int bind_listen(const struct sockaddr *sa, socklen_t salen, bool dual_stack,
                       int *err_out)
{
    int one = 1, zero = 0;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        *err_out = errno;
        return -1;
    }
    /* A restarted sidecar must not wait out TIME_WAIT of its old sockets. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (sa->sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one, sizeof(one));
    if (bind(fd, sa, salen) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
        *err_out = errno;
        close(fd);
        return -1;
    }
    return fd;
}

/* Opens the listening socket for host:port; -1 with err filled. */
static int open_listener(const char *host, int port, char *err, size_t errlen)
{
    int e = 0;
    int fd = -1;
    char portstr[16];
    const char *shown = host && *host ? host : "";
    bool v6 = strchr(shown, ':') != NULL;
    if (!host || *host == '\0') {
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof(a6));
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_any;
        a6.sin6_port = htons((uint16_t)port);
        fd = bind_listen((struct sockaddr *)&a6, sizeof(a6), true, &e);
        /* No IPv6 on this host: all IPv4 interfaces will do. */
        if (fd < 0 && e != EADDRINUSE && e != EACCES) {
            struct sockaddr_in a4;
            memset(&a4, 0, sizeof(a4));
            a4.sin_family = AF_INET;
            a4.sin_addr.s_addr = htonl(INADDR_ANY);
            a4.sin_port = htons((uint16_t)port);
            fd = bind_listen((struct sockaddr *)&a4, sizeof(a4), false, &e);
        }
    } else {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        snprintf(portstr, sizeof(portstr), "%d", port);
        int gai = getaddrinfo(host, portstr, &hints, &res);
        if (gai != 0) {
            snprintf(err, errlen, "listen %s%s%s:%d: %s", v6 ? "[" : "", shown,
                     v6 ? "]" : "", port, gai_strerror(gai));
            return -1;
        }
        e = EADDRNOTAVAIL;
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
            fd = bind_listen(ai->ai_addr, ai->ai_addrlen, false, &e);
        freeaddrinfo(res);
    }
    if (fd < 0)
        snprintf(err, errlen, "listen %s%s%s:%d: %s", v6 ? "[" : "", shown, v6 ? "]" : "",
                 port, strerror(e));
    return fd;
}

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

struct ld_http *ld_http_start(const char *host, int port, struct ld_state *st,
                              struct ld_metrics *m, char *err, size_t errlen)
{
    char scratch[1];
    struct ld_http *h = NULL;
    int fd = -1;
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    err[0] = '\0';
    if (port < 0 || port > 65535) {
        snprintf(err, errlen, "listen: port %d out of range", port);
        goto fail;
    }
    h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "http: out of memory");
        goto fail;
    }
    h->st = st;
    h->m = m;
    fd = open_listener(host, port, err, errlen);
    if (fd < 0)
        goto fail;
    h->port = bound_port(fd);
    h->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0, NULL, NULL,
        handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET,
        (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONNECTION_LIMIT,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONNECTION_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errlen, "http: cannot start the server on port %d", h->port);
        goto fail;
    }
    return h;
fail:
    if (fd >= 0)
        close(fd);
    free(h);
    return NULL;
}

void ld_http_stop(struct ld_http *h)
{
    if (!h)
        return;
    /* MHD closes the listening socket it was given. */
    MHD_stop_daemon(h->daemon);
    free(h);
}

int ld_http_port(const struct ld_http *h)
{
    return h ? h->port : -1;
}
