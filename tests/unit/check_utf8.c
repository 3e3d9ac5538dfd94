/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/utf8: the edges of every sequence length, the forms
 * RFC 3629 forbids (overlongs, surrogates, past U+10FFFF, C0/C1/F5..FF),
 * sequences cut short, stray continuation bytes, and every code point
 * encoded by a small encoder here, in its own length and in longer ones.
 */
#include <check.h>
#include <string.h>

#include "utf8.h"
#include "support/run_suite.h"

/* ld_utf8_seq over the whole literal (its length, not up to a NUL). */
#define SEQ(lit) ld_utf8_seq(lit, sizeof(lit) - 1)

/* cp written in exactly len bytes (1..4), overlong when len is more than it
 * needs; no range checks, so surrogates and overlongs can be made. */
static size_t encode(unsigned long cp, size_t len, char out[4])
{
    static const unsigned char lead[] = {0x00, 0x00, 0xc0, 0xe0, 0xf0};
    unsigned char *u = (unsigned char *)out;
    if (len == 1) {
        u[0] = (unsigned char)cp;
        return 1;
    }
    for (size_t i = len - 1; i > 0; i--) {
        u[i] = (unsigned char)(0x80 | (cp & 0x3f));
        cp >>= 6;
    }
    u[0] = (unsigned char)(lead[len] | cp);
    return len;
}

static size_t shortest(unsigned long cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

START_TEST(ascii_is_one_byte)
{
    for (int c = 0; c < 0x80; c++) {
        char b[2] = {(char)c, (char)0x80};
        ck_assert_uint_eq(ld_utf8_seq(b, 1), 1);
        /* What follows is not looked at. */
        ck_assert_uint_eq(ld_utf8_seq(b, 2), 1);
    }
    ck_assert_uint_eq(ld_utf8_seq("", 0), 0);
}
END_TEST

START_TEST(class_edges)
{
    ck_assert_uint_eq(SEQ("\x7f"), 1);             /* U+007F */
    ck_assert_uint_eq(SEQ("\xc2\x80"), 2);         /* U+0080 */
    ck_assert_uint_eq(SEQ("\xdf\xbf"), 2);         /* U+07FF */
    ck_assert_uint_eq(SEQ("\xe0\xa0\x80"), 3);     /* U+0800 */
    ck_assert_uint_eq(SEQ("\xed\x9f\xbf"), 3);     /* U+D7FF */
    ck_assert_uint_eq(SEQ("\xee\x80\x80"), 3);     /* U+E000 */
    ck_assert_uint_eq(SEQ("\xef\xbf\xbd"), 3);     /* U+FFFD */
    ck_assert_uint_eq(SEQ("\xef\xbf\xbf"), 3);     /* U+FFFF */
    ck_assert_uint_eq(SEQ("\xf0\x90\x80\x80"), 4); /* U+10000 */
    ck_assert_uint_eq(SEQ("\xf3\xbf\xbf\xbf"), 4); /* U+FFFFF */
    ck_assert_uint_eq(SEQ("\xf4\x8f\xbf\xbf"), 4); /* U+10FFFF */
    /* Only the first sequence counts. */
    ck_assert_uint_eq(SEQ("\xc3\xa9\xff"), 2);
    ck_assert_uint_eq(SEQ("\xe2\x82\xac\xe2\x82\xac"), 3);
}
END_TEST

START_TEST(overlongs)
{
    ck_assert_uint_eq(SEQ("\xc0\x80"), 0);         /* U+0000 in 2 */
    ck_assert_uint_eq(SEQ("\xc0\xaf"), 0);         /* '/' in 2 */
    ck_assert_uint_eq(SEQ("\xc1\xbf"), 0);         /* U+007F in 2 */
    ck_assert_uint_eq(SEQ("\xe0\x80\x80"), 0);     /* U+0000 in 3 */
    ck_assert_uint_eq(SEQ("\xe0\x9f\xbf"), 0);     /* U+07FF in 3 */
    ck_assert_uint_eq(SEQ("\xf0\x80\x80\x80"), 0); /* U+0000 in 4 */
    ck_assert_uint_eq(SEQ("\xf0\x8f\xbf\xbf"), 0); /* U+FFFF in 4 */
}
END_TEST

START_TEST(surrogates_and_past_max)
{
    ck_assert_uint_eq(SEQ("\xed\xa0\x80"), 0); /* U+D800 */
    ck_assert_uint_eq(SEQ("\xed\xad\xbf"), 0); /* U+DB7F */
    ck_assert_uint_eq(SEQ("\xed\xb0\x80"), 0); /* U+DC00 */
    ck_assert_uint_eq(SEQ("\xed\xbf\xbf"), 0); /* U+DFFF */
    /* A CESU-8 pair is two surrogates, not U+10000. */
    ck_assert_uint_eq(SEQ("\xed\xa0\x80\xed\xb0\x80"), 0);
    ck_assert_uint_eq(SEQ("\xf4\x90\x80\x80"), 0); /* U+110000 */
    ck_assert_uint_eq(SEQ("\xf4\xbf\xbf\xbf"), 0); /* U+13FFFF */
    ck_assert_uint_eq(SEQ("\xf5\x80\x80\x80"), 0);
    ck_assert_uint_eq(SEQ("\xf7\xbf\xbf\xbf"), 0); /* U+1FFFFF */
}
END_TEST

START_TEST(bytes_that_never_lead)
{
    /* Continuation bytes alone, C0/C1 and F5..FF, whatever follows. */
    for (int c = 0x80; c < 0x100; c++) {
        if (c >= 0xc2 && c <= 0xf4)
            continue;
        char b[4] = {(char)c, (char)0x80, (char)0x80, (char)0x80};
        for (size_t n = 1; n <= sizeof(b); n++)
            ck_assert_msg(ld_utf8_seq(b, n) == 0, "byte %02x, n %zu", (unsigned)c, n);
    }
    /* A stray continuation after a complete sequence. */
    const char *s = "\xc3\xa9\xa9";
    ck_assert_uint_eq(ld_utf8_seq(s, 3), 2);
    ck_assert_uint_eq(ld_utf8_seq(s + 2, 1), 0);
}
END_TEST

START_TEST(truncated)
{
    static const char *const whole[] = {"\xc2\x80",         "\xdf\xbf",
                                        "\xe0\xa0\x80",     "\xef\xbf\xbf",
                                        "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"};
    for (size_t k = 0; k < sizeof(whole) / sizeof(whole[0]); k++) {
        const char *s = whole[k];
        size_t len = strlen(s);
        ck_assert_uint_eq(ld_utf8_seq(s, len), len);
        for (size_t n = 0; n < len; n++)
            ck_assert_msg(ld_utf8_seq(s, n) == 0, "sequence %zu cut to %zu bytes", k, n);
        /* Cut by a byte that is not a continuation: ASCII, a lead byte,
         * or the terminating NUL. */
        for (size_t at = 1; at < len; at++) {
            char b[4];
            memcpy(b, s, len);
            b[at] = 'A';
            ck_assert_msg(ld_utf8_seq(b, len) == 0, "sequence %zu, 'A' at %zu", k, at);
            b[at] = (char)0xc3;
            ck_assert_msg(ld_utf8_seq(b, len) == 0, "sequence %zu, C3 at %zu", k, at);
            b[at] = '\0';
            ck_assert_msg(ld_utf8_seq(b, len) == 0, "sequence %zu, NUL at %zu", k, at);
        }
    }
}
END_TEST

START_TEST(every_code_point)
{
    char b[4];
    for (unsigned long cp = 0; cp <= 0x10ffff; cp++) {
        size_t need = shortest(cp);
        size_t want = (cp >= 0xd800 && cp <= 0xdfff) ? 0 : need;
        size_t len = encode(cp, need, b);
        if (ld_utf8_seq(b, len) != want)
            ck_abort_msg("U+%04lX: got %zu, want %zu", cp, ld_utf8_seq(b, len), want);
        /* Every longer form of it is overlong. */
        for (size_t longer = need + 1; longer <= 4; longer++) {
            len = encode(cp, longer, b);
            if (ld_utf8_seq(b, len) != 0)
                ck_abort_msg("U+%04lX in %zu bytes accepted", cp, longer);
        }
    }
}
END_TEST

START_TEST(past_max_code_point)
{
    char b[4];
    /* Four-byte forms above U+10FFFF: F4 90.. up to F7 BF BF BF. */
    for (unsigned long cp = 0x110000; cp <= 0x1fffff; cp += 0x3f)
        ck_assert_msg(ld_utf8_seq(b, encode(cp, 4, b)) == 0, "U+%lX accepted", cp);
}
END_TEST

static Suite *utf8_suite(void)
{
    Suite *s = suite_create("utf8");
    TCase *tc = tcase_create("seq");
    tcase_add_test(tc, ascii_is_one_byte);
    tcase_add_test(tc, class_edges);
    tcase_add_test(tc, overlongs);
    tcase_add_test(tc, surrogates_and_past_max);
    tcase_add_test(tc, bytes_that_never_lead);
    tcase_add_test(tc, truncated);
    tcase_add_test(tc, every_code_point);
    tcase_add_test(tc, past_max_code_point);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(utf8_suite());
}
