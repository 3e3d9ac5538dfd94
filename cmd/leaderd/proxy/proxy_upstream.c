/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy_upstream: the API write gate's upstream thread (see proxy.h and
 * proxy_upstream.h; what it shares with MHD's side in proxy.c:
 * proxy_exchange.h).
 *
 * The thread owns one curl multi handle, and everything that touches an
 * easy handle happens on it: it starts each exchange MHD's side hands
 * over, resumes the client's connection once the upstream's headers are
 * in (or the exchange failed or was cut), and relays the body through a
 * small buffer per exchange (RELAY_BUFFER); a connection is resumed once
 * curl is done with what it read, so the headers and the body piece that
 * came with them need no second wake-up. When the buffer is full curl's
 * write callback pauses the transfer, and MHD's content reader, once it
 * made room, asks for an unpause: a slow client slows the upstream
 * instead of filling memory.
 *
 * The upstream thread sleeps in curl_multi_poll, woken by
 * curl_multi_wakeup when an exchange is handed over, when a reader asks
 * for an unpause or a client is gone (the "todo" list), and on every
 * publish of the state; it never sleeps past the earliest deadline of a
 * write whose answer has not begun (its lead_until_ms, or once sent its
 * term's). After every wake-up such writes are judged again, and one past
 * its deadline is cut (its handle removed, which closes its upstream
 * connection). Once the answer has begun the server has decided, and the
 * answer is relayed whole.
 *
 * A write is sent at most once: on a connection of its own (never one
 * from the pool, never put back in it), so libcurl has no dead reused
 * connection to retry it from, and a failure after it may have gone out
 * is answered 502 instead. Its socket lingers 0 from the moment it exists,
 * so any close of it (a cut, the stop, leaderd's exit or death) resets the
 * connection and whatever of the request the kernel still queued is
 * dropped, never delivered late.
 *
 * curl_multi_poll waits on the hub's epfd too, where MHD's side registers
 * the sockets of suspended clients for EPOLLRDHUP: a client that hangs up
 * while it waits cuts its exchange at once, unless it is a write already
 * sent, which runs to its answer (the API server commits what it
 * admitted, whoever hung up) and holds the release meanwhile.
 *
 * A write not yet sent goes out only while this replica leads; one already
 * sent is not cut when this replica stops leading on purpose, only once
 * the deadline of the term it was sent in passes or another holder is in
 * view (ld_proxy_sent_may_run): cutting it would not stop the server from
 * applying it, only hide the answer and leave its fate unknown.
 */
#include "proxy_upstream.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "clock.h"
#include "log.h"
#include "transport_curl.h"

/* A relayed body waits here between curl and MHD: one curl write at most
 * (CURL_MAX_WRITE_SIZE; the transport's receive buffer is smaller). */
#define RELAY_BUFFER CURL_MAX_WRITE_SIZE
/* Longest single sleep of the upstream thread; all it waits for wakes it
 * sooner (the hub's wake, curl's sockets, the cut's timer), this only
 * bounds a missed wake-up. */
#define POLL_SLICE_MS 1000
#define CONNECT_TIMEOUT_MS 3000
#define HANGUPS_PER_ROUND 64
/* libcurl and OpenSSL (TLS handshakes) run on the upstream thread. */
#define UPSTREAM_STACK (256 * 1024)

struct ld_proxy_upstream {
    struct ld_pxe_hub *hub;
    struct ld_transport *tr;
    struct ld_pxe *running; /* exchanges whose handle is added */
    pthread_t thread;
    bool thread_started;
    struct ld_timer cut; /* fires at the writes' next lead deadline */
};

/* Resumes q's connection once curl is done with the bytes it read (see
 * run_wakes): the headers and the body piece that came with them then go
 * out together, without a suspension in between. Holds a reference. */
static void wake_later_locked(struct ld_pxe *q)
{
    if (q->wake_due)
        return;
    q->wake_due = true;
    q->refs++;
    q->wake_next = q->hub->wakes;
    q->hub->wakes = q;
}

static void run_wakes(struct ld_proxy_upstream *u)
{
    struct ld_pxe_hub *hub = u->hub;
    pthread_mutex_lock(&hub->mu);
    while (hub->wakes) {
        struct ld_pxe *q = hub->wakes;
        hub->wakes = q->wake_next;
        q->wake_next = NULL;
        q->wake_due = false;
        ld_pxe_resume_locked(q);
        ld_pxe_release_locked(q);
    }
    pthread_mutex_unlock(&hub->mu);
}

/* A write in flight got the beginning of its answer (the server has
 * decided) or ended: it holds no release any more. One that went out and
 * ended without an answer (cut, or its connection failed) may still be
 * applied by the API server, which commits what it admitted: its key's
 * release must not be written (hook_proxy.h). */
static void uncount(struct ld_pxe *q, enum ld_write_fate fate)
{
    if (!q->in_flight)
        return;
    q->in_flight = false;
    ld_hook_proxy_ended(q->hub->writes, q->verdict.shard, fate);
}

static size_t on_header(char *b, size_t size, size_t n, void *ud)
{
    struct ld_pxe *q = ud;
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
            uncount(q, LD_WRITE_ANSWERED);
            pthread_mutex_lock(&q->hub->mu);
            q->headers_done = true;
            wake_later_locked(q);
            pthread_mutex_unlock(&q->hub->mu);
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
    struct ld_pxe *q = ud;
    size_t len = size * n, ret = len;
    pthread_mutex_lock(&q->hub->mu);
    if (q->gone) {
        /* A write that ran on after its client left (serve_todo): its
         * answer has begun, the server has decided, nobody reads on. */
        ret = 0;
        goto out;
    }
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
    pthread_mutex_unlock(&q->hub->mu);
    return ret;
}

/* Right before the request goes out on an established connection: the
 * last check of a write. */
static int on_prereq(void *ud, char *ip, char *local_ip, int port, int local_port)
{
    struct ld_pxe *q = ud;
    struct ld_pxe_view h;
    (void)ip;
    (void)local_ip;
    (void)port;
    (void)local_port;
    ld_pxe_view_take(q->hub, &h);
    bool ok = ld_proxy_still_leads(&q->verdict, &h.v, ld_mono_ms(), NULL);
    ld_pxe_view_drop(&h);
    if (ok) {
        q->sent = true;
        return CURL_PREREQFUNC_OK;
    }
    pthread_mutex_lock(&q->hub->mu);
    q->refused_prereq = true;
    pthread_mutex_unlock(&q->hub->mu);
    return CURL_PREREQFUNC_ABORT;
}

/* A write's socket, as soon as it exists: closing it resets the
 * connection (RST) instead of ending it gracefully, so bytes of the
 * request still queued in the kernel are thrown away rather than
 * delivered to the API server later, whoever closes it: a cut, the
 * proxy's stop, or the kernel when leaderd exits or is killed. */
static int on_write_socket(void *ud, curl_socket_t fd, curlsocktype purpose)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)ud;
    if (purpose != CURLSOCKTYPE_IPCXN)
        return CURL_SOCKOPT_OK;
    if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) != 0)
        return CURL_SOCKOPT_ERROR;
    return CURL_SOCKOPT_OK;
}

/* Ends q's exchange (removing its handle closes an upstream connection it
 * still used), lets MHD's side answer, and drops the upstream's reference
 * (and the todo list's too with also_todo). */
static void finish_refs(struct ld_proxy_upstream *u, struct ld_pxe *q,
                        enum ld_pxe_cut why, bool also_todo)
{
    if (q->added) {
        curl_multi_remove_handle(u->hub->multi, q->easy);
        q->added = false;
        if (q->prev)
            q->prev->next = q->next;
        else
            u->running = q->next;
        if (q->next)
            q->next->prev = q->prev;
        q->prev = q->next = NULL;
    }
    if (q->easy)
        curl_easy_cleanup(q->easy);
    q->easy = NULL;
    uncount(q, !q->sent || q->headers_done ? LD_WRITE_ANSWERED : LD_WRITE_FATE_UNKNOWN);
    ld_transport_curl_free_headers(q->hdrs);
    q->hdrs = NULL;
    pthread_mutex_lock(&u->hub->mu);
    /* curl is done with it: the budget need not wait for the answer. */
    ld_pxe_body_drop_locked(q);
    q->done = true;
    if (q->counted) {
        q->counted = false;
        u->hub->exchanges--;
    }
    if (q->cut == LD_PXE_CUT_NONE)
        q->cut = why;
    ld_pxe_resume_locked(q);
    if (also_todo)
        q->refs--; /* the upstream's is still held: never the last */
    ld_pxe_release_locked(q);
    pthread_mutex_unlock(&u->hub->mu);
}

static void finish(struct ld_proxy_upstream *u, struct ld_pxe *q, enum ld_pxe_cut why)
{
    finish_refs(u, q, why, false);
}

static void cut_leadership(struct ld_proxy_upstream *u, struct ld_pxe *q)
{
    ld_metrics_proxy_aborted(u->hub->m);
    if (q->sent)
        ld_log(LD_LOG_WARN,
               "api proxy: cut %s %.200s in flight: the term it was sent in ended; "
               "the API server may still apply it, so no release is written",
               q->method, q->target);
    else
        ld_log(LD_LOG_WARN,
               "api proxy: cut %s %.200s before sending: this replica "
               "stopped leading",
               q->method, q->target);
    finish(u, q, LD_PXE_CUT_LEADERSHIP);
}

static void fail_start(struct ld_proxy_upstream *u, struct ld_pxe *q, unsigned int status,
                       const char *reason, const char *msg)
{
    pthread_mutex_lock(&u->hub->mu);
    ld_pxe_verdict_printf(&q->fail, status, reason, "leaderd's API proxy: %s", msg);
    pthread_mutex_unlock(&u->hub->mu);
    finish(u, q, LD_PXE_CUT_NONE);
}

static CURLcode setup_easy(struct ld_pxe *q)
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
        /* A write goes out at most once. libcurl sends a request again on
         * a new connection when a reused one turns out dead before any
         * byte of the answer, which for a write the API server may have
         * applied would be a second write; on a connection of its own,
         * closed after it, there is nothing to retry. */
        SETOPT(CURLOPT_FRESH_CONNECT, 1L);
        SETOPT(CURLOPT_FORBID_REUSE, 1L);
        SETOPT(CURLOPT_SOCKOPTFUNCTION, on_write_socket);
    }
    if (strcmp(q->method, "GET") == 0) {
        SETOPT(CURLOPT_HTTPGET, 1L);
    } else if (strcmp(q->method, "HEAD") == 0) {
        SETOPT(CURLOPT_NOBODY, 1L);
    } else {
        if (q->body.len > 0 || strcmp(q->method, "POST") == 0 ||
            strcmp(q->method, "PUT") == 0 || strcmp(q->method, "PATCH") == 0) {
            SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body.len);
            SETOPT(CURLOPT_POSTFIELDS, q->body.data);
        }
        SETOPT(CURLOPT_CUSTOMREQUEST, q->method);
    }
#undef SETOPT
    return CURLE_OK;
}

/* Starts a handed-over exchange (q's fields of MHD's side are frozen from
 * the hand-over until the answer: the handler runs again only once
 * resumed). */
static void start(struct ld_proxy_upstream *u, struct ld_pxe *q, bool stopping)
{
    struct ld_errinfo err;
    pthread_mutex_lock(&u->hub->mu);
    bool gone = q->gone;
    pthread_mutex_unlock(&u->hub->mu);
    if (stopping || gone) {
        finish(u, q, stopping ? LD_PXE_CUT_STOP : LD_PXE_CUT_CLIENT);
        return;
    }
    q->easy = ld_transport_curl_raw_easy(u->tr, q->target, &q->hdrs, &err);
    if (!q->easy) {
        bool bad = err.code == LD_EINVAL;
        fail_start(u, q, bad ? 400 : 500, bad ? "BadRequest" : "InternalError", err.msg);
        return;
    }
    CURLcode c = setup_easy(q);
    if (c != CURLE_OK) {
        fail_start(u, q, 500, "InternalError", curl_easy_strerror(c));
        return;
    }
    if (curl_multi_add_handle(u->hub->multi, q->easy) != CURLM_OK) {
        fail_start(u, q, 500, "InternalError", "libcurl refused the request");
        return;
    }
    q->added = true;
    if (q->verdict.write && u->hub->writes) {
        /* Before on_prereq's last look at the leadership (see
         * ld_hook_proxy_sent). */
        q->in_flight = true;
        ld_hook_proxy_sent(u->hub->writes, q->verdict.shard);
    }
    q->prev = NULL;
    q->next = u->running;
    if (u->running)
        u->running->prev = q;
    u->running = q;
}

/* A reader asked for an unpause, or the client is gone; drops the todo
 * list's reference. q stays marked in_todo until here, though the list
 * was taken: MHD's side, which may ask again meanwhile (a reader's unpause,
 * then the completion of a client gone), must not push it onto the next
 * list through the todo_next this round is still walking. What it asks is
 * read here, with the mark cleared in the same hold of the mutex. */
static void serve_todo(struct ld_proxy_upstream *u, struct ld_pxe *q)
{
    pthread_mutex_lock(&u->hub->mu);
    q->in_todo = false;
    bool gone = q->gone, unpause = q->want_unpause && q->paused;
    q->want_unpause = false;
    if (unpause)
        q->paused = false;
    pthread_mutex_unlock(&u->hub->mu);
    /* A sent write whose answer has not begun runs on without its client:
     * the API server may commit it whatever becomes of the connection, and
     * the release must wait for it. Its answer is discarded (on_body). */
    if (q->added && gone && !(q->in_flight && q->sent)) {
        finish_refs(u, q, LD_PXE_CUT_CLIENT, true);
        return;
    }
    if (q->added && unpause)
        /* May hand the held piece to on_body at once. */
        curl_easy_pause(q->easy, CURLPAUSE_CONT);
    pthread_mutex_lock(&u->hub->mu);
    ld_pxe_release_locked(q);
    pthread_mutex_unlock(&u->hub->mu);
}

/* Clients that hung up while suspended (hub->mu held). */
static bool take_hangups_locked(struct ld_pxe_hub *hub)
{
    struct epoll_event evs[HANGUPS_PER_ROUND];
    bool any = false;
    int n = epoll_wait(hub->epfd, evs, HANGUPS_PER_ROUND, 0);
    for (int i = 0; i < n; i++) {
        struct ld_pxe *q = evs[i].data.ptr;
        epoll_ctl(hub->epfd, EPOLL_CTL_DEL, q->fd, NULL);
        q->polled = false;
        q->gone = true;
        ld_pxe_todo_locked(q);
        any = true;
    }
    return any;
}

/* Judges the writes whose answer has not begun; returns the time
 * (monotonic ms) by which they must be judged again. The clock is read
 * once the view is in hand: a thread held up on the way judges by the
 * time it is, not by the time it was. */
static int64_t gate_writes(struct ld_proxy_upstream *u)
{
    int64_t now = 0;
    int64_t due = INT64_MAX;
    struct ld_pxe_view h;
    bool have_view = false;
    struct ld_pxe *next;
    for (struct ld_pxe *q = u->running; q; q = next) {
        next = q->next;
        if (!q->verdict.write || q->headers_done)
            continue;
        if (!have_view) {
            ld_pxe_view_take(u->hub, &h);
            have_view = true;
            now = ld_mono_ms();
        }
        /* Not sent yet: it goes out only while this replica leads. Sent:
         * it runs to its answer until its term's deadline (proxy_gate.h). */
        bool sent = q->sent;
        if (sent ? !ld_proxy_sent_may_run(&q->verdict, &h.v, now)
                 : !ld_proxy_still_leads(&q->verdict, &h.v, now, NULL)) {
            cut_leadership(u, q);
            continue;
        }
        int64_t until = sent ? ld_proxy_term_until(&q->verdict, &h.v)
                             : ld_proxy_lead_until(&q->verdict, &h.v);
        if (until < due)
            due = until;
    }
    if (have_view)
        ld_pxe_view_drop(&h);
    return due;
}

static void collect_done(struct ld_proxy_upstream *u)
{
    CURLMsg *msg;
    int left;
    /* Bounded by the handles added: each is done once. */
    while ((msg = curl_multi_info_read(u->hub->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *e = msg->easy_handle;
        CURLcode result = msg->data.result;
        struct ld_pxe *q = NULL;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&q);
        if (!q)
            continue;
        q->result = result;
        finish(u, q, LD_PXE_CUT_NONE);
    }
}

static void *upstream_main(void *arg)
{
    struct ld_proxy_upstream *u = arg;
    struct ld_pxe_hub *hub = u->hub;
    struct curl_waitfd w[2] = {{.fd = hub->epfd, .events = CURL_WAIT_POLLIN},
                               {.fd = u->cut.fd, .events = CURL_WAIT_POLLIN}};
    for (;;) {
        pthread_mutex_lock(&hub->mu);
        take_hangups_locked(hub);
        struct ld_pxe *in = hub->incoming, *todo = hub->todo;
        hub->incoming = hub->incoming_tail = NULL;
        hub->todo = NULL;
        bool stopping = hub->stopping;
        pthread_mutex_unlock(&hub->mu);

        while (in) {
            struct ld_pxe *next = in->in_next;
            in->in_next = NULL;
            start(u, in, stopping);
            in = next;
        }
        while (todo) {
            struct ld_pxe *next = todo->todo_next;
            todo->todo_next = NULL;
            serve_todo(u, todo);
            todo = next;
        }
        run_wakes(u);
        if (stopping) {
            while (u->running)
                finish(u, u->running, LD_PXE_CUT_STOP);
            break;
        }
        int64_t due = gate_writes(u);
        int running = 0;
        curl_multi_perform(hub->multi, &running);
        run_wakes(u);
        collect_done(u);
        /* The cut is enforced by the timer, armed at due itself: neither
         * curl's work of the round nor a suspend (which stretches a poll
         * timeout) can push it past due. */
        ld_timer_arm(&u->cut, due);
        w[0].revents = w[1].revents = 0;
        curl_multi_poll(hub->multi, w, 2, POLL_SLICE_MS, NULL);
    }
    return NULL;
}

struct ld_proxy_upstream *ld_proxy_upstream_new(struct ld_pxe_hub *hub,
                                                const struct ld_kube_config *kube,
                                                struct ld_errinfo *err)
{
    struct ld_errinfo ei;
    struct ld_proxy_upstream *u = calloc(1, sizeof(*u));
    if (!u) {
        ld_errinfo_set(err, LD_ENOMEM, "api-proxy: out of memory");
        return NULL;
    }
    u->hub = hub;
    if (ld_timer_open(&u->cut, NULL) != 0) {
        ld_errinfo_set(err, LD_ENOMEM, "api-proxy: timerfd: %s", strerror(errno));
        ld_proxy_upstream_free(u);
        return NULL;
    }
    u->tr = ld_transport_curl_new(kube, &ei);
    if (!u->tr) {
        ld_errinfo_set(err, ei.code, "api-proxy: %s", ei.msg);
        ld_proxy_upstream_free(u);
        return NULL;
    }
    ld_transport_curl_set_user_agent_suffix(u->tr, "api-proxy");
    return u;
}

int ld_proxy_upstream_start(struct ld_proxy_upstream *u)
{
    pthread_attr_t attr;
    curl_multi_setopt(u->hub->multi, CURLMOPT_MAXCONNECTS, LD_PROXY_UPSTREAM_IDLE);
    int rc = pthread_attr_init(&attr);
    if (rc != 0)
        return rc;
    rc = pthread_attr_setstacksize(&attr, UPSTREAM_STACK);
    if (rc == 0)
        rc = pthread_create(&u->thread, &attr, upstream_main, u);
    pthread_attr_destroy(&attr);
    u->thread_started = rc == 0;
    return rc;
}

void ld_proxy_upstream_stop(struct ld_proxy_upstream *u)
{
    if (!u || !u->thread_started)
        return;
    pthread_mutex_lock(&u->hub->mu);
    u->hub->stopping = true;
    pthread_mutex_unlock(&u->hub->mu);
    ld_pxe_wake(u->hub);
    pthread_join(u->thread, NULL);
    u->thread_started = false;
}

void ld_proxy_upstream_free(struct ld_proxy_upstream *u)
{
    if (!u)
        return;
    ld_transport_free(u->tr);
    ld_timer_close(&u->cut);
    free(u);
}