"""The egress matrix's harness (tests/functional/test_egress.py,
tests/security/test_egress_attacks.py, DESIGN §6): the real airlock-gateway
in the test internet's upstream namespace (tests/testnet), two stand-in
guests behind real islands (standin.py, gw_standin), what the guests run
(egress_guest.py), the gateway's audit log, and the assertions of an attack:
  guest     it failed from the guest's point of view (no answer from the
            target: the echo servers answer with JSON naming their role)
  upstream  nothing reached the outside (the fixture logs since the attack)
  audit     the gateway audited it as denied (its audit.log)
Attacks dropped by the island's nftables never reach the gateway: those
assert the packet log instead of the audit log. Every check prints PASS/FAIL
with what was observed; the last line is "N passed, N failed".

    main(CATEGORIES): argv GW_STANDIN AIRLOCK_GATEWAY [--only CAT,...] [--keep] [--list]
Exit 77 only when a hard prerequisite is missing (root, the binaries).
"""
import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "testnet"))
sys.path.insert(0, HERE)
import daemon_client  # noqa: E402
from egress_harness import Audit  # noqa: E402
import standin  # noqa: E402
import testnet as tn  # noqa: E402

N = tn.name
A = tn.ADDR
GUEST_PY = "/usr/bin/python3"   # Debian's, with python3-requests (a guest's python)
GUEST_TOOL = os.path.join(HERE, "egress_guest.py")


def check(name, ok, detail=""):
    """daemon_client's check, showing what was observed also when it passed."""
    detail = detail if isinstance(detail, str) else json.dumps(detail, default=str)
    if len(detail) > 600:
        detail = detail[:600] + "..."
    return daemon_client.check(name, ok, detail, show=True)


def _any_field(rec, needle):
    return any(needle.lower() in str(rec.get(k, "")).lower()
               for k in ("sni", "host", "qname", "dst", "ip", "path"))


class Env:
    def __init__(self, tool, gwbin, scratch):
        self.tool = tool
        self.gwbin = gwbin
        self.scratch = scratch
        self.tp = tn.paths()
        self.logs = tn.Logs()
        self.audit_dir = os.path.join(scratch, "audit")
        self.audit = Audit(self.audit_dir)
        self.ctl = os.path.join(scratch, "gw.sock")
        self.gwlog = os.path.join(scratch, "gateway.log")
        self.gw = None
        self.secret = "s3cr3t-" + secrets.token_hex(16)
        self.sb1 = standin.Standin(tool, "standin1")
        self.sb2 = standin.Standin(tool, "standin2")
        self.listener2 = None
        self.tap_mac = None

    # -- running things in a guest --------------------------------------

    def guest(self, sb, *args, env=None, timeout=40):
        """egress_guest.py in the guest; its JSON result."""
        argv = ["ip", "netns", "exec", sb.ns, GUEST_PY, GUEST_TOOL] + [str(a) for a in args]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": "timeout after %ds" % timeout}
        lines = r.stdout.strip().splitlines()
        try:
            return json.loads(lines[-1])
        except (ValueError, IndexError):
            return {"ok": False, "error": "no result (exit %d): %s" % (
                r.returncode, (r.stderr or r.stdout)[-400:])}

    def sh(self, sb, *argv, timeout=30, env=None):
        """A host binary in the guest: (exit code, stdout, stderr)."""
        full = ["ip", "netns", "exec", sb.ns] + [str(a) for a in argv]
        e = dict(os.environ)
        if env:
            e.update(env)
        try:
            r = subprocess.run(full, capture_output=True, text=True, timeout=timeout, env=e)
        except subprocess.TimeoutExpired:
            return 124, "", "timeout"
        return r.returncode, r.stdout, r.stderr

    def curl(self, sb, *args, cacert=None, timeout=10):
        """curl in the guest: (exit code, http code, body). Insecure unless
        cacert is given (an attacker does not care about certificates)."""
        argv = ["curl", "-sS", "--max-time", str(timeout), "-w", "\n%{http_code}"]
        argv += ["--cacert", cacert] if cacert else ["-k"]
        rc, out, err = self.sh(sb, *(argv + list(args)), timeout=timeout + 5)
        body, _, code = out.rpartition("\n")
        return rc, code.strip(), body if body else err.strip()

    def in_tup(self, *argv, timeout=30):
        r = subprocess.run(["ip", "netns", "exec", tn.NS_UP] + [str(a) for a in argv],
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def tup_guest(self, *args):
        rc, out, err = self.in_tup(GUEST_PY, GUEST_TOOL, *args)
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return {"ok": False, "error": err[-400:]}


def echo_json(body):
    try:
        return json.loads(body)
    except (ValueError, TypeError):
        return {}


def silent(body):
    """curl's output shows no fixture answered (echo JSON or catch-all banner)."""
    return echo_json(body).get("role") is None and "catchall" not in body and \
        "HTTP/0.9" not in body


def reached(res, role):
    """Did any response of an egress_guest req come from the fixture role?"""
    for r in res.get("responses", []):
        if r.get("json", {}).get("role") == role:
            return True
    return False


def blocked(env, name, guest_ok, guest_detail, mark, amark, nothing=(), audit=None,
            audit_any=None, audit_l3=False, dial_ok=()):
    """The three assertions of an attack.

    nothing: (role, {field: value}) pairs that must have no log record since
    mark; and no TCP connection from the gateway host may have been opened
    to any address but those in dial_ok (None: not checked; the gateway
    dialling the real allowed host instead of the guest's choice is fine
    for some attacks). audit: fields a deny record must contain. audit_any: a needle any
    of sni/host/qname/dst/ip/path of a deny record must contain. audit_l3:
    the island drops it; the gateway never sees it (no audit expected)."""
    check("%s [guest]" % name, guest_ok, guest_detail)
    time.sleep(0.2)
    leaks = []
    for role, match in nothing:
        recs = env.logs.since(mark, role, **match)
        if recs:
            leaks.append({"role": role, "first": recs[0]})
    if dial_ok is not None:
        syns = [p for p in env.logs.since(mark, "packets", proto="tcp")
                if p.get("dst") not in dial_ok]
        if syns:
            leaks.append({"dialled": [(p["dst"], p["dport"]) for p in syns][:5]})
    what = "no record in %s" % (", ".join(sorted({r for r, _ in nothing})) or "-")
    if dial_ok is not None:
        what += "; nothing dialled" + (" but %s" % ",".join(dial_ok) if dial_ok else "")
    check("%s [upstream]" % name, not leaks, leaks if leaks else what)
    if audit_l3:
        return
    if audit is not None or audit_any is not None:
        want = dict(audit or {})
        want["decision"] = "deny"
        recs = env.audit.find(amark, **want)
        if audit_any is not None:
            recs = [r for r in recs if _any_field(r, audit_any)]
            if not recs:
                recs = [r for r in env.audit.find(amark, timeout=0.5, decision="deny")
                        if _any_field(r, audit_any)]
        check("%s [audit]" % name, bool(recs),
              recs[0] if recs else {"wanted": want, "needle": audit_any,
                                    "got": env.audit.since(amark)[-4:]})


def marks(env):
    return env.logs.mark(), env.audit.mark()


def policy1(env):
    return {
        "mode": "allowlist",
        "allow": [N("allowed"), N("cdn-a"), N("proxy"), N("db") + ":5432", N("svcb"), N("txt"),
                  N("cname1"), N("cname-private"), N("v6"), N("v6dual"),
                  N("rebind-private"), N("rebind-loopback"), N("rebind-metadata"),
                  N("rebind-rfc1918"), N("rebind-cgnat"), N("rebind-mixed"), N("rebind-v6"),
                  N("flip"), N("metadata"), N("host"), N("host") + ":7070",
                  N("rebind-loopback") + ":7070", N("sandbox") + ":8000"],
        "credentials": [{"name": "TEST_TOKEN", "value": env.secret, "hosts": [N("allowed")],
                         "header": "Authorization", "format": "Bearer {value}"}],
    }


def policy2():
    return {"mode": "full"}


def start_gateway(env):
    gwca = tn.make_gateway_ca(os.path.join(env.scratch, "gwca"))
    env.gwca = gwca
    env.bundle = os.path.join(env.scratch, "bundle.pem")
    with open(env.bundle, "w") as f:
        f.write(open(gwca["root"]).read() + open(env.tp["ca"]).read())
    os.makedirs(env.audit_dir, exist_ok=True)
    os.chmod(env.scratch, 0o755)
    argv = ["ip", "netns", "exec", tn.NS_UP, env.gwbin, "--ctl", env.ctl,
            "--audit-dir", env.audit_dir, "--ca-cert", gwca["cert"], "--ca-key", gwca["key"],
            "--upstream-ca", env.tp["ca"], "--resolver", A["dns"],
            "--uid", "65534", "--gid", "65534", "--debug"]
    e = dict(os.environ)
    e.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
    log = open(env.gwlog, "ab")
    env.gw = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=e,
                              start_new_session=True)
    log.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        if env.gw.poll() is not None:
            break
        r = subprocess.run([env.tool, "hello", "--ctl", env.ctl], capture_output=True, text=True)
        if r.returncode == 0:
            return check("gateway: started in airlock-tup, hello answers", True, r.stdout.strip())
        time.sleep(0.2)
    return check("gateway: started in airlock-tup, hello answers", False,
                 "exit %s; log: %s" % (env.gw.poll(), gwlog_tail(env)))


def gwlog_tail(env, n=3000):
    try:
        return open(env.gwlog, errors="replace").read()[-n:]
    except OSError:
        return ""


def attach(env, sb, pol, name):
    path = os.path.join(env.scratch, "policy-%s.json" % sb.name)
    with open(path, "w") as f:
        json.dump(pol, f)
    sb.create()
    r = sb.attach(env.ctl, path)
    return check("setup: %s attached (%s)" % (sb.name, name), r.returncode == 0,
                 (r.stdout + r.stderr).strip())


def start_listener2(env):
    """A service in the second guest that the first must never reach."""
    log = os.path.join(env.scratch, "listener2.log")
    open(log, "w").close()
    code = ("import socket\n"
            "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind(('10.0.0.2', 8000)); s.listen(8)\n"
            "while True:\n"
            "    c,a=s.accept(); open(%r,'a').write('conn %%s\\n' %% (a,)); "
            "c.sendall(b'neighbour-listener\\n'); c.close()\n" % log)
    env.listener2 = subprocess.Popen(["ip", "netns", "exec", env.sb2.ns, GUEST_PY, "-c", code],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def prerequisites(tool, gwbin):
    if os.geteuid() != 0:
        return "not root"
    for p in (tool, gwbin):
        if not os.access(p, os.X_OK):
            return "%s not built" % p
    for b in ("ip", "nft", "curl", "openssl"):
        if shutil.which(b) is None:
            return "%s not installed" % b
    if not os.access(GUEST_PY, os.X_OK):
        return "%s missing" % GUEST_PY
    return None


def cat_leaks(env):
    """Over the whole run: the last category of both matrix tests."""
    recs = env.logs.since({}, "packets", foreign=True)
    check("whole run: no packet from a guest address ever reached the internet", not recs,
          recs[:3])
    allrecs = []
    for role in ("allowed", "cdn", "forbidden", "unlisted", "proxy", "catchall", "metadata",
                 "private", "host"):
        allrecs += env.logs.since({}, role)
    with_secret = [r for r in allrecs if env.secret in json.dumps(r)]
    legit = [r for r in with_secret if r.get("path") == "/cred-inject"]
    check("whole run: the secret reached upstream only in the bound header of the bound host",
          len(with_secret) == len(legit) and all(r.get("role") == "allowed" for r in legit),
          [{k: r.get(k) for k in ("role", "path", "host")} for r in with_secret][:5])
    check("whole run: the secret never appears in the audit log",
          env.secret.encode() not in env.audit.raw(), "")
    check("whole run: the secret never appears in the gateway's log",
          env.secret not in gwlog_tail(env, 1 << 26), "")


def main(categories):
    """Run categories ((name, fn(env)) in order) against the stand-ins; the exit status."""
    ap = argparse.ArgumentParser()
    ap.add_argument("gw_standin")
    ap.add_argument("gateway")
    ap.add_argument("--only", help="comma-separated categories")
    ap.add_argument("--keep", action="store_true", help="leave everything up")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(n for n, _ in categories))
        return 0
    why = prerequisites(a.gw_standin, a.gateway)
    if why:
        print("skip: %s" % why)
        return 77
    only = set(a.only.split(",")) if a.only else None
    # The whole run: its checks read what reached the test internet, which
    # another test's traffic would pollute (and the stand-in names are fixed).
    with tn.exclusive():
        return run(a, only, categories)


def run(a, only, categories):
    tn.acquire()
    scratch = tempfile.mkdtemp(prefix="airlock-egress-")
    env = Env(a.gw_standin, a.gateway, scratch)
    try:
        ready = (start_gateway(env) and attach(env, env.sb1, policy1(env), "allowlist") and
                 attach(env, env.sb2, policy2(), "full"))
        if ready:
            env.tap_mac = env.sb1.island_run("cat", "/sys/class/net/tap0/address").stdout.strip()
            start_listener2(env)
        for name, fn in categories if ready else ():
            if only and name not in only:
                continue
            print("-- %s" % name, flush=True)
            try:
                fn(env)
            except Exception as e:  # a broken check is a failure, the rest still run
                traceback.print_exc()
                check("%s: ran without an exception" % name, False, repr(e))
    finally:
        if env.listener2 is not None:
            env.listener2.kill()
            env.listener2.wait()
        if env.gw is not None and not a.keep:
            for sb in (env.sb1, env.sb2):
                sb.detach(env.ctl)
            env.gw.send_signal(signal.SIGTERM)
            try:
                rc = env.gw.wait(20)
            except subprocess.TimeoutExpired:
                env.gw.kill()
                rc = env.gw.wait()
            log = gwlog_tail(env, 1 << 26)
            report = None
            for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
                i = log.find(marker)
                if i >= 0:
                    report = log[max(0, i - 200):i + 3000]
                    break
            check("gateway: exited cleanly on SIGTERM, no sanitizer report",
                  rc == 0 and report is None, report or "exit %s" % rc)
            if daemon_client.failures:
                print("gateway log tail:\n" + gwlog_tail(env, 6000))
        if not a.keep:
            for sb in (env.sb1, env.sb2):
                sb.destroy()
            shutil.rmtree(scratch, ignore_errors=True)
            tn.release()
        else:
            print("kept: scratch %s, gateway pid %s" % (scratch, env.gw.pid if env.gw else None))
    return daemon_client.summary()
