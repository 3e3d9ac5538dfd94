/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_microtime: ld_microtime_parse on arbitrary text, and the
 * format -> parse round trip for whatever parsed and for an arbitrary
 * int64 from the input. A time that parses but does not format back to
 * itself would change a Lease's acquireTime/renewTime when a leader
 * rewrites it.
 */
#include "fuzz.h"

#include "timefmt.h"

/* 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z, Unix microseconds. */
#define MIN_US (INT64_C(-62167219200) * 1000000)
#define MAX_US (INT64_C(253402300800) * 1000000 - 1)

static void check_parsed(const char *text, int64_t us)
{
    (void)text;
    /* Only years 0000..9999 can be written back (as by Go). */
    FUZZ_CHECK(us >= MIN_US && us <= MAX_US);
}

/* ld_microtime_format clamps a time outside those years into them. */
static void round_trip(int64_t us)
{
    char buf[LD_MICROTIME_LEN];
    int64_t back = 1;
    int64_t want = us < MIN_US ? MIN_US : us > MAX_US ? MAX_US : us;

    ld_microtime_format(us, buf);
    FUZZ_CHECK(strlen(buf) == 27 && buf[26] == 'Z');
    fuzz_check_read_back("time", us, buf, ld_microtime_parse(buf, &back), back, want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_int64_text(data, size, ld_microtime_parse, LD_EDECODE, check_parsed,
                           round_trip);
}
