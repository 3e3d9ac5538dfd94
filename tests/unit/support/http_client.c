/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_client: the libcurl and socket clients of http_client.h.
 */
#include "http_client.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

size_t http_resp_on_body(char *p, size_t size, size_t n, void *ud)
{
    struct http_resp *r = ud;
    size_t len = size * n;
    if (!r->first_ms)
        r->first_ms = ld_mono_ms();
    if (len > sizeof(r->body) - 1 - r->len)
        return 0;
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = '\0';
    return len;
}

static void header_value(const char *line, size_t len, const char *name, char *out,
                         size_t outlen)
{
    size_t n = strlen(name);
    if (len <= n + 1 || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return;
    const char *v = line + n + 1;
    const char *end = line + len;
    while (v < end && *v == ' ')
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n'))
        end--;
    snprintf(out, outlen, "%.*s", (int)(end - v), v);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct http_resp *r = ud;
    /* The line ends in "\r\n", so strtol stops inside it. */
    if (size * n > 12 && strncmp(p, "HTTP/1.", 7) == 0 && p[8] == ' ')
        r->status = strtol(p + 9, NULL, 10);
    header_value(p, size * n, "Content-Type", r->ctype, sizeof(r->ctype));
    header_value(p, size * n, "Allow", r->allow, sizeof(r->allow));
    header_value(p, size * n, "Cache-Control", r->cache, sizeof(r->cache));
    return size * n;
}

/* http_request's header callback: the headers every answer keeps, and the
 * one the request named. */
struct req_head {
    struct http_resp *r;
    const char *name;
};

static size_t on_req_header(char *p, size_t size, size_t n, void *ud)
{
    struct req_head *h = ud;
    if (h->name)
        header_value(p, size * n, h->name, h->r->header, sizeof(h->r->header));
    return on_header(p, size * n, 1, h->r);
}

/* The request's options on c; false when the headers cannot be built. */
static bool set_request(CURL *c, const struct http_req *q, struct curl_slist **headers)
{
    for (int i = 0; q->headers[i]; i++) {
        struct curl_slist *h = curl_slist_append(*headers, q->headers[i]);
        if (!h)
            return false;
        *headers = h;
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *headers);
    if (q->request_target)
        curl_easy_setopt(c, CURLOPT_REQUEST_TARGET, q->request_target);
    if (q->body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body);
    if (q->method && strcmp(q->method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (q->method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
    return true;
}

void http_request(int port, const struct http_req *q, struct http_resp *r)
{
    char *url = NULL;
    struct curl_slist *headers = NULL;
    struct req_head head = {.r = r, .name = q->read_header};
    memset(r, 0, sizeof(*r));
    r->rc = CURLE_FAILED_INIT;
    CURL *c = curl_easy_init();
    if (c && asprintf(&url, "http://127.0.0.1:%d%s", port, q->path) >= 0 &&
        set_request(c, q, &headers)) {
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_resp_on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_req_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &head);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROXY, "");
        int64_t t0 = ld_mono_ms();
        r->rc = curl_easy_perform(c);
        r->took_ms = ld_mono_ms() - t0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &r->uploaded);
    }
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
    free(url);
}

void http_fetch(int port, const char *method, const char *path, struct http_resp *r)
{
    struct http_req q = {.method = method, .path = path};
    if (method && strcmp(method, "POST") == 0)
        q.body = "{\"x\":1}";
    else if (method && strcmp(method, "GET+BODY") == 0) {
        q.method = "GET";
        q.body = "ignored";
    }
    http_request(port, &q, r);
}

/* ---- a GET on its own thread ---- */

static void *get_main(void *arg)
{
    struct http_get *g = arg;
    http_request(g->port, &g->q, &g->r);
    g->took_ms = ld_mono_ms() - g->started_ms;
    __atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

struct http_get *http_request_start(int port, const struct http_req *q)
{
    struct http_get *g = calloc(1, sizeof(*g));
    ck_assert_ptr_nonnull(g);
    g->port = port;
    g->q = *q;
    snprintf(g->path, sizeof(g->path), "%s", q->path);
    g->q.path = g->path;
    g->started_ms = ld_mono_ms();
    ck_assert_int_eq(pthread_create(&g->th, NULL, get_main, g), 0);
    return g;
}

struct http_get *http_get_start(int port, const char *path)
{
    return http_request_start(port, &(struct http_req){.path = path});
}

bool http_get_done(struct http_get *g)
{
    return __atomic_load_n(&g->done, __ATOMIC_ACQUIRE) != 0;
}

void http_get_wait(struct http_get *g)
{
    pthread_join(g->th, NULL);
}

void http_get_join(struct http_get *g)
{
    http_get_wait(g);
    ck_assert_msg(g->r.rc == CURLE_OK, "GET %s: %s", g->path,
                  curl_easy_strerror(g->r.rc));
}

/* ---- a /watch stream on its own thread ---- */

static size_t sse_on_body(char *p, size_t size, size_t n, void *ud)
{
    struct http_sse *s = ud;
    size_t len = size * n;
    pthread_mutex_lock(&s->mu);
    if (len > sizeof(s->raw) - 1 - s->len)
        len = 0;
    memcpy(s->raw + s->len, p, len);
    s->len += len;
    s->raw[s->len] = '\0';
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return len == size * n ? len : 0;
}

/* The socket is recorded so that http_sse_stop can hang up on it. */
static curl_socket_t sse_open_socket(void *ud, curlsocktype purpose,
                                     struct curl_sockaddr *a)
{
    struct http_sse *s = ud;
    (void)purpose;
    int fd = socket(a->family, a->socktype, a->protocol);
    pthread_mutex_lock(&s->mu);
    s->fd = fd;
    pthread_mutex_unlock(&s->mu);
    return fd;
}

static int sse_close_socket(void *ud, curl_socket_t fd)
{
    struct http_sse *s = ud;
    pthread_mutex_lock(&s->mu);
    s->fd = -1;
    pthread_mutex_unlock(&s->mu);
    return close(fd);
}

static void *sse_main(void *arg)
{
    struct http_sse *s = arg;
    char url[128], hdr[128];
    struct curl_slist *headers = NULL;
    CURL *c = curl_easy_init();
    s->head->rc = CURLE_FAILED_INIT;
    if (c) {
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/watch", s->port);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sse_on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, s->head);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, sse_open_socket);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, s);
        curl_easy_setopt(c, CURLOPT_CLOSESOCKETFUNCTION, sse_close_socket);
        curl_easy_setopt(c, CURLOPT_CLOSESOCKETDATA, s);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROXY, "");
        if (s->last_id[0]) {
            snprintf(hdr, sizeof(hdr), "Last-Event-ID: %s", s->last_id);
            headers = curl_slist_append(headers, hdr);
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        }
        s->head->rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s->head->status);
        curl_easy_cleanup(c);
        curl_slist_free_all(headers);
    }
    pthread_mutex_lock(&s->mu);
    s->done = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

struct http_sse *http_sse_start(int port, const char *last_id)
{
    struct http_sse *s = calloc(1, sizeof(*s));
    ck_assert_ptr_nonnull(s);
    s->head = calloc(1, sizeof(*s->head));
    ck_assert_ptr_nonnull(s->head);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->port = port;
    s->fd = -1;
    snprintf(s->last_id, sizeof(s->last_id), "%s", last_id ? last_id : "");
    ck_assert_int_eq(pthread_create(&s->th, NULL, sse_main, s), 0);
    return s;
}

void http_sse_join(struct http_sse *s)
{
    pthread_join(s->th, NULL);
    s->joined = true;
}

void http_sse_stop(struct http_sse *s)
{
    if (!s->joined) {
        pthread_mutex_lock(&s->mu);
        if (s->fd >= 0)
            shutdown(s->fd, SHUT_RDWR);
        pthread_mutex_unlock(&s->mu);
        http_sse_join(s);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->head);
    free(s);
}

int http_sse_count_blocks(const char *raw)
{
    int n = 0;
    for (const char *p = strstr(raw, "\n\n"); p; p = strstr(p + 2, "\n\n"))
        n++;
    return n;
}

bool http_sse_wait_blocks(struct http_sse *s, int n, int64_t timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    while (http_sse_count_blocks(s->raw) < n && !s->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->cv, &s->mu, &dl);
    bool ok = http_sse_count_blocks(s->raw) >= n;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

bool http_sse_block(struct http_sse *s, int i, struct http_sse_block *b)
{
    char copy[sizeof(s->raw)];
    memset(b, 0, sizeof(*b));
    pthread_mutex_lock(&s->mu);
    memcpy(copy, s->raw, s->len + 1);
    pthread_mutex_unlock(&s->mu);
    char *p = copy;
    for (int k = 0; k < i && p; k++) {
        p = strstr(p, "\n\n");
        p = p ? p + 2 : NULL;
    }
    char *end = p ? strstr(p, "\n\n") : NULL;
    if (!end)
        return false;
    *end = '\0';
    char *save = NULL;
    for (char *line = strtok_r(p, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == ':')
            b->comment = true;
        else if (strncmp(line, "id: ", 4) == 0)
            snprintf(b->id, sizeof(b->id), "%s", line + 4);
        else if (strncmp(line, "event: ", 7) == 0)
            snprintf(b->event, sizeof(b->event), "%s", line + 7);
        else if (strncmp(line, "data: ", 6) == 0)
            snprintf(b->data, sizeof(b->data), "%s", line + 6);
    }
    return true;
}

int http_connect_idle(int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}
