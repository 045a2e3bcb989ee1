"""What the real-VM egress tests (test_egress_vm.py, test_egress_life.py)
share beyond daemon_client (whose check and summary they use), and the
egress matrix too (egress_matrix.py): the gateway's audit log, running a
shell snippet in a guest, the daemon's gateway pointed at the test internet,
holding the test internet for the whole run, and the end-of-run sanitizer
checks of airlockd and its gateway."""
import json, os, secrets, signal, sys, time, traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "testnet"))
import testnet                                # noqa: E402
from daemon_client import Daemon, check, failures, summary, wait_for   # noqa: E402,F401

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "LeakSanitizer has encountered")


class Audit:
    """The gateway's audit.log (JSON lines), read from a mark."""

    def __init__(self, d):
        self.path = os.path.join(d, "audit.log")

    def mark(self):
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def since(self, mark):
        try:
            with open(self.path, "rb") as f:
                f.seek(mark)
                data = f.read()
        except OSError:
            return []
        out = []
        for line in data.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"unparsable": line.decode("latin-1")})
        return out

    def raw(self):
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except OSError:
            return b""

    def find(self, mark, timeout=3.0, **want):
        """Records since mark whose fields contain the wanted values
        (substring for strings, equality otherwise); waits a little because
        the gateway may write the line just after the guest saw the end."""
        end = time.time() + timeout
        while True:
            recs = [r for r in self.since(mark) if _match(r, want)]
            if recs or time.time() >= end:
                return recs
            time.sleep(0.1)


def _match(rec, want):
    for k, v in want.items():
        got = rec.get(k)
        if isinstance(v, str):
            if got is None or v.lower() not in str(got).lower():
                return False
        elif got != v:
            return False
    return True


def sh(c, sid, script, timeout_s=60):
    """Run a shell snippet as root in the guest; (exit code, stdout, stderr) as text."""
    code, sig, out, err = c.exec(sid, ["/bin/sh", "-c", script], timeout_s=timeout_s, user="root")
    return code, out.decode(errors="replace"), err.decode(errors="replace")


# The real-VM egress tests' names and requests on the test internet.
N = testnet.name
ALLOWED, UNLISTED = N("allowed"), N("unlisted")
RUN = secrets.token_hex(4)     # in every request path: others may share the test internet
NET = {"mode": "allowlist", "allow": [ALLOWED]}


def P(what):
    """A request path of this run (the fixture logs are searched for it)."""
    return f"/t-{RUN}-{what}"


def reached(logs, m, role, what):
    """Requests with this run's path for `what` that reached role's server since mark m."""
    return [r for r in logs.since(m, role) if r.get("path") == P(what)]


def curl(c, sid, args):
    """curl in the guest: (exit code, stdout, stderr)."""
    return sh(c, sid, "curl -sS --max-time 20 " + args)


def echo_json(out):
    """The echo server's JSON answer, {} for anything else."""
    try:
        return json.loads(out)
    except ValueError:
        return {}


def audit(c, sid, **q):
    """The sandbox's audit records through the API."""
    qs = "&".join(f"{k}={v}" for k, v in dict(sandbox=sid, limit=1000, **q).items())
    return c.call("GET", "/v1/audit?" + qs)["records"]


def denied(c, sid, pred):
    return any(pred(r) for r in audit(c, sid, decision="deny"))


def curl_role(c, sid, url, extra=""):
    """The echo server's role for url, or the curl failure."""
    code, out, err = sh(c, sid, f"curl -sS --max-time 20 {extra} {url}")
    try:
        return json.loads(out).get("role")
    except ValueError:
        return f"curl {code}: {err.strip()[:200]}"


def create(c, network=NET):
    """A networked sandbox (allowlist: ALLOWED): (id, state)."""
    sb = c.call("POST", "/v1/sandboxes", {"network": network})
    return sb["id"], sb["state"]

def gateway_env(**extra):
    """airlockd's environment: its gateway dials from the test internet's upstream side."""
    env = {"AIRLOCK_GATEWAY_NETNS": "/run/netns/" + testnet.NS_UP,
           "AIRLOCK_GATEWAY_RESOLVER": testnet.ADDR["dns"],
           "AIRLOCK_GATEWAY_UPSTREAM_CA": testnet.paths()["ca"]}
    env.update(extra)
    return env


def session(binary, root, env, body):
    """airlockd with its gateway pointed at the test internet around
    body(d, c); then finish (graceful stop, both sanitizer checks), the log
    tails on failure, the summary and the cleanup; the exit status."""
    d = Daemon(binary, root)
    try:
        body(d, d.start(env))
        finish(d)
    finally:
        rc = report(d)
        d.cleanup()
    return rc


def main(run):
    """argv[1] is airlockd; run(binary, root) with the test internet held
    exclusively (checks read what reached it: no other test's traffic may mix in)."""
    binary = sys.argv[1]
    root = os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    gwbin = os.path.join(os.path.dirname(os.path.dirname(binary)), "gateway", "airlock-gateway")
    if not os.access(gwbin, os.X_OK):
        print("skip: airlock-gateway not built")
        return 77
    with testnet.exclusive():
        testnet.acquire()
        try:
            return run(binary, root)
        finally:
            testnet.release()


def run_sections(sections, after=None):
    """(name, fn) in order; an exception fails that section, the run goes on.
    after() runs after each section (e.g. restart a daemon a section left down)."""
    for name, fn in sections:
        print(f"-- {name}", flush=True)
        try:
            fn()
        except Exception as e:      # noqa: BLE001
            traceback.print_exc()
            check(f"{name} raised no exception", False, repr(e))
        if after is not None:
            after()


def _gateway_log(d):
    try:
        with open(os.path.join(d.dir, "logs", "gateway.log"), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def finish(d):
    """Graceful stop; airlockd and its gateway ran clean, the gateway left with it."""
    d.kill(signal.SIGTERM)
    report = d.sanitizer_report()
    check("airlockd ran clean under ASan/UBSan/LSan", report is None, report)
    # The sanitizer build's leak check takes a moment at the gateway's exit.
    wait_for(lambda: not d.gateway_pids(), 30, 0.1)
    check("the gateway exited with airlockd's graceful shutdown (nothing attached)",
          not d.gateway_pids(), d.gateway_pids())
    gwlog = _gateway_log(d)
    bad = [m for m in SANITIZER_MARKERS if m in gwlog]
    check("the gateway ran clean under ASan/UBSan/LSan", not bad, gwlog[-3000:])


def report(d):
    """Log tails on failure, then the summary line; the exit status."""
    if failures:
        print("airlockd log tail:\n" + d.logtail(8000), flush=True)
        print("gateway log tail:\n" + _gateway_log(d)[-4000:], flush=True)
    return summary()
