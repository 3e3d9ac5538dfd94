/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_listen: the HTTP server's life — starting and stopping
 * libmicrohttpd on its socket and limits (http_socket) together with the
 * held requests (http_hold) and the connection bookkeeping (http_conn),
 * and its counters. It implements ld_http_start, ld_http_start_opts,
 * ld_http_stop, ld_http_port and ld_http_get_stats of http.h, building
 * the server object of http_server.h.
 */
#ifndef LEADERD_HTTP_LISTEN_H
#define LEADERD_HTTP_LISTEN_H

#include <stdint.h>

#include "http.h"
#include "http_server.h"

#endif
