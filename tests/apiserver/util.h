/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util: small helpers shared by the leaderd-apiserver modules: clocks,
 * strict integer parsing, random hex, whole-file reads and atomic writes,
 * RFC 3339 formatting. No module state; every function is thread-safe.
 */
#ifndef AS_UTIL_H
#define AS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Milliseconds on CLOCK_MONOTONIC since the first call in this process. */
int64_t as_mono_ms(void);

/* Microseconds on CLOCK_MONOTONIC as the kernel counts them (no offset), so
 * other processes on the host (Python's time.monotonic()) can compare. */
int64_t as_clock_us(void);

/* Wall clock in microseconds since the Unix epoch. */
int64_t as_wall_us(void);

/* Formats wall_us as RFC 3339 UTC: with six fractional digits when micro is
 * true ("2006-01-02T15:04:05.000000Z"), else whole seconds. out must hold 32
 * bytes. Returns out. */
char *as_rfc3339(int64_t wall_us, bool micro, char out[32]);

/* Parses a decimal integer in [min, max] with nothing else around it.
 * Returns true and sets *out on success; *out untouched on failure. */
bool as_parse_ll(const char *s, long long min, long long max, long long *out);

/* Fills out (2*nbytes+1 bytes) with nbytes of random data as lowercase hex.
 * Returns false when the system random source fails. */
bool as_random_hex(size_t nbytes, char *out);

/* Reads a whole file of at most cap bytes. Returns a new NUL-terminated
 * buffer (free with free()) and sets *len, or NULL with errno set (EFBIG
 * when over cap). */
char *as_read_file(const char *path, size_t cap, size_t *len);

/* Writes data to path through path.tmp.PID and rename(2), so readers see
 * the old or the new content, never a mix. mode applies to the new file.
 * Returns 0 or -1 with errno set. */
int as_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode);

/* Joins dir and name with a '/' into a new string (free with free()), or
 * NULL on allocation failure. */
char *as_path_join(const char *dir, const char *name);

#endif
