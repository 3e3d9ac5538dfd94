/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log: forwards library messages to the application's sink.
 *
 * The sink, its context and the minimum level are the one piece of global
 * state in lib/: a logger is process-wide by nature, and passing it through
 * every call would clutter every API. They are written once at startup
 * (ld_log_set_sink, before threads start) and only read afterwards.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

/* Longer messages are truncated; a log line is not a data channel. */
#define LOG_LINE_MAX 1024

static ld_log_sink_fn log_sink;
static void *log_ctx;
static enum ld_log_level log_min = LD_LOG_INFO;

void ld_log_set_sink(ld_log_sink_fn sink, void *ctx, enum ld_log_level min_level)
{
    log_sink = sink;
    log_ctx = ctx;
    log_min = min_level;
}

int ld_log_enabled(enum ld_log_level level)
{
    return log_sink != NULL && level >= log_min;
}

void ld_log(enum ld_log_level level, const char *fmt, ...)
{
    char line[LOG_LINE_MAX];
    va_list ap;

    if (!ld_log_enabled(level))
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_sink(log_ctx, level, line);
}
