# SPDX-License-Identifier: Apache-2.0
# Memory footprint: `make bench-footprint` prints VmRSS, RssAnon and RssFile of
# three replicas for the dynamic build and, when `make static` built it, the
# static one; `make static-deps` builds the static libraries `make static`
# links, as the image does, on a machine without the image build.
# With LIBC=musl both build against musl instead (Debian's musl-tools): every
# library, zlib, jansson and libyaml included, under $(IMAGE_DEP) (by default
# /opt/dep-musl), from sources of their own (an in-tree build per C library).
# With ARCH=arm64 (musl only) they are cross-compiled, under /opt/dep-musl-arm64,
# against Debian's arm64 musl-dev (tools/image/fetch-musl.sh).

FOOTPRINT_SRC ?= $(B)/static-src$(if $(filter musl,$(LIBC)),-musl)$(ARCH_SUFFIX)
CROSS_PKGS     = gcc-aarch64-linux-gnu libc6-dev-arm64-cross linux-libc-dev-arm64-cross \
                 binutils-aarch64-linux-gnu musl-tools musl-dev cmake

.PHONY: bench-footprint static-deps

bench-footprint: all
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/footprint.py

static-deps:
	@: $(CHECK_ARCH)
	$(if $(ARCH_SUFFIX),@bash tools/deps.sh --as static-deps --no-install-recommends $(CROSS_PKGS))
	$(if $(ARCH_SUFFIX),bash tools/image/fetch-musl.sh $(ARCH) $(IMAGE_DEP)/musl/sysroot)
	LIBC=$(LIBC) bash tools/image/fetch-sources.sh $(FOOTPRINT_SRC)
	LIBC=$(LIBC) ARCH=$(ARCH) bash tools/image/build-deps.sh $(FOOTPRINT_SRC) $(IMAGE_DEP)
