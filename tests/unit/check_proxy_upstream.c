/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the API write gate's upstream side (cmd/leaderd/proxy,
 * proxy_upstream): what the API server sees of a write at the wire. The
 * proxy runs in process between raw-socket clients and a raw-socket
 * upstream written here, which counts every request, can reset a
 * connection instead of answering, and tells how a connection it holds
 * was ended (FIN or RST). A real struct ld_state is published by the test.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <jansson.h>

#include "../../cmd/leaderd/core/metrics.h"
#include "../../cmd/leaderd/proxy/proxy.h"
#include "../../cmd/leaderd/core/state.h"
#include "clock.h"
#include "support/fake_clock.h"
#include "support/run_suite.h"

/* ---- the upstream: one thread per connection ---- */

/* What the upstream does with a request once it has read it whole. */
enum up_act {
    UP_ANSWER, /* 200 with a small body; the connection stays open */
    UP_HOLD,   /* nothing: waits for the client to end the connection */
    UP_RESET   /* resets the connection (SO_LINGER 0, close) */
};

#define UP_CONNS 256

struct upstream {
    int lfd, port;
    pthread_t acceptor;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Under mu. */
    enum up_act on_read, on_write; /* GET; any other method */
    int reads, writes;             /* requests read whole */
    int fins, resets;              /* held connections the client ended */
    int fds[UP_CONNS];
    pthread_t threads[UP_CONNS];
    int nconns;
    bool stopping;
};

/* Reads one request (headers, then Content-Length bytes of body) from fd;
 * returns its method's first letter or 0 at the end of the connection. */
static char up_read_request(int fd)
{
    char buf[8192] = "";
    size_t len = 0;
    char *end = NULL;
    while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
        if (len == sizeof(buf))
            return 0;
        ssize_t n = recv(fd, buf + len, sizeof(buf) - len, 0);
        if (n <= 0)
            return 0;
        len += (size_t)n;
    }
    size_t head = (size_t)(end + 4 - buf), body = 0;
    const char *cl = memmem(buf, head, "Content-Length:", 15);
    if (cl)
        body = strtoul(cl + 15, NULL, 10);
    size_t have = len - head;
    char sink[4096];
    while (have < body) {
        ssize_t n = recv(fd, sink, sizeof(sink), 0);
        if (n <= 0)
            return 0;
        have += (size_t)n;
    }
    return buf[0];
}

struct up_conn {
    struct upstream *u;
    int fd, i; /* i: its place in u->fds */
};

static void *up_serve(void *arg)
{
    struct up_conn *c = arg;
    struct upstream *u = c->u;
    int fd = c->fd, i = c->i;
    free(c);
    for (;;) {
        char m = up_read_request(fd);
        if (!m)
            break;
        pthread_mutex_lock(&u->mu);
        bool read = m == 'G';
        if (read)
            u->reads++;
        else
            u->writes++;
        enum up_act act = read ? u->on_read : u->on_write;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
        if (act == UP_ANSWER) {
            static const char ok[] =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                "Content-Length: 2\r\n\r\n{}";
            if (send(fd, ok, sizeof(ok) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(ok) - 1)
                break;
            continue;
        }
        if (act == UP_RESET) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            break;
        }
        char b[256];
        ssize_t n;
        while ((n = recv(fd, b, sizeof(b), 0)) > 0)
            ;
        int e = errno;
        pthread_mutex_lock(&u->mu);
        if (n == 0 && !u->stopping)
            u->fins++;
        else if (n < 0 && e == ECONNRESET)
            u->resets++;
        pthread_cond_broadcast(&u->cv);
        pthread_mutex_unlock(&u->mu);
        break;
    }
    /* Under mu: up_stop never shuts down a number already reused. */
    pthread_mutex_lock(&u->mu);
    close(fd);
    u->fds[i] = -1;
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

static void *up_accept(void *arg)
{
    struct upstream *u = arg;
    for (;;) {
        struct sockaddr_in peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(u->lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
        if (fd < 0)
            return NULL; /* the listener was shut down */
        struct up_conn *c = malloc(sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        pthread_mutex_lock(&u->mu);
        /* Past its room the upstream drops the connection: the proxy's
         * client then gets a 502 the test does not expect. */
        if (u->nconns < UP_CONNS) {
            *c = (struct up_conn){.u = u, .fd = fd, .i = u->nconns};
            u->fds[u->nconns] = fd;
            if (pthread_create(&u->threads[u->nconns], NULL, up_serve, c) == 0) {
                u->nconns++;
                c = NULL;
                fd = -1;
            }
        }
        pthread_mutex_unlock(&u->mu);
        free(c);
        if (fd >= 0)
            close(fd);
    }
}

static void up_start(struct upstream *u)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    memset(u, 0, sizeof(*u));
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv, NULL);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    u->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(u->lfd, 0);
    ck_assert_int_eq(bind(u->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(u->lfd, 256), 0);
    ck_assert_int_eq(getsockname(u->lfd, (struct sockaddr *)&sa, &sl), 0);
    u->port = ntohs(sa.sin_port);
    ck_assert_int_eq(pthread_create(&u->acceptor, NULL, up_accept, u), 0);
}

static void up_stop(struct upstream *u)
{
    shutdown(u->lfd, SHUT_RDWR);
    pthread_join(u->acceptor, NULL);
    close(u->lfd);
    pthread_mutex_lock(&u->mu);
    u->stopping = true;
    for (int i = 0; i < u->nconns; i++)
        if (u->fds[i] >= 0)
            shutdown(u->fds[i], SHUT_RDWR);
    pthread_mutex_unlock(&u->mu);
    for (int i = 0; i < u->nconns; i++)
        pthread_join(u->threads[i], NULL);
    pthread_cond_destroy(&u->cv);
    pthread_mutex_destroy(&u->mu);
}

static void up_set(struct upstream *u, enum up_act on_read, enum up_act on_write)
{
    pthread_mutex_lock(&u->mu);
    u->on_read = on_read;
    u->on_write = on_write;
    pthread_mutex_unlock(&u->mu);
}

/* Waits until *field (one of u's counters) reaches n; false after 5 s. */
/* Waits for the event; the bound only ends a run that would hang. It is
 * generous: 64 fresh TLS connections (a write never reuses one) take
 * seconds under the sanitizers on a loaded machine. */
static bool up_wait(struct upstream *u, const int *field, int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&u->mu);
    int rc = 0;
    while (*field < n && rc == 0)
        rc = pthread_cond_timedwait(&u->cv, &u->mu, &until);
    bool ok = *field >= n;
    pthread_mutex_unlock(&u->mu);
    return ok;
}

static int up_count(struct upstream *u, const int *field)
{
    pthread_mutex_lock(&u->mu);
    int n = *field;
    pthread_mutex_unlock(&u->mu);
    return n;
}

/* ---- the proxy and its clients ---- */

struct rig {
    struct upstream up;
    struct ld_state st;
    struct ld_metrics m;
    struct ld_proxy *proxy;
    int port;
};

/* Leading for a minute from now, or (leading false) "other" holds the Lease. */
static void rig_publish(struct rig *r, bool leading)
{
    struct ld_snapshot s;
    memset(&s, 0, sizeof(s));
    snprintf(s.lease, sizeof(s.lease), "ns/lease");
    snprintf(s.identity, sizeof(s.identity), "me");
    snprintf(s.leader, sizeof(s.leader), "%s", leading ? "me" : "other");
    s.observed = true;
    s.leading = leading;
    s.lead_until_ms = leading ? ld_mono_ms() + 60000 : 0;
    s.term_until_ms = s.leading ? s.lead_until_ms : INT64_MIN;
    ld_state_publish(&r->st, &s);
}

static void rig_start(struct rig *r, const struct ld_proxy_options *opts)
{
    struct ld_kube_config kc;
    struct ld_errinfo err;
    char url[64];
    memset(r, 0, sizeof(*r));
    up_start(&r->up);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", r->up.port);
    ld_kube_config_init(&kc);
    kc.server = strdup(url);
    kc.token = strdup("leaderd-token");
    ld_state_init(&r->st, "ns/lease", "me", 0);
    ld_metrics_init(&r->m);
    rig_publish(r, true);
    r->proxy = ld_proxy_start("127.0.0.1", 0, &kc, &r->st, &r->m, opts, &err);
    ck_assert_msg(r->proxy != NULL, "%s", err.msg);
    ld_kube_config_clear(&kc);
    r->port = ld_proxy_port(r->proxy);
}

static void rig_stop(struct rig *r)
{
    ld_proxy_stop(r->proxy);
    up_stop(&r->up);
    ld_metrics_destroy(&r->m);
    ld_state_destroy(&r->st);
}

/* A client socket to the proxy that sent request, its "Host: x" line
 * naming the proxy (the gate answers only requests addressed to it); the
 * caller closes it. */
static int client_send(int port, const char *request)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    char text[512];
    const char *host = strstr(request, "Host: x\r\n");
    ck_assert_ptr_nonnull(host);
    int len = snprintf(text, sizeof(text), "%.*sHost: 127.0.0.1:%d\r\n%s",
                       (int)(host - request), request, port, host + 9);
    ck_assert(len > 0 && (size_t)len < sizeof(text));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(send(fd, text, (size_t)len, MSG_NOSIGNAL), len);
    return fd;
}

struct answer {
    int status;
    char text[4096]; /* head and body, NUL-terminated */
    const char *body;
};

/* Reads one answer (headers and Content-Length bytes) from fd within
 * timeout_ms; false if none came whole. */
static bool client_answer(int fd, int timeout_ms, struct answer *a)
{
    size_t len = 0;
    int64_t until = ld_mono_ms() + timeout_ms;
    memset(a, 0, sizeof(*a));
    for (;;) {
        char *end = memmem(a->text, len, "\r\n\r\n", 4);
        if (end) {
            const char *cl = strcasestr(a->text, "Content-Length:");
            size_t want =
                (size_t)(end + 4 - a->text) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
            if (len >= want && strncmp(a->text, "HTTP/1.1 ", 9) == 0) {
                a->body = end + 4;
                a->status = (int)strtol(a->text + 9, NULL, 10);
                return true;
            }
            if (len >= want)
                return false;
        }
        int left = (int)(until - ld_mono_ms());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) != 1 || len == sizeof(a->text) - 1)
            return false;
        ssize_t n = recv(fd, a->text + len, sizeof(a->text) - 1 - len, 0);
        if (n <= 0)
            return false;
        len += (size_t)n;
        a->text[len] = '\0';
    }
}

/* The answer's Status body: its reason; its message checked to hold
 * words (NULL: anything). */
static void assert_status_body(const struct answer *a, int code, const char *reason,
                               const char *words)
{
    json_error_t e;
    json_t *o = json_loads(a->body, 0, &e);
    ck_assert_msg(o != NULL, "not JSON: %s", a->text);
    ck_assert_str_eq(json_string_value(json_object_get(o, "kind")), "Status");
    ck_assert_str_eq(json_string_value(json_object_get(o, "status")), "Failure");
    ck_assert_str_eq(json_string_value(json_object_get(o, "reason")), reason);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "code")), code);
    if (words)
        ck_assert_msg(strstr(json_string_value(json_object_get(o, "message")), words),
                      "%s", a->body);
    json_decref(o);
}

#define WRITE_REQUEST                                                                    \
    "POST /api/v1/namespaces/a/configmaps HTTP/1.1\r\nHost: x\r\n"                       \
    "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
#define READ_REQUEST "GET /api/v1/namespaces/a/configmaps/c HTTP/1.1\r\nHost: x\r\n\r\n"

/* A write whose upstream connection is reset after the request went out
 * is answered 502 (the API server may or may not have applied it) and is
 * not sent again: an idle pooled connection was there to reuse, and
 * libcurl retries a request from a reused connection that dies before
 * answering. */
START_TEST(a_write_reset_upstream_is_sent_once_and_gets_502)
{
    struct rig r;
    struct answer a;
    rig_start(&r, NULL);
    up_set(&r.up, UP_ANSWER, UP_RESET);
    /* A read leaves its connection in the pool. */
    int fd = client_send(r.port, READ_REQUEST);
    ck_assert(client_answer(fd, 5000, &a));
    ck_assert_int_eq(a.status, 200);
    close(fd);

    fd = client_send(r.port, WRITE_REQUEST);
    ck_assert_msg(client_answer(fd, 10000, &a), "[%s]", a.text);
    close(fd);
    ck_assert_int_eq(a.status, 502);
    assert_status_body(&a, 502, "InternalError", "may or may not have been applied");
    ck_assert_int_eq(up_count(&r.up, &r.up.writes), 1);
    rig_stop(&r);
}
END_TEST

/* Starts r with an upstream that answers reads and holds writes, and
 * sends one write, held there once this returns; returns the client's
 * socket. */
static int start_with_a_held_write(struct rig *r)
{
    rig_start(r, NULL);
    up_set(&r->up, UP_ANSWER, UP_HOLD);
    int fd = client_send(r->port, WRITE_REQUEST);
    ck_assert(up_wait(&r->up, &r->up.writes, 1));
    return fd;
}

/* Reads fd's answer, the 503 of a write cut in flight, and closes fd. */
static void assert_cut_answer(int fd)
{
    struct answer a;
    bool answered = client_answer(fd, 5000, &a);
    close(fd);
    ck_assert_msg(answered, "no answer: [%s]", a.text);
    ck_assert_int_eq(a.status, 503);
    assert_status_body(&a, 503, "ServiceUnavailable", "may or may not have applied it");
}

/* A write cut because leadership ended resets its upstream connection:
 * the API server reads ECONNRESET, not the end of a request that could
 * still be followed by bytes the kernel had queued. */
START_TEST(a_cut_write_resets_its_upstream_connection)
{
    struct rig r;
    int fd = start_with_a_held_write(&r);
    rig_publish(&r, false);
    assert_cut_answer(fd);
    ck_assert(up_wait(&r.up, &r.up.resets, 1));
    ck_assert_int_eq(up_count(&r.up, &r.up.fins), 0);
    rig_stop(&r);
}
END_TEST

/* A poll timeout is counted on CLOCK_MONOTONIC, which a suspend stops: the
 * upstream thread waits for a held write's lead deadline on a timer of the
 * clock that counts the suspend, armed at that deadline, so after a resume
 * the write is cut at once if leadership ran out while the machine slept. */
START_TEST(the_cut_is_awaited_on_the_suspend_counting_clock)
{
    struct rig r;
    int fd = start_with_a_held_write(&r); /* leading for 60 s */
    int64_t until = ld_mono_ms() + 5000;
    bool armed = false;
    while (!armed && ld_mono_ms() < until) {
        armed = boottime_timer_armed(getpid(), 40, 60);
        if (!armed)
            poll(NULL, 0, 20);
    }
    ck_assert_msg(armed, "no CLOCK_BOOTTIME timer armed at the lead deadline");
    rig_publish(&r, false);
    assert_cut_answer(fd);
    rig_stop(&r);
}
END_TEST

/* A write held upstream when the proxy stops is answered 503 saying it
 * was cut in flight, before the connection closes (a client left with a
 * closed connection cannot tell a cut from a hang), and its upstream
 * connection is reset. */
START_TEST(a_write_in_flight_when_the_proxy_stops_gets_503)
{
    struct rig r;
    int fd = start_with_a_held_write(&r);
    ld_proxy_stop(r.proxy);
    r.proxy = NULL;
    assert_cut_answer(fd);
    ck_assert(up_wait(&r.up, &r.up.resets, 1));
    rig_stop(&r);
}
END_TEST

/* A read held upstream when the proxy stops is answered 503 saying the
 * proxy stops, and nothing about a write's fate. */
START_TEST(a_read_in_flight_when_the_proxy_stops_gets_503)
{
    struct rig r;
    struct answer a;
    rig_start(&r, NULL);
    up_set(&r.up, UP_HOLD, UP_ANSWER);
    int fd = client_send(r.port, READ_REQUEST);
    ck_assert(up_wait(&r.up, &r.up.reads, 1));
    ld_proxy_stop(r.proxy);
    r.proxy = NULL;
    bool answered = client_answer(fd, 5000, &a);
    close(fd);
    ck_assert_msg(answered, "no answer: [%s]", a.text);
    ck_assert_int_eq(a.status, 503);
    assert_status_body(&a, 503, "ServiceUnavailable", "API proxy is stopping");
    ck_assert_ptr_null(strstr(a.body, "may or may not"));
    rig_stop(&r);
}
END_TEST

/* A write cut because leadership ended, with the proxy stopped right
 * after (leaderd's exit once the release is written): the cut's 503 is
 * still delivered, not lost with the connection. */
START_TEST(a_cut_answered_just_before_the_stop_reaches_the_client)
{
    struct rig r;
    int fd = start_with_a_held_write(&r);
    rig_publish(&r, false);
    ck_assert(up_wait(&r.up, &r.up.resets, 1));
    ld_proxy_stop(r.proxy);
    r.proxy = NULL;
    assert_cut_answer(fd);
    rig_stop(&r);
}
END_TEST

/* A body that trickles in, a byte at a time, well within the idle
 * timeout between bytes, is answered 408 once the body deadline has
 * passed, and nothing goes upstream. */
START_TEST(a_body_slower_than_the_deadline_gets_408)
{
    struct rig r;
    struct answer a;
    struct ld_proxy_options opts = {.body_timeout_ms = 600};
    rig_start(&r, &opts);
    int64_t t0 = ld_mono_ms();
    int fd = client_send(r.port, "PUT /api/v1/namespaces/a/configmaps/c HTTP/1.1\r\n"
                                 "Host: x\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 100\r\n\r\n{");
    /* 100 ms a byte, until the answer starts: the body would take 10 s
     * whole. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (int i = 0; i < 60 && poll(&p, 1, 100) == 0; i++)
        send(fd, " ", 1, MSG_NOSIGNAL);
    int64_t took = ld_mono_ms() - t0;
    bool answered = client_answer(fd, 2000, &a);
    close(fd);
    ck_assert_msg(answered, "no answer: %s", a.text);
    ck_assert_int_eq(a.status, 408);
    assert_status_body(&a, 408, "Timeout", "did not arrive within 600 ms");
    ck_assert_int_ge(took, 600);
    ck_assert_int_lt(took, 3000);
    ck_assert_int_eq(up_count(&r.up, &r.up.writes), 0);
    rig_stop(&r);
}
END_TEST

/* At most LD_PROXY_MAX_EXCHANGES exchanges run at once: the next read,
 * write or watch is answered 429 with Retry-After: 1 and nothing goes
 * upstream; every exchange that ends gives its place back. */
START_TEST(exchanges_past_the_cap_get_429)
{
    struct rig r;
    struct answer a;
    int held[LD_PROXY_MAX_EXCHANGES];
    rig_start(&r, NULL);
    /* Answered ones give their place back: more than the cap, in turn. */
    for (int i = 0; i < LD_PROXY_MAX_EXCHANGES + 6; i++) {
        int fd = client_send(r.port, i % 2 ? READ_REQUEST : WRITE_REQUEST);
        ck_assert(client_answer(fd, 5000, &a));
        ck_assert_int_eq(a.status, 200);
        close(fd);
    }
    /* The last places come back when the upstream transfers are done, a
     * moment after the answers were read (long, under load). */
    int64_t until = ld_mono_ms() + 30000;
    while (ld_proxy_exchanges(r.proxy) > 0 && ld_mono_ms() < until)
        poll(NULL, 0, 5);
    ck_assert_int_eq(ld_proxy_exchanges(r.proxy), 0);
    up_set(&r.up, UP_HOLD, UP_HOLD);
    int reads = up_count(&r.up, &r.up.reads), writes = up_count(&r.up, &r.up.writes);
    for (int i = 0; i < LD_PROXY_MAX_EXCHANGES; i++)
        held[i] = client_send(r.port, i % 2 ? READ_REQUEST : WRITE_REQUEST);
    ck_assert(up_wait(&r.up, &r.up.reads, reads + LD_PROXY_MAX_EXCHANGES / 2));
    ck_assert(up_wait(&r.up, &r.up.writes, writes + LD_PROXY_MAX_EXCHANGES / 2));
    static const char *const more[] = {
        READ_REQUEST, WRITE_REQUEST,
        "GET /api/v1/namespaces/a/configmaps?watch=true HTTP/1.1\r\nHost: x\r\n\r\n"};
    for (int i = 0; i < 3; i++) {
        int fd = client_send(r.port, more[i]);
        ck_assert(client_answer(fd, 5000, &a));
        close(fd);
        ck_assert_int_eq(a.status, 429);
        ck_assert_ptr_nonnull(strstr(a.text, "\r\nRetry-After: 1\r\n"));
        assert_status_body(&a, 429, "TooManyRequests", "retry");
    }
    ck_assert_int_eq(up_count(&r.up, &r.up.reads), reads + LD_PROXY_MAX_EXCHANGES / 2);
    ck_assert_int_eq(up_count(&r.up, &r.up.writes), writes + LD_PROXY_MAX_EXCHANGES / 2);
    for (int i = 0; i < LD_PROXY_MAX_EXCHANGES; i++)
        close(held[i]);
    rig_stop(&r);
}
END_TEST

static Suite *proxy_upstream_suite(void)
{
    Suite *s = suite_create("proxy_upstream");
    TCase *tc = tcase_create("upstream");
    tcase_set_timeout(tc, 120); /* the waits are bounded at 30 s each */
    tcase_add_test(tc, a_write_reset_upstream_is_sent_once_and_gets_502);
    tcase_add_test(tc, a_cut_write_resets_its_upstream_connection);
    tcase_add_test(tc, the_cut_is_awaited_on_the_suspend_counting_clock);
    tcase_add_test(tc, a_write_in_flight_when_the_proxy_stops_gets_503);
    tcase_add_test(tc, a_read_in_flight_when_the_proxy_stops_gets_503);
    tcase_add_test(tc, a_cut_answered_just_before_the_stop_reaches_the_client);
    tcase_add_test(tc, a_body_slower_than_the_deadline_gets_408);
    tcase_add_test(tc, exchanges_past_the_cap_get_429);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    return ld_test_run(proxy_upstream_suite());
}
