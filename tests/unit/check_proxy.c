/*
 * Unit tests for cmd/leaderd/proxy_gate (the API write gate's decisions:
 * reads, writes, upgrades, sizes, shard mode, the refusal's Status body,
 * the header filters) with hand-built snapshots and shard tables and
 * integer time, and for the proxy's metrics.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../cmd/leaderd/metrics.h"
#include "../../cmd/leaderd/proxy_gate.h"
#include "../../cmd/leaderd/state.h"
#include "support/run_suite.h"

#define NOW 100000

/* A snapshot of "me" in ns/lease: leading until NOW + 500 when leading. */
static void snap_init(struct ld_snapshot *s, const char *leader, bool leading)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->lease, sizeof(s->lease), "ns/lease");
    snprintf(s->identity, sizeof(s->identity), "me");
    snprintf(s->leader, sizeof(s->leader), "%s", leader);
    s->observed = true;
    s->leading = leading;
    s->lead_until_ms = leading ? NOW + 500 : 0;
}

static struct ld_proxy_req req(const char *method, const char *target)
{
    return (struct ld_proxy_req){.method = method, .target = target};
}

static void decide(const struct ld_proxy_req *r, const struct ld_snapshot *s, int64_t now,
                   struct ld_proxy_verdict *out)
{
    struct ld_proxy_view v = {.snap = s};
    ld_proxy_decide(r, &v, now, out);
}

START_TEST(reads_always_pass)
{
    static const char *const reads[] = {"GET", "HEAD", "OPTIONS"};
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, "other", false);
    for (size_t i = 0; i < 3; i++) {
        struct ld_proxy_req r = req(reads[i], "/api/v1/namespaces/a/pods?watch=1");
        decide(&r, &s, NOW, &v);
        ck_assert_uint_eq(v.status, 0);
        ck_assert(!v.write);
        ck_assert(ld_proxy_is_read(reads[i]));
    }
    /* Not even a table observed yet: reads still pass. */
    s.observed = false;
    struct ld_proxy_req r = req("GET", "/version");
    decide(&r, &s, NOW, &v);
    ck_assert_uint_eq(v.status, 0);
}
END_TEST

START_TEST(writes_pass_only_while_leading)
{
    static const char *const writes[] = {"POST",   "PUT",   "PATCH",
                                         "DELETE", "TRACE", "FOO"};
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
        struct ld_proxy_req r = req(writes[i], "/api/v1/namespaces/a/pods/p");
        ck_assert(!ld_proxy_is_read(writes[i]));
        snap_init(&s, "me", true);
        decide(&r, &s, NOW, &v);
        ck_assert_uint_eq(v.status, 0);
        ck_assert(v.write);
        ck_assert(!v.refused);
        /* Leadership ends by time alone at lead_until_ms. */
        decide(&r, &s, NOW + 499, &v);
        ck_assert_uint_eq(v.status, 0);
        decide(&r, &s, NOW + 500, &v);
        ck_assert_uint_eq(v.status, 503);
        ck_assert(v.refused);
        ck_assert_str_eq(v.reason, "ServiceUnavailable");
        ck_assert_ptr_nonnull(strstr(v.message, "lapsed"));
        snap_init(&s, "other", false);
        decide(&r, &s, NOW, &v);
        ck_assert_uint_eq(v.status, 503);
        ck_assert(v.refused);
        ck_assert_ptr_nonnull(strstr(v.message, "the holder is other"));
        ck_assert_ptr_nonnull(strstr(v.message, "ns/lease"));
        snap_init(&s, "", false);
        decide(&r, &s, NOW, &v);
        ck_assert_uint_eq(v.status, 503);
        ck_assert_ptr_nonnull(strstr(v.message, "nobody holds the Lease ns/lease"));
    }
    /* Not observed yet: nobody is known to lead, writes wait. */
    snap_init(&s, "", false);
    s.observed = false;
    struct ld_proxy_req r = req("POST", "/x");
    decide(&r, &s, NOW, &v);
    ck_assert_uint_eq(v.status, 503);
    ck_assert(v.refused);
}
END_TEST

START_TEST(still_leads_and_lead_until)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v, refusal;
    snap_init(&s, "me", true);
    struct ld_proxy_view view = {.snap = &s};
    struct ld_proxy_req r = req("PUT", "/x");
    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 0);
    ck_assert(ld_proxy_still_leads(&v, &view, NOW + 100, &refusal));
    ck_assert_int_eq(ld_proxy_lead_until(&v, &view), NOW + 500);
    ck_assert(!ld_proxy_still_leads(&v, &view, NOW + 500, &refusal));
    ck_assert_uint_eq(refusal.status, 503);
    ck_assert(refusal.refused);
    /* A publish that says another replica leads now. */
    snap_init(&s, "other", false);
    ck_assert(!ld_proxy_still_leads(&v, &view, NOW, NULL));
    ck_assert_int_eq(ld_proxy_lead_until(&v, &view), INT64_MIN);
    /* A read is never cut. */
    struct ld_proxy_req g = req("GET", "/x");
    ld_proxy_decide(&g, &view, NOW, &v);
    ck_assert(ld_proxy_still_leads(&v, &view, NOW, NULL));
}
END_TEST

START_TEST(upgrades_get_501)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, "me", true);
    static const char *const paths[] = {
        "/api/v1/namespaces/a/pods/p/exec?command=sh&stdin=true",
        "/api/v1/namespaces/a/pods/p/attach",
        "/api/v1/namespaces/a/pods/p/portforward?ports=80",
    };
    for (size_t i = 0; i < 3; i++) {
        struct ld_proxy_req r = req("POST", paths[i]);
        decide(&r, &s, NOW, &v);
        ck_assert_uint_eq(v.status, 501);
        r.method = "GET";
        decide(&r, &s, NOW, &v);
        ck_assert_uint_eq(v.status, 501);
    }
    struct ld_proxy_req r = req("GET", "/api/v1/namespaces/a/pods/p");
    r.upgrade = "websocket";
    decide(&r, &s, NOW, &v);
    ck_assert_uint_eq(v.status, 501);
    ck_assert_str_eq(v.reason, "NotImplemented");
    r.upgrade = NULL;
    r.connection = "keep-alive, Upgrade";
    decide(&r, &s, NOW, &v);
    ck_assert_uint_eq(v.status, 501);
    r.connection = "keep-alive";
    decide(&r, &s, NOW, &v);
    ck_assert_uint_eq(v.status, 0);
    r = req("CONNECT", "/");
    decide(&r, &s, NOW, &v);
    ck_assert_uint_eq(v.status, 501);
    /* Names that only look alike are ordinary requests. */
    static const char *const plain[] = {
        "/api/v1/namespaces/a/pods/exec",         "/api/v1/namespaces/a/pods/p/log",
        "/api/v1/namespaces/a/configmaps/p/exec", "/api/v1/namespaces/a/pods/p/execute",
        "/apis/x/v1/namespaces/a/pods/p/exec",
    };
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        r = req("GET", plain[i]);
        decide(&r, &s, NOW, &v);
        ck_assert_msg(v.status == 0, "%s: %u", plain[i], v.status);
    }
}
END_TEST

START_TEST(bodies_over_the_limit_get_413)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, "other", false);
    struct ld_proxy_req r = req("POST", "/x");
    r.has_length = true;
    r.content_length = LD_PROXY_MAX_BODY + 1ULL;
    decide(&r, &s, NOW, &v);
    /* The size is judged before leadership: 413, not 503. */
    ck_assert_uint_eq(v.status, 413);
    ck_assert_str_eq(v.reason, "RequestEntityTooLarge");
    snap_init(&s, "me", true);
    r.content_length = LD_PROXY_MAX_BODY;
    decide(&r, &s, NOW, &v);
    ck_assert_uint_eq(v.status, 0);
    ck_assert_int_eq(LD_PROXY_MAX_BODY, 3 * 1024 * 1024);
}
END_TEST

START_TEST(status_body_is_a_metav1_status)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, "pod-b", false);
    struct ld_proxy_req r = req("DELETE", "/x");
    decide(&r, &s, NOW, &v);
    char *body = ld_proxy_status_json(v.status, v.reason, v.message);
    ck_assert_ptr_nonnull(body);
    json_error_t e;
    json_t *o = json_loads(body, 0, &e);
    ck_assert_msg(o != NULL, "%s", body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "kind")), "Status");
    ck_assert_str_eq(json_string_value(json_object_get(o, "apiVersion")), "v1");
    ck_assert(json_is_object(json_object_get(o, "metadata")));
    ck_assert_uint_eq(json_object_size(json_object_get(o, "metadata")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(o, "status")), "Failure");
    ck_assert_str_eq(json_string_value(json_object_get(o, "reason")),
                     "ServiceUnavailable");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "code")), 503);
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(o, "message")), "pod-b"));
    ck_assert_uint_eq(json_object_size(o), 7);
    json_decref(o);
    free(body);
    /* Quotes and control characters in a message stay valid JSON. */
    body = ld_proxy_status_json(400, "BadRequest", "a \"b\"\n\\");
    o = json_loads(body, 0, &e);
    ck_assert_ptr_nonnull(o);
    ck_assert_str_eq(json_string_value(json_object_get(o, "message")), "a \"b\"\n\\");
    json_decref(o);
    free(body);
}
END_TEST

START_TEST(request_header_filter)
{
    static const char *const dropped[] = {"Authorization",
                                          "authorization",
                                          "Connection",
                                          "Keep-Alive",
                                          "Proxy-Authorization",
                                          "Proxy-Connection",
                                          "TE",
                                          "Trailer",
                                          "Transfer-Encoding",
                                          "Upgrade",
                                          "Host",
                                          "Content-Length",
                                          "Expect",
                                          "X-Leaderd-Shard",
                                          "x-leaderd-shard",
                                          ""};
    static const char *const passed[] = {
        "Content-Type",     "Accept",   "User-Agent", "Accept-Encoding", "X-Custom",
        "Impersonate-User", "If-Match", "Teapot",     "Trailers-Mode"};
    for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
        ck_assert_msg(!ld_proxy_forward_request_header(dropped[i], "keep-alive"), "%s",
                      dropped[i]);
    for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++)
        ck_assert_msg(ld_proxy_forward_request_header(passed[i], "keep-alive"), "%s",
                      passed[i]);
    /* Headers the Connection header names are hop-by-hop too. */
    ck_assert(!ld_proxy_forward_request_header("X-Hop", "close, X-Hop"));
    ck_assert(!ld_proxy_forward_request_header("x-hop", " X-HOP ,close"));
    ck_assert(ld_proxy_forward_request_header("X-Hop", "close, X-Hopper"));
    ck_assert(ld_proxy_forward_request_header("X-Hop", NULL));
    /* Responses keep Content-Type and the like, lose framing. */
    ck_assert(ld_proxy_forward_response_header("Content-Type", NULL));
    ck_assert(ld_proxy_forward_response_header("Audit-Id", NULL));
    ck_assert(ld_proxy_forward_response_header("Www-Authenticate", NULL));
    ck_assert(!ld_proxy_forward_response_header("Content-Length", NULL));
    ck_assert(!ld_proxy_forward_response_header("Transfer-Encoding", NULL));
    ck_assert(!ld_proxy_forward_response_header("Connection", NULL));
    ck_assert(!ld_proxy_forward_response_header("Keep-Alive", NULL));
    ck_assert(!ld_proxy_forward_response_header("X-Gone", "X-Gone"));
}
END_TEST

/* ---- shard mode ---- */

static struct ld_shardgroup *group3(void)
{
    struct ld_errinfo err;
    struct ld_shardgroup_config gc = {
        .name = "grp", .identity = "me", .n_shards = 3, .lease_duration_ms = 4000};
    struct ld_shardgroup *g = ld_shardgroup_new(&gc, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    return g;
}

/* Shard 0 ours until NOW + 500, 1 held by "other", 2 free. */
static struct ld_shardsnap *table3(void)
{
    struct ld_shard_entry e[3] = {
        {.leader = "me", .observed = true, .leading = true, .lead_until_ms = NOW + 500},
        {.leader = "other", .observed = true},
        {.leader = "", .observed = true},
    };
    const char *members[] = {"me", "other"};
    struct ld_shardsnap *t = ld_shardsnap_new(true, e, 3, members, 2);
    ck_assert_ptr_nonnull(t);
    return t;
}

START_TEST(shard_writes_need_the_header_and_the_shard)
{
    struct ld_shardgroup *g = group3();
    struct ld_shardsnap *t = table3();
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, "", false);
    struct ld_proxy_view view = {.snap = &s, .group = g, .shards = t};
    struct ld_proxy_req r = req("PATCH", "/x");

    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 400);
    ck_assert_str_eq(v.reason, "BadRequest");
    ck_assert_ptr_nonnull(strstr(v.message, LD_PROXY_SHARD_HEADER));
    ck_assert(!v.refused);
    r.shard = "";
    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 400);

    r.shard = "7";
    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 404);
    ck_assert_str_eq(v.reason, "NotFound");
    r.shard = "00";
    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 404);

    r.shard = "0";
    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 0);
    ck_assert_uint_eq(v.shard, 0);
    ck_assert(ld_proxy_still_leads(&v, &view, NOW + 499, NULL));
    ck_assert_int_eq(ld_proxy_lead_until(&v, &view), NOW + 500);
    struct ld_proxy_verdict refusal;
    ck_assert(!ld_proxy_still_leads(&v, &view, NOW + 500, &refusal));
    ck_assert_uint_eq(refusal.status, 503);
    ck_assert_ptr_nonnull(strstr(refusal.message, "lapsed"));

    r.shard = "1";
    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 503);
    ck_assert(v.refused);
    ck_assert_ptr_nonnull(strstr(v.message, "the holder is other"));
    ck_assert_ptr_nonnull(strstr(v.message, "grp-1"));

    r.shard = "2";
    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 503);
    ck_assert_ptr_nonnull(strstr(v.message, "nobody holds shard 2"));

    /* Reads need no header. */
    struct ld_proxy_req g2 = req("GET", "/x");
    ld_proxy_decide(&g2, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 0);

    /* Before the first shard table: nothing is owned. */
    view.shards = NULL;
    r.shard = "0";
    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 503);
    ck_assert_int_eq(ld_proxy_lead_until(&v, &view), INT64_MIN);

    ld_shardsnap_unref(t);
    ld_shardgroup_free(g);
}
END_TEST

/* The proxy reads shard tables through the state, as the HTTP server does:
 * a publish replaces the table the next decision sees. */
START_TEST(shard_decision_follows_publishes)
{
    struct ld_shardgroup *g = group3();
    struct ld_state st;
    struct ld_snapshot s, out;
    struct ld_proxy_verdict v;
    ld_state_init(&st, "ns/grp", "me", 0);
    ld_state_set_group(&st, g);
    snap_init(&s, "", false);
    ld_state_publish_shards(&st, &s, table3());
    struct ld_shardsnap *t = ld_state_read_shards(&st, &out);
    struct ld_proxy_view view = {.snap = &out, .group = st.group, .shards = t};
    struct ld_proxy_req r = req("POST", "/x");
    r.shard = "0";
    ld_proxy_decide(&r, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 0);
    ld_shardsnap_unref(t);

    /* Shard 0 handed to "other". */
    struct ld_shard_entry e[3] = {
        {.leader = "other", .observed = true},
        {.leader = "other", .observed = true},
        {.leader = "", .observed = true},
    };
    const char *members[] = {"me", "other"};
    ld_state_publish_shards(&st, &s, ld_shardsnap_new(true, e, 3, members, 2));
    t = ld_state_read_shards(&st, &out);
    view.shards = t;
    ck_assert(!ld_proxy_still_leads(&v, &view, NOW, NULL));
    ld_shardsnap_unref(t);
    ld_state_destroy(&st);
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(metrics_count_proxy_answers)
{
    struct ld_metrics m;
    struct ld_snapshot s;
    char *text = NULL;
    size_t len = 0;
    ld_metrics_init(&m);
    snap_init(&s, "me", true);
    ld_metrics_proxy_request(&m, "GET", 200);
    ld_metrics_proxy_request(&m, "GET", 200);
    ld_metrics_proxy_request(&m, "POST", 503);
    ld_metrics_proxy_request(&m, "BREW", 418);
    ld_metrics_proxy_refused(&m);
    ld_metrics_proxy_aborted(&m);
    ld_metrics_proxy_request(NULL, "GET", 200); /* ignored */
    ck_assert_int_eq(ld_metrics_render(&m, &s, NOW, &text, &len), 0);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE leaderd_proxy_requests_total counter\n"));
    ck_assert_ptr_nonnull(
        strstr(text, "leaderd_proxy_requests_total{verb=\"GET\",code=\"200\"} 2\n"));
    ck_assert_ptr_nonnull(
        strstr(text, "leaderd_proxy_requests_total{verb=\"POST\",code=\"503\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(text, "leaderd_proxy_requests_total{verb=\"OTHER\",code=\"418\"} 1\n"));
    ck_assert_ptr_nonnull(
        strstr(text, "# TYPE leaderd_proxy_writes_refused_total counter\n"));
    ck_assert_ptr_nonnull(strstr(text, "leaderd_proxy_writes_refused_total 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "leaderd_proxy_writes_aborted_total 1\n"));
    free(text);
    /* The series table stays bounded whatever codes appear. */
    for (long code = 100; code < 600; code++)
        ld_metrics_proxy_request(&m, "PUT", code);
    ck_assert_uint_le(m.proxy.nseries, LD_METRICS_PROXY_SERIES);
    ck_assert_int_eq(ld_metrics_render(&m, &s, NOW, &text, &len), 0);
    ck_assert_ptr_nonnull(
        strstr(text, "leaderd_proxy_requests_total{verb=\"PUT\",code=\"other\"}"));
    free(text);
    ld_metrics_destroy(&m);
}
END_TEST

static Suite *proxy_suite(void)
{
    Suite *s = suite_create("proxy");
    TCase *tc = tcase_create("gate");
    tcase_add_test(tc, reads_always_pass);
    tcase_add_test(tc, writes_pass_only_while_leading);
    tcase_add_test(tc, still_leads_and_lead_until);
    tcase_add_test(tc, upgrades_get_501);
    tcase_add_test(tc, bodies_over_the_limit_get_413);
    tcase_add_test(tc, status_body_is_a_metav1_status);
    tcase_add_test(tc, request_header_filter);
    tcase_add_test(tc, shard_writes_need_the_header_and_the_shard);
    tcase_add_test(tc, shard_decision_follows_publishes);
    tcase_add_test(tc, metrics_count_proxy_answers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(proxy_suite());
}
