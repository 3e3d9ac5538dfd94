#!/usr/bin/env bash
# `make test`: unit tests, the same under ASan+UBSan, then the integration
# tests of the real binaries. The last line is the overall
# "N passed, N failed".
set -u
build=$1; san=$2; units=$3
total_pass=0; total_fail=0
tally() { # reads "...: N passed, N failed" from the last matching line of $1
    local line
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
    if [ -z "$line" ]; then total_fail=$((total_fail + 1)); return; fi
    total_pass=$((total_pass + $(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")))
    total_fail=$((total_fail + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")))
}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "== unit tests"
# shellcheck disable=SC2086
bash tools/run-unit.sh "$build/tests" $units | tee "$log/unit"
tally "$log/unit"

echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
# shellcheck disable=SC2086
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    bash tools/run-unit.sh "$san/tests" $units | tee "$log/san"
tally "$log/san"

echo "== integration tests (real binaries, HTTPS, several replicas)"
LEADERD_BUILD=$(cd "$build" && pwd) python3 tests/integration/run.py 2>&1 | tee "$log/it"
tally "$log/it"

echo "== deploy/ manifests (kustomize, yamllint, structure)"
make --no-print-directory deploy-test 2>&1 | tee "$log/deploy"
tally "$log/deploy"

echo "== chaos, short (each fault scenario once, 3 replicas)"
make --no-print-directory chaos-short 2>&1 | tee "$log/chaos"
tally "$log/chaos"

echo "== fuzz smoke (libFuzzer: replay corpora and regressions, then a short run each)"
make --no-print-directory fuzz-smoke 2>&1 | grep -v '^clang ' | tee "$log/fuzz"
tally "$log/fuzz"

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
