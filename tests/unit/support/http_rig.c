/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_rig: the server fixture of http_rig.h.
 */
#include "http_rig.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "timefmt.h"

struct http_rig rig;

const int64_t rig_renewed_us = INT64_C(1767225600123456);

void rig_setup(void)
{
    struct ld_errinfo err;
    ld_state_init(&rig.st, "ns/demo", "me", RIG_STALE_MS);
    ld_metrics_init(&rig.met);
    rig.srv = ld_http_start("127.0.0.1", 0, &rig.st, &rig.met, &err);
    ck_assert_msg(rig.srv != NULL, "start: %s", err.msg);
    rig.port = ld_http_port(rig.srv);
    ck_assert_int_gt(rig.port, 0);
    ck_assert_int_eq(rig_microtime_us("2026-01-01T00:00:00.123456Z"), rig_renewed_us);
}

void rig_teardown(void)
{
    ld_http_stop(rig.srv);
    rig.srv = NULL;
    ld_metrics_destroy(&rig.met);
    ld_state_destroy(&rig.st);
}

void rig_publish(const char *holder, int64_t lead_for_ms, int64_t term)
{
    struct ld_snapshot s;
    ld_state_read(&rig.st, &s);
    int64_t now = ld_mono_ms();
    s.observed = true;
    snprintf(s.leader, sizeof(s.leader), "%s", holder);
    s.leading = lead_for_ms != 0;
    s.lead_until_ms = now + lead_for_ms;
    s.term_until_ms = s.leading ? s.lead_until_ms : INT64_MIN;
    s.term = term;
    s.has_renewed_at = true;
    s.renewed_at_us = rig_renewed_us;
    s.heartbeat_ms = now;
    s.health_error[0] = '\0';
    ld_state_publish(&rig.st, &s);
}

void rig_base_snapshot(struct ld_snapshot *s)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->lease, sizeof(s->lease), "ns/demo");
    snprintf(s->identity, sizeof(s->identity), "me");
    s->stale_after_ms = RIG_STALE_MS;
    s->heartbeat_ms = 1000;
}

struct ld_http *rig_start_with(const struct ld_http_options *o)
{
    struct ld_errinfo err;
    struct ld_http *h = ld_http_start_opts("127.0.0.1", 0, &rig.st, &rig.met, o, &err);
    ck_assert_msg(h != NULL, "start: %s", err.msg);
    return h;
}

void rig_fetch_at(int port, const char *method, const char *path, struct http_resp *r)
{
    http_fetch(port, method, path, r);
    ck_assert_msg(r->rc != CURLE_FAILED_INIT, "curl_easy_init failed");
}

void rig_fetch(const char *method, const char *path, struct http_resp *r)
{
    rig_fetch_at(rig.port, method, path, r);
    ck_assert_msg(r->rc == CURLE_OK, "%s %s: %s", method ? method : "GET", path,
                  curl_easy_strerror(r->rc));
}

json_t *rig_parse_json(const char *text)
{
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    ck_assert_msg(o != NULL, "not JSON (%s): %s", jerr.text, text);
    ck_assert(json_is_object(o));
    return o;
}

int64_t rig_microtime_us(const char *text)
{
    int64_t us = 0;
    ck_assert_int_eq(ld_microtime_parse(text, &us), LD_OK);
    return us;
}

int64_t rig_elapsed_ms(int64_t t0)
{
    return ld_mono_ms() - t0;
}

bool rig_stats_until(struct ld_http *h, bool (*pred)(const struct ld_http_stats *, long),
                     long arg, int64_t timeout_ms)
{
    static const struct timespec two_ms = {0, 2 * 1000 * 1000};
    struct ld_http_stats stats;
    int64_t t0 = ld_mono_ms();
    for (;;) {
        ld_http_get_stats(h, &stats);
        if (pred(&stats, arg))
            return true;
        if (rig_elapsed_ms(t0) > timeout_ms)
            return false;
        nanosleep(&two_ms, NULL);
    }
}

bool rig_held_is(const struct ld_http_stats *s, long n)
{
    return s->held == (unsigned long)n;
}

bool rig_seq_is(const struct ld_http_stats *s, long n)
{
    return s->seq == (uint64_t)n;
}

bool rig_subscribers_are(const struct ld_http_stats *s, long n)
{
    return s->subscribers == (unsigned long)n;
}

bool rig_connections_at_most(const struct ld_http_stats *s, long n)
{
    return s->connections <= (unsigned long)n;
}
