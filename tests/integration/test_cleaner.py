# SPDX-License-Identifier: Apache-2.0
"""examples/cleaner end to end (the shortened `make demo-cleaner`): three
replicas of leaderd (--shards, --api-proxy) + examples/cleaner/cleaner.py on
loopback, ConfigMaps created continuously with mixed expiries, a crash, a
join, a rolling update of every replica and a graceful leave; the API server
holds every delete 200 ms and applies it even when its client is gone, and
the crash and the leave come while one is in flight.

Judged from the bundled API server's own logs, not from the apps' claims:
every object that expired is deleted exactly once and none before its expiry;
every delete was made by the replica whose name the shard's Lease carried at
that moment (clock_us) while its member Lease still named it; and no two apps
worked on one shard at once (the apps' start/stop lines against the same
CLOCK_MONOTONIC, a crashed app's work ending at its SIGKILL)."""
import json
import os
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

import demo_cleaner  # noqa: E402


class CleanerEndToEnd(unittest.TestCase):
    def run_scenario(self, named):
        with tempfile.TemporaryDirectory(prefix="leaderd-it-cleaner-") as d:
            events = os.path.join(d, "judged.jsonl")
            f = demo_cleaner.run(short=True, named=named, events=events)
            with open(events) as fh:
                kinds = [json.loads(line)["kind"] for line in fh]
        self.assertGreater(f["created"], 50, f)
        self.assertGreater(f["expired"], 20, f)
        self.assertEqual(f["deleted_exactly_once"], f["expired"], f)
        for k in demo_cleaner.ZEROS:
            self.assertEqual(f[k], 0, "%s: %s" % (k, f))
        # A delete was in flight at the crash and at the graceful exit, and
        # the API server applied it after the SIGKILL / the SIGTERM.
        self.assertGreaterEqual(f["deletes_landed_after_crash"], 1, f)
        self.assertGreaterEqual(f["deletes_landed_after_sigterm"], 1, f)
        # Every figure's events were written for others to check.
        self.assertEqual(kinds.count("object"), f["created"])
        self.assertIn("lease", kinds)
        self.assertIn("work", kinds)
        self.assertEqual(kinds[-1], "figures")
        return f

    def test_numbered_shards_by_uid(self):
        self.run_scenario(named=False)

    def test_named_shards_by_annotation(self):
        self.run_scenario(named=True)


class FakeApi:
    """The two logs judge() reads, made up."""

    def __init__(self, leases, configmaps):
        self.leases, self.configmaps = leases, configmaps

    def write_log(self):
        return self.leases

    def configmap_log(self):
        return self.configmaps


def lease(name, holder, t, verb="update"):
    return {"name": "cleaner-" + name, "holderIdentity": holder, "clock_us": t, "verb": verb}


def delete(name, client, t):
    return {"name": name, "client": client, "clock_us": t, "verb": "delete"}


class JudgeCatchesEveryFault(unittest.TestCase):
    """judge() itself, on made-up logs with one fault of each kind: the
    zeros of the end-to-end test mean something only if each would count."""

    def test_each_fault_counts(self):
        leases = [lease("member-pod-a", "pod-a", 90, "create"),
                  lease("member-pod-b", "pod-b", 95, "create"),
                  lease("0", "pod-a", 100), lease("1", "pod-a", 100),
                  lease("0", "", 200),          # pod-a gives shard 0 back
                  lease("0", "pod-b", 300),     # pod-b takes it
                  lease("member-pod-a", "", 400)]  # pod-a evicted; shard 1 still names it
        deletes = [delete("o1", "pod-a", 150),   # the owner: fine
                   delete("o2", "pod-a", 250),   # after its release: a non-owner
                   delete("o2", "pod-b", 350),   # the owner, but a second delete
                   delete("o3", "pod-b", 360),   # before o3 expired
                   delete("o5", "pod-a", 450)]   # shard names it, member Lease does not
        obj = lambda shard, exp: {"uid": "u", "shard": shard, "expires": "",  # noqa: E731
                                  "expires_us": exp, "due_us": exp}
        creator = types.SimpleNamespace(objects={
            "o1": obj("0", 50), "o2": obj("0", 50), "o3": obj("0", 10000),
            "o4": obj("0", 60),  # expired, never deleted
            "o5": obj("1", 50)})
        with tempfile.TemporaryDirectory() as d:
            pods = []
            for name, lines in (("pod-a", [("start", 100), ("stop", 210)]),
                                ("pod-b", [("start", 205)])):  # starts before pod-a stopped
                path = os.path.join(d, name + ".jsonl")
                with open(path, "w") as f:
                    for event, t in lines:
                        f.write(json.dumps({"event": event, "app": name, "shard": "0",
                                            "term": 1, "mono_us": t}) + "\n")
                pods.append(types.SimpleNamespace(name=name, events_path=path,
                                                  app_end_us=None, crashed_us=None,
                                                  sigterm_us=None))
            f, _ = demo_cleaner.judge(FakeApi(leases, deletes), creator, pods, 5000,
                                      os.path.join(d, "judged.jsonl"))
        self.assertEqual(f["non_owner_deletes"], 2, f)
        self.assertEqual(f["deleted_more_than_once"], 1, f)
        self.assertEqual(f["deleted_before_expiry"], 1, f)
        self.assertEqual(f["expired_not_deleted"], 1, f)
        self.assertEqual(f["deleted_exactly_once"], 2, f)  # o1 and o5
        self.assertEqual(f["two_apps_on_one_shard"], 1, f)


if __name__ == "__main__":
    unittest.main()
