/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_hook_podlabel: --pod-label. lib/pods builds the merge patch and the
 * labelled list exactly and maps answers (a recording transport stands in
 * for HTTP); the policy (cmd/leaderd/hooks/hook_podlabel.h), driven with a fake clock,
 * unlabels other Pods before labelling its own, drops the sweep when
 * leadership ends, backs off with a cap, and holds the release only while
 * its own Pod may still say "true".
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../cmd/leaderd/hooks/hook_podlabel.h"
#include "pods.h"
#include "support/fake_recorder.h"
#include "support/run_suite.h"

#define KEY "example.com/leader"

START_TEST(label_keys)
{
    ck_assert(ld_label_key_valid("leader"));
    ck_assert(ld_label_key_valid("example.com/is-leader"));
    ck_assert(ld_label_key_valid("a.b_c-D9"));
    ck_assert(!ld_label_key_valid(""));
    ck_assert(!ld_label_key_valid("/leader"));
    ck_assert(!ld_label_key_valid("example.com/"));
    ck_assert(!ld_label_key_valid("-leader"));
    ck_assert(!ld_label_key_valid("leader."));
    ck_assert(!ld_label_key_valid("Example.com/leader")); /* prefix is lower case */
    ck_assert(!ld_label_key_valid("a/b/c"));
    ck_assert(!ld_label_key_valid("has space"));
    char long_name[70];
    memset(long_name, 'a', 64);
    long_name[64] = '\0';
    ck_assert(!ld_label_key_valid(long_name));
    long_name[63] = '\0';
    ck_assert(ld_label_key_valid(long_name));
}
END_TEST

START_TEST(patch_body_and_request)
{
    char *body = ld_pods_label_patch(KEY, true);
    ck_assert_str_eq(body,
                     "{\"metadata\":{\"labels\":{\"example.com/leader\":\"true\"}}}");
    free(body);

    struct fake_recorder *t = fake_recorder_new();
    struct ld_pods_call call = {0};
    ld_http_id id = 0;
    struct ld_errinfo err;
    ck_assert_int_eq(
        ld_pods_patch_label(&t->base, "ns1", "pod-a", KEY, false, 4000, &call, &id, &err),
        LD_OK);
    ck_assert_uint_eq(id, 1);
    ck_assert_str_eq(t->calls[0].verb, "PATCH");
    ck_assert_str_eq(t->calls[0].path, "/api/v1/namespaces/ns1/pods/pod-a?timeout=4s");
    ck_assert_str_eq(t->calls[0].content_type, "application/merge-patch+json");
    ck_assert_str_eq(t->calls[0].body,
                     "{\"metadata\":{\"labels\":{\"example.com/leader\":\"false\"}}}");
    ck_assert_int_eq(t->calls[0].timeout_ms, 4000);
    /* Nothing is sent for names the server would refuse. */
    ck_assert_int_eq(
        ld_pods_patch_label(&t->base, "ns1", "Pod_A", KEY, true, 4000, &call, &id, &err),
        LD_EINVAL);
    ck_assert_int_eq(ld_pods_patch_label(&t->base, "ns1", "pod-a", "bad key", true, 4000,
                                         &call, &id, &err),
                     LD_EINVAL);
    ck_assert_uint_eq(t->n, 1);
    ld_transport_free(&t->base);
}
END_TEST

struct seen {
    int calls;
    enum ld_err rc;
    long status;
    size_t n;
    char names[4][32];
    char msg[256];
};

static void record(void *ctx, const struct ld_pods_answer *a)
{
    struct seen *s = ctx;
    s->calls++;
    s->rc = a->rc;
    s->status = a->http_status;
    s->n = a->n_names;
    for (size_t i = 0; i < a->n_names && i < 4; i++)
        snprintf(s->names[i], sizeof(s->names[i]), "%s", a->names[i]);
    snprintf(s->msg, sizeof(s->msg), "%s", a->err.msg);
}

START_TEST(list_request_and_answers)
{
    struct fake_recorder *t = fake_recorder_new();
    struct seen s = {0};
    struct ld_pods_call call = {.done = record, .ctx = &s};
    ld_http_id id;
    struct ld_errinfo err;
    ck_assert_int_eq(
        ld_pods_list_labelled(&t->base, "ns1", KEY, "true", 5000, &call, &id, &err),
        LD_OK);
    ck_assert_str_eq(t->calls[0].verb, "GET");
    ck_assert_str_eq(t->calls[0].path,
                     "/api/v1/namespaces/ns1/"
                     "pods?labelSelector=example.com%2Fleader%3Dtrue&timeout=5s");
    ck_assert_ptr_null(t->calls[0].body);
    fake_recorder_answer(
        t, 0, 200,
        "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":["
        "{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}");
    ck_assert_int_eq(s.calls, 1);
    ck_assert_int_eq(s.rc, LD_OK);
    ck_assert_uint_eq(s.n, 2);
    ck_assert_str_eq(s.names[0], "a");
    ck_assert_str_eq(s.names[1], "b");

    /* A 403 Status maps to its error with the server's message. */
    ck_assert_int_eq(
        ld_pods_list_labelled(&t->base, "ns1", KEY, "true", 5000, &call, &id, &err),
        LD_OK);
    fake_recorder_answer(
        t, 1, 403,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
        "\"message\":\"pods is forbidden\",\"reason\":\"Forbidden\",\"code\":403}");
    ck_assert_int_eq(s.rc, LD_EFORBIDDEN);
    ck_assert_int_eq(s.status, 403);
    ck_assert_ptr_nonnull(strstr(s.msg, "pods is forbidden"));

    /* A 200 that is not a PodList is a decode error, not an empty list. */
    ck_assert_int_eq(
        ld_pods_list_labelled(&t->base, "ns1", KEY, "true", 5000, &call, &id, &err),
        LD_OK);
    fake_recorder_answer(t, 2, 200, "{\"kind\":\"Lease\"}");
    ck_assert_int_eq(s.rc, LD_EDECODE);

    ck_assert_int_eq(
        ld_pods_list_labelled(&t->base, "ns1", KEY, "true", 5000, &call, &id, &err),
        LD_OK);
    fake_recorder_answer(t, 3, 0, NULL);
    ck_assert_int_eq(s.rc, LD_ETRANSPORT);
    ck_assert_int_eq(s.calls, 4);
    ld_transport_free(&t->base);
}
END_TEST

START_TEST(decode_names_rejects_nameless_items)
{
    char **names = NULL;
    size_t n = 0;
    struct ld_errinfo err;
    const char *doc = "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"a\"}},"
                      "{\"metadata\":{}}]}";
    ck_assert_int_eq(ld_pods_decode_names(doc, strlen(doc), &names, &n, &err),
                     LD_EDECODE);
    ck_assert_ptr_null(names);
    const char *empty = "{\"kind\":\"PodList\",\"items\":[]}";
    ck_assert_int_eq(ld_pods_decode_names(empty, strlen(empty), &names, &n, &err), LD_OK);
    ck_assert_uint_eq(n, 0);
    ld_pods_names_free(names, n);
}
END_TEST

/* ---- the policy ---- */

static struct ld_hook_podlabel_policy pl;

static void setup(void)
{
    ld_hook_podlabel_policy_init(&pl, "me");
}

static void teardown(void)
{
    ld_hook_podlabel_policy_clear(&pl);
}

static void expect_patch(int64_t now, const char *pod, bool value)
{
    struct ld_hook_podlabel_step s = ld_hook_podlabel_policy_next(&pl, now);
    ck_assert_int_eq(s.kind, LD_HOOK_PODLABEL_PATCH);
    ck_assert_str_eq(s.pod, pod);
    ck_assert_int_eq(s.value, value);
}

static void expect_none(int64_t now)
{
    ck_assert_int_eq(ld_hook_podlabel_policy_next(&pl, now).kind, LD_HOOK_PODLABEL_NONE);
}

START_TEST(standby_writes_false_once)
{
    ld_hook_podlabel_policy_update(&pl, false);
    ck_assert_ptr_null(ld_hook_podlabel_policy_value(&pl));
    expect_patch(0, "me", false);
    expect_none(1); /* in flight */
    ck_assert_int_eq(ld_hook_podlabel_policy_wake_ms(&pl, 1), INT64_MAX);
    ld_hook_podlabel_policy_patch_done(&pl, 10, LD_OK);
    ck_assert_str_eq(ld_hook_podlabel_policy_value(&pl), "false");
    expect_none(20);
    ck_assert_int_eq(ld_hook_podlabel_policy_wake_ms(&pl, 20), INT64_MAX);
    ck_assert(!ld_hook_podlabel_policy_busy(&pl));
}
END_TEST

START_TEST(new_leader_unlabels_others_first)
{
    ld_hook_podlabel_policy_update(&pl, false);
    expect_patch(0, "me", false);
    ld_hook_podlabel_policy_patch_done(&pl, 1, LD_OK);
    ld_hook_podlabel_policy_update(&pl, true);
    struct ld_hook_podlabel_step s = ld_hook_podlabel_policy_next(&pl, 2);
    ck_assert_int_eq(s.kind, LD_HOOK_PODLABEL_LIST);
    char *found[] = {"old", "me", "older"};
    ld_hook_podlabel_policy_list_done(&pl, 3, LD_OK, found, 3);
    expect_patch(4, "old", false);
    ld_hook_podlabel_policy_patch_done(&pl, 5, LD_OK);
    expect_patch(6, "older", false);
    ld_hook_podlabel_policy_patch_done(&pl, 7,
                                       LD_ENOTFOUND); /* gone: as good as unlabelled */
    ck_assert_str_eq(ld_hook_podlabel_policy_value(&pl), "false");
    expect_patch(8, "me", true);
    ck_assert(ld_hook_podlabel_policy_busy(&pl));
    ld_hook_podlabel_policy_patch_done(&pl, 9, LD_OK);
    ck_assert_str_eq(ld_hook_podlabel_policy_value(&pl), "true");
    expect_none(10);
    ck_assert(ld_hook_podlabel_policy_busy(&pl));
}
END_TEST

START_TEST(failures_back_off_with_a_cap)
{
    ld_hook_podlabel_policy_update(&pl, false);
    int64_t now = 0, expect = LD_HOOK_PODLABEL_BACKOFF_MIN_MS;
    for (int i = 0; i < 10; i++) {
        expect_patch(now, "me", false);
        ld_hook_podlabel_policy_patch_done(&pl, now, LD_ESERVER);
        ck_assert_int_eq(ld_hook_podlabel_policy_wake_ms(&pl, now), now + expect);
        expect_none(now + expect - 1);
        now += expect;
        expect *= 2;
        if (expect > LD_HOOK_PODLABEL_BACKOFF_MAX_MS)
            expect = LD_HOOK_PODLABEL_BACKOFF_MAX_MS;
    }
    expect_patch(now, "me", false);
    ld_hook_podlabel_policy_patch_done(&pl, now, LD_OK);
    /* Success resets the backoff. */
    ld_hook_podlabel_policy_update(&pl, true);
    ck_assert_int_eq(ld_hook_podlabel_policy_wake_ms(&pl, now), now);
    ck_assert_int_eq(ld_hook_podlabel_policy_next(&pl, now).kind, LD_HOOK_PODLABEL_LIST);
    ld_hook_podlabel_policy_list_done(&pl, now, LD_ESERVER, NULL, 0);
    ck_assert_int_eq(ld_hook_podlabel_policy_wake_ms(&pl, now),
                     now + LD_HOOK_PODLABEL_BACKOFF_MIN_MS);
}
END_TEST

START_TEST(own_pod_missing_is_a_failure)
{
    ld_hook_podlabel_policy_update(&pl, true);
    ck_assert_int_eq(ld_hook_podlabel_policy_next(&pl, 0).kind, LD_HOOK_PODLABEL_LIST);
    ld_hook_podlabel_policy_list_done(&pl, 1, LD_OK, NULL, 0);
    expect_patch(2, "me", true);
    ld_hook_podlabel_policy_patch_done(&pl, 3, LD_ENOTFOUND);
    ck_assert_ptr_null(ld_hook_podlabel_policy_value(&pl));
    expect_none(4);
    expect_patch(3 + LD_HOOK_PODLABEL_BACKOFF_MIN_MS, "me", true);
}
END_TEST

START_TEST(losing_leadership_drops_the_sweep)
{
    ld_hook_podlabel_policy_update(&pl, true);
    ck_assert_int_eq(ld_hook_podlabel_policy_next(&pl, 0).kind, LD_HOOK_PODLABEL_LIST);
    char *found[] = {"old"};
    ld_hook_podlabel_policy_list_done(&pl, 1, LD_OK, found, 1);
    expect_patch(2, "old", false);
    ld_hook_podlabel_policy_update(&pl, false); /* the patch is still out */
    ld_hook_podlabel_policy_patch_done(&pl, 3, LD_OK);
    /* A standby never touches other Pods: it only says "false" itself. */
    expect_patch(4, "me", false);
    ld_hook_podlabel_policy_patch_done(&pl, 5, LD_OK);
    expect_none(6);
}
END_TEST

START_TEST(a_late_true_is_corrected)
{
    ld_hook_podlabel_policy_update(&pl, true);
    ck_assert_int_eq(ld_hook_podlabel_policy_next(&pl, 0).kind, LD_HOOK_PODLABEL_LIST);
    ld_hook_podlabel_policy_list_done(&pl, 1, LD_OK, NULL, 0);
    expect_patch(2, "me", true);
    ld_hook_podlabel_policy_update(&pl, false); /* shutdown while "true" is out */
    ck_assert(ld_hook_podlabel_policy_busy(&pl));
    ld_hook_podlabel_policy_patch_done(&pl, 3, LD_OK);
    ck_assert_str_eq(ld_hook_podlabel_policy_value(&pl), "true");
    ck_assert(ld_hook_podlabel_policy_busy(&pl)); /* the release must wait for "false" */
    expect_patch(4, "me", false);
    ld_hook_podlabel_policy_patch_done(&pl, 5, LD_OK);
    ck_assert(!ld_hook_podlabel_policy_busy(&pl));
}
END_TEST

static Suite *podlabel_suite(void)
{
    Suite *s = suite_create("podlabel");
    TCase *tc = tcase_create("pods");
    tcase_add_test(tc, label_keys);
    tcase_add_test(tc, patch_body_and_request);
    tcase_add_test(tc, list_request_and_answers);
    tcase_add_test(tc, decode_names_rejects_nameless_items);
    suite_add_tcase(s, tc);
    tc = tcase_create("policy");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, standby_writes_false_once);
    tcase_add_test(tc, new_leader_unlabels_others_first);
    tcase_add_test(tc, failures_back_off_with_a_cap);
    tcase_add_test(tc, own_pod_missing_is_a_failure);
    tcase_add_test(tc, losing_leadership_drops_the_sweep);
    tcase_add_test(tc, a_late_true_is_corrected);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(podlabel_suite());
}
