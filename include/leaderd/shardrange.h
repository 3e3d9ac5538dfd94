/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardrange: the hash range of each numbered shard, as Kubernetes'
 * server-side sharded list/watch (KEP-5866) defines it. The space is the
 * 64-bit FNV-1a hash of a key (lib/base/hash.h); shard i of n covers the
 * half-open range [floor(i * 2^64 / n), floor((i + 1) * 2^64 / n)), so the n
 * ranges are disjoint, cover every hash, and differ in size by at most one.
 * Bounds are written as apimachinery writes them: "0x" and 16 lowercase hex
 * digits, except the end of the last range, 2^64, which is
 * "0x10000000000000000".
 *
 * All arithmetic is exact in 64-bit pieces (no 128-bit type), for any n
 * from 1 to UINT32_MAX. Pure functions: no I/O, no clock, no allocation.
 */
#ifndef LEADERD_SHARDRANGE_H
#define LEADERD_SHARDRANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One shard's range. It is never empty (n <= 2^32 shards over 2^64 hashes),
 * so it is kept as its first and last hash; the KEP's exclusive end is
 * last + 1, which is 2^64 when last == UINT64_MAX. */
struct ld_shard_range {
    uint64_t start; /* first hash in the range */
    uint64_t last;  /* last hash in the range (inclusive) */
};

/* "0x" + up to 17 hex digits + NUL. */
#define LD_SHARDRANGE_HEX_SIZE 20
/* shardRange(object.metadata.uid, '<start>', '<end>') + NUL. */
#define LD_SHARDRANGE_SELECTOR_SIZE 80

/* Fills *out with the range of shard i of n. Returns false (and leaves *out
 * alone) unless 1 <= n and i < n. */
bool ld_shardrange_of(uint32_t i, uint32_t n, struct ld_shard_range *out);

/* The shard (0..n-1) whose range of n holds hash; n must be >= 1 (0 gives
 * 0). Exact at every boundary: ld_shardrange_of(result, n) contains hash. */
uint32_t ld_shardrange_find(uint64_t hash, uint32_t n);

/* The shard of n for a key: ld_shardrange_find(FNV-1a64 of its len bytes). */
uint32_t ld_shardrange_for_key(const void *key, size_t len, uint32_t n);

/* Writes v as "0x" + 16 lowercase hex digits into out (the form of a range
 * start and of a key's "hash"). */
void ld_shardrange_hex(uint64_t v, char out[LD_SHARDRANGE_HEX_SIZE]);

/* Writes the range's start and exclusive end in the KEP's form into the
 * caller's buffers (either may be NULL to skip it). */
void ld_shardrange_bounds(const struct ld_shard_range *r,
                          char start[LD_SHARDRANGE_HEX_SIZE],
                          char end[LD_SHARDRANGE_HEX_SIZE]);

/* Writes the KEP-5866 selector for the range over object.metadata.uid,
 * e.g. "shardRange(object.metadata.uid, '0x0000000000000000',
 * '0x8000000000000000')", into the caller's buffer. */
void ld_shardrange_selector(const struct ld_shard_range *r,
                            char out[LD_SHARDRANGE_SELECTOR_SIZE]);

#endif
