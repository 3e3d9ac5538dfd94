/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_shardassign: the assignment function's contract over thousands of
 * random membership sequences from fixed seeds (N in 1..256, M in 1..40;
 * joins, graceful leaves, crashes): balance after every step, the movement
 * bounds, the fixed point, agreement between replicas, and the hand-over
 * as replicas really do it (a shard given back is free until its new owner
 * takes it, a dead owner's Lease expires later, some replicas see a change
 * up to three rounds late, changes overlap) converging to one balanced
 * fixed point.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardassign.h"
#include "support/run_suite.h"

#define POOL 64   /* identities a sequence can draw members from */
#define MAX_M 40  /* most live members at once */
#define MAX_N 256 /* most shards */
#define NONE (-1)
#define NAME_SIZE 32

/* ck_assert records a mark point (a write to Check's pipe) even when it
 * holds; the checks in the simulation loops call into Check only when they
 * fail, which keeps thousands of sequences fast. */
#define EXPECT(cond)                                                                     \
    do {                                                                                 \
        if (!(cond))                                                                     \
            ck_abort_msg("expected %s", #cond);                                          \
    } while (0)
#define EXPECT_EQ(a, b)                                                                  \
    do {                                                                                 \
        unsigned long long a_ = (a), b_ = (b);                                           \
        if (a_ != b_)                                                                    \
            ck_abort_msg("expected %s == %s: %llu != %llu", #a, #b, a_, b_);             \
    } while (0)
#define EXPECT_LE(a, b)                                                                  \
    do {                                                                                 \
        unsigned long long a_ = (a), b_ = (b);                                           \
        if (a_ > b_)                                                                     \
            ck_abort_msg("expected %s <= %s: %llu > %llu", #a, #b, a_, b_);              \
    } while (0)

/* splitmix64: a fixed-seed source of test decisions. */
static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint32_t below(uint64_t *rng, uint32_t n)
{
    return (uint32_t)(next_rand(rng) % n);
}

/* Identities, sorted, so the members of a set in pool order are sorted.
 * Two copies in separate storage: a second replica reads the same names
 * from its own memory. */
static char names[POOL][NAME_SIZE];
static char names_copy[POOL][NAME_SIZE];
/* When each identity last joined (a counter: larger is newer), as every
 * replica reads it from the member Lease's acquireTime. */
static int64_t joined_at[POOL];
static int64_t join_clock;

static void mark_joined(int x)
{
    joined_at[x] = ++join_clock;
}

static int by_str(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void make_names(uint64_t *rng)
{
    for (int i = 0; i < POOL; i++)
        snprintf(names[i], sizeof(names[i]), "%04x%02u",
                 (unsigned)(next_rand(rng) & 0xffff), (unsigned)i);
    qsort(names, POOL, sizeof(names[0]), by_str);
    memcpy(names_copy, names, sizeof(names));
}

static int count_set(const bool *set)
{
    int m = 0;
    for (int i = 0; i < POOL; i++)
        m += set[i];
    return m;
}

/* Runs ld_shardassign for the members in view and the owners given as pool
 * indices (NONE for a free shard), reading names from table; writes each
 * shard's target as a pool index (NONE when nobody). */
static void assign(char table[POOL][NAME_SIZE], const bool *view, uint32_t n,
                   const int *owner, int *target)
{
    const char *members[POOL];
    const char *owners[MAX_N] = {NULL};
    int pool_of[POOL];
    int64_t joined[POOL];
    uint32_t out[MAX_N];
    uint32_t m = 0;

    for (int i = 0; i < POOL; i++) {
        if (view[i]) {
            pool_of[m] = i;
            joined[m] = joined_at[i];
            members[m++] = table[i];
        }
    }
    for (uint32_t s = 0; s < n; s++)
        owners[s] = owner[s] == NONE ? NULL : table[owner[s]];
    EXPECT(ld_shardassign(n, owners, m, members, joined, out) == LD_OK);
    for (uint32_t s = 0; s < n; s++) {
        if (m == 0) {
            EXPECT(out[s] == LD_SHARD_NOBODY);
            target[s] = NONE;
        } else {
            EXPECT(out[s] < m);
            target[s] = pool_of[out[s]];
        }
    }
}

/* Every shard has a member of view and every member has floor or ceil. */
static void check_balanced(const bool *view, uint32_t n, const int *target)
{
    int per[POOL] = {0};
    uint32_t m = (uint32_t)count_set(view);
    for (uint32_t s = 0; s < n; s++) {
        EXPECT(target[s] != NONE);
        EXPECT(view[target[s]]);
        per[target[s]]++;
    }
    for (int i = 0; i < POOL; i++) {
        if (!view[i])
            continue;
        EXPECT(per[i] >= (int)(n / m));
        EXPECT_LE(per[i], (int)((n + m - 1) / m));
    }
}

/* With the targets as owners the output is the same (stable). */
static void check_fixed_point(const bool *view, uint32_t n, const int *target)
{
    int again[MAX_N];
    assign(names, view, n, target, again);
    EXPECT(!memcmp(again, target, n * sizeof(*target)));
}

/* Another replica, same inputs in its own memory: the same answer. */
static void check_agreement(const bool *view, uint32_t n, const int *owner,
                            const int *target)
{
    int other[MAX_N];
    assign(names_copy, view, n, owner, other);
    EXPECT(!memcmp(other, target, n * sizeof(*target)));
}

static int pick(uint64_t *rng, const bool *set, bool want)
{
    int k = (int)below(rng, POOL);
    for (int i = 0; i < POOL; i++) {
        int c = (k + i) % POOL;
        if (set[c] == want)
            return c;
    }
    return NONE;
}

/* Whether pool member a ranks before b: newer first, then by name. */
static bool ranks_before(int a, int b)
{
    return joined_at[a] != joined_at[b] ? joined_at[a] > joined_at[b] : a < b;
}

/* The quota of pool member x among the members of view, written out from
 * the rule (shardassign.h) independently of the code: floor, plus one for
 * the newest N % M members; with fewer shards than members the members
 * holding a shard (owner, by pool index; NULL: none) get theirs first. */
static uint32_t quota_of(const bool *view, uint32_t n, int x, const int *owner)
{
    uint32_t m = (uint32_t)count_set(view), q = n / m, extra = n % m;
    bool holds[POOL] = {false};
    for (uint32_t s = 0; q == 0 && owner && s < n; s++)
        if (owner[s] != NONE && view[owner[s]])
            holds[owner[s]] = true;
    uint32_t holders = (uint32_t)count_set(holds);
    if (holds[x])
        return 1;
    extra -= holders < extra ? holders : extra;
    uint32_t newer = 0; /* non-holders ranked before x */
    for (int i = 0; i < POOL; i++)
        newer += view[i] && !holds[i] && i != x && ranks_before(i, x);
    return q + (newer < extra);
}

enum event { EV_JOIN, EV_LEAVE, EV_CRASH };

static enum event pick_event(uint64_t *rng, int m)
{
    if (m <= 1)
        return EV_JOIN;
    if (m >= MAX_M)
        return below(rng, 2) ? EV_LEAVE : EV_CRASH;
    return (enum event)below(rng, 3);
}

START_TEST(sequences_in_lockstep)
{
    uint64_t rng = 9;
    make_names(&rng);
    for (int seq = 0; seq < 2000; seq++) {
        uint32_t n = 1 + below(&rng, MAX_N);
        bool live[POOL] = {false};
        int owner[MAX_N], input[MAX_N], prev[MAX_N], next[MAX_N];
        for (int k = (int)(1 + below(&rng, MAX_M)); k > 0; k--) {
            int x = pick(&rng, live, false);
            live[x] = true;
            mark_joined(x);
        }

        for (uint32_t s = 0; s < n; s++)
            owner[s] = NONE;
        assign(names, live, n, owner, prev);
        check_balanced(live, n, prev);
        check_fixed_point(live, n, prev);
        check_agreement(live, n, owner, prev);

        for (int step = 0; step < 6; step++) {
            int m = count_set(live);
            enum event ev = pick_event(&rng, m);
            int x = pick(&rng, live, ev != EV_JOIN);
            uint32_t moved = 0, held = 0;

            live[x] = ev == EV_JOIN;
            if (ev == EV_JOIN)
                mark_joined(x);
            memcpy(owner, prev, n * sizeof(*owner));
            if (ev == EV_LEAVE) /* released: free; crashed: still names x */
                for (uint32_t s = 0; s < n; s++)
                    owner[s] = owner[s] == x ? NONE : owner[s];
            assign(names, live, n, owner, next);
            memcpy(input, owner, n * sizeof(*owner));

            for (uint32_t s = 0; s < n; s++) {
                held += prev[s] == x;
                if (next[s] == prev[s])
                    continue;
                moved++;
                if (ev == EV_JOIN)
                    EXPECT(next[s] == x); /* only to the newcomer */
                else
                    EXPECT(prev[s] == x); /* only the leaver's */
            }
            if (ev == EV_JOIN) {
                uint32_t m1 = (uint32_t)m + 1;
                EXPECT_LE(moved, (n + m1 - 1) / m1 + 1);      /* the contract */
                EXPECT_LE(moved, (n + m1 - 1) / m1);          /* the header: no +1 */
                EXPECT_EQ(moved, quota_of(live, n, x, prev)); /* exactly its quota */
            } else {
                EXPECT_EQ(moved, held);
                /* A crash (owner still named) and a leave (owner free) agree. */
                int other[MAX_N];
                for (uint32_t s = 0; s < n; s++)
                    owner[s] = prev[s] == x ? (ev == EV_LEAVE ? x : NONE) : prev[s];
                assign(names, live, n, owner, other);
                EXPECT(!memcmp(other, next, n * sizeof(*next)));
            }
            check_balanced(live, n, next);
            check_fixed_point(live, n, next);
            check_agreement(live, n, input, next);
            memcpy(prev, next, n * sizeof(*prev));
        }
    }
}
END_TEST

/*
 * The hand-over as replicas do it. A shard changes hands only by its owner
 * giving it back (it is then free) and its target taking it; a crashed
 * owner's Lease stays held for `expiry` rounds. Each action happens in a
 * round with probability 1/2. For the first stale_rounds rounds of a
 * change, replicas in `stale` still compute from the old member set; a
 * free shard that two replicas both claim goes to one of them, as a Lease
 * election would.
 */
struct world {
    uint32_t n;
    bool alive[POOL];    /* processes running (their members are live) */
    bool old_view[POOL]; /* the members before the change */
    bool stale[POOL];    /* replicas still on old_view this round */
    int owner[MAX_N];    /* shard Lease holder, NONE when free */
    int expiry[MAX_N];   /* rounds until a dead holder's Lease expires */
    uint32_t transfers;  /* acquisitions by someone other than the start owner */
    bool changed[MAX_N]; /* shard acquired by someone other than its start owner */
    int start_owner[MAX_N];
    int stale_rounds; /* rounds left with views that differ */
    /* Releases and acquisitions by replicas on old_view that the new view
     * would not make (a lagging replica acting on news it has not seen). */
    uint32_t stale_acts;
    uint32_t view_diffs; /* shards whose target differed between the views */
};

/* One round of every replica acting once. Returns true, doing nothing,
 * when the views agree and every shard is held by its target already. */
static bool world_round(struct world *w, uint64_t *rng)
{
    int t_new[MAX_N], t_old[MAX_N];
    bool any_stale = count_set(w->stale) > 0;

    assign(names, w->alive, w->n, w->owner, t_new);
    if (!any_stale && !memcmp(t_new, w->owner, w->n * sizeof(*t_new)))
        return true;
    if (any_stale) {
        assign(names, w->old_view, w->n, w->owner, t_old);
        for (uint32_t s = 0; s < w->n; s++)
            w->view_diffs += t_old[s] != t_new[s];
    } else {
        memcpy(t_old, t_new, w->n * sizeof(*t_new));
    }
    for (uint32_t s = 0; s < w->n; s++) {
        int o = w->owner[s];
        if (o != NONE && !w->alive[o]) {
            if (w->expiry[s]-- <= 0)
                w->owner[s] = NONE;
            continue;
        }
        if (o != NONE) {
            int t = w->stale[o] ? t_old[s] : t_new[s];
            if (t != o && below(rng, 2)) {
                w->owner[s] = NONE; /* graceful release */
                w->stale_acts += w->stale[o] && t_new[s] == o;
            }
            continue;
        }
        /* Free: its target in each view may claim it; one claim wins. */
        int claim[2], k = 0;
        if (t_new[s] != NONE && !w->stale[t_new[s]] && below(rng, 2))
            claim[k++] = t_new[s];
        if (any_stale && t_old[s] != NONE && w->alive[t_old[s]] && w->stale[t_old[s]] &&
            below(rng, 2))
            claim[k++] = t_old[s];
        if (k == 0)
            continue;
        int winner = claim[below(rng, (uint32_t)k)];
        w->owner[s] = winner;
        w->stale_acts += w->stale[winner] && t_new[s] != winner;
        if (winner != w->start_owner[s]) {
            w->changed[s] = true;
            w->transfers++;
        }
    }
    if (any_stale && --w->stale_rounds <= 0)
        memset(w->stale, 0, sizeof(w->stale));
    return false;
}

/* Runs rounds until every shard is held by its agreed target; returns the
 * rounds it took. */
static int world_settle(struct world *w, uint64_t *rng)
{
    for (int round = 1; round <= 1000; round++) {
        if (world_round(w, rng))
            return round;
    }
    ck_abort_msg("no convergence within 1000 rounds (n=%u)", w->n);
    return 0;
}

static void world_begin_change(struct world *w)
{
    memcpy(w->start_owner, w->owner, w->n * sizeof(*w->owner));
    memset(w->changed, 0, sizeof(w->changed));
    w->transfers = 0;
}

static uint32_t count_changed(const struct world *w, int except_start_owner)
{
    uint32_t c = 0;
    for (uint32_t s = 0; s < w->n; s++)
        c += w->changed[s] && w->start_owner[s] != except_start_owner;
    return c;
}

/* Applies one membership change to the world and starts counting moves. */
static void world_change(struct world *w, uint64_t *rng, enum event ev, int x,
                         bool stale_views)
{
    world_begin_change(w);
    memcpy(w->old_view, w->alive, sizeof(w->alive));
    w->alive[x] = ev == EV_JOIN;
    if (ev == EV_JOIN)
        mark_joined(x);
    if (ev == EV_LEAVE) {
        for (uint32_t s = 0; s < w->n; s++)
            w->owner[s] = w->owner[s] == x ? NONE : w->owner[s];
    } else if (ev == EV_CRASH) {
        for (uint32_t s = 0; s < w->n; s++)
            if (w->owner[s] == x)
                w->expiry[s] = (int)below(rng, 4);
    }
    memset(w->stale, 0, sizeof(w->stale));
    if (stale_views) {
        /* Some surviving replicas see the change only 1 to 3 rounds late. */
        for (int i = 0; i < POOL; i++)
            w->stale[i] = w->alive[i] && i != x && below(rng, 2);
        w->stale_rounds = 1 + (int)below(rng, 3);
    }
}

static void check_settled(const struct world *w)
{
    check_balanced(w->alive, w->n, w->owner);
    check_fixed_point(w->alive, w->n, w->owner);
    check_agreement(w->alive, w->n, w->owner, w->owner);
}

/*
 * One run: a random group settles, then six changes, each from a settled
 * group, with staggered hand-overs (and, with stale_views, some replicas
 * behind). After each: balanced, a fixed point, replicas agree; a join
 * moved exactly the newcomer's quota, a leave or crash only the leaver's
 * shards, and no shard changed owner twice. Then a burst of overlapping
 * changes, after which only convergence is required.
 */
static void run_world(uint64_t *rng, bool stale_views, uint32_t *view_diffs)
{
    struct world w;
    memset(&w, 0, sizeof(w));
    w.n = 1 + below(rng, MAX_N);
    for (int k = (int)(1 + below(rng, MAX_M)); k > 0; k--) {
        int x = pick(rng, w.alive, false);
        w.alive[x] = true;
        mark_joined(x);
    }
    for (uint32_t s = 0; s < w.n; s++)
        w.owner[s] = NONE;
    world_begin_change(&w);
    world_settle(&w, rng);
    check_settled(&w);

    for (int step = 0; step < 6; step++) {
        int m = count_set(w.alive);
        enum event ev = pick_event(rng, m);
        int x = pick(rng, w.alive, ev != EV_JOIN);
        uint32_t stale_acts = w.stale_acts;

        world_change(&w, rng, ev, x, stale_views);
        world_settle(&w, rng);
        check_settled(&w);
        if (ev == EV_JOIN) {
            uint32_t m1 = (uint32_t)m + 1, moved = count_changed(&w, NONE);
            EXPECT_LE(moved, (w.n + m1 - 1) / m1 + 1); /* the contract */
            EXPECT_EQ(moved, quota_of(w.alive, w.n, x, w.start_owner));
        } else {
            EXPECT_EQ(count_changed(&w, x), 0); /* only the leaver's */
        }
        EXPECT_EQ(w.transfers, count_changed(&w, NONE));
        /* Lagging replicas wait, or do what the new view does anyway (with
         * fewer shards than members, a leaver's shard goes to the same
         * newest non-holder in both views). */
        EXPECT_EQ(w.stale_acts, stale_acts);
    }

    /* Overlapping changes: the next one before the last hand-over ends. */
    for (int k = (int)(2 + below(rng, 3)); k > 0; k--) {
        int m = count_set(w.alive);
        enum event ev = pick_event(rng, m);
        world_change(&w, rng, ev, pick(rng, w.alive, ev != EV_JOIN), stale_views);
        for (int r = (int)below(rng, 3); r > 0; r--)
            world_round(&w, rng);
    }
    world_settle(&w, rng);
    check_settled(&w);
    *view_diffs += w.view_diffs;
}

START_TEST(hand_over_with_agreeing_views)
{
    uint64_t rng = 77;
    uint32_t view_diffs = 0;
    make_names(&rng);
    for (int run = 0; run < 250; run++)
        run_world(&rng, false, &view_diffs);
    ck_assert_uint_eq(view_diffs, 0);
}
END_TEST

START_TEST(hand_over_with_views_that_differ_for_a_while)
{
    uint64_t rng = 4355;
    uint32_t view_diffs = 0;
    make_names(&rng);
    for (int run = 0; run < 250; run++)
        run_world(&rng, true, &view_diffs);
    /* The lagging views did compute other targets (run_world checks that
     * the replicas holding them did nothing meanwhile). */
    ck_assert_uint_gt(view_diffs, 1000);
}
END_TEST

START_TEST(edges_and_bad_input)
{
    const char *one[] = {"a"};
    const char *unsorted[] = {"b", "a"};
    const char *dup[] = {"a", "a"};
    const char *empty[] = {"a", ""};
    const char *owners[] = {"a", "ghost", NULL, ""};
    uint32_t t[4] = {7, 7, 7, 7};

    ck_assert_int_eq(ld_shardassign(4, owners, 2, unsorted, NULL, t), LD_EINVAL);
    ck_assert_int_eq(ld_shardassign(4, owners, 2, dup, NULL, t), LD_EINVAL);
    ck_assert_int_eq(ld_shardassign(4, owners, 2, empty, NULL, t), LD_EINVAL);
    ck_assert_int_eq(ld_shardassign(4, owners, 1, NULL, NULL, t), LD_EINVAL);
    ck_assert_int_eq(ld_shardassign(4, owners, 1, one, NULL, NULL), LD_EINVAL);
    for (int s = 0; s < 4; s++)
        ck_assert_uint_eq(t[s], 7); /* untouched on error */

    ck_assert_int_eq(ld_shardassign(4, owners, 0, NULL, NULL, t), LD_OK);
    for (int s = 0; s < 4; s++)
        ck_assert_uint_eq(t[s], LD_SHARD_NOBODY);
    ck_assert_int_eq(ld_shardassign(4, NULL, 1, one, NULL, t), LD_OK);
    for (int s = 0; s < 4; s++)
        ck_assert_uint_eq(t[s], 0);
    ck_assert_int_eq(ld_shardassign(0, NULL, 1, one, NULL, NULL), LD_OK);
}
END_TEST

START_TEST(the_rule_on_a_small_example)
{
    /* 7 shards, 3 members: quotas a 3, b 2, c 2 (the one ceiling goes to
     * the first name, whatever anyone holds). b and c hold 3 each and keep
     * their two lowest (0, 3 and 1, 4); "ghost" is no member, so 2 is free.
     * The free 2, 5, 6 go to a, the only one below quota. */
    const char *members[] = {"a", "b", "c"};
    const char *owners[] = {"b", "c", "ghost", "b", "c", "b", "c"};
    const uint32_t want[] = {1, 2, 0, 1, 2, 0, 0};
    uint32_t t[7];

    ck_assert_int_eq(ld_shardassign(7, owners, 3, members, NULL, t), LD_OK);
    ck_assert_mem_eq(t, want, sizeof(want));

    /* The same with c the newest and b the oldest: the ceiling goes to c,
     * which keeps 1, 4 and 6; b keeps 0, 3; the free 2 and 5 go to a. */
    const int64_t joined[] = {20, 10, 30};
    const uint32_t want_aged[] = {1, 2, 0, 1, 2, 0, 2};
    ck_assert_int_eq(ld_shardassign(7, owners, 3, members, joined, t), LD_OK);
    ck_assert_mem_eq(t, want_aged, sizeof(want_aged));
}
END_TEST

START_TEST(fewer_shards_than_members_stay_with_their_holders)
{
    /* 2 shards, 4 members: the old holders a and b keep theirs although
     * c and d are newer; when b's shard is free it goes to the newest, d. */
    const char *members[] = {"a", "b", "c", "d"};
    const int64_t joined[] = {1, 2, 3, 4};
    const char *held[] = {"a", "b"};
    const char *freed[] = {"a", NULL};
    const char *gone[] = {"a", "ghost"};
    uint32_t t[2];

    ck_assert_int_eq(ld_shardassign(2, held, 4, members, joined, t), LD_OK);
    ck_assert_uint_eq(t[0], 0);
    ck_assert_uint_eq(t[1], 1);
    ck_assert_int_eq(ld_shardassign(2, freed, 4, members, joined, t), LD_OK);
    ck_assert_uint_eq(t[0], 0);
    ck_assert_uint_eq(t[1], 3);
    ck_assert_int_eq(ld_shardassign(2, gone, 4, members, joined, t), LD_OK);
    ck_assert_uint_eq(t[1], 3); /* a holder that is no member holds nothing */
    ck_assert_int_eq(ld_shardassign(2, NULL, 4, members, joined, t), LD_OK);
    ck_assert_uint_eq(t[0], 3); /* all free: the newest first */
    ck_assert_uint_eq(t[1], 2);
}
END_TEST

/* Moves one shard from its owner to its target for each free shard whose
 * target is someone (a take), and, when give_back, releases every shard
 * held above its owner's quota first; counts a shard whose final owner
 * differs from its owner before as one move. Returns the moves. */
static uint32_t hand_over(uint32_t n, const bool *live, int *owner, bool give_back)
{
    int target[MAX_N], before[MAX_N];
    uint32_t moved = 0;
    memcpy(before, owner, n * sizeof(*owner));
    for (int round = 0; round < 3; round++) {
        assign(names, live, n, owner, target);
        for (uint32_t s = 0; s < n; s++) {
            /* A leaver's release, or a rebalance's give-back. */
            if (owner[s] != NONE &&
                (!live[owner[s]] || (owner[s] != target[s] && give_back)))
                owner[s] = NONE;
        }
        assign(names, live, n, owner, target);
        for (uint32_t s = 0; s < n; s++)
            if (owner[s] == NONE)
                owner[s] = target[s];
    }
    for (uint32_t s = 0; s < n; s++)
        moved += before[s] != NONE && owner[s] != before[s];
    return moved;
}

/*
 * A rolling update as a Deployment with maxSurge 1 and maxUnavailable 0
 * does it, with the rebalance delay of shardgroup.h: each new replica
 * joins (the newest), and the next old one leaves before the delay is
 * over, so only free shards move meanwhile; at the end the group settles.
 * Every old replica goes, so every shard moves at least once; this rule
 * moves each about once: never more than 1.5 N in all (the extras of
 * N % M can move twice), and exactly once with fewer shards than replicas.
 */
START_TEST(rolling_update_moves_each_shard_about_once)
{
    uint64_t rng = 31337;
    make_names(&rng);
    for (int run = 0; run < 400; run++) {
        uint32_t n = 1 + below(&rng, MAX_N), m = 2 + below(&rng, 7);
        bool live[POOL] = {false}, old[POOL] = {false};
        int owner[MAX_N];
        for (uint32_t k = 0; k < m; k++) {
            int x = pick(&rng, live, false);
            live[x] = old[x] = true;
            mark_joined(x);
        }
        for (uint32_t s = 0; s < n; s++)
            owner[s] = NONE;
        hand_over(n, live, owner, true);
        check_balanced(live, n, owner);

        uint32_t moved = 0;
        for (uint32_t k = 0; k < m; k++) {
            bool used[POOL];
            for (int i = 0; i < POOL; i++)
                used[i] = live[i] || old[i];
            int fresh = pick(&rng, used, false), leaver = pick(&rng, old, true);
            live[fresh] = true;
            mark_joined(fresh);
            moved += hand_over(n, live, owner, false);
            live[leaver] = old[leaver] = false;
            moved += hand_over(n, live, owner, false);
        }
        moved += hand_over(n, live, owner, true);
        check_balanced(live, n, owner);
        check_fixed_point(live, n, owner);
        EXPECT_LE(n, moved); /* every old replica went */
        EXPECT_LE(2 * moved, 3 * n);
        if (n < m)
            EXPECT_EQ(moved, n); /* each shard stays until its holder goes */
    }
}
END_TEST

static Suite *shardassign_suite(void)
{
    Suite *s = suite_create("shardassign");
    TCase *tc = tcase_create("assignment");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, the_rule_on_a_small_example);
    tcase_add_test(tc, fewer_shards_than_members_stay_with_their_holders);
    tcase_add_test(tc, rolling_update_moves_each_shard_about_once);
    tcase_add_test(tc, edges_and_bad_input);
    tcase_add_test(tc, sequences_in_lockstep);
    tcase_add_test(tc, hand_over_with_agreeing_views);
    tcase_add_test(tc, hand_over_with_views_that_differ_for_a_while);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(shardassign_suite());
}
