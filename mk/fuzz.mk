# SPDX-License-Identifier: Apache-2.0
# libFuzzer harnesses (tests/fuzz/fuzz_*.c), built with clang. The library
# and daemon sources are compiled with fuzzer coverage and ASan+UBSan; each
# harness is linked with -fsanitize=fuzzer.
#   make fuzz          each target FUZZ_SECONDS (default 300), executions per target
#   make fuzz-smoke    replay corpus + regressions, then FUZZ_SMOKE_SECONDS each
#                      (default 17: 9 targets take about 3.5 minutes with replay);
#                      last line "fuzz: N passed, N failed, 0 skipped"
#   make fuzz-deep     each target FUZZ_RUNS executions (default 10^7), then
#                      merges what adds coverage into tests/fuzz/corpus/<target>/;
#                      prints executions, exec/s, corpus before/after, cov/ft;
#                      FUZZ_DEEP_SECONDS=N also stops each target after N s
# Seeds: tests/fuzz/corpus/<target>/, crashes kept as tests/fuzz/regressions/<target>/.

FUZZ_CC            ?= clang
FUZZ_SECONDS       ?= 300
FUZZ_SMOKE_SECONDS ?= 17
FUZZ_RUNS          ?= 10000000
FUZZ_DEEP_SECONDS  ?= 0
FUZZ_B             := $(B)/fuzz
FUZZ_TARGETS       := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS          := $(addprefix $(FUZZ_B)/fuzz_,$(FUZZ_TARGETS))
FUZZ_SAN           := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS         = $(BASE_CFLAGS) $(D_INC) -O1 -fno-omit-frame-pointer \
                      -fsanitize=fuzzer-no-link $(FUZZ_SAN) $(PKG_CFLAGS)

.PHONY: fuzz fuzz-smoke fuzz-deep fuzz-build

$(FUZZ_B)/.deps: tools/run-fuzz.sh
	@bash tools/run-fuzz.sh deps
	@mkdir -p $(FUZZ_B) && touch $@

$(FUZZ_B)/obj/%.o: %.c | $(B)/.deps $(FUZZ_B)/.deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_B)/libleaderd-fuzz.a: $(call obj,$(FUZZ_B),$(LIB_SRC) $(D_SRC))
	$(archive)

$(FUZZ_B)/fuzz_%: $(FUZZ_B)/obj/tests/fuzz/fuzz_%.o $(FUZZ_B)/libleaderd-fuzz.a
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $^ $(PKG_LIBS)

fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	@bash tools/run-fuzz.sh run $(FUZZ_SECONDS) $(FUZZ_B) $(FUZZ_TARGETS)

fuzz-smoke: $(FUZZ_BINS)
	@bash tools/run-fuzz.sh run $(FUZZ_SMOKE_SECONDS) $(FUZZ_B) $(FUZZ_TARGETS)

fuzz-deep: $(FUZZ_BINS)
	@FUZZ_DEEP_SECONDS=$(FUZZ_DEEP_SECONDS) bash tools/run-fuzz.sh deep $(FUZZ_RUNS) $(FUZZ_B) $(FUZZ_TARGETS)
