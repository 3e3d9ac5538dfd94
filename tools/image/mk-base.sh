#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds a local stand-in for docker.io/library/debian:bookworm-slim with debootstrap
# (no registry is needed) and writes it as a rootfs tarball. The layout follows the
# official slim image: deb822 sources, no docs/man/locales, apt's docker-clean config.
# Usage: tools/image/mk-base.sh OUT.tar [SUITE] [MIRROR]
set -euo pipefail
out=$1
suite=${2:-bookworm}
mirror=${3:-http://deb.debian.org/debian}

root=$(mktemp -d /var/tmp/leaderd-base.XXXXXX)
cleanup() { rm -rf --one-file-system "$root"; }
trap cleanup EXIT
# mktemp makes the directory 0700, which would become the image's "/" and make every
# path unreadable for a non-root USER.
chmod 0755 "$root"

debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
    tail -n 30 "$root.log" >&2
    rm -f "$root.log"
    exit 1
}
rm -f "$root.log"

rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC

cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG

# Without this the .debs a Dockerfile installs stay in its layers.
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
echo 'Acquire::GzipIndexes "true";' >"$root/etc/apt/apt.conf.d/docker-gzip-indexes"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"

find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/groff/* \
    "$root"/usr/share/lintian/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb \
    "$root"/var/cache/apt/*.bin "$root"/var/log/*.log "$root"/var/log/apt/* \
    "$root"/tmp/* "$root"/var/tmp/*
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias \
    -exec rm -rf {} + 2>/dev/null || true
# The container engine provides these.
: >"$root/etc/hostname"
: >"$root/etc/resolv.conf"

tar --numeric-owner --xattrs -C "$root" -cf "$out.tmp" .
mv "$out.tmp" "$out"
