/*
 * supervisor: runs the exec child and enforces its deadline on its own
 * clock. After the fork the supervisor only makes system calls and touches
 * memory it owns: leaderd had one thread when it forked, but keeping to
 * async-signal-safe calls means no lock of the parent's can ever matter.
 */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"

/* glibc's; musl's <sys/wait.h> has no such macro. */
#ifndef W_EXITCODE
#define W_EXITCODE(ret, sig) ((ret) << 8 | (sig))
#endif

/* The longest poll of the supervisor; it has nothing periodic to do, this
 * only bounds each wait. */
#define SUP_MAX_WAIT_MS 60000
/* Orphans reaped per wake-up; more wait for the next SIGCHLD. */
#define SUP_REAP_MAX 64
#define TERM_ENV_LEN 40

/* ---- policy -------------------------------------------------------------- */

void ld_sup_policy_init(struct ld_sup_policy *p, int64_t grace_ms)
{
    memset(p, 0, sizeof(*p));
    p->grace_ms = grace_ms;
    p->ended_ms = INT64_MAX;
}

void ld_sup_policy_started(struct ld_sup_policy *p, int64_t deadline_ms)
{
    p->running = true;
    p->deadline_ms = deadline_ms;
    p->ended_ms = INT64_MAX;
    p->term_sent = false;
    p->kill_sent = false;
}

void ld_sup_policy_deadline(struct ld_sup_policy *p, int64_t deadline_ms)
{
    if (p->running && p->ended_ms == INT64_MAX)
        p->deadline_ms = deadline_ms;
}

void ld_sup_policy_ended(struct ld_sup_policy *p, int64_t now_ms)
{
    if (now_ms < p->ended_ms)
        p->ended_ms = now_ms;
}

void ld_sup_policy_exited(struct ld_sup_policy *p)
{
    p->running = false;
}

enum ld_sup_act ld_sup_policy_due(struct ld_sup_policy *p, int64_t now_ms,
                                  int64_t *wake_ms)
{
    *wake_ms = INT64_MAX;
    if (!p->running || p->kill_sent)
        return LD_SUP_NOTHING;
    int64_t end = p->ended_ms < p->deadline_ms ? p->ended_ms : p->deadline_ms;
    if (now_ms < end) {
        *wake_ms = end;
        return LD_SUP_NOTHING;
    }
    int64_t kill_at = end + p->grace_ms;
    if (!p->term_sent) {
        p->term_sent = true;
        *wake_ms = kill_at;
        return LD_SUP_TERM;
    }
    if (now_ms < kill_at) {
        *wake_ms = kill_at;
        return LD_SUP_NOTHING;
    }
    p->kill_sent = true;
    return LD_SUP_KILL;
}

/* ---- the supervisor process ---------------------------------------------- */

struct sup {
    int fd;      /* channel to leaderd; -1 once it closed */
    int sig_fd;  /* SIGCHLD, and SIGTERM as the parent-death signal */
    pid_t owner; /* leaderd */
    char *const *command;
    char **envp;    /* environ plus our three variables; the last is the term */
    char *term_env; /* "LEADERD_TERM=..." buffer inside envp */
    pid_t child;    /* -1 when none */
    struct ld_sup_policy policy;
};

/* snprintf is not async-signal-safe; terms are small non-negative numbers. */
static void format_term(char *buf, size_t len, int32_t term)
{
    static const char prefix[] = "LEADERD_TERM=";
    char digits[16];
    size_t n = 0;
    uint32_t v = term < 0 ? 0 : (uint32_t)term;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < sizeof(digits));
    size_t at = sizeof(prefix) - 1;
    memcpy(buf, prefix, at);
    while (n > 0 && at + 1 < len)
        buf[at++] = digits[--n];
    buf[at] = '\0';
}

/* One line on stderr in one write, built without stdio. */
static void say(const char *a, const char *b)
{
    char line[512];
    size_t n = 0;
    for (const char *p = a; *p && n + 2 < sizeof(line); p++)
        line[n++] = *p;
    for (const char *p = b; *p && n + 2 < sizeof(line); p++)
        line[n++] = *p;
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, n) < 0)
        return; /* nowhere left to say it */
}

static void send_msg(struct sup *s, enum ld_sup_kind kind, int32_t arg, int64_t value)
{
    struct ld_sup_msg m = {.kind = kind, .arg = arg, .value = value};
    if (s->fd >= 0)
        (void)send(s->fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* In the new child, before exec: its own group, default signal state, and
 * death with the supervisor, so an enforcer that is killed takes the child
 * along instead of leaving it unsupervised. */
static void exec_child(struct sup *s)
{
    sigset_t none;
    sigemptyset(&none);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvpe(s->command[0], s->command, s->envp);
    /* The shell's convention: 127 not found, 126 found but not runnable. */
    bool missing = errno == ENOENT;
    say(missing ? "leaderd: command not found: " : "leaderd: cannot execute: ",
        s->command[0]);
    _exit(missing ? 127 : 126);
}

static void start_child(struct sup *s, int32_t term, int64_t deadline_ms)
{
    if (s->child > 0)
        return; /* leaderd starts one only after the last one's exit */
    format_term(s->term_env, TERM_ENV_LEN, term);
    pid_t pid = fork();
    if (pid == 0)
        exec_child(s);
    if (pid < 0) {
        say("leaderd: cannot fork to run ", s->command[0]);
        send_msg(s, LD_SUP_EXITED, W_EXITCODE(126, 0), -1);
        return;
    }
    /* Also here, so no signal to the group can precede the child's own call. */
    setpgid(pid, pid);
    s->child = pid;
    ld_sup_policy_started(&s->policy, deadline_ms);
}

/* The child's zombie keeps its pid, and so its group id, reserved: the rest
 * of the group is killed before the zombie is reaped, so the signal cannot
 * reach a recycled group. Nothing of the group outlives its leader. */
static void reap(struct sup *s)
{
    if (s->child > 0) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)s->child, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            si.si_pid == s->child) {
            int status = 0;
            kill(-s->child, SIGKILL);
            waitpid(s->child, &status, 0);
            send_msg(s, s->policy.term_sent ? LD_SUP_STOPPED : LD_SUP_EXITED, status,
                     s->child);
            s->child = -1;
            ld_sup_policy_exited(&s->policy);
        }
    }
    for (int i = 0; i < SUP_REAP_MAX; i++) {
        pid_t other = waitpid(-1, NULL, WNOHANG);
        if (other <= 0 || other == s->child)
            break;
    }
}

static void orphaned(struct sup *s)
{
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    ld_sup_policy_ended(&s->policy, ld_mono_ms());
}

static void take_message(struct sup *s)
{
    struct ld_sup_msg m;
    ssize_t n = recv(s->fd, &m, sizeof(m), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n != (ssize_t)sizeof(m)) {
        orphaned(s); /* EOF: leaderd is gone, or speaks nonsense */
        return;
    }
    switch (m.kind) {
    case LD_SUP_START:
        start_child(s, m.arg, m.value);
        break;
    case LD_SUP_DEADLINE:
        ld_sup_policy_deadline(&s->policy, m.value);
        break;
    case LD_SUP_STOP:
        ld_sup_policy_ended(&s->policy, ld_mono_ms());
        break;
    case LD_SUP_SIGNAL:
        if (s->child > 0 && (m.arg == SIGTERM || m.arg == SIGINT))
            kill(-s->child, m.arg);
        break;
    default:
        break;
    }
}

static void take_signals(struct sup *s)
{
    struct signalfd_siginfo si;
    for (int i = 0; i < SUP_REAP_MAX; i++) {
        if (read(s->sig_fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
            break;
        /* SIGTERM from anyone but the kernel's parent-death notice is
         * ignored: leaderd forwards what the child should get. */
        if (si.ssi_signo == SIGTERM && getppid() != s->owner)
            orphaned(s);
    }
    reap(s);
}

static void enforce(struct sup *s, int64_t now, int64_t *wake)
{
    enum ld_sup_act act;
    for (int i = 0; i < 3; i++) {
        act = ld_sup_policy_due(&s->policy, now, wake);
        if (act == LD_SUP_NOTHING)
            break;
        if (s->child > 0)
            kill(-s->child, act == LD_SUP_TERM ? SIGTERM : SIGKILL);
    }
}

static void __attribute__((noreturn)) supervise(struct sup *s)
{
    for (;;) {
        int64_t now = ld_mono_ms();
        int64_t wake;
        enforce(s, now, &wake);
        if (s->fd < 0 && s->child <= 0)
            _exit(0);
        int64_t delay = wake == INT64_MAX ? SUP_MAX_WAIT_MS : wake - now;
        if (delay > SUP_MAX_WAIT_MS)
            delay = SUP_MAX_WAIT_MS;
        struct pollfd p[2] = {{.fd = s->sig_fd, .events = POLLIN},
                              {.fd = s->fd, .events = POLLIN}};
        if (poll(p, s->fd >= 0 ? 2 : 1, (int)delay) <= 0)
            continue;
        if (p[0].revents)
            take_signals(s);
        if (s->fd >= 0 && p[1].revents)
            take_message(s);
    }
}

/* The supervisor's side of the fork. */
static void __attribute__((noreturn)) run_supervisor(struct sup *s)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    setpgid(0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    sigset_t watched;
    sigemptyset(&watched);
    sigaddset(&watched, SIGCHLD);
    sigaddset(&watched, SIGTERM);
    s->sig_fd = signalfd(-1, &watched, SFD_NONBLOCK | SFD_CLOEXEC);
    if (s->sig_fd < 0)
        _exit(1);
    /* leaderd may have died before the death signal was armed. */
    if (getppid() != s->owner)
        orphaned(s);
    supervise(s);
}

/* environ without our three variables, then them; the array and the two
 * fixed strings live as long as the supervisor (it never returns). */
static char **child_environment(const struct ld_supervisor_config *cfg, char **term_env)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 4, sizeof(*envp));
    size_t lease_len = strlen("LEADERD_LEASE=") + strlen(cfg->lease) + 1;
    size_t id_len = strlen("LEADERD_IDENTITY=") + strlen(cfg->identity) + 1;
    char *lease = malloc(lease_len);
    char *identity = malloc(id_len);
    char *term = malloc(TERM_ENV_LEN);
    if (!envp || !lease || !identity || !term) {
        free(envp);
        free(lease);
        free(identity);
        free(term);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = environ[i];
        if (strncmp(e, "LEADERD_LEASE=", 14) != 0 &&
            strncmp(e, "LEADERD_IDENTITY=", 17) != 0 &&
            strncmp(e, "LEADERD_TERM=", 13) != 0)
            envp[k++] = environ[i];
    }
    snprintf(lease, lease_len, "LEADERD_LEASE=%s", cfg->lease);
    snprintf(identity, id_len, "LEADERD_IDENTITY=%s", cfg->identity);
    format_term(term, TERM_ENV_LEN, 0);
    envp[k++] = lease;
    envp[k++] = identity;
    envp[k++] = term;
    *term_env = term;
    return envp;
}

static void free_environment(char **envp)
{
    size_t n = 0;
    while (envp[n])
        n++;
    /* The last three are ours; the rest belong to environ. */
    for (size_t i = n >= 3 ? n - 3 : 0; i < n; i++)
        free(envp[i]);
    free(envp);
}

int ld_supervisor_spawn(struct ld_supervisor *s, const struct ld_supervisor_config *cfg)
{
    int sv[2] = {-1, -1};
    int rc = -1;
    struct sup sup;
    memset(&sup, 0, sizeof(sup));
    s->pid = -1;
    s->fd = -1;
    sup.envp = child_environment(cfg, &sup.term_env);
    if (!sup.envp) {
        errno = ENOMEM;
        goto out;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        goto out;
    sup.owner = getpid();
    sup.command = cfg->command;
    sup.child = -1;
    ld_sup_policy_init(&sup.policy, cfg->grace_ms);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        sup.fd = sv[1];
        run_supervisor(&sup);
    }
    if (pid < 0)
        goto out;
    if (fcntl(sv[0], F_SETFL, O_NONBLOCK) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        goto out;
    }
    s->pid = pid;
    s->fd = sv[0];
    sv[0] = -1;
    rc = 0;
out:
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    if (sup.envp)
        free_environment(sup.envp);
    return rc;
}

int ld_supervisor_send(struct ld_supervisor *s, enum ld_sup_kind kind, int32_t arg,
                       int64_t value)
{
    struct ld_sup_msg m = {.kind = kind, .arg = arg, .value = value};
    if (s->fd < 0) {
        errno = EPIPE;
        return -1;
    }
    ssize_t n = send(s->fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
    return n == (ssize_t)sizeof(m) ? 0 : -1;
}

int ld_supervisor_recv(struct ld_supervisor *s, struct ld_sup_msg *m)
{
    if (s->fd < 0)
        return -1;
    ssize_t n = recv(s->fd, m, sizeof(*m), MSG_DONTWAIT);
    if (n == (ssize_t)sizeof(*m))
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    /* An fd at EOF stays readable: closed, it can no longer wake anyone. */
    close(s->fd);
    s->fd = -1;
    return -1;
}

void ld_supervisor_close(struct ld_supervisor *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    /* EINTR is the only reason to try again; a handful is plenty. */
    for (int i = 0; s->pid > 0 && i < 16; i++) {
        if (waitpid(s->pid, NULL, 0) >= 0 || errno != EINTR)
            break;
    }
    s->pid = -1;
}
