/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_listen: limits, the listening socket, and the server's start, stop
 * and counters (see http_listen.h).
 */
#include "http_listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_dispatch.h"
#include "http_socket.h"
#include "log.h"
#include "memtrim.h"

/* Probes, scrapers and a few apps: requests are small, so a small pool per
 * connection (it also caps the request line and headers: MHD answers 414
 * or 431 beyond it). */
#define CONNECTION_MEMORY 16384

/* ld_http_mhd_log's argument for this server. */
static char log_prefix[] = "http";

struct ld_http *ld_http_start_opts(const char *host, int port, struct ld_state *st,
                                   struct ld_metrics *m,
                                   const struct ld_http_options *opts,
                                   struct ld_errinfo *err)
{
    static const struct ld_http_options defaults;
    struct ld_http *h = NULL;
    int fd = -1;
    if (port < 0 || port > 65535) {
        ld_errinfo_set(err, LD_EINVAL, "listen: port %d out of range", port);
        goto fail;
    }
    h = calloc(1, sizeof(*h));
    if (!h) {
        ld_errinfo_set(err, LD_ENOMEM, "http: out of memory");
        goto fail;
    }
    h->st = st;
    h->m = m;
    h->mode = opts && opts->mode ? opts->mode : &ld_http_lease_mode;
    if (h->mode == &ld_http_shard_mode && !st->layout) {
        ld_errinfo_set(err, LD_EINVAL, "http: shard routes without a shard layout");
        goto fail;
    }
    ld_http_limits_of(opts ? opts : &defaults, &h->lim);
    h->holds = ld_http_holds_start(st, ld_http_mode_holds(h->mode), h->lim.heartbeat_ms,
                                   h->lim.max_held, h->lim.max_subs, err);
    if (!h->holds)
        goto fail;
    h->conns = ld_http_conns_new(h->lim.evict_at, err);
    if (!h->conns)
        goto fail;
    fd = ld_http_open_listener(host, port, err);
    if (fd < 0)
        goto fail;
    h->port = ld_http_bound_port(fd);
    unsigned int idle_s =
        opts && opts->idle_timeout_s ? opts->idle_timeout_s : LD_HTTP_IDLE_TIMEOUT_S;
    h->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
            MHD_ALLOW_SUSPEND_RESUME,
        0, NULL, NULL, ld_http_dispatch, h, MHD_OPTION_EXTERNAL_LOGGER, ld_http_mhd_log,
        log_prefix, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
        h->lim.max_conns, MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_NOTIFY_COMPLETED, ld_http_dispatch_completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, ld_http_conns_notify, h->conns,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)LD_THREAD_STACK, MHD_OPTION_END);
    if (!h->daemon) {
        ld_errinfo_set(err, LD_ESYS, "http: cannot start the server on port %d", h->port);
        goto fail;
    }
    return h;
fail:
    if (fd >= 0)
        close(fd);
    if (h) {
        ld_http_conns_free(h->conns);
        ld_http_holds_free(h->holds);
        free(h);
    }
    return NULL;
}

struct ld_http *ld_http_start(const char *host, int port, struct ld_state *st,
                              struct ld_metrics *m, struct ld_errinfo *err)
{
    return ld_http_start_opts(host, port, st, m, NULL, err);
}

void ld_http_stop(struct ld_http *h)
{
    if (!h)
        return;
    /* MHD must not be stopped with suspended connections. */
    ld_http_holds_stop(h->holds);
    /* MHD closes the listening socket it was given. */
    MHD_stop_daemon(h->daemon);
    ld_http_conns_free(h->conns);
    ld_http_holds_free(h->holds);
    free(h);
}

int ld_http_port(const struct ld_http *h)
{
    return h ? h->port : -1;
}

void ld_http_get_stats(struct ld_http *h, struct ld_http_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->max_connections = h->lim.max_conns;
    out->max_held = h->lim.max_held;
    out->max_subscribers = h->lim.max_subs;
    ld_http_holds_stats(h->holds, out);
    ld_http_conns_stats(h->conns, out);
}
