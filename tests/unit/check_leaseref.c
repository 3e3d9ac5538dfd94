/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_leaseref: "NAMESPACE/NAME" is written whole or reported as cut.
 */
#include <check.h>
#include <string.h>

#include "leaseref.h"
#include "support/run_suite.h"

START_TEST(formats_namespace_slash_name)
{
    char buf[32];
    ck_assert_int_eq(ld_lease_ref(buf, sizeof(buf), "default", "web"), LD_OK);
    ck_assert_str_eq(buf, "default/web");
    /* Exactly full: the terminator's byte is the last one. */
    char exact[sizeof("ns/name")];
    ck_assert_int_eq(ld_lease_ref(exact, sizeof(exact), "ns", "name"), LD_OK);
    ck_assert_str_eq(exact, "ns/name");
}
END_TEST

START_TEST(a_reference_that_does_not_fit_is_too_big_and_terminated)
{
    char buf[8];
    memset(buf, 'x', sizeof(buf));
    ck_assert_int_eq(ld_lease_ref(buf, sizeof(buf), "default", "web"), LD_ETOOBIG);
    ck_assert_uint_eq(strlen(buf), sizeof(buf) - 1);
    ck_assert_str_eq(buf, "default");
}
END_TEST

static Suite *leaseref_suite(void)
{
    Suite *s = suite_create("leaseref");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, formats_namespace_slash_name);
    tcase_add_test(tc, a_reference_that_does_not_fit_is_too_big_and_terminated);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ld_test_run(leaseref_suite());
}
