/*
 * loop: the imperative shell around the election host (lib/host.h) for the
 * daemon's one Lease: publishes each pass for the HTTP server, feeds the
 * hooks that consume leadership (the exec child, the Pod label, Events),
 * turns SIGTERM/SIGINT (read from a signalfd) into an orderly release, and
 * carries POST /resign requests to the engine and their outcome back.
 */
#ifndef LEADERD_LOOP_H
#define LEADERD_LOOP_H

#include "election.h"
#include "host.h"
#include "kube.h"
#include "metrics.h"
#include "state.h"

/* Something that consumes leadership from inside the loop: the exec
 * child, the Pod label, Events. Every call is made on the loop's thread;
 * none may block. Only on_publish is required. */
struct ld_loop_hook {
    void *ctx;
    /* After every publish, with the engine's status; true asks the loop to
     * shut down (release, then end). */
    bool (*on_publish)(void *ctx, const struct ld_election_status *st, int64_t now_ms);
    /* For SIGTERM/SIGINT; true means the hook took the signal over and the
     * loop keeps running until on_publish asks it to end. May be NULL. */
    bool (*on_signal)(void *ctx, int signo);
    /* When the hook wants the next publish (a retry, or a look at a call of
     * its own in flight); INT64_MAX for never. May be NULL. */
    int64_t (*next_wake_ms)(void *ctx, int64_t now_ms);
    /* During a shutdown, before the release write: true while the hook
     * still has something to finish first (the Pod label's "false"). The
     * release waits while any hook says so, but never longer than
     * min(LD_LOOP_RELEASE_HOLD_MAX_MS, renew-deadline / 2) from the
     * shutdown, then goes ahead regardless. May be NULL. */
    bool (*holds_release)(void *ctx, int64_t now_ms);
    /* Whether holds_release also holds a resignation's release (POST
     * /resign, a preferredHolder hand-over): only what safety needs (the
     * exec child gone first) should delay a hand-over. */
    bool holds_resignation;
};

#define LD_LOOP_RELEASE_HOLD_MAX_MS 2000

struct ld_loop {
    struct ld_kube *kube;       /* borrowed */
    struct ld_state *state;     /* borrowed */
    int signal_fd;              /* signalfd for SIGTERM and SIGINT */
    int wake_fd;                /* ends a wait: an epoll set of signal_fd, the
                                   resign channel and whatever the hooks wake on */
    struct ld_metrics *metrics; /* borrowed; may be NULL */
    int64_t lease_duration_ms;
    int64_t renew_deadline_ms;
    const struct ld_loop_hook *hooks; /* borrowed array of n_hooks; may be NULL */
    size_t n_hooks;

    /* POST /resign (the state's resign channel, whose fd is in wake_fd):
     * how long to stay out after resigning. */
    int64_t resign_cooldown_ms;

    struct ld_host *host; /* owned; made by ld_loop_start */
    bool stopping;
    int64_t hold_until_ms;        /* a shutdown's release waits for hooks until then */
    int64_t resign_hold_until_ms; /* and a resignation's until then */
    /* The POST /resign tickets the engine is resigning for, and, once the
     * engine has said, how it went (LD_RESIGN_PENDING until then). */
    bool resign_busy;
    uint64_t resign_first, resign_last;
    enum ld_resign_outcome resign_result;
};

/* Makes the host and its election from ec (checked as ld_election_new
 * checks it). Returns LD_OK, or an error with err set. */
enum ld_err ld_loop_start(struct ld_loop *loop, const struct ld_election_config *ec,
                          struct ld_errinfo *err);

/* Runs until the election is done after a shutdown signal (or the hook's
 * request). Every failure on the way (API errors, a lost watch, no memory
 * for one pass) is logged and retried, never a reason to stop: a sidecar
 * that exits on its own hands its app an unexplained restart instead of a
 * standby. */
void ld_loop_run(struct ld_loop *loop);

/* What /healthz should say about an election's API calls as of now_ms
 * (credentials refused for longer than renew_deadline_ms, an identity
 * conflict), or "" when all is well, into out. */
void ld_loop_health(const struct ld_host_view *v, int64_t renew_deadline_ms,
                    int64_t now_ms, char *out, size_t len);

/* Frees what ld_loop_start made. NULL-safe; idempotent. */
void ld_loop_clear(struct ld_loop *loop);

#endif
