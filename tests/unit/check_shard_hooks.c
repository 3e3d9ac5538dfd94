/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_shard_hooks: the hooks bound to each shard of shard mode
 * (cmd/leaderd/shell/shard_hooks.h): each shard's claim reaches its own
 * hooks only, bound to the member election; a shard's release is judged by
 * its own hooks alone, while one forbidding hook anywhere forbids the member
 * Lease's release; the earliest wake-up and every hook's news are found
 * across all shards; the exit's wait set wakes for a hook's fd and for the
 * drain channel's.
 */
#include <check.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../../cmd/leaderd/shell/shard_hooks.h"
#include "support/run_suite.h"

#define MEMBER 3 /* any index: the hooks' election is set to it */

/* A hook whose answers the test sets, recording what it is told. */
struct fake_hook {
    bool holding, forbidding, news;
    int64_t wake_at;
    int fed;
    bool last_leading;
    int took_wake;
};

static bool fake_on_publish(void *ctx, const struct ld_election_status *st,
                            int64_t now_ms)
{
    struct fake_hook *f = ctx;
    (void)now_ms;
    f->fed++;
    f->last_leading = st->leading;
    return true; /* "end the daemon": no shard's business, so ignored */
}

static bool fake_holds(void *ctx, int64_t now_ms)
{
    (void)now_ms;
    return ((struct fake_hook *)ctx)->holding;
}

static bool fake_forbids(void *ctx, int64_t now_ms)
{
    (void)now_ms;
    return ((struct fake_hook *)ctx)->forbidding;
}

static int64_t fake_wake(void *ctx, int64_t now_ms)
{
    (void)now_ms;
    return ((struct fake_hook *)ctx)->wake_at;
}

static bool fake_take_wake(void *ctx)
{
    struct fake_hook *f = ctx;
    f->took_wake++;
    return f->news;
}

static struct ld_hook bind(struct fake_hook *f)
{
    if (!f->wake_at)
        f->wake_at = INT64_MAX;
    return (struct ld_hook){.ctx = f,
                            .election = 99, /* not read: the member's is set */
                            .on_publish = fake_on_publish,
                            .next_wake_ms = fake_wake,
                            .holds_release = fake_holds,
                            .forbids_release = fake_forbids,
                            .take_wake = fake_take_wake,
                            .hold = LD_HOOK_HOLD_SAFETY};
}

/* Three shards' hooks, one each; file-scope, as the shard hooks keep
 * pointers to them past any one function (set afresh before each test). */
static struct fake_hook fakes[3];

static void fresh_fakes(void)
{
    memset(fakes, 0, sizeof(fakes));
}

static struct ld_shard_hooks *three_shards(void)
{
    struct ld_shard_hooks *hk = ld_shard_hooks_new(3, MEMBER);
    ck_assert_ptr_nonnull(hk);
    struct ld_errinfo err = {0};
    for (uint32_t k = 0; k < 3; k++) {
        struct ld_hook h = bind(&fakes[k]);
        ck_assert_int_eq(ld_shard_hooks_add(hk, k, &h, &err), LD_OK);
    }
    return hk;
}

START_TEST(a_shards_claim_reaches_its_own_hooks_only)
{
    struct ld_shard_hooks *hk = three_shards();
    struct ld_election_status st = {.observed = true, .leading = true};
    ld_shard_hooks_feed(hk, 1, &st, 1000);
    ck_assert_int_eq(fakes[0].fed, 0);
    ck_assert_int_eq(fakes[1].fed, 1);
    ck_assert_int_eq(fakes[2].fed, 0);
    ck_assert(fakes[1].last_leading);
    ld_shard_hooks_free(hk);
}
END_TEST

START_TEST(a_shard_out_of_range_is_refused)
{
    struct fake_hook f = {0};
    struct ld_shard_hooks *hk = ld_shard_hooks_new(2, MEMBER);
    ck_assert_ptr_nonnull(hk);
    struct ld_errinfo err = {0};
    struct ld_hook h = bind(&f);
    ck_assert_int_eq(ld_shard_hooks_add(hk, 2, &h, &err), LD_EINVAL);
    ck_assert_str_eq(err.msg, "no shard 2");
    ld_shard_hooks_free(hk);
}
END_TEST

/* Shard 0's hook holds: shard 0's release waits, shard 2's does not. */
START_TEST(a_shards_release_is_judged_by_its_own_hooks)
{
    struct ld_shard_hooks *hk = three_shards();
    fakes[0].holding = true;
    struct ld_release_hold r = ld_shard_hooks_judge(hk, 0, 10000, INT64_MIN, 8000);
    ck_assert_int_eq(r.verdict, LD_RELEASE_WAIT);
    ck_assert_int_eq(r.until_ms, 10000);
    r = ld_shard_hooks_judge(hk, 2, 10000, INT64_MIN, 8000);
    ck_assert_int_eq(r.verdict, LD_RELEASE_NOW);
    ld_shard_hooks_free(hk);
}
END_TEST

/* The member Lease's release frees every shard: one forbidding hook of any
 * shard forbids it. */
START_TEST(one_forbidding_hook_forbids_the_members_release)
{
    struct ld_shard_hooks *hk = three_shards();
    ck_assert(!ld_shard_hooks_forbid_release(hk, 8000));
    fakes[2].forbidding = true;
    ck_assert(ld_shard_hooks_forbid_release(hk, 8000));
    ck_assert_int_eq(ld_shard_hooks_judge(hk, 2, 10000, INT64_MIN, 8000).verdict,
                     LD_RELEASE_GIVE_UP);
    ld_shard_hooks_free(hk);
}
END_TEST

START_TEST(the_earliest_wake_and_every_hooks_news_are_found)
{
    fakes[1].wake_at = 7000;
    fakes[2].wake_at = 5000;
    struct ld_shard_hooks *hk = three_shards();
    ck_assert_int_eq(ld_shard_hooks_next_wake(hk, 1000), 5000);
    ck_assert(!ld_shard_hooks_take_wake(hk));
    fakes[0].news = true;
    ck_assert(ld_shard_hooks_take_wake(hk));
    for (int k = 0; k < 3; k++) /* each consumes its own fd, news or not */
        ck_assert_int_eq(fakes[k].took_wake, 2);
    ld_shard_hooks_free(hk);
}
END_TEST

static bool readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

/* With no hook fd the exit waits on the drain channel's fd alone; with
 * one, on a set that either wakes. */
START_TEST(the_exits_wait_wakes_for_a_hooks_fd_and_the_drain_channel)
{
    struct ld_shard_hooks *hk = ld_shard_hooks_new(1, MEMBER);
    ck_assert_ptr_nonnull(hk);
    int drain = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int hook = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ck_assert(drain >= 0 && hook >= 0);
    ck_assert_int_eq(ld_shard_hooks_wait_fd(hk, drain), drain);
    struct ld_errinfo err = {0};
    ck_assert_int_eq(ld_shard_hooks_add_wake_fd(hk, hook, drain, &err), LD_OK);
    int set = ld_shard_hooks_wait_fd(hk, drain);
    ck_assert_int_ne(set, drain);
    ck_assert(!readable(set));
    uint64_t one = 1, got;
    ck_assert_int_eq(write(hook, &one, sizeof(one)), sizeof(one));
    ck_assert(readable(set));
    ck_assert_int_eq(read(hook, &got, sizeof(got)), sizeof(got));
    ck_assert(!readable(set));
    ck_assert_int_eq(write(drain, &one, sizeof(one)), sizeof(one));
    ck_assert(readable(set));
    /* An fd that cannot be watched is a clear error, not a silent miss. */
    ck_assert_int_eq(ld_shard_hooks_add_wake_fd(hk, -1, drain, &err), LD_ESYS);
    ld_shard_hooks_free(hk);
    close(drain);
    close(hook);
}
END_TEST

static Suite *shard_hooks_suite(void)
{
    Suite *s = suite_create("shard_hooks");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, fresh_fakes, NULL);
    tcase_add_test(tc, a_shards_claim_reaches_its_own_hooks_only);
    tcase_add_test(tc, a_shard_out_of_range_is_refused);
    tcase_add_test(tc, a_shards_release_is_judged_by_its_own_hooks);
    tcase_add_test(tc, one_forbidding_hook_forbids_the_members_release);
    tcase_add_test(tc, the_earliest_wake_and_every_hooks_news_are_found);
    tcase_add_test(tc, the_exits_wait_wakes_for_a_hooks_fd_and_the_drain_channel);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(shard_hooks_suite());
}
