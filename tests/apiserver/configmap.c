/* SPDX-License-Identifier: Apache-2.0 */
/*
 * configmap: ConfigMap bodies decoded and validated like kube-apiserver's
 * core/v1 ConfigMap (see configmap.h).
 */
#include "configmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "leaseval.h"

#define KIND "ConfigMap"

static const char key_regex_msg[] =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')";

static const char immutable_msg[] =
    "Forbidden: field is immutable when `immutable` is set";

/* Copies the map field key of src into dst when it is a non-empty object of
 * strings (base64 ones when binary), as Go decodes map[string]string and
 * map[string][]byte. False with a 400 in err. */
static bool copy_map(json_t *dst, json_t *src, const char *key, bool binary,
                     struct as_reply *err)
{
    char field[64];
    json_t *v = json_object_get(src, key);
    snprintf(field, sizeof field,
             KIND "."
                  "%s",
             key);
    if (!v || json_is_null(v))
        return true;
    if (!json_is_object(v)) {
        as_decode_type_error(KIND, err, v, field,
                             binary ? "map[string][]uint8" : "map[string]string");
        return false;
    }
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e)
    {
        size_t bad = 0;
        if (!json_is_string(e)) {
            as_decode_type_error(KIND, err, e, field, binary ? "[]uint8" : "string");
            return false;
        }
        if (binary && ld_base64_decoded_len(json_string_value(e), json_string_length(e),
                                            &bad) < 0) {
            char msg[160], full[256];
            snprintf(msg, sizeof msg, "illegal base64 data at input byte %zu", bad);
            snprintf(full, sizeof full,
                     KIND " in version \"v1\" cannot be handled as a " KIND ": %s", msg);
            as_reply_bad_request(err, full);
            return false;
        }
    }
    /* omitempty: an empty map is not stored. */
    if (json_object_size(v) > 0 &&
        json_object_set_new(dst, key, json_deep_copy(v)) != 0) {
        as_reply_internal(err, "out of memory");
        return false;
    }
    return true;
}

json_t *as_configmap_normalize(json_t *in, struct as_reply *err)
{
    json_t *out = NULL;
    json_t *meta = as_decode_envelope(in, KIND, "v1", err);
    if (!meta)
        return NULL;
    out = json_object();
    if (!out) {
        as_reply_internal(err, "out of memory");
        goto fail;
    }
    json_object_set_new(out, "kind", json_string(KIND));
    json_object_set_new(out, "apiVersion", json_string("v1"));
    json_object_set_new(out, "metadata", meta);
    meta = NULL;
    json_t *imm = json_object_get(in, "immutable");
    if (imm && !json_is_null(imm)) {
        if (!json_is_boolean(imm)) {
            as_decode_type_error(KIND, err, imm, KIND ".immutable", "bool");
            goto fail;
        }
        json_object_set(out, "immutable", imm);
    }
    if (!copy_map(out, in, "data", false, err) ||
        !copy_map(out, in, "binaryData", true, err))
        goto fail;
    return out;
fail:
    json_decref(out);
    json_decref(meta);
    return NULL;
}

/* IsConfigMapKey's complaints about key, each added as a cause on
 * "FIELD[key]". */
static void validate_key(struct as_field_errors *fe, const char *map, const char *key)
{
    char field[320];
    size_t n = strlen(key);
    bool charset = n > 0;
    snprintf(field, sizeof field, "%s[%.256s]", map, key);
    for (size_t i = 0; i < n && charset; i++) {
        char c = key[i];
        charset = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    }
    if (n > 253)
        as_field_invalid(fe, field, key, "must be no more than 253 characters");
    if (!charset)
        as_field_invalid(fe, field, key, key_regex_msg);
    if (strcmp(key, ".") == 0)
        as_field_invalid(fe, field, key, "must not be '.'");
    else if (strcmp(key, "..") == 0)
        as_field_invalid(fe, field, key, "must not be '..'");
    else if (strncmp(key, "..", 2) == 0)
        as_field_invalid(fe, field, key, "must not start with '..'");
}

static bool same_field(json_t *a, json_t *b, const char *key)
{
    json_t *x = json_object_get(a, key), *y = json_object_get(b, key);
    return x && y ? json_equal(x, y) : x == y;
}

bool as_configmap_validate(json_t *cm, json_t *old, struct as_reply *err)
{
    struct as_field_errors fe;
    json_t *meta = json_object_get(cm, "metadata");
    json_t *data = json_object_get(cm, "data");
    json_t *bin = json_object_get(cm, "binaryData");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *key;
    json_t *v;
    size_t total = 0, bad;
    as_field_errors_init(&fe);
    as_meta_validate(meta, old == NULL, &fe);
    json_object_foreach(data, key, v)
    {
        validate_key(&fe, "data", key);
        total += json_string_length(v);
    }
    json_object_foreach(bin, key, v)
    {
        validate_key(&fe, "binaryData", key);
        if (json_object_get(data, key)) {
            char field[320];
            snprintf(field, sizeof field, "data[%.256s]", key);
            as_field_invalid(&fe, field, key, "duplicate of key present in binaryData");
        }
        long dec =
            ld_base64_decoded_len(json_string_value(v), json_string_length(v), &bad);
        total += dec > 0 ? (size_t)dec : 0;
    }
    if (total > AS_CONFIGMAP_MAX_BYTES) {
        char msg[96];
        snprintf(msg, sizeof msg, "Too long: must have at most %u bytes",
                 AS_CONFIGMAP_MAX_BYTES);
        as_field_errors_add(&fe, "FieldValueTooLong", "", msg);
    }
    if (old && json_is_true(json_object_get(old, "immutable"))) {
        if (!json_is_true(json_object_get(cm, "immutable")))
            as_field_errors_add(&fe, "FieldValueForbidden", "immutable", immutable_msg);
        if (!same_field(cm, old, "data"))
            as_field_errors_add(&fe, "FieldValueForbidden", "data", immutable_msg);
        if (!same_field(cm, old, "binaryData"))
            as_field_errors_add(&fe, "FieldValueForbidden", "binaryData", immutable_msg);
    }
    bool ok = fe.count == 0;
    if (!ok)
        as_reply_invalid_in(err, "", KIND, name ? name : "", &fe);
    as_field_errors_clear(&fe);
    return ok;
}
