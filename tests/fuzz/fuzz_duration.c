/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_duration: ld_duration_parse on arbitrary text, and the
 * format -> parse round trip both for what parsed and for an arbitrary
 * int64 taken from the input: every duration leaderd prints (in --help,
 * errors and the startup line) must read back as the same value.
 */
#include "fuzz.h"

#include "timefmt.h"

/* Longest formatted duration ("-2562047788015h12m55.807s") plus slack. */
#define DUR_BUF 48

static void check_parsed(const char *text, int64_t ms)
{
    FUZZ_CHECK(ms != INT64_MIN);
    /* A sign is the only way to get a negative value. */
    FUZZ_CHECK(ms >= 0 || text[0] == '-');
}

static void round_trip(int64_t ms)
{
    char buf[DUR_BUF];
    int64_t back = 12345;

    ld_duration_format(ms, buf, sizeof buf);
    FUZZ_CHECK(strlen(buf) < sizeof buf - 1);
    if (ms == INT64_MIN) {
        /* Its magnitude is over INT64_MAX ms, which parse refuses. */
        FUZZ_CHECK(ld_duration_parse(buf, &back) == LD_EINVAL && back == 12345);
        return;
    }
    fuzz_check_read_back("duration", ms, buf, ld_duration_parse(buf, &back), back, ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_int64_text(data, size, ld_duration_parse, LD_EINVAL, check_parsed,
                           round_trip);
}
