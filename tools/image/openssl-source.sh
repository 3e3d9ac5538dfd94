#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prints the OpenSSL source the image build can use (the Dockerfile's OPENSSL_SOURCE):
# "debian" when Debian's mirror serves the pinned source package whole, "upstream"
# otherwise (the upstream tarball alone, which apt still checks against the signed
# index), with a warning: that image lacks the fixes Debian adds on top of the release.
# Usage: tools/image/openssl-source.sh VERSION   (e.g. 3.0.22-1~deb12u2)
set -u
version=${1:?usage: openssl-source.sh VERSION}
dsc="openssl_${version//\~/%7e}.dsc"
for pool in debian-security/pool/updates/main debian/pool/main; do
    if curl -sfI -m 10 "http://deb.debian.org/$pool/o/openssl/$dsc" >/dev/null 2>&1; then
        echo debian
        exit 0
    fi
done
echo "image: Debian's mirror does not serve the openssl $version source package whole;" \
    "building OpenSSL from its upstream tarball, without the fixes Debian adds on top" >&2
echo upstream
