/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy: the API write gate's server (see proxy.h): libmicrohttpd on the
 * loopback address, libcurl to the API server, event-driven on both sides.
 * This file is MHD's side and the proxy's life (ld_proxy_start/stop); the
 * upstream thread is proxy_upstream.[ch], what the two share (the
 * exchange and the hub between them) proxy_exchange.[ch].
 *
 * Two threads serve every connection. MHD's polling thread reads a
 * request (headers, then the body into memory, at most LD_PROXY_MAX_BODY,
 * within the body deadline) and judges it; a request to forward is handed
 * to the upstream thread (at most LD_PROXY_MAX_EXCHANGES at once, watches
 * included) and its connection suspended. The upstream thread, which owns every
 * easy handle, resumes the connection once the upstream's headers are in
 * (or the exchange failed or was cut) and relays the body through a small
 * buffer per exchange. MHD's content reader drains that buffer; when it
 * is empty the reader suspends the connection and returns 0, and the next
 * piece resumes it. When the buffer is full curl's write callback pauses
 * the transfer, and the reader, once it made room, asks the upstream
 * thread to unpause it: a slow client slows the upstream instead of
 * filling memory.
 *
 * A suspended connection is not watched by MHD, so a client that hangs
 * up while it waits (a slow write, a quiet watch) would go unnoticed: its
 * socket is registered for EPOLLRDHUP in an epoll set that curl_multi_poll
 * waits on too, and the hang-up cuts the exchange at once. A hang-up MHD
 * sees itself (a failed send) ends the request, and its completion
 * callback cuts the exchange the same way.
 *
 * Memory: an idle client connection costs MHD's connection and its pool
 * (CONNECTION_MEMORY) and a bookkeeping record; a request in flight adds
 * its body until curl is done with it (all bodies together at most
 * BODY_BUDGET), the relay buffer while bytes flow, the easy handle and an
 * upstream connection. Idle upstream connections are shared by all
 * clients (at most LD_PROXY_UPSTREAM_IDLE).
 */
#include "proxy.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "clock.h"
#include "http.h"
#include "http_conn.h"
#include "http_socket.h"
#include "log.h"
#include "memtrim.h"
#include "proxy_exchange.h"
#include "proxy_gate.h"
#include "proxy_upstream.h"

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
/* Block size of MHD's reads from a relayed body. */
#define RESPONSE_BLOCK (8 * 1024)
/* Descriptors left to the rest of the process when the connection cap is
 * sized from RLIMIT_NOFILE, as the sidecar's server leaves (http_listen.c). */
#define FD_RESERVE 64
/* How long a stop waits for the answers already decided to be written: a
 * client that reads nothing does not hold the exit longer. */
#define STOP_GRACE_MS 1000

struct ld_proxy {
    struct ld_pxe_hub hub;
    struct ld_proxy_upstream *up;
    struct MHD_Daemon *daemon;
    struct ld_http_conns *conns; /* idle connections and eviction */
    struct ld_state_listener listener;
    bool listening;
    unsigned int idle_s;
    unsigned int body_timeout_ms;
    int port;
    bool impersonation; /* ld_proxy_options.impersonation */
};

/* Runs with st's mutex held: only wakes the upstream thread, which judges
 * the writes in flight. */
static void on_publish(void *arg)
{
    struct ld_proxy *p = arg;
    ld_pxe_wake(&p->hub);
}

/* ---- answers (MHD's thread) ---- */

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static enum MHD_Result note_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    ld_proxy_req_note_header(cls, key, value);
    return MHD_YES;
}

/* What the gate sees of q; its body only once read whole (body_read). */
static void req_info(struct ld_pxe *q, const char *version, bool body_read,
                     struct ld_proxy_req *r)
{
    const char *cl = header(q->mc, "Content-Length");
    memset(r, 0, sizeof(*r));
    r->method = q->method;
    r->target = q->target;
    r->version = version;
    MHD_get_connection_values(q->mc, MHD_HEADER_KIND, note_header, r);
    r->connection = header(q->mc, "Connection");
    r->upgrade = header(q->mc, "Upgrade");
    r->shard = header(q->mc, LD_PROXY_SHARD_HEADER);
    r->body_read = body_read;
    if (body_read) {
        r->body = q->body.data;
        r->body_len = q->body.len;
    }
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

static void decide(struct ld_proxy *p, struct ld_pxe *q, const char *version,
                   bool body_read)
{
    struct ld_proxy_req r;
    struct ld_pxe_view h;
    struct ld_proxy_policy pol = {.port = p->port, .impersonation = p->impersonation};
    req_info(q, version, body_read, &r);
    ld_pxe_view_take(q->hub, &h);
    ld_proxy_judge(&r, &pol, &h.v, ld_mono_ms(), &q->verdict);
    ld_pxe_view_drop(&h);
}

static enum MHD_Result queue(struct ld_pxe *q, unsigned int status,
                             struct MHD_Response *resp)
{
    enum MHD_Result ret = MHD_queue_response(q->mc, status, resp);
    MHD_destroy_response(resp);
    ld_metrics_proxy_request(q->hub->m, q->method, (long)status);
    return ret;
}

/* Answers v (status != 0) with its metav1.Status body. */
static enum MHD_Result answer_status(struct ld_pxe *q, const struct ld_proxy_verdict *v)
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
        ld_metrics_proxy_refused(q->hub->m);
        ld_log(LD_LOG_INFO, "api proxy: refused %s %.200s: %s", q->method, q->target,
               v->message);
    }
    return queue(q, v->status, resp);
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
    struct ld_pxe *q = cls;
    struct ld_pxe_hub *hub = q->hub;
    ssize_t n = 0;
    bool wake = false;
    (void)pos;
    pthread_mutex_lock(&hub->mu);
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
            wake = ld_pxe_todo_locked(q);
        }
        goto out;
    }
    if (q->done) {
        n = q->cut == LD_PXE_CUT_NONE && q->result == CURLE_OK
                ? MHD_CONTENT_READER_END_OF_STREAM
                : MHD_CONTENT_READER_END_WITH_ERROR;
        goto out;
    }
    if (hub->stopping) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
        goto out;
    }
    /* Empty: a quiet watch keeps no buffer. */
    if (!q->paused) {
        free(q->buf);
        q->buf = NULL;
        q->boff = q->blen = q->bcap = 0;
    }
    ld_pxe_suspend_locked(q);
out:
    pthread_mutex_unlock(&hub->mu);
    if (wake)
        ld_pxe_wake(hub);
    return n;
}

static enum MHD_Result respond_upstream(struct ld_pxe *q)
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
static enum MHD_Result answer_failure(struct ld_pxe *q)
{
    struct ld_proxy_verdict v;
    if (q->fail.status)
        return answer_status(q, &q->fail);
    if (q->refused_prereq || q->cut == LD_PXE_CUT_LEADERSHIP) {
        struct ld_pxe_view h;
        ld_pxe_view_take(q->hub, &h);
        bool back = ld_proxy_still_leads(&q->verdict, &h.v, ld_mono_ms(), &v);
        if (q->cut == LD_PXE_CUT_LEADERSHIP) {
            ld_pxe_verdict_printf(&v, 503, "ServiceUnavailable", "%s",
                                  q->sent
                                      ? "write cut by leaderd: the term this replica "
                                        "sent it in ended (its renew deadline passed, "
                                        "or another holder is in view) while the "
                                        "request was in flight to the API server, "
                                        "which may or may not have applied it"
                                      : "write cut by leaderd: this replica stopped "
                                        "leading before the request was sent; it was "
                                        "not sent");
        } else if (back) {
            /* Refused by the last check, with leadership back by now: the
             * holder is this replica again, and the refusal stands. */
            ld_pxe_verdict_printf(&v, 503, "ServiceUnavailable",
                                  "write refused by leaderd: %s (this replica) was not "
                                  "leading when the request was about to be sent; it "
                                  "holds the Lease again now, the refusal stands",
                                  h.v.snap->identity);
            v.refused = true;
        }
        ld_pxe_view_drop(&h);
        return answer_status(q, &v);
    }
    if (q->cut == LD_PXE_CUT_STOP) {
        const char *fate = "";
        if (q->verdict.write)
            fate = q->sent ? ": the write was cut in flight to the API server, which "
                             "may or may not have applied it"
                           : "; the write was not sent";
        ld_pxe_verdict_printf(&v, 503, "ServiceUnavailable",
                              "leaderd's API proxy is stopping%s", fate);
        return answer_status(q, &v);
    }
    if (q->verdict.write && q->sent)
        /* Sent once and never again (proxy_upstream.c): the client decides
         * whether to retry, after reading what the API server holds. */
        ld_pxe_verdict_printf(&v, 502, "InternalError",
                              "leaderd's API proxy: the connection to the API server "
                              "failed after the write was sent (%s%s%s); it may or may "
                              "not have been applied",
                              curl_easy_strerror(q->result), q->errbuf[0] ? ": " : "",
                              q->errbuf);
    else
        ld_pxe_verdict_printf(
            &v, 502, "InternalError",
            "leaderd's API proxy: the API server did not answer: %s%s%s",
            curl_easy_strerror(q->result), q->errbuf[0] ? ": " : "", q->errbuf);
    return answer_status(q, &v);
}

/* ---- the hand-over (MHD's thread) ---- */

/* Adds each request header that passes to q->hdrs; on failure sets
 * q->hdrs_failed (MHD_get_connection_values only stops early, it does not
 * say so) and stops. */
static enum MHD_Result add_request_header(void *cls, enum MHD_ValueKind kind,
                                          const char *key, const char *value)
{
    struct ld_pxe *q = cls;
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
    if (!l) {
        q->hdrs_failed = true;
        return MHD_NO;
    }
    q->hdrs = l;
    return MHD_YES;
}

static bool append_header(struct ld_pxe *q, const char *line)
{
    struct curl_slist *l = curl_slist_append(q->hdrs, line);
    if (l)
        q->hdrs = l;
    return l != NULL;
}

/* Queues q for the upstream thread and suspends its connection until the
 * answer's headers are in (or the exchange ended). Past
 * LD_PROXY_MAX_EXCHANGES running at once (watches too) it answers 429
 * instead. */
static enum MHD_Result hand_over(struct ld_pxe *q)
{
    struct ld_pxe_hub *hub = q->hub;
    struct ld_proxy_verdict v;
    /* A request missing some of its headers must not go out: without its
     * Impersonate-User it would run with leaderd's own rights. */
    if (MHD_get_connection_values(q->mc, MHD_HEADER_KIND, add_request_header, q) < 0 ||
        q->hdrs_failed || !append_header(q, "Expect:") ||
        (!header(q->mc, "Content-Type") && !append_header(q, "Content-Type:"))) {
        ld_pxe_verdict_printf(&v, 500, "InternalError",
                              "leaderd's API proxy: out of memory");
        return answer_status(q, &v);
    }
    pthread_mutex_lock(&hub->mu);
    if (hub->stopping) {
        pthread_mutex_unlock(&hub->mu);
        ld_pxe_verdict_printf(&v, 503, "ServiceUnavailable",
                              "leaderd's API proxy is stopping");
        return answer_status(q, &v);
    }
    if (hub->exchanges >= LD_PROXY_MAX_EXCHANGES) {
        pthread_mutex_unlock(&hub->mu);
        ld_pxe_verdict_printf(&v, 429, "TooManyRequests",
                              "leaderd's API proxy has %d requests in flight to the "
                              "API server; retry",
                              LD_PROXY_MAX_EXCHANGES);
        return answer_status(q, &v);
    }
    hub->exchanges++;
    q->counted = true;
    /* From here the request may take as long as the upstream does (a
     * slow write, a watch): MHD's idle timeout is for silent clients. */
    MHD_set_connection_option(q->mc, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    q->timeout_off = true;
    q->handed = true;
    q->refs++; /* the upstream thread's */
    if (hub->incoming_tail)
        hub->incoming_tail->in_next = q;
    else
        hub->incoming = q;
    hub->incoming_tail = q;
    ld_pxe_suspend_locked(q);
    pthread_mutex_unlock(&hub->mu);
    ld_pxe_wake(hub);
    return MHD_YES;
}

/* MHD calls the handler again once the upstream thread resumed q. */
static enum MHD_Result on_resumed(struct ld_pxe *q)
{
    struct ld_pxe_hub *hub = q->hub;
    pthread_mutex_lock(&hub->mu);
    bool gone = q->gone, headers = q->headers_done, done = q->done;
    enum ld_pxe_cut cut = q->cut;
    if (!gone && !headers && !done)
        ld_pxe_suspend_locked(q); /* not for us yet */
    pthread_mutex_unlock(&hub->mu);
    /* A relay the stop cut ends with the connection; an answer not begun
     * is given (answer_failure). */
    if (gone || cut == LD_PXE_CUT_CLIENT || (cut == LD_PXE_CUT_STOP && headers))
        return MHD_NO;
    if (headers)
        return respond_upstream(q);
    if (!done)
        return MHD_YES;
    return answer_failure(q);
}

/* Appends a body piece to q->body, or drops it for an answer already
 * decided. */
static enum MHD_Result take_body(struct ld_pxe *q, const char *upload, size_t n)
{
    struct ld_pxe_hub *hub = q->hub;
    /* A body that will not be forwarded is read and dropped, so the
     * answer reaches a client still sending it (closing on it could reset
     * the connection before the answer is read); past DROP_LIMIT the
     * connection is closed all the same. */
    if (q->verdict.status) {
        q->dropped += n;
        return q->dropped > DROP_LIMIT ? MHD_NO : MHD_YES;
    }
    /* The budget counts what bodies hold (their capacity): an append that
     * grew the buffer charges the growth, and a body that takes the sum
     * past the budget is dropped, which gives all of its share back. */
    size_t had = q->body.cap;
    enum ld_err rc = ld_buf_append(&q->body, upload, n);
    if (rc == LD_ENOMEM)
        return MHD_NO; /* nothing grew: nothing to charge */
    if (rc == LD_OK && q->body.cap == had)
        return MHD_YES;
    pthread_mutex_lock(&hub->mu);
    hub->body_bytes += q->body.cap - had;
    bool room = rc == LD_OK && hub->body_bytes <= BODY_BUDGET;
    if (!room)
        ld_pxe_body_drop_locked(q);
    pthread_mutex_unlock(&hub->mu);
    if (rc == LD_ETOOBIG) {
        /* Past LD_PROXY_MAX_BODY: judged as a request that says so. */
        struct ld_proxy_req r = {.method = q->method,
                                 .has_length = true,
                                 .content_length = (uint64_t)LD_PROXY_MAX_BODY + 1};
        struct ld_pxe_view h;
        ld_pxe_view_take(q->hub, &h);
        ld_proxy_decide(&r, &h.v, ld_mono_ms(), &q->verdict);
        ld_pxe_view_drop(&h);
    } else if (!room) {
        ld_pxe_verdict_printf(&q->verdict, 429, "TooManyRequests",
                              "leaderd's API proxy holds too many request bodies at "
                              "once; retry");
    }
    return MHD_YES;
}

/* Whether q's body missed its deadline (MHD's idle timeout bounds only
 * the silence between two pieces, not a trickle); a request not answered
 * otherwise yet gets the 408, and its body is dropped. */
static bool body_late(struct ld_pxe *q, unsigned int timeout_ms)
{
    if (ld_mono_ms() < q->body_due_ms)
        return false;
    if (!q->verdict.status) {
        pthread_mutex_lock(&q->hub->mu);
        ld_pxe_body_drop_locked(q);
        pthread_mutex_unlock(&q->hub->mu);
        ld_pxe_verdict_printf(&q->verdict, 408, "Timeout",
                              "leaderd's API proxy: the request body did not arrive "
                              "within %u ms",
                              timeout_ms);
    }
    return true;
}

/* Answers q's verdict while its body is still arriving, and closes the
 * connection: MHD 0.9.75 queues a response only once the request has been
 * read whole, so the answer is written to the client's socket here, on
 * MHD's own thread, before MHD_NO has MHD close it. */
static enum MHD_Result answer_mid_body(struct ld_pxe *q)
{
    const struct ld_proxy_verdict *v = &q->verdict;
    char *body = ld_proxy_status_json(v->status, v->reason, v->message);
    char *text = NULL;
    int n = -1;
    if (body && q->fd >= 0)
        n = asprintf(&text,
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                     "Cache-Control: no-cache, private\r\n%sConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     v->status, MHD_get_reason_phrase_for(v->status),
                     v->status == 429 ? "Retry-After: 1\r\n" : "", strlen(body), body);
    if (n > 0) {
        /* The socket's buffer is empty: an answer this small fits. */
        if (send(q->fd, text, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n)
            ld_metrics_proxy_request(q->hub->m, q->method, (long)v->status);
        shutdown(q->fd, SHUT_WR);
    }
    if (v->refused)
        ld_metrics_proxy_refused(q->hub->m);
    ld_log(LD_LOG_INFO, "api proxy: answered %s %.200s %u before its body was read: %s",
           q->method, q->target, v->status, v->message);
    free(text);
    free(body);
    return MHD_NO;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct ld_pxe *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->hub = &((struct ld_proxy *)cls)->hub;
    q->mc = c;
    q->fd = -1;
    q->refs = 1; /* MHD's side */
    ld_buf_init(&q->body, LD_PROXY_MAX_BODY);
    q->target = strdup(uri ? uri : "");
    if (!q->target) {
        free(q);
        return NULL;
    }
    pthread_mutex_lock(&q->hub->mu);
    q->hub->requests++;
    pthread_mutex_unlock(&q->hub->mu);
    return q;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **req_cls)
{
    struct ld_proxy *p = cls;
    struct ld_pxe *q = *req_cls;
    (void)url;
    if (!q)
        return MHD_NO;
    if (q->handed)
        return on_resumed(q);
    if (!q->started) {
        q->started = true;
        q->mc = c;
        q->method = method;
        q->fd = ld_http_conn_fd(c);
        q->body_due_ms = ld_mono_ms() + p->body_timeout_ms;
        ld_http_conns_busy(p->conns, c);
        decide(p, q, version, false);
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
        if (body_late(q, p->body_timeout_ms))
            return answer_mid_body(q);
        return take_body(q, upload, n);
    }
    if (body_late(q, p->body_timeout_ms))
        return answer_status(q, &q->verdict);
    /* The request has been read: a write is judged again, now with its
     * body (a POST may create one of the own Leases). */
    if (!q->verdict.status && q->verdict.write)
        decide(p, q, version, true);
    if (q->verdict.status)
        return answer_status(q, &q->verdict);
    return hand_over(q);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct ld_proxy *p = cls;
    struct ld_pxe *q = *req_cls;
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
    pthread_mutex_lock(&p->hub.mu);
    q->gone = true;
    if (q->polled) {
        epoll_ctl(p->hub.epfd, EPOLL_CTL_DEL, q->fd, NULL);
        q->polled = false;
    }
    /* The client went away mid-answer: its exchange ends now, not at the
     * next piece the upstream sends (a quiet watch may send none). */
    if (q->handed && !q->done)
        wake = ld_pxe_todo_locked(q);
    ld_pxe_release_locked(q);
    if (--p->hub.requests == 0 && p->hub.stopping)
        pthread_cond_broadcast(&p->hub.quiet);
    pthread_mutex_unlock(&p->hub.mu);
    if (wake)
        ld_pxe_wake(&p->hub);
}

/* ---- life ---- */

/* ld_http_mhd_log's argument for the proxy's server. */
static char log_prefix[] = "api proxy";

/* The loopback address the configuration checked; "localhost" is bound
 * as 127.0.0.1, not as whatever the resolver says first. */
static int open_loopback(const char *host, int port, struct ld_errinfo *err)
{
    struct ld_errinfo inner;
    const char *h = strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
    int fd = ld_http_open_listener(h, port, &inner);
    if (fd < 0)
        ld_errinfo_set(err, inner.code, "api-proxy: %s", inner.msg);
    return fd;
}

/* Frees what ld_proxy_start built; the thread and MHD are stopped. */
static void proxy_free(struct ld_proxy *p)
{
    if (p->listening)
        ld_state_unlisten(p->hub.st, &p->listener);
    ld_pxe_hub_fini(&p->hub);
    ld_http_conns_free(p->conns);
    ld_proxy_upstream_free(p->up);
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
        rlim_t used = FD_RESERVE + LD_PROXY_UPSTREAM_IDLE;
        rlim_t room = rl.rlim_cur > used + 2 ? (rl.rlim_cur - used) / 2 : 1;
        if (room < conns)
            conns = (unsigned int)room; /* ld_http_limits_of keeps a floor */
    }
    return conns;
}

struct ld_proxy *ld_proxy_start(const char *host, int port,
                                const struct ld_kube_config *kube, struct ld_state *st,
                                struct ld_metrics *m, const struct ld_proxy_options *opts,
                                struct ld_errinfo *err)
{
    struct ld_proxy *p = NULL;
    struct ld_http_limits lim;
    int fd = -1;
    struct ld_errinfo inner;
    if (!host || port < 0 || port > 65535) {
        ld_errinfo_set(err, LD_EINVAL, "api-proxy: bad address");
        return NULL;
    }
    p = calloc(1, sizeof(*p));
    if (!p) {
        ld_errinfo_set(err, LD_ENOMEM, "api-proxy: out of memory");
        return NULL;
    }
    int hub_rc = ld_pxe_hub_init(&p->hub, st, m);
    p->hub.writes = opts ? opts->writes : NULL;
    struct ld_http_options ho = {.max_connections = proxy_max_connections(opts)};
    ld_http_limits_of(&ho, &lim);
    p->idle_s =
        opts && opts->idle_timeout_s ? opts->idle_timeout_s : LD_HTTP_IDLE_TIMEOUT_S;
    p->impersonation = opts && opts->impersonation;
    p->body_timeout_ms =
        opts && opts->body_timeout_ms ? opts->body_timeout_ms : LD_PROXY_BODY_TIMEOUT_MS;
    p->up = ld_proxy_upstream_new(&p->hub, kube, err);
    if (!p->up)
        goto fail;
    p->conns = ld_http_conns_new(lim.evict_at, &inner);
    if (!p->conns) {
        ld_errinfo_set(err, inner.code, "api-proxy: %s", inner.msg);
        goto fail;
    }
    if (hub_rc != 0) {
        ld_errinfo_set(err, LD_ESYS, "api-proxy: cannot set up the upstream side");
        goto fail;
    }
    fd = open_loopback(host, port, err);
    if (fd < 0)
        goto fail;
    p->port = ld_http_bound_port(fd);
    p->listener = (struct ld_state_listener){.fn = on_publish, .arg = p};
    ld_state_listen(st, &p->listener);
    p->listening = true;
    if (ld_proxy_upstream_start(p->up) != 0) {
        ld_errinfo_set(err, LD_ESYS, "api-proxy: cannot start the upstream thread");
        goto fail;
    }
    p->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
            MHD_ALLOW_SUSPEND_RESUME,
        0, NULL, NULL, on_request, p, MHD_OPTION_EXTERNAL_LOGGER, ld_http_mhd_log,
        log_prefix, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
        lim.max_conns, MHD_OPTION_CONNECTION_TIMEOUT, p->idle_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, p, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        p, MHD_OPTION_NOTIFY_CONNECTION, ld_http_conns_notify, p->conns,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)LD_THREAD_STACK, MHD_OPTION_END);
    if (!p->daemon) {
        ld_errinfo_set(err, LD_ESYS, "api-proxy: cannot start the server on port %d",
                       p->port);
        goto fail;
    }
    return p;
fail:
    if (fd >= 0)
        close(fd);
    ld_proxy_upstream_stop(p->up);
    proxy_free(p);
    return NULL;
}

/* Waits, at most STOP_GRACE_MS, until MHD holds no request: every answer
 * decided (a cut's 503 among them) has been written to its client.
 * MHD_stop_daemon closes connections whatever they still had to send, and
 * a client told nothing cannot tell a cut write from one that hung. */
static void wait_answers_sent(struct ld_proxy *p)
{
    struct timespec until;
    int rc = 0;
    ld_cond_deadline(STOP_GRACE_MS, &until);
    pthread_mutex_lock(&p->hub.mu);
    while (p->hub.requests > 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&p->hub.quiet, &p->hub.mu, &until);
    pthread_mutex_unlock(&p->hub.mu);
}

void ld_proxy_stop(struct ld_proxy *p)
{
    if (!p)
        return;
    /* From here nothing is handed over or suspended again; the upstream
     * thread cuts every exchange, which resumes every suspended
     * connection: MHD must not be stopped with one. New requests are
     * answered 503 while the answers already decided go out. */
    ld_proxy_upstream_stop(p->up);
    wait_answers_sent(p);
    MHD_stop_daemon(p->daemon);
    proxy_free(p);
}

int ld_proxy_port(const struct ld_proxy *p)
{
    return p ? p->port : -1;
}

int ld_proxy_exchanges(struct ld_proxy *p)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->hub.mu);
    int n = (int)p->hub.exchanges;
    pthread_mutex_unlock(&p->hub.mu);
    return n;
}
