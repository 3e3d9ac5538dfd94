#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make check-install` (run by `make lint`): installs into a temporary root
# (DESTDIR, PREFIX=/usr/local) and checks what a user of the library gets:
#   - the binary, the archive, leaderd.pc, the man page leaderd(8) as
#     committed in docs/leaderd.8, and
#     exactly the headers of include/leaderd/ (none of lib/'s internals);
#   - every installed header includes only installed headers, and compiles
#     on its own as <leaderd/NAME.h>;
#   - the archive defines no global symbol that no installed header
#     declares (the library's internals are local in it);
#   - every examples/*.c compiles with -I$DESTDIR/usr/local/include and
#     nothing of the source tree, takes every <leaderd/...> header from the
#     installed root, and links against the installed archive.
# Prints each failure, then "check-install: ok ..." or exits 1.
#
#   tools/check-install.sh BUILD_DIR      (CC and WARN from the environment)
set -u

b=${1:?usage: $0 BUILD_DIR}
cc=${CC:-cc}
read -r -a warn <<<"${WARN:--Wall -Wextra -Werror}"
# The public headers' own dependencies (lease.h: jansson; kube.h: libcurl)
# and what the archive links against.
deps="libcurl jansson yaml-0.1 libssl libcrypto"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
destdir=$tmp/root
prefix=/usr/local
root=$destdir$prefix
failed=0
fail() {
    echo "check-install: $*" >&2
    failed=1
}

if ! ${MAKE:-make} --no-print-directory install B="$b" DESTDIR="$destdir" PREFIX="$prefix" \
    >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log" >&2
    fail "make install failed"
    exit 1
fi

[ -x "$root/bin/leaderd" ] || fail "missing bin/leaderd"
[ -f "$root/lib/libleaderd.a" ] || fail "missing lib/libleaderd.a"
[ -f "$root/lib/pkgconfig/leaderd.pc" ] || fail "missing lib/pkgconfig/leaderd.pc"
grep -qx 'Cflags: -I${includedir}' "$root/lib/pkgconfig/leaderd.pc" ||
    fail "leaderd.pc: Cflags is not -I\${includedir} (programs include <leaderd/...>)"
if [ ! -f "$root/share/man/man8/leaderd.8" ]; then
    fail "missing share/man/man8/leaderd.8"
elif ! cmp -s docs/leaderd.8 "$root/share/man/man8/leaderd.8"; then
    fail "share/man/man8/leaderd.8 differs from docs/leaderd.8"
fi

# Exactly the public headers, and nothing else anywhere under include/.
(cd include && find leaderd -type f | sort) >"$tmp/want"
(cd "$root/include" && find . -type f | sed 's|^\./||' | sort) >"$tmp/got"
if ! diff -u "$tmp/want" "$tmp/got" >"$tmp/diff"; then
    fail "installed headers differ from include/leaderd/ (- expected, + installed):"
    sed '1,2d' "$tmp/diff" >&2
fi

read -r -a depflags <<<"$(pkg-config --cflags $deps)"
nhdr=0
for hdr in "$root"/include/leaderd/*.h; do
    name=${hdr##*/}
    nhdr=$((nhdr + 1))
    # A quoted include is looked up next to the header first: it must be there.
    while read -r inc; do
        [ -f "$root/include/leaderd/$inc" ] ||
            fail "leaderd/$name includes \"$inc\", which is not installed (an internal header?)"
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$hdr")
    printf '#include <leaderd/%s>\n' "$name" >"$tmp/alone.c"
    "$cc" -std=c11 "${warn[@]}" -fsyntax-only -I"$root/include" "${depflags[@]}" \
        "$tmp/alone.c" >"$tmp/cc.log" 2>&1 ||
        { fail "<leaderd/$name> does not compile on its own:"; cat "$tmp/cc.log" >&2; }
done
[ "$nhdr" -gt 0 ] || fail "no header installed in include/leaderd/"

# The archive's surface is the headers' API: the internals are local.
nm -g --defined-only "$root/lib/libleaderd.a" | awk 'NF == 3 {print $3}' | sort -u |
    while read -r sym; do
        grep -qE "\\b${sym}[[:space:]]*[(;[]" "$root"/include/leaderd/*.h ||
            echo "lib/libleaderd.a defines $sym, which no installed header declares"
    done >"$tmp/surface"
while read -r line; do fail "$line"; done <"$tmp/surface"

read -r -a libs <<<"$(pkg-config --libs $deps) -lpthread"
nex=0
for ex in examples/*.c; do
    [ -e "$ex" ] || continue
    nex=$((nex + 1))
    obj=$tmp/$(basename "$ex" .c).o
    if ! "$cc" -std=c11 "${warn[@]}" -O2 -I"$root/include" "${depflags[@]}" -MD -MF "$obj.d" \
        -c "$ex" -o "$obj" >"$tmp/cc.log" 2>&1; then
        fail "$ex does not compile against the installed headers:"
        cat "$tmp/cc.log" >&2
        continue
    fi
    # Another copy of the headers on the default search path (an earlier
    # `make install` to /usr/local) must not be what made it compile.
    tr ' \\' '\n\n' <"$obj.d" | grep '/leaderd/' | grep -v "^$root/include/leaderd/" |
        while read -r stray; do
            echo "check-install: $ex took $stray from outside the installed root" >&2
            echo stray >>"$tmp/strays"
        done
    [ ! -s "$tmp/strays" ] || failed=1
    "$cc" -o "$obj.bin" "$obj" "$root/lib/libleaderd.a" "${libs[@]}" >"$tmp/cc.log" 2>&1 ||
        { fail "$ex does not link against the installed archive:"; cat "$tmp/cc.log" >&2; }
done

[ "$failed" -eq 0 ] || exit 1
echo "check-install: ok ($nhdr headers in include/leaderd/, $nex examples built from $prefix alone)"
