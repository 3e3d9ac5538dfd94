/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease: Lease <-> JSON, and metav1.Status error bodies.
 *
 * Decoding is strict about types and ranges because a misread Lease can
 * make two replicas lead at once. JSON null is treated as "absent" for every
 * optional field, as Go's decoder (and so every peer and the API server)
 * does for the pointer fields of LeaseSpec and for ObjectMeta strings.
 */
#include "lease.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hash.h"
#include "timefmt.h"

#define LEASE_API_VERSION "coordination.k8s.io/v1"
#define LEASE_KIND "Lease"

/* A Status retry hint beyond an hour is treated as nonsense, not obeyed. */
#define STATUS_MAX_RETRY_S 3600

void ld_lease_init(struct ld_lease *l)
{
    if (l)
        memset(l, 0, sizeof *l);
}

void ld_lease_spec_clear(struct ld_lease_spec *s)
{
    if (!s)
        return;
    free(s->holder);
    free(s->strategy);
    free(s->preferred_holder);
    memset(s, 0, sizeof *s);
}

void ld_lease_clear(struct ld_lease *l)
{
    if (!l)
        return;
    free(l->name);
    free(l->namespace_);
    free(l->resource_version);
    free(l->uid);
    free(l->incarnation);
    ld_lease_spec_clear(&l->spec);
    json_decref(l->object);
    free(l->object_text);
    memset(l, 0, sizeof *l);
}

/* *dst = copy of src (NULL stays NULL); false on allocation failure. */
static bool dup_opt(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return !src || *dst;
}

/* dst must be initialised (zeroed or filled); it is replaced only on
 * success, so dst == src and failures leave it as it was. */
enum ld_err ld_lease_spec_copy(struct ld_lease_spec *dst, const struct ld_lease_spec *src)
{
    struct ld_lease_spec tmp;

    if (!dst || !src)
        return LD_EINVAL;
    tmp = *src;
    tmp.holder = tmp.strategy = tmp.preferred_holder = NULL;
    if (!dup_opt(&tmp.holder, src->holder) || !dup_opt(&tmp.strategy, src->strategy) ||
        !dup_opt(&tmp.preferred_holder, src->preferred_holder)) {
        ld_lease_spec_clear(&tmp);
        return LD_ENOMEM;
    }
    ld_lease_spec_clear(dst);
    *dst = tmp;
    return LD_OK;
}

/* dst must be initialised; on success it is cleared and replaced, on
 * failure left untouched. The object is deep-copied so the copy can be used
 * from another thread without sharing jansson reference counts; as text
 * when compact (an object_text stays text either way). */
static enum ld_err copy_lease(struct ld_lease *dst, const struct ld_lease *src,
                              bool compact)
{
    struct ld_lease tmp;
    enum ld_err rc = LD_ENOMEM;

    if (!dst || !src)
        return LD_EINVAL;
    ld_lease_init(&tmp);
    if (!dup_opt(&tmp.name, src->name) || !dup_opt(&tmp.namespace_, src->namespace_) ||
        !dup_opt(&tmp.resource_version, src->resource_version) ||
        !dup_opt(&tmp.uid, src->uid) || !dup_opt(&tmp.incarnation, src->incarnation) ||
        !dup_opt(&tmp.object_text, src->object_text))
        goto out;
    rc = ld_lease_spec_copy(&tmp.spec, &src->spec);
    if (rc != LD_OK || !src->object)
        goto out;
    if (compact) {
        free(tmp.object_text);
        tmp.object_text = json_dumps(src->object, JSON_COMPACT);
        rc = tmp.object_text ? LD_OK : LD_ENOMEM;
    } else {
        tmp.object = json_deep_copy(src->object);
        rc = tmp.object ? LD_OK : LD_ENOMEM;
    }
out:
    if (rc != LD_OK) {
        ld_lease_clear(&tmp);
        return rc;
    }
    ld_lease_clear(dst);
    *dst = tmp;
    return LD_OK;
}

enum ld_err ld_lease_copy(struct ld_lease *dst, const struct ld_lease *src)
{
    return copy_lease(dst, src, false);
}

enum ld_err ld_lease_copy_compact(struct ld_lease *dst, const struct ld_lease *src)
{
    return copy_lease(dst, src, true);
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

static bool time_equal(bool has_a, int64_t a, bool has_b, int64_t b)
{
    return has_a == has_b && (!has_a || a == b);
}

bool ld_lease_spec_equal(const struct ld_lease_spec *a, const struct ld_lease_spec *b)
{
    if (a == b)
        return true;
    if (!a || !b)
        return false;
    return strcmp(or_empty(a->holder), or_empty(b->holder)) == 0 &&
           a->holder_abridged == b->holder_abridged && a->duration_s == b->duration_s &&
           time_equal(a->has_acquire, a->acquire_us, b->has_acquire, b->acquire_us) &&
           time_equal(a->has_renew, a->renew_us, b->has_renew, b->renew_us) &&
           a->transitions == b->transitions &&
           strcmp(or_empty(a->strategy), or_empty(b->strategy)) == 0 &&
           a->strategy_abridged == b->strategy_abridged &&
           strcmp(or_empty(a->preferred_holder), or_empty(b->preferred_holder)) == 0 &&
           a->preferred_abridged == b->preferred_abridged;
}

bool ld_lease_spec_held_by(const struct ld_lease_spec *s, const char *identity)
{
    return s && identity && !s->holder_abridged &&
           strcmp(or_empty(s->holder), identity) == 0;
}

bool ld_lease_held_by(const struct ld_lease *l, const char *identity,
                      const char *incarnation)
{
    if (!l || !ld_lease_spec_held_by(&l->spec, identity))
        return false;
    if (!incarnation || !*incarnation)
        return !l->incarnation || !*l->incarnation;
    return l->incarnation && strcmp(l->incarnation, incarnation) == 0;
}

bool ld_lease_same_object(const struct ld_lease *a, const struct ld_lease *b)
{
    return !a->uid || !b->uid || strcmp(a->uid, b->uid) == 0;
}

enum ld_err ld_lease_set_incarnation(struct ld_lease *l, const char *incarnation)
{
    char *copy = NULL;
    if (incarnation && *incarnation && !(copy = strdup(incarnation)))
        return LD_ENOMEM;
    free(l->incarnation);
    l->incarnation = copy;
    return LD_OK;
}

enum ld_err ld_lease_spec_set_holder(struct ld_lease_spec *s, const char *holder)
{
    char *copy = strdup(holder);

    if (!copy)
        return LD_ENOMEM;
    free(s->holder);
    s->holder = copy;
    s->holder_abridged = false;
    return LD_OK;
}

/* ---- decoding ---- */

static enum ld_err bad(struct ld_errinfo *err, const char *field, const char *what)
{
    return ld_errinfo_set(err, LD_EDECODE, "lease: %s %s", field, what);
}

static enum ld_err no_memory(struct ld_errinfo *err)
{
    return ld_errinfo_set(err, LD_ENOMEM, "lease: out of memory");
}

/* *out = the string at obj[key] (borrowed from obj), NULL when absent or
 * null. Strings with an embedded NUL are refused: C would see less. */
static enum ld_err get_string(json_t *obj, const char *key, const char *field,
                              const char **out, struct ld_errinfo *err)
{
    json_t *v = json_object_get(obj, key);

    *out = NULL;
    if (!v || json_is_null(v))
        return LD_OK;
    if (!json_is_string(v))
        return bad(err, field, "is not a string");
    if (strlen(json_string_value(v)) != json_string_length(v))
        return bad(err, field, "contains a NUL byte");
    *out = json_string_value(v);
    return LD_OK;
}

/* int32 >= 0 at obj[key]; 0 when absent or null. */
static enum ld_err get_count(json_t *obj, const char *key, const char *field,
                             int32_t *out, struct ld_errinfo *err)
{
    json_t *v = json_object_get(obj, key);
    json_int_t n;

    *out = 0;
    if (!v || json_is_null(v))
        return LD_OK;
    if (!json_is_integer(v))
        return bad(err, field, "is not an integer");
    n = json_integer_value(v);
    if (n < 0)
        return ld_errinfo_set(err, LD_EDECODE,
                              "lease: negative %s (%" JSON_INTEGER_FORMAT ")", field, n);
    if (n > INT32_MAX)
        return bad(err, field, "is out of range");
    *out = (int32_t)n;
    return LD_OK;
}

static enum ld_err get_time(json_t *obj, const char *key, const char *field, bool *has,
                            int64_t *us, struct ld_errinfo *err)
{
    const char *s;
    enum ld_err rc = get_string(obj, key, field, &s, err);

    *has = false;
    *us = 0;
    if (rc != LD_OK || !s)
        return rc;
    if (ld_microtime_parse(s, us) != LD_OK)
        return bad(err, field, "is not an RFC 3339 time");
    *has = true;
    return LD_OK;
}

/* A present kind or apiVersion must be the Lease's own. */
static enum ld_err check_const(json_t *obj, const char *key, const char *want,
                               struct ld_errinfo *err)
{
    const char *s;
    enum ld_err rc = get_string(obj, key, key, &s, err);

    if (rc == LD_OK && s && strcmp(s, want) != 0)
        rc = ld_errinfo_set(err, LD_EDECODE, "lease: %s is \"%.64s\", want \"%s\"", key,
                            s, want);
    return rc;
}

/* metadata.annotations[LD_LEASE_INCARNATION]. Anything but a string there
 * (the API server allows none) reads as no incarnation. */
static enum ld_err decode_incarnation(json_t *md, struct ld_lease *l,
                                      struct ld_errinfo *err)
{
    json_t *v = json_object_get(json_object_get(md, "annotations"), LD_LEASE_INCARNATION);
    if (!json_is_string(v))
        return LD_OK;
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (strlen(s) == len)
        l->incarnation = strdup(s);
    else if ((l->incarnation = malloc(strlen(s) + sizeof("(nul)"))) != NULL)
        sprintf(l->incarnation, "%s(nul)", s);
    return l->incarnation ? LD_OK : no_memory(err);
}

static enum ld_err decode_meta(json_t *root, struct ld_lease *l, struct ld_errinfo *err)
{
    json_t *md = json_object_get(root, "metadata");
    const char *name, *ns = NULL, *rv = NULL, *uid = NULL;
    enum ld_err rc;

    if (!md || json_is_null(md))
        return bad(err, "metadata", "is missing");
    if (!json_is_object(md))
        return bad(err, "metadata", "is not an object");
    rc = get_string(md, "name", "metadata.name", &name, err);
    if (rc == LD_OK && (!name || !*name))
        rc = bad(err, "metadata.name", "is missing or empty");
    if (rc == LD_OK)
        rc = get_string(md, "namespace", "metadata.namespace", &ns, err);
    if (rc == LD_OK)
        rc = get_string(md, "resourceVersion", "metadata.resourceVersion", &rv, err);
    if (rc == LD_OK)
        rc = get_string(md, "uid", "metadata.uid", &uid, err);
    if (rc != LD_OK)
        return rc;
    if (!dup_opt(&l->name, name) || !dup_opt(&l->namespace_, or_empty(ns)) ||
        !dup_opt(&l->resource_version, rv) || !dup_opt(&l->uid, uid))
        return no_memory(err);
    return decode_incarnation(md, l, err);
}

/* The display form of a value too long to keep or holding a NUL byte (see
 * LD_LEASE_MAX_HOLDER). v is valid UTF-8 (jansson checked it). */
static char *abridge(const char *v, size_t len)
{
    static const char fmt[] = "%.*s...(truncated: %zu bytes, fnv1a64=%016" PRIx64 ")";
    size_t keep = strnlen(v, len < LD_LEASE_SHOWN_PREFIX ? len : LD_LEASE_SHOWN_PREFIX);

    if (keep < len) {
        while (keep > 0 && ((unsigned char)v[keep] & 0xC0) == 0x80)
            keep--;
    }
    uint64_t hash = ld_fnv1a64(v, len);
    int n = snprintf(NULL, 0, fmt, (int)keep, v, len, hash);
    char *out = n < 0 ? NULL : malloc((size_t)n + 1);
    if (out)
        snprintf(out, (size_t)n + 1, fmt, (int)keep, v, len, hash);
    return out;
}

/* *out = a copy of the string at obj[key] (NULL when absent or null), or
 * its display form with *abridged set when it cannot be kept in full. */
static enum ld_err get_keepable(json_t *obj, const char *key, const char *field,
                                char **out, bool *abridged, struct ld_errinfo *err)
{
    json_t *v = json_object_get(obj, key);

    *out = NULL;
    *abridged = false;
    if (!v || json_is_null(v))
        return LD_OK;
    if (!json_is_string(v))
        return bad(err, field, "is not a string");
    const char *text = json_string_value(v);
    size_t len = json_string_length(v);
    *abridged = len > LD_LEASE_MAX_HOLDER || strlen(text) != len;
    *out = *abridged ? abridge(text, len) : strdup(text);
    return *out ? LD_OK : no_memory(err);
}

static enum ld_err decode_spec(json_t *root, struct ld_lease_spec *s,
                               struct ld_errinfo *err)
{
    json_t *spec = json_object_get(root, "spec");
    enum ld_err rc;

    if (!spec || json_is_null(spec))
        return bad(err, "spec", "is missing");
    if (!json_is_object(spec))
        return bad(err, "spec", "is not an object");
    rc = get_keepable(spec, "holderIdentity", "spec.holderIdentity", &s->holder,
                      &s->holder_abridged, err);
    if (rc == LD_OK && !s->holder)
        rc = (s->holder = strdup("")) ? LD_OK : no_memory(err);
    if (rc == LD_OK)
        rc = get_count(spec, "leaseDurationSeconds", "spec.leaseDurationSeconds",
                       &s->duration_s, err);
    if (rc == LD_OK)
        rc = get_time(spec, "acquireTime", "spec.acquireTime", &s->has_acquire,
                      &s->acquire_us, err);
    if (rc == LD_OK)
        rc = get_time(spec, "renewTime", "spec.renewTime", &s->has_renew, &s->renew_us,
                      err);
    if (rc == LD_OK)
        rc = get_count(spec, "leaseTransitions", "spec.leaseTransitions", &s->transitions,
                       err);
    if (rc == LD_OK)
        rc = get_keepable(spec, "strategy", "spec.strategy", &s->strategy,
                          &s->strategy_abridged, err);
    if (rc == LD_OK)
        rc = get_keepable(spec, "preferredHolder", "spec.preferredHolder",
                          &s->preferred_holder, &s->preferred_abridged, err);
    return rc;
}

/* Decodes into a temporary and only then replaces *out, so obj may be
 * out->object itself (re-decoding a stored object). */
enum ld_err ld_lease_from_json(json_t *obj, struct ld_lease *out, struct ld_errinfo *err)
{
    struct ld_lease tmp;
    enum ld_err rc;

    if (!out)
        return ld_errinfo_set(err, LD_EINVAL, "lease: no output");
    ld_lease_init(&tmp);
    if (!json_is_object(obj)) {
        rc = ld_errinfo_set(err, LD_EDECODE, "lease: not a JSON object");
        goto out;
    }
    rc = check_const(obj, "kind", LEASE_KIND, err);
    if (rc == LD_OK)
        rc = check_const(obj, "apiVersion", LEASE_API_VERSION, err);
    if (rc == LD_OK)
        rc = decode_meta(obj, &tmp, err);
    if (rc == LD_OK)
        rc = decode_spec(obj, &tmp.spec, err);
    if (rc == LD_OK)
        tmp.object = json_incref(obj);
out:
    if (rc != LD_OK)
        ld_lease_clear(&tmp);
    ld_lease_clear(out);
    *out = tmp;
    return rc;
}

enum ld_err ld_lease_decode(const char *text, size_t len, struct ld_lease *out,
                            struct ld_errinfo *err)
{
    json_error_t jerr;
    json_t *root;
    enum ld_err rc;

    if (!out)
        return ld_errinfo_set(err, LD_EINVAL, "lease: no output");
    if (!text) {
        ld_lease_clear(out);
        return ld_errinfo_set(err, LD_EDECODE, "lease: empty body");
    }
    /* Some of jansson's out-of-memory paths leave jerr unset. */
    memset(&jerr, 0, sizeof jerr);
    /* NUL is allowed: a value the API server accepts must not make the
     * whole Lease unreadable (see LD_LEASE_MAX_HOLDER). */
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root) {
        ld_lease_clear(out);
        if (json_error_code(&jerr) == json_error_out_of_memory)
            return no_memory(err);
        return ld_errinfo_set(err, LD_EDECODE, "lease: invalid JSON (line %d col %d): %s",
                              jerr.line, jerr.column, jerr.text);
    }
    rc = ld_lease_from_json(root, out, err);
    json_decref(root);
    return rc;
}

/* ---- encoding ---- */

/* obj[key] as an object, replacing anything else found there. Borrowed. */
static json_t *child_object(json_t *obj, const char *key)
{
    json_t *c = json_object_get(obj, key);

    if (json_is_object(c))
        return c;
    c = json_object();
    if (json_object_set_new(obj, key, c) != 0)
        return NULL;
    return c;
}

enum ld_err ld_lease_set_annotations(struct ld_lease *l, const char *annotations)
{
    enum ld_err rc = LD_ENOMEM;
    json_t *add = json_loads(annotations ? annotations : "", 0, NULL);
    json_t *root = l->object        ? json_deep_copy(l->object)
                   : l->object_text ? json_loads(l->object_text, JSON_ALLOW_NUL, NULL)
                                    : json_object();
    json_t *ann = NULL;
    const char *key;
    json_t *value;

    if (!json_is_object(add)) {
        rc = LD_EINVAL;
        goto out;
    }
    json_object_foreach(add, key, value)
    {
        if (!json_is_string(value)) {
            rc = LD_EINVAL;
            goto out;
        }
    }
    if (!json_is_object(root))
        goto out;
    ann = child_object(child_object(root, "metadata"), "annotations");
    if (!ann || json_object_update(ann, add) != 0)
        goto out;
    json_decref(l->object);
    free(l->object_text);
    l->object = root;
    l->object_text = NULL;
    root = NULL;
    rc = LD_OK;
out:
    json_decref(add);
    json_decref(root);
    return rc;
}

/* json_object_set_new takes the value even on failure, and fails on NULL
 * (allocation failure or invalid UTF-8), so these need no cleanup. */
static int set_string(json_t *obj, const char *key, const char *val)
{
    return json_object_set_new(obj, key, json_string(val));
}

static int set_nonempty(json_t *obj, const char *key, const char *val)
{
    if (val && *val)
        return set_string(obj, key, val);
    json_object_del(obj, key);
    return 0;
}

static int set_time(json_t *obj, const char *key, bool has, int64_t us)
{
    char buf[LD_MICROTIME_LEN];

    return json_object_set_new(
        obj, key, has ? json_string(ld_microtime_format(us, buf)) : json_null());
}

/* The incarnation annotation follows l->incarnation; other annotations
 * stay as the object has them. */
static int encode_incarnation(json_t *md, const char *incarnation)
{
    json_t *ann = json_object_get(md, "annotations");
    if (!incarnation || !*incarnation) {
        if (json_is_object(ann))
            json_object_del(ann, LD_LEASE_INCARNATION);
        return 0;
    }
    ann = child_object(md, "annotations");
    return ann ? set_string(ann, LD_LEASE_INCARNATION, incarnation) : -1;
}

static int encode_meta(json_t *root, const struct ld_lease *l)
{
    json_t *md = child_object(root, "metadata");

    if (!md || set_nonempty(md, "name", l->name) ||
        set_nonempty(md, "namespace", l->namespace_))
        return -1;
    if (l->resource_version) {
        if (set_string(md, "resourceVersion", l->resource_version))
            return -1;
    } else {
        json_object_del(md, "resourceVersion");
    }
    return encode_incarnation(md, l->incarnation);
}

/* An abridged value is only a display form: the object still holds the
 * real one, which a write keeps. */
static int set_kept(json_t *obj, const char *key, const char *val, bool abridged,
                    int (*set)(json_t *, const char *, const char *))
{
    if (abridged && json_object_get(obj, key))
        return 0;
    return set(obj, key, val);
}

static int encode_spec(json_t *root, const struct ld_lease_spec *s)
{
    json_t *spec = child_object(root, "spec");

    if (!spec || set_kept(spec, "holderIdentity", or_empty(s->holder), s->holder_abridged,
                          set_string))
        return -1;
    if (s->duration_s > 0) {
        if (json_object_set_new(spec, "leaseDurationSeconds",
                                json_integer(s->duration_s)))
            return -1;
    } else {
        json_object_del(spec, "leaseDurationSeconds");
    }
    if (set_time(spec, "acquireTime", s->has_acquire, s->acquire_us) ||
        set_time(spec, "renewTime", s->has_renew, s->renew_us) ||
        json_object_set_new(spec, "leaseTransitions", json_integer(s->transitions)))
        return -1;
    if (set_kept(spec, "strategy", s->strategy, s->strategy_abridged, set_nonempty) ||
        set_kept(spec, "preferredHolder", s->preferred_holder, s->preferred_abridged,
                 set_nonempty))
        return -1;
    return 0;
}

char *ld_lease_encode(const struct ld_lease *l)
{
    json_t *root;
    char *text = NULL;

    if (!l)
        return NULL;
    if (json_is_object(l->object))
        root = json_deep_copy(l->object);
    else if (l->object_text) /* NULs as the answer it came from allowed them */
        root = json_loads(l->object_text, JSON_ALLOW_NUL, NULL);
    else
        root = json_object();
    if (!json_is_object(root))
        goto out;
    if (set_string(root, "apiVersion", LEASE_API_VERSION) ||
        set_string(root, "kind", LEASE_KIND) || encode_meta(root, l) ||
        encode_spec(root, &l->spec))
        goto out;
    text = json_dumps(root, JSON_COMPACT);
out:
    json_decref(root);
    return text;
}

/* ---- metav1.Status ---- */

/* Copies valid UTF-8 (a JSON string) into dst, control characters turned
 * into spaces so a message cannot forge log lines, cut on a character
 * boundary. */
static void copy_utf8(char *dst, size_t cap, const char *src, size_t n)
{
    size_t len = n;

    if (len > cap - 1) {
        len = cap - 1;
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80)
            len--;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (char)((c < 0x20 || c == 0x7f) ? ' ' : c);
    }
    dst[len] = '\0';
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Copies src[0..n) trimmed, with bytes outside printable ASCII replaced by
 * '?' (the body's encoding is unknown). Returns whether anything was left. */
static bool copy_printable(char *dst, size_t cap, const char *src, size_t n)
{
    size_t out = 0;

    while (n > 0 && is_blank(src[0])) {
        src++;
        n--;
    }
    while (n > 0 && is_blank(src[n - 1]))
        n--;
    for (size_t i = 0; i < n && out < cap - 1; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[out++] = (char)(c == '\t' ? ' ' : (c < 0x20 || c >= 0x7f) ? '?' : c);
    }
    dst[out] = '\0';
    return out > 0;
}

/* HTML error pages from proxies put the useful part in <title>. */
static bool html_title(const char *text, size_t len, char *dst, size_t cap)
{
    static const char open[] = "<title>";
    size_t olen = sizeof open - 1;

    for (size_t i = 0; i + olen <= len; i++) {
        if (strncasecmp(text + i, open, olen) != 0)
            continue;
        size_t start = i + olen, end = start;
        while (end < len && text[end] != '<')
            end++;
        return copy_printable(dst, cap, text + start, end - start);
    }
    return false;
}

static void first_line(const char *text, size_t len, char *dst, size_t cap)
{
    size_t i = 0;

    dst[0] = '\0';
    while (i < len) {
        size_t start = i;
        while (i < len && text[i] != '\n')
            i++;
        if (copy_printable(dst, cap, text + start, i - start))
            return;
        i++;
    }
}

static void status_from_json(json_t *root, struct ld_errinfo *err)
{
    json_t *reason = json_object_get(root, "reason");
    json_t *message = json_object_get(root, "message");
    json_t *retry =
        json_object_get(json_object_get(root, "details"), "retryAfterSeconds");

    if (json_is_string(reason))
        copy_utf8(err->reason, sizeof err->reason, json_string_value(reason),
                  json_string_length(reason));
    if (json_is_string(message))
        copy_utf8(err->msg, sizeof err->msg, json_string_value(message),
                  json_string_length(message));
    if (json_is_integer(retry) && json_integer_value(retry) >= 0 &&
        json_integer_value(retry) <= STATUS_MAX_RETRY_S)
        err->retry_after_ms = (int64_t)json_integer_value(retry) * 1000;
}

static bool looks_like_status(json_t *root)
{
    const char *kind = json_string_value(json_object_get(root, "kind"));

    return (kind && strcmp(kind, "Status") == 0) ||
           json_is_string(json_object_get(root, "message")) ||
           json_is_string(json_object_get(root, "reason"));
}

/* reason and msg are always rewritten; retry_after_ms only when the body
 * carries a sane hint, so a Retry-After header the caller already stored
 * survives a body without one. */
void ld_status_decode(const char *text, size_t len, struct ld_errinfo *err)
{
    json_t *root;

    if (!err)
        return;
    err->reason[0] = '\0';
    err->msg[0] = '\0';
    if (!text || len == 0)
        return;
    root = json_loadb(text, len, 0, NULL);
    if (json_is_object(root) && looks_like_status(root))
        status_from_json(root, err);
    else if (!html_title(text, len, err->msg, sizeof err->msg))
        first_line(text, len, err->msg, sizeof err->msg);
    json_decref(root);
}
