/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_dispatch: what MHD calls for each request (see http_dispatch.h).
 * All of it runs on MHD's thread.
 */
#include "http_dispatch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "clock.h"
#include "http_conn.h"
#include "http_hold.h"
#include "http_paths.h"
#include "http_route.h"
#include "http_server.h"
#include "http_shards.h"

/* *con_cls of a plain request after the first handler call. */
static char request_seen;

/* allow: the Allow header's value, or NULL for none. */
static enum MHD_Result queue(struct MHD_Connection *c, unsigned int status,
                             const char *ct, const char *allow, void *body, size_t len,
                             enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    enum MHD_Result ret = MHD_NO;
    if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ct) == MHD_YES &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") ==
            MHD_YES &&
        (!allow ||
         MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow) == MHD_YES))
        ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result queue_oom(struct MHD_Connection *c)
{
    static char oom[] = "{\"error\":\"out of memory\"}";
    return queue(c, 500, LD_HTTP_CT_JSON, NULL, oom, strlen(oom), MHD_RESPMEM_PERSISTENT);
}

/* {"error": msg}; msg must be UTF-8. */
static enum MHD_Result queue_error(struct MHD_Connection *c, unsigned int status,
                                   const char *msg)
{
    json_t *o = json_pack("{s:s}", "error", msg);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return queue_oom(c);
    return queue(c, status, LD_HTTP_CT_JSON, NULL, text, strlen(text),
                 MHD_RESPMEM_MUST_FREE);
}

/* Sends r (built by rc == 0), which gives its body to the response. */
static enum MHD_Result queue_reply(struct MHD_Connection *c, int rc,
                                   struct ld_http_reply *r)
{
    if (rc != 0) {
        ld_http_reply_clear(r);
        return queue_oom(c);
    }
    const char *allow =
        r->allow ? (r->allow_methods ? r->allow_methods : "GET, HEAD") : NULL;
    enum MHD_Result ret = queue(c, r->status, r->content_type, allow, r->body, r->len,
                                MHD_RESPMEM_MUST_FREE);
    r->body = NULL; /* the response owns it now */
    return ret;
}

/* Shard mode: rq answered from the latest shard table, taken by
 * reference so that rendering it does not hold the state's mutex. */
static enum MHD_Result queue_shard_route(struct ld_http *h, struct MHD_Connection *c,
                                         const struct ld_http_shard_request *rq)
{
    struct ld_snapshot snap;
    struct ld_http_reply r;
    struct ld_shardsnap *t = ld_state_read_shards(h->st, &snap);
    int rc = ld_http_route_shards(rq, h->st->layout, &snap, t, h->m, ld_mono_ms(), &r);
    ld_shardsnap_unref(t);
    return queue_reply(c, rc, &r);
}

/* The single Lease's answer to a GET of url (/leader, after a hold). */
static enum MHD_Result queue_route(struct ld_http *h, struct MHD_Connection *c,
                                   const char *method, const char *url)
{
    struct ld_snapshot snap;
    struct ld_http_reply r;
    ld_state_read(h->st, &snap);
    return queue_reply(c, ld_http_route(method, url, &snap, h->m, ld_mono_ms(), &r), &r);
}

/* Only a process in the Pod (a loopback peer) may make this replica step
 * down: the port is often reachable from the whole cluster. */
static bool peer_may_resign(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return ci && ld_http_peer_is_loopback(ci->client_addr);
}

#define SHARD_PREFIX LD_HTTP_PATH_SHARDS "/"

/* Whether url is POST /shards/ID/drained's path. */
static bool is_drained_path(const char *url)
{
    static const char prefix[] = SHARD_PREFIX, suffix[] = LD_HTTP_PATH_DRAINED;
    size_t n = strlen(url), np = sizeof(prefix) - 1, ns = sizeof(suffix) - 1;
    return n > np + ns && strncmp(url, prefix, np) == 0 &&
           strcmp(url + n - ns, suffix) == 0;
}

/* POST /shards/ID/drained[?term=T]: the app has stopped working on shard
 * ID (of its claim of term T), so a give-back waiting for the drain may
 * write its release now. Answered at once from the state: the loop learns
 * of it through the drain channel. */
static enum MHD_Result answer_drained(struct ld_http *h, struct MHD_Connection *c,
                                      const char *url)
{
    char id[256];
    uint32_t s;
    int64_t term = -1;
    const char *t = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "term");
    if (t && ld_http_parse_count(t, &term) != 0)
        return queue_error(c, 400, "term must be a non-negative integer");
    size_t len = strlen(url) - strlen(SHARD_PREFIX) - strlen(LD_HTTP_PATH_DRAINED);
    if (len >= sizeof(id))
        return queue_error(c, 404, "no such shard");
    memcpy(id, url + strlen(SHARD_PREFIX), len);
    id[len] = '\0';
    if (!ld_shardlayout_find(h->st->layout, id, &s))
        return queue_error(c, 404, "no such shard");
    enum ld_drained_answer a = ld_state_drained_answer(h->st, s, term);
    if (a == LD_DRAINED_NOT_GIVING_BACK)
        return queue_error(c, 409, "this shard is not being given back");
    if (a == LD_DRAINED_STALE)
        return queue_error(c, 409,
                           "this shard's give-back under way is of another term; "
                           "this answer is stale");
    json_t *o =
        json_pack("{s:s,s:b}", "shard", h->st->layout->shards[s].id, "drained", 1);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return queue_oom(c);
    return queue(c, 200, LD_HTTP_CT_JSON, NULL, text, strlen(text),
                 MHD_RESPMEM_MUST_FREE);
}

/* POST /resign: waits (suspended) for the loop's outcome. */
static enum MHD_Result answer_resign(struct ld_http *h, struct MHD_Connection *c,
                                     void **con_cls)
{
    if (ld_state_resign_fd(h->st) < 0)
        return queue_error(c, 503, "resigning is not available in this process");
    struct ld_http_hold *x = ld_http_hold_resign(h->holds, c);
    if (!x)
        return queue_error(c, 503,
                           "too many POST /resign requests are waiting, or the server "
                           "is stopping");
    *con_cls = x;
    return MHD_YES;
}

static enum MHD_Result answer_resign_resumed(struct ld_http *h, struct MHD_Connection *c,
                                             struct ld_http_hold *x)
{
    struct ld_snapshot snap;
    struct ld_http_reply r;
    if (!ld_http_hold_resumed(x))
        return MHD_NO;
    enum ld_resign_outcome oc = ld_state_resign_outcome(h->st, ld_http_hold_ticket(x));
    ld_state_read(h->st, &snap);
    return queue_reply(c, ld_http_render_resign(&snap, oc, ld_mono_ms(), &r), &r);
}

struct query {
    struct ld_http_poll *want;
    int64_t max_wait_ms;
    bool failed;
    char err[192];
    /* Shard mode: /shard's key= as MHD decoded it (a form field: '+' and
     * percent-escapes undone), with its length, for keys holding NUL. */
    bool has_key;
    const char *key;
    size_t key_len;
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    struct query *q = cls;
    (void)kind;
    if (ld_http_poll_arg(q->want, key, value, q->max_wait_ms, q->err, sizeof(q->err)) ==
        0)
        return MHD_YES;
    q->failed = true;
    return MHD_NO;
}

static enum MHD_Result query_arg_n(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    struct query *q = cls;
    if (key && key_size == 3 && strcmp(key, "key") == 0) {
        if (q->has_key) {
            snprintf(q->err, sizeof(q->err), "key: given twice");
            q->failed = true;
            return MHD_NO;
        }
        q->has_key = true;
        q->key = value;
        q->key_len = value ? value_size : 0;
        return MHD_YES;
    }
    return query_arg(cls, kind, key, value);
}

/* Shard mode: GET /shards/ID and GET /shard?key=K, held as GET /leader is
 * when the caller asks to wait and has seen that shard's state already;
 * resumed (x non-NULL) it is answered, unless its client has gone. */
static enum MHD_Result answer_shard(struct ld_http *h, struct MHD_Connection *c,
                                    const char *method, const char *url, void **con_cls,
                                    struct ld_http_hold *x)
{
    struct ld_http_poll want;
    struct ld_http_target target;
    struct query q;
    ld_http_poll_init(&want);
    memset(&q, 0, sizeof(q));
    q.want = &want;
    q.max_wait_ms = h->lim.max_wait_ms;
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, query_arg_n, &q);
    struct ld_http_shard_request rq = {method, url, q.key, q.key_len};
    if (x) {
        if (!ld_http_hold_resumed(x))
            return MHD_NO;
        return queue_shard_route(h, c, &rq);
    }
    if (q.failed)
        return queue_error(c, 400, q.err);
    if (want.wait && want.wait_ms > 0 &&
        ld_http_shard_target(h->st->layout, url, q.key, q.key_len, &target) == 200) {
        x = ld_http_hold_poll_shard(h->holds, c, &want, target.shard);
        if (x) {
            *con_cls = x;
            return MHD_YES;
        }
    }
    return queue_shard_route(h, c, &rq);
}

static bool is_shard_path(const char *url)
{
    return strcmp(url, LD_HTTP_PATH_SHARD_OF_KEY) == 0 ||
           strncmp(url, SHARD_PREFIX, strlen(SHARD_PREFIX)) == 0;
}

/* GET /leader, held when the caller asks to wait and has seen the current
 * state already. */
static enum MHD_Result answer_leader(struct ld_http *h, struct MHD_Connection *c,
                                     void **con_cls)
{
    struct ld_http_poll want;
    struct query q;
    ld_http_poll_init(&want);
    memset(&q, 0, sizeof(q));
    q.want = &want;
    q.max_wait_ms = h->lim.max_wait_ms;
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, query_arg, &q);
    if (q.failed)
        return queue_error(c, 400, q.err);
    if (!want.wait || want.wait_ms <= 0)
        return queue_route(h, c, "GET", LD_HTTP_PATH_LEADER);
    struct ld_http_hold *x = ld_http_hold_poll(h->holds, c, &want);
    if (!x)
        return queue_route(h, c, "GET", LD_HTTP_PATH_LEADER);
    *con_cls = x;
    return MHD_YES;
}

/* A held poll was resumed: answer, unless its client has gone. */
static enum MHD_Result answer_resumed(struct ld_http *h, struct MHD_Connection *c,
                                      struct ld_http_hold *x)
{
    if (!ld_http_hold_resumed(x))
        return MHD_NO;
    return queue_route(h, c, "GET", LD_HTTP_PATH_LEADER);
}

static enum MHD_Result answer_watch(struct ld_http *h, struct MHD_Connection *c,
                                    const char *method, void **con_cls)
{
    static char empty[] = "";
    char msg[96];
    struct MHD_Response *resp = NULL;
    struct ld_http_hold *x = NULL;
    if (strcmp(method, "HEAD") == 0)
        return queue(c, 200, LD_HTTP_CT_SSE, NULL, empty, 0, MHD_RESPMEM_PERSISTENT);
    const char *last = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
    switch (ld_http_watch_open(h->holds, c, last, &resp, &x)) {
    case LD_HTTP_WATCH_OK:
        break;
    case LD_HTTP_WATCH_FULL:
        snprintf(msg, sizeof(msg), "too many /watch streams (limit %u)", h->lim.max_subs);
        return queue_error(c, 503, msg);
    case LD_HTTP_WATCH_STARTING:
        return queue_error(c, 503, "no state yet: leaderd is starting; retry");
    case LD_HTTP_WATCH_STOPPING:
        return queue_error(c, 503, "leaderd is stopping");
    case LD_HTTP_WATCH_NOMEM:
        return queue_oom(c);
    case LD_HTTP_WATCH_FAILED:
        return MHD_NO;
    }
    *con_cls = x;
    enum MHD_Result ret = MHD_NO;
    if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, LD_HTTP_CT_SSE) ==
            MHD_YES &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") ==
            MHD_YES &&
        MHD_add_response_header(resp, "X-Accel-Buffering", "no") == MHD_YES)
        ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ---- one route table per mode ------------------------------------------- */

static bool is_leader_path(const char *url)
{
    return strcmp(url, LD_HTTP_PATH_LEADER) == 0;
}

static bool is_watch_path(const char *url)
{
    return strcmp(url, LD_HTTP_PATH_WATCH) == 0;
}

static bool is_resign_path(const char *url)
{
    return strcmp(url, LD_HTTP_PATH_RESIGN) == 0;
}

/* How a route's request is answered once its headers (and any body) are
 * in; every answer has this shape. */
typedef enum MHD_Result (*answer_fn)(struct ld_http *h, struct MHD_Connection *c,
                                     const char *method, const char *url, void **con_cls);

/* A request the dispatch answers itself (held, streamed, or a POST to the
 * loop); the mode's renderer answers every other one. */
struct route {
    bool post; /* POST; else GET and HEAD */
    bool (*matches)(const char *url);
    answer_fn answer;
    /* The 403's message for a peer that is not on loopback (the port is
     * often reachable from the whole cluster); NULL: any peer. */
    const char *loopback_only;
};

struct ld_http_mode {
    const struct route *routes;
    size_t n_routes;
    answer_fn other;   /* the mode's renderer, for every other request */
    answer_fn resumed; /* a held long-poll resumed (*con_cls is the hold) */
    const struct ld_http_hold_mode *holds; /* what held requests show */
};

const struct ld_http_hold_mode *ld_http_mode_holds(const struct ld_http_mode *mode)
{
    return mode->holds;
}

static enum MHD_Result route_resign(struct ld_http *h, struct MHD_Connection *c,
                                    const char *method, const char *url, void **con_cls)
{
    (void)method;
    (void)url;
    return answer_resign(h, c, con_cls);
}

static enum MHD_Result route_leader(struct ld_http *h, struct MHD_Connection *c,
                                    const char *method, const char *url, void **con_cls)
{
    (void)method;
    (void)url;
    return answer_leader(h, c, con_cls);
}

static enum MHD_Result route_watch(struct ld_http *h, struct MHD_Connection *c,
                                   const char *method, const char *url, void **con_cls)
{
    (void)url;
    return answer_watch(h, c, method, con_cls);
}

static enum MHD_Result route_other(struct ld_http *h, struct MHD_Connection *c,
                                   const char *method, const char *url, void **con_cls)
{
    (void)con_cls;
    return queue_route(h, c, method, url);
}

static enum MHD_Result route_resumed(struct ld_http *h, struct MHD_Connection *c,
                                     const char *method, const char *url, void **con_cls)
{
    (void)method;
    (void)url;
    return answer_resumed(h, c, *con_cls);
}

static enum MHD_Result route_drained(struct ld_http *h, struct MHD_Connection *c,
                                     const char *method, const char *url, void **con_cls)
{
    (void)method;
    (void)con_cls;
    return answer_drained(h, c, url);
}

static enum MHD_Result route_shard(struct ld_http *h, struct MHD_Connection *c,
                                   const char *method, const char *url, void **con_cls)
{
    return answer_shard(h, c, method, url, con_cls, NULL);
}

static enum MHD_Result route_shards_other(struct ld_http *h, struct MHD_Connection *c,
                                          const char *method, const char *url,
                                          void **con_cls)
{
    (void)con_cls;
    struct ld_http_shard_request rq = {method, url, NULL, 0};
    return queue_shard_route(h, c, &rq);
}

static enum MHD_Result route_shard_resumed(struct ld_http *h, struct MHD_Connection *c,
                                           const char *method, const char *url,
                                           void **con_cls)
{
    return answer_shard(h, c, method, url, con_cls, *con_cls);
}

static const struct route lease_routes[] = {
    {true, is_resign_path, route_resign,
     "POST /resign is accepted only from a loopback peer"},
    {false, is_leader_path, route_leader, NULL},
    {false, is_watch_path, route_watch, NULL},
};

/* No POST /resign in shard mode: an unknown route. */
static const struct route shard_routes[] = {
    {true, is_drained_path, route_drained,
     "POST /shards/ID/drained is accepted only from a loopback peer"},
    {false, is_shard_path, route_shard, NULL},
    {false, is_watch_path, route_watch, NULL},
};

const struct ld_http_mode ld_http_lease_mode = {
    lease_routes, sizeof(lease_routes) / sizeof(lease_routes[0]), route_other,
    route_resumed, &ld_http_hold_lease_mode};

const struct ld_http_mode ld_http_shard_mode = {
    shard_routes, sizeof(shard_routes) / sizeof(shard_routes[0]), route_shards_other,
    route_shard_resumed, &ld_http_hold_shard_mode};

static const struct route *find_route(const struct ld_http_mode *mode, bool plain,
                                      bool post, const char *url)
{
    for (size_t i = 0; i < mode->n_routes; i++) {
        const struct route *r = &mode->routes[i];
        if ((r->post ? post : plain) && r->matches(url))
            return r;
    }
    return NULL;
}

enum MHD_Result ld_http_dispatch(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    struct ld_http *h = cls;
    (void)version;
    (void)upload_data;
    if (*con_cls && *con_cls != &request_seen) {
        struct ld_http_hold *x = *con_cls;
        if (ld_http_hold_is_resign(x))
            return answer_resign_resumed(h, c, x);
        if (ld_http_hold_is_poll(x))
            return h->mode->resumed(h, c, method, url, con_cls);
        return MHD_NO;
    }
    /* MHD keeps a connection alive only when the reply is queued after the
     * first call (which just announces the headers) and after any body,
     * which GET, HEAD and the POST routes ignore. Other methods are refused
     * at once: their body is never read and MHD closes the connection after
     * the 405; so is a POST from a peer that may not send it. */
    bool plain = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    const struct route *r = find_route(h->mode, plain, strcmp(method, "POST") == 0, url);
    if (*con_cls == NULL) {
        ld_http_conns_busy(h->conns, c);
        if (r && r->loopback_only && !peer_may_resign(c))
            return queue_error(c, 403, r->loopback_only);
        if (plain || r) {
            *con_cls = &request_seen;
            return MHD_YES;
        }
    }
    if ((plain || r) && *upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r)
        return r->answer(h, c, method, url, con_cls);
    return h->mode->other(h, c, method, url, con_cls);
}

void ld_http_dispatch_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                                enum MHD_RequestTerminationCode toe)
{
    struct ld_http *h = cls;
    (void)toe;
    if (*con_cls && *con_cls != &request_seen)
        ld_http_hold_release(*con_cls);
    ld_http_conns_idle(h->conns, c);
    *con_cls = NULL;
}
