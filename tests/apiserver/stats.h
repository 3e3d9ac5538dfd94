/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats: per-client request counters of leaderd-apiserver, by verb and by
 * outcome (an HTTP code, or "reset" / "disconnected" / "lost-reply" when no
 * answer was sent). Read and cleared through the control API. Beside them,
 * the requests a fault holds right now, so that a test can wait for a write
 * to be in the server instead of sleeping. Thread-safe.
 */
#ifndef AS_STATS_H
#define AS_STATS_H

#include <jansson.h>

#include "faults.h"

struct as_stats;

/* Returns a new, empty counter table (free with as_stats_free) or NULL. */
struct as_stats *as_stats_new(void);
void as_stats_free(struct as_stats *s); /* NULL-safe */

/* Counts one request of client (NULL: "anonymous") with outcome. */
void as_stats_count(struct as_stats *s, const char *client, enum as_verb verb,
                    const char *outcome);

/* {"client":{"verb":{"outcome":count}}}; new reference or NULL. */
json_t *as_stats_json(struct as_stats *s);

/* Clears the counters (not the held requests, which are still held). */
void as_stats_reset(struct as_stats *s);

/* One request of client starts (delta +1) or ends (-1) a hold of kind
 * ("partition": held unread, a pause or a "hang" partition; "latency": read
 * whole and delayed). */
void as_stats_hold(struct as_stats *s, const char *client, enum as_verb verb,
                   const char *kind, int delta);

/* {"client":{"verb":{"partition"|"latency":N}}} of the requests held now,
 * nonzero counts only; new reference or NULL. */
json_t *as_stats_held_json(struct as_stats *s);

#endif
