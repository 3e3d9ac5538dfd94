/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/shardsnap: a snapshot copies what it is given
 * (strings too), counts its references, is extended to a new claims
 * deadline without a copy, and says whether two tables show the same to a
 * /watch reader, leadership judged by time.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cmd/leaderd/core/shardsnap.h"
#include "support/run_suite.h"

static struct ld_shard_entry entry(const char *leader, int64_t term, bool leading)
{
    struct ld_shard_entry e;
    memset(&e, 0, sizeof(e));
    e.leader = leader;
    e.term = term;
    e.observed = true;
    e.leading = leading;
    e.has_renewed_at = true;
    e.renewed_at_us = 1000;
    return e;
}

START_TEST(new_copies_everything)
{
    char leader[16], member[16];
    snprintf(leader, sizeof(leader), "pod-a");
    snprintf(member, sizeof(member), "pod-b");
    struct ld_shard_entry e[3] = {entry(leader, 3, true), entry(NULL, 0, false),
                                  entry("", 1, false)};
    const char *members[2] = {"pod-a", member};
    struct ld_shardsnap *s = ld_shardsnap_new(true, 500, e, 3, members, 2);
    ck_assert_ptr_nonnull(s);
    /* The caller's buffers change or go: the snapshot keeps its copies. */
    snprintf(leader, sizeof(leader), "zzz");
    snprintf(member, sizeof(member), "yyy");
    e[0].term = 99;
    ck_assert(s->observed);
    ck_assert_uint_eq(s->n_shards, 3);
    ck_assert_str_eq(s->shards[0].leader, "pod-a");
    ck_assert_ptr_ne(s->shards[0].leader, leader);
    ck_assert_int_eq(s->shards[0].term, 3);
    ck_assert_int_eq(e[0].term, 99);
    ck_assert(s->shards[0].leading);
    ck_assert_int_eq(s->claims_until_ms, 500);
    ck_assert_int_eq(ld_shardsnap_lead_until(s, 0), 500);
    ck_assert_int_eq(ld_shardsnap_lead_until(s, 1), INT64_MIN);
    ck_assert_int_eq(ld_shardsnap_lead_until(s, 3), INT64_MIN);
    ck_assert(s->shards[0].has_renewed_at);
    ck_assert_int_eq(s->shards[0].renewed_at_us, 1000);
    ck_assert_str_eq(s->shards[1].leader, ""); /* NULL reads as free */
    ck_assert_str_eq(s->shards[2].leader, "");
    ck_assert_uint_eq(s->n_members, 2);
    ck_assert_str_eq(s->members[0], "pod-a");
    ck_assert_str_eq(s->members[1], "pod-b");
    ld_shardsnap_unref(s);

    struct ld_shardsnap *empty = ld_shardsnap_new(false, 0, NULL, 0, NULL, 0);
    ck_assert_ptr_nonnull(empty);
    ck_assert(!empty->observed);
    ck_assert_uint_eq(empty->n_shards, 0);
    ck_assert_uint_eq(empty->n_members, 0);
    ld_shardsnap_unref(empty);
}
END_TEST

/* Each reference is released once; the last frees (ASan and valgrind see
 * a leak or a double free). */
START_TEST(references)
{
    struct ld_shard_entry e = entry("pod-a", 1, false);
    struct ld_shardsnap *s = ld_shardsnap_new(true, 0, &e, 1, NULL, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_eq(ld_shardsnap_ref(s), s);
    ck_assert_ptr_eq(ld_shardsnap_ref(s), s);
    ld_shardsnap_unref(s);
    ld_shardsnap_unref(s);
    ck_assert_str_eq(s->shards[0].leader, "pod-a"); /* one reference left */
    ld_shardsnap_unref(s);
    ck_assert_ptr_null(ld_shardsnap_ref(NULL));
    ld_shardsnap_unref(NULL);
}
END_TEST

START_TEST(is_leader_by_time)
{
    struct ld_shard_entry e[2] = {entry("me", 1, true), entry("me", 1, false)};
    struct ld_shardsnap *s = ld_shardsnap_new(true, 1000, e, 2, NULL, 0);
    ck_assert(ld_shardsnap_leads(s, 0, 999));
    ck_assert(!ld_shardsnap_leads(s, 0, 1000));
    ck_assert(!ld_shardsnap_leads(s, 1, 0));
    ck_assert(!ld_shardsnap_leads(s, 2, 0));
    ck_assert(!ld_shardsnap_leads(NULL, 0, 0));
    ld_shardsnap_unref(s);
}
END_TEST

/* A renewal's table: the same entries and members, not copied, with the
 * new deadline; it keeps them after the table it extends is gone, and an
 * extension of an extension still shares the first table's memory. */
START_TEST(extend_shares_the_entries)
{
    const char *members[] = {"a", "b"};
    struct ld_shard_entry e[2] = {entry("a", 1, true), entry("b", 2, false)};
    struct ld_shardsnap *a = ld_shardsnap_new(true, 1000, e, 2, members, 2);
    struct ld_shardsnap *b = ld_shardsnap_extend(a, 3000);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_eq(b->shards, a->shards);
    ck_assert_ptr_eq(b->members, a->members);
    ck_assert_int_eq(a->claims_until_ms, 1000);
    ck_assert_int_eq(b->claims_until_ms, 3000);
    ck_assert(b->observed);
    ck_assert(!ld_shardsnap_leads(a, 0, 2000));
    ck_assert(ld_shardsnap_leads(b, 0, 2000));
    ck_assert(ld_shardsnap_same_view(a, b, 500));
    ck_assert(!ld_shardsnap_same_view(a, b, 2000));
    const struct ld_shard_entry *shared = a->shards;
    ld_shardsnap_unref(a);
    struct ld_shardsnap *c = ld_shardsnap_extend(b, 5000);
    ld_shardsnap_unref(b);
    ck_assert_ptr_eq(c->shards, shared);
    ck_assert_str_eq(c->shards[1].leader, "b");
    ck_assert_str_eq(c->members[1], "b");
    ck_assert(ld_shardsnap_leads(c, 0, 4000));
    ld_shardsnap_unref(c); /* the last: frees the header and the entries */
}
END_TEST

START_TEST(same_view)
{
    const char *m1[] = {"a", "b"}, *m2[] = {"a", "c"}, *m3[] = {"a"};
    struct ld_shard_entry base[2] = {entry("a", 1, true), entry("b", 2, false)};
    struct ld_shard_entry e[2];
    struct ld_shardsnap *a = ld_shardsnap_new(true, 1000, base, 2, m1, 2);
    struct ld_shardsnap *b;

    /* What a reader does not see (renewTime, our last renewal, a later
     * deadline while still leading) is no change. */
    memcpy(e, base, sizeof(e));
    e[0].renewed_at_us = 2000;
    e[0].last_renew_wall_us = 5;
    b = ld_shardsnap_new(true, 3000, e, 2, m1, 2);
    ck_assert(ld_shardsnap_same_view(a, b, 500));
    ck_assert(ld_shardsnap_same_view(a, a, 500));
    /* ... until time passes a's lead_until only. */
    ck_assert(!ld_shardsnap_same_view(a, b, 1500));
    ld_shardsnap_unref(b);

    /* Each thing a reader sees, changed alone. */
    for (int field = 0; field < 6; field++) {
        bool observed = true;
        const char *const *members = m1;
        uint32_t nm = 2;
        memcpy(e, base, sizeof(e));
        switch (field) {
        case 0:
            e[1].leader = "c";
            break;
        case 1:
            e[1].term = 3;
            break;
        case 2:
            e[0].leading = false;
            break;
        case 3:
            members = m2;
            break;
        case 4:
            members = m3;
            nm = 1;
            break;
        case 5:
            observed = false;
            break;
        }
        b = ld_shardsnap_new(observed, 1000, e, 2, members, nm);
        ck_assert_msg(!ld_shardsnap_same_view(a, b, 500), "field %d", field);
        ck_assert_msg(!ld_shardsnap_same_view(b, a, 500), "field %d", field);
        ld_shardsnap_unref(b);
    }
    b = ld_shardsnap_new(true, 1000, base, 1, m1, 2); /* fewer shards */
    ck_assert(!ld_shardsnap_same_view(a, b, 500));
    ld_shardsnap_unref(b);

    ck_assert(ld_shardsnap_same_view(NULL, NULL, 0));
    ck_assert(!ld_shardsnap_same_view(a, NULL, 0));
    ck_assert(!ld_shardsnap_same_view(NULL, a, 0));

    /* Judged at two times: a view shown at 500 (shard 0 ours) differs from
     * the same table at 1500, and equals it at 900. */
    ck_assert(!ld_shardsnap_same_view_at(a, 500, a, 1500));
    ck_assert(ld_shardsnap_same_view_at(a, 500, a, 900));
    ck_assert(ld_shardsnap_same_view_at(a, 1500, a, 2500));
    ld_shardsnap_unref(a);
}
END_TEST

static Suite *shardsnap_suite(void)
{
    Suite *s = suite_create("shardsnap");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, new_copies_everything);
    tcase_add_test(tc, references);
    tcase_add_test(tc, is_leader_by_time);
    tcase_add_test(tc, extend_shares_the_entries);
    tcase_add_test(tc, same_view);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(shardsnap_suite());
}
