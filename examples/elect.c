/*
 * elect KUBECONFIG NAMESPACE LEASE IDENTITY: one Lease election in-process on
 * the election host (one event loop, the Lease watched), at client-go's
 * default timings; a line per transition; SIGTERM or SIGINT releases the
 * Lease, then exit 0. More ld_host_add calls would run more Leases on the
 * same loop and connections.
 */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "host.h"

/* Runs inside ld_host_run, on this thread: events are copies, nothing borrowed. */
static void on_event(void *ctx, size_t index, const struct ld_event *ev)
{
    (void)ctx, (void)index;
    if (ev->kind == LD_EV_STARTED_LEADING)
        printf("started leading (term %d)\n", (int)ev->term);
    else if (ev->kind == LD_EV_NEW_LEADER)
        printf("new leader \"%s\" (term %d)\n", ev->leader, (int)ev->term);
    else if (ev->kind == LD_EV_STOPPED_LEADING)
        printf("stopped leading: %s (term %d)\n", ld_stop_reason_str(ev->reason),
               (int)ev->term);
}

int main(int argc, char **argv)
{
    if (argc != 5)
        return fprintf(stderr, "usage: elect KUBECONFIG NAMESPACE LEASE IDENTITY\n"), 2;
    /* Blocked before libcurl may start a thread; the fd ends the host's waits. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC), rc = 1;
    struct ld_election_config ec = {.namespace_ = argv[2],
                                    .name = argv[3],
                                    .identity = argv[4],
                                    .lease_duration_ms = 15000,
                                    .renew_deadline_ms = 10000,
                                    .retry_period_ms = 2000,
                                    .release_on_exit = true};
    struct ld_errinfo err = {.msg = "no signal fd"};
    struct ld_kube_config kc; /* ld_kube_new copies it */
    struct ld_kube *k = NULL;
    struct ld_host *h = NULL;
    struct ld_host_election_ops ops = {.on_event = on_event};
    size_t index;
    ec.seed = (uint64_t)getpid(); /* replicas jitter their retries differently */
    setvbuf(stdout, NULL, _IOLBF, 0);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    ld_kube_config_init(&kc);
    if (sfd < 0 || ld_kube_config_load_file(&kc, argv[1], &err) != LD_OK ||
        !(k = ld_kube_new(&kc, &err)))
        goto fail;
    struct ld_host_config hc = {.kube = k,
                                .namespace_ = argv[2],
                                .lease_duration_ms = ec.lease_duration_ms,
                                .renew_deadline_ms = ec.renew_deadline_ms};
    if (!(h = ld_host_new(&hc, &err)) || ld_host_add(h, &ec, &ops, &index, &err) != LD_OK)
        goto fail;
    while (!ld_host_done(h)) {
        struct signalfd_siginfo si;
        if (ld_host_run(h, 60000, sfd) == LD_ECANCELED &&
            read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            ld_host_shutdown(h); /* a no-op once shutting down */
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "elect: %s\n", err.msg);
out:
    ld_host_free(h);
    ld_kube_free(k);
    ld_kube_config_clear(&kc);
    if (sfd >= 0)
        close(sfd);
    curl_global_cleanup();
    return rc;
}
