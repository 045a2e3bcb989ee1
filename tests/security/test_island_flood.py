#!/usr/bin/env python3
"""A guest's flood at its island (issue 11), with a real microVM (TCG here),
the real daemon and gateway, against the test internet (tests/testnet):
UDP to random ports, QUIC, a ping flood of 10.0.0.1, other ICMP, spoofed
sources, IPv6 and a SYN flood are dropped by the island's nftables and
audited as deny_summary lines for that sandbox, counted per reason; none for
a quiet neighbour, which is served throughout.
Usage: test_island_flood.py AIRLOCKD (the data dir: $AIRLOCK_DATA_DIR)"""
import json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from egress_harness import (ALLOWED, P, check, create, curl_role, gateway_env,  # noqa: E402
                            run_sections, session, sh, wait_for)
import egress_harness   # noqa: E402

SWEEP_S = 2     # as in test_egress_life.py, where this case came from

FLOOD = r"""
import os, socket, struct, sys, time, random
out = {}
def n(k, v): out[k] = out.get(k, 0) + v
# UDP to random ports, at the gateway address and beyond (only UDP 53 is served).
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(1500):
    port = random.randrange(1024, 65535)
    if port in (53, 443): port = 9999
    try: u.sendto(b"x" * 32, ("10.0.0.1" if i % 2 else "192.0.2.%d" % (i % 250 + 1), port)); n("udp", 1)
    except OSError: pass
for i in range(200):
    try: u.sendto(b"q" * 32, ("192.0.2.9", 443)); n("quic", 1)
    except OSError: pass
# ICMP: a ping flood of 10.0.0.1 (over its 10/s), pings of the internet, timestamps.
def icmp(t, seq):
    h = struct.pack("!BBHHH", t, 0, 0, 7, seq) + b"p" * 16
    s = sum(struct.unpack("!%dH" % (len(h) // 2), h)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return h[:2] + struct.pack("!H", ~s & 0xffff) + h[4:]
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
for i in range(400):
    r.sendto(icmp(8, i), ("10.0.0.1", 0)); n("ping_gw", 1)
for i in range(150):
    r.sendto(icmp(8, i), ("192.0.2.1", 0)); n("icmp", 1)
    r.sendto(icmp(13, i), ("10.0.0.1", 0)); n("icmp", 1)
# Spoofed sources: IPv4 with another address (raw, header included).
sp = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for i in range(100):
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8, i, 0, 64, 17, 0,
                     socket.inet_aton("10.0.0.77"), socket.inet_aton("192.0.2.1"))
    sp.sendto(ip + struct.pack("!HHHH", 4000, 9, 8, 0), ("192.0.2.1", 0)); n("spoofed", 1)
# IPv6: the guest turned it off; root turns it on and sends.
try:
    open("/proc/sys/net/ipv6/conf/eth0/accept_dad", "w").write("0")   # usable at once
    open("/proc/sys/net/ipv6/conf/all/disable_ipv6", "w").write("0")
    open("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", "w").write("0")
    time.sleep(1)
    s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    idx = socket.if_nametoindex("eth0")
    for i in range(200):
        try: s6.sendto(b"6" * 16, ("ff02::1", 9, 0, idx)); n("ipv6", 1)
        except OSError as e: out["ipv6_err"] = str(e)
    open("/proc/sys/net/ipv6/conf/all/disable_ipv6", "w").write("1")
except OSError as e:
    out["ipv6_err"] = str(e)
# A SYN flood at 10.0.0.1: non-blocking connects, closed before they complete.
t = time.time()
for i in range(3000):
    s = socket.socket(); s.setblocking(False)
    s.connect_ex(("10.0.0.1", 80 + i % 2000)); s.close(); n("syn", 1)
out["syn_s"] = round(time.time() - t, 2)
print(__import__("json").dumps(out))
"""

def island_summaries(c, sid):
    recs = c.call("GET", f"/v1/audit?sandbox={sid}&decision=deny&limit=1000")["records"]
    return [r for r in recs if r.get("event") == "deny_summary"]

def by_reason(recs):
    out = {}
    for r in recs:
        out[r.get("reason")] = out.get(r.get("reason"), 0) + r.get("count", 0)
    return out

def test_island_flood(d, c):
    """Issue 11: a guest's UDP/ICMP/IPv6/spoofed/SYN flood at the island's
    gateway address is dropped by the island's nftables, and those drops
    are in the audit log as deny_summary lines for that sandbox (counted
    per reason and interval), none for a quiet neighbour; the SYN flood is
    bounded by the island's rate before it reaches the gateway."""
    att, _ = create(c)
    quiet, _ = create(c)
    time.sleep(6)       # a full read interval: anything the boots dropped is reported now
    base_att, base_quiet = by_reason(island_summaries(c, att)), island_summaries(c, quiet)
    c.raw("PUT", f"/v1/sandboxes/{att}/files?path=/tmp/flood.py", FLOOD.encode())
    code, out, err = sh(c, att, "python3 /tmp/flood.py", timeout_s=300)
    try:
        sent = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        sent = {}
    check("the flood ran in the guest", code == 0 and sent.get("syn") == 3000, out + err)
    print(f"     (sent: {sent})", flush=True)

    def got():
        r = by_reason(island_summaries(c, att))
        return {k: v - base_att.get(k, 0) for k, v in r.items()}
    want = ("UDP other than DNS", "QUIC (UDP 443) is not proxied", "ping over rate",
            "ICMP other than ping of the gateway", "source is not the guest's MAC and IP",
            "new connections over island rate")
    seen = wait_for(lambda: (lambda g: all(g.get(w, 0) > 0 for w in want) and g)(got()), 30, 1)
    g = got()
    print(f"     (audited drops for the attacker: {g})", flush=True)
    check("every kind of the flood has drop summaries for the attacker", seen, g)
    udp = g.get("UDP other than DNS", 0)
    check("UDP to random ports: every datagram counted (±5 %)",
          0.95 * sent.get("udp", 0) <= udp <= 1.05 * sent.get("udp", 0) + 5, (udp, sent))
    check("QUIC: every datagram counted", 0.95 * sent.get("quic", 0) <= g.get(
        "QUIC (UDP 443) is not proxied", 0) <= sent.get("quic", 0) + 5, g)
    check("ICMP beyond a ping of 10.0.0.1: every one counted",
          0.95 * sent.get("icmp", 0) <= g.get("ICMP other than ping of the gateway", 0)
          <= sent.get("icmp", 0) + 5, g)
    check("the ping flood of 10.0.0.1: all but the rate's few counted over rate",
          sent.get("ping_gw", 0) - 400 <= g.get("ping over rate", 0) <= sent.get("ping_gw", 0), g)
    check("spoofed sources counted",
          0.95 * sent.get("spoofed", 0) <= g.get("source is not the guest's MAC and IP", 0)
          <= sent.get("spoofed", 0) + 5, g)
    if "ipv6_err" not in sent:
        check("IPv6 counted", 0.95 * sent.get("ipv6", 0) <= g.get("IPv6 is not routed", 0), g)
    else:
        print(f"     (no IPv6 in this guest: {sent['ipv6_err']})", flush=True)
    syn = g.get("new connections over island rate", 0)
    check("SYN flood: the excess over the island's rate is dropped and counted, the rest "
          "reached the gateway", 0 < syn < sent.get("syn", 0), (syn, sent))
    recs = island_summaries(c, att)
    check("the summaries have the gateway's deny_summary shape",
          all(r.get("decision") == "deny" and r.get("window_ms", 0) > 0 and r.get("count", 0) > 0
              and r.get("kind") for r in recs), recs[:3])
    q = island_summaries(c, quiet)
    check("no drop summary for the quiet sandbox", len(q) == len(base_quiet) == 0, q[:5])
    role = curl_role(c, quiet, f"https://{ALLOWED}{P('quiet')}")
    check("the quiet sandbox is served during and after the flood", role == "allowed", role)
    for sid in (att, quiet):
        c.call("DELETE", f"/v1/sandboxes/{sid}")


def run(binary, root):
    return session(binary, root, gateway_env(AIRLOCK_SWEEP_INTERVAL_S=str(SWEEP_S)),
                   lambda d, c: run_sections((("island flood", lambda: test_island_flood(d, c)),)))


if __name__ == "__main__":
    sys.exit(egress_harness.main(run))
