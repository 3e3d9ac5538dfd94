/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_rig: the sidecar's HTTP server (cmd/leaderd/http/http.h) under test in
 * the check_http_* binaries: a state, metrics and a server on 127.0.0.1
 * (port 0) made and torn down around each test as a Check fixture, and the
 * ways tests drive it: snapshots published as the election loop would,
 * requests to it (through http_client.h), waits on its counters and checks
 * of its JSON bodies.
 *
 * Names: prefixed rig_ (RIG_ for constants). Check's fixtures take no
 * argument, so the rig of the running test is the one global, rig; the
 * functions that touch it run on the test's thread, except rig_publish.
 */
#ifndef LEADERD_TEST_HTTP_RIG_H
#define LEADERD_TEST_HTTP_RIG_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../../../cmd/leaderd/http/http.h"
#include "http_client.h"

/* The state's stale_after_ms (and so /healthz's limits). */
#define RIG_STALE_MS 5000

struct http_rig {
    struct ld_state st; /* lease "ns/demo", identity "me" */
    struct ld_metrics met;
    struct ld_http *srv; /* started with the defaults */
    int port;
};

extern struct http_rig rig;

/* Check fixture: starts rig (failing the test when it cannot), and stops
 * and frees it. */
void rig_setup(void);
void rig_teardown(void);

/* 2026-01-01T00:00:00.123456Z, the renewTime every rig_publish carries. */
extern const int64_t rig_renewed_us;

/* Publishes a snapshot to rig.st: observed, holder, leading until now +
 * lead_for_ms (not leading when lead_for_ms is 0), term, a fresh heartbeat
 * and no health error. Uses no assertion, so any thread may call it. */
void rig_publish(const char *holder, int64_t lead_for_ms, int64_t term);

/* A snapshot as the rig's state would hold before any observation (lease
 * "ns/demo", identity "me", RIG_STALE_MS, heartbeat at 1000), for the
 * plain functions. */
void rig_base_snapshot(struct ld_snapshot *s);

/* Another server on rig.st and rig.met, with o (NULL: the defaults), on a
 * free port. The caller stops it with ld_http_stop. */
struct ld_http *rig_start_with(const struct ld_http_options *o);

/* http_fetch to port: fails the test only when libcurl could not start. */
void rig_fetch_at(int port, const char *method, const char *path, struct http_resp *r);

/* http_fetch to rig.port: fails the test unless the request completed. */
void rig_fetch(const char *method, const char *path, struct http_resp *r);

/* text parsed (fails the test unless it is a JSON object). Returns a new
 * reference (json_decref). */
json_t *rig_parse_json(const char *text);

/* A MicroTime's microseconds (fails the test unless text is one). */
int64_t rig_microtime_us(const char *text);

/* Milliseconds since t0 on the monotonic clock. */
int64_t rig_elapsed_ms(int64_t t0);

/* Polls h's counters (the server has no event to wait on for them) until
 * pred(stats, arg) holds or timeout_ms passes; returns whether it held. */
bool rig_stats_until(struct ld_http *h, bool (*pred)(const struct ld_http_stats *, long),
                     long arg, int64_t timeout_ms);

/* Predicates for rig_stats_until: held long-polls, the latest /watch event
 * id, /watch subscribers, open connections. */
bool rig_held_is(const struct ld_http_stats *s, long n);
bool rig_seq_is(const struct ld_http_stats *s, long n);
bool rig_subscribers_are(const struct ld_http_stats *s, long n);
bool rig_connections_at_most(const struct ld_http_stats *s, long n);

#endif
