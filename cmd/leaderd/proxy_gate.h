/*
 * proxy_gate: the decisions of the API write gate (--api-proxy), as pure
 * functions of a request's method, target and headers, the published
 * leadership (a snapshot, and in shard mode the shard table) and the time.
 * No I/O, no clock, no allocation: the proxy (proxy.h) asks, forwards or
 * answers.
 *
 * The rule it keeps: a write (POST, PUT, PATCH, DELETE; any method that is
 * not a read counts as one) passes only while this replica leads as of
 * now_ms, judged as /leader judges (ld_snapshot_is_leader), or in shard
 * mode while it owns the shard named by X-Leaderd-Shard
 * (ld_shard_entry_is_leader). Reads (GET, HEAD, OPTIONS) always pass.
 */
#ifndef LEADERD_PROXY_GATE_H
#define LEADERD_PROXY_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardgroup.h"
#include "shardsnap.h"
#include "state.h"

/* Largest request body forwarded; a larger one is answered 413. The API
 * server's own limit is 3 MiB (kube-apiserver's MaxRequestBodyBytes). */
#define LD_PROXY_MAX_BODY (3 * 1024 * 1024)

/* The header naming the shard a write belongs to (shard mode). */
#define LD_PROXY_SHARD_HEADER "X-Leaderd-Shard"

/* What the gate sees of a request; strings borrowed, NULL when absent. */
struct ld_proxy_req {
    const char *method;
    const char *target;     /* request target as received: path?query */
    const char *connection; /* Connection header */
    const char *upgrade;    /* Upgrade header */
    const char *shard;      /* X-Leaderd-Shard header */
    bool has_length;        /* Content-Length given */
    uint64_t content_length;
};

/* The leadership to judge by (borrowed). group NULL: single-Lease mode;
 * else shards is the latest table (NULL before the first publish: nothing
 * is owned). */
struct ld_proxy_view {
    const struct ld_snapshot *snap;
    const struct ld_shardgroup *group;
    const struct ld_shardsnap *shards;
};

struct ld_proxy_verdict {
    unsigned int status; /* 0: forward; else answer with this status */
    const char *reason;  /* metav1.Status reason (static) when status != 0 */
    char message[512];   /* its message */
    bool write;          /* a write: gated before sending and while in flight */
    bool refused;        /* a write refused because this replica does not lead */
    uint32_t shard;      /* shard mode, a write: the shard's index */
};

/* True for GET, HEAD and OPTIONS. */
bool ld_proxy_is_read(const char *method);

/* True when the request asks for a protocol upgrade: an Upgrade header,
 * a Connection header listing "upgrade", the CONNECT method, or a Pod's
 * exec, attach or portforward subresource (which need one). */
bool ld_proxy_is_upgrade(const struct ld_proxy_req *req);

/* True when a request header is forwarded upstream: not Authorization
 * (the proxy authenticates as leaderd), not hop-by-hop (Connection,
 * Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding, Upgrade, and every
 * header the Connection header names, given as connection), not what
 * libcurl writes itself (Host, Content-Length, Expect), not X-Leaderd-Shard
 * (it is addressed to the proxy). Names compare case-insensitively. */
bool ld_proxy_forward_request_header(const char *name, const char *connection);

/* The same for a response header on its way back: hop-by-hop headers and
 * Content-Length (the proxy frames the body itself) are dropped. */
bool ld_proxy_forward_response_header(const char *name, const char *connection);

/* Judges req against v as of now_ms into out. In order: 501 for an
 * upgrade; 413 for a Content-Length over LD_PROXY_MAX_BODY; a read passes;
 * in shard mode 400 without X-Leaderd-Shard and 404 for an unknown shard;
 * 503 (refused) unless this replica leads (the Lease, or that shard).
 * Called when the headers arrive, again once the body has been read, and
 * again right before the request is sent upstream. */
void ld_proxy_decide(const struct ld_proxy_req *req, const struct ld_proxy_view *v,
                     int64_t now_ms, struct ld_proxy_verdict *out);

/* Whether the write a verdict passed still may run as of now_ms (same
 * leadership test; the shard by its index). On false, refusal fills out
 * (may be NULL) like a 503 of ld_proxy_decide. */
bool ld_proxy_still_leads(const struct ld_proxy_verdict *passed,
                          const struct ld_proxy_view *v, int64_t now_ms,
                          struct ld_proxy_verdict *refusal);

/* The latest time (monotonic ms) a passed write's leadership lasts by time
 * alone: lead_until_ms of the Lease or shard; INT64_MIN when not leading. */
int64_t ld_proxy_lead_until(const struct ld_proxy_verdict *passed,
                            const struct ld_proxy_view *v);

/* The metav1.Status body of an answer: {"kind":"Status","apiVersion":"v1",
 * "metadata":{},"status":"Failure","message":...,"reason":...,"code":...}.
 * Returns a new string (free()) or NULL on allocation failure. */
char *ld_proxy_status_json(unsigned int code, const char *reason, const char *message);

#endif
