#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Unpacks the Debian sources the image is built from (the Dockerfile's pinned
# CURL_VERSION, NGHTTP2_VERSION, MHD_VERSION and OPENSSL_VERSION) into DEST, for building the
# same static libraries outside an image build (`make static-deps`) on a
# machine without deb-src lines. Files come from deb.debian.org's pools; each
# .dsc's checksums are checked by dpkg-source (the signature is not: the
# image build, which apt-get source checks against the signed index, is the
# release path). OpenSSL falls back to its upstream tarball as the image
# build does (tools/image/openssl-source.sh).
# With LIBC=musl it also unpacks zlib, jansson and libyaml (ZLIB_VERSION,
# JANSSON_VERSION, LIBYAML_VERSION): Debian's archives of those are glibc's, so
# a musl link rebuilds them too (tools/image/build-deps.sh).
# Usage: [LIBC=musl] tools/image/fetch-sources.sh DEST
set -eu
dest=${1:?usage: fetch-sources.sh DEST}
here=$(cd "$(dirname "$0")/../.." && pwd)
pin() { sed -n "s/^ARG $1=//p" "$here/Dockerfile"; }
mirror=http://deb.debian.org
mkdir -p "$dest"
cd "$dest"

# fetch POOLDIR FILE: from the security pool, else the main one.
fetch() {
    [ -f "$2" ] && return 0
    local enc=${2//+/%2b}
    enc=${enc//\~/%7e}
    for pool in debian-security/pool/updates/main debian/pool/main; do
        if curl -sf -m 300 -o "$2.part" "$mirror/$pool/$1/$enc"; then
            mv "$2.part" "$2"
            return 0
        fi
    done
    rm -f "$2.part"
    return 1
}

# unpack POOLDIR PACKAGE VERSION
unpack() {
    local dsc="$2_$3.dsc"
    fetch "$1" "$dsc" || return 1
    for f in $(awk '/^Files:/{on=1; next} on && /^ /{print $3; next} {on=0}' "$dsc"); do
        fetch "$1" "$f"
    done
    dpkg-source --no-check -x "$dsc" >/dev/null
}

# have NAME: NAME's source is unpacked here already.
have() { ls -d "$1"-*/ >/dev/null 2>&1; }

have curl || unpack c/curl curl "$(pin CURL_VERSION)"
have nghttp2 || unpack n/nghttp2 nghttp2 "$(pin NGHTTP2_VERSION)"
have libmicrohttpd || unpack libm/libmicrohttpd libmicrohttpd "$(pin MHD_VERSION)"
if ! have openssl; then
    v=$(pin OPENSSL_VERSION)
    if ! unpack o/openssl openssl "$v"; then
        echo "fetch-sources: no openssl $v source package; using the upstream tarball" >&2
        up=${v%-*}
        fetch o/openssl "openssl_$up.orig.tar.gz"
        tar -xzf "openssl_$up.orig.tar.gz"
    fi
fi

if [ "${LIBC:-glibc}" = musl ]; then
    # File names leave out the epoch.
    have zlib || unpack z/zlib zlib "$(pin ZLIB_VERSION | sed 's/^[0-9]*://')"
    have jansson || unpack j/jansson jansson "$(pin JANSSON_VERSION)"
    have libyaml || unpack liby/libyaml libyaml "$(pin LIBYAML_VERSION)"
fi
