/*
 * Unit tests for cmd/leaderd/http: routing, rendering and long-poll
 * arguments as plain functions, then the real server on 127.0.0.1 (port 0)
 * driven with libcurl (and raw sockets for idle connections) while
 * snapshots are published through ld_state_publish: long-polls, /watch
 * event streams, their caps and cleanup, and making room when full.
 */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "timefmt.h"

#include "../../cmd/leaderd/http.h"
#include "clock.h"
#include "support/run_suite.h"

#define STALE_MS 5000
#define BODY_MAX 65536

static struct ld_state st;
static struct ld_metrics met;
static struct ld_http *srv;
static int port;

/* ---- helpers ---- */

struct resp {
    long status;
    char body[BODY_MAX];
    size_t len;
    char ctype[128];
    char allow[64];
    char cache[64];
    CURLcode rc;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct resp *r = ud;
    size_t len = size * n;
    if (len > sizeof(r->body) - 1 - r->len)
        return 0;
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = '\0';
    return len;
}

static void header_value(const char *line, size_t len, const char *name, char *out,
                         size_t outlen)
{
    size_t n = strlen(name);
    if (len <= n + 1 || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return;
    const char *v = line + n + 1;
    const char *end = line + len;
    while (v < end && *v == ' ')
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n'))
        end--;
    snprintf(out, outlen, "%.*s", (int)(end - v), v);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct resp *r = ud;
    /* The status as soon as it arrives, for streams that never end (the
     * line ends in "\r\n", so strtol stops inside it). */
    if (size * n > 12 && strncmp(p, "HTTP/1.", 7) == 0 && p[8] == ' ')
        r->status = strtol(p + 9, NULL, 10);
    header_value(p, size * n, "Content-Type", r->ctype, sizeof(r->ctype));
    header_value(p, size * n, "Allow", r->allow, sizeof(r->allow));
    header_value(p, size * n, "Cache-Control", r->cache, sizeof(r->cache));
    return size * n;
}

/* One request to the test server; method NULL means GET. No Check
 * assertions, so other threads may use it; r->rc says how it went. */
static void fetch_raw(int at_port, const char *method, const char *path, struct resp *r)
{
    char *url = NULL;
    memset(r, 0, sizeof(*r));
    CURL *c = curl_easy_init();
    if (!c || asprintf(&url, "http://127.0.0.1:%d%s", at_port, path) < 0) {
        curl_easy_cleanup(c);
        r->rc = CURLE_FAILED_INIT;
        return;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    if (method && strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (method && strcmp(method, "POST") == 0)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"x\":1}");
    else if (method && strcmp(method, "GET+BODY") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "ignored");
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "GET");
    } else if (method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    r->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(c);
    free(url);
}

static void fetch_at(int at_port, const char *method, const char *path, struct resp *r)
{
    fetch_raw(at_port, method, path, r);
    ck_assert_msg(r->rc != CURLE_FAILED_INIT, "curl_easy_init failed");
}

static void fetch(const char *method, const char *path, struct resp *r)
{
    fetch_at(port, method, path, r);
    ck_assert_msg(r->rc == CURLE_OK, "%s %s: %s", method ? method : "GET", path,
                  curl_easy_strerror(r->rc));
}

static json_t *parse_json(const char *text)
{
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    ck_assert_msg(o != NULL, "not JSON (%s): %s", jerr.text, text);
    ck_assert(json_is_object(o));
    return o;
}

static int64_t t_us(const char *text)
{
    int64_t us = 0;
    ck_assert_int_eq(ld_microtime_parse(text, &us), LD_OK);
    return us;
}

/* 2026-01-01T00:00:00.123456Z, the renewTime every published snapshot
 * carries. */
static const int64_t renewed_us = INT64_C(1767225600123456);

/* Publishes a snapshot: observed, holder, leading until now+lead_for_ms
 * (not leading when lead_for_ms is 0), a fresh heartbeat. Runs on other
 * threads too, so it must not use ck_assert (Check's messages are not
 * thread-safe, even for passing assertions). */
static void publish(const char *holder, int64_t lead_for_ms, int64_t term)
{
    struct ld_snapshot s;
    ld_state_read(&st, &s);
    int64_t now = ld_mono_ms();
    s.observed = true;
    snprintf(s.leader, sizeof(s.leader), "%s", holder);
    s.leading = lead_for_ms != 0;
    s.lead_until_ms = now + lead_for_ms;
    s.term = term;
    s.has_renewed_at = true;
    s.renewed_at_us = renewed_us;
    s.heartbeat_ms = now;
    s.health_error[0] = '\0';
    ld_state_publish(&st, &s);
}

static void setup(void)
{
    char err[256];
    ld_state_init(&st, "ns/demo", "me", STALE_MS);
    ld_metrics_init(&met);
    srv = ld_http_start("127.0.0.1", 0, &st, &met, err, sizeof(err));
    ck_assert_msg(srv != NULL, "start: %s", err);
    port = ld_http_port(srv);
    ck_assert_int_gt(port, 0);
    ck_assert_int_eq(t_us("2026-01-01T00:00:00.123456Z"), renewed_us);
}

static void teardown(void)
{
    ld_http_stop(srv);
    srv = NULL;
    ld_metrics_destroy(&met);
    ld_state_destroy(&st);
}

static void base_snapshot(struct ld_snapshot *s)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->lease, sizeof(s->lease), "ns/demo");
    snprintf(s->identity, sizeof(s->identity), "me");
    s->stale_after_ms = STALE_MS;
    s->heartbeat_ms = 1000;
}

/* ---- without a socket ---- */

START_TEST(render_leader_fields)
{
    struct ld_snapshot s;
    base_snapshot(&s);
    snprintf(s.leader, sizeof(s.leader), "me");
    s.observed = true;
    s.leading = true;
    s.lead_until_ms = 2000;
    s.term = 7;
    s.has_renewed_at = true;
    s.renewed_at_us = t_us("2026-01-01T00:00:00.5Z");
    char *text = ld_http_render_leader(&s, 1999);
    ck_assert_ptr_nonnull(text);
    json_t *o = parse_json(text);
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
    o = parse_json(text);
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    ck_assert(json_is_null(json_object_get(o, "renewed_at")));
    json_decref(o);
    free(text);

    /* Nobody holds it: leader "". Quotes in identities are escaped. */
    snprintf(s.leader, sizeof(s.leader), "%s", "");
    snprintf(s.identity, sizeof(s.identity), "pod \"a\"");
    text = ld_http_render_leader(&s, 0);
    o = parse_json(text);
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
    base_snapshot(&s);
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
        json_t *o = parse_json(r.body);
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
        json_t *o = parse_json(r.body);
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
    base_snapshot(&s);
    s.heartbeat_ms = 10000;
    ck_assert(ld_http_healthy(&s, 10000 + STALE_MS, why, sizeof(why)));
    ck_assert_str_eq(why, "ok");
    ck_assert(!ld_http_healthy(&s, 10000 + STALE_MS + 1, why, sizeof(why)));
    ck_assert_ptr_nonnull(strstr(why, "stalled"));

    /* A leader whose claim lapsed long ago while the loop still says it
     * leads is wedged, even with a fresh heartbeat. */
    s.leading = true;
    s.lead_until_ms = 20000;
    s.heartbeat_ms = 30000;
    ck_assert(ld_http_healthy(&s, 20000 + STALE_MS, NULL, 0));
    ck_assert(!ld_http_healthy(&s, 20000 + STALE_MS + 1, why, sizeof(why)));
    ck_assert_ptr_nonnull(strstr(why, "renew"));

    /* stale_after_ms <= 0 turns both time checks off. */
    s.stale_after_ms = 0;
    ck_assert(ld_http_healthy(&s, 1000000, why, sizeof(why)));

    snprintf(s.health_error, sizeof(s.health_error), "kube: forbidden");
    ck_assert(!ld_http_healthy(&s, 30000, why, sizeof(why)));
    ck_assert_str_eq(why, "kube: forbidden");
}
END_TEST

/* ---- over a real socket ---- */

START_TEST(readyz_before_and_after_observed)
{
    struct resp r;
    fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_str_eq(r.body, "lease not observed yet");
    fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);

    publish("", 0, 0);
    fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "ok");
    ck_assert_str_eq(r.ctype, "text/plain; charset=utf-8");
}
END_TEST

START_TEST(leader_status_follows_snapshot)
{
    struct resp r;
    publish("me", 60000, 7);
    fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.ctype, "application/json");
    ck_assert_str_eq(r.cache, "no-store");
    json_t *o = parse_json(r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "lease")), "ns/demo");
    ck_assert_str_eq(json_string_value(json_object_get(o, "identity")), "me");
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "me");
    ck_assert(json_is_true(json_object_get(o, "is_leader")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 7);
    ck_assert_str_eq(json_string_value(json_object_get(o, "renewed_at")),
                     "2026-01-01T00:00:00.123456Z");
    json_decref(o);

    fetch(NULL, "/", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "{\"name\":\"me\"}");

    publish("other-pod", 0, 8);
    fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    o = parse_json(r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "other-pod");
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 8);
    json_decref(o);
    fetch(NULL, "/", &r);
    ck_assert_str_eq(r.body, "{\"name\":\"other-pod\"}");

    /* Unknown query arguments are ignored; without wait= nothing is held. */
    publish("me", 60000, 9);
    fetch(NULL, "/leader?x=1&leader=me&term=9&is_leader=true", &r);
    ck_assert_int_eq(r.status, 200);
}
END_TEST

START_TEST(leadership_lapses_without_publish)
{
    struct resp r;
    struct timespec ten_ms = {0, 10 * 1000 * 1000};

    /* The loop says "leading" but its deadline has passed: not leader. */
    publish("me", -1, 3);
    fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    json_t *o = parse_json(r.body);
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "me");
    json_decref(o);

    /* Leading for one more second, then nothing is published: the answer
     * turns by itself once the deadline passes. */
    publish("me", 1000, 3);
    struct ld_snapshot s;
    ld_state_read(&st, &s);
    fetch(NULL, "/leader", &r);
    ck_assert_msg(r.status == 200 || ld_mono_ms() >= s.lead_until_ms,
                  "status %ld before the deadline", r.status);
    for (int i = 0; i < 500 && ld_mono_ms() < s.lead_until_ms; i++)
        nanosleep(&ten_ms, NULL);
    ck_assert_int_ge(ld_mono_ms(), s.lead_until_ms);
    fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    o = parse_json(r.body);
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    json_decref(o);
    fetch(NULL, "/metrics", &r);
    ck_assert_ptr_nonnull(
        strstr(r.body, "\nleader_election_master_status{name=\"demo\"} 0\n"));
}
END_TEST

START_TEST(healthz_answers)
{
    struct resp r;
    struct ld_snapshot s;
    publish("me", 60000, 1);
    fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "ok");

    ld_state_read(&st, &s);
    snprintf(s.health_error, sizeof(s.health_error), "cannot reach the API: timeout");
    ld_state_publish(&st, &s);
    fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 500);
    ck_assert_str_eq(r.body, "cannot reach the API: timeout");

    ld_state_read(&st, &s);
    s.health_error[0] = '\0';
    s.heartbeat_ms = ld_mono_ms() - STALE_MS - 1000;
    ld_state_publish(&st, &s);
    fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 500);
    ck_assert_ptr_nonnull(strstr(r.body, "stalled"));

    ld_state_read(&st, &s);
    s.heartbeat_ms = ld_mono_ms();
    s.lead_until_ms = ld_mono_ms() - STALE_MS - 1000;
    ld_state_publish(&st, &s);
    fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 500);
    ck_assert_ptr_nonnull(strstr(r.body, "renew"));
    fetch("HEAD", "/healthz", &r);
    ck_assert_int_eq(r.status, 500);
}
END_TEST

START_TEST(metrics_endpoint)
{
    struct resp r;
    publish("me", 60000, 4);
    ld_metrics_observe_request(&met, "PUT", 200, 0.02);
    ld_metrics_observe_request(&met, "GET", 0, 5.5);
    fetch(NULL, "/metrics", &r);
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
    struct resp r;
    fetch(NULL, "/nope", &r);
    ck_assert_int_eq(r.status, 404);
    ck_assert_str_eq(r.ctype, "application/json");
    json_t *o = parse_json(r.body);
    ck_assert(json_is_string(json_object_get(o, "error")));
    json_decref(o);

    static const char *const methods[] = {"POST", "PUT", "DELETE"};
    for (size_t i = 0; i < 3; i++) {
        fetch(methods[i], "/leader", &r);
        ck_assert_int_eq(r.status, 405);
        ck_assert_str_eq(r.allow, "GET, HEAD");
        o = parse_json(r.body);
        ck_assert(json_is_string(json_object_get(o, "error")));
        json_decref(o);
    }
    /* Unknown path beats unknown method. */
    fetch("POST", "/nope", &r);
    ck_assert_int_eq(r.status, 404);

    /* HEAD: the status and headers of GET, no body. */
    publish("me", 60000, 1);
    fetch("HEAD", "/leader", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_str_eq(r.ctype, "application/json");
    publish("x", 0, 2);
    fetch("HEAD", "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_uint_eq(r.len, 0);

    /* A body on a GET is read and ignored. */
    fetch("GET+BODY", "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    o = parse_json(r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "x");
    json_decref(o);

    /* The server still answers after all that. */
    fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 200);
}
END_TEST

/* Scrapers and probes may reuse their connection. */
START_TEST(keep_alive)
{
    char url[128];
    struct resp r;
    long connects = -1;
    CURL *c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    static const char *const paths[] = {"/metrics", "/leader", "/healthz", "/readyz",
                                        "/"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        memset(&r, 0, sizeof(r));
        snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, paths[i]);
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
        publish(i % 2 ? "me" : "other", i % 2 ? 60000 : 0, i);
    return NULL;
}

/* While the loop publishes as fast as it can, every answer is internally
 * consistent: 200 exactly when the body says is_leader. Mismatches are
 * counted and asserted after the publisher has stopped, so a failure
 * cannot leave it running into the next test. */
START_TEST(consistent_under_concurrent_publish)
{
    pthread_t th;
    struct resp r;
    int bad = 0, answered = 0;
    char first_bad[256] = "";
    publish("other", 0, 0);
    flipping = 1;
    ck_assert_int_eq(pthread_create(&th, NULL, flipper, NULL), 0);
    for (int i = 0; i < 100; i++) {
        fetch_at(port, NULL, "/leader", &r);
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

START_TEST(start_errors_and_stop)
{
    char err[256];
    /* The port is taken by the fixture's server. */
    struct ld_http *h = ld_http_start("127.0.0.1", port, &st, &met, err, sizeof(err));
    ck_assert_ptr_null(h);
    ck_assert_msg(strstr(err, "in use") != NULL, "%s", err);
    char num[16];
    snprintf(num, sizeof(num), ":%d", port);
    ck_assert_ptr_nonnull(strstr(err, num));

    h = ld_http_start("no-such-host.invalid", 0, &st, &met, err, sizeof(err));
    ck_assert_ptr_null(h);
    ck_assert_ptr_nonnull(strstr(err, "no-such-host.invalid"));

    h = ld_http_start("127.0.0.1", 70000, &st, &met, err, sizeof(err));
    ck_assert_ptr_null(h);

    /* All interfaces, reached over loopback. */
    h = ld_http_start("", 0, &st, &met, err, sizeof(err));
    ck_assert_msg(h != NULL, "%s", err);
    struct resp r;
    fetch_at(ld_http_port(h), NULL, "/readyz", &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_int_eq(r.status, 503);
    int old = ld_http_port(h);
    ld_http_stop(h);
    /* Stopped means closed. */
    fetch_at(old, NULL, "/readyz", &r);
    ck_assert_int_eq(r.rc, CURLE_COULDNT_CONNECT);

    /* IPv6 loopback, where the host has it. */
    h = ld_http_start("::1", 0, &st, &met, err, sizeof(err));
    if (h) {
        char url[64];
        CURL *c = curl_easy_init();
        snprintf(url, sizeof(url), "http://[::1]:%d/readyz", ld_http_port(h));
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c, CURLOPT_PROXY, "");
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
        ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        ck_assert_int_eq(status, 503);
        curl_easy_cleanup(c);
        ld_http_stop(h);
    }
    ld_http_stop(NULL);
}
END_TEST

/* ---- long-poll arguments, without a socket ---- */

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
    base_snapshot(&s);
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
    base_snapshot(&s);
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

/* ---- helpers for held requests ---- */

static int64_t elapsed_since(int64_t t0)
{
    return ld_mono_ms() - t0;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls the server's counters (there is no event to wait on for them) until
 * pred holds or timeout_ms passes; returns whether it held. */
static bool stats_until(struct ld_http *h,
                        bool (*pred)(const struct ld_http_stats *, long), long arg,
                        int64_t timeout_ms)
{
    struct ld_http_stats stats;
    int64_t t0 = ld_mono_ms();
    for (;;) {
        ld_http_get_stats(h, &stats);
        if (pred(&stats, arg))
            return true;
        if (elapsed_since(t0) > timeout_ms)
            return false;
        pause_ms(2);
    }
}

static bool held_is(const struct ld_http_stats *s, long n)
{
    return s->held == (unsigned long)n;
}

static bool seq_is(const struct ld_http_stats *s, long n)
{
    return s->seq == (uint64_t)n;
}

static bool subscribers_are(const struct ld_http_stats *s, long n)
{
    return s->subscribers == (unsigned long)n;
}

static bool connections_at_most(const struct ld_http_stats *s, long n)
{
    return s->connections <= (unsigned long)n;
}

/* A GET on its own thread. */
struct async_get {
    pthread_t th;
    int port;
    char path[1024];
    struct resp r;
    int64_t started_ms, took_ms;
};

static void *async_get_main(void *arg)
{
    struct async_get *a = arg;
    fetch_raw(a->port, NULL, a->path, &a->r);
    a->took_ms = elapsed_since(a->started_ms);
    return NULL;
}

static void async_get_start(struct async_get *a, int at_port, const char *path)
{
    memset(a, 0, sizeof(*a));
    a->port = at_port;
    snprintf(a->path, sizeof(a->path), "%s", path);
    a->started_ms = ld_mono_ms();
    ck_assert_int_eq(pthread_create(&a->th, NULL, async_get_main, a), 0);
}

static void async_get_join(struct async_get *a)
{
    pthread_join(a->th, NULL);
    ck_assert_msg(a->r.rc == CURLE_OK, "GET %s: %s", a->path,
                  curl_easy_strerror(a->r.rc));
}

/* ---- an SSE client on its own thread ---- */

struct sse {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int port;
    char last_id[64]; /* Last-Event-ID to send, "" for none */
    char raw[32768];  /* the stream as received */
    size_t len;
    int fd;   /* the connection's socket while open, else -1 */
    int next; /* index of the first block expect_event has not read */
    bool done;
    struct resp head; /* status and headers */
};

static size_t sse_on_body(char *p, size_t size, size_t n, void *ud)
{
    struct sse *s = ud;
    size_t len = size * n;
    pthread_mutex_lock(&s->mu);
    if (len > sizeof(s->raw) - 1 - s->len)
        len = 0;
    memcpy(s->raw + s->len, p, len);
    s->len += len;
    s->raw[s->len] = '\0';
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return len == size * n ? len : 0;
}

static curl_socket_t sse_open_socket(void *ud, curlsocktype purpose,
                                     struct curl_sockaddr *a)
{
    struct sse *s = ud;
    (void)purpose;
    int fd = socket(a->family, a->socktype, a->protocol);
    pthread_mutex_lock(&s->mu);
    s->fd = fd;
    pthread_mutex_unlock(&s->mu);
    return fd;
}

static int sse_close_socket(void *ud, curl_socket_t fd)
{
    struct sse *s = ud;
    pthread_mutex_lock(&s->mu);
    s->fd = -1;
    pthread_mutex_unlock(&s->mu);
    return close(fd);
}

static void *sse_main(void *arg)
{
    struct sse *s = arg;
    char url[128], hdr[128];
    struct curl_slist *headers = NULL;
    CURL *c = curl_easy_init();
    if (c) {
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/watch", s->port);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sse_on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &s->head);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, sse_open_socket);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, s);
        curl_easy_setopt(c, CURLOPT_CLOSESOCKETFUNCTION, sse_close_socket);
        curl_easy_setopt(c, CURLOPT_CLOSESOCKETDATA, s);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROXY, "");
        if (s->last_id[0]) {
            snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", s->last_id);
            headers = curl_slist_append(headers, hdr);
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        }
        s->head.rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s->head.status);
        curl_easy_cleanup(c);
        curl_slist_free_all(headers);
    }
    pthread_mutex_lock(&s->mu);
    s->done = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void sse_start(struct sse *s, int at_port, const char *last_id)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->port = at_port;
    s->fd = -1;
    snprintf(s->last_id, sizeof(s->last_id), "%s", last_id ? last_id : "");
    ck_assert_int_eq(pthread_create(&s->th, NULL, sse_main, s), 0);
}

/* Hangs up (as a client going away would) and reaps the thread. */
static void sse_stop(struct sse *s)
{
    pthread_mutex_lock(&s->mu);
    if (s->fd >= 0)
        shutdown(s->fd, SHUT_RDWR);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static int count_blocks(const char *raw)
{
    int n = 0;
    for (const char *p = strstr(raw, "\n\n"); p; p = strstr(p + 2, "\n\n"))
        n++;
    return n;
}

/* Waits until n blocks (events or comments) have arrived; false on
 * timeout or when the stream ended first. */
static bool sse_wait_blocks(struct sse *s, int n, int64_t timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    while (count_blocks(s->raw) < n && !s->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->cv, &s->mu, &dl);
    bool ok = count_blocks(s->raw) >= n;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

struct sse_block {
    bool comment;
    char id[32];
    char event[32];
    char data[4096];
};

/* Block i (from 0) of what has arrived; false when there is none. */
static bool sse_block(struct sse *s, int i, struct sse_block *b)
{
    char copy[sizeof(s->raw)];
    memset(b, 0, sizeof(*b));
    pthread_mutex_lock(&s->mu);
    memcpy(copy, s->raw, s->len + 1);
    pthread_mutex_unlock(&s->mu);
    char *p = copy;
    for (int k = 0; k < i && p; k++) {
        p = strstr(p, "\n\n");
        p = p ? p + 2 : NULL;
    }
    char *end = p ? strstr(p, "\n\n") : NULL;
    if (!end)
        return false;
    *end = '\0';
    char *save = NULL;
    for (char *line = strtok_r(p, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == ':')
            b->comment = true;
        else if (strncmp(line, "id: ", 4) == 0)
            snprintf(b->id, sizeof(b->id), "%s", line + 4);
        else if (strncmp(line, "event: ", 7) == 0)
            snprintf(b->event, sizeof(b->event), "%s", line + 7);
        else if (strncmp(line, "data: ", 6) == 0)
            snprintf(b->data, sizeof(b->data), "%s", line + 6);
    }
    return true;
}

/* Asserts the next event (skipping heartbeat comments) is a leader event
 * for holder with is_leader and term; returns its id. */
static uint64_t expect_event(struct sse *s, const char *holder, bool leading,
                             int64_t term)
{
    struct sse_block b;
    for (;;) {
        ck_assert_msg(sse_wait_blocks(s, s->next + 1, 5000),
                      "event %d did not arrive: %s", s->next, s->raw);
        ck_assert(sse_block(s, s->next++, &b));
        if (!b.comment)
            break;
    }
    ck_assert_str_eq(b.event, "leader");
    ck_assert_msg(b.id[0] != '\0', "no id in %s", s->raw);
    json_t *o = parse_json(b.data);
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

static struct ld_http *start_with(const struct ld_http_options *o)
{
    char err[256];
    struct ld_http *h =
        ld_http_start_opts("127.0.0.1", 0, &st, &met, o, err, sizeof(err));
    ck_assert_msg(h != NULL, "start: %s", err);
    return h;
}

/* ---- long-poll over a socket ---- */

START_TEST(longpoll_answers_at_once_when_state_differs)
{
    struct resp r;
    publish("me", 60000, 9);
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
        fetch(NULL, differ[i], &r);
        ck_assert_msg(elapsed_since(t0) < 2000, "%s held", differ[i]);
        ck_assert_int_eq(r.status, 200);
        ck_assert_str_eq(r.ctype, "application/json");
        ck_assert_str_eq(r.cache, "no-store");
        json_t *o = parse_json(r.body);
        ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "me");
        ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 9);
        json_decref(o);
    }
    /* The same through HEAD: status only. */
    fetch("HEAD", "/leader?wait=30s&leader=other", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 0);
}
END_TEST

START_TEST(longpoll_rejects_bad_arguments)
{
    struct resp r;
    static const char *const bad[] = {
        "/leader?wait=abc",
        "/leader?wait=30s&term=x",
        "/leader?wait=1s&is_leader=maybe",
        "/leader?wait=1s&wait=2s",
        "/leader?term=-1",
        "/leader?wait=%ff%00",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fetch(NULL, bad[i], &r);
        ck_assert_msg(r.status == 400, "%s: %ld", bad[i], r.status);
        ck_assert_str_eq(r.ctype, "application/json");
        json_t *o = parse_json(r.body);
        ck_assert(json_is_string(json_object_get(o, "error")));
        json_decref(o);
    }
    fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 503);
}
END_TEST

START_TEST(longpoll_held_until_change)
{
    struct async_get a;
    struct resp r;
    publish("other", 0, 5);
    async_get_start(&a, port, "/leader?wait=30s&leader=other&term=5&is_leader=false");
    ck_assert_msg(stats_until(srv, held_is, 1, 5000), "the poll was not held");

    /* A held request does not hold up anyone else, probes included. */
    int64_t t0 = ld_mono_ms();
    fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 200);
    fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_int_lt(elapsed_since(t0), 1000);

    /* A publish that changes nothing the caller gave keeps it held. */
    struct ld_snapshot s;
    ld_state_read(&st, &s);
    s.heartbeat_ms = ld_mono_ms();
    s.renewed_at_us += 1000000;
    ld_state_publish(&st, &s);

    int64_t changed_at = ld_mono_ms();
    publish("me", 60000, 6);
    async_get_join(&a);
    ck_assert_int_eq(a.r.status, 200);
    ck_assert_int_lt(ld_mono_ms() - changed_at, 2000);
    json_t *o = parse_json(a.r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "me");
    ck_assert(json_is_true(json_object_get(o, "is_leader")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 6);
    json_decref(o);
    ck_assert(stats_until(srv, held_is, 0, 1000));
}
END_TEST

START_TEST(longpoll_times_out_with_current_state)
{
    struct async_get a;
    publish("other", 0, 5);
    async_get_start(&a, port, "/leader?wait=300ms&leader=other");
    async_get_join(&a);
    ck_assert_int_eq(a.r.status, 503);
    ck_assert_msg(a.took_ms >= 290 && a.took_ms < 5000, "took %lld ms",
                  (long long)a.took_ms);
    json_t *o = parse_json(a.r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "other");
    json_decref(o);
}
END_TEST

/* is_leader turns false when lead_until passes, with no publish: a caller
 * holding with is_leader=true hears about it then, and so does one that
 * gave only the leader (any change of the three answers a held poll). */
START_TEST(longpoll_wakes_on_lapse_without_publish)
{
    struct async_get a[2];
    publish("me", 400, 3);
    struct ld_snapshot s;
    ld_state_read(&st, &s);
    async_get_start(&a[0], port, "/leader?wait=30s&is_leader=true&leader=me");
    async_get_start(&a[1], port, "/leader?wait=30s&leader=me");
    for (int i = 0; i < 2; i++) {
        async_get_join(&a[i]);
        int64_t now = ld_mono_ms();
        ck_assert_int_eq(a[i].r.status, 503);
        ck_assert_int_ge(now, s.lead_until_ms);
        ck_assert_msg(now - s.lead_until_ms < 1000, "answered %lld ms after the lapse",
                      (long long)(now - s.lead_until_ms));
        json_t *o = parse_json(a[i].r.body);
        ck_assert(json_is_false(json_object_get(o, "is_leader")));
        json_decref(o);
    }
}
END_TEST

/* With nothing to compare, wait= means "tell me about the next change". */
START_TEST(longpoll_without_fields_waits_for_any_change)
{
    struct async_get a;
    publish("other", 0, 5);
    async_get_start(&a, port, "/leader?wait=30s");
    ck_assert(stats_until(srv, held_is, 1, 5000));
    publish("other", 0, 6);
    async_get_join(&a);
    ck_assert_int_eq(a.r.status, 503);
    json_t *o = parse_json(a.r.body);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 6);
    json_decref(o);
}
END_TEST

/* The first observation changes no field a poll can give (leader "" term 0
 * before and after), so it answers no poll; a stream gets an event for it,
 * as its data says "observed":true now. */
START_TEST(first_observation_is_a_stream_event_only)
{
    struct async_get a;
    struct sse s;
    sse_start(&s, port, NULL);
    uint64_t id = expect_event(&s, "", false, 0);
    async_get_start(&a, port, "/leader?wait=600ms&leader=&term=0&is_leader=false");
    ck_assert(stats_until(srv, held_is, 1, 5000));
    publish("", 0, 0);
    ck_assert_uint_eq(expect_event(&s, "", false, 0), id + 1);
    async_get_join(&a);
    ck_assert_msg(a.took_ms >= 550, "answered after %lld ms", (long long)a.took_ms);
    json_t *o = parse_json(a.r.body);
    ck_assert(json_is_true(json_object_get(o, "observed")));
    json_decref(o);
    sse_stop(&s);
}
END_TEST

START_TEST(longpoll_cap_answers_at_once)
{
    struct ld_http_options o = {.max_held = 2};
    struct ld_http *h = start_with(&o);
    int hp = ld_http_port(h);
    struct async_get a[2];
    struct resp r;
    publish("other", 0, 1);
    async_get_start(&a[0], hp, "/leader?wait=30s&leader=other");
    async_get_start(&a[1], hp, "/leader?wait=30s&leader=other");
    ck_assert(stats_until(h, held_is, 2, 5000));
    int64_t t0 = ld_mono_ms();
    fetch_at(hp, NULL, "/leader?wait=30s&leader=other", &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_int_eq(r.status, 503);
    ck_assert_int_lt(elapsed_since(t0), 2000);
    /* Stopping the server answers what it holds. */
    ld_http_stop(h);
    for (int i = 0; i < 2; i++) {
        pthread_join(a[i].th, NULL);
        ck_assert_msg(a[i].took_ms < 5000, "held %lld ms", (long long)a[i].took_ms);
    }
}
END_TEST

/* ---- /watch over a socket ---- */

START_TEST(watch_first_event_and_changes)
{
    struct sse s;
    publish("other", 0, 4);
    sse_start(&s, port, NULL);
    uint64_t id = expect_event(&s, "other", false, 4);
    ck_assert_int_eq(s.head.status, 200);
    ck_assert_str_eq(s.head.ctype, "text/event-stream");
    ck_assert_str_eq(s.head.cache, "no-store");
    struct ld_http_stats stats;
    ld_http_get_stats(srv, &stats);
    ck_assert_uint_eq(stats.seq, id);
    ck_assert_uint_eq(stats.subscribers, 1);

    /* A publish that changes nothing visible sends nothing; a change sends
     * one event with the next id. */
    struct ld_snapshot snap;
    ld_state_read(&st, &snap);
    snap.heartbeat_ms = ld_mono_ms();
    ld_state_publish(&st, &snap);
    publish("me", 60000, 5);
    ck_assert_uint_eq(expect_event(&s, "me", true, 5), id + 1);
    publish("", 0, 5);
    ck_assert_uint_eq(expect_event(&s, "", false, 5), id + 2);
    ck_assert_int_eq(count_blocks(s.raw), 3);

    /* Changes in quick succession (each seen by the server, as a release
     * and the next acquisition would be) all arrive, in order. */
    for (int i = 0; i < 5; i++) {
        publish(i % 2 ? "" : "other", 0, 6 + i);
        ck_assert(stats_until(srv, seq_is, (long)(id + 3 + (uint64_t)i), 2000));
    }
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(expect_event(&s, i % 2 ? "" : "other", false, 6 + i),
                          id + 3 + i);

    /* The stream does not hold up probes. */
    struct resp r;
    int64_t t0 = ld_mono_ms();
    fetch(NULL, "/healthz", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_lt(elapsed_since(t0), 1000);

    /* The client going away is noticed at once, without a write. */
    sse_stop(&s);
    ck_assert_msg(stats_until(srv, subscribers_are, 0, 2000),
                  "subscriber not cleaned up");
}
END_TEST

START_TEST(watch_lapse_without_publish)
{
    struct sse s;
    publish("me", 500, 3);
    sse_start(&s, port, NULL);
    uint64_t id = expect_event(&s, "me", true, 3);
    struct ld_snapshot snap;
    ld_state_read(&st, &snap);
    ck_assert_uint_eq(expect_event(&s, "me", false, 3), id + 1);
    int64_t late = ld_mono_ms() - snap.lead_until_ms;
    ck_assert_msg(late >= 0 && late < 1000, "flip seen %lld ms after the lapse",
                  (long long)late);
    sse_stop(&s);
}
END_TEST

START_TEST(watch_last_event_id)
{
    struct sse s, again, old, junk;
    char last[32];
    struct ld_http_options o = {.heartbeat_ms = 100};
    struct ld_http *h = start_with(&o);
    int hp = ld_http_port(h);
    publish("other", 0, 4);
    sse_start(&s, hp, NULL);
    uint64_t id = expect_event(&s, "other", false, 4);
    /* Heartbeats are comments. */
    ck_assert(sse_wait_blocks(&s, 2, 5000));
    struct sse_block b;
    ck_assert(sse_block(&s, 1, &b));
    ck_assert(b.comment);
    sse_stop(&s);

    /* Reconnecting with the current id: no repeat, only what comes next. */
    snprintf(last, sizeof(last), "%llu", (unsigned long long)id);
    sse_start(&again, hp, last);
    ck_assert(sse_wait_blocks(&again, 1, 5000));
    ck_assert(sse_block(&again, 0, &b));
    ck_assert_msg(b.comment, "got %s", again.raw);
    /* An older id or garbage: the current state once. */
    snprintf(last, sizeof(last), "%llu", (unsigned long long)id - 1);
    sse_start(&old, hp, last);
    ck_assert_uint_eq(expect_event(&old, "other", false, 4), id);
    sse_start(&junk, hp, "not-a-number");
    ck_assert_uint_eq(expect_event(&junk, "other", false, 4), id);

    publish("me", 60000, 5);
    /* Only heartbeats came before: the next event is the change. */
    ck_assert_uint_eq(expect_event(&again, "me", true, 5), id + 1);
    ck_assert_uint_eq(expect_event(&old, "me", true, 5), id + 1);
    sse_stop(&again);
    sse_stop(&old);
    sse_stop(&junk);
    ld_http_stop(h);
}
END_TEST

START_TEST(watch_cap_and_cleanup)
{
    struct ld_http_options o = {.max_subscribers = 3};
    struct ld_http *h = start_with(&o);
    int hp = ld_http_port(h);
    struct sse s[3];
    struct resp r;
    publish("other", 0, 1);
    for (int i = 0; i < 3; i++) {
        sse_start(&s[i], hp, NULL);
        expect_event(&s[i], "other", false, 1);
    }
    fetch_at(hp, NULL, "/watch", &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_int_eq(r.status, 503);
    json_t *j = parse_json(r.body);
    ck_assert(json_is_string(json_object_get(j, "error")));
    json_decref(j);
    /* HEAD does not subscribe; other methods are refused. */
    fetch_at(hp, "HEAD", "/watch", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.ctype, "text/event-stream");
    fetch_at(hp, "POST", "/watch", &r);
    ck_assert_int_eq(r.status, 405);

    sse_stop(&s[0]);
    ck_assert(stats_until(h, subscribers_are, 2, 2000));
    sse_start(&s[0], hp, NULL);
    expect_event(&s[0], "other", false, 1);
    for (int i = 0; i < 3; i++)
        sse_stop(&s[i]);
    ck_assert(stats_until(h, subscribers_are, 0, 2000));
    ck_assert(stats_until(h, connections_at_most, 0, 2000));
    ld_http_stop(h);
}
END_TEST

/* Many subscribers come and go; the server ends with none and no
 * connections (memory is checked by valgrind and the integration test). */
START_TEST(watch_many_come_and_go)
{
    enum { N = 40 };
    static struct sse s[N];
    publish("other", 0, 1);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++)
            sse_start(&s[i], port, NULL);
        for (int i = 0; i < N; i++)
            expect_event(&s[i], "other", false, 1 + round);
        publish("me", 60000, 2 + round);
        for (int i = 0; i < N; i++)
            expect_event(&s[i], "me", true, 2 + round);
        for (int i = 0; i < N; i++)
            sse_stop(&s[i]);
        ck_assert(stats_until(srv, subscribers_are, 0, 5000));
        publish("other", 0, 2 + round);
    }
    ck_assert(stats_until(srv, connections_at_most, 0, 5000));
}
END_TEST

/* Stopping the server ends streams cleanly. */
START_TEST(watch_ends_on_stop)
{
    struct ld_http *h = start_with(NULL);
    struct sse s;
    publish("other", 0, 1);
    sse_start(&s, ld_http_port(h), NULL);
    expect_event(&s, "other", false, 1);
    ld_http_stop(h);
    pthread_join(s.th, NULL);
    ck_assert_int_eq(s.head.rc, CURLE_OK);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
}
END_TEST

/* ---- making room ---- */

static int idle_socket(int at_port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)at_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

START_TEST(full_server_makes_room_for_probes)
{
    enum { IDLE = 60 };
    struct ld_http_options o = {.max_connections = 32};
    struct ld_http *h = start_with(&o);
    int hp = ld_http_port(h);
    int fds[IDLE];
    struct resp r;
    struct ld_http_stats stats;
    publish("me", 60000, 1);
    for (int i = 0; i < IDLE; i++) {
        fds[i] = idle_socket(hp);
        ck_assert_int_ge(fds[i], 0);
        /* A slowloris start on some of them. */
        if (i % 2 && write(fds[i], "GET / HTTP/1.1\r\nX-A: ", 21) != 21)
            ck_abort_msg("write failed");
    }
    for (int i = 0; i < 3; i++) {
        int64_t t0 = ld_mono_ms();
        fetch_at(hp, NULL, "/healthz", &r);
        ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
        ck_assert_int_eq(r.status, 200);
        ck_assert_int_lt(elapsed_since(t0), 1000);
    }
    ld_http_get_stats(h, &stats);
    ck_assert_uint_eq(stats.max_connections, 32);
    ck_assert_uint_le(stats.connections, 32);
    ck_assert_uint_ge(stats.evicted, IDLE - 32);
    for (int i = 0; i < IDLE; i++)
        close(fds[i]);
    ld_http_stop(h);
}
END_TEST

START_TEST(garbage_and_oversize_requests)
{
    struct resp r;
    char path[40000];
    publish("me", 60000, 1);
    snprintf(path, sizeof(path), "/leader?x=");
    memset(path + 10, 'a', sizeof(path) - 11);
    path[sizeof(path) - 1] = '\0';
    fetch(NULL, path, &r);
    ck_assert_msg(r.status >= 400 && r.status < 500, "oversize URL: %ld", r.status);

    /* Complete lines of junk (a TLS hello, no method, no version) end the
     * connection, or get a 4xx; an unknown HTTP version gets 505. Junk
     * without a line end is a slow client: see the eviction test. */
    static const struct {
        const char *bytes;
        size_t len;
    } junk[] = {
#define JUNK(lit) {lit, sizeof(lit) - 1}
        JUNK("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
        JUNK("GARBAGE\r\n\r\n"),
        JUNK("GET\r\n\r\n"),
        JUNK("GET /leader\r\n\r\n"),
        JUNK("GET / HTTP/9.9\r\n\r\n"),
        JUNK("GET / HTTP/1.1\r\nno colon\r\n\r\n"),
#undef JUNK
    };
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        char buf[512];
        int fd = idle_socket(port);
        ck_assert_int_ge(fd, 0);
        struct timeval tv = {5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        ck_assert_int_eq(write(fd, junk[i].bytes, junk[i].len), (ssize_t)junk[i].len);
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        ck_assert_msg(n >= 0, "no answer to junk %zu: %s", i, strerror(errno));
        buf[n > 0 ? n : 0] = '\0';
        ck_assert_msg(n == 0 || strncmp(buf + 8, " 4", 2) == 0 ||
                          strncmp(buf + 8, " 505", 4) == 0,
                      "junk %zu: %s", i, buf);
        close(fd);
    }
    fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 200);
}
END_TEST

/* ---- POST /resign ---- */

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
    base_snapshot(&s);
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
    json_t *o = parse_json(r.body);
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
        struct pollfd pfd = {.fd = ld_state_resign_fd(&st), .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ld_state_resign_drain(&st);
        if (!ld_state_resign_take(&st, &first, &last))
            continue;
        fl->requests += (int)(last - first + 1);
        if (fl->answer == LD_RESIGN_RELEASED)
            publish("", 0, 3);
        ld_state_resign_answer(&st, first, last, fl->answer);
        break;
    }
    return NULL;
}

static void resign_with_loop_answering(enum ld_resign_outcome answer, long status)
{
    struct fake_loop fl = {.answer = answer};
    struct resp r;
    publish("me", 60000, 3);
    ck_assert_int_eq(pthread_create(&fl.th, NULL, fake_loop_main, &fl), 0);
    fetch("POST", "/resign", &r);
    pthread_join(fl.th, NULL);
    ck_assert_int_eq(fl.requests, 1);
    ck_assert_int_eq(r.status, status);
    ck_assert_str_eq(r.ctype, "application/json");
    json_t *o = parse_json(r.body);
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
    ck_assert_int_eq(ld_state_resign_enable(&st, 5000), 0);
    resign_with_loop_answering(LD_RESIGN_RELEASED, 200);
    resign_with_loop_answering(LD_RESIGN_NOT_LEADER, 409);
    resign_with_loop_answering(LD_RESIGN_FAILED, 503);
    /* The connection stays usable after a POST with a body. */
    struct resp r;
    fetch(NULL, "/readyz", &r);
    ck_assert_int_eq(r.status, 200);
    fetch("GET", "/resign", &r);
    ck_assert_int_eq(r.status, 405);
    ck_assert_str_eq(r.allow, "POST");
}
END_TEST

START_TEST(resign_without_an_outcome_is_bounded)
{
    struct resp r;
    /* No channel: nobody could act on it. */
    publish("me", 60000, 3);
    fetch("POST", "/resign", &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_ptr_nonnull(strstr(r.body, "not available"));
    /* A loop that never answers: 503 once the wait is over. */
    ck_assert_int_eq(ld_state_resign_enable(&st, 300), 0);
    int64_t t0 = ld_mono_ms();
    fetch("POST", "/resign", &r);
    int64_t took = ld_mono_ms() - t0;
    ck_assert_int_eq(r.status, 503);
    ck_assert_ptr_nonnull(strstr(r.body, "no outcome in time"));
    ck_assert_int_ge(took, 300);
    ck_assert_int_lt(took, 5000);
    /* The request was asked all the same: the loop finds it. */
    uint64_t first, last;
    ck_assert(ld_state_resign_take(&st, &first, &last));
    ck_assert_uint_eq(first, 1);
    ck_assert_uint_eq(last, 1);
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tp = tcase_create("pure");
    tcase_add_test(tp, render_leader_fields);
    tcase_add_test(tp, route_table);
    tcase_add_test(tp, health_rules);
    tcase_add_test(tp, poll_arguments);
    tcase_add_test(tp, poll_differs_compares_given_fields);
    tcase_add_test(tp, route_watch_renders_one_event);
    tcase_add_test(tp, loopback_peers_only);
    tcase_add_test(tp, resign_route_and_renderer);
    suite_add_tcase(s, tp);

    TCase *ts = tcase_create("server");
    tcase_add_checked_fixture(ts, setup, teardown);
    tcase_add_test(ts, readyz_before_and_after_observed);
    tcase_add_test(ts, leader_status_follows_snapshot);
    tcase_add_test(ts, leadership_lapses_without_publish);
    tcase_add_test(ts, healthz_answers);
    tcase_add_test(ts, metrics_endpoint);
    tcase_add_test(ts, errors_and_methods);
    tcase_add_test(ts, keep_alive);
    tcase_add_test(ts, consistent_under_concurrent_publish);
    tcase_add_test(ts, start_errors_and_stop);
    tcase_add_test(ts, longpoll_answers_at_once_when_state_differs);
    tcase_add_test(ts, longpoll_rejects_bad_arguments);
    tcase_add_test(ts, longpoll_held_until_change);
    tcase_add_test(ts, longpoll_times_out_with_current_state);
    tcase_add_test(ts, longpoll_wakes_on_lapse_without_publish);
    tcase_add_test(ts, longpoll_without_fields_waits_for_any_change);
    tcase_add_test(ts, first_observation_is_a_stream_event_only);
    tcase_add_test(ts, longpoll_cap_answers_at_once);
    tcase_add_test(ts, watch_first_event_and_changes);
    tcase_add_test(ts, watch_lapse_without_publish);
    tcase_add_test(ts, watch_last_event_id);
    tcase_add_test(ts, watch_cap_and_cleanup);
    tcase_add_test(ts, watch_many_come_and_go);
    tcase_add_test(ts, watch_ends_on_stop);
    tcase_add_test(ts, full_server_makes_room_for_probes);
    tcase_add_test(ts, garbage_and_oversize_requests);
    tcase_add_test(ts, resign_waits_for_the_loop);
    tcase_add_test(ts, resign_without_an_outcome_is_bounded);
    tcase_set_timeout(ts, 60);
    suite_add_tcase(s, ts);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = ld_test_run(http_suite());
    curl_global_cleanup();
    return rc;
}
