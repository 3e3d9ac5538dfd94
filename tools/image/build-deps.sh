#!/usr/bin/env bash
# Builds the static OpenSSL, libcurl and libmicrohttpd that the image links, under
# PREFIX (only .a, headers and .pc files), from unpacked Debian sources in SRC.
# The Dockerfile's deps stage runs it, and so does `make static-deps` on a build
# machine, so the figures measured outside the image are of the same binary.
# Usage: tools/image/build-deps.sh SRC PREFIX
#   SRC holds openssl-*/, curl-*/ and libmicrohttpd-*/ (apt-get source, or
#   tools/image/fetch-sources.sh). Each library is skipped when PREFIX has it.
set -eu
src=$(cd "${1:?usage: build-deps.sh SRC PREFIX}" && pwd)
prefix=${2:?usage: build-deps.sh SRC PREFIX}
jobs=${JOBS:-$(nproc)}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)

# Every object gets its own section, so the final link's --gc-sections drops what
# leaderd never reaches; -Os because these pages are paid once per pod.
sections="-ffunction-sections -fdata-sections"
# The size-or-speed choice for curl and microhttpd (OpenSSL is always -Os).
libopt=${LIB_OPT:--Os}

# OpenSSL: TLS 1.2 and 1.3 client with RSA, ECDSA/EC, X25519/Ed25519, AES-GCM and
# ChaCha20-Poly1305 (what Kubernetes API servers speak, and the key types kubeconfig
# client certificates use); no legacy protocols or ciphers, no engines, no modules,
# no automatic loading of a config file by OpenSSL itself (libcurl still asks for the
# default one, /etc/ssl/openssl.cnf, which the image does not have). Security level 2
# by default, as Debian's openssl.cnf sets it.
if [ ! -f "$prefix/openssl/lib/libcrypto.a" ]; then
    (cd "$src"/openssl-*/ &&
        ./Configure --prefix="$prefix/openssl" --libdir=lib --openssldir=/etc/ssl \
            no-shared no-module no-dso no-engine no-legacy no-deprecated no-comp no-tests \
            no-ui-console no-async no-autoload-config no-filenames no-ssl-trace \
            no-ssl3 no-tls1 no-tls1_1 no-dtls no-srp no-psk no-srtp no-sctp no-nextprotoneg \
            no-cms no-ts no-ct no-ocsp no-cmp no-dh no-dsa no-ec2m no-gost no-sm2 no-sm3 no-sm4 \
            no-idea no-md4 no-mdc2 no-rmd160 no-whirlpool no-rc2 no-rc4 no-rc5 no-bf no-cast \
            no-des no-camellia no-aria no-seed no-siphash no-blake2 no-scrypt no-ocb no-siv \
            no-padlockeng no-capieng no-afalgeng no-devcryptoeng \
            -DOPENSSL_TLS_SECURITY_LEVEL=2 -Os $sections >configure.log &&
        make -j"$jobs" build_libs >make.log &&
        make install_dev >/dev/null)
fi
export PKG_CONFIG_PATH="$prefix/openssl/lib/pkgconfig"

# libcurl: HTTP(S) over OpenSSL with zlib, threaded resolver; no other protocol, no
# GSSAPI/LDAP/IDN/PSL/HTTP2/brotli/zstd (their static archives are what breaks linking).
if [ ! -f "$prefix/curl/lib/libcurl.a" ]; then
    (cd "$src"/curl-*/ &&
        CFLAGS="$libopt $sections" \
            ./configure --prefix="$prefix/curl" --disable-shared --enable-static \
            --with-openssl="$prefix/openssl" --with-zlib --enable-threaded-resolver \
            --without-brotli --without-zstd --without-libidn2 --without-libpsl \
            --without-nghttp2 --without-libssh2 --without-librtmp --without-gssapi \
            --without-libgsasl --disable-ldap --disable-ldaps --disable-rtsp --disable-dict \
            --disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smtp \
            --disable-gopher --disable-mqtt --disable-smb --disable-ftp --disable-file \
            --disable-manual --disable-ntlm --disable-alt-svc --disable-hsts \
            --disable-cookies --disable-netrc \
            --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs \
            >configure.log &&
        make -j"$jobs" -C lib >make.log &&
        make -C lib install >/dev/null &&
        make -C include install >/dev/null &&
        make install-pkgconfigDATA >/dev/null)
fi

# libmicrohttpd without HTTPS: leaderd serves plain HTTP on the pod network, and MHD's
# TLS would need GnuTLS with p11-kit, which has no static archive.
if [ ! -f "$prefix/mhd/lib/libmicrohttpd.a" ]; then
    (cd "$src"/libmicrohttpd-*/ &&
        CFLAGS="$libopt $sections" \
            ./configure --prefix="$prefix/mhd" --disable-shared --enable-static \
            --disable-https --disable-doc --disable-examples --disable-curl --disable-nls \
            >configure.log &&
        make -j"$jobs" -C src/microhttpd >make.log &&
        make -C src/microhttpd install >/dev/null &&
        make -C src/include install >/dev/null &&
        make install-pkgconfigDATA >/dev/null)
fi
