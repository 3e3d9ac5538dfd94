/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shard_hooks: the hooks (hook.h) bound to each shard of shard mode, with
 * --events each shard's own Event hook among them. Each shard's hooks are
 * fed that shard's claim and judged before its release is written
 * (release_hold.h); all of them together speak for the member Lease,
 * whose release frees every shard at once. The hooks' own fds are kept in
 * one epoll set for the exit's wait. The shell's thread only.
 */
#ifndef LEADERD_SHARD_HOOKS_H
#define LEADERD_SHARD_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include "election.h"
#include "err.h"
#include "hook.h"
#include "hook_events.h"
#include "release_hold.h"
#include "shardgroup.h"

struct ld_shard_hooks;

/* Room for the hooks of n_shards shards, none bound yet; the hooks'
 * claims rest on the election member_index (the member Lease). A new
 * object (free with ld_shard_hooks_free), or NULL when out of memory. */
struct ld_shard_hooks *ld_shard_hooks_new(uint32_t n_shards, size_t member_index);

/* Cancels the Event hooks' calls in flight and frees. NULL-safe. */
void ld_shard_hooks_free(struct ld_shard_hooks *hk);

/* Binds hook (copied; its ctx borrowed, outliving hk) to shard k;
 * hook->election is not read. LD_EINVAL for a shard out of range,
 * LD_ENOMEM. */
enum ld_err ld_shard_hooks_add(struct ld_shard_hooks *hk, uint32_t k,
                               const struct ld_hook *hook, struct ld_errinfo *err);

/* --events: an Event hook for every shard of group, on the calls of base
 * (copied; its strings borrowed) about that shard's Lease. Once. */
enum ld_err ld_shard_hooks_add_events(struct ld_shard_hooks *hk,
                                      const struct ld_hook_events_config *base,
                                      const struct ld_shardgroup *group,
                                      struct ld_errinfo *err);

/* Shard k's claim (st borrowed for the call) to its hooks. A hook's wish to
 * end the daemon is no shard's business: ignored. */
void ld_shard_hooks_feed(struct ld_shard_hooks *hk, uint32_t k,
                         const struct ld_election_status *st, int64_t now_ms);

/* The earliest wake any hook asks for; INT64_MAX for none. */
int64_t ld_shard_hooks_next_wake(const struct ld_shard_hooks *hk, int64_t now_ms);

/* Every hook's take_wake (each consumes its fd's news); true when one of
 * them had news. */
bool ld_shard_hooks_take_wake(struct ld_shard_hooks *hk);

/* Shard k's release, judged by its hooks (ld_release_hold_judge). */
struct ld_release_hold ld_shard_hooks_judge(const struct ld_shard_hooks *hk, uint32_t k,
                                            int64_t term_until_ms,
                                            int64_t courtesy_until_ms, int64_t now_ms);

/* True when a hook of any shard forbids its release: then the member
 * Lease's release, which frees them all, must not be written either. */
bool ld_shard_hooks_forbid_release(const struct ld_shard_hooks *hk, int64_t now_ms);

/* fd (borrowed) is a hook's own fd: watched, beside base_fd (borrowed, the
 * drain channel's), by the exit's wait. LD_ESYS when it cannot be. */
enum ld_err ld_shard_hooks_add_wake_fd(struct ld_shard_hooks *hk, int fd, int base_fd,
                                       struct ld_errinfo *err);

/* What the exit's wait waits on: the epoll set of the hooks' fds and
 * base_fd, or base_fd alone when no hook brought an fd (borrowed). */
int ld_shard_hooks_wait_fd(const struct ld_shard_hooks *hk, int base_fd);

#endif
