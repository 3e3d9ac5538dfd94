/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_recorder: a struct ld_transport (transport.h) that stands in for the
 * libcurl transport in tests of what goes over it (the Pod label and Event
 * writers). It is faithful only to the vtable's contract: it records every
 * submitted request and answers only when the test says so
 * (fake_recorder_answer), through the real done callback; it serves no API
 * and has no clock, and streams are refused.
 *
 * Names: struct fake_recorder and fake_recorder_* functions and types, as in
 * every tests/unit/support/fake_*.h but fake_transport's.
 */
#ifndef LEADERD_TEST_FAKE_RECORDER_H
#define LEADERD_TEST_FAKE_RECORDER_H

#include <stdbool.h>
#include <stddef.h>

#include "transport.h"

#define FAKE_RECORDER_MAX 16

struct fake_recorder_call {
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

struct fake_recorder {
    struct ld_transport base;
    struct fake_recorder_call calls[FAKE_RECORDER_MAX];
    size_t n;
};

/* Returns a new recorder (free with ld_transport_free). */
struct fake_recorder *fake_recorder_new(void);

/* Answers call i with an HTTP status and body (NUL-terminated, may be
 * NULL), or with a transport failure when status is 0 (rc LD_ETRANSPORT).
 * The call's done callback runs before this returns. */
void fake_recorder_answer(struct fake_recorder *t, size_t i, long status,
                          const char *body);

#endif
