/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/supervisor: the deadline policy as a pure
 * function of messages and integer time, then the real process with a
 * shell child, its group, its environment and its end (deadline, stop,
 * leaderd gone), then containment: processes that leave the child's group
 * or session, in both modes (the process tree, and a cgroup v2 where the
 * machine lets the test make one), with the supervisor alive and killed.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../cmd/leaderd/hooks/supervisor.h"
#include "log.h"
#include "support/fake_clock.h"
#include "support/run_suite.h"

#define GRACE 500
/* statfs's f_type of a cgroup v2 mount. */
#define CGROUP2_MAGIC 0x63677270

/* Runs the policy at now until nothing more is due; returns what was due,
 * TERM and KILL as bits, and the next wake time in *wake. */
static int due_at(struct ld_sup_policy *p, int64_t now, int64_t *wake)
{
    int got = 0;
    for (int i = 0; i < 4; i++) {
        enum ld_sup_act a = ld_sup_policy_due(p, now, wake);
        if (a == LD_SUP_NOTHING)
            break;
        got |= a == LD_SUP_TERM ? 1 : 2;
    }
    return got;
}

START_TEST(nothing_without_a_child)
{
    struct ld_sup_policy p;
    int64_t wake;
    ld_sup_policy_init(&p, GRACE);
    ck_assert_int_eq(due_at(&p, 1000000, &wake), 0);
    ck_assert_int_eq(wake, INT64_MAX);
    /* A deadline or a stop for no child changes nothing. */
    ld_sup_policy_deadline(&p, 10);
    ld_sup_policy_ended(&p, 10);
    ck_assert_int_eq(due_at(&p, 1000000, &wake), 0);
}
END_TEST

START_TEST(deadline_passes_term_then_kill)
{
    struct ld_sup_policy p;
    int64_t wake;
    ld_sup_policy_init(&p, GRACE);
    ld_sup_policy_started(&p, 10000);
    ck_assert_int_eq(due_at(&p, 9999, &wake), 0);
    ck_assert_int_eq(wake, 10000);
    ck_assert_int_eq(due_at(&p, 10000, &wake), 1);
    ck_assert_int_eq(wake, 10000 + GRACE);
    ck_assert_int_eq(due_at(&p, 10000 + GRACE - 1, &wake), 0);
    ck_assert_int_eq(wake, 10000 + GRACE);
    ck_assert_int_eq(due_at(&p, 10000 + GRACE, &wake), 2);
    /* Once killed, only the exit is awaited. */
    ck_assert_int_eq(due_at(&p, 20000, &wake), 0);
    ck_assert_int_eq(wake, INT64_MAX);
}
END_TEST

START_TEST(renewals_move_the_deadline)
{
    struct ld_sup_policy p;
    int64_t wake;
    ld_sup_policy_init(&p, GRACE);
    ld_sup_policy_started(&p, 3000);
    for (int64_t t = 1000; t <= 60000; t += 1000) {
        ck_assert_int_eq(due_at(&p, t, &wake), 0);
        ld_sup_policy_deadline(&p, t + 3000);
    }
    ck_assert_int_eq(due_at(&p, 62999, &wake), 0);
    ck_assert_int_eq(wake, 63000);
    ck_assert_int_eq(due_at(&p, 63000, &wake), 1);
}
END_TEST

START_TEST(stop_ends_now_and_caps_the_kill)
{
    struct ld_sup_policy p;
    int64_t wake;
    ld_sup_policy_init(&p, GRACE);
    ld_sup_policy_started(&p, 10000);
    ld_sup_policy_ended(&p, 4000); /* the loss was seen before the deadline */
    ck_assert_int_eq(due_at(&p, 4000, &wake), 1);
    ck_assert_int_eq(wake, 4000 + GRACE);
    /* A late renewal message cannot revive a child being stopped. */
    ld_sup_policy_deadline(&p, 20000);
    ck_assert_int_eq(due_at(&p, 4000 + GRACE, &wake), 2);
}
END_TEST

START_TEST(late_stop_counts_from_the_deadline)
{
    struct ld_sup_policy p;
    int64_t wake;
    ld_sup_policy_init(&p, GRACE);
    ld_sup_policy_started(&p, 10000);
    /* leaderd was paused: the stop (or its EOF) arrives after the deadline.
     * Both signals are overdue at once. */
    ld_sup_policy_ended(&p, 12000);
    ck_assert_int_eq(due_at(&p, 12000, &wake), 3);
}
END_TEST

START_TEST(a_new_child_starts_fresh)
{
    struct ld_sup_policy p;
    int64_t wake;
    ld_sup_policy_init(&p, GRACE);
    ld_sup_policy_started(&p, 1000);
    ck_assert_int_eq(due_at(&p, 1000 + GRACE, &wake), 3);
    ld_sup_policy_exited(&p);
    ld_sup_policy_started(&p, 9000);
    ck_assert_int_eq(due_at(&p, 8000, &wake), 0);
    ck_assert_int_eq(wake, 9000);
}
END_TEST

/* ---- the process ---- */

static char journal[64];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void setup(void)
{
    snprintf(journal, sizeof(journal), "/tmp/ld-sup-XXXXXX");
    int fd = mkstemp(journal);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

static void teardown(void)
{
    unlink(journal);
}

/* The child records its pid, group and environment, then ignores SIGTERM,
 * so only the SIGKILL stage can end it. */
static const char script[] =
    "trap '' TERM; read -r _ _ _ _ pgid _ < /proc/$$/stat; echo \"$$ $pgid "
    "$LEADERD_LEASE "
    "$LEADERD_IDENTITY $LEADERD_TERM\" > \"$0\"; while :; do sleep 0.05; done";

static struct ld_supervisor spawn(int64_t grace)
{
    static char *const argv[] = {"/bin/sh", "-c", (char *)script, journal, NULL};
    struct ld_supervisor_config cfg = {
        .command = argv, .lease = "ns/lease", .identity = "me", .grace_ms = grace};
    struct ld_supervisor s;
    ck_assert_int_eq(ld_supervisor_spawn(&s, &cfg), LD_OK);
    ck_assert_int_gt(s.pid, 0);
    return s;
}

/* The record's five words: pid, group, lease, identity, term. */
static bool read_record(char words[5][64])
{
    char line[512];
    FILE *f = fopen(journal, "r");
    bool ok = f && fgets(line, sizeof(line), f);
    if (f)
        fclose(f);
    char *save = NULL;
    char *w = ok ? strtok_r(line, " \n", &save) : NULL;
    int n = 0;
    for (; w && n < 5; w = strtok_r(NULL, " \n", &save))
        snprintf(words[n++], 64, "%s", w);
    return n == 5;
}

/* Waits up to timeout_ms for the child's record: its pid, with the rest
 * checked here. */
static pid_t child_record(int64_t timeout_ms)
{
    int64_t until = now_ms() + timeout_ms;
    char words[5][64];
    while (now_ms() < until) {
        if (read_record(words)) {
            ck_assert_str_eq(words[0], words[1]); /* its own group */
            ck_assert_str_eq(words[2], "ns/lease");
            ck_assert_str_eq(words[3], "me");
            ck_assert_str_eq(words[4], "42");
            return (pid_t)strtol(words[0], NULL, 10);
        }
        poll(NULL, 0, 20);
    }
    ck_abort_msg("the child never started");
    return -1;
}

/* Waits for the child's end, reported as want_kind; returns the wait status. */
static int exited(struct ld_supervisor *s, enum ld_sup_kind want_kind, int64_t timeout_ms)
{
    int64_t until = now_ms() + timeout_ms;
    struct ld_sup_msg m;
    while (now_ms() < until) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        poll(&p, 1, (int)(until - now_ms()));
        int rc = ld_supervisor_recv(s, &m);
        ck_assert_int_ge(rc, 0);
        if (rc == 1) {
            ck_assert_int_eq(m.kind, want_kind);
            return m.arg;
        }
    }
    ck_abort_msg("no exit reported");
    return -1;
}

START_TEST(deadline_kills_a_stubborn_child)
{
    struct ld_supervisor s = spawn(300);
    int64_t deadline = now_ms() + 700;
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 42, deadline), 0);
    pid_t pid = child_record(5000);
    int status = exited(&s, LD_SUP_STOPPED, 10000);
    int64_t at = now_ms();
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ck_assert_int_ge(at, deadline + 300);
    ck_assert_int_eq(kill(pid, 0), -1); /* reaped, not a zombie */
    ld_supervisor_close(&s);
}
END_TEST

/* A poll timeout is counted on CLOCK_MONOTONIC, which a suspend stops: the
 * supervisor waits for the deadline on a timer of the clock that counts
 * the suspend, armed at the deadline itself, so after a resume it does not
 * sleep past a deadline that passed meanwhile. */
START_TEST(the_deadline_is_awaited_on_the_suspend_counting_clock)
{
    struct ld_supervisor s = spawn(300);
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 42, now_ms() + 40000), 0);
    child_record(5000);
    int64_t until = now_ms() + 5000;
    bool armed = false;
    while (!armed && now_ms() < until) {
        armed = boottime_timer_armed(s.pid, 30, 40);
        if (!armed)
            poll(NULL, 0, 20);
    }
    ck_assert_msg(armed, "no CLOCK_BOOTTIME timer armed at the deadline");
    /* A renewal moves the timer with the deadline. */
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_DEADLINE, 0, now_ms() + 90000), 0);
    armed = false;
    until = now_ms() + 5000;
    while (!armed && now_ms() < until) {
        armed = boottime_timer_armed(s.pid, 80, 90);
        if (!armed)
            poll(NULL, 0, 20);
    }
    ck_assert_msg(armed, "the timer did not follow the renewed deadline");
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_STOP, 0, 0), 0);
    exited(&s, LD_SUP_STOPPED, 10000);
    ld_supervisor_close(&s);
}
END_TEST

START_TEST(eof_ends_the_child_and_the_supervisor)
{
    struct ld_supervisor s = spawn(200);
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 42, now_ms() + 60000), 0);
    pid_t pid = child_record(5000);
    int64_t closed = now_ms();
    pid_t sup = s.pid;
    close(s.fd); /* as if leaderd died */
    s.fd = -1;
    int status = 0;
    ck_assert_int_eq(waitpid(sup, &status, 0), sup);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_lt(now_ms() - closed, 5000);
    ck_assert_int_eq(kill(pid, 0), -1);
    s.pid = -1;
}
END_TEST

START_TEST(signal_is_passed_to_the_group)
{
    static char *const argv[] = {"/bin/sh", "-c", "sleep 30 & wait", NULL};
    struct ld_supervisor_config cfg = {
        .command = argv, .lease = "ns/l", .identity = "me", .grace_ms = 200};
    struct ld_supervisor s;
    ck_assert_int_eq(ld_supervisor_spawn(&s, &cfg), LD_OK);
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 1, now_ms() + 60000), 0);
    poll(NULL, 0, 200); /* let the shell start; the signal is harmless before */
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_SIGNAL, SIGTERM, 0), 0);
    int status = exited(&s, LD_SUP_EXITED, 10000); /* leaderd's signal, not a deadline */
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    ld_supervisor_close(&s);
}
END_TEST

START_TEST(missing_command_is_127)
{
    static char *const argv[] = {"/nonexistent/leaderd-test-command", NULL};
    struct ld_supervisor_config cfg = {
        .command = argv, .lease = "ns/l", .identity = "me", .grace_ms = 200};
    struct ld_supervisor s;
    ck_assert_int_eq(ld_supervisor_spawn(&s, &cfg), LD_OK);
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 1, now_ms() + 60000), 0);
    int status = exited(&s, LD_SUP_EXITED, 10000);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 127);
    ld_supervisor_close(&s);
}
END_TEST

/* ---- containment ---- */

/* Where this machine has a cgroup v2 the test may write to: a pure v2
 * host, or the unified mount of a hybrid one. */
static const char *cgroup_v2_mount(void)
{
    static const char *const candidates[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        struct statfs fs;
        if (statfs(candidates[i], &fs) == 0 && fs.f_type == CGROUP2_MAGIC &&
            access(candidates[i], W_OK) == 0)
            return candidates[i];
    }
    return NULL;
}

/* The cgroup a containment test moved itself into, so that it is alone in
 * a tree leaderd may claim ("" when none), and the one it came from. */
static char test_cgroup[600];
static char home_cgroup[512];

static int write_text(const char *dir, const char *name, const char *text)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;
    close(fd);
    return rc;
}

/* The test process's own cgroup v2 path ("" for the root), into own. */
static bool own_cgroup(char *own, size_t len)
{
    char line[256];
    bool found = false;
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && !found && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "0::/", 4) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        snprintf(own, len, "%s", strcmp(line, "0::/") == 0 ? "" : line + 3);
        found = true;
    }
    if (f)
        fclose(f);
    return found;
}

static void enter_test_cgroup(void)
{
    const char *mount = cgroup_v2_mount();
    char own[256];
    test_cgroup[0] = '\0';
    if (!mount || !own_cgroup(own, sizeof(own)))
        return;
    snprintf(home_cgroup, sizeof(home_cgroup), "%s%s", mount, own);
    snprintf(test_cgroup, sizeof(test_cgroup), "%s/ld-unit-%ld", home_cgroup,
             (long)getpid());
    if (mkdir(test_cgroup, 0755) != 0 ||
        write_text(test_cgroup, "cgroup.procs", "0") != 0)
        test_cgroup[0] = '\0';
}

static int remove_dir(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    return 0;
}

static void leave_test_cgroup(void)
{
    if (!test_cgroup[0])
        return;
    write_text(home_cgroup, "cgroup.procs", "0");
    /* A process killed by the test may take a moment to leave. */
    for (int i = 0; i < 100 && access(test_cgroup, F_OK) == 0; i++) {
        nftw(test_cgroup, remove_dir, 16, FTW_DEPTH | FTW_PHYS);
        if (access(test_cgroup, F_OK) == 0)
            poll(NULL, 0, 20);
    }
    test_cgroup[0] = '\0';
}

static void setup_contained(void)
{
    setup();
    enter_test_cgroup();
}

/* Mode 2's other process in the test's cgroup, so that leaderd shares it. */
static pid_t neighbour = -1;

static void teardown_contained(void)
{
    if (neighbour > 0) {
        kill(neighbour, SIGKILL);
        waitpid(neighbour, NULL, 0);
        neighbour = -1;
    }
    leave_test_cgroup();
    teardown();
}

static char logged[256];

static void keep_line(void *ctx, enum ld_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    if (strncmp(msg, "containment: ", 13) == 0)
        snprintf(logged, sizeof(logged), "%s", msg);
}

/* Loop index 0: the process tree; 1: a cgroup v2 tree of leaderd's own; 2:
 * a cgroup v2 leaderd shares with another process (the command's cgroup
 * and the process tree). Returns false (the test has nothing to check)
 * when the machine offers no cgroup v2 to write. */
static bool spawn_contained(int mode, char *const *argv, int64_t grace,
                            struct ld_supervisor *s)
{
    const char *mount = mode == 0 ? "/nonexistent" : cgroup_v2_mount();
    if (!mount || (mode != 0 && !test_cgroup[0]))
        return false;
    if (mode == 2) {
        neighbour = fork();
        if (neighbour == 0)
            for (;;)
                pause();
        ck_assert_int_gt(neighbour, 0);
    }
    struct ld_supervisor_config cfg = {.command = argv,
                                       .lease = "ns/lease",
                                       .identity = "me",
                                       .grace_ms = grace,
                                       .cgroup_mount = mount};
    logged[0] = '\0';
    ld_log_set_sink(keep_line, NULL, LD_LOG_DEBUG);
    ck_assert_int_eq(ld_supervisor_spawn(s, &cfg), LD_OK);
    ld_log_set_sink(NULL, NULL, LD_LOG_ERROR);
    if (mode == 0) {
        ck_assert_ptr_null(s->cgroup);
        ck_assert_ptr_null(s->tree);
        ck_assert_msg(strncmp(logged, "containment: process tree (subreaper): ", 39) == 0,
                      "%s", logged);
    } else if (mode == 2) {
        ck_assert_ptr_nonnull(s->cgroup);
        ck_assert_ptr_null(s->tree);
        char want[700];
        snprintf(want, sizeof(want),
                 "containment: cgroup v2 (%s) and process tree (subreaper): ", s->cgroup);
        ck_assert_msg(strncmp(logged, want, strlen(want)) == 0, "%s", logged);
    } else {
        /* The test's own cgroup is claimed; the command gets one in it. */
        ck_assert_ptr_nonnull(s->cgroup);
        ck_assert_str_eq(s->tree, test_cgroup);
        char want[600];
        snprintf(want, sizeof(want), "containment: cgroup v2 (%s): ", s->tree);
        ck_assert_msg(strncmp(logged, want, strlen(want)) == 0, "%s", logged);
    }
    return true;
}

/* True while pid exists and is not a zombie. */
static bool running(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] != 'Z';
}

/* Waits up to timeout_ms for want pids in the journal, one a line; returns
 * how many were read into pids. */
static int journal_pids(pid_t *pids, int want, int64_t timeout_ms)
{
    int64_t until = now_ms() + timeout_ms;
    int n = 0;
    while (n < want && now_ms() < until) {
        FILE *f = fopen(journal, "r");
        char line[64];
        n = 0;
        while (f && n < want && fgets(line, sizeof(line), f))
            pids[n++] = (pid_t)strtol(line, NULL, 10);
        if (f)
            fclose(f);
        if (n < want)
            poll(NULL, 0, 20);
    }
    return n;
}

/* Kills whatever of pids still runs, by pid, and returns how many did. */
static int survivors(const pid_t *pids, int n)
{
    int alive = 0;
    for (int i = 0; i < n; i++) {
        if (pids[i] > 0 && running(pids[i])) {
            alive++;
            kill(pids[i], SIGKILL);
        }
    }
    return alive;
}

/* The child records its pid, starts one grandchild in a session of its
 * own (setsid) and one through a double fork (setsid in a subshell that
 * exits, the daemon's way), each recording its pid, and waits. */
static const char escapes[] =
    "echo $$ >> \"$0\"; "
    "setsid sh -c 'echo $$ >> \"$0\"; exec sleep 1000' \"$0\" & "
    "(setsid sh -c 'echo $$ >> \"$0\"; exec sleep 1000' \"$0\" &); "
    "while :; do sleep 0.05; done";

START_TEST(stop_ends_processes_that_left_the_group)
{
    char *const argv[] = {"/bin/sh", "-c", (char *)escapes, journal, NULL};
    struct ld_supervisor s;
    if (!spawn_contained(_i, argv, 200, &s))
        return;
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 1, now_ms() + 60000), 0);
    pid_t pids[3];
    ck_assert_int_eq(journal_pids(pids, 3, 5000), 3);
    for (int i = 1; i < 3; i++) {
        ck_assert(running(pids[i]));
        ck_assert_int_ne(getpgid(pids[i]), pids[0]); /* out of the child's group */
    }
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_STOP, 0, 0), 0);
    exited(&s, LD_SUP_STOPPED, 10000);
    /* Reported only once none of them is left. */
    ck_assert_int_eq(survivors(pids, 3), 0);
    ld_supervisor_close(&s);
}
END_TEST

START_TEST(a_daemon_does_not_outlive_its_child)
{
    static const char daemonizes[] =
        "(setsid sh -c 'echo $$ >> \"$0\"; exec sleep 1000' \"$0\" &); "
        "while [ ! -s \"$0\" ]; do sleep 0.01; done; exit 5";
    char *const argv[] = {"/bin/sh", "-c", (char *)daemonizes, journal, NULL};
    struct ld_supervisor s;
    if (!spawn_contained(_i, argv, 200, &s))
        return;
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 1, now_ms() + 60000), 0);
    int status = exited(&s, LD_SUP_EXITED, 10000);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 5);
    pid_t daemon;
    ck_assert_int_eq(journal_pids(&daemon, 1, 1000), 1);
    ck_assert_int_eq(survivors(&daemon, 1), 0);
    ld_supervisor_close(&s);
}
END_TEST

START_TEST(exit_status_survives_orphans_dying_with_the_child)
{
    /* Sixty-four orphans (their subshells are gone) are killed together;
     * the child exits the moment the supervisor has reaped the first, while
     * it still reaps the rest. */
    static const char race[] =
        ": > $0; for i in $(seq 64); do (sleep 1000 & echo $! >> $0); "
        "done; read p < $0; kill $(cat $0); "
        "while [ -e /proc/$p ]; do :; done; exit 7";
    char *const argv[] = {"/bin/sh", "-c", (char *)race, journal, NULL};
    struct ld_supervisor s;
    if (!spawn_contained(_i, argv, 200, &s))
        return;
    for (int round = 0; round < 20; round++) {
        ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 1, now_ms() + 60000), 0);
        int status = exited(&s, LD_SUP_EXITED, 5000);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 7,
                      "round %d: status %#x", round, status);
    }
    ld_supervisor_close(&s);
}
END_TEST

/* Every signal the child should get, from leaderd's message or sent to the
 * supervisor itself, reaches the child and a grandchild in a session of
 * its own; each notes "PID SIGNAL". The grandchild is started by setsid's
 * own fork, not as an asynchronous list: a non-interactive shell starts
 * those with SIGINT and SIGQUIT ignored, beyond a trap's reach. leaderd
 * itself runs with SIGHUP ignored here, as under nohup: the child must
 * still start with every disposition at its default. */
START_TEST(signals_reach_every_process)
{
    struct sigaction ignore = {.sa_handler = SIG_IGN}, before;
    sigemptyset(&ignore.sa_mask);
    ck_assert_int_eq(sigaction(SIGHUP, &ignore, &before), 0);
    static const char traps[] =
        "for s in HUP INT QUIT USR1 USR2 TERM; do trap \"echo \\$\\$ $s >> $0\" $s; "
        "done; echo $$ ready >> $0; while :; do sleep 0.05; done";
    char both[1024];
    snprintf(both, sizeof(both), "setsid -f sh -c '%s' \"$0\"; %s", traps, traps);
    char *const argv[] = {"/bin/sh", "-c", both, journal, NULL};
    struct ld_supervisor s;
    if (!spawn_contained(_i, argv, 200, &s))
        return;
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 1, now_ms() + 60000), 0);
    static const struct {
        int signo;
        const char *name;
        bool direct; /* sent to the supervisor process instead of by message */
    } cases[] = {{SIGHUP, "HUP", false},   {SIGINT, "INT", false},
                 {SIGQUIT, "QUIT", false}, {SIGUSR1, "USR1", false},
                 {SIGUSR2, "USR2", true},  {SIGTERM, "TERM", false}};
    int lines = 2;
    char text[4096];
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        if (c == 0) {
            /* Both shells have set their traps. */
            int64_t until = now_ms() + 5000;
            int ready = 0;
            while (ready < 2 && now_ms() < until) {
                FILE *f = fopen(journal, "r");
                size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
                if (f)
                    fclose(f);
                text[n] = '\0';
                ready = 0;
                for (const char *p = text; (p = strstr(p, " ready")); p++)
                    ready++;
                if (ready < 2)
                    poll(NULL, 0, 20);
            }
            ck_assert_int_eq(ready, 2);
        }
        if (cases[c].direct)
            ck_assert_int_eq(kill(s.pid, cases[c].signo), 0);
        else
            ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_SIGNAL, cases[c].signo, 0), 0);
        lines += 2;
        int64_t until = now_ms() + 5000;
        int got = 0;
        while (got < lines && now_ms() < until) {
            FILE *f = fopen(journal, "r");
            size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
            if (f)
                fclose(f);
            text[n] = '\0';
            got = 0;
            for (const char *p = text; (p = strchr(p, '\n')); p++)
                got++;
            if (got < lines)
                poll(NULL, 0, 20);
        }
        ck_assert_msg(got == lines, "%s reached %d of 2 processes", cases[c].name,
                      got - lines + 2);
        char want[32];
        snprintf(want, sizeof(want), " %s\n", cases[c].name);
        int seen = 0;
        for (const char *p = text; (p = strstr(p, want)); p++)
            seen++;
        ck_assert_int_eq(seen, 2);
    }
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_STOP, 0, 0), 0);
    exited(&s, LD_SUP_STOPPED, 10000);
    ld_supervisor_close(&s);
    sigaction(SIGHUP, &before, NULL);
}
END_TEST

START_TEST(supervisor_death_leaves_nothing)
{
    char *const argv[] = {"/bin/sh", "-c", (char *)escapes, journal, NULL};
    struct ld_supervisor s;
    if (!spawn_contained(_i, argv, 200, &s))
        return;
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 1, now_ms() + 60000), 0);
    pid_t pids[3];
    ck_assert_int_eq(journal_pids(pids, 3, 5000), 3);
    ck_assert_int_eq(kill(s.pid, SIGKILL), 0);
    ck_assert(ld_supervisor_reclaim(&s, 5000));
    ck_assert_int_eq(s.pid, -1); /* its zombie was reaped too */
    ck_assert_ptr_null(s.cgroup);
    ck_assert_int_eq(survivors(pids, 3), 0);
    ld_supervisor_close(&s);
}
END_TEST

/* The command does not stay where it was put: one process moves itself
 * into leaderd's cgroup (the supervisor's, its parent's), another into a
 * cgroup it makes beside it in the test's tree ($1); each notes its pid
 * once moved. Both leave the child's group and session too, so only the
 * search for them can find them. */
static const char moves[] =
    "own=$(sed -n 's/^0:://p' /proc/$PPID/cgroup); "
    "setsid sh -c 'echo $$ > \"$1$2/cgroup.procs\" && echo $$ >> \"$0\"; exec sleep "
    "1000' "
    "\"$0\" \"$MOUNT\" \"$own\" & "
    "setsid sh -c 'mkdir \"$1/escape-$$\" && echo $$ > \"$1/escape-$$/cgroup.procs\" && "
    "echo $$ >> \"$0\"; exec sleep 1000' \"$0\" \"$1\" & "
    "while :; do sleep 0.05; done";

/* Starts moves with the test's tree as $1; false when there is no tree to
 * move in (no writable cgroup v2). */
static bool spawn_moves(int mode, struct ld_supervisor *s)
{
    static char *argv[] = {"/bin/sh", "-c", (char *)moves, journal, test_cgroup, NULL};
    const char *mount = cgroup_v2_mount();
    if (!mount || !test_cgroup[0])
        return false;
    setenv("MOUNT", mount, 1);
    return spawn_contained(mode, argv, 200, s);
}

START_TEST(stop_ends_processes_that_moved_cgroup)
{
    struct ld_supervisor s;
    if (!spawn_moves(_i, &s))
        return;
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 1, now_ms() + 60000), 0);
    pid_t pids[2];
    ck_assert_int_eq(journal_pids(pids, 2, 5000), 2);
    ck_assert(running(pids[0]) && running(pids[1]));
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_STOP, 0, 0), 0);
    exited(&s, LD_SUP_STOPPED, 10000);
    /* Reported only once they, too, are gone. */
    ck_assert_int_eq(survivors(pids, 2), 0);
    ld_supervisor_close(&s);
}
END_TEST

START_TEST(reclaim_ends_processes_that_moved_cgroup)
{
    struct ld_supervisor s;
    if (!spawn_moves(_i, &s))
        return;
    ck_assert_int_eq(ld_supervisor_send(&s, LD_SUP_START, 1, now_ms() + 60000), 0);
    pid_t pids[2];
    ck_assert_int_eq(journal_pids(pids, 2, 5000), 2);
    ck_assert_int_eq(kill(s.pid, SIGKILL), 0);
    ck_assert(ld_supervisor_reclaim(&s, 5000));
    ck_assert_int_eq(survivors(pids, 2), 0);
    ld_supervisor_close(&s);
}
END_TEST

/* ---- whose process it is, over a fake cgroup tree ---- */

static char fake_tree[64];

static void fake_procs(const char *sub, const char *pids)
{
    char dir[256];
    snprintf(dir, sizeof(dir), "%s%s", fake_tree, sub);
    mkdir(dir, 0755);
    char path[300];
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(pids, f);
    fclose(f);
}

static int remove_any(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

static void setup_fake(void)
{
    snprintf(fake_tree, sizeof(fake_tree), "/tmp/ld-cg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fake_tree));
}

static void teardown_fake(void)
{
    nftw(fake_tree, remove_any, 16, FTW_DEPTH | FTW_PHYS);
}

static bool has(const pid_t *pids, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

/* leaderd (2) and its supervisor (7) are kept wherever they are; every
 * other process anywhere in the tree is the command's: one in leaderd's
 * leaf, one in the tree's own cgroup, one deep in a cgroup it made. */
START_TEST(every_other_process_of_the_tree_is_the_commands)
{
    fake_procs("", "1\n");
    fake_procs("/leaderd", "2\n7\n3\n");
    fake_procs("/child-2-0", "4\n40\n");
    fake_procs("/escape", "");
    fake_procs("/escape/deeper", "5\n");
    char plain[128]; /* a file beside the cgroups is no cgroup */
    snprintf(plain, sizeof(plain), "%s/plain", fake_tree);
    FILE *f = fopen(plain, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    int dir = open(fake_tree, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(dir, 0);
    pid_t keep[] = {2, 7}, out[16];
    size_t n = ld_sup_tree_others(dir, keep, 2, out, 16);
    ck_assert_int_eq(n, 5);
    for (pid_t pid = 1; pid <= 5; pid++)
        ck_assert_msg(has(out, n, pid) == (pid != 2), "pid %d", (int)pid);
    ck_assert(has(out, n, 40));
    /* The same again through the same fd; and a full out stops at cap. */
    ck_assert_int_eq(ld_sup_tree_others(dir, keep, 2, out, 16), 5);
    ck_assert_int_eq(ld_sup_tree_others(dir, keep, 2, out, 2), 2);
    close(dir);
}
END_TEST

START_TEST(alone_in_the_tree_is_none)
{
    fake_procs("", "");
    fake_procs("/leaderd", "2\n");
    int dir = open(fake_tree, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(dir, 0);
    pid_t keep = 2, out[4];
    ck_assert_int_eq(ld_sup_tree_others(dir, &keep, 1, out, 4), 0);
    close(dir);
}
END_TEST

START_TEST(tree_is_followed_as_deep_as_its_limit)
{
    char sub[256] = "";
    for (int depth = 1; depth <= LD_SUP_TREE_DEPTH + 1; depth++) {
        size_t at = strlen(sub);
        snprintf(sub + at, sizeof(sub) - at, "/d");
        char pid[16];
        snprintf(pid, sizeof(pid), "%d\n", 100 + depth);
        fake_procs(sub, pid);
    }
    int dir = open(fake_tree, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(dir, 0);
    pid_t out[64];
    size_t n = ld_sup_tree_others(dir, NULL, 0, out, 64);
    ck_assert_int_eq(n, LD_SUP_TREE_DEPTH);
    ck_assert(has(out, n, 100 + LD_SUP_TREE_DEPTH));
    close(dir);
}
END_TEST

START_TEST(cgroup_within_the_tree)
{
    const char *hybrid = "4:memory:/elsewhere\n0::/pod/c1/leaderd\n";
    ck_assert(ld_sup_cgroup_within(hybrid, "/pod/c1"));
    ck_assert(ld_sup_cgroup_within("0::/pod/c1\n", "/pod/c1"));
    ck_assert(ld_sup_cgroup_within("0::/pod/c1/escape/x\n", "/pod/c1"));
    ck_assert(!ld_sup_cgroup_within("0::/pod/c10\n", "/pod/c1"));
    ck_assert(!ld_sup_cgroup_within("0::/pod\n", "/pod/c1"));
    ck_assert(!ld_sup_cgroup_within("4:memory:/pod/c1\n", "/pod/c1"));
    /* The cgroup namespace's root: anything in it, nothing above it. */
    ck_assert(ld_sup_cgroup_within("0::/\n", ""));
    ck_assert(ld_sup_cgroup_within("0::/child-1-0\n", ""));
    ck_assert(ld_sup_cgroup_within("0::/..x\n", ""));
    ck_assert(!ld_sup_cgroup_within("0::/../other\n", ""));
    ck_assert(!ld_sup_cgroup_within("0::/..\n", ""));
}
END_TEST

static Suite *supervisor_suite(void)
{
    Suite *s = suite_create("supervisor");
    TCase *tp = tcase_create("policy");
    tcase_add_test(tp, nothing_without_a_child);
    tcase_add_test(tp, deadline_passes_term_then_kill);
    tcase_add_test(tp, renewals_move_the_deadline);
    tcase_add_test(tp, stop_ends_now_and_caps_the_kill);
    tcase_add_test(tp, late_stop_counts_from_the_deadline);
    tcase_add_test(tp, a_new_child_starts_fresh);
    suite_add_tcase(s, tp);

    TCase *tc = tcase_create("process");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, deadline_kills_a_stubborn_child);
    tcase_add_test(tc, the_deadline_is_awaited_on_the_suspend_counting_clock);
    tcase_add_test(tc, eof_ends_the_child_and_the_supervisor);
    tcase_add_test(tc, signal_is_passed_to_the_group);
    tcase_add_test(tc, missing_command_is_127);
    suite_add_tcase(s, tc);

    TCase *tk = tcase_create("containment");
    tcase_add_checked_fixture(tk, setup_contained, teardown_contained);
    tcase_set_timeout(tk, 60);
    tcase_add_loop_test(tk, stop_ends_processes_that_left_the_group, 0, 3);
    tcase_add_loop_test(tk, a_daemon_does_not_outlive_its_child, 0, 3);
    tcase_add_loop_test(tk, exit_status_survives_orphans_dying_with_the_child, 0, 3);
    tcase_add_loop_test(tk, signals_reach_every_process, 0, 3);
    tcase_add_loop_test(tk, supervisor_death_leaves_nothing, 0, 3);
    tcase_add_loop_test(tk, stop_ends_processes_that_moved_cgroup, 0, 3);
    tcase_add_loop_test(tk, reclaim_ends_processes_that_moved_cgroup, 0, 3);
    suite_add_tcase(s, tk);

    TCase *tw = tcase_create("whose");
    tcase_add_checked_fixture(tw, setup_fake, teardown_fake);
    tcase_add_test(tw, every_other_process_of_the_tree_is_the_commands);
    tcase_add_test(tw, alone_in_the_tree_is_none);
    tcase_add_test(tw, tree_is_followed_as_deep_as_its_limit);
    tcase_add_test(tw, cgroup_within_the_tree);
    suite_add_tcase(s, tw);
    return s;
}

int main(void)
{
    return ld_test_run(supervisor_suite());
}
