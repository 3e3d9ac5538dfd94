/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_election: the election engine as a pure state machine, driven by a
 * fake clock (plain integers) and the in-memory fake API.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election.h"
#include "support/fake_api.h"
#include "support/run_suite.h"

#define WALL0 1700000000000000LL /* an arbitrary wall-clock origin, in us */

static struct ld_election_config config_for(const char *identity)
{
    struct ld_election_config c = {
        .namespace_ = "default",
        .name = "lock",
        .identity = identity,
        .lease_duration_ms = 15000,
        .renew_deadline_ms = 10000,
        .retry_period_ms = 2000,
        .release_on_exit = true,
        .seed = 42,
    };
    return c;
}

static struct ld_now at(int64_t ms)
{
    struct ld_now n = {.mono_ms = ms, .wall_us = WALL0 + ms * 1000};
    return n;
}

/* The fixture: each test starts from an empty store (api); the engines it
 * makes with new_engine or engine_for are freed after it. */
static struct fake_api api;
static struct ld_election *engines[4]; /* the simulation needs three */
static size_t n_engines;

static void setup(void)
{
    fake_api_init(&api);
    n_engines = 0;
}

static void teardown(void)
{
    for (size_t i = 0; i < n_engines; i++)
        ld_election_free(engines[i]);
    fake_api_clear(&api);
}

static struct ld_election *engine_for(const struct ld_election_config *c)
{
    struct ld_errinfo err;
    ck_assert_uint_lt(n_engines, sizeof(engines) / sizeof(engines[0]));
    struct ld_election *e = ld_election_new(c, &err);
    ck_assert_msg(e != NULL, "ld_election_new: %s", err.msg);
    engines[n_engines++] = e;
    return e;
}

static struct ld_election *new_engine(const char *identity)
{
    struct ld_election_config c = config_for(identity);
    return engine_for(&c);
}

/* Executes a against the store and hands the engine the answer at now.
 * Returns the store's answer. */
static enum ld_err deliver(struct ld_election *e, const struct ld_action *a, int64_t now)
{
    struct ld_lease out;
    struct ld_errinfo err;
    ld_lease_init(&out);
    enum ld_err rc = fake_api_execute(&api, a, "default", "lock", &out, &err);
    ld_election_result(e, at(now), rc, rc == LD_OK ? &out : NULL, &err);
    ld_lease_clear(&out);
    return rc;
}

/* The write a lands in the store, but its reply is lost: the engine sees a
 * timeout at now. */
static void land_but_lose_reply(struct ld_election *e, const struct ld_action *a,
                                int64_t now)
{
    struct ld_lease out;
    struct ld_errinfo err;
    ld_lease_init(&out);
    ck_assert_int_eq(fake_api_execute(&api, a, "default", "lock", &out, &err), LD_OK);
    ld_lease_clear(&out);
    ld_errinfo_set(&err, LD_ETIMEOUT, "reply lost");
    ld_election_result(e, at(now), LD_ETIMEOUT, NULL, &err);
}

/* Performs one request the engine asked for against the fake, at once.
 * Returns the action that was performed. */
static struct ld_action step(struct ld_election *e, int64_t now)
{
    struct ld_action a = ld_election_next(e, at(now));
    if (a.kind != LD_ACT_WAIT && a.kind != LD_ACT_DONE)
        deliver(e, &a, now);
    return a;
}

/* Runs requests until the engine wants to wait; returns the wake time. */
static int64_t settle(struct ld_election *e, int64_t now)
{
    for (int i = 0; i < 10; i++) {
        struct ld_action a = step(e, now);
        if (a.kind == LD_ACT_WAIT)
            return a.wake_at_ms;
        if (a.kind == LD_ACT_DONE)
            return -1;
    }
    ck_abort_msg("engine did not settle within 10 requests");
    return -1;
}

/* Follows the engine's own wake-ups from `from` until it leads or `until`
 * has passed; returns the time it was first seen leading (or the last). */
static int64_t run_until_leader(struct ld_election *e, int64_t from, int64_t until)
{
    int64_t t = from, wake = settle(e, t);
    while (!ld_election_is_leader(e, t) && t < until) {
        t = wake;
        wake = settle(e, t);
    }
    return t;
}

static int count_events(struct ld_election *e, enum ld_event_kind kind,
                        struct ld_event *last)
{
    struct ld_event ev;
    int n = 0;
    while (ld_election_take_event(e, &ev)) {
        if (ev.kind == kind) {
            n++;
            if (last)
                *last = ev;
        }
    }
    return n;
}

START_TEST(acquires_absent_lease_by_create)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    ck_assert(ld_election_is_leader(e, 0));
    ck_assert_int_eq(api.gets, 1);
    ck_assert_int_eq(api.creates, 1);
    ck_assert_str_eq(api.lease.spec.holder, "a");
    ck_assert_int_eq(api.lease.spec.transitions, 0);
    ck_assert_int_eq(api.lease.spec.duration_s, 15);
    ck_assert(api.lease.spec.has_acquire && api.lease.spec.acquire_us == WALL0);
    struct ld_event ev;
    ck_assert_int_eq(count_events(e, LD_EV_STARTED_LEADING, &ev), 1);
    ck_assert_int_eq(ev.term, 0);
}
END_TEST

START_TEST(create_carries_the_configured_metadata_only_on_create)
{
    struct ld_election_config c = config_for("a");
    c.create_metadata =
        "{\"labels\":{\"leaderd.io/group\":\"g\"},\"ownerReferences\":"
        "[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"a\",\"uid\":\"u1\"}]}";
    struct ld_election *e = engine_for(&c);
    struct ld_action a = step(e, 0); /* GET: 404 */
    ck_assert_int_eq(a.kind, LD_ACT_GET);
    a = ld_election_next(e, at(1));
    ck_assert_int_eq(a.kind, LD_ACT_CREATE);
    char *body = ld_lease_encode(a.lease);
    ck_assert_ptr_nonnull(strstr(body, "\"leaderd.io/group\":\"g\""));
    ck_assert_ptr_nonnull(strstr(body, "\"uid\":\"u1\""));
    ck_assert_ptr_nonnull(strstr(body, "\"holderIdentity\":\"a\""));
    free(body);
    deliver(e, &a, 1);
    ck_assert(ld_election_is_leader(e, 1));

    /* An existing Lease is written back as it is: nothing added. */
    fake_api_put_record(&api, "", 1, 4, WALL0);
    struct ld_election *b = engine_for(&c);
    a = step(b, 0);
    ck_assert_int_eq(a.kind, LD_ACT_GET);
    a = ld_election_next(b, at(1));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    body = ld_lease_encode(a.lease);
    ck_assert_ptr_null(strstr(body, "leaderd.io/group"));
    free(body);
    deliver(b, &a, 1);

    struct ld_errinfo err;
    c.create_metadata = "[1]";
    ck_assert_ptr_null(ld_election_new(&c, &err));
    ck_assert_int_eq(err.code, LD_EINVAL);
    c.create_metadata = "{bad";
    ck_assert_ptr_null(ld_election_new(&c, &err));
    ck_assert_int_eq(err.code, LD_EINVAL);
}
END_TEST

/* Own annotations go with every write of ours: the create, a takeover of a
 * record someone else made, and each renewal, next to the annotations the
 * record has. */
START_TEST(own_annotations_go_with_every_write)
{
    struct ld_election_config c = config_for("a");
    c.own_annotations = "{\"leaderd.io/shard-set\":\"numbered/4\"}";
    struct ld_election *e = engine_for(&c);
    step(e, 0); /* GET: 404 */
    struct ld_action a = ld_election_next(e, at(1));
    ck_assert_int_eq(a.kind, LD_ACT_CREATE);
    char *body = ld_lease_encode(a.lease);
    ck_assert_ptr_nonnull(strstr(body, "\"leaderd.io/shard-set\":\"numbered/4\""));
    free(body);
    deliver(e, &a, 1);

    /* Someone else's released record, with an annotation of its own. */
    fake_api_put_record(&api, "", 1, 4, WALL0);
    ck_assert_int_eq(ld_lease_set_annotations(&api.lease,
                                              "{\"leaderd.io/shard-set\":\"numbered/8\","
                                              "\"x.io/keep\":\"yes\"}"),
                     LD_OK);
    struct ld_election *b = engine_for(&c);
    step(b, 0);
    a = ld_election_next(b, at(1));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    body = ld_lease_encode(a.lease);
    ck_assert_ptr_nonnull(strstr(body, "\"leaderd.io/shard-set\":\"numbered/4\""));
    ck_assert_ptr_nonnull(strstr(body, "\"x.io/keep\":\"yes\""));
    free(body);
    deliver(b, &a, 1);
    ck_assert(ld_election_is_leader(b, 1));
    int64_t t = settle(b, 1);
    a = ld_election_next(b, at(t)); /* the renewal */
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    body = ld_lease_encode(a.lease);
    ck_assert_ptr_nonnull(strstr(body, "\"leaderd.io/shard-set\":\"numbered/4\""));
    free(body);

    struct ld_errinfo err;
    c.own_annotations = "{\"k\":1}";
    ck_assert_ptr_null(ld_election_new(&c, &err));
    ck_assert_int_eq(err.code, LD_EINVAL);
}
END_TEST

/* ---- contending (shards): a caller decides who should hold the Lease ---- */

START_TEST(not_contending_never_claims_then_claims_at_once)
{
    struct ld_election *e = new_engine("a");
    ld_election_set_contending(e, at(0), false);
    int64_t t = 0, wake = settle(e, t);
    while (t < 120000) { /* two minutes of a free, then absent, Lease */
        t = wake > t ? wake : t + 1;
        wake = settle(e, t);
        ck_assert(!ld_election_is_leader(e, t));
    }
    ck_assert_int_eq(api.creates + api.updates, 0);
    ck_assert_int_ge(api.gets, 2); /* it still looks */
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert(!st.contending);
    ck_assert(st.holder_valid_until_ms == INT64_MIN);

    ld_election_set_contending(e, at(t), true);
    settle(e, t);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_eq(api.creates, 1);
}
END_TEST

START_TEST(leader_not_contending_gives_back_and_stays_out)
{
    struct ld_election *a = new_engine("a");
    run_until_leader(a, 0, 10000);
    count_events(a, LD_EV_STARTED_LEADING, NULL);
    int32_t term = api.lease.spec.transitions;
    ld_election_set_contending(a, at(1000), false);
    settle(a, 1000);
    ck_assert(!ld_election_is_leader(a, 1000));
    ck_assert_str_eq(api.lease.spec.holder, ""); /* the release client-go writes */
    ck_assert_int_eq(api.lease.spec.duration_s, 1);
    ck_assert_int_eq(api.lease.spec.transitions, term);
    struct ld_event ev;
    ld_election_take_event(a, &ev);
    ck_assert_int_eq(ev.kind, LD_EV_STOPPED_LEADING);
    ck_assert_int_eq(ev.reason, LD_STOP_NOT_CONTENDING);

    struct ld_election *b = new_engine("b");
    int64_t t = run_until_leader(b, 1000, 20000);
    ck_assert(ld_election_is_leader(b, t));
    ck_assert_int_eq(api.lease.spec.transitions, term + 1);
    /* a keeps observing and never claims, also once b's Lease expires */
    int64_t ta = 1000, wake = settle(a, ta);
    int writes = api.writes_ok;
    while (ta < 60000) {
        ta = wake > ta ? wake : ta + 1;
        wake = settle(a, ta);
        ck_assert(!ld_election_is_leader(a, ta));
    }
    ck_assert_int_eq(api.writes_ok, writes);
    struct ld_election_status st;
    ld_election_status(a, &st);
    ck_assert_str_eq(st.leader, "b");
    ck_assert(st.holder_valid_until_ms > 1000);
}
END_TEST

START_TEST(not_contending_while_a_claim_is_in_flight)
{
    struct ld_election *e = new_engine("a");
    struct ld_action a = step(e, 0); /* GET: absent */
    ck_assert_int_eq(a.kind, LD_ACT_GET);
    a = ld_election_next(e, at(1));
    ck_assert_int_eq(a.kind, LD_ACT_CREATE);
    ld_election_set_contending(e, at(2), false); /* while the POST is out */
    deliver(e, &a, 3);                           /* ... and it lands */
    ck_assert_str_eq(api.lease.spec.holder, "a");
    settle(e, 4); /* the next step gives it back */
    ck_assert(!ld_election_is_leader(e, 4));
    ck_assert_str_eq(api.lease.spec.holder, "");

    /* A claim prepared but not yet sent is dropped. */
    struct ld_election *f = new_engine("f");
    a = step(f, 10); /* GET: released, free */
    ck_assert_int_eq(a.kind, LD_ACT_GET);
    ld_election_set_contending(f, at(11), false);
    a = ld_election_next(f, at(11));
    ck_assert_int_ne(a.kind, LD_ACT_UPDATE);
    ck_assert_int_ne(a.kind, LD_ACT_CREATE);
}
END_TEST

START_TEST(takes_released_lease_at_once_and_counts_transition)
{
    fake_api_put_record(&api, "", 1, 4, WALL0);
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    ck_assert(ld_election_is_leader(e, 0));
    ck_assert_int_eq(api.lease.spec.transitions, 5);
    ck_assert_str_eq(api.lease.spec.holder, "a");
}
END_TEST

START_TEST(never_takes_unexpired_foreign_lease)
{
    struct ld_election *e = new_engine("b");
    /* The foreign holder renews every 2 s until t=60 s, then dies. */
    int64_t wake = 0, taken_at = -1;
    for (int64_t t = 0; t <= 90000 && taken_at < 0; t += 100) {
        if (t % 2000 == 0 && t <= 60000)
            fake_api_put_record(&api, "other", 15, 3, WALL0 + t * 1000);
        if (t >= wake) {
            wake = settle(e, t);
            if (api.writes_ok > 0)
                taken_at = t;
        }
        if (taken_at < 0)
            ck_assert_msg(!ld_election_is_leader(e, t), "leader at %lld", (long long)t);
    }
    /* Expiry counts from when b saw the last renewal (at or after 60 s),
     * and b polls at most 2.4 s apart. */
    ck_assert_int_ge(taken_at, 75000);
    ck_assert_int_le(taken_at, 60000 + 2400 + 15000);
    ck_assert_str_eq(api.lease.spec.holder, "b");
    ck_assert_int_eq(api.lease.spec.transitions, 4);
}
END_TEST

START_TEST(takeover_waits_full_duration_from_first_observation)
{
    /* A record that says it was renewed long ago: wall times never count. */
    fake_api_put_record(&api, "ghost", 15, 1, WALL0 - 3600LL * 1000000);
    struct ld_election *e = new_engine("b");
    int64_t t = 0, wake = settle(e, 0);
    ck_assert(!ld_election_is_leader(e, 0));
    while (api.writes_ok == 0 && t < 40000) {
        t = wake;
        wake = settle(e, t);
    }
    ck_assert_int_eq(api.writes_ok, 1);
    ck_assert_int_ge(t, 15000);
    /* The expiry wake means no poll interval is added on top. */
    ck_assert_int_eq(t, 15000);
    ck_assert(ld_election_is_leader(e, t));
}
END_TEST

START_TEST(renews_with_fast_path_put_keeping_acquire_time)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    int gets = api.gets;
    int64_t prev_renew = api.lease.spec.renew_us;
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(wake % 2000, 0); /* renewals exactly every retry period */
        int64_t t = wake;
        wake = settle(e, t);
        ck_assert(ld_election_is_leader(e, t));
        ck_assert_int_gt(api.lease.spec.renew_us, prev_renew);
        prev_renew = api.lease.spec.renew_us;
        ck_assert_int_eq(api.lease.spec.acquire_us, WALL0);
        ck_assert_int_eq(api.lease.spec.transitions, 0);
    }
    ck_assert_int_eq(api.gets, gets); /* no GET while renewals succeed */
    ck_assert_int_eq(count_events(e, LD_EV_STARTED_LEADING, NULL), 1);
}
END_TEST

START_TEST(renewal_conflict_falls_back_to_get_and_keeps_leading)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    /* Someone edits the object (e.g. a label) but leaves the record ours. */
    free(api.lease.resource_version);
    api.lease.resource_version = strdup("999");
    int gets = api.gets;
    settle(e, wake);
    ck_assert_int_eq(api.gets, gets + 1);
    ck_assert(ld_election_is_leader(e, wake));
    ck_assert_int_eq(api.lease.spec.transitions, 0);
}
END_TEST

START_TEST(loses_race_on_conflict_and_rereads_before_writing)
{
    fake_api_put_record(&api, "", 1, 2, WALL0);
    struct ld_election *e = new_engine("b");
    struct ld_action get = ld_election_next(e, at(0));
    ck_assert_int_eq(get.kind, LD_ACT_GET);
    ck_assert_int_eq(deliver(e, &get, 0), LD_OK);
    struct ld_action put = ld_election_next(e, at(0));
    ck_assert_int_eq(put.kind, LD_ACT_UPDATE);
    /* Another candidate wins between our GET and our PUT. */
    fake_api_put_record(&api, "c", 15, 3, WALL0);
    ck_assert_int_eq(deliver(e, &put, 5), LD_ECONFLICT);
    ck_assert(!ld_election_is_leader(e, 5));
    struct ld_action w = ld_election_next(e, at(5));
    ck_assert_int_eq(w.kind, LD_ACT_WAIT);
    ck_assert_int_ge(w.wake_at_ms, 5 + 2000);
    ck_assert_int_le(w.wake_at_ms, 5 + 2400);
    struct ld_action again = ld_election_next(e, at(w.wake_at_ms));
    ck_assert_int_eq(again.kind, LD_ACT_GET);
    ck_assert_int_eq(count_events(e, LD_EV_STARTED_LEADING, NULL), 0);
}
END_TEST

START_TEST(steps_down_at_renew_deadline_while_api_hangs)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0); /* leading; write started at t=0 */
    int64_t t = wake;
    struct ld_action a = ld_election_next(e, at(t));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE); /* renewal sent ... and never answered */
    ck_assert_int_le(a.timeout_ms, 10000 / 2);
    ck_assert(ld_election_is_leader(e, 9999));
    ck_assert(!ld_election_is_leader(e, 10000));
    /* The hung request finally fails long after the deadline. */
    struct ld_errinfo err;
    ld_errinfo_set(&err, LD_ETIMEOUT, "timeout");
    ld_election_result(e, at(12000), LD_ETIMEOUT, NULL, &err);
    struct ld_event ev;
    ck_assert_int_eq(count_events(e, LD_EV_STOPPED_LEADING, &ev), 1);
    ck_assert_int_eq(ev.reason, LD_STOP_RENEW_DEADLINE);
}
END_TEST

START_TEST(steps_down_when_errors_persist)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    api.fail_with = LD_ESERVER;
    int64_t t = wake;
    while (t < 20000) {
        ck_assert_msg(ld_election_is_leader(e, t) == (t < 10000), "t=%lld", (long long)t);
        t = settle(e, t);
    }
    struct ld_event ev;
    ck_assert_int_eq(count_events(e, LD_EV_STOPPED_LEADING, &ev), 1);
    ck_assert_int_eq(ev.reason, LD_STOP_RENEW_DEADLINE);
    /* The wait never overshoots the deadline, so the step-down is on time. */
}
END_TEST

START_TEST(step_down_when_lease_taken)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    fake_api_put_record(&api, "intruder", 15, 7, WALL0);
    settle(e, wake);
    ck_assert(!ld_election_is_leader(e, wake));
    struct ld_event ev;
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert_str_eq(st.leader, "intruder");
    ck_assert_int_eq(st.term, 7);
    ck_assert_int_eq(count_events(e, LD_EV_STOPPED_LEADING, &ev), 1);
    ck_assert_int_eq(ev.reason, LD_STOP_TAKEN);
}
END_TEST

START_TEST(transitions_count_each_holder_change)
{
    struct ld_election *a = new_engine("a");
    struct ld_election *b = new_engine("b");
    settle(a, 0);
    ck_assert_int_eq(api.lease.spec.transitions, 0);
    ld_election_shutdown(a, at(100));
    ck_assert_int_eq(settle(a, 100), -1);
    ck_assert_str_eq(api.lease.spec.holder, "");
    ck_assert_int_eq(api.lease.spec.transitions, 0);
    settle(b, 200);
    ck_assert_str_eq(api.lease.spec.holder, "b");
    ck_assert_int_eq(api.lease.spec.transitions, 1);
}
END_TEST

START_TEST(release_writes_client_go_record)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    int64_t acquire = api.lease.spec.acquire_us;
    ld_election_shutdown(e, at(3000));
    ck_assert(!ld_election_is_leader(e, 3000)); /* demoted before the write */
    struct ld_action a = ld_election_next(e, at(3000));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    ck_assert_str_eq(a.lease->spec.holder, "");
    ck_assert_int_eq(a.lease->spec.duration_s, 1);
    ck_assert_int_eq(a.lease->spec.transitions, 0);
    ck_assert_int_eq(a.lease->spec.renew_us, WALL0 + 3000 * 1000);
    ck_assert_int_eq(a.lease->spec.acquire_us, WALL0 + 3000 * 1000);
    ck_assert_int_ne(acquire, a.lease->spec.acquire_us);
    ck_assert_int_eq(deliver(e, &a, 3001), LD_OK);
    ck_assert_int_eq(ld_election_next(e, at(3001)).kind, LD_ACT_DONE);
    struct ld_event ev;
    bool stopped = false, released = false;
    while (ld_election_take_event(e, &ev)) {
        stopped |= ev.kind == LD_EV_STOPPED_LEADING && ev.reason == LD_STOP_SHUTDOWN;
        released |= ev.kind == LD_EV_RELEASED;
    }
    ck_assert(stopped && released);
}
END_TEST

START_TEST(release_retries_conflict_after_get)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    free(api.lease.resource_version); /* an in-flight renewal landed, say */
    api.lease.resource_version = strdup("555");
    ld_election_shutdown(e, at(100));
    ck_assert_int_eq(settle(e, 100), -1);
    ck_assert_str_eq(api.lease.spec.holder, "");
    ck_assert_int_eq(api.updates, 2);
    ck_assert_int_eq(api.gets, 2);
}
END_TEST

START_TEST(release_skipped_when_not_holder_or_disabled)
{
    fake_api_put_record(&api, "other", 15, 1, WALL0);
    struct ld_election *e = new_engine("b");
    settle(e, 0);
    ld_election_shutdown(e, at(10));
    ck_assert_int_eq(ld_election_next(e, at(10)).kind, LD_ACT_DONE);
    ck_assert_str_eq(api.lease.spec.holder, "other");

    struct ld_election_config c = config_for("a");
    c.release_on_exit = false;
    struct ld_election *k = engine_for(&c);
    fake_api_clear(&api);
    fake_api_init(&api);
    settle(k, 0);
    ld_election_shutdown(k, at(10));
    ck_assert(!ld_election_is_leader(k, 10));
    ck_assert_int_eq(ld_election_next(k, at(10)).kind, LD_ACT_DONE);
    ck_assert_str_eq(api.lease.spec.holder, "a");
}
END_TEST

START_TEST(release_is_bounded_when_api_is_down)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    api.fail_with = LD_ETRANSPORT;
    ld_election_shutdown(e, at(1000));
    int64_t t = 1000;
    int requests = 0;
    for (;;) {
        struct ld_action a = step(e, t);
        if (a.kind == LD_ACT_DONE)
            break;
        if (a.kind == LD_ACT_WAIT)
            t = a.wake_at_ms;
        else
            requests++;
        ck_assert_int_lt(requests, 50);
    }
    ck_assert_int_le(t, 1000 + 10000);
}
END_TEST

START_TEST(malformed_reads_never_grant_leadership)
{
    api.fail_with = LD_EDECODE;
    struct ld_election *e = new_engine("a");
    int64_t t = 0;
    for (int i = 0; i < 20; i++) {
        t = settle(e, t);
        ck_assert(!ld_election_is_leader(e, t));
    }
    ck_assert_int_eq(api.writes_ok, 0);
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert(!st.observed);
}
END_TEST

START_TEST(restart_with_same_identity_resumes_term)
{
    fake_api_put_record(&api, "a", 15, 6, WALL0);
    struct ld_election *e = new_engine("a");
    /* Our identity in a record we did not write: our old self, or a twin.
     * Resume only once it has stayed unchanged for two retry periods. */
    int64_t t = run_until_leader(e, 0, 20000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_ge(t, 4000);
    ck_assert_int_le(t, 4000 + 2400);
    ck_assert_int_eq(api.lease.spec.transitions, 6);
    ck_assert_int_eq(api.lease.spec.acquire_us, WALL0); /* kept */
    ck_assert_int_eq(count_events(e, LD_EV_IDENTITY_CONFLICT, NULL), 0);
}
END_TEST

START_TEST(distrusting_own_record_at_start_waits_a_lease_duration)
{
    fake_api_put_record(&api, "a", 15, 6, WALL0);
    struct ld_election_config c = config_for("a");
    c.distrust_own_record_at_start = true;
    struct ld_election *e = engine_for(&c);
    /* The record names us, but our old self may have left a command
     * running: it is resumed only once it expired, as a stranger's would
     * be, never after the two retry periods of a plain restart. */
    int64_t t = run_until_leader(e, 0, 40000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_ge(t, 15000);
    ck_assert_int_le(t, 15000 + 2400);
    ck_assert_int_eq(api.writes_ok, 1);
    ck_assert_int_eq(count_events(e, LD_EV_IDENTITY_CONFLICT, NULL), 0);
}
END_TEST

START_TEST(live_twin_at_start_is_detected_and_never_joined)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = 0;
    for (int64_t t = 0; t <= 40000; t += 100) {
        if (t % 2000 == 0) /* the twin renews as "a" */
            fake_api_put_record(&api, "a", 15, 2, WALL0 + t * 1000);
        if (t >= wake)
            wake = settle(e, t);
        ck_assert(!ld_election_is_leader(e, t));
    }
    ck_assert_int_eq(api.writes_ok, 0);
    ck_assert_int_ge(count_events(e, LD_EV_IDENTITY_CONFLICT, NULL), 1);
}
END_TEST

START_TEST(twin_writing_during_leadership_is_detected)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    ck_assert(ld_election_is_leader(e, 0));
    /* A second process named "a" renews behind our back. */
    fake_api_put_record(&api, "a", 15, 0, WALL0 + 1500 * 1000);
    int writes = api.writes_ok;
    settle(e, wake);
    ck_assert(!ld_election_is_leader(e, wake));
    struct ld_event ev;
    bool conflict = false, stopped = false;
    while (ld_election_take_event(e, &ev)) {
        conflict |= ev.kind == LD_EV_IDENTITY_CONFLICT;
        stopped |=
            ev.kind == LD_EV_STOPPED_LEADING && ev.reason == LD_STOP_IDENTITY_CONFLICT;
    }
    ck_assert(conflict && stopped);
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert(st.quarantined);
    /* It stays out for two lease durations. */
    struct ld_action a = ld_election_next(e, at(wake + 1));
    ck_assert_int_eq(a.kind, LD_ACT_WAIT);
    ck_assert_int_ge(a.wake_at_ms, wake + 30000);
    ck_assert_int_eq(api.writes_ok, writes);
}
END_TEST

START_TEST(own_timed_out_write_is_not_a_twin)
{
    struct ld_election *e = new_engine("a");
    int64_t t = settle(e, 0);
    /* The renewal lands but its answer is lost. */
    struct ld_action a = ld_election_next(e, at(t));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    land_but_lose_reply(e, &a, t + 5000);
    settle(e, t + 5000);
    ck_assert_int_eq(count_events(e, LD_EV_IDENTITY_CONFLICT, NULL), 0);
    ck_assert(ld_election_is_leader(e, t + 5000));
}
END_TEST

/* ---- incarnations: one identity, two processes ------------------------------ */

static struct ld_election *incarnated(const char *identity, const char *incarnation)
{
    struct ld_election_config c = config_for(identity);
    c.incarnation = incarnation;
    return engine_for(&c);
}

/* Stores a record as another process wrote it: holder under incarnation
 * (NULL: none, as a client-go peer writes). */
static void put_incarnated(const char *holder, const char *incarnation,
                           int32_t transitions, int64_t renew_us)
{
    fake_api_put_record(&api, holder, 15, transitions, renew_us);
    ld_lease_set_incarnation(&api.lease, incarnation);
}

START_TEST(own_identity_other_incarnation_is_taken_over_after_expiry)
{
    /* A restart: the old process's record names us, under its incarnation. */
    put_incarnated("a", "old", 6, WALL0);
    struct ld_election *e = incarnated("a", "new");
    int64_t t = run_until_leader(e, 0, 40000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_ge(t, 15000); /* the expiry rule, not two retry periods */
    ck_assert_int_le(t, 15000 + 2400);
    ck_assert_int_eq(api.writes_ok, 1);
    ck_assert_int_eq(api.lease.spec.transitions, 7); /* a change of holder */
    ck_assert_int_eq(api.lease.spec.acquire_us, WALL0 + t * 1000);
    ck_assert_str_eq(api.lease.incarnation, "new");
    struct ld_event ev;
    ld_election_take_event(e, &ev); /* NEW_LEADER "a", the old record's */
    ck_assert_int_eq(ev.kind, LD_EV_NEW_LEADER);
    /* A record left unchanged is no twin: nothing to report. */
    ck_assert_int_eq(count_events(e, LD_EV_STARTED_LEADING, &ev), 1);
    ck_assert_int_eq(ev.term, 7);
}
END_TEST

static int64_t predecessors_over(struct ld_election *e)
{
    struct ld_election_status st;
    ld_election_status(e, &st);
    return st.predecessors_over_ms;
}

/* From when no earlier holder can still lead: at once after an expiry
 * takeover; a lease duration after the Lease was first seen absent or free
 * when it was taken so (a deletion or an edit by hand says nothing of when
 * its holder stops). A shard group's member election uses it to time the
 * takeover of its identity's older records. */
START_TEST(predecessors_are_over_at_an_expiry_takeover_or_a_lease_duration_after_a_gap)
{
    put_incarnated("a", "old", 6, WALL0);
    struct ld_election *e = incarnated("a", "new");
    ck_assert_int_eq(predecessors_over(e), INT64_MAX);
    int64_t t = run_until_leader(e, 0, 40000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_eq(predecessors_over(e), t);

    /* Found absent (deleted, say): made anew. */
    fake_api_clear(&api);
    ld_lease_init(&api.lease);
    api.exists = false; /* resourceVersions go on growing, as on a server */
    struct ld_election *g = incarnated("c", "y");
    settle(g, 700);
    ck_assert(ld_election_is_leader(g, 700));
    ck_assert_int_eq(predecessors_over(g), 700 + 15000);

    /* Found naming nobody. */
    struct ld_election *f = incarnated("b", "x");
    fake_api_put_record(&api, "", 1, 3, WALL0);
    settle(f, 500);
    ck_assert(ld_election_is_leader(f, 500));
    ck_assert_int_eq(predecessors_over(f), 500 + 15000);
}
END_TEST

START_TEST(own_identity_without_incarnation_is_not_ours)
{
    /* Written by a client-go peer of our name, or a leaderd without one. */
    put_incarnated("a", NULL, 3, WALL0);
    struct ld_election *e = incarnated("a", "new");
    int64_t t = run_until_leader(e, 0, 40000);
    ck_assert_int_ge(t, 15000);
    ck_assert_int_eq(api.lease.spec.transitions, 4);
    ck_assert_str_eq(api.lease.incarnation, "new");
}
END_TEST

START_TEST(own_incarnation_is_resumed_and_renewed_as_ours)
{
    put_incarnated("a", "same", 6, WALL0);
    struct ld_election *e = incarnated("a", "same");
    settle(e, 0); /* GET, then a renewal at once: it is this process's */
    ck_assert(ld_election_is_leader(e, 0));
    ck_assert_int_eq(api.lease.spec.transitions, 6);
    ck_assert_int_eq(api.lease.spec.acquire_us, WALL0); /* kept: a renewal */
    /* A renewal whose answer was lost is still ours when read back. */
    int64_t t = settle(e, 0);
    struct ld_action a = ld_election_next(e, at(t));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    land_but_lose_reply(e, &a, t + 3000);
    settle(e, t + 3000);
    ck_assert(ld_election_is_leader(e, t + 3000));
    ck_assert_int_eq(api.lease.spec.transitions, 6);
    ck_assert_str_eq(api.lease.incarnation, "same");
    ck_assert_int_eq(count_events(e, LD_EV_IDENTITY_CONFLICT, NULL), 0);
}
END_TEST

START_TEST(late_renewal_of_dead_predecessor_is_no_quarantine)
{
    put_incarnated("a", "old", 2, WALL0);
    struct ld_election *e = incarnated("a", "new");
    int64_t t = run_until_leader(e, 0, 40000);
    ck_assert_int_eq(api.lease.spec.transitions, 3);
    /* The dead predecessor's renewal, delayed in the network, lands now. */
    t += 1000;
    put_incarnated("a", "old", 2, WALL0 + t * 1000);
    int64_t landed = t;
    int64_t wake = settle(e, t);
    while (ld_election_is_leader(e, t)) {
        t = wake;
        wake = settle(e, t);
    }
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert(!st.quarantined);
    /* Reported (another process did write under our identity), no more. */
    ck_assert_int_eq(count_events(e, LD_EV_IDENTITY_CONFLICT, NULL), 1);
    /* Someone else's record, waited out once: back after a lease duration
     * (not two), as a new change of holder. */
    t = run_until_leader(e, t, landed + 60000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_le(t, landed + 2000 + 15000 + 2400);
    ck_assert_int_eq(api.lease.spec.transitions, 4);
}
END_TEST

/* Two live processes of one identity on one Lease: the one that holds it
 * keeps it while it renews; when it is cut off, the other takes over only
 * after its claim ended. At no moment do both claim. */
START_TEST(two_incarnations_never_lead_at_once)
{
    struct ld_election *old = incarnated("a", "one");
    int64_t w_old = settle(old, 0);
    ck_assert(ld_election_is_leader(old, 0));
    struct ld_election *fresh = incarnated("a", "two");
    int64_t w_new = 0;
    int writes_before = 0;
    bool cut = false;
    int64_t took = -1;
    for (int64_t t = 0; t <= 90000; t += 100) {
        if (t == 30000) { /* the old process is partitioned: it stops talking */
            cut = true;
            writes_before = api.writes_ok;
        }
        if (!cut && t >= w_old)
            w_old = settle(old, t);
        else if (cut)
            ld_election_tick(old, at(t));
        if (t >= w_new)
            w_new = settle(fresh, t);
        bool a = ld_election_is_leader(old, t), b = ld_election_is_leader(fresh, t);
        ck_assert_msg(!(a && b), "both lead at %lld", (long long)t);
        if (!cut)
            ck_assert_msg(!b, "the second process leads at %lld", (long long)t);
        if (b && took < 0)
            took = t;
    }
    ck_assert_int_ge(took, 30000 + 10000); /* not before the old one's deadline */
    ck_assert_int_gt(api.writes_ok, writes_before);
    ck_assert_str_eq(api.lease.incarnation, "two");
    ck_assert_int_eq(api.lease.spec.transitions, 1);
    /* The live twin is reported once, however often it renewed. */
    ck_assert_int_eq(count_events(fresh, LD_EV_IDENTITY_CONFLICT, NULL), 1);

    /* The partition heals: the old process finds the Lease written by
     * another incarnation and never writes it as its own again. */
    int writes = api.writes_ok;
    w_old = 90000;
    for (int64_t t = 90000; t <= 150000; t += 100) {
        if (t >= w_old)
            w_old = settle(old, t);
        if (t >= w_new)
            w_new = settle(fresh, t);
        ck_assert(!ld_election_is_leader(old, t));
        ck_assert(ld_election_is_leader(fresh, t));
    }
    ck_assert_str_eq(api.lease.incarnation, "two");
    ck_assert_int_eq(api.lease.spec.transitions, 1);
    ck_assert_int_gt(api.writes_ok, writes); /* the new one's renewals only */
    ck_assert_int_eq(count_events(old, LD_EV_IDENTITY_CONFLICT, NULL), 1);
}
END_TEST

START_TEST(writes_carry_the_incarnation_and_release_drops_it)
{
    struct ld_election *e = incarnated("a", "0123456789abcdef0123456789abcdef");
    ck_assert_int_eq(step(e, 0).kind, LD_ACT_GET); /* 404 */
    struct ld_action a = ld_election_next(e, at(1));
    ck_assert_int_eq(a.kind, LD_ACT_CREATE);
    char *body = ld_lease_encode(a.lease);
    ck_assert_ptr_nonnull(
        strstr(body, "\"leaderd.io/incarnation\":\"0123456789abcdef0123456789abcdef\""));
    free(body);
    deliver(e, &a, 1);
    ck_assert(ld_election_is_leader(e, 1));
    ld_election_shutdown(e, at(2));
    a = ld_election_next(e, at(2));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    ck_assert_str_eq(a.lease->spec.holder, "");
    body = ld_lease_encode(a.lease);
    ck_assert_ptr_null(strstr(body, "leaderd.io/incarnation"));
    free(body);
    deliver(e, &a, 2);
    ck_assert_ptr_null(api.lease.incarnation);
}
END_TEST

/* Shutting down, a process releases only its own incarnation's record. */
START_TEST(shutdown_does_not_release_another_incarnations_record)
{
    put_incarnated("a", "other", 1, WALL0);
    struct ld_election *e = incarnated("a", "mine");
    settle(e, 0);
    ck_assert(!ld_election_is_leader(e, 0));
    ld_election_shutdown(e, at(1));
    ck_assert_int_eq(ld_election_next(e, at(1)).kind, LD_ACT_DONE);
    ck_assert_str_eq(api.lease.spec.holder, "a");
    ck_assert_str_eq(api.lease.incarnation, "other");
}
END_TEST

/* ---- watch-driven ---------------------------------------------------------- */

static void observe_store(struct ld_election *e, int64_t now)
{
    ld_election_observe(e, at(now), &api.lease);
}

/* Stores a record of another client as object uid (as a re-created Lease
 * gets a new one) and feeds it to e through the watch at time now. */
static void watch_record(struct ld_election *e, const char *holder, int32_t transitions,
                         const char *uid, int64_t now)
{
    fake_api_put_record(&api, holder, holder[0] ? 15 : 1, transitions,
                        WALL0 + now * 1000);
    api.lease.uid = strdup(uid);
    observe_store(e, now);
}

/* "b", on standby behind a live "other", then fed by a watch. */
static struct ld_election *watching_standby(void)
{
    fake_api_put_record(&api, "other", 15, 1, WALL0);
    struct ld_election *e = new_engine("b");
    settle(e, 0);
    ld_election_set_watch(e, true);
    return e;
}

START_TEST(watching_standby_does_not_poll)
{
    struct ld_election *e = watching_standby();
    int gets = api.gets;
    for (int64_t t = 2000; t <= 120000; t += 2000) {
        fake_api_put_record(&api, "other", 15, 1, WALL0 + t * 1000);
        observe_store(e, t);
        struct ld_action a = ld_election_next(e, at(t));
        ck_assert_int_eq(a.kind, LD_ACT_WAIT);
        /* No poll: the next look is the silence check, three retry periods
         * after this event, and every renewal pushes it further. */
        ck_assert_int_eq(a.wake_at_ms, t + 6000);
    }
    ck_assert_int_eq(api.gets, gets);
    /* Woken early, it reads first: a valid foreign Lease is never claimed
     * from the cache. */
    ld_election_wake(e);
    ck_assert_int_eq(ld_election_next(e, at(120001)).kind, LD_ACT_GET);
}
END_TEST

START_TEST(watching_standby_claims_released_lease_without_get)
{
    struct ld_election *e = watching_standby();
    fake_api_put_record(&api, "", 1, 1, WALL0 + 5000 * 1000); /* released */
    int gets = api.gets;
    observe_store(e, 5000);
    struct ld_action a = step(e, 5000);
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    ck_assert_int_eq(api.gets, gets);
    ck_assert(ld_election_is_leader(e, 5000));
    ck_assert_int_eq(api.lease.spec.transitions, 2);
    struct ld_event ev;
    ck_assert_int_eq(count_events(e, LD_EV_STARTED_LEADING, &ev), 1);
    ck_assert_int_eq(ev.acquire_delay_ms, 0);
}
END_TEST

START_TEST(watching_standby_takes_over_at_expiry)
{
    struct ld_election *e = watching_standby();
    fake_api_put_record(&api, "other", 15, 1, WALL0 + 1000 * 1000);
    observe_store(e, 1000); /* the holder's last renewal */
    int gets = api.gets;
    int64_t t = run_until_leader(e, 1000, 30000);
    ck_assert_int_eq(t, 16000); /* exactly at expiry */
    /* The silent watch costs a read every three retry periods, no more. */
    ck_assert_int_le(api.gets - gets, 2);
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert_int_eq(st.watch_missed, 0);
}
END_TEST

START_TEST(stalled_watch_is_caught_by_the_silence_check)
{
    struct ld_election *e = watching_standby();
    observe_store(e, 100);
    /* Released, but the watch never says so. */
    fake_api_put_record(&api, "", 1, 1, WALL0 + 500 * 1000);
    struct ld_action a = ld_election_next(e, at(200));
    ck_assert_int_eq(a.kind, LD_ACT_WAIT);
    ck_assert_int_eq(a.wake_at_ms, 6100);
    settle(e, a.wake_at_ms);
    ck_assert(ld_election_is_leader(e, a.wake_at_ms));
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert_int_eq(st.watch_missed, 1);
}
END_TEST

START_TEST(stale_watch_cache_costs_a_conflict_then_a_get)
{
    fake_api_put_record(&api, "", 1, 1, WALL0);
    struct ld_election *e = new_engine("b");
    ld_election_set_watch(e, true);
    observe_store(e, 0);
    /* The watch lags: someone already took it. */
    fake_api_put_record(&api, "c", 15, 2, WALL0);
    settle(e, 0);
    ck_assert(!ld_election_is_leader(e, 0));
    ck_assert_str_eq(api.lease.spec.holder, "c");
    struct ld_action a = ld_election_next(e, at(2500));
    ck_assert_int_eq(a.kind, LD_ACT_GET);
}
END_TEST

START_TEST(leader_steps_down_on_watched_takeover_and_ignores_own_echo)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    struct ld_lease first;
    ld_lease_init(&first);
    ld_lease_copy(&first, &api.lease);
    settle(e, wake);                               /* a second renewal */
    ld_election_observe(e, at(wake + 10), &first); /* late echo of the first */
    ck_assert(ld_election_is_leader(e, wake + 10));
    ck_assert_int_eq(count_events(e, LD_EV_IDENTITY_CONFLICT, NULL), 0);
    fake_api_put_record(&api, "x", 15, 9, WALL0);
    observe_store(e, wake + 20);
    ck_assert(!ld_election_is_leader(e, wake + 20));
    ld_lease_clear(&first);
}
END_TEST

START_TEST(lagging_event_from_an_older_term_is_ignored)
{
    fake_api_put_record(&api, "", 1, 1, WALL0);
    struct ld_lease old;
    ld_lease_init(&old);
    fake_api_put_record(&api, "other", 15, 1, WALL0 - 1000000);
    ld_lease_copy(&old, &api.lease); /* "other" held it in term 1 */
    fake_api_put_record(&api, "", 1, 1, WALL0);
    struct ld_election *e = new_engine("b");
    ld_election_set_watch(e, true);
    settle(e, 0);
    ck_assert(ld_election_is_leader(e, 0));
    ck_assert_int_eq(api.lease.spec.transitions, 2);
    ld_election_observe(e, at(10), &old);
    ck_assert(ld_election_is_leader(e, 10));
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert_str_eq(st.leader, "b");
    ld_lease_clear(&old);
}
END_TEST

START_TEST(landed_acquire_with_lost_reply_is_ours)
{
    fake_api_put_record(&api, "", 1, 3, WALL0);
    struct ld_election *e = new_engine("b");
    struct ld_action a = step(e, 0); /* GET */
    ck_assert_int_eq(a.kind, LD_ACT_GET);
    a = ld_election_next(e, at(0));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    land_but_lose_reply(e, &a, 5000);
    int updates = api.updates;
    /* The next read shows our own write: no twin. But a write without an
     * answer counts us out for a lease duration (it might have landed
     * later still), so we claim our record only when it has stayed
     * unchanged that long, in the same term. */
    int64_t t = run_until_leader(e, 5000, 60000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_ge(t, 5000 + 15000);
    ck_assert_int_le(t, 5000 + 15000 + 2 * 2400);
    ck_assert_int_eq(api.updates, updates + 1);
    ck_assert_int_eq(api.lease.spec.transitions, 4);
    ck_assert_int_eq(count_events(e, LD_EV_IDENTITY_CONFLICT, NULL), 0);
}
END_TEST

START_TEST(quarantined_twin_does_not_release_on_shutdown)
{
    fake_api_put_record(&api, "a", 15, 2, WALL0);
    struct ld_election *e = new_engine("a");
    settle(e, 0); /* our name, not confirmed by a write of ours */
    ld_election_shutdown(e, at(100));
    ck_assert_int_eq(ld_election_next(e, at(100)).kind, LD_ACT_DONE);
    ck_assert_str_eq(api.lease.spec.holder, "a");
    ck_assert_int_eq(api.updates, 0);
}
END_TEST

/* Deleted under a live holder ("other", seen at 0): that holder may lead
 * until its record would have expired, its view not showing the deletion
 * (its watch may lag), so the Lease is made anew only then, as after a
 * crash (issue #28: the chaos scenario lease-deleted found the old leader
 * still leading when a standby had made it anew at once). */
START_TEST(deleted_lease_is_recreated)
{
    struct ld_election *e = watching_standby();
    fake_api_clear(&api);
    fake_api_init(&api);
    ld_election_observe_deleted(e, at(100), NULL);
    ck_assert_int_le(settle(e, 100), 15000); /* looks again by then */
    ck_assert(!ld_election_is_leader(e, 100));
    ck_assert_int_eq(api.creates, 0);
    /* A GET meanwhile finds it absent and waits all the same. */
    settle(e, 7000);
    ck_assert_int_eq(api.creates, 0);
    int64_t t = run_until_leader(e, 7000, 40000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_ge(t, 15000);
    ck_assert_int_eq(api.creates, 1);
}
END_TEST

/* Deleted when it named nobody (released), or when our view held nothing:
 * no holder can lead on it, so it is made anew at once. */
START_TEST(deleted_free_lease_is_recreated_at_once)
{
    struct ld_election *e = watching_standby();
    watch_record(e, "", 2, "uid-2", 1000);
    fake_api_clear(&api);
    fake_api_init(&api);
    ld_election_observe_deleted(e, at(1100), NULL);
    settle(e, 1100);
    ck_assert(ld_election_is_leader(e, 1100));
    ck_assert_int_eq(api.creates, 1);
}
END_TEST

START_TEST(first_lease_is_created_at_term_zero)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    ck_assert(ld_election_is_leader(e, 0));
    ck_assert_int_eq(api.creates, 1);
    ck_assert_int_eq(api.lease.spec.transitions, 0);
}
END_TEST

/* Someone deletes the Lease (kubectl delete, to "unstick" it): the Lease we
 * create again continues the term, so fencing tokens never go back. */
START_TEST(recreated_lease_continues_the_term)
{
    struct ld_election *e = watching_standby();
    fake_api_put_record(&api, "other", 15, 7, WALL0 + 1000000);
    observe_store(e, 1000);
    fake_api_clear(&api);
    fake_api_init(&api);
    ld_election_observe_deleted(e, at(2000), NULL);
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert_str_eq(st.leader, "");
    ck_assert_int_eq(st.term, 7);                 /* absent: the last term, not 0 */
    int64_t t = run_until_leader(e, 2000, 40000); /* at the old record's expiry */
    ck_assert_int_ge(t, 1000 + 15000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_eq(api.creates, 1);
    ck_assert_int_eq(api.lease.spec.transitions, 8);
    ld_election_status(e, &st);
    ck_assert_int_eq(st.term, 8);
}
END_TEST

/* A Lease re-created by someone else starts again at term 0. A watch event
 * with a lower term is news when it is another object (a new uid), even if
 * we never saw the deletion; from the same object it is a lagging event. */
START_TEST(lower_term_of_a_new_object_is_news)
{
    struct ld_election *e = watching_standby();
    watch_record(e, "other", 5, "uid-1", 1000);
    struct ld_lease lagging;
    ld_lease_init(&lagging);
    fake_api_put_record(&api, "older", 15, 3, WALL0 + 500000);
    api.lease.uid = strdup("uid-1");
    ld_lease_copy(&lagging, &api.lease);
    ld_election_observe(e, at(1500), &lagging);
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert_str_eq(st.leader, "other");
    ck_assert_int_eq(st.term, 5);

    watch_record(e, "go-elector", 0, "uid-2", 2000);
    ld_election_status(e, &st);
    ck_assert_str_eq(st.leader, "go-elector");
    ck_assert_int_eq(st.term, 0);
    ld_lease_clear(&lagging);
}
END_TEST

/* After a deletion and our re-creation, a lagging watch may still deliver the
 * old object's last update and its DELETED: neither is news about the Lease we
 * now hold. */
START_TEST(lagging_events_of_a_deleted_lease_are_ignored)
{
    struct ld_election *e = watching_standby();
    watch_record(e, "other", 5, "uid-old", 1000);
    struct ld_lease old;
    ld_lease_init(&old);
    ck_assert_int_eq(ld_lease_copy(&old, &api.lease), LD_OK);
    fake_api_clear(&api);
    fake_api_init(&api);
    ld_election_observe_deleted(e, at(2000), &old);
    int64_t t = run_until_leader(e, 2000, 40000); /* at the old record's expiry */
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_str_eq(api.lease.uid, "fake-uid-1");
    ck_assert_int_eq(api.lease.spec.transitions, 6);
    count_events(e, LD_EV_STOPPED_LEADING, NULL); /* drain */

    ld_election_observe(e, at(t + 10), &old);
    ld_election_observe_deleted(e, at(t + 20), &old);
    ck_assert(ld_election_is_leader(e, t + 20));
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert_str_eq(st.leader, "b");
    ck_assert_int_eq(st.term, 6);
    ck_assert_int_eq(count_events(e, LD_EV_STOPPED_LEADING, NULL), 0);
    ld_lease_clear(&old);
}
END_TEST

/* A peer that never saw the old Lease re-created it at term 0 and released
 * it: our takeover still leads in a term above every one seen. */
START_TEST(takeover_after_a_reset_by_a_peer_continues_the_term)
{
    struct ld_election *e = watching_standby();
    watch_record(e, "other", 7, "uid-1", 1000);
    watch_record(e, "", 0, "uid-2", 2000); /* released */
    settle(e, 2000);
    ck_assert(ld_election_is_leader(e, 2000));
    ck_assert_int_eq(api.lease.spec.transitions, 8);
}
END_TEST

START_TEST(retry_after_is_honoured)
{
    api.fail_with = LD_ETOOMANY;
    api.retry_after_ms = 7000;
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    ck_assert_int_ge(wake, 7000);
}
END_TEST

START_TEST(standby_polls_within_jitter_bounds)
{
    struct ld_election *leader = new_engine("a");
    struct ld_election *e = new_engine("b");
    settle(leader, 0);
    int64_t t = 1, lwake = 2000;
    int64_t wake = settle(e, t);
    for (int i = 0; i < 200; i++) {
        int64_t gap = wake - t;
        ck_assert_int_ge(gap, 2000);
        ck_assert_int_le(gap, 2400);
        t = wake;
        while (lwake <= t)
            lwake = settle(leader, lwake);
        wake = settle(e, t);
        ck_assert(!ld_election_is_leader(e, t));
    }
}
END_TEST

START_TEST(wake_starts_attempt_early)
{
    fake_api_put_record(&api, "other", 15, 1, WALL0);
    struct ld_election *e = new_engine("b");
    int64_t wake = settle(e, 0);
    ck_assert_int_ge(wake, 2000);
    fake_api_put_record(&api, "", 1, 1, WALL0); /* released */
    ld_election_wake(e);
    settle(e, 10);
    ck_assert(ld_election_is_leader(e, 10));
}
END_TEST

START_TEST(rejects_bad_configuration)
{
    struct {
        int64_t lease, renew, retry;
        const char *id;
    } bad[] = {
        {15000, 15000, 2000, "a"}, /* lease == renew */
        {15000, 2400, 2000, "a"},  /* renew == 1.2 x retry */
        {1500, 1000, 500, "a"},    /* not whole seconds */
        {0, 0, 0, "a"},
        {15000, 10000, 2000, ""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct ld_election_config c = config_for(bad[i].id);
        c.lease_duration_ms = bad[i].lease;
        c.renew_deadline_ms = bad[i].renew;
        c.retry_period_ms = bad[i].retry;
        struct ld_errinfo err;
        ck_assert_ptr_null(ld_election_new(&c, &err));
        ck_assert_int_eq(err.code, LD_EINVAL);
    }
}
END_TEST

/* A valid Lease whose holder is too long to keep (1 MiB), with an
 * annotation, as another client would write it. */
static void put_abridged_record(int32_t transitions)
{
    static const char pre[] =
        "{\"metadata\":{\"name\":\"lock\",\"namespace\":\"default\","
        "\"annotations\":{\"keep\":\"me\"}},"
        "\"spec\":{\"holderIdentity\":\"";
    char post[160];
    snprintf(
        post, sizeof(post),
        "\",\"leaseDurationSeconds\":15,\"renewTime\":\"2023-11-14T22:13:20.000000Z\","
        "\"leaseTransitions\":%d}}",
        (int)transitions);
    size_t holder = 1024 * 1024, len = strlen(pre) + holder + strlen(post);
    char *text = malloc(len + 1);
    ck_assert_ptr_nonnull(text);
    memcpy(text, pre, strlen(pre));
    memset(text + strlen(pre), 'h', holder);
    memcpy(text + strlen(pre) + holder, post, strlen(post) + 1);
    struct ld_lease l;
    ld_lease_init(&l);
    ck_assert_int_eq(ld_lease_decode(text, len, &l, NULL), LD_OK);
    ck_assert(l.spec.holder_abridged);
    fake_api_put_lease(&api, &l);
    ld_lease_clear(&l);
    free(text);
}

/* A holder too long to keep still holds the Lease: the leader that reads
 * it stops claiming at once; a standby takes it over lease-duration after
 * first seeing it, with a normal record that keeps the other fields. */
START_TEST(abridged_holder_counts_as_someone_else)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    ck_assert(ld_election_is_leader(e, 0));
    put_abridged_record(api.lease.spec.transitions + 1);
    int64_t seen = wake;
    settle(e, seen); /* the renewal conflicts, the GET shows the new holder */
    ck_assert(!ld_election_is_leader(e, seen));
    struct ld_event ev;
    ck_assert_int_eq(count_events(e, LD_EV_STOPPED_LEADING, &ev), 1);
    ck_assert_int_eq(ev.reason, LD_STOP_TAKEN);
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert_ptr_nonnull(strstr(st.leader, "...(truncated: 1048576 bytes, fnv1a64="));
    int32_t term = api.lease.spec.transitions;
    int64_t t = run_until_leader(e, seen, seen + 60000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_ge(t, seen + 15000);
    ck_assert_int_le(t, seen + 15000 + 2400);
    ck_assert_str_eq(api.lease.spec.holder, "a");
    ck_assert(!api.lease.spec.holder_abridged);
    ck_assert_int_eq(api.lease.spec.transitions, term + 1);
    char *json = ld_lease_encode(&api.lease);
    ck_assert_ptr_nonnull(json);
    ck_assert_ptr_nonnull(strstr(json, "\"holderIdentity\":\"a\""));
    ck_assert_ptr_nonnull(strstr(json, "\"keep\":\"me\""));
    ck_assert_uint_lt(strlen(json), 4096);
    free(json);
}
END_TEST

/* An identity that is the display form of an abridged holder is still not
 * that holder. */
START_TEST(abridged_holder_never_names_us)
{
    put_abridged_record(1);
    char shown[LD_LEASE_MAX_HOLDER + 1];
    snprintf(shown, sizeof(shown), "%s", api.lease.spec.holder);
    struct ld_election *e = new_engine(shown);
    /* Not our record to resume after the resume window, nor to renew: a
     * foreign one, taken over only at expiry, in the next term. */
    int64_t t = run_until_leader(e, 0, 40000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_ge(t, 15000);
    ck_assert_int_eq(api.updates, 1);
    ck_assert_int_eq(api.lease.spec.transitions, 2);
    ck_assert_int_eq(count_events(e, LD_EV_IDENTITY_CONFLICT, NULL), 0);
}
END_TEST

/* ---- randomized multi-replica simulation -------------------------------- */

/* Three engines on one store with lost replies, partitions and a lagging
 * watch; and (issue #28) clocks that run up to 2 % apart, writes the store
 * applied but answered 409 or 5xx, and two of the three processes of one
 * identity. Never two leaders, and a leader's Lease names it and its
 * incarnation. */

#define SIM_REPLICAS 3

struct pending {
    bool active;
    struct ld_action act;
    int64_t apply_at, reply_at;
    bool applied, lost; /* lost: the reply never comes, the caller times out */
    /* Applied by the store, answered 409 or 5xx anyway (issue #28). */
    bool applied_error;
    enum ld_err rc;
    struct ld_lease out;
    struct ld_errinfo err;
};

struct replica {
    struct ld_election *e;
    struct pending p;
    struct ld_lease seen; /* a lagging copy of the store, as a watch sees it */
    char seen_rv[32];     /* the last one handed to the engine */
    int64_t wake;
    bool down; /* partitioned: every request fails or hangs */
    int64_t last_term;
    /* Its clock runs this many parts per million fast (or slow), within
     * what the margin lease duration - renew deadline absorbs. */
    int64_t ppm;
};

/* Replica r's own reading of the simulation's time now. */
static int64_t sim_clock(const struct replica *r, int64_t now)
{
    return now + now * r->ppm / 1000000;
}

static uint64_t sim_rng = 12345;
static uint64_t sim_rand(uint64_t n)
{
    sim_rng = sim_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (sim_rng >> 33) % n;
}

static void sim_issue(struct replica *r, int64_t now)
{
    struct ld_action a = ld_election_next(r->e, at(sim_clock(r, now)));
    if (a.kind == LD_ACT_WAIT) {
        r->wake = a.wake_at_ms;
        return;
    }
    if (a.kind == LD_ACT_DONE) {
        r->wake = INT64_MAX;
        return;
    }
    struct pending *p = &r->p;
    memset(p, 0, sizeof(*p));
    ld_lease_init(&p->out);
    p->active = true;
    p->act = a;
    int64_t latency = (int64_t)sim_rand(400);
    p->lost = r->down ? sim_rand(2) == 0 : sim_rand(50) == 0;
    p->apply_at = now + (int64_t)sim_rand((uint64_t)latency + 1);
    p->reply_at = p->lost ? now + a.timeout_ms : now + latency;
}

/* A watch that lags and sometimes skips states: the copy is refreshed now
 * and then, and handed to the engine when it changed. */
static void sim_watch(struct replica *r, int64_t now)
{
    if (r->down || !api.exists)
        return;
    if (sim_rand(20) == 0) {
        ld_lease_clear(&r->seen);
        ld_lease_copy(&r->seen, &api.lease);
    }
    if (!r->p.active && r->seen.resource_version &&
        strcmp(r->seen.resource_version, r->seen_rv) != 0) {
        snprintf(r->seen_rv, sizeof(r->seen_rv), "%s", r->seen.resource_version);
        ld_election_observe(r->e, at(sim_clock(r, now)), &r->seen);
        r->wake = sim_clock(r, now); /* let the engine decide again */
    }
}

static void sim_tick(struct replica *r, int64_t now, bool watching)
{
    struct pending *p = &r->p;
    if (watching)
        sim_watch(r, now);
    if (p->active && !p->applied && now >= p->apply_at) {
        p->applied = true;
        if (r->down)
            p->rc = ld_errinfo_set(&p->err, LD_ETRANSPORT, "partitioned");
        else
            p->rc = fake_api_execute(&api, &p->act, "default", "lock", &p->out, &p->err);
        p->applied_error = p->rc == LD_OK && !p->lost && sim_rand(25) == 0;
    }
    if (p->active && p->applied && now >= p->reply_at) {
        p->active = false;
        if (p->lost)
            p->rc = ld_errinfo_set(&p->err, LD_ETIMEOUT, "timeout");
        if (p->applied_error)
            p->rc = sim_rand(2) ? ld_errinfo_set(&p->err, LD_ECONFLICT, "applied, 409")
                                : ld_errinfo_set(&p->err, LD_ESERVER, "applied, 504");
        ld_election_result(r->e, at(sim_clock(r, now)), p->rc,
                           p->rc == LD_OK ? &p->out : NULL, &p->err);
        ld_lease_clear(&p->out);
        r->wake = sim_clock(r, now);
    }
    if (!p->active && sim_clock(r, now) >= r->wake)
        sim_issue(r, now);
}

START_TEST(simulation_never_has_two_leaders)
{
    sim_rng = 1000 + (uint64_t)_i;
    bool watching = _i % 2 == 1; /* odd runs: standbys fed by a lagging watch */
    struct replica rs[SIM_REPLICAS];
    memset(rs, 0, sizeof(rs));
    char names[SIM_REPLICAS][16], incarnations[SIM_REPLICAS][16];
    for (int i = 0; i < SIM_REPLICAS; i++) {
        /* r0 runs twice: two live processes of one identity (issue #28),
         * told apart by their incarnations only. */
        snprintf(names[i], sizeof(names[i]), "r%d", i == 1 ? 0 : i);
        snprintf(incarnations[i], sizeof(incarnations[i]), "inc%d", i);
        struct ld_election_config c = config_for(names[i]);
        c.incarnation = incarnations[i];
        c.seed = (uint64_t)i * 7 + (uint64_t)_i;
        rs[i].e = engine_for(&c);
        rs[i].ppm = (int64_t)sim_rand(40001) - 20000; /* 2 % either way */
        ld_lease_init(&rs[i].seen);
        ld_election_set_watch(rs[i].e, watching);
    }
    int leader_periods = 0, prev_leader = -1;
    for (int64_t now = 0; now < 600000; now += 10) {
        if (now % 20000 == 0) {
            /* Every 20 s re-roll which replicas are partitioned. */
            for (int i = 0; i < SIM_REPLICAS; i++)
                rs[i].down = sim_rand(4) == 0;
        }
        int leaders = 0, who = -1;
        for (int i = 0; i < SIM_REPLICAS; i++) {
            sim_tick(&rs[i], now, watching);
            if (ld_election_is_leader(rs[i].e, sim_clock(&rs[i], now))) {
                leaders++;
                who = i;
                /* Stronger than "one leader at a time": nobody else's
                 * acquisition may already be stored while i claims. */
                ck_assert_msg(
                    ld_lease_held_by(&api.lease, names[i], incarnations[i]),
                    "replica %d (%s) leads at t=%lld but the Lease names %s (%s)", i,
                    incarnations[i], (long long)now, api.lease.spec.holder,
                    api.lease.incarnation ? api.lease.incarnation : "-");
            }
            struct ld_election_status st;
            ld_election_status(rs[i].e, &st);
            ck_assert_int_ge(st.term, rs[i].last_term); /* term never decreases */
            rs[i].last_term = st.term;
        }
        ck_assert_msg(leaders <= 1, "two leaders at t=%lld", (long long)now);
        if (who >= 0 && who != prev_leader)
            leader_periods++;
        if (who >= 0)
            prev_leader = who;
    }
    ck_assert_int_gt(leader_periods, 1); /* the faults did move leadership */
    for (int i = 0; i < SIM_REPLICAS; i++) {
        ld_lease_clear(&rs[i].p.out);
        ld_lease_clear(&rs[i].seen);
    }
}
END_TEST

/* ---- gray failure: requests slower than the timeout, applied late -------- */

/* A replica whose requests take read_ms / write_ms longer; one slower than
 * its timeout is answered with a timeout, and a write among those is still
 * applied by the store, late (kept in late[]). */
struct gray {
    struct ld_election *e;
    char name[16];
    int64_t read_ms, write_ms;
    int64_t wake, reply_at;
    int writes_sent;
    int64_t last_write_at;
    char seen_rv[32]; /* the last stored version its watch delivered */
    bool busy;
    enum ld_err rc;
    struct ld_lease out;
    struct ld_errinfo err;
};

#define GRAY_LATE 16
struct late_write {
    bool active;
    int64_t apply_at;
    enum ld_action_kind kind;
    struct ld_lease lease;
};
static struct late_write late[GRAY_LATE];

static void gray_issue(struct gray *g, int64_t now)
{
    struct ld_action a = ld_election_next(g->e, at(now));
    if (a.kind == LD_ACT_WAIT || a.kind == LD_ACT_DONE) {
        g->wake = a.kind == LD_ACT_WAIT ? a.wake_at_ms : INT64_MAX;
        return;
    }
    bool write = a.kind != LD_ACT_GET;
    int64_t latency = write ? g->write_ms : g->read_ms;
    g->busy = true;
    if (write) {
        g->writes_sent++;
        g->last_write_at = now;
    }
    ld_lease_init(&g->out);
    if (latency <= a.timeout_ms) {
        g->rc = fake_api_execute(&api, &a, "default", "lock", &g->out, &g->err);
        g->reply_at = now + latency;
        return;
    }
    g->rc = ld_errinfo_set(&g->err, LD_ETIMEOUT, "timeout");
    g->reply_at = now + a.timeout_ms;
    for (int i = 0; write && i < GRAY_LATE; i++) {
        if (late[i].active)
            continue;
        late[i].active = true;
        late[i].apply_at = now + latency;
        late[i].kind = a.kind;
        ld_lease_init(&late[i].lease);
        ck_assert_int_eq(ld_lease_copy(&late[i].lease, a.lease), LD_OK);
        return;
    }
    ck_assert_msg(!write, "more than %d writes in flight", GRAY_LATE);
}

/* Applies the late writes that are due; returns how many landed. */
static int gray_apply_late(int64_t now)
{
    int landed = 0;
    for (int i = 0; i < GRAY_LATE; i++) {
        if (!late[i].active || now < late[i].apply_at)
            continue;
        struct ld_action a = {.kind = late[i].kind, .lease = &late[i].lease};
        struct ld_lease out;
        struct ld_errinfo err;
        ld_lease_init(&out);
        if (fake_api_execute(&api, &a, "default", "lock", &out, &err) == LD_OK)
            landed++;
        ld_lease_clear(&out);
        ld_lease_clear(&late[i].lease);
        late[i].active = false;
    }
    return landed;
}

static void gray_tick(struct gray *g, int64_t now)
{
    if (g->busy && now >= g->reply_at) {
        g->busy = false;
        ld_election_result(g->e, at(now), g->rc, g->rc == LD_OK ? &g->out : NULL,
                           &g->err);
        ld_lease_clear(&g->out);
        g->wake = now;
    }
    if (!g->busy && now >= g->wake)
        gray_issue(g, now);
}

/* With a watch, every replica between requests sees each stored version
 * at once (its own late writes included), as a healthy stream shows them. */
static bool gray_watching;

static void gray_watch(struct gray *g, int64_t now)
{
    if (!gray_watching || g->busy || !api.exists ||
        strcmp(api.lease.resource_version, g->seen_rv) == 0)
        return;
    snprintf(g->seen_rv, sizeof(g->seen_rv), "%s", api.lease.resource_version);
    ld_election_observe(g->e, at(now), &api.lease);
    g->wake = now;
}

/* One 10 ms step of every replica; checks that at most one claims to lead
 * and that it is the one the store names. Returns the leader or -1. */
static int gray_step(struct gray *gs, int n, int64_t now)
{
    gray_apply_late(now);
    for (int i = 0; i < n; i++)
        gray_watch(&gs[i], now);
    int who = -1;
    for (int i = 0; i < n; i++) {
        gray_tick(&gs[i], now);
        if (!ld_election_is_leader(gs[i].e, now))
            continue;
        ck_assert_msg(who < 0, "%s and %s lead at t=%lld", gs[who].name, gs[i].name,
                      (long long)now);
        ck_assert_msg(strcmp(api.lease.spec.holder, gs[i].name) == 0,
                      "%s leads at t=%lld but the Lease names %s", gs[i].name,
                      (long long)now, api.lease.spec.holder);
        who = i;
    }
    return who;
}

static void gray_init(struct gray *gs, int n)
{
    memset(gs, 0, sizeof(*gs) * (size_t)n);
    memset(late, 0, sizeof(late));
    for (int i = 0; i < n; i++) {
        snprintf(gs[i].name, sizeof(gs[i].name), "g%d", i);
        struct ld_election_config c = config_for(gs[i].name);
        c.seed = (uint64_t)i + 1;
        gs[i].e = engine_for(&c);
        ld_election_set_watch(gs[i].e, gray_watching);
    }
}

static void gray_clear(void)
{
    for (int i = 0; i < GRAY_LATE; i++)
        ld_lease_clear(&late[i].lease);
}

/* Timings of config_for, and the 7 s of extra latency (> the 5 s timeout). */
#define G_LEASE 15000
#define G_RENEW 10000
#define G_RETRY 2000
#define G_LATENCY 7000

/* The leader's writes take longer than its timeout but land (its reads are
 * quick, as they can be). It steps down at its renew deadline; its late
 * writes must not keep the Lease alive for ever: the healthy standby leads
 * within renew-deadline + lease-duration + 2 x retry-period + the latency. */
START_TEST(late_writes_of_a_deposed_leader_do_not_keep_the_lease)
{
    gray_watching = _i == 1; /* run 1: fed by a watch, as leaderd is */
    struct gray gs[2];
    gray_init(gs, 2);
    int64_t fault = 30000, bound = fault + G_RENEW + G_LEASE + 2 * G_RETRY + G_LATENCY;
    int64_t standby_led = -1;
    for (int64_t now = 0; now < 150000; now += 10) {
        if (now == fault) {
            ck_assert(ld_election_is_leader(gs[0].e, now));
            gs[0].write_ms = G_LATENCY;
        }
        int who = gray_step(gs, 2, now);
        if (who == 1 && standby_led < 0)
            standby_led = now;
        if (standby_led >= 0)
            ck_assert_msg(who == 1, "the healthy standby lost the Lease at t=%lld",
                          (long long)now);
    }
    ck_assert_msg(standby_led >= 0, "the healthy standby never led");
    ck_assert_msg(standby_led <= bound, "the standby led at %lld, after %lld",
                  (long long)standby_led, (long long)bound);
    gray_clear();
}
END_TEST

/* Every replica's requests, reads too, take longer than the timeout, and
 * the writes land late. Nobody can lead meanwhile; once it ends, leadership
 * is back within lease-duration + 2 x retry-period + twice the latency. A
 * liveness guard: the engine met it before the count-out too, which must
 * not cost more than that. */
START_TEST(leadership_returns_after_a_slowdown_of_the_whole_api)
{
    gray_watching = _i == 1;
    struct gray gs[3];
    gray_init(gs, 3);
    int64_t slow_from = 30000, slow_to = 80000;
    int64_t bound = slow_to + G_LEASE + 2 * G_RETRY + 2 * G_LATENCY, back = -1;
    for (int64_t now = 0; now < 160000 && back < 0; now += 10) {
        if (now == slow_from || now == slow_to) {
            for (int i = 0; i < 3; i++)
                gs[i].read_ms = gs[i].write_ms = now == slow_from ? G_LATENCY : 0;
        }
        int who = gray_step(gs, 3, now);
        if (who >= 0 && now >= slow_to)
            back = now;
    }
    ck_assert_msg(back >= 0, "no leader after the slowdown");
    ck_assert_msg(back <= bound, "a leader only at %lld, after %lld", (long long)back,
                  (long long)bound);
    gray_clear();
}
END_TEST

/* After an unanswered write, even a replica whose record nobody else wants
 * waits a whole lease duration since that write before it writes again. */
START_TEST(unanswered_write_counts_the_replica_out_for_a_lease_duration)
{
    gray_watching = false;
    struct gray gs[1];
    gray_init(gs, 1);
    int64_t fault = 20000, heal = 0, again = -1, last_unanswered = 0;
    int sent_at_heal = 0;
    for (int64_t now = 0; now < 120000 && again < 0; now += 10) {
        if (now == fault)
            gs[0].write_ms = G_LATENCY;
        /* Heal at the first moment the replica no longer leads. */
        if (now > fault && heal == 0 && !ld_election_is_leader(gs[0].e, now)) {
            heal = now;
            gs[0].write_ms = 0;
            sent_at_heal = gs[0].writes_sent;
            last_unanswered = gs[0].last_write_at;
        }
        if (gray_step(gs, 1, now) == 0 && heal > 0)
            again = now;
    }
    ck_assert_int_gt(heal, 0);
    ck_assert_msg(again >= 0, "never led again");
    ck_assert_int_ge(again, last_unanswered + G_LEASE);
    ck_assert_int_eq(gs[0].writes_sent, sent_at_heal + 1); /* only the claim */
    gray_clear();
}
END_TEST

/* A replica loses leadership to requests that all fail with fault until
 * it no longer leads; returns how long after they heal it leads again, and
 * checks that nobody else took the Lease meanwhile. */
static int64_t back_after_failures(enum ld_err fault)
{
    gray_watching = false;
    struct gray gs[1];
    gray_init(gs, 1);
    int64_t heal = 0, again = -1;
    int32_t term = -1;
    for (int64_t now = 0; now < 60000 && again < 0; now += 10) {
        if (now == 10000) {
            term = api.lease.spec.transitions;
            api.fail_with = fault;
        }
        if (api.fail_with != LD_OK && !ld_election_is_leader(gs[0].e, now)) {
            api.fail_with = LD_OK;
            heal = now;
        }
        if (gray_step(gs, 1, now) == 0 && heal > 0)
            again = now;
    }
    ck_assert_int_gt(heal, 0);
    ck_assert_msg(again >= heal, "never led again");
    ck_assert_int_eq(api.lease.spec.transitions, term);
    gray_clear();
    return again - heal;
}

/* A write that could not even connect was never sent: it cannot land
 * late, so a replica back from a short API outage takes its own record
 * back at once rather than after a lease duration. */
START_TEST(connect_failures_do_not_count_a_replica_out)
{
    ck_assert_int_le(back_after_failures(LD_ECONNECT), 2 * 2400);
}
END_TEST

/* Nor can one whose time ran out while it waited for the transport to
 * send it, unlike one that timed out unanswered: that one may still land,
 * so the replica sits out a lease duration before writing again. */
START_TEST(writes_expired_unsent_do_not_count_a_replica_out)
{
    ck_assert_int_le(back_after_failures(LD_ENOTSENT), 2 * 2400);
    fake_api_clear(&api);
    fake_api_init(&api);
    ck_assert_int_gt(back_after_failures(LD_ETIMEOUT), G_LEASE - G_RENEW);
}
END_TEST

/* A renewal times out and the read after it is answered only after the
 * renew deadline: the replica no longer leads, so its unanswered write
 * counts it out and no write follows. */
START_TEST(read_answered_after_the_deadline_sends_no_write)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0); /* leads until 10000 */
    struct ld_action a = ld_election_next(e, at(wake));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    struct ld_errinfo err;
    ld_errinfo_set(&err, LD_ETIMEOUT, "timeout");
    ld_election_result(e, at(wake + 5000), LD_ETIMEOUT, NULL, &err);
    a = ld_election_next(e, at(wake + 5000));
    ck_assert_int_eq(a.kind, LD_ACT_GET);
    deliver(e, &a, 10500);
    ck_assert(!ld_election_is_leader(e, 10500));
    a = ld_election_next(e, at(10500));
    ck_assert_int_eq(a.kind, LD_ACT_WAIT);
    /* It reads again as a standby would, and writes only a lease duration
     * after the unanswered write was sent. */
    int updates = api.updates;
    int64_t t = run_until_leader(e, a.wake_at_ms, 40000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_ge(t, wake + 15000);
    ck_assert_int_eq(api.updates, updates + 1);
}
END_TEST

/* ---- resigning and spec.preferredHolder --------------------------------- */

/* Copies the store's Lease with strategy and preferredHolder set (NULL
 * clears), as a coordinator would write it. */
static void put_preferred(const char *strategy, const char *preferred)
{
    struct ld_lease l;
    ld_lease_init(&l);
    ck_assert_int_eq(ld_lease_copy(&l, &api.lease), LD_OK);
    free(l.spec.strategy);
    free(l.spec.preferred_holder);
    l.spec.strategy = strategy ? strdup(strategy) : NULL;
    l.spec.preferred_holder = preferred ? strdup(preferred) : NULL;
    fake_api_put_lease(&api, &l);
    ld_lease_clear(&l);
}

/* The store's Lease as a watch would deliver it. */
static void watch_store(struct ld_election *e, int64_t now)
{
    ld_election_observe(e, at(now), &api.lease);
}

/* Follows e's wake-ups from `from` to `until`, failing if it ever leads. */
static int64_t run_as_standby(struct ld_election *e, int64_t from, int64_t until)
{
    int64_t t = from;
    for (int i = 0; i < 1000 && t < until; i++) {
        int64_t wake = settle(e, t);
        ck_assert_msg(!ld_election_is_leader(e, t), "led at %lld", (long long)t);
        ck_assert_int_gt(wake, t);
        t = wake;
    }
    ck_assert_int_ge(t, until);
    return t;
}

static bool took_event(struct ld_election *e, enum ld_event_kind kind,
                       enum ld_stop_reason reason)
{
    struct ld_event ev;
    bool seen = false;
    while (ld_election_take_event(e, &ev))
        seen |= ev.kind == kind && ev.reason == reason;
    return seen;
}

START_TEST(resign_releases_then_sits_out_the_cooldown)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    ck_assert(ld_election_is_leader(e, 0));
    ck_assert_int_eq(count_events(e, LD_EV_STARTED_LEADING, NULL), 1);
    ck_assert(!ld_election_resign(new_engine("idle"), at(0), 1000));
    ck_assert(ld_election_resign(e, at(3000), 15000));
    ck_assert(!ld_election_is_leader(e, 3000)); /* before the release is written */
    ck_assert(!ld_election_resign(e, at(3000), 15000));
    struct ld_action a = ld_election_next(e, at(3000));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    ck_assert_str_eq(a.lease->spec.holder, "");
    ck_assert_int_eq(a.lease->spec.duration_s, 1);
    ck_assert_int_eq(a.lease->spec.transitions, 0);
    ck_assert_int_eq(deliver(e, &a, 3005), LD_OK);
    struct ld_event ev;
    bool stopped = false, released = false;
    while (ld_election_take_event(e, &ev)) {
        stopped |= ev.kind == LD_EV_STOPPED_LEADING && ev.reason == LD_STOP_RESIGNED;
        released |= ev.kind == LD_EV_RELEASED && ev.reason == LD_STOP_RESIGNED;
        ck_assert_int_ne(ev.kind, LD_EV_STARTED_LEADING);
    }
    ck_assert(stopped && released);
    /* The Lease stands free all along, yet it is not taken before the
     * cooldown counted from the release write; it is still read. */
    int gets = api.gets;
    int64_t t = run_as_standby(e, 3005, 3000 + 15000);
    ck_assert_int_gt(api.gets, gets);
    ck_assert_str_eq(api.lease.spec.holder, "");
    /* Then it contends as usual and wins at once: a new term. The wait it
     * chose is not counted as waiting for the Lease. */
    t = run_until_leader(e, t, t + 5000);
    ck_assert(ld_election_is_leader(e, t));
    struct ld_event started;
    ck_assert_int_eq(count_events(e, LD_EV_STARTED_LEADING, &started), 1);
    ck_assert_int_ge(started.acquire_delay_ms, 0);
    ck_assert_int_le(started.acquire_delay_ms, 2400);
    ck_assert_int_le(t, 3000 + 15000 + 2400);
    ck_assert_int_eq(api.lease.spec.transitions, 1);
}
END_TEST

/* The term's deadline (term_until_ms) is the last renewal's lead_until,
 * outlives a step-down on purpose (what the leader sent may still land
 * until then), and ends once the record is seen held by another. */
START_TEST(the_term_outlives_a_step_down_on_purpose_until_another_holder_is_seen)
{
    struct ld_election_status st;
    struct ld_election *e = new_engine("a");
    ld_election_status(e, &st);
    ck_assert_int_eq(st.term_until_ms, INT64_MIN);
    settle(e, 0);
    ld_election_status(e, &st);
    ck_assert(st.leading);
    int64_t term_until = st.lead_until_ms;
    ck_assert_int_eq(st.term_until_ms, term_until);
    ck_assert(ld_election_resign(e, at(3000), 15000));
    ld_election_status(e, &st);
    ck_assert(!st.leading);
    ck_assert_int_eq(st.term_until_ms, term_until);
    /* Before the release is written, another holder shows up. */
    fake_api_put_record(&api, "intruder", 15, 7, WALL0);
    ld_election_observe(e, at(3010), &api.lease);
    ld_election_status(e, &st);
    ck_assert_int_eq(st.term_until_ms, INT64_MIN);
}
END_TEST

START_TEST(resign_with_a_renewal_in_flight_never_leads_again)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    struct ld_action a = ld_election_next(e, at(wake));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE); /* the fast-path renewal */
    ck_assert_str_eq(a.lease->spec.holder, "a");
    (void)count_events(e, LD_EV_STARTED_LEADING, NULL);
    ck_assert(ld_election_resign(e, at(wake + 1), 15000));
    ck_assert_int_eq(deliver(e, &a, wake + 2), LD_OK); /* it lands */
    ck_assert(!ld_election_is_leader(e, wake + 2));
    struct ld_action r = ld_election_next(e, at(wake + 2));
    ck_assert_int_eq(r.kind, LD_ACT_UPDATE);
    ck_assert_str_eq(r.lease->spec.holder, "");
    ck_assert_int_eq(deliver(e, &r, wake + 3), LD_OK);
    ck_assert_int_eq(count_events(e, LD_EV_STARTED_LEADING, NULL), 0);
    ck_assert_str_eq(api.lease.spec.holder, "");
    ck_assert_int_eq(api.lease.spec.transitions, 0);
}
END_TEST

/* The renewal's answer is lost: it may have landed, so the release reads
 * first and writes against what it read. */
START_TEST(resign_after_a_lost_renewal_reply_reads_then_releases)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    struct ld_action a = ld_election_next(e, at(wake));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    ck_assert(ld_election_resign(e, at(wake + 1), 15000));
    land_but_lose_reply(e, &a, wake + 500);
    int64_t t = wake + 500;
    struct ld_action g = step(e, t);
    if (g.kind == LD_ACT_WAIT) {
        t = g.wake_at_ms;
        g = step(e, t);
    }
    ck_assert_int_eq(g.kind, LD_ACT_GET);
    struct ld_action r = step(e, t);
    ck_assert_int_eq(r.kind, LD_ACT_UPDATE);
    ck_assert_str_eq(api.lease.spec.holder, "");
    ck_assert_int_eq(api.lease.spec.transitions, 0);
    ck_assert(took_event(e, LD_EV_RELEASED, LD_STOP_RESIGNED));
    ck_assert(!ld_election_is_leader(e, t));
}
END_TEST

START_TEST(resign_release_retries_a_conflict_after_a_get)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    free(api.lease.resource_version);
    api.lease.resource_version = strdup("555");
    ck_assert(ld_election_resign(e, at(100), 15000));
    settle(e, 100);
    ck_assert_str_eq(api.lease.spec.holder, "");
    ck_assert_int_eq(api.updates, 2);
    ck_assert(took_event(e, LD_EV_RELEASED, LD_STOP_RESIGNED));
}
END_TEST

/* A release that cannot be written is given up within renew_deadline and
 * reported; the replica still does not claim before the cooldown, and
 * afterwards resumes its own record without a term change. */
static void resign_against_failing_api(enum ld_err fault)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    api.fail_with = fault;
    ck_assert(ld_election_resign(e, at(1000), 15000));
    int64_t t = 1000;
    bool failed = false;
    for (int i = 0; i < 100 && !failed; i++) {
        struct ld_action a = step(e, t);
        struct ld_event ev;
        while (ld_election_take_event(e, &ev))
            failed |= ev.kind == LD_EV_RELEASE_FAILED && ev.reason == LD_STOP_RESIGNED;
        if (failed)
            break;
        if (a.kind == LD_ACT_WAIT)
            t = a.wake_at_ms;
        ck_assert(!ld_election_is_leader(e, t));
    }
    ck_assert(failed);
    ck_assert_int_le(t, 1000 + 10000);
    api.fail_with = LD_OK;
    ck_assert_str_eq(api.lease.spec.holder, "a");
    t = run_as_standby(e, t, 1000 + 15000);
    t = run_until_leader(e, t, t + 20000);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_int_eq(api.lease.spec.transitions, 0);
}

START_TEST(resign_release_failing_is_bounded_and_reported)
{
    resign_against_failing_api(LD_ETRANSPORT);
}
END_TEST

START_TEST(resign_release_timing_out_is_bounded_and_reported)
{
    resign_against_failing_api(LD_ETIMEOUT);
}
END_TEST

/* Hand-over: the standby takes the released Lease at its next attempt; the
 * resigner, cooling down, leaves it alone even when it is free again, then
 * contends as usual. Terms only grow; never two leaders. */
START_TEST(resign_hands_over_and_contention_resumes_after_the_cooldown)
{
    struct ld_election *a = new_engine("a");
    struct ld_election *b = new_engine("b");
    settle(a, 0);
    int64_t wb = settle(b, 1);
    ck_assert(ld_election_is_leader(a, 1) && !ld_election_is_leader(b, 1));
    ck_assert(ld_election_resign(a, at(1000), 15000));
    int64_t wa = settle(a, 1000);
    int64_t t = 1000;
    while (!ld_election_is_leader(b, t) && t < 1000 + 5000) {
        if (wb <= wa) {
            t = wb;
            wb = settle(b, t);
        } else {
            t = wa;
            wa = settle(a, t);
        }
        ck_assert(!(ld_election_is_leader(a, t) && ld_election_is_leader(b, t)));
    }
    ck_assert(ld_election_is_leader(b, t));
    ck_assert_int_le(t, 1000 + 2400 + 2000);
    ck_assert_int_eq(api.lease.spec.transitions, 1);
    ld_election_shutdown(b, at(t + 100));
    ck_assert_int_eq(settle(b, t + 100), -1);
    ck_assert_str_eq(api.lease.spec.holder, "");
    t = run_as_standby(a, t + 100, 1000 + 15000);
    t = run_until_leader(a, t, t + 5000);
    ck_assert(ld_election_is_leader(a, t));
    ck_assert_int_eq(api.lease.spec.transitions, 2);
}
END_TEST

START_TEST(preferred_holder_naming_another_hands_over_keeping_the_fields)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    put_preferred("OldestEmulationVersion", "b");
    /* The renewal at wake meets a conflict and reads the request; the
     * release is written in that same attempt. */
    settle(e, wake);
    ck_assert(!ld_election_is_leader(e, wake));
    ck_assert(took_event(e, LD_EV_STOPPED_LEADING, LD_STOP_PREFERRED_HOLDER));
    ck_assert_str_eq(api.lease.spec.holder, "");
    ck_assert_int_eq(api.lease.spec.renew_us, WALL0 + wake * 1000);
    ck_assert_str_eq(api.lease.spec.strategy, "OldestEmulationVersion");
    ck_assert_str_eq(api.lease.spec.preferred_holder, "b");
    int64_t t = wake;
    /* Out for a lease duration (the default hand-over cooldown). */
    run_as_standby(e, t, t + 15000);
}
END_TEST

/* An engine told to ignore preferredHolder (a shard group's member Lease)
 * keeps leading and renewing, the fields written back unchanged. */
START_TEST(preferred_holder_is_ignored_when_configured)
{
    struct ld_election_config c = config_for("a");
    c.ignore_preferred_holder = true;
    struct ld_election *e = engine_for(&c);
    int64_t wake = settle(e, 0);
    put_preferred("OldestEmulationVersion", "b");
    watch_store(e, wake);
    int64_t t = settle(e, wake);
    t = settle(e, t);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert(!took_event(e, LD_EV_STOPPED_LEADING, LD_STOP_PREFERRED_HOLDER));
    ck_assert_str_eq(api.lease.spec.holder, "a");
    ck_assert_str_eq(api.lease.spec.preferred_holder, "b");
}
END_TEST

START_TEST(preferred_holder_seen_by_watch_hands_over_at_the_next_step)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    put_preferred("OldestEmulationVersion", "b");
    watch_store(e, 500);
    struct ld_action a = ld_election_next(e, at(500));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    ck_assert_str_eq(a.lease->spec.holder, "");
    ck_assert_str_eq(a.lease->spec.preferred_holder, "b");
    ck_assert_str_eq(a.lease->spec.strategy, "OldestEmulationVersion");
    ck_assert_int_eq(deliver(e, &a, 501), LD_OK);
    ck_assert(took_event(e, LD_EV_RELEASED, LD_STOP_PREFERRED_HOLDER));
}
END_TEST

START_TEST(preferred_holder_naming_us_or_cleared_keeps_the_leader)
{
    struct ld_election *e = new_engine("a");
    int64_t t = settle(e, 0);
    put_preferred("OldestEmulationVersion", "a");
    for (int i = 0; i < 5; i++) {
        t = settle(e, t);
        ck_assert(ld_election_is_leader(e, t));
    }
    /* Renewals wrote both fields back unchanged. */
    ck_assert_str_eq(api.lease.spec.holder, "a");
    ck_assert_str_eq(api.lease.spec.strategy, "OldestEmulationVersion");
    ck_assert_str_eq(api.lease.spec.preferred_holder, "a");
    /* A request withdrawn before the leader acted on it changes nothing. */
    put_preferred("OldestEmulationVersion", "b");
    watch_store(e, t - 1);
    put_preferred("OldestEmulationVersion", NULL);
    watch_store(e, t - 1);
    t = settle(e, t);
    ck_assert(ld_election_is_leader(e, t));
    ck_assert_ptr_null(api.lease.spec.preferred_holder);
    ck_assert_str_eq(api.lease.spec.strategy, "OldestEmulationVersion");
    ck_assert(!took_event(e, LD_EV_STOPPED_LEADING, LD_STOP_PREFERRED_HOLDER));
}
END_TEST

/* A hand-over begun ahead of the next step, so a caller can hold its
 * release; given up, nothing is written and the Lease keeps our name. */
START_TEST(a_due_hand_over_begins_before_the_release_and_can_be_given_up)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    ck_assert(!ld_election_resign_due(e, at(100))); /* nothing asked */
    put_preferred("OldestEmulationVersion", "b");
    watch_store(e, 500);
    int writes = api.writes_ok;
    ck_assert(ld_election_resign_due(e, at(500)));
    ck_assert(!ld_election_is_leader(e, 500));
    ck_assert(took_event(e, LD_EV_STOPPED_LEADING, LD_STOP_PREFERRED_HOLDER));
    ck_assert(!ld_election_resign_due(e, at(501))); /* under way already */
    ld_election_abandon_release(e, at(600));
    ck_assert(took_event(e, LD_EV_RELEASE_FAILED, LD_STOP_PREFERRED_HOLDER));
    struct ld_election_status st;
    ld_election_status(e, &st);
    ck_assert(!st.resigning);
    ck_assert_int_ne(ld_election_next(e, at(600)).kind, LD_ACT_UPDATE);
    ck_assert_int_eq(api.writes_ok, writes);
    ck_assert_str_eq(api.lease.spec.holder, "a");
}
END_TEST

/* A leader given back while not contending: the same, then a standby. */
START_TEST(a_due_give_back_begins_before_the_release)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    ld_election_set_contending(e, at(100), false);
    ck_assert(ld_election_resign_due(e, at(100)));
    ck_assert(took_event(e, LD_EV_STOPPED_LEADING, LD_STOP_NOT_CONTENDING));
    /* Let go, its release goes out as ld_election_next would have sent it. */
    struct ld_action a = ld_election_next(e, at(100));
    ck_assert_int_eq(a.kind, LD_ACT_UPDATE);
    ck_assert_str_eq(a.lease->spec.holder, "");
    ck_assert_int_eq(deliver(e, &a, 101), LD_OK);
    ck_assert(took_event(e, LD_EV_RELEASED, LD_STOP_NOT_CONTENDING));
}
END_TEST

/* A shutdown's release given up: done, with nothing written. */
START_TEST(a_shutdowns_release_given_up_is_done_unwritten)
{
    struct ld_election *e = new_engine("a");
    settle(e, 0);
    int writes = api.writes_ok;
    ld_election_shutdown(e, at(100));
    ck_assert(took_event(e, LD_EV_STOPPED_LEADING, LD_STOP_SHUTDOWN));
    ld_election_abandon_release(e, at(200));
    ck_assert(took_event(e, LD_EV_RELEASE_FAILED, LD_STOP_SHUTDOWN));
    ck_assert_int_eq(ld_election_next(e, at(200)).kind, LD_ACT_DONE);
    ck_assert(!ld_election_is_leader(e, 200));
    ck_assert_int_eq(api.writes_ok, writes);
    ck_assert_str_eq(api.lease.spec.holder, "a");
    /* Nothing to give up on an engine that is neither. */
    struct ld_election *f = new_engine("f");
    ld_election_abandon_release(f, at(0));
    ck_assert_int_eq(ld_election_next(f, at(0)).kind, LD_ACT_GET);
}
END_TEST

/* A preferredHolder too long to keep names someone else; the release
 * leaves its original value in the object. */
START_TEST(abridged_preferred_holder_hands_over_and_is_kept)
{
    struct ld_election_config c = config_for("a");
    c.handover_cooldown_ms = 4000;
    struct ld_election *e = engine_for(&c);
    settle(e, 0);
    size_t n = 4096;
    char *long_name = malloc(n + 1);
    ck_assert_ptr_nonnull(long_name);
    memset(long_name, 'p', n);
    long_name[n] = '\0';
    char *text = ld_lease_encode(&api.lease);
    ck_assert_ptr_nonnull(text);
    json_t *o = json_loads(text, 0, NULL);
    free(text);
    ck_assert_ptr_nonnull(o);
    json_t *spec = json_object_get(o, "spec");
    json_object_set_new(spec, "strategy", json_string("OldestEmulationVersion"));
    json_object_set_new(spec, "preferredHolder", json_string(long_name));
    struct ld_lease l;
    ld_lease_init(&l);
    ck_assert_int_eq(ld_lease_from_json(o, &l, NULL), LD_OK);
    ck_assert(l.spec.preferred_abridged);
    fake_api_put_lease(&api, &l);
    ld_lease_clear(&l);
    json_decref(o);
    watch_store(e, 100);
    settle(e, 100);
    ck_assert(!ld_election_is_leader(e, 100));
    ck_assert_str_eq(api.lease.spec.holder, "");
    spec = json_object_get(api.lease.object, "spec");
    ck_assert_str_eq(json_string_value(json_object_get(spec, "preferredHolder")),
                     long_name);
    free(long_name);
    /* The configured hand-over cooldown applies. */
    int64_t t = run_as_standby(e, 100, 4100);
    ck_assert_int_le(t, 4100 + 2400);
}
END_TEST

START_TEST(shutdown_during_a_resignation_still_releases_and_ends)
{
    struct ld_election *e = new_engine("a");
    int64_t wake = settle(e, 0);
    struct ld_action a = ld_election_next(e, at(wake));
    ck_assert(ld_election_resign(e, at(wake), 15000));
    ld_election_shutdown(e, at(wake + 1));
    ck_assert_int_eq(deliver(e, &a, wake + 2), LD_OK);
    ck_assert_int_eq(settle(e, wake + 2), -1);
    ck_assert_str_eq(api.lease.spec.holder, "");
}
END_TEST

static Suite *election_suite(void)
{
    Suite *s = suite_create("election");
    TCase *tc = tcase_create("engine");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, acquires_absent_lease_by_create);
    tcase_add_test(tc, create_carries_the_configured_metadata_only_on_create);
    tcase_add_test(tc, own_annotations_go_with_every_write);
    tcase_add_test(tc, not_contending_never_claims_then_claims_at_once);
    tcase_add_test(tc, leader_not_contending_gives_back_and_stays_out);
    tcase_add_test(tc, not_contending_while_a_claim_is_in_flight);
    tcase_add_test(tc, takes_released_lease_at_once_and_counts_transition);
    tcase_add_test(tc, never_takes_unexpired_foreign_lease);
    tcase_add_test(tc, takeover_waits_full_duration_from_first_observation);
    tcase_add_test(tc, renews_with_fast_path_put_keeping_acquire_time);
    tcase_add_test(tc, renewal_conflict_falls_back_to_get_and_keeps_leading);
    tcase_add_test(tc, loses_race_on_conflict_and_rereads_before_writing);
    tcase_add_test(tc, steps_down_at_renew_deadline_while_api_hangs);
    tcase_add_test(tc, steps_down_when_errors_persist);
    tcase_add_test(tc, step_down_when_lease_taken);
    tcase_add_test(tc, transitions_count_each_holder_change);
    tcase_add_test(tc, release_writes_client_go_record);
    tcase_add_test(tc, release_retries_conflict_after_get);
    tcase_add_test(tc, release_skipped_when_not_holder_or_disabled);
    tcase_add_test(tc, release_is_bounded_when_api_is_down);
    tcase_add_test(tc, malformed_reads_never_grant_leadership);
    tcase_add_test(tc, restart_with_same_identity_resumes_term);
    tcase_add_test(tc, distrusting_own_record_at_start_waits_a_lease_duration);
    tcase_add_test(tc, live_twin_at_start_is_detected_and_never_joined);
    tcase_add_test(tc, twin_writing_during_leadership_is_detected);
    tcase_add_test(tc, own_timed_out_write_is_not_a_twin);
    tcase_add_test(tc, own_identity_other_incarnation_is_taken_over_after_expiry);
    tcase_add_test(
        tc, predecessors_are_over_at_an_expiry_takeover_or_a_lease_duration_after_a_gap);
    tcase_add_test(tc, own_identity_without_incarnation_is_not_ours);
    tcase_add_test(tc, own_incarnation_is_resumed_and_renewed_as_ours);
    tcase_add_test(tc, late_renewal_of_dead_predecessor_is_no_quarantine);
    tcase_add_test(tc, two_incarnations_never_lead_at_once);
    tcase_add_test(tc, writes_carry_the_incarnation_and_release_drops_it);
    tcase_add_test(tc, shutdown_does_not_release_another_incarnations_record);
    tcase_add_test(tc, watching_standby_does_not_poll);
    tcase_add_test(tc, watching_standby_claims_released_lease_without_get);
    tcase_add_test(tc, watching_standby_takes_over_at_expiry);
    tcase_add_test(tc, stale_watch_cache_costs_a_conflict_then_a_get);
    tcase_add_test(tc, stalled_watch_is_caught_by_the_silence_check);
    tcase_add_test(tc, leader_steps_down_on_watched_takeover_and_ignores_own_echo);
    tcase_add_test(tc, deleted_lease_is_recreated);
    tcase_add_test(tc, deleted_free_lease_is_recreated_at_once);
    tcase_add_test(tc, landed_acquire_with_lost_reply_is_ours);
    tcase_add_test(tc, abridged_holder_counts_as_someone_else);
    tcase_add_test(tc, abridged_holder_never_names_us);
    tcase_add_test(tc, quarantined_twin_does_not_release_on_shutdown);
    tcase_add_test(tc, lagging_event_from_an_older_term_is_ignored);
    tcase_add_test(tc, first_lease_is_created_at_term_zero);
    tcase_add_test(tc, recreated_lease_continues_the_term);
    tcase_add_test(tc, lower_term_of_a_new_object_is_news);
    tcase_add_test(tc, lagging_events_of_a_deleted_lease_are_ignored);
    tcase_add_test(tc, takeover_after_a_reset_by_a_peer_continues_the_term);
    tcase_add_test(tc, retry_after_is_honoured);
    tcase_add_test(tc, standby_polls_within_jitter_bounds);
    tcase_add_test(tc, wake_starts_attempt_early);
    tcase_add_test(tc, rejects_bad_configuration);
    suite_add_tcase(s, tc);
    TCase *rs = tcase_create("resign");
    tcase_add_checked_fixture(rs, setup, teardown);
    tcase_add_test(rs, resign_releases_then_sits_out_the_cooldown);
    tcase_add_test(rs,
                   the_term_outlives_a_step_down_on_purpose_until_another_holder_is_seen);
    tcase_add_test(rs, resign_with_a_renewal_in_flight_never_leads_again);
    tcase_add_test(rs, resign_after_a_lost_renewal_reply_reads_then_releases);
    tcase_add_test(rs, resign_release_retries_a_conflict_after_a_get);
    tcase_add_test(rs, resign_release_failing_is_bounded_and_reported);
    tcase_add_test(rs, resign_release_timing_out_is_bounded_and_reported);
    tcase_add_test(rs, resign_hands_over_and_contention_resumes_after_the_cooldown);
    tcase_add_test(rs, preferred_holder_naming_another_hands_over_keeping_the_fields);
    tcase_add_test(rs, preferred_holder_is_ignored_when_configured);
    tcase_add_test(rs, preferred_holder_seen_by_watch_hands_over_at_the_next_step);
    tcase_add_test(rs, preferred_holder_naming_us_or_cleared_keeps_the_leader);
    tcase_add_test(rs, abridged_preferred_holder_hands_over_and_is_kept);
    tcase_add_test(rs, a_due_hand_over_begins_before_the_release_and_can_be_given_up);
    tcase_add_test(rs, a_due_give_back_begins_before_the_release);
    tcase_add_test(rs, a_shutdowns_release_given_up_is_done_unwritten);
    tcase_add_test(rs, shutdown_during_a_resignation_still_releases_and_ends);
    suite_add_tcase(s, rs);
    TCase *sim = tcase_create("simulation");
    tcase_set_timeout(sim, 60);
    tcase_add_checked_fixture(sim, setup, teardown);
    tcase_add_loop_test(sim, simulation_never_has_two_leaders, 0, 4);
    tcase_add_loop_test(sim, late_writes_of_a_deposed_leader_do_not_keep_the_lease, 0, 2);
    tcase_add_loop_test(sim, leadership_returns_after_a_slowdown_of_the_whole_api, 0, 2);
    tcase_add_test(sim, connect_failures_do_not_count_a_replica_out);
    tcase_add_test(sim, writes_expired_unsent_do_not_count_a_replica_out);
    tcase_add_test(sim, read_answered_after_the_deadline_sends_no_write);
    tcase_add_test(sim, unanswered_write_counts_the_replica_out_for_a_lease_duration);
    suite_add_tcase(s, sim);
    return s;
}

int main(void)
{
    return ld_test_run(election_suite());
}
