/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hash: FNV-1a 64 as specified by its authors (offset basis and prime from
 * draft-eastlake-fnv): xor the byte in, then multiply.
 */
#include "hash.h"

#define FNV64_OFFSET_BASIS UINT64_C(0xcbf29ce484222325)
#define FNV64_PRIME UINT64_C(0x100000001b3)

uint64_t ld_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = FNV64_OFFSET_BASIS;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV64_PRIME;
    }
    return h;
}
