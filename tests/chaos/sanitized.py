#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the integration tests (--integration) and the short chaos suite
(--chaos) against ASan+UBSan builds of leaderd and leaderd-apiserver
($LEADERD_BUILD, normally build/san from `make san-daemon`).

Every sanitizer report is fatal (halt_on_error, abort_on_error, leaks
included) and is also written to a log file of its own; any such file fails
the run even when the test that started the process did not look at its exit
status. The valgrind test is left out: valgrind cannot run an ASan binary (it
runs in the plain `make test`). The last line is
`sanitizers: N passed, N failed`.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
INTEGRATION = os.path.join(REPO, "tests", "integration")
sys.path.insert(0, os.path.join(REPO, "tests", "support"))  # leaderd_testing


def sanitizer_env(logdir):
    env = dict(os.environ)
    common = f"halt_on_error=1:abort_on_error=1:log_path={logdir}/"
    env["ASAN_OPTIONS"] = (common + "asan:detect_leaks=1:detect_stack_use_after_return=1:"
                           "strict_string_checks=1:check_initialization_order=1")
    env["UBSAN_OPTIONS"] = common + "ubsan:print_stacktrace=1"
    env["LSAN_OPTIONS"] = common + "lsan"
    # Startup and exit are slower; fault timings are not changed.
    env.setdefault("CHAOS_SLOW", "3")
    return env


def without_valgrind(suite):
    out = unittest.TestSuite()
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            out.addTest(without_valgrind(t))
        elif "UnderValgrind" not in t.id():
            out.addTest(t)
    return out


def run_integration():
    """In-process, so the filter can drop the valgrind test; the env is
    already set for the binaries the tests spawn."""
    sys.path.insert(0, INTEGRATION)
    suite = unittest.defaultTestLoader.discover(INTEGRATION, pattern="test_*.py",
                                                top_level_dir=INTEGRATION)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(
        without_valgrind(suite))
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print(f"integration-san: {passed} passed, {failed} failed, {skipped} skipped",
          flush=True)
    return passed, failed


def run_chaos(env):
    p = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--short"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(p.stdout)
    m = re.search(r"chaos: (\d+) passed, (\d+) failed(?:, \d+ skipped)?\s*$", p.stdout)
    if not m:
        return 0, 1
    passed, failed = int(m.group(1)), int(m.group(2))
    if p.returncode != 0 and failed == 0:
        failed = 1
    return passed, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--integration", action="store_true")
    ap.add_argument("--chaos", action="store_true")
    args = ap.parse_args()
    build = os.environ.get("LEADERD_BUILD", "")
    for b in ("leaderd", "leaderd-apiserver"):
        if not os.access(os.path.join(build, b), os.X_OK):
            print(f"sanitizers: {build}/{b} is missing (make san-daemon)")
            print("sanitizers: 0 passed, 1 failed")
            return 1
    logdir = tempfile.mkdtemp(prefix="leaderd-san-")
    env = sanitizer_env(logdir)
    os.environ.update(env)
    passed = failed = 0
    if args.integration:
        p, f = run_integration()
        passed, failed = passed + p, failed + f
    if args.chaos:
        p, f = run_chaos(env)
        passed, failed = passed + p, failed + f
    reports = sorted(glob.glob(os.path.join(logdir, "*")))
    for path in reports:
        with open(path, errors="replace") as fh:
            print(f"==== sanitizer report {os.path.basename(path)}:\n{fh.read()[-6000:]}")
    if reports:
        failed += len(reports)
        print(f"sanitizers: {len(reports)} report(s) kept in {logdir}")
    else:
        os.rmdir(logdir)
    print(f"sanitizers: {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
