#!/usr/bin/python3
"""Every YAML file of deploy/ (and of these checks) passes yamllint with
tests/deploy/yamllint.yaml: the default rules plus the YAML 1.1 traps
Kubernetes' parser falls into (yes/on as booleans, 0440 as octal).
Negative fixtures: broken/yaml-*.yaml, broken copies of real manifests, each
of which must fail exactly the rule it names.
Usage: test_yamllint.py"""
import os, re, shutil, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_lib import HERE, SRC, broken_copy, check, expect_exactly, fixtures, scratch, summary

CONFIG = os.path.join(HERE, "yamllint.yaml")


def lint(paths):
    """{(file, line): rule} of yamllint's problems; rule "syntax" for parse errors."""
    p = subprocess.run(["yamllint", "-c", CONFIG, "-f", "parsable"] + paths, capture_output=True, text=True)
    out = []
    for line in p.stdout.splitlines():
        m = re.match(r"(.+?):(\d+):\d+: \[(\w+)\] (.*?)(?: \(([\w-]+)\))?$", line)
        if m:
            out.append((os.path.relpath(m.group(1), SRC), int(m.group(2)), m.group(5) or "syntax", m.group(4)))
    if p.returncode not in (0, 1) or (p.returncode == 1 and not out):
        out.append(("yamllint", 0, "run", (p.stderr or p.stdout).strip()[:300]))
    return out


def main():
    if not check("yamllint installed", shutil.which("yamllint") is not None, "apt-get install yamllint"):
        return summary()
    files = sorted(os.path.join(d, f) for top in ("deploy", "tests/deploy")
                   for d, _, fs in os.walk(os.path.join(SRC, top)) if "node_modules" not in d
                   for f in fs if f.endswith((".yaml", ".yml")))
    problems = lint(files)
    check(f"{len(files)} YAML files lint clean", not problems,
          "; ".join(f"{f}:{n} {msg} ({rule})" for f, n, rule, msg in problems))
    with scratch() as tmp:
        for f in fixtures("yamllint"):
            copy = broken_copy(f, tmp)
            if not check(f"broken/{f.name}: applies to {f.spec['file']}", copy is not None):
                continue
            expect_exactly(f, "yamllint", {"yamllint:" + rule for _, _, rule, _ in lint([copy])})
    return summary()


if __name__ == "__main__":
    sys.exit(main())
