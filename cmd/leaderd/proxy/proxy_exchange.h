/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy_exchange: what the API write gate's two threads share (see
 * proxy.h): an exchange (one request, from MHD's URI callback until both
 * sides let go of it), the hub that hands exchanges between them, and the
 * transitions both make. Internal to the proxy: proxy.c (MHD's side) and
 * proxy_upstream.c (the upstream thread) include it, nothing else does;
 * hence the ld_pxe_ prefix.
 *
 * An exchange is shared by MHD's side (from the URI callback to the
 * completion callback) and the upstream thread (from the hand-over to the
 * removal of its handle), hence refs; the todo and wake lists hold a
 * reference each while q is on them. hub->mu guards what both
 * sides read, marked below. An exchange is freed by whoever drops its last
 * reference (ld_pxe_release_locked); no function here hands out memory the
 * caller must free.
 */
#ifndef LEADERD_PROXY_EXCHANGE_H
#define LEADERD_PROXY_EXCHANGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "buf.h"
#include "hook_proxy.h"
#include "metrics.h"
#include "proxy_gate.h"
#include "state.h"

/* Why an exchange ended before its answer was relayed whole. */
enum ld_pxe_cut {
    LD_PXE_CUT_NONE,
    LD_PXE_CUT_LEADERSHIP,
    LD_PXE_CUT_CLIENT,
    LD_PXE_CUT_STOP
};

struct ld_pxe {
    struct ld_pxe_hub *hub;
    /* MHD's side only. */
    struct MHD_Connection *mc;
    char *target; /* the request target as received */
    const char *method;
    bool started, handed, timeout_off;
    bool hdrs_failed; /* a request header could not be copied (out of memory) */
    struct ld_proxy_verdict verdict;
    struct ld_buf body;  /* at most LD_PROXY_MAX_BODY; its cap is in hub->body_bytes */
    size_t dropped;      /* bytes of a refused body read and thrown away */
    int64_t body_due_ms; /* monotonic: the whole body by then, or 408 */
    int fd;              /* the client's socket, -1 when MHD does not tell */
    /* The upstream thread only (hdrs is built by MHD's side before the
     * hand-over; status and rhdrs are read by it once headers_done is set,
     * result and errbuf once done is, both under hub->mu). */
    struct ld_pxe *prev, *next; /* in the upstream's running list while added */
    CURL *easy;
    bool added;
    struct curl_slist *hdrs;
    char errbuf[CURL_ERROR_SIZE];
    CURLcode result;
    long status;
    struct curl_slist *rhdrs; /* response header lines, "Name: value" */
    size_t blocked;           /* the piece curl holds while paused */
    bool sent;      /* a write: it went (or was about to go) out; read once done */
    bool in_flight; /* a write in hub->writes: sent, not answered or cut */
    /* Under hub->mu. */
    int refs;
    struct ld_pxe *in_next, *todo_next, *wake_next; /* in hub->incoming, todo, wakes */
    bool wake_due;
    bool in_todo, want_unpause;
    bool suspended, polled; /* polled: in hub->epfd for hang-ups */
    bool headers_done, done, paused, refused_prereq;
    bool gone;    /* the client hung up or MHD ended the request */
    bool counted; /* one of hub->exchanges until done */
    enum ld_pxe_cut cut;
    struct ld_proxy_verdict fail; /* status != 0: the answer to a failed start */
    char *buf;                    /* the relay buffer, NULL while empty */
    size_t boff, blen, bcap;
};

/* Where the two sides meet. */
struct ld_pxe_hub {
    struct ld_state *st;  /* borrowed */
    struct ld_metrics *m; /* borrowed */
    CURLM *multi;         /* the upstream thread's; curl_multi_wakeup from any */
    /* Counts the writes in flight for the release hold; set before the
     * threads start, NULL when nobody counts. */
    struct ld_hook_proxy *writes;
    int epfd; /* suspended clients' sockets, for hang-ups */
    pthread_mutex_t mu;
    /* Under mu. */
    struct ld_pxe *incoming, *incoming_tail; /* handed over, not started */
    struct ld_pxe *todo;    /* to serve: an unpause asked for, a client gone */
    struct ld_pxe *wakes;   /* the upstream thread's: connections to resume */
    size_t body_bytes;      /* what every exchange's body holds (their cap) */
    unsigned int exchanges; /* handed over, counted, not done (proxy.c's cap) */
    unsigned int requests;  /* MHD's: from the URI to the completion callback */
    bool stopping;
    /* Signalled when requests drops to 0 while stopping: ld_proxy_stop
     * waits for the answers already decided to reach their clients (on
     * LD_COND_CLOCK, clock.h). */
    pthread_cond_t quiet;
    bool quiet_ready;
};

/* The published leadership, held for one judgment: snap is a copy, shards
 * (shard mode only) a reference that ld_pxe_view_drop gives back. */
struct ld_pxe_view {
    struct ld_snapshot snap;
    struct ld_shardsnap *shards;
    struct ld_proxy_view v;
};

/* Sets up h for st and m (borrowed, must outlive it). Returns 0, or -1
 * with h left for ld_pxe_hub_fini. */
int ld_pxe_hub_init(struct ld_pxe_hub *h, struct ld_state *st, struct ld_metrics *m);

/* Drops the references the todo list still holds and frees what
 * ld_pxe_hub_init made; the upstream thread must be gone. */
void ld_pxe_hub_fini(struct ld_pxe_hub *h);

/* Wakes the upstream thread; any thread, with or without h->mu. */
void ld_pxe_wake(struct ld_pxe_hub *h);

/* Takes the published leadership into v; v must be given back with
 * ld_pxe_view_drop. */
void ld_pxe_view_take(struct ld_pxe_hub *h, struct ld_pxe_view *v);
void ld_pxe_view_drop(struct ld_pxe_view *v);

/* Sets *v to an answer of status with a printf-formatted message. */
void ld_pxe_verdict_printf(struct ld_proxy_verdict *v, unsigned int status,
                           const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- with hub->mu held ---- */

/* Frees q's body and gives its room back to the body budget. */
void ld_pxe_body_drop_locked(struct ld_pxe *q);

/* Drops a reference to q, freeing it with the last. */
void ld_pxe_release_locked(struct ld_pxe *q);

/* Queues q on the todo list, taking a reference. Returns true when the
 * upstream thread must be woken (after unlocking). */
bool ld_pxe_todo_locked(struct ld_pxe *q);

/* Suspends q's connection and watches its socket for hang-ups; only on
 * MHD's thread, from a handler or the content reader. */
void ld_pxe_suspend_locked(struct ld_pxe *q);

/* Resumes q's suspended connection and stops watching it for hang-ups. */
void ld_pxe_resume_locked(struct ld_pxe *q);

#endif
