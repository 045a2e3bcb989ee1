#!/usr/bin/env python3
"""Ten creates and execs at once through the real airlockd: all succeed,
each exec answers its own sandbox, and /metrics counts them.
Usage: test_concurrency.py AIRLOCKD [DATA_ROOT]"""
import concurrent.futures, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, main

def test_concurrency(c, n=10):
    def one(i):
        sb = c.call("POST", "/v1/sandboxes", {"memory_mb": 256, "metadata": {"batch": "c"}})
        code, _, out, _ = c.exec(sb["id"], ["echo", str(i)])
        return sb["id"], code == 0 and out == f"{i}\n".encode()
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        results = list(ex.map(one, range(n)))
    check(f"{n} concurrent creates and execs", all(ok for _, ok in results), results)
    st, _, metrics = c.raw("GET", "/metrics", auth=False)
    text = metrics.decode()
    check("metrics count the creates", "airlock_sandbox_creates_total" in text and
          'airlock_sandboxes{state="running"} %d' % n in text, text[-400:])
    for sid, _ in results:
        c.call("DELETE", f"/v1/sandboxes/{sid}")

if __name__ == "__main__":
    sys.exit(main([("concurrency", lambda d, c: test_concurrency(c))],
                  env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))   # sweeps every second, as in test_daemon.py
