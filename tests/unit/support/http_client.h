/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_client: the client side of unit tests that run the daemon's HTTP
 * server (or the API proxy) in process on 127.0.0.1: one request with
 * libcurl (http_fetch, or http_request for any method, body and headers),
 * one on a thread of its own (http_get), a /watch event stream read on a
 * thread of its own (http_sse), and a connection that sends nothing
 * (http_connect_idle).
 *
 * Names: prefixed http_ (functions and types). Nothing here uses Check's
 * assertions off the test's own thread (Check's messages are not
 * thread-safe): a request's outcome is in its struct http_resp.
 */
#ifndef LEADERD_TEST_HTTP_CLIENT_H
#define LEADERD_TEST_HTTP_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

/* Bodies longer than this are an error (CURLE_WRITE_ERROR): enough for the
 * largest shard table. */
#define HTTP_RESP_BODY_MAX (512 * 1024)

/* One answer: the status (set as soon as the status line arrives, for
 * streams that never end), the body and the headers tests look at. */
struct http_resp {
    long status;
    char body[HTTP_RESP_BODY_MAX]; /* NUL-terminated */
    size_t len;
    char ctype[128];     /* Content-Type, "" when absent */
    char allow[64];      /* Allow */
    char cache[64];      /* Cache-Control */
    char header[256];    /* the header the request named (read_header) */
    int64_t first_ms;    /* monotonic time the first body byte came; 0: none */
    int64_t took_ms;     /* how long the transfer took */
    curl_off_t uploaded; /* request body bytes sent (a refusal may stop them) */
    CURLcode rc;         /* how the transfer went; CURLE_FAILED_INIT: not started */
};

/* A request of any shape, for http_request. Every pointer must stay valid
 * until the request is over. */
struct http_req {
    const char *method;         /* NULL: GET; "HEAD" asks for no body */
    const char *path;           /* the URL's path and query */
    const char *request_target; /* sent in the request line instead of path */
    const char *body;           /* NUL-terminated; NULL: none */
    const char *headers[8];     /* "Name: value", NULL-terminated; "Name:" drops
                                 * one libcurl would add (Expect) */
    const char *read_header;    /* a response header to keep in header */
};

/* libcurl's write callback appending to the struct http_resp in ud, for a
 * test that drives its own easy handle. */
size_t http_resp_on_body(char *p, size_t size, size_t n, void *ud);

/* One request to http://127.0.0.1:port/path into r (overwritten). method
 * NULL means GET; "HEAD" asks for no body; "POST" sends a small JSON body;
 * "GET+BODY" is a GET with a body; any other is sent as the verb. Bounded by
 * a 20 s timeout. Any thread may call it. */
void http_fetch(int port, const char *method, const char *path, struct http_resp *r);

/* One request q to http://127.0.0.1:port into r (overwritten). Bounded by
 * a 20 s timeout. Any thread may call it. */
void http_request(int port, const struct http_req *q, struct http_resp *r);

/* A GET (or any request, http_request_start) running on a thread of its
 * own, for requests the server holds. */
struct http_get {
    pthread_t th;
    int port;
    char path[1024];
    struct http_req q;
    struct http_resp r;
    int64_t started_ms, took_ms; /* monotonic; took_ms once it is over */
    int done;                    /* atomic; http_get_done reads it */
};

/* Starts GET path on port. Returns a new struct http_get (free() it after
 * http_get_wait or http_get_join); a failure to start fails the test. */
struct http_get *http_get_start(int port, const char *path);

/* The same for any request q: q and its path are copied, the other
 * strings it points to are not. */
struct http_get *http_request_start(int port, const struct http_req *q);

/* Whether the request is over, from any thread, without waiting. */
bool http_get_done(struct http_get *g);

/* Waits for the GET to end, however it went (r.rc says). */
void http_get_wait(struct http_get *g);

/* http_get_wait, then fails the test unless the GET completed. */
void http_get_join(struct http_get *g);

/* A client of GET /watch reading the stream on a thread of its own. The
 * test reads raw and len under mu; the client signals cv for every piece
 * that arrives and when the stream ends (done). */
struct http_sse {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int port;
    char last_id[64]; /* the Last-Event-ID sent, "" for none */
    char raw[65536];  /* the stream as received, NUL-terminated */
    size_t len;
    int fd;   /* the connection's socket while open, else -1 */
    int next; /* for the test: the first block it has not read yet */
    bool done;
    bool joined;
    struct http_resp *head; /* status, headers and rc (the body is in raw) */
};

/* Opens GET /watch on port, with Last-Event-ID: last_id unless it is NULL.
 * Returns a new client (end it with http_sse_stop); a failure to start
 * fails the test. */
struct http_sse *http_sse_start(int port, const char *last_id);

/* Waits until the stream ends by itself (the server closed it or the 30 s
 * timeout passed); head->rc then says how. s stays valid for http_sse_stop. */
void http_sse_join(struct http_sse *s);

/* Hangs up, as a client going away would (unless the stream has ended),
 * reaps the thread and frees s. */
void http_sse_stop(struct http_sse *s);

/* Blocks (events or comments, each ending in a blank line) in raw. */
int http_sse_count_blocks(const char *raw);

/* Waits until n blocks have arrived; false after timeout_ms or when the
 * stream ended with fewer. */
bool http_sse_wait_blocks(struct http_sse *s, int n, int64_t timeout_ms);

/* One block of the stream, its fields cut to fit. */
struct http_sse_block {
    bool comment; /* a line starting with ':' (a heartbeat) */
    char id[32];
    char event[32];
    char data[4096];
};

/* Block i (from 0) of what has arrived into b; false when there is none. */
bool http_sse_block(struct http_sse *s, int i, struct http_sse_block *b);

/* A TCP connection to 127.0.0.1:port that has sent nothing yet, or -1.
 * The caller closes it. */
int http_connect_idle(int port);

#endif
