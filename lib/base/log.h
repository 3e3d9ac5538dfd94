/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log: the library's only way to say something. lib/ never prints; it calls
 * the sink the application installed (none by default). The sink receives
 * one complete message per call, without a trailing newline.
 */
#ifndef LEADERD_LOG_H
#define LEADERD_LOG_H

enum ld_log_level {
    LD_LOG_DEBUG = 0,
    LD_LOG_INFO = 1,
    LD_LOG_WARN = 2,
    LD_LOG_ERROR = 3
};

typedef void (*ld_log_sink_fn)(void *ctx, enum ld_log_level level, const char *msg);

/* Installs sink (NULL to silence) and the lowest level it wants. Not
 * thread-safe against concurrent ld_log calls: install before threads. */
void ld_log_set_sink(ld_log_sink_fn sink, void *ctx, enum ld_log_level min_level);

/* True when a message at level would reach the sink. */
int ld_log_enabled(enum ld_log_level level);

void ld_log(enum ld_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
