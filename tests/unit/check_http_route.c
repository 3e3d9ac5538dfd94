/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/http_route: what the sidecar's HTTP server
 * says, as plain functions of a snapshot and a time, without a socket: the
 * route table, the /leader and /watch renderers, /healthz's judgement,
 * long-poll arguments, which peers may resign, and the POST /resign
 * answers.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>

#include "../../cmd/leaderd/http/http.h"
#include "support/http_rig.h"
#include "support/run_suite.h"

START_TEST(render_leader_fields)
{
    struct ld_snapshot s;
    rig_base_snapshot(&s);
    snprintf(s.leader, sizeof(s.leader), "me");
    s.observed = true;
    s.leading = true;
    s.lead_until_ms = 2000;
    s.term = 7;
    s.has_renewed_at = true;
    s.renewed_at_us = rig_microtime_us("2026-01-01T00:00:00.5Z");
    char *text = ld_http_render_leader(&s, 1999);
    ck_assert_ptr_nonnull(text);
    json_t *o = rig_parse_json(text);
    ck_assert_str_eq(json_string_value(json_object_get(o, "lease")), "ns/demo");
    ck_assert_str_eq(json_string_value(json_object_get(o, "identity")), "me");
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "me");
    ck_assert(json_is_true(json_object_get(o, "is_leader")));
    ck_assert(json_is_integer(json_object_get(o, "term")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 7);
    ck_assert_str_eq(json_string_value(json_object_get(o, "renewed_at")),
                     "2026-01-01T00:00:00.500000Z");
    json_decref(o);
    free(text);

    /* At lead_until the claim is over; without a renewTime, null. */
    s.has_renewed_at = false;
    text = ld_http_render_leader(&s, 2000);
    o = rig_parse_json(text);
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    ck_assert(json_is_null(json_object_get(o, "renewed_at")));
    json_decref(o);
    free(text);

    /* Nobody holds it: leader "". Quotes in identities are escaped. */
    snprintf(s.leader, sizeof(s.leader), "%s", "");
    snprintf(s.identity, sizeof(s.identity), "pod \"a\"");
    text = ld_http_render_leader(&s, 0);
    o = rig_parse_json(text);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "");
    ck_assert_str_eq(json_string_value(json_object_get(o, "identity")), "pod \"a\"");
    json_decref(o);
    free(text);
}
END_TEST

START_TEST(route_table)
{
    struct ld_snapshot s;
    struct ld_http_reply r;
    rig_base_snapshot(&s);
    s.observed = true;
    snprintf(s.leader, sizeof(s.leader), "other");

    ck_assert_int_eq(ld_http_route("GET", "/leader", &s, NULL, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 503);
    ck_assert_str_eq(r.content_type, "application/json");
    ld_http_reply_clear(&r);

    ck_assert_int_eq(ld_http_route("GET", "/", &s, NULL, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{\"name\":\"other\"}");
    ld_http_reply_clear(&r);

    ck_assert_int_eq(ld_http_route("GET", "/metrics", &s, NULL, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.content_type, "version=0.0.4"));
    ck_assert_ptr_nonnull(
        strstr(r.body, "leader_election_master_status{name=\"demo\"} 0"));
    ld_http_reply_clear(&r);

    static const char *const unknown[] = {"/nope", "/leader/", "/LEADER", "",
                                          "/healthz/x"};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        ck_assert_int_eq(ld_http_route("GET", unknown[i], &s, NULL, 1000, &r), 0);
        ck_assert_uint_eq(r.status, 404);
        ck_assert(!r.allow);
        json_t *o = rig_parse_json(r.body);
        ck_assert(json_is_string(json_object_get(o, "error")));
        json_decref(o);
        ld_http_reply_clear(&r);
    }
    static const char *const methods[] = {"POST",  "PUT",     "DELETE",
                                          "PATCH", "OPTIONS", "get"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        ck_assert_int_eq(ld_http_route(methods[i], "/healthz", &s, NULL, 1000, &r), 0);
        ck_assert_uint_eq(r.status, 405);
        ck_assert(r.allow);
        json_t *o = rig_parse_json(r.body);
        ck_assert(json_is_string(json_object_get(o, "error")));
        json_decref(o);
        ld_http_reply_clear(&r);
    }
    ld_http_reply_clear(NULL);
}
END_TEST

START_TEST(health_rules)
{
    struct ld_snapshot s;
    char why[256];
    rig_base_snapshot(&s);
    s.heartbeat_ms = 10000;
    ck_assert(ld_http_healthy(&s, 10000 + RIG_STALE_MS, why, sizeof(why)));
    ck_assert_str_eq(why, "ok");
    ck_assert(!ld_http_healthy(&s, 10000 + RIG_STALE_MS + 1, why, sizeof(why)));
    ck_assert_ptr_nonnull(strstr(why, "stalled"));

    /* A leader whose claim lapsed long ago while the loop still says it
     * leads is wedged, even with a fresh heartbeat. */
    s.leading = true;
    s.lead_until_ms = 20000;
    s.heartbeat_ms = 30000;
    ck_assert(ld_http_healthy(&s, 20000 + RIG_STALE_MS, NULL, 0));
    ck_assert(!ld_http_healthy(&s, 20000 + RIG_STALE_MS + 1, why, sizeof(why)));
    ck_assert_ptr_nonnull(strstr(why, "renew"));

    /* stale_after_ms <= 0 turns both time checks off. */
    s.stale_after_ms = 0;
    ck_assert(ld_http_healthy(&s, 1000000, why, sizeof(why)));

    snprintf(s.health_error, sizeof(s.health_error), "kube: forbidden");
    ck_assert(!ld_http_healthy(&s, 30000, why, sizeof(why)));
    ck_assert_str_eq(why, "kube: forbidden");
}
END_TEST

START_TEST(poll_arguments)
{
    struct ld_http_poll p;
    char err[256];
    ld_http_poll_init(&p);
    ck_assert(!p.wait);
    ck_assert_int_eq(ld_http_poll_arg(&p, "wait", "30s", 60000, err, sizeof(err)), 0);
    ck_assert(p.wait);
    ck_assert_int_eq(p.wait_ms, 30000);
    /* Repeats are refused; unknown keys and bare keys are fine. */
    ck_assert_int_eq(ld_http_poll_arg(&p, "wait", "1s", 60000, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "twice"));
    ck_assert_int_eq(ld_http_poll_arg(&p, "other", NULL, 60000, err, sizeof(err)), 0);
    ck_assert_int_eq(ld_http_poll_arg(&p, "leader", "pod-a", 60000, err, sizeof(err)), 0);
    ck_assert(p.has_leader);
    ck_assert_str_eq(p.leader, "pod-a");
    ck_assert_int_eq(ld_http_poll_arg(&p, "term", "7", 60000, err, sizeof(err)), 0);
    ck_assert(p.has_term);
    ck_assert_int_eq(p.term, 7);
    ck_assert_int_eq(ld_http_poll_arg(&p, "is_leader", "false", 60000, err, sizeof(err)),
                     0);
    ck_assert(p.has_is_leader && !p.is_leader);

    /* Whole seconds, capping, and zero. */
    static const struct {
        const char *v;
        int64_t ms;
    } waits[] = {{"30", 30000},
                 {"2m", 60000},
                 {"1h", 60000},
                 {"500ms", 500},
                 {"0", 0},
                 {"0s", 0},
                 {"99999999999999999999", 60000}};
    for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
        ld_http_poll_init(&p);
        ck_assert_msg(ld_http_poll_arg(&p, "wait", waits[i].v, 60000, err, sizeof(err)) ==
                          0,
                      "%s: %s", waits[i].v, err);
        ck_assert_int_eq(p.wait_ms, waits[i].ms);
    }
    static const struct {
        const char *k, *v;
    } bad[] = {{"wait", "abc"},      {"wait", "-1s"},
               {"wait", ""},         {"wait", NULL},
               {"wait", "10x"},      {"term", "-1"},
               {"term", "1.5"},      {"term", ""},
               {"term", " 1"},       {"term", "0x10"},
               {"is_leader", "yes"}, {"is_leader", ""},
               {"is_leader", NULL},  {"term", "99999999999999999999"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ld_http_poll_init(&p);
        ck_assert_msg(ld_http_poll_arg(&p, bad[i].k, bad[i].v, 60000, err, sizeof(err)) ==
                          -1,
                      "%s=%s accepted", bad[i].k, bad[i].v ? bad[i].v : "(null)");
        ck_assert_msg(strncmp(err, bad[i].k, strlen(bad[i].k)) == 0, "%s", err);
    }
    /* The reason quotes the value, made safe for a JSON message. */
    ld_http_poll_init(&p);
    ck_assert_int_eq(ld_http_poll_arg(&p, "term", "\x01\"\xff", 60000, err, sizeof(err)),
                     -1);
    ck_assert_ptr_nonnull(strstr(err, "\"???\""));
    /* An identity longer than any holder cannot be what the caller saw. */
    char longid[LD_LEASE_MAX_HOLDER + 2];
    memset(longid, 'a', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    ck_assert_int_eq(ld_http_poll_arg(&p, "leader", longid, 60000, err, sizeof(err)), -1);
    longid[LD_LEASE_MAX_HOLDER] = '\0';
    ck_assert_int_eq(ld_http_poll_arg(&p, "leader", longid, 60000, err, sizeof(err)), 0);
    /* A bare leader means "nobody". */
    ld_http_poll_init(&p);
    ck_assert_int_eq(ld_http_poll_arg(&p, "leader", NULL, 60000, NULL, 0), 0);
    ck_assert(p.has_leader);
    ck_assert_str_eq(p.leader, "");
}
END_TEST

START_TEST(poll_differs_compares_given_fields)
{
    struct ld_snapshot s;
    struct ld_http_poll p;
    rig_base_snapshot(&s);
    snprintf(s.leader, sizeof(s.leader), "me");
    s.observed = true;
    s.leading = true;
    s.lead_until_ms = 2000;
    s.term = 4;

    ld_http_poll_init(&p);
    ck_assert(!ld_http_poll_differs(&p, &s, 1000)); /* nothing given */
    ck_assert_int_eq(ld_http_poll_arg(&p, "leader", "me", 60000, NULL, 0), 0);
    ck_assert(!ld_http_poll_differs(&p, &s, 1000));
    ck_assert_int_eq(ld_http_poll_arg(&p, "is_leader", "true", 60000, NULL, 0), 0);
    ck_assert(!ld_http_poll_differs(&p, &s, 1999));
    /* Leadership lapses by time alone. */
    ck_assert(ld_http_poll_differs(&p, &s, 2000));
    ck_assert_int_eq(ld_http_poll_arg(&p, "term", "3", 60000, NULL, 0), 0);
    ck_assert(ld_http_poll_differs(&p, &s, 1000));

    ld_http_poll_init(&p);
    ck_assert_int_eq(ld_http_poll_arg(&p, "leader", "", 60000, NULL, 0), 0);
    ck_assert(ld_http_poll_differs(&p, &s, 1000));
    ld_http_poll_init(&p);
    ck_assert_int_eq(ld_http_poll_arg(&p, "term", "4", 60000, NULL, 0), 0);
    ck_assert(!ld_http_poll_differs(&p, &s, 5000));
}
END_TEST

START_TEST(route_watch_renders_one_event)
{
    struct ld_snapshot s;
    struct ld_http_reply r;
    rig_base_snapshot(&s);
    s.observed = true;
    snprintf(s.leader, sizeof(s.leader), "other");
    s.term = 2;
    ck_assert_int_eq(ld_http_route("GET", "/watch", &s, NULL, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "text/event-stream");
    ck_assert_uint_eq(r.len, strlen(r.body));
    ck_assert_int_eq(strncmp(r.body, "event: leader\ndata: {", 21), 0);
    ck_assert_int_eq(strcmp(r.body + r.len - 3, "}\n\n"), 0);
    ld_http_reply_clear(&r);
    ck_assert_int_eq(ld_http_route("DELETE", "/watch", &s, NULL, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 405);
    ld_http_reply_clear(&r);
}
END_TEST

START_TEST(loopback_peers_only)
{
    struct sockaddr_in in4;
    memset(&in4, 0, sizeof(in4));
    in4.sin_family = AF_INET;
    const char *v4_yes[] = {"127.0.0.1", "127.1.2.3", "127.255.255.254"};
    const char *v4_no[] = {"10.0.0.1", "0.0.0.0", "128.0.0.1", "192.168.1.127"};
    for (size_t i = 0; i < sizeof(v4_yes) / sizeof(v4_yes[0]); i++) {
        ck_assert_int_eq(inet_pton(AF_INET, v4_yes[i], &in4.sin_addr), 1);
        ck_assert_msg(ld_http_peer_is_loopback((struct sockaddr *)&in4), "%s", v4_yes[i]);
    }
    for (size_t i = 0; i < sizeof(v4_no) / sizeof(v4_no[0]); i++) {
        ck_assert_int_eq(inet_pton(AF_INET, v4_no[i], &in4.sin_addr), 1);
        ck_assert_msg(!ld_http_peer_is_loopback((struct sockaddr *)&in4), "%s", v4_no[i]);
    }
    struct sockaddr_in6 in6;
    memset(&in6, 0, sizeof(in6));
    in6.sin6_family = AF_INET6;
    const char *v6_yes[] = {"::1", "::ffff:127.0.0.1", "::ffff:127.9.9.9"};
    const char *v6_no[] = {
        "::", "::2", "fe80::1", "2001:db8::1", "::ffff:10.0.0.1", "::127.0.0.1"};
    for (size_t i = 0; i < sizeof(v6_yes) / sizeof(v6_yes[0]); i++) {
        ck_assert_int_eq(inet_pton(AF_INET6, v6_yes[i], &in6.sin6_addr), 1);
        ck_assert_msg(ld_http_peer_is_loopback((struct sockaddr *)&in6), "%s", v6_yes[i]);
    }
    for (size_t i = 0; i < sizeof(v6_no) / sizeof(v6_no[0]); i++) {
        ck_assert_int_eq(inet_pton(AF_INET6, v6_no[i], &in6.sin6_addr), 1);
        ck_assert_msg(!ld_http_peer_is_loopback((struct sockaddr *)&in6), "%s", v6_no[i]);
    }
    struct sockaddr other;
    memset(&other, 0, sizeof(other));
    other.sa_family = AF_UNIX;
    ck_assert(!ld_http_peer_is_loopback(&other));
    ck_assert(!ld_http_peer_is_loopback(NULL));
}
END_TEST

START_TEST(resign_route_and_renderer)
{
    struct ld_snapshot s;
    struct ld_http_reply r;
    rig_base_snapshot(&s);
    snprintf(s.leader, sizeof(s.leader), "pod-b");
    static const char *const methods[] = {"GET", "HEAD", "PUT", "DELETE", "post"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        ck_assert_int_eq(ld_http_route(methods[i], "/resign", &s, NULL, 1000, &r), 0);
        ck_assert_uint_eq(r.status, 405);
        ck_assert(r.allow);
        ck_assert_str_eq(r.allow_methods, "POST");
        ld_http_reply_clear(&r);
    }
    /* Not leading: the snapshot alone answers. */
    ck_assert_int_eq(ld_http_route("POST", "/resign", &s, NULL, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 409);
    ck_assert_ptr_nonnull(strstr(r.body, "pod-b"));
    ld_http_reply_clear(&r);

    /* Outcomes: released shows the /leader body, judged at the time. */
    s.leading = true;
    s.lead_until_ms = 500;
    ck_assert_int_eq(ld_http_render_resign(&s, LD_RESIGN_RELEASED, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    json_t *o = rig_parse_json(r.body);
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "pod-b");
    json_decref(o);
    ld_http_reply_clear(&r);
    s.leader[0] = '\0';
    ck_assert_int_eq(ld_http_render_resign(&s, LD_RESIGN_NOT_LEADER, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 409);
    ck_assert_ptr_nonnull(strstr(r.body, "nobody holds"));
    ld_http_reply_clear(&r);
    ck_assert_int_eq(ld_http_render_resign(&s, LD_RESIGN_FAILED, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 503);
    ck_assert_ptr_nonnull(strstr(r.body, "release could not be written"));
    ld_http_reply_clear(&r);
    ck_assert_int_eq(ld_http_render_resign(&s, LD_RESIGN_PENDING, 1000, &r), 0);
    ck_assert_uint_eq(r.status, 503);
    ck_assert_ptr_nonnull(strstr(r.body, "no outcome in time"));
    ld_http_reply_clear(&r);
}
END_TEST

static Suite *http_route_suite(void)
{
    Suite *s = suite_create("http_route");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, render_leader_fields);
    tcase_add_test(tc, route_table);
    tcase_add_test(tc, health_rules);
    tcase_add_test(tc, poll_arguments);
    tcase_add_test(tc, poll_differs_compares_given_fields);
    tcase_add_test(tc, route_watch_renders_one_event);
    tcase_add_test(tc, loopback_peers_only);
    tcase_add_test(tc, resign_route_and_renderer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(http_route_suite());
}
