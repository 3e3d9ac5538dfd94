/*
 * podlabel: --pod-label KEY. While leading, this replica's own Pod (named
 * by its identity, in the Lease's namespace) carries KEY: "true"; when it
 * stops leading, and before it releases on exit, KEY: "false". A new
 * leader first sets "false" on every other Pod still labelled "true" (a
 * deposed leader cut off from the API cannot do it itself), then "true"
 * on its own.
 *
 * Two halves. The policy (struct ld_podlabel) is a pure state machine fed
 * leadership and the monotonic time: it says which request to send next and
 * when to wake for a retry, so it is tested with a fake clock. The glue
 * (struct ld_podlabel_hook) submits those requests asynchronously on the
 * Lease client's transport and is a loop hook (loop.h). Neither ever blocks
 * or delays the election: a failed call is logged (once per run of
 * identical errors), counted in leaderd_pod_label_failures_total, and
 * retried with capped exponential backoff.
 */
#ifndef LEADERD_PODLABEL_H
#define LEADERD_PODLABEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "election.h"
#include "err.h"
#include "kube.h"
#include "metrics.h"
#include "pods.h"
#include "state.h"

#define LD_PODLABEL_BACKOFF_MIN_MS 500
#define LD_PODLABEL_BACKOFF_MAX_MS 16000

enum ld_pl_written { LD_PL_UNKNOWN, LD_PL_FALSE, LD_PL_TRUE };

enum ld_pl_step_kind {
    LD_PL_NONE,  /* nothing to send now */
    LD_PL_LIST,  /* list the Pods labelled KEY=true */
    LD_PL_PATCH, /* set KEY on pod to value */
};

struct ld_pl_step {
    enum ld_pl_step_kind kind;
    const char *pod; /* LD_PL_PATCH: borrowed from the machine until its result */
    bool value;
};

struct ld_podlabel {
    const char *identity; /* borrowed: our own Pod's name */
    bool leading;
    enum ld_pl_written written; /* our Pod's label as last written successfully */
    bool sweep_pending;         /* leading began: list the others first */
    char **others;              /* owned: other Pods found "true", to set "false" */
    size_t n_others, next_other;
    bool in_flight;
    struct ld_pl_step sent; /* what is in flight; sent.pod points at sent_pod */
    bool sent_own;          /* it is our own Pod */
    char sent_pod[254];
    int64_t retry_at_ms; /* nothing is sent before this */
    int64_t backoff_ms;
};

void ld_podlabel_init(struct ld_podlabel *pl, const char *identity);
void ld_podlabel_clear(struct ld_podlabel *pl);

/* Feeds leadership as judged at now (leading and before lead_until). */
void ld_podlabel_update(struct ld_podlabel *pl, bool leading);

/* The request to send at now_ms, marked in flight until its result; kind
 * LD_PL_NONE when there is nothing to do, one is in flight, or a retry
 * waits. */
struct ld_pl_step ld_podlabel_next(struct ld_podlabel *pl, int64_t now_ms);

/* Results of the in-flight step. For a list, names (borrowed) are the Pods
 * labelled "true". A 404 on another Pod's patch counts as done (it is gone). */
void ld_podlabel_list_done(struct ld_podlabel *pl, int64_t now_ms, enum ld_err rc,
                           char *const *names, size_t n);
void ld_podlabel_patch_done(struct ld_podlabel *pl, int64_t now_ms, enum ld_err rc);

/* When a retry is due (the loop wakes then), INT64_MAX when none. */
int64_t ld_podlabel_wake_ms(const struct ld_podlabel *pl, int64_t now_ms);

/* True while our Pod may still say "true": the release on exit waits (for
 * a bounded time) until it says "false". */
bool ld_podlabel_busy(const struct ld_podlabel *pl);

/* "true", "false", or NULL when never written. Static string. */
const char *ld_podlabel_value(const struct ld_podlabel *pl);

/* ---- the glue ---- */

struct ld_podlabel_hook {
    struct ld_podlabel pl;
    struct ld_kube *kube;       /* borrowed: its transport carries the calls */
    const char *namespace_;     /* borrowed */
    const char *key;            /* borrowed */
    struct ld_state *state;     /* borrowed: pod_label for /leader */
    struct ld_metrics *metrics; /* borrowed; may be NULL */
    int64_t timeout_ms;         /* per call */
    struct ld_pods_call call;
    ld_http_id id;
    enum ld_err last_logged; /* a run of identical failures is logged once */
};

void ld_podlabel_hook_init(struct ld_podlabel_hook *h, struct ld_kube *kube,
                           const char *namespace_, const char *identity, const char *key,
                           struct ld_state *state, struct ld_metrics *metrics,
                           int64_t timeout_ms);
/* Cancels a call in flight and frees what h owns. */
void ld_podlabel_hook_clear(struct ld_podlabel_hook *h);

/* struct ld_loop_hook callbacks; ctx is a struct ld_podlabel_hook. */
bool ld_podlabel_on_publish(void *ctx, const struct ld_election_status *st,
                            int64_t now_ms);
int64_t ld_podlabel_next_wake(void *ctx, int64_t now_ms);
bool ld_podlabel_holds_release(void *ctx, int64_t now_ms);

#endif
