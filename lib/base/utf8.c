/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8: one well-formed UTF-8 sequence, decoded far enough to reject the
 * forms RFC 3629 forbids.
 */
#include "utf8.h"

size_t ld_utf8_seq(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len;
    unsigned long cp;
    if (n == 0)
        return 0;
    if (u[0] < 0x80)
        return 1;
    if (u[0] >= 0xc2 && u[0] <= 0xdf) {
        len = 2;
        cp = u[0] & 0x1f;
    } else if (u[0] >= 0xe0 && u[0] <= 0xef) {
        len = 3;
        cp = u[0] & 0x0f;
    } else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
        len = 4;
        cp = u[0] & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (u[i] & 0x3f);
    }
    /* C0 and C1 are excluded above; the longer forms need the decoded value. */
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}
