/*
 * httpfake: a tiny scripted HTTP(S) server on 127.0.0.1 (libmicrohttpd,
 * one thread per connection) for client tests. Each request takes the next
 * scripted response; every request is recorded, and connections are counted.
 */
#ifndef LEADERD_TESTS_HTTPFAKE_H
#define LEADERD_TESTS_HTTPFAKE_H

#include <stdbool.h>
#include <stddef.h>

struct httpfake;

struct hf_response {
    int status;
    const char *body;        /* NULL: empty */
    size_t body_len;         /* 0: strlen(body) */
    const char *header_name; /* one extra response header, optional */
    const char *header_value;
    int delay_ms; /* wait before answering; httpfake_stop cuts it short */
    /* When > 0 the body goes out in pieces of this many bytes (chunked),
     * chunk_delay_ms apart; httpfake_stop cuts the waits short. */
    int chunk_size;
    int chunk_delay_ms;
};

/* One recorded request. Strings are cut to fit; body is owned (free with
 * hf_request_clear). */
struct hf_request {
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
struct httpfake *httpfake_start(const char *key_pem, const char *cert_pem);
void httpfake_stop(struct httpfake *f); /* NULL-safe; frees f */

int httpfake_port(const struct httpfake *f);

/* "http://127.0.0.1:PORT" (or https). Borrowed, valid until stop. */
const char *httpfake_url(const struct httpfake *f);

/* Appends a response to the script (copied). When the script is empty the
 * server answers 500 "script exhausted". */
void httpfake_push(struct httpfake *f, const struct hf_response *r);

/* When set, a request whose Authorization header differs gets a 401 Status
 * and does not consume the script. NULL disables. */
void httpfake_require_auth(struct httpfake *f, const char *authorization);

int httpfake_connections(struct httpfake *f);
int httpfake_request_count(struct httpfake *f);

/* Copies request i (0-based) into out; false when there is no such request. */
bool httpfake_request(struct httpfake *f, int i, struct hf_request *out);
void hf_request_clear(struct hf_request *r);

/* Waits until at least n requests have arrived; false after timeout_ms. */
bool httpfake_wait_requests(struct httpfake *f, int n, int timeout_ms);

#endif
