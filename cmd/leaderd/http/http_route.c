/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_route: the route table and renderers, the /healthz judgement and
 * the long-poll argument parser (see http_route.h). Each answer is built
 * from the snapshot it is given, so one server can later serve several
 * elections from several snapshots.
 */
#include "http_route.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "http_paths.h"
#include "metrics.h"
#include "timefmt.h"

json_t *ld_http_leader_json(const struct ld_snapshot *snap, int64_t now_ms)
{
    char ts[LD_MICROTIME_LEN];
    json_t *renewed = snap->has_renewed_at
                          ? json_string(ld_microtime_format(snap->renewed_at_us, ts))
                          : json_null();
    /* "o" steals renewed, also when packing fails. */
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:b, s:I, s:o, s:b}", "lease", snap->lease, "identity",
                  snap->identity, "leader", snap->leader, "is_leader",
                  ld_snapshot_is_leader(snap, now_ms), "term", (json_int_t)snap->term,
                  "renewed_at", renewed, "observed", snap->observed);
    if (!o)
        return NULL;
    if (json_object_set_new(o, "pod_label",
                            snap->pod_label[0] ? json_string(snap->pod_label)
                                               : json_null()) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *ld_http_render_leader(const struct ld_snapshot *snap, int64_t now_ms)
{
    json_t *o = ld_http_leader_json(snap, now_ms);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

bool ld_http_healthy(const struct ld_snapshot *snap, int64_t now_ms, char *why,
                     size_t whylen)
{
    char scratch[1];
    if (!why) {
        why = scratch;
        whylen = sizeof(scratch);
    }
    if (snap->health_error[0] != '\0') {
        snprintf(why, whylen, "%s", snap->health_error);
        return false;
    }
    if (snap->stale_after_ms > 0 && now_ms - snap->heartbeat_ms > snap->stale_after_ms) {
        snprintf(why, whylen,
                 "election loop stalled: its last pass was %lld ms ago (limit %lld ms)",
                 (long long)(now_ms - snap->heartbeat_ms),
                 (long long)snap->stale_after_ms);
        return false;
    }
    if (snap->stale_after_ms > 0 && snap->leading &&
        now_ms - snap->lead_until_ms > snap->stale_after_ms) {
        snprintf(
            why, whylen,
            "leader stopped renewing: leadership lapsed %lld ms ago and the election "
            "loop still claims it",
            (long long)(now_ms - snap->lead_until_ms));
        return false;
    }
    snprintf(why, whylen, "ok");
    return true;
}

void ld_http_reply_clear(struct ld_http_reply *r)
{
    if (!r)
        return;
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static int reply_text(struct ld_http_reply *out, unsigned int status, const char *ct,
                      const char *text)
{
    out->status = status;
    out->content_type = ct;
    out->body = strdup(text);
    if (!out->body)
        return -1;
    out->len = strlen(text);
    return 0;
}

int ld_http_reply_owned(struct ld_http_reply *out, unsigned int status, const char *ct,
                        char *body)
{
    if (!body)
        return -1;
    out->status = status;
    out->content_type = ct;
    out->body = body;
    out->len = strlen(body);
    return 0;
}

char *ld_http_sse_frame(bool with_id, uint64_t id, const char *event, char *json,
                        size_t *len)
{
    char idline[40] = "";
    char *text = NULL;
    if (!json)
        return NULL;
    if (with_id)
        snprintf(idline, sizeof(idline), "id: %" PRIu64 "\n", id);
    int n = asprintf(&text, "%sevent: %s\ndata: %s\n\n", idline, event, json);
    free(json);
    if (n < 0)
        return NULL;
    *len = (size_t)n;
    return text;
}

char *ld_http_render_event(bool with_id, uint64_t id, const struct ld_snapshot *snap,
                           int64_t now_ms, size_t *len)
{
    return ld_http_sse_frame(with_id, id, "leader", ld_http_render_leader(snap, now_ms),
                             len);
}

enum route {
    R_NONE,
    R_LEADER,
    R_WATCH,
    R_HEALTHZ,
    R_READYZ,
    R_METRICS,
    R_ROOT,
    R_RESIGN
};

static enum route find_route(const char *path)
{
    static const struct {
        const char *path;
        enum route r;
    } table[] = {{LD_HTTP_PATH_LEADER, R_LEADER},   {LD_HTTP_PATH_WATCH, R_WATCH},
                 {LD_HTTP_PATH_HEALTHZ, R_HEALTHZ}, {LD_HTTP_PATH_READYZ, R_READYZ},
                 {LD_HTTP_PATH_METRICS, R_METRICS}, {LD_HTTP_PATH_ROOT, R_ROOT},
                 {LD_HTTP_PATH_RESIGN, R_RESIGN}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(path, table[i].path) == 0)
            return table[i].r;
    }
    return R_NONE;
}

/* {"error": msg} with status; msg must be UTF-8. */
int ld_http_reply_error(struct ld_http_reply *out, unsigned int status, const char *msg)
{
    json_t *o = json_pack("{s:s}", "error", msg);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return ld_http_reply_owned(out, status, LD_HTTP_CT_JSON, text);
}

int ld_http_reply_metrics(struct ld_http_reply *out, struct ld_metrics *m,
                          const struct ld_snapshot *snap, const struct ld_shardlayout *l,
                          const struct ld_shardsnap *t, int64_t now_ms)
{
    struct ld_metrics empty;
    char *text = NULL;
    size_t len = 0;
    if (!m) {
        ld_metrics_init(&empty);
        m = &empty;
    }
    int rc = ld_metrics_render_shards(m, snap, l, t, now_ms, &text, &len);
    if (m == &empty)
        ld_metrics_destroy(&empty);
    if (rc != 0)
        return -1;
    out->status = 200;
    out->content_type = LD_HTTP_CT_METRICS;
    out->body = text;
    out->len = len;
    return 0;
}

int ld_http_render_resign(const struct ld_snapshot *snap, enum ld_resign_outcome oc,
                          int64_t now_ms, struct ld_http_reply *out)
{
    char msg[LD_LEASE_MAX_HOLDER + 128];
    memset(out, 0, sizeof(*out));
    switch (oc) {
    case LD_RESIGN_RELEASED:
        return ld_http_reply_owned(out, 200, LD_HTTP_CT_JSON,
                                   ld_http_render_leader(snap, now_ms));
    case LD_RESIGN_NOT_LEADER:
        if (snap->leader[0])
            snprintf(msg, sizeof(msg), "not the leader: \"%s\" holds the lease",
                     snap->leader);
        else
            snprintf(msg, sizeof(msg), "not the leader: nobody holds the lease");
        return ld_http_reply_error(out, 409, msg);
    case LD_RESIGN_FAILED:
        return ld_http_reply_error(
            out, 503,
            "stepped down, but the release could not be written: the "
            "lease expires by itself after its duration");
    case LD_RESIGN_PENDING:
        break;
    }
    return ld_http_reply_error(
        out, 503,
        "no outcome in time: the election loop did not act on the request "
        "(it may still step down)");
}

bool ld_http_peer_is_loopback(const struct sockaddr *sa)
{
    if (!sa)
        return false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        const uint8_t *b = in6->sin6_addr.s6_addr;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return true;
        return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && b[12] == 127;
    }
    return false;
}

/* POST /resign without the server: what the snapshot alone can answer. */
static int route_resign(const char *method, const struct ld_snapshot *snap,
                        int64_t now_ms, struct ld_http_reply *out)
{
    if (!method || strcmp(method, "POST") != 0) {
        out->allow = true;
        out->allow_methods = "POST";
        return reply_text(out, 405, LD_HTTP_CT_JSON,
                          "{\"error\":\"method not allowed: use POST\"}");
    }
    if (!ld_snapshot_is_leader(snap, now_ms))
        return ld_http_render_resign(snap, LD_RESIGN_NOT_LEADER, now_ms, out);
    return ld_http_reply_error(out, 503, "POST /resign needs the running server");
}

int ld_http_route(const char *method, const char *path, const struct ld_snapshot *snap,
                  struct ld_metrics *m, int64_t now_ms, struct ld_http_reply *out)
{
    char why[512];
    size_t len = 0;
    memset(out, 0, sizeof(*out));
    enum route r = find_route(path ? path : "");
    if (r == R_NONE)
        return reply_text(out, 404, LD_HTTP_CT_JSON, "{\"error\":\"not found\"}");
    if (r == R_RESIGN)
        return route_resign(method, snap, now_ms, out);
    if (!method || (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)) {
        out->allow = true;
        return reply_text(out, 405, LD_HTTP_CT_JSON,
                          "{\"error\":\"method not allowed: use GET or HEAD\"}");
    }
    switch (r) {
    case R_LEADER:
        return ld_http_reply_owned(out, ld_snapshot_is_leader(snap, now_ms) ? 200 : 503,
                                   LD_HTTP_CT_JSON, ld_http_render_leader(snap, now_ms));
    case R_WATCH:
        if (ld_http_reply_owned(out, 200, LD_HTTP_CT_SSE,
                                ld_http_render_event(false, 0, snap, now_ms, &len)) != 0)
            return -1;
        out->len = len;
        return 0;
    case R_HEALTHZ:
        if (ld_http_healthy(snap, now_ms, why, sizeof(why)))
            return reply_text(out, 200, LD_HTTP_CT_TEXT, "ok");
        return reply_text(out, 500, LD_HTTP_CT_TEXT, why);
    case R_READYZ:
        if (snap->observed)
            return reply_text(out, 200, LD_HTTP_CT_TEXT, "ok");
        return reply_text(out, 503, LD_HTTP_CT_TEXT, "lease not observed yet");
    case R_METRICS:
        return ld_http_reply_metrics(out, m, snap, NULL, NULL, now_ms);
    case R_ROOT: {
        json_t *o = json_pack("{s:s}", "name", snap->leader);
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return ld_http_reply_owned(out, 200, LD_HTTP_CT_JSON, text);
    }
    case R_NONE:
    case R_RESIGN: /* answered above */
        break;
    }
    return -1;
}

/* ---- long-poll arguments ---- */

void ld_http_poll_init(struct ld_http_poll *p)
{
    memset(p, 0, sizeof(*p));
}

/* A caller's value for an error message: at most 64 bytes, anything but
 * printable ASCII shown as '?', so the message stays valid UTF-8. */
static void shown_value(const char *v, char *out, size_t outlen)
{
    size_t n = 0;
    for (; *v && n + 1 < outlen && n < 64; v++)
        out[n++] = (char)((*v >= 0x20 && *v < 0x7f && *v != '"') ? *v : '?');
    out[n] = '\0';
}

static int poll_fail(char *err, size_t errlen, const char *key, const char *what,
                     const char *value)
{
    char shown[72];
    shown_value(value, shown, sizeof(shown));
    snprintf(err, errlen, "%s: %s \"%s\"", key, what, shown);
    return -1;
}

static bool all_digits(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
    }
    return true;
}

/* A non-negative decimal integer with nothing around it. */
int ld_http_parse_count(const char *s, int64_t *out)
{
    if (!all_digits(s))
        return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || !end || *end != '\0' || v < 0)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int ld_http_poll_arg(struct ld_http_poll *p, const char *key, const char *value,
                     int64_t max_wait_ms, char *err, size_t errlen)
{
    char scratch[1];
    const char *v = value ? value : "";
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    if (!key)
        return 0;
    if (strcmp(key, "wait") == 0) {
        int64_t ms = 0, secs = 0;
        if (p->wait)
            return poll_fail(err, errlen, key, "given twice, again as", v);
        if (all_digits(v)) /* whole seconds; too many for int64 is capped too */
            ms = ld_http_parse_count(v, &secs) != 0 || secs > INT64_MAX / 1000
                     ? INT64_MAX
                     : secs * 1000;
        else if (ld_duration_parse(v, &ms) != LD_OK || ms < 0)
            return poll_fail(err, errlen, key, "not a duration such as 30s:", v);
        p->wait = true;
        p->wait_ms = ms > max_wait_ms ? max_wait_ms : ms;
    } else if (strcmp(key, "leader") == 0) {
        if (p->has_leader)
            return poll_fail(err, errlen, key, "given twice, again as", v);
        if (strlen(v) > LD_LEASE_MAX_HOLDER)
            return poll_fail(err, errlen, key, "longer than any identity:", v);
        snprintf(p->leader, sizeof(p->leader), "%s", v);
        p->has_leader = true;
    } else if (strcmp(key, "term") == 0) {
        if (p->has_term)
            return poll_fail(err, errlen, key, "given twice, again as", v);
        if (ld_http_parse_count(v, &p->term) != 0)
            return poll_fail(err, errlen, key, "not an integer >= 0:", v);
        p->has_term = true;
    } else if (strcmp(key, "is_leader") == 0) {
        if (p->has_is_leader)
            return poll_fail(err, errlen, key, "given twice, again as", v);
        if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
            p->is_leader = true;
        else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
            p->is_leader = false;
        else
            return poll_fail(err, errlen, key, "not true or false:", v);
        p->has_is_leader = true;
    }
    return 0;
}

void ld_http_view_of(const struct ld_snapshot *s, int64_t now_ms, struct ld_http_view *v)
{
    v->observed = s->observed;
    v->is_leader = ld_snapshot_is_leader(s, now_ms);
    v->term = s->term;
    memcpy(v->leader, s->leader, sizeof(v->leader));
    v->leader[sizeof(v->leader) - 1] = '\0';
}

bool ld_http_view_eq(const struct ld_http_view *a, const struct ld_http_view *b)
{
    return a->observed == b->observed && a->is_leader == b->is_leader &&
           a->term == b->term && strcmp(a->leader, b->leader) == 0;
}

bool ld_http_view_differs(const struct ld_http_poll *p, const struct ld_http_view *v)
{
    return (p->has_leader && strcmp(p->leader, v->leader) != 0) ||
           (p->has_term && p->term != v->term) ||
           (p->has_is_leader && p->is_leader != v->is_leader);
}

bool ld_http_poll_differs(const struct ld_http_poll *p, const struct ld_snapshot *snap,
                          int64_t now_ms)
{
    struct ld_http_view v;
    ld_http_view_of(snap, now_ms, &v);
    return ld_http_view_differs(p, &v);
}

/* ---- /watch resumption ---- */

bool ld_http_parse_event_id(const char *s, uint64_t *out)
{
    if (!s || !all_digits(s) || strlen(s) > 20)
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || !end || *end != '\0')
        return false;
    *out = (uint64_t)v;
    return true;
}
