#!/usr/bin/env python3
"""Device state transport for snapshots: `exec:cat > FILE` against
`getfd` + `fd:` (what the driver uses), on one unjailed QEMU microvm that
is never booted (-S, file-backed RAM, x-ignore-shared: only device state
moves, ~tens of KB, as in a real snapshot). exec: needs a shell, so this
QEMU runs without -sandbox spawn=deny; the jailed driver cannot use exec:
at all. Each run starts a fresh QEMU (a migrated source stays in
postmigrate), migrates, and times `migrate` to the MIGRATION "completed"
event (events capability); the two transports alternate run by run.

Usage: devstate_transport.py [-n RUNS]   prints a markdown table.
"""
import json, os, socket, statistics, subprocess, sys, tempfile, time, array

def qmp_open(path, deadline):
    while True:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)
    f = s.makefile("rw")
    f.readline()
    return s, f

def cmd(s, f, name, args=None, fd=None):
    msg = json.dumps({"execute": name, **({"arguments": args} if args else {})}) + "\n"
    if fd is None:
        f.write(msg); f.flush()
    else:
        s.sendmsg([msg.encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    while True:
        r = json.loads(f.readline())
        if "event" in r:
            continue
        if "error" in r:
            raise RuntimeError(f"{name}: {r['error']}")
        return r

def wait_event(f, status):
    while True:
        r = json.loads(f.readline())
        if r.get("event") == "MIGRATION" and r["data"]["status"] in (status, "failed"):
            return r["data"]["status"]

def one(tmp, transport):
    qsock = os.path.join(tmp, "q.sock")
    mem = os.path.join(tmp, "mem")
    out = os.path.join(tmp, "devstate")
    for p in (qsock, out):
        if os.path.exists(p):
            os.unlink(p)
    with open(mem, "wb") as m:
        m.truncate(256 << 20)
    argv = ["qemu-system-x86_64", "-M", "microvm,x-option-roms=off,pit=off,pic=off,isa-serial=on",
            "-accel", "tcg", "-smp", "2", "-m", "256", "-object",
            f"memory-backend-file,id=mem,size=256M,mem-path={mem},share=on",
            "-machine", "memory-backend=mem", "-S", "-nodefaults", "-no-user-config",
            "-display", "none", "-object", "rng-random,id=rng0,filename=/dev/urandom",
            "-device", "virtio-rng-device,rng=rng0", "-device", "virtio-serial-device",
            "-qmp", f"unix:{qsock},server=on,wait=off"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        s, f = qmp_open(qsock, time.monotonic() + 30)
        cmd(s, f, "qmp_capabilities")
        cmd(s, f, "migrate-set-capabilities", {"capabilities": [
            {"capability": "x-ignore-shared", "state": True},
            {"capability": "events", "state": True}]})
        cmd(s, f, "migrate-set-parameters", {"max-bandwidth": 1 << 40})
        t0 = time.monotonic()
        if transport == "exec":
            cmd(s, f, "migrate", {"uri": f"exec:cat > {out}"})
        else:
            fd = os.open(out, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            cmd(s, f, "getfd", {"fdname": "snap"}, fd=fd)
            os.close(fd)
            cmd(s, f, "migrate", {"uri": "fd:snap"})
        st = wait_event(f, "completed")
        ms = (time.monotonic() - t0) * 1000
        if st != "completed":
            print(transport, "failed:", cmd(s, f, "query-migrate"), file=sys.stderr)
        size = os.path.getsize(out) if os.path.exists(out) else 0
        cmd(s, f, "quit")
        return ms if st == "completed" else None, size
    finally:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

def main():
    n = int(sys.argv[sys.argv.index("-n") + 1]) if "-n" in sys.argv else 20
    res = {"exec": [], "fd": []}
    size = 0
    with tempfile.TemporaryDirectory(prefix="devstate-") as tmp:
        for i in range(n):
            for t in ("exec", "fd"):    # interleaved: same load for both
                ms, size = one(tmp, t)
                if ms is not None:
                    res[t].append(ms)
    print(f"| transport (device state {size} B) | median | p90 | runs |\n|---|---|---|---|")
    for t, label in (("exec", "`exec:cat > file` (sh + cat forked)"), ("fd", "`getfd` + `fd:`")):
        v = sorted(res[t])
        p90 = v[int((len(v) - 1) * 0.9 + 0.5)] if v else float("nan")
        print(f"| {label}: migrate to MIGRATION completed | {statistics.median(v):.2f} ms | {p90:.2f} ms | {len(v)} |")

main()
