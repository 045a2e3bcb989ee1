"""What the daemon tests (tests/functional, tests/security, tests/e2b,
bench/) share: a client for the airlock REST API (JSON calls, SSE streams,
exec), airlockd under test with its own data dir and port, the host objects
a sandbox may leave behind, and the one check/report and main of a test:

    import daemon_client as dc
    def test_thing(d, c): ... dc.check("what must hold", cond, detail)
    if __name__ == "__main__":
        sys.exit(dc.main([("thing", test_thing)], env={...}))

main() starts airlockd (its own data dir under the data root, port 0, the
admin key), runs each case fn(d, c) (a case that restarts the daemon returns
the new Client), stops it gracefully, checks its log for sanitizer reports,
removes everything it made and prints "N passed, N failed"; the exit status
is 1 when any check failed."""
import base64, http.client, json, os, re, signal, subprocess, sys, time, traceback

passed = 0
failures = []

def check(name, cond, detail="", show=False):
    """Count and print one check ("ok: NAME" or "FAIL: NAME (DETAIL)"; show:
    the detail also when it passed, what was observed); returns cond."""
    global passed
    shown = f" ({detail})" if detail != "" and (show or not cond) else ""
    print(("ok: " if cond else "FAIL: ") + name + shown, flush=True)
    if cond:
        passed += 1
    else:
        failures.append(name)
    return cond

def summary():
    """The last line of every test, "N passed, N failed"; the exit status."""
    print(f"{passed} passed, {len(failures)} failed", flush=True)
    return 1 if failures else 0

def wait_for(pred, secs=30, step=0.2):
    """pred()'s first true value within secs, else its last value."""
    end = time.time() + secs
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()

def procs():
    """(pid, /proc/PID/status text, argv as bytes) of every process still there."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            status = open(f"/proc/{p}/status").read()
            args = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        yield int(p), status, args

class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body

def refused(fn):
    """The ApiError fn() raised, or None when it succeeded."""
    try:
        fn()
    except ApiError as e:
        return e
    return None

class Client:
    def __init__(self, port, key, timeout=600):
        self.port, self.key, self.timeout = port, key, timeout

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)

    def raw(self, method, path, body=None, headers=None, auth=True):
        h = dict(headers or {})
        if auth and self.key:
            h["Authorization"] = "Bearer " + self.key
        c = self.conn()
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, r.getheader("Content-Type") or "", data

    def call(self, method, path, obj=None, expect=(200, 201, 204)):
        body = None if obj is None else json.dumps(obj).encode()
        hdr = {"Content-Type": "application/json"} if body is not None else {}
        st, ct, data = self.raw(method, path, body, hdr)
        parsed = json.loads(data) if data and ct.startswith("application/json") else data
        if st not in expect:
            raise ApiError(st, parsed)
        return parsed

    def sse(self, method, path, obj=None, raw=None, ctype=None):
        """Yield (event, data-dict) until the stream ends. The body is obj as
        JSON, or raw (bytes or a file, sent as ctype) as it is. A refusal
        raises ApiError with the parsed JSON error when there is one."""
        h = {"Authorization": "Bearer " + self.key}
        body = None
        if obj is not None:
            body = json.dumps(obj).encode()
            h["Content-Type"] = "application/json"
        elif raw is not None:
            body = raw
            h["Content-Type"] = ctype or "application/octet-stream"
            if not isinstance(raw, (bytes, bytearray)):
                h["Content-Length"] = str(os.fstat(raw.fileno()).st_size - raw.tell())
        c = self.conn()
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        if r.status != 200:
            data = r.read()
            c.close()
            try:
                data = json.loads(data)
            except ValueError:
                pass
            raise ApiError(r.status, data)
        ev, buf = None, b""
        while True:
            # r.readline decodes the chunked framing and returns b"" at the
            # final chunk; the connection itself stays open (keep-alive).
            line = r.readline()
            if not line:
                break
            line = line.rstrip(b"\r\n")
            if line.startswith(b"event: "):
                ev = line[7:].decode()
            elif line.startswith(b"data: "):
                buf = line[6:]
            elif line == b"" and ev is not None:
                yield ev, json.loads(buf)
                ev, buf = None, b""
        c.close()

    def exec(self, sid, cmd, **kw):
        """Run cmd; return (exit code, signal, stdout bytes, stderr bytes)."""
        out, err, code, sig = b"", b"", None, None
        body = dict(cmd=cmd, **kw)
        for ev, d in self.sse("POST", f"/v1/sandboxes/{sid}/exec", body):
            if ev == "stdout":
                out += base64.b64decode(d["data"])
            elif ev == "stderr":
                err += base64.b64decode(d["data"])
            elif ev == "exit":
                code, sig = d.get("code"), d.get("signal")
            elif ev == "error":
                raise RuntimeError("exec error: " + d.get("message", ""))
        return code, sig, out, err

class Daemon:
    """airlockd with its own data dir (kernel and templates shared read-only)."""
    def __init__(self, binary, data_root, name=None):
        self.binary, self.root = binary, data_root
        self.dir = os.path.join(data_root, f"test-daemon-{os.getpid()}" +
                                (f"-{name}" if name else ""))
        os.makedirs(self.dir, exist_ok=True)
        for name in ("kernel", "templates", "ca", "bin"):
            link = os.path.join(self.dir, name)
            if not os.path.lexists(link):
                os.symlink(os.path.join(data_root, name), link)
        self.proc, self.port, self.key = None, None, None

    def start(self, extra_env=None):
        self.log = open(os.path.join(self.dir, "airlockd.log"), "ab")
        env = dict(os.environ, AIRLOCK_DATA_DIR=self.dir)
        env.update(extra_env or getattr(self, "extra_env", {}) or {})
        self.extra_env = extra_env or getattr(self, "extra_env", None)
        self.proc = subprocess.Popen([self.binary, "-c", "/dev/null", "--data-dir", self.dir,
                                      "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                                     stderr=self.log, env=env)
        line = self.proc.stdout.readline().decode()
        m = re.search(r"ready: https?://127\.0\.0\.1:(\d+)", line)
        if not m:
            raise RuntimeError("airlockd did not start: " + line + self.logtail())
        self.port = int(m.group(1))
        # A worker joining a store that has keys already writes none.
        kf = os.path.join(self.dir, "admin.key")
        self.key = open(kf).read().strip() if os.path.exists(kf) else None
        return Client(self.port, self.key)

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=120)
        self.proc = None

    def logtail(self, n=4000):
        try:
            with open(os.path.join(self.dir, "airlockd.log"), "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def log_size(self):
        try:
            return os.path.getsize(os.path.join(self.dir, "airlockd.log"))
        except OSError:
            return 0

    def sanitizer_report(self, since=0):
        """ASan/UBSan/LSan findings in the daemon's log (the sanitizer build),
        from byte offset since on (a restarted daemon appends to the same log)."""
        try:
            with open(os.path.join(self.dir, "airlockd.log"), "rb") as f:
                f.seek(since)
                log = f.read()[-(1 << 24):].decode(errors="replace")
        except OSError:
            log = ""
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            i = log.find(marker)
            if i >= 0:
                return log[max(0, i - 200):i + 3000]
        return None

    def front_pid(self):
        """The API front airlockd started (airlockd --role api, its child): the
        process that holds the clients' connections; None if there is none."""
        if self.proc is None:
            return None
        for pid, status, args in procs():
            ppid = next((l.split()[1] for l in status.splitlines() if l.startswith("PPid:")), "")
            if ppid == str(self.proc.pid) and b"--role" in args and b"api" in args:
                return pid
        return None

    def gateway_pids(self):
        """airlock-gateway processes serving this data dir (found by their control socket)."""
        ctl = os.path.join(self.dir, "run", "gateway.sock")
        pids = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if b"--ctl" in args and ctl.encode() in args:
                pids.append(int(p))
        return pids

    def sandbox_ids(self):
        """Sandboxes this data dir knows: the jail uid claims (uid -> id) and the dirs."""
        claims = {}
        run = os.path.join(self.dir, "run", "uids")
        for n in (os.listdir(run) if os.path.isdir(run) else []):
            try:
                claims[int(n)] = open(os.path.join(run, n)).read().strip()
            except (OSError, ValueError):
                pass
        sb = os.path.join(self.dir, "sandboxes")
        ids = set(claims.values()) | set(os.listdir(sb) if os.path.isdir(sb) else [])
        return claims, sorted(i for i in ids if i)

    def jail_pids(self, claims=None, ids=None):
        """QEMU processes of this daemon's sandboxes, alive or orphaned: run
        as a jail uid claimed in this data dir with "-name <id>" of the
        claiming sandbox on their command line (another data dir may claim
        the same uid), or listed in one of its sandboxes' cgroups."""
        if claims is None:
            claims, ids = self.sandbox_ids()
        pids = set()
        for p, status, args in procs():
            uids = next((l.split()[1:] for l in status.splitlines() if l.startswith("Uid:")), [])
            for u in {int(x) for x in uids}:
                sid = claims.get(u)
                if sid and b"-name" in args and sid.encode() in args:
                    pids.add(p)
        for cg in self.sandbox_cgroups(ids):
            try:
                pids |= {int(x) for x in open(os.path.join(cg, "cgroup.procs")).read().split()}
            except OSError:
                pass
        return sorted(pids)

    @staticmethod
    def sandbox_cgroups(ids):
        """The sandboxes' cgroups: below the daemon's own, which it inherits from us."""
        found = []
        for line in open("/proc/self/cgroup").read().splitlines():
            _, ctrls, path = line.split(":", 2)
            path = "" if path == "/" else path
            if ctrls == "":
                bases = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            else:
                bases = [f"/sys/fs/cgroup/{c}" for c in ("memory", "cpu", "pids")
                         if c in ctrls.split(",")]
            for b in bases:
                for sid in ids:
                    p = f"{b}{path}/airlock/{sid}"
                    if os.path.isdir(p):
                        found.append(p)
        return found

    def leaks(self, claims, ids):
        """What this daemon's sandboxes left on the host: processes, cgroups, netns."""
        found = [f"qemu pid {p}" for p in self.jail_pids(claims, ids)]
        found += [f"cgroup {c}" for c in self.sandbox_cgroups(ids)]
        found += [f"netns airlock-{i}" for i in ids if os.path.exists(f"/run/netns/airlock-{i}")]
        return found

    def cleanup(self):
        """Stop the daemon and remove everything it made, also when it died
        first: airlockd leaves its VMs running when it exits (a restart
        adopts them), so its sandboxes' QEMUs, cgroups and network
        namespaces are taken down here, then checked gone (AssertionError
        naming what leaked)."""
        self.kill(signal.SIGTERM)
        # The gateway outlives airlockd by design; this test's one must not outlive the test.
        for pid in self.gateway_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        claims, ids = self.sandbox_ids()
        deadline = time.monotonic() + 60
        while True:
            pids = self.jail_pids(claims, ids)
            if not pids or time.monotonic() > deadline:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.2)
        # Leaves first: a v1 hierarchy lists each controller, and rmdir fails until it is empty.
        for cg in sorted(self.sandbox_cgroups(ids), key=len, reverse=True):
            try:
                os.rmdir(cg)
            except OSError:
                pass
        for i in ids:
            if os.path.exists(f"/run/netns/airlock-{i}"):
                subprocess.run(["ip", "netns", "delete", f"airlock-{i}"], capture_output=True)
        left = self.leaks(claims, ids)
        subprocess.run(["rm", "-rf", "--one-file-system", self.dir])
        if left:
            raise AssertionError(f"airlockd in {self.dir} leaked: " + ", ".join(left))


def exec_retry(c, sid, cmd, secs=60, **kw):
    """exec, waiting out 503 while the agent channel comes (back) up."""
    end = time.time() + secs
    while True:
        try:
            return c.exec(sid, cmd, **kw)
        except ApiError as e:
            if e.status != 503 or time.time() > end:
                raise
            time.sleep(0.5)

def user_key(c, project, role="user"):
    """A client with a new key of that project and role (c holds the admin key)."""
    return Client(c.port, c.call("POST", "/v1/keys", {"name": f"t-{project}-{role}",
                                                      "project": project, "role": role})["key"])

def raw_json(c, method, path, obj=None):
    """(status, body bytes, parsed JSON) without raising."""
    body = None if obj is None else json.dumps(obj).encode()
    st, _, data = c.raw(method, path, body, {"Content-Type": "application/json"} if body else {})
    try:
        return st, data, json.loads(data) if data else None
    except ValueError:
        return st, data, None

# What one sandbox may leave on the host: found from outside the daemon.
def qemu_pids(sid):
    """QEMU processes serving a sandbox: the jail runs them as -name <id>
    (their paths are the jail's /sandbox/..., not the host's)."""
    out = subprocess.run(["pgrep", "-f", f"^qemu-system-x86_64 .*-name {sid} "],
                         capture_output=True, text=True)
    return sorted(p for p in out.stdout.split() if p)

def uid_claims(d, sid):
    dirp = os.path.join(d.dir, "run", "uids")
    try:
        names = os.listdir(dirp)
    except OSError:
        return []
    found = []
    for n in names:
        try:
            if open(os.path.join(dirp, n)).read().strip() == sid:
                found.append(n)
        except OSError:
            pass
    return found

def leftovers(d, sid):
    """What of sandbox sid is still there: its dir, netns, QEMU, cgroups, uid claim."""
    found = []
    if os.path.exists(os.path.join(d.dir, "sandboxes", sid)):
        found.append("sandbox dir")
    if os.path.exists(f"/run/netns/airlock-{sid}"):
        found.append("netns")
    if qemu_pids(sid):
        found.append("qemu process")
    cgroups = Daemon.sandbox_cgroups([sid])
    if cgroups:
        found.append("cgroup " + " ".join(cgroups))
    if uid_claims(d, sid):
        found.append("uid claim")
    return found

def args(argv=None):
    """(airlockd, data root, only) from argv: AIRLOCKD [DATA_ROOT] [--only a,b];
    the data root defaults to $AIRLOCK_DATA_DIR, then /var/lib/airlock."""
    argv = list(sys.argv if argv is None else argv)
    only = None
    if "--only" in argv:
        i = argv.index("--only")
        only = argv[i + 1].split(",")
        del argv[i:i + 2]
    root = argv[2] if len(argv) > 2 else os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    return argv[1], root, only

def run_cases(cases, d, c, only=None):
    """(name, fn(d, c)) in order, each announced by "-- name"; an exception
    fails that case and the rest still run. A case that restarts the daemon
    returns the new client; the last one is returned."""
    for name, fn in cases:
        if only is not None and name not in only:
            continue
        print(f"-- {name}", flush=True)
        try:
            c = fn(d, c) or c
        except Exception as e:      # a broken case is a failure, not the end of the run
            traceback.print_exc()
            check(f"{name} raised no exception", False, repr(e))
    return c

def session(binary, root, body, env=None, label="airlockd", start=True):
    """One airlockd with its own data dir and port around body(d, c); then a
    graceful stop, its sanitizer check, its log tail if anything failed, and
    the cleanup, which must find nothing of it left on the host. With
    start=False body(d, None) starts the daemon itself (d.start). body may
    stop it first to read its final log."""
    d = Daemon(binary, root)
    try:
        c = d.start(env) if start else None
        body(d, c)
        d.kill(signal.SIGTERM)
        report = d.sanitizer_report()
        check(f"{label} ran clean under ASan/UBSan/LSan", report is None, report)
    except Exception as e:
        traceback.print_exc()
        check(f"{label}: the test raised no exception", False, repr(e))
    finally:
        if failures:
            print(f"{label} log tail:\n" + d.logtail(), flush=True)
        try:
            d.cleanup()
        except AssertionError as e:
            check(f"{label} left nothing on the host", False, str(e))

def main(cases, env=None):
    """The main of a daemon test: one session running cases (--only picks
    some), then the summary line; the exit status."""
    binary, root, only = args()
    session(binary, root, lambda d, c: run_cases(cases, d, c, only), env)
    return summary()
