/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mode_shards: the shard group on the shell's host (see mode_shards.h).
 *
 * The group's I/O is the library's shard host (shardhost.h); this file
 * binds it to the shell: the member election is the shell's election 0,
 * the host's callbacks pass through, and what the shard host says is
 * turned into the shard table (shardsnap.h), the hooks' view of each
 * shard's claim, the drain channel's state and /healthz.
 */
#include "mode_shards.h"

#include <stdio.h>
#include <stdlib.h>

#include "health.h"
#include "host.h"
#include "release_hold.h"
#include "shard_hooks.h"
#include "shard_table.h"
#include "shardhost.h"

/* With nothing visible changing, the heartbeat is still published this
 * often (/healthz judges the loop alive by it). */
#define HEARTBEAT_MS 1000

#define MEMBER 0

struct ld_mode_shards {
    struct ld_mode_shards_config c;
    struct ld_clock clock;
    struct ld_shardhost *sh;
    struct ld_host *host;              /* the shell's, once attached */
    const struct ld_shardgroup *group; /* the shard host's */
    struct ld_shard_hooks *hooks;      /* each shard's, fed its claim */
    struct ld_shard_table *table;
    int64_t heartbeat_at_ms; /* the last publish of the snapshot */
    char health[256];
};

/* ---- the host's callbacks, passed on -------------------------------------- */

static void on_publish(void *ctx, const struct ld_host_view *v, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    ld_shardhost_on_publish(s->sh, v, now_ms);
    if (v->index == MEMBER)
        ld_health_describe(v, s->c.host.renew_deadline_ms, now_ms, s->health,
                           sizeof(s->health));
}

static void on_event(void *ctx, size_t index, const struct ld_event *ev, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    (void)now_ms;
    ld_shardhost_on_event(s->sh, index, ev);
}

static void on_lease_event(void *ctx, const struct ld_watch_event *ev, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    ld_shardhost_on_lease_event(s->sh, ev, now_ms);
}

static void on_watch_started(void *ctx, bool from_current, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    ld_shardhost_on_watch_started(s->sh, from_current, now_ms);
}

/* ---- the table ------------------------------------------------------------ */

/* Shard k's claim, as the table shows it, to its hooks. */
static void feed_hooks(void *ctx, uint32_t k, const struct ld_election_status *st,
                       int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    ld_shard_hooks_feed(s->hooks, k, st, now_ms);
}

/* The snapshot after every pass that changed the table, else at least a
 * heartbeat a second. */
static void publish(struct ld_mode_shards *s, int64_t now_ms)
{
    struct ld_shardsnap *table = ld_shard_table_update(s->table, now_ms);
    if (!table && now_ms - s->heartbeat_at_ms < HEARTBEAT_MS)
        return;
    struct ld_snapshot snap;
    ld_state_read(s->c.state, &snap);
    snap.leader[0] = '\0';
    snap.leading = false;
    snap.observed =
        ld_shardhost_member(s->sh).observed && ld_shardgroup_observed(s->group);
    snap.heartbeat_ms = now_ms;
    snap.transitions_seen = (int64_t)ld_shard_table_transitions(s->table);
    const char *stuck = ld_shardhost_stuck(s->sh, now_ms);
    snprintf(snap.health_error, sizeof(snap.health_error), "%s",
             !s->health[0] && stuck ? stuck : s->health);
    ld_state_publish_shards(s->c.state, &snap, table);
    s->heartbeat_at_ms = now_ms;
}

/* ---- what the shard host asks ---------------------------------------------- */

static void publish_op(void *ctx, int64_t now_ms)
{
    publish(ctx, now_ms);
}

/* A give-back's drain, as POST /shards/ID/drained and /shards show it. */
static void on_drain(void *ctx, uint32_t k, bool draining)
{
    struct ld_mode_shards *s = ctx;
    ld_state_drain_set(s->c.state, k, draining,
                       draining ? ld_shard_table_entry(s->table, k)->term : 0);
}

static bool take_drained(void *ctx, uint32_t k)
{
    struct ld_mode_shards *s = ctx;
    return ld_state_drained_take(s->c.state, k);
}

/* Shard k's release hold: its hooks judged (release_hold.h). */
static enum ld_shardhost_verdict release_hold(void *ctx, uint32_t k,
                                              const struct ld_shardhost_bounds *b,
                                              int64_t now_ms, int64_t *until_ms,
                                              const char **why)
{
    struct ld_mode_shards *s = ctx;
    int64_t courtesy_until =
        b->stopping_since_ms == INT64_MIN
            ? INT64_MIN
            : b->stopping_since_ms + ld_release_courtesy_ms(s->c.host.renew_deadline_ms);
    struct ld_release_hold h =
        ld_shard_hooks_judge(s->hooks, k, b->term_until_ms, courtesy_until, now_ms);
    *until_ms = h.until_ms;
    *why = h.why;
    switch (h.verdict) {
    case LD_RELEASE_WAIT:
        return LD_SHARDHOST_RELEASE_WAIT;
    case LD_RELEASE_GIVE_UP:
        return LD_SHARDHOST_RELEASE_NEVER;
    case LD_RELEASE_NOW:
        break;
    }
    return LD_SHARDHOST_RELEASE_NOW;
}

static bool take_wake(void *ctx)
{
    struct ld_mode_shards *s = ctx;
    return ld_shard_hooks_take_wake(s->hooks);
}

/* The exit's wait ended: a drained shard (the drain channel) or a hold's
 * news (a hook's fd). */
static void finish_wake(void *ctx)
{
    struct ld_mode_shards *s = ctx;
    ld_state_resign_drain(s->c.state);
    (void)ld_shard_hooks_take_wake(s->hooks);
}

static int64_t after_pass(void *ctx, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    ld_state_resign_drain(s->c.state); /* POST /shards/ID/drained's wake-up */
    int64_t at = ld_shardhost_after_pass(s->sh, now_ms);
    if (s->heartbeat_at_ms + HEARTBEAT_MS < at)
        at = s->heartbeat_at_ms + HEARTBEAT_MS;
    int64_t hw = ld_shard_hooks_next_wake(s->hooks, now_ms);
    if (hw < at)
        at = hw;
    return at > now_ms ? at : now_ms + 1;
}

/* ---- the member election -------------------------------------------------- */

/* The member Lease's release frees every shard whose record names this
 * replica at once, so it waits for what every shard's hooks hold, and is
 * not written when a shard's hook forbids it (release_hold.h): a hook of
 * the member election that speaks for all of them. The shell bounds it by
 * the member term. */
static bool member_holds_release(void *ctx, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    bool never;
    return ld_shardhost_member_holds_release(s->sh, now_ms, &never);
}

static bool member_forbids_release(void *ctx, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    return ld_shard_hooks_forbid_release(s->hooks, now_ms);
}

static bool member_on_publish(void *ctx, const struct ld_election_status *st,
                              int64_t now_ms)
{
    (void)ctx;
    (void)st;
    (void)now_ms;
    return false;
}

static enum ld_err add_member(struct ld_mode_shards *s, struct ld_shell *sh,
                              struct ld_errinfo *err)
{
    struct ld_election_config ec;
    size_t index;
    ld_shardhost_member_config(s->sh, &ec);
    enum ld_err rc = ld_shell_add_election(sh, &ec, &index, err);
    if (rc == LD_OK && index != MEMBER)
        return ld_errinfo_set(err, LD_EINVAL, "election host: unexpected index");
    struct ld_hook shards = {.ctx = s,
                             .election = MEMBER,
                             .on_publish = member_on_publish,
                             .holds_release = member_holds_release,
                             .forbids_release = member_forbids_release,
                             .hold = LD_HOOK_HOLD_SAFETY};
    if (rc == LD_OK)
        rc = ld_shell_add_hook(sh, &shards, err);
    return rc;
}

/* ---- construction ---------------------------------------------------------- */

static enum ld_err make_host(struct ld_mode_shards *s, struct ld_errinfo *err)
{
    struct ld_shardhost_config hc = s->c.host;
    hc.clock = &s->clock;
    hc.ops = (struct ld_shardhost_ops){.ctx = s,
                                       .publish = publish_op,
                                       .on_drain = on_drain,
                                       .take_drained = take_drained,
                                       .release_hold = release_hold,
                                       .take_wake = finish_wake};
    s->sh = ld_shardhost_new(&hc, err);
    if (!s->sh)
        return err->code;
    s->group = ld_shardhost_group(s->sh);
    s->hooks = ld_shard_hooks_new(ld_shardhost_count(s->sh), MEMBER);
    if (!s->hooks)
        return ld_errinfo_set(err, LD_ENOMEM, "out of memory");
    struct ld_shard_table_config tc = {.sh = s->sh,
                                       .clock = &s->clock,
                                       .metrics = s->c.metrics,
                                       .on_entry = feed_hooks,
                                       .ctx = s};
    s->table = ld_shard_table_new(&tc, err);
    return s->table ? LD_OK : err->code;
}

/* With --events, every shard gets its own Event hook. */
static enum ld_err make_events(struct ld_mode_shards *s, struct ld_errinfo *err)
{
    if (!s->c.events)
        return LD_OK;
    struct ld_hook_events_config ec = {
        .kube = s->c.host.kube,
        .namespace_ = s->c.host.namespace_,
        .identity = s->c.host.identity,
        .metrics = s->c.metrics,
        .clock = &s->clock,
        .timeout_ms = s->c.host.call_timeout_ms,
    };
    return ld_shard_hooks_add_events(s->hooks, &ec, s->group, err);
}

static void host_config(void *ctx, struct ld_host_config *hc)
{
    struct ld_mode_shards *s = ctx;
    hc->label_selector = ld_shardhost_selector(s->sh);
    hc->log_names = true;
}

/* Election 0, the only one, is the member Lease: the shard Leases are
 * written by the shard host alone, when their owner changes. */
static enum ld_err attach(void *ctx, struct ld_shell *sh, struct ld_errinfo *err)
{
    struct ld_mode_shards *s = ctx;
    s->host = ld_shell_host(sh);
    enum ld_err rc = add_member(s, sh, err);
    if (rc == LD_OK)
        ld_shardhost_attach(s->sh, s->host, MEMBER);
    return rc;
}

/* ---- shutting down ----------------------------------------------------------- */

static void on_shutdown(void *ctx, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    (void)now_ms; /* the shard host reads the same clock */
    ld_shard_table_touch(s->table);
    ld_shardhost_shutdown(s->sh);
}

/* The drain channel's eventfd ends the exit's wait for a drained shard, a
 * hook's fd the wait for its hold. */
static void finish(void *ctx, int64_t now_ms)
{
    struct ld_mode_shards *s = ctx;
    (void)now_ms;
    ld_shardhost_finish(s->sh,
                        ld_shard_hooks_wait_fd(s->hooks, ld_state_resign_fd(s->c.state)));
}

/* ---- the mode ------------------------------------------------------------ */

static const struct ld_shell_mode_ops ops = {
    .takes_resignations = false, /* POST /resign is no route in shard mode */
    .host_config = host_config,
    .attach = attach,
    .on_publish = on_publish,
    .on_event = on_event,
    .lease_event = on_lease_event,
    .watch_started = on_watch_started,
    .after_pass = after_pass,
    .on_shutdown = on_shutdown,
    .finish = finish,
    .take_wake = take_wake,
};

struct ld_mode_shards *ld_mode_shards_new(const struct ld_mode_shards_config *cfg,
                                          struct ld_errinfo *err)
{
    struct ld_mode_shards *s = calloc(1, sizeof(*s));
    if (!s) {
        ld_errinfo_set(err, LD_ENOMEM, "out of memory");
        return NULL;
    }
    s->c = *cfg;
    s->clock = ld_clock_or_real(cfg->host.clock);
    if (make_host(s, err) != LD_OK || make_events(s, err) != LD_OK ||
        (ld_state_drain_enable(cfg->state, ld_shardhost_count(s->sh)) != LD_OK &&
         ld_errinfo_set(err, LD_ENOMEM, "out of memory") != LD_OK)) {
        ld_mode_shards_free(s);
        return NULL;
    }
    return s;
}

struct ld_shell_mode ld_mode_shards(struct ld_mode_shards *s)
{
    return (struct ld_shell_mode){.ops = &ops, .ctx = s};
}

const struct ld_shardgroup *ld_mode_shards_group(const struct ld_mode_shards *s)
{
    return s->group;
}

enum ld_err ld_mode_shards_add_shard_hook(struct ld_mode_shards *s, uint32_t shard,
                                          const struct ld_hook *hook,
                                          struct ld_errinfo *err)
{
    return ld_shard_hooks_add(s->hooks, shard, hook, err);
}

enum ld_err ld_mode_shards_add_wake_fd(struct ld_mode_shards *s, int fd,
                                       struct ld_errinfo *err)
{
    return ld_shard_hooks_add_wake_fd(s->hooks, fd, ld_state_resign_fd(s->c.state), err);
}

void ld_mode_shards_free(struct ld_mode_shards *s)
{
    if (!s)
        return;
    ld_shardhost_free(s->sh); /* cancels its calls before the hooks go */
    ld_shard_hooks_free(s->hooks);
    ld_shard_table_free(s->table);
    free(s);
}
