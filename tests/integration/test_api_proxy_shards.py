"""A shard's give-back and the API write gate (--shards with --api-proxy):
writes of a shard held in the API server (a "hang" partition of the Pod
patches of one replica) when that replica gives the shard back, on a
rebalance when a second replica joins and on SIGTERM.

What happens, by the code (mode_shards.c, proxy_upstream.c): a give-back
first ends the claim of the shard and publishes it; from then on a new write
of the shard gets 503 from the gate, and the proxy's upstream thread, woken
by that publish, cuts a write of the shard still in flight (503 Status
"write cut", its connection reset, so the server drops it unapplied); the
release of the shard Lease is written only after the drain and once no
write of the shard is in flight (the release hold, hook_proxy.c). A held
write of a shard the replica keeps runs on and gets the server's answer
when let go. So a held write never outlasts the claim, and a give-back is
never given up for it: the release goes out however long the server would
have held the write. (A hold past the renew deadline, whose release is
given up and tried again a lease duration later, needs a hold the gate
cannot make; check_mode_shards drives it with a probe hook.)

Checked strictly, from the API server's logs: every Pod write it applied
came from the holder of its shard's Lease at that moment (the Lease writes
and the Pod label log share the server's clock_us); a cut write reached
the server and was dropped there; the release is the giving replica's only
write of that shard Lease; at every poll, no two replicas claim a shard
(test_shards.ShardWatcher)."""
import http.client
import signal
import threading
import time
import unittest

import test_shards as ts
from leaderd_testing.cluster import EXIT_BOUND, SCHED_SLACK, free_port
from test_api_proxy import MERGE, NS, metric, proxy_request

GROUP = ts.GROUP
POD = "/api/v1/namespaces/%s/pods/app-%%s" % NS
# The drain of test_shards.Drain: as long as the flag allows, so that the
# checks made between the claim's end and the release have time.
DRAIN = ts.RENEW - 0.5
# How long a client waits for a held write's answer: far past anything the
# gate or the server should take, so that a quick answer proves a cut.
CLIENT_TIMEOUT = 30.0


class HeldWrite(threading.Thread):
    """One write of a shard through a replica's proxy, on its own thread:
    answer is (status, headers, body) or error the exception, ended the
    monotonic time either came."""

    def __init__(self, port, shard, value):
        super().__init__(daemon=True)
        self.port, self.shard, self.value = port, shard, value
        self.answer = self.error = self.ended = None

    def run(self):
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
    n_shards = 2

    def setUp(self):
        super().setUp()
        self.proxy_port = {}
        for k in range(self.n_shards):
            self.api.control("POST", "pods", {"namespace": NS, "name": "app-%d" % k,
                                              "labels": {"app": "demo"}})

    def start_proxied(self, client, drain):
        self.proxy_port[client] = free_port()
        return self.start(client, extra=["--api-proxy", "127.0.0.1:%d" % self.proxy_port[client],
                                         "--shard-drain", "%dms" % int(drain * 1000)])

    def hold_writes(self, replica, shards):
        """Holds replica's Pod patches in the API server (until it hangs up
        or the fault is cleared) and sends one write per shard through its
        proxy; returns {shard: HeldWrite}."""
        self.api.set_faults(replica.client, partition="hang", verbs=["patch"])
        held = {s: HeldWrite(self.proxy_port[replica.client], s, "held-%s" % s)
                for s in shards}
        for w in held.values():
            w.start()
        # The server counts a request only at its end, so its arrival cannot
        # be awaited: a second for loopback TLS; the server's statistics
        # confirm afterwards that each write got there (assert_cut).
        time.sleep(1.0)
        for s, w in held.items():
            self.assertTrue(w.is_alive(), "the write of shard %s was not held: %r"
                            % (s, w.answer or w.error))
        return held

    def owned(self, snap, client):
        rep = snap.get(client)
        return rep.doc["owned"] if rep and rep.status == 200 and rep.doc else None

    def assert_cut(self, w):
        """w ended as a cut: the gate's 503 Status saying so, long before the
        hold would have ended by itself."""
        self.assertIsNone(w.error, w.error)
        status, headers, body = w.answer
        self.assertEqual(status, 503, body)
        self.assertTrue(headers.get("content-type", "").startswith("application/json"))
        self.assertIn(b'"reason":"ServiceUnavailable"', body)
        self.assertIn(b"write cut by leaderd", body)

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

    def applied(self, value):
        return [w for w in self.api.pod_log() if w["labels"].get("written") == value]

    def disconnected(self, client):
        return self.api.stats().get(client, {}).get("patch", {}).get("disconnected", 0)

    def own_shard_writes(self, client, shard, since):
        return [e for e in self.api.write_log(since)
                if e["client"] == client and e["name"] == "%s-%s" % (GROUP, shard)]

    def test_rebalance_cuts_the_held_write_and_releases_after_the_drain(self):
        """r1 owns both shards, one write of each held in the server; r2
        joins and r1 gives one shard S back. S's write is cut at the claim's
        end; during the drain S's Lease still names r1, nobody claims S, and
        a new write of S gets 503; the kept shard's write is untouched and,
        let go, answered by the server; the release follows the app's word
        (POST /shards/S/drained), and r2 takes S and writes it."""
        r1 = self.start_proxied("r1", DRAIN)
        owners, _ = self.wait_balanced()
        self.assertEqual(owners, {"0": "r1", "1": "r1"})
        seq = self.log_seq()
        held = self.hold_writes(r1, ["0", "1"])
        self.start_proxied("r2", DRAIN)

        ended = {}

        def giving_back(snap):
            mine = self.owned(snap, "r1")
            if mine is None:
                return None
            for s in ("0", "1"):
                if s not in mine and s not in ended:
                    ended[s] = time.monotonic()
            return len(ended) == 1 and next(iter(ended))
        give, _ = self.watch.until(giving_back, ts.BALANCE_BOUND + SCHED_SLACK,
                                   "r1 to stop claiming one shard")
        keep = "1" if give == "0" else "0"

        # The held write of S is cut at the claim's end (within the drain,
        # before any release could go).
        cut = held[give]
        cut.join(DRAIN)
        self.assertFalse(cut.is_alive(), "the held write of shard %s outlived its claim"
                         % give)
        self.assert_cut(cut)
        # The drain: S's Lease still names r1, r1 no longer claims it and
        # nobody else does; a new write of S gets the gate's 503.
        self.assertEqual(self.holders()[give], "r1")
        self.assertEqual(r1.get("/shards/%s" % give)[0], 503)
        r2 = next(r for r in self.replicas if r.client == "r2")
        self.assertEqual(r2.get("/shards/%s" % give)[0], 503)
        status, _, body = patch_pod(self.proxy_port["r1"], give, "refused")
        self.assertEqual(status, 503, body)
        self.assertNotIn(b"write cut", body)
        # The kept shard's write is still held, its claim untouched.
        self.assertTrue(held[keep].is_alive(), "the held write of kept shard %s ended: %r"
                        % (keep, held[keep].answer or held[keep].error))
        seq_drained = self.log_seq()
        self.assertEqual(self.own_shard_writes("r1", give, seq), [],
                         "shard %s released during the drain" % give)
        # Still being given back (409 otherwise): the release had not gone.
        status, doc = ts.post(r1, "/shards/%s/drained" % give)
        self.assertEqual(status, 200, doc)

        # Let the kept shard's write go: the server's answer comes back.
        self.api.clear_faults("r1")
        held[keep].join(10 + SCHED_SLACK)
        self.assertFalse(held[keep].is_alive())
        self.assertIsNone(held[keep].error, held[keep].error)
        status, _, body = held[keep].answer
        self.assertEqual(status, 200, body)

        owners, _ = self.wait_balanced(bound=ts.BALANCE_BOUND * ts.GRACE)
        self.assertEqual(owners, {give: "r2", keep: "r1"})
        # r1's one write of S's Lease: the release, after the app's word.
        mine = self.own_shard_writes("r1", give, seq)
        self.assertEqual([e["holderIdentity"] for e in mine], [""], mine)
        self.assertGreater(mine[0]["seq"], seq_drained)
        taken = [e for e in self.api.write_log(mine[0]["seq"])
                 if e["name"] == "%s-%s" % (GROUP, give)]
        self.assertEqual([(e["client"], e["holderIdentity"]) for e in taken], [("r2", "r2")])
        # S's writes now pass through r2's proxy.
        status, _, body = patch_pod(self.proxy_port["r2"], give, "by-r2")
        self.assertEqual(status, 200, body)

        writes = self.assert_fenced()
        self.assertEqual(self.applied("held-%s" % give), [], "the cut write was applied")
        self.assertEqual([w["client"] for w in self.applied("held-%s" % keep)], ["r1"])
        self.assertEqual([w["client"] for w in self.applied("by-r2")], ["r2"])
        self.assertEqual(len(writes), 2, writes)
        # The cut write had reached the server, which saw it go.
        self.assertEqual(self.disconnected("r1"), 1, self.api.stats())
        self.assertEqual(metric(r1, "leaderd_proxy_writes_aborted_total"), 1)

    def test_without_a_drain_the_release_waits_for_the_cut(self):
        """--shard-drain 0s: the release would go at the claim's end but for
        the write held in the server; r1's log shows the write cut before
        the give-back's release, and the release is written (not given up),
        so r2 takes the shard within the hand-over bound."""
        r1 = self.start_proxied("r1", 0)
        owners, _ = self.wait_balanced()
        self.assertEqual(owners, {"0": "r1", "1": "r1"})
        seq = self.log_seq()
        held = self.hold_writes(r1, ["0", "1"])
        self.start_proxied("r2", 0)

        def moved(snap):
            mine = self.owned(snap, "r1")
            return mine is not None and len(mine) == 1 and ("1" if mine == ["0"] else "0")
        give, _ = self.watch.until(moved, ts.BALANCE_BOUND + SCHED_SLACK,
                                   "r1 to give one shard back")
        keep = "1" if give == "0" else "0"
        t_given = time.monotonic()
        held[give].join(ts.RENEW)
        self.assertFalse(held[give].is_alive(), "the held write of shard %s outlived its "
                         "claim" % give)
        self.assert_cut(held[give])
        owners, _ = self.wait_balanced(t_given, ts.GIVEN_BACK_BOUND * ts.GRACE)
        self.assertEqual(owners, {give: "r2", keep: "r1"})

        mine = self.own_shard_writes("r1", give, seq)
        self.assertEqual([e["holderIdentity"] for e in mine], [""], mine)
        # One process, one append-only log: the upstream thread logs the cut
        # before it ends the write's count; the shell logs the give-back only
        # once its hold finds no write left, right before the release.
        log = r1.log()
        cut_at = log.find("api proxy: cut PATCH %s" % (POD % give))
        release_at = log.find("shard %s: assigned to r2; giving it back" % give)
        self.assertNotEqual(cut_at, -1, log[-4000:])
        self.assertNotEqual(release_at, -1, log[-4000:])
        self.assertLess(cut_at, release_at, "the release went before the write was cut")
        self.assertNotIn("given up", log)

        self.api.clear_faults("r1")
        held[keep].join(10 + SCHED_SLACK)
        self.assertFalse(held[keep].is_alive())
        self.assertEqual(held[keep].answer[0], 200, held[keep].answer)
        self.assert_fenced()
        self.assertEqual(self.applied("held-%s" % give), [], "the cut write was applied")
        self.assertEqual(self.disconnected("r1"), 1, self.api.stats())

    def test_sigterm_cuts_a_write_held_past_the_renew_deadline_and_releases(self):
        """r1 and r2 own a shard each; r1's write of its shard is held in
        the server with no end (it would outlast the renew deadline, the
        bound of a release hold); r1 gets SIGTERM with --shard-drain 0s. The
        write is cut at the claim's end, so nothing is left to give up: the
        release is written, the member Lease deleted, r1 exits 0, and r2
        takes the shard within the hand-over bound."""
        r1 = self.start_proxied("r1", 0)
        r2 = self.start_proxied("r2", 0)
        owners, _ = self.wait_balanced()
        give = next(s for s, o in owners.items() if o == "r1")
        seq = self.log_seq()
        held = self.hold_writes(r1, [give])

        t_term = time.monotonic()
        r1.send(signal.SIGTERM)
        held[give].join(ts.RENEW)
        self.assertFalse(held[give].is_alive(), "the held write outlived the claim")
        self.assert_cut(held[give])
        self.assertEqual(r1.wait_exit(EXIT_BOUND + SCHED_SLACK), 0)
        owners, _ = self.wait_balanced(t_term, ts.GIVEN_BACK_BOUND * ts.GRACE)
        self.assertEqual(set(owners.values()), {"r2"})

        mine = self.own_shard_writes("r1", give, seq)
        self.assertEqual([e["holderIdentity"] for e in mine], [""], mine)
        log = self.api.write_log(seq)
        taken = [e for e in log if e["name"] == "%s-%s" % (GROUP, give)
                 and e["seq"] > mine[0]["seq"]]
        self.assertEqual([(e["client"], e["holderIdentity"]) for e in taken][:1],
                         [("r2", "r2")])
        # Not given up: the member Lease was released and deleted.
        self.assertNotIn("%s-member-r1" % GROUP, self.leases())
        self.assertNotIn("given up", r1.log())
        status, _, body = patch_pod(self.proxy_port["r2"], give, "by-r2")
        self.assertEqual(status, 200, body)
        self.assert_fenced()
        self.assertEqual(self.applied("held-%s" % give), [], "the cut write was applied")
        self.assertEqual(self.disconnected("r1"), 1, self.api.stats())


if __name__ == "__main__":
    unittest.main()
