/*
 * watch: streamed watches of any kind the store holds (newline-delimited JSON over
 * chunked HTTP/1.1) from the store's history, with resourceVersion (410 as an ERROR
 * event), timeoutSeconds, bookmarks, and the watcher's faults applied mid-stream.
 */
#ifndef AS_WATCH_H
#define AS_WATCH_H

#include <stdbool.h>

#include <microhttpd.h>

#include "api.h"
#include "status.h"

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
 * (400 for a bad resourceVersion, 500). client may be NULL (admin); fd is
 * the connection's socket, watched for hang-ups. p->labels belongs to the
 * watch from this call on, whatever its result. */
struct MHD_Response *as_watch_response(struct as_api *api, const char *client, int fd,
                                       const struct as_watch_params *p,
                                       struct as_reply *err);

#endif
