#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make test-under-load`: `make test` while two CPU burners compete for the
# cores, as on a busy CI runner, so a bound that only holds on an idle
# machine shows up here and not in someone else's acceptance run.
#
#   TEST_UNDER_LOAD_RUNS=N   runs `make test` N times (default 1), each with
#                            fresh burners; stops at the first failure and
#                            names the run.
#   TEST_UNDER_LOAD_BURNERS  how many burners (default 2)
#
# The burners are started here and killed by PID on every way out (normal
# end, failure, Ctrl-C, SIGTERM). Exits with the failing run's status, else 0.
set -u

runs=${TEST_UNDER_LOAD_RUNS:-1}
burners=${TEST_UNDER_LOAD_BURNERS:-2}
make=${MAKE:-make}
case "$runs" in '' | *[!0-9]*) echo "TEST_UNDER_LOAD_RUNS must be a number" >&2; exit 2 ;; esac
case "$burners" in '' | *[!0-9]*) echo "TEST_UNDER_LOAD_BURNERS must be a number" >&2; exit 2 ;; esac

pids=()
stop_burners() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    pids=()
}
trap stop_burners EXIT
# A signal ends the script (through the EXIT trap) with the usual status.
trap 'exit 130' INT
trap 'exit 143' TERM

start_burners() {
    local i
    for ((i = 0; i < burners; i++)); do
        sh -c 'while :; do :; done' &
        pids+=("$!")
    done
    echo "test-under-load: burners running, pids ${pids[*]}"
}

for ((run = 1; run <= runs; run++)); do
    echo "test-under-load: run $run of $runs, $burners CPU burners, $(nproc) cores"
    start_burners
    "$make" --no-print-directory test
    rc=$?
    stop_burners
    if [ "$rc" -ne 0 ]; then
        echo "test-under-load: run $run of $runs FAILED (make test exited $rc)"
        exit "$rc"
    fi
    echo "test-under-load: run $run of $runs passed"
done
echo "test-under-load: $runs of $runs runs passed"
