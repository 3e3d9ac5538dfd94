/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/shardlayout: a layout names numbered and named shards
 * and their Leases, finds a shard by exact ID, gives numbered shards the
 * ranges of shardrange.h and finds a key's shard among them, and outlives
 * the group that built it for as long as a reference is held.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "shardgroup.h"
#include "shardlayout.h"
#include "shardrange.h"
#include "support/run_suite.h"

START_TEST(numbered_names)
{
    struct ld_shardlayout *l = ld_shardlayout_new("grp", NULL, 12);
    ck_assert_ptr_nonnull(l);
    ck_assert_str_eq(l->name, "grp");
    ck_assert_uint_eq(l->n_shards, 12);
    ck_assert(l->numbered);
    ck_assert_str_eq(l->shards[0].id, "0");
    ck_assert_str_eq(l->shards[11].id, "11");
    ck_assert_str_eq(l->shards[0].lease, "grp-0");
    ck_assert_str_eq(l->shards[11].lease, "grp-11");

    uint32_t s = 99;
    ck_assert(ld_shardlayout_find(l, "11", &s));
    ck_assert_uint_eq(s, 11);
    s = 99;
    ck_assert(!ld_shardlayout_find(l, "011", &s));
    ck_assert(!ld_shardlayout_find(l, "12", &s));
    ck_assert(!ld_shardlayout_find(l, "", &s));
    ck_assert(!ld_shardlayout_find(l, NULL, &s));
    ck_assert_uint_eq(s, 99);
    ld_shardlayout_unref(l);
}
END_TEST

START_TEST(named_names)
{
    char names[2][16];
    snprintf(names[0], sizeof(names[0]), "alpha");
    snprintf(names[1], sizeof(names[1]), "beta");
    const char *const ptrs[] = {names[0], names[1]};
    struct ld_shardlayout *l = ld_shardlayout_new("grp", ptrs, 2);
    ck_assert_ptr_nonnull(l);
    /* The caller's strings change: the layout keeps its copies. */
    snprintf(names[0], sizeof(names[0]), "zzz");
    ck_assert(!l->numbered);
    ck_assert_str_eq(l->shards[0].id, "alpha");
    ck_assert_str_eq(l->shards[1].lease, "grp-beta");
    uint32_t s = 99;
    ck_assert(ld_shardlayout_find(l, "beta", &s));
    ck_assert_uint_eq(s, 1);
    ck_assert(!ld_shardlayout_find(l, "zzz", &s));

    /* Named shards have no shard of a key. */
    uint64_t hash = 7;
    s = 99;
    ck_assert(!ld_shardlayout_shard_of_key(l, "k", 1, &s, &hash));
    ck_assert_uint_eq(s, 99);
    ck_assert_uint_eq(hash, 7);
    ld_shardlayout_unref(l);
}
END_TEST

/* Shard i of n carries shardrange.h's range i of n, and a key's shard is
 * the one whose range holds its hash. */
START_TEST(numbered_ranges_and_keys)
{
    const uint32_t n = 3;
    struct ld_shardlayout *l = ld_shardlayout_new("grp", NULL, n);
    ck_assert_ptr_nonnull(l);
    for (uint32_t i = 0; i < n; i++) {
        struct ld_shard_range r;
        ck_assert(ld_shardrange_of(i, n, &r));
        ck_assert_uint_eq(l->shards[i].range.start, r.start);
        ck_assert_uint_eq(l->shards[i].range.last, r.last);
    }
    ck_assert_uint_eq(l->shards[0].range.start, 0);
    ck_assert_uint_eq(l->shards[n - 1].range.last, UINT64_MAX);

    static const char *const keys[] = {"", "a", "tenant-42", "zzzzzzzzzzzzzzzz"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        uint32_t s = 99;
        uint64_t hash = 0;
        size_t len = strlen(keys[k]);
        ck_assert(ld_shardlayout_shard_of_key(l, keys[k], len, &s, &hash));
        ck_assert_uint_eq(hash, ld_fnv1a64(keys[k], len));
        ck_assert_uint_eq(s, ld_shardrange_for_key(keys[k], len, n));
        ck_assert(hash >= l->shards[s].range.start && hash <= l->shards[s].range.last);
    }
    ld_shardlayout_unref(l);
}
END_TEST

/* A reader's reference keeps the names after the group is gone. */
START_TEST(outlives_its_group)
{
    struct ld_errinfo err;
    struct ld_shardgroup_config cfg = {
        .name = "grp", .identity = "me", .n_shards = 4, .lease_duration_ms = 1000};
    struct ld_shardgroup *g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    struct ld_shardlayout *l = ld_shardlayout_ref(ld_shardgroup_layout(g));
    ck_assert_ptr_eq(l, ld_shardgroup_layout(g));
    ck_assert_str_eq(ld_shardgroup_shard_lease(g, 3), l->shards[3].lease);
    ld_shardgroup_free(g);
    ck_assert_str_eq(l->shards[3].lease, "grp-3");
    ck_assert_str_eq(l->name, "grp");
    ld_shardlayout_unref(l);

    ck_assert_ptr_null(ld_shardlayout_ref(NULL));
    ld_shardlayout_unref(NULL);
}
END_TEST

static Suite *shardlayout_suite(void)
{
    Suite *s = suite_create("shardlayout");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, numbered_names);
    tcase_add_test(tc, named_names);
    tcase_add_test(tc, numbered_ranges_and_keys);
    tcase_add_test(tc, outlives_its_group);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(shardlayout_suite());
}
