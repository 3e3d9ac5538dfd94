/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_hold: requests the HTTP server holds open for one election's state
 * — GET /leader long-polls waiting for a change, /watch event streams and
 * POST /resign waiting for the loop's outcome — and the notifier thread
 * that resumes them.
 *
 * In shard mode (the state has a group, see state.h) the view is the
 * shard table: an event ("event: shards", the /shards body) per change of
 * any shard's leader, term or is_leader or of the members, polls about
 * one shard each, and the timeout at the earliest lead_until_ms of a
 * shard we lead.
 *
 * A held request is a suspended MHD connection, so it costs no thread. The
 * notifier sleeps in epoll_wait on an eventfd written by a state listener
 * (every publish), on EPOLLRDHUP of the suspended sockets (MHD does not
 * watch a suspended connection, so without this a client that went away
 * would only be noticed at the next write), and on a timeout at the
 * nearest of the current leader's lead_until_ms (is_leader turns false by
 * time alone), the next long-poll deadline and the next heartbeat. Every
 * change of what /leader shows becomes one numbered event in a small ring,
 * so a stream a little behind still gets every change in order.
 *
 * Threads and locks: the functions taking a connection run on MHD's
 * thread; ld_http_holds_stats on any. A mutex inside guards every hold.
 * Lock order: it, then the state's mutex, then MHD's own (MHD calls back
 * into this module holding none of its mutexes but a response's, which
 * the /watch reader takes before this one).
 */
#ifndef LEADERD_HTTP_HOLD_H
#define LEADERD_HTTP_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "http.h"
#include "state.h"

/* The held requests of one state. */
struct ld_http_holds;

/* One held request. A poll belongs to its request; a stream to its request
 * and to its MHD response; each lets go with ld_http_hold_release (the
 * response does so by itself when MHD destroys it). */
struct ld_http_hold;

/* What the holds show of the state: the single Lease's view (GET /leader,
 * "leader" events) or the shard table's (GET /shards/ID and /shard,
 * "shards" events, which need the state's layout). */
struct ld_http_hold_mode;
extern const struct ld_http_hold_mode ld_http_hold_lease_mode;
extern const struct ld_http_hold_mode ld_http_hold_shard_mode;

/* Starts the notifier for st (borrowed; must outlive the result), showing
 * what mode shows of it: /watch heartbeats every heartbeat_ms, at most
 * max_held long-polls and max_subs streams at once. Returns the new set
 * (free with ld_http_holds_free) or NULL with err set (LD_ENOMEM, or
 * LD_ESYS when the system refused a descriptor, a mutex or a thread). */
struct ld_http_holds *ld_http_holds_start(struct ld_state *st,
                                          const struct ld_http_hold_mode *mode,
                                          int64_t heartbeat_ms, unsigned int max_held,
                                          unsigned int max_subs, struct ld_errinfo *err);

/* Stops the notifier and lets every held request go, with the last
 * published state: polls are answered, streams end. Waits up to a second
 * for them to go out; nothing is held again after this. Call it before
 * stopping MHD, which must not stop with suspended connections. */
void ld_http_holds_stop(struct ld_http_holds *hs);

/* Frees hs (stopping its notifier if ld_http_holds_stop has not); MHD must
 * be stopped already. NULL-safe. */
void ld_http_holds_free(struct ld_http_holds *hs);

/* Holds GET /leader on c when the caller has seen the current state
 * already (want differs in nothing) and there is room: suspends c until
 * the state changes or want->wait_ms passes, then MHD calls the handler
 * again (see ld_http_hold_resumed). Returns the hold, or NULL when the
 * request is to be answered at once (it differs, the server is full or
 * stopping, or memory ran out). */
struct ld_http_hold *ld_http_hold_poll(struct ld_http_holds *hs, struct MHD_Connection *c,
                                       const struct ld_http_poll *want);

/* The shard of a poll that is about no shard (GET /leader). */
#define LD_HTTP_NO_SHARD UINT32_MAX

/* Shard mode (the state has a group): ld_http_hold_poll for GET
 * /shards/ID (or /shard?key=K) about shard, whose leader, term and
 * is_leader want is compared with; held until any of those three of that
 * shard changes or want->wait_ms passes. With LD_HTTP_NO_SHARD it is
 * ld_http_hold_poll; a poll of the other mode is never held (NULL). */
struct ld_http_hold *ld_http_hold_poll_shard(struct ld_http_holds *hs,
                                             struct MHD_Connection *c,
                                             const struct ld_http_poll *want,
                                             uint32_t shard);

/* Holds POST /resign on c: asks the loop to resign (ld_state_resign_ask
 * on the holds' state) and suspends c until the loop has answered that
 * ticket or the channel's wait bound passes, then MHD calls the handler
 * again. Returns the hold, or NULL, having asked nothing, when the channel
 * is not enabled, too many wait already, the server is stopping, or memory
 * ran out (answer 503). */
struct ld_http_hold *ld_http_hold_resign(struct ld_http_holds *hs,
                                         struct MHD_Connection *c);

/* True for a held POST /resign; its ticket (0 for other holds). */
bool ld_http_hold_is_resign(const struct ld_http_hold *x);
uint64_t ld_http_hold_ticket(const struct ld_http_hold *x);

/* A resumed poll or resign: true when it is to be answered, false when its
 * client has hung up. */
bool ld_http_hold_resumed(struct ld_http_hold *x);

/* True for a long-poll, false for a /watch stream. */
bool ld_http_hold_is_poll(const struct ld_http_hold *x);

/* The request that held x is over (MHD's completion callback). */
void ld_http_hold_release(struct ld_http_hold *x);

enum ld_http_watch_rc {
    LD_HTTP_WATCH_OK,
    LD_HTTP_WATCH_FULL,     /* at max_subs streams: answer 503 */
    LD_HTTP_WATCH_STARTING, /* no state published yet: answer 503 */
    LD_HTTP_WATCH_STOPPING, /* the server is stopping: answer 503 */
    LD_HTTP_WATCH_NOMEM,    /* answer 500 */
    LD_HTTP_WATCH_FAILED,   /* MHD could not make a response: close c */
};

/* Opens a /watch stream on c. last_event_id is the client's Last-Event-ID
 * header or NULL: the stream starts with the current state unless that is
 * the event the client has. On LD_HTTP_WATCH_OK, *resp is a new streaming
 * response (the caller adds its headers, queues it and destroys its
 * reference) and *hold the stream, to be released when the request ends. */
enum ld_http_watch_rc ld_http_watch_open(struct ld_http_holds *hs,
                                         struct MHD_Connection *c,
                                         const char *last_event_id,
                                         struct MHD_Response **resp,
                                         struct ld_http_hold **hold);

/* Fills held, subscribers and seq of out (leaves the rest). */
void ld_http_holds_stats(struct ld_http_holds *hs, struct ld_http_stats *out);

#endif
