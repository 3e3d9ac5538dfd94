/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run_suite: the one way every unit-test binary runs its Check suite, so
 * each main() is a call and its exit status means the same everywhere.
 */
#ifndef LEADERD_TEST_RUN_SUITE_H
#define LEADERD_TEST_RUN_SUITE_H

#include <check.h>

/* Runs every test of s (CK_NORMAL output, Check's summary line included),
 * then frees s. Returns 0 when no test failed or errored, else 1. */
int ld_test_run(Suite *s);

#endif
