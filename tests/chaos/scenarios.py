# SPDX-License-Identifier: Apache-2.0
"""The chaos scenarios. Each takes a Ctx whose cluster has just agreed on one
leader, injects one fault, heals it, checks what is specific to that fault and
leaves the cluster converged with every replica running (so the soak can chain
them). The checks every scenario gets are in harness.analyse()."""
import http.client
import json
import re
import signal
import threading
import time

from harness import (CHILD_GRACE, CHILD_KILL_SLACK, CHILD_START, CLOCK_SLACK,
                     CONFIGMAP_NAME, CONVERGE_BOUND, KILL_BOUND, LEASE, NS, LEASE_NAME,
                     POD_NAME, RENEW, RETRY, SCHED_SLACK, TERM_BOUND, ScenarioError, Slot,
                     http_get, micro_time, proxy_fencing_problems, what_was_written)


class Scenario:
    def __init__(self, name, fn, destructive=False, known_failure=None, soak=True,
                 child=False, shards=None, api_proxy=False):
        self.name = name
        self.fn = fn
        self.destructive = destructive        # replaces replica processes
        self.known_failure = known_failure    # why it fails today (kept out of --short)
        self.child = child                    # replicas run childrec.py (Cluster(child=))
        self.shards = shards                  # replicas run --shards N (Cluster(shards=))
        self.api_proxy = api_proxy            # replicas run --api-proxy (Cluster(api_proxy=))
        self.soak = soak and not destructive and not child and not shards and not api_proxy


def stops_claiming_until(ctx, slot, t_fault, takeover, why):
    """ctx.stops_claiming(slot, t_fault, RENEW, why), but when slot itself
    took the Lease over later (the write `takeover`), its claims from that
    write on are its new term's."""
    if takeover is None or takeover.client != slot.name:
        ctx.stops_claiming(slot, t_fault, RENEW, why)
        return
    late = ctx.c.samples(lambda s: s.slot is slot and s.is_leader
                         and t_fault + RENEW + CLOCK_SLACK < s.start < takeover.t)
    if late:
        ctx.fail(f"{slot.name} still claimed leadership {late[-1].start - t_fault:.3f}s "
                 f"after {why}, before it took the Lease over at "
                 f"{takeover.t - t_fault:.3f}s ({len(late)} samples; limit {RENEW:.1f}s)")


def held_faults(ctx, slot, **fault):
    body = {"client": slot.name}
    body.update(fault)
    ctx.c.api.control("POST", "faults", body)


# ---- process faults ----

def sc_sigkill(ctx):
    c = ctx.c
    old = c.steady()
    t0 = c.send(old, signal.SIGKILL)
    c.wait_exit(old, 5)
    ctx.record_failover(t0, old.identity, KILL_BOUND, exclude=[old], what="SIGKILL")
    c.start_slot(old)
    ctx.converge(time.monotonic())
    return old, t0


def sc_sigterm(ctx):
    c = ctx.c
    old = c.steady()
    term = c.latest()[old.name].term
    t0 = c.send(old, signal.SIGTERM)
    rc = c.wait_exit(old, 5)
    if ctx.check(rc is not None, "the leader did not exit within 5s of SIGTERM"):
        took = old.proc.exited_at - t0
        ctx.check(rc == 0, f"the leader exited with {rc} on SIGTERM")
        # The release is one write; renew-deadline bounds it (plus scheduling).
        ctx.check(took < RENEW + SCHED_SLACK,
                  f"the leader took {took:.2f}s to exit after SIGTERM")
    ctx.record_failover(t0, old.identity, TERM_BOUND, exclude=[old], what="SIGTERM")
    releases = [w for w in c.refresh_log() if w.t >= t0 and w.client == old.name
                and w.holder == ""]
    ctx.check(len(releases) == 1, f"{len(releases)} release writes by {old.name}, want 1")
    if releases:
        ctx.check(releases[0].transitions == term,
                  f"the release wrote leaseTransitions {releases[0].transitions}, "
                  f"want the unchanged {term}")
    c.start_slot(old)
    ctx.converge(time.monotonic())
    return old, t0


def sc_sigstop(ctx, seconds=KILL_BOUND + 1):
    """A paused leader (GC pause, VM freeze) must come back as a follower.
    Paused for longer than the lease it is replaced meanwhile; paused past
    its renew deadline only, it may lead again, but only after a renewal
    made after the pause: no answer computed after SIGCONT may claim
    leadership on the strength of a renewal from before it."""
    c = ctx.c
    old = c.steady()
    t0 = c.send(old, signal.SIGSTOP)
    if seconds > LEASE + RETRY:
        ctx.record_failover(t0, old.identity, KILL_BOUND, exclude=[old], what="SIGSTOP")
    ctx.sleep_until(t0 + seconds)
    t_cont = c.send(old, signal.SIGCONT)
    leader = ctx.converge(t_cont)
    if leader is not None:
        who = "the paused one" if leader is old else "a new one"
        ctx.note(f"after SIGCONT {leader.name} leads ({who})")
    # Answers given after SIGCONT were computed after it, whenever asked.
    proc = old.proc
    late = c.samples(lambda s: s.proc is proc and s.end > t_cont and s.is_leader)
    own = [w for w in c.refresh_log() if w.t > t0 and w.client == old.name
           and w.holder == old.identity and w.kind == "proto"]
    if late and not (own and own[0].t < late[0].start):
        ctx.fail(f"{old.name} claimed leadership after SIGCONT (answered "
                 f"{ctx.rel(late[0].end)}, asked {ctx.rel(late[0].start)}) without "
                 f"acquiring the Lease again")
    return old, t0


# ---- network faults on the leader's requests ----

def partition(ctx, mode):
    c = ctx.c
    old = c.steady()
    t0 = time.monotonic()
    held_faults(ctx, old, partition=mode)
    ctx.record_failover(t0, old.identity, KILL_BOUND, exclude=[old],
                        what=f"partition ({mode})")
    ctx.sleep_until(t0 + KILL_BOUND + 2)
    ctx.stops_claiming(old, t0, RENEW, f"its partition ({mode}) began")
    t_heal = time.monotonic()
    c.api.clear_faults(old.name)
    ctx.converge(t_heal)
    return old, t0


def sc_partition_hang(ctx):
    return partition(ctx, "hang")


def sc_partition_reset(ctx):
    return partition(ctx, "reset")


def sc_latency(ctx):
    """3 s added to each of the leader's requests. leaderd bounds a request at
    max(1 s, renew-deadline / 2) = 1.5 s here, so none of them succeeds and the
    leader must be replaced as if partitioned."""
    c = ctx.c
    old = c.steady()
    t0 = time.monotonic()
    # "connected": a request whose client gave up is dropped, as if it never
    # got through; sc_late_leader is the same slowness where the server
    # commits what it admitted (kube-apiserver's way).
    held_faults(ctx, old, latency_ms=3000, commit="connected")
    ctx.record_failover(t0, old.identity, KILL_BOUND, exclude=[old], what="3 s latency")
    ctx.sleep_until(t0 + KILL_BOUND + 2)
    ctx.stops_claiming(old, t0, RENEW, "3 s of latency began")
    t_heal = time.monotonic()
    c.api.clear_faults(old.name)
    ctx.converge(t_heal)
    return old, t0


def lost_replies(ctx):
    """Half of the leader's committed writes lose their reply (the connection
    drops after the commit): it must never believe in a write it did not see,
    and the others must never take a Lease that is still being renewed."""
    c = ctx.c
    old = c.steady()
    t0 = time.monotonic()
    held_faults(ctx, old, lose_reply_rate=0.5, verbs=["update", "create"])
    ctx.sleep_until(t0 + 10)
    t_heal = time.monotonic()
    c.api.clear_faults(old.name)
    st = c.api.stats().get(old.name, {})
    lost = sum(v.get("lost-reply", 0) for v in st.values())
    ctx.check(lost > 0, "no reply was lost: the fault did not fire")
    ctx.note(f"{lost} committed writes lost their reply")
    report_flaps(ctx, t0, t_heal)
    ctx.converge(t_heal)


def lost_acquire_replies(ctx):
    """The leader dies while every standby's writes lose their replies: the
    takeover commits but its writer never hears of it. Nobody may claim
    leadership meanwhile; the writer finds itself the holder on its next read,
    which is its own unacknowledged write, not a second process with its
    identity; once replies flow again a leader follows promptly."""
    c = ctx.c
    old = c.steady()
    standbys = [s for s in c.slots if s is not old]
    for slot in standbys:
        held_faults(ctx, slot, lose_reply_rate=1.0, verbs=["update", "create"])
    t0 = c.send(old, signal.SIGKILL)
    c.wait_exit(old, 5)
    w = None
    deadline = t0 + KILL_BOUND + 2
    while w is None and time.monotonic() < deadline:
        w = next((x for x in c.refresh_log() if x.t > t0 and x.kind == "proto"), None)
        time.sleep(0.05)
    if w is None:
        raise ScenarioError("no standby wrote the Lease after the leader died")
    ctx.note(f"{w.client} took the Lease {w.t - t0:.2f}s after the kill, reply lost")
    ctx.sleep_until(w.t + 3 * RETRY)
    t_heal = time.monotonic()
    blind = c.samples(lambda s: s.is_leader and t0 < s.start < t_heal)
    if blind:
        ctx.fail(f"{blind[0].slot.name} claimed leadership at {ctx.rel(blind[0].start)} "
                 f"although no reply to its writes arrived")
    c.api.clear_faults()
    s = c.first_claim(t_heal, KILL_BOUND + 2, what="a leader once replies flow again")
    ctx.failovers.append((None, s.end - t_heal))
    # The writer counts itself out for a lease duration after its unanswered
    # write (it may land late), so someone claims once that has passed
    # (LEASE - 3 x RETRY after the heal), within a retry period of it.
    bound = max(LEASE - 3 * RETRY, 0) + RETRY + 0.5
    ctx.check(s.end - t_heal <= bound + SCHED_SLACK,
              f"{s.slot.name} led only {s.end - t_heal:.2f}s after replies flowed again "
              f"(bound {bound:.1f}s + {SCHED_SLACK:.1f}s slack)")
    for slot in standbys:
        bad = [ln for ln in slot.proc.log().splitlines()
               if WARN_RE.search(ln) and DUP_RE.search(ln) and DUP_KIND_RE.search(ln)]
        if bad:
            ctx.fail(f"{slot.name} reported an identity conflict although no other "
                     f"process has its identity: {bad[0].strip()[:200]}")
    c.start_slot(old)
    ctx.converge(time.monotonic())


def sc_watch_stall_sigterm(ctx):
    """The standbys' watch streams go silent (a half-open connection: no
    events, no error) while their other requests work; then the leader exits
    gracefully. The release must still be taken within retry-period + 1 s, as
    a polling standby would."""
    c = ctx.c
    old = c.steady()
    standbys = [s for s in c.slots if s is not old]
    for slot in standbys:
        held_faults(ctx, slot, partition="hang", verbs=["watch"])
    time.sleep(2 * RETRY)
    t0 = c.send(old, signal.SIGTERM)
    rc = c.wait_exit(old, 5)
    ctx.check(rc == 0, f"the leader exited with {rc} on SIGTERM")
    try:
        ctx.record_failover(t0, old.identity, TERM_BOUND, exclude=[old],
                            timeout_extra=KILL_BOUND, what="SIGTERM with stalled watches")
    finally:
        c.api.clear_faults()
    c.start_slot(old)
    ctx.converge(time.monotonic())


def sc_lease_deleted(ctx):
    """Someone deletes the Lease under a live leader (kubectl delete). The
    leader learns it from its watch and steps down; a standby creates a new
    Lease, carrying the term on (leaseTransitions one above the last), so no
    replica's term goes down (the term check stays on)."""
    c = ctx.c
    c.steady()
    before = c.last_write()
    t0 = time.monotonic()
    st, out = c.admin("DELETE", c.lease_path())
    if st != 200:
        raise ScenarioError(f"could not delete the Lease: {st} {out}")
    s = c.first_claim(t0, KILL_BOUND + 2, what="a leader after the deletion")
    ctx.failovers.append((None, s.end - t0))
    ctx.converge(t0)
    creates = [w for w in c.refresh_log() if w.t > t0 and w.verb == "create"]
    ctx.check(bool(creates), "nobody re-created the deleted Lease")
    if creates and before is not None and before.transitions is not None:
        ctx.check(creates[0].transitions == before.transitions + 1,
                  f"the re-created Lease has leaseTransitions {creates[0].transitions}, "
                  f"want {before.transitions + 1} (one above the deleted one's)")


def sc_metadata_churn(ctx):
    """Something else keeps changing the Lease's labels (another controller,
    kubectl label) every 300 ms. The leader's renewals conflict, it re-reads
    and renews in the same attempt: it must keep leadership throughout, and
    the standbys must not count label changes as renewals of the record."""
    c = ctx.c
    old = c.steady()
    t0 = time.monotonic()
    n = 0
    while time.monotonic() < t0 + 8:
        n += 1
        st, out = c.api.json_request("PATCH", c.lease_path(),
                                     {"metadata": {"labels": {"chaos-churn": str(n)}}},
                                     token=c.api.token("admin"),
                                     content_type="application/merge-patch+json",
                                     timeout=3.0)
        if st != 200:
            raise ScenarioError(f"label patch refused: {st} {out}")
        time.sleep(0.3)
    t1 = time.monotonic()
    conflicts = counts(c.api.stats(), old.name, "409")
    ctx.note(f"{n} label changes, {conflicts} conflicts for the leader")
    others = c.samples(lambda s: t0 <= s.start and s.is_leader and s.slot is not old)
    if others:
        ctx.fail(f"leadership moved to {others[0].slot.name} under label churn")
    # Answers, not their spacing: a starved poller leaves gaps in any case.
    lapses = c.samples(lambda s: t0 <= s.start <= t1 and s.slot is old and s.status == 503)
    if lapses:
        ctx.fail(f"the leader stopped claiming at {ctx.rel(lapses[0].start)} under label "
                 f"churn")
    ctx.converge(t1)


# ---- whole-API faults ----

def report_flaps(ctx, t0, t1):
    """Notes leadership changes and the longest time without a leader."""
    ss = sorted(ctx.c.samples(lambda s: t0 <= s.start <= t1 and s.is_leader),
                key=lambda s: s.start)
    holders, last_claim, longest = [], t0, 0.0
    for s in ss:
        longest = max(longest, s.start - last_claim)
        last_claim = s.start
        if not holders or holders[-1] != s.slot.name:
            holders.append(s.slot.name)
    longest = max(longest, t1 - last_claim)
    ctx.note(f"leaders during the fault: {' -> '.join(holders) or 'none'}; "
             f"longest time without one {longest:.2f}s")


def storm(ctx, fault, seconds=8.0):
    """fault on every client's requests. The standbys' watches are cut first
    so that they, too, go through the storm re-reading and re-watching
    instead of sitting on a stream opened before it."""
    c = ctx.c
    leader = c.steady()
    t0 = time.monotonic()
    standbys = [s for s in c.slots if s is not leader]
    for slot in standbys:
        held_faults(ctx, slot, partition="reset", verbs=["watch"])
    held_faults(ctx, leader, **fault)
    time.sleep(0.3)
    for slot in standbys:
        held_faults(ctx, slot, **fault)
    ctx.sleep_until(t0 + seconds)
    t_heal = time.monotonic()
    c.api.clear_faults()
    report_flaps(ctx, t0, t_heal)
    c.first_claim(t_heal, KILL_BOUND + 2, what="a leader after the storm")
    ctx.converge(t_heal)


def sc_error_storm(ctx):
    storm(ctx, {"error_rate": 0.5, "error_code": 500})
    st = ctx.c.api.stats()
    ctx.check(any("500" in json.dumps(v) for v in st.values()), "no 500 was served")


def sc_throttle_storm(ctx):
    storm(ctx, {"throttle": {"rate": 0.7, "retry_after": 2}})
    st = ctx.c.api.stats()
    ctx.check(any("429" in json.dumps(v) for v in st.values()), "no 429 was served")


def sc_api_pause(ctx):
    """Every request held for longer than the renew deadline: nobody may claim
    leadership past renew-deadline, since nobody can renew."""
    c = ctx.c
    c.steady()
    t0 = time.monotonic()
    c.api.pause()
    ctx.sleep_until(t0 + RENEW + 3)
    t_resume = time.monotonic()
    c.api.resume()
    late = c.samples(lambda s: s.is_leader and t0 + RENEW + CLOCK_SLACK < s.start < t_resume)
    if late:
        ctx.fail(f"{late[0].slot.name} claimed leadership {late[0].start - t0:.3f}s after "
                 f"the API server paused (renew deadline {RENEW:.0f}s; {len(late)} samples)")
    s = c.first_claim(t_resume, KILL_BOUND + 2, what="a leader after the pause")
    ctx.failovers.append((None, s.end - t_resume))
    ctx.converge(t_resume)


def sc_api_restart(ctx):
    """The API server stops (SIGTERM) and comes back after 1 s with its state
    file on the same port."""
    c = ctx.c
    c.steady()
    t_down, t_up = c.restart_api(1.0)
    ctx.check(c.api_exits[-1] == 0, f"leaderd-apiserver exited with {c.api_exits[-1]}")
    s = c.first_claim(t_up, KILL_BOUND + 2, what="a leader after the restart")
    ctx.failovers.append((None, s.end - t_up))
    ctx.converge(t_up)


# ---- credentials ----

def counts(stats, client, code):
    return sum(v.get(code, 0) for v in stats.get(client, {}).values())


def sc_token_rotate(ctx):
    """Every token rotated with no grace: the old ones get 401 at once. With a
    tokenFile kubeconfig leaderd notices the new file before its next request
    (and re-reads it after a 401 in any case) and carries on; the leader
    should not even lose leadership. Standbys sit on a watch opened
    with the old token (kube does not re-authenticate an open watch either), so
    their watches are cut to make them reconnect with it."""
    c = ctx.c
    old = c.steady()
    followers = [s for s in c.slots if s is not old]
    s0 = c.api.stats()
    t0 = time.monotonic()
    for slot in [old] + followers:
        c.api.rotate_token(slot.name, grace_ms=0)
    ctx.sleep_until(t0 + RETRY + 0.5)
    s_kick = c.api.stats()
    for slot in followers:
        held_faults(ctx, slot, partition="reset")
    time.sleep(0.3)
    for slot in followers:
        c.api.clear_faults(slot.name)
    ctx.sleep_until(t0 + 3 * RETRY + 1.5)
    s1 = c.api.stats()
    ctx.sleep_until(t0 + 5 * RETRY + 2)
    s2 = c.api.stats()
    for slot in c.slots:
        base = s0 if slot is old else s_kick
        n401 = counts(s1, slot.name, "401") - counts(base, slot.name, "401")
        n200 = counts(s1, slot.name, "200") - counts(base, slot.name, "200")
        late401 = counts(s2, slot.name, "401") - counts(s1, slot.name, "401")
        # leaderd checks the token file before every request (b2b0e3f), so
        # the old token reaches the server only from a request racing the
        # rotation: a 401 is no longer needed for the test to mean something.
        if n401:
            ctx.note(f"{slot.name} presented its old token {n401} times")
        ctx.check(n200 >= 1, f"{slot.name} made no successful request with its new token")
        ctx.check(late401 == 0, f"{slot.name} still got {late401} x 401 "
                  f"{3 * RETRY + 1.5:.1f}s after its token was rotated")
        if slot is old:
            ok_after = counts(s2, slot.name, "200") - counts(s1, slot.name, "200")
            ctx.check(ok_after > 0, f"the leader {slot.name} stopped renewing")
        h = http_get(slot.port, "/healthz")
        ctx.check(h[0] == 200, f"{slot.name} /healthz {h[0]} {h[1]!r} after the rotation")
    others = c.samples(lambda s: s.start >= t0 and s.is_leader and s.slot is not old)
    if others:
        ctx.fail(f"leadership moved to {others[0].slot.name} on a token rotation")
    lapses = c.samples(lambda s: s.start >= t0 and s.slot is old and s.status == 503)
    if lapses:
        ctx.fail(f"the leader stopped claiming at {ctx.rel(lapses[0].start)} around the "
                 f"rotation")
    ctx.converge(t0)


UNAUTH_RE = re.compile(r"401|unauthori[sz]ed|credential|token", re.I)


def sc_token_revoke(ctx, recover=False):
    """The leader's token is revoked for good: it must step down, say why in
    its log and in /healthz, and another replica takes over. With recover, a
    new token is then issued (a rotation lifts the revocation): the replica
    must rejoin as a follower and /healthz must turn 200 again."""
    c = ctx.c
    old = c.steady()
    log_before = len(old.proc.log())
    t0 = time.monotonic()
    c.api.revoke_token(old.name)
    ctx.record_failover(t0, old.identity, KILL_BOUND, exclude=[old], what="token revoked")
    ctx.stops_claiming(old, t0, RENEW, "its token was revoked")
    new_log = old.proc.log()[log_before:]
    lines = [ln for ln in new_log.splitlines() if UNAUTH_RE.search(ln)]
    ctx.check(bool(lines), f"{old.name}'s log says nothing about 401/Unauthorized after the "
              f"revocation:\n" + "\n".join("    | " + ln for ln in new_log.splitlines()[-10:]))
    lost = [ln for ln in new_log.splitlines() if "leadership lost" in ln]
    ctx.check(bool(lost), f"{old.name} logged no 'leadership lost' line")
    if lines:
        ctx.note(f"{old.name} log: {lines[0].strip()[:160]}")
    deadline = t0 + RENEW + 2
    health = (None, None)
    while time.monotonic() < deadline:
        health = http_get(old.port, "/healthz")
        if health[0] not in (200, None):
            break
        time.sleep(0.1)
    body = (health[1] or b"").decode(errors="replace")
    ctx.note(f"{old.name} /healthz after revocation: {health[0]} {body[:160]!r}")
    ctx.check(health[0] not in (200, None) and UNAUTH_RE.search(body),
              f"{old.name} /healthz answers {health[0]} {body[:120]!r} "
              f"{deadline - t0:.0f}s after its token was revoked; want a failure that "
              f"names the 401/credentials")
    t_fix = time.monotonic()
    c.api.rotate_token(old.name, grace_ms=0)
    ctx.converge(t_fix, bound=CONVERGE_BOUND + 2 * RETRY)
    if not recover:
        return
    bound = CONVERGE_BOUND + 2 * RETRY
    ok = (None, None)
    while time.monotonic() < t_fix + bound:
        ok = http_get(old.port, "/healthz")
        if ok[0] == 200:
            break
        time.sleep(0.1)
    ctx.check(ok[0] == 200, f"{old.name} /healthz still {ok[0]} {ok[1]!r} {bound:.0f}s "
              f"after a new token was issued")


# ---- malformed Leases ----

def lease_doc(spec, with_meta=True):
    doc = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
    if with_meta:
        doc["metadata"] = {"name": LEASE_NAME, "namespace": NS}
    if spec is not None:
        doc["spec"] = spec
    return json.dumps(doc)


def garbage_wrong_types(prev):
    return lease_doc({"holderIdentity": 42, "leaseDurationSeconds": "4",
                      "acquireTime": True, "renewTime": [micro_time()],
                      "leaseTransitions": "7"})


def garbage_huge_holder(prev):
    return lease_doc({"holderIdentity": "h" * (1 << 20), "leaseDurationSeconds": 4,
                      "acquireTime": micro_time(), "renewTime": micro_time(),
                      "leaseTransitions": (prev.transitions or 0) + 1})


def garbage_negative_duration(prev):
    return lease_doc({"holderIdentity": "ghost", "leaseDurationSeconds": -5,
                      "acquireTime": micro_time(), "renewTime": micro_time(),
                      "leaseTransitions": (prev.transitions or 0) + 1})


def garbage_missing_spec(prev):
    return lease_doc(None)


def garbage_invalid_json(prev):
    return '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":' \
           '"chaos","namespace":"default"},"spec":{"holderIdentity":"r1",\x00\xff'


GARBAGE = {
    "wrong-types": garbage_wrong_types,
    # A valid Lease since kube bounds no holder's length: taking it over
    # after lease-duration is what should happen (see sc_oversized).
    "huge-holder": garbage_huge_holder,
    "negative-duration": garbage_negative_duration,
    "missing-spec": garbage_missing_spec,
    "invalid-json": garbage_invalid_json,
}


def malformed(ctx, variant, restore):
    """Correct behaviour, as decided here: a replica must not act on a Lease it
    cannot decode or that is not a valid Lease (a missing spec, a negative
    duration, a holder it cannot represent). Taking it over is allowed at the
    earliest lease-duration after it appeared (as if held by an unknown
    holder), never sooner, because the previous leader may still claim it for
    up to renew-deadline. Everyone keeps running; once a valid Lease is
    written back (restore="put") or the garbage is deleted (restore="delete")
    a leader is elected as usual."""
    c = ctx.c
    old = c.steady()
    prev = c.last_write()
    text = GARBAGE[variant](prev)
    t0 = time.monotonic()
    status, _, body = c.api.request("PUT", f"/_control/raw/{NS}/{LEASE_NAME}?stamp=1",
                                    text.encode("latin-1"), token=c.api.token("admin"))
    if status != 200:
        raise ScenarioError(f"raw write refused: {status} {body[:200]!r}")
    rv = json.loads(body)["resourceVersion"]
    ctx.sleep_until(t0 + LEASE + 2)
    # What happened to the garbage meanwhile.
    t_seen = time.monotonic()
    over = [w for w in c.refresh_log() if w.t > t0 and w.kind == "proto"]
    if over:
        w = over[0]
        ctx.note(f"{w.client} replaced the garbage {w.t - t0:.2f}s after it was written "
                 f"(holder {w.holder!r})")
        ctx.check(w.t - t0 >= LEASE - CLOCK_SLACK,
                  f"{variant}: {w.client} took over a malformed Lease {w.t - t0:.3f}s after "
                  f"it appeared, before lease-duration ({LEASE:.0f}s): the previous leader "
                  f"may still be claiming it")
    else:
        ctx.note(f"nobody took over the malformed Lease in {LEASE + 2:.0f}s")
    stops_claiming_until(ctx, old, t0, over[0] if over else None,
                         "the Lease was overwritten with garbage")
    claims = c.samples(lambda s: s.is_leader and t0 + RENEW + CLOCK_SLACK < s.start < t_seen)
    if claims and not over:
        ctx.fail(f"{claims[0].slot.name} claimed leadership of a malformed Lease it never "
                 f"wrote ({ctx.rel(claims[0].start)})")
    for slot in c.slots:
        warn = [ln for ln in slot.proc.log().splitlines()
                if re.search(r"warn|error", ln, re.I) and re.search(
                    r"decod|malformed|invalid|json|parse|too (long|large)", ln, re.I)]
        if warn:
            ctx.note(f"{slot.name} log: {warn[-1].strip()[:180]}")
            break
    t_fix = time.monotonic()
    if not over:
        if restore == "put":
            # A released Lease, as client-go writes it. (Naming the old leader
            # instead would look, rightly, like another process using its
            # identity.)
            spec = {"holderIdentity": "", "leaseDurationSeconds": 1,
                    "acquireTime": micro_time(), "renewTime": micro_time(),
                    "leaseTransitions": prev.transitions or 0}
            doc = json.loads(lease_doc(spec))
            doc["metadata"]["resourceVersion"] = rv
            st, out = c.admin("PUT", c.lease_path(), doc)
            if st != 200:
                raise ScenarioError(f"could not write a valid Lease back: {st} {out}")
        else:
            # Nobody decoded the garbage; a replica that saw no valid Lease
            # before it may re-create at leaseTransitions 0.
            ctx.allow_term_reset = True
            st, out = c.admin("DELETE", c.lease_path())
            if st != 200:
                raise ScenarioError(f"could not delete the garbage: {st} {out}")
        s = c.first_claim(t_fix, KILL_BOUND + 2, what=f"a leader after the {restore}")
        ctx.failovers.append((None, s.end - t_fix))
    ctx.converge(t_fix, bound=CONVERGE_BOUND + RETRY)


def make_malformed(variant, restore):
    return lambda ctx: malformed(ctx, variant, restore)


# ---- valid Leases leaderd cannot keep in full ----

SETTLE = 0.5  # after renew-deadline every replica has read the written Lease
MIB = 1 << 20


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def shown_holder(holder):
    """What /leader's `leader` shows for holder: the value itself up to 1024
    bytes without a NUL, else its head (at most 64 bytes, before any NUL, cut
    at a character boundary), its length and its FNV-1a 64."""
    raw = holder.encode()
    if len(raw) <= 1024 and b"\0" not in raw:
        return holder
    head = raw[:64].split(b"\0", 1)[0].decode("utf-8", errors="ignore")
    return f"{head}...(truncated: {len(raw)} bytes, fnv1a64={fnv1a64(raw):016x})"


# A 64-byte cut would fall inside the "é" after 63 ASCII bytes.
HUGE_HOLDER = "x" * 63 + "é" * ((MIB - 64) // 2) + "y"
BIG_ANNOTATIONS = {"chaos.example/blob": "a" * MIB}

OVERSIZED = {
    # variant: (holder, annotations)
    "holder": (HUGE_HOLDER, None),
    "annotations": ("ghost", BIG_ANNOTATIONS),
    "nul-holder": ("ghost\0tail", None),
}


def sc_oversized(ctx, variant):
    """A valid Lease with a field leaderd cannot keep in full (a 1 MiB
    holder, 1 MiB of annotations, a holder with a NUL byte), held by a
    process that never renews it. It is someone else's: the leader stops
    claiming as soon as it reads it (at the latest renew-deadline after it
    was written), /leader names the holder (abridged when it is too long),
    and a standby takes it over no earlier than lease-duration after it
    appeared and within lease-duration + 2 x retry-period. A takeover copies
    the fields it does not interpret forward (the annotations survive)."""
    holder, annotations = OVERSIZED[variant]
    c = ctx.c
    old = c.steady()
    prev = c.last_write()
    doc = json.loads(lease_doc({"holderIdentity": holder, "leaseDurationSeconds": int(LEASE),
                                "acquireTime": micro_time(), "renewTime": micro_time(),
                                "leaseTransitions": (prev.transitions or 0) + 1}))
    if annotations:
        doc["metadata"]["annotations"] = annotations
    # The raw path keeps the write outside the protocol in the log (the old
    # leader may claim for up to renew-deadline); it is still a valid Lease.
    t0 = time.monotonic()
    status, _, body = c.api.request("PUT", f"/_control/raw/{NS}/{LEASE_NAME}?stamp=1",
                                    json.dumps(doc, ensure_ascii=False).encode(),
                                    token=c.api.token("admin"))
    if status != 200:
        raise ScenarioError(f"raw write refused: {status} {body[:200]!r}")
    bound = LEASE + 2 * RETRY + SCHED_SLACK
    takeover = None
    while takeover is None and time.monotonic() < t0 + bound + 1:
        takeover = next((w for w in c.refresh_log() if w.t > t0 and w.kind == "proto"),
                        None)
        time.sleep(0.05)
    t_seen = time.monotonic()
    stops_claiming_until(ctx, old, t0, takeover,
                         f"a Lease held by another ({variant}) was written")
    held_until = takeover.t if takeover else t_seen
    want = shown_holder(holder)
    window = c.samples(lambda s: t0 + RENEW + SETTLE < s.start and s.end < held_until
                       and s.status is not None)
    wrong = [s for s in window if s.leader != want]
    if wrong:
        ctx.fail(f"{variant}: {wrong[0].slot.name} showed leader {wrong[0].leader[:120]!r} "
                 f"at {ctx.rel(wrong[0].start)} while the Lease was held by "
                 f"{want[:120]!r} ({len(wrong)} samples)")
    silent = {sl.name for sl in c.slots} - {s.slot.name for s in window}
    if takeover and held_until - t0 > RENEW + SETTLE + 0.5 and silent:
        ctx.fail(f"{variant}: no answer of {sorted(silent)} while the Lease was held")
    if takeover is None:
        last = next((ln for ln in reversed(old.proc.log().splitlines())
                     if re.search(r"warn|error", ln, re.I)), "")
        ctx.fail(f"{variant}: nobody took the Lease over within {bound:.1f}s of its last "
                 f"write (log of {old.name}: {last.strip()[:160]!r})")
        # Leave a cluster that elects again (the soak chains scenarios).
        ctx.allow_term_reset = True
        st, out = c.admin("DELETE", c.lease_path())
        if st != 200:
            raise ScenarioError(f"could not delete the Lease: {st} {out}")
        ctx.converge(time.monotonic(), bound=KILL_BOUND + 2)
        return
    took = takeover.t - t0
    ctx.failovers.append((took, None))
    ctx.note(f"{takeover.client} took the Lease over {took:.2f}s after it was written")
    ctx.check(took >= LEASE - CLOCK_SLACK,
              f"{variant}: {takeover.client} took over {took:.3f}s after the Lease was "
              f"written, before lease-duration ({LEASE:.0f}s)")
    ctx.check(took <= bound, f"{variant}: the takeover came {took:.3f}s after the Lease "
              f"was written (bound {bound:.1f}s)")
    ctx.check(takeover.verb == "update" and takeover.holder in
              {sl.identity for sl in c.slots},
              f"{variant}: the takeover is not a normal record of a replica: {takeover!r}")
    leader = ctx.converge(takeover.t)
    if annotations:
        st, got = c.admin("GET", c.lease_path())
        kept = (got or {}).get("metadata", {}).get("annotations") if st == 200 else None
        # The holder adds its own incarnation (docs/design/election.md,
        # "Incarnations"); every annotation of the others stays as it was.
        incarnation = dict(kept).pop("leaderd.io/incarnation", "") if kept else ""
        ctx.check(re.fullmatch(r"[0-9a-f]{32}", incarnation) is not None,
                  f"the holder's record carries no incarnation: {incarnation[:80]!r}")
        if kept:
            kept = {k: v for k, v in kept.items() if k != "leaderd.io/incarnation"}
        ctx.check(kept == annotations,
                  f"the annotations did not survive the takeover and renewals "
                  f"({st}; {len(json.dumps(kept)) if kept else 0} bytes of them left)")
    if leader is not None:
        ctx.check(leader.identity == takeover.holder or any(
            w.t > takeover.t and w.kind == "proto" for w in c.refresh_log()),
            f"{leader.name} leads although {takeover.holder} took the Lease over")


def make_oversized(variant):
    return lambda ctx: sc_oversized(ctx, variant)


# ---- gray failure: late-applied requests ----

LATE_MS = 3000


def sc_late_leader(ctx, seconds=12.0):
    """Every request of the leader takes 3 s, longer than its 1.5 s request
    timeout, but still reaches the API server and is applied there late (the
    reply is lost). The leader steps down at its renew deadline and must stop
    renewing: each renewal it sends afterwards lands 3 s later and would keep
    the Lease alive for ever. A standby with a healthy connection leads within
    renew-deadline + lease-duration + 2 x retry-period + the latency."""
    c = ctx.c
    old = c.steady()
    t0 = time.monotonic()
    held_faults(ctx, old, latency_ms=LATE_MS, commit="admitted")
    bound = RENEW + LEASE + 2 * RETRY + LATE_MS / 1000
    try:
        ctx.record_failover(t0, old.identity, bound, exclude=[old],
                            what="late-applied renewals of the leader")
        ctx.sleep_until(t0 + seconds)
    finally:
        t_heal = time.monotonic()
        c.api.clear_faults(old.name)
    ctx.stops_claiming(old, t0, RENEW, "its requests began to be applied 3 s late")
    late = {k: v for k, v in c.api.stats().get(old.name, {}).get("update", {}).items()
            if k.startswith("late-")}
    ctx.note(f"{old.name}'s updates applied after it gave up: {late or 'none'}")
    ctx.converge(t_heal)


def sc_late_everyone(ctx, seconds=12.0):
    """The same gray failure on every replica for 12 s: nobody hears back,
    every write lands 3 s late. The leader steps down and stops renewing: its
    last renewal lands by renew-deadline + latency (6 s), the Lease expires
    4 s later, while the slowdown lasts, and the first takeover attempt lands
    3 s after that. So the Lease goes unwritten for lease-duration + latency
    (7 s); renewals the deposed leader kept sending would land every few
    seconds and keep it alive (asserted: a gap above lease-duration + half
    the latency). Once the slowdown ends a leader is back within
    lease-duration + 2 x retry-period + twice the latency."""
    c = ctx.c
    c.steady()
    before = c.last_write()
    t0 = time.monotonic()
    for slot in c.slots:
        held_faults(ctx, slot, latency_ms=LATE_MS, commit="admitted")
    try:
        ctx.sleep_until(t0 + seconds)
    finally:
        t_end = time.monotonic()
        c.api.clear_faults()
    report_flaps(ctx, t0, t_end)
    bound = LEASE + 2 * RETRY + 2 * LATE_MS / 1000
    s = c.first_claim(t_end, bound + SCHED_SLACK + 2, what="a leader after the slowdown")
    ctx.failovers.append((None, s.end - t_end))
    ctx.check(s.end - t_end <= bound + SCHED_SLACK,
              f"{s.slot.name} led only {s.end - t_end:.2f}s after the slowdown ended "
              f"(bound {bound:.1f}s + {SCHED_SLACK:.1f}s slack)")
    ctx.converge(t_end, bound=bound + RETRY)
    times = [before.t] + [w.t for w in c.refresh_log() if t0 < w.t <= s.end]
    quiet = max((b - a for a, b in zip(times, times[1:])), default=0.0)
    ctx.note(f"longest time without a write of the Lease: {quiet:.2f}s")
    ctx.check(quiet > LEASE + LATE_MS / 2000,
              f"the Lease was never left to expire: writes at most {quiet:.2f}s apart "
              f"from the slowdown to the new leader (renewals after the step-down, "
              f"applied late, kept it alive)")


# ---- identities and rollouts ----

WARN_RE = re.compile(r" (warn|error) |\"level\": ?\"(warn|error)\"")
DUP_RE = re.compile(r"identit", re.I)
DUP_KIND_RE = re.compile(r"conflict|duplicate|same identity|another (process|replica)",
                         re.I)


def sc_duplicate_identity(ctx, graceful_exit=False):
    """A second process started with the leader's identity (a misconfigured
    StatefulSet, a copied manifest). At most one of the two may claim
    leadership at a time, and the conflict must be detected and reported.
    With graceful_exit the duplicate then gets SIGTERM: it never led, so it
    must not release the Lease the original still holds (that would hand it
    to a standby while the original still claims it)."""
    c = ctx.c
    old = c.steady()
    dup = Slot("dup", old.identity)
    c.slots.append(dup)
    t0 = time.monotonic()
    c.start_slot(dup)
    ctx.sleep_until(t0 + LEASE + 2 * RETRY + 2)
    pair = {old.name, dup.name}
    rounds = {}
    for s in c.samples(lambda s: s.start >= t0 and s.is_leader and s.slot.name in pair):
        rounds.setdefault(s.rnd, set()).add(s.slot.name)
    both = [r for r, names in rounds.items() if len(names) == 2]
    ctx.check(not both, f"both processes with identity {old.identity!r} claimed "
              f"leadership in {len(both)} poll rounds")
    logs = old.proc.log() + dup.proc.log()
    hits = [ln for ln in logs.splitlines() if WARN_RE.search(ln) and DUP_RE.search(ln)
            and DUP_KIND_RE.search(ln)]
    ctx.check(bool(hits), f"no log line of {old.name} or dup reports an identity "
              f"conflict/duplicate")
    if hits:
        ctx.note(f"reported: {hits[0].strip()[:180]}")
    if not graceful_exit:
        c.send(dup, signal.SIGKILL)
        c.wait_exit(dup, 5)
        ctx.converge(time.monotonic(), bound=CONVERGE_BOUND + LEASE)
        return
    t1 = time.monotonic()
    c.stop_slot(dup, ctx.failures)
    ctx.sleep_until(t1 + LEASE + RETRY)
    released = [w for w in c.refresh_log() if w.t >= t1 and w.client == dup.name]
    if released:
        w = released[0]
        ctx.fail(f"the duplicate, which never led, wrote the Lease on its way out "
                 f"({w!r} at {ctx.rel(w.t)}) while {old.name} held it")
    moved = c.samples(lambda s: s.start >= t1 and s.is_leader and s.slot is not old)
    if moved:
        ctx.fail(f"leadership moved from {old.name} to {moved[0].slot.name} "
                 f"({ctx.rel(moved[0].start)}) when the duplicate exited")
    ctx.converge(t1, bound=CONVERGE_BOUND + LEASE)


def sc_rolling_restart(ctx):
    """SIGTERM and restart every replica in turn, waiting for each to be
    ready; every handover of the leader is a release."""
    c = ctx.c
    c.steady()
    for slot in list(c.slots):
        leader = c.agreement()
        was_leader = leader is slot
        t0 = c.send(slot, signal.SIGTERM)
        rc = c.wait_exit(slot, 5)
        ctx.check(rc == 0, f"{slot.name} exited with {rc} on SIGTERM")
        if was_leader:
            ctx.record_failover(t0, slot.identity, TERM_BOUND, exclude=[slot],
                                what=f"rolling restart of {slot.name}")
        c.start_slot(slot)
        deadline = time.monotonic() + 5
        while http_get(slot.port, "/readyz")[0] != 200:
            if time.monotonic() > deadline:
                raise ScenarioError(f"{slot.name} not ready within 5s of its restart")
            time.sleep(0.05)
        ctx.converge(time.monotonic())
    ctx.converge(time.monotonic())


# ---- the exec child: leaderd -- python3 childrec.py FILE ----

def child_fault(fault, reap, bound):
    """fault (a scenario above that returns the leader it hit and when) on
    replicas that each run childrec.py while leading. On top of the fault's
    own checks and harness.analyse_children() (never two children, each only
    while its replica leads): the leader's child runs before the fault and
    its last record comes within `reap` of the fault (plus CHILD_KILL_SLACK),
    and a child of another replica starts within the fault's takeover
    `bound` (plus SCHED_SLACK and CHILD_START, the interpreter's start)."""
    def run(ctx):
        c = ctx.c
        leader = c.steady()
        c.wait_child(lambda r: r.identity == leader.identity, CHILD_START + RETRY,
                     f"the child of {leader.name}")
        old, t0 = fault(ctx)
        # The new leader's child may still be starting (an interpreter on a
        # loaded machine): wait for it up to its bound, and a little beyond
        # to tell late from never.
        limit = bound + SCHED_SLACK + CHILD_START
        try:
            nxt = c.wait_child(lambda r: r.start > t0 and r.identity != old.identity,
                               max(t0 + limit - time.monotonic(), 0) + 2,
                               "a child of another replica after the fault")
        except ScenarioError as e:
            nxt = None
            ctx.fail(f"{e} (the fault at {ctx.rel(t0)})")
        before = [r for r in c.child_runs() if r.identity == old.identity and r.start < t0]
        if not before:
            ctx.fail(f"no child of {old.name} had started before the fault")
        else:
            r = before[-1]
            ctx.note(f"{r.label()} ended {r.end - t0:.3f}s after the fault"
                     + ("" if r.stopped else " (no stop record)"))
            ctx.check(t0 <= r.end <= t0 + reap + CHILD_KILL_SLACK,
                      f"{r.label()} ended at {ctx.rel(r.end)}, {r.end - t0:.3f}s after the "
                      f"fault at {ctx.rel(t0)} (want within {reap:.1f}s + "
                      f"{CHILD_KILL_SLACK:.2f}s)")
        if nxt is not None:
            ctx.note(f"{nxt.label()} started {nxt.start - t0:.3f}s after the fault")
            ctx.check(nxt.start - t0 <= limit,
                      f"{nxt.label()} started {nxt.start - t0:.3f}s after the fault (bound "
                      f"{bound:.1f}s + {SCHED_SLACK:.1f}s + {CHILD_START:.1f}s)")
    return run


# ---- shard mode: leaderd --shards N (docs/design/shards.md) ----
#
# The cluster runs a group of SHARDS shards; the poller asks /shards, and
# harness.analyse() applies the single-Lease checks to every shard on its
# own (never two owners of one shard in one round, never a claim of a shard
# after another holder's write of it, terms per shard never decreasing).
# Each scenario below adds the group's bounds: a dead or cut-off member's
# shards are owned again within lease-duration + 2 x retry-period + 1 s, a
# released one's within retry-period + 1 s, only the lost member's shards
# move (+1), and the group balances again within lease-duration +
# 4 x retry-period once membership is stable.

SHARDS = 12
SHARD_DEAD_BOUND = LEASE + 2 * RETRY + 1.0
SHARD_GIVEN_BACK_BOUND = RETRY + 1.0
SHARD_BALANCE_BOUND = LEASE + 4 * RETRY


def owned_by(owners, slot):
    return sorted((sid for sid, o in owners.items() if o is slot), key=int)


def shard_moves(c, t0, before):
    """{shard: [new holders]} from the write log after t0, starting from the
    holders before ({shard: holder}); a release is no move, A, "", A none."""
    c.refresh_log()
    out = {}
    for sid, ws in c.shard_writes.items():
        cur = before.get(sid) or ""
        for w in ws:
            if w.t <= t0 or not w.holder or w.holder == cur:
                continue
            if cur:
                out.setdefault(sid, []).append(w.holder)
            cur = w.holder
    return out


def check_moves(ctx, t0, before, mine, why):
    moved = shard_moves(ctx.c, t0, before)
    extra = sorted(set(moved) - set(mine), key=int)
    ctx.note(f"{why}: moved {sorted(moved, key=int)} (its shards: {mine})")
    ctx.check(len(extra) <= 1, f"{why}: shards of others moved too: {extra} ({moved})")
    ctx.check(set(mine) <= set(moved), f"{why}: its shards {mine} did not all move: {moved}")


def shards_taken(ctx, old, mine, t0, bound, what):
    """Waits until another replica claims each of old's shards in an answer
    asked after t0; checks the slowest against bound + SCHED_SLACK and records
    (to its holder's write, to the claim) as a failover."""
    c = ctx.c
    first = {}
    deadline = t0 + bound + SCHED_SLACK + 3
    while len(first) < len(mine) and time.monotonic() < deadline:
        for smp in c.samples(lambda x: x.start >= t0 and x.slot is not old and x.shards):
            for sid in mine:
                if sid not in first and smp.shards.get(sid, (False,))[0]:
                    first[sid] = smp
        time.sleep(0.05)
    missing = [sid for sid in mine if sid not in first]
    if missing:
        ctx.fail(f"shards {missing} of {old.name} not owned by another replica within "
                 f"{bound + SCHED_SLACK + 3:.1f}s of the {what}")
        return None
    serve = max(smp.end for smp in first.values()) - t0
    acq = max(next((w.t for w in c.shard_writes.get(sid, []) if w.t >= t0
                    and w.holder == smp.slot.identity), smp.end)
              for sid, smp in first.items()) - t0
    ctx.failovers.append((acq, serve))
    ctx.check(serve <= bound + SCHED_SLACK,
              f"{old.name}'s shards owned again {serve:.2f}s after the {what} (bound "
              f"{bound:.1f}s + {SCHED_SLACK:.1f}s slack)")
    return serve


def shards_stop_claiming(ctx, slot, mine, t_fault, limit, why):
    """slot claims none of its shards in an answer asked after t_fault + limit."""
    late = ctx.c.samples(lambda x: x.slot is slot and x.shards and x.proc is slot.proc
                         and x.start > t_fault + limit + CLOCK_SLACK
                         and any(x.shards.get(sid, (False,))[0] for sid in mine))
    if late:
        ctx.fail(f"{slot.name} still claimed shards {late[-1].start - t_fault:.3f}s after "
                 f"{why} ({len(late)} answers; limit {limit:.1f}s)")


def expired_before_taken(ctx, old, mine, t0):
    """A crashed member's shard is written by another holder only once its
    record has expired: lease-duration after old's last write of it."""
    c = ctx.c
    for sid in mine:
        ws = c.shard_writes.get(sid, [])
        last = [w for w in ws if w.t <= t0 and w.client == old.name]
        taken = [w for w in ws if w.t > t0 and w.holder and w.holder != old.identity]
        if last and taken and taken[0].t < last[-1].t + LEASE - CLOCK_SLACK:
            ctx.fail(f"shard {sid} taken {taken[0].t - last[-1].t:.3f}s after {old.name}'s "
                     f"last write of it (before its lease-duration {LEASE:.0f}s ran out)")


def rebalanced(ctx, t, what, exclude=()):
    """The group balances (over the live replicas not in exclude) within
    SHARD_BALANCE_BOUND + SCHED_SLACK of t."""
    left = t + SHARD_BALANCE_BOUND + SCHED_SLACK - time.monotonic()
    try:
        owners = ctx.c.shards_steady(timeout=max(left, 0.5), exclude=exclude)
    except ScenarioError as e:
        ctx.fail(f"no balance within {SHARD_BALANCE_BOUND:.0f}s + {SCHED_SLACK:.1f}s of "
                 f"{what}: {e}")
        return None
    ctx.note(f"balanced {time.monotonic() - t:.2f}s after {what}")
    return owners


def sc_shards_kill(ctx):
    c = ctx.c
    owners = c.shards_steady()
    old = c.slots[1]
    mine = owned_by(owners, old)
    before = c.shard_holders()
    t0 = c.send(old, signal.SIGKILL)
    c.wait_exit(old, 5)
    shards_taken(ctx, old, mine, t0, SHARD_DEAD_BOUND, "SIGKILL")
    rebalanced(ctx, t0, "the SIGKILL", exclude=[old])
    check_moves(ctx, t0, before, mine, f"SIGKILL of {old.name}")
    expired_before_taken(ctx, old, mine, t0)
    t_join = time.monotonic()
    c.start_slot(old)
    rebalanced(ctx, t_join, f"{old.name}'s restart")


def sc_shards_sigterm(ctx):
    c = ctx.c
    owners = c.shards_steady()
    old = c.slots[0]
    mine = owned_by(owners, old)
    before = c.shard_holders()
    t0 = c.send(old, signal.SIGTERM)
    rc = c.wait_exit(old, RENEW + 5)
    ctx.check(rc == 0, f"{old.name} exited with {rc} on SIGTERM")
    shards_taken(ctx, old, mine, t0, SHARD_GIVEN_BACK_BOUND, "SIGTERM")
    rebalanced(ctx, t0, "the SIGTERM", exclude=[old])
    check_moves(ctx, t0, before, mine, f"SIGTERM of {old.name}")
    c.refresh_log()
    for sid in mine:
        rel = [w for w in c.shard_writes.get(sid, []) if w.t >= t0 and w.client == old.name
               and w.holder == ""]
        ctx.check(len(rel) == 1, f"shard {sid}: {len(rel)} release writes by {old.name}")
    gone = [e for e in c.api.write_log() if e.get("verb") == "delete"
            and e.get("name") == f"{LEASE_NAME}-member-{old.identity}"]
    ctx.check(len(gone) == 1, f"{old.name}'s member Lease deleted {len(gone)} times, want 1")
    t_join = time.monotonic()
    c.start_slot(old)
    rebalanced(ctx, t_join, f"{old.name}'s restart")


def shards_cut_off(ctx, what, **fault):
    """One replica's API traffic hangs, resets or is too slow to succeed: it
    stops claiming its shards within renew-deadline, the others own them
    within the dead-member bound, only its shards move; healed, it rejoins."""
    c = ctx.c
    owners = c.shards_steady()
    old = c.slots[0]
    mine = owned_by(owners, old)
    before = c.shard_holders()
    t0 = time.monotonic()
    held_faults(ctx, old, **fault)
    shards_taken(ctx, old, mine, t0, SHARD_DEAD_BOUND, what)
    rebalanced(ctx, t0, what, exclude=[old])
    ctx.sleep_until(t0 + SHARD_DEAD_BOUND + 1)
    shards_stop_claiming(ctx, old, mine, t0, RENEW, f"{what} began")
    check_moves(ctx, t0, before, mine, f"{what} of {old.name}")
    t_heal = time.monotonic()
    c.api.clear_faults(old.name)
    rebalanced(ctx, t_heal, "the heal")


def sc_shards_partition(ctx):
    shards_cut_off(ctx, "partition (hang)", partition="hang")


def sc_shards_partition_reset(ctx):
    shards_cut_off(ctx, "partition (reset)", partition="reset")


def sc_shards_sigstop(ctx):
    """A paused replica (GC pause, VM freeze) past lease-duration: the others
    own its shards meanwhile, and once it runs again it claims none of them
    on the strength of a renewal from before the pause (harness.analyse()
    checks every claim against the shard's writes); it rejoins and the group
    balances again."""
    c = ctx.c
    owners = c.shards_steady()
    old = c.slots[0]
    mine = owned_by(owners, old)
    before = c.shard_holders()
    t0 = c.send(old, signal.SIGSTOP)
    shards_taken(ctx, old, mine, t0, SHARD_DEAD_BOUND, "SIGSTOP")
    rebalanced(ctx, t0, "the SIGSTOP", exclude=[old])
    check_moves(ctx, t0, before, mine, f"SIGSTOP of {old.name}")
    ctx.sleep_until(t0 + SHARD_DEAD_BOUND + 1)
    t_cont = c.send(old, signal.SIGCONT)
    rebalanced(ctx, t_cont, "the SIGCONT")
    # Answers computed after SIGCONT: a claim of one of its old shards needs
    # a write of its own after the pause (it re-acquired it).
    c.refresh_log()
    for smp in c.samples(lambda x: x.proc is old.proc and x.end > t_cont and x.shards):
        for sid in mine:
            if not smp.shards.get(sid, (False,))[0]:
                continue
            own = [w for w in c.shard_writes.get(sid, []) if w.t > t0 and
                   w.client == old.name and w.holder == old.identity]
            if not (own and own[0].t < smp.end + CLOCK_SLACK):
                ctx.fail(f"{old.name} claimed shard {sid} after SIGCONT (asked "
                         f"{ctx.rel(smp.start)}) without acquiring it again")
                return


def sc_shards_api_restart(ctx):
    """The API server stops and comes back after 1 s with its state: shorter
    than renew-deadline, so membership never changes and no shard may change
    owner (stable)."""
    c = ctx.c
    c.shards_steady()
    before = c.shard_holders()
    t_down, t_up = c.restart_api(1.0)
    ctx.check(c.api_exits[-1] == 0, f"leaderd-apiserver exited with {c.api_exits[-1]}")
    rebalanced(ctx, t_up, "the restart")
    moved = shard_moves(c, t_down, before)
    ctx.check(not moved, f"shards changed owner across a 1 s API server restart: {moved}")


def sc_shards_watch_cut(ctx):
    """One replica's watch of the group is cut (every watch request reset)
    while its other requests work: it must still see the other members (as
    the single Lease falls back to polling) and membership does not change,
    so the group stays balanced and no shard changes owner."""
    c = ctx.c
    c.shards_steady()
    old = c.slots[0]
    before = c.shard_holders()
    t0 = time.monotonic()
    held_faults(ctx, old, partition="reset", verbs=["watch"])
    # Past the moment the others' member records would expire in its view
    # if it stopped seeing them.
    ctx.sleep_until(t0 + SHARD_DEAD_BOUND + 1)
    try:
        c.shards_steady(timeout=SHARD_BALANCE_BOUND + SCHED_SLACK)
    except ScenarioError as e:
        ctx.fail(f"not balanced with {old.name}'s watch cut: {e}")
    moved = shard_moves(c, t0, before)
    ctx.check(not moved, f"shards changed owner while only a watch was cut: {moved}")
    t_heal = time.monotonic()
    c.api.clear_faults(old.name)
    rebalanced(ctx, t_heal, "the heal")


def sc_shards_rolling_restart(ctx):
    """A rollout: every replica in turn gets SIGTERM (exit 0), then starts
    again; after each step the group balances within the bound, and each
    leave moves only the leaver's shards (+1)."""
    c = ctx.c
    for slot in list(c.slots):
        owners = c.shards_steady()
        mine = owned_by(owners, slot)
        before = c.shard_holders()
        t0 = c.send(slot, signal.SIGTERM)
        rc = c.wait_exit(slot, RENEW + 5)
        ctx.check(rc == 0, f"{slot.name} exited with {rc} on SIGTERM")
        shards_taken(ctx, slot, mine, t0, SHARD_GIVEN_BACK_BOUND, f"SIGTERM of {slot.name}")
        rebalanced(ctx, t0, f"the SIGTERM of {slot.name}", exclude=[slot])
        check_moves(ctx, t0, before, mine, f"SIGTERM of {slot.name}")
        t_join = time.monotonic()
        c.start_slot(slot)
        rebalanced(ctx, t_join, f"{slot.name}'s restart")


def sc_shards_duplicate_identity(ctx, graceful_exit=False):
    """A second process with a member's identity (a copied manifest): the two
    never claim one shard in the same poll round (harness.analyse() also
    flags a claim after the other process's write of that shard), the
    conflict is reported in a log, and with graceful_exit the duplicate's
    SIGTERM releases nothing the original holds and does not delete the
    original's member Lease."""
    c = ctx.c
    c.shards_steady()
    old = c.slots[0]
    dup = Slot("dup", old.identity)
    c.slots.append(dup)
    t0 = time.monotonic()
    c.start_slot(dup)
    ctx.sleep_until(t0 + LEASE + 2 * RETRY + 2)
    pair = {old.name, dup.name}
    rounds = {}
    for smp in c.samples(lambda x: x.start >= t0 and x.shards and x.slot.name in pair):
        for sid, (lead, _, _) in smp.shards.items():
            if lead:
                rounds.setdefault((smp.rnd, sid), set()).add(smp.slot.name)
    both = sorted({sid for (_, sid), names in rounds.items() if len(names) == 2}, key=int)
    ctx.check(not both, f"both processes with identity {old.identity!r} claimed shards "
              f"{both} in one poll round")
    logs = old.proc.log() + dup.proc.log()
    hits = [ln for ln in logs.splitlines() if WARN_RE.search(ln) and DUP_RE.search(ln)
            and DUP_KIND_RE.search(ln)]
    ctx.check(bool(hits), f"no log line of {old.name} or dup reports an identity "
              f"conflict/duplicate")
    if hits:
        ctx.note(f"reported: {hits[0].strip()[:180]}")
    if not graceful_exit:
        c.send(dup, signal.SIGKILL)
        c.wait_exit(dup, 5)
        c.slots.remove(dup)
        # What the duplicate wrote may stand for a lease-duration.
        ctx.sleep_until(time.monotonic() + LEASE)
        rebalanced(ctx, time.monotonic(), "lease-duration after the duplicate's end")
        return
    t1 = time.monotonic()
    c.stop_slot(dup, ctx.failures)
    c.slots.remove(dup)
    ctx.sleep_until(t1 + LEASE + RETRY)
    c.refresh_log()
    wrote = [(sid, w) for sid, ws in c.shard_writes.items() for w in ws
             if w.t >= t1 and w.client == dup.name]
    if wrote:
        ctx.fail(f"the duplicate wrote shard Leases on its way out: {wrote[:3]}")
    gone = [e for e in c.api.write_log() if e.get("client") == dup.name
            and e.get("verb") == "delete"]
    ctx.check(not gone, f"the duplicate deleted {old.name}'s member Lease on its way out")
    rebalanced(ctx, t1, "the duplicate's exit")


def sc_shards_latency(ctx):
    # As for the single Lease (sc_latency): 3 s per request, while leaderd
    # gives each up after 1.5 s, so none of its renewals succeeds ("connected":
    # an abandoned request is dropped, as if it never got through).
    shards_cut_off(ctx, "3 s latency", latency_ms=3000, commit="connected")


# The leader's child stops within: the grace after a SIGKILL of leaderd (the
# supervisor sees its socket close and counts leadership as ended then), the
# grace after a SIGTERM (passed on at once; the child exits when it handles
# it), renew-deadline + grace after a fault that stops the renewals (the last
# successful one began before it).
CHILD_SCENARIOS = [
    ("child-sigkill", sc_sigkill, CHILD_GRACE, KILL_BOUND, True),
    ("child-sigterm", sc_sigterm, CHILD_GRACE, TERM_BOUND, True),
    ("child-sigstop", sc_sigstop, RENEW + CHILD_GRACE, KILL_BOUND, False),
    ("child-partition-hang", sc_partition_hang, RENEW + CHILD_GRACE, KILL_BOUND, False),
    ("child-latency-3s", sc_latency, RENEW + CHILD_GRACE, KILL_BOUND, False),
]

# ---- the API write gate (leaderd --api-proxy, docs/guides/write-gate.md) ----
#
# A writer merge-patches the Pod and the ConfigMap, in turn, through every
# replica's proxy every ~20 ms while the leader is SIGKILLed, partitioned or
# SIGSTOPped (the fault's own scenario, with its checks); the API server's
# Pod log, ConfigMap write log and Lease write log then decide that every
# write it applied came from the replica holding the Lease at that moment
# (harness.proxy_fencing_problems).

POD_PATH = f"/api/v1/namespaces/{NS}/pods/{POD_NAME}"
CONFIGMAP_PATH = f"/api/v1/namespaces/{NS}/configmaps/{CONFIGMAP_NAME}"
WRITE_PERIOD = 0.02
WRITE_TIMEOUT = 1.5     # a stopped proxy accepts (the backlog) and never answers
WRITER_ROUNDS = 5000    # bound on the writer's loop: far beyond any run
AFTER_HEAL = 1.0        # writes go on through the healed cluster this long


def proxy_patch(port, value, configmap=False):
    """The status of one merge-patch of the Pod's label (or the ConfigMap's
    data) through the proxy on port, or None when the proxy did not answer
    (killed, stopped)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WRITE_TIMEOUT)
    if configmap:
        path, patch = CONFIGMAP_PATH, {"data": {"written": value}}
    else:
        path, patch = POD_PATH, {"metadata": {"labels": {"written": value}}}
    try:
        conn.request("PATCH", path, body=json.dumps(patch),
                     headers={"Content-Type": "application/merge-patch+json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def proxy_writer(c, stop, answers):
    n = 0
    for _ in range(WRITER_ROUNDS):
        if stop.is_set():
            return
        for slot in c.slots:
            n += 1
            port = slot.proxy_port
            value = f"{slot.name}-{n}"
            answers.append((slot.name, value,
                            port and proxy_patch(port, value, configmap=n % 2 == 0)))
        stop.wait(WRITE_PERIOD)


def proxy_fencing(fault):
    def run(ctx):
        c = ctx.c
        stop = threading.Event()
        answers = []
        t = threading.Thread(target=proxy_writer, args=(c, stop, answers), daemon=True)
        t.start()
        try:
            fault(ctx)
            stop.wait(AFTER_HEAL)
        finally:
            stop.set()
            t.join(WRITE_TIMEOUT * len(c.slots) + 5)
        if not ctx.check(not t.is_alive(), "the proxy writer did not stop"):
            return
        leases = [e for e in c.api.write_log(0)
                  if e.get("namespace") == NS and e.get("name") == LEASE_NAME]
        pod_writes = [e for e in c.api.pod_log() if e["client"] != "_control"]
        cm_writes = [e for e in c.api.configmap_log() if e["name"] == CONFIGMAP_NAME
                     and e["verb"] != "create"]
        writes = pod_writes + cm_writes
        problems = proxy_fencing_problems(leases, writes)
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        ctx.check(not problems, "write outside its leadership: " + "; ".join(problems[:3])
                  + more)
        ok = [a for a in answers if a[2] == 200]
        winners = {name for name, _, _ in ok}
        ctx.note(f"{len(answers)} proxy writes, {len(ok)} accepted (by {sorted(winners)}), "
                 f"{len(pod_writes)} Pod and {len(cm_writes)} ConfigMap writes applied")
        ctx.check(len(winners) >= 2, f"writes went through fewer than two leaders: {winners}")
        ctx.check(len(pod_writes) > 10 and len(cm_writes) > 10,
                  f"only {len(pod_writes)} Pod and {len(cm_writes)} ConfigMap writes applied")
        # Every accepted answer is a write the server applied (none lost).
        applied = {(w["client"], what_was_written(w).get("written")) for w in writes}
        lost = [(name, value) for name, value, _ in ok if (name, value) not in applied]
        ctx.check(not lost, f"{len(lost)} accepted writes not applied: {lost[:3]}")
    return run


SCENARIOS = [
    Scenario("sigkill-leader", sc_sigkill, destructive=True),
    Scenario("sigterm-leader", sc_sigterm, destructive=True),
    Scenario("sigstop-leader", sc_sigstop),
    Scenario("sigstop-past-renew-deadline",
             lambda ctx: sc_sigstop(ctx, seconds=RENEW + 0.5)),
    Scenario("partition-hang", sc_partition_hang),
    Scenario("partition-reset", sc_partition_reset),
    Scenario("latency-3s", sc_latency),
    Scenario("lost-replies", lost_replies),
    Scenario("lost-acquire-replies", lost_acquire_replies, destructive=True),
    Scenario("watch-stall-sigterm", sc_watch_stall_sigterm, destructive=True),
    Scenario("lease-deleted", sc_lease_deleted),
    Scenario("metadata-churn", sc_metadata_churn),
    Scenario("error-500-storm", sc_error_storm),
    Scenario("throttle-429-storm", sc_throttle_storm),
    Scenario("apiserver-pause", sc_api_pause),
    Scenario("apiserver-restart", sc_api_restart),
    Scenario("token-rotate", sc_token_rotate),
    Scenario("token-revoke", sc_token_revoke),
    Scenario("token-revoke-recover", lambda ctx: sc_token_revoke(ctx, recover=True)),
    Scenario("malformed-wrong-types", make_malformed("wrong-types", "put")),
    Scenario("malformed-huge-holder", make_malformed("huge-holder", "delete")),
    Scenario("malformed-negative-duration", make_malformed("negative-duration", "put")),
    Scenario("malformed-missing-spec", make_malformed("missing-spec", "delete")),
    Scenario("malformed-invalid-json", make_malformed("invalid-json", "put")),
    Scenario("malformed-invalid-json-deleted", make_malformed("invalid-json", "delete")),
    Scenario("oversized-holder", make_oversized("holder")),
    Scenario("oversized-annotations", make_oversized("annotations")),
    Scenario("oversized-nul-holder", make_oversized("nul-holder")),
    Scenario("late-renewals-leader", sc_late_leader),
    Scenario("late-renewals-everyone", sc_late_everyone),
    Scenario("duplicate-identity", sc_duplicate_identity, destructive=True),
    Scenario("duplicate-identity-exit",
             lambda ctx: sc_duplicate_identity(ctx, graceful_exit=True), destructive=True),
    Scenario("rolling-restart", sc_rolling_restart, destructive=True),
] + [Scenario(name, child_fault(fn, reap, bound), destructive=destructive, child=True)
     for name, fn, reap, bound, destructive in CHILD_SCENARIOS] + [
    Scenario("shards-kill", sc_shards_kill, destructive=True, shards=SHARDS),
    Scenario("shards-sigterm", sc_shards_sigterm, destructive=True, shards=SHARDS),
    Scenario("shards-sigstop", sc_shards_sigstop, shards=SHARDS),
    Scenario("shards-partition", sc_shards_partition, shards=SHARDS),
    Scenario("shards-partition-reset", sc_shards_partition_reset, shards=SHARDS),
    Scenario("shards-latency", sc_shards_latency, shards=SHARDS),
    Scenario("shards-apiserver-restart", sc_shards_api_restart, shards=SHARDS),
    Scenario("shards-watch-cut", sc_shards_watch_cut, shards=SHARDS),
    Scenario("shards-duplicate-identity", sc_shards_duplicate_identity, destructive=True,
             shards=SHARDS),
    Scenario("shards-duplicate-identity-exit",
             lambda ctx: sc_shards_duplicate_identity(ctx, graceful_exit=True),
             destructive=True, shards=SHARDS),
    Scenario("shards-rolling-restart", sc_shards_rolling_restart, destructive=True,
             shards=SHARDS),
] + [
    Scenario("proxy-fencing-sigkill", proxy_fencing(sc_sigkill), destructive=True,
             api_proxy=True),
    Scenario("proxy-fencing-partition", proxy_fencing(sc_partition_hang), api_proxy=True),
    Scenario("proxy-fencing-sigstop", proxy_fencing(sc_sigstop), api_proxy=True),
]


def by_name(name):
    for s in SCENARIOS:
        if s.name == name:
            return s
    raise KeyError(name)
