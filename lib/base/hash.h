/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hash: FNV-1a, 64-bit. The hash KEP-5866 shard ranges are defined over, and
 * the digest that tells two abridged Lease strings apart. Not a MAC: anyone
 * can make collisions on purpose, so nothing that guards safety relies on it
 * alone. Pure function.
 */
#ifndef LEADERD_HASH_H
#define LEADERD_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64 of the len bytes at data (NULL only with len 0). */
uint64_t ld_fnv1a64(const void *data, size_t len);

#endif
