# SPDX-License-Identifier: Apache-2.0
# leaderd — plain GNU make. `make` builds, `make test` runs every test,
# `make demo` shows a failover on loopback (`make demo-child`: with a command
# run only on the leader). See README.md.

VERSION := 0.1.0
B       := build
CC      ?= cc
PKGS    := libcurl libmicrohttpd jansson yaml-0.1 openssl
PY      ?= python3

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wno-format-nonliteral -Wpointer-arith -Wvla
HARDEN  := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
# Source folders, one per layer, lowest first (tools/layers.txt). Every
# project header is included by its bare name ("state.h"); each program's
# objects see only the folders of its own layers (INC below): the library
# cannot include the daemon's headers, the test API server neither the
# daemon's nor the other way round. tools/include-graph.py keeps the layers
# within a program apart.
LIB_DIRS := lib/base lib/api lib/elect
D_DIRS   := cmd/leaderd/core cmd/leaderd/hooks cmd/leaderd/http cmd/leaderd/proxy cmd/leaderd/shell
API_DIR  := tests/apiserver
LIB_INC  := -Iinclude/leaderd $(addprefix -I,$(LIB_DIRS))
D_INC    := $(LIB_INC) $(addprefix -I,$(D_DIRS))
API_INC  := $(LIB_INC) -I$(API_DIR)
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -g -MMD -MP -DLEADERD_VERSION=\"$(VERSION)\"
OPT     ?= -O2 $(HARDEN)
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread
# leaderd-apiserver reads client certificates from libmicrohttpd's GnuTLS session.
API_LIBS   = $(shell pkg-config --libs gnutls 2>/dev/null)
CFLAGS  ?=
LDFLAGS ?=
ALL_CFLAGS = $(BASE_CFLAGS) $(OPT) $(PKG_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = -pie -Wl,-z,relro,-z,now $(LDFLAGS)

# Sanitizer flavour of the unit tests: `make test` builds both.
SAN_B      := $(B)/san
SAN_CFLAGS := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all

LIB_SRC  := $(wildcard $(addsuffix /*.c,$(LIB_DIRS)))
D_SRC    := $(filter-out cmd/leaderd/shell/main.c,$(wildcard $(addsuffix /*.c,$(D_DIRS))))
API_SRC  := $(wildcard $(API_DIR)/*.c)
SUP_SRC  := $(wildcard tests/unit/support/*.c)
UNIT_SRC := $(wildcard tests/unit/check_*.c)
UNITS    := $(patsubst tests/unit/%.c,%,$(UNIT_SRC))

obj = $(patsubst %.c,$(1)/obj/%.o,$(2))
# Archives are rebuilt whole: `ar r` alone would keep the object of a
# source file that was since removed or renamed. $(AR): a cross build's own.
archive = rm -f $@ && $(AR) rcs $@ $^

.PHONY: all deps test unit unit-san sim-deep integration demo demo-child demo-shards demo-cleaner bench bench-shards clean format lint
all: $(B)/.deps $(B)/leaderd $(B)/leaderd-apiserver

$(B)/.deps: tools/deps.sh
	@bash tools/deps.sh build
	@mkdir -p $(B) && touch $@

deps: $(B)/.deps

# ---- objects (normal and sanitizer builds share the rules) ----
# The include path by layer: the daemon's (and its tests') by default.
INC = $(D_INC)
$(B)/obj/lib/%.o $(SAN_B)/obj/lib/%.o: INC = $(LIB_INC)
$(B)/obj/$(API_DIR)/%.o $(SAN_B)/obj/$(API_DIR)/%.o: INC = $(API_INC)

$(B)/obj/%.o: %.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC) -c $< -o $@

$(SAN_B)/obj/%.o: %.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(INC) $(SAN_CFLAGS) $(PKG_CFLAGS) $(CFLAGS) -c $< -o $@

$(B)/libleaderd.a: $(call obj,$(B),$(LIB_SRC))
	$(archive)
$(SAN_B)/libleaderd.a: $(call obj,$(SAN_B),$(LIB_SRC))
	@mkdir -p $(dir $@)
	$(archive)

$(B)/libleaderd-daemon.a: $(call obj,$(B),$(D_SRC))
	$(archive)
$(SAN_B)/libleaderd-daemon.a: $(call obj,$(SAN_B),$(D_SRC))
	@mkdir -p $(dir $@)
	$(archive)

$(B)/leaderd: $(call obj,$(B),cmd/leaderd/shell/main.c) $(B)/libleaderd-daemon.a $(B)/libleaderd.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/leaderd-apiserver: $(call obj,$(B),$(API_SRC)) $(B)/libleaderd.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(API_LIBS)

# ---- unit tests: one Check binary per tests/unit/check_*.c ----
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)
$(B)/tests/%: $(call obj,$(B),tests/unit/%.c) $(call obj,$(B),$(SUP_SRC)) \
              $(B)/libleaderd-daemon.a $(B)/libleaderd.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(PKG_LIBS)
$(SAN_B)/tests/%: $(call obj,$(SAN_B),tests/unit/%.c) $(call obj,$(SAN_B),$(SUP_SRC)) \
              $(SAN_B)/libleaderd-daemon.a $(SAN_B)/libleaderd.a
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=address,undefined -o $@ $^ $(CHECK_LIBS) $(PKG_LIBS)

unit: $(addprefix $(B)/tests/,$(UNITS))
	@bash tools/run-unit.sh $(B)/tests $(UNITS)
unit-san: $(addprefix $(SAN_B)/tests/,$(UNITS))
	@bash tools/run-unit.sh $(SAN_B)/tests $(UNITS)

# The shard-protocol simulation (tests/unit/check_shard_protocol.c) over
# many more seeds than `make test` runs; prints seeds/s and checks. Without
# a fork Check sets no timeout, which a long run needs.
SIM_DEEP_SEEDS ?= 400
sim-deep: $(B)/tests/check_shard_protocol
	LD_SIM_SEEDS=$(SIM_DEEP_SEEDS) CK_FORK=no $(B)/tests/check_shard_protocol

integration: all examples
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tests/integration/run.py

# Everything, with one summary line at the end.
test: all examples $(addprefix $(B)/tests/,$(UNITS)) $(addprefix $(SAN_B)/tests/,$(UNITS))
	@bash tools/run-tests.sh $(B) $(SAN_B) "$(UNITS)"

demo: all
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/demo.py

# The same three replicas running a command only while leading (leaderd -- CMD).
demo-child: all
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/demo.py --child

# Three replicas sharing 12 shards (--shards): the owner table, then a SIGKILL,
# a join and a SIGTERM, each with the moves and the time to balance again.
demo-shards: all
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/demo_shards.py

# The sharded clean-up operator of examples/cleaner end to end: three replicas
# (leaderd --shards --api-proxy + cleaner.py), ConfigMaps created with mixed
# expiries, a crash, a join, a rolling update and a graceful leave; judged from
# the API server's own log (deleted exactly once, 0 deletes by a non-owner, 0
# shards worked on by two apps at once). Judged events:
# build/demo-cleaner-events.jsonl.
demo-cleaner: all
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/demo_cleaner.py

bench: all bench-footprint
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/bench.py
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/bench_proxy.py
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/bench_shards.py

# The shard group figures alone (BENCH_SHARD_COUNTS, BENCH_SHARD_SECONDS,
# BENCH_SHARD_TIMINGS=fast, BENCH_ROLL_READY, BENCH_ROLL_PAUSE; the image's binary
# with BENCH_SHARD_BINARY=musl after `make static LIBC=musl`: tools/bench_shards.py).
bench-shards: all
	@LEADERD_BUILD=$(abspath $(B)) $(PY) tools/bench_shards.py

format:
	clang-format -i $(wildcard include/leaderd/*.h lib/*/*.[ch] cmd/*/*.[ch] \
	    cmd/leaderd/*/*.[ch] examples/*.c tests/unit/*.c tests/unit/support/*.[ch])

clean:
	rm -rf $(B)

.SECONDARY:
-include $(shell find $(B)/obj $(SAN_B)/obj $(B)/fuzz/obj -name '*.d' -type f 2>/dev/null)

# Further targets (fuzz, lint, chaos, image, ...) live in mk/*.mk.
-include $(wildcard mk/*.mk)
