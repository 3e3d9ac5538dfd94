#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs Check unit-test binaries and adds up their results.
# Usage: tools/run-unit.sh DIR NAME... ; prints
# "unit(DIR): N passed, N failed, N skipped" (Check has no skipped tests, so
# the last figure is always 0; it is there for the common summary form).
set -u
dir=$1; shift
passed=0; failed=0
for name in "$@"; do
    out=$("$dir/$name" 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out"
        echo "$name: crashed or printed no Check summary (exit $rc)"
        failed=$((failed + 1)); continue
    fi
    checks=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
    fails=$(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$line")
    errs=$(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$line")
    bad=$((fails + errs))
    if [ "$bad" -gt 0 ] || [ "$rc" -ne 0 ]; then
        printf '%s\n' "$out"
        [ "$bad" -eq 0 ] && bad=1
    fi
    echo "  $name: $line"
    passed=$((passed + checks - bad)); failed=$((failed + bad))
done
echo "unit($dir): $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
