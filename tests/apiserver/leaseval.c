/* SPDX-License-Identifier: Apache-2.0 */
#include "leaseval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labelsel.h"
#include "util.h"

#define MICRO_LAYOUT "2006-01-02T15:04:05.000000Z07:00"

static void decode_error(const char *kind, struct as_reply *err, const char *detail)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s in version \"v1\" cannot be handled as a %s: %s", kind,
             kind, detail);
    as_reply_bad_request(err, msg);
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    default:
        return "null";
    }
}

static void type_error(const char *kind, struct as_reply *err, const json_t *v,
                       const char *field, const char *gotype)
{
    char msg[512];
    snprintf(msg, sizeof msg,
             "json: cannot unmarshal %s into Go struct field %s of type %s", json_kind(v),
             field, gotype);
    decode_error(kind, err, msg);
}

static bool is_leap(long y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(long y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : d[m - 1];
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil), so no timegm/TZ dependence. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool digits(const char *s, int n, long *out)
{
    long v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* frac_digits: -1 = any count 0..9 (metav1.Time), else exactly that many. */
static bool parse_time(const char *s, int frac_digits, int64_t *wall_us)
{
    long y, mo, d, h, mi, sec, frac_us = 0;
    if (strlen(s) < 20)
        return false;
    if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || s[10] != 'T' || !digits(s + 11, 2, &h) || s[13] != ':' ||
        !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, (int)mo) || h > 23 ||
        mi > 59 || sec > 59)
        return false;
    const char *p = s + 19;
    int nd = 0;
    if (*p == '.') {
        p++;
        long scale = 100000;
        while (*p >= '0' && *p <= '9') {
            if (nd < 6) {
                frac_us += (*p - '0') * scale;
                scale /= 10;
            }
            nd++;
            p++;
        }
        if (nd == 0)
            return false;
    }
    if (frac_digits >= 0 ? nd != frac_digits : nd > 9)
        return false;
    long off_s = 0;
    if (*p == 'Z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        long oh, om;
        if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om) || oh > 23 ||
            om > 59)
            return false;
        off_s = (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return false;
    }
    if (*p != '\0')
        return false;
    int64_t secs = days_from_civil(y, (int)mo, (int)d) * 86400 + h * 3600 + mi * 60 + sec;
    *wall_us = (secs - off_s) * 1000000 + frac_us;
    return true;
}

bool as_parse_microtime(const char *s, int64_t *wall_us)
{
    return parse_time(s, 6, wall_us);
}

bool as_parse_rfc3339(const char *s, int64_t *wall_us)
{
    return parse_time(s, -1, wall_us);
}

bool as_dns1123_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && i > 0 && i + 1 < n))
            return false;
    }
    return true;
}

bool as_dns1123_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    const char *p = s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        char label[254];
        if (len == 0)
            return false;
        memcpy(label, p, len);
        label[len] = '\0';
        /* Subdomain labels are not capped at 63 like DNS labels are. */
        for (size_t i = 0; i < len; i++) {
            char c = label[i];
            bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
            if (!alnum && !(c == '-' && i > 0 && i + 1 < len))
                return false;
        }
        if (!dot)
            return true;
        p = dot + 1;
    }
}

/* Copies an optional string field; false (with err) on a wrong type. */
static bool copy_string(json_t *dst, json_t *src, const char *key, const char *gofield,
                        struct as_reply *err, const char *kind)
{
    json_t *v = json_object_get(src, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v)) {
        type_error(kind, err, v, gofield, "string");
        return false;
    }
    json_object_set(dst, key, v);
    return true;
}

static bool copy_int32(json_t *dst, json_t *src, const char *key, const char *gofield,
                       struct as_reply *err, const char *kind)
{
    json_t *v = json_object_get(src, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN ||
        json_integer_value(v) > INT32_MAX) {
        type_error(kind, err, v, gofield, "int32");
        return false;
    }
    json_object_set(dst, key, v);
    return true;
}

static bool copy_string_map(json_t *dst, json_t *src, const char *key,
                            const char *gofield, struct as_reply *err, const char *kind)
{
    json_t *v = json_object_get(src, key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_object(v)) {
        type_error(kind, err, v, gofield, "map[string]string");
        return false;
    }
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e)
    {
        if (!json_is_string(e)) {
            type_error(kind, err, e, gofield, "string");
            return false;
        }
    }
    /* An empty map is omitted, as Go's omitempty does. */
    if (json_object_size(v) > 0)
        json_object_set_new(dst, key, json_deep_copy(v));
    return true;
}

static bool copy_time(json_t *dst, json_t *src, const char *key, bool micro,
                      struct as_reply *err, const char *kind)
{
    json_t *v = json_object_get(src, key);
    if (!v || json_is_null(v))
        return true;
    int64_t us;
    char msg[512];
    if (!json_is_string(v)) {
        snprintf(msg, sizeof msg, "parsing time %s: expected a JSON string",
                 json_kind(v));
        decode_error(kind, err, msg);
        return false;
    }
    const char *s = json_string_value(v);
    if (!(micro ? as_parse_microtime(s, &us) : as_parse_rfc3339(s, &us))) {
        snprintf(msg, sizeof msg, "parsing time \"%.64s\" as \"%s\": cannot parse", s,
                 micro ? MICRO_LAYOUT : "2006-01-02T15:04:05Z07:00");
        decode_error(kind, err, msg);
        return false;
    }
    char out[32];
    json_object_set_new(dst, key, json_string(as_rfc3339(us, micro, out)));
    return true;
}

/* Decodes ownerReferences the way metav1.OwnerReference does: objects with
 * string apiVersion, kind, name, uid and bool controller, blockOwnerDeletion
 * (unknown fields dropped, null as absent). New reference or NULL with a 400
 * (or 500) reply in err. */
static json_t *normalize_owner_refs(json_t *v, struct as_reply *err, const char *kind)
{
    static const char *const strs[] = {"apiVersion", "kind", "name", "uid"};
    static const char *const bools[] = {"controller", "blockOwnerDeletion"};
    char gofield[96];
    json_t *out = json_array();
    size_t i;
    json_t *ref;
    if (!out) {
        as_reply_internal(err, "out of memory");
        return NULL;
    }
    json_array_foreach(v, i, ref)
    {
        json_t *o = json_object();
        if (!o || json_array_append_new(out, o) != 0) {
            as_reply_internal(err, "out of memory");
            goto fail;
        }
        if (json_is_null(ref))
            continue;
        if (!json_is_object(ref)) {
            type_error(kind, err, ref, "ObjectMeta.metadata.ownerReferences",
                       "v1.OwnerReference");
            goto fail;
        }
        for (size_t k = 0; k < sizeof strs / sizeof *strs; k++) {
            snprintf(gofield, sizeof gofield,
                     "OwnerReference.metadata.ownerReferences.%s", strs[k]);
            if (!copy_string(o, ref, strs[k], gofield, err, kind))
                goto fail;
        }
        for (size_t k = 0; k < sizeof bools / sizeof *bools; k++) {
            json_t *b = json_object_get(ref, bools[k]);
            if (!b || json_is_null(b))
                continue;
            if (!json_is_boolean(b)) {
                snprintf(gofield, sizeof gofield,
                         "OwnerReference.metadata.ownerReferences.%s", bools[k]);
                type_error(kind, err, b, gofield, "bool");
                goto fail;
            }
            json_object_set(o, bools[k], b);
        }
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

static bool normalize_metadata(json_t *out, json_t *m, struct as_reply *err,
                               const char *kind)
{
    if (!copy_string(out, m, "name", "ObjectMeta.metadata.name", err, kind) ||
        !copy_string(out, m, "generateName", "ObjectMeta.metadata.generateName", err,
                     kind) ||
        !copy_string(out, m, "namespace", "ObjectMeta.metadata.namespace", err, kind) ||
        !copy_string(out, m, "uid", "ObjectMeta.metadata.uid", err, kind) ||
        !copy_string(out, m, "resourceVersion", "ObjectMeta.metadata.resourceVersion",
                     err, kind) ||
        !copy_time(out, m, "creationTimestamp", false, err, kind) ||
        !copy_string_map(out, m, "labels", "ObjectMeta.metadata.labels", err, kind) ||
        !copy_string_map(out, m, "annotations", "ObjectMeta.metadata.annotations", err,
                         kind))
        return false;
    json_t *v = json_object_get(m, "ownerReferences");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v)) {
            type_error(kind, err, v, "ObjectMeta.metadata.ownerReferences",
                       "[]v1.OwnerReference");
            return false;
        }
        json_t *refs = normalize_owner_refs(v, err, kind);
        if (!refs)
            return false;
        if (json_array_size(refs) > 0)
            json_object_set_new(out, "ownerReferences", refs);
        else
            json_decref(refs);
    }
    v = json_object_get(m, "finalizers");
    if (v && !json_is_null(v)) {
        size_t i;
        json_t *e;
        if (!json_is_array(v)) {
            type_error(kind, err, v, "ObjectMeta.metadata.finalizers", "[]string");
            return false;
        }
        json_array_foreach(v, i, e)
        {
            if (!json_is_string(e)) {
                type_error(kind, err, e, "ObjectMeta.metadata.finalizers", "string");
                return false;
            }
        }
        json_object_set_new(out, "finalizers", json_deep_copy(v));
    }
    return true;
}

static bool normalize_spec(json_t *out, json_t *s, struct as_reply *err, const char *kind)
{
    return copy_string(out, s, "holderIdentity", "LeaseSpec.spec.holderIdentity", err,
                       kind) &&
           copy_int32(out, s, "leaseDurationSeconds",
                      "LeaseSpec.spec.leaseDurationSeconds", err, kind) &&
           copy_time(out, s, "acquireTime", true, err, kind) &&
           copy_time(out, s, "renewTime", true, err, kind) &&
           copy_int32(out, s, "leaseTransitions", "LeaseSpec.spec.leaseTransitions", err,
                      kind) &&
           copy_string(out, s, "strategy", "LeaseSpec.spec.strategy", err, kind) &&
           copy_string(out, s, "preferredHolder", "LeaseSpec.spec.preferredHolder", err,
                       kind);
}

void as_decode_type_error(const char *kind, struct as_reply *err, const json_t *v,
                          const char *field, const char *gotype)
{
    type_error(kind, err, v, field, gotype);
}

json_t *as_decode_envelope(json_t *in, const char *kind, const char *api_version,
                           struct as_reply *err)
{
    char msg[256];
    if (!json_is_object(in)) {
        snprintf(msg, sizeof msg, "v1.%s", kind);
        type_error(kind, err, in, kind, msg);
        return NULL;
    }
    json_t *v = json_object_get(in, "apiVersion");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) || (strcmp(json_string_value(v), api_version) != 0 &&
                                json_string_length(v) != 0))) {
        snprintf(msg, sizeof msg,
                 "the API version in the data does not match the expected API version "
                 "(%s)",
                 api_version);
        decode_error(kind, err, msg);
        return NULL;
    }
    v = json_object_get(in, "kind");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) ||
         (strcmp(json_string_value(v), kind) != 0 && json_string_length(v) != 0))) {
        snprintf(msg, sizeof msg,
                 "the kind in the data does not match the expected kind (%s)", kind);
        decode_error(kind, err, msg);
        return NULL;
    }
    json_t *meta = json_object();
    if (!meta) {
        as_reply_internal(err, "out of memory");
        return NULL;
    }
    json_t *m = json_object_get(in, "metadata");
    if (m && !json_is_null(m)) {
        snprintf(msg, sizeof msg, "%s.metadata", kind);
        if (!json_is_object(m)) {
            type_error(kind, err, m, msg, "v1.ObjectMeta");
            json_decref(meta);
            return NULL;
        }
        if (!normalize_metadata(meta, m, err, kind)) {
            json_decref(meta);
            return NULL;
        }
    }
    return meta;
}

json_t *as_decode_text(const char *kind, const char *text, size_t len,
                       struct as_reply *err)
{
    json_error_t jerr;
    json_t *in = json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
    if (!in) {
        char msg[512];
        snprintf(msg, sizeof msg, "couldn't get version/kind; json parse error: %s",
                 jerr.text);
        decode_error(kind, err, msg);
    }
    return in;
}

json_t *as_lease_normalize(json_t *in, struct as_reply *err)
{
    const char *kind = "Lease";
    json_t *out = NULL, *spec = NULL;
    json_t *meta = as_decode_envelope(in, kind, "coordination.k8s.io/v1", err);
    if (!meta)
        return NULL;
    out = json_object();
    spec = json_object();
    if (!out || !spec) {
        as_reply_internal(err, "out of memory");
        goto fail;
    }
    json_t *s = json_object_get(in, "spec");
    if (s && !json_is_null(s)) {
        if (!json_is_object(s)) {
            type_error(kind, err, s, "Lease.spec", "v1.LeaseSpec");
            goto fail;
        }
        if (!normalize_spec(spec, s, err, kind))
            goto fail;
    }
    json_object_set_new(out, "kind", json_string("Lease"));
    json_object_set_new(out, "apiVersion", json_string("coordination.k8s.io/v1"));
    json_object_set_new(out, "metadata", meta);
    json_object_set_new(out, "spec", spec);
    return out;
fail:
    json_decref(out);
    json_decref(meta);
    json_decref(spec);
    return NULL;
}

json_t *as_lease_parse(const char *text, size_t len, struct as_reply *err)
{
    json_t *in = as_decode_text("Lease", text, len, err);
    if (!in)
        return NULL;
    json_t *out = as_lease_normalize(in, err);
    json_decref(in);
    return out;
}

static const char dns1123_msg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. "
    "'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/* s as Go's %q prints it (close enough: JSON string syntax); new string. */
static char *quoted(const char *s)
{
    json_t *q = json_string(s);
    char *out = q ? json_dumps(q, JSON_ENCODE_ANY) : NULL;
    json_decref(q);
    return out;
}

static void add_invalid(struct as_field_errors *fe, const char *field, const char *value,
                        const char *why)
{
    char *q = quoted(value);
    char *msg = NULL;
    if (asprintf(&msg, "Invalid value: %s: %s", q ? q : "\"\"", why) < 0)
        msg = NULL;
    as_field_errors_add(fe, "FieldValueInvalid", field, msg ? msg : why);
    free(msg);
    free(q);
}

/* ValidateLabels: every key a qualified name, every value a label value. */
static void validate_labels(json_t *labels, struct as_field_errors *fe)
{
    const char *key;
    json_t *v;
    json_object_foreach(labels, key, v)
    {
        const char *why[4];
        size_t n = as_label_key_problems(key, why, 4);
        for (size_t i = 0; i < n; i++)
            add_invalid(fe, "metadata.labels", key, why[i]);
        n = as_label_value_problems(json_string_value(v), why, 4);
        for (size_t i = 0; i < n; i++)
            add_invalid(fe, "metadata.labels", json_string_value(v), why[i]);
    }
}

/* The version part of apiVersion as schema.ParseGroupVersion reads it:
 * "" for "", "/", "group/" and anything with two or more slashes. */
static bool has_version(const char *api_version)
{
    const char *slash = strchr(api_version, '/');
    if (!slash)
        return *api_version != '\0';
    return slash[1] != '\0' && !strchr(slash + 1, '/');
}

/* validateOwnerReference's required fields, under metadata.ownerReferences
 * (kube names no index there). */
static void validate_owner_refs(json_t *refs, struct as_field_errors *fe)
{
    size_t i;
    json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        const char *api = json_string_value(json_object_get(ref, "apiVersion"));
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        const char *name = json_string_value(json_object_get(ref, "name"));
        const char *uid = json_string_value(json_object_get(ref, "uid"));
        if (!has_version(api ? api : ""))
            add_invalid(fe, "metadata.ownerReferences.apiVersion", api ? api : "",
                        "version must not be empty");
        if (!kind || !*kind)
            add_invalid(fe, "metadata.ownerReferences.kind", "", "must not be empty");
        if (!name || !*name)
            add_invalid(fe, "metadata.ownerReferences.name", "", "must not be empty");
        if (!uid || !*uid)
            add_invalid(fe, "metadata.ownerReferences.uid", "", "must not be empty");
    }
}

void as_meta_validate(json_t *meta, bool create, struct as_field_errors *fe)
{
    char msg[1024];
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *gen = json_string_value(json_object_get(meta, "generateName"));
    if (!name || !*name) {
        if (!create || !gen || !*gen)
            as_field_errors_add(fe, "FieldValueRequired", "metadata.name",
                                "Required value: name or generateName is required");
    } else if (!as_dns1123_subdomain(name)) {
        char *shown = quoted(name);
        if (strlen(name) > 253)
            snprintf(msg, sizeof msg,
                     "Invalid value: %.300s: must be no more than 253 characters",
                     shown ? shown : "\"\"");
        else
            snprintf(msg, sizeof msg, "Invalid value: %.300s: %s", shown ? shown : "\"\"",
                     dns1123_msg);
        free(shown);
        as_field_errors_add(fe, "FieldValueInvalid", "metadata.name", msg);
    }
    validate_labels(json_object_get(meta, "labels"), fe);
    validate_owner_refs(json_object_get(meta, "ownerReferences"), fe);
}

void as_field_invalid(struct as_field_errors *fe, const char *field, const char *value,
                      const char *why)
{
    add_invalid(fe, field, value, why);
}

bool as_lease_validate(json_t *lease, bool create, struct as_reply *err)
{
    struct as_field_errors fe;
    char msg[1024];
    json_t *meta = json_object_get(lease, "metadata");
    json_t *spec = json_object_get(lease, "spec");
    const char *name = json_string_value(json_object_get(meta, "name"));
    as_field_errors_init(&fe);
    as_meta_validate(meta, create, &fe);
    json_t *v = json_object_get(spec, "leaseDurationSeconds");
    if (v && json_integer_value(v) <= 0) {
        snprintf(msg, sizeof msg, "Invalid value: %lld: must be greater than 0",
                 (long long)json_integer_value(v));
        as_field_errors_add(&fe, "FieldValueInvalid", "spec.leaseDurationSeconds", msg);
    }
    v = json_object_get(spec, "leaseTransitions");
    if (v && json_integer_value(v) < 0) {
        snprintf(msg, sizeof msg,
                 "Invalid value: %lld: must be greater than or equal to 0",
                 (long long)json_integer_value(v));
        as_field_errors_add(&fe, "FieldValueInvalid", "spec.leaseTransitions", msg);
    }
    bool ok = fe.count == 0;
    if (!ok)
        as_reply_invalid(err, "Lease", name ? name : "", &fe);
    as_field_errors_clear(&fe);
    return ok;
}
