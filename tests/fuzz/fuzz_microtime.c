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

static void round_trip(int64_t us, int64_t want)
{
    char buf[LD_MICROTIME_LEN];
    int64_t back = 1;

    ld_microtime_format(us, buf);
    FUZZ_CHECK(strlen(buf) == 27 && buf[26] == 'Z');
    if (ld_microtime_parse(buf, &back) != LD_OK || back != want) {
        fprintf(stderr, "time %lld formats as \"%s\", parses back as %lld\n",
                (long long)us, buf, (long long)back);
        FUZZ_CHECK(!"format -> parse round trip");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size);
    int64_t us = 99;
    enum ld_err rc = ld_microtime_parse(text, &us);

    FUZZ_CHECK(rc == LD_OK || rc == LD_EDECODE);
    if (rc == LD_OK) {
        /* Only years 0000..9999 can be written back (as by Go). */
        FUZZ_CHECK(us >= MIN_US && us <= MAX_US);
        round_trip(us, us);
    } else {
        FUZZ_CHECK(us == 99);
    }
    free(text);

    int64_t v = (int64_t)fuzz_take(&data, &size, 8);
    round_trip(v, v < MIN_US ? MIN_US : v > MAX_US ? MAX_US : v);
    return 0;
}
