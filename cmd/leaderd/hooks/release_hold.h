/* SPDX-License-Identifier: Apache-2.0 */
/*
 * release_hold: the one judgement of whether a release may be written now,
 * for the single Lease (shell.c) and for each shard (shard_hooks.c) alike.
 *
 * After a step-down on purpose (a shutdown, POST /resign, a preferredHolder
 * hand-over, a shard given back) the release waits for every hook of the
 * election that still holds leadership (hook.h): the exec child not yet
 * gone, an API write sent and not yet answered. A real API server commits
 * a write it has admitted whether or not its client is still there, so
 * such a write is waited for, not cut. The wait is bounded by the deadline
 * of the term the hooks acted in, the start of its last successful renewal
 * plus the renew deadline (never by the step-down's time plus anything):
 * until then no other replica can have taken over. A safety hold still
 * held at that deadline, or a hook that let out something whose fate is
 * unknown, means no release at all: the Lease then expires by itself,
 * which gives what is still under way lease-duration - renew-deadline more
 * to end before anyone may take over. Courtesy holds (the Pod label,
 * Events) hold only a shutdown's release, up to their own bound.
 *
 * Pure: no I/O, no clock of its own; the callers bring the hooks, the
 * deadlines and the time.
 */
#ifndef LEADERD_RELEASE_HOLD_H
#define LEADERD_RELEASE_HOLD_H

#include <stddef.h>
#include <stdint.h>

#include "hook.h"

enum ld_release_verdict {
    LD_RELEASE_NOW,     /* nothing holds it: write the release */
    LD_RELEASE_WAIT,    /* held: ask again by the verdict's until_ms */
    LD_RELEASE_GIVE_UP, /* never write it: the Lease expires by itself */
};

struct ld_release_hold {
    enum ld_release_verdict verdict;
    /* LD_RELEASE_WAIT: when the hold ends at the latest (a hook may end it
     * sooner and wake the caller); INT64_MAX otherwise. */
    int64_t until_ms;
    /* LD_RELEASE_GIVE_UP: why, for the log (static text). */
    const char *why;
};

/* A shutdown's courtesy holds end this long after it began: half the
 * renew deadline, and never more than LD_RELEASE_COURTESY_MAX_MS. */
#define LD_RELEASE_COURTESY_MAX_MS 2000
int64_t ld_release_courtesy_ms(int64_t renew_deadline_ms);

/* Asks every hook of hooks[0..n) (none is skipped because another holds:
 * a hook may arrange to wake the caller when its hold ends) and judges as
 * of now_ms. term_until_ms bounds the safety holds (INT64_MIN: the term is
 * over, another holder is in view); courtesy_until_ms bounds the courtesy
 * holds, INT64_MIN when none applies (not shutting down). */
struct ld_release_hold ld_release_hold_judge(const struct ld_hook *hooks, size_t n,
                                             int64_t term_until_ms,
                                             int64_t courtesy_until_ms, int64_t now_ms);

#endif
