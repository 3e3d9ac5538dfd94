/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shard_hooks: each shard's hooks, fed and judged (see shard_hooks.h).
 */
#include "shard_hooks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* One shard's hooks. */
struct slot {
    struct ld_hook *hooks; /* owned array */
    size_t n_hooks;
};

struct ld_shard_hooks {
    struct slot *slots; /* one per shard */
    uint32_t n;
    size_t member_index;
    struct ld_hook_events *events; /* one per shard with --events, else NULL */
    /* The epoll set of the hooks' fds and the base fd; -1 until a hook
     * brings an fd. */
    int wait_fd;
};

struct ld_shard_hooks *ld_shard_hooks_new(uint32_t n_shards, size_t member_index)
{
    struct ld_shard_hooks *hk = calloc(1, sizeof(*hk));
    if (!hk)
        return NULL;
    hk->wait_fd = -1;
    hk->n = n_shards;
    hk->member_index = member_index;
    hk->slots = calloc(n_shards ? n_shards : 1, sizeof(*hk->slots));
    if (!hk->slots) {
        free(hk);
        return NULL;
    }
    return hk;
}

void ld_shard_hooks_free(struct ld_shard_hooks *hk)
{
    if (!hk)
        return;
    for (uint32_t k = 0; hk->events && k < hk->n; k++)
        ld_hook_events_clear(&hk->events[k]);
    free(hk->events);
    if (hk->wait_fd >= 0)
        close(hk->wait_fd);
    for (uint32_t k = 0; k < hk->n; k++)
        free(hk->slots[k].hooks);
    free(hk->slots);
    free(hk);
}

enum ld_err ld_shard_hooks_add(struct ld_shard_hooks *hk, uint32_t k,
                               const struct ld_hook *hook, struct ld_errinfo *err)
{
    if (k >= hk->n)
        return ld_errinfo_set(err, LD_EINVAL, "no shard %u", (unsigned)k);
    struct slot *sl = &hk->slots[k];
    struct ld_hook *hooks = realloc(sl->hooks, (sl->n_hooks + 1) * sizeof(*hooks));
    if (!hooks)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    sl->hooks = hooks;
    sl->hooks[sl->n_hooks] = *hook;
    sl->hooks[sl->n_hooks].election = hk->member_index; /* the claim rests on it */
    sl->n_hooks++;
    return LD_OK;
}

enum ld_err ld_shard_hooks_add_events(struct ld_shard_hooks *hk,
                                      const struct ld_hook_events_config *base,
                                      const struct ld_shardgroup *group,
                                      struct ld_errinfo *err)
{
    if (hk->events)
        return ld_errinfo_set(err, LD_EINVAL, "shard hooks: Event hooks added twice");
    hk->events = calloc(hk->n ? hk->n : 1, sizeof(*hk->events));
    if (!hk->events)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < hk->n; k++) {
        struct ld_hook_events_config ec = *base;
        ec.lease = ld_shardgroup_shard_lease(group, k);
        ld_hook_events_init(&hk->events[k], &ec);
    }
    for (uint32_t k = 0; k < hk->n; k++) {
        struct ld_hook h = ld_hook_events_bind(&hk->events[k], hk->member_index);
        enum ld_err rc = ld_shard_hooks_add(hk, k, &h, err);
        if (rc != LD_OK)
            return rc;
    }
    return LD_OK;
}

void ld_shard_hooks_feed(struct ld_shard_hooks *hk, uint32_t k,
                         const struct ld_election_status *st, int64_t now_ms)
{
    const struct slot *sl = &hk->slots[k];
    for (size_t i = 0; i < sl->n_hooks; i++)
        (void)sl->hooks[i].on_publish(sl->hooks[i].ctx, st, now_ms);
}

int64_t ld_shard_hooks_next_wake(const struct ld_shard_hooks *hk, int64_t now_ms)
{
    int64_t at = INT64_MAX;
    for (uint32_t k = 0; k < hk->n; k++) {
        for (size_t i = 0; i < hk->slots[k].n_hooks; i++) {
            const struct ld_hook *h = &hk->slots[k].hooks[i];
            int64_t w = h->next_wake_ms ? h->next_wake_ms(h->ctx, now_ms) : INT64_MAX;
            if (w < at)
                at = w;
        }
    }
    return at;
}

bool ld_shard_hooks_take_wake(struct ld_shard_hooks *hk)
{
    bool news = false;
    for (uint32_t k = 0; k < hk->n; k++) {
        for (size_t i = 0; i < hk->slots[k].n_hooks; i++) {
            const struct ld_hook *h = &hk->slots[k].hooks[i];
            if (h->take_wake && h->take_wake(h->ctx))
                news = true;
        }
    }
    return news;
}

struct ld_release_hold ld_shard_hooks_judge(const struct ld_shard_hooks *hk, uint32_t k,
                                            int64_t term_until_ms,
                                            int64_t courtesy_until_ms, int64_t now_ms)
{
    return ld_release_hold_judge(hk->slots[k].hooks, hk->slots[k].n_hooks, term_until_ms,
                                 courtesy_until_ms, now_ms);
}

bool ld_shard_hooks_forbid_release(const struct ld_shard_hooks *hk, int64_t now_ms)
{
    for (uint32_t k = 0; k < hk->n; k++) {
        for (size_t i = 0; i < hk->slots[k].n_hooks; i++) {
            const struct ld_hook *h = &hk->slots[k].hooks[i];
            if (h->forbids_release && h->forbids_release(h->ctx, now_ms))
                return true;
        }
    }
    return false;
}

enum ld_err ld_shard_hooks_add_wake_fd(struct ld_shard_hooks *hk, int fd, int base_fd,
                                       struct ld_errinfo *err)
{
    struct epoll_event ev = {.events = EPOLLIN};
    if (hk->wait_fd < 0) {
        int set = epoll_create1(EPOLL_CLOEXEC);
        ev.data.fd = base_fd;
        if (set < 0 || epoll_ctl(set, EPOLL_CTL_ADD, base_fd, &ev) != 0) {
            int saved = errno;
            if (set >= 0)
                close(set);
            errno = saved;
            goto fail;
        }
        hk->wait_fd = set;
    }
    ev.data.fd = fd;
    if (epoll_ctl(hk->wait_fd, EPOLL_CTL_ADD, fd, &ev) == 0)
        return LD_OK;
fail:
    return ld_errinfo_set(err, LD_ESYS, "shard mode: cannot watch a hook's fd: %s",
                          strerror(errno));
}

int ld_shard_hooks_wait_fd(const struct ld_shard_hooks *hk, int base_fd)
{
    return hk->wait_fd >= 0 ? hk->wait_fd : base_fd;
}
