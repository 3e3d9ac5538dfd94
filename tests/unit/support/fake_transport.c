/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_transport: an in-memory Lease API behind the transport vtable, run
 * as a discrete-event simulation on a fake clock (see fake_transport.h).
 *
 * Everything that will happen is an item with a due time and a sequence
 * number; fake_transport_run takes the due items in that order. Stored objects are
 * never changed once stored (a write stores a new object), so the watch
 * history can keep references to them.
 */
#include "fake_transport.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API_PREFIX "/apis/coordination.k8s.io/v1/namespaces/"
#define DEFAULT_TIMEOUT_MS 5000
/* The API server picks a random watch timeout when none is given; a fixed
 * one keeps the fake deterministic. */
#define DEFAULT_WATCH_TIMEOUT_S 1800
/* Zero-wait runs in a row with nothing due that count as a busy loop. */
#define FAKE_TRANSPORT_SPIN_RUNS 10
#define FAKE_TRANSPORT_MAX_CLIENTS 32

enum item_kind {
    IT_SERVE, /* apply a round trip to the store and answer it */
    IT_DONE,  /* call done with a prepared result */
    IT_OPEN,  /* a stream starts: its first events go out */
    IT_DATA,  /* stream bytes */
};

struct item {
    uint64_t seq;
    int64_t due;
    enum item_kind kind;
    ld_http_id id;
    enum ld_err rc;   /* IT_DONE */
    long status;      /* IT_DONE */
    char *data;       /* IT_DONE body, IT_DATA bytes; owned */
    int64_t retry_ms; /* IT_DONE */
    /* IT_SERVE of an exchange that timed out: the request, owned here
     * since the exchange is over. */
    struct xchg *ghost;
    /* IT_SERVE of an FAKE_TRANSPORT_LATE_ANSWER exchange: when its answer is due (0
     * for the others), and its timeout. */
    int64_t answer_ms;
    int64_t limit_ms;
    /* IT_SERVE of an FAKE_TRANSPORT_APPLIED_STATUS exchange: the answer's status. */
    long applied_status;
};

struct fake_transport;

/* One transport on the shared API: a replica's connection. */
struct fake_transport_client {
    struct ld_transport base;
    struct fake_transport *f;
    int index;
    bool freed;
    uint64_t idle_runs; /* runs in a row that neither waited nor delivered */
    /* Added to the watch latency of this client's streams (one replica's
     * watch behind the others'); fake_transport_set_client_watch_lag_ms. */
    int64_t watch_lag_ms;
};

struct xchg {
    struct fake_transport_client *c;
    ld_http_id id;
    bool stream;
    bool live; /* a stream whose first events went out */
    bool stalled;
    /* When its last event falls due: a lag that shrinks must not let a
     * later event overtake an earlier one (a stream keeps its order). */
    int64_t last_due_ms;
    ld_http_done_fn done;
    ld_http_data_fn data;
    void *ctx;
    size_t rec;
    int64_t start_ms;
    char kind[8];
    char *name;      /* Lease named by the path or fieldSelector, "" none */
    char *label_key; /* label selector, NULL none */
    char *label_val;
    char *label_absent; /* a label the selector wants absent ("!k"), NULL none */
    char *rv;           /* watch start, NULL none */
    int timeout_s;      /* watch */
    char *body;         /* request body, NUL-terminated */
};

struct rec {
    struct fake_transport_record pub;
    char *path, *body, *name;
};

struct hist {
    uint64_t rv;
    const char *type;
    json_t *obj; /* owned reference */
};

struct fault {
    int client; /* -1 any */
    char *name; /* NULL any */
    char *verb; /* NULL any */
    struct fake_transport_fault f;
};

struct fake_transport {
    struct fake_transport_client *clients[FAKE_TRANSPORT_MAX_CLIENTS];
    size_t nclients, live_clients;
    char *ns;
    int64_t now_ms, start_ms, start_wall_us;
    int64_t latency_ms, watch_latency_ms;
    uint64_t rv;
    uint64_t history_floor; /* watches from an rv below it are Expired */
    uint64_t next_id, next_seq, uid_seq, callbacks;
    json_t **objs;
    size_t nobjs, capobjs;
    struct hist *hist;
    size_t nhist, caphist;
    struct xchg **x;
    size_t nx, capx;
    struct item *items;
    size_t nitems, capitems;
    struct rec **recs;
    size_t nrecs, caprecs;
    struct fault *faults;
    size_t nfaults, capfaults;
    size_t max_in_flight, max_per_name;
    uint64_t spin_ms;    /* fake time that passed only because a caller spun */
    bool writes_outlive; /* fake_transport_set_writes_outlive_clients */
};

/* Test support: allocation failure is not a case the fake handles. */
static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return p;
    *cap = *cap ? *cap * 2 : 16;
    p = realloc(p, *cap * size);
    if (!p)
        abort();
    return p;
}

/* The same for an array of object pointers. */
static void *grow_ptrs(void *p, size_t *cap, size_t n)
{
    return grow(p, cap, n, sizeof(void *));
}

static char *dup_or_die(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        abort();
    return d;
}

/* ---- store ---- */

static const char *obj_name(json_t *o)
{
    const char *n =
        json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
    return n ? n : "";
}

static size_t obj_find(const struct fake_transport *f, const char *name)
{
    for (size_t i = 0; i < f->nobjs; i++)
        if (strcmp(obj_name(f->objs[i]), name) == 0)
            return i;
    return (size_t)-1;
}

static uint64_t obj_rv(json_t *o)
{
    const char *rv = json_string_value(
        json_object_get(json_object_get(o, "metadata"), "resourceVersion"));
    return rv ? strtoull(rv, NULL, 10) : 0;
}

static bool obj_matches(json_t *o, const struct xchg *x)
{
    json_t *labels = json_object_get(json_object_get(o, "metadata"), "labels");
    if (x->name && x->name[0] && strcmp(obj_name(o), x->name) != 0)
        return false;
    if (x->label_key) {
        const char *v = json_string_value(json_object_get(labels, x->label_key));
        if (!v || strcmp(v, x->label_val) != 0)
            return false;
    }
    return !x->label_absent || !json_object_get(labels, x->label_absent);
}

static char *event_line(const char *type, json_t *o)
{
    json_t *ev = json_pack("{s:s,s:O}", "type", type, "object", o);
    char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (!s)
        abort();
    size_t n = strlen(s);
    char *line = malloc(n + 2);
    if (!line)
        abort();
    memcpy(line, s, n);
    line[n] = '\n';
    line[n + 1] = '\0';
    free(s);
    return line;
}

static struct item *push_item(struct fake_transport *f, int64_t due, enum item_kind kind,
                              ld_http_id id)
{
    f->items = grow(f->items, &f->capitems, f->nitems, sizeof(*f->items));
    struct item *it = &f->items[f->nitems++];
    memset(it, 0, sizeof(*it));
    it->seq = f->next_seq++;
    it->due = due;
    it->kind = kind;
    it->id = id;
    it->retry_ms = -1;
    return it;
}

/* Sends an event to every live, matching, not stalled stream. */
static void notify(struct fake_transport *f, const char *type, json_t *o)
{
    for (size_t i = 0; i < f->nx; i++) {
        struct xchg *x = f->x[i];
        if (!x->stream || !x->live || x->stalled || !obj_matches(o, x))
            continue;
        int64_t due = f->now_ms + f->watch_latency_ms + x->c->watch_lag_ms;
        if (due < x->last_due_ms)
            due = x->last_due_ms;
        x->last_due_ms = due;
        struct item *it = push_item(f, due, IT_DATA, x->id);
        it->data = event_line(type, o);
    }
}

/* Stores o (takes the reference) under the next resourceVersion. */
static void store(struct fake_transport *f, json_t *o, bool deleted)
{
    char rv[32];
    const char *type;
    size_t i = obj_find(f, obj_name(o));

    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)++f->rv);
    json_object_set_new(json_object_get(o, "metadata"), "resourceVersion",
                        json_string(rv));
    if (deleted) {
        type = "DELETED";
        json_decref(f->objs[i]);
        f->objs[i] = f->objs[--f->nobjs];
    } else if (i == (size_t)-1) {
        type = "ADDED";
        f->objs = grow_ptrs(f->objs, &f->capobjs, f->nobjs);
        f->objs[f->nobjs++] = json_incref(o);
    } else {
        type = "MODIFIED";
        json_decref(f->objs[i]);
        f->objs[i] = json_incref(o);
    }
    f->hist = grow(f->hist, &f->caphist, f->nhist, sizeof(*f->hist));
    f->hist[f->nhist++] = (struct hist){.rv = f->rv, .type = type, .obj = json_incref(o)};
    notify(f, type, o);
    json_decref(o);
}

static void set_uid(struct fake_transport *f, json_t *o, const char *name)
{
    char uid[96];
    snprintf(uid, sizeof(uid), "uid-%s-%llu", name, (unsigned long long)++f->uid_seq);
    json_object_set_new(json_object_get(o, "metadata"), "uid", json_string(uid));
    json_object_set_new(json_object_get(o, "metadata"), "namespace", json_string(f->ns));
}

/* ---- answers ---- */

static const char *reason_of(long status)
{
    switch (status) {
    case 400:
        return "BadRequest";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "NotFound";
    case 405:
        return "MethodNotAllowed";
    case 409:
        return "Conflict";
    case 410:
        return "Expired";
    case 422:
        return "Invalid";
    case 429:
        return "TooManyRequests";
    case 503:
        return "ServiceUnavailable";
    default:
        return status >= 500 ? "InternalError" : "";
    }
}

static char *status_body(long status, const char *reason, const char *msg)
{
    json_t *s =
        json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                  "metadata", "status", "Failure", "message", msg, "reason",
                  reason ? reason : reason_of(status), "code", (int)status);
    char *text = s ? json_dumps(s, JSON_COMPACT) : NULL;
    json_decref(s);
    if (!text)
        abort();
    return text;
}

static char *dump(json_t *o)
{
    char *text = json_dumps(o, JSON_COMPACT);
    if (!text)
        abort();
    return text;
}

/* A POST or PUT with kube-apiserver's checks. Returns the status and sets
 * *body (owned): the stored object, or a Status. */
static long serve_write(struct fake_transport *f, struct xchg *x, char **body)
{
    struct ld_lease check;
    struct ld_errinfo err;
    bool create = strcmp(x->kind, "POST") == 0;
    json_t *o = json_loads(x->body, 0, NULL);
    const char *reason = NULL, *msg = NULL;
    long status;

    ld_lease_init(&check);
    if (!o || ld_lease_from_json(o, &check, &err) != LD_OK) {
        status = 400;
        msg = "the body is not a Lease";
        goto out;
    }
    const char *name = obj_name(o);
    size_t i = obj_find(f, name);
    if (!create && strcmp(name, x->name) != 0) {
        status = 400;
        msg = "the name of the object does not match the path";
    } else if (create && i != (size_t)-1) {
        status = 409;
        reason = "AlreadyExists";
        msg = "leases already exists";
    } else if (!create && i == (size_t)-1) {
        status = 404;
        msg = "leases not found";
    } else if (!create && obj_rv(o) == 0) {
        status = 422;
        msg = "metadata.resourceVersion: must be specified";
    } else if (!create && obj_rv(o) != obj_rv(f->objs[i])) {
        status = 409;
        msg = "the object has been modified; please apply your changes to the latest "
              "version and try again";
    } else {
        if (create) {
            set_uid(f, o, name);
        } else {
            json_t *meta = json_object_get(o, "metadata");
            json_object_set(
                meta, "uid",
                json_object_get(json_object_get(f->objs[i], "metadata"), "uid"));
            json_object_set_new(meta, "namespace", json_string(f->ns));
        }
        store(f, json_incref(o), false);
        *body = dump(o);
        status = create ? 201 : 200;
    }
out:
    if (!*body)
        *body = status_body(status, reason, msg);
    ld_lease_clear(&check);
    json_decref(o);
    return status;
}

/* A DELETE with DeleteOptions' preconditions (uid, resourceVersion), as
 * kube-apiserver checks them: 404 when absent, 409 Conflict when either
 * differs; else the object goes (a DELETED event) and is the answer. */
static long serve_delete(struct fake_transport *f, struct xchg *x, size_t i, char **body)
{
    if (i == (size_t)-1) {
        *body = status_body(404, NULL, "leases not found");
        return 404;
    }
    json_t *opts = x->body && x->body[0] ? json_loads(x->body, 0, NULL) : NULL;
    json_t *pre = json_object_get(opts, "preconditions");
    const char *uid = json_string_value(json_object_get(pre, "uid"));
    const char *rv = json_string_value(json_object_get(pre, "resourceVersion"));
    const char *have_uid = json_string_value(
        json_object_get(json_object_get(f->objs[i], "metadata"), "uid"));
    bool ok = (!uid || (have_uid && strcmp(uid, have_uid) == 0)) &&
              (!rv || strtoull(rv, NULL, 10) == obj_rv(f->objs[i]));
    json_decref(opts);
    if (!ok) {
        *body = status_body(409, "Conflict", "Precondition failed");
        return 409;
    }
    *body = dump(f->objs[i]);
    store(f, json_deep_copy(f->objs[i]), true);
    return 200;
}

/* Serves a round trip against the store. Returns the status and sets
 * *body (owned). */
static long serve(struct fake_transport *f, struct xchg *x, char **body)
{
    size_t i = x->name[0] ? obj_find(f, x->name) : (size_t)-1;

    if (strcmp(x->kind, "GET") == 0) {
        if (i == (size_t)-1) {
            *body = status_body(404, NULL, "leases not found");
            return 404;
        }
        *body = dump(f->objs[i]);
        return 200;
    }
    if (strcmp(x->kind, "LIST") == 0) {
        char rv[32];
        json_t *items = json_array();
        for (size_t j = 0; j < f->nobjs; j++)
            if (obj_matches(f->objs[j], x))
                json_array_append(items, f->objs[j]);
        snprintf(rv, sizeof(rv), "%llu", (unsigned long long)f->rv);
        json_t *list = json_pack("{s:s,s:s,s:{s:s},s:o}", "kind", "LeaseList",
                                 "apiVersion", "coordination.k8s.io/v1", "metadata",
                                 "resourceVersion", rv, "items", items);
        *body = dump(list);
        json_decref(list);
        return 200;
    }
    if (strcmp(x->kind, "DELETE") == 0)
        return serve_delete(f, x, i, body);
    if (strcmp(x->kind, "POST") != 0 && strcmp(x->kind, "PUT") != 0) {
        *body = status_body(405, NULL, "method not allowed");
        return 405;
    }
    return serve_write(f, x, body);
}

/* ---- exchanges ---- */

static struct xchg *find_x(const struct fake_transport *f, ld_http_id id, size_t *at)
{
    for (size_t i = 0; i < f->nx; i++) {
        if (f->x[i]->id == id) {
            if (at)
                *at = i;
            return f->x[i];
        }
    }
    return NULL;
}

static void drop_items(struct fake_transport *f, ld_http_id id, bool keep_serve)
{
    size_t out = 0;
    for (size_t i = 0; i < f->nitems; i++) {
        struct item *it = &f->items[i];
        if (it->id == id && !it->ghost && !(keep_serve && it->kind == IT_SERVE)) {
            free(it->data);
            continue;
        }
        f->items[out++] = *it;
    }
    f->nitems = out;
}

static void free_x(struct xchg *x)
{
    free(x->name);
    free(x->label_key);
    free(x->label_val);
    free(x->label_absent);
    free(x->rv);
    free(x->body);
    free(x);
}

/* Ends exchange x: logs the end and takes it out of the live set, so a
 * cancel from its own callback finds nothing. The caller frees x. */
static void finish_x(struct fake_transport *f, struct xchg *x, enum ld_err rc,
                     long status, bool canceled)
{
    size_t at = 0;
    struct rec *r = f->recs[x->rec];
    r->pub.end_ms = f->now_ms;
    r->pub.status = status;
    r->pub.rc = rc;
    r->pub.canceled = canceled;
    find_x(f, x->id, &at);
    f->x[at] = f->x[--f->nx];
}

static void deliver_done(struct fake_transport *f, struct xchg *x, enum ld_err rc,
                         long status, const char *body, int64_t retry_ms)
{
    struct ld_http_result r;
    memset(&r, 0, sizeof(r));
    r.rc = rc;
    r.status = status;
    r.body = body ? body : "";
    r.body_len = strlen(r.body);
    r.retry_after_ms = retry_ms;
    r.seconds = (double)(f->now_ms - x->start_ms) / 1000.0;
    ld_errinfo_clear(&r.err);
    if (rc != LD_OK)
        ld_errinfo_set(&r.err, rc, "fake transport: %s", ld_strerror(rc));
    finish_x(f, x, rc, status, false);
    /* A timed-out write may still land later: its IT_SERVE keeps x. */
    drop_items(f, x->id, rc == LD_ETIMEOUT);
    bool kept = false;
    for (size_t i = 0; rc == LD_ETIMEOUT && i < f->nitems; i++) {
        if (f->items[i].id == x->id && f->items[i].kind == IT_SERVE) {
            f->items[i].ghost = x;
            kept = true;
        }
    }
    f->callbacks++;
    x->done(x->ctx, x->id, &r);
    if (!kept)
        free_x(x);
}

static void stream_open(struct fake_transport *f, struct xchg *x)
{
    char *all = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&all, &len);
    bool expired = false;

    if (!m)
        abort();
    if (x->rv && x->rv[0]) {
        uint64_t from = strtoull(x->rv, NULL, 10);
        if (from < f->history_floor) {
            char *body = status_body(410, "Expired", "too old resource version");
            json_t *st = json_loads(body, 0, NULL);
            char *line = event_line("ERROR", st);
            fputs(line, m);
            free(line);
            json_decref(st);
            free(body);
            expired = true;
        } else {
            for (size_t i = 0; i < f->nhist; i++) {
                struct hist *h = &f->hist[i];
                if (h->rv <= from || !obj_matches(h->obj, x))
                    continue;
                char *line = event_line(h->type, h->obj);
                fputs(line, m);
                free(line);
            }
        }
    } else {
        for (size_t i = 0; i < f->nobjs; i++) {
            if (!obj_matches(f->objs[i], x))
                continue;
            char *line = event_line("ADDED", f->objs[i]);
            fputs(line, m);
            free(line);
        }
    }
    fclose(m);
    x->live = !expired;
    if (expired) {
        struct item *it = push_item(f, f->now_ms, IT_DONE, x->id);
        it->status = 200;
    }
    if (len > 0 && !x->stalled) {
        f->callbacks++;
        x->data(x->ctx, x->id, all, len);
    }
    free(all);
}

/* The answer (status, body: taken) of an FAKE_TRANSPORT_LATE_ANSWER exchange served
 * now: it reaches the client at it->answer_ms, or times out first. */
static void answer_later(struct fake_transport *f, const struct item *it, long status,
                         char *body)
{
    bool late = it->answer_ms > it->limit_ms;
    struct item *done =
        push_item(f, late ? it->limit_ms : it->answer_ms, IT_DONE, it->id);
    if (late) {
        done->rc = LD_ETIMEOUT;
        free(body);
        return;
    }
    done->status = status;
    done->data = body;
}

/* Runs one due item. The item was removed from the queue already. */
static void process(struct fake_transport *f, struct item *it)
{
    struct xchg *x = find_x(f, it->id, NULL);

    switch (it->kind) {
    case IT_SERVE: {
        char *body = NULL;
        if (it->ghost) {
            /* The client timed out: the write still lands, unanswered. */
            serve(f, it->ghost, &body);
            free(body);
            free_x(it->ghost);
            it->ghost = NULL;
            return;
        }
        if (!x)
            return;
        long status = serve(f, x, &body);
        if (it->applied_status) {
            /* Applied, but the client hears of a failure (a conflict or a
             * 5xx from a proxy or an etcd timeout after the commit). */
            free(body);
            body = status_body(it->applied_status, NULL, "fake transport: applied");
            status = it->applied_status;
        }
        if (it->answer_ms) {
            answer_later(f, it, status, body);
            return;
        }
        deliver_done(f, x, LD_OK, status, body, -1);
        free(body);
        return;
    }
    case IT_DONE:
        if (x)
            deliver_done(f, x, it->rc, it->status, it->data, it->retry_ms);
        return;
    case IT_OPEN:
        if (x)
            stream_open(f, x);
        return;
    case IT_DATA:
        if (x && !x->stalled) {
            f->callbacks++;
            x->data(x->ctx, x->id, it->data, strlen(it->data));
        }
        return;
    }
}

/* ---- requests ---- */

static void pct_decode(char *s)
{
    char *out = s;
    for (char *p = s; *p; p++) {
        if (*p == '%' && p[1] && p[2]) {
            char hex[3] = {p[1], p[2], 0};
            *out++ = (char)strtol(hex, NULL, 16);
            p += 2;
        } else {
            *out++ = *p;
        }
    }
    *out = '\0';
}

/* Parses the path into x (kind, name, selectors). Returns the HTTP status
 * to answer at once when it is not served (0 when it is). */
static long parse(struct fake_transport *f, struct xchg *x, const char *verb,
                  const char *path)
{
    char *copy = dup_or_die(path);
    char *query = strchr(copy, '?');
    long bad = 0;
    bool watch = false;

    x->name = dup_or_die("");
    snprintf(x->kind, sizeof(x->kind), "%s", verb);
    if (query)
        *query++ = '\0';
    size_t plen = strlen(API_PREFIX), nslen = strlen(f->ns);
    if (strncmp(copy, API_PREFIX, plen) != 0 || strncmp(copy + plen, f->ns, nslen) != 0 ||
        strncmp(copy + plen + nslen, "/leases", 7) != 0) {
        bad = 404;
        goto out;
    }
    const char *rest = copy + plen + nslen + 7;
    if (*rest == '/') {
        free(x->name);
        x->name = dup_or_die(rest + 1);
    } else if (*rest) {
        bad = 404;
        goto out;
    }
    for (char *save = NULL, *kv = query ? strtok_r(query, "&", &save) : NULL; kv;
         kv = strtok_r(NULL, "&", &save)) {
        char *val = strchr(kv, '=');
        if (!val)
            continue;
        *val++ = '\0';
        pct_decode(val);
        if (strcmp(kv, "watch") == 0) {
            watch = strcmp(val, "1") == 0 || strcmp(val, "true") == 0;
        } else if (strcmp(kv, "resourceVersion") == 0) {
            free(x->rv);
            x->rv = dup_or_die(val);
        } else if (strcmp(kv, "timeoutSeconds") == 0) {
            x->timeout_s = (int)strtol(val, NULL, 10);
        } else if (strcmp(kv, "fieldSelector") == 0) {
            const char *n = strncmp(val, "metadata.name==", 15) == 0  ? val + 15
                            : strncmp(val, "metadata.name=", 14) == 0 ? val + 14
                                                                      : NULL;
            if (!n) {
                bad = 400;
                goto out;
            }
            free(x->name);
            x->name = dup_or_die(n);
        } else if (strcmp(kv, "labelSelector") == 0 && val[0]) {
            char *absent = strchr(val, ',');
            if (absent) {
                *absent++ = '\0';
                if (absent[0] != '!' || !absent[1] || strpbrk(absent + 1, ",!=() ")) {
                    bad = 400;
                    goto out;
                }
                x->label_absent = dup_or_die(absent + 1);
            }
            char *eq = strchr(val, '=');
            if (!eq || eq == val || strpbrk(val, ",!() ")) {
                bad = 400;
                goto out;
            }
            *eq = '\0';
            x->label_key = dup_or_die(val);
            x->label_val = dup_or_die(eq[1] == '=' ? eq + 2 : eq + 1);
        }
    }
    if (strcmp(verb, "GET") == 0 && !rest[0])
        snprintf(x->kind, sizeof(x->kind), "%s", watch ? "WATCH" : "LIST");
out:
    free(copy);
    return bad;
}

static const struct fake_transport_fault *take_fault(struct fake_transport *f,
                                                     const struct xchg *x)
{
    for (size_t i = 0; i < f->nfaults; i++) {
        struct fault *fl = &f->faults[i];
        if (fl->f.count == 0 || (fl->f.until_ms > 0 && f->now_ms >= fl->f.until_ms) ||
            (fl->client >= 0 && fl->client != x->c->index))
            continue;
        if (fl->verb && strcmp(fl->verb, x->kind) != 0)
            continue;
        if (fl->name && x->name[0] && strcmp(fl->name, x->name) != 0)
            continue;
        if (fl->name && !x->name[0] && strcmp(x->kind, "LIST") != 0 &&
            strcmp(x->kind, "WATCH") != 0)
            continue;
        if (fl->f.count > 0)
            fl->f.count--;
        return &fl->f;
    }
    return NULL;
}

static void log_request(struct fake_transport *f, struct xchg *x, const char *path)
{
    f->recs = grow_ptrs(f->recs, &f->caprecs, f->nrecs);
    struct rec *r = calloc(1, sizeof(*r));
    if (!r)
        abort();
    f->recs[f->nrecs] = r;
    r->path = dup_or_die(path);
    r->body = dup_or_die(x->body);
    r->name = dup_or_die(x->name);
    r->pub.at_ms = f->now_ms;
    r->pub.client = x->c->index;
    snprintf(r->pub.verb, sizeof(r->pub.verb), "%s", x->kind);
    r->pub.end_ms = -1;
    r->pub.path = r->path;
    r->pub.body = r->body;
    r->pub.name = r->name;
    x->rec = f->nrecs++;
}

static void count_in_flight(struct fake_transport *f, const struct xchg *x)
{
    size_t same = 0;
    if (f->nx > f->max_in_flight)
        f->max_in_flight = f->nx;
    if (x->stream || !x->name[0])
        return;
    for (size_t i = 0; i < f->nx; i++)
        if (!f->x[i]->stream && strcmp(f->x[i]->name, x->name) == 0)
            same++;
    if (same > f->max_per_name)
        f->max_per_name = same;
}

static enum ld_err start(struct ld_transport *t, const struct ld_http_request *req,
                         ld_http_data_fn data, ld_http_done_fn done, void *ctx,
                         ld_http_id *id, struct ld_errinfo *err)
{
    struct fake_transport_client *c = (struct fake_transport_client *)t;
    struct fake_transport *f = c->f;

    if (!req || !req->verb || !req->path || req->path[0] != '/' || !done)
        return ld_errinfo_set(err, LD_EINVAL, "fake transport: bad request");
    struct xchg *x = calloc(1, sizeof(*x));
    if (!x)
        abort();
    x->c = c;
    x->id = ++f->next_id;
    x->stream = data != NULL;
    x->data = data;
    x->done = done;
    x->ctx = ctx;
    x->start_ms = f->now_ms;
    x->body = malloc(req->body_len + 1);
    if (!x->body)
        abort();
    if (req->body_len)
        memcpy(x->body, req->body, req->body_len);
    x->body[req->body_len] = '\0';
    long bad = parse(f, x, req->verb, req->path);
    if (!bad && strcmp(x->kind, "POST") == 0 && !x->name[0]) {
        /* A create names its Lease in the body: log and match it by that. */
        json_t *o = json_loads(x->body, 0, NULL);
        free(x->name);
        x->name = dup_or_die(o ? obj_name(o) : "");
        json_decref(o);
    }
    log_request(f, x, req->path);
    f->x = grow_ptrs(f->x, &f->capx, f->nx);
    f->x[f->nx++] = x;
    count_in_flight(f, x);
    *id = x->id;

    int64_t timeout = req->timeout_ms > 0 ? req->timeout_ms : DEFAULT_TIMEOUT_MS;
    int64_t limit = f->now_ms + timeout;
    int64_t at = f->now_ms + f->latency_ms;
    const struct fake_transport_fault *fl = bad ? NULL : take_fault(f, x);
    struct item *it;

    if (fl && fl->kind != FAKE_TRANSPORT_HANG && fl->kind != FAKE_TRANSPORT_STALL &&
        fl->kind != FAKE_TRANSPORT_LATE_ANSWER)
        at += fl->delay_ms > 0 && fl->kind != FAKE_TRANSPORT_END ? fl->delay_ms : 0;
    if (fl && fl->kind == FAKE_TRANSPORT_HANG)
        at = limit + 1;
    if (at > limit) {
        it = push_item(f, limit, IT_DONE, x->id);
        it->rc = LD_ETIMEOUT;
        /* A write served after the client gave up still lands. */
        if ((!fl || fl->kind == FAKE_TRANSPORT_DELAY ||
             fl->kind == FAKE_TRANSPORT_LATE_ANSWER) &&
            !x->stream && strcmp(x->kind, "WATCH") != 0)
            push_item(f, at, IT_SERVE, x->id);
        return LD_OK;
    }
    if (bad ||
        (fl && (fl->kind == FAKE_TRANSPORT_STATUS || fl->kind == FAKE_TRANSPORT_FAIL))) {
        it = push_item(f, at, IT_DONE, x->id);
        if (fl && fl->kind == FAKE_TRANSPORT_FAIL) {
            it->rc = fl->rc;
        } else {
            it->status = bad ? bad : fl->status;
            it->data = status_body(it->status, NULL, "fake transport: scripted answer");
            if (fl && fl->retry_after_s > 0)
                it->retry_ms = (int64_t)fl->retry_after_s * 1000;
        }
        return LD_OK;
    }
    if (!x->stream) {
        if (strcmp(x->kind, "WATCH") == 0) {
            /* A watch as a round trip would never end: refuse it. */
            it = push_item(f, at, IT_DONE, x->id);
            it->status = 400;
            it->data = status_body(400, NULL, "watch needs a stream");
            return LD_OK;
        }
        it = push_item(f, at, IT_SERVE, x->id);
        if (fl && fl->kind == FAKE_TRANSPORT_APPLIED_STATUS)
            it->applied_status = fl->status;
        if (fl && fl->kind == FAKE_TRANSPORT_LATE_ANSWER) {
            it->answer_ms = at + (fl->delay_ms > 0 ? fl->delay_ms : 0);
            it->limit_ms = limit;
        }
        return LD_OK;
    }
    x->stalled = fl && fl->kind == FAKE_TRANSPORT_STALL;
    push_item(f, at, IT_OPEN, x->id);
    int64_t wt =
        (int64_t)(x->timeout_s > 0 ? x->timeout_s : DEFAULT_WATCH_TIMEOUT_S) * 1000;
    if (fl && fl->kind == FAKE_TRANSPORT_END && at + fl->delay_ms < limit &&
        fl->delay_ms < wt) {
        it = push_item(f, at + fl->delay_ms, IT_DONE, x->id);
        it->status = 200;
    } else if (f->now_ms + wt < limit) {
        it = push_item(f, f->now_ms + wt, IT_DONE, x->id);
        it->status = 200;
    } else {
        it = push_item(f, limit, IT_DONE, x->id);
        it->rc = LD_ETIMEOUT;
    }
    return LD_OK;
}

static enum ld_err fake_transport_submit(struct ld_transport *t,
                                         const struct ld_http_request *req,
                                         ld_http_done_fn done, void *ctx, ld_http_id *id,
                                         struct ld_errinfo *err)
{
    return start(t, req, NULL, done, ctx, id, err);
}

static enum ld_err fake_transport_open_stream(struct ld_transport *t,
                                              const struct ld_http_request *req,
                                              ld_http_data_fn data, ld_http_done_fn done,
                                              void *ctx, ld_http_id *id,
                                              struct ld_errinfo *err)
{
    if (!data)
        return ld_errinfo_set(err, LD_EINVAL, "fake transport: a stream needs data");
    return start(t, req, data, done, ctx, id, err);
}

static void fake_transport_cancel(struct ld_transport *t, ld_http_id id)
{
    struct fake_transport_client *c = (struct fake_transport_client *)t;
    struct fake_transport *f = c->f;
    struct xchg *x = find_x(f, id, NULL);
    if (!x || x->c != c)
        return;
    finish_x(f, x, LD_ECANCELED, 0, true);
    drop_items(f, id, false);
    free_x(x);
}

static bool item_before(const struct item *a, const struct item *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

/* Whether run on client c takes it: items of c's exchanges, and on any
 * client's run what the server does at its time without a callback (late
 * writes, the serving of FAKE_TRANSPORT_LATE_ANSWER exchanges). */
static bool item_for(const struct fake_transport *f, const struct item *it,
                     const struct fake_transport_client *c)
{
    if (it->ghost || it->answer_ms)
        return true;
    const struct xchg *x = find_x(f, it->id, NULL);
    return x && x->c == c;
}

static enum ld_err fake_transport_run_impl(struct ld_transport *t, int64_t wait_ms,
                                           int wake_fd)
{
    struct fake_transport_client *c = (struct fake_transport_client *)t;
    struct fake_transport *f = c->f;

    if (wake_fd >= 0) {
        struct pollfd p = {.fd = wake_fd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0)
            return LD_ECANCELED;
    }
    if (wait_ms < 0)
        wait_ms = 0;
    /* In fake time a caller that keeps asking for zero-length waits with
     * nothing due would spin for ever; on a real clock it burns a core
     * while time passes. Let a millisecond pass, and count it. */
    if (++c->idle_runs > FAKE_TRANSPORT_SPIN_RUNS) {
        c->idle_runs = 0;
        f->now_ms++;
        f->spin_ms++;
    }
    size_t first = (size_t)-1;
    for (size_t i = 0; i < f->nitems; i++)
        if (item_for(f, &f->items[i], c) &&
            (first == (size_t)-1 || item_before(&f->items[i], &f->items[first])))
            first = i;
    if (first == (size_t)-1 || f->items[first].due > f->now_ms + wait_ms) {
        f->now_ms += wait_ms;
        if (wait_ms > 0)
            c->idle_runs = 0;
        return LD_OK;
    }
    c->idle_runs = 0;
    if (f->items[first].due > f->now_ms)
        f->now_ms = f->items[first].due;
    /* Only what was scheduled before this run: an item a callback adds for
     * now waits for the next run, so one run is bounded. */
    uint64_t limit = f->next_seq;
    for (;;) {
        size_t pick = (size_t)-1;
        for (size_t i = 0; i < f->nitems; i++) {
            struct item *it = &f->items[i];
            if (it->due <= f->now_ms && it->seq < limit && item_for(f, it, c) &&
                (pick == (size_t)-1 || item_before(it, &f->items[pick])))
                pick = i;
        }
        if (pick == (size_t)-1)
            break;
        struct item it = f->items[pick];
        f->items[pick] = f->items[--f->nitems];
        process(f, &it);
        free(it.data);
    }
    return LD_OK;
}

static size_t fake_transport_pending(const struct ld_transport *t)
{
    const struct fake_transport_client *c = (const struct fake_transport_client *)t;
    size_t n = 0;
    for (size_t i = 0; i < c->f->nx; i++)
        n += c->f->x[i]->c == c;
    return n;
}

static void free_all(struct fake_transport *f)
{
    for (size_t i = 0; i < f->nclients; i++)
        free(f->clients[i]);
    for (size_t i = 0; i < f->nx; i++)
        free_x(f->x[i]);
    for (size_t i = 0; i < f->nitems; i++) {
        free(f->items[i].data);
        if (f->items[i].ghost)
            free_x(f->items[i].ghost);
    }
    for (size_t i = 0; i < f->nobjs; i++)
        json_decref(f->objs[i]);
    for (size_t i = 0; i < f->nhist; i++)
        json_decref(f->hist[i].obj);
    for (size_t i = 0; i < f->nrecs; i++) {
        free(f->recs[i]->path);
        free(f->recs[i]->body);
        free(f->recs[i]->name);
        free(f->recs[i]);
    }
    for (size_t i = 0; i < f->nfaults; i++) {
        free(f->faults[i].name);
        free(f->faults[i].verb);
    }
    free(f->x);
    free(f->items);
    free(f->objs);
    free(f->hist);
    free(f->recs);
    free(f->faults);
    free(f->ns);
    free(f);
}

/* A client's exchanges end with it (no callbacks); the API goes with the
 * last client. */
static void fake_transport_free(struct ld_transport *t)
{
    struct fake_transport_client *c = (struct fake_transport_client *)t;
    struct fake_transport *f = c->f;
    for (size_t i = f->nx; i-- > 0;) {
        struct xchg *x = f->x[i];
        if (x->c != c)
            continue;
        finish_x(f, x, LD_ECANCELED, 0, true);
        /* A killed process's request already on the wire may still land
         * (fake_transport_set_writes_outlive_clients): it is served, unanswered. */
        bool land = f->writes_outlive && !x->stream;
        drop_items(f, x->id, land);
        bool kept = false;
        for (size_t j = 0; land && j < f->nitems; j++) {
            if (f->items[j].id == x->id && f->items[j].kind == IT_SERVE &&
                !f->items[j].ghost) {
                f->items[j].ghost = x;
                kept = true;
            }
        }
        if (!kept)
            free_x(x);
    }
    c->freed = true;
    if (--f->live_clients == 0)
        free_all(f);
}

static const struct ld_transport_ops fake_transport_ops = {
    .submit = fake_transport_submit,
    .open_stream = fake_transport_open_stream,
    .cancel = fake_transport_cancel,
    .run = fake_transport_run_impl,
    .pending = fake_transport_pending,
    .free = fake_transport_free,
};

/* ---- public ---- */

struct ld_transport *fake_transport_add_client(struct fake_transport *f)
{
    if (f->nclients == FAKE_TRANSPORT_MAX_CLIENTS)
        return NULL;
    struct fake_transport_client *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->base.ops = &fake_transport_ops;
    c->f = f;
    c->index = (int)f->nclients;
    f->clients[f->nclients++] = c;
    f->live_clients++;
    return &c->base;
}

struct fake_transport *fake_transport_new(const char *ns, int64_t start_ms,
                                          int64_t start_wall_us)
{
    struct fake_transport *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    if (!fake_transport_add_client(f)) {
        free(f);
        return NULL;
    }
    f->ns = dup_or_die(ns);
    f->now_ms = f->start_ms = start_ms;
    f->start_wall_us = start_wall_us;
    f->latency_ms = 1;
    f->watch_latency_ms = 1;
    f->rv = 100;
    return f;
}

struct ld_transport *fake_transport_transport(struct fake_transport *f)
{
    return &f->clients[0]->base;
}

int64_t fake_transport_now_ms(const struct fake_transport *f)
{
    return f->now_ms;
}

int64_t fake_transport_wall_us(const struct fake_transport *f)
{
    return f->start_wall_us + (f->now_ms - f->start_ms) * 1000;
}

static int64_t clock_mono(void *ctx)
{
    return fake_transport_now_ms(ctx);
}

static int64_t clock_wall(void *ctx)
{
    return fake_transport_wall_us(ctx);
}

struct ld_clock fake_transport_host_clock(struct fake_transport *f)
{
    return (struct ld_clock){.mono_ms = clock_mono, .wall_us = clock_wall, .ctx = f};
}

void fake_transport_set_latency_ms(struct fake_transport *f, int64_t ms)
{
    f->latency_ms = ms < 0 ? 0 : ms;
}

void fake_transport_set_watch_latency_ms(struct fake_transport *f, int64_t ms)
{
    f->watch_latency_ms = ms < 0 ? 0 : ms;
}

void fake_transport_set_writes_outlive_clients(struct fake_transport *f, bool on)
{
    f->writes_outlive = on;
}

void fake_transport_set_client_watch_lag_ms(struct fake_transport *f, int client,
                                            int64_t ms)
{
    if (client >= 0 && (size_t)client < f->nclients && f->clients[client])
        f->clients[client]->watch_lag_ms = ms < 0 ? 0 : ms;
}

void fake_transport_fault_add(struct fake_transport *f, const char *name,
                              const char *verb, struct fake_transport_fault fault)
{
    fake_transport_fault_add_for(f, -1, name, verb, fault);
}

void fake_transport_fault_add_for(struct fake_transport *f, int client, const char *name,
                                  const char *verb, struct fake_transport_fault fault)
{
    f->faults = grow(f->faults, &f->capfaults, f->nfaults, sizeof(*f->faults));
    f->faults[f->nfaults++] = (struct fault){
        .client = client,
        .name = name ? dup_or_die(name) : NULL,
        .verb = verb ? dup_or_die(verb) : NULL,
        .f = fault,
    };
}

void fake_transport_fault_clear(struct fake_transport *f)
{
    for (size_t i = 0; i < f->nfaults; i++) {
        free(f->faults[i].name);
        free(f->faults[i].verb);
    }
    f->nfaults = 0;
}

uint64_t fake_transport_lease_put(struct fake_transport *f, const char *name,
                                  const char *labels, const char *holder,
                                  int32_t duration_s, int64_t renew_us)
{
    struct ld_lease l;
    struct ld_errinfo err;
    size_t i = obj_find(f, name);

    ld_lease_init(&l);
    if (i != (size_t)-1) {
        if (ld_lease_from_json(f->objs[i], &l, &err) != LD_OK)
            abort();
    } else {
        l.name = dup_or_die(name);
        l.namespace_ = dup_or_die(f->ns);
    }
    bool changed = !l.spec.holder || strcmp(l.spec.holder, holder) != 0;
    if (changed && holder[0]) {
        l.spec.has_acquire = true;
        l.spec.acquire_us = renew_us;
        if (i != (size_t)-1)
            l.spec.transitions++;
    }
    if (ld_lease_spec_set_holder(&l.spec, holder) != LD_OK)
        abort();
    l.spec.duration_s = duration_s;
    l.spec.has_renew = true;
    l.spec.renew_us = renew_us;
    char *text = ld_lease_encode(&l);
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    if (!o)
        abort();
    free(text);
    if (i == (size_t)-1)
        set_uid(f, o, name);
    if (labels) {
        json_t *lab = json_object();
        char *copy = dup_or_die(labels);
        char *eq = strchr(copy, '=');
        if (eq) {
            *eq = '\0';
            json_object_set_new(lab, copy, json_string(eq + 1));
        }
        free(copy);
        json_object_set_new(json_object_get(o, "metadata"), "labels", lab);
    }
    ld_lease_clear(&l);
    store(f, o, false);
    return f->rv;
}

bool fake_transport_lease_delete(struct fake_transport *f, const char *name)
{
    size_t i = obj_find(f, name);
    if (i == (size_t)-1)
        return false;
    store(f, json_deep_copy(f->objs[i]), true);
    return true;
}

enum ld_err fake_transport_lease_get(struct fake_transport *f, const char *name,
                                     struct ld_lease *out)
{
    struct ld_errinfo err;
    size_t i = obj_find(f, name);
    ld_lease_init(out);
    if (i == (size_t)-1)
        return LD_ENOTFOUND;
    return ld_lease_from_json(f->objs[i], out, &err);
}

void fake_transport_compact(struct fake_transport *f)
{
    for (size_t i = 0; i < f->nhist; i++)
        json_decref(f->hist[i].obj);
    f->nhist = 0;
    f->history_floor = f->rv + 1;
}

uint64_t fake_transport_resource_version(const struct fake_transport *f)
{
    return f->rv;
}

void fake_transport_watch_end_all(struct fake_transport *f)
{
    for (size_t i = 0; i < f->nx; i++) {
        if (!f->x[i]->stream)
            continue;
        drop_items(f, f->x[i]->id, false);
        struct item *it = push_item(f, f->now_ms, IT_DONE, f->x[i]->id);
        it->status = 200;
    }
}

void fake_transport_watch_gone_all(struct fake_transport *f)
{
    char *body = status_body(410, "Expired", "too old resource version");
    json_t *st = json_loads(body, 0, NULL);
    for (size_t i = 0; i < f->nx; i++) {
        struct xchg *x = f->x[i];
        if (!x->stream || !x->live)
            continue;
        drop_items(f, x->id, false);
        struct item *it = push_item(f, f->now_ms, IT_DATA, x->id);
        it->data = event_line("ERROR", st);
        x->stalled = false;
        it = push_item(f, f->now_ms, IT_DONE, x->id);
        it->status = 200;
    }
    json_decref(st);
    free(body);
}

void fake_transport_watch_stall_all(struct fake_transport *f)
{
    for (size_t i = 0; i < f->nx; i++)
        if (f->x[i]->stream)
            f->x[i]->stalled = true;
}

void fake_transport_watch_inject(struct fake_transport *f, const char *line)
{
    for (size_t i = 0; i < f->nx; i++) {
        struct xchg *x = f->x[i];
        if (!x->stream || !x->live || x->stalled)
            continue;
        struct item *it = push_item(f, f->now_ms + f->watch_latency_ms, IT_DATA, x->id);
        size_t n = strlen(line);
        it->data = malloc(n + 2);
        if (!it->data)
            abort();
        memcpy(it->data, line, n);
        it->data[n] = '\n';
        it->data[n + 1] = '\0';
    }
}

size_t fake_transport_watch_open_count(const struct fake_transport *f)
{
    size_t n = 0;
    for (size_t i = 0; i < f->nx; i++)
        n += f->x[i]->stream;
    return n;
}

size_t fake_transport_record_count(const struct fake_transport *f)
{
    return f->nrecs;
}

const struct fake_transport_record *fake_transport_record(const struct fake_transport *f,
                                                          size_t i)
{
    return i < f->nrecs ? &f->recs[i]->pub : NULL;
}

size_t fake_transport_count(const struct fake_transport *f, const char *verb,
                            const char *name, int64_t since_ms)
{
    size_t n = 0;
    for (size_t i = 0; i < f->nrecs; i++) {
        const struct fake_transport_record *r = &f->recs[i]->pub;
        if (r->at_ms >= since_ms && (!verb || strcmp(r->verb, verb) == 0) &&
            (!name || strcmp(r->name, name) == 0))
            n++;
    }
    return n;
}

size_t fake_transport_max_in_flight(const struct fake_transport *f)
{
    return f->max_in_flight;
}

size_t fake_transport_max_in_flight_per_name(const struct fake_transport *f)
{
    return f->max_per_name;
}

uint64_t fake_transport_spin_ms(const struct fake_transport *f)
{
    return f->spin_ms;
}

uint64_t fake_transport_callbacks(const struct fake_transport *f)
{
    return f->callbacks;
}
