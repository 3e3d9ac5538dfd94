/*
 * leaderd: a Kubernetes Lease leader-election sidecar.
 *
 * The process story: parse and validate the configuration, fork the
 * command's supervisor when there is a command, block the shutdown signals
 * before any thread exists, set up the API client, the election engine and
 * the HTTP server, run the election loop until a signal (or the command's
 * exit) asks for an orderly release, then tear everything down.
 */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "clock.h"
#include "config.h"
#include "election.h"
#include "events.h"
#include "http.h"
#include "kube.h"
#include "log.h"
#include "logsink.h"
#include "loop.h"
#include "memtrim.h"
#include "metrics.h"
#include "podlabel.h"
#include "proxy.h"
#include "shards.h"
#include "state.h"

/* Everything main owns, so one function can release it all. */
struct daemon {
    struct ld_config cfg;
    int signal_fd;
    bool child_ready;
    struct ld_child child;
    int wake_fd; /* what ends the loop's waits: an epoll set of signal_fd,
                    the child's channel and the resign channel's eventfd */
    bool curl_ready;
    struct ld_kube *kube;
    struct ld_loop loop;
    struct ld_shards *shards; /* --shards: instead of loop */
    bool state_ready;
    struct ld_state state;
    struct ld_metrics metrics;
    struct ld_http *http;
    struct ld_proxy *proxy; /* --api-proxy; NULL when unset */
    bool podlabel_ready;
    struct ld_podlabel_hook podlabel;
    bool events_ready;
    struct ld_events_hook events;
};

/* --pod-label and --events calls: short enough to be retried well within
 * a renew deadline, long enough for a loaded API server. */
#define HOOK_CALL_TIMEOUT_MS 5000

/* SIGTERM and SIGINT are taken synchronously from a signalfd; blocking
 * them here, before any thread starts, makes every thread inherit that. */
static int block_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
        return -1;
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

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

static int start_client(struct daemon *d)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "leaderd: curl_global_init failed\n");
        return 1;
    }
    d->curl_ready = true;
    struct ld_errinfo err;
    d->kube = ld_kube_new(&d->cfg.kube, &err);
    if (!d->kube) {
        fprintf(stderr, "leaderd: %s\n", err.msg);
        return 2;
    }
    ld_kube_set_observer(d->kube, ld_metrics_observe_request, &d->metrics);
    return 0;
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

/* --shards: the group's host in place of the one Lease's loop; the group
 * is the state's before the HTTP server starts. */
static int start_shards(struct daemon *d)
{
    struct ld_shards_config sc = {
        .kube = d->kube,
        .state = &d->state,
        .metrics = &d->metrics,
        .signal_fd = d->signal_fd,
        .wake_fd = d->wake_fd,
        .namespace_ = d->cfg.namespace_,
        .group = d->cfg.lease_name,
        .identity = d->cfg.identity,
        .names = (const char *const *)d->cfg.shard_names,
        .n_shards = d->cfg.n_shards,
        .pod_uid = owner_uid(&d->cfg),
        .pod_name = d->cfg.pod_name,
        .lease_duration_ms = d->cfg.lease_duration_ms,
        .renew_deadline_ms = d->cfg.renew_deadline_ms,
        .retry_period_ms = d->cfg.retry_period_ms,
        .release_on_exit = d->cfg.release_on_exit,
        .seed = jitter_seed(d->cfg.identity),
        .events = d->cfg.events,
        .call_timeout_ms = HOOK_CALL_TIMEOUT_MS,
    };
    struct ld_errinfo err;
    d->shards = ld_shards_new(&sc, &err);
    if (!d->shards) {
        fprintf(stderr, "leaderd: %s\n", err.msg);
        return 2;
    }
    ld_state_set_group(&d->state, ld_shards_group(d->shards));
    return 0;
}

/* The election host with the one Lease; the configuration was checked by
 * ld_config_parse, the engine checks it once more. */
static int start_election(struct daemon *d)
{
    if (d->cfg.n_shards > 0)
        return start_shards(d);
    struct ld_election_config ec = {
        .namespace_ = d->cfg.namespace_,
        .name = d->cfg.lease_name,
        .identity = d->cfg.identity,
        .lease_duration_ms = d->cfg.lease_duration_ms,
        .renew_deadline_ms = d->cfg.renew_deadline_ms,
        .retry_period_ms = d->cfg.retry_period_ms,
        .release_on_exit = d->cfg.release_on_exit,
        .seed = jitter_seed(d->cfg.identity),
        .handover_cooldown_ms = d->cfg.resign_cooldown_ms,
    };
    struct ld_errinfo err;
    d->loop = (struct ld_loop){
        .kube = d->kube,
        .state = &d->state,
        .signal_fd = d->signal_fd,
        .wake_fd = d->wake_fd,
        .metrics = &d->metrics,
        .lease_duration_ms = d->cfg.lease_duration_ms,
        .renew_deadline_ms = d->cfg.renew_deadline_ms,
        .resign_cooldown_ms = d->cfg.resign_cooldown_ms,
    };
    if (ld_loop_start(&d->loop, &ec, &err) != LD_OK) {
        fprintf(stderr, "leaderd: %s\n", err.msg);
        return 2;
    }
    return 0;
}

/* The loop's waits end on a signal, the child's news and a POST /resign
 * alike (requests in flight go on: the host never cuts them short); an
 * epoll fd is readable when any fd in it is. */
static int make_wake_fd(struct daemon *d)
{
    d->wake_fd = epoll_create1(EPOLL_CLOEXEC);
    if (d->wake_fd < 0)
        return -1;
    int fds[3] = {d->signal_fd, ld_state_resign_fd(&d->state),
                  d->child_ready ? ld_child_fd(&d->child) : -1};
    for (int i = 0; i < 3 && fds[i] >= 0; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(d->wake_fd, EPOLL_CTL_ADD, fds[i], &ev) != 0)
            return -1;
    }
    return 0;
}

/* The state the loop publishes, the resign channel and the loop's wake
 * set, before the loop and the server that share them. */
static int start_state(struct daemon *d)
{
    char lease[512];
    snprintf(lease, sizeof(lease), "%s/%s", d->cfg.namespace_, d->cfg.lease_name);
    /* A loop pass is at most a request timeout plus a retry wait apart;
     * a heartbeat older than a lease duration plus a renew deadline means
     * the loop is wedged. */
    ld_state_init(&d->state, lease, d->cfg.identity,
                  d->cfg.lease_duration_ms + d->cfg.renew_deadline_ms);
    d->state_ready = true;
    /* A resignation's release is bounded by renew-deadline in the engine;
     * the request may also wait for a request in flight (half of that). */
    if (ld_state_resign_enable(&d->state, 2 * d->cfg.renew_deadline_ms) != 0 ||
        make_wake_fd(d) != 0) {
        fprintf(stderr, "leaderd: cannot set up the loop's wake-ups: %s\n",
                strerror(errno));
        return 1;
    }
    return 0;
}

static int start_http(struct daemon *d)
{
    raise_fd_limit();
    char err[256];
    d->http = ld_http_start(d->cfg.listen_host, d->cfg.listen_port, &d->state,
                            &d->metrics, err, sizeof(err));
    if (!d->http) {
        fprintf(stderr, "leaderd: %s\n", err);
        return 1;
    }
    return 0;
}

/* The API write gate, after the HTTP server: it reads the same state. */
static int start_proxy(struct daemon *d)
{
    char err[256];
    if (!d->cfg.api_proxy_host)
        return 0;
    d->proxy = ld_proxy_start(d->cfg.api_proxy_host, d->cfg.api_proxy_port, &d->cfg.kube,
                              &d->state, &d->metrics, NULL, err, sizeof(err));
    if (!d->proxy) {
        fprintf(stderr, "leaderd: %s\n", err);
        return 1;
    }
    ld_log(LD_LOG_INFO, "api proxy listening on %s%s%s:%d",
           strchr(d->cfg.api_proxy_host, ':') ? "[" : "", d->cfg.api_proxy_host,
           strchr(d->cfg.api_proxy_host, ':') ? "]" : "", ld_proxy_port(d->proxy));
    return 0;
}

/* Forked first, while the process has one thread: the supervisor is a copy
 * of it. */
static int start_child(struct daemon *d)
{
    char lease[512];
    snprintf(lease, sizeof(lease), "%s/%s", d->cfg.namespace_, d->cfg.lease_name);
    struct ld_supervisor_config sc = {
        .command = d->cfg.command,
        .lease = lease,
        .identity = d->cfg.identity,
        .grace_ms = d->cfg.child_grace_ms,
    };
    if (ld_child_init(&d->child, &sc) != 0) {
        fprintf(stderr, "leaderd: cannot start the command's supervisor: %s\n",
                strerror(errno));
        return 1;
    }
    d->child_ready = true;
    return 0;
}

/* The loop's hooks, in the order they see each publish. */
static size_t collect_hooks(struct daemon *d, struct ld_loop_hook *hooks)
{
    size_t n = 0;
    if (d->child_ready)
        hooks[n++] = (struct ld_loop_hook){.ctx = &d->child,
                                           .on_publish = ld_child_on_publish,
                                           .on_signal = ld_child_on_signal,
                                           .holds_release = ld_child_holds_release,
                                           .holds_resignation = true};
    if (d->cfg.pod_label) {
        ld_podlabel_hook_init(&d->podlabel, d->kube, d->cfg.namespace_, d->cfg.identity,
                              d->cfg.pod_label, &d->state, &d->metrics,
                              HOOK_CALL_TIMEOUT_MS);
        d->podlabel_ready = true;
        hooks[n++] = (struct ld_loop_hook){.ctx = &d->podlabel,
                                           .on_publish = ld_podlabel_on_publish,
                                           .next_wake_ms = ld_podlabel_next_wake,
                                           .holds_release = ld_podlabel_holds_release};
    }
    if (d->cfg.events) {
        ld_events_hook_init(&d->events, d->kube, d->cfg.namespace_, d->cfg.lease_name,
                            d->cfg.identity, &d->metrics, HOOK_CALL_TIMEOUT_MS);
        d->events_ready = true;
        hooks[n++] = (struct ld_loop_hook){.ctx = &d->events,
                                           .on_publish = ld_events_on_publish,
                                           .next_wake_ms = ld_events_next_wake,
                                           .holds_release = ld_events_holds_release};
    }
    return n;
}

static void teardown(struct daemon *d)
{
    if (d->podlabel_ready)
        ld_podlabel_hook_clear(&d->podlabel);
    if (d->events_ready)
        ld_events_hook_clear(&d->events);
    ld_proxy_stop(d->proxy);
    ld_http_stop(d->http);
    if (d->state_ready)
        ld_state_destroy(&d->state);
    ld_loop_clear(&d->loop);
    ld_shards_free(d->shards);
    ld_kube_free(d->kube);
    if (d->curl_ready)
        curl_global_cleanup();
    ld_metrics_destroy(&d->metrics);
    if (d->wake_fd >= 0)
        close(d->wake_fd);
    if (d->signal_fd >= 0)
        close(d->signal_fd);
    if (d->child_ready)
        ld_child_close(&d->child);
    ld_config_clear(&d->cfg);
}

int main(int argc, char **argv)
{
    struct daemon d;
    ld_memtrim_setup();
    memset(&d, 0, sizeof(d));
    d.signal_fd = -1;
    d.wake_fd = -1;
    ld_metrics_init(&d.metrics);

    char err[LD_CONFIG_ERR_LEN];
    int rc = ld_config_parse(&d.cfg, argc, argv, err, sizeof(err));
    if (rc != 0) {
        if (rc == 2)
            fprintf(stderr, "%s\n", err);
        teardown(&d);
        return rc == 1 ? 0 : 2;
    }

    char lease[512];
    snprintf(lease, sizeof(lease), "%s/%s", d.cfg.namespace_, d.cfg.lease_name);
    ld_logsink_install(d.cfg.log_format, d.cfg.log_level, lease, d.cfg.identity);

    if (d.cfg.command && start_child(&d) != 0) {
        teardown(&d);
        return 1;
    }
    d.signal_fd = block_signals();
    if (d.signal_fd < 0) {
        fprintf(stderr, "leaderd: cannot set up signal handling\n");
        teardown(&d);
        return 1;
    }
    rc = start_client(&d);
    if (rc == 0)
        rc = start_state(&d);
    if (rc == 0)
        rc = start_election(&d);
    if (rc == 0)
        rc = start_http(&d);
    if (rc == 0)
        rc = start_proxy(&d);
    if (rc == 0) {
        char desc[1024];
        ld_config_describe(&d.cfg, desc, sizeof(desc));
        ld_log(LD_LOG_INFO, "leaderd %s starting: %s, http port %d", LEADERD_VERSION,
               desc, ld_http_port(d.http));
        struct ld_loop_hook hooks[3];
        if (d.shards) {
            ld_shards_run(d.shards);
        } else {
            d.loop.n_hooks = collect_hooks(&d, hooks);
            d.loop.hooks = hooks;
            ld_loop_run(&d.loop);
        }
        if (d.child_ready)
            rc = ld_child_exit_status(&d.child);
        ld_log(LD_LOG_INFO, "leaderd stopped");
    }
    teardown(&d);
    return rc;
}
