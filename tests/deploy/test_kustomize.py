#!/usr/bin/python3
"""Every overlay of deploy/kubernetes renders offline with `kubectl
kustomize` into well-formed objects, and every kustomization uses only what
both kustomize v2.0 (Debian 12's kubectl 1.20) and v5 (kubectl 1.27+) read,
so the check means the same whichever kubectl a host has.
Negative fixtures: broken/kustomize-* (expect kustomize, kustomize:portable).
Usage: test_kustomize.py"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import yaml
from deploy_lib import K8S, OVERLAYS, check, expect_exactly, fixtures, kubectl, render_all, summary

# The fields kustomize v2.0.3 knows (kubectl 1.20); v5 reads them too (some
# with a deprecation warning). v2.0 loads only files from `resources` and
# directories from `bases`.
PORTABLE_FIELDS = {
    "apiVersion", "kind", "namespace", "namePrefix", "nameSuffix", "commonLabels",
    "commonAnnotations", "resources", "bases", "patchesStrategicMerge", "patchesJson6902",
    "images", "configMapGenerator", "secretGenerator", "generatorOptions", "vars",
}


def portable(kdir):
    """Problems that would make kustomize v2.0 read kdir/kustomization.yaml differently."""
    k = yaml.safe_load(open(os.path.join(kdir, "kustomization.yaml")))
    out = [f"field {f!r} (kustomize v3+ only)" for f in sorted(set(k) - PORTABLE_FIELDS)]
    for r in k.get("resources") or []:
        if os.path.isdir(os.path.join(kdir, r)):
            out.append(f"resources: {r} is a directory (v2.0 wants it under bases)")
    for b in k.get("bases") or []:
        if not os.path.isdir(os.path.join(kdir, b)):
            out.append(f"bases: {b} is not a directory")
    return out


def well_formed(objs):
    """Problems with the rendered objects themselves."""
    out = []
    if not objs:
        return ["no objects"]
    seen = set()
    for o in objs:
        if not isinstance(o, dict) or not o.get("apiVersion") or not o.get("kind") or \
                not (o.get("metadata") or {}).get("name"):
            out.append(f"object without apiVersion, kind or name: {str(o)[:120]}")
            continue
        key = (o["apiVersion"].split("/")[0], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        if key in seen:
            out.append(f"{o['kind']}/{o['metadata']['name']} twice")
        seen.add(key)
    return out


def main():
    exe, version = kubectl()
    if not check("a kubectl that renders kustomizations", exe is not None, version, show=True):
        return summary()
    dirs = [d for d, _, files in os.walk(K8S) if "kustomization.yaml" in files]
    for d in sorted(dirs):
        problems = portable(d)
        check(f"{os.path.relpath(d, K8S)}: portable to kustomize v2.0 and v5", not problems, "; ".join(problems))
    others = [f for stage in ("schema", "policy") for f in fixtures(stage) if f.kind == "overlay"]
    bad = {f"{f.name}: {p}" for f in others for p in portable(f.path)}
    check(f"broken/: the {len(others)} other fixture overlays are portable too", not bad, "; ".join(sorted(bad)))
    fx = fixtures("kustomize")
    results = render_all(exe, list(OVERLAYS.values()) + [f.path for f in fx])
    for name, path in OVERLAYS.items():
        objs, err = results[path]
        check(f"{name}: renders", objs is not None, err)
        if objs is not None:
            problems = well_formed(objs)
            if name != "base":
                problems += [f"{o['kind']}/{o['metadata']['name']} outside namespace airlock"
                             for o in objs if o.get("metadata", {}).get("namespace") not in (None, "airlock")]
            check(f"{name}: {len(objs)} well-formed objects", not problems, "; ".join(problems))
    for f in fx:
        failed = set()
        if portable(f.path):
            failed.add("kustomize:portable")
        objs, err = results[f.path]
        # A kustomization only v5 reads may or may not render: that is what
        # kustomize:portable is about, so only its own verdict counts then.
        if f.stage("kustomize") != {"kustomize:portable"} and (objs is None or well_formed(objs)):
            failed.add("kustomize")
        expect_exactly(f, "kustomize", failed)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
