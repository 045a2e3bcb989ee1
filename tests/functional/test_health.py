#!/usr/bin/env python3
"""Health and truth: what airlockd says about a sandbox whose guest turned
hostile, with the real daemon and real microVMs (TCG here).

Everything is done by root inside the guest, as an attacker would:
- wedge: ptrace the agent (PID 1 ignores SIGSTOP from inside its own
  namespace; PTRACE_INTERRUPT stops it all the same) for a while, then let
  go -> `unhealthy` with a reason within the probe deadline, exec answers
  503 at once naming it, `ls`, /metrics and the events show it; healthy
  again once the agent answers.
- halt: reboot(LINUX_REBOOT_CMD_HALT) -> vCPUs halted, QEMU still running,
  the agent gone -> unhealthy, then `failed` after the grace with the cause
  and the console tail.
- unbind: the agent's virtio port unbound from its driver (its channel
  closed under it) -> unhealthy, 503, `failed` after the grace.
- panic: bytes that are not UTF-8 written to the serial console, then
  sysrq-c -> `failed`; GET, ls and the events answer 200 with the cause and
  an escaped console tail (the old code answered 500).
- restart (a second daemon, on_unhealthy = restart): a suspended-then-resumed
  sandbox whose agent stays wedged is restarted from its snapshot: running
  and healthy again, what the guest did after the resume is gone.
- restartloop (a third daemon, on_unhealthy = restart, restart_max = 2): the
  snapshot itself holds a timer that wedges the agent, so every restart
  breaks again; the restarts back off (each waits twice the grace of the
  one before) and after two the sandbox is `failed`, the error naming
  restart_max and the agent (the old code restarted it forever).

Usage: test_health.py AIRLOCKD [DATA_ROOT] [--only wedge,halt,unbind,panic,restart,restartloop]"""
import calendar, concurrent.futures, json, os, re, socket, sys, time, traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, Client, args, check, run_cases, session, summary, wait_for

PROBE_S, TIMEOUT_S, GRACE_S = 1, 3, 20
# Detection: up to one interval, the ping deadline and a QMP query; TCG on a
# busy 2-core host answers slowly, so allow several rounds.
DETECT_S = 30

# ptrace(2) from inside the guest: PID 1 cannot be stopped by a signal sent
# from its own namespace, but PTRACE_SEIZE + PTRACE_INTERRUPT stop it.
WEDGE_PY = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
SEIZE, INTERRUPT, DETACH = 0x4206, 0x4207, 17
time.sleep(float(sys.argv[1]))
if libc.ptrace(SEIZE, 1, None, None) != 0:
    print("seize failed", ctypes.get_errno(), flush=True); sys.exit(1)
libc.ptrace(INTERRUPT, 1, None, None)
try:
    os.waitpid(1, 0x40000000)   # __WALL: the interrupt stop
except OSError as e:
    print("waitpid", e, flush=True)
print("wedged", time.time(), flush=True)
time.sleep(float(sys.argv[2]))
libc.ptrace(DETACH, 1, None, None)
print("released", time.time(), flush=True)
"""

PANIC_PY = r"""
import ctypes
ctypes.CDLL(None).prctl(15, b"\xff\xfe\x1b[31m\x80x", 0, 0, 0)   # PR_SET_NAME
with open("/proc/sysrq-trigger", "w") as f:
    f.write("c")
"""


def create(c):
    return c.call("POST", "/v1/sandboxes", {"template": "base", "vcpus": 1, "memory_mb": 256})["id"]

def get(c, sid):
    """GET the sandbox; any status (the old code answered 500 after a panic)."""
    st, ct, data = c.raw("GET", f"/v1/sandboxes/{sid}")
    try:
        return st, json.loads(data)
    except ValueError:
        return st, data


def health(c, sid):
    st, sb = get(c, sid)
    return (sb.get("health") or {}) if st == 200 and isinstance(sb, dict) else {}

def put_file(c, sid, path, data):
    st, _, body = c.raw("PUT", f"/v1/sandboxes/{sid}/files?path={path}", data,
                        {"Content-Type": "application/octet-stream"})
    if st != 201:
        raise RuntimeError(f"upload {path}: {st} {body!r}")

def background(c, sid, script):
    """Start a root shell script in the guest that outlives the exec."""
    code, _, out, err = c.exec(sid, ["sh", "-c", f"setsid nohup sh -c '{script}' "
                                    ">/tmp/bg.log 2>&1 </dev/null &"], user="root")
    if code != 0:
        raise RuntimeError(f"background start: {code} {out!r} {err!r}")

def exec_status(c, sid):
    """(HTTP status, message, seconds) of an exec attempt."""
    t0 = time.time()
    try:
        c.exec(sid, ["true"])
        return 200, "", time.time() - t0
    except ApiError as e:
        body = e.body
        if isinstance(body, bytes):
            try:
                body = json.loads(body)
            except ValueError:
                pass
        msg = body.get("error", {}).get("message", "") if isinstance(body, dict) else str(body)
        return e.status, msg, time.time() - t0

def events(c, path, secs=4):
    """Every event an SSE events stream replays (it stays open for live ones)."""
    out = []
    q = Client(c.port, c.key, timeout=secs)
    try:
        for ev, d in q.sse("GET", path):
            out.append((ev, d))
    except (socket.timeout, TimeoutError, OSError):
        pass
    return out

def listed(c, sid):
    ls = c.call("GET", "/v1/sandboxes?limit=1000")
    return next((s for s in ls["sandboxes"] if s["id"] == sid), None)

def test_wedge(c, sid, wedge_s=12):
    put_file(c, sid, "/tmp/wedge.py", WEDGE_PY.encode())
    check("wedge: healthy before", health(c, sid).get("status") == "healthy", health(c, sid))
    background(c, sid, f"python3 /tmp/wedge.py 1 {wedge_s}")
    t0 = time.time()
    h = wait_for(lambda: health(c, sid).get("status") == "unhealthy" and health(c, sid), DETECT_S)
    check("wedge: unhealthy within the probe deadline", bool(h), health(c, sid))
    if not h:
        return
    print(f"   unhealthy after {time.time() - t0:.1f} s: {h}", flush=True)
    check("wedge: the reason names the agent", "agent" in (h.get("reason") or ""), h)
    check("wedge: still running (a condition, not a state)", get(c, sid)[1]["state"] == "running")
    st, msg, secs = exec_status(c, sid)
    check("wedge: exec answers 503 naming the reason", st == 503 and "unhealthy" in msg and
          h["reason"][:20] in msg, (st, msg))
    check("wedge: ... at once", secs < 5, secs)
    st, _, _ = c.raw("GET", f"/v1/sandboxes/{sid}/files?path=/etc/hostname")
    check("wedge: files answer 503", st == 503, st)
    row = listed(c, sid)
    check("wedge: ls shows it unhealthy", row and row["health"]["status"] == "unhealthy", row)
    st, _, text = c.raw("GET", "/metrics", auth=False)
    # The other guests of this run may be unhealthy at the same moment.
    m = re.search(rb"^airlock_sandboxes_unhealthy (\d+)$", text, re.M)
    check("wedge: /metrics counts it", m is not None and int(m.group(1)) >= 1, text[-600:])
    h2 = wait_for(lambda: health(c, sid).get("status") == "healthy" and health(c, sid),
                  wedge_s + DETECT_S)
    check("wedge: healthy again once the agent answers", bool(h2), health(c, sid))
    code, _, out, _ = c.exec(sid, ["cat", "/tmp/bg.log"])
    check("wedge: exec works again", code == 0 and b"wedged" in out and b"released" in out,
          (code, out))
    evs = events(c, f"/v1/sandboxes/{sid}/events?after=0")
    types = [e for e, _ in evs]
    unh = [d for e, d in evs if e == "unhealthy"]
    check("wedge: events unhealthy then healthy", "unhealthy" in types and "healthy" in types
          and types.index("unhealthy") < max(i for i, t in enumerate(types) if t == "healthy"),
          types)
    check("wedge: the unhealthy event has the reason",
          unh and "agent" in (unh[0].get("data") or {}).get("reason", ""), unh)

def test_halt(c, sid):
    background(c, sid, "sleep 1; python3 -c \"import ctypes; ctypes.CDLL(None).reboot(ctypes.c_uint(0xCDEF0123))\"")
    h = wait_for(lambda: health(c, sid).get("status") == "unhealthy" and health(c, sid), DETECT_S)
    check("halt: unhealthy with a reason", bool(h) and h.get("reason"), health(c, sid))
    st, msg, secs = exec_status(c, sid)
    check("halt: exec answers 503 at once", st == 503 and secs < 5, (st, msg, secs))
    sb = wait_for(lambda: get(c, sid)[1].get("state") == "failed" and get(c, sid)[1],
                  GRACE_S + DETECT_S + 30)
    check("halt: failed after the grace", bool(sb), get(c, sid))
    if sb:
        err = sb.get("error") or ""
        check("halt: the cause names the grace and the agent",
              f"unhealthy for {GRACE_S} s" in err and "agent" in err, err[:300])
        check("halt: the console tail is there", "console tail:" in err and "halted" in err,
              err[-600:])

def test_unbind(c, sid):
    """Close the agent's channel from inside: unbind the virtio console driver
    from the device behind the agent's port. The agent never gets it back
    (it keeps its dead fd), so: unhealthy, then failed after the grace."""
    background(c, sid, "sleep 1; cd /sys/bus/virtio/drivers/virtio_console; "
                       "for d in virtio*; do echo $d > unbind; done")
    h = wait_for(lambda: health(c, sid).get("status") == "unhealthy" and health(c, sid), DETECT_S)
    check("unbind: unhealthy with a reason", bool(h) and "agent" in (h.get("reason") or ""),
          health(c, sid))
    st, msg, secs = exec_status(c, sid)
    check("unbind: exec answers 503 naming the reason", st == 503 and "unhealthy" in msg and
          secs < 5, (st, msg, secs))
    sb = wait_for(lambda: get(c, sid)[1].get("state") == "failed" and get(c, sid)[1],
                  GRACE_S + DETECT_S + 30)
    check("unbind: failed after the grace, naming the agent", bool(sb) and
          f"unhealthy for {GRACE_S} s" in (sb.get("error") or ""), get(c, sid))

def test_panic(c, sid):
    # Raw bytes on the serial console (invalid UTF-8, an ANSI escape, a lone
    # continuation byte), then the panic, from a process whose name is such
    # bytes too: the kernel prints it in the panic's last lines ("Comm: ...").
    put_file(c, sid, "/tmp/panic.py", PANIC_PY.encode())
    background(c, sid, "sleep 1; printf \"garbage \\377\\376\\303( \\033[31m \\200 end\\n\" "
                       "> /dev/ttyS0; python3 /tmp/panic.py")
    ok = wait_for(lambda: get(c, sid)[0] != 200 or get(c, sid)[1].get("state") == "failed",
                  DETECT_S + 30)
    st, sb = get(c, sid)
    check("panic: GET answers 200", st == 200, (st, sb))
    if st != 200:
        return
    check("panic: failed", sb.get("state") == "failed", sb.get("state"))
    err = sb.get("error") or ""
    check("panic: the cause says the kernel panicked", "panicked" in err, err[:300])
    check("panic: the console tail is escaped", "console tail:" in err and
          "garbage \\xff\\xfe\\xc3( \\x1b[31m \\x80 end" in err and
          "Comm: \\xff\\xfe\\x1b[31m\\x80x" in err, err[-800:])
    check("panic: the tail is bounded (a few KiB)", len(err) < 8192, len(err))
    row = listed(c, sid)
    check("panic: ls lists it as failed", row is not None and row["state"] == "failed", row)
    evs = events(c, f"/v1/sandboxes/{sid}/events?after=0")
    fail = [d for e, d in evs if e == "failed"]
    check("panic: the failed event carries the error",
          fail and "panicked" in (fail[-1].get("data") or {}).get("error", ""), fail)

def test_global_events(c, sids):
    evs = events(c, "/v1/events?after=0")
    seen = {(d.get("sandbox"), e) for e, d in evs}
    check("events: /v1/events has the unhealthy and failed ones",
          (sids["wedge"], "unhealthy") in seen and (sids["halt"], "failed") in seen and
          (sids["panic"], "failed") in seen, sorted(seen))

def test_restart(d2, c):
    sid = create(c)
    c.exec(sid, ["sh", "-c", "echo before > /tmp/marker"])
    sb = c.call("POST", f"/v1/sandboxes/{sid}/suspend")
    check("restart: suspended", sb["state"] == "suspended", sb)
    sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
    check("restart: resumed", sb["state"] == "running", sb)
    put_file(c, sid, "/tmp/wedge.py", WEDGE_PY.encode())
    c.exec(sid, ["sh", "-c", "echo after > /tmp/marker"])
    background(c, sid, "python3 /tmp/wedge.py 1 100000")
    h = wait_for(lambda: health(c, sid).get("status") == "unhealthy", DETECT_S)
    check("restart: unhealthy", bool(h), health(c, sid))
    evs = []
    def restarted():
        nonlocal evs
        evs = events(c, f"/v1/sandboxes/{sid}/events?after=0", secs=2)
        return any(e == "restart" for e, _ in evs)
    check("restart: a restart event after the grace", wait_for(restarted, 8 + DETECT_S + 60),
          [e for e, _ in evs])
    ok = wait_for(lambda: get(c, sid)[1].get("state") == "running" and
                  health(c, sid).get("status") == "healthy", 120)
    check("restart: running and healthy again", bool(ok), get(c, sid))
    code, _, out, _ = c.exec(sid, ["cat", "/tmp/marker"])
    check("restart: back at the snapshot (what came after the resume is gone)",
          code == 0 and out == b"before\n", (code, out))
    c.call("DELETE", f"/v1/sandboxes/{sid}")

def test_restartloop(c, grace_s):
    sid = create(c)
    put_file(c, sid, "/tmp/wedge.py", WEDGE_PY.encode())
    sb = c.call("POST", f"/v1/sandboxes/{sid}/suspend")
    check("restartloop: suspended", sb["state"] == "suspended", sb)
    sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
    check("restartloop: resumed", sb["state"] == "running", sb)
    # Suspend again with the wedge pending: the snapshot the restarts come
    # back to holds the timer, so every restart wedges again.
    background(c, sid, "python3 /tmp/wedge.py 6 100000")
    c.call("POST", f"/v1/sandboxes/{sid}/suspend")
    sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
    check("restartloop: resumed with the wedge pending", sb["state"] == "running", sb)
    t0 = time.time()
    # Two restarts (grace, then 2 x grace) and the third unhealthy spell
    # (grace again): each after detection and a resume.
    budget = grace_s * 4 + 3 * (DETECT_S + 60)
    sb = wait_for(lambda: get(c, sid)[1].get("state") == "failed" and get(c, sid)[1], budget)
    evs = events(c, f"/v1/sandboxes/{sid}/events?after=0", secs=2)
    at = lambda d: calendar.timegm(time.strptime(d["at"][:19], "%Y-%m-%dT%H:%M:%S")) + \
        float("0" + d["at"][19:].rstrip("Z"))
    restarts = [at(d) for e, d in evs if e == "restart"]
    unh = [at(d) for e, d in evs if e == "unhealthy"]
    print(f"   restartloop: {len(restarts)} restart(s), failed={bool(sb)} after "
          f"{time.time() - t0:.0f} s", flush=True)
    check("restartloop: failed after restart_max restarts", bool(sb), get(c, sid)[1])
    check("restartloop: exactly two restarts", len(restarts) == 2, [e for e, _ in evs])
    if sb:
        err = sb.get("error") or ""
        check("restartloop: the error names restart_max and the agent",
              "restart_max" in err and "restarted 2 times" in err and "agent" in err, err[:400])
    if len(restarts) == 2 and len(unh) >= 2:
        # Each restart follows its own unhealthy spell; the second waited longer.
        waits = [r - max(u for u in unh if u <= r) for r in restarts]
        print(f"   restartloop: unhealthy -> restart waits {waits} s", flush=True)
        check("restartloop: the second restart waited about twice the grace",
              waits[1] >= 2 * grace_s - 2 and waits[1] > waits[0], waits)
    c.call("DELETE", f"/v1/sandboxes/{sid}")

def test_guests(d, c, want):
    """Four guests misbehave at the same time, each on its own thread."""
    names = [n for n in ("wedge", "halt", "unbind", "panic") if want(n)]
    if not names:
        return
    with concurrent.futures.ThreadPoolExecutor(len(names)) as ex:
        sids = dict(zip(names, ex.map(lambda n: create(c), names)))
    fns = {"wedge": test_wedge, "halt": test_halt, "unbind": test_unbind,
           "panic": test_panic}
    with concurrent.futures.ThreadPoolExecutor(len(names)) as ex:
        futs = {n: ex.submit(fns[n], c, sids[n]) for n in names}
        for n, f in futs.items():
            try:
                f.result()
            except Exception as e:
                traceback.print_exc()
                check(f"{n} raised no exception", False, repr(e))
    if {"wedge", "halt", "panic"} <= set(names):
        test_global_events(c, sids)
    for sid in sids.values():
        c.call("DELETE", f"/v1/sandboxes/{sid}")

def main():
    binary, root, only = args()
    want = lambda s: only is None or s in only
    env = {"AIRLOCK_HEALTH_INTERVAL_S": str(PROBE_S), "AIRLOCK_HEALTH_TIMEOUT_S": str(TIMEOUT_S),
           "AIRLOCK_UNHEALTHY_GRACE_S": str(GRACE_S), "AIRLOCK_ON_UNHEALTHY": "fail"}
    session(binary, root, lambda d, c: test_guests(d, c, want), env)
    # Each policy its own daemon, in a fresh dir (the one before is gone).
    if want("restart"):
        session(binary, root, lambda d, c: run_cases((("restart", test_restart),), d, c),
                dict(env, AIRLOCK_UNHEALTHY_GRACE_S="8", AIRLOCK_ON_UNHEALTHY="restart"),
                label="airlockd (restart policy)")
    if want("restartloop"):
        grace = 6
        session(binary, root,
                lambda d, c: run_cases((("restartloop", lambda d, c: test_restartloop(c, grace)),),
                                       d, c),
                dict(env, AIRLOCK_UNHEALTHY_GRACE_S=str(grace), AIRLOCK_ON_UNHEALTHY="restart",
                     AIRLOCK_RESTART_MAX="2", AIRLOCK_RESTART_WINDOW_S="600"),
                label="airlockd (restart loop)")
    return summary()

if __name__ == "__main__":
    sys.exit(main())
