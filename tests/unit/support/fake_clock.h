/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_clock: a clock a test moves by hand, with timers that follow it
 * (clock.h's struct ld_timer): an armed timer's eventfd is written when
 * fake_clock_advance takes the clock to or past its deadline, and never
 * on the real clock's account.
 */
#ifndef FAKE_CLOCK_H
#define FAKE_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "clock.h"

#define FAKE_CLOCK_TIMERS 16

struct fake_clock {
    int64_t now_ms;
    int64_t wall_us;
    struct {
        int fd; /* -1: a free slot */
        int64_t at_ms;
    } timers[FAKE_CLOCK_TIMERS];
};

/* fc reads start_ms, with no timer armed. */
void fake_clock_init(struct fake_clock *fc, int64_t start_ms);

/* The struct ld_clock over fc (borrows fc, which must outlive it). */
struct ld_clock fake_clock_clock(struct fake_clock *fc);

/* Moves the clock ms forward and fires every timer it reaches. */
void fake_clock_advance(struct fake_clock *fc, int64_t ms);

/* How many timers are armed. */
int fake_clock_armed(const struct fake_clock *fc);

/* From /proc/PID/fdinfo, for the real clock's timers: whether one of
 * pid's fds is a timerfd on CLOCK_BOOTTIME armed at an absolute time that
 * is due in min_s to max_s seconds. */
bool boottime_timer_armed(pid_t pid, long min_s, long max_s);

#endif
