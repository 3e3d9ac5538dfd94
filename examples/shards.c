/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shards KUBECONFIG NAMESPACE GROUP IDENTITY N: this process as a member of
 * the shard group GROUP of N numbered shards, on the library alone: the
 * shard host (one member Lease renewed, the group's Leases watched) shares
 * the shards out among the live members, and prints a line whenever a shard
 * is claimed here or stops being so. SIGTERM or SIGINT gives every shard
 * back and removes the member Lease, then exit 0. Timings are client-go's
 * defaults; a shard given back is released after a drain of one retry
 * period (an app would end its work on the shard meanwhile).
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
#include <stdlib.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <leaderd/clock.h>
#include <leaderd/err.h>
#include <leaderd/host.h>
#include <leaderd/kube.h>
#include <leaderd/kubeconfig.h>
#include <leaderd/lease.h>
#include <leaderd/shardgroup.h>
#include <leaderd/shardhost.h>

#define MAX_SHARDS 1024

/* This process's incarnation (docs/design/election.md): a second process of
 * the same identity never takes this one's records for its own. */
static char incarnation[LD_INCARNATION_HEX + 1];

/* What the last publish showed claimed, to print only the changes. */
struct member {
    struct ld_shardhost *sh;
    struct ld_clock clock;
    bool claimed[MAX_SHARDS];
};

static bool draw_incarnation(void)
{
    unsigned char raw[LD_INCARNATION_HEX / 2];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return false;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(incarnation + 2 * i, 3, "%02x", raw[i]);
    return true;
}

/* The shard host's publish (ops.publish): the claims as they are now. An
 * app would start or stop its work on each shard here; the claim holds
 * only until ld_shardgroup_lead_until, so it would check that too. */
static void publish(void *ctx, int64_t now_ms)
{
    struct member *m = ctx;
    const struct ld_shardgroup *g = ld_shardhost_group(m->sh);
    (void)now_ms;
    for (uint32_t k = 0; k < ld_shardhost_count(m->sh); k++) {
        /* Judged on the clock of the moment, as an app's check would be. */
        bool claimed = ld_shardgroup_claimed(g, k, ld_clock_mono_ms(&m->clock));
        if (claimed != m->claimed[k])
            printf("%s shard %s\n", claimed ? "claimed" : "gave back",
                   ld_shardgroup_shard_id(g, k));
        m->claimed[k] = claimed;
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

/* Runs the host until the member election is done: the first signal gives
 * the shards back (the shard host first, then the host), later ones are
 * ignored; then the releases and the member Lease's removal. */
static void run(struct ld_host *h, struct ld_shardhost *sh, int sfd)
{
    struct signalfd_siginfo si;

    while (!ld_host_done(h)) {
        if (ld_host_run(h, 60000, sfd) != LD_ECANCELED)
            continue;
        if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            ld_shardhost_shutdown(sh);
            ld_host_shutdown(h);
        }
    }
    ld_shardhost_finish(sh, -1);
}

/* The shard host of m for identity in group (n shards), and the host it
 * runs on with the member election added. Returns the host (free with
 * ld_host_free, before m->sh), or NULL with err set. */
static struct ld_host *start(struct member *m, struct ld_kube *k, char **argv, uint32_t n,
                             struct ld_errinfo *err)
{
    struct ld_shardhost_config sc = {
        .kube = k,
        .namespace_ = argv[2],
        .group = argv[3],
        .identity = argv[4],
        .incarnation = incarnation,
        .n_shards = n,
        .lease_duration_ms = 15000,
        .renew_deadline_ms = 10000,
        .retry_period_ms = 2000,
        .release_on_exit = true,
        .drain_ms = 2000,
        /* Replicas jitter their retries differently. */
        .seed = (uint64_t)getpid(),
        .call_timeout_ms = 10000,
        .ops = {.ctx = m, .publish = publish},
    };
    struct ld_election_config ec;
    struct ld_host *h;
    size_t index;

    m->sh = ld_shardhost_new(&sc, err);
    if (!m->sh)
        return NULL;
    struct ld_host_observer obs = ld_shardhost_observer(m->sh);
    struct ld_host_election_ops ops = ld_shardhost_member_ops(m->sh);
    struct ld_host_config hc = {
        .kube = k,
        .namespace_ = sc.namespace_,
        .label_selector = ld_shardhost_selector(m->sh),
        .lease_duration_ms = sc.lease_duration_ms,
        .renew_deadline_ms = sc.renew_deadline_ms,
        .log_names = true,
        .observer = &obs,
    };
    h = ld_host_new(&hc, err);
    if (!h)
        return NULL;
    ld_shardhost_member_config(m->sh, &ec);
    if (ld_host_add(h, &ec, &ops, &index, err) != LD_OK) {
        ld_host_free(h);
        return NULL;
    }
    ld_shardhost_attach(m->sh, h, index);
    return h;
}

int main(int argc, char **argv)
{
    struct ld_errinfo err;
    struct ld_kube_config kc;
    struct ld_kube *k = NULL;
    struct ld_host *h = NULL;
    static struct member m;
    char *end;
    int sfd;
    int rc = 1;

    unsigned long n = argc == 6 ? strtoul(argv[5], &end, 10) : 0;
    if (argc != 6 || *end || n == 0 || n > MAX_SHARDS) {
        fprintf(stderr, "usage: shards KUBECONFIG NAMESPACE GROUP IDENTITY N (1..%d)\n",
                MAX_SHARDS);
        return 2;
    }
    if (!draw_incarnation()) {
        perror("shards: getrandom");
        return 1;
    }
    sfd = signal_fd();
    if (sfd < 0) {
        perror("shards: signalfd");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    ld_errinfo_clear(&err);
    ld_kube_config_init(&kc);
    m.clock = ld_clock_or_real(NULL);

    if (ld_kube_config_load_file(&kc, argv[1], &err) != LD_OK)
        goto out;
    /* ld_kube_new copies the configuration. */
    k = ld_kube_new(&kc, &err);
    if (!k)
        goto out;
    h = start(&m, k, argv, (uint32_t)n, &err);
    if (!h)
        goto out;
    run(h, m.sh, sfd);
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "shards: %s\n", err.msg);
    ld_host_free(h);
    ld_shardhost_free(m.sh);
    ld_kube_free(k);
    ld_kube_config_clear(&kc);
    close(sfd);
    curl_global_cleanup();
    return rc;
}
