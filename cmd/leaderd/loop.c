/*
 * loop: drives one election against the API server and publishes it.
 */
#include "loop.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "log.h"

/* Per-pass bookkeeping that is not the engine's business. */
struct pass_state {
    bool first_leader_seen;
    int64_t transitions_seen;
    enum ld_err last_logged_err; /* repeated failures are logged once */
    bool stopping;
};

static struct ld_now read_clocks(void)
{
    struct ld_now now = {.mono_ms = ld_mono_ms(), .wall_us = ld_wall_us()};
    return now;
}

static void log_event(const struct ld_loop *loop, const struct ld_event *ev,
                      struct pass_state *ps)
{
    switch (ev->kind) {
    case LD_EV_STARTED_LEADING:
        ld_log(LD_LOG_INFO, "leadership acquired: %s/%s now held by \"%s\" (term %d)",
               loop->namespace_, loop->name, ev->leader, (int)ev->term);
        break;
    case LD_EV_STOPPED_LEADING:
        ld_log(LD_LOG_WARN, "leadership lost: %s (term %d)", ld_stop_reason_str(ev->reason),
               (int)ev->term);
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
        ld_log(LD_LOG_ERROR,
               "identity conflict: another process holds %s/%s under our identity \"%s\"; "
               "identities must be unique (use the pod name); standing back",
               loop->namespace_, loop->name, ev->leader);
        break;
    }
}

static void publish(const struct ld_loop *loop, struct pass_state *ps, int64_t now_ms)
{
    struct ld_event ev;
    while (ld_election_take_event(loop->election, &ev))
        log_event(loop, &ev, ps);

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
    ld_state_publish(loop->state, &snap);
}

/* Consumes pending signals; returns true when one asks us to stop. */
static bool take_signal(int fd)
{
    struct signalfd_siginfo si;
    bool stop = false;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        stop = stop || si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT;
    return stop;
}

static void begin_shutdown(struct ld_loop *loop, struct pass_state *ps)
{
    if (ps->stopping)
        return;
    ps->stopping = true;
    ld_log(LD_LOG_INFO, "shutdown requested");
    ld_election_shutdown(loop->election, read_clocks());
}

/* Sleeps until wake_at_ms or a signal. */
static void wait_for(struct ld_loop *loop, struct pass_state *ps, int64_t wake_at_ms)
{
    int64_t delay = wake_at_ms - ld_mono_ms();
    if (delay <= 0)
        return;
    if (delay > 60000)
        delay = 60000;
    struct pollfd pfd = {.fd = loop->signal_fd, .events = POLLIN};
    int n = poll(&pfd, 1, (int)delay);
    if (n > 0 && take_signal(loop->signal_fd))
        begin_shutdown(loop, ps);
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
static void log_failure(struct pass_state *ps, const struct ld_action *act, enum ld_err rc,
                        const struct ld_errinfo *err)
{
    if (rc == LD_OK || rc == LD_ENOTFOUND || rc == LD_ECANCELED) {
        if (rc == LD_OK)
            ps->last_logged_err = LD_OK;
        return;
    }
    enum ld_log_level level = LD_LOG_WARN;
    if (rc == LD_ECONFLICT || rc == LD_EEXISTS || rc == ps->last_logged_err)
        level = LD_LOG_DEBUG;
    ps->last_logged_err = rc;
    ld_log(level, "%s lease failed: %s (HTTP %ld%s%s): %s", verb_of(act->kind),
           ld_strerror(rc), err->http_status, err->reason[0] ? ", " : "", err->reason,
           err->msg);
}

static void run_request(struct ld_loop *loop, struct pass_state *ps,
                        const struct ld_action *act)
{
    struct ld_lease out;
    struct ld_errinfo err;
    ld_lease_init(&out);
    ld_errinfo_clear(&err);
    enum ld_err rc = perform(loop, act, &out, &err);
    log_failure(ps, act, rc, &err);
    ld_election_result(loop->election, read_clocks(), rc, rc == LD_OK ? &out : NULL, &err);
    ld_lease_clear(&out);
    if (rc == LD_ECANCELED && take_signal(loop->signal_fd))
        begin_shutdown(loop, ps);
}

int ld_loop_run(struct ld_loop *loop)
{
    struct pass_state ps = {.last_logged_err = LD_OK};
    for (;;) {
        struct ld_now now = read_clocks();
        struct ld_action act = ld_election_next(loop->election, now);
        publish(loop, &ps, now.mono_ms);
        if (act.kind == LD_ACT_DONE)
            break;
        if (act.kind == LD_ACT_WAIT)
            wait_for(loop, &ps, act.wake_at_ms);
        else
            run_request(loop, &ps, &act);
    }
    publish(loop, &ps, ld_mono_ms());
    return 0;
}
