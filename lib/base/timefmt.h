/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timefmt: text forms of time. Kubernetes MicroTime (RFC 3339 with exactly
 * six fractional digits, UTC) for the Lease, and Go-style durations
 * ("1m30s", "500ms") for flags. Pure functions: no clock, no allocation.
 */
#ifndef LEADERD_TIMEFMT_H
#define LEADERD_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Big enough for "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" plus NUL. */
#define LD_MICROTIME_LEN 32

/* Writes wall_us (microseconds since the Unix epoch, may be negative for
 * dates before 1970) as "2006-01-02T15:04:05.000000Z" into out, which must
 * hold LD_MICROTIME_LEN bytes. Returns out. Years outside 0000..9999 are
 * clamped to that range, as no Kubernetes server accepts them. */
char *ld_microtime_format(int64_t wall_us, char out[LD_MICROTIME_LEN]);

/* Parses an RFC 3339 timestamp: fraction optional with 1..9 digits (digits
 * past microseconds are truncated), "Z" or "+hh:mm"/"-hh:mm" required.
 * Input is lenient so any server or peer's form decodes; output is strict.
 * Returns LD_OK or LD_EDECODE; *wall_us untouched on error. */
enum ld_err ld_microtime_parse(const char *text, int64_t *wall_us);

/* Parses a Go duration: an optional sign, then one or more decimal numbers
 * (fraction allowed) each with a unit ns, us, µs, ms, s, m, h; a lone "0"
 * is zero. Results are rounded down to whole milliseconds. Rejects empty
 * input, missing units, unknown units, and anything over INT64_MAX ms.
 * Returns LD_OK or LD_EINVAL; *ms untouched on error. */
enum ld_err ld_duration_parse(const char *text, int64_t *ms);

/* Formats ms as the shortest Go-style string ("1m30s", "500ms", "2s",
 * "1h0m0s" is written "1h"), into out of size outlen. Returns out. */
char *ld_duration_format(int64_t ms, char *out, size_t outlen);

#endif
