/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/metrics: every metric has HELP and TYPE, the
 * histogram is cumulative with a matching _count and _sum, the request
 * counter's labels, the series cap, leadership judged at render time,
 * label escaping, and the exec child's metrics only with a command. The exposition is
 * parsed back line by line.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"

#include "../../cmd/leaderd/core/metrics.h"
#include "support/run_suite.h"

/* The observer plugs straight into the API client. */
static const ld_kube_observer_fn observer_type_check = ld_metrics_observe_request;

static struct ld_metrics m;
static char *text;

static void setup(void)
{
    ld_metrics_init(&m);
    text = NULL;
}

static void teardown(void)
{
    free(text);
    ld_metrics_destroy(&m);
}

static void snapshot(struct ld_snapshot *s, const char *lease)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->lease, sizeof(s->lease), "%s", lease);
    snprintf(s->identity, sizeof(s->identity), "me");
}

static const char *render(const struct ld_snapshot *s, int64_t now_ms)
{
    size_t len = 0;
    free(text);
    text = NULL;
    ck_assert_int_eq(ld_metrics_render(&m, s, now_ms, &text, &len), 0);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(strlen(text), len);
    ck_assert_int_eq(text[len - 1], '\n');
    return text;
}

/* Value of the sample whose name-and-labels part is exactly series, e.g.
 * `leaderd_term` or `x_bucket{le="0.5"}`; fails when absent or repeated. */
static double sample(const char *t, const char *series)
{
    size_t n = strlen(series);
    double v = NAN;
    int found = 0;
    for (const char *line = t; *line;) {
        const char *eol = strchr(line, '\n');
        ck_assert_ptr_nonnull(eol);
        if (line[0] != '#' && strncmp(line, series, n) == 0 && line[n] == ' ') {
            char *end;
            v = strtod(line + n + 1, &end);
            ck_assert_ptr_eq(end, eol);
            found++;
        }
        line = eol + 1;
    }
    ck_assert_msg(found == 1, "%s found %d times in:\n%s", series, found, t);
    return v;
}

static bool has_line(const char *t, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = t; (p = strstr(p, line)) != NULL; p += n) {
        if ((p == t || p[-1] == '\n') && p[n] == '\n')
            return true;
    }
    return false;
}

START_TEST(help_and_type_for_every_metric)
{
    struct ld_snapshot s;
    snapshot(&s, "ns/demo");
    const char *t = render(&s, 0);
    static const char *const metrics[][2] = {
        {"leader_election_master_status", "gauge"},
        {"leaderd_leader_transitions_total", "counter"},
        {"leaderd_api_requests_total", "counter"},
        {"leaderd_api_request_duration_seconds", "histogram"},
        {"leaderd_last_renew_timestamp_seconds", "gauge"},
        {"leaderd_build_info", "gauge"},
        {"leaderd_is_leader", "gauge"},
        {"leaderd_term", "gauge"},
        {"leaderd_observed", "gauge"},
        {"leaderd_watch_restarts_total", "counter"},
        {"leaderd_watch_events_total", "counter"},
        {"leaderd_acquire_delay_seconds", "histogram"},
        {"leaderd_pod_label_failures_total", "counter"},
        {"leaderd_events_failures_total", "counter"},
        {"leaderd_resignations_total", "counter"},
        {"leaderd_proxy_requests_total", "counter"},
        {"leaderd_proxy_writes_refused_total", "counter"},
        {"leaderd_proxy_writes_aborted_total", "counter"},
    };
    for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++) {
        char want[128];
        snprintf(want, sizeof(want), "# TYPE %s %s", metrics[i][0], metrics[i][1]);
        ck_assert_msg(has_line(t, want), "missing '%s'", want);
        snprintf(want, sizeof(want), "# HELP %s ", metrics[i][0]);
        ck_assert_msg(strstr(t, want) != NULL, "missing '%s'", want);
    }
    /* Every sample line belongs to a metric announced by a TYPE line. */
    for (const char *line = t; *line;) {
        const char *eol = strchr(line, '\n');
        if (line[0] != '#') {
            bool known = false;
            for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
                known |= strncmp(line, metrics[i][0], strlen(metrics[i][0])) == 0;
            ck_assert_msg(known, "stray line: %.*s", (int)(eol - line), line);
        }
        line = eol + 1;
    }
    ck_assert(has_line(t, "leaderd_build_info{version=\"" LEADERD_VERSION "\"} 1"));
    ck_assert(has_line(t, "leaderd_api_request_duration_seconds_count 0"));
    ck_assert(has_line(t, "leaderd_api_request_duration_seconds_sum 0"));
    ck_assert(has_line(t, "leaderd_last_renew_timestamp_seconds 0.000000"));
    ck_assert(has_line(t, "leaderd_observed 0"));
}
END_TEST

START_TEST(watch_counters_and_acquire_delay)
{
    struct ld_snapshot s;
    snapshot(&s, "ns/demo");
    ld_metrics_watch_started(&m);
    ld_metrics_watch_started(&m);
    for (int i = 0; i < 5; i++)
        ld_metrics_watch_event(&m);
    ld_metrics_acquire_delay(&m, 0.003);
    ld_metrics_acquire_delay(&m, 0.2);
    /* A long watch stream is counted, but not as a request latency. */
    ld_metrics_observe_request(&m, "WATCH", 200, 290.0);
    const char *t = render(&s, 0);
    ck_assert_double_eq(sample(t, "leaderd_watch_restarts_total"), 2);
    ck_assert_double_eq(sample(t, "leaderd_watch_events_total"), 5);
    ck_assert_double_eq(sample(t, "leaderd_resignations_total{reason=\"request\"}"), 0);
    ld_metrics_resigned(&m, true);
    ld_metrics_resigned(&m, true);
    ld_metrics_resigned(&m, false);
    t = render(&s, 0);
    ck_assert_double_eq(sample(t, "leaderd_resignations_total{reason=\"request\"}"), 2);
    ck_assert_double_eq(
        sample(t, "leaderd_resignations_total{reason=\"preferred_holder\"}"), 1);
    ck_assert_double_eq(sample(t, "leaderd_acquire_delay_seconds_bucket{le=\"0.005\"}"),
                        1);
    ck_assert_double_eq(sample(t, "leaderd_acquire_delay_seconds_bucket{le=\"0.25\"}"),
                        2);
    ck_assert_double_eq(sample(t, "leaderd_acquire_delay_seconds_count"), 2);
    ck_assert_double_eq_tol(sample(t, "leaderd_acquire_delay_seconds_sum"), 0.203, 1e-9);
    ck_assert_double_eq(
        sample(t, "leaderd_api_requests_total{verb=\"WATCH\",code=\"200\"}"), 1);
    ck_assert_double_eq(sample(t, "leaderd_api_request_duration_seconds_count"), 0);
}
END_TEST

START_TEST(histogram_is_cumulative)
{
    struct ld_snapshot s;
    snapshot(&s, "ns/demo");
    ld_metrics_observe_request(&m, "GET", 200, 0.003);
    ld_metrics_observe_request(&m, "GET", 200, 0.005); /* le is inclusive */
    ld_metrics_observe_request(&m, "GET", 200, 0.2);
    ld_metrics_observe_request(&m, "PUT", 409, 0.05);
    ld_metrics_observe_request(&m, "PUT", 200, 3.0);
    ld_metrics_observe_request(&m, "GET", 0, 12.0);
    const char *t = render(&s, 0);
    static const struct {
        const char *le;
        double count;
    } want[] = {{"0.005", 2}, {"0.01", 2}, {"0.025", 2}, {"0.05", 3},
                {"0.1", 3},   {"0.25", 4}, {"0.5", 4},   {"1", 4},
                {"2.5", 4},   {"5", 5},    {"10", 5},    {"+Inf", 6}};
    double prev = 0;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char series[96];
        snprintf(series, sizeof(series),
                 "leaderd_api_request_duration_seconds_bucket{le=\"%s\"}", want[i].le);
        double v = sample(t, series);
        ck_assert_msg(v == want[i].count, "le=%s: %g, want %g", want[i].le, v,
                      want[i].count);
        ck_assert(v >= prev);
        prev = v;
    }
    ck_assert(sample(t, "leaderd_api_request_duration_seconds_count") == 6);
    double sum = sample(t, "leaderd_api_request_duration_seconds_sum");
    ck_assert_msg(fabs(sum - 15.258) < 1e-9, "sum %.17g", sum);
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"GET\",code=\"200\"}") == 3);
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"PUT\",code=\"409\"}") == 1);
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"PUT\",code=\"200\"}") == 1);
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"GET\",code=\"error\"}") == 1);
}
END_TEST

START_TEST(odd_requests)
{
    struct ld_snapshot s;
    snapshot(&s, "ns/demo");
    observer_type_check(&m, "BREW", 418, -1.0);
    ld_metrics_observe_request(&m, NULL, 999, NAN);
    ld_metrics_observe_request(&m, "get", 200, 0.001);
    const char *t = render(&s, 0);
    /* Unknown verbs (case matters) are OTHER; impossible statuses are errors;
     * negative and NaN durations count as zero. */
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"OTHER\",code=\"418\"}") == 1);
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"OTHER\",code=\"error\"}") ==
              1);
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"OTHER\",code=\"200\"}") == 1);
    ck_assert(sample(t, "leaderd_api_request_duration_seconds_bucket{le=\"0.005\"}") ==
              3);
    ck_assert(sample(t, "leaderd_api_request_duration_seconds_sum") == 0.001);
}
END_TEST

START_TEST(series_are_capped)
{
    struct ld_snapshot s;
    snapshot(&s, "ns/demo");
    for (long code = 100; code < 600; code++) {
        ld_metrics_observe_request(&m, "GET", code, 0.01);
        ld_metrics_observe_request(&m, "PUT", code, 0.01);
    }
    const char *t = render(&s, 0);
    int lines = 0;
    double total = 0;
    for (const char *p = t; (p = strstr(p, "\nleaderd_api_requests_total{")) != NULL;
         p++) {
        lines++;
        total += strtod(strchr(p, '}') + 2, NULL);
    }
    ck_assert_int_le(lines, LD_METRICS_MAX_SERIES);
    ck_assert(total == 1000);
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"GET\",code=\"100\"}") == 1);
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"PUT\",code=\"other\"}") > 400);
    ck_assert(sample(t, "leaderd_api_request_duration_seconds_count") == 1000);
}
END_TEST

START_TEST(leadership_judged_at_render_time)
{
    struct ld_snapshot s;
    snapshot(&s, "kube-system/my-lease");
    s.leading = true;
    s.lead_until_ms = 5000;
    s.term = 7;
    s.observed = true;
    s.transitions_seen = 3;
    s.last_renew_wall_us = 1700000000123456;
    const char *t = render(&s, 4999);
    /* The name label is the lease name without its namespace. */
    ck_assert(sample(t, "leader_election_master_status{name=\"my-lease\"}") == 1);
    ck_assert(sample(t, "leaderd_is_leader") == 1);
    ck_assert(sample(t, "leaderd_term") == 7);
    ck_assert(sample(t, "leaderd_observed") == 1);
    ck_assert(sample(t, "leaderd_leader_transitions_total") == 3);
    ck_assert(has_line(t, "leaderd_last_renew_timestamp_seconds 1700000000.123456"));

    t = render(&s, 5000);
    ck_assert(sample(t, "leader_election_master_status{name=\"my-lease\"}") == 0);
    ck_assert(sample(t, "leaderd_is_leader") == 0);

    s.leading = false;
    t = render(&s, 0);
    ck_assert(sample(t, "leader_election_master_status{name=\"my-lease\"}") == 0);
}
END_TEST

START_TEST(label_values_escaped)
{
    struct ld_snapshot s;
    snapshot(&s, "ns/we\"ird\\na\nme");
    const char *t = render(&s, 0);
    ck_assert(
        has_line(t, "leader_election_master_status{name=\"we\\\"ird\\\\na\\nme\"} 0"));
}
END_TEST

#define THREADS 4
#define PER_THREAD 20000

static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i < PER_THREAD; i++)
        ld_metrics_observe_request(&m, i % 2 ? "GET" : "PUT", 200, 0.5);
    return NULL;
}

START_TEST(concurrent_observers)
{
    pthread_t th[THREADS];
    struct ld_snapshot s;
    snapshot(&s, "ns/demo");
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, hammer, NULL), 0);
    /* Renders race with the writers; each must stay self-consistent. */
    for (int i = 0; i < 20; i++) {
        const char *t = render(&s, 0);
        double count = sample(t, "leaderd_api_request_duration_seconds_count");
        double inf =
            sample(t, "leaderd_api_request_duration_seconds_bucket{le=\"+Inf\"}");
        ck_assert(count == inf);
        ck_assert(sample(t, "leaderd_api_request_duration_seconds_sum") == count * 0.5);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    const char *t = render(&s, 0);
    ck_assert(sample(t, "leaderd_api_request_duration_seconds_count") ==
              THREADS * PER_THREAD);
    ck_assert(sample(t, "leaderd_api_requests_total{verb=\"GET\",code=\"200\"}") ==
              THREADS * PER_THREAD / 2.0);
}
END_TEST

START_TEST(consumer_failures_counted)
{
    struct ld_snapshot s;
    snapshot(&s, "ns/demo");
    ck_assert(sample(render(&s, 0), "leaderd_pod_label_failures_total") == 0);
    ld_metrics_pod_label_failure(&m);
    ld_metrics_pod_label_failure(&m);
    ld_metrics_events_failure(&m);
    const char *t = render(&s, 0);
    ck_assert(sample(t, "leaderd_pod_label_failures_total") == 2);
    ck_assert(sample(t, "leaderd_events_failures_total") == 1);
}
END_TEST

/* Only a daemon with a command has the child's metrics: present at 0 from
 * the start, each reason a series of its own. */
START_TEST(child_metrics_once_a_command_is_configured)
{
    struct ld_snapshot s;
    snapshot(&s, "ns/demo");
    ld_metrics_child_started(&m); /* counted, but not shown before configured */
    ck_assert_ptr_null(strstr(render(&s, 0), "leaderd_child_"));
    ld_metrics_child_configured(&m);
    const char *t = render(&s, 0);
    ck_assert(has_line(t, "# TYPE leaderd_child_starts_total counter"));
    ck_assert(has_line(t, "# TYPE leaderd_child_exits_total counter"));
    ck_assert_ptr_nonnull(strstr(t, "# HELP leaderd_child_exits_total "));
    ck_assert(sample(t, "leaderd_child_starts_total") == 1);
    ck_assert(sample(t, "leaderd_child_exits_total{reason=\"exited\"}") == 0);
    ck_assert(sample(t, "leaderd_child_exits_total{reason=\"signaled\"}") == 0);
    ck_assert(sample(t, "leaderd_child_exits_total{reason=\"deadline\"}") == 0);
    ld_metrics_child_started(&m);
    ld_metrics_child_exited(&m, LD_METRICS_CHILD_DEADLINE);
    ld_metrics_child_exited(&m, LD_METRICS_CHILD_SIGNALED);
    ld_metrics_child_exited(&m, LD_METRICS_CHILD_DEADLINE);
    ld_metrics_child_exited(NULL, LD_METRICS_CHILD_EXITED); /* no metrics: nothing */
    t = render(&s, 0);
    ck_assert(sample(t, "leaderd_child_starts_total") == 2);
    ck_assert(sample(t, "leaderd_child_exits_total{reason=\"exited\"}") == 0);
    ck_assert(sample(t, "leaderd_child_exits_total{reason=\"signaled\"}") == 1);
    ck_assert(sample(t, "leaderd_child_exits_total{reason=\"deadline\"}") == 2);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("render");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, help_and_type_for_every_metric);
    tcase_add_test(tc, histogram_is_cumulative);
    tcase_add_test(tc, watch_counters_and_acquire_delay);
    tcase_add_test(tc, odd_requests);
    tcase_add_test(tc, series_are_capped);
    tcase_add_test(tc, leadership_judged_at_render_time);
    tcase_add_test(tc, label_values_escaped);
    tcase_add_test(tc, concurrent_observers);
    tcase_add_test(tc, consumer_failures_counted);
    tcase_add_test(tc, child_metrics_once_a_command_is_configured);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(metrics_suite());
}
