#!/usr/bin/python3
"""deploy/container/Containerfile can be built, as far as can be told
without a container engine (none here or in CI): its base images are
pinned exact versions; every path it copies exists in the tree or is a
meson executable that the build stage's ninja command builds; the image
installs the Debian package of every shared library the host binaries
link (their NEEDED entries, read from the build dir's binaries); the
sections of scripts/packages.txt it installs parse; prepare.sh finds in
the image every script, recipe, recipe file and binary it uses; and the
manifests' commands and the API's uid are the image's. Negative fixtures:
broken/image-*.yaml, broken copies that must fail exactly the check they
name.
Usage: test_image.py BUILD_DIR"""
import glob, json, os, re, shlex, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import yaml
from deploy_lib import SRC, broken_copy, check, expect_exactly, fixtures, pinned, scratch, summary

CONTAINERFILE = "deploy/container/Containerfile"
PACKAGES = "scripts/packages.txt"
PACKAGES_SH = "deploy/container/packages.sh"
PREPARE = "scripts/prepare.sh"
SHARE = "/usr/local/share/airlock"
HOST_BINARIES = ["src/airlockd/airlockd", "src/cli/airlock", "src/gateway/airlock-gateway"]
# In every Debian image, or only in a sanitizer build's binaries.
NOT_INSTALLED = {"libc6", "libasan8", "libubsan1", "libgcc-s1", "libstdc++6"}


def instructions(text):
    """[(stage index, INSTRUCTION, argument text)] with continuations joined."""
    out, stage, cur = [], -1, ""
    for line in text.splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        cur += line.rstrip()
        if cur.endswith("\\"):
            cur = cur[:-1] + " "
            continue
        word, _, rest = cur.strip().partition(" ")
        if word.upper() == "FROM":
            stage += 1
        out.append((stage, word.upper(), rest.strip()))
        cur = ""
    return out


class Image:
    """What the Containerfile says, as far as the checks need it."""

    def __init__(self, text):
        self.ins = instructions(text)
        self.stages = []                  # [(image, name)]
        for _, word, rest in self.ins:
            if word == "FROM":
                toks = [t for t in rest.split() if not t.startswith("--")]
                self.stages.append((toks[0], toks[2] if len(toks) > 2 and toks[1].upper() == "AS" else None))
        self.final = len(self.stages) - 1

    def copies(self, stage=None):
        """[(stage, from stage or None, [sources], dest)]."""
        out = []
        for st, word, rest in self.ins:
            if word not in ("COPY", "ADD") or (stage is not None and st != stage):
                continue
            toks = shlex.split(rest)
            frm = next((t.split("=", 1)[1] for t in toks if t.startswith("--from=")), None)
            paths = [t for t in toks if not t.startswith("--")]
            out.append((st, frm, paths[:-1], paths[-1]))
        return out

    def runs(self, stage):
        return [rest for st, word, rest in self.ins if st == stage and word == "RUN"]

    def installed(self, tree):
        """Paths the final stage holds from COPY (files under copied dirs too) and ln -s."""
        out = set()
        for _, frm, srcs, dest in self.copies(self.final):
            for s in srcs:
                base = os.path.basename(s.rstrip("/"))
                target = dest + base if dest.endswith("/") else dest
                if frm is None and os.path.isdir(tree(s)):
                    root = dest.rstrip("/") if dest.endswith("/") else dest
                    for d, _, fs in os.walk(tree(s)):
                        for f in fs:
                            out.add(os.path.join(root, os.path.relpath(os.path.join(d, f), tree(s))))
                else:
                    out.add(target)
        for run in self.runs(self.final):
            for m in re.finditer(r"ln -s\w* (\S+) (\S+)", run):
                out.add(m.group(2))
        return out


def meson_builds(path):
    """True when path (relative to the build dir) is an executable that
    meson.build in its source folder declares."""
    d, name = os.path.split(path)
    mb = os.path.join(SRC, d, "meson.build")
    return os.path.isfile(mb) and re.search(r"executable\(\s*'%s'" % re.escape(name), open(mb).read()) is not None


def ninja_builds(img, stage_name, target):
    """True when the named stage's `ninja -C build` builds target: all
    targets when it names none, else the ones it names."""
    stage = next((i for i, (_, n) in enumerate(img.stages) if n == stage_name), None)
    for run in img.runs(stage):
        for m in re.finditer(r"ninja -C build((?:\s+[\w./-]+)*)", run):
            named = m.group(1).split()
            if not named or target in named:
                return True
    return False


def packages(tree, section):
    p = subprocess.run(["sh", tree(PACKAGES_SH), section, tree(PACKAGES)], capture_output=True, text=True)
    return set(p.stdout.split()) if p.returncode == 0 else set()


def needed_packages(build):
    """{binary: {package}} of the NEEDED shared libraries of the host binaries
    (None for a binary the build dir lacks)."""
    libs = {}
    for b in HOST_BINARIES:
        path = os.path.join(build, b)
        if not os.path.isfile(path):
            libs[b] = None
            continue
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                            subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout)
        lddout = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        where = dict(re.findall(r"^\s*(\S+) => (/\S+)", lddout, re.M))
        # The loader has no "=>" line ("\t/lib64/ld-linux-x86-64.so.2 (0x...)"): a release
        # build NEEDs it by name (glibc 2.36), a sanitizer build does not.
        for p in re.findall(r"^\s*(/\S+) \(0x", lddout, re.M):
            where.setdefault(os.path.basename(p), p)
        libs[b] = {so: os.path.realpath(where[so]) if so in where else so for so in needed}
    # One dpkg -S for all: Debian 12 registers a library under /lib or /usr/lib.
    files = {f for m in libs.values() if m for f in m.values()}
    q = subprocess.run(["dpkg", "-S"] + sorted(files | {f[4:] for f in files if f.startswith("/usr/")}),
                       capture_output=True, text=True)
    owner = {}
    for line in q.stdout.splitlines():
        pkg, _, f = line.partition(": ")
        owner[f] = owner["/usr" + f] = pkg.split(":")[0]
    return {b: None if m is None else {owner.get(f, f"? {so}") for so, f in m.items()} for b, m in libs.items()}


def run_checks(tree, build, needed):
    """{check id: [problems]}; tree(rel) is the path of a repository file
    (a fixture's broken copy where it has one)."""
    img = Image(open(tree(CONTAINERFILE)).read())
    names = {n for _, n in img.stages if n}
    res = {}
    res["base-pinned"] = [f"FROM {i}: not an exact version" for i, _ in img.stages
                          if i not in names and not pinned(i)]
    out = []
    for st, frm, srcs, dest in img.copies():
        for s in srcs:
            if frm is None:
                if not os.path.exists(tree(s)):
                    out.append(f"COPY {s}: not in the repository")
                continue
            rel = os.path.relpath(s, "/src")          # the build stage's WORKDIR
            if rel.startswith("build/"):
                target = rel[len("build/"):]
                if not meson_builds(target):
                    out.append(f"COPY --from={frm} {s}: no meson executable {rel}")
                elif not ninja_builds(img, frm, target):
                    out.append(f"COPY --from={frm} {s}: not among the targets ninja builds there")
            elif rel.startswith("..") or not os.path.exists(tree(rel)):
                out.append(f"COPY --from={frm} {s}: not copied into that stage from the repository")
    res["copy-sources"] = out
    run_text = " ".join(img.runs(img.final))
    listed = packages(tree, "run") | set(re.findall(r"[a-z0-9][a-z0-9.+-]+", run_text))
    out = []
    for b, pkgs in needed.items():
        if pkgs is None:
            out.append(f"{build}/{b} missing (build first)")
            continue
        out += [f"{b} needs {p}, which the image does not install" for p in sorted(pkgs - NOT_INSTALLED - listed)]
    res["runtime-libs"] = out
    build_pkgs, run_pkgs = packages(tree, "build"), packages(tree, "run")
    res["packages-sections"] = [f"section {sec} of {PACKAGES} lacks {p}" for sec, got, want in (
        ("build", build_pkgs, {"meson", "ninja-build", "gcc", "libevent-dev", "libjansson-dev"}),
        ("run", run_pkgs, {"qemu-system-x86", "debootstrap", "btrfs-progs", "nftables", "e2fsprogs"}))
        for p in sorted(want - got)]
    res["prepare-tree"] = prepare_tree(tree, img.installed(tree))
    res["manifests"] = manifests(tree, img)
    return res


def prepare_tree(tree, installed):
    """What prepare.sh (and the scripts it runs) open, mapped into the image."""
    out, seen, todo = [], set(), [PREPARE]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        text = open(tree(rel)).read()
        for name in re.findall(r'\$here/([\w.-]+)', text):
            todo.append("scripts/" + name)
        for name in re.findall(r'\$top/images/([\w.-]+)', text):
            todo.append("images/" + name)
        for path in re.findall(r'\$BUILD/([\w./-]+)', text):
            if f"{SHARE}/build/{path}" not in installed:
                out.append(f"{rel} runs $BUILD/{path}: not at {SHARE}/build/{path} in the image")
    for rel in sorted(seen):
        if f"{SHARE}/{rel}" not in installed:
            out.append(f"{rel} (used by prepare.sh) is not at {SHARE}/{rel} in the image")
        if rel.startswith("images/") and rel.endswith(".json"):
            for f in json.load(open(tree(rel))).get("files", []):
                src = os.path.normpath(os.path.join("images", f["src"]))
                if f"{SHARE}/{src}" not in installed:
                    out.append(f"{rel} copies {f['src']}: not at {SHARE}/{src} in the image")
    return out


def manifests(tree, img):
    """The commands the base manifests run are in the image; the API's uid is its user."""
    out, installed = [], img.installed(tree)
    uid = re.search(r"useradd\b[^;&]*--uid (\d+)", " ".join(img.runs(img.final)))
    for path in sorted(glob.glob(os.path.join(SRC, "deploy/kubernetes/base/*.yaml"))):
        for o in yaml.safe_load_all(open(tree(os.path.relpath(path, SRC)))):
            spec = ((o or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            for c in spec.get("initContainers", []) + spec.get("containers", []):
                cmd = (c.get("command") or [None])[0]
                if cmd and cmd not in installed:
                    out.append(f"{o['metadata']['name']}/{c['name']} runs {cmd}: not in the image")
            user = (spec.get("securityContext") or {}).get("runAsUser")
            if o["kind"] == "Deployment" and user not in (None, 0) and (not uid or int(uid.group(1)) != user):
                out.append(f"{o['metadata']['name']} runs as uid {user}, the image's user is "
                           f"{uid.group(1) if uid else 'not created'}")
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    needed = needed_packages(build)
    got = run_checks(lambda rel: os.path.join(SRC, rel), build, needed)
    for cid, problems in got.items():
        check(f"Containerfile: {cid}", not problems, "; ".join(problems))
    with scratch() as tmp:
        for f in fixtures("image"):
            copy = broken_copy(f, tmp)
            if not check(f"broken/{f.name}: applies to {f.spec['file']}", copy is not None):
                continue
            tree = lambda rel: os.path.join(tmp, rel) if rel == f.spec["file"] else os.path.join(SRC, rel)
            got = run_checks(tree, build, needed)
            expect_exactly(f, "image", {"image:" + cid for cid, p in got.items() if p})
    covered = {e.split(":", 1)[1] for f in fixtures("image") for e in f.stage("image")}
    missing = sorted(set(got) - covered)
    check(f"each of the {len(got)} checks has a negative fixture", not missing, "none for: " + ", ".join(missing))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
