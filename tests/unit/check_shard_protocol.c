/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_shard_protocol: the safety argument of shard protocol 2
 * (docs/design/shard-protocol.md) put to the test. Three to six replicas of
 * the daemon's shard mode (cmd/leaderd/shell/mode_shards.h), each with its own
 * client, state and shell, share one in-memory Lease API
 * (support/fake_transport) on its fake clock, for simulated minutes per
 * seed, while a random schedule pauses replicas (not run at all for up to
 * two lease durations, as a stopped process), lags every watch (up to two
 * lease durations), makes a replica's lists hang while its writes go
 * through (so that its view goes stale while it leads), slows requests, delays writes
 * past their timeout so that they land late, partitions a replica from the API, kills
 * replicas and starts them again, stops some gracefully, and gives back shards after a
 * random drain that the app sometimes cuts short (POST /shards/ID/drained).
 *
 * It also deletes member Leases by hand and answers some replicas' lists
 * seconds after their snapshot (the watch shows them what was written
 * since first). A replica whose member Lease is deleted is mostly away
 * meanwhile (paused, as when the clean-up of long-expired member Leases
 * deletes it) while the others' lists are slow; once they may take its
 * shards over on the absence rule, it comes back just after one of them
 * sent a list, makes its member Lease anew and writes its shards again,
 * and the lister is starved until the answer is in: it takes the answer
 * in the same pass as the watch events of the return, which came first.
 * A takeover judged on that answer, with the shard's newer record from
 * the watch and the member table of the list, would give the shard two
 * owners (docs/design/shard-protocol.md, "Fresh list").
 *
 * Issue #28's faults come on top: an outside actor deletes shard Leases,
 * rewrites their holder as kubectl edit would (to a replica, or to
 * nobody) and empties member Leases; one replica's watch falls up to two
 * minutes behind the others' (fake_transport_set_client_watch_lag_ms); each replica's
 * clock runs up to 2 % fast or slow; a killed process's requests already
 * sent still land after it is gone (and after its restart); and writes
 * are applied but answered 409 or 5xx. A claim may outlive its Lease's
 * deletion or edit by hand by at most a lease duration (the contract's
 * bound), never coexist with another claim.
 *
 * LD_SIM_SEEDS=N runs N seeds instead of SEEDS (make sim-deep); the run
 * prints seeds/s and checks. SIM_TRACE=1 prints every replica's log and
 * the outside actor's acts on stderr; SIM_NO_OUTSIDE, SIM_NO_SKEW,
 * SIM_NO_DRIFT, SIM_NO_OUTLIVE, SIM_NO_MEMBER_EDIT and SIM_NO_TWINS turn
 * one family of faults off, to find which one a failing seed needs.
 *
 * After every turn of every replica, at the common fake time, every shard
 * is claimed by at most one replica, judged as /shards judges it (the
 * replica's published table at that instant, which a paused replica keeps
 * serving), and a claimed shard's stored Lease names its claimant. Once the
 * faults stop, the group must settle: every shard held and claimed by a
 * running replica, each with its quota.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../cmd/leaderd/core/metrics.h"
#include "../../cmd/leaderd/shell/mode_shards.h"
#include "../../cmd/leaderd/core/shardsnap.h"
#include "../../cmd/leaderd/shell/shell.h"
#include "../../cmd/leaderd/core/state.h"
#include "kube.h"
#include "log.h"
#include "shardgroup.h"
#include "support/fake_transport.h"
#include "support/fleet.h"
#include "support/run_suite.h"

#define NS FLEET_NS
#define GROUP "grp"
#define N_SHARDS 10
#define MAX_REPLICAS 6
#define T0_MS FLEET_T0_MS
#define LEASE_MS FLEET_LEASE_MS
#define RENEW_MS FLEET_RENEW_MS
#define RETRY_MS FLEET_RETRY_MS
#define CALL_TIMEOUT_MS 5000
#define STEP_MS 20
#define CHAOS_MS (4 * 60 * 1000)
/* The faults' last outside change may hold a shard for a lease duration
 * and the drain (shard-protocol.md, "Changed from outside"). */
#define SETTLE_MS (2 * LEASE_MS + RENEW_MS + 4 * RETRY_MS + 30000)
#ifndef SEEDS
#define SEEDS 16
#endif
/* Clock-rate drift of each replica, at most this many parts per million
 * either way (2 %: over a lease duration, 300 ms of the 5 s margin). */
#define DRIFT 1
#define DRIFT_PPM 20000
/* Seeds beyond the first SEEDS that once gave two owners (a takeover
 * counted from an absence seen before the holder's rewrite of the shard):
 * kept as regressions. */
static const uint64_t regression_seeds[] = {40, 57, 90, 127, 148, 161};
/* A slow list is answered this long after its snapshot. */
#define SLOW_LIST_MIN_MS 4000
#define SLOW_LIST_MAX_MS 7000
/* Clients of the fake one run may use: one per start of a replica. */
#define MAX_STARTS 28

struct replica {
    char id[16];
    char home_id[16];     /* its slot's own identity; id differs while a twin */
    char incarnation[16]; /* a new one for every start, as leaderd draws */
    int client;
    struct fleet_replica fr; /* its client, state, metrics, mode and shell */
    bool running;            /* started and not killed */
    bool stopping;           /* SIGTERM sent: runs until done */
    int64_t paused_until_ms;
    int64_t slow_lists_until_ms; /* its lists are answered late until then */
    int64_t list_delay_ms;       /* by this much */
    /* Away since its member Lease was deleted: the others may take its
     * shards over on the absence rule from this time on (0: not away so). */
    int64_t gone_after_ms;
    /* Its own clock: the fake's, running faster or slower by ppm parts per
     * million from t0 on (client-go's margin, lease duration minus renew
     * deadline, is meant to absorb such drift). */
    struct ld_clock clock;
    int64_t drift_ppm;
    int64_t drift_t0_ms;
};

static struct {
    /* One seed's fake (fl.ft, owned by its clients, NULL between seeds)
     * and its clock. */
    struct fleet fl;
    struct ld_transport *tick; /* a client that only lets time pass */
    struct replica r[MAX_REPLICAS];
    size_t n;
    int clients; /* made so far */
    uint64_t rng;
    uint64_t seed;
    int64_t drain_ms;                     /* --shard-drain of this seed's replicas */
    int64_t latency_ms, watch_latency_ms; /* the fake's, as last set */
    size_t lists_seen;                    /* of the fake's log, by look_for_lists */
    /* What the schedules did, over every seed. */
    unsigned pauses, kills, restarts, stops, late_writes, partitions, blind, drained,
        slow_lists, deleted, returns, twins, checks;
    /* Issue #28's faults: shard Leases deleted or edited by hand, member
     * Leases edited, one replica's watch lagging, writes applied but
     * answered 409 or 5xx. */
    unsigned shards_deleted, shards_edited, members_edited, lagged, applied_errors;
    /* When the outside actor last deleted or edited each shard Lease. */
    int64_t outside_ms[N_SHARDS];
} fx;

static const char *trace_who = "-"; /* the replica turning, and its process */
static int trace_client;
/* Quiet unless SIM_TRACE is set. */
static void trace_sink(void *ctx, enum ld_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    if (getenv("SIM_TRACE") && fx.fl.ft)
        fprintf(stderr, "%lld [%s#%d] %s\n",
                (long long)(fake_transport_now_ms(fx.fl.ft) - T0_MS), trace_who,
                trace_client, msg);
}

static int64_t now(void)
{
    return fleet_now(&fx.fl);
}

static uint64_t next_rand(void)
{
    uint64_t z = (fx.rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int64_t between(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next_rand() % (uint64_t)(hi - lo + 1));
}

/* True with probability per_mille / 1000. */
static bool chance(unsigned per_mille)
{
    return next_rand() % 1000 < per_mille;
}

static int64_t drift_mono_ms(void *ctx)
{
    const struct replica *r = ctx;
    int64_t t = fake_transport_now_ms(fx.fl.ft) - r->drift_t0_ms;
    return r->drift_t0_ms + t + t * r->drift_ppm / 1000000;
}

static int64_t drift_wall_us(void *ctx)
{
    (void)ctx;
    return fake_transport_wall_us(fx.fl.ft);
}

/* r's clock, drifting by r->drift_ppm (a timer armed on it is armed on the
 * fake's clock at the matching time). */
static int drift_arm(void *ctx, int fd, int64_t at_ms)
{
    const struct replica *r = ctx;
    int64_t t = at_ms - r->drift_t0_ms;
    int64_t base = r->drift_t0_ms + t * 1000000 / (1000000 + r->drift_ppm);
    return fx.fl.clock.arm ? fx.fl.clock.arm(fx.fl.clock.ctx, fd, base) : 0;
}

static void start(struct replica *r)
{
    struct ld_transport *t = fake_transport_add_client(fx.fl.ft);
    ck_assert_ptr_nonnull(t);
    r->client = ++fx.clients;
    snprintf(r->incarnation, sizeof(r->incarnation), "inc%d", r->client);
    r->drift_t0_ms = now();
    r->drift_ppm = DRIFT ? between(-DRIFT_PPM, DRIFT_PPM) : 0;
    if (getenv("SIM_NO_DRIFT"))
        r->drift_ppm = 0;
    r->clock = (struct ld_clock){drift_mono_ms, drift_wall_us, drift_arm, r};
    /* Client 0 only lets time pass: a replica's is its start's, 1 on;
     * its seed mixes the run's seed with that number. */
    struct fleet_shards_config c = {
        .client = t,
        .clock = &r->clock,
        .group = GROUP,
        .identity = r->id,
        .incarnation = r->incarnation,
        .n_shards = N_SHARDS,
        .drain_ms = fx.drain_ms,
        .seed = fx.seed * 131 + (uint64_t)fx.clients,
        .call_timeout_ms = CALL_TIMEOUT_MS,
    };
    fleet_replica_start_shards(&r->fr, &c);
    r->running = true;
    r->stopping = false;
    r->paused_until_ms = 0;
    r->slow_lists_until_ms = 0;
    r->gone_after_ms = 0;
}

/* The process is gone: nothing of it runs or answers any more. */
static void kill_replica(struct replica *r)
{
    fleet_replica_stop(&r->fr);
    r->running = false;
}

static void setup_seed(uint64_t seed)
{
    fleet_init(&fx.fl, STEP_MS, trace_sink);
    fx.tick = fake_transport_transport(fx.fl.ft);
    fake_transport_set_writes_outlive_clients(
        fx.fl.ft, !getenv("SIM_NO_OUTLIVE")); /* a kill leaves its writes */
    fx.seed = seed;
    fx.rng = seed * 7919;
    fx.clients = 0;
    fx.latency_ms = fx.watch_latency_ms = 1; /* the fake's defaults */
    fx.lists_seen = 0;
    memset(fx.outside_ms, 0, sizeof(fx.outside_ms));
    fx.n = (size_t)between(3, MAX_REPLICAS);
    fx.drain_ms = chance(300) ? 0 : between(1, RENEW_MS - 1);
    for (size_t i = 0; i < fx.n; i++) {
        memset(&fx.r[i], 0, sizeof(fx.r[i]));
        snprintf(fx.r[i].home_id, sizeof(fx.r[i].home_id), "r%u", (unsigned)i);
        snprintf(fx.r[i].id, sizeof(fx.r[i].id), "%s", fx.r[i].home_id);
        start(&fx.r[i]);
    }
}

static void teardown_seed(void)
{
    for (size_t i = 0; i < fx.n; i++)
        if (fx.r[i].running)
            kill_replica(&fx.r[i]);
    ld_transport_free(fx.tick); /* the last client: the API goes with it */
    fx.fl.ft = NULL;
}

static void setup(void)
{
    memset(&fx, 0, sizeof(fx));
}

static void teardown(void)
{
    fleet_destroy(&fx.fl);
}

/* Whether the stored shard k names r (identity and incarnation). */
static bool stored_by(uint32_t k, const struct replica *r)
{
    struct ld_lease l;
    char name[64];
    snprintf(name, sizeof(name), GROUP "-%u", k);
    bool ok = fake_transport_lease_get(fx.fl.ft, name, &l) == LD_OK &&
              ld_lease_held_by(&l, r->id, r->incarnation);
    ld_lease_clear(&l);
    return ok;
}

/* The stored holder of shard k, "" when free or absent. */
static void stored_holder(uint32_t k, char *out, size_t len)
{
    struct ld_lease l;
    char name[64];
    snprintf(name, sizeof(name), GROUP "-%u", k);
    out[0] = '\0';
    if (fake_transport_lease_get(fx.fl.ft, name, &l) == LD_OK)
        snprintf(out, len, "%s", l.spec.holder);
    ld_lease_clear(&l);
}

/* The safety check, at the common fake time. */
static void check_exclusive(void)
{
    int64_t t = now();
    struct ld_shardsnap *tables[MAX_REPLICAS] = {NULL};
    for (size_t i = 0; i < fx.n; i++)
        if (fx.r[i].running)
            tables[i] = ld_state_read_shards(&fx.r[i].fr.state, NULL);
    for (uint32_t k = 0; k < N_SHARDS; k++) {
        const char *who = NULL;
        for (size_t i = 0; i < fx.n; i++) {
            if (!tables[i] || !ld_shardsnap_leads(tables[i], k, t))
                continue;
            ck_assert_msg(
                who == NULL, "seed %llu at %lld ms: shard %u claimed by %s and %s",
                (unsigned long long)fx.seed, (long long)(t - T0_MS), k, who, fx.r[i].id);
            who = fx.r[i].id;
            char holder[LD_LEASE_MAX_HOLDER + 1];
            stored_holder(k, holder, sizeof(holder));
            /* A claim may outlive its Lease's deletion or edit by hand by
             * a lease duration at most (its holder's view is that old, on a
             * clock that may run 2 % slow), never more. */
            bool outside = fx.outside_ms[k] &&
                           t - fx.outside_ms[k] <= LEASE_MS + LEASE_MS / 20 + 1000;
            ck_assert_msg(outside || (strcmp(holder, who) == 0 && stored_by(k, &fx.r[i])),
                          "seed %llu at %lld ms: %s (%s) claims shard %u stored as held "
                          "by \"%s\" (under another incarnation, or another holder)",
                          (unsigned long long)fx.seed, (long long)(t - T0_MS), who,
                          fx.r[i].incarnation, k, holder);
        }
    }
    for (size_t i = 0; i < fx.n; i++)
        ld_shardsnap_unref(tables[i]);
    fx.checks++;
}

/* One turn of every running replica that is not paused, each followed by
 * the check; time passes even when none runs. */
static void turn_all(void)
{
    bool any = false;
    for (size_t i = 0; i < fx.n; i++) {
        struct replica *r = &fx.r[i];
        if (!r->running || now() < r->paused_until_ms)
            continue;
        any = true;
        trace_who = r->id;
        trace_client = r->client;
        if (ld_shell_turn(r->fr.sh, STEP_MS) && r->stopping)
            kill_replica(r); /* exited after its graceful stop */
        check_exclusive();
    }
    if (!any) {
        ld_transport_run(fx.tick, STEP_MS, -1);
        check_exclusive();
    }
}

static size_t running(void)
{
    size_t n = 0;
    for (size_t i = 0; i < fx.n; i++)
        n += fx.r[i].running && !fx.r[i].stopping;
    return n;
}

static struct replica *pick(bool want_running)
{
    struct replica *r = &fx.r[next_rand() % fx.n];
    return r->running == want_running ? r : NULL;
}

static void set_latency(int64_t ms)
{
    fake_transport_set_latency_ms(fx.fl.ft, ms);
    fx.latency_ms = ms;
}

static void set_watch_latency(int64_t ms)
{
    fake_transport_set_watch_latency_ms(fx.fl.ft, ms);
    fx.watch_latency_ms = ms;
}

/* r is not run until until_ms. Any pause but delete_member's own ends r's
 * absence that on_list watches for. */
static void pause_until(struct replica *r, int64_t until_ms)
{
    r->paused_until_ms = until_ms;
    r->gone_after_ms = 0;
}

/* Until until_ms, r's lists are answered seconds after their snapshot
 * (unless they are slow already). */
static void slow_lists(struct replica *r, int64_t until_ms)
{
    if (now() < r->slow_lists_until_ms)
        return;
    r->slow_lists_until_ms = until_ms;
    r->list_delay_ms = between(SLOW_LIST_MIN_MS, SLOW_LIST_MAX_MS);
    fake_transport_fault_add_for(
        fx.fl.ft, r->client, NULL, "LIST",
        (struct fake_transport_fault){.kind = FAKE_TRANSPORT_LATE_ANSWER,
                                      .delay_ms = r->list_delay_ms,
                                      .count = -1,
                                      .until_ms = until_ms});
    fx.slow_lists++;
}

/* r's member Lease deleted by hand. A running r makes it anew (its member
 * election finds it gone) and writes its shards again in the new member
 * term. Mostly r is away meanwhile, up to two lease durations, its own
 * lists answered at once and the others' slowly: see on_list. */
static void delete_member(struct replica *r)
{
    char name[64];
    snprintf(name, sizeof(name), GROUP "-member-%s", r->id);
    if (!fake_transport_lease_delete(fx.fl.ft, name))
        return;
    fx.deleted++;
    if (!r->running || r->stopping || now() < r->paused_until_ms ||
        now() < r->slow_lists_until_ms || chance(200))
        return;
    pause_until(r, now() + 2 * LEASE_MS);
    /* When the others see it gone, plus the wait of the absence rule. */
    r->gone_after_ms = now() + fx.watch_latency_ms + LEASE_MS;
    fx.pauses++;
    for (size_t i = 0; i < fx.n; i++)
        if (fx.r[i].running && &fx.r[i] != r)
            slow_lists(&fx.r[i], r->paused_until_ms);
}

/* Replica q sent a LIST of the group at sent_ms. If it is answered late,
 * a replica away since delete_member whose shards the others may take
 * over by now comes back (q's list may be the one to take them over), and
 * q is starved until the answer is in, so that it takes the answer in one
 * pass with the watch events of that return, which come first. */
static void on_list(struct replica *q, int64_t sent_ms)
{
    bool returned = false;
    for (size_t i = 0; i < fx.n && now() < q->slow_lists_until_ms; i++) {
        struct replica *r = &fx.r[i];
        if (r->gone_after_ms && now() >= r->gone_after_ms && now() < r->paused_until_ms) {
            pause_until(r, now() + between(0, 1000));
            returned = true;
            fx.returns++;
        }
    }
    if (returned)
        pause_until(q, sent_ms + fx.latency_ms + q->list_delay_ms + between(0, 1000));
}

/* The LISTs sent since the last look by replicas that run. */
static void look_for_lists(void)
{
    for (; fx.lists_seen < fake_transport_record_count(fx.fl.ft); fx.lists_seen++) {
        const struct fake_transport_record *rec =
            fake_transport_record(fx.fl.ft, fx.lists_seen);
        if (strcmp(rec->verb, "LIST") != 0)
            continue;
        for (size_t i = 0; i < fx.n; i++) {
            struct replica *r = &fx.r[i];
            if (r->running && r->client == rec->client && now() >= r->paused_until_ms)
                on_list(r, rec->at_ms);
        }
    }
}

/* The app of a replica that gives back shards says it drained one of them
 * (POST /shards/ID/drained); false when it gives back none. */
static bool app_drained(struct replica *r)
{
    uint32_t first = (uint32_t)between(0, N_SHARDS - 1);
    for (uint32_t k = 0; k < N_SHARDS; k++)
        if (ld_state_drained_post(&r->fr.state, (first + k) % N_SHARDS))
            return true;
    return false;
}

/* Issue #28's faults by an outside actor: a shard Lease deleted, or its
 * holder rewritten (to a replica, or to nobody) as kubectl edit would,
 * keeping the rest of the object; a member Lease edited to name nobody. */
static void outside_actor(void)
{
    char name[64];
    uint32_t k = (uint32_t)between(0, N_SHARDS - 1);
    snprintf(name, sizeof(name), GROUP "-%u", k);
    if (getenv("SIM_TRACE"))
        fprintf(stderr, "%lld actor looks at %s\n", (long long)(now() - T0_MS), name);
    if (chance(15) && fake_transport_lease_delete(fx.fl.ft, name)) {
        if (getenv("SIM_TRACE"))
            fprintf(stderr, "%lld actor DELETES %s\n", (long long)(now() - T0_MS), name);
        fx.shards_deleted++;
        fx.outside_ms[k] = now();
    }
    if (chance(15)) {
        const char *holder = chance(300) ? "" : fx.r[next_rand() % fx.n].id;
        fake_transport_lease_put(fx.fl.ft, name, NULL, holder, LEASE_MS / 1000,
                                 fake_transport_wall_us(fx.fl.ft));
        if (getenv("SIM_TRACE"))
            fprintf(stderr, "%lld actor EDITS %s to '%s'\n", (long long)(now() - T0_MS),
                    name, holder);
        fx.shards_edited++;
        fx.outside_ms[k] = now();
    }
    if (chance(8) && !getenv("SIM_NO_MEMBER_EDIT")) {
        snprintf(name, sizeof(name), GROUP "-member-%s", fx.r[next_rand() % fx.n].id);
        struct ld_lease l;
        if (fake_transport_lease_get(fx.fl.ft, name, &l) == LD_OK) {
            fake_transport_lease_put(fx.fl.ft, name, NULL, "", 1,
                                     fake_transport_wall_us(fx.fl.ft));
            fx.members_edited++;
        }
        ld_lease_clear(&l);
    }
}

/* Faults of the API and of one replica's view: its watch minutes behind
 * the others', or a write applied but answered 409 or 5xx. */
static void skew(void)
{
    struct replica *r;
    if (chance(40) && (r = pick(true)) != NULL) {
        bool lag = chance(500);
        fake_transport_set_client_watch_lag_ms(fx.fl.ft, r->client,
                                               lag ? between(1000, 120000) : 0);
        fx.lagged += lag;
    }
    if (chance(60) && (r = pick(true)) != NULL) {
        long status = chance(500) ? 409 : (chance(500) ? 500 : 504);
        fake_transport_fault_add_for(
            fx.fl.ft, r->client, NULL, chance(500) ? "PUT" : "POST",
            (struct fake_transport_fault){
                .kind = FAKE_TRANSPORT_APPLIED_STATUS, .status = status, .count = 1});
        fx.applied_errors++;
    }
}

/* One second's worth of random faults. */
/* A second process of r's identity starts while r runs: a StatefulSet Pod
 * force-deleted on a partitioned node comes back under the same name.
 * Mostly r is cut off from the API server meanwhile, alive. */
static void start_twin(struct replica *r)
{
    struct replica *q = pick(false);
    if (!q && fx.n < MAX_REPLICAS) {
        q = &fx.r[fx.n];
        memset(q, 0, sizeof(*q));
        snprintf(q->home_id, sizeof(q->home_id), "r%u", (unsigned)fx.n);
        fx.n++;
    }
    if (!q)
        return;
    if (chance(700))
        fake_transport_fault_add_for(
            fx.fl.ft, r->client, NULL, FAKE_TRANSPORT_VERB_ANY,
            (struct fake_transport_fault){.kind = FAKE_TRANSPORT_HANG,
                                          .count = -1,
                                          .until_ms =
                                              now() + between(LEASE_MS, 4 * LEASE_MS)});
    memcpy(q->id, r->id, sizeof(q->id));
    start(q);
    fx.twins++;
}

/* The faults stopped: the node of every twin's older process is back and
 * its kubelet kills that process (the older one, the orphan). */
static void end_twins(void)
{
    for (size_t i = 0; i < fx.n; i++)
        for (size_t j = 0; j < fx.n && fx.r[i].running; j++)
            if (j != i && fx.r[j].running && strcmp(fx.r[i].id, fx.r[j].id) == 0 &&
                fx.r[i].client < fx.r[j].client)
                kill_replica(&fx.r[i]);
}

static void disturb(void)
{
    struct replica *r;
    if (!getenv("SIM_NO_OUTSIDE"))
        outside_actor();
    if (!getenv("SIM_NO_SKEW"))
        skew();
    if (chance(40) && (r = pick(true)) != NULL && now() >= r->paused_until_ms) {
        pause_until(r, now() + between(500, 2 * LEASE_MS));
        fx.pauses++;
    }
    if (chance(12) && running() > 1 && (r = pick(true)) != NULL && !r->stopping) {
        kill_replica(r);
        fx.kills++;
    }
    if (chance(6) && running() > 1 && (r = pick(true)) != NULL && !r->stopping) {
        ld_shell_stop(r->fr.sh, SIGTERM);
        r->stopping = true;
        pause_until(r, 0);
        fx.stops++;
    }
    if (chance(40) && fx.clients < MAX_STARTS && (r = pick(false)) != NULL) {
        memcpy(r->id, r->home_id, sizeof(r->id));
        start(r);
        fx.restarts++;
    }
    if (chance(8) && !getenv("SIM_NO_TWINS") && fx.clients < MAX_STARTS &&
        (r = pick(true)) != NULL && !r->stopping)
        start_twin(r);
    if (chance(60))
        set_watch_latency(chance(400) ? between(1000, 2 * LEASE_MS) : between(1, 500));
    if (chance(60))
        set_latency(between(1, 400));
    if (chance(100) && (r = pick(true)) != NULL && now() >= r->paused_until_ms)
        slow_lists(r, now() + between(1000, 2 * LEASE_MS));
    if (chance(40))
        delete_member(&fx.r[next_rand() % fx.n]);
    if (chance(60) && (r = pick(true)) != NULL) {
        /* Its next write is answered after its timeout and lands late. */
        fake_transport_fault_add_for(
            fx.fl.ft, r->client, NULL, "PUT",
            (struct fake_transport_fault){.kind = FAKE_TRANSPORT_DELAY,
                                          .delay_ms = between(6000, 14000),
                                          .count = 1});
        fx.late_writes++;
    }
    if (chance(100) && (r = pick(true)) != NULL && !r->stopping && app_drained(r))
        fx.drained++; /* the app cut a drain short */
    if (chance(30) && (r = pick(true)) != NULL) {
        /* Its reads alone hang (its writes go through): with a lagging
         * watch its view of the others goes stale while it still leads. */
        fake_transport_fault_add_for(
            fx.fl.ft, r->client, NULL, "LIST",
            (struct fake_transport_fault){.kind = FAKE_TRANSPORT_HANG,
                                          .count = -1,
                                          .until_ms =
                                              now() + between(1000, 2 * LEASE_MS)});
        fx.blind++;
    }
    if (chance(20) && (r = pick(true)) != NULL) {
        fake_transport_fault_add_for(
            fx.fl.ft, r->client, NULL, FAKE_TRANSPORT_VERB_ANY,
            (struct fake_transport_fault){.kind = FAKE_TRANSPORT_HANG,
                                          .count = -1,
                                          .until_ms =
                                              now() + between(1000, 2 * LEASE_MS)});
        fx.partitions++;
    }
}

/* Every shard stored as held, and claimed, by a running replica, each with
 * floor or ceil of N / running. */
static bool settled(void)
{
    size_t m = running();
    int held[MAX_REPLICAS] = {0};
    int64_t t = now();
    bool ok = m > 0;
    for (uint32_t k = 0; ok && k < N_SHARDS; k++) {
        char holder[LD_LEASE_MAX_HOLDER + 1];
        stored_holder(k, holder, sizeof(holder));
        size_t i = 0;
        while (i < fx.n && !(fx.r[i].running && strcmp(fx.r[i].id, holder) == 0))
            i++;
        if (i == fx.n)
            return false;
        struct ld_shardsnap *table = ld_state_read_shards(&fx.r[i].fr.state, NULL);
        ok = ld_shardsnap_leads(table, k, t);
        ld_shardsnap_unref(table);
        held[i]++;
    }
    for (size_t i = 0; ok && i < fx.n; i++)
        if (fx.r[i].running &&
            (held[i] < (int)(N_SHARDS / m) || held[i] > (int)((N_SHARDS + m - 1) / m)))
            ok = false;
    return ok;
}

/* Seeds to run: LD_SIM_SEEDS (make sim-deep), else SEEDS. */
static uint64_t seed_count(void)
{
    const char *e = getenv("LD_SIM_SEEDS");
    unsigned long long n = e ? strtoull(e, NULL, 10) : 0;
    return n > 0 ? (uint64_t)n : SEEDS;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(no_shard_ever_has_two_owners_and_the_group_settles)
{
    size_t n_regressions = sizeof(regression_seeds) / sizeof(regression_seeds[0]);
    uint64_t n_seeds = seed_count();
    double t0 = wall_s();
    /* LD_SIM_FROM=S starts at seed S (to replay one: LD_SIM_SEEDS=1). */
    const char *from = getenv("LD_SIM_FROM");
    uint64_t first = from ? strtoull(from, NULL, 10) : 1;
    for (uint64_t run = 1; run <= n_seeds + n_regressions; run++) {
        uint64_t seed =
            run <= n_seeds ? first + run - 1 : regression_seeds[run - n_seeds - 1];
        setup_seed(seed);
        int64_t end = now() + CHAOS_MS;
        int64_t next_fault = now() + 1000;
        for (int64_t i = 0; i < CHAOS_MS / STEP_MS * 2 && now() < end; i++) {
            if (now() >= next_fault) {
                disturb();
                next_fault = now() + 1000;
            }
            turn_all();
            look_for_lists();
        }
        /* The faults stop; every replica runs again. */
        fake_transport_fault_clear(fx.fl.ft);
        set_latency(1);
        set_watch_latency(1);
        for (size_t i = 0; i < fx.n; i++) {
            pause_until(&fx.r[i], 0);
            fx.r[i].slow_lists_until_ms = 0;
        }
        for (int c = 0; c <= fx.clients; c++)
            fake_transport_set_client_watch_lag_ms(fx.fl.ft, c, 0);
        end_twins();
        if (running() == 0) {
            struct replica *r = &fx.r[0];
            if (r->running) /* still stopping: let it finish */
                for (int k = 0; k < 10000 && r->running; k++)
                    turn_all();
            start(r);
        }
        end = now() + SETTLE_MS;
        bool ok = false;
        for (int64_t i = 0; i < SETTLE_MS / STEP_MS * 2 && now() < end && !ok; i++) {
            turn_all();
            ok = settled();
        }
        for (size_t i = 0; !ok && getenv("SIM_TRACE") && i < fx.n; i++) {
            if (!fx.r[i].running)
                continue;
            const struct ld_shardgroup *g = ld_mode_shards_group(fx.r[i].fr.mode);
            int64_t t = ld_clock_mono_ms(&fx.r[i].clock);
            for (uint32_t k = 0; k < N_SHARDS; k++) {
                const struct ld_lease *rec = ld_shardgroup_record(g, k);
                fprintf(
                    stderr, "%s k%u target %s view %s step %d claimed %d\n", fx.r[i].id,
                    k, ld_shardgroup_target(g, k) ? ld_shardgroup_target(g, k) : "-",
                    rec ? rec->spec.holder : "(absent)",
                    ld_shardgroup_step(g, k, t, false), ld_shardgroup_claimed(g, k, t));
            }
        }
        ck_assert_msg(ok, "seed %llu: not settled %d s after the faults stopped",
                      (unsigned long long)seed, SETTLE_MS / 1000);
        teardown_seed();
    }
    double took = wall_s() - t0;
    printf("shard_protocol: %llu seeds in %.1f s (%.2f seeds/s), %u checks; outside: %u "
           "shard deletes, %u shard edits, %u member edits; %u watch lags, %u writes "
           "applied but answered 409/5xx; %u second processes of one identity\n",
           (unsigned long long)n_seeds + (unsigned long long)n_regressions, took,
           (double)(n_seeds + n_regressions) / (took > 0 ? took : 1), fx.checks,
           fx.shards_deleted, fx.shards_edited, fx.members_edited, fx.lagged,
           fx.applied_errors, fx.twins);
    /* The schedules did what they are for (over the default seeds at
     * least; a replay of one seed proves nothing of the kind). */
    if (n_seeds < SEEDS)
        return;
    ck_assert_uint_ge(fx.pauses, 50);
    ck_assert_uint_ge(fx.kills, 5);
    ck_assert_uint_ge(fx.restarts, 5);
    ck_assert_uint_ge(fx.stops, 3);
    ck_assert_uint_ge(fx.late_writes, 50);
    ck_assert_uint_ge(fx.partitions, 20);
    ck_assert_uint_ge(fx.drained, 3);
    ck_assert_uint_ge(fx.blind, 20);
    ck_assert_uint_ge(fx.slow_lists, 20);
    ck_assert_uint_ge(fx.deleted, 20);
    ck_assert_uint_ge(fx.returns, 10);
    ck_assert_uint_ge(fx.shards_deleted, 20);
    ck_assert_uint_ge(fx.shards_edited, 20);
    ck_assert_uint_ge(fx.members_edited, 10);
    ck_assert_uint_ge(fx.lagged, 20);
    ck_assert_uint_ge(fx.applied_errors, 50);
    ck_assert_uint_ge(fx.twins, 5);
}
END_TEST

/* The shards replica r claims at now. */
static int claims_of(struct replica *r)
{
    struct ld_shardsnap *table = ld_state_read_shards(&r->fr.state, NULL);
    int n = 0;
    for (uint32_t k = 0; k < N_SHARDS; k++)
        n += ld_shardsnap_leads(table, k, now());
    ld_shardsnap_unref(table);
    return n;
}

/* Turns every replica for ms of fake time. */
static void run_for(int64_t ms)
{
    for (int64_t end = now() + ms; now() < end;)
        turn_all();
}

/* A fresh seed with three replica slots named id0, id1 and id2, of which
 * the first two run, settled. */
static void two_of_three(uint64_t seed, const char *id0, const char *id1, const char *id2)
{
    setup_seed(seed);
    for (size_t i = 0; i < fx.n; i++)
        kill_replica(&fx.r[i]);
    fx.n = 3;
    snprintf(fx.r[0].id, sizeof(fx.r[0].id), "%s", id0);
    snprintf(fx.r[1].id, sizeof(fx.r[1].id), "%s", id1);
    snprintf(fx.r[2].id, sizeof(fx.r[2].id), "%s", id2);
    start(&fx.r[0]);
    start(&fx.r[1]);
    for (int64_t end = now() + SETTLE_MS; now() < end && !settled();)
        turn_all();
    ck_assert(settled());
}

/* Issue #28: a StatefulSet Pod force-deleted on a partitioned node comes
 * back under the same name while the old process still runs. The first
 * process of identity "a" (r0) is cut off from the API server, alive, and
 * a second one (r2) starts at once: it takes the member Lease and r0's
 * shards over, but only after r0's claims ended (before incarnations it
 * resumed the member Lease after two retry periods and claimed r0's shards
 * while r0 still claimed them). When r0 reaches the API again it finds
 * its identity's records written by another incarnation and claims
 * nothing any more. Then a third process of "a" (r3 in r0's place)
 * starts next to a live r2: it claims nothing while r2 renews.
 * check_exclusive runs after every turn of every replica. */
START_TEST(two_processes_of_one_identity_never_claim_the_same_shard)
{
    two_of_three(1000, "a", "b", "a");
    int of_a = claims_of(&fx.r[0]);
    ck_assert_int_ge(of_a, N_SHARDS / 2);
    /* Mid-way between two renewals of r0's member Lease. */
    run_for(RETRY_MS / 2);

    /* r0 is cut off from the API server, alive; its successor starts. */
    fake_transport_fault_add_for(
        fx.fl.ft, fx.r[0].client, NULL, FAKE_TRANSPORT_VERB_ANY,
        (struct fake_transport_fault){
            .kind = FAKE_TRANSPORT_HANG, .count = -1, .until_ms = now() + 6 * LEASE_MS});
    int64_t cut = now(), took = -1;
    start(&fx.r[2]);
    for (int64_t end = now() + 5 * LEASE_MS; now() < end;) {
        turn_all();
        if (took < 0 && claims_of(&fx.r[2]) > 0)
            took = now() - cut;
    }
    /* r2 counts the lease duration on its own clock, which may run up to
     * DRIFT_PPM fast. */
    int64_t least = (int64_t)LEASE_MS * 1000000 / (1000000 + DRIFT_PPM);
    ck_assert_msg(took >= least, "took over %lld ms after the cut, before %lld ms",
                  (long long)took, (long long)least);
    ck_assert_int_eq(claims_of(&fx.r[0]), 0);
    ck_assert_int_eq(claims_of(&fx.r[2]), of_a);

    /* r0 reaches the API again: it never claims its identity's records. */
    fake_transport_fault_clear(fx.fl.ft);
    for (int64_t end = now() + 4 * LEASE_MS; now() < end;) {
        turn_all();
        ck_assert_int_eq(claims_of(&fx.r[0]), 0);
    }
    ck_assert_int_eq(claims_of(&fx.r[2]), of_a);

    /* Vice versa: a new process of "a" next to a live r2 claims nothing. */
    kill_replica(&fx.r[0]);
    start(&fx.r[0]);
    for (int64_t end = now() + 4 * LEASE_MS; now() < end;) {
        turn_all();
        ck_assert_int_eq(claims_of(&fx.r[0]), 0);
    }
    ck_assert_int_eq(claims_of(&fx.r[2]), of_a);
    teardown_seed();
}
END_TEST

/* Issue #28, identity reuse with a deleted member Lease: r0 ("a") is cut
 * off from the API server, alive, and claims its shards until its renew
 * deadline; a second process of "a" (r2) stands by behind r0's member
 * record, which someone then deletes by hand. r2 creates the member Lease
 * at once, but takes r0's shards only a lease duration after it saw the
 * Lease gone: a deletion says nothing of when r0 stops (before, r2 took
 * them within a moment, while r0 still claimed them: "shard 0 claimed by
 * a and a"). check_exclusive runs after every turn of every replica. */
START_TEST(a_member_lease_deleted_under_two_processes_of_one_identity)
{
    two_of_three(1001, "a", "b", "a");
    int of_a = claims_of(&fx.r[0]);
    ck_assert_int_ge(of_a, N_SHARDS / 2);

    fake_transport_fault_add_for(
        fx.fl.ft, fx.r[0].client, NULL, FAKE_TRANSPORT_VERB_ANY,
        (struct fake_transport_fault){
            .kind = FAKE_TRANSPORT_HANG, .count = -1, .until_ms = now() + 6 * LEASE_MS});
    start(&fx.r[2]);
    run_for(2 * RETRY_MS); /* r2 reads r0's record and stands by */
    ck_assert_int_eq(claims_of(&fx.r[2]), 0);
    ck_assert_int_gt(claims_of(&fx.r[0]), 0);
    ck_assert(fake_transport_lease_delete(fx.fl.ft, GROUP "-member-a"));
    int64_t deleted = now(), took = -1;
    for (int64_t end = now() + 4 * LEASE_MS; now() < end;) {
        turn_all();
        if (took < 0 && claims_of(&fx.r[2]) > 0)
            took = now() - deleted;
    }
    int64_t least = (int64_t)LEASE_MS * 1000000 / (1000000 + DRIFT_PPM);
    ck_assert_msg(took >= least, "took over %lld ms after the deletion, before %lld ms",
                  (long long)took, (long long)least);
    ck_assert_int_eq(claims_of(&fx.r[0]), 0);
    ck_assert_int_eq(claims_of(&fx.r[2]), of_a);
    teardown_seed();
}
END_TEST

/* A replica's process dies holding its shards and a new process of its
 * name starts as a third member joins: the new "a" keeps its quota of the
 * old process's shards, and the rest go to the newcomer. The newcomer sees
 * those shards held by "a", a live member, but written by another process
 * of "a" than the one that holds a's member Lease: it takes them on the
 * absence rule (before, it waited for "a" to give them back, and the new
 * "a", which never held them, never did: the group never settled). */
START_TEST(shards_of_a_replaced_process_move_to_another_member)
{
    two_of_three(1002, "a", "b", "c");
    ck_assert_int_gt(claims_of(&fx.r[0]), (N_SHARDS + 2) / 3);

    kill_replica(&fx.r[0]); /* no release: a crash */
    start(&fx.r[0]);
    start(&fx.r[2]);
    for (int64_t end = now() + SETTLE_MS; now() < end && !settled();)
        turn_all();
    ck_assert_msg(settled(), "not settled %d s after the restart", SETTLE_MS / 1000);
    ck_assert_int_gt(claims_of(&fx.r[2]), 0);
    teardown_seed();
}
END_TEST

static Suite *shard_protocol_suite(void)
{
    Suite *s = suite_create("shard_protocol");
    TCase *tc = tcase_create("simulation");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, no_shard_ever_has_two_owners_and_the_group_settles);
    tcase_add_test(tc, two_processes_of_one_identity_never_claim_the_same_shard);
    tcase_add_test(tc, a_member_lease_deleted_under_two_processes_of_one_identity);
    tcase_add_test(tc, shards_of_a_replaced_process_move_to_another_member);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(shard_protocol_suite());
}
