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

/* True when s[0..n) is well-formed UTF-8 (no overlongs, no surrogates). */
static inline bool fuzz_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;

    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1fu;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0fu;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07u;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((u[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (u[i + k] & 0x3fu);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

#endif
