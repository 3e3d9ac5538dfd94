/*
 * mode_shards: the shell's mode (shell.h) for --shards. The shell's host
 * carries this replica's member Lease and one election per shard, all on one watch of the
 * group's label. After every pass the group's decisions (lib/shardgroup.h: who is a live
 * member, who should own which shard) are applied once: a shard assigned here is
 * contended for, a shard assigned elsewhere is given back by a graceful release. The
 * shard table is published for the HTTP server (state.h, shardsnap.h).
 *
 * SIGTERM/SIGINT: every shard and the member Lease are released (with
 * --release-on-exit), so the others rebalance at once; then the member
 * Lease is deleted with preconditions, bounded in time, so nothing is left
 * behind. A group watch that is down is made up for by listing the group.
 * With --events every shard has its own Event hook (hook_events.h), bound
 * to its election like any hook.
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
#include "shell.h"
#include "state.h"

struct ld_mode_shards_config {
    struct ld_kube *kube;         /* borrowed */
    struct ld_state *state;       /* borrowed */
    struct ld_metrics *metrics;   /* borrowed; may be NULL */
    const struct ld_clock *clock; /* the shell's (borrowed); NULL: the real one */
    const char *namespace_;       /* copied (by the engines), as the rest */
    const char *group;            /* --lease-name */
    const char *identity;
    const char *const *names; /* NULL: n_shards numbered shards */
    uint32_t n_shards;
    const char *pod_uid;  /* NULL or "": the member Lease has no ownerReference */
    const char *pod_name; /* the Pod of pod_uid (in namespace_) */
    int64_t lease_duration_ms;
    int64_t renew_deadline_ms;
    int64_t retry_period_ms;
    bool release_on_exit;
    uint64_t seed;           /* jitter; each election gets its own from it */
    bool events;             /* --events: an Event per shard transition */
    int64_t call_timeout_ms; /* for the Events and the member Lease's deletion */
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

/* The group, for its layout (borrowed; valid until ld_mode_shards_free). */
const struct ld_shardgroup *ld_mode_shards_group(const struct ld_mode_shards *s);

/* The shell's election index of shard (its index in the group), for
 * binding a hook to it. */
size_t ld_mode_shards_election(uint32_t shard);

void ld_mode_shards_free(struct ld_mode_shards *s); /* NULL-safe */

#endif
