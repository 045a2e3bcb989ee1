#!/usr/bin/env python3
"""Fork and named snapshots end to end: the real daemon, real VMs (issue 13 items 5, 6).

Fork: the children continue the source's processes; memory is copy-on-write
(the parent keeps rewriting a marker in guest RAM after the fork, children
see the fork-time value; a child's writes are invisible to its siblings and
the parent); disk likewise (write + fsync); network: each child is alone in
its own island (it reaches neither a sibling's listener, the parent's, nor a
listener on the host) and its egress is audited under its own id;
uniqueness over 8 children (first getrandom(64), the kernel uuid, Python
random and uuid4, machine-id, hostname; one child's access token is refused
by another); validation answers 4xx naming the field.
Named snapshots: create, create a sandbox from it (state present), delete
refused while in use, survives a daemon restart, E2B's snapshot calls.
The daemon runs with max_sandboxes 12: a fork past it is a 429 naming count.
Usage: test_fork.py AIRLOCKD [DATA_ROOT]"""
import http.client, json, os, signal, socket, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, args, check, leftovers, session, summary, wait_for

ENV = {"AIRLOCK_SWEEP_INTERVAL_S": "1", "AIRLOCK_MAX_SANDBOXES": "12"}
NET = {"mode": "allowlist", "allow": ["pypi.org"]}

def sh(c, sid, script):
    code, _, out, err = c.exec(sid, ["sh", "-c", script])
    return code, out.decode(errors="replace"), err.decode(errors="replace")

def fork(c, sid, **body):
    return c.call("POST", f"/v1/sandboxes/{sid}/fork", body, expect=(201,))

def e2b(c, method, path, body=None, headers=None):
    h = {"X-API-KEY": c.key, "User-Agent": "e2b-python-sdk/2.21.1"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=600)
    try:
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        raw = r.read()
    finally:
        conn.close()
    try:
        return r.status, json.loads(raw) if raw else None
    except ValueError:
        return r.status, raw

def expect_error(c, method, path, body, status, field=None):
    try:
        c.call(method, path, body, expect=())
        return False, "no error"
    except ApiError as e:
        err = e.body.get("error", {}) if isinstance(e.body, dict) else {}
        return e.status == status and (field is None or err.get("field") == field), (e.status, e.body)

class HostListener:
    """A TCP listener on the host's addresses: a guest must never reach it."""
    def __init__(self):
        self.s = socket.socket()
        self.s.bind(("0.0.0.0", 0))
        self.s.listen(16)
        self.port = self.s.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                conn, _ = self.s.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()

def host_ips():
    ips = set()
    try:
        out = os.popen("ip -4 -o addr show").read()
        for line in out.splitlines():
            ip = line.split()[3].split("/")[0]
            if not ip.startswith("127.") and not ip.startswith("10.0.0."):
                ips.add(ip)
    except OSError:
        pass
    return sorted(ips)

# --- fork -------------------------------------------------------------------

SETUP = r"""
set -e
head -c 33554432 /dev/urandom > /dev/shm/blob
sha256sum /dev/shm/blob | cut -d' ' -f1 > /home/user/blob.sum
echo fork-time > /dev/shm/marker
echo disk-fork-time > /home/user/disk-marker
sync
# A process that runs across the fork: its pid and a tick it keeps writing to RAM.
nohup sh -c 'while :; do date +%s%N > /dev/shm/tick; sleep 0.2; done' >/dev/null 2>&1 &
echo $! > /dev/shm/ticker.pid
"""

def test_fork(d, c):
    src = c.call("POST", "/v1/sandboxes", {"template": "base", "memory_mb": 512, "network": NET})
    sid = src["id"]
    code, out, err = sh(c, sid, SETUP)
    check("source set up (32 MiB in guest RAM, a marker, a disk file, a ticker)", code == 0, (out, err))
    blob_sum = sh(c, sid, "cat /home/user/blob.sum")[1].strip()
    ticker = sh(c, sid, "cat /dev/shm/ticker.pid")[1].strip()

    # The parent rewrites its RAM marker in a loop while the fork captures and after.
    stop = threading.Event()
    def rewrite():
        n = 0
        while not stop.is_set():
            n += 1
            try:
                sh(c, sid, f"echo parent-after-{n} > /dev/shm/marker")
            except Exception:
                pass
    r = fork(c, sid, count=2)
    t = threading.Thread(target=rewrite, daemon=True)
    t.start()
    kids = r["sandboxes"]
    check("fork of 2: two children, no errors", len(kids) == 2 and r["errors"] == [], r)
    check("the answer names the source and its pause", r.get("source") == sid and
          isinstance(r.get("paused_ms"), (int, float)) and r["paused_ms"] > 0, r)
    print(f"   source paused {r['paused_ms']:.1f} ms, capture {r['capture_ms']:.1f} ms", flush=True)
    if len(kids) != 2:
        stop.set()
        return
    a, b = kids[0]["id"], kids[1]["id"]
    check("children are running, from tier fork, with their origin",
          all(k["state"] == "running" and k.get("tier") == "fork" and k.get("origin") == f"fork:{sid}"
              for k in kids), kids)
    check("children keep the source's shape and network policy",
          all(k["memory_mb"] == src["memory_mb"] and k["vcpus"] == src["vcpus"] and
              k["network"]["mode"] == "allowlist" for k in kids), kids)
    st = c.call("GET", f"/v1/sandboxes/{sid}")
    check("the source keeps running", st["state"] == "running", st)
    time.sleep(2)
    stop.set()
    t.join()
    pm = sh(c, sid, "cat /dev/shm/marker")[1].strip()
    check("the parent's marker moved on after the fork", pm.startswith("parent-after-"), pm)

    # Memory: children see the fork-time value and the fork-time 32 MiB.
    for k in (a, b):
        code, out, _ = sh(c, k, "cat /dev/shm/marker; sha256sum /dev/shm/blob | cut -d' ' -f1")
        lines = out.split()
        check(f"child {k}: RAM marker is the fork-time value", lines[:1] == ["fork-time"], out)
        check(f"child {k}: the 32 MiB in RAM are the fork-time bytes", lines[1:2] == [blob_sum], out)
    # The source's processes continue in the children.
    # (It ticks every 0.2 s; a loaded TCG host may starve it for seconds: wait up to 30 s.)
    code, out, _ = sh(c, a, f"kill -0 {ticker} && echo alive; t1=$(cat /dev/shm/tick); "
                            "for i in $(seq 30); do sleep 1; t2=$(cat /dev/shm/tick); "
                            "[ \"$t2\" != \"$t1\" ] && echo ticking && break; done")
    check("the source's background process runs on in a child", "alive" in out and "ticking" in out, out)
    for k in (a, b, sid):	# a busy loop in every TCG guest slows the rest of the run
        sh(c, k, f"kill {ticker}; true")
    # A child's writes are its own.
    sh(c, a, "echo child-a > /dev/shm/marker; head -c 1048576 /dev/zero > /dev/shm/blob")
    mb = sh(c, b, "cat /dev/shm/marker; sha256sum /dev/shm/blob | cut -d' ' -f1")[1].split()
    check("a child's RAM writes are invisible to its sibling", mb == ["fork-time", blob_sum], mb)
    pm2 = sh(c, sid, "cat /dev/shm/marker")[1].strip()
    check("... and to the parent", pm2.startswith("parent-after-"), pm2)

    # Disk: write + fsync in one child, seen nowhere else.
    sh(c, a, "echo disk-child-a > /home/user/disk-marker; echo new > /home/user/only-a; sync")
    sh(c, sid, "echo disk-parent-after > /home/user/disk-marker; sync")
    ob = sh(c, b, "cat /home/user/disk-marker; ls /home/user/only-a 2>&1")[1]
    check("a child's disk write + fsync is invisible to its sibling",
          ob.startswith("disk-fork-time") and "No such file" in ob, ob)
    op = sh(c, sid, "cat /home/user/disk-marker; ls /home/user/only-a 2>&1")[1]
    check("... and to the parent", op.startswith("disk-parent-after") and "No such file" in op, op)
    oa = sh(c, a, "cat /home/user/disk-marker")[1].strip()
    check("the parent's later disk write is invisible to the child", oa == "disk-child-a", oa)

    # Network: islands. Each child listens; the others try to reach it by every address.
    hl = HostListener()
    for k in (a, b, sid):
        sh(c, k, "nohup python3 -c \"import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,"
                 "socket.SO_REUSEADDR,1);s.bind(('0.0.0.0',8123));s.listen(8)\nwhile 1:\n c,_=s.accept();"
                 "open('/dev/shm/reached','a').write('x');c.close()\" >/dev/null 2>&1 &")
    time.sleep(1)
    # Positive controls: the listeners and the probe work where a connection is allowed.
    sh(c, b, "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8123), 3).close()\"; sleep 0.5")
    ctl = sh(c, b, "cat /dev/shm/reached 2>/dev/null | wc -c")[1].strip()
    check("control: a guest reaches its own listener", ctl == "1", ctl)
    sh(c, b, "rm -f /dev/shm/reached")
    socket.create_connection(("127.0.0.1", hl.port), 3).close()
    time.sleep(0.5)
    check("control: the host listener counts a connection", hl.hits == 1, hl.hits)
    hl.hits = 0
    targets = ["10.0.0.1", "10.0.0.2"] + host_ips()
    probe = ("python3 - <<'PY'\nimport socket\nfor h,p in %r:\n s=socket.socket();s.settimeout(3)\n"
             " try:\n  s.connect((h,p)); s.send(b'x'); print('sent',h,p)\n except Exception as e:\n"
             "  print('refused',h,p,type(e).__name__)\n s.close()\nPY") % (
                 [(h, 8123) for h in targets if h != "10.0.0.2"] + [(h, hl.port) for h in targets])
    out_a = sh(c, a, probe)[1]
    time.sleep(1)
    reached = {k: sh(c, k, "cat /dev/shm/reached 2>/dev/null | wc -c")[1].strip() for k in (b, sid)}
    check("a child reaches neither its sibling's nor the parent's listener",
          reached == {b: "0", sid: "0"}, (reached, out_a))
    check("a child reaches no listener on the host", hl.hits == 0, (hl.hits, out_a))
    # Egress audited under the child's own id.
    sh(c, a, "getent hosts denied-child-a.example; true")
    ok = False
    for _ in range(60):
        aud = c.call("GET", f"/v1/audit?sandbox={a}&decision=deny").get("records", [])
        if any("denied-child-a.example" in json.dumps(e) for e in aud):
            ok = True
            break
        time.sleep(0.5)
    check("a child's egress is audited under its own id", ok, aud if not ok else "")
    other = c.call("GET", f"/v1/audit?sandbox={b}").get("records", [])
    check("... and not under its sibling's", not any("denied-child-a.example" in json.dumps(e) for e in other),
          other)

    # Validation: 4xx naming the field.
    for body, status, field in (({"count": 0}, 400, "count"), ({"count": 17}, 400, "count"),
                                ({"count": "2"}, 400, "count"), ({"count": 1, "bogus": 1}, 400, "bogus"),
                                ({"count": 1, "network": {"mode": "none"}}, 400, "network.mode"),
                                ({"count": 100000}, 400, "count"),
                                ({"count": 12}, 429, "count")):
        okv, det = expect_error(c, "POST", f"/v1/sandboxes/{sid}/fork", body, status, field)
        check(f"fork {json.dumps(body)}: {status} naming {field}", okv, det)
    okv, det = expect_error(c, "POST", "/v1/sandboxes/nosuchsandbox0000000/fork", {"count": 1}, 404)
    check("fork of an unknown sandbox: 404", okv, det)
    c.call("POST", f"/v1/sandboxes/{b}/suspend")
    okv, det = expect_error(c, "POST", f"/v1/sandboxes/{b}/fork", {"count": 1}, 409)
    check("fork of a suspended sandbox: 409", okv, det)
    for k in (a, b):
        c.call("DELETE", f"/v1/sandboxes/{k}")
        check(f"child {k} deleted: nothing left", wait_for(lambda: not leftovers(d, k)), leftovers(d, k))
    snaps = [n for n in os.listdir(os.path.join(d.dir, "snapshots")) if n.startswith(sid)]
    check("the fork's capture is gone once its children restored", snaps == [], snaps)
    return sid

def test_unique(d, c, sid):
    r = fork(c, sid, count=8)
    kids = [k["id"] for k in r["sandboxes"]]
    check("fork of 8: eight children", len(kids) == 8 and r["errors"] == [], r)
    print(f"   8 children: source paused {r['paused_ms']:.1f} ms", flush=True)
    probe = ("python3 -c \"import os,random,uuid; print(os.getrandom(64).hex()); "
             "print(open('/proc/sys/kernel/random/uuid').read().strip()); print(random.random()); "
             "print(uuid.uuid4()); print(open('/etc/machine-id').read().strip()); "
             "print(open('/proc/sys/kernel/hostname').read().strip())\"")
    rows = {}
    for k in kids:
        rows[k] = sh(c, k, probe)[1].split("\n")[:6]
    names = ["getrandom(64)", "kernel uuid", "python random", "uuid4", "machine-id", "hostname"]
    src_row = sh(c, sid, probe)[1].split("\n")[:6]
    for i, n in enumerate(names):
        vals = [rows[k][i] if len(rows[k]) > i else "" for k in kids]
        check(f"8 children: {n} all differ", len(set(vals)) == 8 and all(vals), vals)
        if n in ("machine-id", "hostname"):
            check(f"... and from the source's {n}", src_row[i] not in vals, (src_row[i], vals))
    # Tokens: child A's access token is refused by child B (E2B's envd route).
    st_a, ja = e2b(c, "GET", f"/sandboxes/{kids[0]}")
    st_b, jb = e2b(c, "GET", f"/sandboxes/{kids[1]}")
    ta, tb = (ja or {}).get("envdAccessToken"), (jb or {}).get("envdAccessToken")
    check("children have distinct access tokens", ta and tb and ta != tb, (st_a, st_b))
    def stat(sbx, tok):
        return e2b(c, "POST", "/filesystem.Filesystem/Stat", {"path": "/"},
                   {"E2b-Sandbox-Id": sbx, "E2b-Sandbox-Port": "49983", "X-Access-Token": tok,
                    "Connect-Protocol-Version": "1"})[0]
    s_own, s_other = stat(kids[1], tb), stat(kids[1], ta)
    check("child B accepts its own token", s_own == 200, s_own)
    check("child B refuses child A's token", s_other in (401, 403), s_other)
    for k in kids:
        c.call("DELETE", f"/v1/sandboxes/{k}")

# --- named snapshots ---------------------------------------------------------------

def test_snapshots(d, c, sid):
    sh(c, sid, "echo snap-mem > /dev/shm/snapmark; echo snap-disk > /home/user/snapmark; sync")
    s = c.call("POST", f"/v1/sandboxes/{sid}/snapshots", {"name": "snap1"}, expect=(201,))
    check("snapshot create: 201 with id, name, source and the pause", s.get("name") == "snap1" and
          s.get("source") == sid and s.get("id") and isinstance(s.get("paused_ms"), (int, float)), s)
    print(f"   snapshot: source paused {s.get('paused_ms', 0):.1f} ms", flush=True)
    sh(c, sid, "echo later > /dev/shm/snapmark")
    lst = c.call("GET", "/v1/snapshots")["snapshots"]
    check("listed", [x["name"] for x in lst] == ["snap1"], lst)
    okv, det = expect_error(c, "POST", f"/v1/sandboxes/{sid}/snapshots", {"name": "snap1"}, 409, "name")
    check("a second snapshot of that name: 409 naming name", okv, det)
    okv, det = expect_error(c, "POST", f"/v1/sandboxes/{sid}/snapshots", {"name": "../x"}, 400, "name")
    check("a bad name: 400 naming name", okv, det)
    okv, det = expect_error(c, "POST", f"/v1/sandboxes/{sid}/snapshots", {}, 400, "name")
    check("no name: 400 naming name", okv, det)
    okv, det = expect_error(c, "POST", "/v1/sandboxes", {"snapshot": "nope"}, 404)
    check("create from an unknown snapshot: 404", okv, det)
    okv, det = expect_error(c, "POST", "/v1/sandboxes", {"snapshot": "snap1", "memory_mb": 1024}, 400,
                            None)
    check("create from a snapshot with another shape: 400", okv, det)
    okv, det = expect_error(c, "POST", "/v1/sandboxes", {"snapshot": "snap1", "template": "base"}, 400,
                            "snapshot")
    check("template and snapshot together: 400 naming snapshot", okv, det)

    n = c.call("POST", "/v1/sandboxes", {"snapshot": "snap1", "env": {"FROM": "snap"}})
    check("create from a snapshot: running, tier snapshot, origin named",
          n["state"] == "running" and n.get("tier") == "snapshot" and n.get("origin") == f"snapshot:{s['id']}"
          and n["network"]["mode"] == "allowlist", n)
    out = sh(c, n["id"], "cat /dev/shm/snapmark /home/user/snapmark; echo $FROM; cat /proc/sys/kernel/hostname")[1]
    check("its memory and disk are the snapshot's, its env and hostname its own",
          out.split("\n")[:3] == ["snap-mem", "snap-disk", "snap"] and n["id"] in out, out)
    okv, det = expect_error(c, "DELETE", "/v1/snapshots/snap1", None, 409)
    check("delete refused while a sandbox made from it exists: 409", okv, det)

    # Restart: the snapshot and the sandbox's origin survive.
    d.kill(signal.SIGTERM)
    c = d.start(ENV)
    lst = c.call("GET", "/v1/snapshots")["snapshots"]
    check("after a restart the snapshot is still listed", [x["id"] for x in lst] == [s["id"]], lst)
    okv, det = expect_error(c, "DELETE", "/v1/snapshots/snap1", None, 409)
    check("... and still in use (the origin is persisted)", okv, det)
    c.call("DELETE", f"/v1/sandboxes/{n['id']}")
    n2 = c.call("POST", "/v1/sandboxes", {"template": "snap1"})
    check("after the restart, a create from it by template name", n2["state"] == "running" and
          n2.get("tier") == "snapshot", n2)
    out = sh(c, n2["id"], "cat /dev/shm/snapmark")[1].strip()
    check("... has the snapshot's memory", out == "snap-mem", out)
    c.call("DELETE", f"/v1/sandboxes/{n2['id']}")
    # The graceful stop suspended the source: resume it for E2B's snapshot and fork.
    c.call("POST", f"/v1/sandboxes/{sid}/resume")

    # E2B: createSnapshot, list, Sandbox.create(snapshotID), delete.
    st, j = e2b(c, "POST", f"/sandboxes/{sid}/snapshots", {"name": "esnap"})
    check("E2B createSnapshot: 201 {snapshotID, names}", st == 201 and j.get("snapshotID") == "esnap:default"
          and j.get("names") == ["esnap:default"], (st, j))
    st, j = e2b(c, "GET", f"/snapshots?sandboxID={sid}")
    check("E2B listSnapshots by sandbox", st == 200 and sorted(x["snapshotID"] for x in j) ==
          ["esnap:default", "snap1:default"], (st, j))
    st, j = e2b(c, "POST", "/sandboxes", {"templateID": "esnap:default", "timeout": 300})
    check("E2B Sandbox.create(snapshotID)", st == 201 and j.get("sandboxID"), (st, j))
    if st == 201:
        st2, _ = e2b(c, "DELETE", "/templates/esnap:default")
        check("E2B delete of a snapshot in use: 409", st2 == 409, st2)
        e2b(c, "DELETE", f"/sandboxes/{j['sandboxID']}")
    st, j = e2b(c, "POST", f"/sandboxes/{sid}/fork", {"count": 1})
    check("E2B fork: 201 [{sandbox}]", st == 201 and isinstance(j, list) and len(j) == 1 and
          j[0].get("sandbox", {}).get("sandboxID"), (st, j))
    if st == 201 and isinstance(j, list):
        for x in j:
            if x.get("sandbox"):
                e2b(c, "DELETE", f"/sandboxes/{x['sandbox']['sandboxID']}")
    st, _ = e2b(c, "DELETE", "/templates/esnap:default")
    check("E2B delete of a snapshot: 204", st == 204, st)
    c.call("DELETE", "/v1/snapshots/snap1", expect=(204,))
    check("deleted: not listed, its files gone", c.call("GET", "/v1/snapshots")["snapshots"] == [] and
          os.listdir(os.path.join(d.dir, "named")) == [], os.listdir(os.path.join(d.dir, "named")))
    okv, det = expect_error(c, "DELETE", "/v1/snapshots/snap1", None, 404)
    check("a second delete: 404", okv, det)
    return c

def run(d, c):
    """The cases in order: uniqueness and snapshots start from the fork's source."""
    print("-- fork", flush=True)
    sid = test_fork(d, c)
    if sid:
        print("-- uniqueness", flush=True)
        test_unique(d, c, sid)
        print("-- named snapshots", flush=True)
        c = test_snapshots(d, c, sid)
        c.call("DELETE", f"/v1/sandboxes/{sid}")

def main():
    binary, root, _ = args()
    session(binary, root, run, ENV)
    return summary()

if __name__ == "__main__":
    sys.exit(main())
