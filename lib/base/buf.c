/* SPDX-License-Identifier: Apache-2.0 */
/*
 * buf: growth by doubling up to the cap, the shared empty string before the
 * first byte, and the reset that returns a burst's memory.
 */
#include "buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first block; small, since most buffers hold a line or a Status. */
#define MIN_CAP 256

/* What data points at while nothing is allocated; never written. */
static char empty[1];

void ld_buf_init(struct ld_buf *b, size_t max)
{
    b->data = empty;
    b->len = 0;
    b->cap = 0;
    b->max = max < SIZE_MAX ? max : SIZE_MAX - 1; /* len + n + 1 cannot wrap */
    b->err = LD_OK;
}

void ld_buf_free(struct ld_buf *b)
{
    if (!b)
        return;
    if (b->cap > 0)
        free(b->data);
    ld_buf_init(b, b->max);
}

/* Room for need bytes (the NUL included), need <= max + 1. */
static enum ld_err grow(struct ld_buf *b, size_t need)
{
    /* Init keeps max below SIZE_MAX; the test shows it to static analysis. */
    size_t limit = b->max < SIZE_MAX ? b->max + 1 : SIZE_MAX;
    size_t cap = b->cap ? b->cap : MIN_CAP;

    while (cap < need)
        cap = cap <= limit / 2 ? cap * 2 : limit;
    if (cap > limit)
        cap = limit;
    char *nd = realloc(b->cap ? b->data : NULL, cap);
    if (!nd)
        return LD_ENOMEM;
    if (!b->cap)
        nd[0] = '\0';
    b->data = nd;
    b->cap = cap;
    return LD_OK;
}

/* Remembers the first failure; returns it. */
static enum ld_err fail(struct ld_buf *b, enum ld_err rc)
{
    b->err = rc;
    return rc;
}

enum ld_err ld_buf_append(struct ld_buf *b, const void *data, size_t n)
{
    if (b->err)
        return b->err;
    if (n == 0)
        return LD_OK;
    if (n > b->max - b->len)
        return fail(b, LD_ETOOBIG);
    if (b->len + n + 1 > b->cap && grow(b, b->len + n + 1) != LD_OK)
        return fail(b, LD_ENOMEM);
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return LD_OK;
}

enum ld_err ld_buf_printf(struct ld_buf *b, const char *fmt, ...)
{
    va_list ap;

    if (b->err)
        return b->err;
    /* The first try writes in place; only text that did not fit is
     * formatted again, once the block holds it. */
    for (int attempt = 0; attempt < 2; attempt++) {
        va_start(ap, fmt);
        int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return fail(b, LD_EINVAL);
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return LD_OK;
        }
        /* A cut try wrote past len: the content ends at len again. */
        if (b->cap)
            b->data[b->len] = '\0';
        if ((size_t)n > b->max - b->len)
            return fail(b, LD_ETOOBIG);
        if (grow(b, b->len + (size_t)n + 1) != LD_OK)
            return fail(b, LD_ENOMEM);
    }
    return fail(b, LD_EINVAL); /* the same arguments formatted longer */
}

/* Growth by doubling keeps a buffer at least half full, so only emptying
 * it can leave a large block mostly unused: that is when it goes back. */
void ld_buf_reset(struct ld_buf *b)
{
    b->len = 0;
    b->err = LD_OK;
    if (b->cap > LD_BUF_KEEP) {
        free(b->data);
        b->data = empty;
        b->cap = 0;
    } else if (b->cap) {
        b->data[0] = '\0';
    }
}

char *ld_buf_take(struct ld_buf *b)
{
    char *s = b->cap ? b->data : strdup("");

    if (!s)
        return NULL;
    ld_buf_init(b, b->max);
    return s;
}
