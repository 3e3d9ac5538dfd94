/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/rest: transport results in, enum ld_err and
 * ld_errinfo out. Every HTTP status the client must tell apart, the
 * message forms, where Retry-After comes from, and that nothing of a
 * caller's earlier error survives.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "rest.h"
#include "support/run_suite.h"

/* An HTTP answer of status with body (NULL: empty) and no Retry-After. */
static struct ld_http_result answer(long status, const char *body)
{
    struct ld_http_result r;
    memset(&r, 0, sizeof(r));
    ld_errinfo_clear(&r.err);
    r.rc = LD_OK;
    r.status = status;
    r.body = body ? body : "";
    r.body_len = body ? strlen(body) : 0;
    r.retry_after_ms = -1;
    return r;
}

/* A metav1.Status failure body. */
static const char *status_body(const char *reason, const char *message)
{
    static char text[512];
    snprintf(text, sizeof(text),
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
             "\"message\":\"%s\",\"reason\":\"%s\"}",
             message, reason);
    return text;
}

/* An errinfo full of an earlier failure, to see that none of it stays. */
static struct ld_errinfo dirty(void)
{
    struct ld_errinfo e;
    ld_errinfo_set(&e, LD_ETIMEOUT, "an earlier failure");
    e.http_status = 999;
    e.retry_after_ms = 12345;
    snprintf(e.reason, sizeof(e.reason), "Stale");
    return e;
}

START_TEST(every_status_the_client_tells_apart_maps_to_its_code)
{
    static const struct {
        long status;
        const char *reason;
        enum ld_err code;
    } cases[] = {
        {400, "BadRequest", LD_EBADREQUEST},
        {401, "Unauthorized", LD_EUNAUTHORIZED},
        {403, "Forbidden", LD_EFORBIDDEN},
        {404, "NotFound", LD_ENOTFOUND},
        {409, "Conflict", LD_ECONFLICT},
        {409, "AlreadyExists", LD_EEXISTS},
        {410, "Expired", LD_EGONE},
        {422, "Invalid", LD_EINVALID},
        {429, "TooManyRequests", LD_ETOOMANY},
        {500, "InternalError", LD_ESERVER},
        {503, "ServiceUnavailable", LD_ESERVER},
        {504, "Timeout", LD_ESERVER},
        {302, "", LD_EHTTP},
        {418, "", LD_EHTTP},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct ld_http_result r =
            answer(cases[i].status, status_body(cases[i].reason, "no"));
        struct ld_errinfo e = dirty();
        ck_assert_int_eq(ld_rest_outcome(&r, "PUT", "/x", &e), cases[i].code);
        ck_assert_int_eq(e.code, cases[i].code);
        ck_assert_int_eq(e.http_status, cases[i].status);
        ck_assert_str_eq(e.reason, cases[i].reason);
    }
}
END_TEST

START_TEST(message_names_the_request_the_status_and_the_server_text)
{
    struct ld_http_result r =
        answer(404, status_body("NotFound",
                                "leases.coordination.k8s.io \\\"demo\\\" not found"));
    struct ld_errinfo e = dirty();
    ld_rest_outcome(&r, "GET", "/namespaces/default/leases/demo", &e);
    ck_assert_str_eq(e.msg, "GET /namespaces/default/leases/demo: HTTP 404: "
                            "leases.coordination.k8s.io \"demo\" not found");
}
END_TEST

START_TEST(empty_body_gives_the_status_line_alone_and_no_reason)
{
    struct ld_http_result r = answer(502, NULL);
    struct ld_errinfo e = dirty();
    ck_assert_int_eq(ld_rest_outcome(&r, "PATCH", "pods", &e), LD_ESERVER);
    ck_assert_str_eq(e.msg, "PATCH pods: HTTP 502");
    ck_assert_str_eq(e.reason, "");
    ck_assert_int_eq(e.retry_after_ms, 0);
}
END_TEST

/* A proxy in front of the API server answers in HTML or plain text. */
START_TEST(body_that_is_no_status_lends_its_first_line)
{
    struct ld_http_result r = answer(503, "upstream connect error\nmore detail\n");
    struct ld_errinfo e;
    ck_assert_int_eq(ld_rest_outcome(&r, "POST", "events", &e), LD_ESERVER);
    ck_assert_str_eq(e.msg, "POST events: HTTP 503: upstream connect error");
}
END_TEST

START_TEST(retry_after_header_wins_over_the_status_details)
{
    const char *body = "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\","
                       "\"message\":\"slow down\",\"details\":{\"retryAfterSeconds\":7}}";
    struct ld_http_result r = answer(429, body);
    struct ld_errinfo e = dirty();

    ck_assert_int_eq(ld_rest_outcome(&r, "PUT", "/x", &e), LD_ETOOMANY);
    ck_assert_int_eq(e.retry_after_ms, 7000);

    r.retry_after_ms = 2000;
    ck_assert_int_eq(ld_rest_outcome(&r, "PUT", "/x", &e), LD_ETOOMANY);
    ck_assert_int_eq(e.retry_after_ms, 2000);
}
END_TEST

START_TEST(success_is_ok_with_its_status_and_nothing_else)
{
    struct ld_http_result r = answer(201, "{\"kind\":\"Lease\"}");
    struct ld_errinfo e = dirty();
    ck_assert_int_eq(ld_rest_outcome(&r, "POST", "/x", &e), LD_OK);
    ck_assert_int_eq(e.code, LD_OK);
    ck_assert_int_eq(e.http_status, 201);
    ck_assert_str_eq(e.msg, "");
    ck_assert_str_eq(e.reason, "");
    ck_assert_int_eq(e.retry_after_ms, 0);
}
END_TEST

START_TEST(transport_failure_is_passed_on_as_it_is)
{
    struct ld_http_result r = answer(0, NULL);
    struct ld_errinfo e = dirty();
    r.rc = LD_ECONNECT;
    ld_errinfo_set(&r.err, LD_ECONNECT, "GET /x: could not connect");
    ck_assert_int_eq(ld_rest_outcome(&r, "GET", "/x", &e), LD_ECONNECT);
    ck_assert_int_eq(e.code, LD_ECONNECT);
    ck_assert_int_eq(e.http_status, 0);
    ck_assert_str_eq(e.msg, "GET /x: could not connect");
}
END_TEST

/* A watch names itself elsewhere: without a verb the message is the
 * server's, and a success other than the one wanted is no success. */
START_TEST(error_without_a_verb_keeps_the_server_message_alone)
{
    struct ld_http_result r =
        answer(410, status_body("Expired", "too old resource version"));
    struct ld_errinfo e = dirty();
    ck_assert_int_eq(ld_rest_error(&r, NULL, NULL, &e), LD_EGONE);
    ck_assert_str_eq(e.msg, "too old resource version");
    ck_assert_str_eq(e.reason, "Expired");
    ck_assert_int_eq(e.http_status, 410);

    r = answer(201, NULL);
    ck_assert_int_eq(ld_rest_error(&r, NULL, NULL, &e), LD_EHTTP);
    ck_assert_int_eq(e.http_status, 201);
}
END_TEST

/* A Status that is no HTTP answer (a watch's ERROR event) is read the same
 * way, with the status it carries. */
START_TEST(status_alone_maps_like_an_answer)
{
    const char *body = status_body("Expired", "too old resource version: 5 (9)");
    struct ld_errinfo e = dirty();
    ck_assert_int_eq(ld_rest_status(410, body, strlen(body), &e), LD_EGONE);
    ck_assert_int_eq(e.http_status, 410);
    ck_assert_str_eq(e.reason, "Expired");
    ck_assert_str_eq(e.msg, "too old resource version: 5 (9)");
    ck_assert_int_eq(e.retry_after_ms, 0);

    ck_assert_int_eq(ld_rest_status(200, "", 0, &e), LD_EHTTP);
    ck_assert_str_eq(e.msg, "");
}
END_TEST

static Suite *rest_suite(void)
{
    Suite *s = suite_create("rest");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_status_the_client_tells_apart_maps_to_its_code);
    tcase_add_test(tc, message_names_the_request_the_status_and_the_server_text);
    tcase_add_test(tc, empty_body_gives_the_status_line_alone_and_no_reason);
    tcase_add_test(tc, body_that_is_no_status_lends_its_first_line);
    tcase_add_test(tc, retry_after_header_wins_over_the_status_details);
    tcase_add_test(tc, success_is_ok_with_its_status_and_nothing_else);
    tcase_add_test(tc, transport_failure_is_passed_on_as_it_is);
    tcase_add_test(tc, error_without_a_verb_keeps_the_server_message_alone);
    tcase_add_test(tc, status_alone_maps_like_an_answer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(rest_suite());
}
