# SPDX-License-Identifier: Apache-2.0
# Container image: `make image` builds the Dockerfile with buildah (no Docker engine
# needed) for amd64 and arm64, `make image-test` runs it, `make deploy-test` checks
# deploy/. The `static` and `image-unit` targets are what the Dockerfile's build
# stages run.

IMAGE      ?= localhost/leaderd:$(VERSION)
IMAGE_DIR  ?= $(B)/image
# The image's architectures: one manifest list $(IMAGE) of one image each,
# also named $(IMAGE)-ARCH (tools/image/build-image.sh).
IMAGE_ARCHS ?= amd64 arm64
# ARCH=arm64: `make static` cross-compiles for arm64 (musl only; the build
# machine is amd64). Its output and deps prefix get an -arm64 suffix.
ARCH       ?= amd64
ARCH_SUFFIX = $(if $(filter arm64,$(ARCH)),-arm64)
# LIBC=musl: the static binary against musl (docs/design/memory.md).
LIBC       ?= $(if $(filter arm64,$(ARCH)),musl,glibc)
IMAGE_DEP  ?= $(if $(filter musl,$(LIBC)),/opt/dep-musl$(ARCH_SUFFIX),/opt/dep)
# Expanded in a recipe, so a stray ARCH in the environment only stops the
# targets that use it.
CHECK_ARCH = $(if $(filter amd64 arm64,$(ARCH)),,$(error ARCH must be amd64 or arm64, not '$(ARCH)'))$(if \
             $(and $(ARCH_SUFFIX),$(filter-out musl,$(LIBC))),$(error ARCH=$(ARCH) is built with LIBC=musl only))
IMAGE_BASE := docker.io/library/debian:bookworm-slim
CTR         = LEADERD_IMAGE_DIR=$(IMAGE_DIR) tools/image/ctr.sh
DOCKERFILELINT = $(B)/tools/node_modules/.bin/dockerfilelint

# Static link against OpenSSL, nghttp2, libcurl and libmicrohttpd rebuilt under
# $(IMAGE_DEP) (only .a there) plus, for glibc, Debian's static jansson, libyaml
# and zlib; the image links against musl (LIBC=musl, in $(B)/static-musl).
# -static-pie keeps ASLR; the objects are the normal -fPIE ones. The rebuilt
# archives and leaderd's own objects have a section per function and object, so
# --gc-sections drops what nothing references (docs/benchmarks.md, "Memory
# footprint": what each step saved).
OPENSSL_PKG_PATH = $(IMAGE_DEP)/openssl/lib/pkgconfig
STATIC_PKG_PATH = $(IMAGE_DEP)/curl/lib/pkgconfig:$(IMAGE_DEP)/nghttp2/lib/pkgconfig:$(IMAGE_DEP)/mhd/lib/pkgconfig:$(OPENSSL_PKG_PATH)
# glibc: Debian's jansson, libyaml and zlib from the system's .pc files. musl:
# only the prefix's (build-deps.sh built all six there; PKG_CONFIG_PATH, searched
# first, may name glibc builds), through its compiler.
ifeq ($(LIBC),musl)
STATIC_DIR = $(B)/static-musl$(ARCH_SUFFIX)
STATIC_PKG = PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$(STATIC_PKG_PATH):$(IMAGE_DEP)/jansson/lib/pkgconfig:$(IMAGE_DEP)/libyaml/lib/pkgconfig:$(IMAGE_DEP)/zlib/lib/pkgconfig
# The prefix's compiler (build-deps.sh) is the cross one for arm64; the build
# machine's ar cannot index arm64 objects.
STATIC_CC  = CC=$(IMAGE_DEP)/musl/bin/cc $(if $(ARCH_SUFFIX),AR=aarch64-linux-gnu-ar)
# libcurl.pc says -lz and -lnghttp2 without their directories.
STATIC_PKGS = $(PKGS) zlib libnghttp2
else
STATIC_DIR = $(B)/static
STATIC_PKG = PKG_CONFIG_PATH=$(STATIC_PKG_PATH)
STATIC_CC  =
# libcurl.pc says -lnghttp2 without its directory.
STATIC_PKGS = $(PKGS) libnghttp2
endif

.PHONY: static image-unit image image-base image-lint image-test deploy-test

static:
	@: $(CHECK_ARCH)
	@mkdir -p $(STATIC_DIR) && touch $(STATIC_DIR)/.deps
	$(STATIC_PKG) $(MAKE) --no-print-directory B=$(STATIC_DIR) $(STATIC_CC) \
	    CFLAGS="-ffunction-sections -fdata-sections $(CFLAGS)" \
	    PKG_LIBS="$$($(STATIC_PKG) pkg-config --static --libs $(STATIC_PKGS)) -lpthread" \
	    ALL_LDFLAGS="-static-pie -Wl,-z,relro,-z,now -Wl,--gc-sections -s" $(STATIC_DIR)/leaderd

# Unit tests with the rebuilt libcurl and OpenSSL (static archives) and Debian's
# libmicrohttpd, whose HTTPS the tests' fake API server needs. Leaves $(B)/unit/passed.
UNIT_PKG_PATH = $(IMAGE_DEP)/curl/lib/pkgconfig:$(IMAGE_DEP)/nghttp2/lib/pkgconfig:$(OPENSSL_PKG_PATH)
image-unit:
	@mkdir -p $(B)/unit && touch $(B)/unit/.deps && rm -f $(B)/unit/passed
	PKG_CONFIG_PATH=$(UNIT_PKG_PATH) $(MAKE) --no-print-directory B=$(B)/unit \
	    PKG_LIBS="$$(PKG_CONFIG_PATH=$(UNIT_PKG_PATH) pkg-config --static --libs libcurl libnghttp2) \
	              $$(PKG_CONFIG_PATH=$(UNIT_PKG_PATH) pkg-config --libs $(filter-out libcurl,$(PKGS))) \
	              -lpthread" \
	    unit
	@touch $(B)/unit/passed

$(B)/.image-tools: tools/image/tools.sh
	@bash tools/image/tools.sh $(B) image
	@touch $@

# Local stand-in for the official base image, so `FROM debian:bookworm-slim` resolves
# without a registry (build with --pull=never).
image-base: $(B)/.image-tools
	@if ! $(CTR) podman image exists $(IMAGE_BASE); then \
	    echo "image: debootstrap bookworm -> $(IMAGE_BASE)"; \
	    mkdir -p $(IMAGE_DIR); \
	    [ -f $(IMAGE_DIR)/bookworm-slim.tar ] || tools/image/mk-base.sh $(IMAGE_DIR)/bookworm-slim.tar; \
	    $(CTR) podman import --quiet --change 'CMD ["/bin/bash"]' \
	        $(IMAGE_DIR)/bookworm-slim.tar $(IMAGE_BASE) >/dev/null; \
	fi

image-lint: $(B)/.image-tools
	$(DOCKERFILELINT) Dockerfile

# OpenSSL from Debian's whole source package (its patches applied) when the mirror
# serves it, else from the upstream tarball alone, with a warning (see docs/image.md).
OPENSSL_PIN          = $(shell sed -n 's/^ARG OPENSSL_VERSION=//p' Dockerfile)
IMAGE_OPENSSL_SOURCE ?= $(shell tools/image/openssl-source.sh '$(OPENSSL_PIN)')

image: image-lint image-base
	@LEADERD_IMAGE_DIR=$(IMAGE_DIR) bash tools/image/build-image.sh $(IMAGE) '$(IMAGE_ARCHS)' \
	    --build-arg OPENSSL_SOURCE=$(IMAGE_OPENSSL_SOURCE)

# The amd64 image in containers; then the arm64 image's binary under
# qemu-aarch64-static, beside amd64 replicas (tools/image/arm64_test.py). Both
# run, whatever the first one's result.
image-test: image all
	@rc=0; \
	LEADERD_IMAGE=$(IMAGE)-amd64 LEADERD_IMAGE_DIR=$(IMAGE_DIR) LEADERD_BUILD=$(abspath $(B)) \
	    $(PY) tools/image/image_test.py || rc=1; \
	LEADERD_IMAGE=$(IMAGE) LEADERD_IMAGE_DIR=$(IMAGE_DIR) LEADERD_BUILD=$(abspath $(B)) \
	    $(PY) tools/image/arm64_test.py || rc=1; \
	exit $$rc

deploy-test:
	@bash tools/image/tools.sh $(B) deploy
	@$(PY) tests/deploy/run.py
