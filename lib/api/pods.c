/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pods: Pod label patch and labelled list over a transport.
 */
#include "pods.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnsname.h"
#include "rest.h"

#define LABEL_NAME_MAX 63
#define LABEL_PREFIX_MAX 253

static bool label_name_valid(const char *s, size_t len)
{
    if (len == 0 || len > LABEL_NAME_MAX || !isalnum((unsigned char)s[0]) ||
        !isalnum((unsigned char)s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '_' && c != '.')
            return false;
    }
    return true;
}

bool ld_label_key_valid(const char *key)
{
    char prefix[LABEL_PREFIX_MAX + 1];
    if (!key)
        return false;
    const char *slash = strchr(key, '/');
    if (!slash)
        return label_name_valid(key, strlen(key));
    size_t plen = (size_t)(slash - key);
    if (plen == 0 || plen > LABEL_PREFIX_MAX)
        return false;
    memcpy(prefix, key, plen);
    prefix[plen] = '\0';
    return ld_dns1123_subdomain(prefix) && label_name_valid(slash + 1, strlen(slash + 1));
}

char *ld_pods_label_patch(const char *key, bool value)
{
    json_t *doc =
        json_pack("{s:{s:{s:s}}}", "metadata", "labels", key, value ? "true" : "false");
    char *out = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return out;
}

void ld_pods_names_free(char **names, size_t n)
{
    if (!names)
        return;
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

enum ld_err ld_pods_decode_names(const char *body, size_t len, char ***names, size_t *n,
                                 struct ld_errinfo *err)
{
    enum ld_err rc = LD_OK;
    char **tmp = NULL;
    size_t count = 0;
    json_error_t jerr;
    json_t *doc = json_loadb(body, len, 0, &jerr);
    json_t *items = json_object_get(doc, "items");
    const char *kind = json_string_value(json_object_get(doc, "kind"));

    if (!doc || !json_is_array(items) || (kind && strcmp(kind, "PodList") != 0)) {
        rc = ld_errinfo_set(err, LD_EDECODE, "the answer is not a PodList");
        goto out;
    }
    tmp = calloc(json_array_size(items) + 1, sizeof(*tmp));
    if (!tmp) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
        if (!name || !*name) {
            rc = ld_errinfo_set(err, LD_EDECODE, "a Pod of the list has no name");
            goto out;
        }
        if (!(tmp[count] = strdup(name))) {
            rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
            goto out;
        }
        count++;
    }
    *names = tmp;
    *n = count;
    tmp = NULL;
    count = 0;
out:
    ld_pods_names_free(tmp, count);
    json_decref(doc);
    return rc;
}

static void on_done(void *ctx, ld_http_id id, const struct ld_http_result *r)
{
    struct ld_pods_call *call = ctx;
    struct ld_pods_answer a = {.seconds = r->seconds, .http_status = r->status};
    char **names = NULL;
    size_t n = 0;
    (void)id;

    a.rc = ld_rest_outcome(r, call->list ? "LIST" : "PATCH", "pods", &a.err);
    if (a.rc == LD_OK && call->list) {
        a.rc = ld_pods_decode_names(r->body, r->body_len, &names, &n, &a.err);
        a.names = names;
        a.n_names = n;
    }
    call->done(call->ctx, &a);
    ld_pods_names_free(names, n);
}

/* Query values keep only unreserved characters; the rest is %XX. */
static void escape_query(const char *s, char *out, size_t len)
{
    size_t o = 0;
    for (; *s && o + 4 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, len - o, "%%%02X", c);
    }
    out[o] = '\0';
}

static enum ld_err submit(struct ld_transport *t, const char *verb, const char *path,
                          const char *body, const char *ctype, int64_t timeout_ms,
                          struct ld_pods_call *call, ld_http_id *id,
                          struct ld_errinfo *err)
{
    struct ld_http_request req = {.verb = verb,
                                  .path = path,
                                  .body = body,
                                  .body_len = body ? strlen(body) : 0,
                                  .content_type = ctype,
                                  .timeout_ms = timeout_ms};
    return ld_transport_submit(t, &req, on_done, call, id, err);
}

enum ld_err ld_pods_patch_label(struct ld_transport *t, const char *ns, const char *pod,
                                const char *key, bool value, int64_t timeout_ms,
                                struct ld_pods_call *call, ld_http_id *id,
                                struct ld_errinfo *err)
{
    enum ld_err rc;
    char *path = NULL, *body = NULL;
    if (!ld_dns1123_label(ns) || !ld_dns1123_subdomain(pod) || !ld_label_key_valid(key)) {
        rc = ld_errinfo_set(err, LD_EINVAL, "invalid namespace, pod name or label key");
        goto out;
    }
    long long tos = timeout_ms / 1000 > 0 ? timeout_ms / 1000 : 1;
    if (asprintf(&path, "/api/v1/namespaces/%s/pods/%s?timeout=%llds", ns, pod, tos) < 0)
        path = NULL;
    body = ld_pods_label_patch(key, value);
    if (!path || !body) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    call->list = false;
    rc = submit(t, "PATCH", path, body, "application/merge-patch+json", timeout_ms, call,
                id, err);
out:
    free(path);
    free(body);
    return rc;
}

enum ld_err ld_pods_list_labelled(struct ld_transport *t, const char *ns, const char *key,
                                  const char *value, int64_t timeout_ms,
                                  struct ld_pods_call *call, ld_http_id *id,
                                  struct ld_errinfo *err)
{
    enum ld_err rc;
    char sel[3 * (LABEL_PREFIX_MAX + LABEL_NAME_MAX + 2) + 3 * 64 + 8];
    char ek[3 * (LABEL_PREFIX_MAX + LABEL_NAME_MAX + 2)], ev[3 * 64];
    char *path = NULL;
    if (!ld_dns1123_label(ns) || !ld_label_key_valid(key) || !value ||
        strlen(value) > 63) {
        rc = ld_errinfo_set(err, LD_EINVAL, "invalid namespace, label key or value");
        goto out;
    }
    escape_query(key, ek, sizeof(ek));
    escape_query(value, ev, sizeof(ev));
    snprintf(sel, sizeof(sel), "%s%%3D%s", ek, ev);
    long long tos = timeout_ms / 1000 > 0 ? timeout_ms / 1000 : 1;
    if (asprintf(&path, "/api/v1/namespaces/%s/pods?labelSelector=%s&timeout=%llds", ns,
                 sel, tos) < 0) {
        path = NULL;
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    call->list = true;
    rc = submit(t, "GET", path, NULL, NULL, timeout_ms, call, id, err);
out:
    free(path);
    return rc;
}
