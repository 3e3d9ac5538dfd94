/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch: decodes a Kubernetes watch stream (newline-delimited JSON events)
 * for one Lease. Bytes go in as they arrive, whole events come out. Pure:
 * no I/O, no clock. A malformed line is reported and skipped; it never
 * yields a half-decoded Lease.
 */
#ifndef LEADERD_WATCH_H
#define LEADERD_WATCH_H

#include <stddef.h>

#include "buf.h"
#include "err.h"
#include "lease.h"

/* Longest event line accepted; a longer one is skipped with LD_ETOOBIG.
 * The same as a GET's body (LD_KUBE_MAX_BODY): any Lease the API server
 * can send fits, with its event envelope. */
#define LD_WATCH_MAX_LINE (16 * 1024 * 1024)

enum ld_watch_type {
    LD_WATCH_ADDED,
    LD_WATCH_MODIFIED,
    LD_WATCH_DELETED,
    LD_WATCH_BOOKMARK, /* only resource_version is set */
    LD_WATCH_ERROR,    /* error holds the Status (410 Expired -> LD_EGONE) */
    LD_WATCH_INVALID,  /* the line did not decode; error says why */
};

/* One event. lease and resource_version are borrowed: valid only during the
 * callback. */
struct ld_watch_event {
    enum ld_watch_type type;
    const struct ld_lease *lease; /* ADDED, MODIFIED, DELETED */
    const char *resource_version; /* the object's, or the bookmark's */
    struct ld_errinfo error;      /* ERROR and INVALID */
};

typedef void (*ld_watch_event_fn)(void *ctx, const struct ld_watch_event *ev);

struct ld_watch_decoder {
    struct ld_buf line; /* the unfinished line, capped at LD_WATCH_MAX_LINE */
    int skipping;       /* inside an over-long line: drop until newline */
};

void ld_watch_decoder_init(struct ld_watch_decoder *d);
void ld_watch_decoder_clear(struct ld_watch_decoder *d); /* frees; NULL-safe */

/* Forgets any unfinished line (after a reconnect). */
void ld_watch_decoder_reset(struct ld_watch_decoder *d);

/* Feeds len bytes; calls fn once per complete non-empty line. Returns
 * LD_OK, or LD_ENOMEM when the line buffer cannot grow (the partial line is
 * dropped). Over-long lines are reported as LD_WATCH_INVALID with
 * LD_ETOOBIG and skipped. */
enum ld_err ld_watch_feed(struct ld_watch_decoder *d, const char *data, size_t len,
                          ld_watch_event_fn fn, void *ctx);

/* Decodes one line (without its newline) and calls fn with the event. */
void ld_watch_decode_line(const char *line, size_t len, ld_watch_event_fn fn, void *ctx);

#endif
