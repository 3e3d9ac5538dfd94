# SPDX-License-Identifier: Apache-2.0
"""The command line contract: exit codes and one-line errors, and one full
election under valgrind (no leaks, no invalid accesses). Without valgrind the
valgrind test fails, unless LEADERD_ALLOW_SKIP=1 lets it be skipped (and
counted as skipped in the summary)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import unittest

from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import LEADERD, Replica, wait_until


def run(args, env=None, timeout=10):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("LEADERD_") and k not in ("KUBECONFIG", "POD_NAME",
                                                          "POD_NAMESPACE",
                                                          "KUBERNETES_SERVICE_HOST")}
    base.update(env or {})
    return subprocess.run([LEADERD] + args, capture_output=True, text=True, env=base,
                          timeout=timeout)


class CommandLine(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="leaderd-cli-")
        cls.kubeconfig = os.path.join(cls.dir, "kubeconfig")
        with open(cls.kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                    "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                    "users: [{name: u, user: {token: abc}}]\n"
                    "contexts: [{name: c, context: {cluster: k, user: u}}]\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def assertBad(self, args, fragment, env=None):
        p = run(args, env)
        self.assertEqual(p.returncode, 2, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn(fragment, lines[0])
        self.assertEqual(p.stdout, "")

    def good(self):
        return ["--lease-name", "x", "--kubeconfig", self.kubeconfig, "--identity", "me"]

    def test_version_and_help(self):
        p = run(["--version"])
        self.assertEqual(p.returncode, 0)
        self.assertTrue(p.stdout.startswith("leaderd "))
        p = run(["--help"])
        self.assertEqual(p.returncode, 0)
        for flag in ("--lease-name", "--namespace", "--identity", "--lease-duration",
                     "--renew-deadline", "--retry-period", "--listen", "--kubeconfig",
                     "--release-on-exit"):
            self.assertIn(flag, p.stdout)

    def test_invalid_configuration_exits_2(self):
        g = self.good()
        self.assertBad(g + ["--bogus"], "--bogus")
        self.assertBad(g + ["--lease-duration", "15x"], "--lease-duration")
        self.assertBad(g + ["--lease-duration", "10s", "--renew-deadline", "10s"],
                       "renew")
        self.assertBad(g + ["--renew-deadline", "2400ms", "--retry-period", "2s"],
                       "retry")
        self.assertBad(g + ["--lease-duration", "15500ms"], "lease-duration")
        self.assertBad(g + ["--retry-period", "500ms", "--renew-deadline", "700ms",
                            "--lease-duration", "1s"], "retry")
        self.assertBad(g + ["--identity", ""], "identity")
        self.assertBad(["--kubeconfig", self.kubeconfig], "lease-name")
        self.assertBad(g + ["--kubeconfig", "/nonexistent/kubeconfig"], "kubeconfig")
        self.assertBad(["--lease-name", "x", "--identity", "me"], "credentials")
        self.assertBad(g + ["--release-on-exit", "maybe"], "release-on-exit")
        self.assertBad(g, "LEADERD_RETRY_PERIOD", env={"LEADERD_RETRY_PERIOD": "zzz"})

    def test_a_port_in_use_exits_1(self):
        """What the system refuses is no configuration error: exit 1, one line."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            p = run(self.good() + ["--listen", f"127.0.0.1:{port}"])
        self.assertEqual(p.returncode, 1, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn(f"listen 127.0.0.1:{port}", lines[0])

    def test_flag_beats_environment(self):
        p = run(self.good() + ["--listen", "127.0.0.1:notaport"],
                env={"LEADERD_LISTEN": "127.0.0.1:4040"})
        self.assertEqual(p.returncode, 2)
        self.assertIn("--listen", p.stderr)


# Any definite or indirect leak, or any memory error, makes valgrind exit 99.
LEAK_EXIT = 99


def memcheck(log_path):
    return ["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect",
            "--errors-for-leak-kinds=definite,indirect", f"--error-exitcode={LEAK_EXIT}",
            f"--log-file={log_path}"]


class UnderValgrind(unittest.TestCase):
    def setUp(self):
        if shutil.which("valgrind"):
            return
        why = "valgrind is not installed (tools/deps.sh build installs it)"
        if os.environ.get("LEADERD_ALLOW_SKIP") == "1":
            raise unittest.SkipTest(why)
        raise AssertionError(why + "; LEADERD_ALLOW_SKIP=1 skips this test instead")

    def test_memcheck_catches_a_leak(self):
        # The options below must turn a leak into a failure, or the next test
        # proves nothing.
        d = tempfile.mkdtemp(prefix="leaderd-vg-probe-")
        try:
            src, exe = os.path.join(d, "leak.c"), os.path.join(d, "leak")
            with open(src, "w") as f:
                f.write(textwrap.dedent("""\
                    #include <stdlib.h>
                    void *volatile kept;
                    int main(void) { kept = malloc(64); kept = NULL; return 0; }
                    """))
            subprocess.run(["cc", "-O0", "-o", exe, src], check=True, timeout=60)
            vlog = os.path.join(d, "valgrind.log")
            p = subprocess.run(memcheck(vlog) + [exe], timeout=120)
            with open(vlog) as f:
                report = f.read()
            self.assertEqual(p.returncode, LEAK_EXIT, report[-3000:])
            self.assertIn("definitely lost: 64 bytes", report)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_election_and_release_clean_under_memcheck(self):
        d = tempfile.mkdtemp(prefix="leaderd-vg-")
        api = ApiServer(os.path.join(d, "api"), ["vg"])
        api.start()
        vlog = os.path.join(d, "valgrind.log")
        r = Replica(api, "vg", d, wrapper=memcheck(vlog))
        try:
            # valgrind runs leaderd some 20-50 times slower, more on a loaded
            # machine: the waits are for events, with room to spare.
            r.start(timeout=120)
            wait_until(r.is_leader, 60, what="leadership under valgrind")
            wait_until(lambda: api.write_log() and len(api.write_log()) >= 3, 60,
                       interval=0.2, what="a few renewals")
            rc = r.stop(signal.SIGTERM, timeout=120)
            with open(vlog) as f:
                report = f.read()
            self.assertEqual(rc, 0, report[-3000:])
            self.assertIn("ERROR SUMMARY: 0 errors", report, report[-3000:])
            self.assertEqual(api.get_lease("default", "demo")[1]["spec"]["holderIdentity"], "")
        finally:
            r.stop(signal.SIGKILL)
            api.stop()
            shutil.rmtree(d, ignore_errors=True)

    def test_shard_group_clean_under_memcheck(self):
        """Shard mode's library half (the shard host) and the daemon's table
        and hooks: a replica claims both shards, then gives them back and
        removes its member Lease on SIGTERM, with no leak or bad access."""
        d = tempfile.mkdtemp(prefix="leaderd-vg-shards-")
        api = ApiServer(os.path.join(d, "api"), ["vg"])
        api.start()
        vlog = os.path.join(d, "valgrind.log")
        r = Replica(api, "vg", d, lease="grp", extra_args=["--shards", "2"],
                    wrapper=memcheck(vlog))

        def owns_both():
            status, body = r.get("/shards", timeout=5)
            return status == 200 and json.loads(body)["owned"] == ["0", "1"]
        try:
            r.start(timeout=120)
            wait_until(owns_both, 90, interval=0.2, what="both shards under valgrind")
            rc = r.stop(signal.SIGTERM, timeout=120)
            with open(vlog) as f:
                report = f.read()
            self.assertEqual(rc, 0, report[-3000:])
            self.assertIn("ERROR SUMMARY: 0 errors", report, report[-3000:])
            for shard in ("0", "1"):
                lease = api.get_lease("default", f"grp-{shard}")[1]
                self.assertEqual(lease["spec"].get("holderIdentity", ""), "", lease)
            self.assertEqual(api.get_lease("default", "grp-member-vg")[0], 404)
        finally:
            r.stop(signal.SIGKILL)
            api.stop()
            shutil.rmtree(d, ignore_errors=True)



if __name__ == "__main__":
    unittest.main(verbosity=2)
