/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_shardgroup: the shard group driver on a simulated clock. Names and
 * their validation, the create_metadata JSON, member liveness to the
 * millisecond (a member drops out exactly at its expiry; ours counts only
 * while our member election leads), agreement between replicas fed the
 * same observations, and random join, leave and crash sequences in a small
 * in-memory world of Leases that must end balanced within the contract's
 * time and with the contract's movement bounds.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election.h"
#include "hash.h"
#include "shardgroup.h"
#include "support/run_suite.h"

#define DURATION_MS 10000
#define RENEW_DEADLINE_MS 7000
#define RETRY_MS 1000

static struct ld_shardgroup *numbered_group(const char *name, const char *identity,
                                            uint32_t n, const char *pod_uid)
{
    struct ld_errinfo err;
    struct ld_shardgroup_config cfg = {
        .name = name,
        .identity = identity,
        .n_shards = n,
        .pod_uid = pod_uid,
        .lease_duration_ms = DURATION_MS,
    };
    struct ld_shardgroup *g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    return g;
}

/* A Lease of the group as the API returns it: holder, duration, a
 * renewTime that makes each renewal a new record, leaseTransitions, a
 * resourceVersion, and the object with the protocol annotation (or none:
 * an older version's Lease). */
static void lease_record(struct ld_lease *l, const char *name, const char *holder,
                         int32_t duration_s, int64_t renew_us, const char *uid,
                         bool annotated)
{
    ld_lease_init(l);
    l->name = strdup(name);
    l->namespace_ = strdup("ns");
    l->uid = uid ? strdup(uid) : NULL;
    l->spec.holder = strdup(holder);
    l->spec.duration_s = duration_s;
    l->spec.has_renew = true;
    l->spec.renew_us = renew_us;
    char rv[32];
    snprintf(rv, sizeof(rv), "%lld", (long long)renew_us);
    l->resource_version = strdup(rv);
    l->object = annotated ? json_pack("{s:{s:{s:s}}}", "metadata", "annotations",
                                      LD_SHARDGROUP_PROTOCOL, "2")
                          : json_pack("{s:{}}", "metadata");
    ck_assert(l->name && l->namespace_ && l->spec.holder && (!uid || l->uid) &&
              l->resource_version && l->object);
}

/* A member Lease as a watch event carries it. */
static void member_record(struct ld_lease *l, const char *group, const char *identity,
                          const char *holder, int32_t duration_s, int64_t renew_us,
                          const char *uid)
{
    char name[300];
    snprintf(name, sizeof(name), "%s-member-%s", group, identity);
    lease_record(l, name, holder, duration_s, renew_us, uid, true);
}

static void observe(struct ld_shardgroup *g, const char *identity, const char *holder,
                    int32_t duration_s, int64_t renew_us, int64_t now_ms)
{
    struct ld_lease l;
    member_record(&l, ld_shardgroup_name(g), identity, holder, duration_s, renew_us,
                  "uid-1");
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, now_ms), LD_OK);
    ld_lease_clear(&l);
}

/* A member first seen at now_ms renewing: the record before renew_us,
 * then its renewal, so that it counts as seen to change. */
static void renewing(struct ld_shardgroup *g, const char *identity, const char *holder,
                     int32_t duration_s, int64_t renew_us, int64_t now_ms)
{
    observe(g, identity, holder, duration_s, renew_us - 1, now_ms);
    observe(g, identity, holder, duration_s, renew_us, now_ms);
}

static void own_at(struct ld_shardgroup *g, bool leading, int64_t until_ms,
                   int32_t transitions, int64_t now_ms)
{
    struct ld_election_status st = {
        .leading = leading, .lead_until_ms = until_ms, .term = transitions};
    ld_shardgroup_observe_own(g, &st, now_ms);
}

static void own(struct ld_shardgroup *g, bool leading, int64_t until_ms)
{
    own_at(g, leading, until_ms, 0, 0);
}

/* Shard s's record naming holder, stored at resourceVersion rv. */
static void shard_record(struct ld_shardgroup *g, uint32_t s, const char *holder,
                         int64_t rv, int64_t now_ms)
{
    struct ld_lease l;
    lease_record(&l, ld_shardgroup_shard_lease(g, s), holder, 10, rv, "uid-s", true);
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, now_ms), LD_OK);
    ld_lease_clear(&l);
}

/* The live members at now joined by commas, for compact assertions. */
static const char *members_at(struct ld_shardgroup *g, int64_t now_ms)
{
    static char out[512];
    const char *const *list = NULL;
    uint32_t n = ld_shardgroup_members(g, now_ms, &list);
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < n; i++) {
        int w =
            snprintf(out + used, sizeof(out) - used, "%s%s", i > 0 ? "," : "", list[i]);
        ck_assert(w >= 0 && (size_t)w < sizeof(out) - used);
        used += (size_t)w;
    }
    return out;
}

/* ---- names and metadata ------------------------------------------------- */

START_TEST(names_of_a_numbered_group)
{
    struct ld_shardgroup *g = numbered_group("web", "pod-a", 3, NULL);
    uint32_t s = 99;

    ck_assert(ld_shardgroup_numbered(g));
    ck_assert_uint_eq(ld_shardgroup_count(g), 3);
    ck_assert_str_eq(ld_shardgroup_selector(g), "leaderd.io/shard-group=web");
    ck_assert_str_eq(ld_shardgroup_member_selector(g),
                     "leaderd.io/shard-group=web,!leaderd.io/shard");
    ck_assert_str_eq(ld_shardgroup_member_lease(g), "web-member-pod-a");
    ck_assert_str_eq(ld_shardgroup_shard_id(g, 2), "2");
    ck_assert_str_eq(ld_shardgroup_shard_lease(g, 0), "web-0");
    ck_assert_str_eq(ld_shardgroup_shard_lease(g, 2), "web-2");
    ck_assert_ptr_null(ld_shardgroup_shard_lease(g, 3));
    ck_assert(ld_shardgroup_find(g, "1", &s));
    ck_assert_uint_eq(s, 1);
    ck_assert(!ld_shardgroup_find(g, "01", &s));
    ck_assert(!ld_shardgroup_find(g, "3", &s));
    ck_assert(!ld_shardgroup_find(g, "", &s));

    char start[LD_SHARDRANGE_HEX_SIZE], end[LD_SHARDRANGE_HEX_SIZE];
    char sel[LD_SHARDRANGE_SELECTOR_SIZE];
    ck_assert(ld_shardgroup_range(g, 0, start, end, sel));
    ck_assert_str_eq(start, "0x0000000000000000");
    ck_assert_str_eq(end, "0x5555555555555555");
    ck_assert_str_eq(sel, "shardRange(object.metadata.uid, '0x0000000000000000', "
                          "'0x5555555555555555')");
    ck_assert(ld_shardgroup_range(g, 2, start, end, NULL));
    ck_assert_str_eq(end, "0x10000000000000000");
    ck_assert(!ld_shardgroup_range(g, 3, start, end, sel));

    /* FNV-1a64("a") = 0xaf63dc4c8601ec8c, in the last third of 2^64. */
    uint64_t h = 0;
    ck_assert(ld_shardgroup_shard_of_key(g, "a", 1, &s, &h));
    ck_assert_uint_eq(h, UINT64_C(0xaf63dc4c8601ec8c));
    ck_assert_uint_eq(s, 2);
    /* The empty key hashes to the offset basis, 0xcbf29ce484222325. */
    ck_assert(ld_shardgroup_shard_of_key(g, "", 0, &s, &h));
    ck_assert_uint_eq(h, UINT64_C(0xcbf29ce484222325));
    ck_assert_uint_eq(s, 2);
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(names_of_a_named_group)
{
    const char *names[] = {"eu", "us", "apac"};
    struct ld_errinfo err;
    struct ld_shardgroup_config cfg = {
        .name = "jobs.example",
        .identity = "pod-b",
        .names = names,
        .n_shards = 3,
        .lease_duration_ms = DURATION_MS,
    };
    struct ld_shardgroup *g = ld_shardgroup_new(&cfg, &err);
    uint32_t s = 99;
    char start[LD_SHARDRANGE_HEX_SIZE] = "untouched";

    ck_assert_msg(g != NULL, "%s", err.msg);
    ck_assert(!ld_shardgroup_numbered(g));
    ck_assert_str_eq(ld_shardgroup_shard_id(g, 2), "apac");
    ck_assert_str_eq(ld_shardgroup_shard_lease(g, 1), "jobs.example-us");
    ck_assert_str_eq(ld_shardgroup_member_lease(g), "jobs.example-member-pod-b");
    ck_assert(ld_shardgroup_find(g, "apac", &s));
    ck_assert_uint_eq(s, 2);
    ck_assert(!ld_shardgroup_find(g, "0", &s));
    ck_assert(!ld_shardgroup_range(g, 0, start, NULL, NULL));
    ck_assert_str_eq(start, "untouched");
    ck_assert(!ld_shardgroup_shard_of_key(g, "k", 1, &s, NULL));
    ld_shardgroup_free(g);
}
END_TEST

static json_t *parse(const char *text)
{
    json_error_t jerr;
    ck_assert_ptr_nonnull(text);
    json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    ck_assert_msg(json_is_object(v), "not a JSON object: %s (%s)", text, jerr.text);
    return v;
}

static const char *str_at(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_string(v), "%s is not a string", key);
    return json_string_value(v);
}

START_TEST(create_metadata_carries_labels_and_owner)
{
    struct ld_shardgroup *g = numbered_group("web", "pod-a", 2, "0b2f-44aa-9c1e");
    struct ld_errinfo err;

    json_t *m = parse(ld_shardgroup_member_metadata(g));
    json_t *labels = json_object_get(m, "labels");
    ck_assert_str_eq(str_at(labels, "leaderd.io/shard-group"), "web");
    ck_assert_ptr_null(json_object_get(labels, "leaderd.io/shard"));
    json_t *refs = json_object_get(m, "ownerReferences");
    ck_assert(json_is_array(refs));
    ck_assert_uint_eq(json_array_size(refs), 1);
    json_t *ref = json_array_get(refs, 0);
    ck_assert_str_eq(str_at(ref, "apiVersion"), "v1");
    ck_assert_str_eq(str_at(ref, "kind"), "Pod");
    ck_assert_str_eq(str_at(ref, "name"), "pod-a");
    ck_assert_str_eq(str_at(ref, "uid"), "0b2f-44aa-9c1e");
    ck_assert_str_eq(
        str_at(json_object_get(m, "annotations"), "leaderd.io/shard-protocol"), "2");
    json_decref(m);

    json_t *sm = parse(ld_shardgroup_shard_metadata(g, 1));
    labels = json_object_get(sm, "labels");
    ck_assert_str_eq(str_at(labels, "leaderd.io/shard-group"), "web");
    ck_assert_str_eq(str_at(labels, "leaderd.io/shard"), "1");
    ck_assert_ptr_null(json_object_get(sm, "ownerReferences"));
    ck_assert_str_eq(
        str_at(json_object_get(sm, "annotations"), "leaderd.io/shard-protocol"), "2");
    json_decref(sm);

    /* The election engine takes both as they are. */
    struct ld_election_config ec = {
        .namespace_ = "ns",
        .name = ld_shardgroup_member_lease(g),
        .identity = "pod-a",
        .lease_duration_ms = DURATION_MS,
        .renew_deadline_ms = RENEW_DEADLINE_MS,
        .retry_period_ms = RETRY_MS,
        .create_metadata = ld_shardgroup_member_metadata(g),
    };
    struct ld_election *e = ld_election_new(&ec, &err);
    ck_assert_msg(e != NULL, "%s", err.msg);
    ld_election_free(e);
    ec.name = ld_shardgroup_shard_lease(g, 0);
    ec.create_metadata = ld_shardgroup_shard_metadata(g, 0);
    e = ld_election_new(&ec, &err);
    ck_assert_msg(e != NULL, "%s", err.msg);
    ld_election_free(e);
    ld_shardgroup_free(g);

    /* Without a Pod uid there is no ownerReference to dangle. */
    g = numbered_group("web", "pod-a", 1, "");
    m = parse(ld_shardgroup_member_metadata(g));
    ck_assert_ptr_null(json_object_get(m, "ownerReferences"));
    json_decref(m);
    ld_shardgroup_free(g);
}
END_TEST

struct bad_case {
    const char *name;
    const char *identity;
    const char *const *names;
    uint32_t n;
    const char *pod_uid;
    const char *want; /* a substring of the message */
};

START_TEST(bad_names_are_refused_by_name)
{
    static const char *member_named[] = {"eu", "member-x"};
    static const char *twice[] = {"eu", "us", "eu"};
    static const char *upper[] = {"EU"};
    static const char *dotted[] = {"e.u"};
    static const char *empty[] = {""};
    static const char *ok_named[] = {"eu"};
    char long_label[70], long_identity[260], many_names[LD_SHARDGROUP_MAX_SHARDS + 1][16];
    const char *many[LD_SHARDGROUP_MAX_SHARDS + 1];

    memset(long_label, 'a', 64);
    long_label[64] = '\0';
    /* "web-member-" and 243 bytes: 254, one over the limit. */
    memset(long_identity, 'p', 243);
    long_identity[243] = '\0';
    for (int i = 0; i <= LD_SHARDGROUP_MAX_SHARDS; i++) {
        snprintf(many_names[i], sizeof(many_names[i]), "s%d", i);
        many[i] = many_names[i];
    }
    const struct bad_case cases[] = {
        {"Web", "pod-a", NULL, 3, NULL, "lease name Web is not a valid Lease name"},
        {"web_1", "pod-a", NULL, 3, NULL, "lease name web_1 "},
        {"", "pod-a", NULL, 3, NULL, "no lease name"},
        {"web", "", NULL, 3, NULL, "no identity"},
        {"web", "Pod_A", NULL, 3, NULL, "member Lease name web-member-Pod_A"},
        {"web", long_identity, NULL, 3, NULL, "member Lease name web-member-ppp"},
        {"web", "pod-a", NULL, 0, NULL, "0 shards, not 1 to 1024"},
        {"web", "pod-a", NULL, 1025, NULL, "1025 shards, not 1 to 1024"},
        {"web", "pod-a", many, 1025, NULL, "1025 shards, not 1 to 1024"},
        {"web", "pod-a", member_named, 2, NULL, "shard name member-x starts with"},
        {"web", "pod-a", twice, 3, NULL, "shard name eu is given twice"},
        {"web", "pod-a", upper, 1, NULL, "shard name EU is not a DNS-1123 label"},
        {"web", "pod-a", dotted, 1, NULL, "shard name e.u is not"},
        {"web", "pod-a", empty, 1, NULL, "shard name  is not"},
        {"web", "pod-a", ok_named, 1, "a b", "POD_UID a b is not"},
        {"web", "pod-a", ok_named, 1, "{\"x\":1}", "POD_UID {\"x\":1} is not"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        struct ld_errinfo err;
        struct ld_shardgroup_config cfg = {
            .name = c->name,
            .identity = c->identity,
            .names = c->names,
            .n_shards = c->n,
            .pod_uid = c->pod_uid,
            .lease_duration_ms = DURATION_MS,
        };
        struct ld_shardgroup *g = ld_shardgroup_new(&cfg, &err);
        ck_assert_msg(g == NULL, "case %zu accepted", i);
        ck_assert_int_eq(err.code, LD_EINVAL);
        ck_assert_msg(strstr(err.msg, c->want) != NULL, "case %zu: \"%s\" lacks \"%s\"",
                      i, err.msg, c->want);
    }

    /* The edges that are fine: 1024 numbered or named shards, a 63-byte
     * name, a 63-byte shard name. */
    struct ld_shardgroup *g = numbered_group("web", "pod-a", 1024, NULL);
    ck_assert_str_eq(ld_shardgroup_shard_lease(g, 1023), "web-1023");
    ld_shardgroup_free(g);
    long_label[63] = '\0';
    g = numbered_group(long_label, "pod-a", 1, NULL);
    ck_assert_ptr_nonnull(strstr(ld_shardgroup_selector(g), long_label));
    ld_shardgroup_free(g);
    struct ld_errinfo err;
    const char *one_long[] = {long_label};
    struct ld_shardgroup_config cfg = {
        .name = "web",
        .identity = "pod-a",
        .names = many,
        .n_shards = LD_SHARDGROUP_MAX_SHARDS,
        .lease_duration_ms = DURATION_MS,
    };
    g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    ld_shardgroup_free(g);
    cfg.names = one_long;
    cfg.n_shards = 1;
    g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    ld_shardgroup_free(g);
}
END_TEST

/* A group name too long for a label value still makes a group: its label
 * is a prefix and the name's hash, different for names that share the
 * prefix, and a valid label value (at most 63 bytes, ends alphanumeric). */
/* The owner is the Pod named by pod_name when given (its identity may be
 * another name). */
START_TEST(owner_reference_names_the_pod)
{
    struct ld_shardgroup_config cfg = {
        .name = "web",
        .identity = "worker-a",
        .n_shards = 2,
        .pod_uid = "0b2f",
        .pod_name = "web-7d9f-abcde",
        .lease_duration_ms = DURATION_MS,
    };
    struct ld_errinfo err;
    struct ld_shardgroup *g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    json_t *m = parse(ld_shardgroup_member_metadata(g));
    json_t *ref = json_array_get(json_object_get(m, "ownerReferences"), 0);
    ck_assert_str_eq(str_at(ref, "name"), "web-7d9f-abcde");
    ck_assert_str_eq(str_at(ref, "uid"), "0b2f");
    ck_assert_str_eq(ld_shardgroup_member_lease(g), "web-member-worker-a");
    json_decref(m);
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(long_group_names_are_labelled_by_prefix_and_hash)
{
    char a[120], b[120];
    memset(a, 'x', 100);
    memcpy(a + 43, "---", 3); /* the 46-byte prefix would end in "---" */
    a[100] = '\0';
    memcpy(b, a, sizeof(a));
    b[99] = 'y';
    struct ld_shardgroup *ga = numbered_group(a, "pod-a", 2, NULL);
    struct ld_shardgroup *gb = numbered_group(b, "pod-a", 2, NULL);
    const char *sa = ld_shardgroup_selector(ga), *sb = ld_shardgroup_selector(gb);
    const char *va = strchr(sa, '=') + 1;
    ck_assert_str_ne(sa, sb);
    ck_assert_uint_le(strlen(va), 63);
    ck_assert_uint_eq(strlen(strchr(sb, '=') + 1), strlen(va));
    ck_assert_int_eq(strncmp(va, a, 43), 0);
    ck_assert_int_eq(va[43], '-'); /* the prefix's trailing "---" dropped */
    char want[20];
    snprintf(want, sizeof(want), "-%016llx",
             (unsigned long long)ld_fnv1a64(a, strlen(a)));
    ck_assert_str_eq(va + strlen(va) - 17, want);
    /* The Lease metadata carries the same value, and the name stays whole. */
    ck_assert_ptr_nonnull(strstr(ld_shardgroup_shard_metadata(ga, 0), va));
    ck_assert_ptr_nonnull(strstr(ld_shardgroup_member_metadata(ga), va));
    ck_assert_str_eq(ld_shardgroup_name(ga), a);
    ld_shardgroup_free(ga);
    ld_shardgroup_free(gb);
}
END_TEST

/* ---- the member table --------------------------------------------------- */

START_TEST(a_member_drops_out_exactly_at_its_expiry)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    int64_t next = 0;

    renewing(g, "b", "b", 10, 1, 1000);
    ck_assert_str_eq(members_at(g, 1000), "b");
    ck_assert_int_eq(ld_shardgroup_assign(g, 1000, &next), LD_OK);
    ck_assert_int_eq(next, 11000);
    ck_assert_str_eq(members_at(g, 10999), "b");
    ck_assert_str_eq(members_at(g, 11000), "");

    /* A renewal (a new record) restarts the count; the same record seen
     * again does not. */
    observe(g, "b", "b", 10, 2, 5000);
    observe(g, "b", "b", 10, 2, 8000);
    ck_assert_str_eq(members_at(g, 14999), "b");
    ck_assert_str_eq(members_at(g, 15000), "");
    ck_assert_int_eq(ld_shardgroup_assign(g, 9000, &next), LD_OK);
    ck_assert_int_eq(next, 15000);

    /* The record's own duration counts, and without one the group's. */
    renewing(g, "c", "c", 3, 1, 9000);
    ck_assert_str_eq(members_at(g, 11999), "b,c");
    ck_assert_str_eq(members_at(g, 12000), "b");
    renewing(g, "d", "d", 0, 1, 9000);
    ck_assert_str_eq(members_at(g, 18999), "d");
    ck_assert_str_eq(members_at(g, 19000), "");

    /* Released (empty holder) or held by someone else: not live. */
    observe(g, "b", "", 1, 3, 9000);
    ck_assert_str_eq(members_at(g, 9000), "c,d");
    observe(g, "c", "x", 10, 2, 9000);
    ck_assert_str_eq(members_at(g, 9000), "d");
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(deleted_members_leave_and_stale_deletes_do_not)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    struct ld_lease l;

    renewing(g, "b", "b", 10, 1, 1000); /* uid-1 */
    member_record(&l, "web", "b", "b", 10, 1, "uid-0");
    ld_shardgroup_observe_member_deleted(g, &l); /* an older object */
    ld_lease_clear(&l);
    ck_assert_str_eq(members_at(g, 1000), "b");
    member_record(&l, "web", "b", "b", 10, 1, "uid-1");
    ld_shardgroup_observe_member_deleted(g, &l);
    ld_lease_clear(&l);
    ck_assert_str_eq(members_at(g, 1000), "");

    /* Shard Leases, other groups and a member- prefix alone are no member. */
    ld_lease_init(&l);
    l.name = strdup("web-3");
    l.spec.holder = strdup("web-3");
    ck_assert_int_eq(ld_shardgroup_observe_member(g, &l, 1000), LD_OK);
    free(l.name);
    l.name = strdup("web-member-");
    ck_assert_int_eq(ld_shardgroup_observe_member(g, &l, 1000), LD_OK);
    free(l.name);
    l.name = strdup("api-member-web-3");
    ck_assert_int_eq(ld_shardgroup_observe_member(g, &l, 1000), LD_OK);
    ld_lease_clear(&l);
    ck_assert_str_eq(members_at(g, 1000), "");
    ld_shardgroup_free(g);
}
END_TEST

/* A LIST answered after a watch DELETED of the same object (mode_shards.c lists
 * the group on joining and while the watch is down) carries the record as
 * it was before the deletion. A metadata.uid, once deleted, never comes
 * back, so that record is stale: it must not revive the member for a whole
 * lease duration (its shards would wait for a replica that has left). */
/* A member Lease left behind (a crash without an ownerReference) may be
 * deleted once it has been expired for ten lease durations; one without
 * the protocol annotation is never touched. */
START_TEST(long_expired_members_are_found)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    struct ld_lease l;

    observe(g, "b", "b", 10, 1, 1000); /* expires at 11000 */
    lease_record(&l, "web-member-old", "old", 10, 1, "u", false);
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, 0), LD_OK);
    ld_lease_clear(&l);
    ck_assert_ptr_null(ld_shardgroup_long_expired(g, 11000 + 10 * DURATION_MS - 1));
    const struct ld_lease *old = ld_shardgroup_long_expired(g, 11000 + 10 * DURATION_MS);
    ck_assert_ptr_nonnull(old);
    ck_assert_str_eq(old->name, "web-member-b");
    ck_assert_str_eq(old->uid, "uid-1");
    ck_assert_str_eq(old->resource_version, "1");
    /* A renewal seen meanwhile starts it over. */
    observe(g, "b", "b", 10, 2, 50000);
    ck_assert_ptr_null(ld_shardgroup_long_expired(g, 11000 + 10 * DURATION_MS));
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(a_deleted_member_is_not_revived_by_a_stale_list)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    struct ld_lease l;

    renewing(g, "b", "b", 10, 1, 1000); /* uid-1, as the LIST will show it */
    ck_assert_str_eq(members_at(g, 1000), "b");
    member_record(&l, "web", "b", "b", 10, 1, "uid-1");
    ld_shardgroup_observe_member_deleted(g, &l); /* b left gracefully */
    ck_assert_str_eq(members_at(g, 2000), "");
    /* The LIST, sent before the DELETE was applied, answers now. */
    ck_assert_int_eq(ld_shardgroup_observe_member(g, &l, 2050), LD_OK);
    ld_lease_clear(&l);
    ck_assert_str_eq(members_at(g, 2100), "");
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(our_own_member_counts_only_while_we_hold_it)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    int64_t next = 0;

    /* The watch showing our member Lease held by us proves nothing: a twin
     * or our previous incarnation may have written it. */
    observe(g, "a", "a", 10, 1, 1000);
    ck_assert_str_eq(members_at(g, 1000), "");
    ck_assert_int_eq(ld_shardgroup_assign(g, 1000, NULL), LD_OK);
    for (uint32_t s = 0; s < 4; s++)
        ck_assert(!ld_shardgroup_contend(g, s));

    own(g, true, 8000);
    renewing(g, "b", "b", 10, 1, 1000);
    ck_assert_str_eq(members_at(g, 7999), "a,b");
    ck_assert_str_eq(members_at(g, 8000), "b");
    ck_assert_int_eq(ld_shardgroup_assign(g, 2000, &next), LD_OK);
    ck_assert_int_eq(next, 8000);
    ck_assert(ld_shardgroup_contend(g, 0) && ld_shardgroup_contend(g, 1));
    ck_assert(!ld_shardgroup_contend(g, 2) && !ld_shardgroup_contend(g, 3));
    ck_assert_str_eq(ld_shardgroup_target(g, 3), "b");

    /* Past our lead_until we are out, and contend for nothing. */
    ck_assert_int_eq(ld_shardgroup_assign(g, 8000, &next), LD_OK);
    ck_assert_int_eq(next, 11000);
    for (uint32_t s = 0; s < 4; s++)
        ck_assert(!ld_shardgroup_contend(g, s));
    own(g, false, 20000);
    ck_assert_str_eq(members_at(g, 2000), "b");
    ld_shardgroup_free(g);
}
END_TEST

/* A write of shard s by g in term (as mode_shards sends it): the record
 * g would write, stored at resourceVersion rv, reported back. */
static void write_shard(struct ld_shardgroup *g, uint32_t s, bool take, uint64_t term,
                        int64_t rv, int64_t now_ms)
{
    struct ld_lease out;
    ld_lease_init(&out);
    if (take)
        ck_assert_int_eq(ld_shardgroup_take_lease(g, s, "ns", rv, 0, &out), LD_OK);
    else
        ck_assert_int_eq(ld_shardgroup_release_lease(g, s, rv, 0, &out), LD_OK);
    char *before = out.resource_version;
    char stored_rv[32];
    snprintf(stored_rv, sizeof(stored_rv), "%lld", (long long)rv);
    out.resource_version = strdup(stored_rv);
    ld_shardgroup_wrote(g, s, term, before, &out, now_ms);
    free(before);
    ld_lease_clear(&out);
}

START_TEST(a_claim_needs_a_write_in_the_current_member_term)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 2, NULL);
    uint32_t owned[2];

    own_at(g, true, 8000, 3, 0);
    uint64_t term = ld_shardgroup_term(g);
    ck_assert_uint_eq(term, 1);
    /* Shard 0 names us from before: not claimed until written anew. */
    shard_record(g, 0, "a", 100, 0);
    shard_record(g, 1, "", 101, 0);
    ck_assert(ld_shardgroup_observed(g));
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    ck_assert(!ld_shardgroup_owns(g, 0, 0));
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 0, false), LD_SHARD_TAKE);
    ck_assert_int_eq(ld_shardgroup_step(g, 1, 0, false), LD_SHARD_TAKE);
    write_shard(g, 0, true, term, 200, 10);
    write_shard(g, 1, true, term, 201, 10);
    ck_assert_uint_eq(ld_shardgroup_owned(g, 7999, owned), 2);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 10, false), LD_SHARD_NONE);
    /* Judged at the time asked: the member election's deadline ends it. */
    ck_assert(!ld_shardgroup_owns(g, 0, 8000));
    ck_assert_uint_eq(ld_shardgroup_owned(g, 8000, owned), 0);
    /* A renewal before the deadline keeps the term; one after it, or a
     * new leaseTransitions, starts a new one and voids the claims. */
    own_at(g, true, 9000, 3, 7000);
    ck_assert_uint_eq(ld_shardgroup_term(g), term);
    ck_assert(ld_shardgroup_owns(g, 1, 8500));
    own_at(g, true, 12000, 3, 9000);
    ck_assert_uint_eq(ld_shardgroup_term(g), term + 1);
    ck_assert(!ld_shardgroup_owns(g, 1, 9000));
    ck_assert_int_eq(ld_shardgroup_assign(g, 9000, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 1, 9000, false), LD_SHARD_TAKE);
    /* A write sent in the old term and answered in the new claims nothing. */
    write_shard(g, 1, true, term, 300, 9000);
    ck_assert(!ld_shardgroup_owns(g, 1, 9000));
    write_shard(g, 1, true, term + 1, 301, 9000);
    ck_assert(ld_shardgroup_owns(g, 1, 9000));
    own_at(g, true, 15000, 4, 10000);
    ck_assert(!ld_shardgroup_owns(g, 1, 10000));
    write_shard(g, 1, true, ld_shardgroup_term(g), 302, 10000);
    ck_assert(ld_shardgroup_owns(g, 1, 10000));
    /* Someone else's record of the shard ends the claim at once. */
    shard_record(g, 1, "x", 400, 10000);
    ck_assert(!ld_shardgroup_owns(g, 1, 10000));
    /* A stop (an event) ends every claim as well. */
    write_shard(g, 0, true, ld_shardgroup_term(g), 401, 10000);
    ck_assert(ld_shardgroup_owns(g, 0, 10000));
    ld_shardgroup_break(g);
    ck_assert(!ld_shardgroup_owns(g, 0, 10000));
    ld_shardgroup_free(g);
}
END_TEST

/* Shard s's record naming holder under incarnation (NULL: none). */
static void shard_record_of(struct ld_shardgroup *g, uint32_t s, const char *holder,
                            const char *incarnation, int64_t rv, int64_t now_ms)
{
    struct ld_lease l;
    lease_record(&l, ld_shardgroup_shard_lease(g, s), holder, 10, rv, "uid-s", true);
    ck_assert_int_eq(ld_lease_set_incarnation(&l, incarnation), LD_OK);
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, now_ms), LD_OK);
    ld_lease_clear(&l);
}

/* One identity, two processes: a shard record of our identity under
 * another incarnation (or none) is another process's. It is never claimed
 * as ours, it is taken over (not renewed: leaseTransitions + 1, a new
 * acquireTime) once our member election leads, and every take carries our
 * incarnation; a release drops it. */
START_TEST(a_shard_of_our_identity_under_another_incarnation_is_not_ours)
{
    struct ld_errinfo err;
    struct ld_shardgroup_config cfg = {
        .name = "web",
        .identity = "a",
        .incarnation = "new",
        .n_shards = 3,
        .lease_duration_ms = DURATION_MS,
    };
    struct ld_shardgroup *g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    struct ld_lease out;
    ld_lease_init(&out);

    shard_record_of(g, 0, "a", "old", 100, 0);
    shard_record_of(g, 1, "a", NULL, 101, 0);
    shard_record_of(g, 2, "a", "new", 102, 0);
    /* Not leading our member Lease: nothing to do, nothing claimed. */
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    for (uint32_t k = 0; k < 3; k++)
        ck_assert_int_eq(ld_shardgroup_step(g, k, 0, true), LD_SHARD_NONE);
    own_at(g, true, 8000, 1, 0);
    uint64_t term = ld_shardgroup_term(g);
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    for (uint32_t k = 0; k < 2; k++) {
        enum ld_shard_step st = ld_shardgroup_step(g, k, 0, false);
        ck_assert_msg(st == LD_SHARD_TAKE || st == LD_SHARD_READ, "shard %u: %d", k, st);
        ck_assert(!ld_shardgroup_owns(g, k, 0));
        ck_assert_int_eq(ld_shardgroup_take_lease(g, k, "ns", 500, 0, &out), LD_OK);
        ck_assert_int_eq(out.spec.transitions, 1); /* a change of holder */
        ck_assert_int_eq(out.spec.acquire_us, 500);
        ck_assert_str_eq(out.incarnation, "new");
    }
    /* Our own incarnation's record is renewed as ours. */
    ck_assert_int_eq(ld_shardgroup_step(g, 2, 0, false), LD_SHARD_TAKE);
    ck_assert_int_eq(ld_shardgroup_take_lease(g, 2, "ns", 500, 0, &out), LD_OK);
    ck_assert_int_eq(out.spec.transitions, 0);
    ck_assert_str_eq(out.incarnation, "new");
    char *text = ld_lease_encode(&out);
    ck_assert_ptr_nonnull(strstr(text, "\"leaderd.io/incarnation\":\"new\""));
    free(text);

    /* A write answered with another incarnation's record claims nothing. */
    struct ld_lease stored;
    lease_record(&stored, ld_shardgroup_shard_lease(g, 0), "a", 10, 200, "uid-s", true);
    ck_assert_int_eq(ld_lease_set_incarnation(&stored, "old"), LD_OK);
    ld_shardgroup_wrote(g, 0, term, "100", &stored, 10);
    ck_assert(!ld_shardgroup_owns(g, 0, 10));
    ck_assert_int_eq(ld_lease_set_incarnation(&stored, "new"), LD_OK);
    free(stored.resource_version);
    stored.resource_version = strdup("201");
    ld_shardgroup_wrote(g, 0, term, "200", &stored, 10);
    ck_assert(ld_shardgroup_owns(g, 0, 10));
    ld_lease_clear(&stored);

    ck_assert_int_eq(ld_shardgroup_release_lease(g, 0, 600, 0, &out), LD_OK);
    ck_assert_str_eq(out.spec.holder, "");
    ck_assert_ptr_null(out.incarnation);
    ld_lease_clear(&out);
    ld_shardgroup_free(g);
}
END_TEST

/* A record older than the one held (a list answered after the watch showed
 * a newer one, or events that came out of order) changes nothing; a
 * give-back ends when the shard turns out to be someone else's. */
START_TEST(older_records_are_ignored_and_give_backs_end_with_the_shard)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 2, NULL);
    own(g, true, 100000);
    shard_record(g, 0, "b", 500, 0);
    shard_record(g, 0, "a", 400, 0);
    ck_assert_str_eq(ld_shardgroup_record(g, 0)->spec.holder, "b");
    ck_assert_str_eq(ld_shardgroup_record(g, 0)->resource_version, "500");
    renewing(g, "b", "b", 10, 20, 0);
    observe(g, "b", "", 1, 10, 0); /* older than the held 20 */
    ck_assert_str_eq(members_at(g, 0), "a,b");
    /* A list keeps the newer too, and still counts the object as listed. */
    struct ld_lease items[2];
    lease_record(&items[0], "web-0", "a", 10, 450, "uid-s", true);
    member_record(&items[1], "web", "b", "b", 10, 15, "uid-1");
    ck_assert_int_eq(ld_shardgroup_observe_list(g, items, 2, NULL, 0), LD_OK);
    ld_lease_clear(&items[0]);
    ld_lease_clear(&items[1]);
    ck_assert_str_eq(ld_shardgroup_record(g, 0)->spec.holder, "b");
    ck_assert_str_eq(members_at(g, 0), "a,b");
    ck_assert_ptr_null(ld_shardgroup_record(g, 1)); /* not listed: absent */
    /* Shard 1 ours and being given back, then seen taken by b. */
    shard_record(g, 1, "a", 600, 0);
    ld_shardgroup_give_back(g, 1);
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 1, 0, false), LD_SHARD_RELEASE);
    shard_record(g, 1, "b", 700, 0);
    ck_assert_int_eq(ld_shardgroup_step(g, 1, 0, false), LD_SHARD_NONE);
    ld_shardgroup_free(g);
}
END_TEST

/* A member record that says when it joined (acquireTime), seen twice so
 * that it counts (ours: seen once, as the watch shows it). */
static void joined_member(struct ld_shardgroup *g, const char *identity,
                          int64_t acquire_us, int64_t now_ms)
{
    for (int k = 0; k < 2; k++) {
        struct ld_lease l;
        member_record(&l, ld_shardgroup_name(g), identity, identity, 60, 1 + k, "uid-1");
        l.spec.has_acquire = true;
        l.spec.acquire_us = acquire_us;
        ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, now_ms), LD_OK);
        ld_lease_clear(&l);
    }
}

static struct ld_shardgroup *delayed_group(const char *identity, uint32_t n,
                                           int64_t delay_ms)
{
    struct ld_errinfo err;
    struct ld_shardgroup_config cfg = {.name = "web",
                                       .identity = identity,
                                       .n_shards = n,
                                       .lease_duration_ms = DURATION_MS,
                                       .rebalance_delay_ms = delay_ms};
    struct ld_shardgroup *g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    return g;
}

/* The extra shard of N % M goes to the newest member by the acquireTime of
 * its member Lease, ours included once our own record has been seen. */
START_TEST(the_newest_member_gets_the_extra_shard)
{
    for (int ours_newer = 0; ours_newer < 2; ours_newer++) {
        struct ld_shardgroup *g = delayed_group("a", 3, 0);
        own(g, true, 100000);
        joined_member(g, "b", 50, 0);
        joined_member(g, "a", ours_newer ? 100 : 10, 0);
        ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
        uint32_t mine = 0;
        for (uint32_t s = 0; s < 3; s++)
            mine += ld_shardgroup_contend(g, s);
        ck_assert_uint_eq(mine, ours_newer ? 2 : 1);
        ld_shardgroup_free(g);
    }
}
END_TEST

/* A shard in use is given back to a rebalance only once the live members
 * have stayed the same for the delay; the delay starts over at each change,
 * the wake-up time says when it ends, and a shard named ours but not in
 * use goes back at once. */
START_TEST(rebalancing_waits_for_the_members_to_stay_the_same)
{
    struct ld_shardgroup *g = delayed_group("a", 4, 5000);
    int64_t next = 0;
    own(g, true, 1000000);
    joined_member(g, "a", 100, 0);
    for (uint32_t s = 0; s < 3; s++)
        write_shard(g, s, true, ld_shardgroup_term(g), 10 + s, 0);
    shard_record(g, 3, "a", 20, 0); /* named ours from before: not in use */
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 0, false), LD_SHARD_NONE);
    ck_assert_int_eq(ld_shardgroup_step(g, 3, 0, false), LD_SHARD_TAKE);

    joined_member(g, "b", 50, 1000); /* older than a: a keeps 0 and 1 */
    ck_assert_int_eq(ld_shardgroup_assign(g, 1000, &next), LD_OK);
    ck_assert_str_eq(members_at(g, 1000), "a,b");
    ck_assert(!ld_shardgroup_contend(g, 2) && !ld_shardgroup_contend(g, 3));
    ck_assert_int_eq(next, 6000);
    ck_assert_int_eq(ld_shardgroup_step(g, 2, 1000, false), LD_SHARD_NONE);
    ck_assert_int_eq(ld_shardgroup_step(g, 3, 1000, false), LD_SHARD_RELEASE);
    ck_assert_int_eq(ld_shardgroup_assign(g, 5999, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 2, 5999, false), LD_SHARD_NONE);
    ck_assert_int_eq(ld_shardgroup_assign(g, 6000, &next), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 2, 6000, false), LD_SHARD_RELEASE);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 6000, false), LD_SHARD_NONE);

    /* c joins at 7000: the count starts over. */
    joined_member(g, "c", 60, 7000);
    ck_assert_int_eq(ld_shardgroup_assign(g, 7000, &next), LD_OK);
    ck_assert_int_eq(next, 12000);
    ck_assert_int_eq(ld_shardgroup_assign(g, 11999, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 2, 11999, false), LD_SHARD_NONE);
    ck_assert_int_eq(ld_shardgroup_assign(g, 12000, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 2, 12000, false), LD_SHARD_RELEASE);
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(a_member_counts_once_seen_to_change_and_only_with_the_protocol)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    struct ld_lease l;

    own(g, true, 100000);
    observe(g, "b", "b", 10, 1, 1000);
    ck_assert_str_eq(members_at(g, 1000), "a");
    observe(g, "b", "b", 10, 1, 2000); /* the same record: no news */
    ck_assert_str_eq(members_at(g, 2000), "a");
    observe(g, "b", "b", 10, 2, 3000);
    ck_assert_str_eq(members_at(g, 3000), "a,b");
    /* Without the annotation: neither live, nor ever evicted. */
    lease_record(&l, "web-member-old", "old", 10, 1, "u", false);
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, 3000), LD_OK);
    ld_lease_clear(&l);
    lease_record(&l, "web-member-old", "old", 10, 2, "u", false);
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, 3000), LD_OK);
    ld_lease_clear(&l);
    ck_assert(ld_shardgroup_incompatible(g, "old"));
    ck_assert(!ld_shardgroup_incompatible(g, "b"));
    ck_assert_str_eq(members_at(g, 3000), "a,b");
    shard_record(g, 3, "old", 50, 3000);
    ck_assert_int_eq(ld_shardgroup_assign(g, 3000, NULL), LD_OK);
    ck_assert_str_eq(ld_shardgroup_target(g, 3), "b");
    ld_shardgroup_free(g);
}
END_TEST

/* A list of the group showing the shard records as the group holds them
 * now, b's member Lease emptied at resourceVersion member_rv, and nothing
 * else: one consistent snapshot. */
static void relist(struct ld_shardgroup *g, int64_t member_rv, int64_t now_ms)
{
    struct ld_lease items[17];
    size_t n = 0;
    for (uint32_t s = 0; s < ld_shardgroup_count(g) && n < 16; s++) {
        const struct ld_lease *rec = ld_shardgroup_record(g, s);
        if (!rec)
            continue;
        ld_lease_init(&items[n]);
        ck_assert_int_eq(ld_lease_copy(&items[n++], rec), LD_OK);
    }
    member_record(&items[n], ld_shardgroup_name(g), "b", "", 1, member_rv, "uid-1");
    char at[24];
    snprintf(at, sizeof(at), "%lld", (long long)member_rv); /* as an eviction */
    json_object_set_new(
        json_object_get(json_object_get(items[n++].object, "metadata"), "annotations"),
        LD_SHARDGROUP_EVICTED_AT, json_string(at));
    ck_assert_int_eq(ld_shardgroup_observe_list(g, items, n, NULL, now_ms), LD_OK);
    for (size_t i = 0; i < n; i++)
        ld_lease_clear(&items[i]);
}

/* The takeover rules, step by step, as one replica sees them. */
START_TEST(shards_are_taken_only_on_the_rules)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    int64_t next = 0;

    own(g, true, 1000000);
    renewing(g, "b", "b", 10, 2, 0);
    /* b holds 0, 1, 2 and 3: a's quota is 2, its targets the two b gives
     * back (above b's quota, lowest kept first). */
    for (uint32_t s = 0; s < 4; s++)
        shard_record(g, s, "b", 10 + s, 0);
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, &next), LD_OK);
    ck_assert_int_eq(next, 10000); /* b's record expires then */
    ck_assert_str_eq(ld_shardgroup_target(g, 2), "a");
    ck_assert_str_eq(ld_shardgroup_target(g, 0), "b");
    /* b is live: a waits for b to give back. */
    ck_assert_int_eq(ld_shardgroup_step(g, 2, 9999, false), LD_SHARD_NONE);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 9999, false), LD_SHARD_NONE);
    /* b gave 2 back: free, taken at once. */
    shard_record(g, 2, "", 20, 5000);
    ck_assert_int_eq(ld_shardgroup_assign(g, 5000, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 2, 5000, false), LD_SHARD_TAKE);
    /* b's record unchanged for its duration: evict it, not the shard. */
    ck_assert_int_eq(ld_shardgroup_assign(g, 10000, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 3, 10000, false), LD_SHARD_EVICT);
    struct ld_lease ev;
    ld_lease_init(&ev);
    ck_assert_int_eq(ld_shardgroup_evict_lease(g, 3, 77, &ev), LD_OK);
    ck_assert_str_eq(ev.name, "web-member-b");
    ck_assert_str_eq(ev.spec.holder, "");
    ck_assert_int_eq(ev.spec.duration_s, 1);
    ck_assert_str_eq(ev.resource_version, "2");
    char *text = ld_lease_encode(&ev);
    ck_assert_ptr_nonnull(strstr(text, "\"leaderd.io/evicted-by\":\"a\""));
    ck_assert_ptr_nonnull(strstr(text, "\"leaderd.io/shard-protocol\":\"2\""));
    free(text);
    /* The eviction's answer: b's member Lease names nobody. Its shards are
     * taken, but only on a fresh list of the group. */
    free(ev.resource_version);
    ev.resource_version = strdup("3");
    ld_shardgroup_evicted(g, "2", &ev, 10001);
    ld_lease_clear(&ev);
    ck_assert_int_eq(ld_shardgroup_assign(g, 10001, NULL), LD_OK);
    ck_assert_str_eq(members_at(g, 10001), "a");
    for (uint32_t s = 0; s < 4; s++) {
        if (s == 2)
            continue;
        ck_assert_int_eq(ld_shardgroup_step(g, s, 10001, false), LD_SHARD_READ);
        /* Not on records the watch showed, even right after a list: the
         * shard's record must be the list's own. */
        ck_assert_int_eq(ld_shardgroup_step(g, s, 10001, true), LD_SHARD_READ);
    }
    relist(g, 3, 10001);
    ck_assert_int_eq(ld_shardgroup_assign(g, 10001, NULL), LD_OK);
    for (uint32_t s = 0; s < 4; s++) {
        if (s == 2)
            continue;
        ck_assert_int_eq(ld_shardgroup_step(g, s, 10001, true), LD_SHARD_TAKE);
    }
    /* A member Lease that is gone proves nothing until a lease duration
     * after a list first showed the shard naming the absent holder: seen
     * on the watch, the count waits for a list (one snapshot). */
    shard_record(g, 0, "c", 30, 10001);
    ck_assert_int_eq(ld_shardgroup_assign(g, 10001, &next), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 10001, false), LD_SHARD_READ);
    relist(g, 3, 10001);
    ck_assert_int_eq(ld_shardgroup_assign(g, 10001, &next), LD_OK);
    ck_assert_int_eq(next, 20001);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 20000, true), LD_SHARD_NONE);
    ck_assert_int_eq(ld_shardgroup_assign(g, 20001, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 20001, false), LD_SHARD_READ);
    relist(g, 3, 20001);
    ck_assert_int_eq(ld_shardgroup_assign(g, 20001, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 20001, true), LD_SHARD_TAKE);
    /* Nothing is written while our own member election does not lead. */
    own_at(g, false, 0, 0, 20001);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 20001, true), LD_SHARD_NONE);
    ld_shardgroup_free(g);
}
END_TEST

/* A holder whose member Lease was gone for a lease duration comes back and
 * rewrites its shard; the watch shows both just before the answer of a list
 * whose snapshot is older (the shard's old record, no member record). The
 * list drops the member again, and the shard's newer record is kept. Two
 * rules keep a takeover off the holder's own new record (two owners): the
 * new record starts the absence count over, and a takeover needs the
 * shard's record to be the list's own, so a list whose snapshot is older
 * still, answered a lease duration later, takes nothing either. */
START_TEST(a_takeover_needs_the_shard_record_of_the_list_that_shows_the_absence)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 1, NULL);
    struct ld_lease items[1], back;

    own(g, true, 1000000);
    shard_record(g, 0, "r", 10, 0);
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_assign(g, 10000, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 10000, false), LD_SHARD_READ);
    /* r is back: its member Lease, then its rewrite of the shard. */
    member_record(&back, "web", "r", "r", 10, 50, "uid-r");
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &back, 10001), LD_OK);
    ld_lease_clear(&back);
    shard_record(g, 0, "r", 60, 10001);
    /* The list, answered now, was read before both. */
    lease_record(&items[0], "web-0", "r", 10, 10, "uid-s", true);
    ck_assert_int_eq(ld_shardgroup_observe_list(g, items, 1, NULL, 10002), LD_OK);
    ck_assert_str_eq(ld_shardgroup_record(g, 0)->resource_version, "60");
    ck_assert_int_eq(ld_shardgroup_assign(g, 10002, NULL), LD_OK);
    /* Takes nothing; the view is not one snapshot, so it asks for one. */
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 10002, true), LD_SHARD_READ);
    /* A lease duration later, another list from before r's return. */
    ck_assert_int_eq(ld_shardgroup_assign(g, 20002, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 20002, false), LD_SHARD_READ);
    ck_assert_int_eq(ld_shardgroup_observe_list(g, items, 1, NULL, 20002), LD_OK);
    ld_lease_clear(&items[0]);
    ck_assert_int_eq(ld_shardgroup_assign(g, 20002, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 20002, true), LD_SHARD_READ);
    /* The next list holds r's member Lease: r is a member, nothing to take. */
    lease_record(&items[0], "web-0", "r", 10, 60, "uid-s", true);
    struct ld_lease both[2] = {items[0]};
    member_record(&both[1], "web", "r", "r", 10, 50, "uid-r");
    ck_assert_int_eq(ld_shardgroup_observe_list(g, both, 2, NULL, 20003), LD_OK);
    ld_lease_clear(&both[0]);
    ld_lease_clear(&both[1]);
    ck_assert_int_eq(ld_shardgroup_assign(g, 20003, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 20003, true), LD_SHARD_NONE);
    ld_shardgroup_free(g);
}
END_TEST

static bool marked_new(const struct ld_lease *l)
{
    char *text = ld_lease_encode(l);
    bool marked = strstr(text, "\"" LD_SHARDGROUP_NEW_OBJECT "\":\"true\"") != NULL;
    free(text);
    return marked;
}

/* Rule O9: a Lease we create may replace one deleted under a holder whose
 * view still shows it (its watch lags), and who claims it until that view
 * is a lease duration old. So a claim written on an object this replica
 * has known for less than the outside wait counts only from then on, and
 * the record says so (marked new); a replica that has known the object
 * that long writes it unmarked, and a claim on an unmarked record counts
 * at once (before, the create's claim counted at once: sim seed 57). */
START_TEST(a_claim_on_a_new_object_counts_after_the_outside_wait)
{
    struct ld_errinfo err;
    struct ld_shardgroup_config cfg = {.name = "web",
                                       .identity = "a",
                                       .n_shards = 1,
                                       .lease_duration_ms = DURATION_MS,
                                       .outside_wait_ms = DURATION_MS + 2000};
    struct ld_shardgroup *g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    const int64_t wait = DURATION_MS + 2000;
    struct ld_lease out, stored;
    ld_lease_init(&out);
    ld_lease_init(&stored);
    own(g, true, 10 * wait);
    ld_shardgroup_confirm(g, 0);
    ck_assert_int_eq(ld_shardgroup_observe_list(g, NULL, 0, "1", 0), LD_OK);
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 0, true), LD_SHARD_TAKE);
    ck_assert_int_eq(ld_shardgroup_take_lease(g, 0, "ns", 500, 0, &out), LD_OK);
    ck_assert_ptr_null(out.resource_version); /* a create */
    ck_assert(marked_new(&out));
    ck_assert_int_eq(ld_lease_copy(&stored, &out), LD_OK);
    stored.uid = strdup("uid-new");
    stored.resource_version = strdup("7");
    ld_shardgroup_wrote(g, 0, ld_shardgroup_term(g), NULL, &stored, 100);
    ck_assert(!ld_shardgroup_claimed(g, 0, 100));
    ck_assert(!ld_shardgroup_owns(g, 0, 100 + wait - 1));
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 100, false),
                     LD_SHARD_NONE);      /* no re-take */
    ld_shardgroup_confirm(g, 100 + wait); /* a view that new, for rule O1 */
    ck_assert(ld_shardgroup_owns(g, 0, 100 + wait));
    /* Known that long now: its release is written unmarked. */
    ck_assert_int_eq(ld_shardgroup_release_lease(g, 0, 600, 100 + wait, &out), LD_OK);
    ck_assert(!marked_new(&out));
    ck_assert_int_eq(ld_shardgroup_release_lease(g, 0, 600, 100 + wait - 1, &out), LD_OK);
    ck_assert(marked_new(&out));
    ld_lease_clear(&out);
    ld_lease_clear(&stored);
    ld_shardgroup_free(g);
}
END_TEST

/* Member identity's record as its member election writes it: joined at
 * acquire_us, running shard set set (NULL: an older version, none). */
static void member_with_set(struct ld_shardgroup *g, const char *identity,
                            int64_t acquire_us, const char *set, int64_t renew_us)
{
    struct ld_lease l;
    char ann[128];
    member_record(&l, ld_shardgroup_name(g), identity, identity, 10, renew_us, "uid-m");
    l.spec.has_acquire = true;
    l.spec.acquire_us = acquire_us;
    snprintf(ann, sizeof(ann), "{\"" LD_SHARDGROUP_SHARD_SET "\":\"%s\"}",
             set ? set : "");
    if (set)
        ck_assert_int_eq(ld_lease_set_annotations(&l, ann), LD_OK);
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, 0), LD_OK);
    ld_lease_clear(&l);
}

/* Member identity's record reporting the shards it cannot write. */
static void member_reporting(struct ld_shardgroup *g, const char *identity,
                             const char *unwritable, int64_t renew_us)
{
    struct ld_lease l;
    char ann[128];
    member_record(&l, ld_shardgroup_name(g), identity, identity, 10, renew_us, "uid-r");
    snprintf(ann, sizeof(ann), "{\"" LD_SHARDGROUP_UNWRITABLE "\":\"%s\"}", unwritable);
    ck_assert_int_eq(ld_lease_set_annotations(&l, ann), LD_OK);
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, 0), LD_OK);
    ld_lease_clear(&l);
}

static const char *target_of(const struct ld_shardgroup *g, uint32_t s)
{
    const char *t = ld_shardgroup_target(g, s);
    return t ? t : "(nobody)";
}

/* A shard a live member reports it cannot write goes to a live member that
 * can (the one with the fewest shards), stays with a holder that can, and
 * goes to nobody (skipped) when no live member can; the others are
 * assigned as usual, every replica alike since the reports are in the
 * member Leases. */
START_TEST(reported_unwritable_shards_go_to_a_member_that_can_write_them)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    own(g, true, 1000000);
    member_reporting(g, "b", "web-x,0,1", 10); /* an ID of no shard is ignored */
    member_reporting(g, "b", "0,1", 11);
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    ck_assert_str_eq(target_of(g, 0), "a");
    ck_assert_str_eq(target_of(g, 1), "a");
    ck_assert(!ld_shardgroup_skipped(g, 0));
    /* Shards 2 and 3 go one each, as the assignment function has it. */
    ck_assert_str_ne(target_of(g, 2), target_of(g, 3));

    /* We cannot write shard 0 either: nobody is given it. */
    ck_assert(ld_shardgroup_set_unwritable(g, 0, true));
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    ck_assert_str_eq(target_of(g, 0), "(nobody)");
    ck_assert(ld_shardgroup_skipped(g, 0));
    ck_assert_str_eq(target_of(g, 1), "a");

    /* A holder that can write a reported shard keeps it. */
    shard_record(g, 0, "c", 50, 0);
    member_reporting(g, "c", "", 20);
    member_reporting(g, "c", "", 21);
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    ck_assert_str_eq(target_of(g, 0), "c");
    ck_assert(!ld_shardgroup_skipped(g, 0));
    ld_shardgroup_free(g);
}
END_TEST

/* Every member Lease says its replica's shard set; a member that joined
 * before us with another set is a conflict (we refuse to join), one that
 * joined after us is not ours to judge (it refuses), and one that says
 * nothing (an older version) is not judged. */
START_TEST(an_earlier_member_of_another_shard_set_is_a_conflict)
{
    struct ld_shardgroup *g = numbered_group("web", "b", 4, NULL);
    char theirs[64] = "";
    ck_assert_str_eq(ld_shardgroup_shard_set(g), "numbered/4");
    ck_assert_str_eq(
        ld_shardgroup_member_annotations(g),
        "{\"leaderd.io/shard-set\":\"numbered/4\",\"leaderd.io/unwritable\":\"\"}");
    ck_assert(ld_shardgroup_set_unwritable(g, 2, true));
    ck_assert(!ld_shardgroup_set_unwritable(g, 2, true)); /* no change */
    ck_assert(ld_shardgroup_set_unwritable(g, 0, true));
    ck_assert_str_eq(
        ld_shardgroup_member_annotations(g),
        "{\"leaderd.io/shard-set\":\"numbered/4\",\"leaderd.io/unwritable\":\"0,2\"}");
    ck_assert(ld_shardgroup_set_unwritable(g, 0, false));
    ck_assert(ld_shardgroup_set_unwritable(g, 2, false));
    ck_assert(!ld_shardgroup_set_unwritable(g, 9, true)); /* out of range */
    own(g, true, 1000000);
    member_with_set(g, "b", 2000, "numbered/4", 50); /* our own record */
    member_with_set(g, "a", 1000, "numbered/8", 10);
    ck_assert_ptr_null(ld_shardgroup_set_conflict(g, 0, theirs, sizeof(theirs)));
    member_with_set(g, "a", 1000, "numbered/8", 11); /* now live: seen to renew */
    ck_assert_str_eq(ld_shardgroup_set_conflict(g, 0, theirs, sizeof(theirs)), "a");
    ck_assert_str_eq(theirs, "numbered/8");
    member_with_set(g, "a", 1000, "numbered/4", 12);
    ck_assert_ptr_null(ld_shardgroup_set_conflict(g, 0, theirs, sizeof(theirs)));
    member_with_set(g, "a", 1000, NULL, 13);
    ck_assert_ptr_null(ld_shardgroup_set_conflict(g, 0, theirs, sizeof(theirs)));
    member_with_set(g, "c", 3000, "numbered/8", 20);
    member_with_set(g, "c", 3000, "numbered/8", 21);
    ck_assert_ptr_null(ld_shardgroup_set_conflict(g, 0, theirs, sizeof(theirs)));
    ld_shardgroup_free(g);

    /* Named shards: their count and their names in order. */
    struct ld_errinfo err;
    const char *names[] = {"x", "y"};
    struct ld_shardgroup_config cfg = {.name = "web",
                                       .identity = "b",
                                       .names = names,
                                       .n_shards = 2,
                                       .lease_duration_ms = DURATION_MS};
    g = ld_shardgroup_new(&cfg, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    char want[64];
    snprintf(want, sizeof(want), "named/2/%016llx",
             (unsigned long long)ld_fnv1a64("x,y,", 4));
    ck_assert_str_eq(ld_shardgroup_shard_set(g), want);
    ld_shardgroup_free(g);
}
END_TEST

/* A list answered late, its snapshot taken before a shard Lease was made
 * anew and a member renewed (both seen on the watch meanwhile), leaves the
 * newer records in the view: no event would show the shard again, as
 * shard Leases are written only when their owner changes (before, the
 * shard looked absent to its own holder for good, and the group never
 * settled: seed 90 of the hostile simulation). A list whose snapshot is
 * newer than the records decides. */
START_TEST(a_list_older_than_a_record_leaves_the_record)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 2, NULL);
    struct ld_lease m;
    const char *const *live = NULL;
    own(g, true, 1000000);
    /* Labelled as the group's writes label it, so lists show it. */
    lease_record(&m, ld_shardgroup_shard_lease(g, 0), "a", 10, 70, "uid-s", true);
    ck_assert_int_eq(json_object_set_new(json_object_get(m.object, "metadata"), "labels",
                                         json_pack("{s:s}", LD_SHARDGROUP_LABEL, "web")),
                     0);
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &m, 1000), LD_OK);
    ld_lease_clear(&m);
    for (int rv = 79; rv <= 80; rv++) { /* live once seen to renew */
        member_record(&m, "web", "r", "r", 10, rv, "uid-r");
        ck_assert_int_eq(ld_shardgroup_observe_lease(g, &m, 1000), LD_OK);
        ld_lease_clear(&m);
    }
    ck_assert_uint_eq(ld_shardgroup_members(g, 1000, &live), 2);
    ck_assert_int_eq(ld_shardgroup_observe_list(g, NULL, 0, "65", 1001), LD_OK);
    ck_assert_ptr_nonnull(ld_shardgroup_record(g, 0));
    ck_assert_str_eq(ld_shardgroup_record(g, 0)->resource_version, "70");
    ck_assert_uint_eq(ld_shardgroup_members(g, 1001, &live), 2);
    ck_assert_int_eq(ld_shardgroup_observe_list(g, NULL, 0, "81", 1002), LD_OK);
    ck_assert_ptr_null(ld_shardgroup_record(g, 0));
    ck_assert_uint_eq(ld_shardgroup_members(g, 1002, &live), 1);
    ld_shardgroup_free(g);
}
END_TEST

/* Issue #28, interleaving 3: an absence counted on a view that was never
 * true at one instant. r's member Lease is deleted (d1) and made anew; r
 * rewrites its shard, which the watch shows. A slow list from between d1
 * and r's return is answered after that: the view keeps the shard's newer
 * record and drops r's member, a pairing that was never stored. r's new
 * member Lease is then really deleted (d2) just after r's last renewal,
 * while this replica's watch lags; r leads on that renewal for its renew
 * deadline. A fresh list after d2 shows the shard's record and r absent:
 * a count started on the mixed view would take the shard while r still
 * claims it. The count must start on one snapshot, so the take comes a
 * lease duration after the list that first showed both. */
START_TEST(an_absence_counts_only_from_one_snapshot)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 1, NULL);
    struct ld_lease items[2], l;

    own(g, true, 1000000);
    lease_record(&items[0], "web-0", "r", 10, 100, "uid-s", true);
    member_record(&items[1], "web", "r", "r", 10, 90, "uid-r1");
    ck_assert_int_eq(ld_shardgroup_observe_list(g, items, 2, NULL, 0), LD_OK);
    ld_lease_clear(&items[1]);
    ck_assert_int_eq(ld_shardgroup_assign(g, 0, NULL), LD_OK);
    /* d1 at 1000, seen on the watch; r's return and rewrite at 2000. */
    member_record(&l, "web", "r", "r", 10, 90, "uid-r1");
    ld_shardgroup_observe_deleted(g, &l, 0);
    ld_lease_clear(&l);
    ck_assert_int_eq(ld_shardgroup_assign(g, 1000, NULL), LD_OK);
    member_record(&l, "web", "r", "r", 10, 200, "uid-r2");
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &l, 2000), LD_OK);
    ld_lease_clear(&l);
    shard_record(g, 0, "r", 210, 2000);
    ck_assert_int_eq(ld_shardgroup_assign(g, 2000, NULL), LD_OK);
    /* The slow list (snapshot between d1 and 2000), answered at 3000. */
    ck_assert_int_eq(ld_shardgroup_observe_list(g, items, 1, NULL, 3000), LD_OK);
    ld_lease_clear(&items[0]);
    ck_assert_str_eq(ld_shardgroup_record(g, 0)->resource_version, "210");
    ck_assert_int_eq(ld_shardgroup_assign(g, 3000, NULL), LD_OK);
    /* r renews at 11900 (leads until 11900 + its renew deadline), its
     * member Lease is deleted at 12000; this replica's watch lags, so the
     * DELETED of uid-r2 is the first it hears of r since 3000. */
    int64_t r_leads_until = 11900 + RENEW_DEADLINE_MS;
    member_record(&l, "web", "r", "r", 10, 200, "uid-r2");
    ld_shardgroup_observe_deleted(g, &l, 0);
    ld_lease_clear(&l);
    int64_t took = -1;
    for (int64_t t = 13000; t <= 40000 && took < 0; t += RETRY_MS) {
        ck_assert_int_eq(ld_shardgroup_assign(g, t, NULL), LD_OK);
        if (ld_shardgroup_step(g, 0, t, false) != LD_SHARD_READ)
            continue;
        /* The list it asks for: the shard at 210, no member Lease of r. */
        lease_record(&items[0], "web-0", "r", 10, 210, "uid-s", true);
        ck_assert_int_eq(ld_shardgroup_observe_list(g, items, 1, NULL, t), LD_OK);
        ld_lease_clear(&items[0]);
        ck_assert_int_eq(ld_shardgroup_assign(g, t, NULL), LD_OK);
        if (ld_shardgroup_step(g, 0, t, true) == LD_SHARD_TAKE)
            took = t;
    }
    ck_assert_msg(took >= r_leads_until,
                  "taken at %lld while r led until %lld (two owners)", (long long)took,
                  (long long)r_leads_until);
    ck_assert_int_le(took, 13000 + DURATION_MS + 2 * RETRY_MS);
    ld_shardgroup_free(g);
}
END_TEST

/* Found by the hostile simulation: a member Lease emptied by hand
 * (kubectl edit of holderIdentity) names nobody like an eviction, but its
 * member may lead on its last renewal for its renew deadline. Only an
 * eviction's record (LD_SHARDGROUP_EVICTED_AT matching its renewTime) lets
 * the shards go at once; one emptied by hand counts like an absent member
 * Lease: a lease duration from the list that first showed it. */
START_TEST(a_member_lease_emptied_by_hand_proves_nothing_at_once)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 1, NULL);
    struct ld_lease items[2];

    own(g, true, 1000000);
    for (int round = 0; round < 2; round++) {
        int64_t at = round == 0 ? 1000 : 1000 + DURATION_MS;
        lease_record(&items[0], "web-0", "r", 10, 100, "uid-s", true);
        member_record(&items[1], "web", "r", "", 10, 200, "uid-r");
        ck_assert_int_eq(ld_shardgroup_observe_list(g, items, 2, NULL, at), LD_OK);
        ld_lease_clear(&items[0]);
        ld_lease_clear(&items[1]);
        ck_assert_int_eq(ld_shardgroup_assign(g, at, NULL), LD_OK);
        ck_assert_int_eq(ld_shardgroup_step(g, 0, at, true),
                         round == 0 ? LD_SHARD_NONE : LD_SHARD_TAKE);
    }
    /* The same record as an eviction wrote it: taken at once. */
    ld_shardgroup_free(g);
    g = numbered_group("web", "a", 1, NULL);
    own(g, true, 1000000);
    lease_record(&items[0], "web-0", "r", 10, 100, "uid-s", true);
    member_record(&items[1], "web", "r", "", 10, 200, "uid-r");
    json_object_set_new(
        json_object_get(json_object_get(items[1].object, "metadata"), "annotations"),
        LD_SHARDGROUP_EVICTED_AT, json_string("200"));
    ck_assert_int_eq(ld_shardgroup_observe_list(g, items, 2, NULL, 1000), LD_OK);
    ld_lease_clear(&items[0]);
    ld_lease_clear(&items[1]);
    ck_assert_int_eq(ld_shardgroup_assign(g, 1000, NULL), LD_OK);
    ck_assert_int_eq(ld_shardgroup_step(g, 0, 1000, true), LD_SHARD_TAKE);
    ld_shardgroup_free(g);
}
END_TEST

/* A member Lease first seen (on joining, say) may be all that is left of a
 * replica that died: holder set, renewTime recent, nobody writing it any
 * more. It counts live only once a later observation shows it changed.
 * Until then the assignment gives its shards to the live members, and they
 * take them over on the eviction path once the record has stood unchanged
 * for its lease duration since it was first seen, as for any silent
 * member. Seeing the same record again (a relist) proves nothing either. */
START_TEST(a_member_record_never_seen_to_change_is_evicted_for_its_shards)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    struct ld_lease items[5];
    int64_t next = 0;

    own(g, true, 1000000);
    /* The join's list: b's record (renewed a moment ago by its renewTime)
     * and every shard held by b. */
    for (int round = 0; round < 2; round++) {
        int64_t at = round == 0 ? 5000 : 9000; /* the same snapshot, relisted */
        member_record(&items[0], "web", "b", "b", 10, 4999000, "uid-b");
        for (uint32_t s = 0; s < 4; s++)
            lease_record(&items[1 + s], ld_shardgroup_shard_lease(g, s), "b", 10, 100 + s,
                         "uid-s", true);
        ck_assert_int_eq(ld_shardgroup_observe_list(g, items, 5, NULL, at), LD_OK);
        for (int i = 0; i < 5; i++)
            ld_lease_clear(&items[i]);
        ck_assert_str_eq(members_at(g, at), "a");
    }
    ck_assert(!ld_shardgroup_incompatible(g, "b"));
    /* Not live: every shard is assigned to a, none left to b; the next
     * change is b's expiry, a lease duration after the first sight. */
    ck_assert_int_eq(ld_shardgroup_assign(g, 9000, &next), LD_OK);
    ck_assert_int_eq(next, 5000 + DURATION_MS);
    for (uint32_t s = 0; s < 4; s++) {
        ck_assert_str_eq(ld_shardgroup_target(g, s), "a");
        ck_assert(ld_shardgroup_contend(g, s));
        ck_assert_int_eq(ld_shardgroup_step(g, s, 5000 + DURATION_MS - 1, true),
                         LD_SHARD_NONE);
    }
    /* A lease duration after the first sight: evict b, then take. */
    ck_assert_int_eq(ld_shardgroup_assign(g, 5000 + DURATION_MS, NULL), LD_OK);
    for (uint32_t s = 0; s < 4; s++)
        ck_assert_int_eq(ld_shardgroup_step(g, s, 5000 + DURATION_MS, false),
                         LD_SHARD_EVICT);
    struct ld_lease ev;
    ld_lease_init(&ev);
    ck_assert_int_eq(ld_shardgroup_evict_lease(g, 0, 77, &ev), LD_OK);
    ck_assert_str_eq(ev.name, "web-member-b");
    ck_assert_str_eq(ev.spec.holder, "");
    ck_assert_str_eq(ev.resource_version, "4999000");
    free(ev.resource_version);
    ev.resource_version = strdup("4999001");
    ld_shardgroup_evicted(g, "4999000", &ev, 5000 + DURATION_MS);
    ld_lease_clear(&ev);
    ck_assert_int_eq(ld_shardgroup_assign(g, 5000 + DURATION_MS, NULL), LD_OK);
    for (uint32_t s = 0; s < 4; s++)
        ck_assert_int_eq(ld_shardgroup_step(g, s, 5000 + DURATION_MS, true),
                         LD_SHARD_TAKE);
    ld_shardgroup_free(g);

    /* The same start, but the next observation shows b renewed: b is a
     * live member from then on, keeps its quota, and nothing of it is
     * evicted at the old expiry (its record changed since). */
    g = numbered_group("web", "a", 4, NULL);
    own(g, true, 1000000);
    observe(g, "b", "b", 10, 4999000, 5000);
    for (uint32_t s = 0; s < 4; s++)
        shard_record(g, s, "b", 100 + s, 5000);
    ck_assert_str_eq(members_at(g, 5000), "a");
    observe(g, "b", "b", 10, 5999000, 6000);
    ck_assert_str_eq(members_at(g, 6000), "a,b");
    ck_assert_int_eq(ld_shardgroup_assign(g, 5000 + DURATION_MS, &next), LD_OK);
    ck_assert_int_eq(next, 6000 + DURATION_MS);
    uint32_t to_b = 0;
    for (uint32_t s = 0; s < 4; s++) {
        to_b += strcmp(ld_shardgroup_target(g, s), "b") == 0;
        ck_assert_int_eq(ld_shardgroup_step(g, s, 5000 + DURATION_MS, true),
                         LD_SHARD_NONE);
    }
    ck_assert_uint_eq(to_b, 2);
    ld_shardgroup_free(g);
}
END_TEST

START_TEST(writes_are_compare_and_swap_with_the_contract_fields)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 2, NULL);
    struct ld_lease out;
    ld_lease_init(&out);

    /* Absent: a create with the labels and the annotation. */
    ck_assert_int_eq(ld_shardgroup_take_lease(g, 0, "ns", 5, 0, &out), LD_OK);
    ck_assert_ptr_null(out.resource_version);
    ck_assert_str_eq(out.name, "web-0");
    ck_assert_str_eq(out.namespace_, "ns");
    ck_assert_str_eq(out.spec.holder, "a");
    ck_assert_int_eq(out.spec.duration_s, DURATION_MS / 1000);
    ck_assert_int_eq(out.spec.acquire_us, 5);
    ck_assert_int_eq(out.spec.renew_us, 5);
    char *text = ld_lease_encode(&out);
    ck_assert_ptr_nonnull(strstr(text, "\"leaderd.io/shard-group\":\"web\""));
    ck_assert_ptr_nonnull(strstr(text, "\"leaderd.io/shard\":\"0\""));
    ck_assert_ptr_nonnull(strstr(text, "\"leaderd.io/shard-protocol\":\"2\""));
    free(text);
    /* Held by b, unlabelled (made by someone else): an update on its
     * resourceVersion, one transition more, labelled now. */
    struct ld_lease b;
    lease_record(&b, "web-1", "b", 10, 40, "uid-b", false);
    b.spec.transitions = 6;
    b.spec.has_acquire = true;
    b.spec.acquire_us = 1;
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &b, 0), LD_OK);
    ld_lease_clear(&b);
    ck_assert_int_eq(ld_shardgroup_take_lease(g, 1, "ns", 50, 0, &out), LD_OK);
    ck_assert_str_eq(out.resource_version, "40");
    ck_assert_str_eq(out.spec.holder, "a");
    ck_assert_int_eq(out.spec.transitions, 7);
    ck_assert_int_eq(out.spec.acquire_us, 50);
    text = ld_lease_encode(&out);
    ck_assert_ptr_nonnull(strstr(text, "\"leaderd.io/shard\":\"1\""));
    ck_assert_ptr_nonnull(strstr(text, "\"leaderd.io/shard-protocol\":\"2\""));
    free(text);
    /* Ours already: the same transitions and acquireTime. */
    lease_record(&b, "web-1", "a", 10, 41, "uid-b", true);
    b.spec.transitions = 7;
    b.spec.has_acquire = true;
    b.spec.acquire_us = 50;
    ck_assert_int_eq(ld_shardgroup_observe_lease(g, &b, 0), LD_OK);
    ld_lease_clear(&b);
    ck_assert_int_eq(ld_shardgroup_take_lease(g, 1, "ns", 60, 0, &out), LD_OK);
    ck_assert_int_eq(out.spec.transitions, 7);
    ck_assert_int_eq(out.spec.acquire_us, 50);
    ck_assert_int_eq(out.spec.renew_us, 60);
    /* The release: no holder, one second, the same transitions. */
    ck_assert_int_eq(ld_shardgroup_release_lease(g, 1, 70, 0, &out), LD_OK);
    ck_assert_str_eq(out.resource_version, "41");
    ck_assert_str_eq(out.spec.holder, "");
    ck_assert_int_eq(out.spec.duration_s, 1);
    ck_assert_int_eq(out.spec.transitions, 7);
    ck_assert_int_eq(out.spec.renew_us, 70);
    ck_assert_int_eq(ld_shardgroup_release_lease(g, 0, 70, 0, &out), LD_EINVAL);
    ld_lease_clear(&out);
    ld_shardgroup_free(g);
}
END_TEST

/* ---- several replicas --------------------------------------------------- */

START_TEST(replicas_fed_the_same_observations_agree)
{
    const char *ids[] = {"pod-c", "pod-a", "pod-b"};
    struct ld_shardgroup *g[3];
    const uint32_t n = 10;

    for (int r = 0; r < 3; r++) {
        g[r] = numbered_group("web", ids[r], n, NULL);
        own(g[r], true, 7000);
        for (int o = 0; o < 3; o++)
            if (o != r)
                renewing(g[r], ids[o], ids[o], 10, 1, 0);
        /* pod-c holds everything from before the others joined. */
        for (uint32_t s = 0; s < n; s++)
            shard_record(g[r], s, "pod-c", 10 + s, 0);
        ck_assert_int_eq(ld_shardgroup_assign(g[r], 100, NULL), LD_OK);
        ck_assert_str_eq(members_at(g[r], 100), "pod-a,pod-b,pod-c");
    }
    uint32_t per[3] = {0, 0, 0};
    for (uint32_t s = 0; s < n; s++) {
        int contenders = 0;
        for (int r = 0; r < 3; r++) {
            ck_assert_str_eq(ld_shardgroup_target(g[r], s),
                             ld_shardgroup_target(g[0], s));
            if (ld_shardgroup_contend(g[r], s)) {
                contenders++;
                per[r]++;
                ck_assert_str_eq(ld_shardgroup_target(g[r], s), ids[r]);
            }
        }
        ck_assert_int_eq(contenders, 1);
    }
    /* Quotas by name: pod-a 4, pod-b 3, pod-c 3; pod-c keeps its lowest. */
    ck_assert_uint_eq(per[1], 4);
    ck_assert_uint_eq(per[2], 3);
    ck_assert_uint_eq(per[0], 3);
    for (uint32_t s = 0; s < 3; s++)
        ck_assert(ld_shardgroup_contend(g[0], s));
    for (int r = 0; r < 3; r++)
        ld_shardgroup_free(g[r]);
}
END_TEST

/* A world of Leases stepped every retry period, with compare-and-swap
 * writes. Every running replica renews its member Lease (taking it back
 * when it was evicted), then each is fed a list of the whole world (a
 * consistent snapshot, as a watch without lag would show it) and carries
 * out its steps in turn, so a later one acts on a view that an earlier
 * one's writes made stale: its writes then fail their compare-and-swap.
 * A crashed replica does nothing; its member Lease is evicted. At every
 * step no shard is claimed by two replicas. */
#define POOL 6
#define WORLD_SHARDS 16
#define EVENTS 40

struct world_lease {
    bool exists;
    char holder[16];
    int32_t duration_s;
    int32_t transitions;
    int64_t renew_us;
    int64_t rv;
    char evicted_at[24]; /* LD_SHARDGROUP_EVICTED_AT as written, "" none */
};

struct replica {
    char id[16];
    bool running;
    uint32_t incarnation;
    struct world_lease member;
    struct ld_shardgroup *g;
};

struct world {
    int64_t now_ms;
    int64_t rv; /* the last resourceVersion given out */
    struct replica r[POOL];
    struct world_lease s[WORLD_SHARDS];
    uint64_t rng;
};

static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void world_lease_of(const struct world_lease *wl, const char *name,
                           const char *uid, struct ld_lease *l)
{
    char rv[32];
    lease_record(l, name, wl->holder, wl->duration_s, wl->renew_us, uid, true);
    l->spec.transitions = wl->transitions;
    if (wl->evicted_at[0])
        json_object_set_new(
            json_object_get(json_object_get(l->object, "metadata"), "annotations"),
            LD_SHARDGROUP_EVICTED_AT, json_string(wl->evicted_at));
    snprintf(rv, sizeof(rv), "%lld", (long long)wl->rv);
    free(l->resource_version);
    l->resource_version = strdup(rv);
    ck_assert_ptr_nonnull(l->resource_version);
}

static void member_name(const struct world *w, int i, char *name, size_t len)
{
    snprintf(name, len, "grp-member-%s", w->r[i].id);
}

static void feed(struct world *w, int i)
{
    struct ld_lease items[POOL + WORLD_SHARDS];
    size_t n = 0;
    char name[64], uid[32];
    struct replica *r = &w->r[i];
    own_at(r->g, true, w->now_ms + RENEW_DEADLINE_MS, r->member.transitions, w->now_ms);
    for (int o = 0; o < POOL; o++) {
        if (!w->r[o].member.exists)
            continue;
        member_name(w, o, name, sizeof(name));
        snprintf(uid, sizeof(uid), "uid-%d-%u", o, (unsigned)w->r[o].incarnation);
        world_lease_of(&w->r[o].member, name, uid, &items[n++]);
    }
    for (uint32_t s = 0; s < WORLD_SHARDS; s++) {
        if (!w->s[s].exists)
            continue;
        snprintf(name, sizeof(name), "grp-%u", s);
        world_lease_of(&w->s[s], name, "uid-s", &items[n++]);
    }
    ck_assert_int_eq(ld_shardgroup_observe_list(r->g, items, n, NULL, w->now_ms), LD_OK);
    for (size_t k = 0; k < n; k++)
        ld_lease_clear(&items[k]);
    ck_assert_int_eq(ld_shardgroup_assign(r->g, w->now_ms, NULL), LD_OK);
}

/* The compare-and-swap of out onto wl: true (wl updated, out given the new
 * resourceVersion) when out was made from wl's current version. */
static bool cas(struct world *w, struct world_lease *wl, struct ld_lease *out)
{
    char rv[32];
    snprintf(rv, sizeof(rv), "%lld", (long long)wl->rv);
    bool ok = out->resource_version ? wl->exists && strcmp(out->resource_version, rv) == 0
                                    : !wl->exists;
    if (!ok)
        return false;
    wl->exists = true;
    snprintf(wl->holder, sizeof(wl->holder), "%s", out->spec.holder);
    wl->duration_s = out->spec.duration_s;
    wl->transitions = out->spec.transitions;
    wl->renew_us = out->spec.renew_us;
    json_t *ann =
        json_object_get(json_object_get(out->object, "metadata"), "annotations");
    const char *at = json_string_value(json_object_get(ann, LD_SHARDGROUP_EVICTED_AT));
    snprintf(wl->evicted_at, sizeof(wl->evicted_at), "%s", at ? at : "");
    wl->rv = ++w->rv;
    snprintf(rv, sizeof(rv), "%lld", (long long)wl->rv);
    free(out->resource_version);
    out->resource_version = strdup(rv);
    ck_assert_ptr_nonnull(out->resource_version);
    return true;
}

static struct replica *member_of(struct world *w, const char *lease_name)
{
    char name[64];
    for (int o = 0; o < POOL; o++) {
        member_name(w, o, name, sizeof(name));
        if (strcmp(name, lease_name) == 0)
            return &w->r[o];
    }
    return NULL;
}

static void act(struct world *w, int i)
{
    struct replica *r = &w->r[i];
    bool fresh = true;
    for (uint32_t s = 0; s < WORLD_SHARDS; s++) {
        struct ld_lease out;
        ld_lease_init(&out);
        uint64_t term = ld_shardgroup_term(r->g);
        int64_t wall = w->now_ms * 1000;
        switch (ld_shardgroup_step(r->g, s, w->now_ms, fresh)) {
        case LD_SHARD_TAKE:
            ck_assert_int_eq(
                ld_shardgroup_take_lease(r->g, s, "ns", wall, w->now_ms, &out), LD_OK);
            break;
        case LD_SHARD_RELEASE:
            ld_shardgroup_give_back(r->g, s);
            ck_assert_int_eq(ld_shardgroup_release_lease(r->g, s, wall, w->now_ms, &out),
                             LD_OK);
            break;
        case LD_SHARD_EVICT: {
            ck_assert_int_eq(ld_shardgroup_evict_lease(r->g, s, wall, &out), LD_OK);
            struct replica *h = member_of(w, out.name);
            ck_assert_ptr_nonnull(h);
            char *before = strdup(out.resource_version);
            if (cas(w, &h->member, &out))
                ld_shardgroup_evicted(r->g, before, &out, w->now_ms);
            free(before);
            /* The view now mixes the list with an answer: takeovers wait
             * for the next list, as mode_shards does. */
            fresh = false;
            ld_lease_clear(&out);
            continue;
        }
        default:
            continue;
        }
        char *before = out.resource_version ? strdup(out.resource_version) : NULL;
        if (cas(w, &w->s[s], &out))
            ld_shardgroup_wrote(r->g, s, term, before, &out, w->now_ms);
        else
            ld_shardgroup_write_failed(r->g, s);
        free(before);
        ld_lease_clear(&out);
    }
}

/* No shard claimed by two running replicas at now. */
static void check_exclusive(const struct world *w)
{
    for (uint32_t s = 0; s < WORLD_SHARDS; s++) {
        int claims = 0;
        for (int i = 0; i < POOL; i++)
            claims += w->r[i].running && ld_shardgroup_owns(w->r[i].g, s, w->now_ms);
        ck_assert_int_le(claims, 1);
    }
}

static void step(struct world *w)
{
    w->now_ms += RETRY_MS;
    for (int i = 0; i < POOL; i++) {
        struct world_lease *m = &w->r[i].member;
        if (!w->r[i].running)
            continue;
        if (strcmp(m->holder, w->r[i].id) != 0) { /* evicted: taken back */
            memcpy(m->holder, w->r[i].id, sizeof(m->holder));
            m->transitions++;
        }
        m->exists = true;
        m->duration_s = DURATION_MS / 1000;
        m->renew_us = w->now_ms * 1000;
        m->rv = ++w->rv;
    }
    for (int i = 0; i < POOL; i++)
        if (w->r[i].running)
            feed(w, i);
    for (int i = 0; i < POOL; i++) {
        if (w->r[i].running)
            act(w, i);
        check_exclusive(w);
    }
}

static int running_count(const struct world *w)
{
    int n = 0;
    for (int i = 0; i < POOL; i++)
        n += w->r[i].running;
    return n;
}

/* Every shard held by a running replica, each of which holds floor(N/M)
 * or ceil(N/M). */
static bool balanced(const struct world *w)
{
    int m = running_count(w), held[POOL] = {0};
    for (uint32_t s = 0; s < WORLD_SHARDS; s++) {
        int owner = -1;
        for (int i = 0; i < POOL; i++)
            if (w->r[i].running && w->s[s].exists &&
                strcmp(w->s[s].holder, w->r[i].id) == 0)
                owner = i;
        if (owner < 0)
            return false;
        held[owner]++;
    }
    for (int i = 0; i < POOL; i++)
        if (w->r[i].running &&
            (held[i] < WORLD_SHARDS / m || held[i] > (WORLD_SHARDS + m - 1) / m))
            return false;
    return true;
}

static void start_replica(struct world *w, int i)
{
    struct replica *r = &w->r[i];
    r->running = true;
    r->incarnation++;
    memset(&r->member, 0, sizeof(r->member));
    r->g = numbered_group("grp", r->id, WORLD_SHARDS, NULL);
}

static void leave_gracefully(struct world *w, int i)
{
    struct replica *r = &w->r[i];
    for (uint32_t s = 0; s < WORLD_SHARDS; s++) {
        if (strcmp(w->s[s].holder, r->id) == 0) {
            w->s[s].holder[0] = '\0';
            w->s[s].duration_s = 1;
            w->s[s].rv = ++w->rv;
        }
    }
    memset(&r->member, 0, sizeof(r->member));
    r->running = false;
    ld_shardgroup_free(r->g);
    r->g = NULL;
}

static void crash(struct world *w, int i)
{
    w->r[i].running = false;
    ld_shardgroup_free(w->r[i].g);
    w->r[i].g = NULL;
}

static void snapshot(const struct world *w, char holders[WORLD_SHARDS][16])
{
    for (uint32_t s = 0; s < WORLD_SHARDS; s++)
        memcpy(holders[s], w->s[s].holder, sizeof(holders[s]));
}

/* Shards whose holder changed, a release and take counting once. */
static uint32_t moved_since(const struct world *w, char holders[WORLD_SHARDS][16])
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < WORLD_SHARDS; s++)
        n += strcmp(holders[s], w->s[s].holder) != 0;
    return n;
}

START_TEST(join_leave_crash_sequences_end_balanced)
{
    /* The contract's bound for a dead member's shards is lease-duration +
     * 2 retry periods + 1 s; the world steps in retry periods. */
    const int settle_steps = (DURATION_MS + 2 * RETRY_MS + 1000) / RETRY_MS;
    int applied[3] = {0, 0, 0}; /* joins, leaves, crashes */

    for (uint64_t seed = 1; seed <= 20; seed++) {
        struct world w = {.now_ms = 1000000, .rng = seed};
        for (int i = 0; i < POOL; i++)
            snprintf(w.r[i].id, sizeof(w.r[i].id), "pod-%c",
                     'a' + (int)(seed + i) % POOL);
        start_replica(&w, 0);
        for (int k = 0; k < settle_steps && !balanced(&w); k++)
            step(&w);
        ck_assert_msg(balanced(&w), "seed %llu: the first replica took nothing",
                      (unsigned long long)seed);

        for (int e = 0; e < EVENTS; e++) {
            char before[WORLD_SHARDS][16];
            int m = running_count(&w);
            int pick = (int)(next_rand(&w.rng) % POOL);
            int kind = (int)(next_rand(&w.rng) % 3); /* 0 join, 1 leave, 2 crash */
            if (w.r[pick].running == (kind == 0) || (kind != 0 && m == 1))
                continue; /* not applicable: keep at least one running */
            int held = 0;
            for (uint32_t s = 0; s < WORLD_SHARDS; s++)
                held += strcmp(w.s[s].holder, w.r[pick].id) == 0;
            snapshot(&w, before);
            applied[kind]++;
            if (kind == 0)
                start_replica(&w, pick);
            else if (kind == 1)
                leave_gracefully(&w, pick);
            else
                crash(&w, pick);

            int k = 0;
            for (; k < settle_steps && !balanced(&w); k++)
                step(&w);
            ck_assert_msg(balanced(&w), "seed %llu event %d (kind %d): not balanced",
                          (unsigned long long)seed, e, kind);
            uint32_t moved = moved_since(&w, before);
            if (kind == 0)
                ck_assert_uint_le(moved, (WORLD_SHARDS + m) / (m + 1) + 1);
            else
                ck_assert_uint_le(moved, (uint32_t)held + 1);

            /* Stable: with the same members nothing moves any more, and
             * every driver names the same targets. */
            snapshot(&w, before);
            for (int j = 0; j < 3; j++)
                step(&w);
            ck_assert_uint_eq(moved_since(&w, before), 0);
            const struct ld_shardgroup *ref = NULL;
            for (int i = 0; i < POOL; i++) {
                if (!w.r[i].running)
                    continue;
                ref = ref ? ref : w.r[i].g;
                for (uint32_t s = 0; s < WORLD_SHARDS; s++)
                    ck_assert_str_eq(ld_shardgroup_target(w.r[i].g, s),
                                     ld_shardgroup_target(ref, s));
            }
        }
        for (int i = 0; i < POOL; i++)
            ld_shardgroup_free(w.r[i].g);
    }
    /* The sequences did what they are for. */
    for (int k = 0; k < 3; k++)
        ck_assert_int_ge(applied[k], 50);
}
END_TEST

/* Member Leases that outlived their replicas fill the table over many
 * rollouts; a new replica must still be counted, in the place of the
 * record not live for the longest, and a live record is never given up. */
START_TEST(a_full_table_gives_a_stale_member_up_for_a_new_one)
{
    struct ld_shardgroup *g = numbered_group("web", "a", 4, NULL);
    struct ld_lease l;
    char id[32];

    renewing(g, "keep", "keep", 1000, 1, 1000);
    for (int i = 1; i < LD_SHARDGROUP_MAX_MEMBERS; i++) {
        snprintf(id, sizeof(id), "old-%d", i);
        renewing(g, id, id, 10, 1, 1000 + i);
    }
    /* All live: the newcomer waits, as one not seen yet would. */
    member_record(&l, "web", "new", "new", 10, 1, "uid-n");
    ck_assert_int_eq(ld_shardgroup_observe_member(g, &l, 5000), LD_ETOOBIG);
    /* Past the old ones' expiry: old-1 (stale the longest) makes room. */
    ck_assert_int_eq(ld_shardgroup_observe_member(g, &l, 20000), LD_OK);
    ld_lease_clear(&l);
    observe(g, "new", "new", 10, 2, 20000);
    ck_assert_str_eq(members_at(g, 20000), "keep,new");
    /* old-1 renews (it was alive after all): old-2 makes room for it. */
    renewing(g, "old-1", "old-1", 10, 2, 20001);
    ck_assert_str_eq(members_at(g, 20001), "keep,new,old-1");
    renewing(g, "newer", "newer", 10, 1, 20002);
    ck_assert_str_eq(members_at(g, 20002), "keep,new,newer,old-1");
    ld_shardgroup_free(g);
}
END_TEST

static Suite *shardgroup_suite(void)
{
    Suite *s = suite_create("shardgroup");
    TCase *names = tcase_create("names");
    tcase_add_test(names, names_of_a_numbered_group);
    tcase_add_test(names, names_of_a_named_group);
    tcase_add_test(names, create_metadata_carries_labels_and_owner);
    tcase_add_test(names, owner_reference_names_the_pod);
    tcase_add_test(names, long_group_names_are_labelled_by_prefix_and_hash);
    tcase_add_test(names, bad_names_are_refused_by_name);
    suite_add_tcase(s, names);
    TCase *members = tcase_create("members");
    tcase_add_test(members, a_member_drops_out_exactly_at_its_expiry);
    tcase_add_test(members, deleted_members_leave_and_stale_deletes_do_not);
    tcase_add_test(members, a_deleted_member_is_not_revived_by_a_stale_list);
    tcase_add_test(members, long_expired_members_are_found);
    tcase_add_test(members, a_full_table_gives_a_stale_member_up_for_a_new_one);
    tcase_add_test(members, our_own_member_counts_only_while_we_hold_it);
    tcase_add_test(members, a_claim_needs_a_write_in_the_current_member_term);
    tcase_add_test(members,
                   a_shard_of_our_identity_under_another_incarnation_is_not_ours);
    tcase_add_test(members,
                   a_member_counts_once_seen_to_change_and_only_with_the_protocol);
    tcase_add_test(members, shards_are_taken_only_on_the_rules);
    tcase_add_test(members,
                   a_takeover_needs_the_shard_record_of_the_list_that_shows_the_absence);
    tcase_add_test(members, a_list_older_than_a_record_leaves_the_record);
    tcase_add_test(members, an_earlier_member_of_another_shard_set_is_a_conflict);
    tcase_add_test(members, a_claim_on_a_new_object_counts_after_the_outside_wait);
    tcase_add_test(members,
                   reported_unwritable_shards_go_to_a_member_that_can_write_them);
    tcase_add_test(members,
                   a_member_record_never_seen_to_change_is_evicted_for_its_shards);
    tcase_add_test(members, older_records_are_ignored_and_give_backs_end_with_the_shard);
    tcase_add_test(members, an_absence_counts_only_from_one_snapshot);
    tcase_add_test(members, a_member_lease_emptied_by_hand_proves_nothing_at_once);
    tcase_add_test(members, writes_are_compare_and_swap_with_the_contract_fields);
    suite_add_tcase(s, members);
    TCase *group = tcase_create("group");
    tcase_set_timeout(group, 60);
    tcase_add_test(group, replicas_fed_the_same_observations_agree);
    tcase_add_test(group, the_newest_member_gets_the_extra_shard);
    tcase_add_test(group, rebalancing_waits_for_the_members_to_stay_the_same);
    tcase_add_test(group, join_leave_crash_sequences_end_balanced);
    suite_add_tcase(s, group);
    return s;
}

int main(void)
{
    return ld_test_run(shardgroup_suite());
}
