"""What the offline checks of deploy/ share (tests/deploy/test_*.py, meson
suite 'deploy'; docs/kubernetes.md "What is checked offline"): the paths,
rendering an overlay with `kubectl kustomize`, the negative fixtures, and
the one check/summary of tests/lib/daemon_client.py.

Negative fixtures live in broken/. Each says which checks it must fail, and
a test passes a fixture only when exactly those checks of its stage fail
(a fixture that fails for another reason would prove nothing):
  broken/NAME/kustomization.yaml  an overlay on the real base or overlays,
                                  first comment lines "# expect: STAGE:CHECK, ..."
  broken/NAME.yaml                a copy of a real file with text replaced:
                                  {expect: [...], file: PATH, replace: [{old, new}]}
                                  (a replacement that no longer applies fails)."""
import os, re, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
from daemon_client import check, summary  # noqa: E402,F401  (the one report of every test)

import yaml  # noqa: E402  (python3-yaml, Debian)

K8S = os.path.join(SRC, "deploy", "kubernetes")
OVERLAYS = {
    "base": os.path.join(K8S, "base"),
    "kind": os.path.join(K8S, "overlays", "kind"),
    "eks": os.path.join(K8S, "overlays", "eks"),
}
CLUSTER_CONFIGS = {
    "kind": os.path.join(K8S, "kind", "cluster.yaml"),
    "eks": os.path.join(K8S, "eks", "cluster.yaml"),
}
BROKEN = os.path.join(HERE, "broken")


def kubectl():
    """The kubectl to render with ($KUBECTL, else the one on PATH) and its
    version line, or (None, why). Debian's kubernetes-client 1.20 (kustomize
    v2.0) and kubectl 1.27+ (kustomize v5) both work: the overlays use only
    what both read."""
    exe = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if not exe:
        return None, "no kubectl (scripts/deps.sh installs kubernetes-client)"
    p = subprocess.run([exe, "version", "--client"], capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"{exe} version --client: {p.stderr.strip()[:300]}"
    return exe, p.stdout.strip().splitlines()[0] if p.stdout.strip() else exe


def render(exe, path):
    """`kubectl kustomize PATH`: (objects, None) or (None, the error)."""
    p = subprocess.run([exe, "kustomize", path], capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr or p.stdout).strip()[-600:]
    try:
        objs = [o for o in yaml.safe_load_all(p.stdout) if o is not None]
    except yaml.YAMLError as e:
        return None, f"output is not YAML: {e}"
    return objs, None


def render_all(exe, paths):
    """render() of several paths at once (each is a kubectl process): {path: (objs, err)}."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(paths, pool.map(lambda p: render(exe, p), paths)))


class Fixture:
    def __init__(self, name, path, expect, kind):
        self.name, self.path, self.expect, self.kind = name, path, expect, kind
        self.like = "base"          # which overlay's rules apply (kind, eks, base)

    def stage(self, stage):
        """The expected checks of one stage ("render", "policy", ...)."""
        return {e for e in self.expect if e == stage or e.startswith(stage + ":")}


def _expect_header(text):
    out = set()
    for line in text.splitlines():
        m = re.match(r"#\s*expect:\s*(.+)", line)
        if m:
            out |= {e.strip() for e in m.group(1).split(",") if e.strip()}
    return out


def fixtures(stage):
    """The negative fixtures with at least one expected check of this stage."""
    out = []
    for name in sorted(os.listdir(BROKEN)):
        path = os.path.join(BROKEN, name)
        if os.path.isdir(path):
            text = open(os.path.join(path, "kustomization.yaml")).read()
            f = Fixture(name, path, _expect_header(text), "overlay")
            for like in ("kind", "eks"):
                if re.search(r"deploy/kubernetes/overlays/%s\b" % like, text):
                    f.like = like
        elif name.endswith(".yaml"):
            spec = yaml.safe_load(open(path))
            f = Fixture(name[:-5], path, set(spec["expect"]), "copy")
            f.spec = spec
        else:
            continue
        if f.stage(stage):
            out.append(f)
    return out


def broken_copy(f, tmp):
    """Write the fixture's broken copy of its file into tmp, under the same
    relative path; return that path, or None when a replacement does not
    apply any more (the fixture must then be updated)."""
    rel = f.spec["file"]
    text = open(os.path.join(SRC, rel)).read()
    for r in f.spec["replace"]:
        if r["old"] not in text:
            return None
        text = text.replace(r["old"], r["new"], 1)
    dst = os.path.join(tmp, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "w") as fh:
        fh.write(text)
    return dst


def scratch():
    return tempfile.TemporaryDirectory(prefix="airlock-deploy-")


def expect_exactly(f, stage, failed):
    """The fixture's verdict: exactly its expected checks of this stage failed."""
    want = f.stage(stage)
    return check(f"broken/{f.name}: fails {', '.join(sorted(want))}", set(failed) == want,
                 "failed: " + (", ".join(sorted(failed)) or "nothing"))


def pinned(image):
    """An exact version: a digest, or a tag with major.minor (0.1.0, 12.11-slim,
    15.13-bookworm). Not latest, no tag, not a moving name (bookworm, 15)."""
    if not image or "@sha256:" in image:
        return bool(image)
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return False
    tag = last.split(":", 1)[1]
    return tag != "latest" and re.match(r"v?\d+\.\d+", tag) is not None
