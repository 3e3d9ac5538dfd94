/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_server: the sidecar HTTP server's object and the limits it runs
 * with. http_listen builds and frees it; the request dispatch
 * (http_dispatch) reads it. Its own header so that both depend on it and
 * neither on the other.
 */
#ifndef LEADERD_HTTP_SERVER_H
#define LEADERD_HTTP_SERVER_H

#include <stdint.h>

#include <microhttpd.h>

#include "http_conn.h"
#include "http_hold.h"
#include "http_socket.h"
#include "metrics.h"
#include "state.h"

/* The server. ld_http_start_opts builds it and ld_http_stop frees it; in
 * between nothing here changes, so MHD's thread reads it without a lock
 * (holds and conns guard their own state). */
struct ld_http {
    struct MHD_Daemon *daemon;   /* owned */
    struct ld_state *st;         /* borrowed */
    struct ld_metrics *m;        /* borrowed; may be NULL */
    struct ld_http_holds *holds; /* owned */
    struct ld_http_conns *conns; /* owned */
    struct ld_http_limits lim;
    const struct ld_http_mode *mode; /* its routes */
    int port;
};

#endif
