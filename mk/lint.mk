# SPDX-License-Identifier: Apache-2.0
# Static analysis: cppcheck and clang-tidy over lib/, cmd/, tests/unit and
# tests/fuzz, shellcheck over .ci/run and tools/ scripts. Configuration: .clang-tidy, tools/clang-tidy-exceptions.txt,
# tools/cppcheck-suppressions.txt, tools/cppcheck.cfg. Fails on any finding;
# the last line is "lint: N findings (...)".

LINT_CFLAGS = $(filter-out -MMD -MP,$(BASE_CFLAGS)) $(D_INC) -I$(API_DIR) $(PKG_CFLAGS)

$(B)/.lint-deps: tools/run-lint.sh
	@bash tools/run-lint.sh deps
	@mkdir -p $(B) && touch $@

# An include cycle between modules, or an include from a lower layer of
# tools/layers.txt to a higher one (tools/include-graph.py), fails lint too,
# and so does a file that refers to something outside the tree or a Markdown
# link that leads nowhere (tools/check-refs.py), docs/http-api.md that
# disagrees with the routes, codes and metrics of the code
# (tools/check-api-docs.py), or a source file without its licence tag
# (tools/spdx.py); every check runs either way.
lint: $(B)/.deps $(B)/.lint-deps
	@graph=0; $(PY) tools/include-graph.py --quiet --layers tools/layers.txt || graph=1; \
	$(PY) tools/check-refs.py . || graph=1; \
	$(PY) tools/check-api-docs.py || graph=1; \
	$(PY) tools/spdx.py || graph=1; \
	bash tools/run-lint.sh -- $(LINT_CFLAGS) && exit $$graph
