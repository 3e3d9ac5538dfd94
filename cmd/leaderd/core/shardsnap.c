/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardsnap: immutable, reference-counted shard tables (see shardsnap.h).
 * One allocation holds the header, the entries, the member pointers and
 * every string, so a snapshot costs one malloc and one free; an extended
 * one is a header alone, holding a reference to the table it extends.
 */
#include "shardsnap.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lead.h"

struct ld_shardsnap *ld_shardsnap_new(bool observed, int64_t claims_until_ms,
                                      const struct ld_shard_entry *shards,
                                      uint32_t n_shards, const char *const *members,
                                      uint32_t n_members)
{
    size_t strings = 0;
    for (uint32_t i = 0; i < n_shards; i++)
        strings += strlen(shards[i].leader ? shards[i].leader : "") + 1;
    for (uint32_t i = 0; i < n_members; i++)
        strings += strlen(members[i]) + 1;
    size_t head = sizeof(struct ld_shardsnap);
    size_t entries = (size_t)n_shards * sizeof(struct ld_shard_entry);
    size_t ptrs = (size_t)n_members * sizeof(char *);
    char *mem = malloc(head + entries + ptrs + strings);
    if (!mem)
        return NULL;
    struct ld_shardsnap *s = (struct ld_shardsnap *)(void *)mem;
    struct ld_shard_entry *e = (struct ld_shard_entry *)(void *)(mem + head);
    const char **m = (const char **)(void *)(mem + head + entries);
    char *pool = mem + head + entries + ptrs;
    for (uint32_t i = 0; i < n_shards; i++) {
        const char *leader = shards[i].leader ? shards[i].leader : "";
        size_t len = strlen(leader) + 1;
        e[i] = shards[i];
        e[i].leader = memcpy(pool, leader, len);
        pool += len;
    }
    for (uint32_t i = 0; i < n_members; i++) {
        size_t len = strlen(members[i]) + 1;
        m[i] = memcpy(pool, members[i], len);
        pool += len;
    }
    atomic_init(&s->refs, 1);
    s->observed = observed;
    s->claims_until_ms = claims_until_ms;
    s->term_until_ms = claims_until_ms;
    s->n_shards = n_shards;
    s->shards = e;
    s->n_members = n_members;
    s->members = m;
    s->body = NULL;
    return s;
}

struct ld_shardsnap *ld_shardsnap_extend(struct ld_shardsnap *t, int64_t claims_until_ms)
{
    struct ld_shardsnap *s = malloc(sizeof(*s));
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    s->observed = t->observed;
    s->claims_until_ms = claims_until_ms;
    s->term_until_ms = claims_until_ms;
    s->n_shards = t->n_shards;
    s->shards = t->shards;
    s->n_members = t->n_members;
    s->members = t->members;
    s->body = ld_shardsnap_ref(t->body ? t->body : t);
    return s;
}

struct ld_shardsnap *ld_shardsnap_ref(struct ld_shardsnap *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
    return s;
}

void ld_shardsnap_unref(struct ld_shardsnap *s)
{
    /* The last reference to an extended table drops one to its body (a
     * body holds none). */
    while (s && atomic_fetch_sub(&s->refs, 1) == 1) {
        struct ld_shardsnap *body = s->body;
        free(s);
        s = body;
    }
}

bool ld_shardsnap_leads(const struct ld_shardsnap *t, uint32_t i, int64_t now_ms)
{
    return t && i < t->n_shards &&
           ld_leads_at(t->shards[i].leading, t->claims_until_ms, now_ms);
}

int64_t ld_shardsnap_lead_until(const struct ld_shardsnap *t, uint32_t i)
{
    return t && i < t->n_shards && t->shards[i].leading ? t->claims_until_ms : INT64_MIN;
}

int64_t ld_shardsnap_term_until(const struct ld_shardsnap *t, uint32_t i)
{
    if (!t || i >= t->n_shards || !(t->shards[i].leading || t->shards[i].in_term))
        return INT64_MIN;
    return t->term_until_ms;
}

bool ld_shardsnap_in_term(const struct ld_shardsnap *t, uint32_t i, int64_t now_ms)
{
    return now_ms < ld_shardsnap_term_until(t, i);
}

bool ld_shardsnap_same_view(const struct ld_shardsnap *a, const struct ld_shardsnap *b,
                            int64_t now_ms)
{
    return ld_shardsnap_same_view_at(a, now_ms, b, now_ms);
}

bool ld_shardsnap_same_view_at(const struct ld_shardsnap *a, int64_t a_ms,
                               const struct ld_shardsnap *b, int64_t b_ms)
{
    if (!a || !b)
        return a == b;
    if (a->observed != b->observed || a->n_shards != b->n_shards ||
        a->n_members != b->n_members)
        return false;
    for (uint32_t i = 0; i < a->n_members; i++) {
        if (strcmp(a->members[i], b->members[i]) != 0)
            return false;
    }
    for (uint32_t i = 0; i < a->n_shards; i++) {
        const struct ld_shard_entry *x = &a->shards[i], *y = &b->shards[i];
        if (x->term != y->term || strcmp(x->leader, y->leader) != 0 ||
            ld_shardsnap_leads(a, i, a_ms) != ld_shardsnap_leads(b, i, b_ms))
            return false;
    }
    return true;
}
