#!/usr/bin/env python3
"""Noisy neighbours: one sandbox attacks from root inside (and through the
API) while a second, the victim, is measured; real daemon, real microVMs
(TCG here), real gateway (its resolver points nowhere: nothing leaves the
host, no test internet).

For each attack the victim's exec round trip (`true` through the API) and
the API's own latency (GET /v1/sandboxes/{victim}) are sampled in baseline
rounds interleaved with attack rounds (B A B A B), so a machine loaded by
something else loads both alike. The bound is the issue's: p99 during the
attack <= 3 x the interleaved baseline p99 + 50 ms, for the victim's exec
and for the API. A ratio, not a wall-clock limit.

Attacks:
  execs    200 clients hammering exec in the attacker at once: at most
           max_execs_per_sandbox (64) run, the rest get 429 naming the
           limit, nothing else fails, the attacker stays controllable
  streams  200 clients following the output of a `yes` in the attacker
           (reattach streams): at most max_streams_per_sandbox, 429 for the rest
  cpu      a busy loop on every vCPU of the attacker (its cgroup caps it at
           its vCPUs' worth; throttling is read from cpu.stat, not clocks)
  console  /dev/console, /dev/kmsg and the UART written as fast as the guest can
  flood    UDP to many ports and TCP SYNs at the island gateway 10.0.0.1

The numbers go to the log (one JSON line per attack, "noisy: {...}").

Usage: test_noisy.py AIRLOCKD [DATA_ROOT] [--only execs,streams,cpu,console,flood]
       [--samples N]"""
import concurrent.futures, http.client, json, multiprocessing, os, sys, threading
import time, traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, Client, check, session, summary

N_CLIENTS = 200


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))] if xs else float("nan")

def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])

def error_code(e):
    body = e.body
    if isinstance(body, bytes):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    return (body.get("error") or {}).get("code") if isinstance(body, dict) else None

class Tally:
    """What the attacker's API calls got: ok, 429 (with its code), anything else."""
    def __init__(self):
        self.lock, self.ok, self.refused, self.other = threading.Lock(), 0, {}, []

    def add(self, kind, detail=None):
        with self.lock:
            if kind == "ok":
                self.ok += 1
            elif kind == 429:
                self.refused[detail] = self.refused.get(detail, 0) + 1
            else:
                self.other.append(repr(detail)[:200])

    def summary(self):
        return {"ok": self.ok, "429": dict(self.refused), "other": len(self.other),
                "other_first": self.other[:3]}

def sh(c, sid, script, user="root"):
    code, _, out, err = c.exec(sid, ["sh", "-c", script], user=user)
    return code, out.decode(errors="replace"), err.decode(errors="replace")

# --- attacks ---------------------------------------------------------------

class Attack:
    name = "?"
    def __init__(self, d, c, sid):
        self.d, self.c, self.sid, self.stop_ev = d, c, sid, threading.Event()
        self.tally, self.threads = Tally(), []

    def spawn(self, n, fn):
        for i in range(n):
            t = threading.Thread(target=fn, args=(i,), daemon=True)
            t.start()
            self.threads.append(t)

    def start(self):
        pass

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=120)
        self.threads = []
        self.stop_ev = threading.Event()

    def extra(self):
        return {}

class ClientAttack(Attack):
    """An attack made of API clients (threads): they run in a child process,
    so their Python lock never delays the measuring client in this one."""
    def start(self):
        self.q, self.go_stop = multiprocessing.Queue(), multiprocessing.Event()
        self.child = multiprocessing.Process(target=self.child_main, daemon=True)
        self.child.start()

    def child_main(self):
        self.clients()
        self.go_stop.wait()
        self.end_clients()
        self.q.put(self.tally.summary())

    def end_clients(self):
        Attack.stop(self)

    def stop(self):
        self.go_stop.set()
        try:
            got = self.q.get(timeout=180)
        except Exception:
            got = {"ok": 0, "429": {}, "other": 1, "other_first": ["attack child gave no tally"]}
        self.child.join(timeout=30)
        with self.tally.lock:
            self.tally.ok += got["ok"]
            for k, v in got["429"].items():
                self.tally.refused[k] = self.tally.refused.get(k, 0) + v
            self.tally.other += got["other_first"] + \
                ["(more)"] * (got["other"] - len(got["other_first"]))

class ExecFlood(ClientAttack):
    """200 clients, each running short commands back to back."""
    name = "execs"
    def client(self, i):
        cl = Client(self.c.port, self.c.key, timeout=120)
        while not self.stop_ev.is_set():
            try:
                code, _, out, _ = cl.exec(self.sid, ["sh", "-c", "echo x; sleep 0.5"])
                self.tally.add("ok" if code == 0 and out == b"x\n" else "bad",
                               (code, out[:40]))
            except ApiError as e:
                self.tally.add(429 if e.status == 429 else "bad",
                               error_code(e) if e.status == 429 else (e.status, str(e.body)[:120]))
                self.stop_ev.wait(0.5)
            except Exception as e:
                self.tally.add("bad", repr(e)[:120])
                self.stop_ev.wait(0.5)

    def clients(self):
        self.spawn(N_CLIENTS, self.client)

class StreamFlood(ClientAttack):
    """200 clients following one process that writes as fast as it can."""
    name = "streams"
    def clients(self):
        self.pid = None
        ready = threading.Event()
        def producer():
            cl = Client(self.c.port, self.c.key, timeout=600)
            try:
                for ev, dd in cl.sse("POST", f"/v1/sandboxes/{self.sid}/exec",
                                     {"cmd": ["sh", "-c", "yes airlock-noisy-neighbour"],
                                      "user": "root"}):
                    if ev == "start":
                        self.pid = dd["pid"]
                        ready.set()
                    if self.stop_ev.is_set():
                        break
            except Exception as e:
                self.tally.add("bad", "producer: " + repr(e)[:120])
            ready.set()
        t = threading.Thread(target=producer, daemon=True)
        t.start()
        self.threads.append(t)
        ready.wait(60)
        self.spawn(N_CLIENTS - 1, self.client)

    def client(self, i):
        while not self.stop_ev.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", self.c.port, timeout=60)
            try:
                conn.request("GET", f"/v1/sandboxes/{self.sid}/processes/{self.pid}/stream",
                             headers={"Authorization": "Bearer " + self.c.key})
                r = conn.getresponse()
                if r.status != 200:
                    body = r.read()
                    code = None
                    try:
                        code = json.loads(body)["error"]["code"]
                    except (ValueError, KeyError, TypeError):
                        pass
                    self.tally.add(429 if r.status == 429 else "bad",
                                   code if r.status == 429 else (r.status, body[:120]))
                    self.stop_ev.wait(1.0)
                    continue
                self.tally.add("ok")
                # Discard as fast as possible: the client's own CPU is not the point.
                while not self.stop_ev.is_set() and r.read1(1 << 16):
                    pass
            except Exception as e:
                if not self.stop_ev.is_set():
                    self.tally.add("bad", repr(e)[:120])
                    self.stop_ev.wait(1.0)
            finally:
                conn.close()

    def end_clients(self):
        Attack.stop(self)
        if self.pid:
            try:
                self.c.call("POST", f"/v1/sandboxes/{self.sid}/processes/{self.pid}/signal",
                            {"signal": "SIGKILL"})
            except ApiError:
                pass

def cgroup_cpu_dir(sid):
    for d in (f"/sys/fs/cgroup/cpu/airlock/{sid}", f"/sys/fs/cgroup/cpu,cpuacct/airlock/{sid}"):
        if os.path.isdir(d):
            return d
    base = "/sys/fs/cgroup"
    for dirpath, dirs, _ in os.walk(base):
        if os.path.basename(dirpath) == sid and os.path.basename(os.path.dirname(dirpath)) == "airlock":
            return dirpath
        if dirpath.count("/") > 8:
            dirs[:] = []
    return None

def cpu_stat(d):
    out = {}
    try:
        with open(os.path.join(d, "cpu.stat")) as f:
            for line in f:
                k, v = line.split()
                out[k] = int(v)
    except OSError:
        pass
    return out

def cgroup_cpu_seconds(d):
    """CPU time of the processes in a cgroup (the sandbox's QEMU), seconds."""
    try:
        with open(os.path.join(d, "cgroup.procs")) as f:
            return sum(cpu_seconds(int(p)) for p in f.read().split())
    except (OSError, ValueError):
        return 0.0

class CpuHog(Attack):
    name = "cpu"
    def start(self):
        self.dir = cgroup_cpu_dir(self.sid)
        self.before = cpu_stat(self.dir) if self.dir else {}
        self.cpu0, self.t0 = cgroup_cpu_seconds(self.dir) if self.dir else 0, time.monotonic()
        code, out, err = sh(self.c, self.sid,
                            "for i in $(seq $(nproc)); do setsid nohup sh -c 'while :; do :; done' "
                            ">/dev/null 2>&1 </dev/null & done; echo started")
        if code != 0:
            self.tally.add("bad", ("hog start", code, out, err))

    def stop(self):
        self.after = cpu_stat(self.dir) if self.dir else {}
        self.used = getattr(self, "used", 0.0) + \
            (cgroup_cpu_seconds(self.dir) if self.dir else 0) - self.cpu0
        self.wall = getattr(self, "wall", 0.0) + time.monotonic() - self.t0
        try:
            sh(self.c, self.sid, "pkill -f 'while :; do :; done'; true")
        except Exception as e:
            self.tally.add("bad", "hog stop: " + repr(e)[:120])
        super().stop()

    def extra(self):
        b, a = getattr(self, "before", {}), getattr(self, "after", {})
        try:
            with open(os.path.join(self.dir, "cpu.cfs_quota_us")) as f:
                quota = int(f.read()) / 100000      # cores (period 100 ms)
        except (OSError, ValueError, TypeError):
            try:
                with open(os.path.join(self.dir, "cpu.max")) as f:
                    q, per = f.read().split()
                    quota = int(q) / int(per)
            except (OSError, ValueError, TypeError):
                quota = 0
        return {"cgroup": self.dir, "quota_cores": quota,
                "qemu_cores_used": round(getattr(self, "used", 0) / max(getattr(self, "wall", 0), 1e-9), 3),
                "nr_periods": a.get("nr_periods", 0) - b.get("nr_periods", 0),
                "nr_throttled": a.get("nr_throttled", 0) - b.get("nr_throttled", 0),
                "throttled_ms": (a.get("throttled_time", a.get("throttled_usec", 0) * 1000) -
                                 b.get("throttled_time", b.get("throttled_usec", 0) * 1000)) / 1e6}

class ConsoleFlood(Attack):
    name = "console"
    SCRIPT = ("for dev in /dev/console /dev/kmsg /dev/ttyS0; do setsid nohup sh -c "
              "\"while :; do head -c 4096 /dev/urandom | base64 -w 200 > $dev; done\" "
              ">/dev/null 2>&1 </dev/null & done; echo started")
    def start(self):
        code, out, err = sh(self.c, self.sid, self.SCRIPT)
        if code != 0:
            self.tally.add("bad", ("flood start", code, out, err))

    def stop(self):
        try:
            sh(self.c, self.sid, "pkill -f 'head -c 4096 /dev/urandom'; true")
        except Exception as e:
            self.tally.add("bad", "console stop: " + repr(e)[:120])
        super().stop()

FLOOD_PY = r"""
import os, random, socket, sys, time
end = time.time() + float(sys.argv[1])
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.setblocking(False)
payload = os.urandom(512)
n = s = 0
while time.time() < end:
    for _ in range(64):
        try:
            udp.sendto(payload, ("10.0.0.1", random.choice([53, random.randint(1, 65535)])))
            n += 1
        except OSError:
            pass
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setblocking(False)
    try:
        t.connect_ex(("10.0.0.1", random.randint(1, 65535)))
        s += 1
    except OSError:
        pass
    t.close()
print(n, s)
"""

class NetFlood(Attack):
    name = "flood"
    def start(self):
        st, _, body = self.c.raw("PUT", f"/v1/sandboxes/{self.sid}/files?path=/tmp/flood.py",
                                 FLOOD_PY.encode(), {"Content-Type": "application/octet-stream"})
        if st != 201:
            self.tally.add("bad", ("upload", st, body[:100]))
        sh(self.c, self.sid, "for i in 1 2; do setsid nohup python3 /tmp/flood.py 3600 "
                             ">>/tmp/flood.log 2>&1 </dev/null & done; echo started")

    def stop(self):
        try:
            sh(self.c, self.sid, "pkill -f /tmp/flood.py; true")
        except Exception as e:
            self.tally.add("bad", "flood stop: " + repr(e)[:120])
        super().stop()

ATTACKS = {a.name: a for a in (ExecFlood, StreamFlood, CpuHog, ConsoleFlood, NetFlood)}

# --- measurement -----------------------------------------------------------

def sample_round(c, victim, n, warm_s=0):
    """n victim execs and n API GETs, interleaved; seconds each."""
    if warm_s:
        time.sleep(warm_s)
    ex, api = [], []
    cl = Client(c.port, c.key, timeout=120)
    for _ in range(n):
        t0 = time.monotonic()
        try:
            code, _, _, _ = cl.exec(victim, ["true"])
            ok = code == 0
        except Exception as e:
            ok = False
            print("   victim exec failed:", repr(e)[:200], flush=True)
        ex.append(time.monotonic() - t0 if ok else float("inf"))
        t0 = time.monotonic()
        st, _, _ = cl.raw("GET", f"/v1/sandboxes/{victim}")
        api.append(time.monotonic() - t0 if st == 200 else float("inf"))
    return ex, api

def controllable(c, sid):
    """The attacker answers: get, an exec, healthy."""
    try:
        sb = c.call("GET", f"/v1/sandboxes/{sid}")
        code, _, out, _ = Client(c.port, c.key, timeout=120).exec(sid, ["echo", "alive"])
        return sb["state"] == "running" and (sb.get("health") or {}).get("status") == "healthy" \
            and code == 0 and out == b"alive\n", sb.get("health")
    except Exception as e:
        return False, repr(e)[:200]

def cpu_seconds(pid):
    """utime + stime of a process (all its threads), seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0

def run_delay(pid):
    """Seconds the process's threads spent runnable but waiting for a CPU (schedstat)."""
    total = 0.0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        pass
    return total

def run_attack(d, c, victim, attacker, name, samples):
    atk = ATTACKS[name](d, c, attacker)
    base_ex, base_api, att_ex, att_api = [], [], [], []
    # airlockd: CPU seconds, wall seconds, seconds waiting for a CPU
    cpu = {"baseline": [0.0, 0.0, 0.0], "attack": [0.0, 0.0, 0.0]}
    load0 = loadavg()
    for rnd in range(5):
        kind = "baseline" if rnd % 2 == 0 else "attack"
        if kind == "attack":
            atk.start()
            time.sleep(3)
        c0, t0, w0 = cpu_seconds(d.proc.pid), time.monotonic(), run_delay(d.proc.pid)
        try:
            ex, api = sample_round(c, victim, samples)
        finally:
            cpu[kind][0] += cpu_seconds(d.proc.pid) - c0
            cpu[kind][1] += time.monotonic() - t0
            cpu[kind][2] += run_delay(d.proc.pid) - w0
            if kind == "attack":
                atk.stop()
        if kind == "baseline":
            base_ex += ex
            base_api += api
        else:
            att_ex += ex
            att_api += api
            time.sleep(2)   # let the attacker settle before the next baseline
    ms = lambda x: round(x * 1000, 1)
    res = {"attack": name, "samples": samples, "load_before": load0, "load_after": loadavg(),
           "victim_exec_p99_ms": {"baseline": ms(p99(base_ex)), "attack": ms(p99(att_ex))},
           "victim_exec_p50_ms": {"baseline": ms(sorted(base_ex)[len(base_ex) // 2]),
                                  "attack": ms(sorted(att_ex)[len(att_ex) // 2])},
           "api_p99_ms": {"baseline": ms(p99(base_api)), "attack": ms(p99(att_api))},
           "airlockd_cpu_pct": {k: round(100 * v[0] / max(v[1], 1e-9), 1)
                                for k, v in cpu.items()},
           # Waiting for a CPU while runnable, per second of the rounds: a host
           # (or attack client) starving the daemon, not work the daemon does.
           "airlockd_runq_wait_ms_per_s": {k: round(1000 * v[2] / max(v[1], 1e-9), 1)
                                           for k, v in cpu.items()},
           "attacker_calls": atk.tally.summary()}
    res.update(atk.extra())
    print("noisy: " + json.dumps(res), flush=True)
    for what, base, att in (("victim exec", base_ex, att_ex), ("API", base_api, att_api)):
        bound = 3 * p99(base) + 0.050
        check(f"{name}: {what} p99 {ms(p99(att))} ms <= 3 x {ms(p99(base))} + 50 ms",
              p99(att) <= bound, f"bound {ms(bound)} ms")
    tally = atk.tally.summary()
    check(f"{name}: the attacker's calls got only answers or a 429 naming the limit",
          tally["other"] == 0 and all(k in ("too_many_execs", "too_many_streams")
                                      for k in tally["429"]), tally)
    if name in ("execs", "streams"):
        check(f"{name}: the excess was refused with 429 (at most the cap ran)",
              sum(tally["429"].values()) > 0 and tally["ok"] > 0, tally)
    if name == "cpu":
        # The cap can only bite when the host gave the hog its quota: on a
        # host loaded by others the QEMU may get less than its limit anyway.
        got = res["qemu_cores_used"] / res["quota_cores"] if res.get("quota_cores") else 0
        check("cpu: the attacker's QEMU never ran above its cgroup limit",
              res["qemu_cores_used"] <= res.get("quota_cores", 0) * 1.05 + 0.02, res)
        if got >= 0.8:
            check("cpu: the attacker's QEMU was throttled at its cgroup limit (cpu.stat)",
                  res.get("nr_throttled", 0) > 0, res)
        else:
            print(f"   cpu: throttling not checked: the hog got {got:.0%} of its quota "
                  f"(host load {loadavg()}), the kernel had no reason to throttle it", flush=True)
    ok, why = controllable(c, attacker)
    check(f"{name}: the attacker stays controllable (running, healthy, exec works)", ok, why)
    return res

def main():
    args = [a for i, a in enumerate(sys.argv) if not a.startswith("--") and
            not sys.argv[i - 1].startswith("--")]
    binary = args[1]
    root = args[2] if len(args) > 2 else os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    opt = lambda k, dflt: sys.argv[sys.argv.index(k) + 1] if k in sys.argv else dflt
    names = opt("--only", ",".join(ATTACKS)).split(",")
    samples = int(opt("--samples", "40"))
    env = {"AIRLOCK_GATEWAY_RESOLVER": "127.0.0.1:1"}	# nothing leaves the host
    gwbin = os.path.join(os.path.dirname(os.path.dirname(binary)), "gateway", "airlock-gateway")
    if "flood" in names and not os.access(gwbin, os.X_OK):
        names.remove("flood")
        print("flood: skipped, airlock-gateway not built", flush=True)

    def body(d, c):
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            fv = ex.submit(c.call, "POST", "/v1/sandboxes",
                           {"template": "base", "vcpus": 1, "memory_mb": 256})
            fa = ex.submit(c.call, "POST", "/v1/sandboxes",
                           {"template": "base", "vcpus": 1, "memory_mb": 256,
                            "network": {"mode": "allowlist", "allow": ["example.invalid"]}})
            victim, attacker = fv.result()["id"], fa.result()["id"]
        print(f"victim {victim}, attacker {attacker}, load {loadavg()}", flush=True)
        for n in names:
            try:
                run_attack(d, c, victim, attacker, n, samples)
            except Exception as e:
                traceback.print_exc()
                check(f"{n} raised no exception", False, repr(e))
        for sid in (victim, attacker):
            c.call("DELETE", f"/v1/sandboxes/{sid}")

    session(binary, root, body, env)
    return summary()

if __name__ == "__main__":
    sys.exit(main())
