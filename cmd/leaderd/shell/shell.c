/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shell: the one loop around the election host (see shell.h).
 *
 * The host waits on the API (answers and the watch) and on wake_fd at
 * once, so a released Lease wakes a standby within milliseconds and
 * SIGTERM is acted on at once. Hooks are kept per election, so a publish
 * of one of a thousand shards looks only at that shard's hooks.
 */
#include "shell.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "lead.h"
#include "log.h"
#include "memtrim.h"
#include "release_hold.h"

/* The longest ld_shell_run leaves the host without looking at its own
 * state. */
#define RUN_SLICE_MS 60000
/* Signals taken per wake; more stay pending and end the next wait at once. */
#define SIGNALS_PER_WAKE 16
/* Passes come by the hundred a second with many elections; the free heap
 * is looked at (it walks the allocator's bins) at most this often. */
#define TRIM_EVERY_MS 100

/* What the shell keeps per election. */
struct slot {
    struct ld_hook *hooks; /* owned array of n */
    size_t n;
    /* When it last stopped leading on purpose (a shutdown, a resignation),
     * INT64_MAX while no such step-down is in force: the safety holds of
     * its release end with its term (release_hold.h). */
    int64_t step_down_ms;
};

struct ld_shell {
    struct ld_shell_config c;
    struct ld_clock clock;
    struct ld_shell_mode mode;
    struct ld_host *host;
    struct slot *slots; /* one per election */
    size_t n_slots, cap_slots;

    bool stopping;
    int64_t hold_until_ms; /* a shutdown's courtesy holds end then */
    int64_t trim_at_ms;    /* the next look at free heap after a pass */
    bool finished;         /* the mode finished after the host was done */

    /* The POST /resign tickets the engine is resigning for, and, once the
     * engine has said, how it went (LD_RESIGN_PENDING until then). */
    bool resign_busy;
    uint64_t resign_first, resign_last;
    enum ld_resign_outcome resign_result;
};

static int64_t now_ms(const struct ld_shell *sh)
{
    return ld_clock_mono_ms(&sh->clock);
}

/* ---- POST /resign ------------------------------------------------------- */

/* Takes the requests asked since the last look and, if this replica leads,
 * starts the resignation (the engine's next action is then its release). A
 * request while one is under way waits for it, then finds a standby (409). */
static void resign_take(struct ld_shell *sh)
{
    uint64_t first, last;
    ld_state_resign_drain(sh->c.state);
    if (sh->resign_busy || !ld_state_resign_take(sh->c.state, &first, &last))
        return;
    struct ld_now now = {.mono_ms = now_ms(sh), .wall_us = ld_clock_wall_us(&sh->clock)};
    if (sh->stopping || !ld_election_resign(ld_host_election(sh->host, 0), now,
                                            sh->c.resign_cooldown_ms)) {
        ld_state_resign_answer(sh->c.state, first, last, LD_RESIGN_NOT_LEADER);
        return;
    }
    ld_log(LD_LOG_INFO, "resigning on request (POST /resign); not contending for %lld ms",
           (long long)sh->c.resign_cooldown_ms);
    sh->resign_busy = true;
    sh->resign_first = first;
    sh->resign_last = last;
    sh->resign_result = LD_RESIGN_PENDING;
}

/* After a publish, so that a request answered "released" finds is_leader
 * false in the snapshot: answers the resignation once the engine said how
 * it went (or, with final, because the shell ends), and at once any
 * request that came in meanwhile while this replica does not lead. */
static void resign_answer(struct ld_shell *sh, const struct ld_election_status *st,
                          int64_t now, bool final)
{
    uint64_t first, last;
    if (sh->resign_busy && (sh->resign_result != LD_RESIGN_PENDING || final)) {
        enum ld_resign_outcome oc =
            sh->resign_result != LD_RESIGN_PENDING ? sh->resign_result : LD_RESIGN_FAILED;
        ld_state_resign_answer(sh->c.state, sh->resign_first, sh->resign_last, oc);
        sh->resign_busy = false;
    }
    bool leading = st && ld_leads_at(st->leading, st->lead_until_ms, now);
    if (!sh->resign_busy && !leading && ld_state_resign_take(sh->c.state, &first, &last))
        ld_state_resign_answer(sh->c.state, first, last, LD_RESIGN_NOT_LEADER);
}

/* ---- shutdown ----------------------------------------------------------- */

/* The host steps every engine down at once; hooks may hold the release
 * writes back for a bounded time. Safe from inside a host callback. */
static void begin_shutdown(struct ld_shell *sh, int64_t now)
{
    if (sh->stopping)
        return;
    sh->stopping = true;
    sh->hold_until_ms = now + ld_release_courtesy_ms(sh->c.renew_deadline_ms);
    /* A step-down on purpose is in force for every election from now (a
     * resignation under way keeps its own time, which the log reports). */
    for (size_t e = 0; e < sh->n_slots; e++) {
        if (sh->slots[e].step_down_ms > now)
            sh->slots[e].step_down_ms = now;
    }
    if (sh->mode.ops->on_shutdown)
        sh->mode.ops->on_shutdown(sh->mode.ctx, now);
    ld_host_shutdown(sh->host);
}

/* A stop signal ends the shell, unless a hook takes it over (the exec
 * child shuts down first and ends the shell when it has). */
void ld_shell_stop(struct ld_shell *sh, int signo)
{
    if (signo == 0 || sh->stopping)
        return;
    bool taken = false;
    for (size_t e = 0; e < sh->n_slots; e++) {
        for (size_t i = 0; i < sh->slots[e].n; i++) {
            const struct ld_hook *h = &sh->slots[e].hooks[i];
            if (h->on_signal && h->on_signal(h->ctx, signo))
                taken = true;
        }
    }
    if (!taken)
        begin_shutdown(sh, now_ms(sh));
}

/* Any other signal is the hooks' to pass on (the exec child's command
 * gets it); none of them ends leaderd, as its default action would. */
static void pass_signal(struct ld_shell *sh, int signo)
{
    bool passed = false;
    for (size_t e = 0; e < sh->n_slots; e++) {
        for (size_t i = 0; i < sh->slots[e].n; i++) {
            const struct ld_hook *h = &sh->slots[e].hooks[i];
            if (h->on_signal && h->on_signal(h->ctx, signo))
                passed = true;
        }
    }
    if (!passed)
        ld_log(LD_LOG_DEBUG, "signal %d ignored: nothing runs to pass it to", signo);
}

/* Until when a safety hold may hold the release of election index: the
 * deadline of its term, while a step-down on purpose is in force. */
static int64_t safety_until(struct ld_shell *sh, size_t index)
{
    if (sh->slots[index].step_down_ms == INT64_MAX)
        return INT64_MAX;
    struct ld_election_status st;
    ld_election_status(ld_host_election(sh->host, index), &st);
    return st.term_until_ms;
}

/* ---- the host's callbacks ------------------------------------------------ */

static void on_publish(void *ctx, const struct ld_host_view *v, int64_t now)
{
    struct ld_shell *sh = ctx;
    const struct slot *sl = &sh->slots[v->index];
    sh->mode.ops->on_publish(sh->mode.ctx, v, now);
    if (sh->mode.ops->takes_resignations && v->index == 0)
        resign_answer(sh, &v->status, now, false);
    bool stop = false;
    for (size_t i = 0; i < sl->n; i++)
        stop |= sl->hooks[i].on_publish(sl->hooks[i].ctx, &v->status, now);
    if (stop)
        begin_shutdown(sh, now); /* before the host's next pass */
}

static int64_t next_publish(void *ctx, size_t index, int64_t now)
{
    struct ld_shell *sh = ctx;
    const struct slot *sl = &sh->slots[index];
    int64_t at = INT64_MAX;
    if (sl->n == 0)
        return at;
    for (size_t i = 0; i < sl->n; i++) {
        const struct ld_hook *h = &sl->hooks[i];
        int64_t w = h->next_wake_ms ? h->next_wake_ms(h->ctx, now) : INT64_MAX;
        if (w < at)
            at = w;
    }
    /* The end of a hold is a publish too. */
    const int64_t ends[2] = {sh->stopping ? sh->hold_until_ms : INT64_MAX,
                             safety_until(sh, index)};
    for (size_t i = 0; i < 2; i++) {
        if (now < ends[i] && ends[i] < at)
            at = ends[i];
    }
    return at;
}

/* The release hold (release_hold.h), asked by the host during a shutdown
 * or a resignation: true while a hook of the election still holds
 * leadership within its bound. A release given up is never written: no
 * release is better than one another leader could overlap. */
static bool holds_release(void *ctx, size_t index, int64_t now)
{
    struct ld_shell *sh = ctx;
    struct slot *sl = &sh->slots[index];
    if (sl->step_down_ms == INT64_MAX)
        sl->step_down_ms = now; /* not seen stepping down: count from here */
    struct ld_release_hold h =
        ld_release_hold_judge(sl->hooks, sl->n, safety_until(sh, index),
                              sh->stopping ? sh->hold_until_ms : INT64_MIN, now);
    if (h.verdict == LD_RELEASE_GIVE_UP) {
        ld_log(LD_LOG_WARN, "the release is given up %lld ms after the step-down: %s",
               (long long)(now - sl->step_down_ms), h.why);
        ld_host_abandon_release(sh->host, index);
    }
    return h.verdict == LD_RELEASE_WAIT;
}

/* A step-down on purpose, after which a release follows. */
static bool on_purpose(enum ld_stop_reason r)
{
    return r == LD_STOP_SHUTDOWN || r == LD_STOP_RESIGNED ||
           r == LD_STOP_PREFERRED_HOLDER || r == LD_STOP_NOT_CONTENDING;
}

static void on_event(void *ctx, size_t index, const struct ld_event *ev)
{
    struct ld_shell *sh = ctx;
    struct slot *sl = &sh->slots[index];
    int64_t now = now_ms(sh);
    if (sh->mode.ops->on_event)
        sh->mode.ops->on_event(sh->mode.ctx, index, ev, now);
    if (ev->kind == LD_EV_STOPPED_LEADING && on_purpose(ev->reason) &&
        now < sl->step_down_ms)
        sl->step_down_ms = now;
    else if (ev->kind == LD_EV_STARTED_LEADING ||
             (!sh->stopping &&
              (ev->kind == LD_EV_RELEASED || ev->kind == LD_EV_RELEASE_FAILED)))
        sl->step_down_ms = INT64_MAX; /* the resignation is over */
    if (!sh->mode.ops->takes_resignations || index != 0 || !sh->resign_busy)
        return;
    /* A shutdown's release during a resignation serves it too. */
    if (ev->kind == LD_EV_RELEASED)
        sh->resign_result = LD_RESIGN_RELEASED;
    else if (ev->kind == LD_EV_RELEASE_FAILED)
        sh->resign_result = LD_RESIGN_FAILED;
}

static void on_watch_started(void *ctx, bool from_current)
{
    struct ld_shell *sh = ctx;
    if (sh->c.metrics)
        ld_metrics_watch_started(sh->c.metrics);
    if (sh->mode.ops->watch_started)
        sh->mode.ops->watch_started(sh->mode.ctx, from_current, now_ms(sh));
}

static void on_watch_event(void *ctx)
{
    struct ld_shell *sh = ctx;
    if (sh->c.metrics)
        ld_metrics_watch_event(sh->c.metrics);
}

static void on_lease_event(void *ctx, const struct ld_watch_event *ev, int64_t now)
{
    struct ld_shell *sh = ctx;
    sh->mode.ops->lease_event(sh->mode.ctx, ev, now);
}

static int64_t after_pass(void *ctx, int64_t now)
{
    struct ld_shell *sh = ctx;
    int64_t at = sh->mode.ops->after_pass ? sh->mode.ops->after_pass(sh->mode.ctx, now)
                                          : INT64_MAX;
    if (now >= sh->trim_at_ms) { /* a pass may have freed a burst's buffers */
        ld_memtrim_idle();
        sh->trim_at_ms = now + TRIM_EVERY_MS;
    }
    return at;
}

/* ---- construction -------------------------------------------------------- */

enum ld_err ld_shell_add_election(struct ld_shell *sh,
                                  const struct ld_election_config *ec, size_t *index,
                                  struct ld_errinfo *err)
{
    struct ld_host_election_ops ops = {
        .ctx = sh,
        .on_publish = on_publish,
        .on_event = on_event,
        .next_publish_ms = next_publish,
        .holds_release = holds_release,
    };
    if (sh->n_slots == sh->cap_slots) {
        size_t cap = sh->cap_slots ? 2 * sh->cap_slots : 4;
        struct slot *grown = realloc(sh->slots, cap * sizeof(*grown));
        if (!grown)
            return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        sh->slots = grown;
        sh->cap_slots = cap;
    }
    enum ld_err rc = ld_host_add(sh->host, ec, &ops, index, err);
    if (rc != LD_OK)
        return rc;
    if (*index != sh->n_slots)
        return ld_errinfo_set(err, LD_EINVAL, "election host: unexpected index");
    sh->slots[sh->n_slots++] = (struct slot){.step_down_ms = INT64_MAX};
    return LD_OK;
}

enum ld_err ld_shell_add_hook(struct ld_shell *sh, const struct ld_hook *hook,
                              struct ld_errinfo *err)
{
    if (hook->election >= sh->n_slots || !hook->on_publish)
        return ld_errinfo_set(err, LD_EINVAL, "hook: no election %zu", hook->election);
    struct slot *sl = &sh->slots[hook->election];
    struct ld_hook *grown = realloc(sl->hooks, (sl->n + 1) * sizeof(*grown));
    if (!grown)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    sl->hooks = grown;
    sl->hooks[sl->n++] = *hook;
    return LD_OK;
}

struct ld_host *ld_shell_host(struct ld_shell *sh)
{
    return sh->host;
}

struct ld_shell *ld_shell_new(const struct ld_shell_config *cfg,
                              struct ld_shell_mode mode, struct ld_errinfo *err)
{
    struct ld_shell *sh = calloc(1, sizeof(*sh));
    if (!sh) {
        ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        return NULL;
    }
    sh->c = *cfg;
    sh->clock = ld_clock_or_real(cfg->clock);
    sh->c.clock = &sh->clock;
    sh->mode = mode;
    struct ld_host_observer obs = {
        .ctx = sh,
        .watch_started = on_watch_started,
        .watch_event = on_watch_event,
        .lease_event = mode.ops->lease_event ? on_lease_event : NULL,
        .after_pass = after_pass,
    };
    struct ld_host_config hc = {
        .kube = cfg->kube,
        .namespace_ = cfg->namespace_,
        .lease_duration_ms = cfg->lease_duration_ms,
        .renew_deadline_ms = cfg->renew_deadline_ms,
        .log_names = true,
        .clock = &sh->clock,
        .observer = &obs,
    };
    if (mode.ops->host_config)
        mode.ops->host_config(mode.ctx, &hc);
    sh->host = ld_host_new(&hc, err);
    if (!sh->host || mode.ops->attach(mode.ctx, sh, err) != LD_OK) {
        ld_shell_free(sh);
        return NULL;
    }
    return sh;
}

void ld_shell_free(struct ld_shell *sh)
{
    if (!sh)
        return;
    ld_host_free(sh->host);
    for (size_t e = 0; e < sh->n_slots; e++)
        free(sh->slots[e].hooks);
    free(sh->slots);
    free(sh);
}

/* ---- running ------------------------------------------------------------- */

int ld_shell_signalfd_take(void *ctx)
{
    int fd = *(const int *)ctx;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
        return 0;
    return (int)si.ssi_signo;
}

/* The one place signals are read: stop signals end the shell (or are
 * taken over), the others go to the hooks. */
static void take_signals(struct ld_shell *sh)
{
    for (int i = 0; i < SIGNALS_PER_WAKE; i++) {
        int signo = sh->c.signals.take(sh->c.signals.ctx);
        if (signo == 0)
            break;
        if (signo == SIGTERM || signo == SIGINT)
            ld_shell_stop(sh, signo);
        else
            pass_signal(sh, signo);
    }
}

/* The wake fd ended a wait: a stop signal, a POST /resign, or a hook's
 * news (the exec child's channel, a hook's own fd). */
static void take_news(struct ld_shell *sh)
{
    if (sh->c.signals.take)
        take_signals(sh);
    if (sh->mode.ops->takes_resignations)
        resign_take(sh);
    if (sh->mode.ops->takes_resignations || (sh->n_slots > 0 && sh->slots[0].n > 0))
        ld_host_poke(sh->host, 0); /* its publish takes the hooks' news */
    if (sh->mode.ops->take_wake && sh->mode.ops->take_wake(sh->mode.ctx))
        ld_host_poke(sh->host, 0);
    for (size_t e = 0; e < sh->n_slots; e++) {
        for (size_t i = 0; i < sh->slots[e].n; i++) {
            const struct ld_hook *h = &sh->slots[e].hooks[i];
            if (h->take_wake && h->take_wake(h->ctx))
                ld_host_poke(sh->host, e);
        }
    }
}

bool ld_shell_turn(struct ld_shell *sh, int64_t max_wait_ms)
{
    if (sh->finished)
        return true;
    if (!ld_host_done(sh->host)) {
        /* Also while stopping: a hook's news may end a release hold. */
        enum ld_err rc = ld_host_run(sh->host, max_wait_ms, sh->c.wake_fd);
        ld_memtrim_idle(); /* also when no pass came for a while */
        if (rc == LD_ECANCELED)
            take_news(sh);
        if (!ld_host_done(sh->host))
            return false;
    }
    int64_t now = now_ms(sh);
    if (sh->mode.ops->finish)
        sh->mode.ops->finish(sh->mode.ctx, now);
    if (sh->mode.ops->takes_resignations)
        resign_answer(sh, NULL, now, true);
    sh->finished = true;
    return true;
}

void ld_shell_run(struct ld_shell *sh)
{
    while (!ld_shell_turn(sh, RUN_SLICE_MS))
        ;
}
