/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_text: an owned string field (lib/base/text.h) is copied when its
 * value changes and kept, the same allocation, when it does not.
 */
#include <check.h>
#include <stdlib.h>

#include "../../lib/base/text.h"
#include "support/run_suite.h"

START_TEST(a_field_is_copied_only_when_it_changes)
{
    char *field = NULL;
    char value[] = "holder-a";
    ck_assert(ld_text_set(&field, value));
    ck_assert_str_eq(field, "holder-a");
    ck_assert_ptr_ne(field, value); /* a copy, not the caller's text */
    char *first = field;
    ck_assert(ld_text_set(&field, "holder-a"));
    ck_assert_ptr_eq(field, first); /* unchanged: no new copy */
    ck_assert(ld_text_set(&field, "holder-b"));
    ck_assert_str_eq(field, "holder-b");
    ck_assert(ld_text_set(&field, NULL));
    ck_assert_str_eq(field, ""); /* NULL counts as "" */
    free(field);
}
END_TEST

static Suite *text_suite(void)
{
    Suite *s = suite_create("text");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_field_is_copied_only_when_it_changes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(text_suite());
}
