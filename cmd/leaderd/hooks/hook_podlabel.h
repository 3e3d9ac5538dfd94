/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook_podlabel: --pod-label KEY, a hook (hook.h) of the one Lease's
 * election. While leading, this replica's own Pod (named
 * by its identity, in the Lease's namespace) carries KEY: "true"; when it
 * stops leading, and before it releases on exit, KEY: "false". A new
 * leader first sets "false" on every other Pod still labelled "true" (a
 * deposed leader cut off from the API cannot do it itself), then "true"
 * on its own.
 *
 * Two halves. The policy (struct ld_hook_podlabel_policy) is a pure state machine fed
 * leadership and the monotonic time: it says which request to send next and
 * when to wake for a retry, so it is tested with a fake clock. The glue
 * (struct ld_hook_podlabel) submits those requests asynchronously on the
 * Lease client's transport. Neither ever blocks
 * or delays the election: a failed call is logged (once per run of
 * identical errors), counted in leaderd_pod_label_failures_total, and
 * retried with capped exponential backoff.
 */
#ifndef LEADERD_HOOK_PODLABEL_H
#define LEADERD_HOOK_PODLABEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "election.h"
#include "err.h"
#include "hook.h"
#include "kube.h"
#include "metrics.h"
#include "pods.h"
#include "state.h"

#define LD_HOOK_PODLABEL_BACKOFF_MIN_MS 500
#define LD_HOOK_PODLABEL_BACKOFF_MAX_MS 16000

enum ld_hook_podlabel_written {
    LD_HOOK_PODLABEL_UNKNOWN,
    LD_HOOK_PODLABEL_FALSE,
    LD_HOOK_PODLABEL_TRUE
};

enum ld_hook_podlabel_step_kind {
    LD_HOOK_PODLABEL_NONE,  /* nothing to send now */
    LD_HOOK_PODLABEL_LIST,  /* list the Pods labelled KEY=true */
    LD_HOOK_PODLABEL_PATCH, /* set KEY on pod to value */
};

struct ld_hook_podlabel_step {
    enum ld_hook_podlabel_step_kind kind;
    const char
        *pod; /* LD_HOOK_PODLABEL_PATCH: borrowed from the machine until its result */
    bool value;
};

struct ld_hook_podlabel_policy {
    const char *identity; /* borrowed: our own Pod's name */
    bool leading;
    enum ld_hook_podlabel_written
        written;        /* our Pod's label as last written successfully */
    bool sweep_pending; /* leading began: list the others first */
    char **others;      /* owned: other Pods found "true", to set "false" */
    size_t n_others, next_other;
    bool in_flight;
    struct ld_hook_podlabel_step
        sent;      /* what is in flight; sent.pod points at sent_pod */
    bool sent_own; /* it is our own Pod */
    char sent_pod[254];
    int64_t retry_at_ms; /* nothing is sent before this */
    int64_t backoff_ms;
};

void ld_hook_podlabel_policy_init(struct ld_hook_podlabel_policy *pl,
                                  const char *identity);
void ld_hook_podlabel_policy_clear(struct ld_hook_podlabel_policy *pl);

/* Feeds leadership as judged at now (leading and before lead_until). */
void ld_hook_podlabel_policy_update(struct ld_hook_podlabel_policy *pl, bool leading);

/* The request to send at now_ms, marked in flight until its result; kind
 * LD_HOOK_PODLABEL_NONE when there is nothing to do, one is in flight, or a retry
 * waits. */
struct ld_hook_podlabel_step
ld_hook_podlabel_policy_next(struct ld_hook_podlabel_policy *pl, int64_t now_ms);

/* Results of the in-flight step. For a list, names (borrowed) are the Pods
 * labelled "true". A 404 on another Pod's patch counts as done (it is gone). */
void ld_hook_podlabel_policy_list_done(struct ld_hook_podlabel_policy *pl, int64_t now_ms,
                                       enum ld_err rc, char *const *names, size_t n);
void ld_hook_podlabel_policy_patch_done(struct ld_hook_podlabel_policy *pl,
                                        int64_t now_ms, enum ld_err rc);

/* When a retry is due (the shell wakes then), INT64_MAX when none. */
int64_t ld_hook_podlabel_policy_wake_ms(const struct ld_hook_podlabel_policy *pl,
                                        int64_t now_ms);

/* True while our Pod may still say "true": the release on exit waits (for
 * a bounded time) until it says "false". */
bool ld_hook_podlabel_policy_busy(const struct ld_hook_podlabel_policy *pl);

/* "true", "false", or NULL when never written. Static string. */
const char *ld_hook_podlabel_policy_value(const struct ld_hook_podlabel_policy *pl);

/* ---- the glue ---- */

struct ld_hook_podlabel_config {
    struct ld_kube *kube;         /* borrowed: its transport carries the calls */
    const char *namespace_;       /* borrowed, as the rest */
    const char *identity;         /* our own Pod's name */
    const char *key;              /* the label */
    struct ld_state *state;       /* pod_label for /leader */
    struct ld_metrics *metrics;   /* may be NULL */
    const struct ld_clock *clock; /* the shell's: retries and backoff */
    int64_t timeout_ms;           /* per call */
};

struct ld_hook_podlabel {
    struct ld_hook_podlabel_policy pl;
    struct ld_hook_podlabel_config c;
    struct ld_pods_call call;
    ld_http_id id;
    enum ld_err last_logged; /* a run of identical failures is logged once */
};

void ld_hook_podlabel_init(struct ld_hook_podlabel *h,
                           const struct ld_hook_podlabel_config *cfg);
/* Cancels a call in flight and frees what h owns. */
void ld_hook_podlabel_clear(struct ld_hook_podlabel *h);

/* The hook of election (see struct ld_hook), with h as its ctx (borrowed:
 * h must outlive the shell). Its release hold, a courtesy hold (hook.h):
 * while our Pod may still say "true", a shutdown's release waits (not a
 * resignation's). */
struct ld_hook ld_hook_podlabel_bind(struct ld_hook_podlabel *h, size_t election);

#endif
