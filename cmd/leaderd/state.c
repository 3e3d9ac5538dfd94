/*
 * state: the snapshot the election loop publishes to the HTTP server.
 */
#include "state.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void ld_state_init(struct ld_state *st, const char *lease, const char *identity,
                   int64_t stale_after_ms)
{
    memset(st, 0, sizeof(*st));
    pthread_mutex_init(&st->mu, NULL);
    snprintf(st->snap.lease, sizeof(st->snap.lease), "%s", lease);
    snprintf(st->snap.identity, sizeof(st->snap.identity), "%s", identity);
    st->snap.stale_after_ms = stale_after_ms;
    st->snap.heartbeat_ms = ld_mono_ms();
}

void ld_state_destroy(struct ld_state *st)
{
    pthread_mutex_destroy(&st->mu);
}

void ld_state_read(struct ld_state *st, struct ld_snapshot *out)
{
    pthread_mutex_lock(&st->mu);
    *out = st->snap;
    pthread_mutex_unlock(&st->mu);
}

void ld_state_publish(struct ld_state *st, const struct ld_snapshot *next)
{
    pthread_mutex_lock(&st->mu);
    struct ld_snapshot keep = st->snap;
    st->snap = *next;
    memcpy(st->snap.lease, keep.lease, sizeof(keep.lease));
    memcpy(st->snap.identity, keep.identity, sizeof(keep.identity));
    for (struct ld_state_listener *l = st->listeners; l; l = l->next)
        l->fn(l->arg);
    pthread_mutex_unlock(&st->mu);
}

void ld_state_set_pod_label(struct ld_state *st, const char *value)
{
    pthread_mutex_lock(&st->mu);
    snprintf(st->snap.pod_label, sizeof(st->snap.pod_label), "%s", value ? value : "");
    for (struct ld_state_listener *l = st->listeners; l; l = l->next)
        l->fn(l->arg);
    pthread_mutex_unlock(&st->mu);
}

void ld_state_listen(struct ld_state *st, struct ld_state_listener *l)
{
    pthread_mutex_lock(&st->mu);
    l->next = st->listeners;
    st->listeners = l;
    pthread_mutex_unlock(&st->mu);
}

void ld_state_unlisten(struct ld_state *st, struct ld_state_listener *l)
{
    pthread_mutex_lock(&st->mu);
    for (struct ld_state_listener **p = &st->listeners; *p; p = &(*p)->next) {
        if (*p == l) {
            *p = l->next;
            break;
        }
    }
    pthread_mutex_unlock(&st->mu);
}

bool ld_snapshot_is_leader(const struct ld_snapshot *s, int64_t now_ms)
{
    return s->leading && now_ms < s->lead_until_ms;
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ld_mono_ms(void)
{
    return clock_ns(CLOCK_MONOTONIC) / 1000000;
}

int64_t ld_wall_us(void)
{
    return clock_ns(CLOCK_REALTIME) / 1000;
}
