# Memory footprint: `make bench-footprint` prints VmRSS, RssAnon and RssFile of
# three replicas for the dynamic build and, when `make static` built it, the
# static one; `make static-deps` builds the static libraries `make static`
# links, as the image does, on a machine without the image build.

FOOTPRINT_SRC ?= $(B)/static-src

.PHONY: bench-footprint static-deps

bench-footprint: all
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/footprint.py

static-deps:
	bash tools/image/fetch-sources.sh $(FOOTPRINT_SRC)
	bash tools/image/build-deps.sh $(FOOTPRINT_SRC) $(IMAGE_DEP)
