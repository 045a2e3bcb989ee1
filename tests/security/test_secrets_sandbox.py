#!/usr/bin/env python3
"""Sandbox-scoped secrets and audit scoping with a real sandbox (boots a
VM): the project lists and deletes its sandbox's secret, another project
cannot list, put, delete it or query that sandbox's audit records.
Usage: test_secrets_sandbox.py AIRLOCKD [DATA_ROOT]"""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, main, raw_json, user_key
from audit_files import AUD_A, AUD_UNTIL, audit_append, audit_ns, audit_rec

SECRET = "s3cr3t-VALUE-" + os.urandom(6).hex()

def test_secrets_sandbox(d, c):
    """Sandbox scope and audit scoping need a real sandbox in the store (boots a VM)."""
    sid = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
    other = user_key(c, "sbx-other")
    user = user_key(c, "default")
    try:
        put = {"value": SECRET + "-sb", "hosts": ["api.example.com"], "scope": "sandbox",
               "sandbox": sid}
        st, data, j = raw_json(c, "PUT", "/v1/secrets/SB_TOKEN", put)
        check("sandbox-scoped secret put -> 201", st == 201 and j["scope"] == "sandbox" and
              j["scope_id"] == sid and SECRET.encode() not in data, (st, j))
        st, _, j = raw_json(user, "GET", f"/v1/secrets?sandbox={sid}")
        check("list ?sandbox= shows it to the project", st == 200 and
              [s["name"] for s in j["secrets"]] == ["SB_TOKEN"], (st, j))
        st, _, j = raw_json(c, "GET", "/v1/secrets?scope=sandbox")
        check("list ?scope=sandbox shows the project's sandbox secrets", st == 200 and
              [(s["name"], s["scope_id"]) for s in j["secrets"]] == [("SB_TOKEN", sid)], (st, j))
        st, _, j = raw_json(other, "GET", "/v1/secrets")
        check("another project does not list it", st == 200 and
              "SB_TOKEN" not in [s["name"] for s in j["secrets"]], (st, j))
        st, _, j = raw_json(other, "PUT", "/v1/secrets/SB_TOKEN", put)
        check("another project cannot put on our sandbox (404)", st == 404, (st, j))
        st, _, j = raw_json(other, "DELETE", f"/v1/secrets/SB_TOKEN?sandbox={sid}")
        check("another project cannot delete it (404)", st == 404, (st, j))
        audit_append(d, "audit.log", [audit_rec(8, sid, "dns", "deny", qname="q.example.com"),
                                      audit_rec(9, AUD_A, "dns", "deny", qname="q.example.com")])
        got = audit_ns(user, "?until=" + AUD_UNTIL)
        check("audit: a user key sees its project's sandbox records only", got == [8], got)
        got = audit_ns(user, f"?sandbox={sid}")
        check("audit: ?sandbox= of its own sandbox", got == [8], got)
        got = audit_ns(other, f"?sandbox={sid}", expect=404)
        check("audit: another project cannot query our sandbox", got == 404, got)
        st, _, j = raw_json(c, "DELETE", f"/v1/secrets/SB_TOKEN?sandbox={sid}")
        check("sandbox-scoped secret delete -> 204", st == 204, (st, j))
    finally:
        c.call("DELETE", f"/v1/sandboxes/{sid}")

if __name__ == "__main__":
    sys.exit(main([("secrets sandbox", test_secrets_sandbox)],
                  env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))   # sweeps every second, as in test_daemon.py
