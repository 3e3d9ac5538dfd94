/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardassign: quotas that favour the newest members, holders kept when
 * shards are fewer than members, keep what fits, fill the rest.
 * See shardassign.h for the rule and why it has the properties it has.
 */
#include "shardassign.h"

#include <stdlib.h>
#include <string.h>

static int by_name(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

static bool members_valid(const char *const *members, uint32_t n_members)
{
    for (uint32_t j = 0; j < n_members; j++) {
        if (!members[j] || !members[j][0])
            return false;
        if (j > 0 && strcmp(members[j - 1], members[j]) >= 0)
            return false;
    }
    return true;
}

/* The live member index of an owner, or LD_SHARD_NOBODY. */
static uint32_t member_of(const char *owner, const char *const *members,
                          uint32_t n_members)
{
    if (!owner || !owner[0])
        return LD_SHARD_NOBODY;
    const char *const *hit =
        bsearch(owner, members, n_members, sizeof(*members), by_name);
    return hit ? (uint32_t)(hit - members) : LD_SHARD_NOBODY;
}

/* Preference order: the newest member first (the largest joined), equal
 * stamps by name. Members are in name order, so an insertion sort by
 * stamp that keeps equal ones in place gives exactly that. M is small and
 * the order is nearly sorted after the first assignment of a group. */
static void newest_first(uint32_t *order, uint32_t n_members, const int64_t *joined)
{
    for (uint32_t j = 0; j < n_members; j++) {
        uint32_t k = j;
        while (joined && k > 0 && joined[order[k - 1]] < joined[j]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = j;
    }
}

/* Quotas: q each; the r extra shards go, when there are fewer shards than
 * members, first to the members holding one, then to the newest others. */
static void set_quotas(uint32_t *room, const uint32_t *order, uint32_t n_shards,
                       const char *const *owners, uint32_t n_members,
                       const char *const *members)
{
    uint32_t q = n_shards / n_members, extra = n_shards % n_members;
    for (uint32_t j = 0; j < n_members; j++)
        room[j] = q;
    for (uint32_t s = 0; q == 0 && owners && s < n_shards && extra > 0; s++) {
        uint32_t j = member_of(owners[s], members, n_members);
        if (j != LD_SHARD_NOBODY && room[j] == 0) {
            room[j] = 1;
            extra--;
        }
    }
    for (uint32_t k = 0; k < n_members && extra > 0; k++) {
        if (room[order[k]] == q) {
            room[order[k]]++;
            extra--;
        }
    }
}

enum ld_err ld_shardassign(uint32_t n_shards, const char *const *owners,
                           uint32_t n_members, const char *const *members,
                           const int64_t *joined, uint32_t *target)
{
    uint32_t *room = NULL; /* per member: quota not yet used */

    if ((n_shards > 0 && !target) || (n_members > 0 && !members) ||
        !members_valid(members, n_members))
        return LD_EINVAL;
    if (n_members == 0) {
        for (uint32_t s = 0; s < n_shards; s++)
            target[s] = LD_SHARD_NOBODY;
        return LD_OK;
    }
    room = calloc(2 * (size_t)n_members, sizeof(*room));
    if (!room)
        return LD_ENOMEM;
    uint32_t *order = room + n_members;
    newest_first(order, n_members, joined);
    set_quotas(room, order, n_shards, owners, n_members, members);

    /* Keep: each live owner keeps its lowest-numbered shards up to its
     * quota; target[] marks the rest free. */
    for (uint32_t s = 0; s < n_shards; s++) {
        uint32_t j = member_of(owners ? owners[s] : NULL, members, n_members);
        if (j != LD_SHARD_NOBODY && room[j] > 0) {
            room[j]--;
            target[s] = j;
        } else {
            target[s] = LD_SHARD_NOBODY;
        }
    }

    /* Fill: the quotas add up to n_shards, so the room left equals the
     * shards left; they go, lowest first, to the members in preference
     * order, each filled to its quota before the next. The k bound is only
     * a guard. */
    uint32_t k = 0;
    for (uint32_t s = 0; s < n_shards; s++) {
        if (target[s] != LD_SHARD_NOBODY)
            continue;
        while (k < n_members && room[order[k]] == 0)
            k++;
        if (k == n_members)
            break;
        target[s] = order[k];
        room[order[k]]--;
    }

    free(room);
    return LD_OK;
}
