/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook_proxy: the API write gate (proxy.h) as a hook of the shell (hook.h).
 * The proxy's upstream thread counts, per election, the writes it has sent
 * upstream and not yet seen answered or cut; while any is left, the hook
 * holds that election's release (a safety hold: a write that commits after
 * the next leader took over is what the gate is there to prevent), and an
 * eventfd in the shell's wake set ends the wait as soon as the last one
 * ends.
 *
 * A write that went out and ended without an answer may still be applied
 * by the API server; its key's release is then not written at all.
 *
 * Writes are counted by key: the shard their verdict names in shard mode,
 * 0 for the one Lease; each key's hook is bound to the one Lease's
 * election, or in shard mode to its shard through the shard mode
 * (mode_shards.h), which asks it before that shard's release.
 */
#ifndef LEADERD_HOOK_PROXY_H
#define LEADERD_HOOK_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "hook.h"

struct ld_hook_proxy;

/* Counts for keys 0 .. n_keys - 1 (n_keys >= 1); a write of unknown fate
 * forbids its key's release for forbid_ms after it ended (the daemon
 * passes the lease duration: as long as an expiry of the Lease would have
 * given it to land). Returns a new object (free with ld_hook_proxy_free,
 * after the proxy and the shell are gone), or NULL with errno set. */
struct ld_hook_proxy *ld_hook_proxy_new(uint32_t n_keys, int64_t forbid_ms);

void ld_hook_proxy_free(struct ld_hook_proxy *hp); /* NULL-safe */

/* The eventfd for the shell's wake set: readable once the last write of a
 * key whose release is held has ended. */
int ld_hook_proxy_fd(const struct ld_hook_proxy *hp);

/* The hook of key (an unknown key is taken as 0), bound to election (hp
 * borrowed: it must outlive the shell). Its release hold is a safety hold:
 * true while a write of key is counted; it forbids the release after a
 * write of unknown fate (ld_hook_proxy_ended). Key 0's hook reads the eventfd
 * (its take_wake) for every key: bind key 0 whenever the fd is in the
 * wake set. */
struct ld_hook ld_hook_proxy_bind(struct ld_hook_proxy *hp, uint32_t key,
                                  size_t election);

/* A write of key is about to be sent upstream, and counts from now on;
 * before the proxy's last look at the leadership, so that a step-down
 * published after that look finds it counted. Any thread; an unknown
 * key is not counted. */
void ld_hook_proxy_sent(struct ld_hook_proxy *hp, uint32_t key);

/* How a counted write ended. */
enum ld_write_fate {
    LD_WRITE_ANSWERED,     /* its answer began, or it never went out */
    LD_WRITE_FATE_UNKNOWN, /* it went out and got no answer (cut, or its
                              connection failed): the API server may still
                              apply it */
};

/* A write counted by ld_hook_proxy_sent ended. One of unknown fate forbids
 * key's release (its hook's forbids_release) for forbid_ms from now, or
 * until key's election starts leading again: a release given up for it
 * lets the Lease expire by itself, which gives the write lease-duration -
 * renew-deadline to land before anyone may take over; one asked later
 * (a shard's give-back tried again, a leader that went on leading) finds
 * the write landed or lost by then. Any thread. */
void ld_hook_proxy_ended(struct ld_hook_proxy *hp, uint32_t key, enum ld_write_fate fate);

#endif
