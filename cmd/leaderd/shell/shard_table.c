/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shard_table: the shard table from the shard host's view (see
 * shard_table.h).
 */
#include "shard_table.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* One shard's strings and counts behind its entry. */
struct slot {
    char *leader; /* owned; the shard's entry points here */
    int64_t transitions_seen;
    bool was_claimed; /* at the last update, for the log and the counts */
};

struct ld_shard_table {
    struct ld_shard_table_config c;
    struct ld_clock clock;
    const struct ld_shardgroup *group;
    uint32_t n;
    struct slot *slots;
    struct ld_shard_entry *entries; /* as the table shows them */
    struct ld_shardsnap *last;      /* the last table made (a reference) */
    /* Made at start: every shard unobserved and not led. Returned when a
     * new table cannot be built, so that readers never keep a table that
     * still shows a shard this replica has since given back. */
    struct ld_shardsnap *unknown;
    bool changed; /* an entry changed since the last table */
};

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

/* Shard k's entry from the group's view: the observed record, and our
 * claim, which lasts as long as the member election's lead. */
static void update_entry(struct ld_shard_table *s, uint32_t k, int64_t now_ms)
{
    struct slot *sl = &s->slots[k];
    const struct ld_lease *rec = ld_shardgroup_record(s->group, k);
    bool claimed = ld_shardgroup_claimed(s->group, k, now_ms);
    struct ld_shard_entry next = {
        .term = rec ? rec->spec.transitions : 0,
        .observed = ld_shardgroup_shard_observed(s->group, k),
        .leading = claimed,
        /* Claimed or not, nobody else takes it while its record names us
         * and our member term lasts (the table's term_until_ms). */
        .in_term = claimed || ld_shardgroup_named(s->group, k),
        .unwritable = ld_shardhost_unwritable(s->c.sh, k),
        .skipped = ld_shardgroup_skipped(s->group, k),
        .has_renewed_at = rec && rec->spec.has_renew,
        .renewed_at_us = rec && rec->spec.has_renew ? rec->spec.renew_us : 0,
        .last_renew_wall_us = s->entries[k].last_renew_wall_us,
    };
    const char *holder = rec ? rec->spec.holder : "";
    if (claimed && !sl->was_claimed)
        next.last_renew_wall_us = ld_clock_wall_us(&s->clock);
    if (claimed != sl->was_claimed) {
        ld_log(LD_LOG_INFO, "shard %s: %s", ld_shardgroup_shard_id(s->group, k),
               claimed ? "claimed" : "no longer claimed");
        int64_t since = ld_shardhost_wanted_since(s->c.sh, k);
        if (claimed && s->c.metrics && since != INT64_MAX)
            ld_metrics_acquire_delay(s->c.metrics, (double)(now_ms - since) / 1000.0);
    }
    /* Compared before set_str frees the text the entry still points to. */
    bool new_leader = !sl->leader || strcmp(sl->leader, holder) != 0;
    if (new_leader) {
        if (sl->leader)
            sl->transitions_seen++;
        set_str(&sl->leader, holder);
    }
    sl->was_claimed = claimed;
    next.leader = sl->leader ? sl->leader : "";
    struct ld_shard_entry *e = &s->entries[k];
    if (new_leader || e->term != next.term || e->observed != next.observed ||
        e->leading != next.leading || e->in_term != next.in_term ||
        e->unwritable != next.unwritable || e->skipped != next.skipped ||
        e->has_renewed_at != next.has_renewed_at ||
        e->renewed_at_us != next.renewed_at_us ||
        e->last_renew_wall_us != next.last_renew_wall_us)
        s->changed = true;
    *e = next;
    struct ld_election_status st = {
        .observed = next.observed,
        .leader = next.leader,
        .term = (int32_t)next.term,
        .leading = next.leading,
        .lead_until_ms = claimed ? ld_shardgroup_lead_until(s->group) : 0,
        .uid = rec ? rec->uid : NULL,
    };
    if (s->c.on_entry)
        s->c.on_entry(s->c.ctx, k, &st, now_ms);
}

/* A new shard table when an entry, the live members or the claims'
 * deadline changed, NULL when nothing did. A new deadline alone (a member
 * renewal) extends the last table instead of copying every entry. When
 * memory runs out, the table that says nothing is known (the next pass
 * tries again). */
struct ld_shardsnap *ld_shard_table_update(struct ld_shard_table *s, int64_t now_ms)
{
    const char *const *members = NULL;
    bool claims = false, in_term = false;
    for (uint32_t k = 0; k < s->n; k++) {
        update_entry(s, k, now_ms);
        claims |= s->entries[k].leading;
        in_term |= s->entries[k].in_term;
    }
    uint32_t nm = ld_shardhost_members(s->c.sh, now_ms, &members);
    /* Every claim ends with the member election's lead; with none, 0, so
     * that a renewal of a replica that claims nothing changes no table. */
    int64_t until = claims ? ld_shardgroup_lead_until(s->group) : 0;
    struct ld_shardhost_member m = ld_shardhost_member(s->c.sh);
    int64_t term_until = in_term ? m.term_until_ms : 0;
    bool observed = m.observed && ld_shardgroup_observed(s->group);
    bool same = !s->changed && !members_differ(s->last, members, nm) &&
                s->last->observed == observed;
    if (same && s->last->claims_until_ms == until && s->last->term_until_ms == term_until)
        return NULL;
    struct ld_shardsnap *t =
        same ? ld_shardsnap_extend(s->last, until)
             : ld_shardsnap_new(observed, until, s->entries, s->n, members, nm);
    if (!t) {
        ld_log(LD_LOG_WARN, "out of memory for the shard table; showing none");
        t = ld_shardsnap_ref(s->unknown);
    } else {
        t->term_until_ms = term_until; /* not yet published: still ours */
        s->changed = false;
    }
    ld_shardsnap_unref(s->last);
    s->last = ld_shardsnap_ref(t);
    return t;
}

struct ld_shard_table *ld_shard_table_new(const struct ld_shard_table_config *cfg,
                                          struct ld_errinfo *err)
{
    struct ld_shard_table *s = calloc(1, sizeof(*s));
    if (!s)
        goto fail;
    s->c = *cfg;
    s->clock = ld_clock_or_real(cfg->clock);
    s->group = ld_shardhost_group(cfg->sh);
    s->n = ld_shardhost_count(cfg->sh);
    s->slots = calloc(s->n, sizeof(*s->slots));
    s->entries = calloc(s->n, sizeof(*s->entries));
    if (!s->slots || !s->entries)
        goto fail;
    for (uint32_t k = 0; k < s->n; k++)
        s->entries[k].leader = "";
    s->unknown = ld_shardsnap_new(false, 0, s->entries, s->n, NULL, 0);
    if (!s->unknown)
        goto fail;
    return s;
fail:
    ld_shard_table_free(s);
    ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    return NULL;
}

void ld_shard_table_free(struct ld_shard_table *s)
{
    if (!s)
        return;
    for (uint32_t k = 0; s->slots && k < s->n; k++)
        free(s->slots[k].leader);
    free(s->slots);
    free(s->entries);
    ld_shardsnap_unref(s->last);
    ld_shardsnap_unref(s->unknown);
    free(s);
}

void ld_shard_table_touch(struct ld_shard_table *s)
{
    s->changed = true;
}

const struct ld_shard_entry *ld_shard_table_entry(const struct ld_shard_table *s,
                                                  uint32_t k)
{
    return &s->entries[k];
}

uint64_t ld_shard_table_transitions(const struct ld_shard_table *s)
{
    uint64_t t = 0;
    for (uint32_t k = 0; k < s->n; k++)
        t += (uint64_t)s->slots[k].transitions_seen;
    return t;
}
