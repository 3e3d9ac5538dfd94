/*
 * shardassign: quotas by name order, keep what fits, fill the rest.
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

enum ld_err ld_shardassign(uint32_t n_shards, const char *const *owners,
                           uint32_t n_members, const char *const *members,
                           uint32_t *target)
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
    room = calloc(n_members, sizeof(*room));
    if (!room)
        return LD_ENOMEM;

    for (uint32_t j = 0; j < n_members; j++)
        room[j] = n_shards / n_members + (j < n_shards % n_members);

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
     * shards left; they go, lowest first, to members in name order, each
     * filled to its quota before the next. The j bound is only a guard. */
    uint32_t j = 0;
    for (uint32_t s = 0; s < n_shards; s++) {
        if (target[s] != LD_SHARD_NOBODY)
            continue;
        while (j < n_members && room[j] == 0)
            j++;
        if (j == n_members)
            break;
        target[s] = j;
        room[j]--;
    }

    free(room);
    return LD_OK;
}
