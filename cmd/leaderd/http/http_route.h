/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_route: what the HTTP server says, as plain functions of a snapshot
 * and a time (no socket, no thread, no server state): the route table,
 * the /leader and /watch renderers, /healthz's judgement and the parsing
 * of long-poll arguments and Last-Event-ID. It implements those parts of
 * http.h; this header adds what the other http_* modules share with it.
 * Nothing here keeps state between calls; every function is thread-safe.
 */
#ifndef LEADERD_HTTP_ROUTE_H
#define LEADERD_HTTP_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "http.h"
#include "lease.h"
#include "metrics.h"
#include "state.h"

/* Content types of the replies (static strings). */
#define LD_HTTP_CT_JSON "application/json"
#define LD_HTTP_CT_TEXT "text/plain; charset=utf-8"
#define LD_HTTP_CT_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define LD_HTTP_CT_SSE "text/event-stream"

/* What /leader shows that a change notification is about. */
struct ld_http_view {
    bool observed;
    bool is_leader;
    int64_t term;
    char leader[LD_LEASE_MAX_HOLDER + 1];
};

/* The GET /leader body of ld_http_render_leader as a new JSON object
 * (json_decref), or NULL on allocation failure. */
json_t *ld_http_leader_json(const struct ld_snapshot *snap, int64_t now_ms);

/* Fills v from s, is_leader judged at now_ms. */
void ld_http_view_of(const struct ld_snapshot *s, int64_t now_ms, struct ld_http_view *v);

/* True when a and b show the same. */
bool ld_http_view_eq(const struct ld_http_view *a, const struct ld_http_view *b);

/* True when v differs from what p says its caller has seen (as
 * ld_http_poll_differs). */
bool ld_http_view_differs(const struct ld_http_poll *p, const struct ld_http_view *v);

/* One /watch event for snap at now_ms: "id: ID\n" (when with_id), then
 * "event: leader\ndata: JSON\n\n". Returns a new string (free()) with its
 * length in *len, or NULL on allocation failure. */
char *ld_http_render_event(bool with_id, uint64_t id, const struct ld_snapshot *snap,
                           int64_t now_ms, size_t *len);

/* out = status, ct and body (taken over; NULL: -1, out untouched). */
int ld_http_reply_owned(struct ld_http_reply *out, unsigned int status, const char *ct,
                        char *body);
/* out = status and {"error": msg} (msg UTF-8). 0, or -1 without memory. */
int ld_http_reply_error(struct ld_http_reply *out, unsigned int status, const char *msg);

/* out = the /metrics exposition of m (NULL: without the API series) for
 * snap at now_ms, in shard mode (l non-NULL) with the per-shard
 * lines. 0, or -1 on allocation failure. */
int ld_http_reply_metrics(struct ld_http_reply *out, struct ld_metrics *m,
                          const struct ld_snapshot *snap, const struct ld_shardlayout *l,
                          const struct ld_shardsnap *t, int64_t now_ms);

/* One /watch event: "id: ID\n" (when with_id), "event: EVENT\n", "data:
 * JSON\n\n". Takes json over (freed here; NULL gives NULL). Returns a new
 * string (free()) with its length in *len, or NULL on allocation failure. */
char *ld_http_sse_frame(bool with_id, uint64_t id, const char *event, char *json,
                        size_t *len);

/* Reads a Last-Event-ID as our ids are written (decimal digits); s may be
 * NULL. Returns false, *out untouched, for anything else. */
bool ld_http_parse_event_id(const char *s, uint64_t *out);

/* A non-negative decimal integer with nothing around it (a query's wait=
 * or term=): 0 with *out set, or -1. */
int ld_http_parse_count(const char *s, int64_t *out);

#endif
