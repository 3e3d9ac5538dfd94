/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook_events: the Event queue and its asynchronous calls.
 */
#include "hook_events.h"

#include <stdio.h>
#include <string.h>

#include "lead.h"
#include "log.h"
#include "state.h"

/* As in hook_podlabel.c: the shell's waits do not end on this call's answer. */
#define IN_FLIGHT_POLL_MS 100

void ld_hook_events_queue_init(struct ld_hook_events_queue *q)
{
    memset(q, 0, sizeof(*q));
}

static void pop(struct ld_hook_events_queue *q)
{
    memmove(&q->q[0], &q->q[1], sizeof(q->q[0]) * (size_t)(q->n - 1));
    q->n--;
}

void ld_hook_events_queue_update(struct ld_hook_events_queue *q, bool leading,
                                 const char *uid, int64_t wall_us)
{
    if (leading == q->leading)
        return;
    q->leading = leading;
    /* Full: the oldest waiting Event goes, unless it is being sent. */
    if (q->n == LD_HOOK_EVENTS_CAP) {
        int victim = q->in_flight ? 1 : 0;
        memmove(&q->q[victim], &q->q[victim + 1],
                sizeof(q->q[0]) * (size_t)(q->n - victim - 1));
        q->n--;
        q->dropped++;
    }
    struct ld_hook_events_item *it = &q->q[q->n++];
    memset(it, 0, sizeof(*it));
    it->acquire = leading;
    it->wall_us = wall_us;
    snprintf(it->uid, sizeof(it->uid), "%s", uid ? uid : "");
}

const struct ld_hook_events_item *
ld_hook_events_queue_next(struct ld_hook_events_queue *q, int64_t now_ms)
{
    if (q->in_flight || q->n == 0 || now_ms < q->retry_at_ms)
        return NULL;
    q->in_flight = true;
    q->q[0].attempts++;
    return &q->q[0];
}

void ld_hook_events_queue_done(struct ld_hook_events_queue *q, int64_t now_ms,
                               enum ld_err rc)
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
    q->backoff_ms =
        q->backoff_ms ? q->backoff_ms * 2 : (int64_t)LD_HOOK_EVENTS_BACKOFF_MIN_MS;
    if (q->backoff_ms > LD_HOOK_EVENTS_BACKOFF_MAX_MS)
        q->backoff_ms = LD_HOOK_EVENTS_BACKOFF_MAX_MS;
    q->retry_at_ms = now_ms + q->backoff_ms;
    if (q->q[0].attempts >= LD_HOOK_EVENTS_ATTEMPTS) {
        pop(q);
        q->dropped++;
    }
}

int64_t ld_hook_events_queue_wake_ms(const struct ld_hook_events_queue *q, int64_t now_ms)
{
    if (q->n == 0 || q->in_flight)
        return INT64_MAX;
    return q->retry_at_ms > now_ms ? q->retry_at_ms : now_ms;
}

/* ---- the glue ---------------------------------------------------------- */

static void finish(struct ld_hook_events *h, const struct ld_events_answer *a,
                   bool went_out)
{
    bool acquire = h->q.q[0].acquire;
    uint64_t dropped = h->q.dropped;
    h->id = 0;
    if (h->c.metrics && went_out)
        ld_metrics_observe_request(h->c.metrics, "POST", a->http_status, a->seconds);
    if (a->rc == LD_OK || a->rc == LD_EEXISTS) {
        h->last_logged = LD_OK;
        ld_log(LD_LOG_DEBUG, "event: %s recorded", acquire ? "Acquire" : "Release");
    } else {
        if (h->c.metrics)
            ld_metrics_events_failure(h->c.metrics);
        enum ld_log_level level = a->rc == h->last_logged ? LD_LOG_DEBUG : LD_LOG_WARN;
        h->last_logged = a->rc;
        ld_log(level, "event: creating the %s Event failed: %s (HTTP %ld): %s",
               acquire ? "Acquire" : "Release", ld_strerror(a->rc), a->http_status,
               a->err.msg);
    }
    ld_hook_events_queue_done(&h->q, ld_clock_mono_ms(h->c.clock), a->rc);
    if (h->q.dropped != dropped)
        ld_log(LD_LOG_WARN, "event: gave up on the %s Event after %d attempts",
               acquire ? "Acquire" : "Release", LD_HOOK_EVENTS_ATTEMPTS);
}

static void on_answer(void *ctx, const struct ld_events_answer *a)
{
    finish(ctx, a, true);
}

void ld_hook_events_init(struct ld_hook_events *h,
                         const struct ld_hook_events_config *cfg)
{
    memset(h, 0, sizeof(*h));
    ld_hook_events_queue_init(&h->q);
    h->c = *cfg;
    h->call.done = on_answer;
    h->call.ctx = h;
    h->last_logged = LD_OK;
}

void ld_hook_events_clear(struct ld_hook_events *h)
{
    if (h->id)
        ld_transport_cancel(ld_kube_transport(h->c.kube), h->id);
    h->id = 0;
}

static bool on_publish(void *ctx, const struct ld_election_status *st, int64_t now_ms)
{
    struct ld_hook_events *h = ctx;
    ld_hook_events_queue_update(&h->q,
                                ld_leads_at(st->leading, st->lead_until_ms, now_ms),
                                st->uid, ld_clock_wall_us(h->c.clock));
    const struct ld_hook_events_item *it = ld_hook_events_queue_next(&h->q, now_ms);
    if (!it)
        return false;
    struct ld_event_spec spec = {.namespace_ = h->c.namespace_,
                                 .lease = h->c.lease,
                                 .lease_uid = it->uid,
                                 .identity = h->c.identity,
                                 .acquire = it->acquire,
                                 .event_time_us = it->wall_us};
    struct ld_errinfo err;
    enum ld_err rc = ld_events_create(ld_kube_transport(h->c.kube), &spec,
                                      h->c.timeout_ms, &h->call, &h->id, &err);
    if (rc != LD_OK) {
        struct ld_events_answer a = {.rc = rc, .err = err};
        finish(h, &a, false);
    }
    return false;
}

static int64_t next_wake(void *ctx, int64_t now_ms)
{
    const struct ld_hook_events *h = ctx;
    if (h->q.in_flight)
        return now_ms + IN_FLIGHT_POLL_MS;
    return ld_hook_events_queue_wake_ms(&h->q, now_ms);
}

static bool holds_release(void *ctx, int64_t now_ms)
{
    (void)now_ms;
    return ((const struct ld_hook_events *)ctx)->q.n > 0;
}

struct ld_hook ld_hook_events_bind(struct ld_hook_events *h, size_t election)
{
    return (struct ld_hook){.ctx = h,
                            .election = election,
                            .on_publish = on_publish,
                            .next_wake_ms = next_wake,
                            .holds_release = holds_release,
                            .hold = LD_HOOK_HOLD_COURTESY};
}
