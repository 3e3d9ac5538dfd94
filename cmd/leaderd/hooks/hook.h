/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook: the one interface of everything in the daemon that consumes
 * leadership (the exec child, the Pod label, Events: hook_*.h). A hook is
 * bound to one election of the shell (shell.h) and sees that election's
 * every publish; the shell also asks it, through the same interface,
 * whether it still holds leadership in a way the release must wait for,
 * and of which kind that hold is (enum ld_hook_hold).
 */
#ifndef LEADERD_HOOK_H
#define LEADERD_HOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "election.h"

/* What a hook's release hold (holds_release) is for, which decides which
 * releases it holds and what happens when it outlasts its bound. */
enum ld_hook_hold {
    /* Something that should be finished before another replica leads but
     * need not be (a Pod label not yet "false", an Event not yet
     * recorded): it holds only a shutdown's release, for at most the
     * shell's courtesy bound (shell.h), and the release is written then
     * regardless. */
    LD_HOOK_HOLD_COURTESY = 0,
    /* Something another leader must never overlap (a command not yet gone,
     * an API write sent and not yet answered): it holds every release, a
     * shutdown's and a resignation's (POST /resign, a preferredHolder
     * hand-over, a shard given back), at most until the deadline of the
     * term it belongs to (the last successful renewal's start plus the
     * renew deadline; election.h's term_until_ms); a release still held
     * then is given up, never written, and the Lease expires by itself
     * (release_hold.h). */
    LD_HOOK_HOLD_SAFETY,
};

/* Every call is made on the shell's thread; none may block. Only
 * on_publish is required. */
struct ld_hook {
    void *ctx;
    size_t election; /* the index of the election it consumes (ld_shell_add_election) */
    /* After every publish of its election, with the engine's status; true
     * asks the shell to shut down (release, then end). */
    bool (*on_publish)(void *ctx, const struct ld_election_status *st, int64_t now_ms);
    /* For every signal leaderd takes. For SIGTERM/SIGINT, true means the
     * hook took the signal over and the shell keeps running until
     * on_publish asks it to end. For any other (SIGHUP, SIGQUIT, SIGUSR1,
     * SIGUSR2), true means the hook passed it on; one no hook passes on
     * is ignored. May be NULL. */
    bool (*on_signal)(void *ctx, int signo);
    /* When the hook wants the next publish (a retry, or a look at a call of
     * its own in flight); INT64_MAX for never. May be NULL. */
    int64_t (*next_wake_ms)(void *ctx, int64_t now_ms);
    /* The release hold: true while the hook still holds leadership in a way
     * the release must wait for; hold says which releases it holds and
     * how long. Asked once the engine stepped down and before its release
     * is written, at every pass meanwhile. May be NULL. */
    bool (*holds_release)(void *ctx, int64_t now_ms);
    /* True when something the hook let out while leading may still take
     * effect, unseen (an API write whose answer never came): the release
     * must not be written at all, so that the Lease expires by itself.
     * Asked with holds_release. May be NULL. */
    bool (*forbids_release)(void *ctx, int64_t now_ms);
    enum ld_hook_hold hold;
    /* For a hook with an fd of its own in the shell's wake set (shell.h):
     * called whenever that set ended a wait, it consumes what the fd says
     * (the fd would end every later wait otherwise) and returns true when
     * its election should be published now. May be NULL. */
    bool (*take_wake)(void *ctx);
};

#endif
