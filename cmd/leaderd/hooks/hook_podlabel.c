/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook_podlabel: the label policy and its asynchronous calls.
 */
#include "hook_podlabel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lead.h"
#include "log.h"

/* The shell's waits end on the Lease watch, the signal fd or their time,
 * not on another exchange's answer: while a call is in flight the shell
 * looks again this often, so the next step follows an answer promptly. */
#define IN_FLIGHT_POLL_MS 100

static void drop_others(struct ld_hook_podlabel_policy *pl)
{
    for (size_t i = 0; i < pl->n_others; i++)
        free(pl->others[i]);
    free(pl->others);
    pl->others = NULL;
    pl->n_others = pl->next_other = 0;
}

void ld_hook_podlabel_policy_init(struct ld_hook_podlabel_policy *pl,
                                  const char *identity)
{
    memset(pl, 0, sizeof(*pl));
    pl->identity = identity;
    pl->written = LD_HOOK_PODLABEL_UNKNOWN;
}

void ld_hook_podlabel_policy_clear(struct ld_hook_podlabel_policy *pl)
{
    drop_others(pl);
}

void ld_hook_podlabel_policy_update(struct ld_hook_podlabel_policy *pl, bool leading)
{
    if (leading && !pl->leading) {
        pl->sweep_pending = true;
        drop_others(pl);
    } else if (!leading && pl->leading) {
        pl->sweep_pending = false;
        drop_others(pl);
    }
    pl->leading = leading;
}

static struct ld_hook_podlabel_step issue(struct ld_hook_podlabel_policy *pl,
                                          enum ld_hook_podlabel_step_kind kind,
                                          const char *pod, bool value)
{
    pl->sent_own = pod == pl->identity;
    snprintf(pl->sent_pod, sizeof(pl->sent_pod), "%s", pod ? pod : "");
    struct ld_hook_podlabel_step s = {
        .kind = kind, .pod = pod ? pl->sent_pod : NULL, .value = value};
    pl->in_flight = true;
    pl->sent = s;
    return s;
}

struct ld_hook_podlabel_step
ld_hook_podlabel_policy_next(struct ld_hook_podlabel_policy *pl, int64_t now_ms)
{
    struct ld_hook_podlabel_step none = {.kind = LD_HOOK_PODLABEL_NONE};
    if (pl->in_flight || now_ms < pl->retry_at_ms)
        return none;
    if (!pl->leading)
        return pl->written == LD_HOOK_PODLABEL_FALSE
                   ? none
                   : issue(pl, LD_HOOK_PODLABEL_PATCH, pl->identity, false);
    if (pl->sweep_pending)
        return issue(pl, LD_HOOK_PODLABEL_LIST, NULL, true);
    if (pl->next_other < pl->n_others)
        return issue(pl, LD_HOOK_PODLABEL_PATCH, pl->others[pl->next_other], false);
    return pl->written == LD_HOOK_PODLABEL_TRUE
               ? none
               : issue(pl, LD_HOOK_PODLABEL_PATCH, pl->identity, true);
}

static void succeeded(struct ld_hook_podlabel_policy *pl)
{
    pl->in_flight = false;
    pl->backoff_ms = 0;
    pl->retry_at_ms = 0;
}

static void failed(struct ld_hook_podlabel_policy *pl, int64_t now_ms)
{
    pl->in_flight = false;
    pl->backoff_ms =
        pl->backoff_ms ? pl->backoff_ms * 2 : (int64_t)LD_HOOK_PODLABEL_BACKOFF_MIN_MS;
    if (pl->backoff_ms > LD_HOOK_PODLABEL_BACKOFF_MAX_MS)
        pl->backoff_ms = LD_HOOK_PODLABEL_BACKOFF_MAX_MS;
    pl->retry_at_ms = now_ms + pl->backoff_ms;
}

void ld_hook_podlabel_policy_list_done(struct ld_hook_podlabel_policy *pl, int64_t now_ms,
                                       enum ld_err rc, char *const *names, size_t n)
{
    if (rc != LD_OK) {
        failed(pl, now_ms);
        return;
    }
    succeeded(pl);
    /* Leadership may have ended while the list was out: it is then moot. */
    if (!pl->leading || !pl->sweep_pending)
        return;
    drop_others(pl);
    pl->others = calloc(n ? n : 1, sizeof(*pl->others));
    if (!pl->others) {
        failed(pl, now_ms); /* the list is asked again */
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], pl->identity) == 0)
            continue;
        char *copy = strdup(names[i]);
        if (!copy) {
            drop_others(pl);
            failed(pl, now_ms);
            return;
        }
        pl->others[pl->n_others++] = copy;
    }
    pl->sweep_pending = false;
}

void ld_hook_podlabel_policy_patch_done(struct ld_hook_podlabel_policy *pl,
                                        int64_t now_ms, enum ld_err rc)
{
    bool own = pl->sent_own;
    if (rc != LD_OK && !(rc == LD_ENOTFOUND && !own)) {
        failed(pl, now_ms);
        return;
    }
    succeeded(pl);
    if (own)
        pl->written = pl->sent.value ? LD_HOOK_PODLABEL_TRUE : LD_HOOK_PODLABEL_FALSE;
    else if (pl->leading && pl->next_other < pl->n_others)
        pl->next_other++;
}

int64_t ld_hook_podlabel_policy_wake_ms(const struct ld_hook_podlabel_policy *pl,
                                        int64_t now_ms)
{
    bool work = pl->leading ? pl->sweep_pending || pl->next_other < pl->n_others ||
                                  pl->written != LD_HOOK_PODLABEL_TRUE
                            : pl->written != LD_HOOK_PODLABEL_FALSE;
    if (!work || pl->in_flight)
        return INT64_MAX;
    return pl->retry_at_ms > now_ms ? pl->retry_at_ms : now_ms;
}

bool ld_hook_podlabel_policy_busy(const struct ld_hook_podlabel_policy *pl)
{
    return pl->written == LD_HOOK_PODLABEL_TRUE || (pl->in_flight && pl->sent_own);
}

const char *ld_hook_podlabel_policy_value(const struct ld_hook_podlabel_policy *pl)
{
    return pl->written == LD_HOOK_PODLABEL_TRUE    ? "true"
           : pl->written == LD_HOOK_PODLABEL_FALSE ? "false"
                                                   : NULL;
}

/* ---- the glue ---------------------------------------------------------- */

static void note_failure(struct ld_hook_podlabel *h, const char *what,
                         const struct ld_pods_answer *a)
{
    if (h->c.metrics)
        ld_metrics_pod_label_failure(h->c.metrics);
    enum ld_log_level level = a->rc == h->last_logged ? LD_LOG_DEBUG : LD_LOG_WARN;
    h->last_logged = a->rc;
    ld_log(level, "pod label: %s failed: %s (HTTP %ld): %s; retrying with backoff", what,
           ld_strerror(a->rc), a->http_status, a->err.msg);
}

/* went_out: the request reached the transport (a refused submit was never
 * sent, so it is no API request for the metrics). */
static void finish(struct ld_hook_podlabel *h, const struct ld_pods_answer *a,
                   bool went_out)
{
    int64_t now = ld_clock_mono_ms(h->c.clock);
    struct ld_hook_podlabel_step sent = h->pl.sent;
    bool own = h->pl.sent_own;
    const char *before = ld_hook_podlabel_policy_value(&h->pl);
    h->id = 0;
    if (h->c.metrics && went_out)
        ld_metrics_observe_request(h->c.metrics,
                                   sent.kind == LD_HOOK_PODLABEL_LIST ? "LIST" : "PATCH",
                                   a->http_status, a->seconds);
    if (a->rc == LD_OK)
        h->last_logged = LD_OK;
    if (sent.kind == LD_HOOK_PODLABEL_LIST) {
        if (a->rc != LD_OK)
            note_failure(h, "listing the Pods labelled true", a);
        ld_hook_podlabel_policy_list_done(&h->pl, now, a->rc, a->names, a->n_names);
        return;
    }
    if (a->rc != LD_OK && !(a->rc == LD_ENOTFOUND && !own))
        note_failure(h, own ? "labelling our Pod" : "unlabelling another Pod", a);
    else
        ld_log(LD_LOG_INFO, "pod label: %s on Pod %s set to \"%s\"%s", h->c.key, sent.pod,
               sent.value ? "true" : "false",
               a->rc == LD_ENOTFOUND ? " (the Pod is gone)" : "");
    ld_hook_podlabel_policy_patch_done(&h->pl, now, a->rc);
    const char *after = ld_hook_podlabel_policy_value(&h->pl);
    if (after != before)
        ld_state_set_pod_label(h->c.state, after);
}

static void on_answer(void *ctx, const struct ld_pods_answer *a)
{
    finish(ctx, a, true);
}

void ld_hook_podlabel_init(struct ld_hook_podlabel *h,
                           const struct ld_hook_podlabel_config *cfg)
{
    memset(h, 0, sizeof(*h));
    ld_hook_podlabel_policy_init(&h->pl, cfg->identity);
    h->c = *cfg;
    h->call.done = on_answer;
    h->call.ctx = h;
    h->last_logged = LD_OK;
}

void ld_hook_podlabel_clear(struct ld_hook_podlabel *h)
{
    if (h->id)
        ld_transport_cancel(ld_kube_transport(h->c.kube), h->id);
    h->id = 0;
    ld_hook_podlabel_policy_clear(&h->pl);
}

static bool on_publish(void *ctx, const struct ld_election_status *st, int64_t now_ms)
{
    struct ld_hook_podlabel *h = ctx;
    struct ld_errinfo err;
    ld_hook_podlabel_policy_update(&h->pl,
                                   ld_leads_at(st->leading, st->lead_until_ms, now_ms));
    struct ld_hook_podlabel_step s = ld_hook_podlabel_policy_next(&h->pl, now_ms);
    struct ld_transport *t = ld_kube_transport(h->c.kube);
    enum ld_err rc = LD_OK;
    if (s.kind == LD_HOOK_PODLABEL_LIST)
        rc = ld_pods_list_labelled(t, h->c.namespace_, h->c.key, "true", h->c.timeout_ms,
                                   &h->call, &h->id, &err);
    else if (s.kind == LD_HOOK_PODLABEL_PATCH)
        rc = ld_pods_patch_label(t, h->c.namespace_, s.pod, h->c.key, s.value,
                                 h->c.timeout_ms, &h->call, &h->id, &err);
    if (rc != LD_OK) {
        struct ld_pods_answer a = {.rc = rc, .err = err};
        finish(h, &a, false);
    }
    return false;
}

static int64_t next_wake(void *ctx, int64_t now_ms)
{
    const struct ld_hook_podlabel *h = ctx;
    if (h->pl.in_flight)
        return now_ms + IN_FLIGHT_POLL_MS;
    return ld_hook_podlabel_policy_wake_ms(&h->pl, now_ms);
}

static bool holds_release(void *ctx, int64_t now_ms)
{
    (void)now_ms;
    return ld_hook_podlabel_policy_busy(&((const struct ld_hook_podlabel *)ctx)->pl);
}

struct ld_hook ld_hook_podlabel_bind(struct ld_hook_podlabel *h, size_t election)
{
    return (struct ld_hook){.ctx = h,
                            .election = election,
                            .on_publish = on_publish,
                            .next_wake_ms = next_wake,
                            .holds_release = holds_release,
                            .hold = LD_HOOK_HOLD_COURTESY};
}
