# SPDX-License-Identifier: Apache-2.0
"""Integration tests of `leaderd [flags] -- CMD`: three replicas over HTTPS
against the bundled Lease API server, each running a small Python child that
records its life in a shared journal. Only the leader runs a child; a child
is gone before the next replica's starts, also when its leaderd is killed,
stopped or partitioned; signals and exit statuses pass through, the child's
starts and ends are counted on /metrics, and a replica restarted in place
waits a lease duration before running its command again."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import (EXIT_BOUND, FAST, KILL_BOUND, LEADERD, SCHED_SLACK,
                                     TERM_BOUND, Replica, stop_all, wait_until)

CLIENTS = ["r1", "r2", "r3"]
# The default --child-grace: half of lease-duration - renew-deadline.
GRACE = (FAST["lease_duration"] - FAST["renew_deadline"]) / 2
# The child of a leader that can no longer act is killed at the latest
# renew-deadline + grace after its last renewal began, which was before the
# fault was injected.
REAP_BOUND = FAST["renew_deadline"] + GRACE

# The child: appends "start PID TERM IDENTITY LEASE T" once, "beat PID T"
# every 50 ms, "term PID T" on SIGTERM and "sig PID SIGNO T" on SIGHUP, SIGQUIT,
# SIGUSR1 or SIGUSR2 (T is time.monotonic(), the same clock for every process on
# the machine). MODE says what it does next:
# "run" runs until SIGTERM, then exits 3; "exit7" exits 7 after a second;
# "kill9" kills itself with SIGKILL after a second; "stubborn" ignores SIGTERM.
CHILD = r"""
import os, signal, sys, time
path, mode = sys.argv[1], sys.argv[2]
def note(line):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (line + "\n").encode())
    os.close(fd)
me = os.getpid()
def on_term(signo, frame):
    note(f"term {me} {time.monotonic():.6f}")
    if mode != "stubborn":
        os._exit(3)
signal.signal(signal.SIGTERM, on_term)
def on_other(signo, frame):
    note(f"sig {me} {signo} {time.monotonic():.6f}")
for s in (signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(s, on_other)
note(f"start {me} {os.environ['LEADERD_TERM']} {os.environ['LEADERD_IDENTITY']} "
     f"{os.environ['LEADERD_LEASE']} {time.monotonic():.6f}")
started = time.monotonic()
while True:
    note(f"beat {me} {time.monotonic():.6f}")
    if mode in ("exit7", "kill9") and time.monotonic() - started > 1.0:
        if mode == "exit7":
            os._exit(7)
        os.kill(me, signal.SIGKILL)
    time.sleep(0.05)
"""


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children_of(pid):
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(name))
    return out


class Journal:
    """The children's shared record, parsed."""

    def __init__(self, path):
        self.path = path

    def entries(self):
        try:
            with open(self.path) as f:
                lines = f.read().splitlines()
        except OSError:
            return []
        return [line.split() for line in lines if line.strip()]

    def starts(self):
        """[(pid, term, identity, lease, t)] in order."""
        return [(int(e[1]), int(e[2]), e[3], e[4], float(e[5]))
                for e in self.entries() if e[0] == "start" and len(e) == 6]

    def last_seen(self, pid):
        """The latest time pid wrote anything."""
        ts = [float(e[-1]) for e in self.entries() if len(e) >= 3 and e[1] == str(pid)]
        return max(ts) if ts else None

    def terms(self, pid):
        return [float(e[2]) for e in self.entries() if e[0] == "term" and e[1] == str(pid)]

    def signals(self, pid):
        """The signal numbers pid noted, in order."""
        return [int(e[2]) for e in self.entries() if e[0] == "sig" and e[1] == str(pid)]


def metric(replica, series):
    """The value of the /metrics sample named exactly series, or None."""
    status, body = replica.get("/metrics")
    if status != 200:
        return None
    for line in body.decode().splitlines():
        name, _, value = line.rpartition(" ")
        if name == series:
            return float(value)
    return None


class ExecChild(unittest.TestCase):
    mode = "run"

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-exec-")
        self.journal = Journal(os.path.join(self.dir, "journal"))
        self.api = ApiServer(os.path.join(self.dir, "api"), CLIENTS)
        self.replicas = []
        self.supervisors = {}  # client -> the pids of its supervisor
        self.stopped = []

    def start(self, mode, clients=CLIENTS):
        self.api.start()
        for c in clients:
            self.start_replica(c, mode)

    def start_replica(self, client, mode):
        cmd = ["--", sys.executable, "-c", CHILD, self.journal.path, mode]
        r = Replica(self.api, client, self.dir, extra_args=cmd)
        self.replicas.append(r)
        r.start()
        self.supervisors.setdefault(client, []).extend(children_of(r.proc.pid))
        return r

    def tearDown(self):
        for r in self.stopped:
            r.send(signal.SIGCONT)
        stop_all(self, self.replicas)
        # Whatever is left of the children's groups and their supervisors.
        for pid, *_ in self.journal.starts():
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in sum(self.supervisors.values(), []):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def replica(self, identity):
        return next(r for r in self.replicas if r.identity == identity)

    def first_start(self, after=0, timeout=KILL_BOUND + SCHED_SLACK + 5):
        """The first child started after the after-th start."""
        return wait_until(lambda: self.journal.starts()[after:after + 1], timeout,
                          what=f"child number {after + 1} to start")[0]

    def assert_gone_before(self, old_pid, new_start):
        """old_pid was dead when the next child started: its last record is
        older than the start, and it is not running now."""
        pid, _, _, _, t = new_start
        self.assertFalse(alive(old_pid), f"child {old_pid} still runs after {pid} started")
        last = self.journal.last_seen(old_pid)
        self.assertLess(last, t, f"child {old_pid} wrote at {last}, after {pid} started at {t}")

    def leader_with_child(self):
        pid, term, identity, lease, _ = self.first_start()
        leader = self.replica(identity)
        wait_until(leader.is_leader, 5, what=f"{identity} to report leading")
        status, doc = leader.leader()
        self.assertEqual(doc["term"], term)
        self.assertEqual(lease, "default/demo")
        return leader, pid

    def test_only_the_leader_runs_the_child(self):
        self.start("run")
        leader, pid = self.leader_with_child()
        time.sleep(3 * FAST["retry_period"])  # an interval with renewals in it
        starts = self.journal.starts()
        self.assertEqual([s[0] for s in starts], [pid], "one child, the leader's")
        self.assertTrue(alive(pid))
        # The child is in its own process group, under the supervisor.
        self.assertEqual(os.getpgid(pid), pid)
        self.assertEqual(len(self.supervisors[leader.client]), 1)
        self.assertEqual(children_of(self.supervisors[leader.client][0]), [pid])
        for r in self.replicas:
            status, doc = r.leader()
            self.assertEqual(status == 200, r is leader)

    def test_sigterm_passes_to_the_child_then_releases(self):
        self.start("run")
        leader, pid = self.leader_with_child()
        leader.send(signal.SIGTERM)
        rc = leader.wait_exit(EXIT_BOUND + 10)
        self.assertEqual(rc, 3, "leaderd exits with the child's status")
        self.assertEqual(len(self.journal.terms(pid)), 1, "the child got SIGTERM")
        release = [w for w in self.api.write_log()
                   if w["client"] == leader.client and w["holderIdentity"] == ""]
        self.assertEqual(len(release), 1, "the Lease was released")
        new = self.first_start(after=1, timeout=TERM_BOUND + SCHED_SLACK + 5)
        self.assertNotEqual(new[2], leader.identity)
        self.assert_gone_before(pid, new)

    def test_child_exit_status_passes_through(self):
        self.start("exit7")
        leader, pid = self.leader_with_child()
        self.assertEqual(leader.wait_exit(EXIT_BOUND + 10), 7)
        release = [w for w in self.api.write_log()
                   if w["client"] == leader.client and w["holderIdentity"] == ""]
        self.assertEqual(len(release), 1, "released after the child's own exit")
        new = self.first_start(after=1, timeout=TERM_BOUND + SCHED_SLACK + 5)
        self.assert_gone_before(pid, new)

    def test_child_killed_by_a_signal_is_128_plus_it(self):
        self.start("kill9")
        leader, pid = self.leader_with_child()
        self.assertEqual(leader.wait_exit(EXIT_BOUND + 10), 128 + 9)

    def lost_leader(self, fault):
        """Applies fault to the leader; returns its child and the time."""
        self.start("stubborn")  # SIGTERM alone would not stop it
        leader, pid = self.leader_with_child()
        fault(leader)
        return leader, pid, time.monotonic()

    def check_takeover(self, leader, pid, faulted_at):
        wait_until(lambda: not alive(pid), REAP_BOUND + SCHED_SLACK + 2,
                   what=f"child {pid} to be killed")
        gone = time.monotonic() - faulted_at
        self.assertLess(gone, REAP_BOUND + SCHED_SLACK, f"child lived {gone:.2f}s on")
        new = self.first_start(after=1, timeout=KILL_BOUND + SCHED_SLACK + 5)
        self.assertNotEqual(new[2], leader.identity)
        self.assert_gone_before(pid, new)
        return new

    def test_sigkill_of_leaderd_kills_the_child_in_time(self):
        leader, pid, at = self.lost_leader(lambda r: r.send(signal.SIGKILL))
        self.check_takeover(leader, pid, at)
        # The supervisor ends once its child is gone.
        sups = self.supervisors[leader.client]
        wait_until(lambda: not any(alive(s) for s in sups), 5,
                   what="the dead leaderd's supervisor to exit")

    def test_sigstop_of_leaderd_kills_the_child_in_time(self):
        def stop(r):
            self.stopped.append(r)
            r.send(signal.SIGSTOP)
        leader, pid, at = self.lost_leader(stop)
        new = self.check_takeover(leader, pid, at)
        # Resumed, it follows the new leader and starts no child of its own.
        leader.send(signal.SIGCONT)
        wait_until(lambda: leader.leader()[1] and leader.leader()[1]["leader"] == new[2], 10,
                   what="the resumed replica to follow")
        time.sleep(2 * FAST["retry_period"])
        self.assertEqual(len(self.journal.starts()), 2)

    def test_partitioned_leader_loses_its_child_before_a_takeover(self):
        leader, pid, at = self.lost_leader(
            lambda r: self.api.set_faults(r.client, partition="hang"))
        self.check_takeover(leader, pid, at)
        self.assertTrue(leader.alive(), "leaderd keeps contending")

    def test_other_signals_reach_the_child_and_leaderd_goes_on(self):
        self.start("run", clients=["r1"])
        leader, pid = self.leader_with_child()
        for sig in (signal.SIGUSR1, signal.SIGHUP):
            before = len(self.journal.signals(pid))
            leader.send(sig)
            wait_until(lambda: len(self.journal.signals(pid)) > before, 5,
                       what=f"the child to note signal {int(sig)}")
            self.assertEqual(self.journal.signals(pid)[-1], int(sig))
        self.assertTrue(leader.alive(), "leaderd keeps running")
        self.assertTrue(leader.is_leader())
        self.assertTrue(alive(pid))
        self.assertEqual([s[0] for s in self.journal.starts()], [pid])
        self.assertEqual(self.journal.terms(pid), [], "no SIGTERM came with them")

    def test_metrics_count_a_start_and_an_end_at_the_deadline(self):
        self.start("run", clients=["r1"])
        leader, pid = self.leader_with_child()
        series = {r: f'leaderd_child_exits_total{{reason="{r}"}}'
                  for r in ("exited", "signaled", "deadline")}
        self.assertEqual(metric(leader, "leaderd_child_starts_total"), 1)
        for s in series.values():
            self.assertEqual(metric(leader, s), 0, s)
        # Cut off from the API, the leader's leadership ends at its renew
        # deadline and the supervisor ends the child: a "deadline" end.
        self.api.set_faults(leader.client, partition="hang")
        wait_until(lambda: not alive(pid), REAP_BOUND + SCHED_SLACK + 2,
                   what=f"child {pid} to be stopped")
        wait_until(lambda: metric(leader, series["deadline"]) == 1, 5,
                   what="the deadline end to be counted")
        self.assertEqual(metric(leader, series["exited"]), 0)
        self.assertEqual(metric(leader, series["signaled"]), 0)
        # Back in touch it leads again and starts a second child.
        self.api.clear_faults(leader.client)
        self.first_start(after=1)
        wait_until(lambda: metric(leader, "leaderd_child_starts_total") == 2, 5,
                   what="the second start to be counted")

    def test_restart_in_place_waits_a_lease_duration(self):
        self.start("run", clients=["r1"])
        old, pid = self.leader_with_child()
        old.send(signal.SIGKILL)
        old.wait_exit(5)
        # Same identity, same Lease: the new leaderd finds its own name in a
        # record it did not write, as after a restart of its container.
        launched = time.monotonic()
        self.start_replica("r1", "run")
        new = self.first_start(after=1, timeout=FAST["lease_duration"] + KILL_BOUND + 5)
        self.assertGreaterEqual(new[4] - launched, FAST["lease_duration"],
                                "the command started before a lease duration had passed")
        self.assertEqual(new[2], "r1")
        self.assert_gone_before(pid, new)


class ChildGraceFlag(unittest.TestCase):
    def run_leaderd(self, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEADERD_")}
        return subprocess.run([LEADERD, "--lease-name", "x", "--kubeconfig",
                               os.path.join(os.path.dirname(__file__), "..", "data",
                                            "kubeconfig")] + list(args),
                              capture_output=True, text=True, timeout=10, env=env)

    def test_grace_out_of_range_exits_2(self):
        for grace in ("0s", "5s", "-1s"):
            p = self.run_leaderd("--child-grace", grace, "--", "true")
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn("--child-grace", p.stderr)


if __name__ == "__main__":
    unittest.main()
