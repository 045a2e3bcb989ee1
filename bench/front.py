#!/usr/bin/env python3
"""What the API front adds: request latency through the API port (the front,
then the worker over its unix socket) for a keyless GET /healthz, an
authenticated GET /v1/sandboxes, and an exec of `true` in a live sandbox,
on one kept-alive connection; percentiles as JSON. Run it against a build
with the front and one without (an older airlockd) to see the hop's cost.

Usage: bench/front.py [--airlockd build/src/airlockd/airlockd] [--n 2000] [--execs 50]"""
import argparse, json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from daemon_client import Daemon
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib
from benchlib import timed

def summary(name, xs):
    return benchlib.summary(xs, digits=3, name=name)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlockd", default="build/src/airlockd/airlockd")
    ap.add_argument("--data", default=os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock"))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--execs", type=int, default=50)
    a = ap.parse_args()
    d = Daemon(os.path.abspath(a.airlockd), a.data)
    out = {"airlockd": a.airlockd, "results": []}
    try:
        c = d.start()
        timed(100, lambda: c.raw("GET", "/healthz", auth=False))     # warm up
        out["results"].append(summary("GET /healthz (no key)",
                                      timed(a.n, lambda: c.raw("GET", "/healthz", auth=False))))
        out["results"].append(summary("GET /v1/sandboxes (key)",
                                      timed(a.n, lambda: c.raw("GET", "/v1/sandboxes"))))
        sb = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})
        c.exec(sb["id"], ["true"])
        out["results"].append(summary("exec true (SSE)",
                                      timed(a.execs, lambda: c.exec(sb["id"], ["true"]))))
        c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
    finally:
        d.cleanup()
    json.dump(out, sys.stdout, indent=1)
    print()

if __name__ == "__main__":
    main()
