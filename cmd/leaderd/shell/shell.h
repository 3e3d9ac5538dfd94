/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shell: the daemon's one loop around the election host (include/leaderd/host.h). It
 * owns the host and runs it, turns SIGTERM/SIGINT into an orderly release
 * and hands the other signals it takes to the hooks, bounds how long hooks
 * (hook.h) may hold a release back, carries POST /resign requests to the
 * engine and their outcome back, feeds the watch metrics and gives the heap
 * back after a pass. What the elections are and
 * what is published for them is the mode's: the daemon's one Lease
 * (mode_lease.h) or its shard group (mode_shards.h), plugged in through
 * struct ld_shell_mode_ops.
 *
 * Time comes from a struct ld_clock and signals from a struct
 * ld_shell_signals, so the whole shell runs on simulated time in tests.
 * Everything runs on the caller's thread inside ld_shell_turn; only the
 * state (state.h) is shared with the HTTP threads.
 */
#ifndef LEADERD_SHELL_H
#define LEADERD_SHELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "election.h"
#include "err.h"
#include "hook.h"
#include "host.h"
#include "kube.h"
#include "metrics.h"
#include "state.h"

struct ld_shell;
struct ld_watch_event;

/* A mode: the elections of the shell and what is made of their news. ctx
 * is the mode's own object; every call runs on the shell's thread, from
 * inside ld_shell_new or ld_shell_turn. Members marked so may be NULL. */
struct ld_shell_mode_ops {
    /* True when POST /resign (the state's resign channel) resigns the
     * mode's election 0; otherwise the channel is left alone. */
    bool takes_resignations;
    /* Completes the host's configuration before the host is made (its
     * label selector, whether logs name each Lease). May be NULL. */
    void (*host_config)(void *ctx, struct ld_host_config *hc);
    /* Adds the mode's elections (ld_shell_add_election) and hooks
     * (ld_shell_add_hook), once, from ld_shell_new. sh is borrowed until
     * ld_shell_free. */
    enum ld_err (*attach)(void *ctx, struct ld_shell *sh, struct ld_errinfo *err);
    /* Each election's publish (host.h), before its hooks see it. */
    void (*on_publish)(void *ctx, const struct ld_host_view *v, int64_t now_ms);
    /* Each engine event of election index. May be NULL. */
    void (*on_event)(void *ctx, size_t index, const struct ld_event *ev, int64_t now_ms);
    /* Every event of the host's watch (host.h). May be NULL. */
    void (*lease_event)(void *ctx, const struct ld_watch_event *ev, int64_t now_ms);
    /* After each pass (host.h's after_pass): when to be called again
     * without news, INT64_MAX for only after the next pass. May be NULL. */
    int64_t (*after_pass)(void *ctx, int64_t now_ms);
    /* The watch started a stream (host.h's watch_started). May be NULL. */
    void (*watch_started)(void *ctx, bool from_current, int64_t now_ms);
    /* A shutdown begins: the host steps every election down next. May be
     * NULL. */
    void (*on_shutdown)(void *ctx, int64_t now_ms);
    /* Once every election is done after a shutdown, before ld_shell_turn
     * reports the shell done; it may run the host's client (blocking,
     * bounded) to finish what the shutdown needs. May be NULL. */
    void (*finish)(void *ctx, int64_t now_ms);
    /* The wake fd ended a wait: the mode's own hooks consume their fds'
     * news (struct ld_hook's take_wake); true publishes election 0 now,
     * so that the pass after it looks again. May be NULL. */
    bool (*take_wake)(void *ctx);
};

struct ld_shell_mode {
    const struct ld_shell_mode_ops *ops; /* static storage */
    void *ctx;                           /* borrowed; outlives the shell */
};

/* Where signals come from: take returns the next signal pending
 * (consuming it), 0 when none; it is asked again until 0 (a bounded number
 * of times) whenever the shell's wake fd ends a wait. SIGTERM and SIGINT
 * are stop signals (ld_shell_stop); any other is offered to every hook's
 * on_signal to pass on, and ignored (logged at debug level) when none
 * does. */
struct ld_shell_signals {
    int (*take)(void *ctx);
    void *ctx;
};

struct ld_shell_config {
    struct ld_kube *kube;         /* borrowed; outlives the shell */
    struct ld_state *state;       /* borrowed: the resign channel */
    struct ld_metrics *metrics;   /* borrowed; may be NULL: watch metrics */
    const struct ld_clock *clock; /* copied; NULL: the real clock */
    const char *namespace_;       /* copied by the host */
    int64_t lease_duration_ms;
    int64_t renew_deadline_ms;
    int64_t resign_cooldown_ms; /* after POST /resign, how long to stay out */
    /* Ends a wait (never read): readable when a stop signal is pending, a
     * POST /resign came, or a hook has news (an epoll set of those fds in
     * the daemon; see struct ld_hook's take_wake). Watched while stopping
     * too. -1: none. */
    int wake_fd;
    struct ld_shell_signals signals; /* take may be NULL: no signals */
};

/* Makes the host and lets the mode attach its elections; nothing is
 * claimed before ld_shell_turn. cfg is copied, mode's ctx borrowed.
 * Returns a new shell (free with ld_shell_free), or NULL with err set
 * (the host's or the mode's error). */
struct ld_shell *ld_shell_new(const struct ld_shell_config *cfg,
                              struct ld_shell_mode mode, struct ld_errinfo *err);

/* Cancels what the host has in flight and frees the shell. NULL-safe. The
 * mode and the hooks' objects are their owners' to free, after this. */
void ld_shell_free(struct ld_shell *sh);

/* For a mode's attach: adds an election made from ec (checked as
 * ld_election_new checks it), with the shell's callbacks. Returns LD_OK
 * with *index set (0 for the first, then in order), or an error with err
 * set. */
enum ld_err ld_shell_add_election(struct ld_shell *sh,
                                  const struct ld_election_config *ec, size_t *index,
                                  struct ld_errinfo *err);

/* Binds hook (copied; its ctx borrowed until ld_shell_free) to its
 * election: it sees that election's publishes, in the order hooks were
 * added, after the mode's. Before the first ld_shell_turn. Returns LD_OK,
 * LD_EINVAL for an unknown election, or LD_ENOMEM, with err set. */
enum ld_err ld_shell_add_hook(struct ld_shell *sh, const struct ld_hook *hook,
                              struct ld_errinfo *err);

/* The host (borrowed; owned by the shell), for the mode to read and poke
 * its elections. */
struct ld_host *ld_shell_host(struct ld_shell *sh);

/* A stop signal (0: none): every hook's on_signal is offered it; unless
 * one takes it over, the shutdown begins: the host steps every election
 * down, and each release waits while a hook of its election holds it: a
 * courtesy hold for at most min(LD_RELEASE_COURTESY_MAX_MS, renew
 * deadline / 2), a safety hold at most until the deadline of the term,
 * after which that release is not written at all (release_hold.h).
 * Ignored once stopping. */
void ld_shell_stop(struct ld_shell *sh, int signo);

/* Runs the host for at most max_wait_ms (a wake fd ends it early: stop
 * signals and POST /resign are then taken). Returns true once the shell is
 * done: every election released (or given up on) after a shutdown, and
 * the mode finished. Every failure on the way (API errors, a lost watch,
 * no memory for one pass) is logged and retried, never a reason to stop:
 * a sidecar that exits on its own hands its app an unexplained restart
 * instead of a standby. */
bool ld_shell_turn(struct ld_shell *sh, int64_t max_wait_ms);

/* Turns until done. */
void ld_shell_run(struct ld_shell *sh);

/* A struct ld_shell_signals take for a non-blocking signalfd (of the stop
 * signals and those to pass on); ctx points at the fd (an int). */
int ld_shell_signalfd_take(void *ctx);

#endif
