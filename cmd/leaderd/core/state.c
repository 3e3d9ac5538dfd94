/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state: the snapshot the election loop publishes to the HTTP server.
 */
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "lead.h"

void ld_state_init(struct ld_state *st, const char *lease, const char *identity,
                   int64_t stale_after_ms)
{
    memset(st, 0, sizeof(*st));
    pthread_mutex_init(&st->mu, NULL);
    snprintf(st->snap.lease, sizeof(st->snap.lease), "%s", lease);
    snprintf(st->snap.identity, sizeof(st->snap.identity), "%s", identity);
    st->snap.stale_after_ms = stale_after_ms;
    st->snap.term_until_ms = INT64_MIN;
    st->snap.heartbeat_ms = ld_mono_ms();
    st->resign.fd = -1;
}

void ld_state_destroy(struct ld_state *st)
{
    ld_shardsnap_unref(st->shards);
    st->shards = NULL;
    ld_shardlayout_unref(st->layout);
    st->layout = NULL;
    if (st->resign.fd >= 0)
        close(st->resign.fd);
    st->resign.fd = -1;
    free(st->drain);
    st->drain = NULL;
    pthread_mutex_destroy(&st->mu);
}

#define DRAIN_GIVING_BACK 1u
#define DRAIN_DRAINED 2u

enum ld_err ld_state_drain_enable(struct ld_state *st, uint32_t n_shards)
{
    struct ld_drain_slot *d = calloc(n_shards ? n_shards : 1, sizeof(*d));
    if (!d)
        return LD_ENOMEM;
    pthread_mutex_lock(&st->mu);
    free(st->drain);
    st->drain = d;
    st->n_drain = n_shards;
    pthread_mutex_unlock(&st->mu);
    return LD_OK;
}

void ld_state_drain_set(struct ld_state *st, uint32_t s, bool giving_back, int64_t term)
{
    pthread_mutex_lock(&st->mu);
    if (st->drain && s < st->n_drain) {
        st->drain[s].flags = giving_back ? DRAIN_GIVING_BACK : 0;
        st->drain[s].term = term;
    }
    pthread_mutex_unlock(&st->mu);
}

enum ld_drained_answer ld_state_drained_answer(struct ld_state *st, uint32_t s,
                                               int64_t term)
{
    enum ld_drained_answer a = LD_DRAINED_NOT_GIVING_BACK;
    uint64_t one = 1;
    pthread_mutex_lock(&st->mu);
    struct ld_drain_slot *d = st->drain && s < st->n_drain ? &st->drain[s] : NULL;
    if (d && (d->flags & DRAIN_GIVING_BACK))
        a = term < 0 || term == d->term ? LD_DRAINED_NOTED : LD_DRAINED_STALE;
    if (a == LD_DRAINED_NOTED)
        d->flags |= DRAIN_DRAINED;
    int fd = st->resign.fd;
    pthread_mutex_unlock(&st->mu);
    if (a == LD_DRAINED_NOTED && fd >= 0) {
        /* A failed write (a full counter wakes it anyway) leaves the news
         * for the loop's next pass, at most a heartbeat later. */
        ssize_t w = write(fd, &one, sizeof(one));
        (void)w;
    }
    return a;
}

bool ld_state_drained_post(struct ld_state *st, uint32_t s)
{
    return ld_state_drained_answer(st, s, -1) == LD_DRAINED_NOTED;
}

bool ld_state_drained_take(struct ld_state *st, uint32_t s)
{
    bool drained = false;
    pthread_mutex_lock(&st->mu);
    if (st->drain && s < st->n_drain && (st->drain[s].flags & DRAIN_DRAINED)) {
        st->drain[s].flags &= (uint8_t)~DRAIN_DRAINED;
        drained = true;
    }
    pthread_mutex_unlock(&st->mu);
    return drained;
}

void ld_state_read(struct ld_state *st, struct ld_snapshot *out)
{
    pthread_mutex_lock(&st->mu);
    *out = st->snap;
    pthread_mutex_unlock(&st->mu);
}

void ld_state_publish(struct ld_state *st, const struct ld_snapshot *next)
{
    ld_state_publish_shards(st, next, NULL);
}

void ld_state_set_layout(struct ld_state *st, struct ld_shardlayout *layout)
{
    ld_shardlayout_unref(st->layout);
    st->layout = ld_shardlayout_ref(layout);
}

void ld_state_publish_shards(struct ld_state *st, const struct ld_snapshot *snap,
                             struct ld_shardsnap *next)
{
    pthread_mutex_lock(&st->mu);
    if (next) {
        ld_shardsnap_unref(st->shards);
        st->shards = next;
    }
    struct ld_snapshot keep = st->snap;
    st->snap = *snap;
    memcpy(st->snap.lease, keep.lease, sizeof(keep.lease));
    memcpy(st->snap.identity, keep.identity, sizeof(keep.identity));
    for (struct ld_state_listener *l = st->listeners; l; l = l->next)
        l->fn(l->arg);
    pthread_mutex_unlock(&st->mu);
}

struct ld_shardsnap *ld_state_read_shards(struct ld_state *st, struct ld_snapshot *out)
{
    pthread_mutex_lock(&st->mu);
    if (out)
        *out = st->snap;
    struct ld_shardsnap *s = ld_shardsnap_ref(st->shards);
    pthread_mutex_unlock(&st->mu);
    return s;
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

enum ld_err ld_state_resign_enable(struct ld_state *st, int64_t wait_ms)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0)
        return LD_ESYS;
    st->resign.fd = fd;
    st->resign.wait_ms = wait_ms;
    return LD_OK;
}

int ld_state_resign_fd(struct ld_state *st)
{
    return st->resign.fd;
}

void ld_state_resign_drain(struct ld_state *st)
{
    uint64_t count;
    /* Fails with EAGAIN when nothing was pending: nothing to do then. */
    if (st->resign.fd >= 0 && read(st->resign.fd, &count, sizeof(count)) < 0)
        return;
}

uint64_t ld_state_resign_ask(struct ld_state *st, int64_t *wait_ms)
{
    uint64_t ticket = 0, one = 1;
    pthread_mutex_lock(&st->mu);
    if (st->resign.fd >= 0) {
        ticket = ++st->resign.asked;
        *wait_ms = st->resign.wait_ms;
    }
    pthread_mutex_unlock(&st->mu);
    /* After the count, so the loop that wakes up finds the ticket. A full
     * counter (EAGAIN) already means "look"; any other failure leaves the
     * loop unaware for now, so the caller is told there is no ticket (the
     * loop answers it unseen later). */
    if (ticket && write(st->resign.fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        ticket = 0;
    return ticket;
}

enum ld_resign_outcome ld_state_resign_outcome(struct ld_state *st, uint64_t ticket)
{
    enum ld_resign_outcome oc = LD_RESIGN_PENDING;
    pthread_mutex_lock(&st->mu);
    if (st->resign.done[ticket % LD_RESIGN_SLOTS].ticket == ticket)
        oc = st->resign.done[ticket % LD_RESIGN_SLOTS].outcome;
    pthread_mutex_unlock(&st->mu);
    return oc;
}

bool ld_state_resign_take(struct ld_state *st, uint64_t *first, uint64_t *last)
{
    pthread_mutex_lock(&st->mu);
    bool any = st->resign.asked > st->resign.taken;
    if (any) {
        *first = st->resign.taken + 1;
        *last = st->resign.asked;
        st->resign.taken = st->resign.asked;
    }
    pthread_mutex_unlock(&st->mu);
    return any;
}

void ld_state_resign_answer(struct ld_state *st, uint64_t first, uint64_t last,
                            enum ld_resign_outcome outcome)
{
    pthread_mutex_lock(&st->mu);
    /* Older tickets than the slots hold have stopped waiting anyway. */
    if (last - first >= LD_RESIGN_SLOTS)
        first = last - LD_RESIGN_SLOTS + 1;
    for (uint64_t t = first; t <= last; t++) {
        st->resign.done[t % LD_RESIGN_SLOTS].ticket = t;
        st->resign.done[t % LD_RESIGN_SLOTS].outcome = outcome;
    }
    for (struct ld_state_listener *l = st->listeners; l; l = l->next)
        l->fn(l->arg);
    pthread_mutex_unlock(&st->mu);
}

bool ld_snapshot_is_leader(const struct ld_snapshot *s, int64_t now_ms)
{
    return ld_leads_at(s->leading, s->lead_until_ms, now_ms);
}

bool ld_snapshot_in_term(const struct ld_snapshot *s, int64_t now_ms)
{
    return now_ms < s->term_until_ms;
}
