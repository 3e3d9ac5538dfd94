/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pod_resource: the Pod table, its REST answers and its label log.
 */
#include "pod_resource.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "labelsel.h"
#include "util.h"

#define MAX_PODS 4096
#define MAX_LOG 65536

struct as_pods {
    pthread_mutex_t mu;
    json_t *pods; /* {"ns/name": Pod object} */
    json_t *log;  /* [label change records] */
    uint64_t rv;
    uint64_t seq;
};

struct as_pods *as_pods_new(void)
{
    struct as_pods *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->pods = json_object();
    p->log = json_array();
    if (!p->pods || !p->log) {
        as_pods_free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    p->rv = 1000;
    return p;
}

void as_pods_free(struct as_pods *p)
{
    if (!p)
        return;
    json_decref(p->pods);
    json_decref(p->log);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static void reply_pod_status(struct as_reply *r, unsigned code, const char *reason,
                             const char *name, const char *message)
{
    json_t *details = name ? json_pack("{s:s, s:s}", "name", name, "kind", "pods") : NULL;
    as_reply_status(r, code, reason, message, details);
}

static void not_found(struct as_reply *r, const char *name)
{
    char msg[400];
    snprintf(msg, sizeof msg, "pods \"%s\" not found", name);
    reply_pod_status(r, 404, "NotFound", name, msg);
}

/* RFC 7386: objects merge key by key, null deletes, anything else replaces. */
static json_t *merge_patch(json_t *target, json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach(patch, k, v)
    {
        if (json_is_null(v)) {
            json_object_del(out, k);
            continue;
        }
        json_t *merged = merge_patch(json_object_get(out, k), v);
        json_object_set_new(out, k, merged);
    }
    return out;
}

/* Labels as the real server validates them; false with a 422 reply. */
static bool labels_valid(const char *name, json_t *labels, struct as_reply *r)
{
    char msg[1024];
    const char *why[4];
    if (!labels || json_is_null(labels))
        return true;
    if (!json_is_object(labels)) {
        as_reply_bad_request(r, "metadata.labels must be a map of strings");
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(labels, k, v)
    {
        const char *value = json_string_value(v);
        size_t n = as_label_key_problems(k, why, 4);
        if (n == 0 && !value) {
            as_reply_bad_request(r, "metadata.labels values must be strings");
            return false;
        }
        const char *bad = k;
        if (n == 0) {
            n = as_label_value_problems(value, why, 4);
            bad = value;
        }
        if (n > 0) {
            const char *field = "metadata.labels";
            snprintf(msg, sizeof msg,
                     "Pod \"%s\" is invalid: %s: Invalid value: \"%s\": %s", name, field,
                     bad, why[0]);
            json_t *details = json_pack(
                "{s:s, s:s, s:[{s:s, s:s, s:s}]}", "name", name, "kind", "Pod", "causes",
                "reason", "FieldValueInvalid", "message", why[0], "field", field);
            as_reply_status(r, 422, "Invalid", msg, details);
            return false;
        }
    }
    return true;
}

static void bump(struct as_pods *p, json_t *pod)
{
    char rv[32];
    snprintf(rv, sizeof rv, "%" PRIu64, ++p->rv);
    json_object_set_new(json_object_get(pod, "metadata"), "resourceVersion",
                        json_string(rv));
}

static void log_labels(struct as_pods *p, const char *ns, const char *name,
                       json_t *labels, const char *client)
{
    if (json_array_size(p->log) >= MAX_LOG)
        json_array_remove(p->log, 0);
    json_array_append_new(
        p->log, json_pack("{s:I, s:s, s:s, s:o, s:s, s:I, s:I, s:I}", "seq",
                          (json_int_t)++p->seq, "namespace", ns, "pod", name, "labels",
                          labels ? json_incref(labels) : json_object(), "client",
                          client ? client : "", "time_us", (json_int_t)as_wall_us(),
                          "mono_ms", (json_int_t)as_mono_ms(),
                          /* the store's write log clock: fencing checks
                           * compare the two to the microsecond */
                          "clock_us", (json_int_t)as_clock_us()));
}

static void serve_list(struct as_pods *p, const struct as_pods_request *rq,
                       struct as_reply *r)
{
    char err[512];
    struct as_labelsel *sel = as_labelsel_parse(rq->selector, err, sizeof err);
    if (!sel) {
        as_reply_bad_request(r, err);
        return;
    }
    char rv[32];
    json_t *items = json_array();
    size_t plen = strlen(rq->ns);
    const char *k;
    json_t *pod;
    snprintf(rv, sizeof rv, "%" PRIu64, p->rv);
    json_object_foreach(p->pods, k, pod)
    {
        if (strncmp(k, rq->ns, plen) != 0 || k[plen] != '/')
            continue;
        json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
        if (as_labelsel_match(sel, labels))
            json_array_append(items, pod);
    }
    as_labelsel_free(sel);
    as_reply_json(r, 200,
                  json_pack("{s:s, s:s, s:{s:s}, s:o}", "kind", "PodList", "apiVersion",
                            "v1", "metadata", "resourceVersion", rv, "items", items));
}

static void serve_patch(struct as_pods *p, const struct as_pods_request *rq, json_t *pod,
                        struct as_reply *r)
{
    json_error_t jerr;
    const char *ct = rq->ctype;
    if (!ct || (strncasecmp(ct, "application/merge-patch+json", 28) != 0 &&
                strncasecmp(ct, "application/strategic-merge-patch+json", 38) != 0)) {
        as_reply_status(r, 415, "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted "
                        "media types include: application/json-patch+json, "
                        "application/merge-patch+json, "
                        "application/strategic-merge-patch+json",
                        NULL);
        return;
    }
    json_t *patch = json_loadb(rq->body ? rq->body : "", rq->len, 0, &jerr);
    if (!json_is_object(patch)) {
        char msg[300];
        snprintf(msg, sizeof msg, "error decoding patch: %s",
                 patch ? "not a JSON object" : jerr.text);
        as_reply_bad_request(r, msg);
        json_decref(patch);
        return;
    }
    json_t *next = merge_patch(pod, patch);
    json_decref(patch);
    json_t *meta = json_object_get(next, "metadata");
    json_t *old_meta = json_object_get(pod, "metadata");
    /* Identity fields are the server's, whatever the patch says. */
    static const char *const fixed[] = {"name", "namespace", "uid", "resourceVersion",
                                        "creationTimestamp"};
    for (size_t i = 0; json_is_object(meta) && i < sizeof fixed / sizeof fixed[0]; i++)
        json_object_set(meta, fixed[i], json_object_get(old_meta, fixed[i]));
    if (!json_is_object(meta) ||
        !labels_valid(rq->name, json_object_get(meta, "labels"), r)) {
        if (!json_is_object(meta))
            as_reply_bad_request(r, "metadata must be an object");
        json_decref(next);
        return;
    }
    json_t *old_labels = json_object_get(old_meta, "labels");
    json_t *new_labels = json_object_get(meta, "labels");
    bool changed = !json_equal(old_labels ? old_labels : json_object(),
                               new_labels ? new_labels : json_object());
    if (!json_equal(next, pod))
        bump(p, next);
    if (changed)
        log_labels(p, rq->ns, rq->name, new_labels, rq->client);
    char key[400];
    snprintf(key, sizeof key, "%s/%s", rq->ns, rq->name);
    json_object_set(p->pods, key, next);
    as_reply_json(r, 200, next);
}

void as_pods_serve(struct as_pods *p, const struct as_pods_request *rq,
                   struct as_reply *r)
{
    char key[400];
    pthread_mutex_lock(&p->mu);
    if (!rq->name) {
        if (strcmp(rq->method, "GET") == 0)
            serve_list(p, rq, r);
        else
            as_reply_status(r, 405, "MethodNotAllowed",
                            "the server does not allow this method on the requested "
                            "resource",
                            NULL);
        goto out;
    }
    snprintf(key, sizeof key, "%s/%s", rq->ns, rq->name);
    json_t *pod = json_object_get(p->pods, key);
    if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "PATCH") != 0) {
        as_reply_status(r, 405, "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                        NULL);
    } else if (!pod) {
        not_found(r, rq->name);
    } else if (strcmp(rq->method, "GET") == 0) {
        as_reply_json(r, 200, json_incref(pod));
    } else {
        serve_patch(p, rq, pod, r);
    }
out:
    pthread_mutex_unlock(&p->mu);
}

static void control_create(struct as_pods *p, json_t *j, struct as_reply *r)
{
    char key[400], uid[33], ts[32];
    const char *ns = json_string_value(json_object_get(j, "namespace"));
    const char *name = json_string_value(json_object_get(j, "name"));
    json_t *labels = json_object_get(j, "labels");
    if (!ns || !name || strlen(ns) > 63 || strlen(name) > 253 ||
        (labels && !json_is_object(labels))) {
        as_reply_bad_request(r,
                             "want {\"namespace\": NS, \"name\": NAME, \"labels\": {}}");
        return;
    }
    if (!labels_valid(name, labels, r))
        return;
    if (json_object_size(p->pods) >= MAX_PODS) {
        as_reply_bad_request(r, "too many pods");
        return;
    }
    if (!as_random_hex(16, uid)) {
        as_reply_internal(r, "no random source");
        return;
    }
    json_t *pod = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:o}, s:{s:[{s:s, s:s}]}, s:{s:s}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", ns,
        "uid", uid, "creationTimestamp", as_rfc3339(as_wall_us(), false, ts), "labels",
        labels ? json_deep_copy(labels) : json_object(), "spec", "containers", "name",
        "app", "image", "app:latest", "status", "phase", "Running");
    if (!pod) {
        as_reply_internal(r, "out of memory");
        return;
    }
    bump(p, pod);
    snprintf(key, sizeof key, "%s/%s", ns, name);
    json_object_set_new(p->pods, key, pod);
    log_labels(p, ns, name, labels, "_control");
    as_reply_json(r, 200, json_incref(pod));
}

void as_pods_control(struct as_pods *p, const char *method, const char *path,
                     const char *body, size_t len, struct as_reply *r)
{
    json_error_t jerr;
    char key[400];
    pthread_mutex_lock(&p->mu);
    if (strcmp(method, "GET") == 0 && strcmp(path, "/log") == 0) {
        as_reply_json(r, 200, json_pack("{s:O}", "log", p->log));
    } else if (strcmp(method, "GET") == 0 && (!*path || strcmp(path, "/") == 0)) {
        as_reply_json(r, 200, json_pack("{s:O}", "pods", p->pods));
    } else if ((strcmp(method, "POST") == 0 || strcmp(method, "DELETE") == 0) && !*path) {
        json_t *j = json_loadb(body, len, 0, &jerr);
        if (!json_is_object(j)) {
            as_reply_bad_request(r, "control body must be a JSON object");
        } else if (strcmp(method, "POST") == 0) {
            control_create(p, j, r);
        } else {
            snprintf(key, sizeof key, "%s/%s",
                     json_string_value(json_object_get(j, "namespace")) ?: "",
                     json_string_value(json_object_get(j, "name")) ?: "");
            json_object_del(p->pods, key);
            as_reply_json(r, 200, json_object());
        }
        json_decref(j);
    } else {
        as_reply_status(r, 404, "NotFound", "unknown control path", NULL);
    }
    pthread_mutex_unlock(&p->mu);
}
