#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make test`: unit tests, the same under ASan+UBSan, then the integration
# tests of the real binaries, the manifests, the monitoring rules and
# dashboard, the short chaos suite and the fuzz smoke. Every suite ends with
# "NAME: N passed, N failed, N skipped";
# the last line here is their sum, "N passed, N failed, N skipped" (CI
# parses that form). A suite that printed no such line, or that exited
# non-zero while its line counts no failure, adds one failure.
set -u
build=$1; san=$2; units=$3
total_pass=0; total_fail=0; total_skip=0
tally() { # LOG NAME STATUS: adds up the last "...: N passed, N failed, N skipped" of LOG
    local line re='([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped'
    line=$(grep -E "$re" "$1" | tail -n 1)
    if [[ ! $line =~ $re ]]; then
        echo "== $2: no \"N passed, N failed, N skipped\" line, counted as a failure"
        total_fail=$((total_fail + 1))
        return
    fi
    total_pass=$((total_pass + BASH_REMATCH[1]))
    total_fail=$((total_fail + BASH_REMATCH[2]))
    if [ "$3" -ne 0 ] && [ "${BASH_REMATCH[2]}" -eq 0 ]; then
        echo "== $2: exited $3 with no failure counted, counted as a failure"
        total_fail=$((total_fail + 1))
    fi
    total_skip=$((total_skip + BASH_REMATCH[3]))
}
# How long each suite took, for whoever reads a CI log against its time limit.
suite_start=$SECONDS
took() { # NAME: prints the time since the last call (or the start)
    echo "== $1 took $((SECONDS - suite_start)) s"
    suite_start=$SECONDS
}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "== unit tests"
# shellcheck disable=SC2086
bash tools/run-unit.sh "$build/tests" $units | tee "$log/unit"
st=${PIPESTATUS[0]}
tally "$log/unit" unit "$st"
took unit

echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
# shellcheck disable=SC2086
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    bash tools/run-unit.sh "$san/tests" $units | tee "$log/san"
st=${PIPESTATUS[0]}
tally "$log/san" unit-san "$st"
took unit-san

# Debian's prometheus (promtool, and the server test_monitoring.py starts):
# installed as root, else the checks that need it are skipped with the line.
command -v promtool >/dev/null ||
    bash tools/deps.sh --as monitoring --no-install-recommends prometheus || true

echo "== integration tests (real binaries, HTTPS, several replicas)"
LEADERD_BUILD=$(cd "$build" && pwd) python3 tests/integration/run.py 2>&1 | tee "$log/it"
st=${PIPESTATUS[0]}
tally "$log/it" integration "$st"
took integration

echo "== deploy/ manifests (kustomize, yamllint, structure)"
make --no-print-directory deploy-test 2>&1 | tee "$log/deploy"
st=${PIPESTATUS[0]}
tally "$log/deploy" deploy "$st"
took deploy

echo "== deploy/monitoring (promtool check and test rules, PrometheusRule in sync, dashboard)"
make --no-print-directory monitoring-test 2>&1 | tee "$log/monitoring"
st=${PIPESTATUS[0]}
tally "$log/monitoring" monitoring "$st"
took monitoring

echo "== chaos, short (each fault scenario once, 3 replicas)"
make --no-print-directory chaos-short 2>&1 | tee "$log/chaos"
st=${PIPESTATUS[0]}
tally "$log/chaos" chaos "$st"
took chaos

echo "== fuzz smoke (libFuzzer: replay corpora and regressions, then a short run each)"
make --no-print-directory fuzz-smoke 2>&1 | grep -v '^clang ' | tee "$log/fuzz"
st=${PIPESTATUS[0]}
tally "$log/fuzz" fuzz "$st"
took fuzz

echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
