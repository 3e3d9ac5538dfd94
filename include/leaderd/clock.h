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

/* A clock that can be replaced: both readers take ctx. A NULL member of a
 * struct ld_clock handed to a constructor means the real reader. */
struct ld_clock {
    int64_t (*mono_ms)(void *ctx);
    int64_t (*wall_us)(void *ctx);
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

#endif
