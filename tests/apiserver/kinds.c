/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kinds: the Lease and ConfigMap descriptions the store works from (see
 * kinds.h).
 */
#include "kinds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configmap.h"
#include "leaseval.h"

#define LOG_HOLDER_MAX 256 /* bytes of holderIdentity kept in the write log */
#define LOG_DATA_MAX 1024  /* bytes of ConfigMap data kept in the write log */

/* The signature is struct as_kind's validate: old stays non-const there. */
/* cppcheck-suppress constParameter */
static bool lease_validate(json_t *obj, json_t *old, struct as_reply *err)
{
    return as_lease_validate(obj, old == NULL, err);
}

/* spec, with strategy/preferredHolder only where the (disabled) CLE gate
 * keeps them: never on create, on update only if the old object had them. */
static bool lease_body(json_t *obj, json_t *src, json_t *old)
{
    json_t *spec = json_deep_copy(json_object_get(src, "spec"));
    if (!spec)
        return false;
    json_t *old_spec = json_object_get(old, "spec");
    if (!json_object_get(old_spec, "strategy"))
        json_object_del(spec, "strategy");
    if (!json_object_get(old_spec, "preferredHolder"))
        json_object_del(spec, "preferredHolder");
    return json_object_set_new(obj, "spec", spec) == 0;
}

static void lease_log(json_t *e, json_t *obj)
{
    json_t *spec = json_object_get(obj, "spec");
    json_t *holder = json_object_get(spec, "holderIdentity");
    json_t *trans = json_object_get(spec, "leaseTransitions");
    if (json_is_string(holder) && json_string_length(holder) > LOG_HOLDER_MAX) {
        /* A garbage holder (megabytes) must not be copied into every reader
         * of the log; its head and length say enough. */
        const char *h = json_string_value(holder);
        int head = LOG_HOLDER_MAX;
        /* Cut at a character boundary, or jansson refuses the string. */
        while (head > 0 && ((unsigned char)h[head] & 0xC0) == 0x80)
            head--;
        char *cut = NULL;
        if (asprintf(&cut, "%.*s...(%zu bytes)", head, h, json_string_length(holder)) >=
            0)
            json_object_set_new(e, "holderIdentity", json_string(cut));
        free(cut);
    } else {
        json_object_set(e, "holderIdentity",
                        json_is_string(holder) ? holder : json_null());
    }
    json_object_set(e, "leaseTransitions", json_is_integer(trans) ? trans : json_null());
}

/* immutable, data and binaryData in the order of the Go struct. */
static bool configmap_body(json_t *obj, json_t *src, json_t *old)
{
    static const char *const fields[] = {"immutable", "data", "binaryData"};
    (void)old;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        json_t *v = json_object_get(src, fields[i]);
        if (v && json_object_set_new(obj, fields[i], json_deep_copy(v)) != 0)
            return false;
    }
    return true;
}

static void configmap_log(json_t *e, json_t *obj)
{
    json_t *data = json_object_get(obj, "data");
    char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
    size_t len = text ? strlen(text) : 0;
    /* Tests identify a write by its small data; a megabyte of it in each
     * of up to 100000 entries would only cost memory. */
    if (!data || len <= LOG_DATA_MAX)
        json_object_set(e, "data", data ? data : json_null());
    else
        json_object_set_new(e, "dataBytes", json_integer((json_int_t)len));
    free(text);
}

const struct as_kind as_kind_lease = {
    .index = AS_KIND_LEASE,
    .kind = "Lease",
    .api_version = "coordination.k8s.io/v1",
    .group = "coordination.k8s.io",
    .resource = "leases",
    .list_kind = "LeaseList",
    .normalize = as_lease_normalize,
    .validate = lease_validate,
    .body = lease_body,
    .log_fields = lease_log,
};

const struct as_kind as_kind_configmap = {
    .index = AS_KIND_CONFIGMAP,
    .kind = "ConfigMap",
    .api_version = "v1",
    .group = "",
    .resource = "configmaps",
    .list_kind = "ConfigMapList",
    .normalize = as_configmap_normalize,
    .validate = as_configmap_validate,
    .body = configmap_body,
    .log_fields = configmap_log,
};

const struct as_kind *as_kind_named(const char *kind)
{
    if (kind && strcmp(kind, as_kind_configmap.kind) == 0)
        return &as_kind_configmap;
    if (kind && strcmp(kind, as_kind_lease.kind) == 0)
        return &as_kind_lease;
    return NULL;
}
