/*
 * proxy_upstream: the API write gate's upstream thread (see proxy.h), and
 * the state it shares with MHD's side in proxy.c. Internal to proxy.c and
 * proxy_upstream.c; nothing else includes it.
 *
 * An exchange is shared by MHD's side (from the URI callback to the
 * completion callback) and the upstream thread (from the hand-over to the
 * removal of its handle), hence refs; the todo and wake lists hold a
 * reference each while q is on them. p->mu guards what both sides read,
 * marked below. An exchange is freed by whoever drops its last reference
 * (ld_proxy_release_locked); no function here hands out memory the caller
 * must free.
 */
#ifndef LEADERD_PROXY_UPSTREAM_H
#define LEADERD_PROXY_UPSTREAM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "http_conn.h"
#include "proxy.h"
#include "proxy_gate.h"
#include "transport_curl.h"

/* Idle upstream connections kept for the next exchanges. */
#define UPSTREAM_IDLE 16L

enum cut_why { CUT_NONE, CUT_LEADERSHIP, CUT_CLIENT, CUT_STOP };

/* One request, from MHD's URI callback until both sides let go of it. */
struct xchg {
    struct ld_proxy *p;
    /* MHD's side only. */
    struct MHD_Connection *mc;
    char *target; /* the request target as received */
    const char *method;
    bool started, handed, timeout_off;
    bool hdrs_failed; /* a request header could not be copied (out of memory) */
    struct ld_proxy_verdict verdict;
    char *body;
    size_t len, cap;
    size_t dropped; /* bytes of a refused body read and thrown away */
    int fd;         /* the client's socket, -1 when MHD does not tell */
    /* The upstream thread only (hdrs is built by MHD's side before the
     * hand-over; status and rhdrs are read by it once headers_done is set,
     * result and errbuf once done is, both under p->mu). */
    struct xchg *prev, *next; /* in p->running while added */
    CURL *easy;
    bool added;
    struct curl_slist *hdrs;
    char errbuf[CURL_ERROR_SIZE];
    CURLcode result;
    long status;
    struct curl_slist *rhdrs; /* response header lines, "Name: value" */
    size_t blocked;           /* the piece curl holds while paused */
    /* Under p->mu. */
    int refs;
    struct xchg *in_next, *todo_next, *wake_next; /* in p->incoming, todo, wakes */
    bool wake_due;
    bool in_todo, want_unpause;
    bool suspended, polled; /* polled: in p->epfd for hang-ups */
    bool headers_done, done, paused, refused_prereq;
    bool gone; /* the client hung up or MHD ended the request */
    enum cut_why cut;
    struct ld_proxy_verdict fail; /* status != 0: the answer to a failed start */
    char *buf;                    /* the relay buffer, NULL while empty */
    size_t boff, blen, bcap;
};

struct ld_proxy {
    struct MHD_Daemon *daemon;
    struct ld_http_conns *conns; /* idle connections and eviction */
    struct ld_state *st;
    struct ld_metrics *m;
    struct ld_transport *tr; /* the upstream thread's */
    CURLM *multi;            /* the upstream thread's; curl_multi_wakeup from any */
    struct xchg *running;    /* the upstream thread's */
    struct xchg *wakes;      /* under mu: connections to resume, see wake_later_locked */
    int epfd;                /* suspended clients' sockets, for hang-ups */
    pthread_t thread;
    bool thread_started, listening;
    struct ld_state_listener listener;
    unsigned int idle_s;
    int port;

    pthread_mutex_t mu;
    struct xchg *incoming, *incoming_tail; /* handed over, not started */
    struct xchg *todo;
    size_t body_bytes; /* what every xchg's body holds (their cap) */
    bool stopping;
};

/* The published leadership, held for one judgment: snap is a copy, shards
 * (shard mode only) a reference that ld_proxy_view_drop gives back. */
struct view_hold {
    struct ld_snapshot snap;
    struct ld_shardsnap *shards;
    struct ld_proxy_view v;
};

/* ---- MHD's side (proxy.c), for both ---- */

/* Takes the published leadership into h; h must be given back with
 * ld_proxy_view_drop. */
void ld_proxy_view_take(struct ld_proxy *p, struct view_hold *h);
void ld_proxy_view_drop(struct view_hold *h);

/* Frees q's body and gives its room back to the body budget (p->mu held). */
void ld_proxy_body_drop_locked(struct xchg *q);

/* Drops a reference to q, freeing it with the last (p->mu held). */
void ld_proxy_release_locked(struct xchg *q);

/* Resumes q's suspended connection and stops watching it for hang-ups
 * (p->mu held). */
void ld_proxy_resume_locked(struct xchg *q);

/* Sets *v to an answer of status with a printf-formatted message. */
void ld_proxy_verdict_printf(struct ld_proxy_verdict *v, unsigned int status,
                             const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- the upstream thread (proxy_upstream.c) ---- */

/* Queues q on the todo list, taking a reference (p->mu held). Returns true
 * when the upstream thread must be woken (after unlocking). */
bool ld_proxy_todo_locked(struct xchg *q);

/* Starts the upstream thread on p (p->multi, p->epfd and p->mu set up);
 * it runs until p->stopping is set and it is woken. Returns 0 or the
 * pthread error. */
int ld_proxy_upstream_start(struct ld_proxy *p);

#endif
