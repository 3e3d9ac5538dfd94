/*
 * shardassign: which live member should own each shard of a group. Every
 * replica runs this on what it observes (the sorted live members and the
 * holder of each shard Lease); it then takes the free shards assigned to
 * itself and gives back, by a graceful release, the ones assigned to
 * others. Pure function: no I/O, no clock, no randomness.
 *
 * The rule. With N shards and M live members in name order, let
 * q = N / M and r = N % M.
 *  1. Quotas: the first r members by name get q + 1, the others q. They
 *     depend on N and the member list only, never on who holds what.
 *  2. Keep: a shard's holder counts only if it is a live member. Each
 *     member keeps the shards it holds, lowest shard number first, up to
 *     its quota; the rest are free.
 *  3. Fill: the free shards, lowest number first, go to the members still
 *     below quota, in name order, each filled to its quota before the next.
 *
 * Balanced. The quotas are q or q + 1 and add up to N; step 2 leaves every
 * member at or below its quota and step 3 tops each up, so every shard has
 * an owner and every member ends with exactly its quota: floor(N/M) or
 * ceil(N/M).
 *
 * Stable. Any assignment in which every member holds exactly its quota is a
 * fixed point: step 2 keeps everything and step 3 has nothing to do. The
 * output is one, so while membership does not change no shard changes
 * owner.
 *
 * Moves little. From a fixed point of M members:
 *  - one joins (quotas q' = N / (M+1), r' = N % (M+1)): no old member's
 *    quota grows. If q' < q that is clear; if q' == q then r' = r - q <= r,
 *    and since the newcomer can only push a member later in name order, a
 *    member in the first r' now was in the first r before. So old members
 *    only give back, the newcomer is the only one below quota, and exactly
 *    its quota moves: at most ceil(N/(M+1)) shards, all to the newcomer.
 *  - one leaves or dies: no remaining quota shrinks (if q' == q then
 *    r' = r + q >= r, and a removal only moves members earlier), so nobody
 *    gives anything up and exactly the leaver's shards move.
 * While the hand-over runs (a shard given back is free until its new owner
 * takes it), the quotas stay put: members only give back above quota and
 * only take below it, so no shard changes owner twice. The contract allows
 * one shard more than this in both cases; this rule does not need it.
 *
 * Replicas with different views. The output depends only on the inputs:
 * equal views give equal targets on every replica. For a while after a
 * join or a death, replicas disagree on the members (one has read the new
 * member Lease, another not yet). A lagging replica computes the old quotas,
 * and at the old fixed point it holds exactly its old quota, so it keeps
 * what it has and is assigned nothing free (free shards go to members below
 * quota): it takes and gives back nothing until it sees the change. That
 * is why quotas go by name and not by holdings: ranked by holdings, a
 * lagging replica would see others give shards back, rise in the ranking,
 * win a larger quota and take a shard it must return later. When changes
 * overlap (a second one before the first hand-over finished) a shard may
 * move twice, but never to two owners at once: that is the shard protocol's
 * business (shardgroup.h), not the assignment's; every change of a shard's
 * owner is a compare-and-swap of its Lease. Once the views agree, every replica computes
 * the same targets, holders move monotonically toward their quotas, and the group settles
 * on one fixed point.
 *
 * Cost: O(N log M + M) time (a binary search per shard), one allocation of
 * M counters, freed before returning.
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
 *   target:    caller-owned array of n_shards; on LD_OK target[s] is the
 *              index into members of shard s's owner (LD_SHARD_NOBODY for
 *              every shard when n_members == 0).
 * Returns LD_OK, LD_EINVAL (members not sorted and distinct, a NULL array
 * that is needed) with target untouched, or LD_ENOMEM with target
 * untouched. */
enum ld_err ld_shardassign(uint32_t n_shards, const char *const *owners,
                           uint32_t n_members, const char *const *members,
                           uint32_t *target);

#endif
