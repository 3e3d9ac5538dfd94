/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run_suite: srunner boilerplate shared by the unit-test mains.
 */
#include "run_suite.h"

int ld_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
