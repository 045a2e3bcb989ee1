#!/usr/bin/env python3
"""The privilege split of direct mode (issue 16 item 1): no root process
reads client bytes. The API port is held by the front alone, an
unprivileged process (its own uid, no new privileges, seccomp on) that has
no data dir, /dev/kvm or key open; the worker's unix socket answers the
front's uid only (root and another uid are shut out); a front killed with
SIGKILL is started again on the same port; streams pass through it as they
happen (an exec's first output before the command ends) and large bodies
pass with the front's memory bounded.

Usage: test_front.py AIRLOCKD [DATA_ROOT]"""
import json, os, socket, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, main, wait_for

FRONT_UID = 399998

def listeners(port):
    """pids holding a listening TCP socket on port (ss -ltnp)."""
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True,
                         text=True).stdout
    pids = set()
    for part in out.split("pid=")[1:]:
        pids.add(int(part.split(",")[0]))
    return pids

def status(pid):
    f = {}
    with open(f"/proc/{pid}/status") as s:
        for line in s:
            k, _, v = line.partition(":")
            f[k] = v.split()
    return f

def fd_targets(pid, first=0):
    """What pid's descriptors from first on point at (0-2: its inherited stdio, the log)."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        if int(fd) < first:
            continue
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out

def front_pid(d):
    pids = listeners(d.port)
    return next(iter(pids)) if len(pids) == 1 else None

def test_who_listens(d, c):
    pids = listeners(d.port)
    check("exactly one process listens on the API port", len(pids) == 1, pids)
    pid = next(iter(pids), None)
    if pid is None:
        return
    st = status(pid)
    uids = [int(x) for x in st["Uid"]]
    check("it is not root: real, effective, saved and fs uid are the front's",
          uids == [FRONT_UID] * 4, st["Uid"])
    check("... and so are its gids", [int(x) for x in st["Gid"]] == [FRONT_UID] * 4, st["Gid"])
    check("no supplementary group but its own",
          [int(x) for x in st.get("Groups", [])] in ([], [FRONT_UID]), st.get("Groups"))
    check("no capabilities", int(st["CapEff"][0], 16) == 0 and int(st["CapPrm"][0], 16) == 0,
          (st["CapEff"], st["CapPrm"]))
    check("no new privileges", st["NoNewPrivs"] == ["1"], st["NoNewPrivs"])
    check("seccomp filter on", st["Seccomp"] == ["2"], st["Seccomp"])
    cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    check("it is airlockd --role api", b"--role" in cmd and b"api" in cmd, cmd)
    check("airlockd (the worker, root) is its parent",
          int(status(pid)["PPid"][0]) == d.proc.pid, status(pid)["PPid"])
    fds = fd_targets(pid, 3)
    bad = [t for t in fds if t.startswith(d.dir) or "kvm" in t or t.endswith(".key")]
    check("the front holds nothing of the data dir, /dev/kvm or a key", not bad, bad)
    root = [p for p in listeners(d.port) if int(status(p)["Uid"][1]) == 0]
    check("no root process listens on the API port", not root, root)

def as_uid(uid, path):
    """Connect to the unix socket at path as uid and send a request; what came back."""
    code = ("import os,socket,sys\n"
            f"os.setgroups([]); os.setresgid({uid},{uid},{uid}); os.setresuid({uid},{uid},{uid})\n"
            "s=socket.socket(socket.AF_UNIX); s.settimeout(10)\n"
            "try:\n s.connect(sys.argv[1])\nexcept OSError as e:\n print('CONNECT', e.errno); sys.exit()\n"
            "s.sendall(b'GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
            "try:\n print(repr(s.recv(4096)))\nexcept OSError as e:\n print('RECV', e.errno)\n")
    return subprocess.run([sys.executable, "-c", code, path], capture_output=True,
                          text=True, timeout=30).stdout.strip()

def test_worker_socket(d, c):
    path = os.path.join(d.dir, "run", "front.sock")
    st = os.stat(path)
    check("the worker's socket is root's, group the front's, mode 0660",
          st.st_uid == 0 and st.st_gid == FRONT_UID and (st.st_mode & 0o777) == 0o660,
          (st.st_uid, st.st_gid, oct(st.st_mode)))
    other = as_uid(12345, path)
    check("another uid cannot even connect", other.startswith("CONNECT"), other)
    # Root may connect (the file mode does not stop it) but is shut out by the peer check.
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        got = s.recv(4096)
    except OSError as e:
        got = f"error {e.errno}".encode()
    s.close()
    check("root is refused by the worker (only the front's uid is served)",
          b"200" not in got, got)
    mine = as_uid(FRONT_UID, path)
    check("the front's uid is served", "200 OK" in mine, mine)
    log = d.logtail(20000)
    check("the refusals are logged with the peer's uid", "refused a peer of uid 0" in log,
          log[-2000:])

def test_front_restart(d, c):
    pid = front_pid(d)
    os.kill(pid, 9)
    back = wait_for(lambda: front_pid(d) not in (None, pid) and
                    c.raw("GET", "/healthz")[0] == 200, 30, 0.2)
    check("a killed front is started again on the same port and serves", back,
          listeners(d.port))
    check("the worker logged why", "front: pid %d killed by signal 9" % pid in d.logtail(20000))

def test_streams(d, c):
    sb = c.call("POST", "/v1/sandboxes", {})
    sid = sb["id"]
    try:
        t0 = time.time()
        first = None
        for ev in c.sse("POST", f"/v1/sandboxes/{sid}/exec",
                        {"cmd": ["sh", "-c", "echo first; sleep 3; echo last"]}):
            if first is None and ev[0] == "stdout":
                first = time.time() - t0
        total = time.time() - t0
        check("an exec's first output passes the front before the command ends",
              first is not None and first < total - 2, (first, total))
        pid = front_pid(d)
        rss0 = int(status(pid)["VmRSS"][0])
        blob = os.urandom(1 << 20) * 64
        st = c.raw("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/blob", blob,
                   {"Content-Type": "application/octet-stream"})[0]
        check("a 64 MiB upload passes", st in (200, 201, 204), st)
        st, _, got = c.raw("GET", f"/v1/sandboxes/{sid}/files?path=/tmp/blob")
        check("... and comes back byte for byte", st == 200 and got == blob,
              (st, len(got)))
        rss1 = int(status(pid)["VmRSS"][0])
        check("the front's memory stays bounded (< 32 MiB more for 2 x 64 MiB)",
              rss1 - rss0 < 32 * 1024, (rss0, rss1))
    finally:
        c.call("DELETE", f"/v1/sandboxes/{sid}")

# ASan keeps freed memory in quarantine (256 MiB by default): keep it small so
# the front's resident size shows what it holds, not what it freed.
ASAN = (os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=4").lstrip(":")

if __name__ == "__main__":
    sys.exit(main([("who listens", test_who_listens),
                   ("worker socket", test_worker_socket),
                   ("front restart", test_front_restart),
                   ("streams", test_streams)], env={"ASAN_OPTIONS": ASAN}))
