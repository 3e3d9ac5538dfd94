/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet: the rig the shell and replica simulations share (check_host,
 * check_mode_lease, check_shell, ...): one support/fake_transport API on
 * its fake clock, the constants every such test starts from, a quiet log,
 * an outside holder that keeps re-putting a Lease, the run loops with the
 * one bound on turns, reads of the fake's store and log, and the start
 * and stop of a shard replica (check_mode_shards, check_shard_protocol).
 *
 * What runs in a turn (a shell, a host, a set of replicas) is the test's:
 * the loops call its turn function, which takes no fixture because
 * Check's fixtures take none. Prefix fleet_ (rig_ is http_rig's).
 */
#ifndef LEADERD_TEST_FLEET_H
#define LEADERD_TEST_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#include "../../../cmd/leaderd/core/metrics.h"
#include "../../../cmd/leaderd/core/state.h"
#include "../../../cmd/leaderd/shell/mode_shards.h"
#include "../../../cmd/leaderd/shell/shell.h"
#include "fake_transport.h"
#include "kube.h"
#include "log.h"

#define FLEET_NS "default"
#define FLEET_T0_MS 1000000LL
#define FLEET_WALL0_US 1800000000000000LL
#define FLEET_LEASE_MS 15000
#define FLEET_RENEW_MS 10000
#define FLEET_RETRY_MS 2000
#define FLEET_OTHER "other-replica"

struct fleet {
    /* Owned by its clients, freed with the last (usually by the ld_kube
     * each was handed to: fleet_kube's, a replica's); fleet_destroy does
     * not free it. */
    struct fake_transport *ft;
    struct ld_clock clock; /* reads ft's clock */
    int64_t step_ms;       /* fake time one turn may take */
    /* An outside holder: while other_every_ms > 0, fleet_other_renews
     * puts other_lease as other_id for other_secs (fleet_init: FLEET_OTHER,
     * the lease duration) once other_every_ms has passed since its last put. */
    const char *other_lease;
    const char *other_id;
    int32_t other_secs;
    int64_t other_every_ms, other_next_ms;
};

/* One turn of the test's loop. left_ms: fake time left before
 * fleet_run_for's end (INT64_MAX from fleet_run_until, which never cut a
 * turn short). True stops fleet_run_for (the shell is done). */
typedef bool (*fleet_turn_fn)(int64_t left_ms);

/* Zeroes f and makes its fake (FLEET_NS, FLEET_T0_MS, FLEET_WALL0_US) and
 * clock; installs sink at LD_LOG_DEBUG, a quiet one when NULL. Fails the
 * test on error. */
void fleet_init(struct fleet *f, int64_t step_ms, ld_log_sink_fn sink);
/* Resets the log sink. The fake goes with the kube of its first client. */
void fleet_destroy(struct fleet *f);
int64_t fleet_now(const struct fleet *f);
/* An ld_kube on the fake's first client, which it owns; the caller owns
 * the kube (ld_kube_free). Fails the test on error. */
struct ld_kube *fleet_kube(struct fleet *f);

/* The outside holder's put, when due (see struct fleet). */
void fleet_other_renews(struct fleet *f);
/* Turns (the outside holder first) until ms of fake time passed or turn
 * returns true, at most ms / step_ms * 4 + 100 turns. */
void fleet_run_for(struct fleet *f, int64_t ms, fleet_turn_fn turn);
/* Turns until pred holds, for at most max_ms of fake time (and as many
 * turns as fleet_run_for); true if it did. turn's result is ignored. */
bool fleet_run_until(struct fleet *f, bool (*pred)(void), int64_t max_ms,
                     fleet_turn_fn turn);

/* The stored holder of lease, "(absent)" when there is none. Borrowed: a
 * static buffer, valid until the next call. */
const char *fleet_holder(struct fleet *f, const char *lease);
/* The first release write (a PUT with an empty holder) of lease by client
 * (-1: any) submitted at or after since_ms, NULL if none. Borrowed from the
 * fake's log. */
const struct fake_transport_record *
fleet_release_of(const struct fleet *f, const char *lease, int client, int64_t since_ms);
/* fleet_release_of's submit time, -1 if none. */
int64_t fleet_release_ms(const struct fleet *f, const char *lease, int client,
                         int64_t since_ms);
/* The submit time of the latest successful write (PUT or POST) of lease,
 * -1 if none. */
int64_t fleet_last_ok_write_ms(const struct fleet *f, const char *lease);

/* ---- replicas of a shard group (check_mode_shards, check_shard_protocol) ---- */

/* What a replica process has: its client, state, metrics, mode and shell. */
struct fleet_replica {
    struct ld_kube *kube; /* owns its client of the fake */
    struct ld_state state;
    struct ld_metrics metrics;
    struct ld_mode_shards *mode;
    struct ld_shell *sh;
};

/* How a shard replica starts. The simulations replay the same runs only
 * if each replica gets the same client, clock and seed as before: the
 * caller chooses all three, nothing here draws or counts. */
struct fleet_shards_config {
    struct ld_transport *client;  /* the replica's client of the fake: owned by it */
    const struct ld_clock *clock; /* borrowed: outlives the replica */
    const char *group;
    const char *identity;    /* borrowed: outlives the replica */
    const char *incarnation; /* NULL: none; borrowed likewise */
    uint32_t n_shards;
    int64_t drain_ms;
    uint64_t seed;
    int64_t call_timeout_ms;
};

/* Starts a replica of the shard group c->group in FLEET_NS with the
 * fleet's lease duration, renew deadline and retry period, releasing on
 * exit, no wake fd. Fails the test on error. */
void fleet_replica_start_shards(struct fleet_replica *r,
                                const struct fleet_shards_config *c);
/* Frees what fleet_replica_start_shards made, shell first, client last,
 * as a killed process loses them; r's pointers are NULL afterwards. */
void fleet_replica_stop(struct fleet_replica *r);

#endif
