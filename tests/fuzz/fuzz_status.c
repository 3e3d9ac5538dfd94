/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_status: ld_status_decode on arbitrary response bodies (Status JSON,
 * proxies' HTML, plain text). It must never fail, must leave reason and msg
 * NUL-terminated single lines fit for a log, and may only set a sane retry
 * hint.
 */
#include "fuzz.h"

#include "lease.h"

/* A Retry-After the caller already stored; the body may replace it only
 * with a hint of 0..3600 s. */
#define SENTINEL_RETRY_MS 777

static void check_line(const char *s, size_t cap)
{
    const char *end = memchr(s, '\0', cap);

    FUZZ_CHECK(end != NULL);
    for (const char *p = s; p < end; p++) {
        unsigned char c = (unsigned char)*p;
        FUZZ_CHECK(c >= 0x20 && c != 0x7f);
    }
    FUZZ_CHECK(fuzz_utf8_valid(s, (size_t)(end - s)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ld_errinfo err;

    ld_errinfo_clear(&err);
    err.code = LD_ESERVER;
    err.http_status = 503;
    err.retry_after_ms = SENTINEL_RETRY_MS;
    /* Old contents in a byte the decoder never writes: check_line then
     * catches anything of them that survives. */
    memset(err.reason, 0x01, sizeof err.reason - 1);
    memset(err.msg, 0x01, sizeof err.msg - 1);
    ld_status_decode((const char *)data, size, &err);

    FUZZ_CHECK(err.code == LD_ESERVER);
    FUZZ_CHECK(err.http_status == 503);
    FUZZ_CHECK(err.retry_after_ms == SENTINEL_RETRY_MS ||
               (err.retry_after_ms >= 0 && err.retry_after_ms <= 3600 * 1000 &&
                err.retry_after_ms % 1000 == 0));
    check_line(err.reason, sizeof err.reason);
    check_line(err.msg, sizeof err.msg);

    ld_status_decode(NULL, size, &err);
    FUZZ_CHECK(err.msg[0] == '\0' && err.reason[0] == '\0');
    return 0;
}
