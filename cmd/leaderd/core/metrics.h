/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics: counters for the Kubernetes API requests leaderd makes, and the
 * Prometheus text exposition (format 0.0.4) of those plus the election
 * state taken from a struct ld_snapshot. The daemon's consumers (the exec
 * child, --pod-label, --events, --api-proxy) count their own news here.
 * Thread-safe: one mutex.
 */
#ifndef LEADERD_METRICS_H
#define LEADERD_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

/* Upper bounds of the request-duration histogram, in seconds (+Inf is
 * implied). */
#define LD_METRICS_BUCKETS 11
/* Distinct {verb,code} pairs kept; later new pairs count as code="other". */
#define LD_METRICS_MAX_SERIES 64
/* Largest exposition rendered; ld_metrics_render fails past it. */
#define LD_METRICS_MAX_TEXT (256 * 1024)

struct ld_metrics_series {
    int verb;  /* index into the fixed verb list */
    long code; /* HTTP status, 0 = no answer ("error"), -1 = "other" */
    uint64_t count;
};

/* The API write gate (--api-proxy): answers by {verb (the HTTP method),
 * code}, bounded like the API series. */
#define LD_METRICS_PROXY_SERIES 64
struct ld_metrics_proxy {
    struct ld_metrics_series series[LD_METRICS_PROXY_SERIES];
    size_t nseries;
    uint64_t refused; /* writes refused: this replica did not lead */
    uint64_t aborted; /* writes cut in flight when leadership ended */
};

/* Why the command of `leaderd -- CMD` ended (leaderd_child_exits_total's
 * reason label). */
enum ld_metrics_child_exit {
    LD_METRICS_CHILD_EXITED = 0, /* it exited by itself */
    LD_METRICS_CHILD_SIGNALED,   /* a signal ended it, not leadership's end */
    LD_METRICS_CHILD_DEADLINE,   /* the supervisor ended it: leadership was over */
    LD_METRICS_CHILD_EXIT_REASONS,
};

/* The exec child: rendered only once a command is configured. */
struct ld_metrics_child {
    bool configured;
    uint64_t starts;
    uint64_t exits[LD_METRICS_CHILD_EXIT_REASONS];
};

struct ld_metrics {
    pthread_mutex_t mu;
    struct ld_metrics_series series[LD_METRICS_MAX_SERIES];
    size_t nseries;
    uint64_t bucket[LD_METRICS_BUCKETS]; /* per bucket, not cumulative */
    uint64_t count;
    double sum;
    uint64_t watch_restarts;                     /* watch streams (re)started */
    uint64_t watch_events;                       /* watch events received */
    uint64_t acquire_bucket[LD_METRICS_BUCKETS]; /* free-seen -> acquired delays */
    uint64_t acquire_count;
    double acquire_sum;
    uint64_t pod_label_failures;   /* failed --pod-label API calls */
    uint64_t events_failures;      /* failed --events API calls */
    uint64_t resigned_request;     /* stepped down on POST /resign */
    uint64_t resigned_preferred;   /* stepped down for spec.preferredHolder */
    struct ld_metrics_proxy proxy; /* --api-proxy */
    struct ld_metrics_child child; /* -- CMD */
};

void ld_metrics_init(struct ld_metrics *m);
void ld_metrics_destroy(struct ld_metrics *m);

/* Counts one API request. verb is "GET", "POST", "PUT", "PATCH", "DELETE",
 * "WATCH" or "LIST" (anything else counts as "OTHER"); http_status is the
 * answer's status, or 0 when none arrived (connect, TLS or timeout
 * failure), rendered as code="error"; statuses outside 100..599 count as
 * "error" too. seconds < 0 or NaN counts as 0. Has the ld_kube_observer_fn
 * signature (include/leaderd/kube.h): pass it with the struct ld_metrics as ctx.
 * Thread-safe. */
void ld_metrics_observe_request(void *m, const char *verb, long http_status,
                                double seconds);

/* Watch bookkeeping, from the election loop. Thread-safe. */
void ld_metrics_watch_started(struct ld_metrics *m);
void ld_metrics_watch_event(struct ld_metrics *m);

/* Records the time from first observing the Lease free (released or
 * expired) to holding it. Thread-safe. */
void ld_metrics_acquire_delay(struct ld_metrics *m, double seconds);

/* One failed API call of --pod-label / --events. Thread-safe. */
void ld_metrics_pod_label_failure(struct ld_metrics *m);
void ld_metrics_events_failure(struct ld_metrics *m);
/* Counts one resignation: on request (POST /resign) or, with
 * on_request false, for a spec.preferredHolder naming someone else.
 * Thread-safe. */
void ld_metrics_resigned(struct ld_metrics *m, bool on_request);

/* --api-proxy: one answer to method (GET, HEAD, OPTIONS, POST, PUT, PATCH,
 * DELETE; anything else counts as OTHER) with HTTP status code; one write
 * refused because this replica did not lead; one write cut in flight.
 * m may be NULL (nothing counted). Thread-safe. */
void ld_metrics_proxy_request(struct ld_metrics *m, const char *method, long code);
void ld_metrics_proxy_refused(struct ld_metrics *m);
void ld_metrics_proxy_aborted(struct ld_metrics *m);

/* The exec child (-- CMD): a command is configured, so its metrics are
 * rendered from now on (at 0 until counted); one start of the command; one
 * end of it, for reason. m may be NULL (nothing counted). Thread-safe. */
void ld_metrics_child_configured(struct ld_metrics *m);
void ld_metrics_child_started(struct ld_metrics *m);
void ld_metrics_child_exited(struct ld_metrics *m, enum ld_metrics_child_exit reason);

/* Renders every metric, with # HELP and # TYPE, into a new buffer (*out,
 * free with free(), NUL-terminated; *len excludes the NUL). Election
 * metrics come from snap as of now_ms (monotonic): leadership is judged
 * with ld_snapshot_is_leader. Returns 0, or -1 on allocation failure or
 * when the text would exceed LD_METRICS_MAX_TEXT (*out NULL then).
 * Thread-safe. */
int ld_metrics_render(struct ld_metrics *m, const struct ld_snapshot *snap,
                      int64_t now_ms, char **out, size_t *len);

/* ld_metrics_render in shard mode (l non-NULL; borrowed): instead of the single
 * leader_election_master_status, one per shard Lease (name="NAME-ID", 1 iff t says we
 * lead it at now_ms), then leaderd_shards_owned and leaderd_shard_members from t (NULL:
 * nothing published yet, every shard 0). With l NULL it is ld_metrics_render. 1024 shards
 * with the longest names take under 200 KiB, inside LD_METRICS_MAX_TEXT. Thread-safe. */
int ld_metrics_render_shards(struct ld_metrics *m, const struct ld_snapshot *snap,
                             const struct ld_shardlayout *l, const struct ld_shardsnap *t,
                             int64_t now_ms, char **out, size_t *len);

#endif
