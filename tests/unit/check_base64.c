/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/base64: decoded lengths of every padding form, each
 * kind of invalid input with the offset Go's decoder names, and every
 * byte value against the RFC 4648 alphabet.
 */
#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "base64.h"
#include "support/run_suite.h"

/* ld_base64_decoded_len over the whole literal; *bad set to a marker first
 * so a check can tell it was left alone. */
static long len_of(const char *s, size_t *bad)
{
    *bad = 999;
    return ld_base64_decoded_len(s, strlen(s), bad);
}

START_TEST(valid_lengths)
{
    size_t bad;
    ck_assert_int_eq(len_of("", &bad), 0);
    ck_assert_int_eq(len_of("YQ==", &bad), 1);
    ck_assert_int_eq(len_of("YWI=", &bad), 2);
    ck_assert_int_eq(len_of("YWJj", &bad), 3);
    ck_assert_int_eq(len_of("YWJjZA==", &bad), 4);
    ck_assert_int_eq(len_of("+/+/", &bad), 3);
    ck_assert_uint_eq(bad, 999);
}
END_TEST

START_TEST(invalid_bytes_are_located)
{
    size_t bad;
    ck_assert_int_eq(len_of("YW*j", &bad), -1);
    ck_assert_uint_eq(bad, 2);
    ck_assert_int_eq(len_of("YWJj\nZA==", &bad), -1); /* no line breaks here */
    ck_assert_uint_eq(bad, 4);
    ck_assert_int_eq(len_of("Y=Jj", &bad), -1); /* '=' before the end */
    ck_assert_uint_eq(bad, 1);
    ck_assert_int_eq(len_of("Y===", &bad), -1); /* three of padding */
    ck_assert_uint_eq(bad, 1);
    ck_assert_int_eq(len_of("YWJj-_==", &bad), -1); /* the URL alphabet */
    ck_assert_uint_eq(bad, 4);
}
END_TEST

START_TEST(incomplete_quantum)
{
    size_t bad;
    ck_assert_int_eq(len_of("YWJ", &bad), -1);
    ck_assert_uint_eq(bad, 0);
    ck_assert_int_eq(len_of("YWJjZA", &bad), -1); /* padding left out */
    ck_assert_uint_eq(bad, 4);
    ck_assert_int_eq(len_of("=", &bad), -1);
    ck_assert_uint_eq(bad, 0);
}
END_TEST

START_TEST(every_byte_against_the_alphabet)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int c = 0; c < 256; c++) {
        char quantum[4] = {(char)c, 'A', 'A', 'A'};
        size_t bad = 999;
        long n = ld_base64_decoded_len(quantum, sizeof quantum, &bad);
        bool in_alphabet = c != 0 && strchr(alphabet, c) != NULL;
        ck_assert_msg(n == (in_alphabet ? 3 : -1), "byte %d: %ld", c, n);
        if (!in_alphabet)
            ck_assert_uint_eq(bad, 0);
    }
}
END_TEST

static Suite *base64_suite(void)
{
    Suite *s = suite_create("base64");
    TCase *tc = tcase_create("decoded_len");
    tcase_add_test(tc, valid_lengths);
    tcase_add_test(tc, invalid_bytes_are_located);
    tcase_add_test(tc, incomplete_quantum);
    tcase_add_test(tc, every_byte_against_the_alphabet);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(base64_suite());
}
