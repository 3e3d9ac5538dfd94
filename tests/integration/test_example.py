# SPDX-License-Identifier: Apache-2.0
"""Integration tests of the library's example programs, built by `make examples`
against an installed libleaderd (headers and leaderd.pc only), against the bundled
Lease API server over HTTPS. examples/elect.c: two copies elect themselves, the
leader is stopped with SIGTERM and releases the Lease, the other takes over.
examples/shards.c: two members share a shard group, each shard claimed by exactly
one; the first is stopped with SIGTERM, gives its shards back and removes its member
Lease, and the other claims them all."""
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from leaderd_testing.apiserver import REPO, ApiServer

# The example is built into the normal build tree even when the daemon under test
# is another one (build/san): it is a consumer of the installed library.
BUILDS = [d for d in (os.environ.get("LEADERD_BUILD") or "", os.path.join(REPO, "build")) if d]
# The example runs client-go's default timings (lease 15 s, renew 10 s, retry 2 s).
RETRY = 2.0
RENEW = 10.0
# A released Lease is taken at the standby's next poll: one retry period, jittered
# by up to 1.2, plus a request, doubled for a loaded machine (7.2 s); still half the
# lease duration, so a leader that exits without releasing fails the test.
TAKEOVER_BOUND = 2 * (1.2 * RETRY + 0.6)
# A fresh pair elects someone with the first requests.
FIRST_BOUND = 15.0
# The release write is bounded by renew_deadline.
EXIT_BOUND = RENEW + 5.0


def example_binary(name="elect"):
    for build in BUILDS:
        path = os.path.join(build, "examples", name)
        if os.access(path, os.X_OK):
            return path
    return None


class Elector:
    """One example process (examples/elect unless argv says otherwise); its
    stdout and stderr are read line by line."""

    def __init__(self, binary, api, identity, argv=None):
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
        self.identity = identity
        self.lines = []
        self._buf = b""
        self.proc = subprocess.Popen(
            [binary, api.kubeconfig(identity)] + (argv or ["default", "demo", identity]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env)

    def fileno(self):
        return self.proc.stdout.fileno()

    def pump(self):
        """Reads what is available (the caller saw the pipe readable); False at EOF."""
        chunk = os.read(self.fileno(), 4096)
        self._buf += chunk
        while b"\n" in self._buf:
            line, _, self._buf = self._buf.partition(b"\n")
            self.lines.append(line.decode(errors="replace"))
        return bool(chunk)

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


def wait_line(electors, pattern, timeout):
    """Waits until a line of one of electors matches pattern (a regex); returns
    (elector, match). Lines already read count. Raises AssertionError on timeout."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    open_ = list(electors)
    while True:
        for el in electors:
            for line in el.lines:
                m = regex.search(line)
                if m:
                    return el, m
        left = deadline - time.monotonic()
        if left <= 0 or not open_:
            seen = {el.identity: el.lines for el in electors}
            raise AssertionError(f"no line matching {pattern!r} within {timeout:.1f}s: {seen}")
        ready, _, _ = select.select(open_, [], [], left)
        for el in ready:
            if not el.pump():
                open_.remove(el)


class ExampleElect(unittest.TestCase):
    def setUp(self):
        self.binary = example_binary()
        if self.binary is None:
            self.skipTest("examples/elect is not built (make examples)")
        self.dir = tempfile.mkdtemp(prefix="leaderd-example-")
        self.api = ApiServer(os.path.join(self.dir, "api"), ["a", "b"])
        self.electors = []

    def tearDown(self):
        for el in self.electors:
            el.kill()
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_failover_on_sigterm(self):
        self.api.start()
        self.electors = [Elector(self.binary, self.api, n) for n in ("a", "b")]
        first, m = wait_line(self.electors, r"^started leading \(term (\d+)\)$", FIRST_BOUND)
        first_term = int(m.group(1))
        other = self.electors[1] if first is self.electors[0] else self.electors[0]
        wait_line([other], r'^new leader "%s" \(term %d\)$' % (first.identity, first_term),
                  FIRST_BOUND)
        self.assertFalse(any(l.startswith("started leading") for l in other.lines),
                         other.lines)

        os.kill(first.proc.pid, signal.SIGTERM)
        wait_line([first], r"^stopped leading: shutting down \(term %d\)$" % first_term,
                  EXIT_BOUND)
        self.assertEqual(first.proc.wait(timeout=EXIT_BOUND), 0, first.lines)
        # Well before the 15 s lease could expire: only a release explains it.
        _, m = wait_line([other], r"^started leading \(term (\d+)\)$", TAKEOVER_BOUND)
        second_term = int(m.group(1))
        self.assertGreater(second_term, first_term)

        status, lease = self.api.get_lease("default", "demo")
        self.assertEqual(status, 200)
        self.assertEqual(lease["spec"]["holderIdentity"], other.identity)
        self.assertEqual(lease["spec"]["leaseTransitions"], second_term)
        self.assertIsNone(other.proc.poll(), "the new leader exited")

    def test_usage_error(self):
        p = subprocess.run([self.binary, "only-one-argument"], capture_output=True,
                           text=True, timeout=10)
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage:", p.stderr)

    def test_bad_kubeconfig(self):
        missing = os.path.join(self.dir, "no-such-kubeconfig")
        p = subprocess.run([self.binary, missing, "default", "demo", "a"],
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 1)
        self.assertTrue(p.stderr.startswith("elect: "), p.stderr)


SHARDS = 4
# A member that joins a group whose shards are all held waits a retry period and
# a second, and a rebalance towards it waits up to a lease duration, then the
# drain (one retry period) and the take: about 21 s at client-go's timings,
# doubled for a loaded machine.
SPLIT_BOUND = 45.0
# A member that exits gives its shards back after the drain (2 s); the other
# takes them on its next list, within a retry period or two.
HANDOVER_BOUND = 2.0 + 4 * (1.2 * RETRY + 0.6)


def claims(elector):
    """The shards elector's lines say it claims now."""
    held = set()
    for line in elector.lines:
        m = re.match(r"^(claimed|gave back) shard (\S+)$", line)
        if m and m.group(1) == "claimed":
            held.add(m.group(2))
        elif m:
            held.discard(m.group(2))
    return held


def wait_claims(members, want, timeout):
    """Waits until each member's claims are want[i] (a predicate on its set, or
    on every set at once when want is a function of a list). Raises
    AssertionError with every member's lines on timeout."""
    deadline = time.monotonic() + timeout
    open_ = list(members)
    while not want([claims(m) for m in members]):
        left = deadline - time.monotonic()
        if left <= 0 or not open_:
            seen = {m.identity: m.lines for m in members}
            raise AssertionError(f"claims not as wanted within {timeout:.1f}s: {seen}")
        ready, _, _ = select.select(open_, [], [], left)
        for m in ready:
            if not m.pump():
                open_.remove(m)


class ExampleShards(unittest.TestCase):
    def setUp(self):
        self.binary = example_binary("shards")
        if self.binary is None:
            self.skipTest("examples/shards is not built (make examples)")
        self.dir = tempfile.mkdtemp(prefix="leaderd-example-shards-")
        self.api = ApiServer(os.path.join(self.dir, "api"), ["a", "b"])
        self.members = []

    def tearDown(self):
        for m in self.members:
            m.kill()
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def member(self, name):
        m = Elector(self.binary, self.api, name, ["default", "work", name, str(SHARDS)])
        self.members.append(m)
        return m

    def test_two_members_share_the_shards_and_one_hands_over_on_sigterm(self):
        every = {str(k) for k in range(SHARDS)}
        self.api.start()
        a, b = self.member("a"), self.member("b")

        def split(sets):
            return (sets[0] | sets[1] == every and not sets[0] & sets[1]
                    and len(sets[0]) == len(sets[1]))
        wait_claims([a, b], split, SPLIT_BOUND)
        # The API server agrees: each shard's Lease names the member that claims it.
        for who in (a, b):
            for shard in claims(who):
                status, lease = self.api.get_lease("default", f"work-{shard}")
                self.assertEqual(status, 200)
                self.assertEqual(lease["spec"]["holderIdentity"], who.identity)

        os.kill(a.proc.pid, signal.SIGTERM)
        self.assertEqual(a.proc.wait(timeout=EXIT_BOUND), 0, a.lines)
        a.pump()
        self.assertEqual(claims(a), set(), a.lines)
        wait_claims([b], lambda sets: sets[0] == every, HANDOVER_BOUND)
        status, _ = self.api.get_lease("default", "work-member-a")
        self.assertEqual(status, 404, "a's member Lease outlived its exit")
        self.assertIsNone(b.proc.poll(), "b exited")

    def test_usage_error(self):
        for argv in (["only-one-argument"], ["k", "ns", "g", "id", "0"],
                     ["k", "ns", "g", "id", "4x"]):
            p = subprocess.run([self.binary] + argv, capture_output=True, text=True,
                               timeout=10)
            self.assertEqual(p.returncode, 2, argv)
            self.assertIn("usage:", p.stderr)


if __name__ == "__main__":
    unittest.main()
