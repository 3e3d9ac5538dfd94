/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardsnap: what the shard loop publishes for the HTTP server in shard
 * mode (--shards): every shard's election as last observed, and the live
 * members. A snapshot is immutable once built and reference-counted, so a
 * reader takes one in O(1) under the state's mutex (ld_state_read_shards)
 * and renders at leisure, whatever the number of shards; the loop builds a
 * new one whenever something a reader could see has changed.
 *
 * Leadership per shard is judged by the reader at request time, as for
 * the single Lease (state.h): a shard is ours while its entry says leading
 * and the table's claims_until_ms has not passed. Every claim ends with
 * the member election's lead, so one deadline serves them all, and a
 * member renewal, which only moves that deadline, makes a new header that
 * shares the entries of the table before it (ld_shardsnap_extend): the
 * entries are copied only when one of them or the members changed.
 *
 * A table holds only what changes. Shard i is the group's shard i: its ID,
 * Lease name and range never change, so they are not copied into every
 * table but kept once in the group's layout (shardlayout.h), which the
 * state holds beside the latest table; the two and the state's snapshot
 * are all a reader renders from.
 */
#ifndef LEADERD_SHARDSNAP_H
#define LEADERD_SHARDSNAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* One shard's election, in the group's order (shardlayout.h). */
struct ld_shard_entry {
    const char *leader; /* observed holder, "" when free; never NULL */
    int64_t term;       /* leaseTransitions of the observed record */
    bool observed;      /* the Lease (or its absence) was seen at least once */
    bool leading;       /* we claim it (until the table's claims_until_ms) */
    /* Its record still names us under our member term, claimed or being
     * given back: a write already sent under the claim may run until the
     * table's term_until_ms (ld_shardsnap_in_term). */
    bool in_term;
    bool unwritable; /* this replica could not write it: the group avoids it here */
    bool skipped;    /* no live member can write it: nobody is assigned it */
    bool has_renewed_at;
    int64_t renewed_at_us;      /* renewTime of the observed record (wall) */
    int64_t last_renew_wall_us; /* our last successful renewal (wall), 0 if none */
};

struct ld_shardsnap {
    atomic_int refs; /* private: see ld_shardsnap_ref */
    bool observed;   /* every shard observed once: /shards answers 200 */
    /* Monotonic: an entry's leading counts only before this. */
    int64_t claims_until_ms;
    /* Monotonic: the deadline of our member election's term (election.h's
     * term_until_ms), which outlasts the claims after a step-down on
     * purpose; a new or extended table starts with claims_until_ms, and
     * its builder may set it before publishing. */
    int64_t term_until_ms;
    uint32_t n_shards;
    const struct ld_shard_entry *shards; /* n_shards entries */
    uint32_t n_members;
    const char *const *members; /* the live members, sorted by strcmp */
    /* Private: the table whose allocation holds shards and members, with a
     * reference; NULL when it is this one. */
    struct ld_shardsnap *body;
};

/* A new snapshot (one reference) holding copies of the n_shards entries
 * (their leader strings too) and the n_members member names, its claims
 * counting until claims_until_ms; or NULL when memory ran out. */
struct ld_shardsnap *ld_shardsnap_new(bool observed, int64_t claims_until_ms,
                                      const struct ld_shard_entry *shards,
                                      uint32_t n_shards, const char *const *members,
                                      uint32_t n_members);

/* A new snapshot (one reference) that shows what t shows, its claims
 * counting until claims_until_ms instead: it shares t's entries and
 * members (holding a reference to them) and copies nothing. NULL when
 * memory ran out. t stays the caller's. */
struct ld_shardsnap *ld_shardsnap_extend(struct ld_shardsnap *t, int64_t claims_until_ms);

/* Another reference to s (NULL-safe: returns NULL). Thread-safe. */
struct ld_shardsnap *ld_shardsnap_ref(struct ld_shardsnap *s);
/* Drops a reference; the last one frees s. NULL-safe. Thread-safe. */
void ld_shardsnap_unref(struct ld_shardsnap *s);

/* Whether a write sent under our claim of shard i of t may still run as
 * of now_ms: the entry is claimed or in term, and now_ms is before t's
 * term_until_ms. */
bool ld_shardsnap_in_term(const struct ld_shardsnap *t, uint32_t i, int64_t now_ms);

/* t's term_until_ms when ld_shardsnap_in_term could hold for shard i,
 * else INT64_MIN (also for a NULL t or i past it). */
int64_t ld_shardsnap_term_until(const struct ld_shardsnap *t, uint32_t i);

/* Whether this replica leads shard i of t as of now_ms: its entry says
 * leading and now_ms is before t's claims_until_ms. False for a NULL t or
 * an i past its shards. */
bool ld_shardsnap_leads(const struct ld_shardsnap *t, uint32_t i, int64_t now_ms);

/* The deadline of our claim of shard i of t: t's claims_until_ms when its
 * entry says leading, else INT64_MIN (also for a NULL t or i past it). */
int64_t ld_shardsnap_lead_until(const struct ld_shardsnap *t, uint32_t i);

/* True when a and b show the same to a /watch reader at now_ms: observed,
 * members, and every shard's leader, term and is_leader. NULL equals only
 * NULL. */
bool ld_shardsnap_same_view(const struct ld_shardsnap *a, const struct ld_shardsnap *b,
                            int64_t now_ms);

/* As ld_shardsnap_same_view, with a's is_leader judged at a_ms and b's at
 * b_ms: whether a view shown at a_ms still shows the same at b_ms (a
 * shard's leadership also lapses by time alone). */
bool ld_shardsnap_same_view_at(const struct ld_shardsnap *a, int64_t a_ms,
                               const struct ld_shardsnap *b, int64_t b_ms);

#endif
