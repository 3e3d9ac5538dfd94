/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status: HTTP replies of leaderd-apiserver. A struct as_reply carries one
 * response body; the as_reply_* helpers build metav1.Status failure bodies
 * shaped exactly like kube-apiserver's (apimachinery pkg/api/errors).
 */
#ifndef AS_STATUS_H
#define AS_STATUS_H

#include <stddef.h>

#include <jansson.h>

#define AS_GROUP "coordination.k8s.io"
#define AS_RESOURCE "leases"

struct as_reply {
    unsigned code;
    char *body; /* owned, NUL-terminated; NULL for an empty body */
    size_t len;
    const char *ctype; /* static string */
    int retry_after;   /* seconds for a Retry-After header; -1 for none */
};

void as_reply_init(struct as_reply *r);
/* Frees the body and re-initialises r. NULL-safe. */
void as_reply_clear(struct as_reply *r);

/* Sets r to code with j serialised compactly as application/json. Steals
 * j (NULL means allocation failed: r becomes a plain-text 500). */
void as_reply_json(struct as_reply *r, unsigned code, json_t *j);

/* Sets r to code with a copy of text (len bytes) and content type ctype
 * (must be a static string). */
void as_reply_text(struct as_reply *r, unsigned code, const char *ctype, const char *text,
                   size_t len);

/* {"name":name,"group":"coordination.k8s.io","kind":kind}; name may be NULL.
 * Returns a new reference or NULL. */
json_t *as_status_details(const char *name, const char *kind);

/* The same for any API group; group "" (the core group) is left out, as
 * StatusDetails' omitempty does. */
json_t *as_status_details_in(const char *group, const char *name, const char *kind);

/* A metav1.Status failure: kind, apiVersion, metadata {}, status "Failure",
 * message, reason, details (stolen; omitted when NULL), code. */
json_t *as_status_failure(unsigned code, const char *reason, const char *message,
                          json_t *details);

/* Sets r to a Status failure (details stolen, may be NULL). */
void as_reply_status(struct as_reply *r, unsigned code, const char *reason,
                     const char *message, json_t *details);

/* 404 `leases.coordination.k8s.io "name" not found`. */
void as_reply_not_found(struct as_reply *r, const char *name);
/* 409 AlreadyExists `leases.coordination.k8s.io "name" already exists`. */
void as_reply_exists(struct as_reply *r, const char *name);
/* 409 Conflict `Operation cannot be fulfilled on leases.coordination.k8s.io
 * "name": why`. */
void as_reply_conflict(struct as_reply *r, const char *name, const char *why);
/* The reason optimistic concurrency gives for a stale resourceVersion. */
#define AS_OPTIMISTIC_LOCK_MSG                                                           \
    "the object has been modified; please apply your changes to the latest version "     \
    "and try again"
/* The same three for any resource: group "" is the core group, whose
 * resources print bare (`configmaps "name" not found`). */
void as_reply_not_found_in(struct as_reply *r, const char *group, const char *resource,
                           const char *name);
void as_reply_exists_in(struct as_reply *r, const char *group, const char *resource,
                        const char *name);
void as_reply_conflict_in(struct as_reply *r, const char *group, const char *resource,
                          const char *name, const char *why);
/* 400 BadRequest with message. */
void as_reply_bad_request(struct as_reply *r, const char *message);
/* 500 InternalError "Internal error occurred: message". */
void as_reply_internal(struct as_reply *r, const char *message);

/* Collects field errors for a 422 Invalid reply. */
struct as_field_errors {
    json_t *causes; /* array of {reason, message, field} */
    char *text;     /* "field: message" pieces joined by ", " */
    size_t count;
};
void as_field_errors_init(struct as_field_errors *fe);
void as_field_errors_clear(struct as_field_errors *fe);
/* Adds one cause; reason is the cause type (e.g. "FieldValueInvalid"),
 * message its text (e.g. "Invalid value: 0: must be greater than 0"). */
void as_field_errors_add(struct as_field_errors *fe, const char *reason,
                         const char *field, const char *message);
/* 422 Invalid: `<kind>.coordination.k8s.io "name" is invalid: <errors>`,
 * details {name, group, kind, causes}. kind is "Lease" for validation and
 * "leases" for the missing-resourceVersion error, as in kube-apiserver. */
void as_reply_invalid(struct as_reply *r, const char *kind, const char *name,
                      struct as_field_errors *fe);

/* as_reply_invalid for any API group ("" for the core group: `ConfigMap
 * "name" is invalid: ...`). */
void as_reply_invalid_in(struct as_reply *r, const char *group, const char *kind,
                         const char *name, struct as_field_errors *fe);

/* 429 with kube's plain-text body and a Retry-After header. */
void as_reply_too_many(struct as_reply *r, int retry_after);

/* Returns the metav1.Status reason kube uses for an HTTP code. */
const char *as_reason_for_code(unsigned code);

#endif
