#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`make image-test`, arm64 half: the multi-arch image's other architecture,
without an arm64 machine. Checks the manifest list (one linux/amd64 and one
linux/arm64 image, the same settings), takes the arm64 image's leaderd out of
the image and checks its ELF header (arm64, static PIE), then runs it under
qemu-aarch64-static (Debian's qemu-user-static, no binfmt registration):
--version, exit status 2 on a bad flag, and a real election against the bundled
API server (build/leaderd-apiserver) beside two replicas of the amd64 image's
binary: the arm64 replica leads, is SIGKILLed and an amd64 one takes over; then
it comes back, the amd64 leader is SIGKILLed with the other amd64 replica gone,
and the arm64 one takes over. Every sample of the three /leader endpoints is
checked for one leader at a time (leaderd_testing.cluster.Watcher). Prints both
binaries' sizes. Every container and process started here is removed by ID/PID.
Ends with `arm64-test: N passed, N failed`.

Environment: LEADERD_IMAGE (the manifest list; its images are LEADERD_IMAGE-amd64
and LEADERD_IMAGE-arm64, tools/image/build-image.sh), LEADERD_IMAGE_DIR,
LEADERD_BUILD, as for image_test.py."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))  # leaderd_testing
sys.path.insert(0, HERE)  # image_test

import image_test  # noqa: E402
from image_test import check, log, podman  # noqa: E402
from leaderd_testing import foreign  # noqa: E402
from leaderd_testing.apiserver import ApiServer  # noqa: E402
from leaderd_testing.cluster import FAST, Replica, Watcher, proc_fields  # noqa: E402

IMAGE = os.environ.get("LEADERD_IMAGE", "localhost/leaderd:0.1.0")
ARCHS = ("amd64", "arm64")
# Emulated start-up (TLS handshakes in translated code) takes a few seconds; an
# emulated replica's attempts may come late. Bounds of liveness, not timings.
START_S = 30
TAKEOVER_S = FAST["lease_duration"] + 2 * FAST["retry_period"] + 10


class Safety:
    """What Watcher asserts with, as this script's failures rather than a
    unittest's: the first breach is kept and raised to end the election."""

    def __init__(self):
        self.breach = None

    def assertTrue(self, ok, msg=""):
        if not ok:
            self.breach = self.breach or msg
            raise AssertionError(msg)

    def assertGreaterEqual(self, a, b, msg=""):
        self.assertTrue(a >= b, msg)


def test_manifest():
    """The list names one image per architecture, each of that architecture and
    with the settings of the amd64 one."""
    p = image_test.podman("manifest", "inspect", IMAGE)
    if not check(p.returncode == 0, "manifest list %s exists" % IMAGE, p.stderr.strip()):
        return
    entries = json.loads(p.stdout).get("manifests", [])
    platforms = sorted("%s/%s" % (m["platform"]["os"], m["platform"]["architecture"])
                       for m in entries)
    check(platforms == ["linux/amd64", "linux/arm64"],
          "manifest list has linux/amd64 and linux/arm64", str(platforms))
    configs = {}
    for arch in ARCHS:
        p = podman("image", "inspect", "%s-%s" % (IMAGE, arch))
        if not check(p.returncode == 0, "image %s-%s exists" % (IMAGE, arch), p.stderr.strip()):
            continue
        info = json.loads(p.stdout)[0]
        configs[arch] = info.get("Config", {})
        check(info.get("Architecture") == arch and info.get("Os") == "linux",
              "%s image is linux/%s" % (arch, arch),
              "%s/%s" % (info.get("Os"), info.get("Architecture")))
        digest = info.get("Digest")
        listed = [m for m in entries if m["platform"]["architecture"] == arch]
        check(bool(listed) and listed[0].get("digest") == digest,
              "manifest list's %s entry is that image" % arch,
              "%s vs %s" % (listed[0].get("digest") if listed else None, digest))
        log("image %s-%s: %d bytes (%.2f MB) uncompressed"
            % (IMAGE, arch, info.get("Size", 0), info.get("Size", 0) / 1e6))
    # What a user runs by the list's name is the image of the machine's own architecture.
    p = podman("run", "--rm", IMAGE, "--version")
    check(p.returncode == 0 and p.stdout.startswith("leaderd "),
          "podman run of the list's name runs the %s image" % foreign.NATIVE,
          (p.stdout + p.stderr).strip()[:200])
    if len(configs) == 2:
        keys = ("User", "Entrypoint", "ExposedPorts", "Labels")
        same = {k: configs["amd64"].get(k) == configs["arm64"].get(k) for k in keys}
        check(all(same.values()), "arm64 image's user, entrypoint, ports and labels are amd64's",
              str([k for k, v in same.items() if not v]))


def extract_binary(arch, root):
    """The image's /usr/local/bin/leaderd for arch, copied to root (a container
    is created, never started: no emulator needed)."""
    cid = podman("create", "--arch", arch, "%s-%s" % (IMAGE, arch), check_rc=True).stdout.strip()
    dest = os.path.join(root, "leaderd-" + arch)
    try:
        podman("cp", cid + ":/usr/local/bin/leaderd", dest, check_rc=True)
    finally:
        podman("rm", "-f", cid)
    return dest


def test_binaries(binaries):
    for arch, path in binaries.items():
        head = foreign.elf_header(path)
        check(head == {"arch": arch, "type": "DYN", "interp": False},
              "%s binary is a static PIE for %s" % (arch, arch), str(head))
    sizes = {arch: os.path.getsize(p) for arch, p in binaries.items()}
    log("binary sizes: " + ", ".join("%s %d bytes (%d kB)" % (a, s, s // 1024)
                                      for a, s in sizes.items()))


def run(binary, *args):
    return subprocess.run(foreign.wrapper_for(binary) + [binary, *args], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_cli(binaries):
    arm, amd = binaries["arm64"], binaries["amd64"]
    p, native = run(arm, "--version"), run(amd, "--version")
    check(p.returncode == 0 and p.stdout.startswith("leaderd ") and p.stdout == native.stdout,
          "arm64 --version under qemu, same as amd64's", (p.stdout + p.stderr).strip())
    p = run(arm, "--lease-name", "x", "--no-such-flag")
    check(p.returncode == 2 and p.stderr.strip() and p.stderr.strip().count("\n") == 0,
          "arm64 bad flag exits 2 with one line", "exit %d, %r" % (p.returncode, p.stderr.strip()))
    p = run(arm, "--lease-name", "x", "--lease-duration", "15x")
    check(p.returncode == 2, "arm64 bad duration exits 2", "exit %d" % p.returncode)


def sees_leader(replica, name):
    """replica's /leader names name (it has read the Lease)."""
    status, doc = replica.leader()
    return status is not None and doc and doc.get("leader") == name


def print_rss(replicas):
    """Figures, not assertions: at the end of the election, not steady state
    (`make bench-footprint` has that); the arm64 one is qemu's process."""
    for r in replicas:
        if r.alive():
            st = proc_fields(r.proc.pid, ("VmRSS", "RssAnon", "RssFile"))
            how = "under qemu, the emulator's process" if r.wrapper else "native"
            log("%s: VmRSS %d kB (anonymous %d, file-backed %d), %s"
                % (r.client, st["VmRSS"], st["RssAnon"], st["RssFile"], how))


def election(root, binaries, watch, reps):
    """The mixed election; raises AssertionError at the first failed step."""
    arm, amd_b, amd_c = reps

    def until(pred, timeout, what):
        return watch.until(lambda snap, leaders: pred(leaders), timeout, what)

    arm.start(timeout=START_S)
    until(lambda leaders: leaders == [arm.client], START_S, "the arm64 replica to lead")
    check(True, "arm64 replica (qemu) leads")
    for r in (amd_b, amd_c):
        r.start(timeout=START_S)
    until(lambda _: all(sees_leader(r, arm.client) for r in (amd_b, amd_c)), START_S,
          "the amd64 replicas to see the arm64 leader")
    check(True, "amd64 replicas follow the arm64 leader")

    t0 = time.monotonic()
    arm.stop(signal.SIGKILL)
    new = until(lambda leaders: leaders[0] if len(leaders) == 1 else None, TAKEOVER_S,
                "an amd64 replica to take over")
    check(new in (amd_b.client, amd_c.client),
          "SIGKILL of the arm64 leader: amd64 %s took over in %.1f s" % (new, time.monotonic() - t0))
    leader = amd_b if new == amd_b.client else amd_c
    other = amd_c if leader is amd_b else amd_b

    # A new process: its term starts again from what it reads (as
    # tests/integration/test_election.py does on a restart).
    watch.last_term.pop(arm.client, None)
    arm.start(timeout=START_S)
    until(lambda _: sees_leader(arm, leader.client), START_S,
          "the restarted arm64 replica to see the amd64 leader")
    check(True, "restarted arm64 replica follows the amd64 leader")
    rc = other.stop(signal.SIGTERM)
    check(rc == 0, "amd64 standby %s left (SIGTERM, exit 0)" % other.client, "exit %s" % rc)
    t0 = time.monotonic()
    leader.stop(signal.SIGKILL)
    until(lambda leaders: leaders == [arm.client], TAKEOVER_S, "the arm64 replica to take over")
    check(True, "SIGKILL of the amd64 leader: the arm64 replica took over in %.1f s"
          % (time.monotonic() - t0))
    print_rss([arm])


def test_election(root, binaries):
    api = ApiServer(os.path.join(root, "api"), ["arm-a", "amd-b", "amd-c"], verbose=False)
    qemu = foreign.wrapper_for(binaries["arm64"])
    reps = [Replica(api, "arm-a", root, lease="arm64-test", binary=binaries["arm64"],
                    wrapper=qemu),
            Replica(api, "amd-b", root, lease="arm64-test", binary=binaries["amd64"]),
            Replica(api, "amd-c", root, lease="arm64-test", binary=binaries["amd64"])]
    safety = Safety()
    watch = Watcher(safety, reps)
    try:
        api.start()
        election(root, binaries, watch, reps)
        st, lease = api.get_lease("default", "arm64-test", client="arm-a")
        check(st == 200 and lease["spec"].get("holderIdentity") == "arm-a",
              "Lease names the arm64 replica", json.dumps(lease.get("spec") if lease else None))
    except AssertionError as e:
        check(False, "mixed election", str(e)[:600])
        for r in reps:
            log("--- log of %s:\n%s" % (r.client, r.log()[-2000:]))
    finally:
        for r in reps:
            r.stop(signal.SIGKILL)
        api.stop()
    check(safety.breach is None, "one leader at every sample (%d samples)" % watch.samples,
          str(safety.breach))


def main():
    root = tempfile.mkdtemp(prefix="leaderd-arm64-test.")
    try:
        test_manifest()
        binaries = {arch: extract_binary(arch, root) for arch in ARCHS}
        test_binaries(binaries)
        if not check(foreign.emulator("arm64") is not None,
                     "qemu-aarch64-static installed (qemu-user-static)"):
            raise RuntimeError("no emulator")
        test_cli(binaries)
        test_election(root, binaries)
    except Exception as e:  # a harness error is a failure, not a crash without summary
        check(False, "harness", "%s: %s" % (type(e).__name__, e))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    r = image_test.results
    print("arm64-test: %d passed, %d failed" % (r["passed"], r["failed"]))
    return 1 if r["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
