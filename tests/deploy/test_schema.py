#!/usr/bin/python3
"""Every object the overlays of deploy/kubernetes render is valid against
the Kubernetes JSON schemas, with no server (there is no offline apiserver;
`kubectl apply --dry-run=client` needs one). Two validators, because each
misses what the other sees:
  models  kubernetes-models 5.1.0 (Kubernetes 1.27.1 schemas, compiled ajv
          validators; npm, pinned by package-lock.json, run by validate.mjs):
          types, required fields, enums. It lets unknown fields through.
  strict  Debian's python3-kubernetes (22.6, Kubernetes 1.22): every field
          name of every object, recursively, must be one its model declares,
          so a typo such as imagePullPolcy, which the API server would drop
          with a warning, fails. Fields newer than 1.22 are in NEWER_FIELDS.
Negative fixtures: broken/schema-* (expect schema:models, schema:strict).
Usage: test_schema.py"""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_lib import HERE, OVERLAYS, check, expect_exactly, fixtures, kubectl, render_all, summary

import kubernetes.client.models as km

# Fields the manifests may use that Kubernetes added after 1.22 (the
# python3-kubernetes models), by model class. Each entry is a real field of
# the 1.27 schema that kubernetes-models checks for its type.
NEWER_FIELDS = {}


def model_class(api_version, kind):
    """apps/v1 Deployment -> V1Deployment; policy/v1 ... -> V1PodDisruptionBudget."""
    version = api_version.split("/")[-1]
    return getattr(km, version[0].upper() + version[1:] + kind, None)


def strict(obj, cls, path, out):
    """Unknown field names in obj (a dict of model cls), with their paths."""
    if not isinstance(obj, dict):
        return
    names = {v: k for k, v in cls.attribute_map.items()}
    allowed = NEWER_FIELDS.get(cls.__name__, set())
    for key, val in obj.items():
        if key not in names:
            if key not in allowed:
                out.append(f"{path}.{key}: unknown field of {cls.__name__}")
            continue
        walk(val, cls.openapi_types[names[key]], f"{path}.{key}", out)


def walk(val, typ, path, out):
    m = re.fullmatch(r"list\[(.+)\]", typ)
    if m:
        for i, v in enumerate(val if isinstance(val, list) else []):
            walk(v, m.group(1), f"{path}[{i}]", out)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", typ)
    if m:
        for k, v in (val.items() if isinstance(val, dict) else []):
            walk(v, m.group(1), f"{path}[{k}]", out)
        return
    cls = getattr(km, typ, None)
    if cls is not None and hasattr(cls, "attribute_map"):
        strict(val, cls, path, out)


def strict_errors(objs):
    out = []
    for o in objs:
        cls = model_class(o.get("apiVersion", ""), o.get("kind", ""))
        name = f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}"
        if cls is None:
            out.append(f"{name}: no python3-kubernetes model for {o.get('apiVersion')}")
            continue
        errs = []
        strict(o, cls, "", errs)
        out += [f"{name}: {e}" for e in errs]
    return out


def models_errors(renders):
    """validate.mjs over {name: objects}: {name: [errors]}, or raises with why."""
    p = subprocess.run(["bash", os.path.join(HERE, "setup.sh")], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("setup.sh: " + p.stderr.strip()[-600:])
    root = p.stdout.strip().splitlines()[-1]
    p = subprocess.run(["node", os.path.join(HERE, "validate.mjs"), root], input=json.dumps(renders),
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("validate.mjs: " + p.stderr.strip()[-600:])
    return json.loads(p.stdout)


def main():
    exe, version = kubectl()
    if not check("a kubectl that renders kustomizations", exe is not None, version):
        return summary()
    fx = fixtures("schema")
    paths = dict(OVERLAYS, **{"broken/" + f.name: f.path for f in fx})
    results = render_all(exe, list(paths.values()))
    renders = {}
    for name, path in paths.items():
        objs, err = results[path]
        if check(f"{name}: renders", objs is not None, err) and objs is not None:
            renders[name] = objs
    try:
        models = models_errors(renders)
    except (RuntimeError, OSError, ValueError) as e:
        check("kubernetes-models validates", False, e)
        return summary()
    for name in OVERLAYS:
        if name not in renders:
            continue
        n = len(renders[name])
        check(f"{name}: {n} objects valid (kubernetes-models)", not models[name], "; ".join(models[name]))
        errs = strict_errors(renders[name])
        check(f"{name}: {n} objects with known fields only (python3-kubernetes)", not errs, "; ".join(errs))
    for f in fx:
        name = "broken/" + f.name
        if name not in renders:
            continue
        failed = set()
        if models[name]:
            failed.add("schema:models")
        if strict_errors(renders[name]):
            failed.add("schema:strict")
        expect_exactly(f, "schema", failed)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
