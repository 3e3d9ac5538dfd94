#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make lint`: cppcheck and clang-tidy over lib/, cmd/, tests/unit,
# tests/apiserver and tests/fuzz with the checked-in configuration (.clang-tidy,
# tools/cppcheck-suppressions.txt, tools/cppcheck.cfg,
# tools/clang-tidy-exceptions.txt), and shellcheck over the shell scripts
# (.ci/run, tools/). Prints every finding, then
# "lint: N findings (cppcheck N, clang-tidy N, shellcheck N)"; fails on any.
#
#   tools/run-lint.sh deps            install cppcheck/clang-tidy/shellcheck if missing (as root)
#   tools/run-lint.sh -- CFLAGS...    lint, compiling as CFLAGS says
set -u

# Package names are the command names; a command found outside dpkg's
# knowledge counts as installed.
deps() {
    local pkgs=()
    command -v cppcheck >/dev/null || pkgs+=(cppcheck)
    command -v clang-tidy >/dev/null || pkgs+=(clang-tidy)
    command -v shellcheck >/dev/null || pkgs+=(shellcheck)
    [ ${#pkgs[@]} -eq 0 ] || bash "$(dirname "${BASH_SOURCE[0]}")/deps.sh" --as lint "${pkgs[@]}"
}

if [ "${1:-}" = deps ]; then
    deps
    exit
fi
[ "${1:-}" = -- ] || { echo "usage: $0 deps | -- CFLAGS..." >&2; exit 2; }
shift
cflags=("$@")
jobs=$(nproc 2>/dev/null || echo 2)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

mapfile -t files < <(ls lib/*/*.c cmd/*/*.c cmd/leaderd/*/*.c tests/unit/*.c tests/unit/support/*.c \
    tests/apiserver/*.c tests/fuzz/*.c 2>/dev/null)

# The project's include folders, as the compiler has them.
mapfile -t incs < <(printf '%s\n' "${cflags[@]}" | grep '^-I[^/]')

# ---- cppcheck (system headers are not parsed: faster, and no noise from
# them; tools/cppcheck.cfg defines the format macros that need them) ----
cppcheck --enable=warning,style,performance,portability --error-exitcode=1 \
    --inline-suppr --suppressions-list=tools/cppcheck-suppressions.txt \
    --std=c11 --platform=unix64 --library=posix,gnu,libcurl,openssl,tools/cppcheck.cfg \
    -D_GNU_SOURCE -DLEADERD_VERSION='"lint"' "${incs[@]}" -j "$jobs" --quiet \
    --template='{file}:{line}:{column}: {severity}: {message} [cppcheck-{id}]' \
    "${files[@]}" >"$out/cppcheck.txt" 2>&1
sort -u "$out/cppcheck.txt" | grep -E ': (error|warning|style|performance|portability|information): ' \
    >"$out/cppcheck.found"
n_cppcheck=$(wc -l <"$out/cppcheck.found")
if [ "$n_cppcheck" -eq 0 ] && grep -q . "$out/cppcheck.txt"; then
    # cppcheck itself failed (bad option, unreadable file): show why.
    cat "$out/cppcheck.txt"
    n_cppcheck=1
fi

# ---- clang-tidy, one process per file, files in parallel ----
tidy_one() { # FILE -> its diagnostics on stdout
    local f=$1 extra
    extra=$(awk -v f="$f" '$1 == f { printf ",-%s", $2 }' tools/clang-tidy-exceptions.txt)
    clang-tidy --quiet ${extra:+--checks="${extra#,}"} "$f" -- "${cflags[@]}" 2>&1 |
        grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error): |^Error while processing' |
        sed "s|^$PWD/||"
}
export -f tidy_one
export PWD
export LINT_CFLAGS="${cflags[*]}"
# shellcheck disable=SC2016
printf '%s\n' "${files[@]}" |
    xargs -P "$jobs" -I{} bash -c 'cflags=($LINT_CFLAGS); tidy_one "$1"' _ {} \
        >"$out/tidy.txt"
# A header's findings come once per file including it.
sort -u "$out/tidy.txt" >"$out/tidy.found"
n_tidy=$(wc -l <"$out/tidy.found")

# ---- shellcheck: warnings and errors (its notes and style hints are
# taste; a script may quote a glob on purpose) ----
mapfile -t scripts < <(ls .ci/run tools/*.sh tools/image/*.sh 2>/dev/null)
shellcheck --severity=warning --format=gcc "${scripts[@]}" >"$out/shellcheck.found" 2>&1
n_shell=$(wc -l <"$out/shellcheck.found")

cat "$out/cppcheck.found" "$out/tidy.found" "$out/shellcheck.found"
total=$((n_cppcheck + n_tidy + n_shell))
echo "lint: $total findings (cppcheck $n_cppcheck, clang-tidy $n_tidy," \
    "shellcheck $n_shell) in ${#files[@]} C files and ${#scripts[@]} scripts"
[ "$total" -eq 0 ]
