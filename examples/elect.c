/*
 * elect KUBECONFIG NAMESPACE LEASE IDENTITY: one Lease election in-process, polling
 * (no watch) at client-go's default timings; a line per transition; SIGTERM or
 * SIGINT releases the Lease, then exit 0. NOTE: a host API (many elections, one
 * event loop) is coming; this example will move to it.
 */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "election.h"
#include "kube.h"

static struct ld_now clocks(void)
{
    struct timespec m, w;
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &w);
    return (struct ld_now){(int64_t)m.tv_sec * 1000 + m.tv_nsec / 1000000,
                           (int64_t)w.tv_sec * 1000000 + w.tv_nsec / 1000};
}

int main(int argc, char **argv)
{
    if (argc != 5)
        return fprintf(stderr, "usage: elect KUBECONFIG NAMESPACE LEASE IDENTITY\n"), 2;
    /* Blocked before libcurl may start a thread; the fd also cancels a request. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC), rc = 1;
    /* namespace, name, identity; lease, renew, retry (ms); release on exit; seed */
    struct ld_election_config ec = {argv[2], argv[3], argv[4], 15000, 10000, 2000, 1, 0};
    struct ld_errinfo err = {.msg = "no signal fd"};
    struct ld_kube_config kc; /* ld_kube_new copies it */
    struct ld_kube *k = NULL;
    struct ld_election *e = NULL;
    ec.seed = (uint64_t)getpid(); /* replicas jitter their retries differently */
    setvbuf(stdout, NULL, _IOLBF, 0);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    ld_kube_config_init(&kc);
    if (sfd < 0 || ld_kube_config_load_file(&kc, argv[1], &err) != LD_OK ||
        !(k = ld_kube_new(&kc, &err)) || !(e = ld_election_new(&ec, &err))) {
        fprintf(stderr, "elect: %s\n", err.msg);
        goto out;
    }
    ld_kube_set_cancel_fd(k, sfd);
    for (;;) {
        struct ld_action act = ld_election_next(e, clocks());
        struct ld_event ev; /* a copy: nothing in it is borrowed */
        while (ld_election_take_event(e, &ev))
            if (ev.kind == LD_EV_STARTED_LEADING)
                printf("started leading (term %d)\n", (int)ev.term);
            else if (ev.kind == LD_EV_NEW_LEADER)
                printf("new leader \"%s\" (term %d)\n", ev.leader, (int)ev.term);
            else if (ev.kind == LD_EV_STOPPED_LEADING)
                printf("stopped leading: %s (term %d)\n", ld_stop_reason_str(ev.reason),
                       (int)ev.term);
        if (act.kind == LD_ACT_DONE)
            break;
        if (act.kind == LD_ACT_WAIT) {
            int64_t ms = act.wake_at_ms - clocks().mono_ms;
            poll(&(struct pollfd){.fd = sfd, .events = POLLIN}, 1,
                 ms < 0 ? 0 : (int)(ms < 60000 ? ms : 60000));
        } else {
            struct ld_lease out; /* ours: the engine copies what it keeps */
            ld_lease_init(&out);
            ld_errinfo_clear(&err);
            ld_kube_set_timeout_ms(k, act.timeout_ms);
            enum ld_err r = act.kind == LD_ACT_GET
                                ? ld_kube_lease_get(k, argv[2], argv[3], &out, &err)
                            : act.kind == LD_ACT_CREATE
                                ? ld_kube_lease_create(k, act.lease, &out, &err)
                                : ld_kube_lease_update(k, act.lease, &out, &err);
            ld_election_result(e, clocks(), r, r == LD_OK ? &out : NULL, &err);
            ld_lease_clear(&out);
        }
        struct signalfd_siginfo si; /* one per pass: a pending one would make poll spin */
        if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            ld_election_shutdown(e, clocks()); /* a no-op once shutting down */
    }
    rc = 0;
out:
    ld_election_free(e);
    ld_kube_free(k);
    ld_kube_config_clear(&kc);
    if (sfd >= 0)
        close(sfd);
    curl_global_cleanup();
    return rc;
}
