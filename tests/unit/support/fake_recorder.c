/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_recorder: the recording transport of fake_recorder.h.
 */
#include "fake_recorder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum ld_err rec_submit(struct ld_transport *base,
                              const struct ld_http_request *req, ld_http_done_fn done,
                              void *ctx, ld_http_id *id, struct ld_errinfo *err)
{
    struct fake_recorder *t = (struct fake_recorder *)base;
    if (t->n == FAKE_RECORDER_MAX)
        return ld_errinfo_set(err, LD_ENOMEM, "recorder full");
    struct fake_recorder_call *c = &t->calls[t->n];
    memset(c, 0, sizeof(*c));
    snprintf(c->verb, sizeof(c->verb), "%s", req->verb);
    snprintf(c->path, sizeof(c->path), "%s", req->path);
    snprintf(c->content_type, sizeof(c->content_type), "%s",
             req->content_type ? req->content_type : "");
    if (req->body) {
        c->body = malloc(req->body_len + 1);
        if (!c->body)
            return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        memcpy(c->body, req->body, req->body_len);
        c->body[req->body_len] = '\0';
    }
    c->timeout_ms = req->timeout_ms;
    c->done = done;
    c->ctx = ctx;
    c->id = ++t->n;
    *id = c->id;
    return LD_OK;
}

static enum ld_err rec_open_stream(struct ld_transport *base,
                                   const struct ld_http_request *req,
                                   ld_http_data_fn data, ld_http_done_fn done, void *ctx,
                                   ld_http_id *id, struct ld_errinfo *err)
{
    (void)base, (void)req, (void)data, (void)done, (void)ctx;
    *id = 0;
    return ld_errinfo_set(err, LD_EINVAL, "no streams here");
}

static void rec_cancel(struct ld_transport *base, ld_http_id id)
{
    struct fake_recorder *t = (struct fake_recorder *)base;
    if (id >= 1 && id <= t->n)
        t->calls[id - 1].canceled = true;
}

static enum ld_err rec_run(struct ld_transport *base, int64_t wait_ms, int wake_fd)
{
    (void)base, (void)wait_ms, (void)wake_fd;
    return LD_OK;
}

static size_t rec_pending(const struct ld_transport *base)
{
    const struct fake_recorder *t = (const struct fake_recorder *)base;
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += !t->calls[i].answered && !t->calls[i].canceled;
    return n;
}

static void rec_free(struct ld_transport *base)
{
    struct fake_recorder *t = (struct fake_recorder *)base;
    for (size_t i = 0; i < t->n; i++)
        free(t->calls[i].body);
    free(t);
}

static const struct ld_transport_ops rec_ops = {
    .submit = rec_submit,
    .open_stream = rec_open_stream,
    .cancel = rec_cancel,
    .run = rec_run,
    .pending = rec_pending,
    .free = rec_free,
};

struct fake_recorder *fake_recorder_new(void)
{
    struct fake_recorder *t = calloc(1, sizeof(*t));
    if (t)
        t->base.ops = &rec_ops;
    return t;
}

void fake_recorder_answer(struct fake_recorder *t, size_t i, long status,
                          const char *body)
{
    struct fake_recorder_call *c = &t->calls[i];
    struct ld_http_result r;
    memset(&r, 0, sizeof(r));
    r.rc = status ? LD_OK : LD_ETRANSPORT;
    r.status = status;
    r.body = body ? body : "";
    r.body_len = strlen(r.body);
    r.retry_after_ms = -1;
    r.seconds = 0.01;
    if (!status)
        ld_errinfo_set(&r.err, LD_ETRANSPORT, "connection reset");
    c->answered = true;
    c->done(c->ctx, c->id, &r);
}
