#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`make deploy-test`: checks the manifests under deploy/ (and those of
examples/cleaner, beside its code) so that what the docs promise
cannot silently regress. Every kustomization renders with `kubectl kustomize`, every
file passes yamllint (deploy/.yamllint), and the rendered objects keep their structure:
non-root, read-only root filesystem, no privilege escalation, all capabilities
dropped, seccomp RuntimeDefault, leaderd's probes on the right paths, the Downward
API identity, RBAC limited to the one Lease (a shard group's Role: exactly the verbs
the group needs; an app behind the write gate: only the rights it needs, on
leaderd's ServiceAccount), every leaderd flag and environment variable named in the user
documentation, and the rollout strategy that does not stall when readiness means
leadership. deploy/monitoring holds no workload: it renders the PrometheusRule (the
groups of its rules.yaml) and the dashboard's ConfigMap (dashboard.json, labelled for
Grafana's sidecar); tests/monitoring/run.py tests the rules and the dashboard themselves.
Ends with `deploy: N passed, N failed, 0 skipped`.

Needs kubectl and yamllint (Debian's yamllint brings python3-yaml, used to read the
rendered YAML).
"""

import os
import re
import shutil
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(REPO, "deploy")
# Examples whose manifests live beside their code (a kustomization that
# generates a ConfigMap from the code must sit above it): rendered and
# checked like deploy/.
EXAMPLES = [os.path.join(REPO, "examples", "cleaner")]
LEADERD_PORT = 4040
# leaderd's API calls: create (cannot be limited by name), and get/update/watch on the
# named Lease (the watch uses a metadata.name field selector, which resourceNames covers).
NAMED_VERBS = {"get", "update", "watch"}

# A shard group (--shards) elects many Leases whose names depend on the Pods'
# names, so its Role cannot use resourceNames: list/watch for the group's
# label-selected watch (RBAC cannot narrow those by label), get/create/update
# for the elections, delete for the member Lease on a graceful exit.
SHARD_VERBS = {"list", "watch", "get", "create", "update", "delete"}
# Where the flags and variables the manifests use must be documented: the
# user documentation of the repository (the man page, the README and the
# pages under docs/), or the one file LEADERD_CONTRACT names instead.
def user_docs():
    """The paths of the repository's user documentation."""
    paths = [os.path.join(REPO, "docs", "leaderd.8"), os.path.join(REPO, "README.md")]
    for top, _, files in os.walk(os.path.join(REPO, "docs")):
        paths += sorted(os.path.join(top, f) for f in files if f.endswith(".md"))
    return paths

results = {"passed": 0, "failed": 0}


def check(ok, what, detail=""):
    results["passed" if ok else "failed"] += 1
    if not ok:
        print("FAIL %s%s" % (what, (": " + detail) if detail else ""))
    return ok


def kustomizations():
    out = []
    for top in [DEPLOY] + EXAMPLES:
        for dirpath, _, files in os.walk(top):
            if "kustomization.yaml" in files:
                out.append(dirpath)
    return sorted(out)


def render(path):
    proc = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    return [d for d in yaml.safe_load_all(proc.stdout) if d], ""


def yamllint():
    proc = subprocess.run(["yamllint", "-s", "-f", "parsable", "-c",
                           os.path.join(DEPLOY, ".yamllint"), DEPLOY] + EXAMPLES,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def probe_path(probe):
    http = (probe or {}).get("httpGet") or {}
    return http.get("path"), http.get("port")


def port_number(container, port):
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return p.get("containerPort")
    return None


def effective(pod_sc, c_sc, key):
    if key in (c_sc or {}):
        return c_sc[key]
    return (pod_sc or {}).get(key)


def is_leaderd(container):
    return re.search(r"(^|/)leaderd(:|@|$)", container.get("image", "")) is not None


def check_container_security(name, pod_spec, c):
    pod_sc = pod_spec.get("securityContext") or {}
    sc = c.get("securityContext") or {}
    cname = "%s/%s" % (name, c.get("name"))
    check(effective(pod_sc, sc, "runAsNonRoot") is True, cname + ": runAsNonRoot")
    uid = effective(pod_sc, sc, "runAsUser")
    check(uid is None or uid != 0, cname + ": runAsUser is not 0", str(uid))
    check(sc.get("readOnlyRootFilesystem") is True, cname + ": readOnlyRootFilesystem")
    check(sc.get("allowPrivilegeEscalation") is False, cname + ": allowPrivilegeEscalation false")
    check((sc.get("capabilities") or {}).get("drop") == ["ALL"], cname + ": drops ALL capabilities",
          str(sc.get("capabilities")))
    check(not (sc.get("capabilities") or {}).get("add"), cname + ": adds no capability")
    check(sc.get("privileged") in (None, False), cname + ": not privileged")
    seccomp = effective(pod_sc, sc, "seccompProfile") or {}
    check(seccomp.get("type") == "RuntimeDefault", cname + ": seccomp RuntimeDefault",
          str(seccomp))
    res = c.get("resources") or {}
    check(bool((res.get("requests") or {}).get("memory"))
          and bool((res.get("limits") or {}).get("memory")),
          cname + ": memory request and limit", str(res))


def docs_text():
    """(where, text): LEADERD_CONTRACT's file when set, else every user
    document of the repository that exists, joined."""
    override = os.environ.get("LEADERD_CONTRACT", "")
    paths = [override] if override else user_docs()
    found = [p for p in paths if os.path.isfile(p)]
    texts = []
    for path in found:
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    where = os.path.basename(override) if override else "the documentation"
    return (where if found else None), "\n".join(texts)


def check_documented(cname, c):
    """Every flag in the leaderd container's args and every variable in its env
    is one the documentation names (a flag as `--flag`, a variable by its name)."""
    where, text = docs_text()
    if not check(bool(text), cname + ": the documentation is readable"):
        return
    for arg in c.get("args", []):
        if not arg.startswith("--"):
            continue
        flag = arg.split("=", 1)[0]
        check(re.search(re.escape(flag) + r"(?![\w-])", text) is not None,
              "%s: %s is documented in %s" % (cname, flag, where))
    for e in c.get("env", []):
        check(re.search(r"(?<![\w-])" + re.escape(e["name"]) + r"(?![\w-])", text) is not None,
              "%s: env %s is documented in %s" % (cname, e["name"], where))


def check_leaderd(name, dep, c, native):
    cname = "%s/%s" % (name, c.get("name"))
    path, port = probe_path(c.get("startupProbe"))
    check(path == "/readyz" and port_number(c, port) == LEADERD_PORT,
          cname + ": startupProbe GET /readyz on 4040", "%s %s" % (path, port))
    path, port = probe_path(c.get("livenessProbe"))
    check(path == "/healthz" and port_number(c, port) == LEADERD_PORT,
          cname + ": livenessProbe GET /healthz on 4040", "%s %s" % (path, port))
    path, _ = probe_path(c.get("readinessProbe"))
    check(path != "/leader", cname + ": leadership is not leaderd's own readiness")
    env = {e["name"]: e for e in c.get("env", [])}
    for var, field in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")):
        ref = (((env.get(var) or {}).get("valueFrom") or {}).get("fieldRef") or {})
        check(ref.get("fieldPath") == field, "%s: %s from the Downward API (%s)"
              % (cname, var, field), str(env.get(var)))
    if native:
        check(c.get("restartPolicy") == "Always", cname + ": native sidecar restartPolicy Always")
    grace = dep["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    check(grace >= 15, name + ": terminationGracePeriodSeconds leaves time for the release",
          str(grace))
    leases = [a.split("=", 1)[1] for a in c.get("args", []) if a.startswith("--lease-name=")]
    check(len(leases) == 1, cname + ": --lease-name=NAME in args", str(c.get("args")))
    if is_sharded(c):
        # The member Lease's ownerReference to the Pod (garbage collected
        # after a crash) needs the Pod's uid.
        ref = (((env.get("POD_UID") or {}).get("valueFrom") or {}).get("fieldRef") or {})
        check(ref.get("fieldPath") == "metadata.uid",
              cname + ": POD_UID from the Downward API (metadata.uid)", str(env.get("POD_UID")))
        path, _ = probe_path(c.get("readinessProbe"))
        check(path is None, cname + ": no readiness probe on a shard group (no /leader)")
    check_documented(cname, c)
    return leases[0] if leases else None


def is_sharded(container):
    return any(a.startswith("--shards=") for a in container.get("args", []))


def check_shard_rbac(name, objs, roles):
    """The one Role of a shard group: exactly SHARD_VERBS on leases, no
    resourceNames (the names depend on the Pods), nothing else."""
    check(len(roles) == 1, name + ": one shard-group Role",
          str([r["metadata"]["name"] for r in roles]))
    for role in roles:
        granted = set()
        for rule in role.get("rules", []):
            r = "%s: rule %s" % (name, rule)
            verbs = set(rule.get("verbs", []))
            granted |= verbs
            check("*" not in verbs and "*" not in rule.get("resources", [])
                  and "*" not in rule.get("apiGroups", []), r + " has no wildcard")
            check(rule.get("apiGroups") == ["coordination.k8s.io"]
                  and rule.get("resources") == ["leases"], r + " is about leases only")
            check("resourceNames" not in rule,
                  r + ": no resourceNames (member Lease names follow the Pods' names)")
        check(granted == SHARD_VERBS, name + ": the shard-group Role grants exactly %s"
              % sorted(SHARD_VERBS), str(sorted(granted)))


# The Roles a consumption mode needs, on top of the Lease Role, and nothing when
# the mode is off: (apiGroup, resource) -> exact verbs.
MODE_RULES = {
    "pod-label": (("", "pods"), {"get", "list", "patch"}),
    "events": (("events.k8s.io", "events"), {"create"}),
}


def mode_of(role):
    """The mode a Role serves, or None for the Lease Role."""
    for mode, ((group, resource), verbs) in MODE_RULES.items():
        rules = role.get("rules", [])
        if rules and all(r.get("apiGroups") == [group] and r.get("resources") == [resource]
                         for r in rules):
            return mode
    return None


# What an app may be granted on leaderd's ServiceAccount when it writes
# through the write gate (--api-proxy, which uses leaderd's credentials):
# (apiGroup, resource) -> the verbs an example may grant. Never Leases (the
# group's own), never secrets, never a wildcard.
GATED_APP_RULES = {("", "configmaps"): {"list", "delete"}}


def gated_app_role(role):
    """True for a Role whose every rule is about a resource of
    GATED_APP_RULES (the app's rights through the gate)."""
    rules = role.get("rules", [])
    return bool(rules) and all(
        len(r.get("apiGroups", [])) == 1 and len(r.get("resources", [])) == 1
        and (r["apiGroups"][0], r["resources"][0]) in GATED_APP_RULES for r in rules)


def check_gated_app_roles(name, roles, gated):
    for role in roles:
        rname = "%s: Role %s" % (name, role["metadata"]["name"])
        check(gated, rname + " is for an app behind the write gate (--api-proxy is on)")
        for rule in role.get("rules", []):
            key = (rule["apiGroups"][0], rule["resources"][0])
            verbs = set(rule.get("verbs", []))
            check(verbs <= GATED_APP_RULES[key], rname + ": %s/%s verbs within %s"
                  % (key[0] or "core", key[1], sorted(GATED_APP_RULES[key])),
                  str(sorted(verbs)))


def check_rbac(name, objs, lease, modes=frozenset(), sharded=False, gated=False):
    all_roles = [o for o in objs if o["kind"] in ("Role", "ClusterRole")]
    app_roles = [r for r in all_roles if gated_app_role(r)]
    check_gated_app_roles(name, app_roles, gated)
    check(all(r["kind"] == "Role" for r in all_roles), name + ": namespaced Roles only",
          str([r["kind"] for r in all_roles]))
    extra = [r for r in all_roles if mode_of(r)]
    for role in extra:
        mode = mode_of(role)
        rname = "%s: Role %s" % (name, role["metadata"]["name"])
        check(mode in modes, rname + " is used (--%s is on)" % mode, str(sorted(modes)))
        granted = set()
        for rule in role.get("rules", []):
            granted |= set(rule.get("verbs", []))
            check("resourceNames" not in rule or mode != "pod-label",
                  rname + ": pods are not narrowed by name (other Pods are unlabelled)")
        check(granted == MODE_RULES[mode][1], rname + " grants exactly %s"
              % sorted(MODE_RULES[mode][1]), str(sorted(granted)))
    for mode in modes:
        check(any(mode_of(r) == mode for r in extra), "%s: --%s has its Role" % (name, mode))
    roles = [r for r in all_roles if not mode_of(r) and not gated_app_role(r)]
    if sharded:
        check_shard_rbac(name, objs, roles)
        roles = []
    else:
        check(len(roles) == 1, name + ": one Lease Role", str([r["metadata"]["name"]
                                                               for r in roles]))
    for role in roles:
        for rule in role.get("rules", []):
            r = "%s: rule %s" % (name, rule)
            verbs = set(rule.get("verbs", []))
            check("*" not in verbs and "*" not in rule.get("resources", [])
                  and "*" not in rule.get("apiGroups", []), r + " has no wildcard")
            check(rule.get("apiGroups") == ["coordination.k8s.io"]
                  and rule.get("resources") == ["leases"], r + " is about leases only")
            check(verbs <= NAMED_VERBS | {"create"}, r + " grants only create/get/update/watch")
            if verbs & NAMED_VERBS:
                check(rule.get("resourceNames") == [lease],
                      r + " is limited by resourceNames to the Lease %r" % lease)
            if "create" in verbs:
                check(verbs == {"create"}, r + ": create stands alone (it cannot be limited)")
        granted = set()
        for rule in role.get("rules", []):
            granted |= set(rule.get("verbs", []))
        check({"create", "get", "update"} <= granted, name + ": Role grants create, get, update",
              str(sorted(granted)))
    sas = {o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount"}
    for rb in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        check(rb["kind"] == "RoleBinding" and rb["roleRef"]["kind"] == "Role"
              and rb["roleRef"]["name"] in {r["metadata"]["name"] for r in all_roles},
              name + ": RoleBinding binds the Role")
        check(all(s.get("kind") == "ServiceAccount" and s.get("name") in sas
                  for s in rb.get("subjects", [])),
              name + ": RoleBinding subjects are the ServiceAccount")
    return sas


def check_strategy(name, dep):
    spec = dep["spec"]
    strategy = spec.get("strategy") or {}
    ok = strategy.get("type") == "Recreate"
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        mu = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
        replicas = spec.get("replicas", 1)
        ok = mu == "100%" or (isinstance(mu, int) and mu >= replicas)
    check(ok, name + ": rollout does not wait for standbys to become Ready "
          "(Recreate or maxUnavailable 100%)", str(strategy))
    check(spec.get("minReadySeconds", 0) == 0, name + ": minReadySeconds 0")


def check_gated_app(dname, pod, sidecar, apps):
    """A sharded app behind the write gate (examples/cleaner): the gate
    listens on loopback, the app reaches the API only through it and
    leaderd's own port, its code is the ConfigMap generated from the
    example's source, and it is stopped before leaderd (native sidecar)."""
    proxy = [a.split("=", 1)[1] for a in sidecar.get("args", [])
             if a.startswith("--api-proxy=")][0]
    check(proxy.startswith("127.0.0.1:"), dname + ": --api-proxy on loopback", proxy)
    check(sidecar in pod.get("initContainers", []),
          dname + ": leaderd is a native sidecar (stops after the app)")
    for c in apps:
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        check(env.get("CLEANER_API") == "http://" + proxy,
              dname + ": the app's API is the write gate", str(env.get("CLEANER_API")))
        check(env.get("CLEANER_SIDECAR") == "http://127.0.0.1:%d" % LEADERD_PORT,
              dname + ": the app asks leaderd on 4040", str(env.get("CLEANER_SIDECAR")))
        mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
        code = [v for v in pod.get("volumes", []) if v["name"] in mounts and "configMap" in v]
        check(len(code) == 1 and "/app/cleaner.py" in c.get("command", []),
              dname + ": the app runs cleaner.py from its generated ConfigMap")


def check_render(path, objs):
    name = os.path.relpath(path, REPO)
    kinds = [o["kind"] for o in objs]
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        check(kind in kinds, "%s: renders a %s" % (name, kind))
    deps = [o for o in objs if o["kind"] == "Deployment"]
    leases = set()
    modes = set()
    sharded = set()
    gated_app = False
    for dep in deps:
        dname = "%s:%s" % (name, dep["metadata"]["name"])
        pod = dep["spec"]["template"]["spec"]
        check(dep["spec"].get("replicas") == 3, dname + ": 3 replicas")
        check(pod.get("automountServiceAccountToken", True) is True,
              dname + ": service-account token mounted (leaderd needs it)")
        inits = pod.get("initContainers", [])
        mains = pod.get("containers", [])
        for c in inits + mains:
            check_container_security(dname, pod, c)
        sidecars = [(c, True) for c in inits if is_leaderd(c)]
        sidecars += [(c, False) for c in mains if is_leaderd(c)]
        if not check(len(sidecars) == 1, dname + ": one leaderd container"):
            continue
        sidecar, native = sidecars[0]
        lease = check_leaderd(dname, dep, sidecar, native)
        leases.add(lease)
        args = sidecar.get("args", [])
        sharded.add(is_sharded(sidecar))
        label = [a.split("=", 1)[1] for a in args if a.startswith("--pod-label=")]
        if label:
            modes.add("pod-label")
        if "--events=true" in args:
            modes.add("events")
        apps = [c for c in mains if not is_leaderd(c)]
        gated = [c for c in apps if probe_path(c.get("readinessProbe"))[0] == "/leader"]
        if label:
            # Routed by the label: readiness is not leadership, and a Service
            # selects the leader's label.
            check(not gated, dname + ": --pod-label leaves readiness alone")
            check(any(o["kind"] == "Service" and
                      (o["spec"].get("selector") or {}).get(label[0]) == "true"
                      for o in objs), dname + ": a Service selects %s: \"true\"" % label[0])
        for c in gated:
            path, port = probe_path(c.get("readinessProbe"))
            check(port_number(sidecar, port) == LEADERD_PORT,
                  dname + ": readiness /leader on leaderd's port 4040")
        if gated:
            check_strategy(dname, dep)
        elif is_sharded(sidecar) and any(a.startswith("--api-proxy=") for a in args):
            gated_app = True
            check_gated_app(dname, pod, sidecar, apps)
        elif is_sharded(sidecar):
            script = " ".join(" ".join(c.get("command", []) + c.get("args", [])) for c in apps)
            check('curl -fs "http://localhost:4040/shard?key=' in script,
                  dname + ": the app asks `curl -fs localhost:4040/shard?key=...`")
            check("trap" in script and "TERM" in script,
                  dname + ": the app's shell exits on SIGTERM")
        elif not label:
            script = " ".join(" ".join(c.get("command", []) + c.get("args", [])) for c in apps)
            check("curl -fs http://localhost:4040/leader" in script,
                  dname + ": the app asks `curl -fs localhost:4040/leader`")
            check("trap" in script and "TERM" in script,
                  dname + ": the app's shell exits on SIGTERM")
        check(pod.get("serviceAccountName") in {o["metadata"]["name"] for o in objs
                                                if o["kind"] == "ServiceAccount"},
              dname + ": uses the ServiceAccount of the base")
    check(len(leases) <= 1, name + ": one Lease name", str(leases))
    lease = next(iter(leases)) if leases else "my-operator"
    check(len(sharded) <= 1, name + ": all or no Deployment in shard mode")
    check_rbac(name, objs, lease, frozenset(modes), sharded=True in sharded, gated=gated_app)
    check(not any(o["kind"] == "PodDisruptionBudget" and
                  (o["spec"].get("minAvailable") not in (None, 0))
                  for o in objs), name + ": no PodDisruptionBudget with minAvailable")
    return deps


def check_guide_shows_cleaner():
    """The sharding guide prints examples/cleaner's manifests whole: each
    file's text must appear in it as it is, so the two cannot drift."""
    guide = os.path.join(REPO, "docs", "guides", "sharding.md")
    with open(guide, encoding="utf-8") as f:
        text = f.read()
    root = EXAMPLES[0]
    for top, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith(".yaml"):
                path = os.path.join(top, name)
                with open(path, encoding="utf-8") as f:
                    body = f.read()
                rel = os.path.relpath(path, REPO)
                check("`%s`:\n\n```yaml\n%s```" % (rel, body) in text,
                      "docs/guides/sharding.md shows %s as it is" % rel)


def check_monitoring(path, objs):
    """deploy/monitoring: a PrometheusRule with rules.yaml's groups and the
    dashboard's ConfigMap for Grafana's sidecar, nothing else."""
    name = os.path.relpath(path, REPO)
    kinds = sorted(o["kind"] for o in objs)
    check(kinds == ["ConfigMap", "PrometheusRule"],
          name + ": renders a PrometheusRule and a ConfigMap only", str(kinds))
    with open(os.path.join(path, "rules.yaml"), encoding="utf-8") as f:
        groups = yaml.safe_load(f).get("groups")
    with open(os.path.join(path, "dashboard.json"), encoding="utf-8") as f:
        dashboard = f.read()
    for o in objs:
        if o["kind"] == "PrometheusRule":
            check(o.get("apiVersion") == "monitoring.coreos.com/v1"
                  and (o.get("spec") or {}).get("groups") == groups,
                  name + ": the PrometheusRule carries rules.yaml's groups")
        elif o["kind"] == "ConfigMap":
            labels = o["metadata"].get("labels") or {}
            check(labels.get("grafana_dashboard") == "1",
                  name + ": the dashboard ConfigMap is labelled grafana_dashboard: \"1\"",
                  str(labels))
            check((o.get("data") or {}).get("leaderd.json") == dashboard,
                  name + ": the ConfigMap's leaderd.json is dashboard.json")


def main():
    for tool, pkg in (("kubectl", "kubectl"), ("yamllint", "yamllint")):
        if not shutil.which(tool):
            print("deploy: %s not found (apt-get install -y %s)" % (tool, pkg))
            print("deploy: 0 passed, 1 failed, 0 skipped")
            return 1
    ok, out = yamllint()
    check_guide_shows_cleaner()
    check(ok, "yamllint deploy/", out)
    dirs = kustomizations()
    check(len(dirs) >= 5, "deploy/ has the base and four examples",
          str([os.path.relpath(d, REPO) for d in dirs]))
    seen = {"native": False, "plain": False, "gated": False, "sharded": False}
    for path in dirs:
        objs, err = render(path)
        rel = os.path.relpath(path, REPO)
        if not check(objs is not None, "kubectl kustomize %s" % rel, err):
            continue
        if path == os.path.join(DEPLOY, "monitoring"):
            check_monitoring(path, objs)
            continue
        deps = check_render(path, objs)
        for dep in deps:
            pod = dep["spec"]["template"]["spec"]
            seen["native"] |= any(is_leaderd(c) for c in pod.get("initContainers", []))
            seen["plain"] |= any(is_leaderd(c) for c in pod.get("containers", []))
            seen["gated"] |= any(probe_path(c.get("readinessProbe"))[0] == "/leader"
                                 for c in pod.get("containers", []))
            seen["sharded"] |= any(is_leaderd(c) and is_sharded(c)
                                   for c in pod.get("initContainers", [])
                                   + pod.get("containers", []))
    check(seen["native"], "an example with leaderd as a native sidecar")
    check(seen["plain"], "an example with leaderd as a plain container")
    check(seen["gated"], "an example gating Service traffic on /leader")
    check(seen["sharded"], "an example of a shard group (--shards)")
    print("deploy: %d passed, %d failed, 0 skipped"
          % (results["passed"], results["failed"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
