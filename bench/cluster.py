#!/usr/bin/env python3
"""What the cluster's API tier costs and carries: the test harness's
cluster (a private PostgreSQL, two workers, two API replicas behind
HAProxy, real microVMs; tests/lib/cluster_harness.py), then

  - GET /v1/sandboxes (fan-out to both workers, merged) through the LB,
    against the same list asked of one worker directly over mutual TLS;
  - GET /v1/sandboxes/{id} (routed by the sandbox's row) through the LB,
    against the worker directly;
  - creates through the LB (placement: body buffered, best of two) at
    concurrency 1 and --c, each followed by an exec of `true` and a
    delete, against creates sent to a worker directly;
  - the spread of the LB's creates over the workers.

Each worker runs a warm pool of --pool members of `base`, refilled
between rows, so a create is a pool claim unless the pool runs dry (the
answer's "tier" is counted per row). Percentiles as JSON.

Usage: bench/cluster.py [--airlockd build/src/airlockd/airlockd] [--n 500]
                        [--creates 24] [--c 4] [--pool 4]"""
import argparse, concurrent.futures, json, os, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from cluster_harness import Cluster
sys.path.insert(0, HERE)
import benchlib
from benchlib import timed

def create_use_delete(c, owner_of):
    """Seconds to the create's answer and to a finished exec after it; its worker, its tier."""
    t = time.monotonic()
    sb = c.call("POST", "/v1/sandboxes", {})
    made = time.monotonic() - t
    sid = sb["id"]
    c.exec(sid, ["true"])
    used = time.monotonic() - t
    worker = owner_of(sid)	# after the timings: psql is not the API's cost
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    return made, used, (worker, sb.get("tier", "?"))

def creates(name, c, n, conc, owner_of):
    with concurrent.futures.ThreadPoolExecutor(conc) as ex:
        t0 = time.monotonic()
        got = list(ex.map(lambda _: create_use_delete(c, owner_of), range(n)))
        wall = time.monotonic() - t0
    row = benchlib.summary([g[0] for g in got], name=f"{name}: create, c={conc}")
    used = benchlib.summary([g[1] for g in got])
    row["create_exec_p50_ms"], row["create_exec_p90_ms"] = used["p50_ms"], used["p90_ms"]
    row["creates_per_s"] = round(n / wall, 2)
    for i, key in ((0, "workers"), (1, "tier")):
        count = {}
        for _, _, tags in got:
            count[tags[i]] = count.get(tags[i], 0) + 1
        row[key] = count
    return row

def wait_pools(lb, size, secs=600):
    """Until every live worker has size pool members ready (refills run between rows)."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        ws = lb.call("GET", "/v1/workers")["workers"]
        if all(w["used"]["pool_ready"] >= size for w in ws if w["live"]):
            return True
        time.sleep(1)
    return False

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlockd", default="build/src/airlockd/airlockd")
    ap.add_argument("--data", default=os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock"))
    ap.add_argument("--n", type=int, default=500, help="reads per row")
    ap.add_argument("--creates", type=int, default=24, help="creates per row")
    ap.add_argument("--c", type=int, default=4, help="the higher concurrency")
    ap.add_argument("--pool", type=int, default=4, help="warm pool members per worker")
    a = ap.parse_args()
    cl = Cluster(os.path.abspath(a.airlockd), a.data, env={"AIRLOCK_POOL": f"base={a.pool}"})
    out = {"airlockd": a.airlockd, "load_before": os.getloadavg(), "results": []}
    try:
        cl.start()
        lb, w1 = cl.client(), cl.worker_client("w1")
        keep = [lb.call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"] for _ in range(4)]
        sid = keep[0]
        timed(50, lambda: lb.raw("GET", "/v1/sandboxes"))	# warm up
        res = out["results"]
        res.append(benchlib.summary(timed(a.n, lambda: lb.raw("GET", "/v1/sandboxes")),
                                    name="GET /v1/sandboxes via LB + replica (fan-out, 2 workers)"))
        res.append(benchlib.summary(timed(a.n, lambda: w1.raw("GET", "/v1/sandboxes")),
                                    name="GET /v1/sandboxes on w1 directly (mTLS)"))
        res.append(benchlib.summary(timed(a.n, lambda: lb.raw("GET", f"/v1/sandboxes/{sid}")),
                                    name="GET /v1/sandboxes/{id} via LB + replica"))
        home = cl.worker_client(dict(cl.pg.sql("SELECT id, worker FROM sandboxes"))[sid])
        res.append(benchlib.summary(timed(a.n, lambda: home.raw("GET", f"/v1/sandboxes/{sid}")),
                                    name="GET /v1/sandboxes/{id} on its worker directly"))
        def owner_of(sid):
            rows = cl.pg.sql(f"SELECT worker FROM sandboxes WHERE id = '{sid}'")
            return rows[0][0] if rows else "?"
        for conc in (1, a.c):
            for name, c in (("via LB + replica", lb), ("on w1 directly", w1)):
                wait_pools(lb, a.pool)
                res.append(creates(name, c, a.creates, conc, owner_of))
        for s in keep:
            lb.call("DELETE", f"/v1/sandboxes/{s}")
    finally:
        out["load_after"] = os.getloadavg()
        cl.stop()
    json.dump(out, sys.stdout, indent=1)
    print()

if __name__ == "__main__":
    main()
