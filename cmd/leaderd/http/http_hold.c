/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_hold: long-polls, /watch streams, the event ring and the notifier
 * thread (see http_hold.h).
 */
#include "http_hold.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "http_conn.h"
#include "http_route.h"
#include "http_shards.h"
#include "log.h"
#include "memtrim.h"

/* Chunk size MHD asks the /watch reader for; events are a few hundred
 * bytes. */
#define SSE_BLOCK 2048
/* After a failed allocation while rendering an event, try again this
 * soon. */
#define RETRY_MS 100
/* At most this long to let held requests end cleanly when stopping. */
#define DRAIN_MS 1000
/* The notifier's longest wait: its timer (due) ends it at every time it
 * has to act, this only bounds a missed wake-up. */
#define NOTIFIER_BACKSTOP_MS 60000
/* The epoll data of the timer; holds' ids count up from 1. */
#define DUE_EVENT UINT64_MAX
/* Recent events kept so that a stream that is a little behind (two
 * changes in a row, a slow reader) still gets every change in order. */
#define EVENT_RING 16
/* POST /resign requests waiting at once: one is what a caller needs, a
 * few cover retries; more would only be a way to hold connections. */
#define MAX_RESIGNS 16

static const char ping_comment[] = ": ping\n\n";

/* The text of one /watch event: "id: ID\nevent: leader\ndata: JSON\n\n"
 * (event: shards in shard mode, where it can be a few hundred KiB). Shared
 * by the ring and the streams sending it, so a stream costs no copy;
 * refs and all else under hs->mu. */
struct evtext {
    int refs;
    size_t len;
    char *text;
};

struct event {
    uint64_t id;
    struct evtext *t; /* NULL for a slot never filled */
};

enum hold_kind { HOLD_POLL, HOLD_WATCH, HOLD_RESIGN };

/* A held long-poll, /watch stream or POST /resign. A poll or a resign is
 * owned by its request (freed when MHD reports it completed); a stream
 * also by its response (freed by the response's free callback), hence
 * refs. */
struct ld_http_hold {
    struct ld_http_hold *prev, *next; /* in hs->polls or hs->subs while linked */
    struct ld_http_holds *hs;
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
            uint32_t shard;           /* LD_HTTP_NO_SHARD for GET /leader */
            struct ld_http_view seen; /* shard mode: its shard when held */
        } poll;
        struct {
            uint64_t ticket;
            int64_t deadline_ms;
        } resign;
        struct {
            uint64_t sent_seq; /* id of the last event handed to MHD */
            bool want_ping;
            struct evtext *out_ev; /* the event being handed to MHD, or NULL */
            const char *out;       /* its text, or the ping comment */
            size_t out_len, out_off;
        } watch;
    } u;
};

/* A mode's view of the state, for the holds (http_hold.h). */
struct ld_http_hold_mode {
    /* Re-reads the state and resumes whoever waits for what changed. */
    void (*refresh)(struct ld_http_holds *hs, int64_t now);
    /* The ring holds the current /watch event: 0, or -1 without memory. */
    int (*ensure_current)(struct ld_http_holds *hs);
    /* What a poll of shard (LD_HTTP_NO_SHARD: of the Lease) is compared
     * with, as the last refresh saw it; false when the poll is not of the
     * mode's kind (it is answered at once). */
    bool (*seen)(const struct ld_http_holds *hs, uint32_t shard,
                 struct ld_http_view *seen);
};

struct ld_http_holds {
    struct ld_state *st; /* borrowed */
    int64_t heartbeat_ms;
    unsigned int max_held, max_subs;
    int epfd, wakefd;
    struct ld_timer due; /* ends the notifier's wait at the next time due */
    pthread_t notifier;
    bool notifier_running, listening, mu_ready;
    struct ld_state_listener listener;
    atomic_bool wake_pending;

    pthread_mutex_t mu;
    pthread_cond_t drained; /* nholds reached 0 while stopping */
    bool stopping;
    unsigned int nholds; /* allocated, linked or not */
    bool have_view;
    const struct ld_http_hold_mode *mode;
    struct ld_http_view view; /* as of the last refresh (single-Lease mode) */
    /* Shard mode (the layout borrowed from the state): the table the
     * last event shows (a reference, NULL before the first publish) and
     * when its leadership was judged. */
    const struct ld_shardlayout *layout;
    struct ld_shardsnap *table;
    int64_t table_at_ms;
    int64_t flip_at_ms;            /* when an is_leader shown turns false by itself */
    int64_t retry_at_ms;           /* a refresh failed for memory: try again then */
    uint64_t seq;                  /* id of the event for view */
    struct event ring[EVENT_RING]; /* event id is at ring[id % EVENT_RING] */
    struct ld_http_hold *polls, *subs, *resigns;
    unsigned int npolls, nsubs, nresigns;
    uint64_t next_hold_id;
    int64_t next_ping_ms;
};

/* ---- held requests (hs->mu held) ---- */

static void poke(struct ld_http_holds *hs)
{
    uint64_t one = 1;
    /* Fails only when the counter is saturated, i.e. a wake-up is pending. */
    if (write(hs->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        ld_log(LD_LOG_DEBUG, "http: cannot wake the notifier: %s", strerror(errno));
}

static void on_publish(void *arg)
{
    struct ld_http_holds *hs = arg;
    if (!atomic_exchange(&hs->wake_pending, true))
        poke(hs);
}

/* The list of x's kind and its count. */
static struct ld_http_hold **head_of(struct ld_http_holds *hs, enum hold_kind kind,
                                     unsigned int **count)
{
    switch (kind) {
    case HOLD_POLL:
        *count = &hs->npolls;
        return &hs->polls;
    case HOLD_WATCH:
        *count = &hs->nsubs;
        return &hs->subs;
    case HOLD_RESIGN:
        break;
    }
    *count = &hs->nresigns;
    return &hs->resigns;
}

static void link_hold(struct ld_http_holds *hs, struct ld_http_hold *x)
{
    unsigned int *count;
    struct ld_http_hold **head = head_of(hs, x->kind, &count);
    x->prev = NULL;
    x->next = *head;
    if (*head)
        (*head)->prev = x;
    *head = x;
    x->linked = true;
    (*count)++;
}

static void unlink_hold(struct ld_http_holds *hs, struct ld_http_hold *x)
{
    if (!x->linked)
        return;
    unsigned int *count;
    struct ld_http_hold **head = head_of(hs, x->kind, &count);
    if (x->prev)
        x->prev->next = x->next;
    else
        *head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
    x->linked = false;
    (*count)--;
}

/* Only from a handler or the /watch reader, on MHD's thread. */
static void suspend(struct ld_http_holds *hs, struct ld_http_hold *x)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLRDHUP;
    ev.data.u64 = x->id;
    /* Without it a hang-up is noticed at the next write instead. */
    if (x->fd >= 0 && epoll_ctl(hs->epfd, EPOLL_CTL_ADD, x->fd, &ev) != 0)
        ld_log(LD_LOG_DEBUG, "http: cannot watch a held connection: %s", strerror(errno));
    x->suspended = true;
    MHD_suspend_connection(x->conn);
}

static void wake(struct ld_http_holds *hs, struct ld_http_hold *x)
{
    if (!x->suspended)
        return;
    x->suspended = false;
    if (x->fd >= 0)
        epoll_ctl(hs->epfd, EPOLL_CTL_DEL, x->fd, NULL);
    MHD_resume_connection(x->conn);
}

/* The poll gets its answer: its handler runs again once resumed. */
static void finish_poll(struct ld_http_holds *hs, struct ld_http_hold *x)
{
    unlink_hold(hs, x);
    wake(hs, x);
}

static void evtext_unref(struct evtext *e)
{
    if (e && --e->refs == 0) {
        free(e->text);
        free(e);
    }
}

static void release_hold(struct ld_http_holds *hs, struct ld_http_hold *x)
{
    unlink_hold(hs, x);
    if (--x->refs > 0)
        return;
    if (x->suspended && x->fd >= 0)
        epoll_ctl(hs->epfd, EPOLL_CTL_DEL, x->fd, NULL);
    if (x->kind == HOLD_WATCH)
        evtext_unref(x->u.watch.out_ev);
    free(x);
    if (--hs->nholds == 0 && hs->stopping)
        pthread_cond_broadcast(&hs->drained);
}

/* Puts text (taken over; len bytes) into the ring as event seq and makes
 * it the current one. -1 (text freed) when memory ran out. */
static int store_event_locked(struct ld_http_holds *hs, uint64_t seq, char *text,
                              size_t len)
{
    struct evtext *e = malloc(sizeof(*e));
    if (!e) {
        free(text);
        return -1;
    }
    e->refs = 1;
    e->len = len;
    e->text = text;
    struct event *slot = &hs->ring[seq % EVENT_RING];
    evtext_unref(slot->t);
    slot->id = seq;
    slot->t = e;
    hs->seq = seq;
    hs->have_view = true;
    return 0;
}

/* When the claims of t lapse, if we lead a shard at now (INT64_MAX if
 * none): that is when the view changes by time alone. */
static int64_t earliest_lapse(const struct ld_shardsnap *t, int64_t now)
{
    for (uint32_t i = 0; t && i < t->n_shards; i++) {
        if (ld_shardsnap_leads(t, i, now))
            return t->claims_until_ms;
    }
    return INT64_MAX;
}

/* Whether a and b differ in the three fields a long-poll waits for. */
static bool poll_fields_differ(const struct ld_http_view *a, const struct ld_http_view *b)
{
    return a->is_leader != b->is_leader || a->term != b->term ||
           strcmp(a->leader, b->leader) != 0;
}

/* Shard mode renders events only while someone streams: with 1024 shards
 * one is a few hundred KiB, and the ring would keep EVENT_RING of them for
 * nobody. Without streams a change only takes the next id and the ring is
 * emptied; the next stream to open gets the current event, rendered then
 * (the mode's ensure_current). */
static void drop_events_locked(struct ld_http_holds *hs)
{
    for (size_t i = 0; i < EVENT_RING; i++) {
        evtext_unref(hs->ring[i].t);
        hs->ring[i].t = NULL;
    }
}

/* Shard mode: makes sure the ring holds the current event (id hs->seq,
 * for hs->table as judged at table_at_ms, the view it stands for). 0, or
 * -1 when memory ran out. */
static int ensure_current_shards_locked(struct ld_http_holds *hs)
{
    struct ld_snapshot snap;
    size_t len = 0;
    const struct event *slot = &hs->ring[hs->seq % EVENT_RING];
    if (slot->t && slot->id == hs->seq)
        return 0;
    ld_state_read(hs->st, &snap);
    char *ev = ld_http_render_shards_event(true, hs->seq, hs->layout, &snap, hs->table,
                                           hs->table_at_ms, &len);
    return ev ? store_event_locked(hs, hs->seq, ev, len) : -1;
}

/* Shard mode's refresh: the table is taken by reference and rendered
 * without the state's mutex (ld_state_read_shards), whatever its size.
 * When any shard's leader, term or is_leader, or the members, differ from
 * what the last event showed, makes the next "shards" event (rendered when
 * someone streams), wakes every stream, and answers each held /shards/ID
 * poll whose shard changed. */
static void refresh_shards_locked(struct ld_http_holds *hs, int64_t now)
{
    struct ld_snapshot snap;
    struct ld_http_view v;
    size_t len = 0;
    struct ld_shardsnap *t = ld_state_read_shards(hs->st, &snap);
    hs->flip_at_ms = earliest_lapse(t, now);
    if (hs->have_view && ld_shardsnap_same_view_at(hs->table, hs->table_at_ms, t, now)) {
        ld_shardsnap_unref(t);
        return;
    }
    uint64_t seq = hs->have_view ? hs->seq + 1 : hs->seq;
    if (hs->nsubs > 0) {
        char *ev =
            ld_http_render_shards_event(true, seq, hs->layout, &snap, t, now, &len);
        if (!ev || store_event_locked(hs, seq, ev, len) != 0) {
            ld_shardsnap_unref(t);
            hs->retry_at_ms = now + RETRY_MS;
            return;
        }
    } else {
        drop_events_locked(hs);
        hs->seq = seq;
        hs->have_view = true;
    }
    hs->retry_at_ms = INT64_MAX;
    ld_shardsnap_unref(hs->table);
    hs->table = t;
    hs->table_at_ms = now;
    for (struct ld_http_hold *x = hs->subs; x; x = x->next)
        wake(hs, x);
    for (struct ld_http_hold *x = hs->polls, *next; x; x = next) {
        next = x->next;
        ld_http_shard_view_of(t, x->u.poll.shard, now, &v);
        if (poll_fields_differ(&x->u.poll.seen, &v))
            finish_poll(hs, x);
    }
}

/* Re-reads the state; when what /leader shows has changed, renders the
 * event for it with the next id and resumes whoever waits for a change. */
static void refresh_lease_locked(struct ld_http_holds *hs, int64_t now)
{
    struct ld_snapshot snap;
    struct ld_http_view v;
    size_t len = 0;
    ld_state_read(hs->st, &snap);
    ld_http_view_of(&snap, now, &v);
    hs->flip_at_ms = v.is_leader ? snap.lead_until_ms : INT64_MAX;
    if (hs->have_view && ld_http_view_eq(&v, &hs->view))
        return;
    uint64_t seq = hs->have_view ? hs->seq + 1 : hs->seq;
    /* Long-polls wait for these three (the contract's fields); a stream
     * also hears of the first observation. */
    bool changed =
        hs->have_view && (v.is_leader != hs->view.is_leader || v.term != hs->view.term ||
                          strcmp(v.leader, hs->view.leader) != 0);
    char *ev = ld_http_render_event(true, seq, &snap, now, &len);
    if (!ev || store_event_locked(hs, seq, ev, len) != 0) {
        hs->retry_at_ms = now + RETRY_MS;
        return;
    }
    hs->retry_at_ms = INT64_MAX;
    hs->view = v;
    for (struct ld_http_hold *x = hs->subs; x; x = x->next)
        wake(hs, x);
    /* Every held poll was held at the previous view, so any change of the
     * three answers all of them, also one in a field they did not give. */
    while (changed && hs->polls)
        finish_poll(hs, hs->polls);
}

static void expire_polls_locked(struct ld_http_holds *hs, int64_t now)
{
    for (struct ld_http_hold *x = hs->polls, *next; x; x = next) {
        next = x->next;
        if (x->u.poll.deadline_ms <= now)
            finish_poll(hs, x);
    }
}

/* A resign is answered once the loop has answered its ticket, or at its
 * deadline without an outcome. */
static void settle_resigns_locked(struct ld_http_holds *hs, int64_t now)
{
    for (struct ld_http_hold *x = hs->resigns, *next; x; x = next) {
        next = x->next;
        if (x->u.resign.deadline_ms <= now ||
            ld_state_resign_outcome(hs->st, x->u.resign.ticket) != LD_RESIGN_PENDING)
            finish_poll(hs, x);
    }
}

static void heartbeat_locked(struct ld_http_holds *hs, int64_t now)
{
    if (hs->nsubs == 0 || now < hs->next_ping_ms)
        return;
    hs->next_ping_ms = now + hs->heartbeat_ms;
    for (struct ld_http_hold *x = hs->subs; x; x = x->next) {
        x->u.watch.want_ping = true;
        wake(hs, x);
    }
}

/* When the notifier has to act next (ld_mono_ms), INT64_MAX for never. */
static int64_t next_due_locked(const struct ld_http_holds *hs)
{
    int64_t t = hs->flip_at_ms < hs->retry_at_ms ? hs->flip_at_ms : hs->retry_at_ms;
    if (hs->nsubs > 0 && hs->next_ping_ms < t)
        t = hs->next_ping_ms;
    for (struct ld_http_hold *x = hs->polls; x; x = x->next) {
        if (x->u.poll.deadline_ms < t)
            t = x->u.poll.deadline_ms;
    }
    for (struct ld_http_hold *x = hs->resigns; x; x = x->next) {
        if (x->u.resign.deadline_ms < t)
            t = x->u.resign.deadline_ms;
    }
    return t;
}

static struct ld_http_hold *find_hold(struct ld_http_holds *hs, uint64_t id)
{
    for (struct ld_http_hold *x = hs->polls; x; x = x->next) {
        if (x->id == id)
            return x;
    }
    for (struct ld_http_hold *x = hs->subs; x; x = x->next) {
        if (x->id == id)
            return x;
    }
    for (struct ld_http_hold *x = hs->resigns; x; x = x->next) {
        if (x->id == id)
            return x;
    }
    return NULL;
}

static void *notifier_main(void *arg)
{
    struct ld_http_holds *hs = arg;
    struct epoll_event evs[64];
    for (;;) {
        pthread_mutex_lock(&hs->mu);
        if (hs->stopping) {
            pthread_mutex_unlock(&hs->mu);
            break;
        }
        int64_t now = ld_mono_ms();
        hs->mode->refresh(hs, now);
        expire_polls_locked(hs, now);
        settle_resigns_locked(hs, now);
        heartbeat_locked(hs, now);
        /* A lead deadline (flip_at_ms) is enforced by the timer, not by
         * epoll_wait's timeout, which a suspend would stretch past it. */
        ld_timer_arm(&hs->due, next_due_locked(hs));
        pthread_mutex_unlock(&hs->mu);

        int n = epoll_wait(hs->epfd, evs, (int)(sizeof(evs) / sizeof(evs[0])),
                           NOTIFIER_BACKSTOP_MS);
        if (n < 0) {
            if (errno != EINTR)
                ld_log(LD_LOG_WARN, "http: epoll_wait: %s", strerror(errno));
            continue;
        }
        bool locked = false;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == DUE_EVENT)
                continue; /* the next round acts on it and rearms it */
            if (evs[i].data.u64 == 0) {
                uint64_t count;
                if (read(hs->wakefd, &count, sizeof(count)) < 0 && errno != EAGAIN)
                    ld_log(LD_LOG_DEBUG, "http: eventfd: %s", strerror(errno));
                /* Cleared before the next refresh reads the state, so no
                 * publish is missed. */
                atomic_store(&hs->wake_pending, false);
                continue;
            }
            if (!locked) {
                pthread_mutex_lock(&hs->mu);
                locked = true;
            }
            struct ld_http_hold *x = find_hold(hs, evs[i].data.u64);
            if (x) {
                x->gone = true;
                unlink_hold(hs, x);
                wake(hs, x);
            }
        }
        if (locked)
            pthread_mutex_unlock(&hs->mu);
    }
    return NULL;
}

/* Loads the next bytes for stream x: the event after the last one it had
 * (or the current one, for a new stream or one too far behind), else a
 * heartbeat when one is due; nothing when neither. */
static void fill_watch_locked(struct ld_http_holds *hs, struct ld_http_hold *x)
{
    uint64_t sent = x->u.watch.sent_seq;
    evtext_unref(x->u.watch.out_ev);
    x->u.watch.out_ev = NULL;
    x->u.watch.out = NULL;
    x->u.watch.out_len = x->u.watch.out_off = 0;
    if (hs->have_view && sent != hs->seq) {
        const struct event *e = &hs->ring[hs->seq % EVENT_RING];
        const struct event *after = &hs->ring[(sent + 1) % EVENT_RING];
        if (sent != 0 && sent < hs->seq && after->t && after->id == sent + 1)
            e = after;
        e->t->refs++;
        x->u.watch.out_ev = e->t;
        x->u.watch.out = e->t->text;
        x->u.watch.out_len = e->t->len;
        x->u.watch.sent_seq = e->id;
        x->u.watch.want_ping = false;
    } else if (x->u.watch.want_ping) {
        x->u.watch.out = ping_comment;
        x->u.watch.out_len = strlen(ping_comment);
        x->u.watch.want_ping = false;
    }
}

/* MHD's reader for a /watch stream. With nothing to send it suspends the
 * connection and returns 0, which MHD 0.9.75 allows only together with a
 * suspension (it would otherwise call again at once); the notifier resumes
 * it when there is something new, and MHD calls this again. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct ld_http_hold *x = cls;
    struct ld_http_holds *hs = x->hs;
    ssize_t n = 0;
    (void)pos;
    pthread_mutex_lock(&hs->mu);
    if (x->gone) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
        goto out;
    }
    if (x->u.watch.out_off == x->u.watch.out_len)
        fill_watch_locked(hs, x);
    size_t left = x->u.watch.out_len - x->u.watch.out_off;
    if (left == 0) {
        /* When stopping, what was left to say has been said. */
        if (hs->stopping)
            n = MHD_CONTENT_READER_END_OF_STREAM;
        else
            suspend(hs, x);
        goto out;
    }
    if (left > max)
        left = max;
    memcpy(buf, x->u.watch.out + x->u.watch.out_off, left);
    x->u.watch.out_off += left;
    n = (ssize_t)left;
out:
    pthread_mutex_unlock(&hs->mu);
    return n;
}

/* MHD destroyed a stream's response. */
static void sse_free(void *cls)
{
    ld_http_hold_release(cls);
}

/* ---- each mode's view of the state -------------------------------------- */

/* The single Lease's events are made as it is refreshed. */
static int ensure_current_lease_locked(struct ld_http_holds *hs)
{
    (void)hs;
    return 0;
}

static bool seen_lease(const struct ld_http_holds *hs, uint32_t shard,
                       struct ld_http_view *seen)
{
    *seen = hs->view;
    return shard == LD_HTTP_NO_SHARD;
}

static bool seen_shard(const struct ld_http_holds *hs, uint32_t shard,
                       struct ld_http_view *seen)
{
    if (shard == LD_HTTP_NO_SHARD)
        return false;
    ld_http_shard_view_of(hs->table, shard, hs->table_at_ms, seen);
    return true;
}

const struct ld_http_hold_mode ld_http_hold_lease_mode = {
    refresh_lease_locked, ensure_current_lease_locked, seen_lease};
const struct ld_http_hold_mode ld_http_hold_shard_mode = {
    refresh_shards_locked, ensure_current_shards_locked, seen_shard};

/* A new hold of kind on c, counted but not linked; NULL when out of
 * memory. */
static struct ld_http_hold *new_hold_locked(struct ld_http_holds *hs,
                                            struct MHD_Connection *c, enum hold_kind kind)
{
    struct ld_http_hold *x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    hs->nholds++;
    x->hs = hs;
    x->conn = c;
    x->kind = kind;
    x->refs = kind == HOLD_WATCH ? 2 : 1; /* a stream's response holds it too */
    x->id = ++hs->next_hold_id;
    x->fd = ld_http_conn_fd(c);
    return x;
}

struct ld_http_hold *ld_http_hold_poll(struct ld_http_holds *hs, struct MHD_Connection *c,
                                       const struct ld_http_poll *want)
{
    return ld_http_hold_poll_shard(hs, c, want, LD_HTTP_NO_SHARD);
}

struct ld_http_hold *ld_http_hold_poll_shard(struct ld_http_holds *hs,
                                             struct MHD_Connection *c,
                                             const struct ld_http_poll *want,
                                             uint32_t shard)
{
    struct ld_http_hold *x = NULL;
    struct ld_http_view seen;
    pthread_mutex_lock(&hs->mu);
    int64_t now = ld_mono_ms();
    hs->mode->refresh(hs, now);
    /* Past the cap the caller gets the current state at once, which the
     * contract allows at any time. A poll is of the mode's kind only. */
    if (!hs->stopping && hs->have_view && hs->mode->seen(hs, shard, &seen) &&
        !ld_http_view_differs(want, &seen) && hs->npolls < hs->max_held)
        x = new_hold_locked(hs, c, HOLD_POLL);
    if (x) {
        x->u.poll.deadline_ms = now + want->wait_ms;
        x->u.poll.shard = shard;
        x->u.poll.seen = seen;
        link_hold(hs, x);
        suspend(hs, x);
        poke(hs); /* its deadline may be nearer than the notifier's timer */
    }
    pthread_mutex_unlock(&hs->mu);
    return x;
}

struct ld_http_hold *ld_http_hold_resign(struct ld_http_holds *hs,
                                         struct MHD_Connection *c)
{
    struct ld_http_hold *x = NULL;
    int64_t wait_ms = 0;
    pthread_mutex_lock(&hs->mu);
    /* Room first: a request that cannot wait for its outcome must not ask
     * the loop to resign. */
    if (!hs->stopping && hs->nresigns < MAX_RESIGNS)
        x = new_hold_locked(hs, c, HOLD_RESIGN);
    if (x) {
        x->u.resign.ticket = ld_state_resign_ask(hs->st, &wait_ms);
        if (x->u.resign.ticket == 0) {
            release_hold(hs, x);
            x = NULL;
        }
    }
    if (x) {
        x->u.resign.deadline_ms = ld_mono_ms() + wait_ms;
        link_hold(hs, x);
        suspend(hs, x);
        poke(hs); /* for its deadline */
    }
    pthread_mutex_unlock(&hs->mu);
    return x;
}

bool ld_http_hold_is_resign(const struct ld_http_hold *x)
{
    return x->kind == HOLD_RESIGN;
}

uint64_t ld_http_hold_ticket(const struct ld_http_hold *x)
{
    return x->kind == HOLD_RESIGN ? x->u.resign.ticket : 0;
}

bool ld_http_hold_resumed(struct ld_http_hold *x)
{
    struct ld_http_holds *hs = x->hs;
    pthread_mutex_lock(&hs->mu);
    bool gone = x->gone;
    unlink_hold(hs, x);
    pthread_mutex_unlock(&hs->mu);
    return !gone;
}

bool ld_http_hold_is_poll(const struct ld_http_hold *x)
{
    return x->kind == HOLD_POLL;
}

void ld_http_hold_release(struct ld_http_hold *x)
{
    struct ld_http_holds *hs = x->hs;
    pthread_mutex_lock(&hs->mu);
    release_hold(hs, x);
    pthread_mutex_unlock(&hs->mu);
}

enum ld_http_watch_rc ld_http_watch_open(struct ld_http_holds *hs,
                                         struct MHD_Connection *c,
                                         const char *last_event_id,
                                         struct MHD_Response **resp,
                                         struct ld_http_hold **hold)
{
    uint64_t last = 0;
    struct ld_http_hold *x = NULL;
    bool has_last = ld_http_parse_event_id(last_event_id, &last);

    pthread_mutex_lock(&hs->mu);
    hs->mode->refresh(hs, ld_mono_ms());
    enum ld_http_watch_rc refused = hs->stopping                ? LD_HTTP_WATCH_STOPPING
                                    : !hs->have_view            ? LD_HTTP_WATCH_STARTING
                                    : hs->nsubs >= hs->max_subs ? LD_HTTP_WATCH_FULL
                                                                : LD_HTTP_WATCH_OK;
    bool full = refused != LD_HTTP_WATCH_OK;
    if (!full && hs->mode->ensure_current(hs) == 0)
        x = new_hold_locked(hs, c, HOLD_WATCH);
    if (x) {
        /* The current state supersedes any event a reconnecting client
         * missed, so it gets that once unless it has it already. */
        x->u.watch.sent_seq = has_last && last == hs->seq ? hs->seq : 0;
        if (hs->nsubs == 0)
            hs->next_ping_ms = ld_mono_ms() + hs->heartbeat_ms;
        link_hold(hs, x);
        poke(hs); /* heartbeats are due from now on */
    }
    pthread_mutex_unlock(&hs->mu);
    if (full)
        return refused;
    if (!x)
        return LD_HTTP_WATCH_NOMEM;

    *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, sse_read, x,
                                              sse_free);
    if (!*resp) {
        pthread_mutex_lock(&hs->mu);
        x->refs = 1; /* no response will let go of it */
        release_hold(hs, x);
        pthread_mutex_unlock(&hs->mu);
        return LD_HTTP_WATCH_FAILED;
    }
    *hold = x;
    return LD_HTTP_WATCH_OK;
}

void ld_http_holds_stats(struct ld_http_holds *hs, struct ld_http_stats *out)
{
    pthread_mutex_lock(&hs->mu);
    out->held = hs->npolls;
    out->subscribers = hs->nsubs;
    out->seq = hs->seq;
    pthread_mutex_unlock(&hs->mu);
}

/* ---- starting and stopping ---- */

/* The mutex and the condition variable (on the monotonic clock, for the
 * drain's deadline). */
static int init_sync(struct ld_http_holds *hs, struct ld_errinfo *err)
{
    pthread_condattr_t attr;
    int rc = -1;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, LD_COND_CLOCK);
    if (pthread_mutex_init(&hs->mu, NULL) != 0) {
        ld_errinfo_set(err, LD_ESYS, "http: cannot create a mutex");
    } else if (pthread_cond_init(&hs->drained, &attr) != 0) {
        pthread_mutex_destroy(&hs->mu);
        ld_errinfo_set(err, LD_ESYS, "http: cannot create a condition variable");
    } else {
        hs->mu_ready = true;
        rc = 0;
    }
    pthread_condattr_destroy(&attr);
    return rc;
}

/* The epoll set with the wake-up eventfd in it (data 0) and the timer
 * (data DUE_EVENT). */
static int init_epoll(struct ld_http_holds *hs, struct ld_errinfo *err)
{
    struct epoll_event ev, due;
    hs->epfd = epoll_create1(EPOLL_CLOEXEC);
    hs->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u64 = 0;
    due = ev;
    due.data.u64 = DUE_EVENT;
    if (hs->epfd < 0 || hs->wakefd < 0 || ld_timer_open(&hs->due, NULL) != 0 ||
        epoll_ctl(hs->epfd, EPOLL_CTL_ADD, hs->wakefd, &ev) != 0 ||
        epoll_ctl(hs->epfd, EPOLL_CTL_ADD, hs->due.fd, &due) != 0) {
        ld_errinfo_set(err, LD_ESYS, "http: cannot set up notifications: %s",
                       strerror(errno));
        return -1;
    }
    return 0;
}

struct ld_http_holds *ld_http_holds_start(struct ld_state *st,
                                          const struct ld_http_hold_mode *mode,
                                          int64_t heartbeat_ms, unsigned int max_held,
                                          unsigned int max_subs, struct ld_errinfo *err)
{
    int rc = 0;
    struct ld_http_holds *hs = calloc(1, sizeof(*hs));
    if (!hs) {
        ld_errinfo_set(err, LD_ENOMEM, "http: out of memory");
        return NULL;
    }
    hs->st = st;
    hs->mode = mode;
    hs->layout = st->layout; /* shard mode's renderers read it */
    hs->heartbeat_ms = heartbeat_ms;
    hs->max_held = max_held;
    hs->max_subs = max_subs;
    hs->epfd = hs->wakefd = hs->due.fd = -1;
    hs->flip_at_ms = hs->retry_at_ms = INT64_MAX;
    /* Ids keep growing across restarts, so a client's Last-Event-ID from
     * an earlier process never matches by accident. */
    hs->seq = (uint64_t)(ld_wall_us() / 1000);
    if (init_epoll(hs, err) != 0 || init_sync(hs, err) != 0)
        goto fail;
    pthread_attr_t attr;
    rc = pthread_attr_init(&attr);
    if (rc == 0) {
        rc = pthread_attr_setstacksize(&attr, LD_THREAD_STACK);
        if (rc == 0)
            rc = pthread_create(&hs->notifier, &attr, notifier_main, hs);
        pthread_attr_destroy(&attr);
    }
    if (rc != 0) {
        ld_errinfo_set(err, LD_ESYS, "http: cannot start a thread: %s", strerror(rc));
        goto fail;
    }
    hs->notifier_running = true;
    hs->listener.fn = on_publish;
    hs->listener.arg = hs;
    ld_state_listen(hs->st, &hs->listener);
    hs->listening = true;
    return hs;
fail:
    ld_http_holds_free(hs);
    return NULL;
}

/* Tells the notifier to end and waits for it. */
static void stop_notifier(struct ld_http_holds *hs)
{
    if (!hs->notifier_running)
        return;
    pthread_mutex_lock(&hs->mu);
    hs->stopping = true;
    pthread_mutex_unlock(&hs->mu);
    poke(hs);
    pthread_join(hs->notifier, NULL);
    hs->notifier_running = false;
}

void ld_http_holds_stop(struct ld_http_holds *hs)
{
    struct timespec until;
    int rc = 0;
    stop_notifier(hs);
    ld_cond_deadline(DRAIN_MS, &until);
    pthread_mutex_lock(&hs->mu);
    /* The last publish (a release, say) goes out before the streams end. */
    hs->mode->refresh(hs, ld_mono_ms());
    while (hs->polls)
        finish_poll(hs, hs->polls);
    while (hs->resigns)
        finish_poll(hs, hs->resigns);
    for (struct ld_http_hold *x = hs->subs; x; x = x->next)
        wake(hs, x);
    /* Give them a moment to go out whole (a client that does not read is
     * cut off when MHD stops). */
    while (hs->nholds > 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&hs->drained, &hs->mu, &until);
    pthread_mutex_unlock(&hs->mu);
}

void ld_http_holds_free(struct ld_http_holds *hs)
{
    if (!hs)
        return;
    stop_notifier(hs);
    if (hs->listening)
        ld_state_unlisten(hs->st, &hs->listener);
    if (hs->epfd >= 0)
        close(hs->epfd);
    if (hs->wakefd >= 0)
        close(hs->wakefd);
    ld_timer_close(&hs->due);
    if (hs->mu_ready) {
        pthread_cond_destroy(&hs->drained);
        pthread_mutex_destroy(&hs->mu);
    }
    for (size_t i = 0; i < EVENT_RING; i++)
        evtext_unref(hs->ring[i].t);
    ld_shardsnap_unref(hs->table);
    free(hs);
}
