/* SPDX-License-Identifier: Apache-2.0 */
#include "api.h"

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"
#include "control.h"
#include "discovery.h"
#include "events.h"
#include "labelsel.h"
#include "leaseval.h"
#include "peercert.h"
#include "pod_resource.h"
#include "status.h"
#include "util.h"
#include "watch_stream.h"

#define HOLD_POLL_MS 50
#define DEFAULT_WATCH_TIMEOUT_S 1800 /* kube's --min-request-timeout */
#define GV_PREFIX "/apis/coordination.k8s.io/v1/"
#define CORE_PREFIX "/api/v1/"

struct req {
    struct ld_buf body; /* at most AS_MAX_BODY */
    bool too_big;       /* it was longer: read and dropped, answered 413 */
};

enum route_kind { R_UNKNOWN, R_DISCOVERY, R_ALL, R_COLLECTION, R_ITEM, R_PODS, R_EVENTS };

struct route {
    enum route_kind kind;
    const struct as_kind *res; /* for R_ALL, R_COLLECTION and R_ITEM */
    char ns[64];
    char name[254];
    bool watch;
    enum as_verb verb;
};

/* Waits up to wait_ms for the peer of fd to hang up; true if it did. fd -1
 * only sleeps. */
static bool peer_gone(int fd, int wait_ms)
{
    if (fd < 0) {
        struct timespec ts = {wait_ms / 1000, (long)(wait_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return false;
    }
    /* Only hang-up events: a peer that sends more bytes is still there. */
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    int n = poll(&p, 1, wait_ms);
    return n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static const char *arg(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

static bool truthy(const char *v)
{
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0);
}

/* Copies segment [p, end) into out (size n); false if it is empty or does
 * not fit. */
static bool segment(const char *p, const char *end, char *out, size_t n)
{
    size_t len = (size_t)(end - p);
    if (len == 0 || len >= n)
        return false;
    memcpy(out, p, len);
    out[len] = '\0';
    return true;
}

/* Parses "namespaces/NS/RES[/NAME]" or "RES" for the resource of res. */
static void parse_store_path(const char *rest, const struct as_kind *res,
                             struct route *rt)
{
    const char *resource = res->resource;
    size_t rlen = strlen(resource);
    rt->res = res;
    if (strcmp(rest, resource) == 0) {
        rt->kind = R_ALL;
        return;
    }
    if (strncmp(rest, "namespaces/", 11) != 0)
        return;
    const char *ns = rest + 11;
    const char *slash = strchr(ns, '/');
    if (!slash || !segment(ns, slash, rt->ns, sizeof rt->ns))
        return;
    const char *sub = slash + 1;
    if (strcmp(sub, resource) == 0) {
        rt->kind = R_COLLECTION;
        return;
    }
    if (strncmp(sub, resource, rlen) != 0 || sub[rlen] != '/')
        return;
    const char *name = sub + rlen + 1;
    if (strchr(name, '/') ||
        !segment(name, name + strlen(name), rt->name, sizeof rt->name))
        return;
    rt->kind = R_ITEM;
}

/* "PREFIX" NS "/" RESOURCE ["/" NAME]: pods and events (pods.h, events.h). */
static bool parse_other_path(const char *url, const char *prefix, const char *resource,
                             struct route *rt)
{
    size_t plen = strlen(prefix), rlen = strlen(resource);
    if (strncmp(url, prefix, plen) != 0)
        return false;
    const char *ns = url + plen;
    const char *slash = strchr(ns, '/');
    if (!slash || !segment(ns, slash, rt->ns, sizeof rt->ns) ||
        strncmp(slash + 1, resource, rlen) != 0)
        return false;
    const char *rest = slash + 1 + rlen;
    if (*rest == '\0')
        return true;
    return rest[0] == '/' && !strchr(rest + 1, '/') &&
           segment(rest + 1, rest + strlen(rest), rt->name, sizeof rt->name);
}

static void route(struct MHD_Connection *c, const char *url, const char *method,
                  const char *server_addr, struct route *rt)
{
    memset(rt, 0, sizeof *rt);
    rt->verb = AS_VERB_OTHER;
    bool pods = parse_other_path(url, "/api/v1/namespaces/", "pods", rt);
    if (pods ||
        parse_other_path(url, "/apis/events.k8s.io/v1/namespaces/", "events", rt)) {
        rt->kind = pods ? R_PODS : R_EVENTS;
        bool item = rt->name[0] != '\0';
        if (strcmp(method, "GET") == 0)
            rt->verb = item ? AS_VERB_GET : AS_VERB_LIST;
        else if (strcmp(method, "PATCH") == 0 && item)
            rt->verb = AS_VERB_PATCH;
        else if (strcmp(method, "POST") == 0 && !item)
            rt->verb = AS_VERB_CREATE;
        return;
    }
    const struct as_kind *res = NULL;
    const char *rest = NULL;
    if (strncmp(url, GV_PREFIX, strlen(GV_PREFIX)) == 0) {
        res = &as_kind_lease;
        rest = url + strlen(GV_PREFIX);
    } else if (strncmp(url, CORE_PREFIX, strlen(CORE_PREFIX)) == 0) {
        res = &as_kind_configmap;
        rest = url + strlen(CORE_PREFIX);
    }
    if (res) {
        if (strncmp(rest, "watch/", 6) == 0) {
            rt->watch = true;
            rest += 6;
        }
        parse_store_path(rest, res, rt);
    }
    bool get = strcmp(method, "GET") == 0;
    if (truthy(arg(c, "watch")))
        rt->watch = true;
    switch (rt->kind) {
    case R_ITEM:
        if (get)
            rt->verb = rt->watch ? AS_VERB_WATCH : AS_VERB_GET;
        else if (strcmp(method, "PUT") == 0)
            rt->verb = AS_VERB_UPDATE;
        else if (strcmp(method, "PATCH") == 0)
            rt->verb = AS_VERB_PATCH;
        else if (strcmp(method, "DELETE") == 0)
            rt->verb = AS_VERB_DELETE;
        break;
    case R_COLLECTION:
    case R_ALL:
        if (get)
            rt->verb = rt->watch ? AS_VERB_WATCH : AS_VERB_LIST;
        else if (strcmp(method, "POST") == 0 && rt->kind == R_COLLECTION)
            rt->verb = AS_VERB_CREATE;
        break;
    default: {
        struct as_reply probe;
        as_reply_init(&probe);
        if (get && as_discovery_serve(url, server_addr, &probe)) {
            rt->kind = R_DISCOVERY;
            rt->verb = AS_VERB_DISCOVERY;
        }
        as_reply_clear(&probe);
        break;
    }
    }
}

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

enum chaos { CHAOS_PASS, CHAOS_REPLY, CHAOS_DROP, CHAOS_LATE };

/* The pause or a "hang" partition: the network, not the server, holds the
 * request, so it counts as never read and a hang-up drops it. Returns
 * CHAOS_PASS once neither holds it, CHAOS_DROP (with *outcome) otherwise. */
static enum chaos hold_unread(struct as_api *api, int fd, const char *client,
                              enum as_verb verb, const char **outcome)
{
    struct as_fault f;
    bool counted = false;
    enum chaos out = CHAOS_PASS;
    for (;;) {
        if (atomic_load(&api->stopping)) {
            *outcome = "disconnected";
            out = CHAOS_DROP;
            break;
        }
        bool paused = as_faults_paused(api->faults);
        bool faulted = !paused && client && as_faults_get(api->faults, client, verb, &f);
        if (faulted && f.partition == AS_PART_RESET) {
            *outcome = "reset";
            out = CHAOS_DROP;
            break;
        }
        if (!paused && !(faulted && f.partition == AS_PART_HANG))
            break;
        if (!counted) {
            as_stats_hold(api->stats, client, verb, "partition", 1);
            counted = true;
        }
        /* Polling keeps this simple: a held request notices a cleared fault,
         * a hang-up or shutdown within HOLD_POLL_MS. */
        if (peer_gone(fd, HOLD_POLL_MS)) {
            *outcome = "disconnected";
            out = CHAOS_DROP;
            break;
        }
    }
    if (counted)
        as_stats_hold(api->stats, client, verb, "partition", -1);
    return out;
}

/* Delays the request by f->latency_ms. The server has read it whole: under
 * AS_COMMIT_ADMITTED a hang-up only sets *gone (the request is executed at
 * the end all the same, as kube-apiserver executes an admitted write),
 * under AS_COMMIT_CONNECTED it drops the request. Shutdown drops it in
 * either case. */
static enum chaos hold_latency(struct as_api *api, int fd, const char *client,
                               enum as_verb verb, const struct as_fault *f, bool *gone,
                               const char **outcome)
{
    enum chaos out = CHAOS_PASS;
    int64_t until = as_mono_ms() + f->latency_ms;
    *gone = false;
    if (f->latency_ms <= 0)
        return CHAOS_PASS;
    as_stats_hold(api->stats, client, verb, "latency", 1);
    for (int64_t now = as_mono_ms(); now < until; now = as_mono_ms()) {
        int64_t left = until - now;
        int step = left < HOLD_POLL_MS ? (int)left : HOLD_POLL_MS;
        if (atomic_load(&api->stopping)) {
            *outcome = "disconnected";
            out = CHAOS_DROP;
            break;
        }
        /* After the hang-up only the clock matters: fd -1 just sleeps. */
        if (peer_gone(*gone ? -1 : fd, step)) {
            if (f->commit != AS_COMMIT_ADMITTED) {
                *outcome = "disconnected";
                out = CHAOS_DROP;
                break;
            }
            *gone = true;
        }
    }
    as_stats_hold(api->stats, client, verb, "latency", -1);
    return out;
}

/* Holds, delays, fails or drops the request per the pause flag and the
 * client's faults. CHAOS_DROP means: close without answering; *outcome
 * says why ("reset" or "disconnected"). CHAOS_LATE means: the client hung
 * up during an admitted hold, execute the request all the same and close
 * without answering. */
static enum chaos chaos(struct as_api *api, int fd, const char *client, enum as_verb verb,
                        struct as_reply *r, const char **outcome)
{
    struct as_fault f;
    bool gone = false;
    if (hold_unread(api, fd, client, verb, outcome) == CHAOS_DROP)
        return CHAOS_DROP;
    if (!client || !as_faults_get(api->faults, client, verb, &f))
        return CHAOS_PASS;
    if (hold_latency(api, fd, client, verb, &f, &gone, outcome) == CHAOS_DROP)
        return CHAOS_DROP;
    /* A watch nobody reads has nothing to apply. */
    if (gone && verb == AS_VERB_WATCH) {
        *outcome = "disconnected";
        return CHAOS_DROP;
    }
    if (f.throttle_rate > 0 && as_faults_rand(api->faults) < f.throttle_rate) {
        as_reply_too_many(r, f.retry_after);
        return CHAOS_REPLY;
    }
    if (f.error_rate > 0 && as_faults_rand(api->faults) < f.error_rate) {
        const char *reason = as_reason_for_code((unsigned)f.error_code);
        as_reply_status(r, (unsigned)f.error_code, reason[0] ? reason : "InternalError",
                        "injected fault (leaderd-apiserver)", NULL);
        return CHAOS_REPLY;
    }
    return gone ? CHAOS_LATE : CHAOS_PASS;
}

/* True when the client's faults say the reply to its committed write must be
 * lost: the write stays, the client sees the connection drop. */
static bool lose_reply(struct as_api *api, const char *client, enum as_verb verb)
{
    struct as_fault f;
    return client && as_faults_get(api->faults, client, verb, &f) && f.lose_reply > 0 &&
           as_faults_rand(api->faults) < f.lose_reply;
}

/* Only Leases have a Table rendering here; other kinds answer as JSON,
 * which kubectl also prints. */
static bool wants_table(struct MHD_Connection *c, const struct route *rt)
{
    const char *accept = header(c, "Accept");
    return rt->res == &as_kind_lease && accept && strstr(accept, "as=Table") != NULL;
}

/* Applies fieldSelector (metadata.name / metadata.namespace equality)
 * to the filters; false with a 400 reply for anything else. */
static bool field_selector(const char *sel, char *ns, size_t nslen, char *name,
                           size_t namelen, bool *has_ns, bool *has_name,
                           struct as_reply *r)
{
    char buf[512];
    if (!sel || !*sel)
        return true;
    if (strlen(sel) >= sizeof buf) {
        as_reply_bad_request(r, "fieldSelector too long");
        return false;
    }
    snprintf(buf, sizeof buf, "%s", sel);
    char *save = NULL;
    for (char *term = strtok_r(buf, ",", &save); term;
         term = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(term, '=');
        if (!eq || (eq > term && eq[-1] == '!')) {
            as_reply_bad_request(r,
                                 "only field selectors of the form metadata.name=X and "
                                 "metadata.namespace=X are supported");
            return false;
        }
        *eq = '\0';
        const char *val = eq[1] == '=' ? eq + 2 : eq + 1;
        if (strcmp(term, "metadata.name") == 0 && strlen(val) < namelen) {
            snprintf(name, namelen, "%s", val);
            *has_name = true;
        } else if (strcmp(term, "metadata.namespace") == 0 && strlen(val) < nslen) {
            snprintf(ns, nslen, "%s", val);
            *has_ns = true;
        } else {
            char msg[600];
            snprintf(msg, sizeof msg,
                     "\"%s\" is not a known field selector: only \"metadata.name\", "
                     "\"metadata.namespace\"",
                     term);
            as_reply_bad_request(r, msg);
            return false;
        }
    }
    return true;
}

/* Parses the labelSelector parameter into *out (NULL when absent or empty;
 * the caller frees it); false with a 400 reply, worded like labels.Parse,
 * for a selector the real server would refuse. */
static bool label_selector(struct MHD_Connection *c, struct as_labelsel **out,
                           struct as_reply *r)
{
    const char *text = arg(c, "labelSelector");
    char err[4096];
    *out = NULL;
    if (!text || !*text)
        return true;
    *out = as_labelsel_parse(text, err, sizeof err);
    if (*out)
        return true;
    if (strcmp(err, "out of memory") == 0)
        as_reply_internal(r, err);
    else
        as_reply_bad_request(r, err);
    return false;
}

static void reply_list(struct MHD_Connection *c, const struct route *rt,
                       const struct as_snapshot *snap, struct as_reply *r)
{
    if (wants_table(c, rt)) {
        as_reply_json(r, 200, as_table(snap, arg(c, "includeObject"), as_wall_us()));
        return;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        as_reply_internal(r, "out of memory");
        return;
    }
    fprintf(f,
            "{\"kind\":\"%s\",\"apiVersion\":\"%s\","
            "\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"},\"items\":[",
            rt->res->list_kind, rt->res->api_version, snap->rv);
    /* Raw documents go in verbatim, malformed or not, like a corrupted
     * object in etcd would reach a client. */
    for (size_t i = 0; i < snap->n; i++)
        fprintf(f, "%s%s", i ? "," : "", snap->items[i].text);
    fputs("]}", f);
    if (fclose(f) != 0) {
        free(buf);
        as_reply_internal(r, "out of memory");
        return;
    }
    free(r->body);
    r->body = buf;
    r->len = len;
    r->code = 200;
    r->ctype = "application/json";
}

static void handle_list(struct MHD_Connection *c, struct as_api *api,
                        const struct route *rt, struct as_reply *r)
{
    char ns[64] = "", name[254] = "";
    bool has_ns = rt->kind == R_COLLECTION, has_name = false;
    struct as_snapshot snap;
    struct as_labelsel *labels = NULL;
    if (has_ns)
        snprintf(ns, sizeof ns, "%s", rt->ns);
    if (!field_selector(arg(c, "fieldSelector"), ns, sizeof ns, name, sizeof name,
                        &has_ns, &has_name, r) ||
        !label_selector(c, &labels, r))
        return;
    struct as_filter f = {.kind = rt->res,
                          .ns = has_ns ? ns : NULL,
                          .name = has_name ? name : NULL,
                          .labels = labels};
    if (!as_store_snapshot(api->store, &f, &snap))
        as_reply_internal(r, "out of memory");
    else
        reply_list(c, rt, &snap, r);
    as_snapshot_clear(&snap);
    as_labelsel_free(labels);
}

static void handle_get(struct MHD_Connection *c, struct as_api *api,
                       const struct route *rt, struct as_reply *r)
{
    struct as_snapshot snap;
    if (!wants_table(c, rt)) {
        as_store_get(api->store, rt->res, rt->ns, rt->name, r);
        return;
    }
    struct as_filter f = {.kind = rt->res, .ns = rt->ns, .name = rt->name};
    if (!as_store_snapshot(api->store, &f, &snap)) {
        as_reply_internal(r, "out of memory");
        return;
    }
    if (snap.n == 0)
        as_reply_not_found(r, rt->name);
    else
        as_reply_json(r, 200, as_table(&snap, arg(c, "includeObject"), as_wall_us()));
    as_snapshot_clear(&snap);
}

/* Content-Type check for POST/PUT bodies: JSON only (no YAML/protobuf). */
static bool json_body(struct MHD_Connection *c, struct as_reply *r)
{
    const char *ct = header(c, "Content-Type");
    if (!ct || strncasecmp(ct, "application/json", 16) == 0 ||
        strncasecmp(ct, "*/*", 3) == 0)
        return true;
    as_reply_status(
        r, 415, "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types "
        "include: application/json",
        NULL);
    return false;
}

/* The body of a POST or PUT decoded as rt's kind: a new reference, or NULL
 * with a 400 in r. */
static json_t *parse_body(const struct route *rt, const struct req *rq,
                          struct as_reply *r)
{
    json_t *in = as_decode_text(rt->res->kind, rq->body.data, rq->body.len, r);
    json_t *obj = in ? rt->res->normalize(in, r) : NULL;
    json_decref(in);
    return obj;
}

static bool check_target(json_t *lease, const struct route *rt, bool need_name,
                         struct as_reply *r)
{
    json_t *meta = json_object_get(lease, "metadata");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    char msg[700];
    if (ns && *ns && strcmp(ns, rt->ns) != 0) {
        as_reply_bad_request(r, "the namespace of the provided object does not match the "
                                "namespace sent on the request");
        return false;
    }
    if (need_name && (!name || strcmp(name, rt->name) != 0)) {
        snprintf(msg, sizeof msg,
                 "the name of the object (%s) does not match the name on the URL (%s)",
                 name ? name : "", rt->name);
        as_reply_bad_request(r, msg);
        return false;
    }
    return true;
}

static void handle_write(struct MHD_Connection *c, struct as_api *api,
                         const struct route *rt, const char *client, const struct req *rq,
                         struct as_reply *r)
{
    json_t *lease = NULL, *patch = NULL;
    if (arg(c, "dryRun")) {
        as_reply_bad_request(r, "dryRun is not supported by leaderd-apiserver");
        return;
    }
    switch (rt->verb) {
    case AS_VERB_CREATE:
    case AS_VERB_UPDATE:
        if (!json_body(c, r))
            break;
        lease = parse_body(rt, rq, r);
        if (!lease || !check_target(lease, rt, rt->verb == AS_VERB_UPDATE, r))
            break;
        if (rt->verb == AS_VERB_CREATE)
            as_store_create(api->store, rt->res, rt->ns, lease, client, r);
        else
            as_store_update(api->store, rt->res, rt->ns, rt->name, lease, client, r);
        break;
    case AS_VERB_PATCH: {
        const char *ct = header(c, "Content-Type");
        json_error_t jerr;
        if (!ct || (strncasecmp(ct, "application/merge-patch+json", 28) != 0 &&
                    strncasecmp(ct, "application/strategic-merge-patch+json", 38) != 0)) {
            as_reply_status(r, 415, "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted "
                            "media types include: application/merge-patch+json, "
                            "application/strategic-merge-patch+json",
                            NULL);
            break;
        }
        patch = json_loadb(rq->body.data, rq->body.len, JSON_ALLOW_NUL, &jerr);
        if (!patch) {
            char msg[300];
            snprintf(msg, sizeof msg, "error decoding patch: %s", jerr.text);
            as_reply_bad_request(r, msg);
            break;
        }
        as_store_patch(api->store, rt->res, rt->ns, rt->name, patch, client, r);
        break;
    }
    case AS_VERB_DELETE: {
        /* Preconditions are pointers in DeleteOptions: a present "" still
         * has to match. */
        const char *pre_uid = NULL, *pre_rv = NULL;
        if (rq->body.len > 0) {
            json_error_t jerr;
            patch = json_loadb(rq->body.data, rq->body.len, 0, &jerr);
            json_t *pre = json_object_get(patch, "preconditions");
            json_t *puid = json_object_get(pre, "uid");
            json_t *prv = json_object_get(pre, "resourceVersion");
            if (!json_is_object(patch) ||
                (pre && !json_is_null(pre) && !json_is_object(pre)) ||
                (puid && !json_is_null(puid) && !json_is_string(puid)) ||
                (prv && !json_is_null(prv) && !json_is_string(prv))) {
                as_reply_bad_request(r, "the body is not valid DeleteOptions");
                break;
            }
            pre_uid = json_string_value(puid);
            pre_rv = json_string_value(prv);
        }
        as_store_delete(api->store, rt->res, rt->ns, rt->name, pre_uid, pre_rv, client,
                        r);
        break;
    }
    default:
        break;
    }
    json_decref(lease);
    json_decref(patch);
}

static enum MHD_Result send_reply(struct MHD_Connection *c, struct as_reply *r)
{
    struct MHD_Response *resp;
    if (r->body) {
        resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
        if (resp)
            r->body = NULL;
    } else {
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", r->ctype);
    MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
    if (r->retry_after >= 0) {
        char buf[16];
        snprintf(buf, sizeof buf, "%d", r->retry_after);
        MHD_add_response_header(resp, "Retry-After", buf);
    }
    if (r->code == 429) {
        MHD_add_response_header(resp, "X-Kubernetes-PF-FlowSchema-UID",
                                "00000000-0000-0000-0000-000000000001");
        MHD_add_response_header(resp, "X-Kubernetes-PF-PriorityLevel-UID",
                                "00000000-0000-0000-0000-000000000002");
    }
    enum MHD_Result ret = MHD_queue_response(c, r->code, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void account(struct as_api *api, const char *client, const char *method,
                    const char *url, enum as_verb verb, const char *outcome)
{
    as_stats_count(api->stats, client, verb, outcome);
    if (api->verbose)
        fprintf(stderr, "leaderd-apiserver: %s %s %s [%s] -> %s\n",
                client ? client : "anonymous", method, url, as_verb_name(verb), outcome);
}

static enum MHD_Result dispatch(struct as_api *api, struct MHD_Connection *c,
                                const char *url, const char *method, struct req *rq)
{
    struct as_reply r;
    struct route rt;
    char client[AS_CLIENT_MAX], code[16];
    bool valid;
    enum MHD_Result ret;
    as_reply_init(&r);
    char cn[AS_CLIENT_MAX];
    bool has_cn = as_peer_cn(c, cn, sizeof cn);
    enum as_who who = as_auth_identify(api->auth, has_cn ? cn : NULL,
                                       header(c, "Authorization"), client, &valid);
    const char *cname = who == AS_WHO_NONE ? NULL : client;
    if (strncmp(url, "/_control/", 10) == 0) {
        if (who != AS_WHO_ADMIN)
            as_reply_status(&r, 401, "Unauthorized", "Unauthorized", NULL);
        else if (rq->too_big)
            as_reply_status(&r, 413, "RequestEntityTooLarge", "request body too large",
                            NULL);
        else if (strncmp(url, "/_control/pods", 14) == 0 &&
                 (url[14] == '\0' || url[14] == '/'))
            as_pods_control(api->pods, method, url + 14, rq->body.data, rq->body.len, &r);
        else {
            struct as_control_query q = {.since = arg(c, "since"),
                                         .stamp = arg(c, "stamp")};
            struct as_control_ctx ctl = {.store = api->store,
                                         .faults = api->faults,
                                         .stats = api->stats,
                                         .auth = api->auth};
            as_control(&ctl, method, url + 9, rq->body.data, rq->body.len, &q, &r);
        }
        ret = send_reply(c, &r);
        as_reply_clear(&r);
        return ret;
    }
    int fd = conn_fd(c);
    route(c, url, method, api->server_addr, &rt);
    const char *outcome = NULL;
    bool late = false;
    switch (chaos(api, fd, cname, rt.verb, &r, &outcome)) {
    case CHAOS_DROP:
        account(api, cname, method, url, rt.verb, outcome);
        as_reply_clear(&r);
        return MHD_NO; /* MHD closes the connection without a response */
    case CHAOS_REPLY:
        goto send;
    case CHAOS_LATE:
        late = true;
        break;
    case CHAOS_PASS:
        break;
    }
    if (!valid && !as_discovery_is_public(url)) {
        as_reply_status(&r, 401, "Unauthorized", "Unauthorized", NULL);
        goto send;
    }
    if (rq->too_big) {
        char msg[64];
        snprintf(msg, sizeof msg, "Request entity too large: limit is %u", AS_MAX_BODY);
        as_reply_status(&r, 413, "RequestEntityTooLarge", msg, NULL);
        goto send;
    }
    switch (rt.kind) {
    case R_DISCOVERY:
        as_discovery_serve(url, api->server_addr, &r);
        break;
    case R_PODS: {
        struct as_pods_request pr = {.method = method,
                                     .ns = rt.ns,
                                     .name = rt.name[0] ? rt.name : NULL,
                                     .ctype = header(c, "Content-Type"),
                                     .selector = arg(c, "labelSelector"),
                                     .client = cname ? cname : AS_ADMIN,
                                     .body = rq->body.data,
                                     .len = rq->body.len};
        as_pods_serve(api->pods, &pr, &r);
        break;
    }
    case R_EVENTS:
        as_events_serve(api->events, method, rt.ns, rt.name[0] ? rt.name : NULL,
                        rq->body.data, rq->body.len, &r);
        break;
    case R_UNKNOWN:
        as_reply_status(&r, 404, "NotFound",
                        "the server could not find the requested resource",
                        json_object());
        break;
    default:
        if (rt.verb == AS_VERB_OTHER) {
            as_reply_status(
                &r, 405, "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                json_object());
        } else if (rt.verb == AS_VERB_WATCH) {
            struct as_watch_params p = {0};
            long long t = DEFAULT_WATCH_TIMEOUT_S;
            const char *ts = arg(c, "timeoutSeconds");
            char ns[64] = "", name[254] = "";
            bool has_ns = rt.kind != R_ALL, has_name = rt.kind == R_ITEM;
            snprintf(ns, sizeof ns, "%s", rt.ns);
            snprintf(name, sizeof name, "%s", rt.name);
            if (ts && !as_parse_ll(ts, 0, 86400, &t)) {
                as_reply_bad_request(&r,
                                     "timeoutSeconds must be an integer in [0, 86400]");
                break;
            }
            if (t == 0)
                t = DEFAULT_WATCH_TIMEOUT_S;
            if (!field_selector(arg(c, "fieldSelector"), ns, sizeof ns, name, sizeof name,
                                &has_ns, &has_name, &r) ||
                !label_selector(c, &p.labels, &r))
                break;
            p.kind = rt.res;
            p.ns = has_ns ? ns : NULL;
            p.name = has_name ? name : NULL;
            p.rv = arg(c, "resourceVersion");
            p.timeout_s = (int)t;
            p.bookmarks = truthy(arg(c, "allowWatchBookmarks"));
            struct as_watch_ctx wc = {.store = api->store,
                                      .faults = api->faults,
                                      .stopping = &api->stopping,
                                      .peer_gone = peer_gone};
            struct MHD_Response *resp = as_watch_response(&wc, cname, fd, &p, &r);
            if (!resp)
                break;
            MHD_add_response_header(resp, "Content-Type", "application/json");
            MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
            account(api, cname, method, url, rt.verb, "200");
            ret = MHD_queue_response(c, 200, resp);
            MHD_destroy_response(resp);
            return ret;
        } else if (rt.verb == AS_VERB_LIST) {
            handle_list(c, api, &rt, &r);
        } else if (rt.verb == AS_VERB_GET) {
            handle_get(c, api, &rt, &r);
        } else {
            handle_write(c, api, &rt, cname ? cname : AS_ADMIN, rq, &r);
            if (!late && r.code >= 200 && r.code < 300 &&
                lose_reply(api, cname, rt.verb)) {
                account(api, cname, method, url, rt.verb, "lost-reply");
                as_reply_clear(&r);
                return MHD_NO;
            }
        }
        break;
    }
send:
    snprintf(code, sizeof code, late ? "late-%u" : "%u", r.code);
    account(api, cname, method, url, rt.verb, code);
    if (late) {
        /* Its client is gone: the request took effect, the reply has no
         * reader. */
        as_reply_clear(&r);
        return MHD_NO;
    }
    ret = send_reply(c, &r);
    as_reply_clear(&r);
    return ret;
}

enum MHD_Result as_api_access(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version,
                              const char *upload_data, size_t *upload_data_size,
                              void **con_cls)
{
    struct as_api *api = cls;
    struct req *rq = *con_cls;
    (void)version;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq)
            return MHD_NO;
        ld_buf_init(&rq->body, AS_MAX_BODY);
        *con_cls = rq;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (rq->too_big)
            return MHD_YES;
        enum ld_err rc = ld_buf_append(&rq->body, upload_data, n);
        if (rc == LD_ETOOBIG) {
            /* Keep reading (and discarding) so the 413 can be answered. */
            rq->too_big = true;
            ld_buf_free(&rq->body);
        }
        return rc == LD_OK || rc == LD_ETOOBIG ? MHD_YES : MHD_NO;
    }
    return dispatch(api, conn, url, method, rq);
}

void as_api_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct req *rq = *con_cls;
    (void)cls;
    (void)conn;
    (void)toe;
    if (!rq)
        return;
    ld_buf_free(&rq->body);
    free(rq);
    *con_cls = NULL;
}
