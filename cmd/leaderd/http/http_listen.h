/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_listen: the HTTP server's life — the limits it runs with, the
 * listening socket, starting and stopping libmicrohttpd together with the
 * held requests (http_hold) and the connection bookkeeping (http_conn),
 * and its counters. It implements ld_http_start, ld_http_start_opts,
 * ld_http_stop, ld_http_port and ld_http_get_stats of http.h, building
 * the server object of http_server.h.
 */
#ifndef LEADERD_HTTP_LISTEN_H
#define LEADERD_HTTP_LISTEN_H

#include <stdarg.h>
#include <stdint.h>

#include "http.h"
#include "http_server.h"

/* Opens a non-blocking listening socket for host:port as ld_http_start
 * describes (host "" = all interfaces, dual stack when possible; a name is
 * resolved). Returns the fd, or -1 with err (may be NULL) set to
 * "listen HOST:PORT: reason": LD_EINVAL when the host does not resolve,
 * LD_ENOMEM, LD_EIO when the socket, bind or listen failed. Also for the
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
