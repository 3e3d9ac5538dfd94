/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy_gate: the write gate's decisions (see proxy_gate.h).
 */
#include "proxy_gate.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

/* Request headers that hand the API server an identity to act as. */
#define IMPERSONATE_PREFIX "Impersonate-"
/* A member Lease is named GROUP-member-IDENTITY (shardgroup.h). */
#define MEMBER_INFIX "-member-"
/* The longest path segment the Lease rule compares: a Lease name (a
 * DNS-1123 subdomain) or a namespace; a longer segment names neither. */
#define SEG_MAX 253
/* The segments of /apis/coordination.k8s.io/VERSION/namespaces/NS/leases/NAME. */
#define SEG_KEEP 7
/* The API server makes a name from generateName by cutting it to 58 bytes
 * and appending 5 random characters (k8s.io/apiserver names). */
#define GENERATED_BASE_MAX 58
#define GENERATED_SUFFIX 5

/* What the gate judges differently for one Lease and for a shard group:
 * one table per mode, chosen once per view (mode_of). */
struct gate_mode {
    /* A write's target: the shard it names (out->shard); false with out
     * answered when it names none this group has. */
    bool (*target)(const struct ld_proxy_req *req, const struct ld_proxy_view *v,
                   struct ld_proxy_verdict *out);
    /* Whether this replica leads (the Lease, or the shard) at now_ms. */
    bool (*leads)(const struct ld_proxy_view *v, uint32_t shard, int64_t now_ms);
    /* Fills out with the 503 of a write this replica may not make. */
    void (*refuse)(const struct ld_proxy_view *v, uint32_t shard,
                   struct ld_proxy_verdict *out);
    /* Whether a Lease name (see own_name) or one the API server could make
     * from a generateName base (see own_generated) is one of v's. */
    bool (*own_name)(const struct ld_proxy_view *v, const char *name, size_t len);
    bool (*own_generated)(const struct ld_proxy_view *v, const char *base, size_t len,
                          size_t made);
    /* The 403s of a DELETE of the whole collection and of a write of one
     * of v's Leases (its name, quoted, in seg). */
    void (*refuse_delete_all)(const struct ld_proxy_view *v,
                              struct ld_proxy_verdict *out);
    void (*refuse_own_write)(const struct ld_proxy_view *v, const char *seg,
                             struct ld_proxy_verdict *out);
    /* How the 403 of a create names what it would make: what (its kind),
     * which (its name) and this replica's role with it. */
    const char *what, *role;
    const char *(*which)(const struct ld_proxy_view *v);
    /* The deadlines of passed's claim (ld_proxy_lead_until) and of its
     * term (ld_proxy_term_until). */
    int64_t (*lead_until)(const struct ld_proxy_view *v, uint32_t shard);
    int64_t (*term_until)(const struct ld_proxy_view *v, uint32_t shard);
};

static const struct gate_mode *mode_of(const struct ld_proxy_view *v);

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
    static const char *const own[] = {
        "Authorization", "Host",      "Content-Length",     "Expect",
        "Forwarded",     "X-Real-Ip", LD_PROXY_SHARD_HEADER};
    /* Who the client is, as a front proxy tells the API server: the app
     * speaks for nobody but itself (see proxy_gate.h). */
    static const char *const claims[] = {"X-Forwarded-", "X-Remote-"};
    if (!name || !name[0])
        return false;
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (strcasecmp(name, own[i]) == 0)
            return false;
    for (size_t i = 0; i < sizeof(claims) / sizeof(claims[0]); i++)
        if (strncasecmp(name, claims[i], strlen(claims[i])) == 0)
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

/* What a message quotes of the client's request: printable ASCII, anything
 * else as '?', cut to fit buf. The Status body is JSON, which takes only
 * valid UTF-8, and the client's bytes need not be. Returns buf. */
static const char *shown(const char *s, char *buf, size_t len)
{
    size_t i = 0;
    for (; s && s[i] && i + 1 < len; i++) {
        buf[i] = '?';
        if (s[i] >= 0x20 && s[i] < 0x7f)
            buf[i] = s[i];
    }
    buf[i] = '\0';
    return buf;
}

/* Fills out with the refusal for the Lease of v (single mode). */
static void refuse_single(const struct ld_proxy_view *v, uint32_t shard,
                          struct ld_proxy_verdict *out)
{
    const struct ld_snapshot *s = v->snap;
    (void)shard;
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
    const char *id = v->layout->shards[shard].id;
    const char *lease = v->layout->shards[shard].lease;
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
               "write refused by leaderd: %s (this replica) no longer claims shard %s "
               "(Lease %s): it is being given back, or the replica's member Lease "
               "was not renewed in time",
               v->snap->identity, id, lease);
    else
        answer(out, 503, "ServiceUnavailable",
               "write refused by leaderd: %s does not own shard %s (Lease %s); the "
               "holder is %s",
               v->snap->identity, id, lease, e->leader);
}

static bool leads_single(const struct ld_proxy_view *v, uint32_t shard, int64_t now_ms)
{
    (void)shard;
    return ld_snapshot_is_leader(v->snap, now_ms);
}

static bool leads_shard(const struct ld_proxy_view *v, uint32_t shard, int64_t now_ms)
{
    return ld_shardsnap_leads(v->shards, shard, now_ms);
}

/* One Lease: every write is of it. */
static bool target_single(const struct ld_proxy_req *req, const struct ld_proxy_view *v,
                          struct ld_proxy_verdict *out)
{
    (void)req;
    (void)v;
    (void)out;
    return true;
}

/* A shard group: a write names its shard in LD_PROXY_SHARD_HEADER. */
static bool target_shard(const struct ld_proxy_req *req, const struct ld_proxy_view *v,
                         struct ld_proxy_verdict *out)
{
    char quoted[201];
    if (!req->shard || !req->shard[0]) {
        answer(out, 400, "BadRequest",
               "leaderd runs a shard group: a write through its API proxy must name "
               "its shard in the " LD_PROXY_SHARD_HEADER " header");
        return false;
    }
    if (!ld_shardlayout_find(v->layout, req->shard, &out->shard)) {
        answer(out, 404, "NotFound", "no shard \"%s\" in the shard group %s",
               shown(req->shard, quoted, sizeof(quoted)), v->layout->name);
        return false;
    }
    return true;
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
    const struct gate_mode *mode = mode_of(v);
    if (!mode->target(req, v, out) || mode->leads(v, out->shard, now_ms))
        return;
    mode->refuse(v, out->shard, out);
}

/* ---- the guards of ld_proxy_judge ---- */

void ld_proxy_req_note_header(struct ld_proxy_req *req, const char *name,
                              const char *value)
{
    if (!name)
        return;
    if (strcasecmp(name, "Host") == 0) {
        if (req->hosts == 0)
            req->host = value ? value : "";
        if (req->hosts < UINT_MAX)
            req->hosts++;
    } else if (!req->browser && (strcasecmp(name, "Origin") == 0 ||
                                 strcasecmp(name, "Sec-Fetch-Site") == 0)) {
        req->browser = name;
    } else if (!req->impersonate &&
               strncasecmp(name, IMPERSONATE_PREFIX, strlen(IMPERSONATE_PREFIX)) == 0) {
        req->impersonate = name;
    } else if (strcasecmp(name, "Content-Type") == 0) {
        req->body_headers_repeated |= req->content_type != NULL;
        if (!req->content_type)
            req->content_type = value ? value : "";
    } else if (strcasecmp(name, "Content-Encoding") == 0) {
        req->body_headers_repeated |= req->content_encoding != NULL;
        if (!req->content_encoding)
            req->content_encoding = value ? value : "";
    }
}

/* True when rest, what follows the host in a Host value, is ":PORT" with
 * port in plain decimal (as a browser writes it), or nothing and port is
 * HTTP's default. */
static bool host_port_is(const char *rest, int port)
{
    if (*rest == '\0')
        return port == 80;
    if (*rest++ != ':')
        return false;
    size_t n = strlen(rest);
    if (n == 0 || n > 5 || strspn(rest, "0123456789") != n || rest[0] == '0')
        return false;
    int value = 0;
    for (size_t i = 0; i < n; i++)
        value = value * 10 + (rest[i] - '0');
    return value == port;
}

/* True when a Host value names this proxy: localhost, 127.x.y.z or [::1]
 * (any spelling inet_pton reads as it), with its port. A DNS name that was
 * rebound to a loopback address is not one of them. */
static bool host_is_loopback(const char *host, int port)
{
    char lit[INET6_ADDRSTRLEN];
    const char *rest;
    size_t n;
    if (host[0] == '[') {
        const char *close = strchr(host, ']');
        struct in6_addr a6;
        n = close ? (size_t)(close - host - 1) : sizeof(lit);
        if (n >= sizeof(lit))
            return false;
        memcpy(lit, host + 1, n);
        lit[n] = '\0';
        if (inet_pton(AF_INET6, lit, &a6) != 1 || !IN6_IS_ADDR_LOOPBACK(&a6))
            return false;
        rest = close + 1;
    } else {
        struct in_addr a4;
        n = strcspn(host, ":");
        rest = host + n;
        if (n != strlen("localhost") || strncasecmp(host, "localhost", n) != 0) {
            if (n >= sizeof(lit))
                return false;
            memcpy(lit, host, n);
            lit[n] = '\0';
            if (inet_pton(AF_INET, lit, &a4) != 1 || (ntohl(a4.s_addr) >> 24) != 127)
                return false;
        }
    }
    return host_port_is(rest, port);
}

/* The path of a request target as the API server sees it: percent-decoded,
 * split at '/', empty segments left out. The first SEG_KEEP segments are
 * kept for the Lease rule. */
struct path_segs {
    char seg[SEG_KEEP][SEG_MAX + 1]; /* NUL-terminated; at most SEG_MAX bytes */
    size_t len[SEG_KEEP];            /* SEG_MAX + 1: longer, only its start kept */
    size_t n;                        /* the segments */
    bool dot;                        /* a "." or ".." segment */
};

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes the byte at p (< end) into *out: "%XY" is the byte 0xXY; a '%'
 * without two hex digits stays itself (the API server refuses such a
 * path). Returns the characters used. */
static size_t decode_byte(const char *p, const char *end, unsigned char *out)
{
    if (*p == '%' && end - p >= 3 && hex_digit(p[1]) >= 0 && hex_digit(p[2]) >= 0) {
        *out = (unsigned char)(hex_digit(p[1]) * 16 + hex_digit(p[2]));
        return 3;
    }
    *out = (unsigned char)*p;
    return 1;
}

static void end_segment(struct path_segs *ps, const char *seg, size_t len)
{
    if (len == 0)
        return;
    if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
        ps->dot = true;
    if (ps->n < SEG_KEEP) {
        /* A longer segment names no Lease but may start like a member
         * Lease (own_name), so its start is kept too. */
        size_t kept = len <= SEG_MAX ? len : SEG_MAX;
        ps->len[ps->n] = len;
        memcpy(ps->seg[ps->n], seg, kept);
        ps->seg[ps->n][kept] = '\0';
    }
    ps->n++;
}

/* Splits the path of target (up to '?', or '#', which libcurl does not
 * send) into ps. An encoded '/' separates segments too: the API server
 * routes by the decoded path. */
static void split_path(const char *target, struct path_segs *ps)
{
    char seg[SEG_MAX + 1];
    size_t len = 0;
    ps->n = 0;
    ps->dot = false;
    if (!target)
        return;
    const char *end = target + strcspn(target, "?#");
    for (const char *p = target; p < end;) {
        unsigned char c;
        p += decode_byte(p, end, &c);
        if (c == '/') {
            end_segment(ps, seg, len);
            len = 0;
            continue;
        }
        /* Past SEG_MAX only the length counts, and it stops at SEG_MAX + 1. */
        if (len <= SEG_MAX)
            seg[len++] = (char)c;
    }
    end_segment(ps, seg, len);
}

static bool seg_is_n(const struct path_segs *ps, size_t i, const char *s, size_t n)
{
    return i < ps->n && i < SEG_KEEP && ps->len[i] == n && memcmp(ps->seg[i], s, n) == 0;
}

static bool seg_is(const struct path_segs *ps, size_t i, const char *s)
{
    return seg_is_n(ps, i, s, strlen(s));
}

/* True when the first n bytes of s are those of the concatenation a b
 * (n at most their lengths together). */
static bool starts_like(const char *s, size_t n, const char *a, const char *b)
{
    size_t alen = strlen(a);
    size_t k = n < alen ? n : alen;
    return memcmp(s, a, k) == 0 && memcmp(s + k, b, n - k) == 0;
}

/* True when the Lease name (len bytes, of which at least SEG_MAX or all
 * are readable) is one of v's: the election's, or in shard mode a shard
 * Lease or any replica's member Lease. Whatever starts like a member Lease
 * counts, however long: refusing a name the API server would refuse costs
 * nothing. */
static bool own_name(const struct ld_proxy_view *v, const char *name, size_t len)
{
    const struct gate_mode *mode = mode_of(v);
    return mode->own_name(v, name, len);
}

static bool own_name_single(const struct ld_proxy_view *v, const char *name, size_t len)
{
    const char *lease = strchr(v->snap->lease, '/') + 1;
    return len == strlen(lease) && memcmp(name, lease, len) == 0;
}

static bool own_name_shard(const struct ld_proxy_view *v, const char *name, size_t len)
{
    const char *group = v->layout->name;
    size_t plen = strlen(group) + strlen(MEMBER_INFIX);
    if (len > plen && plen <= SEG_MAX && starts_like(name, plen, group, MEMBER_INFIX))
        return true;
    for (uint32_t s = 0; s < v->layout->n_shards; s++) {
        const char *lease = v->layout->shards[s].lease;
        if (len == strlen(lease) && memcmp(name, lease, len) == 0)
            return true;
    }
    return false;
}

/* True when the API server could name a Lease of v from the generateName
 * base (len bytes): it cuts base to GENERATED_BASE_MAX bytes and appends
 * GENERATED_SUFFIX random characters (names.SimpleNameGenerator). Which
 * characters those are is not relied on. */
static bool own_generated(const struct ld_proxy_view *v, const char *base, size_t len)
{
    if (len == 0)
        return false; /* none: the API server then needs a name */
    if (len > GENERATED_BASE_MAX)
        len = GENERATED_BASE_MAX;
    const struct gate_mode *mode = mode_of(v);
    return mode->own_generated(v, base, len, len + GENERATED_SUFFIX);
}

/* own_generated's judgement of base (len bytes, cut) growing to made bytes. */
static bool own_generated_single(const struct ld_proxy_view *v, const char *base,
                                 size_t len, size_t made)
{
    const char *lease = strchr(v->snap->lease, '/') + 1;
    return made == strlen(lease) && memcmp(base, lease, len) == 0;
}

static bool own_generated_shard(const struct ld_proxy_view *v, const char *base,
                                size_t len, size_t made)
{
    /* A member Lease: the made name starts with GROUP-member- and goes on. */
    const char *group = v->layout->name;
    size_t plen = strlen(group) + strlen(MEMBER_INFIX);
    if (made > plen && starts_like(base, len < plen ? len : plen, group, MEMBER_INFIX))
        return true;
    for (uint32_t s = 0; s < v->layout->n_shards; s++) {
        const char *lease = v->layout->shards[s].lease;
        if (made == strlen(lease) && memcmp(base, lease, len) == 0)
            return true;
    }
    return false;
}

/* The 403s for a DELETE of the own namespace's Lease collection. */
static void refuse_delete_all_shard(const struct ld_proxy_view *v,
                                    struct ld_proxy_verdict *out)
{
    const struct ld_snapshot *s = v->snap;
    int nslen = (int)(strchr(s->lease, '/') - s->lease);
    answer(out, 403, "Forbidden",
           "write refused by leaderd: deleting the Leases of namespace %.*s would "
           "delete those of the shard group %s that %s (this replica) belongs "
           "to; only leaderd writes them",
           nslen, s->lease, v->layout->name, s->identity);
}

static void refuse_delete_all_single(const struct ld_proxy_view *v,
                                     struct ld_proxy_verdict *out)
{
    const struct ld_snapshot *s = v->snap;
    int nslen = (int)(strchr(s->lease, '/') - s->lease);
    answer(out, 403, "Forbidden",
           "write refused by leaderd: deleting the Leases of namespace %.*s would "
           "delete the Lease %s of %s (this replica); only leaderd writes it",
           nslen, s->lease, s->lease, s->identity);
}

/* True when the media type of a Content-Type value is application/json
 * (parameters aside); no value counts, as the API server then reads JSON. */
static bool json_media(const char *type)
{
    if (!type)
        return true;
    type += strspn(type, " \t");
    size_t n = strcspn(type, ";");
    while (n > 0 && (type[n - 1] == ' ' || type[n - 1] == '\t'))
        n--;
    return n == 0 || (n == strlen("application/json") &&
                      strncasecmp(type, "application/json", n) == 0);
}

/* True when the body's headers let the gate read it as the API server
 * will: JSON, not encoded, each header once. */
static bool body_plain_json(const struct ld_proxy_req *req)
{
    const char *enc = req->content_encoding;
    return !req->body_headers_repeated && json_media(req->content_type) &&
           (!enc || !enc[0] || strcasecmp(enc, "identity") == 0);
}

/* What a create body names: a Lease of the group, or nothing that could
 * be, or something the gate cannot read. */
enum create_find { CREATE_HARMLESS, CREATE_OWN, CREATE_UNREADABLE };

/* Judges the name or generateName value of a metadata (generate: a
 * generateName); *hit is set to the string that names an own Lease. */
static enum create_find judge_name(const struct ld_proxy_view *v, const json_t *value,
                                   bool generate, const char **hit)
{
    if (json_is_null(value))
        return CREATE_HARMLESS;
    if (!json_is_string(value))
        return CREATE_UNREADABLE;
    const char *s = json_string_value(value);
    size_t len = json_string_length(value);
    if (!(generate ? own_generated(v, s, len) : own_name(v, s, len)))
        return CREATE_HARMLESS;
    *hit = s;
    return CREATE_OWN;
}

/* Judges every name and generateName of one metadata, keys in any case:
 * the API server matches them exactly, the gate does not rely on it. The
 * first own name found wins; *field says which key it was under. */
static enum create_find judge_metadata(const struct ld_proxy_view *v, json_t *meta,
                                       const char **field, const char **hit)
{
    enum create_find found = CREATE_HARMLESS;
    const char *key;
    json_t *value;
    if (json_is_null(meta))
        return CREATE_HARMLESS;
    if (!json_is_object(meta))
        return CREATE_UNREADABLE;
    json_object_foreach(meta, key, value)
    {
        bool generate = strcasecmp(key, "generateName") == 0;
        if (!generate && strcasecmp(key, "name") != 0)
            continue;
        enum create_find f = judge_name(v, value, generate, hit);
        if (f == CREATE_OWN) {
            *field = generate ? "metadata.generateName" : "metadata.name";
            return f;
        }
        if (f == CREATE_UNREADABLE)
            found = f;
    }
    return found;
}

/* Judges a create body (see ld_proxy_judge). *field and *hit point into
 * *root, which the caller releases (json_decref) once done with them. */
static enum create_find judge_create(const struct ld_proxy_req *req,
                                     const struct ld_proxy_view *v, json_t **root,
                                     const char **field, const char **hit)
{
    enum create_find found = CREATE_HARMLESS;
    const char *key;
    json_t *value;
    if (!body_plain_json(req))
        return CREATE_UNREADABLE;
    *root = json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES,
                       NULL);
    if (!json_is_object(*root))
        return CREATE_UNREADABLE;
    json_object_foreach(*root, key, value)
    {
        if (strcasecmp(key, "metadata") != 0)
            continue;
        enum create_find f = judge_metadata(v, value, field, hit);
        if (f == CREATE_OWN)
            return f;
        if (f == CREATE_UNREADABLE)
            found = f;
    }
    return found;
}

/* The 403 for a create body judged own (field and hit set) or unreadable. */
static void refuse_create(const struct ld_proxy_view *v, enum create_find found,
                          const char *field, const char *hit,
                          struct ld_proxy_verdict *out)
{
    const struct ld_snapshot *s = v->snap;
    int nslen = (int)(strchr(s->lease, '/') - s->lease);
    const struct gate_mode *mode = mode_of(v);
    const char *what = mode->what, *which = mode->which(v), *role = mode->role;
    char quoted[101];
    if (found == CREATE_OWN)
        answer(out, 403, "Forbidden",
               "write refused by leaderd: this POST to the Leases of namespace %.*s "
               "would create %s %s that %s (this replica) %s (%s \"%s\"); only "
               "leaderd writes it",
               nslen, s->lease, what, which, s->identity, role, field,
               shown(hit, quoted, sizeof(quoted)));
    else
        answer(out, 403, "Forbidden",
               "write refused by leaderd: a POST to the Leases of namespace %.*s could "
               "create %s %s that %s (this replica) %s, and leaderd cannot read this "
               "body to tell (it reads one JSON object, Content-Type application/json, "
               "no Content-Encoding); only leaderd writes it",
               nslen, s->lease, what, which, s->identity, role);
}

/* Fills out with a 403 and returns true for a POST to the own namespace's
 * Lease collection whose body would create one of v's Leases, or that the
 * gate cannot read (see ld_proxy_judge). */
static bool own_lease_create(const struct ld_proxy_req *req,
                             const struct ld_proxy_view *v, struct ld_proxy_verdict *out)
{
    json_t *root = NULL;
    const char *field = NULL, *hit = NULL;
    enum create_find found = judge_create(req, v, &root, &field, &hit);
    if (found != CREATE_HARMLESS)
        refuse_create(v, found, field, hit, out);
    json_decref(root);
    return found != CREATE_HARMLESS;
}

/* True when ps starts with the path of the Lease collection of s's
 * namespace: /apis/coordination.k8s.io/VERSION/namespaces/NS/leases. */
static bool own_collection(const struct path_segs *ps, const struct ld_snapshot *s)
{
    const char *slash = strchr(s->lease, '/');
    return slash && ps->n >= 6 && seg_is(ps, 0, "apis") &&
           seg_is(ps, 1, "coordination.k8s.io") && seg_is(ps, 3, "namespaces") &&
           seg_is_n(ps, 4, s->lease, (size_t)(slash - s->lease)) &&
           seg_is(ps, 5, "leases");
}

/* Fills out with a 403 and returns true for a write to one of this
 * replica's own Leases (see ld_proxy_judge). */
static bool own_lease_write(const struct ld_proxy_req *req, const struct path_segs *ps,
                            const struct ld_proxy_view *v, struct ld_proxy_verdict *out)
{
    const struct ld_snapshot *s = v->snap;
    char quoted[SEG_MAX + 1];
    if (!own_collection(ps, s))
        return false;
    if (ps->n == 6) {
        if (strcmp(req->method, "DELETE") == 0) {
            const struct gate_mode *mode = mode_of(v);
            mode->refuse_delete_all(v, out);
            return true;
        }
        /* Before the body is read nothing tells; the proxy judges again. */
        if (strcmp(req->method, "POST") == 0 && req->body_read)
            return own_lease_create(req, v, out);
        return false;
    }
    if (!own_name(v, ps->seg[6], ps->len[6]))
        return false;
    const struct gate_mode *mode = mode_of(v);
    mode->refuse_own_write(v, shown(ps->seg[6], quoted, sizeof(quoted)), out);
    return true;
}

static void refuse_own_write_shard(const struct ld_proxy_view *v, const char *seg,
                                   struct ld_proxy_verdict *out)
{
    const struct ld_snapshot *s = v->snap;
    const char *slash = strchr(s->lease, '/');
    answer(out, 403, "Forbidden",
           "write refused by leaderd: the Lease %.*s/%s belongs to the shard group "
           "%s that %s (this replica) belongs to; only leaderd writes it",
           (int)(slash - s->lease), s->lease, seg, v->layout->name, s->identity);
}

static void refuse_own_write_single(const struct ld_proxy_view *v, const char *seg,
                                    struct ld_proxy_verdict *out)
{
    const struct ld_snapshot *s = v->snap;
    (void)seg;
    answer(out, 403, "Forbidden",
           "write refused by leaderd: the Lease %s is the one %s (this replica) holds "
           "its election with; only leaderd writes it",
           s->lease, s->identity);
}

void ld_proxy_judge(const struct ld_proxy_req *req, const struct ld_proxy_policy *pol,
                    const struct ld_proxy_view *v, int64_t now_ms,
                    struct ld_proxy_verdict *out)
{
    const char *me = v->snap->identity;
    struct path_segs ps;
    char quoted[101];
    memset(out, 0, sizeof(*out));
    if (req->hosts > 1) {
        answer(out, 403, "Forbidden",
               "request refused by leaderd: the API proxy of %s takes one Host header, "
               "not %u",
               me, req->hosts);
        return;
    }
    if (!req->host && !(req->version && strcmp(req->version, "HTTP/1.0") == 0)) {
        answer(out, 403, "Forbidden",
               "request refused by leaderd: the API proxy of %s needs a Host header "
               "naming it (localhost, 127.x.y.z or [::1] with port %d)",
               me, pol->port);
        return;
    }
    if (req->host && !host_is_loopback(req->host, pol->port)) {
        answer(out, 403, "Forbidden",
               "request refused by leaderd: the API proxy of %s serves only requests "
               "addressed to it; Host \"%s\" is not localhost, 127.x.y.z or [::1] "
               "with port %d",
               me, shown(req->host, quoted, sizeof(quoted)), pol->port);
        return;
    }
    if (req->browser) {
        answer(out, 403, "Forbidden",
               "request refused by leaderd: the API proxy of %s does not serve "
               "browsers (the request has a %s header)",
               me, shown(req->browser, quoted, sizeof(quoted)));
        return;
    }
    if (req->impersonate && !pol->impersonation) {
        answer(out, 403, "Forbidden",
               "request refused by leaderd: the API proxy of %s does not forward "
               "impersonation (the request has a %s header; see "
               "--api-proxy-impersonation)",
               me, shown(req->impersonate, quoted, sizeof(quoted)));
        return;
    }
    split_path(req->target, &ps);
    if (ps.dot) {
        answer(out, 400, "BadRequest",
               "request refused by leaderd: the API proxy of %s does not forward a path "
               "with \".\" or \"..\" segments, percent-encoded or not",
               me);
        return;
    }
    if (req->method && !ld_proxy_is_read(req->method) &&
        own_lease_write(req, &ps, v, out))
        return;
    ld_proxy_decide(req, v, now_ms, out);
    /* A create in the own namespace may yet be a 403, which does not
     * depend on who leads: the leadership's answer waits for the body. */
    if (out->refused && !req->body_read && req->method &&
        strcmp(req->method, "POST") == 0 && ps.n == 6 && own_collection(&ps, v->snap)) {
        uint32_t shard = out->shard;
        memset(out, 0, sizeof(*out));
        out->write = true;
        out->shard = shard;
        out->body_pending = true;
    }
}

bool ld_proxy_still_leads(const struct ld_proxy_verdict *passed,
                          const struct ld_proxy_view *v, int64_t now_ms,
                          struct ld_proxy_verdict *refusal)
{
    const struct gate_mode *mode = mode_of(v);
    if (!passed->write || mode->leads(v, passed->shard, now_ms))
        return true;
    if (refusal) {
        memset(refusal, 0, sizeof(*refusal));
        refusal->write = true;
        refusal->shard = passed->shard;
        mode->refuse(v, passed->shard, refusal);
    }
    return false;
}

int64_t ld_proxy_lead_until(const struct ld_proxy_verdict *passed,
                            const struct ld_proxy_view *v)
{
    const struct gate_mode *mode = mode_of(v);
    return mode->lead_until(v, passed->shard);
}

int64_t ld_proxy_term_until(const struct ld_proxy_verdict *passed,
                            const struct ld_proxy_view *v)
{
    const struct gate_mode *mode = mode_of(v);
    return mode->term_until(v, passed->shard);
}

static int64_t lead_until_single(const struct ld_proxy_view *v, uint32_t shard)
{
    (void)shard;
    return v->snap->leading ? v->snap->lead_until_ms : INT64_MIN;
}

static int64_t lead_until_shard(const struct ld_proxy_view *v, uint32_t shard)
{
    return ld_shardsnap_lead_until(v->shards, shard);
}

static int64_t term_until_single(const struct ld_proxy_view *v, uint32_t shard)
{
    (void)shard;
    return v->snap->term_until_ms;
}

static int64_t term_until_shard(const struct ld_proxy_view *v, uint32_t shard)
{
    return ld_shardsnap_term_until(v->shards, shard);
}

static const char *which_single(const struct ld_proxy_view *v)
{
    return v->snap->lease;
}

static const char *which_shard(const struct ld_proxy_view *v)
{
    return v->layout->name;
}

static const struct gate_mode single_gate = {
    .target = target_single,
    .leads = leads_single,
    .refuse = refuse_single,
    .own_name = own_name_single,
    .own_generated = own_generated_single,
    .refuse_delete_all = refuse_delete_all_single,
    .refuse_own_write = refuse_own_write_single,
    .what = "the Lease",
    .role = "holds its election with",
    .which = which_single,
    .lead_until = lead_until_single,
    .term_until = term_until_single,
};

static const struct gate_mode shard_gate = {
    .target = target_shard,
    .leads = leads_shard,
    .refuse = refuse_shard,
    .own_name = own_name_shard,
    .own_generated = own_generated_shard,
    .refuse_delete_all = refuse_delete_all_shard,
    .refuse_own_write = refuse_own_write_shard,
    .what = "a Lease of the shard group",
    .role = "belongs to",
    .which = which_shard,
    .lead_until = lead_until_shard,
    .term_until = term_until_shard,
};

/* The view's mode: a view with a shard layout is a shard group's. */
static const struct gate_mode *mode_of(const struct ld_proxy_view *v)
{
    return v->layout ? &shard_gate : &single_gate;
}

bool ld_proxy_sent_may_run(const struct ld_proxy_verdict *passed,
                           const struct ld_proxy_view *v, int64_t now_ms)
{
    return !passed->write || now_ms < ld_proxy_term_until(passed, v);
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
