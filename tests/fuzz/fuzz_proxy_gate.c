/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_proxy_gate: the API write gate's judgement, ld_proxy_judge, with the
 * method, the target (and so its percent-decoding), the shard header and the
 * header list from the input, in single or shard mode, leading or not.
 *
 * Input: KNOBS, then METHOD \0 TARGET \0 SHARD \0, with 0x20 BODY \0,
 * and up to MAX_HEADERS pairs NAME \0 VALUE \0. KNOBS: 0x01 this replica
 * leads (the Lease, or shard 0), 0x02 shard mode (the group "grp" of three
 * numbered shards), 0x04 impersonation allowed, 0x08 HTTP/1.0, 0x10 a
 * Content-Length over the limit, 0x20 the body has been read (BODY).
 *
 * Invariants: a pass for a read never takes the write path (not marked a
 * write, never cut); a refusal always carries a status, a reason and a
 * message (so the proxy answers it instead of handing it upstream), and
 * its Status body is JSON; a refusal for leadership is a 503 of a write;
 * the same request is judged the same twice; and, by oracles written here
 * independently of the gate, nothing passes that a guard must stop: a Host
 * that is not loopback with the port, a browser or impersonation header,
 * a dot segment after decoding, a write to the own Leases, a POST to the
 * own namespace's Lease collection whose body names one of them or is not
 * plain JSON (judged once the body is read; before, only a standby's
 * leadership answer may wait for it). Headers the filter forwards are
 * never Authorization, Host, Forwarded, X-Forwarded-*, X-Real-Ip or
 * X-Remote-*.
 */
#include "fuzz.h"

#include <strings.h>

#include <jansson.h>

#include "shardlayout.h"

#include "../../cmd/leaderd/proxy/proxy_gate.h"

#define NOW 1000000
#define PORT 8001
#define MAX_HEADERS 16

static struct ld_shardlayout *group;

/* libFuzzer fixes the signature. */
/* NOLINTNEXTLINE(readability-non-const-parameter) */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    group = ld_shardlayout_new("grp", NULL, 3);
    if (!group)
        abort();
    return 0;
}

/* Next NUL-terminated field of buf[*off..size); NULL past the end. */
static const char *next_field(char *buf, size_t size, size_t *off)
{
    if (*off >= size)
        return NULL;
    char *s = buf + *off;
    *off += strlen(s) + 1;
    return s;
}

/* ---- oracles ---- */

static int hex_value(char c)
{
    static const char digits[] = "0123456789abcdef";
    const char *d = c ? strchr(digits, c) : NULL;
    if (!d && c >= 'A' && c <= 'F')
        d = digits + 10 + (c - 'A');
    return d ? (int)(d - digits) : -1;
}

/* The decoded path of target: everything before '?' or '#', each "%XY" with
 * two hex digits turned into its byte. Returns a new buffer (free()), its
 * length in *len. */
static char *decoded_path(const char *target, size_t *len)
{
    size_t n = strcspn(target, "?#"), o = 0;
    char *out = malloc(n + 1);
    if (!out)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (target[i] == '%' && i + 2 < n && hex_value(target[i + 1]) >= 0 &&
            hex_value(target[i + 2]) >= 0) {
            out[o++] = (char)(hex_value(target[i + 1]) * 16 + hex_value(target[i + 2]));
            i += 2;
        } else {
            out[o++] = target[i];
        }
    }
    *len = o;
    return out;
}

/* The i-th non-empty '/'-separated segment of p[0..len) into *seg, *slen;
 * false when there are fewer. */
static bool segment(const char *p, size_t len, size_t i, const char **seg, size_t *slen)
{
    size_t k = 0, start = 0;
    for (size_t j = 0; j <= len; j++) {
        if (j < len && p[j] != '/')
            continue;
        if (j > start) {
            if (k == i) {
                *seg = p + start;
                *slen = j - start;
                return true;
            }
            k++;
        }
        start = j + 1;
    }
    return false;
}

static bool seg_eq(const char *seg, size_t slen, const char *s)
{
    return slen == strlen(s) && memcmp(seg, s, slen) == 0;
}

static bool has_dot_segment(const char *p, size_t len)
{
    const char *seg;
    size_t slen;
    for (size_t i = 0; segment(p, len, i, &seg, &slen); i++)
        if (seg_eq(seg, slen, ".") || seg_eq(seg, slen, ".."))
            return true;
    return false;
}

/* A write there would change one of the own Leases: "lease" in namespace
 * ns, or in shard mode grp-0..2 and grp-member-*, or all of them (DELETE of
 * the collection). */
static bool hits_own_lease(const char *method, const char *p, size_t len, bool shards)
{
    static const char *const fixed[] = {
        "apis", "coordination.k8s.io", NULL, "namespaces", "ns", "leases"};
    const char *seg;
    size_t slen;
    for (size_t i = 0; i < 6; i++) {
        if (!segment(p, len, i, &seg, &slen))
            return false;
        if (fixed[i] && !seg_eq(seg, slen, fixed[i]))
            return false;
    }
    if (!segment(p, len, 6, &seg, &slen))
        return strcmp(method, "DELETE") == 0;
    if (!shards)
        return seg_eq(seg, slen, "lease");
    if (seg_eq(seg, slen, "grp-0") || seg_eq(seg, slen, "grp-1") ||
        seg_eq(seg, slen, "grp-2"))
        return true;
    return slen > strlen("grp-member-") && memcmp(seg, "grp-member-", 11) == 0;
}

/* The path is the own namespace's Lease collection (a POST there creates). */
static bool own_collection(const char *p, size_t len)
{
    static const char *const fixed[] = {
        "apis", "coordination.k8s.io", NULL, "namespaces", "ns", "leases"};
    const char *seg;
    size_t slen;
    for (size_t i = 0; i < 6; i++) {
        if (!segment(p, len, i, &seg, &slen))
            return false;
        if (fixed[i] && !seg_eq(seg, slen, fixed[i]))
            return false;
    }
    return !segment(p, len, 6, &seg, &slen);
}

/* Whether the Lease name n could be made from generateName base: base cut
 * to 58 bytes, then 5 characters of any kind. */
static bool could_make(const char *base, size_t blen, const char *n, size_t nlen)
{
    if (blen == 0)
        return false;
    blen = blen > 58 ? 58 : blen;
    return nlen == blen + 5 && memcmp(base, n, blen) == 0;
}

/* A name or generateName value (generate) that is one of the own Leases:
 * "lease", or grp-0..2 and grp-member-*. */
static bool names_own(const json_t *value, bool generate, bool shards)
{
    static const char *const own_shards[] = {"grp-0", "grp-1", "grp-2"};
    static const char member[] = "grp-member-";
    const char *s = json_string_value(value);
    size_t len = json_string_length(value), mlen = strlen(member);
    if (!shards)
        return generate ? could_make(s, len, "lease", 5) : strcmp(s, "lease") == 0;
    for (size_t i = 0; i < 3; i++)
        if (generate ? could_make(s, len, own_shards[i], 5)
                     : strcmp(s, own_shards[i]) == 0)
            return true;
    if (!generate)
        return len > mlen && memcmp(s, member, mlen) == 0;
    /* A made name of the cut base and 5 characters, one that starts with
     * the member prefix and goes on, exists when they agree so far. */
    size_t cut = len > 58 ? 58 : len, k = cut < mlen ? cut : mlen;
    return len > 0 && cut + 5 > mlen && memcmp(s, member, k) == 0;
}

/* Whether a metadata value lets a create pass: null, or an object whose
 * name and generateName members (keys in any case) are null or strings
 * naming no own Lease. */
static bool metadata_harmless(const json_t *meta, bool shards)
{
    const char *key;
    json_t *value;
    if (json_is_null(meta))
        return true;
    if (!json_is_object(meta))
        return false;
    json_object_foreach((json_t *)meta, key, value)
    {
        bool generate = strcasecmp(key, "generatename") == 0;
        if (!generate && strcasecmp(key, "name") != 0)
            continue;
        if (json_is_null(value))
            continue;
        if (!json_is_string(value) || names_own(value, generate, shards))
            return false;
    }
    return true;
}

/* Whether a POST body may pass: one plain JSON object (Content-Type JSON
 * or none, no encoding, each header once, no duplicate keys) whose
 * metadata members (in any case) are harmless. */
static bool create_harmless(const char *body, size_t len, const char *ctype,
                            const char *encoding, unsigned int body_headers, bool shards)
{
    const char *key;
    json_t *value;
    bool ok = body_headers <= 1 &&
              (!encoding || !encoding[0] || strcasecmp(encoding, "identity") == 0);
    if (ok && ctype) {
        size_t n = strcspn(ctype, ";");
        while (n > 0 && (ctype[n - 1] == ' ' || ctype[n - 1] == '\t'))
            n--;
        size_t lead = strspn(ctype, " \t");
        lead = lead < n ? lead : n;
        ok = n == lead ||
             (n - lead == 16 && strncasecmp(ctype + lead, "application/json", 16) == 0);
    }
    json_t *root = ok ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    ok = json_is_object(root);
    if (ok) {
        json_object_foreach(root, key, value)
        {
            if (strcasecmp(key, "metadata") == 0 && !metadata_harmless(value, shards))
                ok = false;
        }
    }
    json_decref(root);
    return ok;
}

/* Whether a Host value could pass: it ends with the port and starts like
 * one of the loopback names. */
static bool host_plausible(const char *host)
{
    size_t n = strlen(host);
    const char *port = ":8001";
    if (n < strlen(port) || strcmp(host + n - strlen(port), port) != 0)
        return false;
    return strncmp(host, "127.", 4) == 0 || strncasecmp(host, "localhost:", 10) == 0 ||
           host[0] == '[';
}

static void check_status_body(const struct ld_proxy_verdict *v)
{
    char *body = ld_proxy_status_json(v->status, v->reason, v->message);
    FUZZ_CHECK(body != NULL);
    json_t *o = json_loads(body, 0, NULL);
    FUZZ_CHECK(json_is_object(o));
    FUZZ_CHECK(json_integer_value(json_object_get(o, "code")) == (json_int_t)v->status);
    FUZZ_CHECK(strcmp(json_string_value(json_object_get(o, "kind")), "Status") == 0);
    json_decref(o);
    free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned int knobs = data[0];
    char *buf = fuzz_strndup(data + 1, size - 1);
    size_t off = 0, n = size - 1;
    const char *method = next_field(buf, n, &off);
    const char *target = next_field(buf, n, &off);
    const char *shard = next_field(buf, n, &off);
    const char *body = (knobs & 0x20) ? next_field(buf, n, &off) : NULL;
    if (!method || !target) {
        free(buf);
        return 0;
    }

    struct ld_proxy_req req = {.method = method,
                               .target = target,
                               .shard = shard,
                               .version = (knobs & 0x08) ? "HTTP/1.0" : "HTTP/1.1",
                               .has_length = (knobs & 0x10) != 0,
                               .content_length = (uint64_t)LD_PROXY_MAX_BODY + 1,
                               .body_read = (knobs & 0x20) != 0,
                               .body = body,
                               .body_len = body ? strlen(body) : 0};
    bool browser = false, impersonate = false;
    unsigned int hosts = 0, types = 0, encodings = 0;
    const char *host = NULL, *ctype = NULL, *encoding = NULL;
    for (int i = 0; i < MAX_HEADERS; i++) {
        const char *name = next_field(buf, n, &off);
        const char *value = next_field(buf, n, &off);
        if (!name)
            break;
        ld_proxy_req_note_header(&req, name, value);
        if (strcasecmp(name, "host") == 0 && hosts++ == 0)
            host = value ? value : "";
        browser |=
            strcasecmp(name, "origin") == 0 || strcasecmp(name, "sec-fetch-site") == 0;
        impersonate |= strncasecmp(name, "impersonate-", 12) == 0;
        if (strcasecmp(name, "content-type") == 0 && types++ == 0)
            ctype = value ? value : "";
        if (strcasecmp(name, "content-encoding") == 0 && encodings++ == 0)
            encoding = value ? value : "";
        if (ld_proxy_forward_request_header(name, NULL))
            FUZZ_CHECK(strcasecmp(name, "authorization") != 0 &&
                       strcasecmp(name, "host") != 0 &&
                       strcasecmp(name, "forwarded") != 0 &&
                       strcasecmp(name, "x-real-ip") != 0 &&
                       strncasecmp(name, "x-forwarded-", 12) != 0 &&
                       strncasecmp(name, "x-remote-", 9) != 0);
    }

    struct ld_snapshot s;
    memset(&s, 0, sizeof(s));
    bool shards = knobs & 0x02;
    snprintf(s.lease, sizeof(s.lease), shards ? "ns/grp" : "ns/lease");
    snprintf(s.identity, sizeof(s.identity), "me");
    snprintf(s.leader, sizeof(s.leader), (knobs & 0x01) ? "me" : "other");
    s.observed = true;
    s.leading = knobs & 0x01;
    s.lead_until_ms = s.leading ? NOW + 500 : 0;
    s.term_until_ms = s.leading ? s.lead_until_ms : INT64_MIN;
    struct ld_shard_entry e[3] = {
        {.leader = "", .observed = true},
        {.leader = "other", .observed = true},
        {.leader = "", .observed = false},
    };
    if (s.leading)
        e[0] = (struct ld_shard_entry){.leader = "me", .observed = true, .leading = true};
    const char *members[] = {"me", "other"};
    struct ld_shardsnap *table =
        shards ? ld_shardsnap_new(true, NOW + 500, e, 3, members, 2) : NULL;
    if (shards && !table)
        abort();
    struct ld_proxy_view view = {
        .snap = &s, .layout = shards ? group : NULL, .shards = table};
    struct ld_proxy_policy pol = {.port = PORT, .impersonation = (knobs & 0x04) != 0};

    struct ld_proxy_verdict v, again;
    ld_proxy_judge(&req, &pol, &view, NOW, &v);
    ld_proxy_judge(&req, &pol, &view, NOW, &again);
    FUZZ_CHECK(v.status == again.status && v.write == again.write &&
               v.refused == again.refused && strcmp(v.message, again.message) == 0);

    bool read = ld_proxy_is_read(method);
    size_t plen;
    char *path = decoded_path(target, &plen);
    if (v.status == 0) {
        /* Nothing passes that a guard must stop. */
        FUZZ_CHECK(hosts <= 1);
        FUZZ_CHECK(host ? host_plausible(host) : (knobs & 0x08) != 0);
        FUZZ_CHECK(!browser);
        FUZZ_CHECK(!impersonate || pol.impersonation);
        FUZZ_CHECK(!has_dot_segment(path, plen));
        FUZZ_CHECK(read || !hits_own_lease(method, path, plen, shards));
        FUZZ_CHECK(!(knobs & 0x10));
        bool create = strcmp(method, "POST") == 0 && own_collection(path, plen);
        FUZZ_CHECK(!create || !req.body_read ||
                   create_harmless(body, req.body_len, ctype, encoding,
                                   types > encodings ? types : encodings, shards));
        /* Only a standby's answer to such a create waits for its body. */
        FUZZ_CHECK(!v.body_pending || (create && !req.body_read && !s.leading));
        /* A read never takes the write path: not gated, never cut. */
        if (read) {
            FUZZ_CHECK(!v.write);
            FUZZ_CHECK(ld_proxy_still_leads(&v, &view, NOW + 1000000, NULL));
        } else {
            FUZZ_CHECK(v.write && (s.leading || v.body_pending));
        }
    } else {
        /* A refusal is answered, never handed upstream. */
        FUZZ_CHECK(v.reason && v.reason[0] && v.message[0]);
        FUZZ_CHECK(strlen(v.message) < sizeof(v.message));
        FUZZ_CHECK(v.status == 400 || v.status == 403 || v.status == 404 ||
                   v.status == 413 || v.status == 501 || v.status == 503);
        FUZZ_CHECK(!v.refused || (v.status == 503 && v.write && !read));
        FUZZ_CHECK(!read || (v.status != 503 && v.status != 404));
        check_status_body(&v);
    }
    free(path);
    ld_shardsnap_unref(table);
    free(buf);
    return 0;
}
