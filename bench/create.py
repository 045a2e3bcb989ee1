#!/usr/bin/env python3
"""Create latency per tier through the HTTP API (issue 13).

Starts its own airlockd (own data dir; kernel and templates shared) and
measures, at each concurrency, creates served by each tier:
  pool  a warm member is claimed (the bench waits until the pool holds
        enough ready members before each round, so every create can hit);
  spare a spare VMM (QEMU waiting with -incoming defer) gets the base
        restored into it (pool size 0; the bench waits for enough spares
        before each round);
  base  the shape's base snapshot is restored (pool size 0, no spares, base kept);
  boot  cold boot (a shape with no pool and no base).
Each create is followed by an exec (`true`) that proves the sandbox usable
and a delete. Reports p50/p90/p99 of the create call, of create + exec,
creates/s while serving, the tier that actually served each create, PSS
per pooled member and per spare VMM, and what happens when the pool runs dry (creates at
full speed without waiting for refills). Prints JSON; --markdown adds a
table for docs/performance.md.
With --volume the pool, spare, base and boot tiers run again with a read-write
volume on every create (one 64 MiB volume per concurrent create: one writer
each), which the claim or the restore puts into the VM's volume slot once
its guest runs (docs/volumes.md "Volume slots: every create tier").
Usage: bench/create.py [--airlockd build/src/airlockd/airlockd] [--n 40]
       [--conc 1,10] [--tiers pool,spare,base,boot] [--boot-n 6] [--pool-size 10]
       [--volume]"""
import argparse, concurrent.futures, json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from daemon_client import Daemon
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MEM = 256           # MiB: pooled shape (members hold this much guest RAM each)
BOOT_MEM = 384      # a shape with no pool and no base: always a cold boot

from benchlib import pct, summary     # noqa: E402

def pools(c):
    return c.call("GET", "/v1/pools")

def wait_ready(c, n, secs=1800):
    end = time.time() + secs
    while time.time() < end:
        p = pools(c)["pools"][0]
        if p["ready"] >= n and p["base"]["state"] == "ready":
            return p
        time.sleep(0.5)
    raise RuntimeError(f"pool did not reach {n} ready members: {pools(c)}")

def wait_spares(c, n, secs=600):
    end = time.time() + secs
    while time.time() < end:
        p = pools(c)["pools"][0]
        if p["spares"]["ready"] >= n and p["base"]["state"] == "ready":
            return p
        time.sleep(0.2)
    raise RuntimeError(f"pool did not reach {n} spares: {pools(c)}")

def one(c, mem, vol=None):
    """create, exec true, delete: (create s, create+exec s, tier)."""
    body = {"template": "base", "memory_mb": mem}
    if vol is not None:
        body["volumes"] = [{"name": vol, "path": "/data"}]
        # The last writer's delete (its guest freezes the volume first) frees it.
        end = time.time() + 30
        while True:
            try:
                vols = {v["name"]: v for v in c.call("GET", "/v1/volumes")["volumes"]}
                if vols[vol]["attached"] == 0 or time.time() > end:
                    break
            except Exception:
                break
            time.sleep(0.05)
    t0 = time.monotonic()
    sb = c.call("POST", "/v1/sandboxes", body)
    t1 = time.monotonic()
    code, _, _, _ = c.exec(sb["id"], ["true"])
    t2 = time.monotonic()
    if code != 0:
        raise RuntimeError(f"exec in {sb['id']} exited {code}")
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
    return t1 - t0, t2 - t0, sb.get("tier")

def rounds(c, n, conc, mem, before=None, vols=False):
    """n creates in rounds of conc at once; before() runs ahead of each round;
    vols: create i of a round attaches volume bench<i>."""
    creates, usable, tiers, busy = [], [], {}, 0.0
    with concurrent.futures.ThreadPoolExecutor(conc) as ex:
        done = 0
        while done < n:
            k = min(conc, n - done)
            if before:
                before(k)
            t = time.monotonic()
            for cr, us, tier in ex.map(lambda i: one(c, mem, f"bench{i}" if vols else None),
                                       range(k)):
                creates.append(cr)
                usable.append(us)
                tiers[tier] = tiers.get(tier, 0) + 1
            busy += time.monotonic() - t
            done += k
    return {"create": summary(creates), "create_exec": summary(usable), "tiers": tiers,
            "creates_per_s": round(len(creates) / busy, 2) if busy else 0.0}

def volumes(c, n):
    """Volumes bench0..bench<n-1> (64 MiB), one per concurrent create."""
    have = {v["name"] for v in c.call("GET", "/v1/volumes")["volumes"]}
    for i in range(n):
        if f"bench{i}" not in have:
            c.call("POST", "/v1/volumes", {"name": f"bench{i}", "size_mb": 64})

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlockd", default="build/src/airlockd/airlockd")
    ap.add_argument("--data", default=os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock"))
    ap.add_argument("--n", type=int, default=40, help="creates per tier and concurrency (pool, base)")
    ap.add_argument("--boot-n", type=int, default=6, help="cold boots per concurrency")
    ap.add_argument("--conc", default="1,10")
    ap.add_argument("--tiers", default="pool,spare,base,boot")
    ap.add_argument("--pool-size", type=int, default=10)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--volume", action="store_true",
                    help="each tier again, a volume each")
    a = ap.parse_args()
    concs = [int(x) for x in a.conc.split(",")]
    tiers = a.tiers.split(",")
    d = Daemon(os.path.abspath(a.airlockd), a.data)
    out = {"host": {"cpus": os.cpu_count(), "load_start": os.getloadavg()}, "results": []}
    try:
        c = d.start({"AIRLOCK_POOL": "base=0", "AIRLOCK_POOL_REFILLS": "1", "AIRLOCK_POOL_SPARES": "0"})
        c.call("PUT", "/v1/pools/base", {"size": a.pool_size if "pool" in tiers else 0,
                                         "spares": 0 if "pool" in tiers else 1, "memory_mb": MEM})
        t = time.monotonic()
        p = wait_ready(c, 1)
        out["base_build_ms"] = p["base"]["build_ms"]
        out["first_member_s"] = round(time.monotonic() - t, 1)
        if "pool" in tiers:
            for conc in concs:
                p0 = pools(c)["pools"][0]
                r = rounds(c, a.n, conc, MEM, before=lambda k: wait_ready(c, k))
                p1 = pools(c)["pools"][0]
                # The daemon's own split of the claims of this round set (cont, /init).
                h = max(1, p1["hits"] - p0["hits"])
                r["daemon_claim_ms"] = {k: round((p1[k + "_avg"] * p1["hits"] - p0[k + "_avg"] * p0["hits"]) / h, 2)
                                        for k in ("claim_ms", "claim_cont_ms", "claim_init_ms")}
                out["results"].append(dict(tier="pool", conc=conc, **r))
            for conc in concs if a.volume else []:
                volumes(c, conc)
                p0 = pools(c)["pools"][0]
                r = rounds(c, a.n, conc, MEM, before=lambda k: wait_ready(c, k), vols=True)
                p1 = pools(c)["pools"][0]
                h = max(1, p1["hits"] - p0["hits"])
                r["daemon_claim_ms"] = {k: round((p1[k + "_avg"] * p1["hits"] - p0[k + "_avg"] * p0["hits"]) / h, 2)
                                        for k in ("claim_ms", "claim_cont_ms", "claim_init_ms")}
                out["results"].append(dict(tier="pool + 1 volume", conc=conc, **r))
            p = wait_ready(c, a.pool_size)
            out["pool"] = {"members": p["ready"], "pss_bytes_per_member": p["pss_bytes"] // max(1, p["ready"]),
                           "fill_ms_avg": p["fill_ms_avg"], "claim_ms_avg": p["claim_ms_avg"]}
            # Run dry: 2 x the pool at concurrency 10 without waiting for refills.
            r = rounds(c, 2 * a.pool_size, 10, MEM)
            out["results"].append(dict(tier="pool, running dry (2x size, no waiting)", conc=10, **r))
        if "spare" in tiers:
            c.call("PUT", "/v1/pools/base", {"size": 0, "spares": max(concs), "memory_mb": MEM})
            p = wait_spares(c, max(concs))
            out["spare"] = {"spares": p["spares"]["ready"],
                            "pss_bytes_per_spare": p["spares"]["pss_bytes"] // max(1, p["spares"]["ready"]),
                            "spawn_ms_avg": p["spares"]["spawn_ms_avg"]}
            for conc in concs:
                s0 = pools(c)["pools"][0]["spares"]
                r = rounds(c, a.n, conc, MEM, before=lambda k: wait_spares(c, k))
                s1 = pools(c)["pools"][0]["spares"]
                h = max(1, s1["claimed"] - s0["claimed"])
                r["daemon_claim_ms"] = round((s1["claim_ms_avg"] * s1["claimed"] -
                                              s0["claim_ms_avg"] * s0["claimed"]) / h, 2)
                r["daemon_claim_steps_ms"] = s1["claim_steps_ms_avg"]
                out["results"].append(dict(tier="spare", conc=conc, **r))
            for conc in concs if a.volume else []:
                volumes(c, conc)
                r = rounds(c, a.n, conc, MEM, before=lambda k: wait_spares(c, k), vols=True)
                out["results"].append(dict(tier="spare + 1 volume", conc=conc, **r))
        if "base" in tiers:
            c.call("PUT", "/v1/pools/base", {"size": 0, "spares": 0, "memory_mb": MEM})
            time.sleep(2)
            for conc in concs:
                out["results"].append(dict(tier="base", conc=conc, **rounds(c, a.n, conc, MEM)))
            for conc in concs if a.volume else []:
                volumes(c, conc)
                out["results"].append(dict(tier="base + 1 volume", conc=conc,
                                           **rounds(c, a.n, conc, MEM, vols=True)))
        if "boot" in tiers:
            for conc in concs:
                out["results"].append(dict(tier="boot", conc=conc, **rounds(c, a.boot_n, conc, BOOT_MEM)))
            for conc in concs if a.volume else []:
                volumes(c, conc)
                out["results"].append(dict(tier="boot + 1 volume", conc=conc,
                                           **rounds(c, a.boot_n, conc, BOOT_MEM, vols=True)))
        out["pools_end"] = pools(c)
    finally:
        out["host"]["load_end"] = os.getloadavg()
        d.cleanup()
    print(json.dumps(out, indent=1))
    if a.markdown:
        print("\n| tier | c | n | create p50 | p90 | p99 | create+exec p50 | p90 | creates/s | served by |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in out["results"]:
            cr, us = r["create"], r["create_exec"]
            print(f"| {r['tier']} | {r['conc']} | {cr['n']} | {cr['p50_ms']} ms | {cr['p90_ms']} ms | "
                  f"{cr['p99_ms']} ms | {us['p50_ms']} ms | {us['p90_ms']} ms | {r['creates_per_s']} | "
                  f"{', '.join(f'{k}: {v}' for k, v in r['tiers'].items())} |")

if __name__ == "__main__":
    sys.exit(main())
