/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardgroup: names and metadata of a shard group, the member table kept
 * from observations, and the per-shard contend decision. See shardgroup.h.
 */
#include "shardgroup.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "dnsname.h"
#include "hash.h"
#include "lead.h"
#include "shardassign.h"
#include "shardlayout.h"

#define MEMBER_INFIX "-member-"
#define NAMED_RESERVED "member-"
/* Kubernetes object uids are UUIDs; this is generous and keeps the JSON
 * plain ASCII. */
#define UID_MAX 128
#define GONE_UIDS 16

struct member {
    char *identity;      /* owned; from the Lease name */
    struct ld_lease rec; /* owned compact copy of the record seen */
    int64_t changed_ms;  /* when the record last changed, as seen here */
    bool seen_change;    /* a change was seen: only then may it count live */
    bool compatible;     /* carries the protocol annotation */
    char *unwritable;    /* owned; its LD_SHARDGROUP_UNWRITABLE, NULL when "" */
    /* Names nobody by a replica's eviction (LD_SHARDGROUP_EVICTED_AT
     * matches its renewTime), not by a hand edit: see evicted_record. */
    bool evicted;
    bool mark; /* scratch of ld_shardgroup_observe_list */
};

struct shard {
    char *metadata;      /* owned JSON */
    struct ld_lease rec; /* owned compact copy; meaningful while present */
    bool present;
    bool observed;
    /* Since when the holder (absent_of) has had no member record, as
     * judged by the last assignment; INT64_MAX when not counting. */
    int64_t absent_since_ms;
    char *absent_of; /* owned; the holder absent_since_ms is about */
    bool claimed;    /* our last write succeeded and named us */
    uint64_t claim_term;
    /* The claim counts from then on (rule O9): INT64_MIN, or for a claim
     * written on a record marked LD_SHARDGROUP_NEW_OBJECT, uid_seen_ms +
     * outside_wait_ms. */
    int64_t claim_from_ms;
    /* When this replica first saw the object (its uid) the record is of;
     * INT64_MAX while absent. */
    int64_t uid_seen_ms;
    bool own_unwritable; /* this replica cannot write it */
    bool skipped;        /* no live member can write it: ld_shardgroup_skipped */
    bool giving_back;
    /* The record was read by name and lacks the group's label: lists and
     * the watch cannot show it, so a list does not make it absent. */
    bool unlisted;
    /* The record (or the absence of one) is the last list's, so it is as
     * old as the member table that list left: a takeover judged on the
     * holder's member record needs that. A newer record (the watch's, an
     * answer's) with an older member table could pair a holder's rewrite
     * of the shard with its member Lease not yet seen again. */
    bool from_list;
    /* Since when the shard has been seen deleted, made anew or rewritten
     * from outside (ld_shardgroup_config.outside_wait_ms); INT64_MAX: not. */
    int64_t outside_since_ms;
    bool mark; /* scratch of ld_shardgroup_observe_list */
};

struct ld_shardgroup {
    /* The names and ranges (one reference): readers may hold it longer. */
    struct ld_shardlayout *layout;
    char *label_value; /* of LD_SHARDGROUP_LABEL: see group_label_value */
    char *identity;
    char *incarnation; /* NULL: none given */
    char *selector;
    char *member_selector;
    char *member_lease;
    char *member_metadata;
    char *shard_set;          /* LD_SHARDGROUP_SHARD_SET of this replica */
    char *member_annotations; /* {LD_SHARDGROUP_SHARD_SET: shard_set} */
    char *member_prefix;      /* "NAME-member-" */
    uint32_t n_shards;
    struct shard *shards;
    int64_t lease_duration_ms;
    int64_t rebalance_delay_ms;
    int64_t outside_wait_ms; /* 0: the rules of issue #28 are off */
    /* The view holds everything stored before this time (local monotonic):
     * a list sent then, or the watch showing our member renewal sent then
     * (ld_shardgroup_confirm). */
    int64_t confirmed_ms;

    bool own_leading;
    int64_t own_until_ms;
    int32_t own_transitions;
    char *own_uid;
    int64_t own_joined_us; /* acquireTime of our member Lease as last seen */
    /* From when no earlier process of our identity can claim anything:
     * ld_election_status.predecessors_over_ms of our member election. */
    int64_t own_predecessors_over_ms;
    uint64_t term; /* the member term: see ld_shardgroup_observe_own */
    bool listed;   /* a list of the group has been observed */
    /* A member record was not kept (table full): an absent record then
     * proves nothing. */
    bool overflow;
    /* A member record was dropped to make room, or not added for want of
     * memory, since the last list: a record that appears now may be an old
     * one seen again, not a new one. */
    bool lossy;

    struct member *members; /* other replicas, unordered */
    /* uids of member Leases seen deleted: a list that was answered before
     * a deletion but arrives after it must not bring the member back. A
     * few suffice (a member leaves once, and a new Lease has a new uid). */
    char *gone_uids[GONE_UIDS];
    unsigned gone_next;
    uint32_t n_members, cap_members;

    /* Scratch rebuilt by each assign / members call; the live lists have
     * room for cap_members + 1 (ourselves). */
    const char **live;
    const char **owners;
    /* The shards no live member reports unwritable, which the assignment
     * function is run on: their holders, indexes and targets. */
    const char **kept_owners;
    uint32_t *kept_index;
    uint32_t *kept_target;
    uint32_t *target;
    bool *contend;
    const char **assigned_live; /* the live list target indexes into */
    int64_t *assigned_joined;   /* when each of them joined */
    struct live_entry *entries; /* sorting scratch of live_list */
    bool assigned;              /* target is from an assign after the last news */
    /* The live members of the last assignment (a hash of their names) and
     * since when they have been those: rebalancing waits for them to stay. */
    uint64_t members_hash;
    int64_t members_since_ms;
    bool members_known;
};

/* A live member and when it joined (its member Lease's acquireTime). */
struct live_entry {
    const char *identity;
    int64_t joined_us;
};

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...)
{
    va_list ap;
    char *out = NULL;
    va_start(ap, fmt);
    if (vasprintf(&out, fmt, ap) < 0)
        out = NULL;
    va_end(ap);
    return out;
}

/* ---- validation ---------------------------------------------------------- */

/* A name for a message: long ones (Lease names run to 253 bytes) are cut
 * to their first SHOWN_MAX bytes and "...", so the reason still fits. */
#define SHOWN_MAX 100
static const char *shown(const char *name, char buf[SHOWN_MAX + 4])
{
    snprintf(buf, SHOWN_MAX + 4, "%.*s%s", SHOWN_MAX, name,
             strlen(name) > SHOWN_MAX ? "..." : "");
    return buf;
}

static bool plain_uid(const char *uid)
{
    size_t n = strlen(uid);
    if (n > UID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = uid[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
              (c >= 'A' && c <= 'Z') || c == '-'))
            return false;
    }
    return true;
}

static enum ld_err check_config(const struct ld_shardgroup_config *cfg,
                                struct ld_errinfo *err)
{
    char buf[SHOWN_MAX + 4];
    if (!cfg->name || !cfg->name[0])
        return ld_errinfo_set(err, LD_EINVAL, "shard group: no lease name");
    if (!ld_dns1123_subdomain(cfg->name))
        return ld_errinfo_set(err, LD_EINVAL,
                              "lease name %s is not a valid Lease name "
                              "(DNS-1123 subdomain)",
                              shown(cfg->name, buf));
    if (!cfg->identity || !cfg->identity[0])
        return ld_errinfo_set(err, LD_EINVAL, "shard group: no identity");
    if (cfg->n_shards < 1 || cfg->n_shards > LD_SHARDGROUP_MAX_SHARDS)
        return ld_errinfo_set(err, LD_EINVAL, "--shards: %u shards, not 1 to %d",
                              (unsigned)cfg->n_shards, LD_SHARDGROUP_MAX_SHARDS);
    if (cfg->lease_duration_ms <= 0)
        return ld_errinfo_set(err, LD_EINVAL, "shard group: lease duration must be > 0");
    if (cfg->pod_uid && cfg->pod_uid[0] && !plain_uid(cfg->pod_uid))
        return ld_errinfo_set(err, LD_EINVAL, "POD_UID %.200s is not a Kubernetes uid",
                              cfg->pod_uid);
    for (uint32_t s = 0; cfg->names && s < cfg->n_shards; s++) {
        const char *id = cfg->names[s];
        if (!id || !ld_dns1123_label(id))
            return ld_errinfo_set(err, LD_EINVAL,
                                  "shard name %.200s is not a DNS-1123 label "
                                  "(a-z, 0-9, '-', at most 63 characters)",
                                  id ? id : "(null)");
        if (strncmp(id, NAMED_RESERVED, strlen(NAMED_RESERVED)) == 0)
            return ld_errinfo_set(err, LD_EINVAL,
                                  "shard name %.200s starts with \"" NAMED_RESERVED
                                  "\", which member Leases use",
                                  id);
        for (uint32_t t = 0; t < s; t++)
            if (strcmp(cfg->names[t], id) == 0)
                return ld_errinfo_set(err, LD_EINVAL, "shard name %.200s is given twice",
                                      id);
    }
    return LD_OK;
}

/* ---- construction -------------------------------------------------------- */

/* The group's label value: its name when that fits a label value (63
 * bytes), else the name's first LABEL_PREFIX bytes (without a trailing
 * '-' or '.') + "-" + FNV-1a64 of the whole name in hex, so that every
 * valid Lease name makes a group and two long names still differ. */
#define LABEL_PREFIX (LD_SHARDGROUP_NAME_MAX - 17)
static char *group_label_value(const char *name)
{
    size_t n = strlen(name);
    if (n <= LD_SHARDGROUP_NAME_MAX)
        return strdup(name);
    n = LABEL_PREFIX;
    while (n > 0 && (name[n - 1] == '-' || name[n - 1] == '.'))
        n--;
    return format("%.*s-%016llx", (int)n, name,
                  (unsigned long long)ld_fnv1a64(name, strlen(name)));
}

static char *metadata_json(const char *group, const char *shard_id, const char *pod,
                           const char *pod_uid)
{
    char *out = NULL;
    json_t *meta = NULL;
    json_t *labels = json_pack("{s:s}", LD_SHARDGROUP_LABEL, group);

    if (!labels)
        goto done;
    if (shard_id && json_object_set_new(labels, LD_SHARDGROUP_SHARD_LABEL,
                                        json_string(shard_id)) != 0)
        goto done;
    meta = json_pack("{s:O,s:{s:s}}", "labels", labels, "annotations",
                     LD_SHARDGROUP_PROTOCOL, LD_SHARDGROUP_PROTOCOL_VERSION);
    if (!meta)
        goto done;
    if (pod_uid && pod_uid[0]) {
        json_t *refs = json_pack("[{s:s,s:s,s:s,s:s}]", "apiVersion", "v1", "kind", "Pod",
                                 "name", pod, "uid", pod_uid);
        if (!refs || json_object_set_new(meta, "ownerReferences", refs) != 0)
            goto done;
    }
    out = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
done:
    json_decref(labels);
    json_decref(meta);
    return out;
}

/* LD_SHARDGROUP_SHARD_SET's value for a layout: see shardgroup.h. */
static char *shard_set_of(const struct ld_shardlayout *layout)
{
    if (layout->numbered)
        return format("numbered/%u", (unsigned)layout->n_shards);
    /* The names in order, each followed by ',' (no DNS label holds one). */
    size_t len = 0;
    for (uint32_t s = 0; s < layout->n_shards; s++)
        len += strlen(layout->shards[s].id) + 1;
    char *joined = malloc(len + 1), *end = joined;
    if (!joined)
        return NULL;
    for (uint32_t s = 0; s < layout->n_shards; s++)
        end += sprintf(end, "%s,", layout->shards[s].id);
    uint64_t h = ld_fnv1a64(joined, len);
    free(joined);
    return format("named/%u/%016llx", (unsigned)layout->n_shards, (unsigned long long)h);
}

/* The member election's own annotations (shardgroup.h), as JSON text
 * (owned), NULL when memory is short. */
static char *own_annotations(const struct ld_shardgroup *g)
{
    char *out = NULL, *ids = NULL;
    size_t len = 1;
    for (uint32_t s = 0; s < g->n_shards; s++)
        len += g->shards[s].own_unwritable ? strlen(g->layout->shards[s].id) + 1 : 0;
    ids = calloc(1, len);
    if (!ids)
        return NULL;
    size_t at = 0;
    for (uint32_t s = 0; s < g->n_shards; s++) {
        if (!g->shards[s].own_unwritable)
            continue;
        at += (size_t)snprintf(ids + at, len - at, "%s%s", at ? "," : "",
                               g->layout->shards[s].id);
    }
    json_t *ann = json_pack("{s:s,s:s}", LD_SHARDGROUP_SHARD_SET, g->shard_set,
                            LD_SHARDGROUP_UNWRITABLE, ids);
    if (ann)
        out = json_dumps(ann, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(ann);
    free(ids);
    return out;
}

static enum ld_err build_shards(struct ld_shardgroup *g, struct ld_errinfo *err)
{
    char buf[SHOWN_MAX + 4];
    for (uint32_t s = 0; s < g->n_shards; s++) {
        struct shard *sh = &g->shards[s];
        const char *lease = g->layout->shards[s].lease;
        sh->absent_since_ms = INT64_MAX;
        sh->outside_since_ms = INT64_MAX;
        sh->claim_from_ms = INT64_MIN;
        sh->uid_seen_ms = INT64_MAX;
        if (!ld_dns1123_subdomain(lease))
            return ld_errinfo_set(err, LD_EINVAL,
                                  "shard Lease name %s is not a valid Lease name "
                                  "(DNS-1123 subdomain, at most %d characters)",
                                  shown(lease, buf), LD_DNS1123_SUBDOMAIN_MAX);
        sh->metadata = metadata_json(g->label_value, g->layout->shards[s].id, NULL, NULL);
        if (!sh->metadata)
            return ld_errinfo_set(err, LD_ENOMEM, "shard group: out of memory");
    }
    return LD_OK;
}

static enum ld_err build(struct ld_shardgroup *g, const struct ld_shardgroup_config *cfg,
                         struct ld_errinfo *err)
{
    char buf[SHOWN_MAX + 4];
    g->layout = ld_shardlayout_new(cfg->name, cfg->names, cfg->n_shards);
    g->identity = strdup(cfg->identity);
    if (cfg->incarnation && cfg->incarnation[0] &&
        !(g->incarnation = strdup(cfg->incarnation)))
        return ld_errinfo_set(err, LD_ENOMEM, "shard group: out of memory");
    g->label_value = group_label_value(cfg->name);
    g->selector =
        g->label_value ? format(LD_SHARDGROUP_LABEL "=%s", g->label_value) : NULL;
    g->member_selector =
        g->selector ? format("%s,!" LD_SHARDGROUP_SHARD_LABEL, g->selector) : NULL;
    g->member_prefix = format("%s" MEMBER_INFIX, cfg->name);
    g->member_lease = format("%s" MEMBER_INFIX "%s", cfg->name, cfg->identity);
    g->shards = calloc(cfg->n_shards, sizeof(*g->shards));
    g->owners = calloc(cfg->n_shards, sizeof(*g->owners));
    g->target = calloc(cfg->n_shards, sizeof(*g->target));
    g->contend = calloc(cfg->n_shards, sizeof(*g->contend));
    g->kept_owners = calloc(cfg->n_shards, sizeof(*g->kept_owners));
    g->kept_index = calloc(cfg->n_shards, sizeof(*g->kept_index));
    g->kept_target = calloc(cfg->n_shards, sizeof(*g->kept_target));
    /* Room for our own identity in the live lists before any other member
     * is seen; reserve_member grows them with the table. */
    g->live = calloc(1, sizeof(*g->live));
    g->assigned_live = calloc(1, sizeof(*g->assigned_live));
    g->assigned_joined = calloc(1, sizeof(*g->assigned_joined));
    g->entries = calloc(1, sizeof(*g->entries));
    if (!g->layout || !g->identity || !g->label_value || !g->selector ||
        !g->member_selector || !g->member_prefix || !g->member_lease || !g->shards ||
        !g->owners || !g->target || !g->contend || !g->kept_owners || !g->kept_index ||
        !g->kept_target || !g->live || !g->assigned_live || !g->assigned_joined ||
        !g->entries)
        return ld_errinfo_set(err, LD_ENOMEM, "shard group: out of memory");
    g->n_shards = cfg->n_shards;
    g->lease_duration_ms = cfg->lease_duration_ms;
    g->rebalance_delay_ms = cfg->rebalance_delay_ms > 0 ? cfg->rebalance_delay_ms : 0;
    g->outside_wait_ms = cfg->outside_wait_ms > 0 ? cfg->outside_wait_ms : 0;
    g->confirmed_ms = INT64_MIN;
    /* Until our member record is seen (within a moment of joining, long
     * before a joining replica takes anything) we rank as the oldest. */
    g->own_joined_us = 0;
    g->own_until_ms = INT64_MIN;
    g->own_predecessors_over_ms = INT64_MAX;
    g->own_transitions = -1;
    if (!ld_dns1123_subdomain(g->member_lease))
        return ld_errinfo_set(err, LD_EINVAL,
                              "member Lease name %s (lease name, \"" MEMBER_INFIX
                              "\", identity) is not a valid Lease name "
                              "(DNS-1123 subdomain, at most %d characters)",
                              shown(g->member_lease, buf), LD_DNS1123_SUBDOMAIN_MAX);
    g->member_metadata = metadata_json(
        g->label_value, NULL, cfg->pod_name ? cfg->pod_name : g->identity, cfg->pod_uid);
    g->shard_set = g->layout ? shard_set_of(g->layout) : NULL;
    g->member_annotations = g->shard_set ? own_annotations(g) : NULL;
    if (!g->member_metadata || !g->member_annotations)
        return ld_errinfo_set(err, LD_ENOMEM, "shard group: out of memory");
    return build_shards(g, err);
}

struct ld_shardgroup *ld_shardgroup_new(const struct ld_shardgroup_config *cfg,
                                        struct ld_errinfo *err)
{
    struct ld_shardgroup *g = NULL;

    ld_errinfo_clear(err);
    if (check_config(cfg, err) != LD_OK)
        return NULL;
    g = calloc(1, sizeof(*g));
    if (!g) {
        ld_errinfo_set(err, LD_ENOMEM, "shard group: out of memory");
        return NULL;
    }
    if (build(g, cfg, err) != LD_OK) {
        ld_shardgroup_free(g);
        return NULL;
    }
    return g;
}

static void member_clear(struct member *m)
{
    free(m->identity);
    free(m->unwritable);
    ld_lease_clear(&m->rec);
    memset(m, 0, sizeof(*m));
}

void ld_shardgroup_free(struct ld_shardgroup *g)
{
    if (!g)
        return;
    /* n_shards is set only once shards exists; a half-built shard has
     * NULL fields. */
    for (uint32_t s = 0; s < g->n_shards; s++) {
        struct shard *sh = &g->shards[s];
        free(sh->metadata);
        free(sh->absent_of);
        ld_lease_clear(&sh->rec);
    }
    for (uint32_t i = 0; i < g->n_members; i++)
        member_clear(&g->members[i]);
    free(g->members);
    free(g->shards);
    free(g->owners);
    free(g->target);
    free(g->contend);
    free(g->kept_owners);
    free(g->kept_index);
    free(g->kept_target);
    free(g->live);
    free(g->assigned_live);
    free(g->assigned_joined);
    free(g->entries);
    for (unsigned i = 0; i < GONE_UIDS; i++)
        free(g->gone_uids[i]);
    ld_shardlayout_unref(g->layout);
    free(g->label_value);
    free(g->identity);
    free(g->incarnation);
    free(g->selector);
    free(g->member_selector);
    free(g->member_lease);
    free(g->member_metadata);
    free(g->shard_set);
    free(g->member_annotations);
    free(g->member_prefix);
    free(g->own_uid);
    free(g);
}

/* ---- names --------------------------------------------------------------- */

uint32_t ld_shardgroup_count(const struct ld_shardgroup *g)
{
    return g->n_shards;
}

bool ld_shardgroup_numbered(const struct ld_shardgroup *g)
{
    return g->layout->numbered;
}

const char *ld_shardgroup_name(const struct ld_shardgroup *g)
{
    return g->layout->name;
}

struct ld_shardlayout *ld_shardgroup_layout(const struct ld_shardgroup *g)
{
    return g->layout;
}

const char *ld_shardgroup_selector(const struct ld_shardgroup *g)
{
    return g->selector;
}

const char *ld_shardgroup_member_selector(const struct ld_shardgroup *g)
{
    return g->member_selector;
}

const char *ld_shardgroup_member_lease(const struct ld_shardgroup *g)
{
    return g->member_lease;
}

const char *ld_shardgroup_member_metadata(const struct ld_shardgroup *g)
{
    return g->member_metadata;
}

const char *ld_shardgroup_member_annotations(const struct ld_shardgroup *g)
{
    return g->member_annotations;
}

const char *ld_shardgroup_shard_set(const struct ld_shardgroup *g)
{
    return g->shard_set;
}

bool ld_shardgroup_set_unwritable(struct ld_shardgroup *g, uint32_t s, bool unwritable)
{
    if (s >= g->n_shards || g->shards[s].own_unwritable == unwritable)
        return false;
    g->shards[s].own_unwritable = unwritable;
    char *text = own_annotations(g);
    if (!text) {
        g->shards[s].own_unwritable = !unwritable;
        return false;
    }
    free(g->member_annotations);
    g->member_annotations = text;
    g->assigned = false;
    return true;
}

bool ld_shardgroup_skipped(const struct ld_shardgroup *g, uint32_t s)
{
    return s < g->n_shards && g->shards[s].skipped;
}

const char *ld_shardgroup_shard_id(const struct ld_shardgroup *g, uint32_t s)
{
    return s < g->n_shards ? g->layout->shards[s].id : NULL;
}

const char *ld_shardgroup_shard_lease(const struct ld_shardgroup *g, uint32_t s)
{
    return s < g->n_shards ? g->layout->shards[s].lease : NULL;
}

const char *ld_shardgroup_shard_metadata(const struct ld_shardgroup *g, uint32_t s)
{
    return s < g->n_shards ? g->shards[s].metadata : NULL;
}

bool ld_shardgroup_find(const struct ld_shardgroup *g, const char *id, uint32_t *s)
{
    return ld_shardlayout_find(g->layout, id, s);
}

/* ---- the member table ---------------------------------------------------- */

/* The identity a member Lease name carries, or NULL for any other name. */
static const char *member_identity(const struct ld_shardgroup *g, const char *lease_name)
{
    size_t n = strlen(g->member_prefix);
    if (!lease_name || strncmp(lease_name, g->member_prefix, n) != 0 || !lease_name[n])
        return NULL;
    return lease_name + n;
}

static struct member *find_member(struct ld_shardgroup *g, const char *identity)
{
    for (uint32_t i = 0; i < g->n_members; i++)
        if (strcmp(g->members[i].identity, identity) == 0)
            return &g->members[i];
    return NULL;
}

/* Grows the table and the live scratch together, so that a live list
 * always fits. */
static enum ld_err reserve_member(struct ld_shardgroup *g)
{
    if (g->n_members < g->cap_members)
        return LD_OK;
    if (g->cap_members >= LD_SHARDGROUP_MAX_MEMBERS)
        return LD_ETOOBIG;
    uint32_t cap = g->cap_members ? 2 * g->cap_members : 8;
    if (cap > LD_SHARDGROUP_MAX_MEMBERS)
        cap = LD_SHARDGROUP_MAX_MEMBERS;
    struct member *m = realloc(g->members, cap * sizeof(*m));
    if (!m)
        return LD_ENOMEM;
    g->members = m;
    const char **live = realloc(g->live, (cap + 1) * sizeof(*live));
    if (!live)
        return LD_ENOMEM;
    g->live = live;
    const char **assigned = realloc(g->assigned_live, (cap + 1) * sizeof(*assigned));
    if (!assigned)
        return LD_ENOMEM;
    g->assigned_live = assigned;
    int64_t *joined = realloc(g->assigned_joined, (cap + 1) * sizeof(*joined));
    if (!joined)
        return LD_ENOMEM;
    g->assigned_joined = joined;
    struct live_entry *entries = realloc(g->entries, (cap + 1) * sizeof(*entries));
    if (!entries)
        return LD_ENOMEM;
    g->entries = entries;
    g->cap_members = cap;
    return LD_OK;
}

/* l's metadata.<field>[key] when it is a string: a copy (owned), NULL when
 * absent (or memory is short). */
static char *metadata_string(const struct ld_lease *l, const char *field, const char *key)
{
    json_t *root = l->object;
    bool owned = false;
    if (!root && l->object_text) {
        root = json_loads(l->object_text, JSON_ALLOW_NUL, NULL);
        owned = true;
    }
    json_t *md = json_is_object(root) ? json_object_get(root, "metadata") : NULL;
    json_t *map = json_is_object(md) ? json_object_get(md, field) : NULL;
    const char *v =
        json_string_value(json_is_object(map) ? json_object_get(map, key) : NULL);
    char *out = v ? strdup(v) : NULL;
    if (owned)
        json_decref(root);
    return out;
}

/* Whether l's object has metadata.<field>[key] == want. */
static bool has_metadata(const struct ld_lease *l, const char *field, const char *key,
                         const char *want)
{
    char *v = metadata_string(l, field, key);
    bool found = v && strcmp(v, want) == 0;
    free(v);
    return found;
}

/* Whether member record lease was emptied by a replica's eviction: it
 * names nobody and carries LD_SHARDGROUP_EVICTED_AT equal to its own
 * renewTime. An eviction is written only after the member was silent for
 * its lease duration; a record emptied by hand (kubectl edit) may name a
 * member that leads yet, and a stale annotation of an older eviction no
 * longer matches the renewTime its renewals moved on. */
static bool evicted_record(const struct ld_lease *lease)
{
    char want[24];
    if ((lease->spec.holder && lease->spec.holder[0]) || !lease->spec.has_renew)
        return false;
    snprintf(want, sizeof(want), "%lld", (long long)lease->spec.renew_us);
    return has_metadata(lease, "annotations", LD_SHARDGROUP_EVICTED_AT, want);
}

static bool same_rv(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* first: the record is seen for the first time; news: and that sight is
 * itself a change (see ld_shardgroup_observe_member). */
static enum ld_err update_member(struct member *m, const struct ld_lease *lease,
                                 int64_t now_ms, bool first, bool news)
{
    struct ld_lease rec;
    ld_lease_init(&rec);
    if (ld_lease_copy_compact(&rec, lease) != LD_OK) {
        ld_lease_clear(&rec);
        return LD_ENOMEM;
    }
    if (first || !ld_lease_same_object(&m->rec, &rec) ||
        !ld_lease_spec_equal(&m->rec.spec, &rec.spec)) {
        m->changed_ms = now_ms;
        /* A record first seen may be a dead replica's last one: only a
         * change proves that someone writes it. */
        m->seen_change = !first || news;
    }
    m->compatible = has_metadata(lease, "annotations", LD_SHARDGROUP_PROTOCOL,
                                 LD_SHARDGROUP_PROTOCOL_VERSION);
    m->evicted = evicted_record(lease);
    free(m->unwritable); /* "" reports nothing, as out of memory does */
    m->unwritable = metadata_string(lease, "annotations", LD_SHARDGROUP_UNWRITABLE);
    if (m->unwritable && !m->unwritable[0]) {
        free(m->unwritable);
        m->unwritable = NULL;
    }
    ld_lease_clear(&m->rec);
    m->rec = rec;
    return LD_OK;
}

static bool is_gone(const struct ld_shardgroup *g, const char *uid)
{
    for (unsigned i = 0; uid && i < GONE_UIDS; i++) {
        if (g->gone_uids[i] && strcmp(g->gone_uids[i], uid) == 0)
            return true;
    }
    return false;
}

static int64_t member_expiry(const struct ld_shardgroup *g, const struct member *m)
{
    int64_t d = m->rec.spec.duration_s > 0 ? (int64_t)m->rec.spec.duration_s * 1000
                                           : g->lease_duration_ms;
    return m->changed_ms + d;
}

static bool member_live(const struct ld_shardgroup *g, const struct member *m,
                        int64_t now_ms)
{
    return m->compatible && m->seen_change &&
           ld_lease_spec_held_by(&m->rec.spec, m->identity) &&
           now_ms < member_expiry(g, m);
}

/* Whether l's annotation key is present and differs from want; its value
 * copied into theirs (len bytes, cut to fit) when it does. */
static bool annotation_differs(const struct ld_lease *l, const char *key,
                               const char *want, char *theirs, size_t len)
{
    char *v = metadata_string(l, "annotations", key);
    bool differs = v && strcmp(v, want) != 0;
    if (differs)
        snprintf(theirs, len, "%s", v);
    free(v);
    return differs;
}

const char *ld_shardgroup_set_conflict(const struct ld_shardgroup *g, int64_t now_ms,
                                       char *theirs, size_t len)
{
    for (uint32_t i = 0; i < g->n_members; i++) {
        const struct member *m = &g->members[i];
        int64_t joined = m->rec.spec.has_acquire ? m->rec.spec.acquire_us : 0;
        bool earlier =
            g->own_joined_us == 0 || joined < g->own_joined_us ||
            (joined == g->own_joined_us && strcmp(m->identity, g->identity) < 0);
        if (earlier && member_live(g, m, now_ms) &&
            annotation_differs(&m->rec, LD_SHARDGROUP_SHARD_SET, g->shard_set, theirs,
                               len))
            return m->identity;
    }
    return NULL;
}

/* The record a full table gives up for a new member: the one not live for
 * the longest, or NULL when all are live. Member Leases can outlive their
 * replicas (no ownerReference, a crash, a DELETED missed while the watch
 * was down), and over many rollouts with fresh pod names they would
 * otherwise fill the table and keep a new replica from ever being counted
 * here while it counts itself: the replicas would never agree. */
static struct member *stale_member(struct ld_shardgroup *g, int64_t now_ms)
{
    struct member *oldest = NULL;
    for (uint32_t i = 0; i < g->n_members; i++) {
        struct member *m = &g->members[i];
        if (!member_live(g, m, now_ms) && (!oldest || m->changed_ms < oldest->changed_ms))
            oldest = m;
    }
    return oldest;
}

enum ld_err ld_shardgroup_observe_member(struct ld_shardgroup *g,
                                         const struct ld_lease *lease, int64_t now_ms)
{
    const char *identity = lease ? member_identity(g, lease->name) : NULL;

    if (identity && strcmp(identity, g->identity) == 0) {
        /* Others rank us by this record's acquireTime: so do we. */
        if (ld_lease_spec_held_by(&lease->spec, g->identity) && lease->spec.has_acquire &&
            g->own_joined_us != lease->spec.acquire_us) {
            g->own_joined_us = lease->spec.acquire_us;
            g->assigned = false;
        }
        return LD_OK;
    }
    if (!identity || is_gone(g, lease->uid))
        return LD_OK;
    g->assigned = false;
    struct member *m = find_member(g, identity);
    if (m) {
        m->mark = true;
        return update_member(m, lease, now_ms, false, false);
    }
    /* Whether this first sight is news: see update_member's caller below. */
    bool news = g->listed && !g->overflow && !g->lossy;
    struct member *slot = NULL;
    enum ld_err rc = reserve_member(g);
    if (rc == LD_ETOOBIG && (slot = stale_member(g, now_ms)) != NULL)
        rc = LD_OK;
    if (rc == LD_ETOOBIG)
        g->overflow = true;
    if (rc != LD_OK || slot)
        g->lossy = true;
    if (rc != LD_OK)
        return rc;
    struct member fresh = {.identity = strdup(identity), .mark = true};
    if (!fresh.identity) {
        g->lossy = true;
        return LD_ENOMEM;
    }
    /* A record first seen counts from now_ms, as the engine's first
     * observation of a Lease does. One that a list of the group did not
     * hold was written since: that is a change, and the replica that
     * wrote it (a newcomer, usually) counts live at once. (Unless the
     * table dropped records since: then a record missing from it proves
     * nothing.) */
    rc = update_member(&fresh, lease, now_ms, true, news && !slot);
    if (rc != LD_OK) {
        member_clear(&fresh);
        g->lossy = true;
        return rc;
    }
    if (slot) {
        member_clear(slot);
        *slot = fresh;
    } else {
        g->members[g->n_members++] = fresh;
    }
    return LD_OK;
}

static void drop_member(struct ld_shardgroup *g, struct member *m)
{
    g->assigned = false;
    member_clear(m);
    *m = g->members[--g->n_members];
}

/* Remembers that the object uid was deleted: a list answered before the
 * deletion but applied after it must not bring it back (a member counted
 * live, a shard shown held by its old holder until the next change). */
static void note_gone(struct ld_shardgroup *g, const char *uid)
{
    if (!uid || is_gone(g, uid))
        return;
    char *copy = strdup(uid);
    if (!copy)
        return; /* without it, a late list may show the object a while */
    free(g->gone_uids[g->gone_next]);
    g->gone_uids[g->gone_next] = copy;
    g->gone_next = (g->gone_next + 1) % GONE_UIDS;
}

void ld_shardgroup_observe_member_deleted(struct ld_shardgroup *g,
                                          const struct ld_lease *gone)
{
    const char *identity = gone ? member_identity(g, gone->name) : NULL;
    struct member *m = identity ? find_member(g, identity) : NULL;

    if (identity)
        note_gone(g, gone->uid);
    if (!m || (m->rec.uid && gone->uid && strcmp(m->rec.uid, gone->uid) != 0))
        return;
    drop_member(g, m);
}

/* ---- shard records ------------------------------------------------------- */

/* The shard whose Lease is name, or NULL. */
static struct shard *shard_named(struct ld_shardgroup *g, const char *name, uint32_t *s)
{
    size_t n = strlen(g->layout->name);
    if (!name || strncmp(name, g->layout->name, n) != 0 || name[n] != '-')
        return NULL;
    uint32_t k;
    if (!ld_shardlayout_find(g->layout, name + n + 1, &k))
        return NULL;
    if (s)
        *s = k;
    return &g->shards[k];
}

/* Written by this process: our identity and our incarnation. A record of
 * our identity under another incarnation is another process's. */
static bool names_us(const struct ld_shardgroup *g, const struct shard *sh)
{
    return sh->present && ld_lease_held_by(&sh->rec, g->identity, g->incarnation);
}

static void shard_absent(struct shard *sh)
{
    ld_lease_clear(&sh->rec);
    sh->present = false;
    sh->uid_seen_ms = INT64_MAX;
    sh->observed = true;
    sh->claimed = false;
    sh->giving_back = false;
    sh->unlisted = false;
    sh->from_list = false;
}

static const char *holder_of(const struct shard *sh);
static void start_absence(struct ld_shardgroup *g, struct shard *sh, int64_t now_ms);

/* Marks shard sh as changed from outside (deleted, made anew, or its
 * holder rewritten) at now_ms. A second change restarts the wait: the
 * record it replaced may have been claimed by another replica again. */
static void outside_change(struct ld_shardgroup *g, struct shard *sh, int64_t now_ms)
{
    if (g->outside_wait_ms > 0)
        sh->outside_since_ms = now_ms;
}

/* Whether a write of shard sh must wait: it was changed from outside less
 * than outside_wait_ms ago. Whoever claimed it before may claim it until
 * its own view, which does not show the change, is a lease duration old
 * (ld_shardgroup_confirm); its app needs the drain after that. */
static bool outside_wait(const struct ld_shardgroup *g, const struct shard *sh,
                         int64_t now_ms)
{
    return sh->outside_since_ms != INT64_MAX &&
           now_ms - sh->outside_since_ms < g->outside_wait_ms;
}

/* Whether lease, a shard record, bears the stamp our writes put on it: the
 * annotation LD_SHARDGROUP_HOLDER equal to its holder. A holder edited by
 * hand (kubectl edit, a restored copy of another's record) lacks it. */
static bool stamped(const struct ld_lease *lease)
{
    return has_metadata(lease, "annotations", LD_SHARDGROUP_HOLDER,
                        lease->spec.holder ? lease->spec.holder : "");
}

/* Judges a new record of shard sh against the one held (before it is
 * replaced): made anew (another uid than the one seen) or not stamped by
 * a replica of the group, it counts as changed from outside. */
static void judge_outside(struct ld_shardgroup *g, struct shard *sh,
                          const struct ld_lease *lease, int64_t now_ms)
{
    bool anew =
        sh->present && sh->rec.uid && lease->uid && strcmp(sh->rec.uid, lease->uid) != 0;
    if (anew || !stamped(lease))
        outside_change(g, sh, now_ms);
}

static enum ld_err observe_shard(struct ld_shardgroup *g, struct shard *sh,
                                 const struct ld_lease *lease, int64_t now_ms)
{
    struct ld_lease rec;
    ld_lease_init(&rec);
    if (ld_lease_copy_compact(&rec, lease) != LD_OK) {
        ld_lease_clear(&rec);
        return LD_ENOMEM;
    }
    /* A new record of the shard was written since: its holder (if it wrote
     * it) was alive then, so an absence counted before proves nothing now.
     * The count starts over from this record (track_absence), even when the
     * holder's return and a new loss of its member Lease were both seen
     * with no assignment between them. */
    if (!sh->present || !same_rv(sh->rec.resource_version, rec.resource_version))
        sh->absent_since_ms = INT64_MAX;
    if (!sh->present || !ld_lease_same_object(&sh->rec, &rec))
        sh->uid_seen_ms = now_ms;
    ld_lease_clear(&sh->rec);
    sh->rec = rec;
    sh->present = true;
    sh->observed = true;
    sh->mark = true;
    sh->unlisted = !has_metadata(lease, "labels", LD_SHARDGROUP_LABEL, g->label_value);
    sh->from_list = false;
    /* Someone else's record ends our claim, whatever the term, and leaves
     * nothing to give back. */
    if (!names_us(g, sh)) {
        sh->claimed = false;
        sh->giving_back = false;
    }
    return LD_OK;
}

/* Whether resourceVersion a is newer than b, when both are decimal
 * numbers, as the API server's are (an etcd revision); false when either
 * is not, when the caller then takes the list's word. */
static bool rv_newer(const char *a, const char *b)
{
    size_t la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0;
    if (la == 0 || lb == 0 || la > 19 || lb > 19 || strspn(a, "0123456789") != la ||
        strspn(b, "0123456789") != lb)
        return false;
    return la != lb ? la > lb : strcmp(a, b) > 0;
}

/* The record of the same object the view holds now, or NULL. */
static const struct ld_lease *held_record(struct ld_shardgroup *g,
                                          const struct ld_lease *item)
{
    const struct ld_lease *rec = NULL;
    struct shard *sh = shard_named(g, item->name, NULL);
    const char *identity = sh ? NULL : member_identity(g, item->name);
    struct member *m = identity ? find_member(g, identity) : NULL;
    if (sh && sh->present)
        rec = &sh->rec;
    else if (m)
        rec = &m->rec;
    if (!rec || !rec->uid || !item->uid || strcmp(rec->uid, item->uid) != 0)
        return NULL;
    return rec;
}

enum ld_err ld_shardgroup_observe_lease(struct ld_shardgroup *g,
                                        const struct ld_lease *lease, int64_t now_ms)
{
    if (!lease)
        return LD_OK;
    struct shard *sh = shard_named(g, lease->name, NULL);
    /* A record older than the one held (a list answered after the watch
     * showed a newer one, so its snapshot is older) keeps the newer one:
     * the newer of two consistent views of one history, object by object,
     * is still one consistent view. It still counts as listed. */
    const struct ld_lease *rec = held_record(g, lease);
    if (rec && rv_newer(rec->resource_version, lease->resource_version)) {
        const char *identity = sh ? NULL : member_identity(g, lease->name);
        struct member *m = identity ? find_member(g, identity) : NULL;
        if (sh)
            sh->mark = true;
        if (m)
            m->mark = true;
        return LD_OK;
    }
    if (sh && lease->uid && is_gone(g, lease->uid))
        return LD_OK; /* deleted since that snapshot: it stays absent */
    if (sh) {
        if (!sh->present || !same_rv(sh->rec.resource_version, lease->resource_version))
            judge_outside(g, sh, lease, now_ms);
        return observe_shard(g, sh, lease, now_ms);
    }
    return ld_shardgroup_observe_member(g, lease, now_ms);
}

void ld_shardgroup_observe_deleted(struct ld_shardgroup *g, const struct ld_lease *gone,
                                   int64_t now_ms)
{
    struct shard *sh = gone ? shard_named(g, gone->name, NULL) : NULL;
    if (!sh) {
        ld_shardgroup_observe_member_deleted(g, gone);
        return;
    }
    /* A DELETED of an older object than the one seen changes nothing. */
    if (sh->present && sh->rec.uid && gone->uid && strcmp(sh->rec.uid, gone->uid) != 0)
        return;
    /* No replica deletes a shard Lease: whoever it named may claim it yet,
     * its view not showing the deletion, so it is made anew only the
     * outside wait later (rule O2). Its last state (the event's, or the one
     * held) naming nobody, or us, leaves no such claimant. */
    const char *h = gone->spec.holder ? gone->spec.holder
                    : sh->present     ? holder_of(sh)
                                      : "";
    if (h[0] && strcmp(h, g->identity) != 0)
        outside_change(g, sh, now_ms);
    note_gone(g, gone->uid ? gone->uid : sh->rec.uid);
    shard_absent(sh);
}

enum ld_err ld_shardgroup_observe_list(struct ld_shardgroup *g,
                                       const struct ld_lease *items, size_t n,
                                       const char *list_rv, int64_t now_ms)
{
    enum ld_err first = LD_OK;
    struct shard *shards = g->shards; /* the array never moves */
    for (uint32_t s = 0; s < g->n_shards; s++)
        shards[s].mark = false;
    for (uint32_t i = 0; i < g->n_members; i++)
        g->members[i].mark = false;
    g->overflow = false;
    for (size_t i = 0; i < n; i++) {
        enum ld_err rc = ld_shardgroup_observe_lease(g, &items[i], now_ms);
        if (rc != LD_OK && first == LD_OK)
            first = rc;
        struct shard *sh = shard_named(g, items[i].name, NULL);
        if (sh && sh->present &&
            same_rv(sh->rec.resource_version, items[i].resource_version))
            sh->from_list = true; /* not when a newer record was kept */
    }
    /* A record newer than the snapshot was written after it: the list
     * cannot show it, and no event will show it again (shard Leases are
     * written only when their owner changes). */
    for (uint32_t s = 0; s < g->n_shards; s++)
        if (shards[s].present && rv_newer(shards[s].rec.resource_version, list_rv))
            shards[s].mark = true;
    for (uint32_t i = 0; i < g->n_members; i++)
        if (rv_newer(g->members[i].rec.resource_version, list_rv))
            g->members[i].mark = true;
    for (uint32_t s = 0; s < g->n_shards; s++) {
        if (!shards[s].mark && !shards[s].unlisted) {
            /* Absent in the list: deleted since it was seen (by whom, and
             * over what, a list cannot tell: made anew only the outside
             * wait later, rule O2), or never made. Whoever makes it claims
             * it only the outside wait after that (rule O9). */
            if (shards[s].present)
                outside_change(g, &shards[s], now_ms);
            shard_absent(&shards[s]);
            shards[s].from_list = true; /* its absence is the list's */
        }
    }
    g->lossy = false; /* the table holds what the list holds, or overflowed */
    for (uint32_t i = 0; i < g->n_members;) {
        if (!g->members[i].mark)
            drop_member(g, &g->members[i]); /* moves the last one here */
        else
            i++;
    }
    g->listed = true;
    for (uint32_t s = 0; s < g->n_shards; s++)
        start_absence(g, &shards[s], now_ms);
    return first;
}

/* ---- our own member election ------------------------------------------- */

static bool own_live(const struct ld_shardgroup *g, int64_t now_ms)
{
    return ld_leads_at(g->own_leading, g->own_until_ms, now_ms);
}

void ld_shardgroup_observe_own(struct ld_shardgroup *g,
                               const struct ld_election_status *st, int64_t now_ms)
{
    bool brk;
    if (!st->leading)
        brk = g->own_leading;
    else
        brk = !g->own_leading || now_ms >= g->own_until_ms ||
              st->term != g->own_transitions ||
              (g->own_uid && st->uid && strcmp(g->own_uid, st->uid) != 0);
    if (brk)
        ld_shardgroup_break(g);
    if (st->uid && (!g->own_uid || strcmp(g->own_uid, st->uid) != 0)) {
        char *uid = strdup(st->uid);
        if (uid) {
            free(g->own_uid);
            g->own_uid = uid;
        } else {
            ld_shardgroup_break(g); /* cannot tell the next uid change: be safe */
        }
    }
    g->own_leading = st->leading;
    g->own_until_ms = st->lead_until_ms;
    g->own_predecessors_over_ms = st->predecessors_over_ms;
    g->own_transitions = st->term;
}

void ld_shardgroup_break(struct ld_shardgroup *g)
{
    g->term++;
}

uint64_t ld_shardgroup_term(const struct ld_shardgroup *g)
{
    return g->term;
}

bool ld_shardgroup_leads(const struct ld_shardgroup *g, int64_t now_ms)
{
    return own_live(g, now_ms);
}

bool ld_shardgroup_observed(const struct ld_shardgroup *g)
{
    if (g->listed)
        return true;
    for (uint32_t s = 0; s < g->n_shards; s++)
        if (!g->shards[s].observed)
            return false;
    return true;
}

bool ld_shardgroup_members_unproven(const struct ld_shardgroup *g, int64_t now_ms)
{
    for (uint32_t i = 0; i < g->n_members; i++) {
        const struct member *m = &g->members[i];
        if (m->compatible && !m->seen_change &&
            ld_lease_spec_held_by(&m->rec.spec, m->identity) &&
            now_ms < member_expiry(g, m))
            return true;
    }
    return false;
}

bool ld_shardgroup_incompatible(const struct ld_shardgroup *g, const char *identity)
{
    const struct member *m = find_member((struct ld_shardgroup *)g, identity);
    return m && !m->compatible;
}

/* ---- the assignment ------------------------------------------------------ */

static int by_identity(const void *a, const void *b)
{
    return strcmp(((const struct live_entry *)a)->identity,
                  ((const struct live_entry *)b)->identity);
}

static int64_t joined_us(const struct member *m)
{
    return m->rec.spec.has_acquire ? m->rec.spec.acquire_us : 0;
}

/* Fills out (room for n_members + 1) with the live identities, sorted, and
 * joined (NULL, or the same room) with when each joined. */
static uint32_t live_list(struct ld_shardgroup *g, int64_t now_ms, const char **out,
                          int64_t *joined)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->n_members; i++) {
        const struct member *m = &g->members[i];
        if (member_live(g, m, now_ms))
            g->entries[n++] = (struct live_entry){m->identity, joined_us(m)};
    }
    if (own_live(g, now_ms))
        g->entries[n++] = (struct live_entry){g->identity, g->own_joined_us};
    qsort(g->entries, n, sizeof(*g->entries), by_identity);
    for (uint32_t i = 0; i < n; i++) {
        out[i] = g->entries[i].identity;
        if (joined)
            joined[i] = g->entries[i].joined_us;
    }
    return n;
}

uint32_t ld_shardgroup_members(struct ld_shardgroup *g, int64_t now_ms,
                               const char *const **out)
{
    uint32_t n = live_list(g, now_ms, g->live, NULL);
    *out = g->live;
    return n;
}

static const char *holder_of(const struct shard *sh)
{
    return sh->present && sh->rec.spec.holder ? sh->rec.spec.holder : "";
}

/* Whether member record m (NULL: none in the view) proves nothing about
 * its holder having stopped until a lease duration has passed: absent, or
 * emptied by hand rather than by an eviction. */
static bool member_unproven(const struct member *m)
{
    return !m || (m->compatible && !m->rec.spec.holder[0] && !m->evicted);
}

/* Whether member record m names another process of its identity than the
 * one that wrote shard sh (a restart, or a second process of that name,
 * took the member Lease over): that process's claims ended with its member
 * term, by a time the record does not tell. */
static bool member_of_another_process(const struct member *m, const struct shard *sh)
{
    const char *inc = sh->rec.incarnation ? sh->rec.incarnation : "";
    return m->compatible && m->rec.spec.holder[0] &&
           !ld_lease_held_by(&m->rec, m->rec.spec.holder, inc);
}

/* Whether the process that wrote shard sh, naming a holder other than us,
 * is not proven live by the view: its identity's member record is absent,
 * emptied by hand (member_unproven) or written by another process. */
static bool writer_unproven(const struct member *m, const struct shard *sh)
{
    return member_unproven(m) || member_of_another_process(m, sh);
}

static bool holder_absent(struct ld_shardgroup *g, const struct shard *sh)
{
    const char *h = holder_of(sh);
    return h[0] && strcmp(h, g->identity) != 0 && writer_unproven(find_member(g, h), sh);
}

/* Whether sh's count of its holder's absence is running. */
static bool counting(const struct shard *sh)
{
    return sh->absent_since_ms != INT64_MAX && sh->absent_of &&
           strcmp(sh->absent_of, holder_of(sh)) == 0;
}

/* Ends each shard's count of how long its holder has had no member record
 * when the holder changes or its record appears. It never starts one: a
 * count starts only on a list (start_absence), where the shard's record
 * and the member table are of one snapshot. A view assembled from the
 * watch and an older list can pair the holder's rewrite of the shard with
 * its member Lease dropped before that rewrite, a state never stored: an
 * absence counted from it would let a later, real deletion of the
 * holder's member Lease be followed at once by a takeover (issue #28). */
static void track_absence(struct ld_shardgroup *g, struct shard *sh, int64_t now_ms)
{
    (void)now_ms;
    if (!holder_absent(g, sh) || !counting(sh))
        sh->absent_since_ms = INT64_MAX;
}

/* Starts the count of shard sh's holder's absence at now_ms, unless it runs
 * already: called on a list, for a shard whose record is the list's. */
static void start_absence(struct ld_shardgroup *g, struct shard *sh, int64_t now_ms)
{
    if (g->overflow || !sh->from_list || !holder_absent(g, sh) || counting(sh))
        return;
    const char *h = holder_of(sh);
    char *copy = strdup(h);
    if (!copy)
        return; /* not counting: no takeover on this rule until memory returns */
    free(sh->absent_of);
    sh->absent_of = copy;
    sh->absent_since_ms = now_ms;
}

static int64_t earliest_change(const struct ld_shardgroup *g, int64_t now_ms)
{
    int64_t next = INT64_MAX;
    for (uint32_t i = 0; i < g->n_members; i++) {
        int64_t at = member_expiry(g, &g->members[i]);
        if (g->members[i].rec.spec.holder[0] && at > now_ms && at < next)
            next = at;
    }
    if (own_live(g, now_ms) && g->own_until_ms < next)
        next = g->own_until_ms;
    int64_t rebalance_at = g->members_since_ms + g->rebalance_delay_ms;
    if (g->members_known && rebalance_at > now_ms && rebalance_at < next)
        next = rebalance_at;
    for (uint32_t s = 0; s < g->n_shards; s++) {
        const struct shard *sh = &g->shards[s];
        if (outside_wait(g, sh, now_ms) &&
            sh->outside_since_ms + g->outside_wait_ms < next)
            next = sh->outside_since_ms + g->outside_wait_ms;
        if (sh->claimed && sh->claim_from_ms > now_ms && sh->claim_from_ms < next)
            next = sh->claim_from_ms;
        if (sh->absent_since_ms == INT64_MAX)
            continue;
        int64_t at = sh->absent_since_ms + g->lease_duration_ms;
        if (at > now_ms && at < next)
            next = at;
    }
    return next;
}

/* Restarts the count of how long the live members have been the same when
 * they changed (a 64-bit hash of the names and when each joined, which
 * ranks them: a collision would only let one rebalance go early). */
static void note_members(struct ld_shardgroup *g, const char *const *live,
                         const int64_t *joined, uint32_t n, int64_t now_ms)
{
    uint64_t h = ld_fnv1a64(&n, sizeof(n));
    for (uint32_t i = 0; i < n; i++) {
        h ^= ld_fnv1a64(live[i], strlen(live[i]) + 1) + 0x9e3779b97f4a7c15u * (i + 1);
        h ^= ld_fnv1a64(&joined[i], sizeof(joined[i])) * (2 * i + 3);
    }
    if (h != g->members_hash || !g->members_known) {
        g->members_hash = h;
        g->members_since_ms = now_ms;
        g->members_known = true;
    }
}

/* A live member (an index into the live list) and a shard it cannot
 * write. */
struct avoided {
    uint32_t member, shard;
};

struct avoided_list {
    struct avoided *pairs;
    size_t n, cap;
    bool short_of_memory;
};

static void avoid(struct avoided_list *l, uint32_t member, uint32_t shard)
{
    if (l->n == l->cap) {
        size_t more = l->cap ? 2 * l->cap : 8;
        struct avoided *grown = realloc(l->pairs, more * sizeof(*l->pairs));
        if (!grown) {
            l->short_of_memory = true;
            return;
        }
        l->pairs = grown;
        l->cap = more;
    }
    l->pairs[l->n++] = (struct avoided){member, shard};
}

/* The index of identity in live (sorted by strcmp), or n_live. */
static uint32_t live_index(const char *const *live, uint32_t n_live, const char *identity)
{
    uint32_t lo = 0, hi = n_live;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(live[mid], identity);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return n_live;
}

/* The (live member, shard) pairs the assignment avoids: the shards each
 * live member cannot write (its LD_SHARDGROUP_UNWRITABLE; ours from
 * own_unwritable). Member indexes are into live. */
static void collect_avoided(const struct ld_shardgroup *g, const char *const *live,
                            uint32_t n_live, struct avoided_list *l)
{
    uint32_t self = live_index(live, n_live, g->identity);
    for (uint32_t s = 0; self < n_live && s < g->n_shards; s++)
        if (g->shards[s].own_unwritable)
            avoid(l, self, s);
    for (uint32_t i = 0; i < g->n_members; i++) {
        const struct member *m = &g->members[i];
        uint32_t at = m->unwritable ? live_index(live, n_live, m->identity) : n_live;
        char *list = at < n_live ? strdup(m->unwritable) : NULL, *save = NULL;
        if (at < n_live && !list)
            l->short_of_memory = true;
        for (char *id = list ? strtok_r(list, ",", &save) : NULL; id;
             id = strtok_r(NULL, ",", &save)) {
            uint32_t s;
            if (ld_shardgroup_find(g, id, &s))
                avoid(l, at, s);
        }
        free(list);
    }
}

static bool is_avoided(const struct avoided *pairs, size_t n, uint32_t member,
                       uint32_t shard)
{
    for (size_t i = 0; i < n; i++)
        if (pairs[i].member == member && pairs[i].shard == shard)
            return true;
    return false;
}

/* The assignment with reports of unwritable shards: the shards no live
 * member reports go through the assignment function as usual; each
 * reported one stays with its live holder when that one can write it,
 * else goes to the live member that can with the fewest shards (the first
 * of them in the sorted list), else to nobody (skipped). Every replica
 * reads the reports from the member Leases, so all compute the same. A
 * reporter holds none of the shards it reports, so nothing it holds
 * moves; out of memory, nothing is avoided. */
static enum ld_err assign_avoiding(struct ld_shardgroup *g, const char *const *live,
                                   uint32_t n_live)
{
    struct avoided_list l = {0};
    collect_avoided(g, live, n_live, &l);
    bool avoiding = l.n && !l.short_of_memory;
    uint32_t *count = avoiding ? calloc(n_live ? n_live : 1, sizeof(*count)) : NULL;
    avoiding = avoiding && count;
    uint32_t n_kept = 0;
    for (uint32_t s = 0; s < g->n_shards; s++) {
        g->shards[s].skipped = false;
        bool reported = false;
        for (size_t i = 0; avoiding && i < l.n && !reported; i++)
            reported = l.pairs[i].shard == s;
        g->target[s] = LD_SHARD_NOBODY;
        if (reported)
            continue;
        g->kept_owners[n_kept] = g->owners[s];
        g->kept_index[n_kept++] = s;
    }
    enum ld_err rc = ld_shardassign(n_kept, g->kept_owners, n_live, live,
                                    g->assigned_joined, g->kept_target);
    for (uint32_t i = 0; rc == LD_OK && i < n_kept; i++) {
        g->target[g->kept_index[i]] = g->kept_target[i];
        if (count && g->kept_target[i] != LD_SHARD_NOBODY)
            count[g->kept_target[i]]++;
    }
    for (uint32_t s = 0; rc == LD_OK && avoiding && s < g->n_shards; s++) {
        bool reported = false;
        for (size_t i = 0; i < l.n && !reported; i++)
            reported = l.pairs[i].shard == s;
        if (!reported)
            continue;
        uint32_t holder = g->owners[s] ? live_index(live, n_live, g->owners[s]) : n_live;
        uint32_t best = LD_SHARD_NOBODY;
        if (holder < n_live && !is_avoided(l.pairs, l.n, holder, s))
            best = holder;
        for (uint32_t i = 0; best != holder && i < n_live; i++)
            if (!is_avoided(l.pairs, l.n, i, s) &&
                (best == LD_SHARD_NOBODY || count[i] < count[best]))
                best = i;
        if (best != LD_SHARD_NOBODY)
            count[best]++;
        g->target[s] = best;
        g->shards[s].skipped = best == LD_SHARD_NOBODY;
    }
    free(count);
    free(l.pairs);
    return rc;
}

enum ld_err ld_shardgroup_assign(struct ld_shardgroup *g, int64_t now_ms,
                                 int64_t *next_ms)
{
    const char **live = g->assigned_live;
    uint32_t n_live = live_list(g, now_ms, live, g->assigned_joined);

    for (uint32_t s = 0; s < g->n_shards; s++) {
        const char *h = holder_of(&g->shards[s]);
        g->owners[s] = h[0] ? h : NULL;
    }
    enum ld_err rc = assign_avoiding(g, live, n_live);
    if (rc != LD_OK)
        return rc;
    note_members(g, live, g->assigned_joined, n_live, now_ms);
    for (uint32_t s = 0; s < g->n_shards; s++) {
        g->contend[s] = g->target[s] != LD_SHARD_NOBODY &&
                        strcmp(live[g->target[s]], g->identity) == 0;
        track_absence(g, &g->shards[s], now_ms);
    }
    g->assigned = true;
    if (next_ms)
        *next_ms = earliest_change(g, now_ms);
    return LD_OK;
}

bool ld_shardgroup_contend(const struct ld_shardgroup *g, uint32_t s)
{
    return s < g->n_shards && g->contend[s];
}

const char *ld_shardgroup_target(const struct ld_shardgroup *g, uint32_t s)
{
    if (s >= g->n_shards || !g->assigned || g->target[s] == LD_SHARD_NOBODY)
        return NULL;
    return g->assigned_live[g->target[s]];
}

static bool claim_valid(const struct ld_shardgroup *g, const struct shard *sh)
{
    return sh->claimed && sh->claim_term == g->term && !sh->giving_back;
}

/* The takeover of a shard held by someone else. */
static enum ld_shard_step step_foreign(const struct ld_shardgroup *g,
                                       const struct shard *sh, int64_t now_ms, bool fresh)
{
    const char *h = holder_of(sh);
    if (!h[0])
        return LD_SHARD_TAKE;
    enum ld_shard_step take = fresh && sh->from_list ? LD_SHARD_TAKE : LD_SHARD_READ;
    /* Another process of our identity wrote it: its claims end with its
     * member election, no later than its renew deadline. Ours leads (the
     * caller checked); when it took that process's record over after its
     * expiry, they ended before; when it found the member Lease deleted or
     * emptied, a lease duration after that was seen (issue #28). */
    if (strcmp(h, g->identity) == 0)
        return now_ms >= g->own_predecessors_over_ms ? take : LD_SHARD_NONE;
    const struct member *m = find_member((struct ld_shardgroup *)g, h);
    if (m && !m->compatible)
        return LD_SHARD_NONE; /* neither live nor dead: never taken over */
    if (writer_unproven(m, sh)) {
        if (!m && g->overflow)
            return LD_SHARD_NONE; /* an absent record proves nothing */
        /* Not counting yet: a list starts the count (one snapshot). */
        if (!counting(sh))
            return LD_SHARD_READ;
        bool waited = now_ms - sh->absent_since_ms >= g->lease_duration_ms;
        return waited ? take : LD_SHARD_NONE;
    }
    if (!m->rec.spec.holder[0])
        return take;
    return now_ms >= member_expiry(g, m) ? LD_SHARD_EVICT : LD_SHARD_NONE;
}

enum ld_shard_step ld_shardgroup_step(const struct ld_shardgroup *g, uint32_t s,
                                      int64_t now_ms, bool fresh)
{
    if (s >= g->n_shards || !own_live(g, now_ms))
        return LD_SHARD_NONE;
    const struct shard *sh = &g->shards[s];
    if (!sh->observed || outside_wait(g, sh, now_ms))
        return LD_SHARD_NONE;
    if (sh->giving_back) /* until its release is written */
        return names_us(g, sh) ? LD_SHARD_RELEASE : LD_SHARD_NONE;
    if (names_us(g, sh)) {
        /* A shard in use moves only once the members have stayed the same
         * for the rebalance delay: a join followed at once by a leave (a
         * rolling update) then moves it once, not twice. One not in use
         * goes back at once: nobody works on it meanwhile. */
        if (!g->contend[s])
            return claim_valid(g, sh) &&
                           now_ms - g->members_since_ms < g->rebalance_delay_ms
                       ? LD_SHARD_NONE
                       : LD_SHARD_RELEASE;
        return claim_valid(g, sh) ? LD_SHARD_NONE : LD_SHARD_TAKE;
    }
    if (!g->contend[s])
        return LD_SHARD_NONE;
    return step_foreign(g, sh, now_ms, fresh);
}

const struct ld_lease *ld_shardgroup_long_expired(const struct ld_shardgroup *g,
                                                  int64_t now_ms)
{
    for (uint32_t i = 0; i < g->n_members; i++) {
        const struct member *m = &g->members[i];
        if (m->compatible && m->rec.uid && m->rec.resource_version &&
            now_ms - member_expiry(g, m) >= 10 * g->lease_duration_ms)
            return &m->rec;
    }
    return NULL;
}

/* ---- writes -------------------------------------------------------------- */

/* Merges the labels and annotations of the metadata JSON md into l's
 * object, which is made a JSON object first. */
static enum ld_err merge_metadata(struct ld_lease *l, const char *md_json)
{
    enum ld_err rc = LD_ENOMEM;
    json_t *md = json_loads(md_json, 0, NULL);
    if (!l->object && l->object_text) {
        l->object = json_loads(l->object_text, JSON_ALLOW_NUL, NULL);
        free(l->object_text);
        l->object_text = NULL;
    }
    if (!l->object)
        l->object = json_object();
    if (!md || !json_is_object(l->object))
        goto done;
    json_t *meta = json_object_get(l->object, "metadata");
    if (!json_is_object(meta)) {
        meta = json_object();
        if (!meta || json_object_set_new(l->object, "metadata", meta) != 0)
            goto done;
    }
    const char *keys[] = {"labels", "annotations"};
    for (size_t i = 0; i < 2; i++) {
        json_t *want = json_object_get(md, keys[i]);
        json_t *have = json_object_get(meta, keys[i]);
        if (!json_is_object(want))
            continue;
        if (!json_is_object(have)) {
            have = json_object();
            if (!have || json_object_set_new(meta, keys[i], have) != 0)
                goto done;
        }
        if (json_object_update(have, want) != 0)
            goto done;
    }
    rc = LD_OK;
done:
    json_decref(md);
    return rc;
}

/* Whether shard sh's object is known older than the outside wait at
 * now_ms (rule O9): we have known its uid that long, or a replica that had
 * wrote the record (stamped, and not marked new). */
static bool proven_old(const struct ld_shardgroup *g, const struct shard *sh,
                       int64_t now_ms)
{
    if (!sh->present)
        return false;
    if (sh->uid_seen_ms != INT64_MAX && now_ms - sh->uid_seen_ms >= g->outside_wait_ms)
        return true;
    return stamped(&sh->rec) &&
           !has_metadata(&sh->rec, "annotations", LD_SHARDGROUP_NEW_OBJECT, "true");
}

/* Stamps l (whose object merge_metadata made) with its holder, so that a
 * holder edited by hand shows (stamped), and marks it new unless its
 * object is known old (rule O9). */
static enum ld_err stamp(const struct ld_shardgroup *g, const struct shard *sh,
                         struct ld_lease *l, int64_t now_ms)
{
    json_t *meta = json_object_get(l->object, "metadata");
    json_t *ann = json_is_object(meta) ? json_object_get(meta, "annotations") : NULL;
    if (!json_is_object(ann) ||
        json_object_set_new(ann, LD_SHARDGROUP_HOLDER,
                            json_string(l->spec.holder ? l->spec.holder : "")) != 0)
        return LD_ENOMEM;
    if (g->outside_wait_ms == 0 || proven_old(g, sh, now_ms))
        json_object_del(ann, LD_SHARDGROUP_NEW_OBJECT);
    else if (json_object_set_new(ann, LD_SHARDGROUP_NEW_OBJECT, json_string("true")) != 0)
        return LD_ENOMEM;
    return LD_OK;
}

enum ld_err ld_shardgroup_take_lease(const struct ld_shardgroup *g, uint32_t s,
                                     const char *ns, int64_t wall_us, int64_t now_ms,
                                     struct ld_lease *out)
{
    ld_lease_clear(out);
    if (s >= g->n_shards)
        return LD_EINVAL;
    const struct shard *sh = &g->shards[s];
    enum ld_err rc = LD_OK;
    bool same = names_us(g, sh);
    if (sh->present) {
        rc = ld_lease_copy(out, &sh->rec);
    } else {
        out->name = strdup(g->layout->shards[s].lease);
        out->namespace_ = strdup(ns);
        if (!out->name || !out->namespace_)
            rc = LD_ENOMEM;
    }
    if (rc == LD_OK)
        rc = ld_lease_spec_set_holder(&out->spec, g->identity);
    if (rc == LD_OK)
        rc = ld_lease_set_incarnation(out, g->incarnation);
    if (rc == LD_OK)
        rc = merge_metadata(out, sh->metadata);
    if (rc == LD_OK)
        rc = stamp(g, sh, out, now_ms);
    if (rc != LD_OK)
        return rc;
    struct ld_lease_spec *sp = &out->spec;
    sp->duration_s = (int32_t)(g->lease_duration_ms / 1000);
    sp->has_renew = true;
    sp->renew_us = wall_us;
    if (!same || !sp->has_acquire) {
        sp->has_acquire = true;
        sp->acquire_us = wall_us;
    }
    if (!same && sh->present)
        sp->transitions++;
    return LD_OK;
}

static enum ld_err emptied(struct ld_lease *out, const struct ld_lease *rec,
                           const char *md_json, int64_t wall_us)
{
    enum ld_err rc = ld_lease_copy(out, rec);
    if (rc == LD_OK)
        rc = ld_lease_spec_set_holder(&out->spec, "");
    if (rc == LD_OK)
        rc = ld_lease_set_incarnation(out, NULL); /* names no process now */
    if (rc == LD_OK)
        rc = merge_metadata(out, md_json);
    if (rc != LD_OK)
        return rc;
    out->spec.duration_s = 1;
    out->spec.has_acquire = out->spec.has_renew = true;
    out->spec.acquire_us = out->spec.renew_us = wall_us;
    return LD_OK;
}

enum ld_err ld_shardgroup_release_lease(const struct ld_shardgroup *g, uint32_t s,
                                        int64_t wall_us, int64_t now_ms,
                                        struct ld_lease *out)
{
    ld_lease_clear(out);
    if (s >= g->n_shards || !g->shards[s].present)
        return LD_EINVAL;
    enum ld_err rc = emptied(out, &g->shards[s].rec, g->shards[s].metadata, wall_us);
    return rc == LD_OK ? stamp(g, &g->shards[s], out, now_ms) : rc;
}

enum ld_err ld_shardgroup_label_lease(const struct ld_shardgroup *g, uint32_t s,
                                      struct ld_lease *out)
{
    ld_lease_clear(out);
    if (s >= g->n_shards || !g->shards[s].present)
        return LD_EINVAL;
    enum ld_err rc = ld_lease_copy(out, &g->shards[s].rec);
    if (rc == LD_OK)
        rc = merge_metadata(out, g->shards[s].metadata);
    if (rc != LD_OK)
        ld_lease_clear(out);
    return rc;
}

enum ld_err ld_shardgroup_evict_lease(const struct ld_shardgroup *g, uint32_t s,
                                      int64_t wall_us, struct ld_lease *out)
{
    ld_lease_clear(out);
    if (s >= g->n_shards)
        return LD_EINVAL;
    const struct member *m =
        find_member((struct ld_shardgroup *)g, holder_of(&g->shards[s]));
    if (!m || !m->rec.resource_version)
        return LD_EINVAL;
    char at[24];
    snprintf(at, sizeof(at), "%lld", (long long)wall_us); /* emptied's renewTime */
    json_t *ann = json_pack("{s:{s:s,s:s}}", "annotations", LD_SHARDGROUP_EVICTED_BY,
                            g->identity, LD_SHARDGROUP_EVICTED_AT, at);
    char *md_json = ann ? json_dumps(ann, JSON_COMPACT) : NULL;
    enum ld_err rc = md_json ? emptied(out, &m->rec, md_json, wall_us) : LD_ENOMEM;
    free(md_json);
    json_decref(ann);
    return rc;
}

void ld_shardgroup_give_back(struct ld_shardgroup *g, uint32_t s)
{
    if (s < g->n_shards) {
        g->shards[s].giving_back = true;
        g->shards[s].claimed = false;
    }
}

void ld_shardgroup_wrote(struct ld_shardgroup *g, uint32_t s, uint64_t term,
                         const char *rv_before, const struct ld_lease *stored,
                         int64_t now_ms)
{
    (void)now_ms;
    if (s >= g->n_shards || !stored)
        return;
    struct shard *sh = &g->shards[s];
    /* Our answer is news only when the view still shows what we wrote
     * over: anything else seen meanwhile is newer. */
    bool predecessor = rv_before
                           ? sh->present && same_rv(sh->rec.resource_version, rv_before)
                           : !sh->present;
    if (predecessor && observe_shard(g, sh, stored, now_ms) != LD_OK)
        shard_absent(sh); /* unknown now: nothing is claimed on it */
    /* Our own take or release, written after any wait: the record is the
     * group's again. */
    if (predecessor && stamped(stored))
        sh->outside_since_ms = INT64_MAX;
    bool giving_back = sh->giving_back;
    sh->giving_back = false;
    if (giving_back || !sh->present ||
        !same_rv(sh->rec.resource_version, stored->resource_version) ||
        !names_us(g, sh) || term != g->term || !g->own_leading)
        return;
    sh->claimed = true;
    sh->claim_term = term;
    sh->claim_from_ms =
        has_metadata(stored, "annotations", LD_SHARDGROUP_NEW_OBJECT, "true")
            ? sh->uid_seen_ms + g->outside_wait_ms
            : INT64_MIN;
}

void ld_shardgroup_write_failed(struct ld_shardgroup *g, uint32_t s)
{
    if (s < g->n_shards)
        g->shards[s].giving_back = false;
}

void ld_shardgroup_evicted(struct ld_shardgroup *g, const char *rv_before,
                           const struct ld_lease *stored, int64_t now_ms)
{
    const char *identity = stored ? member_identity(g, stored->name) : NULL;
    struct member *m = identity ? find_member(g, identity) : NULL;
    if (m && same_rv(m->rec.resource_version, rv_before))
        update_member(m, stored, now_ms, false, false);
}

/* ---- the view ------------------------------------------------------------ */

bool ld_shardgroup_unlisted(const struct ld_shardgroup *g, uint32_t s)
{
    return s < g->n_shards && g->shards[s].present && g->shards[s].unlisted;
}

bool ld_shardgroup_named(const struct ld_shardgroup *g, uint32_t s)
{
    return s < g->n_shards && names_us(g, &g->shards[s]);
}

bool ld_shardgroup_claimed(const struct ld_shardgroup *g, uint32_t s, int64_t now_ms)
{
    return s < g->n_shards && claim_valid(g, &g->shards[s]) &&
           now_ms >= g->shards[s].claim_from_ms;
}

/* Until when our claims may last by our view's age: a lease duration
 * after the view was last confirmed (issue #28: a shard Lease deleted or
 * rewritten while our watch lags is taken by another only outside_wait_ms
 * after it saw that, which is after this). */
static int64_t view_until(const struct ld_shardgroup *g)
{
    if (g->outside_wait_ms == 0)
        return INT64_MAX;
    if (g->confirmed_ms == INT64_MIN)
        return INT64_MIN;
    return g->confirmed_ms + g->lease_duration_ms;
}

void ld_shardgroup_confirm(struct ld_shardgroup *g, int64_t at_ms)
{
    if (at_ms > g->confirmed_ms)
        g->confirmed_ms = at_ms;
}

int64_t ld_shardgroup_lead_until(const struct ld_shardgroup *g)
{
    if (!g->own_leading)
        return INT64_MIN;
    int64_t v = view_until(g);
    return v < g->own_until_ms ? v : g->own_until_ms;
}

bool ld_shardgroup_owns(const struct ld_shardgroup *g, uint32_t s, int64_t now_ms)
{
    return ld_shardgroup_claimed(g, s, now_ms) && own_live(g, now_ms) &&
           now_ms < view_until(g);
}

uint32_t ld_shardgroup_owned(const struct ld_shardgroup *g, int64_t now_ms, uint32_t *out)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < g->n_shards; s++)
        if (ld_shardgroup_owns(g, s, now_ms))
            out[n++] = s;
    return n;
}

const struct ld_lease *ld_shardgroup_record(const struct ld_shardgroup *g, uint32_t s)
{
    return s < g->n_shards && g->shards[s].present ? &g->shards[s].rec : NULL;
}

bool ld_shardgroup_shard_observed(const struct ld_shardgroup *g, uint32_t s)
{
    return s < g->n_shards && g->shards[s].observed;
}

bool ld_shardgroup_range(const struct ld_shardgroup *g, uint32_t s,
                         char start[LD_SHARDRANGE_HEX_SIZE],
                         char end[LD_SHARDRANGE_HEX_SIZE],
                         char selector[LD_SHARDRANGE_SELECTOR_SIZE])
{
    if (!g->layout->numbered || s >= g->n_shards)
        return false;
    ld_shardrange_bounds(&g->layout->shards[s].range, start, end);
    if (selector)
        ld_shardrange_selector(&g->layout->shards[s].range, selector);
    return true;
}

bool ld_shardgroup_shard_of_key(const struct ld_shardgroup *g, const void *key,
                                size_t len, uint32_t *s, uint64_t *hash)
{
    return ld_shardlayout_shard_of_key(g->layout, key, len, s, hash);
}
