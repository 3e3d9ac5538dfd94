/*
 * loop: one Lease on the election host, published for the HTTP server.
 *
 * The host waits on the API (answers and the watch) and on wake_fd at
 * once, so a released Lease wakes a standby within milliseconds and
 * SIGTERM is acted on at once.
 */
#include "loop.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "clock.h"
#include "lead.h"
#include "log.h"
#include "memtrim.h"

/* The longest the loop leaves the host without looking at its own state. */
#define RUN_SLICE_MS 60000

/* ---- POST /resign ------------------------------------------------------- */

/* Takes the requests asked since the last look and, if this replica leads,
 * starts the resignation (the engine's next action is then its release). A
 * request while one is under way waits for it, then finds a standby (409). */
static void resign_take(struct ld_loop *loop)
{
    uint64_t first, last;
    ld_state_resign_drain(loop->state);
    if (loop->resign_busy || !ld_state_resign_take(loop->state, &first, &last))
        return;
    struct ld_now now = {.mono_ms = ld_mono_ms(), .wall_us = ld_wall_us()};
    if (loop->stopping || !ld_election_resign(ld_host_election(loop->host, 0), now,
                                              loop->resign_cooldown_ms)) {
        ld_state_resign_answer(loop->state, first, last, LD_RESIGN_NOT_LEADER);
        return;
    }
    ld_log(LD_LOG_INFO, "resigning on request (POST /resign); not contending for %lld ms",
           (long long)loop->resign_cooldown_ms);
    loop->resign_busy = true;
    loop->resign_first = first;
    loop->resign_last = last;
    loop->resign_result = LD_RESIGN_PENDING;
}

/* After a publish, so that a request answered "released" finds is_leader
 * false in the snapshot: answers the resignation once the engine said how
 * it went (or, with final, because the loop ends), and at once any request
 * that came in meanwhile while this replica does not lead. */
static void resign_answer(struct ld_loop *loop, const struct ld_election_status *st,
                          int64_t now_ms, bool final)
{
    uint64_t first, last;
    if (loop->resign_busy && (loop->resign_result != LD_RESIGN_PENDING || final)) {
        enum ld_resign_outcome oc = loop->resign_result != LD_RESIGN_PENDING
                                        ? loop->resign_result
                                        : LD_RESIGN_FAILED;
        ld_state_resign_answer(loop->state, loop->resign_first, loop->resign_last, oc);
        loop->resign_busy = false;
    }
    bool leading = st && ld_leads_at(st->leading, st->lead_until_ms, now_ms);
    if (!loop->resign_busy && !leading &&
        ld_state_resign_take(loop->state, &first, &last))
        ld_state_resign_answer(loop->state, first, last, LD_RESIGN_NOT_LEADER);
}

void ld_loop_health(const struct ld_host_view *v, int64_t renew_deadline_ms,
                    int64_t now_ms, char *out, size_t len)
{
    out[0] = '\0';
    int64_t failing = v->auth_failing_since_ms ? now_ms - v->auth_failing_since_ms : 0;
    if (failing > renew_deadline_ms)
        snprintf(out, len,
                 "the API server has rejected our credentials for %lld s (HTTP %ld %s)",
                 (long long)(failing / 1000), v->last_err->http_status,
                 v->last_err->reason[0] ? v->last_err->reason : "");
    else if (v->status.quarantined)
        snprintf(out, len, "another process uses this replica's identity");
}

/* The host steps every engine down at once; hooks may hold the release
 * write back for a bounded time. Safe from inside a host callback. */
static void begin_shutdown(struct ld_loop *loop, int64_t now_ms)
{
    if (loop->stopping)
        return;
    int64_t hold = loop->renew_deadline_ms / 2;
    if (hold > LD_LOOP_RELEASE_HOLD_MAX_MS)
        hold = LD_LOOP_RELEASE_HOLD_MAX_MS;
    loop->stopping = true;
    loop->hold_until_ms = now_ms + hold;
    ld_host_shutdown(loop->host);
}

static void on_publish(void *ctx, const struct ld_host_view *v, int64_t now_ms)
{
    struct ld_loop *loop = ctx;
    const struct ld_election_status *st = &v->status;
    struct ld_snapshot snap;
    ld_state_read(loop->state, &snap);
    snprintf(snap.leader, sizeof(snap.leader), "%s", st->leader);
    snap.term = st->term;
    snap.observed = st->observed;
    snap.leading = st->leading;
    snap.lead_until_ms = st->lead_until_ms;
    snap.has_renewed_at = st->has_renew_time;
    snap.renewed_at_us = st->renew_time_us;
    snap.last_renew_wall_us = st->last_renew_wall_us;
    snap.heartbeat_ms = now_ms;
    snap.transitions_seen = v->transitions_seen;
    ld_loop_health(v, loop->renew_deadline_ms, now_ms, snap.health_error,
                   sizeof(snap.health_error));
    ld_state_publish(loop->state, &snap);
    resign_answer(loop, st, now_ms, false);
    ld_memtrim_idle(); /* a pass is over: a large Lease or HTTP burst may have passed */
    bool stop = false;
    for (size_t i = 0; i < loop->n_hooks; i++) {
        const struct ld_loop_hook *h = &loop->hooks[i];
        stop |= h->on_publish(h->ctx, st, now_ms);
    }
    if (stop)
        begin_shutdown(loop, now_ms); /* before the host's next pass */
}

static int64_t next_publish(void *ctx, size_t index, int64_t now_ms)
{
    const struct ld_loop *loop = ctx;
    int64_t at = INT64_MAX;
    (void)index;
    for (size_t i = 0; i < loop->n_hooks; i++) {
        const struct ld_loop_hook *h = &loop->hooks[i];
        int64_t w = h->next_wake_ms ? h->next_wake_ms(h->ctx, now_ms) : INT64_MAX;
        if (w < at)
            at = w;
    }
    int64_t until = loop->stopping ? loop->hold_until_ms : loop->resign_hold_until_ms;
    if (now_ms < until && until < at)
        at = until; /* the end of a hold is a publish too */
    return at;
}

/* True while a shutdown's release should wait for a hook (bounded by
 * hold_until_ms, set when the shutdown began). */
static bool holds_release(void *ctx, size_t index, int64_t now_ms)
{
    const struct ld_loop *loop = ctx;
    (void)index;
    int64_t until = loop->stopping ? loop->hold_until_ms : loop->resign_hold_until_ms;
    if (now_ms >= until)
        return false;
    for (size_t i = 0; i < loop->n_hooks; i++) {
        const struct ld_loop_hook *h = &loop->hooks[i];
        if (h->holds_release && (loop->stopping || h->holds_resignation) &&
            h->holds_release(h->ctx, now_ms))
            return true;
    }
    return false;
}

static void on_event(void *ctx, size_t index, const struct ld_event *ev)
{
    struct ld_loop *loop = ctx;
    bool resigned =
        ev->reason == LD_STOP_RESIGNED || ev->reason == LD_STOP_PREFERRED_HOLDER;
    (void)index;
    switch (ev->kind) {
    case LD_EV_STARTED_LEADING:
        if (ev->acquire_delay_ms >= 0 && loop->metrics)
            ld_metrics_acquire_delay(loop->metrics,
                                     (double)ev->acquire_delay_ms / 1000.0);
        break;
    case LD_EV_STOPPED_LEADING:
        if (resigned && loop->metrics)
            ld_metrics_resigned(loop->metrics, ev->reason == LD_STOP_RESIGNED);
        /* The engine gives the release up renew-deadline after it began
         * (the Lease then expires by itself): no hold needs to be longer. */
        if (resigned)
            loop->resign_hold_until_ms = ld_mono_ms() + loop->renew_deadline_ms;
        break;
    case LD_EV_RELEASED: /* a shutdown's release during a resignation serves it too */
        if (loop->resign_busy)
            loop->resign_result = LD_RESIGN_RELEASED;
        break;
    case LD_EV_RELEASE_FAILED:
        if (loop->resign_busy)
            loop->resign_result = LD_RESIGN_FAILED;
        break;
    default:
        break;
    }
}

static void on_watch_started(void *ctx)
{
    ld_metrics_watch_started(ctx);
}

static void on_watch_event(void *ctx)
{
    ld_metrics_watch_event(ctx);
}

enum ld_err ld_loop_start(struct ld_loop *loop, const struct ld_election_config *ec,
                          struct ld_errinfo *err)
{
    struct ld_host_observer obs = {
        .ctx = loop->metrics,
        .watch_started = loop->metrics ? on_watch_started : NULL,
        .watch_event = loop->metrics ? on_watch_event : NULL,
    };
    struct ld_host_config hc = {
        .kube = loop->kube,
        .namespace_ = ec->namespace_,
        .lease_duration_ms = loop->lease_duration_ms,
        .renew_deadline_ms = loop->renew_deadline_ms,
        .log_names = false, /* the log sink names the one Lease */
        .observer = &obs,
    };
    struct ld_host_election_ops ops = {
        .ctx = loop,
        .on_publish = on_publish,
        .on_event = on_event,
        .next_publish_ms = next_publish,
        .holds_release = holds_release,
    };
    size_t index;
    loop->stopping = false;
    loop->hold_until_ms = 0;
    loop->resign_hold_until_ms = 0;
    loop->resign_busy = false;
    loop->host = ld_host_new(&hc, err);
    if (!loop->host)
        return err->code;
    enum ld_err rc = ld_host_add(loop->host, ec, &ops, &index, err);
    if (rc != LD_OK)
        ld_loop_clear(loop);
    return rc;
}

void ld_loop_clear(struct ld_loop *loop)
{
    ld_host_free(loop->host);
    loop->host = NULL;
}

/* Consumes pending signals; returns the last one that asks us to stop, or 0. */
static int take_signal(int fd)
{
    struct signalfd_siginfo si;
    int stop = 0;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
            stop = (int)si.ssi_signo;
    }
    return stop;
}

/* A stop signal ends the loop, unless a hook takes it over (the exec child
 * shuts down first and ends the loop when it has). */
static void on_stop_signal(struct ld_loop *loop, int signo)
{
    if (signo == 0 || loop->stopping)
        return;
    bool taken = false;
    for (size_t i = 0; i < loop->n_hooks; i++) {
        const struct ld_loop_hook *h = &loop->hooks[i];
        if (h->on_signal && h->on_signal(h->ctx, signo))
            taken = true;
    }
    if (!taken)
        begin_shutdown(loop, ld_mono_ms());
}

void ld_loop_run(struct ld_loop *loop)
{
    while (!ld_host_done(loop->host)) {
        /* Once stopping, the release is bounded by the engine and nothing
         * the fd says could change it. */
        int fd = loop->stopping ? -1 : loop->wake_fd;
        enum ld_err rc = ld_host_run(loop->host, RUN_SLICE_MS, fd);
        ld_memtrim_idle(); /* also when no publish came for a while */
        if (rc != LD_ECANCELED)
            continue;
        on_stop_signal(loop, take_signal(loop->signal_fd));
        resign_take(loop);
        ld_host_poke(loop->host, 0); /* its publish takes the hooks' news */
    }
    resign_answer(loop, NULL, ld_mono_ms(), true);
}
