/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_socket: the listening socket, the limits and MHD's log that both
 * libmicrohttpd servers share (see http_socket.h).
 */
#include "http_socket.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

#define LISTEN_BACKLOG 1024
/* Descriptors kept for everything else in the process (API connections,
 * logs, epoll and event fds). */
#define FD_RESERVE 64
#define MIN_CONNECTIONS 8

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
