/*
 * mode_shards: the shard group on the shell's host (see mode_shards.h).
 *
 * Election 0 is the member Lease, election 1 + s is shard s. Publishes only
 * record what each election says; the decisions wait for the end of the
 * pass (the host's after_pass), so a pass that touched many shards assigns
 * once and builds one table.
 */
#include "mode_shards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health.h"
#include "hook_events.h"
#include "host.h"
#include "lead.h"
#include "log.h"
#include "shardsnap.h"
#include "watch.h"

/* With nothing visible changing, the heartbeat is still published this
 * often (/healthz judges the loop alive by it). */
#define HEARTBEAT_MS 1000

#define MEMBER 0
/* After joining without a list of the group, the watch's time to show the
 * other members' renewals. */
#define JOIN_SETTLE_MS 1000

struct slot {
    char *leader; /* owned; the shard's entry points here */
    bool contending;
    int64_t transitions_seen;
};

struct ld_mode_shards {
    struct ld_mode_shards_config c;
    struct ld_clock clock;
    struct ld_shardgroup *group;
    struct ld_host *host;           /* the shell's, once attached */
    struct slot *slots;             /* one per shard */
    struct ld_shard_entry *entries; /* one per shard, as the table shows them */
    struct ld_shardsnap *last;      /* the last table published (a reference) */
    /* Made at start: every shard unobserved and not led. Published when a
     * new table cannot be built, so that readers never keep a table that
     * still shows a shard this replica has since given back. */
    struct ld_shardsnap *unknown;
    struct ld_hook_events *events; /* one per shard with --events, else NULL */
    uint32_t n;

    bool inputs_changed;     /* a publish or member event since the last assignment */
    bool table_changed;      /* a shard's entry changed since the last table */
    int64_t reassess_at_ms;  /* a member or holder expires then */
    int64_t heartbeat_at_ms; /* the last publish of the snapshot */

    char health[256];
    bool member_observed;
    bool member_live;             /* our member election led at its last publish */
    int64_t contend_after_ms;     /* no claims before: see observe_member */
    char *member_uid, *member_rv; /* of our member Lease as last seen */

    /* While the group's watch is down (or not yet up) other members can
     * only be seen by listing the group, every retry period. */
    bool watch_healthy;
    bool listing;
    ld_kube_call list_call;
    int64_t next_list_ms;
    int64_t list_started_ms;
    int64_t live_since_ms; /* our member election's current term of leading */
    bool join_list;        /* a list since then would settle the join */

    bool stopping;
    bool deleting;        /* the member Lease's DELETE is in flight */
    bool member_released; /* our member election wrote its release */
};

static size_t shard_index(uint32_t s)
{
    return (size_t)s + 1;
}

/* ---- what the elections say ---------------------------------------------- */

static void set_str(char **dst, const char *v)
{
    if (!v)
        v = "";
    if (*dst && strcmp(*dst, v) == 0)
        return;
    char *copy = strdup(v);
    if (!copy)
        return; /* keeps the old value; the next publish tries again */
    free(*dst);
    *dst = copy;
}

static void observe_member(struct ld_mode_shards *s, const struct ld_host_view *v,
                           int64_t now_ms)
{
    ld_shardgroup_observe_own(s->group, &v->status);
    if (s->member_observed != v->status.observed)
        s->table_changed = true; /* the table's "observed" depends on it */
    s->member_observed = v->status.observed;
    s->watch_healthy = v->status.watching;
    /* Claiming before the other members are known would take shards on the
     * belief that this replica is alone, only to give them back: churn, not
     * danger (each shard is still one Lease). So on joining, the group is
     * listed at once and nothing is claimed until that answer is in; if the
     * list fails, the other members' renewals (every retry period) will
     * have shown them through the watch a retry period later. */
    bool live = ld_leads_at(v->status.leading, v->status.lead_until_ms, now_ms);
    if (live && !s->member_live) {
        s->live_since_ms = now_ms;
        s->contend_after_ms = now_ms + s->c.retry_period_ms + JOIN_SETTLE_MS;
        s->join_list = true;
        s->next_list_ms = now_ms;
    }
    s->member_live = live;
    if (v->status.uid)
        set_str(&s->member_uid, v->status.uid);
    if (v->status.resource_version)
        set_str(&s->member_rv, v->status.resource_version);
    ld_health_describe(v, s->c.renew_deadline_ms, now_ms, s->health, sizeof(s->health));
}

/* True when the entry shows something new to a reader. */
static bool entry_update(struct slot *sl, struct ld_shard_entry *e,
                         const struct ld_election_status *st)
{
    struct ld_shard_entry next = {
        .term = st->term,
        .observed = st->observed,
        .leading = st->leading,
        .lead_until_ms = st->lead_until_ms,
        .has_renewed_at = st->has_renew_time,
        .renewed_at_us = st->renew_time_us,
        .last_renew_wall_us = st->last_renew_wall_us,
    };
    bool same_leader = sl->leader && strcmp(sl->leader, st->leader) == 0;
    if (same_leader && e->term == next.term && e->observed == next.observed &&
        e->leading == next.leading && e->lead_until_ms == next.lead_until_ms &&
        e->has_renewed_at == next.has_renewed_at &&
        e->renewed_at_us == next.renewed_at_us &&
        e->last_renew_wall_us == next.last_renew_wall_us)
        return false;
    set_str(&sl->leader, st->leader);
    next.leader = sl->leader ? sl->leader : "";
    *e = next;
    return true;
}

static void publish(struct ld_mode_shards *s, int64_t now_ms);

static void on_publish(void *ctx, const struct ld_host_view *v, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    s->inputs_changed = true;
    if (v->index == MEMBER) {
        observe_member(s, v, now_ms);
        return;
    }
    uint32_t k = (uint32_t)(v->index - 1);
    struct slot *sl = &s->slots[k];
    if (ld_shardgroup_observe_shard(s->group, k, &v->status) != LD_OK)
        ld_log(LD_LOG_WARN, "shard %s: out of memory for its observation",
               ld_shardgroup_shard_id(s->group, k));
    bool led = s->entries[k].leading;
    if (entry_update(sl, &s->entries[k], &v->status))
        s->table_changed = true;
    if (v->transitions_seen != sl->transitions_seen) {
        sl->transitions_seen = v->transitions_seen;
        s->table_changed = true;
    }
    /* A shard that stops leading is published now, not after the pass: the
     * API write gate must refuse its writes before the shell asks whether
     * its release waits for the writes in flight (hook_proxy.h). */
    if (led && !s->entries[k].leading)
        publish(s, now_ms);
}

static void on_event(void *ctx, size_t index, const struct ld_event *ev, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    (void)now_ms;
    if (index == MEMBER) {
        /* Only a Lease this replica held and gave back is its own to
         * delete: never one it stood back from (an identity conflict). */
        if (ev->kind == LD_EV_RELEASED)
            s->member_released = true;
        return;
    }
    if (!s->c.metrics)
        return;
    if (ev->kind == LD_EV_STARTED_LEADING && ev->acquire_delay_ms >= 0)
        ld_metrics_acquire_delay(s->c.metrics, (double)ev->acquire_delay_ms / 1000.0);
}

static void on_lease_event(void *ctx, const struct ld_watch_event *ev, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    if (!ev->lease)
        return;
    if (ev->type == LD_WATCH_DELETED) {
        ld_shardgroup_observe_member_deleted(s->group, ev->lease);
    } else {
        enum ld_err rc = ld_shardgroup_observe_member(s->group, ev->lease, now_ms);
        if (rc == LD_ETOOBIG)
            ld_log(LD_LOG_WARN, "lease %s: more than %d members; ignored",
                   ev->lease->name, LD_SHARDGROUP_MAX_MEMBERS);
    }
    s->inputs_changed = true;
}

/* ---- membership without the watch ---------------------------------------- */

static void on_listed(void *ctx, ld_kube_call call, enum ld_err rc,
                      const struct ld_lease *items, size_t n,
                      const struct ld_errinfo *err)
{
    struct ld_mode_shards *s = ctx;
    int64_t now_ms = ld_clock_mono_ms(&s->clock);
    (void)call;
    s->listing = false;
    if (rc != LD_OK) {
        ld_log(LD_LOG_WARN, "listing the group's Leases failed: %s",
               err && err->msg[0] ? err->msg : ld_strerror(rc));
        return;
    }
    for (size_t i = 0; i < n; i++)
        ld_shardgroup_observe_member(s->group, &items[i], now_ms);
    s->inputs_changed = true;
    if (s->join_list && s->member_live && s->list_started_ms >= s->live_since_ms) {
        s->join_list = false;
        if (now_ms < s->contend_after_ms)
            s->contend_after_ms = now_ms; /* every member is known: settled */
    }
}

/* The watch tells of other members' renewals as they happen; without it
 * (failing, or not started yet) they would expire in this replica's view
 * and it would think itself alone, so the group is listed instead. */
static void poll_members(struct ld_mode_shards *s, int64_t now_ms)
{
    if ((s->watch_healthy && !s->join_list) || s->listing || s->stopping ||
        now_ms < s->next_list_ms)
        return;
    struct ld_errinfo err;
    s->next_list_ms = now_ms + s->c.retry_period_ms;
    if (ld_kube_lease_list_start(
            s->c.kube, s->c.namespace_, ld_shardgroup_member_selector(s->group),
            s->c.renew_deadline_ms, on_listed, s, &s->list_call, &err) != LD_OK) {
        ld_log(LD_LOG_WARN, "cannot list the group's Leases: %s", err.msg);
        return;
    }
    s->listing = true;
    s->list_started_ms = now_ms;
}

/* ---- decisions, once a pass ---------------------------------------------- */

static void set_contending(struct ld_mode_shards *s, uint32_t k, bool want,
                           int64_t now_ms)
{
    struct slot *sl = &s->slots[k];
    if (sl->contending == want)
        return;
    struct ld_now now = {.mono_ms = now_ms, .wall_us = ld_clock_wall_us(&s->clock)};
    sl->contending = want;
    ld_election_set_contending(ld_host_election(s->host, shard_index(k)), now, want);
    ld_host_poke(s->host, shard_index(k));
    if (want)
        ld_log(LD_LOG_DEBUG, "shard %s: assigned here; contending",
               ld_shardgroup_shard_id(s->group, k));
    else if (ld_shard_entry_is_leader(&s->entries[k], now_ms))
        ld_log(LD_LOG_INFO, "shard %s: assigned to %s; giving it back",
               ld_shardgroup_shard_id(s->group, k),
               ld_shardgroup_target(s->group, k) ? ld_shardgroup_target(s->group, k)
                                                 : "nobody");
}

static void assign(struct ld_mode_shards *s, int64_t now_ms)
{
    int64_t next = INT64_MAX;
    if (ld_shardgroup_assign(s->group, now_ms, &next) != LD_OK) {
        ld_log(LD_LOG_WARN, "shard assignment: out of memory; trying again");
        s->reassess_at_ms = now_ms + HEARTBEAT_MS;
        return;
    }
    s->inputs_changed = false;
    s->reassess_at_ms = next;
    bool settled = now_ms >= s->contend_after_ms;
    if (!settled && s->contend_after_ms < s->reassess_at_ms)
        s->reassess_at_ms = s->contend_after_ms;
    for (uint32_t k = 0; k < s->n && !s->stopping; k++)
        set_contending(s, k, settled && ld_shardgroup_contend(s->group, k), now_ms);
}

static uint64_t total_transitions(const struct ld_mode_shards *s)
{
    uint64_t t = 0;
    for (uint32_t k = 0; k < s->n; k++)
        t += (uint64_t)s->slots[k].transitions_seen;
    return t;
}

static bool members_differ(const struct ld_shardsnap *t, const char *const *members,
                           uint32_t n)
{
    if (!t || t->n_members != n)
        return true;
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(t->members[i], members[i]) != 0)
            return true;
    }
    return false;
}

/* The table of the entries as they are now (a new reference), or NULL
 * when memory runs out: the one place a table is made. */
static struct ld_shardsnap *make_table(const struct ld_mode_shards *s, bool observed,
                                       const char *const *members, uint32_t n_members)
{
    return ld_shardsnap_new(observed, s->entries, s->n, members, n_members);
}

/* A new shard table when an entry or the live members changed, NULL when
 * nothing did. When memory runs out, the table that says nothing is known
 * (the next pass tries again). */
static struct ld_shardsnap *new_table(struct ld_mode_shards *s, int64_t now_ms)
{
    const char *const *members = NULL;
    uint32_t nm = ld_shardgroup_members(s->group, now_ms, &members);
    if (!s->table_changed && !members_differ(s->last, members, nm))
        return NULL;
    bool observed = s->member_observed && ld_shardgroup_observed(s->group);
    struct ld_shardsnap *t = make_table(s, observed, members, nm);
    if (!t) {
        ld_log(LD_LOG_WARN, "out of memory for the shard table; showing none");
        t = ld_shardsnap_ref(s->unknown);
    } else {
        s->table_changed = false;
    }
    ld_shardsnap_unref(s->last);
    s->last = ld_shardsnap_ref(t);
    return t;
}

/* The snapshot after every pass that changed the table, else at least a
 * heartbeat a second. */
static void publish(struct ld_mode_shards *s, int64_t now_ms)
{
    struct ld_shardsnap *table = new_table(s, now_ms);
    if (!table && now_ms - s->heartbeat_at_ms < HEARTBEAT_MS)
        return;
    struct ld_snapshot snap;
    ld_state_read(s->c.state, &snap);
    snap.leader[0] = '\0';
    snap.leading = false;
    snap.observed = s->member_observed && ld_shardgroup_observed(s->group);
    snap.heartbeat_ms = now_ms;
    snap.transitions_seen = (int64_t)total_transitions(s);
    snprintf(snap.health_error, sizeof(snap.health_error), "%s", s->health);
    ld_state_publish_shards(s->c.state, &snap, table);
    s->heartbeat_at_ms = now_ms;
}

static int64_t after_pass(void *ctx, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    poll_members(s, now_ms);
    if (s->inputs_changed || now_ms >= s->reassess_at_ms)
        assign(s, now_ms);
    publish(s, now_ms);
    int64_t at = s->reassess_at_ms;
    if (s->heartbeat_at_ms + HEARTBEAT_MS < at)
        at = s->heartbeat_at_ms + HEARTBEAT_MS;
    if ((!s->watch_healthy || s->join_list) && !s->listing && !s->stopping &&
        s->next_list_ms < at)
        at = s->next_list_ms;
    return at > now_ms ? at : now_ms + 1;
}

/* ---- construction -------------------------------------------------------- */

static uint64_t mix(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static enum ld_err add_election(struct ld_mode_shards *s, struct ld_shell *sh,
                                const char *name, const char *metadata, size_t want_index,
                                struct ld_errinfo *err)
{
    struct ld_election_config ec = {
        .namespace_ = s->c.namespace_,
        .name = name,
        .identity = s->c.identity,
        .lease_duration_ms = s->c.lease_duration_ms,
        .renew_deadline_ms = s->c.renew_deadline_ms,
        .retry_period_ms = s->c.retry_period_ms,
        .release_on_exit = s->c.release_on_exit,
        .seed = mix(s->c.seed, want_index),
        .create_metadata = metadata,
    };
    size_t index;
    enum ld_err rc = ld_shell_add_election(sh, &ec, &index, err);
    if (rc == LD_OK && index != want_index)
        return ld_errinfo_set(err, LD_EINVAL, "election host: unexpected index");
    return rc;
}

static enum ld_err make_group(struct ld_mode_shards *s, struct ld_errinfo *err)
{
    struct ld_shardgroup_config gc = {
        .name = s->c.group,
        .identity = s->c.identity,
        .names = s->c.names,
        .n_shards = s->c.n_shards,
        .pod_uid = s->c.pod_uid,
        .pod_name = s->c.pod_name,
        .lease_duration_ms = s->c.lease_duration_ms,
    };
    s->group = ld_shardgroup_new(&gc, err);
    if (!s->group)
        return err->code;
    s->n = ld_shardgroup_count(s->group);
    s->slots = calloc(s->n, sizeof(*s->slots));
    s->entries = calloc(s->n, sizeof(*s->entries));
    if (!s->slots || !s->entries)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < s->n; k++)
        s->entries[k].leader = "";
    s->unknown = make_table(s, false, NULL, 0);
    if (!s->unknown)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    if (!s->c.events)
        return LD_OK;
    s->events = calloc(s->n, sizeof(*s->events));
    if (!s->events)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < s->n; k++) {
        struct ld_hook_events_config ec = {
            .kube = s->c.kube,
            .namespace_ = s->c.namespace_,
            .lease = ld_shardgroup_shard_lease(s->group, k),
            .identity = s->c.identity,
            .metrics = s->c.metrics,
            .clock = &s->clock,
            .timeout_ms = s->c.call_timeout_ms,
        };
        ld_hook_events_init(&s->events[k], &ec);
    }
    return LD_OK;
}

static void host_config(void *ctx, struct ld_host_config *hc)
{
    struct ld_mode_shards *s = ctx;
    hc->label_selector = ld_shardgroup_selector(s->group);
    hc->log_names = true;
}

/* Election 0 is the member Lease, 1 + k shard k; with --events each shard's
 * Event hook is bound to its election (a shutdown's release of the shard
 * waits, bounded, for its "stopped leading" Event; nothing holds a
 * rebalance's hand-over, which must be quick). */
static enum ld_err attach(void *ctx, struct ld_shell *sh, struct ld_errinfo *err)
{
    struct ld_mode_shards *s = ctx;
    s->host = ld_shell_host(sh);
    enum ld_err rc = add_election(s, sh, ld_shardgroup_member_lease(s->group),
                                  ld_shardgroup_member_metadata(s->group), MEMBER, err);
    struct ld_now now = {.mono_ms = ld_clock_mono_ms(&s->clock),
                         .wall_us = ld_clock_wall_us(&s->clock)};
    for (uint32_t k = 0; rc == LD_OK && k < s->n; k++) {
        rc = add_election(s, sh, ld_shardgroup_shard_lease(s->group, k),
                          ld_shardgroup_shard_metadata(s->group, k), shard_index(k), err);
        /* Nothing is claimed before the first assignment says so. */
        if (rc == LD_OK)
            ld_election_set_contending(ld_host_election(s->host, shard_index(k)), now,
                                       false);
    }
    for (uint32_t k = 0; rc == LD_OK && s->events && k < s->n; k++) {
        struct ld_hook hook = ld_hook_events_bind(&s->events[k], shard_index(k));
        rc = ld_shell_add_hook(sh, &hook, err);
    }
    return rc;
}

/* ---- shutting down ------------------------------------------------------- */

static void on_shutdown(void *ctx, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    (void)now_ms;
    ld_log(LD_LOG_INFO, "shutting down: giving back every shard");
    s->stopping = true;
}

static void on_deleted(void *ctx, ld_kube_call call, enum ld_err rc,
                       struct ld_lease *lease, const struct ld_errinfo *err)
{
    struct ld_mode_shards *s = ctx;
    (void)call;
    (void)lease;
    s->deleting = false;
    if (rc == LD_OK || rc == LD_ENOTFOUND)
        ld_log(LD_LOG_INFO, "member Lease %s deleted",
               ld_shardgroup_member_lease(s->group));
    else
        ld_log(LD_LOG_WARN, "member Lease %s not deleted: %s (it expires by itself)",
               ld_shardgroup_member_lease(s->group),
               err && err->msg[0] ? err->msg : "error");
}

/* The member Lease is deleted once every release was written (its own
 * release went out with the shards', which is when the others stop counting
 * this replica); only when this replica released it (so not with
 * --release-on-exit=false, nor after standing back from another process of
 * its identity), and with preconditions that keep a Lease someone else
 * wrote since (a new Pod of the same name). Bounded by call_timeout_ms. */
static void delete_member(struct ld_mode_shards *s)
{
    if (!s->member_released || !s->member_uid || !s->member_rv)
        return;
    struct ld_errinfo err;
    ld_kube_call call;
    if (ld_kube_lease_delete_start(s->c.kube, s->c.namespace_,
                                   ld_shardgroup_member_lease(s->group), s->member_uid,
                                   s->member_rv, s->c.call_timeout_ms, on_deleted, s,
                                   &call, &err) != LD_OK) {
        ld_log(LD_LOG_WARN, "member Lease not deleted: %s", err.msg);
        return;
    }
    s->deleting = true;
    int64_t until = ld_clock_mono_ms(&s->clock) + s->c.call_timeout_ms + 1000;
    int64_t now;
    while (s->deleting && (now = ld_clock_mono_ms(&s->clock)) < until)
        ld_transport_run(ld_kube_transport(s->c.kube), until - now, -1);
    if (s->deleting)
        ld_kube_cancel(s->c.kube, call);
}

/* The host returns once every election is done, before another after_pass:
 * the last step-downs are published here. */
static void finish(void *ctx, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    publish(s, now_ms);
    delete_member(s);
}

/* ---- the mode ------------------------------------------------------------ */

static const struct ld_shell_mode_ops ops = {
    .takes_resignations = false, /* POST /resign is no route in shard mode */
    .host_config = host_config,
    .attach = attach,
    .on_publish = on_publish,
    .on_event = on_event,
    .lease_event = on_lease_event,
    .after_pass = after_pass,
    .on_shutdown = on_shutdown,
    .finish = finish,
};

struct ld_mode_shards *ld_mode_shards_new(const struct ld_mode_shards_config *cfg,
                                          struct ld_errinfo *err)
{
    struct ld_mode_shards *s = calloc(1, sizeof(*s));
    if (!s) {
        ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        return NULL;
    }
    s->c = *cfg;
    s->clock = ld_clock_or_real(cfg->clock);
    s->reassess_at_ms = INT64_MAX;
    if (make_group(s, err) != LD_OK) {
        ld_mode_shards_free(s);
        return NULL;
    }
    return s;
}

struct ld_shell_mode ld_mode_shards(struct ld_mode_shards *s)
{
    return (struct ld_shell_mode){.ops = &ops, .ctx = s};
}

const struct ld_shardgroup *ld_mode_shards_group(const struct ld_mode_shards *s)
{
    return s->group;
}

size_t ld_mode_shards_election(uint32_t shard)
{
    return shard_index(shard);
}

void ld_mode_shards_free(struct ld_mode_shards *s)
{
    if (!s)
        return;
    if (s->listing)
        ld_kube_cancel(s->c.kube, s->list_call);
    for (uint32_t k = 0; s->events && k < s->n; k++)
        ld_hook_events_clear(&s->events[k]);
    free(s->events);
    for (uint32_t k = 0; s->slots && k < s->n; k++)
        free(s->slots[k].leader);
    free(s->slots);
    free(s->entries);
    ld_shardsnap_unref(s->last);
    ld_shardsnap_unref(s->unknown);
    ld_shardgroup_free(s->group);
    free(s->member_uid);
    free(s->member_rv);
    free(s);
}
