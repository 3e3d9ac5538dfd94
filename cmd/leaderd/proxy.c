/*
 * proxy: the API write gate's server (see proxy.h): libmicrohttpd on the
 * loopback address, libcurl to the API server.
 *
 * Why a thread per client connection (MHD_USE_THREAD_PER_CONNECTION) and
 * a curl multi handle per connection, driven on that thread: a proxied
 * request is a blocking conversation (read the body, wait for the
 * upstream's headers, relay body pieces as they come), and MHD lets a
 * handler and a content reader block in that mode. Each conversation then
 * reads top to bottom, a slow upstream or a watch that streams for an hour
 * only occupies its own thread, and no hand-over between an MHD thread and
 * a curl thread (suspend, resume, pause, unpause, in both directions) is
 * needed. It is bounded: at most max_connections threads, each with a
 * small stack, and a body buffer of at most LD_PROXY_MAX_BODY. A relayed
 * body holds at most one curl write (16 KiB) at a time: curl is paused
 * until MHD took it, so a slow client slows the upstream instead of
 * filling memory.
 *
 * Leadership while a write runs: the connection's thread waits in
 * curl_multi_poll, which a state listener ends (curl_multi_wakeup) on
 * every publish, and never longer than until lead_until_ms; after every
 * wake-up, before curl may send more, the gate is asked again. A write is
 * cut (its handle removed, which closes its upstream connection) as soon
 * as it fails, until the API server's answer has begun: then the server
 * has decided, and the answer is relayed whole.
 */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "http_listen.h"
#include "log.h"
#include "proxy_gate.h"
#include "transport_curl.h"

/* The most of a refused body read and dropped (see on_request). */
#define DROP_LIMIT (4 * (size_t)LD_PROXY_MAX_BODY)
/* Request line and headers of kubectl and client libraries fit easily. */
#define CONNECTION_MEMORY (64 * 1024)
/* libcurl and OpenSSL (the TLS handshake) run on these threads. */
#define THREAD_STACK (256 * 1024)
/* Longest single wait for upstream progress; the stop flag is seen then. */
#define POLL_SLICE_MS 1000
#define CONNECT_TIMEOUT_MS 3000
#define MIN_CONNECTIONS 4

/* One client connection (MHD's socket context): its thread's multi
 * handle, whose connection cache keeps the upstream connection for the
 * client's next request. */
struct conn {
    CURLM *multi;
};

enum cut_why { CUT_NONE, CUT_LEADERSHIP, CUT_CLIENT, CUT_STOP };

/* One request, from MHD's URI callback to its completion. */
struct preq {
    struct preq *prev, *next; /* in p->active while upstream */
    bool linked;
    struct ld_proxy *p;
    struct MHD_Connection *mc;
    struct conn *conn;
    char *target; /* the request target as received */
    const char *method;
    bool started;
    struct ld_proxy_verdict verdict;
    char *body;
    size_t len, cap;
    size_t dropped; /* bytes of a refused body read and thrown away */
    /* upstream */
    CURL *easy;
    struct curl_slist *hdrs;
    bool added, done, refused_prereq, watch_client;
    enum cut_why cut;
    CURLcode result;
    char errbuf[CURL_ERROR_SIZE];
    long status;
    struct curl_slist *rhdrs; /* response header lines, "Name: value" */
    bool headers_done;
    char *pend; /* a relayed body piece not yet taken by MHD */
    size_t pend_len, pend_off, pend_cap;
    bool paused;
    bool timeout_off; /* MHD's idle timeout suspended for this request */
};

struct ld_proxy {
    struct MHD_Daemon *daemon;
    struct ld_transport *tr; /* leaderd's credentials; one user at a time */
    pthread_mutex_t tr_mu;
    struct ld_state *st;
    struct ld_metrics *m;
    pthread_mutex_t mu; /* guards active */
    struct preq *active;
    atomic_bool stopping;
    struct ld_state_listener listener;
    bool listening;
    unsigned int idle_s;
    int port;
};

/* ---- leadership ---- */

struct view_hold {
    struct ld_snapshot snap;
    struct ld_shardsnap *shards;
    struct ld_proxy_view v;
};

static void view_take(struct ld_proxy *p, struct view_hold *h)
{
    h->shards = NULL;
    if (p->st->group)
        h->shards = ld_state_read_shards(p->st, &h->snap);
    else
        ld_state_read(p->st, &h->snap);
    h->v = (struct ld_proxy_view){
        .snap = &h->snap, .group = p->st->group, .shards = h->shards};
}

static void view_drop(struct view_hold *h)
{
    ld_shardsnap_unref(h->shards);
    h->shards = NULL;
}

/* Runs with st's mutex held: only wakes the threads waiting upstream. */
static void on_publish(void *arg)
{
    struct ld_proxy *p = arg;
    pthread_mutex_lock(&p->mu);
    for (struct preq *q = p->active; q; q = q->next)
        curl_multi_wakeup(q->conn->multi);
    pthread_mutex_unlock(&p->mu);
}

static void link_active(struct preq *q)
{
    struct ld_proxy *p = q->p;
    pthread_mutex_lock(&p->mu);
    q->prev = NULL;
    q->next = p->active;
    if (p->active)
        p->active->prev = q;
    p->active = q;
    q->linked = true;
    pthread_mutex_unlock(&p->mu);
}

static void unlink_active(struct preq *q)
{
    struct ld_proxy *p = q->p;
    if (!q->linked)
        return;
    pthread_mutex_lock(&p->mu);
    if (q->prev)
        q->prev->next = q->next;
    else
        p->active = q->next;
    if (q->next)
        q->next->prev = q->prev;
    q->prev = q->next = NULL;
    q->linked = false;
    pthread_mutex_unlock(&p->mu);
}

/* ---- requests ---- */

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static void req_info(struct preq *q, struct ld_proxy_req *r)
{
    const char *cl = header(q->mc, "Content-Length");
    memset(r, 0, sizeof(*r));
    r->method = q->method;
    r->target = q->target;
    r->connection = header(q->mc, "Connection");
    r->upgrade = header(q->mc, "Upgrade");
    r->shard = header(q->mc, LD_PROXY_SHARD_HEADER);
    if (cl) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (end != cl && errno == 0) {
            r->has_length = true;
            r->content_length = v;
        }
    }
}

static void decide(struct preq *q)
{
    struct ld_proxy_req r;
    struct view_hold h;
    req_info(q, &r);
    view_take(q->p, &h);
    ld_proxy_decide(&r, &h.v, ld_mono_ms(), &q->verdict);
    view_drop(&h);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct preq *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->p = cls;
    q->mc = c;
    q->target = strdup(uri ? uri : "");
    if (!q->target) {
        free(q);
        return NULL;
    }
    return q;
}

static void release_upstream(struct preq *q)
{
    unlink_active(q);
    if (q->easy) {
        if (q->added)
            curl_multi_remove_handle(q->conn->multi, q->easy);
        curl_easy_cleanup(q->easy);
    }
    q->easy = NULL;
    q->added = false;
    ld_transport_curl_free_headers(q->hdrs);
    q->hdrs = NULL;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct ld_proxy *p = cls;
    struct preq *q = *req_cls;
    (void)toe;
    if (!q)
        return;
    release_upstream(q);
    /* Idle again: the connection's own timeout applies (restarting it
     * from now, see MHD_set_connection_option). */
    if (q->timeout_off)
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, p->idle_s);
    curl_slist_free_all(q->rhdrs);
    free(q->pend);
    free(q->body);
    free(q->target);
    free(q);
    *req_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)cls;
    (void)c;
    struct conn *k = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED && k) {
        curl_multi_cleanup(k->multi);
        free(k);
        *socket_context = NULL;
    }
}

/* The connection's context, made on its first forwarded request. */
static struct conn *conn_get(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!ci)
        return NULL;
    void **slot = (void **)&ci->socket_context;
    struct conn *k = *slot;
    if (k)
        return k;
    k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->multi = curl_multi_init();
    if (!k->multi) {
        free(k);
        return NULL;
    }
    curl_multi_setopt(k->multi, CURLMOPT_MAXCONNECTS, 2L);
    *slot = k;
    return k;
}

static int client_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static enum MHD_Result queue(struct preq *q, unsigned int status,
                             struct MHD_Response *resp)
{
    enum MHD_Result ret = MHD_queue_response(q->mc, status, resp);
    MHD_destroy_response(resp);
    ld_metrics_proxy_request(q->p->m, q->method, (long)status);
    return ret;
}

/* Answers v (status != 0) with its metav1.Status body. */
static enum MHD_Result answer_status(struct preq *q, const struct ld_proxy_verdict *v)
{
    char *body = ld_proxy_status_json(v->status, v->reason, v->message);
    if (!body)
        return MHD_NO;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
    if (v->refused) {
        ld_metrics_proxy_refused(q->p->m);
        ld_log(LD_LOG_INFO, "api proxy: refused %s %.200s: %s", q->method, q->target,
               v->message);
    }
    return queue(q, v->status, resp);
}

static enum MHD_Result answer_plain(struct preq *q, unsigned int status,
                                    const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum MHD_Result answer_plain(struct preq *q, unsigned int status,
                                    const char *reason, const char *fmt, ...)
{
    struct ld_proxy_verdict v;
    va_list ap;
    memset(&v, 0, sizeof(v));
    v.status = status;
    v.reason = reason;
    va_start(ap, fmt);
    vsnprintf(v.message, sizeof(v.message), fmt, ap);
    va_end(ap);
    return answer_status(q, &v);
}

/* ---- upstream ---- */

static size_t on_header(char *b, size_t size, size_t n, void *ud)
{
    struct preq *q = ud;
    size_t len = size * n;
    if (q->headers_done)
        return len; /* trailers */
    if (len >= 5 && strncmp(b, "HTTP/", 5) == 0) {
        /* A new status line (after a 1xx): the headers start over. */
        const char *sp = memchr(b, ' ', len);
        q->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        curl_slist_free_all(q->rhdrs);
        q->rhdrs = NULL;
        return len;
    }
    size_t m = len;
    while (m > 0 && (b[m - 1] == '\r' || b[m - 1] == '\n'))
        m--;
    if (m == 0) {
        if (q->status >= 200)
            q->headers_done = true;
        return len;
    }
    char *line = strndup(b, m);
    if (!line)
        return 0;
    struct curl_slist *l = curl_slist_append(q->rhdrs, line);
    free(line);
    if (!l)
        return 0;
    q->rhdrs = l;
    return len;
}

static size_t on_body(char *b, size_t size, size_t n, void *ud)
{
    struct preq *q = ud;
    size_t len = size * n;
    if (q->pend_off < q->pend_len) {
        q->paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    if (len > q->pend_cap) {
        char *nb = realloc(q->pend, len);
        if (!nb)
            return 0;
        q->pend = nb;
        q->pend_cap = len;
    }
    memcpy(q->pend, b, len);
    q->pend_len = len;
    q->pend_off = 0;
    return len;
}

/* Right before the request goes out on an established connection: the
 * last check of a write. */
static int on_prereq(void *ud, char *ip, char *local_ip, int port, int local_port)
{
    struct preq *q = ud;
    struct view_hold h;
    (void)ip;
    (void)local_ip;
    (void)port;
    (void)local_port;
    view_take(q->p, &h);
    bool ok = ld_proxy_still_leads(&q->verdict, &h.v, ld_mono_ms(), NULL);
    view_drop(&h);
    if (ok)
        return CURL_PREREQFUNC_OK;
    q->refused_prereq = true;
    return CURL_PREREQFUNC_ABORT;
}

static void cut(struct preq *q, enum cut_why why)
{
    q->cut = why;
    q->done = true;
    if (q->added) {
        /* Closes the upstream connection if the exchange still used it. */
        curl_multi_remove_handle(q->conn->multi, q->easy);
        q->added = false;
    }
    unlink_active(q);
    if (why == CUT_LEADERSHIP) {
        ld_metrics_proxy_aborted(q->p->m);
        ld_log(LD_LOG_WARN,
               "api proxy: cut %s %.200s in flight: this replica stopped leading",
               q->method, q->target);
    }
}

/* A client that hung up reads as end of file; bytes of a next request
 * (pipelining) mean it is still there. */
static bool client_gone(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return true;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

/* Drives q's exchange until its headers are in (want_headers) or a body
 * piece is waiting, or it is over (done: finished, or cut). */
static void pump(struct preq *q, bool want_headers)
{
    struct ld_proxy *p = q->p;
    int fd = client_fd(q->mc);
    while (!q->done) {
        if (want_headers ? q->headers_done : q->pend_off < q->pend_len)
            return;
        if (atomic_load(&p->stopping)) {
            cut(q, CUT_STOP);
            return;
        }
        int64_t now = ld_mono_ms();
        int64_t wait = POLL_SLICE_MS;
        /* A write is gated until its answer starts: by then the API server
         * has decided, and cutting the rest would only hide the outcome. */
        if (q->verdict.write && !q->headers_done) {
            struct view_hold h;
            view_take(p, &h);
            bool ok = ld_proxy_still_leads(&q->verdict, &h.v, now, NULL);
            int64_t until = ld_proxy_lead_until(&q->verdict, &h.v);
            view_drop(&h);
            if (!ok) {
                cut(q, CUT_LEADERSHIP);
                return;
            }
            if (until - now < wait)
                wait = until - now;
        }
        int running = 0;
        curl_multi_perform(q->conn->multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(q->conn->multi, &left))) {
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == q->easy) {
                q->done = true;
                q->result = msg->data.result;
            }
        }
        if (q->done || (want_headers ? q->headers_done : q->pend_off < q->pend_len))
            continue;
        struct curl_waitfd w = {.fd = fd, .events = CURL_WAIT_POLLIN, .revents = 0};
        bool watch = q->watch_client && fd >= 0;
        curl_multi_poll(q->conn->multi, watch ? &w : NULL, watch ? 1 : 0,
                        (int)(wait < 1 ? 1 : wait), NULL);
        if (watch && (w.revents & CURL_WAIT_POLLIN)) {
            if (client_gone(fd)) {
                cut(q, CUT_CLIENT);
                return;
            }
            q->watch_client = false;
        }
    }
}

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct preq *q = cls;
    (void)pos;
    for (;;) {
        if (q->pend_off < q->pend_len) {
            size_t n = q->pend_len - q->pend_off;
            if (n > max)
                n = max;
            memcpy(buf, q->pend + q->pend_off, n);
            q->pend_off += n;
            return (ssize_t)n;
        }
        if (q->done)
            return q->cut == CUT_NONE && q->result == CURLE_OK
                       ? MHD_CONTENT_READER_END_OF_STREAM
                       : MHD_CONTENT_READER_END_WITH_ERROR;
        if (q->paused) {
            /* May hand the held bytes to on_body at once. */
            q->paused = false;
            curl_easy_pause(q->easy, CURLPAUSE_CONT);
            continue;
        }
        pump(q, false);
    }
}

static const char *find_header(const struct curl_slist *l, const char *name, size_t *vlen)
{
    size_t n = strlen(name);
    for (; l; l = l->next) {
        if (strncasecmp(l->data, name, n) == 0 && l->data[n] == ':') {
            const char *v = l->data + n + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            if (vlen)
                *vlen = strlen(v);
            return v;
        }
    }
    return NULL;
}

/* Adds each request header that passes to q->hdrs. */
static enum MHD_Result add_request_header(void *cls, enum MHD_ValueKind kind,
                                          const char *key, const char *value)
{
    struct preq *q = cls;
    (void)kind;
    if (!ld_proxy_forward_request_header(key, header(q->mc, "Connection")))
        return MHD_YES;
    char *line = NULL;
    /* "Name:" alone would make curl drop the header: "Name;" sends it
     * empty. */
    if (value && value[0]) {
        if (asprintf(&line, "%s: %s", key, value) < 0)
            line = NULL;
    } else if (asprintf(&line, "%s;", key) < 0) {
        line = NULL;
    }
    struct curl_slist *l = line ? curl_slist_append(q->hdrs, line) : NULL;
    free(line);
    if (l)
        q->hdrs = l;
    return l ? MHD_YES : MHD_NO;
}

static bool append_header(struct preq *q, const char *line)
{
    struct curl_slist *l = curl_slist_append(q->hdrs, line);
    if (l)
        q->hdrs = l;
    return l != NULL;
}

static enum MHD_Result respond_upstream(struct preq *q)
{
    size_t vlen = 0;
    const char *cl = find_header(q->rhdrs, "Content-Length", &vlen);
    uint64_t size = MHD_SIZE_UNKNOWN;
    if (cl) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (end != cl && errno == 0)
            size = v;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_callback(size, 16 * 1024, read_body, q, NULL);
    if (!resp)
        return MHD_NO;
    char *conn_hdr = NULL;
    const char *cv = find_header(q->rhdrs, "Connection", &vlen);
    if (cv)
        conn_hdr = strndup(cv, vlen);
    for (const struct curl_slist *l = q->rhdrs; l; l = l->next) {
        const char *colon = strchr(l->data, ':');
        if (!colon || colon == l->data)
            continue;
        char name[256];
        size_t nlen = (size_t)(colon - l->data);
        if (nlen >= sizeof(name))
            continue;
        memcpy(name, l->data, nlen);
        name[nlen] = '\0';
        const char *value = colon + 1;
        while (*value == ' ' || *value == '\t')
            value++;
        if (ld_proxy_forward_response_header(name, conn_hdr))
            MHD_add_response_header(resp, name, value);
    }
    free(conn_hdr);
    return queue(q, (unsigned int)q->status, resp);
}

static enum MHD_Result forward(struct preq *q)
{
    struct ld_errinfo err;
    CURLcode c;
    q->conn = conn_get(q->mc);
    if (!q->conn)
        return answer_plain(q, 500, "InternalError",
                            "leaderd's API proxy: out of memory");
    if (MHD_get_connection_values(q->mc, MHD_HEADER_KIND, add_request_header, q) < 0 ||
        !append_header(q, "Expect:") ||
        (!header(q->mc, "Content-Type") && !append_header(q, "Content-Type:")))
        return answer_plain(q, 500, "InternalError",
                            "leaderd's API proxy: out of memory");
    pthread_mutex_lock(&q->p->tr_mu);
    q->easy = ld_transport_curl_raw_easy(q->p->tr, q->target, &q->hdrs, &err);
    pthread_mutex_unlock(&q->p->tr_mu);
    if (!q->easy)
        return answer_plain(q, err.code == LD_EINVAL ? 400 : 500,
                            err.code == LD_EINVAL ? "BadRequest" : "InternalError",
                            "leaderd's API proxy: %s", err.msg);

#define SETOPT(opt, val)                                                                 \
    do {                                                                                 \
        if ((c = curl_easy_setopt(q->easy, opt, val)) != CURLE_OK)                       \
            goto curl_fail;                                                              \
    } while (0)

    SETOPT(CURLOPT_HTTPHEADER, q->hdrs);
    SETOPT(CURLOPT_ERRORBUFFER, q->errbuf);
    SETOPT(CURLOPT_HEADERFUNCTION, on_header);
    SETOPT(CURLOPT_HEADERDATA, q);
    SETOPT(CURLOPT_WRITEFUNCTION, on_body);
    SETOPT(CURLOPT_WRITEDATA, q);
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
    /* Watches last as long as the client wants; the client hanging up
     * ends any exchange. */
    SETOPT(CURLOPT_TIMEOUT_MS, 0L);
    /* The body goes as it came: no decoding of the answer either. */
    SETOPT(CURLOPT_HTTP_CONTENT_DECODING, 0L);
    if (q->verdict.write) {
        SETOPT(CURLOPT_PREREQFUNCTION, on_prereq);
        SETOPT(CURLOPT_PREREQDATA, q);
    }
    if (strcmp(q->method, "GET") == 0) {
        SETOPT(CURLOPT_HTTPGET, 1L);
    } else if (strcmp(q->method, "HEAD") == 0) {
        SETOPT(CURLOPT_NOBODY, 1L);
    } else {
        if (q->len > 0 || strcmp(q->method, "POST") == 0 ||
            strcmp(q->method, "PUT") == 0 || strcmp(q->method, "PATCH") == 0) {
            SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->len);
            SETOPT(CURLOPT_POSTFIELDS, q->body ? q->body : "");
        }
        SETOPT(CURLOPT_CUSTOMREQUEST, q->method);
    }
#undef SETOPT

    /* From here the request may take as long as the upstream does (a
     * slow write, a watch): MHD's idle timeout is for silent clients, and
     * this thread only comes back to MHD with bytes for the client. */
    MHD_set_connection_option(q->mc, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    q->timeout_off = true;
    q->watch_client = true;
    link_active(q);
    if (curl_multi_add_handle(q->conn->multi, q->easy) != CURLM_OK) {
        release_upstream(q);
        return answer_plain(q, 500, "InternalError",
                            "leaderd's API proxy: libcurl refused the request");
    }
    q->added = true;
    pump(q, true);
    if (q->headers_done)
        return respond_upstream(q);
    enum cut_why why = q->cut;
    release_upstream(q);
    if (why == CUT_CLIENT || why == CUT_STOP)
        return MHD_NO;
    if (q->refused_prereq || why == CUT_LEADERSHIP) {
        struct view_hold h;
        struct ld_proxy_verdict v;
        view_take(q->p, &h);
        bool back = ld_proxy_still_leads(&q->verdict, &h.v, ld_mono_ms(), &v);
        view_drop(&h);
        if (why == CUT_LEADERSHIP || back) {
            /* Cut in flight; or refused by the last check, with
             * leadership back by now (the refusal stands). */
            memset(&v, 0, sizeof(v));
            v.status = 503;
            v.reason = "ServiceUnavailable";
            v.refused = why != CUT_LEADERSHIP;
            snprintf(v.message, sizeof(v.message), "%s",
                     why == CUT_LEADERSHIP
                         ? "write cut by leaderd: this replica stopped leading while "
                           "the request was in flight to the API server, which may or "
                           "may not have applied it"
                         : "write refused by leaderd: this replica was not leading "
                           "when the request was about to be sent");
        }
        return answer_status(q, &v);
    }
    return answer_plain(q, 502, "InternalError",
                        "leaderd's API proxy: the API server did not answer: %s%s%s",
                        curl_easy_strerror(q->result), q->errbuf[0] ? ": " : "",
                        q->errbuf);

curl_fail:
    release_upstream(q);
    return answer_plain(q, 500, "InternalError", "leaderd's API proxy: %s",
                        curl_easy_strerror(c));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **req_cls)
{
    struct preq *q = *req_cls;
    (void)cls;
    (void)url;
    (void)version;
    if (!q)
        return MHD_NO;
    if (!q->started) {
        q->started = true;
        q->mc = c;
        q->method = method;
        decide(q);
        /* A client waiting for "100 Continue" before it sends the body
         * gets the refusal instead, and sends nothing. */
        const char *expect = header(c, "Expect");
        if (q->verdict.status && expect && strcasecmp(expect, "100-continue") == 0)
            return answer_status(q, &q->verdict);
        return MHD_YES;
    }
    if (*upload_size > 0) {
        size_t n = *upload_size;
        *upload_size = 0;
        /* A body that will not be forwarded is read and dropped, so the
         * answer reaches a client still sending it (closing on it could
         * reset the connection before the answer is read); past
         * DROP_LIMIT the connection is closed all the same. */
        if (q->verdict.status) {
            q->dropped += n;
            return q->dropped > DROP_LIMIT ? MHD_NO : MHD_YES;
        }
        if (n > LD_PROXY_MAX_BODY - q->len) {
            free(q->body);
            q->body = NULL;
            q->len = q->cap = 0;
            struct ld_proxy_req r = {.method = q->method,
                                     .has_length = true,
                                     .content_length = (uint64_t)LD_PROXY_MAX_BODY + 1};
            struct view_hold h;
            view_take(q->p, &h);
            ld_proxy_decide(&r, &h.v, ld_mono_ms(), &q->verdict);
            view_drop(&h);
            return MHD_YES;
        }
        if (q->len + n > q->cap) {
            size_t ncap = q->cap ? q->cap : 16 * 1024;
            while (ncap < q->len + n)
                ncap *= 2;
            if (ncap > LD_PROXY_MAX_BODY)
                ncap = LD_PROXY_MAX_BODY;
            char *nb = realloc(q->body, ncap);
            if (!nb)
                return MHD_NO;
            q->body = nb;
            q->cap = ncap;
        }
        memcpy(q->body + q->len, upload, n);
        q->len += n;
        return MHD_YES;
    }
    /* The request has been read: a write is judged again. */
    if (!q->verdict.status && q->verdict.write)
        decide(q);
    if (q->verdict.status)
        return answer_status(q, &q->verdict);
    return forward(q);
}

/* ---- life ---- */

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    ld_log(LD_LOG_DEBUG, "api proxy: %s", msg);
}

/* The loopback address the configuration checked; "localhost" is bound
 * as 127.0.0.1, not as whatever the resolver says first. */
static int open_loopback(const char *host, int port, char *err, size_t errlen)
{
    char inner[256];
    const char *h = strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
    int fd = ld_http_open_listener(h, port, inner, sizeof(inner));
    if (fd < 0)
        snprintf(err, errlen, "api-proxy: %s", inner);
    return fd;
}

struct ld_proxy *ld_proxy_start(const char *host, int port,
                                const struct ld_kube_config *kube, struct ld_state *st,
                                struct ld_metrics *m, const struct ld_proxy_options *opts,
                                char *err, size_t errlen)
{
    struct ld_proxy *p = NULL;
    struct ld_errinfo ei;
    int fd = -1;
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    err[0] = '\0';
    if (!host || port < 0 || port > 65535) {
        snprintf(err, errlen, "api-proxy: bad address");
        return NULL;
    }
    p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(err, errlen, "api-proxy: out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->tr_mu, NULL);
    atomic_init(&p->stopping, false);
    p->st = st;
    p->m = m;
    unsigned int conns =
        opts && opts->max_connections ? opts->max_connections : LD_PROXY_MAX_CONNECTIONS;
    if (conns < MIN_CONNECTIONS)
        conns = MIN_CONNECTIONS;
    p->idle_s =
        opts && opts->idle_timeout_s ? opts->idle_timeout_s : LD_PROXY_IDLE_TIMEOUT_S;
    p->tr = ld_transport_curl_new(kube, &ei);
    if (!p->tr) {
        snprintf(err, errlen, "api-proxy: %s", ei.msg);
        goto fail;
    }
    ld_transport_curl_set_user_agent_suffix(p->tr, "api-proxy");
    fd = open_loopback(host, port, err, errlen);
    if (fd < 0)
        goto fail;
    p->port = ld_http_bound_port(fd);
    p->listener = (struct ld_state_listener){.fn = on_publish, .arg = p};
    ld_state_listen(st, &p->listener);
    p->listening = true;
    p->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, on_request, p, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT, conns,
        MHD_OPTION_CONNECTION_TIMEOUT, p->idle_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)CONNECTION_MEMORY, MHD_OPTION_URI_LOG_CALLBACK, on_uri, p,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, p, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, p, MHD_OPTION_THREAD_STACK_SIZE, (size_t)THREAD_STACK,
        MHD_OPTION_END);
    if (!p->daemon) {
        snprintf(err, errlen, "api-proxy: cannot start the server on port %d", p->port);
        goto fail;
    }
    return p;
fail:
    if (fd >= 0)
        close(fd);
    if (p->listening)
        ld_state_unlisten(st, &p->listener);
    ld_transport_free(p->tr);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->tr_mu);
    free(p);
    return NULL;
}

void ld_proxy_stop(struct ld_proxy *p)
{
    if (!p)
        return;
    atomic_store(&p->stopping, true);
    on_publish(p);
    /* Joins every connection's thread; each sees the flag within a poll
     * slice (or at once, woken above) and ends its exchange. */
    MHD_stop_daemon(p->daemon);
    ld_state_unlisten(p->st, &p->listener);
    ld_transport_free(p->tr);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->tr_mu);
    free(p);
}

int ld_proxy_port(const struct ld_proxy *p)
{
    return p ? p->port : -1;
}
