/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pods: the two Pod REST calls --pod-label needs, asynchronous over a
 * transport (transport.h): a JSON merge patch of one label of one Pod, and
 * a list of a namespace's Pods by a label selector, reduced to their names.
 * Requests are built and answers decoded here; there is no daemon state, no
 * retry and no blocking: the caller drives the transport and decides what
 * a failure means.
 *
 * Ownership: the caller owns the struct ld_pods_call; it must stay valid
 * until its done callback ran or the exchange was canceled with
 * ld_transport_cancel (after which no callback runs). Everything given to
 * the callback is borrowed for the duration of the callback only.
 */
#ifndef LEADERD_PODS_H
#define LEADERD_PODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "transport.h"

/* A label key as Kubernetes validates it: an optional DNS-1123 subdomain
 * prefix (at most 253 characters) and '/', then a name of 1 to 63
 * characters of [A-Za-z0-9._-] starting and ending with a letter or digit. */
bool ld_label_key_valid(const char *key);

/* The outcome of one call. names/n_names only for a list on LD_OK. */
struct ld_pods_answer {
    enum ld_err rc;        /* LD_OK, a transport error, or the mapped HTTP error */
    long http_status;      /* 0 when no answer arrived */
    double seconds;        /* from submit to the end */
    struct ld_errinfo err; /* detail when rc != LD_OK */
    char *const *names;    /* Pods the list returned */
    size_t n_names;
};

typedef void (*ld_pods_done_fn)(void *ctx, const struct ld_pods_answer *a);

struct ld_pods_call {
    ld_pods_done_fn done;
    void *ctx;
    bool list; /* set by the submit functions */
};

/* The merge patch {"metadata":{"labels":{KEY:"true"|"false"}}} as a new
 * string (free with free()), or NULL when out of memory. */
char *ld_pods_label_patch(const char *key, bool value);

/* Decodes a PodList into the names of its items: a new array of new
 * strings in *names (free with ld_pods_names_free), *n set. LD_EDECODE
 * with err filled for anything that is not a PodList. */
enum ld_err ld_pods_decode_names(const char *body, size_t len, char ***names, size_t *n,
                                 struct ld_errinfo *err);
void ld_pods_names_free(char **names, size_t n); /* NULL-safe */

/* PATCH /api/v1/namespaces/NS/pods/POD with the merge patch above. LD_OK
 * with *id set and done to come, or LD_EINVAL (bad namespace, pod or key)
 * / LD_ENOMEM with err set and no callback. */
enum ld_err ld_pods_patch_label(struct ld_transport *t, const char *ns, const char *pod,
                                const char *key, bool value, int64_t timeout_ms,
                                struct ld_pods_call *call, ld_http_id *id,
                                struct ld_errinfo *err);

/* GET /api/v1/namespaces/NS/pods?labelSelector=KEY=VALUE. Same return rules. */
enum ld_err ld_pods_list_labelled(struct ld_transport *t, const char *ns, const char *key,
                                  const char *value, int64_t timeout_ms,
                                  struct ld_pods_call *call, ld_http_id *id,
                                  struct ld_errinfo *err);

#endif
