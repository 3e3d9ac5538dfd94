/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy_upstream: the API write gate's upstream thread (see proxy.h), the
 * one thread that drives every exchange MHD's side hands over through the
 * hub (proxy_exchange.h) on a libcurl multi handle. Internal to the proxy:
 * only proxy.c includes it.
 */
#ifndef LEADERD_PROXY_UPSTREAM_H
#define LEADERD_PROXY_UPSTREAM_H

#include <stddef.h>

#include "err.h"
#include "kubeconfig.h"
#include "proxy_exchange.h"

/* Idle upstream connections kept for the next exchanges. */
#define LD_PROXY_UPSTREAM_IDLE 16L

struct ld_proxy_upstream;

/* A new upstream side for hub (borrowed, must outlive it) with its own
 * transport to the API server and credentials of kube (copied); the
 * thread is not started yet. Returns it (free with
 * ld_proxy_upstream_free) or NULL with err (may be NULL) set: LD_ENOMEM,
 * or the transport's code (LD_ECONFIG: kube's files or URL), its msg
 * starting "api-proxy: ". */
struct ld_proxy_upstream *ld_proxy_upstream_new(struct ld_pxe_hub *hub,
                                                const struct ld_kube_config *kube,
                                                struct ld_errinfo *err);

/* Starts the thread (the hub set up by ld_pxe_hub_init); it runs until
 * ld_proxy_upstream_stop. Returns 0 or the pthread error. */
int ld_proxy_upstream_start(struct ld_proxy_upstream *u);

/* Sets hub->stopping and waits for the thread, which first cuts every
 * exchange in flight (resuming each suspended connection). NULL-safe; does
 * nothing if the thread is not running. */
void ld_proxy_upstream_stop(struct ld_proxy_upstream *u);

/* Frees u, whose thread is stopped or was never started. NULL-safe. */
void ld_proxy_upstream_free(struct ld_proxy_upstream *u);

#endif
