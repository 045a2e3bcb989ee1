#!/usr/bin/env python3
"""Egress that must work, through the real gateway from stand-in guests
(tests/lib/egress_matrix.py): the test internet's fixtures answer; DNS for
allowed names (CNAME chains, HTTPS/SVCB records stripped); HTTPS and plain
HTTP to allowed hosts with curl, python requests and node fetch, audited;
a bound credential injected upstream and never shown to the guest; gateway
stats and detach. Ends with the whole-run leak checks.

    test_egress.py GW_STANDIN AIRLOCK_GATEWAY [--only CAT,...] [--keep] [--list]
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from egress_matrix import (A, N, blocked, cat_leaks, check, echo_json,  # noqa: E402
                           main, marks, reached, silent, tn)


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
    ("credentials", cat_credentials), ("leaks", cat_leaks), ("detach", cat_detach),
]


if __name__ == "__main__":
    sys.exit(main(CATEGORIES))
