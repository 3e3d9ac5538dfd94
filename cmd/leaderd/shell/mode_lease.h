/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mode_lease: the shell's mode (shell.h) for the daemon's one Lease. Its
 * election is the shell's election 0; each publish becomes the snapshot the
 * HTTP server reads (state.h), with /healthz's text (health.h), and POST
 * /resign resigns it. The hooks that consume its leadership (the exec
 * child, the Pod label, Events) are bound to MODE_LEASE_ELECTION.
 */
#ifndef LEADERD_MODE_LEASE_H
#define LEADERD_MODE_LEASE_H

#include <stdint.h>

#include "election.h"
#include "metrics.h"
#include "shell.h"
#include "state.h"

/* The index of the Lease's election in the shell. */
#define LD_MODE_LEASE_ELECTION 0

/* The mode reads no clock of its own: the shell hands it the time. */
struct ld_mode_lease_config {
    struct ld_state *state;             /* borrowed: the snapshot */
    struct ld_metrics *metrics;         /* borrowed; may be NULL */
    struct ld_election_config election; /* its strings borrowed until attached */
};

struct ld_mode_lease {
    struct ld_mode_lease_config c;
};

/* Sets up m from cfg (copied); m must outlive the shell it is handed to. */
void ld_mode_lease_init(struct ld_mode_lease *m, const struct ld_mode_lease_config *cfg);

/* m as a mode for ld_shell_new. */
struct ld_shell_mode ld_mode_lease(struct ld_mode_lease *m);

#endif
