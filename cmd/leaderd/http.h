/*
 * http: the sidecar's HTTP server on libmicrohttpd (/leader, /healthz,
 * /readyz, /metrics, /). Handlers copy the state snapshot under its mutex
 * and render; they never wait on the election loop or the API. Routing and
 * rendering are plain functions so they can be tested without a socket.
 */
#ifndef LEADERD_HTTP_H
#define LEADERD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "state.h"

struct ld_http;

/* Binds host:port (host "" = all interfaces, IPv6 and IPv4 when the system
 * allows, else IPv4; "0.0.0.0" = all IPv4; an IPv6 literal without
 * brackets; a host name is resolved; port 0 = any free port, see
 * ld_http_port) and serves from an internal thread. st and m are borrowed
 * and must outlive the server. Returns a new server (stop with
 * ld_http_stop) or NULL with one line in err, e.g. "listen 0.0.0.0:4040:
 * Address already in use". */
struct ld_http *ld_http_start(const char *host, int port, struct ld_state *st,
                              struct ld_metrics *m, char *err, size_t errlen);

/* Stops serving, closes the socket and frees h. NULL-safe. */
void ld_http_stop(struct ld_http *h);

/* The port actually bound (useful after asking for port 0). */
int ld_http_port(const struct ld_http *h);

/* One answer, as the server would send it. */
struct ld_http_reply {
    unsigned int status;
    const char *content_type; /* static */
    bool allow;               /* send "Allow: GET, HEAD" (405) */
    char *body;               /* owned (free with ld_http_reply_clear) */
    size_t len;
};

/* Answers method + path (no query string; it is ignored) from the snapshot
 * as of now_ms (monotonic). m may be NULL (then /metrics has no API
 * series). Returns 0 with out filled, or -1 on allocation failure. */
int ld_http_route(const char *method, const char *path, const struct ld_snapshot *snap,
                  struct ld_metrics *m, int64_t now_ms, struct ld_http_reply *out);
void ld_http_reply_clear(struct ld_http_reply *r); /* NULL-safe */

/* The GET /leader body: {"lease","identity","leader","is_leader","term",
 * "renewed_at" (MicroTime or null),"observed"}, is_leader judged at now_ms.
 * Returns a new string (free()) or NULL on allocation failure. The status
 * to send with it is 200 when is_leader, else 503. */
char *ld_http_render_leader(const struct ld_snapshot *snap, int64_t now_ms);

/* Liveness as /healthz judges it at now_ms: true when healthy; otherwise
 * false with the reason in why (why may be NULL). Unhealthy when
 * health_error is set, when the loop's heartbeat is older than
 * stale_after_ms, or when the snapshot still claims leadership more than
 * stale_after_ms after lead_until_ms (a wedged leader). stale_after_ms <= 0
 * disables the two time checks. */
bool ld_http_healthy(const struct ld_snapshot *snap, int64_t now_ms, char *why,
                     size_t whylen);

#endif
