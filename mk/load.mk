# SPDX-License-Identifier: Apache-2.0
# `make test` under CPU load: tools/test-under-load.sh starts two busy loops,
# runs `make test`, stops them and keeps make test's status.
#   make test-under-load                        one run
#   make test-under-load TEST_UNDER_LOAD_RUNS=5 five runs, stop at the first failure

TEST_UNDER_LOAD_RUNS ?= 1

.PHONY: test-under-load

test-under-load: all
	@TEST_UNDER_LOAD_RUNS=$(TEST_UNDER_LOAD_RUNS) MAKE="$(MAKE)" bash tools/test-under-load.sh
