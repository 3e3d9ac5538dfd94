#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`make image-test`: runs the leaderd image with podman (no Docker engine) and checks
what users rely on: --version, exit status 2 on a bad flag, the image's own settings
(numeric non-root user, no shell, size), and a real election between two containers
on the host network against the bundled Lease API server (build/leaderd-apiserver,
test-only): one in-cluster style (service-account files + KUBERNETES_SERVICE_*), one
with a kubeconfig. Then /leader, /healthz, /readyz and /metrics of both, leaderd's RSS
inside the container (checked right after start, and printed again in steady state,
once leaderd has dropped its start-up code's page-table entries), and the SIGTERM
handover; then the image's libcurl speaking HTTP/2 (its nghttp2) to nghttpx, which
terminates TLS and HTTP/2 in front of the API server. Containers run with a read-only root
filesystem and no capabilities, as in deploy/. Every container and process started
here is removed by ID/PID. Ends with `image-test: N passed, N failed`.

Environment: LEADERD_IMAGE (image name), LEADERD_IMAGE_DIR (podman storage, see
tools/image/ctr.sh), LEADERD_BUILD (where leaderd-apiserver is),
LEADERD_IMAGE_MAX_BYTES / LEADERD_IMAGE_MAX_RSS_KIB (limits, default 8 MB / 5 MiB,
the targets of the image). Measured (musl image): 3.5 MB image; VmRSS about 3.4 MiB
right after start, of which about 0.8 MiB is anonymous memory and the rest the
binary's own clean, shared text pages (the kernel maps them around each touched
page, so the size of the code in the binary shows up in RSS; hence the slimmed
OpenSSL build in the Dockerfile). Steady state (printed, never asserted: a figure,
not a timed bound): about 2.3 MiB once start-up code is dropped
(cmd/leaderd/core/memtrim.c, 15 s after start).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))  # leaderd_testing

from leaderd_testing.apiserver import ApiServer, write_kubeconfig  # noqa: E402

IMAGE = os.environ.get("LEADERD_IMAGE", "localhost/leaderd:0.1.0")
MAX_BYTES = int(os.environ.get("LEADERD_IMAGE_MAX_BYTES", str(8 * 1000 * 1000)))
MAX_RSS_KIB = int(os.environ.get("LEADERD_IMAGE_MAX_RSS_KIB", "5120"))
CTR = os.path.join(HERE, "ctr.sh")
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
LEASE = "image-test"
# Short timings so the test takes seconds (lease > renew > 1.2 x retry).
TIMINGS = ["--lease-duration=4s", "--renew-deadline=3s", "--retry-period=1s"]
HANDOVER_BOUND = 1.2 * 1.0 + 1.0  # 1.2 x retry-period, plus 1 s of slack
# leaderd drops start-up code's page-table entries 15 s after start
# (LD_MEMTRIM_STARTUP_MS); the wait for that drop, with room for a loaded machine.
DROP_WAIT_S = 45
# Steady state after the drop: this many of the leader's renewals (retry-period 1 s).
STEADY_RENEWALS = 3

results = {"passed": 0, "failed": 0}


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def check(ok, what, detail=""):
    results["passed" if ok else "failed"] += 1
    log("%s %s%s" % ("ok  " if ok else "FAIL", what, (": " + detail) if detail else ""))
    return ok


def podman(*args, timeout=60, check_rc=False):
    proc = subprocess.run([CTR, "podman", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if check_rc and proc.returncode != 0:
        raise RuntimeError("podman %s: exit %d: %s" % (" ".join(args[:2]), proc.returncode,
                                                        proc.stderr.strip()))
    return proc


def curl(url, timeout=2):
    """(status code, body) with the curl binary, as an app container would ask."""
    proc = subprocess.run(["curl", "-s", "-m", str(timeout), "-o", "-", "-w", "\n%{http_code}",
                           url], capture_output=True, text=True, timeout=timeout + 5)
    body, _, code = proc.stdout.rpartition("\n")
    return int(code or 0), body


def wait_until(predicate, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_kib(pid):
    """VmRSS, RssAnon and RssFile of pid in KiB."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1])
    return out


def proc_uid(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Uid:"):
                return line.split()[1:]
    return None


class Container:
    def __init__(self, name, port, run_args, args):
        self.name = name
        self.port = port
        self.run_args = run_args
        self.args = args
        self.id = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self):
        # Hardened like deploy/: read-only root, no capabilities, no privilege gain.
        proc = podman("run", "-d", "--network", "host", "--read-only", "--cap-drop", "ALL",
                      "--security-opt", "no-new-privileges", *self.run_args, IMAGE,
                      "--lease-name", LEASE, "--listen", "127.0.0.1:%d" % self.port,
                      *TIMINGS, *self.args, check_rc=True)
        self.id = proc.stdout.strip()
        return self

    def pid(self):
        out = podman("inspect", "--format", "{{.State.Pid}}", self.id).stdout.strip()
        return int(out) if out.isdigit() and out != "0" else None

    def leader(self):
        code, body = curl(self.url + "/leader")
        try:
            return code, json.loads(body)
        except ValueError:
            return code, None

    def logs(self):
        return podman("logs", self.id).stderr[-2000:]

    def remove(self):
        if self.id:
            podman("rm", "-f", "-t", "0", self.id)
            self.id = None


def test_cli():
    p = podman("run", "--rm", IMAGE, "--version")
    check(p.returncode == 0 and p.stdout.startswith("leaderd "), "--version",
          (p.stdout + p.stderr).strip())
    p = podman("run", "--rm", IMAGE, "--lease-name", "x", "--no-such-flag")
    check(p.returncode == 2 and p.stderr.strip().count("\n") == 0 and p.stderr.strip(),
          "bad flag exits 2 with one line", "exit %d, %r" % (p.returncode, p.stderr.strip()))
    p = podman("run", "--rm", IMAGE, "--lease-name", "x", "--lease-duration", "15x")
    check(p.returncode == 2, "bad duration exits 2", "exit %d" % p.returncode)
    p = podman("run", "--rm", "--entrypoint", "/bin/sh", IMAGE, "-c", "true")
    check(p.returncode != 0, "no shell in the image", "exit %d" % p.returncode)


def test_image_config():
    info = json.loads(podman("image", "inspect", IMAGE, check_rc=True).stdout)[0]
    cfg = info.get("Config", {})
    size = info.get("Size", 0)
    log("image %s: %d bytes (%.2f MB) uncompressed, %d layer(s)"
        % (IMAGE, size, size / 1e6, len(info.get("RootFS", {}).get("Layers", []))))
    check(size < MAX_BYTES, "image under %.1f MB" % (MAX_BYTES / 1e6), "%d bytes" % size)
    check(cfg.get("User") == "65532:65532", "numeric non-root USER", repr(cfg.get("User")))
    check(cfg.get("Entrypoint") == ["/usr/local/bin/leaderd"], "exec-form entrypoint",
          repr(cfg.get("Entrypoint")))


def test_licences(root):
    """The licence texts of everything in the static binary ship in the image
    (docs/image.md, "Licences"), libmicrohttpd's LGPL among them."""
    cid = podman("create", IMAGE, check_rc=True).stdout.strip()
    try:
        dest = os.path.join(root, "licenses")
        p = podman("cp", cid + ":/usr/share/licenses/leaderd", dest)
        names = sorted(os.listdir(dest)) if p.returncode == 0 else []
    finally:
        podman("rm", "-f", cid)
    want = ["leaderd.LICENSE", "libmicrohttpd.copyright", "curl.copyright",
            "nghttp2.copyright"]
    missing = [n for n in want if n not in names]
    check(not missing, "licence texts in /usr/share/licenses/leaderd",
          "missing %s among %s" % (missing, names))
    lgpl = os.path.join(dest, "libmicrohttpd.copyright")
    text = open(lgpl, encoding="utf-8", errors="replace").read() if not missing else ""
    check("LGPL" in text, "libmicrohttpd's LGPL notice shipped", "no LGPL in its copyright")


def make_sa_dir(root, srv, client):
    """Service-account files as the kubelet mounts them."""
    sa = os.path.join(root, "sa-" + client)
    os.makedirs(sa)
    shutil.copy(srv.ca, os.path.join(sa, "ca.crt"))
    with open(os.path.join(sa, "token"), "w") as f:
        f.write(srv.token(client))
    with open(os.path.join(sa, "namespace"), "w") as f:
        f.write("default")
    for name in os.listdir(sa):
        os.chmod(os.path.join(sa, name), 0o644)
    os.chmod(sa, 0o755)
    return sa


def readable_by_all(root):
    """The kubeconfigs name the CA and certificates by absolute path: the directory is
    mounted read-only at the same path, and the container user (65532) must read it."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)


def one_leader(containers, timeout):
    """[(code, body)] of every container's /leader once exactly one answers 200, or None."""
    def snapshot():
        snap = [c.leader() for c in containers]
        return snap if sum(code == 200 for code, _ in snap) == 1 else None
    return wait_until(snapshot, timeout)


def renew_time(srv):
    st, lease = srv.get_lease("default", LEASE, client="pod-a")
    return lease["spec"].get("renewTime") if st == 200 and lease else None


def steady_state_rss(srv, containers):
    """Prints each container's VmRSS once its start-up code was dropped (its
    file-backed RSS falls) and the leader renewed STEADY_RENEWALS more times:
    the figure a pod pays for the rest of its life."""
    first = {}
    for c in containers:
        pid = c.pid()
        if pid is not None:
            first[c.name] = (pid, status_kib(pid).get("RssFile", 0))
    dropped = wait_until(lambda: all(status_kib(pid).get("RssFile", 0) < file_kib
                                     for pid, file_kib in first.values()), DROP_WAIT_S,
                         interval=0.2)
    if not dropped:
        log("steady-state RSS: no drop of start-up code seen within %d s" % DROP_WAIT_S)
        return
    seen = {renew_time(srv)}

    def renewed():
        seen.add(renew_time(srv))
        return len(seen) > STEADY_RENEWALS
    wait_until(renewed, STEADY_RENEWALS * 2 + 10, interval=0.2)
    for c in containers:
        pid, _ = first.get(c.name, (None, 0))
        if pid is None:
            continue
        mem = status_kib(pid)
        log("%s: leaderd VmRSS %d KiB (%.2f MiB; anonymous %d KiB, file-backed %d KiB) in"
            " steady state, start-up code dropped, after %d more renewals"
            % (c.name, mem["VmRSS"], mem["VmRSS"] / 1024.0, mem.get("RssAnon", -1),
               mem.get("RssFile", -1), len(seen) - 1))


def test_election(root):
    srv = ApiServer(os.path.join(root, "api"), ["pod-a", "pod-b"], verbose=False)
    containers = []
    try:
        srv.start()
        readable_by_all(root)
        sa = make_sa_dir(root, srv, "pod-a")
        a = Container("pod-a", free_port(), [
            "-v", "%s:%s:ro" % (sa, SA_PATH),
            "-e", "KUBERNETES_SERVICE_HOST=127.0.0.1",
            "-e", "KUBERNETES_SERVICE_PORT=%d" % srv.port,
            "-e", "POD_NAME=pod-a", "-e", "POD_NAMESPACE=default"], [])
        b = Container("pod-b", free_port(), ["-v", "%s:%s:ro" % (srv.dir, srv.dir)],
                      ["--identity", "pod-b", "--kubeconfig", srv.kubeconfig("pod-b")])
        for c in (a, b):
            containers.append(c.start())
            log("started %s (in-cluster config)" % c.name if c is a else
                "started %s (kubeconfig)" % c.name)

        ready = wait_until(lambda: all(curl(c.url + "/readyz")[0] == 200 for c in containers),
                           15)
        if not check(ready, "both containers answer /readyz 200"):
            for c in containers:
                log("%s logs:\n%s" % (c.name, c.logs()))
            return
        snap = one_leader(containers, 10)
        if not check(bool(snap), "exactly one /leader 200"):
            return
        leader, standby = (a, b) if snap[0][0] == 200 else (b, a)
        lbody, sbody = (snap[0][1], snap[1][1]) if leader is a else (snap[1][1], snap[0][1])
        log("leader %s, standby %s" % (leader.name, standby.name))
        check(lbody and lbody.get("is_leader") is True and lbody.get("leader") == leader.name
              and lbody.get("lease") == "default/" + LEASE, "leader's /leader body",
              json.dumps(lbody))
        code = curl(standby.url + "/leader")[0]
        check(code == 503, "standby's /leader is 503", str(code))
        st, lease = srv.get_lease("default", LEASE, client="pod-a")
        check(st == 200 and lease["spec"].get("holderIdentity") == leader.name,
              "Lease names the leader", json.dumps(lease.get("spec") if lease else None))

        for c in containers:
            code, body = curl(c.url + "/healthz")
            check(code == 200 and body.strip() == "ok", "%s /healthz" % c.name,
                  "%d %r" % (code, body[:80]))
            code, body = curl(c.url + "/metrics")
            want = 1 if c is leader else 0
            line = 'leader_election_master_status{name="%s"} %d' % (LEASE, want)
            check(code == 200 and line in body and "# TYPE" in body,
                  "%s /metrics has %s" % (c.name, line), "status %d" % code)
            code, body = curl(c.url + "/")
            check(code == 200 and json.loads(body or "{}").get("name") == leader.name,
                  "%s / names the leader" % c.name, body[:80])

        for c in containers:
            pid = c.pid()
            if not check(pid is not None, "%s has a host PID" % c.name):
                continue
            mem = status_kib(pid)
            rss = mem.get("VmRSS")
            log("%s: leaderd VmRSS %d KiB (%.2f MiB; anonymous %d KiB, file-backed %d KiB)"
                " inside the container" % (c.name, rss, rss / 1024.0, mem.get("RssAnon", -1),
                                          mem.get("RssFile", -1)))
            check(rss is not None and rss < MAX_RSS_KIB,
                  "%s RSS under %d KiB" % (c.name, MAX_RSS_KIB), "%s KiB" % rss)
            uid = proc_uid(pid)
            check(uid and set(uid) == {"65532"}, "%s runs as uid 65532" % c.name, str(uid))

        steady_state_rss(srv, containers)

        # Graceful handover: SIGTERM (what the kubelet sends) makes the leader release.
        t0 = time.monotonic()
        p = podman("kill", "--signal", "TERM", leader.id)
        check(p.returncode == 0, "SIGTERM to the leader container", p.stderr.strip())
        took = wait_until(lambda: curl(standby.url + "/leader", timeout=1)[0] == 200 and
                          time.monotonic() - t0, 10, interval=0.02)
        if check(bool(took), "standby %s takes over after SIGTERM" % standby.name):
            log("handover took %.2f s (bound %.1f s)" % (took, HANDOVER_BOUND))
            check(took <= HANDOVER_BOUND, "handover within 1.2 x retry-period + 1 s",
                  "%.2f s" % took)
        w = podman("wait", leader.id, timeout=20)
        check(w.returncode == 0 and w.stdout.strip() == "0", "old leader exited 0",
              (w.stdout + w.stderr).strip())
        st, lease = srv.get_lease("default", LEASE, client="pod-a")
        check(st == 200 and lease["spec"].get("holderIdentity") == standby.name,
              "Lease now names %s" % standby.name,
              json.dumps(lease.get("spec") if lease else None))
        if results["failed"]:
            for c in containers:
                if c.id:
                    log("%s logs:\n%s" % (c.name, c.logs()))
    finally:
        for c in containers:
            c.remove()
        srv.stop()


def test_client_certs(root):
    """kubeconfig client certificates through the image's own (slim, static) OpenSSL:
    an RSA key in PKCS#1 inline, an EC key in PKCS#8 from files, one in SEC1."""
    root = os.path.join(root, "certs")
    srv = ApiServer(os.path.join(root, "api"), ["pod-rsa", "pod-ec", "pod-sec1"],
                    verbose=False, rsa_clients=["pod-rsa"])
    containers = []
    try:
        srv.start()
        kubeconfigs = {"pod-rsa": srv.cert_kubeconfig("pod-rsa"),
                       "pod-ec": srv.cert_kubeconfig("pod-ec", files=True),
                       "pod-sec1": srv.sec1_kubeconfig("pod-sec1")}
        readable_by_all(root)
        mount = ["-v", "%s:%s:ro" % (srv.dir, srv.dir)]
        for name, kubeconfig in kubeconfigs.items():
            c = Container(name, free_port(), mount,
                          ["--identity", name, "--kubeconfig", kubeconfig])
            containers.append(c.start())
        snap = one_leader(containers, 15)
        if not check(bool(snap), "client certificates: exactly one /leader 200"):
            for c in containers:
                log("%s logs:\n%s" % (c.name, c.logs()))
            return
        leader = next(c for c, (code, _) in zip(containers, snap) if code == 200)
        st, lease = srv.get_lease("default", LEASE, client="pod-ec")
        check(st == 200 and lease["spec"].get("holderIdentity") == leader.name,
              "client certificates: Lease names the leader (%s)" % leader.name,
              json.dumps(lease.get("spec") if lease else None))
        for c in containers:
            code, body = curl(c.url + "/healthz")
            check(code == 200, "client certificates: %s /healthz" % c.name,
                  "%s %r" % (code, body))
    finally:
        for c in containers:
            c.remove()
        srv.stop()


def start_nghttpx(root, srv):
    """(process, port, access log) of nghttpx on 127.0.0.1 with the API server's
    certificate, forwarding to it; its access log has ALPN and request line."""
    port = free_port()
    access = os.path.join(root, "nghttpx-access.log")
    proc = subprocess.Popen(
        ["nghttpx", "--conf=/dev/null", "--workers=1", "--no-ocsp", "--insecure",
         "--frontend=127.0.0.1,%d" % port, "--backend=127.0.0.1,%d;;tls" % srv.port,
         "--accesslog-file=" + access, "--accesslog-format=$alpn $request",
         "--errorlog-file=" + os.path.join(root, "nghttpx-error.log"),
         os.path.join(srv.dir, "server.key"), os.path.join(srv.dir, "server.crt")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return proc.poll() is not None
    wait_until(listening, 10)
    return proc, port, access


def test_http2(root):
    """The static libcurl was built with nghttp2: through nghttpx every request of
    the container's leaderd is HTTP/2, and it leads."""
    if not shutil.which("nghttpx"):
        why = "HTTP/2: nghttpx is not installed (nghttp2-proxy, tools/deps.sh test)"
        if os.environ.get("LEADERD_ALLOW_SKIP") == "1":
            log("skip " + why)
        else:
            check(False, why)
        return
    root = os.path.join(root, "h2")
    srv = ApiServer(os.path.join(root, "api"), ["pod-h2"], verbose=False)
    proxy, c = None, None
    try:
        srv.start()
        proxy, port, access = start_nghttpx(root, srv)
        kubeconfig = write_kubeconfig(os.path.join(srv.dir, "h2.kubeconfig"),
                                      "https://127.0.0.1:%d" % port, srv.ca, "pod-h2",
                                      token=srv.token("pod-h2"))
        readable_by_all(root)
        c = Container("pod-h2", free_port(), ["-v", "%s:%s:ro" % (srv.dir, srv.dir)],
                      ["--identity", "pod-h2", "--kubeconfig", kubeconfig]).start()
        led = wait_until(lambda: c.leader()[0] == 200, 15)
        if not check(led, "HTTP/2: the container leads through nghttpx"):
            log("pod-h2 logs:\n%s" % c.logs())
        with open(access) as f:
            lines = f.read().splitlines()
        protocols = {line.rsplit(" ", 1)[-1] for line in lines}
        check(bool(lines) and protocols == {"HTTP/2"} and
              all(line.startswith("h2 ") for line in lines),
              "HTTP/2: every request of the image's leaderd is HTTP/2",
              "%d requests, %s" % (len(lines), sorted(protocols)))
    finally:
        if c is not None:
            c.remove()
        if proxy is not None:
            proxy.terminate()
            proxy.wait(10)
        srv.stop()


def main():
    root = tempfile.mkdtemp(prefix="leaderd-image-test.")
    try:
        test_image_config()
        test_licences(root)
        test_cli()
        test_election(root)
        test_client_certs(root)
        test_http2(root)
    except Exception as e:  # a harness error is a failure, not a crash without summary
        check(False, "harness", "%s: %s" % (type(e).__name__, e))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("image-test: %d passed, %d failed" % (results["passed"], results["failed"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
