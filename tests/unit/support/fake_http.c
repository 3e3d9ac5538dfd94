/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_http: the scripted server of fake_http.h on libmicrohttpd.
 */
#include "fake_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#define FAKE_HTTP_MAX_SCRIPT 64
#define FAKE_HTTP_MAX_REQUESTS 256
#define FAKE_HTTP_MAX_UPLOAD (2 * 1024 * 1024)

struct fake_http_script_entry {
    struct fake_http_response r;
    char *body;
    char *header_name, *header_value;
};

struct fake_http {
    struct MHD_Daemon *d;
    int port;
    char url[64];
    char *key, *cert;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    bool released; /* fake_http_release was called */
    struct fake_http_script_entry script[FAKE_HTTP_MAX_SCRIPT];
    int script_head, script_len;
    char *require_auth;
    int connections;
    struct fake_http_request requests[FAKE_HTTP_MAX_REQUESTS];
    int nrequests;
};

/* Per-request upload accumulator (MHD's con_cls). */
struct fake_http_upload {
    char *buf;
    size_t len;
};

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static void on_connection(void *cls, struct MHD_Connection *c, void **sock_ctx,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct fake_http *f = cls;
    (void)c;
    (void)sock_ctx;
    if (toe != MHD_CONNECTION_NOTIFY_STARTED)
        return;
    pthread_mutex_lock(&f->mu);
    f->connections++;
    pthread_mutex_unlock(&f->mu);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct fake_http_upload *u = *con_cls;
    if (u) {
        free(u->buf);
        free(u);
        *con_cls = NULL;
    }
}

static enum MHD_Result respond(struct MHD_Connection *c, int status, const char *body,
                               size_t len, const char *hname, const char *hvalue)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (void *)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    if (hname && hvalue)
        MHD_add_response_header(resp, hname, hvalue);
    enum MHD_Result r = MHD_queue_response(c, (unsigned int)status, resp);
    MHD_destroy_response(resp);
    return r;
}

/* Waits ms on f->cv unless the server stops; f->mu is held. */
static void wait_locked(struct fake_http *f, int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    while (!f->stopping && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&f->cv, &f->mu, &until);
}

/* A body sent in pieces: MHD asks for the next one on the connection's
 * thread, which may wait between them. */
struct fake_http_pieces {
    struct fake_http *f;
    const struct fake_http_script_entry *e;
    size_t off;
};

static ssize_t next_piece(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct fake_http_pieces *p = cls;
    (void)pos;
    if (p->off >= p->e->r.body_len)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (p->off > 0 && p->e->r.chunk_delay_ms > 0) {
        pthread_mutex_lock(&p->f->mu);
        wait_locked(p->f, p->e->r.chunk_delay_ms);
        bool stopping = p->f->stopping;
        pthread_mutex_unlock(&p->f->mu);
        if (stopping)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = p->e->r.body_len - p->off;
    if (n > (size_t)p->e->r.chunk_size)
        n = (size_t)p->e->r.chunk_size;
    if (n > max)
        n = max;
    memcpy(buf, p->e->body + p->off, n);
    p->off += n;
    return (ssize_t)n;
}

static enum MHD_Result respond_in_pieces(struct fake_http *f, struct MHD_Connection *c,
                                         const struct fake_http_script_entry *e)
{
    struct fake_http_pieces *p = calloc(1, sizeof(*p));
    if (!p)
        return MHD_NO;
    p->f = f;
    p->e = e;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, next_piece, p, free);
    if (!resp) {
        free(p);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result r = MHD_queue_response(c, (unsigned int)e->r.status, resp);
    MHD_destroy_response(resp);
    return r;
}

static void record(struct fake_http *f, struct MHD_Connection *c, const char *url,
                   const char *method, const struct fake_http_upload *u)
{
    if (f->nrequests >= FAKE_HTTP_MAX_REQUESTS)
        return;
    struct fake_http_request *r = &f->requests[f->nrequests];
    memset(r, 0, sizeof(*r));
    copy_str(r->method, sizeof(r->method), method);
    copy_str(r->path, sizeof(r->path), url);
    copy_str(r->timeout_arg, sizeof(r->timeout_arg),
             MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "timeout"));
    copy_str(r->label_selector, sizeof(r->label_selector),
             MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "labelSelector"));
    copy_str(r->authorization, sizeof(r->authorization),
             MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"));
    copy_str(r->user_agent, sizeof(r->user_agent),
             MHD_lookup_connection_value(c, MHD_HEADER_KIND, "User-Agent"));
    copy_str(r->accept, sizeof(r->accept),
             MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept"));
    copy_str(r->content_type, sizeof(r->content_type),
             MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"));
    r->body = strndup(u->buf ? u->buf : "", u->len);
    r->body_len = r->body ? u->len : 0;
    f->nrequests++;
    pthread_cond_broadcast(&f->cv);
}

static const char status_401[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}";

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct fake_http *f = cls;
    (void)version;
    struct fake_http_upload *u = *con_cls;

    if (!u) {
        u = calloc(1, sizeof(*u));
        if (!u)
            return MHD_NO;
        *con_cls = u;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        if (u->len + n > FAKE_HTTP_MAX_UPLOAD)
            return MHD_NO;
        char *nb = realloc(u->buf, u->len + n + 1);
        if (!nb)
            return MHD_NO;
        memcpy(nb + u->len, upload_data, n);
        u->buf = nb;
        u->len += n;
        u->buf[u->len] = '\0';
        *upload_data_size = 0;
        return MHD_YES;
    }

    pthread_mutex_lock(&f->mu);
    record(f, c, url, method, u);
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (f->require_auth && (!auth || strcmp(auth, f->require_auth) != 0)) {
        pthread_mutex_unlock(&f->mu);
        return respond(c, 401, status_401, strlen(status_401), NULL, NULL);
    }
    if (f->script_head >= f->script_len) {
        pthread_mutex_unlock(&f->mu);
        return respond(c, 500, "script exhausted", 16, NULL, NULL);
    }
    struct fake_http_script_entry *e = &f->script[f->script_head++];
    if (e->r.delay_ms > 0)
        wait_locked(f, e->r.delay_ms);
    while (e->r.hold && !f->released && !f->stopping)
        pthread_cond_wait(&f->cv, &f->mu);
    /* Script entries stay valid until stop, so no copy is needed. */
    pthread_mutex_unlock(&f->mu);
    if (e->r.chunk_size > 0)
        return respond_in_pieces(f, c, e);
    return respond(c, e->r.status, e->body, e->r.body_len, e->header_name,
                   e->header_value);
}

void fake_http_release(struct fake_http *f)
{
    pthread_mutex_lock(&f->mu);
    f->released = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

struct fake_http *fake_http_start(const char *key_pem, const char *cert_pem)
{
    struct fake_http *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
    bool tls = key_pem && cert_pem;
    if (tls) {
        f->key = strdup(key_pem);
        f->cert = strdup(cert_pem);
        if (!f->key || !f->cert)
            goto fail;
        f->d = MHD_start_daemon(
            flags | MHD_USE_TLS, 0, NULL, NULL, on_request, f, MHD_OPTION_SOCK_ADDR,
            (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_CONNECTION, on_connection, f,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, f, MHD_OPTION_HTTPS_MEM_KEY,
            f->key, MHD_OPTION_HTTPS_MEM_CERT, f->cert, MHD_OPTION_END);
    } else {
        f->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, f, MHD_OPTION_SOCK_ADDR,
                                (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_CONNECTION,
                                on_connection, f, MHD_OPTION_NOTIFY_COMPLETED,
                                on_completed, f, MHD_OPTION_END);
    }
    if (!f->d)
        goto fail;
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT);
    if (!info || info->port == 0)
        goto fail;
    f->port = info->port;
    snprintf(f->url, sizeof(f->url), "%s://127.0.0.1:%d", tls ? "https" : "http",
             f->port);
    return f;
fail:
    fake_http_stop(f);
    return NULL;
}

void fake_http_stop(struct fake_http *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->stopping = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    if (f->d)
        MHD_stop_daemon(f->d);
    for (int i = 0; i < f->script_len; i++) {
        free(f->script[i].body);
        free(f->script[i].header_name);
        free(f->script[i].header_value);
    }
    for (int i = 0; i < f->nrequests; i++)
        free(f->requests[i].body);
    free(f->require_auth);
    free(f->key);
    free(f->cert);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

int fake_http_port(const struct fake_http *f)
{
    return f->port;
}

const char *fake_http_url(const struct fake_http *f)
{
    return f->url;
}

void fake_http_push(struct fake_http *f, const struct fake_http_response *r)
{
    pthread_mutex_lock(&f->mu);
    if (f->script_len < FAKE_HTTP_MAX_SCRIPT) {
        struct fake_http_script_entry *e = &f->script[f->script_len];
        e->r = *r;
        size_t len = r->body ? (r->body_len ? r->body_len : strlen(r->body)) : 0;
        e->body = malloc(len + 1);
        if (e->body) {
            if (len)
                memcpy(e->body, r->body, len);
            e->body[len] = '\0';
        }
        e->r.body_len = e->body ? len : 0;
        e->header_name = r->header_name ? strdup(r->header_name) : NULL;
        e->header_value = r->header_value ? strdup(r->header_value) : NULL;
        f->script_len++;
    }
    pthread_mutex_unlock(&f->mu);
}

void fake_http_require_auth(struct fake_http *f, const char *authorization)
{
    pthread_mutex_lock(&f->mu);
    free(f->require_auth);
    f->require_auth = authorization ? strdup(authorization) : NULL;
    pthread_mutex_unlock(&f->mu);
}

int fake_http_connections(struct fake_http *f)
{
    pthread_mutex_lock(&f->mu);
    int n = f->connections;
    pthread_mutex_unlock(&f->mu);
    return n;
}

int fake_http_request_count(struct fake_http *f)
{
    pthread_mutex_lock(&f->mu);
    int n = f->nrequests;
    pthread_mutex_unlock(&f->mu);
    return n;
}

bool fake_http_request_at(struct fake_http *f, int i, struct fake_http_request *out)
{
    bool ok = false;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&f->mu);
    if (i >= 0 && i < f->nrequests) {
        *out = f->requests[i];
        out->body = strndup(f->requests[i].body ? f->requests[i].body : "",
                            f->requests[i].body_len);
        ok = out->body != NULL;
    }
    pthread_mutex_unlock(&f->mu);
    return ok;
}

void fake_http_request_clear(struct fake_http_request *r)
{
    if (r) {
        free(r->body);
        memset(r, 0, sizeof(*r));
    }
}

bool fake_http_wait_requests(struct fake_http *f, int n, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&f->mu);
    int rc = 0;
    while (f->nrequests < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&f->cv, &f->mu, &until);
    bool ok = f->nrequests >= n;
    pthread_mutex_unlock(&f->mu);
    return ok;
}
