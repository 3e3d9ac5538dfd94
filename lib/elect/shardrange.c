/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardrange: KEP-5866 ranges with 64-bit arithmetic only.
 *
 * With 2^64 = q * n + r (0 <= r < n), floor(i * 2^64 / n) is
 * i * q + floor(i * r / n): both terms fit in 64 bits because i < n <= 2^32.
 * The shard of a hash h is the largest i with floor(i * 2^64 / n) <= h,
 * i.e. with i * 2^64 < (h + 1) * n, which is the high word of h * n + n - 1.
 */
#include "shardrange.h"

#include <inttypes.h>
#include <stdio.h>

#include "hash.h"

/* floor(i * 2^64 / n) for 1 <= i < n (so n >= 2 and q below fits). */
static uint64_t range_start(uint32_t i, uint32_t n)
{
    uint64_t q = UINT64_MAX / n;
    uint64_t r = UINT64_MAX % n + 1; /* 2^64 = q * n + r, 1 <= r <= n */

    if (r == n) {
        q++;
        r = 0;
    }
    return (uint64_t)i * q + (uint64_t)i * r / n;
}

bool ld_shardrange_of(uint32_t i, uint32_t n, struct ld_shard_range *out)
{
    if (n == 0 || i >= n)
        return false;
    out->start = i == 0 ? 0 : range_start(i, n);
    out->last = i + 1 == n ? UINT64_MAX : range_start(i + 1, n) - 1;
    return true;
}

uint32_t ld_shardrange_find(uint64_t hash, uint32_t n)
{
    if (n == 0)
        return 0;
    /* hash * n as hi:lo from two 32x32 -> 64 products, then + (n - 1). */
    uint64_t p_hi = (hash >> 32) * n;
    uint64_t p_lo = (hash & UINT32_MAX) * n;
    uint64_t lo = p_lo + (p_hi << 32);
    uint64_t hi = (p_hi >> 32) + (lo < p_lo);
    uint64_t sum = lo + (n - 1);

    hi += sum < lo;
    return (uint32_t)hi;
}

uint32_t ld_shardrange_for_key(const void *key, size_t len, uint32_t n)
{
    return ld_shardrange_find(ld_fnv1a64(key, len), n);
}

void ld_shardrange_hex(uint64_t v, char out[LD_SHARDRANGE_HEX_SIZE])
{
    snprintf(out, LD_SHARDRANGE_HEX_SIZE, "0x%016" PRIx64, v);
}

void ld_shardrange_bounds(const struct ld_shard_range *r,
                          char start[LD_SHARDRANGE_HEX_SIZE],
                          char end[LD_SHARDRANGE_HEX_SIZE])
{
    if (start)
        ld_shardrange_hex(r->start, start);
    if (!end)
        return;
    if (r->last == UINT64_MAX)
        snprintf(end, LD_SHARDRANGE_HEX_SIZE, "0x10000000000000000");
    else
        ld_shardrange_hex(r->last + 1, end);
}

void ld_shardrange_selector(const struct ld_shard_range *r,
                            char out[LD_SHARDRANGE_SELECTOR_SIZE])
{
    char start[LD_SHARDRANGE_HEX_SIZE];
    char end[LD_SHARDRANGE_HEX_SIZE];

    ld_shardrange_bounds(r, start, end);
    snprintf(out, LD_SHARDRANGE_SELECTOR_SIZE,
             "shardRange(object.metadata.uid, '%s', '%s')", start, end);
}
