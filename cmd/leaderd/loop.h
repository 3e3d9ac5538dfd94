/*
 * loop: the imperative shell around the election engine. Reads both clocks
 * once per pass, performs the engine's requests through the Kubernetes
 * client, publishes the state for the HTTP server, logs every leadership
 * change, keeps a watch on the Lease that feeds the engine between
 * requests, and turns SIGTERM/SIGINT (read from a signalfd) into an
 * orderly release.
 */
#ifndef LEADERD_LOOP_H
#define LEADERD_LOOP_H

#include "election.h"
#include "kube.h"
#include "metrics.h"
#include "state.h"

/* Something that consumes leadership from inside the loop: the exec
 * child, the Pod label, Events. Every call is made between requests, on
 * the loop's thread; none may block. Only on_publish is required. */
struct ld_loop_hook {
    void *ctx;
    /* After every publish, with the engine's status; true asks the loop to
     * shut down (release, then end). */
    bool (*on_publish)(void *ctx, const struct ld_election_status *st, int64_t now_ms);
    /* For SIGTERM/SIGINT; true means the hook took the signal over and the
     * loop keeps running until on_publish asks it to end. May be NULL. */
    bool (*on_signal)(void *ctx, int signo);
    /* When the hook wants the next pass (a retry, or a look at a call in
     * flight: the loop's waits do not end on another exchange's answer);
     * INT64_MAX for never. The loop wakes at the earliest of these and the
     * engine's time. May be NULL. */
    int64_t (*next_wake_ms)(void *ctx, int64_t now_ms);
    /* During a shutdown, before the release write: true while the hook
     * still has something to finish first (the Pod label's "false"). The
     * loop holds the release while any hook says so, but never longer than
     * min(LD_LOOP_RELEASE_HOLD_MAX_MS, renew-deadline / 2) from the
     * shutdown, then releases regardless. May be NULL. */
    bool (*holds_release)(void *ctx, int64_t now_ms);
};

#define LD_LOOP_RELEASE_HOLD_MAX_MS 2000

struct ld_loop {
    struct ld_election *election; /* borrowed */
    struct ld_kube *kube;         /* borrowed; its cancel fd is signal_fd, or an
                                     epoll set of it and whatever the hook
                                     wakes on */
    struct ld_state *state;       /* borrowed */
    int signal_fd;                /* signalfd for SIGTERM and SIGINT */
    const char *namespace_;       /* borrowed */
    const char *name;             /* borrowed */
    struct ld_metrics *metrics;   /* borrowed; may be NULL */
    int64_t lease_duration_ms;
    int64_t renew_deadline_ms;
    const struct ld_loop_hook *hooks; /* borrowed array of n_hooks; may be NULL */
    size_t n_hooks;
};

/* Runs until the engine is done after a shutdown signal. Every failure on
 * the way (API errors, a lost watch, no memory for one pass) is logged and
 * retried, never a reason to stop: a sidecar that exits on its own hands
 * its app an unexplained restart instead of a standby. */
void ld_loop_run(struct ld_loop *loop);

#endif
