# SPDX-License-Identifier: Apache-2.0
"""A rolling update of a shard group, as a Deployment with maxSurge 1 and
maxUnavailable 0 does it with fresh Pod names: a new replica starts, the
next old one gets SIGTERM once the new one is ready, and so on until every
replica is new. Every shard must move at least once (every old replica
goes); the group moves each about once, at most 1.5 N in all, and never
lets two replicas claim one shard (ShardWatcher checks every poll).

Two readiness gates: the new replica counted as a member by every other
(what a readiness probe on the group's members gives), and /healthz alone
(the replica answers: the old one goes before the new one is even seen)."""
import signal
import time
import unittest

from leaderd_testing.cluster import SCHED_SLACK
from test_shards import BALANCE_BOUND, GRACE, POLL, RENEW, GROUP, ShardBase

OLD = ["o1", "o2", "o3", "o4"]
NEW = ["n1", "n2", "n3", "n4"]


class RollingUpdate(ShardBase):
    n_shards = 16
    clients = OLD + NEW

    def balanced(self, what):
        ids = [r.identity for r in self.live()]
        self.watch.until(self.watch.settled(ids), BALANCE_BOUND * GRACE + SCHED_SLACK, what)

    def seen_by_all(self, identity):
        def pred(snap):
            return all(r.status == 200 and r.doc and identity in r.doc["members"]
                       for r in snap.values())
        return pred

    def owner_changes(self):
        """Every change of a shard Lease's holder from one replica to
        another in the API server's write log (A, "", B counts once)."""
        prefix, current, moves = GROUP + "-", {}, 0
        for e in self.api.write_log(0):
            name = e.get("name") or ""
            shard = name[len(prefix):] if name.startswith(prefix) else None
            if shard is None or shard.startswith("member-"):
                continue
            holder = e.get("holderIdentity") or ""
            if not holder:
                continue
            if current.get(shard) and current[shard] != holder:
                moves += 1
            current[shard] = holder
        return moves

    def roll(self, gate_on_members):
        for c in OLD:
            self.start(c)
        self.balanced("the old replicas' balance")
        before = self.owner_changes()
        t0 = time.monotonic()
        for old, new in zip(OLD, NEW):
            fresh = self.start(new)  # answers /healthz
            if gate_on_members:
                self.watch.until(self.seen_by_all(fresh.identity),
                                 BALANCE_BOUND * GRACE + SCHED_SLACK, f"{new} counted")
            leaver = next(r for r in self.replicas if r.client == old)
            leaver.send(signal.SIGTERM)
            deadline = time.monotonic() + (RENEW + 2) * GRACE
            while leaver.alive() and time.monotonic() < deadline:
                self.watch.poll()
                time.sleep(POLL)
            self.assertEqual(leaver.wait_exit(1.0), 0, f"{old} did not exit cleanly")
        self.balanced("the new replicas' balance")
        moves = self.owner_changes() - before
        print(f"\n  rolling update of {len(OLD)} over {self.n_shards} shards "
              f"({'gated on membership' if gate_on_members else 'gated on /healthz'}): "
              f"{moves} moves ({moves / self.n_shards:.2f} N) in "
              f"{time.monotonic() - t0:.1f}s")
        self.assertGreaterEqual(moves, self.n_shards)  # every old replica went
        self.assertLessEqual(moves, 1.5 * self.n_shards)

    def test_gated_on_membership(self):
        self.roll(gate_on_members=True)

    def test_gated_on_healthz(self):
        self.roll(gate_on_members=False)


if __name__ == "__main__":
    unittest.main(verbosity=2)
