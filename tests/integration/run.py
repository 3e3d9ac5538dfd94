#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs every tests/integration/test_*.py with unittest and prints one
summary line, "integration: N passed, N failed, N skipped", after the
reason of every skip. A failing setUpClass or tearDownClass counts as one
failure. Exit status 0 only when something ran and nothing failed.
LEADERD_IT_PATTERN picks the modules (default test_*.py)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
# The test modules import leaderd_testing (tests/support) and each other.
SUPPORT = os.path.join(HERE, "..", "support")


class Result(unittest.TextTestResult):
    """Counts passes itself: a class-level skip or error is not in testsRun."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1


def main() -> int:
    sys.path.insert(0, HERE)
    sys.path.insert(0, SUPPORT)
    pattern = os.environ.get("LEADERD_IT_PATTERN", "test_*.py")
    suite = unittest.defaultTestLoader.discover(HERE, pattern=pattern, top_level_dir=HERE)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout,
                                     resultclass=Result).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    for test, why in result.skipped:
        print(f"skipped: {test.id()}: {why}")
    print(f"integration: {result.passed} passed, {failed} failed, {len(result.skipped)} skipped")
    return 0 if failed == 0 and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
