/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_transport: an in-memory struct ld_transport (transport.h) that stands
 * in for the libcurl transport and kube-apiserver behind it in tests of the
 * Lease client, the host and shard groups. It serves a small Kubernetes
 * Lease API in one namespace, on a fake clock, as a discrete-event
 * simulation: nothing sleeps, and the same calls give the same callbacks at
 * the same fake times. It is faithful to the API's answers and ordering as
 * described below, not to HTTP (no sockets, headers or connections).
 *
 * Names: struct fake_transport; its functions and types are prefixed ft_
 * (FT_ for constants), short because simulations call them on every line;
 * the other fakes (tests/unit/support/fake_*.h) use their full name.
 *
 * The API: Leases by name with a global resourceVersion (every write takes
 * the next one), GET / POST / PUT with kube-apiserver's answers (404
 * NotFound, 409 Conflict on a stale resourceVersion, 409 AlreadyExists,
 * 422 without a resourceVersion; Status bodies), DELETE with its
 * preconditions (409 Conflict when the uid or resourceVersion differs),
 * lists and watches of the collection by fieldSelector metadata.name=NAME
 * or labelSelector k=v (optionally with ",!k2": without label k2). A
 * watch from a resourceVersion replays the changes after it (an ERROR
 * event 410 Expired when it is older than the kept history), one without
 * sends ADDED for every matching Lease first; it ends after its
 * timeoutSeconds.
 *
 * Time: a round trip is served latency_ms (default 1) after its submit;
 * its answer, and its effect on the store, come then, unless a fault says
 * otherwise. An answer later than the exchange's timeout_ms is replaced by
 * LD_ETIMEOUT at the timeout, and a write delayed past it still lands at
 * its time (a late write, as a real server can make one). A canceled
 * exchange has no effect. Watch events reach each open stream
 * watch_latency_ms (default 1) after the write. fake_transport_run delivers what is due
 * in (time, order of scheduling) and advances the clock to the next due
 * item or by wait_ms, whichever is sooner. A caller that keeps running it
 * with a zero wait while nothing is due would spin for ever in fake time
 * (and burns a core on a real clock): after 10 such runs in a row the fake
 * lets 1 ms pass, as a real clock would, and counts it (fake_transport_spin_ms).
 *
 * Several clients (replicas) can share one API: each is a transport of its
 * own (fake_transport_transport, fake_transport_add_client) whose run delivers only its
 * own exchanges' callbacks, all on the one clock. A client whose run comes after another
 * advanced the clock gets what fell due meanwhile late, as a starved process would.
 *
 * Ownership: each client transport is owned by whoever frees it (usually
 * the ld_kube it is handed to via ld_kube_new_on); freeing one ends its
 * exchanges without callbacks, and the struct fake_transport lives until
 * the last one is freed. Strings returned are borrowed from the fake and
 * valid until its next call that changes the store or the log.
 */
#ifndef LEADERD_TEST_FAKE_TRANSPORT_H
#define LEADERD_TEST_FAKE_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "host.h"
#include "lease.h"
#include "transport.h"

struct fake_transport;

/* The verbs a fault or a count names: the HTTP verbs of round trips, and
 * LIST (a GET of the collection) and WATCH (a stream) for the rest. */
#define FAKE_TRANSPORT_VERB_ANY NULL

enum fake_transport_fault_kind {
    FAKE_TRANSPORT_HANG, /* no answer: LD_ETIMEOUT at the exchange's timeout, no effect */
    FAKE_TRANSPORT_DELAY,  /* served delay_ms late (effect included) */
    FAKE_TRANSPORT_STATUS, /* answered with status (a Status body; Retry-After on 429) */
    FAKE_TRANSPORT_FAIL,   /* fails with rc (LD_ECONNECT, LD_ETRANSPORT): no effect */
    /* Served at its time, whether or not its client runs (its effect, a
     * LIST's snapshot), and answered delay_ms after that (LD_ETIMEOUT at
     * the exchange's timeout if that is sooner): watch events of writes
     * made meanwhile reach the client first, as from a server slow to
     * send its answer. */
    FAKE_TRANSPORT_LATE_ANSWER,
    /* Served (its effect applied) at its time and answered with status
     * anyway, as a 409 or 5xx after the write was committed. */
    FAKE_TRANSPORT_APPLIED_STATUS,
    /* Streams only (verb WATCH): */
    FAKE_TRANSPORT_STALL, /* opens (200) and stays silent until it times out */
    FAKE_TRANSPORT_END,   /* opens, sends what it would, and ends after delay_ms */
};

struct fake_transport_fault {
    enum fake_transport_fault_kind kind;
    int64_t
        delay_ms; /* FAKE_TRANSPORT_DELAY, FAKE_TRANSPORT_END, FAKE_TRANSPORT_LATE_ANSWER;
                     also added before FAKE_TRANSPORT_STATUS/FAKE_TRANSPORT_FAIL */
    long status;  /* FAKE_TRANSPORT_STATUS, FAKE_TRANSPORT_APPLIED_STATUS */
    int retry_after_s; /* FAKE_TRANSPORT_STATUS: Retry-After header when > 0 */
    enum ld_err rc;    /* FAKE_TRANSPORT_FAIL */
    int count;         /* exchanges it applies to; < 0: until cleared */
    int64_t until_ms;  /* > 0: applies only before this fake time */
};

/* One logged exchange. */
struct fake_transport_record {
    int64_t at_ms;    /* submit time */
    int client;       /* which client sent it: 0 for fake_transport_transport's */
    char verb[8];     /* GET POST PUT LIST WATCH (or the request's own verb) */
    const char *path; /* as sent, query included */
    const char *body; /* "" when none */
    const char *name; /* the Lease it is about (a POST: its body's), "" none */
    int64_t end_ms;   /* when its done ran or it was canceled; -1 before */
    long status;      /* the answer's, 0 when none */
    enum ld_err rc;   /* the result's rc, LD_OK until it ended */
    bool canceled;
};

/* A fake in namespace ns (copied) whose clock starts at mono start_ms and
 * wall start_wall_us. NULL on allocation failure. */
struct fake_transport *fake_transport_new(const char *ns, int64_t start_ms,
                                          int64_t start_wall_us);

/* The first client, made by fake_transport_new. */
struct ld_transport *fake_transport_transport(struct fake_transport *f);
/* Another client on the same API (at most 32 in all), or NULL. */
struct ld_transport *fake_transport_add_client(struct fake_transport *f);

/* A host clock that reads f's clock. */
struct ld_clock fake_transport_host_clock(struct fake_transport *f);
int64_t fake_transport_now_ms(const struct fake_transport *f);
int64_t fake_transport_wall_us(const struct fake_transport *f);

void fake_transport_set_latency_ms(struct fake_transport *f, int64_t ms);
void fake_transport_set_watch_latency_ms(struct fake_transport *f, int64_t ms);
/* Adds ms to the watch latency of one client's streams (a replica whose
 * watch lags the others'); events of a stream keep their order. */
void fake_transport_set_client_watch_lag_ms(struct fake_transport *f, int client,
                                            int64_t ms);
/* From now on, freeing a client (a killed process) lets its requests that
 * the server had not served yet land at their time, unanswered, as
 * requests already on the wire do; by default they have no effect. */
void fake_transport_set_writes_outlive_clients(struct fake_transport *f, bool on);

/* Adds a fault for exchanges on Lease name (NULL: any; a LIST or WATCH
 * matches the name of its fieldSelector, or any name when it has none) and
 * verb (NULL: any). The oldest fault that matches and has count left
 * applies. */
void fake_transport_fault_add(struct fake_transport *f, const char *name,
                              const char *verb, struct fake_transport_fault fault);
/* The same for the exchanges of one client only (a partitioned replica). */
void fake_transport_fault_add_for(struct fake_transport *f, int client, const char *name,
                                  const char *verb, struct fake_transport_fault fault);
void fake_transport_fault_clear(struct fake_transport *f);

/* The store, as another client sees it. fake_transport_lease_put writes holder (""
 * for free), duration and renewTime (acquireTime too when new), keeping
 * the rest; labels "k=v" (NULL: keep) set on the object. Returns the new
 * resourceVersion. */
uint64_t fake_transport_lease_put(struct fake_transport *f, const char *name,
                                  const char *labels, const char *holder,
                                  int32_t duration_s, int64_t renew_us);
/* Deletes name (a DELETED event); false when it was absent. */
bool fake_transport_lease_delete(struct fake_transport *f, const char *name);
/* Decodes the stored name into out (caller clears): LD_OK or LD_ENOTFOUND. */
enum ld_err fake_transport_lease_get(struct fake_transport *f, const char *name,
                                     struct ld_lease *out);
/* Forgets the watch history: a watch from any resourceVersion given out
 * so far gets 410 Expired; later ones work. */
void fake_transport_compact(struct fake_transport *f);
uint64_t fake_transport_resource_version(const struct fake_transport *f);

/* Open streams: end each now (server closed it, rc LD_OK status 200), send
 * each an ERROR 410 Expired event and end it, make each silent from now on
 * (events are dropped), or send each a raw line (a newline is added). */
void fake_transport_watch_end_all(struct fake_transport *f);
void fake_transport_watch_gone_all(struct fake_transport *f);
void fake_transport_watch_stall_all(struct fake_transport *f);
void fake_transport_watch_inject(struct fake_transport *f, const char *line);
/* Streams open now. */
size_t fake_transport_watch_open_count(const struct fake_transport *f);

/* The log. */
size_t fake_transport_record_count(const struct fake_transport *f);
const struct fake_transport_record *fake_transport_record(const struct fake_transport *f,
                                                          size_t i);
/* Logged exchanges of verb (NULL: any) and Lease name (NULL: any) submitted
 * at or after since_ms. */
size_t fake_transport_count(const struct fake_transport *f, const char *verb,
                            const char *name, int64_t since_ms);
/* Most exchanges in flight at once, overall and of round trips on one
 * Lease name. */
size_t fake_transport_max_in_flight(const struct fake_transport *f);
size_t fake_transport_max_in_flight_per_name(const struct fake_transport *f);
/* Fake milliseconds that passed only because a caller spun on zero-wait
 * runs with nothing due (a busy loop; 0 for a well-behaved caller). */
uint64_t fake_transport_spin_ms(const struct fake_transport *f);
/* Callbacks run so far (done and data). */
uint64_t fake_transport_callbacks(const struct fake_transport *f);

#endif
