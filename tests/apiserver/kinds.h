/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kinds: the resource kinds the store holds (coordination.k8s.io/v1 Lease,
 * core/v1 ConfigMap), described once so the store, watch and REST front
 * run one write path for all of them: the names in URLs, objects and Status
 * bodies, and the per-kind decoding, validation, object shaping and write
 * log fields. Static tables and pure functions.
 */
#ifndef AS_KINDS_H
#define AS_KINDS_H

#include <stdbool.h>

#include <jansson.h>

#include "status.h"

enum { AS_KIND_LEASE, AS_KIND_CONFIGMAP, AS_KIND_COUNT };

struct as_kind {
    int index;               /* AS_KIND_* */
    const char *kind;        /* "Lease" */
    const char *api_version; /* "coordination.k8s.io/v1" */
    const char *group;       /* "coordination.k8s.io"; "" for the core group */
    const char *resource;    /* "leases" */
    const char *list_kind;   /* "LeaseList" */
    /* Decodes a body (or a patched document) into a normalised object: a
     * new reference, or NULL with a 400 reply in err. */
    json_t *(*normalize)(json_t *in, struct as_reply *err);
    /* The kind's validation of a normalised object; old is the stored
     * object on update (borrowed, NULL on create). False with a 422. */
    bool (*validate)(json_t *obj, json_t *old, struct as_reply *err);
    /* Copies the kind's own fields (all but kind, apiVersion and metadata)
     * from the normalised src to the object being stored, obj; old as in
     * validate. False on allocation failure. */
    bool (*body)(json_t *obj, json_t *src, json_t *old);
    /* Adds the kind's fields of obj (borrowed, may be NULL) to a write log
     * entry. */
    void (*log_fields)(json_t *entry, json_t *obj);
};

extern const struct as_kind as_kind_lease;
extern const struct as_kind as_kind_configmap;

/* The kind named kind ("Lease", "ConfigMap"), or NULL. */
const struct as_kind *as_kind_named(const char *kind);

#endif
