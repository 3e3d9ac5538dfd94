/* SPDX-License-Identifier: Apache-2.0 */
/* The shared rig of the shell and replica simulations (fleet.h). */
#include "fleet.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

static void quiet_sink(void *ctx, enum ld_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

void fleet_init(struct fleet *f, int64_t step_ms, ld_log_sink_fn sink)
{
    memset(f, 0, sizeof(*f));
    /* Debug level: the engines' debug lines are formatted (and checked by
     * the sanitizers) even when nobody reads them. */
    ld_log_set_sink(sink ? sink : quiet_sink, NULL, LD_LOG_DEBUG);
    f->ft = fake_transport_new(FLEET_NS, FLEET_T0_MS, FLEET_WALL0_US);
    ck_assert_ptr_nonnull(f->ft);
    f->clock = fake_transport_host_clock(f->ft);
    f->step_ms = step_ms;
    f->other_id = FLEET_OTHER;
    f->other_secs = FLEET_LEASE_MS / 1000;
}

void fleet_destroy(struct fleet *f)
{
    (void)f;
    ld_log_set_sink(NULL, NULL, LD_LOG_INFO);
}

int64_t fleet_now(const struct fleet *f)
{
    return fake_transport_now_ms(f->ft);
}

struct ld_kube *fleet_kube(struct fleet *f)
{
    struct ld_errinfo err;
    struct ld_kube *kube = ld_kube_new_on(fake_transport_transport(f->ft), &err);
    ck_assert_msg(kube != NULL, "ld_kube_new_on: %s", err.msg);
    return kube;
}

void fleet_other_renews(struct fleet *f)
{
    if (f->other_every_ms <= 0 || fleet_now(f) < f->other_next_ms)
        return;
    fake_transport_lease_put(f->ft, f->other_lease, NULL, f->other_id, f->other_secs,
                             fake_transport_wall_us(f->ft));
    f->other_next_ms = fleet_now(f) + f->other_every_ms;
}

/* The one bound on turns: a turn that takes no fake time (an answer due
 * now) still counts, so a stuck loop fails instead of spinning. */
static int64_t max_turns(const struct fleet *f, int64_t ms)
{
    return ms / f->step_ms * 4 + 100;
}

void fleet_run_for(struct fleet *f, int64_t ms, fleet_turn_fn turn)
{
    int64_t end = fleet_now(f) + ms;
    for (int64_t i = 0; i < max_turns(f, ms) && fleet_now(f) < end; i++) {
        fleet_other_renews(f);
        if (turn(end - fleet_now(f)))
            return;
    }
}

bool fleet_run_until(struct fleet *f, bool (*pred)(void), int64_t max_ms,
                     fleet_turn_fn turn)
{
    int64_t end = fleet_now(f) + max_ms;
    for (int64_t i = 0; i < max_turns(f, max_ms) && fleet_now(f) < end; i++) {
        if (pred())
            return true;
        fleet_other_renews(f);
        (void)turn(INT64_MAX);
    }
    return pred();
}

const char *fleet_holder(struct fleet *f, const char *lease)
{
    static char holder[LD_LEASE_MAX_HOLDER + 1];
    struct ld_lease l;
    if (fake_transport_lease_get(f->ft, lease, &l) != LD_OK)
        snprintf(holder, sizeof(holder), "(absent)");
    else
        snprintf(holder, sizeof(holder), "%s", l.spec.holder);
    ld_lease_clear(&l);
    return holder;
}

const struct fake_transport_record *
fleet_release_of(const struct fleet *f, const char *lease, int client, int64_t since_ms)
{
    for (size_t i = 0; i < fake_transport_record_count(f->ft); i++) {
        const struct fake_transport_record *r = fake_transport_record(f->ft, i);
        if (strcmp(r->name, lease) == 0 && strcmp(r->verb, "PUT") == 0 &&
            (client < 0 || r->client == client) && r->at_ms >= since_ms &&
            strstr(r->body, "\"holderIdentity\":\"\""))
            return r;
    }
    return NULL;
}

int64_t fleet_release_ms(const struct fleet *f, const char *lease, int client,
                         int64_t since_ms)
{
    const struct fake_transport_record *r = fleet_release_of(f, lease, client, since_ms);
    return r ? r->at_ms : -1;
}

int64_t fleet_last_ok_write_ms(const struct fleet *f, const char *lease)
{
    for (size_t i = fake_transport_record_count(f->ft); i-- > 0;) {
        const struct fake_transport_record *r = fake_transport_record(f->ft, i);
        if (strcmp(r->name, lease) == 0 &&
            (strcmp(r->verb, "PUT") == 0 || strcmp(r->verb, "POST") == 0) &&
            r->rc == LD_OK && (r->status == 200 || r->status == 201))
            return r->at_ms;
    }
    return -1;
}

void fleet_replica_start_shards(struct fleet_replica *r,
                                const struct fleet_shards_config *c)
{
    struct ld_errinfo err;
    ck_assert_ptr_nonnull(c->client);
    r->kube = ld_kube_new_on(c->client, &err);
    ck_assert_msg(r->kube != NULL, "ld_kube_new_on: %s", err.msg);
    char lease[128];
    snprintf(lease, sizeof(lease), "%s/%s", FLEET_NS, c->group);
    ld_state_init(&r->state, lease, c->identity, FLEET_LEASE_MS + FLEET_RENEW_MS);
    ld_metrics_init(&r->metrics);
    struct ld_mode_shards_config mc = {
        .host = {.kube = r->kube,
                 .clock = c->clock,
                 .namespace_ = FLEET_NS,
                 .group = c->group,
                 .identity = c->identity,
                 .incarnation = c->incarnation,
                 .n_shards = c->n_shards,
                 .lease_duration_ms = FLEET_LEASE_MS,
                 .renew_deadline_ms = FLEET_RENEW_MS,
                 .retry_period_ms = FLEET_RETRY_MS,
                 .release_on_exit = true,
                 .drain_ms = c->drain_ms,
                 .seed = c->seed,
                 .call_timeout_ms = c->call_timeout_ms},
        .state = &r->state,
        .metrics = &r->metrics,
    };
    r->mode = ld_mode_shards_new(&mc, &err);
    ck_assert_msg(r->mode != NULL, "ld_mode_shards_new: %s", err.msg);
    ld_state_set_layout(&r->state, ld_shardgroup_layout(ld_mode_shards_group(r->mode)));
    struct ld_shell_config sc = {
        .kube = r->kube,
        .state = &r->state,
        .metrics = &r->metrics,
        .clock = c->clock,
        .namespace_ = FLEET_NS,
        .lease_duration_ms = FLEET_LEASE_MS,
        .renew_deadline_ms = FLEET_RENEW_MS,
        .wake_fd = -1,
    };
    r->sh = ld_shell_new(&sc, ld_mode_shards(r->mode), &err);
    ck_assert_msg(r->sh != NULL, "ld_shell_new: %s", err.msg);
}

void fleet_replica_stop(struct fleet_replica *r)
{
    ld_shell_free(r->sh);
    ld_mode_shards_free(r->mode);
    ld_state_destroy(&r->state);
    ld_metrics_destroy(&r->metrics);
    ld_kube_free(r->kube);
    r->sh = NULL;
    r->mode = NULL;
    r->kube = NULL;
}
