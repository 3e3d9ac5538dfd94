/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shard_table: shard mode's table (shardsnap.h) built from the shard
 * host's view (shardhost.h): each shard's observed record and this
 * replica's claim, the live members and the claims' deadline. A table is
 * made anew only when something in it changed; a member renewal alone
 * extends the last one. Each shard's claim, as the table shows it, is also
 * handed to the caller as an election status (for the hooks bound to it).
 * The shell's thread only.
 */
#ifndef LEADERD_SHARD_TABLE_H
#define LEADERD_SHARD_TABLE_H

#include <stdint.h>

#include "clock.h"
#include "election.h"
#include "err.h"
#include "metrics.h"
#include "shardhost.h"
#include "shardsnap.h"

struct ld_shard_table_config {
    struct ld_shardhost *sh;      /* borrowed; outlives the table */
    const struct ld_clock *clock; /* copied; NULL: the real clock */
    struct ld_metrics *metrics;   /* borrowed; may be NULL: the acquire delays */
    /* After each shard's entry is brought up to date: its claim as a
     * status (borrowed for the call). May be NULL. */
    void (*on_entry)(void *ctx, uint32_t k, const struct ld_election_status *st,
                     int64_t now_ms);
    void *ctx;
};

struct ld_shard_table;

/* A table of every shard unobserved, or NULL with err set (LD_ENOMEM). */
struct ld_shard_table *ld_shard_table_new(const struct ld_shard_table_config *cfg,
                                          struct ld_errinfo *err);
void ld_shard_table_free(struct ld_shard_table *tb); /* NULL-safe */

/* Brings every entry up to date; returns the new table (a reference the
 * caller owns) when an entry, the live members or a deadline changed,
 * NULL when nothing did. When memory runs out, a table that says nothing
 * is known. */
struct ld_shardsnap *ld_shard_table_update(struct ld_shard_table *tb, int64_t now_ms);

/* The next update makes a new table even when no entry changed. */
void ld_shard_table_touch(struct ld_shard_table *tb);

/* Shard k's entry as last updated (borrowed until the next update). */
const struct ld_shard_entry *ld_shard_table_entry(const struct ld_shard_table *tb,
                                                  uint32_t k);

/* Leader changes seen, every shard's together. */
uint64_t ld_shard_table_transitions(const struct ld_shard_table *tb);

#endif
