/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook_proxy: the writes in flight of the API write gate as a release hold
 * (see hook_proxy.h).
 *
 * The counts are atomics: the upstream thread changes them, the shell's
 * thread reads them. A key's "waited" flag is set by the shell before it
 * reads the count and taken by the thread that brings the count to zero,
 * so one of the two always sees the other: either the shell reads zero, or
 * the eventfd wakes it. Nothing is signalled while nobody waits, so a
 * leader's ordinary writes never wake the shell.
 */
#include "hook_proxy.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"

struct key {
    struct ld_hook_proxy *hp;
    uint32_t index;
    atomic_uint in_flight;
    atomic_bool waited; /* the shell holds this key's release */
    /* When a write of unknown fate last ended (ld_mono_ms), INT64_MIN for
     * none since leading began. */
    _Atomic int64_t unknown_at_ms;
    bool was_leading; /* at the last publish (the shell's thread only) */
};

struct ld_hook_proxy {
    int fd;
    int64_t forbid_ms;
    uint32_t n;
    struct key keys[];
};

struct ld_hook_proxy *ld_hook_proxy_new(uint32_t n_keys, int64_t forbid_ms)
{
    struct ld_hook_proxy *hp = NULL;
    if (n_keys == 0)
        n_keys = 1;
    hp = calloc(1, sizeof(*hp) + (size_t)n_keys * sizeof(struct key));
    if (!hp)
        return NULL;
    hp->n = n_keys;
    hp->forbid_ms = forbid_ms;
    for (uint32_t i = 0; i < n_keys; i++) {
        hp->keys[i].hp = hp;
        hp->keys[i].index = i;
        atomic_init(&hp->keys[i].in_flight, 0);
        atomic_init(&hp->keys[i].waited, false);
        atomic_init(&hp->keys[i].unknown_at_ms, INT64_MIN);
    }
    hp->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (hp->fd < 0) {
        free(hp);
        return NULL;
    }
    return hp;
}

void ld_hook_proxy_free(struct ld_hook_proxy *hp)
{
    if (!hp)
        return;
    close(hp->fd);
    free(hp);
}

int ld_hook_proxy_fd(const struct ld_hook_proxy *hp)
{
    return hp->fd;
}

void ld_hook_proxy_sent(struct ld_hook_proxy *hp, uint32_t key)
{
    if (hp && key < hp->n)
        atomic_fetch_add(&hp->keys[key].in_flight, 1);
}

void ld_hook_proxy_ended(struct ld_hook_proxy *hp, uint32_t key, enum ld_write_fate fate)
{
    if (!hp || key >= hp->n)
        return;
    struct key *k = &hp->keys[key];
    /* Before the count drops: the shell, woken by it, finds the mark. */
    if (fate == LD_WRITE_FATE_UNKNOWN)
        atomic_store(&k->unknown_at_ms, ld_mono_ms());
    if (atomic_fetch_sub(&k->in_flight, 1) == 1 && atomic_exchange(&k->waited, false))
        (void)!eventfd_write(hp->fd, 1);
}

/* A new start of leading begins a new count of unknown fates: the old
 * term's release, held or given up, is behind it. */
static bool on_publish(void *ctx, const struct ld_election_status *st, int64_t now_ms)
{
    struct key *k = ctx;
    (void)now_ms;
    if (st->leading && !k->was_leading)
        atomic_store(&k->unknown_at_ms, INT64_MIN);
    k->was_leading = st->leading;
    return false;
}

static bool forbids_release(void *ctx, int64_t now_ms)
{
    struct key *k = ctx;
    int64_t at = atomic_load(&k->unknown_at_ms);
    return at != INT64_MIN && now_ms - at < k->hp->forbid_ms;
}

static bool holds_release(void *ctx, int64_t now_ms)
{
    struct key *k = ctx;
    (void)now_ms;
    atomic_store(&k->waited, true);
    if (atomic_load(&k->in_flight) > 0)
        return true;
    atomic_store(&k->waited, false);
    return false;
}

/* One eventfd serves every key, read by key 0's hook alone: the host's
 * next pass asks every held release again anyway. */
static bool take_wake(void *ctx)
{
    eventfd_t n;
    return eventfd_read(((struct key *)ctx)->hp->fd, &n) == 0;
}

struct ld_hook ld_hook_proxy_bind(struct ld_hook_proxy *hp, uint32_t key, size_t election)
{
    if (key >= hp->n)
        key = 0;
    return (struct ld_hook){.ctx = &hp->keys[key],
                            .election = election,
                            .on_publish = on_publish,
                            .holds_release = holds_release,
                            .forbids_release = forbids_release,
                            .hold = LD_HOOK_HOLD_SAFETY,
                            .take_wake = key == 0 ? take_wake : NULL};
}
