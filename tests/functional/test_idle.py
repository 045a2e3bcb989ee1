#!/usr/bin/env python3
"""Idle suspend: a guest busy with a background job stays running past 3x
its idle timeout (GETs are no activity); once the job ends the sandbox is
suspended, with an idle_suspend event naming the guest's low CPU use, and
delete leaves nothing. The daemon sweeps every second.
Usage: test_idle.py AIRLOCKD [DATA_ROOT]"""
import os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, leftovers, main, wait_for

def test_idle(d, c, idle_s=6):
    """A guest busy with a background job is not idle; once the job ends the
    sandbox is suspended. The daemon sweeps every second (main)."""
    sb = c.call("POST", "/v1/sandboxes", {"template": "base", "idle_timeout_s": idle_s})
    sid = sb["id"]
    code, _, out, _ = c.exec(sid, ["sh", "-c",
                                   "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!"])
    pid = out.decode().strip()
    check("busy loop started in the background", code == 0 and pid.isdigit(), (code, out))
    # GET does not count as activity: only the guest's CPU keeps it running.
    end, states = time.time() + idle_s * 3, set()
    while time.time() < end:
        states.add(c.call("GET", f"/v1/sandboxes/{sid}")["state"])
        time.sleep(1)
    check(f"busy guest still running after 3x its idle timeout", states == {"running"}, states)
    sb = c.call("GET", f"/v1/sandboxes/{sid}")
    code, _, _, _ = c.exec(sid, ["kill", pid])
    check("busy loop stopped", code == 0, code)
    check("idle guest is suspended", wait_for(
        lambda: c.call("GET", f"/v1/sandboxes/{sid}")["state"] == "suspended", idle_s + 90),
        c.call("GET", f"/v1/sandboxes/{sid}")["state"])
    ev = None
    for name, data in c.sse("GET", f"/v1/sandboxes/{sid}/events"):
        if name == "idle_suspend":
            ev = data["data"]
            break
    check("idle_suspend event names the guest's low CPU use",
          ev is not None and ev["idle_s"] >= idle_s and ev.get("guest_cpu_pct", 100) < 2, ev)
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    check("idle test leaves nothing", wait_for(lambda: not leftovers(d, sid)), leftovers(d, sid))

if __name__ == "__main__":
    sys.exit(main([("idle", test_idle)], env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))
