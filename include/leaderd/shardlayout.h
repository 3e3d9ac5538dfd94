/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardlayout: the part of a shard group that never changes once the group
 * is made: its name, and each shard's ID, Lease name and (numbered shards)
 * hash range. The group builds it once and keeps its names there
 * (shardgroup.h); whoever renders shards (the daemon's HTTP threads) takes
 * a reference and reads it as plain data, without the group and without a
 * lock, for as long as it holds the reference.
 *
 * Immutable after ld_shardlayout_new, so every reader is thread-safe;
 * references are counted atomically. Pure: no I/O, no clock.
 *
 * Ownership: the layout copies everything it is given; its strings are
 * valid while the caller holds a reference.
 */
#ifndef LEADERD_SHARDLAYOUT_H
#define LEADERD_SHARDLAYOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardrange.h"

/* One shard, in the group's order. */
struct ld_shard_names {
    const char *id;    /* "7", or the shard's name */
    const char *lease; /* its Lease: "NAME-ID" */
    /* Numbered shards: shard i of n's hash range (shardrange.h); zero for
     * named shards, which have none. */
    struct ld_shard_range range;
};

struct ld_shardlayout {
    atomic_int refs;  /* private: see ld_shardlayout_ref */
    const char *name; /* the group's (its --lease-name) */
    bool numbered;    /* shards 0..n_shards-1, with ranges; else named */
    uint32_t n_shards;
    const struct ld_shard_names *shards; /* n_shards entries */
};

/* The layout of the group name with n_shards shards: names NULL for
 * numbered shards "0".."n_shards-1", else n_shards IDs in the order given.
 * Shard ID's Lease is "NAME-ID". Nothing is validated here
 * (ld_shardgroup_new checks every name); 1 <= n_shards. Returns a new
 * layout holding one reference (ld_shardlayout_unref), or NULL when memory
 * ran out. */
struct ld_shardlayout *ld_shardlayout_new(const char *name, const char *const *names,
                                          uint32_t n_shards);

/* Another reference to l (NULL-safe: returns NULL). */
struct ld_shardlayout *ld_shardlayout_ref(struct ld_shardlayout *l);
/* Drops a reference; the last one frees l. NULL-safe. */
void ld_shardlayout_unref(struct ld_shardlayout *l);

/* The shard whose ID is id exactly ("07" is no numbered shard); false when
 * there is none or id is NULL (*s untouched). */
bool ld_shardlayout_find(const struct ld_shardlayout *l, const char *id, uint32_t *s);

/* For numbered shards: the shard whose range holds FNV-1a64 of the key's
 * len bytes, and that hash (either out may be NULL), in constant time.
 * False for named shards (the outs are left alone). */
bool ld_shardlayout_shard_of_key(const struct ld_shardlayout *l, const void *key,
                                 size_t len, uint32_t *s, uint64_t *hash);

#endif
