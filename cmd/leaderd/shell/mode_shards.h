/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mode_shards: the shell's mode (shell.h) for --shards, shard protocol 2
 * (docs/design/shard-protocol.md). The group itself runs on the library's
 * shard host (include/leaderd/shardhost.h): this replica's member Lease,
 * renewed every retry period, is the shell host's one election and the
 * group's only heartbeat; the host's watch of the group's label feeds the
 * group's view; after every pass the shard host carries the group's
 * decisions out as compare-and-swap writes (takes, evictions of silent
 * members, give-backs: the claim ends at once, the release follows the
 * drain). This mode binds it to the daemon: the shard table for the HTTP
 * server (shard_table.h, state.h), /healthz, the drain channel (POST
 * /shards/ID/drained ends a drain early) and the hooks.
 *
 * SIGTERM/SIGINT: every claim ends; after the same drain every shard Lease
 * that names this replica is released, then the member Lease (with
 * --release-on-exit), so the others rebalance at once; then the member
 * Lease is deleted with preconditions, bounded in time.
 * Hooks (hook.h) are bound to shards, not to the host's elections: with
 * --events every shard has its own Event hook (hook_events.h), and the
 * daemon may add more (the API write gate's, hook_proxy.h). Each is fed
 * this replica's claim of its shard (leading while claimed, until the
 * claim's deadline) and asked, before the shard's release is written,
 * whether it still holds it: a safety hold for at most the renew deadline
 * from the claim's end, after which that release is not written at all
 * (and, at the exit, neither is the member Lease's: it expires by
 * itself); a courtesy hold only at the exit, for the shell's bound.
 *
 * Everything runs on the shell's thread; only the state is shared with the
 * HTTP threads.
 */
#ifndef LEADERD_MODE_SHARDS_H
#define LEADERD_MODE_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "err.h"
#include "kube.h"
#include "metrics.h"
#include "shardgroup.h"
#include "shardhost.h"
#include "shell.h"
#include "state.h"

struct ld_mode_shards_config {
    /* The group on the shard host (shardhost.h): the kube, the clock (the
     * shell's; NULL: the real one), the names, the timings, the seed and
     * the call timeout (also the Events' and the member Lease's deletion's
     * bound). Its ops are this mode's own: not read. */
    struct ld_shardhost_config host;
    struct ld_state *state;     /* borrowed */
    struct ld_metrics *metrics; /* borrowed; may be NULL */
    bool events;                /* --events: an Event per shard transition */
};

struct ld_mode_shards;

/* Makes the group (checked as ld_shardgroup_new checks it) and the shard
 * table's parts; the elections are made when the mode is attached to a
 * shell (ld_shell_new), and nothing is claimed before the shell runs.
 * Returns a new object (free with ld_mode_shards_free, after the shell),
 * or NULL with err set. */
struct ld_mode_shards *ld_mode_shards_new(const struct ld_mode_shards_config *cfg,
                                          struct ld_errinfo *err);

/* s as a mode for ld_shell_new (s must outlive the shell). Its finish
 * publishes the last step-downs and deletes the member Lease (bounded by
 * call_timeout_ms). */
struct ld_shell_mode ld_mode_shards(struct ld_mode_shards *s);

/* The group, for ld_state_set_group (borrowed; valid until
 * ld_mode_shards_free). */
const struct ld_shardgroup *ld_mode_shards_group(const struct ld_mode_shards *s);

/* Binds hook (copied; its ctx borrowed, outliving s) to shard (its index
 * in the group); hook->election is not read. Before the shell runs.
 * LD_EINVAL for a shard out of range, LD_ENOMEM. */
enum ld_err ld_mode_shards_add_shard_hook(struct ld_mode_shards *s, uint32_t shard,
                                          const struct ld_hook *hook,
                                          struct ld_errinfo *err);

/* fd (borrowed) is a hook's own fd (its take_wake's): watched by the
 * exit's wait for the releases, as the shell's wake set watches it before
 * (the daemon adds it there). LD_ESYS when it cannot be watched. */
enum ld_err ld_mode_shards_add_wake_fd(struct ld_mode_shards *s, int fd,
                                       struct ld_errinfo *err);

void ld_mode_shards_free(struct ld_mode_shards *s); /* NULL-safe */

#endif
