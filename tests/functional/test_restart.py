#!/usr/bin/env python3
"""airlockd SIGKILLed mid-create and mid-suspend, then started again: every
sandbox is usable or cleanly failed with no QEMU left, an interrupted suspend
ends suspended (resumes with its files) or failed, nothing left after delete.
Usage: test_restart.py AIRLOCKD [DATA_ROOT]"""
import concurrent.futures, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, leftovers, main, qemu_pids, wait_for

def test_restart(d, c):
    # SIGKILL while a create is in flight.
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(lambda: c.call("POST", "/v1/sandboxes", {"memory_mb": 256}, expect=(201, 500, 502, 504)))
        time.sleep(0.8)
        d.kill()
        try:
            fut.result(timeout=60)
        except Exception:
            pass
    c = d.start()
    sbs = c.call("GET", "/v1/sandboxes")["sandboxes"]
    check("after SIGKILL mid-create: every sandbox usable or cleanly failed",
          all(s["state"] in ("running", "failed", "suspended") for s in sbs), sbs)
    for s in sbs:
        check(f"no QEMU left for failed {s['id']}", s["state"] != "failed" or not qemu_pids(s["id"]))
        c.call("DELETE", f"/v1/sandboxes/{s['id']}")
    # SIGKILL during a suspend.
    sb = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})
    sid = sb["id"]
    c.exec(sid, ["sh", "-c", "echo kept > /home/user/kept"])
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        ex.submit(lambda: c.call("POST", f"/v1/sandboxes/{sid}/suspend", expect=(200, 500)))
        time.sleep(0.3)
        d.kill()
    c = d.start()
    sb = c.call("GET", f"/v1/sandboxes/{sid}")
    check("after SIGKILL mid-suspend: suspended or failed", sb["state"] in ("suspended", "failed"), sb)
    check("no QEMU left after restart", not qemu_pids(sid), qemu_pids(sid))
    if sb["state"] == "suspended":
        sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
        _, _, out, _ = c.exec(sid, ["cat", "/home/user/kept"])
        check("resumed after restart with its files", out == b"kept\n", out)
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    check("restart test leaves nothing", wait_for(lambda: not leftovers(d, sid)), leftovers(d, sid))
    return c

if __name__ == "__main__":
    sys.exit(main([("restart", test_restart)],
                  env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))   # sweeps every second, as in test_daemon.py
