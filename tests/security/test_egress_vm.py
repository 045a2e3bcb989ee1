#!/usr/bin/env python3
"""Egress attacks from a real microVM (TCG here) through the real gateway:
the representative set of issue 6 (the full attack matrix runs against netns
stand-in guests in test_egress_attacks.py), the secret in no snapshot or log,
and full mode's limits (metadata, rebinding, the island's host side). Live
policy changes and an airlockd restart under egress are functional
(test_egress_live_policy.py, test_egress_restart.py). The daemon's gateway dials from the test
internet's upstream namespace (tests/testnet), never the real one.

Every check asserts something observable: what the guest got, what reached
(or never reached) the test internet's servers, and what the audit log says.
"""
import json, os, secrets, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from egress_harness import (P, check, curl, denied, echo_json, gateway_env, reached,  # noqa: E402
                            run_sections, session, sh, wait_for)
import egress_harness
import testnet                                # noqa: E402

N = testnet.name
ALLOWED, CDN_A, CDN_B = N("allowed"), N("cdn-a"), N("cdn-b")
FORBIDDEN, UNLISTED, DB = N("forbidden"), N("unlisted"), N("db")
A = testnet.ADDR








def test_allowlist(d, c, logs, token):
    sb = c.call("POST", "/v1/sandboxes", {"network": {"mode": "allowlist", "allow": [
        ALLOWED, CDN_A, DB + ":5432"]}})
    sid = sb["id"]
    check("allowlist sandbox created", sb["state"] == "running", sb)

    code, out, err = curl(c, sid, f"https://{ALLOWED}/hello")
    j = echo_json(out)
    check("curl: allowed HTTPS works through the gateway (guest trusts the airlock CA)",
          code == 0 and j.get("role") == "allowed" and j.get("path") == "/hello", out + err)

    code, out, err = sh(c, sid, "python3 -c 'import requests,sys; r=requests.get(\"https://%s/py\", timeout=20); "
                        "print(r.status_code, r.json()[\"role\"])'" % ALLOWED)
    check("python requests: allowed HTTPS works", code == 0 and out.strip() == "200 allowed",
          out + err)

    code, out, err = curl(c, sid, f"http://{ALLOWED}/plain")
    check("plain HTTP on :80 to an allowed Host works",
          code == 0 and echo_json(out).get("role") == "allowed", out + err)

    m = logs.mark()
    code, out, err = curl(c, sid, f"https://{FORBIDDEN}/")
    check("a name outside the allowlist does not resolve (NXDOMAIN)", code == 6, f"{code} {err}")
    check("... and the DNS query was audited as denied",
          denied(c, sid, lambda r: r.get("kind") == "dns" and r.get("qname") == FORBIDDEN))

    code, out, err = curl(c, sid, f"--resolve {FORBIDDEN}:443:{A['forbidden']} https://{FORBIDDEN}{P('spoof')}")
    check("/etc/hosts-style spoofing of a forbidden name is refused (SNI not allowed)",
          code != 0 and not reached(logs, m, "forbidden", "spoof"), f"{code} {out} {err}")
    check("... audited with the SNI",
          denied(c, sid, lambda r: r.get("sni") == FORBIDDEN))

    code, out, err = curl(c, sid, f"--resolve {ALLOWED}:443:{A['forbidden']} https://{ALLOWED}{P('pinned')}")
    check("an allowed name pointed at another IP is dialled by name (reaches the allowed server)",
          code == 0 and echo_json(out).get("role") == "allowed" and not reached(logs, m, "forbidden", "pinned"),
          out + err)

    code, out, err = curl(c, sid, f"--resolve {CDN_B}:443:{A['cdn']} https://{CDN_B}{P('cdnb')}")
    check("shared CDN address: the forbidden name on the allowed name's IP is refused",
          code != 0 and not reached(logs, m, "cdn", "cdnb"), f"{code} {out} {err}")

    code, out, err = curl(c, sid, f"-o /dev/null -w '%{{http_code}}' -H 'Host: {CDN_B}' https://{CDN_A}{P('front')}")
    check("domain fronting (SNI allowed, Host forbidden) gets 403",
          out.strip() == "403" and not reached(logs, m, "cdn", "front"), f"{code} {out} {err}")
    check("... audited as a Host/SNI mismatch",
          denied(c, sid, lambda r: r.get("kind") == "http" and r.get("host") == CDN_B))

    code, out, err = curl(c, sid, f"-o /dev/null -w '%{{http_code}}' https://{A['allowed']}/")
    check("raw IP without a name is refused", code != 0 or out.strip() in ("403", "000"),
          f"{code} {out} {err}")

    code, out, err = sh(c, sid, "python3 - <<'PY'\n"
        "import socket\n"
        "s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)\n"
        f"s.sendto(b'quic-probe', ('{A['allowed']}', 443))\n"
        "try:\n print('got', s.recvfrom(100))\nexcept OSError as e:\n print('none')\nPY")
    time.sleep(0.5)
    check("UDP/QUIC to 443 goes nowhere",
          out.strip() == "none" and not logs.since(m, "packets", proto="udp", dst=A["allowed"]),
          out + err)

    code, out, err = sh(c, sid, "python3 - <<'PY'\n"
        "import socket, struct\n"
        "def csum(b):\n"
        " s=sum(struct.unpack('!%dH' % (len(b)//2), b)); s=(s>>16)+(s&0xffff); s+=s>>16\n"
        " return ~s & 0xffff\n"
        "def ping(addr, size=16):\n"
        " s=socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.settimeout(2)\n"
        " body=struct.pack('!BBHHH',8,0,0,7,1)+b'x'*size\n"
        " body=body[:2]+struct.pack('!H',csum(body))+body[4:]\n"
        " s.sendto(body,(addr,0))\n"
        " try:\n"
        "  data,_=s.recvfrom(2048); return 'reply' if data[20]==0 else 'other'\n"
        " except OSError: return 'none'\n"
        f"print(ping('{A['allowed']}'), ping('10.0.0.1'), ping('10.0.0.1', 1000))\nPY")
    check("ICMP: only small pings of 10.0.0.1 are answered (no tunnel out, no big payloads)",
          out.split() == ["none", "reply", "none"], out + err)

    m = logs.mark()
    code, out, err = curl(c, sid, f"-o /dev/null -w '%{{http_code}}' http://169.254.169.254{P('meta')}")
    check("cloud metadata is unreachable", out.strip() in ("000", "403") and not reached(logs, m, "metadata", "meta"),
          f"{code} {out} {err}")

    code, out, err = sh(c, sid, "python3 - <<'PY'\n"
        "import socket\n"
        f"s=socket.create_connection(('{DB}', 5432), timeout=10)\n"
        "print(s.recv(100).decode().strip())\nPY")
    check("a host:port rule (L4, 5432) works", code == 0 and out.strip() != "", out + err)

    code, out, err = curl(c, sid, f"--max-time 5 https://{DB}:5433/")
    check("another port on that host is refused", code != 0, f"{code} {out}")

    # Credentials: the guest only has the placeholder; the upstream gets the value.
    m = logs.mark()
    code, out, err = curl(c, sid, f"-I -H 'Authorization: Bearer airlock:ECHO_TOKEN' https://{ALLOWED}/inject")
    reqs = [r for r in logs.since(m, "allowed") if r.get("path") == "/inject"]
    got = json.dumps(reqs)
    check("credential injection: the upstream received the real value",
          code == 0 and token in got and "airlock:ECHO_TOKEN" not in got, got[:500])
    m = logs.mark()
    code, out, err = curl(c, sid, f"-o /dev/null -w '%{{http_code}}' -H 'Authorization: Bearer airlock:ECHO_TOKEN' https://{CDN_A}/steal")
    check("the placeholder sent to a host the secret is not bound to is refused, value not sent",
          out.strip() == "403" and token.encode() not in logs.raw_since(m)
          and not [r for r in logs.since(m, "cdn") if r.get("path") == "/steal"], f"{code} {out}")
    check("... audited with the credential name",
          denied(c, sid, lambda r: r.get("credential") == "ECHO_TOKEN"))

    # Keep-alive: second request on one connection to another host is refused.
    code, out, err = sh(c, sid, "python3 - <<'PY'\n"
        "import http.client\n"
        f"c=http.client.HTTPSConnection('{CDN_A}', timeout=20)\n"
        "c.request('GET', '/one'); r=c.getresponse(); r.read(); first=r.status\n"
        f"c.request('GET', '/two', headers={{'Host': '{CDN_B}'}})\n"
        "r=c.getresponse(); r.read(); print(first, r.status)\nPY")
    check("keep-alive: first request allowed, second to another host refused on that request",
          out.split() == ["200", "403"], out + err)
    # airlockd serves the gateway's counters from a snapshot it refreshes at
    # most once a second: the last refusal shows up within a refresh or two.
    def counted():
        met = c.call("GET", f"/v1/sandboxes/{sid}/metrics")
        eg = met.get("egress", {})
        ok = (eg.get("requests", 0) >= 5 and eg.get("requests_denied", 0) >= 2 and
              eg.get("dns_denied", 0) >= 1 and eg.get("bytes_down", 0) > 0)
        return (ok, met)
    ok, met = wait_for(lambda: (lambda r: r if r[0] else None)(counted()), 10, 0.5) or counted()
    check("sandbox metrics carry the gateway's counters", ok, met)
    st, _, text = c.raw("GET", "/metrics", auth=False)
    check("/metrics exports the gateway's memory and totals",
          b"airlock_gateway_rss_bytes " in text and b"airlock_gateway_requests_denied " in text,
          text[-600:])
    return sid

def test_secret_never_in_guest(d, c, sid, token):
    c.call("POST", f"/v1/sandboxes/{sid}/suspend", {})
    snap = os.path.join(d.dir, "snapshots")
    found = subprocess.run(["grep", "-rlaF", token, snap], capture_output=True, text=True).stdout
    check("the secret value is in no snapshot file (guest memory, disk, device state)",
          found.strip() == "" and os.path.isdir(snap), found)
    logs = subprocess.run(["grep", "-rlaF", token, os.path.join(d.dir, "logs"),
                           os.path.join(d.dir, "audit"), os.path.join(d.dir, "airlockd.log")],
                          capture_output=True, text=True).stdout
    check("the secret value is in no log (airlockd, gateway, audit, console)", logs.strip() == "", logs)
    c.call("POST", f"/v1/sandboxes/{sid}/resume", {})
    code, out, err = curl(c, sid, f"https://{ALLOWED}/after-resume")
    check("after suspend/resume the sandbox is attached to the gateway again",
          code == 0 and echo_json(out).get("role") == "allowed", out + err)
    c.call("DELETE", f"/v1/sandboxes/{sid}")

def test_full_mode(d, c, logs):
    sid = c.call("POST", "/v1/sandboxes", {"network": {"mode": "full"}})["id"]
    # Full mode splices TLS (no credential is bound to this host): the guest
    # sees the upstream's own certificate, from the test internet's CA.
    st, _, _ = c.raw("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/testnet-ca.pem",
                     open(testnet.paths()["ca"], "rb").read())
    check("uploaded the test internet's CA into the full-mode guest", st in (200, 201, 204), st)
    code, out, err = curl(c, sid, f"--cacert /tmp/testnet-ca.pem https://{UNLISTED}/full")
    check("full mode: an unlisted host is reachable",
          code == 0 and echo_json(out).get("role") == "unlisted", out + err)
    m = logs.mark()
    code, out, err = curl(c, sid, f"http://{N('metadata')}{P('mname')}")
    check("full mode: a name rebinding to the metadata address is still denied",
          code != 0 and not reached(logs, m, "metadata", "mname"), f"{code} {out} {err}")
    m = logs.mark()
    code, out, err = curl(c, sid, f"-o /dev/null -w '%{{http_code}}' --resolve {N('rebind-metadata')}:80:{A['unlisted']} "
                          f"http://{N('rebind-metadata')}{P('rebind')}")
    check("full mode: plain HTTP with a Host rebinding to metadata is dialled by name and denied",
          out.strip() in ("000", "403", "502") and not reached(logs, m, "metadata", "rebind") and not reached(logs, m, "unlisted", "rebind"),
          f"{code} {out} {err}")
    code, out, err = curl(c, sid, f"-o /dev/null -w '%{{http_code}}' --resolve {N('unlisted')}:80:{A['metadata']} "
                          f"http://{N('unlisted')}{P('aim')}")
    check("full mode: an allowed Host aimed at the metadata IP reaches the real host, never metadata",
          not reached(logs, m, "metadata", "aim"), f"{code} {out} {err}")
    code, out, err = curl(c, sid, "--max-time 5 http://10.0.0.1:7070/healthz")
    check("full mode: the host side of the island (10.0.0.1) is not a way in", code != 0,
          f"{code} {out}")
    c.call("DELETE", f"/v1/sandboxes/{sid}")



def run(binary, root):
    logs = testnet.Logs()
    token = "s3cr3t-" + secrets.token_hex(16)

    def body(d, c):
        c.call("PUT", "/v1/secrets/ECHO_TOKEN", {"value": token, "hosts": [ALLOWED],
               "header": "Authorization", "format": "Bearer {value}", "scope": "global"})

        def allowlist():
            sid = test_allowlist(d, c, logs, token)
            test_secret_never_in_guest(d, c, sid, token)

        run_sections((("allowlist", allowlist),
                      ("full", lambda: test_full_mode(d, c, logs))))

    return session(binary, root, gateway_env(), body)

if __name__ == "__main__":
    sys.exit(egress_harness.main(run))
