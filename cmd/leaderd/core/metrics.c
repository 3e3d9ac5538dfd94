/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics: API request counters and the Prometheus text exposition.
 */
#include "metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

#ifndef LEADERD_VERSION
#define LEADERD_VERSION "0.0.0-dev"
#endif

static const char *const verbs[] = {"GET",    "POST",  "PUT",  "PATCH",
                                    "DELETE", "WATCH", "LIST", "OTHER"};
#define NVERBS (sizeof(verbs) / sizeof(verbs[0]))
#define CODE_ERROR 0
#define CODE_OTHER (-1)

/* Same bounds as the client-go request latency histogram, written as the
 * le label shows them. */
static const double bucket_le[LD_METRICS_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                     0.5,   1,    2.5,   5,    10};
static const char *const bucket_text[LD_METRICS_BUCKETS] = {
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10"};

void ld_metrics_init(struct ld_metrics *m)
{
    memset(m, 0, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
}

void ld_metrics_destroy(struct ld_metrics *m)
{
    pthread_mutex_destroy(&m->mu);
}

static int verb_index(const char *verb)
{
    for (size_t i = 0; i + 1 < NVERBS; i++) {
        if (verb && strcmp(verb, verbs[i]) == 0)
            return (int)i;
    }
    return (int)NVERBS - 1;
}

static struct ld_metrics_series *find_series(struct ld_metrics_series *tab, size_t n,
                                             int verb, long code)
{
    for (size_t i = 0; i < n; i++) {
        if (tab[i].verb == verb && tab[i].code == code)
            return &tab[i];
    }
    return NULL;
}

/* Counts one (verb, code) in a table of cap series (*n in use). The last
 * nverbs slots are kept for the per-verb "other" series, so the table stays
 * bounded whatever statuses a server invents. Under the metrics' mutex. */
static void count_series(struct ld_metrics_series *tab, size_t *n, size_t cap,
                         size_t nverbs, int verb, long code)
{
    struct ld_metrics_series *s = find_series(tab, *n, verb, code);
    if (!s && *n >= cap - nverbs) {
        code = CODE_OTHER;
        s = find_series(tab, *n, verb, code);
    }
    if (!s) {
        s = &tab[(*n)++];
        s->verb = verb;
        s->code = code;
        s->count = 0;
    }
    s->count++;
}

static void observe_bucket(uint64_t *buckets, double seconds)
{
    for (size_t i = 0; i < LD_METRICS_BUCKETS; i++) {
        if (seconds <= bucket_le[i]) {
            buckets[i]++;
            return;
        }
    }
}

void ld_metrics_observe_request(void *m, const char *verb, long http_status,
                                double seconds)
{
    struct ld_metrics *metrics = m;
    int v = verb_index(verb);
    long code = http_status >= 100 && http_status <= 599 ? http_status : CODE_ERROR;
    if (!(seconds >= 0)) /* negative or NaN */
        seconds = 0;
    pthread_mutex_lock(&metrics->mu);
    count_series(metrics->series, &metrics->nseries, LD_METRICS_MAX_SERIES, NVERBS, v,
                 code);
    /* A watch lasts minutes by design; its length is not a latency. */
    if (strcmp(verbs[v], "WATCH") != 0) {
        observe_bucket(metrics->bucket, seconds);
        metrics->count++;
        metrics->sum += seconds;
    }
    pthread_mutex_unlock(&metrics->mu);
}

/* Label value escaping per the text format: backslash, quote, newline. */
static void put_label(struct ld_buf *b, const char *s)
{
    for (; *s && !b->err; s++) {
        if (*s == '\\')
            ld_buf_printf(b, "\\\\");
        else if (*s == '"')
            ld_buf_printf(b, "\\\"");
        else if (*s == '\n')
            ld_buf_printf(b, "\\n");
        else
            ld_buf_append(b, s, 1);
    }
}

/* Shortest text that reads back as the same double, as Go's Prometheus
 * client writes floats. */
static void put_float(struct ld_buf *b, double v)
{
    char s[40];
    if (isnan(v)) {
        ld_buf_printf(b, "NaN");
        return;
    }
    if (isinf(v)) {
        ld_buf_printf(b, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof(s), "%.*g", prec, v);
        if (strtod(s, NULL) == v)
            break;
    }
    ld_buf_printf(b, "%s", s);
}

static void header(struct ld_buf *b, const char *name, const char *type, const char *help)
{
    ld_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void master_status(struct ld_buf *b, const char *name, bool leader)
{
    ld_buf_printf(b, "leader_election_master_status{name=\"");
    put_label(b, name);
    ld_buf_printf(b, "\"} %d\n", leader ? 1 : 0);
}

/* Shard mode: one master status per shard Lease instead of the group's,
 * then how many shards are ours and how many members are live. */
static void render_group(struct ld_buf *b, const struct ld_shardlayout *l,
                         const struct ld_shardsnap *t, int64_t now_ms)
{
    uint32_t owned = 0;
    header(b, "leader_election_master_status", "gauge",
           "1 while this replica leads the lease, else 0; name is the lease name "
           "(as client-go controllers expose it), one per shard Lease.");
    for (uint32_t s = 0; s < l->n_shards; s++) {
        bool leader = ld_shardsnap_leads(t, s, now_ms);
        owned += leader ? 1 : 0;
        master_status(b, l->shards[s].lease, leader);
    }
    header(b, "leaderd_shards_owned", "gauge",
           "Shards of the group this replica leads now.");
    ld_buf_printf(b, "leaderd_shards_owned %u\n", (unsigned)owned);
    header(b, "leaderd_shard_members", "gauge",
           "Live members of the shard group as this replica sees them (itself "
           "included while its member Lease is held).");
    ld_buf_printf(b, "leaderd_shard_members %u\n", (unsigned)(t ? t->n_members : 0));
    uint32_t unwritable = 0, skipped = 0;
    for (uint32_t s = 0; t && s < t->n_shards && s < l->n_shards; s++) {
        unwritable += t->shards[s].unwritable;
        skipped += t->shards[s].skipped;
    }
    header(b, "leaderd_shards_unwritable", "gauge",
           "Shards this replica could not write (its takes refused for a lease "
           "duration): the group gives them to other members for a while.");
    ld_buf_printf(b, "leaderd_shards_unwritable %u\n", (unsigned)unwritable);
    header(b, "leaderd_shard_unwritable", "gauge",
           "1 for each shard Lease this replica could not write (name is the lease "
           "name); absent for the others.");
    for (uint32_t s = 0; unwritable && s < t->n_shards && s < l->n_shards; s++) {
        if (!t->shards[s].unwritable)
            continue;
        ld_buf_printf(b, "leaderd_shard_unwritable{name=\"");
        put_label(b, l->shards[s].lease);
        ld_buf_printf(b, "\"} 1\n");
    }
    header(b, "leaderd_shards_skipped", "gauge",
           "Shards no live member can write, assigned to nobody until one can.");
    ld_buf_printf(b, "leaderd_shards_skipped %u\n", (unsigned)skipped);
}

static void render_election(struct ld_buf *b, const struct ld_snapshot *snap,
                            const struct ld_shardlayout *l, const struct ld_shardsnap *t,
                            int64_t now_ms)
{
    bool leader = ld_snapshot_is_leader(snap, now_ms);
    const char *slash = strrchr(snap->lease, '/');
    const char *name = slash ? slash + 1 : snap->lease;

    if (l) {
        render_group(b, l, t, now_ms);
    } else {
        header(b, "leader_election_master_status", "gauge",
               "1 while this replica leads the lease, else 0; name is the lease name "
               "(as client-go controllers expose it).");
        master_status(b, name, leader);
    }

    header(b, "leaderd_leader_transitions_total", "counter",
           "Leadership changes this replica has observed.");
    ld_buf_printf(b, "leaderd_leader_transitions_total %lld\n",
                  (long long)snap->transitions_seen);

    header(b, "leaderd_last_renew_timestamp_seconds", "gauge",
           "Wall time of this replica's last successful renewal (Unix seconds), 0 if "
           "never.");
    int64_t us = snap->last_renew_wall_us > 0 ? snap->last_renew_wall_us : 0;
    for (uint32_t i = 0; l && t && i < t->n_shards; i++) {
        if (t->shards[i].last_renew_wall_us > us)
            us = t->shards[i].last_renew_wall_us; /* the latest of any shard */
    }
    ld_buf_printf(b, "leaderd_last_renew_timestamp_seconds %lld.%06lld\n",
                  (long long)(us / 1000000), (long long)(us % 1000000));
    /* One Lease's leadership and term; a shard group has its per-shard
     * lines instead. */
    if (!l) {
        header(b, "leaderd_is_leader", "gauge",
               "1 while this replica leads (same as leader_election_master_status).");
        ld_buf_printf(b, "leaderd_is_leader %d\n", leader ? 1 : 0);
        header(b, "leaderd_term", "gauge",
               "leaseTransitions of the observed lease record (the fencing term).");
        ld_buf_printf(b, "leaderd_term %lld\n", (long long)snap->term);
    }

    header(b, "leaderd_observed", "gauge",
           "1 once the lease (or its absence) has been observed, else 0.");
    ld_buf_printf(b, "leaderd_observed %d\n", snap->observed ? 1 : 0);
}

void ld_metrics_watch_started(struct ld_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->watch_restarts++;
    pthread_mutex_unlock(&m->mu);
}

void ld_metrics_watch_event(struct ld_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->watch_events++;
    pthread_mutex_unlock(&m->mu);
}

void ld_metrics_acquire_delay(struct ld_metrics *m, double seconds)
{
    if (!(seconds >= 0))
        seconds = 0;
    pthread_mutex_lock(&m->mu);
    observe_bucket(m->acquire_bucket, seconds);
    m->acquire_count++;
    m->acquire_sum += seconds;
    pthread_mutex_unlock(&m->mu);
}

void ld_metrics_pod_label_failure(struct ld_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->pod_label_failures++;
    pthread_mutex_unlock(&m->mu);
}

void ld_metrics_events_failure(struct ld_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->events_failures++;
    pthread_mutex_unlock(&m->mu);
}

void ld_metrics_resigned(struct ld_metrics *m, bool on_request)
{
    pthread_mutex_lock(&m->mu);
    if (on_request)
        m->resigned_request++;
    else
        m->resigned_preferred++;
    pthread_mutex_unlock(&m->mu);
}

static void render_histogram(struct ld_buf *b, const char *name, const uint64_t *buckets,
                             uint64_t count, double sum)
{
    uint64_t cum = 0;
    for (size_t i = 0; i < LD_METRICS_BUCKETS; i++) {
        cum += buckets[i];
        ld_buf_printf(b, "%s_bucket{le=\"%s\"} %llu\n", name, bucket_text[i],
                      (unsigned long long)cum);
    }
    ld_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)count);
    ld_buf_printf(b, "%s_sum ", name);
    put_float(b, sum);
    ld_buf_printf(b, "\n%s_count %llu\n", name, (unsigned long long)count);
}

static void render_watch(struct ld_buf *b, struct ld_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    header(b, "leaderd_watch_restarts_total", "counter",
           "Watch streams on the Lease started (first start included).");
    ld_buf_printf(b, "leaderd_watch_restarts_total %llu\n",
                  (unsigned long long)m->watch_restarts);
    header(b, "leaderd_watch_events_total", "counter",
           "Watch events received on the Lease (bookmarks included).");
    ld_buf_printf(b, "leaderd_watch_events_total %llu\n",
                  (unsigned long long)m->watch_events);
    header(b, "leaderd_acquire_delay_seconds", "histogram",
           "Time from first observing the Lease free or expired to holding it.");
    render_histogram(b, "leaderd_acquire_delay_seconds", m->acquire_bucket,
                     m->acquire_count, m->acquire_sum);
    header(b, "leaderd_pod_label_failures_total", "counter",
           "Failed API calls of --pod-label (Pod list or label patch); retried with "
           "backoff, never affecting the election.");
    ld_buf_printf(b, "leaderd_pod_label_failures_total %llu\n",
                  (unsigned long long)m->pod_label_failures);
    header(b, "leaderd_events_failures_total", "counter",
           "Failed API calls of --events (Event create); retried with backoff, never "
           "affecting the election.");
    ld_buf_printf(b, "leaderd_events_failures_total %llu\n",
                  (unsigned long long)m->events_failures);
    header(b, "leaderd_resignations_total", "counter",
           "Times this replica stepped down and released the Lease on request "
           "(reason=\"request\": POST /resign; reason=\"preferred_holder\": the "
           "Lease's spec.preferredHolder named another identity).");
    ld_buf_printf(b, "leaderd_resignations_total{reason=\"request\"} %llu\n",
                  (unsigned long long)m->resigned_request);
    ld_buf_printf(b, "leaderd_resignations_total{reason=\"preferred_holder\"} %llu\n",
                  (unsigned long long)m->resigned_preferred);
    pthread_mutex_unlock(&m->mu);
}

/* One counter line per (verb, code) series of name. */
static void render_series(struct ld_buf *b, const char *name,
                          const char *const *verb_names,
                          const struct ld_metrics_series *series, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct ld_metrics_series *s = &series[i];
        ld_buf_printf(b, "%s{verb=\"%s\",code=\"", name, verb_names[s->verb]);
        if (s->code == CODE_ERROR)
            ld_buf_printf(b, "error");
        else if (s->code == CODE_OTHER)
            ld_buf_printf(b, "other");
        else
            ld_buf_printf(b, "%ld", s->code);
        ld_buf_printf(b, "\"} %llu\n", (unsigned long long)s->count);
    }
}

static void render_api(struct ld_buf *b, struct ld_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    header(b, "leaderd_api_requests_total", "counter",
           "Requests made to the Kubernetes API, by verb and HTTP status code "
           "(code=\"error\" when no answer arrived).");
    render_series(b, "leaderd_api_requests_total", verbs, m->series, m->nseries);

    header(b, "leaderd_api_request_duration_seconds", "histogram",
           "Latency of requests made to the Kubernetes API (watch streams excluded).");
    render_histogram(b, "leaderd_api_request_duration_seconds", m->bucket, m->count,
                     m->sum);
    pthread_mutex_unlock(&m->mu);
}

/* ---- --api-proxy ---- */

static const char *const proxy_verbs[] = {"GET", "HEAD",  "OPTIONS", "POST",
                                          "PUT", "PATCH", "DELETE",  "OTHER"};
#define PROXY_NVERBS (sizeof(proxy_verbs) / sizeof(proxy_verbs[0]))

void ld_metrics_proxy_request(struct ld_metrics *m, const char *method, long code)
{
    if (!m)
        return;
    int v = (int)PROXY_NVERBS - 1;
    for (size_t i = 0; i + 1 < PROXY_NVERBS; i++)
        if (method && strcmp(method, proxy_verbs[i]) == 0)
            v = (int)i;
    if (code < 100 || code > 599)
        code = CODE_ERROR;
    pthread_mutex_lock(&m->mu);
    struct ld_metrics_proxy *p = &m->proxy;
    count_series(p->series, &p->nseries, LD_METRICS_PROXY_SERIES, PROXY_NVERBS, v, code);
    pthread_mutex_unlock(&m->mu);
}

void ld_metrics_proxy_refused(struct ld_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->proxy.refused++;
    pthread_mutex_unlock(&m->mu);
}

void ld_metrics_proxy_aborted(struct ld_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->proxy.aborted++;
    pthread_mutex_unlock(&m->mu);
}

static void render_proxy(struct ld_buf *b, struct ld_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    const struct ld_metrics_proxy *p = &m->proxy;
    header(b, "leaderd_proxy_requests_total", "counter",
           "Requests answered by the API write gate (--api-proxy), by HTTP method and "
           "status code.");
    render_series(b, "leaderd_proxy_requests_total", proxy_verbs, p->series, p->nseries);
    header(b, "leaderd_proxy_writes_refused_total", "counter",
           "Writes the API write gate refused (503) because this replica did not lead.");
    ld_buf_printf(b, "leaderd_proxy_writes_refused_total %llu\n",
                  (unsigned long long)p->refused);
    header(b, "leaderd_proxy_writes_aborted_total", "counter",
           "Writes the API write gate cut while in flight to the API server because "
           "this replica stopped leading.");
    ld_buf_printf(b, "leaderd_proxy_writes_aborted_total %llu\n",
                  (unsigned long long)p->aborted);
    pthread_mutex_unlock(&m->mu);
}

/* ---- the exec child ---- */

static const char *const child_exit_text[LD_METRICS_CHILD_EXIT_REASONS] = {
    "exited", "signaled", "deadline"};

void ld_metrics_child_configured(struct ld_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->child.configured = true;
    pthread_mutex_unlock(&m->mu);
}

void ld_metrics_child_started(struct ld_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->child.starts++;
    pthread_mutex_unlock(&m->mu);
}

void ld_metrics_child_exited(struct ld_metrics *m, enum ld_metrics_child_exit reason)
{
    if (!m || (unsigned)reason >= LD_METRICS_CHILD_EXIT_REASONS)
        return;
    pthread_mutex_lock(&m->mu);
    m->child.exits[reason]++;
    pthread_mutex_unlock(&m->mu);
}

static void render_child(struct ld_buf *b, struct ld_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    const struct ld_metrics_child *c = &m->child;
    if (c->configured) {
        header(b, "leaderd_child_starts_total", "counter",
               "Times the command (leaderd -- CMD) was started on gaining leadership.");
        ld_buf_printf(b, "leaderd_child_starts_total %llu\n",
                      (unsigned long long)c->starts);
        header(b, "leaderd_child_exits_total", "counter",
               "Times the command ended, once none of its processes was left "
               "(reason=\"exited\": it exited by itself; reason=\"signaled\": a signal "
               "ended it; reason=\"deadline\": the supervisor ended it because "
               "leadership was over).");
        for (size_t i = 0; i < LD_METRICS_CHILD_EXIT_REASONS; i++)
            ld_buf_printf(b, "leaderd_child_exits_total{reason=\"%s\"} %llu\n",
                          child_exit_text[i], (unsigned long long)c->exits[i]);
    }
    pthread_mutex_unlock(&m->mu);
}

int ld_metrics_render(struct ld_metrics *m, const struct ld_snapshot *snap,
                      int64_t now_ms, char **out, size_t *len)
{
    return ld_metrics_render_shards(m, snap, NULL, NULL, now_ms, out, len);
}

int ld_metrics_render_shards(struct ld_metrics *m, const struct ld_snapshot *snap,
                             const struct ld_shardlayout *l, const struct ld_shardsnap *t,
                             int64_t now_ms, char **out, size_t *len)
{
    struct ld_buf b;
    ld_buf_init(&b, LD_METRICS_MAX_TEXT);
    *out = NULL;
    *len = 0;
    render_election(&b, snap, l, t, now_ms);
    render_api(&b, m);
    render_watch(&b, m);
    render_proxy(&b, m);
    render_child(&b, m);
    header(&b, "leaderd_build_info", "gauge",
           "Always 1; the version label names the build.");
    ld_buf_printf(&b, "leaderd_build_info{version=\"");
    put_label(&b, LEADERD_VERSION);
    ld_buf_printf(&b, "\"} 1\n");
    size_t n = b.len;
    char *text = b.err ? NULL : ld_buf_take(&b);
    ld_buf_free(&b);
    if (!text)
        return -1;
    *out = text;
    *len = n;
    return 0;
}
