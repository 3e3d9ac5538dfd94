/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport: the seam between the Lease REST layer (kube.h) and HTTP.
 *
 * A transport runs many HTTP exchanges at once on one thread: round trips
 * (submit) and long-lived streams such as watches (open_stream). Nothing
 * happens and no callback runs outside ld_transport_run, so the caller's
 * event loop decides when work is done and callbacks never race it. A slow
 * or hung exchange never delays another: each has its own timeout and its
 * own callbacks.
 *
 * It is a vtable so the host of many elections and its tests can put an
 * in-memory implementation where the libcurl one (transport_curl.h) runs in
 * production. It is kept to what every implementation must do; settings that
 * only one implementation has (TLS, tokens, the User-Agent) are given to its
 * constructor or to functions of its own.
 *
 * What a transport does not do: map HTTP statuses to errors, decode bodies,
 * retry. An HTTP answer of any status is a success here (rc LD_OK); the REST
 * layer decides what a 404 or a 409 means.
 *
 * Ownership: strings and buffers in a request are borrowed for the duration
 * of the submit/open_stream call only (an implementation copies what it
 * keeps). Everything in a result, and the bytes given to a data callback,
 * are borrowed for the duration of that callback only.
 */
#ifndef LEADERD_TRANSPORT_H
#define LEADERD_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Largest response body accepted; a larger one fails with LD_ETOOBIG. It
 * must hold any Lease the API server can return: etcd stores objects of up
 * to 1.5 MiB (--max-request-bytes), and their JSON can be longer than what
 * was stored, since the server escapes <, >, & and control characters as
 * six-byte \u00XX sequences: 1.5 MiB of those is 9 MiB of JSON. Buffers
 * grow only as far as a body needs and are freed with their exchange. */
#define LD_HTTP_MAX_BODY (16 * 1024 * 1024)

/* Largest body of a non-200 answer to a stream kept for its Status. */
#define LD_HTTP_STREAM_ERRBODY_MAX (64 * 1024)

/* Identifies an exchange from submit/open_stream until its done callback
 * ran or it was canceled. Never 0; never reused by one transport. */
typedef uint64_t ld_http_id;

/* Which round trips go first when more are waiting than an implementation
 * runs at once. A heartbeat is a write that keeps a claim alive (an
 * election renewing, acquiring or releasing its own Lease): it is handed on
 * before any normal request still waiting, and has room of its own that
 * normal requests never fill, so normal ones that hang cannot delay it.
 * Streams ignore it. */
enum ld_http_priority {
    LD_PRIO_NORMAL = 0,
    LD_PRIO_HEARTBEAT = 1,
};

struct ld_http_request {
    const char *verb;         /* "GET", "POST", "PUT", ... */
    const char *path;         /* from the server's base URL on, query included */
    const char *body;         /* NULL: none */
    size_t body_len;          /* bytes of body */
    const char *content_type; /* of the body; NULL: application/json (a PATCH
                                 names its patch type here) */
    int64_t timeout_ms;       /* whole exchange, connect and any wait for a connection
                                 included; <= 0 takes the implementation's default */
    enum ld_http_priority priority; /* LD_PRIO_NORMAL when left zero */
};

struct ld_http_result {
    /* LD_OK when an HTTP answer (any status) arrived; otherwise
     * LD_ECONNECT (no connection, or the server failed TLS verification:
     * the request was certainly not sent), LD_ETRANSPORT (reset and other
     * failures: it may have been), LD_ETIMEOUT (sent, or perhaps sent, and
     * no answer in time), LD_ENOTSENT (its time ran out while it waited its
     * turn: certainly not sent), LD_ETOOBIG (status is then set),
     * LD_ENOMEM. A stream that the server ended is LD_OK. */
    enum ld_err rc;
    long status;      /* 0 when no HTTP answer arrived */
    const char *body; /* the response body (a stream: only a non-200
                         one, capped); NUL-terminated, never NULL */
    size_t body_len;
    int64_t retry_after_ms; /* Retry-After in ms, -1 when absent */
    double seconds;         /* from submit to the end, monotonic clock */
    /* On a 401 the transport re-reads its credentials before reporting;
     * true when the exchange went out with credentials that have been
     * replaced since, so sending it again once may succeed. */
    bool auth_renewed;
    struct ld_errinfo err; /* detail when rc != LD_OK */
};

/* Called once per exchange, from ld_transport_run only. */
typedef void (*ld_http_done_fn)(void *ctx, ld_http_id id, const struct ld_http_result *r);

/* Bytes of a stream's 200 body as they arrive, from ld_transport_run only. */
typedef void (*ld_http_data_fn)(void *ctx, ld_http_id id, const char *data, size_t len);

struct ld_transport;

struct ld_transport_ops {
    /* Starts a round trip. LD_OK with *id set, and done will be called
     * exactly once; or an error (LD_EINVAL, LD_ENOMEM) with err set, and no
     * callback. May be called from inside a callback. */
    enum ld_err (*submit)(struct ld_transport *t, const struct ld_http_request *req,
                          ld_http_done_fn done, void *ctx, ld_http_id *id,
                          struct ld_errinfo *err);
    /* Starts a stream: data for each piece of a 200 body, then done once
     * when it ends (status and, for a non-200, the capped body). Same
     * return rules as submit. */
    enum ld_err (*open_stream)(struct ld_transport *t, const struct ld_http_request *req,
                               ld_http_data_fn data, ld_http_done_fn done, void *ctx,
                               ld_http_id *id, struct ld_errinfo *err);
    /* Abandons an exchange. After it returns no callback for id runs. An
     * unknown or finished id is ignored. May be called from a callback. */
    void (*cancel)(struct ld_transport *t, ld_http_id id);
    /* Drives every exchange for up to wait_ms, returning sooner once at
     * least one callback ran. When wake_fd >= 0 it also returns as soon as
     * wake_fd is readable or hung up (it is polled, never read), with
     * LD_ECANCELED; otherwise LD_OK. With nothing in flight it only waits.
     * Must not be called from a callback. wait_ms, like every exchange's
     * timeout, is counted from the call on the clock of ld_mono_ms, which
     * counts a suspend: an implementation ends its waits with a clock.h
     * timer, not with a poll timeout alone, so a wait under way while the
     * machine slept ends on resume if its time passed meanwhile. */
    enum ld_err (*run)(struct ld_transport *t, int64_t wait_ms, int wake_fd);
    /* How many exchanges are in flight (submitted, not yet done or
     * canceled). */
    size_t (*pending)(const struct ld_transport *t);
    /* Cancels everything (no callbacks) and frees t. */
    void (*free)(struct ld_transport *t);
};

/* Implementations put this first in their own struct. */
struct ld_transport {
    const struct ld_transport_ops *ops;
};

static inline enum ld_err ld_transport_submit(struct ld_transport *t,
                                              const struct ld_http_request *req,
                                              ld_http_done_fn done, void *ctx,
                                              ld_http_id *id, struct ld_errinfo *err)
{
    return t->ops->submit(t, req, done, ctx, id, err);
}

static inline enum ld_err ld_transport_open_stream(struct ld_transport *t,
                                                   const struct ld_http_request *req,
                                                   ld_http_data_fn data,
                                                   ld_http_done_fn done, void *ctx,
                                                   ld_http_id *id, struct ld_errinfo *err)
{
    return t->ops->open_stream(t, req, data, done, ctx, id, err);
}

static inline void ld_transport_cancel(struct ld_transport *t, ld_http_id id)
{
    t->ops->cancel(t, id);
}

static inline enum ld_err ld_transport_run(struct ld_transport *t, int64_t wait_ms,
                                           int wake_fd)
{
    return t->ops->run(t, wait_ms, wake_fd);
}

static inline size_t ld_transport_pending(const struct ld_transport *t)
{
    return t->ops->pending(t);
}

static inline void ld_transport_free(struct ld_transport *t) /* NULL-safe */
{
    if (t)
        t->ops->free(t);
}

#endif
