# leaderd container image: one statically linked binary and the CA bundle on scratch.
#
# Debian's own libcurl and libmicrohttpd cannot be linked statically (Kerberos and
# p11-kit ship no static archives), so the build stage rebuilds both from Debian's
# source packages, pinned below, with everything leaderd does not use turned off.
# OpenSSL is rebuilt too, from Debian's source package, with only what a TLS 1.2/1.3
# client of an API server needs: most of a static binary is libcrypto, and every page
# of it that the kernel maps counts in the pod's memory.
# The C library is musl (LIBC=musl, the default: Debian's musl-tools), so every
# library is rebuilt against it, zlib, jansson and libyaml too, from their Debian
# source packages; with LIBC=glibc, jansson, libyaml and zlib are Debian bookworm's
# static archives and glibc's own. The unit tests always link the glibc builds.
# Two architectures, linux/amd64 and linux/arm64 (musl only): every build stage runs
# on the build machine ($BUILDPLATFORM, amd64) and the arm64 libraries and binary are
# cross-compiled there, so an arm64 image needs no emulator to build; only the last
# stage, FROM scratch, is of the target platform. The deps stage builds both
# architectures' libraries whatever the target, so the two images' builds share it.
# BuildKit sets BUILDPLATFORM itself; buildah 1.28 (Debian bookworm's) needs
# --build-arg BUILDPLATFORM=linux/amd64, which `make image` passes.
# Build: docker buildx build --platform linux/amd64,linux/arm64 -t leaderd:0.1.0 .
#        (or `make image`, buildah without a Docker engine: tools/image/build-image.sh)

# The exact Debian source packages rebuilt below. A security update in Debian replaces
# the version on the mirror; the build then stops at `apt-get source` and these lines
# are bumped deliberately (docs/image.md, "What the image is built from").
ARG CURL_VERSION=7.88.1-10+deb12u15
ARG NGHTTP2_VERSION=1.52.0-1+deb12u3
ARG MHD_VERSION=0.9.75-6
ARG OPENSSL_VERSION=3.0.22-1~deb12u2
ARG ZLIB_VERSION=1:1.2.13.dfsg-1
ARG JANSSON_VERSION=2.14-2
ARG LIBYAML_VERSION=0.2.5-1
# musl: 0.7 MiB less resident than glibc in steady state (docs/design/memory.md).
ARG LIBC=musl
# debian: Debian's source package with its patches (security fixes included) applied.
# upstream: only the upstream tarball of that version, for a mirror that lacks the
# Debian part (this project's own build machines: see docs/image.md); it misses the fixes
# Debian adds on top of the upstream release.
ARG OPENSSL_SOURCE=debian

# ---- toolchain and pinned sources ----
FROM --platform=$BUILDPLATFORM debian:bookworm-slim AS toolchain
ARG CURL_VERSION
ARG NGHTTP2_VERSION
ARG MHD_VERSION
ARG OPENSSL_VERSION
ARG OPENSSL_SOURCE
ARG ZLIB_VERSION
ARG JANSSON_VERSION
ARG LIBYAML_VERSION
ARG LIBC
ENV DEBIAN_FRONTEND=noninteractive
COPY tools/image/fetch-musl.sh /usr/local/bin/fetch-musl.sh
# Every file is checked by apt against the signed source index. A musl build gets
# its own copy of the sources (each library builds in its source tree), and so does
# arm64's, with Debian's aarch64 cross gcc and arm64's musl-dev (unpacked, not
# installed: tools/image/fetch-musl.sh) under the arm64 prefix.
RUN sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
        > /etc/apt/sources.list.d/debian-src.sources \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        gcc g++ libc6-dev make perl pkg-config dpkg-dev xz-utils ca-certificates cmake \
        libjansson-dev libyaml-dev zlib1g-dev \
    && mkdir -p /usr/src/dep \
    && cd /usr/src/dep \
    && apt-get source --only-source "curl=${CURL_VERSION}" "nghttp2=${NGHTTP2_VERSION}" \
        "libmicrohttpd=${MHD_VERSION}" \
    && if [ "${OPENSSL_SOURCE}" = upstream ]; then \
           apt-get source --only-source --tar-only "openssl=${OPENSSL_VERSION}" \
           && tar -xzf openssl_*.orig.tar.gz; \
       else \
           apt-get source --only-source "openssl=${OPENSSL_VERSION}"; \
       fi \
    && if [ "${LIBC}" = musl ]; then \
           apt-get install -y --no-install-recommends musl-tools musl-dev \
                gcc-aarch64-linux-gnu libc6-dev-arm64-cross linux-libc-dev-arm64-cross \
           && fetch-musl.sh arm64 /opt/dep-musl-arm64/musl/sysroot \
           && mkdir -p /usr/src/dep-musl \
           && cp -a /usr/src/dep/curl-*/ /usr/src/dep/nghttp2-*/ /usr/src/dep/libmicrohttpd-*/ \
                /usr/src/dep/openssl-*/ /usr/src/dep-musl/ \
           && cd /usr/src/dep-musl \
           && apt-get source --only-source "zlib=${ZLIB_VERSION}" "jansson=${JANSSON_VERSION}" \
                "libyaml=${LIBYAML_VERSION}" \
           && cp -a /usr/src/dep-musl /usr/src/dep-musl-arm64; \
       fi \
    && rm -rf /var/lib/apt/lists/*

# ---- static OpenSSL, nghttp2, libcurl and libmicrohttpd under /opt/dep ----
FROM toolchain AS deps
# What each library keeps and leaves out, and why, is in the script (the same one
# `make static-deps` runs outside an image build): a TLS 1.2/1.3 client of an API
# server (RSA, ECDSA, X25519, client certificates) over OpenSSL; libcurl for HTTP(S)
# only, HTTP/2 through nghttp2's library; libmicrohttpd without HTTPS. Everything
# -Os with a section per function.
# glibc's under /opt/dep (the unit tests), musl's under /opt/dep-musl (the ARG is
# in every RUN's environment, hence the explicit LIBC=glibc).
ARG LIBC
WORKDIR /usr/src/dep
COPY tools/image/build-deps.sh /usr/local/bin/build-deps.sh
RUN LIBC=glibc build-deps.sh /usr/src/dep /opt/dep \
    && if [ "${LIBC}" = musl ]; then LIBC=musl build-deps.sh /usr/src/dep-musl /opt/dep-musl; fi
# arm64's, cross-compiled (a layer of its own: the amd64 ones stay cached if it fails).
RUN if [ "${LIBC}" = musl ]; then \
        LIBC=musl ARCH=arm64 build-deps.sh /usr/src/dep-musl-arm64 /opt/dep-musl-arm64; \
    fi
ENV PKG_CONFIG_PATH=/opt/dep/openssl/lib/pkgconfig

# ---- unit tests, linked with the rebuilt libcurl and OpenSSL ----
FROM deps AS unit
# The tests' fake API server speaks HTTPS, so they use Debian's libmicrohttpd (GnuTLS).
RUN apt-get update \
    && apt-get install -y --no-install-recommends check libmicrohttpd-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /usr/src/leaderd
COPY . .
RUN make -j"$(nproc)" image-unit

# ---- the static binary, for the target's architecture ----
FROM deps AS build
ARG LIBC
# Set by the builder from --platform (empty on a builder that sets none: native).
ARG TARGETARCH
WORKDIR /usr/src/leaderd
COPY . .
# Ties this stage to the unit tests: a failed test stops the build on every builder.
COPY --from=unit /usr/src/leaderd/build/unit/passed /tmp/unit-passed
# A binary of the build machine's architecture is run; an arm64 one cannot be (no
# emulator here), so its ELF header is checked instead.
RUN native="$(dpkg --print-architecture)" \
    && arch="${TARGETARCH:-$native}" \
    && case "${LIBC}-${arch}" in \
           musl-amd64) out=build/static-musl ;; \
           musl-arm64) out=build/static-musl-arm64 ;; \
           glibc-amd64) out=build/static ;; \
           *) echo "no LIBC=${LIBC} build for ${arch} (arm64 is musl only)" >&2; exit 1 ;; \
       esac \
    && make -j"$(nproc)" static LIBC="${LIBC}" ARCH="${arch}" \
    && cp "$out/leaderd" /usr/local/bin/leaderd \
    && if [ "${arch}" = "${native}" ]; then /usr/local/bin/leaderd --version; \
       else readelf -h /usr/local/bin/leaderd | grep -q 'Machine:.*AArch64'; fi
# The licences of everything in the binary ship with it (libmicrohttpd is
# LGPL-2.1+: docs/image.md, "Licences").
RUN sh tools/image/collect-licenses.sh /usr/share/licenses/leaderd "${LIBC}" \
    /usr/src/dep /usr/src/dep-musl

# ---- final image ----
FROM scratch
ARG CURL_VERSION
ARG NGHTTP2_VERSION
ARG MHD_VERSION
ARG OPENSSL_VERSION
ARG OPENSSL_SOURCE
ARG LIBC
LABEL org.opencontainers.image.title="leaderd" \
      org.opencontainers.image.description="Kubernetes leader-election sidecar (static, scratch)" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.base.name="scratch" \
      io.leaderd.curl-source="curl ${CURL_VERSION} (Debian bookworm)" \
      io.leaderd.nghttp2-source="nghttp2 ${NGHTTP2_VERSION} (Debian bookworm-security)" \
      io.leaderd.microhttpd-source="libmicrohttpd ${MHD_VERSION} (Debian bookworm)" \
      io.leaderd.openssl-source="openssl ${OPENSSL_VERSION} (Debian bookworm-security, ${OPENSSL_SOURCE} source)" \
      io.leaderd.libc="${LIBC}"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /usr/local/bin/leaderd /usr/local/bin/leaderd
COPY --from=build /usr/share/licenses/leaderd /usr/share/licenses/leaderd
USER 65532:65532
EXPOSE 4040
ENTRYPOINT ["/usr/local/bin/leaderd"]
