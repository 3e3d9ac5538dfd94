# leaderd container image: one statically linked binary and the CA bundle on scratch.
#
# Debian's own libcurl and libmicrohttpd cannot be linked statically (Kerberos and
# p11-kit ship no static archives), so the build stage rebuilds both from Debian's
# source packages, pinned below, with everything leaderd does not use turned off.
# OpenSSL is rebuilt too, from Debian's source package, with only what a TLS 1.2/1.3
# client of an API server needs: most of a static binary is libcrypto, and every page
# of it that the kernel maps counts in the pod's memory.
# jansson, libyaml and zlib are Debian bookworm's static archives.
# Build: docker build -t leaderd:0.1.0 .   (or `make image` without a Docker engine)

# The exact Debian source packages rebuilt below. A security update in Debian replaces
# the version on the mirror; the build then stops at `apt-get source` and these lines
# are bumped deliberately (README, "What the image is built from").
ARG CURL_VERSION=7.88.1-10+deb12u15
ARG MHD_VERSION=0.9.75-6
ARG OPENSSL_VERSION=3.0.22-1~deb12u2
# debian: Debian's source package with its patches (security fixes included) applied.
# upstream: only the upstream tarball of that version, for a mirror that lacks the
# Debian part (this project's own build machines: see README); it misses the fixes
# Debian adds on top of the upstream release.
ARG OPENSSL_SOURCE=debian

# ---- toolchain and pinned sources ----
FROM debian:bookworm-slim AS toolchain
ARG CURL_VERSION
ARG MHD_VERSION
ARG OPENSSL_VERSION
ARG OPENSSL_SOURCE
ENV DEBIAN_FRONTEND=noninteractive
# Every file is checked by apt against the signed source index.
RUN sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
        > /etc/apt/sources.list.d/debian-src.sources \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        gcc libc6-dev make perl pkg-config dpkg-dev xz-utils ca-certificates \
        libjansson-dev libyaml-dev zlib1g-dev \
    && mkdir -p /usr/src/dep \
    && cd /usr/src/dep \
    && apt-get source --only-source "curl=${CURL_VERSION}" "libmicrohttpd=${MHD_VERSION}" \
    && if [ "${OPENSSL_SOURCE}" = upstream ]; then \
           apt-get source --only-source --tar-only "openssl=${OPENSSL_VERSION}" \
           && tar -xzf openssl_*.orig.tar.gz; \
       else \
           apt-get source --only-source "openssl=${OPENSSL_VERSION}"; \
       fi \
    && rm -rf /var/lib/apt/lists/*

# ---- static OpenSSL, libcurl and libmicrohttpd under /opt/dep ----
FROM toolchain AS deps
# OpenSSL: TLS 1.2 and 1.3 client with RSA, ECDSA/EC, X25519/Ed25519, AES-GCM and
# ChaCha20-Poly1305 (what Kubernetes API servers speak, and the key types kubeconfig
# client certificates use); no legacy protocols or ciphers, no engines, no modules,
# no automatic loading of a config file by OpenSSL itself (libcurl still asks for the
# default one, /etc/ssl/openssl.cnf, which the image does not have). Security level 2
# by default, as Debian's openssl.cnf sets it.
WORKDIR /usr/src/dep
RUN cd openssl-*/ \
    && ./Configure --prefix=/opt/dep/openssl --libdir=lib --openssldir=/etc/ssl \
        no-shared no-module no-dso no-engine no-legacy no-deprecated no-comp no-tests \
        no-ui-console no-async no-autoload-config no-filenames no-ssl-trace \
        no-ssl3 no-tls1 no-tls1_1 no-dtls no-srp no-psk no-srtp no-sctp no-nextprotoneg \
        no-cms no-ts no-ct no-ocsp no-cmp no-dh no-dsa no-ec2m no-gost no-sm2 no-sm3 no-sm4 \
        no-idea no-md4 no-mdc2 no-rmd160 no-whirlpool no-rc2 no-rc4 no-rc5 no-bf no-cast \
        no-des no-camellia no-aria no-seed no-siphash no-blake2 no-scrypt no-ocb no-siv \
        no-padlockeng no-capieng no-afalgeng no-devcryptoeng \
        -DOPENSSL_TLS_SECURITY_LEVEL=2 -Os -ffunction-sections -fdata-sections \
        > configure.log \
    && make -j"$(nproc)" build_libs > make.log \
    && make install_dev > /dev/null
ENV PKG_CONFIG_PATH=/opt/dep/openssl/lib/pkgconfig
# libcurl: HTTP(S) over OpenSSL with zlib, threaded resolver; no other protocol, no
# GSSAPI/LDAP/IDN/PSL/HTTP2/brotli/zstd (their static archives are what breaks linking).
RUN cd curl-*/ \
    && CFLAGS="-O2 -ffunction-sections -fdata-sections" \
       ./configure --prefix=/opt/dep/curl --disable-shared --enable-static \
        --with-openssl=/opt/dep/openssl --with-zlib --enable-threaded-resolver \
        --without-brotli --without-zstd --without-libidn2 --without-libpsl \
        --without-nghttp2 --without-libssh2 --without-librtmp --without-gssapi \
        --without-libgsasl --disable-ldap --disable-ldaps --disable-rtsp --disable-dict \
        --disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smtp \
        --disable-gopher --disable-mqtt --disable-smb --disable-ftp --disable-file \
        --disable-manual --disable-ntlm --disable-alt-svc --disable-hsts \
        --disable-cookies --disable-netrc \
        --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs \
        > configure.log \
    && make -j"$(nproc)" -C lib > make.log \
    && make -C lib install > /dev/null \
    && make -C include install > /dev/null \
    && make install-pkgconfigDATA > /dev/null
# libmicrohttpd without HTTPS: leaderd serves plain HTTP on the pod network, and MHD's
# TLS would need GnuTLS with p11-kit, which has no static archive.
RUN cd libmicrohttpd-*/ \
    && CFLAGS="-O2 -ffunction-sections -fdata-sections" \
       ./configure --prefix=/opt/dep/mhd --disable-shared --enable-static \
        --disable-https --disable-doc --disable-examples --disable-curl --disable-nls \
        > configure.log \
    && make -j"$(nproc)" -C src/microhttpd > make.log \
    && make -C src/microhttpd install > /dev/null \
    && make -C src/include install > /dev/null \
    && make install-pkgconfigDATA > /dev/null

# ---- unit tests, linked with the rebuilt libcurl and OpenSSL ----
FROM deps AS unit
# The tests' fake API server speaks HTTPS, so they use Debian's libmicrohttpd (GnuTLS).
RUN apt-get update \
    && apt-get install -y --no-install-recommends check libmicrohttpd-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /usr/src/leaderd
COPY . .
RUN make -j"$(nproc)" image-unit

# ---- the static binary ----
FROM deps AS build
WORKDIR /usr/src/leaderd
COPY . .
# Ties this stage to the unit tests: a failed test stops the build on every builder.
COPY --from=unit /usr/src/leaderd/build/unit/passed /tmp/unit-passed
RUN make -j"$(nproc)" static \
    && ./build/static/leaderd --version

# ---- final image ----
FROM scratch
ARG CURL_VERSION
ARG MHD_VERSION
ARG OPENSSL_VERSION
ARG OPENSSL_SOURCE
LABEL org.opencontainers.image.title="leaderd" \
      org.opencontainers.image.description="Kubernetes leader-election sidecar (static, scratch)" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.base.name="scratch" \
      io.leaderd.curl-source="curl ${CURL_VERSION} (Debian bookworm)" \
      io.leaderd.microhttpd-source="libmicrohttpd ${MHD_VERSION} (Debian bookworm)" \
      io.leaderd.openssl-source="openssl ${OPENSSL_VERSION} (Debian bookworm-security, ${OPENSSL_SOURCE} source)"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /usr/src/leaderd/build/static/leaderd /usr/local/bin/leaderd
USER 65532:65532
EXPOSE 4040
ENTRYPOINT ["/usr/local/bin/leaderd"]
