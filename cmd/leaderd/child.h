/*
 * child: leaderd's side of `leaderd [flags] -- CMD [ARG...]`. It turns what
 * the election loop publishes into messages for the supervisor (start on
 * leading, the new deadline after each renewal, stop when leading ends),
 * forwards SIGTERM/SIGINT to the child's group, reaps zombies (leaderd may
 * be a container's PID 1), and decides when leaderd itself should end: when
 * the child exits while leading, or once it has exited after a forwarded
 * signal. Enforcement does not live here: a paused or dead leaderd cannot
 * kill, so the supervisor process keeps the deadline (see supervisor.h).
 */
#ifndef LEADERD_CHILD_H
#define LEADERD_CHILD_H

#include <stdbool.h>
#include <stdint.h>

#include "election.h"
#include "supervisor.h"

struct ld_child {
    struct ld_supervisor sup;
    const char *name;         /* the command's argv[0], borrowed; for logs */
    bool alive;               /* started, and no exit reported yet */
    bool stop_sent;           /* this child was told leadership ended */
    int64_t sent_deadline_ms; /* the last deadline sent for it */
    bool signalled;           /* a shutdown signal was forwarded: end once it exits */
    bool done;                /* leaderd should release and end */
    int exit_status;          /* leaderd's exit status once done */
};

/* Forks the supervisor (see ld_supervisor_spawn: only while single-threaded).
 * cfg->command must outlive c. Returns 0, or -1 with errno set. */
int ld_child_init(struct ld_child *c, const struct ld_supervisor_config *cfg);

/* The channel from the supervisor: readable when a child exited (or the
 * supervisor is gone). The loop wakes on it. */
int ld_child_fd(const struct ld_child *c);

/* The loop's publish step: takes the supervisor's news, reaps zombies, and
 * starts, extends or stops the child to match st at now_ms. Returns true
 * when leaderd should release the Lease and end. ctx is a struct ld_child. */
bool ld_child_on_publish(void *ctx, const struct ld_election_status *st, int64_t now_ms);

/* True while a child that was told leadership ended has not exited yet:
 * a resignation's release must wait for it, or another replica could start
 * its child while this one still runs (the supervisor kills it within
 * child-grace). ctx is a struct ld_child. */
bool ld_child_holds_release(void *ctx, int64_t now_ms);

/* SIGTERM/SIGINT: forwarded to a running child's group, returning true (the
 * loop keeps renewing until the child has exited); false when no child runs,
 * so the loop shuts down at once. ctx is a struct ld_child. */
bool ld_child_on_signal(void *ctx, int signo);

/* leaderd's exit status: the child's (128 + signal number when a signal
 * ended it) when its exit ended leaderd, 1 when the supervisor was lost,
 * else 0. */
int ld_child_exit_status(const struct ld_child *c);

/* Closes the channel and waits for the supervisor to exit. */
void ld_child_close(struct ld_child *c);

#endif
