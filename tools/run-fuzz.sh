#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the libFuzzer harnesses built by mk/fuzz.mk.
#
#   tools/run-fuzz.sh deps
#       makes sure clang and its libFuzzer runtime are installed (through
#       tools/deps.sh: as root it installs them, otherwise it prints the line
#       to run and fails).
#   tools/run-fuzz.sh run SECONDS FUZZ_BUILD_DIR TARGET...
#       per target: replays every file of tests/fuzz/regressions/TARGET and
#       tests/fuzz/corpus/TARGET, then (SECONDS > 0) fuzzes for SECONDS with
#       those as seeds; new inputs go to FUZZ_BUILD_DIR/work/TARGET, crashes to
#       FUZZ_BUILD_DIR/artifacts/TARGET. Prints executions per target and
#       last "fuzz: N passed, N failed, 0 skipped" (N = targets).
#   tools/run-fuzz.sh deep RUNS FUZZ_BUILD_DIR TARGET...
#       per target: fuzzes for RUNS executions from tests/fuzz/corpus/TARGET
#       and the regressions, growing a scratch corpus in
#       FUZZ_BUILD_DIR/deep/TARGET, then minimises tests/fuzz/corpus/TARGET
#       (-merge=1): its named seeds stay, and of the rest and the new inputs
#       only those that add coverage, named by their SHA-1. Prints executions, exec/s, the corpus before
#       and after (files, bytes) and coverage (libFuzzer's cov and ft, of the
#       fuzzing run and of the merged corpus replayed alone). When
#       FUZZ_DEEP_SECONDS is set above 0, a target also stops after that many
#       seconds (a loaded machine); the executions printed are the real count.
set -u

fuzz_runtime_ok() {
    local dir rc
    command -v clang >/dev/null || return 1
    dir=$(mktemp -d) || return 1
    printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
        >"$dir/probe.c"
    clang -fsanitize=fuzzer,address,undefined "$dir/probe.c" -o "$dir/probe" \
        >/dev/null 2>&1
    rc=$?
    rm -rf "$dir"
    return $rc
}

# Debian ships libFuzzer and the sanitizer runtimes in libclang-rt-N-dev, N
# being clang's major version, so clang has to be there before it is named.
deps() {
    local deps_sh
    deps_sh="$(dirname "${BASH_SOURCE[0]}")/deps.sh"
    fuzz_runtime_ok && return 0
    command -v clang >/dev/null || bash "$deps_sh" --as fuzz clang || return 1
    bash "$deps_sh" --as fuzz "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev" ||
        return 1
    fuzz_runtime_ok && return 0
    echo "fuzz: clang -fsanitize=fuzzer still does not link" >&2
    return 1
}

# Files (not directories) of the given directories, for replay.
inputs_of() {
    local d
    for d in "$@"; do
        [ -d "$d" ] && find "$d" -maxdepth 1 -type f ! -name '.*' ! -name '*.md' -print
    done | sort
}

run_target() {
    local secs=$1 fb=$2 t=$3
    local bin="$fb/fuzz_$t" seeds="tests/fuzz/corpus/$t" regs="tests/fuzz/regressions/$t"
    local work="$fb/work/$t" art="$fb/artifacts/$t" log="$fb/logs/$t.log"
    local files=() dict=() dirs=() execs rate rc
    mkdir -p "$work" "$art" "$fb/logs"
    mapfile -t files < <(inputs_of "$regs" "$seeds")

    # 1. Replay: libFuzzer runs each file given as an argument once.
    if [ ${#files[@]} -gt 0 ]; then
        if ! "$bin" -timeout=10 -rss_limit_mb=2048 "${files[@]}" >"$log.replay" 2>&1; then
            tail -n 40 "$log.replay"
            echo "  $t: FAILED replaying corpus/regressions (log: $log.replay)"
            return 1
        fi
    fi
    if [ "$secs" -le 0 ]; then
        echo "  $t: replayed ${#files[@]} inputs"
        return 0
    fi

    # 2. Fuzz. New inputs are written to the first directory only, so the
    # checked-in seeds stay untouched.
    [ -f "tests/fuzz/$t.dict" ] && dict=("-dict=tests/fuzz/$t.dict")
    for d in "$seeds" "$regs"; do [ -d "$d" ] && dirs+=("$d"); done
    "$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$art/" "${dict[@]}" "$work" "${dirs[@]}" >"$log" 2>&1
    rc=$?
    execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
    if [ "$rc" -ne 0 ] || [ -z "$execs" ]; then
        tail -n 60 "$log"
        echo "  $t: FAILED (exit $rc; log: $log)"
        find "$art" -maxdepth 1 -type f -printf '%T@ %p\n' 2>/dev/null | sort -rn |
            head -n 3 | cut -d' ' -f2- | sed 's|^|    artifact: |'
        echo "    keep it as a regression: cp ARTIFACT $regs/ (then fix the bug)"
        return 1
    fi
    rate=$((execs / secs))
    printf '  %-11s %12s executions in %s s (%s/s), %s inputs replayed\n' \
        "$t:" "$execs" "$secs" "$rate" "${#files[@]}"
    return 0
}

# "FILES files, BYTES B" of the inputs in a directory.
corpus_size() {
    find "$1" -maxdepth 1 -type f ! -name '.*' -printf '%s\n' |
        awk '{ n++; s += $1 } END { printf "%d files, %d B", n, s }'
}

# "cov N ft M" from the last status line of a libFuzzer log.
coverage_of() {
    grep -E '^#[0-9]+.* cov: ' "$1" | tail -n 1 |
        sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+).*/cov \1 ft \2/p'
}

deep_target() {
    local runs=$1 fb=$2 t=$3
    local bin="$fb/fuzz_$t" seeds="tests/fuzz/corpus/$t" regs="tests/fuzz/regressions/$t"
    local scratch="$fb/deep/$t" min="$fb/deep/$t.min" art="$fb/artifacts/$t"
    local log="$fb/logs/$t.deep.log"
    local dict=() dirs=() before execs rate rc
    rm -rf "$scratch"
    mkdir -p "$scratch" "$seeds" "$art" "$fb/logs"
    before=$(corpus_size "$seeds")
    [ -f "tests/fuzz/$t.dict" ] && dict=("-dict=tests/fuzz/$t.dict")
    for d in "$seeds" "$regs"; do [ -d "$d" ] && dirs+=("$d"); done
    [ "${FUZZ_DEEP_SECONDS:-0}" -gt 0 ] && dict+=("-max_total_time=$FUZZ_DEEP_SECONDS")
    # tests/fuzz/<target>.max_len bounds a target's inputs where their size
    # costs executions without adding features (see docs/benchmarks.md, "Fuzzing").
    [ -f "tests/fuzz/$t.max_len" ] && dict+=("-max_len=$(cat "tests/fuzz/$t.max_len")")
    "$bin" -runs="$runs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$art/" "${dict[@]}" "$scratch" "${dirs[@]}" >"$log" 2>&1
    rc=$?
    execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -n 1)
    rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -n 1)
    if [ "$rc" -ne 0 ] || [ -z "$execs" ]; then
        tail -n 60 "$log"
        echo "  $t: FAILED (exit $rc; log: $log); corpus left as it was"
        find "$art" -maxdepth 1 -type f -printf '    artifact: %p\n' 2>/dev/null
        return 1
    fi
    # The named seeds stay; of every other input (earlier merges' too, named
    # by their SHA-1) only what adds coverage to them is kept, so a second
    # deep run re-minimises instead of piling up.
    rm -rf "$min"
    mkdir -p "$min"
    find "$seeds" -maxdepth 1 -type f ! -name '.*' -regextype posix-extended \
        ! -regex '.*/[0-9a-f]{40}' -exec cp {} "$min/" \;
    if ! "$bin" -merge=1 -timeout=10 -rss_limit_mb=2048 "$min" "$seeds" "$scratch" \
        >"$log.merge" 2>&1; then
        tail -n 20 "$log.merge"
        echo "  $t: FAILED merging (log: $log.merge)"
        return 1
    fi
    find "$seeds" -maxdepth 1 -type f -regextype posix-extended \
        -regex '.*/[0-9a-f]{40}' -delete
    find "$min" -maxdepth 1 -type f -regextype posix-extended \
        -regex '.*/[0-9a-f]{40}' -exec cp {} "$seeds/" \;
    "$bin" -runs=0 "$seeds" >"$log.replay" 2>&1
    printf '  %-11s %s executions (%s/s), %s; corpus %s -> %s; merged corpus alone: %s\n' \
        "$t:" "$execs" "$rate" "$(coverage_of "$log")" "$before" "$(corpus_size "$seeds")" \
        "$(coverage_of "$log.replay")"
    return 0
}

case "${1:-}" in
deps)
    deps
    ;;
run)
    [ $# -ge 3 ] || { echo "usage: $0 run SECONDS FUZZ_BUILD_DIR TARGET..." >&2; exit 2; }
    secs=$2; fb=$3; shift 3
    passed=0; failed=0
    echo "== fuzzing ($# targets, ${secs} s each)"
    for t in "$@"; do
        if run_target "$secs" "$fb" "$t"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
        fi
    done
    echo "fuzz: $passed passed, $failed failed, 0 skipped"
    [ "$failed" -eq 0 ]
    ;;
deep)
    [ $# -ge 3 ] || { echo "usage: $0 deep RUNS FUZZ_BUILD_DIR TARGET..." >&2; exit 2; }
    runs=$2; fb=$3; shift 3
    passed=0; failed=0
    echo "== deep fuzzing ($# targets, ${runs} executions each)"
    for t in "$@"; do
        if deep_target "$runs" "$fb" "$t"; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
        fi
    done
    echo "fuzz-deep: $passed passed, $failed failed, 0 skipped"
    [ "$failed" -eq 0 ]
    ;;
*)
    echo "usage: $0 deps | run SECONDS FUZZ_BUILD_DIR TARGET... | deep RUNS FUZZ_BUILD_DIR TARGET..." >&2
    exit 2
    ;;
esac
