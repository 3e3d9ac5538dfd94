/* SPDX-License-Identifier: Apache-2.0 */
#include "control.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "leaseval.h"
#include "util.h"

static json_t *parse_body(const char *body, size_t len, bool optional, struct as_reply *r)
{
    json_error_t jerr;
    if (len == 0 && optional)
        return json_object();
    json_t *j = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(j)) {
        char msg[256];
        snprintf(msg, sizeof msg, "control body must be a JSON object: %s",
                 j ? "wrong type" : jerr.text);
        json_decref(j);
        as_reply_bad_request(r, msg);
        return NULL;
    }
    return j;
}

static void set_faults(const struct as_control_ctx *api, const char *body, size_t len,
                       struct as_reply *r)
{
    char client[AS_CLIENT_MAX], msg[256];
    struct as_fault f;
    json_t *j = parse_body(body, len, false, r);
    if (!j)
        return;
    if (!as_fault_from_json(j, client, &f, msg, sizeof msg)) {
        as_reply_bad_request(r, msg);
    } else if (!as_faults_set(api->faults, client, &f)) {
        as_reply_bad_request(r, "too many clients with faults");
    } else {
        json_t *out = as_fault_to_json(&f);
        if (out)
            json_object_set_new(out, "client", json_string(client));
        as_reply_json(r, 200, out);
    }
    json_decref(j);
}

static void clear_faults(const struct as_control_ctx *api, const char *body, size_t len,
                         struct as_reply *r)
{
    json_t *j = parse_body(body, len, true, r);
    if (!j)
        return;
    json_t *c = json_object_get(j, "client");
    if (c && !json_is_null(c) && !json_is_string(c)) {
        as_reply_bad_request(r, "client must be a string or absent");
    } else {
        as_faults_clear(api->faults, json_string_value(c));
        as_reply_json(r, 200, as_faults_json(api->faults));
    }
    json_decref(j);
}

static void rotate_token(const struct as_control_ctx *api, const char *body, size_t len,
                         struct as_reply *r)
{
    char token[AS_TOKEN_MAX], msg[256];
    json_t *j = parse_body(body, len, false, r);
    if (!j)
        return;
    const char *client = json_string_value(json_object_get(j, "client"));
    json_t *g = json_object_get(j, "grace_ms");
    if (!client || (g && !json_is_null(g) &&
                    (!json_is_integer(g) || json_integer_value(g) < 0 ||
                     json_integer_value(g) > 86400000))) {
        as_reply_bad_request(r, "want {\"client\": NAME, \"grace_ms\": 0..86400000}");
    } else if (!as_auth_rotate(api->auth, client, g ? json_integer_value(g) : 0, token,
                               msg, sizeof msg)) {
        as_reply_bad_request(r, msg);
    } else {
        as_reply_json(r, 200, json_pack("{s:s,s:s}", "client", client, "token", token));
    }
    json_decref(j);
}

static void revoke_token(const struct as_control_ctx *api, const char *body, size_t len,
                         struct as_reply *r)
{
    json_t *j = parse_body(body, len, false, r);
    if (!j)
        return;
    const char *client = json_string_value(json_object_get(j, "client"));
    json_t *prev = json_object_get(j, "previous");
    bool only_previous = json_is_true(prev);
    if (!client || (prev && !json_is_boolean(prev)) ||
        !(only_previous ? as_auth_revoke_previous(api->auth, client)
                        : as_auth_revoke(api->auth, client)))
        as_reply_bad_request(r, "want {\"client\": NAME, \"previous\": BOOL} naming a "
                                "known client");
    else
        as_reply_json(r, 200,
                      json_pack("{s:s,s:b,s:b}", "client", client, "revoked", 1,
                                "previous", only_previous));
    json_decref(j);
}

/* sub is "/raw/NS/NAME". */
static void put_raw(const struct as_control_ctx *api, const char *sub, const char *body,
                    size_t len, const char *stamp, struct as_reply *r)
{
    char ns[64], name[254];
    const char *p = sub + strlen("/raw/");
    const char *slash = strchr(p, '/');
    if (!slash || (size_t)(slash - p) >= sizeof ns || strlen(slash + 1) >= sizeof name ||
        strchr(slash + 1, '/')) {
        as_reply_bad_request(r, "want PUT /_control/raw/NAMESPACE/NAME");
        return;
    }
    memcpy(ns, p, (size_t)(slash - p));
    ns[slash - p] = '\0';
    snprintf(name, sizeof name, "%s", slash + 1);
    if (!as_dns1123_label(ns) || !*name) {
        as_reply_bad_request(r, "bad namespace or name");
        return;
    }
    bool stamped = stamp && (strcmp(stamp, "1") == 0 || strcmp(stamp, "true") == 0);
    uint64_t rv = as_store_put_raw(api->store, ns, name, body, len, AS_ADMIN, stamped);
    if (!rv) {
        as_reply_internal(r, "cannot store raw document");
        return;
    }
    char rvs[24];
    snprintf(rvs, sizeof rvs, "%" PRIu64, rv);
    as_reply_json(r, 200,
                  json_pack("{s:s,s:s,s:s}", "namespace", ns, "name", name,
                            "resourceVersion", rvs));
}

static void get_log(const struct as_control_ctx *api, const struct as_kind *kind,
                    const char *since, struct as_reply *r)
{
    long long from = 0;
    if (since && !as_parse_ll(since, 0, INT64_MAX, &from)) {
        as_reply_bad_request(r, "since must be a non-negative integer");
        return;
    }
    json_t *entries = as_store_log(api->store, kind, (uint64_t)from);
    as_reply_json(r, 200, entries ? json_pack("{s:o}", "entries", entries) : NULL);
}

void as_control(const struct as_control_ctx *api, const char *method, const char *sub,
                const char *body, size_t len, const struct as_control_query *q,
                struct as_reply *r)
{
    bool get = strcmp(method, "GET") == 0;
    bool post = strcmp(method, "POST") == 0;
    if (post && strcmp(sub, "/faults") == 0)
        set_faults(api, body, len, r);
    else if (get && strcmp(sub, "/faults") == 0)
        as_reply_json(r, 200, as_faults_json(api->faults));
    else if (post && strcmp(sub, "/faults/clear") == 0)
        clear_faults(api, body, len, r);
    else if (post && (strcmp(sub, "/pause") == 0 || strcmp(sub, "/resume") == 0 ||
                      strcmp(sub, "/unpause") == 0)) {
        bool pause = strcmp(sub, "/pause") == 0;
        as_faults_set_paused(api->faults, pause);
        as_reply_json(r, 200, json_pack("{s:b}", "paused", pause));
    } else if (post && strcmp(sub, "/rotate") == 0)
        rotate_token(api, body, len, r);
    else if (post && strcmp(sub, "/revoke") == 0)
        revoke_token(api, body, len, r);
    else if (strcmp(method, "PUT") == 0 && strncmp(sub, "/raw/", 5) == 0)
        put_raw(api, sub, body, len, q->stamp, r);
    else if (get && strcmp(sub, "/log") == 0)
        get_log(api, &as_kind_lease, q->since, r);
    else if (get && strcmp(sub, "/configmaps/log") == 0)
        get_log(api, &as_kind_configmap, q->since, r);
    else if (get && strcmp(sub, "/tokens") == 0)
        as_reply_json(r, 200, as_auth_uses_json(api->auth));
    else if (get && strcmp(sub, "/stats") == 0)
        as_reply_json(r, 200, as_stats_json(api->stats));
    else if (get && strcmp(sub, "/held") == 0)
        as_reply_json(r, 200, as_stats_held_json(api->stats));
    else if (post && strcmp(sub, "/stats/reset") == 0) {
        as_stats_reset(api->stats);
        as_reply_json(r, 200, json_object());
    } else
        as_reply_status(r, 404, "NotFound", "no such control endpoint", NULL);
}
