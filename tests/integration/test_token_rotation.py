# SPDX-License-Identifier: Apache-2.0
"""A rotated bearer token is used from the next request on. Each replica reads
its token from a kubelet-style projected directory (token -> ..data/token,
..data -> a generation directory that a rotation replaces by renaming a new
link over it). A rotation issues a new token (the old one still accepted),
writes it there and then revokes the old one at once. The API server counts
which token every request presented: after the rewrite no request of that
client may present the old one (so no 401 either), for the leader, which
renews, and for watching standbys, whose next request is the takeover, and
the election carries on."""
import json
import os
import re
import shutil
import signal
import tempfile
import time
import unittest

from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import (EXIT_BOUND, FAST, KILL_BOUND, SCHED_SLACK, TERM_BOUND,
                                     Replica, Watcher, stop_all, wait_until)

CLIENTS = ["t1", "t2", "t3"]
RETRY = FAST["retry_period"]
# The old token stays valid until the test revokes it right after the rewrite.
GRACE_MS = 600000
WATCHING = 2 * RETRY + SCHED_SLACK + 5


class ProjectedToken:
    """DIR/token -> ..data/token, ..data -> ..gen-N, as the kubelet lays out a
    projected service-account token; write() swaps ..data atomically."""

    def __init__(self, dir, token):
        self.dir = dir
        self.gen = 0
        os.makedirs(dir, mode=0o700)
        self.write(token)
        os.symlink("..data/token", self.path)

    @property
    def path(self):
        return os.path.join(self.dir, "token")

    def write(self, token):
        self.gen += 1
        gen = "..gen-%d" % self.gen
        os.mkdir(os.path.join(self.dir, gen), 0o700)
        with open(os.path.join(self.dir, gen, "token"), "w") as f:
            f.write(token)
        tmp = os.path.join(self.dir, "..data_tmp")
        os.symlink(gen, tmp)
        os.rename(tmp, os.path.join(self.dir, "..data"))


def write_token_file_kubeconfig(path, api, user, token_file):
    lines = ["apiVersion: v1", "kind: Config", "clusters:", "- name: test", "  cluster:",
             "    server: " + json.dumps(api.url),
             "    certificate-authority: " + json.dumps(api.ca),
             "users:", "- name: " + json.dumps(user), "  user:",
             "    tokenFile: " + json.dumps(token_file),
             "contexts:", "- name: test", "  context:", "    cluster: test",
             "    user: " + json.dumps(user), "    namespace: default",
             "current-context: test"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)


class TokenFileReplica(Replica):
    """A replica whose kubeconfig names a token file instead of the server's
    inline-token kubeconfig."""

    def __init__(self, api, client, workdir, kubeconfig):
        super().__init__(api, client, workdir)
        self.kubeconfig_path = kubeconfig

    def argv(self):
        argv = super().argv()
        argv[argv.index("--kubeconfig") + 1] = self.kubeconfig_path
        return argv


def outcome_count(stats, client, outcome):
    return sum(codes.get(outcome, 0) for codes in stats.get(client, {}).values())


class TokenRotation(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-token-")
        self.api = ApiServer(os.path.join(self.dir, "api"), CLIENTS)
        self.replicas = []
        self.tokens = {}
        try:
            self.api.start()
            for c in CLIENTS:
                self.tokens[c] = ProjectedToken(os.path.join(self.dir, "sa-" + c),
                                                self.api.token(c))
                kc = os.path.join(self.dir, "kubeconfig-" + c)
                write_token_file_kubeconfig(kc, self.api, c, self.tokens[c].path)
                self.replicas.append(TokenFileReplica(self.api, c, self.dir, kc).start())
        except BaseException:
            self.stop_replicas()
            raise
        self.watch = Watcher(self, self.replicas)

    def tearDown(self):
        self.stop_replicas()

    def stop_replicas(self):
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def uses(self):
        """{client: {"current": N, "stale": N}}: which token requests presented."""
        return self.api.control("GET", "tokens")

    def leader(self):
        client = self.watch.one_leader(KILL_BOUND + SCHED_SLACK + 2)
        return next(r for r in self.replicas if r.client == client)

    def metric(self, replica, name):
        status, body = replica.get("/metrics")
        m = re.search(rf"^{re.escape(name)} (\S+)$", body.decode(), re.M) if body else None
        return float(m.group(1)) if m else None

    def await_renewal(self, replica):
        """Returns right after the server stored a renewal by replica, so that
        none of its requests is in flight for most of a retry period."""
        seq = max([e["seq"] for e in self.api.write_log()] or [0])

        def renewed():
            return any(e["client"] == replica.client and e["verb"] == "update"
                       for e in self.api.write_log(since=seq))
        wait_until(renewed, 3 * RETRY + SCHED_SLACK, interval=0.01,
                   what=f"a renewal by {replica.client}")

    def assert_old_token_unused(self, clients, uses0, stats0):
        uses1, stats1 = self.uses(), self.api.stats()
        for c in clients:
            self.assertEqual(uses1[c]["stale"], uses0[c]["stale"],
                             f"{c} presented its old token after the rewrite: "
                             f"{uses0[c]} -> {uses1[c]}")
            self.assertEqual(outcome_count(stats1, c, "401"), outcome_count(stats0, c, "401"),
                             f"{c} got a 401 after the rewrite: {stats1.get(c)}")
        return uses1, stats1

    def test_leader_renews_with_the_rewritten_token(self):
        leader = self.leader()
        term = self.watch.last_claim[0]
        self.await_renewal(leader)
        new = self.api.rotate_token(leader.client, grace_ms=GRACE_MS)
        uses0, stats0 = self.uses(), self.api.stats()
        self.tokens[leader.client].write(new)
        self.api.control("POST", "revoke", {"client": leader.client, "previous": True})

        end = time.monotonic() + 5 * RETRY
        while time.monotonic() < end:
            snap, leaders = self.watch.poll()
            self.assertLessEqual(set(leaders), {leader.client},
                                 f"leadership moved on a token rotation: {snap}")
            time.sleep(0.025)
        self.assertEqual(self.watch.last_claim, (term, leader.client))

        uses1, stats1 = self.assert_old_token_unused([leader.client], uses0, stats0)
        renewed = outcome_count(stats1, leader.client, "200") - \
            outcome_count(stats0, leader.client, "200")
        # Five retry periods: a loaded machine may delay some renewals.
        self.assertGreaterEqual(renewed, 2, stats1.get(leader.client))
        self.assertGreaterEqual(uses1[leader.client]["current"] -
                                uses0[leader.client]["current"], renewed)

    def test_watching_standbys_take_over_with_the_rewritten_token(self):
        leader = self.leader()
        standbys = [r for r in self.replicas if r is not leader]
        # A standby holding a healthy watch makes no other request, so the
        # takeover below is the first request after the rewrite.
        wait_until(lambda: all((self.metric(r, "leaderd_watch_events_total") or 0) > 0
                               for r in standbys), WATCHING,
                   what="watch events on the standbys")
        new = {r.client: self.api.rotate_token(r.client, grace_ms=GRACE_MS)
               for r in standbys}
        uses0, stats0 = self.uses(), self.api.stats()
        for r in standbys:
            self.tokens[r.client].write(new[r.client])
        for r in standbys:
            self.api.control("POST", "revoke", {"client": r.client, "previous": True})

        leader.send(signal.SIGTERM)

        def other(snap, leaders):
            return leaders[0] if leaders and leaders[0] != leader.client else None
        winner = self.watch.until(other, TERM_BOUND + SCHED_SLACK + 2, "a new leader")
        self.assertEqual(leader.wait_exit(EXIT_BOUND + 10), 0)
        self.watch.for_duration(3 * RETRY)
        self.assertEqual(self.watch.last_claim[1], winner)

        clients = [r.client for r in standbys]
        uses1, stats1 = self.assert_old_token_unused(clients, uses0, stats0)
        self.assertGreater(uses1[winner]["current"], uses0[winner]["current"])
        took = outcome_count(stats1, winner, "200") - outcome_count(stats0, winner, "200")
        self.assertGreaterEqual(took, 1, stats1.get(winner))


if __name__ == "__main__":
    unittest.main()
