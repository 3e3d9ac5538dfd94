/*
 * proxy: the API write gate's server (see proxy.h): libmicrohttpd on the
 * loopback address, libcurl to the API server, event-driven on both sides.
 *
 * Two threads serve every connection. MHD's polling thread reads a
 * request (headers, then the body into memory, at most LD_PROXY_MAX_BODY)
 * and judges it; a request to forward is handed to the upstream thread
 * and its connection suspended. The upstream thread owns one curl multi
 * handle, and everything that touches an easy handle happens on it: it
 * starts the exchange, resumes the client's connection once the
 * upstream's headers are in (or the exchange failed or was cut), and
 * relays the body through a small buffer per exchange (RELAY_BUFFER);
 * a connection is resumed once curl is done with what it read, so the
 * headers and the body piece that came with them need no second wake-up.
 * MHD's content reader drains that buffer; when it is empty the reader
 * suspends the connection and returns 0, and the next piece resumes it.
 * When the buffer is full curl's write callback pauses the transfer, and
 * the reader, once it made room, asks the upstream thread to unpause it:
 * a slow client slows the upstream instead of filling memory.
 *
 * The upstream thread sleeps in curl_multi_poll, woken by
 * curl_multi_wakeup when an exchange is handed over, when a reader asks
 * for an unpause or a client is gone (the "todo" list), and on every
 * publish of the state; it never sleeps past the earliest lead_until_ms
 * of a write whose answer has not begun. After every wake-up such writes
 * are judged again, and one whose leadership ended is cut (its handle
 * removed, which closes its upstream connection). Once the answer has
 * begun the server has decided, and the answer is relayed whole.
 *
 * A suspended connection is not watched by MHD, so a client that hangs
 * up while it waits (a slow write, a quiet watch) would go unnoticed: its
 * socket is registered for EPOLLRDHUP in an epoll set that curl_multi_poll
 * waits on too, and the hang-up cuts the exchange at once. A hang-up MHD
 * sees itself (a failed send) ends the request, and its completion
 * callback cuts the exchange the same way.
 *
 * An exchange is shared by MHD's side (from the URI callback to the
 * completion callback) and the upstream thread (from the hand-over to the
 * removal of its handle), hence refs; the todo and wake lists hold a
 * reference each while q is on them. p->mu guards what both sides read, marked below.
 *
 * Memory: an idle client connection costs MHD's connection and its pool
 * (CONNECTION_MEMORY) and a bookkeeping record; a request in flight adds
 * its body until curl is done with it (all bodies together at most
 * BODY_BUDGET), the relay buffer while bytes flow, the easy handle and an
 * upstream connection. Idle upstream connections are shared by all
 * clients (at most UPSTREAM_IDLE).
 */
#include "proxy.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "http.h"
#include "http_conn.h"
#include "http_listen.h"
#include "log.h"
#include "memtrim.h"
#include "proxy_gate.h"
#include "transport_curl.h"

/* The most of a refused body read and dropped (see on_request). */
#define DROP_LIMIT (4 * (size_t)LD_PROXY_MAX_BODY)
/* All request bodies held at once (read, or on their way upstream): past
 * it a request is answered 429 (as kube-apiserver's max-in-flight limit
 * answers; clients retry) instead of the proxy's memory growing to the
 * connection limit times LD_PROXY_MAX_BODY. */
#define BODY_BUDGET ((size_t)64 * 1024 * 1024)
/* Each connection's pool, as the sidecar's: the request line and headers
 * of kubectl and client libraries (a few hundred bytes to a few KiB), the
 * API server's response headers and MHD's send buffer fit. MHD zeroes it
 * between requests, so an idle keep-alive connection holds all of it. */
#define CONNECTION_MEMORY (16 * 1024)
/* A relayed body waits here between curl and MHD: one curl write at most
 * (CURL_MAX_WRITE_SIZE; the transport's receive buffer is smaller). */
#define RELAY_BUFFER CURL_MAX_WRITE_SIZE
/* Block size of MHD's reads from a relayed body. */
#define RESPONSE_BLOCK (8 * 1024)
/* Idle upstream connections kept for the next exchanges. */
#define UPSTREAM_IDLE 16L
/* Longest single sleep of the upstream thread; all it waits for wakes it
 * sooner, this only bounds a missed wake-up. */
#define POLL_SLICE_MS 1000
#define CONNECT_TIMEOUT_MS 3000
#define HANGUPS_PER_ROUND 64
/* Descriptors left to the rest of the process when the connection cap is
 * sized from RLIMIT_NOFILE, as the sidecar's server leaves (http_listen.c). */
#define FD_RESERVE 64
/* libcurl and OpenSSL (TLS handshakes) run on the upstream thread. */
#define UPSTREAM_STACK (256 * 1024)

enum cut_why { CUT_NONE, CUT_LEADERSHIP, CUT_CLIENT, CUT_STOP };

/* One request, from MHD's URI callback until both sides let go of it. */
struct xchg {
    struct ld_proxy *p;
    /* MHD's side only. */
    struct MHD_Connection *mc;
    char *target; /* the request target as received */
    const char *method;
    bool started, handed, timeout_off;
    struct ld_proxy_verdict verdict;
    char *body;
    size_t len, cap;
    size_t dropped; /* bytes of a refused body read and thrown away */
    int fd;         /* the client's socket, -1 when MHD does not tell */
    /* The upstream thread only (hdrs is built by MHD's side before the
     * hand-over; status and rhdrs are read by it once headers_done is set,
     * result and errbuf once done is, both under p->mu). */
    struct xchg *prev, *next; /* in p->running while added */
    CURL *easy;
    bool added;
    struct curl_slist *hdrs;
    char errbuf[CURL_ERROR_SIZE];
    CURLcode result;
    long status;
    struct curl_slist *rhdrs; /* response header lines, "Name: value" */
    size_t blocked;           /* the piece curl holds while paused */
    /* Under p->mu. */
    int refs;
    struct xchg *in_next, *todo_next, *wake_next; /* in p->incoming, todo, wakes */
    bool wake_due;
    bool in_todo, want_unpause;
    bool suspended, polled; /* polled: in p->epfd for hang-ups */
    bool headers_done, done, paused, refused_prereq;
    bool gone; /* the client hung up or MHD ended the request */
    enum cut_why cut;
    struct ld_proxy_verdict fail; /* status != 0: the answer to a failed start */
    char *buf;                    /* the relay buffer, NULL while empty */
    size_t boff, blen, bcap;
};

struct ld_proxy {
    struct MHD_Daemon *daemon;
    struct ld_http_conns *conns; /* idle connections and eviction */
    struct ld_state *st;
    struct ld_metrics *m;
    struct ld_transport *tr; /* the upstream thread's */
    CURLM *multi;            /* the upstream thread's; curl_multi_wakeup from any */
    struct xchg *running;    /* the upstream thread's */
    struct xchg *wakes;      /* under mu: connections to resume, see wake_later_locked */
    int epfd;                /* suspended clients' sockets, for hang-ups */
    pthread_t thread;
    bool thread_started, listening;
    struct ld_state_listener listener;
    unsigned int idle_s;
    int port;

    pthread_mutex_t mu;
    struct xchg *incoming, *incoming_tail; /* handed over, not started */
    struct xchg *todo;
    size_t body_bytes; /* what every xchg's body holds (their cap) */
    bool stopping;
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

/* Runs with st's mutex held: only wakes the upstream thread, which judges
 * the writes in flight. */
static void on_publish(void *arg)
{
    struct ld_proxy *p = arg;
    curl_multi_wakeup(p->multi);
}

/* ---- an exchange's life (p->mu held) ---- */

/* Frees q's body and gives its room back to BODY_BUDGET. */
static void body_drop_locked(struct xchg *q)
{
    q->p->body_bytes -= q->cap;
    free(q->body);
    q->body = NULL;
    q->len = q->cap = 0;
}

static void xchg_free(struct xchg *q)
{
    curl_slist_free_all(q->rhdrs);
    ld_transport_curl_free_headers(q->hdrs);
    free(q->buf);
    body_drop_locked(q);
    free(q->target);
    free(q);
}

static void release_locked(struct xchg *q)
{
    if (--q->refs == 0)
        xchg_free(q);
}

/* Returns true when the upstream thread must be woken (after unlocking). */
static bool push_todo_locked(struct xchg *q)
{
    if (q->in_todo)
        return false;
    q->in_todo = true;
    q->refs++;
    q->todo_next = q->p->todo;
    q->p->todo = q;
    return true;
}

/* Only on MHD's thread, from a handler or the content reader. */
static void suspend_locked(struct xchg *q)
{
    if (q->fd >= 0 && !q->polled) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLRDHUP;
        ev.data.ptr = q;
        if (epoll_ctl(q->p->epfd, EPOLL_CTL_ADD, q->fd, &ev) == 0)
            q->polled = true;
        else
            ld_log(LD_LOG_DEBUG, "api proxy: cannot watch a client for hang-ups: %s",
                   strerror(errno));
    }
    q->suspended = true;
    MHD_suspend_connection(q->mc);
}

static void resume_locked(struct xchg *q)
{
    if (!q->suspended)
        return;
    q->suspended = false;
    if (q->polled) {
        epoll_ctl(q->p->epfd, EPOLL_CTL_DEL, q->fd, NULL);
        q->polled = false;
    }
    MHD_resume_connection(q->mc);
}

/* ---- answers (MHD's thread) ---- */

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static void req_info(struct xchg *q, struct ld_proxy_req *r)
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

static void decide(struct xchg *q)
{
    struct ld_proxy_req r;
    struct view_hold h;
    req_info(q, &r);
    view_take(q->p, &h);
    ld_proxy_decide(&r, &h.v, ld_mono_ms(), &q->verdict);
    view_drop(&h);
}

static enum MHD_Result queue(struct xchg *q, unsigned int status,
                             struct MHD_Response *resp)
{
    enum MHD_Result ret = MHD_queue_response(q->mc, status, resp);
    MHD_destroy_response(resp);
    ld_metrics_proxy_request(q->p->m, q->method, (long)status);
    return ret;
}

/* Answers v (status != 0) with its metav1.Status body. */
static enum MHD_Result answer_status(struct xchg *q, const struct ld_proxy_verdict *v)
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
    if (v->status == 429)
        MHD_add_response_header(resp, "Retry-After", "1");
    if (v->refused) {
        ld_metrics_proxy_refused(q->p->m);
        ld_log(LD_LOG_INFO, "api proxy: refused %s %.200s: %s", q->method, q->target,
               v->message);
    }
    return queue(q, v->status, resp);
}

static void verdict_printf(struct ld_proxy_verdict *v, unsigned int status,
                           const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void verdict_printf(struct ld_proxy_verdict *v, unsigned int status,
                           const char *reason, const char *fmt, ...)
{
    va_list ap;
    memset(v, 0, sizeof(*v));
    v->status = status;
    v->reason = reason;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof(v->message), fmt, ap);
    va_end(ap);
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

/* MHD's reader of a relayed body. With nothing buffered and the exchange
 * still running it suspends the connection and returns 0 (MHD 0.9.75
 * calls again at once unless the connection is suspended); the upstream
 * thread resumes it with the next piece or the end. */
static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct xchg *q = cls;
    struct ld_proxy *p = q->p;
    ssize_t n = 0;
    bool wake = false;
    (void)pos;
    pthread_mutex_lock(&p->mu);
    if (q->gone) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
        goto out;
    }
    size_t have = q->blen - q->boff;
    if (have > 0) {
        size_t take = have < max ? have : max;
        memcpy(buf, q->buf + q->boff, take);
        q->boff += take;
        n = (ssize_t)take;
        /* Room for the piece curl holds: it may come. */
        if (q->paused && !q->want_unpause &&
            q->bcap - (q->blen - q->boff) >= q->blocked) {
            q->want_unpause = true;
            wake = push_todo_locked(q);
        }
        goto out;
    }
    if (q->done) {
        n = q->cut == CUT_NONE && q->result == CURLE_OK
                ? MHD_CONTENT_READER_END_OF_STREAM
                : MHD_CONTENT_READER_END_WITH_ERROR;
        goto out;
    }
    if (p->stopping) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
        goto out;
    }
    /* Empty: a quiet watch keeps no buffer. */
    if (!q->paused) {
        free(q->buf);
        q->buf = NULL;
        q->boff = q->blen = q->bcap = 0;
    }
    suspend_locked(q);
out:
    pthread_mutex_unlock(&p->mu);
    if (wake)
        curl_multi_wakeup(p->multi);
    return n;
}

static enum MHD_Result respond_upstream(struct xchg *q)
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
        MHD_create_response_from_callback(size, RESPONSE_BLOCK, read_body, q, NULL);
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

/* The answer to an exchange that ended before its headers were in. */
static enum MHD_Result answer_failure(struct xchg *q)
{
    struct ld_proxy_verdict v;
    if (q->fail.status)
        return answer_status(q, &q->fail);
    if (q->refused_prereq || q->cut == CUT_LEADERSHIP) {
        struct view_hold h;
        view_take(q->p, &h);
        bool back = ld_proxy_still_leads(&q->verdict, &h.v, ld_mono_ms(), &v);
        view_drop(&h);
        if (q->cut == CUT_LEADERSHIP || back) {
            /* Cut in flight; or refused by the last check, with
             * leadership back by now (the refusal stands). */
            verdict_printf(&v, 503, "ServiceUnavailable", "%s",
                           q->cut == CUT_LEADERSHIP
                               ? "write cut by leaderd: this replica stopped leading "
                                 "while the request was in flight to the API server, "
                                 "which may or may not have applied it"
                               : "write refused by leaderd: this replica was not "
                                 "leading when the request was about to be sent");
            v.refused = q->cut != CUT_LEADERSHIP;
        }
        return answer_status(q, &v);
    }
    verdict_printf(&v, 502, "InternalError",
                   "leaderd's API proxy: the API server did not answer: %s%s%s",
                   curl_easy_strerror(q->result), q->errbuf[0] ? ": " : "", q->errbuf);
    return answer_status(q, &v);
}

/* ---- the hand-over (MHD's thread) ---- */

/* Adds each request header that passes to q->hdrs. */
static enum MHD_Result add_request_header(void *cls, enum MHD_ValueKind kind,
                                          const char *key, const char *value)
{
    struct xchg *q = cls;
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

static bool append_header(struct xchg *q, const char *line)
{
    struct curl_slist *l = curl_slist_append(q->hdrs, line);
    if (l)
        q->hdrs = l;
    return l != NULL;
}

/* Queues q for the upstream thread and suspends its connection until the
 * answer's headers are in (or the exchange ended). */
static enum MHD_Result hand_over(struct xchg *q)
{
    struct ld_proxy *p = q->p;
    struct ld_proxy_verdict v;
    if (MHD_get_connection_values(q->mc, MHD_HEADER_KIND, add_request_header, q) < 0 ||
        !append_header(q, "Expect:") ||
        (!header(q->mc, "Content-Type") && !append_header(q, "Content-Type:"))) {
        verdict_printf(&v, 500, "InternalError", "leaderd's API proxy: out of memory");
        return answer_status(q, &v);
    }
    pthread_mutex_lock(&p->mu);
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        verdict_printf(&v, 503, "ServiceUnavailable", "leaderd's API proxy is stopping");
        return answer_status(q, &v);
    }
    /* From here the request may take as long as the upstream does (a
     * slow write, a watch): MHD's idle timeout is for silent clients. */
    MHD_set_connection_option(q->mc, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    q->timeout_off = true;
    q->handed = true;
    q->refs++; /* the upstream thread's */
    if (p->incoming_tail)
        p->incoming_tail->in_next = q;
    else
        p->incoming = q;
    p->incoming_tail = q;
    suspend_locked(q);
    pthread_mutex_unlock(&p->mu);
    curl_multi_wakeup(p->multi);
    return MHD_YES;
}

/* MHD calls the handler again once the upstream thread resumed q. */
static enum MHD_Result on_resumed(struct xchg *q)
{
    struct ld_proxy *p = q->p;
    pthread_mutex_lock(&p->mu);
    bool gone = q->gone, headers = q->headers_done, done = q->done;
    enum cut_why cut = q->cut;
    if (!gone && !headers && !done)
        suspend_locked(q); /* not for us yet */
    pthread_mutex_unlock(&p->mu);
    if (gone || cut == CUT_CLIENT || cut == CUT_STOP)
        return MHD_NO;
    if (headers)
        return respond_upstream(q);
    if (!done)
        return MHD_YES;
    return answer_failure(q);
}

/* Reads a body piece into q->body, or drops it for an answer already
 * decided. */
static enum MHD_Result take_body(struct xchg *q, const char *upload, size_t n)
{
    struct ld_proxy *p = q->p;
    /* A body that will not be forwarded is read and dropped, so the
     * answer reaches a client still sending it (closing on it could reset
     * the connection before the answer is read); past DROP_LIMIT the
     * connection is closed all the same. */
    if (q->verdict.status) {
        q->dropped += n;
        return q->dropped > DROP_LIMIT ? MHD_NO : MHD_YES;
    }
    if (n > LD_PROXY_MAX_BODY - q->len) {
        pthread_mutex_lock(&p->mu);
        body_drop_locked(q);
        pthread_mutex_unlock(&p->mu);
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
        size_t more = ncap - q->cap;
        pthread_mutex_lock(&p->mu);
        bool room = p->body_bytes + more <= BODY_BUDGET;
        if (room)
            p->body_bytes += more;
        else
            body_drop_locked(q);
        pthread_mutex_unlock(&p->mu);
        if (!room) {
            verdict_printf(&q->verdict, 429, "TooManyRequests",
                           "leaderd's API proxy holds too many request bodies at once; "
                           "retry");
            return MHD_YES;
        }
        char *nb = realloc(q->body, ncap);
        if (!nb) {
            pthread_mutex_lock(&p->mu);
            p->body_bytes -= more;
            pthread_mutex_unlock(&p->mu);
            return MHD_NO;
        }
        q->body = nb;
        q->cap = ncap;
    }
    memcpy(q->body + q->len, upload, n);
    q->len += n;
    return MHD_YES;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct xchg *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->p = cls;
    q->mc = c;
    q->fd = -1;
    q->refs = 1; /* MHD's side */
    q->target = strdup(uri ? uri : "");
    if (!q->target) {
        free(q);
        return NULL;
    }
    return q;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **req_cls)
{
    struct ld_proxy *p = cls;
    struct xchg *q = *req_cls;
    (void)url;
    (void)version;
    if (!q)
        return MHD_NO;
    if (q->handed)
        return on_resumed(q);
    if (!q->started) {
        q->started = true;
        q->mc = c;
        q->method = method;
        q->fd = ld_http_conn_fd(c);
        ld_http_conns_busy(p->conns, c);
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
        return take_body(q, upload, n);
    }
    /* The request has been read: a write is judged again. */
    if (!q->verdict.status && q->verdict.write)
        decide(q);
    if (q->verdict.status)
        return answer_status(q, &q->verdict);
    return hand_over(q);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct ld_proxy *p = cls;
    struct xchg *q = *req_cls;
    bool wake = false;
    (void)toe;
    *req_cls = NULL;
    if (!q)
        return;
    if (q->started)
        ld_http_conns_idle(p->conns, c);
    /* Idle again: the connection's own timeout applies (restarting it
     * from now, see MHD_set_connection_option). */
    if (q->timeout_off)
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, p->idle_s);
    pthread_mutex_lock(&p->mu);
    q->gone = true;
    if (q->polled) {
        epoll_ctl(p->epfd, EPOLL_CTL_DEL, q->fd, NULL);
        q->polled = false;
    }
    /* The client went away mid-answer: its exchange ends now, not at the
     * next piece the upstream sends (a quiet watch may send none). */
    if (q->handed && !q->done)
        wake = push_todo_locked(q);
    release_locked(q);
    pthread_mutex_unlock(&p->mu);
    if (wake)
        curl_multi_wakeup(p->multi);
}

/* ---- upstream (the upstream thread) ---- */

/* Resumes q's connection once curl is done with the bytes it read (see
 * run_wakes): the headers and the body piece that came with them then go
 * out together, without a suspension in between. Holds a reference. */
static void wake_later_locked(struct xchg *q)
{
    if (q->wake_due)
        return;
    q->wake_due = true;
    q->refs++;
    q->wake_next = q->p->wakes;
    q->p->wakes = q;
}

static void run_wakes(struct ld_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->wakes) {
        struct xchg *q = p->wakes;
        p->wakes = q->wake_next;
        q->wake_next = NULL;
        q->wake_due = false;
        resume_locked(q);
        release_locked(q);
    }
    pthread_mutex_unlock(&p->mu);
}

static size_t on_header(char *b, size_t size, size_t n, void *ud)
{
    struct xchg *q = ud;
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
        if (q->status >= 200) {
            pthread_mutex_lock(&q->p->mu);
            q->headers_done = true;
            wake_later_locked(q);
            pthread_mutex_unlock(&q->p->mu);
        }
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
    struct xchg *q = ud;
    size_t len = size * n, ret = len;
    pthread_mutex_lock(&q->p->mu);
    if (!q->buf) {
        size_t cap = len > RELAY_BUFFER ? len : RELAY_BUFFER;
        q->buf = malloc(cap);
        if (!q->buf) {
            ret = 0;
            goto out;
        }
        q->bcap = cap;
        q->boff = q->blen = 0;
    }
    if (q->bcap - q->blen < len && q->boff > 0) {
        memmove(q->buf, q->buf + q->boff, q->blen - q->boff);
        q->blen -= q->boff;
        q->boff = 0;
    }
    if (q->bcap - q->blen < len) {
        /* curl keeps the piece and offers it again once unpaused. */
        q->paused = true;
        q->blocked = len;
        ret = CURL_WRITEFUNC_PAUSE;
        goto out;
    }
    memcpy(q->buf + q->blen, b, len);
    q->blen += len;
    wake_later_locked(q);
out:
    pthread_mutex_unlock(&q->p->mu);
    return ret;
}

/* Right before the request goes out on an established connection: the
 * last check of a write. */
static int on_prereq(void *ud, char *ip, char *local_ip, int port, int local_port)
{
    struct xchg *q = ud;
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
    pthread_mutex_lock(&q->p->mu);
    q->refused_prereq = true;
    pthread_mutex_unlock(&q->p->mu);
    return CURL_PREREQFUNC_ABORT;
}

/* Ends q's exchange (removing its handle closes an upstream connection it
 * still used), lets MHD's side answer, and drops the upstream's reference
 * (and the todo list's too with also_todo). */
static void finish_refs(struct ld_proxy *p, struct xchg *q, enum cut_why why,
                        bool also_todo)
{
    if (q->added) {
        curl_multi_remove_handle(p->multi, q->easy);
        q->added = false;
        if (q->prev)
            q->prev->next = q->next;
        else
            p->running = q->next;
        if (q->next)
            q->next->prev = q->prev;
        q->prev = q->next = NULL;
    }
    if (q->easy)
        curl_easy_cleanup(q->easy);
    q->easy = NULL;
    ld_transport_curl_free_headers(q->hdrs);
    q->hdrs = NULL;
    pthread_mutex_lock(&p->mu);
    /* curl is done with it: the budget need not wait for the answer. */
    body_drop_locked(q);
    q->done = true;
    if (q->cut == CUT_NONE)
        q->cut = why;
    resume_locked(q);
    if (also_todo)
        q->refs--; /* the upstream's is still held: never the last */
    release_locked(q);
    pthread_mutex_unlock(&p->mu);
}

static void finish(struct ld_proxy *p, struct xchg *q, enum cut_why why)
{
    finish_refs(p, q, why, false);
}

static void cut_leadership(struct ld_proxy *p, struct xchg *q)
{
    ld_metrics_proxy_aborted(p->m);
    ld_log(LD_LOG_WARN,
           "api proxy: cut %s %.200s in flight: this replica stopped leading", q->method,
           q->target);
    finish(p, q, CUT_LEADERSHIP);
}

static void fail_start(struct ld_proxy *p, struct xchg *q, unsigned int status,
                       const char *reason, const char *msg)
{
    pthread_mutex_lock(&p->mu);
    verdict_printf(&q->fail, status, reason, "leaderd's API proxy: %s", msg);
    pthread_mutex_unlock(&p->mu);
    finish(p, q, CUT_NONE);
}

static CURLcode setup_easy(struct xchg *q)
{
    CURL *e = q->easy;
    CURLcode c;

#define SETOPT(opt, val)                                                                 \
    do {                                                                                 \
        if ((c = curl_easy_setopt(e, opt, val)) != CURLE_OK)                             \
            return c;                                                                    \
    } while (0)

    SETOPT(CURLOPT_PRIVATE, q);
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
    /* One exchange per upstream connection, as each client has its own:
     * over HTTP/2 all exchanges of the one multi handle would share a
     * connection, and a stream paused for a slow client (libcurl 7.88's
     * HTTP/2 pausing has known stalls) could hold the others back. */
    SETOPT(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
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
    return CURLE_OK;
}

/* Starts a handed-over exchange (q's fields of MHD's side are frozen from
 * the hand-over until the answer: the handler runs again only once
 * resumed). */
static void start(struct ld_proxy *p, struct xchg *q, bool stopping)
{
    struct ld_errinfo err;
    pthread_mutex_lock(&p->mu);
    bool gone = q->gone;
    pthread_mutex_unlock(&p->mu);
    if (stopping || gone) {
        finish(p, q, stopping ? CUT_STOP : CUT_CLIENT);
        return;
    }
    q->easy = ld_transport_curl_raw_easy(p->tr, q->target, &q->hdrs, &err);
    if (!q->easy) {
        bool bad = err.code == LD_EINVAL;
        fail_start(p, q, bad ? 400 : 500, bad ? "BadRequest" : "InternalError", err.msg);
        return;
    }
    CURLcode c = setup_easy(q);
    if (c != CURLE_OK) {
        fail_start(p, q, 500, "InternalError", curl_easy_strerror(c));
        return;
    }
    if (curl_multi_add_handle(p->multi, q->easy) != CURLM_OK) {
        fail_start(p, q, 500, "InternalError", "libcurl refused the request");
        return;
    }
    q->added = true;
    q->prev = NULL;
    q->next = p->running;
    if (p->running)
        p->running->prev = q;
    p->running = q;
}

/* A reader asked for an unpause, or the client is gone; drops the todo
 * list's reference. q stays marked in_todo until here, though the list
 * was taken: MHD's side, which may ask again meanwhile (a reader's unpause,
 * then the completion of a client gone), must not push it onto the next
 * list through the todo_next this round is still walking. What it asks is
 * read here, with the mark cleared in the same hold of the mutex. */
static void serve_todo(struct ld_proxy *p, struct xchg *q)
{
    pthread_mutex_lock(&p->mu);
    q->in_todo = false;
    bool gone = q->gone, unpause = q->want_unpause && q->paused;
    q->want_unpause = false;
    if (unpause)
        q->paused = false;
    pthread_mutex_unlock(&p->mu);
    if (q->added && gone) {
        finish_refs(p, q, CUT_CLIENT, true);
        return;
    }
    if (q->added && unpause)
        /* May hand the held piece to on_body at once. */
        curl_easy_pause(q->easy, CURLPAUSE_CONT);
    pthread_mutex_lock(&p->mu);
    release_locked(q);
    pthread_mutex_unlock(&p->mu);
}

/* Clients that hung up while suspended (p->mu held). */
static bool take_hangups_locked(struct ld_proxy *p)
{
    struct epoll_event evs[HANGUPS_PER_ROUND];
    bool any = false;
    int n = epoll_wait(p->epfd, evs, HANGUPS_PER_ROUND, 0);
    for (int i = 0; i < n; i++) {
        struct xchg *q = evs[i].data.ptr;
        epoll_ctl(p->epfd, EPOLL_CTL_DEL, q->fd, NULL);
        q->polled = false;
        q->gone = true;
        push_todo_locked(q);
        any = true;
    }
    return any;
}

/* Judges the writes whose answer has not begun; returns the time
 * (monotonic ms) by which they must be judged again. The clock is read
 * once the view is in hand: a thread held up on the way judges by the
 * time it is, not by the time it was. */
static int64_t gate_writes(struct ld_proxy *p)
{
    int64_t now = 0;
    int64_t due = INT64_MAX;
    struct view_hold h;
    bool have_view = false;
    struct xchg *next;
    for (struct xchg *q = p->running; q; q = next) {
        next = q->next;
        if (!q->verdict.write || q->headers_done)
            continue;
        if (!have_view) {
            view_take(p, &h);
            have_view = true;
            now = ld_mono_ms();
        }
        if (!ld_proxy_still_leads(&q->verdict, &h.v, now, NULL)) {
            cut_leadership(p, q);
            continue;
        }
        int64_t until = ld_proxy_lead_until(&q->verdict, &h.v);
        if (until < due)
            due = until;
    }
    if (have_view)
        view_drop(&h);
    return due;
}

/* How long the thread may sleep from now: until due, read after the work
 * of the round (curl's own, which can be long: TLS handshakes), so that
 * the time spent on it does not push the next judgment past due. */
static int sleep_ms(int64_t due)
{
    int64_t left = due - ld_mono_ms();
    if (left > POLL_SLICE_MS)
        left = POLL_SLICE_MS;
    return left < 0 ? 0 : (int)left;
}

static void collect_done(struct ld_proxy *p)
{
    CURLMsg *msg;
    int left;
    /* Bounded by the handles added: each is done once. */
    while ((msg = curl_multi_info_read(p->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *e = msg->easy_handle;
        CURLcode result = msg->data.result;
        struct xchg *q = NULL;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&q);
        if (!q)
            continue;
        q->result = result;
        finish(p, q, CUT_NONE);
    }
}

static void *upstream_main(void *arg)
{
    struct ld_proxy *p = arg;
    struct curl_waitfd w = {.fd = p->epfd, .events = CURL_WAIT_POLLIN, .revents = 0};
    for (;;) {
        pthread_mutex_lock(&p->mu);
        take_hangups_locked(p);
        struct xchg *in = p->incoming, *todo = p->todo;
        p->incoming = p->incoming_tail = NULL;
        p->todo = NULL;
        bool stopping = p->stopping;
        pthread_mutex_unlock(&p->mu);

        while (in) {
            struct xchg *next = in->in_next;
            in->in_next = NULL;
            start(p, in, stopping);
            in = next;
        }
        while (todo) {
            struct xchg *next = todo->todo_next;
            todo->todo_next = NULL;
            serve_todo(p, todo);
            todo = next;
        }
        run_wakes(p);
        if (stopping) {
            while (p->running)
                finish(p, p->running, CUT_STOP);
            break;
        }
        int64_t due = gate_writes(p);
        int running = 0;
        curl_multi_perform(p->multi, &running);
        run_wakes(p);
        collect_done(p);
        w.revents = 0;
        curl_multi_poll(p->multi, &w, 1, sleep_ms(due), NULL);
    }
    return NULL;
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

static int start_thread(struct ld_proxy *p)
{
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc != 0)
        return rc;
    rc = pthread_attr_setstacksize(&attr, UPSTREAM_STACK);
    if (rc == 0)
        rc = pthread_create(&p->thread, &attr, upstream_main, p);
    pthread_attr_destroy(&attr);
    return rc;
}

/* Drops the references the todo list still holds once the upstream
 * thread is gone (MHD's completions may have queued some). */
static void drain_todo(struct ld_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->todo) {
        struct xchg *q = p->todo;
        p->todo = q->todo_next;
        q->in_todo = false;
        release_locked(q);
    }
    pthread_mutex_unlock(&p->mu);
}

/* Frees what ld_proxy_start built; the thread and MHD are stopped. */
static void proxy_free(struct ld_proxy *p)
{
    if (p->listening)
        ld_state_unlisten(p->st, &p->listener);
    drain_todo(p);
    if (p->multi)
        curl_multi_cleanup(p->multi);
    if (p->epfd >= 0)
        close(p->epfd);
    ld_http_conns_free(p->conns);
    ld_transport_free(p->tr);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* The connection cap: the configured one, or the sidecar's default, but
 * never more than RLIMIT_NOFILE can serve, counting two descriptors for
 * each (the client's and its upstream connection) and the idle upstream
 * ones. ld_http_limits_of would count one each: past the limit a client
 * would be taken in and then answered 502 for want of a descriptor, and
 * the election's own connection to the API server could starve. */
static unsigned int proxy_max_connections(const struct ld_proxy_options *opts)
{
    struct rlimit rl;
    unsigned int conns =
        opts && opts->max_connections ? opts->max_connections : LD_HTTP_MAX_CONNECTIONS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        rlim_t used = FD_RESERVE + UPSTREAM_IDLE;
        rlim_t room = rl.rlim_cur > used + 2 ? (rl.rlim_cur - used) / 2 : 1;
        if (room < conns)
            conns = (unsigned int)room; /* ld_http_limits_of keeps a floor */
    }
    return conns;
}

struct ld_proxy *ld_proxy_start(const char *host, int port,
                                const struct ld_kube_config *kube, struct ld_state *st,
                                struct ld_metrics *m, const struct ld_proxy_options *opts,
                                char *err, size_t errlen)
{
    struct ld_proxy *p = NULL;
    struct ld_errinfo ei;
    struct ld_http_limits lim;
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
    p->epfd = -1;
    p->st = st;
    p->m = m;
    struct ld_http_options ho = {.max_connections = proxy_max_connections(opts)};
    ld_http_limits_of(&ho, &lim);
    p->idle_s =
        opts && opts->idle_timeout_s ? opts->idle_timeout_s : LD_HTTP_IDLE_TIMEOUT_S;
    p->tr = ld_transport_curl_new(kube, &ei);
    if (!p->tr) {
        snprintf(err, errlen, "api-proxy: %s", ei.msg);
        goto fail;
    }
    ld_transport_curl_set_user_agent_suffix(p->tr, "api-proxy");
    p->conns = ld_http_conns_new(lim.evict_at, err, errlen);
    p->multi = curl_multi_init();
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!p->conns || !p->multi || p->epfd < 0) {
        snprintf(err, errlen, "api-proxy: cannot set up the upstream side");
        goto fail;
    }
    curl_multi_setopt(p->multi, CURLMOPT_MAXCONNECTS, UPSTREAM_IDLE);
    fd = open_loopback(host, port, err, errlen);
    if (fd < 0)
        goto fail;
    p->port = ld_http_bound_port(fd);
    p->listener = (struct ld_state_listener){.fn = on_publish, .arg = p};
    ld_state_listen(st, &p->listener);
    p->listening = true;
    if (start_thread(p) != 0) {
        snprintf(err, errlen, "api-proxy: cannot start the upstream thread");
        goto fail;
    }
    p->thread_started = true;
    p->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
            MHD_ALLOW_SUSPEND_RESUME,
        0, NULL, NULL, on_request, p, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
        lim.max_conns, MHD_OPTION_CONNECTION_TIMEOUT, p->idle_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, p, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        p, MHD_OPTION_NOTIFY_CONNECTION, ld_http_conns_notify, p->conns,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)LD_THREAD_STACK, MHD_OPTION_END);
    if (!p->daemon) {
        snprintf(err, errlen, "api-proxy: cannot start the server on port %d", p->port);
        goto fail;
    }
    return p;
fail:
    if (fd >= 0)
        close(fd);
    if (p->thread_started) {
        pthread_mutex_lock(&p->mu);
        p->stopping = true;
        pthread_mutex_unlock(&p->mu);
        curl_multi_wakeup(p->multi);
        pthread_join(p->thread, NULL);
    }
    proxy_free(p);
    return NULL;
}

void ld_proxy_stop(struct ld_proxy *p)
{
    if (!p)
        return;
    /* From here nothing is handed over or suspended again; the upstream
     * thread cuts every exchange, which resumes every suspended
     * connection: MHD must not be stopped with one. */
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_mutex_unlock(&p->mu);
    curl_multi_wakeup(p->multi);
    pthread_join(p->thread, NULL);
    MHD_stop_daemon(p->daemon);
    proxy_free(p);
}

int ld_proxy_port(const struct ld_proxy *p)
{
    return p ? p->port : -1;
}
