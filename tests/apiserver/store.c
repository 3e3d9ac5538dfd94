/* SPDX-License-Identifier: Apache-2.0 */
#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "labelsel.h"
#include "leaseval.h"
#include "util.h"

#define MAX_ENTRIES 10000
#define HIST_CAP 4096
#define LOG_CAP 100000
#define STATE_FILE_CAP (64u << 20)
/* A watch batch (the initial ADDED events, or the changes since the last
 * batch) is held whole before it is sent. Past this the changes left wait
 * for the next batch, and an initial state that does not fit ends the
 * watch, as running out of memory does. */
#define WATCH_BATCH_MAX (64u << 20)

struct entry {
    const struct as_kind *kind;
    char *ns;
    char *name;
    uint64_t rv;
    json_t *obj; /* normalised object; NULL for a raw entry (Leases only) */
    char *raw;   /* verbatim text of a raw entry */
};

struct event {
    const struct as_kind *kind;
    uint64_t rv;
    int64_t at_ms; /* when it was stored (as_mono_ms) */
    char *ns;
    char *name;
    char *line; /* {"type":...,"object":...}\n */
    /* What a label-selecting watcher needs to tell whether the change moved
     * the object into or out of its selection. */
    bool deleted;
    bool had_prev;       /* an object existed before the change */
    json_t *labels;      /* the object's labels after the change, or NULL */
    json_t *prev_labels; /* its labels before, or NULL */
    json_t *prev;        /* the object before a MODIFIED that changed labels */
};

struct as_store {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct entry *entries;
    size_t n, cap;
    uint64_t rv;
    struct event hist[HIST_CAP];
    size_t hist_start, hist_n;
    uint64_t floor;             /* watches can resume from any version >= floor */
    json_t *log[AS_KIND_COUNT]; /* one write log per kind, each with its own seq */
    uint64_t log_seq[AS_KIND_COUNT];
    char *state_file;
    bool closing;
};

static void entry_clear(struct entry *e)
{
    free(e->ns);
    free(e->name);
    json_decref(e->obj);
    free(e->raw);
    memset(e, 0, sizeof *e);
}

static void event_clear(struct event *ev)
{
    free(ev->ns);
    free(ev->name);
    free(ev->line);
    json_decref(ev->labels);
    json_decref(ev->prev_labels);
    json_decref(ev->prev);
    memset(ev, 0, sizeof *ev);
}

/* A private copy of obj's metadata.labels, or NULL when it has none. */
static json_t *labels_copy(json_t *obj)
{
    json_t *l = json_object_get(json_object_get(obj, "metadata"), "labels");
    return json_is_object(l) ? json_deep_copy(l) : NULL;
}

static bool same_labels(json_t *a, json_t *b)
{
    return a && b ? json_equal(a, b) : a == b;
}

static bool passes(const struct as_filter *f, const struct entry *e, json_t *labels)
{
    const char *ns = e->ns, *name = e->name;
    if (f->kind != e->kind)
        return false;
    if ((f->ns && strcmp(f->ns, ns) != 0) || (f->name && strcmp(f->name, name) != 0))
        return false;
    return !f->labels || as_labelsel_match(f->labels, labels);
}

static struct entry *find(struct as_store *s, const struct as_kind *kind, const char *ns,
                          const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->entries[i].kind == kind && strcmp(s->entries[i].ns, ns) == 0 &&
            strcmp(s->entries[i].name, name) == 0)
            return &s->entries[i];
    return NULL;
}

static char *entry_text(const struct entry *e)
{
    if (e->raw)
        return strdup(e->raw);
    return json_dumps(e->obj, JSON_COMPACT);
}

/* The entry as a parsed object (new reference), or NULL when a raw entry
 * is not a JSON object. */
static json_t *entry_parsed(const struct entry *e)
{
    if (e->obj)
        return json_incref(e->obj);
    json_t *j = json_loads(e->raw, JSON_ALLOW_NUL, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static bool parse_rv(const char *text, uint64_t *out)
{
    long long v;
    if (!as_parse_ll(text, 1, INT64_MAX, &v))
        return false;
    *out = (uint64_t)v;
    return true;
}

static void set_rv(json_t *obj, uint64_t rv)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, rv);
    json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion",
                        json_string(buf));
}

static json_t *new_uid(void)
{
    char hex[33], uid[37];
    if (!as_random_hex(16, hex))
        return NULL;
    hex[12] = '4';
    hex[16] = "89ab"[hex[16] % 4];
    snprintf(uid, sizeof uid, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12,
             hex + 16, hex + 20);
    return json_string(uid);
}

/* Rebuilds metadata in kube's field order with server-owned fields set. */
static json_t *build_meta(json_t *src, const char *ns, json_t *uid, json_t *ctime)
{
    static const char *const before[] = {"name", "generateName"};
    static const char *const after[] = {"labels", "annotations", "ownerReferences",
                                        "finalizers"};
    json_t *m = json_object();
    if (!m)
        return NULL;
    for (size_t i = 0; i < sizeof before / sizeof *before; i++) {
        json_t *v = json_object_get(src, before[i]);
        if (v)
            json_object_set(m, before[i], v);
    }
    json_object_set_new(m, "namespace", json_string(ns));
    if (uid)
        json_object_set(m, "uid", uid);
    json_object_set_new(m, "resourceVersion", json_string(""));
    if (ctime)
        json_object_set(m, "creationTimestamp", ctime);
    for (size_t i = 0; i < sizeof after / sizeof *after; i++) {
        json_t *v = json_object_get(src, after[i]);
        if (v)
            json_object_set(m, after[i], v);
    }
    return m;
}

/* The object to store: src's user fields (src normalised by kind), the
 * server-owned metadata, and the kind's own fields (old: the stored object
 * on update, else NULL). */
static json_t *prepare(const struct as_kind *kind, json_t *src, const char *ns,
                       json_t *uid, json_t *ctime, json_t *old)
{
    json_t *obj = json_object();
    json_t *meta = build_meta(json_object_get(src, "metadata"), ns, uid, ctime);
    if (!obj || !meta) {
        json_decref(obj);
        json_decref(meta);
        return NULL;
    }
    json_object_set_new(obj, "kind", json_string(kind->kind));
    json_object_set_new(obj, "apiVersion", json_string(kind->api_version));
    json_object_set_new(obj, "metadata", meta);
    if (!kind->body(obj, src, old)) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

/* Records a change: text is the object after it (the deleted object for
 * DELETED), obj its parsed form or NULL, prev the object before it (NULL when
 * there was none, had_prev says whether one existed even if unreadable). */
static void push_event(struct as_store *s, const struct as_kind *kind, const char *type,
                       const char *ns, const char *name, const char *text, json_t *obj,
                       json_t *prev, bool had_prev)
{
    struct event ev = {0};
    ev.kind = kind;
    ev.rv = s->rv;
    ev.at_ms = as_mono_ms();
    ev.ns = strdup(ns);
    ev.name = strdup(name);
    ev.deleted = strcmp(type, "DELETED") == 0;
    ev.had_prev = had_prev;
    ev.labels = ev.deleted ? NULL : labels_copy(obj);
    ev.prev_labels = labels_copy(ev.deleted ? obj : prev);
    /* Only a change of labels can take an object out of a selection (and a
     * deleted object's last state is already the event's object), so the old
     * object of a mere renewal is not kept alive in the history. */
    if (!ev.deleted && prev && !same_labels(ev.labels, ev.prev_labels))
        ev.prev = json_incref(prev);
    size_t tl = strlen(text);
    /* A raw document may end in a newline; it must not split the frame. */
    while (tl > 0 && (text[tl - 1] == '\n' || text[tl - 1] == '\r'))
        tl--;
    if (asprintf(&ev.line, "{\"type\":\"%s\",\"object\":%.*s}\n", type, (int)tl, text) <
        0)
        ev.line = NULL;
    if (!ev.ns || !ev.name || !ev.line) {
        /* Losing an event silently would let a watcher miss a change. */
        event_clear(&ev);
        s->floor = s->rv;
        return;
    }
    if (s->hist_n == HIST_CAP) {
        struct event *old = &s->hist[s->hist_start];
        s->floor = old->rv;
        event_clear(old);
        s->hist_start = (s->hist_start + 1) % HIST_CAP;
        s->hist_n--;
    }
    s->hist[(s->hist_start + s->hist_n) % HIST_CAP] = ev;
    s->hist_n++;
}

static void log_write(struct as_store *s, const struct as_kind *kind, const char *client,
                      const char *verb, const char *ns, const char *name, json_t *obj,
                      uint64_t rv)
{
    char wall[32], rvs[24];
    json_t *log = s->log[kind->index];
    json_t *e = json_object();
    if (!e)
        return;
    snprintf(rvs, sizeof rvs, "%" PRIu64, rv);
    json_object_set_new(e, "seq", json_integer((json_int_t)++s->log_seq[kind->index]));
    json_object_set_new(e, "mono_ms", json_integer(as_mono_ms()));
    /* Taken under the store lock after the commit, so the writer (and any
     * reader) learns of the write only after this instant; one lock for all
     * kinds, so the clocks of a Lease and a ConfigMap write order them as
     * they were committed. */
    json_object_set_new(e, "clock_us", json_integer(as_clock_us()));
    json_object_set_new(e, "wall", json_string(as_rfc3339(as_wall_us(), true, wall)));
    json_object_set_new(e, "client", json_string(client));
    json_object_set_new(e, "verb", json_string(verb));
    json_object_set_new(e, "namespace", json_string(ns));
    json_object_set_new(e, "name", json_string(name));
    kind->log_fields(e, obj);
    json_object_set_new(e, "resourceVersion", json_string(rvs));
    if (json_array_size(log) >= LOG_CAP)
        json_array_remove(log, 0);
    json_array_append_new(log, e);
}

static void persist(struct as_store *s)
{
    if (!s->state_file)
        return;
    char rvs[24];
    json_t *root = json_object();
    json_t *arr = json_array();
    char *text = NULL;
    if (!root || !arr)
        goto fail;
    snprintf(rvs, sizeof rvs, "%" PRIu64, s->rv);
    json_object_set_new(root, "resourceVersion", json_string(rvs));
    for (size_t i = 0; i < s->n; i++) {
        struct entry *e = &s->entries[i];
        json_t *j = json_object();
        if (!j)
            goto fail;
        snprintf(rvs, sizeof rvs, "%" PRIu64, e->rv);
        /* Every kind goes in the one "leases" array, named before there were
         * others, so older state files still load; a non-Lease says its kind. */
        if (e->kind != &as_kind_lease)
            json_object_set_new(j, "kind", json_string(e->kind->kind));
        json_object_set_new(j, "namespace", json_string(e->ns));
        json_object_set_new(j, "name", json_string(e->name));
        json_object_set_new(j, "resourceVersion", json_string(rvs));
        if (e->raw)
            json_object_set_new(j, "raw", json_string(e->raw));
        else
            json_object_set(j, "object", e->obj);
        json_array_append_new(arr, j);
    }
    json_object_set(root, "leases", arr);
    text = json_dumps(root, JSON_INDENT(1));
    if (!text)
        goto fail;
    if (as_write_file_atomic(s->state_file, text, strlen(text), 0600) != 0) {
        fprintf(stderr, "leaderd-apiserver: writing %s: %s\n", s->state_file,
                strerror(errno));
    }
    goto out;
fail:
    fprintf(stderr, "leaderd-apiserver: cannot serialise state: out of memory\n");
out:
    free(text);
    json_decref(arr);
    json_decref(root);
}

/* Everything a committed write does besides changing the entry and
 * persisting the store. prev and had_prev: see push_event. */
static void committed(struct as_store *s, const char *type, const char *verb,
                      const struct entry *e, json_t *obj, json_t *prev, bool had_prev,
                      const char *client)
{
    char *text = e->raw ? strdup(e->raw) : json_dumps(obj, JSON_COMPACT);
    if (text)
        push_event(s, e->kind, type, e->ns, e->name, text, obj, prev, had_prev);
    else
        s->floor = s->rv;
    free(text);
    log_write(s, e->kind, client, verb, e->ns, e->name, obj, e->rv);
    pthread_cond_broadcast(&s->cond);
}

static struct entry *add_entry(struct as_store *s, const struct as_kind *kind,
                               const char *ns, const char *name)
{
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 16;
        struct entry *ne = realloc(s->entries, ncap * sizeof *ne);
        if (!ne)
            return NULL;
        s->entries = ne;
        s->cap = ncap;
    }
    struct entry *e = &s->entries[s->n];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->ns = strdup(ns);
    e->name = strdup(name);
    if (!e->ns || !e->name) {
        entry_clear(e);
        return NULL;
    }
    s->n++;
    return e;
}

static void remove_entry(struct as_store *s, struct entry *e)
{
    size_t i = (size_t)(e - s->entries);
    entry_clear(e);
    memmove(&s->entries[i], &s->entries[i + 1], (s->n - i - 1) * sizeof *e);
    s->n--;
}

static bool load_state(struct as_store *s, char *err, size_t errlen)
{
    size_t len;
    json_error_t jerr;
    char *text = as_read_file(s->state_file, STATE_FILE_CAP, &len);
    bool ok = false;
    json_t *root = NULL;
    if (!text) {
        if (errno == ENOENT)
            return true;
        snprintf(err, errlen, "%s: %s", s->state_file, strerror(errno));
        return false;
    }
    root = json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
    if (!root || !json_is_object(root)) {
        snprintf(err, errlen, "%s: not a JSON object (%s)", s->state_file,
                 root ? "wrong type" : jerr.text);
        goto out;
    }
    uint64_t rv = 0;
    const char *rvs = json_string_value(json_object_get(root, "resourceVersion"));
    json_t *leases = json_object_get(root, "leases");
    if ((rvs && !parse_rv(rvs, &rv)) || (leases && !json_is_array(leases))) {
        snprintf(err, errlen, "%s: bad resourceVersion or leases", s->state_file);
        goto out;
    }
    size_t i;
    json_t *l;
    json_array_foreach(leases, i, l)
    {
        const char *ns = json_string_value(json_object_get(l, "namespace"));
        const char *name = json_string_value(json_object_get(l, "name"));
        const char *ers = json_string_value(json_object_get(l, "resourceVersion"));
        const char *raw = json_string_value(json_object_get(l, "raw"));
        json_t *obj = json_object_get(l, "object");
        json_t *kname = json_object_get(l, "kind");
        /* Entries without a kind come from before ConfigMaps: Leases. */
        const struct as_kind *kind =
            kname ? as_kind_named(json_string_value(kname)) : &as_kind_lease;
        uint64_t erv;
        if (!kind || !ns || !name || !ers || !parse_rv(ers, &erv) ||
            (!raw && !json_is_object(obj)) || (raw && kind != &as_kind_lease) ||
            find(s, kind, ns, name) || s->n >= MAX_ENTRIES) {
            snprintf(err, errlen, "%s: bad lease entry %zu", s->state_file, i);
            goto out;
        }
        struct entry *e = add_entry(s, kind, ns, name);
        if (!e) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        e->rv = erv;
        if (raw)
            e->raw = strdup(raw);
        else
            e->obj = json_deep_copy(obj);
        if (!e->raw && !e->obj) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        if (erv > rv)
            rv = erv;
    }
    s->rv = rv;
    s->floor = rv;
    ok = true;
out:
    json_decref(root);
    free(text);
    return ok;
}

struct as_store *as_store_new(const char *state_file, char *err, size_t errlen)
{
    struct as_store *s = calloc(1, sizeof *s);
    pthread_condattr_t ca;
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    bool logs = true;
    for (int k = 0; k < AS_KIND_COUNT; k++)
        logs = (s->log[k] = json_array()) != NULL && logs;
    if (!logs || (state_file && !(s->state_file = strdup(state_file)))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (s->state_file && !load_state(s, err, errlen))
        goto fail;
    return s;
fail:
    as_store_free(s);
    return NULL;
}

void as_store_close(struct as_store *s)
{
    pthread_mutex_lock(&s->mu);
    s->closing = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

void as_store_free(struct as_store *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        entry_clear(&s->entries[i]);
    free(s->entries);
    for (size_t i = 0; i < s->hist_n; i++)
        event_clear(&s->hist[(s->hist_start + i) % HIST_CAP]);
    for (int k = 0; k < AS_KIND_COUNT; k++)
        json_decref(s->log[k]);
    free(s->state_file);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

uint64_t as_store_rv(struct as_store *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t rv = s->rv;
    pthread_mutex_unlock(&s->mu);
    return rv;
}

void as_store_get(struct as_store *s, const struct as_kind *kind, const char *ns,
                  const char *name, struct as_reply *r)
{
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, kind, ns, name);
    if (!e) {
        as_reply_not_found_in(r, kind->group, kind->resource, name);
    } else if (e->raw) {
        as_reply_text(r, 200, "application/json", e->raw, strlen(e->raw));
    } else {
        as_reply_json(r, 200, json_incref(e->obj));
    }
    pthread_mutex_unlock(&s->mu);
}

static int item_cmp(const void *a, const void *b)
{
    const struct as_item *x = a, *y = b;
    int c = strcmp(x->ns, y->ns);
    return c ? c : strcmp(x->name, y->name);
}

bool as_store_snapshot(struct as_store *s, const struct as_filter *f,
                       struct as_snapshot *out)
{
    bool ok = false;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    out->rv = s->rv;
    if (s->n) {
        out->items = calloc(s->n, sizeof *out->items);
        if (!out->items)
            goto out;
    }
    for (size_t i = 0; i < s->n; i++) {
        struct entry *e = &s->entries[i];
        json_t *obj = entry_parsed(e);
        if (!passes(f, e, json_object_get(json_object_get(obj, "metadata"), "labels"))) {
            json_decref(obj);
            continue;
        }
        struct as_item *it = &out->items[out->n++];
        it->obj = obj;
        it->ns = strdup(e->ns);
        it->name = strdup(e->name);
        it->text = entry_text(e);
        if (!it->ns || !it->name || !it->text)
            goto out;
    }
    ok = true;
out:
    pthread_mutex_unlock(&s->mu);
    if (!ok)
        as_snapshot_clear(out);
    else if (out->n > 1)
        qsort(out->items, out->n, sizeof *out->items, item_cmp);
    return ok;
}

void as_snapshot_clear(struct as_snapshot *snap)
{
    if (!snap)
        return;
    for (size_t i = 0; snap->items && i < snap->n; i++) {
        free(snap->items[i].ns);
        free(snap->items[i].name);
        free(snap->items[i].text);
        json_decref(snap->items[i].obj);
    }
    free(snap->items);
    memset(snap, 0, sizeof *snap);
}

/* Creates ns/name from in (normalised by kind); caller holds the lock and has
 * validated. */
static void do_create(struct as_store *s, const struct as_kind *kind, const char *ns,
                      const char *name, json_t *in, const char *client, const char *verb,
                      struct as_reply *r)
{
    char ts[32];
    json_t *uid = new_uid();
    json_t *ctime = json_string(as_rfc3339(as_wall_us(), false, ts));
    json_t *obj = NULL, *named = NULL;
    struct entry *e = NULL;
    if (!uid || !ctime || s->n >= MAX_ENTRIES) {
        as_reply_internal(r, s->n >= MAX_ENTRIES ? "store full" : "out of memory");
        goto out;
    }
    named = json_deep_copy(in);
    if (named)
        json_object_set_new(json_object_get(named, "metadata"), "name",
                            json_string(name));
    obj = named ? prepare(kind, named, ns, uid, ctime, NULL) : NULL;
    e = obj ? add_entry(s, kind, ns, name) : NULL;
    if (!e) {
        as_reply_internal(r, "out of memory");
        goto out;
    }
    e->rv = ++s->rv;
    set_rv(obj, e->rv);
    e->obj = json_incref(obj);
    committed(s, "ADDED", verb, e, obj, NULL, false, client);
    persist(s);
    as_reply_json(r, 201, json_incref(obj));
out:
    json_decref(obj);
    json_decref(named);
    json_decref(uid);
    json_decref(ctime);
}

void as_store_create(struct as_store *s, const struct as_kind *kind, const char *ns,
                     json_t *in, const char *client, struct as_reply *r)
{
    static const char gen_chars[] = "bcdfghjklmnpqrstvwxz2456789";
    json_t *meta = json_object_get(in, "metadata");
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    if (rv && *rv) {
        as_reply_internal(r,
                          "resourceVersion should not be set on objects to be created");
        return;
    }
    if (!kind->validate(in, NULL, r))
        return;
    pthread_mutex_lock(&s->mu);
    char name[320];
    const char *given = json_string_value(json_object_get(meta, "name"));
    if (given && *given) {
        snprintf(name, sizeof name, "%s", given);
    } else {
        const char *gen = json_string_value(json_object_get(meta, "generateName"));
        char hex[11];
        if (!as_random_hex(5, hex)) {
            as_reply_internal(r, "no randomness");
            goto out;
        }
        size_t gl = strnlen(gen, 248);
        memcpy(name, gen, gl);
        for (int i = 0; i < 5; i++)
            name[gl + (size_t)i] =
                gen_chars[(unsigned char)hex[i] % (sizeof gen_chars - 1)];
        name[gl + 5] = '\0';
        if (!as_dns1123_subdomain(name)) {
            struct as_field_errors fe;
            as_field_errors_init(&fe);
            as_field_errors_add(
                &fe, "FieldValueInvalid", "metadata.generateName",
                "Invalid value: generated name is not a DNS-1123 subdomain");
            as_reply_invalid_in(r, kind->group, kind->kind, name, &fe);
            as_field_errors_clear(&fe);
            goto out;
        }
    }
    if (find(s, kind, ns, name)) {
        as_reply_exists_in(r, kind->group, kind->resource, name);
        goto out;
    }
    do_create(s, kind, ns, name, in, client, "create", r);
out:
    pthread_mutex_unlock(&s->mu);
}

/* Replaces e with in (normalised by e's kind), after the kind's
 * validation against the stored object; lock held. A write that changes
 * nothing is not a write, as in etcd3's GuaranteedUpdate. */
static void do_update(struct as_store *s, struct entry *e, json_t *in, const char *client,
                      const char *verb, struct as_reply *r)
{
    json_t *old = entry_parsed(e);
    json_t *obj = NULL;
    json_t *old_meta = json_object_get(old, "metadata");
    json_t *uid = json_object_get(old_meta, "uid");
    json_t *ctime = json_object_get(old_meta, "creationTimestamp");
    json_t *fresh_uid = NULL, *fresh_ctime = NULL;
    char ts[32];
    if (!json_is_string(uid))
        uid = fresh_uid = new_uid();
    if (!json_is_string(ctime))
        ctime = fresh_ctime = json_string(as_rfc3339(as_wall_us(), false, ts));
    if (!e->kind->validate(in, old, r))
        goto out;
    obj = prepare(e->kind, in, e->ns, uid, ctime, old);
    if (!obj) {
        as_reply_internal(r, "out of memory");
        goto out;
    }
    set_rv(obj, e->rv);
    if (e->obj && json_equal(obj, e->obj)) {
        as_reply_json(r, 200, json_incref(e->obj));
        goto out;
    }
    e->rv = ++s->rv;
    set_rv(obj, e->rv);
    json_decref(e->obj);
    free(e->raw);
    e->raw = NULL;
    e->obj = json_incref(obj);
    committed(s, "MODIFIED", verb, e, obj, old, true, client);
    persist(s);
    as_reply_json(r, 200, json_incref(obj));
out:
    json_decref(obj);
    json_decref(old);
    json_decref(fresh_uid);
    json_decref(fresh_ctime);
}

void as_store_update(struct as_store *s, const struct as_kind *kind, const char *ns,
                     const char *name, json_t *in, const char *client, struct as_reply *r)
{
    const char *rvs = json_string_value(
        json_object_get(json_object_get(in, "metadata"), "resourceVersion"));
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, kind, ns, name);
    if (!e) {
        if (kind->validate(in, NULL, r))
            do_create(s, kind, ns, name, in, client, "update", r);
        goto out;
    }
    uint64_t rv = 0;
    if (rvs && *rvs && strcmp(rvs, "0") != 0 && !parse_rv(rvs, &rv)) {
        char msg[128];
        snprintf(msg, sizeof msg, "invalid resource version: %.64s", rvs);
        as_reply_bad_request(r, msg);
        goto out;
    }
    if (rv == 0) {
        struct as_field_errors fe;
        as_field_errors_init(&fe);
        as_field_errors_add(&fe, "FieldValueInvalid", "metadata.resourceVersion",
                            "Invalid value: 0x0: must be specified for an update");
        as_reply_invalid_in(r, kind->group, kind->resource, name, &fe);
        as_field_errors_clear(&fe);
        goto out;
    }
    if (rv != e->rv) {
        as_reply_conflict_in(r, kind->group, kind->resource, name,
                             AS_OPTIMISTIC_LOCK_MSG);
        goto out;
    }
    do_update(s, e, in, client, "update", r);
out:
    pthread_mutex_unlock(&s->mu);
}

/* RFC 7386 merge of patch onto target (both borrowed); keys starting with
 * '$' are strategic-merge directives and are skipped. New reference. */
static json_t *merge_patch(json_t *target, json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *out = json_is_object(target) ? json_deep_copy(target) : json_object();
    if (!out)
        return NULL;
    const char *k;
    json_t *v;
    json_object_foreach(patch, k, v)
    {
        if (k[0] == '$')
            continue;
        if (json_is_null(v)) {
            json_object_del(out, k);
            continue;
        }
        json_t *m = merge_patch(json_object_get(out, k), v);
        if (!m || json_object_set_new(out, k, m) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

void as_store_patch(struct as_store *s, const struct as_kind *kind, const char *ns,
                    const char *name, json_t *patch, const char *client,
                    struct as_reply *r)
{
    json_t *old = NULL, *merged = NULL, *next = NULL;
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, kind, ns, name);
    if (!e) {
        as_reply_not_found_in(r, kind->group, kind->resource, name);
        goto out;
    }
    old = entry_parsed(e);
    if (!old) {
        as_reply_internal(r, "unable to decode the stored object");
        goto out;
    }
    json_t *pmeta = json_object_get(patch, "metadata");
    json_t *prv = json_object_get(pmeta, "resourceVersion");
    if (json_is_string(prv) && json_string_length(prv) > 0) {
        uint64_t want;
        if (!parse_rv(json_string_value(prv), &want)) {
            as_reply_bad_request(r, "invalid resource version in patch");
            goto out;
        }
        if (want != e->rv) {
            as_reply_conflict_in(r, kind->group, kind->resource, name,
                                 AS_OPTIMISTIC_LOCK_MSG);
            goto out;
        }
    }
    merged = merge_patch(old, patch);
    if (!merged) {
        as_reply_internal(r, "out of memory");
        goto out;
    }
    next = kind->normalize(merged, r);
    if (!next)
        goto out;
    json_t *meta = json_object_get(next, "metadata");
    const char *pname = json_string_value(json_object_get(meta, "name"));
    const char *pns = json_string_value(json_object_get(meta, "namespace"));
    if ((pname && strcmp(pname, name) != 0) || (pns && strcmp(pns, ns) != 0)) {
        as_reply_bad_request(r, "the name or namespace of the object cannot be changed");
        goto out;
    }
    json_object_set_new(meta, "name", json_string(name));
    do_update(s, e, next, client, "patch", r);
out:
    pthread_mutex_unlock(&s->mu);
    json_decref(old);
    json_decref(merged);
    json_decref(next);
}

/* 409 as errors.NewConflict builds it for the GroupResource {group, Kind}. */
static void precondition_failed(const struct as_kind *kind, struct as_reply *r,
                                const char *name, const char *why)
{
    as_reply_conflict_in(r, kind->group, kind->kind, name, why);
}

void as_store_delete(struct as_store *s, const struct as_kind *kind, const char *ns,
                     const char *name, const char *precond_uid, const char *precond_rv,
                     const char *client, struct as_reply *r)
{
    json_t *obj = NULL;
    char why[512];
    pthread_mutex_lock(&s->mu);
    struct entry *e = find(s, kind, ns, name);
    if (!e) {
        as_reply_not_found_in(r, kind->group, kind->resource, name);
        goto out;
    }
    char cur[24];
    snprintf(cur, sizeof cur, "%" PRIu64, e->rv);
    obj = entry_parsed(e);
    json_t *uid = json_object_get(json_object_get(obj, "metadata"), "uid");
    const char *cur_uid = json_is_string(uid) ? json_string_value(uid) : "";
    /* rest.BeforeDelete's early check, which is what a client meets: the
     * UID first, then the version, against the kind rather than the
     * resource. */
    if (precond_uid && strcmp(precond_uid, cur_uid) != 0) {
        snprintf(why, sizeof why,
                 "the UID in the precondition (%.64s) does not match the UID in record "
                 "(%.64s). The object might have been deleted and then recreated",
                 precond_uid, cur_uid);
        precondition_failed(kind, r, name, why);
        goto out;
    }
    if (precond_rv && strcmp(precond_rv, cur) != 0) {
        snprintf(why, sizeof why,
                 "the ResourceVersion in the precondition (%.64s) does not match the "
                 "ResourceVersion in record (%s). The object might have been modified",
                 precond_rv, cur);
        precondition_failed(kind, r, name, why);
        goto out;
    }
    json_t *details = as_status_details_in(kind->group, name, kind->resource);
    if (details && json_is_string(uid))
        json_object_set(details, "uid", uid);
    e->rv = ++s->rv;
    if (e->obj)
        set_rv(e->obj, e->rv);
    committed(s, "DELETED", "delete", e, obj, NULL, true, client);
    remove_entry(s, e);
    persist(s);
    json_t *st = json_object();
    if (st) {
        json_object_set_new(st, "kind", json_string("Status"));
        json_object_set_new(st, "apiVersion", json_string("v1"));
        json_object_set_new(st, "metadata", json_object());
        json_object_set_new(st, "status", json_string("Success"));
        json_object_set(st, "details", details);
    }
    json_decref(details);
    as_reply_json(r, 200, st);
out:
    pthread_mutex_unlock(&s->mu);
    json_decref(obj);
}

/* text with metadata.resourceVersion set to rv when it is a JSON object
 * with a metadata object, else a plain copy; new string or NULL. */
static char *stamped_copy(const char *text, size_t len, bool stamp, uint64_t rv)
{
    json_t *doc = stamp ? json_loadb(text, len, JSON_ALLOW_NUL, NULL) : NULL;
    json_t *meta = json_object_get(doc, "metadata");
    char *out = NULL;
    if (json_is_object(doc) && json_is_object(meta)) {
        set_rv(doc, rv);
        out = json_dumps(doc, JSON_COMPACT);
    } else {
        out = malloc(len + 1);
        if (out) {
            memcpy(out, text, len);
            out[len] = '\0';
        }
    }
    json_decref(doc);
    return out;
}

uint64_t as_store_put_raw(struct as_store *s, const char *ns, const char *name,
                          const char *text, size_t len, const char *client, bool stamp)
{
    uint64_t rv = 0;
    json_t *before = NULL;
    pthread_mutex_lock(&s->mu);
    char *copy = stamped_copy(text, len, stamp, s->rv + 1);
    if (!copy)
        goto out;
    struct entry *e = find(s, &as_kind_lease, ns, name);
    const char *type = e ? "MODIFIED" : "ADDED";
    bool had_prev = e != NULL;
    before = e ? entry_parsed(e) : NULL;
    if (!e && s->n < MAX_ENTRIES)
        e = add_entry(s, &as_kind_lease, ns, name);
    if (!e) {
        free(copy);
        goto out;
    }
    json_decref(e->obj);
    e->obj = NULL;
    free(e->raw);
    e->raw = copy;
    s->rv++;
    e->rv = s->rv;
    json_t *parsed = entry_parsed(e);
    const char *own = json_string_value(
        json_object_get(json_object_get(parsed, "metadata"), "resourceVersion"));
    uint64_t own_rv;
    if (own && parse_rv(own, &own_rv))
        e->rv = own_rv;
    committed(s, type, "raw", e, parsed, before, had_prev, client);
    persist(s);
    json_decref(parsed);
    rv = e->rv;
out:
    pthread_mutex_unlock(&s->mu);
    json_decref(before);
    return rv;
}

json_t *as_store_log(struct as_store *s, const struct as_kind *kind, uint64_t since)
{
    json_t *out = json_array();
    size_t i;
    json_t *e;
    if (!out)
        return NULL;
    pthread_mutex_lock(&s->mu);
    json_array_foreach(s->log[kind->index], i, e)
    {
        if ((uint64_t)json_integer_value(json_object_get(e, "seq")) > since)
            json_array_append(out, e);
    }
    pthread_mutex_unlock(&s->mu);
    return out;
}

/* The ERROR event for a watch from a version the history no longer reaches:
 * the watch cache reports the oldest version one can resume from, which is
 * floor here. */
static char *gone_line(uint64_t asked, uint64_t floor)
{
    char msg[128];
    char *line = NULL;
    snprintf(msg, sizeof msg, "too old resource version: %" PRIu64 " (%" PRIu64 ")",
             asked, floor);
    json_t *st = as_status_failure(410, "Expired", msg, NULL);
    char *text = st ? json_dumps(st, JSON_COMPACT) : NULL;
    if (text && asprintf(&line, "{\"type\":\"ERROR\",\"object\":%s}\n", text) < 0)
        line = NULL;
    free(text);
    json_decref(st);
    return line;
}

static enum ld_err append(struct ld_buf *b, const char *src)
{
    return ld_buf_append(b, src, strlen(src));
}

static int entry_cmp(const void *a, const void *b)
{
    const struct entry *x = *(const struct entry *const *)a;
    const struct entry *y = *(const struct entry *const *)b;
    int c = strcmp(x->ns, y->ns);
    return c ? c : strcmp(x->name, y->name);
}

/* The synthetic ADDED events of a watch's start, in key order like the
 * watch cache's list; lock held. False on allocation failure or past
 * WATCH_BATCH_MAX. */
static bool initial_events(struct as_store *s, const struct as_filter *f,
                           struct ld_buf *buf)
{
    bool ok = false;
    size_t n = 0;
    const struct entry **sel = s->n ? calloc(s->n, sizeof(const struct entry *)) : NULL;
    if (s->n && !sel)
        return false;
    for (size_t i = 0; i < s->n; i++) {
        json_t *obj = entry_parsed(&s->entries[i]);
        if (passes(f, &s->entries[i],
                   json_object_get(json_object_get(obj, "metadata"), "labels")))
            sel[n++] = &s->entries[i];
        json_decref(obj);
    }
    if (n > 1)
        qsort(sel, n, sizeof(const struct entry *), entry_cmp);
    for (size_t i = 0; i < n; i++) {
        char *text = entry_text(sel[i]);
        bool added = text && append(buf, "{\"type\":\"ADDED\",\"object\":") == LD_OK &&
                     append(buf, text) == LD_OK && append(buf, "}\n") == LD_OK;
        free(text);
        if (!added)
            goto out;
    }
    ok = true;
out:
    free(sel);
    return ok;
}

int as_store_watch_start(struct as_store *s, const struct as_filter *f, const char *rv,
                         uint64_t *pos, char **out)
{
    int rc = AS_WATCH_OK;
    struct ld_buf buf;
    ld_buf_init(&buf, WATCH_BATCH_MAX);
    *out = NULL;
    uint64_t from = 0;
    bool initial = !rv || !*rv || strcmp(rv, "0") == 0;
    if (!initial && !parse_rv(rv, &from))
        return AS_WATCH_BAD;
    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        rc = AS_WATCH_CLOSED;
        goto out;
    }
    if (!initial && from < s->floor) {
        *out = gone_line(from, s->floor);
        rc = AS_WATCH_GONE;
        goto out;
    }
    if (initial) {
        if (!initial_events(s, f, &buf)) {
            rc = AS_WATCH_CLOSED;
            goto out;
        }
        from = s->rv;
    }
    *pos = from;
    if (buf.len > 0 && !(*out = ld_buf_take(&buf)))
        rc = AS_WATCH_CLOSED;
out:
    pthread_mutex_unlock(&s->mu);
    ld_buf_free(&buf);
    return rc;
}

/* line ({"type":"T","object":X}\n) with its type replaced; new string. */
static char *retype(const char *line, const char *type)
{
    const char *obj = strstr(line, ",\"object\":");
    char *out = NULL;
    if (!obj || asprintf(&out, "{\"type\":\"%s\"%s", type, obj) < 0)
        return NULL;
    return out;
}

/* A DELETED line for the object as it was before ev, stamped with ev's
 * version the way the watch cache reports an object leaving a selection. */
static char *left_selection(const struct event *ev)
{
    if (!ev->prev)
        return retype(ev->line, "DELETED");
    json_t *copy = json_deep_copy(ev->prev);
    char *text = NULL, *line = NULL;
    if (copy && json_is_object(json_object_get(copy, "metadata")))
        set_rv(copy, ev->rv);
    text = copy ? json_dumps(copy, JSON_COMPACT) : NULL;
    if (text && asprintf(&line, "{\"type\":\"DELETED\",\"object\":%s}\n", text) < 0)
        line = NULL;
    free(text);
    json_decref(copy);
    return line;
}

/* Appends what a watcher with filter f sees of ev: nothing, ev itself, or,
 * with a label selector, ADDED when the change brings the object into the
 * selection and DELETED when it takes it out. Nothing is appended on
 * failure: LD_ETOOBIG (the batch is full) or LD_ENOMEM. */
static enum ld_err append_event(const struct event *ev, const struct as_filter *f,
                                struct ld_buf *buf)
{
    if (f->kind != ev->kind || (f->ns && strcmp(f->ns, ev->ns) != 0) ||
        (f->name && strcmp(f->name, ev->name) != 0))
        return LD_OK;
    if (!f->labels)
        return append(buf, ev->line);
    bool now = !ev->deleted && as_labelsel_match(f->labels, ev->labels);
    bool before = ev->had_prev && as_labelsel_match(f->labels, ev->prev_labels);
    char *line = NULL;
    if (now == before || (now && !ev->had_prev) || (before && ev->deleted))
        return now || before ? append(buf, ev->line) : LD_OK;
    line = now ? retype(ev->line, "ADDED") : left_selection(ev);
    enum ld_err rc = line ? append(buf, line) : LD_ENOMEM;
    free(line);
    return rc;
}

int as_store_watch_next(struct as_store *s, const struct as_filter *f, uint64_t *pos,
                        int64_t due_ms, int wait_ms, char **out)
{
    int rc = AS_WATCH_OK;
    struct ld_buf buf;
    ld_buf_init(&buf, WATCH_BATCH_MAX);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    *out = NULL;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->closing) {
            rc = AS_WATCH_CLOSED;
            break;
        }
        if (*pos < s->floor) {
            *out = gone_line(*pos, s->floor);
            rc = AS_WATCH_GONE;
            break;
        }
        for (size_t i = 0; i < s->hist_n; i++) {
            struct event *ev = &s->hist[(s->hist_start + i) % HIST_CAP];
            if (ev->rv <= *pos)
                continue;
            if (ev->at_ms > due_ms)
                break; /* held back, and so is everything after it */
            enum ld_err e = append_event(ev, f, &buf);
            /* A full batch goes out; this event opens the next one. */
            if (e == LD_ETOOBIG && buf.len > 0)
                break;
            if (e != LD_OK) {
                rc = AS_WATCH_CLOSED;
                break;
            }
            *pos = ev->rv;
        }
        if (buf.len > 0 || rc != AS_WATCH_OK)
            break;
        if (pthread_cond_timedwait(&s->cond, &s->mu, &deadline) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == AS_WATCH_OK && buf.len > 0 && !(*out = ld_buf_take(&buf)))
        rc = AS_WATCH_CLOSED;
    ld_buf_free(&buf);
    return rc;
}

char *as_store_bookmark(struct as_store *s, const struct as_kind *kind)
{
    char *line = NULL;
    uint64_t rv = as_store_rv(s);
    /* The watch cache's bookmark: an empty object of the watched kind that
     * carries only the resourceVersion (a Lease keeps its empty spec). */
    if (asprintf(&line,
                 "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":"
                 "\"%s\",\"metadata\":{\"resourceVersion\":\"%" PRIu64
                 "\",\"creationTimestamp\":null}%s}}\n",
                 kind->kind, kind->api_version, rv,
                 kind == &as_kind_lease ? ",\"spec\":{}" : "") < 0)
        return NULL;
    return line;
}
