#!/usr/bin/env python3
"""A sandbox's output against the host: the real daemon and a real microVM.

slow_reader  a client starts `yes` through exec and reads nothing: airlockd
             must not hold what the process writes (before the fix it grew
             ~12 MB/s per such stream, unbounded, in the root process); the
             agent holds the process instead, the stream still delivers when
             read, and the sandbox still answers. Budget off
             (stream_rate_per_sandbox = 0), so only back-pressure holds it.
budget       stream_rate_per_sandbox = 256 KiB/s: a `yes` followed by an
             exec stream and a reattach stream (they share the budget) gets
             no more than the budget (plus its one-second burst) and still
             progresses; the process stays controllable.

Usage: test_stream_pressure.py AIRLOCKD [DATA_ROOT]"""
import http.client, json, os, socket, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import Client, args, check, session, summary

RATE_KIB = 256
YES = ["sh", "-c", "yes airlock-stream-pressure"]

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0

def new_sandbox(c):
    return c.call("POST", "/v1/sandboxes", {"template": "base", "vcpus": 1,
                                            "memory_mb": 256})["id"]

def kill_yes(c, sid):
    for p in c.call("GET", f"/v1/sandboxes/{sid}/processes")["processes"]:
        if "yes" in " ".join(p.get("cmd") or []):
            c.call("POST", f"/v1/sandboxes/{sid}/processes/{p['pid']}/signal",
                   {"signal": "SIGKILL"})

def test_slow_reader(d, c):
    sid = new_sandbox(c)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", c.port))
    body = json.dumps({"cmd": YES}).encode()
    s.sendall(f"POST /v1/sandboxes/{sid}/exec HTTP/1.1\r\nHost: t\r\n"
              f"Authorization: Bearer {c.key}\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(2)       # the process runs and fills every buffer on the way
    before = rss_kib(d.proc.pid)
    time.sleep(10)
    grew = rss_kib(d.proc.pid) - before
    check("a client that reads nothing: airlockd holds none of the output",
          grew < 32 * 1024, f"airlockd RSS grew {grew} KiB in 10 s", show=True)
    s.settimeout(30)
    got = b""
    while len(got) < 1 << 20:
        b = s.recv(1 << 16)
        if not b:
            break
        got += b
    check("the held stream delivers once read", b"event: stdout" in got, got[:200])
    s.close()
    kill_yes(c, sid)
    code, _, out, _ = Client(c.port, c.key, timeout=120).exec(sid, ["echo", "alive"])
    check("the sandbox still answers", code == 0 and out == b"alive\n", (code, out))
    c.call("DELETE", f"/v1/sandboxes/{sid}")

def follow(c, path, body, counts, i, stop, started=None):
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=60)
    h = {"Authorization": "Bearer " + c.key}
    if body is not None:
        h["Content-Type"] = "application/json"
    conn.request("POST" if body is not None else "GET", path,
                 body=json.dumps(body).encode() if body is not None else None, headers=h)
    r = conn.getresponse()
    while not stop.is_set():
        line = r.readline()
        if not line:
            break
        counts[i] += len(line)
        if started is not None and line.startswith(b"data: ") and b'"pid"' in line:
            started(json.loads(line[6:]))
            started = None
    conn.close()

def test_budget(d, c):
    sid = new_sandbox(c)
    counts, stop, pid, ready = [0, 0], threading.Event(), [], threading.Event()
    def on_start(ev):
        pid.append(ev["pid"])
        ready.set()
    t0 = threading.Thread(target=follow, args=(c, f"/v1/sandboxes/{sid}/exec",
                                               {"cmd": YES}, counts, 0, stop, on_start))
    t0.start()
    check("the process started", ready.wait(60))
    t1 = threading.Thread(target=follow, args=(c, f"/v1/sandboxes/{sid}/processes/{pid[0]}"
                                               "/stream", None, counts, 1, stop))
    t1.start()
    time.sleep(2)
    n0, w0 = sum(counts), time.monotonic()
    time.sleep(8)
    n1, w1 = sum(counts), time.monotonic()
    stop.set()
    kill_yes(c, sid)
    t0.join(60)
    t1.join(60)
    rate = RATE_KIB * 1024
    got = (n1 - n0) / (w1 - w0)
    # The budget counts the agent's bytes, the client sees the SSE encoding
    # of the same output (about as long): 25% for that, and one burst.
    limit = 1.25 * (rate + rate / (w1 - w0))
    check(f"both streams together stay within the budget ({RATE_KIB} KiB/s)",
          got <= limit, f"{got / 1024:.0f} KiB/s, limit {limit / 1024:.0f}", show=True)
    check("both streams progress", counts[0] > 0 and counts[1] > 0 and got > rate / 4, counts)
    code, _, out, _ = Client(c.port, c.key, timeout=120).exec(sid, ["echo", "alive"])
    check("the sandbox still answers", code == 0 and out == b"alive\n", (code, out))
    c.call("DELETE", f"/v1/sandboxes/{sid}")

def main():
    binary, root, _ = args()
    env = {"AIRLOCK_GATEWAY_RESOLVER": "127.0.0.1:1"}
    print("-- slow_reader", flush=True)
    session(binary, root, test_slow_reader, dict(env, AIRLOCK_STREAM_RATE_PER_SANDBOX="0"))
    print("-- budget", flush=True)
    session(binary, root, test_budget, dict(env, AIRLOCK_STREAM_RATE_PER_SANDBOX=str(RATE_KIB)))
    return summary()

if __name__ == "__main__":
    sys.exit(main())
