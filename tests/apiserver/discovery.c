/* SPDX-License-Identifier: Apache-2.0 */
#include "discovery.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "leaseval.h"

static const char version_doc[] =
    "{\"major\":\"1\",\"minor\":\"32\",\"gitVersion\":\"v1.32.0-leaderd-apiserver\","
    "\"gitCommit\":\"0000000000000000000000000000000000000000\",\"gitTreeState\":"
    "\"clean\","
    "\"buildDate\":\"2025-01-01T00:00:00Z\",\"goVersion\":\"go1.23.0\",\"compiler\":"
    "\"gc\","
    "\"platform\":\"linux/amd64\"}";

static const char api_v1_doc[] =
    "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":["
    "{\"name\":\"configmaps\",\"singularName\":\"configmap\",\"namespaced\":true,"
    "\"kind\":\"ConfigMap\",\"verbs\":[\"create\",\"delete\",\"get\",\"list\",\"patch\","
    "\"update\",\"watch\"],\"shortNames\":[\"cm\"]}]}";

#define GROUP_VERSIONS                                                                   \
    "\"versions\":[{\"groupVersion\":\"coordination.k8s.io/v1\",\"version\":\"v1\"}],"   \
    "\"preferredVersion\":{\"groupVersion\":\"coordination.k8s.io/"                      \
    "v1\",\"version\":\"v1\"}"

static const char apis_doc[] =
    "{\"kind\":\"APIGroupList\",\"apiVersion\":\"v1\",\"groups\":"
    "[{\"name\":\"coordination.k8s.io\"," GROUP_VERSIONS "}]}";

static const char group_doc[] = "{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\","
                                "\"name\":\"coordination.k8s.io\"," GROUP_VERSIONS "}";

static const char group_v1_doc[] =
    "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":"
    "\"coordination.k8s.io/v1\",\"resources\":[{\"name\":\"leases\",\"singularName\":"
    "\"lease\",\"namespaced\":true,\"kind\":\"Lease\",\"verbs\":[\"create\",\"delete\","
    "\"get\",\"list\",\"patch\",\"update\",\"watch\"]}]}";

bool as_discovery_is_public(const char *path)
{
    return strcmp(path, "/healthz") == 0 || strcmp(path, "/livez") == 0 ||
           strcmp(path, "/readyz") == 0 || strcmp(path, "/version") == 0;
}

bool as_discovery_serve(const char *path, const char *server_addr, struct as_reply *r)
{
    const char *doc = NULL;
    if (strcmp(path, "/healthz") == 0 || strcmp(path, "/livez") == 0 ||
        strcmp(path, "/readyz") == 0) {
        as_reply_text(r, 200, "text/plain; charset=utf-8", "ok", 2);
        return true;
    }
    if (strcmp(path, "/api") == 0) {
        char buf[512];
        int n = snprintf(buf, sizeof buf,
                         "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"],"
                         "\"serverAddressByClientCIDRs\":[{\"clientCIDR\":\"0.0.0.0/0\","
                         "\"serverAddress\":\"%s\"}]}",
                         server_addr);
        as_reply_text(r, 200, "application/json", buf, (size_t)n);
        return true;
    }
    if (strcmp(path, "/version") == 0)
        doc = version_doc;
    else if (strcmp(path, "/api/v1") == 0)
        doc = api_v1_doc;
    else if (strcmp(path, "/apis") == 0)
        doc = apis_doc;
    else if (strcmp(path, "/apis/coordination.k8s.io") == 0)
        doc = group_doc;
    else if (strcmp(path, "/apis/coordination.k8s.io/v1") == 0)
        doc = group_v1_doc;
    if (!doc)
        return false;
    as_reply_text(r, 200, "application/json", doc, strlen(doc));
    return true;
}

void as_human_duration(int64_t s, char *out, size_t len)
{
    int64_t m = s / 60, h = s / 3600, d = h / 24;
    if (s < -1)
        snprintf(out, len, "<invalid>");
    else if (s < 0)
        snprintf(out, len, "0s");
    else if (s < 120)
        snprintf(out, len, "%" PRId64 "s", s);
    else if (m < 10)
        snprintf(out, len, s % 60 ? "%" PRId64 "m%" PRId64 "s" : "%" PRId64 "m", m,
                 s % 60);
    else if (m < 180)
        snprintf(out, len, "%" PRId64 "m", m);
    else if (h < 8)
        snprintf(out, len, m % 60 ? "%" PRId64 "h%" PRId64 "m" : "%" PRId64 "h", h,
                 m % 60);
    else if (h < 48)
        snprintf(out, len, "%" PRId64 "h", h);
    else if (h < 24 * 8)
        snprintf(out, len, h % 24 ? "%" PRId64 "d%" PRId64 "h" : "%" PRId64 "d", d,
                 h % 24);
    else if (h < 24 * 365 * 2)
        snprintf(out, len, "%" PRId64 "d", d);
    else if (h < 24 * 365 * 8)
        snprintf(out, len, d % 365 ? "%" PRId64 "y%" PRId64 "d" : "%" PRId64 "y", d / 365,
                 d % 365);
    else
        snprintf(out, len, "%" PRId64 "y", d / 365);
}

static json_t *column(const char *name, const char *format, const char *description)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:i}", "name", name, "type", "string", "format",
                     format, "description", description, "priority", 0);
}

static json_t *row(const struct as_item *it, const char *include, int64_t now_us)
{
    json_t *meta = json_object_get(it->obj, "metadata");
    json_t *spec = json_object_get(it->obj, "spec");
    const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
    const char *created = json_string_value(json_object_get(meta, "creationTimestamp"));
    char age[32] = "<unknown>";
    int64_t created_us;
    if (created && as_parse_rfc3339(created, &created_us))
        as_human_duration((now_us - created_us) / 1000000, age, sizeof age);
    json_t *r = json_pack("{s:[s,s,s]}", "cells", it->name, holder ? holder : "", age);
    if (!r)
        return NULL;
    if (strcmp(include, "None") == 0)
        return r;
    if (strcmp(include, "Object") == 0 && it->obj) {
        json_object_set(r, "object", it->obj);
        return r;
    }
    json_t *m = json_is_object(meta) ? json_deep_copy(meta) : json_object();
    if (m && !json_is_object(meta)) {
        json_object_set_new(m, "name", json_string(it->name));
        json_object_set_new(m, "namespace", json_string(it->ns));
    }
    json_object_set_new(r, "object",
                        json_pack("{s:s,s:s,s:o*}", "kind", "PartialObjectMetadata",
                                  "apiVersion", "meta.k8s.io/v1", "metadata", m));
    return r;
}

json_t *as_table(const struct as_snapshot *snap, const char *include_object,
                 int64_t now_wall_us)
{
    char rv[24];
    snprintf(rv, sizeof rv, "%" PRIu64, snap->rv);
    json_t *cols = json_pack(
        "[o,o,o]",
        column(
            "Name", "name",
            "Name must be unique within a namespace. Is required when creating "
            "resources, "
            "although some resources may allow a client to request the generation of an "
            "appropriate name automatically."),
        column("Holder", "",
               "holderIdentity contains the identity of the holder of a "
               "current lease."),
        column("Age", "",
               "CreationTimestamp is a timestamp representing the server time when this "
               "object was created."));
    json_t *rows = json_array();
    json_t *t = json_pack("{s:s,s:s,s:{s:s},s:o*,s:o*}", "kind", "Table", "apiVersion",
                          "meta.k8s.io/v1", "metadata", "resourceVersion", rv,
                          "columnDefinitions", cols, "rows", rows);
    if (!t || !cols || !rows) {
        json_decref(t);
        return NULL;
    }
    for (size_t i = 0; i < snap->n; i++) {
        json_t *r = row(&snap->items[i], include_object ? include_object : "Metadata",
                        now_wall_us);
        if (!r || json_array_append_new(rows, r) != 0) {
            json_decref(t);
            return NULL;
        }
    }
    return t;
}
