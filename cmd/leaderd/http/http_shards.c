/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_shards: shard-mode routes and renderers (see http_shards.h).
 */
#include "http_shards.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "http_paths.h"
#include "metrics.h"
#include "timefmt.h"
#include "utf8.h"

static const struct ld_shard_entry unobserved = {.leader = ""};

const struct ld_shard_entry *ld_http_shard_entry(const struct ld_shardsnap *t, uint32_t s)
{
    return t && s < t->n_shards ? &t->shards[s] : &unobserved;
}

void ld_http_shard_view_of(const struct ld_shardsnap *t, uint32_t s, int64_t now_ms,
                           struct ld_http_view *v)
{
    const struct ld_shard_entry *e = ld_http_shard_entry(t, s);
    v->observed = e->observed;
    v->is_leader = ld_shardsnap_leads(t, s, now_ms);
    v->term = e->term;
    snprintf(v->leader, sizeof(v->leader), "%s", e->leader);
}

static bool valid_utf8(const char *s, size_t len)
{
    while (len > 0) {
        size_t n = ld_utf8_seq(s, len);
        if (n == 0)
            return false;
        s += n;
        len -= n;
    }
    return true;
}

unsigned int ld_http_shard_target(const struct ld_shardlayout *l, const char *path,
                                  const char *key, size_t key_len,
                                  struct ld_http_target *out)
{
    static const char prefix[] = LD_HTTP_PATH_SHARDS "/";
    memset(out, 0, sizeof(*out));
    if (strncmp(path, prefix, sizeof(prefix) - 1) == 0) {
        if (ld_shardlayout_find(l, path + sizeof(prefix) - 1, &out->shard))
            return 200;
        snprintf(out->err, sizeof(out->err),
                 "no such shard: GET /shards lists the shards of this group");
        return 404;
    }
    if (strcmp(path, LD_HTTP_PATH_SHARD_OF_KEY) != 0)
        return 0;
    if (!l->numbered) {
        snprintf(out->err, sizeof(out->err),
                 "GET /shard?key= needs numbered shards (--shards N): these are named");
        return 400;
    }
    if (!key || key_len == 0) {
        snprintf(out->err, sizeof(out->err), "key: missing or empty (GET /shard?key=K)");
        return 400;
    }
    if (!valid_utf8(key, key_len)) {
        snprintf(out->err, sizeof(out->err), "key: not valid UTF-8");
        return 400;
    }
    out->by_key = true;
    out->key = key;
    out->key_len = key_len;
    ld_shardlayout_shard_of_key(l, key, key_len, &out->shard, &out->hash);
    return 200;
}

/* MicroTime of e's renewal, or null. New reference (NULL on failure). */
static json_t *renewed_json(const struct ld_shard_entry *e)
{
    char ts[LD_MICROTIME_LEN];
    return e->has_renewed_at ? json_string(ld_microtime_format(e->renewed_at_us, ts))
                             : json_null();
}

/* Appends "range" and "selector" for a numbered shard; 0 or -1. */
static int add_range(json_t *o, const struct ld_shardlayout *l, uint32_t s)
{
    char start[LD_SHARDRANGE_HEX_SIZE], end[LD_SHARDRANGE_HEX_SIZE];
    char selector[LD_SHARDRANGE_SELECTOR_SIZE];
    if (!l->numbered)
        return 0;
    ld_shardrange_bounds(&l->shards[s].range, start, end);
    ld_shardrange_selector(&l->shards[s].range, selector);
    json_t *range = json_pack("[s, s]", start, end);
    if (json_object_set_new(o, "range", range) != 0 ||
        json_object_set_new(o, "selector", json_string(selector)) != 0)
        return -1;
    return 0;
}

/* One element of /shards' "shards": shard s with its election e, mine
 * saying whether this replica leads it now. New reference, NULL on
 * failure. */
static json_t *shard_item(const struct ld_shardlayout *l, uint32_t s,
                          const struct ld_shard_entry *e, bool mine)
{
    /* "o" steals the renewed_at value, also when packing fails. */
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:b, s:I, s:o}", "shard", l->shards[s].id, "lease",
                  l->shards[s].lease, "leader", e->leader, "is_leader", mine, "term",
                  (json_int_t)e->term, "renewed_at", renewed_json(e));
    if (o && add_range(o, l, s) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* /shards as a JSON object; new reference, NULL on failure. */
static json_t *shards_json(const struct ld_shardlayout *l, const struct ld_snapshot *snap,
                           const struct ld_shardsnap *t, int64_t now_ms)
{
    json_t *members = json_array(), *owned = json_array(), *shards = json_array();
    /* "o" steals the three arrays, also when packing fails. */
    json_t *o = json_pack("{s:s, s:s, s:b, s:o, s:o, s:o}", "group", snap->lease,
                          "identity", snap->identity, "observed", t && t->observed,
                          "members", members, "owned", owned, "shards", shards);
    if (!o)
        return NULL;
    for (uint32_t i = 0; t && i < t->n_members; i++) {
        /* Member identities are valid UTF-8 (holder identities), but a
         * name jansson refuses must not fail the whole answer. */
        json_t *m = json_string(t->members[i]);
        if (m && json_array_append_new(members, m) != 0)
            goto fail;
    }
    for (uint32_t s = 0; s < l->n_shards; s++) {
        const struct ld_shard_entry *e = ld_http_shard_entry(t, s);
        bool mine = ld_shardsnap_leads(t, s, now_ms);
        json_t *item = shard_item(l, s, e, mine);
        if (!item || json_array_append_new(shards, item) != 0)
            goto fail;
        if (mine && json_array_append_new(owned, json_string(l->shards[s].id)) != 0)
            goto fail;
    }
    return o;
fail:
    json_decref(o);
    return NULL;
}

char *ld_http_render_shards(const struct ld_shardlayout *l,
                            const struct ld_snapshot *snap, const struct ld_shardsnap *t,
                            int64_t now_ms)
{
    json_t *o = shards_json(l, snap, t, now_ms);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

/* Shard s's election as a struct ld_snapshot, so that its body is the
 * /leader body: lease "NAMESPACE/NAME-ID", the rest from its entry. */
static void shard_snapshot(const struct ld_shardlayout *l, const struct ld_snapshot *snap,
                           const struct ld_shardsnap *t, uint32_t s,
                           struct ld_snapshot *out)
{
    const struct ld_shard_entry *e = ld_http_shard_entry(t, s);
    const char *slash = strchr(snap->lease, '/');
    int ns_len = slash ? (int)(slash - snap->lease) : 0;
    *out = *snap;
    snprintf(out->lease, sizeof(out->lease), "%.*s/%s", ns_len, snap->lease,
             l->shards[s].lease);
    snprintf(out->leader, sizeof(out->leader), "%s", e->leader);
    out->term = e->term;
    out->observed = e->observed;
    out->leading = e->leading;
    out->lead_until_ms = e->leading ? ld_shardsnap_lead_until(t, s) : 0;
    out->has_renewed_at = e->has_renewed_at;
    out->renewed_at_us = e->renewed_at_us;
    out->last_renew_wall_us = e->last_renew_wall_us;
}

char *ld_http_render_shard(const struct ld_shardlayout *l, const struct ld_snapshot *snap,
                           const struct ld_shardsnap *t,
                           const struct ld_http_target *target, int64_t now_ms)
{
    struct ld_snapshot one;
    char hash[LD_SHARDRANGE_HEX_SIZE];
    char *text = NULL;
    shard_snapshot(l, snap, t, target->shard, &one);
    json_t *o = ld_http_leader_json(&one, now_ms);
    if (!o ||
        json_object_set_new(o, "shard", json_string(l->shards[target->shard].id)) != 0)
        goto out;
    if (target->by_key) {
        ld_shardrange_hex(target->hash, hash);
        if (json_object_set_new(o, "key", json_stringn(target->key, target->key_len)) !=
                0 ||
            json_object_set_new(o, "hash", json_string(hash)) != 0)
            goto out;
    }
    text = json_dumps(o, JSON_COMPACT);
out:
    json_decref(o);
    return text;
}

char *ld_http_render_shards_event(bool with_id, uint64_t id,
                                  const struct ld_shardlayout *l,
                                  const struct ld_snapshot *snap,
                                  const struct ld_shardsnap *t, int64_t now_ms,
                                  size_t *len)
{
    return ld_http_sse_frame(with_id, id, "shards",
                             ld_http_render_shards(l, snap, t, now_ms), len);
}

enum route { R_NONE, R_SHARDS, R_SHARD, R_WATCH, R_METRICS, R_SINGLE, R_GONE };

static enum route find_route(const char *path)
{
    static const struct {
        const char *path;
        enum route r;
    } table[] = {{LD_HTTP_PATH_SHARDS, R_SHARDS},  {LD_HTTP_PATH_SHARD_OF_KEY, R_SHARD},
                 {LD_HTTP_PATH_WATCH, R_WATCH},    {LD_HTTP_PATH_METRICS, R_METRICS},
                 {LD_HTTP_PATH_HEALTHZ, R_SINGLE}, {LD_HTTP_PATH_READYZ, R_SINGLE},
                 {LD_HTTP_PATH_LEADER, R_GONE},    {LD_HTTP_PATH_ROOT, R_GONE},
                 {LD_HTTP_PATH_RESIGN, R_GONE}};
    static const char prefix[] = LD_HTTP_PATH_SHARDS "/";
    if (strncmp(path, prefix, sizeof(prefix) - 1) == 0)
        return R_SHARD;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(path, table[i].path) == 0)
            return table[i].r;
    }
    return R_NONE;
}

int ld_http_route_shards(const struct ld_http_shard_request *rq,
                         const struct ld_shardlayout *l, const struct ld_snapshot *snap,
                         const struct ld_shardsnap *t, struct ld_metrics *m,
                         int64_t now_ms, struct ld_http_reply *out)
{
    struct ld_http_target target;
    size_t len = 0;
    const char *path = rq->path ? rq->path : "";
    memset(out, 0, sizeof(*out));
    enum route r = find_route(path);
    if (r == R_NONE)
        return ld_http_reply_error(out, 404, "not found");
    if (r == R_GONE)
        return ld_http_reply_error(
            out, 404,
            "this replica runs a shard group (--shards): see GET /shards, "
            "GET /shards/ID and GET /shard?key=K");
    if (!rq->method ||
        (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0)) {
        out->allow = true;
        return ld_http_reply_error(out, 405, "method not allowed: use GET or HEAD");
    }
    switch (r) {
    case R_SHARDS:
        return ld_http_reply_owned(out, t && t->observed ? 200 : 503, LD_HTTP_CT_JSON,
                                   ld_http_render_shards(l, snap, t, now_ms));
    case R_SHARD: {
        unsigned int status =
            ld_http_shard_target(l, path, rq->key, rq->key_len, &target);
        if (status != 200)
            return ld_http_reply_error(out, status, target.err);
        bool ours = ld_shardsnap_leads(t, target.shard, now_ms);
        return ld_http_reply_owned(out, ours ? 200 : 503, LD_HTTP_CT_JSON,
                                   ld_http_render_shard(l, snap, t, &target, now_ms));
    }
    case R_WATCH:
        if (ld_http_reply_owned(
                out, 200, LD_HTTP_CT_SSE,
                ld_http_render_shards_event(false, 0, l, snap, t, now_ms, &len)) != 0)
            return -1;
        out->len = len;
        return 0;
    case R_METRICS:
        return ld_http_reply_metrics(out, m, snap, l, t, now_ms);
    case R_SINGLE: /* /healthz and /readyz judge the loop, as in single mode */
        return ld_http_route(rq->method, path, snap, m, now_ms, out);
    case R_NONE:
    case R_GONE: /* answered above */
        break;
    }
    return -1;
}
