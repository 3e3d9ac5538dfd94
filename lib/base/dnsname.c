/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dnsname: DNS-1123 label and subdomain checks, written as a scan over the
 * bytes rather than a regular expression so that lib/ needs no regex engine.
 */
#include "dnsname.h"

#include <stddef.h>
#include <string.h>

static bool lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* The label shape without its length limit: a subdomain's parts have only
 * the subdomain's total limit. */
static bool label_shape(const char *s, size_t n)
{
    if (n == 0 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i + 1 < n; i++) {
        if (!lower_alnum(s[i]) && s[i] != '-')
            return false;
    }
    return true;
}

bool ld_dns1123_label(const char *s)
{
    if (!s)
        return false;
    size_t n = strnlen(s, LD_DNS1123_LABEL_MAX + 1);
    return n <= LD_DNS1123_LABEL_MAX && label_shape(s, n);
}

bool ld_dns1123_subdomain(const char *s)
{
    if (!s)
        return false;
    size_t n = strnlen(s, LD_DNS1123_SUBDOMAIN_MAX + 1);
    if (n == 0 || n > LD_DNS1123_SUBDOMAIN_MAX)
        return false;
    /* A part ends at each dot and at the end of the string. */
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        if (!label_shape(s + start, i - start))
            return false;
        start = i + 1;
    }
    return true;
}
