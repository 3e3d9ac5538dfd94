/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/http_dispatch: the sidecar's HTTP server on
 * 127.0.0.1 (port 0) answering plain requests (/leader, /, /healthz,
 * /readyz, /metrics, errors and methods, HEAD, keep-alive) while snapshots
 * are published through ld_state_publish, consistently under a publisher
 * running flat out.
 */
#include <check.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "../../cmd/leaderd/http/http.h"
#include "clock.h"
#include "support/http_client.h"
#include "support/http_rig.h"
#include "support/run_suite.h"

START_TEST(readyz_before_and_after_observed)
{
    struct http_resp r;
    rig_fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_str_eq(r.body, "lease not observed yet");
    rig_fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);

    rig_publish("", 0, 0);
    rig_fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "ok");
    ck_assert_str_eq(r.ctype, "text/plain; charset=utf-8");
}
END_TEST

START_TEST(leader_status_follows_snapshot)
{
    struct http_resp r;
    rig_publish("me", 60000, 7);
    rig_fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.ctype, "application/json");
    ck_assert_str_eq(r.cache, "no-store");
    json_t *o = rig_parse_json(r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "lease")), "ns/demo");
    ck_assert_str_eq(json_string_value(json_object_get(o, "identity")), "me");
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "me");
    ck_assert(json_is_true(json_object_get(o, "is_leader")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 7);
    ck_assert_str_eq(json_string_value(json_object_get(o, "renewed_at")),
                     "2026-01-01T00:00:00.123456Z");
    json_decref(o);

    rig_fetch(NULL, "/", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{\"name\":\"me\"}");

    rig_publish("other-pod", 0, 8);
    rig_fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    o = rig_parse_json(r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "other-pod");
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 8);
    json_decref(o);
    rig_fetch(NULL, "/", &r);
    ck_assert_str_eq(r.body, "{\"name\":\"other-pod\"}");

    /* Unknown query arguments are ignored; without wait= nothing is held. */
    rig_publish("me", 60000, 9);
    rig_fetch(NULL, "/leader?x=1&leader=me&term=9&is_leader=true", &r);
    ck_assert_int_eq(r.status, 200);
}
END_TEST

START_TEST(leadership_lapses_without_publish)
{
    struct http_resp r;
    struct timespec ten_ms = {0, 10 * 1000 * 1000};

    /* The loop says "leading" but its deadline has passed: not leader. */
    rig_publish("me", -1, 3);
    rig_fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    json_t *o = rig_parse_json(r.body);
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "me");
    json_decref(o);

    /* Leading for one more second, then nothing is published: the answer
     * turns by itself once the deadline passes. */
    rig_publish("me", 1000, 3);
    struct ld_snapshot s;
    ld_state_read(&rig.st, &s);
    rig_fetch(NULL, "/leader", &r);
    ck_assert_msg(r.status == 200 || ld_mono_ms() >= s.lead_until_ms,
                  "status %ld before the deadline", r.status);
    for (int i = 0; i < 500 && ld_mono_ms() < s.lead_until_ms; i++)
        nanosleep(&ten_ms, NULL);
    ck_assert_int_ge(ld_mono_ms(), s.lead_until_ms);
    rig_fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    o = rig_parse_json(r.body);
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    json_decref(o);
    rig_fetch(NULL, "/metrics", &r);
    ck_assert_ptr_nonnull(
        strstr(r.body, "\nleader_election_master_status{name=\"demo\"} 0\n"));
}
END_TEST

START_TEST(healthz_answers)
{
    struct http_resp r;
    struct ld_snapshot s;
    rig_publish("me", 60000, 1);
    rig_fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "ok");

    ld_state_read(&rig.st, &s);
    snprintf(s.health_error, sizeof(s.health_error), "cannot reach the API: timeout");
    ld_state_publish(&rig.st, &s);
    rig_fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 500);
    ck_assert_str_eq(r.body, "cannot reach the API: timeout");

    ld_state_read(&rig.st, &s);
    s.health_error[0] = '\0';
    s.heartbeat_ms = ld_mono_ms() - RIG_STALE_MS - 1000;
    ld_state_publish(&rig.st, &s);
    rig_fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 500);
    ck_assert_ptr_nonnull(strstr(r.body, "stalled"));

    ld_state_read(&rig.st, &s);
    s.heartbeat_ms = ld_mono_ms();
    s.lead_until_ms = ld_mono_ms() - RIG_STALE_MS - 1000;
    ld_state_publish(&rig.st, &s);
    rig_fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 500);
    ck_assert_ptr_nonnull(strstr(r.body, "renew"));
    rig_fetch("HEAD", "/healthz", &r);
    ck_assert_int_eq(r.status, 500);
}
END_TEST

START_TEST(metrics_endpoint)
{
    struct http_resp r;
    rig_publish("me", 60000, 4);
    ld_metrics_observe_request(&rig.met, "PUT", 200, 0.02);
    ld_metrics_observe_request(&rig.met, "GET", 0, 5.5);
    rig_fetch(NULL, "/metrics", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.ctype, "text/plain; version=0.0.4; charset=utf-8");
    ck_assert_ptr_nonnull(
        strstr(r.body, "\nleader_election_master_status{name=\"demo\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(r.body, "\nleaderd_api_requests_total{verb=\"PUT\",code=\"200\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(r.body, "\nleaderd_api_requests_total{verb=\"GET\",code=\"error\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(r.body, "\nleaderd_api_request_duration_seconds_count 2\n"));
    ck_assert_ptr_nonnull(strstr(r.body, "\nleaderd_term 4\n"));
}
END_TEST

START_TEST(errors_and_methods)
{
    struct http_resp r;
    rig_fetch(NULL, "/nope", &r);
    ck_assert_int_eq(r.status, 404);
    ck_assert_str_eq(r.ctype, "application/json");
    json_t *o = rig_parse_json(r.body);
    ck_assert(json_is_string(json_object_get(o, "error")));
    json_decref(o);

    static const char *const methods[] = {"POST", "PUT", "DELETE"};
    for (size_t i = 0; i < 3; i++) {
        rig_fetch(methods[i], "/leader", &r);
        ck_assert_int_eq(r.status, 405);
        ck_assert_str_eq(r.allow, "GET, HEAD");
        o = rig_parse_json(r.body);
        ck_assert(json_is_string(json_object_get(o, "error")));
        json_decref(o);
    }
    /* Unknown path beats unknown method. */
    rig_fetch("POST", "/nope", &r);
    ck_assert_int_eq(r.status, 404);

    /* HEAD: the status and headers of GET, no body. */
    rig_publish("me", 60000, 1);
    rig_fetch("HEAD", "/leader", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_str_eq(r.ctype, "application/json");
    rig_publish("x", 0, 2);
    rig_fetch("HEAD", "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_uint_eq(r.len, 0);

    /* A body on a GET is read and ignored. */
    rig_fetch("GET+BODY", "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    o = rig_parse_json(r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "x");
    json_decref(o);

    /* The server still answers after all that. */
    rig_fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 200);
}
END_TEST

/* Scrapers and probes may reuse their connection. */
START_TEST(keep_alive)
{
    char url[128];
    struct http_resp r;
    long connects = -1;
    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_resp_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    static const char *const paths[] = {"/metrics", "/leader", "/healthz", "/readyz",
                                        "/"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        memset(&r, 0, sizeof(r));
        snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", rig.port, paths[i]);
        curl_easy_setopt(c, CURLOPT_URL, url);
        ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        ck_assert_int_eq(connects, i == 0 ? 1 : 0);
    }
    curl_easy_cleanup(c);
}
END_TEST

static volatile int flipping;

static void *flipper(void *arg)
{
    (void)arg;
    for (int64_t i = 0; flipping && i < 1000000; i++)
        rig_publish(i % 2 ? "me" : "other", i % 2 ? 60000 : 0, i);
    return NULL;
}

/* While the loop publishes as fast as it can, every answer is internally
 * consistent: 200 exactly when the body says is_leader. Mismatches are
 * counted and asserted after the publisher has stopped, so a failure
 * cannot leave it running into the next test. */
START_TEST(consistent_under_concurrent_publish)
{
    pthread_t th;
    struct http_resp r;
    int bad = 0, answered = 0;
    char first_bad[256] = "";
    rig_publish("other", 0, 0);
    flipping = 1;
    ck_assert_int_eq(pthread_create(&th, NULL, flipper, NULL), 0);
    for (int i = 0; i < 100; i++) {
        rig_fetch_at(rig.port, NULL, "/leader", &r);
        json_t *o = r.rc == CURLE_OK ? json_loads(r.body, 0, NULL) : NULL;
        if (!o) {
            snprintf(first_bad, sizeof(first_bad), "no answer: %s",
                     curl_easy_strerror(r.rc));
            continue;
        }
        answered++;
        bool leader = json_is_true(json_object_get(o, "is_leader"));
        const char *who = json_string_value(json_object_get(o, "leader"));
        if (r.status != (leader ? 200 : 503) || !who ||
            strcmp(who, leader ? "me" : "other") != 0) {
            if (bad++ == 0)
                snprintf(first_bad, sizeof(first_bad), "%ld %.200s", r.status, r.body);
        }
        json_decref(o);
    }
    flipping = 0;
    pthread_join(th, NULL);
    ck_assert_msg(answered == 100, "%d answers; %s", answered, first_bad);
    ck_assert_msg(bad == 0, "%d inconsistent answers, first: %s", bad, first_bad);
}
END_TEST

static Suite *http_dispatch_suite(void)
{
    Suite *s = suite_create("http_dispatch");
    TCase *tc = tcase_create("server");
    tcase_add_checked_fixture(tc, rig_setup, rig_teardown);
    tcase_add_test(tc, readyz_before_and_after_observed);
    tcase_add_test(tc, leader_status_follows_snapshot);
    tcase_add_test(tc, leadership_lapses_without_publish);
    tcase_add_test(tc, healthz_answers);
    tcase_add_test(tc, metrics_endpoint);
    tcase_add_test(tc, errors_and_methods);
    tcase_add_test(tc, keep_alive);
    tcase_add_test(tc, consistent_under_concurrent_publish);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = ld_test_run(http_dispatch_suite());
    curl_global_cleanup();
    return rc;
}
