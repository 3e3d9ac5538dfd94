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
#include "text.h"

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
static void update_entry(struct ld_shard_table *tb, uint32_t k, int64_t now_ms)
{
    struct slot *sl = &tb->slots[k];
    const struct ld_lease *rec = ld_shardgroup_record(tb->group, k);
    bool claimed = ld_shardgroup_claimed(tb->group, k, now_ms);
    struct ld_shard_entry next = {
        .term = rec ? rec->spec.transitions : 0,
        .observed = ld_shardgroup_shard_observed(tb->group, k),
        .leading = claimed,
        /* Claimed or not, nobody else takes it while its record names us
         * and our member term lasts (the table's term_until_ms). */
        .in_term = claimed || ld_shardgroup_named(tb->group, k),
        .unwritable = ld_shardhost_unwritable(tb->c.sh, k),
        .skipped = ld_shardgroup_skipped(tb->group, k),
        .has_renewed_at = rec && rec->spec.has_renew,
        .renewed_at_us = rec && rec->spec.has_renew ? rec->spec.renew_us : 0,
        .last_renew_wall_us = tb->entries[k].last_renew_wall_us,
    };
    const char *holder = rec ? rec->spec.holder : "";
    if (claimed && !sl->was_claimed)
        next.last_renew_wall_us = ld_clock_wall_us(&tb->clock);
    if (claimed != sl->was_claimed) {
        ld_log(LD_LOG_INFO, "shard %s: %s", ld_shardgroup_shard_id(tb->group, k),
               claimed ? "claimed" : "no longer claimed");
        int64_t since = ld_shardhost_wanted_since(tb->c.sh, k);
        if (claimed && tb->c.metrics && since != INT64_MAX)
            ld_metrics_acquire_delay(tb->c.metrics, (double)(now_ms - since) / 1000.0);
    }
    /* Compared before ld_text_set frees the text the entry still points to. */
    bool new_leader = !sl->leader || strcmp(sl->leader, holder) != 0;
    if (new_leader) {
        if (sl->leader)
            sl->transitions_seen++;
        ld_text_set(&sl->leader, holder);
    }
    sl->was_claimed = claimed;
    next.leader = sl->leader ? sl->leader : "";
    struct ld_shard_entry *e = &tb->entries[k];
    if (new_leader || e->term != next.term || e->observed != next.observed ||
        e->leading != next.leading || e->in_term != next.in_term ||
        e->unwritable != next.unwritable || e->skipped != next.skipped ||
        e->has_renewed_at != next.has_renewed_at ||
        e->renewed_at_us != next.renewed_at_us ||
        e->last_renew_wall_us != next.last_renew_wall_us)
        tb->changed = true;
    *e = next;
    struct ld_election_status st = {
        .observed = next.observed,
        .leader = next.leader,
        .term = (int32_t)next.term,
        .leading = next.leading,
        .lead_until_ms = claimed ? ld_shardgroup_lead_until(tb->group) : 0,
        .uid = rec ? rec->uid : NULL,
    };
    if (tb->c.on_entry)
        tb->c.on_entry(tb->c.ctx, k, &st, now_ms);
}

/* A new shard table when an entry, the live members or the claims'
 * deadline changed, NULL when nothing did. A new deadline alone (a member
 * renewal) extends the last table instead of copying every entry. When
 * memory runs out, the table that says nothing is known (the next pass
 * tries again). */
struct ld_shardsnap *ld_shard_table_update(struct ld_shard_table *tb, int64_t now_ms)
{
    const char *const *members = NULL;
    bool claims = false, in_term = false;
    for (uint32_t k = 0; k < tb->n; k++) {
        update_entry(tb, k, now_ms);
        claims |= tb->entries[k].leading;
        in_term |= tb->entries[k].in_term;
    }
    uint32_t nm = ld_shardhost_members(tb->c.sh, now_ms, &members);
    /* Every claim ends with the member election's lead; with none, 0, so
     * that a renewal of a replica that claims nothing changes no table. */
    int64_t until = claims ? ld_shardgroup_lead_until(tb->group) : 0;
    struct ld_shardhost_member m = ld_shardhost_member(tb->c.sh);
    int64_t term_until = in_term ? m.term_until_ms : 0;
    bool observed = m.observed && ld_shardgroup_observed(tb->group);
    bool same = !tb->changed && !members_differ(tb->last, members, nm) &&
                tb->last->observed == observed;
    if (same && tb->last->claims_until_ms == until &&
        tb->last->term_until_ms == term_until)
        return NULL;
    struct ld_shardsnap *t =
        same ? ld_shardsnap_extend(tb->last, until)
             : ld_shardsnap_new(observed, until, tb->entries, tb->n, members, nm);
    if (!t) {
        ld_log(LD_LOG_WARN, "out of memory for the shard table; showing none");
        t = ld_shardsnap_ref(tb->unknown);
    } else {
        t->term_until_ms = term_until; /* not yet published: still ours */
        tb->changed = false;
    }
    ld_shardsnap_unref(tb->last);
    tb->last = ld_shardsnap_ref(t);
    return t;
}

struct ld_shard_table *ld_shard_table_new(const struct ld_shard_table_config *cfg,
                                          struct ld_errinfo *err)
{
    struct ld_shard_table *tb = calloc(1, sizeof(*tb));
    if (!tb)
        goto fail;
    tb->c = *cfg;
    tb->clock = ld_clock_or_real(cfg->clock);
    tb->group = ld_shardhost_group(cfg->sh);
    tb->n = ld_shardhost_count(cfg->sh);
    tb->slots = calloc(tb->n, sizeof(*tb->slots));
    tb->entries = calloc(tb->n, sizeof(*tb->entries));
    if (!tb->slots || !tb->entries)
        goto fail;
    for (uint32_t k = 0; k < tb->n; k++)
        tb->entries[k].leader = "";
    tb->unknown = ld_shardsnap_new(false, 0, tb->entries, tb->n, NULL, 0);
    if (!tb->unknown)
        goto fail;
    return tb;
fail:
    ld_shard_table_free(tb);
    ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    return NULL;
}

void ld_shard_table_free(struct ld_shard_table *tb)
{
    if (!tb)
        return;
    for (uint32_t k = 0; tb->slots && k < tb->n; k++)
        free(tb->slots[k].leader);
    free(tb->slots);
    free(tb->entries);
    ld_shardsnap_unref(tb->last);
    ld_shardsnap_unref(tb->unknown);
    free(tb);
}

void ld_shard_table_touch(struct ld_shard_table *tb)
{
    tb->changed = true;
}

const struct ld_shard_entry *ld_shard_table_entry(const struct ld_shard_table *tb,
                                                  uint32_t k)
{
    return &tb->entries[k];
}

uint64_t ld_shard_table_transitions(const struct ld_shard_table *tb)
{
    uint64_t t = 0;
    for (uint32_t k = 0; k < tb->n; k++)
        t += (uint64_t)tb->slots[k].transitions_seen;
    return t;
}
