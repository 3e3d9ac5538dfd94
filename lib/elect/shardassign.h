/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardassign: which live member should own each shard of a group. Every
 * replica runs this on what it observes (the sorted live members and the
 * holder of each shard Lease); it then takes the free shards assigned to
 * itself and gives back, by a graceful release, the ones assigned to
 * others. Pure function: no I/O, no clock, no randomness.
 *
 * The rule. With N shards and M live members, let q = N / M and
 * r = N % M, and rank the members newest first: by the time each joined
 * (its member Lease's acquireTime), latest first, equal times by name.
 *  1. Quotas: every member gets q; the r extra shards go to the newest r
 *     members. When there are fewer shards than members (q == 0) a live
 *     member that holds a shard keeps its one first, and only the extras
 *     left go to the newest others. Apart from that case quotas depend on
 *     N and the members only, never on who holds what.
 *  2. Keep: a shard's holder counts only if it is a live member. Each
 *     member keeps the shards it holds, lowest shard number first, up to
 *     its quota; the rest are free.
 *  3. Fill: the free shards, lowest number first, go to the members still
 *     below quota, newest first, each filled to its quota before the next.
 *
 * Why newest first. In a rolling update the members that leave next are
 * the old ones; the new ones stay. Shards that must move (a leaver's, the
 * extras) therefore go to the members least likely to hand them on again,
 * and with fewer shards than members a shard stays where it is until its
 * holder leaves. Together with the give-back delay of shardgroup.h (no
 * rebalance until the members have been the same for a while) a rolling
 * update moves each shard about once instead of about twice.
 *
 * Balanced. The quotas are q or q + 1 and add up to N; step 2 leaves every
 * member at or below its quota and step 3 tops each up, so every shard has
 * an owner and every member ends with exactly its quota: floor(N/M) or
 * ceil(N/M).
 *
 * Stable. Any assignment in which every member holds exactly its quota is a
 * fixed point: step 2 keeps everything and step 3 has nothing to do. (With
 * q == 0 the holders get the extras, so holding one shard is its quota.)
 * The output is one, so while membership does not change no shard changes
 * owner.
 *
 * Moves little. From a fixed point of M members:
 *  - one joins (q' = N / (M+1), r' = N % (M+1)); it is the newest. If
 *    q' == 0 the N holders keep their shards as the N extras: nothing
 *    moves. If 0 < q' < q, no quota can grow (q' + 1 <= q). If q' == q > 0
 *    then r' = r - q < r, and since the newcomer only pushes the others
 *    one place down the ranking, a member among the newest r' now was
 *    among the newest r before. So old members only give back, the
 *    newcomer is the only one below quota, and exactly its quota moves: at
 *    most ceil(N/(M+1)) shards, all to the newcomer.
 *  - one leaves or dies: no remaining quota shrinks (if q' == q then
 *    r' = r + q >= r, and a removal only moves members up the ranking;
 *    with q' == 0 the remaining holders keep theirs first), so nobody gives
 *    anything up and exactly the leaver's shards move.
 * While the hand-over runs (a shard given back is free until its new owner
 * takes it), the quotas stay put: members only give back above quota and
 * only take below it, so no shard changes owner twice. (With q == 0 a
 * member that takes its extra becomes a holder and keeps it as one.) The
 * contract allows one shard more than this in both cases; this rule does
 * not need it.
 *
 * Replicas with different views. The output depends only on the inputs:
 * equal views give equal targets on every replica. For a while after a
 * join or a death, replicas disagree on the members (one has read the new
 * member Lease, another not yet). A lagging replica computes the old quotas,
 * and at the old fixed point it holds exactly its old quota, so it keeps
 * what it has and is assigned nothing free (free shards go to members below
 * quota): it takes and gives back nothing until it sees the change. That
 * is why quotas go by the members and not by holdings: ranked by holdings,
 * a lagging replica would see others give shards back, rise in the ranking,
 * win a larger quota and take a shard it must return later. (The q == 0
 * exception keeps this: on a join nothing moves at all, and a leaver's
 * shard goes to the same newest non-holder in both views unless the old
 * view gives it back to the leaver, which takes nothing.) When changes
 * overlap (a second one before the first hand-over finished) a shard may
 * move twice, but never to two owners at once: that is the shard protocol's
 * business (shardgroup.h), not the assignment's; every change of a shard's
 * owner is a compare-and-swap of its Lease. Once the views agree, every replica computes
 * the same targets, holders move monotonically toward their quotas, and the group settles
 * on one fixed point.
 *
 * Cost: O(N log M + M^2) time (a binary search per shard, an insertion
 * sort of the members that is O(M) once they are in order), one
 * allocation of 2M counters, freed before returning.
 */
#ifndef LEADERD_SHARDASSIGN_H
#define LEADERD_SHARDASSIGN_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

/* A target for no member (only when there are no members). */
#define LD_SHARD_NOBODY UINT32_MAX

/* Computes the target owner of each of n_shards shards.
 *   owners[s]: the observed holder of shard s, or NULL or "" when it is free
 *              or expired; owners itself may be NULL (all free). Borrowed.
 *   members:   the n_members live member identities, non-empty, strictly
 *              ascending by strcmp (sorted, no duplicates). Borrowed.
 *   joined:    per member, when it joined (any clock every replica reads
 *              alike: the member Lease's acquireTime); larger is newer.
 *              NULL: all alike (then the ranking is by name). Borrowed.
 *   target:    caller-owned array of n_shards; on LD_OK target[s] is the
 *              index into members of shard s's owner (LD_SHARD_NOBODY for
 *              every shard when n_members == 0).
 * Returns LD_OK, LD_EINVAL (members not sorted and distinct, a NULL array
 * that is needed) with target untouched, or LD_ENOMEM with target
 * untouched. */
enum ld_err ld_shardassign(uint32_t n_shards, const char *const *owners,
                           uint32_t n_members, const char *const *members,
                           const int64_t *joined, uint32_t *target);

#endif
