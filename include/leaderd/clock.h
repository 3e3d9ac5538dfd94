/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock: the one place leaderd reads time.
 *
 * Every deadline in leaderd (lease expiry, renew deadlines, retry waits,
 * request timeouts, the child's grace, the proxy's cut) is arithmetic on
 * ld_mono_ms / ld_mono_ns, and only the timestamps written into a Lease
 * (and log lines) use ld_wall_us. Which kernel clock backs the monotonic
 * reading is decided in clock.c alone, so changing it is one edit for the
 * daemon, the library and the exec child's supervisor at once.
 *
 * Code that must run on simulated time (the election host, the daemon's
 * shell) takes a struct ld_clock instead of calling the readers directly;
 * ld_clock_real() is the real one. The readers are async-signal-safe
 * (clock_gettime is), so the supervisor may use them in its handlers.
 */
#ifndef LEADERD_CLOCK_H
#define LEADERD_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

/* The monotonic clock in ns and ms: never goes back, unaffected by
 * settimeofday, and counting the time the machine was suspended. */
int64_t ld_mono_ns(void);
int64_t ld_mono_ms(void);

/* The wall clock (CLOCK_REALTIME) in us since the Epoch: for timestamps
 * that other machines read, never for a deadline. */
int64_t ld_wall_us(void);

/* A condition variable cannot wait on the clock above
 * (pthread_condattr_setclock refuses CLOCK_BOOTTIME): a timed wait sets
 * its condition variable to LD_COND_CLOCK (from <time.h>) and takes its
 * absolute deadline, ms_from_now, from ld_cond_deadline. Only for bounds a
 * suspend may harmlessly stretch (a shutdown's drain), never for a
 * leadership deadline. */
#define LD_COND_CLOCK CLOCK_MONOTONIC
struct timespec;
void ld_cond_deadline(int64_t ms_from_now, struct timespec *out);

/* A clock that can be replaced: every member takes ctx. A NULL member of a
 * struct ld_clock handed to a constructor means the real one.
 *
 * arm drives the timers (struct ld_timer below) of a clock that is not the
 * real one: fd is an eventfd the timer owns, and the clock writes to it
 * (any count) once its mono_ms reaches at_ms, at once if it already has;
 * arming fd again replaces its deadline, at_ms INT64_MAX forgets fd. 0, or
 * -1 when it cannot keep one more. A clock whose mono_ms is simulated gives
 * arm too, or its timers follow the real clock. */
struct ld_clock {
    int64_t (*mono_ms)(void *ctx);
    int64_t (*wall_us)(void *ctx);
    int (*arm)(void *ctx, int fd, int64_t at_ms);
    void *ctx;
};

/* The real clock (static storage; never freed). */
const struct ld_clock *ld_clock_real(void);

/* c with every NULL member (or c itself NULL) replaced by the real one. */
struct ld_clock ld_clock_or_real(const struct ld_clock *c);

static inline int64_t ld_clock_mono_ms(const struct ld_clock *c)
{
    return c->mono_ms(c->ctx);
}

static inline int64_t ld_clock_wall_us(const struct ld_clock *c)
{
    return c->wall_us(c->ctx);
}

/* ---- timers that enforce a deadline ----
 *
 * The kernel counts a poll, epoll_wait or curl_multi_poll timeout on
 * CLOCK_MONOTONIC, which stops while the machine is suspended: a wait that
 * should end at a deadline would, after a resume, sleep on for as long as
 * was left of its timeout when the machine went to sleep, past a deadline
 * that passed meanwhile. So a wait that enforces a deadline puts a timer's
 * fd in its fd set (the timeout is then none, or a generous backstop): the
 * fd becomes readable once ld_clock_mono_ms of the timer's clock reaches
 * the deadline, whatever that clock counted while suspended. On the real
 * clock it is a timerfd on the clock behind ld_mono_ms; on a replaced clock
 * an eventfd that the clock's arm fires.
 *
 * The functions make system calls only (no allocation, no lock), so the
 * exec child's supervisor may use them after its fork. */
struct ld_timer {
    int fd; /* poll it for POLLIN; -1 when not open */
    struct ld_clock clock;
};

/* Opens t, disarmed, on c (NULL: the real clock); the caller owns t->fd
 * until ld_timer_close. 0, or -1 with errno set (t->fd is then -1). */
int ld_timer_open(struct ld_timer *t, const struct ld_clock *c);

/* Arms t to fire when its clock reaches at_ms (ld_mono_ms milliseconds);
 * one already in the past fires at once, INT64_MAX disarms. Forgets a
 * firing not yet taken. 0, or -1 with errno set. */
int ld_timer_arm(struct ld_timer *t, int64_t at_ms);

/* Whether t fired since it was last armed or asked; takes the firing, so
 * t->fd is no longer readable until it fires again. */
bool ld_timer_fired(struct ld_timer *t);

/* Closes t->fd (a closed or never opened t, with fd -1, is left alone). */
void ld_timer_close(struct ld_timer *t);

#endif
