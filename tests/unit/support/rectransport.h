/*
 * rectransport: an in-memory struct ld_transport for REST-layer tests. It
 * records every submitted request and answers only when the test says so
 * (rec_answer), so a test sees exactly what was sent and feeds any status
 * and body back through the real done callback.
 */
#ifndef LEADERD_TEST_RECTRANSPORT_H
#define LEADERD_TEST_RECTRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "transport.h"

#define REC_MAX 16

struct rec_call {
    char verb[16];
    char path[1024];
    char content_type[64]; /* "" when the request named none */
    char *body;            /* owned copy, NULL when none */
    int64_t timeout_ms;
    ld_http_done_fn done;
    void *ctx;
    ld_http_id id;
    bool answered, canceled;
};

struct rec_transport {
    struct ld_transport base;
    struct rec_call calls[REC_MAX];
    size_t n;
};

/* Returns a new recorder (free with ld_transport_free). */
struct rec_transport *rec_new(void);

/* Answers call i with an HTTP status and body (NUL-terminated, may be
 * NULL), or with a transport failure when status is 0 (rc LD_ETRANSPORT).
 * The call's done callback runs before this returns. */
void rec_answer(struct rec_transport *t, size_t i, long status, const char *body);

#endif
