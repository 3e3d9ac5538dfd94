/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_http: a scripted HTTP(S) server on 127.0.0.1 (libmicrohttpd, one
 * thread per connection) that stands in for kube-apiserver (or any
 * upstream) in tests of HTTP clients: the transport, the Lease REST client
 * and the API proxy. It is faithful at the wire (real sockets, real TLS,
 * keep-alive, chunked bodies, delays) and knows nothing of Kubernetes: each
 * request takes the next scripted response whatever it asks, and is
 * recorded with the few headers and query arguments tests look at.
 *
 * Names: struct fake_http and fake_http_* functions and types, as in every
 * tests/unit/support/fake_*.h but fake_transport's.
 */
#ifndef LEADERD_TEST_FAKE_HTTP_H
#define LEADERD_TEST_FAKE_HTTP_H

#include <stdbool.h>
#include <stddef.h>

struct fake_http;

struct fake_http_response {
    int status;
    const char *body;        /* NULL: empty */
    size_t body_len;         /* 0: strlen(body) */
    const char *header_name; /* one extra response header, optional */
    const char *header_value;
    int delay_ms; /* wait before answering; fake_http_stop cuts it short */
    /* Wait before answering until fake_http_release (or fake_http_stop):
     * an upstream that holds a request as long as a test needs, however
     * slow the machine. */
    bool hold;
    /* When > 0 the body goes out in pieces of this many bytes (chunked),
     * chunk_delay_ms apart; fake_http_stop cuts the waits short. */
    int chunk_size;
    int chunk_delay_ms;
};

/* One recorded request. Strings are cut to fit; body is owned (free with
 * fake_http_request_clear). */
struct fake_http_request {
    char method[16];
    char path[512];           /* without the query */
    char timeout_arg[32];     /* value of ?timeout=, "" when absent */
    char label_selector[256]; /* ?labelSelector= decoded, "" when absent */
    char authorization[512];  /* "" when absent */
    char user_agent[256];
    char accept[128];
    char content_type[128];
    char *body; /* NUL-terminated, may be empty */
    size_t body_len;
};

/* Starts a server on 127.0.0.1 with an ephemeral port. With key_pem and
 * cert_pem (PEM text, copied) it speaks HTTPS. Returns NULL on failure. */
struct fake_http *fake_http_start(const char *key_pem, const char *cert_pem);
void fake_http_stop(struct fake_http *f); /* NULL-safe; frees f */

int fake_http_port(const struct fake_http *f);

/* "http://127.0.0.1:PORT" (or https). Borrowed, valid until stop. */
const char *fake_http_url(const struct fake_http *f);

/* Appends a response to the script (copied). When the script is empty the
 * server answers 500 "script exhausted". */
void fake_http_push(struct fake_http *f, const struct fake_http_response *r);

/* Answers every request held by a response's hold, now and from now on. */
void fake_http_release(struct fake_http *f);

/* When set, a request whose Authorization header differs gets a 401 Status
 * and does not consume the script. NULL disables. */
void fake_http_require_auth(struct fake_http *f, const char *authorization);

int fake_http_connections(struct fake_http *f);
int fake_http_request_count(struct fake_http *f);

/* Copies request i (0-based) into out; false when there is no such request. */
bool fake_http_request_at(struct fake_http *f, int i, struct fake_http_request *out);
void fake_http_request_clear(struct fake_http_request *r);

/* Waits until at least n requests have arrived; false after timeout_ms. */
bool fake_http_wait_requests(struct fake_http *f, int n, int timeout_ms);

#endif
