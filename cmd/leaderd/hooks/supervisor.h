/* SPDX-License-Identifier: Apache-2.0 */
/*
 * supervisor: the small process that runs the exec child (leaderd -- CMD)
 * and enforces its deadline from outside leaderd, so a leaderd that is
 * paused (SIGSTOP), killed (SIGKILL) or starved still cannot leave a child
 * running once another replica may acquire.
 *
 * leaderd forks it once at start, before any thread exists; the two talk
 * over a SOCK_SEQPACKET socketpair in fixed-size messages (struct
 * ld_sup_msg). Deadlines are ld_mono_ms milliseconds (clock.h), a clock
 * both processes share. The supervisor runs in its own process group (so
 * signals for leaderd's group do not reach it) and starts each child in a
 * new process group. On its own clock it sends every process of the
 * command SIGTERM when leadership ends (at the last deadline, on "stop", or
 * when the channel closes because leaderd died) and SIGKILL grace_ms after
 * that end. It exits once leaderd is gone and nothing of the command is
 * left.
 *
 * Containment: "the command" is every process the child started, also
 * those that left its process group or session (setsid, timeout, a
 * daemonizing double fork, a job-control shell) or their cgroup. Where
 * leaderd is alone in a cgroup v2 tree it may write (a container's), it
 * claims that tree: leaderd and the supervisor move into a leaf of their
 * own ("leaderd"), each command starts in another ("child-PID-N", ended
 * with cgroup.kill), and every other process anywhere in the tree counts
 * as the command's, so one that moves itself elsewhere in it (leaderd's
 * leaf included) is still found. The supervisor is also a child subreaper
 * and follows every process descended from it, wherever it moved; that
 * alone is the containment where there is no cgroup v2 to write, and with
 * a command cgroup below leaderd's where leaderd shares its cgroup. The
 * command counts as ended (the child's exit is reported) only once none of
 * its processes is left.
 *
 * The timing rule itself is a pure state machine (struct ld_sup_policy),
 * given messages and times, so it can be tested without processes.
 */
#ifndef LEADERD_SUPERVISOR_H
#define LEADERD_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

enum ld_sup_kind {
    /* leaderd -> supervisor */
    LD_SUP_START = 1, /* run the command: arg = term, value = first deadline */
    LD_SUP_DEADLINE,  /* leadership now lasts until value (monotonic ms) */
    LD_SUP_STOP,      /* leadership ended now (or at the deadline, if earlier) */
    LD_SUP_SIGNAL,    /* pass signal arg to every process of the command:
                         SIGTERM (then SIGCONT), SIGINT, SIGHUP, SIGQUIT,
                         SIGUSR1 or SIGUSR2; others are ignored */
    /* supervisor -> leaderd */
    LD_SUP_EXITED,  /* the command ended: arg = the child's own wait status,
                       value = its pid; no process of the command is left */
    LD_SUP_STOPPED, /* the same, after the supervisor signalled it because
                       leadership ended (deadline, stop, leaderd gone) */
};

struct ld_sup_msg {
    int32_t kind; /* enum ld_sup_kind */
    int32_t arg;
    int64_t value;
};

/* ---- the policy: when the command gets SIGTERM and SIGKILL ---- */

enum ld_sup_act { LD_SUP_NOTHING, LD_SUP_TERM, LD_SUP_KILL };

struct ld_sup_policy {
    int64_t grace_ms;
    bool running;        /* a command was started and is not gone yet */
    int64_t deadline_ms; /* leadership counts until here... */
    int64_t ended_ms;    /* ...or until here, if earlier (INT64_MAX: not ended) */
    bool term_sent;
    bool kill_sent;
};

void ld_sup_policy_init(struct ld_sup_policy *p, int64_t grace_ms);
/* A child was started while leading until deadline_ms. */
void ld_sup_policy_started(struct ld_sup_policy *p, int64_t deadline_ms);
/* A renewal moved the deadline; ignored once leadership has ended, so a
 * late message can never revive a child that is being stopped. */
void ld_sup_policy_deadline(struct ld_sup_policy *p, int64_t deadline_ms);
/* Leadership ended at now_ms, or at the deadline if that was earlier ("stop"
 * from leaderd, or leaderd gone). */
void ld_sup_policy_ended(struct ld_sup_policy *p, int64_t now_ms);
/* Nothing of the command is left. */
void ld_sup_policy_exited(struct ld_sup_policy *p);
/* What is due at now_ms; call again until LD_SUP_NOTHING (both signals may
 * be due at once). *wake_ms is when to ask next (INT64_MAX: only after a
 * message or the child's exit). */
enum ld_sup_act ld_sup_policy_due(struct ld_sup_policy *p, int64_t now_ms,
                                  int64_t *wake_ms);

/* ---- the process, seen from leaderd ---- */

struct ld_supervisor {
    pid_t pid;    /* the supervisor process; -1 when none */
    int fd;       /* leaderd's end of the channel, non-blocking; -1 when none */
    char *cgroup; /* the command's cgroup directory, owned; NULL: the
                     supervisor contains it as a subreaper */
    char *tree;   /* the cgroup tree claimed (leaderd's, above its leaf),
                     owned; NULL: none (leaderd shares its cgroup, or
                     there is no cgroup) */
    const char *tree_cgroup; /* inside tree: its path as /proc/PID/cgroup
                                shows it ("" for the namespace's root) */
};

struct ld_supervisor_config {
    char *const *command; /* argv of the child; NULL-terminated */
    const char *lease;    /* LEADERD_LEASE, "NS/NAME" */
    const char *identity; /* LEADERD_IDENTITY */
    int64_t grace_ms;
    /* Where cgroup v2 is looked for; NULL means /sys/fs/cgroup. Tests point
     * it elsewhere to choose the containment. */
    const char *cgroup_mount;
};

/* Forks the supervisor. Must run while the process has a single thread:
 * the supervisor is a copy of it. Everything in cfg is copied (by fork).
 *
 * First it chooses the containment: the caller's cgroup tree, when cgroup
 * v2 is mounted at cfg->cgroup_mount, the caller's cgroup is not the
 * hierarchy's root, no other process is in it or below it, and the caller
 * may move itself into a new leaf "leaderd" there and a probe process into
 * a new cgroup for the command (the caller stays in that leaf); else, when
 * the caller may still make and enter a cgroup below its own, that cgroup
 * for the command plus the process tree; else the process tree alone. It
 * logs which one, and what it guarantees, in one line ("containment:
 * cgroup v2 (TREE): ...", "containment: cgroup v2 (CGROUP) and process
 * tree (subreaper): ..." or "containment: process tree (subreaper): ...").
 * It also makes the calling process a child subreaper, so that should the
 * supervisor die, what is left of the command becomes the caller's (see
 * ld_supervisor_reclaim).
 *
 * Returns LD_OK, or LD_ESYS (LD_ENOMEM) with errno set and s left without
 * a supervisor. */
enum ld_err ld_supervisor_spawn(struct ld_supervisor *s,
                                const struct ld_supervisor_config *cfg);

/* Sends one message without blocking. Returns LD_OK, or LD_ESYS with errno
 * set (the supervisor is gone, or its queue is full). */
enum ld_err ld_supervisor_send(struct ld_supervisor *s, enum ld_sup_kind kind,
                               int32_t arg, int64_t value);

/* Takes one pending message. Returns 1 with *m filled, 0 when none is
 * pending, -1 when the channel is closed (the supervisor is gone; s->fd is
 * closed and -1 then). */
int ld_supervisor_recv(struct ld_supervisor *s, struct ld_sup_msg *m);

/* For when the supervisor died (ld_supervisor_recv returned -1, or the
 * caller reaped s->pid) while a command may have been running: nothing
 * enforces its deadline any more, so the caller ends every process of it
 * itself, at once with SIGKILL: every process of the claimed cgroup tree
 * but the caller (cgroup.kill for the command's cgroup), and every
 * descendant of the caller (the supervisor is gone, so they are all the
 * command's), reaping its children, the supervisor's zombie included
 * (s->pid is -1 then). Blocks for at most timeout_ms. Returns true
 * once no process of the command is left (the cgroup is then removed),
 * false when some may still be. */
bool ld_supervisor_reclaim(struct ld_supervisor *s, int64_t timeout_ms);

/* Closes the channel, which tells the supervisor leaderd is done, waits
 * for it to exit (it does once nothing of the command is left, at most the
 * deadline plus grace later), and removes the command's cgroup. Safe on a
 * struct without a supervisor. */
void ld_supervisor_close(struct ld_supervisor *s);

/* ---- whose process it is (async-signal-safe) ---- */

/* How deep below the claimed cgroup processes are looked for; the tree's
 * cgroup.max.depth is set to this, so no deeper cgroup can be made there. */
#define LD_SUP_TREE_DEPTH 16

/* Every process listed in cgroup.procs of the cgroup directory dir (open)
 * and of every cgroup below it, up to LD_SUP_TREE_DEPTH levels, except the
 * n_keep pids of keep: with the tree claimed, these are the command's. At
 * most cap of them are stored in out; returns how many were stored. Only
 * system calls and static buffers, so the supervisor may call it; one
 * thread at a time. */
size_t ld_sup_tree_others(int dir, const pid_t *keep, size_t n_keep, pid_t *out,
                          size_t cap);

/* Whether text, the content of a /proc/PID/cgroup, puts the process at
 * tree (a path as that file shows it, "" for the namespace's root) or
 * below it. */
bool ld_sup_cgroup_within(const char *text, const char *tree);

#endif
