/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mode_lease: one Lease, published for the HTTP server (see mode_lease.h).
 */
#include "mode_lease.h"

#include <stdio.h>

#include "health.h"

static void host_config(void *ctx, struct ld_host_config *hc)
{
    (void)ctx;
    hc->label_selector = NULL; /* the host watches the one Lease by name */
    hc->log_names = false;     /* the log sink names the one Lease */
}

static enum ld_err attach(void *ctx, struct ld_shell *sh, struct ld_errinfo *err)
{
    struct ld_mode_lease *m = ctx;
    size_t index;
    return ld_shell_add_election(sh, &m->c.election, &index, err);
}

static void on_publish(void *ctx, const struct ld_host_view *v, int64_t now_ms)
{
    struct ld_mode_lease *m = ctx;
    const struct ld_election_status *st = &v->status;
    struct ld_snapshot snap;
    ld_state_read(m->c.state, &snap);
    snprintf(snap.leader, sizeof(snap.leader), "%s", st->leader);
    snap.term = st->term;
    snap.observed = st->observed;
    snap.leading = st->leading;
    snap.lead_until_ms = st->lead_until_ms;
    snap.term_until_ms = st->term_until_ms;
    snap.has_renewed_at = st->has_renew_time;
    snap.renewed_at_us = st->renew_time_us;
    snap.last_renew_wall_us = st->last_renew_wall_us;
    snap.heartbeat_ms = now_ms;
    snap.transitions_seen = v->transitions_seen;
    ld_health_describe(v, m->c.election.renew_deadline_ms, now_ms, snap.health_error,
                       sizeof(snap.health_error));
    ld_state_publish(m->c.state, &snap);
}

static void on_event(void *ctx, size_t index, const struct ld_event *ev, int64_t now_ms)
{
    struct ld_mode_lease *m = ctx;
    (void)index;
    (void)now_ms;
    if (!m->c.metrics)
        return;
    if (ev->kind == LD_EV_STARTED_LEADING && ev->acquire_delay_ms >= 0)
        ld_metrics_acquire_delay(m->c.metrics, (double)ev->acquire_delay_ms / 1000.0);
    if (ev->kind == LD_EV_STOPPED_LEADING &&
        (ev->reason == LD_STOP_RESIGNED || ev->reason == LD_STOP_PREFERRED_HOLDER))
        ld_metrics_resigned(m->c.metrics, ev->reason == LD_STOP_RESIGNED);
}

static const struct ld_shell_mode_ops ops = {
    .takes_resignations = true,
    .host_config = host_config,
    .attach = attach,
    .on_publish = on_publish,
    .on_event = on_event,
};

void ld_mode_lease_init(struct ld_mode_lease *m, const struct ld_mode_lease_config *cfg)
{
    m->c = *cfg;
}

struct ld_shell_mode ld_mode_lease(struct ld_mode_lease *m)
{
    return (struct ld_shell_mode){.ops = &ops, .ctx = m};
}
