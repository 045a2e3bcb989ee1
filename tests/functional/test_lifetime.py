#!/usr/bin/env python3
"""timeout_s is running time (src/sandbox/sbm_lifetime.c): a paused sandbox
does not expire, its clock stays stopped across a SIGKILLed daemon (the
store's paused_at, migration 6, and the adopted paused VM), and when it runs
again it has what it had left. The sweep runs every second, so a sandbox
resumed past its old end would be deleted at once by the old accounting.
Usage: test_lifetime.py AIRLOCKD [DATA_ROOT]"""
import datetime, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, check, main

TIMEOUT_S = 30

def ms(ts):
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000

def test_paused_not_counted(d, c):
    sb = c.call("POST", "/v1/sandboxes", {"template": "base", "memory_mb": 256,
                                          "timeout_s": TIMEOUT_S})
    sid, end0 = sb["id"], ms(sb["expires_at"])
    sb = c.call("POST", f"/v1/sandboxes/{sid}/pause")
    check("pause", sb["state"] == "paused", sb)
    paused_at = time.time()
    d.kill()            # SIGKILL: the paused VM is adopted by the next daemon
    c = d.start()
    # Stopped longer than its whole lifetime: the old accounting deleted it meanwhile.
    time.sleep(max(0.0, paused_at + TIMEOUT_S + 5 - time.time()))
    stopped_s = time.time() - paused_at
    try:
        sb = c.call("GET", f"/v1/sandboxes/{sid}")
    except ApiError as e:
        check("a paused sandbox does not expire (across a restart)", False, e)
        return
    check("a paused sandbox does not expire (across a restart)", sb["state"] == "paused", sb)
    sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
    check("resume", sb["state"] == "running", sb)
    end1 = ms(sb["expires_at"])
    check("its end moved by the time it was stopped (the restart included)",
          end1 - end0 >= stopped_s * 1000, (end0, end1, stopped_s))
    # Three sweeps (one a second) later it still runs: it has what it had left.
    time.sleep(3)
    sb = c.call("GET", f"/v1/sandboxes/{sid}")
    check("still running after the resume", sb["state"] == "running", sb)
    c.call("DELETE", f"/v1/sandboxes/{sid}")

if __name__ == "__main__":
    sys.exit(main([("paused_not_counted", test_paused_not_counted)],
                  env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))
