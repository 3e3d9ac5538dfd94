/*
 * kube: a small Kubernetes API client for one resource kind, the Lease,
 * over libcurl + OpenSSL. One reused connection (keep-alive), TLS verified
 * against the configured CA, a bearer token whose file is checked (stat:
 * device, inode, size, mtime) before every request and watch and re-read
 * when it changed, also every 50 s and after a 401; client certificates,
 * bounded connect and request timeouts, bodies capped, metav1.Status errors
 * mapped to enum ld_err. Namespaces must be DNS-1123 labels and Lease names
 * DNS-1123 subdomains (dnsname.h), checked before anything is sent.
 *
 * A handle is used by one thread at a time. Call curl_global_init() once
 * before creating the first handle (before any thread starts).
 */
#ifndef LEADERD_KUBE_H
#define LEADERD_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "kubeconfig.h"
#include "lease.h"

struct ld_kube;

/* Largest response body accepted; a larger one fails with LD_ETOOBIG. It
 * must hold any Lease the API server can return: etcd stores objects of up
 * to 1.5 MiB (--max-request-bytes), and their JSON can be longer than what
 * was stored, since the server escapes <, >, & and control characters as
 * six-byte \u00XX sequences: 1.5 MiB of those is 9 MiB of JSON. The buffer
 * grows only as far as a body needs and is given back after one. */
#define LD_KUBE_MAX_BODY (16 * 1024 * 1024)

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

/* ---- watch: one Lease, on a second connection of its own ---- */

/* Receives the raw bytes of a watch stream as they arrive (feed them to a
 * struct ld_watch_decoder). Called from ld_kube_watch_wait only. */
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

/* Maps an HTTP status and a decoded Status reason to an error code:
 * 404 NOTFOUND, 409 CONFLICT or EEXISTS (by reason "AlreadyExists"),
 * 401, 403, 422 EINVALID, 400, 410 EGONE, 429 ETOOMANY, 5xx ESERVER,
 * other non-2xx EHTTP, 2xx LD_OK. Exposed for tests. */
enum ld_err ld_kube_map_status(long http_status, const char *reason);

#endif
