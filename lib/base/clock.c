/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock: the real readers (see clock.h).
 */
#include "clock.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* The clock behind every deadline: CLOCK_BOOTTIME is monotonic and, unlike
 * CLOCK_MONOTONIC, keeps counting while the machine is suspended. A leader
 * that slept through its renew deadline must see that it passed: on
 * CLOCK_MONOTONIC it would wake up believing it still leads, beside the
 * replica that took the Lease over meanwhile. */
#define MONO_CLOCK CLOCK_BOOTTIME

static int64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ld_mono_ns(void)
{
    return read_ns(MONO_CLOCK);
}

int64_t ld_mono_ms(void)
{
    return ld_mono_ns() / 1000000;
}

int64_t ld_wall_us(void)
{
    return read_ns(CLOCK_REALTIME) / 1000;
}

void ld_cond_deadline(int64_t ms_from_now, struct timespec *out)
{
    int64_t ns = read_ns(LD_COND_CLOCK) + ms_from_now * 1000000;
    out->tv_sec = (time_t)(ns / 1000000000);
    out->tv_nsec = (long)(ns % 1000000000);
}

static int64_t real_mono_ms(void *ctx)
{
    (void)ctx;
    return ld_mono_ms();
}

static int64_t real_wall_us(void *ctx)
{
    (void)ctx;
    return ld_wall_us();
}

static const struct ld_clock real_clock = {
    .mono_ms = real_mono_ms,
    .wall_us = real_wall_us,
    .ctx = NULL,
};

const struct ld_clock *ld_clock_real(void)
{
    return &real_clock;
}

struct ld_clock ld_clock_or_real(const struct ld_clock *c)
{
    struct ld_clock out = real_clock;
    if (!c)
        return out;
    out.ctx = c->ctx;
    if (c->mono_ms)
        out.mono_ms = c->mono_ms;
    if (c->wall_us)
        out.wall_us = c->wall_us;
    out.arm = c->arm;
    return out;
}

/* ---- timers ---- */

int ld_timer_open(struct ld_timer *t, const struct ld_clock *c)
{
    t->clock = ld_clock_or_real(c);
    /* The real timer counts on MONO_CLOCK itself, so a deadline that
     * passed while suspended has passed for it too. */
    if (t->clock.arm)
        t->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    else
        t->fd = timerfd_create(MONO_CLOCK, TFD_NONBLOCK | TFD_CLOEXEC);
    return t->fd >= 0 ? 0 : -1;
}

/* The kernel's absolute expiry for at_ms; a zero it_value would disarm,
 * so a deadline at or before the clock's start is its first nanosecond. */
static struct itimerspec expiry(int64_t at_ms)
{
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (at_ms == INT64_MAX)
        return its;
    if (at_ms <= 0) {
        its.it_value.tv_nsec = 1;
        return its;
    }
    its.it_value.tv_sec = (time_t)(at_ms / 1000);
    its.it_value.tv_nsec = (long)(at_ms % 1000) * 1000000;
    return its;
}

int ld_timer_arm(struct ld_timer *t, int64_t at_ms)
{
    if (t->fd < 0) {
        errno = EBADF;
        return -1;
    }
    /* A firing of the old deadline must not end a wait for the new one
     * (timerfd_settime clears it too; the eventfd needs the read). */
    ld_timer_fired(t);
    if (t->clock.arm)
        return t->clock.arm(t->clock.ctx, t->fd, at_ms);
    struct itimerspec its = expiry(at_ms);
    return timerfd_settime(t->fd, TFD_TIMER_ABSTIME, &its, NULL);
}

bool ld_timer_fired(struct ld_timer *t)
{
    uint64_t n = 0;
    /* Both kinds read as one 8-byte count, EAGAIN while not fired. */
    return t->fd >= 0 && read(t->fd, &n, sizeof(n)) == (ssize_t)sizeof(n) && n > 0;
}

void ld_timer_close(struct ld_timer *t)
{
    if (t->fd < 0)
        return;
    if (t->clock.arm)
        t->clock.arm(t->clock.ctx, t->fd, INT64_MAX);
    close(t->fd);
    t->fd = -1;
}
