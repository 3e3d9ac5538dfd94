/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state: what the election loop publishes for the HTTP server. The loop is
 * the only writer; HTTP handlers take a copy under a short mutex and never
 * wait on the loop or on the API. Leadership is judged by the reader at
 * request time from lead_until_ms, so a wedged loop cannot keep a stale
 * "leader" answer alive.
 *
 * One thing goes the other way: POST /resign asks the loop, the only owner
 * of the engine, to step down, through the resign channel below (a ticket
 * counter and an eventfd the loop's waits end on), and its held request
 * waits, bounded, for the loop's answer. In shard mode, where there is no
 * POST /resign, POST /shards/ID/drained uses the same eventfd: the drain
 * channel below says which shards the loop is giving back and which the
 * app has said it stopped working on.
 */
#ifndef LEADERD_STATE_H
#define LEADERD_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "lease.h"
#include "shardlayout.h"
#include "shardsnap.h"

struct ld_snapshot {
    char lease[512]; /* "NAMESPACE/NAME", set once at start */
    char identity[LD_LEASE_MAX_HOLDER + 1];
    char leader[LD_LEASE_MAX_HOLDER + 1]; /* observed holder, "" when free */
    int64_t term;                         /* leaseTransitions of the observed record */
    bool observed;         /* the Lease (or its absence) was seen at least once */
    bool leading;          /* we hold it per our last successful write */
    int64_t lead_until_ms; /* monotonic; leading counts only before this */
    /* Monotonic: the deadline of our last term, also after a step-down on
     * purpose (election.h's term_until_ms); a write the gate already sent
     * may run until then. INT64_MIN when no term of ours is in view. */
    int64_t term_until_ms;
    bool has_renewed_at;
    int64_t renewed_at_us;      /* renewTime of the observed record (wall) */
    int64_t last_renew_wall_us; /* our last successful renewal (wall), 0 if none */
    int64_t heartbeat_ms;       /* monotonic time of the loop's last pass */
    int64_t stale_after_ms;     /* heartbeat older than this => unhealthy */
    char health_error[256];     /* non-empty => /healthz fails with this reason */
    int64_t transitions_seen;   /* leadership changes observed (metric) */
    char pod_label[8]; /* --pod-label as last written: "true", "false", "" never */
};

/* What became of one POST /resign. */
enum ld_resign_outcome {
    LD_RESIGN_PENDING = 0, /* not answered, or answered too long ago to say */
    LD_RESIGN_RELEASED,    /* stepped down, and the Lease no longer names us */
    LD_RESIGN_NOT_LEADER,  /* this replica was not leading */
    LD_RESIGN_FAILED,      /* stepped down, but the release was not written */
};

/* Outcomes kept for requests still waiting (each waits a bounded time). */
#define LD_RESIGN_SLOTS 64

/* Requests to resign from the HTTP threads to the loop, and the answers
 * back: tickets are numbered from 1; the loop takes every ticket asked
 * since its last take and answers them together. */
struct ld_resign_channel {
    int fd;          /* eventfd written per request; -1 while not enabled */
    int64_t wait_ms; /* how long a request waits for its outcome */
    uint64_t asked;  /* the last ticket handed out */
    uint64_t taken;  /* the last ticket the loop took */
    struct {
        uint64_t ticket;
        enum ld_resign_outcome outcome;
    } done[LD_RESIGN_SLOTS]; /* ticket t at t % LD_RESIGN_SLOTS */
};

/* Someone to tell about every publish (see ld_state_listen). */
struct ld_state_listener {
    void (*fn)(void *arg);
    void *arg;
    struct ld_state_listener *next; /* owned by ld_state */
};

/* Shard mode: one shard's drain, under the state's mutex. */
struct ld_drain_slot {
    uint8_t flags; /* private: giving back, drained */
    int64_t term;  /* the give-back's term */
};

struct ld_state {
    pthread_mutex_t mu;
    struct ld_snapshot snap;
    /* Shard mode only (else NULL): the group's names and ranges (one
     * reference, set before any thread starts and never changed after, so
     * read without mu), and the latest shard table (one reference owned
     * here; NULL until the first publish). A reader renders a shard answer
     * from these two and snap alone. In shard mode snap still carries the
     * loop's heartbeat, health and "observed" (the whole group). */
    struct ld_shardlayout *layout;
    struct ld_shardsnap *shards;
    struct ld_state_listener *listeners;
    struct ld_resign_channel resign; /* under mu */
    /* Shard mode, under mu: per shard, whether the loop is giving it back
     * (its claim ended, its release not written yet) and whether the app
     * said it drained it since. NULL until ld_state_drain_enable. */
    uint32_t n_drain;
    struct ld_drain_slot *drain;
};

void ld_state_init(struct ld_state *st, const char *lease, const char *identity,
                   int64_t stale_after_ms);

/* ---- the drain channel (shard mode) ---- */

/* Makes room for n_shards shards, none being given back. LD_OK, or
 * LD_ENOMEM (POST /shards/ID/drained then answers 409). Before any thread
 * uses st. */
enum ld_err ld_state_drain_enable(struct ld_state *st, uint32_t n_shards);
/* Loop side: shard s is being given back (true) or not (false), the
 * give-back of the claim of term (the shard record's leaseTransitions, as
 * /shards showed it); either forgets an earlier "drained". */
void ld_state_drain_set(struct ld_state *st, uint32_t s, bool giving_back, int64_t term);

/* What became of a POST /shards/ID/drained. */
enum ld_drained_answer {
    LD_DRAINED_NOTED,           /* s is being given back: its drain is over */
    LD_DRAINED_NOT_GIVING_BACK, /* nothing to drain (409) */
    LD_DRAINED_STALE,           /* a give-back of another term is under way (409) */
};

/* HTTP side: the app has drained shard s, of the give-back of term (or of
 * whichever give-back is under way with term < 0). The loop is woken
 * through the resign channel's eventfd, when enabled, when noted. A late
 * answer to an earlier give-back names that one's term and so never cuts
 * a later drain short. */
enum ld_drained_answer ld_state_drained_answer(struct ld_state *st, uint32_t s,
                                               int64_t term);
/* ld_state_drained_answer without a term: true when noted. */
bool ld_state_drained_post(struct ld_state *st, uint32_t s);
/* Loop side: whether the app said it drained s since the give-back
 * began; consumes the news. */
bool ld_state_drained_take(struct ld_state *st, uint32_t s);
void ld_state_destroy(struct ld_state *st);

/* Copies the current snapshot into out. */
void ld_state_read(struct ld_state *st, struct ld_snapshot *out);

/* Replaces the snapshot's dynamic fields with those of next (lease and
 * identity are kept), then calls every listener. */
void ld_state_publish(struct ld_state *st, const struct ld_snapshot *next);

/* Shard mode: takes a reference to layout (the group's, see struct
 * ld_state; released by ld_state_destroy) before any thread uses st. */
void ld_state_set_layout(struct ld_state *st, struct ld_shardlayout *layout);

/* Shard mode: replaces the shard table with next (its reference is taken
 * over; NULL-safe: nothing changes) and then snap's dynamic fields as
 * ld_state_publish does, then calls every listener once. */
void ld_state_publish_shards(struct ld_state *st, const struct ld_snapshot *snap,
                             struct ld_shardsnap *next);

/* Copies the snapshot into out (may be NULL) and returns a new reference
 * to the current shard table (release with ld_shardsnap_unref), or NULL
 * outside shard mode or before the first shard publish. */
struct ld_shardsnap *ld_state_read_shards(struct ld_state *st, struct ld_snapshot *out);

/* Sets pod_label ("true", "false", or NULL: never written), then calls
 * every listener. The loop's thread only, like ld_state_publish (which
 * keeps the value: the loop publishes what it read). */
void ld_state_set_pod_label(struct ld_state *st, const char *value);

/* Registers l (borrowed: it must stay valid until ld_state_unlisten).
 * l->fn(l->arg) is then called after every publish, visible change or not,
 * because leadership as judged at a later time also depends on
 * lead_until_ms. It runs on the publisher's thread with st's mutex held,
 * so it must be quick and must not touch st (writing an eventfd is the
 * intended use). Thread-safe. */
void ld_state_listen(struct ld_state *st, struct ld_state_listener *l);
/* Unregisters l; after it returns l->fn is no longer running or called.
 * Unknown listeners are ignored. */
void ld_state_unlisten(struct ld_state *st, struct ld_state_listener *l);

/* Opens the resign channel: an eventfd (non-blocking) that the loop
 * waits on; requests wait wait_ms for their outcome. Returns LD_OK, or
 * LD_ESYS with errno set (POST /resign then answers 503). Before any thread
 * uses st. */
enum ld_err ld_state_resign_enable(struct ld_state *st, int64_t wait_ms);

/* The channel's eventfd (readable after a request), or -1 when not
 * enabled. The loop reads it empty with ld_state_resign_drain. */
int ld_state_resign_fd(struct ld_state *st);
void ld_state_resign_drain(struct ld_state *st);

/* HTTP side: asks the loop to resign. Returns the request's ticket (> 0),
 * with its wait bound in *wait_ms, or 0 when the channel is not enabled. */
uint64_t ld_state_resign_ask(struct ld_state *st, int64_t *wait_ms);

/* HTTP side: the outcome of ticket, LD_RESIGN_PENDING until the loop
 * answered it. */
enum ld_resign_outcome ld_state_resign_outcome(struct ld_state *st, uint64_t ticket);

/* Loop side: takes the tickets asked since the last take into
 * [*first, *last]; false when there are none. */
bool ld_state_resign_take(struct ld_state *st, uint64_t *first, uint64_t *last);

/* Loop side: answers tickets first..last with outcome, then calls every
 * listener (as a publish does) so waiting requests look. */
void ld_state_resign_answer(struct ld_state *st, uint64_t first, uint64_t last,
                            enum ld_resign_outcome outcome);

/* Leadership as of now_ms: leading and before lead_until_ms. */
bool ld_snapshot_is_leader(const struct ld_snapshot *s, int64_t now_ms);

/* Whether a write sent under our last term may still be running as of
 * now_ms: before term_until_ms (leading or not). */
bool ld_snapshot_in_term(const struct ld_snapshot *s, int64_t now_ms);

#endif
