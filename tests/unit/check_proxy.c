/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/proxy_gate (the API write gate's decisions:
 * reads, writes, upgrades, sizes, shard mode, the refusal's Status body,
 * the header filters) with hand-built snapshots and shard tables and
 * integer time, and for the proxy's metrics; then the proxy itself
 * (cmd/leaderd/proxy) in process, between a libcurl client (http_client)
 * and a scripted upstream (fake_http), with a real struct ld_state
 * published by the test: what is forwarded, what is refused, and writes
 * cut in flight by a publish and by time alone.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <jansson.h>

#include "../../cmd/leaderd/core/metrics.h"
#include "../../cmd/leaderd/proxy/proxy.h"
#include "../../cmd/leaderd/proxy/proxy_gate.h"
#include "../../cmd/leaderd/core/state.h"
#include "clock.h"
#include "shardgroup.h"
#include "support/fake_http.h"
#include "support/http_client.h"
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
    s->term_until_ms = s->leading ? s->lead_until_ms : INT64_MIN;
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
        {.leader = "me", .observed = true, .leading = true},
        {.leader = "other", .observed = true},
        {.leader = "", .observed = true},
    };
    const char *members[] = {"me", "other"};
    struct ld_shardsnap *t = ld_shardsnap_new(true, NOW + 500, e, 3, members, 2);
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
    struct ld_proxy_view view = {
        .snap = &s, .layout = ld_shardgroup_layout(g), .shards = t};
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
    ck_assert_ptr_nonnull(strstr(refusal.message, "no longer claims shard 0"));

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
    ld_state_set_layout(&st, ld_shardgroup_layout(g));
    snap_init(&s, "", false);
    ld_state_publish_shards(&st, &s, table3());
    struct ld_shardsnap *t = ld_state_read_shards(&st, &out);
    struct ld_proxy_view view = {.snap = &out, .layout = st.layout, .shards = t};
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
    ld_state_publish_shards(&st, &s, ld_shardsnap_new(true, 0, e, 3, members, 2));
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

/* ---- the proxy in process ---- */

struct rig {
    struct fake_http *fake;
    struct ld_state st;
    struct ld_metrics m;
    struct ld_proxy *proxy;
    int port; /* the proxy's */
};

/* Publishes leadership of "me": leading for lead_ms from now, or (lead_ms
 * < 0) not leading with "other" holding the Lease. */
static void rig_publish(struct rig *r, int64_t lead_ms)
{
    struct ld_snapshot s;
    snap_init(&s, lead_ms >= 0 ? "me" : "other", lead_ms >= 0);
    s.lead_until_ms = lead_ms >= 0 ? ld_mono_ms() + lead_ms : 0;
    s.term_until_ms = s.leading ? s.lead_until_ms : INT64_MIN;
    ld_state_publish(&r->st, &s);
}

/* token_file NULL: the static token "leaderd-token". */
static void rig_start_with(struct rig *r, const char *token_file)
{
    struct ld_kube_config kc;
    struct ld_errinfo err;
    memset(r, 0, sizeof(*r));
    r->fake = fake_http_start(NULL, NULL);
    ck_assert_ptr_nonnull(r->fake);
    ld_kube_config_init(&kc);
    kc.server = strdup(fake_http_url(r->fake));
    if (token_file)
        kc.token_file = strdup(token_file);
    else
        kc.token = strdup("leaderd-token");
    ld_state_init(&r->st, "ns/lease", "me", 0);
    ld_metrics_init(&r->m);
    rig_publish(r, 60000);
    r->proxy = ld_proxy_start("127.0.0.1", 0, &kc, &r->st, &r->m, NULL, &err);
    ck_assert_msg(r->proxy != NULL, "%s", err.msg);
    ld_kube_config_clear(&kc);
    r->port = ld_proxy_port(r->proxy);
}

static void rig_start(struct rig *r)
{
    rig_start_with(r, NULL);
}

static void rig_stop(struct rig *r)
{
    ld_proxy_stop(r->proxy);
    fake_http_stop(r->fake);
    ld_metrics_destroy(&r->m);
    ld_state_destroy(&r->st);
}

START_TEST(proxy_forwards_with_leaderd_credentials)
{
    struct rig r;
    struct fake_http_request got;
    rig_start(&r);
    fake_http_push(r.fake, &(struct fake_http_response){.status = 201,
                                                        .body = "{\"kind\":\"Pod\"}",
                                                        .header_name = "X-Upstream",
                                                        .header_value = "yes"});
    struct http_resp *c = malloc(sizeof(*c));
    ck_assert_ptr_nonnull(c);
    http_request(
        r.port,
        &(struct http_req){
            .method = "PATCH",
            .path = "/api/v1/namespaces/a/pods/p?fieldManager=app%2Fx&dryRun=All",
            .body = "{\"metadata\":{}}",
            .headers = {"Authorization: Bearer the-apps-own",
                        "Content-Type: application/merge-patch+json",
                        "Accept: application/yaml", "User-Agent: app/1.0",
                        "X-Leaderd-Shard: 3", NULL},
            .read_header = "X-Upstream"},
        c);
    ck_assert_int_eq(c->rc, CURLE_OK);
    ck_assert_int_eq(c->status, 201);
    ck_assert_str_eq(c->body, "{\"kind\":\"Pod\"}");
    ck_assert_ptr_nonnull(strstr(c->header, "yes"));
    ck_assert(fake_http_request_at(r.fake, 0, &got));
    ck_assert_str_eq(got.method, "PATCH");
    ck_assert_str_eq(got.path, "/api/v1/namespaces/a/pods/p");
    ck_assert_str_eq(got.authorization, "Bearer leaderd-token");
    ck_assert_str_eq(got.content_type, "application/merge-patch+json");
    ck_assert_str_eq(got.accept, "application/yaml");
    ck_assert_str_eq(got.user_agent, "app/1.0");
    ck_assert_str_eq(got.body, "{\"metadata\":{}}");
    fake_http_request_clear(&got);

    /* A read on a standby; no client headers: leaderd's User-Agent, no
     * invented Content-Type. */
    rig_publish(&r, -1);
    fake_http_push(r.fake, &(struct fake_http_response){.status = 200, .body = "[]"});
    http_request(r.port,
                 &(struct http_req){.method = "GET", .path = "/api/v1/pods?watch=0"}, c);
    ck_assert_int_eq(c->status, 200);
    ck_assert_str_eq(c->body, "[]");
    ck_assert(fake_http_request_at(r.fake, 1, &got));
    ck_assert_str_eq(got.method, "GET");
    ck_assert_str_eq(got.authorization, "Bearer leaderd-token");
    ck_assert_ptr_nonnull(strstr(got.user_agent, "leaderd/"));
    ck_assert_str_eq(got.content_type, "");
    fake_http_request_clear(&got);
    free(c);
    rig_stop(&r);
}
END_TEST

START_TEST(proxy_refuses_writes_of_a_standby)
{
    struct rig r;
    rig_start(&r);
    rig_publish(&r, -1);
    struct http_resp *c = malloc(sizeof(*c));
    ck_assert_ptr_nonnull(c);
    http_request(
        r.port,
        &(struct http_req){.method = "DELETE", .path = "/api/v1/namespaces/a/pods/p"}, c);
    ck_assert_int_eq(c->status, 503);
    json_t *o = json_loads(c->body, 0, NULL);
    ck_assert_ptr_nonnull(o);
    ck_assert_str_eq(json_string_value(json_object_get(o, "reason")),
                     "ServiceUnavailable");
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(o, "message")), "other"));
    json_decref(o);
    ck_assert_int_eq(fake_http_request_count(r.fake), 0);
    ck_assert_uint_eq(r.m.proxy.refused, 1);
    /* An absolute-form target never leaves for another host. */
    http_request(r.port,
                 &(struct http_req){.method = "GET",
                                    .path = "/",
                                    .request_target = "http://127.0.0.1:1/api"},
                 c);
    ck_assert_int_eq(c->status, 400);
    ck_assert_int_eq(fake_http_request_count(r.fake), 0);
    free(c);
    rig_stop(&r);
}
END_TEST

/* A write held upstream: a publish that ends leadership cuts it at once. */
START_TEST(proxy_cuts_a_write_on_publish)
{
    struct rig r;
    rig_start(&r);
    fake_http_push(r.fake, &(struct fake_http_response){
                               .status = 200, .body = "{}", .delay_ms = 10000});
    struct http_get *c = http_request_start(
        r.port, &(struct http_req){.method = "POST",
                                   .path = "/api/v1/namespaces/a/configmaps",
                                   .body = "{}",
                                   .headers = {"Content-Type: application/json", NULL}});
    ck_assert(fake_http_wait_requests(r.fake, 1, 5000));
    int64_t t0 = ld_mono_ms();
    rig_publish(&r, -1);
    http_get_wait(c);
    ck_assert_int_eq(c->r.status, 503);
    ck_assert_ptr_nonnull(strstr(c->r.body, "cut"));
    ck_assert_int_lt(ld_mono_ms() - t0, 2000);
    ck_assert_uint_eq(r.m.proxy.aborted, 1);
    ck_assert_uint_eq(r.m.proxy.refused, 0);
    free(c);
    rig_stop(&r);
}
END_TEST

/* The same with no publish at all: leadership ends at lead_until_ms. */
START_TEST(proxy_cuts_a_write_by_time)
{
    struct rig r;
    rig_start(&r);
    rig_publish(&r, 700);
    fake_http_push(r.fake, &(struct fake_http_response){
                               .status = 200, .body = "{}", .delay_ms = 10000});
    struct http_resp *c = malloc(sizeof(*c));
    ck_assert_ptr_nonnull(c);
    http_request(r.port,
                 &(struct http_req){.method = "PUT",
                                    .path = "/api/v1/namespaces/a/configmaps/c",
                                    .body = "{}",
                                    .headers = {"Content-Type: application/json", NULL}},
                 c);
    ck_assert_int_eq(c->status, 503);
    ck_assert_ptr_nonnull(strstr(c->body, "cut"));
    ck_assert_int_lt(c->took_ms, 2500);
    ck_assert_int_eq(fake_http_request_count(r.fake), 1);
    ck_assert_uint_eq(r.m.proxy.aborted, 1);
    free(c);
    rig_stop(&r);
}
END_TEST

/* A client on a raw socket that sent one request to the proxy on port
 * (request_fmt: the request, "%d" in its Host header standing for port);
 * returns the socket (the caller closes it). */
static int raw_request(int port, const char *request_fmt)
{
    char request[512];
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    snprintf(request, sizeof(request), request_fmt, port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    size_t len = strlen(request);
    ck_assert_int_eq(send(fd, request, len, MSG_NOSIGNAL), (ssize_t)len);
    return fd;
}

/* The upstream thread held up (here on the state's mutex, which the
 * election loop holds while it publishes) just as it judges the writes in
 * flight, until past lead_until_ms: once free again it cuts the write at
 * once, by the time it is then, not after a sleep sized by the time it
 * read before it was held up. */
START_TEST(proxy_cuts_a_write_by_time_after_a_busy_spell)
{
    struct rig r;
    rig_start(&r);
    fake_http_push(r.fake, &(struct fake_http_response){
                               .status = 200, .body = "{}", .delay_ms = 15000});
    fake_http_push(r.fake, &(struct fake_http_response){
                               .status = 200, .body = "[]", .delay_ms = 15000});
    struct http_get *c = http_request_start(
        r.port, &(struct http_req){.method = "PUT",
                                   .path = "/api/v1/namespaces/a/configmaps/c",
                                   .body = "{}",
                                   .headers = {"Content-Type: application/json", NULL}});
    ck_assert(fake_http_wait_requests(r.fake, 1, 5000));
    /* A quiet read whose hang-up wakes the upstream thread. */
    int quiet =
        raw_request(ld_proxy_port(r.proxy),
                    "GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n");
    ck_assert(fake_http_wait_requests(r.fake, 2, 5000));
    rig_publish(&r, 1500);
    /* The hold is the busy spell itself, not a wait for an event. */
    pthread_mutex_lock(&r.st.mu);
    close(quiet);
    struct timespec spell = {.tv_sec = 2, .tv_nsec = 500 * 1000 * 1000};
    nanosleep(&spell, NULL);
    int64_t freed = ld_mono_ms();
    pthread_mutex_unlock(&r.st.mu);
    http_get_wait(c);
    int64_t late = ld_mono_ms() - freed;
    ck_assert_int_eq(c->r.status, 503);
    ck_assert_ptr_nonnull(strstr(c->r.body, "cut"));
    ck_assert_msg(late < 250, "cut %lld ms after the thread was free", (long long)late);
    ck_assert_uint_eq(r.m.proxy.aborted, 1);
    free(c);
    rig_stop(&r);
}
END_TEST

/* ld_proxy_stop (SIGTERM) with exchanges at every stage: a write waiting
 * for its answer, a read half streamed, a body half uploaded, a client
 * gone while its read waits. It returns without waiting for any of them,
 * every client is let go, and (under the sanitizers) nothing is used
 * after it is freed or leaked. */
START_TEST(proxy_stops_with_exchanges_in_flight)
{
    struct rig r;
    rig_start(&r);
    static char big[20000];
    memset(big, 'x', sizeof(big) - 1);
    fake_http_push(r.fake, &(struct fake_http_response){
                               .status = 200, .body = "{}", .delay_ms = 15000});
    fake_http_push(r.fake, &(struct fake_http_response){.status = 200,
                                                        .body = big,
                                                        .chunk_size = 1000,
                                                        .chunk_delay_ms = 500});
    fake_http_push(r.fake, &(struct fake_http_response){
                               .status = 200, .body = "[]", .delay_ms = 15000});
    struct http_get *w = http_request_start(
        r.port, &(struct http_req){.method = "POST",
                                   .path = "/api/v1/namespaces/a/configmaps",
                                   .body = "{}",
                                   .headers = {"Content-Type: application/json", NULL}});
    ck_assert(fake_http_wait_requests(r.fake, 1, 5000));
    struct http_get *g = http_request_start(
        r.port, &(struct http_req){.method = "GET", .path = "/w?watch=1"});
    ck_assert(fake_http_wait_requests(r.fake, 2, 5000));
    int gone =
        raw_request(ld_proxy_port(r.proxy),
                    "GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n");
    ck_assert(fake_http_wait_requests(r.fake, 3, 5000));
    close(gone);
    int half = raw_request(
        ld_proxy_port(r.proxy),
        "PUT /api/v1/namespaces/a/configmaps/c HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
        "Content-Type: application/json\r\n"
        "Content-Length: 100000\r\n\r\n{\"data\":");
    int64_t t0 = ld_mono_ms();
    ld_proxy_stop(r.proxy);
    r.proxy = NULL;
    ck_assert_int_lt(ld_mono_ms() - t0, 5000);
    char b[64];
    ck_assert_int_le(recv(half, b, sizeof(b), 0), 0);
    close(half);
    http_get_wait(w);
    http_get_wait(g);
    ck_assert_int_lt(w->r.took_ms, 10000);
    ck_assert_int_ne(w->r.status, 200);
    ck_assert_int_lt(g->r.took_ms, 10000);
    ck_assert_uint_lt(g->r.len, sizeof(big) - 1);
    /* Only the three reads and writes that were complete went upstream. */
    ck_assert_int_eq(fake_http_request_count(r.fake), 3);
    free(w);
    free(g);
    rig_stop(&r);
}
END_TEST

/* How many of the n requests are over. */
static int done_requests(struct http_get **g, int n)
{
    int done = 0;
    for (int i = 0; i < n; i++)
        done += http_get_done(g[i]);
    return done;
}

/* Many clients that each send a body of 1 MiB and a byte at once, while
 * the API server holds the first ones: the proxy holds at most a bounded
 * sum of bodies (64 MiB: 32 of these, whose buffers grow to 2 MiB) and
 * answers the rest 429 with a Retry-After, as the API server's own
 * in-flight limit does, instead of growing with the connection limit. */
#define BODIES 40
#define BODY_LEN (1024 * 1024 + 1)
START_TEST(proxy_bounds_the_bodies_it_holds)
{
    struct rig r;
    struct http_get *c[BODIES];
    rig_start(&r);
    char *body = malloc(BODY_LEN + 1);
    ck_assert_ptr_nonnull(body);
    memset(body, 'x', BODY_LEN);
    body[BODY_LEN] = '\0';
    /* The upstream holds every request until the test lets go: the
     * proxy then holds the bodies it forwarded, however slow the machine,
     * and must refuse the rest. */
    for (int i = 0; i < BODIES; i++)
        fake_http_push(r.fake, &(struct fake_http_response){
                                   .status = 201, .body = "{}", .hold = true});
    for (int i = 0; i < BODIES; i++)
        c[i] = http_request_start(
            r.port, &(struct http_req){
                        .method = "POST",
                        .path = "/api/v1/namespaces/a/configmaps",
                        .body = body,
                        .headers = {"Content-Type: application/json", "Expect:", NULL}});
    /* Every client is answered 429 or has its request held upstream. */
    int created = 0, busy = 0;
    for (int k = 0;
         k < 3000 && done_requests(c, BODIES) + fake_http_request_count(r.fake) < BODIES;
         k++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    fake_http_release(r.fake);
    for (int i = 0; i < BODIES; i++) {
        http_get_wait(c[i]);
        if (c[i]->r.status == 201)
            created++;
        if (c[i]->r.status == 429) {
            busy++;
            ck_assert_ptr_nonnull(strstr(c[i]->r.body, "\"reason\":\"TooManyRequests\""));
        }
        free(c[i]);
    }
    free(body);
    ck_assert_int_eq(created + busy, BODIES);
    ck_assert_int_ge(busy, BODIES - 32);
    ck_assert_int_ge(created, 1);
    ck_assert_int_eq(fake_http_request_count(r.fake), created);
    rig_stop(&r);
}
END_TEST

/* A read is never cut, and streams: its first piece arrives long before
 * the upstream has finished. */
START_TEST(proxy_streams_reads)
{
    struct rig r;
    rig_start(&r);
    static char big[6000];
    memset(big, 'x', sizeof(big) - 1);
    fake_http_push(r.fake, &(struct fake_http_response){.status = 200,
                                                        .body = big,
                                                        .chunk_size = 1000,
                                                        .chunk_delay_ms = 200});
    rig_publish(&r, -1);
    struct http_resp *c = malloc(sizeof(*c));
    ck_assert_ptr_nonnull(c);
    int64_t t0 = ld_mono_ms();
    http_request(r.port, &(struct http_req){.method = "GET", .path = "/w?watch=1"}, c);
    /* Six pieces 200 ms apart: the first came through at once. */
    ck_assert_int_lt(c->first_ms - t0, 500);
    ck_assert_int_ge(c->took_ms, 900);
    ck_assert_int_eq(c->rc, CURLE_OK);
    ck_assert_int_eq(c->status, 200);
    ck_assert_uint_eq(c->len, sizeof(big) - 1);
    ck_assert_uint_eq(strspn(c->body, "x"), sizeof(big) - 1);
    free(c);
    rig_stop(&r);
}
END_TEST

static void write_token(const char *path, const char *token)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fputs(token, f);
    ck_assert_int_eq(fclose(f), 0);
    /* Swapped in whole, as the kubelet does: a new inode. */
    ck_assert_int_eq(rename(tmp, path), 0);
}

/* The proxy's token comes from leaderd's token file and follows its
 * rotation from the next request on. */
START_TEST(proxy_follows_token_rotation)
{
    char dir[] = "/tmp/check_proxy.XXXXXX", path[128];
    struct rig r;
    struct fake_http_request got;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/token", dir);
    write_token(path, "first-token\n");
    rig_start_with(&r, path);
    struct http_resp *c = malloc(sizeof(*c));
    ck_assert_ptr_nonnull(c);
    for (int i = 0; i < 2; i++) {
        fake_http_push(r.fake, &(struct fake_http_response){.status = 200, .body = "{}"});
        http_request(r.port, &(struct http_req){.method = "GET", .path = "/version"}, c);
        ck_assert_int_eq(c->status, 200);
        ck_assert(fake_http_request_at(r.fake, i, &got));
        ck_assert_str_eq(got.authorization,
                         i == 0 ? "Bearer first-token" : "Bearer rotated-token");
        fake_http_request_clear(&got);
        write_token(path, "rotated-token");
    }
    free(c);
    rig_stop(&r);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* Answers without a body stay without one; an oversized body announced
 * with Expect: 100-continue is refused before it is sent. */
START_TEST(proxy_empty_answers_and_early_413)
{
    struct rig r;
    rig_start(&r);
    fake_http_push(r.fake, &(struct fake_http_response){.status = 204});
    struct http_resp *c = malloc(sizeof(*c));
    ck_assert_ptr_nonnull(c);
    http_request(r.port, &(struct http_req){.method = "DELETE", .path = "/x"}, c);
    ck_assert_int_eq(c->rc, CURLE_OK);
    ck_assert_int_eq(c->status, 204);
    ck_assert_uint_eq(c->len, 0);

    size_t big_len = LD_PROXY_MAX_BODY + 1;
    char *big = malloc(big_len + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', big_len);
    big[big_len] = '\0';
    http_request(r.port,
                 &(struct http_req){.method = "POST",
                                    .path = "/y",
                                    .body = big,
                                    .headers = {"Expect: 100-continue", NULL}},
                 c);
    ck_assert_int_eq(c->status, 413);
    ck_assert_ptr_nonnull(strstr(c->body, "RequestEntityTooLarge"));
    ck_assert_int_eq(c->uploaded, 0);
    /* Without Expect the body is read (and dropped) and then refused. */
    http_request(
        r.port,
        &(struct http_req){
            .method = "POST", .path = "/y", .body = big, .headers = {"Expect:", NULL}},
        c);
    ck_assert_int_eq(c->status, 413);
    ck_assert_int_eq(c->uploaded, (curl_off_t)big_len);
    free(big);
    /* A refused body is read only so far: past four times the limit the
     * connection is closed instead of answered. */
    size_t huge_len = 4 * (size_t)LD_PROXY_MAX_BODY + 1024 * 1024;
    char *huge = malloc(huge_len + 1);
    ck_assert_ptr_nonnull(huge);
    memset(huge, 'x', huge_len);
    huge[huge_len] = '\0';
    http_request(
        r.port,
        &(struct http_req){
            .method = "POST", .path = "/y", .body = huge, .headers = {"Expect:", NULL}},
        c);
    ck_assert_int_eq(c->status, 0);
    ck_assert_int_ne(c->rc, CURLE_OK);
    free(huge);
    free(c);
    ck_assert_int_eq(fake_http_request_count(r.fake), 1);
    rig_stop(&r);
}
END_TEST

/* A failed start says why, with a code the daemon can act on: a bad
 * address is the caller's to fix, credentials that cannot be read are the
 * configuration's, a port in use is the system's refusal. */
START_TEST(proxy_start_reports_its_errors)
{
    struct rig r;
    struct ld_kube_config kc;
    struct ld_errinfo err;
    rig_start(&r);
    ld_kube_config_init(&kc);
    kc.server = strdup(fake_http_url(r.fake));
    kc.token = strdup("leaderd-token");

    ck_assert_ptr_null(ld_proxy_start("127.0.0.1", 70000, &kc, &r.st, &r.m, NULL, &err));
    ck_assert_int_eq(err.code, LD_EINVAL);
    ck_assert_str_eq(err.msg, "api-proxy: bad address");

    int port = ld_proxy_port(r.proxy);
    ck_assert_ptr_null(ld_proxy_start("127.0.0.1", port, &kc, &r.st, &r.m, NULL, &err));
    ck_assert_int_eq(err.code, LD_ESYS);
    char want[96];
    snprintf(want, sizeof(want), "api-proxy: listen 127.0.0.1:%d: %s", port,
             strerror(EADDRINUSE));
    ck_assert_str_eq(err.msg, want);

    kc.token_file = strdup("/nonexistent/leaderd-token");
    free(kc.token);
    kc.token = NULL;
    ck_assert_ptr_null(ld_proxy_start("127.0.0.1", 0, &kc, &r.st, &r.m, NULL, &err));
    ck_assert_int_eq(err.code, LD_ECONFIG);
    ck_assert_msg(strncmp(err.msg, "api-proxy: ", 11) == 0, "%s", err.msg);

    /* A caller may not want the detail. */
    ck_assert_ptr_null(ld_proxy_start(NULL, 0, &kc, &r.st, &r.m, NULL, NULL));
    ld_kube_config_clear(&kc);
    rig_stop(&r);
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
    TCase *tp = tcase_create("proxy");
    tcase_set_timeout(tp, 30);
    tcase_add_test(tp, proxy_forwards_with_leaderd_credentials);
    tcase_add_test(tp, proxy_refuses_writes_of_a_standby);
    tcase_add_test(tp, proxy_cuts_a_write_on_publish);
    tcase_add_test(tp, proxy_cuts_a_write_by_time);
    tcase_add_test(tp, proxy_cuts_a_write_by_time_after_a_busy_spell);
    tcase_add_test(tp, proxy_stops_with_exchanges_in_flight);
    tcase_add_test(tp, proxy_bounds_the_bodies_it_holds);
    tcase_add_test(tp, proxy_streams_reads);
    tcase_add_test(tp, proxy_empty_answers_and_early_413);
    tcase_add_test(tp, proxy_follows_token_rotation);
    tcase_add_test(tp, proxy_start_reports_its_errors);
    suite_add_tcase(s, tp);
    return s;
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    return ld_test_run(proxy_suite());
}
