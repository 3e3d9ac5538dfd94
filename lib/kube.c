/*
 * kube: the Lease REST layer over a transport (transport.h): paths, name
 * checks, encoding and decoding, status mapping, the one retry after a 401
 * with a rotated token. The blocking calls of kube.h are each a submit (or
 * open_stream) followed by runs of the transport until its callback came.
 * Watch bytes that arrive while a round trip is being driven are kept until
 * the next ld_kube_watch_wait.
 */
#include "kube.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dnsname.h"
#include "log.h"
#include "transport_curl.h"

#define DEFAULT_TIMEOUT_MS 5000
#define MAX_TIMEOUT_MS (3600 * 1000)
/* The transport ends every exchange at its timeout; this only bounds the
 * blocking wait in case it did not. */
#define LOOP_GRACE_MS 2000
#define API_PREFIX "/apis/coordination.k8s.io/v1"
/* The server ends a watch after timeoutSeconds; the margin only catches a
 * server that never does. */
#define WATCH_MARGIN_S 30
/* Watch bytes kept between two waits; a stream that outruns this while a
 * round trip is driven is ended (LD_ETOOBIG) rather than held in memory. */
#define WATCH_PENDING_MAX LD_HTTP_MAX_BODY
/* A held-back buffer grown past this is given back once delivered. */
#define WATCH_PENDING_KEEP (64 * 1024)

struct watch_state {
    ld_http_id id; /* of the open stream, 0 when none */
    int64_t started_ms;
    char *path; /* for messages */
    /* The stream ended and ld_kube_watch_wait has not said so yet. */
    bool ended;
    enum ld_err end_rc;
    struct ld_errinfo end_err;
    char *held; /* bytes that arrived outside ld_kube_watch_wait */
    size_t held_len, held_cap;
    ld_kube_watch_data_fn fn; /* set during ld_kube_watch_wait only */
    void *ctx;
    bool delivered;
};

struct ld_kube {
    struct ld_transport *t;
    struct watch_state watch;
    int64_t timeout_ms;
    int cancel_fd;
    ld_kube_observer_fn observer;
    void *observer_ctx;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void observe(struct ld_kube *k, const char *verb, long status, double seconds)
{
    if (k->observer)
        k->observer(k->observer_ctx, verb, status, seconds);
}

struct ld_kube *ld_kube_new(const struct ld_kube_config *cfg, struct ld_errinfo *err)
{
    struct ld_kube *k = calloc(1, sizeof(*k));

    ld_errinfo_clear(err);
    if (!k) {
        ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        return NULL;
    }
    k->cancel_fd = -1;
    k->timeout_ms = DEFAULT_TIMEOUT_MS;
    k->t = ld_transport_curl_new(cfg, err);
    if (!k->t) {
        free(k);
        return NULL;
    }
    return k;
}

void ld_kube_free(struct ld_kube *k)
{
    if (!k)
        return;
    ld_kube_watch_stop(k);
    ld_transport_free(k->t);
    free(k);
}

struct ld_transport *ld_kube_transport(struct ld_kube *k)
{
    return k ? k->t : NULL;
}

void ld_kube_set_timeout_ms(struct ld_kube *k, int64_t timeout_ms)
{
    if (!k)
        return;
    if (timeout_ms < 1)
        timeout_ms = 1;
    if (timeout_ms > MAX_TIMEOUT_MS)
        timeout_ms = MAX_TIMEOUT_MS;
    k->timeout_ms = timeout_ms;
}

void ld_kube_set_cancel_fd(struct ld_kube *k, int fd)
{
    if (k)
        k->cancel_fd = fd < 0 ? -1 : fd;
}

void ld_kube_set_observer(struct ld_kube *k, ld_kube_observer_fn fn, void *ctx)
{
    if (!k)
        return;
    k->observer = fn;
    k->observer_ctx = ctx;
}

void ld_kube_set_user_agent_suffix(struct ld_kube *k, const char *suffix)
{
    if (k)
        ld_transport_curl_set_user_agent_suffix(k->t, suffix);
}

enum ld_err ld_kube_map_status(long http_status, const char *reason)
{
    return ld_err_from_http(http_status, reason);
}

/* ---- round trips ---- */

/* One blocking round trip; its callback turns the answer into the result. */
struct call {
    struct ld_kube *k;
    const char *verb, *path; /* path relative to API_PREFIX, for messages */
    const char *want_name;
    struct ld_lease *out;
    struct ld_errinfo *err;
    bool first_attempt;
    enum ld_err rc;
    bool done, retry;
};

/* A non-2xx answer: its Status says why. */
static enum ld_err http_error(const struct call *c, const struct ld_http_result *r)
{
    struct ld_errinfo *err = c->err;
    char detail[sizeof(err->msg)];

    ld_errinfo_set(err, LD_EHTTP, "%s", "");
    ld_status_decode(r->body, r->body_len, err);
    memcpy(detail, err->msg, sizeof(detail));
    if (detail[0])
        ld_errinfo_set(err, LD_EHTTP, "%s %s: HTTP %ld: %s", c->verb, c->path, r->status,
                       detail);
    else
        ld_errinfo_set(err, LD_EHTTP, "%s %s: HTTP %ld", c->verb, c->path, r->status);
    if (r->retry_after_ms >= 0)
        err->retry_after_ms = r->retry_after_ms;
    err->http_status = r->status;
    err->code = ld_err_from_http(r->status, err->reason);
    return err->code;
}

/* A 2xx answer: it must hold the Lease asked for. out is only touched on
 * LD_OK, so it may alias the lease the body was encoded from. */
static enum ld_err lease_answer(const struct call *c, const struct ld_http_result *r)
{
    struct ld_errinfo *err = c->err;
    enum ld_err rc = LD_OK;
    char detail[sizeof(err->msg)];
    struct ld_lease tmp;

    ld_lease_init(&tmp);
    if (r->body_len == 0) {
        rc = ld_errinfo_set(err, LD_EDECODE, "%s %s: HTTP %ld with an empty body",
                            c->verb, c->path, r->status);
        goto out;
    }
    enum ld_err d = ld_lease_decode(r->body, r->body_len, &tmp, err);
    if (d != LD_OK) {
        memcpy(detail, err->msg, sizeof(detail));
        rc = ld_errinfo_set(err, d == LD_ENOMEM ? LD_ENOMEM : LD_EDECODE,
                            "%s %s: HTTP %ld body is not a Lease: %.120s", c->verb,
                            c->path, r->status, detail);
        goto out;
    }
    if (!tmp.name || strcmp(tmp.name, c->want_name) != 0) {
        rc = ld_errinfo_set(err, LD_EDECODE, "%s %s: server returned Lease %.64s",
                            c->verb, c->path, tmp.name ? tmp.name : "(unnamed)");
        goto out;
    }
    ld_lease_clear(c->out);
    *c->out = tmp;
    ld_lease_init(&tmp);
    ld_errinfo_clear(err);
out:
    err->http_status = r->status;
    ld_lease_clear(&tmp);
    return rc;
}

static void on_call_done(void *ctx, ld_http_id id, const struct ld_http_result *r)
{
    struct call *c = ctx;
    (void)id;

    observe(c->k, c->verb, r->status, r->seconds);
    c->done = true;
    if (r->rc != LD_OK) {
        *c->err = r->err;
        c->rc = r->rc;
    } else if (r->status == 401 && r->auth_renewed && c->first_attempt) {
        ld_log(LD_LOG_INFO, "%s %s: 401 with a rotated token file; retrying once",
               c->verb, c->path);
        c->retry = true;
    } else if (r->status < 200 || r->status >= 300) {
        c->rc = http_error(c, r);
    } else {
        c->rc = lease_answer(c, r);
    }
}

/* Sends one request and drives the transport until its callback ran, the
 * cancel fd fired, or the grace past its timeout ran out. */
static void call_once(struct ld_kube *k, struct call *c,
                      const struct ld_http_request *req)
{
    ld_http_id id = 0;
    int64_t t0 = mono_ms();
    int64_t deadline = t0 + k->timeout_ms + LOOP_GRACE_MS;

    c->rc = ld_transport_submit(k->t, req, on_call_done, c, &id, c->err);
    if (c->rc != LD_OK) {
        c->done = true;
        return;
    }
    while (!c->done) {
        int64_t left = deadline - mono_ms();
        enum ld_err wr = left > 0 ? ld_transport_run(k->t, left, k->cancel_fd) : LD_OK;
        /* The done callback sets it, from inside ld_transport_run. */
        /* cppcheck-suppress knownConditionTrueFalse */
        if (c->done)
            break;
        if (wr == LD_ECANCELED || left <= 0) {
            ld_transport_cancel(k->t, id);
            observe(k, c->verb, 0, (double)(mono_ms() - t0) / 1e3);
            c->rc = wr == LD_ECANCELED
                        ? ld_errinfo_set(c->err, LD_ECANCELED, "%s %s: canceled", c->verb,
                                         c->path)
                        : ld_errinfo_set(c->err, LD_ETIMEOUT,
                                         "%s %s: no answer within %lld ms", c->verb,
                                         c->path, (long long)k->timeout_ms);
            c->done = true;
        }
    }
}

/* Runs verb on path (relative to API_PREFIX), retrying once after a 401
 * when the token file changed, and turns the answer into a Lease in out
 * (LD_OK) or an error. */
static enum ld_err do_request(struct ld_kube *k, const char *verb, const char *path,
                              const char *body, const char *want_name,
                              struct ld_lease *out, struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    char *full = NULL;

    /* A zero-length run only looks at the fd (and moves what is in flight). */
    if (ld_transport_run(k->t, 0, k->cancel_fd) == LD_ECANCELED) {
        rc = ld_errinfo_set(err, LD_ECANCELED, "%s %s: canceled before sending", verb,
                            path);
        goto out;
    }
    /* client-go sends the client timeout so the server gives up first (504). */
    long long tos = k->timeout_ms / 1000 > 0 ? k->timeout_ms / 1000 : 1;
    if (asprintf(&full, API_PREFIX "%s?timeout=%llds", path, tos) < 0) {
        full = NULL;
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    struct ld_http_request req = {.verb = verb,
                                  .path = full,
                                  .body = body,
                                  .body_len = body ? strlen(body) : 0,
                                  .timeout_ms = k->timeout_ms};
    struct call c = {.k = k,
                     .verb = verb,
                     .path = path,
                     .want_name = want_name,
                     .out = out,
                     .err = err,
                     .first_attempt = true};
    call_once(k, &c, &req);
    if (c.retry) {
        c.first_attempt = false;
        c.done = c.retry = false;
        call_once(k, &c, &req);
    }
    rc = c.rc;
out:
    free(full);
    return rc;
}

static enum ld_err check_names(const char *ns, const char *name, struct ld_errinfo *err)
{
    if (!ld_dns1123_label(ns))
        return ld_errinfo_set(err, LD_EINVAL, "namespace %.64s is not a DNS-1123 label",
                              ns ? ns : "(null)");
    if (!ld_dns1123_subdomain(name))
        return ld_errinfo_set(err, LD_EINVAL,
                              "lease name %.64s is not a DNS-1123 subdomain",
                              name ? name : "(null)");
    return LD_OK;
}

enum ld_err ld_kube_lease_get(struct ld_kube *k, const char *ns, const char *name,
                              struct ld_lease *out, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    if (!err)
        err = &local; /* the code below reads fields back */
    enum ld_err rc;
    char *path = NULL;

    ld_errinfo_clear(err);
    if (!k || !out)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    if ((rc = check_names(ns, name, err)))
        return rc;
    if (asprintf(&path, "/namespaces/%s/leases/%s", ns, name) < 0)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    rc = do_request(k, "GET", path, NULL, name, out, err);
    free(path);
    return rc;
}

/* Shared by create and update: both send the encoded lease. */
static enum ld_err write_lease(struct ld_kube *k, const char *verb,
                               const struct ld_lease *lease, struct ld_lease *out,
                               struct ld_errinfo *err)
{
    enum ld_err rc;
    char *path = NULL, *body = NULL, *name = NULL;
    bool create = strcmp(verb, "POST") == 0;

    if ((rc = check_names(lease->namespace_, lease->name, err)))
        goto out;
    if (create && lease->resource_version) {
        rc = ld_errinfo_set(err, LD_EINVAL, "create: the lease has a resourceVersion");
        goto out;
    }
    /* Without a resourceVersion a PUT would overwrite whatever is stored. */
    if (!create && (!lease->resource_version || !lease->resource_version[0])) {
        rc = ld_errinfo_set(err, LD_EINVAL, "update: the lease has no resourceVersion");
        goto out;
    }
    int n = create ? asprintf(&path, "/namespaces/%s/leases", lease->namespace_)
                   : asprintf(&path, "/namespaces/%s/leases/%s", lease->namespace_,
                              lease->name);
    name = strdup(lease->name);
    if (n < 0)
        path = NULL;
    body = ld_lease_encode(lease);
    if (n < 0 || !name || !body) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    rc = do_request(k, verb, path, body, name, out, err);
out:
    free(path);
    free(body);
    free(name);
    return rc;
}

enum ld_err ld_kube_lease_create(struct ld_kube *k, const struct ld_lease *lease,
                                 struct ld_lease *out, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    if (!err)
        err = &local; /* the code below reads fields back */
    ld_errinfo_clear(err);
    if (!k || !lease || !out)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    return write_lease(k, "POST", lease, out, err);
}

enum ld_err ld_kube_lease_update(struct ld_kube *k, const struct ld_lease *lease,
                                 struct ld_lease *out, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    if (!err)
        err = &local; /* the code below reads fields back */
    ld_errinfo_clear(err);
    if (!k || !lease || !out)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    return write_lease(k, "PUT", lease, out, err);
}

/* ---- watch ---- */

static void held_release(struct watch_state *w)
{
    w->held_len = 0;
    if (w->held_cap > WATCH_PENDING_KEEP) {
        free(w->held);
        w->held = NULL;
        w->held_cap = 0;
    }
}

/* Keeps bytes for the next wait; false when they do not fit. */
static bool held_append(struct watch_state *w, const char *data, size_t len)
{
    if (len > WATCH_PENDING_MAX - w->held_len)
        return false;
    if (w->held_len + len > w->held_cap) {
        size_t cap = w->held_cap ? w->held_cap : 4096;
        while (cap < w->held_len + len)
            cap *= 2;
        char *nb = realloc(w->held, cap);
        if (!nb)
            return false;
        w->held = nb;
        w->held_cap = cap;
    }
    memcpy(w->held + w->held_len, data, len);
    w->held_len += len;
    return true;
}

static void watch_end(struct ld_kube *k, enum ld_err rc)
{
    struct watch_state *w = &k->watch;
    w->id = 0;
    w->ended = true;
    w->end_rc = rc;
    w->end_err.code = rc;
}

static void on_watch_data(void *ctx, ld_http_id id, const char *data, size_t len)
{
    struct ld_kube *k = ctx;
    struct watch_state *w = &k->watch;

    if (id != w->id)
        return;
    if (w->fn) {
        w->fn(w->ctx, data, len);
        w->delivered = true;
        return;
    }
    if (held_append(w, data, len))
        return;
    ld_transport_cancel(k->t, id);
    observe(k, "WATCH", 200, (double)(mono_ms() - w->started_ms) / 1e3);
    ld_errinfo_set(&w->end_err, LD_ETOOBIG,
                   "watch %s: more than %d bytes arrived between two waits", w->path,
                   WATCH_PENDING_MAX);
    watch_end(k, LD_ETOOBIG);
}

static void on_watch_done(void *ctx, ld_http_id id, const struct ld_http_result *r)
{
    struct ld_kube *k = ctx;
    struct watch_state *w = &k->watch;
    struct ld_errinfo *err = &w->end_err;
    enum ld_err rc;

    if (id != w->id)
        return;
    observe(k, "WATCH", r->status, r->seconds);
    ld_errinfo_clear(err);
    if (r->rc != LD_OK) {
        *err = r->err;
        rc = r->rc;
    } else if (r->status != 200) {
        ld_status_decode(r->body, r->body_len, err);
        err->http_status = r->status;
        err->code = ld_err_from_http(r->status, err->reason);
        if (err->code == LD_OK)
            err->code = LD_EHTTP;
        rc = err->code;
    } else {
        rc = ld_errinfo_set(err, LD_EEOF, "watch %s: the server ended the stream",
                            w->path);
    }
    watch_end(k, rc);
}

bool ld_kube_watch_running(const struct ld_kube *k)
{
    return k && (k->watch.id != 0 || k->watch.ended);
}

void ld_kube_watch_stop(struct ld_kube *k)
{
    struct watch_state *w = &k->watch;
    if (w->id)
        ld_transport_cancel(k->t, w->id);
    w->id = 0;
    w->ended = false;
    free(w->path);
    w->path = NULL;
    free(w->held);
    w->held = NULL;
    w->held_len = w->held_cap = 0;
}

enum ld_err ld_kube_watch_start(struct ld_kube *k, const char *ns, const char *name,
                                const char *resource_version, int timeout_s,
                                struct ld_errinfo *err)
{
    struct watch_state *w = &k->watch;
    enum ld_err rc;
    char *path = NULL;

    ld_errinfo_clear(err);
    ld_kube_watch_stop(k);
    if ((rc = check_names(ns, name, err)))
        return rc;
    if (resource_version) {
        for (const char *p = resource_version; *p; p++) {
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                  (*p >= 'A' && *p <= 'Z') || *p == '-' || *p == '.'))
                return ld_errinfo_set(err, LD_EINVAL, "unexpected resourceVersion");
        }
    }
    if (timeout_s < 1)
        timeout_s = 1;
    if (asprintf(&w->path, "/namespaces/%s/leases?watch=1", ns) < 0) {
        w->path = NULL;
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    }
    /* The name field selector makes RBAC's resourceNames apply to the watch. */
    int n =
        asprintf(&path,
                 API_PREFIX "/namespaces/%s/leases?watch=1"
                            "&fieldSelector=metadata.name%%3D%s&allowWatchBookmarks=true"
                            "&timeoutSeconds=%d%s%s",
                 ns, name, timeout_s,
                 resource_version && resource_version[0] ? "&resourceVersion=" : "",
                 resource_version ? resource_version : "");
    if (n < 0) {
        path = NULL;
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    struct ld_http_request req = {
        .verb = "GET",
        .path = path,
        .timeout_ms = (int64_t)(timeout_s + WATCH_MARGIN_S) * 1000,
    };
    w->started_ms = mono_ms();
    rc = ld_transport_open_stream(k->t, &req, on_watch_data, on_watch_done, k, &w->id,
                                  err);
out:
    free(path);
    if (rc != LD_OK)
        ld_kube_watch_stop(k);
    return rc;
}

enum ld_err ld_kube_watch_wait(struct ld_kube *k, int64_t wait_ms,
                               ld_kube_watch_data_fn fn, void *ctx,
                               struct ld_errinfo *err)
{
    struct watch_state *w = &k->watch;
    enum ld_err rc = LD_OK;
    int64_t deadline = mono_ms() + (wait_ms > 0 ? wait_ms : 0);

    ld_errinfo_clear(err);
    w->delivered = false;
    if (w->held_len > 0) {
        if (fn)
            fn(ctx, w->held, w->held_len);
        held_release(w);
        return LD_OK; /* an end that came after these bytes is said next time */
    }
    w->fn = fn;
    w->ctx = ctx;
    /* At least one run, so a zero wait still moves the stream. */
    for (;;) {
        enum ld_err wr = LD_OK;
        if (!w->ended)
            wr = ld_transport_run(k->t, deadline - mono_ms(), k->cancel_fd);
        if (w->delivered)
            break;
        if (w->ended) {
            rc = w->end_rc;
            if (err)
                *err = w->end_err;
            ld_kube_watch_stop(k);
            break;
        }
        if (wr == LD_ECANCELED) {
            rc = LD_ECANCELED;
            break;
        }
        if (mono_ms() >= deadline)
            break;
    }
    w->fn = NULL;
    w->ctx = NULL;
    return rc;
}
