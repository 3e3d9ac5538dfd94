/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_shards: what the HTTP server says in shard mode (--shards, see
 * docs/http-api.md, "Shard mode"), as plain functions of the group, the snapshot,
 * a shard table and a time (no socket, no thread, no server state): the
 * shard-mode route table, the /shards, /shards/ID and /shard?key=K bodies,
 * the "shards" /watch event and the resolution of a request to its shard.
 * Names, Lease names and ranges come from the group's layout
 * (shardlayout.h), never from the group; the layout and the table are
 * immutable (shardsnap.h), so nothing here needs the state's mutex. Every
 * function is thread-safe.
 *
 * A NULL table (nothing published yet) reads as every shard unobserved,
 * free and not ours; so does a shard the table does not have.
 */
#ifndef LEADERD_HTTP_SHARDS_H
#define LEADERD_HTTP_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "http_route.h"
#include "shardlayout.h"
#include "shardsnap.h"
#include "state.h"

/* One request in shard mode. key is /shard's key= as decoded (a form
 * field: percent-escapes and '+' undone), key_len bytes long and borrowed;
 * NULL when not given. */
struct ld_http_shard_request {
    const char *method;
    const char *path; /* no query string */
    const char *key;
    size_t key_len;
};

/* The shard a request for /shards/ID or /shard?key=K is about. */
struct ld_http_target {
    uint32_t shard;
    bool by_key;     /* /shard: key and hash are set */
    const char *key; /* borrowed from the request */
    size_t key_len;
    uint64_t hash; /* FNV-1a64 of the key */
    char err[160]; /* why not, for a 400 or 404 (valid UTF-8) */
};

/* Resolves path (and key, as in struct ld_http_shard_request) against l:
 * returns 200 with out filled, 404 for /shards/ID with an ID that is no
 * shard, 400 for /shard with named shards, without a key, with an empty
 * one or one that is not UTF-8 (reason in out->err), or 0 when path is
 * neither /shards/ID nor /shard. */
unsigned int ld_http_shard_target(const struct ld_shardlayout *l, const char *path,
                                  const char *key, size_t key_len,
                                  struct ld_http_target *out);

/* Shard s of t, or an unobserved free shard when t is NULL or lacks it.
 * Borrowed from t (or static). */
const struct ld_shard_entry *ld_http_shard_entry(const struct ld_shardsnap *t,
                                                 uint32_t s);

/* What /shards/ID shows of shard s of t, is_leader judged at now_ms. */
void ld_http_shard_view_of(const struct ld_shardsnap *t, uint32_t s, int64_t now_ms,
                           struct ld_http_view *v);

/* The GET /shards body: {"group","identity","observed","members","owned",
 * "shards":[{"shard","lease","leader","is_leader","term","renewed_at"
 * (MicroTime or null), and for numbered shards "range" and "selector"}]},
 * "owned" and every "is_leader" judged at now_ms. group comes from
 * snap->lease and identity from snap->identity. Returns a new string
 * (free()) or NULL on allocation failure. The status to send with it is
 * 200 when t says observed, else 503. */
char *ld_http_render_shards(const struct ld_shardlayout *l,
                            const struct ld_snapshot *snap, const struct ld_shardsnap *t,
                            int64_t now_ms);

/* The GET /shards/ID body for target->shard (a target that
 * ld_http_shard_target found in l): the /leader body of that
 * shard (lease "NAMESPACE/NAME-ID") plus "shard", and for a target by key
 * "key" and "hash" ("0x" + 16 hex digits). Returns a new string (free())
 * or NULL on allocation failure. The status to send with it is 200 when
 * its is_leader, else 503. */
char *ld_http_render_shard(const struct ld_shardlayout *l, const struct ld_snapshot *snap,
                           const struct ld_shardsnap *t,
                           const struct ld_http_target *target, int64_t now_ms);

/* One shard-mode /watch event: "id: ID\n" (when with_id), then
 * "event: shards\ndata: JSON\n\n" with the /shards body. Returns a new
 * string (free()) with its length in *len, or NULL on allocation failure. */
char *ld_http_render_shards_event(bool with_id, uint64_t id,
                                  const struct ld_shardlayout *l,
                                  const struct ld_snapshot *snap,
                                  const struct ld_shardsnap *t, int64_t now_ms,
                                  size_t *len);

/* Answers rq in shard mode from l, snap and t as of now_ms, as a request
 * that does not wait (as ld_http_route does in single-Lease mode):
 * /shards, /shards/ID and /shard?key=K as above, /watch as the single
 * event a new stream starts with (without its id), /healthz, /readyz and
 * /metrics as ld_http_route (with the shard metrics), and GET /leader,
 * GET / and /resign (any method) 404 naming /shards. Other methods than
 * GET and HEAD get 405, unknown paths 404, both with a JSON error. m may
 * be NULL. Returns 0 with out filled, or -1 on allocation failure. */
int ld_http_route_shards(const struct ld_http_shard_request *rq,
                         const struct ld_shardlayout *l, const struct ld_snapshot *snap,
                         const struct ld_shardsnap *t, struct ld_metrics *m,
                         int64_t now_ms, struct ld_http_reply *out);

#endif
