/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timefmt: MicroTime and Go duration text forms.
 *
 * Calendar arithmetic is done here (days-from-civil) instead of through
 * timegm/gmtime so results do not depend on TZ, locale or the range of
 * time_t, and are defined for every int64 input.
 */
#include "timefmt.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define US_PER_SEC INT64_C(1000000)
#define SEC_PER_DAY INT64_C(86400)
/* 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z as Unix microseconds. */
#define MIN_WALL_US (INT64_C(-62167219200) * US_PER_SEC)
#define MAX_WALL_US (INT64_C(253402300800) * US_PER_SEC - 1)

#define NS_PER_MS UINT64_C(1000000)
#define NS_PER_SEC UINT64_C(1000000000)

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Proleptic Gregorian date to days since 1970-01-01 (H. Hinnant's
 * algorithm); exact for any year that fits. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = floor_div(z, 146097);
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;

    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static unsigned days_in_month(int64_t y, unsigned m)
{
    static const unsigned len[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return (m == 2 && leap) ? 29 : len[m - 1];
}

/* Writes v as exactly width decimal digits (v fits by construction). */
static char *put_digits(char *p, unsigned v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + width;
}

static char *put_sep(char *p, char c)
{
    *p = c;
    return p + 1;
}

char *ld_microtime_format(int64_t wall_us, char out[LD_MICROTIME_LEN])
{
    int64_t y;
    unsigned mo, d;
    char *p = out;

    if (wall_us < MIN_WALL_US)
        wall_us = MIN_WALL_US;
    if (wall_us > MAX_WALL_US)
        wall_us = MAX_WALL_US;
    int64_t secs = floor_div(wall_us, US_PER_SEC);
    int64_t days = floor_div(secs, SEC_PER_DAY);
    unsigned sod = (unsigned)(secs - days * SEC_PER_DAY);

    civil_from_days(days, &y, &mo, &d);
    p = put_sep(put_digits(p, (unsigned)y, 4), '-');
    p = put_sep(put_digits(p, mo, 2), '-');
    p = put_sep(put_digits(p, d, 2), 'T');
    p = put_sep(put_digits(p, sod / 3600, 2), ':');
    p = put_sep(put_digits(p, sod / 60 % 60, 2), ':');
    p = put_sep(put_digits(p, sod % 60, 2), '.');
    p = put_sep(put_digits(p, (unsigned)(wall_us - secs * US_PER_SEC), 6), 'Z');
    *p = '\0';
    return out;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Reads exactly n digits at *p and advances past them. */
static bool take_digits(const char **p, int n, unsigned *out)
{
    unsigned v = 0;

    for (int i = 0; i < n; i++) {
        if (!is_digit((*p)[i]))
            return false;
        v = v * 10 + (unsigned)((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

static bool take_char(const char **p, char a, char b)
{
    if (**p != a && **p != b)
        return false;
    (*p)++;
    return true;
}

/* Optional ".d{1,9}"; digits past the sixth are dropped (truncation). */
static bool take_fraction(const char **p, int64_t *us)
{
    int n = 0;
    int64_t v = 0;

    *us = 0;
    if (**p != '.')
        return true;
    (*p)++;
    for (; is_digit(**p); (*p)++, n++) {
        if (n < 6)
            v = v * 10 + (**p - '0');
    }
    if (n < 1 || n > 9)
        return false;
    for (int i = n; i < 6; i++)
        v *= 10;
    *us = v;
    return true;
}

/* "Z", "z" or "+hh:mm" / "-hh:mm"; *off_s is what to subtract to get UTC. */
static bool take_offset(const char **p, int64_t *off_s)
{
    unsigned hh, mm;
    char sign = **p;

    *off_s = 0;
    if (take_char(p, 'Z', 'z'))
        return true;
    if (!take_char(p, '+', '-'))
        return false;
    if (!take_digits(p, 2, &hh) || !take_char(p, ':', ':') || !take_digits(p, 2, &mm))
        return false;
    if (hh > 23 || mm > 59)
        return false;
    *off_s = (int64_t)(hh * 3600 + mm * 60) * (sign == '-' ? -1 : 1);
    return true;
}

struct civil_time {
    unsigned y, mo, d, h, mi, s;
};

static bool take_civil(const char **p, struct civil_time *t)
{
    return take_digits(p, 4, &t->y) && take_char(p, '-', '-') &&
           take_digits(p, 2, &t->mo) && take_char(p, '-', '-') &&
           take_digits(p, 2, &t->d) && take_char(p, 'T', 't') &&
           take_digits(p, 2, &t->h) && take_char(p, ':', ':') &&
           take_digits(p, 2, &t->mi) && take_char(p, ':', ':') &&
           take_digits(p, 2, &t->s);
}

static bool civil_valid(const struct civil_time *t)
{
    return t->mo >= 1 && t->mo <= 12 && t->d >= 1 && t->d <= days_in_month(t->y, t->mo) &&
           t->h < 24 && t->mi < 60 && t->s <= 60;
}

enum ld_err ld_microtime_parse(const char *text, int64_t *wall_us)
{
    struct civil_time t;
    int64_t frac_us, off_s;
    const char *p = text;

    if (!text || !wall_us)
        return LD_EDECODE;
    if (!take_civil(&p, &t) || !civil_valid(&t) || !take_fraction(&p, &frac_us) ||
        !take_offset(&p, &off_s) || *p != '\0')
        return LD_EDECODE;
    /* RFC 3339 permits a leap second; POSIX time has none, so :60 is
     * folded into :59 rather than rolling into the next minute. */
    unsigned sec = t.s == 60 ? 59 : t.s;
    int64_t secs = days_from_civil(t.y, t.mo, t.d) * SEC_PER_DAY +
                   (int64_t)(t.h * 3600 + t.mi * 60 + sec) - off_s;
    int64_t us = secs * US_PER_SEC + frac_us;
    /* An offset can push a year-0000 or year-9999 time out of 0000..9999
     * UTC. Go refuses to marshal such a MicroTime, so no server or peer
     * writes one, and ld_microtime_format could not write it back: a Lease
     * carrying it would be changed by a mere rewrite. */
    if (us < MIN_WALL_US || us > MAX_WALL_US)
        return LD_EDECODE;
    *wall_us = us;
    return LD_OK;
}

/* A non-negative duration as whole ms plus a sub-ms remainder, so the sum of
 * several components is exact before the final truncation to ms. */
struct dur_acc {
    uint64_t ms; /* <= INT64_MAX */
    uint64_t ns; /* < NS_PER_MS */
};

static bool acc_add_ms(struct dur_acc *a, uint64_t ms)
{
    if (ms > (uint64_t)INT64_MAX - a->ms)
        return false;
    a->ms += ms;
    return true;
}

static bool acc_add_ns(struct dur_acc *a, uint64_t ns)
{
    if (!acc_add_ms(a, ns / NS_PER_MS))
        return false;
    a->ns += ns % NS_PER_MS;
    if (a->ns < NS_PER_MS)
        return true;
    a->ns -= NS_PER_MS;
    return acc_add_ms(a, 1);
}

struct dur_unit {
    const char *name;
    uint64_t ns;
};

/* Both micro signs Go accepts: U+00B5 and U+03BC. */
static const struct dur_unit dur_units[] = {
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000},
    {"\xce\xbcs", 1000},
    {"ms", NS_PER_MS},
    {"s", NS_PER_SEC},
    {"m", 60 * NS_PER_SEC},
    {"h", 3600 * NS_PER_SEC},
};

/* The unit runs until the next digit, '.' or the end, as in Go. */
static const struct dur_unit *take_unit(const char **p)
{
    size_t n = 0;

    while ((*p)[n] != '\0' && (*p)[n] != '.' && !is_digit((*p)[n]))
        n++;
    for (size_t i = 0; i < sizeof dur_units / sizeof dur_units[0]; i++) {
        if (strlen(dur_units[i].name) == n && memcmp(dur_units[i].name, *p, n) == 0) {
            *p += n;
            return &dur_units[i];
        }
    }
    return NULL;
}

/* The integer part must fit in uint64; Go's own limit (int64 ns) is lower. */
static bool take_uint(const char **p, uint64_t *v, bool *any)
{
    *v = 0;
    *any = false;
    for (; is_digit(**p); (*p)++) {
        unsigned d = (unsigned)(**p - '0');
        if (*v > (UINT64_MAX - d) / 10)
            return false;
        *v = *v * 10 + d;
        *any = true;
    }
    return true;
}

static bool add_whole(struct dur_acc *a, uint64_t v, uint64_t unit_ns)
{
    if (unit_ns >= NS_PER_MS) {
        uint64_t per = unit_ns / NS_PER_MS;
        return v <= (uint64_t)INT64_MAX / per && acc_add_ms(a, v * per);
    }
    uint64_t per_ms = NS_PER_MS / unit_ns;
    return acc_add_ms(a, v / per_ms) && acc_add_ns(a, (v % per_ms) * unit_ns);
}

/* floor(0.<digits> * unit_ns), exact: folding the digits from the last one
 * with floor((x + d*u) / 10) equals the floor of the whole sum. */
static bool add_fraction(struct dur_acc *a, const char *digits, size_t n,
                         uint64_t unit_ns)
{
    uint64_t x = 0;

    for (size_t i = n; i > 0; i--)
        x = (x + (uint64_t)(digits[i - 1] - '0') * unit_ns) / 10;
    return acc_add_ns(a, x);
}

static bool take_component(const char **p, struct dur_acc *a)
{
    uint64_t whole;
    bool pre, post = false;
    const char *frac = NULL;
    size_t nfrac = 0;

    if (!take_uint(p, &whole, &pre))
        return false;
    if (**p == '.') {
        frac = ++(*p);
        while (is_digit(**p))
            (*p)++;
        nfrac = (size_t)(*p - frac);
        post = nfrac > 0;
    }
    if (!pre && !post)
        return false;
    const struct dur_unit *u = take_unit(p);
    if (!u)
        return false;
    return add_whole(a, whole, u->ns) && add_fraction(a, frac, nfrac, u->ns);
}

enum ld_err ld_duration_parse(const char *text, int64_t *ms)
{
    struct dur_acc acc = {0, 0};
    const char *p = text;
    bool neg = false;

    if (!text || !ms)
        return LD_EINVAL;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (strcmp(p, "0") == 0) {
        *ms = 0;
        return LD_OK;
    }
    if (*p == '\0')
        return LD_EINVAL;
    while (*p != '\0') {
        if (!take_component(&p, &acc))
            return LD_EINVAL;
    }
    *ms = neg ? -(int64_t)acc.ms : (int64_t)acc.ms;
    return LD_OK;
}

/* "s" part for a duration >= 1 s: seconds with the ms fraction, trailing
 * zeros trimmed ("3.5s"), or "" when both are zero ("1h"). */
static void format_seconds(uint64_t s, unsigned frac_ms, char *buf, size_t len)
{
    if (frac_ms == 0 && s == 0)
        buf[0] = '\0';
    else if (frac_ms == 0)
        snprintf(buf, len, "%" PRIu64 "s", s);
    else if (frac_ms % 100 == 0)
        snprintf(buf, len, "%" PRIu64 ".%us", s, frac_ms / 100);
    else if (frac_ms % 10 == 0)
        snprintf(buf, len, "%" PRIu64 ".%02us", s, frac_ms / 10);
    else
        snprintf(buf, len, "%" PRIu64 ".%03us", s, frac_ms);
}

char *ld_duration_format(int64_t ms, char *out, size_t outlen)
{
    char hpart[32] = "", mpart[8] = "", spart[16];
    uint64_t mag = ms < 0 ? (uint64_t)0 - (uint64_t)ms : (uint64_t)ms;
    const char *sign = ms < 0 ? "-" : "";

    if (!out || outlen == 0)
        return out;
    if (mag < 1000) {
        snprintf(out, outlen, "%s%" PRIu64 "%s", sign, mag, mag == 0 ? "s" : "ms");
        return out;
    }
    uint64_t h = mag / 3600000, m = mag / 60000 % 60;
    if (h > 0)
        snprintf(hpart, sizeof hpart, "%" PRIu64 "h", h);
    if (m > 0)
        snprintf(mpart, sizeof mpart, "%" PRIu64 "m", m);
    format_seconds(mag / 1000 % 60, (unsigned)(mag % 1000), spart, sizeof spart);
    snprintf(out, outlen, "%s%s%s%s", sign, hpart, mpart, spart);
    return out;
}
