/* SPDX-License-Identifier: Apache-2.0 */
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

/* The decoding every kind shares. kind is the Go type's name ("Lease",
 * "ConfigMap"), which the 400 messages quote: `KIND in version "v1" cannot
 * be handled as a KIND: ...`. */

/* Parses text as JSON; a new reference, or NULL with a 400 in err. */
json_t *as_decode_text(const char *kind, const char *text, size_t len,
                       struct as_reply *err);

/* Checks that in (borrowed) is a JSON object whose apiVersion and kind are
 * absent, empty or api_version and kind, and decodes its metadata the way
 * as_lease_normalize describes. Returns the normalised metadata (a new
 * object, empty when in has none) or NULL with a 400 (500) reply in err. */
json_t *as_decode_envelope(json_t *in, const char *kind, const char *api_version,
                           struct as_reply *err);

/* Sets err to the 400 encoding/json gives for v in the Go field field of
 * type gotype ("json: cannot unmarshal number into Go struct field ..."). */
void as_decode_type_error(const char *kind, struct as_reply *err, const json_t *v,
                          const char *field, const char *gotype);

/* ObjectMeta's rules for every kind, added to fe: metadata.name a DNS-1123
 * subdomain (on create, generateName may stand in for it), labels and
 * ownerReferences as as_lease_validate says. */
void as_meta_validate(json_t *meta, bool create, struct as_field_errors *fe);

/* Adds a FieldValueInvalid cause `Invalid value: "value": why` to fe. */
void as_field_invalid(struct as_field_errors *fe, const char *field, const char *value,
                      const char *why);

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
