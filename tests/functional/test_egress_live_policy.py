#!/usr/bin/env python3
"""A networked sandbox's policy changed while it runs, through the real
airlockd, gateway and a real microVM (TCG here), against the test internet:
PATCH network makes a refused host reachable at once; PATCH to mode none is
refused (409) for a sandbox with a NIC. (From test_egress_vm.py.)
Usage: test_egress_live_policy.py AIRLOCKD (the data dir: $AIRLOCK_DATA_DIR)"""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError   # noqa: E402
from egress_harness import check, curl, echo_json, gateway_env, run_sections, session  # noqa: E402
import egress_harness   # noqa: E402
import testnet   # noqa: E402

ALLOWED, UNLISTED = egress_harness.ALLOWED, egress_harness.UNLISTED

def test_live_policy(d, c, logs):
    sid = c.call("POST", "/v1/sandboxes", {"network": {"mode": "allowlist", "allow": [ALLOWED]}})["id"]
    code, out, err = curl(c, sid, f"https://{UNLISTED}/")
    check("before the update the unlisted host is refused", code != 0, out)
    c.call("PATCH", f"/v1/sandboxes/{sid}", {"network": {"mode": "allowlist", "allow": [ALLOWED, UNLISTED]}})
    code, out, err = curl(c, sid, f"https://{UNLISTED}/now")
    check("PATCH network: the new rule applies live",
          code == 0 and echo_json(out).get("role") == "unlisted", out + err)
    try:
        c.call("PATCH", f"/v1/sandboxes/{sid}", {"network": {"mode": "none"}})
        check("PATCH network none on a sandbox with a NIC is refused", False)
    except ApiError as e:
        check("PATCH network none on a sandbox with a NIC is refused", e.status == 409, e.body)
    c.call("DELETE", f"/v1/sandboxes/{sid}")

def run(binary, root):
    logs = testnet.Logs()
    return session(binary, root, gateway_env(),
                   lambda d, c: run_sections((('live policy', lambda: test_live_policy(d, c, logs)),)))

if __name__ == "__main__":
    sys.exit(egress_harness.main(run))
