#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""leaderd chaos suite: N real leaderd replicas against build/leaderd-apiserver,
one fault per scenario, every replica's /leader polled every 25 ms, and the
safety and liveness checks of harness.analyse() plus each scenario's own.

    tests/chaos/run.py --short          every scenario not known to fail, once,
                                        3 replicas (part of `make test`)
    tests/chaos/run.py                  every scenario CHAOS_REPEAT (20) times
                                        with 3 and with 5 replicas (`make chaos`)
    tests/chaos/run.py --only sigkill-leader,apiserver-pause --repeat 3 -n 5

Each run gets a fresh API server and fresh replicas in its own process (so
runs can go in parallel with --jobs); the work directory of a failed run is
kept and printed. The last line is `chaos: N passed, N failed, N skipped`
(skipped: the scenarios known to fail that this selection leaves out); the
exit status is 0 only when nothing failed. LEADERD_BUILD picks the binaries.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "support"))  # leaderd_testing

import harness  # noqa: E402
from harness import Cluster, Ctx, ScenarioError, analyse, analyse_children  # noqa: E402
from leaderd_testing.cluster import BUILD  # noqa: E402
from scenarios import SCENARIOS, by_name  # noqa: E402

WORKER_TIMEOUT = 240.0
WARMUP = 1.5


# ---- one run, in a worker process ----

class Interrupted(BaseException):
    pass


def _interrupt(signum, frame):
    raise Interrupted(f"signal {signum}")


def run_one(name, n, rep, workdir):
    sc = by_name(name)
    c = Cluster(workdir, n, child=sc.child, shards=sc.shards, api_proxy=sc.api_proxy)
    ctx = Ctx(c, name, rep)
    started = time.monotonic()
    try:
        c.start()
        ctx.t0 = time.monotonic()
        # A few renewals and standby polls first, so the fault hits a cluster
        # in its steady state rather than one still electing.
        c.steady()
        time.sleep(WARMUP)
        sc.fn(ctx)
    except ScenarioError as e:
        ctx.fail(str(e))
    except Interrupted as e:
        ctx.fail(f"interrupted ({e}): the run took too long")
    except Exception:
        ctx.fail("the scenario raised:\n" + traceback.format_exc())
    try:
        c.poller.stop()
        nsamples = analyse(ctx)
        ctx.note(f"{nsamples} samples in {c.poller.rounds} poll rounds, "
                 f"{len(c.writes) + sum(map(len, c.shard_writes.values()))} writes")
        c.shutdown(ctx.failures)
        if c.child_file:
            analyse_children(ctx)  # every record is in once every replica exited
    except BaseException:
        ctx.fail("the checks raised:\n" + traceback.format_exc())
        c.kill_everything()
    return {"name": name, "n": n, "rep": rep, "ok": not ctx.failures,
            "failures": ctx.failures, "notes": ctx.notes, "failovers": ctx.failovers,
            "seconds": time.monotonic() - started, "dir": workdir}


def worker_main(args):
    signal.signal(signal.SIGTERM, _interrupt)
    res = run_one(args.worker, args.n_one, args.rep, args.dir)
    with open(args.result, "w") as f:
        json.dump(res, f)
    return 0


# ---- self-test of the API server features the checks rely on ----

def selftest(root):
    """The checks must catch what they are meant to catch (test_checks.py);
    the write log's clock_us must be CLOCK_MONOTONIC as time.monotonic()
    reads it; lose_reply_rate must drop the reply of a committed write."""
    import io
    import unittest
    from leaderd_testing.apiserver import ApiServer, is_transport_error
    problems = []
    stream = io.StringIO()
    suite = unittest.defaultTestLoader.loadTestsFromName("test_checks")
    if not unittest.TextTestRunner(stream=stream, verbosity=1).run(suite).wasSuccessful():
        problems.append("the checks' own tests failed:\n" + stream.getvalue())
    api = ApiServer(os.path.join(root, "selftest"), ["st"], verbose=False)
    api.start()
    try:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "selftest", "namespace": "default"},
                "spec": {"holderIdentity": "st", "leaseDurationSeconds": 4}}
        before = time.monotonic()
        st, _ = api.post_lease("default", body, client="st")
        after = time.monotonic()
        entry = api.write_log()[-1]
        t = entry["clock_us"] / 1e6
        if st != 201 or not before - harness.CLOCK_SLACK <= t <= after + harness.CLOCK_SLACK:
            problems.append(f"write log clock_us {t:.6f} not within the request "
                            f"[{before:.6f}, {after:.6f}] (status {st})")
        api.control("POST", "faults", {"client": "st", "lose_reply_rate": 1.0})
        body["spec"]["holderIdentity"] = "st2"
        lease = api.get_lease("default", "selftest", client="st")[1]
        lease["spec"]["holderIdentity"] = "st2"
        try:
            st, _ = api.put_lease("default", "selftest", lease, client="st")
            problems.append(f"lose_reply_rate 1.0: the write was answered ({st})")
        except Exception as e:  # noqa: BLE001 - any transport error is the point
            if not is_transport_error(e):
                raise
        api.clear_faults()
        if api.get_lease("default", "selftest", client="st")[1]["spec"][
                "holderIdentity"] != "st2":
            problems.append("lose_reply_rate 1.0: the write did not commit")
    finally:
        api.stop()
    return problems


# ---- the driver ----

def fmt_stats(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    return f"{min(vals):.2f} / {statistics.median(vals):.2f} / {max(vals):.2f}"


def print_table(results, out):
    rows = {}
    for r in results:
        key = (r["name"], r["n"])
        row = rows.setdefault(key, {"runs": 0, "passed": 0, "acq": [], "serve": [],
                                    "secs": []})
        row["runs"] += 1
        row["passed"] += r["ok"]
        row["secs"].append(r["seconds"])
        for acq, serve in r["failovers"]:
            row["acq"].append(acq)
            row["serve"].append(serve)
    order = {s.name: i for i, s in enumerate(SCENARIOS)}
    w = max([len(k[0]) for k in rows] + [8])
    print(f"\n{'scenario':<{w}}  {'n':>2}  {'passed':>7}  "
          f"{'acquired s (min/med/max)':>26}  {'serving s (min/med/max)':>25}  "
          f"{'run s':>5}", file=out)
    for key in sorted(rows, key=lambda k: (order.get(k[0], 99), k[1])):
        row = rows[key]
        print(f"{key[0]:<{w}}  {key[1]:>2}  {row['passed']:>3}/{row['runs']:<3}  "
              f"{fmt_stats(row['acq']):>26}  {fmt_stats(row['serve']):>25}  "
              f"{statistics.mean(row['secs']):>5.1f}", file=out)
    print("acquired: fault to the new holder's write in the API server's log; "
          "serving: fault to its first /leader 200.\n"
          "Bounds: lease-duration + 2 x retry-period = "
          f"{harness.KILL_BOUND:.0f}s after a fault that removes the leader, "
          f"retry-period + 1 s = {harness.TERM_BOUND:.0f}s after SIGTERM, each checked "
          f"with {harness.SCHED_SLACK:.1f}s of scheduling slack; "
          "pause/restart/malformed rows measure from the heal.", file=out)


def launch(job, root, env):
    name, n, rep = job
    d = os.path.join(root, f"{name}-n{n}-{rep}")
    result = d + ".json"
    log = open(d + ".out", "wb")
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", name,
                          "--n-one", str(n), "--rep", str(rep), "--dir", d,
                          "--result", result], stdout=log, stderr=subprocess.STDOUT,
                         env=env, start_new_session=True)
    log.close()
    return {"job": job, "proc": p, "result": result, "dir": d, "out": d + ".out",
            "started": time.monotonic(), "termed": None}


def collect(run):
    p = run["proc"]
    name, n, rep = run["job"]
    try:
        with open(run["result"]) as f:
            return json.load(f)
    except (OSError, ValueError):
        try:
            with open(run["out"], "rb") as f:
                out = f.read().decode(errors="replace")[-3000:]
        except OSError:
            out = ""
        return {"name": name, "n": n, "rep": rep, "ok": False,
                "failures": [f"the worker exited with {p.returncode} without a result:\n"
                             + out], "notes": [], "failovers": [],
                "seconds": time.monotonic() - run["started"], "dir": run["dir"]}


def report_run(res, out):
    fo = ", ".join(f"{s:.2f}s" for _, s in res["failovers"] if s is not None)
    print(f"{'PASS' if res['ok'] else 'FAIL'} {res['name']} n={res['n']} "
          f"#{res['rep'] + 1} ({res['seconds']:.1f}s)" + (f" failover {fo}" if fo else ""),
          file=out, flush=True)
    for note in res["notes"]:
        print(f"      note: {note}", file=out)
    for f in res["failures"]:
        print("      FAILED: " + f.replace("\n", "\n      "), file=out)
    if not res["ok"]:
        print(f"      kept: {res['dir']}", file=out, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--short", action="store_true",
                    help="each scenario not known to fail, once, 3 replicas")
    ap.add_argument("--repeat", type=int, default=None,
                    help="runs per scenario and size (default $CHAOS_REPEAT or 20)")
    ap.add_argument("-n", "--replicas", default=None,
                    help="comma-separated replica counts (default 3,5)")
    ap.add_argument("--only", default=None, help="comma-separated scenario names")
    ap.add_argument("--jobs", type=int, default=None,
                    help="runs in parallel (default $CHAOS_JOBS or 2)")
    ap.add_argument("--keep", action="store_true", help="keep every work directory")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--n-one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rep", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args)
    if args.list:
        for s in SCENARIOS:
            print(s.name + (f"   [known failure: {s.known_failure}]"
                            if s.known_failure else ""))
        return 0
    out = sys.stdout
    if not os.access(harness.LEADERD, os.X_OK):
        print(f"chaos: {harness.LEADERD} is missing; run make first", file=out)
        print("chaos: 0 passed, 1 failed, 0 skipped", file=out)
        return 1

    if args.only:
        chosen = [by_name(x.strip()) for x in args.only.split(",") if x.strip()]
    elif args.short:
        chosen = [s for s in SCENARIOS if not s.known_failure]
    else:
        chosen = list(SCENARIOS)
    repeat = args.repeat or (1 if args.short else int(os.environ.get("CHAOS_REPEAT", 20)))
    sizes = [int(x) for x in (args.replicas or ("3" if args.short else "3,5")).split(",")]
    jobs = args.jobs or int(os.environ.get("CHAOS_JOBS", 2))
    root = tempfile.mkdtemp(prefix="leaderd-chaos-")
    started = time.monotonic()
    print(f"chaos: {len(chosen)} scenarios x {repeat} x {sizes} replicas, {jobs} at a "
          f"time, binaries in {BUILD}; lease {harness.LEASE:.0f}s, renew "
          f"{harness.RENEW:.0f}s, retry {harness.RETRY:.0f}s", file=out, flush=True)

    problems = selftest(root)
    for p in problems:
        print(f"FAIL selftest: {p}", file=out)
    if problems:
        print("chaos: 0 passed, 1 failed, 0 skipped", file=out)
        return 1

    queue = [(s.name, n, r) for r in range(repeat) for n in sizes for s in chosen]
    env = dict(os.environ)
    running, results = [], []
    while queue or running:
        while queue and len(running) < jobs:
            running.append(launch(queue.pop(0), root, env))
        time.sleep(0.1)
        for run in list(running):
            p = run["proc"]
            age = time.monotonic() - run["started"]
            if p.poll() is None:
                if age > WORKER_TIMEOUT and run["termed"] is None:
                    p.send_signal(signal.SIGTERM)
                    run["termed"] = time.monotonic()
                elif run["termed"] is not None and time.monotonic() - run["termed"] > 30:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(10)
                else:
                    continue
                if p.poll() is None:
                    continue
            running.remove(run)
            res = collect(run)
            results.append(res)
            report_run(res, out)
            if res["ok"] and not args.keep:
                shutil.rmtree(run["dir"], ignore_errors=True)
                for ext in (".json", ".out"):
                    try:
                        os.unlink(run["dir"] + ext)
                    except OSError:
                        pass

    print_table(results, out)
    failed_names = sorted({r["name"] for r in results if not r["ok"]})
    known = [s for s in chosen if s.known_failure]
    if failed_names:
        print("\nFAILING SCENARIOS: " + ", ".join(failed_names), file=out)
        for s in known:
            print(f"  known: {s.name}: {s.known_failure}", file=out)
    skipped = [s for s in SCENARIOS if s.known_failure and s not in chosen]
    if skipped:
        print("\nnot run (known leaderd failures, see `run.py --list`): "
              + ", ".join(s.name for s in skipped), file=out)
    passed = sum(r["ok"] for r in results)
    failed = len(results) - passed
    print(f"\nchaos took {time.monotonic() - started:.0f}s; work directory {root}"
          + ("" if failed or args.keep else " (removed)"), file=out)
    if not failed and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(f"chaos: {passed} passed, {failed} failed, {len(skipped)} skipped", file=out,
          flush=True)
    return 0 if failed == 0 and results else 1


if __name__ == "__main__":
    sys.exit(main())
