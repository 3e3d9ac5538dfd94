/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardhost: a shard group (shardgroup.h) on an election host (host.h),
 * what the host is to one election engine. The group's engine decides;
 * the shard host carries its decisions out on the host's client, as
 * compare-and-swap writes: a shard assigned here is taken, a silent
 * holder's member Lease evicted first, a shard assigned elsewhere given
 * back (its claim ends at once, its release waits for the drain and for
 * what the consumer holds), Leases made without the group's labels read by
 * name and labelled, the group listed on joining, while the watch is down
 * or silent and when a takeover needs one consistent snapshot, long-expired
 * member Leases deleted. The rules are docs/design/shard-protocol.md's.
 *
 * The host carries one election of the shard host's: this replica's member
 * Lease, the group's only heartbeat. Its owner adds it (from
 * ld_shardhost_member_config) and passes the host's callbacks on to the
 * ld_shardhost_on_* functions below; ld_shardhost_observer and
 * ld_shardhost_member_ops do that wiring for an owner with nothing of its
 * own to add (examples/shards.c).
 *
 * Decisions wait for the end of a pass (the host's after_pass), so a pass
 * that learned much decides once. At most one write per shard, one
 * eviction, one list and one clean-up are in flight at a time.
 *
 * At the exit (ld_shardhost_shutdown, then ld_shardhost_finish once the
 * host is done): every claim ends; after the drain each shard Lease that
 * names this replica is released (release_on_exit, and only when its
 * member election led), then the member Lease, so the others rebalance at
 * once; then the member Lease is deleted with preconditions. A shard
 * release the consumer gave up on leaves the member Lease to expire.
 *
 * Threading and time as host.h: everything on the host's thread, from
 * inside ld_host_run (or ld_shardhost_finish); the clock is the config's.
 */
#ifndef LEADERD_SHARDHOST_H
#define LEADERD_SHARDHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "election.h"
#include "err.h"
#include "host.h"
#include "kube.h"
#include "shardgroup.h"

struct ld_shardhost;
struct ld_watch_event;

/* Whether a shard's release may be written, as the consumer judges it. */
enum ld_shardhost_verdict {
    LD_SHARDHOST_RELEASE_NOW,   /* nothing holds it */
    LD_SHARDHOST_RELEASE_WAIT,  /* ask again by until_ms (or a wake-up) */
    LD_SHARDHOST_RELEASE_NEVER, /* never write it: the Lease expires by itself */
};

/* How long a shard's release may wait, for the consumer's judgement. */
struct ld_shardhost_bounds {
    /* The member election's term deadline: writes the shard's claim let
     * out may run, and hold its release, at most until then (no other
     * replica can have taken the shard before). INT64_MIN: over. */
    int64_t term_until_ms;
    /* When the shutdown began (the consumer's own holds for the exit
     * count from then); INT64_MIN when not stopping. */
    int64_t stopping_since_ms;
};

/* The consumer's part. Every member may be NULL (ctx too); each runs on
 * the host's thread. */
struct ld_shardhost_ops {
    void *ctx;
    /* Make what the consumer shows of the shards current (the claims, as
     * ld_shardgroup_claimed says them): the shard host asks before it
     * writes a release, so that nobody still reads a claim it has given
     * up, and once a pass, after the give-backs began. */
    void (*publish)(void *ctx, int64_t now_ms);
    /* Shard k's give-back began (draining: its claim has ended) or ended
     * (its release written, or given up, or the shard kept). */
    void (*on_drain)(void *ctx, uint32_t k, bool draining);
    /* True once the app has said it stopped working on shard k (it ends
     * the drain early); the consumer forgets it as it answers. */
    bool (*take_drained)(void *ctx, uint32_t k);
    /* Shard k's drain is over: may its release be written now? *until_ms:
     * for WAIT, when to ask again at the latest; *why: for NEVER, a static
     * reason for the log. NULL: always NOW. */
    enum ld_shardhost_verdict (*release_hold)(void *ctx, uint32_t k,
                                              const struct ld_shardhost_bounds *b,
                                              int64_t now_ms, int64_t *until_ms,
                                              const char **why);
    /* ld_shardhost_finish's wait ended on its wake fd: take the news (the
     * drained shards, the holds' fds). */
    void (*take_wake)(void *ctx);
};

struct ld_shardhost_config {
    struct ld_kube *kube;         /* borrowed; outlives the shard host */
    const struct ld_clock *clock; /* copied; NULL: the real clock */
    const char *namespace_;       /* copied (by the engines), as the rest */
    const char *group;            /* the group's name (its Leases' prefix) */
    const char *identity;
    const char *incarnation;  /* this process's (see election.h); borrowed */
    const char *const *names; /* NULL: n_shards numbered shards */
    uint32_t n_shards;
    const char *pod_uid;  /* NULL or "": the member Lease has no ownerReference */
    const char *pod_name; /* the Pod of pod_uid (in namespace_) */
    int64_t lease_duration_ms;
    int64_t renew_deadline_ms;
    int64_t retry_period_ms;
    bool release_on_exit;
    /* A shard given back stays unclaimed this long before its release is
     * written (less when take_drained says the app is done with it). */
    int64_t drain_ms;
    uint64_t seed;               /* the member election's jitter */
    int64_t call_timeout_ms;     /* bounds the member Lease's deletion at the exit */
    struct ld_shardhost_ops ops; /* copied */
};

/* A new shard host: the group (checked as ld_shardgroup_new checks it),
 * no election yet. Free with ld_shardhost_free; NULL with err set. */
struct ld_shardhost *ld_shardhost_new(const struct ld_shardhost_config *cfg,
                                      struct ld_errinfo *err);

/* Cancels what is in flight (no callbacks) and frees. NULL-safe; after the
 * host, or with the host not run again. */
void ld_shardhost_free(struct ld_shardhost *sh);

/* The host's label selector for the group's watch (borrowed). */
const char *ld_shardhost_selector(const struct ld_shardhost *sh);

/* The member election's configuration (its strings borrowed from sh):
 * release_on_exit false (the shard host releases it itself, after the
 * shards'), no hand-over to a preferred holder. */
void ld_shardhost_member_config(const struct ld_shardhost *sh,
                                struct ld_election_config *ec);

/* Binds sh to host, whose election member_index is the member Lease
 * (made from ld_shardhost_member_config). Before the host runs. */
void ld_shardhost_attach(struct ld_shardhost *sh, struct ld_host *host,
                         size_t member_index);

/* The host's callbacks, to be passed on by its owner: the member
 * election's publishes and events, and the host observer's watch events,
 * stream starts and after_pass (whose return is the host's: when to be
 * called again without news). */
void ld_shardhost_on_publish(struct ld_shardhost *sh, const struct ld_host_view *v,
                             int64_t now_ms);
void ld_shardhost_on_event(struct ld_shardhost *sh, size_t index,
                           const struct ld_event *ev);
void ld_shardhost_on_lease_event(struct ld_shardhost *sh, const struct ld_watch_event *ev,
                                 int64_t now_ms);
void ld_shardhost_on_watch_started(struct ld_shardhost *sh, bool from_current,
                                   int64_t now_ms);
int64_t ld_shardhost_after_pass(struct ld_shardhost *sh, int64_t now_ms);

/* The member election's release hold, for its owner's holds_release: the
 * member release frees every shard whose record names this replica, so it
 * waits while the consumer holds any shard's release (true), and must not
 * be written at all when the consumer gives one up (*never). It first has
 * the consumer publish the claims' end. Unbounded: the owner bounds it by
 * the member term, as host.h asks of every hold. */
bool ld_shardhost_member_holds_release(struct ld_shardhost *sh, int64_t now_ms,
                                       bool *never);

/* Has the consumer publish now (ops.publish), as the shard host does
 * itself; for an owner that must show the claims' state at once. */
void ld_shardhost_publish(struct ld_shardhost *sh, int64_t now_ms);

/* The same wiring as a host observer and member election ops, for an
 * owner with nothing of its own to add: ctx is sh. The member ops' hold
 * is ld_shardhost_member_holds_release, unbounded, and abandons the
 * member release when *never. */
struct ld_host_observer ld_shardhost_observer(struct ld_shardhost *sh);
struct ld_host_election_ops ld_shardhost_member_ops(struct ld_shardhost *sh);

/* The exit begins (before ld_host_shutdown): every claim ends now, each
 * shard Lease that names this replica starts its give-back (see the top),
 * what is in flight is abandoned. */
void ld_shardhost_shutdown(struct ld_shardhost *sh);

/* Once the host is done after a shutdown: waits for the shards' drains,
 * holds and releases (bounded by the drain or the renew deadline, plus
 * the call timeout), running the host's client; wake_fd (>= 0) ends a
 * wait early (take_wake consumes it). Then the member Lease's release and
 * deletion (blocking, bounded by the client's timeout). */
void ld_shardhost_finish(struct ld_shardhost *sh, int wake_fd);

/* ---- reading the state, between callbacks --------------------------- */

/* The group's engine (borrowed; owned by sh). */
const struct ld_shardgroup *ld_shardhost_group(const struct ld_shardhost *sh);
uint32_t ld_shardhost_count(const struct ld_shardhost *sh);
/* The live members, as ld_shardgroup_members says them. */
uint32_t ld_shardhost_members(struct ld_shardhost *sh, int64_t now_ms,
                              const char *const **members);

/* Shard k is reported unwritable here (its takes were refused). */
bool ld_shardhost_unwritable(const struct ld_shardhost *sh, uint32_t k);
/* Since when this replica has wanted shard k without owning it; INT64_MAX
 * when it does not. */
int64_t ld_shardhost_wanted_since(const struct ld_shardhost *sh, uint32_t k);

/* The member election as last published. */
struct ld_shardhost_member {
    bool observed;         /* its Lease has been read */
    bool live;             /* it led at its last publish */
    int64_t term_until_ms; /* election.h's term_until_ms */
};
struct ld_shardhost_member ld_shardhost_member(const struct ld_shardhost *sh);

/* Why this replica stepped out of the group (a shard assigned here stayed
 * unowned, an earlier member runs another shard set), while that lasts
 * (borrowed); NULL otherwise. */
const char *ld_shardhost_stuck(const struct ld_shardhost *sh, int64_t now_ms);

#endif
