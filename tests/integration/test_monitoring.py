# SPDX-License-Identifier: Apache-2.0
"""The alerts and the dashboard under deploy/monitoring read only what a
running leaderd exports. Four real replicas against the bundled API server:
two on one Lease, each with the API write gate (--api-proxy) and a command
(-- CMD), and two in a shard group (--shards 4). Once one leads the Lease,
the gate has answered a read and refused a write, and the group is balanced,
every replica's /metrics is scraped, and for every selector of every alert
expression (deploy/monitoring/rules.yaml) and every dashboard query
(deploy/monitoring/dashboard.json, its variables included): the metric name
is exported by some replica (Prometheus' own `up` aside), every label it
matches on is one that metric carries or a label Prometheus adds to every
target (job, instance, namespace, pod), every value matched with `=` is one
leaderd exported, and every `=~`/`!~` value is a valid regular expression;
every label grouped or matched by (by, on, ...) is exported or a target
label. PromQL is read by leaderd_testing.promql (tests/support).

Then, where Debian's prometheus package is installed (the binary; no
service is used), a real Prometheus scrapes the four replicas every second
(jobs "op" and "grp") and evaluates rules.yaml: every rule evaluates
without an error (a many-to-many join fails only there), no alert is
pending or firing for the healthy fleet, and every dashboard query answers
without an error and, but for "shards without an owner", with data."""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
from datetime import datetime

from leaderd_testing import promql
from leaderd_testing.apiserver import REPO, ApiServer
from leaderd_testing.cluster import (FAST, KILL_BOUND, SCHED_SLACK, Replica, free_port,
                                     http_get, wait_until)

MON = os.path.join(REPO, "deploy", "monitoring")
# Labels the scrape adds to every series (the Prometheus Operator and
# Kubernetes service discovery add namespace and pod).
TARGET_LABELS = {"job", "instance", "namespace", "pod"}
PROMETHEUS_OWN = {"up"}
NS = "default"
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# Dashboard queries (by legend) that a healthy fleet answers with no series.
EMPTY_WHEN_HEALTHY = {"without owner {{namespace}}"}
# The command run while leading: it waits to be stopped.
CHILD = "import signal, time; signal.signal(signal.SIGTERM, lambda *a: exit(0)); time.sleep(600)"


def exposition(text):
    """{metric: {label: set of values}} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise AssertionError("unreadable /metrics line %r" % line)
        labels = out.setdefault(m.group(1), {})
        for k, v in LABEL.findall(m.group(2) or ""):
            labels.setdefault(k, set()).add(v)
    return out


def merge(into, more):
    for name, labels in more.items():
        mine = into.setdefault(name, {})
        for k, vs in labels.items():
            mine.setdefault(k, set()).update(vs)


def queries():
    """[(where, expr)] of every alert and every dashboard query."""
    with open(os.path.join(MON, "rules.yaml"), encoding="utf-8") as f:
        out = [("alert " + name, expr) for name, expr in promql.rule_exprs(f.read())]
    with open(os.path.join(MON, "dashboard.json"), encoding="utf-8") as f:
        dash = json.load(f)
    out += [("dashboard " + t, promql.grafana_expand(e)) for t, e in promql.dashboard_queries(dash)]
    return out


class MonitoringQueriesMatchMetrics(unittest.TestCase):
    clients = ["a", "b", "s1", "s2"]

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="leaderd-monitoring-")
        cls.api = ApiServer(os.path.join(cls.dir, "api"), cls.clients)
        cls.replicas = []
        cls.proxy_port = {}
        try:
            cls.api.start()
            for c in ("a", "b"):
                cls.proxy_port[c] = free_port()
                args = ["--api-proxy", "127.0.0.1:%d" % cls.proxy_port[c],
                        "--", sys.executable, "-c", CHILD]
                cls.replicas.append(Replica(cls.api, c, cls.dir, lease="op",
                                            extra_args=args).start())
            for c in ("s1", "s2"):
                cls.replicas.append(Replica(cls.api, c, cls.dir, lease="grp",
                                            extra_args=["--shards", "4"]).start())
            cls.scraped = cls.prepare()
        except BaseException:
            cls.stop()
            raise

    @classmethod
    def prepare(cls):
        single, shards = cls.replicas[:2], cls.replicas[2:]
        wait_until(lambda: sum(r.is_leader() for r in single) == 1, KILL_BOUND + SCHED_SLACK,
                   what="one replica to lead the Lease op")
        leader = next(r for r in single if r.is_leader())
        standby = next(r for r in single if r is not leader)
        wait_until(lambda: (standby.leader()[1] or {}).get("leader") == leader.identity,
                   FAST["lease_duration"], what="the standby to see the leader")
        # A read through the leader's gate, a refused write through the standby's.
        status, _ = http_get("http://127.0.0.1:%d/api/v1/namespaces/%s/configmaps"
                             % (cls.proxy_port[leader.client], NS), timeout=5.0)
        assert status == 200, status
        conn = http.client.HTTPConnection("127.0.0.1", cls.proxy_port[standby.client],
                                          timeout=5.0)
        conn.request("POST", "/api/v1/namespaces/%s/configmaps" % NS,
                     body=json.dumps({"metadata": {"name": "x"}}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        assert resp.status == 503, resp.status

        def balanced():
            owned = []
            for r in shards:
                status, body = r.get("/shards")
                if status != 200:
                    return False
                owned.append(len(json.loads(body)["owned"]))
            return owned == [2, 2]
        wait_until(balanced, KILL_BOUND + 4 * FAST["retry_period"] + SCHED_SLACK,
                   what="the shard group to balance 2 and 2")
        scraped = {}
        for r in cls.replicas:
            status, body = r.get("/metrics", timeout=5.0)
            assert status == 200, (r.client, status)
            scraped[r.client] = exposition(body.decode())
        return scraped

    @classmethod
    def tearDownClass(cls):
        cls.stop()

    @classmethod
    def stop(cls):
        for r in cls.replicas:
            r.stop()
        cls.api.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def exported(self):
        out = {}
        for m in self.scraped.values():
            merge(out, m)
        return out

    def test_modes_export_what_the_queries_rely_on(self):
        """Each mode exports its own series: the single Lease its term and
        leadership, the gate and the command; the group its shard gauges."""
        for c in ("a", "b"):
            m = self.scraped[c]
            for name in ("leader_election_master_status", "leaderd_is_leader", "leaderd_term",
                         "leaderd_proxy_requests_total", "leaderd_proxy_writes_refused_total",
                         "leaderd_proxy_writes_aborted_total", "leaderd_child_starts_total",
                         "leaderd_child_exits_total", "leaderd_api_requests_total",
                         "leaderd_build_info", "leaderd_observed"):
                self.assertIn(name, m, "replica %s (single Lease, gate, command)" % c)
            self.assertEqual(m["leader_election_master_status"]["name"], {"op"})
            self.assertNotIn("leaderd_shards_owned", m)
        for c in ("s1", "s2"):
            m = self.scraped[c]
            for name in ("leader_election_master_status", "leaderd_shards_owned",
                         "leaderd_shard_members", "leaderd_leader_transitions_total"):
                self.assertIn(name, m, "replica %s (shard group)" % c)
            self.assertEqual(m["leader_election_master_status"]["name"],
                             {"grp-0", "grp-1", "grp-2", "grp-3"})
            self.assertNotIn("leaderd_is_leader", m)

    def test_every_query_reads_exported_metrics_and_labels(self):
        exported = self.exported()
        all_labels = set(TARGET_LABELS)
        for labels in exported.values():
            all_labels |= set(labels)
        problems = []
        checked = 0
        for where, expr in queries():
            selectors, grouping = promql.parse(expr)
            for s in selectors:
                checked += 1
                if s.name in PROMETHEUS_OWN:
                    have = {}
                elif s.name not in exported:
                    problems.append("%s: metric %s is not exported" % (where, s.name))
                    continue
                else:
                    have = exported[s.name]
                for label, op, value in s.matchers:
                    if label in TARGET_LABELS:
                        continue
                    if label not in have:
                        problems.append("%s: %s has no label %s" % (where, s.name, label))
                    elif op == "=" and value not in have[label]:
                        problems.append("%s: %s{%s=%r}: leaderd exported only %s"
                                        % (where, s.name, label, value, sorted(have[label])))
                    elif op in ("=~", "!~"):
                        try:
                            re.compile(value)
                        except re.error as e:
                            problems.append("%s: bad regex %r: %s" % (where, value, e))
            for label in grouping - all_labels:
                problems.append("%s: groups or matches by %s, which no series carries"
                                % (where, label))
        self.assertGreater(checked, 30)
        self.assertEqual(problems, [], "\n".join(problems))

    def test_prometheus_evaluates_rules_and_dashboard(self):
        """A real Prometheus over the fleet: every rule healthy, no alert,
        every dashboard query answers, with data."""
        binary = shutil.which("prometheus")
        if not binary:
            self.skipTest("prometheus not installed (apt-get install -y prometheus)")
        prom = Prometheus(binary, self.dir, {"op": self.replicas[:2], "grp": self.replicas[2:]})
        try:
            prom.start()
            wait_until(lambda: prom.targets_up() == 4, 15, interval=0.2,
                       what="Prometheus to scrape the 4 replicas")
            # Rates need two samples: every group evaluated 2.5 s after that.
            since = time.time() + 2.5
            wait_until(lambda: prom.evaluated_since(since), 15, interval=0.2,
                       what="every rule group to be evaluated")
            problems = []
            for group in prom.api("rules")["groups"]:
                for rule in group["rules"]:
                    if rule.get("health") != "ok":
                        problems.append("rule %s: %s %s" % (rule["name"], rule.get("health"),
                                                             rule.get("lastError")))
            problems += ["alert %s is %s: %s" % (a["labels"]["alertname"], a["state"], a["labels"])
                         for a in prom.api("alerts")["alerts"]]
            with open(os.path.join(MON, "dashboard.json"), encoding="utf-8") as f:
                dash = json.load(f)
            for p in walk_panels(dash["panels"]):
                for t in p.get("targets", []):
                    expr = promql.grafana_expand(t["expr"])
                    try:
                        data = prom.api("query", query=expr)
                    except AssertionError as e:
                        problems.append("panel %r %s: %s" % (p["title"], t["refId"], e))
                        continue
                    if not data["result"] and t.get("legendFormat") not in EMPTY_WHEN_HEALTHY:
                        problems.append("panel %r %s: no data for %s"
                                        % (p["title"], t["refId"], expr))
            self.assertEqual(problems, [], "\n".join(problems))
        finally:
            prom.stop()


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def rfc3339(text):
    """Unix seconds of one of Prometheus' RFC 3339 times, 0 if unreadable."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text or "")
    if not m:
        return 0.0
    frac = ((m.group(2) or ".0") + "000000")[:7]
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + frac + zone).timestamp()


class Prometheus:
    """A Prometheus server on loopback that scrapes jobs {job: [Replica]}
    and evaluates deploy/monitoring/rules.yaml every second; its data in
    workdir; started and stopped by PID."""

    def __init__(self, binary, workdir, jobs):
        self.binary = binary
        self.dir = os.path.join(workdir, "prometheus")
        self.jobs = jobs
        self.port = None
        self.proc = None
        self.log = None

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "900ms"},
            "rule_files": [os.path.join(MON, "rules.yaml")],
            "scrape_configs": [
                {"job_name": job,
                 "static_configs": [{"targets": ["127.0.0.1:%d" % r.port for r in replicas]}]}
                for job, replicas in self.jobs.items()],
        }
        path = os.path.join(self.dir, "prometheus.yml")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f)  # JSON is YAML
        self.port = free_port()
        self.log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--config.file", path,
             "--storage.tsdb.path", os.path.join(self.dir, "data"),
             "--web.listen-address", "127.0.0.1:%d" % self.port],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        wait_until(lambda: http_get("http://127.0.0.1:%d/-/ready" % self.port)[0] == 200, 20,
                   interval=0.1, what="Prometheus to be ready")

    def api(self, path, **params):
        url = "http://127.0.0.1:%d/api/v1/%s" % (self.port, path)
        if params:
            url += "?" + urllib.parse.urlencode(params)
        status, body = http_get(url, timeout=5.0)
        doc = json.loads(body) if body else {}
        if status != 200 or doc.get("status") != "success":
            raise AssertionError("%s: %s %s" % (path, status, doc.get("error", body)))
        return doc["data"]

    def targets_up(self):
        return sum(1 for t in self.api("targets")["activeTargets"] if t["health"] == "up")

    def evaluated_since(self, since):
        groups = self.api("rules")["groups"]
        return bool(groups) and all(rfc3339(g.get("lastEvaluation")) > since for g in groups)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.log:
            self.log.close()
            self.log = None


if __name__ == "__main__":
    unittest.main()
