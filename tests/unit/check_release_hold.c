/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_release_hold: the one release-hold judgement
 * (cmd/leaderd/hooks/release_hold.h) on a fake clock: safety holds last
 * until the term's deadline and no longer, whenever the step-down came;
 * courtesy holds only within their own bound; a hook that forbids the
 * release gives it up at once, held or not; every hook is asked.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../cmd/leaderd/hooks/release_hold.h"
#include "support/run_suite.h"

/* A hook whose answers the test sets, counting how often it is asked. */
struct fake_hook {
    bool holding, forbidding;
    int asked;
};

static bool fake_holds(void *ctx, int64_t now_ms)
{
    struct fake_hook *f = ctx;
    (void)now_ms;
    f->asked++;
    return f->holding;
}

static bool fake_forbids(void *ctx, int64_t now_ms)
{
    (void)now_ms;
    return ((struct fake_hook *)ctx)->forbidding;
}

static struct ld_hook bind(struct fake_hook *f, enum ld_hook_hold kind)
{
    return (struct ld_hook){.ctx = f,
                            .holds_release = fake_holds,
                            .forbids_release = fake_forbids,
                            .hold = kind};
}

#define TERM_UNTIL 10000 /* the last renewal's start (7000) + renew deadline */
#define NO_COURTESY INT64_MIN

START_TEST(nothing_held_releases_now)
{
    struct fake_hook f = {0};
    struct ld_hook h = bind(&f, LD_HOOK_HOLD_SAFETY);
    struct ld_release_hold r =
        ld_release_hold_judge(&h, 1, TERM_UNTIL, NO_COURTESY, 8000);
    ck_assert_int_eq(r.verdict, LD_RELEASE_NOW);
    ck_assert_int_eq(f.asked, 1);
    r = ld_release_hold_judge(NULL, 0, TERM_UNTIL, NO_COURTESY, 8000);
    ck_assert_int_eq(r.verdict, LD_RELEASE_NOW);
}
END_TEST

/* A step-down at 9500 (half a second before the term ends): the hold ends
 * at the term's deadline, not at 9500 + the renew deadline. */
START_TEST(a_safety_hold_lasts_until_the_terms_deadline_not_the_step_downs)
{
    struct fake_hook f = {.holding = true};
    struct ld_hook h = bind(&f, LD_HOOK_HOLD_SAFETY);
    for (int64_t now = 9500; now < TERM_UNTIL; now += 100) {
        struct ld_release_hold r =
            ld_release_hold_judge(&h, 1, TERM_UNTIL, NO_COURTESY, now);
        ck_assert_int_eq(r.verdict, LD_RELEASE_WAIT);
        ck_assert_int_eq(r.until_ms, TERM_UNTIL);
    }
    struct ld_release_hold r =
        ld_release_hold_judge(&h, 1, TERM_UNTIL, NO_COURTESY, TERM_UNTIL);
    ck_assert_int_eq(r.verdict, LD_RELEASE_GIVE_UP);
    ck_assert_ptr_nonnull(r.why);
    /* Let go in time: written. */
    f.holding = false;
    r = ld_release_hold_judge(&h, 1, TERM_UNTIL, NO_COURTESY, TERM_UNTIL - 1);
    ck_assert_int_eq(r.verdict, LD_RELEASE_NOW);
}
END_TEST

/* Another holder in view ends the term: a hold still held gives up. */
START_TEST(a_term_seen_over_gives_a_held_release_up)
{
    struct fake_hook f = {.holding = true};
    struct ld_hook h = bind(&f, LD_HOOK_HOLD_SAFETY);
    struct ld_release_hold r = ld_release_hold_judge(&h, 1, INT64_MIN, NO_COURTESY, 8000);
    ck_assert_int_eq(r.verdict, LD_RELEASE_GIVE_UP);
}
END_TEST

/* A write of unknown fate forbids the release even with nothing held and
 * the term still running. */
START_TEST(a_forbidding_hook_gives_the_release_up_at_once)
{
    struct fake_hook f = {.forbidding = true};
    struct ld_hook h = bind(&f, LD_HOOK_HOLD_SAFETY);
    struct ld_release_hold r =
        ld_release_hold_judge(&h, 1, TERM_UNTIL, NO_COURTESY, 8000);
    ck_assert_int_eq(r.verdict, LD_RELEASE_GIVE_UP);
    ck_assert_ptr_nonnull(r.why);
}
END_TEST

/* Courtesy holds count only while their bound is open, and never past it;
 * with a safety hold too, the wait ends at the earlier bound. */
START_TEST(courtesy_holds_count_only_within_their_bound)
{
    struct fake_hook c = {.holding = true}, s = {0};
    struct ld_hook hs[2] = {bind(&c, LD_HOOK_HOLD_COURTESY),
                            bind(&s, LD_HOOK_HOLD_SAFETY)};
    struct ld_release_hold r =
        ld_release_hold_judge(hs, 2, TERM_UNTIL, NO_COURTESY, 8000);
    ck_assert_int_eq(r.verdict, LD_RELEASE_NOW); /* not shutting down */
    ck_assert_int_eq(c.asked, 0);
    r = ld_release_hold_judge(hs, 2, TERM_UNTIL, 9000, 8000);
    ck_assert_int_eq(r.verdict, LD_RELEASE_WAIT);
    ck_assert_int_eq(r.until_ms, 9000);
    r = ld_release_hold_judge(hs, 2, TERM_UNTIL, 9000, 9000);
    ck_assert_int_eq(r.verdict, LD_RELEASE_NOW); /* the courtesy is over */
    s.holding = true;
    r = ld_release_hold_judge(hs, 2, TERM_UNTIL, 9000, 8500);
    ck_assert_int_eq(r.verdict, LD_RELEASE_WAIT);
    ck_assert_int_eq(r.until_ms, 9000);
    r = ld_release_hold_judge(hs, 2, TERM_UNTIL, 9000, 9500);
    ck_assert_int_eq(r.until_ms, TERM_UNTIL);
}
END_TEST

/* Every hook is asked, also after one already holds (a hook may arrange
 * its own wake-up when asked). */
START_TEST(every_hook_is_asked)
{
    struct fake_hook a = {.holding = true}, b = {.holding = true};
    struct ld_hook hs[2] = {bind(&a, LD_HOOK_HOLD_SAFETY), bind(&b, LD_HOOK_HOLD_SAFETY)};
    (void)ld_release_hold_judge(hs, 2, TERM_UNTIL, NO_COURTESY, 8000);
    ck_assert_int_eq(a.asked, 1);
    ck_assert_int_eq(b.asked, 1);
}
END_TEST

static Suite *release_hold_suite(void)
{
    Suite *s = suite_create("release_hold");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, nothing_held_releases_now);
    tcase_add_test(tc, a_safety_hold_lasts_until_the_terms_deadline_not_the_step_downs);
    tcase_add_test(tc, a_term_seen_over_gives_a_held_release_up);
    tcase_add_test(tc, a_forbidding_hook_gives_the_release_up_at_once);
    tcase_add_test(tc, courtesy_holds_count_only_within_their_bound);
    tcase_add_test(tc, every_hook_is_asked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(release_hold_suite());
}
