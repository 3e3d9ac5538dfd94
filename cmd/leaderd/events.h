/*
 * events: --events. One events.k8s.io/v1 Event per start and per stop of
 * leading, regarding the Lease, in client-go's wording (lib/event.h).
 *
 * The policy (struct ld_evq) is a pure state machine fed leadership, the
 * Lease's uid and both clocks: it queues one Event per transition, says
 * which to send and when to wake for a retry. An Event keeps its name over
 * its retries, so one whose answer was lost is not recorded twice (the
 * retry gets 409 AlreadyExists, taken as done): at most one per
 * transition. Under persistent API errors it is bounded: at most
 * LD_EVQ_ATTEMPTS tries per Event with capped exponential backoff, at most
 * LD_EVQ_CAP Events waiting (the oldest are dropped). Every failed call is
 * counted in leaderd_events_failures_total and logged once per run of
 * identical errors. The glue (struct ld_events_hook) submits on the Lease
 * client's transport and is a loop hook; nothing here blocks or delays the
 * election.
 */
#ifndef LEADERD_DAEMON_EVENTS_H
#define LEADERD_DAEMON_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "election.h"
#include "event.h"
#include "kube.h"
#include "metrics.h"

#define LD_EVQ_CAP 8
#define LD_EVQ_ATTEMPTS 6
#define LD_EVQ_BACKOFF_MIN_MS 500
#define LD_EVQ_BACKOFF_MAX_MS 16000

struct ld_evq_item {
    bool acquire;
    int64_t wall_us; /* eventTime, and the Event's name */
    char uid[128];   /* the Lease's metadata.uid at the transition, "" if unknown */
    int attempts;
};

struct ld_evq {
    bool leading;
    struct ld_evq_item q[LD_EVQ_CAP]; /* q[0] is the oldest */
    int n;
    bool in_flight;
    int64_t retry_at_ms;
    int64_t backoff_ms;
    uint64_t dropped; /* Events given up on */
};

void ld_evq_init(struct ld_evq *q);

/* Feeds leadership at a moment: a change queues its Event (uid may be NULL). */
void ld_evq_update(struct ld_evq *q, bool leading, const char *uid, int64_t wall_us);

/* The Event to send at now_ms (marked in flight), or NULL. Borrowed until
 * ld_evq_done. */
const struct ld_evq_item *ld_evq_next(struct ld_evq *q, int64_t now_ms);

/* The in-flight Event's outcome: LD_OK and LD_EEXISTS retire it, anything
 * else retries it later (or drops it after LD_EVQ_ATTEMPTS). */
void ld_evq_done(struct ld_evq *q, int64_t now_ms, enum ld_err rc);

/* When the next send is due; INT64_MAX when nothing waits. */
int64_t ld_evq_wake_ms(const struct ld_evq *q, int64_t now_ms);

/* ---- the glue ---- */

struct ld_events_hook {
    struct ld_evq q;
    struct ld_kube *kube;       /* borrowed */
    const char *namespace_;     /* borrowed */
    const char *lease;          /* borrowed */
    const char *identity;       /* borrowed */
    struct ld_metrics *metrics; /* borrowed; may be NULL */
    int64_t timeout_ms;
    struct ld_events_call call;
    ld_http_id id;
    enum ld_err last_logged;
};

void ld_events_hook_init(struct ld_events_hook *h, struct ld_kube *kube,
                         const char *namespace_, const char *lease, const char *identity,
                         struct ld_metrics *metrics, int64_t timeout_ms);
void ld_events_hook_clear(struct ld_events_hook *h); /* cancels a call in flight */

/* struct ld_loop_hook callbacks; ctx is a struct ld_events_hook. */
bool ld_events_on_publish(void *ctx, const struct ld_election_status *st, int64_t now_ms);
int64_t ld_events_next_wake(void *ctx, int64_t now_ms);
bool ld_events_holds_release(void *ctx, int64_t now_ms);

#endif
