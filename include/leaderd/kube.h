/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube: a small Kubernetes API client for one resource kind, the Lease: the
 * REST layer (paths, checks, encoding, answers mapped to enum ld_err by
 * rest.h) over a transport (transport.h), any implementation of it.
 * Namespaces must be DNS-1123 labels and Lease names DNS-1123 subdomains
 * (dnsname.h), checked before anything is sent.
 *
 * Two functions tie the client to libcurl, and they alone live in
 * kube_curl.c: ld_kube_new, which puts it on the libcurl transport
 * (transport_curl.h), and ld_kube_set_user_agent_suffix. On libcurl a client
 * has TLS verified against the configured CA, a bearer token whose file is
 * checked (stat: device, inode, size, mtime) before every request and watch
 * and re-read when it changed, also every 50 s and after a 401 (the request
 * is then sent once more if the token changed); client certificates, bounded
 * connect and request timeouts, bodies capped; HTTP/2 when the server offers
 * it, and requests and the watch share a pool of at most
 * LD_TRANSPORT_CURL_MAX_CONNS connections. ld_kube_new_on takes any other
 * transport (the tests' in-memory ones).
 *
 * The calls below block: each drives the transport until its own answer
 * came. A handle is used by one thread at a time. With libcurl, call
 * curl_global_init() once before creating the first handle (before any
 * thread starts).
 */
#ifndef LEADERD_KUBE_H
#define LEADERD_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "kubeconfig.h"
#include "lease.h"
#include "transport.h"

struct ld_kube;

/* Largest response body accepted; a larger one fails with LD_ETOOBIG. */
#define LD_KUBE_MAX_BODY LD_HTTP_MAX_BODY

/* Called after every request with the verb ("GET", "POST", "PUT", or
 * "WATCH" when a stream ends), the HTTP status (0 when none arrived) and how
 * long it took in seconds, measured on the monotonic clock. Runs on the
 * calling thread. */
typedef void (*ld_kube_observer_fn)(void *ctx, const char *verb, long http_status,
                                    double seconds);

/* Creates a client on libcurl (kube_curl.c) from cfg (copied; cfg may be
 * freed afterwards). Reads the token file once so a missing token fails
 * here. Returns a new handle (free with ld_kube_free) or NULL with err
 * filled. */
struct ld_kube *ld_kube_new(const struct ld_kube_config *cfg, struct ld_errinfo *err);
void ld_kube_free(struct ld_kube *k); /* NULL-safe */

/* The transport under k (borrowed; freed by ld_kube_free), for callers that
 * drive their own exchanges on the same connections. Exchanges they leave in
 * flight are driven, and their callbacks run, inside the blocking calls
 * below too. */
struct ld_transport *ld_kube_transport(struct ld_kube *k);

/* Whole-request timeout (connect included); default 5000 ms. The connect
 * phase alone is capped at min(timeout, 3000 ms). */
void ld_kube_set_timeout_ms(struct ld_kube *k, int64_t timeout_ms);

/* When fd >= 0, a request in flight is abandoned (LD_ECANCELED) as soon as
 * fd becomes readable; the fd is only polled, never read. -1 disables. */
void ld_kube_set_cancel_fd(struct ld_kube *k, int fd);

void ld_kube_set_observer(struct ld_kube *k, ld_kube_observer_fn fn, void *ctx);

/* Extra text appended to the User-Agent "leaderd/<version>". May be NULL.
 * Only a client from ld_kube_new has one (kube_curl.c); on another
 * transport it does nothing. */
void ld_kube_set_user_agent_suffix(struct ld_kube *k, const char *suffix);

/* GET /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME.
 * On LD_OK out holds the decoded Lease (caller clears it). */
enum ld_err ld_kube_lease_get(struct ld_kube *k, const char *ns, const char *name,
                              struct ld_lease *out, struct ld_errinfo *err);

/* POST the encoded lease (resource_version must be NULL) to the collection.
 * 409 AlreadyExists -> LD_EEXISTS. On LD_OK out holds the stored Lease. */
enum ld_err ld_kube_lease_create(struct ld_kube *k, const struct ld_lease *lease,
                                 struct ld_lease *out, struct ld_errinfo *err);

/* PUT the encoded lease (with its resource_version) to its name.
 * 409 Conflict -> LD_ECONFLICT. On LD_OK out holds the stored Lease. */
enum ld_err ld_kube_lease_update(struct ld_kube *k, const struct ld_lease *lease,
                                 struct ld_lease *out, struct ld_errinfo *err);

/* ---- asynchronous calls: many at once, for a host of many elections ---- */

/* Creates a client on transport t, which it takes over (freed by
 * ld_kube_free, also when this fails). For tests that put an in-memory
 * transport where libcurl runs. NULL with err set on LD_ENOMEM. */
struct ld_kube *ld_kube_new_on(struct ld_transport *t, struct ld_errinfo *err);

/* Identifies an asynchronous call from its start until its callback ran or
 * it was canceled. Never 0, never reused by one client. */
typedef uint64_t ld_kube_call;

/* The answer to an asynchronous Lease request; runs inside ld_transport_run
 * (or a blocking call of this client) only. On LD_OK lease is the Lease the
 * server returned: the callback may take its contents (copy the struct,
 * then ld_lease_init it); what is left is cleared after it returns. On an
 * error lease is NULL and err says why (http_status, Retry-After). */
typedef void (*ld_kube_lease_fn)(void *ctx, ld_kube_call call, enum ld_err rc,
                                 struct ld_lease *lease, const struct ld_errinfo *err);

/* Start a GET, POST (create) or PUT (update) of a Lease with the same checks,
 * errors and 401 retry as the blocking calls, bounded by timeout_ms (<= 0:
 * the client's timeout). LD_OK with *call set and fn called exactly once
 * later, or an error (LD_EINVAL, LD_ENOMEM) with err set and no callback.
 * The lease is encoded at once (borrowed for the call only). */
enum ld_err ld_kube_lease_get_start(struct ld_kube *k, const char *ns, const char *name,
                                    int64_t timeout_ms, ld_kube_lease_fn fn, void *ctx,
                                    ld_kube_call *call, struct ld_errinfo *err);
enum ld_err ld_kube_lease_create_start(struct ld_kube *k, const struct ld_lease *lease,
                                       int64_t timeout_ms, ld_kube_lease_fn fn, void *ctx,
                                       ld_kube_call *call, struct ld_errinfo *err);
enum ld_err ld_kube_lease_update_start(struct ld_kube *k, const struct ld_lease *lease,
                                       int64_t timeout_ms, ld_kube_lease_fn fn, void *ctx,
                                       ld_kube_call *call, struct ld_errinfo *err);

/* Starts a DELETE of NS/NAME with preconditions (uid and resourceVersion,
 * each only when not NULL): 409 Conflict (LD_ECONFLICT) when the stored
 * object is another, 404 (LD_ENOTFOUND) when there is none. fn gets lease
 * NULL on success. */
enum ld_err ld_kube_lease_delete_start(struct ld_kube *k, const char *ns,
                                       const char *name, const char *uid,
                                       const char *resource_version, int64_t timeout_ms,
                                       ld_kube_lease_fn fn, void *ctx, ld_kube_call *call,
                                       struct ld_errinfo *err);

/* The answer to a LIST: on LD_OK the n Leases that decoded (items
 * borrowed for the callback; an item that is no Lease is skipped and
 * logged) and the list's own resourceVersion, the revision of its snapshot
 * (borrowed; NULL when the answer has none), else items NULL, n 0, list_rv
 * NULL and err says why. */
typedef void (*ld_kube_lease_list_fn)(void *ctx, ld_kube_call call, enum ld_err rc,
                                      const struct ld_lease *items, size_t n,
                                      const char *list_rv, const struct ld_errinfo *err);

/* Starts a LIST of the Leases of ns matching label_selector (NULL or "":
 * all), in one page, with the checks, errors and 401 retry of the other
 * calls; as they do, LD_OK with *call set and fn called once later, or an
 * error with err set and no callback. For a caller whose watch is down
 * and who still must learn of Leases that are no election of its own. */
enum ld_err ld_kube_lease_list_start(struct ld_kube *k, const char *ns,
                                     const char *label_selector, int64_t timeout_ms,
                                     ld_kube_lease_list_fn fn, void *ctx,
                                     ld_kube_call *call, struct ld_errinfo *err);

/* What a watch covers: one Lease by name (fieldSelector metadata.name, so
 * RBAC's resourceNames apply) or the Leases matching a label selector. */
struct ld_kube_watch_spec {
    const char *namespace_;
    const char *name;             /* one Lease, or NULL */
    const char *label_selector;   /* used when name is NULL; NULL: all */
    const char *resource_version; /* start after it; NULL or "": the current
                                     state first (ADDED events), then changes */
    int timeout_s;                /* the server ends the stream after it */
};

/* Bytes of a watch stream as they arrive (feed a struct ld_watch_decoder). */
typedef void (*ld_kube_stream_data_fn)(void *ctx, ld_kube_call call, const char *data,
                                       size_t len);
/* The end of a watch stream: LD_EEOF when the server ended it, otherwise
 * why: LD_ETRANSPORT, LD_ETIMEOUT, LD_ETOOBIG, or the mapped HTTP error of a
 * non-200 answer (410 -> LD_EGONE; a 401 also has the token file re-read
 * before the next request). */
typedef void (*ld_kube_stream_end_fn)(void *ctx, ld_kube_call call, enum ld_err rc,
                                      const struct ld_errinfo *err);

/* Opens a watch (bookmarks on). Same return rules as the starts above; data
 * runs for each piece and end once. */
enum ld_err ld_kube_lease_watch_open(struct ld_kube *k,
                                     const struct ld_kube_watch_spec *spec,
                                     ld_kube_stream_data_fn data,
                                     ld_kube_stream_end_fn end, void *ctx,
                                     ld_kube_call *call, struct ld_errinfo *err);

/* Abandons an asynchronous call: no callback for it runs after this. An
 * unknown or finished call is ignored. May be called from a callback. */
void ld_kube_cancel(struct ld_kube *k, ld_kube_call call);

/* How many asynchronous calls are in flight. */
size_t ld_kube_calls_pending(const struct ld_kube *k);

/* ld_err_from_http (err.h), kept under its old name for callers. */
enum ld_err ld_kube_map_status(long http_status, const char *reason);

#endif
