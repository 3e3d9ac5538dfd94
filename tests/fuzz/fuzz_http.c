/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_http: the request router, ld_http_route, with method and path from
 * the input, and the snapshot and API metrics it renders built from the
 * input as well.
 *
 * Input: METHOD \0 PATH \0 LEADER \0 HEALTH_ERROR \0 then binary knobs (see
 * build_snapshot) and metric observations of 4 bytes each. Strings that
 * reach the snapshot are made what the daemon would store (valid UTF-8; no
 * control characters in the identity) so a report is a real bug, not an
 * impossible state.
 *
 * With knob 0x20 the router is shard mode's, ld_http_route_shards, for a
 * group of three numbered shards (or, with 0x40, three named ones): the
 * shard table comes from the next bytes (build_table), and HEALTH_ERROR,
 * raw, is /shard's key.
 */
#include "fuzz.h"

#include <math.h>

#include <jansson.h>

#include "shardgroup.h"
#include "shardrange.h"

#include "../../cmd/leaderd/http/http.h"
#include "../../cmd/leaderd/http/http_shards.h"

#define MAX_OBSERVATIONS 200

/* Next NUL-terminated field of buf[*off..size]; "" past the end. */
static const char *next_field(char *buf, size_t size, size_t *off)
{
    if (*off > size)
        return "";
    char *s = buf + *off;
    *off += strlen(s) + 1;
    return s;
}

/* Copies src into dst[cap] with bytes >= 0x80 (and control characters when
 * asked) replaced by '?': always valid UTF-8. */
static void sanitize(char *dst, size_t cap, const char *src, bool no_ctl)
{
    size_t i = 0;

    for (; i < cap - 1 && src[i]; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (char)((c >= 0x80 || (no_ctl && (c < 0x20 || c == 0x7f))) ? '?' : c);
    }
    dst[i] = '\0';
}

static int64_t delta(const uint8_t **data, size_t *size)
{
    return (int64_t)(int32_t)(uint32_t)fuzz_take(data, size, 4);
}

static uint64_t build_snapshot(struct ld_snapshot *s, const char *leader,
                               const char *health, const uint8_t **data, size_t *size,
                               int64_t *now_ms)
{
    uint64_t flags = fuzz_take(data, size, 1);

    memset(s, 0, sizeof *s);
    snprintf(s->lease, sizeof s->lease, "default/fuzz-lease");
    snprintf(s->identity, sizeof s->identity, "pod-a");
    sanitize(s->leader, sizeof s->leader, leader, false);
    if (flags & 0x10)
        sanitize(s->health_error, sizeof s->health_error, health, true);
    s->leading = flags & 0x01;
    s->observed = flags & 0x02;
    s->has_renewed_at = flags & 0x04;
    /* Monotonic clocks start near zero and stay far from INT64_MAX; times
     * are kept within +-2^31 ms of now as the daemon's are. */
    *now_ms = (int64_t)fuzz_take(data, size, 4);
    s->lead_until_ms = *now_ms + delta(data, size);
    s->term_until_ms = s->leading ? s->lead_until_ms : INT64_MIN;
    s->heartbeat_ms = *now_ms + delta(data, size);
    s->stale_after_ms = delta(data, size);
    s->renewed_at_us = (int64_t)fuzz_take(data, size, 8);
    s->last_renew_wall_us = (int64_t)fuzz_take(data, size, 8);
    s->term = (int64_t)fuzz_take(data, size, 8);
    s->transitions_seen = (int64_t)fuzz_take(data, size, 8);
    return flags;
}

static void observe_all(struct ld_metrics *m, const uint8_t *data, size_t size)
{
    static const char *const verbs[] = {"GET",   "POST", "PUT",   "PATCH", "DELETE",
                                        "WATCH", "LIST", "OTHER", "BREW",  NULL};
    const size_t nverbs = sizeof verbs / sizeof verbs[0];

    for (int i = 0; i < MAX_OBSERVATIONS && size >= 4; i++) {
        const char *verb = verbs[data[0] % nverbs];
        long status = (long)(int16_t)(data[1] | (data[2] << 8));
        double secs = data[3] == 0xff ? -1.0 : data[3] == 0xfe ? NAN : data[3] / 16.0;
        ld_metrics_observe_request(m, verb, status, secs);
        data += 4;
        size -= 4;
    }
}

static bool is_json_object_with(const char *body, const char *key)
{
    json_t *o = json_loads(body, 0, NULL);
    bool ok = json_is_object(o) && json_object_get(o, key) != NULL;

    json_decref(o);
    return ok;
}

/* The /leader document, as /leader answers it and /watch streams it. */
static void check_leader_json(const char *text, size_t len, const struct ld_snapshot *s,
                              int64_t now_ms)
{
    bool leader = ld_snapshot_is_leader(s, now_ms);
    json_t *o = json_loadb(text, len, 0, NULL);

    FUZZ_CHECK(json_is_object(o));
    FUZZ_CHECK(json_is_boolean(json_object_get(o, "is_leader")));
    FUZZ_CHECK(json_boolean_value(json_object_get(o, "is_leader")) == leader);
    FUZZ_CHECK(json_integer_value(json_object_get(o, "term")) == s->term);
    FUZZ_CHECK(strcmp(json_string_value(json_object_get(o, "leader")), s->leader) == 0);
    json_decref(o);
}

/* One server-sent event: "event: leader\ndata: JSON\n\n". */
static void check_watch(const struct ld_http_reply *r, const struct ld_snapshot *s,
                        int64_t now_ms)
{
    static const char head[] = "event: leader\ndata: ";
    const size_t hlen = sizeof head - 1;

    FUZZ_CHECK(r->status == 200 && strcmp(r->content_type, "text/event-stream") == 0);
    FUZZ_CHECK(r->len > hlen + 2 && strncmp(r->body, head, hlen) == 0);
    FUZZ_CHECK(strcmp(r->body + r->len - 2, "\n\n") == 0);
    FUZZ_CHECK(memchr(r->body + hlen, '\n', r->len - hlen - 2) == NULL);
    check_leader_json(r->body + hlen, r->len - hlen - 2, s, now_ms);
}

/* POST /resign: POST only; without the server the route can only say that
 * a standby is no leader (409, an error naming the holder, which must stay
 * valid JSON whatever the holder is) or that it needs the loop (503). */
static void check_resign(const char *method, const struct ld_http_reply *r,
                         const struct ld_snapshot *s, int64_t now_ms)
{
    if (strcmp(method, "POST") != 0) {
        FUZZ_CHECK(r->status == 405 && r->allow && r->allow_methods &&
                   strcmp(r->allow_methods, "POST") == 0);
        FUZZ_CHECK(is_json_object_with(r->body, "error"));
        return;
    }
    FUZZ_CHECK(!r->allow);
    if (ld_snapshot_is_leader(s, now_ms)) {
        FUZZ_CHECK(r->status == 503 && is_json_object_with(r->body, "error"));
        return;
    }
    FUZZ_CHECK(r->status == 409 && is_json_object_with(r->body, "error"));
}

static void check_reply(const char *method, const char *path,
                        const struct ld_http_reply *r, const struct ld_snapshot *s,
                        int64_t now_ms)
{
    /* Every route ld_http_route serves; a new one needs its checks below. */
    static const char *const known[] = {"/leader", "/watch",   "/healthz",
                                        "/readyz", "/metrics", "/"};
    bool is_known = false,
         plain = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;

    FUZZ_CHECK(r->body != NULL && r->content_type != NULL);
    FUZZ_CHECK(r->len == strlen(r->body));
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        is_known = is_known || strcmp(path, known[i]) == 0;
    if (strcmp(path, "/resign") == 0) {
        check_resign(method, r, s, now_ms);
        return;
    }
    if (!is_known) {
        if (r->status != 404)
            fprintf(stderr, "route \"%s\" answers %u: add it to fuzz_http.c\n", path,
                    r->status);
        FUZZ_CHECK(r->status == 404 && !r->allow);
        FUZZ_CHECK(is_json_object_with(r->body, "error"));
        return;
    }
    if (!plain) {
        FUZZ_CHECK(r->status == 405 && r->allow);
        FUZZ_CHECK(is_json_object_with(r->body, "error"));
        return;
    }
    FUZZ_CHECK(!r->allow);
    if (strcmp(path, "/leader") == 0) {
        FUZZ_CHECK(r->status == (ld_snapshot_is_leader(s, now_ms) ? 200u : 503u));
        check_leader_json(r->body, r->len, s, now_ms);
    } else if (strcmp(path, "/watch") == 0) {
        check_watch(r, s, now_ms);
    } else if (strcmp(path, "/healthz") == 0) {
        FUZZ_CHECK(r->status == (ld_http_healthy(s, now_ms, NULL, 0) ? 200u : 500u));
        FUZZ_CHECK(r->len > 0);
    } else if (strcmp(path, "/readyz") == 0) {
        FUZZ_CHECK(r->status == (s->observed ? 200u : 503u));
    } else if (strcmp(path, "/metrics") == 0) {
        FUZZ_CHECK(r->status == 200);
        FUZZ_CHECK(r->len > 0 && r->body[r->len - 1] == '\n');
        FUZZ_CHECK(strstr(r->body, "\nleaderd_build_info{") != NULL);
    } else {
        FUZZ_CHECK(r->status == 200 && is_json_object_with(r->body, "name"));
    }
}

/* ---- shard mode ---- */

#define SHARDS 3

/* The two groups, built once: numbered 0..2 and named. */
static struct ld_shardgroup *group_of(bool named)
{
    static struct ld_shardgroup *groups[2];
    static const char *const names[SHARDS] = {"zeta", "alpha", "m"};
    struct ld_errinfo err;
    if (!groups[named]) {
        struct ld_shardgroup_config cfg = {.name = "fuzz-lease",
                                           .identity = "pod-a",
                                           .names = named ? names : NULL,
                                           .n_shards = SHARDS,
                                           .lease_duration_ms = 15000};
        groups[named] = ld_shardgroup_new(&cfg, &err);
        FUZZ_CHECK(groups[named] != NULL);
    }
    return groups[named];
}

/* Per shard: a knob byte (leading, observed, renewed, holder "pod-a" or
 * "pod-b" or free), lead_until as a delta from now, and a term; then
 * whether the table is observed and how many members. */
static struct ld_shardsnap *build_table(const uint8_t **data, size_t *size, int64_t now)
{
    static const char *const holders[] = {"", "pod-a", "pod-b", "pod-a"};
    static const char *const members[] = {"pod-a", "pod-b"};
    struct ld_shard_entry e[SHARDS];
    int64_t claims_until = now + delta(data, size);
    for (int i = 0; i < SHARDS; i++) {
        uint64_t k = fuzz_take(data, size, 1);
        memset(&e[i], 0, sizeof(e[i]));
        e[i].leading = k & 0x01;
        e[i].observed = k & 0x02;
        e[i].has_renewed_at = k & 0x04;
        e[i].leader = holders[(k >> 3) & 3];
        e[i].term = (int64_t)(fuzz_take(data, size, 4) & 0x7fffffff);
        e[i].renewed_at_us = (int64_t)(fuzz_take(data, size, 5));
    }
    uint64_t k = fuzz_take(data, size, 1);
    if (k & 0x80) /* nothing published yet */
        return NULL;
    struct ld_shardsnap *t =
        ld_shardsnap_new(k & 0x01, claims_until, e, SHARDS, members, (k >> 1) % 3);
    FUZZ_CHECK(t != NULL);
    return t;
}

static json_t *load_object(const char *body, size_t len)
{
    json_t *o = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
    FUZZ_CHECK(json_is_object(o));
    return o;
}

static bool utf8_ok(const char *s, size_t len)
{
    json_t *j = json_stringn(s, len);
    bool ok = j != NULL;
    json_decref(j);
    return ok;
}

/* /shards/ID or /shard?key=K answered for shard sh. */
static void check_one_shard(const struct ld_http_reply *r, const struct ld_shardgroup *g,
                            const struct ld_shardsnap *t, uint32_t sh, int64_t now_ms)
{
    const struct ld_shard_entry *e = ld_http_shard_entry(t, sh);
    bool ours = ld_shardsnap_leads(t, sh, now_ms);
    json_t *o = load_object(r->body, r->len);
    FUZZ_CHECK(r->status == (ours ? 200u : 503u));
    FUZZ_CHECK(json_boolean_value(json_object_get(o, "is_leader")) == ours);
    FUZZ_CHECK(strcmp(json_string_value(json_object_get(o, "shard")),
                      ld_shardgroup_shard_id(g, sh)) == 0);
    FUZZ_CHECK(strcmp(json_string_value(json_object_get(o, "leader")), e->leader) == 0);
    FUZZ_CHECK(json_integer_value(json_object_get(o, "term")) == e->term);
    json_decref(o);
}

static void check_shard_reply(const char *method, const char *path, const char *key,
                              const struct ld_http_reply *r,
                              const struct ld_shardgroup *g, const struct ld_snapshot *s,
                              const struct ld_shardsnap *t, int64_t now_ms)
{
    static const char *const gone[] = {"/leader", "/", "/resign"};
    static const char *const known[] = {"/shards",  "/shard",  "/watch",
                                        "/healthz", "/readyz", "/metrics"};
    bool plain = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool is_known = strncmp(path, "/shards/", 8) == 0;
    uint32_t sh = 0;

    FUZZ_CHECK(r->body != NULL && r->content_type != NULL);
    FUZZ_CHECK(r->len == strlen(r->body));
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        if (strcmp(path, gone[i]) == 0) {
            FUZZ_CHECK(r->status == 404 && !r->allow &&
                       is_json_object_with(r->body, "error"));
            return;
        }
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        is_known = is_known || strcmp(path, known[i]) == 0;
    if (!is_known) {
        FUZZ_CHECK(r->status == 404 && !r->allow &&
                   is_json_object_with(r->body, "error"));
        return;
    }
    if (!plain) {
        FUZZ_CHECK(r->status == 405 && r->allow && is_json_object_with(r->body, "error"));
        return;
    }
    FUZZ_CHECK(!r->allow);
    if (strncmp(path, "/shards/", 8) == 0) {
        if (!ld_shardgroup_find(g, path + 8, &sh)) {
            FUZZ_CHECK(r->status == 404 && is_json_object_with(r->body, "error"));
            return;
        }
        check_one_shard(r, g, t, sh, now_ms);
    } else if (strcmp(path, "/shard") == 0) {
        size_t len = strlen(key);
        uint64_t h = 0;
        if (!ld_shardgroup_numbered(g) || len == 0 || !utf8_ok(key, len)) {
            FUZZ_CHECK(r->status == 400 && is_json_object_with(r->body, "error"));
            return;
        }
        FUZZ_CHECK(ld_shardgroup_shard_of_key(g, key, len, &sh, &h));
        check_one_shard(r, g, t, sh, now_ms);
        char hex[LD_SHARDRANGE_HEX_SIZE];
        ld_shardrange_hex(h, hex);
        json_t *o = load_object(r->body, r->len);
        FUZZ_CHECK(strcmp(json_string_value(json_object_get(o, "hash")), hex) == 0);
        FUZZ_CHECK(json_string_length(json_object_get(o, "key")) == len);
        json_decref(o);
    } else if (strcmp(path, "/shards") == 0 || strcmp(path, "/watch") == 0) {
        static const char head[] = "event: shards\ndata: ";
        const char *json = r->body;
        size_t len = r->len;
        if (path[1] == 'w') {
            FUZZ_CHECK(r->status == 200 && strncmp(r->body, head, sizeof head - 1) == 0);
            FUZZ_CHECK(len > sizeof head + 1 && strcmp(r->body + len - 2, "\n\n") == 0);
            json += sizeof head - 1;
            len -= sizeof head - 1 + 2;
        } else {
            FUZZ_CHECK(r->status == (t && t->observed ? 200u : 503u));
        }
        json_t *o = load_object(json, len);
        json_t *shards = json_object_get(o, "shards");
        size_t owned = 0;
        FUZZ_CHECK(json_array_size(shards) == SHARDS);
        for (uint32_t i = 0; i < SHARDS; i++) {
            bool ours = ld_shardsnap_leads(t, i, now_ms);
            owned += ours;
            FUZZ_CHECK(json_boolean_value(json_object_get(json_array_get(shards, i),
                                                          "is_leader")) == ours);
        }
        FUZZ_CHECK(json_array_size(json_object_get(o, "owned")) == owned);
        json_decref(o);
    } else if (strcmp(path, "/healthz") == 0) {
        FUZZ_CHECK(r->status == (ld_http_healthy(s, now_ms, NULL, 0) ? 200u : 500u));
    } else if (strcmp(path, "/readyz") == 0) {
        FUZZ_CHECK(r->status == (s->observed ? 200u : 503u));
    } else {
        FUZZ_CHECK(r->status == 200 && strstr(r->body, "\nleaderd_build_info{") != NULL);
        FUZZ_CHECK(strstr(r->body,
                          "leader_election_master_status{name=\"fuzz-lease\"}") == NULL);
        FUZZ_CHECK(strstr(r->body, "\nleaderd_shards_owned ") != NULL);
    }
}

static void fuzz_shard_mode(const char *method, const char *path, const char *key,
                            bool named, const struct ld_snapshot *snap,
                            struct ld_metrics *m, const uint8_t *rest, size_t nrest,
                            int64_t now_ms)
{
    struct ld_http_reply reply;
    struct ld_shardgroup *g = group_of(named);
    struct ld_shardsnap *t = build_table(&rest, &nrest, now_ms);
    struct ld_http_shard_request rq = {method, path, key, strlen(key)};
    observe_all(m, rest, nrest);
    FUZZ_CHECK(ld_http_route_shards(&rq, ld_shardgroup_layout(g), snap, t, m, now_ms,
                                    &reply) == 0);
    check_shard_reply(method, path, key, &reply, g, snap, t, now_ms);
    ld_http_reply_clear(&reply);
    ld_shardsnap_unref(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_strndup(data, size);
    size_t off = 0;
    const char *method = next_field(buf, size, &off);
    const char *path = next_field(buf, size, &off);
    const char *leader = next_field(buf, size, &off);
    const char *health = next_field(buf, size, &off);
    const uint8_t *rest = data + (off < size ? off : size);
    size_t nrest = off < size ? size - off : 0;
    struct ld_snapshot snap;
    struct ld_metrics metrics;
    struct ld_http_reply reply;
    int64_t now_ms;

    uint64_t flags = build_snapshot(&snap, leader, health, &rest, &nrest, &now_ms);
    ld_metrics_init(&metrics);
    if (flags & 0x20) {
        fuzz_shard_mode(method, path, health, flags & 0x40, &snap, &metrics, rest, nrest,
                        now_ms);
        ld_metrics_destroy(&metrics);
        free(buf);
        return 0;
    }
    observe_all(&metrics, rest, nrest);

    /* Without metrics (m NULL) and with them: both must answer. */
    FUZZ_CHECK(ld_http_route(method, path, &snap, NULL, now_ms, &reply) == 0);
    check_reply(method, path, &reply, &snap, now_ms);
    ld_http_reply_clear(&reply);
    FUZZ_CHECK(reply.body == NULL);

    FUZZ_CHECK(ld_http_route(method, path, &snap, &metrics, now_ms, &reply) == 0);
    check_reply(method, path, &reply, &snap, now_ms);
    ld_http_reply_clear(&reply);

    ld_metrics_destroy(&metrics);
    free(buf);
    return 0;
}
