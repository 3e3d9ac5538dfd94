# SPDX-License-Identifier: Apache-2.0
"""Memory given back after a peak: one megabyte-sized Lease (a large
annotation, as kube-apiserver accepts) passes through the leader's renewals
(decode, re-encode, PUT, response) and the standby's watch; once the Lease is
small again, both replicas' RssAnon returns near where it stood before."""
import json
import re
import time
import unittest

from leaderd_testing.cluster import (FAST, KILL_BOUND, SCHED_SLACK, FreshReplicas, proc_status,
                                     wait_until)

NS = "default"
MIB = 1 << 20
RETRY = FAST["retry_period"]
# Steady state is reached after start-up's first GET, watch and handshakes;
# its RssAnon is the highest of a few samples across renewals.
BASELINE_SAMPLES = 4
# What "near" means: allocator slack and a few cached pages, not the peak
# (which is several times the steady figure).
RATIO = 1.3
SLACK_KB = 256


class PeaksGivenBack(FreshReplicas, unittest.TestCase):
    clients = ["f1", "f2"]
    dir_prefix = "leaderd-footprint-"

    def metric(self, replica, name):
        status, body = replica.get("/metrics")
        if status != 200:
            return None
        m = re.search(rf"^{re.escape(name)} (\S+)$", body.decode(), re.M)
        return float(m.group(1)) if m else None

    def renewals_after(self, client, rv):
        return [e for e in self.api.write_log()
                if e["client"] == client and e["name"] == "demo"
                and int(e["resourceVersion"]) > int(rv)]

    def store(self, obj):
        """Stores obj as the Lease (a new resourceVersion stamped in, as a
        write by someone else); returns that resourceVersion."""
        text = json.dumps(obj).encode()
        return self.api.control("PUT", "raw/%s/demo?stamp=1" % NS, raw=text)["resourceVersion"]

    def events(self, replica):
        return self.metric(replica, "leaderd_watch_events_total") or 0

    def wait_passed(self, leader, standby, rv, seen):
        """Until the leader renewed twice on top of rv and the standby's watch
        delivered the write of rv."""
        wait_until(lambda: len(self.renewals_after(leader.client, rv)) >= 2,
                   4 * RETRY + SCHED_SLACK + 5, what="two renewals of the new Lease")
        wait_until(lambda: self.events(standby) > seen, 10, what="the standby's watch event")

    def test_megabyte_lease_is_given_back(self):
        leader_id = self.watch.one_leader(KILL_BOUND + SCHED_SLACK + 2)
        leader = next(r for r in self.replicas if r.client == leader_id)
        standby = next(r for r in self.replicas if r is not leader)
        wait_until(lambda: self.events(standby) > 0, 10, what="the standby's watch")
        pids = {r.client: r.proc.pid for r in self.replicas}

        base = {c: 0 for c in pids}
        for _ in range(BASELINE_SAMPLES):
            _, obj = self.api.get_lease(NS, "demo")
            rv = obj["metadata"]["resourceVersion"]
            wait_until(lambda: self.renewals_after(leader.client, rv), 2 * RETRY + SCHED_SLACK + 5,
                       what="a renewal")
            for c, pid in pids.items():
                base[c] = max(base[c], proc_status(pid, "RssAnon"))

        _, obj = self.api.get_lease(NS, "demo")
        small = json.loads(json.dumps(obj))
        obj["metadata"].setdefault("annotations", {})["example.com/blob"] = "a" * MIB
        seen = self.events(standby)
        rv = self.store(obj)
        self.wait_passed(leader, standby, rv, seen)
        peak = {c: proc_status(pid, "RssAnon") for c, pid in pids.items()}
        _, now = self.api.get_lease(NS, "demo")
        self.assertIn("example.com/blob", now["metadata"]["annotations"],
                      "the leader's renewals keep the annotation")
        # The megabyte was really held: the leader decoded, encoded and sent it.
        self.assertGreater(peak[leader.client], base[leader.client] + MIB // 1024,
                           "peak %r over baseline %r" % (peak, base))

        small["metadata"]["resourceVersion"] = now["metadata"]["resourceVersion"]
        small["spec"] = now["spec"]
        seen = self.events(standby)
        rv = self.store(small)
        self.wait_passed(leader, standby, rv, seen)

        def back():
            now = {c: proc_status(pid, "RssAnon") for c, pid in pids.items()}
            if all(now[c] <= base[c] * RATIO + SLACK_KB for c in pids):
                return now
            return None

        try:
            after = wait_until(back, 8 * RETRY + SCHED_SLACK + 10, interval=0.2,
                               what="RssAnon back near its baseline")
        except AssertionError:
            self.fail("RssAnon kB: baseline %r, peak %r, now %r" % (
                base, peak, {c: proc_status(pid, "RssAnon") for c, pid in pids.items()}))
        for c in pids:
            self.assertLess(after[c], peak[c], c)


if __name__ == "__main__":
    unittest.main()
