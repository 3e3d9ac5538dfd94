/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shardlayout: a group's constant names and ranges (see shardlayout.h).
 * One allocation holds the header, the per-shard entries and every string,
 * so a layout costs one malloc and one free.
 */
#include "shardlayout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

/* Decimal digits of the largest shard number, with its NUL. */
#define NUMBER_SIZE 11

/* Shard s's ID: its name, or its number written into buf. */
static const char *shard_id(const char *const *names, uint32_t s, char buf[NUMBER_SIZE])
{
    if (names)
        return names[s];
    snprintf(buf, NUMBER_SIZE, "%u", (unsigned)s);
    return buf;
}

/* Copies len bytes of s and a NUL to *pool, which moves past them. */
static char *put(char **pool, const char *s, size_t len)
{
    char *at = *pool;
    memcpy(at, s, len);
    at[len] = '\0';
    *pool += len + 1;
    return at;
}

struct ld_shardlayout *ld_shardlayout_new(const char *name, const char *const *names,
                                          uint32_t n_shards)
{
    char buf[NUMBER_SIZE];
    size_t name_len = strlen(name);
    /* Each shard: its ID, and its Lease "NAME-ID", each with a NUL. */
    size_t strings = name_len + 1;
    for (uint32_t s = 0; s < n_shards; s++)
        strings += 2 * strlen(shard_id(names, s, buf)) + name_len + 3;
    size_t head = sizeof(struct ld_shardlayout);
    size_t entries = (size_t)n_shards * sizeof(struct ld_shard_names);
    char *mem = malloc(head + entries + strings);
    if (!mem)
        return NULL;
    struct ld_shardlayout *l = (struct ld_shardlayout *)(void *)mem;
    struct ld_shard_names *e = (struct ld_shard_names *)(void *)(mem + head);
    char *pool = mem + head + entries;
    memset(e, 0, entries);
    atomic_init(&l->refs, 1);
    l->name = put(&pool, name, name_len);
    l->numbered = names == NULL;
    l->n_shards = n_shards;
    l->shards = e;
    for (uint32_t s = 0; s < n_shards; s++) {
        const char *id = shard_id(names, s, buf);
        size_t id_len = strlen(id);
        e[s].id = put(&pool, id, id_len);
        char *lease = put(&pool, name, name_len);
        lease[name_len] = '-';
        put(&pool, id, id_len);
        e[s].lease = lease;
        if (l->numbered)
            ld_shardrange_of(s, n_shards, &e[s].range);
    }
    return l;
}

struct ld_shardlayout *ld_shardlayout_ref(struct ld_shardlayout *l)
{
    if (l)
        atomic_fetch_add(&l->refs, 1);
    return l;
}

void ld_shardlayout_unref(struct ld_shardlayout *l)
{
    if (l && atomic_fetch_sub(&l->refs, 1) == 1)
        free(l);
}

bool ld_shardlayout_find(const struct ld_shardlayout *l, const char *id, uint32_t *s)
{
    for (uint32_t i = 0; id && i < l->n_shards; i++) {
        if (strcmp(l->shards[i].id, id) == 0) {
            *s = i;
            return true;
        }
    }
    return false;
}

bool ld_shardlayout_shard_of_key(const struct ld_shardlayout *l, const void *key,
                                 size_t len, uint32_t *s, uint64_t *hash)
{
    if (!l->numbered)
        return false;
    uint64_t h = ld_fnv1a64(key, len);
    if (s)
        *s = ld_shardrange_find(h, l->n_shards);
    if (hash)
        *hash = h;
    return true;
}
