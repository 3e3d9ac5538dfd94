/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_host: the election host (many engines, one loop, one watch) over
 * the in-memory Lease API of support/fake_transport on a fake clock. Every
 * test is a deterministic simulation of a few fake minutes; every publish
 * is checked against the API's own log: an election that claims
 * leadership has a successful write of its Lease that started within the
 * renew deadline.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "kube.h"
#include "log.h"
#include "support/fake_transport.h"
#include "support/fleet.h"
#include "support/run_suite.h"

#define NS FLEET_NS
#define T0_MS FLEET_T0_MS
#define WALL0_US FLEET_WALL0_US
#define LEASE_MS FLEET_LEASE_MS
#define RENEW_MS FLEET_RENEW_MS
#define RETRY_MS FLEET_RETRY_MS
#define MAX_ELECTIONS 16
/* Fake time per ld_host_run call: small enough that the test's own
 * actions (another client's renewals) happen near their times. */
#define STEP_MS 100
#define OTHER FLEET_OTHER

struct fixture;

/* What the callbacks of one election saw. */
struct seen {
    struct fixture *fx;
    char name[64];
    int publishes;
    int claims_past_deadline; /* publishes that claimed leadership unsafely */
    int claims_while_foreign; /* ... while the stored Lease named another */
    int started, stopped;
    enum ld_stop_reason last_stop;
    int64_t stopped_at_ms;
    bool leading;
    int64_t auth_failing_since_ms;
    enum ld_err last_err;
};

struct fixture {
    /* The fake and its clock; fl.other_lease is another client's, renewed
     * while fl.other_every_ms > 0. */
    struct fleet fl;
    struct ld_kube *kube;
    struct ld_host *h;
    struct seen seen[MAX_ELECTIONS];
    size_t n;
    int callbacks;               /* publishes and events, for "none after free" */
    const char *create_metadata; /* for the elections add makes */
    int watch_events;            /* counted by the host's observer */
    /* When drain is set, each publish reads drain_fd dry, as the daemon's
     * exec-child hook reads the supervisor's channel in its publish. */
    bool drain;
    int drain_fd;
    bool hold_release; /* every election's holds_release says this */
    bool give_up;      /* ... and, while it holds, gives the release up */
    /* The host's after_pass, when set: what it saw and what it asks. */
    bool with_after_pass;
    int after_calls;
    int after_saw_all_leading; /* calls at which every election led */
    int64_t after_want_ms;     /* what it returns (INT64_MAX: nothing) */
    int64_t after_last_ms;
    int after_at_want; /* calls made exactly at after_want_ms */
};

static struct fixture fx;

static void on_publish(void *ctx, const struct ld_host_view *v, int64_t now_ms)
{
    struct seen *s = ctx;
    struct fixture *f = s->fx;
    struct ld_election *e = ld_host_election(f->h, v->index);

    f->callbacks++;
    s->publishes++;
    if (f->drain) {
        char buf[64];
        for (int i = 0; i < 100 && read(f->drain_fd, buf, sizeof(buf)) > 0; i++)
            ;
    }
    ck_assert_str_eq(v->name, s->name);
    ck_assert_int_eq(now_ms, fake_transport_now_ms(f->fl.ft));
    s->leading = ld_election_is_leader(e, now_ms);
    s->auth_failing_since_ms = v->auth_failing_since_ms;
    s->last_err = v->last_err ? v->last_err->code : LD_OK;
    if (!s->leading)
        return;
    int64_t w = fleet_last_ok_write_ms(&f->fl, s->name);
    if (w < 0 || now_ms - w > RENEW_MS)
        s->claims_past_deadline++;
    struct ld_lease stored;
    if (fake_transport_lease_get(f->fl.ft, s->name, &stored) != LD_OK ||
        strcmp(stored.spec.holder, "me") != 0)
        s->claims_while_foreign++;
    ld_lease_clear(&stored);
}

static void on_event(void *ctx, size_t index, const struct ld_event *ev)
{
    struct seen *s = ctx;
    (void)index;
    s->fx->callbacks++;
    if (ev->kind == LD_EV_STARTED_LEADING)
        s->started++;
    if (ev->kind == LD_EV_STOPPED_LEADING) {
        s->stopped++;
        s->last_stop = ev->reason;
        s->stopped_at_ms = fake_transport_now_ms(s->fx->fl.ft);
    }
}

static bool holds_release(void *ctx, size_t index, int64_t now_ms)
{
    (void)ctx;
    (void)now_ms;
    if (fx.hold_release && fx.give_up)
        ld_host_abandon_release(fx.h, index);
    return fx.hold_release;
}

/* The submit time of the first release write of name at or after
 * since_ms, -1 if none. */
static int64_t release_write_ms(const char *name, int64_t since_ms)
{
    return fleet_release_ms(&fx.fl, name, -1, since_ms);
}

static void setup(void)
{
    memset(&fx, 0, sizeof(fx));
    fleet_init(&fx.fl, STEP_MS, NULL);
    fx.kube = fleet_kube(&fx.fl);
}

static void teardown(void)
{
    ld_host_free(fx.h);
    ld_kube_free(fx.kube);
    fleet_destroy(&fx.fl);
}

static void count_watch_event(void *ctx)
{
    (void)ctx;
    fx.watch_events++;
}

static bool all_lead(void);

static int64_t record_after_pass(void *ctx, int64_t now_ms)
{
    (void)ctx;
    ck_assert_int_eq(now_ms, fake_transport_now_ms(fx.fl.ft));
    fx.after_calls++;
    fx.after_last_ms = now_ms;
    if (all_lead())
        fx.after_saw_all_leading++;
    if (now_ms == fx.after_want_ms) {
        fx.after_at_want++;
        fx.after_want_ms = INT64_MAX; /* or it is asked again at once */
    }
    return fx.after_want_ms;
}

static void new_host(const char *selector)
{
    struct ld_errinfo err;
    struct ld_host_observer obs = {
        .watch_event = count_watch_event,
        .after_pass = fx.with_after_pass ? record_after_pass : NULL,
    };
    struct ld_host_config c = {
        .kube = fx.kube,
        .namespace_ = NS,
        .label_selector = selector,
        .lease_duration_ms = LEASE_MS,
        .renew_deadline_ms = RENEW_MS,
        .log_names = true,
        .clock = &fx.fl.clock,
        .observer = &obs,
    };
    fx.h = ld_host_new(&c, &err);
    ck_assert_msg(fx.h != NULL, "ld_host_new: %s", err.msg);
}

static size_t add(const char *name)
{
    struct ld_errinfo err;
    size_t index = 0;
    ck_assert_uint_lt(fx.n, MAX_ELECTIONS);
    struct seen *s = &fx.seen[fx.n];
    s->fx = &fx;
    snprintf(s->name, sizeof(s->name), "%s", name);
    struct ld_election_config c = {
        .namespace_ = NS,
        .name = name,
        .identity = "me",
        .lease_duration_ms = LEASE_MS,
        .renew_deadline_ms = RENEW_MS,
        .retry_period_ms = RETRY_MS,
        .release_on_exit = true,
        .seed = 7 + fx.n,
        .create_metadata = fx.create_metadata,
    };
    struct ld_host_election_ops ops = {.ctx = s,
                                       .on_publish = on_publish,
                                       .on_event = on_event,
                                       .holds_release = holds_release};
    ck_assert_int_eq(ld_host_add(fx.h, &c, &ops, &index, &err), LD_OK);
    ck_assert_uint_eq(index, fx.n);
    fx.n++;
    return index;
}

static const char *lease_name(size_t i)
{
    static char names[MAX_ELECTIONS][16];
    snprintf(names[i], sizeof(names[i]), "lease-%02zu", i);
    return names[i];
}

/* Adds the elections of n free Leases of the group app=grp (lease_name(0)
 * on), each put in the fake first. */
static void add_free_group(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fake_transport_lease_put(fx.fl.ft, lease_name(i), "app=grp", "", LEASE_MS / 1000,
                                 WALL0_US);
        add(lease_name(i));
    }
}

static int64_t now(void)
{
    return fleet_now(&fx.fl);
}

static void other_renews(void)
{
    fleet_other_renews(&fx.fl);
}

/* One ld_host_run, cut to the time left so that run_for ends on time. */
static bool host_turn(int64_t left_ms)
{
    ck_assert_int_eq(ld_host_run(fx.h, left_ms < STEP_MS ? left_ms : STEP_MS, -1), LD_OK);
    return false;
}

static void run_for(int64_t ms)
{
    int64_t end = now() + ms;
    fleet_run_for(&fx.fl, ms, host_turn);
    ck_assert_int_ge(now(), end);
}

/* Runs until pred holds, for at most max_ms of fake time; true if it did. */
static bool run_until(bool (*pred)(void), int64_t max_ms)
{
    return fleet_run_until(&fx.fl, pred, max_ms, host_turn);
}

static bool all_lead(void)
{
    for (size_t i = 0; i < fx.n; i++)
        if (!fx.seen[i].leading)
            return false;
    return fx.n > 0;
}

static const char *stored_holder(const char *name)
{
    return fleet_holder(&fx.fl, name);
}

static void assert_safe(void)
{
    for (size_t i = 0; i < fx.n; i++) {
        ck_assert_msg(fx.seen[i].claims_past_deadline == 0,
                      "%s claimed leadership past its renew deadline %d times",
                      fx.seen[i].name, fx.seen[i].claims_past_deadline);
        ck_assert_msg(fx.seen[i].claims_while_foreign == 0,
                      "%s claimed leadership while the Lease named another %d times",
                      fx.seen[i].name, fx.seen[i].claims_while_foreign);
    }
}

/* The times of the WATCH exchanges submitted at or after since_ms. */
static size_t watch_times(int64_t since_ms, int64_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < fake_transport_record_count(fx.fl.ft) && n < max; i++) {
        const struct fake_transport_record *r = fake_transport_record(fx.fl.ft, i);
        if (strcmp(r->verb, "WATCH") == 0 && r->at_ms >= since_ms)
            out[n++] = r->at_ms;
    }
    return n;
}

static const struct fake_transport_record *last_watch(void)
{
    for (size_t i = fake_transport_record_count(fx.fl.ft); i-- > 0;)
        if (strcmp(fake_transport_record(fx.fl.ft, i)->verb, "WATCH") == 0)
            return fake_transport_record(fx.fl.ft, i);
    return NULL;
}

static bool watch_open(void);

/* ---- one election ---- */

START_TEST(one_election_acquires_and_renews)
{
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 3 * RETRY_MS));
    ck_assert_int_eq(fx.seen[0].started, 1);
    ck_assert_str_eq(stored_holder("solo"), "me");

    int64_t since = now();
    run_for(60000);
    size_t puts = fake_transport_count(fx.fl.ft, "PUT", "solo", since);
    /* One renewal per retry period: 30 a minute, loosely. */
    ck_assert_msg(puts >= 25 && puts <= 35, "%zu renewals in a minute", puts);
    ck_assert(fx.seen[0].leading);
    ck_assert_int_eq(fx.seen[0].stopped, 0);
    ck_assert_int_gt(fx.seen[0].publishes, 25);
    /* A host of one election watches its Lease by name. */
    const struct fake_transport_record *w = last_watch();
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_nonnull(strstr(w->path, "fieldSelector=metadata.name%3Dsolo"));
    ck_assert_uint_le(fake_transport_max_in_flight_per_name(fx.fl.ft), 1);
    assert_safe();
}
END_TEST

/* after_pass runs once the pass's publishes are in (it sees every
 * election's news of that pass), and the time it returns wakes the host
 * although no engine has anything to do then. */
START_TEST(after_pass_sees_the_pass_and_wakes_the_host)
{
    fx.with_after_pass = true;
    fx.after_want_ms = INT64_MAX;
    new_host("app=x");
    for (size_t i = 0; i < 4; i++)
        add(lease_name(i));
    ck_assert(run_until(all_lead, 10000));
    run_for(STEP_MS);
    ck_assert_int_gt(fx.after_saw_all_leading, 0);
    /* Between two renewals (every 2 s), at an odd time. */
    int64_t want = now() + 777;
    fx.after_want_ms = want;
    fx.after_at_want = 0;
    ck_assert_int_eq(ld_host_run(fx.h, 777 + 1, -1), LD_OK);
    ck_assert_int_eq(fx.after_at_want, 1);
    ck_assert_int_ge(fx.after_last_ms, want);
    /* INT64_MAX asks for nothing: a run over a quiet stretch calls it only
     * after passes (renewals), never more often than they happen. */
    fx.after_want_ms = INT64_MAX;
    int before = fx.after_calls;
    ck_assert_int_eq(ld_host_run(fx.h, RETRY_MS * 3, -1), LD_OK);
    ck_assert_int_gt(fx.after_calls, before);
    /* 4 elections renew about 3 times each: a pass per request start and
     * one per answer at most, and a few for the watch. */
    ck_assert_int_le(fx.after_calls - before, 4 * 4 * 2 + 8);
}
END_TEST

START_TEST(wake_fd_cancels_run)
{
    int p[2];
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 3 * RETRY_MS));
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    int64_t before = now();
    ck_assert_int_eq(ld_host_run(fx.h, 60000, p[0]), LD_ECANCELED);
    ck_assert_int_lt(now() - before, 60000);
    close(p[0]);
    close(p[1]);
}
END_TEST

/* ---- many elections ---- */

START_TEST(sixteen_elections_one_watch)
{
    new_host("app=grp");
    add_free_group(MAX_ELECTIONS);
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    int64_t since = now();
    run_for(60000);
    ck_assert(all_lead());
    size_t puts = fake_transport_count(fx.fl.ft, "PUT", NULL, since);
    ck_assert_msg(puts >= MAX_ELECTIONS * 25 && puts <= MAX_ELECTIONS * 35,
                  "%zu renewals a minute for %d elections", puts, MAX_ELECTIONS);
    for (size_t i = 0; i < MAX_ELECTIONS; i++) {
        size_t mine = fake_transport_count(fx.fl.ft, "PUT", lease_name(i), since);
        ck_assert_msg(mine >= 25 && mine <= 35, "%s: %zu renewals", lease_name(i), mine);
    }
    /* Every request in the minute was a renewal: no polling. */
    ck_assert_uint_le(fake_transport_count(fx.fl.ft, "GET", NULL, since), MAX_ELECTIONS);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "WATCH", NULL, 0), 1);
    ck_assert_uint_eq(fake_transport_watch_open_count(fx.fl.ft), 1);
    ck_assert_ptr_nonnull(strstr(last_watch()->path, "labelSelector=app%3Dgrp"));
    ck_assert_uint_le(fake_transport_max_in_flight_per_name(fx.fl.ft), 1);
    /* They ran side by side, not one after another. */
    ck_assert_uint_ge(fake_transport_max_in_flight(fx.fl.ft), MAX_ELECTIONS);
    assert_safe();
}
END_TEST

START_TEST(created_leases_join_the_watched_group)
{
    /* Absent Leases, created by the engines with the group's label: the
     * group watch then carries their renewals. */
    fx.create_metadata = "{\"labels\":{\"app\":\"grp\"}}";
    new_host("app=grp");
    for (size_t i = 0; i < 4; i++)
        add(lease_name(i));
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    for (size_t i = 0; i < 4; i++) {
        struct ld_lease l;
        ck_assert_int_eq(fake_transport_lease_get(fx.fl.ft, lease_name(i), &l), LD_OK);
        json_t *labels = json_object_get(json_object_get(l.object, "metadata"), "labels");
        ck_assert_str_eq(json_string_value(json_object_get(labels, "app")), "grp");
        ld_lease_clear(&l);
    }
    ck_assert(run_until(watch_open, 10000));
    int before = fx.watch_events;
    run_for(10000);
    ck_assert_int_ge(fx.watch_events - before, 4 * 4);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "WATCH", NULL, 0), 1);
    assert_safe();
}
END_TEST

START_TEST(several_elections_without_selector_poll)
{
    new_host(NULL);
    for (size_t i = 0; i < 4; i++)
        add(lease_name(i));
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    run_for(30000);
    ck_assert(all_lead());
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "WATCH", NULL, 0), 0);
    assert_safe();
}
END_TEST

/* ---- a hung request delays only its own Lease ---- */

START_TEST(hung_put_delays_only_its_lease)
{
    new_host(NULL);
    add("lease-a");
    add("lease-b");
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    run_for(10000);

    struct fake_transport_fault hang = {.kind = FAKE_TRANSPORT_HANG, .count = -1};
    fake_transport_fault_add(fx.fl.ft, "lease-a", "PUT", hang);
    int64_t since = now();
    int64_t a_last_ok = fleet_last_ok_write_ms(&fx.fl, "lease-a");
    int64_t b_prev = fleet_last_ok_write_ms(&fx.fl, "lease-b");
    int64_t b_max_gap = 0;
    for (int i = 0; i < 300; i++) { /* 30 s */
        ck_assert_int_eq(ld_host_run(fx.h, STEP_MS, -1), LD_OK);
        int64_t b = fleet_last_ok_write_ms(&fx.fl, "lease-b");
        if (b != b_prev) {
            if (b - b_prev > b_max_gap)
                b_max_gap = b - b_prev;
            b_prev = b;
        }
        /* A's claim ends at its renew deadline, checked at every step too. */
        if (now() - a_last_ok > RENEW_MS)
            ck_assert(!ld_election_is_leader(ld_host_election(fx.h, 0), now()));
    }
    ck_assert_msg(b_max_gap <= RETRY_MS + 500, "B's renewals %lld ms apart",
                  (long long)b_max_gap);
    ck_assert_uint_ge(fake_transport_count(fx.fl.ft, "PUT", "lease-b", since), 13);
    ck_assert(fx.seen[1].leading);
    ck_assert_int_eq(fx.seen[1].stopped, 0);
    /* A gave up at its deadline, not later. */
    ck_assert_int_eq(fx.seen[0].stopped, 1);
    ck_assert_int_eq(fx.seen[0].last_stop, LD_STOP_RENEW_DEADLINE);
    ck_assert(!fx.seen[0].leading);
    /* A's hung PUT ended by its timeout, and no second one overlapped it. */
    size_t timed_out = 0;
    for (size_t i = 0; i < fake_transport_record_count(fx.fl.ft); i++) {
        const struct fake_transport_record *r = fake_transport_record(fx.fl.ft, i);
        if (strcmp(r->name, "lease-a") == 0 && r->rc == LD_ETIMEOUT)
            timed_out++;
    }
    ck_assert_uint_ge(timed_out, 1);
    ck_assert_uint_le(fake_transport_max_in_flight_per_name(fx.fl.ft), 1);
    assert_safe();
}
END_TEST

/* The engine is not asked while its request is in flight, and a renewal's
 * timeout (renew-deadline/2) can end after the deadline: STOPPED_LEADING
 * and the view that no longer leads must still come at the deadline (they
 * came 2 s late before host 8382085). */
START_TEST(step_down_published_at_the_deadline_while_put_hangs)
{
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 3 * RETRY_MS));
    run_for(3000);
    struct fake_transport_fault hang = {.kind = FAKE_TRANSPORT_HANG, .count = -1};
    fake_transport_fault_add(fx.fl.ft, "solo", "PUT", hang);
    int64_t last_ok = fleet_last_ok_write_ms(&fx.fl, "solo");
    run_for(RENEW_MS + RETRY_MS + 5000);
    ck_assert_int_eq(fx.seen[0].stopped, 1);
    ck_assert_msg(fx.seen[0].stopped_at_ms <= last_ok + RENEW_MS + STEP_MS,
                  "stepped down %lld ms after the renew deadline",
                  (long long)(fx.seen[0].stopped_at_ms - last_ok - RENEW_MS));
    assert_safe();
}
END_TEST

/* Before every election has read its Lease the watch cannot start; a host
 * that counts its start time as due meanwhile runs the transport with zero
 * waits until the first answer arrives: a busy loop (the fake lets time
 * pass for it, and counts; host did so before 8382085). */
START_TEST(no_busy_wait_before_the_first_read)
{
    struct fake_transport_fault slow = {
        .kind = FAKE_TRANSPORT_DELAY, .delay_ms = 3000, .count = 1};
    fake_transport_fault_add(fx.fl.ft, "solo", "GET", slow);
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 4 * RETRY_MS));
    ck_assert_msg(fake_transport_spin_ms(fx.fl.ft) == 0,
                  "the host spun for %llu ms of 3000",
                  (unsigned long long)fake_transport_spin_ms(fx.fl.ft));
    assert_safe();
}
END_TEST

/* The same for as long as the API is unreachable at start: the engine
 * waits a retry period between attempts, and the host must wait with it,
 * not spin (leaderd itself runs on the host). */
START_TEST(no_busy_wait_while_the_api_is_down_at_start)
{
    struct fake_transport_fault down = {
        .kind = FAKE_TRANSPORT_FAIL, .rc = LD_ECONNECT, .count = 5};
    fake_transport_fault_add(fx.fl.ft, "solo", "GET", down);
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 8 * RETRY_MS));
    ck_assert_uint_ge(fake_transport_count(fx.fl.ft, "GET", "solo", 0), 6);
    ck_assert_msg(fake_transport_spin_ms(fx.fl.ft) == 0, "the host spun for %llu ms",
                  (unsigned long long)fake_transport_spin_ms(fx.fl.ft));
    assert_safe();
}
END_TEST

/* ---- the watch ---- */

static void standby_setup(void)
{
    fx.fl.other_lease = "solo";
    fx.fl.other_every_ms = RETRY_MS;
    other_renews();
    new_host(NULL);
    add("solo");
}

static bool watch_open(void)
{
    return fake_transport_watch_open_count(fx.fl.ft) == 1;
}

static int64_t watch_since_ms;

/* A watch opened after watch_since_ms, besides a failed one, is open. */
static bool second_watch_open(void)
{
    return fake_transport_count(fx.fl.ft, "WATCH", NULL, watch_since_ms) >= 2 &&
           watch_open();
}

START_TEST(standby_with_watch_does_not_poll)
{
    standby_setup();
    ck_assert(run_until(watch_open, 10000));
    int64_t since = now();
    run_for(60000);
    size_t gets = fake_transport_count(fx.fl.ft, "GET", "solo", since);
    ck_assert_msg(gets <= 3, "%zu GETs in a minute with a healthy watch", gets);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "PUT", "solo", 0), 0);
    ck_assert(!fx.seen[0].leading);
    assert_safe();
}
END_TEST

START_TEST(watch_backoff_grows_and_caps_then_polls)
{
    standby_setup();
    struct fake_transport_fault fail = {
        .kind = FAKE_TRANSPORT_STATUS, .status = 500, .count = -1};
    fake_transport_fault_add(fx.fl.ft, NULL, "WATCH", fail);
    int64_t since = now();
    run_for(240000);
    int64_t t[64];
    size_t n = watch_times(since, t, 64);
    ck_assert_uint_ge(n, 8);
    int64_t first = t[1] - t[0], prev = first, max = 0;
    for (size_t i = 2; i < n; i++) {
        int64_t gap = t[i] - t[i - 1];
        ck_assert_msg(gap >= prev, "back-off shrank: %lld after %lld", (long long)gap,
                      (long long)prev);
        prev = gap;
        if (gap > max)
            max = gap;
    }
    ck_assert_int_le(first, 1000);
    ck_assert_int_ge(max, 8 * first);
    /* The host caps its back-off at 30 s; the last gaps sit at the cap. */
    ck_assert_int_le(max, 30000 + STEP_MS);
    ck_assert_int_ge(t[n - 1] - t[n - 2], 30000 - STEP_MS);
    /* Without a watch the standby polls every retry period. */
    size_t gets = fake_transport_count(fx.fl.ft, "GET", "solo", now() - 60000);
    ck_assert_msg(gets >= 20 && gets <= 40, "%zu GETs a minute without a watch", gets);
    assert_safe();
}
END_TEST

START_TEST(stable_watch_reconnects_at_once)
{
    standby_setup();
    /* Five failures grow the back-off... */
    struct fake_transport_fault fail = {
        .kind = FAKE_TRANSPORT_STATUS, .status = 500, .count = 5};
    fake_transport_fault_add(fx.fl.ft, NULL, "WATCH", fail);
    ck_assert(run_until(watch_open, 60000));
    /* ...a stream that then lives 90 s resets it. */
    run_for(90000);
    ck_assert(watch_open());
    fake_transport_watch_end_all(fx.fl.ft);
    int64_t ended = now();
    struct fake_transport_fault once = {
        .kind = FAKE_TRANSPORT_STATUS, .status = 500, .count = 1};
    fake_transport_fault_add(fx.fl.ft, NULL, "WATCH", once);
    watch_since_ms = ended;
    ck_assert(run_until(second_watch_open, 5000));
    int64_t t[8];
    size_t n = watch_times(ended, t, 8);
    ck_assert_uint_eq(n, 2); /* the failed one, at once, then the retry */
    ck_assert_int_le(t[0] - ended, STEP_MS);
    ck_assert_int_le(t[1] - t[0], 1000);
    assert_safe();
}
END_TEST

START_TEST(gone_relists)
{
    standby_setup();
    ck_assert(run_until(watch_open, 10000));
    run_for(10000);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "WATCH", NULL, 0), 1);
    ck_assert_ptr_nonnull(strstr(last_watch()->path, "resourceVersion="));
    /* The history is compacted and the stream ends: the host's restart
     * from its resourceVersion gets 410 Expired, and it starts over from
     * the current state. */
    fake_transport_compact(fx.fl.ft);
    fake_transport_watch_end_all(fx.fl.ft);
    run_for(5000);
    ck_assert_uint_ge(fake_transport_count(fx.fl.ft, "WATCH", NULL, 0), 3);
    ck_assert(watch_open());
    ck_assert_ptr_null(strstr(last_watch()->path, "resourceVersion="));
    /* The same for a 410 ERROR event on an open stream. */
    size_t before = fake_transport_count(fx.fl.ft, "WATCH", NULL, 0);
    fake_transport_watch_gone_all(fx.fl.ft);
    run_for(3000);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "WATCH", NULL, 0), before + 1);
    ck_assert(watch_open());
    ck_assert_ptr_null(strstr(last_watch()->path, "resourceVersion="));
    /* The standby still follows the holder without polling. */
    int64_t since = now();
    run_for(30000);
    ck_assert_uint_le(fake_transport_count(fx.fl.ft, "GET", "solo", since), 2);
    assert_safe();
}
END_TEST

static size_t watches_wanted;

static bool watches_reached(void)
{
    return fake_transport_count(fx.fl.ft, "WATCH", NULL, 0) >= watches_wanted &&
           watch_open();
}

/* A group's stream resumes from its resourceVersion only after the
 * server's routine end; after a failure it starts from the current state,
 * since a resumed one would replay, as news, records older than what the
 * reads found meanwhile (a crashed member's renewals would count it live
 * again). */
START_TEST(group_watch_resumes_only_after_a_routine_end)
{
    new_host("app=grp");
    add_free_group(2);
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    ck_assert(run_until(watch_open, 10000));
    run_for(5000);
    watches_wanted = fake_transport_count(fx.fl.ft, "WATCH", NULL, 0) + 1;
    fake_transport_watch_end_all(fx.fl.ft);
    ck_assert(run_until(watches_reached, 5000));
    ck_assert_ptr_nonnull(strstr(last_watch()->path, "resourceVersion="));
    run_for(5000);
    /* The next restart fails: the one after it starts afresh. */
    struct fake_transport_fault once = {
        .kind = FAKE_TRANSPORT_STATUS, .status = 500, .count = 1};
    fake_transport_fault_add(fx.fl.ft, NULL, "WATCH", once);
    watches_wanted = fake_transport_count(fx.fl.ft, "WATCH", NULL, 0) + 2;
    fake_transport_watch_end_all(fx.fl.ft);
    ck_assert(run_until(watches_reached, 10000));
    ck_assert_ptr_null(strstr(last_watch()->path, "resourceVersion="));
    ck_assert(all_lead());
    assert_safe();
}
END_TEST

START_TEST(stalled_watch_replaced_when_a_read_finds_a_missed_change)
{
    standby_setup();
    ck_assert(run_until(watch_open, 10000));
    run_for(10000);
    size_t before = fake_transport_count(fx.fl.ft, "WATCH", NULL, 0);
    int64_t since = now();
    fake_transport_watch_stall_all(fx.fl.ft);
    /* The engine re-checks after three silent retry periods and finds the
     * holder's renewals the watch never sent. */
    run_for(5 * RETRY_MS + 2000);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "WATCH", NULL, 0), before + 1);
    ck_assert_uint_ge(fake_transport_count(fx.fl.ft, "GET", "solo", since), 1);
    ck_assert(watch_open());
    assert_safe();
}
END_TEST

START_TEST(silent_watch_replaced_after_the_silence_limit)
{
    /* A leader hears its own renewals on the watch; when the stream goes
     * silent, nothing it reads shows a missed change (it wrote them), so
     * only the silence limit (2 lease durations + 60 s) replaces it. */
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 3 * RETRY_MS));
    ck_assert(run_until(watch_open, 10000));
    size_t before = fake_transport_count(fx.fl.ft, "WATCH", NULL, 0);
    fake_transport_watch_stall_all(fx.fl.ft);
    int64_t stalled = now();
    run_for(2 * LEASE_MS + 60000 - 5000);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "WATCH", NULL, 0), before);
    run_for(15000);
    int64_t t[4];
    ck_assert_uint_eq(watch_times(stalled, t, 4), 1);
    ck_assert(watch_open());
    ck_assert(fx.seen[0].leading);
    assert_safe();
}
END_TEST

/* ---- credentials ---- */

START_TEST(unauthorized_standby_probes_and_recovers)
{
    standby_setup();
    ck_assert(run_until(watch_open, 10000));
    run_for(5000);
    struct fake_transport_fault deny = {
        .kind = FAKE_TRANSPORT_STATUS, .status = 401, .count = -1};
    fake_transport_fault_add(fx.fl.ft, NULL, "GET", deny);
    fake_transport_fault_add(fx.fl.ft, NULL, "PUT", deny);
    fake_transport_fault_add(fx.fl.ft, NULL, "POST", deny);
    /* A hint (a token file changed) makes the standby read, and fail. */
    ld_host_wake(fx.h, 0);
    run_for(1000);
    ck_assert_int_gt(fx.seen[0].auth_failing_since_ms, 0);
    int64_t since = now();
    run_for(60000);
    size_t reqs = fake_transport_count(fx.fl.ft, "GET", "solo", since) +
                  fake_transport_count(fx.fl.ft, "PUT", "solo", since) +
                  fake_transport_count(fx.fl.ft, "POST", "solo", since);
    /* One per renew-deadline/2 although the watch is healthy: not none,
     * and not a poll every retry period either. */
    ck_assert_msg(reqs >= 60000 / (RENEW_MS / 2) - 1 &&
                      reqs <= 60000 / (RENEW_MS / 2) + 2,
                  "%zu requests in a 401 minute", reqs);
    ck_assert_int_gt(fx.seen[0].auth_failing_since_ms, 0);
    ck_assert_int_eq(fx.seen[0].last_err, LD_EUNAUTHORIZED);

    /* Accepted again: the next probe succeeds and the state clears. */
    fake_transport_fault_clear(fx.fl.ft);
    run_for(RENEW_MS / 2 + RETRY_MS);
    ck_assert_int_eq(fx.seen[0].auth_failing_since_ms, 0);
    ck_assert_int_eq(fx.seen[0].last_err, LD_OK);
    /* And it takes over when the holder stops. */
    fx.fl.other_every_ms = 0;
    ck_assert(run_until(all_lead, LEASE_MS + 3 * RETRY_MS));
    assert_safe();
}
END_TEST

/* ---- errors ---- */

START_TEST(retry_after_is_honoured)
{
    /* A standby without a watch polls; a 429 asks it to wait 7 s. */
    fx.fl.other_lease = "solo";
    fx.fl.other_every_ms = RETRY_MS;
    other_renews();
    new_host(NULL);
    add("solo");
    struct fake_transport_fault nowatch = {
        .kind = FAKE_TRANSPORT_STATUS, .status = 403, .count = -1};
    fake_transport_fault_add(fx.fl.ft, NULL, "WATCH", nowatch);
    run_for(10000);
    struct fake_transport_fault busy = {
        .kind = FAKE_TRANSPORT_STATUS, .status = 429, .retry_after_s = 7, .count = 1};
    fake_transport_fault_add(fx.fl.ft, "solo", "GET", busy);
    int64_t since = now();
    run_for(20000);
    int64_t t429 = -1, next = -1;
    for (size_t i = 0; i < fake_transport_record_count(fx.fl.ft); i++) {
        const struct fake_transport_record *r = fake_transport_record(fx.fl.ft, i);
        if (r->at_ms < since || strcmp(r->verb, "GET") != 0)
            continue;
        if (t429 >= 0 && next < 0)
            next = r->at_ms;
        if (r->status == 429)
            t429 = r->end_ms;
    }
    ck_assert_int_ge(t429, 0);
    ck_assert_int_ge(next - t429, 7000);
    ck_assert_int_le(next - t429, 7000 + RETRY_MS);
    assert_safe();
}
END_TEST

START_TEST(leader_without_connection_steps_down_and_returns)
{
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 3 * RETRY_MS));
    struct fake_transport_fault down = {
        .kind = FAKE_TRANSPORT_FAIL, .rc = LD_ECONNECT, .count = -1};
    fake_transport_fault_add(fx.fl.ft, NULL, NULL, down);
    int64_t last_ok = fleet_last_ok_write_ms(&fx.fl, "solo");
    run_for(RENEW_MS + RETRY_MS);
    ck_assert_int_eq(fx.seen[0].stopped, 1);
    ck_assert_int_eq(fx.seen[0].last_stop, LD_STOP_RENEW_DEADLINE);
    /* Fast failures leave the engine free to act at its deadline. */
    ck_assert_int_le(fx.seen[0].stopped_at_ms, last_ok + RENEW_MS + STEP_MS);
    ck_assert_int_eq(fx.seen[0].last_err, LD_ECONNECT);
    fake_transport_fault_clear(fx.fl.ft);
    /* Its own record, unchanged since it stepped down: it takes it back. */
    ck_assert(run_until(all_lead, LEASE_MS + 3 * RETRY_MS));
    ck_assert_int_eq(fx.seen[0].started, 2);
    assert_safe();
}
END_TEST

/* ---- shutdown ---- */

START_TEST(shutdown_releases_and_abandons)
{
    new_host(NULL);
    for (size_t i = 0; i < 3; i++)
        add(lease_name(i));
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    /* lease-01's next renewal hangs: it is in flight at the shutdown. */
    struct fake_transport_fault hang = {.kind = FAKE_TRANSPORT_HANG, .count = 1};
    fake_transport_fault_add(fx.fl.ft, lease_name(1), "PUT", hang);
    run_for(RETRY_MS + 500);
    ck_assert_uint_ge(ld_kube_calls_pending(fx.kube), 1);
    ld_host_shutdown(fx.h);
    for (int i = 0; i < 200 && !ld_host_done(fx.h); i++)
        ck_assert_int_eq(ld_host_run(fx.h, STEP_MS, -1), LD_OK);
    ck_assert(ld_host_done(fx.h));
    for (size_t i = 0; i < 3; i++) {
        ck_assert_str_eq(stored_holder(lease_name(i)), "");
        ck_assert(!fx.seen[i].leading);
        ck_assert_int_eq(fx.seen[i].last_stop, LD_STOP_SHUTDOWN);
    }
    size_t canceled = 0;
    for (size_t i = 0; i < fake_transport_record_count(fx.fl.ft); i++)
        canceled += fake_transport_record(fx.fl.ft, i)->canceled;
    ck_assert_uint_eq(canceled, 1);
    ck_assert_uint_eq(ld_transport_pending(fake_transport_transport(fx.fl.ft)), 0);
    assert_safe();
}
END_TEST

/* A shutdown's release waits while the caller holds it, and goes out the
 * moment the hold ends, not at the host's next wake-up. */
START_TEST(release_goes_out_when_the_hold_ends)
{
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    fx.hold_release = true;
    ld_host_shutdown(fx.h);
    int64_t t0 = now();
    run_for(1000);
    ck_assert(!fx.seen[0].leading); /* stepped down at once */
    ck_assert_str_eq(stored_holder("solo"), "me");
    ck_assert_int_eq(release_write_ms("solo", t0), -1);
    fx.hold_release = false; /* as an Event's answer arriving would */
    int64_t t1 = now();
    ck_assert_int_eq(ld_host_run(fx.h, 5000, -1), LD_OK);
    ck_assert(ld_host_done(fx.h));
    ck_assert_int_eq(release_write_ms("solo", t0), t1);
    ck_assert_str_eq(stored_holder("solo"), "");
}
END_TEST

/* Given up from inside the hold, a shutdown's release is never written:
 * the host is done and the Lease keeps our name until it expires. */
START_TEST(a_release_given_up_is_never_written)
{
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    fx.hold_release = true;
    ld_host_shutdown(fx.h);
    int64_t t0 = now();
    run_for(1000);
    ck_assert(!ld_host_done(fx.h));
    fx.give_up = true;
    ck_assert_int_eq(ld_host_run(fx.h, 5000, -1), LD_OK);
    ck_assert(ld_host_done(fx.h));
    ck_assert_int_le(now() - t0, 1000 + STEP_MS);
    ck_assert_int_eq(release_write_ms("solo", t0), -1);
    ck_assert_str_eq(stored_holder("solo"), "me");
    ck_assert(!fx.seen[0].leading);
}
END_TEST

/* A Lease given back (not contending) is a resignation the engine begins
 * by itself: its release is held like any other, then goes out. */
START_TEST(a_give_back_waits_for_the_hold)
{
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    fx.hold_release = true;
    int64_t t0 = now();
    ld_election_set_contending(ld_host_election(fx.h, 0),
                               (struct ld_now){.mono_ms = t0, .wall_us = 0}, false);
    ld_host_poke(fx.h, 0);
    run_for(1000);
    ck_assert(!fx.seen[0].leading);
    ck_assert_int_eq(fx.seen[0].last_stop, LD_STOP_NOT_CONTENDING);
    ck_assert_int_eq(release_write_ms("solo", t0), -1);
    ck_assert_str_eq(stored_holder("solo"), "me");
    fx.hold_release = false;
    int64_t t1 = now();
    run_for(STEP_MS);
    ck_assert_int_eq(release_write_ms("solo", t0), t1);
    ck_assert_str_eq(stored_holder("solo"), "");
}
END_TEST

START_TEST(free_in_flight_runs_no_callbacks)
{
    new_host("app=grp");
    add_free_group(3);
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    ck_assert(run_until(watch_open, 10000));
    struct fake_transport_fault hang = {.kind = FAKE_TRANSPORT_HANG, .count = -1};
    fake_transport_fault_add(fx.fl.ft, NULL, "PUT", hang);
    run_for(RETRY_MS + 500);
    ck_assert_uint_ge(ld_transport_pending(fake_transport_transport(fx.fl.ft)), 2);
    ld_host_free(fx.h);
    fx.h = NULL;
    ck_assert_uint_eq(ld_transport_pending(fake_transport_transport(fx.fl.ft)), 0);
    int before = fx.callbacks;
    fake_transport_lease_put(fx.fl.ft, lease_name(0), "app=grp", OTHER, 15,
                             fake_transport_wall_us(fx.fl.ft));
    for (int i = 0; i < 100; i++)
        ld_transport_run(fake_transport_transport(fx.fl.ft), STEP_MS, -1);
    ck_assert_int_eq(fx.callbacks, before);
}
END_TEST

/* ---- publishing on request while a request is in flight ---- */

/* Runs until solo's next renewal PUT, made to hang by the caller, is in
 * flight; true when it is. */
static bool put_in_flight(void)
{
    for (size_t i = fake_transport_record_count(fx.fl.ft); i-- > 0;) {
        const struct fake_transport_record *r = fake_transport_record(fx.fl.ft, i);
        if (strcmp(r->verb, "PUT") == 0 && strcmp(r->name, "solo") == 0)
            return r->end_ms < 0;
    }
    return false;
}

static void lead_then_hang_renewal(void)
{
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 3 * RETRY_MS));
    struct fake_transport_fault hang = {.kind = FAKE_TRANSPORT_HANG, .count = 1};
    fake_transport_fault_add(fx.fl.ft, "solo", "PUT", hang);
    ck_assert(run_until(put_in_flight, 3 * RETRY_MS));
    ck_assert(fx.seen[0].leading);
}

/* host.h: ld_host_poke "publishes election index again at the next pass".
 * The daemon pokes after its wake fd ended a run, so that the publish takes
 * the hooks' news; a poke that waits for the answer of a hung renewal
 * delays that news by up to the request timeout (renew-deadline/2). */
START_TEST(poke_publishes_while_a_request_is_in_flight)
{
    lead_then_hang_renewal();
    int before = fx.seen[0].publishes;
    ld_host_poke(fx.h, 0);
    ck_assert_int_eq(ld_host_run(fx.h, STEP_MS, -1), LD_OK);
    ck_assert(put_in_flight());
    ck_assert_msg(fx.seen[0].publishes > before, "the poke was not published");
}
END_TEST

/* POST /resign while a renewal is in flight: the engine steps down at
 * once (ld_election_resign may be called then), and the loop pokes; the
 * view must say so before the renewal's answer, or the exec child and the
 * Pod label keep acting as leader and the HTTP answer waits. */
START_TEST(resign_in_flight_published_before_the_answer)
{
    lead_then_hang_renewal();
    struct ld_now n = {.mono_ms = now(), .wall_us = fake_transport_wall_us(fx.fl.ft)};
    ck_assert(ld_election_resign(ld_host_election(fx.h, 0), n, LEASE_MS));
    ld_host_poke(fx.h, 0);
    ck_assert_int_eq(ld_host_run(fx.h, STEP_MS, -1), LD_OK);
    ck_assert(put_in_flight());
    ck_assert_int_eq(fx.seen[0].stopped, 1);
    ck_assert_int_eq(fx.seen[0].last_stop, LD_STOP_RESIGNED);
    ck_assert(!fx.seen[0].leading);
}
END_TEST

/* ld_shell_turn's shape: a run ended by the wake fd is followed by a poke
 * whose publish reads the fd (the exec child's channel: the supervisor
 * stopped the child at the deadline of a renewal that hangs). While the
 * poke waits for the answer the fd stays readable and every run returns at
 * once: a busy loop for the rest of the request's timeout. */
START_TEST(wake_fd_drained_by_the_publish_is_no_busy_loop)
{
    int p[2];
    lead_then_hang_renewal();
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    fx.drain = true;
    fx.drain_fd = p[0];
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    int64_t start = now();
    int canceled = 0;
    for (int i = 0; i < 1000 && now() - start < 1000; i++) {
        if (ld_host_run(fx.h, STEP_MS, p[0]) == LD_ECANCELED) {
            canceled++;
            ld_host_poke(fx.h, 0);
        }
    }
    fx.drain = false;
    close(p[0]);
    close(p[1]);
    ck_assert_msg(canceled <= 2, "%d runs ended by a wake fd nobody read, in %lld ms",
                  canceled, (long long)(now() - start));
}
END_TEST

/* The renewal in flight at a resignation succeeds after it: the engine
 * must not lead again on its answer, and the release follows it. */
START_TEST(resign_in_flight_then_the_renewal_succeeds)
{
    new_host(NULL);
    add("solo");
    ck_assert(run_until(all_lead, 3 * RETRY_MS));
    struct fake_transport_fault slow = {
        .kind = FAKE_TRANSPORT_DELAY, .delay_ms = 1500, .count = 1};
    fake_transport_fault_add(fx.fl.ft, "solo", "PUT", slow);
    ck_assert(run_until(put_in_flight, 3 * RETRY_MS));
    struct ld_now n = {.mono_ms = now(), .wall_us = fake_transport_wall_us(fx.fl.ft)};
    ck_assert(ld_election_resign(ld_host_election(fx.h, 0), n, LEASE_MS));
    ld_host_poke(fx.h, 0);
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(ld_host_run(fx.h, STEP_MS, -1), LD_OK);
        ck_assert(!fx.seen[0].leading);
        ck_assert(!ld_election_is_leader(ld_host_election(fx.h, 0), now()));
    }
    ck_assert_str_eq(stored_holder("solo"), "");
    ck_assert_int_eq(fx.seen[0].started, 1);
    assert_safe();
}
END_TEST

/* ---- watch events held while a request is in flight ---- */

static bool get_in_flight(void)
{
    for (size_t i = fake_transport_record_count(fx.fl.ft); i-- > 0;) {
        const struct fake_transport_record *r = fake_transport_record(fx.fl.ft, i);
        if (strcmp(r->verb, "GET") == 0 && strcmp(r->name, "solo") == 0)
            return r->end_ms < 0;
    }
    return false;
}

static bool get_in_flight_over(void)
{
    return !get_in_flight();
}

/* A standby following OTHER by the watch, with a read of its Lease that
 * hangs until its timeout. */
static void standby_with_hung_read(void)
{
    standby_setup();
    ck_assert(run_until(watch_open, 10000));
    run_for(3000);
    struct fake_transport_fault hang = {.kind = FAKE_TRANSPORT_HANG, .count = 1};
    fake_transport_fault_add(fx.fl.ft, "solo", "GET", hang);
    ld_host_wake(fx.h, 0);
    ck_assert(run_until(get_in_flight, 1000));
}

/* The holder releases, then someone deletes the Lease, while the read
 * hangs: both events come to the engine after the read's failure, in
 * order, so it makes the Lease anew at once (a POST, no PUT on the released
 * record first) instead of after a retry period. (Deleted under a holder
 * that still held it, it would wait for that record's expiry.) */
START_TEST(events_during_a_request_are_applied_after_it_in_order)
{
    standby_with_hung_read();
    fx.fl.other_every_ms = 0;
    fake_transport_lease_put(fx.fl.ft, "solo", NULL, "", 1,
                             fake_transport_wall_us(fx.fl.ft));
    run_for(STEP_MS);
    ck_assert(fake_transport_lease_delete(fx.fl.ft, "solo"));
    int64_t deleted = now();
    run_for(STEP_MS);
    ck_assert(get_in_flight());
    ck_assert(!fx.seen[0].leading);
    ck_assert(run_until(get_in_flight_over, RENEW_MS));
    int64_t ended = now();
    ck_assert(run_until(all_lead, RETRY_MS));
    ck_assert_msg(now() - ended <= 500, "took the deleted Lease %lld ms after the read",
                  (long long)(now() - ended));
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "PUT", "solo", deleted), 0);
    ck_assert_uint_ge(fake_transport_count(fx.fl.ft, "POST", NULL, deleted), 1);
    assert_safe();
}
END_TEST

/* More events than are held during one request: the watch starts over
 * from the current state (no resourceVersion), and after the read the
 * engine knows the Lease as it is now. */
START_TEST(held_events_overflow_relists)
{
    standby_with_hung_read();
    fx.fl.other_every_ms = 0;
    int64_t since = now();
    uint64_t rv = 0;
    for (int i = 0; i < 80; i++) {
        rv = fake_transport_lease_put(fx.fl.ft, "solo", NULL, OTHER, LEASE_MS / 1000,
                                      fake_transport_wall_us(fx.fl.ft));
        ck_assert_int_eq(ld_host_run(fx.h, 10, -1), LD_OK);
    }
    run_for(1000);
    ck_assert(get_in_flight());
    ck_assert_uint_ge(fake_transport_count(fx.fl.ft, "WATCH", NULL, since), 1);
    ck_assert_ptr_null(strstr(last_watch()->path, "resourceVersion="));
    ck_assert(run_until(watch_open, 1000));
    ck_assert(run_until(get_in_flight_over, RENEW_MS));
    run_for(STEP_MS);
    struct ld_election_status st;
    ld_election_status(ld_host_election(fx.h, 0), &st);
    char want[32];
    snprintf(want, sizeof(want), "%llu", (unsigned long long)rv);
    ck_assert_ptr_nonnull(st.resource_version);
    ck_assert_str_eq(st.resource_version, want);
    ck_assert_str_eq(st.leader, OTHER);
    ck_assert(!fx.seen[0].leading);
    assert_safe();
}
END_TEST

/* ---- routing ---- */

START_TEST(foreign_and_malformed_events_are_survived)
{
    new_host("app=grp");
    fake_transport_lease_put(fx.fl.ft, "lease-x", "app=grp", OTHER, 15, WALL0_US);
    add_free_group(2);
    ck_assert(run_until(all_lead, 5 * RETRY_MS));
    ck_assert(run_until(watch_open, 10000));
    int64_t since = now();
    for (int i = 0; i < 20; i++) {
        fake_transport_lease_put(fx.fl.ft, "lease-x", NULL, i % 2 ? OTHER : "", 15,
                                 fake_transport_wall_us(fx.fl.ft));
        fake_transport_watch_inject(fx.fl.ft, "{not json");
        fake_transport_watch_inject(
            fx.fl.ft, "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Lease\"}}");
        fake_transport_watch_inject(
            fx.fl.ft, "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Lease\","
                      "\"metadata\":{\"name\":\"lease-00\"},\"spec\":7}}");
        run_for(1000);
    }
    /* Nothing was asked about lease-x, the stream stayed, the elections
     * kept renewing. */
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, NULL, "lease-x", 0), 0);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "WATCH", NULL, 0), 1);
    ck_assert(watch_open());
    ck_assert(all_lead());
    ck_assert_uint_ge(fake_transport_count(fx.fl.ft, "PUT", lease_name(0), since), 8);
    ck_assert_uint_ge(fake_transport_count(fx.fl.ft, "PUT", lease_name(1), since), 8);
    assert_safe();
}
END_TEST

/* ---- three replicas, randomized ---- */

#define SIM_REPLICAS 3
#define SIM_LEASES 6

struct sim {
    struct ld_kube *kube[SIM_REPLICAS]; /* [0] is fx.kube */
    struct ld_host *h[SIM_REPLICAS];
    char id[SIM_REPLICAS][8];
    uint64_t rng;
    int64_t overlaps, foreign_claims, leading_samples;
};

static uint64_t sim_rand(struct sim *s, uint64_t n)
{
    s->rng = s->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (s->rng >> 33) % n;
}

/* Every replica's claim on every Lease, at the same fake instant: at most
 * one claims each, and the one that does is the stored holder. */
static void sim_check(struct sim *s)
{
    for (size_t l = 0; l < SIM_LEASES; l++) {
        int claims = 0;
        const char *holder = stored_holder(lease_name(l));
        for (size_t r = 0; r < SIM_REPLICAS; r++) {
            if (!ld_election_is_leader(ld_host_election(s->h[r], l), now()))
                continue;
            claims++;
            s->leading_samples++;
            if (strcmp(holder, s->id[r]) != 0)
                s->foreign_claims++;
        }
        if (claims > 1)
            s->overlaps++;
    }
}

static void sim_fault(struct sim *s)
{
    const char *verbs[] = {"GET", "PUT", "POST", "WATCH", NULL};
    const char *verb = verbs[sim_rand(s, 5)];
    const char *name = sim_rand(s, 3) ? lease_name(sim_rand(s, SIM_LEASES)) : NULL;
    struct fake_transport_fault f = {.count = 1 + (int)sim_rand(s, 3)};
    switch (sim_rand(s, 8)) {
    case 0:
        f.kind = FAKE_TRANSPORT_HANG;
        break;
    case 1:
        f.kind = FAKE_TRANSPORT_DELAY;
        f.delay_ms = 100 + (int64_t)sim_rand(s, 8000); /* past the timeout at times */
        break;
    case 2:
        f.kind = FAKE_TRANSPORT_STATUS;
        f.status = 500;
        break;
    case 3:
        f.kind = FAKE_TRANSPORT_STATUS;
        f.status = 429;
        f.retry_after_s = 1 + (int)sim_rand(s, 3);
        break;
    case 4:
        f.kind = FAKE_TRANSPORT_FAIL;
        f.rc = sim_rand(s, 2) ? LD_ECONNECT : LD_ETRANSPORT;
        break;
    case 5: /* a replica cut off from the API for a while */
        f.kind = FAKE_TRANSPORT_FAIL;
        f.rc = LD_ECONNECT;
        f.count = -1;
        f.until_ms = now() + 1000 + (int64_t)sim_rand(s, 20000);
        fake_transport_fault_add_for(fx.fl.ft, (int)sim_rand(s, SIM_REPLICAS), NULL, NULL,
                                     f);
        return;
    case 6:
        if (sim_rand(s, 2))
            fake_transport_watch_end_all(fx.fl.ft);
        else
            fake_transport_watch_gone_all(fx.fl.ft);
        return;
    default:
        fake_transport_watch_stall_all(fx.fl.ft);
        return;
    }
    fake_transport_fault_add(fx.fl.ft, name, verb, f);
}

START_TEST(three_replicas_random_faults)
{
    struct sim s;
    struct ld_errinfo err;
    memset(&s, 0, sizeof(s));
    s.rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(_i + 1);
    for (size_t l = 0; l < SIM_LEASES; l++)
        fake_transport_lease_put(fx.fl.ft, lease_name(l), "app=sim", "", LEASE_MS / 1000,
                                 WALL0_US);
    for (size_t r = 0; r < SIM_REPLICAS; r++) {
        snprintf(s.id[r], sizeof(s.id[r]), "r%zu", r);
        s.kube[r] =
            r == 0 ? fx.kube : ld_kube_new_on(fake_transport_add_client(fx.fl.ft), &err);
        ck_assert_ptr_nonnull(s.kube[r]);
        struct ld_host_config c = {
            .kube = s.kube[r],
            .namespace_ = NS,
            .label_selector = "app=sim",
            .lease_duration_ms = LEASE_MS,
            .renew_deadline_ms = RENEW_MS,
            .clock = &fx.fl.clock,
        };
        s.h[r] = ld_host_new(&c, &err);
        ck_assert_ptr_nonnull(s.h[r]);
        for (size_t l = 0; l < SIM_LEASES; l++) {
            struct ld_election_config ec = {
                .namespace_ = NS,
                .name = lease_name(l),
                .identity = s.id[r],
                .lease_duration_ms = LEASE_MS,
                .renew_deadline_ms = RENEW_MS,
                .retry_period_ms = RETRY_MS,
                .release_on_exit = true,
                .seed = s.rng + r * 31 + l,
            };
            size_t index;
            ck_assert_int_eq(ld_host_add(s.h[r], &ec, NULL, &index, &err), LD_OK);
        }
    }
    /* Ten fake minutes of faults: the replicas take turns in steps of
     * 50 ms, so each also runs late now and then. */
    int64_t end = now() + 600000;
    for (int i = 0; i < 100000 && now() < end; i++) {
        if (sim_rand(&s, 20) == 0)
            sim_fault(&s);
        size_t r = sim_rand(&s, SIM_REPLICAS);
        ck_assert_int_eq(ld_host_run(s.h[r], 1 + (int64_t)sim_rand(&s, 50), -1), LD_OK);
        sim_check(&s);
    }
    ck_assert_int_ge(now(), end);
    /* Then a calm minute: every Lease has exactly one leader. */
    fake_transport_fault_clear(fx.fl.ft);
    for (int i = 0; i < 5000 && now() < end + 60000; i++) {
        ck_assert_int_eq(ld_host_run(s.h[i % SIM_REPLICAS], 20, -1), LD_OK);
        sim_check(&s);
    }
    for (size_t l = 0; l < SIM_LEASES; l++) {
        int leaders = 0;
        for (size_t r = 0; r < SIM_REPLICAS; r++)
            leaders += ld_election_is_leader(ld_host_election(s.h[r], l), now());
        ck_assert_msg(leaders == 1, "%s has %d leaders after the calm minute",
                      lease_name(l), leaders);
    }
    ck_assert_msg(s.overlaps == 0, "%lld samples with two leaders",
                  (long long)s.overlaps);
    ck_assert_msg(s.foreign_claims == 0, "%lld claims while the Lease named another",
                  (long long)s.foreign_claims);
    ck_assert_int_gt(s.leading_samples, 0);
    /* The faults made leadership change hands, again and again. */
    int32_t transitions = 0;
    for (size_t l = 0; l < SIM_LEASES; l++) {
        struct ld_lease stored;
        ck_assert_int_eq(fake_transport_lease_get(fx.fl.ft, lease_name(l), &stored),
                         LD_OK);
        transitions += stored.spec.transitions;
        ld_lease_clear(&stored);
    }
    ck_assert_int_ge(transitions, 10);
    for (size_t r = 0; r < SIM_REPLICAS; r++) {
        ld_host_free(s.h[r]);
        if (r > 0)
            ld_kube_free(s.kube[r]);
    }
}
END_TEST

/* ---- the fake itself ---- */

struct answer {
    int calls;
    enum ld_err rc;
    long status;
    int64_t at_ms;
    char body[512];
};

static void on_http_done(void *ctx, ld_http_id id, const struct ld_http_result *r)
{
    struct answer *a = ctx;
    (void)id;
    a->calls++;
    a->rc = r->rc;
    a->status = r->status;
    a->at_ms = fake_transport_now_ms(fx.fl.ft);
    snprintf(a->body, sizeof(a->body), "%s", r->body);
}

START_TEST(fake_serves_rules_and_faults)
{
    struct ld_transport *t = fake_transport_transport(fx.fl.ft);
    struct ld_errinfo err;
    struct answer a = {0};
    ld_http_id id;
    const char *path = "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases/x";
    struct ld_http_request get = {.verb = "GET", .path = path, .timeout_ms = 3000};

    ck_assert_int_eq(ld_transport_submit(t, &get, on_http_done, &a, &id, &err), LD_OK);
    for (int i = 0; i < 10 && !a.calls; i++)
        ld_transport_run(t, 1000, -1);
    ck_assert_int_eq(a.status, 404);
    ck_assert_ptr_nonnull(strstr(a.body, "NotFound"));

    uint64_t rv = fake_transport_lease_put(fx.fl.ft, "x", NULL, OTHER, 15, WALL0_US);
    char body[256];
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"%llu\"},\"spec\":{}}",
             (unsigned long long)rv - 1);
    struct ld_http_request put = {.verb = "PUT",
                                  .path = path,
                                  .body = body,
                                  .body_len = strlen(body),
                                  .timeout_ms = 3000};
    a.calls = 0;
    ck_assert_int_eq(ld_transport_submit(t, &put, on_http_done, &a, &id, &err), LD_OK);
    for (int i = 0; i < 10 && !a.calls; i++)
        ld_transport_run(t, 1000, -1);
    ck_assert_int_eq(a.status, 409);
    ck_assert_ptr_nonnull(strstr(a.body, "\"Conflict\""));

    /* A hang ends at the exchange's timeout in fake time, not before. */
    struct fake_transport_fault hang = {.kind = FAKE_TRANSPORT_HANG, .count = 1};
    fake_transport_fault_add(fx.fl.ft, "x", "GET", hang);
    a.calls = 0;
    int64_t start = fake_transport_now_ms(fx.fl.ft);
    ck_assert_int_eq(ld_transport_submit(t, &get, on_http_done, &a, &id, &err), LD_OK);
    for (int i = 0; i < 10 && !a.calls; i++)
        ld_transport_run(t, 1000, -1);
    ck_assert_int_eq(a.rc, LD_ETIMEOUT);
    ck_assert_int_eq(a.at_ms - start, 3000);

    /* The fault was used up: the next GET is served. */
    a.calls = 0;
    ck_assert_int_eq(ld_transport_submit(t, &get, on_http_done, &a, &id, &err), LD_OK);
    ld_transport_cancel(t, id);
    ld_transport_run(t, 1000, -1);
    ck_assert_int_eq(a.calls, 0);
    ck_assert_uint_eq(ld_transport_pending(t), 0);
}
END_TEST

struct stream {
    int data_calls, done_calls;
    enum ld_err rc;
    long status;
    char text[4096];
};

static void on_stream_data(void *ctx, ld_http_id id, const char *data, size_t len)
{
    struct stream *st = ctx;
    size_t have = strlen(st->text);
    (void)id;
    st->data_calls++;
    if (have + len < sizeof(st->text)) {
        memcpy(st->text + have, data, len);
        st->text[have + len] = '\0';
    }
}

static void on_stream_done(void *ctx, ld_http_id id, const struct ld_http_result *r)
{
    struct stream *st = ctx;
    (void)id;
    st->done_calls++;
    st->rc = r->rc;
    st->status = r->status;
}

/* Opens on t a stream of GET path (a watch) that feeds s. */
static void open_watch(struct ld_transport *t, const char *path, int64_t timeout_ms,
                       struct stream *s)
{
    struct ld_errinfo err;
    ld_http_id id;
    struct ld_http_request req = {.verb = "GET", .path = path, .timeout_ms = timeout_ms};
    ck_assert_int_eq(
        ld_transport_open_stream(t, &req, on_stream_data, on_stream_done, s, &id, &err),
        LD_OK);
}

#define GROUP_WATCH                                                                      \
    "/apis/coordination.k8s.io/v1/namespaces/" NS                                        \
    "/leases?watch=1&labelSelector=app%3Dgrp"

static size_t occurrences(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

START_TEST(fake_watch_streams)
{
    struct ld_transport *t = fake_transport_transport(fx.fl.ft);
    fake_transport_lease_put(fx.fl.ft, "a", "app=grp", OTHER, 15, WALL0_US);
    uint64_t rv_b =
        fake_transport_lease_put(fx.fl.ft, "b", "app=grp", OTHER, 15, WALL0_US);
    fake_transport_lease_put(fx.fl.ft, "c", "app=else", OTHER, 15, WALL0_US);

    /* By label, from the current state: ADDED for a and b only. */
    struct stream all = {0};
    open_watch(t, GROUP_WATCH "&timeoutSeconds=60", 90000, &all);
    ld_transport_run(t, 1000, -1);
    ck_assert_uint_eq(occurrences(all.text, "\"ADDED\""), 2);
    ck_assert_uint_eq(occurrences(all.text, "\"name\":\"c\""), 0);
    fake_transport_lease_put(fx.fl.ft, "c", NULL, "", 15, WALL0_US);
    fake_transport_lease_put(fx.fl.ft, "a", NULL, "", 15, WALL0_US);
    ld_transport_run(t, 1000, -1);
    ck_assert_uint_eq(occurrences(all.text, "\"MODIFIED\""), 1);

    /* By name, from b's resourceVersion: only what came after it. */
    struct stream one = {0};
    char path[256];
    snprintf(path, sizeof(path),
             "/apis/coordination.k8s.io/v1/namespaces/" NS
             "/leases?watch=1&fieldSelector=metadata.name%%3Da&resourceVersion=%llu"
             "&timeoutSeconds=60",
             (unsigned long long)rv_b);
    open_watch(t, path, 90000, &one);
    ld_transport_run(t, 1000, -1);
    ck_assert_uint_eq(occurrences(one.text, "\"type\""), 1);
    ck_assert_uint_eq(occurrences(one.text, "\"MODIFIED\""), 1);

    /* Compacted: the same start is Expired. */
    fake_transport_compact(fx.fl.ft);
    struct stream old = {0};
    open_watch(t, path, 90000, &old);
    for (int i = 0; i < 10 && !old.done_calls; i++)
        ld_transport_run(t, 1000, -1);
    ck_assert_ptr_nonnull(strstr(old.text, "\"ERROR\""));
    ck_assert_ptr_nonnull(strstr(old.text, "410"));
    ck_assert_int_eq(old.done_calls, 1);

    /* The server ends streams after timeoutSeconds. */
    for (int i = 0; i < 100 && !all.done_calls; i++)
        ld_transport_run(t, 1000, -1);
    ck_assert_int_eq(all.done_calls, 1);
    ck_assert_int_eq(all.rc, LD_OK);
    ck_assert_int_eq(all.status, 200);
    ck_assert_int_eq(fake_transport_now_ms(fx.fl.ft) - T0_MS, 60000);
}
END_TEST

/* FAKE_TRANSPORT_LATE_ANSWER: a LIST is read when it is served, at its time even while
 * its client does not run, and answered later: the watch shows a write made
 * meanwhile first, and the answer does not hold it. An answer due after the
 * exchange's timeout is LD_ETIMEOUT at the timeout. */
START_TEST(fake_late_answers_keep_the_snapshot_of_their_serve)
{
    struct ld_transport *t = fake_transport_transport(fx.fl.ft);
    struct ld_transport *other = fake_transport_add_client(fx.fl.ft);
    struct ld_errinfo err;
    ld_http_id id;
    ck_assert_ptr_nonnull(other);
    fake_transport_lease_put(fx.fl.ft, "a", "app=grp", OTHER, 15, WALL0_US);
    struct stream watch = {0};
    open_watch(t, GROUP_WATCH "&timeoutSeconds=600", 900000, &watch);
    ld_transport_run(t, 1000, -1);
    ck_assert_uint_eq(occurrences(watch.text, "\"ADDED\""), 1);

    fake_transport_fault_add(
        fx.fl.ft, NULL, "LIST",
        (struct fake_transport_fault){
            .kind = FAKE_TRANSPORT_LATE_ANSWER, .delay_ms = 2000, .count = 1});
    struct answer a = {0};
    struct ld_http_request list = {
        .verb = "GET",
        .path = "/apis/coordination.k8s.io/v1/namespaces/" NS
                "/leases?labelSelector=app%3Dgrp",
        .timeout_ms = 3000,
    };
    int64_t start = fake_transport_now_ms(fx.fl.ft);
    ck_assert_int_eq(ld_transport_submit(t, &list, on_http_done, &a, &id, &err), LD_OK);
    ld_transport_run(other, 100, -1); /* only another client runs meanwhile */
    fake_transport_lease_put(fx.fl.ft, "b", "app=grp", OTHER, 15, WALL0_US);
    ld_transport_run(t, 1000, -1);
    ck_assert_uint_eq(occurrences(watch.text, "\"name\":\"b\""), 1);
    ck_assert_int_eq(a.calls, 0);
    for (int i = 0; i < 10 && !a.calls; i++)
        ld_transport_run(t, 1000, -1);
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(a.at_ms - start, 1 + 2000);
    ck_assert_ptr_nonnull(strstr(a.body, "\"name\":\"a\""));
    ck_assert_ptr_null(strstr(a.body, "\"name\":\"b\""));

    fake_transport_fault_add(
        fx.fl.ft, NULL, "LIST",
        (struct fake_transport_fault){
            .kind = FAKE_TRANSPORT_LATE_ANSWER, .delay_ms = 5000, .count = 1});
    a.calls = 0;
    start = fake_transport_now_ms(fx.fl.ft);
    ck_assert_int_eq(ld_transport_submit(t, &list, on_http_done, &a, &id, &err), LD_OK);
    for (int i = 0; i < 10 && !a.calls; i++)
        ld_transport_run(t, 1000, -1);
    ck_assert_int_eq(a.rc, LD_ETIMEOUT);
    ck_assert_int_eq(a.at_ms - start, 3000);
    ld_transport_free(other);
}
END_TEST

static Suite *host_suite(void)
{
    Suite *s = suite_create("host");
    TCase *tc = tcase_create("host");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, fake_serves_rules_and_faults);
    tcase_add_test(tc, fake_watch_streams);
    tcase_add_test(tc, fake_late_answers_keep_the_snapshot_of_their_serve);
    tcase_add_test(tc, one_election_acquires_and_renews);
    tcase_add_test(tc, after_pass_sees_the_pass_and_wakes_the_host);
    tcase_add_test(tc, wake_fd_cancels_run);
    tcase_add_test(tc, sixteen_elections_one_watch);
    tcase_add_test(tc, created_leases_join_the_watched_group);
    tcase_add_test(tc, several_elections_without_selector_poll);
    tcase_add_test(tc, hung_put_delays_only_its_lease);
    tcase_add_test(tc, step_down_published_at_the_deadline_while_put_hangs);
    tcase_add_test(tc, no_busy_wait_before_the_first_read);
    tcase_add_test(tc, no_busy_wait_while_the_api_is_down_at_start);
    tcase_add_test(tc, standby_with_watch_does_not_poll);
    tcase_add_test(tc, watch_backoff_grows_and_caps_then_polls);
    tcase_add_test(tc, stable_watch_reconnects_at_once);
    tcase_add_test(tc, gone_relists);
    tcase_add_test(tc, group_watch_resumes_only_after_a_routine_end);
    tcase_add_test(tc, stalled_watch_replaced_when_a_read_finds_a_missed_change);
    tcase_add_test(tc, silent_watch_replaced_after_the_silence_limit);
    tcase_add_test(tc, unauthorized_standby_probes_and_recovers);
    tcase_add_test(tc, retry_after_is_honoured);
    tcase_add_test(tc, leader_without_connection_steps_down_and_returns);
    tcase_add_test(tc, shutdown_releases_and_abandons);
    tcase_add_test(tc, release_goes_out_when_the_hold_ends);
    tcase_add_test(tc, a_release_given_up_is_never_written);
    tcase_add_test(tc, a_give_back_waits_for_the_hold);
    tcase_add_test(tc, free_in_flight_runs_no_callbacks);
    tcase_add_test(tc, poke_publishes_while_a_request_is_in_flight);
    tcase_add_test(tc, resign_in_flight_published_before_the_answer);
    tcase_add_test(tc, wake_fd_drained_by_the_publish_is_no_busy_loop);
    tcase_add_test(tc, resign_in_flight_then_the_renewal_succeeds);
    tcase_add_test(tc, events_during_a_request_are_applied_after_it_in_order);
    tcase_add_test(tc, held_events_overflow_relists);
    tcase_add_test(tc, foreign_and_malformed_events_are_survived);
    TCase *sim = tcase_create("simulation");
    tcase_add_checked_fixture(sim, setup, teardown);
    tcase_set_timeout(sim, 300);
    tcase_add_loop_test(sim, three_replicas_random_faults, 0, 4);
    suite_add_tcase(s, sim);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(host_suite());
}
