/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_hook_proxy: the API write gate's writes in flight as a release hold
 * (cmd/leaderd/hooks/hook_proxy.h). First the counts and the wake-up alone: a key
 * holds while a write of it is counted, the eventfd is written only when
 * the last one ends while the shell waits, and take_wake reads it. Then
 * with the proxy (proxy.h) in process, in front of support/fake_http: a
 * write held upstream holds the release until the step-down's cut ends it,
 * which wakes the shell; an answered write holds nothing; a read is never
 * counted.
 */
#include <check.h>
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cmd/leaderd/hooks/hook_proxy.h"
#include "../../cmd/leaderd/proxy/proxy.h"
#include "../../cmd/leaderd/core/state.h"
#include "clock.h"
#include "kubeconfig.h"
#include "log.h"
#include "support/fake_http.h"
#include "support/run_suite.h"

/* How long a write of unknown fate forbids its key's release. */
#define FORBID_MS 60000

static bool fd_readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

static bool holds(const struct ld_hook *h)
{
    return h->holds_release(h->ctx, 0);
}

/* ---- the counts alone ---- */

START_TEST(a_key_holds_while_a_write_of_it_is_counted)
{
    struct ld_hook_proxy *hp = ld_hook_proxy_new(2, FORBID_MS);
    ck_assert_ptr_nonnull(hp);
    struct ld_hook h0 = ld_hook_proxy_bind(hp, 0, 1);
    struct ld_hook h1 = ld_hook_proxy_bind(hp, 1, 2);
    ck_assert_int_eq(h1.hold, LD_HOOK_HOLD_SAFETY);
    ck_assert_uint_eq(h1.election, 2);
    ck_assert(!holds(&h1));
    ld_hook_proxy_sent(hp, 1);
    ld_hook_proxy_sent(hp, 1);
    ld_hook_proxy_sent(hp, 7); /* no such key: not counted */
    ck_assert(holds(&h1));
    ck_assert(!holds(&h0));
    ld_hook_proxy_ended(hp, 1, LD_WRITE_ANSWERED);
    ck_assert(holds(&h1));
    ck_assert(!fd_readable(ld_hook_proxy_fd(hp), 0));
    /* The last one, while the shell waits. */
    ld_hook_proxy_ended(hp, 1, LD_WRITE_ANSWERED);
    ck_assert(fd_readable(ld_hook_proxy_fd(hp), 0));
    ck_assert(!holds(&h1));
    ck_assert_ptr_null(h1.take_wake); /* key 0's hook reads it for all */
    ck_assert(h0.take_wake(h0.ctx));
    ck_assert(!fd_readable(ld_hook_proxy_fd(hp), 0));
    ck_assert(!h0.take_wake(h0.ctx));
    ld_hook_proxy_free(hp);
}
END_TEST

/* A leader's ordinary writes never wake the shell: nobody waits. */
START_TEST(no_wake_up_while_nobody_waits)
{
    struct ld_hook_proxy *hp = ld_hook_proxy_new(1, FORBID_MS);
    ck_assert_ptr_nonnull(hp);
    struct ld_hook h = ld_hook_proxy_bind(hp, 0, 0);
    ck_assert(!holds(&h)); /* asked with nothing in flight: not waiting */
    for (int i = 0; i < 3; i++) {
        ld_hook_proxy_sent(hp, 0);
        ld_hook_proxy_ended(hp, 0, LD_WRITE_ANSWERED);
    }
    ck_assert(!fd_readable(ld_hook_proxy_fd(hp), 0));
    ck_assert(!h.take_wake(h.ctx));
    ld_hook_proxy_free(hp);
}
END_TEST

/* A write of unknown fate forbids its key's release for the window after
 * it ended, not for ever; a new start of leading ends it at once. */
START_TEST(an_unknown_fate_forbids_the_release_for_a_window)
{
    struct ld_hook_proxy *hp = ld_hook_proxy_new(2, FORBID_MS);
    ck_assert_ptr_nonnull(hp);
    struct ld_hook h1 = ld_hook_proxy_bind(hp, 1, 1);
    struct ld_hook h0 = ld_hook_proxy_bind(hp, 0, 0);
    int64_t t = ld_mono_ms();
    ld_hook_proxy_sent(hp, 1);
    ld_hook_proxy_ended(hp, 1, LD_WRITE_FATE_UNKNOWN);
    ck_assert(h1.forbids_release(h1.ctx, t));
    ck_assert(h1.forbids_release(h1.ctx, ld_mono_ms() + FORBID_MS - 1000));
    ck_assert(!h1.forbids_release(h1.ctx, ld_mono_ms() + FORBID_MS + 1000));
    ck_assert(!h0.forbids_release(h0.ctx, t)); /* another key's write */
    struct ld_election_status st = {.leading = true};
    h1.on_publish(h1.ctx, &st, t);
    ck_assert(!h1.forbids_release(h1.ctx, t));
    ld_hook_proxy_free(hp);
}
END_TEST

/* ---- with the proxy ---- */

struct rig {
    struct fake_http *fake;
    struct ld_state st;
    struct ld_metrics m;
    struct ld_hook_proxy *hp;
    struct ld_hook hook;
    struct ld_proxy *proxy;
    char base[64];
};

/* A step-down on purpose: "me" still holds the Lease and its term lasts
 * term_ms more, but this replica no longer leads. */
static void publish_stepped_down(struct rig *r, int64_t term_ms)
{
    struct ld_snapshot s;
    ld_state_read(&r->st, &s);
    s.observed = true;
    s.leading = false;
    snprintf(s.leader, sizeof(s.leader), "me");
    s.term_until_ms = ld_mono_ms() + term_ms;
    s.heartbeat_ms = ld_mono_ms();
    ld_state_publish(&r->st, &s);
}

static bool forbids(const struct ld_hook *h)
{
    return h->forbids_release(h->ctx, ld_mono_ms());
}

static void publish(struct rig *r, bool leading)
{
    struct ld_snapshot s;
    ld_state_read(&r->st, &s);
    s.observed = true;
    s.leading = leading;
    snprintf(s.leader, sizeof(s.leader), "%s", leading ? "me" : "other");
    s.lead_until_ms = leading ? ld_mono_ms() + 60000 : 0;
    s.term_until_ms = s.leading ? s.lead_until_ms : INT64_MIN;
    s.heartbeat_ms = ld_mono_ms();
    ld_state_publish(&r->st, &s);
}

static void rig_start(struct rig *r)
{
    struct ld_kube_config kc;
    struct ld_errinfo err;
    memset(r, 0, sizeof(*r));
    r->fake = fake_http_start(NULL, NULL);
    ck_assert_ptr_nonnull(r->fake);
    ld_kube_config_init(&kc);
    kc.server = strdup(fake_http_url(r->fake));
    kc.token = strdup("leaderd-token");
    ld_state_init(&r->st, "ns/lease", "me", 0);
    ld_metrics_init(&r->m);
    publish(r, true);
    r->hp = ld_hook_proxy_new(1, FORBID_MS);
    ck_assert_ptr_nonnull(r->hp);
    r->hook = ld_hook_proxy_bind(r->hp, 0, 0);
    struct ld_proxy_options po = {.writes = r->hp};
    r->proxy = ld_proxy_start("127.0.0.1", 0, &kc, &r->st, &r->m, &po, &err);
    ck_assert_msg(r->proxy != NULL, "%s", err.msg);
    ld_kube_config_clear(&kc);
    snprintf(r->base, sizeof(r->base), "http://127.0.0.1:%d", ld_proxy_port(r->proxy));
}

static void rig_stop(struct rig *r)
{
    ld_proxy_stop(r->proxy);
    ld_hook_proxy_free(r->hp);
    fake_http_stop(r->fake);
    ld_metrics_destroy(&r->m);
    ld_state_destroy(&r->st);
}

struct call {
    const char *base, *method;
    long timeout_ms; /* the client hangs up then; 0 for 20 s */
    long status;
    char resp[1024]; /* the answer's body, cut short */
    size_t resp_len;
};

static size_t call_body(char *b, size_t size, size_t n, void *ud)
{
    struct call *c = ud;
    size_t len = size * n, room = sizeof(c->resp) - 1 - c->resp_len;
    memcpy(c->resp + c->resp_len, b, len < room ? len : room);
    c->resp_len += len < room ? len : room;
    c->resp[c->resp_len] = '\0';
    return len;
}

static void *call_run(void *arg)
{
    struct call *c = arg;
    char url[256];
    CURL *e = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    snprintf(url, sizeof(url), "%s/api/v1/namespaces/a/configmaps", c->base);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method);
    if (strcmp(c->method, "GET") == 0)
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    else
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "{}");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, call_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, c->timeout_ms ? c->timeout_ms : 20000L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &c->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    return NULL;
}

/* Starts a POST through r's proxy in thread t that the fake upstream
 * answers with status and body after delay_ms; returns once the write has
 * reached the upstream. */
static void start_held_write(struct rig *r, pthread_t *t, struct call *c, int status,
                             const char *body, int delay_ms)
{
    fake_http_push(r->fake, &(struct fake_http_response){
                                .status = status, .body = body, .delay_ms = delay_ms});
    *c = (struct call){.base = r->base, .method = "POST"};
    ck_assert_int_eq(pthread_create(t, NULL, call_run, c), 0);
    ck_assert(fake_http_wait_requests(r->fake, 1, 5000));
}

/* The shell's wait on the hook's eventfd ends, and the hook holds nothing
 * any more. */
static void hold_ends(struct rig *r, int within_ms)
{
    ck_assert(fd_readable(ld_hook_proxy_fd(r->hp), within_ms));
    ck_assert(r->hook.take_wake(r->hook.ctx));
    ck_assert(!holds(&r->hook));
}

/* A write held upstream holds the release; another holder in view cuts
 * it, which wakes the shell, which finds nothing held any more but the
 * release forbidden: the cut write may still be applied. */
START_TEST(a_write_held_upstream_holds_until_its_cut)
{
    struct rig r;
    pthread_t t;
    rig_start(&r);
    struct call c;
    start_held_write(&r, &t, &c, 200, "{}", 10000);
    ck_assert(holds(&r.hook));
    publish(&r, false);
    hold_ends(&r, 5000);
    ck_assert(forbids(&r.hook));
    pthread_join(t, NULL);
    ck_assert_int_eq(c.status, 503);
    ck_assert_ptr_nonnull(strstr(c.resp, "cut"));
    rig_stop(&r);
}
END_TEST

/* A step-down on purpose does not cut a write already sent: it runs to its
 * answer, which the client gets, and holds the release until then; the
 * release is then free (the write's fate is known). */
START_TEST(a_step_down_on_purpose_lets_a_sent_write_run_to_its_answer)
{
    struct rig r;
    pthread_t t;
    rig_start(&r);
    struct call c;
    start_held_write(&r, &t, &c, 201, "{\"done\":1}", 1500);
    publish_stepped_down(&r, 60000);
    ck_assert(holds(&r.hook));
    hold_ends(&r, 10000);
    ck_assert(!forbids(&r.hook));
    pthread_join(t, NULL);
    ck_assert_int_eq(c.status, 201);
    ck_assert_ptr_nonnull(strstr(c.resp, "done"));
    ck_assert_uint_eq(r.m.proxy.aborted, 0);
    rig_stop(&r);
}
END_TEST

/* A client that hangs up does not end its sent write: the write runs to
 * its answer (discarded) and holds the release meanwhile. */
START_TEST(a_sent_write_outlives_its_clients_hang_up)
{
    struct rig r;
    rig_start(&r);
    fake_http_push(r.fake, &(struct fake_http_response){
                               .status = 201, .body = "{}", .delay_ms = 1500});
    struct call c = {.base = r.base, .method = "POST", .timeout_ms = 300};
    call_run(&c); /* returns once the client gave up */
    ck_assert_int_eq(fake_http_request_count(r.fake), 1);
    ck_assert(holds(&r.hook));
    publish_stepped_down(&r, 60000);
    ck_assert(holds(&r.hook));
    hold_ends(&r, 10000);
    ck_assert(!forbids(&r.hook));
    ck_assert_uint_eq(r.m.proxy.aborted, 0);
    rig_stop(&r);
}
END_TEST

/* A sent write still unanswered at its term's deadline is cut then (not at
 * the step-down), and its fate is unknown: the release is forbidden until
 * this replica leads again. */
START_TEST(a_write_cut_at_its_terms_deadline_forbids_the_release)
{
    struct rig r;
    pthread_t t;
    rig_start(&r);
    struct call c;
    start_held_write(&r, &t, &c, 200, "{}", 10000);
    int64_t t0 = ld_mono_ms();
    publish_stepped_down(&r, 800);
    ck_assert(holds(&r.hook)); /* the shell waits */
    hold_ends(&r, 5000);
    ck_assert_int_ge(ld_mono_ms() - t0, 800);
    ck_assert(forbids(&r.hook));
    pthread_join(t, NULL);
    ck_assert_int_eq(c.status, 503);
    ck_assert_ptr_nonnull(strstr(c.resp, "term"));
    ck_assert_uint_eq(r.m.proxy.aborted, 1);
    /* A new term starts a new count. */
    struct ld_election_status st = {.leading = true};
    r.hook.on_publish(r.hook.ctx, &st, 0);
    ck_assert(!forbids(&r.hook));
    rig_stop(&r);
}
END_TEST

/* Answered, a write holds nothing; a read held upstream is never counted. */
START_TEST(answered_writes_and_reads_hold_nothing)
{
    struct rig r;
    pthread_t t;
    rig_start(&r);
    fake_http_push(r.fake, &(struct fake_http_response){.status = 201, .body = "{}"});
    struct call w = {.base = r.base, .method = "POST"};
    call_run(&w);
    ck_assert_int_eq(w.status, 201);
    ck_assert(!holds(&r.hook));
    fake_http_push(r.fake, &(struct fake_http_response){
                               .status = 200, .body = "{}", .delay_ms = 1000});
    struct call g = {.base = r.base, .method = "GET"};
    ck_assert_int_eq(pthread_create(&t, NULL, call_run, &g), 0);
    ck_assert(fake_http_wait_requests(r.fake, 2, 5000));
    ck_assert(!holds(&r.hook));
    pthread_join(t, NULL);
    ck_assert_int_eq(g.status, 200);
    rig_stop(&r);
}
END_TEST

static void quiet_sink(void *ctx, enum ld_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

static void setup(void)
{
    ld_log_set_sink(quiet_sink, NULL, LD_LOG_DEBUG);
}

static void teardown(void)
{
    ld_log_set_sink(NULL, NULL, LD_LOG_INFO);
}

static Suite *hook_proxy_suite(void)
{
    Suite *s = suite_create("hook_proxy");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, a_key_holds_while_a_write_of_it_is_counted);
    tcase_add_test(tc, no_wake_up_while_nobody_waits);
    tcase_add_test(tc, an_unknown_fate_forbids_the_release_for_a_window);
    tcase_add_test(tc, a_write_held_upstream_holds_until_its_cut);
    tcase_add_test(tc, answered_writes_and_reads_hold_nothing);
    tcase_add_test(tc, a_step_down_on_purpose_lets_a_sent_write_run_to_its_answer);
    tcase_add_test(tc, a_sent_write_outlives_its_clients_hang_up);
    tcase_add_test(tc, a_write_cut_at_its_terms_deadline_forbids_the_release);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    return ld_test_run(hook_proxy_suite());
}
