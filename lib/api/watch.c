/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch: newline-delimited watch events to struct ld_watch_event.
 */
#include "watch.h"

#include <stdlib.h>
#include <string.h>

#include "rest.h"

void ld_watch_decoder_init(struct ld_watch_decoder *d)
{
    ld_buf_init(&d->line, LD_WATCH_MAX_LINE);
    d->skipping = 0;
}

void ld_watch_decoder_clear(struct ld_watch_decoder *d)
{
    if (!d)
        return;
    ld_buf_free(&d->line);
    d->skipping = 0;
}

/* Events are a few hundred bytes: the buffer (buf.h) gives back a block
 * grown by one long line once the line is done, rather than keep it for
 * the life of the watch. */
void ld_watch_decoder_reset(struct ld_watch_decoder *d)
{
    ld_buf_reset(&d->line);
    d->skipping = 0;
}

static void emit_invalid(ld_watch_event_fn fn, void *ctx, enum ld_err code,
                         const char *why)
{
    struct ld_watch_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = LD_WATCH_INVALID;
    ld_errinfo_set(&ev.error, code, "watch event: %s", why);
    fn(ctx, &ev);
}

static bool parse_type(const char *s, enum ld_watch_type *out)
{
    static const struct {
        const char *name;
        enum ld_watch_type type;
    } types[] = {{"ADDED", LD_WATCH_ADDED},
                 {"MODIFIED", LD_WATCH_MODIFIED},
                 {"DELETED", LD_WATCH_DELETED},
                 {"BOOKMARK", LD_WATCH_BOOKMARK},
                 {"ERROR", LD_WATCH_ERROR}};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (strcmp(s, types[i].name) == 0) {
            *out = types[i].type;
            return true;
        }
    }
    return false;
}

/* ERROR carries a metav1.Status; its code decides the error value. */
static void emit_error(json_t *object, ld_watch_event_fn fn, void *ctx)
{
    struct ld_watch_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = LD_WATCH_ERROR;
    char *text = object ? json_dumps(object, JSON_COMPACT) : NULL;
    json_t *code = object ? json_object_get(object, "code") : NULL;
    long status = json_is_integer(code) ? (long)json_integer_value(code) : 500;
    ld_rest_status(status, text ? text : "", text ? strlen(text) : 0, &ev.error);
    free(text);
    fn(ctx, &ev);
}

static void emit_bookmark(json_t *object, ld_watch_event_fn fn, void *ctx)
{
    json_t *rv = json_object_get(json_object_get(object, "metadata"), "resourceVersion");
    if (!json_is_string(rv)) {
        emit_invalid(fn, ctx, LD_EDECODE, "BOOKMARK without metadata.resourceVersion");
        return;
    }
    struct ld_watch_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = LD_WATCH_BOOKMARK;
    ev.resource_version = json_string_value(rv);
    fn(ctx, &ev);
}

static void emit_lease(enum ld_watch_type type, json_t *object, ld_watch_event_fn fn,
                       void *ctx)
{
    struct ld_lease lease;
    struct ld_watch_event ev;
    memset(&ev, 0, sizeof(ev));
    ld_lease_init(&lease);
    if (ld_lease_from_json(object, &lease, &ev.error) != LD_OK) {
        ev.type = LD_WATCH_INVALID;
        fn(ctx, &ev);
        return;
    }
    ev.type = type;
    ev.lease = &lease;
    ev.resource_version = lease.resource_version;
    fn(ctx, &ev);
    ld_lease_clear(&lease);
}

void ld_watch_decode_line(const char *line, size_t len, ld_watch_event_fn fn, void *ctx)
{
    json_error_t jerr;
    memset(&jerr, 0, sizeof(jerr));
    /* NUL allowed, as for a GET: the Lease codec decides what to keep. */
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!json_is_object(root)) {
        emit_invalid(fn, ctx, LD_EDECODE, root ? "not a JSON object" : jerr.text);
        goto out;
    }
    json_t *type = json_object_get(root, "type");
    json_t *object = json_object_get(root, "object");
    enum ld_watch_type t;
    if (!json_is_string(type) || !parse_type(json_string_value(type), &t)) {
        emit_invalid(fn, ctx, LD_EDECODE, "missing or unknown type");
        goto out;
    }
    if (!json_is_object(object)) {
        emit_invalid(fn, ctx, LD_EDECODE, "missing object");
        goto out;
    }
    if (t == LD_WATCH_ERROR)
        emit_error(object, fn, ctx);
    else if (t == LD_WATCH_BOOKMARK)
        emit_bookmark(object, fn, ctx);
    else
        emit_lease(t, object, fn, ctx);
out:
    json_decref(root);
}

static void finish_line(struct ld_watch_decoder *d, ld_watch_event_fn fn, void *ctx)
{
    const char *line = d->line.data;
    size_t n = d->line.len;
    while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' '))
        n--;
    if (n > 0)
        ld_watch_decode_line(line, n, fn, ctx);
    ld_buf_reset(&d->line);
}

enum ld_err ld_watch_feed(struct ld_watch_decoder *d, const char *data, size_t len,
                          ld_watch_event_fn fn, void *ctx)
{
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t chunk = nl ? (size_t)(nl - data) : len;
        enum ld_err rc = d->skipping ? LD_OK : ld_buf_append(&d->line, data, chunk);
        if (rc != LD_OK) {
            ld_buf_reset(&d->line);
            d->skipping = 1;
            if (rc != LD_ETOOBIG)
                return rc;
            emit_invalid(fn, ctx, LD_ETOOBIG, "line longer than the limit; skipped");
        }
        if (!nl)
            break;
        if (d->skipping)
            d->skipping = 0;
        else
            finish_line(d, fn, ctx);
        data = nl + 1;
        len -= chunk + 1;
    }
    return LD_OK;
}
