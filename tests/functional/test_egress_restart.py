#!/usr/bin/env python3
"""Egress across an airlockd restart, with a real microVM (TCG here) and the
real gateway against the test internet: airlockd SIGKILLed while the guest
loops over HTTPS; the gateway keeps serving it (same process), the restarted
airlockd adopts the sandbox and reconnects to that gateway, and every one of
the guest's requests succeeded. (From test_egress_vm.py.)
Usage: test_egress_restart.py AIRLOCKD (the data dir: $AIRLOCK_DATA_DIR)"""
import os, sys, signal, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from egress_harness import (P, check, curl, echo_json, gateway_env, run_sections,  # noqa: E402
                            session, sh)
import egress_harness   # noqa: E402
import testnet   # noqa: E402

ALLOWED, UNLISTED = egress_harness.ALLOWED, egress_harness.UNLISTED

def test_restart(d, c, logs):
    """The gateway keeps serving while airlockd is down (SIGKILL), and the
    restarted airlockd adopts the sandbox and reconciles with the same gateway."""
    sid = c.call("POST", "/v1/sandboxes", {"network": {"mode": "allowlist", "allow": [ALLOWED]}})["id"]
    script = (f"while true; do curl -s --max-time 5 -o /dev/null -w '%{{http_code}}\\n' "
              f"https://{ALLOWED}{P('bg')} >> /tmp/bg.log; sleep 0.3; done\n")
    st, _, _ = c.raw("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/bg.sh", script.encode())
    check("background request loop written into the guest", st in (200, 201, 204), st)
    sh(c, sid, "nohup sh /tmp/bg.sh >/dev/null 2>&1 &")
    time.sleep(2)
    gw_before = d.gateway_pids()
    m = logs.mark()
    d.kill(signal.SIGKILL)
    down_at = time.time()
    time.sleep(5)
    during = [r for r in logs.since(m, "allowed") if r.get("path") == P("bg") and
              r.get("event") == "request" and r.get("t", 0) > down_at]
    check("with airlockd SIGKILLed, the gateway keeps serving the guest's requests",
          len(during) >= 1, len(during))
    check("the gateway outlived airlockd (same process)", d.gateway_pids() == gw_before,
          (gw_before, d.gateway_pids()))
    c2 = d.start()
    sb = c2.call("GET", f"/v1/sandboxes/{sid}")
    check("after restart the networked sandbox was adopted (still running)", sb["state"] == "running", sb)
    check("the restarted airlockd reconnected to the same gateway (no second instance)",
          d.gateway_pids() == gw_before, (gw_before, d.gateway_pids()))
    code, out, err = sh(c2, sid, "cat /tmp/bg.log; pkill -f bg.sh; true")
    codes = out.split()
    check("the guest's requests kept succeeding across the restart (every one 200)",
          len(codes) >= 2 and set(codes) == {"200"}, out + err)
    code, out, err = curl(c2, sid, f"https://{ALLOWED}{P('after')}")
    check("exec + egress work after the restart", echo_json(out).get("role") == "allowed", out + err)
    c2.call("DELETE", f"/v1/sandboxes/{sid}")
    return c2

def run(binary, root):
    logs = testnet.Logs()
    return session(binary, root, gateway_env(),
                   lambda d, c: run_sections((('restart', lambda: test_restart(d, c, logs)),)))

if __name__ == "__main__":
    sys.exit(egress_harness.main(run))
