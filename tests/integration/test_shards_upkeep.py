# SPDX-License-Identifier: Apache-2.0
"""What a shard group does with Lease fields and Leases it did not write.

- spec.preferredHolder (and spec.strategy, as Kubernetes' coordinated
  leader election writes them) on a shard Lease is ignored: the
  assignment alone says who owns a shard. The owner keeps it, writes
  nothing, and the fields stay as written; a later change of owner (a
  graceful leave) copies them forward through the release and the take.
- A member Lease that outlived its replica is deleted by a live member
  once it has been expired for ten lease durations in that member's view,
  and not before; the DELETE carries preconditions, so a Lease renewed
  while the DELETE was on its way stays (the API server answers 409).

ShardWatcher (test_shards) checks the split-brain rule on every poll
throughout."""
import json
import signal
import time
import unittest

from leaderd_testing.cluster import SCHED_SLACK
from test_shards import GIVEN_BACK_BOUND, GRACE, GROUP, LEASE, NS, RENEW, RETRY, ShardBase

MICROTIME = "%Y-%m-%dT%H:%M:%S.000000Z"
# The clean-up's rule: a member record is deleted once it has been expired
# (unchanged for its own leaseDurationSeconds) for this many lease durations.
LONG_EXPIRED = 10 * LEASE


def now_microtime():
    return time.strftime(MICROTIME, time.gmtime())


class PreferredHolder(ShardBase):
    """Two replicas, four shards; an admin asks for another holder of a
    shard Lease owned by r1, as a coordinator would."""

    n_shards = 4

    def lease(self, name):
        status, lease = self.api.get_lease(NS, name, client="admin")
        self.assertEqual(status, 200, lease)
        return lease

    def test_preferred_holder_is_ignored_and_carried_forward(self):
        r1 = self.start("r1")
        self.start("r2")
        owners, took = self.wait_balanced()
        print(f"\n  balanced over 2 in {took:.2f}s: {owners}")
        shard = min(s for s, o in owners.items() if o == "r1")
        name = f"{GROUP}-{shard}"

        # The coordinator's write: strategy and preferredHolder naming r2 on
        # the Lease as read. The bundled server, like one without the
        # CoordinatedLeaderElection gate, drops both fields from a PUT unless
        # the stored object has them, so it is stored directly; that nothing
        # wrote the Lease between the read and this write makes it the
        # compare-and-swap a PUT on the read resourceVersion would be.
        seq, before = self.log_seq(), self.holders()
        lease = self.lease(name)
        transitions = lease["spec"]["leaseTransitions"]
        lease["spec"]["strategy"] = "OldestEmulationVersion"
        lease["spec"]["preferredHolder"] = "r2"
        self.api.control("PUT", f"raw/{NS}/{name}?stamp=1", raw=json.dumps(lease).encode())
        written = [e for e in self.api.write_log(seq) if e["name"] == name]
        self.assertEqual([(e["client"], e["verb"]) for e in written], [("admin", "raw")],
                         written)
        asked = written[0]["seq"]
        spec = self.lease(name)["spec"]
        self.assertEqual((spec["holderIdentity"], spec.get("preferredHolder")), ("r1", "r2"))

        # Over a lease duration and two retry periods (more than the
        # rebalance delay, an eviction's wait, and the retry period in which
        # a single-Lease leader hands over on preferredHolder): r1 keeps
        # claiming the shard whenever it claims anything (a claim that lapses
        # with every other, its member renewal late on a loaded machine, is
        # no hand-over), r2 never claims it, and nobody writes it.
        claimed = {"r1": 0}

        def kept(snap):
            for rep in snap.values():
                if rep.status != 200 or not rep.doc:
                    continue
                if rep.client == "r1" and rep.doc["owned"]:
                    self.assertIn(shard, rep.doc["owned"], "r1 gave the shard up")
                    claimed["r1"] += 1
                if rep.client == "r2":
                    self.assertNotIn(shard, rep.doc["owned"], "r2 took the shard")
                    entry = next(e for e in rep.doc["shards"] if e["shard"] == shard)
                    self.assertEqual(entry["leader"], "r1")
        self.watch.for_duration(LEASE + 2 * RETRY, kept)
        self.assertGreater(claimed["r1"], 0)
        self.assertEqual([e for e in self.api.write_log(asked) if e["name"] == name], [],
                         "the shard Lease was written (a release or a take)")
        self.assertEqual(self.moves(seq, before), {})
        spec = self.lease(name)["spec"]
        self.assertEqual(spec["holderIdentity"], "r1")
        self.assertEqual(spec["leaseTransitions"], transitions)
        self.assertEqual(spec.get("preferredHolder"), "r2")
        self.assertEqual(spec.get("strategy"), "OldestEmulationVersion")

        # A legitimate change of owner: r1 leaves gracefully. Its release
        # and r2's take are the usual compare-and-swaps of the record as
        # observed, which copy the two fields forward (a PUT without them
        # would remove them: the stored object has them, so the server keeps
        # what the body says).
        seq = self.log_seq()
        t_term = time.monotonic()
        r1.send(signal.SIGTERM)
        self.assertEqual(r1.wait_exit(RENEW + 10), 0)
        self.wait_balanced(t_term, GIVEN_BACK_BOUND * GRACE)
        writes = [(e["client"], e["holderIdentity"]) for e in self.api.write_log(seq)
                  if e["name"] == name]
        self.assertEqual(writes, [("r1", ""), ("r2", "r2")])
        spec = self.lease(name)["spec"]
        self.assertEqual(spec["holderIdentity"], "r2")
        self.assertEqual(spec["leaseTransitions"], transitions + 1)
        self.assertEqual(spec.get("preferredHolder"), "r2")
        self.assertEqual(spec.get("strategy"), "OldestEmulationVersion")


class LeftoverMembers(ShardBase):
    """Two member Leases of the group left behind by replicas that are gone,
    made before the group's replicas start (so each replica first sees them
    at its start, which proves nothing about a writer: neither counts live):
      - GHOST, a crashed replica's: held by "ghost", leaseDurationSeconds
        the lease duration. Deleted lease-duration + 10 x lease-duration
        after a replica first saw it, and not before.
      - GHOST2, a graceful exit's whose DELETE was lost: holder "",
        leaseDurationSeconds 1, as a release writes it; so it is due 3 s
        before GHOST. Every DELETE from the replicas is held by the API
        server (a latency fault, applied even after the client gave up);
        once one of GHOST2 is on its way, the admin renews GHOST2. A DELETE
        without preconditions would delete the renewed Lease; with the
        resourceVersion it was sent on, it fails with 409 and the Lease
        stays, renewed and live again."""

    n_shards = 4
    GHOST = f"{GROUP}-member-ghost"
    GHOST2 = f"{GROUP}-member-ghost2"
    # How long the API server holds each DELETE: longer than the client's
    # wait (renew-deadline), so the test has time to renew GHOST2 first.
    HOLD = 2 * RENEW

    def make_member(self, name, holder, duration):
        """A member Lease of the group as a replica writes it (the metadata
        is checked against a real replica's below); returns the Lease made
        and its write-log entry."""
        seq = self.log_seq()
        now = now_microtime()
        status, made = self.api.post_lease(NS, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"leaderd.io/shard-group": GROUP},
                         "annotations": {"leaderd.io/shard-protocol": "2",
                                         "leaderd.io/shard-set": f"numbered/{self.n_shards}",
                                         "leaderd.io/unwritable": ""}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "acquireTime": now, "renewTime": now, "leaseTransitions": 0}},
            client="admin")
        self.assertEqual(status, 201, made)
        return made, next(e for e in self.api.write_log(seq) if e["name"] == name)

    def attempts(self, name):
        """The replicas' log lines announcing a clean-up DELETE of name."""
        needle = f"member Lease {name} expired"
        return sum(r.log().count(needle) for r in self.replicas)

    def conflicts(self):
        """DELETEs the API server refused with 409, answered or not."""
        stats = self.api.stats()
        return sum(stats.get(c, {}).get("delete", {}).get(code, 0)
                   for c in ("r1", "r2") for code in ("409", "late-409"))

    def test_long_expired_member_lease_is_deleted_with_preconditions(self):
        for c in ("r1", "r2"):
            self.api.control("POST", "faults", {"client": c, "latency_ms": int(self.HOLD * 1000),
                                                "commit": "admitted", "verbs": ["delete"]})
        _, made = self.make_member(self.GHOST, "ghost", int(LEASE))
        lease2, made2 = self.make_member(self.GHOST2, "", 1)
        t_start = time.monotonic()
        self.start("r1")
        self.start("r2")
        _, took = self.wait_balanced()
        print(f"\n  balanced over 2 in {took:.2f}s beside two leftover member Leases")
        # The leftovers carry what a replica's own member Lease carries, but
        # for the incarnation: that names the process that wrote it.
        status, real = self.api.get_lease(NS, f"{GROUP}-member-r1", client="admin")
        self.assertEqual(status, 200, real)
        self.assertRegex(real["metadata"]["annotations"].pop("leaderd.io/incarnation"),
                         r"^[0-9a-f]{32}$")
        for name in (self.GHOST, self.GHOST2):
            _, left = self.api.get_lease(NS, name, client="admin")
            for field in ("labels", "annotations"):
                self.assertEqual(left["metadata"].get(field), real["metadata"].get(field),
                                 (name, field))

        # GHOST2 is due 1 s + 10 x lease-duration after a replica first saw
        # it, at its start or later. Until then no replica may even try.
        # (Times: the write log's clock_us is CLOCK_MONOTONIC, as is
        # time.monotonic().)
        due2 = made2["clock_us"] / 1e6 + 1 + LONG_EXPIRED
        none_yet = [t_start]  # when the replicas' logs last showed no attempt

        def tried(_snap):
            t = time.monotonic()
            n = self.attempts(self.GHOST2)
            if n:
                self.assertGreaterEqual(t, due2, f"a DELETE of {self.GHOST2} before it was due")
            else:
                none_yet[0] = t
            return n
        self.watch.until(tried, t_start + 1 + LONG_EXPIRED + LEASE + SCHED_SLACK * GRACE
                         - time.monotonic(), f"a DELETE of {self.GHOST2}")
        t_tried = time.monotonic()
        # GHOST, due 3 s later, is still there 10 x lease-duration after it
        # was made.
        self.assertGreaterEqual(t_tried - made["clock_us"] / 1e6, LONG_EXPIRED)
        status, left = self.api.get_lease(NS, self.GHOST, client="admin")
        self.assertEqual(status, 200, left)

        # The admin renews GHOST2 (a PUT on the version read), then lets
        # later DELETEs through at once. Every DELETE of GHOST2 so far was
        # sent after none_yet and is applied HOLD after it was sent.
        seq = self.log_seq()
        status, left2 = self.api.get_lease(NS, self.GHOST2, client="admin")
        self.assertEqual(status, 200, left2)
        now = now_microtime()
        left2["spec"].update(holderIdentity="ghost2", leaseDurationSeconds=int(LEASE),
                             acquireTime=now, renewTime=now)
        status, renewed = self.api.put_lease(NS, self.GHOST2, left2, client="admin")
        self.assertEqual(status, 200, renewed)
        self.api.clear_faults()
        at = next(e for e in self.api.write_log(seq) if e["name"] == self.GHOST2)
        self.assertLess(at["clock_us"] / 1e6, none_yet[0] + self.HOLD,
                        "renewed after a held DELETE may have been applied: the test was "
                        "too slow to show anything")
        # Renewed, it counts live again (seen to change) for its duration.
        self.watch.until(lambda snap: any(r.doc and "ghost2" in r.doc.get("members", ())
                                          for r in snap.values()),
                         LEASE, "the renewed ghost2 to count live")
        # Every DELETE of GHOST2 sent so far met the renewed Lease: 409.
        self.watch.until(lambda _snap: self.conflicts() >= self.attempts(self.GHOST2),
                         self.HOLD + SCHED_SLACK * GRACE,
                         f"the held DELETEs of {self.GHOST2} to fail")
        status, kept = self.api.get_lease(NS, self.GHOST2, client="admin")
        self.assertEqual(status, 200, kept)
        self.assertEqual(kept["metadata"]["uid"], lease2["metadata"]["uid"])
        self.assertEqual(kept["metadata"]["resourceVersion"],
                         renewed["metadata"]["resourceVersion"])

        # GHOST goes once it is due (its DELETE may have been held too).
        def gone(_snap):
            return self.api.get_lease(NS, self.GHOST, client="admin")[0] == 404
        self.watch.until(gone, t_start + LEASE + LONG_EXPIRED + LEASE + SCHED_SLACK * GRACE
                         + self.HOLD - time.monotonic(), f"{self.GHOST} to be deleted")
        deletes = [e for e in self.api.write_log() if e["verb"] == "delete"]
        self.assertEqual([(e["name"], e["client"] in ("r1", "r2")) for e in deletes],
                         [(self.GHOST, True)], deletes)
        waited = (deletes[0]["clock_us"] - made["clock_us"]) / 1e6
        print(f"  {self.GHOST} deleted by {deletes[0]['client']} {waited:.2f}s after it "
              f"was made; {self.attempts(self.GHOST2)} DELETE(s) of the renewed "
              f"{self.GHOST2} refused")
        self.assertGreaterEqual(waited, LEASE + LONG_EXPIRED - 0.001)
        self.assertEqual(self.api.get_lease(NS, self.GHOST2, client="admin")[0], 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
