/* SPDX-License-Identifier: Apache-2.0 */
#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char oom_body[] = "internal error: out of memory\n";

void as_reply_init(struct as_reply *r)
{
    r->code = 0;
    r->body = NULL;
    r->len = 0;
    r->ctype = "application/json";
    r->retry_after = -1;
}

void as_reply_clear(struct as_reply *r)
{
    if (!r)
        return;
    free(r->body);
    as_reply_init(r);
}

void as_reply_text(struct as_reply *r, unsigned code, const char *ctype, const char *text,
                   size_t len)
{
    free(r->body);
    r->body = malloc(len + 1);
    if (!r->body) {
        r->code = 500;
        r->len = 0;
        r->ctype = "text/plain; charset=utf-8";
        return;
    }
    memcpy(r->body, text, len);
    r->body[len] = '\0';
    r->len = len;
    r->code = code;
    r->ctype = ctype;
}

void as_reply_json(struct as_reply *r, unsigned code, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    free(r->body);
    r->body = NULL;
    r->len = 0;
    if (!text) {
        as_reply_text(r, 500, "text/plain; charset=utf-8", oom_body, sizeof oom_body - 1);
        return;
    }
    r->body = text;
    r->len = strlen(text);
    r->code = code;
    r->ctype = "application/json";
}

json_t *as_status_details_in(const char *group, const char *name, const char *kind)
{
    json_t *d = json_object();
    if (!d)
        return NULL;
    if (name)
        json_object_set_new(d, "name", json_string(name));
    /* StatusDetails.group is omitempty: the core group does not show. */
    if (group && *group)
        json_object_set_new(d, "group", json_string(group));
    json_object_set_new(d, "kind", json_string(kind));
    return d;
}

json_t *as_status_details(const char *name, const char *kind)
{
    return as_status_details_in(AS_GROUP, name, kind);
}

/* "resource.group" as schema.GroupResource prints it: the bare resource for
 * the core group. */
static void qualified(char *out, size_t n, const char *group, const char *resource)
{
    if (group && *group)
        snprintf(out, n, "%s.%s", resource, group);
    else
        snprintf(out, n, "%s", resource);
}

json_t *as_status_failure(unsigned code, const char *reason, const char *message,
                          json_t *details)
{
    json_t *s = json_object();
    if (!s) {
        json_decref(details);
        return NULL;
    }
    json_object_set_new(s, "kind", json_string("Status"));
    json_object_set_new(s, "apiVersion", json_string("v1"));
    json_object_set_new(s, "metadata", json_object());
    json_object_set_new(s, "status", json_string("Failure"));
    json_object_set_new(s, "message", json_string(message));
    json_object_set_new(s, "reason", json_string(reason));
    if (details)
        json_object_set_new(s, "details", details);
    json_object_set_new(s, "code", json_integer(code));
    return s;
}

void as_reply_status(struct as_reply *r, unsigned code, const char *reason,
                     const char *message, json_t *details)
{
    as_reply_json(r, code, as_status_failure(code, reason, message, details));
}

void as_reply_not_found_in(struct as_reply *r, const char *group, const char *resource,
                           const char *name)
{
    char msg[512], gr[128];
    qualified(gr, sizeof gr, group, resource);
    snprintf(msg, sizeof msg, "%s \"%s\" not found", gr, name);
    as_reply_status(r, 404, "NotFound", msg, as_status_details_in(group, name, resource));
}

void as_reply_exists_in(struct as_reply *r, const char *group, const char *resource,
                        const char *name)
{
    char msg[512], gr[128];
    qualified(gr, sizeof gr, group, resource);
    snprintf(msg, sizeof msg, "%s \"%s\" already exists", gr, name);
    as_reply_status(r, 409, "AlreadyExists", msg,
                    as_status_details_in(group, name, resource));
}

void as_reply_conflict_in(struct as_reply *r, const char *group, const char *resource,
                          const char *name, const char *why)
{
    char msg[1024], gr[128];
    qualified(gr, sizeof gr, group, resource);
    snprintf(msg, sizeof msg, "Operation cannot be fulfilled on %s \"%s\": %s", gr, name,
             why);
    as_reply_status(r, 409, "Conflict", msg, as_status_details_in(group, name, resource));
}

void as_reply_not_found(struct as_reply *r, const char *name)
{
    as_reply_not_found_in(r, AS_GROUP, AS_RESOURCE, name);
}

void as_reply_exists(struct as_reply *r, const char *name)
{
    as_reply_exists_in(r, AS_GROUP, AS_RESOURCE, name);
}

void as_reply_conflict(struct as_reply *r, const char *name, const char *why)
{
    as_reply_conflict_in(r, AS_GROUP, AS_RESOURCE, name, why);
}

void as_reply_bad_request(struct as_reply *r, const char *message)
{
    as_reply_status(r, 400, "BadRequest", message, NULL);
}

void as_reply_internal(struct as_reply *r, const char *message)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "Internal error occurred: %s", message);
    json_t *d = json_object();
    json_t *causes = json_array();
    json_t *c = json_object();
    if (c) {
        json_object_set_new(c, "message", json_string(message));
    }
    json_array_append_new(causes, c);
    json_object_set_new(d, "causes", causes);
    as_reply_status(r, 500, "InternalError", msg, d);
}

void as_field_errors_init(struct as_field_errors *fe)
{
    fe->causes = json_array();
    fe->text = NULL;
    fe->count = 0;
}

void as_field_errors_clear(struct as_field_errors *fe)
{
    if (!fe)
        return;
    json_decref(fe->causes);
    free(fe->text);
    fe->causes = NULL;
    fe->text = NULL;
    fe->count = 0;
}

void as_field_errors_add(struct as_field_errors *fe, const char *reason,
                         const char *field, const char *message)
{
    json_t *c = json_object();
    if (c) {
        json_object_set_new(c, "reason", json_string(reason));
        json_object_set_new(c, "message", json_string(message));
        json_object_set_new(c, "field", json_string(field));
        json_array_append_new(fe->causes, c);
    }
    char *joined = NULL;
    if (asprintf(&joined, "%s%s%s: %s", fe->text ? fe->text : "", fe->text ? ", " : "",
                 field, message) < 0)
        joined = NULL;
    if (joined) {
        free(fe->text);
        fe->text = joined;
    }
    fe->count++;
}

void as_reply_invalid_in(struct as_reply *r, const char *group, const char *kind,
                         const char *name, struct as_field_errors *fe)
{
    char *msg = NULL, gk[128];
    const char *errs = fe->text ? fe->text : "";
    int n;
    qualified(gk, sizeof gk, group, kind);
    /* kube's ErrorList.ToAggregate prints one error bare and several in []. */
    if (fe->count > 1)
        n = asprintf(&msg, "%s \"%s\" is invalid: [%s]", gk, name, errs);
    else
        n = asprintf(&msg, "%s \"%s\" is invalid: %s", gk, name, errs);
    if (n < 0)
        msg = NULL;
    json_t *d = as_status_details_in(group, name, kind);
    if (d && fe->causes)
        json_object_set(d, "causes", fe->causes);
    as_reply_status(r, 422, "Invalid", msg ? msg : "invalid", d);
    free(msg);
}

void as_reply_invalid(struct as_reply *r, const char *kind, const char *name,
                      struct as_field_errors *fe)
{
    as_reply_invalid_in(r, AS_GROUP, kind, name, fe);
}

void as_reply_too_many(struct as_reply *r, int retry_after)
{
    static const char body[] = "Too many requests, please try again later.\n";
    as_reply_text(r, 429, "text/plain; charset=utf-8", body, sizeof body - 1);
    r->retry_after = retry_after;
}

const char *as_reason_for_code(unsigned code)
{
    switch (code) {
    case 400:
        return "BadRequest";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "NotFound";
    case 405:
        return "MethodNotAllowed";
    case 409:
        return "Conflict";
    case 410:
        return "Expired";
    case 413:
        return "RequestEntityTooLarge";
    case 415:
        return "UnsupportedMediaType";
    case 422:
        return "Invalid";
    case 429:
        return "TooManyRequests";
    case 500:
        return "InternalError";
    case 503:
        return "ServiceUnavailable";
    case 504:
        return "Timeout";
    default:
        return "";
    }
}
