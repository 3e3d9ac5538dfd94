/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/timefmt: MicroTime formatting and parsing, Go
 * durations. libc's gmtime_r serves as an independent oracle for dates.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "timefmt.h"
#include "support/run_suite.h"

#define US INT64_C(1000000)
/* 2024-05-01T12:00:03Z */
#define T2024 INT64_C(1714564803)
#define MIN_US (INT64_C(-62167219200) * US)
#define MAX_US (INT64_C(253402300800) * US - 1)

static void assert_format(int64_t us, const char *want)
{
    char buf[LD_MICROTIME_LEN];

    ck_assert_str_eq(ld_microtime_format(us, buf), want);
}

START_TEST(format_exact)
{
    assert_format(0, "1970-01-01T00:00:00.000000Z");
    assert_format(T2024 * US + 123456, "2024-05-01T12:00:03.123456Z");
    assert_format(T2024 * US, "2024-05-01T12:00:03.000000Z");
    assert_format(-1, "1969-12-31T23:59:59.999999Z");
    assert_format(-US, "1969-12-31T23:59:59.000000Z");
    assert_format(INT64_C(951782400) * US, "2000-02-29T00:00:00.000000Z");
    assert_format(INT64_C(951868800) * US, "2000-03-01T00:00:00.000000Z");
    assert_format(INT64_C(-2203891200) * US, "1900-03-01T00:00:00.000000Z");
    assert_format(MAX_US, "9999-12-31T23:59:59.999999Z");
    assert_format(MIN_US, "0000-01-01T00:00:00.000000Z");
}
END_TEST

START_TEST(format_clamps)
{
    assert_format(MAX_US + 1, "9999-12-31T23:59:59.999999Z");
    assert_format(INT64_MAX, "9999-12-31T23:59:59.999999Z");
    assert_format(MIN_US - 1, "0000-01-01T00:00:00.000000Z");
    assert_format(INT64_MIN, "0000-01-01T00:00:00.000000Z");
}
END_TEST

/* Every 7919th second-ish step across the whole 0000..9999 range, plus odd
 * microseconds: parse(format(x)) == x, and the format is always 27 bytes. */
START_TEST(round_trip_range)
{
    const int64_t step = INT64_C(7919) * 86400 * US + 3723 * US + 987654;
    int n = 0;

    for (int64_t us = MIN_US; us <= MAX_US && n < 100000; us += step, n++) {
        char buf[LD_MICROTIME_LEN];
        int64_t back = 0;
        ld_microtime_format(us, buf);
        ck_assert_uint_eq(strlen(buf), 27);
        ck_assert_int_eq(ld_microtime_parse(buf, &back), LD_OK);
        ck_assert_msg(back == us, "%s: %" PRId64 " != %" PRId64, buf, back, us);
    }
    ck_assert_int_gt(n, 400);
}
END_TEST

/* Against gmtime_r for instants time_t and struct tm can hold. */
START_TEST(matches_libc)
{
    const int64_t step = INT64_C(86400) * 37 + 3599;
    int n = 0;

    for (int64_t s = INT64_C(-62135596800); s < INT64_C(253402300799) && n < 100000;
         s += step, n++) {
        time_t t = (time_t)s;
        struct tm tm;
        char want[96], got[LD_MICROTIME_LEN];
        ck_assert_ptr_nonnull(gmtime_r(&t, &tm));
        snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.000042Z",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec);
        ck_assert_str_eq(ld_microtime_format(s * US + 42, got), want);
    }
}
END_TEST

START_TEST(leap_years)
{
    static const struct {
        const char *text;
        int ok;
    } cases[] = {
        {"2000-02-29T00:00:00Z", 1}, {"2024-02-29T00:00:00Z", 1},
        {"1600-02-29T00:00:00Z", 1}, {"0000-02-29T00:00:00Z", 1},
        {"1900-02-29T00:00:00Z", 0}, {"2100-02-29T00:00:00Z", 0},
        {"2023-02-29T00:00:00Z", 0}, {"2024-02-30T00:00:00Z", 0},
        {"2024-04-31T00:00:00Z", 0}, {"2024-12-31T00:00:00Z", 1},
        {"2024-11-31T00:00:00Z", 0}, {"2024-01-32T00:00:00Z", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t us = 0;
        enum ld_err rc = ld_microtime_parse(cases[i].text, &us);
        ck_assert_msg((rc == LD_OK) == cases[i].ok, "%s", cases[i].text);
    }
}
END_TEST

START_TEST(parse_good)
{
    static const struct {
        const char *text;
        int64_t us;
    } cases[] = {
        {"2024-05-01T12:00:03.123456Z", T2024 * US + 123456},
        {"2024-05-01t12:00:03.123456z", T2024 * US + 123456},
        {"2024-05-01T12:00:03Z", T2024 * US},
        {"2024-05-01T12:00:03.123Z", T2024 * US + 123000},
        {"2024-05-01T12:00:03.5Z", T2024 * US + 500000},
        {"2024-05-01T12:00:03.123456789Z", T2024 * US + 123456},
        {"2024-05-01T12:00:03.999999999Z", T2024 * US + 999999},
        {"2024-05-01T14:00:03.123456+02:00", T2024 * US + 123456},
        {"2024-05-01T06:30:03-05:30", T2024 * US},
        {"2024-05-01T12:00:03+00:00", T2024 * US},
        {"2024-05-02T11:59:03+23:59", T2024 * US},
        {"1969-12-31T23:59:59.5Z", -500000},
        {"1970-01-01T00:00:00.000000Z", 0},
        {"1970-01-01T01:00:00+01:00", 0},
        {"2016-12-31T23:59:60Z", INT64_C(1483228799) * US},
        {"9999-12-31T23:59:59.999999Z", MAX_US},
        {"0000-01-01T00:00:00Z", MIN_US},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t us = -7;
        ck_assert_msg(ld_microtime_parse(cases[i].text, &us) == LD_OK, "%s",
                      cases[i].text);
        ck_assert_msg(us == cases[i].us, "%s: %" PRId64, cases[i].text, us);
    }
}
END_TEST

START_TEST(parse_bad)
{
    static const char *const cases[] = {
        "",
        "2024-05-01T12:00:03.123456",
        "2024-05-01T12:00:03",
        "2024-05-01",
        "2024-13-01T12:00:03Z",
        "2024-00-01T12:00:03Z",
        "2024-05-00T12:00:03Z",
        "2024-05-01T24:00:00Z",
        "2024-05-01T12:60:00Z",
        "2024-05-01T12:00:61Z",
        "2024-05-01T12:00:03Zjunk",
        "2024-05-01T12:00:03Z ",
        " 2024-05-01T12:00:03Z",
        "2024-05-01T12:00:03.Z",
        "2024-05-01T12:00:03.1234567890Z",
        "2024-05-01 12:00:03Z",
        "2024-5-01T12:00:03Z",
        "24-05-01T12:00:03Z",
        "+2024-05-01T12:00:03Z",
        "2024-05-01T12:00:03+2:00",
        "2024-05-01T12:00:03+0200",
        "2024-05-01T12:00:03+24:00",
        "2024-05-01T12:00:03+02:60",
        "2024-05-01T12:00:03+02:00:00",
        "2024-05-01T12:00:03UTC",
        "2024-05-01T1a:00:03Z",
        "2024-05-01T12:00:03,5Z",
        "null",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t us = 4242;
        ck_assert_msg(ld_microtime_parse(cases[i], &us) == LD_EDECODE, "%s", cases[i]);
        ck_assert_int_eq(us, 4242);
    }
    ck_assert_int_eq(ld_microtime_parse(NULL, &(int64_t){0}), LD_EDECODE);
}
END_TEST

START_TEST(duration_good)
{
    static const struct {
        const char *text;
        int64_t ms;
    } cases[] = {
        {"0", 0},
        {"-0", 0},
        {"+0", 0},
        {"0s", 0},
        {"1s", 1000},
        {"15s", 15000},
        {"500ms", 500},
        {"1.5s", 1500},
        {".5s", 500},
        {"1.s", 1000},
        {"1m30s", 90000},
        {"1h2m3.5s", 3723500},
        {"1h", 3600000},
        {"2h45m", 9900000},
        {"-1s", -1000},
        {"-1.5h", -5400000},
        {"+2s", 2000},
        {"1500us", 1},
        {"1500\xc2\xb5s", 1},
        {"1500\xce\xbcs", 1},
        {"999999ns", 0},
        {"1000000ns", 1},
        {"0.9999999ms", 0},
        {"0.5ms0.5ms", 1},
        {"500000ns500000ns", 1},
        {"-1999us", -1},
        {"1.0000000000000000000000001h", 3600000},
        {"0.001s", 1},
        {"0.0009s", 0},
        {"1s1s1s", 3000},
        {"9223372036854775807ms", INT64_MAX},
        {"-9223372036854775807ms", -INT64_MAX},
        {"2562047788015h", INT64_C(2562047788015) * 3600000},
        {"9223372036854775806ms1000000ns", INT64_MAX},
        {"18446744073709551615ns", INT64_C(18446744073709)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t ms = -42;
        ck_assert_msg(ld_duration_parse(cases[i].text, &ms) == LD_OK, "%s",
                      cases[i].text);
        ck_assert_msg(ms == cases[i].ms, "%s: %" PRId64, cases[i].text, ms);
    }
}
END_TEST

START_TEST(duration_bad)
{
    static const char *const cases[] = {
        "",
        "1",
        "-",
        "+",
        "s",
        "ms",
        "1x",
        "1s2",
        "1S",
        "1 s",
        " 1s",
        "1s ",
        ".s",
        "1..5s",
        "--1s",
        "1e3s",
        "1sec",
        "1mss",
        "00",
        "9999999999999999h",
        "2562047788016h",
        "9223372036854775808ms",
        "9223372036854775807ms1000000ns",
        "9223372036854775807ms1ms",
        "18446744073709551616ns",
        "99999999999999999999999s",
        "\xc2s",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t ms = 77;
        ck_assert_msg(ld_duration_parse(cases[i], &ms) == LD_EINVAL, "%s", cases[i]);
        ck_assert_int_eq(ms, 77);
    }
    ck_assert_int_eq(ld_duration_parse(NULL, &(int64_t){0}), LD_EINVAL);
}
END_TEST

START_TEST(duration_format)
{
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "0s"},
        {1, "1ms"},
        {500, "500ms"},
        {999, "999ms"},
        {1000, "1s"},
        {1500, "1.5s"},
        {1250, "1.25s"},
        {1001, "1.001s"},
        {2000, "2s"},
        {59999, "59.999s"},
        {60000, "1m"},
        {90000, "1m30s"},
        {60500, "1m0.5s"},
        {3600000, "1h"},
        {3601000, "1h1s"},
        {3660000, "1h1m"},
        {3723500, "1h2m3.5s"},
        {-1000, "-1s"},
        {-500, "-500ms"},
        {-90000, "-1m30s"},
        {INT64_MAX, "2562047788015h12m55.807s"},
        {INT64_MIN, "-2562047788015h12m55.808s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        ck_assert_str_eq(ld_duration_format(cases[i].ms, buf, sizeof buf), cases[i].want);
    }
}
END_TEST

START_TEST(duration_format_truncates)
{
    char buf[4] = "zzz";

    ck_assert_str_eq(ld_duration_format(90000, buf, sizeof buf), "1m3");
    ck_assert_ptr_eq(ld_duration_format(90000, buf, 0), buf);
    ck_assert_str_eq(buf, "1m3");
}
END_TEST

/* Whatever format writes, parse reads back to the same value. */
START_TEST(duration_round_trip)
{
    int64_t v = 1;
    int n = 0;

    for (; n < 200 && v < INT64_MAX / 3; n++, v = v * 3 + n) {
        int64_t vals[2] = {v, -v};
        for (int k = 0; k < 2; k++) {
            char buf[64];
            int64_t back = 0;
            ld_duration_format(vals[k], buf, sizeof buf);
            ck_assert_msg(ld_duration_parse(buf, &back) == LD_OK, "%s", buf);
            ck_assert_msg(back == vals[k], "%s: %" PRId64, buf, back);
        }
    }
    ck_assert_int_gt(n, 30);
}
END_TEST

static Suite *timefmt_suite(void)
{
    Suite *s = suite_create("timefmt");
    TCase *mt = tcase_create("microtime");
    TCase *du = tcase_create("duration");

    tcase_add_test(mt, format_exact);
    tcase_add_test(mt, format_clamps);
    tcase_add_test(mt, round_trip_range);
    tcase_add_test(mt, matches_libc);
    tcase_add_test(mt, leap_years);
    tcase_add_test(mt, parse_good);
    tcase_add_test(mt, parse_bad);
    tcase_add_test(du, duration_good);
    tcase_add_test(du, duration_bad);
    tcase_add_test(du, duration_format);
    tcase_add_test(du, duration_format_truncates);
    tcase_add_test(du, duration_round_trip);
    suite_add_tcase(s, mt);
    suite_add_tcase(s, du);
    return s;
}

int main(void)
{
    return ld_test_run(timefmt_suite());
}
