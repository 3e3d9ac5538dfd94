/*
 * supervisor: the small process that runs the exec child (leaderd -- CMD)
 * and enforces its deadline from outside leaderd, so a leaderd that is
 * paused (SIGSTOP), killed (SIGKILL) or starved still cannot leave a child
 * running once another replica may acquire.
 *
 * leaderd forks it once at start, before any thread exists; the two talk
 * over a SOCK_SEQPACKET socketpair in fixed-size messages (struct
 * ld_sup_msg). Deadlines are CLOCK_MONOTONIC milliseconds, a clock both
 * processes share. The supervisor runs in its own process group (so
 * signals for leaderd's group do not reach it), is a child subreaper (so
 * the child's orphans come back to it), starts each child in a new process
 * group, and on its own clock sends the group SIGTERM when leadership ends
 * (at the last deadline, on "stop", or when the channel closes because
 * leaderd died) and SIGKILL grace_ms after that end. It exits once leaderd
 * is gone and no child is left.
 *
 * The timing rule itself is a pure state machine (struct ld_sup_policy),
 * given messages and times, so it can be tested without processes.
 */
#ifndef LEADERD_SUPERVISOR_H
#define LEADERD_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum ld_sup_kind {
    /* leaderd -> supervisor */
    LD_SUP_START = 1, /* run the command: arg = term, value = first deadline */
    LD_SUP_DEADLINE,  /* leadership now lasts until value (monotonic ms) */
    LD_SUP_STOP,      /* leadership ended now (or at the deadline, if earlier) */
    LD_SUP_SIGNAL,    /* send signal arg to the child's group */
    /* supervisor -> leaderd */
    LD_SUP_EXITED,  /* the child ended: arg = its wait status, value = its pid */
    LD_SUP_STOPPED, /* the same, after the supervisor signalled it because
                       leadership ended (deadline, stop, leaderd gone) */
};

struct ld_sup_msg {
    int32_t kind; /* enum ld_sup_kind */
    int32_t arg;
    int64_t value;
};

/* ---- the policy: when the child's group gets SIGTERM and SIGKILL ---- */

enum ld_sup_act { LD_SUP_NOTHING, LD_SUP_TERM, LD_SUP_KILL };

struct ld_sup_policy {
    int64_t grace_ms;
    bool running;        /* a child was started and has not been reaped */
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
/* The child was reaped. */
void ld_sup_policy_exited(struct ld_sup_policy *p);
/* What is due at now_ms; call again until LD_SUP_NOTHING (both signals may
 * be due at once). *wake_ms is when to ask next (INT64_MAX: only after a
 * message or the child's exit). */
enum ld_sup_act ld_sup_policy_due(struct ld_sup_policy *p, int64_t now_ms,
                                  int64_t *wake_ms);

/* ---- the process, seen from leaderd ---- */

struct ld_supervisor {
    pid_t pid; /* the supervisor process; -1 when none */
    int fd;    /* leaderd's end of the channel, non-blocking; -1 when none */
};

struct ld_supervisor_config {
    char *const *command; /* argv of the child; NULL-terminated */
    const char *lease;    /* LEADERD_LEASE, "NS/NAME" */
    const char *identity; /* LEADERD_IDENTITY */
    int64_t grace_ms;
};

/* Forks the supervisor. Must run while the process has a single thread:
 * the supervisor is a copy of it. Everything in cfg is copied (by fork).
 * Returns 0, or -1 with errno set and s left without a supervisor. */
int ld_supervisor_spawn(struct ld_supervisor *s, const struct ld_supervisor_config *cfg);

/* Sends one message without blocking. Returns 0, or -1 with errno set (the
 * supervisor is gone, or its queue is full). */
int ld_supervisor_send(struct ld_supervisor *s, enum ld_sup_kind kind, int32_t arg,
                       int64_t value);

/* Takes one pending message. Returns 1 with *m filled, 0 when none is
 * pending, -1 when the channel is closed (the supervisor is gone; s->fd is
 * closed and -1 then). */
int ld_supervisor_recv(struct ld_supervisor *s, struct ld_sup_msg *m);

/* Closes the channel, which tells the supervisor leaderd is done, and waits
 * for it to exit (it does once no child is left, at most the child's
 * deadline plus grace later). Safe on a struct without a supervisor. */
void ld_supervisor_close(struct ld_supervisor *s);

#endif
