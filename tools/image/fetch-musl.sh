#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Unpacks Debian's musl-dev for another architecture (arm64) into DEST, as the
# sysroot that tools/image/build-deps.sh cross-compiles against: its headers,
# libc.a, start files and musl-gcc.specs, under DEST/usr.
# apt fetches it with the machine's own sources and keyring (so the package is
# checked against Debian's signed index), but with its own lists and cache under
# DEST/apt: the machine's dpkg architectures stay as they are, and nothing is
# installed. The version is the machine's own musl-dev, so both architectures'
# binaries link the same musl; MUSL_VERSION overrides it.
# Usage: tools/image/fetch-musl.sh ARCH DEST   (e.g. arm64 build/musl-arm64)
set -euo pipefail
arch=${1:?usage: fetch-musl.sh ARCH DEST}
dest=${2:?usage: fetch-musl.sh ARCH DEST}
version=${MUSL_VERSION:-$(dpkg-query -W -f '${Version}' musl-dev 2>/dev/null || true)}
[ -n "$version" ] || {
    echo "fetch-musl: no musl-dev installed to take the version from (set MUSL_VERSION)" >&2
    exit 1
}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
stamp="$dest/.musl-dev-$arch-$version"
[ -f "$stamp" ] && exit 0

apt_dir="$dest/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/deb"
# Only ARCH's package lists, in this directory; no dpkg status (nothing is
# installed); root downloads into a directory the _apt user cannot write.
apt_opts=(-q -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
    -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update >"$apt_dir/update.log"
(cd "$apt_dir/deb" && rm -f ./*.deb &&
    apt-get "${apt_opts[@]}" download "musl-dev:$arch=$version" >"$apt_dir/download.log")
rm -rf "${dest:?}/usr"
dpkg-deb -x "$apt_dir"/deb/musl-dev_*_"$arch".deb "$dest"
rm -rf "$apt_dir/lists" "$apt_dir/cache" "$dest"/.musl-dev-*
touch "$stamp"
echo "fetch-musl: musl-dev $version ($arch) in $dest/usr"
