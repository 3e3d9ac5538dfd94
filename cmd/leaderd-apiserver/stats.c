#include "stats.h"

#include <pthread.h>
#include <stdlib.h>

struct as_stats {
    pthread_mutex_t mu;
    json_t *root;
};

struct as_stats *as_stats_new(void)
{
    struct as_stats *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->root = json_object();
    if (!s->root) {
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

void as_stats_count(struct as_stats *s, const char *client, enum as_verb verb,
                    const char *outcome)
{
    pthread_mutex_lock(&s->mu);
    json_t *c = child(s->root, client ? client : "anonymous");
    json_t *v = c ? child(c, as_verb_name(verb)) : NULL;
    if (v) {
        json_int_t n = json_integer_value(json_object_get(v, outcome));
        json_object_set_new(v, outcome, json_integer(n + 1));
    }
    pthread_mutex_unlock(&s->mu);
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
