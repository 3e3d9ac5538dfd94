/*
 * clock: the real readers (see clock.h).
 */
#include "clock.h"

#include <time.h>

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
    return out;
}
