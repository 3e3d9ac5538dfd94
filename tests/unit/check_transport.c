/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_transport: the libcurl transport (transport_curl.h) against fake_http
 * on 127.0.0.1: exchanges run concurrently (a held one does not delay
 * another, a hung one times out alone), cancel silences a callback, streams
 * arrive in pieces, the pool stays at 4 connections, round trips beyond
 * the cap of those in curl wait their turn (and time out there unsent,
 * LD_ENOTSENT, as does one whose time ran out before the next run),
 * heartbeats go before waiting normal round trips and keep a lane that
 * normal ones never fill, a
 * 401 re-reads the token file, bodies are capped, and the wake fd ends a
 * run.
 */
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "support/fake_clock.h"
#include "support/fake_http.h"
#include "support/run_suite.h"
#include "transport_curl.h"

/* Generous: the machine is shared and loaded. */
#define WAIT_LIMIT_MS 15000

static struct fake_http *fake;
static struct ld_transport *tr;
static char token_path[64];
static int completions; /* done callbacks so far, to order them */

struct outcome {
    int done_calls;
    int order; /* value of completions when done ran */
    enum ld_err rc;
    long status;
    bool auth_renewed;
    int64_t retry_after_ms;
    char body[256];
    size_t body_len;
    char err[256];
    int data_calls;
    char data[4096];
    size_t data_len;
    bool data_after_done;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_done(void *ctx, ld_http_id id, const struct ld_http_result *r)
{
    struct outcome *o = ctx;
    (void)id;
    o->done_calls++;
    o->order = ++completions;
    o->rc = r->rc;
    o->status = r->status;
    o->auth_renewed = r->auth_renewed;
    o->retry_after_ms = r->retry_after_ms;
    o->body_len = r->body_len;
    snprintf(o->body, sizeof(o->body), "%s", r->body);
    snprintf(o->err, sizeof(o->err), "%s", r->err.msg);
}

static void on_data(void *ctx, ld_http_id id, const char *data, size_t len)
{
    struct outcome *o = ctx;
    (void)id;
    if (o->done_calls)
        o->data_after_done = true;
    o->data_calls++;
    ck_assert_uint_le(o->data_len + len, sizeof(o->data) - 1);
    memcpy(o->data + o->data_len, data, len);
    o->data_len += len;
    o->data[o->data_len] = '\0';
}

static struct ld_transport *new_transport(const char *token, const char *token_file)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ld_kube_config_init(&c);
    c.server = strdup(fake_http_url(fake));
    c.token = token ? strdup(token) : NULL;
    c.token_file = token_file ? strdup(token_file) : NULL;
    struct ld_transport *t = ld_transport_curl_new(&c, &e);
    ck_assert_msg(t != NULL, "ld_transport_curl_new: %s", e.msg);
    ld_kube_config_clear(&c);
    return t;
}

static void setup(void)
{
    completions = 0;
    fake = fake_http_start(NULL, NULL);
    ck_assert_ptr_nonnull(fake);
    tr = new_transport("tok-1", NULL);
}

static void teardown(void)
{
    ld_transport_free(tr);
    tr = NULL;
    fake_http_stop(fake);
    fake = NULL;
    if (token_path[0]) {
        unlink(token_path);
        token_path[0] = '\0';
    }
}

static void push(const struct fake_http_response *r)
{
    fake_http_push(fake, r);
}

static ld_http_id submit_as(const char *path, int64_t timeout_ms,
                            enum ld_http_priority priority, struct outcome *o)
{
    struct ld_http_request req = {
        .verb = "GET", .path = path, .timeout_ms = timeout_ms, .priority = priority};
    struct ld_errinfo e;
    ld_http_id id = 0;
    ck_assert_int_eq(ld_transport_submit(tr, &req, on_done, o, &id, &e), LD_OK);
    ck_assert(id != 0);
    return id;
}

static ld_http_id submit(const char *path, int64_t timeout_ms, struct outcome *o)
{
    return submit_as(path, timeout_ms, LD_PRIO_NORMAL, o);
}

/* The path of the k-th request the server saw. */
static void assert_request_path(int k, const char *path)
{
    struct fake_http_request got;
    ck_assert(fake_http_request_at(fake, k, &got));
    ck_assert_msg(strcmp(got.path, path) == 0, "request %d: %s, not %s", k, got.path,
                  path);
    fake_http_request_clear(&got);
}

/* Drives the transport until *done_calls of o is at least 1. */
static void run_until_done(struct outcome *o)
{
    int64_t deadline = now_ms() + WAIT_LIMIT_MS;
    while (o->done_calls == 0 && now_ms() < deadline)
        ld_transport_run(tr, 200, -1);
    ck_assert_int_eq(o->done_calls, 1);
}

/* Drives the transport until the server has seen n requests. */
static void run_until_requests(int n)
{
    int64_t deadline = now_ms() + WAIT_LIMIT_MS;
    while (fake_http_request_count(fake) < n && now_ms() < deadline)
        ld_transport_run(tr, 50, -1);
    ck_assert_int_ge(fake_http_request_count(fake), n);
}

START_TEST(held_request_does_not_delay_another)
{
    struct outcome a = {0}, b = {0};
    struct fake_http_response held = {.status = 200, .body = "first", .delay_ms = 3000};
    struct fake_http_response quick = {.status = 200, .body = "second"};
    push(&held);
    push(&quick);
    submit("/a", 10000, &a);
    run_until_requests(1); /* a holds the first script entry */
    int64_t t0 = now_ms();
    submit("/b", 10000, &b);
    run_until_done(&b);
    ck_assert_msg(now_ms() - t0 < 2500, "b waited %lld ms", (long long)(now_ms() - t0));
    ck_assert_int_eq(a.done_calls, 0);
    ck_assert_int_eq(b.rc, LD_OK);
    ck_assert_str_eq(b.body, "second");
    run_until_done(&a);
    ck_assert_int_eq(a.rc, LD_OK);
    ck_assert_str_eq(a.body, "first");
    ck_assert_int_lt(b.order, a.order);
    ck_assert_uint_eq(ld_transport_pending(tr), 0);
}
END_TEST

START_TEST(hung_request_times_out_alone)
{
    struct outcome a = {0}, b = {0};
    struct fake_http_response hung = {.status = 200, .body = "late", .delay_ms = 8000};
    struct fake_http_response quick = {.status = 200, .body = "ok"};
    push(&hung);
    push(&quick);
    int64_t t0 = now_ms();
    submit("/hung", 400, &a);
    run_until_requests(1);
    submit("/quick", 10000, &b);
    run_until_done(&b);
    run_until_done(&a);
    int64_t took = now_ms() - t0;
    ck_assert_int_eq(b.rc, LD_OK);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_eq(a.rc, LD_ETIMEOUT);
    ck_assert_int_eq(a.status, 0);
    ck_assert_msg(took < 5000, "the timeout took %lld ms", (long long)took);
}
END_TEST

START_TEST(cancel_suppresses_callback)
{
    struct outcome a = {0}, b = {0};
    struct fake_http_response held = {
        .status = 200, .body = "never seen", .delay_ms = 1500};
    struct fake_http_response quick = {.status = 200, .body = "ok"};
    push(&held);
    push(&quick);
    ld_http_id ida = submit("/a", 10000, &a);
    run_until_requests(1);
    ld_transport_cancel(tr, ida);
    ld_transport_cancel(tr, ida); /* a finished id is ignored */
    ck_assert_uint_eq(ld_transport_pending(tr), 0);
    submit("/b", 10000, &b);
    run_until_done(&b);
    /* Past the time a's answer would have come: still no callback. */
    int64_t until = now_ms() + 2000;
    while (now_ms() < until)
        ld_transport_run(tr, until - now_ms(), -1);
    ck_assert_int_eq(a.done_calls, 0);
    ck_assert_int_eq(b.rc, LD_OK);
}
END_TEST

START_TEST(stream_delivers_pieces_then_done)
{
    static const char body[] = "{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n"
                               "{\"type\":\"BOOKMARK\"}\n";
    struct outcome o = {0};
    struct fake_http_response r = {
        .status = 200, .body = body, .chunk_size = 12, .chunk_delay_ms = 100};
    push(&r);
    struct ld_http_request req = {
        .verb = "GET", .path = "/watch?watch=1", .timeout_ms = 10000};
    struct ld_errinfo e;
    ld_http_id id = 0;
    ck_assert_int_eq(ld_transport_open_stream(tr, &req, on_data, on_done, &o, &id, &e),
                     LD_OK);
    run_until_done(&o);
    ck_assert_int_eq(o.rc, LD_OK);
    ck_assert_int_eq(o.status, 200);
    ck_assert_int_ge(o.data_calls, 3); /* pieces 100 ms apart are not merged */
    ck_assert_str_eq(o.data, body);
    ck_assert(!o.data_after_done);
    struct fake_http_request got;
    ck_assert(fake_http_request_at(fake, 0, &got));
    ck_assert_str_eq(got.path, "/watch");
    ck_assert_str_eq(got.authorization, "Bearer tok-1");
    fake_http_request_clear(&got);
}
END_TEST

START_TEST(stream_error_answer_goes_to_done)
{
    static const char gone[] =
        "{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}";
    struct outcome o = {0};
    struct fake_http_response r = {.status = 410, .body = gone};
    push(&r);
    struct ld_http_request req = {.verb = "GET", .path = "/watch", .timeout_ms = 10000};
    struct ld_errinfo e;
    ld_http_id id = 0;
    ck_assert_int_eq(ld_transport_open_stream(tr, &req, on_data, on_done, &o, &id, &e),
                     LD_OK);
    run_until_done(&o);
    ck_assert_int_eq(o.rc, LD_OK);
    ck_assert_int_eq(o.status, 410);
    ck_assert_int_eq(o.data_calls, 0);
    ck_assert_str_eq(o.body, gone);
}
END_TEST

START_TEST(eight_in_flight_use_at_most_four_connections)
{
    struct outcome o[8];
    memset(o, 0, sizeof(o));
    for (int i = 0; i < 8; i++) {
        struct fake_http_response r = {.status = 200, .body = "ok", .delay_ms = 300};
        push(&r);
    }
    for (int i = 0; i < 8; i++)
        submit("/n", 10000, &o[i]);
    ck_assert_uint_eq(ld_transport_pending(tr), 8);
    for (int i = 0; i < 8; i++)
        run_until_done(&o[i]);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(o[i].rc == LD_OK && o[i].status == 200, "request %d: %d/%ld", i,
                      o[i].rc, o[i].status);
    int conns = fake_http_connections(fake);
    ck_assert_int_le(conns, LD_TRANSPORT_CURL_MAX_CONNS);
    ck_assert_int_ge(conns, 2); /* and they did run side by side */
    ck_assert_int_eq(fake_http_request_count(fake), 8);
}
END_TEST

/* More round trips than curl is given at once: the rest wait their turn
 * with their request kept, and each goes out as it was submitted. */
START_TEST(round_trips_beyond_the_active_cap_wait_their_turn)
{
    enum { N = LD_TRANSPORT_CURL_MAX_ACTIVE * 2 + 3 };
    struct outcome o[N];
    char bodies[N][24];
    bool seen[N];
    memset(o, 0, sizeof(o));
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < N; i++) {
        struct fake_http_response r = {.status = 200, .body = "ok", .delay_ms = 20};
        push(&r);
    }
    for (int i = 0; i < N; i++) {
        snprintf(bodies[i], sizeof(bodies[i]), "{\"n\":%d}", i);
        struct ld_http_request req = {.verb = "PUT",
                                      .path = "/put",
                                      .body = bodies[i],
                                      .body_len = strlen(bodies[i]),
                                      .timeout_ms = 20000};
        struct ld_errinfo e;
        ld_http_id id = 0;
        ck_assert_int_eq(ld_transport_submit(tr, &req, on_done, &o[i], &id, &e), LD_OK);
    }
    ck_assert_uint_eq(ld_transport_pending(tr), N);
    for (int i = 0; i < N; i++)
        run_until_done(&o[i]);
    for (int i = 0; i < N; i++)
        ck_assert_msg(o[i].rc == LD_OK && o[i].status == 200, "request %d: %d/%ld", i,
                      o[i].rc, o[i].status);
    ck_assert_int_eq(fake_http_request_count(fake), N);
    for (int k = 0; k < N; k++) {
        struct fake_http_request got;
        ck_assert(fake_http_request_at(fake, k, &got));
        ck_assert_str_eq(got.method, "PUT");
        ck_assert_str_eq(got.content_type, "application/json");
        ck_assert(strncmp(got.body, "{\"n\":", 5) == 0);
        char *end = NULL;
        long n = strtol(got.body + 5, &end, 10);
        ck_assert(end && strcmp(end, "}") == 0);
        ck_assert(n >= 0 && n < N && !seen[n]);
        ck_assert_str_eq(got.body, bodies[n]);
        seen[n] = true;
        fake_http_request_clear(&got);
    }
    ck_assert_int_le(fake_http_connections(fake), LD_TRANSPORT_CURL_MAX_CONNS);
}
END_TEST

/* One waiting behind a full set of held exchanges ends at its own timeout,
 * before any of them, and never reaches the server. */
START_TEST(waiting_round_trip_times_out_unsent)
{
    enum { N = LD_TRANSPORT_CURL_MAX_ACTIVE };
    struct outcome held[N], late = {0};
    memset(held, 0, sizeof(held));
    for (int i = 0; i < N; i++) {
        struct fake_http_response r = {.status = 200, .body = "ok", .delay_ms = 1500};
        push(&r);
    }
    for (int i = 0; i < N; i++)
        submit("/held", 30000, &held[i]);
    run_until_requests(1);
    submit("/late", 300, &late);
    run_until_done(&late);
    ck_assert_int_eq(late.rc, LD_ENOTSENT);
    ck_assert_int_eq(late.status, 0);
    for (int i = 0; i < N; i++) {
        run_until_done(&held[i]);
        ck_assert_int_eq(held[i].rc, LD_OK);
        ck_assert_int_gt(held[i].order, late.order);
    }
    ck_assert_int_eq(fake_http_request_count(fake), N);
    for (int k = 0; k < N; k++) {
        struct fake_http_request got;
        ck_assert(fake_http_request_at(fake, k, &got));
        ck_assert_str_eq(got.path, "/held");
        fake_http_request_clear(&got);
    }
    ck_assert_uint_eq(ld_transport_pending(tr), 0);
}
END_TEST

/* A round trip whose timeout ran out before the transport was run again
 * (its host busy meanwhile) ends timed out and unsent, even with an idle
 * connection that could carry it at once: its owner already counts it
 * lost, so it must not land. */
START_TEST(round_trip_overdue_before_a_run_is_not_sent)
{
    struct outcome warm = {0}, late = {0}, after = {0};
    struct fake_http_response r = {.status = 200, .body = "ok"};
    push(&r);
    push(&r);
    submit("/warm", 10000, &warm);
    run_until_done(&warm);
    ck_assert_int_eq(warm.rc, LD_OK);
    int64_t submitted = now_ms();
    submit("/late", 50, &late);
    /* The busy spell is the scenario, not a wait for an event. */
    while (now_ms() < submitted + 150) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        (void)nanosleep(&ts, NULL);
    }
    run_until_done(&late);
    ck_assert_int_eq(late.rc, LD_ENOTSENT);
    ck_assert_int_eq(late.status, 0);
    ck_assert_msg(strstr(late.err, "not sent") != NULL, "%s", late.err);
    submit("/after", 10000, &after);
    run_until_done(&after);
    ck_assert_int_eq(after.rc, LD_OK);
    ck_assert_int_eq(fake_http_request_count(fake), 2);
    struct fake_http_request got;
    ck_assert(fake_http_request_at(fake, 1, &got));
    ck_assert_str_eq(got.path, "/after");
    fake_http_request_clear(&got);
}
END_TEST

/* Normal round trips that hang fill every lane they may take; a heartbeat
 * submitted after them, and after a normal one still waiting, goes out at
 * once on the lane kept for heartbeats. */
START_TEST(heartbeat_is_not_delayed_by_hung_normal_requests)
{
    enum { HELD = LD_TRANSPORT_CURL_H1_ACTIVE - LD_TRANSPORT_CURL_HEARTBEAT_LANES };
    struct outcome held[HELD], waiting = {0}, beat = {0};
    memset(held, 0, sizeof(held));
    for (int i = 0; i < HELD; i++) {
        struct fake_http_response r = {.status = 200, .body = "held", .delay_ms = 4000};
        push(&r);
    }
    struct fake_http_response quick = {.status = 200, .body = "beat"};
    push(&quick);
    push(&quick);
    for (int i = 0; i < HELD; i++)
        submit("/held", 20000, &held[i]);
    submit("/waiting", 20000, &waiting);
    run_until_requests(HELD);
    int64_t t0 = now_ms();
    submit_as("/beat", 20000, LD_PRIO_HEARTBEAT, &beat);
    run_until_done(&beat);
    ck_assert_msg(now_ms() - t0 < 3000, "the heartbeat waited %lld ms",
                  (long long)(now_ms() - t0));
    ck_assert_int_eq(beat.rc, LD_OK);
    ck_assert_str_eq(beat.body, "beat");
    /* The normal one never took the heartbeats' lane. */
    ck_assert_int_eq(waiting.done_calls, 0);
    ck_assert_int_eq(fake_http_request_count(fake), HELD + 1);
    assert_request_path(HELD, "/beat");
    for (int i = 0; i < HELD; i++) {
        run_until_done(&held[i]);
        ck_assert_int_eq(held[i].rc, LD_OK);
    }
    run_until_done(&waiting);
    ck_assert_int_eq(waiting.rc, LD_OK);
    assert_request_path(HELD + 1, "/waiting");
}
END_TEST

/* With every lane busy, a heartbeat submitted after a waiting normal round
 * trip still goes out first when a lane frees. */
START_TEST(waiting_heartbeat_goes_before_waiting_normal_requests)
{
    enum { N = LD_TRANSPORT_CURL_H1_ACTIVE };
    struct outcome busy[N], normal = {0}, beat = {0};
    memset(busy, 0, sizeof(busy));
    /* The first to finish frees a normal lane; the others hold theirs. */
    struct fake_http_response first = {.status = 200, .body = "ok", .delay_ms = 300};
    push(&first);
    for (int i = 1; i < N; i++) {
        struct fake_http_response r = {.status = 200, .body = "ok", .delay_ms = 3000};
        push(&r);
    }
    struct fake_http_response quick = {.status = 200, .body = "ok"};
    push(&quick);
    push(&quick);
    for (int i = 0; i < N - LD_TRANSPORT_CURL_HEARTBEAT_LANES; i++)
        submit("/busy", 20000, &busy[i]);
    for (int i = N - LD_TRANSPORT_CURL_HEARTBEAT_LANES; i < N; i++)
        submit_as("/busy", 20000, LD_PRIO_HEARTBEAT, &busy[i]);
    run_until_requests(N);
    submit("/normal", 20000, &normal);
    submit_as("/beat", 20000, LD_PRIO_HEARTBEAT, &beat);
    run_until_done(&beat);
    ck_assert_int_eq(beat.rc, LD_OK);
    run_until_done(&normal);
    ck_assert_int_eq(normal.rc, LD_OK);
    ck_assert_int_lt(beat.order, normal.order);
    assert_request_path(N, "/beat");
    assert_request_path(N + 1, "/normal");
    for (int i = 0; i < N; i++) {
        run_until_done(&busy[i]);
        ck_assert_int_eq(busy[i].rc, LD_OK);
    }
}
END_TEST

static void write_token(const char *text)
{
    char tmp[80];
    snprintf(tmp, sizeof(tmp), "%s.new", token_path);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, token_path), 0);
}

START_TEST(unauthorized_rereads_token)
{
    snprintf(token_path, sizeof(token_path), "/tmp/ld-transport-token-XXXXXX");
    int fd = mkstemp(token_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_token("old-token");
    ld_transport_free(tr);
    tr = new_transport(NULL, token_path);
    fake_http_require_auth(fake, "Bearer new-token");
    struct fake_http_response ok = {.status = 200, .body = "ok"};
    push(&ok);

    /* Sent with the old token; the file changes while it is in flight. */
    struct outcome a = {0}, b = {0}, c = {0};
    submit("/a", 10000, &a);
    write_token("new-token");
    run_until_done(&a);
    ck_assert_int_eq(a.rc, LD_OK);
    ck_assert_int_eq(a.status, 401);
    ck_assert(a.auth_renewed);

    submit("/b", 10000, &b);
    run_until_done(&b);
    ck_assert_int_eq(b.status, 200);

    /* A 401 with the current token: nothing new to try. */
    fake_http_require_auth(fake, "Bearer other");
    submit("/c", 10000, &c);
    run_until_done(&c);
    ck_assert_int_eq(c.status, 401);
    ck_assert(!c.auth_renewed);
    struct fake_http_request got;
    ck_assert(fake_http_request_at(fake, 1, &got));
    ck_assert_str_eq(got.authorization, "Bearer new-token");
    fake_http_request_clear(&got);
}
END_TEST

START_TEST(body_over_cap)
{
    size_t n = LD_HTTP_MAX_BODY + 1;
    char *big = malloc(n + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', n);
    big[n] = '\0';
    struct fake_http_response r = {.status = 200, .body = big, .body_len = n};
    push(&r);
    free(big);
    struct fake_http_response ok = {
        .status = 200, .body = "ok", .header_name = "Retry-After", .header_value = "7"};
    push(&ok);
    struct outcome a = {0}, b = {0};
    submit("/big", 20000, &a);
    run_until_done(&a);
    ck_assert_int_eq(a.rc, LD_ETOOBIG);
    ck_assert_int_eq(a.status, 200);
    /* The transport goes on working after it. */
    submit("/ok", 10000, &b);
    run_until_done(&b);
    ck_assert_int_eq(b.rc, LD_OK);
    ck_assert_str_eq(b.body, "ok");
    ck_assert_int_eq(b.retry_after_ms, 7000);
}
END_TEST

START_TEST(wake_fd_ends_run)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    struct outcome a = {0};
    struct fake_http_response held = {.status = 200, .body = "x", .delay_ms = 5000};
    push(&held);
    submit("/a", 10000, &a);
    ck_assert_int_eq(ld_transport_run(tr, 100, p[0]), LD_OK);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    int64_t t0 = now_ms();
    ck_assert_int_eq(ld_transport_run(tr, 5000, p[0]), LD_ECANCELED);
    ck_assert_msg(now_ms() - t0 < 1000, "run took %lld ms", (long long)(now_ms() - t0));
    ck_assert_int_eq(a.done_calls, 0);
    ck_assert_uint_eq(ld_transport_pending(tr), 1); /* still in flight */
    close(p[0]);
    close(p[1]);
}
END_TEST

struct long_run {
    int wake_fd;
    enum ld_err rc;
};

static void *run_long(void *arg)
{
    struct long_run *r = arg;
    r->rc = ld_transport_run(tr, 40000, r->wake_fd);
    return NULL;
}

/* A poll timeout is counted on CLOCK_MONOTONIC, which a suspend stops: run
 * ends its wait on a timer of the clock that counts the suspend, armed at
 * the wait's end, so after a resume it does not sleep on past it. */
START_TEST(run_waits_on_the_suspend_counting_clock)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    struct long_run r = {.wake_fd = p[0], .rc = LD_OK};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, run_long, &r), 0);
    int64_t until = now_ms() + 5000;
    bool armed = false;
    while (!armed && now_ms() < until) {
        armed = boottime_timer_armed(getpid(), 30, 40);
        if (!armed)
            poll(NULL, 0, 20);
    }
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    pthread_join(th, NULL);
    ck_assert_msg(armed, "run's wait has no CLOCK_BOOTTIME timer at its end");
    ck_assert_int_eq(r.rc, LD_ECANCELED);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(bad_requests_rejected)
{
    struct outcome o = {0};
    struct ld_errinfo e;
    ld_http_id id = 0;
    struct ld_http_request no_slash = {.verb = "GET", .path = "x"};
    struct ld_http_request bad_verb = {.verb = "G T", .path = "/x"};
    ck_assert_int_eq(ld_transport_submit(tr, &no_slash, on_done, &o, &id, &e), LD_EINVAL);
    ck_assert_int_eq(ld_transport_submit(tr, &bad_verb, on_done, &o, &id, &e), LD_EINVAL);
    ck_assert_int_eq(ld_transport_open_stream(tr, &no_slash, NULL, on_done, &o, &id, &e),
                     LD_EINVAL);
    ck_assert_uint_eq(ld_transport_pending(tr), 0);
    ld_transport_run(tr, 0, -1);
    ck_assert_int_eq(o.done_calls, 0);
    ck_assert_int_eq(fake_http_request_count(fake), 0);
}
END_TEST

static Suite *transport_suite(void)
{
    Suite *s = suite_create("transport");
    TCase *tc = tcase_create("curl");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, held_request_does_not_delay_another);
    tcase_add_test(tc, hung_request_times_out_alone);
    tcase_add_test(tc, cancel_suppresses_callback);
    tcase_add_test(tc, stream_delivers_pieces_then_done);
    tcase_add_test(tc, stream_error_answer_goes_to_done);
    tcase_add_test(tc, eight_in_flight_use_at_most_four_connections);
    tcase_add_test(tc, round_trips_beyond_the_active_cap_wait_their_turn);
    tcase_add_test(tc, waiting_round_trip_times_out_unsent);
    tcase_add_test(tc, round_trip_overdue_before_a_run_is_not_sent);
    tcase_add_test(tc, heartbeat_is_not_delayed_by_hung_normal_requests);
    tcase_add_test(tc, waiting_heartbeat_goes_before_waiting_normal_requests);
    tcase_add_test(tc, unauthorized_rereads_token);
    tcase_add_test(tc, body_over_cap);
    tcase_add_test(tc, wake_fd_ends_run);
    tcase_add_test(tc, run_waits_on_the_suspend_counting_clock);
    tcase_add_test(tc, bad_requests_rejected);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    int rc = ld_test_run(transport_suite());
    curl_global_cleanup();
    return rc;
}
