/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/lease (Lease codec, Status bodies) and the small
 * lib/err and lib/log modules it relies on. Canned objects live in
 * tests/data/; they are found from the working directory or from the test
 * binary's location (build/tests or build/san/tests).
 */
#include <check.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "hash.h"
#include "lease.h"
#include "log.h"
#include "timefmt.h"
#include "support/run_suite.h"

#define US INT64_C(1000000)
#define T2024 INT64_C(1714564803) /* 2024-05-01T12:00:03Z */
#define DATA_MAX (256 * 1024)

/* ---- helpers ---- */

static FILE *open_in(const char *dir, const char *name)
{
    char path[PATH_MAX];

    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return NULL;
    return fopen(path, "rb");
}

/* tests/data relative to cwd, else walking up from the binary's directory. */
static FILE *open_data(const char *name)
{
    char dir[PATH_MAX], try[PATH_MAX + 16];
    FILE *f = open_in("tests/data", name);
    ssize_t n;

    if (f)
        return f;
    n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
        return NULL;
    dir[n] = '\0';
    for (int up = 0; up < 5 && !f; up++) {
        char *slash = strrchr(dir, '/');
        if (!slash)
            break;
        *slash = '\0';
        snprintf(try, sizeof try, "%s/tests/data", dir);
        f = open_in(try, name);
    }
    return f;
}

/* Returns the file's bytes, NUL-terminated; free with free(). */
static char *read_data(const char *name, size_t *len)
{
    FILE *f = open_data(name);
    char *buf = malloc(DATA_MAX + 1);
    size_t n;

    ck_assert_msg(f != NULL, "cannot open tests/data/%s", name);
    ck_assert_ptr_nonnull(buf);
    n = fread(buf, 1, DATA_MAX, f);
    ck_assert(!ferror(f) && feof(f));
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static json_t *load_data_json(const char *name)
{
    size_t len;
    char *text = read_data(name, &len);
    json_t *j = json_loadb(text, len, 0, NULL);

    free(text);
    ck_assert_ptr_nonnull(j);
    return j;
}

static enum ld_err decode_str(const char *text, struct ld_lease *l, struct ld_errinfo *e)
{
    return ld_lease_decode(text, strlen(text), l, e);
}

static bool all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

static void assert_cleared(const struct ld_lease *l)
{
    ck_assert_msg(all_zero(l, sizeof *l), "lease not cleared after an error");
}

/* ---- decoding ---- */

START_TEST(decode_kube_lease)
{
    size_t len;
    char *text = read_data("lease_kube.json", &len);
    struct ld_lease l;
    struct ld_errinfo e;

    ld_lease_init(&l);
    ld_errinfo_clear(&e);
    ck_assert_int_eq(ld_lease_decode(text, len, &l, &e), LD_OK);
    ck_assert_str_eq(l.name, "my-app-leader");
    ck_assert_str_eq(l.namespace_, "prod");
    ck_assert_str_eq(l.resource_version, "4815162342");
    ck_assert_str_eq(l.uid, "8a3c1e0f-52c4-4b6e-9d2a-0f6b1f6c2e11");
    ck_assert_str_eq(l.spec.holder,
                     "my-app-7d9c5b8f6-x2k4q_0b8e6c1a-9a1d-4c0e-8f43-5b1d2e3f4a5b");
    ck_assert_int_eq(l.spec.duration_s, 15);
    ck_assert(l.spec.has_acquire && l.spec.has_renew);
    ck_assert_int_eq(l.spec.acquire_us, (T2024 - 123) * US + 1);
    ck_assert_int_eq(l.spec.renew_us, T2024 * US + 123456);
    ck_assert_int_eq(l.spec.transitions, 7);
    ck_assert_ptr_null(l.spec.strategy);
    ck_assert_ptr_null(l.spec.preferred_holder);
    ck_assert_ptr_nonnull(l.object);
    ld_lease_clear(&l);
    free(text);
}
END_TEST

/* Decode, encode, decode: the object is identical to what the server sent,
 * managedFields, labels, ownerReferences and non-ASCII included. */
START_TEST(round_trip_kube_lease)
{
    size_t len;
    char *text = read_data("lease_kube.json", &len), *enc;
    json_t *orig = load_data_json("lease_kube.json");
    struct ld_lease a, b;

    ld_lease_init(&a);
    ld_lease_init(&b);
    ck_assert_int_eq(ld_lease_decode(text, len, &a, NULL), LD_OK);
    enc = ld_lease_encode(&a);
    ck_assert_ptr_nonnull(enc);
    ck_assert_ptr_null(strchr(enc, '\n'));
    ck_assert_int_eq(decode_str(enc, &b, NULL), LD_OK);
    ck_assert(ld_lease_spec_equal(&a.spec, &b.spec));
    ck_assert_str_eq(b.name, a.name);
    ck_assert_str_eq(b.namespace_, a.namespace_);
    ck_assert_str_eq(b.resource_version, a.resource_version);
    ck_assert_str_eq(b.uid, a.uid);
    ck_assert_msg(json_equal(orig, b.object), "re-encoded object differs: %s", enc);
    free(enc);
    json_decref(orig);
    ld_lease_clear(&a);
    ld_lease_clear(&b);
    free(text);
}
END_TEST

/* Changing the spec and re-encoding keeps every other field. */
START_TEST(encode_preserves_unknown)
{
    const char *in =
        "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/"
        "v1\",\"status\":{\"x\":1},"
        "\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\",\"resourceVersion\":\"5\","
        "\"labels\":{\"a\":\"b\"},\"annotations\":{\"c\":\"d\"},\"ownerReferences\":[{"
        "\"kind\":\"Pod\",\"name\":\"p\"}]},\"spec\":{\"holderIdentity\":\"old\","
        "\"futureField\":{\"deep\":[1,2,3]},\"leaseDurationSeconds\":10,"
        "\"strategy\":\"OldestEmulationVersion\",\"preferredHolder\":\"x\"}}";
    struct ld_lease l, back;
    json_t *o, *spec;
    char *enc;

    ld_lease_init(&l);
    ld_lease_init(&back);
    ck_assert_int_eq(decode_str(in, &l, NULL), LD_OK);
    free(l.spec.holder);
    l.spec.holder = strdup("new");
    ck_assert_ptr_nonnull(l.spec.holder);
    l.spec.has_renew = true;
    l.spec.renew_us = T2024 * US + 7;
    free(l.spec.preferred_holder);
    l.spec.preferred_holder = NULL;
    enc = ld_lease_encode(&l);
    ck_assert_ptr_nonnull(enc);
    o = json_loads(enc, 0, NULL);
    ck_assert_ptr_nonnull(o);
    spec = json_object_get(o, "spec");
    ck_assert_str_eq(json_string_value(json_object_get(spec, "holderIdentity")), "new");
    ck_assert_str_eq(json_string_value(json_object_get(spec, "renewTime")),
                     "2024-05-01T12:00:03.000007Z");
    ck_assert(json_is_null(json_object_get(spec, "acquireTime")));
    ck_assert_ptr_null(json_object_get(spec, "preferredHolder"));
    ck_assert_str_eq(json_string_value(json_object_get(spec, "strategy")),
                     "OldestEmulationVersion");
    ck_assert_int_eq(
        json_array_size(json_object_get(json_object_get(spec, "futureField"), "deep")),
        3);
    ck_assert_ptr_nonnull(json_object_get(o, "status"));
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(o, "metadata"), "labels"), "a")),
                     "b");
    ck_assert_int_eq(decode_str(enc, &back, NULL), LD_OK);
    ck_assert(ld_lease_spec_equal(&l.spec, &back.spec));
    json_decref(o);
    free(enc);
    ld_lease_clear(&l);
    ld_lease_clear(&back);
}
END_TEST

/* The incarnation annotation (election.h) is read into l.incarnation and
 * written from it; every other annotation stays as read. */
START_TEST(incarnation_annotation_round_trip)
{
    const char *in = "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\","
                     "\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\","
                     "\"resourceVersion\":\"5\",\"annotations\":{\"c\":\"d\","
                     "\"leaderd.io/incarnation\":\"old\"}},"
                     "\"spec\":{\"holderIdentity\":\"a\"}}";
    struct ld_lease l, back;
    ld_lease_init(&l);
    ld_lease_init(&back);
    ck_assert_int_eq(decode_str(in, &l, NULL), LD_OK);
    ck_assert_str_eq(l.incarnation, "old");
    ck_assert(ld_lease_held_by(&l, "a", "old"));
    ck_assert(!ld_lease_held_by(&l, "a", "new"));
    ck_assert(!ld_lease_held_by(&l, "a", NULL)); /* none expected, one found */
    ck_assert(!ld_lease_held_by(&l, "b", "old"));

    ck_assert_int_eq(ld_lease_set_incarnation(&l, "new"), LD_OK);
    char *enc = ld_lease_encode(&l);
    ck_assert_int_eq(decode_str(enc, &back, NULL), LD_OK);
    ck_assert_str_eq(back.incarnation, "new");
    json_t *o = json_loads(enc, 0, NULL);
    json_t *ann = json_object_get(json_object_get(o, "metadata"), "annotations");
    ck_assert_str_eq(json_string_value(json_object_get(ann, "c")), "d");
    json_decref(o);
    free(enc);

    /* Copies keep it; none removes the annotation and nothing else. */
    ck_assert_int_eq(ld_lease_copy_compact(&back, &l), LD_OK);
    ck_assert_str_eq(back.incarnation, "new");
    ck_assert_int_eq(ld_lease_set_incarnation(&l, NULL), LD_OK);
    ck_assert(ld_lease_held_by(&l, "a", NULL));
    ck_assert(ld_lease_held_by(&l, "a", ""));
    enc = ld_lease_encode(&l);
    o = json_loads(enc, 0, NULL);
    ann = json_object_get(json_object_get(o, "metadata"), "annotations");
    ck_assert_ptr_null(json_object_get(ann, "leaderd.io/incarnation"));
    ck_assert_str_eq(json_string_value(json_object_get(ann, "c")), "d");
    json_decref(o);
    free(enc);
    ld_lease_clear(&l);
    ld_lease_clear(&back);
}
END_TEST

/* Annotations set on a Lease kept as text join the ones it has; a value
 * that is no string, or no object, changes nothing. */
START_TEST(annotations_are_set_next_to_the_others)
{
    const char *in = "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\","
                     "\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\","
                     "\"resourceVersion\":\"5\",\"annotations\":{\"c\":\"d\"}},"
                     "\"spec\":{\"holderIdentity\":\"a\"}}";
    struct ld_lease l, kept;
    ld_lease_init(&l);
    ld_lease_init(&kept);
    ck_assert_int_eq(decode_str(in, &l, NULL), LD_OK);
    ck_assert_int_eq(ld_lease_copy_compact(&kept, &l), LD_OK);
    ck_assert_ptr_nonnull(kept.object_text);
    ck_assert_int_eq(ld_lease_set_annotations(&kept, "{\"x\":\"1\",\"c\":\"e\"}"), LD_OK);
    ck_assert_int_eq(ld_lease_set_annotations(&kept, "{\"y\":2}"), LD_EINVAL);
    ck_assert_int_eq(ld_lease_set_annotations(&kept, "[1]"), LD_EINVAL);
    char *enc = ld_lease_encode(&kept);
    json_t *o = json_loads(enc, 0, NULL);
    json_t *ann = json_object_get(json_object_get(o, "metadata"), "annotations");
    ck_assert_str_eq(json_string_value(json_object_get(ann, "x")), "1");
    ck_assert_str_eq(json_string_value(json_object_get(ann, "c")), "e");
    ck_assert_ptr_null(json_object_get(ann, "y"));
    json_decref(o);
    free(enc);
    /* A Lease with no object gets one. */
    ld_lease_clear(&l);
    ck_assert_int_eq(ld_lease_set_annotations(&l, "{\"x\":\"1\"}"), LD_OK);
    ck_assert_ptr_nonnull(l.object);
    ld_lease_clear(&l);
    ld_lease_clear(&kept);
}
END_TEST

/* A value with a NUL byte names no process (and a non-string none). */
START_TEST(incarnation_with_nul_names_nobody)
{
    const char *in = "{\"metadata\":{\"name\":\"n\",\"annotations\":"
                     "{\"leaderd.io/incarnation\":\"ab\\u0000cd\"}},"
                     "\"spec\":{\"holderIdentity\":\"a\"}}";
    struct ld_lease l;
    ld_lease_init(&l);
    ck_assert_int_eq(decode_str(in, &l, NULL), LD_OK);
    ck_assert_str_eq(l.incarnation, "ab(nul)");
    ck_assert(!ld_lease_held_by(&l, "a", "ab"));
    ck_assert(!ld_lease_held_by(&l, "a", NULL));
    ld_lease_clear(&l);
}
END_TEST

START_TEST(encode_fresh_exact)
{
    struct ld_lease l;
    char *enc;

    ld_lease_init(&l);
    l.name = strdup("my-lease");
    l.namespace_ = strdup("default");
    l.spec.holder = strdup("pod-a");
    ck_assert(l.name && l.namespace_ && l.spec.holder);
    l.spec.duration_s = 15;
    l.spec.has_acquire = l.spec.has_renew = true;
    l.spec.acquire_us = T2024 * US;
    l.spec.renew_us = T2024 * US + 123456;
    l.spec.transitions = 3;
    enc = ld_lease_encode(&l);
    ck_assert_str_eq(enc,
                     "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                     "\"metadata\":{\"name\":\"my-lease\",\"namespace\":\"default\"},"
                     "\"spec\":{\"holderIdentity\":\"pod-a\",\"leaseDurationSeconds\":15,"
                     "\"acquireTime\":\"2024-05-01T12:00:03.000000Z\","
                     "\"renewTime\":\"2024-05-01T12:00:03.123456Z\","
                     "\"leaseTransitions\":3}}");
    free(enc);
    ld_lease_clear(&l);
}
END_TEST

/* A zeroed lease encodes to something valid with explicit empty holder,
 * null times and transitions 0; nothing is left out that Go peers need. */
START_TEST(encode_zeroed)
{
    struct ld_lease l;
    char *enc;

    ld_lease_init(&l);
    enc = ld_lease_encode(&l);
    ck_assert_str_eq(enc,
                     "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                     "\"metadata\":{},\"spec\":{\"holderIdentity\":\"\","
                     "\"acquireTime\":null,\"renewTime\":null,\"leaseTransitions\":0}}");
    free(enc);
    ck_assert_ptr_null(ld_lease_encode(NULL));
}
END_TEST

/* resourceVersion NULL removes the key (POST); empty strategy removes it;
 * duration 0 removes leaseDurationSeconds rather than writing an invalid 0. */
START_TEST(encode_removes_keys)
{
    size_t len;
    char *text = read_data("lease_kube.json", &len), *enc;
    struct ld_lease l;
    json_t *o, *spec;

    ld_lease_init(&l);
    ck_assert_int_eq(ld_lease_decode(text, len, &l, NULL), LD_OK);
    free(l.resource_version);
    l.resource_version = NULL;
    l.spec.strategy = strdup("");
    ck_assert_ptr_nonnull(l.spec.strategy);
    l.spec.duration_s = 0;
    enc = ld_lease_encode(&l);
    o = json_loads(enc, 0, NULL);
    ck_assert_ptr_nonnull(o);
    spec = json_object_get(o, "spec");
    ck_assert_ptr_null(
        json_object_get(json_object_get(o, "metadata"), "resourceVersion"));
    ck_assert_ptr_nonnull(json_object_get(json_object_get(o, "metadata"), "uid"));
    ck_assert_ptr_null(json_object_get(spec, "strategy"));
    ck_assert_ptr_null(json_object_get(spec, "leaseDurationSeconds"));
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "leaseTransitions")), 7);
    json_decref(o);
    free(enc);
    ld_lease_clear(&l);
    free(text);
}
END_TEST

START_TEST(encode_invalid_utf8_fails)
{
    struct ld_lease l;

    ld_lease_init(&l);
    l.name = strdup("n");
    l.spec.holder = strdup("bad\xff");
    ck_assert(l.name && l.spec.holder);
    ck_assert_ptr_null(ld_lease_encode(&l));
    ld_lease_clear(&l);
}
END_TEST

START_TEST(decode_released)
{
    size_t len;
    char *text = read_data("lease_released.json", &len), *enc;
    struct ld_lease l;

    ld_lease_init(&l);
    ck_assert_int_eq(ld_lease_decode(text, len, &l, NULL), LD_OK);
    ck_assert_ptr_nonnull(l.spec.holder);
    ck_assert_str_eq(l.spec.holder, "");
    ck_assert_int_eq(l.spec.duration_s, 1);
    ck_assert_int_eq(l.spec.transitions, 7);
    enc = ld_lease_encode(&l);
    ck_assert_ptr_nonnull(strstr(enc, "\"holderIdentity\":\"\""));
    ck_assert_ptr_nonnull(strstr(enc, "\"leaseDurationSeconds\":1,"));
    free(enc);
    ld_lease_clear(&l);
    free(text);
}
END_TEST

START_TEST(decode_null_times)
{
    size_t len;
    char *text = read_data("lease_null_times.json", &len);
    struct ld_lease l;

    ld_lease_init(&l);
    ck_assert_int_eq(ld_lease_decode(text, len, &l, NULL), LD_OK);
    ck_assert(!l.spec.has_acquire && !l.spec.has_renew);
    ck_assert_int_eq(l.spec.transitions, 0);
    ck_assert_str_eq(l.spec.strategy, "OldestEmulationVersion");
    ck_assert_ptr_null(l.spec.preferred_holder);
    ld_lease_clear(&l);
    free(text);
}
END_TEST

/* Minimal object: only name and an empty spec; everything else defaults. */
START_TEST(decode_minimal)
{
    struct ld_lease l;

    ld_lease_init(&l);
    ck_assert_int_eq(decode_str("{\"metadata\":{\"name\":\"x\"},\"spec\":{}}", &l, NULL),
                     LD_OK);
    ck_assert_str_eq(l.name, "x");
    ck_assert_str_eq(l.namespace_, "");
    ck_assert_ptr_null(l.resource_version);
    ck_assert_ptr_null(l.uid);
    ck_assert_str_eq(l.spec.holder, "");
    ck_assert_int_eq(l.spec.duration_s, 0);
    ck_assert(!l.spec.has_acquire && !l.spec.has_renew);
    ld_lease_clear(&l);
}
END_TEST

/* Non-Z offsets and short fractions are accepted on input and normalised. */
START_TEST(decode_lenient_times)
{
    struct ld_lease l;
    char *enc;

    ld_lease_init(&l);
    ck_assert_int_eq(decode_str("{\"metadata\":{\"name\":\"x\"},\"spec\":{"
                                "\"renewTime\":\"2024-05-01T14:00:03.5+02:00\"}}",
                                &l, NULL),
                     LD_OK);
    ck_assert_int_eq(l.spec.renew_us, T2024 * US + 500000);
    enc = ld_lease_encode(&l);
    ck_assert_ptr_nonnull(strstr(enc, "\"renewTime\":\"2024-05-01T12:00:03.500000Z\""));
    free(enc);
    ld_lease_clear(&l);
}
END_TEST

struct mutation {
    const char *path;  /* "spec.x", "metadata.x" or a top-level key */
    const char *value; /* JSON text, or NULL to delete the key */
    const char *field; /* must appear in the error message */
};

/* Applies one mutation to a copy of the canned Lease. */
static json_t *mutate(const json_t *base, const struct mutation *m)
{
    json_t *o = json_deep_copy(base), *parent = o;
    const char *key = m->path, *dot = strchr(m->path, '.');
    char head[32];

    ck_assert_ptr_nonnull(o);
    if (dot) {
        snprintf(head, sizeof head, "%.*s", (int)(dot - m->path), m->path);
        parent = json_object_get(o, head);
        key = dot + 1;
    }
    ck_assert_ptr_nonnull(parent);
    if (!m->value) {
        json_object_del(parent, key);
    } else {
        json_t *v = json_loads(m->value, JSON_DECODE_ANY, NULL);
        ck_assert_msg(v != NULL, "bad test JSON %s", m->value);
        json_object_set_new(parent, key, v);
    }
    return o;
}

static const struct mutation bad_fields[] = {
    {"kind", "\"Pod\"", "kind"},
    {"kind", "7", "kind"},
    {"apiVersion", "\"coordination.k8s.io/v1beta1\"", "apiVersion"},
    {"apiVersion", "[]", "apiVersion"},
    {"metadata", NULL, "metadata"},
    {"metadata", "null", "metadata"},
    {"metadata", "\"x\"", "metadata"},
    {"metadata", "[]", "metadata"},
    {"metadata.name", NULL, "metadata.name"},
    {"metadata.name", "\"\"", "metadata.name"},
    {"metadata.name", "null", "metadata.name"},
    {"metadata.name", "42", "metadata.name"},
    {"metadata.name", "{}", "metadata.name"},
    {"metadata.namespace", "true", "metadata.namespace"},
    {"metadata.resourceVersion", "4815162342", "metadata.resourceVersion"},
    {"metadata.resourceVersion", "{}", "metadata.resourceVersion"},
    {"spec", NULL, "spec"},
    {"spec", "null", "spec"},
    {"spec", "\"spec\"", "spec"},
    {"spec", "[{}]", "spec"},
    {"spec.holderIdentity", "1", "spec.holderIdentity"},
    {"spec.holderIdentity", "false", "spec.holderIdentity"},
    {"spec.holderIdentity", "[\"a\"]", "spec.holderIdentity"},
    {"spec.holderIdentity", "{\"a\":1}", "spec.holderIdentity"},
    {"spec.leaseDurationSeconds", "\"15\"", "spec.leaseDurationSeconds"},
    {"spec.leaseDurationSeconds", "15.0", "spec.leaseDurationSeconds"},
    {"spec.leaseDurationSeconds", "true", "spec.leaseDurationSeconds"},
    {"spec.leaseDurationSeconds", "-1", "negative spec.leaseDurationSeconds"},
    {"spec.leaseDurationSeconds", "2147483648", "spec.leaseDurationSeconds"},
    {"spec.leaseDurationSeconds", "-9223372036854775808", "spec.leaseDurationSeconds"},
    {"spec.leaseTransitions", "\"7\"", "spec.leaseTransitions"},
    {"spec.leaseTransitions", "-1", "negative spec.leaseTransitions"},
    {"spec.leaseTransitions", "4294967296", "spec.leaseTransitions"},
    {"spec.leaseTransitions", "[]", "spec.leaseTransitions"},
    {"spec.acquireTime", "0", "spec.acquireTime"},
    {"spec.acquireTime", "\"\"", "spec.acquireTime"},
    {"spec.acquireTime", "\"yesterday\"", "spec.acquireTime"},
    {"spec.acquireTime", "{}", "spec.acquireTime"},
    {"spec.renewTime", "\"2024-05-01T12:00:03.123456\"", "spec.renewTime"},
    {"spec.renewTime", "\"2024-02-30T12:00:03.123456Z\"", "spec.renewTime"},
    {"spec.renewTime", "1714564803", "spec.renewTime"},
    {"spec.strategy", "1", "spec.strategy"},
    {"spec.strategy", "{}", "spec.strategy"},
    {"spec.preferredHolder", "[]", "spec.preferredHolder"},
    {"spec.preferredHolder", "true", "spec.preferredHolder"},
};

/* Every wrong type or range is rejected with LD_EDECODE, a message naming
 * the field, and the output cleared even though it held a valid lease. */
START_TEST(wrong_types)
{
    json_t *base = load_data_json("lease_kube.json");
    const struct mutation *m = &bad_fields[_i];
    json_t *o = mutate(base, m);
    char *text = json_dumps(o, JSON_COMPACT);
    struct ld_lease l;
    struct ld_errinfo e;
    enum ld_err rc;

    ck_assert_ptr_nonnull(text);
    ld_lease_init(&l);
    ck_assert_int_eq(ld_lease_from_json(base, &l, NULL), LD_OK);
    ld_errinfo_clear(&e);
    rc = ld_lease_decode(text, strlen(text), &l, &e);
    ck_assert_msg(rc == LD_EDECODE, "%s=%s: rc %d", m->path,
                  m->value ? m->value : "(deleted)", rc);
    ck_assert_int_eq(e.code, LD_EDECODE);
    ck_assert_msg(strstr(e.msg, m->field) != NULL, "message '%s' does not name %s", e.msg,
                  m->field);
    assert_cleared(&l);
    ck_assert_int_eq(ld_lease_from_json(o, &l, NULL), LD_EDECODE);
    assert_cleared(&l);
    free(text);
    json_decref(o);
    json_decref(base);
}
END_TEST

/* null means "absent" for every optional field, as in Go. */
START_TEST(nulls_are_absent)
{
    struct ld_lease l;

    ld_lease_init(&l);
    ck_assert_int_eq(
        decode_str("{\"kind\":null,\"apiVersion\":null,\"metadata\":{"
                   "\"name\":\"x\",\"namespace\":null,\"resourceVersion\":null},"
                   "\"spec\":{\"holderIdentity\":null,"
                   "\"leaseDurationSeconds\":null,\"acquireTime\":null,"
                   "\"renewTime\":null,\"leaseTransitions\":null,"
                   "\"strategy\":null,\"preferredHolder\":null}}",
                   &l, NULL),
        LD_OK);
    ck_assert_str_eq(l.spec.holder, "");
    ck_assert_str_eq(l.namespace_, "");
    ck_assert_ptr_null(l.resource_version);
    ck_assert_ptr_null(l.spec.strategy);
    ld_lease_clear(&l);
}
END_TEST

static char *lease_with_holder(size_t holder_len)
{
    static const char pre[] =
        "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"holderIdentity\":\"";
    static const char post[] = "\"}}";
    char *buf = malloc(sizeof pre + holder_len + sizeof post);

    ck_assert_ptr_nonnull(buf);
    memcpy(buf, pre, sizeof pre - 1);
    memset(buf + sizeof pre - 1, 'h', holder_len);
    memcpy(buf + sizeof pre - 1 + holder_len, post, sizeof post);
    return buf;
}

/* The display form of an abridged value, built independently of lease.c. */
static void shown_form(char *out, size_t cap, const char *v, size_t len, size_t prefix)
{
    snprintf(out, cap, "%.*s...(truncated: %zu bytes, fnv1a64=%016" PRIx64 ")",
             (int)prefix, v, len, ld_fnv1a64(v, len));
}

START_TEST(holder_length)
{
    static const size_t lens[] = {LD_LEASE_MAX_HOLDER, LD_LEASE_MAX_HOLDER + 1,
                                  1024 * 1024};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char *text = lease_with_holder(lens[i]);
        struct ld_lease l;
        struct ld_errinfo e;
        ld_lease_init(&l);
        ld_errinfo_clear(&e);
        ck_assert_int_eq(decode_str(text, &l, &e), LD_OK);
        bool abridged = lens[i] > LD_LEASE_MAX_HOLDER;
        ck_assert_int_eq(l.spec.holder_abridged, abridged);
        if (abridged) {
            char want[256];
            const char *holder = strstr(text, "hhh");
            shown_form(want, sizeof want, holder, lens[i], LD_LEASE_SHOWN_PREFIX);
            ck_assert_str_eq(l.spec.holder, want);
            ck_assert(!ld_lease_spec_held_by(&l.spec, want));
        } else {
            ck_assert_uint_eq(strlen(l.spec.holder), lens[i]);
            ck_assert(ld_lease_spec_held_by(&l.spec, l.spec.holder));
        }
        ld_lease_clear(&l);
        free(text);
    }
}
END_TEST

/* Values Kubernetes accepts but a C string cannot hold in full are kept
 * in a display form; the prefix stops at a NUL and at a character
 * boundary, and the hash tells values with the same prefix apart. */
START_TEST(abridged_values)
{
    struct ld_lease l;
    char want[256];

    ld_lease_init(&l);
    ck_assert_int_eq(
        decode_str("{\"metadata\":{\"name\":\"x\"},\"spec\":{"
                   "\"holderIdentity\":\"a\\u0000b\","
                   "\"strategy\":\"s\\u0000\",\"preferredHolder\":\"\\u0000\"}}",
                   &l, NULL),
        LD_OK);
    shown_form(want, sizeof want, "a\0b", 3, 1);
    ck_assert_str_eq(l.spec.holder, want);
    ck_assert(l.spec.holder_abridged && l.spec.strategy_abridged &&
              l.spec.preferred_abridged);
    shown_form(want, sizeof want, "\0", 1, 0);
    ck_assert_str_eq(l.spec.preferred_holder, want);
    ld_lease_clear(&l);

    /* 63 ASCII bytes, then a 2-byte character across the 64-byte cut. */
    size_t n = 2000;
    char *holder = malloc(n + 1);
    ck_assert_ptr_nonnull(holder);
    memset(holder, 'x', n);
    holder[n] = '\0';
    memcpy(holder + 63, "\xc3\xa9", 2);
    char *text = malloc(n + 128);
    ck_assert_ptr_nonnull(text);
    snprintf(text, n + 128,
             "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"holderIdentity\":\"%s\"}}",
             holder);
    ck_assert_int_eq(decode_str(text, &l, NULL), LD_OK);
    shown_form(want, sizeof want, holder, n, 63);
    ck_assert_str_eq(l.spec.holder, want);
    struct ld_lease other;
    ld_lease_init(&other);
    holder[n - 1] = 'y'; /* same prefix, other value */
    snprintf(text, n + 128,
             "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"holderIdentity\":\"%s\"}}",
             holder);
    ck_assert_int_eq(decode_str(text, &other, NULL), LD_OK);
    ck_assert(!ld_lease_spec_equal(&l.spec, &other.spec));
    ld_lease_clear(&other);
    ld_lease_clear(&l);
    free(text);
    free(holder);

    /* metadata must still be plain strings */
    ck_assert_int_eq(
        decode_str("{\"metadata\":{\"name\":\"a\\u0000\"},\"spec\":{}}", &l, NULL),
        LD_EDECODE);
}
END_TEST

/* A write of an abridged record keeps the server's values; replacing the
 * holder writes a normal one. */
START_TEST(encode_keeps_abridged_values)
{
    struct ld_lease l;
    ld_lease_init(&l);
    char *text = lease_with_holder(5000);
    ck_assert_int_eq(decode_str(text, &l, NULL), LD_OK);
    char *enc = ld_lease_encode(&l);
    ck_assert_ptr_nonnull(enc);
    char *quoted = malloc(5000 + 3);
    ck_assert_ptr_nonnull(quoted);
    memset(quoted, 'h', 5000 + 2);
    quoted[0] = quoted[5001] = '"';
    quoted[5002] = '\0';
    ck_assert_ptr_nonnull(strstr(enc, quoted));
    free(quoted);
    free(enc);
    ck_assert_int_eq(ld_lease_spec_set_holder(&l.spec, "me"), LD_OK);
    ck_assert(!l.spec.holder_abridged);
    enc = ld_lease_encode(&l);
    ck_assert_ptr_nonnull(enc);
    ck_assert_ptr_nonnull(strstr(enc, "\"holderIdentity\":\"me\""));
    ck_assert_ptr_null(strstr(enc, "hhh"));
    free(enc);
    ld_lease_clear(&l);
    free(text);

    ck_assert_int_eq(
        decode_str("{\"metadata\":{\"name\":\"x\"},\"spec\":{"
                   "\"holderIdentity\":\"a\",\"preferredHolder\":\"p\\u0000q\"}}",
                   &l, NULL),
        LD_OK);
    enc = ld_lease_encode(&l);
    ck_assert_ptr_nonnull(enc);
    ck_assert_ptr_nonnull(strstr(enc, "\"preferredHolder\":\"p\\u0000q\""));
    free(enc);
    ld_lease_clear(&l);
}
END_TEST

START_TEST(fnv1a64_vectors)
{
    ck_assert_uint_eq(ld_fnv1a64("", 0), UINT64_C(0xcbf29ce484222325));
    ck_assert_uint_eq(ld_fnv1a64("a", 1), UINT64_C(0xaf63dc4c8601ec8c));
    ck_assert_uint_eq(ld_fnv1a64("foobar", 6), UINT64_C(0x85944171f73967e8));
}
END_TEST

START_TEST(negative_duration_message)
{
    struct ld_lease l;
    struct ld_errinfo e;

    ld_lease_init(&l);
    ld_errinfo_clear(&e);
    ck_assert_int_eq(decode_str("{\"metadata\":{\"name\":\"x\"},"
                                "\"spec\":{\"leaseDurationSeconds\":-5}}",
                                &l, &e),
                     LD_EDECODE);
    ck_assert_str_eq(e.msg, "lease: negative spec.leaseDurationSeconds (-5)");
}
END_TEST

START_TEST(invalid_json)
{
    static const char *const cases[] = {
        "",
        "{",
        "nul",
        "null",
        "[]",
        "\"Lease\"",
        "{\"metadata\":{\"name\":\"x\"},\"spec\":{}} trailing",
        "{\"metadata\":{\"name\":\"x\"},\"spec\":{},\"spec\":{}}",
        "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"leaseTransitions\":1e3}}",
        "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"leaseTransitions\":"
        "99999999999999999999}}",
        "{\"metadata\":{\"name\":\"\xff\"},\"spec\":{}}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ld_lease l;
        struct ld_errinfo e;
        ld_lease_init(&l);
        ck_assert_int_eq(
            decode_str("{\"metadata\":{\"name\":\"x\"},\"spec\":{}}", &l, NULL), LD_OK);
        ld_errinfo_clear(&e);
        ck_assert_msg(decode_str(cases[i], &l, &e) == LD_EDECODE, "%s", cases[i]);
        ck_assert_int_eq(e.code, LD_EDECODE);
        ck_assert_str_ne(e.msg, "");
        assert_cleared(&l);
    }
}
END_TEST

START_TEST(decode_null_args)
{
    struct ld_lease l;
    struct ld_errinfo e;

    ld_lease_init(&l);
    ld_errinfo_clear(&e);
    ck_assert_int_eq(ld_lease_decode(NULL, 10, &l, &e), LD_EDECODE);
    ck_assert_int_eq(ld_lease_decode("{}", 2, NULL, &e), LD_EINVAL);
    ck_assert_int_eq(ld_lease_from_json(NULL, &l, &e), LD_EDECODE);
    ck_assert_int_eq(ld_lease_from_json(json_null(), &l, NULL), LD_EDECODE);
    assert_cleared(&l);
}
END_TEST

/* The text may carry NULs past len: only len bytes are read. */
START_TEST(decode_respects_len)
{
    const char text[] = "{\"metadata\":{\"name\":\"x\"},\"spec\":{}}GARBAGE";
    struct ld_lease l;

    ld_lease_init(&l);
    ck_assert_int_eq(ld_lease_decode(text, strlen(text) - 7, &l, NULL), LD_OK);
    ld_lease_clear(&l);
}
END_TEST

/* Re-decoding a lease's own object into the same lease is safe. */
START_TEST(from_json_aliasing)
{
    size_t len;
    char *text = read_data("lease_kube.json", &len);
    struct ld_lease l;

    ld_lease_init(&l);
    ck_assert_int_eq(ld_lease_decode(text, len, &l, NULL), LD_OK);
    ck_assert_int_eq(ld_lease_from_json(l.object, &l, NULL), LD_OK);
    ck_assert_str_eq(l.name, "my-app-leader");
    ck_assert_int_eq(l.spec.transitions, 7);
    ld_lease_clear(&l);
    ld_lease_clear(&l);
    ld_lease_clear(NULL);
    free(text);
}
END_TEST

/* ---- copy and equality ---- */

/* A compact copy keeps the object as text and encodes to the same object,
 * also when copied on (plainly or compactly) or changed. */
/* A string with a NUL in it (a hostile or broken writer's annotation, or
 * holder) survives the compact copy: its text must parse back as the API
 * server's answer did, or the next renewal could not be encoded at all. */
START_TEST(compact_copy_keeps_nul_bytes)
{
    static const char text[] =
        "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
        "\"metadata\":{\"name\":\"demo\",\"namespace\":\"default\","
        "\"uid\":\"u1\",\"resourceVersion\":\"7\","
        "\"annotations\":{\"note\":\"a\\u0000b\"}},"
        "\"spec\":{\"holderIdentity\":\"x\\u0000y\",\"leaseDurationSeconds\":15}}";
    struct ld_lease a, b;

    ld_lease_init(&a);
    ld_lease_init(&b);
    ck_assert_int_eq(ld_lease_decode(text, sizeof text - 1, &a, NULL), LD_OK);
    ck_assert_int_eq(ld_lease_copy_compact(&b, &a), LD_OK);
    char *enc = ld_lease_encode(&b);
    ck_assert_ptr_nonnull(enc);
    json_t *j = json_loads(enc, JSON_ALLOW_NUL, NULL);
    ck_assert_ptr_nonnull(j);
    json_t *note = json_object_get(
        json_object_get(json_object_get(j, "metadata"), "annotations"), "note");
    ck_assert_uint_eq(json_string_length(note), 3);
    ck_assert_mem_eq(json_string_value(note), "a\0b", 3);
    json_decref(j);
    free(enc);
    ld_lease_clear(&a);
    ld_lease_clear(&b);
}
END_TEST

START_TEST(compact_copy_encodes_the_same)
{
    size_t len;
    char *text = read_data("lease_kube.json", &len);
    struct ld_lease a, b, c;

    ld_lease_init(&a);
    ld_lease_init(&b);
    ld_lease_init(&c);
    ck_assert_int_eq(ld_lease_decode(text, len, &a, NULL), LD_OK);
    ck_assert_int_eq(ld_lease_copy_compact(&b, &a), LD_OK);
    ck_assert_ptr_null(b.object);
    ck_assert_ptr_nonnull(b.object_text);
    ck_assert(ld_lease_spec_equal(&a.spec, &b.spec));
    ck_assert_str_eq(b.uid, a.uid);
    ck_assert_int_eq(ld_lease_copy(&c, &b), LD_OK);
    ck_assert_ptr_null(c.object);
    ck_assert_str_eq(c.object_text, b.object_text);
    ck_assert_int_eq(ld_lease_copy_compact(&c, &b), LD_OK);
    ck_assert_str_eq(c.object_text, b.object_text);
    ck_assert_int_eq(ld_lease_spec_set_holder(&a.spec, "someone-else"), LD_OK);
    ck_assert_int_eq(ld_lease_spec_set_holder(&c.spec, "someone-else"), LD_OK);
    char *ea = ld_lease_encode(&a), *ec = ld_lease_encode(&c);
    ck_assert_ptr_nonnull(ea);
    ck_assert_ptr_nonnull(ec);
    json_t *ja = json_loads(ea, 0, NULL), *jc = json_loads(ec, 0, NULL);
    ck_assert_msg(json_equal(ja, jc), "%s\nvs\n%s", ea, ec);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(jc, "spec"), "holderIdentity")),
        "someone-else");
    json_decref(ja);
    json_decref(jc);
    free(ea);
    free(ec);
    ld_lease_clear(&a);
    ld_lease_clear(&b);
    ld_lease_clear(&c);
    free(text);
}
END_TEST

START_TEST(copy_is_deep)
{
    size_t len;
    char *text = read_data("lease_kube.json", &len);
    struct ld_lease a, b;

    ld_lease_init(&a);
    ld_lease_init(&b);
    ck_assert_int_eq(ld_lease_decode(text, len, &a, NULL), LD_OK);
    ck_assert_int_eq(ld_lease_copy(&b, &a), LD_OK);
    ck_assert_ptr_ne(b.name, a.name);
    ck_assert_ptr_ne(b.spec.holder, a.spec.holder);
    ck_assert_ptr_ne(b.uid, a.uid);
    ck_assert_ptr_ne(b.object, a.object);
    ck_assert(json_equal(a.object, b.object));
    ck_assert(ld_lease_spec_equal(&a.spec, &b.spec));
    ck_assert_str_eq(b.resource_version, a.resource_version);
    ck_assert_str_eq(b.uid, a.uid);
    ck_assert_int_eq(ld_lease_copy(&b, &a), LD_OK); /* over a filled dst */
    ck_assert_int_eq(ld_lease_copy(&b, &b), LD_OK); /* onto itself */
    ld_lease_clear(&a);
    ck_assert_str_eq(b.name, "my-app-leader");
    ld_lease_clear(&b);
    free(text);
}
END_TEST

START_TEST(spec_equal_fields)
{
    struct ld_lease_spec a = {0}, b = {0};

    a.holder = "x";
    a.duration_s = 15;
    a.has_renew = true;
    a.renew_us = 5;
    a.transitions = 2;
    b = a;
    ck_assert(ld_lease_spec_equal(&a, &b));
    b.holder = "y";
    ck_assert(!ld_lease_spec_equal(&a, &b));
    b = a;
    b.duration_s = 16;
    ck_assert(!ld_lease_spec_equal(&a, &b));
    b = a;
    b.renew_us = 6;
    ck_assert(!ld_lease_spec_equal(&a, &b));
    b = a;
    b.has_renew = false;
    ck_assert(!ld_lease_spec_equal(&a, &b));
    b = a;
    b.has_acquire = true;
    ck_assert(!ld_lease_spec_equal(&a, &b));
    b = a;
    b.transitions = 3;
    ck_assert(!ld_lease_spec_equal(&a, &b));
    b = a;
    b.strategy = "OldestEmulationVersion";
    ck_assert(!ld_lease_spec_equal(&a, &b));
    b = a;
    b.preferred_holder = "z";
    ck_assert(!ld_lease_spec_equal(&a, &b));
    /* Absent and empty strings compare equal. */
    b = a;
    b.strategy = "";
    b.preferred_holder = "";
    ck_assert(ld_lease_spec_equal(&a, &b));
    a.holder = NULL;
    b.holder = "";
    ck_assert(ld_lease_spec_equal(&a, &b));
    /* Time values do not matter when the time is absent. */
    a.has_renew = b.has_renew = false;
    b.renew_us = 99;
    ck_assert(ld_lease_spec_equal(&a, &b));
    ck_assert(!ld_lease_spec_equal(&a, NULL));
    ck_assert(ld_lease_spec_equal(NULL, NULL));
}
END_TEST

START_TEST(spec_copy)
{
    struct ld_lease_spec src = {0}, dst = {0};

    src.holder = "me";
    src.strategy = "s";
    src.duration_s = 9;
    src.has_acquire = true;
    src.acquire_us = -3;
    ck_assert_int_eq(ld_lease_spec_copy(&dst, &src), LD_OK);
    ck_assert_ptr_ne(dst.holder, src.holder);
    ck_assert(ld_lease_spec_equal(&src, &dst));
    ck_assert_ptr_null(dst.preferred_holder);
    ck_assert_int_eq(ld_lease_spec_copy(&dst, &src), LD_OK);
    ld_lease_spec_clear(&dst);
    ck_assert(all_zero(&dst, sizeof dst));
    ld_lease_spec_clear(NULL);
}
END_TEST

/* ---- Status bodies ---- */

static void status_from_file(const char *name, struct ld_errinfo *e)
{
    size_t len;
    char *text = read_data(name, &len);

    ld_errinfo_clear(e);
    e->code = LD_EHTTP;
    e->http_status = 999;
    ld_status_decode(text, len, e);
    ck_assert_int_eq(e->code, LD_EHTTP);
    ck_assert_int_eq(e->http_status, 999);
    free(text);
}

START_TEST(status_bodies)
{
    static const struct {
        const char *file, *reason, *msg;
    } cases[] = {
        {"status_404.json", "NotFound",
         "leases.coordination.k8s.io \"my-lease\" not found"},
        {"status_409_conflict.json", "Conflict",
         "Operation cannot be fulfilled on leases.coordination.k8s.io \"my-lease\": the "
         "object has been modified; please apply your changes to the latest version and "
         "try again"},
        {"status_409_exists.json", "AlreadyExists",
         "leases.coordination.k8s.io \"my-lease\" already exists"},
        {"status_422.json", "Invalid",
         "Lease.coordination.k8s.io \"my-lease\" is invalid: spec.leaseDurationSeconds: "
         "Invalid value: 0: must be greater than 0"},
        {"status_410_expired.json", "Expired", "too old resource version: 123 (456)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ld_errinfo e;
        status_from_file(cases[i].file, &e);
        ck_assert_str_eq(e.reason, cases[i].reason);
        ck_assert_str_eq(e.msg, cases[i].msg);
        ck_assert_int_eq(e.retry_after_ms, 0);
    }
}
END_TEST

START_TEST(status_retry_after)
{
    struct ld_errinfo e;
    const char *tmpl = "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\","
                       "\"details\":{\"retryAfterSeconds\":%s},\"code\":429}";
    static const struct {
        const char *val;
        int64_t want;
    } cases[] = {
        {"3", 3000}, {"0", 0},      {"3600", 3600000}, {"3601", -1},
        {"-1", -1},  {"\"5\"", -1}, {"2.5", -1},       {"null", -1},
    };

    status_from_file("status_504_retry.json", &e);
    ck_assert_str_eq(e.reason, "Timeout");
    ck_assert_int_eq(e.retry_after_ms, 2000);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, tmpl, cases[i].val);
        ld_errinfo_clear(&e);
        e.retry_after_ms = -1; /* stands for a Retry-After header already seen */
        ld_status_decode(body, strlen(body), &e);
        ck_assert_str_eq(e.reason, "TooManyRequests");
        ck_assert_msg(e.retry_after_ms == cases[i].want, "%s", cases[i].val);
    }
}
END_TEST

START_TEST(status_plain_text)
{
    static const struct {
        const char *body, *msg;
    } cases[] = {
        {"Too many requests, please try again later.\n",
         "Too many requests, please try again later."},
        {"\n\n   \r\n  upstream connect error\r\nsecond line\n",
         "upstream connect error"},
        {"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>nginx</body>"
         "</html>\r\n",
         "502 Bad Gateway"},
        {"<HTML><TITLE>\n  Service\tUnavailable \n</TITLE>", "Service Unavailable"},
        {"<html><body>oops</body></html>", "<html><body>oops</body></html>"},
        {"bad\x01\x1b[31mred\x7f\xc3\xa9", "bad??[31mred???"},
        {"{\"error\":\"not a status\"}", "{\"error\":\"not a status\"}"},
        {"   \n\t\n", ""},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ld_errinfo e;
        ld_errinfo_clear(&e);
        snprintf(e.reason, sizeof e.reason, "stale");
        snprintf(e.msg, sizeof e.msg, "stale");
        ld_status_decode(cases[i].body, strlen(cases[i].body), &e);
        ck_assert_str_eq(e.reason, "");
        ck_assert_str_eq(e.msg, cases[i].msg);
    }
}
END_TEST

START_TEST(status_truncates)
{
    char big[4096], *json = malloc(8192);
    struct ld_errinfo e;

    ck_assert_ptr_nonnull(json);
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ld_status_decode(big, strlen(big), &e);
    ck_assert_uint_eq(strlen(e.msg), sizeof e.msg - 1);
    /* A long UTF-8 message is cut on a character boundary, and control
     * characters inside a JSON message cannot start a new log line. */
    snprintf(json, 8192, "{\"kind\":\"Status\",\"reason\":\"%s\",\"message\":\"a\\nbc",
             big);
    size_t used = strlen(json);
    for (int i = 0; i < 200; i++)
        used += (size_t)snprintf(json + used, 8192 - used, "\xc3\xa9");
    snprintf(json + used, 8192 - used, "\"}");
    ld_status_decode(json, strlen(json), &e);
    ck_assert_uint_eq(strlen(e.reason), sizeof e.reason - 1);
    ck_assert(strncmp(e.msg, "a bc\xc3\xa9", 6) == 0);
    ck_assert_uint_eq(strlen(e.msg), 254); /* 4 + 125 * 2; byte 255 would split a char */
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    ld_status_decode("x", 1, NULL);
    ld_status_decode(NULL, 5, &e);
    ck_assert_str_eq(e.msg, "");
    free(json);
}
END_TEST

/* ---- robustness against allocation failure ---- */

static long alloc_budget = -1;

static void *failing_malloc(size_t n)
{
    if (alloc_budget == 0)
        return NULL;
    if (alloc_budget > 0)
        alloc_budget--;
    return malloc(n);
}

/* jansson's allocations fail after N successes, for every N until the
 * operation succeeds: no crash, no leak (valgrind/ASan), and a failure is
 * reported as a failure. */
START_TEST(jansson_alloc_failure)
{
    size_t len;
    char *text = read_data("lease_kube.json", &len), *enc = NULL;
    struct ld_lease l;
    enum ld_err rc = LD_ENOMEM;
    long n, m;

    ld_lease_init(&l);
    json_set_alloc_funcs(failing_malloc, free);
    for (n = 0; n < 100000 && rc != LD_OK; n++) {
        alloc_budget = n;
        rc = ld_lease_decode(text, len, &l, NULL);
        ck_assert(rc == LD_OK || rc == LD_ENOMEM || rc == LD_EDECODE);
    }
    for (m = 0; m < 100000 && !enc; m++) {
        alloc_budget = m;
        enc = ld_lease_encode(&l);
    }
    alloc_budget = -1;
    json_set_alloc_funcs(malloc, free);
    ck_assert_int_eq(rc, LD_OK);
    ck_assert_int_gt(n, 50);
    ck_assert_int_gt(m, 50);
    ck_assert_ptr_nonnull(enc);
    ck_assert_ptr_nonnull(strstr(enc, "\"leaseTransitions\":7"));
    free(enc);
    ld_lease_clear(&l);
    free(text);
}
END_TEST

/* ---- err and log ---- */

START_TEST(errinfo)
{
    struct ld_errinfo e;
    char big[600];

    ck_assert_str_eq(ld_strerror(LD_OK), "ok");
    ck_assert_str_eq(ld_strerror(LD_ECONFLICT), "conflict");
    ck_assert_str_eq(ld_strerror(LD_ETIMEOUT), "timeout");
    for (int c = LD_OK; c <= LD_ECONFIG; c++)
        ck_assert_str_ne(ld_strerror((enum ld_err)c), "unknown error");
    ck_assert_str_eq(ld_strerror((enum ld_err)999), "unknown error");
    ck_assert_str_eq(ld_strerror((enum ld_err) - 1), "unknown error");

    memset(&e, 0x5a, sizeof e);
    ld_errinfo_clear(&e);
    ck_assert(all_zero(&e, sizeof e));
    e.http_status = 409;
    snprintf(e.reason, sizeof e.reason, "Conflict");
    ck_assert_int_eq(ld_errinfo_set(&e, LD_ECONFLICT, "lease %s: %d", "x", 7),
                     LD_ECONFLICT);
    ck_assert_int_eq(e.code, LD_ECONFLICT);
    ck_assert_str_eq(e.msg, "lease x: 7");
    ck_assert_int_eq(e.http_status, 409);
    ck_assert_str_eq(e.reason, "Conflict");
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ld_errinfo_set(&e, LD_EINVAL, "%s", big);
    ck_assert_uint_eq(strlen(e.msg), sizeof e.msg - 1);
    ck_assert_int_eq(ld_errinfo_set(NULL, LD_EIO, "x"), LD_EIO);
    ld_errinfo_clear(NULL);
}
END_TEST

struct captured {
    int calls;
    enum ld_log_level level;
    char msg[2048];
};

static void capture_sink(void *ctx, enum ld_log_level level, const char *msg)
{
    struct captured *c = ctx;

    c->calls++;
    c->level = level;
    snprintf(c->msg, sizeof c->msg, "%s", msg);
}

START_TEST(logging)
{
    struct captured c = {0};
    char big[3000];

    ck_assert(!ld_log_enabled(LD_LOG_ERROR));
    ld_log(LD_LOG_ERROR, "dropped %d", 1);
    ld_log_set_sink(capture_sink, &c, LD_LOG_WARN);
    ck_assert(!ld_log_enabled(LD_LOG_INFO));
    ck_assert(ld_log_enabled(LD_LOG_WARN));
    ld_log(LD_LOG_INFO, "below threshold");
    ck_assert_int_eq(c.calls, 0);
    ld_log(LD_LOG_ERROR, "lease %s lost after %d ms", "l", 10);
    ck_assert_int_eq(c.calls, 1);
    ck_assert_int_eq(c.level, LD_LOG_ERROR);
    ck_assert_str_eq(c.msg, "lease l lost after 10 ms");
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ld_log(LD_LOG_WARN, "%s", big);
    ck_assert_int_eq(c.calls, 2);
    ck_assert_uint_eq(strlen(c.msg), 1023);
    ld_log_set_sink(NULL, NULL, LD_LOG_DEBUG);
    ld_log(LD_LOG_ERROR, "silenced");
    ck_assert_int_eq(c.calls, 2);
}
END_TEST

static Suite *lease_suite(void)
{
    Suite *s = suite_create("lease");
    TCase *dec = tcase_create("decode");
    TCase *enc = tcase_create("encode");
    TCase *misc = tcase_create("copy");
    TCase *st = tcase_create("status");
    TCase *sup = tcase_create("support");

    tcase_add_test(dec, decode_kube_lease);
    tcase_add_test(dec, annotations_are_set_next_to_the_others);
    tcase_add_test(dec, decode_released);
    tcase_add_test(dec, decode_null_times);
    tcase_add_test(dec, decode_minimal);
    tcase_add_test(dec, decode_lenient_times);
    tcase_add_loop_test(dec, wrong_types, 0,
                        (int)(sizeof bad_fields / sizeof bad_fields[0]));
    tcase_add_test(dec, nulls_are_absent);
    tcase_add_test(dec, holder_length);
    tcase_add_test(dec, abridged_values);
    tcase_add_test(enc, encode_keeps_abridged_values);
    tcase_add_test(misc, fnv1a64_vectors);
    tcase_add_test(dec, negative_duration_message);
    tcase_add_test(dec, invalid_json);
    tcase_add_test(dec, decode_null_args);
    tcase_add_test(dec, decode_respects_len);
    tcase_add_test(dec, from_json_aliasing);
    tcase_add_test(enc, round_trip_kube_lease);
    tcase_add_test(enc, encode_preserves_unknown);
    tcase_add_test(enc, incarnation_annotation_round_trip);
    tcase_add_test(enc, incarnation_with_nul_names_nobody);
    tcase_add_test(enc, encode_fresh_exact);
    tcase_add_test(enc, encode_zeroed);
    tcase_add_test(enc, encode_removes_keys);
    tcase_add_test(enc, encode_invalid_utf8_fails);
    tcase_add_test(enc, jansson_alloc_failure);
    tcase_add_test(misc, copy_is_deep);
    tcase_add_test(misc, compact_copy_encodes_the_same);
    tcase_add_test(misc, compact_copy_keeps_nul_bytes);
    tcase_add_test(misc, spec_equal_fields);
    tcase_add_test(misc, spec_copy);
    tcase_add_test(st, status_bodies);
    tcase_add_test(st, status_retry_after);
    tcase_add_test(st, status_plain_text);
    tcase_add_test(st, status_truncates);
    tcase_add_test(sup, errinfo);
    tcase_add_test(sup, logging);
    suite_add_tcase(s, dec);
    suite_add_tcase(s, enc);
    suite_add_tcase(s, misc);
    suite_add_tcase(s, st);
    suite_add_tcase(s, sup);
    return s;
}

int main(void)
{
    return ld_test_run(lease_suite());
}
