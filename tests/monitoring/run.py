#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`make monitoring-test`: checks deploy/monitoring/, the alerts and the Grafana
dashboard that ship with leaderd.

- prometheusrule.yaml is rules.yaml wrapped in a PrometheusRule, byte for byte
  (`tests/monitoring/run.py --write` regenerates it after an edit of rules.yaml);
- `promtool check rules` accepts both, and `promtool test rules` passes
  tests/monitoring/rules_test.yaml;
- every alert has a `severity` label (critical or warning), a summary, a
  description and a `runbook` annotation naming a heading of
  docs/guides/monitoring.md, and the unit tests expect it both firing and not
  firing at some evaluation;
- the dashboard is valid JSON with unique panel ids, a description on every
  panel, each panel named in docs/guides/monitoring.md, and every query valid
  PromQL (promtool checks them as recording rules, Grafana's variables
  replaced);
- every metric the rules and the dashboard read is one docs/http-api.md
  documents (or Prometheus' own `up`). That a running leaderd exports each of
  them, with the labels the queries use, is tests/integration/test_monitoring.py.

promtool is Debian's `prometheus` package (mk/monitoring.mk installs it as
root). Without it the promtool checks are skipped, each with the reason, and
the rest still runs. Ends with `monitoring: N passed, N failed, N skipped`.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
from leaderd_testing import promql  # noqa: E402

MON = os.path.join(REPO, "deploy", "monitoring")
RULES = os.path.join(MON, "rules.yaml")
PROMRULE = os.path.join(MON, "prometheusrule.yaml")
DASHBOARD = os.path.join(MON, "dashboard.json")
UNIT_TESTS = os.path.join(HERE, "rules_test.yaml")
GUIDE = os.path.join(REPO, "docs", "guides", "monitoring.md")
HTTP_API = os.path.join(REPO, "docs", "http-api.md")
# Series Prometheus makes itself for every target.
PROMETHEUS_OWN = {"up"}
SEVERITIES = {"critical", "warning"}

PROMRULE_HEAD = """\
# leaderd's alerts for the Prometheus Operator (kube-prometheus): the groups of
# deploy/monitoring/rules.yaml, generated from it by
# `tests/monitoring/run.py --write` (do not edit the groups here; `make test`
# fails when the two differ). Runbooks: docs/guides/monitoring.md.
# Your Prometheus selects rules by label (its ruleSelector; kube-prometheus-stack:
# `release: <release name>`): add that label in your overlay.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: leaderd
  labels:
    app.kubernetes.io/name: leaderd
    app.kubernetes.io/component: monitoring
spec:
"""

results = {"passed": 0, "failed": 0, "skipped": 0}


def check(ok, what, detail=""):
    results["passed" if ok else "failed"] += 1
    if not ok:
        print("FAIL %s%s" % (what, (":\n" + detail) if detail else ""))
    return ok


def skip(what, why):
    results["skipped"] += 1
    print("skipped: %s: %s" % (what, why))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def promrule_text(rules_text):
    """prometheusrule.yaml made from rules.yaml: the head, then rules.yaml
    from its `groups:` line on, indented under spec (comments before it are
    the plain file's own)."""
    lines = rules_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("groups:"))
    body = ["  " + line if line.strip() else "" for line in lines[start:]]
    return PROMRULE_HEAD + "\n".join(body) + "\n"


def anchors(markdown):
    """GitHub's anchors of the Markdown headings of a text."""
    out = set()
    fence = False
    for line in markdown.splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            fence = not fence
        if fence:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            text = re.sub(r"`", "", m.group(1)).lower()
            text = re.sub(r"[^\w\- ]", "", text)
            out.add(text.replace(" ", "-"))
    return out


def alerts_of(groups):
    return [r for g in groups for r in g.get("rules", []) if "alert" in r]


def run_promtool(args):
    proc = subprocess.run(["promtool"] + args, capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def check_rules_files(rules_text, promtool):
    prom_text = read(PROMRULE)
    check(prom_text == promrule_text(rules_text),
          "prometheusrule.yaml is rules.yaml wrapped (run tests/monitoring/run.py --write)")
    rules = yaml.safe_load(rules_text)
    prom = yaml.safe_load(prom_text)
    check(prom.get("apiVersion") == "monitoring.coreos.com/v1"
          and prom.get("kind") == "PrometheusRule", "prometheusrule.yaml is a PrometheusRule")
    check((prom.get("spec") or {}).get("groups") == rules.get("groups"),
          "the PrometheusRule's groups equal rules.yaml's")
    # The integration test reads the rules without a YAML library.
    plain = [(r.get("alert") or r.get("record"), r["expr"].strip())
             for g in rules.get("groups", []) for r in g.get("rules", [])]
    check(promql.rule_exprs(rules_text) == plain,
          "leaderd_testing.promql.rule_exprs reads rules.yaml as YAML does")
    if not promtool:
        skip("promtool check rules", "promtool not found (apt-get install -y prometheus)")
        skip("promtool check rules (PrometheusRule spec)", "promtool not found")
        skip("promtool test rules", "promtool not found")
        return rules
    ok, out = run_promtool(["check", "rules", RULES])
    check(ok, "promtool check rules deploy/monitoring/rules.yaml", out)
    with tempfile.TemporaryDirectory() as tmp:
        spec = os.path.join(tmp, "spec.yaml")
        with open(spec, "w", encoding="utf-8") as f:
            yaml.safe_dump(prom.get("spec") or {}, f)
        ok, out = run_promtool(["check", "rules", spec])
        check(ok, "promtool check rules on the PrometheusRule's spec", out)
    ok, out = run_promtool(["test", "rules", UNIT_TESTS])
    check(ok, "promtool test rules tests/monitoring/rules_test.yaml", out)
    return rules


def check_alerts(rules, guide):
    alerts = alerts_of(rules.get("groups", []))
    check(len(alerts) >= 9, "rules.yaml has the alerts of the monitoring guide",
          str([a["alert"] for a in alerts]))
    names = [a["alert"] for a in alerts]
    check(len(names) == len(set(names)), "alert names are unique", str(names))
    heads = anchors(guide)
    tests = yaml.safe_load(read(UNIT_TESTS))
    firing, quiet = set(), set()
    for t in tests.get("tests", []):
        for a in t.get("alert_rule_test", []):
            (firing if a.get("exp_alerts") else quiet).add(a["alertname"])
    for a in alerts:
        name = a["alert"]
        labels = a.get("labels") or {}
        ann = a.get("annotations") or {}
        check(labels.get("severity") in SEVERITIES,
              "%s: severity is one of %s" % (name, sorted(SEVERITIES)), str(labels))
        for key in ("summary", "description", "runbook"):
            check(bool(str(ann.get(key, "")).strip()), "%s: has a %s" % (name, key))
        runbook = str(ann.get("runbook", ""))
        path, _, frag = runbook.partition("#")
        check(path == "docs/guides/monitoring.md" and frag in heads,
              "%s: runbook %r is a heading of docs/guides/monitoring.md" % (name, runbook))
        check(frag == name.lower(), "%s: its runbook section is named after it" % name,
              runbook)
        check(name in firing, "%s: a unit test expects it to fire" % name)
        check(name in quiet, "%s: a unit test expects it not to fire" % name)
    for name in firing | quiet:
        check(name in names, "unit tests name only alerts of rules.yaml", name)


def check_dashboard(guide, promtool):
    try:
        dash = json.loads(read(DASHBOARD))
    except ValueError as e:
        check(False, "dashboard.json is JSON", str(e))
        return None
    check(True, "dashboard.json is JSON")
    check(bool(dash.get("uid")) and bool(dash.get("title")), "the dashboard has a uid and title")
    panels = []

    def walk(ps):
        for p in ps:
            panels.append(p)
            walk(p.get("panels", []))
    walk(dash.get("panels", []))
    ids = [p.get("id") for p in panels if p.get("type") != "row"]
    check(len(ids) == len(set(ids)) and None not in ids, "panel ids are unique", str(ids))
    for p in panels:
        if p.get("type") == "row":
            continue
        title = p.get("title", "")
        check(bool(p.get("description", "").strip()), "panel %r has a description" % title)
        check(bool(p.get("targets")), "panel %r has queries" % title)
        check(re.search(r"^#+ .*" + re.escape(title) + r"\s*$", guide, re.M) is not None,
              "panel %r is described in docs/guides/monitoring.md (a heading)" % title)
        for t in p.get("targets", []):
            check((t.get("datasource") or {}).get("uid") == "${datasource}",
                  "panel %r query %s uses the $datasource variable" % (title, t.get("refId")))
    queries = promql.dashboard_queries(dash)
    if not promtool:
        skip("promtool check of the dashboard's queries", "promtool not found")
        return queries
    rules = [{"record": "leaderd:dashboard:%d" % i, "expr": promql.grafana_expand(e)}
             for i, (_, e) in enumerate(queries)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dashboard-rules.yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
        ok, out = run_promtool(["check", "rules", path])
        check(ok, "every dashboard query is valid PromQL (promtool)", out)
    return queries


def check_metrics_documented(rules, queries):
    doc = read(HTTP_API)
    documented = set(re.findall(r"`(leader(?:d|_election)_[a-z_]+)", doc))
    exprs = [("alert " + a["alert"], a["expr"]) for a in alerts_of(rules.get("groups", []))]
    exprs += [("panel " + t, promql.grafana_expand(e)) for t, e in queries or []]
    for where, expr in exprs:
        try:
            selectors, _ = promql.parse(expr)
        except ValueError as e:
            check(False, "%s: the query reads" % where, str(e))
            continue
        for s in selectors:
            base = re.sub(r"_(bucket|sum|count)$", "", s.name or "")
            check(s.name in PROMETHEUS_OWN or s.name in documented or base in documented,
                  "%s: metric %s is documented in docs/http-api.md" % (where, s.name))


def main():
    rules_text = read(RULES)
    if "--write" in sys.argv[1:]:
        with open(PROMRULE, "w", encoding="utf-8") as f:
            f.write(promrule_text(rules_text))
        print("wrote %s" % os.path.relpath(PROMRULE, REPO))
        return 0
    promtool = shutil.which("promtool") is not None
    guide = read(GUIDE) if os.path.isfile(GUIDE) else ""
    check(bool(guide), "docs/guides/monitoring.md exists")
    rules = check_rules_files(rules_text, promtool)
    check_alerts(rules, guide)
    queries = check_dashboard(guide, promtool)
    check_metrics_documented(rules, queries)
    print("monitoring: %d passed, %d failed, %d skipped"
          % (results["passed"], results["failed"], results["skipped"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
