# SPDX-License-Identifier: Apache-2.0
"""The chaos checks must be able to fail: harness.analyse() over made-up
samples and write logs, one violation at a time. run.py runs these before any
scenario; `python3 tests/chaos/test_checks.py` runs them alone."""
import os
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "support"))  # leaderd_testing

import harness  # noqa: E402
from harness import (Ctx, Sample, Slot, Write, analyse, analyse_children,  # noqa: E402
                     proxy_fencing_problems)


class FakeProc:
    def __init__(self, slot, seq):
        self.slot = slot
        self.seq = seq
        self.pid = 1000 + seq
        self.expected_exit = None
        self.signalled_at = None
        self.exited_at = None
        self.rc = None
        self.stops = []
        self.text = ""

    def poll(self):
        return self.exited_at is None

    def stopped_during(self, t0, t1):
        return harness.Proc.stopped_during(self, t0, t1)

    def log(self):
        return self.text

    def label(self):
        return f"{self.slot.name}#{self.seq}"


class FakePoller:
    def __init__(self):
        self.lock = threading.Lock()
        self.samples = []


class FakeCluster:
    def __init__(self):
        self.slots = [Slot("r1", "r1"), Slot("r2", "r2")]
        self.procs = {}
        for i, s in enumerate(self.slots):
            p = FakeProc(s, i + 1)
            s.proc = p
            s.procs.append(p)
            self.procs[s.name] = p
        self.poller = FakePoller()
        self.writes = []
        self.child = ""

    def child_text(self):
        return self.child

    samples = harness.Cluster.samples

    def refresh_log(self):
        return self.writes

    def all_procs(self):
        return list(self.procs.values())


class Base(unittest.TestCase):
    """A fake cluster of r1 and r2 and helpers to make up its history."""

    def setUp(self):
        self.c = FakeCluster()
        self.ctx = Ctx(self.c, "test", 0)
        self.ctx.t0 = 0.0
        self.rnd = 0

    def write(self, t, client, holder, verb="update", transitions=0):
        self.c.writes.append(Write({"clock_us": int(t * 1e6), "client": client,
                                    "verb": verb, "holderIdentity": holder,
                                    "leaseTransitions": transitions,
                                    "resourceVersion": "1"}, {"r1", "r2", "dup"}))

    def sample(self, name, t, leader, holder, term=0, rnd=None, dur=0.002, status=True):
        slot = self.c.slots[0] if name == "r1" else self.c.slots[1]
        if rnd is None:
            self.rnd += 1
            rnd = self.rnd
        doc = {"is_leader": leader, "leader": holder, "term": term} if status else None
        code = (200 if leader else 503) if status else None
        s = Sample(slot, self.c.procs[name], rnd, t, t + dur, code, doc,
                   None if status else "timeout")
        self.c.poller.samples.append(s)
        return s

    def failures(self):
        analyse(self.ctx)
        return self.ctx.failures

    def history(self):
        """r1 leads from t=1, r2 takes over at t=10 after r1 went away."""
        self.write(1.0, "r1", "r1", verb="create")
        self.write(2.0, "r1", "r1")
        self.write(10.0, "r2", "r2", transitions=1)
        self.sample("r1", 1.5, True, "r1")
        self.sample("r2", 1.5, False, "r1")
        self.sample("r1", 4.5, False, "r1")
        self.sample("r2", 10.5, True, "r2", term=1)



class Checks(Base):
    def test_clean_history_passes(self):
        self.history()
        self.assertEqual(self.failures(), [])

    def test_two_leaders_in_one_round(self):
        self.history()
        self.sample("r1", 9.0, True, "r1", rnd=99)
        self.sample("r2", 9.0, True, "r2", rnd=99)
        self.assertTrue(any("two leaders" in f for f in self.failures()), self.ctx.failures)

    def test_handover_inside_one_round_passes(self):
        # Both requests leave at 9.999; r1 answers from before its release,
        # r2 after its write at 10.0.
        self.history()
        self.sample("r1", 9.999, True, "r1", term=0, rnd=99, dur=0.0005)
        self.sample("r2", 9.999, True, "r2", term=1, rnd=99, dur=0.004)
        self.assertEqual(self.failures(), [])

    def test_old_term_claim_after_the_new_write_in_one_round_fails(self):
        self.history()
        self.sample("r1", 10.005, True, "r1", term=0, rnd=99)
        self.sample("r2", 10.005, True, "r2", term=1, rnd=99)
        self.assertTrue(any("claim after another holder's write" in f
                            for f in self.failures()), self.ctx.failures)

    def test_claim_after_another_holders_write(self):
        self.history()
        self.sample("r1", 10.01, True, "r1")
        self.assertTrue(any("claim after another holder's write" in f
                            for f in self.failures()), self.ctx.failures)

    def test_claim_resting_on_own_write_during_the_request(self):
        self.history()
        self.write(20.0005, "r1", "r1", transitions=2)
        self.sample("r1", 20.0, True, "r1", term=2, dur=0.01)
        self.assertEqual(self.failures(), [])

    def test_claim_within_renew_deadline_of_garbage_is_allowed(self):
        self.history()
        self.write(11.0, "r2", "r2", transitions=1)
        self.write(12.0, "admin", None, verb="raw")
        self.sample("r2", 12.0 + harness.RENEW - 0.1, True, "r2", term=1)
        self.assertEqual(self.failures(), [])

    def test_claim_past_renew_deadline_of_garbage_fails(self):
        self.history()
        self.write(12.0, "admin", None, verb="raw")
        self.sample("r2", 12.0 + harness.RENEW + 0.1, True, "r2", term=1)
        self.assertTrue(any("out-of-band" in f for f in self.failures()), self.ctx.failures)

    def test_same_identity_other_process(self):
        self.history()
        self.write(11.0, "dup", "r2", transitions=1)
        self.sample("r2", 11.5, True, "r2", term=1)
        self.assertTrue(any("same identity" in f for f in self.failures()),
                        self.ctx.failures)

    def test_term_going_down(self):
        self.history()
        self.sample("r2", 11.0, False, "r2", term=0)
        self.assertTrue(any("term went down" in f for f in self.failures()),
                        self.ctx.failures)

    def test_term_reset_allowed_when_declared(self):
        self.history()
        self.sample("r2", 11.0, False, "r2", term=0)
        self.ctx.allow_term_reset = True
        self.assertEqual(self.failures(), [])

    def test_term_reset_learned_late_after_a_deletion(self):
        # r1 could not read the Lease while it was deleted and re-created; it
        # shows the new Lease's term 0 long after the deletion.
        self.history()
        self.sample("r1", 10.5, False, "r2", term=1)
        self.write(12.0, "admin", None, verb="delete")
        self.write(13.0, "r2", "r2", verb="create", transitions=0)
        self.sample("r1", 20.0, False, "r2", term=0)
        self.assertEqual(self.failures(), [])

    def test_term_going_down_with_an_older_deletion(self):
        # A deletion before the old term began does not excuse a decrease.
        self.write(0.5, "admin", None, verb="delete")
        self.history()
        self.sample("r1", 10.5, False, "r2", term=1)
        self.sample("r1", 20.0, False, "r2", term=0)
        self.assertTrue(any("term went down" in f for f in self.failures()),
                        self.ctx.failures)

    def test_unanswered_poll_of_a_running_replica(self):
        self.history()
        self.sample("r1", 5.0, False, None, status=False, dur=2.0)
        self.assertTrue(any("did not answer" in f for f in self.failures()),
                        self.ctx.failures)

    def test_unanswered_poll_of_a_stopped_replica_is_fine(self):
        self.history()
        self.c.procs["r1"].stops.append((4.9, 8.0))
        self.sample("r1", 5.0, False, None, status=False, dur=2.0)
        self.assertEqual(self.failures(), [])

    def test_crash(self):
        self.history()
        p = self.c.procs["r1"]
        p.exited_at, p.rc = 6.0, -11
        self.assertTrue(any("crashed" in f for f in self.failures()), self.ctx.failures)

    def test_sanitizer_report_in_a_log(self):
        self.history()
        self.c.procs["r2"].text = "==1==ERROR: AddressSanitizer: heap-use-after-free\n"
        self.assertTrue(any("sanitizer" in f for f in self.failures()), self.ctx.failures)


class ChildChecks(Base):
    """analyse_children() over made-up child records on top of history():
    r1 leads from 1.0 (renewed at 2.0, answers "not leader" at 4.5), r2
    from 10.0 in term 1."""

    def rec(self, kind, ident, term, pid, t):
        self.c.child += f"{kind} {ident} {term} {pid} {t:.6f}\n"

    def child(self, ident, term, pid, t0, t1, stop=True):
        """A child with heartbeats from t0 to t1 (and a stop record at t1)."""
        self.rec("start", ident, term, pid, t0)
        n = int((t1 - t0) / harness.CHILD_PERIOD)
        for k in range(1, n):
            self.rec("beat", ident, term, pid, t0 + k * harness.CHILD_PERIOD)
        self.rec("stop" if stop else "beat", ident, term, pid, t1)

    def children(self):
        self.history()
        self.child("r1", 0, 501, 1.05, 4.52)
        self.child("r2", 1, 502, 10.05, 12.0)

    def child_failures(self, what):
        analyse_children(self.ctx)
        return [f for f in self.ctx.failures if what in f]

    def test_clean_children_pass(self):
        self.children()
        analyse_children(self.ctx)
        self.assertEqual(self.ctx.failures, [])
        self.assertTrue(any("2 children" in n for n in self.ctx.notes), self.ctx.notes)

    def test_interleaved_records_are_an_overlap(self):
        # A second child of r1, started 10 ms before the first one stopped.
        self.children()
        self.child("r1", 0, 503, 4.51, 4.6)
        self.assertTrue(self.child_failures("two children at once"), self.ctx.failures)

    def test_killed_child_overlaps_up_to_one_heartbeat_later(self):
        # The first child has no stop record: it may have acted until one
        # period after its last heartbeat at 4.52, so a start at 4.53 is an
        # overlap although no two records interleave.
        self.history()
        self.child("r1", 0, 501, 1.05, 4.52, stop=False)
        self.child("r1", 0, 503, 4.52 + harness.CHILD_PERIOD / 2, 4.6)
        self.assertTrue(self.child_failures("two children at once"), self.ctx.failures)
        self.assertTrue(self.child_failures("left no stop record"), self.ctx.failures)

    def test_start_after_the_killed_childs_last_heartbeat_period_passes(self):
        self.history()
        self.child("r1", 0, 501, 1.05, 4.4, stop=False)
        self.child("r1", 0, 503, 4.4 + harness.CHILD_PERIOD + 0.001, 4.5)
        self.assertEqual(self.child_failures("two children at once"), [])

    def test_child_without_its_replicas_write(self):
        # r2 starts a child at 5.0 while the Lease's last write is r1's.
        self.children()
        self.child("r2", 0, 504, 5.0, 5.1)
        self.assertTrue(self.child_failures("but the Lease's last write then was"),
                        self.ctx.failures)

    def test_child_with_the_wrong_term(self):
        self.history()
        self.child("r1", 7, 501, 1.05, 1.5)
        self.assertTrue(self.child_failures("but the Lease's last write then was"),
                        self.ctx.failures)

    def test_child_past_renew_deadline_and_grace(self):
        # Last renewal at 2.0: gone by 2.0 + renew-deadline + grace + slack.
        self.history()
        late = 2.0 + harness.RENEW + harness.CHILD_GRACE + harness.CHILD_KILL_SLACK + 0.05
        self.child("r1", 0, 501, 1.05, late)
        self.assertTrue(self.child_failures("after its term's last renewal"),
                        self.ctx.failures)

    def test_child_long_after_its_replica_stopped_claiming(self):
        # r1 answered "not leader" at 4.502; its child lives 0.9 s longer.
        self.history()
        self.child("r1", 0, 501, 1.05, 4.502 + harness.CHILD_GRACE + 0.4)
        self.assertTrue(self.child_failures("answered that it no longer led"),
                        self.ctx.failures)

    def test_records_after_a_stop_extend_the_child(self):
        # r1's child "stops" at 4.52, but something of it goes on recording
        # until r2's child runs.
        self.children()
        self.rec("beat", "r1", 0, 501, 10.2)
        self.assertTrue(self.child_failures("went on after its stop record"),
                        self.ctx.failures)
        self.assertTrue(self.child_failures("two children at once"), self.ctx.failures)

    def test_torn_and_stray_records(self):
        self.children()
        self.rec("beat", "r3", 0, 999, 13.0)
        self.c.child += "beat r2 1 50"
        self.assertTrue(self.child_failures("does not continue a running child"),
                        self.ctx.failures)
        self.assertTrue(self.child_failures("torn last record"), self.ctx.failures)


class ShardChecks(Base):
    """Shard mode: the single-Lease checks per shard, from /shards answers and
    each shard Lease's writes."""

    def setUp(self):
        super().setUp()
        self.c.shards = 2
        self.c.shard_writes = {}
        self.c.shard_ids = lambda: ["0", "1"]

    def swrite(self, sid, t, client, holder, transitions=0, verb="update"):
        self.c.shard_writes.setdefault(sid, []).append(Write(
            {"clock_us": int(t * 1e6), "client": client, "verb": verb,
             "holderIdentity": holder, "leaseTransitions": transitions,
             "resourceVersion": "1"}, {"r1", "r2", "dup"}))

    def ssample(self, name, t, claims, rnd=None, dur=0.002):
        """claims: {sid: (is_leader, leader, term)}."""
        slot = self.c.slots[0] if name == "r1" else self.c.slots[1]
        if rnd is None:
            self.rnd += 1
            rnd = self.rnd
        doc = {"members": ["r1", "r2"], "owned": [k for k, v in claims.items() if v[0]],
               "shards": [{"shard": k, "is_leader": v[0], "leader": v[1], "term": v[2]}
                          for k, v in claims.items()]}
        s = Sample(slot, self.c.procs[name], rnd, t, t + dur, 200, doc, None)
        self.c.poller.samples.append(s)
        return s

    def history(self):
        """r1 owns shard 0, r2 shard 1; at t=10 shard 0 moves to r2 by a release."""
        self.swrite("0", 1.0, "r1", "r1", verb="create")
        self.swrite("1", 1.0, "r2", "r2", verb="create")
        self.ssample("r1", 2.0, {"0": (True, "r1", 0), "1": (False, "r2", 0)})
        self.ssample("r2", 2.0, {"0": (False, "r1", 0), "1": (True, "r2", 0)})
        self.swrite("0", 9.0, "r1", "")
        self.swrite("0", 10.0, "r2", "r2", transitions=1)
        self.ssample("r1", 10.5, {"0": (False, "r2", 1), "1": (False, "r2", 0)})
        self.ssample("r2", 10.5, {"0": (True, "r2", 1), "1": (True, "r2", 0)})

    def test_clean_shard_history_passes(self):
        self.history()
        self.assertEqual(self.failures(), [])

    def test_two_owners_of_one_shard_in_one_round(self):
        self.history()
        self.ssample("r1", 5.0, {"0": (True, "r1", 0), "1": (False, "r2", 0)}, rnd=99)
        self.ssample("r2", 5.0, {"0": (True, "r2", 0), "1": (True, "r2", 0)}, rnd=99)
        self.assertTrue(any("shard 0" in f and "two leaders" in f for f in self.failures()),
                        self.ctx.failures)

    def test_claim_of_a_shard_after_its_hand_over(self):
        self.history()
        self.ssample("r1", 10.2, {"0": (True, "r1", 0), "1": (False, "r2", 0)})
        self.assertTrue(any("shard 0" in f and "another holder" in f
                            for f in self.failures()), self.ctx.failures)

    def test_shard_term_going_down(self):
        self.history()
        self.ssample("r2", 11.0, {"0": (True, "r2", 1), "1": (True, "r2", 0)})
        self.ssample("r2", 12.0, {"0": (False, "r2", 0), "1": (True, "r2", 0)})
        self.assertTrue(any("shard 0" in f and "term went down" in f
                            for f in self.failures()), self.ctx.failures)


class ProxyFencingChecks(unittest.TestCase):
    """proxy_fencing_problems over a made-up Lease log (r1 leads from 1000 ms,
    r2 takes over at 5000.500 ms, by the server's clock_us) and Pod and
    ConfigMap logs."""

    leases = [{"clock_us": 1_000_000, "client": "r1", "holderIdentity": "r1"},
              {"clock_us": 2_000_000, "client": "r1", "holderIdentity": "r1"},
              {"clock_us": 5_000_500, "client": "r2", "holderIdentity": "r2"}]

    def pod(self, t_us, client):
        return {"clock_us": t_us, "client": client,
                "labels": {"written": f"{client}-{t_us}"}}

    def cm(self, t_us, client):
        return {"clock_us": t_us, "client": client, "verb": "patch",
                "data": {"written": f"{client}-{t_us}"}}

    def test_writes_inside_leadership_pass(self):
        writes = [self.pod(1_000_000, "r1"), self.pod(4_999_999, "r1"),
                  self.cm(5_000_501, "r2"), self.pod(9_000_000, "r2")]
        self.assertEqual(proxy_fencing_problems(self.leases, writes), [])

    def test_old_leader_write_after_the_takeover_fails(self):
        out = proxy_fencing_problems(self.leases, [self.pod(5_001_000, "r1")])
        self.assertEqual(len(out), 1, out)
        self.assertIn("'r2' held the Lease", out[0])

    def test_the_takeovers_millisecond_is_judged_by_the_microsecond(self):
        # All four in the millisecond 5000 of the takeover (5000.500 ms): a
        # millisecond clock could not tell them apart.
        before = [self.pod(5_000_100, "r1"), self.cm(5_000_499, "r1")]
        self.assertEqual(proxy_fencing_problems(self.leases, before), [])
        after = [self.cm(5_000_501, "r1"), self.pod(5_000_900, "r1")]
        out = proxy_fencing_problems(self.leases, after)
        self.assertEqual(len(out), 2, out)
        self.assertTrue(out[0].startswith("ConfigMap write {'written': 'r1-5000501'} by r1"),
                        out)
        self.assertTrue(out[1].startswith("Pod write"), out)
        # The new holder writing in that millisecond but before its takeover
        # is a standby write.
        out = proxy_fencing_problems(self.leases, [self.cm(5_000_200, "r2")])
        self.assertEqual(len(out), 1, out)
        self.assertIn("'r1' held the Lease", out[0])

    def test_a_tie_counts_the_lease_write_first(self):
        # The same microsecond as the takeover: the old holder's write is a
        # violation, the new holder's is not.
        out = proxy_fencing_problems(self.leases, [self.pod(5_000_500, "r1")])
        self.assertEqual(len(out), 1, out)
        self.assertEqual(proxy_fencing_problems(self.leases, [self.cm(5_000_500, "r2")]), [])

    def test_standby_write_fails(self):
        out = proxy_fencing_problems(self.leases, [self.pod(3_000_000, "r2")])
        self.assertEqual(len(out), 1, out)
        self.assertIn("by r2", out[0])

    def test_write_before_any_lease_fails(self):
        out = proxy_fencing_problems(self.leases, [self.cm(500_000, "r1")])
        self.assertTrue(out and "before any Lease write" in out[0], out)

    def test_write_after_a_release_fails(self):
        leases = self.leases + [{"clock_us": 6_000_000, "client": "r2", "holderIdentity": ""}]
        self.assertEqual(len(proxy_fencing_problems(leases, [self.pod(6_000_001, "r2")])), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
