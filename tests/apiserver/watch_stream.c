/* SPDX-License-Identifier: Apache-2.0 */
#include "watch_stream.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Bookmarks come every few seconds rather than kube's minute, so tests can
 * see them without waiting long. */
#define BOOKMARK_INTERVAL_MS 10000
#define POLL_MS 100

struct watch {
    struct as_watch_ctx ctx;
    const struct as_kind *kind;
    char *client;
    char *ns;
    char *name;
    struct as_labelsel *labels;
    int fd;
    uint64_t pos;
    int64_t deadline_ms;
    bool bookmarks;
    int64_t next_bookmark_ms;
    char *pending;
    size_t pending_len, pending_off;
    bool ending;
};

static void watch_free(void *cls)
{
    struct watch *w = cls;
    if (!w)
        return;
    free(w->client);
    free(w->ns);
    free(w->name);
    as_labelsel_free(w->labels);
    free(w->pending);
    free(w);
}

static void set_pending(struct watch *w, char *text)
{
    free(w->pending);
    w->pending = text;
    w->pending_len = text ? strlen(text) : 0;
    w->pending_off = 0;
}

/* MHD calls this from the connection's own thread (thread-per-connection),
 * so blocking here only delays this watch. */
static ssize_t watch_read(void *cls, uint64_t offset, char *buf, size_t max)
{
    struct watch *w = cls;
    (void)offset;
    for (;;) {
        if (w->pending_off < w->pending_len) {
            size_t n = w->pending_len - w->pending_off;
            if (n > max)
                n = max;
            memcpy(buf, w->pending + w->pending_off, n);
            w->pending_off += n;
            return (ssize_t)n;
        }
        set_pending(w, NULL);
        int64_t now = as_mono_ms();
        if (w->ending || atomic_load(w->ctx.stopping) || now >= w->deadline_ms)
            return MHD_CONTENT_READER_END_OF_STREAM;
        struct as_fault f;
        bool faulted =
            w->client && as_faults_get(w->ctx.faults, w->client, AS_VERB_WATCH, &f);
        if (faulted && f.partition == AS_PART_RESET)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (as_faults_paused(w->ctx.faults) || (faulted && f.partition == AS_PART_HANG)) {
            if (w->ctx.peer_gone(w->fd, POLL_MS))
                return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        if (w->ctx.peer_gone(w->fd, 0))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        int64_t left = w->deadline_ms - now;
        int64_t lag = faulted ? f.watch_lag_ms : 0;
        char *text = NULL;
        struct as_filter sel = {
            .kind = w->kind, .ns = w->ns, .name = w->name, .labels = w->labels};
        int rc = as_store_watch_next(w->ctx.store, &sel, &w->pos, now - lag,
                                     left < POLL_MS ? (int)left : POLL_MS, &text);
        if (rc == AS_WATCH_CLOSED)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (rc == AS_WATCH_GONE)
            w->ending = true;
        if (text) {
            set_pending(w, text);
            continue;
        }
        if (w->bookmarks && lag == 0 && as_mono_ms() >= w->next_bookmark_ms) {
            w->next_bookmark_ms = as_mono_ms() + BOOKMARK_INTERVAL_MS;
            set_pending(w, as_store_bookmark(w->ctx.store, w->kind));
        }
    }
}

static char *dup_or_null(const char *s, bool *ok)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

struct MHD_Response *as_watch_response(const struct as_watch_ctx *ctx, const char *client,
                                       int fd, const struct as_watch_params *p,
                                       struct as_reply *err)
{
    struct MHD_Response *resp = NULL;
    bool ok = true;
    struct watch *w = calloc(1, sizeof *w);
    if (!w) {
        as_labelsel_free(p->labels);
        as_reply_internal(err, "out of memory");
        return NULL;
    }
    w->labels = p->labels;
    w->ctx = *ctx;
    w->kind = p->kind;
    w->fd = fd;
    w->client = dup_or_null(client, &ok);
    w->ns = dup_or_null(p->ns, &ok);
    w->name = dup_or_null(p->name, &ok);
    w->bookmarks = p->bookmarks;
    w->deadline_ms = as_mono_ms() + (int64_t)p->timeout_s * 1000;
    w->next_bookmark_ms = as_mono_ms() + BOOKMARK_INTERVAL_MS;
    if (!ok) {
        as_reply_internal(err, "out of memory");
        goto fail;
    }
    char *initial = NULL;
    struct as_filter f = {
        .kind = w->kind, .ns = w->ns, .name = w->name, .labels = w->labels};
    int rc = as_store_watch_start(ctx->store, &f, p->rv, &w->pos, &initial);
    if (rc == AS_WATCH_BAD) {
        as_reply_bad_request(err, "invalid resourceVersion for watch");
        goto fail;
    }
    if (rc == AS_WATCH_CLOSED) {
        as_reply_status(err, 503, "ServiceUnavailable", "the server is shutting down",
                        NULL);
        goto fail;
    }
    /* Too old is not an HTTP error: kube answers 200 and one ERROR event. */
    w->ending = rc == AS_WATCH_GONE;
    set_pending(w, initial);
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, watch_read, w,
                                             watch_free);
    if (!resp) {
        as_reply_internal(err, "cannot create response");
        goto fail;
    }
    return resp;
fail:
    watch_free(w);
    return NULL;
}
