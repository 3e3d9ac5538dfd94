/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardhost: the shard group on an election host (see shardhost.h).
 *
 * The member election's publishes and the watch's events go to the group
 * as they come; the decisions wait for the end of the pass (after_pass),
 * so a pass that learned much decides once.
 */
#include "shardhost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lead.h"
#include "log.h"
#include "text.h"
#include "watch.h"

/* Member renewals remembered for confirming the view (see sent). */
#define SENT_RENEWALS 8

/* A replica that joins a group with free shards takes nothing for a retry
 * period and this margin: a replica that starts up to a retry period later
 * has created its member Lease by then, which counts live at once (it was
 * not in the list), and one that started a little earlier has renewed its
 * record (seen to change). So replicas started together share the shards
 * instead of the first taking them all and giving most back. A group whose
 * every shard is held needs no wait: nothing is free to take in haste, and
 * a shard released later (a rolling update's) is taken at once. */
#define JOIN_SETTLE_MS 1000

/* How long the group avoids giving this replica a shard it could not
 * write, in lease durations; then it may be given it again. */
#define UNWRITABLE_LEASES 10

/* An assignment that ran out of memory is tried again this much later. */
#define ENOMEM_RETRY_MS 1000

/* One shard: its write in flight, its give-back. */
struct slot {
    bool writing;
    bool releasing; /* the write in flight is a release */
    ld_kube_call call;
    /* A read of the Lease by name, or the write that labels it (see
     * read_by_name), in flight. */
    bool reading;
    ld_kube_call read_call;
    uint64_t term_sent;  /* the member term the write was sent in */
    char *rv_before;     /* owned; the record it was sent on, NULL for a create */
    int64_t next_try_ms; /* after a failed write, not before */
    /* Since when this replica may take the shard (or evict its holder)
     * without having it; INT64_MAX when it may not or has it. */
    int64_t wanted_since_ms;
    /* It was wanted for a lease duration and never owned: reported
     * unwritable (shardgroup.h's LD_SHARDGROUP_UNWRITABLE) until then;
     * INT64_MIN when not. */
    int64_t unwritable_until_ms;
    /* Its last take was refused by the server (403, 422, 400: RBAC by
     * name, a webhook), not lost to a fault that passes. */
    bool refused;
    /* Being given back: its release waits until then, or until the app
     * said it drained the shard (drained); INT64_MAX when not. */
    int64_t drain_until_ms;
    bool drained;
    int64_t unclaimed_ms;  /* when the give-back ended the claim */
    int64_t held_until_ms; /* the consumer holds its release at most until then */
    bool shown_claimed;    /* claimed at the last publish */
};

struct ld_shardhost {
    struct ld_shardhost_config c;
    struct ld_clock clock;
    struct ld_shardgroup *group;
    struct ld_host *host; /* once attached */
    size_t member;        /* the member election's index in host */
    struct slot *slots;   /* one per shard */
    uint32_t n;

    bool inputs_changed;    /* news since the last assignment */
    int64_t reassess_at_ms; /* something expires then */

    /* Why this replica stepped out of the group (a shard assigned here
     * stayed unowned, or an earlier member runs another shard set), until
     * stuck_until_ms. */
    char stuck[256];
    int64_t stuck_until_ms;
    bool member_observed;
    bool member_live; /* our member election led at its last publish */
    /* The deadline of our member election's term (election.h's
     * term_until_ms): a shard's sent writes run, and hold its release, at
     * most until then. */
    int64_t member_term_until_ms;
    int64_t contend_after_ms;     /* no takes before: see observe_member */
    bool join_held;               /* the join's list showed every shard held */
    char *member_uid, *member_rv; /* of our member Lease as last seen */

    /* The group is listed on joining, while its watch is down (every retry
     * period), and when a takeover needs one consistent snapshot. */
    bool watch_healthy;
    /* Our member renewal the watch has not shown yet, and since when: a
     * stream that stays open but carries nothing (a proxy holding it, a
     * partition) shows nobody's renewals, ours included. */
    char *echo_rv;
    char *shown_rv; /* the last record of ours the watch showed */
    /* The watch started a stream from the current state at
     * watch_gap_since_ms: what happened between the last stream and it (a
     * shard Lease deleted, say) was never shown, so the watch confirms
     * nothing (ld_shardgroup_confirm) until a list sent since then is in. */
    bool watch_gap;
    int64_t watch_gap_since_ms;
    int64_t echo_since_ms;
    bool watch_silent;
    /* Our last member renewals and when each was sent: the watch showing
     * one confirms the view up to its sending (ld_shardgroup_confirm). A
     * few, so a watch a retry period or two behind still confirms. */
    struct {
        char *rv;
        int64_t sent_ms;
    } sent[SENT_RENEWALS];
    unsigned sent_next;
    bool listing;
    ld_kube_call list_call;
    int64_t next_list_ms;
    int64_t list_started_ms;
    int64_t live_since_ms; /* our member election's current term of leading */
    bool join_list;        /* a list since then would settle the join */
    bool want_read;        /* a takeover waits for a list */
    int64_t next_read_ms;  /* such lists are at most this often */

    bool evicting; /* one eviction at a time */
    int64_t next_evict_ms;
    ld_kube_call evict_call;
    char *evict_rv; /* owned; the member record it was sent on */

    /* The deletion of another member's long-expired Lease in flight. */
    bool cleaning;
    ld_kube_call clean_call;
    int64_t next_clean_ms;

    bool stopping;
    int64_t stopping_since_ms; /* when the shutdown began */
    bool release_given_up;     /* a shard's, at the exit: the member Lease stays */
    bool led_at_stop;          /* our member election led when the shutdown began */
    bool deleting;             /* the member Lease's DELETE is in flight */
    bool member_released;      /* we wrote the member Lease's release */
};

/* Whether the join wait is over (JOIN_SETTLE_MS): its time is up, or the
 * group had every shard held at the join's list and every member in it has
 * been seen to change (so this replica does not think itself alone while
 * it takes a shard released to it). */
static bool join_settled(const struct ld_shardhost *s, int64_t now_ms)
{
    return now_ms >= s->contend_after_ms ||
           (s->join_held && !ld_shardgroup_members_unproven(s->group, now_ms));
}

/* Remembers our member renewal rv, sent at sent_ms; the watch may have
 * shown it already (it can be faster than the answer), which confirms
 * the view at once. */
static void note_sent(struct ld_shardhost *s, const char *rv, int64_t sent_ms)
{
    unsigned i = s->sent_next;
    s->sent_next = (i + 1) % SENT_RENEWALS;
    ld_text_set(&s->sent[i].rv, rv);
    s->sent[i].sent_ms = sent_ms;
    if (s->sent[i].rv && s->shown_rv && strcmp(s->shown_rv, rv) == 0 && !s->watch_gap)
        ld_shardgroup_confirm(s->group, sent_ms);
}

/* ---- what the member election and the watch say -------------------------- */

static void observe_member(struct ld_shardhost *s, const struct ld_host_view *v,
                           int64_t now_ms)
{
    ld_shardgroup_observe_own(s->group, &v->status, now_ms);
    s->member_observed = v->status.observed;
    s->watch_healthy = v->status.watching;
    /* Taking shards before the other members are known would take them on
     * the belief that this replica is alone, only to give them back:
     * churn, not danger. So on joining, the group is listed at once and
     * nothing is taken until that answer is in and, when it shows free
     * shards, a retry period has passed (see JOIN_SETTLE_MS). */
    bool live = ld_leads_at(v->status.leading, v->status.lead_until_ms, now_ms);
    if (live && !s->member_live) {
        s->live_since_ms = now_ms;
        s->contend_after_ms = now_ms + s->c.retry_period_ms + JOIN_SETTLE_MS;
        s->join_held = false;
        s->join_list = true;
        s->next_list_ms = now_ms;
    }
    s->member_live = live;
    s->member_term_until_ms = v->status.term_until_ms;
    if (v->status.uid)
        ld_text_set(&s->member_uid, v->status.uid);
    if (v->status.resource_version && live &&
        (!s->member_rv || strcmp(s->member_rv, v->status.resource_version) != 0) &&
        (!s->echo_rv || strcmp(s->echo_rv, v->status.resource_version) != 0) &&
        (!s->shown_rv || strcmp(s->shown_rv, v->status.resource_version) != 0)) {
        /* A new record of ours: the watch should show it soon. */
        if (!s->echo_rv)
            s->echo_since_ms = now_ms;
        ld_text_set(&s->echo_rv, v->status.resource_version);
    }
    if (v->status.resource_version && live &&
        (!s->member_rv || strcmp(s->member_rv, v->status.resource_version) != 0))
        note_sent(s, v->status.resource_version,
                  v->status.lead_until_ms - s->c.renew_deadline_ms);
    if (v->status.resource_version)
        ld_text_set(&s->member_rv, v->status.resource_version);
}

/* The watch showed our member record rv: when it is a renewal of ours,
 * the view holds everything stored before that renewal was sent. */
static void confirm_by(struct ld_shardhost *s, const char *rv)
{
    for (unsigned i = 0; i < SENT_RENEWALS; i++) {
        if (s->sent[i].rv && strcmp(s->sent[i].rv, rv) == 0) {
            if (!s->watch_gap)
                ld_shardgroup_confirm(s->group, s->sent[i].sent_ms);
            return;
        }
    }
}

/* Whether lease is a member Lease the group counts as incompatible. */
static bool incompatible(const struct ld_shardhost *s, const struct ld_lease *lease)
{
    size_t n = strlen(ld_shardgroup_name(s->group)) + strlen("-member-");
    return lease->name && strlen(lease->name) > n &&
           ld_shardgroup_incompatible(s->group, lease->name + n);
}

/* Logs a member Lease that has just turned out incompatible (was: it was
 * known so before). */
static void note_incompatible(struct ld_shardhost *s, const struct ld_lease *lease,
                              bool was)
{
    if (!was && incompatible(s, lease))
        ld_log(LD_LOG_ERROR,
               "member Lease %s has no %s: \"%s\" annotation: it belongs to an "
               "incompatible version of leaderd and counts neither live nor dead",
               lease->name, LD_SHARDGROUP_PROTOCOL, LD_SHARDGROUP_PROTOCOL_VERSION);
}

static void observe(struct ld_shardhost *s, const struct ld_lease *lease, int64_t now_ms)
{
    bool was = incompatible(s, lease);
    enum ld_err rc = ld_shardgroup_observe_lease(s->group, lease, now_ms);
    if (rc == LD_ETOOBIG)
        ld_log(LD_LOG_WARN, "lease %s: more than %d members; ignored", lease->name,
               LD_SHARDGROUP_MAX_MEMBERS);
    else if (rc == LD_OK)
        note_incompatible(s, lease, was);
}

void ld_shardhost_on_watch_started(struct ld_shardhost *s, bool from_current,
                                   int64_t now_ms)
{
    if (!from_current)
        return;          /* resumed: nothing was missed */
    s->watch_gap = true; /* poll_group lists at its usual pace */
    s->watch_gap_since_ms = now_ms;
}

void ld_shardhost_on_lease_event(struct ld_shardhost *s, const struct ld_watch_event *ev,
                                 int64_t now_ms)
{
    if (!ev->lease)
        return;
    if (ev->lease->resource_version &&
        strcmp(ev->lease->name, ld_shardgroup_member_lease(s->group)) == 0) {
        ld_text_set(&s->shown_rv, ev->lease->resource_version);
        confirm_by(s, ev->lease->resource_version);
        if (s->echo_rv && strcmp(ev->lease->resource_version, s->echo_rv) == 0) {
            free(s->echo_rv);
            s->echo_rv = NULL;
            s->watch_silent = false;
        }
    }
    if (ev->type == LD_WATCH_DELETED)
        ld_shardgroup_observe_deleted(s->group, ev->lease, now_ms);
    else
        observe(s, ev->lease, now_ms);
    s->inputs_changed = true;
}

/* ---- writes -------------------------------------------------------------- */

/* Starts giving shard k back: the claim ends now (the consumer's next
 * publish shows it), and the release waits for the drain. */
static void begin_give_back(struct ld_shardhost *s, uint32_t k, int64_t now_ms)
{
    struct slot *sl = &s->slots[k];
    ld_shardgroup_give_back(s->group, k);
    if (sl->drain_until_ms != INT64_MAX)
        return;
    sl->drain_until_ms = now_ms + s->c.drain_ms;
    sl->unclaimed_ms = now_ms;
    sl->drained = false;
    if (s->c.ops.on_drain)
        s->c.ops.on_drain(s->c.ops.ctx, k, true);
}

static void end_drain(struct ld_shardhost *s, uint32_t k)
{
    struct slot *sl = &s->slots[k];
    if (sl->drain_until_ms == INT64_MAX)
        return;
    sl->drain_until_ms = INT64_MAX;
    sl->held_until_ms = INT64_MAX;
    sl->drained = false;
    if (s->c.ops.on_drain)
        s->c.ops.on_drain(s->c.ops.ctx, k, false);
}

/* Whether shard k's drain is over: its time is up, or the app said so. */
static bool drain_over(struct ld_shardhost *s, uint32_t k, int64_t now_ms)
{
    struct slot *sl = &s->slots[k];
    if (s->c.ops.take_drained && s->c.ops.take_drained(s->c.ops.ctx, k))
        sl->drained = true;
    return sl->drained || now_ms >= sl->drain_until_ms;
}

/* The consumer's publish; what it showed claimed is remembered, so that a
 * release waits for a publish only when one still shows its claim. */
static void publish(struct ld_shardhost *s, int64_t now_ms)
{
    for (uint32_t k = 0; k < s->n; k++)
        s->slots[k].shown_claimed = ld_shardgroup_claimed(s->group, k, now_ms);
    if (s->c.ops.publish)
        s->c.ops.publish(s->c.ops.ctx, now_ms);
}

void ld_shardhost_publish(struct ld_shardhost *s, int64_t now_ms)
{
    publish(s, now_ms);
}

/* What the consumer says of shard k's release with bounds b. */
static enum ld_shardhost_verdict verdict(struct ld_shardhost *s, uint32_t k,
                                         const struct ld_shardhost_bounds *b,
                                         int64_t now_ms, int64_t *until_ms,
                                         const char **why)
{
    *until_ms = INT64_MAX;
    *why = "";
    if (!s->c.ops.release_hold)
        return LD_SHARDHOST_RELEASE_NOW;
    return s->c.ops.release_hold(s->c.ops.ctx, k, b, now_ms, until_ms, why);
}

/* Shard k's release hold, asked once its drain is over. The consumer shows
 * the claim ended first (an API write gate then refuses the shard's new
 * writes); writes it already let out run on, and hold the release, until
 * the member election's term deadline. */
static enum ld_shardhost_verdict release_hold(struct ld_shardhost *s, uint32_t k,
                                              int64_t now_ms)
{
    struct slot *sl = &s->slots[k];
    struct ld_shardhost_bounds b = {
        .term_until_ms = s->member_term_until_ms,
        .stopping_since_ms = s->stopping ? s->stopping_since_ms : INT64_MIN,
    };
    const char *why;
    if (sl->shown_claimed)
        publish(s, now_ms);
    enum ld_shardhost_verdict v = verdict(s, k, &b, now_ms, &sl->held_until_ms, &why);
    if (v != LD_SHARDHOST_RELEASE_WAIT)
        sl->held_until_ms = INT64_MAX;
    if (v == LD_SHARDHOST_RELEASE_NEVER)
        ld_log(LD_LOG_WARN,
               "shard %s: the release is given up %lld ms after the claim ended: %s",
               ld_shardgroup_shard_id(s->group, k),
               (long long)(now_ms - sl->unclaimed_ms), why);
    return v;
}

static void act(struct ld_shardhost *s, int64_t now_ms, bool fresh);

static void read_by_name(struct ld_shardhost *s, uint32_t k);

/* The slot whose read (or write) is call; s->n when none is, as for an
 * answer to a call the slot has since dropped. */
static uint32_t slot_reading(const struct ld_shardhost *s, ld_kube_call call)
{
    uint32_t k = 0;
    while (k < s->n && !(s->slots[k].reading && s->slots[k].read_call == call))
        k++;
    return k;
}

static uint32_t slot_writing(const struct ld_shardhost *s, ld_kube_call call)
{
    uint32_t k = 0;
    while (k < s->n && !(s->slots[k].writing && s->slots[k].call == call))
        k++;
    return k;
}

static void on_labelled(void *ctx, ld_kube_call call, enum ld_err rc,
                        struct ld_lease *lease, const struct ld_errinfo *err)
{
    struct ld_shardhost *s = ctx;
    uint32_t k = slot_reading(s, call);
    if (k == s->n)
        return;
    s->slots[k].reading = false;
    if (rc == LD_OK) {
        observe(s, lease, ld_clock_mono_ms(&s->clock));
    } else {
        ld_log(LD_LOG_INFO, "shard %s: cannot label its Lease: %s",
               ld_shardgroup_shard_id(s->group, k),
               err && err->msg[0] ? err->msg : ld_strerror(rc));
        if (rc == LD_ECONFLICT || rc == LD_ENOTFOUND)
            read_by_name(s, k); /* changed meanwhile: look again */
    }
    s->inputs_changed = true;
}

/* Labels shard k's Lease, read by name without the group's labels: then
 * every replica's list and watch show it, with its true holder, and the
 * usual rules apply (no replica acts on a record only it has seen). The
 * spec is left as it is, so its holder, if any, keeps it. */
static void label(struct ld_shardhost *s, uint32_t k)
{
    struct slot *sl = &s->slots[k];
    struct ld_lease out;
    struct ld_errinfo err;
    ld_lease_init(&out);
    if (ld_shardgroup_label_lease(s->group, k, &out) == LD_OK &&
        ld_kube_lease_update_start(s->c.kube, &out, s->c.renew_deadline_ms, on_labelled,
                                   s, &sl->read_call, &err) == LD_OK)
        sl->reading = true;
    ld_lease_clear(&out);
}

static void on_read(void *ctx, ld_kube_call call, enum ld_err rc, struct ld_lease *lease,
                    const struct ld_errinfo *err)
{
    struct ld_shardhost *s = ctx;
    int64_t now_ms = ld_clock_mono_ms(&s->clock);
    uint32_t k = slot_reading(s, call);
    if (k == s->n)
        return;
    s->slots[k].reading = false;
    if (rc == LD_OK) {
        observe(s, lease, now_ms);
        if (ld_shardgroup_unlisted(s->group, k) && !s->stopping)
            label(s, k);
    } else if (rc == LD_ENOTFOUND) {
        /* Gone, unless the watch has shown a record of it meanwhile. */
        const struct ld_lease *rec = ld_shardgroup_record(s->group, k);
        struct ld_lease gone = {.name = (char *)ld_shardgroup_shard_lease(s->group, k)};
        if (!rec || ld_shardgroup_unlisted(s->group, k))
            ld_shardgroup_observe_deleted(s->group, &gone, now_ms);
    } else {
        ld_log(LD_LOG_WARN, "shard %s: cannot read its Lease: %s",
               ld_shardgroup_shard_id(s->group, k),
               err && err->msg[0] ? err->msg : ld_strerror(rc));
    }
    s->inputs_changed = true;
}

/* A shard Lease made by someone else without the group's labels is in
 * neither the group's list nor its watch: its create is refused (it
 * exists) and nothing would ever show it. It is read by name and then
 * labelled (label). */
static void read_by_name(struct ld_shardhost *s, uint32_t k)
{
    struct slot *sl = &s->slots[k];
    struct ld_errinfo err;
    if (sl->reading || s->stopping)
        return;
    if (ld_kube_lease_get_start(
            s->c.kube, s->c.namespace_, ld_shardgroup_shard_lease(s->group, k),
            s->c.renew_deadline_ms, on_read, s, &sl->read_call, &err) != LD_OK) {
        ld_log(LD_LOG_WARN, "shard %s: cannot read its Lease: %s",
               ld_shardgroup_shard_id(s->group, k), err.msg);
        return;
    }
    sl->reading = true;
}

static void on_written(void *ctx, ld_kube_call call, enum ld_err rc,
                       struct ld_lease *lease, const struct ld_errinfo *err)
{
    struct ld_shardhost *s = ctx;
    int64_t now_ms = ld_clock_mono_ms(&s->clock);
    uint32_t k = slot_writing(s, call);
    if (k == s->n)
        return;
    struct slot *sl = &s->slots[k];
    const char *id = ld_shardgroup_shard_id(s->group, k);
    sl->writing = false;
    sl->refused = !sl->releasing &&
                  (rc == LD_EFORBIDDEN || rc == LD_EINVALID || rc == LD_EBADREQUEST);
    if (rc == LD_OK) {
        ld_shardgroup_wrote(s->group, k, sl->term_sent, sl->rv_before, lease, now_ms);
        if (sl->releasing)
            end_drain(s, k);
        ld_log(LD_LOG_DEBUG, "shard %s: %s written", id,
               sl->releasing ? "release" : "claim");
    } else {
        ld_shardgroup_write_failed(s->group, k);
        sl->next_try_ms = now_ms + s->c.retry_period_ms / 2;
        s->want_read = true; /* our view was stale: a list refreshes it */
        /* A Lease the group's list cannot show (made without its labels)
         * is read by name instead. */
        if (rc == LD_EEXISTS || ((rc == LD_ECONFLICT || rc == LD_ENOTFOUND) &&
                                 ld_shardgroup_unlisted(s->group, k)))
            read_by_name(s, k);
        /* A conflict means someone else wrote first: the watch shows who.
         * A write without an answer may still land; its record will be
         * seen, and nothing is claimed on it meanwhile. */
        ld_log(rc == LD_ECONFLICT || rc == LD_EEXISTS ? LD_LOG_DEBUG : LD_LOG_WARN,
               "shard %s: %s not written: %s", id, sl->releasing ? "release" : "claim",
               err && err->msg[0] ? err->msg : ld_strerror(rc));
    }
    free(sl->rv_before);
    sl->rv_before = NULL;
    s->inputs_changed = true;
}

/* Starts the write of out for shard k (a create when it has no
 * resourceVersion). */
static void start_write(struct ld_shardhost *s, uint32_t k, struct ld_lease *out,
                        bool release)
{
    struct slot *sl = &s->slots[k];
    struct ld_errinfo err;
    enum ld_err rc;
    char *rv = out->resource_version ? strdup(out->resource_version) : NULL;
    if (out->resource_version && !rv)
        return;
    if (out->resource_version)
        rc = ld_kube_lease_update_start(s->c.kube, out, s->c.renew_deadline_ms,
                                        on_written, s, &sl->call, &err);
    else
        rc = ld_kube_lease_create_start(s->c.kube, out, s->c.renew_deadline_ms,
                                        on_written, s, &sl->call, &err);
    if (rc != LD_OK) {
        ld_log(LD_LOG_WARN, "shard %s: cannot write: %s",
               ld_shardgroup_shard_id(s->group, k), err.msg);
        free(rv);
        if (release)
            ld_shardgroup_write_failed(s->group, k);
        return;
    }
    sl->writing = true;
    sl->releasing = release;
    sl->term_sent = ld_shardgroup_term(s->group);
    free(sl->rv_before);
    sl->rv_before = rv;
}

static void take(struct ld_shardhost *s, uint32_t k)
{
    struct ld_lease out;
    ld_lease_init(&out);
    if (ld_shardgroup_take_lease(s->group, k, s->c.namespace_,
                                 ld_clock_wall_us(&s->clock), ld_clock_mono_ms(&s->clock),
                                 &out) == LD_OK)
        start_write(s, k, &out, false);
    ld_lease_clear(&out);
}

static void release(struct ld_shardhost *s, uint32_t k)
{
    struct ld_lease out;
    ld_lease_init(&out);
    ld_shardgroup_give_back(s->group, k);
    if (ld_shardgroup_release_lease(s->group, k, ld_clock_wall_us(&s->clock),
                                    ld_clock_mono_ms(&s->clock), &out) == LD_OK)
        start_write(s, k, &out, true);
    else
        ld_shardgroup_write_failed(s->group, k);
    ld_lease_clear(&out);
}

static void on_evicted(void *ctx, ld_kube_call call, enum ld_err rc,
                       struct ld_lease *lease, const struct ld_errinfo *err)
{
    struct ld_shardhost *s = ctx;
    (void)call;
    s->evicting = false;
    if (rc == LD_OK) {
        ld_log(LD_LOG_INFO, "member Lease %s evicted: unchanged for its lease duration",
               lease->name);
        ld_shardgroup_evicted(s->group, s->evict_rv, lease, ld_clock_mono_ms(&s->clock));
        s->want_read = true; /* its shards are taken on a fresh list */
        s->next_read_ms = 0;
    } else {
        ld_log(rc == LD_ECONFLICT ? LD_LOG_DEBUG : LD_LOG_WARN,
               "member eviction not written: %s",
               err && err->msg[0] ? err->msg : ld_strerror(rc));
        /* It renewed after all (our view was stale), or the answer was
         * lost: look again on a list, and not at once. */
        s->next_evict_ms = ld_clock_mono_ms(&s->clock) + s->c.retry_period_ms / 2;
        s->want_read = true;
    }
    free(s->evict_rv);
    s->evict_rv = NULL;
    s->inputs_changed = true;
}

static void evict(struct ld_shardhost *s, uint32_t k)
{
    struct ld_lease out;
    struct ld_errinfo err;
    ld_lease_init(&out);
    if (s->evicting || ld_clock_mono_ms(&s->clock) < s->next_evict_ms ||
        ld_shardgroup_evict_lease(s->group, k, ld_clock_wall_us(&s->clock), &out) !=
            LD_OK)
        goto done;
    s->evict_rv = strdup(out.resource_version);
    if (!s->evict_rv)
        goto done;
    if (ld_kube_lease_update_start(s->c.kube, &out, s->c.renew_deadline_ms, on_evicted, s,
                                   &s->evict_call, &err) != LD_OK) {
        ld_log(LD_LOG_WARN, "cannot evict %s: %s", out.name, err.msg);
        free(s->evict_rv);
        s->evict_rv = NULL;
        goto done;
    }
    s->evicting = true;
done:
    ld_lease_clear(&out);
}

/* Out of the group for a lease duration (its member election resigns, so
 * its member Lease names nobody and the others take its quota at once),
 * and ld_shardhost_stuck says why until it has been back for a lease
 * duration. */
static void step_out(struct ld_shardhost *s, int64_t now_ms, const char *why)
{
    snprintf(s->stuck, sizeof(s->stuck), "%.200s; out of the group for %lld s", why,
             (long long)(s->c.lease_duration_ms / 1000));
    ld_log(LD_LOG_ERROR, "%s", s->stuck);
    s->stuck_until_ms = now_ms + 2 * s->c.lease_duration_ms;
    for (uint32_t k = 0; k < s->n; k++)
        s->slots[k].wanted_since_ms = INT64_MAX;
    struct ld_now now = {.mono_ms = now_ms, .wall_us = ld_clock_wall_us(&s->clock)};
    ld_election_resign(ld_host_election(s->host, s->member), now, s->c.lease_duration_ms);
    ld_host_wake(s->host, s->member);
}

/* A member that joined before this replica runs another shard set
 * (--shards or --shard-names changed in a running group, or two
 * Deployments share a group): the two map keys and Lease names to shards
 * differently, so an app could work on one key in two replicas. This
 * replica claims nothing and steps out, and tries again when it comes
 * back; the earlier members go on. Returns whether it refused. */
static bool refuse_other_shard_set(struct ld_shardhost *s, int64_t now_ms)
{
    char theirs[64], why[256];
    const char *who =
        ld_shardgroup_set_conflict(s->group, now_ms, theirs, sizeof(theirs));
    if (!who)
        return false;
    if (s->stopping || !s->member_live || now_ms < s->stuck_until_ms)
        return true;
    snprintf(why, sizeof(why),
             "member %.60s runs another shard set (%.40s) than this replica (%.40s); "
             "claiming nothing",
             who, theirs, ld_shardgroup_shard_set(s->group));
    step_out(s, now_ms, why);
    return true;
}

/* Carries out each shard's step (shardgroup.h); fresh: the view is a list
 * of the group just answered. */
static void act(struct ld_shardhost *s, int64_t now_ms, bool fresh)
{
    if (refuse_other_shard_set(s, now_ms))
        return;
    bool settled = join_settled(s, now_ms);
    for (uint32_t k = 0; k < s->n && !s->stopping; k++) {
        struct slot *sl = &s->slots[k];
        if (sl->writing || sl->reading || now_ms < sl->next_try_ms)
            continue;
        enum ld_shard_step step = ld_shardgroup_step(s->group, k, now_ms, fresh);
        bool wanted = settled && (step == LD_SHARD_TAKE || step == LD_SHARD_READ ||
                                  step == LD_SHARD_EVICT);
        if (step != LD_SHARD_RELEASE)
            end_drain(s, k); /* not (or no longer) being given back */
        if (!wanted)
            sl->wanted_since_ms = INT64_MAX;
        else if (sl->wanted_since_ms == INT64_MAX)
            sl->wanted_since_ms = now_ms;
        switch (step) {
        case LD_SHARD_TAKE:
            if (!settled)
                break;
            ld_log(LD_LOG_DEBUG, "shard %s: taking it (held by \"%s\" in our view%s)",
                   ld_shardgroup_shard_id(s->group, k),
                   ld_shardgroup_record(s->group, k)
                       ? ld_shardgroup_record(s->group, k)->spec.holder
                       : "(absent)",
                   fresh ? ", on a fresh list" : "");
            take(s, k);
            break;
        case LD_SHARD_READ:
            if (settled)
                s->want_read = true;
            break;
        case LD_SHARD_EVICT:
            if (settled)
                evict(s, k);
            break;
        case LD_SHARD_RELEASE:
            if (!settled)
                break; /* just joined: a rebalance waits for the others */
            begin_give_back(s, k, now_ms);
            if (!drain_over(s, k, now_ms))
                break;
            enum ld_shardhost_verdict hold = release_hold(s, k, now_ms);
            if (hold == LD_SHARDHOST_RELEASE_NEVER) {
                /* Not written: the shard stays ours, unclaimed, and its
                 * give-back starts over later, its hold asked anew. */
                end_drain(s, k);
                sl->next_try_ms = now_ms + s->c.lease_duration_ms;
            }
            if (hold != LD_SHARDHOST_RELEASE_NOW)
                break;
            ld_log(LD_LOG_INFO, "shard %s: assigned to %s; giving it back",
                   ld_shardgroup_shard_id(s->group, k),
                   ld_shardgroup_target(s->group, k) ? ld_shardgroup_target(s->group, k)
                                                     : "nobody");
            release(s, k);
            break;
        case LD_SHARD_NONE:
            break;
        }
    }
}

/* Lowers *next to at. */
static void earlier(int64_t *next, int64_t at)
{
    if (at < *next)
        *next = at;
}

/* Shard k's report of being unwritable here ends when its time is up.
 * Returns whether the member annotations changed. */
static bool expire_report(struct ld_shardhost *s, uint32_t k, int64_t now_ms,
                          int64_t *next)
{
    struct slot *sl = &s->slots[k];
    if (sl->unwritable_until_ms == INT64_MIN)
        return false;
    if (now_ms < sl->unwritable_until_ms) {
        earlier(next, sl->unwritable_until_ms);
        return false;
    }
    sl->unwritable_until_ms = INT64_MIN;
    ld_log(LD_LOG_INFO, "shard %s: this replica may be given it again",
           ld_shardgroup_shard_id(s->group, k));
    return ld_shardgroup_set_unwritable(s->group, k, false);
}

/* Shard k's takes were refused for a lease duration: reported for
 * UNWRITABLE_LEASES lease durations. Returns whether the member
 * annotations changed. */
static bool report_unwritable(struct ld_shardhost *s, uint32_t k, int64_t now_ms,
                              int64_t *next)
{
    struct slot *sl = &s->slots[k];
    int64_t skip_ms = UNWRITABLE_LEASES * s->c.lease_duration_ms;
    sl->wanted_since_ms = INT64_MAX;
    sl->unwritable_until_ms = now_ms + skip_ms;
    earlier(next, sl->unwritable_until_ms);
    ld_log(LD_LOG_ERROR,
           "shard %s is assigned here but its takes were refused for %lld s; the group "
           "gives it to another member for %lld s",
           ld_shardgroup_shard_id(s->group, k),
           (long long)(s->c.lease_duration_ms / 1000), (long long)(skip_ms / 1000));
    return ld_shardgroup_set_unwritable(s->group, k, true);
}

/* A shard this replica may take but has not owned for a lease duration
 * would stay unowned as long as the group leaves it to this replica. When
 * the server refused its takes (a webhook, RBAC by name) it says so in its
 * member Lease (LD_SHARDGROUP_UNWRITABLE, with the next renewal), and every
 * replica's assignment then gives the shard to a member that can write
 * it, or to nobody when none can, instead of each member stepping out in
 * turn; after UNWRITABLE_LEASES lease durations it may be given it again.
 * The log and the consumer (ld_shardhost_unwritable) say which. When its takes failed
 * otherwise, it steps out of the group for a while. Returns when to look again. */
static int64_t check_stuck(struct ld_shardhost *s, int64_t now_ms)
{
    int64_t next = INT64_MAX;
    bool changed = false;
    for (uint32_t k = 0; k < s->n; k++) {
        changed |= expire_report(s, k, now_ms, &next);
        int64_t since = s->slots[k].wanted_since_ms;
        if (since == INT64_MAX)
            continue;
        if (now_ms - since < s->c.lease_duration_ms) {
            earlier(&next, since + s->c.lease_duration_ms);
            continue;
        }
        if (s->stopping || !s->member_live)
            continue;
        if (s->slots[k].refused) {
            changed |= report_unwritable(s, k, now_ms, &next);
            continue;
        }
        /* Not refused, yet never written (its writes time out or fail
         * while the member renewals go through): out of the group for a
         * while, so that the others take this replica's quota. */
        char why[200];
        snprintf(why, sizeof(why),
                 "shard %s is assigned here but has not been owned for %lld s",
                 ld_shardgroup_shard_id(s->group, k),
                 (long long)(s->c.lease_duration_ms / 1000));
        step_out(s, now_ms, why);
        earlier(&next, s->stuck_until_ms);
        break;
    }
    if (changed) {
        /* The next member renewal tells the others; our own assignment
         * knows at once. */
        if (ld_election_set_own_annotations(ld_host_election(s->host, s->member),
                                            ld_shardgroup_member_annotations(s->group)) !=
            LD_OK)
            ld_log(LD_LOG_WARN, "out of memory for the member Lease's annotations");
        s->inputs_changed = true;
    }
    return next;
}

static void on_cleaned(void *ctx, ld_kube_call call, enum ld_err rc,
                       struct ld_lease *lease, const struct ld_errinfo *err)
{
    struct ld_shardhost *s = ctx;
    (void)call;
    (void)lease;
    s->cleaning = false;
    if (rc != LD_OK && rc != LD_ENOTFOUND && rc != LD_ECONFLICT)
        ld_log(LD_LOG_WARN, "a long-expired member Lease was not deleted: %s",
               err && err->msg[0] ? err->msg : ld_strerror(rc));
}

/* Member Leases that outlived their replicas (no ownerReference, or no
 * garbage collector) are deleted by a live member once they have been
 * expired for ten lease durations, with preconditions (uid and
 * resourceVersion) so that a Lease renewed or made anew meanwhile stays;
 * one at a time, at most one a retry period. The watch's DELETED takes it
 * out of the view. */
static void clean_up(struct ld_shardhost *s, int64_t now_ms)
{
    if (s->cleaning || s->stopping || now_ms < s->next_clean_ms ||
        !ld_shardgroup_leads(s->group, now_ms))
        return;
    const struct ld_lease *old = ld_shardgroup_long_expired(s->group, now_ms);
    if (!old)
        return;
    struct ld_errinfo err;
    s->next_clean_ms = now_ms + s->c.retry_period_ms;
    ld_log(LD_LOG_INFO, "member Lease %s expired %lld s ago or more; deleting it",
           old->name, (long long)(10 * s->c.lease_duration_ms / 1000));
    if (ld_kube_lease_delete_start(s->c.kube, s->c.namespace_, old->name, old->uid,
                                   old->resource_version, s->c.renew_deadline_ms,
                                   on_cleaned, s, &s->clean_call, &err) != LD_OK) {
        ld_log(LD_LOG_WARN, "cannot delete member Lease %s: %s", old->name, err.msg);
        return;
    }
    s->cleaning = true;
}

/* ---- listing the group --------------------------------------------------- */

static void assign(struct ld_shardhost *s, int64_t now_ms);

static bool every_shard_held(const struct ld_shardhost *s)
{
    for (uint32_t k = 0; k < s->n; k++) {
        const struct ld_lease *rec = ld_shardgroup_record(s->group, k);
        if (!rec || !rec->spec.holder || !rec->spec.holder[0])
            return false;
    }
    return true;
}

static void on_listed(void *ctx, ld_kube_call call, enum ld_err rc,
                      const struct ld_lease *items, size_t n, const char *list_rv,
                      const struct ld_errinfo *err)
{
    struct ld_shardhost *s = ctx;
    int64_t now_ms = ld_clock_mono_ms(&s->clock);
    (void)call;
    s->listing = false;
    if (rc != LD_OK) {
        ld_log(LD_LOG_WARN, "listing the group's Leases failed: %s",
               err && err->msg[0] ? err->msg : ld_strerror(rc));
        return;
    }
    bool *was = calloc(n ? n : 1, sizeof(*was));
    for (size_t i = 0; was && i < n; i++)
        was[i] = incompatible(s, &items[i]);
    if (ld_shardgroup_observe_list(s->group, items, n, list_rv, now_ms) != LD_OK)
        ld_log(LD_LOG_WARN, "listing the group: not every Lease kept");
    /* A list is one snapshot taken after it was sent: the view now holds
     * everything stored before then, also what a gap of the watch hid. */
    ld_shardgroup_confirm(s->group, s->list_started_ms);
    if (s->watch_gap && s->list_started_ms >= s->watch_gap_since_ms)
        s->watch_gap = false;
    for (size_t i = 0; was && i < n; i++)
        note_incompatible(s, &items[i], was[i]);
    free(was);
    if (s->join_list && s->member_live && s->list_started_ms >= s->live_since_ms) {
        s->join_list = false;
        s->join_held = every_shard_held(s);
    }
    /* One consistent snapshot: the takeovers that need one go now, before
     * any other answer can mix newer records with older ones. */
    s->want_read = false;
    assign(s, now_ms);
    act(s, now_ms, true);
}

/* Without the watch (failing, or not started yet) other members would
 * expire in this replica's view and it would think itself alone, so the
 * group is listed instead; a takeover that needs a snapshot lists too. */
static void poll_group(struct ld_shardhost *s, int64_t now_ms)
{
    bool due = (!s->watch_healthy || s->watch_silent || s->join_list || s->watch_gap) &&
               now_ms >= s->next_list_ms;
    bool read = s->want_read && now_ms >= s->next_read_ms;
    if (s->listing || s->stopping || !(due || read))
        return;

    struct ld_errinfo err;
    if (due)
        s->next_list_ms = now_ms + s->c.retry_period_ms;
    s->next_read_ms = now_ms + s->c.retry_period_ms / 2;
    if (ld_kube_lease_list_start(s->c.kube, s->c.namespace_,
                                 ld_shardgroup_selector(s->group), s->c.renew_deadline_ms,
                                 on_listed, s, &s->list_call, &err) != LD_OK) {
        ld_log(LD_LOG_WARN, "cannot list the group's Leases: %s", err.msg);
        return;
    }
    s->listing = true;
    s->list_started_ms = now_ms;
}

static void assign(struct ld_shardhost *s, int64_t now_ms)
{
    int64_t next = INT64_MAX;
    if (ld_shardgroup_assign(s->group, now_ms, &next) != LD_OK) {
        ld_log(LD_LOG_WARN, "shard assignment: out of memory; trying again");
        s->reassess_at_ms = now_ms + ENOMEM_RETRY_MS;
        return;
    }
    s->inputs_changed = false;
    s->reassess_at_ms = next;
    if (now_ms < s->contend_after_ms && s->contend_after_ms < s->reassess_at_ms)
        s->reassess_at_ms = s->contend_after_ms;
}

int64_t ld_shardhost_after_pass(struct ld_shardhost *s, int64_t now_ms)
{
    if (s->echo_rv && !s->watch_silent && s->watch_healthy &&
        now_ms - s->echo_since_ms > 2 * s->c.retry_period_ms) {
        ld_log(LD_LOG_WARN, "the group's watch has not shown our member renewals "
                            "for two retry periods; listing the group meanwhile");
        s->watch_silent = true;
        s->next_list_ms = now_ms;
    }
    if (s->inputs_changed || now_ms >= s->reassess_at_ms)
        assign(s, now_ms);
    /* A give-back stops the claim first: the consumer shows it before the
     * release is written. */
    bool may_give_back = !s->stopping && join_settled(s, now_ms);
    for (uint32_t k = 0; k < s->n && may_give_back; k++)
        if (!s->slots[k].writing && now_ms >= s->slots[k].next_try_ms &&
            ld_shardgroup_step(s->group, k, now_ms, false) == LD_SHARD_RELEASE)
            begin_give_back(s, k, now_ms);
    publish(s, now_ms);
    act(s, now_ms, false);
    poll_group(s, now_ms);
    clean_up(s, now_ms);
    int64_t at = check_stuck(s, now_ms);
    if (s->reassess_at_ms < at)
        at = s->reassess_at_ms;
    if (now_ms < s->stuck_until_ms && s->stuck_until_ms < at)
        at = s->stuck_until_ms; /* ld_shardhost_stuck ends then */
    for (uint32_t k = 0; k < s->n; k++) {
        if (s->slots[k].drain_until_ms < at)
            at = s->slots[k].drain_until_ms;
        if (s->slots[k].held_until_ms < at)
            at = s->slots[k].held_until_ms;
    }
    if (!s->listing && !s->stopping) {
        if ((!s->watch_healthy || s->watch_silent || s->join_list || s->watch_gap) &&
            s->next_list_ms < at)
            at = s->next_list_ms;
        if (s->want_read && s->next_read_ms < at)
            at = s->next_read_ms;
    }
    return at > now_ms ? at : now_ms + 1;
}

static uint64_t mix(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* How long the members must stay the same before a shard in use is given
 * to another (shardgroup.h): a lease duration, so that in a rolling update
 * the old replica's exit comes before any rebalance towards the new one;
 * but short enough that after a join the group is still balanced within
 * lease-duration + 4 x retry-period: the newcomer is seen live within a
 * retry period of joining (at once, usually), then this delay, the drain
 * and the new owner's take, with a retry period and a second to spare. */
static int64_t rebalance_delay(const struct ld_shardhost_config *c)
{
    int64_t budget = c->lease_duration_ms + 2 * c->retry_period_ms - c->drain_ms - 1000;
    if (budget < 0)
        return 0;
    return budget < c->lease_duration_ms ? budget : c->lease_duration_ms;
}

static enum ld_err make_group(struct ld_shardhost *s, struct ld_errinfo *err)
{
    struct ld_shardgroup_config gc = {
        .name = s->c.group,
        .identity = s->c.identity,
        .incarnation = s->c.incarnation,
        .names = s->c.names,
        .n_shards = s->c.n_shards,
        .pod_uid = s->c.pod_uid,
        .pod_name = s->c.pod_name,
        .lease_duration_ms = s->c.lease_duration_ms,
        .rebalance_delay_ms = rebalance_delay(&s->c),
        /* A shard Lease changed from outside is written again only once
         * whoever claimed it stopped (its view a lease duration old) and
         * its app had the drain. */
        .outside_wait_ms = s->c.lease_duration_ms + s->c.drain_ms,
    };
    s->group = ld_shardgroup_new(&gc, err);
    if (!s->group)
        return err->code;
    s->n = ld_shardgroup_count(s->group);
    s->slots = calloc(s->n, sizeof(*s->slots));
    if (!s->slots)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < s->n; k++) {
        s->slots[k].wanted_since_ms = INT64_MAX;
        s->slots[k].unwritable_until_ms = INT64_MIN;
        s->slots[k].drain_until_ms = INT64_MAX;
        s->slots[k].held_until_ms = INT64_MAX;
    }
    return LD_OK;
}

/* ---- shutting down ------------------------------------------------------- */

/* Every claim ends now; each shard Lease that names this replica is
 * released (with release_on_exit, and only when its member election
 * led), the writes in flight abandoned. */
void ld_shardhost_shutdown(struct ld_shardhost *s)
{
    int64_t now_ms = ld_clock_mono_ms(&s->clock);
    ld_log(LD_LOG_INFO, "shutting down: giving back every shard");
    s->stopping = true;
    s->stopping_since_ms = now_ms;
    s->led_at_stop = ld_shardgroup_leads(s->group, now_ms);
    if (s->listing)
        ld_kube_cancel(s->c.kube, s->list_call);
    s->listing = false;
    if (s->evicting)
        ld_kube_cancel(s->c.kube, s->evict_call);
    s->evicting = false;
    if (s->cleaning)
        ld_kube_cancel(s->c.kube, s->clean_call);
    s->cleaning = false;
    for (uint32_t k = 0; k < s->n; k++) {
        struct slot *sl = &s->slots[k];
        if (sl->writing)
            ld_kube_cancel(s->c.kube, sl->call);
        sl->writing = false;
        if (sl->reading)
            ld_kube_cancel(s->c.kube, sl->read_call);
        sl->reading = false;
        ld_shardgroup_give_back(s->group, k);
        const struct ld_lease *rec = ld_shardgroup_record(s->group, k);
        /* Only a replica whose member election led releases: one that stood
         * back from another process of its identity would otherwise wipe
         * that process's shards, whose records name the same identity. */
        if (s->c.release_on_exit && s->led_at_stop && rec &&
            ld_lease_held_by(rec, s->c.identity, s->c.incarnation))
            begin_give_back(s, k, now_ms);
        else
            end_drain(s, k);
    }
    publish(s, now_ms);
}

/* A graceful exit's releases: each shard whose drain is over and whose
 * release the consumer does not hold is released now; one given up is never written.
 * Returns the earliest end of a drain or a hold still running, INT64_MAX
 * when none is. */
static int64_t exit_releases(struct ld_shardhost *s, int64_t now_ms)
{
    int64_t next = INT64_MAX;
    for (uint32_t k = 0; k < s->n; k++) {
        struct slot *sl = &s->slots[k];
        if (sl->drain_until_ms == INT64_MAX || sl->writing)
            continue;
        if (!drain_over(s, k, now_ms)) {
            if (sl->drain_until_ms < next)
                next = sl->drain_until_ms;
            continue;
        }
        enum ld_shardhost_verdict hold = release_hold(s, k, now_ms);
        if (hold == LD_SHARDHOST_RELEASE_WAIT && sl->held_until_ms < next)
            next = sl->held_until_ms;
        if (hold == LD_SHARDHOST_RELEASE_NEVER) {
            s->release_given_up = true;
            end_drain(s, k);
        }
        if (hold != LD_SHARDHOST_RELEASE_NOW)
            continue;
        release(s, k);
        if (!sl->writing)
            end_drain(s, k); /* could not even start: nothing to wait for */
    }
    return next;
}

static bool writes_in_flight(const struct ld_shardhost *s)
{
    for (uint32_t k = 0; k < s->n; k++)
        if (s->slots[k].writing)
            return true;
    return false;
}

static void on_deleted(void *ctx, ld_kube_call call, enum ld_err rc,
                       struct ld_lease *lease, const struct ld_errinfo *err)
{
    struct ld_shardhost *s = ctx;
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

/* The member Lease's release, once the shards' are written: a
 * compare-and-swap of the Lease as read now, only while it still names
 * this replica (not after an eviction, nor one it stood back from for an
 * identity conflict: it did not lead then), with release_on_exit. Blocks,
 * bounded by the client's timeout. */
static void release_member(struct ld_shardhost *s)
{
    struct ld_lease cur, out;
    struct ld_errinfo err;
    ld_lease_init(&cur);
    ld_lease_init(&out);
    if (!s->c.release_on_exit || !s->led_at_stop)
        return;
    const char *name = ld_shardgroup_member_lease(s->group);
    enum ld_err rc = ld_kube_lease_get(s->c.kube, s->c.namespace_, name, &cur, &err);
    /* Evicted meanwhile, or taken over by another process of our
     * identity: no longer ours. */
    if (rc == LD_OK && !ld_lease_held_by(&cur, s->c.identity, s->c.incarnation))
        goto done;
    if (rc == LD_OK)
        rc = ld_lease_spec_set_holder(&cur.spec, "");
    if (rc == LD_OK)
        rc = ld_lease_set_incarnation(&cur, NULL);
    if (rc == LD_OK) {
        int64_t wall = ld_clock_wall_us(&s->clock);
        cur.spec.duration_s = 1;
        cur.spec.has_acquire = cur.spec.has_renew = true;
        cur.spec.acquire_us = cur.spec.renew_us = wall;
        rc = ld_kube_lease_update(s->c.kube, &cur, &out, &err);
    }
    if (rc != LD_OK) {
        ld_log(LD_LOG_WARN, "member Lease %s not released: %s", name,
               rc == LD_ENOMEM ? "out of memory" : err.msg);
        goto done;
    }
    ld_log(LD_LOG_INFO, "member Lease %s released", name);
    s->member_released = true;
    ld_text_set(&s->member_uid, out.uid);
    ld_text_set(&s->member_rv, out.resource_version);
done:
    ld_lease_clear(&cur);
    ld_lease_clear(&out);
}

/* The member Lease is deleted once every release was written (its own
 * release went out after the shards', which is when the others stop
 * counting this replica); only when this replica released it (so not with
 * release_on_exit false, nor after standing back from another process of
 * its identity), and with preconditions that keep a Lease someone else
 * wrote since (a new Pod of the same name). Bounded by call_timeout_ms. */
static void delete_member(struct ld_shardhost *s)
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

/* The host returns once the member election is done, before another
 * after_pass: the shards' releases are waited for (bounded), the last
 * claims published, and then the member Lease released and deleted, unless
 * a shard's release was given up: the member Lease then expires by itself
 * (or is evicted), and nobody takes that shard before. */
void ld_shardhost_finish(struct ld_shardhost *s, int wake_fd)
{
    int64_t now_ms = ld_clock_mono_ms(&s->clock);
    int64_t wait =
        s->c.drain_ms > s->c.renew_deadline_ms ? s->c.drain_ms : s->c.renew_deadline_ms;
    int64_t until = now_ms + wait + s->c.call_timeout_ms + 1000;
    int64_t now;
    while ((now = ld_clock_mono_ms(&s->clock)) < until) {
        int64_t next = exit_releases(s, now);
        if (next == INT64_MAX && !writes_in_flight(s))
            break;
        if (next > until)
            next = until;
        /* The consumer's fd ends the wait for a drained shard or a hold. */
        ld_transport_run(ld_kube_transport(s->c.kube), next > now ? next - now : 0,
                         wake_fd);
        if (s->c.ops.take_wake)
            s->c.ops.take_wake(s->c.ops.ctx);
    }
    for (uint32_t k = 0; k < s->n; k++) {
        if (s->slots[k].writing)
            ld_kube_cancel(s->c.kube, s->slots[k].call);
        s->slots[k].writing = false;
        end_drain(s, k);
    }
    publish(s, ld_clock_mono_ms(&s->clock));
    if (s->release_given_up) {
        ld_log(LD_LOG_WARN,
               "member Lease %s left to expire: a shard's release was "
               "given up",
               ld_shardgroup_member_lease(s->group));
        return;
    }
    release_member(s);
    delete_member(s);
}

/* ---- the host's callbacks ------------------------------------------------ */

void ld_shardhost_on_publish(struct ld_shardhost *s, const struct ld_host_view *v,
                             int64_t now_ms)
{
    s->inputs_changed = true;
    if (v->index == s->member)
        observe_member(s, v, now_ms);
}

void ld_shardhost_on_event(struct ld_shardhost *s, size_t index,
                           const struct ld_event *ev)
{
    if (index != s->member)
        return;
    /* Whatever made it stop, the claims of this term end with it. */
    if (ev->kind == LD_EV_STOPPED_LEADING)
        ld_shardgroup_break(s->group);
    s->inputs_changed = true;
}

/* The member release frees every shard whose record names this replica at
 * once (the others count it gone), so it waits while the consumer holds
 * any shard's release, and is never written when it gives one up. */
bool ld_shardhost_member_holds_release(struct ld_shardhost *s, int64_t now_ms,
                                       bool *never)
{
    const struct ld_shardhost_bounds b = {.term_until_ms = INT64_MAX,
                                          .stopping_since_ms = INT64_MIN};
    bool held = false;
    *never = false;
    for (uint32_t k = 0; k < s->n; k++) {
        if (s->slots[k].shown_claimed) {
            publish(s, now_ms); /* the claims' end goes out first */
            break;
        }
    }
    for (uint32_t k = 0; k < s->n; k++) {
        int64_t until;
        const char *why;
        enum ld_shardhost_verdict v = verdict(s, k, &b, now_ms, &until, &why);
        held |= v == LD_SHARDHOST_RELEASE_WAIT;
        *never |= v == LD_SHARDHOST_RELEASE_NEVER;
    }
    return held;
}

static void member_publish(void *ctx, const struct ld_host_view *v, int64_t now_ms)
{
    ld_shardhost_on_publish(ctx, v, now_ms);
}

static void member_event(void *ctx, size_t index, const struct ld_event *ev)
{
    ld_shardhost_on_event(ctx, index, ev);
}

static bool member_holds(void *ctx, size_t index, int64_t now_ms)
{
    struct ld_shardhost *s = ctx;
    bool never;
    bool held = ld_shardhost_member_holds_release(s, now_ms, &never);
    if (never)
        ld_host_abandon_release(s->host, index);
    return held && !never;
}

struct ld_host_election_ops ld_shardhost_member_ops(struct ld_shardhost *s)
{
    return (struct ld_host_election_ops){.ctx = s,
                                         .on_publish = member_publish,
                                         .on_event = member_event,
                                         .holds_release = member_holds};
}

static void observer_started(void *ctx, bool from_current)
{
    struct ld_shardhost *s = ctx;
    ld_shardhost_on_watch_started(s, from_current, ld_clock_mono_ms(&s->clock));
}

static void observer_event(void *ctx, const struct ld_watch_event *ev, int64_t now_ms)
{
    ld_shardhost_on_lease_event(ctx, ev, now_ms);
}

static int64_t observer_after_pass(void *ctx, int64_t now_ms)
{
    return ld_shardhost_after_pass(ctx, now_ms);
}

struct ld_host_observer ld_shardhost_observer(struct ld_shardhost *s)
{
    return (struct ld_host_observer){.ctx = s,
                                     .watch_started = observer_started,
                                     .lease_event = observer_event,
                                     .after_pass = observer_after_pass};
}

/* ---- construction -------------------------------------------------------- */

struct ld_shardhost *ld_shardhost_new(const struct ld_shardhost_config *cfg,
                                      struct ld_errinfo *err)
{
    struct ld_shardhost *s = calloc(1, sizeof(*s));
    if (!s) {
        ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        return NULL;
    }
    s->c = *cfg;
    s->clock = ld_clock_or_real(cfg->clock);
    s->reassess_at_ms = INT64_MAX;
    s->member_term_until_ms = INT64_MIN;
    s->stopping_since_ms = INT64_MIN;
    if (make_group(s, err) != LD_OK) {
        ld_shardhost_free(s);
        return NULL;
    }
    return s;
}

void ld_shardhost_free(struct ld_shardhost *s)
{
    if (!s)
        return;
    if (s->listing)
        ld_kube_cancel(s->c.kube, s->list_call);
    if (s->evicting)
        ld_kube_cancel(s->c.kube, s->evict_call);
    if (s->cleaning)
        ld_kube_cancel(s->c.kube, s->clean_call);
    for (uint32_t k = 0; s->slots && k < s->n; k++) {
        if (s->slots[k].writing)
            ld_kube_cancel(s->c.kube, s->slots[k].call);
        if (s->slots[k].reading)
            ld_kube_cancel(s->c.kube, s->slots[k].read_call);
        free(s->slots[k].rv_before);
    }
    free(s->evict_rv);
    free(s->slots);
    ld_shardgroup_free(s->group);
    free(s->member_uid);
    free(s->member_rv);
    free(s->echo_rv);
    free(s->shown_rv);
    for (unsigned i = 0; i < SENT_RENEWALS; i++)
        free(s->sent[i].rv);
    free(s);
}

const char *ld_shardhost_selector(const struct ld_shardhost *s)
{
    return ld_shardgroup_selector(s->group);
}

void ld_shardhost_member_config(const struct ld_shardhost *s,
                                struct ld_election_config *ec)
{
    *ec = (struct ld_election_config){
        .namespace_ = s->c.namespace_,
        .name = ld_shardgroup_member_lease(s->group),
        .identity = s->c.identity,
        .incarnation = s->c.incarnation,
        .lease_duration_ms = s->c.lease_duration_ms,
        .renew_deadline_ms = s->c.renew_deadline_ms,
        .retry_period_ms = s->c.retry_period_ms,
        /* Released by the shard host itself, after the shards' releases. */
        .release_on_exit = false,
        /* Nobody else may hold it: no hand-over to anyone. */
        .ignore_preferred_holder = true,
        .seed = mix(s->c.seed, 0),
        .create_metadata = ld_shardgroup_member_metadata(s->group),
        .own_annotations = ld_shardgroup_member_annotations(s->group),
    };
}

void ld_shardhost_attach(struct ld_shardhost *s, struct ld_host *host,
                         size_t member_index)
{
    s->host = host;
    s->member = member_index;
}

/* ---- reading the state --------------------------------------------------- */

const struct ld_shardgroup *ld_shardhost_group(const struct ld_shardhost *s)
{
    return s->group;
}

uint32_t ld_shardhost_count(const struct ld_shardhost *s)
{
    return s->n;
}

uint32_t ld_shardhost_members(struct ld_shardhost *s, int64_t now_ms,
                              const char *const **members)
{
    return ld_shardgroup_members(s->group, now_ms, members);
}

bool ld_shardhost_unwritable(const struct ld_shardhost *s, uint32_t k)
{
    return s->slots[k].unwritable_until_ms != INT64_MIN;
}

int64_t ld_shardhost_wanted_since(const struct ld_shardhost *s, uint32_t k)
{
    return s->slots[k].wanted_since_ms;
}

struct ld_shardhost_member ld_shardhost_member(const struct ld_shardhost *s)
{
    return (struct ld_shardhost_member){.observed = s->member_observed,
                                        .live = s->member_live,
                                        .term_until_ms = s->member_term_until_ms};
}

const char *ld_shardhost_stuck(const struct ld_shardhost *s, int64_t now_ms)
{
    return now_ms < s->stuck_until_ms ? s->stuck : NULL;
}
