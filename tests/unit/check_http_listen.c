/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for cmd/leaderd/http_listen: starting the sidecar's HTTP server
 * (its errors, all interfaces, IPv6 loopback) and stopping it, and the
 * limits it runs libmicrohttpd with against oversize and malformed
 * requests, on 127.0.0.1.
 */
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../../cmd/leaderd/http/http.h"
#include "support/http_client.h"
#include "support/http_rig.h"
#include "support/run_suite.h"

START_TEST(start_errors_and_stop)
{
    struct ld_errinfo err;
    /* The port is taken by the fixture's server: the system refused it. */
    struct ld_http *h = ld_http_start("127.0.0.1", rig.port, &rig.st, &rig.met, &err);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(err.code, LD_ESYS);
    char want[64];
    snprintf(want, sizeof(want), "listen 127.0.0.1:%d: %s", rig.port,
             strerror(EADDRINUSE));
    ck_assert_str_eq(err.msg, want);

    /* A name that does not resolve: the caller's to fix (or the system's,
     * when no resolver answers here). */
    h = ld_http_start("no-such-host.invalid", 0, &rig.st, &rig.met, &err);
    ck_assert_ptr_null(h);
    ck_assert_msg(err.code == LD_EINVAL || err.code == LD_ESYS, "%s", err.msg);
    ck_assert_ptr_nonnull(strstr(err.msg, "listen no-such-host.invalid:0: "));

    h = ld_http_start("127.0.0.1", 70000, &rig.st, &rig.met, &err);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(err.code, LD_EINVAL);
    ck_assert_str_eq(err.msg, "listen: port 70000 out of range");

    /* A caller may not want the detail. */
    ck_assert_ptr_null(ld_http_start("127.0.0.1", -1, &rig.st, &rig.met, NULL));

    /* Shard routes need the group's layout: none is no server, not a crash
     * at the first GET /shards. */
    struct ld_http_options shards = {.mode = &ld_http_shard_mode};
    h = ld_http_start_opts("127.0.0.1", 0, &rig.st, &rig.met, &shards, &err);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(err.code, LD_EINVAL);

    /* All interfaces, reached over loopback. */
    h = ld_http_start("", 0, &rig.st, &rig.met, &err);
    ck_assert_msg(h != NULL, "%s", err.msg);
    struct http_resp r;
    rig_fetch_at(ld_http_port(h), NULL, "/readyz", &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_int_eq(r.status, 503);
    int old = ld_http_port(h);
    ld_http_stop(h);
    /* Stopped means closed. */
    rig_fetch_at(old, NULL, "/readyz", &r);
    ck_assert_int_eq(r.rc, CURLE_COULDNT_CONNECT);

    /* IPv6 loopback, where the host has it. */
    h = ld_http_start("::1", 0, &rig.st, &rig.met, &err);
    if (h) {
        char url[64];
        CURL *c = curl_easy_init();
        snprintf(url, sizeof(url), "http://[::1]:%d/readyz", ld_http_port(h));
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c, CURLOPT_PROXY, "");
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
        ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        ck_assert_int_eq(status, 503);
        curl_easy_cleanup(c);
        ld_http_stop(h);
    }
    ld_http_stop(NULL);
}
END_TEST

START_TEST(garbage_and_oversize_requests)
{
    struct http_resp r;
    char path[40000];
    rig_publish("me", 60000, 1);
    snprintf(path, sizeof(path), "/leader?x=");
    memset(path + 10, 'a', sizeof(path) - 11);
    path[sizeof(path) - 1] = '\0';
    rig_fetch(NULL, path, &r);
    ck_assert_msg(r.status >= 400 && r.status < 500, "oversize URL: %ld", r.status);

    /* Complete lines of junk (a TLS hello, no method, no version) end the
     * connection, or get a 4xx; an unknown HTTP version gets 505. Junk
     * without a line end is a slow client: see the eviction test. */
    static const struct {
        const char *bytes;
        size_t len;
    } junk[] = {
#define JUNK(lit) {lit, sizeof(lit) - 1}
        JUNK("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
        JUNK("GARBAGE\r\n\r\n"),
        JUNK("GET\r\n\r\n"),
        JUNK("GET /leader\r\n\r\n"),
        JUNK("GET / HTTP/9.9\r\n\r\n"),
        JUNK("GET / HTTP/1.1\r\nno colon\r\n\r\n"),
#undef JUNK
    };
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        char buf[512];
        int fd = http_connect_idle(rig.port);
        ck_assert_int_ge(fd, 0);
        struct timeval tv = {5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        ck_assert_int_eq(write(fd, junk[i].bytes, junk[i].len), (ssize_t)junk[i].len);
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        ck_assert_msg(n >= 0, "no answer to junk %zu: %s", i, strerror(errno));
        buf[n > 0 ? n : 0] = '\0';
        ck_assert_msg(n == 0 || strncmp(buf + 8, " 4", 2) == 0 ||
                          strncmp(buf + 8, " 505", 4) == 0,
                      "junk %zu: %s", i, buf);
        close(fd);
    }
    rig_fetch(NULL, "/leader", &r);
    ck_assert_int_eq(r.status, 200);
}
END_TEST

static Suite *http_listen_suite(void)
{
    Suite *s = suite_create("http_listen");
    TCase *tc = tcase_create("server");
    tcase_add_checked_fixture(tc, rig_setup, rig_teardown);
    tcase_add_test(tc, start_errors_and_stop);
    tcase_add_test(tc, garbage_and_oversize_requests);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = ld_test_run(http_listen_suite());
    curl_global_cleanup();
    return rc;
}
