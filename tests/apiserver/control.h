/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control: the admin-only /_control/ API tests use to steer
 * leaderd-apiserver: faults per client, pause/resume, token rotation and
 * revocation, raw (unvalidated) Lease documents, the write logs (/log for
 * Leases, /configmaps/log for ConfigMaps, see as_store_log) and request
 * statistics. JSON in, JSON out; errors are 400/404 Status bodies.
 */
#ifndef AS_CONTROL_H
#define AS_CONTROL_H

#include <stddef.h>

#include "auth.h"
#include "faults.h"
#include "stats.h"
#include "status.h"
#include "store.h"

/* The query parameters control requests use; each NULL when absent. */
struct as_control_query {
    const char *since; /* GET /log: entries after this seq */
    const char *stamp; /* PUT /raw: "1" or "true" stamps the resourceVersion */
};

/* What control requests act on: the server's parts, borrowed from the API
 * side for one call (the API side depends on control, never the reverse). */
struct as_control_ctx {
    struct as_store *store;
    struct as_faults *faults;
    struct as_stats *stats;
    struct as_auth *auth;
};

/* Handles one control request. sub is the path after "/_control" (e.g.
 * "/faults"), body/len the request body. Sets r. */
void as_control(const struct as_control_ctx *api, const char *method, const char *sub,
                const char *body, size_t len, const struct as_control_query *q,
                struct as_reply *r);

#endif
