# SPDX-License-Identifier: Apache-2.0
# Memory footprint: `make bench-footprint` prints VmRSS, RssAnon and RssFile of
# three replicas for the dynamic build and, when `make static` built it, the
# static one; `make static-deps` builds the static libraries `make static`
# links, as the image does, on a machine without the image build.
# With LIBC=musl both build against musl instead (Debian's musl-tools): every
# library, zlib, jansson and libyaml included, under $(IMAGE_DEP) (by default
# /opt/dep-musl), from sources of their own (an in-tree build per C library).

FOOTPRINT_SRC ?= $(B)/static-src$(if $(filter musl,$(LIBC)),-musl)

.PHONY: bench-footprint static-deps

bench-footprint: all
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/footprint.py

static-deps:
	LIBC=$(LIBC) bash tools/image/fetch-sources.sh $(FOOTPRINT_SRC)
	LIBC=$(LIBC) bash tools/image/build-deps.sh $(FOOTPRINT_SRC) $(IMAGE_DEP)
