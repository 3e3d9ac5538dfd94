/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_hook_events: --events. lib/event encodes client-go's Event about the
 * Lease and POSTs it (a recording transport stands in for HTTP); the queue
 * (cmd/leaderd/hooks/hook_events.h), driven with a fake clock, makes one Event per
 * transition and none without one, keeps an Event's name over its retries,
 * gives up after its attempts and never holds more than its cap.
 */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../cmd/leaderd/hooks/hook_events.h"
#include "event.h"
#include "support/fake_recorder.h"
#include "support/run_suite.h"

/* 2026-01-01T00:00:00.123456Z */
#define T0_US 1767225600123456LL

static json_t *encode(bool acquire, const char *uid)
{
    struct ld_event_spec ev = {.namespace_ = "ns1",
                               .lease = "demo",
                               .lease_uid = uid,
                               .identity = "pod-a",
                               .acquire = acquire,
                               .event_time_us = T0_US};
    char *text = ld_events_encode(&ev);
    ck_assert_ptr_nonnull(text);
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    ck_assert_ptr_nonnull(doc);
    return doc;
}

static const char *str(json_t *doc, const char *key)
{
    return json_string_value(json_object_get(doc, key));
}

START_TEST(acquire_event_fields)
{
    json_t *doc = encode(true, "uid-1");
    ck_assert_str_eq(str(doc, "apiVersion"), "events.k8s.io/v1");
    ck_assert_str_eq(str(doc, "kind"), "Event");
    ck_assert_str_eq(str(doc, "type"), "Normal");
    ck_assert_str_eq(str(doc, "reason"), "LeaderElection");
    ck_assert_str_eq(str(doc, "action"), "Acquire");
    ck_assert_str_eq(str(doc, "note"), "pod-a became leader");
    ck_assert_str_eq(str(doc, "reportingController"), "leaderd");
    ck_assert_str_eq(str(doc, "reportingInstance"), "pod-a");
    ck_assert_str_eq(str(doc, "eventTime"), "2026-01-01T00:00:00.123456Z");
    json_t *meta = json_object_get(doc, "metadata");
    /* client-go: "<name>.<UnixNano in hex>". */
    ck_assert_str_eq(str(meta, "name"), "demo.18867251f555ca00");
    ck_assert_str_eq(str(meta, "namespace"), "ns1");
    json_t *reg = json_object_get(doc, "regarding");
    ck_assert_str_eq(str(reg, "kind"), "Lease");
    ck_assert_str_eq(str(reg, "apiVersion"), "coordination.k8s.io/v1");
    ck_assert_str_eq(str(reg, "namespace"), "ns1");
    ck_assert_str_eq(str(reg, "name"), "demo");
    ck_assert_str_eq(str(reg, "uid"), "uid-1");
    json_decref(doc);
}
END_TEST

START_TEST(release_event_without_uid)
{
    json_t *doc = encode(false, "");
    ck_assert_str_eq(str(doc, "action"), "Release");
    ck_assert_str_eq(str(doc, "note"), "pod-a stopped leading");
    ck_assert_ptr_null(json_object_get(json_object_get(doc, "regarding"), "uid"));
    json_decref(doc);
}
END_TEST

struct seen {
    int calls;
    enum ld_err rc;
};

static void record(void *ctx, const struct ld_events_answer *a)
{
    struct seen *s = ctx;
    s->calls++;
    s->rc = a->rc;
}

START_TEST(create_request_and_answers)
{
    struct fake_recorder *t = fake_recorder_new();
    struct seen s = {0};
    struct ld_events_call call = {.done = record, .ctx = &s};
    struct ld_event_spec ev = {.namespace_ = "ns1",
                               .lease = "demo",
                               .identity = "pod-a",
                               .acquire = true,
                               .event_time_us = T0_US};
    ld_http_id id;
    struct ld_errinfo err;
    ck_assert_int_eq(ld_events_create(&t->base, &ev, 3000, &call, &id, &err), LD_OK);
    ck_assert_str_eq(t->calls[0].verb, "POST");
    ck_assert_str_eq(t->calls[0].path,
                     "/apis/events.k8s.io/v1/namespaces/ns1/events?timeout=3s");
    ck_assert_ptr_nonnull(strstr(t->calls[0].body, "\"reason\":\"LeaderElection\""));
    fake_recorder_answer(t, 0, 201, "{}");
    ck_assert_int_eq(s.rc, LD_OK);
    ck_assert_int_eq(ld_events_create(&t->base, &ev, 3000, &call, &id, &err), LD_OK);
    fake_recorder_answer(
        t, 1, 409,
        "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"AlreadyExists\","
        "\"code\":409,\"message\":\"exists\"}");
    ck_assert_int_eq(s.rc, LD_EEXISTS);
    ev.identity = "";
    ck_assert_int_eq(ld_events_create(&t->base, &ev, 3000, &call, &id, &err), LD_EINVAL);
    ck_assert_int_eq(s.calls, 2);
    ld_transport_free(&t->base);
}
END_TEST

/* ---- the queue ---- */

START_TEST(one_event_per_transition)
{
    struct ld_hook_events_queue q;
    ld_hook_events_queue_init(&q);
    ld_hook_events_queue_update(&q, false, NULL, 1);
    ck_assert_ptr_null(
        ld_hook_events_queue_next(&q, 0)); /* a standby from the start: nothing */
    ld_hook_events_queue_update(&q, true, "u1", 100);
    ld_hook_events_queue_update(&q, true, "u1", 200); /* still leading: nothing new */
    const struct ld_hook_events_item *it = ld_hook_events_queue_next(&q, 0);
    ck_assert_ptr_nonnull(it);
    ck_assert(it->acquire);
    ck_assert_str_eq(it->uid, "u1");
    ck_assert_int_eq(it->wall_us, 100);
    ck_assert_ptr_null(ld_hook_events_queue_next(&q, 1)); /* in flight */
    ld_hook_events_queue_update(&q, false, "u1", 300);
    ld_hook_events_queue_done(&q, 2, LD_OK);
    it = ld_hook_events_queue_next(&q, 3);
    ck_assert(!it->acquire);
    ck_assert_int_eq(it->wall_us, 300);
    ld_hook_events_queue_done(&q, 4,
                              LD_EEXISTS); /* an earlier try landed: done, not twice */
    ck_assert_ptr_null(ld_hook_events_queue_next(&q, 5));
    ck_assert_int_eq(ld_hook_events_queue_wake_ms(&q, 5), INT64_MAX);
}
END_TEST

START_TEST(retries_keep_the_name_and_give_up)
{
    struct ld_hook_events_queue q;
    ld_hook_events_queue_init(&q);
    ld_hook_events_queue_update(&q, true, "u1", 100);
    int64_t now = 0, backoff = LD_HOOK_EVENTS_BACKOFF_MIN_MS;
    for (int i = 0; i < LD_HOOK_EVENTS_ATTEMPTS; i++) {
        const struct ld_hook_events_item *it = ld_hook_events_queue_next(&q, now);
        ck_assert_ptr_nonnull(it);
        ck_assert_int_eq(it->wall_us, 100); /* same Event, same name */
        ld_hook_events_queue_done(&q, now, LD_ESERVER);
        if (i + 1 < LD_HOOK_EVENTS_ATTEMPTS) {
            ck_assert_int_eq(ld_hook_events_queue_wake_ms(&q, now), now + backoff);
            ck_assert_ptr_null(ld_hook_events_queue_next(&q, now + backoff - 1));
        }
        now += backoff;
        backoff = backoff * 2 > LD_HOOK_EVENTS_BACKOFF_MAX_MS
                      ? LD_HOOK_EVENTS_BACKOFF_MAX_MS
                      : backoff * 2;
    }
    ck_assert_int_eq(q.dropped, 1);
    ck_assert_ptr_null(ld_hook_events_queue_next(&q, now + 60000));
}
END_TEST

START_TEST(the_queue_is_capped)
{
    struct ld_hook_events_queue q;
    ld_hook_events_queue_init(&q);
    for (int i = 0; i < 3 * LD_HOOK_EVENTS_CAP; i++)
        ld_hook_events_queue_update(&q, i % 2 == 0, NULL, i);
    ck_assert_int_eq(q.n, LD_HOOK_EVENTS_CAP);
    ck_assert_int_eq(q.dropped, 2 * LD_HOOK_EVENTS_CAP);
    /* The newest are kept, in order. */
    const struct ld_hook_events_item *it = ld_hook_events_queue_next(&q, 0);
    ck_assert_int_eq(it->wall_us, 2 * LD_HOOK_EVENTS_CAP);
    /* The one in flight is never the one dropped. */
    ld_hook_events_queue_update(&q, false, NULL, 1000);
    ld_hook_events_queue_update(&q, true, NULL, 1001);
    ck_assert_int_eq(q.q[0].wall_us, 2 * LD_HOOK_EVENTS_CAP);
    ck_assert_int_eq(q.q[q.n - 1].wall_us, 1001);
}
END_TEST

static Suite *events_suite(void)
{
    Suite *s = suite_create("events");
    TCase *tc = tcase_create("event");
    tcase_add_test(tc, acquire_event_fields);
    tcase_add_test(tc, release_event_without_uid);
    tcase_add_test(tc, create_request_and_answers);
    suite_add_tcase(s, tc);
    tc = tcase_create("queue");
    tcase_add_test(tc, one_event_per_transition);
    tcase_add_test(tc, retries_keep_the_name_and_give_up);
    tcase_add_test(tc, the_queue_is_capped);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(events_suite());
}
