#!/usr/bin/env python3
"""Create latency through the E2B front against airlock's own API (issue #14:
"as fast as through airlock's own"). Its own airlockd (release build), creates
alternating between POST /v1/sandboxes and POST /v2/sandboxes (E2B 2.51's
create), each without network, each deleted before the next; prints JSON.
Usage: bench/e2b_bench.py [--airlockd build/src/airlockd/airlockd] [--creates 5]"""
import argparse, http.client, json, os, statistics, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from daemon_client import Daemon

def call(port, method, path, body, headers):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    h = dict(headers)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    t = time.monotonic()
    conn.request(method, path, body=data, headers=h)
    r = conn.getresponse()
    out = r.read()
    dt = time.monotonic() - t
    conn.close()
    if r.status >= 300:
        raise RuntimeError(f"{method} {path}: {r.status} {out[:300]!r}")
    return dt, json.loads(out) if out else None

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlockd", default="build/src/airlockd/airlockd")
    ap.add_argument("--data", default=os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock"))
    ap.add_argument("--creates", type=int, default=5)
    a = ap.parse_args()
    d = Daemon(os.path.abspath(a.airlockd), a.data)
    times = {"v1": [], "e2b": []}
    try:
        c = d.start()
        admin = {"Authorization": "Bearer " + c.key}
        _, k = call(c.port, "POST", "/v1/keys", {"name": "bench", "format": "e2b"}, admin)
        e2b = {"X-API-KEY": k["key"]}
        for _ in range(a.creates):
            dt, sb = call(c.port, "POST", "/v1/sandboxes", {"template": "base"}, admin)
            times["v1"].append(dt)
            call(c.port, "DELETE", "/v1/sandboxes/" + sb["id"], None, admin)
            dt, sb = call(c.port, "POST", "/v2/sandboxes",
                          {"templateID": "base", "allow_internet_access": False}, e2b)
            times["e2b"].append(dt)
            call(c.port, "DELETE", "/sandboxes/" + sb["sandboxID"], None, e2b)
    finally:
        d.cleanup()
    out = [{"name": f"create via {n}", "n": len(x), "p50_ms": round(statistics.median(x) * 1000, 1),
            "min_ms": round(min(x) * 1000, 1), "max_ms": round(max(x) * 1000, 1)}
           for n, x in times.items()]
    json.dump(out, sys.stdout, indent=1)
    print()

if __name__ == "__main__":
    main()
