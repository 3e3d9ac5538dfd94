/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook_child: leaderd's side of `leaderd [flags] -- CMD [ARG...]`, a hook
 * (hook.h) of the one Lease's election. It turns what the shell publishes
 * into messages for the supervisor (start on leading, the new deadline after
 * each renewal, stop when leading ends), passes the signals leaderd takes
 * on to every process of the command, counts the command's starts and ends
 * (metrics.h), reaps zombies (leaderd may be a container's PID 1), and
 * decides when leaderd itself should end: when the child exits while
 * leading, or once it has ended after a stop signal passed on. Enforcement
 * does not live here: a paused or dead leaderd cannot kill, so the
 * supervisor process keeps the deadline (see supervisor.h).
 */
#ifndef LEADERD_HOOK_CHILD_H
#define LEADERD_HOOK_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "election.h"
#include "err.h"
#include "hook.h"
#include "metrics.h"
#include "supervisor.h"

struct ld_hook_child {
    struct ld_supervisor sup;
    const char *name;           /* the command's argv[0], borrowed; for logs */
    struct ld_metrics *metrics; /* borrowed; may be NULL */
    bool alive;                 /* started, and no exit reported yet */
    bool stop_sent;             /* this child was told leadership ended */
    int64_t sent_deadline_ms;   /* the last deadline sent for it */
    bool signalled;             /* a shutdown signal was forwarded: end once it exits */
    bool done;                  /* leaderd should release and end */
    int exit_status;            /* leaderd's exit status once done */
};

/* Forks the supervisor (see ld_supervisor_spawn: only while single-threaded).
 * cfg->command must outlive c; metrics (may be NULL) too: the command's
 * starts and ends are counted there (ld_metrics_child_*), an end that
 * followed leadership's (LD_SUP_STOPPED) as "deadline", any other by how
 * the child ended. Returns LD_OK, or LD_EIO with err set (the system's
 * reason in its message). */
enum ld_err ld_hook_child_init(struct ld_hook_child *c,
                               const struct ld_supervisor_config *cfg,
                               struct ld_metrics *metrics, struct ld_errinfo *err);

/* The channel from the supervisor: readable when a child exited (or the
 * supervisor is gone). The shell's waits end on it. */
int ld_hook_child_fd(const struct ld_hook_child *c);

/* The hook of election (see struct ld_hook), with c as its ctx (borrowed:
 * c must outlive the shell). Its publish takes the supervisor's news, reaps
 * zombies, and starts, extends or stops the child to match leadership,
 * asking the shell to end when leaderd should release and end. Its release
 * hold is a safety hold (hook.h): a child that was told leadership ended
 * and has not exited yet holds every release, a resignation's too, or
 * another replica could start its child while this one still runs; one
 * still running at the renew deadline after the step-down (child-grace
 * longer than that) means no release at all. SIGTERM/SIGINT are passed to
 * every process of a running command and taken over (the shell keeps
 * renewing until the command has ended); with no command running the shell
 * shuts down at once. SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed to
 * every process of a running command and change nothing else; with none
 * running they are left to the shell, which ignores them. */
struct ld_hook ld_hook_child_bind(struct ld_hook_child *c, size_t election);

/* leaderd's exit status: the child's (128 + signal number when a signal
 * ended it) when its exit ended leaderd, 1 when the supervisor was lost,
 * else 0. */
int ld_hook_child_exit_status(const struct ld_hook_child *c);

/* Closes the channel and waits for the supervisor to exit. */
void ld_hook_child_close(struct ld_hook_child *c);

#endif
