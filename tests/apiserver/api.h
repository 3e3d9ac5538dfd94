/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api: the HTTP front of leaderd-apiserver (libmicrohttpd, thread per
 * connection). Authenticates (client certificate or bearer token), applies
 * the pause and the caller's faults, then routes to discovery, the Lease and
 * ConfigMap REST APIs (one path for both, kinds.h), watch, Pods, Events or
 * the admin /_control/ API.
 */
#ifndef AS_API_H
#define AS_API_H

#include <stdatomic.h>
#include <stdbool.h>

#include <microhttpd.h>

#include "auth.h"
#include "events.h"
#include "faults.h"
#include "pod_resource.h"
#include "stats.h"
#include "store.h"

/* Request bodies above this get 413, like kube-apiserver's 3 MiB limit. */
#define AS_MAX_BODY (3u << 20)

struct as_api {
    struct as_store *store;   /* borrowed */
    struct as_faults *faults; /* borrowed */
    struct as_stats *stats;   /* borrowed */
    struct as_auth *auth;     /* borrowed */
    struct as_pods *pods;     /* borrowed */
    struct as_events *events; /* borrowed */
    char server_addr[160];    /* "127.0.0.1:PORT" */
    bool verbose;             /* one stderr line per request */
    atomic_bool stopping;     /* set on shutdown: held requests give up */
};

/* MHD_AccessHandlerCallback; cls is the struct as_api. */
enum MHD_Result as_api_access(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version,
                              const char *upload_data, size_t *upload_data_size,
                              void **con_cls);

/* MHD_RequestCompletedCallback freeing per-request state. */
void as_api_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe);

#endif
