#!/usr/bin/env python3
"""Guest memory is never overcommitted (issue 16 item 3) through the real
daemon with real VMs: with max_memory_mb = 600, two 256 MiB sandboxes fit
and a third create, a fork and a resume that would pass the cap answer 503
naming max_memory_mb, leaving nothing behind; a deleted sandbox gives its
memory back, and so does a suspended one until it is resumed.

Usage: test_capacity.py AIRLOCKD [DATA_ROOT]"""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, main, refused

SHAPE = {"template": "base", "vcpus": 1, "memory_mb": 256}

def over_cap(e):
    return e is not None and e.status == 503 and isinstance(e.body, dict) and \
        "max_memory_mb" in e.body["error"]["message"]

def ids(c):
    return sorted(s["id"] for s in c.call("GET", "/v1/sandboxes")["sandboxes"])

def test_capacity(d, c):
    a = c.call("POST", "/v1/sandboxes", SHAPE)["id"]
    b = c.call("POST", "/v1/sandboxes", SHAPE)["id"]
    held = ids(c)
    e = refused(lambda: c.call("POST", "/v1/sandboxes", SHAPE))
    check("a create past max_memory_mb: 503 naming it", over_cap(e), e and e.body)
    check("... and nothing was made", ids(c) == held, ids(c))
    e = refused(lambda: c.call("POST", f"/v1/sandboxes/{a}/fork", {"count": 1}))
    check("a fork past it: 503 naming it", over_cap(e), e and e.body)
    check("... and nothing was made", ids(c) == held, ids(c))
    c.call("POST", f"/v1/sandboxes/{b}/suspend")
    x = c.call("POST", "/v1/sandboxes", SHAPE)["id"]
    check("a suspended sandbox's memory is free for a create", x is not None)
    e = refused(lambda: c.call("POST", f"/v1/sandboxes/{b}/resume"))
    check("a resume past it: 503 naming it", over_cap(e), e and e.body)
    st = c.call("GET", f"/v1/sandboxes/{b}")["state"]
    check("... and the sandbox stays suspended", st == "suspended", st)
    c.call("DELETE", f"/v1/sandboxes/{x}")
    c.call("POST", f"/v1/sandboxes/{b}/resume")
    st = c.call("GET", f"/v1/sandboxes/{b}")["state"]
    check("a deleted sandbox's memory is free for the resume", st == "running", st)
    code, _, out, _ = c.exec(b, ["echo", "back"])
    check("the resumed sandbox works", code == 0 and out == b"back\n", (code, out))
    for sid in (a, b):
        c.call("DELETE", f"/v1/sandboxes/{sid}")

if __name__ == "__main__":
    sys.exit(main([("capacity", test_capacity)],
                  env={"AIRLOCK_MAX_MEMORY_MB": "600", "AIRLOCK_POOL": "none",
                       "AIRLOCK_GATEWAY_RESOLVER": "127.0.0.1:1"}))
