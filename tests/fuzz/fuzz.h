/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz: what every libFuzzer harness in tests/fuzz shares. The entry points
 * libFuzzer calls, and small helpers that turn the raw input into C
 * strings. A broken invariant aborts, which libFuzzer reports as a crash.
 */
#ifndef LEADERD_FUZZ_H
#define LEADERD_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional: defined only by harnesses that set the process up first. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Aborts with the failed condition: the sanitizer runtime prints a stack and
 * libFuzzer saves the input as a crash artifact. */
#define FUZZ_CHECK(cond)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

/* A new NUL-terminated copy of data[0..size) (free with free()); C string
 * APIs then see the input up to its first NUL. Aborts when out of memory:
 * libFuzzer's malloc limit already reports that case. */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (!s)
        abort();
    if (size > 0)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Consumes up to n bytes of *data as a little-endian integer (missing bytes
 * are zero), so short inputs still drive every field. */
static inline uint64_t fuzz_take(const uint8_t **data, size_t *size, size_t n)
{
    uint64_t v = 0;

    for (size_t i = 0; i < n; i++) {
        uint64_t b = 0;
        if (*size > 0) {
            b = **data;
            (*data)++;
            (*size)--;
        }
        v |= b << (8 * i);
    }
    return v;
}

/* Checks that v, formatted as text, read back as want: parse answered rc
 * and back. what names the value in the message. */
static inline void fuzz_check_read_back(const char *what, int64_t v, const char *text,
                                        enum ld_err rc, int64_t back, int64_t want)
{
    if (rc != LD_OK || back != want) {
        fprintf(stderr, "%s %lld formats as \"%s\", parses back as %lld\n", what,
                (long long)v, text, (long long)back);
        FUZZ_CHECK(!"format -> parse round trip");
    }
}

/* A whole harness for a text form of int64 values (fuzz_duration,
 * fuzz_microtime): parse takes the input as text and either accepts it,
 * and then check_parsed and round_trip judge the value, or answers
 * `refused` and leaves the value alone. round_trip then also runs on an
 * arbitrary int64 taken from the input. Returns 0 for libFuzzer. */
static inline int fuzz_int64_text(const uint8_t *data, size_t size,
                                  enum ld_err (*parse)(const char *, int64_t *),
                                  enum ld_err refused,
                                  void (*check_parsed)(const char *text, int64_t v),
                                  void (*round_trip)(int64_t v))
{
    char *text = fuzz_strndup(data, size);
    int64_t v = 424242;
    enum ld_err rc = parse(text, &v);

    FUZZ_CHECK(rc == LD_OK || rc == refused);
    if (rc == LD_OK) {
        check_parsed(text, v);
        round_trip(v);
    } else {
        FUZZ_CHECK(v == 424242);
    }
    free(text);

    round_trip((int64_t)fuzz_take(&data, &size, 8));
    return 0;
}

/* True when s[0..n) is well-formed UTF-8 (no overlongs, no surrogates).
 * Written from the Unicode standard's Table 3-7 rather than by decoding,
 * unlike the code under test, so that a mistake shared with it is unlikely. */
static inline bool fuzz_utf8_valid(const char *s, size_t n)
{
    /* Table 3-7: the range of a sequence's first byte, its length, and the
     * range of its second byte; any further byte is 80..BF. */
    static const struct {
        unsigned char first_min, first_max;
        size_t len;
        unsigned char second_min, second_max;
    } rows[] = {
        {0x00, 0x7f, 1, 0, 0},       {0xc2, 0xdf, 2, 0x80, 0xbf},
        {0xe0, 0xe0, 3, 0xa0, 0xbf}, {0xe1, 0xec, 3, 0x80, 0xbf},
        {0xed, 0xed, 3, 0x80, 0x9f}, {0xee, 0xef, 3, 0x80, 0xbf},
        {0xf0, 0xf0, 4, 0x90, 0xbf}, {0xf1, 0xf3, 4, 0x80, 0xbf},
        {0xf4, 0xf4, 4, 0x80, 0x8f},
    };
    const size_t nrows = sizeof rows / sizeof rows[0];
    const unsigned char *u = (const unsigned char *)s;

    for (size_t i = 0; i < n;) {
        size_t r = 0;
        while (r < nrows && (u[i] < rows[r].first_min || u[i] > rows[r].first_max))
            r++;
        if (r == nrows || n - i < rows[r].len)
            return false;
        for (size_t k = 1; k < rows[r].len; k++) {
            unsigned char min = k == 1 ? rows[r].second_min : 0x80;
            unsigned char max = k == 1 ? rows[r].second_max : 0xbf;
            if (u[i + k] < min || u[i + k] > max)
                return false;
        }
        i += rows[r].len;
    }
    return true;
}

#endif
