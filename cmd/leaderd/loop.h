/*
 * loop: the imperative shell around the election engine. Reads both clocks
 * once per pass, performs the engine's requests through the Kubernetes
 * client, publishes the state for the HTTP server, logs every leadership
 * change, keeps a watch on the Lease that feeds the engine between
 * requests, and turns SIGTERM/SIGINT (read from a signalfd) into an
 * orderly release.
 */
#ifndef LEADERD_LOOP_H
#define LEADERD_LOOP_H

#include "election.h"
#include "kube.h"
#include "metrics.h"
#include "state.h"

struct ld_loop {
    struct ld_election *election; /* borrowed */
    struct ld_kube *kube;         /* borrowed; its cancel fd is signal_fd */
    struct ld_state *state;       /* borrowed */
    int signal_fd;                /* signalfd for SIGTERM and SIGINT */
    const char *namespace_;       /* borrowed */
    const char *name;             /* borrowed */
    struct ld_metrics *metrics;   /* borrowed; may be NULL */
    int64_t lease_duration_ms;
    int64_t renew_deadline_ms;
};

/* Runs until the engine is done after a shutdown signal. Every failure on
 * the way (API errors, a lost watch, no memory for one pass) is logged and
 * retried, never a reason to stop: a sidecar that exits on its own hands
 * its app an unexplained restart instead of a standby. */
void ld_loop_run(struct ld_loop *loop);

#endif
