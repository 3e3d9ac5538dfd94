/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/http_hold: the requests the sidecar's HTTP
 * server holds, on 127.0.0.1 (port 0) while snapshots are published through
 * ld_state_publish: GET /leader long-polls (answered at once, held until a
 * change, a lapse or their timeout, capped), /watch event streams (ids,
 * Last-Event-ID, heartbeats, caps, clients coming and going, the server
 * stopping) and POST /resign waiting for the election loop's outcome.
 */
#include <check.h>
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../../cmd/leaderd/http/http.h"
#include "clock.h"
#include "support/fake_clock.h"
#include "support/http_client.h"
#include "support/http_rig.h"
#include "support/run_suite.h"

/* Asserts the next event (skipping heartbeat comments) is a leader event
 * for holder with is_leader and term; returns its id. */
static uint64_t expect_event(struct http_sse *s, const char *holder, bool leading,
                             int64_t term)
{
    struct http_sse_block b;
    for (;;) {
        ck_assert_msg(http_sse_wait_blocks(s, s->next + 1, 5000),
                      "event %d did not arrive: %s", s->next, s->raw);
        ck_assert(http_sse_block(s, s->next++, &b));
        if (!b.comment)
            break;
    }
    ck_assert_str_eq(b.event, "leader");
    ck_assert_msg(b.id[0] != '\0', "no id in %s", s->raw);
    json_t *o = rig_parse_json(b.data);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), holder);
    ck_assert_msg(json_is_true(json_object_get(o, "is_leader")) == leading, "%s", b.data);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), term);
    ck_assert_str_eq(json_string_value(json_object_get(o, "lease")), "ns/demo");
    json_decref(o);
    char *end = NULL;
    uint64_t id = strtoull(b.id, &end, 10);
    ck_assert(end && *end == '\0');
    return id;
}

START_TEST(longpoll_answers_at_once_when_state_differs)
{
    struct http_resp r;
    rig_publish("me", 60000, 9);
    static const char *const differ[] = {
        "/leader?wait=30s&leader=other",
        "/leader?wait=30s&term=8",
        "/leader?wait=30s&is_leader=false",
        "/leader?wait=30s&leader=me&term=9&is_leader=false",
        "/leader?wait=30s&leader=",
        "/leader?wait=0s&leader=me&term=9&is_leader=true", /* no wait at all */
    };
    for (size_t i = 0; i < sizeof(differ) / sizeof(differ[0]); i++) {
        int64_t t0 = ld_mono_ms();
        rig_fetch(NULL, differ[i], &r);
        ck_assert_msg(rig_elapsed_ms(t0) < 2000, "%s held", differ[i]);
        ck_assert_int_eq(r.status, 200);
        ck_assert_str_eq(r.ctype, "application/json");
        ck_assert_str_eq(r.cache, "no-store");
        json_t *o = rig_parse_json(r.body);
        ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "me");
        ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 9);
        json_decref(o);
    }
    /* The same through HEAD: status only. */
    rig_fetch("HEAD", "/leader?wait=30s&leader=other", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 0);
}
END_TEST

START_TEST(longpoll_rejects_bad_arguments)
{
    struct http_resp r;
    static const char *const bad[] = {
        "/leader?wait=abc",
        "/leader?wait=30s&term=x",
        "/leader?wait=1s&is_leader=maybe",
        "/leader?wait=1s&wait=2s",
        "/leader?term=-1",
        "/leader?wait=%ff%00",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rig_fetch(NULL, bad[i], &r);
        ck_assert_msg(r.status == 400, "%s: %ld", bad[i], r.status);
        ck_assert_str_eq(r.ctype, "application/json");
        json_t *o = rig_parse_json(r.body);
        ck_assert(json_is_string(json_object_get(o, "error")));
        json_decref(o);
    }
    rig_fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 503);
}
END_TEST

START_TEST(longpoll_held_until_change)
{
    struct http_resp r;
    rig_publish("other", 0, 5);
    struct http_get *a =
        http_get_start(rig.port, "/leader?wait=30s&leader=other&term=5&is_leader=false");
    ck_assert_msg(rig_stats_until(rig.srv, rig_held_is, 1, 5000),
                  "the poll was not held");

    /* A held request does not hold up anyone else, probes included. */
    int64_t t0 = ld_mono_ms();
    rig_fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 200);
    rig_fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_int_lt(rig_elapsed_ms(t0), 1000);

    /* A publish that changes nothing the caller gave keeps it held. */
    struct ld_snapshot s;
    ld_state_read(&rig.st, &s);
    s.heartbeat_ms = ld_mono_ms();
    s.renewed_at_us += 1000000;
    ld_state_publish(&rig.st, &s);

    int64_t changed_at = ld_mono_ms();
    rig_publish("me", 60000, 6);
    http_get_join(a);
    ck_assert_int_eq(a->r.status, 200);
    ck_assert_int_lt(ld_mono_ms() - changed_at, 2000);
    json_t *o = rig_parse_json(a->r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "me");
    ck_assert(json_is_true(json_object_get(o, "is_leader")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 6);
    json_decref(o);
    ck_assert(rig_stats_until(rig.srv, rig_held_is, 0, 1000));
    free(a);
}
END_TEST

START_TEST(longpoll_times_out_with_current_state)
{
    rig_publish("other", 0, 5);
    struct http_get *a = http_get_start(rig.port, "/leader?wait=300ms&leader=other");
    http_get_join(a);
    ck_assert_int_eq(a->r.status, 503);
    ck_assert_msg(a->took_ms >= 290 && a->took_ms < 5000, "took %lld ms",
                  (long long)a->took_ms);
    json_t *o = rig_parse_json(a->r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "other");
    json_decref(o);
    free(a);
}
END_TEST

/* is_leader turns false when lead_until passes, with no publish: a caller
 * holding with is_leader=true hears about it then, and so does one that
 * gave only the leader (any change of the three answers a held poll). */
START_TEST(longpoll_wakes_on_lapse_without_publish)
{
    struct http_get *a[2];
    rig_publish("me", 400, 3);
    struct ld_snapshot s;
    ld_state_read(&rig.st, &s);
    a[0] = http_get_start(rig.port, "/leader?wait=30s&is_leader=true&leader=me");
    a[1] = http_get_start(rig.port, "/leader?wait=30s&leader=me");
    for (int i = 0; i < 2; i++) {
        http_get_join(a[i]);
        int64_t now = ld_mono_ms();
        ck_assert_int_eq(a[i]->r.status, 503);
        ck_assert_int_ge(now, s.lead_until_ms);
        ck_assert_msg(now - s.lead_until_ms < 1000, "answered %lld ms after the lapse",
                      (long long)(now - s.lead_until_ms));
        json_t *o = rig_parse_json(a[i]->r.body);
        ck_assert(json_is_false(json_object_get(o, "is_leader")));
        json_decref(o);
        free(a[i]);
    }
}
END_TEST

/* A poll timeout is counted on CLOCK_MONOTONIC, which a suspend stops: the
 * lapse that turns is_leader false for the held requests is awaited on a
 * timer of the clock that counts the suspend, armed at the lead deadline,
 * so after a resume they learn at once that leadership ran out. */
START_TEST(the_lapse_is_awaited_on_the_suspend_counting_clock)
{
    rig_publish("me", 40000, 3);
    int64_t until = ld_mono_ms() + 5000;
    bool armed = false;
    while (!armed && ld_mono_ms() < until) {
        armed = boottime_timer_armed(getpid(), 30, 40);
        if (!armed)
            poll(NULL, 0, 20);
    }
    ck_assert_msg(armed, "no CLOCK_BOOTTIME timer armed at the lead deadline");
}
END_TEST

/* With nothing to compare, wait= means "tell me about the next change". */
START_TEST(longpoll_without_fields_waits_for_any_change)
{
    rig_publish("other", 0, 5);
    struct http_get *a = http_get_start(rig.port, "/leader?wait=30s");
    ck_assert(rig_stats_until(rig.srv, rig_held_is, 1, 5000));
    rig_publish("other", 0, 6);
    http_get_join(a);
    ck_assert_int_eq(a->r.status, 503);
    json_t *o = rig_parse_json(a->r.body);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 6);
    json_decref(o);
    free(a);
}
END_TEST

/* The first observation changes no field a poll can give (leader "" term 0
 * before and after), so it answers no poll; a stream gets an event for it,
 * as its data says "observed":true now. */
START_TEST(first_observation_is_a_stream_event_only)
{
    struct http_sse *s = http_sse_start(rig.port, NULL);
    uint64_t id = expect_event(s, "", false, 0);
    struct http_get *a =
        http_get_start(rig.port, "/leader?wait=600ms&leader=&term=0&is_leader=false");
    ck_assert(rig_stats_until(rig.srv, rig_held_is, 1, 5000));
    rig_publish("", 0, 0);
    ck_assert_uint_eq(expect_event(s, "", false, 0), id + 1);
    http_get_join(a);
    ck_assert_msg(a->took_ms >= 550, "answered after %lld ms", (long long)a->took_ms);
    json_t *o = rig_parse_json(a->r.body);
    ck_assert(json_is_true(json_object_get(o, "observed")));
    json_decref(o);
    free(a);
    http_sse_stop(s);
}
END_TEST

START_TEST(longpoll_cap_answers_at_once)
{
    struct ld_http_options o = {.max_held = 2};
    struct ld_http *h = rig_start_with(&o);
    int hp = ld_http_port(h);
    struct http_get *a[2];
    struct http_resp r;
    rig_publish("other", 0, 1);
    a[0] = http_get_start(hp, "/leader?wait=30s&leader=other");
    a[1] = http_get_start(hp, "/leader?wait=30s&leader=other");
    ck_assert(rig_stats_until(h, rig_held_is, 2, 5000));
    int64_t t0 = ld_mono_ms();
    rig_fetch_at(hp, NULL, "/leader?wait=30s&leader=other", &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_int_eq(r.status, 503);
    ck_assert_int_lt(rig_elapsed_ms(t0), 2000);
    /* Stopping the server answers what it holds. */
    ld_http_stop(h);
    for (int i = 0; i < 2; i++) {
        http_get_wait(a[i]);
        ck_assert_msg(a[i]->took_ms < 5000, "held %lld ms", (long long)a[i]->took_ms);
        free(a[i]);
    }
}
END_TEST

START_TEST(watch_first_event_and_changes)
{
    rig_publish("other", 0, 4);
    struct http_sse *s = http_sse_start(rig.port, NULL);
    uint64_t id = expect_event(s, "other", false, 4);
    ck_assert_int_eq(s->head->status, 200);
    ck_assert_str_eq(s->head->ctype, "text/event-stream");
    ck_assert_str_eq(s->head->cache, "no-store");
    struct ld_http_stats stats;
    ld_http_get_stats(rig.srv, &stats);
    ck_assert_uint_eq(stats.seq, id);
    ck_assert_uint_eq(stats.subscribers, 1);

    /* A publish that changes nothing visible sends nothing; a change sends
     * one event with the next id. */
    struct ld_snapshot snap;
    ld_state_read(&rig.st, &snap);
    snap.heartbeat_ms = ld_mono_ms();
    ld_state_publish(&rig.st, &snap);
    rig_publish("me", 60000, 5);
    ck_assert_uint_eq(expect_event(s, "me", true, 5), id + 1);
    rig_publish("", 0, 5);
    ck_assert_uint_eq(expect_event(s, "", false, 5), id + 2);
    ck_assert_int_eq(http_sse_count_blocks(s->raw), 3);

    /* Changes in quick succession (each seen by the server, as a release
     * and the next acquisition would be) all arrive, in order. */
    for (int i = 0; i < 5; i++) {
        rig_publish(i % 2 ? "" : "other", 0, 6 + i);
        ck_assert(
            rig_stats_until(rig.srv, rig_seq_is, (long)(id + 3 + (uint64_t)i), 2000));
    }
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(expect_event(s, i % 2 ? "" : "other", false, 6 + i),
                          id + 3 + i);

    /* The stream does not hold up probes. */
    struct http_resp r;
    int64_t t0 = ld_mono_ms();
    rig_fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_lt(rig_elapsed_ms(t0), 1000);

    /* The client going away is noticed at once, without a write. */
    http_sse_stop(s);
    ck_assert_msg(rig_stats_until(rig.srv, rig_subscribers_are, 0, 2000),
                  "subscriber not cleaned up");
}
END_TEST

START_TEST(watch_lapse_without_publish)
{
    rig_publish("me", 500, 3);
    struct http_sse *s = http_sse_start(rig.port, NULL);
    uint64_t id = expect_event(s, "me", true, 3);
    struct ld_snapshot snap;
    ld_state_read(&rig.st, &snap);
    ck_assert_uint_eq(expect_event(s, "me", false, 3), id + 1);
    int64_t late = ld_mono_ms() - snap.lead_until_ms;
    ck_assert_msg(late >= 0 && late < 1000, "flip seen %lld ms after the lapse",
                  (long long)late);
    http_sse_stop(s);
}
END_TEST

START_TEST(watch_last_event_id)
{
    struct http_sse *s, *again, *old, *junk;
    char last[32];
    struct ld_http_options o = {.heartbeat_ms = 100};
    struct ld_http *h = rig_start_with(&o);
    int hp = ld_http_port(h);
    rig_publish("other", 0, 4);
    s = http_sse_start(hp, NULL);
    uint64_t id = expect_event(s, "other", false, 4);
    /* Heartbeats are comments. */
    ck_assert(http_sse_wait_blocks(s, 2, 5000));
    struct http_sse_block b;
    ck_assert(http_sse_block(s, 1, &b));
    ck_assert(b.comment);
    http_sse_stop(s);

    /* Reconnecting with the current id: no repeat, only what comes next. */
    snprintf(last, sizeof(last), "%llu", (unsigned long long)id);
    again = http_sse_start(hp, last);
    ck_assert(http_sse_wait_blocks(again, 1, 5000));
    ck_assert(http_sse_block(again, 0, &b));
    ck_assert_msg(b.comment, "got %s", again->raw);
    /* An older id or garbage: the current state once. */
    snprintf(last, sizeof(last), "%llu", (unsigned long long)id - 1);
    old = http_sse_start(hp, last);
    ck_assert_uint_eq(expect_event(old, "other", false, 4), id);
    junk = http_sse_start(hp, "not-a-number");
    ck_assert_uint_eq(expect_event(junk, "other", false, 4), id);

    rig_publish("me", 60000, 5);
    /* Only heartbeats came before: the next event is the change. */
    ck_assert_uint_eq(expect_event(again, "me", true, 5), id + 1);
    ck_assert_uint_eq(expect_event(old, "me", true, 5), id + 1);
    http_sse_stop(again);
    http_sse_stop(old);
    http_sse_stop(junk);
    ld_http_stop(h);
}
END_TEST

START_TEST(watch_cap_and_cleanup)
{
    struct ld_http_options o = {.max_subscribers = 3};
    struct ld_http *h = rig_start_with(&o);
    int hp = ld_http_port(h);
    struct http_sse *s[3];
    struct http_resp r;
    rig_publish("other", 0, 1);
    for (int i = 0; i < 3; i++) {
        s[i] = http_sse_start(hp, NULL);
        expect_event(s[i], "other", false, 1);
    }
    rig_fetch_at(hp, NULL, "/watch", &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_int_eq(r.status, 503);
    json_t *j = rig_parse_json(r.body);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "error")), "too many"));
    json_decref(j);
    /* HEAD does not subscribe; other methods are refused. */
    rig_fetch_at(hp, "HEAD", "/watch", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.ctype, "text/event-stream");
    rig_fetch_at(hp, "POST", "/watch", &r);
    ck_assert_int_eq(r.status, 405);

    http_sse_stop(s[0]);
    ck_assert(rig_stats_until(h, rig_subscribers_are, 2, 2000));
    s[0] = http_sse_start(hp, NULL);
    expect_event(s[0], "other", false, 1);
    for (int i = 0; i < 3; i++)
        http_sse_stop(s[i]);
    ck_assert(rig_stats_until(h, rig_subscribers_are, 0, 2000));
    ck_assert(rig_stats_until(h, rig_connections_at_most, 0, 2000));
    ld_http_stop(h);
}
END_TEST

/* Many subscribers come and go; the server ends with none and no
 * connections (memory is checked by valgrind and the integration test). */
START_TEST(watch_many_come_and_go)
{
    enum { N = 40 };
    struct http_sse *s[N];
    rig_publish("other", 0, 1);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++)
            s[i] = http_sse_start(rig.port, NULL);
        for (int i = 0; i < N; i++)
            expect_event(s[i], "other", false, 1 + round);
        rig_publish("me", 60000, 2 + round);
        for (int i = 0; i < N; i++)
            expect_event(s[i], "me", true, 2 + round);
        for (int i = 0; i < N; i++)
            http_sse_stop(s[i]);
        ck_assert(rig_stats_until(rig.srv, rig_subscribers_are, 0, 5000));
        rig_publish("other", 0, 2 + round);
    }
    ck_assert(rig_stats_until(rig.srv, rig_connections_at_most, 0, 5000));
}
END_TEST

/* Stopping the server ends streams cleanly. */
START_TEST(watch_ends_on_stop)
{
    struct ld_http *h = rig_start_with(NULL);
    rig_publish("other", 0, 1);
    struct http_sse *s = http_sse_start(ld_http_port(h), NULL);
    expect_event(s, "other", false, 1);
    ld_http_stop(h);
    http_sse_join(s);
    ck_assert_int_eq(s->head->rc, CURLE_OK);
    http_sse_stop(s);
}
END_TEST

/* Plays the election loop: waits (bounded) for a request on the channel's
 * eventfd, then publishes what the outcome leaves and answers. */
struct fake_loop {
    pthread_t th;
    enum ld_resign_outcome answer;
    int requests; /* tickets taken */
};

static void *fake_loop_main(void *arg)
{
    struct fake_loop *fl = arg;
    int64_t deadline = ld_mono_ms() + 10000;
    uint64_t first, last;
    while (ld_mono_ms() < deadline) {
        struct pollfd pfd = {.fd = ld_state_resign_fd(&rig.st), .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ld_state_resign_drain(&rig.st);
        if (!ld_state_resign_take(&rig.st, &first, &last))
            continue;
        fl->requests += (int)(last - first + 1);
        if (fl->answer == LD_RESIGN_RELEASED)
            rig_publish("", 0, 3);
        ld_state_resign_answer(&rig.st, first, last, fl->answer);
        break;
    }
    return NULL;
}

static void resign_with_loop_answering(enum ld_resign_outcome answer, long status)
{
    struct fake_loop fl = {.answer = answer};
    struct http_resp r;
    rig_publish("me", 60000, 3);
    ck_assert_int_eq(pthread_create(&fl.th, NULL, fake_loop_main, &fl), 0);
    rig_fetch("POST", "/resign", &r);
    pthread_join(fl.th, NULL);
    ck_assert_int_eq(fl.requests, 1);
    ck_assert_int_eq(r.status, status);
    ck_assert_str_eq(r.ctype, "application/json");
    json_t *o = rig_parse_json(r.body);
    if (status == 200) {
        ck_assert(json_is_false(json_object_get(o, "is_leader")));
        ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 3);
    } else {
        ck_assert(json_is_string(json_object_get(o, "error")));
    }
    json_decref(o);
}

START_TEST(resign_waits_for_the_loop)
{
    ck_assert_int_eq(ld_state_resign_enable(&rig.st, 5000), 0);
    resign_with_loop_answering(LD_RESIGN_RELEASED, 200);
    resign_with_loop_answering(LD_RESIGN_NOT_LEADER, 409);
    resign_with_loop_answering(LD_RESIGN_FAILED, 503);
    /* The connection stays usable after a POST with a body. */
    struct http_resp r;
    rig_fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 200);
    rig_fetch("GET", "/resign", &r);
    ck_assert_int_eq(r.status, 405);
    ck_assert_str_eq(r.allow, "POST");
}
END_TEST

START_TEST(resign_without_an_outcome_is_bounded)
{
    struct http_resp r;
    /* No channel: nobody could act on it. */
    rig_publish("me", 60000, 3);
    rig_fetch("POST", "/resign", &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_ptr_nonnull(strstr(r.body, "not available"));
    /* A loop that never answers: 503 once the wait is over. */
    ck_assert_int_eq(ld_state_resign_enable(&rig.st, 300), 0);
    int64_t t0 = ld_mono_ms();
    rig_fetch("POST", "/resign", &r);
    int64_t took = ld_mono_ms() - t0;
    ck_assert_int_eq(r.status, 503);
    ck_assert_ptr_nonnull(strstr(r.body, "no outcome in time"));
    ck_assert_int_ge(took, 300);
    ck_assert_int_lt(took, 5000);
    /* The request was asked all the same: the loop finds it. */
    uint64_t first, last;
    ck_assert(ld_state_resign_take(&rig.st, &first, &last));
    ck_assert_uint_eq(first, 1);
    ck_assert_uint_eq(last, 1);
}
END_TEST

static Suite *http_hold_suite(void)
{
    Suite *s = suite_create("http_hold");
    TCase *tc = tcase_create("server");
    tcase_add_checked_fixture(tc, rig_setup, rig_teardown);
    tcase_add_test(tc, longpoll_answers_at_once_when_state_differs);
    tcase_add_test(tc, longpoll_rejects_bad_arguments);
    tcase_add_test(tc, longpoll_held_until_change);
    tcase_add_test(tc, longpoll_times_out_with_current_state);
    tcase_add_test(tc, longpoll_wakes_on_lapse_without_publish);
    tcase_add_test(tc, the_lapse_is_awaited_on_the_suspend_counting_clock);
    tcase_add_test(tc, longpoll_without_fields_waits_for_any_change);
    tcase_add_test(tc, first_observation_is_a_stream_event_only);
    tcase_add_test(tc, longpoll_cap_answers_at_once);
    tcase_add_test(tc, watch_first_event_and_changes);
    tcase_add_test(tc, watch_lapse_without_publish);
    tcase_add_test(tc, watch_last_event_id);
    tcase_add_test(tc, watch_cap_and_cleanup);
    tcase_add_test(tc, watch_many_come_and_go);
    tcase_add_test(tc, watch_ends_on_stop);
    tcase_add_test(tc, resign_waits_for_the_loop);
    tcase_add_test(tc, resign_without_an_outcome_is_bounded);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = ld_test_run(http_hold_suite());
    curl_global_cleanup();
    return rc;
}
