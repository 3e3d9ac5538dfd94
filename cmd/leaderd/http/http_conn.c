/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_conn: the idle list and eviction (see http_conn.h).
 */
#include "http_conn.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

/* One connection's record (MHD's socket context). */
struct conn {
    struct conn *prev, *next; /* in the idle list while idle */
    int fd;
    bool idle;
    bool evicted;
};

struct ld_http_conns {
    pthread_mutex_t mu;                 /* guards everything below */
    struct conn *idle_head, *idle_tail; /* longest idle first */
    unsigned int nconns, nidle, nevicting, evict_at;
    uint64_t evicted;
};

struct ld_http_conns *ld_http_conns_new(unsigned int evict_at, struct ld_errinfo *err)
{
    struct ld_http_conns *cs = calloc(1, sizeof(*cs));
    if (!cs) {
        ld_errinfo_set(err, LD_ENOMEM, "http: out of memory");
        return NULL;
    }
    if (pthread_mutex_init(&cs->mu, NULL) != 0) {
        free(cs);
        ld_errinfo_set(err, LD_ESYS, "http: cannot create a mutex");
        return NULL;
    }
    cs->evict_at = evict_at;
    return cs;
}

void ld_http_conns_free(struct ld_http_conns *cs)
{
    if (!cs)
        return;
    pthread_mutex_destroy(&cs->mu);
    free(cs);
}

int ld_http_conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

static void idle_push(struct ld_http_conns *cs, struct conn *k)
{
    k->prev = cs->idle_tail;
    k->next = NULL;
    if (cs->idle_tail)
        cs->idle_tail->next = k;
    else
        cs->idle_head = k;
    cs->idle_tail = k;
    k->idle = true;
    cs->nidle++;
}

static void idle_remove(struct ld_http_conns *cs, struct conn *k)
{
    if (!k->idle)
        return;
    if (k->prev)
        k->prev->next = k->next;
    else
        cs->idle_head = k->next;
    if (k->next)
        k->next->prev = k->prev;
    else
        cs->idle_tail = k->prev;
    k->prev = k->next = NULL;
    k->idle = false;
    cs->nidle--;
}

/* A slowloris client or a pile of idle keep-alive connections must not
 * lock probes out: past evict_at, shut the longest idle ones down (MHD
 * then sees the end of the stream and closes them). Held requests and
 * streams are never idle, and their caps keep them below evict_at. */
static void evict_locked(struct ld_http_conns *cs)
{
    while (cs->nconns - cs->nevicting > cs->evict_at && cs->idle_head) {
        struct conn *k = cs->idle_head;
        idle_remove(cs, k);
        k->evicted = true;
        cs->nevicting++;
        cs->evicted++;
        if (k->fd >= 0)
            shutdown(k->fd, SHUT_RDWR);
    }
}

static struct conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void ld_http_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct ld_http_conns *cs = cls;
    pthread_mutex_lock(&cs->mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn *k = calloc(1, sizeof(*k));
        cs->nconns++;
        if (k) {
            k->fd = ld_http_conn_fd(c);
            idle_push(cs, k);
        }
        *socket_context = k;
        evict_locked(cs);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct conn *k = *socket_context;
        cs->nconns--;
        if (k) {
            idle_remove(cs, k);
            if (k->evicted)
                cs->nevicting--;
            free(k);
        }
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&cs->mu);
}

void ld_http_conns_busy(struct ld_http_conns *cs, struct MHD_Connection *c)
{
    struct conn *k = conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&cs->mu);
    idle_remove(cs, k);
    pthread_mutex_unlock(&cs->mu);
}

void ld_http_conns_idle(struct ld_http_conns *cs, struct MHD_Connection *c)
{
    struct conn *k = conn_of(c);
    pthread_mutex_lock(&cs->mu);
    if (k && !k->idle && !k->evicted)
        idle_push(cs, k);
    pthread_mutex_unlock(&cs->mu);
}

void ld_http_conns_stats(struct ld_http_conns *cs, struct ld_http_stats *out)
{
    pthread_mutex_lock(&cs->mu);
    out->connections = cs->nconns;
    out->idle = cs->nidle;
    out->evicted = cs->evicted;
    pthread_mutex_unlock(&cs->mu);
}
