/* SPDX-License-Identifier: Apache-2.0 */
#include "stats.h"

#include <pthread.h>
#include <stdlib.h>

struct as_stats {
    pthread_mutex_t mu;
    json_t *root;
    json_t *held; /* same shape, counts of requests held now */
};

struct as_stats *as_stats_new(void)
{
    struct as_stats *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->root = json_object();
    s->held = json_object();
    if (!s->root || !s->held) {
        json_decref(s->root);
        json_decref(s->held);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

void as_stats_free(struct as_stats *s)
{
    if (!s)
        return;
    json_decref(s->root);
    json_decref(s->held);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* root[key] as an object, created when missing; NULL on allocation failure. */
static json_t *child(json_t *root, const char *key)
{
    json_t *c = json_object_get(root, key);
    if (c)
        return c;
    c = json_object();
    if (!c || json_object_set_new(root, key, c) != 0)
        return NULL;
    return c;
}

/* Adds delta to table[client][verb][key]; the caller holds the mutex. */
static void add(json_t *table, const char *client, enum as_verb verb, const char *key,
                int delta)
{
    json_t *c = child(table, client ? client : "anonymous");
    json_t *v = c ? child(c, as_verb_name(verb)) : NULL;
    if (v) {
        json_int_t n = json_integer_value(json_object_get(v, key));
        json_object_set_new(v, key, json_integer(n + delta));
    }
}

void as_stats_count(struct as_stats *s, const char *client, enum as_verb verb,
                    const char *outcome)
{
    pthread_mutex_lock(&s->mu);
    add(s->root, client, verb, outcome, 1);
    pthread_mutex_unlock(&s->mu);
}

void as_stats_hold(struct as_stats *s, const char *client, enum as_verb verb,
                   const char *kind, int delta)
{
    pthread_mutex_lock(&s->mu);
    add(s->held, client, verb, kind, delta);
    pthread_mutex_unlock(&s->mu);
}

json_t *as_stats_held_json(struct as_stats *s)
{
    json_t *out = json_object();
    const char *client, *verb, *kind;
    json_t *c, *v, *n;
    if (!out)
        return NULL;
    pthread_mutex_lock(&s->mu);
    json_object_foreach(s->held, client, c)
    {
        json_object_foreach(c, verb, v)
        {
            json_object_foreach(v, kind, n)
            {
                if (json_integer_value(n) == 0)
                    continue;
                json_t *oc = child(out, client);
                json_t *ov = oc ? child(oc, verb) : NULL;
                if (ov)
                    json_object_set_new(ov, kind, json_integer(json_integer_value(n)));
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    return out;
}

json_t *as_stats_json(struct as_stats *s)
{
    pthread_mutex_lock(&s->mu);
    json_t *copy = json_deep_copy(s->root);
    pthread_mutex_unlock(&s->mu);
    return copy;
}

void as_stats_reset(struct as_stats *s)
{
    pthread_mutex_lock(&s->mu);
    json_object_clear(s->root);
    pthread_mutex_unlock(&s->mu);
}
