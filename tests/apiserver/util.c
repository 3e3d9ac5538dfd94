/* SPDX-License-Identifier: Apache-2.0 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t mono_once = PTHREAD_ONCE_INIT;
static int64_t mono_base_ms;

static int64_t mono_raw_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void mono_init(void)
{
    mono_base_ms = mono_raw_ms();
}

int64_t as_mono_ms(void)
{
    pthread_once(&mono_once, mono_init);
    return mono_raw_ms() - mono_base_ms;
}

int64_t as_clock_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t as_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

char *as_rfc3339(int64_t wall_us, bool micro, char out[32])
{
    int64_t secs = wall_us / 1000000;
    int64_t frac = wall_us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        secs -= 1;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        snprintf(out, 32, "1970-01-01T00:00:00Z");
        return out;
    }
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    if (micro)
        snprintf(out, 32, "%s.%06lldZ", base, (long long)frac);
    else
        snprintf(out, 32, "%sZ", base);
    return out;
}

bool as_parse_ll(const char *s, long long min, long long max, long long *out)
{
    if (!s || !*s)
        return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return false;
    /* strtoll skips leading blanks and accepts '+'; a strict parser does not. */
    if (s[0] != '-' && (s[0] < '0' || s[0] > '9'))
        return false;
    *out = v;
    return true;
}

bool as_random_hex(size_t nbytes, char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char buf[64];
    if (nbytes > sizeof buf)
        return false;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(buf + got, nbytes - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[buf[i] >> 4];
        out[2 * i + 1] = hex[buf[i] & 15];
    }
    out[2 * nbytes] = '\0';
    return true;
}

char *as_read_file(const char *path, size_t cap, size_t *len)
{
    char *buf = NULL;
    size_t used = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    buf = malloc(cap + 1);
    if (!buf)
        goto fail;
    for (;;) {
        if (used == cap) {
            char probe;
            ssize_t extra = read(fd, &probe, 1);
            if (extra > 0) {
                errno = EFBIG;
                goto fail;
            }
            if (extra < 0 && errno == EINTR)
                continue;
            if (extra < 0)
                goto fail;
            break;
        }
        ssize_t n = read(fd, buf + used, cap - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto fail;
        if (n == 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    buf[used] = '\0';
    *len = used;
    return buf;
fail : {
    int saved = errno;
    free(buf);
    close(fd);
    errno = saved;
    return NULL;
}
}

int as_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode)
{
    int rc = -1;
    int fd = -1;
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return -1;
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            goto out;
        p += w;
        left -= (size_t)w;
    }
    /* The umask may have narrowed the mode; tokens must stay 0600, and the
     * CA certificate must stay readable. */
    if (fchmod(fd, (mode_t)mode) != 0)
        goto out;
    if (close(fd) != 0) {
        fd = -1;
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto out;
    rc = 0;
out:
    if (rc != 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        errno = saved;
    }
    return rc;
}

char *as_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}
