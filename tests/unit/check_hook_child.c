/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_hook_child: the exec child's hook (cmd/leaderd/hooks/hook_child.h) over a
 * real supervisor and a small shell command, driven by publishes made here
 * on the monotonic clock: how each end of the command is counted on the
 * metrics (exited, signaled, deadline), and that signals other than the
 * stop signals reach the command without ending anything.
 */
#include <check.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../cmd/leaderd/hooks/hook_child.h"
#include "log.h"
#include "support/run_suite.h"

/* How long a command may take to start or end on a loaded machine. */
#define WAIT_MS 10000

static struct ld_metrics metrics;
static struct ld_hook_child child;
static struct ld_hook hook;
static char journal[64];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void quiet_sink(void *ctx, enum ld_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

static void setup(void)
{
    ld_log_set_sink(quiet_sink, NULL, LD_LOG_INFO);
    ld_metrics_init(&metrics);
    snprintf(journal, sizeof(journal), "/tmp/ld-hook-child-XXXXXX");
    int fd = mkstemp(journal);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

static void teardown(void)
{
    ld_hook_child_close(&child);
    ld_metrics_destroy(&metrics);
    unlink(journal);
    ld_log_set_sink(NULL, NULL, LD_LOG_INFO);
}

/* Starts the supervisor for `sh -c script JOURNAL` and binds the hook. */
static void command(const char *script)
{
    static char *argv[5];
    argv[0] = "/bin/sh";
    argv[1] = "-c";
    argv[2] = (char *)script;
    argv[3] = journal;
    argv[4] = NULL;
    struct ld_supervisor_config cfg = {
        .command = argv, .lease = "ns/lease", .identity = "me", .grace_ms = 300};
    struct ld_errinfo err;
    ck_assert_msg(ld_hook_child_init(&child, &cfg, &metrics, &err) == LD_OK, "%s",
                  err.msg);
    hook = ld_hook_child_bind(&child, 0);
}

/* One publish: leading for another WAIT_MS, or not leading. Returns
 * whether the hook asks the shell to end. */
static bool publish(bool leading)
{
    int64_t now = now_ms();
    struct ld_election_status st;
    memset(&st, 0, sizeof(st));
    st.observed = true;
    st.leader = leading ? "me" : "";
    st.term = 3;
    st.leading = leading;
    st.lead_until_ms = leading ? now + WAIT_MS : now;
    return hook.on_publish(hook.ctx, &st, now);
}

/* Publishes whenever the supervisor has news, until the command ended;
 * returns the last publish's answer. */
static bool publish_until_ended(bool leading)
{
    int64_t until = now_ms() + WAIT_MS;
    bool end = publish(leading);
    while (child.alive && now_ms() < until) {
        struct pollfd p = {.fd = ld_hook_child_fd(&child), .events = POLLIN};
        poll(&p, 1, (int)(until - now_ms()));
        end = publish(leading);
    }
    ck_assert_msg(!child.alive, "the command did not end");
    return end;
}

static uint64_t exits(enum ld_metrics_child_exit reason)
{
    return metrics.child.exits[reason];
}

static bool journal_says(const char *text)
{
    char line[128] = "";
    FILE *f = fopen(journal, "r");
    bool found = false;
    while (f && fgets(line, sizeof(line), f))
        found |= strstr(line, text) != NULL;
    if (f)
        fclose(f);
    return found;
}

static void wait_for_journal(const char *text)
{
    int64_t until = now_ms() + WAIT_MS;
    while (!journal_says(text) && now_ms() < until)
        poll(NULL, 0, 20);
    ck_assert_msg(journal_says(text), "the command never wrote '%s'", text);
}

START_TEST(configured_metrics_start_at_zero)
{
    command("exit 0");
    ck_assert(metrics.child.configured);
    ck_assert_uint_eq(metrics.child.starts, 0);
    for (int r = 0; r < LD_METRICS_CHILD_EXIT_REASONS; r++)
        ck_assert_uint_eq(exits((enum ld_metrics_child_exit)r), 0);
}
END_TEST

START_TEST(an_own_exit_counts_as_exited)
{
    command("exit 7");
    ck_assert(publish_until_ended(true)); /* its exit ends leaderd */
    ck_assert_uint_eq(metrics.child.starts, 1);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_EXITED), 1);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_SIGNALED), 0);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_DEADLINE), 0);
    ck_assert_int_eq(ld_hook_child_exit_status(&child), 7);
}
END_TEST

START_TEST(a_signal_of_its_own_counts_as_signaled)
{
    command("kill -9 $$");
    ck_assert(publish_until_ended(true));
    ck_assert_uint_eq(metrics.child.starts, 1);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_SIGNALED), 1);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_EXITED), 0);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_DEADLINE), 0);
    ck_assert_int_eq(ld_hook_child_exit_status(&child), 128 + 9);
}
END_TEST

/* Stopped by the supervisor because leadership ended: "deadline", even
 * though SIGTERM is what ended it; leaderd goes on contending. */
START_TEST(an_end_after_leadership_counts_as_deadline)
{
    command("echo up > \"$0\"; while :; do sleep 0.05; done");
    ck_assert(!publish(true));
    wait_for_journal("up");
    ck_assert(!publish_until_ended(false));
    ck_assert_uint_eq(metrics.child.starts, 1);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_DEADLINE), 1);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_SIGNALED), 0);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_EXITED), 0);
}
END_TEST

/* SIGHUP and SIGUSR1 reach the command, which goes on running; no stop
 * signal came, so leaderd would start a new command after this one. */
START_TEST(other_signals_reach_the_command_and_end_nothing)
{
    command("exec 2>/dev/null; trap 'echo hup >> \"$0\"' HUP; trap 'echo usr1 >> \"$0\"' "
            "USR1; "
            "echo up > \"$0\"; while :; do sleep 0.05; done");
    ck_assert(!hook.on_signal(hook.ctx, SIGUSR1)); /* nothing runs yet */
    ck_assert(!publish(true));
    wait_for_journal("up");
    ck_assert(hook.on_signal(hook.ctx, SIGHUP));
    wait_for_journal("hup");
    ck_assert(hook.on_signal(hook.ctx, SIGUSR1));
    wait_for_journal("usr1");
    ck_assert(!publish(true));
    ck_assert(child.alive);
    ck_assert(!child.signalled);
    ck_assert_uint_eq(exits(LD_METRICS_CHILD_SIGNALED), 0);
}
END_TEST

static Suite *hook_child_suite(void)
{
    Suite *s = suite_create("hook_child");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, configured_metrics_start_at_zero);
    tcase_add_test(tc, an_own_exit_counts_as_exited);
    tcase_add_test(tc, a_signal_of_its_own_counts_as_signaled);
    tcase_add_test(tc, an_end_after_leadership_counts_as_deadline);
    tcase_add_test(tc, other_signals_reach_the_command_and_end_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(hook_child_suite());
}
