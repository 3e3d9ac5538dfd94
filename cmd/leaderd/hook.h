/*
 * hook: the one interface of everything in the daemon that consumes
 * leadership (the exec child, the Pod label, Events: hook_*.h). A hook is
 * bound to one election of the shell (shell.h) and sees that election's
 * every publish; the shell also asks it, through the same interface,
 * whether it still holds leadership in a way the release must wait for.
 */
#ifndef LEADERD_HOOK_H
#define LEADERD_HOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "election.h"

/* Every call is made on the shell's thread; none may block. Only
 * on_publish is required. */
struct ld_hook {
    void *ctx;
    size_t election; /* the index of the election it consumes (ld_shell_add_election) */
    /* After every publish of its election, with the engine's status; true
     * asks the shell to shut down (release, then end). */
    bool (*on_publish)(void *ctx, const struct ld_election_status *st, int64_t now_ms);
    /* For SIGTERM/SIGINT; true means the hook took the signal over and the
     * shell keeps running until on_publish asks it to end. May be NULL. */
    bool (*on_signal)(void *ctx, int signo);
    /* When the hook wants the next publish (a retry, or a look at a call of
     * its own in flight); INT64_MAX for never. May be NULL. */
    int64_t (*next_wake_ms)(void *ctx, int64_t now_ms);
    /* The release hold: true while the hook still holds leadership in a way
     * the release must wait for (a Pod label not yet "false", an Event not
     * yet recorded, a command not yet gone). A shutdown's release waits
     * while any hook of its election says so, but never longer than the
     * shell's bound (shell.h), then goes ahead regardless. May be NULL. */
    bool (*holds_release)(void *ctx, int64_t now_ms);
    /* Whether holds_release also holds a resignation's release (POST
     * /resign, a preferredHolder hand-over): only what safety needs (the
     * exec child gone first) should delay a hand-over. */
    bool holds_resignation;
};

#endif
