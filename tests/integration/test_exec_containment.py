# SPDX-License-Identifier: Apache-2.0
"""Integration tests of the exec child's containment: three replicas over
HTTPS against the bundled Lease API server, each with a shell command that
starts grandchildren which leave its process group and session (setsid, and
a daemon's double fork). Every process of the leader's command is gone
before the next leader's command starts, after SIGTERM and after POST
/resign; when the supervisor itself is killed, leaderd kills them all and
writes no release, so the Lease keeps its holder until it expires.

CgroupEscape runs a leader in a cgroup v2 of its own (a private mount and
cgroup namespace, cgroup2 mounted on /sys/fs/cgroup): processes of its
command that move themselves into leaderd's cgroup, or into one they make
beside it, are dead before the release (SIGTERM, resign) or the takeover
(renew deadline)."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import test_exec_child as ec
import test_resign as rs
from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import (EXIT_BOUND, KILL_BOUND, SCHED_SLACK, TERM_BOUND,
                                     Replica, stop_all, wait_until)

CLIENTS = ["r1", "r2", "r3"]

# The command, with the journal as $0. First it notes every process of the
# earlier commands that still runs ("alive PID NEWPID"): by then all of them
# must be gone. Then "start PID TERM IDENTITY", a grandchild in a session of
# its own and one through a double fork, each noting "gc PID IDENTITY".
COMMAND = r"""
J=$0
while read -r kind pid _; do
    case $kind in start|gc)
        if [ -r /proc/$pid/stat ] && read -r _ _ st _ < /proc/$pid/stat && [ "$st" != Z ]
        then echo "alive $pid $$" >> "$J"; fi;;
    esac
done < "$J"
echo "start $$ $LEADERD_TERM $LEADERD_IDENTITY" >> "$J"
setsid sh -c 'echo "gc $$ $LEADERD_IDENTITY" >> "$0"; exec sleep 1000' "$J" &
(setsid sh -c 'echo "gc $$ $LEADERD_IDENTITY" >> "$0"; exec sleep 1000' "$J" &)
while :; do sleep 0.05; done
"""


def ours(pid):
    """True while pid runs with a leaderd command's environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return ec.alive(pid) and b"LEADERD_IDENTITY=" in f.read()
    except OSError:
        return False


class ExecContainment(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-contain-")
        self.journal = os.path.join(self.dir, "journal")
        open(self.journal, "w").close()
        self.api = ApiServer(os.path.join(self.dir, "api"), CLIENTS)
        self.replicas = []
        self.supervisors = []
        self.api.start()
        cmd = ["--", "/bin/sh", "-c", COMMAND, self.journal]
        for c in CLIENTS:
            r = Replica(self.api, c, self.dir, extra_args=cmd)
            self.replicas.append(r)
            r.start()
            self.supervisors += ec.children_of(r.proc.pid)

    def tearDown(self):
        stop_all(self, self.replicas)
        # With leaderd gone each supervisor ends its command, then itself;
        # what is left after that is killed by pid.
        deadline = time.monotonic() + 10
        while any(ec.alive(p) for p in self.supervisors) and time.monotonic() < deadline:
            time.sleep(0.025)
        for pid in self.supervisors:
            if ec.alive(pid):
                os.kill(pid, signal.SIGKILL)
        for pid in self.pids():
            if ours(pid):
                os.kill(pid, signal.SIGKILL)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def lines(self):
        with open(self.journal) as f:
            return [line.split() for line in f.read().splitlines() if line.strip()]

    def pids(self, identity=None):
        """Every pid a command of identity (any, when None) noted."""
        return [int(e[1]) for e in self.lines()
                if e[0] == "start" and (identity is None or e[3] == identity)
                or e[0] == "gc" and (identity is None or e[2] == identity)]

    def starts(self):
        return [e for e in self.lines() if e[0] == "start"]

    def leader_with_command(self):
        """The replica whose command started first, once its grandchildren
        run; and the three pids of its command."""
        start = wait_until(lambda: self.starts()[:1], KILL_BOUND + SCHED_SLACK + 5,
                           what="the first command")[0]
        identity = start[3]
        leader = next(r for r in self.replicas if r.identity == identity)
        pids = wait_until(lambda: len(self.pids(identity)) == 3 and self.pids(identity), 5,
                          what="the grandchildren to start")
        for pid in pids:
            self.assertTrue(ec.alive(pid))
        wait_until(leader.is_leader, 5, what=f"{identity} to report leading")
        # One line at start says how the command is kept together.
        said = re.findall(
            r"containment: (?:cgroup v2 \(/\S+\)(?: and process tree \(subreaper\))?"
            r"|process tree \(subreaper\)): \S.*$",
            leader.log(), re.M)
        self.assertEqual(len(said), 1, leader.log())
        return leader, pids

    def assert_next_command_saw_none(self, old_identity, timeout):
        start = wait_until(lambda: self.starts()[1:2], timeout,
                           what="the next leader's command")[0]
        self.assertNotEqual(start[3], old_identity)
        alive = [e for e in self.lines() if e[0] == "alive"]
        self.assertEqual(alive, [], "processes of the old command ran when the next started")

    def test_sigterm_ends_every_process_before_the_next_command(self):
        leader, pids = self.leader_with_command()
        leader.send(signal.SIGTERM)
        self.assertEqual(leader.wait_exit(EXIT_BOUND + 10), 128 + signal.SIGTERM)
        self.assertEqual([p for p in pids if ec.alive(p)], [])
        self.assert_next_command_saw_none(leader.identity, TERM_BOUND + SCHED_SLACK + 5)

    def test_resign_ends_every_process_before_the_next_command(self):
        leader, pids = self.leader_with_command()
        status, _, _ = rs.post(leader.port, "/resign")
        self.assertEqual(status, 200)
        self.assert_next_command_saw_none(leader.identity, TERM_BOUND + SCHED_SLACK + 5)
        self.assertEqual([p for p in pids if ec.alive(p)], [])
        self.assertTrue(leader.alive(), "leaderd keeps contending")

    def test_supervisor_killed_leaves_nothing_and_no_release(self):
        leader, pids = self.leader_with_command()
        sups = ec.children_of(leader.proc.pid)
        self.assertEqual(len(sups), 1)
        os.kill(sups[0], signal.SIGKILL)
        self.assertEqual(leader.wait_exit(EXIT_BOUND + 5), 1)
        # leaderd exits only once it killed them all.
        self.assertEqual([p for p in pids if ec.alive(p)], [])
        releases = [w for w in self.api.write_log()
                    if w["client"] == leader.client and w["holderIdentity"] == ""]
        self.assertEqual(releases, [], "a release was written")
        status, lease = self.api.get_lease("default", "demo")
        self.assertEqual(status, 200)
        self.assertEqual(lease["spec"]["holderIdentity"], leader.identity)
        self.assert_next_command_saw_none(leader.identity, KILL_BOUND + SCHED_SLACK + 5)


# leaderd's wrapper, with the test's cgroup as $0 and leaderd's argv after:
# the shell moves itself into that cgroup, then (exec, so the pid stays
# leaderd's) into a new mount and cgroup namespace whose cgroup root is it,
# mounts cgroup2 there, and execs leaderd, alone in its cgroup.
WRAP = ('echo $$ > "$0/cgroup.procs" && exec unshare --mount --cgroup -- '
        'sh -c \'mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$@"\' sh "$@"')

# The command: one process moves itself into leaderd's cgroup (its parent,
# the supervisor, is in it), another into a cgroup it makes beside it; both
# leave the child's group and session; each notes "moved PID" once moved.
MOVES = r"""
J=$0
own=$(sed -n 's/^0:://p' /proc/$PPID/cgroup)
setsid sh -c 'echo $$ > "/sys/fs/cgroup$1/cgroup.procs" && echo "moved $$" >> "$0"
exec sleep 1000' "$J" "$own" &
setsid sh -c 'mkdir /sys/fs/cgroup/escape-$$ && echo $$ > /sys/fs/cgroup/escape-$$/cgroup.procs &&
echo "moved $$" >> "$0"; exec sleep 1000' "$J" &
while :; do sleep 0.05; done
"""

# Notes "PID MICROSECONDS" (CLOCK_MONOTONIC, the API server's clock_us) the
# moment each pid given ends, through pidfds: a process of its own, so no
# lock of the test's delays the note.
WATCHER = r"""
import os, select, sys, time
fds = {os.pidfd_open(int(p)): p for p in sys.argv[1:]}
print("ready", flush=True)
while fds:
    ready, _, _ = select.select(list(fds), [], [])
    now = time.monotonic_ns() // 1000
    for fd in ready:
        print(fds.pop(fd), now, flush=True)
"""


def cgroup2_mount():
    """A cgroup v2 mount this process may write, or None."""
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[2] == "cgroup2" and os.access(fields[1], os.W_OK):
                return fields[1]
    return None


def own_cgroup():
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip().rstrip("/")
    return None


def cgroup_of(pid):
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return next((l[3:].strip() for l in f if l.startswith("0::")), None)
    except OSError:
        return None


class CgroupEscape(unittest.TestCase):
    def setUp(self):
        self.cgroup = None
        if os.geteuid() != 0 or not shutil.which("unshare"):
            self.skipTest("needs root and unshare(1) to give leaderd a cgroup v2 of its own")
        if not hasattr(os, "pidfd_open"):
            self.skipTest("needs os.pidfd_open (Linux 5.3, Python 3.9)")
        mount, own = cgroup2_mount(), own_cgroup()
        if mount is None or own is None:
            self.skipTest("no writable cgroup v2 here")
        self.cgroup = os.path.join(mount + own, f"ld-escape-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.mkdir(self.cgroup)
        except OSError as e:
            self.cgroup = None
            self.skipTest(f"cannot make a cgroup v2 below {mount + own}: {e}")
        probe = subprocess.run(["sh", "-c", WRAP, self.cgroup, "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("cannot enter a cgroup namespace with cgroup2 mounted: "
                          + probe.stderr.decode(errors="replace").strip())
        self.dir = tempfile.mkdtemp(prefix="leaderd-escape-")
        self.journal = os.path.join(self.dir, "journal")
        open(self.journal, "w").close()
        self.api = ApiServer(os.path.join(self.dir, "api"), ["r1", "r2"])
        self.api.start()
        self.replicas = []
        self.watcher = None

    def tearDown(self):
        if self.cgroup is None:
            return
        if hasattr(self, "api"):
            stop_all(self, self.replicas)
            if self.watcher and self.watcher.poll() is None:
                self.watcher.kill()
                self.watcher.wait()
            self.api.stop()
            shutil.rmtree(self.dir, ignore_errors=True)
        # What is left in the test's cgroup is the test's: killed, then the
        # cgroups removed, deepest first.
        deadline = time.monotonic() + 10
        while os.path.exists(self.cgroup) and time.monotonic() < deadline:
            for top, dirs, _ in os.walk(self.cgroup, topdown=False):
                try:
                    with open(os.path.join(top, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            os.kill(int(pid), signal.SIGKILL)
                    os.rmdir(top)
                except OSError:
                    pass
            time.sleep(0.025)

    def start_leader(self):
        """r1, in the test's cgroup, leading with MOVES; returns the pids
        that moved, once they have, watched by self.watcher."""
        r1 = Replica(self.api, "r1", self.dir, wrapper=["sh", "-c", WRAP, self.cgroup],
                     extra_args=["--", "/bin/sh", "-c", MOVES, self.journal])
        self.replicas.append(r1)
        r1.start()
        wait_until(r1.is_leader, KILL_BOUND + SCHED_SLACK, what="r1 to lead")
        self.assertEqual(len(re.findall(r"containment: cgroup v2 \(", r1.log())), 1, r1.log())

        def moved():
            with open(self.journal) as f:
                pids = [int(l.split()[1]) for l in f if l.startswith("moved ")]
            return len(pids) == 2 and pids
        pids = wait_until(moved, 10, what="the command's processes to move")
        for pid in pids:
            where = cgroup_of(pid)
            # Out of the command's cgroup (child-N now, leaderd-PID-N before).
            name = os.path.basename(where or "")
            self.assertTrue(where and not name.startswith(("child-", "leaderd-")),
                            f"{pid} is in {where}")
        self.watcher = subprocess.Popen([sys.executable, "-c", WATCHER] + [str(p) for p in pids],
                                        stdout=subprocess.PIPE, text=True)
        self.assertEqual(self.watcher.stdout.readline().strip(), "ready")
        return r1, pids

    def deaths(self):
        """{pid: when it ended (clock_us)} for those that did, within 1 s."""
        try:
            out, _ = self.watcher.communicate(timeout=1)
        except subprocess.TimeoutExpired:
            self.watcher.kill()
            out, _ = self.watcher.communicate()
        return {int(p): int(t) for p, t in (l.split() for l in out.splitlines())}

    def first_write(self, client, holder, timeout):
        def found():
            return next((w for w in self.api.write_log()
                         if w["client"] == client and w["holderIdentity"] == holder), None)
        return wait_until(found, timeout, what=f"{client}'s write of holder {holder!r}")

    def assert_dead_before(self, pids, write):
        died = self.deaths()
        for pid in pids:
            self.assertIn(pid, died, f"{pid} outlived the {write['holderIdentity']!r} write")
            self.assertLess(died[pid], write["clock_us"],
                            f"{pid} ended after the {write['holderIdentity']!r} write")

    def test_sigterm_kills_them_before_the_release(self):
        leader, pids = self.start_leader()
        leader.send(signal.SIGTERM)
        self.assertEqual(leader.wait_exit(EXIT_BOUND + 10), 128 + signal.SIGTERM)
        self.assert_dead_before(pids, self.first_write("r1", "", 1))

    def test_resign_kills_them_before_the_release(self):
        leader, pids = self.start_leader()
        status, _, _ = rs.post(leader.port, "/resign")
        self.assertEqual(status, 200)
        self.assert_dead_before(pids, self.first_write("r1", "", TERM_BOUND + SCHED_SLACK))

    def test_renew_deadline_kills_them_before_the_takeover(self):
        leader, pids = self.start_leader()
        other = Replica(self.api, "r2", self.dir)
        self.replicas.append(other)
        other.start()
        self.api.set_faults(leader.client, partition="hang")
        takeover = self.first_write("r2", "r2", KILL_BOUND + SCHED_SLACK + 5)
        self.assert_dead_before(pids, takeover)


if __name__ == "__main__":
    unittest.main()
