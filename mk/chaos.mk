# SPDX-License-Identifier: Apache-2.0
# Chaos suite, sanitizer builds of the binaries, soak. See tests/chaos/run.py.
#
#   make chaos             every scenario CHAOS_REPEAT (20) times, 3 and 5 replicas
#   make chaos-short       every scenario not known to fail, once, 3 replicas
#   make san-daemon        build/san/leaderd and build/san/leaderd-apiserver (ASan+UBSan)
#   make integration-san   integration tests and the short chaos against build/san
#   make soak              SOAK_SECONDS (3600) of faults; RSS and fds every minute

CHAOS_REPEAT ?= 20
CHAOS_JOBS   ?= 2
SOAK_SECONDS ?= 3600

.PHONY: chaos chaos-short san-daemon integration-san chaos-san soak

chaos: all
	@CHAOS_REPEAT=$(CHAOS_REPEAT) CHAOS_JOBS=$(CHAOS_JOBS) \
	    LEADERD_BUILD=$(abspath $(B)) $(PY) tests/chaos/run.py

chaos-short: all
	@CHAOS_JOBS=$(CHAOS_JOBS) LEADERD_BUILD=$(abspath $(B)) $(PY) tests/chaos/run.py --short

$(SAN_B)/leaderd: $(call obj,$(SAN_B),cmd/leaderd/shell/main.c) $(SAN_B)/libleaderd-daemon.a \
                  $(SAN_B)/libleaderd.a
	$(CC) -fsanitize=address,undefined -o $@ $^ $(PKG_LIBS)

$(SAN_B)/leaderd-apiserver: $(call obj,$(SAN_B),$(API_SRC)) $(SAN_B)/libleaderd.a
	$(CC) -fsanitize=address,undefined -o $@ $^ $(PKG_LIBS) $(API_LIBS)

san-daemon: $(B)/.deps $(SAN_B)/leaderd $(SAN_B)/leaderd-apiserver

# Any sanitizer report is fatal and lands in a file the runner checks.
integration-san: san-daemon examples
	@LEADERD_BUILD=$(abspath $(SAN_B)) CHAOS_JOBS=$(CHAOS_JOBS) \
	    $(PY) tests/chaos/sanitized.py --integration --chaos

chaos-san: san-daemon
	@LEADERD_BUILD=$(abspath $(SAN_B)) CHAOS_JOBS=$(CHAOS_JOBS) \
	    $(PY) tests/chaos/sanitized.py --chaos

soak: all
	@SOAK_SECONDS=$(SOAK_SECONDS) LEADERD_BUILD=$(abspath $(B)) $(PY) tests/chaos/soak.py
