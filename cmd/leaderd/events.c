/*
 * events: the Event queue and its asynchronous calls.
 */
#include "events.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "lead.h"
#include "log.h"
#include "state.h"

/* As in podlabel.c: the loop's waits do not end on this call's answer. */
#define IN_FLIGHT_POLL_MS 100

void ld_evq_init(struct ld_evq *q)
{
    memset(q, 0, sizeof(*q));
}

static void pop(struct ld_evq *q)
{
    memmove(&q->q[0], &q->q[1], sizeof(q->q[0]) * (size_t)(q->n - 1));
    q->n--;
}

void ld_evq_update(struct ld_evq *q, bool leading, const char *uid, int64_t wall_us)
{
    if (leading == q->leading)
        return;
    q->leading = leading;
    /* Full: the oldest waiting Event goes, unless it is being sent. */
    if (q->n == LD_EVQ_CAP) {
        int victim = q->in_flight ? 1 : 0;
        memmove(&q->q[victim], &q->q[victim + 1],
                sizeof(q->q[0]) * (size_t)(q->n - victim - 1));
        q->n--;
        q->dropped++;
    }
    struct ld_evq_item *it = &q->q[q->n++];
    memset(it, 0, sizeof(*it));
    it->acquire = leading;
    it->wall_us = wall_us;
    snprintf(it->uid, sizeof(it->uid), "%s", uid ? uid : "");
}

const struct ld_evq_item *ld_evq_next(struct ld_evq *q, int64_t now_ms)
{
    if (q->in_flight || q->n == 0 || now_ms < q->retry_at_ms)
        return NULL;
    q->in_flight = true;
    q->q[0].attempts++;
    return &q->q[0];
}

void ld_evq_done(struct ld_evq *q, int64_t now_ms, enum ld_err rc)
{
    if (!q->in_flight)
        return;
    q->in_flight = false;
    if (rc == LD_OK || rc == LD_EEXISTS) {
        pop(q);
        q->backoff_ms = 0;
        q->retry_at_ms = 0;
        return;
    }
    q->backoff_ms = q->backoff_ms ? q->backoff_ms * 2 : (int64_t)LD_EVQ_BACKOFF_MIN_MS;
    if (q->backoff_ms > LD_EVQ_BACKOFF_MAX_MS)
        q->backoff_ms = LD_EVQ_BACKOFF_MAX_MS;
    q->retry_at_ms = now_ms + q->backoff_ms;
    if (q->q[0].attempts >= LD_EVQ_ATTEMPTS) {
        pop(q);
        q->dropped++;
    }
}

int64_t ld_evq_wake_ms(const struct ld_evq *q, int64_t now_ms)
{
    if (q->n == 0 || q->in_flight)
        return INT64_MAX;
    return q->retry_at_ms > now_ms ? q->retry_at_ms : now_ms;
}

/* ---- the glue ---------------------------------------------------------- */

static void finish(struct ld_events_hook *h, const struct ld_events_answer *a,
                   bool went_out)
{
    bool acquire = h->q.q[0].acquire;
    uint64_t dropped = h->q.dropped;
    h->id = 0;
    if (h->metrics && went_out)
        ld_metrics_observe_request(h->metrics, "POST", a->http_status, a->seconds);
    if (a->rc == LD_OK || a->rc == LD_EEXISTS) {
        h->last_logged = LD_OK;
        ld_log(LD_LOG_DEBUG, "event: %s recorded", acquire ? "Acquire" : "Release");
    } else {
        if (h->metrics)
            ld_metrics_events_failure(h->metrics);
        enum ld_log_level level = a->rc == h->last_logged ? LD_LOG_DEBUG : LD_LOG_WARN;
        h->last_logged = a->rc;
        ld_log(level, "event: creating the %s Event failed: %s (HTTP %ld): %s",
               acquire ? "Acquire" : "Release", ld_strerror(a->rc), a->http_status,
               a->err.msg);
    }
    ld_evq_done(&h->q, ld_mono_ms(), a->rc);
    if (h->q.dropped != dropped)
        ld_log(LD_LOG_WARN, "event: gave up on the %s Event after %d attempts",
               acquire ? "Acquire" : "Release", LD_EVQ_ATTEMPTS);
}

static void on_answer(void *ctx, const struct ld_events_answer *a)
{
    finish(ctx, a, true);
}

void ld_events_hook_init(struct ld_events_hook *h, struct ld_kube *kube,
                         const char *namespace_, const char *lease, const char *identity,
                         struct ld_metrics *metrics, int64_t timeout_ms)
{
    memset(h, 0, sizeof(*h));
    ld_evq_init(&h->q);
    h->kube = kube;
    h->namespace_ = namespace_;
    h->lease = lease;
    h->identity = identity;
    h->metrics = metrics;
    h->timeout_ms = timeout_ms;
    h->call.done = on_answer;
    h->call.ctx = h;
    h->last_logged = LD_OK;
}

void ld_events_hook_clear(struct ld_events_hook *h)
{
    if (h->id)
        ld_transport_cancel(ld_kube_transport(h->kube), h->id);
    h->id = 0;
}

bool ld_events_on_publish(void *ctx, const struct ld_election_status *st, int64_t now_ms)
{
    struct ld_events_hook *h = ctx;
    ld_evq_update(&h->q, ld_leads_at(st->leading, st->lead_until_ms, now_ms), st->uid,
                  ld_wall_us());
    const struct ld_evq_item *it = ld_evq_next(&h->q, now_ms);
    if (!it)
        return false;
    struct ld_event_spec spec = {.namespace_ = h->namespace_,
                                 .lease = h->lease,
                                 .lease_uid = it->uid,
                                 .identity = h->identity,
                                 .acquire = it->acquire,
                                 .event_time_us = it->wall_us};
    struct ld_errinfo err;
    enum ld_err rc = ld_events_create(ld_kube_transport(h->kube), &spec, h->timeout_ms,
                                      &h->call, &h->id, &err);
    if (rc != LD_OK) {
        struct ld_events_answer a = {.rc = rc, .err = err};
        finish(h, &a, false);
    }
    return false;
}

int64_t ld_events_next_wake(void *ctx, int64_t now_ms)
{
    const struct ld_events_hook *h = ctx;
    if (h->q.in_flight)
        return now_ms + IN_FLIGHT_POLL_MS;
    return ld_evq_wake_ms(&h->q, now_ms);
}

bool ld_events_holds_release(void *ctx, int64_t now_ms)
{
    (void)now_ms;
    return ((const struct ld_events_hook *)ctx)->q.n > 0;
}
