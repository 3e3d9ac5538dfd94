/*
 * lease: the coordination.k8s.io/v1 Lease as a C value, and its JSON codec
 * (jansson). Also decodes metav1.Status error bodies. Pure: no I/O, no
 * clock. Malformed input yields an error, never a crash or a half-filled
 * value that looks valid.
 */
#ifndef LEADERD_LEASE_H
#define LEADERD_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "err.h"

/* Longest holderIdentity we accept from the server. Kubernetes does not
 * bound it, but real identities are a pod name plus a suffix; anything
 * longer is treated as a corrupted record. */
#define LD_LEASE_MAX_HOLDER 1024

/* The election-relevant part of spec. Time fields are wall microseconds
 * since the epoch, valid only when the matching has_ flag is set. */
struct ld_lease_spec {
    char *holder;       /* owned; "" when nobody holds it (never NULL after decode) */
    int32_t duration_s; /* leaseDurationSeconds; 0 when absent */
    bool has_acquire;
    int64_t acquire_us;
    bool has_renew;
    int64_t renew_us;
    int32_t transitions;    /* leaseTransitions; 0 when absent */
    char *strategy;         /* owned, NULL when absent (copied forward on write) */
    char *preferred_holder; /* owned, NULL when absent */
};

struct ld_lease {
    char *name;             /* owned */
    char *namespace_;       /* owned */
    char *resource_version; /* owned; NULL for a Lease never stored */
    char *uid;              /* owned; metadata.uid, NULL when absent */
    struct ld_lease_spec spec;
    /* The whole object as the server returned it (owned reference), or
     * NULL. Encoding starts from it so labels, annotations, ownerReferences
     * and fields this code does not know survive a PUT. */
    json_t *object;
};

/* Zeroes l. A zeroed lease is valid input to every function here. */
void ld_lease_init(struct ld_lease *l);

/* Frees what l owns and zeroes it; the struct itself is the caller's.
 * NULL-safe. */
void ld_lease_clear(struct ld_lease *l);

/* Deep-copies src into dst (dst is cleared first). LD_OK or LD_ENOMEM. */
enum ld_err ld_lease_copy(struct ld_lease *dst, const struct ld_lease *src);

/* Sets dst->spec.holder etc. from a spec; deep copy. LD_OK or LD_ENOMEM. */
enum ld_err ld_lease_spec_copy(struct ld_lease_spec *dst,
                               const struct ld_lease_spec *src);
void ld_lease_spec_clear(struct ld_lease_spec *s);

/* True when the two specs record the same election state: holder, duration,
 * acquire/renew times (to the microsecond), transitions, strategy and
 * preferredHolder. Used to detect that the holder wrote something. */
bool ld_lease_spec_equal(const struct ld_lease_spec *a, const struct ld_lease_spec *b);

/* Decodes one Lease object from JSON text. Checks kind/apiVersion when
 * present, requires metadata.name and a spec object, and rejects wrong
 * types, negative or out-of-range integers, undecodable times and a holder
 * longer than LD_LEASE_MAX_HOLDER. Unknown fields are ignored (but kept in
 * out->object). On error out is left cleared. */
enum ld_err ld_lease_decode(const char *text, size_t len, struct ld_lease *out,
                            struct ld_errinfo *err);

/* Same, from an already parsed object (borrowed; a new reference is taken
 * for out->object). Used for watch events. */
enum ld_err ld_lease_from_json(json_t *obj, struct ld_lease *out, struct ld_errinfo *err);

/* Encodes l for a POST or PUT. Starts from a deep copy of l->object when
 * present, otherwise from {apiVersion, kind}; sets metadata.name,
 * metadata.namespace, metadata.resourceVersion (removed when NULL), and the
 * spec: holderIdentity (always, "" when free), leaseDurationSeconds (when
 * > 0), acquireTime and renewTime as MicroTime (null when absent),
 * leaseTransitions (always), strategy and preferredHolder (only when
 * non-empty, else removed). Returns a new string (free with free()) or
 * NULL on allocation failure. */
char *ld_lease_encode(const struct ld_lease *l);

/* Decodes a metav1.Status body into err->reason / err->msg /
 * err->retry_after_ms (details.retryAfterSeconds) without touching
 * err->code or err->http_status. Bodies that are not a Status (a 429's
 * plain text, HTML from a proxy) put their first printable line, cut to
 * fit, into err->msg. Never fails; NULL-safe. */
void ld_status_decode(const char *text, size_t len, struct ld_errinfo *err);

#endif
