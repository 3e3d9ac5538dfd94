/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_socket: the libmicrohttpd plumbing that the sidecar's HTTP server
 * (http_listen) and the API write gate's server (proxy.c) share: the
 * listening socket, the connection limits they run with, and MHD's log.
 * With http_conn (idle connections and eviction), the one part of the
 * HTTP layer the proxy includes besides http.h.
 */
#ifndef LEADERD_HTTP_SOCKET_H
#define LEADERD_HTTP_SOCKET_H

#include <stdarg.h>
#include <stdint.h>

#include "err.h"
#include "http.h"

/* Effective limits: struct ld_http_options with its defaults applied and
 * capped as ld_http_start_opts describes. */
struct ld_http_limits {
    unsigned int max_conns;
    unsigned int evict_at; /* idle connections are closed past this many open */
    unsigned int max_held, max_subs;
    int64_t heartbeat_ms, max_wait_ms;
};

/* Opens a non-blocking listening socket for host:port as ld_http_start
 * describes (host "" = all interfaces, dual stack when possible; a name is
 * resolved). Returns the fd, or -1 with err (may be NULL) set to
 * "listen HOST:PORT: reason": LD_EINVAL when the host does not resolve,
 * LD_ENOMEM, LD_ESYS when the socket, bind or listen failed. Also for the
 * API proxy's listener. */
int ld_http_open_listener(const char *host, int port, struct ld_errinfo *err);

/* Fills lim from o (zero fields: the defaults), capped by RLIMIT_NOFILE as
 * it stands now. Also for the API proxy, which runs with the same limits. */
void ld_http_limits_of(const struct ld_http_options *o, struct ld_http_limits *lim);

/* The port a listening socket is bound to, -1 when it cannot be read. */
int ld_http_bound_port(int fd);

/* libmicrohttpd's logger (MHD_OPTION_EXTERNAL_LOGGER) for both servers:
 * one debug line, "PREFIX: message", prefix being the char * given as the
 * logger's argument. What MHD reports is mostly clients going away
 * mid-reply: not worth more than debug. */
void ld_http_mhd_log(void *prefix, const char *fmt, va_list ap);

#endif
