/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store: the objects of leaderd-apiserver (Leases and ConfigMaps, kinds.h)
 * with kube's write semantics (one global resourceVersion counter across
 * kinds, as etcd's revision is, optimistic concurrency, AllowCreateOnUpdate),
 * one event history for watches, a write log per kind and state-file
 * persistence. Every call names the kind it works on; a kind's objects are
 * invisible to the others' calls. Thread-safe (one mutex per store).
 */
#ifndef AS_STORE_H
#define AS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kinds.h"
#include "status.h"

struct as_store;
struct as_labelsel;

/* Which objects a list or watch selects; every field borrowed, NULL = any
 * (but kind, which is required). */
struct as_filter {
    const struct as_kind *kind;
    const char *ns;
    const char *name;
    const struct as_labelsel *labels; /* metadata.labels must match */
};

/* Creates a store. When state_file is non-NULL and exists, loads it; every
 * later write rewrites it atomically. Returns NULL with a message in err
 * (errlen bytes) when the file is unreadable or malformed. */
struct as_store *as_store_new(const char *state_file, char *err, size_t errlen);

/* Wakes and ends every watch; later watch calls return AS_WATCH_CLOSED. */
void as_store_close(struct as_store *s);

/* Frees the store. NULL-safe. No other call may be running. */
void as_store_free(struct as_store *s);

/* The last resourceVersion issued. */
uint64_t as_store_rv(struct as_store *s);

/* GET: r becomes 200 with the object (raw entries verbatim) or 404. */
void as_store_get(struct as_store *s, const struct as_kind *kind, const char *ns,
                  const char *name, struct as_reply *r);

/* One object in a snapshot: its serialised text (raw entries verbatim) and,
 * when that text is a JSON object, the parsed object. */
struct as_item {
    char *ns;
    char *name;
    char *text;
    json_t *obj;
};
struct as_snapshot {
    struct as_item *items;
    size_t n;
    uint64_t rv; /* list resourceVersion */
};

/* Copies the objects f selects (a raw entry that is not a JSON object has no
 * labels), sorted by namespace then name. Returns false on allocation
 * failure. Free with as_snapshot_clear. */
bool as_store_snapshot(struct as_store *s, const struct as_filter *f,
                       struct as_snapshot *out);
void as_snapshot_clear(struct as_snapshot *snap);

/* The write operations take an object normalised by kind->normalize
 * (borrowed) whose metadata.namespace/name already match ns/name, validate
 * it with kind->validate and set r to the kube reply, its Status bodies
 * naming kind's group and resource. client names the writer in the write
 * log. */

/* POST: 201, 409 AlreadyExists, 422, or 500 when the body carries a
 * resourceVersion. Generates a name from metadata.generateName if needed. */
void as_store_create(struct as_store *s, const struct as_kind *kind, const char *ns,
                     json_t *in, const char *client, struct as_reply *r);

/* PUT: 200, 201 (created), 409 Conflict, 422 (validation or a missing
 * resourceVersion), 400 (unparseable resourceVersion). */
void as_store_update(struct as_store *s, const struct as_kind *kind, const char *ns,
                     const char *name, json_t *in, const char *client,
                     struct as_reply *r);

/* PATCH with a JSON merge patch (borrowed; "$"-keys ignored, which is how
 * strategic merge patches are treated here). metadata.resourceVersion in the
 * patch is a precondition. 200, 404, 409, 400, 422, 500 for a stored
 * document that is not a JSON object. */
void as_store_patch(struct as_store *s, const struct as_kind *kind, const char *ns,
                    const char *name, json_t *patch, const char *client,
                    struct as_reply *r);

/* DELETE: 200 Status Success (details name, group, kind = the resource
 * ("leases"), uid, as kube answers for a resource that does not return the
 * deleted object), 404, or 409 Conflict when precond_uid or precond_rv (each
 * NULL for none; "" is a value that must match) differs from the stored uid
 * / resourceVersion, worded as rest.BeforeDelete words it (uid checked
 * first, details kind = the kind ("Lease")). */
void as_store_delete(struct as_store *s, const struct as_kind *kind, const char *ns,
                     const char *name, const char *precond_uid, const char *precond_rv,
                     const char *client, struct as_reply *r);

/* Stores text verbatim as Lease ns/name, bypassing decoding and validation. Its
 * resourceVersion (for preconditions) is the text's metadata.resourceVersion
 * when that is a decimal string, else a fresh one. With stamp, a text that is
 * a JSON object with a "metadata" object gets the fresh version written into
 * metadata.resourceVersion (the rest is kept, wrong types and all), the way
 * a real server would label even a corrupted object. Returns that version, or
 * 0 on allocation failure. */
uint64_t as_store_put_raw(struct as_store *s, const char *ns, const char *name,
                          const char *text, size_t len, const char *client, bool stamp);

/* kind's write log entries with seq > since, as a new JSON array. Every
 * entry: seq (per kind), mono_ms, clock_us, wall, client, verb, namespace,
 * name, resourceVersion, and the kind's fields (a Lease's holderIdentity
 * and leaseTransitions, a ConfigMap's data or, past 1 KiB, dataBytes). */
json_t *as_store_log(struct as_store *s, const struct as_kind *kind, uint64_t since);

/* Watch results. */
enum {
    AS_WATCH_OK = 0,
    AS_WATCH_GONE = 1,   /* *out holds an ERROR event with a 410 Expired Status */
    AS_WATCH_BAD = 2,    /* the resourceVersion is not a number */
    AS_WATCH_CLOSED = 3, /* the store is closing */
};

/* Starts a watch on the objects f selects (f borrowed for this call). rv
 * NULL, "" or "0" gives synthetic ADDED events for the current matching
 * objects, in namespace/name order, in *out; otherwise only changes after rv.
 * Sets *pos to the position to continue from. *out (free with free()) holds
 * newline-terminated event lines or is NULL. */
int as_store_watch_start(struct as_store *s, const struct as_filter *f, const char *rv,
                         uint64_t *pos, char **out);

/* Waits up to wait_ms for events after *pos that f selects, stored at or
 * before due_ms (as_mono_ms; later ones are held back, in order), and
 * returns them in *out (NULL when none arrived) with *pos advanced. With a label selector
 * the events follow the selection like kube's watch cache: a change that
 * makes an object match is sent as ADDED, one that makes it stop matching as
 * DELETED carrying its last matching state stamped with the change's
 * resourceVersion. AS_WATCH_GONE when the history no longer reaches back to
 * *pos. */
int as_store_watch_next(struct as_store *s, const struct as_filter *f, uint64_t *pos,
                        int64_t due_ms, int wait_ms, char **out);

/* A BOOKMARK event line of kind for the current resourceVersion (free with
 * free()). */
char *as_store_bookmark(struct as_store *s, const struct as_kind *kind);

#endif
