/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_conn: connection bookkeeping for the HTTP server, so that probes
 * always find room. Every open connection is counted; one with no request
 * in progress sits on an idle list, longest idle first, and when the
 * server is nearly full (more than evict_at open) the longest idle ones
 * are shut down. MHD calls in on its own thread; a mutex inside guards the
 * counts so that ld_http_conns_stats may read them from any thread.
 */
#ifndef LEADERD_HTTP_CONN_H
#define LEADERD_HTTP_CONN_H

#include <microhttpd.h>

#include "http.h"

struct ld_http_conns;

/* A new, empty bookkeeping that evicts past evict_at open connections.
 * Returns it (free with ld_http_conns_free, after MHD has stopped) or NULL
 * with err set (LD_ENOMEM, or LD_EIO when the system refused a mutex). */
struct ld_http_conns *ld_http_conns_new(unsigned int evict_at, struct ld_errinfo *err);
void ld_http_conns_free(struct ld_http_conns *cs); /* NULL-safe */

/* MHD's MHD_OPTION_NOTIFY_CONNECTION callback; cls is the ld_http_conns.
 * A new connection starts idle (it may make room by evicting others);
 * *socket_context is its record, freed here when it closes. */
void ld_http_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);

/* A request began on c: it is not idle until ld_http_conns_idle. */
void ld_http_conns_busy(struct ld_http_conns *cs, struct MHD_Connection *c);

/* c's request is over: idle again, unless it is being evicted. */
void ld_http_conns_idle(struct ld_http_conns *cs, struct MHD_Connection *c);

/* Fills connections, idle and evicted of out (leaves the rest). */
void ld_http_conns_stats(struct ld_http_conns *cs, struct ld_http_stats *out);

/* c's socket, or -1 when MHD does not tell. */
int ld_http_conn_fd(struct MHD_Connection *c);

#endif
