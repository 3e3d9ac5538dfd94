/* SPDX-License-Identifier: Apache-2.0 */
/*
 * supervisor: runs the exec child and enforces its deadline on its own
 * clock. After the fork the supervisor only makes system calls and touches
 * memory it owns: leaderd had one thread when it forked, but keeping to
 * async-signal-safe calls means no lock of the parent's can ever matter.
 * That is why /proc and the cgroup files are read with plain read(2) and
 * getdents64(2) into fixed buffers.
 */
#include "supervisor.h"

#include <dirent.h>
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

/* glibc's; musl's <sys/wait.h> has no such macro. */
#ifndef W_EXITCODE
#define W_EXITCODE(ret, sig) ((ret) << 8 | (sig))
#endif

/* The longest poll of the supervisor; it has nothing periodic to do, this
 * only bounds each wait (its timer ends the wait at a deadline). */
#define SUP_MAX_WAIT_MS 60000
/* Orphans reaped per wake-up; more wait for the next SIGCHLD. */
#define SUP_REAP_MAX 64
#define TERM_ENV_LEN 40
/* While the command is being killed its processes are looked for again,
 * first after SUP_RESCAN_MS, then at twice the last wait up to
 * SUP_RESCAN_MAX_MS: one forked between a look and its SIGKILL is caught by
 * the next, a grandchild's end wakes nobody, and one stuck in the kernel
 * should not cost a scan of /proc every few milliseconds. */
#define SUP_RESCAN_MS 20
#define SUP_RESCAN_MAX_MS 1000
/* Processes looked at per scan of /proc (only those started after the
 * scanning process); more are not followed. */
#define SUP_PROC_MAX 4096
/* statfs's f_type of a cgroup v2 mount; not every libc's headers bring
 * <linux/magic.h>. */
#define CGROUP2_MAGIC 0x63677270
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define LD_SUP_TREE_DEPTH_TEXT STRINGIFY(LD_SUP_TREE_DEPTH)
/* Where the libc's headers predate them: the numbers are the same on every
 * architecture (the table shared since Linux 5.1; alpha aside). An older
 * kernel answers ENOSYS, and a plain kill stands in. */
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

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

/* ---- text without stdio --------------------------------------------------- */

/* Appends s to buf (len bytes, kept NUL-terminated); returns the new length. */
static size_t append(char *buf, size_t len, size_t at, const char *s)
{
    while (*s && at + 1 < len)
        buf[at++] = *s++;
    buf[at] = '\0';
    return at;
}

static size_t append_num(char *buf, size_t len, size_t at, unsigned long long v)
{
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n > 0 && at + 1 < len)
        buf[at++] = digits[--n];
    buf[at] = '\0';
    return at;
}

static void format_term(char *buf, size_t len, int32_t term)
{
    append_num(buf, len, append(buf, len, 0, "LEADERD_TERM="),
               term < 0 ? 0 : (unsigned long long)term);
}

/* One line on stderr in one write. */
static void say(const char *a, const char *b)
{
    char line[512];
    size_t n = append(line, sizeof(line) - 1, append(line, sizeof(line) - 1, 0, a), b);
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, n) < 0)
        return; /* nowhere left to say it */
}

static unsigned long long take_number(const char **p)
{
    unsigned long long v = 0;
    while (**p == ' ')
        (*p)++;
    for (; **p >= '0' && **p <= '9'; (*p)++)
        v = v * 10 + (unsigned)(**p - '0');
    return v;
}

static void skip_field(const char **p)
{
    while (**p == ' ')
        (*p)++;
    while (**p && **p != ' ')
        (*p)++;
}

/* Writes text into the file name below the directory dir; 0 or -1. */
static int write_file(int dir, const char *name, const char *text)
{
    int fd = openat(dir, name, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    int rc = write(fd, text, len) == (ssize_t)len ? 0 : -1;
    close(fd);
    return rc;
}

/* ---- the command's processes ---------------------------------------------- */

struct proc_entry {
    pid_t pid;
    pid_t ppid;
    pid_t pgid;
    unsigned long long start; /* clock ticks after boot */
};

/* One scan's processes, and which of them belong to the command. Only one
 * thread ever scans: the supervisor, or leaderd's loop once the supervisor
 * is gone. */
static struct proc_entry proc_table[SUP_PROC_MAX];
static pid_t mine[SUP_PROC_MAX];

/* Fills e from /proc/PID/stat; false when the process is gone. */
static bool read_stat(pid_t pid, struct proc_entry *e)
{
    char path[48];
    char buf[512];
    append(path, sizeof(path),
           append_num(path, sizeof(path), append(path, sizeof(path), 0, "/proc/"),
                      (unsigned long long)pid),
           "/stat");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* The name in parentheses may hold anything: the fields follow the
     * last ')'. After it: state, ppid, pgrp, 16 more, then starttime. */
    const char *p = NULL;
    for (ssize_t i = n - 1; i >= 0 && !p; i--)
        if (buf[i] == ')')
            p = buf + i + 1;
    if (!p)
        return false;
    skip_field(&p);
    e->pid = pid;
    e->ppid = (pid_t)take_number(&p);
    e->pgid = (pid_t)take_number(&p);
    for (int i = 0; i < 16; i++)
        skip_field(&p);
    e->start = take_number(&p);
    return true;
}

static bool is_mine(pid_t pid, size_t n_mine)
{
    for (size_t i = 0; i < n_mine; i++)
        if (mine[i] == pid)
            return true;
    return false;
}

/* Where a getdents64 record keeps its length and its name: after d_ino and
 * d_off (8 bytes each), then d_reclen (2) and d_type (1). */
#define DIRENT_RECLEN_AT 16
#define DIRENT_NAME_AT 19

/* Every process that descends from root (not root itself) or from one of
 * the n_mine already in mine, by walking the parent links of every process
 * started no earlier than root, added to mine; returns how many mine holds
 * then. */
static size_t scan_descendants(pid_t root, size_t n_mine)
{
    struct proc_entry self;
    uint64_t words[512]; /* getdents64 wants its buffer aligned */
    size_t n = 0;
    int dir =
        read_stat(root, &self) ? open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dir < 0)
        return n_mine;
    for (;;) {
        long got = syscall(SYS_getdents64, dir, words, sizeof(words));
        if (got <= 0)
            break;
        for (long at = 0; at < got;) {
            const char *rec = (const char *)words + at;
            unsigned short reclen;
            memcpy(&reclen, rec + DIRENT_RECLEN_AT, sizeof(reclen));
            const char *p = rec + DIRENT_NAME_AT;
            pid_t pid = (pid_t)take_number(&p);
            at += reclen;
            if (*p == '\0' && pid > 0 && pid != root && n < SUP_PROC_MAX &&
                read_stat(pid, &proc_table[n]) && proc_table[n].start >= self.start)
                n++;
        }
    }
    close(dir);
    /* Each pass marks at least the next generation, or ends the search. */
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t i = 0; i < n; i++) {
            pid_t pid = proc_table[i].pid;
            pid_t parent = proc_table[i].ppid;
            if ((parent == root || is_mine(parent, n_mine)) && !is_mine(pid, n_mine) &&
                n_mine < SUP_PROC_MAX) {
                mine[n_mine++] = pid;
                grew = true;
            }
        }
    }
    return n_mine;
}

static bool listed(const pid_t *pids, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

/* Adds to out (n stored, at most cap) each pid of dir's cgroup.procs that
 * keep does not list; returns how many out holds then. */
static size_t procs_others(int dir, const pid_t *keep, size_t n_keep, pid_t *out,
                           size_t cap, size_t n)
{
    char buf[4096];
    unsigned long long pid = 0;
    int fd = openat(dir, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return n;
    ssize_t got;
    while ((got = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                pid = pid * 10 + (unsigned)(buf[i] - '0');
                continue;
            }
            if (pid > 0 && n < cap && !listed(keep, n_keep, (pid_t)pid))
                out[n++] = (pid_t)pid;
            pid = 0;
        }
    }
    close(fd);
    return n;
}

#define DIRENT_TYPE_AT 18

/* One directory of a walk down a cgroup tree, listed through an fd of its
 * own (so the caller's dir keeps its offset and can be scanned again). */
struct walk_level {
    int fd;
    long got;          /* bytes of getdents64 records in buf... */
    long at;           /* ...and where the next one starts */
    uint64_t buf[128]; /* getdents64 wants its buffer aligned */
};

/* The walk's levels: static, as the tables above, since only one thread
 * ever scans, and the supervisor's stack need not hold them. */
static struct walk_level levels[LD_SUP_TREE_DEPTH];

/* The next subdirectory's name in l, or NULL once l is listed. */
static const char *next_subdir(struct walk_level *l)
{
    for (;;) {
        if (l->at >= l->got) {
            l->got = syscall(SYS_getdents64, l->fd, l->buf, sizeof(l->buf));
            l->at = 0;
            if (l->got <= 0)
                return NULL;
        }
        const char *rec = (const char *)l->buf + l->at;
        unsigned short reclen;
        memcpy(&reclen, rec + DIRENT_RECLEN_AT, sizeof(reclen));
        l->at += reclen;
        const char *name = rec + DIRENT_NAME_AT;
        unsigned char type = (unsigned char)rec[DIRENT_TYPE_AT];
        if ((type == DT_DIR || type == DT_UNKNOWN) && strcmp(name, ".") != 0 &&
            strcmp(name, "..") != 0)
            return name;
    }
}

static bool open_level(int depth, int dir)
{
    levels[depth].fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    levels[depth].got = 0;
    levels[depth].at = 0;
    return levels[depth].fd >= 0;
}

/* Depth first, without recursion: levels[d] is the directory d below dir
 * being listed; a cgroup LD_SUP_TREE_DEPTH below dir is read, not listed. */
size_t ld_sup_tree_others(int dir, const pid_t *keep, size_t n_keep, pid_t *out,
                          size_t cap)
{
    size_t n = procs_others(dir, keep, n_keep, out, cap, 0);
    int depth = open_level(0, dir) ? 0 : -1;
    while (depth >= 0) {
        const char *name = next_subdir(&levels[depth]);
        if (!name) {
            close(levels[depth--].fd);
            continue;
        }
        int sub = openat(levels[depth].fd, name,
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue;
        n = procs_others(sub, keep, n_keep, out, cap, n);
        if (depth + 1 < LD_SUP_TREE_DEPTH && open_level(depth + 1, sub))
            depth++;
        close(sub);
    }
    return n;
}

bool ld_sup_cgroup_within(const char *text, const char *tree)
{
    const char *p = text;
    while (p && strncmp(p, "0::", 3) != 0) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    if (!p)
        return false;
    p += 3;
    size_t len = strlen(tree);
    if (len == 0) /* the namespace's root: anything but a path above it */
        return p[0] == '/' &&
               !(p[1] == '.' && p[2] == '.' && (p[3] == '/' || p[3] == '\n' || !p[3]));
    return strncmp(p, tree, len) == 0 &&
           (p[len] == '/' || p[len] == '\n' || p[len] == '\0');
}

/* Sends sig to pid if it is in the claimed tree. A pid read from
 * cgroup.procs may be reused by the time it is signalled: the pidfd pins
 * the process first, so the check of its cgroup is about the very process
 * the signal reaches (had it died in between, the signal fails). Without
 * pidfd_open (before Linux 5.3) a plain kill after the check. */
static void signal_in_tree(pid_t pid, int sig, const char *tree)
{
    char path[48], text[4096];
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0 && errno != ENOSYS)
        return; /* gone */
    append(path, sizeof(path),
           append_num(path, sizeof(path), append(path, sizeof(path), 0, "/proc/"),
                      (unsigned long long)pid),
           "/cgroup");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n > 0) {
        text[n] = '\0';
        if (ld_sup_cgroup_within(text, tree)) {
            if (pidfd >= 0)
                syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
            else
                kill(pid, sig);
        }
    }
    if (pidfd >= 0)
        close(pidfd);
}

/* What a signal to the whole command reaches: with a tree (tree_dir >= 0),
 * every process in it but the n_keep of keep; and every descendant of the
 * caller, and of those, wherever they are. */
struct scope {
    int tree_dir;
    const char *tree;
    const pid_t *keep;
    size_t n_keep;
};

/* Sends sig to every process of scope except those in the process group
 * group (when > 0: the caller signalled it already). Returns how many were
 * found in the tree. */
static size_t signal_scope(const struct scope *sc, int sig, pid_t group)
{
    size_t n_tree = sc->tree_dir >= 0 ? ld_sup_tree_others(sc->tree_dir, sc->keep,
                                                           sc->n_keep, mine, SUP_PROC_MAX)
                                      : 0;
    size_t n = scan_descendants(getpid(), n_tree);
    for (size_t i = 0; i < n; i++) {
        struct proc_entry e;
        if (group > 0 && read_stat(mine[i], &e) && e.pgid == group)
            continue;
        if (i < n_tree)
            signal_in_tree(mine[i], sig, sc->tree);
        else
            kill(mine[i], sig);
    }
    return n_tree;
}

/* Whether the cgroup whose cgroup.events is open as fd has a process in
 * it (or in a cgroup below). Reading also rearms poll's POLLPRI. */
static bool cgroup_populated(int fd)
{
    char buf[256];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return true; /* unknown: go on waiting */
    buf[n] = '\0';
    const char *p = strstr(buf, "populated ");
    return !p || p[10] != '0';
}

/* ---- the supervisor process ---------------------------------------------- */

struct sup {
    int fd;      /* channel to leaderd; -1 once it closed */
    int sig_fd;  /* SIGCHLD, SIGTERM as the parent-death signal, the rest to pass on */
    pid_t owner; /* leaderd */
    char *const *command;
    char **envp;        /* environ plus our three variables; the last is the term */
    char *term_env;     /* "LEADERD_TERM=..." buffer inside envp */
    const char *cgroup; /* the command's cgroup directory; NULL: the process tree */
    int cg_dir;         /* it, open; -1 without */
    int cg_events;      /* its cgroup.events, polled for POLLPRI; -1 without */
    int tree_dir;       /* the claimed cgroup tree, open; -1 without */
    const char *tree;   /* its path as /proc/PID/cgroup shows it */
    pid_t keep[2]; /* leaderd and the supervisor: all else in the tree is the command's */
    pid_t child;   /* the command's first process; -1 when no command runs */
    bool reaped;   /* the child itself was reaped, its status kept... */
    int status;    /* ...here, until nothing of the command is left */
    bool killing;  /* SIGKILL the command until none of it is left */
    int64_t rescan_ms; /* the next wait before looking for it again */
    bool reap_again;   /* more zombies than one look takes were waiting */
    struct ld_sup_policy policy;
    struct ld_timer wake; /* ends the wait at the policy's next time (clock.h) */
};

static void send_msg(struct sup *s, enum ld_sup_kind kind, int32_t arg, int64_t value)
{
    struct ld_sup_msg m = {.kind = kind, .arg = arg, .value = value};
    if (s->fd >= 0)
        (void)send(s->fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
}

static struct scope command_scope(const struct sup *s)
{
    struct scope sc = {
        .tree_dir = s->tree_dir, .tree = s->tree, .keep = s->keep, .n_keep = 2};
    return sc;
}

/* Sends sig to every process of the command, once each: the child's group
 * at once while its zombie still reserves the group's id, then every other
 * process found in the claimed tree or below the supervisor. SIGKILL with a
 * cgroup is cgroup.kill first, which no fork inside the command's cgroup
 * can race; the scan still follows, for what moved out of it. */
static void signal_command(struct sup *s, int sig)
{
    bool group = !s->reaped;
    if (s->child <= 0)
        return;
    if (group)
        kill(-s->child, sig);
    if (sig == SIGKILL && s->cg_dir >= 0)
        write_file(s->cg_dir, "cgroup.kill", "1");
    struct scope sc = command_scope(s);
    signal_scope(&sc, sig, group ? s->child : 0);
}

/* A stopped process acts on SIGTERM only once continued. */
static void pass_signal(struct sup *s, int sig)
{
    signal_command(s, sig);
    if (sig == SIGTERM)
        signal_command(s, SIGCONT);
}

static bool forwardable(int sig)
{
    return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT ||
           sig == SIGUSR1 || sig == SIGUSR2;
}

static void start_killing(struct sup *s)
{
    s->killing = true;
    s->rescan_ms = SUP_RESCAN_MS;
    signal_command(s, SIGKILL);
}

/* Nothing of the command is left: the child was reaped, its cgroup is
 * empty, no process but leaderd's and the supervisor's is in the claimed
 * tree, and, as subreaper, the supervisor has no child at all. */
static bool command_gone(struct sup *s)
{
    if (!s->reaped)
        return false;
    if (s->cg_events >= 0 && cgroup_populated(s->cg_events))
        return false;
    if (s->tree_dir >= 0 && ld_sup_tree_others(s->tree_dir, s->keep, 2, mine, 1) > 0)
        return false;
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 && errno == ECHILD;
}

/* The end is reported once, with the child's own status, when all is gone. */
static void finish_if_gone(struct sup *s)
{
    if (s->child <= 0 || !command_gone(s))
        return;
    send_msg(s, s->policy.term_sent ? LD_SUP_STOPPED : LD_SUP_EXITED, s->status,
             s->child);
    s->child = -1;
    s->reaped = false;
    s->killing = false;
    ld_sup_policy_exited(&s->policy);
}

/* Every zombie is looked at first and then reaped by its pid, so the
 * child's status can never go to an orphan's wait. When the child ended on
 * its own, the rest of the command is killed before its zombie (which keeps
 * the group's id from reuse) is reaped: nothing of the child outlives it. */
static void reap(struct sup *s)
{
    int i = 0;
    for (; i < SUP_REAP_MAX; i++) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0)
            break;
        if (si.si_pid != s->child || s->reaped) {
            waitpid(si.si_pid, NULL, WNOHANG);
            continue;
        }
        if (!s->policy.term_sent)
            start_killing(s);
        if (waitpid(s->child, &s->status, 0) == s->child)
            s->reaped = true;
    }
    s->reap_again = i == SUP_REAP_MAX;
    finish_if_gone(s);
}

/* In the new child, before exec: its own group, its cgroup, default signal
 * state, and death with the supervisor (leaderd then kills what is left;
 * see ld_supervisor_reclaim). The move into the cgroup comes before any of
 * the command's code runs, so nothing it starts can be outside. */
static void exec_child(struct sup *s)
{
    sigset_t none;
    sigemptyset(&none);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (s->cg_dir >= 0 && write_file(s->cg_dir, "cgroup.procs", "0") != 0) {
        say("leaderd: cannot move the command into its cgroup: ", s->command[0]);
        _exit(126);
    }
    /* Every disposition back to default: an ignored one survives exec, so a
     * leaderd started with SIGHUP ignored (nohup, some init systems) would
     * otherwise forward HUP to a command that cannot see it. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    for (int signo = 1; signo < NSIG; signo++)
        if (signo != SIGKILL && signo != SIGSTOP)
            sigaction(signo, &dfl, NULL);
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
        return; /* leaderd starts one only after the last one is gone */
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
    s->reaped = false;
    s->killing = false;
    ld_sup_policy_started(&s->policy, deadline_ms);
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
        if (forwardable(m.arg))
            pass_signal(s, m.arg);
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
         * ignored: leaderd forwards what should end the child. The others
         * watched are passed on as they come. */
        if (si.ssi_signo == SIGTERM && getppid() != s->owner)
            orphaned(s);
        else if (si.ssi_signo != SIGTERM && si.ssi_signo != SIGCHLD)
            pass_signal(s, (int)si.ssi_signo);
    }
    reap(s);
}

static void enforce(struct sup *s, int64_t now, int64_t *wake)
{
    for (int i = 0; i < 3; i++) {
        enum ld_sup_act act = ld_sup_policy_due(&s->policy, now, wake);
        if (act == LD_SUP_NOTHING)
            break;
        if (act == LD_SUP_TERM)
            pass_signal(s, SIGTERM);
        else
            start_killing(s);
    }
    if (!s->killing)
        return;
    signal_command(s, SIGKILL);
    finish_if_gone(s);
    if (!s->killing)
        return;
    if (*wake > now + s->rescan_ms)
        *wake = now + s->rescan_ms;
    s->rescan_ms =
        s->rescan_ms * 2 < SUP_RESCAN_MAX_MS ? s->rescan_ms * 2 : SUP_RESCAN_MAX_MS;
}

static void __attribute__((noreturn)) supervise(struct sup *s)
{
    for (;;) {
        int64_t now = ld_mono_ms();
        int64_t wake;
        enforce(s, now, &wake);
        if (s->fd < 0 && s->child <= 0) {
            if (s->cgroup)
                rmdir(s->cgroup);
            _exit(0);
        }
        /* The deadline is enforced by the timer, not by the poll's timeout,
         * which a suspend would stretch past it; the timeout only bounds
         * each wait. poll skips the negative fds. */
        ld_timer_arm(&s->wake, wake);
        struct pollfd p[4] = {{.fd = s->sig_fd, .events = POLLIN},
                              {.fd = s->cg_events, .events = POLLPRI},
                              {.fd = s->fd, .events = POLLIN},
                              {.fd = s->wake.fd, .events = POLLIN}};
        if (poll(p, 4, s->reap_again ? 0 : SUP_MAX_WAIT_MS) < 0)
            continue;
        if (p[0].revents || s->reap_again)
            take_signals(s);
        if (p[1].revents) {
            cgroup_populated(s->cg_events); /* rearms the notice */
            finish_if_gone(s);
        }
        if (s->fd >= 0 && p[2].revents)
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
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    setpgid(0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    s->keep[0] = s->owner;
    s->keep[1] = getpid();
    /* SIGINT stays blocked and unread: leaderd decides what it means. */
    sigdelset(&set, SIGINT);
    s->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (s->sig_fd < 0 || ld_timer_open(&s->wake, NULL) != 0)
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

/* ---- containment, chosen in leaderd before the fork ------------------------ */

/* The caller's cgroup v2 path below the mount ("" for its root), from
 * /proc/self/cgroup; new, free with free; NULL when there is none. */
static char *own_cgroup(void)
{
    char *line = NULL, *path = NULL;
    size_t cap = 0;
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return NULL;
    while (!path && getline(&line, &cap, f) > 0) {
        if (strncmp(line, "0::/", 4) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        path = strdup(strcmp(line, "0::/") == 0 ? "" : line + 3);
    }
    free(line);
    fclose(f);
    return path;
}

/* Whether a process can be moved into the cgroup dir: a probe process
 * tries it on itself (delegation rules are the kernel's to judge). */
static bool can_enter(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    pid_t pid = fork();
    if (pid == 0)
        _exit(write(fd, "0", 1) == 1 ? 0 : 1);
    close(fd);
    int status = 0;
    pid_t got = -1;
    for (int i = 0; pid > 0 && got < 0 && i < 16; i++)
        got = waitpid(pid, &status, 0);
    return got == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The cgroup tree to claim: the caller's cgroup, or the one above it when
 * it is the leaf "leaderd" an earlier spawn moved it into. Its path (new,
 * free with free), and in *at where the part /proc/PID/cgroup shows
 * begins; NULL when the caller has no cgroup v2. */
static char *tree_path(const char *mount, size_t *at)
{
    char *own = own_cgroup(), *tree = NULL;
    if (!own)
        return NULL;
    size_t len = strlen(own);
    if (len >= 8 && strcmp(own + len - 8, "/leaderd") == 0)
        own[len - 8] = '\0';
    if (asprintf(&tree, "%s%s", mount, own) < 0)
        tree = NULL;
    *at = strlen(mount);
    free(own);
    return tree;
}

/* Whether the tree may be claimed: it is not the hierarchy's root (which
 * has no cgroup.kill: claiming it would claim the machine), it is
 * writable, and no process but the caller is in it or below it (any other
 * would be killed as the command's). Then it also bounds how deep cgroups
 * may be made there to how deep they are looked for, if nothing did yet. */
static bool tree_is_ours(const char *tree)
{
    char path[4096], depth[16];
    pid_t self = getpid(), other;
    snprintf(path, sizeof(path), "%s/cgroup.kill", tree);
    if (access(path, W_OK) != 0)
        return false;
    int dir = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return false;
    bool alone = ld_sup_tree_others(dir, &self, 1, &other, 1) == 0;
    int fd = openat(dir, "cgroup.max.depth", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, depth, sizeof(depth) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (alone && n > 0 && depth[0] == 'm') /* "max" */
        write_file(dir, "cgroup.max.depth", LD_SUP_TREE_DEPTH_TEXT);
    close(dir);
    return alone;
}

/* Moves the caller into the leaf "leaderd" of tree (made if missing); this
 * is also the proof that the caller may move processes there. 0 or -1. */
static int enter_leaf(const char *tree)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/leaderd", tree);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return -1;
    int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return -1;
    int rc = write_file(dir, "cgroup.procs", "0");
    close(dir);
    return rc;
}

/* A new cgroup for the command in tree, killable as a whole and enterable;
 * returns its path (new, free with free), else NULL. */
static char *command_cgroup(const char *tree)
{
    static unsigned serial; /* tests run several supervisors in one process */
    char *dir = NULL, *kill_path = NULL;
    bool made = false, ok = false;
    if (asprintf(&dir, "%s/child-%ld-%u", tree, (long)getpid(), serial++) < 0) {
        dir = NULL;
        goto out;
    }
    /* A leftover of an earlier process with our pid goes if it is empty. */
    if (mkdir(dir, 0755) != 0 &&
        !(errno == EEXIST && rmdir(dir) == 0 && mkdir(dir, 0755) == 0))
        goto out;
    made = true;
    if (asprintf(&kill_path, "%s/cgroup.kill", dir) < 0) {
        kill_path = NULL;
        goto out;
    }
    ok = access(kill_path, W_OK) == 0 && can_enter(dir);
out:
    if (!ok && made)
        rmdir(dir);
    if (!ok) {
        free(dir);
        dir = NULL;
    }
    free(kill_path);
    return dir;
}

/* Claims the caller's cgroup tree when it is the caller's alone: moves the
 * caller into its leaf and makes the command's cgroup there; sets s->tree,
 * s->tree_cgroup and s->cgroup. Else, where the caller may still make a
 * cgroup below its own, only s->cgroup: the command gets cgroup.kill, and
 * the subreaper follows what moves out of it. Leaves them NULL when cgroup
 * v2 is not mounted at mount or cannot be written. */
static void choose_cgroups(struct ld_supervisor *s, const char *mount)
{
    struct statfs fs;
    size_t at = 0;
    char *tree = NULL, *own = NULL, *shared = NULL;
    if (statfs(mount, &fs) != 0 || fs.f_type != CGROUP2_MAGIC)
        return;
    tree = tree_path(mount, &at);
    if (tree && tree_is_ours(tree) && enter_leaf(tree) == 0) {
        s->cgroup = command_cgroup(tree);
        if (s->cgroup) {
            s->tree = tree;
            s->tree_cgroup = tree + at;
            return;
        }
    }
    free(tree);
    own = own_cgroup();
    if (own && asprintf(&shared, "%s%s", mount, own) >= 0) {
        s->cgroup = command_cgroup(shared);
        free(shared);
    }
    free(own);
}

/* The one line at start: which containment, and what it guarantees. */
static void log_containment(const struct ld_supervisor *s)
{
    if (s->tree)
        ld_log(LD_LOG_INFO,
               "containment: cgroup v2 (%s): every process in this cgroup tree but "
               "leaderd and its supervisor is the command's, wherever in the tree it "
               "moves; each command starts in %s",
               s->tree, s->cgroup + strlen(s->tree) + 1);
    else if (s->cgroup)
        ld_log(LD_LOG_INFO,
               "containment: cgroup v2 (%s) and process tree (subreaper): leaderd's "
               "cgroup has other processes, so the command's are those in this "
               "cgroup (ended with cgroup.kill) and every descendant of the "
               "supervisor, whatever its group, session or cgroup; a process started "
               "for the command by one outside that tree (a daemon it asks, kubectl "
               "exec) that leaves this cgroup is not found",
               s->cgroup);
    else
        ld_log(LD_LOG_INFO,
               "containment: process tree (subreaper): every descendant of the "
               "supervisor is the command's, whatever its group, session or cgroup; "
               "a process started for the command by one outside that tree (a "
               "daemon it asks, kubectl exec) is not found");
}

enum ld_err ld_supervisor_spawn(struct ld_supervisor *s,
                                const struct ld_supervisor_config *cfg)
{
    int sv[2] = {-1, -1};
    int rc = -1, saved;
    struct sup sup;
    memset(&sup, 0, sizeof(sup));
    sup.cg_dir = -1;
    sup.cg_events = -1;
    sup.tree_dir = -1;
    s->pid = -1;
    s->fd = -1;
    s->cgroup = NULL;
    s->tree = NULL;
    s->tree_cgroup = NULL;
    sup.envp = child_environment(cfg, &sup.term_env);
    if (!sup.envp) {
        errno = ENOMEM;
        goto out;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    choose_cgroups(s, cfg->cgroup_mount ? cfg->cgroup_mount : "/sys/fs/cgroup");
    if (s->cgroup) {
        sup.cg_dir = open(s->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sup.cg_dir >= 0)
            sup.cg_events = openat(sup.cg_dir, "cgroup.events", O_RDONLY | O_CLOEXEC);
        if (sup.cg_events < 0)
            goto out;
    }
    if (s->tree) {
        sup.tree_dir = open(s->tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sup.tree_dir < 0)
            goto out;
        sup.tree = s->tree_cgroup;
    }
    log_containment(s);
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        goto out;
    sup.owner = getpid();
    sup.command = cfg->command;
    sup.cgroup = s->cgroup;
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
    saved = errno;
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    if (sup.cg_events >= 0)
        close(sup.cg_events);
    if (sup.cg_dir >= 0)
        close(sup.cg_dir);
    if (sup.tree_dir >= 0)
        close(sup.tree_dir);
    if (rc != 0 && s->cgroup)
        rmdir(s->cgroup);
    if (rc != 0) {
        free(s->cgroup);
        free(s->tree);
        s->cgroup = NULL;
        s->tree = NULL;
        s->tree_cgroup = NULL;
    }
    if (sup.envp)
        free_environment(sup.envp);
    errno = saved;
    if (rc == 0)
        return LD_OK;
    return saved == ENOMEM ? LD_ENOMEM : LD_ESYS;
}

enum ld_err ld_supervisor_send(struct ld_supervisor *s, enum ld_sup_kind kind,
                               int32_t arg, int64_t value)
{
    struct ld_sup_msg m = {.kind = kind, .arg = arg, .value = value};
    if (s->fd < 0) {
        errno = EPIPE;
        return LD_ESYS;
    }
    ssize_t n = send(s->fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
    return n == (ssize_t)sizeof(m) ? LD_OK : LD_ESYS;
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

/* Reaps what is waiting; true while the caller still has a child. */
static bool reap_children(struct ld_supervisor *s)
{
    for (int i = 0; i < SUP_REAP_MAX; i++) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid < 0)
            return errno != ECHILD;
        if (pid == 0)
            return true;
        if (pid == s->pid)
            s->pid = -1;
    }
    return true;
}

bool ld_supervisor_reclaim(struct ld_supervisor *s, int64_t timeout_ms)
{
    int64_t until = ld_mono_ms() + timeout_ms;
    pid_t self = getpid();
    int dir = s->cgroup ? open(s->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    int events = dir >= 0 ? openat(dir, "cgroup.events", O_RDONLY | O_CLOEXEC) : -1;
    struct scope sc = {.tree = s->tree_cgroup, .keep = &self, .n_keep = 1};
    sc.tree_dir = s->tree ? open(s->tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    bool gone = false;
    for (;;) {
        if (events >= 0)
            write_file(dir, "cgroup.kill", "1");
        /* The supervisor is gone: all else in the tree is the command's. */
        size_t in_tree = signal_scope(&sc, SIGKILL, 0);
        bool children = reap_children(s);
        /* The supervisor's zombie is waited for too (a SIGKILL under load
         * is delivered late): no child at all is left then. */
        gone = !children && in_tree == 0 && (events < 0 || !cgroup_populated(events));
        if (gone || ld_mono_ms() >= until)
            break;
        poll(NULL, 0, SUP_RESCAN_MS);
    }
    if (sc.tree_dir >= 0)
        close(sc.tree_dir);
    if (events >= 0)
        close(events);
    if (dir >= 0)
        close(dir);
    if (gone && s->cgroup) {
        rmdir(s->cgroup);
        free(s->cgroup);
        s->cgroup = NULL;
    }
    return gone;
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
    if (s->cgroup)
        rmdir(s->cgroup);
    free(s->cgroup);
    free(s->tree);
    s->cgroup = NULL;
    s->tree = NULL;
    s->tree_cgroup = NULL;
}
