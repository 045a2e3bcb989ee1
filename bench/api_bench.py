#!/usr/bin/env python3
"""Latency of sandbox create (cold boot) and exec through the REST API.

Starts its own airlockd (own data dir; kernel and templates shared), runs N
creates and M tiny execs, prints median/p90/p99 and writes JSON to stdout.
Usage: bench/api_bench.py [--airlockd build/src/airlockd/airlockd] [--creates 20] [--execs 100]"""
import argparse, json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from daemon_client import Daemon
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib

def summary(name, xs):
    return benchlib.summary(xs, name=name)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlockd", default="build/src/airlockd/airlockd")
    ap.add_argument("--data", default=os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock"))
    ap.add_argument("--creates", type=int, default=20)
    ap.add_argument("--execs", type=int, default=100)
    a = ap.parse_args()
    d = Daemon(os.path.abspath(a.airlockd), a.data)
    results = []
    try:
        c = d.start()
        creates, deletes = [], []
        for _ in range(a.creates):
            t = time.monotonic()
            sb = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})
            creates.append(time.monotonic() - t)
            t = time.monotonic()
            c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
            deletes.append(time.monotonic() - t)
        results.append(summary("create (cold boot to agent ready)", creates))
        results.append(summary("delete", deletes))
        sb = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})
        execs = []
        for _ in range(a.execs):
            t = time.monotonic()
            code, _, _, _ = c.exec(sb["id"], ["true"])
            execs.append(time.monotonic() - t)
            assert code == 0
        results.append(summary("exec `true` round trip (SSE to exit)", execs))
        pauses, resumes = [], []
        for _ in range(20):
            t = time.monotonic(); c.call("POST", f"/v1/sandboxes/{sb['id']}/pause"); pauses.append(time.monotonic() - t)
            t = time.monotonic(); c.call("POST", f"/v1/sandboxes/{sb['id']}/resume"); resumes.append(time.monotonic() - t)
        results.append(summary("pause", pauses))
        results.append(summary("resume from pause", resumes))
        sus, res = [], []
        for _ in range(5):
            t = time.monotonic(); c.call("POST", f"/v1/sandboxes/{sb['id']}/suspend"); sus.append(time.monotonic() - t)
            t = time.monotonic(); c.call("POST", f"/v1/sandboxes/{sb['id']}/resume"); res.append(time.monotonic() - t)
        results.append(summary("suspend (snapshot to disk, VM released)", sus))
        results.append(summary("resume from suspend (restore to agent ready)", res))
        c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
    finally:
        d.cleanup()
    for r in results:
        print(f"{r['name']:<48} n={r['n']:<4} p50 {r['p50_ms']:>8} ms  p90 {r['p90_ms']:>8} ms  p99 {r['p99_ms']:>8} ms",
              file=sys.stderr)
    json.dump(results, sys.stdout, indent=1)
    print()

if __name__ == "__main__":
    main()
