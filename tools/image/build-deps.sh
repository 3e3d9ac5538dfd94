#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the static OpenSSL, nghttp2, libcurl and libmicrohttpd that the image
# links, under PREFIX (only .a, headers and .pc files), from unpacked Debian
# sources in SRC.
# The Dockerfile's deps stage runs it, and so does `make static-deps` on a build
# machine, so the figures measured outside the image are of the same binary.
# With LIBC=musl every library is built against musl (Debian's musl-dev, through
# PREFIX/musl/gcc.specs: musl-gcc's own specs plus the kernel's headers and the
# start file of a static PIE), zlib, jansson and libyaml included, whose Debian
# archives are glibc's; `make static LIBC=musl` links leaderd with that PREFIX.
# With ARCH=arm64 (musl only) the same libraries are cross-compiled for arm64 by
# Debian's aarch64-linux-gnu-gcc, against arm64's musl-dev unpacked under
# PREFIX/musl/sysroot (tools/image/fetch-musl.sh); nothing built here is run.
# Usage: [LIBC=musl] [ARCH=arm64] tools/image/build-deps.sh SRC PREFIX
#   SRC holds openssl-*/, nghttp2-*/, curl-*/ and libmicrohttpd-*/ (apt-get
#   source, or tools/image/fetch-sources.sh), and for musl zlib-*/, jansson-*/, libyaml-*/
#   (`LIBC=musl fetch-sources.sh`). Each library is skipped when PREFIX has it.
#   Libraries build in their source trees: each LIBC and ARCH needs its own SRC.
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

# musl: the same gcc with musl's headers, start files and libc. musl's headers
# leave out the kernel's (linux/, asm/), which OpenSSL and microhttpd include;
# they come after musl's so they never shadow a libc header. The stock specs
# know no static PIE: they start every program with Scrt1.o, which does not
# relocate the program itself (rcrt1.o does), and name the dynamic loader.
libc=${LIBC:-glibc}
arch=${ARCH:-amd64}
zlib_opt=
# Cross builds: the GNU toolchain's prefix, autoconf's --host, CMake's target,
# OpenSSL's Configure target, and where the target's musl and kernel headers are.
cross=
host_opt=()
cmake_cross=()
openssl_target=()
case "$arch" in
amd64)
    musl_triple=x86_64-linux-musl
    musl_root=
    kernel_inc=/usr/include
    kernel_asm="/usr/include/$(gcc -print-multiarch)/asm"
    ;;
arm64)
    [ "$libc" = musl ] || { echo "build-deps: ARCH=arm64 is built against musl only (LIBC=musl)" >&2; exit 1; }
    cross=aarch64-linux-gnu-
    musl_triple=aarch64-linux-musl
    musl_root="$prefix/musl/sysroot"
    # linux-libc-dev-arm64-cross: arm64's asm/ differs from amd64's.
    kernel_inc=/usr/aarch64-linux-gnu/include
    kernel_asm=$kernel_inc/asm
    host_opt=(--host="$musl_triple")
    cmake_cross=(-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64)
    openssl_target=(linux-aarch64)
    command -v "${cross}gcc" >/dev/null || {
        echo "build-deps: ARCH=arm64 needs gcc-aarch64-linux-gnu and linux-libc-dev-arm64-cross" >&2
        exit 1
    }
    # The build machine's ar and ranlib do not know arm64 objects (their symbol index).
    export AR="${cross}ar" RANLIB="${cross}ranlib"
    ;;
*)
    echo "build-deps: ARCH must be amd64 or arm64, not $arch" >&2
    exit 1
    ;;
esac
if [ "$libc" = musl ]; then
    spec_in=$musl_root/usr/lib/$musl_triple/musl-gcc.specs
    [ -f "$spec_in" ] || {
        if [ -n "$cross" ]; then
            echo "build-deps: no $arch musl-dev under $musl_root (tools/image/fetch-musl.sh $arch $musl_root)" >&2
        else
            echo "build-deps: LIBC=musl needs musl-tools and musl-dev" >&2
        fi
        exit 1
    }
    mkdir -p "$prefix/musl/kinc"
    ln -sfn "$kernel_inc/linux" "$prefix/musl/kinc/linux"
    ln -sfn "$kernel_inc/asm-generic" "$prefix/musl/kinc/asm-generic"
    ln -sfn "$kernel_asm" "$prefix/musl/kinc/asm"
    # A cross musl's specs name its files where the package installs them
    # (/usr/...): they are under the sysroot here.
    sed -e "s|/usr/include/$musl_triple|$musl_root/usr/include/$musl_triple|g" \
        -e "s|/usr/lib/$musl_triple|$musl_root/usr/lib/$musl_triple|g" \
        -e "s|-isystem include%s|-isystem include%s -idirafter $prefix/musl/kinc|g" \
        -e 's|%{!shared: \([^ ]*\)/Scrt1.o}|%{!shared:%{static-pie:\1/rcrt1.o;:\1/Scrt1.o}}|' \
        -e 's|-dynamic-linker \([^ ]*\)|%{!static-pie:-dynamic-linker \1}|' \
        -e 's|%{static:-static}|& %{static-pie:-static -pie --no-dynamic-linker -z text}|' \
        "$spec_in" >"$prefix/musl/gcc.specs"
    # One compiler name for configure, cmake and make alike.
    mkdir -p "$prefix/musl/bin"
    printf '#!/bin/sh\nexec %sgcc -specs %s "$@"\n' "$cross" "$prefix/musl/gcc.specs" \
        >"$prefix/musl/bin/cc"
    chmod +x "$prefix/musl/bin/cc"
    export CC="$prefix/musl/bin/cc"
    # Only this prefix's .pc files: the system's (and any PKG_CONFIG_PATH, which
    # is searched first) describe glibc builds.
    export PKG_CONFIG_PATH=
    export PKG_CONFIG_LIBDIR="$prefix/zlib/lib/pkgconfig:$prefix/openssl/lib/pkgconfig"
    zlib_opt="=$prefix/zlib"

    # zlib, jansson and libyaml: plain static builds, position-independent for
    # the static PIE. jansson and libyaml with CMake (their Debian sources carry
    # no generated configure).
    if [ ! -f "$prefix/zlib/lib/libz.a" ]; then
        (cd "$src"/zlib-*/ &&
            CFLAGS="$libopt -fPIC $sections" ./configure --static --prefix="$prefix/zlib" \
                >configure.log &&
            make -j"$jobs" libz.a >make.log &&
            make install >/dev/null)
    fi
    cmake_lib() { # NAME CMAKE-OPTION...
        local name=$1
        shift
        [ -f "$prefix/$name/.built" ] && return 0
        rm -rf "$src/build-$name"
        cmake -S "$(ls -d "$src"/"$name"-*/ | head -n 1)" -B "$src/build-$name" \
            -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=None \
            -DCMAKE_C_FLAGS="$libopt -fPIC $sections" -DCMAKE_INSTALL_PREFIX="$prefix/$name" \
            -DBUILD_SHARED_LIBS=OFF "${cmake_cross[@]}" "$@" >"$src/build-$name.log"
        cmake --build "$src/build-$name" -j "$jobs" >"$src/build-$name-make.log"
        cmake --install "$src/build-$name" >/dev/null
        touch "$prefix/$name/.built"
    }
    cmake_lib jansson -DJANSSON_BUILD_DOCS=OFF -DJANSSON_WITHOUT_TESTS=ON \
        -DJANSSON_EXAMPLES=OFF -DJANSSON_BUILD_SHARED_LIBS=OFF
    cmake_lib libyaml -DBUILD_TESTING=OFF -DINSTALL_CMAKE_DIR=lib/cmake/yaml
    # libyaml's CMake build installs no .pc file: the one its autotools build would.
    mkdir -p "$prefix/libyaml/lib/pkgconfig"
    sed -e "s|@prefix@|$prefix/libyaml|; s|@exec_prefix@|\${prefix}|" \
        -e 's|@includedir@|${prefix}/include|; s|@libdir@|${prefix}/lib|' \
        -e "s|@PACKAGE_VERSION@|$(basename "$(ls -d "$src"/libyaml-*/)" | sed 's/^libyaml-//')|" \
        "$src"/libyaml-*/yaml-0.1.pc.in >"$prefix/libyaml/lib/pkgconfig/yaml-0.1.pc"
fi

# OpenSSL: TLS 1.2 and 1.3 client with RSA, ECDSA/EC, X25519/Ed25519, AES-GCM and
# ChaCha20-Poly1305 (what Kubernetes API servers speak, and the key types kubeconfig
# client certificates use); no legacy protocols or ciphers, no engines, no modules,
# no automatic loading of a config file by OpenSSL itself (libcurl still asks for the
# default one, /etc/ssl/openssl.cnf, which the image does not have). Security level 2
# by default, as Debian's openssl.cnf sets it.
if [ ! -f "$prefix/openssl/lib/libcrypto.a" ]; then
    (cd "$src"/openssl-*/ &&
        ./Configure "${openssl_target[@]}" --prefix="$prefix/openssl" --libdir=lib --openssldir=/etc/ssl \
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
[ "$libc" = musl ] || export PKG_CONFIG_PATH="$prefix/openssl/lib/pkgconfig"

# nghttp2: the library only (no tools, no documentation): HTTP/2 framing and
# HPACK for libcurl, so many round trips share one connection to the API server
# instead of queueing behind HTTP/1.1's few. With CMake (a build dependency for
# glibc too now): Debian's source carries no generated configure. Its project()
# also looks for a C++ compiler (g++ in the build stage), though the library is
# C and none is run.
if [ ! -f "$prefix/nghttp2/lib/libnghttp2.a" ]; then
    rm -rf "$src/build-nghttp2"
    cmake -S "$(ls -d "$src"/nghttp2-*/ | head -n 1)" -B "$src/build-nghttp2" \
        -DCMAKE_C_COMPILER="${CC:-gcc}" -DCMAKE_BUILD_TYPE=None \
        -DCMAKE_C_FLAGS="$libopt -fPIC $sections" \
        -DCMAKE_INSTALL_PREFIX="$prefix/nghttp2" \
        -DCMAKE_INSTALL_LIBDIR=lib -DENABLE_LIB_ONLY=ON -DENABLE_STATIC_LIB=ON \
        -DENABLE_SHARED_LIB=OFF -DENABLE_DOC=OFF -DENABLE_FAILMALLOC=OFF \
        -DWITH_LIBXML2=OFF -DWITH_JEMALLOC=OFF "${cmake_cross[@]}" >"$src/build-nghttp2.log"
    cmake --build "$src/build-nghttp2" -j "$jobs" >"$src/build-nghttp2-make.log"
    cmake --install "$src/build-nghttp2" >/dev/null
fi

# libcurl: HTTP(S) and HTTP/2 over OpenSSL with zlib, threaded resolver; no other
# protocol, no GSSAPI/LDAP/IDN/PSL/brotli/zstd (their static archives are what breaks
# linking). A libcurl built before nghttp2 was part of the image is rebuilt.
if ! grep -qs nghttp2 "$prefix/curl/lib/pkgconfig/libcurl.pc"; then
    (cd "$src"/curl-*/ &&
        CFLAGS="$libopt $sections" \
            ./configure "${host_opt[@]}" --prefix="$prefix/curl" --disable-shared --enable-static \
            --with-openssl="$prefix/openssl" --with-zlib$zlib_opt --enable-threaded-resolver \
            --without-brotli --without-zstd --without-libidn2 --without-libpsl \
            --with-nghttp2="$prefix/nghttp2" --without-libssh2 --without-librtmp \
            --without-gssapi \
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
            ./configure "${host_opt[@]}" --prefix="$prefix/mhd" --disable-shared --enable-static \
            --disable-https --disable-doc --disable-examples --disable-curl --disable-nls \
            >configure.log &&
        make -j"$jobs" -C src/microhttpd >make.log &&
        make -C src/microhttpd install >/dev/null &&
        make -C src/include install >/dev/null &&
        make install-pkgconfigDATA >/dev/null)
fi
