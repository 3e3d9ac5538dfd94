/*
 * leaseval: decoding and validation of coordination.k8s.io/v1 Lease bodies
 * the way kube-apiserver does it: type errors and malformed MicroTime are
 * 400 BadRequest (the body does not decode), rule violations are 422
 * Invalid with causes[]. Unknown fields are dropped. Pure functions.
 */
#ifndef AS_LEASEVAL_H
#define AS_LEASEVAL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "status.h"

/* Parses a request body into a normalised Lease (see as_lease_normalize).
 * Returns a new reference, or NULL with a 400 reply in err. */
json_t *as_lease_parse(const char *text, size_t len, struct as_reply *err);

/* Builds a normalised copy of in (borrowed): kind and apiVersion set,
 * metadata limited to name, generateName, namespace, uid, resourceVersion,
 * creationTimestamp, labels, annotations, ownerReferences (each limited to
 * metav1.OwnerReference's fields), finalizers;
 * spec limited to the Lease fields, nulls dropped, times rewritten in UTC
 * with six fractional digits; "spec" always present. Returns a new
 * reference, or NULL with a 400 reply in err when a field has the wrong
 * JSON type, an integer is out of int32 range, or a time does not parse. */
json_t *as_lease_normalize(json_t *in, struct as_reply *err);

/* Applies the coordination/v1 validation rules to a normalised Lease:
 * metadata.name a DNS-1123 subdomain (or, on create, generateName set),
 * metadata.labels keys qualified names and values label values,
 * metadata.ownerReferences each with apiVersion (with a version), kind, name
 * and uid, spec.leaseDurationSeconds > 0 and spec.leaseTransitions >= 0 when
 * present. Returns true, or false with a 422 reply in err. */
bool as_lease_validate(json_t *lease, bool create, struct as_reply *err);

/* True when s is a DNS-1123 subdomain (at most 253 characters). */
bool as_dns1123_subdomain(const char *s);
/* True when s is a DNS-1123 label (at most 63 characters). */
bool as_dns1123_label(const char *s);

/* Parses Kubernetes MicroTime: RFC 3339 with exactly six fractional digits
 * and "Z" or a numeric offset. Sets *wall_us (UTC) and returns true. */
bool as_parse_microtime(const char *s, int64_t *wall_us);

/* Parses RFC 3339 with an optional fraction of 1..9 digits (metav1.Time). */
bool as_parse_rfc3339(const char *s, int64_t *wall_us);

#endif
