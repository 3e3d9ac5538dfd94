/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_kube: the Lease REST client against fake_http on 127.0.0.1: status
 * mapping, token files (a rewrite is used by the next request, a 401 re-reads
 * one), caps, keep-alive, timeout, cancel, what goes on the wire, and TLS
 * with a CA generated in the test.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "kube.h"
#include "log.h"
#include "support/fake_http.h"
#include "support/run_suite.h"

#define NS "default"
#define NAME "my-lease"
#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/default/leases/my-lease"

static const char lease_200[] =
    "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
    "{\"name\":\"my-lease\",\"namespace\":\"default\",\"resourceVersion\":\"123\"},"
    "\"spec\":{\"holderIdentity\":\"pod-a\",\"leaseDurationSeconds\":15,"
    "\"renewTime\":\"2024-05-01T10:00:00.000000Z\",\"leaseTransitions\":2}}";

static const char status_404[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"leases.coordination.k8s.io \\\"my-lease\\\" not found\","
    "\"reason\":\"NotFound\",\"details\":{\"name\":\"my-lease\",\"group\":"
    "\"coordination.k8s.io\",\"kind\":\"leases\"},\"code\":404}";

static const char status_conflict[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Operation cannot be fulfilled on leases.coordination.k8s.io "
    "\\\"my-lease\\\": the object has been "
    "modified\",\"reason\":\"Conflict\",\"code\":409}";

static const char status_exists[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"leases.coordination.k8s.io \\\"my-lease\\\" already exists\","
    "\"reason\":\"AlreadyExists\",\"code\":409}";

static const char status_invalid[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Lease.coordination.k8s.io \\\"my-lease\\\" is invalid: "
    "spec.leaseDurationSeconds: Invalid value: 0\",\"reason\":\"Invalid\",\"code\":422}";

static const char status_500[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"etcdserver: request timed out\",\"reason\":\"InternalError\","
    "\"code\":500}";

static struct fake_http *fake;
static struct ld_kube *kube;
static char token_path[64];

struct observed {
    int calls;
    char verb[8];
    long status;
    double seconds;
};
static struct observed obs;

static void observer(void *ctx, const char *verb, long status, double seconds)
{
    struct observed *o = ctx;
    o->calls++;
    snprintf(o->verb, sizeof(o->verb), "%s", verb);
    o->status = status;
    o->seconds = seconds;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct ld_kube *new_client(const char *server, const char *token,
                                  const char *tfile)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ld_kube_config_init(&c);
    c.server = strdup(server);
    c.token = token ? strdup(token) : NULL;
    c.token_file = tfile ? strdup(tfile) : NULL;
    struct ld_kube *k = ld_kube_new(&c, &e);
    ck_assert_msg(k != NULL, "ld_kube_new: %s", e.msg);
    ld_kube_config_clear(&c);
    ld_kube_set_observer(k, observer, &obs);
    return k;
}

static void setup(void)
{
    memset(&obs, 0, sizeof(obs));
    fake = fake_http_start(NULL, NULL);
    ck_assert_ptr_nonnull(fake);
    kube = new_client(fake_http_url(fake), "tok-1", NULL);
}

static void teardown(void)
{
    ld_kube_free(kube);
    kube = NULL;
    fake_http_stop(fake);
    fake = NULL;
    if (token_path[0]) {
        unlink(token_path);
        token_path[0] = '\0';
    }
}

static void push(int status, const char *body)
{
    struct fake_http_response r = {.status = status, .body = body};
    fake_http_push(fake, &r);
}

static struct fake_http_request req(int i)
{
    struct fake_http_request r;
    ck_assert_msg(fake_http_request_at(fake, i, &r), "no request %d", i);
    return r;
}

static void lease_from(struct ld_lease *l, const char *json)
{
    struct ld_errinfo e;
    ld_lease_init(l);
    ck_assert_int_eq(ld_lease_decode(json, strlen(json), l, &e), LD_OK);
}

START_TEST(get_200_decodes)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    push(200, lease_200);
    ld_kube_set_user_agent_suffix(kube, "pod/x\r\nEvil: 1");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ck_assert_int_eq(e.code, LD_OK);
    ck_assert_int_eq(e.http_status, 200);
    ck_assert_str_eq(l.name, NAME);
    ck_assert_str_eq(l.resource_version, "123");
    ck_assert_str_eq(l.spec.holder, "pod-a");
    ck_assert_int_eq(l.spec.duration_s, 15);
    ck_assert_int_eq(l.spec.transitions, 2);
    ld_lease_clear(&l);

    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.method, "GET");
    ck_assert_str_eq(r.path, LEASE_PATH);
    ck_assert_str_eq(r.timeout_arg, "5s");
    ck_assert_str_eq(r.accept, "application/json");
    ck_assert_str_eq(r.authorization, "Bearer tok-1");
    ck_assert_str_eq(r.user_agent,
                     "leaderd/" LEADERD_VERSION " (leader-election) pod/xEvil: 1");
    ck_assert_str_eq(r.content_type, "");
    ck_assert_int_eq((int)r.body_len, 0);
    fake_http_request_clear(&r);

    ck_assert_int_eq(obs.calls, 1);
    ck_assert_str_eq(obs.verb, "GET");
    ck_assert_int_eq(obs.status, 200);
    ck_assert(obs.seconds >= 0 && obs.seconds < 5);
}
END_TEST

START_TEST(timeout_query_whole_seconds)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    push(200, lease_200);
    push(200, lease_200);
    ld_kube_set_timeout_ms(kube, 2500);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ld_kube_set_timeout_ms(kube, 400);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ld_lease_clear(&l);
    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.timeout_arg, "2s");
    fake_http_request_clear(&r);
    r = req(1);
    ck_assert_str_eq(r.timeout_arg, "1s");
    fake_http_request_clear(&r);
}
END_TEST

START_TEST(not_found)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    push(404, status_404);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_ENOTFOUND);
    ck_assert_int_eq(e.code, LD_ENOTFOUND);
    ck_assert_int_eq(e.http_status, 404);
    ck_assert_str_eq(e.reason, "NotFound");
    ck_assert_ptr_nonnull(strstr(e.msg, "not found"));
    ck_assert_ptr_null(l.name);
    ck_assert_int_eq(obs.status, 404);
}
END_TEST

START_TEST(conflict_vs_already_exists)
{
    struct ld_lease l, out;
    struct ld_errinfo e;
    lease_from(&l, lease_200);
    ld_lease_init(&out);
    push(409, status_conflict);
    ck_assert_int_eq(ld_kube_lease_update(kube, &l, &out, &e), LD_ECONFLICT);
    ck_assert_str_eq(e.reason, "Conflict");
    ck_assert_int_eq(e.http_status, 409);

    free(l.resource_version);
    l.resource_version = NULL;
    push(409, status_exists);
    ck_assert_int_eq(ld_kube_lease_create(kube, &l, &out, &e), LD_EEXISTS);
    ck_assert_str_eq(e.reason, "AlreadyExists");
    ck_assert_ptr_null(out.name);
    ld_lease_clear(&l);
}
END_TEST

static void write_token(const char *text)
{
    char tmp[80];
    snprintf(tmp, sizeof(tmp), "%s.new", token_path);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    /* Atomic replace, as the kubelet's writer does. */
    ck_assert_int_eq(rename(tmp, token_path), 0);
}

static void token_client(const char *initial)
{
    snprintf(token_path, sizeof(token_path), "/tmp/ld-kube-token-XXXXXX");
    int fd = mkstemp(token_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_token(initial);
    ld_kube_free(kube);
    kube = new_client(fake_http_url(fake), NULL, token_path);
}

/* Rewrites the token file in place with text of the same length and puts
 * its mtime back: a change no stat() can see, which only a 401 reveals. */
static void rewrite_unseen(const char *text)
{
    struct stat before, after;
    ck_assert_int_eq(stat(token_path, &before), 0);
    ck_assert_int_eq((long)strlen(text), (long)before.st_size);
    int fd = open(token_path, O_WRONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, text, strlen(text), 0), (ssize_t)strlen(text));
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    ck_assert_int_eq(futimens(fd, times), 0);
    ck_assert_int_eq(close(fd), 0);
    ck_assert_int_eq(stat(token_path, &after), 0);
    ck_assert(after.st_ino == before.st_ino && after.st_size == before.st_size &&
              after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
              after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
}

START_TEST(unauthorized_rotated_token_retried_once)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    token_client("old-token\n");
    fake_http_require_auth(fake, "Bearer new-token");
    push(200, lease_200);
    rewrite_unseen("new-token\n");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ck_assert_str_eq(l.name, NAME);
    ld_lease_clear(&l);
    ck_assert_int_eq(fake_http_request_count(fake), 2);
    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.authorization, "Bearer old-token");
    fake_http_request_clear(&r);
    r = req(1);
    ck_assert_str_eq(r.authorization, "Bearer new-token");
    fake_http_request_clear(&r);
    ck_assert_int_eq(obs.calls, 2);
    ck_assert_int_eq(obs.status, 200);
}
END_TEST

/* The retry after a 401 gets what is left of the call's timeout, not a new
 * one: a caller bounds the whole call (a renewal by its deadline). Here
 * the 401 takes 400 ms of 600 and the retried answer would take 300. */
START_TEST(retry_after_401_gets_only_the_time_left)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    token_client("old-token\n");
    struct fake_http_response slow_401 = {.status = 401, .body = "{}", .delay_ms = 400};
    struct fake_http_response slow_200 = {
        .status = 200, .body = lease_200, .delay_ms = 300};
    fake_http_push(fake, &slow_401);
    fake_http_push(fake, &slow_200);
    rewrite_unseen("new-token\n");
    ld_kube_set_timeout_ms(kube, 600);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_ETIMEOUT);
    ld_lease_clear(&l);
    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.authorization, "Bearer old-token");
    fake_http_request_clear(&r);
}
END_TEST

START_TEST(rewritten_token_file_used_by_next_request)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    token_client("old-token\n");
    push(200, lease_200);
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    /* Same length, so only the inode and mtime tell the files apart. */
    write_token("new-token\n");
    fake_http_require_auth(fake, "Bearer new-token");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ld_lease_clear(&l);
    /* No 401 and no retry: the second request already had the new token. */
    ck_assert_int_eq(fake_http_request_count(fake), 2);
    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.authorization, "Bearer old-token");
    fake_http_request_clear(&r);
    r = req(1);
    ck_assert_str_eq(r.authorization, "Bearer new-token");
    fake_http_request_clear(&r);
}
END_TEST

/* The kubelet's projected volume: token -> ..data/token, ..data -> a
 * timestamped directory that a rotation replaces by renaming a new link
 * over ..data. */
struct projected {
    char dir[64];
    char gen[2][96];
    char data[96];
    char token[96];
};

static void projected_write(struct projected *p, int gen, const char *text)
{
    char path[128], link_tmp[128];
    char dir[sizeof(p->dir)];
    memcpy(dir, p->dir, sizeof(dir));
    snprintf(p->gen[gen], sizeof(p->gen[gen]), "%s/..gen%d", dir, gen);
    ck_assert_int_eq(mkdir(p->gen[gen], 0700), 0);
    snprintf(path, sizeof(path), "%s/token", p->gen[gen]);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(link_tmp, sizeof(link_tmp), "%s/..data_tmp", dir);
    ck_assert_int_eq(symlink(p->gen[gen] + strlen(dir) + 1, link_tmp), 0);
    ck_assert_int_eq(rename(link_tmp, p->data), 0);
}

static void projected_remove(struct projected *p)
{
    char path[128];
    unlink(p->token);
    unlink(p->data);
    for (int i = 0; i < 2; i++) {
        if (!p->gen[i][0])
            continue;
        snprintf(path, sizeof(path), "%s/token", p->gen[i]);
        unlink(path);
        rmdir(p->gen[i]);
    }
    rmdir(p->dir);
}

START_TEST(projected_token_swap_used_by_next_request)
{
    struct projected p;
    struct ld_lease l;
    struct ld_errinfo e;
    memset(&p, 0, sizeof(p));
    ld_lease_init(&l);
    snprintf(p.dir, sizeof(p.dir), "/tmp/ld-kube-sa-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(p.dir));
    snprintf(p.data, sizeof(p.data), "%s/..data", p.dir);
    snprintf(p.token, sizeof(p.token), "%s/token", p.dir);
    projected_write(&p, 0, "token-gen-0");
    ck_assert_int_eq(symlink("..data/token", p.token), 0);
    ld_kube_free(kube);
    kube = new_client(fake_http_url(fake), NULL, p.token);
    push(200, lease_200);
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    projected_write(&p, 1, "token-gen-1");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ld_lease_clear(&l);
    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.authorization, "Bearer token-gen-0");
    fake_http_request_clear(&r);
    r = req(1);
    ck_assert_str_eq(r.authorization, "Bearer token-gen-1");
    fake_http_request_clear(&r);
    projected_remove(&p);
}
END_TEST

struct stream_end {
    bool ended;
    enum ld_err rc;
};

static void ignore_data(void *ctx, ld_kube_call call, const char *data, size_t len)
{
    (void)ctx;
    (void)call;
    (void)data;
    (void)len;
}

static void note_end(void *ctx, ld_kube_call call, enum ld_err rc,
                     const struct ld_errinfo *err)
{
    struct stream_end *end = ctx;
    (void)call;
    (void)err;
    end->ended = true;
    end->rc = rc;
}

START_TEST(rewritten_token_file_used_by_next_watch)
{
    struct ld_lease l;
    struct ld_errinfo e;
    struct stream_end end = {0};
    ld_kube_call call = 0;
    ld_lease_init(&l);
    token_client("old-token");
    push(200, lease_200);
    push(200, "");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ld_lease_clear(&l);
    write_token("watch-token");
    struct ld_kube_watch_spec spec = {
        .namespace_ = NS, .name = NAME, .resource_version = "123", .timeout_s = 30};
    ck_assert_int_eq(
        ld_kube_lease_watch_open(kube, &spec, ignore_data, note_end, &end, &call, &e),
        LD_OK);
    /* The request goes out as the transport is run; the empty 200 ends it.
     * Bounded by the deadline, not by a count of runs. */
    int64_t deadline = now_ms() + 10000;
    while (!end.ended && now_ms() < deadline)
        ld_transport_run(ld_kube_transport(kube), 200, -1);
    ck_assert(end.ended);
    ck_assert_int_eq(end.rc, LD_EEOF);
    ck_assert_uint_eq(ld_kube_calls_pending(kube), 0);
    ck_assert_int_eq(fake_http_request_count(fake), 2);
    struct fake_http_request r = req(1);
    ck_assert_str_eq(r.path, "/apis/coordination.k8s.io/v1/namespaces/default/leases");
    ck_assert_str_eq(r.authorization, "Bearer watch-token");
    fake_http_request_clear(&r);
}
END_TEST

struct warnings {
    int count;
    char last[256];
};

static void count_warnings(void *ctx, enum ld_log_level level, const char *msg)
{
    struct warnings *w = ctx;
    if (level < LD_LOG_WARN)
        return;
    w->count++;
    snprintf(w->last, sizeof(w->last), "%s", msg);
}

START_TEST(vanished_token_file_keeps_last_token)
{
    struct warnings w = {0};
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    token_client("kept-token");
    ld_log_set_sink(count_warnings, &w, LD_LOG_WARN);
    for (int i = 0; i < 3; i++)
        push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ck_assert_int_eq(unlink(token_path), 0);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ld_log_set_sink(NULL, NULL, LD_LOG_WARN);
    ld_lease_clear(&l);
    for (int i = 0; i < 3; i++) {
        struct fake_http_request r = req(i);
        ck_assert_str_eq(r.authorization, "Bearer kept-token");
        fake_http_request_clear(&r);
    }
    /* Said once when it vanished, not on every request. */
    ck_assert_int_eq(w.count, 1);
    ck_assert_ptr_nonnull(strstr(w.last, token_path));
    ck_assert_ptr_nonnull(strstr(w.last, "keeping the previous token"));
}
END_TEST

START_TEST(unauthorized_same_token_not_retried)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    token_client("old-token");
    fake_http_require_auth(fake, "Bearer other");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_EUNAUTHORIZED);
    ck_assert_int_eq(e.http_status, 401);
    ck_assert_int_eq(fake_http_request_count(fake), 1);
    ck_assert_ptr_null(strstr(e.msg, "old-token"));
}
END_TEST

START_TEST(token_file_missing_at_creation)
{
    struct ld_kube_config c;
    struct ld_errinfo e;
    ld_kube_config_init(&c);
    c.server = strdup("http://127.0.0.1:1");
    c.token_file = strdup("/nonexistent/ld-token");
    ck_assert_ptr_null(ld_kube_new(&c, &e));
    ck_assert_int_eq(e.code, LD_ECONFIG);
    ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/ld-token"));
    ld_kube_config_clear(&c);
}
END_TEST

START_TEST(too_many_with_retry_after)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    struct fake_http_response r = {.status = 429,
                                   .body = "Too many requests, please try again later.\n",
                                   .header_name = "Retry-After",
                                   .header_value = "3"};
    fake_http_push(fake, &r);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_ETOOMANY);
    ck_assert_int_eq(e.http_status, 429);
    ck_assert_int_eq(e.retry_after_ms, 3000);
    ck_assert_ptr_nonnull(strstr(e.msg, "Too many requests"));
}
END_TEST

START_TEST(server_error_and_invalid)
{
    struct ld_lease l;
    struct ld_errinfo e;
    lease_from(&l, lease_200);
    push(500, status_500);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_ESERVER);
    ck_assert_str_eq(e.reason, "InternalError");
    ck_assert_int_eq(e.retry_after_ms, 0);
    push(422, status_invalid);
    ck_assert_int_eq(ld_kube_lease_update(kube, &l, &l, &e), LD_EINVALID);
    ck_assert_str_eq(e.reason, "Invalid");
    ck_assert_ptr_nonnull(strstr(e.msg, "leaseDurationSeconds"));
    /* a failed call leaves out untouched */
    ck_assert_str_eq(l.resource_version, "123");
    push(418, "");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_EHTTP);
    ck_assert_ptr_nonnull(strstr(e.msg, "418"));
    ld_lease_clear(&l);
}
END_TEST

START_TEST(body_over_cap)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    size_t n = LD_KUBE_MAX_BODY + 1;
    char *big = malloc(n);
    ck_assert_ptr_nonnull(big);
    memset(big, ' ', n);
    struct fake_http_response r = {.status = 200, .body = big, .body_len = n};
    fake_http_push(fake, &r);
    free(big);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_ETOOBIG);
    ck_assert_ptr_null(l.name);
    /* the handle is still usable afterwards */
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ld_lease_clear(&l);
}
END_TEST

START_TEST(garbage_200_is_decode_error)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    push(200, "<html>proxy says hi</html>");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_EDECODE);
    ck_assert_int_eq(e.http_status, 200);
    push(200, "");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_EDECODE);
    push(200, "{\"kind\":\"Status\",\"status\":\"Success\"}");
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_EDECODE);
    /* a well-formed Lease with another name is not the answer to this GET */
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, "other", &l, &e), LD_EDECODE);
    ck_assert_ptr_null(l.name);
}
END_TEST

START_TEST(connection_reused)
{
    struct ld_lease l, out;
    struct ld_errinfo e;
    lease_from(&l, lease_200);
    ld_lease_init(&out);
    push(200, lease_200);
    push(404, status_404);
    push(200, lease_200);
    push(409, status_conflict);
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &out, &e), LD_OK);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &out, &e), LD_ENOTFOUND);
    ck_assert_int_eq(ld_kube_lease_update(kube, &l, &out, &e), LD_OK);
    ck_assert_int_eq(ld_kube_lease_update(kube, &l, &out, &e), LD_ECONFLICT);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &out, &e), LD_OK);
    ck_assert_int_eq(fake_http_request_count(fake), 5);
    ck_assert_int_eq(fake_http_connections(fake), 1);
    ld_lease_clear(&l);
    ld_lease_clear(&out);
}
END_TEST

START_TEST(timeout_is_bounded)
{
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    struct fake_http_response r = {.status = 200, .body = lease_200, .delay_ms = 10000};
    fake_http_push(fake, &r);
    ld_kube_set_timeout_ms(kube, 300);
    int64_t t0 = now_ms();
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_ETIMEOUT);
    int64_t took = now_ms() - t0;
    ck_assert_msg(took >= 250 && took < 2000, "took %lld ms", (long long)took);
    ck_assert_int_eq(obs.calls, 1);
    ck_assert_int_eq(obs.status, 0);
}
END_TEST

START_TEST(cancel_before_call)
{
    struct ld_lease l;
    struct ld_errinfo e;
    int p[2];
    ld_lease_init(&l);
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ld_kube_set_cancel_fd(kube, p[0]);
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_ECANCELED);
    ck_assert_int_eq(fake_http_request_count(fake), 0);
    /* the fd is only polled: the byte is still there */
    char c;
    ck_assert_int_eq(read(p[0], &c, 1), 1);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    ld_lease_clear(&l);
    close(p[0]);
    close(p[1]);
}
END_TEST

struct canceller {
    struct fake_http *f;
    int fd;
};

static void *cancel_when_request_arrives(void *arg)
{
    struct canceller *c = arg;
    if (fake_http_wait_requests(c->f, 1, 5000)) {
        ssize_t n = write(c->fd, "x", 1);
        (void)n;
    }
    return NULL;
}

START_TEST(cancel_in_flight)
{
    struct ld_lease l;
    struct ld_errinfo e;
    int p[2];
    pthread_t t;
    ld_lease_init(&l);
    ck_assert_int_eq(pipe(p), 0);
    struct fake_http_response r = {.status = 200, .body = lease_200, .delay_ms = 10000};
    fake_http_push(fake, &r);
    ld_kube_set_cancel_fd(kube, p[0]);
    struct canceller c = {.f = fake, .fd = p[1]};
    ck_assert_int_eq(pthread_create(&t, NULL, cancel_when_request_arrives, &c), 0);
    int64_t t0 = now_ms();
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_ECANCELED);
    int64_t took = now_ms() - t0;
    pthread_join(t, NULL);
    ck_assert_msg(took < 2000, "took %lld ms", (long long)took);
    ck_assert_int_eq(fake_http_request_count(fake), 1);
    ck_assert_int_eq(obs.calls, 1);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(put_and_post_bodies)
{
    struct ld_lease l, out;
    struct ld_errinfo e;
    lease_from(&l, lease_200);
    ld_lease_init(&out);
    free(l.spec.holder);
    l.spec.holder = strdup("pod-b");
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_update(kube, &l, &out, &e), LD_OK);
    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.method, "PUT");
    ck_assert_str_eq(r.path, LEASE_PATH);
    ck_assert_str_eq(r.content_type, "application/json");
    ck_assert_ptr_nonnull(strstr(r.body, "\"resourceVersion\":\"123\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"holderIdentity\":\"pod-b\""));
    fake_http_request_clear(&r);
    ck_assert_str_eq(obs.verb, "PUT");

    free(l.resource_version);
    l.resource_version = NULL;
    push(201, lease_200);
    ck_assert_int_eq(ld_kube_lease_create(kube, &l, &out, &e), LD_OK);
    ck_assert_int_eq(e.http_status, 201);
    r = req(1);
    ck_assert_str_eq(r.method, "POST");
    ck_assert_str_eq(r.path, "/apis/coordination.k8s.io/v1/namespaces/default/leases");
    ck_assert_str_eq(r.content_type, "application/json");
    ck_assert_ptr_null(strstr(r.body, "resourceVersion"));
    fake_http_request_clear(&r);
    ck_assert_str_eq(obs.verb, "POST");

    /* out may alias the input */
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_OK);
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_update(kube, &l, &l, &e), LD_OK);
    ck_assert_str_eq(l.resource_version, "123");
    ld_lease_clear(&l);
    ld_lease_clear(&out);
}
END_TEST

START_TEST(bad_arguments_send_nothing)
{
    struct ld_lease l, out;
    struct ld_errinfo e;
    ld_lease_init(&out);
    static const char *const bad_names[] = {"My-Lease", "a/b", "../x", "-a", "a-",
                                            "a..b",     "",    "a?b",  "a b"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
        ck_assert_int_eq(ld_kube_lease_get(kube, NS, bad_names[i], &out, &e), LD_EINVAL);
    ck_assert_int_eq(ld_kube_lease_get(kube, "kube.system", NAME, &out, &e), LD_EINVAL);
    ck_assert_int_eq(ld_kube_lease_get(kube, NULL, NAME, &out, &e), LD_EINVAL);
    lease_from(&l, lease_200);
    ck_assert_int_eq(ld_kube_lease_create(kube, &l, &out, &e), LD_EINVAL); /* has an RV */
    free(l.resource_version);
    l.resource_version = NULL;
    ck_assert_int_eq(ld_kube_lease_update(kube, &l, &out, &e), LD_EINVAL); /* lacks one */
    ck_assert_int_eq(fake_http_request_count(fake), 0);
    ck_assert_int_eq(obs.calls, 0);
    push(200,
         "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
         "{\"name\":\"a.b-c\",\"resourceVersion\":\"1\"},\"spec\":{}}");
    ck_assert_int_eq(ld_kube_lease_get(kube, "kube-system", "a.b-c", &out, &e), LD_OK);
    ld_lease_clear(&l);
    ld_lease_clear(&out);
}
END_TEST

/* A Lease name is a DNS-1123 subdomain: a dotted part may be longer than
 * 63 (only a namespace, a label, is held to that), so such a name goes out. */
START_TEST(long_name_part_is_requested)
{
    char name[128], body[512], path[256];
    struct ld_lease out;
    struct ld_errinfo e;
    ld_lease_init(&out);
    memset(name, 'a', 64);
    snprintf(name + 64, sizeof(name) - 64, ".leader-election");
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
             "\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"7\"},\"spec\":{}}",
             name);
    push(200, body);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, name, &out, &e), LD_OK);
    ck_assert_str_eq(out.name, name);
    ld_lease_clear(&out);
    struct fake_http_request r = req(0);
    snprintf(path, sizeof(path),
             "/apis/coordination.k8s.io/v1/namespaces/default/leases/%s", name);
    ck_assert_str_eq(r.path, path);
    fake_http_request_clear(&r);

    /* A namespace of 64 is still refused before anything is sent. */
    char ns[65];
    memset(ns, 'n', 64);
    ns[64] = '\0';
    ck_assert_int_eq(ld_kube_lease_get(kube, ns, NAME, &out, &e), LD_EINVAL);
    ck_assert_int_eq(fake_http_request_count(fake), 1);
}
END_TEST

START_TEST(connect_refused_is_transport)
{
    /* A port that was just free: bind, read it, close. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
    close(s);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    ld_kube_free(kube);
    kube = new_client(url, NULL, NULL);
    struct ld_lease l;
    struct ld_errinfo e;
    ld_lease_init(&l);
    ck_assert_int_eq(ld_kube_lease_get(kube, NS, NAME, &l, &e), LD_ECONNECT);
    ck_assert_int_eq(e.http_status, 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "onnect"));
    ck_assert_int_eq(obs.status, 0);
}
END_TEST

START_TEST(bad_server_config)
{
    static const char *const bad[] = {"ftp://x", "https://x/?a=b", "not a url", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct ld_kube_config c;
        struct ld_errinfo e;
        ld_kube_config_init(&c);
        c.server = strdup(bad[i]);
        ck_assert_msg(ld_kube_new(&c, &e) == NULL, "%s accepted", bad[i]);
        ck_assert_int_eq(e.code, LD_ECONFIG);
        ld_kube_config_clear(&c);
    }
}
END_TEST

/* ---- asynchronous calls ---- */

struct answer {
    int calls;
    enum ld_err rc;
    long status;
    char holder[64];
};

static void on_answer(void *ctx, ld_kube_call call, enum ld_err rc,
                      struct ld_lease *lease, const struct ld_errinfo *err)
{
    struct answer *a = ctx;
    ck_assert_uint_ne(call, 0);
    a->calls++;
    a->rc = rc;
    a->status = err->http_status;
    snprintf(a->holder, sizeof(a->holder), "%s",
             lease && lease->spec.holder ? lease->spec.holder : "");
}

START_TEST(async_get_and_delete_in_flight_together)
{
    struct ld_errinfo e;
    struct answer get = {0}, del = {0};
    ld_kube_call c1 = 0, c2 = 0;
    struct fake_http_response slow = {.status = 200, .body = lease_200, .delay_ms = 200};
    /* Either request may reach the server first: both answers suit both
     * (a DELETE's body is not decoded). */
    fake_http_push(fake, &slow);
    push(200, lease_200);
    ck_assert_int_eq(ld_kube_lease_get_start(kube, NS, NAME, 0, on_answer, &get, &c1, &e),
                     LD_OK);
    ck_assert_int_eq(ld_kube_lease_delete_start(kube, NS, NAME, "uid-1", "123", 0,
                                                on_answer, &del, &c2, &e),
                     LD_OK);
    ck_assert_uint_ne(c1, c2);
    ck_assert_uint_eq(ld_kube_calls_pending(kube), 2);
    for (int i = 0; i < 200 && get.calls + del.calls < 2; i++)
        ld_transport_run(ld_kube_transport(kube), 100, -1);
    ck_assert_int_eq(get.calls, 1);
    ck_assert_int_eq(del.calls, 1);
    ck_assert_uint_eq(ld_kube_calls_pending(kube), 0);
    /* The slow answer was queued first; the two ran at once, so whichever
     * got the delay, both succeeded and the delete had no Lease to decode. */
    ck_assert_int_eq(del.rc, LD_OK);
    ck_assert_int_eq(get.rc, LD_OK);
    int del_req = -1;
    for (int i = 0; i < 2; i++) {
        struct fake_http_request r = req(i);
        if (strcmp(r.method, "DELETE") == 0) {
            del_req = i;
            ck_assert_str_eq(r.path, LEASE_PATH);
            ck_assert_ptr_nonnull(strstr(r.body, "\"preconditions\""));
            ck_assert_ptr_nonnull(strstr(r.body, "\"uid\":\"uid-1\""));
            ck_assert_ptr_nonnull(strstr(r.body, "\"resourceVersion\":\"123\""));
        }
        fake_http_request_clear(&r);
    }
    ck_assert_int_ge(del_req, 0);
}
END_TEST

START_TEST(async_delete_conflict_and_cancel)
{
    struct ld_errinfo e;
    struct answer del = {0}, canceled = {0};
    ld_kube_call c1 = 0, c2 = 0;
    push(409, status_conflict);
    ck_assert_int_eq(ld_kube_lease_delete_start(kube, NS, NAME, NULL, "9", 0, on_answer,
                                                &del, &c1, &e),
                     LD_OK);
    for (int i = 0; i < 200 && del.calls < 1; i++)
        ld_transport_run(ld_kube_transport(kube), 100, -1);
    ck_assert_int_eq(del.calls, 1);
    ck_assert_int_eq(del.rc, LD_ECONFLICT);
    ck_assert_int_eq(del.status, 409);

    struct fake_http_response slow = {.status = 200, .body = lease_200, .delay_ms = 300};
    fake_http_push(fake, &slow);
    ck_assert_int_eq(
        ld_kube_lease_get_start(kube, NS, NAME, 0, on_answer, &canceled, &c2, &e), LD_OK);
    ld_transport_run(ld_kube_transport(kube), 20, -1);
    ld_kube_cancel(kube, c2);
    ld_kube_cancel(kube, c2); /* twice, and an unknown id: ignored */
    ld_kube_cancel(kube, 987654);
    ck_assert_uint_eq(ld_kube_calls_pending(kube), 0);
    for (int i = 0; i < 5; i++)
        ld_transport_run(ld_kube_transport(kube), 100, -1);
    ck_assert_int_eq(canceled.calls, 0);
    /* Bad names are refused before anything is sent, without a callback. */
    ck_assert_int_eq(ld_kube_lease_delete_start(kube, "Bad_NS", NAME, NULL, NULL, 0,
                                                on_answer, &del, &c1, &e),
                     LD_EINVAL);
    ck_assert_int_eq(ld_kube_lease_delete_start(kube, NS, NAME, NULL, "1 2", 0, on_answer,
                                                &del, &c1, &e),
                     LD_EINVAL);
    ck_assert_int_eq(del.calls, 1);
}
END_TEST

/* ---- LIST ---- */

struct listed {
    int calls;
    enum ld_err rc;
    size_t n;
    char names[4][64];
    char holders[4][64];
    char list_rv[32]; /* "(none)" when the answer had none */
};

static void on_listed(void *ctx, ld_kube_call call, enum ld_err rc,
                      const struct ld_lease *items, size_t n, const char *list_rv,
                      const struct ld_errinfo *err)
{
    struct listed *l = ctx;
    (void)err;
    ck_assert_uint_ne(call, 0);
    l->calls++;
    l->rc = rc;
    l->n = n;
    snprintf(l->list_rv, sizeof(l->list_rv), "%s", list_rv ? list_rv : "(none)");
    ck_assert(rc == LD_OK || (items == NULL && n == 0 && list_rv == NULL));
    for (size_t i = 0; i < n && i < 4; i++) {
        snprintf(l->names[i], sizeof(l->names[i]), "%s", items[i].name);
        snprintf(l->holders[i], sizeof(l->holders[i]), "%s",
                 items[i].spec.holder ? items[i].spec.holder : "");
    }
}

static void run_until_listed(struct listed *l)
{
    for (int i = 0; i < 200 && l->calls < 1; i++)
        ld_transport_run(ld_kube_transport(kube), 100, -1);
    ck_assert_int_eq(l->calls, 1);
}

/* A LIST by label selector: the selector is escaped into the query, every
 * Lease that decodes is handed over, one that does not is skipped. */
START_TEST(async_list_by_selector)
{
    struct ld_errinfo e;
    struct listed l = {0};
    ld_kube_call c = 0;
    push(200, "{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\","
              "\"metadata\":{\"resourceVersion\":\"77\"},\"items\":["
              "{\"metadata\":{\"name\":\"web-member-a\",\"namespace\":\"default\","
              "\"resourceVersion\":\"5\"},\"spec\":{\"holderIdentity\":\"a\"}},"
              "{\"metadata\":7},"
              "{\"metadata\":{\"name\":\"web-0\",\"namespace\":\"default\","
              "\"resourceVersion\":\"6\"},\"spec\":{}}]}");
    ck_assert_int_eq(ld_kube_lease_list_start(kube, NS, "leaderd.io/shard-group=web", 0,
                                              on_listed, &l, &c, &e),
                     LD_OK);
    run_until_listed(&l);
    ck_assert_int_eq(l.rc, LD_OK);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_str_eq(l.names[0], "web-member-a");
    ck_assert_str_eq(l.holders[0], "a");
    ck_assert_str_eq(l.names[1], "web-0");
    ck_assert_str_eq(l.list_rv, "77"); /* the snapshot's revision */
    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.method, "GET");
    ck_assert_str_eq(r.path, "/apis/coordination.k8s.io/v1/namespaces/default/leases");
    ck_assert_str_eq(r.label_selector, "leaderd.io/shard-group=web");
    ck_assert_str_ne(r.timeout_arg, "");
    fake_http_request_clear(&r);
}
END_TEST

/* Errors reach the callback without items; a body that is no list is a
 * decode error; bad arguments send nothing. */
START_TEST(async_list_errors)
{
    struct ld_errinfo e;
    struct listed l = {0};
    ld_kube_call c = 0;
    push(403, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\"}");
    ck_assert_int_eq(ld_kube_lease_list_start(kube, NS, NULL, 0, on_listed, &l, &c, &e),
                     LD_OK);
    run_until_listed(&l);
    ck_assert_int_ne(l.rc, LD_OK);
    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.label_selector, "");
    fake_http_request_clear(&r);

    memset(&l, 0, sizeof(l));
    push(200, lease_200); /* a Lease, not a LeaseList */
    ck_assert_int_eq(ld_kube_lease_list_start(kube, NS, "", 0, on_listed, &l, &c, &e),
                     LD_OK);
    run_until_listed(&l);
    ck_assert_int_eq(l.rc, LD_EDECODE);

    ck_assert_int_eq(
        ld_kube_lease_list_start(kube, "Bad_NS", NULL, 0, on_listed, &l, &c, &e),
        LD_EINVAL);
    ck_assert_int_eq(ld_kube_lease_list_start(kube, NS, NULL, 0, NULL, &l, &c, &e),
                     LD_EINVAL);
    ck_assert_int_eq(l.calls, 1);
    ck_assert_int_eq(fake_http_request_count(fake), 2);
}
END_TEST

START_TEST(map_status_table)
{
    ck_assert_int_eq(ld_kube_map_status(200, NULL), LD_OK);
    ck_assert_int_eq(ld_kube_map_status(201, ""), LD_OK);
    ck_assert_int_eq(ld_kube_map_status(400, "BadRequest"), LD_EBADREQUEST);
    ck_assert_int_eq(ld_kube_map_status(401, NULL), LD_EUNAUTHORIZED);
    ck_assert_int_eq(ld_kube_map_status(403, NULL), LD_EFORBIDDEN);
    ck_assert_int_eq(ld_kube_map_status(404, NULL), LD_ENOTFOUND);
    ck_assert_int_eq(ld_kube_map_status(409, "Conflict"), LD_ECONFLICT);
    ck_assert_int_eq(ld_kube_map_status(409, NULL), LD_ECONFLICT);
    ck_assert_int_eq(ld_kube_map_status(409, "AlreadyExists"), LD_EEXISTS);
    ck_assert_int_eq(ld_kube_map_status(410, "Expired"), LD_EGONE);
    ck_assert_int_eq(ld_kube_map_status(422, "Invalid"), LD_EINVALID);
    ck_assert_int_eq(ld_kube_map_status(429, NULL), LD_ETOOMANY);
    ck_assert_int_eq(ld_kube_map_status(500, NULL), LD_ESERVER);
    ck_assert_int_eq(ld_kube_map_status(504, "Timeout"), LD_ESERVER);
    ck_assert_int_eq(ld_kube_map_status(302, NULL), LD_EHTTP);
    ck_assert_int_eq(ld_kube_map_status(0, NULL), LD_EHTTP);
}
END_TEST

/* ---- TLS, with a CA and server certificate made here ---- */

struct pki {
    char *ca_pem, *other_ca_pem, *key_pem, *cert_pem;
};
static struct pki pki;

static void add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    ck_assert_ptr_nonnull(ext);
    ck_assert_int_eq(X509_add_ext(x, ext, -1), 1);
    X509_EXTENSION_free(ext);
}

static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
                       long serial)
{
    X509 *x = X509_new();
    ck_assert_ptr_nonnull(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
                               0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
    if (!issuer) {
        add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
        add_ext(x, &ctx, NID_subject_key_identifier, "hash");
    } else {
        add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature,keyEncipherment");
        add_ext(x, &ctx, NID_ext_key_usage, "serverAuth");
        add_ext(x, &ctx, NID_subject_alt_name, "IP:127.0.0.1,DNS:kube.test");
    }
    ck_assert_int_gt(X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()), 0);
    return x;
}

static char *bio_text(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    char *s = strndup(data, (size_t)n);
    BIO_free(b);
    ck_assert_ptr_nonnull(s);
    return s;
}

static char *cert_pem(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    ck_assert_int_eq(PEM_write_bio_X509(b, x), 1);
    return bio_text(b);
}

static void tls_setup(void)
{
    memset(&obs, 0, sizeof(obs));
    EVP_PKEY *ca_key = EVP_EC_gen("P-256"), *other_key = EVP_EC_gen("P-256"),
             *srv_key = EVP_EC_gen("P-256");
    ck_assert(ca_key && other_key && srv_key);
    X509 *ca = make_cert(ca_key, "test CA", NULL, NULL, 1);
    X509 *other = make_cert(other_key, "other CA", NULL, NULL, 2);
    X509 *srv = make_cert(srv_key, "kube.test", ca, ca_key, 3);
    pki.ca_pem = cert_pem(ca);
    pki.other_ca_pem = cert_pem(other);
    pki.cert_pem = cert_pem(srv);
    BIO *b = BIO_new(BIO_s_mem());
    ck_assert_int_eq(PEM_write_bio_PrivateKey(b, srv_key, NULL, NULL, 0, NULL, NULL), 1);
    pki.key_pem = bio_text(b);
    X509_free(ca);
    X509_free(other);
    X509_free(srv);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(other_key);
    EVP_PKEY_free(srv_key);
    fake = fake_http_start(pki.key_pem, pki.cert_pem);
    ck_assert_ptr_nonnull(fake);
}

static void tls_teardown(void)
{
    ld_kube_free(kube);
    kube = NULL;
    fake_http_stop(fake);
    fake = NULL;
    free(pki.ca_pem);
    free(pki.other_ca_pem);
    free(pki.key_pem);
    free(pki.cert_pem);
    memset(&pki, 0, sizeof(pki));
}

static enum ld_err tls_get(const char *ca_pem, const char *server_name,
                           struct ld_errinfo *e)
{
    struct ld_kube_config c;
    struct ld_lease l;
    ld_kube_config_init(&c);
    ld_lease_init(&l);
    c.server = strdup(fake_http_url(fake));
    c.ca_data = strdup(ca_pem);
    c.token = strdup("tls-token");
    c.tls_server_name = server_name ? strdup(server_name) : NULL;
    ld_kube_free(kube);
    kube = ld_kube_new(&c, e);
    ld_kube_config_clear(&c);
    ck_assert_msg(kube != NULL, "ld_kube_new: %s", e->msg);
    push(200, lease_200);
    enum ld_err rc = ld_kube_lease_get(kube, NS, NAME, &l, e);
    ld_lease_clear(&l);
    return rc;
}

START_TEST(tls_right_ca)
{
    struct ld_errinfo e;
    ck_assert_msg(tls_get(pki.ca_pem, NULL, &e) == LD_OK, "%s", e.msg);
    struct fake_http_request r = req(0);
    ck_assert_str_eq(r.authorization, "Bearer tls-token");
    fake_http_request_clear(&r);
}
END_TEST

START_TEST(tls_wrong_ca)
{
    struct ld_errinfo e;
    ck_assert_int_eq(tls_get(pki.other_ca_pem, NULL, &e), LD_ECONNECT);
    ck_assert_int_eq(e.http_status, 0);
    ck_assert_int_eq(fake_http_request_count(fake), 0);
}
END_TEST

START_TEST(tls_server_name)
{
    struct ld_errinfo e;
    ck_assert_msg(tls_get(pki.ca_pem, "kube.test", &e) == LD_OK, "%s", e.msg);
    ck_assert_int_eq(tls_get(pki.ca_pem, "wrong.test", &e), LD_ECONNECT);
}
END_TEST

START_TEST(tls_ca_file)
{
    char path[] = "/tmp/ld-kube-ca-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, pki.ca_pem, strlen(pki.ca_pem)),
                     (ssize_t)strlen(pki.ca_pem));
    close(fd);
    struct ld_kube_config c;
    struct ld_errinfo e;
    struct ld_lease l;
    ld_kube_config_init(&c);
    ld_lease_init(&l);
    c.server = strdup(fake_http_url(fake));
    c.ca_file = strdup(path);
    kube = ld_kube_new(&c, &e);
    ld_kube_config_clear(&c);
    ck_assert_ptr_nonnull(kube);
    push(200, lease_200);
    enum ld_err rc = ld_kube_lease_get(kube, NS, NAME, &l, &e);
    unlink(path);
    ck_assert_msg(rc == LD_OK, "%s", e.msg);
    ld_lease_clear(&l);
}
END_TEST

static Suite *kube_suite(void)
{
    Suite *s = suite_create("kube");
    TCase *tc = tcase_create("http");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, get_200_decodes);
    tcase_add_test(tc, timeout_query_whole_seconds);
    tcase_add_test(tc, not_found);
    tcase_add_test(tc, conflict_vs_already_exists);
    tcase_add_test(tc, unauthorized_rotated_token_retried_once);
    tcase_add_test(tc, retry_after_401_gets_only_the_time_left);
    tcase_add_test(tc, rewritten_token_file_used_by_next_request);
    tcase_add_test(tc, projected_token_swap_used_by_next_request);
    tcase_add_test(tc, rewritten_token_file_used_by_next_watch);
    tcase_add_test(tc, vanished_token_file_keeps_last_token);
    tcase_add_test(tc, unauthorized_same_token_not_retried);
    tcase_add_test(tc, token_file_missing_at_creation);
    tcase_add_test(tc, too_many_with_retry_after);
    tcase_add_test(tc, server_error_and_invalid);
    tcase_add_test(tc, body_over_cap);
    tcase_add_test(tc, garbage_200_is_decode_error);
    tcase_add_test(tc, connection_reused);
    tcase_add_test(tc, timeout_is_bounded);
    tcase_add_test(tc, cancel_before_call);
    tcase_add_test(tc, cancel_in_flight);
    tcase_add_test(tc, put_and_post_bodies);
    tcase_add_test(tc, async_get_and_delete_in_flight_together);
    tcase_add_test(tc, async_delete_conflict_and_cancel);
    tcase_add_test(tc, async_list_by_selector);
    tcase_add_test(tc, async_list_errors);
    tcase_add_test(tc, bad_arguments_send_nothing);
    tcase_add_test(tc, long_name_part_is_requested);
    tcase_add_test(tc, connect_refused_is_transport);
    tcase_add_test(tc, bad_server_config);
    tcase_add_test(tc, map_status_table);
    suite_add_tcase(s, tc);

    tc = tcase_create("tls");
    tcase_add_checked_fixture(tc, tls_setup, tls_teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, tls_right_ca);
    tcase_add_test(tc, tls_wrong_ca);
    tcase_add_test(tc, tls_server_name);
    tcase_add_test(tc, tls_ca_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    int rc = ld_test_run(kube_suite());
    curl_global_cleanup();
    return rc;
}
