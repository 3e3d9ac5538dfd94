# SPDX-License-Identifier: Apache-2.0
# deploy/monitoring: `make monitoring-test` checks the alerts (promtool check
# rules, promtool test rules with tests/monitoring/rules_test.yaml), that the
# PrometheusRule carries exactly the rules file's groups, and the Grafana
# dashboard (tests/monitoring/run.py). promtool is Debian's prometheus package,
# installed here when missing (as root; otherwise the line to run is printed
# and the promtool checks are skipped with that reason). That a running
# leaderd exports every metric and label the rules and the dashboard read is
# the integration test tests/integration/test_monitoring.py.
.PHONY: monitoring-test
monitoring-test:
	@command -v promtool >/dev/null || \
	    bash tools/deps.sh --as monitoring --no-install-recommends prometheus || true
	@bash tools/deps.sh --as monitoring python3-yaml
	@$(PY) tests/monitoring/run.py
