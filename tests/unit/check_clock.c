/*
 * Unit tests for lib/clock: the deadline clock is the one that counts a
 * suspend (CLOCK_BOOTTIME), the readers agree with each other, a timed
 * wait's deadline is on its condition variable's clock, and a
 * replaceable clock falls back to the real readers member by member.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "clock.h"
#include "support/run_suite.h"

static int64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK_BOOTTIME and CLOCK_MONOTONIC differ by the time the machine has
 * spent suspended since boot, which may be zero here; so the reading is
 * told apart by which kernel clock brackets it. */
START_TEST(deadlines_run_on_the_clock_that_counts_suspend)
{
    int64_t before = read_ns(CLOCK_BOOTTIME);
    int64_t ours = ld_mono_ns();
    int64_t after = read_ns(CLOCK_BOOTTIME);
    ck_assert_int_le(before, ours);
    ck_assert_int_le(ours, after);
    int64_t ms_before = read_ns(CLOCK_BOOTTIME) / 1000000;
    int64_t ms = ld_mono_ms();
    ck_assert_int_le(ms_before, ms);
    ck_assert_int_le(ms, read_ns(CLOCK_BOOTTIME) / 1000000);
}
END_TEST

START_TEST(wall_time_is_the_realtime_clock)
{
    int64_t before = read_ns(CLOCK_REALTIME) / 1000;
    int64_t ours = ld_wall_us();
    ck_assert_int_le(before, ours);
    ck_assert_int_le(ours, read_ns(CLOCK_REALTIME) / 1000);
}
END_TEST

static int64_t fixed_mono(void *ctx)
{
    return *(int64_t *)ctx;
}

/* A condition variable set to LD_COND_CLOCK times out at the deadline
 * ld_cond_deadline gives, not before it and not on another clock's idea
 * of it. */
START_TEST(a_timed_wait_ends_at_its_deadline)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_condattr_t attr;
    pthread_cond_t cv;
    struct timespec until;
    pthread_condattr_init(&attr);
    ck_assert_int_eq(pthread_condattr_setclock(&attr, LD_COND_CLOCK), 0);
    ck_assert_int_eq(pthread_cond_init(&cv, &attr), 0);
    int64_t t0 = read_ns(LD_COND_CLOCK);
    ld_cond_deadline(150, &until);
    int64_t asked = (int64_t)until.tv_sec * 1000000000 + until.tv_nsec;
    ck_assert_int_ge(asked - t0, 150 * 1000000LL);
    ck_assert_int_lt(asked - t0, 10000 * 1000000LL);
    ck_assert(until.tv_nsec >= 0 && until.tv_nsec < 1000000000);
    pthread_mutex_lock(&mu);
    int rc = 0;
    while (rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&cv, &mu, &until);
    pthread_mutex_unlock(&mu);
    ck_assert_int_ge(read_ns(LD_COND_CLOCK), asked);
    pthread_cond_destroy(&cv);
    pthread_condattr_destroy(&attr);
}
END_TEST

START_TEST(a_replaced_clock_keeps_what_it_sets)
{
    int64_t t = 42;
    struct ld_clock only_mono = {.mono_ms = fixed_mono, .ctx = &t};
    struct ld_clock c = ld_clock_or_real(&only_mono);
    ck_assert_int_eq(ld_clock_mono_ms(&c), 42);
    t = 43;
    ck_assert_int_eq(ld_clock_mono_ms(&c), 43);
    /* The member left NULL is the real wall clock. */
    int64_t before = ld_wall_us();
    int64_t w = ld_clock_wall_us(&c);
    ck_assert_int_le(before, w);
    ck_assert_int_le(w, ld_wall_us());
}
END_TEST

START_TEST(no_clock_is_the_real_one)
{
    struct ld_clock c = ld_clock_or_real(NULL);
    const struct ld_clock *real = ld_clock_real();
    ck_assert_ptr_eq(c.mono_ms, real->mono_ms);
    ck_assert_ptr_eq(c.wall_us, real->wall_us);
    int64_t before = ld_mono_ms();
    int64_t m = ld_clock_mono_ms(&c);
    ck_assert_int_le(before, m);
    ck_assert_int_le(m, ld_mono_ms());
}
END_TEST

static Suite *clock_suite(void)
{
    Suite *s = suite_create("clock");
    TCase *tc = tcase_create("clock");
    tcase_add_test(tc, deadlines_run_on_the_clock_that_counts_suspend);
    tcase_add_test(tc, wall_time_is_the_realtime_clock);
    tcase_add_test(tc, a_timed_wait_ends_at_its_deadline);
    tcase_add_test(tc, a_replaced_clock_keeps_what_it_sets);
    tcase_add_test(tc, no_clock_is_the_real_one);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(clock_suite());
}
