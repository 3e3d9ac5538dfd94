/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the guards of cmd/leaderd/proxy_gate (ld_proxy_judge): the
 * Host of a request, browser headers, impersonation, dot segments, writes
 * to this replica's own Leases in single and shard mode, the order of the
 * guards before the leadership test, the forwarded-header filter and the
 * --api-proxy-impersonation flag. Hand-built snapshots, integer time.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../cmd/leaderd/shell/config.h"
#include "../../cmd/leaderd/proxy/proxy_gate.h"
#include "support/run_suite.h"

#define NOW 100000
#define PORT 8001
#define OWN "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease"
#define COLLECTION "/apis/coordination.k8s.io/v1/namespaces/ns/leases"

static const char *const writes[] = {"POST", "PUT", "PATCH", "DELETE", "FOO"};
static const char *const reads[] = {"GET", "HEAD", "OPTIONS"};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static const struct ld_proxy_policy pol = {.port = PORT};

/* "me" in ns/lease: leading until NOW + 500, or a standby that sees "other". */
static void snap_init(struct ld_snapshot *s, bool leading)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->lease, sizeof(s->lease), "ns/lease");
    snprintf(s->identity, sizeof(s->identity), "me");
    snprintf(s->leader, sizeof(s->leader), "%s", leading ? "me" : "other");
    s->observed = true;
    s->leading = leading;
    s->lead_until_ms = leading ? NOW + 500 : 0;
}

/* A request as a well-behaved local client sends it. */
static struct ld_proxy_req req(const char *method, const char *target)
{
    struct ld_proxy_req r = {.method = method, .target = target, .version = "HTTP/1.1"};
    ld_proxy_req_note_header(&r, "Host", "127.0.0.1:8001");
    return r;
}

/* Judges r in single mode against s with policy p. */
static void judge_with(const struct ld_proxy_req *r, const struct ld_snapshot *s,
                       const struct ld_proxy_policy *p, struct ld_proxy_verdict *out)
{
    struct ld_proxy_view v = {.snap = s};
    ld_proxy_judge(r, p, &v, NOW, out);
}

static void judge(const struct ld_proxy_req *r, const struct ld_snapshot *s,
                  struct ld_proxy_verdict *out)
{
    judge_with(r, s, &pol, out);
}

/* A 403 of the guards: not a leadership refusal, and never a write on its
 * way; the message names this replica and says what. */
static void assert_forbidden(const struct ld_proxy_verdict *v, const char *what,
                             const char *why)
{
    ck_assert_msg(v->status == 403, "%s: %u %s", what, v->status, v->message);
    ck_assert_str_eq(v->reason, "Forbidden");
    ck_assert(!v->refused);
    ck_assert(!v->write);
    ck_assert_msg(strstr(v->message, "me") != NULL, "%s: %s", what, v->message);
    ck_assert_msg(strstr(v->message, why) != NULL, "%s: %s", what, v->message);
}

START_TEST(host_names_this_proxy)
{
    static const char *const good[] = {
        "127.0.0.1:8001",         "localhost:8001",       "LocalHost:8001",
        "127.1.2.3:8001",         "127.255.255.255:8001", "[::1]:8001",
        "[0:0:0:0:0:0:0:1]:8001",
    };
    static const char *const bad[] = {
        "evil.example:8001", /* a rebound DNS name */
        "127.0.0.1.nip.io:8001",
        "localhost.:8001",
        "localhost.evil.example:8001",
        "127.0.0.1:8002", /* another port */
        "[::1]:80",
        "127.0.0.1", /* no port: 80 */
        "localhost",
        "[::1]",
        "127.0.0.1:",
        "127.0.0.1:80011",
        "127.0.0.1:08001",
        "localhost:0",
        "127.0.0.1:8001:8001",
        "127.0.0.1:+8001",
        "10.0.0.1:8001",
        "0.0.0.0:8001",
        "128.0.0.1:8001",
        "127.0.0.01:8001",
        "127.1:8001",
        "2130706433:8001",
        "0x7f.0.0.1:8001",
        "[::2]:8001",
        "[::ffff:127.0.0.1]:8001",
        "[::1%25lo]:8001",
        "[::1:8001",
        "::1:8001",
        "[::1]8001",
        "",
        " 127.0.0.1:8001",
    };
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    for (size_t i = 0; i < N(good); i++) {
        struct ld_proxy_req r = {
            .method = "GET", .target = "/api", .version = "HTTP/1.1"};
        ld_proxy_req_note_header(&r, "Host", good[i]);
        judge(&r, &s, &v);
        ck_assert_msg(v.status == 0, "%s: %u %s", good[i], v.status, v.message);
    }
    for (size_t i = 0; i < N(bad); i++) {
        for (size_t m = 0; m < 2; m++) {
            struct ld_proxy_req r = {.method = m ? "PATCH" : "GET",
                                     .target = "/api/v1/namespaces/a/pods/p",
                                     .version = "HTTP/1.1"};
            ld_proxy_req_note_header(&r, "Host", bad[i]);
            judge(&r, &s, &v);
            assert_forbidden(&v, bad[i], "Host");
        }
    }
    /* On port 80 the port may be left out, as browsers leave it out. */
    struct ld_proxy_policy p80 = {.port = 80};
    static const char *const on80[] = {"localhost", "127.0.0.1", "[::1]", "localhost:80"};
    for (size_t i = 0; i < N(on80); i++) {
        struct ld_proxy_req r = {
            .method = "GET", .target = "/api", .version = "HTTP/1.1"};
        ld_proxy_req_note_header(&r, "Host", on80[i]);
        judge_with(&r, &s, &p80, &v);
        ck_assert_msg(v.status == 0, "%s: %u", on80[i], v.status);
    }
}
END_TEST

START_TEST(host_missing_or_twice)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    /* HTTP/1.1 requires Host; NULL counts as HTTP/1.1. */
    struct ld_proxy_req r = {.method = "GET", .target = "/api", .version = "HTTP/1.1"};
    judge(&r, &s, &v);
    assert_forbidden(&v, "no Host", "Host");
    r.version = NULL;
    judge(&r, &s, &v);
    assert_forbidden(&v, "no Host, no version", "Host");
    /* HTTP/1.0 may leave it out; no browser does. */
    r.version = "HTTP/1.0";
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
    /* ... but one it gives is judged. */
    ld_proxy_req_note_header(&r, "host", "evil.example");
    judge(&r, &s, &v);
    assert_forbidden(&v, "HTTP/1.0 with a bad Host", "evil.example");
    /* Two Host headers, even both good: which one counts is ambiguous. */
    r = req("GET", "/api");
    ld_proxy_req_note_header(&r, "HOST", "127.0.0.1:8001");
    ck_assert_uint_eq(r.hosts, 2);
    judge(&r, &s, &v);
    assert_forbidden(&v, "two Hosts", "one Host");
}
END_TEST

START_TEST(note_header_keeps_what_the_guards_need)
{
    struct ld_proxy_req r = {.method = "GET"};
    ld_proxy_req_note_header(&r, NULL, "x");
    ld_proxy_req_note_header(&r, "Accept", "application/json");
    ld_proxy_req_note_header(&r, "X-Host", "evil");
    ld_proxy_req_note_header(&r, "Originator", "x");
    ld_proxy_req_note_header(&r, "Sec-Fetch-Mode", "cors");
    ld_proxy_req_note_header(&r, "Impersonate", "x");
    ld_proxy_req_note_header(&r, "X-Impersonate-User", "x");
    ck_assert_ptr_null(r.host);
    ck_assert_uint_eq(r.hosts, 0);
    ck_assert_ptr_null(r.browser);
    ck_assert_ptr_null(r.impersonate);
    ld_proxy_req_note_header(&r, "Host", "localhost:1");
    ld_proxy_req_note_header(&r, "Host", "evil");
    ck_assert_str_eq(r.host, "localhost:1");
    ck_assert_uint_eq(r.hosts, 2);
    ld_proxy_req_note_header(&r, "sec-fetch-site", "none");
    ld_proxy_req_note_header(&r, "Origin", "x");
    ck_assert_str_eq(r.browser, "sec-fetch-site");
    ld_proxy_req_note_header(&r, "impersonate-extra-scopes", "x");
    ld_proxy_req_note_header(&r, "Impersonate-User", "x");
    ck_assert_str_eq(r.impersonate, "impersonate-extra-scopes");
    /* A Host header without a value is there, and names nothing. */
    struct ld_proxy_req e = {.method = "GET"};
    ld_proxy_req_note_header(&e, "Host", NULL);
    ck_assert_str_eq(e.host, "");
    ck_assert_uint_eq(e.hosts, 1);
}
END_TEST

START_TEST(browsers_are_refused)
{
    static const char *const headers[][2] = {
        {"Origin", "http://evil.example"},   {"Origin", "null"},
        {"origin", "http://127.0.0.1:8001"}, {"Sec-Fetch-Site", "cross-site"},
        {"Sec-Fetch-Site", "same-origin"},   {"SEC-FETCH-SITE", "none"},
    };
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    for (size_t i = 0; i < N(headers); i++) {
        for (size_t m = 0; m < 2; m++) {
            struct ld_proxy_req r = req(m ? "POST" : "GET", "/api/v1/namespaces/a/pods");
            ld_proxy_req_note_header(&r, headers[i][0], headers[i][1]);
            judge(&r, &s, &v);
            assert_forbidden(&v, headers[i][0], headers[i][0]);
            ck_assert_ptr_nonnull(strstr(v.message, "browsers"));
        }
    }
    /* Other Sec-Fetch-* headers alone are not the rule's. */
    struct ld_proxy_req r = req("GET", "/api");
    ld_proxy_req_note_header(&r, "Sec-Fetch-Mode", "cors");
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
}
END_TEST

START_TEST(impersonation_needs_the_flag)
{
    static const char *const names[] = {"Impersonate-User", "Impersonate-Group",
                                        "Impersonate-Uid", "Impersonate-Extra-Scopes",
                                        "impersonate-user"};
    struct ld_proxy_policy allow = {.port = PORT, .impersonation = true};
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    for (size_t i = 0; i < N(names); i++) {
        snap_init(&s, true);
        struct ld_proxy_req r = req("GET", "/api/v1/namespaces/a/pods");
        ld_proxy_req_note_header(&r, names[i], "admin");
        judge(&r, &s, &v);
        assert_forbidden(&v, names[i], names[i]);
        ck_assert_ptr_nonnull(strstr(v.message, "--api-proxy-impersonation"));
        r.method = "PATCH";
        judge(&r, &s, &v);
        assert_forbidden(&v, names[i], names[i]);
        /* Allowed: it passes, and it is forwarded. */
        r.method = "GET";
        judge_with(&r, &s, &allow, &v);
        ck_assert_uint_eq(v.status, 0);
        ck_assert(ld_proxy_forward_request_header(names[i], NULL));
        r.method = "PATCH";
        judge_with(&r, &s, &allow, &v);
        ck_assert_uint_eq(v.status, 0);
        ck_assert(v.write);
        /* A write still needs leadership. */
        snap_init(&s, false);
        judge_with(&r, &s, &allow, &v);
        ck_assert_uint_eq(v.status, 503);
        ck_assert(v.refused);
    }
}
END_TEST

START_TEST(dot_segments_get_400)
{
    static const char *const dotted[] = {
        "/api/v1/namespaces/a/pods/..",
        "/api/./v1",
        "/..",
        "/.",
        "/api/v1/namespaces/a/pods/x/../y?watch=1",
        "/%2e%2e/api",
        "/%2E%2e/api",
        "/%2e%2E/api",
        "/%2e/api",
        "/api/.%2E/v1",
        "/api/%2E./v1",
        "/api/v1/a%2f..%2fb",
        "/api/v1/a%2F.%2Fb",
        "//..//api",
        "/api/v1/namespaces/a/pods/..#x",
    };
    static const char *const fine[] = {
        "/api/.../v1",
        "/api/..x/v1",
        "/api/.x/v1",
        "/api/x./v1",
        "/api/%2e%2e%2e/v1",
        "/api/v1/pods?path=/../x",
        "/api/v1/pods?x=..",
        "/api/%2e%2x/v1", /* not an escape: the API server refuses it */
        "/api/%2",
        "/api/v1/namespaces/a/configmaps/a.b",
    };
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    for (size_t i = 0; i < N(dotted); i++) {
        for (size_t m = 0; m < 2; m++) {
            struct ld_proxy_req r = req(m ? "PUT" : "GET", dotted[i]);
            judge(&r, &s, &v);
            ck_assert_msg(v.status == 400, "%s: %u", dotted[i], v.status);
            ck_assert_str_eq(v.reason, "BadRequest");
            ck_assert_ptr_nonnull(strstr(v.message, "me"));
            ck_assert(!v.refused && !v.write);
        }
    }
    for (size_t i = 0; i < N(fine); i++) {
        struct ld_proxy_req r = req("GET", fine[i]);
        judge(&r, &s, &v);
        ck_assert_msg(v.status == 0, "%s: %u %s", fine[i], v.status, v.message);
    }
}
END_TEST

/* Paths that reach ns/lease once the API server has decoded them. */
static const char *const own_paths[] = {
    OWN,
    OWN "?fieldManager=app",
    OWN "/status",
    OWN "/",
    "/apis/coordination.k8s.io/v1beta1/namespaces/ns/leases/lease",
    "//apis//coordination.k8s.io/v1/namespaces/ns/leases//lease",
    "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l%65ase",
    "/apis/coordination.k8s.io/v1/namespaces/ns/leases/%6C%65%61%73%65",
    "/apis/coordination%2Ek8s%2eio/v1/namespaces/%6es/leases/lease",
    "/apis/coordination.k8s.io/v1/namespaces/ns/leases%2Flease",
    "%2Fapis/coordination.k8s.io/v1/namespaces/ns/leases/lease",
};

START_TEST(own_lease_writes_get_403)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    for (size_t lead = 0; lead < 2; lead++) {
        /* The leader is refused too, and a standby gets 403, not 503. */
        snap_init(&s, lead);
        for (size_t i = 0; i < N(own_paths); i++) {
            for (size_t m = 0; m < N(writes); m++) {
                struct ld_proxy_req r = req(writes[m], own_paths[i]);
                judge(&r, &s, &v);
                assert_forbidden(&v, own_paths[i], "ns/lease");
            }
        }
        /* Deleting the collection deletes it too. */
        static const char *const collections[] = {
            COLLECTION, COLLECTION "/", COLLECTION "?labelSelector=a%3Db",
            "/apis/coordination.k8s.io/v1/namespaces/"
            "ns/le%61ses"};
        for (size_t i = 0; i < N(collections); i++) {
            struct ld_proxy_req r = req("DELETE", collections[i]);
            judge(&r, &s, &v);
            assert_forbidden(&v, collections[i], "namespace ns");
        }
    }
}
END_TEST

START_TEST(other_leases_and_reads_pass)
{
    static const char *const others[] = {
        "/apis/coordination.k8s.io/v1/namespaces/other/leases/lease",
        "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease2",
        "/apis/coordination.k8s.io/v1/namespaces/ns/leases/leas",
        "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease-member-me",
        "/apis/coordination.k8s.io/v1/namespaces/ns/leases/ns%2Flease",
        "/apis/coordination.k8s.io/v1/namespaces/ns/leasecandidates/lease",
        "/apis/coordination.k8s.io/v1/namespaces/nsx/leases/lease",
        "/apis/coordination.x.io/v1/namespaces/ns/leases/lease",
        "/api/v1/namespaces/ns/leases/lease",
        "/apis/coordination.k8s.io/v1/leases/lease",
        "/apis/coordination.k8s.io/v1/namespaces/ns/Leases/lease",
    };
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    for (size_t i = 0; i < N(others); i++) {
        for (size_t m = 0; m < N(writes); m++) {
            struct ld_proxy_req r = req(writes[m], others[i]);
            judge(&r, &s, &v);
            ck_assert_msg(v.status == 0, "%s %s: %u %s", writes[m], others[i], v.status,
                          v.message);
            ck_assert(v.write);
        }
    }
    /* A new Lease in the namespace, and deleting another namespace's. */
    struct ld_proxy_req r = req("POST", COLLECTION);
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
    r = req("DELETE", "/apis/coordination.k8s.io/v1/namespaces/other/leases");
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
    /* Reading the own Lease passes on every replica. */
    for (size_t lead = 0; lead < 2; lead++) {
        snap_init(&s, lead);
        for (size_t i = 0; i < N(own_paths); i++) {
            for (size_t m = 0; m < N(reads); m++) {
                r = req(reads[m], own_paths[i]);
                judge(&r, &s, &v);
                ck_assert_msg(v.status == 0, "%s %s: %u", reads[m], own_paths[i],
                              v.status);
                ck_assert(!v.write);
            }
        }
        r = req("GET", COLLECTION "?watch=1");
        judge(&r, &s, &v);
        ck_assert_uint_eq(v.status, 0);
    }
}
END_TEST

START_TEST(long_segments_and_messages_stay_bounded)
{
    static char path[4096], host[2048];
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    /* A name longer than any Lease name is no Lease of ours. */
    int n = snprintf(path, sizeof(path), "%s/", COLLECTION);
    memset(path + n, 'a', 300);
    path[n + 300] = '\0';
    struct ld_proxy_req r = req("PATCH", path);
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
    /* A long segment still ends at its '/'; a dot segment after it counts. */
    snprintf(path + n + 300, sizeof(path) - (size_t)n - 300, "/../lease");
    r = req("PATCH", path);
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 400);
    memset(host, 'h', sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    r = (struct ld_proxy_req){.method = "GET", .target = "/", .version = "HTTP/1.1"};
    ld_proxy_req_note_header(&r, "Host", host);
    judge(&r, &s, &v);
    assert_forbidden(&v, "long Host", "hhhh");
    ck_assert_uint_lt(strlen(v.message), sizeof(v.message));
}
END_TEST

/* The client's bytes quoted in a message (a Host, a header name, a shard
 * ID) leave the Status body valid JSON: jansson takes only UTF-8, and
 * without a body the proxy could not answer at all. */
START_TEST(quoted_client_bytes_keep_the_body_json)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    struct ld_proxy_req r = {.method = "GET", .target = "/", .version = "HTTP/1.1"};
    ld_proxy_req_note_header(&r, "Host", "ev\xc2il\x01.example:8001");
    judge(&r, &s, &v);
    assert_forbidden(&v, "bytes", "ev?il?.example:8001");
    r = req("GET", "/");
    ld_proxy_req_note_header(&r, "Impersonate-\xff", "x");
    judge(&r, &s, &v);
    assert_forbidden(&v, "name", "Impersonate-?");
    char *body = ld_proxy_status_json(v.status, v.reason, v.message);
    ck_assert_ptr_nonnull(body);
    free(body);
    /* The same for an unknown shard's 404. */
    struct ld_shardlayout *g = ld_shardlayout_new("grp", NULL, 1);
    ck_assert_ptr_nonnull(g);
    struct ld_proxy_view view = {.snap = &s, .layout = g};
    r = req("POST", "/api/v1/namespaces/a/configmaps");
    r.shard = "\xc3\x28";
    ld_proxy_judge(&r, &pol, &view, NOW, &v);
    ck_assert_uint_eq(v.status, 404);
    ck_assert_ptr_nonnull(strstr(v.message, "\"?(\""));
    body = ld_proxy_status_json(v.status, v.reason, v.message);
    ck_assert_ptr_nonnull(body);
    free(body);
    /* And for a group Lease whose name decodes to other bytes. */
    r = req("PATCH", COLLECTION "/grp-member-%ff%00x");
    r.shard = "0";
    ld_proxy_judge(&r, &pol, &view, NOW, &v);
    assert_forbidden(&v, "group Lease", "ns/grp-member-?");
    body = ld_proxy_status_json(v.status, v.reason, v.message);
    ck_assert_ptr_nonnull(body);
    free(body);
    ld_shardlayout_unref(g);
}
END_TEST

/* ---- creating an own Lease through the collection ---- */

/* A POST of body to path as the proxy judges it once the body is read,
 * with the Content-Type ctype (NULL: none). */
static struct ld_proxy_req create_req(const char *path, const char *ctype,
                                      const char *body)
{
    struct ld_proxy_req r = req("POST", path);
    if (ctype)
        ld_proxy_req_note_header(&r, "Content-Type", ctype);
    r.body_read = true;
    r.body = body;
    r.body_len = body ? strlen(body) : 0;
    return r;
}

/* Collection paths of namespace ns, as the API server decodes them. */
static const char *const collection_paths[] = {
    COLLECTION,
    COLLECTION "/",
    COLLECTION "?fieldManager=app&dryRun=All",
    "//apis//coordination.k8s.io/v1beta1/namespaces/ns/leases",
    "/apis/coordination%2Ek8s.io/v1/namespaces/%6Es/le%61ses",
    "/apis/coordination.k8s.io/v1/namespaces%2Fns%2Fleases",
};

START_TEST(own_lease_creates_get_403)
{
    static const char *const bodies[] = {
        "{\"metadata\":{\"name\":\"lease\"},\"spec\":{}}",
        "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"l\\u0065ase\"}}",
        "{\"metadata\":{\"name\":\"lease\",\"generateName\":\"app-\"}}",
        /* Keys in another case: the gate does not rely on the API server's
         * matching. */
        "{\"Metadata\":{\"Name\":\"lease\"}}",
        "{\"metadata\":{\"NAME\":\"lease\"}}",
        "{\"metadata\":{\"name\":\"x\"},\"METADATA\":{\"name\":\"lease\"}}",
        " \n{\"metadata\":{\"name\":\"lease\"}} \n",
    };
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    for (size_t lead = 0; lead < 2; lead++) {
        snap_init(&s, lead);
        for (size_t p = 0; p < N(collection_paths); p++) {
            for (size_t i = 0; i < N(bodies); i++) {
                const char *body = bodies[i];
                for (size_t c = 0; c < 3; c++) {
                    static const char *const ctypes[] = {
                        NULL, "application/json", " Application/JSON ; charset=utf-8"};
                    struct ld_proxy_req r =
                        create_req(collection_paths[p], ctypes[c], body);
                    judge(&r, &s, &v);
                    assert_forbidden(&v, body, "would create the Lease ns/lease");
                }
            }
        }
    }
    /* The message says which key and quotes it. */
    snap_init(&s, true);
    struct ld_proxy_req r =
        create_req(COLLECTION, NULL, "{\"metadata\":{\"name\":\"lease\"}}");
    judge(&r, &s, &v);
    assert_forbidden(&v, "name", "(metadata.name \"lease\")");
    ck_assert_ptr_nonnull(strstr(v.message, "namespace ns"));
}
END_TEST

START_TEST(unreadable_creates_get_403)
{
    static const struct {
        const char *ctype, *encoding, *body;
    } bad[] = {
        {"application/yaml", NULL, "metadata:\n  name: lease\n"},
        /* The gate reads YAML as nothing, even when it names no Lease. */
        {"application/yaml", NULL, "{\"metadata\":{\"name\":\"app\"}}"},
        {"application/vnd.kubernetes.protobuf", NULL, "k8s\x01\x02"},
        {"application/json-seq", NULL, "{\"metadata\":{\"name\":\"app\"}}"},
        {"text/plain", NULL, "{\"metadata\":{\"name\":\"app\"}}"},
        {NULL, "gzip", "{\"metadata\":{\"name\":\"app\"}}"},
        {NULL, "identity, gzip", "{\"metadata\":{\"name\":\"app\"}}"},
        {NULL, NULL, ""},
        {NULL, NULL, "not json"},
        {NULL, NULL, "[{\"metadata\":{\"name\":\"lease\"}}]"},
        {NULL, NULL, "\"lease\""},
        {NULL, NULL, "{\"metadata\":{\"name\":\"app\"}"},
        {NULL, NULL, "{\"metadata\":{\"name\":\"app\"}} {}"},
        /* Which of two the API server takes is not the gate's to guess. */
        {NULL, NULL, "{\"metadata\":{\"name\":\"app\",\"name\":\"lease\"}}"},
        {NULL, NULL, "{\"metadata\":{\"name\":\"app\"},\"metadata\":{}}"},
        {NULL, NULL, "{\"metadata\":{\"name\":\"\xff\"}}"},
        {NULL, NULL, "{\"metadata\":[]}"},
        {NULL, NULL, "{\"metadata\":\"lease\"}"},
        {NULL, NULL, "{\"metadata\":{\"name\":7}}"},
        {NULL, NULL, "{\"metadata\":{\"name\":\"app\",\"generateName\":{}}}"},
        {NULL, NULL, "{\"metadata\":{\"name\":[\"lease\"]}}"},
    };
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    for (size_t i = 0; i < N(bad); i++) {
        struct ld_proxy_req r = create_req(COLLECTION, bad[i].ctype, bad[i].body);
        if (bad[i].encoding)
            ld_proxy_req_note_header(&r, "Content-Encoding", bad[i].encoding);
        judge(&r, &s, &v);
        assert_forbidden(&v, bad[i].body, "cannot read this body");
        ck_assert_ptr_nonnull(strstr(v.message, "the Lease ns/lease"));
    }
    /* Either header twice. */
    struct ld_proxy_req r = create_req(COLLECTION, "application/json", "{}");
    ld_proxy_req_note_header(&r, "content-type", "application/json");
    judge(&r, &s, &v);
    assert_forbidden(&v, "two types", "cannot read this body");
    r = create_req(COLLECTION, NULL, "{}");
    ld_proxy_req_note_header(&r, "Content-Encoding", "identity");
    ld_proxy_req_note_header(&r, "Content-Encoding", "identity");
    judge(&r, &s, &v);
    assert_forbidden(&v, "two encodings", "cannot read this body");
    /* A body with a NUL the API server would read past is no JSON text. */
    r = create_req(COLLECTION, NULL, NULL);
    r.body = "{}\0{\"metadata\":{\"name\":\"lease\"}}";
    r.body_len = 34;
    judge(&r, &s, &v);
    assert_forbidden(&v, "NUL", "cannot read this body");
}
END_TEST

START_TEST(harmless_creates_pass)
{
    static const struct {
        const char *ctype, *encoding, *body;
    } fine[] = {
        {NULL, NULL, "{\"metadata\":{\"name\":\"app-lock\"},\"spec\":{}}"},
        {"application/json", "identity", "{\"metadata\":{\"name\":\"leas\"}}"},
        {"", "", "{\"metadata\":{\"name\":\"lease2\"}}"},
        {NULL, NULL, "{\"metadata\":{\"name\":\"Lease\"}}"},
        {NULL, NULL, "{\"metadata\":{\"name\":\"ns/lease\"}}"},
        {NULL, NULL, "{\"metadata\":{\"name\":\"lease-member-me\"}}"},
        /* "le" + 5 is 7 bytes, "leas" + 5 is 9: neither is "lease". */
        {NULL, NULL, "{\"metadata\":{\"generateName\":\"le\"}}"},
        {NULL, NULL, "{\"metadata\":{\"generateName\":\"leas\"}}"},
        {NULL, NULL, "{\"metadata\":{\"generateName\":\"lease\"}}"},
        {NULL, NULL, "{\"metadata\":{\"generateName\":\"a\"}}"},
        /* No name at all: the API server refuses it. */
        {NULL, NULL, "{\"metadata\":{}}"},
        {NULL, NULL, "{}"},
        {NULL, NULL, "{\"metadata\":null}"},
        {NULL, NULL, "{\"metadata\":{\"name\":null,\"generateName\":null}}"},
        /* Other keys that mention it. */
        {NULL, NULL,
         "{\"spec\":{\"name\":\"lease\"},\"metadata\":{\"name\":\"app\","
         "\"labels\":{\"name\":\"lease\"}}}"},
        {NULL, NULL, "{\"metadata\":{\"name\":\"app\",\"namespace\":\"ns\"}}"},
    };
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    for (size_t i = 0; i < N(fine); i++) {
        struct ld_proxy_req r = create_req(COLLECTION, fine[i].ctype, fine[i].body);
        if (fine[i].encoding)
            ld_proxy_req_note_header(&r, "Content-Encoding", fine[i].encoding);
        judge(&r, &s, &v);
        ck_assert_msg(v.status == 0, "%s: %u %s", fine[i].body, v.status, v.message);
        ck_assert(v.write);
    }
    /* Before the body is read the rule cannot tell, and passes. */
    struct ld_proxy_req r =
        create_req(COLLECTION, NULL, "{\"metadata\":{\"name\":\"lease\"}}");
    r.body_read = false;
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
    /* Another namespace's collection, or another collection, is not judged
     * by its body (the API server refuses a metadata.namespace that
     * differs from the path's). */
    static const char *const elsewhere[] = {
        "/apis/coordination.k8s.io/v1/namespaces/other/leases",
        "/apis/coordination.k8s.io/v1/namespaces/ns/leasecandidates",
        "/api/v1/namespaces/ns/configmaps",
        "/apis/coordination.k8s.io/v1/leases",
    };
    for (size_t i = 0; i < N(elsewhere); i++) {
        r = create_req(elsewhere[i], "application/yaml",
                       "{\"metadata\":{\"name\":\"lease\",\"namespace\":\"ns\"}}");
        judge(&r, &s, &v);
        ck_assert_msg(v.status == 0, "%s: %u %s", elsewhere[i], v.status, v.message);
    }
    /* Only a POST creates; a PUT to the collection is the API server's to
     * refuse, and reads pass. */
    r = create_req(COLLECTION, NULL, "{\"metadata\":{\"name\":\"lease\"}}");
    r.method = "PUT";
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
    r.method = "GET";
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
    /* A standby gets the leadership answer for a harmless body. */
    snap_init(&s, false);
    r = create_req(COLLECTION, NULL, fine[0].body);
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 503);
}
END_TEST

/* A standby's 503 for such a POST waits for the body, so that the 403
 * does not depend on who leads; a leader's pass is the same either way. */
START_TEST(a_standby_judges_a_create_once_its_body_is_read)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, false);
    for (size_t i = 0; i < N(collection_paths); i++) {
        struct ld_proxy_req r = create_req(collection_paths[i], NULL, NULL);
        r.body_read = false;
        judge(&r, &s, &v);
        ck_assert_msg(v.status == 0, "%s: %u", collection_paths[i], v.status);
        ck_assert(v.write && v.body_pending && !v.refused);
        r = create_req(collection_paths[i], NULL, "{\"metadata\":{\"name\":\"lease\"}}");
        judge(&r, &s, &v);
        assert_forbidden(&v, collection_paths[i], "would create the Lease ns/lease");
        ck_assert(!v.body_pending);
        r = create_req(collection_paths[i], NULL, "{\"metadata\":{\"name\":\"app\"}}");
        judge(&r, &s, &v);
        ck_assert_uint_eq(v.status, 503);
        ck_assert(v.refused && !v.body_pending);
    }
    /* Other writes, and other namespaces, get their 503 at once. */
    static const char *const now[] = {
        "/apis/coordination.k8s.io/v1/namespaces/other/leases",
        COLLECTION "/app",
        "/api/v1/namespaces/ns/configmaps",
    };
    for (size_t i = 0; i < N(now); i++) {
        struct ld_proxy_req r = req("POST", now[i]);
        judge(&r, &s, &v);
        ck_assert_msg(v.status == 503, "%s: %u", now[i], v.status);
        ck_assert(!v.body_pending);
    }
    struct ld_proxy_req r = req("PATCH", COLLECTION);
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 503);
    /* The leader's header-time pass is no pending one. */
    snap_init(&s, true);
    r = req("POST", COLLECTION);
    judge(&r, &s, &v);
    ck_assert(v.status == 0 && v.write && !v.body_pending);
}
END_TEST

/* The API server makes a name from generateName and 5 random characters
 * (of which the gate assumes nothing), after cutting it to 58 bytes. */
START_TEST(generate_names_are_judged_like_the_api_server)
{
    /* Keys in any case; names compare exactly, as Lease names do. */
    static const char *const keys[] = {"generateName", "GenerateName", "generatename"};
    static const char *const passed[] = {"app", "app-x", "app-xk7vq", "", "ap", "APP-"};
    char name[64], body[256];
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    snprintf(s.lease, sizeof(s.lease), "ns/app-xk7vq");
    for (size_t i = 0; i < N(keys); i++) {
        snprintf(body, sizeof(body), "{\"metadata\":{\"%s\":\"app-\"}}", keys[i]);
        struct ld_proxy_req r = create_req(COLLECTION, NULL, body);
        judge(&r, &s, &v);
        assert_forbidden(&v, body, "(metadata.generateName \"app-\")");
    }
    /* Beside a name too: which one the API server takes is its own. */
    struct ld_proxy_req r = create_req(
        COLLECTION, NULL, "{\"metadata\":{\"name\":\"x\",\"generateName\":\"app-\"}}");
    judge(&r, &s, &v);
    assert_forbidden(&v, "beside", "would create the Lease ns/app-xk7vq");
    for (size_t i = 0; i < N(passed); i++) {
        snprintf(body, sizeof(body), "{\"metadata\":{\"generateName\":\"%s\"}}",
                 passed[i]);
        r = create_req(COLLECTION, NULL, body);
        judge(&r, &s, &v);
        ck_assert_msg(v.status == 0, "%s: %s", body, v.message);
    }
    /* A 63-byte Lease name comes from any base that starts like it and is
     * at least 58 bytes long. */
    memset(name, 'a', 63);
    name[63] = '\0';
    snprintf(s.lease, sizeof(s.lease), "ns/%s", name);
    for (size_t len = 50; len <= 63; len++) {
        snprintf(body, sizeof(body), "{\"metadata\":{\"generateName\":\"%.*s%s\"}}",
                 (int)len, name, len > 58 ? "zzz" : "");
        r = create_req(COLLECTION, NULL, body);
        judge(&r, &s, &v);
        if (len >= 58)
            assert_forbidden(&v, body, "metadata.generateName");
        else
            ck_assert_msg(v.status == 0, "%s: %s", body, v.message);
    }
}
END_TEST

START_TEST(shard_group_creates_get_403)
{
    static const char *const named[] = {"eu", "us"};
    struct ld_shardlayout *by_name = ld_shardlayout_new("grp", named, 2);
    ck_assert_ptr_nonnull(by_name);
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    char body[256];
    memset(&s, 0, sizeof(s));
    snprintf(s.lease, sizeof(s.lease), "ns/grp");
    snprintf(s.identity, sizeof(s.identity), "me");
    struct ld_proxy_view view = {.snap = &s, .layout = by_name};
    static const char *const names[] = {"grp-eu", "grp-us", "grp-member-me",
                                        "grp-member-x"};
    /* "grp-member-" + 5 is a member Lease, and so is "grp-mem" + 5 (the
     * gate assumes nothing of the characters) or anything longer that
     * starts like it; "g" + 5 could be "grp-eu" or "grp-us". */
    static const char *const bases[] = {
        "grp-member-", "grp-member-me", "grp-membe", "grp-mem", "g", "grp-member-x-y-z"};
    static const char *const passed[] = {"grp", "grp-de", "grp-member-", "grp-member",
                                         "other-eu"};
    static const char *const passed_bases[] = {"grp-eu", "grp-me",        "grp-x",
                                               "",       "other-member-", "grp-eu-"};
    for (size_t i = 0; i < N(names) + N(bases); i++) {
        if (i < N(names))
            snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\"}}", names[i]);
        else
            snprintf(body, sizeof(body), "{\"metadata\":{\"generateName\":\"%s\"}}",
                     bases[i - N(names)]);
        struct ld_proxy_req r = create_req(COLLECTION, NULL, body);
        r.shard = "eu";
        ld_proxy_judge(&r, &pol, &view, NOW, &v);
        assert_forbidden(&v, body, "a Lease of the shard group grp");
    }
    for (size_t i = 0; i < N(passed) + N(passed_bases); i++) {
        if (i < N(passed))
            snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\"}}", passed[i]);
        else
            snprintf(body, sizeof(body), "{\"metadata\":{\"generateName\":\"%s\"}}",
                     passed_bases[i - N(passed)]);
        struct ld_proxy_req r = create_req(COLLECTION, NULL, body);
        r.shard = "eu";
        ld_proxy_judge(&r, &pol, &view, NOW, &v);
        ck_assert_msg(v.status != 403, "%s: %s", body, v.message);
    }
    struct ld_proxy_req r = create_req(COLLECTION, "application/yaml", "{}");
    r.shard = "eu";
    ld_proxy_judge(&r, &pol, &view, NOW, &v);
    assert_forbidden(&v, "yaml", "cannot read this body");
    ck_assert_ptr_nonnull(strstr(v.message, "shard group grp"));
    /* A member-like name longer than any Lease name is refused all the
     * same, in the body and in the path (where only its start is kept). */
    static char path[512];
    static char long_body[512];
    int n =
        snprintf(long_body, sizeof(long_body), "{\"metadata\":{\"name\":\"grp-member-");
    memset(long_body + n, 'x', 300);
    snprintf(long_body + n + 300, sizeof(long_body) - (size_t)n - 300, "\"}}");
    r = create_req(COLLECTION, NULL, long_body);
    r.shard = "eu";
    ld_proxy_judge(&r, &pol, &view, NOW, &v);
    assert_forbidden(&v, "long body", "shard group grp");
    n = snprintf(path, sizeof(path), "%s/grp-member-", COLLECTION);
    memset(path + n, 'x', 300);
    path[n + 300] = '\0';
    r = req("PATCH", path);
    r.shard = "eu";
    ld_proxy_judge(&r, &pol, &view, NOW, &v);
    assert_forbidden(&v, "long path", "shard group grp");
    ld_shardlayout_unref(by_name);
}
END_TEST

/* ---- shard mode ---- */

static struct ld_shardlayout *group_of(const char *const *names, uint32_t n)
{
    struct ld_shardlayout *l = ld_shardlayout_new("grp", names, n);
    ck_assert_ptr_nonnull(l);
    return l;
}

/* Shard 0 ours until NOW + 500; the others held by "other". */
static struct ld_shardsnap *table_of(uint32_t n)
{
    struct ld_shard_entry e[3] = {
        {.leader = "me", .observed = true, .leading = true},
        {.leader = "other", .observed = true},
        {.leader = "other", .observed = true},
    };
    const char *members[] = {"me", "other"};
    struct ld_shardsnap *t = ld_shardsnap_new(true, NOW + 500, e, n, members, 2);
    ck_assert_ptr_nonnull(t);
    return t;
}

START_TEST(shard_group_leases_get_403)
{
    static const char *const named[] = {"eu", "us"};
    struct ld_shardlayout *numbered = group_of(NULL, 3), *by_name = group_of(named, 2);
    struct ld_shardsnap *t3 = table_of(3), *t2 = table_of(2);
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    char path[256];
    memset(&s, 0, sizeof(s));
    snprintf(s.lease, sizeof(s.lease), "ns/grp");
    snprintf(s.identity, sizeof(s.identity), "me");
    struct ld_proxy_view views[] = {{.snap = &s, .layout = numbered, .shards = t3},
                                    {.snap = &s, .layout = by_name, .shards = t2}};
    static const char *const refused[2][6] = {
        {"grp-0", "grp-1", "grp-2", "grp-member-me", "grp-member-other", "grp-%30"},
        {"grp-eu", "grp-us", "grp-member-me", "grp-member-x", "grp-%65u",
         "grp-member-other"},
    };
    static const char *const passed[] = {"grp",    "grp-3",   "grp-member-", "grp-member",
                                         "grp-00", "other-0", "grp-eu-1"};
    for (size_t g = 0; g < N(views); g++) {
        for (size_t i = 0; i < N(refused[g]); i++) {
            snprintf(path, sizeof(path), "%s/%s", COLLECTION, refused[g][i]);
            for (size_t m = 0; m < N(writes); m++) {
                /* Naming a shard it owns changes nothing. */
                struct ld_proxy_req r = req(writes[m], path);
                r.shard = g ? "eu" : "0";
                ld_proxy_decide(&r, &views[g], NOW, &v);
                ck_assert_uint_eq(v.status, 0);
                ld_proxy_judge(&r, &pol, &views[g], NOW, &v);
                assert_forbidden(&v, path, "shard group grp");
            }
            struct ld_proxy_req r = req("GET", path);
            ld_proxy_judge(&r, &pol, &views[g], NOW, &v);
            ck_assert_uint_eq(v.status, 0);
        }
        for (size_t i = 0; i < N(passed); i++) {
            snprintf(path, sizeof(path), "%s/%s", COLLECTION, passed[i]);
            struct ld_proxy_req r = req("PUT", path);
            r.shard = g ? "eu" : "0";
            ld_proxy_judge(&r, &pol, &views[g], NOW, &v);
            ck_assert_msg(v.status == 0, "%s: %u %s", path, v.status, v.message);
        }
        struct ld_proxy_req r = req("DELETE", COLLECTION);
        r.shard = g ? "eu" : "0";
        ld_proxy_judge(&r, &pol, &views[g], NOW, &v);
        assert_forbidden(&v, "collection", "shard group grp");
        /* Another namespace's Leases of the same names are not the group's. */
        r = req("PATCH",
                "/apis/coordination.k8s.io/v1/namespaces/other/leases/grp-member-me");
        r.shard = g ? "eu" : "0";
        ld_proxy_judge(&r, &pol, &views[g], NOW, &v);
        ck_assert_uint_eq(v.status, 0);
    }
    ld_shardsnap_unref(t3);
    ld_shardsnap_unref(t2);
    ld_shardlayout_unref(numbered);
    ld_shardlayout_unref(by_name);
}
END_TEST

/* ---- order, the leadership test after the guards, the Status body ---- */

START_TEST(guards_come_first_then_leadership)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, false);
    /* An upgrade from a browser: the browser rule answers. */
    struct ld_proxy_req r = req("GET", "/api/v1/namespaces/a/pods/p/exec");
    ld_proxy_req_note_header(&r, "Origin", "http://evil.example");
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 403);
    /* Host before browser before impersonation before dots before Leases. */
    r = (struct ld_proxy_req){.method = "DELETE", .target = "/x/../" OWN};
    ld_proxy_req_note_header(&r, "Host", "evil.example:8001");
    ld_proxy_req_note_header(&r, "Origin", "x");
    ld_proxy_req_note_header(&r, "Impersonate-User", "x");
    judge(&r, &s, &v);
    ck_assert_ptr_nonnull(strstr(v.message, "Host"));
    r.host = "127.0.0.1:8001";
    judge(&r, &s, &v);
    ck_assert_ptr_nonnull(strstr(v.message, "browsers"));
    r.browser = NULL;
    judge(&r, &s, &v);
    ck_assert_ptr_nonnull(strstr(v.message, "impersonation"));
    r.impersonate = NULL;
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 400);
    r.target = OWN;
    judge(&r, &s, &v);
    assert_forbidden(&v, "own", "ns/lease");
    /* Past the guards ld_proxy_decide answers: 503 on a standby, 501, 413,
     * a read passes, a write passes on the leader. */
    r = req("PATCH", "/api/v1/namespaces/a/pods/p");
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 503);
    ck_assert(v.refused && v.write);
    ck_assert_ptr_nonnull(strstr(v.message, "the holder is other"));
    r = req("GET", "/api/v1/namespaces/a/pods/p/attach");
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 501);
    r = req("POST", "/x");
    r.has_length = true;
    r.content_length = LD_PROXY_MAX_BODY + 1ULL;
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 413);
    r = req("GET", "/api/v1/namespaces/a/pods/p");
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
    ck_assert(!v.write);
    ck_assert(ld_proxy_still_leads(&v, &(struct ld_proxy_view){.snap = &s}, NOW, NULL));
    snap_init(&s, true);
    r = req("PATCH", "/api/v1/namespaces/a/pods/p");
    judge(&r, &s, &v);
    ck_assert_uint_eq(v.status, 0);
    ck_assert(v.write);
}
END_TEST

START_TEST(forbidden_is_a_metav1_status)
{
    struct ld_snapshot s;
    struct ld_proxy_verdict v;
    snap_init(&s, true);
    struct ld_proxy_req r = req("PATCH", OWN);
    judge(&r, &s, &v);
    char *body = ld_proxy_status_json(v.status, v.reason, v.message);
    ck_assert_ptr_nonnull(body);
    json_t *o = json_loads(body, 0, NULL);
    ck_assert_msg(o != NULL, "%s", body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "kind")), "Status");
    ck_assert_str_eq(json_string_value(json_object_get(o, "apiVersion")), "v1");
    ck_assert_str_eq(json_string_value(json_object_get(o, "status")), "Failure");
    ck_assert_str_eq(json_string_value(json_object_get(o, "reason")), "Forbidden");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "code")), 403);
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(o, "message")), "me (this replica)"));
    json_decref(o);
    free(body);
}
END_TEST

START_TEST(forwarded_headers_are_dropped)
{
    static const char *const dropped[] = {
        "X-Forwarded-For", "x-forwarded-for", "X-Forwarded-Host", "X-Forwarded-Proto",
        "X-Forwarded-Port", "X-Forwarded-Prefix", "Forwarded", "FORWARDED",
        /* A front proxy's word for the client's address. */
        "X-Real-Ip", "X-Real-IP", "x-real-ip",
        /* Request-header authentication: who the client is. */
        "X-Remote-User", "x-remote-user", "X-Remote-Group", "X-REMOTE-GROUP",
        "X-Remote-Extra-Scopes", "X-Remote-Extra-", "X-Remote-Uid"};
    static const char *const passed[] = {
        "X-Forwarded", "X-Forwardedx", "Forwarded-For", "X-Real",          "X-Real-Ipx",
        "X-Remote",    "X-Remoteuser", "Remote-User",   "Impersonate-User"};
    for (size_t i = 0; i < N(dropped); i++)
        ck_assert_msg(!ld_proxy_forward_request_header(dropped[i], NULL), "%s",
                      dropped[i]);
    for (size_t i = 0; i < N(passed); i++)
        ck_assert_msg(ld_proxy_forward_request_header(passed[i], NULL), "%s", passed[i]);
}
END_TEST

/* ---- the flag ---- */

static enum ld_err parse(struct ld_config *cfg, const char *const *args, char *err)
{
    char *argv[8];
    int argc = 0;
    argv[argc++] = "leaderd";
    for (; *args && argc < 7; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    return ld_config_parse_args(cfg, argc, argv, err, LD_CONFIG_ERR_LEN);
}

START_TEST(impersonation_flag_parses_like_other_booleans)
{
    struct ld_config cfg;
    char err[LD_CONFIG_ERR_LEN];
    const char *name;
    for (size_t i = 0; (name = ld_config_env_name(i)) != NULL; i++)
        unsetenv(name);
    const char *plain[] = {"--lease-name", "x", NULL};
    ck_assert_int_eq(parse(&cfg, plain, err), LD_OK);
    ck_assert(!cfg.api_proxy_impersonation);
    ld_config_clear(&cfg);
    const char *yes[] = {"--lease-name", "x", "--api-proxy-impersonation", "yes", NULL};
    ck_assert_int_eq(parse(&cfg, yes, err), LD_OK);
    ck_assert(cfg.api_proxy_impersonation);
    ld_config_clear(&cfg);
    const char *eq[] = {"--lease-name", "x", "--api-proxy-impersonation=TRUE", NULL};
    ck_assert_int_eq(parse(&cfg, eq, err), LD_OK);
    ck_assert(cfg.api_proxy_impersonation);
    ld_config_clear(&cfg);
    /* The variable, and the flag beating it. */
    setenv("LEADERD_API_PROXY_IMPERSONATION", "1", 1);
    ck_assert_int_eq(parse(&cfg, plain, err), LD_OK);
    ck_assert(cfg.api_proxy_impersonation);
    ld_config_clear(&cfg);
    const char *no[] = {"--lease-name", "x", "--api-proxy-impersonation", "false", NULL};
    ck_assert_int_eq(parse(&cfg, no, err), LD_OK);
    ck_assert(!cfg.api_proxy_impersonation);
    ld_config_clear(&cfg);
    setenv("LEADERD_API_PROXY_IMPERSONATION", "maybe", 1);
    ck_assert_int_eq(parse(&cfg, plain, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "--api-proxy-impersonation"));
    ck_assert_ptr_nonnull(strstr(err, "LEADERD_API_PROXY_IMPERSONATION"));
    ck_assert_ptr_nonnull(strstr(err, "maybe"));
    ld_config_clear(&cfg);
    unsetenv("LEADERD_API_PROXY_IMPERSONATION");
    const char *bad[] = {"--lease-name", "x", "--api-proxy-impersonation", "", NULL};
    ck_assert_int_eq(parse(&cfg, bad, err), LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "invalid boolean"));
    ld_config_clear(&cfg);
}
END_TEST

static Suite *proxy_gate_suite(void)
{
    Suite *s = suite_create("proxy_gate");
    TCase *tc = tcase_create("guards");
    tcase_add_test(tc, host_names_this_proxy);
    tcase_add_test(tc, host_missing_or_twice);
    tcase_add_test(tc, note_header_keeps_what_the_guards_need);
    tcase_add_test(tc, browsers_are_refused);
    tcase_add_test(tc, impersonation_needs_the_flag);
    tcase_add_test(tc, dot_segments_get_400);
    tcase_add_test(tc, own_lease_writes_get_403);
    tcase_add_test(tc, other_leases_and_reads_pass);
    tcase_add_test(tc, long_segments_and_messages_stay_bounded);
    tcase_add_test(tc, quoted_client_bytes_keep_the_body_json);
    tcase_add_test(tc, shard_group_leases_get_403);
    tcase_add_test(tc, own_lease_creates_get_403);
    tcase_add_test(tc, unreadable_creates_get_403);
    tcase_add_test(tc, harmless_creates_pass);
    tcase_add_test(tc, a_standby_judges_a_create_once_its_body_is_read);
    tcase_add_test(tc, generate_names_are_judged_like_the_api_server);
    tcase_add_test(tc, shard_group_creates_get_403);
    tcase_add_test(tc, guards_come_first_then_leadership);
    tcase_add_test(tc, forbidden_is_a_metav1_status);
    tcase_add_test(tc, forwarded_headers_are_dropped);
    tcase_add_test(tc, impersonation_flag_parses_like_other_booleans);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(proxy_gate_suite());
}
