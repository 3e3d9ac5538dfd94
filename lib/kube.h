/*
 * kube: a small Kubernetes API client for one resource kind, the Lease: the
 * REST layer (paths, checks, encoding, metav1.Status errors mapped to enum
 * ld_err) over a transport (transport.h). ld_kube_new puts it on the libcurl
 * transport (transport_curl.h): TLS verified against the configured CA, a
 * bearer token whose file is checked (stat: device, inode, size, mtime)
 * before every request and watch and re-read when it changed, also every
 * 50 s and after a 401 (the request is then sent once more if the token
 * changed); client certificates, bounded connect and request timeouts,
 * bodies capped; HTTP/2 when the server offers it, and requests and the
 * watch share a pool of at most LD_TRANSPORT_CURL_MAX_CONNS connections.
 * Namespaces must be DNS-1123 labels and Lease names DNS-1123 subdomains
 * (dnsname.h), checked before anything is sent.
 *
 * The calls below block: each drives the transport until its own answer
 * came. A handle is used by one thread at a time. Call curl_global_init()
 * once before creating the first handle (before any thread starts).
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

/* Creates a client from cfg (copied; cfg may be freed afterwards). Reads the
 * token file once so a missing token fails here. Returns a new handle (free
 * with ld_kube_free) or NULL with err filled. */
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

/* Extra text appended to the User-Agent "leaderd/<version>". May be NULL. */
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

/* ---- watch: one Lease, a stream on the transport ---- */

/* Receives the raw bytes of a watch stream as they arrive (feed them to a
 * struct ld_watch_decoder). Called from ld_kube_watch_wait only: bytes that
 * arrive while a request is driven are kept (up to LD_KUBE_MAX_BODY, else
 * the stream ends with LD_ETOOBIG) and given to the next wait. */
typedef void (*ld_kube_watch_data_fn)(void *ctx, const char *data, size_t len);

/* Starts a watch of NS/NAME (fieldSelector metadata.name, bookmarks on,
 * timeoutSeconds=timeout_s, from resource_version when not NULL), stopping
 * any previous one. Returns at once; the stream is driven by
 * ld_kube_watch_wait. LD_OK, LD_EINVAL or LD_ENOMEM. */
enum ld_err ld_kube_watch_start(struct ld_kube *k, const char *ns, const char *name,
                                const char *resource_version, int timeout_s,
                                struct ld_errinfo *err);

/* Waits up to wait_ms for watch data (delivered to fn), the cancel fd, or
 * the end of the stream. Returns LD_OK after data arrived or the time
 * passed with the stream still open; LD_ECANCELED when the cancel fd is
 * readable; or, once the stream is over (the watch is then stopped), why:
 * LD_EEOF (the server ended it), LD_ETRANSPORT, LD_ETIMEOUT, or the mapped
 * HTTP error of a non-200 answer (410 -> LD_EGONE, 401 also re-reads the
 * token file). With no watch running it only waits on the cancel fd and
 * returns LD_OK or LD_ECANCELED. */
enum ld_err ld_kube_watch_wait(struct ld_kube *k, int64_t wait_ms,
                               ld_kube_watch_data_fn fn, void *ctx,
                               struct ld_errinfo *err);

bool ld_kube_watch_running(const struct ld_kube *k);
void ld_kube_watch_stop(struct ld_kube *k); /* idempotent */

/* ld_err_from_http (err.h), kept under its old name for callers. */
enum ld_err ld_kube_map_status(long http_status, const char *reason);

#endif
