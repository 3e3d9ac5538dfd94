/* SPDX-License-Identifier: Apache-2.0 */
/*
 * election: the leader-election engine as a pure state machine. It follows
 * client-go's algorithm on a coordination.k8s.io/v1 Lease but does no I/O
 * and reads no clock: the caller asks it what to do next (wait, GET,
 * create, update), performs that request, and reports the result together
 * with the time. One engine is one election; a process may run many.
 *
 * Safety rule the engine keeps: it claims leadership only until
 * renew_deadline after the start of its last successful write, which is
 * strictly before any other candidate may take the Lease (they wait
 * lease_duration after observing that write, and lease_duration >
 * renew_deadline).
 *
 * One identity, two processes. Each process passes its own incarnation
 * (a random value drawn at start, LD_INCARNATION_HEX hex digits); the
 * engine writes it with every claim as the annotation LD_LEASE_INCARNATION
 * and counts a record as its own only when identity and incarnation both
 * match. A record of our identity under another incarnation, or none (a
 * restarted replica's old self, a twin, a client-go peer of that name), is
 * a foreign holder's: taken over only once it stayed unchanged for its
 * lease duration, with leaseTransitions + 1, and never renewed as ours.
 *
 * Without an incarnation (NULL or ""), a record of our identity that
 * carries none is ours, as for client-go, and two processes of one
 * identity are told apart only by what this one wrote: a record naming
 * our identity that this process did not write means a second process
 * uses it, the engine reports LD_EV_IDENTITY_CONFLICT, steps down and
 * stays out for two lease durations; a freshly started engine that finds
 * its identity in the Lease resumes it only after the record stayed
 * unchanged for two retry periods (a whole lease duration with
 * distrust_own_record_at_start). With an incarnation none of that can
 * happen: a second process's record is simply not ours.
 */
#ifndef LEADERD_ELECTION_H
#define LEADERD_ELECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "lease.h"

struct ld_election;

struct ld_election_config {
    const char *namespace_; /* copied */
    const char *name;       /* copied */
    const char *identity;   /* copied; must be non-empty */
    /* This process's incarnation (copied; NULL or "": none, see above).
     * The same value for every engine of one process, a new one for every
     * process start (leaderd draws 128 bits with getrandom). */
    const char *incarnation;
    int64_t lease_duration_ms; /* whole seconds >= 1; written into the Lease */
    int64_t renew_deadline_ms; /* < lease_duration_ms */
    int64_t retry_period_ms;   /* renew_deadline_ms > 1.2 * retry_period_ms */
    bool release_on_exit;      /* give the Lease up on ld_election_shutdown */
    uint64_t seed;             /* seeds the retry jitter; any value */
    /* A JSON object merged into the metadata of a Lease this engine creates
     * (labels that put it in a watched group, ownerReferences); copied;
     * NULL: none. Never applied to a Lease that exists. */
    const char *create_metadata;
    /* Annotations (a JSON object of strings, as text) written with every
     * create, takeover and renewal of ours, also onto a record someone
     * else made (a shard group's member Lease says which shard set its
     * replica runs); copied; NULL: none. A release keeps them. */
    const char *own_annotations;
    /* How long a leader that stepped down because spec.preferredHolder named
     * someone else stays out of the contest; 0 means lease_duration_ms. */
    int64_t handover_cooldown_ms;
    /* Only without an incarnation (with one, such a record is never ours):
     * a record naming our identity that this engine finds before its first
     * write of its own is treated as a foreign holder's: it is taken over
     * only once it expired, the holder's lease duration after it was
     * observed (unchanged), instead of after two retry periods. For a
     * daemon that runs a command while leading: a restarted replica's old
     * command may still run, and is stopped by its own deadline, which a
     * lease duration always outlasts. false: the two retry periods. */
    bool distrust_own_record_at_start;
    /* Never hand over on spec.preferredHolder: for a Lease that only this
     * replica may hold (a shard group's member Lease), where a hand-over
     * has no successor and a stray preferredHolder would make it resign
     * and rejoin for ever. false: hand over as Kubernetes' coordinated
     * leader election asks. */
    bool ignore_preferred_holder;
};

/* One reading of both clocks, taken once per pass by the caller. */
struct ld_now {
    int64_t mono_ms; /* monotonic: all deadlines */
    int64_t wall_us; /* wall clock: only written into acquireTime/renewTime */
};

enum ld_action_kind {
    LD_ACT_WAIT,   /* nothing to do before wake_at_ms (or an external wake) */
    LD_ACT_GET,    /* read the Lease */
    LD_ACT_CREATE, /* POST lease */
    LD_ACT_UPDATE, /* PUT lease (carries the resourceVersion to check) */
    LD_ACT_DONE,   /* shut down complete: stop calling the engine */
};

struct ld_action {
    enum ld_action_kind kind;
    int64_t wake_at_ms;           /* WAIT: monotonic time to call next again */
    const struct ld_lease *lease; /* CREATE/UPDATE: borrowed, valid until the
                                     result is reported */
    int64_t timeout_ms;           /* GET/CREATE/UPDATE: bound for the request */
};

enum ld_event_kind {
    LD_EV_STARTED_LEADING,   /* we hold the Lease now */
    LD_EV_STOPPED_LEADING,   /* we no longer claim it (see reason) */
    LD_EV_NEW_LEADER,        /* the observed holder changed (leader may be "") */
    LD_EV_RELEASED,          /* our release was written; for a resignation also
                                when the Lease turned out not to name us any more */
    LD_EV_IDENTITY_CONFLICT, /* someone else writes the Lease under our identity;
                                with an incarnation only a report (once per other
                                incarnation seen writing): its record is waited
                                out as any foreign holder's, no quarantine */
    LD_EV_RELEASE_FAILED,    /* a resignation's release was not written (reason
                                says which resignation; see ld_election_resign),
                                or a shutdown's was given up (LD_STOP_SHUTDOWN;
                                see ld_election_abandon_release) */
};

enum ld_stop_reason {
    LD_STOP_NONE = 0,
    LD_STOP_RENEW_DEADLINE,    /* no successful renewal within renew_deadline */
    LD_STOP_TAKEN,             /* the Lease shows another holder, or none */
    LD_STOP_SHUTDOWN,          /* ld_election_shutdown was called */
    LD_STOP_IDENTITY_CONFLICT, /* another process holds it under our identity */
    LD_STOP_RESIGNED,          /* ld_election_resign was called */
    LD_STOP_PREFERRED_HOLDER,  /* spec.preferredHolder names someone else */
    LD_STOP_NOT_CONTENDING,    /* ld_election_set_contending(false): given back */
};

struct ld_event {
    enum ld_event_kind kind;
    /* STOPPED_LEADING; RELEASED and RELEASE_FAILED of a resignation
     * (LD_STOP_RESIGNED or LD_STOP_PREFERRED_HOLDER; a shutdown's RELEASED
     * carries LD_STOP_NONE, its given-up release LD_STOP_SHUTDOWN) */
    enum ld_stop_reason reason;
    int32_t term; /* leaseTransitions at the time */
    /* STARTED_LEADING: ms from first seeing the Lease free or expired to
     * holding it; -1 when not measured. */
    int64_t acquire_delay_ms;
    char leader[LD_LEASE_MAX_HOLDER + 1];
};

/* What the engine knows, for publishing. Strings are borrowed from the
 * engine and valid until its next call. */
struct ld_election_status {
    bool observed;         /* the Lease, or its absence, has been seen */
    const char *leader;    /* observed holder, "" when free or absent */
    int32_t term;          /* leaseTransitions of the observed record; while the
                            * Lease is absent, the last one seen (never goes back
                            * because of a deletion) */
    bool leading;          /* we hold it per our last successful write */
    int64_t lead_until_ms; /* leading counts only before this time */
    /* The deadline of our last term: lead_until_ms of its last successful
     * renewal, also after a step-down on purpose (a shutdown, a
     * resignation, a hand-over), until the record is seen held by another,
     * free or deleted (then INT64_MIN, as before any term). Writes this
     * replica sent while leading may still land until then, so a release
     * waits for them at most that long (docs/design/election.md). */
    int64_t term_until_ms;
    /* While leading: from when (local monotonic) no earlier holder of the
     * Lease can still count itself the leader. The start of our term when
     * we took a held record over after its expiry (or resumed our own);
     * when we found the Lease absent or naming nobody, a lease duration
     * after we first saw it so, since a deletion or an edit by hand says
     * nothing of when the holder stops (a shard group takes the shards of
     * an earlier process of its identity only from then on). INT64_MAX
     * while not leading. */
    int64_t predecessors_over_ms;
    bool has_renew_time;
    int64_t renew_time_us;        /* renewTime of the observed record */
    int64_t last_renew_wall_us;   /* wall time of our last successful write */
    const char *resource_version; /* of the cached object, or NULL */
    const char *uid;              /* metadata.uid of the cached object, or NULL */
    bool watching;                /* ld_election_set_watch(true) is in force */
    uint64_t watch_missed;        /* reads that found changes the watch never sent:
                                     when it grows, the watch is stalled; restart it */
    bool quarantined;             /* backing off after an identity conflict
                                     (only without an incarnation) */
    /* Until when the observed record counts as held by its holder (local
     * monotonic: its last change seen plus its duration, the rule standbys
     * take over by); INT64_MIN when the Lease is free or absent. */
    int64_t holder_valid_until_ms;
    bool contending; /* ld_election_set_contending */
    bool resigning;  /* stepped down on request; its release is under way */
};

/* Replaces the own annotations (ld_election_config.own_annotations) from
 * the next write on; NULL: none. LD_OK, LD_EINVAL (not a JSON object of
 * strings) or LD_ENOMEM, the old ones kept on failure. */
enum ld_err ld_election_set_own_annotations(struct ld_election *e,
                                            const char *annotations);

/* Checks cfg (the same rules as client-go's NewLeaderElector plus whole
 * seconds for the duration) and returns a new engine (free with
 * ld_election_free), or NULL with err filled (LD_EINVAL or LD_ENOMEM). */
struct ld_election *ld_election_new(const struct ld_election_config *cfg,
                                    struct ld_errinfo *err);
void ld_election_free(struct ld_election *e); /* NULL-safe */

/* The next step. Must not be called while a request is outstanding (i.e.
 * after a GET/CREATE/UPDATE action and before its result). */
struct ld_action ld_election_next(struct ld_election *e, struct ld_now now);

/* Reports the outcome of the outstanding request. rc is LD_OK with the
 * Lease the server returned in `lease` (borrowed; copied), or an error
 * with `lease` NULL; err (may be NULL) carries Retry-After. `now` is the
 * time the request finished. */
void ld_election_result(struct ld_election *e, struct ld_now now, enum ld_err rc,
                        const struct ld_lease *lease, const struct ld_errinfo *err);

/* Makes the next ld_election_next start an attempt at once (used when a
 * watch saw the Lease change, or to re-check after an external hint).
 * Has no effect on a leader's renewal schedule or while shutting down. */
void ld_election_wake(struct ld_election *e);

/* Tells the engine whether a healthy watch on the Lease feeds it
 * observations. While it does, a standby stops polling: it re-checks only
 * when the holder's lease would expire, when an observation shows the
 * Lease free, after an error, or when neither the watch nor a request has
 * told it anything for three retry periods (a stalled watch). Safety never depends on the
 * watch: a leader still steps down at its renew deadline. */
void ld_election_set_watch(struct ld_election *e, bool healthy);

/* An observation of the Lease outside a request (a watch ADDED/MODIFIED
 * event); `lease` is borrowed. It restarts the expiry timer when the record
 * changed, exactly as a GET would, and wakes the engine when the Lease is
 * free. Only between requests: ignored while one is outstanding. */
void ld_election_observe(struct ld_election *e, struct ld_now now,
                         const struct ld_lease *lease);

/* The Lease was deleted (a watch DELETED event). gone is the deleted object
 * as the event carries it (borrowed; NULL when unknown): a DELETED of an
 * older object than the one already known (another metadata.uid) is a
 * lagging event and changes nothing. */
void ld_election_observe_deleted(struct ld_election *e, struct ld_now now,
                                 const struct ld_lease *gone);

/* Begins shutdown: leadership is given up at once (STOPPED_LEADING), then,
 * if release_on_exit and the cached Lease names us, the engine asks for a
 * release write (empty holder, leaseDurationSeconds 1, leaseTransitions
 * unchanged), retrying a conflict after a fresh GET, for at most
 * renew_deadline. It ends with LD_ACT_DONE. */
void ld_election_shutdown(struct ld_election *e, struct ld_now now);

/* May be called at any time, also while a request is outstanding: a
 * leader past its renew deadline steps down now (STOPPED_LEADING) instead
 * of when that request ends, so whoever watches the events learns it on
 * time. The request's result is still reported as usual. */
void ld_election_tick(struct ld_election *e, struct ld_now now);
/* Steps down on request, if leading (ld_election_is_leader at now):
 * leadership ends at once (STOPPED_LEADING, LD_STOP_RESIGNED), then the
 * engine writes the same release as a shutdown does (after the outstanding
 * request's result, if any; a conflict is retried after a fresh GET; for at
 * most renew_deadline), ending with RELEASED or RELEASE_FAILED, both with
 * reason LD_STOP_RESIGNED. Afterwards it is a standby that keeps observing
 * but does not acquire until cooldown_ms (>= 0) after the release write was
 * sent (after now, when none was). Returns whether it was leading; false
 * changes nothing.
 *
 * A leader does the same by itself, with handover_cooldown_ms and reason
 * LD_STOP_PREFERRED_HOLDER, at its next ld_election_next after an
 * observation (read, watch or its own write's answer) whose
 * spec.preferredHolder is non-empty and not its identity: Kubernetes'
 * coordinated leader election asks for the hand-over that way. strategy
 * and preferredHolder are written back as read, in renewals and in the
 * release. */
bool ld_election_resign(struct ld_election *e, struct ld_now now, int64_t cooldown_ms);

/* Begins now a resignation that ld_election_next would begin by itself at
 * now (a preferredHolder hand-over, giving the Lease back while not
 * contending), so that a caller that must finish something before the
 * release learns of the step-down before the release is asked for (see
 * ld_election_abandon_release). A leader past its renew deadline has
 * nothing to hand over. Returns whether a resignation began. Not while a
 * request is outstanding. */
bool ld_election_resign_due(struct ld_election *e, struct ld_now now);

/* Gives up the release a shutdown or a resignation has not written yet,
 * for a caller that must not let it be written (what had to end before it
 * did not end in time): nothing is written. A shutdown is done
 * (LD_ACT_DONE next; RELEASE_FAILED with LD_STOP_SHUTDOWN when there was a
 * release of ours to write); a resignation ends with RELEASE_FAILED and the
 * engine stands by, as when its release could not be written within
 * renew_deadline. The Lease then expires by itself. No effect when neither
 * is under way. Not while a request is outstanding. */
void ld_election_abandon_release(struct ld_election *e, struct ld_now now);

/* Whether this engine tries to hold the Lease (the default) or only
 * observes it, for a caller that decides who should own it (shards). Not
 * contending, a leader gives the Lease back as ld_election_resign does
 * (reason LD_STOP_NOT_CONTENDING, no cooldown) at its next
 * ld_election_next, also one that a write in flight makes leader again,
 * and a standby makes no claim of any kind; it still reads and watches.
 * Contending again, a standby looks at once. May be called at any time,
 * also while a request is outstanding. */
void ld_election_set_contending(struct ld_election *e, struct ld_now now, bool contend);

/* True while we hold the Lease and now is before lead_until. */
bool ld_election_is_leader(const struct ld_election *e, int64_t now_ms);

void ld_election_status(const struct ld_election *e, struct ld_election_status *out);

/* Pops the oldest pending event into out; false when there is none. The
 * queue holds the events of at least one call; the oldest are dropped if
 * the caller never drains it. */
bool ld_election_take_event(struct ld_election *e, struct ld_event *out);

const char *ld_stop_reason_str(enum ld_stop_reason r);

#endif
