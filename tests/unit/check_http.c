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
    header_value(p, size * n, "Content-Type", r->ctype, sizeof(r->ctype));
    header_value(p, size * n, "Allow", r->allow, sizeof(r->allow));
    header_value(p, size * n, "Cache-Control", r->cache, sizeof(r->cache));
    return size * n;
}

/* One request to the test server; method NULL means GET. No Check
 * assertions, so other threads may use it; r->rc says how it went. */
static void fetch_raw(int at_port, const char *method, const char *path, struct resp *r)
{
    char url[2048];
    memset(r, 0, sizeof(*r));
    CURL *c = curl_easy_init();
    if (!c) {
        r->rc = CURLE_FAILED_INIT;
        return;
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", at_port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
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
        if (!o)
            continue;
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
    ck_assert_int_eq(answered, 100);
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

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tp = tcase_create("pure");
    tcase_add_test(tp, render_leader_fields);
    tcase_add_test(tp, route_table);
    tcase_add_test(tp, health_rules);
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
    tcase_set_timeout(ts, 60);
    suite_add_tcase(s, ts);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    SRunner *sr = srunner_create(http_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
