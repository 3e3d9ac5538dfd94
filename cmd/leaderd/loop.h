/*
 * loop: the imperative shell around the election engine. Reads both clocks
 * once per pass, performs the engine's requests through the Kubernetes
 * client, publishes the state for the HTTP server, logs every leadership
 * change, keeps a watch on the Lease that feeds the engine between
 * requests, turns SIGTERM/SIGINT (read from a signalfd) into an orderly
 * release, and carries POST /resign requests to the engine and their
 * outcome back.
 */
#ifndef LEADERD_LOOP_H
#define LEADERD_LOOP_H

#include "election.h"
#include "kube.h"
#include "metrics.h"
#include "state.h"

/* Something that consumes leadership from inside the loop (the exec child).
 * Both calls are made between requests, on the loop's thread. */
struct ld_loop_hook {
    void *ctx;
    /* After every publish, with the engine's status; true asks the loop to
     * shut down (release, then end). */
    bool (*on_publish)(void *ctx, const struct ld_election_status *st, int64_t now_ms);
    /* For SIGTERM/SIGINT; true means the hook took the signal over and the
     * loop keeps running until on_publish asks it to end. */
    bool (*on_signal)(void *ctx, int signo);
};

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
    const struct ld_loop_hook *hook; /* borrowed; may be NULL */
    /* POST /resign (the state's resign channel): how long to stay out, and
     * what ends a wait between requests besides the kube client's cancel
     * fd: an epoll set of that fd and the channel's eventfd, or -1 when
     * the channel is not enabled. Requests in flight are not cut short by
     * a resign request. */
    int64_t resign_cooldown_ms;
    int cancel_fd; /* the kube client's cancel fd, restored after each wait */
    int wait_fd;
};

/* Runs until the engine is done after a shutdown signal. Every failure on
 * the way (API errors, a lost watch, no memory for one pass) is logged and
 * retried, never a reason to stop: a sidecar that exits on its own hands
 * its app an unexplained restart instead of a standby. */
void ld_loop_run(struct ld_loop *loop);

#endif
