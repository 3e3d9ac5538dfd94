/*
 * shards: the daemon's shard mode (--shards, CONTRACT.md "Sharding"). One
 * election host carries this replica's member Lease and one election per
 * shard, all on one watch of the group's label. After every pass the
 * group's decisions (lib/shardgroup.h: who is a live member, who should own
 * which shard) are applied once: a shard assigned here is contended for, a
 * shard assigned elsewhere is given back by a graceful release. The shard
 * table is published for the HTTP server (state.h, shardsnap.h).
 *
 * SIGTERM/SIGINT: every shard and the member Lease are released (with
 * --release-on-exit), so the others rebalance at once; then the member
 * Lease is deleted with preconditions, bounded in time, so nothing is left
 * behind. A group watch that is down is made up for by listing the group.
 *
 * Everything runs on the caller's thread inside ld_shards_run; only the
 * state is shared with the HTTP threads.
 */
#ifndef LEADERD_SHARDS_H
#define LEADERD_SHARDS_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "kube.h"
#include "metrics.h"
#include "shardgroup.h"
#include "state.h"

struct ld_shards_config {
    struct ld_kube *kube;       /* borrowed */
    struct ld_state *state;     /* borrowed */
    struct ld_metrics *metrics; /* borrowed; may be NULL */
    int signal_fd;              /* signalfd for SIGTERM and SIGINT */
    int wake_fd;                /* readable when signal_fd is (an epoll set) */
    const char *namespace_;     /* copied (by the engines), as the rest */
    const char *group;          /* --lease-name */
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

struct ld_shards;

/* Makes the group and the host with every election (checked as
 * ld_shardgroup_new and ld_election_new check them); nothing is claimed
 * before ld_shards_run. Returns a new object (free with ld_shards_free), or
 * NULL with err set. */
struct ld_shards *ld_shards_new(const struct ld_shards_config *cfg,
                                struct ld_errinfo *err);

/* The group, for ld_state_set_group (borrowed; valid until
 * ld_shards_free). */
const struct ld_shardgroup *ld_shards_group(const struct ld_shards *s);

/* Runs until a shutdown signal has been acted on: shards released, the
 * member Lease deleted (or the attempt timed out). Failures on the way are
 * logged and retried, never a reason to stop. */
void ld_shards_run(struct ld_shards *s);

void ld_shards_free(struct ld_shards *s); /* NULL-safe */

#endif
