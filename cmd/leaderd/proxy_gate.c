/*
 * proxy_gate: the write gate's decisions (see proxy_gate.h).
 */
#include "proxy_gate.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

bool ld_proxy_is_read(const char *method)
{
    return method && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
                      strcmp(method, "OPTIONS") == 0);
}

/* True when the comma-separated list holds token (case-insensitive,
 * surrounding blanks ignored). */
static bool list_has(const char *list, const char *token)
{
    size_t tlen = strlen(token);
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        size_t m = n;
        while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t'))
            m--;
        if (m == tlen && strncasecmp(p, token, tlen) == 0)
            return true;
        p += n;
    }
    return false;
}

/* A Pod subresource that needs a connection upgrade:
 * /api/v1/namespaces/NS/pods/NAME/{exec,attach,portforward}. */
static bool upgrade_path(const char *target)
{
    static const char prefix[] = "/api/v1/namespaces/";
    static const char *const subs[] = {"exec", "attach", "portforward"};
    if (!target || strncmp(target, prefix, sizeof(prefix) - 1) != 0)
        return false;
    size_t end = strcspn(target, "?#");
    const char *p = target + sizeof(prefix) - 1;
    const char *stop = target + end;
    /* Segments after the prefix: NS, "pods", NAME, SUB. */
    const char *seg[5];
    size_t len[5];
    int n = 0;
    while (p < stop && n < 5) {
        const char *slash = memchr(p, '/', (size_t)(stop - p));
        const char *e = slash ? slash : stop;
        seg[n] = p;
        len[n] = (size_t)(e - p);
        n++;
        p = slash ? slash + 1 : stop;
    }
    if (n != 4 || len[1] != 4 || strncmp(seg[1], "pods", 4) != 0)
        return false;
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (len[3] == strlen(subs[i]) && strncmp(seg[3], subs[i], len[3]) == 0)
            return true;
    return false;
}

bool ld_proxy_is_upgrade(const struct ld_proxy_req *req)
{
    if (req->upgrade && req->upgrade[0])
        return true;
    if (list_has(req->connection, "upgrade"))
        return true;
    if (req->method && strcmp(req->method, "CONNECT") == 0)
        return true;
    return upgrade_path(req->target);
}

static bool hop_by_hop(const char *name, const char *connection)
{
    static const char *const hop[] = {"Connection", "Keep-Alive", "Proxy-Connection",
                                      "TE",         "Trailer",    "Transfer-Encoding",
                                      "Upgrade"};
    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (strcasecmp(name, hop[i]) == 0)
            return true;
    /* Proxy-Authorization, Proxy-Authenticate and the like. */
    if (strncasecmp(name, "Proxy-", 6) == 0)
        return true;
    return list_has(connection, name);
}

bool ld_proxy_forward_request_header(const char *name, const char *connection)
{
    static const char *const own[] = {"Authorization", "Host", "Content-Length", "Expect",
                                      LD_PROXY_SHARD_HEADER};
    if (!name || !name[0])
        return false;
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcasecmp(name, own[i]) == 0)
            return false;
    return !hop_by_hop(name, connection);
}

bool ld_proxy_forward_response_header(const char *name, const char *connection)
{
    if (!name || !name[0] || strcasecmp(name, "Content-Length") == 0)
        return false;
    return !hop_by_hop(name, connection);
}

static void answer(struct ld_proxy_verdict *out, unsigned int status, const char *reason,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void answer(struct ld_proxy_verdict *out, unsigned int status, const char *reason,
                   const char *fmt, ...)
{
    va_list ap;
    out->status = status;
    out->reason = reason;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof(out->message), fmt, ap);
    va_end(ap);
}

/* Fills out with the refusal for the Lease of v (single mode). */
static void refuse_single(const struct ld_proxy_view *v, struct ld_proxy_verdict *out)
{
    const struct ld_snapshot *s = v->snap;
    out->refused = true;
    if (!s->observed)
        answer(out, 503, "ServiceUnavailable",
               "write refused by leaderd: %s has not observed the Lease %s yet",
               s->identity, s->lease);
    else if (!s->leader[0])
        answer(out, 503, "ServiceUnavailable",
               "write refused by leaderd: nobody holds the Lease %s; %s is not the "
               "leader",
               s->lease, s->identity);
    else if (strcmp(s->leader, s->identity) == 0)
        answer(out, 503, "ServiceUnavailable",
               "write refused by leaderd: the leadership of %s by %s (this replica) "
               "has lapsed: not renewed in time",
               s->lease, s->identity);
    else
        answer(out, 503, "ServiceUnavailable",
               "write refused by leaderd: %s is not the leader of the Lease %s; the "
               "holder is %s",
               s->identity, s->lease, s->leader);
}

static void refuse_shard(const struct ld_proxy_view *v, uint32_t shard,
                         struct ld_proxy_verdict *out)
{
    const char *id = ld_shardgroup_shard_id(v->group, shard);
    const char *lease = ld_shardgroup_shard_lease(v->group, shard);
    const struct ld_shard_entry *e =
        v->shards && shard < v->shards->n_shards ? &v->shards->shards[shard] : NULL;
    out->refused = true;
    if (!e || !e->observed)
        answer(out, 503, "ServiceUnavailable",
               "write refused by leaderd: %s has not observed shard %s (Lease %s) yet",
               v->snap->identity, id, lease);
    else if (!e->leader[0])
        answer(out, 503, "ServiceUnavailable",
               "write refused by leaderd: nobody holds shard %s (Lease %s); %s does not "
               "own it",
               id, lease, v->snap->identity);
    else if (strcmp(e->leader, v->snap->identity) == 0)
        answer(out, 503, "ServiceUnavailable",
               "write refused by leaderd: the ownership of shard %s (Lease %s) by %s "
               "(this replica) has lapsed: not renewed in time",
               id, lease, v->snap->identity);
    else
        answer(out, 503, "ServiceUnavailable",
               "write refused by leaderd: %s does not own shard %s (Lease %s); the "
               "holder is %s",
               v->snap->identity, id, lease, e->leader);
}

static bool leads(const struct ld_proxy_view *v, uint32_t shard, int64_t now_ms)
{
    if (!v->group)
        return ld_snapshot_is_leader(v->snap, now_ms);
    return v->shards && shard < v->shards->n_shards &&
           ld_shard_entry_is_leader(&v->shards->shards[shard], now_ms);
}

void ld_proxy_decide(const struct ld_proxy_req *req, const struct ld_proxy_view *v,
                     int64_t now_ms, struct ld_proxy_verdict *out)
{
    memset(out, 0, sizeof(*out));
    if (ld_proxy_is_upgrade(req)) {
        answer(out, 501, "NotImplemented",
               "leaderd's API proxy does not forward upgraded connections (exec, "
               "attach, port-forward, websockets)");
        return;
    }
    if (req->has_length && req->content_length > LD_PROXY_MAX_BODY) {
        answer(out, 413, "RequestEntityTooLarge",
               "request body of %llu bytes is larger than leaderd's API proxy allows "
               "(%d bytes)",
               (unsigned long long)req->content_length, LD_PROXY_MAX_BODY);
        return;
    }
    if (ld_proxy_is_read(req->method))
        return;
    out->write = true;
    if (v->group) {
        if (!req->shard || !req->shard[0]) {
            answer(out, 400, "BadRequest",
                   "leaderd runs a shard group: a write through its API proxy must name "
                   "its shard in the " LD_PROXY_SHARD_HEADER " header");
            return;
        }
        if (!ld_shardgroup_find(v->group, req->shard, &out->shard)) {
            answer(out, 404, "NotFound", "no shard \"%.200s\" in the shard group %s",
                   req->shard, ld_shardgroup_name(v->group));
            return;
        }
    }
    if (leads(v, out->shard, now_ms))
        return;
    if (v->group)
        refuse_shard(v, out->shard, out);
    else
        refuse_single(v, out);
}

bool ld_proxy_still_leads(const struct ld_proxy_verdict *passed,
                          const struct ld_proxy_view *v, int64_t now_ms,
                          struct ld_proxy_verdict *refusal)
{
    if (!passed->write || leads(v, passed->shard, now_ms))
        return true;
    if (refusal) {
        memset(refusal, 0, sizeof(*refusal));
        refusal->write = true;
        refusal->shard = passed->shard;
        if (v->group)
            refuse_shard(v, passed->shard, refusal);
        else
            refuse_single(v, refusal);
    }
    return false;
}

int64_t ld_proxy_lead_until(const struct ld_proxy_verdict *passed,
                            const struct ld_proxy_view *v)
{
    if (!v->group)
        return v->snap->leading ? v->snap->lead_until_ms : INT64_MIN;
    if (!v->shards || passed->shard >= v->shards->n_shards ||
        !v->shards->shards[passed->shard].leading)
        return INT64_MIN;
    return v->shards->shards[passed->shard].lead_until_ms;
}

char *ld_proxy_status_json(unsigned int code, const char *reason, const char *message)
{
    json_t *o = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status",
                          "apiVersion", "v1", "metadata", "status", "Failure", "message",
                          message ? message : "", "reason", reason ? reason : "", "code",
                          (json_int_t)code);
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
