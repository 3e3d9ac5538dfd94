#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The archive `make install` installs: the library's objects linked into one
# relocatable object whose global symbols that no installed header declares
# (the library's internals, shared by its modules and the daemon: ld_log,
# ld_rest_status, ...) are made local. A program built on the installed
# library can then call only the public API, and none of its own names can
# clash with an internal one. The daemon and the tests link the build's own
# archive, internals included.
# Usage: tools/public-archive.sh BUILD_ARCHIVE OUT_ARCHIVE PUBLIC_HEADER...
set -euo pipefail
in=$(realpath "${1:?usage: $0 BUILD_ARCHIVE OUT_ARCHIVE HEADER...}")
out=${2:?usage: $0 BUILD_ARCHIVE OUT_ARCHIVE HEADER...}
shift 2
headers=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && ar x "$in")
ld -r -o "$tmp/libleaderd.o" "$tmp"/*.o
# A symbol is public when an installed header declares it: its name followed
# by "(" (a function) or ";" / "[" (an object), outside comments enough for
# these headers, which name internals in prose only without either.
nm -g --defined-only "$tmp/libleaderd.o" | awk 'NF == 3 {print $3}' | sort -u |
    while read -r sym; do
        grep -qE "\\b${sym}[[:space:]]*[(;[]" "${headers[@]}" || echo "$sym"
    done >"$tmp/internal.txt"
objcopy --localize-symbols="$tmp/internal.txt" "$tmp/libleaderd.o"
rm -f "$out"
ar rcs "$out" "$tmp/libleaderd.o"
echo "public-archive: $(wc -l <"$tmp/internal.txt") internal symbols made local" >&2
