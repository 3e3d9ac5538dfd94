/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/clock: the deadline clock is the one that counts a
 * suspend (CLOCK_BOOTTIME), the readers agree with each other, a timed
 * wait's deadline is on its condition variable's clock, and a
 * replaceable clock falls back to the real readers member by member. A
 * timer (the fd a wait that enforces a deadline polls) is a timerfd on
 * the suspend-counting clock, and one on a replaced clock fires when that
 * clock is moved past its deadline, however long the poll's own timeout.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "support/fake_clock.h"
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

/* The clockid of a timerfd, from /proc/self/fdinfo; -1 when not one. */
static int timerfd_clockid(int fd)
{
    char path[64], line[256];
    int id = -1;
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    while (id < 0 && fgets(line, sizeof(line), f))
        if (strncmp(line, "clockid:", 8) == 0)
            id = (int)strtol(line + 8, NULL, 10);
    fclose(f);
    return id;
}

static bool readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

/* A suspend stops CLOCK_MONOTONIC, and with it every poll timeout: the
 * real timer is counted by the kernel on the clock that does not stop. */
START_TEST(the_real_timer_counts_on_the_suspend_counting_clock)
{
    struct ld_timer t;
    ck_assert_int_eq(ld_timer_open(&t, NULL), 0);
    ck_assert_int_eq(timerfd_clockid(t.fd), CLOCK_BOOTTIME);
    ld_timer_close(&t);
    ck_assert_int_eq(t.fd, -1);
    ld_timer_close(&t); /* closed twice: left alone */
}
END_TEST

START_TEST(the_real_timer_ends_a_wait_at_its_deadline)
{
    struct ld_timer t;
    ck_assert_int_eq(ld_timer_open(&t, ld_clock_real()), 0);
    ck_assert(!readable(t.fd, 50)); /* opened disarmed */
    int64_t at = ld_mono_ms() + 80;
    ck_assert_int_eq(ld_timer_arm(&t, at), 0);
    ck_assert(!readable(t.fd, 0));
    /* The poll's own timeout is far away: only the timer ends it. */
    ck_assert(readable(t.fd, 30000));
    ck_assert_int_ge(ld_mono_ms(), at);
    ck_assert(ld_timer_fired(&t));
    ck_assert(!ld_timer_fired(&t)); /* taken */
    ck_assert(!readable(t.fd, 0));
    ld_timer_close(&t);
}
END_TEST

START_TEST(a_deadline_already_passed_fires_at_once_and_none_disarms)
{
    struct ld_timer t;
    ck_assert_int_eq(ld_timer_open(&t, NULL), 0);
    ck_assert_int_eq(ld_timer_arm(&t, ld_mono_ms() - 1000), 0);
    ck_assert(readable(t.fd, 1000));
    ck_assert_int_eq(ld_timer_arm(&t, 0), 0); /* the clock's first instant */
    ck_assert(readable(t.fd, 1000));
    /* Re-arming forgets the firing not taken, and INT64_MAX disarms. */
    ck_assert_int_eq(ld_timer_arm(&t, INT64_MAX), 0);
    ck_assert(!readable(t.fd, 100));
    ck_assert(!ld_timer_fired(&t));
    ld_timer_close(&t);
}
END_TEST

START_TEST(a_timer_on_a_moved_clock_fires_when_the_clock_reaches_it)
{
    struct fake_clock fc;
    fake_clock_init(&fc, 1000);
    struct ld_clock c = fake_clock_clock(&fc);
    struct ld_timer t;
    ck_assert_int_eq(ld_timer_open(&t, &c), 0);
    ck_assert_int_eq(ld_timer_arm(&t, 5000), 0);
    ck_assert(!readable(t.fd, 50)); /* real time passing does not fire it */
    fake_clock_advance(&fc, 3999);
    ck_assert(!readable(t.fd, 0));
    fake_clock_advance(&fc, 1);
    ck_assert(readable(t.fd, 0));
    ck_assert(ld_timer_fired(&t));
    /* A deadline the clock has passed fires as it is armed; re-arming a
     * fired timer at a later deadline forgets the firing. */
    ck_assert_int_eq(ld_timer_arm(&t, 4000), 0);
    ck_assert(readable(t.fd, 0));
    ck_assert_int_eq(ld_timer_arm(&t, 9000), 0);
    ck_assert(!readable(t.fd, 0));
    ck_assert_int_eq(fake_clock_armed(&fc), 1);
    ld_timer_close(&t);
    ck_assert_int_eq(fake_clock_armed(&fc), 0);
}
END_TEST

struct waiter {
    int fd;
    int64_t waited_ms; /* real time the poll took */
    bool woke;
};

static void *wait_long(void *arg)
{
    struct waiter *w = arg;
    int64_t t0 = ld_mono_ms();
    w->woke = readable(w->fd, 60000);
    w->waited_ms = ld_mono_ms() - t0;
    return NULL;
}

/* The clock jumps (as it does across a suspend) while a wait with a long
 * poll timeout is under way: the wait ends on the jump, not at the end of
 * its timeout. */
START_TEST(a_wait_ends_when_the_clock_jumps_past_its_deadline)
{
    struct fake_clock fc;
    fake_clock_init(&fc, 0);
    struct ld_clock c = fake_clock_clock(&fc);
    struct ld_timer t;
    ck_assert_int_eq(ld_timer_open(&t, &c), 0);
    ck_assert_int_eq(ld_timer_arm(&t, 2000), 0);
    struct waiter w = {.fd = t.fd};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_long, &w), 0);
    struct timespec pause = {0, 50 * 1000000};
    nanosleep(&pause, NULL);
    fake_clock_advance(&fc, 30000);
    pthread_join(th, NULL);
    ck_assert(w.woke);
    ck_assert_int_lt(w.waited_ms, 10000);
    ld_timer_close(&t);
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
    tcase_add_test(tc, the_real_timer_counts_on_the_suspend_counting_clock);
    tcase_add_test(tc, the_real_timer_ends_a_wait_at_its_deadline);
    tcase_add_test(tc, a_deadline_already_passed_fires_at_once_and_none_disarms);
    tcase_add_test(tc, a_timer_on_a_moved_clock_fires_when_the_clock_reaches_it);
    tcase_add_test(tc, a_wait_ends_when_the_clock_jumps_past_its_deadline);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(clock_suite());
}
