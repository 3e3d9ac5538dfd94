/* SPDX-License-Identifier: Apache-2.0 */
/*
 * elect KUBECONFIG NAMESPACE LEASE IDENTITY: one Lease election in-process on
 * the election host (one event loop, the Lease watched), at client-go's
 * default timings; a line per transition; SIGTERM or SIGINT releases the
 * Lease, then exit 0. More ld_host_add calls would run more Leases on the
 * same loop and connections.
 *
 * Built against the installed library alone: the public headers are
 * <leaderd/...>, and nothing else of the source tree is on the include path.
 */
#define _GNU_SOURCE /* getrandom */
#include <curl/curl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <leaderd/election.h>
#include <leaderd/err.h>
#include <leaderd/host.h>
#include <leaderd/kube.h>
#include <leaderd/kubeconfig.h>
#include <leaderd/lease.h>

/* This process's incarnation (docs/design/election.md): 128 random bits in
 * hex, so that a second process of the same identity (a restarted or a
 * duplicated Pod) never takes this one's records for its own. */
static char incarnation[LD_INCARNATION_HEX + 1];

static bool draw_incarnation(void)
{
    unsigned char raw[LD_INCARNATION_HEX / 2];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return false;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(incarnation + 2 * i, 3, "%02x", raw[i]);
    return true;
}

/* Runs inside ld_host_run, on this thread: events are copies, nothing borrowed. */
static void on_event(void *ctx, size_t index, const struct ld_event *ev)
{
    (void)ctx;
    (void)index;
    switch (ev->kind) {
    case LD_EV_STARTED_LEADING:
        printf("started leading (term %d)\n", (int)ev->term);
        break;
    case LD_EV_NEW_LEADER:
        printf("new leader \"%s\" (term %d)\n", ev->leader, (int)ev->term);
        break;
    case LD_EV_STOPPED_LEADING:
        printf("stopped leading: %s (term %d)\n", ld_stop_reason_str(ev->reason),
               (int)ev->term);
        break;
    default:
        break;
    }
}

/* Blocks SIGTERM and SIGINT and returns a descriptor that becomes readable
 * when one arrives (-1 on failure). Called before libcurl may start a
 * thread, so no thread of the process takes them the default way. */
static int signal_fd(void)
{
    sigset_t sigs;

    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0)
        return -1;
    return signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* Runs the host until its elections are done: the first signal asks for a
 * shutdown (every Lease held is released), later ones are ignored. */
static void run(struct ld_host *h, int sfd)
{
    struct signalfd_siginfo si;

    while (!ld_host_done(h)) {
        if (ld_host_run(h, 60000, sfd) != LD_ECANCELED)
            continue;
        if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            ld_host_shutdown(h);
    }
}

/* A host on k running one election of lease for identity in namespace_, at
 * client-go's default timings. Returns it (free with ld_host_free), or NULL
 * with err set. */
static struct ld_host *start(struct ld_kube *k, const char *namespace_, const char *lease,
                             const char *identity, struct ld_errinfo *err)
{
    struct ld_election_config ec = {
        .namespace_ = namespace_,
        .name = lease,
        .identity = identity,
        .incarnation = incarnation,
        .lease_duration_ms = 15000,
        .renew_deadline_ms = 10000,
        .retry_period_ms = 2000,
        .release_on_exit = true,
        /* Replicas jitter their retries differently. */
        .seed = (uint64_t)getpid(),
    };
    struct ld_host_config hc = {
        .kube = k,
        .namespace_ = namespace_,
        .lease_duration_ms = ec.lease_duration_ms,
        .renew_deadline_ms = ec.renew_deadline_ms,
    };
    struct ld_host_election_ops ops = {.on_event = on_event};
    struct ld_host *h;
    size_t index;

    h = ld_host_new(&hc, err);
    if (!h)
        return NULL;
    if (ld_host_add(h, &ec, &ops, &index, err) != LD_OK) {
        ld_host_free(h);
        return NULL;
    }
    return h;
}

int main(int argc, char **argv)
{
    struct ld_errinfo err;
    struct ld_kube_config kc;
    struct ld_kube *k = NULL;
    struct ld_host *h = NULL;
    int sfd;
    int rc = 1;

    if (argc != 5) {
        fprintf(stderr, "usage: elect KUBECONFIG NAMESPACE LEASE IDENTITY\n");
        return 2;
    }
    if (!draw_incarnation()) {
        perror("elect: getrandom");
        return 1;
    }
    sfd = signal_fd();
    if (sfd < 0) {
        perror("elect: signalfd");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    ld_errinfo_clear(&err);
    ld_kube_config_init(&kc);

    if (ld_kube_config_load_file(&kc, argv[1], &err) != LD_OK)
        goto out;
    /* ld_kube_new copies the configuration. */
    k = ld_kube_new(&kc, &err);
    if (!k)
        goto out;
    h = start(k, argv[2], argv[3], argv[4], &err);
    if (!h)
        goto out;
    run(h, sfd);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "elect: %s\n", err.msg);
    ld_host_free(h);
    ld_kube_free(k);
    ld_kube_config_clear(&kc);
    close(sfd);
    curl_global_cleanup();
    return rc;
}
