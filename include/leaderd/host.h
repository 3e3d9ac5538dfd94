/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host: many elections, one thread, one event loop. The host owns N
 * election engines (election.h) and drives them over one Kubernetes client
 * (kube.h) whose transport runs every request concurrently: each engine has
 * at most one request in flight, and a slow or hung request of one Lease
 * delays only that Lease's engine (its request ends at its own timeout),
 * never another's renewal.
 *
 * One watch feeds every election of the host: with a label selector it
 * watches the namespace's Leases that carry the selected labels (the
 * group) and hands each event to the election of that name; without one, a
 * host of one election watches that Lease by name (what RBAC's
 * resourceNames allows), and a host of several elections and no selector
 * polls. The watch restarts with back-off when it fails, is replaced when
 * it misses a change or goes silent, and is never needed for safety.
 *
 * Threading: everything happens in ld_host_run on the caller's thread;
 * callbacks (publish, events) run from inside it. Nothing here may be
 * called from another thread or from inside a callback, except where said;
 * nor may a callback make a blocking call on the host's client (it would
 * run the host's other callbacks in the middle of a pass): use the
 * asynchronous calls.
 * Time comes from a struct ld_clock (clock.h) so tests can drive it.
 */
#ifndef LEADERD_HOST_H
#define LEADERD_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "election.h"
#include "err.h"
#include "kube.h"

struct ld_host;

/* What is published for one election after a pass changed something. All
 * pointers are borrowed for the duration of the callback. */
struct ld_host_view {
    size_t index;                     /* as returned by ld_host_add */
    const char *name;                 /* the Lease's name */
    struct ld_election_status status; /* the engine's */
    int64_t transitions_seen;         /* leader changes seen after the first */
    /* Since when every request of this election has been refused with 401
     * or 403 (monotonic ms), 0 when the last one was not. */
    int64_t auth_failing_since_ms;
    const struct ld_errinfo *last_err; /* latest API failure; code LD_OK if none */
};

/* Per election. Both callbacks may be NULL; they run inside ld_host_run. */
struct ld_host_election_ops {
    void *ctx;
    /* After each pass in which the election acted or learned something,
     * and once more when it is done. */
    void (*on_publish)(void *ctx, const struct ld_host_view *view, int64_t now_ms);
    /* Each engine event, after the host logged it. */
    void (*on_event)(void *ctx, size_t index, const struct ld_event *ev);
    /* When this election should be published again although its engine
     * has nothing to do (a consumer of leadership retrying a call of its
     * own); INT64_MAX for never. Asked after each publish. */
    int64_t (*next_publish_ms)(void *ctx, size_t index, int64_t now_ms);
    /* During a shutdown or a resignation (ld_election_resign, a
     * preferredHolder hand-over, not contending), before this election's
     * release is written: true while the caller has something to finish
     * first (a Pod label set to "false", a command that must be gone
     * before anyone else may lead). The engine has stepped down already;
     * only the release waits, and the election is published meanwhile.
     * The caller bounds how long it says true (a resignation gives up its
     * release renew_deadline after it began), and may give the release up
     * instead (ld_host_abandon_release, also from inside this callback).
     * With this callback set, a resignation the engine begins by itself (a
     * preferredHolder hand-over, a Lease given back while not contending)
     * is held too: it begins at a pass, before its release is asked for. */
    bool (*holds_release)(void *ctx, size_t index, int64_t now_ms);
};

struct ld_watch_event;

/* What the watch sees; any member may be NULL. */
struct ld_host_observer {
    void *ctx;
    /* A stream started; from_current: from the current state (ADDED for
     * each Lease), not from the last resourceVersion, so what happened
     * between the last stream and this one, a deletion say, is never
     * shown: a caller that judges its view complete must read anew. */
    void (*watch_started)(void *ctx, bool from_current);
    void (*watch_event)(void *ctx);
    /* Every ADDED, MODIFIED and DELETED event of the stream, before it goes
     * to its election: also the group's Leases that are no election here
     * (other replicas' member Leases, say). ev is borrowed. */
    void (*lease_event)(void *ctx, const struct ld_watch_event *ev, int64_t now_ms);
    /* After each pass (every election that was due has acted and been
     * published), before the host waits: the place to act on what the
     * pass's publishes said as a whole, once rather than per election
     * (e.g. to decide who contends, then ld_host_poke those elections).
     * Returns when it wants to be called again without news (a time not
     * after now_ms asks for another pass at once), INT64_MAX for only
     * after the next pass. It may be called often (after every
     * answer and watch event); it must be cheap when nothing changed. */
    int64_t (*after_pass)(void *ctx, int64_t now_ms);
};

struct ld_host_config {
    struct ld_kube *kube;       /* borrowed; outlives the host */
    const char *namespace_;     /* copied */
    const char *label_selector; /* copied; NULL or "": see above */
    int64_t lease_duration_ms;  /* for the watch's silence limit */
    int64_t renew_deadline_ms;  /* for the 401 probe and health */
    /* Logs name the Lease of each line ("lease NAME: ...") when true; a
     * host of one election whose log sink already names it sets false. */
    bool log_names;
    const struct ld_clock *clock;            /* copied; NULL: the real clock */
    const struct ld_host_observer *observer; /* copied; may be NULL */
};

/* A new host with no elections (free with ld_host_free), or NULL with err
 * set (LD_EINVAL for a bad namespace or selector, LD_ENOMEM). */
struct ld_host *ld_host_new(const struct ld_host_config *cfg, struct ld_errinfo *err);

/* Cancels what is in flight (no callbacks) and frees the host and its
 * engines. NULL-safe. */
void ld_host_free(struct ld_host *h);

/* Adds an election; its engine is made from cfg (cfg->namespace_ must be the
 * host's). ops is copied. Returns LD_OK with *index set, or LD_EINVAL /
 * LD_ENOMEM with err set. Not after ld_host_shutdown. */
enum ld_err ld_host_add(struct ld_host *h, const struct ld_election_config *cfg,
                        const struct ld_host_election_ops *ops, size_t *index,
                        struct ld_errinfo *err);

size_t ld_host_count(const struct ld_host *h);

/* The engine of election index (borrowed; owned by the host), for reading
 * its state between runs. NULL for an unknown index. */
struct ld_election *ld_host_election(struct ld_host *h, size_t index);

/* Runs passes until wake_fd (when >= 0) is readable or hung up (returns
 * LD_ECANCELED; the fd is polled, never read), max_wait_ms passed
 * (LD_OK), or every election is done after a shutdown (LD_OK). A pass
 * starts the requests the engines ask for, keeps the watch going, and
 * waits for the earliest of: an answer, watch data, an engine's wake-up
 * time. */
enum ld_err ld_host_run(struct ld_host *h, int64_t max_wait_ms, int wake_fd);

/* Begins an orderly shutdown of every election: requests in flight are
 * abandoned, the watch stops, each engine gives up leadership at once and
 * writes its release (release_on_exit); run until ld_host_done. May be
 * called from a callback: it then takes effect before the next pass. */
void ld_host_shutdown(struct ld_host *h);

/* True once every election is done (after ld_host_shutdown). */
bool ld_host_done(const struct ld_host *h);

/* Asks election index to start an attempt at its next pass (an external
 * hint, e.g. a credentials change). */
void ld_host_wake(struct ld_host *h, size_t index);

/* Gives up the release of election index that a shutdown or a resignation
 * has not written yet (ld_election_abandon_release at the next pass): it
 * is never written, and the Lease expires by itself. For a caller whose
 * holds_release held it for something that did not end in time. May be
 * called from a callback, holds_release's included; no effect on an
 * election that is done, or whose release is not pending then (nor on a
 * release already in flight). */
void ld_host_abandon_release(struct ld_host *h, size_t index);

/* Publishes election index again at the next pass without changing what
 * its engine does (for a caller whose publish callback has news to take,
 * e.g. after its own fd woke ld_host_run). */
void ld_host_poke(struct ld_host *h, size_t index);

#endif
