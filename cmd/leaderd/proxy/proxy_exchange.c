/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy_exchange: the exchange and the hub the API write gate's two
 * threads share (see proxy_exchange.h): an exchange's references, its
 * body's share of the budget, the todo list, and the suspension of its
 * client's connection.
 */
#include "proxy_exchange.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "transport_curl.h"

int ld_pxe_hub_init(struct ld_pxe_hub *h, struct ld_state *st, struct ld_metrics *m)
{
    pthread_condattr_t attr;
    memset(h, 0, sizeof(*h));
    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, LD_COND_CLOCK);
    h->quiet_ready = pthread_cond_init(&h->quiet, &attr) == 0;
    pthread_condattr_destroy(&attr);
    h->st = st;
    h->m = m;
    h->multi = curl_multi_init();
    h->epfd = epoll_create1(EPOLL_CLOEXEC);
    return h->multi && h->epfd >= 0 && h->quiet_ready ? 0 : -1;
}

void ld_pxe_hub_fini(struct ld_pxe_hub *h)
{
    /* MHD's completions may have queued some after the thread's last round. */
    pthread_mutex_lock(&h->mu);
    while (h->todo) {
        struct ld_pxe *q = h->todo;
        h->todo = q->todo_next;
        q->in_todo = false;
        ld_pxe_release_locked(q);
    }
    pthread_mutex_unlock(&h->mu);
    if (h->multi)
        curl_multi_cleanup(h->multi);
    if (h->epfd >= 0)
        close(h->epfd);
    if (h->quiet_ready)
        pthread_cond_destroy(&h->quiet);
    pthread_mutex_destroy(&h->mu);
}

void ld_pxe_wake(struct ld_pxe_hub *h)
{
    curl_multi_wakeup(h->multi);
}

void ld_pxe_view_take(struct ld_pxe_hub *h, struct ld_pxe_view *v)
{
    /* One read for both modes: a single Lease's state has no shard table
     * (NULL), and the gate tells the modes apart by the view's layout. */
    v->shards = ld_state_read_shards(h->st, &v->snap);
    v->v = (struct ld_proxy_view){
        .snap = &v->snap, .layout = h->st->layout, .shards = v->shards};
}

void ld_pxe_view_drop(struct ld_pxe_view *v)
{
    ld_shardsnap_unref(v->shards);
    v->shards = NULL;
}

void ld_pxe_verdict_printf(struct ld_proxy_verdict *v, unsigned int status,
                           const char *reason, const char *fmt, ...)
{
    va_list ap;
    memset(v, 0, sizeof(*v));
    v->status = status;
    v->reason = reason;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof(v->message), fmt, ap);
    va_end(ap);
}

void ld_pxe_body_drop_locked(struct ld_pxe *q)
{
    q->hub->body_bytes -= q->body.cap;
    ld_buf_free(&q->body);
}

static void pxe_free(struct ld_pxe *q)
{
    curl_slist_free_all(q->rhdrs);
    ld_transport_curl_free_headers(q->hdrs);
    free(q->buf);
    ld_pxe_body_drop_locked(q);
    free(q->target);
    free(q);
}

void ld_pxe_release_locked(struct ld_pxe *q)
{
    if (--q->refs == 0)
        pxe_free(q);
}

bool ld_pxe_todo_locked(struct ld_pxe *q)
{
    if (q->in_todo)
        return false;
    q->in_todo = true;
    q->refs++;
    q->todo_next = q->hub->todo;
    q->hub->todo = q;
    return true;
}

void ld_pxe_suspend_locked(struct ld_pxe *q)
{
    if (q->fd >= 0 && !q->polled) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLRDHUP;
        ev.data.ptr = q;
        if (epoll_ctl(q->hub->epfd, EPOLL_CTL_ADD, q->fd, &ev) == 0)
            q->polled = true;
        else
            ld_log(LD_LOG_DEBUG, "api proxy: cannot watch a client for hang-ups: %s",
                   strerror(errno));
    }
    q->suspended = true;
    MHD_suspend_connection(q->mc);
}

void ld_pxe_resume_locked(struct ld_pxe *q)
{
    if (!q->suspended)
        return;
    q->suspended = false;
    if (q->polled) {
        epoll_ctl(q->hub->epfd, EPOLL_CTL_DEL, q->fd, NULL);
        q->polled = false;
    }
    MHD_resume_connection(q->mc);
}
