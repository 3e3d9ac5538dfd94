/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lead: the one statement of when a replica may act as the leader.
 *
 * An engine that leads keeps a renew deadline (lead_until_ms, monotonic):
 * the moment after which another replica may have taken the Lease without
 * this one having seen it. Everything that acts on leadership (the HTTP
 * answers, the write gate, the exec child, the Pod label, Events, the
 * shard table) asks this one predicate with its own reading of the clock,
 * so a stale published state stops counting as leadership at the deadline
 * even when nobody has published since.
 */
#ifndef LEADERD_LEAD_H
#define LEADERD_LEAD_H

#include <stdbool.h>
#include <stdint.h>

static inline bool ld_leads_at(bool leading, int64_t lead_until_ms, int64_t now_ms)
{
    return leading && now_ms < lead_until_ms;
}

#endif
