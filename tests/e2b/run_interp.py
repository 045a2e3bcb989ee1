#!/usr/bin/env python3
"""The real @e2b/code-interpreter 2.8.0 (tests/e2b/package-lock.json) against
a real airlockd and the code-interpreter-v1 template (images/code-interpreter.json,
built by scripts/prepare.sh): interp.mjs, one line per case, then
interp_bench.mjs's latencies as an info line (docs/performance.md).

The daemon keeps a pool of one code-interpreter-v1 member, and this waits
for it before the SDK runs: the template is meant to be served from its
base snapshot (the kernel warm, runCode without starting Python), and a
cold create under TCG takes longer than the SDK's HTTP client waits for
response headers (undici's 300 s headersTimeout, not configurable through
the SDK), so a cold create there fails with "fetch failed" however long
requestTimeoutMs is.

Usage: run_interp.py AIRLOCKD [DATA_ROOT]. A missing template is a failure
(scripts/prepare.sh builds it), a skip (exit 77) with AIRLOCK_PREPARE_INTERP=0,
which tells prepare to leave it out (docs/templates.md)."""
import json, os, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(here), "lib"))
from daemon_client import Daemon

TEMPLATE = "code-interpreter-v1"
POOL_WAIT_S = 1800      # the base build: boot, kernel start and warm-up under TCG

def run_node(node, script, env, counts):
    p = subprocess.run([node, os.path.join(here, script)], env=env, cwd=here,
                       capture_output=True, text=True, timeout=3000)
    lines = p.stdout.splitlines()
    for line in lines:
        print(line, flush=True)
        counts[0] += line.startswith("ok: ")
        counts[1] += line.startswith("FAIL: ")
    if p.returncode != 0 and not any(l.startswith("FAIL: ") for l in lines):
        print(f"FAIL: {script}: node exited {p.returncode}: {p.stderr[-2000:]}")
        counts[1] += 1
    return lines

def wait_member(c, secs=POOL_WAIT_S):
    """The pool refills after a claim: wait for its member again."""
    end = time.time() + secs
    while time.time() < end and next(x for x in c.call("GET", "/v1/pools")["pools"]
                                     if x["template"] == TEMPLATE)["ready"] < 1:
        time.sleep(2)

# What docs_quickstart.mjs prints when every call it makes worked.
DOCS_EXPECT = ["hello world", "home", "written by the docs program", "Hello from E2B!"]

def docs_program(c, node, env, counts):
    """A program written from E2B's documentation runs unchanged, env vars only."""
    wait_member(c)
    p = subprocess.run([node, os.path.join(here, "docs_quickstart.mjs")], env=env, cwd=here,
                       capture_output=True, text=True, timeout=3000)
    missing = [w for w in DOCS_EXPECT if w not in p.stdout]
    ok = p.returncode == 0 and not missing
    print(("ok" if ok else "FAIL") + ": docs program: E2B's quickstart, commands and files "
          "examples run unchanged with the environment variables only" +
          ("" if ok else f" (exit {p.returncode}, missing {missing}: {p.stdout[-1500:]} "
           f"{p.stderr[-1500:]})"), flush=True)
    counts[0 if ok else 1] += 1

def main():
    binary = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    if not os.path.exists(os.path.join(root, "templates", TEMPLATE, "template.json")):
        if os.environ.get("AIRLOCK_PREPARE_INTERP", "1") == "0":
            print(f"skip: {TEMPLATE} is not built in {root} (AIRLOCK_PREPARE_INTERP=0)")
            return 77
        print(f"FAIL: template {TEMPLATE} is not built in {root} (make prepare builds it "
              "unless AIRLOCK_PREPARE_INTERP=0)")
        print("0 passed, 1 failed")
        return 1
    setup = subprocess.run(["bash", os.path.join(here, "setup.sh")], capture_output=True, text=True)
    if setup.returncode != 0:
        print("FAIL: setup: " + setup.stderr[-2000:])
        print("0 passed, 1 failed")
        return 1
    node = setup.stdout.strip().splitlines()[-1]
    counts = [0, 0]
    d = Daemon(binary, root)
    try:
        c = d.start({"AIRLOCK_POOL": f"{TEMPLATE}=1", "AIRLOCK_POOL_REFILLS": "1"})
        t0 = time.time()
        p = None
        while time.time() < t0 + POOL_WAIT_S:
            p = next(x for x in c.call("GET", "/v1/pools")["pools"] if x["template"] == TEMPLATE)
            if p["ready"] >= 1 or p["base"]["state"] == "failed":
                break
            time.sleep(2)
        ok = p is not None and p["ready"] >= 1
        print(("ok" if ok else "FAIL") + f": pool: {TEMPLATE} base built and a member ready "
              f"in {time.time() - t0:.0f} s (base build {p and p['base']['build_ms']} ms)" + ("" if ok else f" ({p}; {d.logtail()})"), flush=True)
        counts[0 if ok else 1] += 1
        if ok:
            key = c.call("POST", "/v1/keys", {"name": "e2b-interp", "format": "e2b"})["key"]
            url = f"http://127.0.0.1:{c.port}"
            env = dict(os.environ, E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=key)
            for k in ("E2B_DOMAIN", "E2B_DEBUG", "E2B_CONNECT_TO"):
                env.pop(k, None)
            run_node(node, "interp.mjs", env, counts)
            docs_program(c, node, env, counts)
            if os.environ.get("INTERP_BENCH", "1") != "0":
                # The pool refills after the docs program's claim: the bench's create is one too.
                wait_member(c)
                for line in subprocess.run([node, os.path.join(here, "interp_bench.mjs")], env=env,
                                           cwd=here, capture_output=True, text=True,
                                           timeout=3000).stdout.splitlines():
                    print("info: interp_bench: " + line, flush=True)
        rep = d.sanitizer_report()
        if rep:
            print("FAIL: airlockd sanitizer report:\n" + rep)
            counts[1] += 1
        else:
            print("ok: airlockd: no sanitizer report")
            counts[0] += 1
    except Exception as e:
        print(f"FAIL: harness: {e!r}\n{d.logtail()}")
        counts[1] += 1
    finally:
        d.cleanup()
    print(f"{counts[0]} passed, {counts[1]} failed")
    return 1 if counts[1] else 0

if __name__ == "__main__":
    sys.exit(main())
