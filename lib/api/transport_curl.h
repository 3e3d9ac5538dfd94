/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport_curl: the libcurl implementation of transport.h, the one
 * production uses. One curl multi handle drives every exchange; its
 * connection cache is the pool.
 *
 * Connections: HTTP/2 is preferred (ALPN, CURL_HTTP_VERSION_2TLS) and
 * requests multiplex, as client-go does with kube-apiserver: every round
 * trip and every stream then share one connection. The pool is capped at
 * LD_TRANSPORT_CURL_MAX_CONNS connections whatever the number of
 * exchanges. With an HTTP/1.1 server (plain http://, or a server that does
 * not offer h2, such as the bundled test API server) each connection
 * carries one exchange at a time. At most LD_TRANSPORT_CURL_H1_ACTIVE
 * round trips (LD_TRANSPORT_CURL_MAX_ACTIVE once an answer came over
 * HTTP/2) are in curl at once (streams do not count and always go in at
 * once); the others wait, holding only their request, not an easy handle
 * and its buffers. Heartbeats (LD_PRIO_HEARTBEAT) go first, then normal
 * round trips, each in submit order, and normal ones never take the last
 * LD_TRANSPORT_CURL_HEARTBEAT_LANES places: renewals keep a lane (over
 * HTTP/1.1 a connection) that hung reads cannot fill. A waiting exchange's
 * timeout counts the wait, and one that ends there was never sent
 * (LD_ENOTSENT). A stream
 * holds its connection for its whole life, so with HTTP/1.1 every open
 * stream leaves one connection fewer for round trips. Canceling an
 * exchange in flight closes its HTTP/1.1 connection (an HTTP/2 one only
 * loses the stream).
 *
 * TLS is verified against the configured CA (or the system bundle), with
 * client certificates when configured and TLS 1.2 at least. A bearer token
 * from a file is stat()ed (device, inode, size, mtime) before every
 * exchange and re-read when it changed, every 50 s, and after any 401,
 * whose result then says whether the token changed (auth_renewed). The
 * connect phase is capped at min(timeout, 3000 ms); bodies are capped at
 * LD_HTTP_MAX_BODY. The environment (proxies) is never read.
 *
 * Call curl_global_init() once before creating the first transport (before
 * any thread starts). One thread at a time uses a transport.
 */
#ifndef LEADERD_TRANSPORT_CURL_H
#define LEADERD_TRANSPORT_CURL_H

#include <curl/curl.h>

#include "err.h"
#include "kubeconfig.h"
#include "transport.h"

#define LD_TRANSPORT_CURL_MAX_CONNS 4
/* Round trips in curl at once over HTTP/2: enough for a renewal every 2 s
 * of 1024 Leases at 30 ms each, with a few requests hung on a slow server. */
#define LD_TRANSPORT_CURL_MAX_ACTIVE 16
/* The same over HTTP/1.1, and until the first answer shows the protocol:
 * each needs a connection of its own, and every TLS connection costs about
 * 50 KB (paid only while used: a single Lease has one request at a time).
 * Three, with a watch, is the pool's four connections: two for normal
 * requests, so one hung request still leaves a lane to the others, and one
 * kept for heartbeats. */
#define LD_TRANSPORT_CURL_H1_ACTIVE 3
/* Places of the cap (either one) that only heartbeats take. */
#define LD_TRANSPORT_CURL_HEARTBEAT_LANES 1
/* Timeout of a request that gives none. */
#define LD_TRANSPORT_CURL_DEFAULT_TIMEOUT_MS 5000

/* Creates a transport for cfg's server and credentials (copied; cfg may be
 * freed afterwards). Reads the token file once so a missing token fails
 * here. Returns a new transport (free with ld_transport_free) or NULL with
 * err filled (LD_ECONFIG for a bad server URL or unreadable file,
 * LD_ENOMEM). */
struct ld_transport *ld_transport_curl_new(const struct ld_kube_config *cfg,
                                           struct ld_errinfo *err);

/* Appends suffix (control characters dropped; NULL or "" for none) to the
 * User-Agent "leaderd/<version> (leader-election)" of exchanges started
 * from now on. t must come from ld_transport_curl_new. */
void ld_transport_curl_set_user_agent_suffix(struct ld_transport *t, const char *suffix);

/* ---- raw exchanges, for a caller that drives libcurl itself ---- */

/* For the API write gate (a proxy that forwards any request as it came):
 * a new easy handle carrying everything this transport's exchanges carry
 * (TLS verification with the configured CA, client certificate, TLS server
 * name, no environment proxies, the User-Agent) with its URL set to the
 * server's base URL followed by target (a request target as received:
 * "/path?query", which must start with '/'), and the bearer token, when
 * one is configured, appended to *headers as an Authorization line. The
 * token file is checked (and re-read when it changed) as before every
 * exchange of t, so rotated tokens keep working. Nothing else is set: the
 * caller sets the method, body, callbacks and timeouts, installs *headers
 * with CURLOPT_HTTPHEADER, and owns the handle (curl_easy_cleanup) and
 * the list (ld_transport_curl_free_headers, which wipes the token).
 * Returns NULL with err set: LD_EINVAL (target, or t not from
 * ld_transport_curl_new), LD_ENOMEM (*headers is then as it was). The
 * same one-thread-at-a-time rule as every call on t applies. */
CURL *ld_transport_curl_raw_easy(struct ld_transport *t, const char *target,
                                 struct curl_slist **headers, struct ld_errinfo *err);

/* Frees a header list, overwriting its bytes first (it may hold a token).
 * NULL-safe. */
void ld_transport_curl_free_headers(struct curl_slist *headers);

#endif
