#!/usr/bin/env python3
"""The egress attack matrix (issue 6 item 9, DESIGN §6): from inside
stand-in guests behind real islands and the real gateway
(tests/lib/egress_matrix.py), every attack category: DNS spoofing and
tunnelling, DoH, CDN fronting, h2c and absolute-URI smuggling, keep-alive
host switching, CONNECT, UDP, ports, WebSocket smuggling, IPv6, ICMP, DNS
rebinding, metadata, the host, other sandboxes, source and ARP spoofing,
SNI mismatch; each with its control case, and the whole-run leak checks.

    test_egress_attacks.py GW_STANDIN AIRLOCK_GATEWAY [--only CAT,...] [--keep] [--list]
"""
import base64
import ipaddress
import os
import secrets
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from egress_matrix import (A, N, blocked, cat_leaks, check, echo_json,  # noqa: E402
                           main, marks, reached, silent, tn)
import dnsmsg  # noqa: E402  (tests/testnet, on the path egress_matrix set)
import standin  # noqa: E402


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



CATEGORIES = [
    ("spoof-dns", cat_spoof_dns), ("cdn-fronting", cat_cdn_fronting),
    ("absolute-h2c", cat_absolute_h2c), ("keepalive", cat_keepalive), ("connect", cat_connect),
    ("dns-tunnel", cat_dns_tunnel), ("doh", cat_doh), ("udp", cat_udp), ("ports", cat_ports),
    ("websocket", cat_websocket), ("ipv6", cat_ipv6), ("icmp", cat_icmp),
    ("rebinding", cat_rebinding), ("metadata", cat_metadata), ("host", cat_host),
    ("sandboxes", cat_sandboxes), ("source-spoof", cat_source_spoof), ("arp", cat_arp),
    ("sni", cat_sni), ("leaks", cat_leaks),
]


if __name__ == "__main__":
    sys.exit(main(CATEGORIES))
