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
    char *identity; /* owned; from the Lease name */
    char *uid;      /* owned; metadata.uid of the record seen, or NULL */
    struct ld_lease_spec spec;
    int64_t changed_ms; /* when the record last changed, as seen here */
};

struct shard {
    char *metadata; /* owned JSON */
    char *holder;   /* owned; "" when free or absent */
    int64_t holder_valid_until_ms;
    bool observed;
    bool leading;
    int64_t lead_until_ms;
};

struct ld_shardgroup {
    /* The names and ranges (one reference): readers may hold it longer. */
    struct ld_shardlayout *layout;
    char *label_value; /* of LD_SHARDGROUP_LABEL: see group_label_value */
    char *identity;
    char *selector;
    char *member_selector;
    char *member_lease;
    char *member_metadata;
    char *member_prefix; /* "NAME-member-" */
    uint32_t n_shards;
    struct shard *shards;
    int64_t lease_duration_ms;

    bool own_leading;
    int64_t own_until_ms;

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
    uint32_t *target;
    bool *contend;
    const char **assigned_live; /* the live list target indexes into */
    bool assigned;              /* target is from an assign after the last news */
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
    meta = json_pack("{s:O}", "labels", labels);
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

static enum ld_err build_shards(struct ld_shardgroup *g, struct ld_errinfo *err)
{
    char buf[SHOWN_MAX + 4];
    for (uint32_t s = 0; s < g->n_shards; s++) {
        struct shard *sh = &g->shards[s];
        const char *lease = g->layout->shards[s].lease;
        sh->holder = strdup("");
        sh->holder_valid_until_ms = INT64_MIN;
        if (!sh->holder)
            return ld_errinfo_set(err, LD_ENOMEM, "shard group: out of memory");
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
    /* Room for our own identity in the live lists before any other member
     * is seen; reserve_member grows them with the table. */
    g->live = calloc(1, sizeof(*g->live));
    g->assigned_live = calloc(1, sizeof(*g->assigned_live));
    if (!g->layout || !g->identity || !g->label_value || !g->selector ||
        !g->member_selector || !g->member_prefix || !g->member_lease || !g->shards ||
        !g->owners || !g->target || !g->contend || !g->live || !g->assigned_live)
        return ld_errinfo_set(err, LD_ENOMEM, "shard group: out of memory");
    g->n_shards = cfg->n_shards;
    g->lease_duration_ms = cfg->lease_duration_ms;
    g->own_until_ms = INT64_MIN;
    if (!ld_dns1123_subdomain(g->member_lease))
        return ld_errinfo_set(err, LD_EINVAL,
                              "member Lease name %s (lease name, \"" MEMBER_INFIX
                              "\", identity) is not a valid Lease name "
                              "(DNS-1123 subdomain, at most %d characters)",
                              shown(g->member_lease, buf), LD_DNS1123_SUBDOMAIN_MAX);
    g->member_metadata = metadata_json(
        g->label_value, NULL, cfg->pod_name ? cfg->pod_name : g->identity, cfg->pod_uid);
    if (!g->member_metadata)
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
    free(m->uid);
    ld_lease_spec_clear(&m->spec);
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
        free(sh->holder);
    }
    for (uint32_t i = 0; i < g->n_members; i++)
        member_clear(&g->members[i]);
    free(g->members);
    free(g->shards);
    free(g->owners);
    free(g->target);
    free(g->contend);
    free(g->live);
    free(g->assigned_live);
    for (unsigned i = 0; i < GONE_UIDS; i++)
        free(g->gone_uids[i]);
    ld_shardlayout_unref(g->layout);
    free(g->label_value);
    free(g->identity);
    free(g->selector);
    free(g->member_selector);
    free(g->member_lease);
    free(g->member_metadata);
    free(g->member_prefix);
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
    g->cap_members = cap;
    return LD_OK;
}

static enum ld_err update_member(struct member *m, const struct ld_lease *lease,
                                 int64_t now_ms)
{
    struct ld_lease_spec spec = {0};
    char *uid = lease->uid ? strdup(lease->uid) : NULL;

    if ((lease->uid && !uid) || ld_lease_spec_copy(&spec, &lease->spec) != LD_OK) {
        free(uid);
        ld_lease_spec_clear(&spec);
        return LD_ENOMEM;
    }
    bool same_object = !m->uid || !uid || strcmp(m->uid, uid) == 0;
    if (!same_object || !ld_lease_spec_equal(&m->spec, &spec))
        m->changed_ms = now_ms;
    ld_lease_spec_clear(&m->spec);
    m->spec = spec;
    free(m->uid);
    m->uid = uid;
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

static bool member_live(const struct ld_shardgroup *g, const struct member *m,
                        int64_t now_ms);

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

    if (!identity || strcmp(identity, g->identity) == 0 || is_gone(g, lease->uid))
        return LD_OK;
    g->assigned = false;
    struct member *m = find_member(g, identity);
    if (m)
        return update_member(m, lease, now_ms);
    struct member *slot = NULL;
    enum ld_err rc = reserve_member(g);
    if (rc == LD_ETOOBIG && (slot = stale_member(g, now_ms)) != NULL)
        rc = LD_OK;
    if (rc != LD_OK)
        return rc;
    struct member fresh = {.identity = strdup(identity), .changed_ms = now_ms};
    if (!fresh.identity)
        return LD_ENOMEM;
    /* A record first seen counts from now_ms, as the engine's first
     * observation of a Lease does. */
    rc = update_member(&fresh, lease, now_ms);
    if (rc != LD_OK) {
        member_clear(&fresh);
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

void ld_shardgroup_observe_member_deleted(struct ld_shardgroup *g,
                                          const struct ld_lease *gone)
{
    const char *identity = gone ? member_identity(g, gone->name) : NULL;
    struct member *m = identity ? find_member(g, identity) : NULL;

    if (identity && gone->uid && !is_gone(g, gone->uid)) {
        char *uid = strdup(gone->uid);
        if (uid) { /* without it, a late list may count the member a while */
            free(g->gone_uids[g->gone_next]);
            g->gone_uids[g->gone_next] = uid;
            g->gone_next = (g->gone_next + 1) % GONE_UIDS;
        }
    }
    if (!m || (m->uid && gone->uid && strcmp(m->uid, gone->uid) != 0))
        return;
    g->assigned = false;
    member_clear(m);
    *m = g->members[--g->n_members];
}

void ld_shardgroup_observe_own(struct ld_shardgroup *g,
                               const struct ld_election_status *st)
{
    g->own_leading = st->leading;
    g->own_until_ms = st->lead_until_ms;
}

static int64_t member_expiry(const struct ld_shardgroup *g, const struct member *m)
{
    int64_t d = m->spec.duration_s > 0 ? (int64_t)m->spec.duration_s * 1000
                                       : g->lease_duration_ms;
    return m->changed_ms + d;
}

static bool member_live(const struct ld_shardgroup *g, const struct member *m,
                        int64_t now_ms)
{
    return ld_lease_spec_held_by(&m->spec, m->identity) && now_ms < member_expiry(g, m);
}

static bool own_live(const struct ld_shardgroup *g, int64_t now_ms)
{
    return g->own_leading && now_ms < g->own_until_ms;
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Fills out (room for n_members + 1) with the live identities, sorted. */
static uint32_t live_list(const struct ld_shardgroup *g, int64_t now_ms, const char **out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->n_members; i++)
        if (member_live(g, &g->members[i], now_ms))
            out[n++] = g->members[i].identity;
    if (own_live(g, now_ms))
        out[n++] = g->identity;
    qsort(out, n, sizeof(*out), by_str);
    return n;
}

uint32_t ld_shardgroup_members(struct ld_shardgroup *g, int64_t now_ms,
                               const char *const **out)
{
    uint32_t n = live_list(g, now_ms, g->live);
    *out = g->live;
    return n;
}

/* ---- shards and the assignment ------------------------------------------- */

enum ld_err ld_shardgroup_observe_shard(struct ld_shardgroup *g, uint32_t s,
                                        const struct ld_election_status *st)
{
    if (s >= g->n_shards)
        return LD_EINVAL;
    struct shard *sh = &g->shards[s];
    const char *leader = st->leader ? st->leader : "";
    if (strcmp(sh->holder, leader) != 0) {
        char *copy = strdup(leader);
        if (!copy)
            return LD_ENOMEM;
        free(sh->holder);
        sh->holder = copy;
    }
    sh->holder_valid_until_ms = st->holder_valid_until_ms;
    sh->observed = st->observed;
    sh->leading = st->leading;
    sh->lead_until_ms = st->lead_until_ms;
    return LD_OK;
}

bool ld_shardgroup_observed(const struct ld_shardgroup *g)
{
    for (uint32_t s = 0; s < g->n_shards; s++)
        if (!g->shards[s].observed)
            return false;
    return true;
}

static bool holder_valid(const struct shard *sh, int64_t now_ms)
{
    return sh->holder[0] && now_ms < sh->holder_valid_until_ms;
}

static int64_t earliest_change(const struct ld_shardgroup *g, int64_t now_ms)
{
    int64_t next = INT64_MAX;
    for (uint32_t i = 0; i < g->n_members; i++) {
        const struct member *m = &g->members[i];
        if (member_live(g, m, now_ms) && member_expiry(g, m) < next)
            next = member_expiry(g, m);
    }
    if (own_live(g, now_ms) && g->own_until_ms < next)
        next = g->own_until_ms;
    for (uint32_t s = 0; s < g->n_shards; s++) {
        const struct shard *sh = &g->shards[s];
        if (holder_valid(sh, now_ms) && sh->holder_valid_until_ms < next)
            next = sh->holder_valid_until_ms;
    }
    return next;
}

enum ld_err ld_shardgroup_assign(struct ld_shardgroup *g, int64_t now_ms,
                                 int64_t *next_ms)
{
    const char **live = g->assigned_live;
    uint32_t n_live = live_list(g, now_ms, live);

    for (uint32_t s = 0; s < g->n_shards; s++)
        g->owners[s] = holder_valid(&g->shards[s], now_ms) ? g->shards[s].holder : NULL;
    enum ld_err rc = ld_shardassign(g->n_shards, g->owners, n_live, live, g->target);
    if (rc != LD_OK)
        return rc;
    for (uint32_t s = 0; s < g->n_shards; s++)
        g->contend[s] = g->target[s] != LD_SHARD_NOBODY &&
                        strcmp(live[g->target[s]], g->identity) == 0;
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

/* ---- the view ------------------------------------------------------------ */

bool ld_shardgroup_owns(const struct ld_shardgroup *g, uint32_t s, int64_t now_ms)
{
    return s < g->n_shards &&
           ld_leads_at(g->shards[s].leading, g->shards[s].lead_until_ms, now_ms);
}

uint32_t ld_shardgroup_owned(const struct ld_shardgroup *g, int64_t now_ms, uint32_t *out)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < g->n_shards; s++)
        if (ld_shardgroup_owns(g, s, now_ms))
            out[n++] = s;
    return n;
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
