/*
 * loop: drives one election against the API server and publishes it.
 *
 * Between requests the loop waits on the watch stream (when one runs) and
 * on the signal fd at once, so a released Lease wakes a standby within
 * milliseconds and SIGTERM is acted on at once.
 */
#include "loop.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "log.h"
#include "memtrim.h"
#include "watch.h"

#define WATCH_BACKOFF_MIN_MS 250
#define WATCH_BACKOFF_MAX_MS 30000
/* Streams are re-opened at a random point in this range, so replicas do
 * not all reconnect at once. */
#define WATCH_TIMEOUT_MIN_S 240
#define WATCH_TIMEOUT_SPAN_S 60
/* A stream that lasted this long was healthy: reconnect without backoff. */
#define WATCH_STABLE_MS 60000

/* Per-run bookkeeping that is not the engine's business. */
struct pass_state {
    struct ld_loop *loop;
    bool first_leader_seen;
    int64_t transitions_seen;
    enum ld_err last_logged_err; /* repeated failures are logged once */
    struct ld_errinfo last_err;  /* the latest API failure, for step-down lines */
    bool stopping;
    bool hook_stop; /* the hook asked for a shutdown, begun at the next pass */
    int64_t auth_failing_since_ms; /* first of an unbroken run of 401/403, or 0 */
    int64_t last_request_ms;

    struct ld_watch_decoder decoder;
    bool watch_healthy;
    int64_t watch_started_ms;
    int64_t watch_next_start_ms;
    int64_t watch_backoff_ms;
    int64_t watch_last_data_ms;
    bool watch_relist;          /* a 410: restart without a resourceVersion */
    bool watch_ended;           /* an ERROR event: stop once out of curl's callback */
    uint64_t watch_missed_seen; /* the engine's count of changes the watch missed */
    unsigned watch_invalid_logged;
};

static struct ld_now read_clocks(void)
{
    struct ld_now now = {.mono_ms = ld_mono_ms(), .wall_us = ld_wall_us()};
    return now;
}

static void log_event(struct pass_state *ps, const struct ld_event *ev)
{
    const struct ld_loop *loop = ps->loop;
    switch (ev->kind) {
    case LD_EV_STARTED_LEADING:
        ld_log(LD_LOG_INFO, "leadership acquired: %s/%s now held by \"%s\" (term %d)",
               loop->namespace_, loop->name, ev->leader, (int)ev->term);
        if (ev->acquire_delay_ms >= 0 && loop->metrics)
            ld_metrics_acquire_delay(loop->metrics,
                                     (double)ev->acquire_delay_ms / 1000.0);
        break;
    case LD_EV_STOPPED_LEADING:
        if (ev->reason == LD_STOP_RENEW_DEADLINE && ps->last_err.code != LD_OK)
            ld_log(LD_LOG_WARN, "leadership lost: %s (term %d); last API error: %s",
                   ld_stop_reason_str(ev->reason), (int)ev->term, ps->last_err.msg);
        else
            ld_log(LD_LOG_WARN, "leadership lost: %s (term %d)",
                   ld_stop_reason_str(ev->reason), (int)ev->term);
        break;
    case LD_EV_NEW_LEADER:
        if (ps->first_leader_seen)
            ps->transitions_seen++;
        ps->first_leader_seen = true;
        if (ev->leader[0])
            ld_log(LD_LOG_INFO, "leader observed: \"%s\" (term %d)", ev->leader,
                   (int)ev->term);
        else
            ld_log(LD_LOG_INFO, "leader observed: none, the lease is free (term %d)",
                   (int)ev->term);
        break;
    case LD_EV_RELEASED:
        ld_log(LD_LOG_INFO, "lease released (term %d)", (int)ev->term);
        break;
    case LD_EV_IDENTITY_CONFLICT:
        ld_log(
            LD_LOG_ERROR,
            "identity conflict: another process holds %s/%s under our identity \"%s\"; "
            "identities must be unique (use the pod name); standing back",
            loop->namespace_, loop->name, ev->leader);
        break;
    }
}

/* What /healthz should say about the API, or "" when all is well. */
static void health_of(const struct pass_state *ps, const struct ld_election_status *st,
                      int64_t now_ms, char *out, size_t len)
{
    out[0] = '\0';
    int64_t failing = ps->auth_failing_since_ms ? now_ms - ps->auth_failing_since_ms : 0;
    if (failing > ps->loop->renew_deadline_ms)
        snprintf(out, len,
                 "the API server has rejected our credentials for %lld s (HTTP %ld %s)",
                 (long long)(failing / 1000), ps->last_err.http_status,
                 ps->last_err.reason[0] ? ps->last_err.reason : "");
    else if (st->quarantined)
        snprintf(out, len, "another process uses this replica's identity");
}

static void publish(struct pass_state *ps, int64_t now_ms)
{
    struct ld_loop *loop = ps->loop;
    struct ld_event ev;
    while (ld_election_take_event(loop->election, &ev))
        log_event(ps, &ev);

    struct ld_election_status st;
    ld_election_status(loop->election, &st);
    struct ld_snapshot snap;
    ld_state_read(loop->state, &snap);
    snprintf(snap.leader, sizeof(snap.leader), "%s", st.leader);
    snap.term = st.term;
    snap.observed = st.observed;
    snap.leading = st.leading;
    snap.lead_until_ms = st.lead_until_ms;
    snap.has_renewed_at = st.has_renew_time;
    snap.renewed_at_us = st.renew_time_us;
    snap.last_renew_wall_us = st.last_renew_wall_us;
    snap.heartbeat_ms = now_ms;
    snap.transitions_seen = ps->transitions_seen;
    health_of(ps, &st, now_ms, snap.health_error, sizeof(snap.health_error));
    ld_state_publish(loop->state, &snap);
    if (loop->hook && loop->hook->on_publish(loop->hook->ctx, &st, now_ms) &&
        !ps->stopping)
        ps->hook_stop = true;
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

static void begin_shutdown(struct pass_state *ps)
{
    if (ps->stopping)
        return;
    ps->stopping = true;
    ld_log(LD_LOG_INFO, "shutdown requested");
    ld_election_shutdown(ps->loop->election, read_clocks());
}

/* A stop signal ends the loop, unless the hook takes it over (the exec child
 * shuts down first and ends the loop when it has). */
static void on_stop_signal(struct pass_state *ps, int signo)
{
    const struct ld_loop_hook *hook = ps->loop->hook;
    if (signo == 0)
        return;
    if (!ps->stopping && hook && hook->on_signal(hook->ctx, signo))
        return;
    begin_shutdown(ps);
}

/* ---- the watch ---------------------------------------------------------- */

static void watch_broken(struct pass_state *ps, int64_t now_ms)
{
    ld_kube_watch_stop(ps->loop->kube);
    ld_election_set_watch(ps->loop->election, false);
    ps->watch_healthy = false;
    bool stable =
        ps->watch_started_ms && now_ms - ps->watch_started_ms >= WATCH_STABLE_MS;
    if (stable)
        ps->watch_backoff_ms = 0;
    ps->watch_next_start_ms = now_ms + ps->watch_backoff_ms;
    ps->watch_backoff_ms =
        ps->watch_backoff_ms ? ps->watch_backoff_ms * 2 : WATCH_BACKOFF_MIN_MS;
    if (ps->watch_backoff_ms > WATCH_BACKOFF_MAX_MS)
        ps->watch_backoff_ms = WATCH_BACKOFF_MAX_MS;
}

static void on_watch_event(void *ctx, const struct ld_watch_event *ev)
{
    struct pass_state *ps = ctx;
    struct ld_loop *loop = ps->loop;
    struct ld_now now = read_clocks();
    ps->watch_last_data_ms = now.mono_ms;
    if (loop->metrics)
        ld_metrics_watch_event(loop->metrics);
    /* Healthy before the event is applied, so the engine schedules by it. */
    if (!ps->watch_healthy && ev->type != LD_WATCH_ERROR &&
        ev->type != LD_WATCH_INVALID && ld_kube_watch_running(loop->kube)) {
        ps->watch_healthy = true;
        ld_election_set_watch(loop->election, true);
    }
    switch (ev->type) {
    case LD_WATCH_ADDED:
    case LD_WATCH_MODIFIED:
        ld_election_observe(loop->election, now, ev->lease);
        break;
    case LD_WATCH_DELETED:
        ld_election_observe_deleted(loop->election, now, ev->lease);
        break;
    case LD_WATCH_BOOKMARK:
        break;
    case LD_WATCH_ERROR:
        ld_log(LD_LOG_INFO, "watch ended by the server: %s", ev->error.msg);
        ps->watch_relist = ev->error.code == LD_EGONE;
        ps->watch_ended = true;
        return;
    case LD_WATCH_INVALID:
        /* A corrupted object is not a reason to lose the stream; the GET
         * path reports it too and never acts on it. */
        if (ps->watch_invalid_logged++ % 100 == 0)
            ld_log(LD_LOG_WARN, "ignoring a malformed watch event: %s", ev->error.msg);
        return;
    }
}

static void on_watch_data(void *ctx, const char *data, size_t len)
{
    struct pass_state *ps = ctx;
    if (ld_watch_feed(&ps->decoder, data, len, on_watch_event, ps) != LD_OK)
        ld_log(LD_LOG_WARN, "out of memory decoding the watch stream");
}

static void maybe_start_watch(struct pass_state *ps, int64_t now_ms)
{
    struct ld_loop *loop = ps->loop;
    if (ps->stopping || ld_kube_watch_running(loop->kube) ||
        now_ms < ps->watch_next_start_ms)
        return;
    struct ld_election_status st;
    ld_election_status(loop->election, &st);
    if (!st.observed)
        return; /* the first GET tells where to start from */
    const char *rv = ps->watch_relist ? NULL : st.resource_version;
    int timeout_s = WATCH_TIMEOUT_MIN_S + (int)(ld_wall_us() % WATCH_TIMEOUT_SPAN_S);
    struct ld_errinfo err;
    ld_watch_decoder_reset(&ps->decoder);
    if (ld_kube_watch_start(loop->kube, loop->namespace_, loop->name, rv, timeout_s,
                            &err) != LD_OK) {
        ld_log(LD_LOG_WARN, "cannot start the watch: %s", err.msg);
        watch_broken(ps, now_ms);
        return;
    }
    ps->watch_relist = false;
    ps->watch_started_ms = now_ms;
    ps->watch_last_data_ms = now_ms;
    if (loop->metrics)
        ld_metrics_watch_started(loop->metrics);
    ld_log(LD_LOG_DEBUG, "watch started from resourceVersion %s", rv ? rv : "(current)");
}

/* A watch that says nothing for too long may be wedged behind a proxy;
 * bookmarks and the leader's renewals normally keep it busy. */
static void check_watch_silence(struct pass_state *ps, int64_t now_ms)
{
    int64_t limit = 2 * ps->loop->lease_duration_ms + 60000;
    if (ps->watch_healthy && now_ms - ps->watch_last_data_ms > limit) {
        ld_log(LD_LOG_INFO, "watch silent for %lld s; restarting it",
               (long long)((now_ms - ps->watch_last_data_ms) / 1000));
        watch_broken(ps, now_ms);
        ps->watch_next_start_ms = now_ms;
    }
}

/* A read found a change the watch never delivered: the stream is stalled
 * (a proxy holding it open, say). Replace it. */
static void check_watch_missed(struct pass_state *ps, int64_t now_ms)
{
    struct ld_election_status st;
    ld_election_status(ps->loop->election, &st);
    if (st.watch_missed == ps->watch_missed_seen)
        return;
    ps->watch_missed_seen = st.watch_missed;
    ld_log(LD_LOG_INFO, "the watch missed a change of the Lease; restarting it");
    watch_broken(ps, now_ms);
    ps->watch_next_start_ms = now_ms;
}

/* While the API rejects our credentials, a standby with a watch would make
 * no request and so never learn that a new token works: ask now and then. */
static bool probe_while_unauthorized(struct pass_state *ps, int64_t now_ms)
{
    if (!ps->auth_failing_since_ms || ps->stopping ||
        now_ms - ps->last_request_ms <= ps->loop->renew_deadline_ms / 2)
        return false;
    ps->last_request_ms = now_ms; /* at most one probe per interval */
    ld_election_wake(ps->loop->election);
    return true;
}

/* ---- waiting and requests ----------------------------------------------- */

/* Keeps the watch going: replaces one that missed a change or went silent,
 * and starts one when none runs and its back-off has passed. */
static void watch_upkeep(struct pass_state *ps, int64_t now_ms)
{
    check_watch_missed(ps, now_ms);
    maybe_start_watch(ps, now_ms);
    check_watch_silence(ps, now_ms);
}

/* The engine's wake-up time, brought forward for what the loop itself must
 * do on time: the next credentials probe, the next watch (re)start. */
static int64_t wake_time(const struct pass_state *ps, int64_t now_ms, int64_t wake_at_ms)
{
    if (ps->auth_failing_since_ms && !ps->stopping) {
        int64_t probe_at = ps->last_request_ms + ps->loop->renew_deadline_ms / 2 + 1;
        if (probe_at < wake_at_ms)
            wake_at_ms = probe_at > now_ms ? probe_at : now_ms;
    }
    if (!ld_kube_watch_running(ps->loop->kube) && !ps->stopping &&
        ps->watch_next_start_ms > now_ms && ps->watch_next_start_ms < wake_at_ms)
        wake_at_ms = ps->watch_next_start_ms;
    return wake_at_ms;
}

/* Acts on how the wait ended: a signal, or a watch that closed or failed
 * (routine endings reconnect at once, others back off). */
static void after_wait(struct pass_state *ps, enum ld_err rc,
                       const struct ld_errinfo *err)
{
    if (ps->watch_ended) {
        ps->watch_ended = false;
        watch_broken(ps, ld_mono_ms());
        if (ps->watch_relist)
            ps->watch_next_start_ms = ld_mono_ms(); /* a 410 is routine: re-read now */
    }
    if (rc == LD_ECANCELED) {
        on_stop_signal(ps, take_signal(ps->loop->signal_fd));
    } else if (rc != LD_OK) {
        if (rc == LD_EGONE)
            ps->watch_relist = true;
        ld_log(rc == LD_EEOF ? LD_LOG_DEBUG : LD_LOG_INFO, "watch ended: %s", err->msg);
        watch_broken(ps, ld_mono_ms());
        if (rc == LD_EEOF || rc == LD_EGONE)
            ps->watch_next_start_ms = ld_mono_ms(); /* routine: reconnect now */
    }
}

/* Waits until wake_at_ms, a signal, or a watch event the engine may want
 * to act on. */
static void wait_for(struct pass_state *ps, int64_t wake_at_ms)
{
    int64_t now = ld_mono_ms();
    watch_upkeep(ps, now);
    if (probe_while_unauthorized(ps, now))
        return; /* the engine acts at once */
    int64_t delay = wake_time(ps, now, wake_at_ms) - now;
    if (delay < 0)
        delay = 0;
    if (delay > 60000)
        delay = 60000;
    struct ld_errinfo err;
    enum ld_err rc = ld_kube_watch_wait(ps->loop->kube, delay, on_watch_data, ps, &err);
    after_wait(ps, rc, &err);
}

static enum ld_err perform(struct ld_loop *loop, const struct ld_action *act,
                           struct ld_lease *out, struct ld_errinfo *err)
{
    ld_kube_set_timeout_ms(loop->kube, act->timeout_ms);
    switch (act->kind) {
    case LD_ACT_GET:
        return ld_kube_lease_get(loop->kube, loop->namespace_, loop->name, out, err);
    case LD_ACT_CREATE:
        return ld_kube_lease_create(loop->kube, act->lease, out, err);
    case LD_ACT_UPDATE:
        return ld_kube_lease_update(loop->kube, act->lease, out, err);
    default:
        return ld_errinfo_set(err, LD_EINVAL, "no request");
    }
}

static const char *verb_of(enum ld_action_kind kind)
{
    return kind == LD_ACT_GET ? "GET" : kind == LD_ACT_CREATE ? "POST" : "PUT";
}

/* API failures are normal events for an elector (a lost race is a 409), so
 * conflicts are debug and a run of identical errors is logged once. */
static void note_outcome(struct pass_state *ps, const struct ld_action *act,
                         enum ld_err rc, const struct ld_errinfo *err, int64_t now_ms)
{
    bool auth = rc == LD_EUNAUTHORIZED || rc == LD_EFORBIDDEN;
    if (!auth)
        ps->auth_failing_since_ms = 0;
    else if (!ps->auth_failing_since_ms)
        ps->auth_failing_since_ms = now_ms;
    if (rc == LD_OK || rc == LD_ENOTFOUND || rc == LD_ECANCELED) {
        if (rc == LD_OK) {
            ps->last_logged_err = LD_OK;
            ld_errinfo_clear(&ps->last_err);
        }
        return;
    }
    ps->last_err = *err;
    enum ld_log_level level = LD_LOG_WARN;
    if (rc == LD_ECONFLICT || rc == LD_EEXISTS || rc == ps->last_logged_err)
        level = LD_LOG_DEBUG;
    ps->last_logged_err = rc;
    ld_log(level, "%s lease failed: %s (HTTP %ld%s%s): %s", verb_of(act->kind),
           ld_strerror(rc), err->http_status, err->reason[0] ? ", " : "", err->reason,
           err->msg);
}

static void run_request(struct pass_state *ps, const struct ld_action *act)
{
    struct ld_loop *loop = ps->loop;
    struct ld_lease out;
    struct ld_errinfo err;
    ld_lease_init(&out);
    ld_errinfo_clear(&err);
    int64_t started = ld_mono_ms();
    ps->last_request_ms = started;
    enum ld_err rc = perform(loop, act, &out, &err);
    struct ld_now now = read_clocks();
    if (ld_log_enabled(LD_LOG_DEBUG))
        ld_log(LD_LOG_DEBUG, "%s lease: %s, HTTP %ld, %lld ms", verb_of(act->kind),
               ld_strerror(rc), err.http_status, (long long)(now.mono_ms - started));
    note_outcome(ps, act, rc, &err, now.mono_ms);
    ld_election_result(loop->election, now, rc, rc == LD_OK ? &out : NULL, &err);
    ld_lease_clear(&out);
    if (rc == LD_ECANCELED)
        on_stop_signal(ps, take_signal(loop->signal_fd));
}

void ld_loop_run(struct ld_loop *loop)
{
    struct pass_state ps;
    memset(&ps, 0, sizeof(ps));
    ps.loop = loop;
    ps.last_logged_err = LD_OK;
    ld_watch_decoder_init(&ps.decoder);
    for (;;) {
        if (ps.hook_stop) {
            ps.hook_stop = false;
            begin_shutdown(&ps);
        }
        struct ld_now now = read_clocks();
        struct ld_action act = ld_election_next(loop->election, now);
        publish(&ps, now.mono_ms);
        if (act.kind == LD_ACT_DONE)
            break;
        if (act.kind == LD_ACT_WAIT) {
            ld_memtrim_idle(); /* a large Lease or HTTP burst just passed */
            if (!ps.hook_stop) /* else shut down without waiting */
                wait_for(&ps, act.wake_at_ms);
        } else {
            run_request(&ps, &act);
        }
    }
    ld_kube_watch_stop(loop->kube);
    publish(&ps, ld_mono_ms());
    ld_watch_decoder_clear(&ps.decoder);
}
