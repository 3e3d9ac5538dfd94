/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch_stream: streamed watches of any kind the store holds (newline-delimited JSON over
 * chunked HTTP/1.1) from the store's history, with resourceVersion (410 as an ERROR
 * event), timeoutSeconds, bookmarks, and the watcher's faults applied mid-stream.
 */
#ifndef AS_WATCH_STREAM_H
#define AS_WATCH_STREAM_H

#include <stdatomic.h>
#include <stdbool.h>

#include <microhttpd.h>

#include "faults.h"
#include "labelsel.h"
#include "status.h"
#include "store.h"

/* What a watch needs of the server, all borrowed: they must outlive every
 * watch response. */
struct as_watch_ctx {
    struct as_store *store;
    struct as_faults *faults;    /* the watcher's faults and the pause */
    const atomic_bool *stopping; /* set on shutdown: the stream ends */
    /* Waits up to wait_ms for the peer of fd to hang up; true if it did. */
    bool (*peer_gone)(int fd, int wait_ms);
};

struct as_watch_params {
    const struct as_kind *kind; /* required */
    const char *ns;             /* NULL: all namespaces */
    const char *name;           /* NULL: any name */
    struct as_labelsel *labels; /* NULL: any labels; the watch takes it over */
    const char *rv;             /* resourceVersion parameter or NULL */
    int timeout_s;              /* > 0 */
    bool bookmarks;
};

/* Builds the streaming 200 response, or returns NULL with a reply in err
 * (400 for a bad resourceVersion, 500). ctx is copied; client may be NULL
 * (admin); fd is the connection's socket, watched for hang-ups. p->labels
 * belongs to the watch from this call on, whatever its result. */
struct MHD_Response *as_watch_response(const struct as_watch_ctx *ctx, const char *client,
                                       int fd, const struct as_watch_params *p,
                                       struct as_reply *err);

#endif
