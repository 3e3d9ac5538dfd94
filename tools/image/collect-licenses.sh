#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The licence and copyright texts of everything the static binary is made
# of, for the image (docs/image.md, "Licences"): leaderd's own LICENSE, and
# for each library linked in, its source package's debian/copyright and
# upstream licence file where the image builds it from source, or the
# installed package's copyright file where it links Debian's static archive.
#
#   collect-licenses.sh OUT LIBC SRC_DIR...
set -eu
out=$1
libc=$2
shift 2
mkdir -p "$out"
cp LICENSE "$out/leaderd.LICENSE"
for src in "$@"; do
    [ -d "$src" ] || continue
    for d in "$src"/*/; do
        pkg=$(basename "$d" | sed 's/-[0-9].*$//')
        if [ -f "$d/debian/copyright" ]; then
            cp "$d/debian/copyright" "$out/$pkg.copyright"
        fi
        for f in COPYING LICENSE LICENSE.txt License; do
            if [ -f "$d/$f" ]; then
                cp "$d/$f" "$out/$pkg.$f"
            fi
        done
    done
done
# Linked from Debian's binary packages rather than built here.
if [ "$libc" = musl ]; then
    archives="musl-dev"
else
    archives="libjansson-dev libyaml-dev zlib1g-dev libc6-dev"
fi
for p in $archives; do
    if [ -f "/usr/share/doc/$p/copyright" ]; then
        cp "/usr/share/doc/$p/copyright" "$out/$p.copyright"
    fi
done
n=$(find "$out" -type f | wc -l)
if [ "$n" -lt 5 ]; then
    echo "collect-licenses: only $n files in $out; expected every library's" >&2
    exit 1
fi
