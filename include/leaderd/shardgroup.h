/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardgroup: the decision part of a shard group under protocol 2 (one
 * heartbeat per replica; docs/design/shard-protocol.md has the rules and
 * why they never give a shard two owners); the shard host (shardhost.h)
 * carries its decisions out on an election host. Pure: no I/O, no clock (every
 * call that judges time takes now_ms, local monotonic), no threads.
 *
 * A group named NAME (the --lease-name) has shards numbered 0..N-1 or
 * named, and one member Lease per replica. This module
 *  - knows the names: shard ID's Lease is "NAME-ID", this replica's member
 *    Lease "NAME-member-IDENTITY"; every Lease carries the label
 *    LD_SHARDGROUP_LABEL=NAME (the host's watch selects the group by it)
 *    and the annotation LD_SHARDGROUP_PROTOCOL, a shard Lease also
 *    LD_SHARDGROUP_SHARD_LABEL=ID, and the member Lease, when a Pod uid is
 *    given, an ownerReference to the Pod (apiVersion v1, kind Pod, name
 *    IDENTITY) so the garbage collector removes it after a crash.
 *    ld_shardgroup_new validates every name and says which is bad.
 *  - keeps the view: every member record and shard record of the group as
 *    observed (watch events, lists, answers to our own writes). Another
 *    replica is a live member while its member Lease carries the protocol
 *    annotation, names it as holder, has been seen to change at least once
 *    (appearing after a list of the group that did not hold it counts),
 *    and is unexpired by election.c's rule: the last change of the record
 *    this process saw plus the record's own leaseDurationSeconds. This
 *    replica is a live member while its own member election leads, never
 *    because of what the watch says.
 *  - keeps the claims: shard S is claimed while the member election leads,
 *    the last write of S succeeded, named us and was sent in the current
 *    member term (a counter that any break of the member leadership
 *    advances), and S is not being given back.
 *  - computes the assignment (shardassign.h) from the sorted live members,
 *    when each joined, and the shards' observed holders, and per shard the
 *    step to take (ld_shardgroup_step: take, evict the holder's member
 *    Lease, give back once the members stayed the same for the rebalance
 *    delay, or wait for a list), with the records to write for each; and
 *    when the inputs next change with no news (an expiry, the delay's end),
 *    so the caller can wake.
 *  - gives what /shards shows: live members, the shards claimed at now, per
 *    shard its Lease name and observed record, and for numbered shards
 *    range and selector (shardrange.h) and the shard of a key. The names
 *    and ranges live in the group's layout (shardlayout.h), which readers
 *    on other threads take a reference to instead of reading the group.
 *
 * spec.preferredHolder on a shard Lease is ignored (kept as written): the
 * assignment alone says who should own a shard.
 *
 * Threads: the name getters, ld_shardgroup_layout, ld_shardgroup_find,
 * ld_shardgroup_range and ld_shardgroup_shard_of_key read only what
 * ld_shardgroup_new set, so other threads may call them while one thread
 * makes every other call.
 *
 * Ownership: the group copies everything it is given; strings it returns
 * are borrowed from it and valid as long as the call comment says (at most
 * until ld_shardgroup_free).
 */
#ifndef LEADERD_SHARDGROUP_H
#define LEADERD_SHARDGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "election.h"
#include "err.h"
#include "lease.h"
#include "shardlayout.h"
#include "shardrange.h"

#define LD_SHARDGROUP_MAX_SHARDS 1024
/* At most this many other replicas' member Leases are tracked. A new one
 * past it takes the place of the record not live for the longest; with
 * every record live it is ignored (LD_ETOOBIG), as a replica that has not
 * seen it yet would. */
#define LD_SHARDGROUP_MAX_MEMBERS 4096
/* Label keys on every Lease of the group and on each shard Lease. */
#define LD_SHARDGROUP_LABEL "leaderd.io/shard-group"
#define LD_SHARDGROUP_SHARD_LABEL "leaderd.io/shard"
/* Annotation on every Lease of the group: the protocol it follows. */
#define LD_SHARDGROUP_PROTOCOL "leaderd.io/shard-protocol"
#define LD_SHARDGROUP_PROTOCOL_VERSION "2"
/* Annotation every take and release of a shard Lease writes: its holder.
 * A record whose holder differs (edited by hand) or that lacks it counts
 * as rewritten from outside (ld_shardgroup_config.outside_wait_ms). */
#define LD_SHARDGROUP_HOLDER "leaderd.io/holder"
/* Annotation of a shard Lease written by a replica that could not show
 * the object older than the outside wait (lease duration + drain): it
 * created it, or had known it (its uid) for less. A claim written on such
 * a record counts only once its claimant has known the object that long
 * (docs/design/shard-protocol.md, rule O9); a record without it, stamped
 * by a replica, was old enough when written. */
#define LD_SHARDGROUP_NEW_OBJECT "leaderd.io/new-object"
/* Annotation of a member Lease, written with every write of its member
 * election: the shard set its replica runs, "numbered/N" or
 * "named/N/<FNV-1a64 of the names in order, hex>". Two sets map keys and
 * Lease names to shards differently; a replica does not join a group
 * whose earlier members run another (ld_shardgroup_set_conflict). */
#define LD_SHARDGROUP_SHARD_SET "leaderd.io/shard-set"
/* Annotation of a member Lease: the shards its replica cannot write (a
 * webhook or RBAC by name refused its takes for a lease duration), their
 * IDs comma-separated, "" for none. The assignment skips a shard any live
 * member names here, unless a live member holds it, so that the others do
 * not try it in turn (ld_shardgroup_set_unwritable). */
#define LD_SHARDGROUP_UNWRITABLE "leaderd.io/unwritable"
/* Annotation an eviction writes: who evicted the member. */
#define LD_SHARDGROUP_EVICTED_BY "leaderd.io/evicted-by"
/* And the renewTime it wrote (microseconds since the epoch, decimal): a
 * member record naming nobody without it matching its renewTime was
 * emptied by hand, and proves no more than an absent one. */
#define LD_SHARDGROUP_EVICTED_AT "leaderd.io/evicted-at"
/* Label values are at most this long; a longer group name is labelled by a
 * prefix of it and its hash (ld_shardgroup_selector shows the value). */
#define LD_SHARDGROUP_NAME_MAX 63

struct ld_shardgroup;

struct ld_shardgroup_config {
    const char *name;     /* the group (--lease-name); copied */
    const char *identity; /* this replica; copied; non-empty */
    /* This process's incarnation (election.h; copied; NULL or "": none). A
     * shard record of our identity under another incarnation is not ours:
     * it is taken over as soon as our member election leads (that process
     * lost the member Lease, and with it every claim, before we got it). */
    const char *incarnation;
    /* NULL: n_shards numbered shards 0..n_shards-1; else n_shards distinct
     * DNS-1123 labels, none starting with "member-", in the order given.
     * Copied. 1 <= n_shards <= LD_SHARDGROUP_MAX_SHARDS. */
    const char *const *names;
    uint32_t n_shards;
    const char *pod_uid; /* NULL or "": no ownerReference; copied */
    /* The owning Pod's name (in the group's namespace, which must be the
     * Pod's); NULL: the identity. Copied. */
    const char *pod_name;
    int64_t lease_duration_ms; /* > 0: for a member record without a duration */
    /* A shard this replica uses and the assignment gives to another is
     * given back only once the live members have been the same for this
     * long (0: at once). A join followed soon by a leave, as in a rolling
     * update, then moves each shard once instead of twice. Balance after a
     * change comes this much later. */
    int64_t rebalance_delay_ms;
    /* Issue #28: a shard Lease may be deleted, or its holder rewritten, by
     * hand while its holder's watch lags. > 0 turns on two rules that keep
     * that from giving two owners: (1) a claim lasts only a lease duration
     * past the last time the view was confirmed complete
     * (ld_shardgroup_confirm); (2) a shard seen deleted (naming another),
     * absent on first sight or in a list after being seen, made anew
     * (another uid) or not stamped (LD_SHARDGROUP_HOLDER) is not written
     * (taken, re-taken, released) for this long after that was seen.
     * The daemon gives lease duration + --shard-drain: by then whoever
     * claimed it has stopped and its app had the drain. 0: off (tests of
     * the other rules that feed the group by hand). */
    int64_t outside_wait_ms;
};

/* Validates cfg and returns a new group (free with ld_shardgroup_free), or
 * NULL with err set: LD_EINVAL with a message that names the bad name or
 * value (fit for an exit 2), or LD_ENOMEM. */
struct ld_shardgroup *ld_shardgroup_new(const struct ld_shardgroup_config *cfg,
                                        struct ld_errinfo *err);
void ld_shardgroup_free(struct ld_shardgroup *g); /* NULL-safe */

/* ---- names (borrowed, valid until ld_shardgroup_free) ---- */

uint32_t ld_shardgroup_count(const struct ld_shardgroup *g);
bool ld_shardgroup_numbered(const struct ld_shardgroup *g);
const char *ld_shardgroup_name(const struct ld_shardgroup *g);
/* The group's names and ranges: borrowed, valid until ld_shardgroup_free;
 * ld_shardlayout_ref keeps it for longer, independently of the group. */
struct ld_shardlayout *ld_shardgroup_layout(const struct ld_shardgroup *g);
/* The label selector of the group's watch: "leaderd.io/shard-group=NAME"
 * (for a name over LD_SHARDGROUP_NAME_MAX: its first 46 bytes, "-" and
 * FNV-1a64 of the name in 16 hex digits). */
const char *ld_shardgroup_selector(const struct ld_shardgroup *g);
/* The label selector of the group's member Leases alone (the group's
 * selector and "!leaderd.io/shard"), for listing the members without
 * every shard Lease. */
const char *ld_shardgroup_member_selector(const struct ld_shardgroup *g);
/* This replica's member Lease name and its create_metadata JSON. */
const char *ld_shardgroup_member_lease(const struct ld_shardgroup *g);
const char *ld_shardgroup_member_metadata(const struct ld_shardgroup *g);
/* Shard s (< count): its ID ("7" or the name), Lease name and
 * create_metadata JSON. NULL for s out of range. */
const char *ld_shardgroup_shard_id(const struct ld_shardgroup *g, uint32_t s);
const char *ld_shardgroup_shard_lease(const struct ld_shardgroup *g, uint32_t s);
const char *ld_shardgroup_shard_metadata(const struct ld_shardgroup *g, uint32_t s);
/* The shard whose ID is id exactly ("07" is no numbered shard); false when
 * there is none (404). */
bool ld_shardgroup_find(const struct ld_shardgroup *g, const char *id, uint32_t *s);

/* ---- observations ---- */

/* A Lease of the group as a watch event, a list or an answer shows it (lease
 * borrowed; copied). Another replica's member Lease updates the member
 * table: the record's expiry restarts at now_ms when it differs from the one
 * seen before, and a record seen to change counts as live from then on (a
 * first sight proves nothing about the holder being alive, unless a list of
 * the group observed before did not hold the record: then it was written
 * since). Our own member Lease only tells when we joined (its acquireTime,
 * which ranks us for the assignment as the others rank us). A member Lease
 * without the annotation LD_SHARDGROUP_PROTOCOL =
 * LD_SHARDGROUP_PROTOCOL_VERSION belongs to an incompatible version: it is
 * kept, logged once by the caller (ld_shardgroup_incompatible says so), and
 * counted neither live nor dead. A shard Lease becomes that shard's observed
 * record; one that does not name this replica ends its claim. Anything else
 * (names outside the group) is ignored. LD_OK, or LD_ENOMEM / LD_ETOOBIG
 * (the record keeps its previous state, or a new member is not added). */
enum ld_err ld_shardgroup_observe_lease(struct ld_shardgroup *g,
                                        const struct ld_lease *lease, int64_t now_ms);

/* The same for member Leases alone (shard Leases are ignored). */
enum ld_err ld_shardgroup_observe_member(struct ld_shardgroup *g,
                                         const struct ld_lease *lease, int64_t now_ms);

/* A watch DELETED (gone borrowed). A member leaves the table at once, and
 * later observations of that object (its metadata.uid), such as a list
 * answered before the deletion, are ignored; a DELETED of an older object
 * (another metadata.uid) changes nothing else. A shard Lease deleted is
 * absent (free) and ends this replica's claim on it; when its last state
 * (gone's holder, or the record held) named another replica, it counts as
 * changed from outside at now_ms (outside_wait_ms). */
void ld_shardgroup_observe_deleted(struct ld_shardgroup *g, const struct ld_lease *gone,
                                   int64_t now_ms);

/* Kept for callers that know the Lease is a member's. */
void ld_shardgroup_observe_member_deleted(struct ld_shardgroup *g,
                                          const struct ld_lease *gone);

/* Whether shard s's record was read by name and lacks the group's label
 * (a Lease someone else made): the group's list and watch cannot show it,
 * so lists leave it as it is, and after a refused write it is read by name
 * again. The next write of ours labels it. */
bool ld_shardgroup_unlisted(const struct ld_shardgroup *g, uint32_t s);
/* A LIST of the whole group (items borrowed): one consistent snapshot, of
 * revision list_rv (the list's resourceVersion; NULL: unknown). Every item
 * is observed as above; a shard Lease missing from it is absent, a member
 * missing from it leaves the table, unless the view holds a record of it
 * newer than the snapshot (seen on the watch or in an answer while the
 * list was on its way); every shard counts as observed from then on.
 * LD_OK or the first error of an item. */
enum ld_err ld_shardgroup_observe_list(struct ld_shardgroup *g,
                                       const struct ld_lease *items, size_t n,
                                       const char *list_rv, int64_t now_ms);

/* The status of this replica's own member election (st borrowed) at
 * now_ms. This replica is a live member while it leads (ld_leads_at). Any
 * break in that leadership (it stopped leading, its deadline passed before
 * the renewal, the Lease's uid or leaseTransitions changed) starts a new
 * member term: claims made in an older term are void. */
void ld_shardgroup_observe_own(struct ld_shardgroup *g,
                               const struct ld_election_status *st, int64_t now_ms);

/* The view now holds everything stored before at_ms (local monotonic): a
 * list sent at at_ms was applied, or the group watch showed our own member
 * renewal sent at at_ms (a watch delivers in order, so everything stored
 * before that renewal was delivered first). Claims end a lease duration
 * after the latest such time (with outside_wait_ms > 0). */
void ld_shardgroup_confirm(struct ld_shardgroup *g, int64_t at_ms);

/* Starts a new member term without a status (the member election said it
 * stopped leading). */
void ld_shardgroup_break(struct ld_shardgroup *g);

/* The current member term (grows by one per break; 0 before the first
 * leadership). */
uint64_t ld_shardgroup_term(const struct ld_shardgroup *g);

/* Whether this replica's member election leads at now_ms. */
bool ld_shardgroup_leads(const struct ld_shardgroup *g, int64_t now_ms);

/* True once the member election observed its Lease and a list of the group
 * answered (or every shard Lease was seen): before that, /shards answers
 * 503. */
bool ld_shardgroup_observed(const struct ld_shardgroup *g);

/* Whether some other member's record, held and unexpired at now_ms, has
 * not been seen to change yet (it would count live if it did): the view of
 * the members is not complete until none is left, or until such a record
 * expires. */
bool ld_shardgroup_members_unproven(const struct ld_shardgroup *g, int64_t now_ms);
/* The annotations this replica's member election writes with every write
 * (ld_election_config.own_annotations, ld_election_set_own_annotations):
 * its LD_SHARDGROUP_SHARD_SET and LD_SHARDGROUP_UNWRITABLE. Borrowed,
 * valid until the next ld_shardgroup_set_unwritable. */
const char *ld_shardgroup_member_annotations(const struct ld_shardgroup *g);

/* Says whether this replica cannot write shard s (its takes were refused
 * for a lease duration), which goes into the member annotations. Returns
 * whether they changed (the caller hands them to the member election), or
 * false also for s out of range or out of memory (nothing changed then). */
bool ld_shardgroup_set_unwritable(struct ld_shardgroup *g, uint32_t s, bool unwritable);

/* Whether the last assignment skipped shard s: a live member (this one
 * included) cannot write it and no live member holds it. */
bool ld_shardgroup_skipped(const struct ld_shardgroup *g, uint32_t s);
/* This replica's LD_SHARDGROUP_SHARD_SET value; borrowed. */
const char *ld_shardgroup_shard_set(const struct ld_shardgroup *g);

/* A live member that joined the group before this replica (its member
 * Lease's acquireTime is earlier; ties by identity; before our own record
 * was seen, every one) and whose LD_SHARDGROUP_SHARD_SET differs from
 * ours: its identity (borrowed, valid until the view changes), its set
 * copied into theirs (len bytes, cut to fit). NULL when there is none;
 * members that write no set (older versions) are not judged. */
const char *ld_shardgroup_set_conflict(const struct ld_shardgroup *g, int64_t now_ms,
                                       char *theirs, size_t len);

/* Whether member identity's record lacks the protocol annotation (an
 * incompatible version). */
bool ld_shardgroup_incompatible(const struct ld_shardgroup *g, const char *identity);

/* ---- decisions ---- */

/* Computes the assignment at now_ms from the live members and the shards'
 * observed holders. On LD_OK ld_shardgroup_contend, ld_shardgroup_target
 * and ld_shardgroup_step answer from it and *next_ms (may be NULL) is the
 * earliest time after now_ms at which something changes with no news (a
 * member expires, a holder's absence has lasted a lease duration), INT64_MAX
 * when nothing will. On LD_ENOMEM the previous assignment stands and
 * *next_ms is untouched. */
enum ld_err ld_shardgroup_assign(struct ld_shardgroup *g, int64_t now_ms,
                                 int64_t *next_ms);

/* Whether the last assignment gives shard s to this replica (false before
 * the first, and for s out of range). */
bool ld_shardgroup_contend(const struct ld_shardgroup *g, uint32_t s);

/* The identity the last assignment gives shard s, or NULL (no members, s
 * out of range, none yet). Valid until the next call of any function here
 * that takes a member observation or assigns. */
const char *ld_shardgroup_target(const struct ld_shardgroup *g, uint32_t s);

/* What to write for shard s now, by the last assignment and the view. */
enum ld_shard_step {
    LD_SHARD_NONE,    /* nothing */
    LD_SHARD_TAKE,    /* compare-and-swap it to this replica */
    LD_SHARD_READ,    /* it may be taken, but only on a fresh list */
    LD_SHARD_EVICT,   /* evict its holder's member Lease first */
    LD_SHARD_RELEASE, /* give it back (stop claiming, then release) */
};

/* The step for shard s at now_ms. Nothing is written while this replica's
 * member election does not lead. Ours but not claimed in this term: TAKE
 * (a new write). Assigned here and free: TAKE. Held by H whose member
 * Lease an eviction emptied (LD_SHARDGROUP_EVICTED_AT), or which has had
 * no member Lease (or one emptied otherwise, by hand or by its own
 * resignation) for a lease duration since a list first showed that (the
 * count starts only on a list, where the shard's record and the member
 * table are one snapshot; before it has started, READ asks for that
 * list): READ, or TAKE when fresh (the view
 * is a list of the group just answered, one consistent snapshot: a view
 * put together from separate answers could pair a member record older
 * than the shard record). Held by H whose member record has been unchanged
 * for its duration: EVICT. Named ours and assigned elsewhere: RELEASE. */
/* With outside_wait_ms > 0, a shard changed from outside less than that
 * long ago: NONE, whatever else holds. */
enum ld_shard_step ld_shardgroup_step(const struct ld_shardgroup *g, uint32_t s,
                                      int64_t now_ms, bool fresh);

/* Another replica's member record that carries the protocol annotation and
 * has been expired (by the local rule) for ten lease durations at now_ms:
 * any live member may delete it, with preconditions. NULL when there is
 * none. Borrowed; valid until the next observation. */
const struct ld_lease *ld_shardgroup_long_expired(const struct ld_shardgroup *g,
                                                  int64_t now_ms);

/* ---- writes ---- */

/* The Lease to write to take shard s (out cleared first; caller clears
 * it): the observed record (PUT on its resourceVersion) or, absent, a new
 * one in namespace ns (POST, resource_version NULL), with holder this replica, the lease
 * duration, renewTime now (acquireTime too and leaseTransitions + 1 when the
 * holder changes), and the group's labels and protocol annotation. LD_OK,
 * LD_EINVAL (s out of range), LD_ENOMEM. */
enum ld_err ld_shardgroup_take_lease(const struct ld_shardgroup *g, uint32_t s,
                                     const char *ns, int64_t wall_us, int64_t now_ms,
                                     struct ld_lease *out);

/* The observed record of shard s with the group's labels and annotation
 * added and nothing else changed (a PUT on its resourceVersion): for a
 * shard Lease someone else made without them (ld_shardgroup_unlisted), so
 * that every replica's list and watch show it. LD_EINVAL when s is out of
 * range or absent. */
enum ld_err ld_shardgroup_label_lease(const struct ld_shardgroup *g, uint32_t s,
                                      struct ld_lease *out);

/* The release of shard s: the observed record with holder "",
 * leaseDurationSeconds 1, acquireTime = renewTime = now, leaseTransitions
 * kept. LD_EINVAL when s is out of range or absent. */
enum ld_err ld_shardgroup_release_lease(const struct ld_shardgroup *g, uint32_t s,
                                        int64_t wall_us, int64_t now_ms,
                                        struct ld_lease *out);

/* The eviction of shard s's holder: its member record as observed, with
 * holder "", leaseDurationSeconds 1, leaseTransitions kept and annotation
 * LD_SHARDGROUP_EVICTED_BY naming this replica. *identity (may be NULL)
 * is the evicted member (borrowed from out's name). LD_EINVAL when s has no
 * holder with a member record. */
enum ld_err ld_shardgroup_evict_lease(const struct ld_shardgroup *g, uint32_t s,
                                      int64_t wall_us, struct ld_lease *out);

/* This replica starts giving shard s back: it claims s no more. */
void ld_shardgroup_give_back(struct ld_shardgroup *g, uint32_t s);

/* A write of shard s sent in member term `term` on record resourceVersion
 * rv_before (NULL: a create) succeeded with stored (borrowed). The record
 * is observed (unless something newer was seen meanwhile), and s is
 * claimed when stored names this replica and the term is still the current
 * one; a release ends the give-back. */
void ld_shardgroup_wrote(struct ld_shardgroup *g, uint32_t s, uint64_t term,
                         const char *rv_before, const struct ld_lease *stored,
                         int64_t now_ms);

/* A write of shard s failed (conflict, timeout): a release's give-back
 * ends, the claim stays as it was (void). */
void ld_shardgroup_write_failed(struct ld_shardgroup *g, uint32_t s);

/* An eviction of the member record at resourceVersion rv_before succeeded
 * with stored (borrowed): observed, unless something newer was seen. */
void ld_shardgroup_evicted(struct ld_shardgroup *g, const char *rv_before,
                           const struct ld_lease *stored, int64_t now_ms);

/* ---- the /shards view ---- */

/* The live members at now_ms, sorted by strcmp, into *out (borrowed; valid
 * until the next call of any function here other than the name getters).
 * Returns how many. */
uint32_t ld_shardgroup_members(struct ld_shardgroup *g, int64_t now_ms,
                               const char *const **out);

/* Whether this replica claims shard s at now_ms: its member election
 * leads, its last write of s succeeded, named it and was made in the
 * current member term, and it is not giving s back. */
bool ld_shardgroup_owns(const struct ld_shardgroup *g, uint32_t s, int64_t now_ms);

/* The same without the member election's deadline: a claim that holds
 * until ld_shardgroup_lead_until. A claim written on a record marked
 * LD_SHARDGROUP_NEW_OBJECT starts only once this replica has known the
 * object for the outside wait. */
bool ld_shardgroup_claimed(const struct ld_shardgroup *g, uint32_t s, int64_t now_ms);

/* Whether the record of s as last seen names this replica, claimed or not
 * (being given back, or the claims broken by a step-down of the member
 * election): nobody else takes s while that holds and this replica's
 * member term lasts, so what it sent under its claim may still land. */
bool ld_shardgroup_named(const struct ld_shardgroup *g, uint32_t s);
int64_t ld_shardgroup_lead_until(const struct ld_shardgroup *g);

/* Shard s's observed record (borrowed; valid until the next observation),
 * NULL while it is absent or s is out of range. */
const struct ld_lease *ld_shardgroup_record(const struct ld_shardgroup *g, uint32_t s);

/* Whether shard s has been observed (present or absent). */
bool ld_shardgroup_shard_observed(const struct ld_shardgroup *g, uint32_t s);

/* Writes the shards owned at now_ms, lowest first, into out (the caller's,
 * room for ld_shardgroup_count entries); returns how many. */
uint32_t ld_shardgroup_owned(const struct ld_shardgroup *g, int64_t now_ms,
                             uint32_t *out);

/* For numbered shards: shard s's range bounds and selector in the forms of
 * shardrange.h (any buffer may be NULL). False for named shards and s out
 * of range (the buffers are left alone). */
bool ld_shardgroup_range(const struct ld_shardgroup *g, uint32_t s,
                         char start[LD_SHARDRANGE_HEX_SIZE],
                         char end[LD_SHARDRANGE_HEX_SIZE],
                         char selector[LD_SHARDRANGE_SELECTOR_SIZE]);

/* For numbered shards: the shard whose range holds FNV-1a64 of the key's
 * len bytes, and that hash (either out may be NULL). False for named
 * shards. */
bool ld_shardgroup_shard_of_key(const struct ld_shardgroup *g, const void *key,
                                size_t len, uint32_t *s, uint64_t *hash);

#endif
