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
 * Test-only: built into the build directory, never linked into leaderd.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
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
