/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_shardrange: KEP-5866 ranges against an independent oracle (128-bit
 * long division, one bit at a time), at every boundary for N = 1, 2, 3, 7,
 * 1024 and at random shards of random N up to 2^32 - 1; every hash in
 * exactly one range; the strings exactly as the contract and apimachinery
 * write them.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "shardrange.h"
#include "support/run_suite.h"

/* ck_assert records a mark point (a write to Check's pipe) even when it
 * holds; the checks inside the loops call into Check only when they fail. */
#define EXPECT(cond)                                                                     \
    do {                                                                                 \
        if (!(cond))                                                                     \
            ck_abort_msg("expected %s", #cond);                                          \
    } while (0)
#define EXPECT_EQ(a, b)                                                                  \
    do {                                                                                 \
        unsigned long long a_ = (a), b_ = (b);                                           \
        if (a_ != b_)                                                                    \
            ck_abort_msg("expected %s == %s: %#llx != %#llx", #a, #b, a_, b_);           \
    } while (0)

/* floor(i * 2^64 / n) for i < n by schoolbook division of the 128-bit
 * numerator i:0, so it shares nothing with the module's q/r method. */
static uint64_t oracle_start(uint64_t i, uint64_t n)
{
    uint64_t rem = 0, quo = 0;

    for (int bit = 127; bit >= 0; bit--) {
        uint64_t b = bit >= 64 ? (i >> (bit - 64)) & 1 : 0;
        /* rem < n <= 2^32, so doubling it cannot overflow. */
        rem = rem * 2 + b;
        if (rem >= n) {
            rem -= n;
            if (bit < 64)
                quo |= UINT64_C(1) << bit;
        }
    }
    return quo;
}

/* splitmix64: a fixed-seed source of test values. */
static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void check_shard(uint32_t i, uint32_t n)
{
    struct ld_shard_range r;
    EXPECT(ld_shardrange_of(i, n, &r));
    EXPECT_EQ(r.start, oracle_start(i, n));
    if (i + 1 == n)
        EXPECT_EQ(r.last, UINT64_MAX);
    else
        EXPECT_EQ(r.last, oracle_start(i + 1, n) - 1);
    EXPECT(r.start <= r.last);
    /* Both edges and both neighbours of each edge. */
    EXPECT_EQ(ld_shardrange_find(r.start, n), i);
    EXPECT_EQ(ld_shardrange_find(r.last, n), i);
    if (r.start > 0)
        EXPECT_EQ(ld_shardrange_find(r.start - 1, n), i - 1);
    if (r.last < UINT64_MAX)
        EXPECT_EQ(ld_shardrange_find(r.last + 1, n), i + 1);
}

START_TEST(every_boundary_of_small_and_large_n)
{
    static const uint32_t ns[] = {1, 2, 3, 7, 1024};
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
        uint32_t n = ns[k];
        uint64_t next = 0, smallest = UINT64_MAX, largest = 0;
        for (uint32_t i = 0; i < n; i++) {
            struct ld_shard_range r;
            check_shard(i, n);
            EXPECT(ld_shardrange_of(i, n, &r));
            /* Contiguous from 0 to 2^64 - 1, sizes within one of each other. */
            EXPECT_EQ(r.start, next);
            next = r.last + 1;
            uint64_t size_minus_1 = r.last - r.start;
            smallest = size_minus_1 < smallest ? size_minus_1 : smallest;
            largest = size_minus_1 > largest ? size_minus_1 : largest;
            if (i + 1 == n)
                EXPECT_EQ(r.last, UINT64_MAX);
        }
        EXPECT(largest - smallest <= 1);
    }
}
END_TEST

START_TEST(known_split_points)
{
    struct ld_shard_range r;
    ck_assert(ld_shardrange_of(1, 2, &r));
    ck_assert_uint_eq(r.start, UINT64_C(0x8000000000000000));
    ck_assert(ld_shardrange_of(3, 4, &r));
    ck_assert_uint_eq(r.start, UINT64_C(0xc000000000000000));
    ck_assert(ld_shardrange_of(1, 3, &r));
    ck_assert_uint_eq(r.start, UINT64_C(0x5555555555555555));
    ck_assert_uint_eq(r.last, UINT64_C(0xaaaaaaaaaaaaaaa9));
    ck_assert(ld_shardrange_of(3, 7, &r));
    ck_assert_uint_eq(r.start, UINT64_C(0x6db6db6db6db6db6));
    ck_assert(ld_shardrange_of(1, 1024, &r));
    ck_assert_uint_eq(r.start, UINT64_C(0x0040000000000000));
    ck_assert(ld_shardrange_of(0, 1, &r));
    ck_assert_uint_eq(r.start, 0);
    ck_assert_uint_eq(r.last, UINT64_MAX);
}
END_TEST

START_TEST(random_shards_of_random_n)
{
    uint64_t seed = 5866;
    for (int k = 0; k < 3000; k++) {
        uint32_t n = (uint32_t)next_rand(&seed);
        if (k % 3 == 0)
            n = UINT32_MAX - (uint32_t)(next_rand(&seed) % 4);
        if (n == 0)
            n = 1;
        check_shard((uint32_t)(next_rand(&seed) % n), n);
        check_shard(n - 1, n);
    }
}
END_TEST

START_TEST(every_hash_in_exactly_one_range)
{
    static const uint32_t ns[] = {1, 2, 3, 7, 1024};
    uint64_t seed = 42;
    for (int k = 0; k < 300; k++) {
        char key[40];
        snprintf(key, sizeof(key), "uid-%016llx", (unsigned long long)next_rand(&seed));
        uint64_t h = ld_fnv1a64(key, strlen(key));
        for (size_t x = 0; x < sizeof(ns) / sizeof(ns[0]); x++) {
            uint32_t n = ns[x], holders = 0, holder = 0;
            for (uint32_t i = 0; i < n; i++) {
                struct ld_shard_range r;
                EXPECT(ld_shardrange_of(i, n, &r));
                if (r.start <= h && h <= r.last) {
                    holders++;
                    holder = i;
                }
            }
            EXPECT_EQ(holders, 1);
            EXPECT_EQ(ld_shardrange_find(h, n), holder);
            EXPECT_EQ(ld_shardrange_for_key(key, strlen(key), n), holder);
        }
    }
}
END_TEST

START_TEST(keys_with_known_hashes)
{
    /* FNV-1a 64 vectors and their shards, computed independently. */
    ck_assert_uint_eq(ld_fnv1a64("", 0), UINT64_C(0xcbf29ce484222325));
    ck_assert_uint_eq(ld_fnv1a64("a", 1), UINT64_C(0xaf63dc4c8601ec8c));
    ck_assert_uint_eq(ld_fnv1a64("foobar", 6), UINT64_C(0x85944171f73967e8));
    ck_assert_uint_eq(ld_shardrange_for_key("", 0, 7), 5);
    ck_assert_uint_eq(ld_shardrange_for_key("a", 1, 1024), 701);
    ck_assert_uint_eq(ld_shardrange_for_key("foobar", 6, 3), 1);
    const char *uid = "0b5e3b8e-7d4a-4bd8-9a43-5d3c1c0f7a11";
    ck_assert_uint_eq(ld_shardrange_for_key(uid, strlen(uid), 2), 0);
    ck_assert_uint_eq(ld_shardrange_for_key(uid, strlen(uid), 1024), 348);
}
END_TEST

START_TEST(strings_as_the_contract_writes_them)
{
    struct ld_shard_range r;
    char start[LD_SHARDRANGE_HEX_SIZE], end[LD_SHARDRANGE_HEX_SIZE];
    char sel[LD_SHARDRANGE_SELECTOR_SIZE];

    ck_assert(ld_shardrange_of(0, 3, &r));
    ld_shardrange_bounds(&r, start, end);
    ck_assert_str_eq(start, "0x0000000000000000");
    ck_assert_str_eq(end, "0x5555555555555555");
    ld_shardrange_selector(&r, sel);
    ck_assert_str_eq(sel, "shardRange(object.metadata.uid, '0x0000000000000000', "
                          "'0x5555555555555555')");

    ck_assert(ld_shardrange_of(2, 3, &r));
    ld_shardrange_bounds(&r, start, end);
    ck_assert_str_eq(start, "0xaaaaaaaaaaaaaaaa");
    ck_assert_str_eq(end, "0x10000000000000000");

    ck_assert(ld_shardrange_of(0, 1, &r));
    ld_shardrange_selector(&r, sel);
    ck_assert_str_eq(sel, "shardRange(object.metadata.uid, '0x0000000000000000', "
                          "'0x10000000000000000')");

    ck_assert(ld_shardrange_of(1, 2, &r));
    ld_shardrange_bounds(&r, NULL, end);
    ck_assert_str_eq(end, "0x10000000000000000");
    ld_shardrange_bounds(&r, start, NULL);
    ck_assert_str_eq(start, "0x8000000000000000");

    ld_shardrange_hex(UINT64_C(0xABCDEF0123456789), start);
    ck_assert_str_eq(start, "0xabcdef0123456789");
    ld_shardrange_hex(0x1f, start);
    ck_assert_str_eq(start, "0x000000000000001f");

    /* The longest selector fits its buffer with room to spare. */
    ck_assert(ld_shardrange_of(0, 1, &r));
    ld_shardrange_selector(&r, sel);
    ck_assert_uint_lt(strlen(sel), LD_SHARDRANGE_SELECTOR_SIZE);
}
END_TEST

START_TEST(out_of_range_arguments)
{
    struct ld_shard_range r = {7, 9};
    ck_assert(!ld_shardrange_of(0, 0, &r));
    ck_assert(!ld_shardrange_of(3, 3, &r));
    ck_assert(!ld_shardrange_of(UINT32_MAX, 5, &r));
    ck_assert_uint_eq(r.start, 7);
    ck_assert_uint_eq(r.last, 9);
    ck_assert_uint_eq(ld_shardrange_find(12345, 0), 0);
    ck_assert_uint_eq(ld_shardrange_find(UINT64_MAX, 1), 0);
    ck_assert_uint_eq(ld_shardrange_find(UINT64_MAX, UINT32_MAX), UINT32_MAX - 1);
    ck_assert_uint_eq(ld_shardrange_find(0, UINT32_MAX), 0);
}
END_TEST

static Suite *shardrange_suite(void)
{
    Suite *s = suite_create("shardrange");
    TCase *tc = tcase_create("ranges");
    tcase_add_test(tc, every_boundary_of_small_and_large_n);
    tcase_add_test(tc, known_split_points);
    tcase_add_test(tc, random_shards_of_random_n);
    tcase_add_test(tc, every_hash_in_exactly_one_range);
    tcase_add_test(tc, keys_with_known_hashes);
    tcase_add_test(tc, strings_as_the_contract_writes_them);
    tcase_add_test(tc, out_of_range_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(shardrange_suite());
}
