/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy_gate: the decisions of the API write gate (--api-proxy), as pure
 * functions of a request's method, target and headers, the published
 * leadership (a snapshot, and in shard mode the shard table) and the time.
 * No I/O, no clock; nothing allocated but jansson's reading of a body
 * that may create a Lease (freed before returning) and the Status bodies
 * of ld_proxy_status_json: the proxy (proxy.h) asks, forwards or answers.
 *
 * The rule it keeps: a write (POST, PUT, PATCH, DELETE; any method that is
 * not a read counts as one) passes only while this replica leads as of
 * now_ms, judged as /leader judges (ld_snapshot_is_leader), or in shard
 * mode while it owns the shard named by X-Leaderd-Shard
 * (ld_shardsnap_leads). Reads (GET, HEAD, OPTIONS) always pass the
 * leadership test.
 *
 * Before it, guards that hold for every method (ld_proxy_judge): the proxy
 * lends leaderd's credentials to whoever reaches it, so it answers only
 * requests addressed to its own loopback address (a browser page that
 * rebound a DNS name to 127.0.0.1 still sends that name as Host), none that
 * a browser marks as its own (Origin, Sec-Fetch-Site), no impersonation
 * unless allowed, no path with dot segments (which libcurl and the API
 * server would resolve to another path than the one judged), and never a
 * write to a Lease of this replica's own election or shard group, nor a
 * create of one.
 */
#ifndef LEADERD_PROXY_GATE_H
#define LEADERD_PROXY_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardlayout.h"
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
    const char *version;    /* "HTTP/1.0", "HTTP/1.1"; NULL counts as HTTP/1.1 */
    const char *connection; /* Connection header */
    const char *upgrade;    /* Upgrade header */
    const char *shard;      /* X-Leaderd-Shard header */
    bool has_length;        /* Content-Length given */
    uint64_t content_length;
    /* What ld_proxy_req_note_header gathered from the whole header list. */
    const char *host;             /* the first Host header's value */
    unsigned int hosts;           /* how many Host headers there were */
    const char *browser;          /* the name of an Origin or Sec-Fetch-Site header */
    const char *impersonate;      /* the name of the first Impersonate-* header */
    const char *content_type;     /* the first Content-Type header's value */
    const char *content_encoding; /* the first Content-Encoding header's value */
    bool body_headers_repeated;   /* Content-Type or Content-Encoding given twice */
    /* The body, once read whole (body_read; body need not end in NUL and
     * may be NULL when body_len is 0). Before that the Lease-create rule of
     * ld_proxy_judge cannot tell, and passes. */
    bool body_read;
    const char *body;
    size_t body_len;
};

/* What the proxy adds to the judgement of ld_proxy_judge. */
struct ld_proxy_policy {
    int port;           /* the port the proxy listens on */
    bool impersonation; /* --api-proxy-impersonation: Impersonate-* headers pass */
};

/* The leadership to judge by (borrowed). layout NULL: single-Lease mode;
 * else shards is the latest table (NULL before the first publish: nothing
 * is owned). */
struct ld_proxy_view {
    const struct ld_snapshot *snap;
    const struct ld_shardlayout *layout;
    const struct ld_shardsnap *shards;
};

struct ld_proxy_verdict {
    unsigned int status; /* 0: forward; else answer with this status */
    const char *reason;  /* metav1.Status reason (static) when status != 0 */
    char message[512];   /* its message */
    bool write;          /* a write: gated before sending and while in flight */
    bool refused;        /* a write refused because this replica does not lead */
    /* Passed only until the body is read: a POST to the own namespace's
     * Lease collection on a replica that does not lead, judged whole (the
     * 403 before the 503) once its body is read. */
    bool body_pending;
    uint32_t shard; /* shard mode, a write: the shard's index */
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
 * (it is addressed to the proxy), not Forwarded, X-Forwarded-* or
 * X-Real-Ip (the app cannot speak for other clients; an API server behind a
 * front proxy may trust them for its audit log), not X-Remote-* (an API
 * server with request-header authentication takes the user, groups and
 * extras from X-Remote-User, X-Remote-Group and X-Remote-Extra-*, and the
 * app must not name them; other prefixes can be configured there, which
 * only the API server's front proxy can strip). Impersonate-* headers are
 * forwarded: ld_proxy_judge has
 * refused the request already unless they are allowed. Names compare
 * case-insensitively. */
bool ld_proxy_forward_request_header(const char *name, const char *connection);

/* The same for a response header on its way back: hop-by-hop headers and
 * Content-Length (the proxy frames the body itself) are dropped. */
bool ld_proxy_forward_response_header(const char *name, const char *connection);

/* Records what the guards of ld_proxy_judge need of one request header
 * (name and value borrowed, kept in req while they live): the Host
 * headers, an Origin or Sec-Fetch-Site header, an Impersonate-* header,
 * the Content-Type and Content-Encoding headers (and whether either came
 * twice). Other headers are ignored. Names compare case-insensitively. */
void ld_proxy_req_note_header(struct ld_proxy_req *req, const char *name,
                              const char *value);

/* The whole judgement of a request: the guards, then ld_proxy_decide. In
 * order, for every method:
 *  - 403 Forbidden unless there is exactly one Host header and it names a
 *    loopback host (localhost, 127.x.y.z, [::1]) with pol->port (no port
 *    means 80); HTTP/1.0 may leave Host out;
 *  - 403 for an Origin or Sec-Fetch-Site header (a browser's request);
 *  - 403 for an Impersonate-* header unless pol->impersonation;
 *  - 400 BadRequest for a "." or ".." segment in the path, judged after
 *    percent-decoding as the API server decodes it (so "%2e%2E" and an
 *    encoded "/" count);
 *  - 403 for a write to a Lease of this replica's election in the
 *    Lease's namespace (/apis/coordination.k8s.io/VERSION/namespaces/NS/
 *    leases/NAME and below), or in shard mode to the group's shard
 *    Leases and member Leases, and for a DELETE of that namespace's Lease
 *    collection; the path judged as above, empty segments ignored;
 *  - once the body is read (req->body_read), 403 for a POST to that
 *    namespace's Lease collection (the same path judgement) whose body
 *    would create one of those Leases: a metadata.name that is one, or a
 *    metadata.generateName from which the API server could make one (it
 *    cuts it to 58 characters and appends 5 random ones); keys "metadata",
 *    "name" and "generateName" match in any case, and a generateName is
 *    judged even beside a name. A body the gate cannot read so is refused
 *    as well, since it cannot be shown harmless: a Content-Type other than
 *    application/json (none counts as JSON, as the API server takes it), a
 *    Content-Encoding other than identity, either header twice, a body
 *    that is not one JSON object (duplicate keys, invalid UTF-8, YAML,
 *    protobuf), a metadata that is not an object, a name or generateName
 *    that is neither a string nor null. The namespace is the path's: the
 *    API server refuses a body whose metadata.namespace differs.
 * Each answer's message names this replica. Then ld_proxy_decide, except
 * that before the body is read such a POST is not refused for leadership
 * yet (out->body_pending): its 403 comes first on every replica. The proxy
 * judges every write again once its body is read. Called wherever
 * ld_proxy_decide would be. */
void ld_proxy_judge(const struct ld_proxy_req *req, const struct ld_proxy_policy *pol,
                    const struct ld_proxy_view *v, int64_t now_ms,
                    struct ld_proxy_verdict *out);

/* The leadership part of the judgement: judges req against v as of now_ms
 * into out. In order: 501 for an upgrade; 413 for a Content-Length over
 * LD_PROXY_MAX_BODY; a read passes; in shard mode 400 without
 * X-Leaderd-Shard and 404 for an unknown shard; 503 (refused) unless this
 * replica leads (the Lease, or that shard). Called (through
 * ld_proxy_judge) when the headers arrive and again once the body has been
 * read; ld_proxy_still_leads judges a write once more right before it is
 * sent upstream. */
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

/* Whether a passed write that was already sent upstream may keep running
 * as of now_ms: until the deadline of the term it was sent in (the
 * Lease's, or in shard mode the member election's while the shard's
 * record still names this replica), also after this replica stopped
 * leading on purpose. A step-down does not undo what the API server
 * admitted; cutting the write would only hide its answer (docs/design/
 * release-hold.md). */
bool ld_proxy_sent_may_run(const struct ld_proxy_verdict *passed,
                           const struct ld_proxy_view *v, int64_t now_ms);

/* The deadline ld_proxy_sent_may_run judges by (monotonic ms); INT64_MIN
 * when no term of ours is in view. */
int64_t ld_proxy_term_until(const struct ld_proxy_verdict *passed,
                            const struct ld_proxy_view *v);

/* The metav1.Status body of an answer: {"kind":"Status","apiVersion":"v1",
 * "metadata":{},"status":"Failure","message":...,"reason":...,"code":...}.
 * Returns a new string (free()) or NULL on allocation failure. */
char *ld_proxy_status_json(unsigned int code, const char *reason, const char *message);

#endif
