/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_shell: the daemon's one loop (cmd/leaderd/shell/shell.h) with a recording
 * mode of one election and one hook, over the in-memory Lease API of
 * support/fake_transport on its fake clock. Signals come from a fake
 * signal source behind an eventfd, POST /resign through the state's resign
 * channel, as in the daemon; nothing sleeps. Each test checks the times of
 * the writes in the API's own log: a stop signal releases the Lease, a
 * hook's courtesy hold delays a shutdown's release and the bound of
 * min(2000 ms, renew deadline / 2) ends it, a safety hold delays any
 * release for up to the renew deadline and past it no release is written
 * at all, a resignation is answered "released" or "not leader", a hook
 * can end the shell or take a stop signal over, and other signals go to the
 * hooks without stopping anything.
 */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../../cmd/leaderd/shell/shell.h"
#include "../../cmd/leaderd/core/state.h"
#include "kube.h"
#include "lead.h"
#include "log.h"
#include "support/fake_transport.h"
#include "support/fleet.h"
#include "support/run_suite.h"

#define NS FLEET_NS
#define LEASE "solo"
#define ME "me"
#define OTHER FLEET_OTHER
#define STEP_MS 100
#define COOLDOWN_MS 5000
/* How late a write may follow the moment it was due: a pass or two. */
#define SLACK_MS 100

/* The hook under test: what it says is set by each test. */
struct test_hook {
    bool holding;           /* holds_release says this */
    enum ld_hook_hold hold; /* copied into its struct ld_hook */
    bool quiet;             /* no next_wake_ms: only the wake fd ends a wait */
    int wakes_taken;        /* take_wake calls */
    bool take_signal;       /* on_signal takes the signal over */
    bool stop;              /* on_publish asks the shell to end */
    bool stop_when_leading; /* ... once it sees leadership */
    int signals;            /* on_signal calls */
    int last_signo;         /* the last signal on_signal was offered */
    int publishes;
};

struct fixture {
    /* The fake and its clock; another client renews LEASE as OTHER while
     * fl.other_every_ms > 0. */
    struct fleet fl;
    struct ld_kube *kube;
    struct ld_state state;
    int sig_fd;     /* eventfd: a signal is pending */
    int wake_fd;    /* epoll set of sig_fd and the resign channel */
    int pending[4]; /* signals pending, oldest first */
    int n_pending;
    struct ld_shell *sh;
    bool done;
    int64_t lease_ms, renew_ms, retry_ms;
    bool with_hook;
    struct test_hook hook;
    /* What the mode saw. */
    struct ld_election_status last;
    int publishes, shutdowns, finishes, released;
};

static struct fixture fx;

static int64_t now(void)
{
    return fleet_now(&fx.fl);
}

/* ---- the recording mode ---- */

static void mode_host_config(void *ctx, struct ld_host_config *hc)
{
    (void)ctx;
    hc->log_names = false;
}

static enum ld_err mode_attach(void *ctx, struct ld_shell *sh, struct ld_errinfo *err)
{
    (void)ctx;
    struct ld_election_config ec = {
        .namespace_ = NS,
        .name = LEASE,
        .identity = ME,
        .lease_duration_ms = fx.lease_ms,
        .renew_deadline_ms = fx.renew_ms,
        .retry_period_ms = fx.retry_ms,
        .release_on_exit = true,
        .seed = 11,
    };
    size_t index;
    enum ld_err rc = ld_shell_add_election(sh, &ec, &index, err);
    ck_assert_uint_eq(index, 0);
    return rc;
}

static void mode_on_publish(void *ctx, const struct ld_host_view *v, int64_t now_ms)
{
    (void)ctx;
    ck_assert_int_eq(now_ms, now());
    fx.last = v->status;
    fx.publishes++;
}

static void mode_on_event(void *ctx, size_t index, const struct ld_event *ev,
                          int64_t now_ms)
{
    (void)ctx;
    (void)index;
    (void)now_ms;
    if (ev->kind == LD_EV_RELEASED)
        fx.released++;
}

static void mode_on_shutdown(void *ctx, int64_t now_ms)
{
    (void)ctx;
    (void)now_ms;
    fx.shutdowns++;
}

static void mode_finish(void *ctx, int64_t now_ms)
{
    (void)ctx;
    (void)now_ms;
    fx.finishes++;
}

static const struct ld_shell_mode_ops mode_ops = {
    .takes_resignations = true,
    .host_config = mode_host_config,
    .attach = mode_attach,
    .on_publish = mode_on_publish,
    .on_event = mode_on_event,
    .on_shutdown = mode_on_shutdown,
    .finish = mode_finish,
};

/* ---- the hook ---- */

static bool hook_on_publish(void *ctx, const struct ld_election_status *st,
                            int64_t now_ms)
{
    struct test_hook *h = ctx;
    h->publishes++;
    return h->stop ||
           (h->stop_when_leading && ld_leads_at(st->leading, st->lead_until_ms, now_ms));
}

static bool hook_on_signal(void *ctx, int signo)
{
    struct test_hook *h = ctx;
    h->signals++;
    h->last_signo = signo;
    return h->take_signal;
}

/* A hook that holds looks again soon, as the Pod label's does while its
 * call is in flight. */
static int64_t hook_next_wake(void *ctx, int64_t now_ms)
{
    const struct test_hook *h = ctx;
    return h->holding && !h->quiet ? now_ms + 50 : INT64_MAX;
}

static bool hook_take_wake(void *ctx)
{
    ((struct test_hook *)ctx)->wakes_taken++;
    return false;
}

static bool hook_holds_release(void *ctx, int64_t now_ms)
{
    (void)now_ms;
    return ((const struct test_hook *)ctx)->holding;
}

/* ---- the signal source ---- */

static int take_signal(void *ctx)
{
    uint64_t n;
    (void)ctx;
    (void)!read(fx.sig_fd, &n, sizeof(n));
    if (fx.n_pending == 0)
        return 0;
    int signo = fx.pending[0];
    fx.n_pending--;
    memmove(fx.pending, fx.pending + 1, (size_t)fx.n_pending * sizeof(fx.pending[0]));
    return signo;
}

/* Makes the wake fd readable without a signal pending: a hook's news. */
static void wake_for_news(void)
{
    uint64_t one = 1;
    ck_assert_int_eq(write(fx.sig_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
}

static void send_signal(int signo)
{
    uint64_t one = 1;
    ck_assert_int_lt(fx.n_pending, 4);
    fx.pending[fx.n_pending++] = signo;
    ck_assert_int_eq(write(fx.sig_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
}

/* ---- fixture ---- */

static void setup(void)
{
    memset(&fx, 0, sizeof(fx));
    fleet_init(&fx.fl, STEP_MS, NULL);
    fx.fl.other_lease = LEASE;
    fx.kube = fleet_kube(&fx.fl);
    ld_state_init(&fx.state, NS "/" LEASE, ME, 60000);
    ck_assert_int_eq(ld_state_resign_enable(&fx.state, 20000), 0);
    fx.sig_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ck_assert_int_ge(fx.sig_fd, 0);
    fx.wake_fd = epoll_create1(EPOLL_CLOEXEC);
    ck_assert_int_ge(fx.wake_fd, 0);
    int fds[2] = {fx.sig_fd, ld_state_resign_fd(&fx.state)};
    for (int i = 0; i < 2; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        ck_assert_int_eq(epoll_ctl(fx.wake_fd, EPOLL_CTL_ADD, fds[i], &ev), 0);
    }
    fx.lease_ms = FLEET_LEASE_MS;
    fx.renew_ms = FLEET_RENEW_MS;
    fx.retry_ms = FLEET_RETRY_MS;
}

static void teardown(void)
{
    ld_shell_free(fx.sh);
    ld_kube_free(fx.kube);
    ld_state_destroy(&fx.state);
    close(fx.wake_fd);
    close(fx.sig_fd);
    fleet_destroy(&fx.fl);
}

static void new_shell(void)
{
    struct ld_errinfo err;
    struct ld_shell_config c = {
        .kube = fx.kube,
        .state = &fx.state,
        .clock = &fx.fl.clock,
        .namespace_ = NS,
        .lease_duration_ms = fx.lease_ms,
        .renew_deadline_ms = fx.renew_ms,
        .resign_cooldown_ms = COOLDOWN_MS,
        .wake_fd = fx.wake_fd,
        .signals = {.take = take_signal},
    };
    fx.sh = ld_shell_new(&c, (struct ld_shell_mode){.ops = &mode_ops}, &err);
    ck_assert_msg(fx.sh != NULL, "ld_shell_new: %s", err.msg);
    if (!fx.with_hook)
        return;
    struct ld_hook h = {.ctx = &fx.hook,
                        .election = 0,
                        .on_publish = hook_on_publish,
                        .on_signal = hook_on_signal,
                        .next_wake_ms = hook_next_wake,
                        .holds_release = hook_holds_release,
                        .hold = fx.hook.hold,
                        .take_wake = hook_take_wake};
    ck_assert_int_eq(ld_shell_add_hook(fx.sh, &h, &err), LD_OK);
}

/* One turn of the shell; true once it is done. */
static bool turn(int64_t left_ms)
{
    (void)left_ms;
    fx.done = ld_shell_turn(fx.sh, STEP_MS);
    return fx.done;
}

/* Turns for ms of fake time, none once the shell is done. */
static void run_for(int64_t ms)
{
    if (!fx.done)
        fleet_run_for(&fx.fl, ms, turn);
}

/* Turns until pred holds, for at most max_ms of fake time; true if it did. */
static bool run_until(bool (*pred)(void), int64_t max_ms)
{
    return fleet_run_until(&fx.fl, pred, max_ms, turn);
}

static bool leading(void)
{
    return ld_leads_at(fx.last.leading, fx.last.lead_until_ms, now());
}

static bool done(void)
{
    return fx.done;
}

/* The submit time of the first release write (a PUT with an empty holder)
 * at or after since_ms, -1 if none. */
static int64_t release_write_ms(int64_t since_ms)
{
    return fleet_release_ms(&fx.fl, LEASE, -1, since_ms);
}

static const char *stored_holder(void)
{
    return fleet_holder(&fx.fl, LEASE);
}

static void lead(void)
{
    new_shell();
    ck_assert_msg(run_until(leading, 3 * fx.retry_ms), "not leading");
    ck_assert_str_eq(stored_holder(), ME);
}

/* SIGTERM then the shutdown's release after at most the hold; returns the
 * release's delay after the signal. */
static int64_t release_delay_after_sigterm(void)
{
    int64_t t = now();
    send_signal(SIGTERM);
    ck_assert_msg(run_until(done, 2 * fx.renew_ms), "the shell did not end");
    int64_t r = release_write_ms(t);
    ck_assert_msg(r >= 0, "no release written");
    ck_assert_str_eq(stored_holder(), "");
    ck_assert_int_eq(fx.shutdowns, 1);
    ck_assert_int_eq(fx.finishes, 1);
    return r - t;
}

/* ---- stop signals ---- */

START_TEST(sigterm_releases_at_once_and_ends)
{
    lead();
    int64_t d = release_delay_after_sigterm();
    ck_assert_int_le(d, SLACK_MS);
    ck_assert_int_eq(fx.released, 1);
    /* Done is done: another turn neither writes nor finishes again. */
    size_t records = fake_transport_record_count(fx.fl.ft);
    ck_assert(ld_shell_turn(fx.sh, STEP_MS));
    ck_assert_uint_eq(fake_transport_record_count(fx.fl.ft), records);
    ck_assert_int_eq(fx.finishes, 1);
}
END_TEST

/* A signal that is not pending (the wake fd woke for something else) is
 * no reason to stop. */
START_TEST(a_wake_without_a_signal_is_no_stop)
{
    lead();
    wake_for_news();
    run_for(3 * fx.retry_ms);
    ck_assert(!fx.done);
    ck_assert(leading());
    ck_assert_int_eq(fx.shutdowns, 0);
    ck_assert_int_eq(release_write_ms(0), -1);
}
END_TEST

START_TEST(hold_is_bounded_by_2000_ms)
{
    fx.with_hook = true;
    lead();
    fx.hook.holding = true; /* for ever */
    int64_t d = release_delay_after_sigterm();
    ck_assert_msg(d >= 2000 && d <= 2000 + SLACK_MS, "released %lld ms after SIGTERM",
                  (long long)d);
}
END_TEST

START_TEST(hold_is_bounded_by_half_the_renew_deadline)
{
    fx.with_hook = true;
    fx.lease_ms = 5000;
    fx.renew_ms = 3000;
    fx.retry_ms = 1000;
    lead();
    fx.hook.holding = true;
    int64_t d = release_delay_after_sigterm();
    ck_assert_msg(d >= 1500 && d <= 1500 + SLACK_MS, "released %lld ms after SIGTERM",
                  (long long)d);
}
END_TEST

START_TEST(a_holding_hook_delays_the_release_until_it_lets_go)
{
    fx.with_hook = true;
    lead();
    fx.hook.holding = true;
    int64_t t = now();
    send_signal(SIGTERM);
    run_for(700);
    ck_assert_int_eq(release_write_ms(t), -1);
    ck_assert(!fx.done);
    /* The engine stepped down at once: only the release waits. */
    ck_assert(!leading());
    int64_t let_go = now();
    fx.hook.holding = false;
    ck_assert(run_until(done, 2 * fx.renew_ms));
    int64_t r = release_write_ms(t);
    ck_assert_msg(r >= let_go && r <= let_go + SLACK_MS,
                  "released at +%lld ms, let go at +%lld ms", (long long)(r - t),
                  (long long)(let_go - t));
}
END_TEST

/* ---- safety holds ---- */

/* A safety hold outlasts the courtesy bound, up to the renew deadline. */
START_TEST(a_safety_hold_that_ends_in_time_releases_after_it)
{
    fx.with_hook = true;
    fx.hook.hold = LD_HOOK_HOLD_SAFETY;
    lead();
    fx.hook.holding = true;
    int64_t t = now();
    send_signal(SIGTERM);
    run_for(fx.renew_ms - 1000);
    ck_assert_int_eq(release_write_ms(t), -1);
    ck_assert(!fx.done);
    ck_assert(!leading());
    int64_t let_go = now();
    fx.hook.holding = false;
    ck_assert(run_until(done, fx.renew_ms));
    int64_t r = release_write_ms(t);
    ck_assert_msg(r >= let_go && r <= let_go + SLACK_MS,
                  "released at +%lld ms, let go at +%lld ms", (long long)(r - t),
                  (long long)(let_go - t));
    ck_assert_str_eq(stored_holder(), "");
}
END_TEST

/* The deadline of the term as the engine publishes it (election.h). */
static int64_t term_deadline(void)
{
    struct ld_election_status st;
    ld_election_status(ld_host_election(ld_shell_host(fx.sh), 0), &st);
    return st.term_until_ms;
}

/* Leads, then lets half a retry period pass, so that the term's deadline
 * (the last renewal's start plus the renew deadline) comes well before
 * "now plus the renew deadline": a bound counted from a step-down now
 * would be told apart from the term's. Returns the term's deadline. */
static int64_t lead_into_the_term(void)
{
    lead();
    run_for(fx.retry_ms / 2);
    int64_t until = term_deadline();
    ck_assert_int_le(until, now() + fx.renew_ms - fx.retry_ms / 4);
    return until;
}

/* Still held at the deadline of the term: the release is given up, the
 * Lease keeps our name and expires by itself, and the shell ends without
 * having written anything after the signal; at the term's deadline, not at
 * the step-down's time plus the renew deadline. */
START_TEST(a_safety_hold_past_the_bound_writes_no_release)
{
    fx.with_hook = true;
    fx.hook.hold = LD_HOOK_HOLD_SAFETY;
    int64_t term_until = lead_into_the_term();
    fx.hook.holding = true; /* for ever */
    int64_t t = now();
    send_signal(SIGTERM);
    ck_assert_int_eq(term_deadline(), term_until); /* a step-down keeps it */
    ck_assert_msg(run_until(done, 2 * fx.renew_ms), "the shell did not end");
    ck_assert_msg(now() >= term_until && now() <= term_until + SLACK_MS,
                  "ended at +%lld ms, the term ended at +%lld ms", (long long)(now() - t),
                  (long long)(term_until - t));
    ck_assert_int_eq(release_write_ms(t), -1);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "PUT", LEASE, t), 0);
    ck_assert_str_eq(stored_holder(), ME);
    ck_assert(!leading());
    ck_assert_int_eq(fx.released, 0);
    ck_assert_int_eq(fx.finishes, 1);
}
END_TEST

/* A hook that does not poll: its news on the wake fd ends a shutdown's
 * hold at once (the wake fd is watched while stopping too). */
START_TEST(a_hooks_news_ends_a_shutdown_hold_at_once)
{
    fx.with_hook = true;
    fx.hook.hold = LD_HOOK_HOLD_SAFETY;
    fx.hook.quiet = true;
    lead();
    fx.hook.holding = true;
    int64_t t = now();
    send_signal(SIGTERM);
    run_for(3000);
    ck_assert(!fx.done);
    int wakes = fx.hook.wakes_taken;
    int64_t let_go = now();
    fx.hook.holding = false;
    wake_for_news();
    ck_assert(run_until(done, fx.renew_ms));
    ck_assert_int_gt(fx.hook.wakes_taken, wakes);
    int64_t r = release_write_ms(t);
    ck_assert_msg(r >= let_go && r <= let_go + SLACK_MS,
                  "released at +%lld ms, let go at +%lld ms", (long long)(r - t),
                  (long long)(let_go - t));
}
END_TEST

START_TEST(a_hook_can_take_a_signal_over)
{
    fx.with_hook = true;
    fx.hook.take_signal = true;
    lead();
    int64_t t = now();
    send_signal(SIGTERM);
    run_for(3 * fx.retry_ms);
    ck_assert_int_eq(fx.hook.signals, 1);
    ck_assert(!fx.done);
    ck_assert(leading());
    ck_assert_int_eq(fx.shutdowns, 0);
    ck_assert_uint_gt(fake_transport_count(fx.fl.ft, "PUT", LEASE, t),
                      0); /* still renewing */
    ck_assert_int_eq(release_write_ms(t), -1);
    /* The hook ends the shell when its work is done; its news wakes the
     * shell (as the exec child's channel does), whose publish takes it. */
    int64_t stop = now();
    fx.hook.stop = true;
    wake_for_news();
    ck_assert(run_until(done, 2 * fx.renew_ms));
    int64_t r = release_write_ms(stop);
    ck_assert_msg(r >= stop && r <= stop + SLACK_MS, "released at %lld, stop at %lld",
                  (long long)r, (long long)stop);
    ck_assert_int_eq(fx.shutdowns, 1);
}
END_TEST

/* ---- signals passed on ---- */

/* Leading goes on after t as if nothing came. */
static void still_leading_after(int64_t t)
{
    run_for(3 * fx.retry_ms);
    ck_assert(!fx.done);
    ck_assert(leading());
    ck_assert_int_eq(fx.shutdowns, 0);
    ck_assert_uint_gt(fake_transport_count(fx.fl.ft, "PUT", LEASE, t),
                      0); /* still renewing */
    ck_assert_int_eq(release_write_ms(t), -1);
}

START_TEST(a_hook_is_offered_other_signals_and_the_shell_goes_on)
{
    fx.with_hook = true;
    fx.hook.take_signal = true;
    lead();
    int64_t t = now();
    send_signal(SIGHUP);
    still_leading_after(t);
    ck_assert_int_eq(fx.hook.signals, 1);
    ck_assert_int_eq(fx.hook.last_signo, SIGHUP);
    send_signal(SIGUSR1);
    still_leading_after(t);
    ck_assert_int_eq(fx.hook.signals, 2);
    ck_assert_int_eq(fx.hook.last_signo, SIGUSR1);
}
END_TEST

/* No hook passes it on (no command runs): ignored, never a stop. */
START_TEST(a_signal_no_hook_passes_on_is_ignored)
{
    fx.with_hook = true;
    lead();
    int64_t t = now();
    send_signal(SIGUSR2);
    still_leading_after(t);
    ck_assert_int_eq(fx.hook.signals, 1);
    ck_assert_int_eq(fx.hook.last_signo, SIGUSR2);
}
END_TEST

START_TEST(without_hooks_other_signals_are_ignored)
{
    lead();
    int64_t t = now();
    send_signal(SIGHUP);
    send_signal(SIGQUIT);
    still_leading_after(t);
}
END_TEST

/* Several signals behind one wake are all taken, in order: the one passed
 * on reaches the hook, the stop signal after it still stops. */
START_TEST(signals_pending_together_are_each_taken)
{
    fx.with_hook = true;
    lead();
    int64_t t = now();
    send_signal(SIGUSR1);
    send_signal(SIGTERM);
    ck_assert_msg(run_until(done, 2 * fx.renew_ms), "the shell did not end");
    ck_assert_int_eq(fx.hook.signals, 2);
    ck_assert_int_eq(fx.hook.last_signo, SIGTERM);
    ck_assert_int_eq(fx.shutdowns, 1);
    ck_assert_int_ge(release_write_ms(t), 0);
}
END_TEST

START_TEST(a_hook_asking_to_stop_ends_the_shell)
{
    fx.with_hook = true;
    fx.hook.stop_when_leading = true;
    new_shell();
    ck_assert(run_until(done, 3 * fx.retry_ms + fx.renew_ms));
    ck_assert_int_eq(fx.hook.signals, 0);
    ck_assert_int_eq(fx.shutdowns, 1);
    ck_assert_int_ge(release_write_ms(0), 0);
    ck_assert_str_eq(stored_holder(), "");
}
END_TEST

/* ---- POST /resign ---- */

static uint64_t ticket;

static bool answered(void)
{
    return ld_state_resign_outcome(&fx.state, ticket) != LD_RESIGN_PENDING;
}

static void ask_resign(void)
{
    int64_t wait_ms = 0;
    ticket = ld_state_resign_ask(&fx.state, &wait_ms);
    ck_assert_uint_gt(ticket, 0);
}

START_TEST(resign_is_answered_released)
{
    lead();
    int64_t t = now();
    ask_resign();
    ck_assert(run_until(answered, 2 * fx.renew_ms));
    ck_assert_int_eq(ld_state_resign_outcome(&fx.state, ticket), LD_RESIGN_RELEASED);
    int64_t r = release_write_ms(t);
    ck_assert(r >= t && r <= t + SLACK_MS);
    ck_assert_str_eq(stored_holder(), "");
    ck_assert(!leading());
    /* It stays out for the cooldown, then contends again. */
    run_for(COOLDOWN_MS - 2 * SLACK_MS);
    ck_assert_str_eq(stored_holder(), "");
    ck_assert(run_until(leading, 2 * fx.retry_ms + 2 * SLACK_MS));
    ck_assert(!fx.done);
}
END_TEST

START_TEST(resign_is_answered_not_leader_on_a_standby)
{
    fx.fl.other_every_ms = 2000;
    fx.fl.other_secs = (int32_t)(fx.lease_ms / 1000);
    fleet_other_renews(&fx.fl);
    new_shell();
    run_for(3 * fx.retry_ms);
    ck_assert(fx.last.observed);
    ck_assert(!leading());
    int64_t t = now();
    ask_resign();
    ck_assert(run_until(answered, 1000));
    ck_assert_int_eq(ld_state_resign_outcome(&fx.state, ticket), LD_RESIGN_NOT_LEADER);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "PUT", LEASE, 0), 0);
    ck_assert_uint_eq(fake_transport_count(fx.fl.ft, "POST", LEASE, 0), 0);
    ck_assert_str_eq(stored_holder(), OTHER);
    ck_assert_int_le(now() - t, SLACK_MS);
}
END_TEST

/* Only a safety hold holds a resignation's release (the exec child gone
 * first); a courtesy hold holds only a shutdown's. */
START_TEST(only_a_safety_hold_delays_a_resignation)
{
    fx.with_hook = true;
    fx.hook.hold = LD_HOOK_HOLD_SAFETY;
    lead();
    fx.hook.holding = true;
    int64_t t = now();
    ask_resign();
    run_for(1000);
    ck_assert_int_eq(release_write_ms(t), -1);
    ck_assert(!answered());
    int64_t let_go = now();
    fx.hook.holding = false;
    ck_assert(run_until(answered, 2 * fx.renew_ms));
    ck_assert_int_eq(ld_state_resign_outcome(&fx.state, ticket), LD_RESIGN_RELEASED);
    ck_assert_int_le(release_write_ms(t) - let_go, SLACK_MS);
}
END_TEST

START_TEST(a_courtesy_hold_does_not_delay_a_resignation)
{
    fx.with_hook = true;
    lead();
    fx.hook.holding = true;
    int64_t t = now();
    ask_resign();
    ck_assert(run_until(answered, 2 * fx.renew_ms));
    ck_assert_int_eq(ld_state_resign_outcome(&fx.state, ticket), LD_RESIGN_RELEASED);
    int64_t r = release_write_ms(t);
    ck_assert(r >= t && r <= t + SLACK_MS);
}
END_TEST

START_TEST(a_safety_hold_past_the_bound_gives_a_resignation_up)
{
    fx.with_hook = true;
    fx.hook.hold = LD_HOOK_HOLD_SAFETY;
    int64_t term_until = lead_into_the_term();
    fx.hook.holding = true;
    int64_t t = now();
    ask_resign();
    ck_assert(run_until(answered, 2 * fx.renew_ms));
    ck_assert_int_eq(ld_state_resign_outcome(&fx.state, ticket), LD_RESIGN_FAILED);
    ck_assert_int_ge(now(), term_until);
    ck_assert_int_le(now(), term_until + SLACK_MS);
    ck_assert_int_eq(release_write_ms(t), -1);
    ck_assert_str_eq(stored_holder(), ME);
    ck_assert(!leading());
    ck_assert(!fx.done); /* a standby now */
}
END_TEST

/* A hook bound to an election the shell does not have is refused. */
START_TEST(a_hook_of_an_unknown_election_is_refused)
{
    struct ld_errinfo err;
    new_shell();
    struct ld_hook h = {.ctx = &fx.hook, .election = 1, .on_publish = hook_on_publish};
    ck_assert_int_eq(ld_shell_add_hook(fx.sh, &h, &err), LD_EINVAL);
}
END_TEST

static Suite *shell_suite(void)
{
    Suite *s = suite_create("shell");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, sigterm_releases_at_once_and_ends);
    tcase_add_test(tc, a_wake_without_a_signal_is_no_stop);
    tcase_add_test(tc, hold_is_bounded_by_2000_ms);
    tcase_add_test(tc, hold_is_bounded_by_half_the_renew_deadline);
    tcase_add_test(tc, a_holding_hook_delays_the_release_until_it_lets_go);
    tcase_add_test(tc, a_hook_can_take_a_signal_over);
    tcase_add_test(tc, a_hook_is_offered_other_signals_and_the_shell_goes_on);
    tcase_add_test(tc, a_signal_no_hook_passes_on_is_ignored);
    tcase_add_test(tc, without_hooks_other_signals_are_ignored);
    tcase_add_test(tc, signals_pending_together_are_each_taken);
    tcase_add_test(tc, a_hook_asking_to_stop_ends_the_shell);
    tcase_add_test(tc, resign_is_answered_released);
    tcase_add_test(tc, resign_is_answered_not_leader_on_a_standby);
    tcase_add_test(tc, only_a_safety_hold_delays_a_resignation);
    tcase_add_test(tc, a_courtesy_hold_does_not_delay_a_resignation);
    tcase_add_test(tc, a_safety_hold_that_ends_in_time_releases_after_it);
    tcase_add_test(tc, a_safety_hold_past_the_bound_writes_no_release);
    tcase_add_test(tc, a_safety_hold_past_the_bound_gives_a_resignation_up);
    tcase_add_test(tc, a_hooks_news_ends_a_shutdown_hold_at_once);
    tcase_add_test(tc, a_hook_of_an_unknown_election_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(shell_suite());
}
