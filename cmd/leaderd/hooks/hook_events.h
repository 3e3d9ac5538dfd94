/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook_events: --events, a hook (hook.h) of one election. One events.k8s.io/v1 Event per
 * start and per stop of leading, regarding the Lease, in client-go's wording
 * (lib/api/event.h).
 *
 * The policy (struct ld_hook_events_queue) is a pure state machine fed leadership, the
 * Lease's uid and both clocks: it queues one Event per transition, says
 * which to send and when to wake for a retry. An Event keeps its name over
 * its retries, so one whose answer was lost is not recorded twice (the
 * retry gets 409 AlreadyExists, taken as done): at most one per
 * transition. Under persistent API errors it is bounded: at most
 * LD_HOOK_EVENTS_ATTEMPTS tries per Event with capped exponential backoff, at most
 * LD_HOOK_EVENTS_CAP Events waiting (the oldest are dropped). Every failed call is
 * counted in leaderd_events_failures_total and logged once per run of
 * identical errors. The glue (struct ld_hook_events) submits on the Lease
 * client's transport; nothing here blocks or delays the election. The
 * daemon's single Lease has one, and in shard mode every shard has its own.
 */
#ifndef LEADERD_HOOK_EVENTS_H
#define LEADERD_HOOK_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "election.h"
#include "event.h"
#include "hook.h"
#include "kube.h"
#include "metrics.h"

#define LD_HOOK_EVENTS_CAP 8
#define LD_HOOK_EVENTS_ATTEMPTS 6
#define LD_HOOK_EVENTS_BACKOFF_MIN_MS 500
#define LD_HOOK_EVENTS_BACKOFF_MAX_MS 16000

struct ld_hook_events_item {
    bool acquire;
    int64_t wall_us; /* eventTime, and the Event's name */
    char uid[128];   /* the Lease's metadata.uid at the transition, "" if unknown */
    int attempts;
};

struct ld_hook_events_queue {
    bool leading;
    struct ld_hook_events_item q[LD_HOOK_EVENTS_CAP]; /* q[0] is the oldest */
    int n;
    bool in_flight;
    int64_t retry_at_ms;
    int64_t backoff_ms;
    uint64_t dropped; /* Events given up on */
};

void ld_hook_events_queue_init(struct ld_hook_events_queue *q);

/* Feeds leadership at a moment: a change queues its Event (uid may be NULL). */
void ld_hook_events_queue_update(struct ld_hook_events_queue *q, bool leading,
                                 const char *uid, int64_t wall_us);

/* The Event to send at now_ms (marked in flight), or NULL. Borrowed until
 * ld_hook_events_queue_done. */
const struct ld_hook_events_item *
ld_hook_events_queue_next(struct ld_hook_events_queue *q, int64_t now_ms);

/* The in-flight Event's outcome: LD_OK and LD_EEXISTS retire it, anything
 * else retries it later (or drops it after LD_HOOK_EVENTS_ATTEMPTS). */
void ld_hook_events_queue_done(struct ld_hook_events_queue *q, int64_t now_ms,
                               enum ld_err rc);

/* When the next send is due; INT64_MAX when nothing waits. */
int64_t ld_hook_events_queue_wake_ms(const struct ld_hook_events_queue *q,
                                     int64_t now_ms);

/* ---- the glue ---- */

struct ld_hook_events_config {
    struct ld_kube *kube;         /* borrowed: its transport carries the calls */
    const char *namespace_;       /* borrowed, as the rest */
    const char *lease;            /* the Lease the Events regard */
    const char *identity;         /* this replica, the Events' reporter */
    struct ld_metrics *metrics;   /* may be NULL */
    const struct ld_clock *clock; /* the shell's: Event times and retries */
    int64_t timeout_ms;           /* per call */
};

struct ld_hook_events {
    struct ld_hook_events_queue q;
    struct ld_hook_events_config c;
    struct ld_events_call call;
    ld_http_id id;
    enum ld_err last_logged;
};

void ld_hook_events_init(struct ld_hook_events *h,
                         const struct ld_hook_events_config *cfg);
void ld_hook_events_clear(struct ld_hook_events *h); /* cancels a call in flight */

/* The hook of election (see struct ld_hook), with h as its ctx (borrowed:
 * h must outlive the shell). Its release hold, a courtesy hold (hook.h):
 * an Event still waiting to be recorded holds a shutdown's release (not a
 * resignation's). */
struct ld_hook ld_hook_events_bind(struct ld_hook_events *h, size_t election);

#endif
