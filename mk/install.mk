# Installing libleaderd, and the examples built against what was installed.
#
#   make install     $(PREFIX)/lib/libleaderd.a, the headers of lib/ in
#                    $(PREFIX)/include/leaderd/, $(PREFIX)/lib/pkgconfig/leaderd.pc
#   make uninstall   removes exactly those files (and the leaderd/ header directory)
#   make examples    installs into $(B)/example-root (PREFIX=/usr) and builds
#                    examples/*.c there with pkg-config alone, so a header or a
#                    library missing from the installed tree fails the build
#
# PREFIX defaults to /usr/local; DESTDIR is prepended to every installed path.
# Only the library is installed: the daemon's binaries stay in $(B).

PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PCDIR      ?= $(LIBDIR)/pkgconfig
INSTALL    ?= install

LIB_HDR    := $(wildcard lib/*.h)
EXAMPLES   := $(patsubst examples/%.c,$(B)/examples/%,$(wildcard examples/*.c))
EXAMPLE_ROOT := $(abspath $(B)/example-root)

# Public headers include <jansson.h> (lease.h) and kube.h asks its users to call
# curl_global_init(), so those two are needed by whoever includes them; the
# archive also calls libyaml, libcrypto (base64 in kubeconfig.c) and libssl (the
# transport releases idle TLS buffers through its SSL_CTX). There is no
# shared library: link with `pkg-config --static --libs leaderd`.
define LEADERD_PC
prefix=$(PREFIX)
libdir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))
includedir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))

Name: leaderd
Description: Kubernetes Lease leader election: engine, API client, kubeconfig
Version: $(VERSION)
Requires: libcurl jansson yaml-0.1 libssl libcrypto
Cflags: -I$${includedir}/leaderd
Libs: -L$${libdir} -lleaderd
endef
export LEADERD_PC

.PHONY: install uninstall examples FORCE

# Rewritten on every run: it depends on PREFIX, which make cannot see change.
$(B)/leaderd.pc: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' "$$LEADERD_PC" > $@

install: $(B)/libleaderd.a $(B)/leaderd.pc
	$(INSTALL) -d -m 755 $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/leaderd $(DESTDIR)$(PCDIR)
	$(INSTALL) -m 644 $(B)/libleaderd.a $(DESTDIR)$(LIBDIR)/libleaderd.a
	$(INSTALL) -m 644 $(LIB_HDR) $(DESTDIR)$(INCLUDEDIR)/leaderd/
	$(INSTALL) -m 644 $(B)/leaderd.pc $(DESTDIR)$(PCDIR)/leaderd.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libleaderd.a $(DESTDIR)$(PCDIR)/leaderd.pc
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/leaderd/,$(notdir $(LIB_HDR)))
	-rmdir $(DESTDIR)$(INCLUDEDIR)/leaderd 2>/dev/null

# A fresh root each time, so a header removed from lib/ is gone from it too.
$(EXAMPLE_ROOT)/.installed: $(B)/libleaderd.a $(LIB_HDR) mk/install.mk Makefile
	rm -rf $(EXAMPLE_ROOT)
	$(MAKE) --no-print-directory install DESTDIR=$(EXAMPLE_ROOT) PREFIX=/usr
	@touch $@

# No -Ilib and no project flags but the warnings: only what pkg-config gives.
EXAMPLE_PKG = PKG_CONFIG_PATH=$(EXAMPLE_ROOT)/usr/lib/pkgconfig \
              PKG_CONFIG_SYSROOT_DIR=$(EXAMPLE_ROOT) pkg-config
$(B)/examples/%: examples/%.c $(EXAMPLE_ROOT)/.installed
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) -g -O2 -o $@ $< $$($(EXAMPLE_PKG) --cflags --libs leaderd)

examples: $(EXAMPLES)
