# SPDX-License-Identifier: Apache-2.0
# The man page leaderd(8), docs/leaderd.8: written by tools/gen-man.c from
# the template docs/leaderd.8.in and the table of flags in
# cmd/leaderd/shell/config.c (the one --help prints), and committed, so that
# `man ./docs/leaderd.8` works in a fresh checkout.
#
#   make man          regenerates docs/leaderd.8 (also `make docs/leaderd.8`)
#                     and its Markdown rendering docs/options.md
#                     (tools/man2md.py); commit both with the change that
#                     made them
#   make man-check    fails when docs/leaderd.8 is not what `make man` would
#                     write, or when `mandoc -T lint` finds a fault in it;
#                     `make lint` runs it

MAN_PAGE := docs/leaderd.8
MAN_IN   := docs/leaderd.8.in
MAN_GEN  := $(B)/tools/gen-man
MAN_MD   := docs/options.md

.PHONY: man man-check

$(MAN_GEN): $(call obj,$(B),tools/gen-man.c) $(B)/libleaderd-daemon.a $(B)/libleaderd.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# Written whole or not at all: a failing generator leaves the page as it was.
$(MAN_PAGE): $(MAN_IN) $(MAN_GEN)
	$(MAN_GEN) $(MAN_IN) > $(B)/leaderd.8.new
	mv $(B)/leaderd.8.new $@

$(MAN_MD): $(MAN_PAGE) tools/man2md.py
	$(PY) tools/man2md.py $(MAN_PAGE) > $(B)/options.md.new
	mv $(B)/options.md.new $@

man: $(MAN_PAGE) $(MAN_MD)

$(B)/.man-deps: tools/deps.sh
	@bash tools/deps.sh --as man-check mandoc
	@mkdir -p $(B) && touch $@

man-check: $(MAN_GEN) $(B)/.man-deps
	@$(MAN_GEN) $(MAN_IN) > $(B)/leaderd.8.check
	@if ! cmp -s $(MAN_PAGE) $(B)/leaderd.8.check; then \
	    diff -u $(MAN_PAGE) $(B)/leaderd.8.check | head -n 60 >&2; \
	    echo "man-check: $(MAN_PAGE) is out of date with $(MAN_IN) and" \
	        "cmd/leaderd/shell/config.c (- committed, + generated): run 'make man'" \
	        "and commit it" >&2; \
	    exit 1; \
	fi
	@$(PY) tools/man2md.py $(MAN_PAGE) > $(B)/options.md.check
	@if ! cmp -s $(MAN_MD) $(B)/options.md.check; then \
	    diff -u $(MAN_MD) $(B)/options.md.check | head -n 60 >&2; \
	    echo "man-check: $(MAN_MD) is out of date with $(MAN_PAGE): run 'make man'" \
	        "and commit it" >&2; \
	    exit 1; \
	fi
	@mandoc -T lint -W warning $(MAN_PAGE) >&2 || \
	    { echo "man-check: mandoc -T lint found the faults above in $(MAN_PAGE)" >&2; \
	      exit 1; }
	@echo "man-check: ok ($(MAN_PAGE) matches $(MAN_IN) and the flags, $(MAN_MD) matches" \
	    "$(MAN_PAGE); mandoc -T lint clean)"

lint: man-check
