/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube: the Lease REST layer over a transport (transport.h), whichever it
 * is (kube_curl.c picks libcurl's): paths, name checks, encoding and
 * decoding, status mapping (rest.h), the one retry after a 401 with a
 * rotated token. The blocking calls of kube.h are each a submit (or
 * open_stream) followed by runs of the transport until its callback came;
 * the asynchronous ones and the watch leave the runs to the caller.
 */
#include "kube.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "clock.h"
#include "dnsname.h"
#include "log.h"
#include "rest.h"

#define DEFAULT_TIMEOUT_MS 5000
#define MAX_TIMEOUT_MS (3600 * 1000)
/* The transport ends every exchange at its timeout; this only bounds the
 * blocking wait in case it did not. */
#define LOOP_GRACE_MS 2000
#define API_PREFIX "/apis/coordination.k8s.io/v1"
/* The server ends a watch after timeoutSeconds; the margin only catches a
 * server that never does. */
#define WATCH_MARGIN_S 30
struct ld_kube {
    struct ld_transport *t;
    int64_t timeout_ms;
    int cancel_fd;
    ld_kube_observer_fn observer;
    void *observer_ctx;
    struct acall *calls; /* asynchronous calls in flight */
    ld_kube_call next_call;
};

static void observe(struct ld_kube *k, const char *verb, long status, double seconds)
{
    if (k->observer)
        k->observer(k->observer_ctx, verb, status, seconds);
}

static void cancel_all(struct ld_kube *k);
static bool plausible_rv(const char *rv);

struct ld_kube *ld_kube_new_on(struct ld_transport *t, struct ld_errinfo *err)
{
    struct ld_kube *k = calloc(1, sizeof(*k));

    ld_errinfo_clear(err);
    if (!k) {
        ld_transport_free(t);
        ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        return NULL;
    }
    k->cancel_fd = -1;
    k->timeout_ms = DEFAULT_TIMEOUT_MS;
    k->t = t;
    return k;
}

void ld_kube_free(struct ld_kube *k)
{
    if (!k)
        return;
    cancel_all(k);
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

enum ld_err ld_kube_map_status(long http_status, const char *reason)
{
    return ld_err_from_http(http_status, reason);
}

/* ---- asynchronous calls ---- */

/* One call in flight: a round trip (retried once after a 401 with a
 * rotated token) or a watch stream. Owned by the client's list until its
 * callback ran or it was canceled. */
struct acall {
    struct ld_kube *k;
    ld_kube_call id;
    ld_http_id hid; /* the transport's current exchange */
    const char *verb;
    char *rel;       /* path relative to API_PREFIX, for messages */
    char *full;      /* what is sent */
    char *body;      /* NULL: none */
    char *want_name; /* the Lease the answer must be */
    int64_t timeout_ms;
    bool retried;
    bool no_answer; /* the body is not a Lease (DELETE) */
    int64_t started_ms;
    ld_kube_lease_fn done;
    ld_kube_lease_list_fn list_done; /* a LIST: instead of done */
    ld_kube_stream_data_fn data;     /* streams */
    ld_kube_stream_end_fn end;       /* streams */
    void *ctx;
    struct acall *next;
};

static void acall_free(struct acall *c)
{
    if (!c)
        return;
    free(c->rel);
    free(c->full);
    free(c->body);
    free(c->want_name);
    free(c);
}

static void acall_unlink(struct ld_kube *k, struct acall *c)
{
    for (struct acall **p = &k->calls; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            return;
        }
    }
}

static struct acall *acall_find(const struct ld_kube *k, ld_kube_call id)
{
    for (struct acall *c = k->calls; c; c = c->next) {
        if (c->id == id)
            return c;
    }
    return NULL;
}

/* A 2xx answer: it must hold the Lease asked for; decoded into out. */
static enum ld_err lease_answer(const struct acall *c, const struct ld_http_result *r,
                                struct ld_lease *out, struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    char detail[sizeof(err->msg)];

    if (r->body_len == 0) {
        rc = ld_errinfo_set(err, LD_EDECODE, "%s %s: HTTP %ld with an empty body",
                            c->verb, c->rel, r->status);
        goto out;
    }
    enum ld_err d = ld_lease_decode(r->body, r->body_len, out, err);
    if (d != LD_OK) {
        memcpy(detail, err->msg, sizeof(detail));
        rc = ld_errinfo_set(err, d == LD_ENOMEM ? LD_ENOMEM : LD_EDECODE,
                            "%s %s: HTTP %ld body is not a Lease: %.120s", c->verb,
                            c->rel, r->status, detail);
        goto out;
    }
    if (!out->name || strcmp(out->name, c->want_name) != 0) {
        rc = ld_errinfo_set(err, LD_EDECODE, "%s %s: server returned Lease %.64s",
                            c->verb, c->rel, out->name ? out->name : "(unnamed)");
        goto out;
    }
    ld_errinfo_clear(err);
out:
    err->http_status = r->status;
    if (rc != LD_OK)
        ld_lease_clear(out);
    return rc;
}

/* A 2xx answer to a LIST: its items decoded into a new array (*items,
 * free each with ld_lease_clear, then the array) and its resourceVersion
 * (*list_rv, owned, NULL when absent); items that are no Lease are
 * skipped, so one malformed object does not hide the others. */
static enum ld_err list_answer(const struct acall *c, const struct ld_http_result *r,
                               struct ld_lease **items, size_t *n, char **list_rv,
                               struct ld_errinfo *err)
{
    json_error_t je;
    json_t *root = json_loadb(r->body ? r->body : "", r->body_len, 0, &je);
    json_t *arr = json_is_object(root) ? json_object_get(root, "items") : NULL;
    json_t *meta = json_is_object(root) ? json_object_get(root, "metadata") : NULL;
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    enum ld_err rc = LD_OK;
    *items = NULL;
    *n = 0;
    *list_rv = rv ? strdup(rv) : NULL; /* out of memory: as if absent */
    if (!json_is_array(arr)) {
        rc = ld_errinfo_set(err, LD_EDECODE, "%s %s: HTTP %ld body is not a LeaseList",
                            c->verb, c->rel, r->status);
        goto out;
    }
    *items = calloc(json_array_size(arr) + 1, sizeof(**items));
    if (!*items) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    size_t i;
    json_t *item;
    json_array_foreach(arr, i, item)
    {
        struct ld_lease *l = &(*items)[*n];
        ld_lease_init(l);
        if (ld_lease_from_json(item, l, err) == LD_OK) {
            (*n)++;
            continue;
        }
        ld_log(LD_LOG_WARN, "%s %s: item %zu skipped: %s", c->verb, c->rel, i, err->msg);
        ld_lease_clear(l);
    }
    ld_errinfo_clear(err);
out:
    err->http_status = r->status;
    json_decref(root);
    return rc;
}

static void free_items(struct ld_lease *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ld_lease_clear(&items[i]);
    free(items);
}

static enum ld_err submit_exchange(struct acall *c, struct ld_errinfo *err);

static void on_acall_done(void *ctx, ld_http_id hid, const struct ld_http_result *r)
{
    struct acall *c = ctx;
    struct ld_kube *k = c->k;
    struct ld_errinfo err;
    struct ld_lease lease;
    struct ld_lease *items = NULL;
    size_t n_items = 0;
    char *list_rv = NULL;
    enum ld_err rc;
    (void)hid;

    ld_errinfo_clear(&err);
    ld_lease_init(&lease);
    observe(k, c->verb, r->status, r->seconds);
    if (r->rc == LD_OK && r->status == 401 && r->auth_renewed && !c->retried) {
        ld_log(LD_LOG_INFO, "%s %s: 401 with a rotated token file; retrying once",
               c->verb, c->rel);
        c->retried = true;
        if (submit_exchange(c, &err) == LD_OK)
            return;
        rc = err.code;
    } else {
        /* A DELETE's 2xx (no_answer) says it all; other bodies are read. */
        rc = ld_rest_outcome(r, c->verb, c->rel, &err);
        if (rc == LD_OK && c->list_done)
            rc = list_answer(c, r, &items, &n_items, &list_rv, &err);
        else if (rc == LD_OK && !c->no_answer)
            rc = lease_answer(c, r, &lease, &err);
    }
    acall_unlink(k, c);
    if (c->list_done)
        c->list_done(c->ctx, c->id, rc, rc == LD_OK ? items : NULL,
                     rc == LD_OK ? n_items : 0, rc == LD_OK ? list_rv : NULL, &err);
    else
        c->done(c->ctx, c->id, rc, rc == LD_OK && !c->no_answer ? &lease : NULL, &err);
    ld_lease_clear(&lease);
    free_items(items, n_items);
    free(list_rv);
    acall_free(c);
}

/* Sends c's request with what is left of its timeout: the retry after a
 * 401 gets no new one, since the caller bounded the whole call (a renewal
 * by its deadline). A Lease written here (a body, and a Lease wanted back)
 * is always an election's own: the host's engines are the only writers of
 * Leases through this client, and their renewals, acquisitions and releases
 * must not queue behind reads, so they go as heartbeats. */
static enum ld_err submit_exchange(struct acall *c, struct ld_errinfo *err)
{
    int64_t left = c->timeout_ms - (ld_mono_ms() - c->started_ms);
    if (left < 1)
        return ld_errinfo_set(err, LD_ETIMEOUT, "%s %s: no time left within %lld ms",
                              c->verb, c->rel, (long long)c->timeout_ms);
    struct ld_http_request req = {
        .verb = c->verb,
        .path = c->full,
        .body = c->body,
        .body_len = c->body ? strlen(c->body) : 0,
        .timeout_ms = left,
        .priority = c->body && c->want_name[0] ? LD_PRIO_HEARTBEAT : LD_PRIO_NORMAL};
    return ld_transport_submit(c->k->t, &req, on_acall_done, c, &c->hid, err);
}

/* Starts verb on rel (relative to API_PREFIX) with query ("" or
 * "name=value&" parameters, escaped) before the timeout; takes rel and
 * body over. want_name NULL: any 2xx is the answer (a DELETE's body is not
 * a Lease). list_fn instead of fn: the answer is a LeaseList. */
static enum ld_err start_call_query(struct ld_kube *k, const char *verb, char *rel,
                                    const char *query, char *body, const char *want_name,
                                    int64_t timeout_ms, ld_kube_lease_fn fn,
                                    ld_kube_lease_list_fn list_fn, void *ctx,
                                    ld_kube_call *call, struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    struct acall *c = calloc(1, sizeof(*c));

    if (!c) {
        free(rel);
        free(body);
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    }
    c->k = k;
    c->verb = verb;
    c->rel = rel;
    c->body = body;
    c->done = fn;
    c->list_done = list_fn;
    c->ctx = ctx;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : k->timeout_ms;
    if (c->timeout_ms > MAX_TIMEOUT_MS)
        c->timeout_ms = MAX_TIMEOUT_MS;
    /* client-go sends the client timeout so the server gives up first (504). */
    long long tos = c->timeout_ms / 1000 > 0 ? c->timeout_ms / 1000 : 1;
    c->no_answer = !want_name && !list_fn;
    c->want_name = strdup(want_name ? want_name : "");
    if (asprintf(&c->full, API_PREFIX "%s?%stimeout=%llds", rel, query, tos) < 0)
        c->full = NULL;
    if (!c->want_name || !c->full) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    c->started_ms = ld_mono_ms();
    rc = submit_exchange(c, err);
    if (rc != LD_OK)
        goto out;
    c->id = ++k->next_call;
    c->next = k->calls;
    k->calls = c;
    *call = c->id;
out:
    if (rc != LD_OK)
        acall_free(c);
    return rc;
}
static enum ld_err start_call(struct ld_kube *k, const char *verb, char *rel, char *body,
                              const char *want_name, int64_t timeout_ms,
                              ld_kube_lease_fn fn, void *ctx, ld_kube_call *call,
                              struct ld_errinfo *err)
{
    return start_call_query(k, verb, rel, "", body, want_name, timeout_ms, fn, NULL, ctx,
                            call, err);
}

void ld_kube_cancel(struct ld_kube *k, ld_kube_call call)
{
    struct acall *c = k && call ? acall_find(k, call) : NULL;
    if (!c)
        return;
    ld_transport_cancel(k->t, c->hid);
    /* An abandoned round trip counts, as a request without an answer; a
     * watch the caller stops is no failure. */
    if (!c->data)
        observe(k, c->verb, 0, (double)(ld_mono_ms() - c->started_ms) / 1e3);
    acall_unlink(k, c);
    acall_free(c);
}

size_t ld_kube_calls_pending(const struct ld_kube *k)
{
    size_t n = 0;
    for (const struct acall *c = k ? k->calls : NULL; c; c = c->next)
        n++;
    return n;
}

static void cancel_all(struct ld_kube *k)
{
    while (k->calls)
        ld_kube_cancel(k, k->calls->id);
}

/* ---- blocking round trips, on the asynchronous calls ---- */

struct wait_result {
    bool done;
    enum ld_err rc;
    struct ld_lease *out;
    struct ld_errinfo *err;
};

static void on_blocking_done(void *ctx, ld_kube_call call, enum ld_err rc,
                             struct ld_lease *lease, const struct ld_errinfo *err)
{
    struct wait_result *w = ctx;
    (void)call;
    w->done = true;
    w->rc = rc;
    *w->err = *err;
    if (rc == LD_OK) {
        ld_lease_clear(w->out);
        *w->out = *lease;
        ld_lease_init(lease);
    }
}

/* Drives the transport until call's callback ran, the cancel fd fired, or
 * the grace past its timeout ran out. */
static enum ld_err wait_call(struct ld_kube *k, ld_kube_call call, const char *verb,
                             const char *rel, struct wait_result *w)
{
    int64_t t0 = ld_mono_ms();
    int64_t deadline = t0 + k->timeout_ms + LOOP_GRACE_MS;

    while (!w->done) {
        int64_t left = deadline - ld_mono_ms();
        enum ld_err wr = left > 0 ? ld_transport_run(k->t, left, k->cancel_fd) : LD_OK;
        /* The done callback sets it, from inside ld_transport_run. */
        /* cppcheck-suppress knownConditionTrueFalse */
        if (w->done)
            break;
        if (wr == LD_ECANCELED || left <= 0) {
            ld_kube_cancel(k, call);
            return wr == LD_ECANCELED
                       ? ld_errinfo_set(w->err, LD_ECANCELED, "%s %s: canceled", verb,
                                        rel)
                       : ld_errinfo_set(w->err, LD_ETIMEOUT,
                                        "%s %s: no answer within %lld ms", verb, rel,
                                        (long long)k->timeout_ms);
        }
    }
    return w->rc;
}

/* Runs verb on rel (relative to API_PREFIX; taken over, as body is) and
 * waits for it: a Lease in out (LD_OK) or an error. */
static enum ld_err do_request(struct ld_kube *k, const char *verb, char *rel, char *body,
                              const char *want_name, struct ld_lease *out,
                              struct ld_errinfo *err)
{
    struct wait_result w = {.out = out, .err = err};
    ld_kube_call call = 0;
    enum ld_err rc;

    /* A zero-length run only looks at the fd (and moves what is in flight). */
    if (ld_transport_run(k->t, 0, k->cancel_fd) == LD_ECANCELED) {
        rc = ld_errinfo_set(err, LD_ECANCELED, "%s %s: canceled before sending", verb,
                            rel);
        free(rel);
        free(body);
        return rc;
    }
    char where[256];
    snprintf(where, sizeof(where), "%s", rel);
    rc = start_call(k, verb, rel, body, want_name, k->timeout_ms, on_blocking_done, &w,
                    &call, err);
    if (rc != LD_OK)
        return rc;
    return wait_call(k, call, verb, where, &w);
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

/* A request made ready to send: what the blocking and the asynchronous
 * entries share. */
struct prepared {
    const char *verb;
    char *rel;  /* owned until handed to start_call */
    char *body; /* likewise */
    const char *want_name;
};

static enum ld_err prepare_get(const char *ns, const char *name, struct prepared *p,
                               struct ld_errinfo *err)
{
    enum ld_err rc;
    if ((rc = check_names(ns, name, err)))
        return rc;
    p->verb = "GET";
    p->want_name = name;
    if (asprintf(&p->rel, "/namespaces/%s/leases/%s", ns, name) < 0) {
        p->rel = NULL;
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    }
    return LD_OK;
}

/* Create and update both send the encoded lease. */
static enum ld_err prepare_write(bool create, const struct ld_lease *lease,
                                 struct prepared *p, struct ld_errinfo *err)
{
    enum ld_err rc;

    if ((rc = check_names(lease->namespace_, lease->name, err)))
        return rc;
    if (create && lease->resource_version)
        return ld_errinfo_set(err, LD_EINVAL, "create: the lease has a resourceVersion");
    /* Without a resourceVersion a PUT would overwrite whatever is stored. */
    if (!create && (!lease->resource_version || !lease->resource_version[0]))
        return ld_errinfo_set(err, LD_EINVAL, "update: the lease has no resourceVersion");
    p->verb = create ? "POST" : "PUT";
    p->want_name = lease->name;
    int n = create ? asprintf(&p->rel, "/namespaces/%s/leases", lease->namespace_)
                   : asprintf(&p->rel, "/namespaces/%s/leases/%s", lease->namespace_,
                              lease->name);
    if (n < 0)
        p->rel = NULL;
    p->body = ld_lease_encode(lease);
    if (!p->rel || !p->body) {
        free(p->rel);
        free(p->body);
        p->rel = p->body = NULL;
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    }
    return LD_OK;
}

/* The blocking entries: prepared (when rc is LD_OK), sent, waited for. */
static enum ld_err run_blocking(struct ld_kube *k, enum ld_err rc, struct prepared *p,
                                struct ld_lease *out, struct ld_errinfo *err)
{
    if (rc != LD_OK)
        return rc;
    return do_request(k, p->verb, p->rel, p->body, p->want_name, out, err);
}

static enum ld_err run_async(struct ld_kube *k, enum ld_err rc, struct prepared *p,
                             int64_t timeout_ms, ld_kube_lease_fn fn, void *ctx,
                             ld_kube_call *call, struct ld_errinfo *err)
{
    if (rc != LD_OK)
        return rc;
    return start_call(k, p->verb, p->rel, p->body, p->want_name, timeout_ms, fn, ctx,
                      call, err);
}

/* Every entry starts the same way: errors cleared, NULLs refused. */
static struct ld_errinfo *begin(struct ld_errinfo *err, struct ld_errinfo *local)
{
    if (!err)
        err = local; /* the code reads fields back */
    ld_errinfo_clear(err);
    return err;
}

enum ld_err ld_kube_lease_get(struct ld_kube *k, const char *ns, const char *name,
                              struct ld_lease *out, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    struct prepared p = {0};
    err = begin(err, &local);
    if (!k || !out)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    return run_blocking(k, prepare_get(ns, name, &p, err), &p, out, err);
}

/* A create (POST) or an update (PUT) of lease, waited for. */
static enum ld_err write_blocking(struct ld_kube *k, bool create,
                                  const struct ld_lease *lease, struct ld_lease *out,
                                  struct ld_errinfo *err)
{
    struct ld_errinfo local;
    struct prepared p = {0};
    err = begin(err, &local);
    if (!k || !lease || !out)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    return run_blocking(k, prepare_write(create, lease, &p, err), &p, out, err);
}

enum ld_err ld_kube_lease_create(struct ld_kube *k, const struct ld_lease *lease,
                                 struct ld_lease *out, struct ld_errinfo *err)
{
    return write_blocking(k, true, lease, out, err);
}

enum ld_err ld_kube_lease_update(struct ld_kube *k, const struct ld_lease *lease,
                                 struct ld_lease *out, struct ld_errinfo *err)
{
    return write_blocking(k, false, lease, out, err);
}

enum ld_err ld_kube_lease_get_start(struct ld_kube *k, const char *ns, const char *name,
                                    int64_t timeout_ms, ld_kube_lease_fn fn, void *ctx,
                                    ld_kube_call *call, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    struct prepared p = {0};
    err = begin(err, &local);
    if (!k || !fn || !call)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    return run_async(k, prepare_get(ns, name, &p, err), &p, timeout_ms, fn, ctx, call,
                     err);
}

/* create_start and update_start: the same checks, one verb apart. */
static enum ld_err write_start(struct ld_kube *k, bool create,
                               const struct ld_lease *lease, int64_t timeout_ms,
                               ld_kube_lease_fn fn, void *ctx, ld_kube_call *call,
                               struct ld_errinfo *err)
{
    struct ld_errinfo local;
    struct prepared p = {0};
    err = begin(err, &local);
    if (!k || !lease || !fn || !call)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    return run_async(k, prepare_write(create, lease, &p, err), &p, timeout_ms, fn, ctx,
                     call, err);
}

enum ld_err ld_kube_lease_create_start(struct ld_kube *k, const struct ld_lease *lease,
                                       int64_t timeout_ms, ld_kube_lease_fn fn, void *ctx,
                                       ld_kube_call *call, struct ld_errinfo *err)
{
    return write_start(k, true, lease, timeout_ms, fn, ctx, call, err);
}

enum ld_err ld_kube_lease_update_start(struct ld_kube *k, const struct ld_lease *lease,
                                       int64_t timeout_ms, ld_kube_lease_fn fn, void *ctx,
                                       ld_kube_call *call, struct ld_errinfo *err)
{
    return write_start(k, false, lease, timeout_ms, fn, ctx, call, err);
}

/* DeleteOptions with preconditions: the server deletes only the object we
 * mean, not one written (or re-created) since we looked. */
static char *delete_options(const char *uid, const char *rv)
{
    json_t *pre = json_object();
    json_t *opts = json_pack("{s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
    char *text = NULL;
    if (!pre || !opts)
        goto out;
    if ((uid && json_object_set_new(pre, "uid", json_string(uid)) != 0) ||
        (rv && json_object_set_new(pre, "resourceVersion", json_string(rv)) != 0))
        goto out;
    if (json_object_size(pre) > 0 && json_object_set(opts, "preconditions", pre) != 0)
        goto out;
    text = json_dumps(opts, JSON_COMPACT);
out:
    json_decref(pre);
    json_decref(opts);
    return text;
}

enum ld_err ld_kube_lease_delete_start(struct ld_kube *k, const char *ns,
                                       const char *name, const char *uid,
                                       const char *resource_version, int64_t timeout_ms,
                                       ld_kube_lease_fn fn, void *ctx, ld_kube_call *call,
                                       struct ld_errinfo *err)
{
    struct ld_errinfo local;
    struct prepared p = {0};
    enum ld_err rc;
    err = begin(err, &local);
    if (!k || !fn || !call)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    if ((rc = prepare_get(ns, name, &p, err)) != LD_OK)
        return rc;
    if (!plausible_rv(resource_version)) {
        free(p.rel);
        return ld_errinfo_set(err, LD_EINVAL, "unexpected resourceVersion");
    }
    if (!(p.body = delete_options(uid, resource_version))) {
        free(p.rel);
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    }
    return start_call(k, "DELETE", p.rel, p.body, NULL, timeout_ms, fn, ctx, call, err);
}

static char *query_escape(const char *s);

enum ld_err ld_kube_lease_list_start(struct ld_kube *k, const char *ns,
                                     const char *label_selector, int64_t timeout_ms,
                                     ld_kube_lease_list_fn fn, void *ctx,
                                     ld_kube_call *call, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    char *rel = NULL, *esc = NULL, *query = NULL;
    enum ld_err rc;
    err = begin(err, &local);
    if (!k || !fn || !call)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    if (!ld_dns1123_label(ns ? ns : ""))
        return ld_errinfo_set(err, LD_EINVAL, "namespace %.64s is not a DNS-1123 label",
                              ns ? ns : "(null)");
    bool selective = label_selector && label_selector[0];
    if (asprintf(&rel, "/namespaces/%s/leases", ns) < 0)
        rel = NULL;
    if (selective && (esc = query_escape(label_selector)) &&
        asprintf(&query, "labelSelector=%s&", esc) < 0)
        query = NULL;
    if (!rel || (selective && !query)) {
        free(rel);
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    } else {
        rc = start_call_query(k, "GET", rel, query ? query : "", NULL, NULL, timeout_ms,
                              NULL, fn, ctx, call, err);
    }
    free(esc);
    free(query);
    return rc;
}

/* ---- watch ---- */

/* How a watch stream ended: the transport's failure, the mapped Status of a
 * non-200 answer, or LD_EEOF when the server ended a 200 stream. Fills err
 * (path names the watch). */
static enum ld_err stream_outcome(const struct ld_http_result *r, const char *path,
                                  struct ld_errinfo *err)
{
    if (r->rc != LD_OK) {
        *err = r->err;
        return r->rc;
    }
    if (r->status != 200)
        return ld_rest_error(r, NULL, NULL, err);
    ld_errinfo_clear(err);
    return ld_errinfo_set(err, LD_EEOF, "watch %s: the server ended the stream", path);
}

static void on_astream_data(void *ctx, ld_http_id hid, const char *data, size_t len)
{
    struct acall *c = ctx;
    (void)hid;
    c->data(c->ctx, c->id, data, len);
}

static void on_astream_done(void *ctx, ld_http_id hid, const struct ld_http_result *r)
{
    struct acall *c = ctx;
    struct ld_kube *k = c->k;
    struct ld_errinfo err;
    (void)hid;

    observe(k, "WATCH", r->status, r->seconds);
    enum ld_err rc = stream_outcome(r, c->rel, &err);
    acall_unlink(k, c);
    c->end(c->ctx, c->id, rc, &err);
    acall_free(c);
}

/* Label selectors go into the query as they are, percent-encoded where
 * they hold characters a query may not (=, !, spaces, parentheses and
 * commas are the usual ones). */
static char *query_escape(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n * 3 + 1);
    char *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' ||
            *p == '~' || *p == '/') {
            *o++ = (char)*p;
        } else {
            o += sprintf(o, "%%%02X", *p);
        }
    }
    *o = '\0';
    return out;
}

static bool plausible_rv(const char *rv)
{
    for (const char *p = rv ? rv : ""; *p; p++) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
              (*p >= 'A' && *p <= 'Z') || *p == '-' || *p == '.'))
            return false;
    }
    return true;
}

enum ld_err ld_kube_lease_watch_open(struct ld_kube *k,
                                     const struct ld_kube_watch_spec *spec,
                                     ld_kube_stream_data_fn data,
                                     ld_kube_stream_end_fn end, void *ctx,
                                     ld_kube_call *call, struct ld_errinfo *err)
{
    struct ld_errinfo local;
    enum ld_err rc = LD_OK;
    char *selector = NULL;
    struct acall *c = NULL;

    err = begin(err, &local);
    if (!k || !spec || !data || !end || !call)
        return ld_errinfo_set(err, LD_EINVAL, "NULL argument");
    if (!ld_dns1123_label(spec->namespace_))
        return ld_errinfo_set(err, LD_EINVAL, "namespace %.64s is not a DNS-1123 label",
                              spec->namespace_ ? spec->namespace_ : "(null)");
    if (spec->name && !ld_dns1123_subdomain(spec->name))
        return ld_errinfo_set(err, LD_EINVAL,
                              "lease name %.64s is not a DNS-1123 subdomain", spec->name);
    if (!plausible_rv(spec->resource_version))
        return ld_errinfo_set(err, LD_EINVAL, "unexpected resourceVersion");
    if (!(c = calloc(1, sizeof(*c))))
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    c->k = k;
    c->verb = "GET";
    c->data = data;
    c->end = end;
    c->ctx = ctx;
    int timeout_s = spec->timeout_s < 1 ? 1 : spec->timeout_s;
    const char *rv = spec->resource_version ? spec->resource_version : "";
    if (spec->name) {
        if (asprintf(&selector, "&fieldSelector=metadata.name%%3D%s", spec->name) < 0)
            selector = NULL;
    } else if (spec->label_selector && spec->label_selector[0]) {
        char *esc = query_escape(spec->label_selector);
        if (!esc || asprintf(&selector, "&labelSelector=%s", esc) < 0)
            selector = NULL;
        free(esc);
    } else {
        selector = strdup("");
    }
    if (asprintf(&c->rel, "/namespaces/%s/leases?watch=1", spec->namespace_) < 0)
        c->rel = NULL;
    if (selector && c->rel &&
        asprintf(&c->full,
                 API_PREFIX "/namespaces/%s/leases?watch=1%s&allowWatchBookmarks=true"
                            "&timeoutSeconds=%d%s%s",
                 spec->namespace_, selector, timeout_s, rv[0] ? "&resourceVersion=" : "",
                 rv) < 0)
        c->full = NULL;
    if (!selector || !c->rel || !c->full) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    struct ld_http_request req = {
        .verb = "GET",
        .path = c->full,
        .timeout_ms = (int64_t)(timeout_s + WATCH_MARGIN_S) * 1000,
    };
    rc = ld_transport_open_stream(k->t, &req, on_astream_data, on_astream_done, c,
                                  &c->hid, err);
    if (rc != LD_OK)
        goto out;
    c->id = ++k->next_call;
    c->next = k->calls;
    k->calls = c;
    *call = c->id;
    c = NULL;
out:
    free(selector);
    acall_free(c);
    return rc;
}
