/* SPDX-License-Identifier: Apache-2.0 */
/*
 * suspend_shim: an LD_PRELOAD library for the suspend test
 * (test_suspend.py). A machine that is suspended and resumed stops
 * CLOCK_MONOTONIC for as long as it slept, while CLOCK_BOOTTIME keeps
 * counting; a paused process on a running machine sees both advance. The
 * shim turns a pause (SIGSTOP) into a suspend as the process sees it: it
 * takes the time in the file $LEADERD_TEST_SUSPEND_FILE (eight bytes, the
 * host-order int64 nanoseconds "spent suspended", written by the test while
 * the process is stopped) off every CLOCK_MONOTONIC reading, and leaves
 * CLOCK_BOOTTIME and CLOCK_REALTIME alone.
 *
 * The kernel counts the timeouts of poll, ppoll, epoll_wait and
 * epoll_pwait on CLOCK_MONOTONIC too, so a suspend stretches them: one
 * under way when the machine went to sleep sleeps, after the resume, what
 * was left of it. The shim does the same to them: a wait whose timeout ran
 * out is waited again until the time is up on the shifted CLOCK_MONOTONIC.
 * A timerfd (on any clock) is left alone.
 *
 * Test-only: built into the build directory, never linked into leaderd.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static const volatile int64_t *suspended_ns(void)
{
    static const volatile int64_t *mapped;
    static int tried;
    if (!tried) {
        tried = 1;
        const char *path = getenv("LEADERD_TEST_SUSPEND_FILE");
        int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        if (fd >= 0) {
            void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED)
                mapped = p;
            close(fd);
        }
    }
    return mapped;
}

static int is_monotonic(clockid_t id)
{
    return id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW ||
           id == CLOCK_MONOTONIC_COARSE;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static clock_gettime_fn real;
    if (!real)
        real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    const volatile int64_t *off = rc == 0 && is_monotonic(id) ? suspended_ns() : NULL;
    if (off && *off > 0) {
        int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec - *off;
        ts->tv_sec = ns / 1000000000;
        ts->tv_nsec = ns % 1000000000;
    }
    return rc;
}

/* ---- waits whose timeout the kernel counts on CLOCK_MONOTONIC ---- */

static int64_t shifted_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the shifted one above */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Whether a wait with this timeout is stretched: only with the file set up
 * and a finite, positive timeout. */
static int stretched(int64_t timeout_ns)
{
    return timeout_ns > 0 && suspended_ns() != NULL;
}

/* What is left until until_ns in ms, rounded up; 0 once it is reached. */
static int ms_left(int64_t until_ns)
{
    int64_t left = until_ns - shifted_mono_ns();
    if (left <= 0)
        return 0;
    left = (left + 999999) / 1000000;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

/* A wait ran out (returned 0) early on the shifted clock: it goes on. */
static int goes_on(int rc, int64_t until_ns)
{
    return rc == 0 && shifted_mono_ns() < until_ns;
}

typedef int (*poll_fn)(struct pollfd *, nfds_t, int);
typedef int (*ppoll_fn)(struct pollfd *, nfds_t, const struct timespec *,
                        const sigset_t *);
typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);
typedef int (*epoll_pwait_fn)(int, struct epoll_event *, int, int, const sigset_t *);

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    static poll_fn real;
    if (!real)
        real = (poll_fn)dlsym(RTLD_NEXT, "poll");
    if (!stretched((int64_t)timeout * 1000000))
        return real(fds, n, timeout);
    int64_t until = shifted_mono_ns() + (int64_t)timeout * 1000000;
    int rc;
    do
        rc = real(fds, n, ms_left(until));
    while (goes_on(rc, until));
    return rc;
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
    static ppoll_fn real;
    if (!real)
        real = (ppoll_fn)dlsym(RTLD_NEXT, "ppoll");
    int64_t ns = tmo ? (int64_t)tmo->tv_sec * 1000000000 + tmo->tv_nsec : -1;
    if (!stretched(ns))
        return real(fds, n, tmo, mask);
    int64_t until = shifted_mono_ns() + ns;
    int rc;
    do {
        int64_t left = until - shifted_mono_ns();
        struct timespec ts = {0, 0};
        if (left > 0) {
            ts.tv_sec = left / 1000000000;
            ts.tv_nsec = left % 1000000000;
        }
        rc = real(fds, n, &ts, mask);
    } while (goes_on(rc, until));
    return rc;
}

int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
    static epoll_wait_fn real;
    if (!real)
        real = (epoll_wait_fn)dlsym(RTLD_NEXT, "epoll_wait");
    if (!stretched((int64_t)timeout * 1000000))
        return real(epfd, evs, max, timeout);
    int64_t until = shifted_mono_ns() + (int64_t)timeout * 1000000;
    int rc;
    do
        rc = real(epfd, evs, max, ms_left(until));
    while (goes_on(rc, until));
    return rc;
}

int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
                const sigset_t *mask)
{
    static epoll_pwait_fn real;
    if (!real)
        real = (epoll_pwait_fn)dlsym(RTLD_NEXT, "epoll_pwait");
    if (!stretched((int64_t)timeout * 1000000))
        return real(epfd, evs, max, timeout, mask);
    int64_t until = shifted_mono_ns() + (int64_t)timeout * 1000000;
    int rc;
    do
        rc = real(epfd, evs, max, ms_left(until), mask);
    while (goes_on(rc, until));
    return rc;
}
