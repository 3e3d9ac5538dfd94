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
 */
#include "fuzz.h"

#include <math.h>

#include <jansson.h>

#include "../../cmd/leaderd/http.h"

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

static void build_snapshot(struct ld_snapshot *s, const char *leader, const char *health,
                           const uint8_t **data, size_t *size, int64_t *now_ms)
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
    s->heartbeat_ms = *now_ms + delta(data, size);
    s->stale_after_ms = delta(data, size);
    s->renewed_at_us = (int64_t)fuzz_take(data, size, 8);
    s->last_renew_wall_us = (int64_t)fuzz_take(data, size, 8);
    s->term = (int64_t)fuzz_take(data, size, 8);
    s->transitions_seen = (int64_t)fuzz_take(data, size, 8);
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

    build_snapshot(&snap, leader, health, &rest, &nrest, &now_ms);
    ld_metrics_init(&metrics);
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
