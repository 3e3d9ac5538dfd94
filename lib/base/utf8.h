/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8: recognises one well-formed UTF-8 sequence (RFC 3629) at a time, so
 * that callers walking text byte by byte can check it (the identity) or
 * repair it (log lines) the same way. Pure function: no allocation, no state.
 */
#ifndef LEADERD_UTF8_H
#define LEADERD_UTF8_H

#include <stddef.h>

/* Length (1..4) of the well-formed UTF-8 sequence starting at s, reading at
 * most n bytes of s. Every ASCII byte, NUL and controls included, is a
 * sequence of 1. Returns 0 when n is 0 or the bytes there are not one: a
 * stray continuation byte, a lead byte that never starts one (C0, C1,
 * F5..FF), a sequence cut short by n or by a byte that is not 10xxxxxx, an
 * overlong form, a surrogate (U+D800..U+DFFF) or a code point past U+10FFFF.
 * Thread-safe. */
size_t ld_utf8_seq(const char *s, size_t n);

#endif
