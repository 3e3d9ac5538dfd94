/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base64: the alphabet of RFC 4648 section 4 and its padding rule.
 */
#include "base64.h"

static int value_of(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long ld_base64_decoded_len(const char *s, size_t len, size_t *bad)
{
    size_t pad = 0;
    if (len >= 1 && s[len - 1] == '=')
        pad = len >= 2 && s[len - 2] == '=' ? 2 : 1;
    for (size_t i = 0; i + pad < len; i++) {
        if (value_of((unsigned char)s[i]) < 0) {
            *bad = i;
            return -1;
        }
    }
    if (len % 4 != 0) {
        *bad = len - len % 4;
        return -1;
    }
    return (long)(len / 4 * 3 - pad);
}
