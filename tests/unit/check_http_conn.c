/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/http_conn: a sidecar HTTP server filled with
 * idle and slow connections closes the longest idle ones, so probes always
 * find room.
 */
#include <check.h>
#include <curl/curl.h>
#include <unistd.h>

#include "../../cmd/leaderd/http/http.h"
#include "clock.h"
#include "support/http_client.h"
#include "support/http_rig.h"
#include "support/run_suite.h"

START_TEST(full_server_makes_room_for_probes)
{
    enum { IDLE = 60 };
    struct ld_http_options o = {.max_connections = 32};
    struct ld_http *h = rig_start_with(&o);
    int hp = ld_http_port(h);
    int fds[IDLE];
    struct http_resp r;
    struct ld_http_stats stats;
    rig_publish("me", 60000, 1);
    for (int i = 0; i < IDLE; i++) {
        fds[i] = http_connect_idle(hp);
        ck_assert_int_ge(fds[i], 0);
        /* A slowloris start on some of them. */
        if (i % 2 && write(fds[i], "GET / HTTP/1.1\r\nX-A: ", 21) != 21)
            ck_abort_msg("write failed");
    }
    for (int i = 0; i < 3; i++) {
        int64_t t0 = ld_mono_ms();
        rig_fetch_at(hp, NULL, "/healthz", &r);
        ck_assert_msg(r.rc == CURLE_OK, "%s", curl_easy_strerror(r.rc));
        ck_assert_int_eq(r.status, 200);
        ck_assert_int_lt(rig_elapsed_ms(t0), 1000);
    }
    ld_http_get_stats(h, &stats);
    ck_assert_uint_eq(stats.max_connections, 32);
    ck_assert_uint_le(stats.connections, 32);
    ck_assert_uint_ge(stats.evicted, IDLE - 32);
    for (int i = 0; i < IDLE; i++)
        close(fds[i]);
    ld_http_stop(h);
}
END_TEST

static Suite *http_conn_suite(void)
{
    Suite *s = suite_create("http_conn");
    TCase *tc = tcase_create("server");
    tcase_add_checked_fixture(tc, rig_setup, rig_teardown);
    tcase_add_test(tc, full_server_makes_room_for_probes);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = ld_test_run(http_conn_suite());
    curl_global_cleanup();
    return rc;
}
