/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health: the rule /healthz applies to an election's API calls, shared by
 * both of the shell's modes (mode_lease.h, mode_shards.h): credentials
 * refused for longer than a renew deadline, or another process using this
 * replica's identity, make the replica unhealthy.
 */
#ifndef LEADERD_HEALTH_H
#define LEADERD_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "host.h"

/* What /healthz should say about the election published as v at now_ms, or
 * "" when all is well, into out (len > 0). */
void ld_health_describe(const struct ld_host_view *v, int64_t renew_deadline_ms,
                        int64_t now_ms, char *out, size_t len);

#endif
