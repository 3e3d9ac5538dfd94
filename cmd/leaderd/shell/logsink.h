/* SPDX-License-Identifier: Apache-2.0 */
/*
 * logsink: the daemon's log output. Installs a sink into lib/base/log.h that
 * writes one line per message to stderr, as text or as JSON lines, with a
 * single write(2) per line so lines from different threads never interleave.
 */
#ifndef LEADERD_LOGSINK_H
#define LEADERD_LOGSINK_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

enum ld_log_format { LD_LOG_FORMAT_TEXT = 0, LD_LOG_FORMAT_JSON = 1 };

/* Longest line written, newline included. Longer messages are cut (at a
 * UTF-8 character boundary) and end in "...". Kept at PIPE_BUF so a line
 * written to a pipe (the usual container log) is atomic. */
#define LD_LOGSINK_MAX_LINE 4096

/* Installs the stderr sink with the lowest level to print. lease
 * ("NAMESPACE/NAME") and identity are copied; they only appear in JSON
 * lines. Not thread-safe: call before any thread starts (see lib/base/log.h).
 * May be called again to change format, level or fields. */
void ld_logsink_install(enum ld_log_format format, enum ld_log_level min_level,
                        const char *lease, const char *identity);

/* Formats one line exactly as the sink writes it, newline included, into
 * buf (cap bytes, at most LD_LOGSINK_MAX_LINE are used), NUL-terminated,
 * and returns its length; 0 (nothing written) when cap < 2. Text:
 *   2026-11-29T19:00:00.123Z info leaderd: message
 * JSON:
 *   {"time":"...","level":"info","msg":"...","lease":"ns/name","identity":"..."}
 * Control characters are escaped and invalid UTF-8 becomes U+FFFD in both
 * formats, so one message is always one line. Pure; exposed for tests. */
size_t ld_logsink_format(char *buf, size_t cap, enum ld_log_format format,
                         enum ld_log_level level, int64_t wall_us, const char *msg,
                         const char *lease, const char *identity);

/* "debug", "info", "warn", "error". */
const char *ld_log_level_name(enum ld_log_level level);

#endif
