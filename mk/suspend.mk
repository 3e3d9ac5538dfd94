# SPDX-License-Identifier: Apache-2.0
# The suspend test's LD_PRELOAD shim (tests/integration/suspend_shim.c):
# test-only, built beside the binaries the integration tests run.
SUSPEND_SHIM := $(B)/tests/suspend_shim.so

$(SUSPEND_SHIM): tests/integration/suspend_shim.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -fPIC -shared -o $@ $< -ldl

integration test: $(SUSPEND_SHIM)
