/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_mode_lease: the daemon's one-Lease mode (cmd/leaderd/shell/mode_lease.h)
 * in the shell over the in-memory Lease API of support/fake_transport on
 * its fake clock. What the HTTP server would read (state.h) is checked
 * against the API's store: the leader, term and deadline of each publish,
 * the /healthz text while the API refuses our credentials, the metrics of
 * an acquisition, a resignation and the watch.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../../cmd/leaderd/core/metrics.h"
#include "../../cmd/leaderd/shell/mode_lease.h"
#include "../../cmd/leaderd/shell/shell.h"
#include "../../cmd/leaderd/core/state.h"
#include "kube.h"
#include "log.h"
#include "support/fake_transport.h"
#include "support/fleet.h"
#include "support/run_suite.h"

#define NS FLEET_NS
#define LEASE "solo"
#define ME "me"
#define OTHER FLEET_OTHER
#define WALL0_US FLEET_WALL0_US
#define LEASE_MS FLEET_LEASE_MS
#define RENEW_MS FLEET_RENEW_MS
#define RETRY_MS FLEET_RETRY_MS
#define STEP_MS 100

static struct {
    /* The fake and its clock; another client renews LEASE as OTHER while
     * fl.other_every_ms > 0. */
    struct fleet fl;
    struct ld_kube *kube;
    struct ld_state state;
    struct ld_metrics metrics;
    struct ld_mode_lease mode;
    struct ld_shell *sh;
    bool done;
} fx;

static int64_t now(void)
{
    return fleet_now(&fx.fl);
}

static void setup(void)
{
    memset(&fx, 0, sizeof(fx));
    fleet_init(&fx.fl, STEP_MS, NULL);
    fx.fl.other_lease = LEASE;
    fx.kube = fleet_kube(&fx.fl);
    ld_state_init(&fx.state, NS "/" LEASE, ME, LEASE_MS + RENEW_MS);
    ck_assert_int_eq(ld_state_resign_enable(&fx.state, 2 * RENEW_MS), 0);
    ld_metrics_init(&fx.metrics);
}

static void teardown(void)
{
    ld_shell_free(fx.sh);
    ld_kube_free(fx.kube);
    ld_state_destroy(&fx.state);
    ld_metrics_destroy(&fx.metrics);
    fleet_destroy(&fx.fl);
}

static void new_shell(void)
{
    struct ld_errinfo err;
    struct ld_mode_lease_config mc = {
        .state = &fx.state,
        .metrics = &fx.metrics,
        .election =
            {
                .namespace_ = NS,
                .name = LEASE,
                .identity = ME,
                .lease_duration_ms = LEASE_MS,
                .renew_deadline_ms = RENEW_MS,
                .retry_period_ms = RETRY_MS,
                .release_on_exit = true,
                .seed = 3,
            },
    };
    ld_mode_lease_init(&fx.mode, &mc);
    struct ld_shell_config c = {
        .kube = fx.kube,
        .state = &fx.state,
        .metrics = &fx.metrics,
        .clock = &fx.fl.clock,
        .namespace_ = NS,
        .lease_duration_ms = LEASE_MS,
        .renew_deadline_ms = RENEW_MS,
        .resign_cooldown_ms = 5000,
        .wake_fd = ld_state_resign_fd(&fx.state),
    };
    fx.sh = ld_shell_new(&c, ld_mode_lease(&fx.mode), &err);
    ck_assert_msg(fx.sh != NULL, "ld_shell_new: %s", err.msg);
}

/* One turn of the shell; true once it is done. */
static bool shell_turn(int64_t left_ms)
{
    (void)left_ms;
    fx.done = ld_shell_turn(fx.sh, STEP_MS);
    return fx.done;
}

/* Turns for ms of fake time, none once the shell is done. */
static void run_for(int64_t ms)
{
    if (!fx.done)
        fleet_run_for(&fx.fl, ms, shell_turn);
}

static bool run_until(bool (*pred)(void), int64_t max_ms)
{
    return fleet_run_until(&fx.fl, pred, max_ms, shell_turn);
}

static struct ld_snapshot snap(void)
{
    struct ld_snapshot s;
    ld_state_read(&fx.state, &s);
    return s;
}

static bool snap_leads(void)
{
    struct ld_snapshot s = snap();
    return ld_snapshot_is_leader(&s, now());
}

static bool snap_unhealthy(void)
{
    return snap().health_error[0] != '\0';
}

static bool done(void)
{
    return fx.done;
}

static void stored(struct ld_lease *l)
{
    ck_assert_int_eq(fake_transport_lease_get(fx.fl.ft, LEASE, l), LD_OK);
}

START_TEST(publishes_leader_term_and_deadline_of_the_lease)
{
    struct ld_lease l;
    /* Free when first seen: the acquisition's delay is measured. */
    fake_transport_lease_put(fx.fl.ft, LEASE, NULL, "", LEASE_MS / 1000, WALL0_US);
    new_shell();
    ck_assert(run_until(snap_leads, 3 * RETRY_MS));
    run_for(3 * RETRY_MS);
    struct ld_snapshot s = snap();
    stored(&l);
    ck_assert_str_eq(s.lease, NS "/" LEASE); /* kept from ld_state_init */
    ck_assert_str_eq(s.identity, ME);
    ck_assert_str_eq(s.leader, ME);
    ck_assert_str_eq(l.spec.holder, ME);
    ck_assert_int_eq(s.term, l.spec.transitions);
    ck_assert(s.observed);
    ck_assert(s.leading);
    /* Renewed every retry period: the deadline lies a renew deadline
     * after the last renewal, which is at most a retry period old. */
    ck_assert_int_gt(s.lead_until_ms, now() + RENEW_MS - RETRY_MS - STEP_MS);
    ck_assert_int_le(s.lead_until_ms, now() + RENEW_MS);
    ck_assert(s.has_renewed_at);
    ck_assert_int_eq(s.renewed_at_us, l.spec.renew_us);
    ck_assert_int_gt(s.last_renew_wall_us, 0);
    ck_assert_int_le(now() - s.heartbeat_ms, RETRY_MS);
    ck_assert_str_eq(s.health_error, "");
    ld_lease_clear(&l);
    ck_assert_uint_eq(fx.metrics.acquire_count, 1);
    ck_assert_uint_ge(fx.metrics.watch_restarts, 1);
    ck_assert_uint_gt(fx.metrics.watch_events, 0);
}
END_TEST

START_TEST(publishes_another_holder_as_leader)
{
    fx.fl.other_every_ms = RETRY_MS;
    fleet_other_renews(&fx.fl);
    new_shell();
    run_for(3 * RETRY_MS);
    struct ld_snapshot s = snap();
    ck_assert(s.observed);
    ck_assert_str_eq(s.leader, OTHER);
    ck_assert(!s.leading);
    ck_assert(!ld_snapshot_is_leader(&s, now()));
    ck_assert_uint_eq(fx.metrics.acquire_count, 0);
}
END_TEST

/* Refused credentials make /healthz fail only once they outlast the renew
 * deadline, and it recovers with the API. */
START_TEST(health_text_while_credentials_are_refused)
{
    new_shell();
    ck_assert(run_until(snap_leads, 3 * RETRY_MS));
    int64_t t = now();
    fake_transport_fault_add(fx.fl.ft, NULL, FAKE_TRANSPORT_VERB_ANY,
                             (struct fake_transport_fault){.kind = FAKE_TRANSPORT_STATUS,
                                                           .status = 403,
                                                           .count = -1});
    run_for(RENEW_MS - RETRY_MS);
    ck_assert_str_eq(snap().health_error, "");
    ck_assert(run_until(snap_unhealthy, 3 * RENEW_MS));
    struct ld_snapshot s = snap();
    ck_assert_int_gt(now() - t, RENEW_MS);
    ck_assert_ptr_nonnull(strstr(s.health_error, "rejected our credentials"));
    ck_assert_ptr_nonnull(strstr(s.health_error, "HTTP 403"));
    ck_assert(!ld_snapshot_is_leader(&s, now()));
    fake_transport_fault_clear(fx.fl.ft);
    ck_assert(run_until(snap_leads, 6 * RENEW_MS));
    ck_assert_str_eq(snap().health_error, "");
}
END_TEST

/* POST /resign through the mode: the resignation's metric, and the
 * snapshot no longer leads when the answer is in. */
START_TEST(resignation_is_counted_and_published)
{
    int64_t wait_ms;
    new_shell();
    ck_assert(run_until(snap_leads, 3 * RETRY_MS));
    uint64_t ticket = ld_state_resign_ask(&fx.state, &wait_ms);
    ck_assert_uint_gt(ticket, 0);
    for (int i = 0;
         i < 100 && ld_state_resign_outcome(&fx.state, ticket) == LD_RESIGN_PENDING; i++)
        run_for(STEP_MS);
    ck_assert_int_eq(ld_state_resign_outcome(&fx.state, ticket), LD_RESIGN_RELEASED);
    ck_assert(!snap_leads());
    ck_assert_str_eq(snap().leader, "");
    ck_assert_uint_eq(fx.metrics.resigned_request, 1);
    ck_assert_uint_eq(fx.metrics.resigned_preferred, 0);
}
END_TEST

/* ld_shell_stop as the signal source calls it: the last publish shows the
 * released Lease. */
START_TEST(stop_publishes_the_release)
{
    new_shell();
    ck_assert(run_until(snap_leads, 3 * RETRY_MS));
    ld_shell_stop(fx.sh, SIGTERM);
    ck_assert(run_until(done, 2 * RENEW_MS));
    struct ld_snapshot s = snap();
    ck_assert(!s.leading);
    ck_assert(!ld_snapshot_is_leader(&s, now()));
    struct ld_lease l;
    stored(&l);
    ck_assert_str_eq(l.spec.holder, "");
    ld_lease_clear(&l);
}
END_TEST

static Suite *mode_lease_suite(void)
{
    Suite *s = suite_create("mode_lease");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, publishes_leader_term_and_deadline_of_the_lease);
    tcase_add_test(tc, publishes_another_holder_as_leader);
    tcase_add_test(tc, health_text_while_credentials_are_refused);
    tcase_add_test(tc, resignation_is_counted_and_published);
    tcase_add_test(tc, stop_publishes_the_release);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(mode_lease_suite());
}
