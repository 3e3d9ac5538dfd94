# SPDX-License-Identifier: Apache-2.0
# Container image: `make image` builds the Dockerfile with buildah (no Docker engine
# needed), `make image-test` runs it, `make deploy-test` checks deploy/. The `static`
# and `image-unit` targets are what the Dockerfile's build stages run.

IMAGE      ?= localhost/leaderd:$(VERSION)
IMAGE_DIR  ?= $(B)/image
# LIBC=musl: the static binary against musl (docs/design/memory.md).
LIBC       ?= glibc
IMAGE_DEP  ?= $(if $(filter musl,$(LIBC)),/opt/dep-musl,/opt/dep)
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
STATIC_DIR = $(B)/static-musl
STATIC_PKG = PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$(STATIC_PKG_PATH):$(IMAGE_DEP)/jansson/lib/pkgconfig:$(IMAGE_DEP)/libyaml/lib/pkgconfig:$(IMAGE_DEP)/zlib/lib/pkgconfig
STATIC_CC  = CC=$(IMAGE_DEP)/musl/bin/cc
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
	$(CTR) buildah build --pull=never --layers --force-rm --network host \
	    --build-arg OPENSSL_SOURCE=$(IMAGE_OPENSSL_SOURCE) -t $(IMAGE) -f Dockerfile .
	@$(CTR) podman image inspect --format 'image: {{.RepoTags}} {{.Size}} bytes' $(IMAGE)

image-test: image all
	@LEADERD_IMAGE=$(IMAGE) LEADERD_IMAGE_DIR=$(IMAGE_DIR) LEADERD_BUILD=$(abspath $(B)) \
	    $(PY) tools/image/image_test.py

deploy-test:
	@bash tools/image/tools.sh $(B) deploy
	@$(PY) tests/deploy/run.py
