/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_clock: see fake_clock.h.
 */
#include "fake_clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void fake_clock_init(struct fake_clock *fc, int64_t start_ms)
{
    fc->now_ms = start_ms;
    fc->wall_us = 1700000000LL * 1000000;
    for (int i = 0; i < FAKE_CLOCK_TIMERS; i++)
        fc->timers[i].fd = -1;
}

static int64_t fc_mono_ms(void *ctx)
{
    return ((struct fake_clock *)ctx)->now_ms;
}

static int64_t fc_wall_us(void *ctx)
{
    const struct fake_clock *fc = ctx;
    return fc->wall_us + fc->now_ms * 1000;
}

static void fire(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        return; /* the count is full: it is readable anyway */
}

/* Fires the armed timers the clock has reached; they are then disarmed. */
static void fire_due(struct fake_clock *fc)
{
    for (int i = 0; i < FAKE_CLOCK_TIMERS; i++) {
        if (fc->timers[i].fd < 0 || fc->timers[i].at_ms > fc->now_ms)
            continue;
        fire(fc->timers[i].fd);
        fc->timers[i].fd = -1;
    }
}

static int fc_arm(void *ctx, int fd, int64_t at_ms)
{
    struct fake_clock *fc = ctx;
    int free_slot = -1;
    for (int i = 0; i < FAKE_CLOCK_TIMERS; i++) {
        if (fc->timers[i].fd == fd)
            fc->timers[i].fd = -1;
        if (fc->timers[i].fd < 0 && free_slot < 0)
            free_slot = i;
    }
    if (at_ms == INT64_MAX)
        return 0;
    if (free_slot < 0)
        return -1;
    fc->timers[free_slot].fd = fd;
    fc->timers[free_slot].at_ms = at_ms;
    fire_due(fc);
    return 0;
}

struct ld_clock fake_clock_clock(struct fake_clock *fc)
{
    struct ld_clock c = {
        .mono_ms = fc_mono_ms, .wall_us = fc_wall_us, .arm = fc_arm, .ctx = fc};
    return c;
}

void fake_clock_advance(struct fake_clock *fc, int64_t ms)
{
    fc->now_ms += ms;
    fire_due(fc);
}

int fake_clock_armed(const struct fake_clock *fc)
{
    int n = 0;
    for (int i = 0; i < FAKE_CLOCK_TIMERS; i++)
        n += fc->timers[i].fd >= 0;
    return n;
}

/* The number after name at the start of line (base 8 or 10); -1 when the
 * line is not that field. */
static long field(const char *line, const char *name, int base)
{
    size_t n = strlen(name);
    if (strncmp(line, name, n) != 0)
        return -1;
    return strtol(line + n, NULL, base);
}

/* Whether the fd whose fdinfo is path is such a timer. */
static bool is_boottime_timer(const char *path, long min_s, long max_s)
{
    char line[256];
    long clockid = -1, flags = 0, sec = -1;
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "clockid:", 8) == 0)
            clockid = field(line, "clockid:", 10);
        else if (strncmp(line, "settime flags:", 14) == 0)
            flags = field(line, "settime flags:", 8);
        else if (strncmp(line, "it_value: (", 11) == 0)
            sec = field(line, "it_value: (", 10);
    }
    fclose(f);
    return clockid == CLOCK_BOOTTIME && (flags & 1) && sec >= min_s && sec <= max_s;
}

bool boottime_timer_armed(pid_t pid, long min_s, long max_s)
{
    char path[64];
    /* Every fd number a test process can have open, without readdir. */
    for (int fd = 0; fd < 1024; fd++) {
        snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)pid, fd);
        if (is_boottime_timer(path, min_s, max_s))
            return true;
    }
    return false;
}
