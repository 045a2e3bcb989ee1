#!/usr/bin/env python3
"""Warm pools and base snapshots end to end: the real daemon, real VMs.

Claims give distinct VMs; a pooled sandbox does what a cold one does
(exec, files, env, metadata, suspend/resume, delete with no leftovers);
pool members are hidden; a member that fails its claim (its QEMU stopped
with SIGSTOP: cont and /init get no answer) is destroyed and the next tier
serves the create; kill -9 with a full pool, restart: paused members are
adopted (same QEMU pids), one whose VM died meanwhile is destroyed, nothing
leaks; a base restore that dies after its QEMU started falls back to a cold
boot (tier "boot", a tier_fallback event, the tier_fallbacks metric);
a base made stale (manifest names another agent) is never used;
a NIC pool's claim attaches the owner's egress policy to the member's island.
Usage: test_pool.py AIRLOCKD [DATA_ROOT]"""
import os, signal, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, check, leftovers, main, qemu_pids, wait_for
from pool_helpers import check_nic_claim, create, make_stale, pool, wait_ready

# No spare VMMs: these cases test the pool and base tiers (test_spare.py the spare tier).
POOL_ENV = {"AIRLOCK_POOL": "base=2", "AIRLOCK_POOL_REFILLS": "1", "AIRLOCK_POOL_SPARES": "0",
            "AIRLOCK_SWEEP_INTERVAL_S": "1"}
def test_claims(d, c):
    p = wait_ready(c, 2)
    check("the pool fills to its size from its base", p["ready"] == 2 and p["base"]["state"] == "ready", p)
    members = {m["id"]: m["pid"] for m in p["members"]}
    listed = [s["id"] for s in c.call("GET", "/v1/sandboxes")["sandboxes"]]
    check("members are not listed", not set(members) & set(listed), (members, listed))
    for mid in members:
        try:
            c.call("GET", f"/v1/sandboxes/{mid}", expect=())
            check("a member is not found by id", False, mid)
        except ApiError as e:
            check("a member is not found by id (404)", e.status == 404, e)
    a = create(c, env={"WHO": "a"}, metadata={"k": "a"})
    b = create(c, env={"WHO": "b"}, metadata={"k": "b"})
    check("both creates served by the pool", a.get("tier") == "pool" and b.get("tier") == "pool",
          (a.get("tier"), b.get("tier")))
    check("claims are the members (pre-generated ids)", {a["id"], b["id"]} == set(members),
          (a["id"], b["id"], members))
    pa, pb = qemu_pids(a["id"]), qemu_pids(b["id"])
    check("claims give distinct VMs (different QEMU pids)", pa and pb and pa != pb, (pa, pb))
    check("a claim keeps its member's VM (no new QEMU)", pa == [str(members[a["id"]])], (pa, members))
    code, _, out, _ = c.exec(a["id"], ["sh", "-c", "echo $WHO; id -un"])
    check("a pooled sandbox has its owner's env", code == 0 and out == b"a\nuser\n", (code, out))
    code, _, out, _ = c.exec(b["id"], ["sh", "-c", "echo $WHO"])
    check("the other has its own", out == b"b\n", out)
    return a, b

def test_same_as_cold(d, c, sb):
    sid = sb["id"]
    check("metadata as given", sb["metadata"] == {"k": "a"}, sb["metadata"])
    c.call("PATCH", f"/v1/sandboxes/{sid}", {"metadata": {"k": "z"}})
    check("metadata patch", c.call("GET", f"/v1/sandboxes/{sid}")["metadata"] == {"k": "z"})
    payload = os.urandom(100000)
    st, _, _ = c.raw("PUT", f"/v1/sandboxes/{sid}/files?path=/home/user/p.bin", payload,
                     {"Content-Type": "application/octet-stream"})
    st2, _, got = c.raw("GET", f"/v1/sandboxes/{sid}/files?path=/home/user/p.bin")
    check("files in and out", st == 201 and st2 == 200 and got == payload, (st, st2, len(got)))
    s = c.call("POST", f"/v1/sandboxes/{sid}/suspend")
    check("suspend a pooled sandbox", s["state"] == "suspended", s)
    s = c.call("POST", f"/v1/sandboxes/{sid}/resume")
    check("resume it", s["state"] == "running", s)
    st, _, got = c.raw("GET", f"/v1/sandboxes/{sid}/files?path=/home/user/p.bin")
    check("its file survived", st == 200 and got == payload, (st, len(got)))
    code, _, out, _ = c.exec(sid, ["sh", "-c", "echo $WHO"])
    check("its env survived", out == b"a\n", out)
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    check("delete leaves nothing behind", wait_for(lambda: not leftovers(d, sid)), leftovers(d, sid))

def test_claim_failure(d, c):
    p = wait_ready(c, 2)
    check("refilled after the claims", p["ready"] == 2, p)
    victim = p["members"][0]
    # The oldest member is claimed first: stop its QEMU so cont and /init get no answer.
    os.kill(victim["pid"], signal.SIGSTOP)
    try:
        sb = create(c, env={"WHO": "c"})
    finally:
        try:
            os.kill(victim["pid"], signal.SIGCONT)
        except OSError:
            pass
    check("the create is served by the next member", sb["state"] == "running" and sb["id"] != victim["id"]
          and sb.get("tier") == "pool", sb)
    code, _, out, _ = c.exec(sb["id"], ["sh", "-c", "echo $WHO"])
    check("it works", out == b"c\n", out)
    p = pool(c)
    check("the failed claim is counted", p["claim_failures"] == 1, p)
    check("the member that failed its claim is destroyed",
          wait_for(lambda: not leftovers(d, victim["id"])), leftovers(d, victim["id"]))
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")

def test_kill9(d, c):
    p = wait_ready(c, 2)
    check("full again before kill -9", p["ready"] == 2, p)
    members = {m["id"]: m["pid"] for m in p["members"]}
    keep, lose = sorted(members)
    d.kill(signal.SIGKILL)
    # While airlockd is down one member's VM dies: that one cannot be verified.
    os.kill(members[lose], signal.SIGKILL)
    time.sleep(1)
    c = d.start(POOL_ENV)
    p = pool(c)
    ids = {m["id"]: m["pid"] for m in p["members"]}
    check("the live paused member is adopted with its QEMU", ids.get(keep) == members[keep], (ids, members))
    check("the member whose VM died is not adopted", lose not in ids, ids)
    check("... and leaves nothing behind", wait_for(lambda: not leftovers(d, lose)), leftovers(d, lose))
    sb = create(c)
    check("the adopted member serves a create", sb["id"] == keep and sb.get("tier") == "pool", sb)
    code, _, out, _ = c.exec(sb["id"], ["echo", "adopted"])
    check("and it works", out == b"adopted\n", out)
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
    check("deleted: nothing left", wait_for(lambda: not leftovers(d, keep)), leftovers(d, keep))
    return c

def test_base_restore_dies(d, c):
    """The base tier's QEMU is killed after it started (before its agent answers):
    the create is not failed, it boots cold (on main it failed with a 500)."""
    p = wait_ready(c, 1)
    c.call("PUT", "/v1/pools/base", {"size": 0})
    check("size 0 drains the pool (the base stays)", wait_for(lambda: pool(c)["ready"] == 0)
          and pool(c)["base"]["state"] == "ready", pool(c))
    before = set(d.jail_pids())
    t0 = c.call("GET", "/v1/pools")
    out = {}
    th = threading.Thread(target=lambda: out.update(sb=create(c, env={"WHO": "f"})), daemon=True)
    th.start()
    victim, end = None, time.time() + 600
    while victim is None and time.time() < end and th.is_alive():
        new = set(d.jail_pids()) - before
        if new:
            victim = min(new)
            # Stopped first, so its guest cannot finish /init while we look; then killed.
            os.kill(victim, signal.SIGSTOP)
            os.kill(victim, signal.SIGKILL)
        time.sleep(0.01)
    th.join(900)
    sb = out.get("sb")
    check("the restoring QEMU was found and killed", victim is not None, before)
    check("the create still succeeds, by cold boot", sb is not None and sb["state"] == "running"
          and sb.get("tier") == "boot", sb)
    if sb is None:
        return
    code, _, o, _ = c.exec(sb["id"], ["sh", "-c", "echo $WHO"])
    check("and it works", o == b"f\n", o)
    t1 = c.call("GET", "/v1/pools")
    check("the fallback is counted", t1["tier_fallbacks"] == t0["tier_fallbacks"] + 1 and
          t1["creates"]["boot"] == t0["creates"]["boot"] + 1 and
          t1["creates"]["base"] == t0["creates"]["base"], (t0, t1))
    ev = None
    for name, data in c.sse("GET", f"/v1/sandboxes/{sb['id']}/events"):
        # History first (the stream then follows): the event after "created" decides.
        if name == "created":
            continue
        ev = data["data"] if name == "tier_fallback" else None
        break
    check("a tier_fallback event from base to boot", ev is not None and ev.get("from") == "base"
          and ev.get("to") == "boot" and ev.get("reason"), ev)
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
    check("deleted: nothing left", wait_for(lambda: not leftovers(d, sb["id"])), leftovers(d, sb["id"]))
    c.call("PUT", "/v1/pools/base", {"size": 2})

def test_stale_base(d, c):
    p = wait_ready(c, 1)
    key = p["key"]
    members = [m["id"] for m in p["members"]]
    c.call("PUT", "/v1/pools/base", {"size": 0})
    check("size 0 drains the pool", wait_for(lambda: pool(c)["ready"] == 0) and
          all(not leftovers(d, m) for m in members), pool(c))
    d.kill(signal.SIGTERM)
    man = os.path.join(d.dir, "bases", key, "manifest.json")
    make_stale(man)
    # Pool size 0 in the config: nothing rebuilds it, so a create has only the base to use.
    c = d.start(dict(POOL_ENV, AIRLOCK_POOL="base=0"))
    p = pool(c)
    check("the stale base is rejected at start", p["base"]["rejected"] == 1 and p["base"]["state"] == "none", p)
    check("... and removed", not os.path.exists(man), man)
    sb = create(c)
    check("a create does not use it (cold boot)", sb.get("tier") == "boot", sb.get("tier"))
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
    return c

def test_nic(d, c):
    """A pool of members with a NIC: a claim attaches its owner's policy to the member's island."""
    c.call("PUT", "/v1/pools/base", {"size": 1, "nic": True})
    p = wait_ready(c, 1)
    check("a NIC pool fills from its own base", p["ready"] == 1 and p["nic"] and p["key"].endswith("-nic"), p)
    mid = p["members"][0]["id"]
    sb = create(c, network={"mode": "allowlist", "allow": ["pypi.org"]})
    check("a networked create is served by it", sb["id"] == mid and sb.get("tier") == "pool", sb)
    check_nic_claim(d, c, sb)
    c.call("PUT", "/v1/pools/base", {"size": 0, "nic": True})

def test_claims_cold(d, c):
    a, b = test_claims(d, c)
    print("-- same as cold", flush=True)
    test_same_as_cold(d, c, a)
    c.call("DELETE", f"/v1/sandboxes/{b['id']}")

if __name__ == "__main__":
    sys.exit(main([("claims", test_claims_cold),
                   ("claim failure", test_claim_failure),
                   ("kill -9", test_kill9),
                   ("base restore dies", test_base_restore_dies),
                   ("stale base", test_stale_base),
                   ("nic", test_nic)], env=POOL_ENV))
