# SPDX-License-Identifier: Apache-2.0
"""A shard's give-back and the API write gate (--shards with --api-proxy),
against an API server that, as kube-apiserver does, commits a write it has
admitted at the end of its hold whether or not its client is still there
("commit": "admitted", the test support's default).

The contract (docs: "A release waits for the writes"), per shard: once a
replica stops claiming a shard on purpose (a rebalance gives it back,
SIGTERM) no new write of it passes, but a write of it already sent upstream
is not cut by that step-down: it runs to its answer, and the release of the
shard's Lease is written only once no sent write of the shard is left. A
write cut at the member term's renew deadline means no release: the shard's
Lease expires by itself.

Checked from the API server's logs, on its one clock (clock_us): every Pod
write it applied came from the holder of its shard's Lease at that moment;
a held write of a shard given back commits before the next owner's first
claim of that shard and before the release; the app that stayed gets the
server's own answer. Every test here fails on a leaderd whose step-down
cuts a write already sent and releases at once: the server commits the
write after the next owner's claim."""
import http.client
import json
import signal
import threading
import time
import unittest

import test_shards as ts
from leaderd_testing.cluster import EXIT_BOUND, FAST, SCHED_SLACK, free_port, wait_until
from test_api_proxy import MERGE, NS, proxy_request

GROUP = ts.GROUP
POD = "/api/v1/namespaces/%s/pods/app-%%s" % NS
# The writes are held 1.5 s, and the step-down (a rebalance's give-back,
# SIGTERM) comes 0.3 s after they were sent.
HELD_MS = 1500
STEP_DOWN_AFTER = 0.3
# With --shard-drain 0s a give-back follows the newcomer's arrival (its
# member Lease created, seen at once by watch) by the rebalance delay, a
# lease duration here (mode_shards.c, rebalance_delay).
REBALANCE_DELAY = FAST["lease_duration"]
# How long a client waits for a held write's answer: far past anything the
# gate or the server should take.
CLIENT_TIMEOUT = 30.0


class HeldWrite(threading.Thread):
    """One write of a shard through a replica's proxy, on its own thread:
    answer is (status, headers, body) or error the exception; sent and
    ended the monotonic times it went and either came."""

    def __init__(self, port, shard, value):
        super().__init__(daemon=True)
        self.port, self.shard, self.value = port, shard, value
        self.answer = self.error = self.sent = self.ended = None

    def run(self):
        self.sent = time.monotonic()
        try:
            self.answer = patch_pod(self.port, self.shard, self.value, CLIENT_TIMEOUT)
        except (OSError, http.client.HTTPException) as e:
            self.error = e
        self.ended = time.monotonic()


def patch_pod(port, shard, value, timeout=10.0):
    return proxy_request(port, "PATCH", POD % shard,
                         {"metadata": {"labels": {"written": value}}},
                         {"Content-Type": MERGE, "X-Leaderd-Shard": shard}, timeout)


class ShardGiveBackWithWritesInFlight(ts.ShardBase):
    n_shards = 4

    def setUp(self):
        super().setUp()
        self.proxy_port = {}
        for k in range(self.n_shards):
            self.api.control("POST", "pods", {"namespace": NS, "name": "app-%d" % k,
                                              "labels": {"app": "demo"}})

    def start_proxied(self, client):
        self.proxy_port[client] = free_port()
        return self.start(client, extra=["--api-proxy", "127.0.0.1:%d" % self.proxy_port[client],
                                         "--shard-drain", "0s"])

    def hold_writes(self, replica, shards, held_ms):
        """Makes the server hold replica's Pod patches for held_ms (admitted:
        a cut or a hang-up does not cancel them) and sends one write per
        shard through its proxy; returns {shard: HeldWrite} once the server
        holds them all."""
        self.api.set_faults(replica.client, latency_ms=held_ms, verbs=["patch"])
        held = {s: HeldWrite(self.proxy_port[replica.client], s, "held-%s" % s)
                for s in shards}
        for w in held.values():
            w.start()
        wait_until(lambda: self.api.held(replica.client, "patch") == len(held), 5,
                   what="the writes to be held in the API server")
        return held

    def owned(self, snap, client):
        rep = snap.get(client)
        return rep.doc["owned"] if rep and rep.status == 200 and rep.doc else None

    def assert_fenced(self):
        """Every Pod write the server applied came from the replica whose
        name the last write of that shard's Lease before it carried (a tie
        counts the Lease write first, see test_api_proxy)."""
        leases = self.api.write_log()
        writes = [w for w in self.api.pod_log() if w["client"] != "_control"]
        for w in writes:
            shard = w["pod"][len("app-"):]
            before = [e for e in leases if e["name"] == "%s-%s" % (GROUP, shard)
                      and e["clock_us"] <= w["clock_us"]]
            self.assertTrue(before, w)
            self.assertEqual(before[-1]["holderIdentity"], w["client"],
                             "write %s of shard %s by %s applied while the shard Lease "
                             "named %r (%s)" % (w["labels"], shard, w["client"],
                                                before[-1]["holderIdentity"], before[-1]))
        return writes

    def committed(self, shard):
        return next((w for w in self.api.pod_log()
                     if w["labels"].get("written") == "held-%s" % shard), None)

    def shard_writes(self, client, shard, since, holder=None):
        return [e for e in self.api.write_log(since)
                if e["client"] == client and e["name"] == "%s-%s" % (GROUP, shard)
                and (holder is None or e["holderIdentity"] == holder)]

    def assert_write_then_release(self, giver, taker, shard, since, bound):
        """Shard's held write (by giver) commits before taker's first claim of
        the shard's Lease, and giver's release of that Lease follows the
        commit. Returns the commit's log entry."""
        commit = None
        deadline = time.monotonic() + bound
        while commit is None:
            commit = self.committed(shard)
            self.assertLess(time.monotonic(), deadline,
                            "the held write of shard %s never committed" % shard)
            time.sleep(0.025)
        self.assertEqual(commit["client"], giver.client)
        claims = []
        while not claims:
            claims = self.shard_writes(taker.client, shard, since, taker.identity)
            self.assertLess(time.monotonic(), deadline + ts.GIVEN_BACK_BOUND + SCHED_SLACK,
                            "%s never took shard %s" % (taker.client, shard))
            time.sleep(0.025)
        self.assertLess(commit["clock_us"], claims[0]["clock_us"],
                        "the held write of shard %s committed %.3f s after %s's first "
                        "claim of it" % (shard, (commit["clock_us"] - claims[0]["clock_us"])
                                         / 1e6, taker.client))
        released = self.shard_writes(giver.client, shard, since, "")
        self.assertTrue(released, "shard %s was never released" % shard)
        self.assertGreater(released[0]["clock_us"], commit["clock_us"],
                           "shard %s was released before its write committed" % shard)
        return commit

    def assert_real_answer(self, w):
        w.join(10)
        self.assertFalse(w.is_alive())
        self.assertIsNone(w.error, w.error)
        status, _, body = w.answer
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["metadata"]["labels"]["written"], w.value)

    def test_a_rebalance_waits_for_the_held_writes_of_the_shards_given_back(self):
        """r1 owns all four shards, one write of each held in the server; r2
        joins and r1 gives two shards back. Per shard given back: its write
        commits before r2's first claim of it, the release follows the
        commit, and the app gets the server's answer; the kept shards' writes
        are answered too."""
        r1 = self.start_proxied("r1")
        owners, _ = self.wait_balanced()
        self.assertEqual(set(owners.values()), {"r1"})
        seq = self.log_seq()
        shards = sorted(owners)
        r2 = self.start_proxied("r2")
        joined = wait_until(lambda: next((e for e in self.api.write_log(seq)
                                          if e["name"] == "%s-member-r2" % GROUP), None),
                            5 + SCHED_SLACK, what="r2's member Lease")
        # The writes go STEP_DOWN_AFTER before the give-back is due.
        time.sleep(max(0.0, joined["clock_us"] / 1e6 + REBALANCE_DELAY - STEP_DOWN_AFTER
                       - time.monotonic()))
        held = self.hold_writes(r1, shards, HELD_MS)

        given = {}

        def giving_back(snap):
            mine = self.owned(snap, "r1")
            if mine is None:
                return None
            for s in shards:
                if s not in mine and s not in given:
                    given[s] = time.monotonic()
            return len(given) == 2
        self.watch.until(giving_back, ts.BALANCE_BOUND + SCHED_SLACK,
                         "r1 to stop claiming two shards")
        # The scenario needs the give-back while the writes are held.
        # The scenario needs the give-back while the writes are held.
        sent = [w.sent for w in held.values()]
        self.assertGreater(min(given.values()), max(sent),
                           "the give-back came before the writes: %s" % given)
        self.assertLess(max(given.values()), min(sent) + HELD_MS / 1000,
                        "the give-back came after the hold ended: %s" % given)
        for s in sorted(given):
            self.assert_write_then_release(r1, r2, s, seq, HELD_MS / 1000 + 2)
            self.assert_real_answer(held[s])
        for s in shards:
            if s not in given:
                self.assert_real_answer(held[s])
        owners, _ = self.wait_balanced(bound=ts.BALANCE_BOUND * ts.GRACE)
        self.assertEqual({s for s, o in owners.items() if o == "r2"}, set(given))
        self.assert_fenced()

    def test_sigterm_waits_for_the_held_write_of_each_shard(self):
        """r1 and r2 own two shards each; one write of each of r1's shards is
        held 1.5 s, and r1 gets SIGTERM 0.3 s after they were sent. Per
        shard: the write commits before r2's first claim, the release
        follows, and the app gets the server's answer; r1 exits 0."""
        r1 = self.start_proxied("r1")
        r2 = self.start_proxied("r2")
        owners, _ = self.wait_balanced()
        mine = sorted(s for s, o in owners.items() if o == "r1")
        seq = self.log_seq()
        held = self.hold_writes(r1, mine, HELD_MS)
        first = min(w.sent for w in held.values())
        time.sleep(max(0.0, first + STEP_DOWN_AFTER - time.monotonic()))
        r1.send(signal.SIGTERM)
        for s in mine:
            self.assert_write_then_release(r1, r2, s, seq, HELD_MS / 1000 + 2)
            self.assert_real_answer(held[s])
        self.assertEqual(r1.wait_exit(EXIT_BOUND + SCHED_SLACK), 0)
        self.assert_fenced()

    def test_sigterm_cuts_a_write_held_past_the_member_term_and_releases_nothing(self):
        """r1's write of one of its shards is held from just after a renewal
        of its member Lease until half-way between that renewal + the renew
        deadline (the member term's end) and + the lease duration; SIGTERM
        0.3 s after it was sent. The write is cut at the term's end, so the
        shard is not released: r2 takes it only lease-duration after r1's
        last write of the shard's or its member Lease, and the server's
        commit of the cut write still comes first."""
        r1 = self.start_proxied("r1")
        r2 = self.start_proxied("r2")
        owners, _ = self.wait_balanced()
        shard = min(s for s, o in owners.items() if o == "r1")
        seq = self.log_seq()
        member = "%s-member-r1" % GROUP
        renewal = None
        deadline = time.monotonic() + 2 * FAST["retry_period"] + SCHED_SLACK
        while renewal is None:
            renewal = next((e for e in self.api.write_log(seq) if e["name"] == member
                            and e["client"] == "r1"), None)
            self.assertLess(time.monotonic(), deadline, "no renewal of r1's member Lease")
            time.sleep(0.025)
        end = renewal["clock_us"] / 1e6 + (FAST["renew_deadline"]
                                           + FAST["lease_duration"]) / 2
        held = self.hold_writes(r1, [shard], int((end - time.monotonic()) * 1000))
        time.sleep(max(0.0, held[shard].sent + STEP_DOWN_AFTER - time.monotonic()))
        r1.send(signal.SIGTERM)

        w = held[shard]
        w.join(FAST["lease_duration"] + SCHED_SLACK)
        self.assertFalse(w.is_alive())
        claims = []
        bound = time.monotonic() + ts.DEAD_BOUND + SCHED_SLACK
        while not claims:
            claims = self.shard_writes("r2", shard, seq, r2.identity)
            self.assertLess(time.monotonic(), bound, "r2 never took shard %s" % shard)
            time.sleep(0.025)
        commit = wait_until(lambda: self.committed(shard),
                            max(0.0, end - time.monotonic()) + 2 + SCHED_SLACK,
                            what="the admitted write to commit")
        self.assertLess(commit["clock_us"], claims[0]["clock_us"],
                        "the cut write committed %.3f s after r2's first claim"
                        % ((commit["clock_us"] - claims[0]["clock_us"]) / 1e6))
        self.assertEqual(self.shard_writes("r1", shard, seq, ""), [],
                         "shard %s was released although its write was cut" % shard)
        last = [e for e in self.api.write_log(renewal["seq"] - 1)
                if e["client"] == "r1" and e["name"] in (member, "%s-%s" % (GROUP, shard))
                and e["verb"] != "delete" and e["clock_us"] < claims[0]["clock_us"]][-1]
        self.assertGreaterEqual(claims[0]["clock_us"] - last["clock_us"],
                                FAST["lease_duration"] * 1e6,
                                "shard %s taken %.3f s after r1's last write %s"
                                % (shard, (claims[0]["clock_us"] - last["clock_us"]) / 1e6,
                                   last))
        self.assertIsNone(w.error, w.error)
        status, _, body = w.answer
        self.assertEqual(status, 503, body)
        self.assertIn(b"cut", body)
        self.assertIsNotNone(r1.wait_exit(EXIT_BOUND + SCHED_SLACK))
        self.assert_fenced()


if __name__ == "__main__":
    unittest.main()
