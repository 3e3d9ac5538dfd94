/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_mode_shards: the daemon's shard mode (cmd/leaderd/shell/mode_shards.h) in
 * the shell, two or three replicas on one in-memory Lease API
 * (support/fake_transport), each with its own client, state and shell, all
 * on the fake's clock and taking turns as processes would. Who owns which
 * shard is read from the API's store, never from the replicas' own word:
 * the replicas share the shards evenly and keep them, a SIGTERM gives back
 * every shard and deletes the member Lease with preconditions, the
 * members still find each other by listing while the watch is down, a
 * long-expired member Lease is deleted on the uid and resourceVersion of
 * the record judged (a rewrite meanwhile makes the DELETE fail), and a
 * shard's release waits for its hooks' safety holds, asked only once the
 * table shows the claim ended, and is not written past the renew
 * deadline; and the published table is rebuilt only when something in it
 * changed.
 */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#define N_SHARDS 12
#define MAX_REPLICAS 3
#define WALL0_US FLEET_WALL0_US
#define LEASE_MS FLEET_LEASE_MS
#define RENEW_MS FLEET_RENEW_MS
#define RETRY_MS FLEET_RETRY_MS
#define CALL_TIMEOUT_MS 5000
/* Fake time per turn of one replica. */
#define STEP_MS 20
/* The loop publishes at least this often (mode_shards.c). */
#define HEARTBEAT_MS 1000

struct replica {
    char id[16];
    struct fleet_replica fr; /* its client, state, metrics, mode and shell */
    bool done;
};

static struct {
    struct fleet fl; /* its fake is owned by the replicas' clients */
    struct replica r[MAX_REPLICAS];
    size_t n;
    int64_t drain_ms;  /* for the replicas added from now on */
    uint32_t n_shards; /* the same; 0: N_SHARDS */
} fx;

static int64_t now(void)
{
    return fleet_now(&fx.fl);
}

static void setup(void)
{
    memset(&fx, 0, sizeof(fx));
    fleet_init(&fx.fl, STEP_MS, NULL);
}

static void teardown(void)
{
    for (size_t i = 0; i < fx.n; i++) {
        fleet_replica_stop(&fx.r[i].fr);
    }
    fleet_destroy(&fx.fl);
}

/* Starts replica "r<n>" on client n of the fake (r0 on the first), with
 * seed 17 + the number of replicas, itself included. */
static struct replica *add_replica(void)
{
    ck_assert_uint_lt(fx.n, MAX_REPLICAS);
    struct replica *r = &fx.r[fx.n];
    snprintf(r->id, sizeof(r->id), "r%zu", fx.n);
    struct ld_transport *client = fx.n == 0 ? fake_transport_transport(fx.fl.ft)
                                            : fake_transport_add_client(fx.fl.ft);
    fx.n++;
    struct fleet_shards_config c = {
        .client = client,
        .clock = &fx.fl.clock,
        .group = GROUP,
        .identity = r->id,
        .n_shards = fx.n_shards ? fx.n_shards : N_SHARDS,
        .drain_ms = fx.drain_ms,
        .seed = 17 + fx.n,
        .call_timeout_ms = CALL_TIMEOUT_MS,
    };
    fleet_replica_start_shards(&r->fr, &c);
    return r;
}

static const struct ld_shardgroup *group(void)
{
    return ld_mode_shards_group(fx.r[0].fr.mode);
}

/* One turn of every replica still running, in order. */
static void turn_all(void)
{
    for (size_t i = 0; i < fx.n; i++) {
        if (!fx.r[i].done)
            fx.r[i].done = ld_shell_turn(fx.r[i].fr.sh, STEP_MS);
    }
}

/* turn_all for the rig's loops, which go on when every replica is done
 * (the tests' predicates see that). */
static bool loop_turn(int64_t left_ms)
{
    (void)left_ms;
    turn_all();
    return false;
}

static void run_for(int64_t ms)
{
    fleet_run_for(&fx.fl, ms, loop_turn);
}

static bool run_until(bool (*pred)(void), int64_t max_ms)
{
    return fleet_run_until(&fx.fl, pred, max_ms, loop_turn);
}

static const char *holder_of(const char *lease)
{
    return fleet_holder(&fx.fl, lease);
}

/* Shards whose stored Lease names id. */
static int owned_by(const char *id)
{
    int n = 0;
    for (uint32_t k = 0; k < N_SHARDS; k++)
        n += strcmp(holder_of(ld_shardgroup_shard_lease(group(), k)), id) == 0;
    return n;
}

/* Every shard held, each running replica holding N / running of them. */
static bool balanced(void)
{
    int running = 0, held = 0;
    for (size_t i = 0; i < fx.n; i++)
        running += !fx.r[i].done;
    if (running == 0)
        return false;
    for (size_t i = 0; i < fx.n; i++) {
        int own = owned_by(fx.r[i].id);
        if (own != (fx.r[i].done ? 0 : N_SHARDS / running))
            return false;
        held += own;
    }
    return held == N_SHARDS;
}

static int32_t total_transitions(void)
{
    int32_t t = 0;
    for (uint32_t k = 0; k < N_SHARDS; k++) {
        struct ld_lease l;
        ck_assert_int_eq(
            fake_transport_lease_get(fx.fl.ft, ld_shardgroup_shard_lease(group(), k), &l),
            LD_OK);
        t += l.spec.transitions;
        ld_lease_clear(&l);
    }
    return t;
}

/* LISTs of the group by client (-1: any) submitted at or after since_ms. */
static size_t lists(int client, int64_t since_ms)
{
    size_t n = 0;
    for (size_t i = 0; i < fake_transport_record_count(fx.fl.ft); i++) {
        const struct fake_transport_record *r = fake_transport_record(fx.fl.ft, i);
        n += strcmp(r->verb, "LIST") == 0 && r->at_ms >= since_ms &&
             (client < 0 || r->client == client);
    }
    return n;
}

/* The first release write (a PUT with an empty holder) of lease by client
 * at or after since_ms, or NULL. */
static const struct fake_transport_record *release_of(const char *lease, int client,
                                                      int64_t since_ms)
{
    return fleet_release_of(&fx.fl, lease, client, since_ms);
}

START_TEST(three_replicas_share_the_shards_evenly_and_keep_them)
{
    for (int i = 0; i < 3; i++)
        add_replica();
    ck_assert_msg(run_until(balanced, 60000), "not balanced: %d %d %d", owned_by("r0"),
                  owned_by("r1"), owned_by("r2"));
    /* Once balanced, nothing moves, and with the watch up nobody lists. */
    run_for(RETRY_MS);
    int32_t transitions = total_transitions();
    int64_t t = now();
    run_for(30000);
    ck_assert(balanced());
    ck_assert_int_eq(total_transitions(), transitions);
    ck_assert_uint_eq(lists(-1, t), 0);
    /* Each replica's table: every shard observed, the three live members. */
    for (size_t i = 0; i < fx.n; i++) {
        struct ld_snapshot snap;
        struct ld_shardsnap *table = ld_state_read_shards(&fx.r[i].fr.state, &snap);
        ck_assert_ptr_nonnull(table);
        ck_assert(table->observed);
        ck_assert(snap.observed);
        ck_assert_uint_eq(table->n_members, 3);
        ck_assert_int_le(now() - snap.heartbeat_ms, 1000 + STEP_MS * MAX_REPLICAS);
        ck_assert_str_eq(snap.health_error, "");
        ld_shardsnap_unref(table);
        ck_assert(!fx.r[i].done);
    }
}
END_TEST

START_TEST(sigterm_releases_every_shard_and_deletes_the_member_lease)
{
    for (int i = 0; i < 3; i++)
        add_replica();
    ck_assert(run_until(balanced, 60000));
    run_for(RETRY_MS);
    struct replica *r2 = &fx.r[2];
    const char *member = ld_shardgroup_member_lease(ld_mode_shards_group(r2->fr.mode));
    struct ld_lease before;
    ck_assert_int_eq(fake_transport_lease_get(fx.fl.ft, member, &before), LD_OK);
    ck_assert_str_eq(before.spec.holder, "r2");
    uint32_t held[N_SHARDS];
    size_t n_held = 0;
    for (uint32_t k = 0; k < N_SHARDS; k++)
        if (strcmp(holder_of(ld_shardgroup_shard_lease(group(), k)), "r2") == 0)
            held[n_held++] = k;
    ck_assert_uint_eq(n_held, N_SHARDS / 3);

    int64_t t = now();
    ld_shell_stop(r2->fr.sh, SIGTERM);
    for (int i = 0; i < 10000 && !r2->done; i++)
        turn_all();
    ck_assert(r2->done);
    /* Released at once (no hook holds them), each shard by its own write. */
    for (size_t i = 0; i < n_held; i++) {
        const struct fake_transport_record *rel =
            release_of(ld_shardgroup_shard_lease(group(), held[i]), 2, t);
        ck_assert_msg(rel != NULL, "shard %u not released", held[i]);
        ck_assert_int_le(rel->at_ms - t, 100);
        ck_assert_int_eq(rel->status, 200);
    }
    ck_assert_ptr_nonnull(release_of(member, 2, t));
    /* Then the member Lease is deleted, with preconditions naming what r2
     * last saw of it (its release's uid and resourceVersion). */
    size_t deletes = 0;
    for (size_t i = 0; i < fake_transport_record_count(fx.fl.ft); i++) {
        const struct fake_transport_record *rec = fake_transport_record(fx.fl.ft, i);
        if (strcmp(rec->verb, "DELETE") != 0)
            continue;
        deletes++;
        ck_assert_str_eq(rec->name, member);
        ck_assert_int_eq(rec->client, 2);
        ck_assert_int_eq(rec->status, 200);
        ck_assert_ptr_nonnull(strstr(rec->body, "\"preconditions\""));
        ck_assert_ptr_nonnull(strstr(rec->body, before.uid));
        ck_assert_ptr_nonnull(strstr(rec->body, "\"resourceVersion\""));
    }
    ck_assert_uint_eq(deletes, 1);
    ck_assert_str_eq(holder_of(member), "(absent)");
    ld_lease_clear(&before);
    /* The other two take r2's shards over at once: 6 each. */
    ck_assert_msg(run_until(balanced, 3 * RETRY_MS), "not rebalanced: %d %d %d",
                  owned_by("r0"), owned_by("r1"), owned_by("r2"));
    ck_assert_int_le(now() - t, 3 * RETRY_MS);
}
END_TEST

START_TEST(members_are_listed_while_the_watch_is_down)
{
    fake_transport_fault_add(fx.fl.ft, NULL, "WATCH",
                             (struct fake_transport_fault){.kind = FAKE_TRANSPORT_FAIL,
                                                           .rc = LD_ECONNECT,
                                                           .count = -1});
    add_replica();
    add_replica();
    ck_assert_msg(run_until(balanced, 60000), "not balanced: %d %d", owned_by("r0"),
                  owned_by("r1"));
    /* Without a watch each replica lists the group every retry period. */
    int64_t t = now();
    run_for(10 * RETRY_MS);
    for (int c = 0; c < 2; c++) {
        size_t n = lists(c, t);
        ck_assert_msg(n >= 8 && n <= 12, "replica %d listed %zu times in 10 periods", c,
                      n);
    }
    ck_assert(balanced());
    /* The members keep seeing each other: nobody counts itself alone. */
    for (size_t i = 0; i < fx.n; i++) {
        struct ld_shardsnap *table = ld_state_read_shards(&fx.r[i].fr.state, NULL);
        ck_assert_ptr_nonnull(table);
        ck_assert_uint_eq(table->n_members, 2);
        ld_shardsnap_unref(table);
    }
    /* Once the watch works again, the listing stops. Its restarts back off
     * up to 30 s (host.c), and where in that the fault ends depends on
     * how long the first balance took (a new group's shards wait a lease
     * duration, see shard-protocol.md "Changed from outside"). */
    fake_transport_fault_clear(fx.fl.ft);
    run_for(LEASE_MS + 30000);
    t = now();
    run_for(5 * RETRY_MS);
    ck_assert_uint_eq(lists(-1, t), 0);
    ck_assert(balanced());
}
END_TEST

/* The shards replica r claims now. */
static int claims_of(struct replica *r)
{
    int n = 0;
    struct ld_shardsnap *table = ld_state_read_shards(&r->fr.state, NULL);
    for (uint32_t k = 0; table && k < table->n_shards; k++)
        n += ld_shardsnap_leads(table, k, now());
    ld_shardsnap_unref(table);
    return n;
}

static bool r0_claims_all(void)
{
    return claims_of(&fx.r[0]) == N_SHARDS;
}

/* Every running replica claims what its Leases name: a new group's shard
 * Leases are claimed a lease duration and the drain after they are made
 * (rule O9 of docs/design/shard-protocol.md). */
static bool claims_match_holders(void)
{
    for (size_t i = 0; i < fx.n; i++)
        if (!fx.r[i].done && claims_of(&fx.r[i]) != owned_by(fx.r[i].id))
            return false;
    return true;
}

static bool r0_holds_all(void)
{
    return owned_by("r0") == N_SHARDS;
}

static bool r0_gave_back(void)
{
    return owned_by("r0") == N_SHARDS / 2;
}

/* The shards replica r reports it cannot write, in its table. */
static int unwritable_of(struct replica *r, int *skipped)
{
    int n = 0;
    struct ld_shardsnap *table = ld_state_read_shards(&r->fr.state, NULL);
    *skipped = 0;
    for (uint32_t k = 0; table && k < table->n_shards; k++) {
        n += table->shards[k].unwritable;
        *skipped += table->shards[k].skipped;
    }
    ld_shardsnap_unref(table);
    return n;
}

static bool r1_reports_its_quota(void)
{
    int skipped;
    return unwritable_of(&fx.r[1], &skipped) == N_SHARDS / 2;
}

/* A replica whose shard writes are all refused (RBAC, say) while its
 * member Lease renews would keep its quota unowned for ever. After a lease
 * duration it reports those shards in its member Lease
 * (leaderd.io/unwritable), and every replica's assignment gives them to a
 * member that can write them: r0 takes everything, and r1 stays a member
 * (before, it stepped out of the group for a while, and came back to fail
 * again; with a shard nobody can write every member did so in turn). */
START_TEST(a_replica_that_cannot_write_its_shards_hands_them_on)
{
    add_replica();
    add_replica();
    for (uint32_t k = 0; k < N_SHARDS; k++) {
        const char *lease = ld_shardgroup_shard_lease(group(), k);
        struct fake_transport_fault refused = {
            .kind = FAKE_TRANSPORT_STATUS, .status = 403, .count = -1};
        fake_transport_fault_add_for(fx.fl.ft, 1, lease, "PUT", refused);
        fake_transport_fault_add_for(fx.fl.ft, 1, lease, "POST", refused);
    }
    /* Once r0 counts r1, it gives r1's quota back; r1 cannot take it. */
    ck_assert(run_until(r0_gave_back, 2 * LEASE_MS));
    int64_t t = now();
    ck_assert_int_eq(owned_by("r1"), 0);
    ck_assert(run_until(r1_reports_its_quota, 2 * LEASE_MS));
    ck_assert_int_ge(now() - t, LEASE_MS);
    /* What the group then gives r1 instead it reports too, a lease
     * duration later each time, until r0 holds everything. */
    ck_assert_msg(run_until(r0_holds_all, 8 * LEASE_MS), "r0 holds %d", owned_by("r0"));
    ck_assert(run_until(r0_claims_all, 2 * LEASE_MS));
    /* r1 is still a member, in every table, and says why on /metrics. */
    struct ld_shardsnap *table = ld_state_read_shards(&fx.r[0].fr.state, NULL);
    ck_assert_uint_eq(table->n_members, 2);
    ld_shardsnap_unref(table);
    ck_assert_str_eq(
        holder_of(ld_shardgroup_member_lease(ld_mode_shards_group(fx.r[1].fr.mode))),
        "r1");
    struct ld_snapshot snap;
    ld_state_read(&fx.r[1].fr.state, &snap);
    ck_assert_str_eq(snap.health_error, "");
    struct ld_shardsnap *t1 = ld_state_read_shards(&fx.r[1].fr.state, NULL);
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(ld_metrics_render_shards(&fx.r[1].fr.metrics, &snap,
                                              ld_shardgroup_layout(group()), t1, now(),
                                              &text, &len),
                     0);
    ld_shardsnap_unref(t1);
    char want[128];
    int skipped, unwritable = unwritable_of(&fx.r[1], &skipped);
    ck_assert_int_ge(unwritable, N_SHARDS / 2);
    ck_assert_int_eq(skipped, 0);
    snprintf(want, sizeof(want), "leaderd_shards_unwritable %d\n", unwritable);
    const char *seen = strstr(text, "\nleaderd_shards_unwritable ");
    ck_assert_msg(strstr(text, want) != NULL, "%.60s", seen ? seen + 1 : "(none)");
    ck_assert_ptr_nonnull(strstr(text, "leaderd_shard_unwritable{name=\"" GROUP "-"));
    ck_assert_ptr_nonnull(strstr(text, "leaderd_shards_skipped 0\n"));
    free(text);
    /* Stable: nothing moves while the reports last. */
    run_for(3 * LEASE_MS);
    ck_assert_int_eq(owned_by("r0"), N_SHARDS);
    ck_assert_int_eq(claims_of(&fx.r[0]), N_SHARDS);
}
END_TEST

/* A replica whose shard writes all time out (not refused) while its member
 * Lease renews steps out of the group for a while instead, says why on
 * /healthz, and the other takes everything. */
START_TEST(a_replica_whose_shard_writes_fail_steps_out)
{
    add_replica();
    add_replica();
    for (uint32_t k = 0; k < N_SHARDS; k++) {
        const char *lease = ld_shardgroup_shard_lease(group(), k);
        struct fake_transport_fault hung = {.kind = FAKE_TRANSPORT_HANG, .count = -1};
        fake_transport_fault_add_for(fx.fl.ft, 1, lease, "PUT", hung);
        fake_transport_fault_add_for(fx.fl.ft, 1, lease, "POST", hung);
    }
    ck_assert(run_until(r0_gave_back, 2 * LEASE_MS));
    int64_t t = now();
    ck_assert_msg(run_until(r0_holds_all, 3 * LEASE_MS), "r0 holds %d", owned_by("r0"));
    ck_assert_int_ge(now() - t, LEASE_MS);
    struct ld_snapshot snap;
    ld_state_read(&fx.r[1].fr.state, &snap);
    ck_assert_msg(strstr(snap.health_error, "has not been owned") != NULL, "%s",
                  snap.health_error);
    ck_assert_str_eq(
        holder_of(ld_shardgroup_member_lease(ld_mode_shards_group(fx.r[1].fr.mode))), "");
    int skipped;
    ck_assert_int_eq(unwritable_of(&fx.r[1], &skipped), 0); /* nothing reported */
}
END_TEST

static bool shard0_skipped(void)
{
    int skipped0 = 0, skipped1 = 0;
    unwritable_of(&fx.r[0], &skipped0);
    unwritable_of(&fx.r[1], &skipped1);
    return skipped0 == 1 && skipped1 == 1;
}

/* A shard nobody can write (a webhook refuses its Lease to everyone): each
 * member that is given it reports it in turn, and once all have, it is
 * given to nobody; the other shards stay balanced and nobody leaves. */
START_TEST(a_shard_nobody_can_write_is_given_to_nobody)
{
    add_replica();
    add_replica();
    const char *lease = ld_shardgroup_shard_lease(group(), 0);
    struct fake_transport_fault refused = {
        .kind = FAKE_TRANSPORT_STATUS, .status = 403, .count = -1};
    for (int c = 0; c < 2; c++) {
        fake_transport_fault_add_for(fx.fl.ft, c, lease, "PUT", refused);
        fake_transport_fault_add_for(fx.fl.ft, c, lease, "POST", refused);
    }
    ck_assert(run_until(shard0_skipped, 6 * LEASE_MS));
    ck_assert_ptr_null(ld_shardgroup_target(group(), 0));
    ck_assert(run_until(claims_match_holders, 3 * LEASE_MS));
    ck_assert_int_eq(owned_by("r0") + owned_by("r1"), N_SHARDS - 1);
    int d = owned_by("r0") - owned_by("r1");
    ck_assert_int_le(d < 0 ? -d : d, 1);
    struct ld_shardsnap *table = ld_state_read_shards(&fx.r[0].fr.state, NULL);
    ck_assert_uint_eq(table->n_members, 2);
    ld_shardsnap_unref(table);
}
END_TEST

static uint32_t gap_victim;
static bool victim_unclaimed(void)
{
    struct ld_shardsnap *table = ld_state_read_shards(&fx.r[0].fr.state, NULL);
    bool claimed = table && ld_shardsnap_leads(table, gap_victim, now());
    ld_shardsnap_unref(table);
    return !claimed;
}

/* A stream of the group's watch that starts from the current state (after
 * a 410, say) never shows a DELETED of what went while no stream ran. The
 * watch then confirms nothing until a list sent since is in, so a claim on
 * a shard Lease deleted in that gap ends within a retry period or two, and
 * never outlives the deletion by a lease duration (before, the holder's
 * renewals, shown by the new stream, kept its view confirmed and it
 * claimed the deleted shard for good: sim seed 2). */
START_TEST(a_shard_deleted_between_two_streams_is_not_claimed_for_good)
{
    add_replica();
    ck_assert(run_until(r0_claims_all, 3 * LEASE_MS));
    run_for(2 * RETRY_MS);
    gap_victim = 3;
    fake_transport_watch_gone_all(fx.fl.ft);
    ck_assert(fake_transport_lease_delete(
        fx.fl.ft, ld_shardgroup_shard_lease(group(), gap_victim)));
    int64_t t = now();
    ck_assert_msg(run_until(victim_unclaimed, LEASE_MS), "still claimed %lld ms later",
                  (long long)(now() - t));
    ck_assert_int_le(now() - t, 2 * RETRY_MS + 1000);
    ck_assert_int_eq(claims_of(&fx.r[0]), N_SHARDS - 1);
}
END_TEST

/* --shards changed in a running group: numbered shards map keys to shards
 * by the shard count, so two replicas of two counts could give one key to
 * two apps. Every member Lease says its replica's set
 * (leaderd.io/shard-set); a replica whose set differs from an earlier
 * member's claims nothing, steps out and says why on /healthz, and the
 * earlier member keeps every shard. */
START_TEST(a_replica_running_another_shard_set_claims_nothing)
{
    add_replica();
    ck_assert(run_until(r0_holds_all, 30000));
    fx.n_shards = N_SHARDS * 2;
    struct replica *r1 = add_replica();
    for (int64_t end = now() + 4 * LEASE_MS; now() < end;) {
        turn_all();
        ck_assert_int_eq(claims_of(r1), 0);
    }
    ck_assert_int_eq(claims_of(&fx.r[0]), N_SHARDS);
    ck_assert_int_eq(owned_by("r0"), N_SHARDS);
    struct ld_snapshot snap;
    ld_state_read(&r1->fr.state, &snap);
    char want[64];
    snprintf(want, sizeof(want), "runs another shard set (numbered/%d)", N_SHARDS);
    ck_assert_msg(strstr(snap.health_error, want) != NULL, "%s", snap.health_error);
    struct ld_lease member;
    ld_lease_init(&member);
    ck_assert_int_eq(fake_transport_lease_get(fx.fl.ft, GROUP "-member-r0", &member),
                     LD_OK);
    char *body = ld_lease_encode(&member);
    snprintf(want, sizeof(want), "\"leaderd.io/shard-set\":\"numbered/%d\"", N_SHARDS);
    ck_assert_msg(strstr(body, want) != NULL, "%s", body);
    free(body);
    ld_lease_clear(&member);
}
END_TEST

/* A replica that dies (is no longer run) is evicted and its shards taken;
 * its member Lease, expired for ten lease durations, is then deleted by
 * the survivor with preconditions. */
START_TEST(a_dead_members_lease_is_evicted_then_deleted)
{
    add_replica();
    add_replica();
    ck_assert(run_until(balanced, 60000));
    const char *member =
        ld_shardgroup_member_lease(ld_mode_shards_group(fx.r[1].fr.mode));
    int64_t t = now();
    fx.r[1].done = true; /* never run again: a crash */
    ck_assert_msg(run_until(r0_holds_all, LEASE_MS + 3 * RETRY_MS), "r0 holds %d",
                  owned_by("r0"));
    ck_assert_int_ge(now() - t, LEASE_MS - RETRY_MS);
    struct ld_lease l;
    ck_assert_int_eq(fake_transport_lease_get(fx.fl.ft, member, &l), LD_OK);
    ck_assert_str_eq(l.spec.holder, "");
    ld_lease_clear(&l);
    size_t evictions = 0;
    for (size_t i = 0; i < fake_transport_record_count(fx.fl.ft); i++) {
        const struct fake_transport_record *rec = fake_transport_record(fx.fl.ft, i);
        evictions += strcmp(rec->name, member) == 0 && rec->client == 0 &&
                     strcmp(rec->verb, "PUT") == 0 && rec->status == 200 &&
                     strstr(rec->body, "\"leaderd.io/evicted-by\":\"r0\"") != NULL;
    }
    ck_assert_uint_eq(evictions, 1);
    /* Ten lease durations after it expired, it is deleted. */
    run_for(10 * LEASE_MS + 2 * RETRY_MS);
    ck_assert_str_eq(holder_of(member), "(absent)");
    size_t deletes = 0;
    for (size_t i = 0; i < fake_transport_record_count(fx.fl.ft); i++) {
        const struct fake_transport_record *rec = fake_transport_record(fx.fl.ft, i);
        if (strcmp(rec->verb, "DELETE") != 0)
            continue;
        deletes++;
        ck_assert_str_eq(rec->name, member);
        ck_assert_int_eq(rec->client, 0);
        ck_assert_ptr_nonnull(strstr(rec->body, "\"preconditions\""));
        ck_assert_ptr_nonnull(strstr(rec->body, "\"uid\""));
    }
    ck_assert_uint_eq(deletes, 1);
    ck_assert_int_eq(owned_by("r0"), N_SHARDS);
}
END_TEST

/* The index of the n-th (from 0) DELETE of lease in the log, or
 * fake_transport_record_count when there is none. */
static size_t nth_delete(const char *lease, size_t n)
{
    size_t i = 0;
    for (; i < fake_transport_record_count(fx.fl.ft); i++) {
        const struct fake_transport_record *rec = fake_transport_record(fx.fl.ft, i);
        if (strcmp(rec->verb, "DELETE") == 0 && strcmp(rec->name, lease) == 0 && n-- == 0)
            break;
    }
    return i;
}

static const char *awaited_lease;
static size_t awaited_delete;
static bool delete_sent(void)
{
    return nth_delete(awaited_lease, awaited_delete) <
           fake_transport_record_count(fx.fl.ft);
}

static bool delete_ended(void)
{
    size_t i = nth_delete(awaited_lease, awaited_delete);
    return i < fake_transport_record_count(fx.fl.ft) &&
           fake_transport_record(fx.fl.ft, i)->end_ms >= 0;
}

/* The DELETE logged at index i names uid and rv in its preconditions. */
static void assert_preconditions(size_t i, const char *uid, const char *rv)
{
    json_error_t jerr;
    json_t *body = json_loads(fake_transport_record(fx.fl.ft, i)->body, 0, &jerr);
    ck_assert_msg(body != NULL, "DELETE body: %s", jerr.text);
    json_t *pre = json_object_get(body, "preconditions");
    ck_assert_str_eq(json_string_value(json_object_get(pre, "uid")), uid);
    ck_assert_str_eq(json_string_value(json_object_get(pre, "resourceVersion")), rv);
    json_decref(body);
}

/* The clean-up of a long-expired member Lease deletes exactly the record
 * it judged: its DELETE names the record's uid and resourceVersion, so
 * when the Lease is rewritten while that DELETE is on its way (held by the
 * API), the DELETE fails (409) and the Lease stays. The rewrite is a
 * change, so the count starts over: the next DELETE comes ten lease
 * durations after the rewritten record expired, on its new version. */
START_TEST(the_clean_up_deletes_only_the_record_it_judged_long_expired)
{
    add_replica();
    add_replica();
    ck_assert(run_until(balanced, 60000));
    const char *member =
        ld_shardgroup_member_lease(ld_mode_shards_group(fx.r[1].fr.mode));
    fx.r[1].done = true; /* a crash */
    ck_assert(run_until(r0_holds_all, LEASE_MS + 3 * RETRY_MS));
    /* r0 evicted it: the record r0 judges from then on is the eviction's
     * answer (holder "", leaseDurationSeconds 1), seen when it came. */
    int64_t evicted_ms = -1;
    for (size_t i = 0; i < fake_transport_record_count(fx.fl.ft); i++) {
        const struct fake_transport_record *rec = fake_transport_record(fx.fl.ft, i);
        if (strcmp(rec->name, member) == 0 && rec->client == 0 &&
            strcmp(rec->verb, "PUT") == 0 && rec->status == 200)
            evicted_ms = rec->end_ms;
    }
    ck_assert_int_ge(evicted_ms, 0);
    struct ld_lease rec;
    ck_assert_int_eq(fake_transport_lease_get(fx.fl.ft, member, &rec), LD_OK);
    ck_assert_str_eq(rec.spec.holder, "");
    ck_assert_int_eq(rec.spec.duration_s, 1);
    char uid[128], rv[32];
    snprintf(uid, sizeof(uid), "%s", rec.uid);
    snprintf(rv, sizeof(rv), "%s", rec.resource_version);
    ld_lease_clear(&rec);

    /* The API holds the first DELETE for a retry period (the answer comes
     * well within the call's timeout). */
    fake_transport_fault_add(fx.fl.ft, member, "DELETE",
                             (struct fake_transport_fault){.kind = FAKE_TRANSPORT_DELAY,
                                                           .delay_ms = RETRY_MS,
                                                           .count = 1});
    int64_t due = evicted_ms + 1000 + 10 * LEASE_MS;
    awaited_lease = member;
    awaited_delete = 0;
    ck_assert(run_until(delete_sent, due - now() + 2 * HEARTBEAT_MS));
    size_t first = nth_delete(member, 0);
    ck_assert_int_ge(fake_transport_record(fx.fl.ft, first)->at_ms, due);
    ck_assert_int_le(fake_transport_record(fx.fl.ft, first)->at_ms,
                     due + 2 * HEARTBEAT_MS);
    assert_preconditions(first, uid, rv);

    /* Someone rewrites it meanwhile (as a restarted replica's release
     * would): the held DELETE meets another resourceVersion. */
    fake_transport_lease_put(fx.fl.ft, member, NULL, "", 1,
                             fake_transport_wall_us(fx.fl.ft));
    int64_t rewritten_ms = now();
    ck_assert(run_until(delete_ended, 2 * RETRY_MS));
    ck_assert_int_eq(fake_transport_record(fx.fl.ft, first)->status, 409);
    ck_assert_int_eq(fake_transport_lease_get(fx.fl.ft, member, &rec), LD_OK);
    ck_assert_str_eq(rec.uid, uid);
    ck_assert_str_ne(rec.resource_version, rv);
    snprintf(rv, sizeof(rv), "%s", rec.resource_version);
    ld_lease_clear(&rec);

    /* Fresh again: nothing until it has been expired for ten lease
     * durations once more (the watch shows the rewrite within a turn). */
    awaited_delete = 1;
    due = rewritten_ms + 1000 + 10 * LEASE_MS;
    ck_assert(run_until(delete_ended, due - now() + 2 * HEARTBEAT_MS + RETRY_MS));
    size_t second = nth_delete(member, 1);
    ck_assert_int_ge(fake_transport_record(fx.fl.ft, second)->at_ms, due);
    assert_preconditions(second, uid, rv);
    ck_assert_int_eq(fake_transport_record(fx.fl.ft, second)->status, 200);
    ck_assert_str_eq(holder_of(member), "(absent)");
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "DELETE", NULL, 0), 2);
    ck_assert_int_eq(owned_by("r0"), N_SHARDS);
}
END_TEST

#define DRAIN_MS 3000

/* Shards r0's table shows it claiming now. */
static int claimed_by_r0(void)
{
    int n = 0;
    struct ld_shardsnap *table = ld_state_read_shards(&fx.r[0].fr.state, NULL);
    for (uint32_t k = 0; table && k < N_SHARDS; k++)
        n += ld_shardsnap_leads(table, k, now());
    ld_shardsnap_unref(table);
    return n;
}

static int want_r0_claims;
static bool r0_claims_fewer(void)
{
    return claimed_by_r0() < want_r0_claims;
}

static int want_r0_holds;
static bool r0_holds(void)
{
    return owned_by("r0") == want_r0_holds;
}

/* A give-back ends the claim at once, and the release follows the drain
 * (or the app's word, POST /shards/ID/drained, whichever is first); a
 * graceful exit drains first too. */
START_TEST(a_give_back_waits_for_the_drain_or_the_app)
{
    fx.drain_ms = DRAIN_MS;
    add_replica();
    want_r0_holds = N_SHARDS;
    ck_assert(run_until(r0_holds, 30000));
    ck_assert(run_until(balanced, 30000));
    ck_assert(run_until(r0_claims_all, 30000));
    /* r1 joins: r0 stops claiming half, and the Leases still name it until
     * the drain is over. */
    add_replica();
    want_r0_claims = N_SHARDS;
    ck_assert(run_until(r0_claims_fewer, 30000));
    int64_t t = now();
    ck_assert_int_eq(claimed_by_r0(), N_SHARDS / 2);
    ck_assert_int_eq(owned_by("r0"), N_SHARDS);
    want_r0_holds = N_SHARDS / 2;
    ck_assert(run_until(r0_holds, 2 * DRAIN_MS));
    ck_assert_int_ge(now() - t, DRAIN_MS - STEP_MS * MAX_REPLICAS);
    ck_assert_int_le(now() - t, DRAIN_MS + 500);
    ck_assert(run_until(balanced, 30000));

    /* r2 joins: the app says at once that it drained what r0 gives back;
     * a word naming another term (a late answer to an earlier give-back)
     * is refused and cuts nothing short. */
    add_replica();
    want_r0_claims = N_SHARDS / 2;
    ck_assert(run_until(r0_claims_fewer, 30000));
    struct ld_shardsnap *table = ld_state_read_shards(&fx.r[0].fr.state, NULL);
    for (uint32_t k = 0; k < N_SHARDS; k++) {
        bool claims = ld_shardsnap_leads(table, k, now());
        bool holds = strcmp(holder_of(ld_shardgroup_shard_lease(group(), k)), "r0") == 0;
        if (holds && !claims)
            ck_assert_int_eq(
                ld_state_drained_answer(&fx.r[0].fr.state, k, table->shards[k].term + 1),
                LD_DRAINED_STALE);
    }
    run_for(DRAIN_MS / 2);
    ck_assert_int_eq(owned_by("r0"), N_SHARDS / 2);
    t = now();
    int posted = 0;
    for (uint32_t k = 0; k < N_SHARDS; k++) {
        bool claims = ld_shardsnap_leads(table, k, now());
        bool holds = strcmp(holder_of(ld_shardgroup_shard_lease(group(), k)), "r0") == 0;
        /* Only a shard being given back takes the word (else 409). */
        ck_assert_int_eq(
            ld_state_drained_answer(&fx.r[0].fr.state, k, table->shards[k].term),
            holds && !claims ? LD_DRAINED_NOTED : LD_DRAINED_NOT_GIVING_BACK);
        posted += holds && !claims;
    }
    ld_shardsnap_unref(table);
    ck_assert_int_eq(posted, N_SHARDS / 2 - N_SHARDS / 3);
    want_r0_holds = N_SHARDS / 3;
    ck_assert(run_until(r0_holds, DRAIN_MS));
    ck_assert_int_le(now() - t, 500);
    ck_assert(run_until(balanced, 30000));

    /* SIGTERM: claims end at once, releases after the drain, then the
     * member Lease's release. */
    struct replica *r2 = &fx.r[2];
    const char *member = ld_shardgroup_member_lease(ld_mode_shards_group(r2->fr.mode));
    t = now();
    ld_shell_stop(r2->fr.sh, SIGTERM);
    turn_all();
    struct ld_shardsnap *t2 = ld_state_read_shards(&r2->fr.state, NULL);
    for (uint32_t k = 0; k < N_SHARDS; k++)
        ck_assert(!ld_shardsnap_leads(t2, k, now()));
    ld_shardsnap_unref(t2);
    for (int i = 0; i < 10000 && !r2->done; i++)
        turn_all();
    ck_assert(r2->done);
    int64_t last_shard = 0;
    for (uint32_t k = 0; k < N_SHARDS; k++) {
        const struct fake_transport_record *rel =
            release_of(ld_shardgroup_shard_lease(group(), k), 2, t);
        if (!rel)
            continue;
        ck_assert_int_ge(rel->at_ms - t, DRAIN_MS - STEP_MS);
        last_shard = rel->at_ms > last_shard ? rel->at_ms : last_shard;
    }
    ck_assert_int_gt(last_shard, 0);
    const struct fake_transport_record *mrel = release_of(member, 2, t);
    ck_assert_ptr_nonnull(mrel);
    ck_assert_int_ge(mrel->at_ms, last_shard);
    ck_assert_str_eq(holder_of(member), "(absent)");
}
END_TEST

/* A hook of every shard of r0 (hook.h), as the API write gate's would be:
 * what it was fed, what the published table showed when it was asked
 * about a release, and a safety hold the test turns on and off. */
struct shard_probe {
    bool holding;
    bool forbidding;
    int asked;
    int asked_while_published_leading;
    int fed_leading; /* statuses fed that said the shard is claimed */
    uint32_t shard[N_SHARDS];
};
static struct shard_probe probe;

static bool probe_on_publish(void *ctx, const struct ld_election_status *st,
                             int64_t now_ms)
{
    (void)ctx;
    (void)now_ms;
    probe.fed_leading += st->leading && st->lead_until_ms > now_ms;
    return false;
}

static bool probe_forbids_release(void *ctx, int64_t now_ms)
{
    (void)ctx;
    (void)now_ms;
    return probe.forbidding;
}

static bool probe_holds_release(void *ctx, int64_t now_ms)
{
    uint32_t k = *(const uint32_t *)ctx;
    struct ld_shardsnap *t = ld_state_read_shards(&fx.r[0].fr.state, NULL);
    (void)now_ms;
    probe.asked++;
    if (ld_shardsnap_leads(t, k, now()))
        probe.asked_while_published_leading++;
    ld_shardsnap_unref(t);
    return probe.holding;
}

/* r0, with the probe bound to each of its shards through the mode. */
static struct replica *add_probed_replica(void)
{
    struct ld_errinfo err;
    memset(&probe, 0, sizeof(probe));
    struct replica *r = add_replica();
    for (uint32_t k = 0; k < N_SHARDS; k++) {
        probe.shard[k] = k;
        struct ld_hook h = {.ctx = &probe.shard[k],
                            .on_publish = probe_on_publish,
                            .holds_release = probe_holds_release,
                            .forbids_release = probe_forbids_release,
                            .hold = LD_HOOK_HOLD_SAFETY};
        ck_assert_int_eq(ld_mode_shards_add_shard_hook(r->fr.mode, k, &h, &err), LD_OK);
    }
    ck_assert_int_eq(
        ld_mode_shards_add_shard_hook(r->fr.mode, N_SHARDS, &(struct ld_hook){0}, &err),
        LD_EINVAL);
    return r;
}

/* Releases of r0's shards written since since_ms. */
static int r0_releases(int64_t since_ms)
{
    int n = 0;
    for (uint32_t k = 0; k < N_SHARDS; k++)
        n += release_of(ld_shardgroup_shard_lease(group(), k), 0, since_ms) != NULL;
    return n;
}

/* A give-back's release waits while a hook of the shard holds it (asked
 * only once the table shows the claim ended), and is written when the hold
 * ends. Its bound is the member election's term, which every member
 * renewal extends: a hold that outlasts the renew deadline from the
 * claim's end is still waited for (nobody can take the shard while its
 * record names a live member), not given up. */
START_TEST(a_give_back_waits_for_a_safety_hold_while_the_member_term_lasts)
{
    add_probed_replica();
    want_r0_holds = N_SHARDS;
    ck_assert(run_until(r0_holds, 30000));
    ck_assert(run_until(r0_claims_all, 30000));
    ck_assert_int_gt(probe.fed_leading, 0);

    /* r1 joins while every write is held: the releases wait. */
    probe.holding = true;
    add_replica();
    want_r0_claims = N_SHARDS;
    ck_assert(run_until(r0_claims_fewer, 30000));
    int64_t t = now();
    run_for(RENEW_MS / 2);
    ck_assert_int_eq(owned_by("r0"), N_SHARDS);
    ck_assert_int_gt(probe.asked, 0);
    probe.holding = false;
    int64_t freed = now();
    ck_assert(run_until(balanced, 5000));
    ck_assert_int_eq(r0_releases(t), N_SHARDS / 2);
    ck_assert_int_eq(r0_releases(freed), N_SHARDS / 2);

    /* r2 joins and the hold outlasts the renew deadline: still no
     * release, and none given up either. */
    probe.holding = true;
    add_replica();
    want_r0_claims = N_SHARDS / 2;
    ck_assert(run_until(r0_claims_fewer, 30000));
    t = now();
    run_for(RENEW_MS + 2 * RETRY_MS);
    ck_assert_int_eq(r0_releases(t), 0);
    ck_assert_int_eq(owned_by("r0"), N_SHARDS / 2);
    ck_assert_int_eq(claimed_by_r0(), N_SHARDS / 3);

    /* Waiting, not given up: once nothing holds, the releases go at once,
     * not a lease duration later. */
    probe.holding = false;
    freed = now();
    ck_assert(run_until(balanced, 4 * RETRY_MS));
    ck_assert_int_eq(r0_releases(freed), N_SHARDS / 2 - N_SHARDS / 3);
    ck_assert_int_eq(probe.asked_while_published_leading, 0);
}
END_TEST

/* At the exit, a safety hold past the member term's deadline (its last
 * renewal's start plus the renew deadline, not the signal's time plus it)
 * leaves every shard Lease and the member Lease as they are (not
 * released, not deleted): the others take the shards only once the member
 * Lease expires. */
START_TEST(an_exit_whose_hold_outlasts_the_term_releases_nothing)
{
    struct replica *r = add_probed_replica();
    want_r0_holds = N_SHARDS;
    ck_assert(run_until(r0_holds, 30000));
    const char *member = ld_shardgroup_member_lease(group());
    probe.holding = true;
    struct ld_election_status st;
    ld_election_status(ld_host_election(ld_shell_host(r->fr.sh), 0), &st);
    int64_t term_until = st.term_until_ms;
    int64_t t = now();
    ck_assert_int_gt(term_until, t);
    ld_shell_stop(r->fr.sh, SIGTERM);
    for (int i = 0; i < 10000 && !r->done; i++)
        turn_all();
    ck_assert(r->done);
    ck_assert_int_ge(now(), term_until);
    ck_assert_int_le(now(), term_until + RETRY_MS);
    ck_assert_int_eq(r0_releases(t), 0);
    ck_assert_ptr_null(release_of(member, 0, t));
    ck_assert_str_eq(holder_of(member), "r0");
    ck_assert_int_eq(owned_by("r0"), N_SHARDS);
    ck_assert_int_eq(probe.asked_while_published_leading, 0);
}
END_TEST

/* The member election of r0 resigns (as when it steps out of the group):
 * its release would free every shard whose record names r0 at once, so it
 * waits while a shard's hook holds (a write the gate sent), and is not
 * written at all while one forbids it (a write of unknown fate). */
static void member_resigns(struct replica *r)
{
    struct ld_now at = {.mono_ms = now(), .wall_us = now() * 1000};
    ck_assert(
        ld_election_resign(ld_host_election(ld_shell_host(r->fr.sh), 0), at, LEASE_MS));
    ld_host_wake(ld_shell_host(r->fr.sh), 0);
}

START_TEST(the_member_release_waits_for_every_shards_hold)
{
    struct replica *r = add_probed_replica();
    want_r0_holds = N_SHARDS;
    ck_assert(run_until(r0_holds, 30000));
    const char *member = ld_shardgroup_member_lease(group());
    probe.holding = true;
    int64_t t = now();
    member_resigns(r);
    run_for(RENEW_MS / 2);
    ck_assert_ptr_null(release_of(member, 0, t));
    ck_assert_str_eq(holder_of(member), "r0");
    probe.holding = false;
    int64_t freed = now();
    ld_host_wake(ld_shell_host(r->fr.sh), 0); /* as the gate's eventfd would */
    run_for(RETRY_MS);
    ck_assert_ptr_nonnull(release_of(member, 0, freed));
}
END_TEST

START_TEST(a_forbidding_shard_hook_leaves_the_member_lease_to_expire)
{
    struct replica *r = add_probed_replica();
    want_r0_holds = N_SHARDS;
    ck_assert(run_until(r0_holds, 30000));
    const char *member = ld_shardgroup_member_lease(group());
    probe.forbidding = true;
    int64_t t = now();
    member_resigns(r);
    run_for(RENEW_MS + RETRY_MS);
    ck_assert_ptr_null(release_of(member, 0, t));
    ck_assert_str_eq(holder_of(member), "r0");
}
END_TEST

/* What differs between two tables, as bits. */
enum {
    DIFF_OBSERVED = 1,
    DIFF_MEMBERS = 2,
    DIFF_LEADER = 4,
    DIFF_TERM = 8,
    DIFF_LEADING = 16,
    DIFF_RENEWED_AT = 32,
    DIFF_LAST_RENEW = 64,
};

static unsigned table_diff(const struct ld_shardsnap *a, const struct ld_shardsnap *b)
{
    unsigned d = 0;
    if (a->observed != b->observed)
        d |= DIFF_OBSERVED;
    if (a->n_members != b->n_members)
        d |= DIFF_MEMBERS;
    for (uint32_t i = 0; !(d & DIFF_MEMBERS) && i < a->n_members; i++)
        if (strcmp(a->members[i], b->members[i]) != 0)
            d |= DIFF_MEMBERS;
    ck_assert_uint_eq(a->n_shards, b->n_shards);
    for (uint32_t k = 0; k < a->n_shards; k++) {
        const struct ld_shard_entry *x = &a->shards[k], *y = &b->shards[k];
        d |= strcmp(x->leader, y->leader) != 0 ? DIFF_LEADER : 0;
        d |= x->term != y->term ? DIFF_TERM : 0;
        d |= x->observed != y->observed ? DIFF_OBSERVED : 0;
        d |= x->leading != y->leading ? DIFF_LEADING : 0;
        d |=
            x->has_renewed_at != y->has_renewed_at || x->renewed_at_us != y->renewed_at_us
                ? DIFF_RENEWED_AT
                : 0;
        d |= x->last_renew_wall_us != y->last_renew_wall_us ? DIFF_LAST_RENEW : 0;
    }
    return d;
}

/* Replica i's member renewals answered (successful PUTs of its member
 * Lease whose answer came) in [since_ms, until_ms]. */
static size_t renewals_answered(size_t i, int64_t since_ms, int64_t until_ms)
{
    const char *member =
        ld_shardgroup_member_lease(ld_mode_shards_group(fx.r[i].fr.mode));
    size_t n = 0;
    for (size_t j = 0; j < fake_transport_record_count(fx.fl.ft); j++) {
        const struct fake_transport_record *r = fake_transport_record(fx.fl.ft, j);
        n += strcmp(r->name, member) == 0 && strcmp(r->verb, "PUT") == 0 &&
             r->status == 200 && r->end_ms >= since_ms && r->end_ms <= until_ms;
    }
    return n;
}

/* /shards is rebuilt only when something in it changed. In a steady group
 * the other members' renewals (new member records, shown by the watch to
 * every replica) and the loop's heartbeats publish no new table. A
 * replica's own renewal moves the deadline of its claims (by which a
 * reader judges is_leader) and nothing else: it publishes a new header
 * with that deadline over the very same entries and members, copying none
 * of them. A change of a shard's holder shows in the table at once, not at
 * the next renewal. A new table is told from the old by the pointer the
 * state hands out (the test holds a reference to the old one, so its
 * memory is not reused). */
START_TEST(the_table_is_rebuilt_only_when_something_in_it_changed)
{
    for (int i = 0; i < 3; i++)
        add_replica();
    ck_assert(run_until(balanced, 60000));
    ck_assert(run_until(claims_match_holders, 60000));
    run_for(2 * RETRY_MS);

    struct ld_shardsnap *held[3];
    struct ld_snapshot snap;
    int64_t beat[3];
    int tables[3] = {0, 0, 0}, beats[3] = {0, 0, 0};
    for (size_t i = 0; i < 3; i++) {
        held[i] = ld_state_read_shards(&fx.r[i].fr.state, &snap);
        ck_assert_ptr_nonnull(held[i]);
        beat[i] = snap.heartbeat_ms;
    }
    int64_t t = now(), end = t + 10 * RETRY_MS;
    for (int k = 0; k < 10 * RETRY_MS / STEP_MS * 4 && now() < end; k++) {
        turn_all();
        for (size_t i = 0; i < 3; i++) {
            struct ld_shardsnap *cur = ld_state_read_shards(&fx.r[i].fr.state, &snap);
            beats[i] += snap.heartbeat_ms != beat[i];
            beat[i] = snap.heartbeat_ms;
            if (cur == held[i]) {
                ld_shardsnap_unref(cur);
                continue;
            }
            tables[i]++;
            ck_assert_ptr_eq(cur->shards, held[i]->shards);
            ck_assert_ptr_eq(cur->members, held[i]->members);
            ck_assert_int_gt(cur->claims_until_ms, held[i]->claims_until_ms);
            ld_shardsnap_unref(held[i]);
            held[i] = cur;
        }
    }
    ck_assert_int_ge(now(), end);
    for (size_t i = 0; i < 3; i++) {
        size_t own = renewals_answered(i, t, now());
        size_t others = renewals_answered((i + 1) % 3, t, now()) +
                        renewals_answered((i + 2) % 3, t, now());
        /* What could have rebuilt it did happen: a heartbeat a second,
         * the others' renewals every retry period. */
        ck_assert_int_ge(beats[i], 10 * RETRY_MS / HEARTBEAT_MS - 1);
        ck_assert_uint_ge(others, 2 * 9);
        ck_assert_uint_ge(own, 9);
        ck_assert_msg(tables[i] >= 1 && (size_t)tables[i] <= own,
                      "r%zu: %d tables in %lld ms with %zu renewals of its own", i,
                      tables[i], (long long)(now() - t), own);
    }

    /* Someone else releases a shard r1 holds (no member changes): r0's
     * table shows it in its next pass, and r1 takes the shard back. */
    uint32_t k = 0;
    while (k < N_SHARDS &&
           strcmp(holder_of(ld_shardgroup_shard_lease(group(), k)), "r1") != 0)
        k++;
    ck_assert_uint_lt(k, N_SHARDS);
    const char *lease = ld_shardgroup_shard_lease(group(), k);
    ck_assert_str_eq(held[0]->shards[k].leader, "r1");
    int64_t term = held[0]->shards[k].term;
    fake_transport_lease_put(fx.fl.ft, lease, NULL, "", 1,
                             fake_transport_wall_us(fx.fl.ft));
    t = now();
    int64_t shown = -1;
    for (int i = 0; i < 1000 && shown < 0; i++) {
        turn_all();
        struct ld_shardsnap *cur = ld_state_read_shards(&fx.r[0].fr.state, NULL);
        if (cur != held[0]) {
            unsigned d = table_diff(held[0], cur);
            if (strcmp(cur->shards[k].leader, "r1") != 0 || cur->shards[k].term != term) {
                shown = now();
                ck_assert(!(d & DIFF_MEMBERS));
            }
        }
        ld_shardsnap_unref(held[0]);
        held[0] = cur;
    }
    ck_assert_int_ge(shown, 0);
    ck_assert_msg(shown - t <= 2 * STEP_MS * MAX_REPLICAS,
                  "the owner change showed after %lld ms", (long long)(shown - t));
    /* Freed by hand, not by r1 (no stamp): taken again only once r1's
     * claim has surely ended, a lease duration (and the drain) later. */
    ck_assert(run_until(balanced, LEASE_MS + 3 * RETRY_MS));
    ck_assert_str_eq(holder_of(lease), "r1");
    for (size_t i = 0; i < 3; i++)
        ld_shardsnap_unref(held[i]);
}
END_TEST

/* How many replicas' tables show shard k claimed now (as /shards judges). */
static int claimants(uint32_t k)
{
    int n = 0;
    for (size_t i = 0; i < fx.n; i++) {
        struct ld_shardsnap *table = ld_state_read_shards(&fx.r[i].fr.state, NULL);
        n += table && ld_shardsnap_leads(table, k, now());
        ld_shardsnap_unref(table);
    }
    return n;
}

/* Runs for ms, checking after every turn that no shard has two claimants;
 * returns the first time one had (-1: never). */
static int64_t run_exclusive(int64_t ms, uint32_t *shard)
{
    int64_t end = now() + ms;
    for (int64_t i = 0; i < ms / STEP_MS * 4 + 100 && now() < end; i++) {
        turn_all();
        for (uint32_t k = 0; k < N_SHARDS; k++) {
            if (claimants(k) > 1) {
                *shard = k;
                return now();
            }
        }
    }
    return -1;
}

/* Issue #28, interleaving 2: a shard Lease deleted by hand while its
 * holder's watch lags (its own lists hang too) and its member renewals
 * succeed. The other replica, to which the assignment gives the shard once
 * it is free, sees the DELETED at once; it must not re-create the shard
 * while the holder may still claim it, and the holder's claim must end
 * within a lease duration of the last moment its view was confirmed. */
START_TEST(a_deleted_shard_lease_never_gives_two_owners)
{
    add_replica();
    ck_assert(run_until(r0_holds_all, 2 * LEASE_MS));
    ck_assert(run_until(r0_claims_all, 2 * LEASE_MS));
    run_for(2 * RETRY_MS);
    fake_transport_set_client_watch_lag_ms(fx.fl.ft, 0, 10 * LEASE_MS);
    fake_transport_fault_add_for(
        fx.fl.ft, 0, NULL, "LIST",
        (struct fake_transport_fault){.kind = FAKE_TRANSPORT_HANG, .count = -1});
    struct replica *r1 = add_replica();
    const struct ld_shardgroup *g1 = ld_mode_shards_group(r1->fr.mode);
    run_for(3 * RETRY_MS);
    uint32_t victim = N_SHARDS;
    for (uint32_t k = 0; k < N_SHARDS && victim == N_SHARDS; k++) {
        const char *target = ld_shardgroup_target(g1, k);
        if (target && strcmp(target, "r1") == 0)
            victim = k;
    }
    ck_assert_msg(victim < N_SHARDS, "r1 is assigned no shard of r0's");
    ck_assert_int_eq(claimants(victim), 1);
    ck_assert(fake_transport_lease_delete(fx.fl.ft,
                                          ld_shardgroup_shard_lease(group(), victim)));
    int64_t deleted_at = now();
    uint32_t k = N_SHARDS;
    int64_t at = run_exclusive(4 * LEASE_MS, &k);
    ck_assert_msg(at < 0, "shard %u claimed by two replicas %lld ms after the deletion",
                  k, (long long)(at - deleted_at));
    /* Liveness: r1 owns the shard it was given once the bound is past. */
    ck_assert_str_eq(holder_of(ld_shardgroup_shard_lease(group(), victim)), "r1");
    /* It made it anew only the outside wait after it saw the deletion (rule
     * O2): no create of it before. */
    const char *name = ld_shardgroup_shard_lease(group(), victim);
    size_t creates = fake_transport_count(fx.fl.ft, "POST", name, deleted_at);
    ck_assert_uint_ge(creates, 1);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "POST", name, deleted_at + LEASE_MS),
                      creates);
}
END_TEST

static Suite *mode_shards_suite(void)
{
    Suite *s = suite_create("mode_shards");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, three_replicas_share_the_shards_evenly_and_keep_them);
    tcase_add_test(tc, sigterm_releases_every_shard_and_deletes_the_member_lease);
    tcase_add_test(tc, members_are_listed_while_the_watch_is_down);
    tcase_add_test(tc, a_replica_that_cannot_write_its_shards_hands_them_on);
    tcase_add_test(tc, a_shard_nobody_can_write_is_given_to_nobody);
    tcase_add_test(tc, a_replica_whose_shard_writes_fail_steps_out);
    tcase_add_test(tc, a_replica_running_another_shard_set_claims_nothing);
    tcase_add_test(tc, a_shard_deleted_between_two_streams_is_not_claimed_for_good);
    tcase_add_test(tc, a_dead_members_lease_is_evicted_then_deleted);
    tcase_add_test(tc, the_clean_up_deletes_only_the_record_it_judged_long_expired);
    tcase_add_test(tc, a_give_back_waits_for_the_drain_or_the_app);
    tcase_add_test(tc, a_give_back_waits_for_a_safety_hold_while_the_member_term_lasts);
    tcase_add_test(tc, an_exit_whose_hold_outlasts_the_term_releases_nothing);
    tcase_add_test(tc, the_member_release_waits_for_every_shards_hold);
    tcase_add_test(tc, a_forbidding_shard_hook_leaves_the_member_lease_to_expire);
    tcase_add_test(tc, the_table_is_rebuilt_only_when_something_in_it_changed);
    tcase_add_test(tc, a_deleted_shard_lease_never_gives_two_owners);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(mode_shards_suite());
}
