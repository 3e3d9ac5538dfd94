# SPDX-License-Identifier: Apache-2.0
# Installing leaderd: the daemon, and libleaderd with its public headers.
#
#   make install     $(PREFIX)/bin/leaderd, $(PREFIX)/lib/libleaderd.a, the
#                    headers of include/leaderd/ in $(PREFIX)/include/leaderd/,
#                    $(PREFIX)/lib/pkgconfig/leaderd.pc, and the man page
#                    leaderd(8), docs/leaderd.8 (mk/man.mk), in
#                    $(PREFIX)/share/man/man8/
#   make uninstall   removes exactly those files (and the leaderd/ header directory)
#   make examples    installs into $(B)/example-root (PREFIX=/usr) and builds
#                    examples/*.c there with pkg-config alone, so a header or a
#                    library missing from the installed tree fails the build
#   make check-install
#                    installs into a temporary root and checks what landed there
#                    (tools/check-install.sh); `make lint` runs it
#
# PREFIX defaults to /usr/local; DESTDIR is prepended to every installed path.
# Only include/leaderd/ is installed: the headers left in lib/ are the
# library's internals, and the test API server stays in $(B).

PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
BINDIR     ?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
PCDIR      ?= $(LIBDIR)/pkgconfig
MANDIR     ?= $(PREFIX)/share/man
INSTALL    ?= install

PUB_HDR    := $(wildcard include/leaderd/*.h)
# The committed page, not a rule's target: installing never regenerates it
# in the source tree.
MAN8       := docs/leaderd.8
EXAMPLES   := $(patsubst examples/%.c,$(B)/examples/%,$(wildcard examples/*.c))
EXAMPLE_ROOT := $(abspath $(B)/example-root)

# Programs include <leaderd/election.h> and so on (the headers find one
# another in their own directory). Public headers include <jansson.h>
# (lease.h) and kube.h asks its users to call curl_global_init(), so those
# two are needed by whoever includes them; the archive also calls libyaml,
# libcrypto (base64 in kubeconfig.c) and libssl (the transport releases idle
# TLS buffers through its SSL_CTX). There is no shared library: link with
# `pkg-config --static --libs leaderd`.
define LEADERD_PC
prefix=$(PREFIX)
libdir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))
includedir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))

Name: leaderd
Description: Kubernetes Lease leader election: engine, API client, kubeconfig
Version: $(VERSION)
Requires: libcurl jansson yaml-0.1 libssl libcrypto
Cflags: -I$${includedir}
Libs: -L$${libdir} -lleaderd
endef
export LEADERD_PC

.PHONY: install uninstall examples check-install FORCE

# The installed archive: the build's, with the library's internal symbols
# made local (tools/public-archive.sh), so a program on the installed
# library can use only what include/leaderd/ declares.
$(B)/libleaderd-public.a: $(B)/libleaderd.a $(PUB_HDR) tools/public-archive.sh
	@bash tools/public-archive.sh $(B)/libleaderd.a $@ $(PUB_HDR)

# Rewritten on every run: it depends on PREFIX, which make cannot see change.
$(B)/leaderd.pc: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' "$$LEADERD_PC" > $@

install: $(B)/libleaderd-public.a $(B)/leaderd.pc $(B)/leaderd
	$(INSTALL) -d -m 755 $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) \
	    $(DESTDIR)$(INCLUDEDIR)/leaderd $(DESTDIR)$(PCDIR)
	$(INSTALL) -m 755 $(B)/leaderd $(DESTDIR)$(BINDIR)/leaderd
	$(INSTALL) -m 644 $(B)/libleaderd-public.a $(DESTDIR)$(LIBDIR)/libleaderd.a
	$(INSTALL) -m 644 $(PUB_HDR) $(DESTDIR)$(INCLUDEDIR)/leaderd/
	$(INSTALL) -m 644 $(B)/leaderd.pc $(DESTDIR)$(PCDIR)/leaderd.pc
	$(INSTALL) -d -m 755 $(DESTDIR)$(MANDIR)/man8
	$(INSTALL) -m 644 $(MAN8) $(DESTDIR)$(MANDIR)/man8/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/leaderd
	rm -f $(DESTDIR)$(LIBDIR)/libleaderd.a $(DESTDIR)$(PCDIR)/leaderd.pc
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/leaderd/,$(notdir $(PUB_HDR)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(MAN8)))
	-rmdir $(DESTDIR)$(INCLUDEDIR)/leaderd 2>/dev/null

# A fresh root each time, so a header removed from include/leaderd/ is gone
# from it too.
$(EXAMPLE_ROOT)/.installed: $(B)/libleaderd-public.a $(B)/leaderd $(PUB_HDR) mk/install.mk Makefile
	rm -rf $(EXAMPLE_ROOT)
	$(MAKE) --no-print-directory install DESTDIR=$(EXAMPLE_ROOT) PREFIX=/usr
	@touch $@

# No project include path and no project flags but the warnings: only what
# pkg-config gives (-I.../include, so the example includes <leaderd/host.h>).
EXAMPLE_PKG = PKG_CONFIG_PATH=$(EXAMPLE_ROOT)/usr/lib/pkgconfig \
              PKG_CONFIG_SYSROOT_DIR=$(EXAMPLE_ROOT) pkg-config
$(B)/examples/%: examples/%.c $(EXAMPLE_ROOT)/.installed
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) -g -O2 -o $@ $< $$($(EXAMPLE_PKG) --cflags --libs leaderd)

examples: $(EXAMPLES)

# Every public header compiles on its own, includes only public headers, and
# the examples build and link from the installed tree alone.
check-install: $(B)/libleaderd-public.a $(B)/leaderd
	@CC="$(CC)" WARN="$(WARN)" bash tools/check-install.sh $(B)

lint: check-install
