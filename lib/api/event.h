/* SPDX-License-Identifier: Apache-2.0 */
/*
 * event: one events.k8s.io/v1 Event about a Lease, encoded and POSTed
 * asynchronously over a transport (transport.h), with the fields and the
 * wording client-go's leader election records ("<identity> became leader").
 * No daemon state, no retry, no blocking.
 *
 * Ownership: the caller owns the struct ld_events_call until its done
 * callback ran or the exchange was canceled; the answer given to the
 * callback is borrowed for the duration of the callback.
 */
#ifndef LEADERD_EVENT_H
#define LEADERD_EVENT_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "transport.h"

/* What one Event says. Strings are borrowed for the call. */
struct ld_event_spec {
    const char *namespace_; /* of the Lease and of the Event */
    const char *lease;      /* the Lease's name */
    const char *lease_uid;  /* its metadata.uid; NULL or "" leaves uid out */
    const char *identity;   /* reportingInstance and the note's subject */
    bool acquire;           /* Acquire "became leader", else Release "stopped leading" */
    int64_t event_time_us;  /* wall clock; also names the Event */
};

/* The Event as JSON: a new string (free with free()), or NULL when out of
 * memory. metadata.name is "<lease>.<event_time in ns as hex>" as client-go
 * names its Events, so sending the same spec twice yields 409 AlreadyExists
 * instead of a second Event. */
char *ld_events_encode(const struct ld_event_spec *ev);

struct ld_events_answer {
    enum ld_err rc; /* LD_OK, LD_EEXISTS (that Event already exists), ... */
    long http_status;
    double seconds;
    struct ld_errinfo err;
};

typedef void (*ld_events_done_fn)(void *ctx, const struct ld_events_answer *a);

struct ld_events_call {
    ld_events_done_fn done;
    void *ctx;
};

/* POST /apis/events.k8s.io/v1/namespaces/NS/events. LD_OK with *id set and
 * done to come, or LD_EINVAL / LD_ENOMEM with err set and no callback. */
enum ld_err ld_events_create(struct ld_transport *t, const struct ld_event_spec *ev,
                             int64_t timeout_ms, struct ld_events_call *call,
                             ld_http_id *id, struct ld_errinfo *err);

#endif
