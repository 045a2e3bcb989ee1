#!/usr/bin/env python3
"""Per-project quotas (issue 16 item 3) through the real daemon with real
VMs: a project limited to 2 live sandboxes and 4 vCPUs gets its 3rd create
(and a fork that would pass the limit) refused with 429 quota_exceeded
naming the limit, while another project is not; a deleted or suspended
sandbox gives its place back; the quota answer shows what the project
holds; bad quota input is a 400 naming the field, and quotas are for admin
keys only. (Creates racing for the last place across workers: tests/cluster.)

Usage: test_quota.py AIRLOCKD [DATA_ROOT]"""
import json, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import Client, check, main, refused

def test_quota(d, admin):
    q = admin.call("PUT", "/v1/projects/team/quota", {"max_sandboxes": 2, "max_vcpus": 4})
    check("PUT quota answers the quota and the usage", q["quota"]["max_sandboxes"] == 2 and
          q["quota"]["max_vcpus"] == 4 and q["quota"]["max_memory_mb"] == 0 and
          q["usage"] == {"sandboxes": 0, "vcpus": 0, "memory_mb": 0}, q)
    team = Client(d.port, admin.call("POST", "/v1/keys", {"name": "t", "project": "team",
                                                           "role": "user"})["key"])
    other = Client(d.port, admin.call("POST", "/v1/keys", {"name": "o", "project": "other",
                                                            "role": "user"})["key"])
    a = team.call("POST", "/v1/sandboxes", {"vcpus": 2, "memory_mb": 256})["id"]
    b = team.call("POST", "/v1/sandboxes", {"vcpus": 1, "memory_mb": 256})["id"]
    e = refused(lambda: team.call("POST", "/v1/sandboxes", {"vcpus": 1, "memory_mb": 256}))
    check("a 3rd live sandbox: 429 quota_exceeded naming the limit",
          e is not None and e.status == 429 and e.body["error"]["code"] == "quota_exceeded" and
          "2 live sandboxes" in e.body["error"]["message"], e and e.body)
    st = team.call("GET", "/v1/sandboxes")["sandboxes"]
    check("... and nothing was made", sorted(s["id"] for s in st) == sorted([a, b]), st)
    o = other.call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
    check("another project is not limited by it", bool(o))
    usage = admin.call("GET", "/v1/projects/team/quota")["usage"]
    check("GET quota: what the project holds", usage == {"sandboxes": 2, "vcpus": 3,
                                                         "memory_mb": 512}, usage)
    team.call("DELETE", f"/v1/sandboxes/{b}")
    e = refused(lambda: team.call("POST", "/v1/sandboxes", {"vcpus": 4, "memory_mb": 256}))
    check("vCPUs over the limit: 429 naming vCPUs", e is not None and e.status == 429 and
          "vCPUs" in e.body["error"]["message"], e and e.body)
    e = refused(lambda: team.call("POST", f"/v1/sandboxes/{a}/fork", {"count": 2}))
    check("a fork that would pass the limit: 429", e is not None and e.status == 429, e and e.body)
    team.call("POST", f"/v1/sandboxes/{a}/suspend", {})
    c = team.call("POST", "/v1/sandboxes", {"vcpus": 2, "memory_mb": 256})["id"]
    c2 = team.call("POST", "/v1/sandboxes", {"vcpus": 2, "memory_mb": 256})["id"]
    check("deleted and suspended sandboxes give their places back", bool(c) and bool(c2))
    admin.call("DELETE", "/v1/projects/team/quota")
    q = admin.call("GET", "/v1/projects/team/quota")
    check("after DELETE: no quota", q["quota"] is None, q)
    d3 = team.call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
    check("... and no limit", bool(d3))
    for bad, field in (({"max_sandboxes": -1}, "max_sandboxes"), ({"max_vcpus": "4"}, "max_vcpus"),
                       ({"limit": 3}, "limit"), ({"max_memory_mb": None}, "max_memory_mb")):
        e = refused(lambda: admin.call("PUT", "/v1/projects/team/quota", bad))
        check(f"bad quota {json.dumps(bad)}: 400 naming {field}", e is not None and
              e.status == 400 and e.body["error"].get("field") == field, e and e.body)
    e = refused(lambda: admin.call("PUT", "/v1/projects/Bad%20Name/quota", {"max_sandboxes": 1}))
    check("a bad project name: 400 naming project", e is not None and e.status == 400 and
          e.body["error"].get("field") == "project", e and e.body)
    e = refused(lambda: team.call("PUT", "/v1/projects/team/quota", {"max_sandboxes": 99}))
    check("a user key cannot set quotas (403)", e is not None and e.status == 403, e and e.body)
    for sid, cl in ((a, team), (c, team), (c2, team), (d3, team), (o, other)):
        cl.call("DELETE", f"/v1/sandboxes/{sid}")

if __name__ == "__main__":
    sys.exit(main([("quota", test_quota)]))
