#!/usr/bin/env python3
"""Volumes on every create tier (issue 15): template VMs boot with empty
volume slots (2 read-write, 1 read-only: qemu_argv.h); a pool claim, a spare
claim, a base restore and a create from a named snapshot each restore a
guest that saw the placeholders and fill the slots over QMP once it runs
(docs/volumes.md "Pools and snapshots"). With the real airlockd and real
microVMs:

- with a pool for the shape, a create with a read-write volume is served by
  the pool (tier "pool"), sees the volume (its size, not the placeholder's)
  mounted at its path and writes it; a second read-write or a read-only
  attach meanwhile is still a 409;
- suspend/resume of that pooled sandbox keeps the volume (restored with the
  volume on its slot) and writes after it land in the volume;
- deleted, nothing of it is left; the next pooled sandbox mounts the volume
  read-only, reads both writes and cannot write;
- more read-write volumes than slots boot cold (tier "boot") and still work,
  also adopted after airlockd's kill -9, then suspended and resumed;
- a sandbox with volumes cannot be forked or kept as a named snapshot (409);
- the spare tier and the base tier serve a create with a read-write and a
  read-only volume (tier "spare", "base"): both mounted, the read-only one
  unwritable, a second writer refused; the base one keeps its data over
  suspend/resume;
- a create from a named snapshot takes volumes (tier "snapshot"), also
  through E2B's templateID + volumeMounts; more than the slots hold is a
  400 naming volumes;
- crash consistency: a writer whose QEMU is SIGKILLed after a sync, then
  deleted, leaves a journal to replay: the next read-only attach reads the
  data (the journal replayed in a jail, never by root on the host); writes
  never synced survive a suspend then delete, and a delete of a running
  writer (the guest freezes its volumes first); a resumed guest writes again.
Usage: test_volumes_pool.py AIRLOCKD [DATA_ROOT]"""
import http.client, json, os, signal, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, check, leftovers, main, qemu_pids, wait_for
from pool_helpers import pool, wait_ready

POOL_ENV = {"AIRLOCK_POOL": "base=1", "AIRLOCK_POOL_REFILLS": "1", "AIRLOCK_POOL_SPARES": "0",
            "AIRLOCK_SWEEP_INTERVAL_S": "1"}
SHAPE = {"template": "base", "vcpus": 2, "memory_mb": 512}

def sh(c, sid, cmd):
    code, _, out, err = c.exec(sid, ["/bin/bash", "-c", cmd])
    return code, out.decode(errors="replace"), err.decode(errors="replace")

def status_of(fn):
    try:
        fn()
        return 200, None
    except ApiError as e:
        return e.status, e.body

def create(c, vols):
    return c.call("POST", "/v1/sandboxes", dict(SHAPE, volumes=vols))

def gone(d, c, sid):
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    check("deleted: nothing of it left", wait_for(lambda: not leftovers(d, sid)),
          leftovers(d, sid))

def test_pooled(d, c):
    c.call("POST", "/v1/volumes", {"name": "pv", "size_mb": 64})
    p = wait_ready(c)
    check("the pool fills", p["ready"] >= 1, p)
    a = create(c, [{"name": "pv", "path": "/data"}])
    check("a create with a read-write volume is served by the pool", a.get("tier") == "pool",
          a.get("tier"))
    code, out, err = sh(c, a["id"], "grep ' /data ' /proc/mounts; df -B1M --output=size /data "
                        "| tail -1; echo first > /data/f; sync; cat /data/f")
    size = out.split("\n")[1].strip() if len(out.split("\n")) > 1 else ""
    check("... the volume is mounted read-write at its path, with its own size",
          code == 0 and "/dev/vd" in out and " rw," in out and "first" in out and
          size.isdigit() and 40 <= int(size) <= 64, f"{code} {out} {err}")
    for vols, what in (([{"name": "pv", "path": "/x"}], "read-write"),
                       ([{"name": "pv", "path": "/x", "read_only": True}], "read-only")):
        st, b = status_of(lambda: create(c, vols))
        check(f"a {what} attach beside the pooled writer: 409 naming it",
              st == 409 and a["id"] in b["error"]["message"], f"{st} {b}")
    # Children would have the volume mounted without it (one writer): refused.
    st, b = status_of(lambda: c.call("POST", f"/v1/sandboxes/{a['id']}/fork", {"count": 1}))
    check("fork of a sandbox with volumes: 409 saying so",
          st == 409 and "volumes" in b["error"]["message"], f"{st} {b}")
    st, b = status_of(lambda: c.call("POST", f"/v1/sandboxes/{a['id']}/snapshots",
                                     {"name": "withvol"}))
    check("a named snapshot of a sandbox with volumes: 409 saying so",
          st == 409 and "volumes" in b["error"]["message"], f"{st} {b}")
    c.call("POST", f"/v1/sandboxes/{a['id']}/suspend")
    c.call("POST", f"/v1/sandboxes/{a['id']}/resume")
    code, out, err = sh(c, a["id"], "cat /data/f; echo second >> /data/f; sync; cat /data/f")
    check("after suspend/resume the pooled sandbox still has its volume and writes it",
          code == 0 and out.count("first") == 2 and "second" in out, f"{code} {out} {err}")
    gone(d, c, a["id"])

    p = wait_ready(c)
    b = create(c, [{"name": "pv", "path": "/ro", "read_only": True}])
    check("a create with a read-only volume is served by the pool", b.get("tier") == "pool",
          b.get("tier"))
    code, out, err = sh(c, b["id"], "cat /ro/f; echo x > /ro/g && echo wrote")
    check("... it reads what the deleted pooled sandbox wrote, before and after its resume",
          "first" in out and "second" in out, f"{code} {out} {err}")
    check("... and cannot write", "wrote" not in out and "Read-only" in err, f"{out} {err}")
    gone(d, c, b["id"])

def test_too_many(d, c):
    for n in ("t0", "t1", "t2"):
        c.call("POST", "/v1/volumes", {"name": n, "size_mb": 16})
    wait_ready(c)
    e = create(c, [{"name": n, "path": f"/{n}"} for n in ("t0", "t1", "t2")])
    check("three read-write volumes (two slots): a cold boot", e.get("tier") == "boot",
          e.get("tier"))
    code, out, err = sh(c, e["id"], "for n in t0 t1 t2; do echo $n > /$n/f; done; sync; "
                        "cat /t0/f /t1/f /t2/f")
    check("... with all three mounted", code == 0 and out.split() == ["t0", "t1", "t2"],
          f"{code} {out} {err}")
    # Adopted after a daemon kill -9: its device list (three disks after the slots)
    # is the one its next snapshot records, so it suspends and resumes.
    d.kill(signal.SIGKILL)
    c = d.start()
    wait_for(lambda: c.call("GET", f"/v1/sandboxes/{e['id']}")["state"] == "running", 120)
    c.call("POST", f"/v1/sandboxes/{e['id']}/suspend")
    st, b = status_of(lambda: c.call("POST", f"/v1/sandboxes/{e['id']}/resume"))
    code, out, err = sh(c, e["id"], "cat /t0/f /t1/f /t2/f") if st == 200 else (-1, "", "")
    check("... adopted after airlockd's kill -9, it suspends and resumes with all three",
          st == 200 and out.split() == ["t0", "t1", "t2"], f"{st} {b} {code} {out} {err}")
    gone(d, c, e["id"])
    c.call("PUT", "/v1/pools/base", {"size": 0})
    return c

def volume(c, name, size_mb=32):
    """A fresh volume of that name (an old one of the name is deleted first)."""
    try:
        c.call("DELETE", f"/v1/volumes/{name}")
    except ApiError:
        pass
    c.call("POST", "/v1/volumes", {"name": name, "size_mb": size_mb})

def check_mounts(c, sid, what, rw, rw_mb, ro, marker):
    """rw mounted read-write with its own size and written (marker, synced);
    ro mounted read-only (an ext4: lost+found) and unwritable."""
    code, out, err = sh(c, sid, f"grep -E ' ({rw}|{ro}) ' /proc/mounts; "
                        f"df -B1M --output=size {rw} | tail -1; echo {marker} > {rw}/m; sync; "
                        f"cat {rw}/m; ls {ro}; echo x > {ro}/x && echo wrote")
    lines = out.split("\n")
    rwl = [l for l in lines if f" {rw} " in l]
    rol = [l for l in lines if f" {ro} " in l]
    size = next((l.strip() for l in lines if l.strip().isdigit()), "")
    check(f"{what}: the read-write volume is mounted read-write at its path, with its own size",
          rwl and " rw," in rwl[0] and size.isdigit() and rw_mb * 0.6 <= int(size) <= rw_mb,
          f"{code} {out} {err}")
    check(f"{what}: ... and takes writes", marker in out, f"{code} {out} {err}")
    check(f"{what}: the read-only volume is mounted read-only and cannot be written",
          rol and " ro," in rol[0] and "lost+found" in out and "wrote" not in out and
          "Read-only" in err, f"{code} {out} {err}")

def set_pool(c, size, spares):
    c.call("PUT", "/v1/pools/base", {"size": size, "spares": spares})

def wait_spare(c, secs=900):
    end = time.time() + secs
    while time.time() < end:
        s = pool(c).get("spares") or {}
        if s.get("ready", 0) >= 1:
            return s
        time.sleep(1)
    return pool(c).get("spares") or {}

def test_spare(d, c):
    volume(c, "sw")
    volume(c, "sr", 16)
    set_pool(c, 0, 1)
    s = wait_spare(c)
    check("spare tier: a spare waits", s.get("ready", 0) >= 1, s)
    a = create(c, [{"name": "sw", "path": "/w"}, {"name": "sr", "path": "/r", "read_only": True}])
    check("spare tier: a create with a read-write and a read-only volume is served by a spare",
          a.get("tier") == "spare", a.get("tier"))
    check_mounts(c, a["id"], "spare tier", "/w", 32, "/r", "spare")
    st, b = status_of(lambda: create(c, [{"name": "sw", "path": "/x"}]))
    check("spare tier: a second writer is a 409 naming the holder",
          st == 409 and a["id"] in b["error"]["message"], f"{st} {b}")
    set_pool(c, 0, 0)
    gone(d, c, a["id"])

def test_base(d, c):
    volume(c, "bw")
    volume(c, "br", 16)
    set_pool(c, 0, 0)
    wait_for(lambda: (pool(c).get("spares") or {}).get("ready", 0) == 0 and pool(c)["ready"] == 0, 60)
    p = pool(c)
    check("base tier: the base is ready and nothing else waits",
          p["base"]["state"] == "ready" and p["ready"] == 0 and (p.get("spares") or {}).get("ready", 0) == 0, p)
    a = create(c, [{"name": "bw", "path": "/w"}, {"name": "br", "path": "/r", "read_only": True}])
    check("base tier: a create with a read-write and a read-only volume restores the base",
          a.get("tier") == "base", a.get("tier"))
    check_mounts(c, a["id"], "base tier", "/w", 32, "/r", "base")
    st, b = status_of(lambda: create(c, [{"name": "bw", "path": "/x", "read_only": True}]))
    check("base tier: a reader beside the writer is a 409 naming it",
          st == 409 and a["id"] in b["error"]["message"], f"{st} {b}")
    c.call("POST", f"/v1/sandboxes/{a['id']}/suspend")
    c.call("POST", f"/v1/sandboxes/{a['id']}/resume")
    code, out, err = sh(c, a["id"], "cat /w/m; echo again >> /w/m; sync; cat /w/m; ls /r")
    check("base tier: after suspend/resume both volumes are there and it writes again",
          code == 0 and out.count("base") == 2 and "again" in out and "lost+found" in out,
          f"{code} {out} {err}")
    gone(d, c, a["id"])

def e2b_create(c, body):
    h = {"X-API-KEY": c.key, "User-Agent": "e2b-python-sdk/2.21.1",
         "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=600)
    try:
        conn.request("POST", "/sandboxes", body=json.dumps(body).encode(), headers=h)
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"{}")
    finally:
        conn.close()

def test_snapshot(d, c):
    volume(c, "nw")
    volume(c, "nr", 16)
    src = create(c, [])
    try:
        c.call("DELETE", "/v1/snapshots/vsnap")
    except ApiError:
        pass
    c.call("POST", f"/v1/sandboxes/{src['id']}/snapshots", {"name": "vsnap"})
    gone(d, c, src["id"])
    a = c.call("POST", "/v1/sandboxes", {"snapshot": "vsnap", "volumes": [
        {"name": "nw", "path": "/w"}, {"name": "nr", "path": "/r", "read_only": True}]})
    check("snapshot: a create from a named snapshot takes a read-write and a read-only volume",
          a.get("tier") == "snapshot", a)
    check_mounts(c, a["id"], "snapshot", "/w", 32, "/r", "snap")
    st, e = e2b_create(c, {"templateID": "vsnap", "allow_internet_access": False,
                           "volumeMounts": [{"name": "nr", "path": "/e2b", "readOnly": True}]})
    eid = e.get("sandboxID")
    code, out, err = sh(c, eid, "grep ' /e2b ' /proc/mounts; ls /e2b") if eid else (-1, "", "")
    check("snapshot: E2B's templateID naming the snapshot, with volumeMounts, mounts it",
          st == 201 and " ro," in out and "lost+found" in out, f"{st} {e} {code} {out} {err}")
    st, b = status_of(lambda: c.call("POST", "/v1/sandboxes", {"snapshot": "vsnap", "volumes": [
        {"name": n, "path": f"/{n}"} for n in ("t0", "t1", "t2")]}))
    check("snapshot: more read-write volumes than its slots: 400 naming volumes and the slots",
          st == 400 and b["error"]["message"].startswith("volumes: ") and
          "slots" in b["error"]["message"], f"{st} {b}")
    gone(d, c, a["id"])
    if eid:
        gone(d, c, eid)
    c.call("DELETE", "/v1/snapshots/vsnap")

def test_crash(d, c):
    volume(c, "cv")
    set_pool(c, 0, 0)
    wait_for(lambda: (pool(c).get("spares") or {}).get("ready", 0) == 0 and pool(c)["ready"] == 0, 60)
    # Synced into the journal, then the VMM dies: the journal is left to replay.
    a = create(c, [{"name": "cv", "path": "/c"}])
    code, out, err = sh(c, a["id"], "echo crashed > /c/k; sync; cat /c/k")
    pids = qemu_pids(a["id"])
    check("crash: the writer wrote and synced; its QEMU is found", code == 0 and
          "crashed" in out and len(pids) == 1, f"{code} {out} {err} {pids}")
    for pid in pids:
        os.kill(int(pid), signal.SIGKILL)
    check("crash: the sandbox fails once its QEMU is killed", wait_for(
        lambda: c.call("GET", f"/v1/sandboxes/{a['id']}")["state"] == "failed", 120))
    log0 = d.log_size()
    gone(d, c, a["id"])
    b = create(c, [{"name": "cv", "path": "/c", "read_only": True}])
    code, out, err = sh(c, b["id"], "cat /c/k")
    check("crash: the next read-only attach reads what the killed writer had synced",
          code == 0 and "crashed" in out, f"{code} {out} {err}")
    with open(os.path.join(d.dir, "airlockd.log"), "rb") as f:
        f.seek(log0)
        log = f.read().decode(errors="replace")
    check("crash: ... its journal was replayed in a jail before it was attached",
          "journal replayed in a jail" in log, log[-3000:])
    gone(d, c, b["id"])
    # Never synced: a suspend freezes the volume first, so a delete while suspended loses nothing.
    e = create(c, [{"name": "cv", "path": "/c"}])
    sh(c, e["id"], "echo one > /c/f1")
    c.call("POST", f"/v1/sandboxes/{e['id']}/suspend")
    c.call("POST", f"/v1/sandboxes/{e['id']}/resume")
    code, out, err = sh(c, e["id"], "echo two > /c/f2 && cat /c/f1 /c/f2")
    check("freeze: after suspend/resume the volume is thawed: it writes again",
          code == 0 and out.split() == ["one", "two"], f"{code} {out} {err}")
    c.call("POST", f"/v1/sandboxes/{e['id']}/suspend")
    gone(d, c, e["id"])
    # Never synced either: the delete of a running writer freezes it first.
    g = create(c, [{"name": "cv", "path": "/c"}])
    sh(c, g["id"], "echo three > /c/f3")
    gone(d, c, g["id"])
    r = create(c, [{"name": "cv", "path": "/c", "read_only": True}])
    code, out, err = sh(c, r["id"], "cat /c/f1 /c/f2 /c/f3")
    check("freeze: unsynced writes survive a suspend then delete, and a delete while running",
          code == 0 and out.split() == ["one", "two", "three"], f"{code} {out} {err}")
    gone(d, c, r["id"])

if __name__ == "__main__":
    sys.exit(main([("pooled", test_pooled), ("too many", test_too_many), ("spare", test_spare),
                   ("base", test_base), ("snapshot", test_snapshot),
                   ("crash", test_crash)],
                  env=POOL_ENV))
