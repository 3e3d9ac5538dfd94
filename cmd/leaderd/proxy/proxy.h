/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy: the API write gate (--api-proxy ADDR:PORT), a local proxy to the
 * Kubernetes API for the app, like `kubectl proxy`, that lets writes
 * through only while this replica leads (the rules: proxy_gate.h).
 *
 * Requests are forwarded with leaderd's own credentials and verified TLS
 * (a transport of its own built from the same struct ld_kube_config, see
 * ld_transport_curl_raw_easy); the client's Authorization and hop-by-hop
 * headers are dropped; responses stream back as they arrive, watches
 * included. A write is judged when its headers arrive, again once its body
 * has been read, and again right before libcurl sends it (after the
 * connection to the API server is up); while it waits for the answer
 * every publish of st and the end of the leadership by time
 * (lead_until_ms) are watched, and the exchange is cut as soon as this
 * replica stops leading. An answer that has begun is relayed whole.
 *
 * It has its own listener, on a loopback address only, with the sidecar
 * HTTP server's connection limit, idle-connection eviction and idle
 * timeout (http_listen.h), and two threads whatever the number of
 * connections: libmicrohttpd's, which reads requests and writes answers,
 * and one that drives every upstream exchange. The election loop never
 * waits on either.
 */
#ifndef LEADERD_PROXY_H
#define LEADERD_PROXY_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "kubeconfig.h"
#include "metrics.h"
#include "state.h"

/* Exchanges with the API server that run at once, watches included (each
 * holds an upstream connection for as long as it runs): past it a request
 * is answered 429 with Retry-After: 1, so one app cannot hold an unbounded
 * number of leaderd's connections to the API server. */
#define LD_PROXY_MAX_EXCHANGES 64

/* How long a request's body may take to arrive, from its headers on:
 * past it the request is answered 408, however steadily the body
 * trickles in. */
#define LD_PROXY_BODY_TIMEOUT_MS 30000

/* A zero number means its default: the sidecar HTTP server's
 * LD_HTTP_MAX_CONNECTIONS (capped by RLIMIT_NOFILE as ld_http_start_opts
 * says) and LD_HTTP_IDLE_TIMEOUT_S of http.h, and LD_PROXY_BODY_TIMEOUT_MS. */
struct ld_proxy_options {
    unsigned int max_connections;
    unsigned int idle_timeout_s;
    /* --api-proxy-impersonation: Impersonate-* headers are forwarded instead
     * of answered 403 (see ld_proxy_judge). */
    bool impersonation;
    unsigned int body_timeout_ms;
    /* Counts the writes in flight for the shell's release hold
     * (hook_proxy.h); borrowed, outlives the proxy; NULL: not counted. */
    struct ld_hook_proxy *writes;
};

struct ld_proxy;
struct ld_hook_proxy;

/* Starts the proxy on host:port (host a loopback address literal, or
 * "localhost" for 127.0.0.1; port 0 picks a free one, see ld_proxy_port)
 * for the API server and credentials of kube (copied). st and m are
 * borrowed and must outlive the proxy; opts may be NULL (defaults) and is
 * read during the call only. curl_global_init must have run. Returns a new
 * proxy (stop with ld_proxy_stop) or NULL with err (caller-owned, may be
 * NULL) set, its msg one line starting "api-proxy: ": LD_EINVAL for a bad
 * address, LD_ENOMEM, the transport's code when kube's credentials or CA
 * cannot be loaded, LD_EIO when the system refused the listener (as
 * ld_http_open_listener says), a thread or the server. */
struct ld_proxy *ld_proxy_start(const char *host, int port,
                                const struct ld_kube_config *kube, struct ld_state *st,
                                struct ld_metrics *m, const struct ld_proxy_options *opts,
                                struct ld_errinfo *err);

/* Cuts every exchange in flight, closes the listener and frees p. NULL-safe. */
void ld_proxy_stop(struct ld_proxy *p);

/* The port actually bound. */
int ld_proxy_port(const struct ld_proxy *p);

/* How many exchanges hold a place under LD_PROXY_MAX_EXCHANGES now. An
 * exchange gives its place back when the upstream transfer is done, which
 * can come a moment after its client has read the whole answer. */
int ld_proxy_exchanges(struct ld_proxy *p);

#endif
