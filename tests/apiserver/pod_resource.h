/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pod_resource: a minimal core/v1 Pod resource for leaderd-apiserver, enough for
 * --pod-label: GET one Pod, LIST a namespace's Pods by labelSelector
 * (labelsel.h), and PATCH one Pod with a JSON merge patch or a strategic
 * merge patch (the same thing for metadata.labels, a plain map), with
 * labels validated as the real server does (422 Invalid). Pods are created
 * only through the control API (tests stand in for the kubelet), and every
 * label change is recorded in an ordered log so tests can check who wrote
 * what in which order. In memory only; thread-safe (one mutex).
 */
#ifndef AS_POD_RESOURCE_H
#define AS_POD_RESOURCE_H

#include <stddef.h>

#include "status.h"

struct as_pods;

/* Returns a new table (free with as_pods_free) or NULL. */
struct as_pods *as_pods_new(void);
void as_pods_free(struct as_pods *p); /* NULL-safe */

/* One request to /api/v1/namespaces/NS/pods[/NAME]. name is NULL for the
 * collection. ctype is the Content-Type header (may be NULL), selector the
 * labelSelector argument (may be NULL), client who asks (for the log). */
struct as_pods_request {
    const char *method;
    const char *ns;
    const char *name;
    const char *ctype;
    const char *selector;
    const char *client;
    const char *body;
    size_t len;
};
void as_pods_serve(struct as_pods *p, const struct as_pods_request *rq,
                   struct as_reply *r);

/* The control API under /_control/pods: POST {"namespace","name","labels"}
 * creates (or replaces) a Pod; GET /_control/pods/log returns
 * {"log":[{"seq","namespace","pod","labels","client","time_us","mono_ms",
 * "clock_us"}]} (time_us the wall clock, clock_us CLOCK_MONOTONIC in
 * microseconds like the store's write log, both taken under the table's lock
 * when the change is applied) of every
 * label change in order; DELETE {"namespace","name"} removes one. path is
 * what follows "/_control/pods". */
void as_pods_control(struct as_pods *p, const char *method, const char *path,
                     const char *body, size_t len, struct as_reply *r);

#endif
