/* SPDX-License-Identifier: Apache-2.0 */
#include "faults.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define MAX_FAULTS 256

static const char *const verb_names[AS_VERB_COUNT] = {
    "get", "list", "watch", "create", "update", "patch", "delete", "discovery", "other"};

const char *as_verb_name(enum as_verb v)
{
    return (unsigned)v < AS_VERB_COUNT ? verb_names[v] : "other";
}

struct slot {
    char client[AS_CLIENT_MAX];
    struct as_fault fault;
};

struct as_faults {
    pthread_mutex_t mu;
    struct slot slots[MAX_FAULTS];
    size_t n;
    bool paused;
    uint64_t rng;
};

static bool get_rate(json_t *v, const char *what, double *out, char *err, size_t errlen)
{
    if (!v || json_is_null(v)) {
        *out = 0;
        return true;
    }
    if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1) {
        snprintf(err, errlen, "%s must be a number in [0, 1]", what);
        return false;
    }
    *out = json_number_value(v);
    return true;
}

static bool get_bool(json_t *v, const char *what, bool *out, char *err, size_t errlen)
{
    if (!v || json_is_null(v)) {
        *out = false;
        return true;
    }
    if (!json_is_boolean(v)) {
        snprintf(err, errlen, "%s must be true, false or null", what);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

static bool get_int(json_t *v, const char *what, long long min, long long max,
                    long long dflt, int *out, char *err, size_t errlen)
{
    if (!v || json_is_null(v)) {
        *out = (int)dflt;
        return true;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min ||
        json_integer_value(v) > max) {
        snprintf(err, errlen, "%s must be an integer in [%lld, %lld]", what, min, max);
        return false;
    }
    *out = (int)json_integer_value(v);
    return true;
}

/* "commit" and its older synonym "apply_late"; absent both, CONNECTED. */
static bool get_commit(json_t *j, enum as_commit *out, char *err, size_t errlen)
{
    json_t *c = json_object_get(j, "commit");
    bool late = false;
    if (!get_bool(json_object_get(j, "apply_late"), "apply_late", &late, err, errlen))
        return false;
    *out = late ? AS_COMMIT_ADMITTED : AS_COMMIT_CONNECTED;
    if (!c || json_is_null(c))
        return true;
    const char *cs = json_string_value(c);
    enum as_commit want;
    if (cs && strcmp(cs, "admitted") == 0)
        want = AS_COMMIT_ADMITTED;
    else if (cs && strcmp(cs, "connected") == 0)
        want = AS_COMMIT_CONNECTED;
    else {
        snprintf(err, errlen, "commit must be \"admitted\", \"connected\" or null");
        return false;
    }
    json_t *al = json_object_get(j, "apply_late");
    if (al && !json_is_null(al) && want != *out) {
        snprintf(err, errlen,
                 "apply_late contradicts commit (apply_late true means "
                 "commit \"admitted\")");
        return false;
    }
    *out = want;
    return true;
}

bool as_fault_from_json(json_t *j, char *client, struct as_fault *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(j)) {
        snprintf(err, errlen, "body must be a JSON object");
        return false;
    }
    const char *c = json_string_value(json_object_get(j, "client"));
    if (!c || !*c || strlen(c) >= AS_CLIENT_MAX) {
        snprintf(err, errlen, "client must be a non-empty string shorter than %d",
                 AS_CLIENT_MAX);
        return false;
    }
    snprintf(client, AS_CLIENT_MAX, "%s", c);
    json_t *p = json_object_get(j, "partition");
    if (p && !json_is_null(p)) {
        const char *ps = json_string_value(p);
        if (ps && strcmp(ps, "hang") == 0)
            out->partition = AS_PART_HANG;
        else if (ps && strcmp(ps, "reset") == 0)
            out->partition = AS_PART_RESET;
        else if (!ps || strcmp(ps, "none") != 0) {
            snprintf(err, errlen, "partition must be \"hang\", \"reset\" or null");
            return false;
        }
    }
    json_t *t = json_object_get(j, "throttle");
    if (t && !json_is_null(t) && !json_is_object(t)) {
        snprintf(err, errlen, "throttle must be an object {rate, retry_after}");
        return false;
    }
    if (!get_commit(j, &out->commit, err, errlen) ||
        !get_int(json_object_get(j, "latency_ms"), "latency_ms", 0, 3600000, 0,
                 &out->latency_ms, err, errlen) ||
        !get_int(json_object_get(j, "watch_lag_ms"), "watch_lag_ms", 0, 3600000, 0,
                 &out->watch_lag_ms, err, errlen) ||
        !get_rate(json_object_get(j, "error_rate"), "error_rate", &out->error_rate, err,
                  errlen) ||
        !get_int(json_object_get(j, "error_code"), "error_code", 400, 599, 500,
                 &out->error_code, err, errlen) ||
        !get_rate(json_object_get(t, "rate"), "throttle.rate", &out->throttle_rate, err,
                  errlen) ||
        !get_int(json_object_get(t, "retry_after"), "throttle.retry_after", 0, 3600, 1,
                 &out->retry_after, err, errlen) ||
        !get_rate(json_object_get(j, "lose_reply_rate"), "lose_reply_rate",
                  &out->lose_reply, err, errlen))
        return false;
    json_t *verbs = json_object_get(j, "verbs");
    if (verbs && !json_is_null(verbs)) {
        size_t i;
        json_t *v;
        if (!json_is_array(verbs)) {
            snprintf(err, errlen, "verbs must be an array of verb names");
            return false;
        }
        json_array_foreach(verbs, i, v)
        {
            const char *name = json_string_value(v);
            unsigned k = 0;
            while (k < AS_VERB_COUNT && !(name && strcmp(name, verb_names[k]) == 0))
                k++;
            if (k == AS_VERB_COUNT) {
                snprintf(err, errlen,
                         "unknown verb in verbs (get, list, watch, create, "
                         "update, patch, delete, discovery, other)");
                return false;
            }
            out->verbs |= 1u << k;
        }
    }
    return true;
}

json_t *as_fault_to_json(const struct as_fault *f)
{
    json_t *j = json_object();
    json_t *t = json_object();
    json_t *verbs = json_array();
    if (!j || !t || !verbs) {
        json_decref(j);
        json_decref(t);
        json_decref(verbs);
        return NULL;
    }
    json_object_set_new(j, "partition",
                        f->partition == AS_PART_HANG    ? json_string("hang")
                        : f->partition == AS_PART_RESET ? json_string("reset")
                                                        : json_null());
    json_object_set_new(j, "latency_ms", json_integer(f->latency_ms));
    json_object_set_new(j, "watch_lag_ms", json_integer(f->watch_lag_ms));
    json_object_set_new(
        j, "commit",
        json_string(f->commit == AS_COMMIT_ADMITTED ? "admitted" : "connected"));
    json_object_set_new(j, "apply_late", json_boolean(f->commit == AS_COMMIT_ADMITTED));
    json_object_set_new(j, "error_rate", json_real(f->error_rate));
    json_object_set_new(j, "error_code", json_integer(f->error_code));
    json_object_set_new(t, "rate", json_real(f->throttle_rate));
    json_object_set_new(t, "retry_after", json_integer(f->retry_after));
    json_object_set_new(j, "throttle", t);
    json_object_set_new(j, "lose_reply_rate", json_real(f->lose_reply));
    for (unsigned k = 0; k < AS_VERB_COUNT; k++)
        if (f->verbs & (1u << k))
            json_array_append_new(verbs, json_string(verb_names[k]));
    json_object_set_new(j, "verbs", verbs);
    return j;
}

struct as_faults *as_faults_new(void)
{
    struct as_faults *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    if (getrandom(&f->rng, sizeof f->rng, 0) != (ssize_t)sizeof f->rng || f->rng == 0)
        f->rng = 0x9e3779b97f4a7c15ull;
    return f;
}

void as_faults_free(struct as_faults *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static struct slot *find_slot(struct as_faults *f, const char *client)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->slots[i].client, client) == 0)
            return &f->slots[i];
    return NULL;
}

bool as_faults_set(struct as_faults *f, const char *client, const struct as_fault *fault)
{
    bool ok = true;
    pthread_mutex_lock(&f->mu);
    struct slot *s = find_slot(f, client);
    if (!s && f->n < MAX_FAULTS) {
        s = &f->slots[f->n++];
        snprintf(s->client, sizeof s->client, "%s", client);
    }
    if (s)
        s->fault = *fault;
    else
        ok = false;
    pthread_mutex_unlock(&f->mu);
    return ok;
}

void as_faults_clear(struct as_faults *f, const char *client)
{
    pthread_mutex_lock(&f->mu);
    if (!client) {
        f->n = 0;
    } else {
        struct slot *s = find_slot(f, client);
        if (s) {
            *s = f->slots[f->n - 1];
            f->n--;
        }
    }
    pthread_mutex_unlock(&f->mu);
}

bool as_faults_get(struct as_faults *f, const char *client, enum as_verb verb,
                   struct as_fault *out)
{
    bool found = false;
    pthread_mutex_lock(&f->mu);
    struct slot *s = client ? find_slot(f, client) : NULL;
    if (s && (s->fault.verbs == 0 || (s->fault.verbs & (1u << verb)))) {
        *out = s->fault;
        found = true;
    }
    pthread_mutex_unlock(&f->mu);
    return found;
}

json_t *as_faults_json(struct as_faults *f)
{
    json_t *j = json_object();
    if (!j)
        return NULL;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->n; i++)
        json_object_set_new(j, f->slots[i].client, as_fault_to_json(&f->slots[i].fault));
    pthread_mutex_unlock(&f->mu);
    return j;
}

void as_faults_set_paused(struct as_faults *f, bool paused)
{
    pthread_mutex_lock(&f->mu);
    f->paused = paused;
    pthread_mutex_unlock(&f->mu);
}

bool as_faults_paused(struct as_faults *f)
{
    pthread_mutex_lock(&f->mu);
    bool p = f->paused;
    pthread_mutex_unlock(&f->mu);
    return p;
}

double as_faults_rand(struct as_faults *f)
{
    pthread_mutex_lock(&f->mu);
    /* xorshift64*: plenty for choosing which requests fail. */
    uint64_t x = f->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    f->rng = x;
    uint64_t r = x * 0x2545F4914F6CDD1Dull;
    pthread_mutex_unlock(&f->mu);
    return (double)(r >> 11) / 9007199254740992.0;
}
