# leaderd container image: one statically linked binary and the CA bundle on scratch.
#
# Debian's own libcurl and libmicrohttpd cannot be linked statically (Kerberos and
# p11-kit ship no static archives), so the build stage rebuilds both from Debian's
# source packages, pinned below, with everything leaderd does not use turned off.
# jansson, libyaml, OpenSSL and zlib are Debian bookworm's static archives.
# Build: docker build -t leaderd:0.1.0 .   (or `make image` without a Docker engine)

# The exact Debian source packages rebuilt below. A security update in Debian replaces
# the version on the mirror; the build then stops at `apt-get source` and these two
# lines are bumped deliberately (see docs/install.md).
ARG CURL_VERSION=7.88.1-10+deb12u15
ARG MHD_VERSION=0.9.75-6

# ---- toolchain and pinned sources ----
FROM debian:bookworm-slim AS toolchain
ARG CURL_VERSION
ARG MHD_VERSION
ENV DEBIAN_FRONTEND=noninteractive
RUN sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
        > /etc/apt/sources.list.d/debian-src.sources \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        gcc libc6-dev make pkg-config dpkg-dev xz-utils ca-certificates \
        libssl-dev libjansson-dev libyaml-dev zlib1g-dev \
    && mkdir -p /usr/src/dep \
    && cd /usr/src/dep \
    && apt-get source --only-source "curl=${CURL_VERSION}" "libmicrohttpd=${MHD_VERSION}" \
    && rm -rf /var/lib/apt/lists/*

# ---- static libcurl and libmicrohttpd under /opt/dep ----
FROM toolchain AS deps
# libcurl: HTTP(S) over OpenSSL with zlib, threaded resolver; no other protocol, no
# GSSAPI/LDAP/IDN/PSL/HTTP2/brotli/zstd (their static archives are what breaks linking).
WORKDIR /usr/src/dep
RUN cd curl-*/ \
    && ./configure --prefix=/opt/dep/curl --disable-shared --enable-static \
        --with-openssl --with-zlib --enable-threaded-resolver \
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
    && ./configure --prefix=/opt/dep/mhd --disable-shared --enable-static \
        --disable-https --disable-doc --disable-examples --disable-curl --disable-nls \
        > configure.log \
    && make -j"$(nproc)" -C src/microhttpd > make.log \
    && make -C src/microhttpd install > /dev/null \
    && make -C src/include install > /dev/null \
    && make install-pkgconfigDATA > /dev/null

# ---- unit tests, linked with the rebuilt libcurl ----
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
LABEL org.opencontainers.image.title="leaderd" \
      org.opencontainers.image.description="Kubernetes leader-election sidecar (static, scratch)" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.base.name="scratch" \
      io.leaderd.curl-source="curl ${CURL_VERSION} (Debian bookworm)" \
      io.leaderd.microhttpd-source="libmicrohttpd ${MHD_VERSION} (Debian bookworm)"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /usr/src/leaderd/build/static/leaderd /usr/local/bin/leaderd
USER 65532:65532
EXPOSE 4040
ENTRYPOINT ["/usr/local/bin/leaderd"]
