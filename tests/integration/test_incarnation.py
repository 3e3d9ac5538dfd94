# SPDX-License-Identifier: Apache-2.0
"""One identity, two processes (docs/design/election.md, "Incarnations"; issue #28):
every leaderd process draws an incarnation and writes it with every Lease it
holds (annotation leaderd.io/incarnation). A StatefulSet Pod force-deleted on
a partitioned node comes back under the same name while the old process
still runs: here a second leaderd with the same --identity (its own API
client, so that the bundled server can cut one off) starts next to one cut
off from the API server. At no moment do both report is_leader, or claim the
same shard; the takeover waits the lease duration and adds 1 to
leaseTransitions; once the first reaches the API again it never claims
anything under its identity's records. A restart of the leader (SIGKILL, then
the same identity again) costs a lease duration, like any failover."""
import os
import shutil
import signal
import tempfile
import time
import unittest

from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import FAST, SCHED_SLACK, Replica, Watcher, stop_all, wait_until
from test_shards import GROUP, NS, ShardBase, ShardWatcher

LEASE = FAST["lease_duration"]
RENEW = FAST["renew_deadline"]
RETRY = FAST["retry_period"]
IDENTITY = "pod-0"
ANNOTATION = "leaderd.io/incarnation"
POLL = 0.025


def incarnation_of(lease):
    return (lease["metadata"].get("annotations") or {}).get(ANNOTATION)


class ProcessWatcher(Watcher):
    """Watcher's rule (a later claim must carry a higher term), and also,
    per poll, never two processes claiming at once, whatever their identity."""

    def poll(self):
        snap, leaders = super().poll()
        self.t.assertLessEqual(len(leaders), 1, f"two processes lead at once: {snap}")
        return snap, leaders


class ClientShardWatcher(ShardWatcher):
    """ShardWatcher's split-brain rule judged per process (API client), not per
    identity: two processes of one identity are two owners."""

    def claim(self, shard, term, rep):
        identity = rep.identity
        rep.identity = rep.client
        try:
            super().claim(shard, term, rep)
        finally:
            rep.identity = identity


class SingleLease(unittest.TestCase):
    """A fresh API server per test; the processes, all of identity IDENTITY,
    are started by the test and stopped by PID after it."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-incarnation-")
        self.api = ApiServer(os.path.join(self.dir, "api"), ["p1", "p2"])
        self.replicas = []
        self.api.start()
        self.watch = ProcessWatcher(self, self.replicas)

    def tearDown(self):
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, client):
        r = Replica(self.api, client, self.dir, identity=IDENTITY)
        self.replicas.append(r)
        return r.start()

    def lease(self):
        return self.api.get_lease(NS, "demo", client="admin")[1]

    def test_second_process_waits_out_a_cut_off_one(self):
        old = self.start("p1")
        self.watch.until(lambda s, leaders: leaders == ["p1"], LEASE + SCHED_SLACK + 2,
                         "p1 to lead")
        before = self.lease()
        term, first_inc = before["spec"]["leaseTransitions"], incarnation_of(before)
        self.assertRegex(first_inc or "", r"^[0-9a-f]{32}$")

        # p1 is cut off, alive; its replacement starts under the same name.
        self.api.set_faults("p1", partition="hang")
        cut = time.monotonic()
        new = self.start("p2")
        last_old = cut
        first_new = None
        deadline = cut + LEASE + 2 * RETRY + SCHED_SLACK + 5
        while time.monotonic() < deadline and first_new is None:
            snap, leaders = self.watch.poll()
            now = time.monotonic()
            if "p1" in leaders:
                last_old = now
            if "p2" in leaders:
                first_new = now
            time.sleep(POLL)
        self.assertIsNotNone(first_new, "the second process never took over")
        self.assertLess(last_old, first_new)
        # The expiry rule, not two retry periods: a lease duration after the
        # second process first read the record (it started after the cut).
        self.assertGreaterEqual(first_new - cut, LEASE - 0.5)
        after = self.lease()
        self.assertEqual(after["spec"]["holderIdentity"], IDENTITY)
        self.assertEqual(after["spec"]["leaseTransitions"], term + 1)
        self.assertNotEqual(incarnation_of(after), first_inc)
        self.assertRegex(incarnation_of(after) or "", r"^[0-9a-f]{32}$")
        self.assertEqual(new.leader()[1]["term"], term + 1)

        # p1 reaches the API again: it follows and never leads again.
        self.api.clear_faults("p1")
        end = time.monotonic() + 2 * LEASE
        while time.monotonic() < end:
            snap, leaders = self.watch.poll()
            self.assertNotIn("p1", leaders)
            time.sleep(POLL)
        self.assertTrue(new.is_leader())
        self.assertEqual(incarnation_of(self.lease()), incarnation_of(after))
        self.assertEqual(self.lease()["spec"]["leaseTransitions"], term + 1)
        self.assertTrue(old.alive())

    def test_restart_of_the_leader_costs_a_lease_duration(self):
        """SIGKILL, then the same identity again (a container restart): the
        new process leads once the dead one's record expired, a change of
        holder (term + 1). The figure is in docs/benchmarks.md."""
        first = self.start("p1")
        self.watch.until(lambda s, leaders: leaders == ["p1"], LEASE + SCHED_SLACK + 2,
                         "p1 to lead")
        term = self.lease()["spec"]["leaseTransitions"]
        first.stop(signal.SIGKILL)
        killed = time.monotonic()
        again = self.start("p2")
        wait_until(again.is_leader, LEASE + 2 * RETRY + SCHED_SLACK + 2,
                   interval=POLL, what="the restarted process to lead")
        took = time.monotonic() - killed
        print(f"\nrestart of the leader: leads again {took:.2f} s after SIGKILL "
              f"(lease duration {LEASE:.0f} s, retry period {RETRY:.0f} s)")
        self.assertGreaterEqual(took, LEASE - 0.5)
        self.assertEqual(self.lease()["spec"]["leaseTransitions"], term + 1)
        self.assertEqual(again.leader()[1]["term"], term + 1)


class Shards(ShardBase):
    n_shards = 6
    clients = ["p1", "p2", "b"]

    def setUp(self):
        super().setUp()
        self.watch.close()
        self.watch = ClientShardWatcher(self, self.replicas, self.n_shards)

    def start_as(self, client, identity):
        r = Replica(self.api, client, self.dir, identity=identity, lease=GROUP,
                    extra_args=["--shards", str(self.n_shards)])
        self.replicas.append(r)
        return r.start()

    @staticmethod
    def owned(reply):
        return set(reply.doc["owned"]) if reply and reply.status == 200 and reply.doc else set()

    def test_second_process_never_claims_a_shard_with_the_cut_off_one(self):
        self.start_as("p1", IDENTITY)
        self.start_as("b", "pod-1")
        owners, _ = self.wait_balanced()
        ours = {s for s, who in owners.items() if who == IDENTITY}
        self.assertTrue(ours)
        leases = self.leases()
        terms = {s: leases[f"{GROUP}-{s}"]["spec"]["leaseTransitions"] for s in ours}
        first_inc = {incarnation_of(leases[f"{GROUP}-{s}"]) for s in ours}
        self.assertEqual(len(first_inc), 1)

        self.api.set_faults("p1", partition="hang")
        cut = time.monotonic()
        self.start_as("p2", IDENTITY)
        state = {"first_new": None, "last_old": cut}

        def track(snap):
            now = time.monotonic()
            old, new = self.owned(snap.get("p1")), self.owned(snap.get("p2"))
            self.assertFalse(old & new, f"both processes claim {old & new}")
            if old:
                state["last_old"] = now
            if new and state["first_new"] is None:
                state["first_new"] = now

        bound = LEASE + 4 * RETRY + SCHED_SLACK + 5
        self.watch.until(lambda snap: (track(snap), self.owned(snap.get("p2")) >= ours)[1],
                         bound, "the second process to own the first one's shards")
        self.assertLess(state["last_old"], state["first_new"])
        self.assertGreaterEqual(state["first_new"] - cut, LEASE - 0.5)
        leases = self.leases()
        for s in ours:
            spec = leases[f"{GROUP}-{s}"]["spec"]
            self.assertEqual(spec["holderIdentity"], IDENTITY)
            self.assertGreater(spec["leaseTransitions"], terms[s])
            self.assertNotIn(incarnation_of(leases[f"{GROUP}-{s}"]), first_inc)
        member = leases[f"{GROUP}-member-{IDENTITY}"]
        self.assertNotIn(incarnation_of(member), first_inc)

        # p1 reaches the API again: it claims nothing under its identity.
        self.api.clear_faults("p1")

        def never_old(snap):
            track(snap)
            self.assertFalse(self.owned(snap.get("p1")), "the first process claims again")

        self.watch.for_duration(2 * LEASE, never_old)
        self.assertGreaterEqual(self.owned(self.watch.poll().get("p2")), ours)


if __name__ == "__main__":
    unittest.main()
