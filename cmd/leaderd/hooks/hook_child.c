/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook_child: the exec child's state as leaderd tracks it, driven once per
 * publish. Everything here is a request to the supervisor; nothing depends on
 * leaderd running in time for safety, only for liveness.
 */
#include "hook_child.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lead.h"
#include "log.h"

/* Zombies reaped per pass; more wait for the next one. */
#define REAP_MAX 64
/* How long leaderd waits for the command's processes after its supervisor
 * died: SIGKILL takes milliseconds, unless a process is stuck in the kernel. */
#define RECLAIM_MS 2000

enum ld_err ld_hook_child_init(struct ld_hook_child *c,
                               const struct ld_supervisor_config *cfg,
                               struct ld_metrics *metrics, struct ld_errinfo *err)
{
    memset(c, 0, sizeof(*c));
    c->name = cfg->command[0];
    c->metrics = metrics;
    ld_metrics_child_configured(metrics);
    enum ld_err rc = ld_supervisor_spawn(&c->sup, cfg);
    if (rc != LD_OK)
        return ld_errinfo_set(err, rc, "cannot start the command's supervisor: %s",
                              strerror(errno));
    return LD_OK;
}

int ld_hook_child_fd(const struct ld_hook_child *c)
{
    return c->sup.fd;
}

static int status_code(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void finish(struct ld_hook_child *c, int exit_status)
{
    if (c->done)
        return;
    c->done = true;
    c->exit_status = exit_status;
}

static void on_exited(struct ld_hook_child *c, const struct ld_sup_msg *m)
{
    /* The supervisor may have enforced a deadline leaderd was too slow
     * (or too stopped) to see pass: that is no exit of the child's own. */
    bool own_exit = m->kind == LD_SUP_EXITED && !c->stop_sent;
    c->alive = false;
    if (m->kind == LD_SUP_STOPPED)
        ld_metrics_child_exited(c->metrics, LD_METRICS_CHILD_DEADLINE);
    else
        ld_metrics_child_exited(c->metrics, WIFSIGNALED(m->arg)
                                                ? LD_METRICS_CHILD_SIGNALED
                                                : LD_METRICS_CHILD_EXITED);
    if (WIFSIGNALED(m->arg))
        ld_log(LD_LOG_INFO, "command %s (pid %lld) ended by signal %d", c->name,
               (long long)m->value, WTERMSIG(m->arg));
    else
        ld_log(LD_LOG_INFO, "command %s (pid %lld) exited with status %d", c->name,
               (long long)m->value, status_code(m->arg));
    /* A child stopped because leadership ended is expected: keep contending. */
    if (c->signalled || own_exit)
        finish(c, status_code(m->arg));
}

/* Without its supervisor nothing enforces the command's deadline or reports
 * its end. With no command running leaderd just ends. Otherwise it kills
 * every process of the command itself and exits without a release: the
 * Lease expires as after a crash, and no release can let another replica
 * start its command while one of ours might still run. */
static void lost_supervisor(struct ld_hook_child *c)
{
    if (c->done && !c->alive)
        return;
    if (!c->alive) {
        ld_log(LD_LOG_ERROR, "the command's supervisor is gone; shutting down");
        finish(c, 1);
        return;
    }
    ld_log(LD_LOG_ERROR,
           "the command's supervisor is gone: killing command %s and exiting "
           "without releasing the Lease",
           c->name);
    if (!ld_supervisor_reclaim(&c->sup, RECLAIM_MS))
        ld_log(LD_LOG_ERROR, "some processes of command %s may still run", c->name);
    _exit(1);
}

static void take_news(struct ld_hook_child *c)
{
    struct ld_sup_msg m;
    int rc = 0;
    /* The supervisor sends one message per child; a few passes' worth at most. */
    for (int i = 0; i < REAP_MAX; i++) {
        rc = ld_supervisor_recv(&c->sup, &m);
        if (rc <= 0)
            break;
        if (m.kind == LD_SUP_EXITED || m.kind == LD_SUP_STOPPED)
            on_exited(c, &m);
    }
    if (rc < 0 && !c->done)
        lost_supervisor(c);
}

/* As a container's PID 1 leaderd inherits every orphan of the container. */
static void reap_zombies(struct ld_hook_child *c)
{
    for (int i = 0; i < REAP_MAX; i++) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid <= 0)
            break;
        if (pid == c->sup.pid) {
            c->sup.pid = -1;
            lost_supervisor(c);
        }
    }
}

static void send_or_log(struct ld_hook_child *c, enum ld_sup_kind kind, int32_t arg,
                        int64_t value)
{
    if (ld_supervisor_send(&c->sup, kind, arg, value) != LD_OK)
        ld_log(LD_LOG_WARN, "cannot reach the command's supervisor: %s", strerror(errno));
}

static bool on_publish(void *ctx, const struct ld_election_status *st, int64_t now_ms)
{
    struct ld_hook_child *c = ctx;
    take_news(c);
    reap_zombies(c);
    bool leading = ld_leads_at(st->leading, st->lead_until_ms, now_ms);
    if (c->alive && !c->stop_sent && !leading) {
        ld_log(LD_LOG_INFO, "leadership ended: stopping command %s", c->name);
        send_or_log(c, LD_SUP_STOP, 0, 0);
        c->stop_sent = true;
    } else if (c->alive && !c->stop_sent && st->lead_until_ms != c->sent_deadline_ms) {
        send_or_log(c, LD_SUP_DEADLINE, 0, st->lead_until_ms);
        c->sent_deadline_ms = st->lead_until_ms;
    } else if (!c->alive && leading && !c->done && !c->signalled) {
        /* A child stopped earlier must be gone first: one child at a time. */
        ld_log(LD_LOG_INFO, "starting command %s (term %d)", c->name, (int)st->term);
        if (ld_supervisor_send(&c->sup, LD_SUP_START, st->term, st->lead_until_ms) ==
            LD_OK) {
            ld_metrics_child_started(c->metrics);
            c->alive = true;
            c->stop_sent = false;
            c->sent_deadline_ms = st->lead_until_ms;
        } else {
            ld_log(LD_LOG_ERROR, "cannot reach the command's supervisor: %s",
                   strerror(errno));
            lost_supervisor(c);
        }
    }
    return c->done;
}

static bool holds_release(void *ctx, int64_t now_ms)
{
    struct ld_hook_child *c = ctx;
    (void)now_ms;
    take_news(c); /* a supervisor lost now must not be followed by a release */
    return c->alive && c->stop_sent;
}

static bool on_signal(void *ctx, int signo)
{
    struct ld_hook_child *c = ctx;
    if (signo != SIGTERM && signo != SIGINT) {
        /* Meant for the command (a reload, a dump): leaderd goes on. */
        if (!c->alive)
            return false;
        ld_log(LD_LOG_INFO, "passing signal %d to command %s", signo, c->name);
        send_or_log(c, LD_SUP_SIGNAL, signo, 0);
        return true;
    }
    c->signalled = true; /* no new child from here on */
    if (!c->alive)
        return false;
    ld_log(LD_LOG_INFO, "passing signal %d to command %s; it ends leaderd when it exits",
           signo, c->name);
    send_or_log(c, LD_SUP_SIGNAL, signo, 0);
    return true;
}

struct ld_hook ld_hook_child_bind(struct ld_hook_child *c, size_t election)
{
    return (struct ld_hook){.ctx = c,
                            .election = election,
                            .on_publish = on_publish,
                            .on_signal = on_signal,
                            .holds_release = holds_release,
                            .hold = LD_HOOK_HOLD_SAFETY};
}

int ld_hook_child_exit_status(const struct ld_hook_child *c)
{
    return c->done ? c->exit_status : 0;
}

void ld_hook_child_close(struct ld_hook_child *c)
{
    ld_supervisor_close(&c->sup);
}
