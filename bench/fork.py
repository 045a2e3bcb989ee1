#!/usr/bin/env python3
"""Fork latency through the HTTP API (issue 13 item 5).

Starts its own airlockd (own data dir; kernel and templates shared), boots
a source sandbox of --memory MiB, dirties --dirty MiB of its RAM (tmpfs,
so the capture has real pages to carry), then --rounds times forks it into
--count children and measures:
  paused_ms   the source stopped (from the daemon: stop .. cont answered)
  fork_ms     the fork call (the reply comes when every child runs)
  usable_ms   the fork call until an exec (`true`) has answered in every
              child (execs run in parallel right after the reply)
  source_ms   an exec in the source right after the fork call returns
Children are deleted after each round. Prints JSON; --markdown adds a table.
Usage: bench/fork.py [--airlockd build/src/airlockd/airlockd] [--memory 512]
       [--count 4] [--rounds 5] [--dirty 256]"""
import argparse, concurrent.futures, json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from daemon_client import Daemon
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib

def summary(xs):
    """fork.py's series are in ms already."""
    return benchlib.summary(xs, scale=1.0)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlockd", default="build/src/airlockd/airlockd")
    ap.add_argument("--data-root", default=os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock"))
    ap.add_argument("--memory", type=int, default=512)
    ap.add_argument("--count", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dirty", type=int, default=128, help="MiB of the source's RAM written before forking")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    d = Daemon(a.airlockd, a.data_root)
    res = {"memory_mb": a.memory, "count": a.count, "dirty_mb": a.dirty, "load": os.getloadavg()}
    try:
        c = d.start({"AIRLOCK_SWEEP_INTERVAL_S": "5"})
        src = c.call("POST", "/v1/sandboxes", {"template": "base", "memory_mb": a.memory})
        sid = src["id"]
        code, _, _, err = c.exec(sid, ["sh", "-c", f"head -c {a.dirty << 20} /dev/urandom > /dev/shm/dirty"])
        if code != 0:
            raise RuntimeError(f"dirtying the source failed: {err!r}")
        paused, fork_ms, usable, source = [], [], [], []
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=a.count + 1)
        for _ in range(a.rounds):
            t0 = time.monotonic()
            r = c.call("POST", f"/v1/sandboxes/{sid}/fork", {"count": a.count}, expect=(201,))
            t1 = time.monotonic()
            kids = [k["id"] for k in r["sandboxes"]]
            if len(kids) != a.count:
                raise RuntimeError(f"fork gave {len(kids)} children: {r['errors']}")
            futs = [pool.submit(c.exec, k, ["true"]) for k in kids]
            s0 = time.monotonic()
            c.exec(sid, ["true"])
            source.append((time.monotonic() - s0) * 1000)
            for f in futs:
                if f.result()[0] != 0:
                    raise RuntimeError("exec in a child failed")
            t2 = time.monotonic()
            paused.append(r["paused_ms"])
            fork_ms.append((t1 - t0) * 1000)
            usable.append((t2 - t0) * 1000)
            for k in kids:
                c.call("DELETE", f"/v1/sandboxes/{k}")
        res.update(paused=summary(paused), fork=summary(fork_ms), usable=summary(usable),
                   source_exec_after=summary(source), load_after=os.getloadavg())
        c.call("DELETE", f"/v1/sandboxes/{sid}")
    finally:
        d.kill()
        d.cleanup()
    print(json.dumps(res, indent=2))
    if a.markdown:
        print(f"\n| fork of {a.memory} MiB ({a.dirty} MiB dirty) into {a.count} | p50 | p90 | max |")
        print("|---|---|---|---|")
        for k, label in (("paused", "source paused"), ("fork", "fork call (every child running)"),
                         ("usable", "until an exec answered in every child"),
                         ("source_exec_after", "an exec in the source right after")):
            s = res[k]
            print(f"| {label} | {s['p50_ms']} ms | {s['p90_ms']} ms | {s['max_ms']} ms |")
    return 0

if __name__ == "__main__":
    sys.exit(main())
