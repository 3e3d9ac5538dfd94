/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http: the sidecar's HTTP server on libmicrohttpd (/leader, /healthz,
 * /readyz, /metrics, /, the /leader long-poll, the /watch event stream and
 * POST /resign; in shard mode (ld_http_shard_mode, on a state with a
 * group's layout), /shards, /shards/ID and /shard?key=K with their
 * long-polls instead of /leader, / and POST /resign, see http_shards.h).
 * Handlers copy the state snapshot under its mutex (in shard mode also
 * take a reference to the shard table) and render after unlocking; they
 * never wait on the election loop or the API, and held requests are
 * suspended connections, so they never occupy the server's thread.
 * Routing, rendering and query parsing are plain functions, testable
 * without a socket.
 *
 * Implemented by one module per job: http_route (the plain functions),
 * http_shards (those of shard mode), http_hold (held long-polls, /watch
 * streams and their notifier thread), http_conn (idle connections and
 * eviction), http_listen (the socket, limits, start, stop and counters)
 * and http_dispatch (MHD's request handler, which ties them together).
 * Their headers are internal to the HTTP layer, but for http_socket.h
 * (the listening socket, the limits, MHD's log) and http_conn.h (idle
 * connections), the plumbing the API proxy's server shares.
 */
#ifndef LEADERD_HTTP_H
#define LEADERD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "lease.h"
#include "metrics.h"
#include "state.h"

struct ld_http;

/* Defaults of struct ld_http_options (a zero field means its default). */
#define LD_HTTP_HEARTBEAT_MS 15000   /* ": ping" comment on /watch streams */
#define LD_HTTP_MAX_WAIT_MS 60000    /* long-poll wait= is capped to this */
#define LD_HTTP_MAX_HELD 256         /* long-polls held at once */
#define LD_HTTP_MAX_SUBSCRIBERS 256  /* /watch streams at once */
#define LD_HTTP_MAX_CONNECTIONS 1024 /* all connections; see ld_http_start_opts */
#define LD_HTTP_IDLE_TIMEOUT_S 15    /* silent connections are closed after this */

/* What the server answers: the routes of one Lease (GET /leader, POST
 * /resign, ...) or of a shard group (GET /shards/ID, POST
 * /shards/ID/drained, ...), each mode's in one table (http_dispatch.c). */
struct ld_http_mode;
extern const struct ld_http_mode ld_http_lease_mode;
extern const struct ld_http_mode ld_http_shard_mode; /* needs the state's layout */

struct ld_http_options {
    /* NULL: one Lease's. ld_http_shard_mode needs a state with a shard
     * layout (ld_state_set_layout): LD_EINVAL otherwise. */
    const struct ld_http_mode *mode;
    int64_t heartbeat_ms;
    int64_t max_wait_ms;
    unsigned int max_held;
    unsigned int max_subscribers;
    unsigned int max_connections;
    unsigned int idle_timeout_s;
};

/* Binds host:port (host "" = all interfaces, IPv6 and IPv4 when the system
 * allows, else IPv4; "0.0.0.0" = all IPv4; an IPv6 literal without
 * brackets; a host name is resolved; port 0 = any free port, see
 * ld_http_port) and serves from an internal thread, with a second thread
 * that resumes held requests (it listens to st's publishes). st and m are
 * borrowed and must outlive the server. Returns a new server (stop with
 * ld_http_stop) or NULL with err (caller-owned, may be NULL) set: its code
 * LD_EINVAL for a port out of range or a host that does not resolve,
 * LD_ENOMEM, or LD_EIO when the system refused the socket, the bind (e.g.
 * "listen 0.0.0.0:4040: Address already in use") or a thread, or no
 * resolver answered; its msg one line. Same as ld_http_start_opts with the defaults. */
struct ld_http *ld_http_start(const char *host, int port, struct ld_state *st,
                              struct ld_metrics *m, struct ld_errinfo *err);

/* ld_http_start with limits (opts NULL or zero fields = the defaults;
 * opts is read during the call only). The connection limit is also kept
 * 64 below the process's RLIMIT_NOFILE soft limit as it stands at the
 * call, so accept() never runs out of descriptors: raise that limit first
 * to allow more. /watch streams and held long-polls are capped at a half
 * and a quarter of the connection limit as well, so probes always find
 * room: when the server is nearly full, the connection that has been idle
 * (no request in progress) the longest is closed to make room for a new
 * one. Errors as ld_http_start. */
struct ld_http *ld_http_start_opts(const char *host, int port, struct ld_state *st,
                                   struct ld_metrics *m,
                                   const struct ld_http_options *opts,
                                   struct ld_errinfo *err);

/* Stops serving, closes the socket and frees h. Held long-polls are
 * answered and /watch streams get the last published state and end (it
 * waits up to a second for them to go out). NULL-safe. */
void ld_http_stop(struct ld_http *h);

/* The port actually bound (useful after asking for port 0). */
int ld_http_port(const struct ld_http *h);

/* Counters of a running server, for tests and metrics. */
struct ld_http_stats {
    unsigned int connections; /* open now */
    unsigned int idle;        /* open with no request in progress */
    unsigned int held;        /* long-polls waiting */
    unsigned int subscribers; /* /watch streams */
    unsigned int max_connections, max_held, max_subscribers; /* effective */
    uint64_t evicted; /* idle connections closed to make room */
    uint64_t seq;     /* id of the latest /watch event */
};

/* Fills out with h's counters. Thread-safe. */
void ld_http_get_stats(struct ld_http *h, struct ld_http_stats *out);

/* One answer, as the server would send it. */
struct ld_http_reply {
    unsigned int status;
    const char *content_type;  /* static */
    bool allow;                /* send an Allow header (405) */
    const char *allow_methods; /* static: its value; NULL means "GET, HEAD" */
    char *body;                /* owned (free with ld_http_reply_clear) */
    size_t len;
};

/* Answers method + path (no query string) from the snapshot as of now_ms
 * (monotonic), as a request that does not wait: /leader as without wait=,
 * /watch as the single event a new stream starts with (without its id),
 * POST /resign as far as the snapshot can tell (409 when not leading; a
 * leader's is answered by the server, which waits for the loop: 503 here).
 * m may be NULL (then /metrics has no API series). Returns 0 with out
 * filled, or -1 on allocation failure. */
int ld_http_route(const char *method, const char *path, const struct ld_snapshot *snap,
                  struct ld_metrics *m, int64_t now_ms, struct ld_http_reply *out);
void ld_http_reply_clear(struct ld_http_reply *r); /* NULL-safe */

/* The answer to a POST /resign whose outcome is oc (see state.h), with
 * snap as of now_ms: 200 with the /leader body once released, 409 when not
 * the leader, 503 when the release was not written or no outcome came in
 * time (LD_RESIGN_PENDING); errors as {"error": "..."}. Returns 0, or -1
 * on allocation failure. */
int ld_http_render_resign(const struct ld_snapshot *snap, enum ld_resign_outcome oc,
                          int64_t now_ms, struct ld_http_reply *out);

/* Whether a peer address may resign this replica: IPv4 127.0.0.0/8, ::1,
 * or IPv4-mapped 127.0.0.0/8. sa may be NULL (false). */
struct sockaddr;
bool ld_http_peer_is_loopback(const struct sockaddr *sa);

/* The GET /leader body: {"lease","identity","leader","is_leader","term",
 * "renewed_at" (MicroTime or null),"observed"}, is_leader judged at now_ms.
 * Returns a new string (free()) or NULL on allocation failure. The status
 * to send with it is 200 when is_leader, else 503. */
char *ld_http_render_leader(const struct ld_snapshot *snap, int64_t now_ms);

/* What a long-poll caller passed on GET /leader: it has seen leader, term
 * and is_leader (each only if given). It is answered at once when one of
 * those differs; otherwise its request is held until any of the three
 * changes (given or not), or wait_ms passes. */
struct ld_http_poll {
    bool wait;       /* wait= given: the request may be held */
    int64_t wait_ms; /* capped at the server's maximum */
    bool has_leader, has_term, has_is_leader;
    bool is_leader;
    int64_t term;
    char leader[LD_LEASE_MAX_HOLDER + 1];
};

/* Empties p (nothing given). */
void ld_http_poll_init(struct ld_http_poll *p);

/* Takes one query argument (key and value URL-decoded, value NULL for a
 * bare key) into p: wait (a Go duration such as "30s", or whole seconds;
 * more than max_wait_ms is capped), leader (an identity, "" for nobody),
 * term (an integer >= 0) and is_leader (true/false/1/0). Other keys are
 * ignored. Returns 0, or -1 with a one-line reason in err for a malformed
 * or repeated value (the request gets 400). */
int ld_http_poll_arg(struct ld_http_poll *p, const char *key, const char *value,
                     int64_t max_wait_ms, char *err, size_t errlen);

/* True when the state as of now_ms differs from what p says the caller
 * has seen (fields not given are not compared; nothing given never
 * differs). */
bool ld_http_poll_differs(const struct ld_http_poll *p, const struct ld_snapshot *snap,
                          int64_t now_ms);

/* Liveness as /healthz judges it at now_ms: true when healthy; otherwise
 * false with the reason in why (why may be NULL). Unhealthy when
 * health_error is set, when the loop's heartbeat is older than
 * stale_after_ms, or when the snapshot still claims leadership more than
 * stale_after_ms after lead_until_ms (a wedged leader). stale_after_ms <= 0
 * disables the two time checks. */
bool ld_http_healthy(const struct ld_snapshot *snap, int64_t now_ms, char *why,
                     size_t whylen);

#endif
