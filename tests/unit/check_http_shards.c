/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the HTTP server in shard mode (cmd/leaderd/http_shards,
 * and http_hold / http_dispatch / metrics with a group): with a real
 * ld_shardgroup and ld_shardsnap tables, first the route table and
 * renderers as plain functions (every field of /shards, /shards/ID and
 * /shard?key=K, leadership judged at request time, 400/404/405, the
 * metrics), then the real server on 127.0.0.1 (port 0) driven with
 * libcurl while tables are published through ld_state_publish_shards:
 * key decoding, held /shards/ID polls and the "shards" /watch stream.
 */
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "hash.h"
#include "shardgroup.h"
#include "shardrange.h"
#include "timefmt.h"

#include "../../cmd/leaderd/http/http.h"
#include "../../cmd/leaderd/http/http_shards.h"
#include "../../cmd/leaderd/core/metrics.h"
#include "clock.h"
#include "support/http_client.h"
#include "support/http_rig.h"
#include "support/run_suite.h"

#define STALE_MS 5000

/* 2026-01-01T00:00:00.123456Z, the renewTime of every observed entry. */
static const int64_t renewed_us = INT64_C(1767225600123456);
static const char renewed_text[] = "2026-01-01T00:00:00.123456Z";
/* The server in shard mode: its routes are chosen, never guessed from the
 * state. */
static const struct ld_http_options shard_routes = {.mode = &ld_http_shard_mode};

static struct ld_shardgroup *new_group(const char *const *names, uint32_t n)
{
    struct ld_errinfo err;
    struct ld_shardgroup_config cfg = {
        .name = "demo",
        .identity = "me",
        .names = names,
        .n_shards = n,
        .lease_duration_ms = 15000,
    };
    memset(&err, 0, sizeof(err));
    struct ld_shardgroup *g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "group: %s", err.msg);
    return g;
}

/* An observed shard held by leader (free when ""), claimed by us when
 * leading (until the deadline of the table it goes into). */
static struct ld_shard_entry entry(const char *leader, int64_t term, bool leading)
{
    struct ld_shard_entry e;
    memset(&e, 0, sizeof(e));
    e.leader = leader;
    e.term = term;
    e.observed = true;
    e.leading = leading;
    e.has_renewed_at = leader[0] != '\0';
    e.renewed_at_us = renewed_us;
    return e;
}

static void base_snapshot(struct ld_snapshot *s, bool observed)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->lease, sizeof(s->lease), "ns/demo");
    snprintf(s->identity, sizeof(s->identity), "me");
    s->observed = observed;
    s->stale_after_ms = STALE_MS;
    s->heartbeat_ms = ld_mono_ms();
}

static json_t *parse_json(const char *text)
{
    json_error_t jerr;
    json_t *o = json_loads(text, JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(o != NULL, "not JSON (%s): %s", jerr.text, text);
    ck_assert(json_is_object(o));
    return o;
}

static const char *str_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_string(v), "%s is not a string", key);
    return json_string_value(v);
}

/* The table every plain test starts from: shard 0 ours (term 3), shard 1
 * another's (term 1), shard 2 free and never observed; members me, other. */
static struct ld_shardsnap *three_shards(int64_t now, bool observed)
{
    static const char *const members[] = {"me", "other"};
    struct ld_shard_entry e[3] = {entry("me", 3, true), entry("other", 1, false),
                                  entry("", 0, false)};
    e[2].observed = false;
    struct ld_shardsnap *t = ld_shardsnap_new(observed, now + 10000, e, 3, members, 2);
    ck_assert_ptr_nonnull(t);
    return t;
}

static int route(const char *method, const char *path, const char *key, size_t key_len,
                 const struct ld_shardgroup *g, const struct ld_snapshot *snap,
                 const struct ld_shardsnap *t, struct ld_metrics *m, int64_t now,
                 struct ld_http_reply *out)
{
    struct ld_http_shard_request rq = {method, path, key, key_len};
    return ld_http_route_shards(&rq, ld_shardgroup_layout(g), snap, t, m, now, out);
}

/* ---- plain functions ---- */

START_TEST(shards_body_fields)
{
    struct ld_shardgroup *g = new_group(NULL, 3);
    struct ld_snapshot snap;
    struct ld_http_reply r;
    int64_t now = 1000000;
    base_snapshot(&snap, true);
    struct ld_shardsnap *t = three_shards(now, true);

    ck_assert_int_eq(route("GET", "/shards", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "application/json");
    ck_assert_uint_eq(r.len, strlen(r.body));
    json_t *o = parse_json(r.body);
    ck_assert_str_eq(str_of(o, "group"), "ns/demo");
    ck_assert_str_eq(str_of(o, "identity"), "me");
    ck_assert(json_is_true(json_object_get(o, "observed")));
    json_t *members = json_object_get(o, "members");
    ck_assert_uint_eq(json_array_size(members), 2);
    ck_assert_str_eq(json_string_value(json_array_get(members, 0)), "me");
    ck_assert_str_eq(json_string_value(json_array_get(members, 1)), "other");
    json_t *owned = json_object_get(o, "owned");
    ck_assert_uint_eq(json_array_size(owned), 1);
    ck_assert_str_eq(json_string_value(json_array_get(owned, 0)), "0");

    json_t *shards = json_object_get(o, "shards");
    ck_assert_uint_eq(json_array_size(shards), 3);
    static const char *const starts[] = {"0x0000000000000000", "0x5555555555555555",
                                         "0xaaaaaaaaaaaaaaaa"};
    static const char *const ends[] = {"0x5555555555555555", "0xaaaaaaaaaaaaaaaa",
                                       "0x10000000000000000"};
    static const char *const leaders[] = {"me", "other", ""};
    static const int terms[] = {3, 1, 0};
    for (size_t i = 0; i < 3; i++) {
        char id[8], lease[32], selector[128];
        json_t *s = json_array_get(shards, i);
        snprintf(id, sizeof(id), "%zu", i);
        snprintf(lease, sizeof(lease), "demo-%zu", i);
        snprintf(selector, sizeof(selector),
                 "shardRange(object.metadata.uid, '%s', '%s')", starts[i], ends[i]);
        ck_assert_str_eq(str_of(s, "shard"), id);
        ck_assert_str_eq(str_of(s, "lease"), lease);
        ck_assert_str_eq(str_of(s, "leader"), leaders[i]);
        ck_assert(json_is_boolean(json_object_get(s, "is_leader")));
        ck_assert(json_is_true(json_object_get(s, "is_leader")) == (i == 0));
        ck_assert_int_eq(json_integer_value(json_object_get(s, "term")), terms[i]);
        json_t *range = json_object_get(s, "range");
        ck_assert_uint_eq(json_array_size(range), 2);
        ck_assert_str_eq(json_string_value(json_array_get(range, 0)), starts[i]);
        ck_assert_str_eq(json_string_value(json_array_get(range, 1)), ends[i]);
        ck_assert_str_eq(str_of(s, "selector"), selector);
        if (i < 2)
            ck_assert_str_eq(str_of(s, "renewed_at"), renewed_text);
        else
            ck_assert(json_is_null(json_object_get(s, "renewed_at")));
    }
    json_decref(o);
    ld_http_reply_clear(&r);

    /* Judged at the request: once shard 0's lead_until passes, nothing is
     * owned, with no new table. */
    ck_assert_int_eq(
        route("HEAD", "/shards", NULL, 0, g, &snap, t, NULL, now + 10000, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    o = parse_json(r.body);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "owned")), 0);
    ck_assert(json_is_false(
        json_object_get(json_array_get(json_object_get(o, "shards"), 0), "is_leader")));
    json_decref(o);
    ld_http_reply_clear(&r);
    ld_shardsnap_unref(t);
    ld_shardgroup_free(g);
}
END_TEST

/* 503 until the whole group has been observed; before the first publish
 * (no table) every shard is listed, free and unobserved. */
START_TEST(shards_unobserved)
{
    struct ld_shardgroup *g = new_group(NULL, 2);
    struct ld_snapshot snap;
    struct ld_http_reply r;
    int64_t now = 5000;
    base_snapshot(&snap, false);

    ck_assert_int_eq(route("GET", "/shards", NULL, 0, g, &snap, NULL, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 503);
    json_t *o = parse_json(r.body);
    ck_assert(json_is_false(json_object_get(o, "observed")));
    ck_assert_uint_eq(json_array_size(json_object_get(o, "members")), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "owned")), 0);
    json_t *shards = json_object_get(o, "shards");
    ck_assert_uint_eq(json_array_size(shards), 2);
    ck_assert_str_eq(str_of(json_array_get(shards, 1), "leader"), "");
    ck_assert_str_eq(str_of(json_array_get(shards, 1), "lease"), "demo-1");
    json_decref(o);
    ld_http_reply_clear(&r);

    ck_assert_int_eq(route("GET", "/readyz", NULL, 0, g, &snap, NULL, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 503);
    ld_http_reply_clear(&r);

    struct ld_shardsnap *t = three_shards(now, false);
    ck_assert_int_eq(route("GET", "/shards", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 503);
    ld_http_reply_clear(&r);
    ld_shardsnap_unref(t);

    /* /readyz follows the snapshot's observed (the whole group). */
    snap.observed = true;
    ck_assert_int_eq(route("GET", "/readyz", NULL, 0, g, &snap, NULL, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    ld_http_reply_clear(&r);
    ld_shardgroup_free(g);
}
END_TEST

/* Named shards: the order given, no range or selector, no /shard?key=. */
START_TEST(named_shards)
{
    static const char *const names[] = {"zeta", "alpha", "mid"};
    struct ld_shardgroup *g = new_group(names, 3);
    struct ld_snapshot snap;
    struct ld_http_reply r;
    int64_t now = 1000000;
    base_snapshot(&snap, true);
    struct ld_shardsnap *t = three_shards(now, true);

    ck_assert_int_eq(route("GET", "/shards", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    json_t *o = parse_json(r.body);
    json_t *shards = json_object_get(o, "shards");
    for (size_t i = 0; i < 3; i++) {
        char lease[32];
        json_t *s = json_array_get(shards, i);
        snprintf(lease, sizeof(lease), "demo-%s", names[i]);
        ck_assert_str_eq(str_of(s, "shard"), names[i]);
        ck_assert_str_eq(str_of(s, "lease"), lease);
        ck_assert_ptr_null(json_object_get(s, "range"));
        ck_assert_ptr_null(json_object_get(s, "selector"));
    }
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "owned"), 0)),
                     "zeta");
    json_decref(o);
    ld_http_reply_clear(&r);

    ck_assert_int_eq(route("GET", "/shards/alpha", NULL, 0, g, &snap, t, NULL, now, &r),
                     0);
    ck_assert_uint_eq(r.status, 503);
    o = parse_json(r.body);
    ck_assert_str_eq(str_of(o, "lease"), "ns/demo-alpha");
    ck_assert_str_eq(str_of(o, "shard"), "alpha");
    ck_assert_str_eq(str_of(o, "leader"), "other");
    json_decref(o);
    ld_http_reply_clear(&r);

    ck_assert_int_eq(route("GET", "/shard", "x", 1, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 400);
    o = parse_json(r.body);
    ck_assert(strstr(str_of(o, "error"), "named") != NULL);
    json_decref(o);
    ld_http_reply_clear(&r);
    ld_shardsnap_unref(t);
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(one_shard_body)
{
    struct ld_shardgroup *g = new_group(NULL, 3);
    struct ld_snapshot snap;
    struct ld_http_reply r;
    int64_t now = 1000000;
    base_snapshot(&snap, true);
    struct ld_shardsnap *t = three_shards(now, true);

    ck_assert_int_eq(route("GET", "/shards/0", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "application/json");
    json_t *o = parse_json(r.body);
    ck_assert_str_eq(str_of(o, "lease"), "ns/demo-0");
    ck_assert_str_eq(str_of(o, "identity"), "me");
    ck_assert_str_eq(str_of(o, "leader"), "me");
    ck_assert(json_is_true(json_object_get(o, "is_leader")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 3);
    ck_assert_str_eq(str_of(o, "renewed_at"), renewed_text);
    ck_assert(json_is_true(json_object_get(o, "observed")));
    ck_assert_str_eq(str_of(o, "shard"), "0");
    ck_assert_ptr_null(json_object_get(o, "key"));
    ck_assert_ptr_null(json_object_get(o, "hash"));
    json_decref(o);
    ld_http_reply_clear(&r);

    /* Another's: 503, same body shape. */
    ck_assert_int_eq(route("GET", "/shards/1", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 503);
    o = parse_json(r.body);
    ck_assert_str_eq(str_of(o, "leader"), "other");
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 1);
    json_decref(o);
    ld_http_reply_clear(&r);

    /* Free and never observed. */
    ck_assert_int_eq(route("GET", "/shards/2", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 503);
    o = parse_json(r.body);
    ck_assert_str_eq(str_of(o, "leader"), "");
    ck_assert(json_is_null(json_object_get(o, "renewed_at")));
    ck_assert(json_is_false(json_object_get(o, "observed")));
    json_decref(o);
    ld_http_reply_clear(&r);

    /* Ours no longer once its lead_until passes. */
    ck_assert_int_eq(
        route("GET", "/shards/0", NULL, 0, g, &snap, t, NULL, now + 10000, &r), 0);
    ck_assert_uint_eq(r.status, 503);
    o = parse_json(r.body);
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    json_decref(o);
    ld_http_reply_clear(&r);

    /* No such shard: 404 with a JSON error. */
    static const char *const unknown[] = {"/shards/3", "/shards/07", "/shards/",
                                          "/shards/0/x", "/shards/-1"};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        ck_assert_int_eq(route("GET", unknown[i], NULL, 0, g, &snap, t, NULL, now, &r),
                         0);
        ck_assert_msg(r.status == 404, "%s: %u", unknown[i], r.status);
        o = parse_json(r.body);
        ck_assert(json_is_string(json_object_get(o, "error")));
        json_decref(o);
        ld_http_reply_clear(&r);
    }
    ld_shardsnap_unref(t);
    ld_shardgroup_free(g);
}
END_TEST

/* FNV-1a 64 as the contract defines it: the published vectors, and the
 * shard of a key is the one whose range holds its hash. */
START_TEST(key_hash_and_shard)
{
    struct ld_shardgroup *g = new_group(NULL, 3);
    const struct ld_shardlayout *l = ld_shardgroup_layout(g);
    struct ld_snapshot snap;
    struct ld_http_reply r;
    struct ld_http_target target;
    int64_t now = 1000000;
    base_snapshot(&snap, true);
    struct ld_shardsnap *t = three_shards(now, true);

    ck_assert_uint_eq(ld_fnv1a64("", 0), UINT64_C(0xcbf29ce484222325));
    ck_assert_uint_eq(ld_fnv1a64("a", 1), UINT64_C(0xaf63dc4c8601ec8c));
    ck_assert_uint_eq(ld_fnv1a64("foobar", 6), UINT64_C(0x85944171f73967e8));

    static const struct {
        const char *key;
        size_t len;
        const char *hash;
    } keys[] = {
        {"a", 1, "0xaf63dc4c8601ec8c"},
        {"foobar", 6, "0x85944171f73967e8"},
        {"a b", 3, NULL},
        {"a\0b", 3, NULL}, /* a NUL inside is a byte like any other */
        {"\xc3\xa9", 2, NULL},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char hex[LD_SHARDRANGE_HEX_SIZE];
        uint64_t h = ld_fnv1a64(keys[i].key, keys[i].len);
        uint32_t want = ld_shardrange_find(h, 3);
        char id[8], lease[32];
        ld_shardrange_hex(h, hex);
        if (keys[i].hash)
            ck_assert_str_eq(hex, keys[i].hash);
        ck_assert_uint_eq(
            ld_http_shard_target(l, "/shard", keys[i].key, keys[i].len, &target), 200);
        ck_assert_uint_eq(target.shard, want);
        ck_assert_uint_eq(target.hash, h);

        ck_assert_int_eq(
            route("GET", "/shard", keys[i].key, keys[i].len, g, &snap, t, NULL, now, &r),
            0);
        ck_assert_uint_eq(r.status, want == 0 ? 200 : 503);
        json_t *o = parse_json(r.body);
        snprintf(id, sizeof(id), "%u", want);
        snprintf(lease, sizeof(lease), "ns/demo-%u", want);
        ck_assert_str_eq(str_of(o, "shard"), id);
        ck_assert_str_eq(str_of(o, "lease"), lease);
        ck_assert_str_eq(str_of(o, "hash"), hex);
        json_t *k = json_object_get(o, "key");
        ck_assert(json_is_string(k));
        ck_assert_uint_eq(json_string_length(k), keys[i].len);
        ck_assert_mem_eq(json_string_value(k), keys[i].key, keys[i].len);
        ck_assert(json_is_boolean(json_object_get(o, "is_leader")));
        json_decref(o);
        ld_http_reply_clear(&r);
    }

    /* Missing, empty or not UTF-8: 400 with a JSON error. */
    static const struct {
        const char *key;
        size_t len;
    } bad[] = {{NULL, 0}, {"", 0}, {"\xff", 1}, {"a\xc3", 2}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_uint_eq(
            ld_http_shard_target(l, "/shard", bad[i].key, bad[i].len, &target), 400);
        ck_assert_int_eq(
            route("GET", "/shard", bad[i].key, bad[i].len, g, &snap, t, NULL, now, &r),
            0);
        ck_assert_msg(r.status == 400, "bad key %zu: %u", i, r.status);
        json_t *o = parse_json(r.body);
        ck_assert(json_is_string(json_object_get(o, "error")));
        json_decref(o);
        ld_http_reply_clear(&r);
    }
    /* Not a shard path at all. */
    ck_assert_uint_eq(ld_http_shard_target(l, "/shards", NULL, 0, &target), 0);
    ck_assert_uint_eq(ld_http_shard_target(l, "/shards/2", NULL, 0, &target), 200);
    ck_assert_uint_eq(target.shard, 2);
    ck_assert(!target.by_key);
    ld_shardsnap_unref(t);
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(shard_mode_route_table)
{
    struct ld_shardgroup *g = new_group(NULL, 3);
    const struct ld_shardlayout *l = ld_shardgroup_layout(g);
    struct ld_snapshot snap;
    struct ld_http_reply r;
    int64_t now = 1000000;
    base_snapshot(&snap, true);
    snap.heartbeat_ms = now;
    struct ld_shardsnap *t = three_shards(now, true);

    /* The single-Lease routes are gone, naming where to look instead. */
    static const struct {
        const char *method, *path;
    } gone[] = {{"GET", "/leader"},
                {"HEAD", "/leader"},
                {"GET", "/"},
                {"POST", "/resign"},
                {"GET", "/resign"}};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
        ck_assert_int_eq(
            route(gone[i].method, gone[i].path, NULL, 0, g, &snap, t, NULL, now, &r), 0);
        ck_assert_msg(r.status == 404, "%s %s: %u", gone[i].method, gone[i].path,
                      r.status);
        ck_assert(!r.allow);
        json_t *o = parse_json(r.body);
        ck_assert(strstr(str_of(o, "error"), "/shards") != NULL);
        json_decref(o);
        ld_http_reply_clear(&r);
    }
    ck_assert_int_eq(route("GET", "/nope", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 404);
    ld_http_reply_clear(&r);

    static const char *const paths[] = {"/shards",  "/shards/0", "/shard", "/watch",
                                        "/metrics", "/healthz",  "/readyz"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        ck_assert_int_eq(route("DELETE", paths[i], NULL, 0, g, &snap, t, NULL, now, &r),
                         0);
        ck_assert_msg(r.status == 405, "DELETE %s: %u", paths[i], r.status);
        ck_assert(r.allow);
        ck_assert_ptr_null(r.allow_methods); /* "GET, HEAD" */
        ld_http_reply_clear(&r);
    }

    ck_assert_int_eq(route("GET", "/healthz", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    ck_assert_str_eq(r.body, "ok");
    ld_http_reply_clear(&r);
    snprintf(snap.health_error, sizeof(snap.health_error), "member lease lost");
    ck_assert_int_eq(route("GET", "/healthz", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 500);
    ck_assert_str_eq(r.body, "member lease lost");
    ld_http_reply_clear(&r);

    /* /watch without the server: the event a stream starts with. */
    ck_assert_int_eq(route("GET", "/watch", NULL, 0, g, &snap, t, NULL, now, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "text/event-stream");
    static const char head[] = "event: shards\ndata: ";
    ck_assert_int_eq(strncmp(r.body, head, strlen(head)), 0);
    ck_assert_uint_eq(r.len, strlen(r.body));
    ck_assert_str_eq(r.body + r.len - 2, "\n\n");
    char *json = strndup(r.body + strlen(head), r.len - strlen(head) - 2);
    json_t *o = parse_json(json);
    ck_assert_str_eq(str_of(o, "group"), "ns/demo");
    ck_assert_uint_eq(json_array_size(json_object_get(o, "shards")), 3);
    json_decref(o);
    free(json);
    ld_http_reply_clear(&r);

    size_t len = 0;
    char *ev = ld_http_render_shards_event(true, 42, l, &snap, t, now, &len);
    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(strncmp(ev, "id: 42\nevent: shards\ndata: {", 28), 0);
    ck_assert_uint_eq(len, strlen(ev));
    free(ev);
    ld_shardsnap_unref(t);
    ld_shardgroup_free(g);
}
END_TEST

/* Whether text has the line exactly. */
static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p += n) {
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return true;
    }
    return false;
}

static int count_prefix(const char *text, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, prefix, len) == 0)
            n++;
    }
    return n;
}

START_TEST(metrics_in_shard_mode)
{
    struct ld_shardgroup *g = new_group(NULL, 3);
    struct ld_snapshot snap;
    struct ld_metrics m;
    struct ld_http_reply r;
    int64_t now = 1000000;
    base_snapshot(&snap, true);
    ld_metrics_init(&m);
    struct ld_shardsnap *t = three_shards(now, true);

    ck_assert_int_eq(route("GET", "/metrics", NULL, 0, g, &snap, t, &m, now, &r), 0);
    ck_assert_uint_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    ck_assert(has_line(r.body, "leader_election_master_status{name=\"demo-0\"} 1"));
    ck_assert(has_line(r.body, "leader_election_master_status{name=\"demo-1\"} 0"));
    ck_assert(has_line(r.body, "leader_election_master_status{name=\"demo-2\"} 0"));
    ck_assert_int_eq(count_prefix(r.body, "leader_election_master_status{"), 3);
    ck_assert(!strstr(r.body, "leader_election_master_status{name=\"demo\"}"));
    ck_assert(has_line(r.body, "# TYPE leader_election_master_status gauge"));
    ck_assert_int_eq(count_prefix(r.body, "# TYPE leader_election_master_status "), 1);
    ck_assert(has_line(r.body, "# TYPE leaderd_shards_owned gauge"));
    ck_assert_int_eq(count_prefix(r.body, "# HELP leaderd_shards_owned "), 1);
    ck_assert(has_line(r.body, "leaderd_shards_owned 1"));
    ck_assert(has_line(r.body, "# TYPE leaderd_shard_members gauge"));
    ck_assert_int_eq(count_prefix(r.body, "# HELP leaderd_shard_members "), 1);
    ck_assert(has_line(r.body, "leaderd_shard_members 2"));
    ck_assert(strstr(r.body, "\nleaderd_build_info{") != NULL);
    /* One Lease's leadership and term mean nothing for a group. */
    ck_assert(!strstr(r.body, "\nleaderd_is_leader "));
    ck_assert(!strstr(r.body, "\nleaderd_term "));
    ck_assert(has_line(r.body, "leaderd_observed 1"));
    ld_http_reply_clear(&r);

    /* The last renewal is the latest of any shard's. */
    struct ld_shard_entry e[2] = {{.leader = "a", .last_renew_wall_us = 5000000},
                                  {.leader = "b", .last_renew_wall_us = 7250000}};
    struct ld_shardsnap *two = ld_shardsnap_new(true, 0, e, 2, NULL, 0);
    struct ld_shardgroup *g2 = new_group(NULL, 2);
    ck_assert_int_eq(route("GET", "/metrics", NULL, 0, g2, &snap, two, &m, now, &r), 0);
    ck_assert(has_line(r.body, "leaderd_last_renew_timestamp_seconds 7.250000"));
    ld_http_reply_clear(&r);
    ld_shardsnap_unref(two);
    ld_shardgroup_free(g2);

    /* Judged at render time; no table yet is all zeros. */
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(ld_metrics_render_shards(&m, &snap, ld_shardgroup_layout(g), t,
                                              now + 10000, &text, &len),
                     0);
    ck_assert(has_line(text, "leader_election_master_status{name=\"demo-0\"} 0"));
    ck_assert(has_line(text, "leaderd_shards_owned 0"));
    free(text);
    ck_assert_int_eq(ld_metrics_render_shards(&m, &snap, ld_shardgroup_layout(g), NULL,
                                              now, &text, &len),
                     0);
    ck_assert(has_line(text, "leaderd_shards_owned 0"));
    ck_assert(has_line(text, "leaderd_shard_members 0"));
    ck_assert_int_eq(count_prefix(text, "leader_election_master_status{"), 3);
    free(text);

    /* Single-Lease mode keeps its one series and has no shard metrics. */
    ck_assert_int_eq(ld_metrics_render(&m, &snap, now, &text, &len), 0);
    ck_assert(has_line(text, "leader_election_master_status{name=\"demo\"} 0"));
    ck_assert(!strstr(text, "leaderd_shards_owned"));
    ck_assert(!strstr(text, "leaderd_shard_members"));
    free(text);
    ld_shardsnap_unref(t);
    ld_metrics_destroy(&m);
    ld_shardgroup_free(g);
}
END_TEST

/* The largest group: 1024 named shards with the longest names still fit
 * LD_METRICS_MAX_TEXT, and /shards lists all of them. */
START_TEST(largest_group)
{
    static char names[LD_SHARDGROUP_MAX_SHARDS][64];
    const char *ptrs[LD_SHARDGROUP_MAX_SHARDS];
    struct ld_shard_entry e[LD_SHARDGROUP_MAX_SHARDS];
    static char leader[LD_LEASE_MAX_HOLDER + 1];
    int64_t now = 1000000;
    memset(leader, 'p', LD_LEASE_MAX_HOLDER);
    for (int i = 0; i < LD_SHARDGROUP_MAX_SHARDS; i++) {
        snprintf(names[i], sizeof(names[i]), "s%04d", i);
        memset(names[i] + 5, 'x', 58);
        names[i][63] = '\0';
        ptrs[i] = names[i];
        e[i] = entry(leader, i, i % 2 != 0);
    }
    struct ld_shardgroup *g = new_group(ptrs, LD_SHARDGROUP_MAX_SHARDS);
    const struct ld_shardlayout *l = ld_shardgroup_layout(g);
    struct ld_snapshot snap;
    struct ld_metrics m;
    char *text = NULL;
    size_t len = 0;
    base_snapshot(&snap, true);
    ld_metrics_init(&m);
    for (int i = 0; i < 40; i++) /* API series too */
        ld_metrics_observe_request(&m, "PUT", 200 + i, 0.01);
    struct ld_shardsnap *t = ld_shardsnap_new(
        true, now + 10000, e, LD_SHARDGROUP_MAX_SHARDS, (const char *const *)ptrs, 1);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(ld_metrics_render_shards(&m, &snap, l, t, now, &text, &len), 0);
    ck_assert_int_eq(count_prefix(text, "leader_election_master_status{"),
                     LD_SHARDGROUP_MAX_SHARDS);
    ck_assert(has_line(text, "leaderd_shards_owned 512"));
    ck_assert_uint_lt(len, LD_METRICS_MAX_TEXT);
    free(text);

    char *body = ld_http_render_shards(l, &snap, t, now);
    ck_assert_ptr_nonnull(body);
    json_t *o = parse_json(body);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "shards")),
                      LD_SHARDGROUP_MAX_SHARDS);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "owned")),
                      LD_SHARDGROUP_MAX_SHARDS / 2);
    json_decref(o);
    free(body);
    ld_shardsnap_unref(t);
    ld_metrics_destroy(&m);
    ld_shardgroup_free(g);
}
END_TEST

/* ---- the real server ---- */

static struct ld_state st;
static struct ld_metrics met;
static struct ld_shardgroup *grp;
static struct ld_http *srv;
static int port;

/* One request to the fixture's server; fails the test unless it completed. */
static void fetch(const char *method, const char *path, struct http_resp *r)
{
    http_fetch(port, method, path, r);
    ck_assert_msg(r->rc == CURLE_OK, "%s %s: %s", method ? method : "GET", path,
                  curl_easy_strerror(r->rc));
}

/* rig_stats_until on the fixture's server. */
static bool stats_until(bool (*pred)(const struct ld_http_stats *, long), long arg,
                        int64_t timeout_ms)
{
    return rig_stats_until(srv, pred, arg, timeout_ms);
}

static bool seq_past(const struct ld_http_stats *s, long n)
{
    return s->seq > (uint64_t)n;
}

static uint64_t seq_now(void)
{
    struct ld_http_stats stats;
    ld_http_get_stats(srv, &stats);
    return stats.seq;
}

/* Publishes three shards: each {leader, term, lead_for_ms} as entry()
 * makes them (ours when lead_for_ms is not 0), with members; every claim
 * lasts until the longest lead_for_ms from now, as the daemon's all last
 * as long as its member election's lead. No Check assertions. */
struct spec {
    const char *leader;
    int64_t term, lead_for_ms;
};

static void publish_shards(const struct spec sp[3], const char *const *members,
                           uint32_t n_members)
{
    struct ld_snapshot s;
    struct ld_shard_entry e[3];
    int64_t now = ld_mono_ms(), lead_for_ms = 0;
    ld_state_read(&st, &s);
    for (int i = 0; i < 3; i++) {
        e[i] = entry(sp[i].leader, sp[i].term, sp[i].lead_for_ms != 0);
        if (sp[i].lead_for_ms > lead_for_ms)
            lead_for_ms = sp[i].lead_for_ms;
    }
    s.observed = true;
    s.heartbeat_ms = now;
    ld_state_publish_shards(
        &st, &s, ld_shardsnap_new(true, now + lead_for_ms, e, 3, members, n_members));
}

static const char *const two_members[] = {"me", "other"};

static void setup(void)
{
    struct ld_errinfo err;
    ld_state_init(&st, "ns/demo", "me", STALE_MS);
    grp = new_group(NULL, 3);
    ld_state_set_layout(&st, ld_shardgroup_layout(grp));
    ld_metrics_init(&met);
    srv = ld_http_start_opts("127.0.0.1", 0, &st, &met, &shard_routes, &err);
    ck_assert_msg(srv != NULL, "start: %s", err.msg);
    port = ld_http_port(srv);
}

static void teardown(void)
{
    ld_http_stop(srv);
    srv = NULL;
    ld_metrics_destroy(&met);
    ld_state_destroy(&st);
    ld_shardgroup_free(grp);
    grp = NULL;
}

static struct http_resp *new_resp(void)
{
    struct http_resp *r = malloc(sizeof(*r));
    ck_assert_ptr_nonnull(r);
    return r;
}

START_TEST(server_routes)
{
    struct http_resp *r = new_resp();
    fetch(NULL, "/shards", r);
    ck_assert_int_eq(r->status, 503);
    ck_assert_str_eq(r->ctype, "application/json");
    json_t *o = parse_json(r->body);
    ck_assert(json_is_false(json_object_get(o, "observed")));
    ck_assert_uint_eq(json_array_size(json_object_get(o, "shards")), 3);
    json_decref(o);
    fetch(NULL, "/readyz", r);
    ck_assert_int_eq(r->status, 503);

    const struct spec sp[3] = {{"me", 3, 60000}, {"other", 1, 0}, {"", 0, 0}};
    publish_shards(sp, two_members, 2);
    fetch(NULL, "/shards", r);
    ck_assert_int_eq(r->status, 200);
    o = parse_json(r->body);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "owned"), 0)),
                     "0");
    json_decref(o);
    fetch("HEAD", "/shards", r);
    ck_assert_int_eq(r->status, 200);
    ck_assert_uint_eq(r->len, 0);
    fetch(NULL, "/readyz", r);
    ck_assert_int_eq(r->status, 200);
    fetch(NULL, "/healthz", r);
    ck_assert_int_eq(r->status, 200);
    fetch(NULL, "/shards/0", r);
    ck_assert_int_eq(r->status, 200);
    fetch(NULL, "/shards/1", r);
    ck_assert_int_eq(r->status, 503);
    fetch(NULL, "/shards/9", r);
    ck_assert_int_eq(r->status, 404);
    fetch(NULL, "/metrics", r);
    ck_assert_int_eq(r->status, 200);
    ck_assert(has_line(r->body, "leader_election_master_status{name=\"demo-0\"} 1"));
    ck_assert(has_line(r->body, "leaderd_shards_owned 1"));
    ck_assert(has_line(r->body, "leaderd_shard_members 2"));

    /* Gone in shard mode: 404 naming /shards; POST /resign from loopback
     * too (not the single-Lease 403 or 503). */
    static const struct {
        const char *method, *path;
    } gone[] = {
        {NULL, "/leader"}, {NULL, "/leader?wait=1s"}, {NULL, "/"}, {"POST", "/resign"}};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
        fetch(gone[i].method, gone[i].path, r);
        ck_assert_msg(r->status == 404, "%s: %ld", gone[i].path, r->status);
        o = parse_json(r->body);
        ck_assert(strstr(json_string_value(json_object_get(o, "error")), "/shards") !=
                  NULL);
        json_decref(o);
    }
    fetch("DELETE", "/shards", r);
    ck_assert_int_eq(r->status, 405);
    ck_assert_str_eq(r->allow, "GET, HEAD");
    fetch(NULL, "/shards/0?wait=1s&term=x", r);
    ck_assert_int_eq(r->status, 400);
    free(r);
}
END_TEST

/* The key is a form field as MHD decodes it: '+' is a space, percent
 * escapes are undone (%2B is a '+', %00 a NUL byte), the bytes hashed. */
START_TEST(server_key_decoding)
{
    struct http_resp *r = new_resp();
    const struct spec sp[3] = {{"me", 3, 60000}, {"me", 2, 60000}, {"me", 1, 60000}};
    publish_shards(sp, two_members, 2);
    static const struct {
        const char *query;
        const char *key;
        size_t len;
    } cases[] = {
        {"key=a", "a", 1},
        {"key=a+b", "a b", 3},
        {"key=a%20b", "a b", 3},
        {"key=a%2Bb", "a+b", 3},
        {"key=%C3%A9t%C3%A9", "\xc3\xa9t\xc3\xa9", 5},
        {"key=a%00b", "a\0b", 3},
        {"wait=0s&key=x%26y%3Dz", "x&y=z", 5},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[128], hex[LD_SHARDRANGE_HEX_SIZE];
        snprintf(path, sizeof(path), "/shard?%s", cases[i].query);
        fetch(NULL, path, r);
        ck_assert_msg(r->status == 200, "%s: %ld %s", path, r->status, r->body);
        json_t *o = parse_json(r->body);
        json_t *k = json_object_get(o, "key");
        ck_assert_msg(json_string_length(k) == cases[i].len &&
                          memcmp(json_string_value(k), cases[i].key, cases[i].len) == 0,
                      "%s: key %s", path, r->body);
        uint64_t h = ld_fnv1a64(cases[i].key, cases[i].len);
        ld_shardrange_hex(h, hex);
        ck_assert_str_eq(json_string_value(json_object_get(o, "hash")), hex);
        char id[8];
        snprintf(id, sizeof(id), "%u", ld_shardrange_find(h, 3));
        ck_assert_str_eq(json_string_value(json_object_get(o, "shard")), id);
        json_decref(o);
    }
    static const char *const bad[] = {
        "/shard",         "/shard?key=",   "/shard?key", "/shard?key=a&key=b",
        "/shard?key=%FF", "/shard?other=1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fetch(NULL, bad[i], r);
        ck_assert_msg(r->status == 400, "%s: %ld", bad[i], r->status);
        json_t *o = parse_json(r->body);
        ck_assert(json_is_string(json_object_get(o, "error")));
        json_decref(o);
    }
    free(r);
}
END_TEST

/* A poll on one shard is held while that shard is as the caller saw it,
 * publishes that change only other shards included, and answered within
 * a second of its own shard changing. */
START_TEST(server_shard_longpoll_held_until_its_shard_changes)
{
    struct spec sp[3] = {{"me", 3, 60000}, {"other", 1, 0}, {"", 0, 0}};
    publish_shards(sp, two_members, 2);
    struct http_get *a =
        http_get_start(port, "/shards/1?wait=30s&leader=other&term=1&is_leader=false");
    ck_assert_msg(stats_until(rig_held_is, 1, 5000), "the poll was not held");

    /* Shard 0 changes: an event is rendered (seq moves), the poll stays. */
    uint64_t seq = seq_now();
    sp[0].term = 4;
    publish_shards(sp, two_members, 2);
    ck_assert(stats_until(seq_past, (long)seq, 5000));
    ck_assert(stats_until(rig_held_is, 1, 0));

    int64_t changed_at = ld_mono_ms();
    sp[1].leader = "third";
    sp[1].term = 2;
    publish_shards(sp, two_members, 2);
    http_get_join(a);
    ck_assert_int_lt(ld_mono_ms() - changed_at, 1000);
    ck_assert_int_eq(a->r.status, 503);
    json_t *o = parse_json(a->r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "third");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(o, "shard")), "1");
    ck_assert_str_eq(json_string_value(json_object_get(o, "lease")), "ns/demo-1");
    json_decref(o);
    free(a);
    ck_assert(stats_until(rig_held_is, 0, 1000));

    /* One that differs already is answered at once. */
    int64_t t0 = ld_mono_ms();
    struct http_resp *r = new_resp();
    fetch(NULL, "/shards/1?wait=30s&leader=other", r);
    ck_assert_int_lt(rig_elapsed_ms(t0), 2000);
    ck_assert_int_eq(r->status, 503);
    free(r);
}
END_TEST

START_TEST(server_shard_longpoll_timeout_and_lapse)
{
    struct spec sp[3] = {{"me", 3, 700}, {"other", 1, 0}, {"", 0, 0}};
    publish_shards(sp, two_members, 2);
    struct ld_shardsnap *t = ld_state_read_shards(&st, NULL);
    int64_t lapse_at = t->claims_until_ms;
    ld_shardsnap_unref(t);

    /* Held on shard 0 until its leadership lapses by time alone. */
    struct http_get *lapse =
        http_get_start(port, "/shards/0?wait=30s&is_leader=true&leader=me");
    /* Timed out on shard 1 with its current state. */
    struct http_get *timeout = http_get_start(port, "/shards/1?wait=300ms&leader=other");
    http_get_join(timeout);
    ck_assert_int_eq(timeout->r.status, 503);
    ck_assert_msg(timeout->took_ms >= 290 && timeout->took_ms < 5000, "took %lld ms",
                  (long long)timeout->took_ms);
    json_t *o = parse_json(timeout->r.body);
    ck_assert_str_eq(json_string_value(json_object_get(o, "leader")), "other");
    json_decref(o);

    http_get_join(lapse);
    int64_t now = ld_mono_ms();
    ck_assert_int_eq(lapse->r.status, 503);
    ck_assert_int_ge(now, lapse_at);
    ck_assert_msg(now - lapse_at < 1000, "answered %lld ms after the lapse",
                  (long long)(now - lapse_at));
    o = parse_json(lapse->r.body);
    ck_assert(json_is_false(json_object_get(o, "is_leader")));
    json_decref(o);
    free(lapse);
    free(timeout);
}
END_TEST

/* /shard?key=K polls its key's shard and answers with key and hash. */
START_TEST(server_key_longpoll)
{
    uint64_t h = ld_fnv1a64("a b", 3);
    uint32_t s = ld_shardrange_find(h, 3);
    struct spec sp[3] = {{"other", 1, 0}, {"other", 1, 0}, {"other", 1, 0}};
    publish_shards(sp, two_members, 2);
    struct http_get *a =
        http_get_start(port, "/shard?key=a+b&wait=30s&leader=other&term=1");
    ck_assert_msg(stats_until(rig_held_is, 1, 5000), "the poll was not held");
    sp[s].leader = "me";
    sp[s].term = 2;
    sp[s].lead_for_ms = 60000;
    publish_shards(sp, two_members, 2);
    http_get_join(a);
    ck_assert_int_eq(a->r.status, 200);
    json_t *o = parse_json(a->r.body);
    char hex[LD_SHARDRANGE_HEX_SIZE];
    ld_shardrange_hex(h, hex);
    ck_assert_str_eq(json_string_value(json_object_get(o, "key")), "a b");
    ck_assert_str_eq(json_string_value(json_object_get(o, "hash")), hex);
    ck_assert(json_is_true(json_object_get(o, "is_leader")));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "term")), 2);
    json_decref(o);
    free(a);
}
END_TEST

/* The next event (heartbeat comments skipped): asserts it is a "shards"
 * event with an id and returns its data parsed (json_decref) and id. */
static json_t *expect_shards_event(struct http_sse *s, uint64_t *id)
{
    static char copy[sizeof(((struct http_sse *)0)->raw)];
    for (;;) {
        ck_assert_msg(http_sse_wait_blocks(s, s->next + 1, 5000),
                      "event %d did not arrive: %s", s->next, s->raw);
        pthread_mutex_lock(&s->mu);
        memcpy(copy, s->raw, s->len + 1);
        pthread_mutex_unlock(&s->mu);
        char *p = copy;
        for (int k = 0; k < s->next; k++)
            p = strstr(p, "\n\n") + 2;
        s->next++;
        *strstr(p, "\n\n") = '\0';
        if (p[0] == ':')
            continue;
        char *ev = strstr(p, "event: ");
        char *data = strstr(p, "data: ");
        ck_assert_msg(strncmp(p, "id: ", 4) == 0 && ev && data, "block: %s", p);
        ck_assert_int_eq(strncmp(ev, "event: shards\n", 14), 0);
        *id = strtoull(p + 4, NULL, 10);
        return parse_json(data + 6);
    }
}

static const char *owned0(json_t *o)
{
    return json_string_value(json_array_get(json_object_get(o, "owned"), 0));
}

START_TEST(server_watch_shard_events)
{
    uint64_t id, id2;
    struct spec sp[3] = {{"me", 3, 60000}, {"other", 1, 0}, {"", 0, 0}};
    publish_shards(sp, two_members, 2);
    struct http_sse *s = http_sse_start(port, NULL);
    json_t *o = expect_shards_event(s, &id);
    ck_assert_int_eq(s->head->status, 200);
    ck_assert_str_eq(s->head->ctype, "text/event-stream");
    ck_assert_str_eq(json_string_value(json_object_get(o, "group")), "ns/demo");
    ck_assert(json_is_true(json_object_get(o, "observed")));
    ck_assert_str_eq(owned0(o), "0");
    ck_assert_uint_eq(json_array_size(json_object_get(o, "members")), 2);
    json_decref(o);

    /* Nothing a reader sees changes (a renewal): no event; the next
     * change is the very next id. */
    publish_shards(sp, two_members, 2);
    int64_t changed_at = ld_mono_ms();
    sp[1].term = 2;
    publish_shards(sp, two_members, 2);
    o = expect_shards_event(s, &id2);
    ck_assert_int_lt(ld_mono_ms() - changed_at, 1000);
    ck_assert_uint_eq(id2, id + 1);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(o, "shards"), 1), "term")),
                     2);
    json_decref(o);

    /* Members alone. */
    publish_shards(sp, two_members, 1);
    o = expect_shards_event(s, &id);
    ck_assert_uint_eq(id, id2 + 1);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "members")), 1);
    json_decref(o);

    /* Leadership lapsing by time alone, with no publish: every claim at
     * once (they share the member election's deadline). */
    sp[0].lead_for_ms = 500;
    sp[2].leader = "me";
    sp[2].lead_for_ms = 500;
    publish_shards(sp, two_members, 1);
    struct ld_shardsnap *t = ld_state_read_shards(&st, NULL);
    int64_t lapse_at = t->claims_until_ms;
    ld_shardsnap_unref(t);
    o = expect_shards_event(s, &id2);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "owned")), 2);
    json_decref(o);
    o = expect_shards_event(s, &id);
    int64_t now = ld_mono_ms();
    ck_assert_uint_eq(id, id2 + 1);
    ck_assert_int_ge(now, lapse_at);
    ck_assert_msg(now - lapse_at < 1000, "%lld ms after the lapse",
                  (long long)(now - lapse_at));
    ck_assert_uint_eq(json_array_size(json_object_get(o, "owned")), 0);
    json_decref(o);
    http_sse_stop(s);

    /* Reconnecting with the last id: nothing at once, the next change
     * next (its id the one after). */
    char last[32];
    snprintf(last, sizeof(last), "%llu", (unsigned long long)id);
    s = http_sse_start(port, last);
    ck_assert(!http_sse_wait_blocks(s, 1, 300));
    sp[0].lead_for_ms = sp[2].lead_for_ms = 0;
    sp[1].leader = "me";
    publish_shards(sp, two_members, 1);
    o = expect_shards_event(s, &id2);
    ck_assert_uint_eq(id2, id + 1);
    json_decref(o);
    http_sse_stop(s);
}
END_TEST

/* Without streams changes only take ids (nothing is rendered for
 * nobody); a stream that opens then starts with the current state under
 * the current id, and a change after that is the next id. */
START_TEST(server_watch_after_changes_unwatched)
{
    uint64_t id;
    struct spec sp[3] = {{"me", 3, 60000}, {"other", 1, 0}, {"", 0, 0}};
    struct http_resp *r = new_resp();
    /* A long-poll makes the server take its first view now (the notifier
     * thread may not have yet): from then on every change takes an id. */
    fetch(NULL, "/shards/0?wait=1ms&leader=", r);
    free(r);
    for (int i = 0; i < 3; i++) {
        uint64_t seq = seq_now();
        sp[1].term++;
        publish_shards(sp, two_members, 2);
        ck_assert_msg(stats_until(seq_past, (long)seq, 5000), "change %d took no id", i);
    }
    struct http_sse *s = http_sse_start(port, NULL);
    json_t *o = expect_shards_event(s, &id);
    ck_assert_uint_eq(id, seq_now());
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(o, "shards"), 1), "term")),
                     4);
    json_decref(o);
    sp[1].leader = "third";
    publish_shards(sp, two_members, 2);
    uint64_t id2;
    o = expect_shards_event(s, &id2);
    ck_assert_uint_eq(id2, id + 1);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(o, "shards"), 1), "leader")),
                     "third");
    json_decref(o);
    http_sse_stop(s);
}
END_TEST

static atomic_int flipping;

/* Publishes tables as fast as it can: in table i every shard has term i,
 * shard 0 is ours in odd ones, and i % 2 + 1 members are live. */
static void *flipper(void *arg)
{
    (void)arg;
    for (int64_t i = 1; atomic_load(&flipping) && i < 1000000; i++) {
        const struct spec sp[3] = {
            {i % 2 ? "me" : "other", i, i % 2 ? 60000 : 0}, {"other", i, 0}, {"", i, 0}};
        publish_shards(sp, two_members, (uint32_t)(i % 2 + 1));
    }
    return NULL;
}

/* While tables are replaced as fast as the loop can, every answer shows
 * one table whole (shard references are taken and released across
 * threads: ASan and valgrind see any slip), and /shards/0's code matches
 * its body. Mismatches are counted and asserted once the publisher has
 * stopped. */
START_TEST(server_consistent_under_concurrent_publish)
{
    pthread_t th;
    int bad = 0, answered = 0;
    char first_bad[512] = "";
    struct http_resp *r = new_resp();
    const struct spec first[3] = {{"other", 0, 0}, {"other", 0, 0}, {"", 0, 0}};
    publish_shards(first, two_members, 1);
    atomic_store(&flipping, 1);
    ck_assert_int_eq(pthread_create(&th, NULL, flipper, NULL), 0);
    for (int i = 0; i < 100; i++) {
        http_fetch(port, NULL, i % 2 ? "/shards" : "/shards/0", r);
        json_t *o = r->rc == CURLE_OK ? json_loads(r->body, 0, NULL) : NULL;
        if (!o) {
            snprintf(first_bad, sizeof(first_bad), "no answer: %s",
                     curl_easy_strerror(r->rc));
            continue;
        }
        answered++;
        bool ok;
        if (i % 2) {
            json_t *shards = json_object_get(o, "shards");
            json_int_t term =
                json_integer_value(json_object_get(json_array_get(shards, 0), "term"));
            size_t owned = json_array_size(json_object_get(o, "owned"));
            size_t members = json_array_size(json_object_get(o, "members"));
            ok = r->status == 200 && json_array_size(shards) == 3 &&
                 owned == (size_t)(term % 2) && members == (size_t)(term % 2 + 1);
            for (size_t k = 1; k < 3; k++)
                ok = ok && json_integer_value(json_object_get(json_array_get(shards, k),
                                                              "term")) == term;
        } else {
            bool ours = json_is_true(json_object_get(o, "is_leader"));
            const char *who = json_string_value(json_object_get(o, "leader"));
            ok = r->status == (ours ? 200 : 503) && who &&
                 strcmp(who, ours ? "me" : "other") == 0;
        }
        if (!ok && bad++ == 0)
            snprintf(first_bad, sizeof(first_bad), "%ld %.400s", r->status, r->body);
        json_decref(o);
    }
    atomic_store(&flipping, 0);
    pthread_join(th, NULL);
    free(r);
    ck_assert_msg(answered == 100, "%d answers; %s", answered, first_bad);
    ck_assert_msg(bad == 0, "%d inconsistent answers, first: %s", bad, first_bad);
}
END_TEST

/* A table as large as a group gets, through the server: /shards renders
 * every shard, and /watch streams it whole. */
START_TEST(server_largest_table)
{
    static struct ld_shard_entry e[LD_SHARDGROUP_MAX_SHARDS];
    struct ld_snapshot s;
    int64_t now = ld_mono_ms();
    /* Another server on a group of the largest size. */
    ld_http_stop(srv);
    ld_state_destroy(&st);
    ld_shardgroup_free(grp);
    ld_state_init(&st, "ns/demo", "me", STALE_MS);
    grp = new_group(NULL, LD_SHARDGROUP_MAX_SHARDS);
    ld_state_set_layout(&st, ld_shardgroup_layout(grp));
    struct ld_errinfo err;
    srv = ld_http_start_opts("127.0.0.1", 0, &st, &met, &shard_routes, &err);
    ck_assert_msg(srv != NULL, "start: %s", err.msg);
    port = ld_http_port(srv);

    for (int i = 0; i < LD_SHARDGROUP_MAX_SHARDS; i++)
        e[i] = entry(i % 3 ? "other" : "me", i, i % 3 == 0);
    ld_state_read(&st, &s);
    s.observed = true;
    s.heartbeat_ms = now;
    ld_state_publish_shards(
        &st, &s,
        ld_shardsnap_new(true, now + 60000, e, LD_SHARDGROUP_MAX_SHARDS, two_members, 2));
    struct http_resp *r = new_resp();
    fetch(NULL, "/shards", r);
    ck_assert_int_eq(r->status, 200);
    json_t *o = parse_json(r->body);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "shards")),
                      LD_SHARDGROUP_MAX_SHARDS);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "owned")), 342);
    json_decref(o);
    fetch(NULL, "/shards/1022", r);
    ck_assert_int_eq(r->status, 503);
    fetch(NULL, "/metrics", r);
    ck_assert_int_eq(r->status, 200);
    ck_assert(has_line(r->body, "leaderd_shards_owned 342"));
    free(r);
}
END_TEST

static Suite *http_shards_suite(void)
{
    Suite *s = suite_create("http_shards");
    TCase *tp = tcase_create("pure");
    tcase_add_test(tp, shards_body_fields);
    tcase_add_test(tp, shards_unobserved);
    tcase_add_test(tp, named_shards);
    tcase_add_test(tp, one_shard_body);
    tcase_add_test(tp, key_hash_and_shard);
    tcase_add_test(tp, shard_mode_route_table);
    tcase_add_test(tp, metrics_in_shard_mode);
    tcase_add_test(tp, largest_group);
    tcase_set_timeout(tp, 60);
    suite_add_tcase(s, tp);

    TCase *ts = tcase_create("server");
    tcase_add_checked_fixture(ts, setup, teardown);
    tcase_add_test(ts, server_routes);
    tcase_add_test(ts, server_key_decoding);
    tcase_add_test(ts, server_shard_longpoll_held_until_its_shard_changes);
    tcase_add_test(ts, server_shard_longpoll_timeout_and_lapse);
    tcase_add_test(ts, server_key_longpoll);
    tcase_add_test(ts, server_watch_shard_events);
    tcase_add_test(ts, server_watch_after_changes_unwatched);
    tcase_add_test(ts, server_consistent_under_concurrent_publish);
    tcase_add_test(ts, server_largest_table);
    tcase_set_timeout(ts, 60);
    suite_add_tcase(s, ts);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = ld_test_run(http_shards_suite());
    curl_global_cleanup();
    return rc;
}
