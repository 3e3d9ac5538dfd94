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
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    ck_assert_int_eq(ld_supervisor_spawn(&s, &cfg), 0);
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
    ck_assert_int_eq(ld_supervisor_spawn(&s, &cfg), 0);
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
    ck_assert_int_eq(ld_supervisor_spawn(&s, &cfg), 0);
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

static char logged[256];

static void keep_line(void *ctx, enum ld_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    if (strncmp(msg, "containment: ", 13) == 0)
        snprintf(logged, sizeof(logged), "%s", msg);
}

/* Loop index 0: the process tree; 1: a cgroup v2. Returns false (the test
 * has nothing to check) when the machine offers no cgroup v2 to write. */
static bool spawn_contained(int mode, char *const *argv, int64_t grace,
                            struct ld_supervisor *s)
{
    const char *mount = mode == 0 ? "/nonexistent" : cgroup_v2_mount();
    if (!mount)
        return false;
    struct ld_supervisor_config cfg = {.command = argv,
                                       .lease = "ns/lease",
                                       .identity = "me",
                                       .grace_ms = grace,
                                       .cgroup_mount = mount};
    logged[0] = '\0';
    ld_log_set_sink(keep_line, NULL, LD_LOG_DEBUG);
    ck_assert_int_eq(ld_supervisor_spawn(s, &cfg), 0);
    ld_log_set_sink(NULL, NULL, LD_LOG_ERROR);
    if (mode == 0) {
        ck_assert_ptr_null(s->cgroup);
        ck_assert_str_eq(logged, "containment: process tree (subreaper)");
    } else {
        ck_assert_ptr_nonnull(s->cgroup);
        char want[256];
        snprintf(want, sizeof(want), "containment: cgroup v2 (%s)", s->cgroup);
        ck_assert_str_eq(logged, want);
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
    ck_assert_int_eq(ld_supervisor_reclaim(&s, 5000), 0);
    ck_assert_int_eq(s.pid, -1); /* its zombie was reaped too */
    ck_assert_ptr_null(s.cgroup);
    ck_assert_int_eq(survivors(pids, 3), 0);
    ld_supervisor_close(&s);
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
    tcase_add_checked_fixture(tk, setup, teardown);
    tcase_set_timeout(tk, 60);
    tcase_add_loop_test(tk, stop_ends_processes_that_left_the_group, 0, 2);
    tcase_add_loop_test(tk, a_daemon_does_not_outlive_its_child, 0, 2);
    tcase_add_loop_test(tk, exit_status_survives_orphans_dying_with_the_child, 0, 2);
    tcase_add_loop_test(tk, signals_reach_every_process, 0, 2);
    tcase_add_loop_test(tk, supervisor_death_leaves_nothing, 0, 2);
    suite_add_tcase(s, tk);
    return s;
}

int main(void)
{
    return ld_test_run(supervisor_suite());
}
