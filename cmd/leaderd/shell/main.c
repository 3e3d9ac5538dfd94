/* SPDX-License-Identifier: Apache-2.0 */
/*
 * leaderd: a Kubernetes Lease leader-election sidecar.
 *
 * The process story: parse and validate the configuration, fork the
 * command's supervisor when there is a command, block the signals it takes
 * before any thread exists, set up the API client, the election engine and
 * the HTTP server, run the shell (one Lease, or a shard group) until a
 * signal (or the command's exit) asks for an orderly release, then tear
 * everything down.
 */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "election.h"
#include "hook_child.h"
#include "hook_events.h"
#include "hook_podlabel.h"
#include "hook_proxy.h"
#include "http.h"
#include "kube.h"
#include "leaseref.h"
#include "log.h"
#include "logsink.h"
#include "memtrim.h"
#include "metrics.h"
#include "mode_lease.h"
#include "mode_shards.h"
#include "proxy.h"
#include "shell.h"
#include "state.h"

/* Everything main owns, so one function can release it all. */
struct daemon {
    int argc;
    char **argv;
    struct ld_config cfg;
    char lease[512]; /* "NAMESPACE/NAME" */
    /* This process's incarnation, written with every Lease it holds: tells
     * it from an earlier or a concurrent process of the same identity. */
    char incarnation[LD_INCARNATION_HEX + 1];
    int signal_fd;
    bool child_ready;
    struct ld_hook_child child;
    int wake_fd; /* what ends the shell's waits: an epoll set of signal_fd,
                    the child's channel, the resign channel's eventfd and,
                    with --api-proxy, its writes' (hook_proxy.h) */
    bool curl_ready;
    struct ld_kube *kube;
    bool state_ready;
    struct ld_state state;
    struct ld_metrics metrics;
    struct ld_mode_lease lease_mode;
    struct ld_mode_shards *shards; /* --shards: the mode instead of lease_mode */
    struct ld_shell *shell;
    struct ld_http *http;
    struct ld_proxy *proxy;             /* --api-proxy; NULL when unset */
    struct ld_hook_proxy *proxy_writes; /* its writes in flight, for the releases */
    bool podlabel_ready;
    struct ld_hook_podlabel podlabel;
    bool events_ready;
    struct ld_hook_events events;
};

/* --pod-label and --events calls: short enough to be retried well within
 * a renew deadline, long enough for a loaded API server. */
#define HOOK_CALL_TIMEOUT_MS 5000

/* Idle HTTP connections cost a file descriptor each; the server sizes its
 * connection cap from this limit, so take what the container allows. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static uint64_t jitter_seed(const char *identity)
{
    /* Different replicas must not jitter in lockstep: mix identity, pid
     * and time. Not security-relevant. */
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = identity; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ld_wall_us();
}

/* Draws this process's incarnation: 128 random bits in hex. A repeated
 * value would let two processes of one identity both count a record as
 * their own, so a failing source is fatal rather than replaced by
 * something guessable. */
static enum ld_err draw_incarnation(struct daemon *d, struct ld_errinfo *err)
{
    unsigned char raw[LD_INCARNATION_HEX / 2];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return ld_errinfo_set(err, LD_ESYS, "getrandom: %s", strerror(errno));
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(d->incarnation + 2 * i, 3, "%02x", raw[i]);
    return LD_OK;
}

/* The uid for the member Lease's ownerReference: POD_UID names the Pod
 * POD_NAME, and the garbage collector looks the owner up in the Lease's
 * namespace, so a reference is made only when that is the Pod's; a wrong
 * one would have the Lease deleted as soon as it is created. */
static const char *owner_uid(const struct ld_config *cfg)
{
    if (!cfg->pod_uid)
        return NULL;
    if (!cfg->pod_name ||
        (cfg->pod_namespace && strcmp(cfg->pod_namespace, cfg->namespace_) != 0)) {
        ld_log(LD_LOG_WARN,
               "POD_UID is set, but %s: the member Lease gets no ownerReference (after a "
               "crash it expires instead of being collected)",
               !cfg->pod_name ? "POD_NAME is not"
                              : "the Lease's namespace is not the Pod's (POD_NAMESPACE)");
        return NULL;
    }
    return cfg->pod_uid;
}

/* The configuration, and the log sink that names its Lease. Its own
 * messages are complete lines, longer than an errinfo holds, so they are
 * printed here (err's message is then empty). After --help or --version
 * there is nothing more to do (d->cfg.printed_only). */
static enum ld_err start_config(struct daemon *d, struct ld_errinfo *err)
{
    char msg[LD_CONFIG_ERR_LEN];
    enum ld_err rc = ld_config_parse(&d->cfg, d->argc, d->argv, msg, sizeof(msg));
    if (rc == LD_OK && d->cfg.printed_only)
        return LD_OK;
    if (rc != LD_OK) {
        fprintf(stderr, "%s\n", msg);
        return ld_errinfo_set(err, rc, "%s", "");
    }
    if (ld_lease_ref(d->lease, sizeof(d->lease), d->cfg.namespace_, d->cfg.lease_name) !=
        LD_OK)
        return ld_errinfo_set(err, LD_ECONFIG,
                              "the Lease's namespace and name are too long");
    ld_logsink_install(d->cfg.log_format, d->cfg.log_level, d->lease, d->cfg.identity);
    return LD_OK;
}

/* Forked first, while the process has one thread: the supervisor is a copy
 * of it. */
static enum ld_err start_child(struct daemon *d, struct ld_errinfo *err)
{
    if (!d->cfg.command)
        return LD_OK;
    struct ld_supervisor_config sc = {
        .command = d->cfg.command,
        .lease = d->lease,
        .identity = d->cfg.identity,
        .grace_ms = d->cfg.child_grace_ms,
    };
    enum ld_err rc = ld_hook_child_init(&d->child, &sc, &d->metrics, err);
    d->child_ready = rc == LD_OK;
    return rc;
}

/* SIGTERM and SIGINT (stop) and SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 (passed
 * to the command, else ignored: never their default action) are taken
 * synchronously from a signalfd; blocking them here, before any thread
 * starts, makes every thread inherit that. */
static enum ld_err start_signals(struct daemon *d, struct ld_errinfo *err)
{
    static const int taken[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
        sigaddset(&set, taken[i]);
    if (sigprocmask(SIG_BLOCK, &set, NULL) == 0) {
        signal(SIGPIPE, SIG_IGN);
        d->signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    }
    if (d->signal_fd < 0)
        return ld_errinfo_set(err, LD_ESYS, "cannot set up signal handling");
    return LD_OK;
}

static enum ld_err start_curl(struct daemon *d, struct ld_errinfo *err)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return ld_errinfo_set(err, LD_ESYS, "curl_global_init failed");
    d->curl_ready = true;
    return LD_OK;
}

static enum ld_err start_client(struct daemon *d, struct ld_errinfo *err)
{
    d->kube = ld_kube_new(&d->cfg.kube, err);
    if (!d->kube)
        return err->code;
    ld_kube_set_observer(d->kube, ld_metrics_observe_request, &d->metrics);
    return LD_OK;
}

/* The shell's waits end on a signal, the child's news and a POST /resign
 * alike (requests in flight go on: the host never cuts them short); an
 * epoll fd is readable when any fd in it is. */
static enum ld_err make_wake_fd(struct daemon *d)
{
    d->wake_fd = epoll_create1(EPOLL_CLOEXEC);
    if (d->wake_fd < 0)
        return LD_ESYS;
    int fds[3] = {d->signal_fd, ld_state_resign_fd(&d->state),
                  d->child_ready ? ld_hook_child_fd(&d->child) : -1};
    for (int i = 0; i < 3 && fds[i] >= 0; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(d->wake_fd, EPOLL_CTL_ADD, fds[i], &ev) != 0)
            return LD_ESYS;
    }
    return LD_OK;
}

/* The state the shell publishes, the resign channel and the shell's wake
 * set, before the shell and the server that share them. */
static enum ld_err start_state(struct daemon *d, struct ld_errinfo *err)
{
    /* A pass is at most a request timeout plus a retry wait apart; a
     * heartbeat older than a lease duration plus a renew deadline means
     * the shell is wedged. */
    ld_state_init(&d->state, d->lease, d->cfg.identity,
                  d->cfg.lease_duration_ms + d->cfg.renew_deadline_ms);
    d->state_ready = true;
    /* A resignation's release is bounded by renew-deadline in the engine;
     * the request may also wait for a request in flight (half of that). */
    if (ld_state_resign_enable(&d->state, 2 * d->cfg.renew_deadline_ms) != 0 ||
        make_wake_fd(d) != LD_OK)
        return ld_errinfo_set(err, LD_ESYS, "cannot set up the loop's wake-ups: %s",
                              strerror(errno));
    return LD_OK;
}

/* --shards: the group's mode; the group is the state's before the HTTP
 * server starts. */
static enum ld_err make_shards_mode(struct daemon *d, struct ld_shell_mode *mode,
                                    struct ld_errinfo *err)
{
    struct ld_mode_shards_config sc = {
        .host = {.kube = d->kube,
                 .clock = ld_clock_real(),
                 .namespace_ = d->cfg.namespace_,
                 .group = d->cfg.lease_name,
                 .identity = d->cfg.identity,
                 .incarnation = d->incarnation,
                 .names = (const char *const *)d->cfg.shard_names,
                 .n_shards = d->cfg.n_shards,
                 .pod_uid = owner_uid(&d->cfg),
                 .pod_name = d->cfg.pod_name,
                 .lease_duration_ms = d->cfg.lease_duration_ms,
                 .renew_deadline_ms = d->cfg.renew_deadline_ms,
                 .retry_period_ms = d->cfg.retry_period_ms,
                 .release_on_exit = d->cfg.release_on_exit,
                 .drain_ms = d->cfg.shard_drain_ms,
                 .seed = jitter_seed(d->cfg.identity),
                 .call_timeout_ms = HOOK_CALL_TIMEOUT_MS},
        .state = &d->state,
        .metrics = &d->metrics,
        .events = d->cfg.events,
    };
    d->shards = ld_mode_shards_new(&sc, err);
    if (!d->shards)
        return err->code;
    ld_state_set_layout(&d->state, ld_shardgroup_layout(ld_mode_shards_group(d->shards)));
    *mode = ld_mode_shards(d->shards);
    return LD_OK;
}

/* The one Lease's mode; the configuration was checked by ld_config_parse,
 * the engine checks it once more. */
static void make_lease_mode(struct daemon *d, struct ld_shell_mode *mode)
{
    struct ld_mode_lease_config mc = {
        .state = &d->state,
        .metrics = &d->metrics,
        .election =
            {
                .namespace_ = d->cfg.namespace_,
                .name = d->cfg.lease_name,
                .identity = d->cfg.identity,
                .incarnation = d->incarnation,
                .lease_duration_ms = d->cfg.lease_duration_ms,
                .renew_deadline_ms = d->cfg.renew_deadline_ms,
                .retry_period_ms = d->cfg.retry_period_ms,
                .release_on_exit = d->cfg.release_on_exit,
                .seed = jitter_seed(d->cfg.identity),
                .handover_cooldown_ms = d->cfg.resign_cooldown_ms,
                /* Moot with an incarnation (our old self's record is a
                 * foreign holder's, waited out for a lease duration, which
                 * its command's deadline always ends before), kept for
                 * the rule's sake should the incarnation ever be absent. */
                .distrust_own_record_at_start = d->cfg.command != NULL,
            },
    };
    ld_mode_lease_init(&d->lease_mode, &mc);
    *mode = ld_mode_lease(&d->lease_mode);
}

/* The shell with its mode's elections. */
static enum ld_err start_election(struct daemon *d, struct ld_errinfo *err)
{
    struct ld_shell_mode mode = {0};
    if (d->cfg.n_shards > 0) {
        enum ld_err rc = make_shards_mode(d, &mode, err);
        if (rc != LD_OK)
            return rc;
    } else {
        make_lease_mode(d, &mode);
    }
    struct ld_shell_config sc = {
        .kube = d->kube,
        .state = &d->state,
        .metrics = &d->metrics,
        .clock = ld_clock_real(),
        .namespace_ = d->cfg.namespace_,
        .lease_duration_ms = d->cfg.lease_duration_ms,
        .renew_deadline_ms = d->cfg.renew_deadline_ms,
        .resign_cooldown_ms = d->cfg.resign_cooldown_ms,
        .wake_fd = d->wake_fd,
        .signals = {.take = ld_shell_signalfd_take, .ctx = &d->signal_fd},
    };
    d->shell = ld_shell_new(&sc, mode, err);
    return d->shell ? LD_OK : err->code;
}

static enum ld_err start_http(struct daemon *d, struct ld_errinfo *err)
{
    raise_fd_limit();
    struct ld_http_options opts = {
        .mode = d->shards ? &ld_http_shard_mode : &ld_http_lease_mode,
    };
    d->http = ld_http_start_opts(d->cfg.listen_host, d->cfg.listen_port, &d->state,
                                 &d->metrics, &opts, err);
    return d->http ? LD_OK : err->code;
}

/* The API write gate, after the HTTP server: it reads the same state. Its
 * writes in flight hold the releases (hook_proxy.h): their count's eventfd
 * joins the shell's wake set. */
static enum ld_err start_proxy(struct daemon *d, struct ld_errinfo *err)
{
    if (!d->cfg.api_proxy_host)
        return LD_OK;
    d->proxy_writes = ld_hook_proxy_new(d->cfg.n_shards > 0 ? d->cfg.n_shards : 1,
                                        d->cfg.lease_duration_ms);
    struct epoll_event ev = {.events = EPOLLIN};
    if (d->proxy_writes)
        ev.data.fd = ld_hook_proxy_fd(d->proxy_writes);
    if (!d->proxy_writes || epoll_ctl(d->wake_fd, EPOLL_CTL_ADD, ev.data.fd, &ev) != 0)
        return ld_errinfo_set(err, LD_ESYS, "api-proxy: cannot set up its wake-ups: %s",
                              strerror(errno));
    struct ld_proxy_options po = {.impersonation = d->cfg.api_proxy_impersonation,
                                  .writes = d->proxy_writes};
    d->proxy = ld_proxy_start(d->cfg.api_proxy_host, d->cfg.api_proxy_port, &d->cfg.kube,
                              &d->state, &d->metrics, &po, err);
    if (!d->proxy)
        return err->code;
    ld_log(LD_LOG_INFO, "api proxy listening on %s%s%s:%d",
           strchr(d->cfg.api_proxy_host, ':') ? "[" : "", d->cfg.api_proxy_host,
           strchr(d->cfg.api_proxy_host, ':') ? "]" : "", ld_proxy_port(d->proxy));
    return LD_OK;
}

/* The API write gate's hooks: the one Lease's, or in shard mode one per
 * shard, bound through the mode (shards are no elections of the shell),
 * whose exit also watches their eventfd. */
static enum ld_err start_proxy_hooks(struct daemon *d, struct ld_errinfo *err)
{
    if (!d->proxy_writes)
        return LD_OK;
    if (!d->shards) {
        struct ld_hook h = ld_hook_proxy_bind(d->proxy_writes, 0, LD_MODE_LEASE_ELECTION);
        return ld_shell_add_hook(d->shell, &h, err);
    }
    enum ld_err rc =
        ld_mode_shards_add_wake_fd(d->shards, ld_hook_proxy_fd(d->proxy_writes), err);
    for (uint32_t k = 0; rc == LD_OK && k < d->cfg.n_shards; k++) {
        struct ld_hook h = ld_hook_proxy_bind(d->proxy_writes, k, 0);
        rc = ld_mode_shards_add_shard_hook(d->shards, k, &h, err);
    }
    return rc;
}

/* The one Lease's hooks, in the order they see each publish (shard mode
 * binds its own, per shard), and the API write gate's. */
static enum ld_err start_hooks(struct daemon *d, struct ld_errinfo *err)
{
    struct ld_hook hooks[3];
    size_t n = 0;
    if (d->shards)
        return start_proxy_hooks(d, err);
    if (d->child_ready)
        hooks[n++] = ld_hook_child_bind(&d->child, LD_MODE_LEASE_ELECTION);
    if (d->cfg.pod_label) {
        struct ld_hook_podlabel_config pc = {
            .kube = d->kube,
            .namespace_ = d->cfg.namespace_,
            .identity = d->cfg.identity,
            .key = d->cfg.pod_label,
            .state = &d->state,
            .metrics = &d->metrics,
            .clock = ld_clock_real(),
            .timeout_ms = HOOK_CALL_TIMEOUT_MS,
        };
        ld_hook_podlabel_init(&d->podlabel, &pc);
        d->podlabel_ready = true;
        hooks[n++] = ld_hook_podlabel_bind(&d->podlabel, LD_MODE_LEASE_ELECTION);
    }
    if (d->cfg.events) {
        struct ld_hook_events_config ec = {
            .kube = d->kube,
            .namespace_ = d->cfg.namespace_,
            .lease = d->cfg.lease_name,
            .identity = d->cfg.identity,
            .metrics = &d->metrics,
            .clock = ld_clock_real(),
            .timeout_ms = HOOK_CALL_TIMEOUT_MS,
        };
        ld_hook_events_init(&d->events, &ec);
        d->events_ready = true;
        hooks[n++] = ld_hook_events_bind(&d->events, LD_MODE_LEASE_ELECTION);
    }
    for (size_t i = 0; i < n; i++) {
        enum ld_err rc = ld_shell_add_hook(d->shell, &hooks[i], err);
        if (rc != LD_OK)
            return rc;
    }
    return start_proxy_hooks(d, err);
}

/* Start-up, in order. */
static enum ld_err (*const start_steps[])(struct daemon *d, struct ld_errinfo *err) = {
    start_config, start_child, start_signals,    start_curl,
    start_client, start_state, draw_incarnation, start_election,
    start_http,   start_proxy, start_hooks,
};

/* leaderd's exit status when start-up fails, by error: 2 for what the user
 * has to fix (a flag, a variable, a kubeconfig or credentials that cannot
 * be read or make no sense, names the API would refuse), 1 for what the
 * system refused (memory, a system call, a port in use). */
static int exit_status(enum ld_err rc)
{
    switch (rc) {
    case LD_OK:
        return 0;
    case LD_ECONFIG:
    case LD_EINVAL:
    case LD_EDECODE:
    case LD_EIO:
    case LD_ETOOBIG:
        return 2;
    default:
        return 1;
    }
}

static void teardown(struct daemon *d)
{
    if (d->podlabel_ready)
        ld_hook_podlabel_clear(&d->podlabel);
    if (d->events_ready)
        ld_hook_events_clear(&d->events);
    ld_proxy_stop(d->proxy);
    ld_hook_proxy_free(d->proxy_writes);
    ld_http_stop(d->http);
    if (d->state_ready)
        ld_state_destroy(&d->state);
    ld_shell_free(d->shell);
    ld_mode_shards_free(d->shards);
    ld_kube_free(d->kube);
    if (d->curl_ready)
        curl_global_cleanup();
    ld_metrics_destroy(&d->metrics);
    if (d->wake_fd >= 0)
        close(d->wake_fd);
    if (d->signal_fd >= 0)
        close(d->signal_fd);
    if (d->child_ready)
        ld_hook_child_close(&d->child);
    ld_config_clear(&d->cfg);
}

/* Starts everything: true when all is running, else false with the exit
 * status in *status. */
static bool start(struct daemon *d, int *status)
{
    struct ld_errinfo err;
    for (size_t i = 0; i < sizeof(start_steps) / sizeof(start_steps[0]); i++) {
        enum ld_err rc = start_steps[i](d, &err);
        if (rc == LD_OK && !d->cfg.printed_only)
            continue;
        if (rc != LD_OK && err.msg[0])
            fprintf(stderr, "leaderd: %s\n", err.msg);
        *status = exit_status(rc);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    struct daemon d;
    ld_memtrim_setup();
    memset(&d, 0, sizeof(d));
    d.signal_fd = -1;
    d.wake_fd = -1;
    d.argc = argc;
    d.argv = argv;
    ld_metrics_init(&d.metrics);

    int status = 0;
    if (start(&d, &status)) {
        char desc[1024];
        ld_config_describe(&d.cfg, desc, sizeof(desc));
        ld_log(LD_LOG_INFO, "leaderd %s starting: %s, http port %d", LEADERD_VERSION,
               desc, ld_http_port(d.http));
        ld_log(LD_LOG_INFO, "incarnation %s (annotation %s on every Lease it holds)",
               d.incarnation, LD_LEASE_INCARNATION);
        ld_shell_run(d.shell);
        status = d.child_ready ? ld_hook_child_exit_status(&d.child) : 0;
        ld_log(LD_LOG_INFO, "leaderd stopped");
    }
    teardown(&d);
    return status;
}
