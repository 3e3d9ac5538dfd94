/* SPDX-License-Identifier: Apache-2.0 */
/*
 * events: Event validation and storage.
 */
#include "events.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define FIELD_MAX 128
#define NOTE_MAX 1024

struct as_events {
    pthread_mutex_t mu;
    json_t *items; /* array, oldest first */
    uint64_t rv;
};

struct as_events *as_events_new(void)
{
    struct as_events *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    if (!(e->items = json_array())) {
        free(e);
        return NULL;
    }
    pthread_mutex_init(&e->mu, NULL);
    e->rv = 5000;
    return e;
}

void as_events_free(struct as_events *e)
{
    if (!e)
        return;
    json_decref(e->items);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* Collects field errors in the real server's wording. */
struct verrs {
    json_t *causes;
    char text[1024];
};

static void verr(struct verrs *v, const char *field, const char *reason,
                 const char *message)
{
    size_t used = strlen(v->text);
    snprintf(v->text + used, sizeof v->text - used, "%s%s: %s", used ? ", " : "", field,
             message);
    json_array_append_new(v->causes, json_pack("{s:s, s:s, s:s}", "reason", reason,
                                               "message", message, "field", field));
}

static void required_short(struct verrs *v, json_t *ev, const char *field)
{
    json_t *x = json_object_get(ev, field);
    const char *s = json_string_value(x);
    char msg[128];
    if (!s || !*s) {
        verr(v, field, "FieldValueRequired", "Required value");
    } else if (strlen(s) > FIELD_MAX) {
        snprintf(msg, sizeof msg, "Too long: may not be more than %d bytes", FIELD_MAX);
        verr(v, field, "FieldValueTooLong", msg);
    }
}

static void validate(struct verrs *v, json_t *ev, const char *ns)
{
    json_t *meta = json_object_get(ev, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *mns = json_string_value(json_object_get(meta, "namespace"));
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *note = json_string_value(json_object_get(ev, "note"));
    const char *etime = json_string_value(json_object_get(ev, "eventTime"));
    if (!name || !*name)
        verr(v, "metadata.name", "FieldValueRequired",
             "Required value: name or "
             "generateName is required");
    if (mns && *mns && strcmp(mns, ns) != 0)
        verr(v, "metadata.namespace", "FieldValueInvalid",
             "Invalid value: does not match the namespace of the request");
    if (!etime || !*etime)
        verr(v, "eventTime", "FieldValueRequired", "Required value");
    required_short(v, ev, "reportingController");
    required_short(v, ev, "reportingInstance");
    required_short(v, ev, "action");
    required_short(v, ev, "reason");
    if (!type || (strcmp(type, "Normal") != 0 && strcmp(type, "Warning") != 0))
        verr(v, "type", "FieldValueNotSupported",
             "Unsupported value: supported values: \"Normal\", \"Warning\"");
    if (note && strlen(note) > NOTE_MAX)
        verr(v, "note", "FieldValueTooLong", "Too long: may not be more than 1024 bytes");
}

static bool exists(const struct as_events *e, const char *ns, const char *name)
{
    size_t i;
    json_t *it;
    json_array_foreach(e->items, i, it)
    {
        json_t *m = json_object_get(it, "metadata");
        if (strcmp(json_string_value(json_object_get(m, "namespace")) ?: "", ns) == 0 &&
            strcmp(json_string_value(json_object_get(m, "name")) ?: "", name) == 0)
            return true;
    }
    return false;
}

static void create(struct as_events *e, const char *ns, const char *body, size_t len,
                   struct as_reply *r)
{
    json_error_t jerr;
    char msg[1400], uid[33], rv[32], ts[32];
    struct verrs v = {.causes = json_array()};
    json_t *ev = json_loadb(body ? body : "", len, 0, &jerr);
    if (!json_is_object(ev)) {
        snprintf(msg, sizeof msg, "error decoding the Event: %s",
                 ev ? "not a JSON object" : jerr.text);
        as_reply_bad_request(r, msg);
        goto out;
    }
    validate(&v, ev, ns);
    const char *name =
        json_string_value(json_object_get(json_object_get(ev, "metadata"), "name")) ?: "";
    if (json_array_size(v.causes) > 0) {
        snprintf(msg, sizeof msg, "Event.events.k8s.io \"%s\" is invalid: %s", name,
                 v.text);
        as_reply_status(r, 422, "Invalid", msg,
                        json_pack("{s:s, s:s, s:s, s:O}", "name", name, "group",
                                  "events.k8s.io", "kind", "Event", "causes", v.causes));
        goto out;
    }
    if (exists(e, ns, name)) {
        snprintf(msg, sizeof msg, "events.events.k8s.io \"%s\" already exists", name);
        as_reply_status(r, 409, "AlreadyExists", msg,
                        json_pack("{s:s, s:s, s:s}", "name", name, "group",
                                  "events.k8s.io", "kind", "events"));
        goto out;
    }
    if (!as_random_hex(16, uid)) {
        as_reply_internal(r, "no random source");
        goto out;
    }
    snprintf(rv, sizeof rv, "%" PRIu64, ++e->rv);
    json_t *meta = json_object_get(ev, "metadata");
    json_object_set_new(meta, "namespace", json_string(ns));
    json_object_set_new(meta, "uid", json_string(uid));
    json_object_set_new(meta, "resourceVersion", json_string(rv));
    json_object_set_new(meta, "creationTimestamp",
                        json_string(as_rfc3339(as_wall_us(), false, ts)));
    json_object_set_new(ev, "apiVersion", json_string("events.k8s.io/v1"));
    json_object_set_new(ev, "kind", json_string("Event"));
    if (json_array_size(e->items) >= AS_EVENTS_MAX)
        json_array_remove(e->items, 0);
    json_array_append(e->items, ev);
    as_reply_json(r, 201, json_incref(ev));
out:
    json_decref(v.causes);
    json_decref(ev);
}

static void list(struct as_events *e, const char *ns, struct as_reply *r)
{
    char rv[32];
    json_t *items = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(e->items, i, it)
    {
        const char *ins = json_string_value(
            json_object_get(json_object_get(it, "metadata"), "namespace"));
        if (ins && strcmp(ins, ns) == 0)
            json_array_append(items, it);
    }
    snprintf(rv, sizeof rv, "%" PRIu64, e->rv);
    as_reply_json(r, 200,
                  json_pack("{s:s, s:s, s:{s:s}, s:o}", "kind", "EventList", "apiVersion",
                            "events.k8s.io/v1", "metadata", "resourceVersion", rv,
                            "items", items));
}

void as_events_serve(struct as_events *e, const char *method, const char *ns,
                     const char *name, const char *body, size_t len, struct as_reply *r)
{
    pthread_mutex_lock(&e->mu);
    if (!name && strcmp(method, "POST") == 0)
        create(e, ns, body, len, r);
    else if (!name && strcmp(method, "GET") == 0)
        list(e, ns, r);
    else
        as_reply_status(r, 405, "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                        NULL);
    pthread_mutex_unlock(&e->mu);
}
