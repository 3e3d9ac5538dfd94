/* SPDX-License-Identifier: Apache-2.0 */
/*
 * election: client-go's tryAcquireOrRenew as a pure state machine.
 *
 * One "attempt" is: a fast-path PUT of the cached object when we hold a
 * Lease that is still valid locally; otherwise (or after the fast path
 * failed) a GET, then a POST when the Lease is absent or a PUT when it is
 * free, expired, or ours. Attempts are spaced retry_period apart while
 * leading and retry_period plus up to 0.2x jitter while standing by.
 */
#include "election.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lead.h"

#define GONE_UIDS 4
#define EVENT_QUEUE 8
/* Renewal times of our recent writes remembered to tell them apart from a
 * twin's (a write that timed out may still have landed, much later: while
 * counted out, a replica sends about one write per lease duration, so 16
 * cover a latency of many lease durations). */
#define SENT_MEMORY 16
#define NO_TIME INT64_MIN
/* client-go jitters acquire attempts by up to 1.2 retry periods, so a
 * standby may notice a released Lease only 2.2 periods later. 0.2 still
 * spreads standbys apart, keeps them under one request per retry period,
 * and bounds a graceful handover by 1.2 periods. */
#define JITTER_FACTOR_PERMILLE 200

enum phase {
    PH_IDLE,        /* between attempts */
    PH_GET_NEXT,    /* an attempt continues with a GET at once */
    PH_WRITE_NEXT,  /* an attempt continues with the prepared write at once */
    PH_FAST_PUT,    /* outstanding: renewal of the cached object */
    PH_GET,         /* outstanding: read */
    PH_WRITE,       /* outstanding: slow-path PUT or POST */
    PH_RELEASE_PUT, /* outstanding: release write */
    PH_DONE,
};

/* An event waiting for ld_election_take_event. The holder is kept on the
 * heap, not in a struct ld_event's full-size buffer: a process may run
 * many engines, and a queue of eight 1 KiB buffers each (almost always
 * empty) would be most of an engine's memory. */
struct queued_event {
    enum ld_event_kind kind;
    enum ld_stop_reason reason;
    int32_t term;
    int64_t acquire_delay_ms;
    char *leader; /* owned; NULL when it could not be copied (reads as "") */
};

struct ld_election {
    char *namespace_;
    char *name;
    char *identity;
    /* Owned; NULL when the caller gave none (then a record of our identity
     * without an incarnation is ours, and the twin detection below is the
     * only guard against a duplicate identity). */
    char *incarnation;
    int64_t lease_duration_ms;
    int64_t renew_deadline_ms;
    int64_t retry_period_ms;
    int64_t request_timeout_ms;
    bool release_on_exit;
    bool distrust_own_record_at_start;
    bool ignore_preferred_holder;
    uint64_t rng;
    /* Owned compact JSON text of an object, NULL: none. Text, not a tree:
     * it is read only for a create, and a host of many keeps one each. */
    char *create_metadata;
    char *own_annotations; /* see ld_election_config */

    struct ld_lease cache; /* last object seen or written */
    bool have_cache;
    bool cache_stale; /* our view may be behind the server: GET first */
    bool observed;
    int64_t observed_ms; /* when the cached record last changed */
    /* The highest leaseTransitions seen in this process. A Lease we create
     * after a deletion continues from it instead of starting again at 0, so
     * the term (a fencing token) does not go back when someone deletes the
     * Lease to "unstick" an election. */
    bool seen_term;
    int32_t highest_term;
    /* uids of Lease objects known to be gone (deleted, or replaced by a new
     * object of the same name): a lagging watch may still deliver their
     * events after we have seen or created the new one, and they are not
     * news. A few suffice: deletions are rare. */
    char *gone_uids[GONE_UIDS];
    unsigned gone_next;

    bool leading;
    int64_t lead_until_ms;
    /* The deadline of our last term (lead_until_ms of its last successful
     * renewal), kept after a step-down on purpose, while nothing shows
     * another holder: a write the app sent under it may still land until
     * then. INT64_MIN once the record is seen taken, free or gone. */
    int64_t term_until_ms;
    int64_t last_renew_wall_us;

    bool watching;               /* a healthy watch feeds ld_election_observe */
    int64_t last_watch_event_ms; /* the watch's last observation */
    uint64_t watch_missed;       /* GETs that found changes the watch never sent */
    bool wrote_once;             /* a write of ours landed since start/quarantine */
    /* A write of ours got no usable answer (timed out, connection lost, a
     * 5xx): the server may still apply it, late, at any time. Cleared by
     * the next write that is answered. See counted_out(). */
    bool write_unanswered;
    int64_t unanswered_sent_ms;
    int64_t sent_renew_us[SENT_MEMORY]; /* renewTimes of our recent writes */
    unsigned sent_next;
    int64_t quarantine_until_ms;
    bool quarantine_pending; /* no attempt since the quarantine began */
    int64_t free_seen_ms;    /* first saw the Lease free or expired */
    /* First saw the Lease absent or naming nobody, with no held record
     * seen since; NO_TIME otherwise. */
    int64_t unheld_seen_ms;
    /* From when no earlier holder can still count itself the leader: see
     * ld_election_status.predecessors_over_ms. */
    int64_t predecessors_over_ms;
    /* The Lease was seen deleted while another holder's record was valid:
     * that holder may lead until then, its view not showing the deletion,
     * so the Lease is not made anew before (NO_TIME: no such wait). */
    int64_t deleted_holder_until_ms;

    enum phase phase;
    enum ld_action_kind write_kind; /* for PH_WRITE_NEXT */
    int64_t request_start_ms;
    int64_t next_attempt_ms;
    struct ld_lease desired;

    bool stopping;
    int64_t stop_deadline_ms;

    /* A resignation (ld_election_resign, or a preferredHolder hand-over)
     * whose release is under way, bounded by resign_deadline_ms; then no
     * claim of any kind before cooldown_until_ms. */
    bool resigning;
    enum ld_stop_reason resign_reason;
    int64_t resign_deadline_ms;
    int64_t resign_cooldown_ms;
    int64_t cooldown_until_ms;
    int64_t handover_cooldown_ms;
    bool not_contending; /* ld_election_set_contending(false) */

    char *reported_leader; /* last holder announced with NEW_LEADER */
    /* The other incarnation of our identity last reported with
     * IDENTITY_CONFLICT (owned; NULL: none yet, "" for a record without one). */
    char *reported_twin;

    struct queued_event events[EVENT_QUEUE];
    unsigned event_head;
    unsigned event_count;
};

/* ---- small helpers ------------------------------------------------------ */

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* splitmix64: tiny, seedable, and good enough to spread retries. */
static uint64_t next_random(struct ld_election *e)
{
    uint64_t z = (e->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* retry_period + rand[0,1] * factor * retry_period (wait.JitterUntil). */
static int64_t jittered_retry(struct ld_election *e)
{
    uint64_t span = (uint64_t)e->retry_period_ms * JITTER_FACTOR_PERMILLE / 1000;
    return e->retry_period_ms + (int64_t)(next_random(e) % (span + 1));
}

/* leaseTransitions of the record we know; while there is none (deleted), the
 * last one we saw: a reader using the term as a fencing token must never
 * see it go back. */
static int32_t current_term(const struct ld_election *e)
{
    if (e->have_cache)
        return e->cache.spec.transitions;
    return e->seen_term ? e->highest_term : 0;
}

static void push_event(struct ld_election *e, enum ld_event_kind kind,
                       enum ld_stop_reason reason)
{
    if (e->event_count == EVENT_QUEUE) {
        free(e->events[e->event_head].leader);
        e->events[e->event_head].leader = NULL;
        e->event_head = (e->event_head + 1) % EVENT_QUEUE;
        e->event_count--;
    }
    struct queued_event *ev = &e->events[(e->event_head + e->event_count) % EVENT_QUEUE];
    e->event_count++;
    ev->kind = kind;
    ev->reason = reason;
    ev->acquire_delay_ms = -1;
    ev->term = current_term(e);
    ev->leader = strdup(e->have_cache ? str_or_empty(e->cache.spec.holder) : "");
}

static const char *observed_holder(const struct ld_election *e)
{
    return e->have_cache ? str_or_empty(e->cache.spec.holder) : "";
}

/* Held by this process: our identity and our incarnation. A record of our
 * identity under another incarnation, or none, is someone else's. */
static bool written_by_me(const struct ld_election *e, const struct ld_lease *l)
{
    return ld_lease_held_by(l, e->identity, e->incarnation);
}

static bool holder_is_me(const struct ld_election *e)
{
    return e->have_cache && written_by_me(e, &e->cache);
}

static bool held_by_other(const struct ld_election *e)
{
    return observed_holder(e)[0] != '\0' && !holder_is_me(e);
}

/* The holder's own duration decides expiry (client-go >= 0.27); a record
 * without one falls back to ours rather than to zero, which would make any
 * such Lease look expired at once. */
static int64_t holder_duration_ms(const struct ld_election *e)
{
    int32_t s = e->have_cache ? e->cache.spec.duration_s : 0;
    return s > 0 ? (int64_t)s * 1000 : e->lease_duration_ms;
}

static int64_t expiry_ms(const struct ld_election *e)
{
    return e->observed_ms + holder_duration_ms(e);
}

static bool lease_valid(const struct ld_election *e, int64_t now_ms)
{
    return e->have_cache && now_ms < expiry_ms(e);
}

/* Without an incarnation only: our identity in a record this process has
 * not confirmed by writing it, either our own previous process or a twin.
 * Treated like a foreign holder until it has stayed unchanged for
 * resume_window_ms. (With one, such a record is not ours to begin with,
 * and observe() confirms every record under our incarnation.) */
static bool own_unconfirmed(const struct ld_election *e)
{
    return holder_is_me(e) && !e->wrote_once;
}

/* A restarted replica's old self stops renewing at once; when that self
 * may have left a command running, only the record's expiry proves the
 * command's deadline (shorter than the duration) has passed. */
static int64_t resume_window_ms(const struct ld_election *e)
{
    if (e->distrust_own_record_at_start)
        return holder_duration_ms(e);
    return 2 * e->retry_period_ms;
}

/* A watching standby still reads the Lease when neither the watch nor a
 * request of its own has told it anything for three retry periods: a
 * stalled watch must not hide a release or a renewal. */
static int64_t silence_check_ms(const struct ld_election *e, int64_t now_ms)
{
    int64_t last = e->last_watch_event_ms > now_ms ? now_ms : e->last_watch_event_ms;
    if (e->request_start_ms > last)
        last = e->request_start_ms;
    return last + 3 * e->retry_period_ms;
}

/* Whether a failed write may still land. Only a request never sent (no
 * connection, a time that ran out before the transport sent it, a local
 * failure) or a rejection the server gives before applying anything proves
 * it will not; a timeout, a lost connection, a cancellation mid-flight or
 * a 5xx (an etcd timeout, a proxy's 504) proves nothing. */
static bool may_have_landed(enum ld_err rc)
{
    switch (rc) {
    case LD_ECONNECT:
    case LD_ENOTSENT:
    case LD_ENOMEM:
    case LD_EINVAL:
    case LD_EIO:
    case LD_ECONFIG:
    case LD_ENOTFOUND:
    case LD_ECONFLICT:
    case LD_EEXISTS:
    case LD_EUNAUTHORIZED:
    case LD_EFORBIDDEN:
    case LD_EINVALID:
    case LD_EBADREQUEST:
    case LD_ETOOMANY:
        return false;
    default:
        return true;
    }
}

static int64_t counted_out_until(const struct ld_election *e)
{
    return max64(expiry_ms(e), e->unanswered_sent_ms + holder_duration_ms(e));
}

/* Unanswered writes may land late, each one renewing the Lease in everyone
 * else's eyes. A replica that still leads may retry (its claim ends at its
 * renew deadline, safely before anyone may take over). One that no longer
 * leads would, by retrying, keep the Lease alive for ever under a gray
 * failure that delays but does not drop its requests, while leading
 * nowhere. So it counts itself out as a standby would: its own record is a
 * foreign holder's until it has stayed unchanged for a lease duration, and
 * a lease duration has passed since that write was sent. A read coming
 * back in time proves nothing: reads can be quick while writes are slow. */
static bool counted_out(const struct ld_election *e, int64_t now_ms)
{
    return e->write_unanswered && !e->leading && holder_is_me(e) &&
           now_ms < counted_out_until(e);
}

/* After a resignation the replica observes but does not claim; one that
 * does not contend is in a cooldown without end. */
static int64_t cooldown_end(const struct ld_election *e)
{
    return e->not_contending ? INT64_MAX : e->cooldown_until_ms;
}

static bool cooling_down(const struct ld_election *e, int64_t now_ms)
{
    return now_ms < cooldown_end(e);
}

/* Coordinated leader election asks a holder to step down by naming its
 * successor in spec.preferredHolder (client-go's coordinated electors stop
 * renewing then). An abridged value is longer than any identity we keep,
 * so it names someone else. */
static bool handover_asked(const struct ld_election *e, int64_t now_ms)
{
    if (e->ignore_preferred_holder)
        return false;
    if (!ld_leads_at(e->leading, e->lead_until_ms, now_ms) || !e->have_cache)
        return false;
    const char *p = e->cache.spec.preferred_holder;
    if (!p || p[0] == '\0')
        return false;
    return e->cache.spec.preferred_abridged || strcmp(p, e->identity) != 0;
}

static bool quarantined(const struct ld_election *e, int64_t now_ms)
{
    return e->quarantine_pending && now_ms < e->quarantine_until_ms;
}

static void remember_sent(struct ld_election *e, int64_t renew_us)
{
    e->sent_renew_us[e->sent_next] = renew_us;
    e->sent_next = (e->sent_next + 1) % SENT_MEMORY;
}

static bool sent_by_us(const struct ld_election *e, int64_t renew_us)
{
    for (unsigned i = 0; i < SENT_MEMORY; i++) {
        if (e->sent_renew_us[i] == renew_us)
            return true;
    }
    return false;
}

static void announce_leader(struct ld_election *e)
{
    const char *holder = observed_holder(e);
    if (e->reported_leader && strcmp(e->reported_leader, holder) == 0)
        return;
    char *copy = strdup(holder);
    if (!copy)
        return; /* announced on the next observation instead */
    free(e->reported_leader);
    e->reported_leader = copy;
    push_event(e, LD_EV_NEW_LEADER, LD_STOP_NONE);
}

/* With an incarnation, a record of our identity that another process
 * wrote while we watched (a change, not the record a dead predecessor
 * left) is a live twin: only reported, once per incarnation, for the
 * operator; it is waited out as any foreign holder is. */
static void report_twin(struct ld_election *e, bool was_cached, bool changed)
{
    if (!e->incarnation || !was_cached || !changed || holder_is_me(e) ||
        !ld_lease_spec_held_by(&e->cache.spec, e->identity))
        return;
    const char *other = str_or_empty(e->cache.incarnation);
    if (e->reported_twin && strcmp(e->reported_twin, other) == 0)
        return;
    char *copy = strdup(other);
    if (!copy)
        return; /* reported on its next change instead */
    free(e->reported_twin);
    e->reported_twin = copy;
    push_event(e, LD_EV_IDENTITY_CONFLICT, LD_STOP_NONE);
}

/* The term is over for good: another holder (or nobody) is in view. */
static void end_term(struct ld_election *e)
{
    e->term_until_ms = INT64_MIN;
}

static void step_down(struct ld_election *e, enum ld_stop_reason reason)
{
    if (reason == LD_STOP_TAKEN || reason == LD_STOP_IDENTITY_CONFLICT)
        end_term(e);
    if (!e->leading)
        return;
    e->leading = false;
    push_event(e, LD_EV_STOPPED_LEADING, reason);
}

/* A second process writes under our identity: report it, stop claiming,
 * and stay out long enough for the twin's claim to settle. */
static void enter_quarantine(struct ld_election *e, int64_t now_ms)
{
    push_event(e, LD_EV_IDENTITY_CONFLICT, LD_STOP_NONE);
    step_down(e, LD_STOP_IDENTITY_CONFLICT);
    e->wrote_once = false;
    e->quarantine_until_ms = now_ms + 2 * e->lease_duration_ms;
    e->quarantine_pending = true;
    e->next_attempt_ms = e->quarantine_until_ms;
}

/* Does this record, naming us, come from someone else? A fresh read (GET)
 * is authoritative; a watch event may lag behind our own later writes, so
 * for those only a record newer than our last write counts. */
static bool written_by_twin(const struct ld_election *e, const struct ld_lease *lease,
                            bool fresh)
{
    /* With an incarnation a twin's record is not ours to begin with: it is
     * a foreign holder's, waited out like any other. */
    if (e->incarnation || !written_by_me(e, lease) || !e->have_cache)
        return false;
    bool changed = !ld_lease_spec_equal(&e->cache.spec, &lease->spec);
    if (!changed)
        return false;
    /* A write of ours whose answer was lost still landed: not a twin. */
    if (lease->spec.has_renew && sent_by_us(e, lease->spec.renew_us))
        return false;
    if (!e->wrote_once)
        return holder_is_me(e); /* our unconfirmed record moved: a live twin */
    if (!lease->spec.has_renew)
        return false;
    return fresh || lease->spec.renew_us > e->last_renew_wall_us;
}

/* Tracks when the Lease became takeable, to report the acquisition delay. */
static void note_free(struct ld_election *e, int64_t now_ms)
{
    /* A cooldown is our own choice, not a wait for the Lease. */
    bool takeable = (!held_by_other(e) || !lease_valid(e, now_ms)) &&
                    !counted_out(e, now_ms) && !cooling_down(e, now_ms);
    if (!takeable || e->leading)
        e->free_seen_ms = NO_TIME;
    else if (e->free_seen_ms == NO_TIME)
        e->free_seen_ms = now_ms;
}

/* ---- observations ------------------------------------------------------- */

static bool is_gone(const struct ld_election *e, const char *uid)
{
    for (unsigned i = 0; uid && i < GONE_UIDS; i++)
        if (e->gone_uids[i] && strcmp(e->gone_uids[i], uid) == 0)
            return true;
    return false;
}

/* Out of memory only forgets the uid: its events then count as news again,
 * which is the behaviour without this filter, never unsafe (writes carry a
 * resourceVersion). */
static void remember_gone(struct ld_election *e, const char *uid)
{
    if (!uid || is_gone(e, uid))
        return;
    unsigned i = e->gone_next++ % GONE_UIDS;
    free(e->gone_uids[i]);
    e->gone_uids[i] = strdup(uid);
}

/* Keeps unheld_seen_ms: held records end it, an absent or empty one starts
 * it. */
static void note_unheld(struct ld_election *e, bool unheld, int64_t now_ms)
{
    if (!unheld)
        e->unheld_seen_ms = NO_TIME;
    else if (e->unheld_seen_ms == NO_TIME)
        e->unheld_seen_ms = now_ms;
}

/* Adopts a Lease read from or written to the server. Expiry restarts only
 * when the record changed, exactly as client-go's observedTime. */
static bool observe(struct ld_election *e, const struct ld_lease *lease, int64_t now_ms)
{
    bool was_cached = e->have_cache;
    bool changed = !e->have_cache || !ld_lease_spec_equal(&e->cache.spec, &lease->spec);
    struct ld_lease copy;
    ld_lease_init(&copy);
    /* As text: a host of many elections keeps one cache per election. */
    if (ld_lease_copy_compact(&copy, lease) != LD_OK) {
        /* Without a faithful copy we must not write; re-read later. */
        ld_lease_clear(&copy);
        ld_lease_clear(&e->cache);
        e->have_cache = false;
        return false;
    }
    if (e->have_cache && !ld_lease_same_object(&e->cache, lease))
        remember_gone(e, e->cache.uid);
    ld_lease_clear(&e->cache);
    e->cache = copy;
    e->have_cache = true;
    e->cache_stale = false;
    e->observed = true;
    if (!e->seen_term || e->cache.spec.transitions > e->highest_term)
        e->highest_term = e->cache.spec.transitions;
    e->seen_term = true;
    if (changed)
        e->observed_ms = now_ms;
    e->deleted_holder_until_ms = NO_TIME; /* a record again: the usual rules */
    note_unheld(e, !e->cache.spec.holder[0], now_ms);
    /* A record naming us with a renewTime we sent is ours, even when the
     * answer to that write was lost; one carrying our incarnation was
     * written by this process by construction. */
    if (holder_is_me(e) && (e->incarnation || (e->cache.spec.has_renew &&
                                               sent_by_us(e, e->cache.spec.renew_us))))
        e->wrote_once = true;
    if (!holder_is_me(e))
        end_term(e);
    announce_leader(e);
    report_twin(e, was_cached, changed);
    return true;
}

static void observe_absent(struct ld_election *e, int64_t now_ms)
{
    if (e->have_cache && held_by_other(e) && lease_valid(e, now_ms))
        e->deleted_holder_until_ms = expiry_ms(e);
    note_unheld(e, true, now_ms);
    if (e->have_cache)
        remember_gone(e, e->cache.uid);
    ld_lease_clear(&e->cache);
    e->have_cache = false;
    e->cache_stale = false;
    e->observed = true;
    end_term(e);
    announce_leader(e);
}

/* A write of ours succeeded: we lead until renew_deadline after the moment
 * we sent it, which precedes the moment anyone could have observed it. */
static void adopt_write(struct ld_election *e, const struct ld_lease *stored,
                        int64_t now_ms)
{
    int64_t unheld_seen_ms = e->unheld_seen_ms; /* before our own record */
    if (!observe(e, stored, now_ms) || !holder_is_me(e)) {
        step_down(e, LD_STOP_TAKEN);
        return;
    }
    e->observed_ms = now_ms;
    e->wrote_once = true;
    e->write_unanswered = false;
    e->last_renew_wall_us = e->desired.spec.renew_us;
    int64_t until = e->request_start_ms + e->renew_deadline_ms;
    if (now_ms >= until) {
        step_down(e, LD_STOP_RENEW_DEADLINE);
        return;
    }
    e->lead_until_ms = until;
    e->term_until_ms = until;
    if (!e->leading) {
        e->leading = true;
        /* Taken over after its expiry (or resumed), the record's holder has
         * stopped by the expiry rule. Found absent or naming nobody, it
         * says nothing of when its holder stops (a deletion or an edit by
         * hand): count its lease duration from when we first saw it so. */
        e->predecessors_over_ms =
            unheld_seen_ms == NO_TIME ? now_ms : unheld_seen_ms + e->lease_duration_ms;
        push_event(e, LD_EV_STARTED_LEADING, LD_STOP_NONE);
        struct queued_event *ev =
            &e->events[(e->event_head + e->event_count - 1) % EVENT_QUEUE];
        ev->acquire_delay_ms = e->free_seen_ms == NO_TIME ? -1 : now_ms - e->free_seen_ms;
    }
    e->free_seen_ms = NO_TIME;
}

/* ---- records to write --------------------------------------------------- */

/* The term of a change of holder: one above the record's, or above the
 * highest term seen if the record started again lower (re-created by a peer
 * that never saw the old one), so the term we lead in is new. Saturates. */
static int32_t term_after(const struct ld_election *e, int32_t record)
{
    int32_t base = record;
    if (e->seen_term && e->highest_term > base)
        base = e->highest_term;
    return base < INT32_MAX ? base + 1 : INT32_MAX;
}

/* Renewal or takeover of the cached object: a fresh renewTime every time
 * (Go peers compare the record to the second), leaseTransitions +1 only
 * when the holder changes, acquireTime kept while we keep it. */
static enum ld_err prepare_claim(struct ld_election *e, struct ld_now now)
{
    bool renewing = holder_is_me(e);
    ld_lease_clear(&e->desired);
    enum ld_err rc = ld_lease_copy(&e->desired, &e->cache);
    if (rc == LD_OK)
        rc = ld_lease_spec_set_holder(&e->desired.spec, e->identity);
    if (rc == LD_OK)
        rc = ld_lease_set_incarnation(&e->desired, e->incarnation);
    if (rc == LD_OK && e->own_annotations)
        rc = ld_lease_set_annotations(&e->desired, e->own_annotations);
    if (rc != LD_OK)
        return rc;
    struct ld_lease_spec *s = &e->desired.spec;
    s->duration_s = (int32_t)(e->lease_duration_ms / 1000);
    s->has_renew = true;
    s->renew_us = now.wall_us;
    if (!renewing || !s->has_acquire) {
        s->has_acquire = true;
        s->acquire_us = now.wall_us;
    }
    if (!renewing)
        s->transitions = term_after(e, s->transitions);
    return LD_OK;
}

static enum ld_err prepare_create(struct ld_election *e, struct ld_now now)
{
    ld_lease_clear(&e->desired);
    struct ld_lease *d = &e->desired;
    d->name = strdup(e->name);
    d->namespace_ = strdup(e->namespace_);
    d->spec.holder = strdup(e->identity);
    if (!d->name || !d->namespace_ || !d->spec.holder ||
        ld_lease_set_incarnation(d, e->incarnation) != LD_OK)
        return LD_ENOMEM;
    d->spec.duration_s = (int32_t)(e->lease_duration_ms / 1000);
    d->spec.has_acquire = d->spec.has_renew = true;
    d->spec.acquire_us = d->spec.renew_us = now.wall_us;
    /* As client-go for a Lease never seen; otherwise a change of holder
     * after the one we last knew. */
    d->spec.transitions = e->seen_term ? term_after(e, 0) : 0;
    if (e->create_metadata) {
        json_t *md = json_loads(e->create_metadata, 0, NULL);
        d->object = md ? json_pack("{s:o}", "metadata", md) : NULL;
        if (!d->object)
            return LD_ENOMEM;
    }
    if (e->own_annotations)
        return ld_lease_set_annotations(d, e->own_annotations);
    return LD_OK;
}

/* What client-go >= 0.20 writes on release: no holder, a one-second
 * duration so even old peers take over at once, transitions unchanged.
 * The incarnation goes with the holder: a record that names nobody names
 * no process either. */
static enum ld_err prepare_release(struct ld_election *e, struct ld_now now)
{
    ld_lease_clear(&e->desired);
    enum ld_err rc = ld_lease_copy(&e->desired, &e->cache);
    if (rc == LD_OK)
        rc = ld_lease_spec_set_holder(&e->desired.spec, "");
    if (rc == LD_OK)
        rc = ld_lease_set_incarnation(&e->desired, NULL);
    if (rc != LD_OK)
        return rc;
    struct ld_lease_spec *s = &e->desired.spec;
    s->duration_s = 1;
    s->has_acquire = s->has_renew = true;
    s->acquire_us = s->renew_us = now.wall_us;
    return LD_OK;
}

/* ---- actions ------------------------------------------------------------ */

static struct ld_action wait_until(int64_t at_ms)
{
    struct ld_action a = {.kind = LD_ACT_WAIT, .wake_at_ms = at_ms};
    return a;
}

static struct ld_action request(struct ld_election *e, enum phase outstanding,
                                enum ld_action_kind kind, int64_t now_ms,
                                int64_t timeout_ms)
{
    e->phase = outstanding;
    e->request_start_ms = now_ms;
    struct ld_action a = {.kind = kind, .timeout_ms = timeout_ms};
    if (kind == LD_ACT_CREATE || kind == LD_ACT_UPDATE) {
        a.lease = &e->desired;
        remember_sent(e, e->desired.spec.renew_us);
    }
    return a;
}

/* Whether the record keeps a standby from writing now, and if so until
 * when (*until_ms): a foreign holder's until it expires; our own unconfirmed
 * one until it settled (resume window) or expired; our own, counted out,
 * until counted_out_until(). */
static bool blocked_until(const struct ld_election *e, int64_t now_ms, int64_t *until_ms)
{
    if (counted_out(e, now_ms)) {
        *until_ms = counted_out_until(e);
        return true;
    }
    if (!e->have_cache && now_ms < e->deleted_holder_until_ms) {
        *until_ms = e->deleted_holder_until_ms;
        return true;
    }
    bool other = held_by_other(e) || own_unconfirmed(e);
    if (!other || !lease_valid(e, now_ms))
        return false;
    *until_ms = expiry_ms(e);
    if (own_unconfirmed(e))
        *until_ms = min64(*until_ms, e->observed_ms + resume_window_ms(e));
    return true;
}

static void end_attempt(struct ld_election *e, int64_t now_ms,
                        const struct ld_errinfo *err)
{
    e->phase = PH_IDLE;
    int64_t next;
    if (e->leading) {
        next = now_ms + e->retry_period_ms;
    } else {
        next = now_ms + jittered_retry(e);
        /* A standby re-checks no later than the moment the holder expires,
         * so a crashed leader is replaced after lease_duration, not after
         * lease_duration plus a poll interval. With a healthy watch it
         * does not poll at all before then: every change wakes it. */
        int64_t check;
        if (blocked_until(e, now_ms, &check)) {
            if (e->watching && !err)
                next = min64(check, silence_check_ms(e, now_ms));
            else
                next = min64(next, check);
        } else if (cooling_down(e, now_ms)) {
            next = min64(next, cooldown_end(e));
        }
    }
    if (quarantined(e, now_ms))
        next = max64(next, e->quarantine_until_ms);
    if (err && err->retry_after_ms > 0)
        next = max64(next, now_ms + min64(err->retry_after_ms, e->lease_duration_ms));
    e->next_attempt_ms = next;
}

static struct ld_action done(struct ld_election *e)
{
    e->phase = PH_DONE;
    struct ld_action a = {.kind = LD_ACT_DONE};
    return a;
}

static struct ld_action next_release_step(struct ld_election *e, struct ld_now now)
{
    int64_t left = e->stop_deadline_ms - now.mono_ms;
    if (!e->release_on_exit || left <= 0)
        return done(e);
    if (now.mono_ms < e->next_attempt_ms)
        return wait_until(min64(e->next_attempt_ms, e->stop_deadline_ms));
    int64_t timeout = min64(e->request_timeout_ms, left);
    if (e->cache_stale)
        return request(e, PH_GET, LD_ACT_GET, now.mono_ms, timeout);
    /* Only a record this process wrote is ours to release: under a
     * duplicate identity the name alone proves nothing. */
    if (!holder_is_me(e) || !e->wrote_once)
        return done(e);
    if (prepare_release(e, now) != LD_OK)
        return done(e);
    return request(e, PH_RELEASE_PUT, LD_ACT_UPDATE, now.mono_ms, timeout);
}

/* ---- resigning ----------------------------------------------------------- */

static void begin_resign(struct ld_election *e, int64_t now_ms, int64_t cooldown_ms,
                         enum ld_stop_reason reason)
{
    step_down(e, reason);
    e->resigning = true;
    e->resign_reason = reason;
    e->resign_deadline_ms = now_ms + e->renew_deadline_ms;
    e->resign_cooldown_ms = cooldown_ms > 0 ? cooldown_ms : 0;
    e->cooldown_until_ms = now_ms + e->resign_cooldown_ms;
    e->next_attempt_ms = INT64_MIN;
    /* A write prepared for a claim must not go out any more. */
    if (e->phase == PH_GET_NEXT || e->phase == PH_WRITE_NEXT)
        e->phase = PH_IDLE;
}

/* The release is written (or nothing of ours is left to release), or it
 * could not be within the bound: back to standing by. */
static void finish_resign(struct ld_election *e, int64_t now_ms, bool released)
{
    e->resigning = false;
    push_event(e, released ? LD_EV_RELEASED : LD_EV_RELEASE_FAILED, e->resign_reason);
    end_attempt(e, now_ms, NULL);
}

/* As next_release_step, but a resignation ends in standing by: true with
 * *out the next action while it goes on, false once it has ended (the
 * caller then carries on as a standby). */
static bool next_resign_step(struct ld_election *e, struct ld_now now,
                             struct ld_action *out)
{
    int64_t left = e->resign_deadline_ms - now.mono_ms;
    if (left <= 0) {
        finish_resign(e, now.mono_ms, false);
        return false;
    }
    if (now.mono_ms < e->next_attempt_ms) {
        *out = wait_until(min64(e->next_attempt_ms, e->resign_deadline_ms));
        return true;
    }
    int64_t timeout = min64(e->request_timeout_ms, left);
    if (e->cache_stale) {
        *out = request(e, PH_GET, LD_ACT_GET, now.mono_ms, timeout);
        return true;
    }
    /* Someone else holds it, nobody does, or it is gone: nothing to write,
     * and the resignation has what it asked for. */
    if (!holder_is_me(e) || !e->wrote_once) {
        finish_resign(e, now.mono_ms, true);
        return false;
    }
    if (prepare_release(e, now) != LD_OK) {
        finish_resign(e, now.mono_ms, false);
        return false;
    }
    e->cooldown_until_ms =
        max64(e->cooldown_until_ms, now.mono_ms + e->resign_cooldown_ms);
    *out = request(e, PH_RELEASE_PUT, LD_ACT_UPDATE, now.mono_ms, timeout);
    return true;
}

void ld_election_set_contending(struct ld_election *e, struct ld_now now, bool contend)
{
    (void)now;
    if (e->not_contending == !contend)
        return;
    e->not_contending = !contend;
    if (!contend) {
        /* A claim prepared but not sent must not go out; the leader's
         * release begins at the next step. */
        if (!e->leading && e->phase == PH_WRITE_NEXT)
            e->phase = PH_IDLE;
        if (e->leading)
            e->next_attempt_ms = INT64_MIN;
        return;
    }
    if (!e->stopping && !e->resigning && !e->leading && e->phase == PH_IDLE)
        e->next_attempt_ms = INT64_MIN;
}

/* The resignations an engine begins by itself: a hand-over that
 * spec.preferredHolder asks for, a Lease given back while not contending. */
static bool begin_due_resignation(struct ld_election *e, int64_t now_ms)
{
    if (e->stopping || e->resigning)
        return false;
    if (e->phase == PH_IDLE && handover_asked(e, now_ms)) {
        begin_resign(e, now_ms, e->handover_cooldown_ms, LD_STOP_PREFERRED_HOLDER);
        return true;
    }
    if (e->not_contending && ld_election_is_leader(e, now_ms)) {
        begin_resign(e, now_ms, 0, LD_STOP_NOT_CONTENDING);
        return true;
    }
    return false;
}

bool ld_election_resign_due(struct ld_election *e, struct ld_now now)
{
    return e->phase != PH_DONE && begin_due_resignation(e, now.mono_ms);
}

void ld_election_abandon_release(struct ld_election *e, struct ld_now now)
{
    if (e->phase == PH_DONE)
        return;
    if (e->stopping) {
        /* What next_release_step would have written, had it been let. */
        if (e->release_on_exit && holder_is_me(e) && e->wrote_once)
            push_event(e, LD_EV_RELEASE_FAILED, LD_STOP_SHUTDOWN);
        done(e);
    } else if (e->resigning) {
        finish_resign(e, now.mono_ms, false);
    }
}

bool ld_election_resign(struct ld_election *e, struct ld_now now, int64_t cooldown_ms)
{
    if (e->stopping || e->resigning || !ld_election_is_leader(e, now.mono_ms))
        return false;
    begin_resign(e, now.mono_ms, cooldown_ms, LD_STOP_RESIGNED);
    return true;
}

/* With a healthy watch the cache is as fresh as a GET would be, so a free
 * or expired Lease is claimed straight away; a stale cache only costs a
 * 409 and the GET that follows. */
static bool may_claim_from_cache(const struct ld_election *e, int64_t now_ms)
{
    if (!e->watching || !e->have_cache || e->cache_stale || !e->cache.resource_version)
        return false;
    if (observed_holder(e)[0] == '\0')
        return true;
    return held_by_other(e) && !lease_valid(e, now_ms);
}

static struct ld_action start_attempt(struct ld_election *e, struct ld_now now)
{
    e->quarantine_pending = false;
    bool cooling = cooling_down(e, now.mono_ms);
    bool fast = holder_is_me(e) && e->wrote_once && !e->cache_stale &&
                e->cache.resource_version && lease_valid(e, now.mono_ms) &&
                !counted_out(e, now.mono_ms) && !cooling;
    if (fast && prepare_claim(e, now) == LD_OK)
        return request(e, PH_FAST_PUT, LD_ACT_UPDATE, now.mono_ms, e->request_timeout_ms);
    if (!cooling && may_claim_from_cache(e, now.mono_ms) &&
        prepare_claim(e, now) == LD_OK)
        return request(e, PH_WRITE, LD_ACT_UPDATE, now.mono_ms, e->request_timeout_ms);
    return request(e, PH_GET, LD_ACT_GET, now.mono_ms, e->request_timeout_ms);
}

void ld_election_tick(struct ld_election *e, struct ld_now now)
{
    if (e->leading && now.mono_ms >= e->lead_until_ms)
        step_down(e, LD_STOP_RENEW_DEADLINE);
}

struct ld_action ld_election_next(struct ld_election *e, struct ld_now now)
{
    if (e->phase == PH_DONE)
        return done(e);
    if (e->leading && now.mono_ms >= e->lead_until_ms)
        step_down(e, LD_STOP_RENEW_DEADLINE);
    if (e->stopping)
        return next_release_step(e, now);
    begin_due_resignation(e, now.mono_ms);
    struct ld_action a;
    if (e->resigning && next_resign_step(e, now, &a))
        return a;
    if (e->phase == PH_GET_NEXT)
        return request(e, PH_GET, LD_ACT_GET, now.mono_ms, e->request_timeout_ms);
    if (e->phase == PH_WRITE_NEXT)
        return request(e, PH_WRITE, e->write_kind, now.mono_ms, e->request_timeout_ms);
    if (now.mono_ms < e->next_attempt_ms) {
        int64_t wake = e->next_attempt_ms;
        if (e->leading)
            wake = min64(wake, e->lead_until_ms);
        return wait_until(wake);
    }
    return start_attempt(e, now);
}

/* ---- results ------------------------------------------------------------ */

/* After a GET: take the Lease if it is free, expired or ours; otherwise
 * wait. Leaves the engine ready to write (PH_WRITE_NEXT) or idle. */
static void decide_after_get(struct ld_election *e, struct ld_now now)
{
    /* First, so that a read answered after the renew deadline does not
     * lead to a write as if we still led (see counted_out). */
    if (e->leading && now.mono_ms >= e->lead_until_ms)
        step_down(e, LD_STOP_RENEW_DEADLINE);
    if (e->leading && !holder_is_me(e))
        step_down(e, LD_STOP_TAKEN);
    note_free(e, now.mono_ms);
    bool other_valid = held_by_other(e) && lease_valid(e, now.mono_ms);
    bool own_settling = own_unconfirmed(e) &&
                        now.mono_ms < e->observed_ms + resume_window_ms(e) &&
                        lease_valid(e, now.mono_ms);
    if (other_valid || own_settling || counted_out(e, now.mono_ms) ||
        cooling_down(e, now.mono_ms)) {
        end_attempt(e, now.mono_ms, NULL);
        return;
    }
    if (prepare_claim(e, now) != LD_OK) {
        end_attempt(e, now.mono_ms, NULL);
        return;
    }
    e->phase = PH_WRITE_NEXT;
    e->write_kind = LD_ACT_UPDATE;
}

static void on_get(struct ld_election *e, struct ld_now now, enum ld_err rc,
                   const struct ld_lease *lease, const struct ld_errinfo *err)
{
    if (rc == LD_OK && lease) {
        bool twin = written_by_twin(e, lease, true);
        bool news = !e->have_cache || !ld_lease_spec_equal(&e->cache.spec, &lease->spec);
        if (e->watching && news &&
            now.mono_ms - e->last_watch_event_ms > e->retry_period_ms)
            e->watch_missed++;
        if (!observe(e, lease, now.mono_ms)) {
            end_attempt(e, now.mono_ms, NULL);
            return;
        }
        if (twin) {
            enter_quarantine(e, now.mono_ms);
            e->phase = PH_IDLE;
            return;
        }
        decide_after_get(e, now);
        return;
    }
    if (rc == LD_ENOTFOUND) {
        observe_absent(e, now.mono_ms);
        step_down(e, LD_STOP_TAKEN);
        int64_t until;
        if (blocked_until(e, now.mono_ms, &until)) {
            end_attempt(e, now.mono_ms, NULL); /* deleted under a live holder */
            return;
        }
        if (!cooling_down(e, now.mono_ms) && prepare_create(e, now) == LD_OK) {
            e->phase = PH_WRITE_NEXT;
            e->write_kind = LD_ACT_CREATE;
            return;
        }
    }
    end_attempt(e, now.mono_ms, err);
}

static void on_write(struct ld_election *e, struct ld_now now, enum ld_err rc,
                     const struct ld_lease *lease, const struct ld_errinfo *err)
{
    if (rc == LD_OK && lease) {
        adopt_write(e, lease, now.mono_ms);
        end_attempt(e, now.mono_ms, NULL);
        return;
    }
    /* Whatever happened, the server may now hold a newer object than ours
     * (a conflict says so; a timeout may hide a write that landed). */
    e->cache_stale = true;
    if (may_have_landed(rc)) {
        e->write_unanswered = true;
        e->unanswered_sent_ms = e->request_start_ms;
    }
    /* A failed fast-path renewal falls back to a GET in the same attempt,
     * as client-go does, unless the server asked us to back off. */
    if (e->phase == PH_FAST_PUT && rc != LD_ETOOMANY && rc != LD_ECANCELED) {
        e->phase = PH_GET_NEXT;
        return;
    }
    end_attempt(e, now.mono_ms, err);
}

/* While stopping, every result only updates what we know; the next step
 * decides whether a release is still due. */
static void on_result_stopping(struct ld_election *e, struct ld_now now, enum ld_err rc,
                               const struct ld_lease *lease, const struct ld_errinfo *err)
{
    enum phase was = e->phase;
    e->phase = PH_IDLE;
    if (rc == LD_OK && lease) {
        observe(e, lease, now.mono_ms);
        if (was == PH_RELEASE_PUT) {
            push_event(e, LD_EV_RELEASED, LD_STOP_NONE);
            done(e);
        }
        return;
    }
    if (rc == LD_ENOTFOUND && was == PH_GET) {
        observe_absent(e, now.mono_ms);
        return;
    }
    if (was != PH_GET)
        e->cache_stale = true;
    if (rc != LD_ECONFLICT && rc != LD_ECANCELED) {
        int64_t pause = min64(e->retry_period_ms, 1000);
        if (err && err->retry_after_ms > 0)
            pause = max64(pause, err->retry_after_ms);
        e->next_attempt_ms = now.mono_ms + pause;
    }
}

/* While resigning, a result updates what we know and never makes us lead
 * again: a renewal that was in flight when the resignation began and
 * landed only proves the record is ours to release. */
static void on_result_resigning(struct ld_election *e, struct ld_now now, enum ld_err rc,
                                const struct ld_lease *lease,
                                const struct ld_errinfo *err)
{
    enum phase was = e->phase;
    e->phase = PH_IDLE;
    if (rc == LD_OK && lease) {
        bool claim = was == PH_FAST_PUT || was == PH_WRITE;
        if (!observe(e, lease, now.mono_ms))
            return;
        if (claim && holder_is_me(e)) {
            e->observed_ms = now.mono_ms;
            e->wrote_once = true;
            e->write_unanswered = false;
            e->last_renew_wall_us = e->desired.spec.renew_us;
        }
        if (was == PH_RELEASE_PUT)
            finish_resign(e, now.mono_ms, true);
        return;
    }
    if (rc == LD_ENOTFOUND && was == PH_GET) {
        observe_absent(e, now.mono_ms);
        return;
    }
    if (was != PH_GET) {
        e->cache_stale = true;
        if (may_have_landed(rc)) {
            e->write_unanswered = true;
            e->unanswered_sent_ms = e->request_start_ms;
        }
    }
    if (rc != LD_ECONFLICT && rc != LD_ECANCELED) {
        int64_t pause = min64(e->retry_period_ms, 1000);
        if (err && err->retry_after_ms > 0)
            pause = max64(pause, err->retry_after_ms);
        e->next_attempt_ms = now.mono_ms + pause;
    }
}

/* The record a write sent is prepared afresh for every write (from the
 * cache), so after its result it is only memory: a deep copy of the Lease
 * kept by every engine of a host of many. */
static void drop_desired(struct ld_election *e)
{
    if (e->phase == PH_WRITE_NEXT)
        return; /* prepared for the next request already */
    ld_lease_clear(&e->desired);
    ld_lease_init(&e->desired);
}

static void on_result(struct ld_election *e, struct ld_now now, enum ld_err rc,
                      const struct ld_lease *lease, const struct ld_errinfo *err)
{
    if (e->stopping) {
        on_result_stopping(e, now, rc, lease, err);
        return;
    }
    if (e->resigning) {
        on_result_resigning(e, now, rc, lease, err);
        return;
    }
    switch (e->phase) {
    case PH_GET:
        on_get(e, now, rc, lease, err);
        break;
    case PH_FAST_PUT:
    case PH_WRITE:
        on_write(e, now, rc, lease, err);
        break;
    default:
        break; /* no request outstanding: a caller bug, ignored safely */
    }
    if (e->leading && now.mono_ms >= e->lead_until_ms)
        step_down(e, LD_STOP_RENEW_DEADLINE);
}

void ld_election_result(struct ld_election *e, struct ld_now now, enum ld_err rc,
                        const struct ld_lease *lease, const struct ld_errinfo *err)
{
    on_result(e, now, rc, lease, err);
    drop_desired(e);
}

/* ---- lifecycle and queries ---------------------------------------------- */

static bool config_ok(const struct ld_election_config *c, struct ld_errinfo *err)
{
    if (!c->namespace_ || !c->namespace_[0] || !c->name || !c->name[0]) {
        ld_errinfo_set(err, LD_EINVAL, "lease namespace and name are required");
        return false;
    }
    if (!c->identity || !c->identity[0]) {
        ld_errinfo_set(err, LD_EINVAL, "identity must not be empty");
        return false;
    }
    if (c->retry_period_ms <= 0 || c->lease_duration_ms < 1000 ||
        c->lease_duration_ms % 1000 != 0 || c->lease_duration_ms / 1000 > INT32_MAX) {
        ld_errinfo_set(err, LD_EINVAL,
                       "lease duration must be whole seconds >= 1 and retry period > 0");
        return false;
    }
    if (c->lease_duration_ms <= c->renew_deadline_ms) {
        ld_errinfo_set(err, LD_EINVAL,
                       "lease duration must be greater than renew deadline");
        return false;
    }
    if (c->renew_deadline_ms * 10 <= c->retry_period_ms * 12) {
        ld_errinfo_set(err, LD_EINVAL,
                       "renew deadline must be greater than 1.2 x retry period");
        return false;
    }
    return true;
}

struct ld_election *ld_election_new(const struct ld_election_config *cfg,
                                    struct ld_errinfo *err)
{
    if (!config_ok(cfg, err))
        return NULL;
    struct ld_election *e = calloc(1, sizeof(*e));
    if (!e)
        goto nomem;
    ld_lease_init(&e->cache);
    ld_lease_init(&e->desired);
    e->namespace_ = strdup(cfg->namespace_);
    e->name = strdup(cfg->name);
    e->identity = strdup(cfg->identity);
    if (!e->namespace_ || !e->name || !e->identity)
        goto nomem;
    if (cfg->incarnation && cfg->incarnation[0] &&
        !(e->incarnation = strdup(cfg->incarnation)))
        goto nomem;
    e->lease_duration_ms = cfg->lease_duration_ms;
    e->renew_deadline_ms = cfg->renew_deadline_ms;
    e->retry_period_ms = cfg->retry_period_ms;
    /* client-go: max(1s, RenewDeadline/2), so one hung request cannot use
     * the whole deadline. */
    e->request_timeout_ms = max64(1000, cfg->renew_deadline_ms / 2);
    e->release_on_exit = cfg->release_on_exit;
    e->distrust_own_record_at_start = cfg->distrust_own_record_at_start;
    e->ignore_preferred_holder = cfg->ignore_preferred_holder;
    e->rng = cfg->seed;
    if (cfg->create_metadata) {
        json_t *md = json_loads(cfg->create_metadata, JSON_REJECT_DUPLICATES, NULL);
        bool is_object = json_is_object(md);
        e->create_metadata = is_object ? json_dumps(md, JSON_COMPACT) : NULL;
        json_decref(md);
        if (!is_object) {
            ld_election_free(e);
            ld_errinfo_set(err, LD_EINVAL, "create_metadata is not a JSON object");
            return NULL;
        }
        if (!e->create_metadata)
            goto nomem;
    }
    enum ld_err own = ld_election_set_own_annotations(e, cfg->own_annotations);
    if (own == LD_EINVAL) {
        ld_election_free(e);
        ld_errinfo_set(err, LD_EINVAL, "own_annotations is not a JSON object of strings");
        return NULL;
    }
    if (own != LD_OK)
        goto nomem;
    e->phase = PH_IDLE;
    e->next_attempt_ms = INT64_MIN; /* the first attempt is immediate */
    e->free_seen_ms = NO_TIME;
    e->deleted_holder_until_ms = NO_TIME;
    e->unheld_seen_ms = NO_TIME;
    e->quarantine_until_ms = INT64_MIN;
    e->term_until_ms = INT64_MIN;
    e->cooldown_until_ms = INT64_MIN;
    e->handover_cooldown_ms = cfg->handover_cooldown_ms > 0 ? cfg->handover_cooldown_ms
                                                            : cfg->lease_duration_ms;
    for (unsigned i = 0; i < SENT_MEMORY; i++)
        e->sent_renew_us[i] = NO_TIME;
    return e;
nomem:
    ld_election_free(e);
    ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    return NULL;
}

void ld_election_free(struct ld_election *e)
{
    if (!e)
        return;
    ld_lease_clear(&e->cache);
    ld_lease_clear(&e->desired);
    free(e->create_metadata);
    free(e->own_annotations);
    for (unsigned i = 0; i < EVENT_QUEUE; i++)
        free(e->events[i].leader);
    for (unsigned i = 0; i < GONE_UIDS; i++)
        free(e->gone_uids[i]);
    free(e->namespace_);
    free(e->name);
    free(e->identity);
    free(e->incarnation);
    free(e->reported_leader);
    free(e->reported_twin);
    free(e);
}

void ld_election_wake(struct ld_election *e)
{
    if (e->stopping || e->resigning || e->leading || e->phase != PH_IDLE ||
        e->quarantine_pending)
        return;
    e->next_attempt_ms = INT64_MIN;
}

void ld_election_set_watch(struct ld_election *e, bool healthy)
{
    if (e->watching == healthy)
        return;
    e->watching = healthy;
    e->last_watch_event_ms =
        e->request_start_ms > e->observed_ms ? e->request_start_ms : e->observed_ms;
    /* Losing the watch: resume polling at once rather than at expiry. */
    if (!healthy && !e->leading && e->phase == PH_IDLE && !e->stopping && !e->resigning)
        e->next_attempt_ms =
            min64(e->next_attempt_ms, e->observed_ms + e->retry_period_ms);
}

static bool between_requests(const struct ld_election *e)
{
    return e->phase == PH_IDLE;
}

/* After a watch observation: when to look again. */
static void reschedule_after_observation(struct ld_election *e, int64_t now_ms)
{
    if (e->stopping || e->resigning || e->leading || quarantined(e, now_ms))
        return;
    note_free(e, now_ms);
    int64_t check;
    if (!blocked_until(e, now_ms, &check)) {
        /* Free, absent or expired: try now, or once the cooldown is over. */
        e->next_attempt_ms = cooling_down(e, now_ms) ? cooldown_end(e) : INT64_MIN;
        return;
    }
    if (e->watching)
        e->next_attempt_ms = min64(check, silence_check_ms(e, now_ms));
}

void ld_election_observe(struct ld_election *e, struct ld_now now,
                         const struct ld_lease *lease)
{
    if (!between_requests(e) || !lease)
        return;
    e->last_watch_event_ms = now.mono_ms;
    if (is_gone(e, lease->uid))
        return; /* a lagging event of an object deleted or replaced since */
    /* leaseTransitions only grows on one object, so a lower one is an event
     * from before what we already know (a lagging watch), not news; unless
     * the object itself is new (the Lease was deleted and created again). */
    if (e->have_cache && lease->spec.transitions < e->cache.spec.transitions &&
        ld_lease_same_object(&e->cache, lease))
        return;
    /* Our own earlier renewal echoed late by the watch: nothing new. One
     * with our latest renewTime is either the echo of that write (equal to
     * what we know) or someone's edit of it, such as a coordinator's
     * preferredHolder, which is news. */
    if (e->leading && written_by_me(e, lease) && lease->spec.has_renew &&
        lease->spec.renew_us < e->last_renew_wall_us)
        return;
    bool twin = written_by_twin(e, lease, false);
    if (!observe(e, lease, now.mono_ms))
        return;
    if (twin && !e->stopping && !e->resigning) {
        enter_quarantine(e, now.mono_ms);
        return;
    }
    if (e->leading && !holder_is_me(e))
        step_down(e, LD_STOP_TAKEN);
    reschedule_after_observation(e, now.mono_ms);
}

void ld_election_observe_deleted(struct ld_election *e, struct ld_now now,
                                 const struct ld_lease *gone)
{
    if (!between_requests(e))
        return;
    e->last_watch_event_ms = now.mono_ms;
    /* A lagging DELETED of an object already replaced by the one we know. */
    if (gone && e->have_cache && !ld_lease_same_object(&e->cache, gone)) {
        remember_gone(e, gone->uid);
        return;
    }
    observe_absent(e, now.mono_ms);
    step_down(e, LD_STOP_TAKEN);
    reschedule_after_observation(e, now.mono_ms);
}

void ld_election_shutdown(struct ld_election *e, struct ld_now now)
{
    if (e->stopping || e->phase == PH_DONE)
        return;
    e->stopping = true;
    e->resigning = false; /* the shutdown's release takes over */
    e->stop_deadline_ms = now.mono_ms + e->renew_deadline_ms;
    e->next_attempt_ms = INT64_MIN;
    step_down(e, LD_STOP_SHUTDOWN);
    if (e->phase == PH_GET_NEXT || e->phase == PH_WRITE_NEXT)
        e->phase = PH_IDLE;
}

bool ld_election_is_leader(const struct ld_election *e, int64_t now_ms)
{
    return ld_leads_at(e->leading, e->lead_until_ms, now_ms);
}

enum ld_err ld_election_set_own_annotations(struct ld_election *e,
                                            const char *annotations)
{
    char *copy = NULL;
    if (annotations) {
        struct ld_lease probe;
        ld_lease_init(&probe);
        enum ld_err rc = ld_lease_set_annotations(&probe, annotations);
        ld_lease_clear(&probe);
        if (rc != LD_OK)
            return rc;
        if (!(copy = strdup(annotations)))
            return LD_ENOMEM;
    }
    free(e->own_annotations);
    e->own_annotations = copy;
    return LD_OK;
}

void ld_election_status(const struct ld_election *e, struct ld_election_status *out)
{
    memset(out, 0, sizeof(*out));
    out->observed = e->observed;
    out->leader = observed_holder(e);
    out->term = current_term(e);
    out->leading = e->leading;
    out->lead_until_ms = e->lead_until_ms;
    out->term_until_ms = e->term_until_ms;
    out->predecessors_over_ms = e->leading ? e->predecessors_over_ms : INT64_MAX;
    out->has_renew_time = e->have_cache && e->cache.spec.has_renew;
    out->renew_time_us = out->has_renew_time ? e->cache.spec.renew_us : 0;
    out->last_renew_wall_us = e->last_renew_wall_us;
    out->resource_version = e->have_cache ? e->cache.resource_version : NULL;
    out->uid = e->have_cache ? e->cache.uid : NULL;
    out->watching = e->watching;
    out->watch_missed = e->watch_missed;
    out->quarantined = e->quarantine_pending;
    out->holder_valid_until_ms =
        e->have_cache && observed_holder(e)[0] != '\0' ? expiry_ms(e) : INT64_MIN;
    out->contending = !e->not_contending;
    out->resigning = e->resigning;
}

bool ld_election_take_event(struct ld_election *e, struct ld_event *out)
{
    if (e->event_count == 0)
        return false;
    struct queued_event *ev = &e->events[e->event_head];
    out->kind = ev->kind;
    out->reason = ev->reason;
    out->term = ev->term;
    out->acquire_delay_ms = ev->acquire_delay_ms;
    snprintf(out->leader, sizeof(out->leader), "%s", ev->leader ? ev->leader : "");
    free(ev->leader);
    ev->leader = NULL;
    e->event_head = (e->event_head + 1) % EVENT_QUEUE;
    e->event_count--;
    return true;
}

const char *ld_stop_reason_str(enum ld_stop_reason r)
{
    switch (r) {
    case LD_STOP_RENEW_DEADLINE:
        return "renew deadline exceeded";
    case LD_STOP_TAKEN:
        return "lease held by another holder";
    case LD_STOP_SHUTDOWN:
        return "shutting down";
    case LD_STOP_IDENTITY_CONFLICT:
        return "another process uses the same identity";
    case LD_STOP_RESIGNED:
        return "resigned on request";
    case LD_STOP_PREFERRED_HOLDER:
        return "the lease's preferredHolder names another identity";
    case LD_STOP_NOT_CONTENDING:
        return "given back: this replica no longer contends for it";
    case LD_STOP_NONE:
        break;
    }
    return "none";
}
