/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host: drives many election engines from one loop over asynchronous
 * Lease calls and one shared watch.
 *
 * A pass asks every engine that is due (its wake-up time came, or it learnt
 * something: an answer, a watch event, a wake) for its next step and
 * starts the request it wants; then the host waits in the transport until
 * the earliest wake-up time or until a callback ran. An engine with a
 * request in flight is simply not asked, so each Lease moves at the pace of
 * its own requests.
 */
#include "host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnsname.h"
#include "log.h"
#include "watch.h"

#define WATCH_BACKOFF_MIN_MS 250
#define WATCH_BACKOFF_MAX_MS 30000
/* Streams are re-opened at a random point in this range, so replicas do
 * not all reconnect at once. */
#define WATCH_TIMEOUT_MIN_S 240
#define WATCH_TIMEOUT_SPAN_S 60
/* A stream that lasted this long was healthy: reconnect without backoff. */
#define WATCH_STABLE_MS 60000
/* The longest a pass sleeps: silence checks need a pass now and then. */
#define MAX_SLEEP_MS 60000
/* Watch events kept for an election while its request is in flight; more
 * means the stream outruns the API's answers, and it is restarted. */
#define HELD_EVENTS_MAX 64

/* A watch event that came while the election's request was in flight: the
 * engine takes observations only between requests, and losing one could
 * lose a term (a Lease written, then deleted, while we waited). */
struct held_event {
    bool deleted;
    struct ld_lease lease; /* owned */
};

/* One election and what the host keeps for it besides the engine. */
struct hel {
    struct ld_host *host;
    size_t index;
    struct ld_election *e;
    char *name;
    struct ld_host_election_ops ops;
    ld_kube_call call; /* the request in flight, 0 when none */
    enum ld_action_kind call_kind;
    int64_t call_started_ms;
    int64_t wake_at_ms;   /* when the engine wants to be asked again */
    int64_t republish_ms; /* when the caller wants a publish again */
    bool due;             /* ask it at the next pass whatever the time */
    /* Its last step was a wait: the engine takes observations only then,
     * so watch events are held while it is in a request or between two
     * requests of one attempt. */
    bool idle;
    bool done;
    bool release_held; /* the caller held its release at the last pass */
    bool abandon;      /* ld_host_abandon_release: give the release up */
    bool first_leader_seen;
    int64_t transitions_seen;
    enum ld_err last_logged_err; /* a run of one failure is logged once */
    /* The latest API failure, NULL since the last success: on the heap, as
     * it takes hundreds of bytes and a host of many rarely needs one. */
    struct ld_errinfo *last_err;
    int64_t auth_failing_since_ms;
    int64_t last_request_ms;
    uint64_t watch_missed_seen;
    struct held_event *held; /* in arrival order */
    size_t n_held, cap_held;
};

/* The one watch of the host. */
struct hwatch {
    ld_kube_call call; /* 0 when none runs */
    struct ld_watch_decoder decoder;
    bool healthy;
    int64_t started_ms;
    int64_t next_start_ms;
    int64_t backoff_ms;
    int64_t last_data_ms;
    bool relist; /* start from the current state, not from rv */
    bool ended;  /* an ERROR event: stop once out of the callback */
    char *rv;    /* a group's latest resourceVersion seen on the stream */
    unsigned invalid_logged;
};

struct ld_host {
    struct ld_kube *kube;
    char *namespace_;
    char *selector; /* NULL: no group */
    int64_t lease_duration_ms;
    int64_t renew_deadline_ms;
    bool log_names;
    struct ld_clock clock;
    struct ld_host_observer obs;
    struct hel **els;
    size_t n, cap;
    size_t n_done;
    bool stopping;
    bool in_run;           /* inside ld_host_run: callbacks may be running */
    bool shutdown_pending; /* ld_host_shutdown from a callback */
    struct hwatch w;
};

/* ---- clocks and logs ---- */

static int64_t mono(const struct ld_host *h)
{
    return h->clock.mono_ms(h->clock.ctx);
}

static struct ld_now now_of(const struct ld_host *h)
{
    struct ld_now now = {.mono_ms = mono(h), .wall_us = h->clock.wall_us(h->clock.ctx)};
    return now;
}

/* A line about one election; named when the host has several. */
__attribute__((format(printf, 3, 4))) static void
elog(const struct hel *el, enum ld_log_level level, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    if (!ld_log_enabled(level))
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (el->host->log_names)
        ld_log(level, "lease %s: %s", el->name, text);
    else
        ld_log(level, "%s", text);
}

/* ---- publishing ---- */

static void log_event(struct hel *el, const struct ld_event *ev)
{
    const struct ld_host *h = el->host;
    switch (ev->kind) {
    case LD_EV_STARTED_LEADING:
        elog(el, LD_LOG_INFO, "leadership acquired: %s/%s now held by \"%s\" (term %d)",
             h->namespace_, el->name, ev->leader, (int)ev->term);
        break;
    case LD_EV_STOPPED_LEADING:
        if (ev->reason == LD_STOP_RENEW_DEADLINE && el->last_err &&
            el->last_err->code != LD_OK)
            elog(el, LD_LOG_WARN, "leadership lost: %s (term %d); last API error: %s",
                 ld_stop_reason_str(ev->reason), (int)ev->term, el->last_err->msg);
        else
            elog(el, LD_LOG_WARN, "leadership lost: %s (term %d)",
                 ld_stop_reason_str(ev->reason), (int)ev->term);
        break;
    case LD_EV_NEW_LEADER:
        if (el->first_leader_seen)
            el->transitions_seen++;
        el->first_leader_seen = true;
        if (ev->leader[0])
            elog(el, LD_LOG_INFO, "leader observed: \"%s\" (term %d)", ev->leader,
                 (int)ev->term);
        else
            elog(el, LD_LOG_INFO, "leader observed: none, the lease is free (term %d)",
                 (int)ev->term);
        break;
    case LD_EV_RELEASED:
        elog(el, LD_LOG_INFO, "lease released (term %d)", (int)ev->term);
        break;
    case LD_EV_RELEASE_FAILED:
        elog(el, LD_LOG_WARN,
             "stepped down (%s) but the release was not written; the lease "
             "expires by itself (term %d)",
             ld_stop_reason_str(ev->reason), (int)ev->term);
        break;
    case LD_EV_IDENTITY_CONFLICT:
        elog(el, LD_LOG_ERROR,
             "identity conflict: another process holds %s/%s under our identity \"%s\"; "
             "identities must be unique (use the pod name); standing back",
             h->namespace_, el->name, ev->leader);
        break;
    }
}

/* What a view shows while there is no failure to show. */
static const struct ld_errinfo no_api_error = {.code = LD_OK};

static void publish(struct hel *el, int64_t now_ms)
{
    struct ld_event ev;
    while (ld_election_take_event(el->e, &ev)) {
        log_event(el, &ev);
        if (el->ops.on_event)
            el->ops.on_event(el->ops.ctx, el->index, &ev);
    }
    el->republish_ms = INT64_MAX;
    if (!el->ops.on_publish)
        return;
    struct ld_host_view v = {
        .index = el->index,
        .name = el->name,
        .transitions_seen = el->transitions_seen,
        .auth_failing_since_ms = el->auth_failing_since_ms,
        .last_err = el->last_err ? el->last_err : &no_api_error,
    };
    ld_election_status(el->e, &v.status);
    el->ops.on_publish(el->ops.ctx, &v, now_ms);
    if (el->ops.next_publish_ms)
        el->republish_ms = el->ops.next_publish_ms(el->ops.ctx, el->index, now_ms);
}

/* ---- watch events held while a request is in flight ---- */

static void observe_one(struct hel *el, bool deleted, const struct ld_lease *lease,
                        struct ld_now now)
{
    if (deleted)
        ld_election_observe_deleted(el->e, now, lease);
    else
        ld_election_observe(el->e, now, lease);
    el->due = true;
}

static void drop_held(struct hel *el)
{
    for (size_t i = 0; i < el->n_held; i++)
        ld_lease_clear(&el->held[i].lease);
    el->n_held = 0;
}

/* Keeps an event for after the request; false when it cannot. */
static bool hold(struct hel *el, bool deleted, const struct ld_lease *lease)
{
    if (el->n_held == HELD_EVENTS_MAX)
        return false;
    if (el->n_held == el->cap_held) {
        size_t cap = el->cap_held ? el->cap_held * 2 : 2;
        struct held_event *nh = realloc(el->held, cap * sizeof(*nh));
        if (!nh)
            return false;
        el->held = nh;
        el->cap_held = cap;
    }
    struct held_event *he = &el->held[el->n_held];
    he->deleted = deleted;
    ld_lease_init(&he->lease);
    if (ld_lease_copy_compact(&he->lease, lease) != LD_OK) {
        ld_lease_clear(&he->lease);
        return false;
    }
    el->n_held++;
    return true;
}

/* After a request's result: what the watch said meanwhile, in order. The
 * engine sets lagging events apart itself (lower terms, own echoes). */
static void release_held(struct hel *el, struct ld_now now)
{
    for (size_t i = 0; i < el->n_held; i++)
        observe_one(el, el->held[i].deleted, &el->held[i].lease, now);
    drop_held(el);
    /* Not kept for the next request: usually one event (the echo of our
     * own write) is held at a time, and a host of many would keep one
     * buffer per election between requests. */
    if (el->held) {
        free(el->held);
        el->held = NULL;
        el->cap_held = 0;
    }
}

/* ---- requests ---- */

static const char *verb_of(enum ld_action_kind kind)
{
    return kind == LD_ACT_GET ? "GET" : kind == LD_ACT_CREATE ? "POST" : "PUT";
}

/* API failures are normal events for an elector (a lost race is a 409), so
 * conflicts are debug and a run of identical errors is logged once. */
static void note_outcome(struct hel *el, enum ld_err rc, const struct ld_errinfo *err,
                         int64_t now_ms)
{
    bool auth = rc == LD_EUNAUTHORIZED || rc == LD_EFORBIDDEN;
    if (!auth)
        el->auth_failing_since_ms = 0;
    else if (!el->auth_failing_since_ms)
        el->auth_failing_since_ms = now_ms;
    if (rc == LD_OK || rc == LD_ENOTFOUND || rc == LD_ECANCELED) {
        if (rc == LD_OK) {
            el->last_logged_err = LD_OK;
            free(el->last_err);
            el->last_err = NULL;
        }
        return;
    }
    if (!el->last_err)
        el->last_err = malloc(sizeof(*el->last_err));
    if (el->last_err) /* out of memory: the view shows no failure */
        *el->last_err = *err;
    enum ld_log_level level = LD_LOG_WARN;
    if (rc == LD_ECONFLICT || rc == LD_EEXISTS || rc == el->last_logged_err)
        level = LD_LOG_DEBUG;
    el->last_logged_err = rc;
    elog(el, level, "%s lease failed: %s (HTTP %ld%s%s): %s", verb_of(el->call_kind),
         ld_strerror(rc), err->http_status, err->reason[0] ? ", " : "", err->reason,
         err->msg);
}

static void finish_request(struct hel *el, enum ld_err rc, struct ld_lease *lease,
                           const struct ld_errinfo *err)
{
    struct ld_now now = now_of(el->host);
    el->call = 0;
    if (ld_log_enabled(LD_LOG_DEBUG))
        elog(el, LD_LOG_DEBUG, "%s lease: %s, HTTP %ld, %lld ms", verb_of(el->call_kind),
             ld_strerror(rc), err->http_status,
             (long long)(now.mono_ms - el->call_started_ms));
    note_outcome(el, rc, err, now.mono_ms);
    ld_election_result(el->e, now, rc, rc == LD_OK ? lease : NULL, err);
    el->due = true;
}

static void on_answer(void *ctx, ld_kube_call call, enum ld_err rc,
                      struct ld_lease *lease, const struct ld_errinfo *err)
{
    struct hel *el = ctx;
    (void)call;
    finish_request(el, rc, lease, err);
}

static void start_request(struct hel *el, const struct ld_action *act, int64_t now_ms)
{
    struct ld_host *h = el->host;
    struct ld_errinfo err;
    enum ld_err rc;

    el->call_kind = act->kind;
    el->call_started_ms = now_ms;
    el->last_request_ms = now_ms;
    if (act->kind == LD_ACT_GET)
        rc = ld_kube_lease_get_start(h->kube, h->namespace_, el->name, act->timeout_ms,
                                     on_answer, el, &el->call, &err);
    else if (act->kind == LD_ACT_CREATE)
        rc = ld_kube_lease_create_start(h->kube, act->lease, act->timeout_ms, on_answer,
                                        el, &el->call, &err);
    else
        rc = ld_kube_lease_update_start(h->kube, act->lease, act->timeout_ms, on_answer,
                                        el, &el->call, &err);
    if (rc != LD_OK)
        finish_request(el, rc, NULL, &err); /* never sent: the engine retries later */
}

/* Asks one engine for its next step and acts on it. */
static void step(struct hel *el, struct ld_now now)
{
    el->due = false;
    struct ld_action act = ld_election_next(el->e, now);
    el->idle = act.kind == LD_ACT_WAIT;
    if (el->idle && el->n_held)
        release_held(el, now); /* it may want to act on them: due again */
    publish(el, now.mono_ms);
    switch (act.kind) {
    case LD_ACT_DONE:
        el->done = true;
        el->host->n_done++;
        drop_held(el);
        break;
    case LD_ACT_WAIT:
        el->wake_at_ms = act.wake_at_ms;
        break;
    default:
        start_request(el, &act, now.mono_ms);
        break;
    }
}

/* A leader whose renewal hangs: its renew deadline passes while the
 * request is in flight. The engine steps down then, not when the request
 * ends, and the publish says so at once. */
static bool deadline_in_flight(struct hel *el, struct ld_now now)
{
    struct ld_election_status st;
    ld_election_status(el->e, &st);
    if (!st.leading || now.mono_ms < st.lead_until_ms)
        return false;
    ld_election_tick(el->e, now);
    publish(el, now.mono_ms);
    return true;
}

/* A shutdown's or a resignation's release waits while the caller holds it
 * (the engine has stepped down already). The caller is told of the
 * step-down first: what it holds for (a command to stop) starts there. */
static bool release_pending(const struct hel *el)
{
    if (!el->ops.holds_release)
        return false;
    struct ld_election_status st;
    ld_election_status(el->e, &st);
    return el->host->stopping || st.resigning;
}

static bool release_held_back(const struct hel *el, int64_t now_ms)
{
    return release_pending(el) && el->ops.holds_release(el->ops.ctx, el->index, now_ms);
}

/* A resignation the engine would begin by itself (a hand-over, a Lease
 * given back) begins here, before its release is asked for, so that the
 * caller can hold that release as any other. A release the caller gave up
 * is never written: the engine ends it now and the election steps on. */
static bool holding_release(struct hel *el, struct ld_now now)
{
    if (el->ops.holds_release && ld_election_resign_due(el->e, now))
        el->due = true;
    if (!release_pending(el)) {
        el->abandon = false; /* nothing left to give up */
        return false;
    }
    publish(el, now.mono_ms);
    bool held = !el->abandon && release_held_back(el, now.mono_ms);
    if (el->abandon) {
        el->abandon = false;
        ld_election_abandon_release(el->e, now);
        return false;
    }
    return held;
}

/* One round over the engines that are due. */
static void pass(struct ld_host *h)
{
    for (size_t i = 0; i < h->n; i++) {
        struct hel *el = h->els[i];
        struct ld_now now = now_of(h);
        if (el->done)
            continue;
        if (el->call) {
            /* A poke (the caller's news, a resignation) cannot wait for
             * the answer: its fd would end every wait meanwhile. The
             * answer makes the election due again. */
            if (!deadline_in_flight(el, now) &&
                (el->due || now.mono_ms >= el->republish_ms)) {
                el->due = false;
                publish(el, now.mono_ms);
            }
            continue;
        }
        if (holding_release(el, now)) {
            el->due = false;
            el->release_held = true;
            continue;
        }
        if (el->release_held) {
            /* The hold just ended (what it waited for came in, on any
             * fd): the release goes now, not at the next wake-up. */
            el->release_held = false;
            el->due = true;
        }
        if (!el->due && now.mono_ms < el->wake_at_ms && now.mono_ms < el->republish_ms)
            continue;
        step(el, now);
    }
}

/* ---- the watch ---- */

enum watch_kind { WATCH_NONE, WATCH_NAME, WATCH_GROUP };

static enum watch_kind watch_kind_of(const struct ld_host *h)
{
    if (h->selector)
        return WATCH_GROUP;
    return h->n == 1 ? WATCH_NAME : WATCH_NONE;
}

static void set_watch_health(struct ld_host *h, bool healthy)
{
    h->w.healthy = healthy;
    for (size_t i = 0; i < h->n; i++)
        ld_election_set_watch(h->els[i]->e, healthy);
}

static void watch_broken(struct ld_host *h, int64_t now_ms)
{
    struct hwatch *w = &h->w;
    if (w->call)
        ld_kube_cancel(h->kube, w->call);
    w->call = 0;
    set_watch_health(h, false);
    bool stable = w->started_ms && now_ms - w->started_ms >= WATCH_STABLE_MS;
    if (stable)
        w->backoff_ms = 0;
    w->next_start_ms = now_ms + w->backoff_ms;
    w->backoff_ms = w->backoff_ms ? w->backoff_ms * 2 : WATCH_BACKOFF_MIN_MS;
    if (w->backoff_ms > WATCH_BACKOFF_MAX_MS)
        w->backoff_ms = WATCH_BACKOFF_MAX_MS;
    /* A group's stream resumed from its last resourceVersion would replay
     * what happened while it was down, older than what the reads meanwhile
     * found (the engines' GETs, the member LIST): a crashed member's old
     * renewals would count it live again for a lease duration, a dead
     * holder's would delay the takeover of its shard as long. Starting
     * from the current state costs one ADDED per Lease of the group. (A
     * stream by name resumes from the engine's own Lease, which the reads
     * keep current.) See on_watch_end for the routine end. */
    if (watch_kind_of(h) == WATCH_GROUP)
        w->relist = true;
}

static struct hel *find_election(const struct ld_host *h, const char *name)
{
    for (size_t i = 0; name && i < h->n; i++) {
        if (strcmp(h->els[i]->name, name) == 0)
            return h->els[i];
    }
    return NULL;
}

static void remember_rv(struct hwatch *w, const char *rv)
{
    if (!rv || !rv[0])
        return;
    char *copy = strdup(rv);
    if (!copy)
        return; /* the next start then relists, which is only slower */
    free(w->rv);
    w->rv = copy;
}

static void deliver(struct ld_host *h, const struct ld_watch_event *ev, struct ld_now now)
{
    struct hel *el = ev->lease ? find_election(h, ev->lease->name) : NULL;
    bool deleted = ev->type == LD_WATCH_DELETED;
    if (!el || el->done)
        return; /* another Lease of the group: not ours to act on */
    if (el->idle) {
        observe_one(el, deleted, ev->lease, now);
        return;
    }
    if (hold(el, deleted, ev->lease))
        return;
    /* Not kept: the next read must not trust the watch to have said it. */
    ld_log(LD_LOG_WARN,
           "lease %s: too many watch events during one request; "
           "restarting the watch",
           el->name);
    drop_held(el);
    ld_election_wake(el->e);
    h->w.relist = true;
    h->w.ended = true;
}

static void on_watch_event(void *ctx, const struct ld_watch_event *ev)
{
    struct ld_host *h = ctx;
    struct hwatch *w = &h->w;
    struct ld_now now = now_of(h);
    w->last_data_ms = now.mono_ms;
    if (h->obs.watch_event)
        h->obs.watch_event(h->obs.ctx);
    if (w->ended)
        return;
    /* Healthy before the event is applied, so the engines schedule by it. */
    if (!w->healthy && ev->type != LD_WATCH_ERROR && ev->type != LD_WATCH_INVALID)
        set_watch_health(h, true);
    switch (ev->type) {
    case LD_WATCH_ADDED:
    case LD_WATCH_MODIFIED:
    case LD_WATCH_DELETED:
        remember_rv(w, ev->resource_version);
        if (h->obs.lease_event)
            h->obs.lease_event(h->obs.ctx, ev, now.mono_ms);
        deliver(h, ev, now);
        break;
    case LD_WATCH_BOOKMARK:
        remember_rv(w, ev->resource_version);
        break;
    case LD_WATCH_ERROR:
        ld_log(LD_LOG_INFO, "watch ended by the server: %s", ev->error.msg);
        w->relist = ev->error.code == LD_EGONE;
        w->ended = true;
        break;
    case LD_WATCH_INVALID:
        /* A corrupted object is not a reason to lose the stream; the GET
         * path reports it too and never acts on it. */
        if (w->invalid_logged++ % 100 == 0)
            ld_log(LD_LOG_WARN, "ignoring a malformed watch event: %s", ev->error.msg);
        break;
    }
}

static void on_watch_data(void *ctx, ld_kube_call call, const char *data, size_t len)
{
    struct ld_host *h = ctx;
    (void)call;
    if (ld_watch_feed(&h->w.decoder, data, len, on_watch_event, h) != LD_OK)
        ld_log(LD_LOG_WARN, "out of memory decoding the watch stream");
}

/* A stream that ended: routine endings reconnect at once, others back off. */
static void on_watch_end(void *ctx, ld_kube_call call, enum ld_err rc,
                         const struct ld_errinfo *err)
{
    struct ld_host *h = ctx;
    int64_t now_ms = mono(h);
    (void)call;
    h->w.call = 0;
    if (h->w.ended)
        return; /* an ERROR event said why first: watch_upkeep acts on it, once */
    bool relist = h->w.relist || rc == LD_EGONE;
    ld_log(rc == LD_EEOF ? LD_LOG_DEBUG : LD_LOG_INFO, "watch ended: %s", err->msg);
    watch_broken(h, now_ms);
    /* The server's routine end of a stream that was up until now: the
     * next one, started at once, has missed nothing. */
    if (rc == LD_EEOF)
        h->w.relist = relist;
    if (rc == LD_EEOF || rc == LD_EGONE)
        h->w.next_start_ms = now_ms;
}

/* Where a new stream starts: by name, from the Lease the engine has; for a
 * group, from the last resourceVersion the stream gave when the last one
 * ended routinely, else from the current state (ADDED for each Lease). */
static const char *start_rv(struct ld_host *h)
{
    if (h->w.relist)
        return NULL;
    if (watch_kind_of(h) == WATCH_GROUP)
        return h->w.rv;
    struct ld_election_status st;
    ld_election_status(h->els[0]->e, &st);
    return st.resource_version;
}

/* Every engine has read its Lease once: the watch then only adds news. */
static bool all_observed(const struct ld_host *h)
{
    for (size_t i = 0; i < h->n; i++) {
        struct ld_election_status st;
        ld_election_status(h->els[i]->e, &st);
        if (!st.observed)
            return false;
    }
    return h->n > 0;
}

static void maybe_start_watch(struct ld_host *h, int64_t now_ms)
{
    struct hwatch *w = &h->w;
    enum watch_kind kind = watch_kind_of(h);
    if (kind == WATCH_NONE || h->stopping || w->call || now_ms < w->next_start_ms ||
        !all_observed(h))
        return;
    struct ld_kube_watch_spec spec = {
        .namespace_ = h->namespace_,
        .name = kind == WATCH_NAME ? h->els[0]->name : NULL,
        .label_selector = h->selector,
        .resource_version = start_rv(h),
        .timeout_s = WATCH_TIMEOUT_MIN_S +
                     (int)(h->clock.wall_us(h->clock.ctx) % WATCH_TIMEOUT_SPAN_S),
    };
    struct ld_errinfo err;
    const char *rv = spec.resource_version;
    ld_watch_decoder_reset(&w->decoder);
    w->ended = false;
    if (ld_kube_lease_watch_open(h->kube, &spec, on_watch_data, on_watch_end, h, &w->call,
                                 &err) != LD_OK) {
        ld_log(LD_LOG_WARN, "cannot start the watch: %s", err.msg);
        watch_broken(h, now_ms);
        return;
    }
    ld_log(LD_LOG_DEBUG, "watch started from resourceVersion %s",
           rv && rv[0] ? rv : "(current)");
    w->relist = false;
    w->started_ms = now_ms;
    w->last_data_ms = now_ms;
    if (h->obs.watch_started)
        h->obs.watch_started(h->obs.ctx, !rv || !rv[0]);
}

/* A watch that says nothing for too long may be wedged behind a proxy;
 * bookmarks and the leaders' renewals normally keep it busy. A read that
 * found a change the watch never delivered means the same. */
static void check_watch_stall(struct ld_host *h, int64_t now_ms)
{
    struct hwatch *w = &h->w;
    int64_t limit = 2 * h->lease_duration_ms + 60000;
    bool missed = false;
    for (size_t i = 0; i < h->n; i++) {
        struct ld_election_status st;
        ld_election_status(h->els[i]->e, &st);
        if (st.watch_missed != h->els[i]->watch_missed_seen) {
            h->els[i]->watch_missed_seen = st.watch_missed;
            missed = true;
        }
    }
    if (missed && w->call) {
        ld_log(LD_LOG_INFO, "the watch missed a change of a Lease; restarting it");
    } else if (w->healthy && now_ms - w->last_data_ms > limit) {
        ld_log(LD_LOG_INFO, "watch silent for %lld s; restarting it",
               (long long)((now_ms - w->last_data_ms) / 1000));
    } else {
        return;
    }
    watch_broken(h, now_ms);
    w->next_start_ms = now_ms;
}

static void watch_upkeep(struct ld_host *h, int64_t now_ms)
{
    if (h->w.ended) {
        h->w.ended = false;
        bool relist = h->w.relist;
        watch_broken(h, now_ms);
        if (relist)
            h->w.next_start_ms = now_ms; /* a 410 is routine: re-read now */
    }
    check_watch_stall(h, now_ms);
    maybe_start_watch(h, now_ms);
}

/* ---- credentials probe and waiting ---- */

/* While the API rejects our credentials, a standby with a watch would make
 * no request and so never learn that a new token works: ask now and then. */
static int64_t probe_at(const struct ld_host *h, const struct hel *el)
{
    return el->last_request_ms + h->renew_deadline_ms / 2 + 1;
}

static void probe_while_unauthorized(struct ld_host *h, int64_t now_ms)
{
    for (size_t i = 0; i < h->n && !h->stopping; i++) {
        struct hel *el = h->els[i];
        if (!el->auth_failing_since_ms || el->call || el->done ||
            now_ms < probe_at(h, el))
            continue;
        el->last_request_ms = now_ms; /* at most one probe per interval */
        ld_election_wake(el->e);
        el->due = true;
    }
}

static bool any_due(const struct ld_host *h)
{
    for (size_t i = 0; i < h->n; i++) {
        if (h->els[i]->due && !h->els[i]->call && !h->els[i]->done)
            return true;
    }
    return false;
}

/* The earliest time a pass has something to do without news. */
static int64_t next_wake(const struct ld_host *h, int64_t now_ms)
{
    int64_t at = now_ms + MAX_SLEEP_MS;
    for (size_t i = 0; i < h->n; i++) {
        const struct hel *el = h->els[i];
        if (el->done)
            continue;
        if (el->republish_ms < at)
            at = el->republish_ms;
        if (el->call) {
            struct ld_election_status st;
            ld_election_status(el->e, &st);
            if (st.leading && st.lead_until_ms < at)
                at = st.lead_until_ms;
            continue;
        }
        if (el->abandon)
            at = now_ms; /* given up: the next pass ends it */
        else if (el->wake_at_ms < at && !release_held_back(el, now_ms))
            at = el->wake_at_ms;
        if (el->auth_failing_since_ms && !h->stopping && probe_at(h, el) < at)
            at = probe_at(h, el);
    }
    /* Only a watch that could start now counts: before every engine has
     * read its Lease, the first answers wake the host anyway. */
    if (watch_kind_of(h) != WATCH_NONE && !h->w.call && !h->stopping &&
        h->w.next_start_ms < at && all_observed(h))
        at = h->w.next_start_ms;
    return at > now_ms ? at : now_ms;
}

static void shutdown_now(struct ld_host *h);

static enum ld_err run_passes(struct ld_host *h, int64_t max_wait_ms, int wake_fd)
{
    int64_t deadline = mono(h) + (max_wait_ms > 0 ? max_wait_ms : 0);
    for (;;) {
        if (h->shutdown_pending)
            shutdown_now(h);
        pass(h);
        if (ld_host_done(h))
            return LD_OK;
        int64_t now_ms = mono(h);
        watch_upkeep(h, now_ms);
        probe_while_unauthorized(h, now_ms);
        int64_t asked =
            h->obs.after_pass ? h->obs.after_pass(h->obs.ctx, now_ms) : INT64_MAX;
        if (any_due(h) || h->shutdown_pending)
            continue;
        int64_t until = next_wake(h, now_ms);
        if (asked < until)
            until = asked > now_ms ? asked : now_ms;
        if (until > deadline)
            until = deadline;
        enum ld_err rc =
            ld_transport_run(ld_kube_transport(h->kube), until - now_ms, wake_fd);
        if (rc == LD_ECANCELED)
            return LD_ECANCELED;
        if (mono(h) >= deadline && !any_due(h) && !h->shutdown_pending)
            return LD_OK;
    }
}

enum ld_err ld_host_run(struct ld_host *h, int64_t max_wait_ms, int wake_fd)
{
    h->in_run = true;
    enum ld_err rc = run_passes(h, max_wait_ms, wake_fd);
    h->in_run = false;
    return rc;
}

/* ---- lifecycle ---- */

struct ld_host *ld_host_new(const struct ld_host_config *cfg, struct ld_errinfo *err)
{
    struct ld_host *h = NULL;

    ld_errinfo_clear(err);
    if (!cfg || !cfg->kube) {
        ld_errinfo_set(err, LD_EINVAL, "no Kubernetes client");
        return NULL;
    }
    if (!ld_dns1123_label(cfg->namespace_)) {
        ld_errinfo_set(err, LD_EINVAL, "namespace %.64s is not a DNS-1123 label",
                       cfg->namespace_ ? cfg->namespace_ : "(null)");
        return NULL;
    }
    if (!(h = calloc(1, sizeof(*h))))
        goto nomem;
    h->kube = cfg->kube;
    h->lease_duration_ms = cfg->lease_duration_ms;
    h->renew_deadline_ms = cfg->renew_deadline_ms;
    h->log_names = cfg->log_names;
    h->clock = ld_clock_or_real(cfg->clock);
    if (cfg->observer)
        h->obs = *cfg->observer;
    ld_watch_decoder_init(&h->w.decoder);
    if (!(h->namespace_ = strdup(cfg->namespace_)))
        goto nomem;
    if (cfg->label_selector && cfg->label_selector[0] &&
        !(h->selector = strdup(cfg->label_selector)))
        goto nomem;
    return h;
nomem:
    ld_host_free(h);
    ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    return NULL;
}

void ld_host_free(struct ld_host *h)
{
    if (!h)
        return;
    if (h->w.call)
        ld_kube_cancel(h->kube, h->w.call);
    for (size_t i = 0; i < h->n; i++) {
        struct hel *el = h->els[i];
        if (el->call)
            ld_kube_cancel(h->kube, el->call);
        ld_election_free(el->e);
        drop_held(el);
        free(el->held);
        free(el->last_err);
        free(el->name);
        free(el);
    }
    free(h->els);
    ld_watch_decoder_clear(&h->w.decoder);
    free(h->w.rv);
    free(h->namespace_);
    free(h->selector);
    free(h);
}

enum ld_err ld_host_add(struct ld_host *h, const struct ld_election_config *cfg,
                        const struct ld_host_election_ops *ops, size_t *index,
                        struct ld_errinfo *err)
{
    struct hel *el = NULL;
    enum ld_err rc = LD_OK;

    ld_errinfo_clear(err);
    if (!h || !cfg || !index || h->stopping)
        return ld_errinfo_set(err, LD_EINVAL, "cannot add an election now");
    if (!cfg->namespace_ || strcmp(cfg->namespace_, h->namespace_) != 0)
        return ld_errinfo_set(err, LD_EINVAL,
                              "the election's namespace is not the host's");
    if (find_election(h, cfg->name))
        return ld_errinfo_set(err, LD_EINVAL, "lease %.64s is already in the host",
                              cfg->name);
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 4;
        struct hel **els = realloc(h->els, cap * sizeof(struct hel *));
        if (!els)
            return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        h->els = els;
        h->cap = cap;
    }
    if (!(el = calloc(1, sizeof(*el))) || !(el->name = strdup(cfg->name))) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    if (!(el->e = ld_election_new(cfg, err))) {
        rc = err->code;
        goto out;
    }
    el->host = h;
    el->index = h->n;
    el->due = true;
    el->republish_ms = INT64_MAX;
    el->last_logged_err = LD_OK;
    if (ops)
        el->ops = *ops;
    ld_election_set_watch(el->e, h->w.healthy);
    h->els[h->n++] = el;
    *index = el->index;
    el = NULL;
out:
    if (el) {
        free(el->name);
        free(el);
    }
    return rc;
}

size_t ld_host_count(const struct ld_host *h)
{
    return h ? h->n : 0;
}

struct ld_election *ld_host_election(struct ld_host *h, size_t index)
{
    return h && index < h->n ? h->els[index]->e : NULL;
}

static void shutdown_now(struct ld_host *h)
{
    h->shutdown_pending = false;
    h->stopping = true;
    ld_log(LD_LOG_INFO, "shutdown requested");
    if (h->w.call)
        ld_kube_cancel(h->kube, h->w.call);
    h->w.call = 0;
    for (size_t i = 0; i < h->n; i++) {
        struct hel *el = h->els[i];
        if (el->done)
            continue;
        if (el->call) {
            struct ld_errinfo err;
            ld_errinfo_clear(&err); /* no HTTP status, no Retry-After */
            ld_kube_cancel(h->kube, el->call);
            ld_errinfo_set(&err, LD_ECANCELED, "%s lease: canceled by the shutdown",
                           verb_of(el->call_kind));
            finish_request(el, LD_ECANCELED, NULL, &err);
        }
        ld_election_shutdown(el->e, now_of(h));
        el->due = true;
    }
}

void ld_host_shutdown(struct ld_host *h)
{
    if (!h || h->stopping)
        return;
    if (h->in_run)
        h->shutdown_pending = true; /* perhaps inside a callback: at the next pass */
    else
        shutdown_now(h);
}

bool ld_host_done(const struct ld_host *h)
{
    return h && h->stopping && h->n_done == h->n;
}

void ld_host_abandon_release(struct ld_host *h, size_t index)
{
    if (!h || index >= h->n || h->els[index]->done)
        return;
    h->els[index]->abandon = true;
    h->els[index]->due = true;
}

void ld_host_poke(struct ld_host *h, size_t index)
{
    if (h && index < h->n)
        h->els[index]->due = true;
}

void ld_host_wake(struct ld_host *h, size_t index)
{
    if (!h || index >= h->n)
        return;
    ld_election_wake(h->els[index]->e);
    h->els[index]->due = true;
}
