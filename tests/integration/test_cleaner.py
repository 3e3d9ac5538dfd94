"""examples/cleaner end to end (the shortened `make demo-cleaner`): three
replicas of leaderd (--shards, --api-proxy) + examples/cleaner/cleaner.py on
loopback, ConfigMaps created continuously with mixed expiries, a crash, a
join, a rolling update of every replica and a graceful leave.

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
        # Every figure's events were written for others to check.
        self.assertEqual(kinds.count("object"), f["created"])
        self.assertIn("lease", kinds)
        self.assertIn("work", kinds)
        self.assertEqual(kinds[-1], "figures")
        return f

    def test_numbered_shards_by_uid(self):
        self.run_scenario(named=False)


if __name__ == "__main__":
    unittest.main()
