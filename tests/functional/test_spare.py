#!/usr/bin/env python3
"""The spare-VMM create tier end to end: the real daemon, real VMs.

With the pool at size 0 and one spare, the pool's base is built and a
jailed QEMU waits with -incoming defer; a create is served by it (tier
"spare" in the sandbox, its "created" event and airlock_creates_total;
the spare's pre-generated id and its QEMU pid, no new QEMU), is usable
(exec, files, the owner's env, its own hostname, machine-id and access
token), suspends and resumes like any sandbox, and the spare is
refilled; a spare whose QEMU is killed during its claim is destroyed and
the create goes on at the base tier with a tier_fallback event; on a NIC shape the claim attaches the owner's egress
policy; after SIGKILL of airlockd and a restart no spare's QEMU, netns,
cgroup, uid claim, dir or store row is left, and a new spare is spawned;
a base reshaped or made stale destroys its spares.
Usage: test_spare.py AIRLOCKD [DATA_ROOT]"""
import http.client, json, os, signal, sqlite3, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, leftovers, main, qemu_pids, raw_json, wait_for
from pool_helpers import check_nic_claim, create, make_stale, pool

ENV = {"AIRLOCK_POOL": "base=0", "AIRLOCK_POOL_SPARES": "1", "AIRLOCK_POOL_REFILLS": "1"}
def spares(c):
    """The pool's spares object; {} on a daemon without the spare tier."""
    return pool(c).get("spares") or {}

def wait_spare(c, n=1, secs=1200, not_ids=()):
    """Until n spares wait (the base is built first: ~20 s idle, minutes loaded)."""
    end = time.time() + secs
    while time.time() < end:
        p = pool(c)
        s = p.get("spares")
        if s is None:
            return p            # no spare tier here: fail now, not after the timeout
        ids = [m["id"] for m in s["members"] if m["id"] not in not_ids]
        if len(ids) >= n:
            return p
        time.sleep(1)
    return pool(c)

def metric(c, name):
    st, _, body = c.raw("GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None

def first_event(c, sid):
    """The first event after "created" in the sandbox's history, and the created one."""
    created, nxt = None, None
    for name, data in c.sse("GET", f"/v1/sandboxes/{sid}/events"):
        if name == "created" and created is None:
            created = data.get("data")
            continue
        nxt = (name, data.get("data"))
        break
    return created, nxt

def e2b_stat(c, sid, token):
    """Filesystem Stat through the E2B envd route with this access token: the status."""
    h = {"X-API-KEY": c.key, "User-Agent": "e2b-python-sdk/2.21.1", "Content-Type": "application/json",
         "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983", "X-Access-Token": token,
         "Connect-Protocol-Version": "1"}
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=600)
    try:
        conn.request("POST", "/filesystem.Filesystem/Stat", body=json.dumps({"path": "/"}).encode(), headers=h)
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()

def e2b_token(c, sid):
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=600)
    try:
        conn.request("GET", f"/sandboxes/{sid}", headers={"X-API-KEY": c.key,
                                                          "User-Agent": "e2b-python-sdk/2.21.1"})
        r = conn.getresponse()
        return (json.loads(r.read() or b"{}") or {}).get("envdAccessToken")
    finally:
        conn.close()

def store_has(d, sid):
    db = sqlite3.connect(f"file:{os.path.join(d.dir, 'state.db')}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute("SELECT count(*) FROM sandboxes WHERE id = ?", (sid,)).fetchone()[0] > 0
    finally:
        db.close()

def ident(c, sid):
    code, _, out, _ = c.exec(sid, ["sh", "-c", "echo $WHO; hostname; cat /etc/machine-id"])
    return code, out.decode().split("\n")[:3]

def test_serve(d, c):
    st, _, j = raw_json(c, "PUT", "/v1/pools/base", {"size": 0, "spares": 17})
    check("spares above 16 is a 400 naming the field (a known one)",
          st == 400 and (j or {}).get("error", {}).get("field") == "spares", (st, j))
    p = wait_spare(c)
    s = p.get("spares") or {}
    check("pool size 0 + spares 1: the base is built and a spare waits",
          p["base"]["state"] == "ready" and s.get("ready") == 1 and s.get("target") == 1 and p["ready"] == 0, p)
    if not s.get("members"):
        return
    spare = s["members"][0]
    check("the spare is a jailed QEMU of its pre-generated id", qemu_pids(spare["id"]) == [str(spare["pid"])],
          (qemu_pids(spare["id"]), spare))
    check("the spare is hidden (not listed)", spare["id"] not in
          [x["id"] for x in c.call("GET", "/v1/sandboxes")["sandboxes"]])
    m0 = metric(c, 'airlock_creates_total{tier="spare"}') or 0
    a = create(c, env={"WHO": "spare-a"}, metadata={"k": "a"})
    check("the create is served by tier spare", a.get("tier") == "spare" and a["state"] == "running", a)
    check("... by the spare itself: its id and QEMU (no new process)",
          a["id"] == spare["id"] and qemu_pids(a["id"]) == [str(spare["pid"])], (a["id"], spare, qemu_pids(a["id"])))
    created, _ = first_event(c, a["id"])
    check("its created event says tier spare", (created or {}).get("tier") == "spare", created)
    check("airlock_creates_total{tier=\"spare\"} counts it",
          metric(c, 'airlock_creates_total{tier="spare"}') == m0 + 1, metric(c, 'airlock_creates_total{tier="spare"}'))
    check("GET /v1/pools counts it", c.call("GET", "/v1/pools")["creates"].get("spare") == m0 + 1)
    code, (who, host, mid) = ident(c, a["id"])
    check("exec works, with the owner's env", code == 0 and who == "spare-a", (code, who))
    check("its hostname is its own id", host == a["id"], (host, a["id"]))
    payload = os.urandom(65536)
    st, _, _ = c.raw("PUT", f"/v1/sandboxes/{a['id']}/files?path=/home/user/s.bin", payload,
                     {"Content-Type": "application/octet-stream"})
    st2, _, got = c.raw("GET", f"/v1/sandboxes/{a['id']}/files?path=/home/user/s.bin")
    check("files in and out", st == 201 and st2 == 200 and got == payload, (st, st2, len(got)))
    # Its RAM file is its own reflink of the base's (VM_RESTORE_OWN): it suspends like any sandbox.
    sus = c.call("POST", f"/v1/sandboxes/{a['id']}/suspend")
    res = c.call("POST", f"/v1/sandboxes/{a['id']}/resume")
    st, _, got = c.raw("GET", f"/v1/sandboxes/{a['id']}/files?path=/home/user/s.bin")
    code, (who, _, mid2) = ident(c, a["id"])
    check("suspend and resume: its file, env and machine-id survive", sus["state"] == "suspended" and
          res["state"] == "running" and st == 200 and got == payload and who == "spare-a" and mid2 == mid,
          (sus["state"], res["state"], st, who, mid, mid2))
    # Refilled: a new spare (another id) waits again.
    p = wait_spare(c, not_ids=(a["id"],), secs=600)
    s2 = p.get("spares") or {}
    check("the spare is refilled with a new one", s2.get("ready") == 1 and s2["members"][0]["id"] != a["id"]
          and s2.get("spawns", 0) >= 2, s2)
    b = create(c, env={"WHO": "spare-b"})
    check("a second create is served by the refilled spare", b.get("tier") == "spare", b.get("tier"))
    code, (who, host_b, mid_b) = ident(c, b["id"])
    check("its own identity: env, hostname, machine-id differ from the first",
          code == 0 and who == "spare-b" and host_b == b["id"] and mid_b and mid_b != mid, (who, host_b, mid, mid_b))
    ta, tb = e2b_token(c, a["id"]), e2b_token(c, b["id"])
    check("distinct access tokens", ta and tb and ta != tb, (ta, tb))
    check("B accepts its own token", e2b_stat(c, b["id"], tb) == 200)
    check("B refuses A's token", e2b_stat(c, b["id"], ta) in (401, 403))
    for x in (a, b):
        c.call("DELETE", f"/v1/sandboxes/{x['id']}")
        check("deleted: nothing left", wait_for(lambda: not leftovers(d, x["id"])), leftovers(d, x["id"]))

def test_broken(d, c):
    p = wait_spare(c, secs=600)
    s = p.get("spares") or {}
    check("a spare waits", s.get("ready") == 1, s)
    if not s.get("members"):
        return
    victim = s["members"][0]
    t0 = c.call("GET", "/v1/pools")
    # Stopped: its claim (getfd, migrate-incoming) gets no answer; killed once claimed.
    os.kill(victim["pid"], signal.SIGSTOP)
    out = {}
    th = threading.Thread(target=lambda: out.update(sb=create(c, env={"WHO": "fb"})), daemon=True)
    th.start()
    claimed = wait_for(lambda: victim["id"] not in [m["id"] for m in spares(c).get("members", [])], secs=120)
    os.kill(victim["pid"], signal.SIGKILL)
    th.join(900)
    sb = out.get("sb")
    check("the stopped spare was claimed", claimed)
    check("the create still succeeds, at the base tier", sb is not None and sb["state"] == "running"
          and sb.get("tier") == "base" and sb["id"] != victim["id"], sb)
    if sb is None:
        return
    code, (who, host, _) = ident(c, sb["id"])
    check("and it works, as itself", code == 0 and who == "fb" and host == sb["id"], (code, who, host))
    _, ev = first_event(c, sb["id"])
    check("a tier_fallback event from spare to base", ev is not None and ev[0] == "tier_fallback" and
          ev[1].get("from") == "spare" and ev[1].get("to") == "base" and ev[1].get("reason"), ev)
    t1 = c.call("GET", "/v1/pools")
    check("counted: tier_fallbacks, spare claim_failures, a base create",
          t1["tier_fallbacks"] == t0["tier_fallbacks"] + 1 and
          t1["pools"][0]["spares"]["claim_failures"] == t0["pools"][0]["spares"]["claim_failures"] + 1 and
          t1["creates"]["base"] == t0["creates"]["base"] + 1 and t1["creates"]["spare"] == t0["creates"]["spare"],
          (t0["creates"], t1["creates"], t0["tier_fallbacks"], t1["tier_fallbacks"]))
    check("the failed spare is destroyed: nothing of it left", wait_for(lambda: not leftovers(d, victim["id"])
          and not store_has(d, victim["id"])), leftovers(d, victim["id"]))
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")

def test_nic(d, c):
    # The previous case's claim used the spare: wait for its refill, so there is one to drop.
    before = [m["id"] for m in (wait_spare(c).get("spares") or {}).get("members", [])]
    c.call("PUT", "/v1/pools/base", {"size": 0, "spares": 1, "nic": True})
    check("another shape drops the old base's spares", before and
          wait_for(lambda: all(not leftovers(d, x) and not store_has(d, x) for x in before)), before)
    p = wait_spare(c, not_ids=before)
    s = p.get("spares") or {}
    check("a NIC shape: its own base and a spare", p["nic"] and p["key"].endswith("-nic") and s.get("ready") == 1, p)
    if not s.get("members"):
        return
    sid = s["members"][0]["id"]
    check("the NIC spare has its island", os.path.exists(f"/run/netns/airlock-{sid}"))
    sb = create(c, network={"mode": "allowlist", "allow": ["pypi.org"]})
    check("a networked create is served by the spare", sb["id"] == sid and sb.get("tier") == "spare", sb)
    check_nic_claim(d, c, sb)

def test_kill9(d, c):
    p = wait_spare(c, secs=600)
    s = p.get("spares") or {}
    check("a spare waits before kill -9", s.get("ready") == 1, s)
    if not s.get("members"):
        return c
    old = s["members"][0]
    check("... with its QEMU, island and row", qemu_pids(old["id"]) and store_has(d, old["id"]) and
          (not p["nic"] or os.path.exists(f"/run/netns/airlock-{old['id']}")), old)
    d.kill(signal.SIGKILL)
    check("the spare's QEMU outlives airlockd's SIGKILL", qemu_pids(old["id"]) == [str(old["pid"])])
    c = d.start(dict(ENV, AIRLOCK_POOL="base=0"))
    c.call("PUT", "/v1/pools/base", {"size": 0, "spares": 1, "nic": bool(p["nic"])})
    check("after the restart the old spare is not adopted", old["id"] not in
          [m["id"] for m in spares(c).get("members", [])], spares(c))
    check("... its QEMU, netns, cgroup, uid claim and dir are gone", wait_for(lambda: not leftovers(d, old["id"])),
          leftovers(d, old["id"]))
    check("... and its store row", not store_has(d, old["id"]))
    p = wait_spare(c, secs=600, not_ids=(old["id"],))
    check("a new spare is spawned", (p.get("spares") or {}).get("ready") == 1, p.get("spares"))
    sb = create(c, network={"mode": "allowlist", "allow": []}) if p["nic"] else create(c)
    check("and serves", sb.get("tier") == "spare", sb.get("tier"))
    code, _, o, _ = c.exec(sb["id"], ["echo", "ok"])
    check("usable", o == b"ok\n", o)
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
    return c

def test_stale(d, c):
    """The live base made stale (its manifest names another agent): the next
    check rejects it and destroys its spares; a rebuilt base gets new ones."""
    p = wait_spare(c, secs=600)
    s = p.get("spares") or {}
    check("a spare waits", s.get("ready") == 1, s)
    if not s.get("members"):
        return
    old = s["members"][0]["id"]
    rejected = p["base"]["rejected"]
    man = os.path.join(d.dir, "bases", p["key"], "manifest.json")
    make_stale(man)
    check("the stale base is rejected (manifest re-checked every 10 s)",
          wait_for(lambda: pool(c)["base"]["rejected"] > rejected, secs=120), pool(c)["base"])
    check("... and its spare destroyed: nothing of it left",
          wait_for(lambda: not leftovers(d, old) and not store_has(d, old), secs=60), leftovers(d, old))
    p = wait_spare(c, not_ids=(old,))
    check("a rebuilt base gets a new spare", p["base"]["state"] == "ready" and
          (p.get("spares") or {}).get("ready") == 1, p)

if __name__ == "__main__":
    sys.exit(main([("serve", test_serve),
                   ("broken spare", test_broken),
                   ("nic", test_nic),
                   ("kill -9", test_kill9),
                   ("stale base", test_stale)], env=ENV))
