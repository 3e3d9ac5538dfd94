/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faults: per-client fault injection for leaderd-apiserver tests (partition
 * hang/reset, latency with a commit rule for a client that hangs up during
 * it, error rate, 429 throttling, optionally per verb) and a global pause.
 * Thread-safe (one mutex).
 */
#ifndef AS_FAULTS_H
#define AS_FAULTS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Kubernetes API verbs, for fault filters and request statistics. */
enum as_verb {
    AS_VERB_GET,
    AS_VERB_LIST,
    AS_VERB_WATCH,
    AS_VERB_CREATE,
    AS_VERB_UPDATE,
    AS_VERB_PATCH,
    AS_VERB_DELETE,
    AS_VERB_DISCOVERY, /* /api, /apis, /version and other non-resource reads */
    AS_VERB_OTHER,
    AS_VERB_COUNT
};

/* "get", "list", ...; static string. */
const char *as_verb_name(enum as_verb v);

enum as_partition { AS_PART_NONE, AS_PART_HANG, AS_PART_RESET };

/* What a latency hold does with a request whose client hangs up (or resets
 * the connection) during it. The server has read the whole request by then.
 * CONNECTED drops it, which no real API server does to a write past
 * admission; ADMITTED executes it at the end of the hold as kube-apiserver
 * does (its etcd transaction goes on without the client), and only the
 * reply is lost. A partition ("hang") models the network instead: the
 * request never counts as read, so a hang-up during it always drops it. */
enum as_commit { AS_COMMIT_CONNECTED, AS_COMMIT_ADMITTED };

#define AS_CLIENT_MAX 64 /* client names are shorter than this */

struct as_fault {
    enum as_partition partition;
    int latency_ms;        /* delay before answering */
    double error_rate;     /* probability of answering error_code */
    int error_code;        /* 400..599, default 500 */
    double throttle_rate;  /* probability of a 429 */
    int retry_after;       /* seconds in the 429's Retry-After */
    double lose_reply;     /* probability that a committed write's reply is lost:
                              the connection is closed instead of answering */
    enum as_commit commit; /* a hang-up during latency_ms: drop or execute */
    /* Each event reaches this client's watches only this long after it was
     * stored: its API server's watch cache behind the others' (the reads
     * and writes are current). No bookmarks meanwhile, which would carry a
     * resourceVersion past the events held back. */
    int watch_lag_ms;
    unsigned verbs;        /* bit (1u << enum as_verb) per verb affected; 0 = all */
};

/* Parses a control body {"client":..., "partition":"hang"|"reset"|null,
 * "latency_ms":N, "commit":"admitted"|"connected", "error_rate":R,
 * "error_code":C, "throttle":{"rate":R, "retry_after":S}, "lose_reply_rate":R,
 * "verbs":[...]} (missing fields: no fault; commit "connected"). The older
 * "apply_late":B is accepted as a synonym of commit (true: "admitted"); a
 * body giving both must make them agree. Copies the client name into client
 * (AS_CLIENT_MAX bytes). Returns false with a message in err (errlen bytes)
 * on a malformed body. */
bool as_fault_from_json(json_t *j, char *client, struct as_fault *out, char *err,
                        size_t errlen);

/* The fault as control JSON (same shape as accepted, without "client"; both
 * "commit" and its synonym "apply_late"). New reference or NULL. */
json_t *as_fault_to_json(const struct as_fault *f);

struct as_faults;

/* Returns a new fault table (free with as_faults_free) or NULL. */
struct as_faults *as_faults_new(void);
void as_faults_free(struct as_faults *f); /* NULL-safe */

/* Replaces the fault of client. false when the table is full (256). */
bool as_faults_set(struct as_faults *f, const char *client, const struct as_fault *fault);
/* Clears the fault of client, or of every client when client is NULL. */
void as_faults_clear(struct as_faults *f, const char *client);
/* Copies the fault of client into out if it has one affecting verb. */
bool as_faults_get(struct as_faults *f, const char *client, enum as_verb verb,
                   struct as_fault *out);
/* {"client": fault, ...}; new reference or NULL. */
json_t *as_faults_json(struct as_faults *f);

void as_faults_set_paused(struct as_faults *f, bool paused);
bool as_faults_paused(struct as_faults *f);

/* A uniform random number in [0, 1). */
double as_faults_rand(struct as_faults *f);

#endif
