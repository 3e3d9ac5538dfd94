/* SPDX-License-Identifier: Apache-2.0 */
/*
 * events: the events.k8s.io/v1 Event resource of leaderd-apiserver: create
 * (POST) with the validation the real server applies to a new Event
 * (metadata.name, eventTime, reportingController, reportingInstance,
 * action and reason required and at most 128 characters, type Normal or
 * Warning, note at most 1 kB, the namespace of the URL; 409 AlreadyExists
 * for a name that exists) and list (GET) for tests. In memory only, at
 * most AS_EVENTS_MAX kept (the oldest go first); thread-safe.
 */
#ifndef AS_EVENTS_H
#define AS_EVENTS_H

#include <stddef.h>

#include "status.h"

#define AS_EVENTS_MAX 10000

struct as_events;

struct as_events *as_events_new(void);    /* free with as_events_free; NULL on ENOMEM */
void as_events_free(struct as_events *e); /* NULL-safe */

/* One request to /apis/events.k8s.io/v1/namespaces/NS/events (name NULL)
 * or .../events/NAME. */
void as_events_serve(struct as_events *e, const char *method, const char *ns,
                     const char *name, const char *body, size_t len, struct as_reply *r);

#endif
