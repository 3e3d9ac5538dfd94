/* SPDX-License-Identifier: Apache-2.0 */
/*
 * logsink: one line per message on stderr, text or JSON lines.
 */
#include "logsink.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "state.h"
#include "timefmt.h"
#include "utf8.h"

/* Each of lease and identity takes at most this much of a JSON line, so a
 * huge identity cannot crowd the message out. */
#define FIELD_CAP 1024
#define ELLIPSIS "..."

struct lbuf {
    char *p;
    size_t len;
    size_t cap; /* usable bytes, not counting the NUL */
};

static bool put(struct lbuf *b, const char *s, size_t n)
{
    if (n > b->cap - b->len)
        return false;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return true;
}

static bool puts_(struct lbuf *b, const char *s)
{
    return put(b, s, strlen(s));
}

/* The escaped form of the character at s[i]: *piece and *plen to append, and
 * the number of input bytes it stands for. esc is scratch space. */
static size_t escape_one(const char *s, size_t n, size_t i, bool json, char esc[8],
                         const char **piece, size_t *plen)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t seq = ld_utf8_seq(s + i, n - i);
    unsigned char c = u[i];
    *piece = esc;
    if (seq == 0) {
        *piece = "\xef\xbf\xbd"; /* U+FFFD */
        *plen = 3;
        return 1;
    }
    if (c == '\n' || c == '\r' || c == '\t') {
        esc[0] = '\\';
        esc[1] = (char)(c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
        *plen = 2;
    } else if (c < 0x20 || c == 0x7f) {
        *plen = (size_t)snprintf(esc, 8, json ? "\\u%04x" : "\\x%02x", c);
    } else if (json && (c == '"' || c == '\\')) {
        esc[0] = '\\';
        esc[1] = (char)c;
        *plen = 2;
    } else {
        *piece = s + i;
        *plen = seq;
    }
    return seq;
}

/* Appends s escaped for the format without going past limit bytes of b;
 * when all of it does not fit, appends what does and then "...". */
static void put_escaped(struct lbuf *b, const char *s, size_t limit, bool json)
{
    size_t n = strlen(s);
    size_t need = 0;
    char esc[8];
    const char *piece;
    size_t plen;
    if (limit > b->cap)
        limit = b->cap;
    if (b->len > limit)
        return;
    for (size_t i = 0; i < n;) {
        i += escape_one(s, n, i, json, esc, &piece, &plen);
        need += plen;
    }
    if (need <= limit - b->len) {
        for (size_t i = 0; i < n;) {
            i += escape_one(s, n, i, json, esc, &piece, &plen);
            put(b, piece, plen);
        }
        return;
    }
    if (limit - b->len < sizeof(ELLIPSIS) - 1)
        return;
    limit -= sizeof(ELLIPSIS) - 1;
    for (size_t i = 0; i < n;) {
        i += escape_one(s, n, i, json, esc, &piece, &plen);
        if (plen > limit - b->len)
            break;
        put(b, piece, plen);
    }
    puts_(b, ELLIPSIS);
}

const char *ld_log_level_name(enum ld_log_level level)
{
    switch (level) {
    case LD_LOG_DEBUG:
        return "debug";
    case LD_LOG_INFO:
        return "info";
    case LD_LOG_WARN:
        return "warn";
    case LD_LOG_ERROR:
        return "error";
    }
    return "info";
}

/* MicroTime cut to milliseconds: "2026-11-29T19:00:00.123Z". */
static void format_time(int64_t wall_us, char out[LD_MICROTIME_LEN])
{
    ld_microtime_format(wall_us, out);
    char *dot = strchr(out, '.');
    if (dot && strlen(dot) > 4) {
        dot[4] = 'Z';
        dot[5] = '\0';
    }
}

size_t ld_logsink_format(char *buf, size_t cap, enum ld_log_format format,
                         enum ld_log_level level, int64_t wall_us, const char *msg,
                         const char *lease, const char *identity)
{
    char ts[LD_MICROTIME_LEN];
    char lease_esc[FIELD_CAP + 1];
    char id_esc[FIELD_CAP + 1];
    struct lbuf b = {buf, 0, 0};
    if (cap < 2)
        return 0;
    /* Room is kept for the newline and the NUL, so every line ends in one
     * newline however small the buffer. */
    b.cap = (cap > LD_LOGSINK_MAX_LINE ? LD_LOGSINK_MAX_LINE : cap) - 2;
    format_time(wall_us, ts);
    if (!msg)
        msg = "";
    if (format == LD_LOG_FORMAT_JSON) {
        struct lbuf lb = {lease_esc, 0, FIELD_CAP};
        struct lbuf ib = {id_esc, 0, FIELD_CAP};
        put_escaped(&lb, lease ? lease : "", FIELD_CAP, true);
        put_escaped(&ib, identity ? identity : "", FIELD_CAP, true);
        /* What follows the message: `","lease":"` lease `","identity":"` id `"}` */
        size_t tail = 11 + lb.len + 14 + ib.len + 2;
        puts_(&b, "{\"time\":\"");
        puts_(&b, ts);
        puts_(&b, "\",\"level\":\"");
        puts_(&b, ld_log_level_name(level));
        puts_(&b, "\",\"msg\":\"");
        put_escaped(&b, msg, b.cap > tail ? b.cap - tail : 0, true);
        puts_(&b, "\",\"lease\":\"");
        put(&b, lease_esc, lb.len);
        puts_(&b, "\",\"identity\":\"");
        put(&b, id_esc, ib.len);
        puts_(&b, "\"}");
    } else {
        puts_(&b, ts);
        puts_(&b, " ");
        puts_(&b, ld_log_level_name(level));
        puts_(&b, " leaderd: ");
        put_escaped(&b, msg, b.cap, false);
    }
    buf[b.len++] = '\n';
    buf[b.len] = '\0';
    return b.len;
}

struct sink_ctx {
    enum ld_log_format format;
    char lease[512];
    char identity[FIELD_CAP + 1];
};

static struct sink_ctx g_sink;

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere left to report a failing stderr */
        p += w;
        n -= (size_t)w;
    }
}

static void stderr_sink(void *ctx, enum ld_log_level level, const char *msg)
{
    const struct sink_ctx *s = ctx;
    char line[LD_LOGSINK_MAX_LINE];
    size_t n = ld_logsink_format(line, sizeof(line), s->format, level, ld_wall_us(), msg,
                                 s->lease, s->identity);
    write_all(STDERR_FILENO, line, n);
}

void ld_logsink_install(enum ld_log_format format, enum ld_log_level min_level,
                        const char *lease, const char *identity)
{
    g_sink.format = format;
    snprintf(g_sink.lease, sizeof(g_sink.lease), "%s", lease ? lease : "");
    snprintf(g_sink.identity, sizeof(g_sink.identity), "%s", identity ? identity : "");
    ld_log_set_sink(stderr_sink, &g_sink, min_level);
}
