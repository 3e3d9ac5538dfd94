/* SPDX-License-Identifier: Apache-2.0 */
/*
 * buf: the growable byte buffer of libleaderd and its daemons, for anything
 * collected in pieces whose total length is not known up front (response
 * bodies, watch lines, rendered metrics, watch batches). Every buffer has a
 * cap, given at init, past which it refuses to grow; its content is always
 * NUL-terminated; and it gives memory back after a burst: emptied with
 * ld_buf_reset, a buffer that grew past LD_BUF_KEEP frees its storage, so
 * one huge body or line does not stay resident for the life of its owner.
 *
 * A failed append (over the cap, out of memory) leaves the content as it
 * was and is remembered in err: later appends do nothing and return it
 * until the next reset, so a run of appends needs one check at its end.
 *
 * Ownership: the buffer owns data; ld_buf_take hands it over. A struct
 * ld_buf belongs to one thread at a time.
 */
#ifndef LEADERD_BUF_H
#define LEADERD_BUF_H

#include <stddef.h>

#include "err.h"

/* Capacity a reset keeps for the next use; a buffer that grew past it
 * frees its storage when emptied. */
#define LD_BUF_KEEP (64 * 1024)

struct ld_buf {
    char *data;      /* the content and its NUL; never NULL after init */
    size_t len;      /* content bytes, the NUL not counted */
    size_t cap;      /* bytes allocated; 0 while data is the shared "" */
    size_t max;      /* most content bytes the buffer accepts */
    enum ld_err err; /* the first failed append since init or reset */
};

/* Makes b empty, holding at most max bytes. Allocates nothing: storage
 * comes with the first byte. */
void ld_buf_init(struct ld_buf *b, size_t max);

/* Frees b's storage; b is then empty as after init with the same max.
 * NULL-safe, and safe on a zeroed struct that never saw init. */
void ld_buf_free(struct ld_buf *b);

/* Appends n bytes of data (which may hold NULs). LD_OK; LD_ETOOBIG when
 * len + n would pass max; LD_ENOMEM. On failure nothing is appended. */
enum ld_err ld_buf_append(struct ld_buf *b, const void *data, size_t n);

/* Appends printf-formatted text, with the errors of ld_buf_append (and
 * LD_EINVAL for a format that failed). */
enum ld_err ld_buf_printf(struct ld_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Empties b and clears err. Storage of at most LD_BUF_KEEP bytes is kept
 * for reuse; a larger one is freed. */
void ld_buf_reset(struct ld_buf *b);

/* Hands the content over as a new NUL-terminated string (free with
 * free()) and leaves b empty with err cleared; NULL when out of memory
 * (only possible while b allocated nothing, and b is then unchanged). */
char *ld_buf_take(struct ld_buf *b);

#endif
