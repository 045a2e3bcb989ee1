"""A small client for the airlock REST API used by the integration tests:
JSON calls, SSE streams (exec), and a daemon process under test."""
import base64, http.client, json, os, re, signal, subprocess, time

class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body

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

    def sse(self, method, path, obj=None):
        """Yield (event, data-dict) until the stream ends."""
        h = {"Authorization": "Bearer " + self.key}
        body = None
        if obj is not None:
            body = json.dumps(obj).encode()
            h["Content-Type"] = "application/json"
        c = self.conn()
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        if r.status != 200:
            data = r.read()
            c.close()
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
    def __init__(self, binary, data_root):
        self.binary, self.root = binary, data_root
        self.dir = os.path.join(data_root, f"test-daemon-{os.getpid()}")
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
        m = re.search(r"ready: http://127\.0\.0\.1:(\d+)", line)
        if not m:
            raise RuntimeError("airlockd did not start: " + line + self.logtail())
        self.port = int(m.group(1))
        self.key = open(os.path.join(self.dir, "admin.key")).read().strip()
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

    def cleanup(self):
        self.kill(signal.SIGTERM)
        # The gateway outlives airlockd by design; this test's one must not outlive the test.
        for pid in self.gateway_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        subprocess.run(["rm", "-rf", "--one-file-system", self.dir])
