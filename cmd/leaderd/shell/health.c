/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health: an election's health text (see health.h).
 */
#include "health.h"

#include <stdio.h>

void ld_health_describe(const struct ld_host_view *v, int64_t renew_deadline_ms,
                        int64_t now_ms, char *out, size_t len)
{
    out[0] = '\0';
    int64_t failing = v->auth_failing_since_ms ? now_ms - v->auth_failing_since_ms : 0;
    if (failing > renew_deadline_ms)
        snprintf(out, len,
                 "the API server has rejected our credentials for %lld s (HTTP %ld %s)",
                 (long long)(failing / 1000), v->last_err->http_status,
                 v->last_err->reason[0] ? v->last_err->reason : "");
    else if (v->status.quarantined)
        snprintf(out, len, "another process uses this replica's identity");
}
