/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/watch: the watch-stream decoder. Bytes are fed the way a
 * socket delivers them (split anywhere); events are recorded and compared.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch.h"
#include "support/run_suite.h"

#define MAX_SEEN 16

/* What the callback saw, copied out (the event itself is borrowed). */
struct seen {
    int n;
    enum ld_watch_type type[MAX_SEEN];
    char holder[MAX_SEEN][64];
    bool abridged[MAX_SEEN];
    char rv[MAX_SEEN][32];
    enum ld_err code[MAX_SEEN];
    long http_status[MAX_SEEN];
};

static void record(void *ctx, const struct ld_watch_event *ev)
{
    struct seen *s = ctx;
    ck_assert_int_lt(s->n, MAX_SEEN);
    int i = s->n++;
    s->type[i] = ev->type;
    s->holder[i][0] = '\0';
    s->rv[i][0] = '\0';
    s->abridged[i] = ev->lease && ev->lease->spec.holder_abridged;
    if (ev->lease && ev->lease->spec.holder) {
        /* the tail of a long holder (an abridged one's length and hash) */
        size_t n = strlen(ev->lease->spec.holder);
        snprintf(s->holder[i], sizeof(s->holder[i]), "%s",
                 ev->lease->spec.holder + (n > 63 ? n - 63 : 0));
    }
    if (ev->resource_version)
        snprintf(s->rv[i], sizeof(s->rv[i]), "%s", ev->resource_version);
    s->code[i] = ev->error.code;
    s->http_status[i] = ev->error.http_status;
}

static const char *event_line(const char *type, const char *holder, const char *rv)
{
    static char buf[512];
    snprintf(
        buf, sizeof(buf),
        "{\"type\":\"%s\",\"object\":{\"apiVersion\":\"coordination.k8s.io/v1\","
        "\"kind\":\"Lease\",\"metadata\":{\"name\":\"demo\",\"namespace\":\"default\","
        "\"resourceVersion\":\"%s\"},\"spec\":{\"holderIdentity\":\"%s\","
        "\"leaseDurationSeconds\":15}}}\n",
        type, rv, holder);
    return buf;
}

static void feed_all(struct ld_watch_decoder *d, const char *text, size_t chunk,
                     struct seen *s)
{
    size_t len = strlen(text);
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        ck_assert_int_eq(ld_watch_feed(d, text + off, n, record, s), LD_OK);
    }
}

START_TEST(events_split_anywhere)
{
    char stream[2048];
    snprintf(stream, sizeof(stream), "%s", event_line("ADDED", "a", "7"));
    strncat(stream, event_line("MODIFIED", "b", "8"),
            sizeof(stream) - strlen(stream) - 1);
    strncat(stream, event_line("DELETED", "b", "9"), sizeof(stream) - strlen(stream) - 1);

    /* Every chunk size from one byte to the whole stream gives the same events. */
    for (size_t chunk = 1; chunk <= strlen(stream); chunk += (chunk < 64 ? 1 : 97)) {
        struct ld_watch_decoder d;
        struct seen s = {0};
        ld_watch_decoder_init(&d);
        feed_all(&d, stream, chunk, &s);
        ck_assert_int_eq(s.n, 3);
        ck_assert_int_eq(s.type[0], LD_WATCH_ADDED);
        ck_assert_int_eq(s.type[1], LD_WATCH_MODIFIED);
        ck_assert_int_eq(s.type[2], LD_WATCH_DELETED);
        ck_assert_str_eq(s.holder[0], "a");
        ck_assert_str_eq(s.holder[1], "b");
        ck_assert_str_eq(s.rv[2], "9");
        ld_watch_decoder_clear(&d);
    }
}
END_TEST

START_TEST(partial_line_waits_for_newline)
{
    struct ld_watch_decoder d;
    struct seen s = {0};
    const char *line = event_line("MODIFIED", "x", "3");
    size_t len = strlen(line);

    ld_watch_decoder_init(&d);
    ck_assert_int_eq(ld_watch_feed(&d, line, len - 1, record, &s), LD_OK);
    ck_assert_int_eq(s.n, 0);
    ck_assert_int_eq(ld_watch_feed(&d, "\n", 1, record, &s), LD_OK);
    ck_assert_int_eq(s.n, 1);
    ck_assert_str_eq(s.holder[0], "x");
    ld_watch_decoder_clear(&d);
}
END_TEST

START_TEST(crlf_and_blank_lines)
{
    struct ld_watch_decoder d;
    struct seen s = {0};
    char stream[1024];
    snprintf(stream, sizeof(stream), "\n\r\n%s", event_line("ADDED", "c", "4"));
    /* Turn the event's "\n" into "\r\n". */
    size_t n = strlen(stream);
    stream[n - 1] = '\r';
    strncat(stream, "\n\n", sizeof(stream) - n - 1);

    ld_watch_decoder_init(&d);
    feed_all(&d, stream, 5, &s);
    ck_assert_int_eq(s.n, 1);
    ck_assert_int_eq(s.type[0], LD_WATCH_ADDED);
    ck_assert_str_eq(s.holder[0], "c");
    ld_watch_decoder_clear(&d);
}
END_TEST

START_TEST(bookmark_and_error)
{
    struct ld_watch_decoder d;
    struct seen s = {0};
    const char *stream =
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Lease\",\"metadata\":"
        "{\"resourceVersion\":\"42\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
        "\"status\":\"Failure\",\"message\":\"too old resource version\","
        "\"reason\":\"Expired\",\"code\":410}}\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{}}}\n";

    ld_watch_decoder_init(&d);
    feed_all(&d, stream, 7, &s);
    ck_assert_int_eq(s.n, 3);
    ck_assert_int_eq(s.type[0], LD_WATCH_BOOKMARK);
    ck_assert_str_eq(s.rv[0], "42");
    ck_assert_int_eq(s.type[1], LD_WATCH_ERROR);
    ck_assert_int_eq(s.code[1], LD_EGONE);
    ck_assert_int_eq(s.http_status[1], 410);
    /* A bookmark without a resourceVersion is reported, not passed on empty. */
    ck_assert_int_eq(s.type[2], LD_WATCH_INVALID);
    ck_assert_int_eq(s.code[2], LD_EDECODE);
    ld_watch_decoder_clear(&d);
}
END_TEST

START_TEST(malformed_lines_are_reported_and_skipped)
{
    struct ld_watch_decoder d;
    struct seen s = {0};
    char stream[2048];
    snprintf(stream, sizeof(stream),
             "not json\n"
             "{\"type\":\"RENAMED\",\"object\":{}}\n"
             "{\"type\":\"ADDED\"}\n"
             "{\"type\":\"MODIFIED\",\"object\":{\"spec\":{\"holderIdentity\":7}}}\n"
             "%s",
             event_line("MODIFIED", "after", "5"));

    ld_watch_decoder_init(&d);
    feed_all(&d, stream, 11, &s);
    ck_assert_int_eq(s.n, 5);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(s.type[i], LD_WATCH_INVALID);
        ck_assert_int_ne(s.code[i], LD_OK);
    }
    ck_assert_int_eq(s.type[4], LD_WATCH_MODIFIED);
    ck_assert_str_eq(s.holder[4], "after");
    ld_watch_decoder_clear(&d);
}
END_TEST

/* A line over the limit is skipped once, reported once, and the stream
 * resynchronises on the next newline. */
START_TEST(over_long_line_skipped_then_resync)
{
    struct ld_watch_decoder d;
    struct seen s = {0};
    size_t chunk = 16 * 1024;
    char *junk = malloc(chunk);
    ck_assert_ptr_nonnull(junk);
    memset(junk, 'h', chunk);

    ld_watch_decoder_init(&d);
    ck_assert_int_eq(ld_watch_feed(&d, "{\"type\":\"ADDED\",\"x\":\"", 21, record, &s),
                     LD_OK);
    for (size_t fed = 0; fed <= LD_WATCH_MAX_LINE + chunk; fed += chunk)
        ck_assert_int_eq(ld_watch_feed(&d, junk, chunk, record, &s), LD_OK);
    ck_assert_int_eq(s.n, 1);
    ck_assert_int_eq(s.type[0], LD_WATCH_INVALID);
    ck_assert_int_eq(s.code[0], LD_ETOOBIG);
    const char *tail = "\"}}\n";
    ck_assert_int_eq(ld_watch_feed(&d, tail, strlen(tail), record, &s), LD_OK);
    const char *line = event_line("MODIFIED", "next", "6");
    ck_assert_int_eq(ld_watch_feed(&d, line, strlen(line), record, &s), LD_OK);
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(s.type[1], LD_WATCH_MODIFIED);
    ck_assert_str_eq(s.holder[1], "next");
    free(junk);
    ld_watch_decoder_clear(&d);
}
END_TEST

/* Any Lease the API server can send is read from a watch too: a 2 MiB
 * holder (abridged by the codec) or one with a NUL byte. */
START_TEST(lease_with_a_huge_or_nul_holder_is_an_event)
{
    struct ld_watch_decoder d;
    struct seen s = {0};
    size_t holder = 2 * 1024 * 1024;
    char *line = malloc(holder + 512);
    ck_assert_ptr_nonnull(line);
    int head = snprintf(line, holder + 512,
                        "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Lease\","
                        "\"metadata\":{\"name\":\"demo\",\"resourceVersion\":\"9\"},"
                        "\"spec\":{\"holderIdentity\":\"");
    memset(line + head, 'h', holder);
    snprintf(line + head + holder, 512, "\",\"leaseDurationSeconds\":15}}}\n");

    ld_watch_decoder_init(&d);
    feed_all(&d, line, 16 * 1024, &s);
    feed_all(&d, event_line("MODIFIED", "a\\u0000b", "10"), 7, &s);
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(s.type[0], LD_WATCH_MODIFIED);
    ck_assert_str_eq(s.rv[0], "9");
    ck_assert(s.abridged[0]);
    ck_assert_ptr_nonnull(strstr(s.holder[0], "...(truncated: 2097152 bytes, fnv1a64="));
    ck_assert_int_eq(s.type[1], LD_WATCH_MODIFIED);
    ck_assert(s.abridged[1]);
    ck_assert_ptr_nonnull(strstr(s.holder[1], "a...(truncated: 3 bytes"));
    free(line);
    ld_watch_decoder_clear(&d);
}
END_TEST

/* One long (but accepted) line must not leave a megabyte-sized buffer behind
 * for the life of the watch. */
START_TEST(large_line_buffer_is_given_back)
{
    struct ld_watch_decoder d;
    struct seen s = {0};
    size_t pad = 512 * 1024;
    char *line = malloc(pad + 512);
    ck_assert_ptr_nonnull(line);
    int head = snprintf(line, pad + 512,
                        "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Lease\","
                        "\"metadata\":{\"name\":\"demo\",\"annotations\":"
                        "{\"big\":\"");
    memset(line + head, 'z', pad);
    snprintf(
        line + head + pad, 512,
        "\"}},\"spec\":{\"holderIdentity\":\"big\",\"leaseDurationSeconds\":15}}}\n");

    ld_watch_decoder_init(&d);
    feed_all(&d, line, 4096, &s);
    ck_assert_int_eq(s.n, 1);
    ck_assert_int_eq(s.type[0], LD_WATCH_ADDED);
    ck_assert_str_eq(s.holder[0], "big");
    ck_assert_uint_le(d.line.cap, 64 * 1024);

    /* Same after an unfinished long line is dropped by a reconnect. */
    ck_assert_int_eq(ld_watch_feed(&d, line, pad, record, &s), LD_OK);
    ck_assert_uint_gt(d.line.cap, 64 * 1024);
    ld_watch_decoder_reset(&d);
    ck_assert_uint_le(d.line.cap, 64 * 1024);
    ck_assert_uint_eq(d.line.len, 0);
    free(line);
    ld_watch_decoder_clear(&d);
}
END_TEST

START_TEST(reset_forgets_partial_line)
{
    struct ld_watch_decoder d;
    struct seen s = {0};
    const char *line = event_line("ADDED", "old", "1");

    ld_watch_decoder_init(&d);
    ck_assert_int_eq(ld_watch_feed(&d, line, 40, record, &s), LD_OK);
    ld_watch_decoder_reset(&d);
    line = event_line("ADDED", "new", "2");
    ck_assert_int_eq(ld_watch_feed(&d, line, strlen(line), record, &s), LD_OK);
    ck_assert_int_eq(s.n, 1);
    ck_assert_str_eq(s.holder[0], "new");
    ld_watch_decoder_clear(&d);
    ld_watch_decoder_clear(NULL);
}
END_TEST

static Suite *watch_suite(void)
{
    Suite *s = suite_create("watch");
    TCase *tc = tcase_create("decoder");

    tcase_add_test(tc, events_split_anywhere);
    tcase_add_test(tc, partial_line_waits_for_newline);
    tcase_add_test(tc, crlf_and_blank_lines);
    tcase_add_test(tc, bookmark_and_error);
    tcase_add_test(tc, malformed_lines_are_reported_and_skipped);
    tcase_add_test(tc, over_long_line_skipped_then_resync);
    tcase_add_test(tc, large_line_buffer_is_given_back);
    tcase_add_test(tc, lease_with_a_huge_or_nul_holder_is_an_event);
    tcase_add_test(tc, reset_forgets_partial_line);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(watch_suite());
}
