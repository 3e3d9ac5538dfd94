/*
 * http: libmicrohttpd server for the sidecar's endpoints.
 *
 * Threads: MHD's single polling thread (epoll) runs every handler. Held
 * requests (long-polls, /watch streams with nothing to send) are suspended
 * MHD connections, so they cost no thread. A notifier thread resumes them:
 * it sleeps in epoll_wait on an eventfd written by a state listener (every
 * publish), on EPOLLRDHUP of the suspended sockets (MHD does not watch a
 * suspended connection, so without this a client that went away would
 * only be noticed at the next write), and on a timeout at the nearest of
 * the current leader's lead_until_ms (is_leader turns false by time alone),
 * the next long-poll deadline and the next heartbeat.
 *
 * h->mu guards the held requests: the fields below it in struct ld_http
 * and every struct hold. Lock order: h->mu, then the state's mutex, then
 * MHD's own (MHD never calls back into this file holding one of its
 * mutexes except a response's, which sse_read takes before h->mu). The
 * connection bookkeeping (struct conn) is only touched on MHD's thread and
 * has its own conn_mu, for ld_http_get_stats, so that plain requests never
 * wait for the notifier.
 */
#include "http.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "log.h"
#include "timefmt.h"

/* Probes, scrapers and a few apps: requests are small, so a small pool per
 * connection (it also caps the request line and headers: MHD answers 414
 * or 431 beyond it). */
#define CONNECTION_MEMORY 16384
#define LISTEN_BACKLOG 1024
/* Descriptors kept for everything else in the process (API connections,
 * logs, epoll and event fds). */
#define FD_RESERVE 64
#define MIN_CONNECTIONS 8
/* Chunk size MHD asks the /watch reader for; events are a few hundred
 * bytes. */
#define SSE_BLOCK 2048
/* After a failed allocation while rendering an event, try again this
 * soon. */
#define RETRY_MS 100
/* At most this long to let held requests end cleanly when stopping. */
#define DRAIN_S 1
/* Recent events kept so that a stream that is a little behind (two
 * changes in a row, a slow reader) still gets every change in order. */
#define EVENT_RING 16

#define CT_JSON "application/json"
#define CT_TEXT "text/plain; charset=utf-8"
#define CT_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define CT_SSE "text/event-stream"

static const char ping_comment[] = ": ping\n\n";

/* What /leader shows that a change notification is about. */
struct view {
    bool observed;
    bool is_leader;
    int64_t term;
    char leader[LD_LEASE_MAX_HOLDER + 1];
};

/* One /watch event: "id: ID\nevent: leader\ndata: JSON\n\n". */
struct event {
    uint64_t id;
    char *text;
    size_t len;
};

enum hold_kind { HOLD_POLL, HOLD_WATCH };

/* A held long-poll or a /watch stream. A poll is owned by its request (freed
 * when MHD reports it completed); a stream also by its response (freed by
 * the response's free callback), hence refs. */
struct hold {
    struct hold *prev, *next; /* in h->polls or h->subs while linked */
    struct ld_http *h;
    struct MHD_Connection *conn;
    uint64_t id; /* epoll data of its hang-up registration */
    int fd;
    enum hold_kind kind;
    int refs;
    bool linked;
    bool suspended;
    bool gone; /* the client hung up */
    union {
        struct {
            int64_t deadline_ms;
        } poll;
        struct {
            uint64_t sent_seq; /* id of the last event handed to MHD */
            bool want_ping;
            char *out; /* bytes being handed to MHD */
            size_t out_len, out_off;
        } watch;
    } u;
};

/* Per-connection bookkeeping, for making room when the server is full. */
struct conn {
    struct conn *prev, *next; /* in the idle list while idle */
    int fd;
    bool idle;
    bool evicted;
};

struct ld_http {
    struct MHD_Daemon *daemon;
    struct ld_state *st;
    struct ld_metrics *m;
    int port;
    int64_t heartbeat_ms, max_wait_ms;
    unsigned int max_conns, evict_at, max_held, max_subs;
    int epfd, wakefd;
    pthread_t notifier;
    bool notifier_running, listening, mu_ready;
    struct ld_state_listener listener;
    atomic_bool wake_pending;

    pthread_mutex_t mu;
    pthread_cond_t drained; /* nholds reached 0 while stopping */
    bool stopping;
    unsigned int nholds; /* allocated, linked or not */
    bool have_view;
    struct view view;              /* as of the last refresh */
    int64_t flip_at_ms;            /* when view.is_leader turns false by itself */
    int64_t retry_at_ms;           /* a refresh failed for memory: try again then */
    uint64_t seq;                  /* id of the event for view */
    struct event ring[EVENT_RING]; /* event id is at ring[id % EVENT_RING] */
    struct hold *polls, *subs;
    unsigned int npolls, nsubs;
    uint64_t next_hold_id;
    int64_t next_ping_ms;

    pthread_mutex_t conn_mu;
    struct conn *idle_head, *idle_tail; /* longest idle first */
    unsigned int nconns, nidle, nevicting;
    uint64_t evicted;
};

/* *con_cls of a plain request after the first handler call. */
static char request_seen;

/* ---- rendering and routing (no socket) ---- */

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

/* "id: ID\n" (when with_id) "event: leader\ndata: JSON\n\n"; NULL on
 * allocation failure. */
static char *render_event(bool with_id, uint64_t id, const struct ld_snapshot *snap,
                          int64_t now_ms, size_t *len)
{
    char idline[40] = "";
    char *json = ld_http_render_leader(snap, now_ms);
    char *text = NULL;
    if (!json)
        return NULL;
    if (with_id)
        snprintf(idline, sizeof(idline), "id: %" PRIu64 "\n", id);
    int n = asprintf(&text, "%sevent: leader\ndata: %s\n\n", idline, json);
    free(json);
    if (n < 0)
        return NULL;
    *len = (size_t)n;
    return text;
}

enum route { R_NONE, R_LEADER, R_WATCH, R_HEALTHZ, R_READYZ, R_METRICS, R_ROOT };

static enum route find_route(const char *path)
{
    static const struct {
        const char *path;
        enum route r;
    } table[] = {{"/leader", R_LEADER}, {"/watch", R_WATCH},     {"/healthz", R_HEALTHZ},
                 {"/readyz", R_READYZ}, {"/metrics", R_METRICS}, {"/", R_ROOT}};
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
    size_t len = 0;
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
    case R_WATCH:
        if (reply_owned(out, 200, CT_SSE, render_event(false, 0, snap, now_ms, &len)) !=
            0)
            return -1;
        out->len = len;
        return 0;
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

/* ---- long-poll arguments ---- */

void ld_http_poll_init(struct ld_http_poll *p)
{
    memset(p, 0, sizeof(*p));
}

/* A caller's value for an error message: at most 64 bytes, anything but
 * printable ASCII shown as '?', so the message stays valid UTF-8. */
static void shown_value(const char *v, char *out, size_t outlen)
{
    size_t n = 0;
    for (; *v && n + 1 < outlen && n < 64; v++)
        out[n++] = (char)((*v >= 0x20 && *v < 0x7f && *v != '"') ? *v : '?');
    out[n] = '\0';
}

static int poll_fail(char *err, size_t errlen, const char *key, const char *what,
                     const char *value)
{
    char shown[72];
    shown_value(value, shown, sizeof(shown));
    snprintf(err, errlen, "%s: %s \"%s\"", key, what, shown);
    return -1;
}

static bool all_digits(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
    }
    return true;
}

/* A non-negative decimal integer with nothing around it. */
static int parse_count(const char *s, int64_t *out)
{
    if (!all_digits(s))
        return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || !end || *end != '\0' || v < 0)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int ld_http_poll_arg(struct ld_http_poll *p, const char *key, const char *value,
                     int64_t max_wait_ms, char *err, size_t errlen)
{
    char scratch[1];
    const char *v = value ? value : "";
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    if (!key)
        return 0;
    if (strcmp(key, "wait") == 0) {
        int64_t ms = 0, secs = 0;
        if (p->wait)
            return poll_fail(err, errlen, key, "given twice, again as", v);
        if (all_digits(v)) /* whole seconds; too many for int64 is capped too */
            ms = parse_count(v, &secs) != 0 || secs > INT64_MAX / 1000 ? INT64_MAX
                                                                       : secs * 1000;
        else if (ld_duration_parse(v, &ms) != LD_OK || ms < 0)
            return poll_fail(err, errlen, key, "not a duration such as 30s:", v);
        p->wait = true;
        p->wait_ms = ms > max_wait_ms ? max_wait_ms : ms;
    } else if (strcmp(key, "leader") == 0) {
        if (p->has_leader)
            return poll_fail(err, errlen, key, "given twice, again as", v);
        if (strlen(v) > LD_LEASE_MAX_HOLDER)
            return poll_fail(err, errlen, key, "longer than any identity:", v);
        snprintf(p->leader, sizeof(p->leader), "%s", v);
        p->has_leader = true;
    } else if (strcmp(key, "term") == 0) {
        if (p->has_term)
            return poll_fail(err, errlen, key, "given twice, again as", v);
        if (parse_count(v, &p->term) != 0)
            return poll_fail(err, errlen, key, "not an integer >= 0:", v);
        p->has_term = true;
    } else if (strcmp(key, "is_leader") == 0) {
        if (p->has_is_leader)
            return poll_fail(err, errlen, key, "given twice, again as", v);
        if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
            p->is_leader = true;
        else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
            p->is_leader = false;
        else
            return poll_fail(err, errlen, key, "not true or false:", v);
        p->has_is_leader = true;
    }
    return 0;
}

static void view_of(const struct ld_snapshot *s, int64_t now_ms, struct view *v)
{
    v->observed = s->observed;
    v->is_leader = ld_snapshot_is_leader(s, now_ms);
    v->term = s->term;
    memcpy(v->leader, s->leader, sizeof(v->leader));
    v->leader[sizeof(v->leader) - 1] = '\0';
}

static bool view_eq(const struct view *a, const struct view *b)
{
    return a->observed == b->observed && a->is_leader == b->is_leader &&
           a->term == b->term && strcmp(a->leader, b->leader) == 0;
}

static bool want_differs(const struct ld_http_poll *p, const struct view *v)
{
    return (p->has_leader && strcmp(p->leader, v->leader) != 0) ||
           (p->has_term && p->term != v->term) ||
           (p->has_is_leader && p->is_leader != v->is_leader);
}

bool ld_http_poll_differs(const struct ld_http_poll *p, const struct ld_snapshot *snap,
                          int64_t now_ms)
{
    struct view v;
    view_of(snap, now_ms, &v);
    return want_differs(p, &v);
}

/* ---- held requests (h->mu held) ---- */

static void poke(struct ld_http *h)
{
    uint64_t one = 1;
    /* Fails only when the counter is saturated, i.e. a wake-up is pending. */
    if (write(h->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        ld_log(LD_LOG_DEBUG, "http: cannot wake the notifier: %s", strerror(errno));
}

static void on_publish(void *arg)
{
    struct ld_http *h = arg;
    if (!atomic_exchange(&h->wake_pending, true))
        poke(h);
}

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

static void link_hold(struct ld_http *h, struct hold *x)
{
    struct hold **head = x->kind == HOLD_POLL ? &h->polls : &h->subs;
    x->prev = NULL;
    x->next = *head;
    if (*head)
        (*head)->prev = x;
    *head = x;
    x->linked = true;
    if (x->kind == HOLD_POLL)
        h->npolls++;
    else
        h->nsubs++;
}

static void unlink_hold(struct ld_http *h, struct hold *x)
{
    if (!x->linked)
        return;
    struct hold **head = x->kind == HOLD_POLL ? &h->polls : &h->subs;
    if (x->prev)
        x->prev->next = x->next;
    else
        *head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
    x->linked = false;
    if (x->kind == HOLD_POLL)
        h->npolls--;
    else
        h->nsubs--;
}

/* Only from a handler or the /watch reader, on MHD's thread. */
static void suspend(struct ld_http *h, struct hold *x)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLRDHUP;
    ev.data.u64 = x->id;
    /* Without it a hang-up is noticed at the next write instead. */
    if (x->fd >= 0 && epoll_ctl(h->epfd, EPOLL_CTL_ADD, x->fd, &ev) != 0)
        ld_log(LD_LOG_DEBUG, "http: cannot watch a held connection: %s", strerror(errno));
    x->suspended = true;
    MHD_suspend_connection(x->conn);
}

static void wake(struct ld_http *h, struct hold *x)
{
    if (!x->suspended)
        return;
    x->suspended = false;
    if (x->fd >= 0)
        epoll_ctl(h->epfd, EPOLL_CTL_DEL, x->fd, NULL);
    MHD_resume_connection(x->conn);
}

/* The poll gets its answer: its handler runs again once resumed. */
static void finish_poll(struct ld_http *h, struct hold *x)
{
    unlink_hold(h, x);
    wake(h, x);
}

static void release_hold(struct ld_http *h, struct hold *x)
{
    unlink_hold(h, x);
    if (--x->refs > 0)
        return;
    if (x->suspended && x->fd >= 0)
        epoll_ctl(h->epfd, EPOLL_CTL_DEL, x->fd, NULL);
    if (x->kind == HOLD_WATCH)
        free(x->u.watch.out);
    free(x);
    if (--h->nholds == 0 && h->stopping)
        pthread_cond_broadcast(&h->drained);
}

/* Re-reads the state; when what /leader shows has changed, renders the
 * event for it with the next id and resumes whoever waits for a change. */
static void refresh_locked(struct ld_http *h, int64_t now)
{
    struct ld_snapshot snap;
    struct view v;
    size_t len = 0;
    ld_state_read(h->st, &snap);
    view_of(&snap, now, &v);
    h->flip_at_ms = v.is_leader ? snap.lead_until_ms : INT64_MAX;
    if (h->have_view && view_eq(&v, &h->view))
        return;
    uint64_t seq = h->have_view ? h->seq + 1 : h->seq;
    /* Long-polls wait for these three (the contract's fields); a stream
     * also hears of the first observation. */
    bool changed =
        h->have_view && (v.is_leader != h->view.is_leader || v.term != h->view.term ||
                         strcmp(v.leader, h->view.leader) != 0);
    char *ev = render_event(true, seq, &snap, now, &len);
    if (!ev) {
        h->retry_at_ms = now + RETRY_MS;
        return;
    }
    h->retry_at_ms = INT64_MAX;
    struct event *slot = &h->ring[seq % EVENT_RING];
    free(slot->text);
    slot->id = seq;
    slot->text = ev;
    slot->len = len;
    h->seq = seq;
    h->view = v;
    h->have_view = true;
    for (struct hold *x = h->subs; x; x = x->next)
        wake(h, x);
    /* Every held poll was held at the previous view, so any change of the
     * three answers all of them, also one in a field they did not give. */
    while (changed && h->polls)
        finish_poll(h, h->polls);
}

static void expire_polls_locked(struct ld_http *h, int64_t now)
{
    for (struct hold *x = h->polls, *next; x; x = next) {
        next = x->next;
        if (x->u.poll.deadline_ms <= now)
            finish_poll(h, x);
    }
}

static void heartbeat_locked(struct ld_http *h, int64_t now)
{
    if (h->nsubs == 0 || now < h->next_ping_ms)
        return;
    h->next_ping_ms = now + h->heartbeat_ms;
    for (struct hold *x = h->subs; x; x = x->next) {
        x->u.watch.want_ping = true;
        wake(h, x);
    }
}

/* Milliseconds until the next timer, -1 for none. */
static int next_timeout_locked(struct ld_http *h, int64_t now)
{
    int64_t t = h->flip_at_ms < h->retry_at_ms ? h->flip_at_ms : h->retry_at_ms;
    if (h->nsubs > 0 && h->next_ping_ms < t)
        t = h->next_ping_ms;
    for (struct hold *x = h->polls; x; x = x->next) {
        if (x->u.poll.deadline_ms < t)
            t = x->u.poll.deadline_ms;
    }
    if (t == INT64_MAX)
        return -1;
    if (t <= now)
        return 0;
    return t - now > INT_MAX ? INT_MAX : (int)(t - now);
}

static struct hold *find_hold(struct ld_http *h, uint64_t id)
{
    for (struct hold *x = h->polls; x; x = x->next) {
        if (x->id == id)
            return x;
    }
    for (struct hold *x = h->subs; x; x = x->next) {
        if (x->id == id)
            return x;
    }
    return NULL;
}

static void *notifier_main(void *arg)
{
    struct ld_http *h = arg;
    struct epoll_event evs[64];
    for (;;) {
        pthread_mutex_lock(&h->mu);
        if (h->stopping) {
            pthread_mutex_unlock(&h->mu);
            break;
        }
        int64_t now = ld_mono_ms();
        refresh_locked(h, now);
        expire_polls_locked(h, now);
        heartbeat_locked(h, now);
        int timeout = next_timeout_locked(h, now);
        pthread_mutex_unlock(&h->mu);

        int n = epoll_wait(h->epfd, evs, (int)(sizeof(evs) / sizeof(evs[0])), timeout);
        if (n < 0) {
            if (errno != EINTR)
                ld_log(LD_LOG_WARN, "http: epoll_wait: %s", strerror(errno));
            continue;
        }
        bool locked = false;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == 0) {
                uint64_t count;
                if (read(h->wakefd, &count, sizeof(count)) < 0 && errno != EAGAIN)
                    ld_log(LD_LOG_DEBUG, "http: eventfd: %s", strerror(errno));
                /* Cleared before the next refresh reads the state, so no
                 * publish is missed. */
                atomic_store(&h->wake_pending, false);
                continue;
            }
            if (!locked) {
                pthread_mutex_lock(&h->mu);
                locked = true;
            }
            struct hold *x = find_hold(h, evs[i].data.u64);
            if (x) {
                x->gone = true;
                unlink_hold(h, x);
                wake(h, x);
            }
        }
        if (locked)
            pthread_mutex_unlock(&h->mu);
    }
    return NULL;
}

/* ---- connections: make room by closing the longest idle one ---- */

static void idle_push(struct ld_http *h, struct conn *k)
{
    k->prev = h->idle_tail;
    k->next = NULL;
    if (h->idle_tail)
        h->idle_tail->next = k;
    else
        h->idle_head = k;
    h->idle_tail = k;
    k->idle = true;
    h->nidle++;
}

static void idle_remove(struct ld_http *h, struct conn *k)
{
    if (!k->idle)
        return;
    if (k->prev)
        k->prev->next = k->next;
    else
        h->idle_head = k->next;
    if (k->next)
        k->next->prev = k->prev;
    else
        h->idle_tail = k->prev;
    k->prev = k->next = NULL;
    k->idle = false;
    h->nidle--;
}

/* A slowloris client or a pile of idle keep-alive connections must not
 * lock probes out: past evict_at, shut the longest idle ones down (MHD
 * then sees the end of the stream and closes them). Held requests and
 * streams are never idle, and their caps keep them below evict_at. */
static void evict_locked(struct ld_http *h)
{
    while (h->nconns - h->nevicting > h->evict_at && h->idle_head) {
        struct conn *k = h->idle_head;
        idle_remove(h, k);
        k->evicted = true;
        h->nevicting++;
        h->evicted++;
        if (k->fd >= 0)
            shutdown(k->fd, SHUT_RDWR);
    }
}

static struct conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct ld_http *h = cls;
    pthread_mutex_lock(&h->conn_mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn *k = calloc(1, sizeof(*k));
        h->nconns++;
        if (k) {
            k->fd = conn_fd(c);
            idle_push(h, k);
        }
        *socket_context = k;
        evict_locked(h);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct conn *k = *socket_context;
        h->nconns--;
        if (k) {
            idle_remove(h, k);
            if (k->evicted)
                h->nevicting--;
            free(k);
        }
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&h->conn_mu);
}

static void conn_active(struct ld_http *h, struct MHD_Connection *c)
{
    struct conn *k = conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&h->conn_mu);
    idle_remove(h, k);
    pthread_mutex_unlock(&h->conn_mu);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct ld_http *h = cls;
    struct conn *k = conn_of(c);
    (void)toe;
    if (*con_cls && *con_cls != &request_seen) {
        pthread_mutex_lock(&h->mu);
        release_hold(h, *con_cls);
        pthread_mutex_unlock(&h->mu);
    }
    pthread_mutex_lock(&h->conn_mu);
    if (k && !k->idle && !k->evicted)
        idle_push(h, k);
    pthread_mutex_unlock(&h->conn_mu);
    *con_cls = NULL;
}

/* ---- answering ---- */

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

static enum MHD_Result queue_oom(struct MHD_Connection *c)
{
    static char oom[] = "{\"error\":\"out of memory\"}";
    return queue(c, 500, CT_JSON, false, oom, strlen(oom), MHD_RESPMEM_PERSISTENT);
}

/* {"error": msg}; msg must be UTF-8. */
static enum MHD_Result queue_error(struct MHD_Connection *c, unsigned int status,
                                   const char *msg)
{
    json_t *o = json_pack("{s:s}", "error", msg);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return queue_oom(c);
    return queue(c, status, CT_JSON, false, text, strlen(text), MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result queue_route(struct ld_http *h, struct MHD_Connection *c,
                                   const char *method, const char *url)
{
    struct ld_snapshot snap;
    struct ld_http_reply r;
    ld_state_read(h->st, &snap);
    if (ld_http_route(method, url, &snap, h->m, ld_mono_ms(), &r) != 0) {
        ld_http_reply_clear(&r);
        return queue_oom(c);
    }
    enum MHD_Result ret =
        queue(c, r.status, r.content_type, r.allow, r.body, r.len, MHD_RESPMEM_MUST_FREE);
    r.body = NULL; /* the response owns it now */
    return ret;
}

struct query {
    struct ld_http_poll *want;
    int64_t max_wait_ms;
    bool failed;
    char err[192];
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    struct query *q = cls;
    (void)kind;
    if (ld_http_poll_arg(q->want, key, value, q->max_wait_ms, q->err, sizeof(q->err)) ==
        0)
        return MHD_YES;
    q->failed = true;
    return MHD_NO;
}

/* GET /leader, held when the caller asks to wait and has seen the current
 * state already. */
static enum MHD_Result answer_leader(struct ld_http *h, struct MHD_Connection *c,
                                     void **con_cls)
{
    struct ld_http_poll want;
    struct query q;
    struct hold *x = NULL;
    ld_http_poll_init(&want);
    memset(&q, 0, sizeof(q));
    q.want = &want;
    q.max_wait_ms = h->max_wait_ms;
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, query_arg, &q);
    if (q.failed)
        return queue_error(c, 400, q.err);
    if (!want.wait || want.wait_ms <= 0)
        return queue_route(h, c, "GET", "/leader");

    pthread_mutex_lock(&h->mu);
    int64_t now = ld_mono_ms();
    refresh_locked(h, now);
    /* Past the cap the caller gets the current state at once, which the
     * contract allows at any time. */
    if (!h->stopping && h->have_view && !want_differs(&want, &h->view) &&
        h->npolls < h->max_held)
        x = calloc(1, sizeof(*x));
    if (x) {
        h->nholds++;
        x->h = h;
        x->conn = c;
        x->kind = HOLD_POLL;
        x->refs = 1;
        x->id = ++h->next_hold_id;
        x->fd = conn_fd(c);
        x->u.poll.deadline_ms = now + want.wait_ms;
        link_hold(h, x);
        *con_cls = x;
        suspend(h, x);
        poke(h); /* its deadline may be nearer than the notifier's timer */
    }
    pthread_mutex_unlock(&h->mu);
    return x ? MHD_YES : queue_route(h, c, "GET", "/leader");
}

/* A held poll was resumed: answer, unless its client has gone. */
static enum MHD_Result answer_resumed(struct ld_http *h, struct MHD_Connection *c,
                                      struct hold *x)
{
    pthread_mutex_lock(&h->mu);
    bool gone = x->gone;
    unlink_hold(h, x);
    pthread_mutex_unlock(&h->mu);
    if (gone)
        return MHD_NO;
    return queue_route(h, c, "GET", "/leader");
}

/* Loads the next bytes for stream x: the event after the last one it had
 * (or the current one, for a new stream or one too far behind), else a
 * heartbeat when one is due. -1 on allocation failure. */
static int fill_watch_locked(struct ld_http *h, struct hold *x)
{
    uint64_t sent = x->u.watch.sent_seq;
    free(x->u.watch.out);
    x->u.watch.out = NULL;
    x->u.watch.out_len = x->u.watch.out_off = 0;
    if (h->have_view && sent != h->seq) {
        const struct event *e = &h->ring[h->seq % EVENT_RING];
        const struct event *after = &h->ring[(sent + 1) % EVENT_RING];
        if (sent != 0 && sent < h->seq && after->text && after->id == sent + 1)
            e = after;
        x->u.watch.out = malloc(e->len);
        if (!x->u.watch.out)
            return -1;
        memcpy(x->u.watch.out, e->text, e->len);
        x->u.watch.out_len = e->len;
        x->u.watch.sent_seq = e->id;
        x->u.watch.want_ping = false;
    } else if (x->u.watch.want_ping) {
        x->u.watch.out = strdup(ping_comment);
        if (!x->u.watch.out)
            return -1;
        x->u.watch.out_len = strlen(ping_comment);
        x->u.watch.want_ping = false;
    }
    return 0;
}

/* MHD's reader for a /watch stream. With nothing to send it suspends the
 * connection and returns 0, which MHD 0.9.75 allows only together with a
 * suspension (it would otherwise call again at once); the notifier resumes
 * it when there is something new, and MHD calls this again. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct hold *x = cls;
    struct ld_http *h = x->h;
    ssize_t n = 0;
    (void)pos;
    pthread_mutex_lock(&h->mu);
    if (x->gone) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
        goto out;
    }
    if (x->u.watch.out_off == x->u.watch.out_len && fill_watch_locked(h, x) != 0) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
        goto out;
    }
    size_t left = x->u.watch.out_len - x->u.watch.out_off;
    if (left == 0) {
        /* When stopping, what was left to say has been said. */
        if (h->stopping)
            n = MHD_CONTENT_READER_END_OF_STREAM;
        else
            suspend(h, x);
        goto out;
    }
    if (left > max)
        left = max;
    memcpy(buf, x->u.watch.out + x->u.watch.out_off, left);
    x->u.watch.out_off += left;
    n = (ssize_t)left;
out:
    pthread_mutex_unlock(&h->mu);
    return n;
}

static void sse_free(void *cls)
{
    struct hold *x = cls;
    struct ld_http *h = x->h;
    pthread_mutex_lock(&h->mu);
    release_hold(h, x);
    pthread_mutex_unlock(&h->mu);
}

/* A Last-Event-ID as our ids are written; false for anything else. */
static bool parse_event_id(const char *s, uint64_t *out)
{
    if (!s || !all_digits(s) || strlen(s) > 20)
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || !end || *end != '\0')
        return false;
    *out = (uint64_t)v;
    return true;
}

static enum MHD_Result answer_watch(struct ld_http *h, struct MHD_Connection *c,
                                    const char *method, void **con_cls)
{
    static char empty[] = "";
    char msg[96];
    uint64_t last = 0;
    struct hold *x = NULL;
    if (strcmp(method, "HEAD") == 0)
        return queue(c, 200, CT_SSE, false, empty, 0, MHD_RESPMEM_PERSISTENT);
    bool has_last = parse_event_id(
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID"), &last);

    pthread_mutex_lock(&h->mu);
    refresh_locked(h, ld_mono_ms());
    bool full = h->stopping || !h->have_view || h->nsubs >= h->max_subs;
    if (!full)
        x = calloc(1, sizeof(*x));
    if (x) {
        h->nholds++;
        x->h = h;
        x->conn = c;
        x->kind = HOLD_WATCH;
        x->refs = 2; /* the request's and the response's */
        x->id = ++h->next_hold_id;
        x->fd = conn_fd(c);
        /* The current state supersedes any event a reconnecting client
         * missed, so it gets that once unless it has it already. */
        x->u.watch.sent_seq = has_last && last == h->seq ? h->seq : 0;
        if (h->nsubs == 0)
            h->next_ping_ms = ld_mono_ms() + h->heartbeat_ms;
        link_hold(h, x);
        poke(h); /* heartbeats are due from now on */
    }
    pthread_mutex_unlock(&h->mu);
    if (full) {
        snprintf(msg, sizeof(msg), "too many /watch streams (limit %u)", h->max_subs);
        return queue_error(c, 503, msg);
    }
    if (!x)
        return queue_oom(c);

    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, SSE_BLOCK, sse_read, x, sse_free);
    if (!resp) {
        pthread_mutex_lock(&h->mu);
        x->refs = 1;
        release_hold(h, x);
        pthread_mutex_unlock(&h->mu);
        return MHD_NO;
    }
    *con_cls = x;
    enum MHD_Result ret = MHD_NO;
    if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, CT_SSE) == MHD_YES &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") ==
            MHD_YES &&
        MHD_add_response_header(resp, "X-Accel-Buffering", "no") == MHD_YES)
        ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version,
                              const char *upload_data, size_t *upload_data_size,
                              void **con_cls)
{
    struct ld_http *h = cls;
    (void)version;
    (void)upload_data;
    if (*con_cls && *con_cls != &request_seen) {
        struct hold *x = *con_cls;
        if (x->kind == HOLD_POLL)
            return answer_resumed(h, c, x);
        return MHD_NO;
    }
    /* MHD keeps a connection alive only when the reply is queued after the
     * first call (which just announces the headers) and after any body,
     * which GET and HEAD ignore. Other methods are refused at once: their
     * body is never read and MHD closes the connection after the 405. */
    bool plain = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (*con_cls == NULL) {
        conn_active(h, c);
        if (plain) {
            *con_cls = &request_seen;
            return MHD_YES;
        }
    }
    if (plain && *upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (plain && strcmp(url, "/leader") == 0)
        return answer_leader(h, c, con_cls);
    if (plain && strcmp(url, "/watch") == 0)
        return answer_watch(h, c, method, con_cls);
    return queue_route(h, c, method, url);
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
    struct sockaddr_storage ss = {0};
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    /* Copies, not casts: the storage is only as typed as its family says. */
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 a6;
        memcpy(&a6, &ss, sizeof(a6));
        return ntohs(a6.sin6_port);
    }
    struct sockaddr_in a4;
    memcpy(&a4, &ss, sizeof(a4));
    return ntohs(a4.sin_port);
}

static void limits(struct ld_http *h, const struct ld_http_options *o)
{
    struct rlimit rl;
    unsigned int conns =
        o->max_connections ? o->max_connections : LD_HTTP_MAX_CONNECTIONS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        rlim_t room = rl.rlim_cur > FD_RESERVE + MIN_CONNECTIONS
                          ? rl.rlim_cur - FD_RESERVE
                          : MIN_CONNECTIONS;
        if (room < conns)
            conns = (unsigned int)room;
    }
    if (conns < MIN_CONNECTIONS)
        conns = MIN_CONNECTIONS;
    h->max_conns = conns;
    h->evict_at = conns - (conns / 16 > 2 ? conns / 16 : 2);
    h->max_subs = o->max_subscribers ? o->max_subscribers : LD_HTTP_MAX_SUBSCRIBERS;
    if (h->max_subs > conns / 2)
        h->max_subs = conns / 2;
    h->max_held = o->max_held ? o->max_held : LD_HTTP_MAX_HELD;
    if (h->max_held > conns / 4)
        h->max_held = conns / 4;
    h->heartbeat_ms = o->heartbeat_ms > 0 ? o->heartbeat_ms : LD_HTTP_HEARTBEAT_MS;
    h->max_wait_ms = o->max_wait_ms > 0 ? o->max_wait_ms : LD_HTTP_MAX_WAIT_MS;
}

/* Frees whatever of h was set up; the daemon must be stopped already. */
static void destroy(struct ld_http *h)
{
    if (h->listening)
        ld_state_unlisten(h->st, &h->listener);
    if (h->epfd >= 0)
        close(h->epfd);
    if (h->wakefd >= 0)
        close(h->wakefd);
    if (h->mu_ready) {
        pthread_cond_destroy(&h->drained);
        pthread_mutex_destroy(&h->mu);
        pthread_mutex_destroy(&h->conn_mu);
    }
    for (size_t i = 0; i < EVENT_RING; i++)
        free(h->ring[i].text);
    free(h);
}

/* Tells the notifier to end and waits for it. */
static void stop_notifier(struct ld_http *h)
{
    if (!h->notifier_running)
        return;
    pthread_mutex_lock(&h->mu);
    h->stopping = true;
    pthread_mutex_unlock(&h->mu);
    poke(h);
    pthread_join(h->notifier, NULL);
    h->notifier_running = false;
}

static int start_notifier(struct ld_http *h, char *err, size_t errlen)
{
    struct epoll_event ev;
    h->epfd = epoll_create1(EPOLL_CLOEXEC);
    h->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u64 = 0;
    if (h->epfd < 0 || h->wakefd < 0 ||
        epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->wakefd, &ev) != 0) {
        snprintf(err, errlen, "http: cannot set up notifications: %s", strerror(errno));
        return -1;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&h->mu, NULL) != 0) {
        pthread_condattr_destroy(&attr);
        snprintf(err, errlen, "http: cannot create a mutex");
        return -1;
    }
    if (pthread_cond_init(&h->drained, &attr) != 0) {
        pthread_condattr_destroy(&attr);
        pthread_mutex_destroy(&h->mu);
        snprintf(err, errlen, "http: cannot create a condition variable");
        return -1;
    }
    if (pthread_mutex_init(&h->conn_mu, NULL) != 0) {
        pthread_condattr_destroy(&attr);
        pthread_cond_destroy(&h->drained);
        pthread_mutex_destroy(&h->mu);
        snprintf(err, errlen, "http: cannot create a mutex");
        return -1;
    }
    pthread_condattr_destroy(&attr);
    h->mu_ready = true;
    int rc = pthread_create(&h->notifier, NULL, notifier_main, h);
    if (rc != 0) {
        snprintf(err, errlen, "http: cannot start a thread: %s", strerror(rc));
        return -1;
    }
    h->notifier_running = true;
    h->listener.fn = on_publish;
    h->listener.arg = h;
    ld_state_listen(h->st, &h->listener);
    h->listening = true;
    return 0;
}

struct ld_http *ld_http_start_opts(const char *host, int port, struct ld_state *st,
                                   struct ld_metrics *m,
                                   const struct ld_http_options *opts, char *err,
                                   size_t errlen)
{
    static const struct ld_http_options defaults;
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
    h->epfd = h->wakefd = -1;
    h->flip_at_ms = h->retry_at_ms = INT64_MAX;
    /* Ids keep growing across restarts, so a client's Last-Event-ID from
     * an earlier process never matches by accident. */
    h->seq = (uint64_t)(ld_wall_us() / 1000);
    limits(h, opts ? opts : &defaults);
    if (start_notifier(h, err, errlen) != 0)
        goto fail;
    fd = open_listener(host, port, err, errlen);
    if (fd < 0)
        goto fail;
    h->port = bound_port(fd);
    unsigned int idle_s =
        opts && opts->idle_timeout_s ? opts->idle_timeout_s : LD_HTTP_IDLE_TIMEOUT_S;
    h->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
            MHD_ALLOW_SUSPEND_RESUME,
        0, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
        h->max_conns, MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, h, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errlen, "http: cannot start the server on port %d", h->port);
        goto fail;
    }
    return h;
fail:
    if (fd >= 0)
        close(fd);
    if (h) {
        stop_notifier(h);
        destroy(h);
    }
    return NULL;
}

struct ld_http *ld_http_start(const char *host, int port, struct ld_state *st,
                              struct ld_metrics *m, char *err, size_t errlen)
{
    return ld_http_start_opts(host, port, st, m, NULL, err, errlen);
}

void ld_http_stop(struct ld_http *h)
{
    if (!h)
        return;
    stop_notifier(h);
    /* MHD must not be stopped with suspended connections: let every held
     * request go. Polls answer, streams end; nothing suspends again once
     * stopping is set. */
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += DRAIN_S;
    pthread_mutex_lock(&h->mu);
    /* The last publish (a release, say) goes out before the streams end. */
    refresh_locked(h, ld_mono_ms());
    while (h->polls)
        finish_poll(h, h->polls);
    for (struct hold *x = h->subs; x; x = x->next)
        wake(h, x);
    /* Give them a moment to go out whole (a client that does not read is
     * cut off by MHD_stop_daemon). */
    int rc = 0;
    while (h->nholds > 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&h->drained, &h->mu, &until);
    pthread_mutex_unlock(&h->mu);
    /* MHD closes the listening socket it was given. */
    MHD_stop_daemon(h->daemon);
    destroy(h);
}

int ld_http_port(const struct ld_http *h)
{
    return h ? h->port : -1;
}

void ld_http_get_stats(struct ld_http *h, struct ld_http_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->max_connections = h->max_conns;
    out->max_held = h->max_held;
    out->max_subscribers = h->max_subs;
    pthread_mutex_lock(&h->mu);
    out->held = h->npolls;
    out->subscribers = h->nsubs;
    out->seq = h->seq;
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_lock(&h->conn_mu);
    out->connections = h->nconns;
    out->idle = h->nidle;
    out->evicted = h->evicted;
    pthread_mutex_unlock(&h->conn_mu);
}
