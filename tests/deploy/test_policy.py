#!/usr/bin/python3
"""What the manifests of deploy/kubernetes must say, whatever the schema
allows: the worker's privileges, devices, node identity and drain; the
API's replicas, disruption budget, probes and confinement; pinned images,
resource requests and no secret values in the repository; and that the Kind
and EKS cluster configs give the workers the nodes they select. Each check
below is asserted on every overlay, and each has a negative fixture in
broken/ (policy-*, cluster-*.yaml) that must fail exactly that check; a
check without one fails too.
Usage: test_policy.py"""
import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import yaml
from deploy_lib import (CLUSTER_CONFIGS, OVERLAYS, SRC, broken_copy, check, expect_exactly, fixtures,
                        kubectl, pinned, render_all, scratch, summary)

WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "Pod")
GRACE_MIN = 300                       # s: a worker suspends every sandbox on SIGTERM
DRAIN_TAINT = {"key": "airlock.dev/drain", "value": "true", "effect": "NoExecute"}  # docs/kubernetes.md
PREPARE = "/usr/local/share/airlock/prepare.sh"


# ---- reading the rendered objects

def pod_spec(o):
    if o["kind"] == "Pod":
        return o.get("spec") or {}
    return ((o.get("spec") or {}).get("template") or {}).get("spec") or {}


def pod_labels(o):
    if o["kind"] == "Pod":
        return o["metadata"].get("labels") or {}
    return ((o["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}


def workloads(objs):
    return [o for o in objs if o["kind"] in WORKLOADS]


def containers(o, init=True):
    s = pod_spec(o)
    return (s.get("initContainers") or [] if init else []) + (s.get("containers") or [])


def role(c):
    """airlockd's role from --role ROLE / --role=ROLE / AIRLOCK_ROLE, else None."""
    args = (c.get("command") or []) + (c.get("args") or [])
    for i, a in enumerate(args):
        if a == "--role" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--role="):
            return a.split("=", 1)[1]
    for e in c.get("env") or []:
        if e.get("name") == "AIRLOCK_ROLE":
            return e.get("value")
    return None


def with_role(objs, r):
    """[(workload, container)] running airlockd --role r."""
    return [(o, c) for o in workloads(objs) for c in containers(o, init=False) if role(c) == r]


def configmap(objs, name):
    for o in objs:
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name:
            return o.get("data") or {}
    return None


def env(objs, c):
    """The container's environment: {name: ("value", v) | ("field", path) |
    ("secret", name, key) | ("configmap", name, key)}, envFrom ConfigMaps
    resolved from the render (later entries win, as in Kubernetes)."""
    out = {}
    for ef in c.get("envFrom") or []:
        if "configMapRef" in ef:
            for k, v in (configmap(objs, ef["configMapRef"]["name"]) or {}).items():
                out[k] = ("value", v)
        if "secretRef" in ef:
            out["<envFrom secret %s>" % ef["secretRef"]["name"]] = ("secret", ef["secretRef"]["name"], None)
    for e in c.get("env") or []:
        vf = e.get("valueFrom") or {}
        if "value" in e:
            out[e["name"]] = ("value", e["value"])
        elif "fieldRef" in vf:
            out[e["name"]] = ("field", vf["fieldRef"].get("fieldPath"))
        elif "secretKeyRef" in vf:
            out[e["name"]] = ("secret", vf["secretKeyRef"]["name"], vf["secretKeyRef"]["key"])
        elif "configMapKeyRef" in vf:
            r = vf["configMapKeyRef"]
            out[e["name"]] = ("value", (configmap(objs, r["name"]) or {}).get(r["key"]))
    return out


def value(envd, name):
    v = envd.get(name)
    return v[1] if v and v[0] == "value" else None


def port_of(hostport):
    m = re.fullmatch(r".*:(\d+)", hostport or "")
    return int(m.group(1)) if m else None


def volume(o, name):
    for v in pod_spec(o).get("volumes") or []:
        if v["name"] == name:
            return v
    return None


def mount_at(o, c, path):
    """(volume, mount) mounted at path in container c, or (None, None)."""
    for m in c.get("volumeMounts") or []:
        if m["mountPath"].rstrip("/") == path.rstrip("/"):
            return volume(o, m["name"]), m
    return None, None


def probe_port(c, probe):
    """The probe's httpGet port as a number (named ports resolved)."""
    p = (probe.get("httpGet") or {}).get("port")
    if isinstance(p, int):
        return p
    for cp in c.get("ports") or []:
        if cp.get("name") == p:
            return cp["containerPort"]
    return None


def selects(selector, labels):
    ml = (selector or {}).get("matchLabels") or {}
    return bool(ml) and all(labels.get(k) == v for k, v in ml.items()) and \
        not (selector or {}).get("matchExpressions")


def tolerates(tolerations, taint):
    for t in tolerations or []:
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value") == taint.get("value"):
            return True
    return False


# ---- the checks: each returns the problems it found in one render

def each_worker(objs, fn):
    ws = with_role(objs, "worker")
    if not ws:
        return ["no workload runs airlockd --role worker"]
    return [p for o, c in ws for p in fn(o, c)]


def each_api(objs, fn):
    api = with_role(objs, "api")
    if not api:
        return ["no workload runs airlockd --role api"]
    return [p for o, c in api for p in fn(o, c)]


def worker_privileged(objs, ctx):
    def f(o, c):
        out = [] if o["kind"] == "DaemonSet" else [f"{o['kind']}/{o['metadata']['name']}: not a DaemonSet"]
        if not (c.get("securityContext") or {}).get("privileged"):
            out.append("the worker container is not privileged")
        return out
    return each_worker(objs, f)


def worker_host_network(objs, ctx):
    def f(o, c):
        s = pod_spec(o)
        out = [] if s.get("hostNetwork") else ["hostNetwork is not true"]
        if s.get("dnsPolicy") != "ClusterFirstWithHostNet":
            out.append(f"dnsPolicy {s.get('dnsPolicy')} (the store's Service name needs ClusterFirstWithHostNet)")
        return out
    return each_worker(objs, f)


def worker_host_pid(objs, ctx):
    return each_worker(objs, lambda o, c: [] if pod_spec(o).get("hostPID") else
                       ["hostPID is not true (a restarted worker could not adopt its VMs)"])


def worker_devices(objs, ctx):
    def f(o, c):
        out = []
        for dev in ("/dev/kvm", "/dev/net/tun"):
            v, _ = mount_at(o, c, dev)
            hp = (v or {}).get("hostPath") or {}
            if hp.get("path") != dev or hp.get("type") != "CharDevice":
                out.append(f"{dev}: not mounted from a hostPath of type CharDevice ({hp or v})")
        return out
    return each_worker(objs, f)


def worker_netns(objs, ctx):
    def f(o, c):
        v, m = mount_at(o, c, "/run/netns")
        if ((v or {}).get("hostPath") or {}).get("path") != "/run/netns":
            return ["/run/netns is not the host's"]
        if m.get("mountPropagation") != "Bidirectional":
            return [f"/run/netns mountPropagation {m.get('mountPropagation')}, not Bidirectional"]
        return []
    return each_worker(objs, f)


def worker_data_dir(objs, ctx):
    def f(o, c):
        out = []
        for cc in [c] + (pod_spec(o).get("initContainers") or []):
            d = value(env(objs, cc), "AIRLOCK_DATA_DIR") or "/var/lib/airlock"
            v, _ = mount_at(o, cc, d)
            if not (v or {}).get("hostPath"):
                out.append(f"{cc['name']}: the data dir {d} is not a hostPath mount")
        return out
    return each_worker(objs, f)


def worker_downward(objs, ctx):
    def f(o, c):
        e, out = env(objs, c), []
        if e.get("AIRLOCK_WORKER_NAME") != ("field", "spec.nodeName"):
            out.append(f"AIRLOCK_WORKER_NAME is {e.get('AIRLOCK_WORKER_NAME')}, not spec.nodeName")
        adv = value(e, "AIRLOCK_ADVERTISE") or ""
        m = re.fullmatch(r"\$\((\w+)\):\d+", adv)
        if not m:
            out.append(f"AIRLOCK_ADVERTISE {adv!r} is not $(VAR):PORT")
            return out
        names = [x.get("name") for x in c.get("env") or []]
        var = m.group(1)
        if e.get(var) != ("field", "status.hostIP"):
            out.append(f"{var} is {e.get(var)}, not status.hostIP")
        elif names.index(var) > names.index("AIRLOCK_ADVERTISE"):
            out.append(f"{var} is defined after AIRLOCK_ADVERTISE, so $({var}) is not expanded")
        return out
    return each_worker(objs, f)


def worker_ports(objs, ctx):
    def f(o, c):
        e, out = env(objs, c), []
        listen = port_of(value(e, "AIRLOCK_WORKER_LISTEN"))
        adv = port_of(value(e, "AIRLOCK_ADVERTISE"))
        health = port_of(value(e, "AIRLOCK_HEALTH_LISTEN"))
        if listen is None or listen != adv:
            out.append(f"AIRLOCK_ADVERTISE port {adv} is not AIRLOCK_WORKER_LISTEN's {listen}")
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            if c.get(kind) and probe_port(c, c[kind]) != health:
                out.append(f"{kind} on port {probe_port(c, c[kind])}, AIRLOCK_HEALTH_LISTEN is {health}")
        return out
    return each_worker(objs, f)


def probes_on(c, live, ready):
    out = []
    for kind, path in (("livenessProbe", live), ("readinessProbe", ready)):
        got = ((c.get(kind) or {}).get("httpGet") or {}).get("path")
        if got != path:
            out.append(f"{kind}: httpGet path {got}, not {path}")
    return out


def worker_probes(objs, ctx):
    return each_worker(objs, lambda o, c: probes_on(c, "/healthz", "/readyz"))


def worker_tolerations(objs, ctx):
    def f(o, c):
        ts, out = pod_spec(o).get("tolerations") or [], []
        out += [f"toleration {t} has tolerationSeconds" for t in ts if "tolerationSeconds" in t]
        if tolerates(ts, DRAIN_TAINT):
            out.append("tolerates the drain taint airlock.dev/drain:NoExecute (docs/kubernetes.md)")
        return out
    return each_worker(objs, f)


def worker_grace(objs, ctx):
    def f(o, c):
        g = pod_spec(o).get("terminationGracePeriodSeconds", 30)
        return [] if g >= GRACE_MIN else [f"terminationGracePeriodSeconds {g} < {GRACE_MIN}"]
    return each_worker(objs, f)


def worker_node_selector(objs, ctx):
    return each_worker(objs, lambda o, c: [] if (pod_spec(o).get("nodeSelector") or {}).get(
        "airlock.dev/kvm") == "true" else ["no nodeSelector airlock.dev/kvm=true"])


def worker_prepare(objs, ctx):
    def f(o, c):
        inits = [i for i in pod_spec(o).get("initContainers") or [] if PREPARE in (i.get("command") or [])]
        if not inits:
            return [f"no initContainer runs {PREPARE}"]
        out = []
        for i in inits:
            if i.get("image") != c.get("image"):
                out.append(f"initContainer image {i.get('image')} is not the worker's {c.get('image')}")
            if i.get("envFrom") != c.get("envFrom"):
                out.append("initContainer envFrom differs from the worker's")
            for m in c.get("volumeMounts") or []:
                if m["name"] in ("data", "cache") and mount_at(o, i, m["mountPath"])[0] is None:
                    out.append(f"initContainer does not mount {m['mountPath']}")
        return out
    return each_worker(objs, f)


def cluster_tls(objs, ctx):
    out, certs = [], {}
    for r in ("api", "worker"):
        for o, c in with_role(objs, r):
            e = env(objs, c)
            for var in ("AIRLOCK_CLUSTER_CA", "AIRLOCK_CLUSTER_CERT", "AIRLOCK_CLUSTER_KEY"):
                p = value(e, var)
                if not p:
                    out.append(f"{r}: {var} unset")
                    continue
                v, _ = mount_at(o, c, os.path.dirname(p))
                srcs = [s.get("secret") for s in ((v or {}).get("projected") or {}).get("sources") or []]
                if v and v.get("secret"):
                    srcs = [v["secret"] | {"name": v["secret"].get("secretName")}]
                files = {it["path"]: s["name"] for s in srcs if s for it in s.get("items") or []}
                if os.path.basename(p) not in files:
                    out.append(f"{r}: {var}={p} is not a file projected from a Secret")
                elif var == "AIRLOCK_CLUSTER_CERT":
                    certs.setdefault(files[os.path.basename(p)], set()).add(r)
    for name, roles in certs.items():
        if len(roles) > 1:
            out.append(f"the API and the workers share the certificate Secret {name} (one per role)")
    for o in workloads(objs):
        for v in pod_spec(o).get("volumes") or []:
            srcs = [s.get("secret") for s in (v.get("projected") or {}).get("sources") or []] + [v.get("secret")]
            for s in srcs:
                if s and any(it.get("key") == "ca.key" for it in s.get("items") or []):
                    out.append(f"{o['metadata']['name']}: volume {v['name']} carries ca.key into the cluster")
    return out


def store_secret(objs, ctx):
    out = []
    for r in ("api", "worker"):
        for o, c in with_role(objs, r):
            s = env(objs, c).get("AIRLOCK_STORE")
            if not s or s[0] != "secret":
                out.append(f"{r}: AIRLOCK_STORE is {s and s[0]} {s and s[1]!r}, not from a Secret")
    return out or ([] if with_role(objs, "api") else ["no API"])


def api_replicas(objs, ctx):
    def f(o, c):
        n = o["spec"].get("replicas", 1) if o["kind"] in ("Deployment", "StatefulSet") else None
        return [] if n is not None and n >= 2 else [f"{o['kind']}/{o['metadata']['name']}: replicas {n}"]
    return each_api(objs, f)


def api_pdb(objs, ctx):
    def f(o, c):
        for p in objs:
            if p["kind"] == "PodDisruptionBudget" and selects(p["spec"].get("selector"), pod_labels(o)):
                s = p["spec"]
                if isinstance(s.get("minAvailable"), int) and s["minAvailable"] >= 1:
                    return []
                if isinstance(s.get("maxUnavailable"), int) and s["maxUnavailable"] < o["spec"].get("replicas", 1):
                    return []
                return [f"PodDisruptionBudget/{p['metadata']['name']} keeps no replica up: {s}"]
        return [f"no PodDisruptionBudget selects {o['metadata']['name']}'s pods"]
    return each_api(objs, f)


def api_probes(objs, ctx):
    def f(o, c):
        out = probes_on(c, "/healthz", "/readyz")
        args = c.get("args") or []
        listen = port_of(args[args.index("--listen") + 1]) if "--listen" in args else \
            int(value(env(objs, c), "AIRLOCK_LISTEN_PORT") or 7070)
        tls = value(env(objs, c), "AIRLOCK_TLS") in ("file", "ca")
        for kind in ("livenessProbe", "readinessProbe"):
            p = c.get(kind) or {}
            if probe_port(c, p) != listen:
                out.append(f"{kind} on port {probe_port(c, p)}, the API listens on {listen}")
            scheme = (p.get("httpGet") or {}).get("scheme", "HTTP")
            if scheme != ("HTTPS" if tls else "HTTP"):
                out.append(f"{kind} scheme {scheme} while AIRLOCK_TLS is {value(env(objs, c), 'AIRLOCK_TLS')}")
        return out
    return each_api(objs, f)


def api_non_root(objs, ctx):
    def f(o, c):
        ps, cs = pod_spec(o).get("securityContext") or {}, c.get("securityContext") or {}
        uid = cs.get("runAsUser", ps.get("runAsUser"))
        nonroot = cs.get("runAsNonRoot", ps.get("runAsNonRoot"))
        return [] if nonroot is True and uid not in (None, 0) else [f"runAsNonRoot {nonroot}, runAsUser {uid}"]
    return each_api(objs, f)


def api_hardened(objs, ctx):
    def f(o, c):
        s, cs, out = pod_spec(o), c.get("securityContext") or {}, []
        if cs.get("readOnlyRootFilesystem") is not True:
            out.append("root filesystem is writable")
        if cs.get("allowPrivilegeEscalation") is not False:
            out.append("allowPrivilegeEscalation is not false")
        if cs.get("privileged"):
            out.append("privileged")
        if (cs.get("capabilities") or {}).get("drop") != ["ALL"] or (cs.get("capabilities") or {}).get("add"):
            out.append(f"capabilities {cs.get('capabilities')}, not drop ALL")
        seccomp = (cs.get("seccompProfile") or (s.get("securityContext") or {}).get("seccompProfile") or {})
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            out.append(f"seccompProfile {seccomp or None}")
        for k in ("hostNetwork", "hostPID", "hostIPC"):
            if s.get(k):
                out.append(f"{k} is true")
        out += [f"hostPath volume {v['name']} ({v['hostPath'].get('path')})"
                for v in s.get("volumes") or [] if "hostPath" in v]
        return out
    return each_api(objs, f)


def api_service(objs, ctx):
    def f(o, c):
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
        for s in objs:
            if s["kind"] == "Service" and selects({"matchLabels": s["spec"].get("selector")}, pod_labels(o)):
                bad = [p for p in s["spec"].get("ports") or []
                       if p.get("targetPort", p.get("port")) not in list(ports) + list(ports.values())]
                return [f"Service/{s['metadata']['name']} port {p.get('port')} targets "
                        f"{p.get('targetPort')}, not one of the API's ports {ports}" for p in bad]
        return [f"no Service selects {o['metadata']['name']}'s pods"]
    return each_api(objs, f)


def images_pinned(objs, ctx):
    return [f"{o['metadata']['name']}/{c['name']}: image {c.get('image')!r} is not an exact version"
            for o in workloads(objs) for c in containers(o) if not pinned(c.get("image"))]


def requests(objs, ctx):
    out = []
    for o in workloads(objs):
        for c in containers(o):
            req = (c.get("resources") or {}).get("requests") or {}
            missing = [r for r in ("cpu", "memory") if r not in req]
            if missing:
                out.append(f"{o['metadata']['name']}/{c['name']}: no {' or '.join(missing)} request")
    return out


def no_secret_data(objs, ctx):
    return [f"Secret/{o['metadata']['name']} has {k} in the repository"
            for o in objs if o["kind"] == "Secret" for k in ("data", "stringData") if o.get(k)]


def no_token(objs, ctx):
    return [f"{o['kind']}/{o['metadata']['name']}: a service account token is mounted"
            for o in workloads(objs) if pod_spec(o).get("automountServiceAccountToken") is not False]


def selectors(objs, ctx):
    return [f"{o['kind']}/{o['metadata']['name']}: selector {o['spec'].get('selector')} does not select "
            f"its pods {pod_labels(o)}"
            for o in workloads(objs) if o["kind"] != "Pod" and not selects(o["spec"].get("selector"), pod_labels(o))]


def kind_nodeport(objs, ctx):
    if ctx["like"] != "kind":
        return []
    mapped = {m.get("containerPort") for n in ctx["cluster"].get("nodes") or []
              for m in n.get("extraPortMappings") or []}
    out = [f"Service/{s['metadata']['name']}: nodePort {p.get('nodePort')} is not mapped in kind/cluster.yaml"
           for s in objs if s["kind"] == "Service" and s["spec"].get("type") == "NodePort"
           for p in s["spec"].get("ports") or [] if p.get("nodePort") not in mapped]
    if not any(s["kind"] == "Service" and s["spec"].get("type") == "NodePort" for s in objs):
        out.append("no NodePort Service for the kind/cluster.yaml port mapping")
    return out


def cluster_nodes(objs, ctx):
    """The cluster config (Kind, eksctl) has nodes the worker selects and tolerates;
    on Kind they mount /dev/kvm and a host directory at the worker's data dir."""
    if ctx["like"] not in ("kind", "eks"):
        return []
    cfg, out = ctx["cluster"], []
    groups = (cfg.get("nodes") if ctx["like"] == "kind" else cfg.get("managedNodeGroups")) or []
    for o, c in with_role(objs, "worker"):
        sel = pod_spec(o).get("nodeSelector") or {}
        mine = [g for g in groups if all((g.get("labels") or {}).get(k) == v for k, v in sel.items())]
        if not mine:
            out.append(f"no {ctx['like']} node (group) has the labels {sel}")
        for g in mine:
            for t in g.get("taints") or []:
                if not tolerates(pod_spec(o).get("tolerations"), t):
                    out.append(f"the worker does not tolerate the taint {t} of {g.get('name', g.get('role'))}")
            if ctx["like"] == "kind":
                data = [hp["path"] for v in pod_spec(o).get("volumes") or [] if v["name"] == "data"
                        for hp in [v.get("hostPath") or {}]]
                mounts = {m.get("containerPath"): m.get("hostPath") for m in g.get("extraMounts") or []}
                for need in ["/dev/kvm", "/dev/net/tun"] + data:
                    if not mounts.get(need):
                        out.append(f"the kind worker node does not mount {need} from the host")
    return out


CHECKS = [(f.__name__.replace("_", "-"), f) for f in (
    worker_privileged, worker_host_network, worker_host_pid, worker_devices, worker_netns,
    worker_data_dir, worker_downward, worker_ports, worker_probes, worker_tolerations, worker_grace,
    worker_node_selector, worker_prepare, cluster_tls, store_secret, api_replicas, api_pdb,
    api_probes, api_non_root, api_hardened, api_service, images_pinned, requests, no_secret_data,
    no_token, selectors, kind_nodeport, cluster_nodes)]


def run_checks(objs, like, cluster=None):
    """{check id: [problems]} over one render; like: base, kind or eks."""
    if cluster is None and like in CLUSTER_CONFIGS:
        cluster = yaml.safe_load(open(CLUSTER_CONFIGS[like]))
    ctx = {"like": like, "cluster": cluster or {}}
    out = {}
    for cid, fn in CHECKS:
        try:
            out[cid] = fn(objs, ctx)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            out[cid] = [f"could not evaluate: {e!r}"]
    return out


def main():
    exe, version = kubectl()
    if not check("a kubectl that renders kustomizations", exe is not None, version):
        return summary()
    fx = fixtures("policy")
    overlay_fx = [f for f in fx if f.kind == "overlay"]
    results = render_all(exe, list(OVERLAYS.values()) + [f.path for f in overlay_fx])
    for name, path in OVERLAYS.items():
        objs, err = results[path]
        if not check(f"{name}: renders", objs is not None, err):
            continue
        for cid, problems in run_checks(objs, name).items():
            check(f"{name}: {cid}", not problems, "; ".join(problems))
    with scratch() as tmp:
        for f in fx:
            if f.kind == "overlay":
                objs, err = results[f.path]
                if not check(f"broken/{f.name}: renders", objs is not None, err):
                    continue
                got = run_checks(objs, f.like)
            else:
                copy = broken_copy(f, tmp)
                like = next((k for k, p in CLUSTER_CONFIGS.items() if os.path.relpath(p, SRC) == f.spec["file"]), None)
                if not check(f"broken/{f.name}: applies to {f.spec['file']}", copy is not None and like is not None):
                    continue
                got = run_checks(results[OVERLAYS[like]][0] or [], like, yaml.safe_load(open(copy)))
            expect_exactly(f, "policy", {"policy:" + cid for cid, p in got.items() if p})
    covered = {e.split(":", 1)[1] for f in fx for e in f.stage("policy")}
    missing = [cid for cid, _ in CHECKS if cid not in covered]
    check(f"each of the {len(CHECKS)} checks has a negative fixture", not missing, "none for: " + ", ".join(missing))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
