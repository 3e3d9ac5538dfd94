/* SPDX-License-Identifier: Apache-2.0 */
/*
 * event: encoding and creation of leader-election Events.
 */
#include "event.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnsname.h"
#include "rest.h"
#include "timefmt.h"

char *ld_events_encode(const struct ld_event_spec *ev)
{
    char ts[LD_MICROTIME_LEN], name[300], note[400];
    char *out = NULL;
    json_t *regarding = NULL, *doc = NULL;

    /* client-go: fmt.Sprintf("%v.%x", regarding.Name, t.UnixNano()). */
    snprintf(name, sizeof(name), "%s.%" PRIx64, ev->lease,
             (uint64_t)ev->event_time_us * 1000u);
    snprintf(note, sizeof(note), "%s %s", ev->identity,
             ev->acquire ? "became leader" : "stopped leading");
    regarding = json_pack("{s:s, s:s, s:s, s:s}", "kind", "Lease", "apiVersion",
                          "coordination.k8s.io/v1", "namespace", ev->namespace_, "name",
                          ev->lease);
    if (!regarding)
        goto out;
    if (ev->lease_uid && ev->lease_uid[0] &&
        json_object_set_new(regarding, "uid", json_string(ev->lease_uid)) != 0)
        goto out;
    doc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O}",
                    "apiVersion", "events.k8s.io/v1", "kind", "Event", "metadata", "name",
                    name, "namespace", ev->namespace_, "eventTime",
                    ld_microtime_format(ev->event_time_us, ts), "reportingController",
                    "leaderd", "reportingInstance", ev->identity, "action",
                    ev->acquire ? "Acquire" : "Release", "reason", "LeaderElection",
                    "type", "Normal", "note", note, "regarding", regarding);
    if (doc)
        out = json_dumps(doc, JSON_COMPACT);
out:
    json_decref(regarding);
    json_decref(doc);
    return out;
}

static void on_done(void *ctx, ld_http_id id, const struct ld_http_result *r)
{
    struct ld_events_call *call = ctx;
    struct ld_events_answer a = {.seconds = r->seconds, .http_status = r->status};
    (void)id;
    a.rc = ld_rest_outcome(r, "POST", "events", &a.err);
    call->done(call->ctx, &a);
}

enum ld_err ld_events_create(struct ld_transport *t, const struct ld_event_spec *ev,
                             int64_t timeout_ms, struct ld_events_call *call,
                             ld_http_id *id, struct ld_errinfo *err)
{
    enum ld_err rc;
    char *path = NULL, *body = NULL;
    if (!ld_dns1123_label(ev->namespace_) || !ld_dns1123_subdomain(ev->lease) ||
        !ev->identity || !ev->identity[0]) {
        rc = ld_errinfo_set(err, LD_EINVAL, "invalid namespace, lease or identity");
        goto out;
    }
    long long tos = timeout_ms / 1000 > 0 ? timeout_ms / 1000 : 1;
    if (asprintf(&path, "/apis/events.k8s.io/v1/namespaces/%s/events?timeout=%llds",
                 ev->namespace_, tos) < 0)
        path = NULL;
    body = ld_events_encode(ev);
    if (!path || !body) {
        rc = ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        goto out;
    }
    struct ld_http_request req = {.verb = "POST",
                                  .path = path,
                                  .body = body,
                                  .body_len = strlen(body),
                                  .timeout_ms = timeout_ms};
    rc = ld_transport_submit(t, &req, on_done, call, id, err);
out:
    free(path);
    free(body);
    return rc;
}
