/*
 * fake_clock: see fake_clock.h.
 */
#include "fake_clock.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
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

bool boottime_timer_armed(pid_t pid, long min_s, long max_s)
{
    char dir_path[64], path[320], line[256];
    snprintf(dir_path, sizeof(dir_path), "/proc/%d/fdinfo", (int)pid);
    DIR *d = opendir(dir_path);
    bool found = false;
    struct dirent *e;
    while (d && !found && (e = readdir(d))) {
        snprintf(path, sizeof(path), "%s/%s", dir_path, e->d_name);
        FILE *f = fopen(path, "re");
        int clockid = -1;
        unsigned flags = 0;
        long sec = -1, nsec = 0;
        while (f && fgets(line, sizeof(line), f)) {
            sscanf(line, "clockid: %d", &clockid);
            sscanf(line, "settime flags: %o", &flags);
            sscanf(line, "it_value: (%ld, %ld)", &sec, &nsec);
        }
        if (f)
            fclose(f);
        found = clockid == CLOCK_BOOTTIME && (flags & 1) && sec >= min_s && sec <= max_s;
    }
    if (d)
        closedir(d);
    return found;
}
