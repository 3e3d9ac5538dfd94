/* SPDX-License-Identifier: Apache-2.0 */
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

/* Longest holderIdentity (and strategy, preferredHolder) kept in full.
 * Kubernetes bounds none of them, so a valid Lease may carry a longer one,
 * or one with a NUL byte that a C string cannot hold. Such a value is
 * "abridged": the decoded string is a display form that names nobody,
 *
 *   PREFIX...(truncated: N bytes, fnv1a64=HHHHHHHHHHHHHHHH)
 *
 * PREFIX being at most LD_LEASE_SHOWN_PREFIX bytes of the value (cut at a
 * character boundary and before any NUL), N its length in bytes and H the
 * FNV-1a 64 of all N bytes, so two different long values still differ. The
 * record still counts as held by someone else, and its original value stays
 * in the object, so a write that keeps the field keeps it unchanged. */
#define LD_LEASE_MAX_HOLDER 1024
#define LD_LEASE_SHOWN_PREFIX 64

/* The annotation that names the process (not only the identity) that
 * wrote a Lease as its holder: a random value every leaderd process draws
 * at start (docs/design/election.md, "Incarnations"). client-go peers keep
 * annotations they do not know, and write none. */
#define LD_LEASE_INCARNATION "leaderd.io/incarnation"
/* Length of an incarnation leaderd draws: 128 bits in lower-case hex. */
#define LD_INCARNATION_HEX 32

/* The election-relevant part of spec. Time fields are wall microseconds
 * since the epoch, valid only when the matching has_ flag is set. */
struct ld_lease_spec {
    char *holder;         /* owned; "" when nobody holds it (never NULL after decode) */
    bool holder_abridged; /* holder is the display form (see LD_LEASE_MAX_HOLDER) */
    int32_t duration_s;   /* leaseDurationSeconds; 0 when absent */
    bool has_acquire;
    int64_t acquire_us;
    bool has_renew;
    int64_t renew_us;
    int32_t transitions;    /* leaseTransitions; 0 when absent */
    char *strategy;         /* owned, NULL when absent (copied forward on write) */
    char *preferred_holder; /* owned, NULL when absent */
    bool strategy_abridged; /* these two are display forms, as holder can be */
    bool preferred_abridged;
};

struct ld_lease {
    char *name;             /* owned */
    char *namespace_;       /* owned */
    char *resource_version; /* owned; NULL for a Lease never stored */
    char *uid;              /* owned; metadata.uid, NULL when absent */
    struct ld_lease_spec spec;
    /* metadata.annotations[LD_LEASE_INCARNATION] (owned), NULL when absent.
     * It is the source of the annotation on encode: set when non-NULL,
     * removed when NULL. A value holding a NUL byte decodes as its prefix
     * followed by "(nul)", which names no process (and is what a write of
     * such a record would put back). */
    char *incarnation;
    /* The whole object as the server returned it (owned reference), or
     * NULL. Encoding starts from it so labels, annotations, ownerReferences
     * and fields this code does not know survive a PUT. */
    json_t *object;
    /* The same object as compact JSON text (owned), kept instead of object
     * by ld_lease_copy_compact; NULL otherwise. Never both set. */
    char *object_text;
};

/* Zeroes l. A zeroed lease is valid input to every function here. */
void ld_lease_init(struct ld_lease *l);

/* Frees what l owns and zeroes it; the struct itself is the caller's.
 * NULL-safe. */
void ld_lease_clear(struct ld_lease *l);

/* Deep-copies src into dst (dst is cleared first). LD_OK or LD_ENOMEM. */
enum ld_err ld_lease_copy(struct ld_lease *dst, const struct ld_lease *src);

/* The same, but dst keeps the object as compact JSON text (object_text),
 * for a Lease kept between writes: about a fifth of the memory of a jansson
 * tree, for the price of a parse when it is encoded. LD_OK or LD_ENOMEM,
 * dst untouched on failure. */
enum ld_err ld_lease_copy_compact(struct ld_lease *dst, const struct ld_lease *src);

/* Sets dst->spec.holder etc. from a spec; deep copy. LD_OK or LD_ENOMEM. */
enum ld_err ld_lease_spec_copy(struct ld_lease_spec *dst,
                               const struct ld_lease_spec *src);
void ld_lease_spec_clear(struct ld_lease_spec *s);

/* True when the two specs record the same election state: holder, duration,
 * acquire/renew times (to the microsecond), transitions, strategy and
 * preferredHolder. Used to detect that the holder wrote something. */
bool ld_lease_spec_equal(const struct ld_lease_spec *a, const struct ld_lease_spec *b);

/* Whether s names identity as its holder. An abridged holder names nobody. */
bool ld_lease_spec_held_by(const struct ld_lease_spec *s, const char *identity);

/* Whether l is held by this very process: its holder is identity and its
 * incarnation annotation is incarnation; with incarnation NULL or "" (a
 * caller that draws none), whether it is held by identity and carries no
 * incarnation. */
bool ld_lease_held_by(const struct ld_lease *l, const char *identity,
                      const char *incarnation);

/* Whether a and b are the same stored object: their uids are equal, or
 * either has none, as nothing then tells them apart. */
bool ld_lease_same_object(const struct ld_lease *a, const struct ld_lease *b);

/* Replaces l->incarnation with a copy of incarnation (NULL or "": none, so
 * the annotation is removed on encode). LD_OK, or LD_ENOMEM with l
 * unchanged. */
enum ld_err ld_lease_set_incarnation(struct ld_lease *l, const char *incarnation);

/* Sets every annotation of annotations (a JSON object of strings, as
 * text) on l's object, which becomes a tree if it was text (an absent one
 * is made). Other annotations stay. LD_OK, LD_EINVAL when annotations is
 * no such object, or LD_ENOMEM; l unchanged on failure. */
enum ld_err ld_lease_set_annotations(struct ld_lease *l, const char *annotations);

/* Replaces s->holder with a copy of holder (a value kept in full, "" to
 * free the Lease). LD_OK, or LD_ENOMEM with s unchanged. */
enum ld_err ld_lease_spec_set_holder(struct ld_lease_spec *s, const char *holder);

/* Decodes one Lease object from JSON text. Checks kind/apiVersion when
 * present, requires metadata.name and a spec object, and rejects wrong
 * types, negative or out-of-range integers, undecodable times and metadata
 * strings with a NUL byte. A holder, strategy or preferredHolder too long
 * or with a NUL byte is abridged (see LD_LEASE_MAX_HOLDER), not an error:
 * the API server accepts such Leases. Unknown fields are ignored (but kept
 * in out->object). On error out is left cleared. */
enum ld_err ld_lease_decode(const char *text, size_t len, struct ld_lease *out,
                            struct ld_errinfo *err);

/* Same, from an already parsed object (borrowed; a new reference is taken
 * for out->object). Used for watch events. */
enum ld_err ld_lease_from_json(json_t *obj, struct ld_lease *out, struct ld_errinfo *err);

/* Encodes l for a POST or PUT. Starts from a deep copy of l->object when
 * present, else from l->object_text parsed, otherwise from {apiVersion,
 * kind}; sets metadata.name, metadata.namespace, metadata.resourceVersion
 * (removed when NULL), and the spec: holderIdentity (always, "" when free),
 * leaseDurationSeconds (when > 0), acquireTime and renewTime as MicroTime
 * (null when absent), leaseTransitions (always), strategy and
 * preferredHolder (only when non-empty, else removed). An abridged field
 * is left as the object has it. Returns a new string (free with free()) or
 * NULL on allocation failure. */
char *ld_lease_encode(const struct ld_lease *l);

/* Decodes a metav1.Status body into err->reason / err->msg /
 * err->retry_after_ms (details.retryAfterSeconds) without touching
 * err->code or err->http_status. Bodies that are not a Status (a 429's
 * plain text, HTML from a proxy) put their first printable line, cut to
 * fit, into err->msg. Never fails; NULL-safe. */
void ld_status_decode(const char *text, size_t len, struct ld_errinfo *err);

#endif
