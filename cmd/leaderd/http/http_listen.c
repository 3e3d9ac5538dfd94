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
#include "log.h"
#include "memtrim.h"

/* Probes, scrapers and a few apps: requests are small, so a small pool per
 * connection (it also caps the request line and headers: MHD answers 414
 * or 431 beyond it). */
#define CONNECTION_MEMORY 16384
#define LISTEN_BACKLOG 1024
/* Descriptors kept for everything else in the process (API connections,
 * logs, epoll and event fds). */
#define FD_RESERVE 64
#define MIN_CONNECTIONS 8

/* ld_http_mhd_log's argument for this server. */
static char log_prefix[] = "http";

void ld_http_mhd_log(void *prefix, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    ld_log(LD_LOG_DEBUG, "%s: %s", (const char *)prefix, msg);
}

static int bind_listen(const struct sockaddr *sa, socklen_t salen, bool dual_stack,
                       int *err_out)
{
    int one = 1, zero = 0;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        *err_out = errno;
        return -1;
    }
    /* A restarted sidecar must not wait out TIME_WAIT of its old sockets. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (sa->sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one, sizeof(one));
    if (bind(fd, sa, salen) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
        *err_out = errno;
        close(fd);
        return -1;
    }
    return fd;
}

/* The code of a getaddrinfo failure: a name that does not resolve is the
 * caller's to fix; running out of memory or a resolver that did not answer
 * is the system's. */
static enum ld_err gai_code(int gai)
{
    if (gai == EAI_MEMORY)
        return LD_ENOMEM;
    if (gai == EAI_AGAIN || gai == EAI_SYSTEM)
        return LD_ESYS;
    return LD_EINVAL;
}

int ld_http_open_listener(const char *host, int port, struct ld_errinfo *err)
{
    int e = 0;
    int fd = -1;
    char portstr[16];
    const char *shown = host && *host ? host : "";
    bool v6 = strchr(shown, ':') != NULL;
    if (!host || *host == '\0') {
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof(a6));
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_any;
        a6.sin6_port = htons((uint16_t)port);
        fd = bind_listen((struct sockaddr *)&a6, sizeof(a6), true, &e);
        /* No IPv6 on this host: all IPv4 interfaces will do. */
        if (fd < 0 && e != EADDRINUSE && e != EACCES) {
            struct sockaddr_in a4;
            memset(&a4, 0, sizeof(a4));
            a4.sin_family = AF_INET;
            a4.sin_addr.s_addr = htonl(INADDR_ANY);
            a4.sin_port = htons((uint16_t)port);
            fd = bind_listen((struct sockaddr *)&a4, sizeof(a4), false, &e);
        }
    } else {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        snprintf(portstr, sizeof(portstr), "%d", port);
        int gai = getaddrinfo(host, portstr, &hints, &res);
        if (gai != 0) {
            ld_errinfo_set(err, gai_code(gai), "listen %s%s%s:%d: %s", v6 ? "[" : "",
                           shown, v6 ? "]" : "", port, gai_strerror(gai));
            return -1;
        }
        e = EADDRNOTAVAIL;
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
            fd = bind_listen(ai->ai_addr, ai->ai_addrlen, false, &e);
        freeaddrinfo(res);
    }
    if (fd < 0)
        ld_errinfo_set(err, e == ENOMEM ? LD_ENOMEM : LD_ESYS, "listen %s%s%s:%d: %s",
                       v6 ? "[" : "", shown, v6 ? "]" : "", port, strerror(e));
    return fd;
}

int ld_http_bound_port(int fd)
{
    struct sockaddr_storage ss = {0};
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    /* Copies, not casts: the storage is only as typed as its family says. */
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 a6;
        memcpy(&a6, &ss, sizeof(a6));
        return ntohs(a6.sin6_port);
    }
    struct sockaddr_in a4;
    memcpy(&a4, &ss, sizeof(a4));
    return ntohs(a4.sin_port);
}

void ld_http_limits_of(const struct ld_http_options *o, struct ld_http_limits *lim)
{
    struct rlimit rl;
    unsigned int conns =
        o->max_connections ? o->max_connections : LD_HTTP_MAX_CONNECTIONS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        rlim_t room = rl.rlim_cur > FD_RESERVE + MIN_CONNECTIONS
                          ? rl.rlim_cur - FD_RESERVE
                          : MIN_CONNECTIONS;
        if (room < conns)
            conns = (unsigned int)room;
    }
    if (conns < MIN_CONNECTIONS)
        conns = MIN_CONNECTIONS;
    lim->max_conns = conns;
    lim->evict_at = conns - (conns / 16 > 2 ? conns / 16 : 2);
    lim->max_subs = o->max_subscribers ? o->max_subscribers : LD_HTTP_MAX_SUBSCRIBERS;
    if (lim->max_subs > conns / 2)
        lim->max_subs = conns / 2;
    lim->max_held = o->max_held ? o->max_held : LD_HTTP_MAX_HELD;
    if (lim->max_held > conns / 4)
        lim->max_held = conns / 4;
    lim->heartbeat_ms = o->heartbeat_ms > 0 ? o->heartbeat_ms : LD_HTTP_HEARTBEAT_MS;
    lim->max_wait_ms = o->max_wait_ms > 0 ? o->max_wait_ms : LD_HTTP_MAX_WAIT_MS;
}

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
    h->mode = opts && opts->mode ? opts->mode
              : st->layout       ? &ld_http_shard_mode
                                 : &ld_http_lease_mode;
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
