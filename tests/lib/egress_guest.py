#!/usr/bin/python3
"""Client side of the egress matrix, run INSIDE the stand-in guest
(`ip netns exec airlock-tg-NAME /usr/bin/python3 egress_guest.py ...`):
what an agent that is root in its sandbox could try. Every subcommand
prints one JSON object on stdout and exits 0 (outcomes are data, the test
decides what they mean).

  dns NAME [--type T] [--server IP] [--tcp]
  req ADDR PORT [--tls] [--sni S|--no-sni] [--cacert F] [--alpn P]
        [--req 'METHOD HOST PATH'] ... [--header 'K: V'] ... [--body B]
        [--handshake-only]
  ws ADDR PORT --host H [--tls] [--cacert F] [--message M]
  udp IP PORT [--payload TEXT]
  tcp ADDR PORT [--send TEXT]
  requests URL --cacert F [--header 'K: V']       (python3-requests)
  raw-udp --src-ip IP --src-mac MAC --dst-mac MAC --dst-ip IP --dport P --payload-hex H
  raw-syn --src-ip IP --src-mac MAC --dst-mac MAC --dst-ip IP --dport P
  arp --sender-ip IP --sender-mac MAC --target-ip IP --dst-mac MAC [--op request|reply]

ADDR may be a name (resolved by the guest's own resolver: /etc/hosts,
then the DNS server in resolv.conf) or an address.
"""
import argparse
import base64
import json
import os
import select
import socket
import ssl
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testnet"))
import dnsmsg  # noqa: E402

TIMEOUT = 8


def out(obj):
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def err_text(e):
    return "%s: %s" % (type(e).__name__, e)


# --- dns -------------------------------------------------------------------

def cmd_dns(a):
    q = dnsmsg.build_query(a.name, a.type, edns=a.edns)
    fam = socket.AF_INET6 if ":" in a.server else socket.AF_INET
    try:
        if a.tcp:
            s = socket.create_connection((a.server, a.port), timeout=a.timeout)
            s.sendall(struct.pack("!H", len(q)) + q)
            ln = recv_exact(s, 2)
            wire = recv_exact(s, struct.unpack("!H", ln)[0])
            s.close()
        else:
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.settimeout(a.timeout)
            s.sendto(q, (a.server, a.port))
            wire, _ = s.recvfrom(65535)
        m = dnsmsg.parse(wire)
    except (OSError, dnsmsg.DNSError) as e:
        out({"ok": False, "error": err_text(e)})
        return
    out({"ok": True, "rcode": m["rcode_name"], "tc": m["tc"],
         "answers": [{"name": r["name"], "type": r["type"], "ttl": r["ttl"], "data": r["data"]}
                     for r in m["an"]]})


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise OSError("connection closed after %d of %d bytes" % (len(buf), n))
        buf += d
    return buf


# --- HTTP(S) ---------------------------------------------------------------

def connect(addr, port, tls, sni, no_sni, cacert, alpn):
    """A socket (TLS if asked) and a description of the handshake."""
    info = {}
    s = socket.create_connection((addr, port), timeout=TIMEOUT)
    if not tls:
        return s, info
    if cacert:
        ctx = ssl.create_default_context(cafile=cacert)
        if no_sni:
            ctx.check_hostname = False
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn.split(","))
    name = None if no_sni else (sni or addr)
    try:
        ss = ctx.wrap_socket(s, server_hostname=name)
    except (ssl.SSLError, OSError) as e:
        s.close()
        raise HandshakeError(err_text(e))
    info["alpn"] = ss.selected_alpn_protocol()
    info["version"] = ss.version()
    cert = ss.getpeercert(binary_form=False) if cacert else None
    if cert:
        info["issuer"] = dict(x[0] for x in cert.get("issuer", ()))
        info["subject_alt"] = [v for _, v in cert.get("subjectAltName", ())]
    return ss, info


class HandshakeError(Exception):
    pass


def read_response(f):
    line = f.readline(8192)
    if not line:
        raise OSError("connection closed before a response")
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    status = int(parts[1])
    headers = []
    while True:
        h = f.readline(65536)
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        headers.append([k.strip(), v.strip()])
    hd = {k.lower(): v for k, v in headers}
    if status == 101 or status == 204 or status == 304:
        body = b""
    elif "chunked" in hd.get("transfer-encoding", "").lower():
        body = b""
        while True:
            n = int(f.readline(1024).split(b";")[0].strip() or b"0", 16)
            if n == 0:
                f.readline(1024)
                break
            body += f.read(n)
            f.readline(8)
    elif "content-length" in hd:
        body = f.read(int(hd["content-length"]))
    else:
        body = f.read()
    r = {"status": status, "headers": headers, "body": body.decode("latin-1")}
    try:
        r["json"] = json.loads(body)
    except ValueError:
        pass
    return r


def cmd_req(a):
    reqs = a.req or ["GET %s /" % (a.sni or a.addr)]
    res = {"ok": True, "handshake": None, "responses": []}
    try:
        s, info = connect(a.addr, a.port, a.tls, a.sni, a.no_sni, a.cacert, a.alpn)
    except HandshakeError as e:
        out({"ok": False, "stage": "tls", "error": str(e), "responses": []})
        return
    except OSError as e:
        out({"ok": False, "stage": "connect", "error": err_text(e), "responses": []})
        return
    res["handshake"] = info
    f = s.makefile("rb")
    for r in ([] if a.handshake_only else reqs):
        method, host, path = r.split(" ", 2)
        body = a.body.encode() if a.body else b""
        head = "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: egress-guest\r\n" % (method, path, host)
        for h in a.header or []:
            head += h + "\r\n"
        if body or method in ("POST", "PUT"):
            head += "Content-Length: %d\r\n" % len(body)
        try:
            s.sendall(head.encode("latin-1") + b"\r\n" + body)
            res["responses"].append(read_response(f))
        except (OSError, ValueError, IndexError) as e:
            res["responses"].append({"error": err_text(e)})
            break
    try:
        s.close()
    except OSError:
        pass
    out(res)


# --- WebSocket -------------------------------------------------------------

def cmd_ws(a):
    try:
        s, info = connect(a.addr, a.port, a.tls, a.host, False, a.cacert, None)
    except (HandshakeError, OSError) as e:
        out({"ok": False, "stage": "connect", "error": str(e)})
        return
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
               % (a.path, a.host, key)).encode())
    f = s.makefile("rb")
    try:
        r = read_response(f)
    except (OSError, ValueError, IndexError) as e:
        out({"ok": False, "stage": "upgrade", "error": err_text(e)})
        return
    if r["status"] != 101:
        out({"ok": False, "stage": "upgrade", "status": r["status"], "body": r["body"][:500]})
        return
    data = a.message.encode()
    mask = os.urandom(4)
    frame = bytes([0x81, 0x80 | len(data)]) + mask + bytes(
        b ^ mask[i % 4] for i, b in enumerate(data))
    s.sendall(frame)
    try:
        hdr = f.read(2)
        ln = hdr[1] & 0x7F
        payload = f.read(ln)
    except (OSError, IndexError) as e:
        out({"ok": False, "stage": "echo", "error": err_text(e)})
        return
    out({"ok": True, "opcode": hdr[0] & 0x0F, "echo": payload.decode("latin-1")})


# --- plain sockets ---------------------------------------------------------

def cmd_udp(a):
    fam = socket.AF_INET6 if ":" in a.ip else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(a.timeout)
    try:
        s.sendto(a.payload.encode(), (a.ip, a.port))
        data, peer = s.recvfrom(65535)
        out({"ok": True, "sent": True, "reply": data.decode("latin-1"), "peer": peer[0]})
    except OSError as e:
        out({"ok": False, "sent": True, "reply": None, "error": err_text(e)})


def cmd_tcp(a):
    try:
        s = socket.create_connection((a.addr, a.port), timeout=a.timeout)
    except OSError as e:
        out({"ok": False, "connected": False, "error": err_text(e)})
        return
    data = b""
    try:
        if a.send:
            s.sendall(a.send.encode() + b"\n")
        s.settimeout(a.timeout)
        end = time.time() + a.timeout
        while time.time() < end:
            d = s.recv(4096)
            if not d:
                break
            data += d
            if a.send and a.send.encode() in data:
                break
    except OSError as e:
        out({"ok": True, "connected": True, "data": data.decode("latin-1"), "error": err_text(e)})
        return
    out({"ok": True, "connected": True, "data": data.decode("latin-1")})


def cmd_requests(a):
    try:
        import requests
    except ImportError as e:
        out({"ok": False, "error": "no requests module: %s" % e})
        return
    headers = dict(h.split(": ", 1) for h in a.header or [])
    try:
        r = requests.get(a.url, verify=a.cacert, headers=headers, timeout=TIMEOUT)
    except requests.RequestException as e:
        out({"ok": False, "error": err_text(e)})
        return
    res = {"ok": True, "status": r.status_code, "body": r.text[:65536],
           "version": requests.__version__}
    try:
        res["json"] = r.json()
    except ValueError:
        pass
    out(res)


# --- raw frames (spoofing) -------------------------------------------------

def mac_bytes(mac):
    return bytes(int(x, 16) for x in mac.split(":"))


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(src, dst, proto, payload):
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0x1234, 0x4000, 64, proto,
                      0, socket.inet_aton(src), socket.inet_aton(dst))
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    return hdr + payload


def l4_csum(src, dst, proto, seg):
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, proto, len(seg))
    return csum(pseudo + seg)


def raw_socket():
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind(("eth0", 0))
    return s


def listen_for(s, pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([s], [], [], max(0, end - time.time()))
        if not r:
            break
        pkt, addr = s.recvfrom(65535)
        if addr[2] == 4:  # PACKET_OUTGOING
            continue
        if pred(pkt):
            return pkt
    return None


def cmd_raw_udp(a):
    s = raw_socket()
    payload = bytes.fromhex(a.payload_hex)
    udp = struct.pack("!HHHH", a.sport, a.dport, 8 + len(payload), 0) + payload
    udp = udp[:6] + struct.pack("!H", l4_csum(a.src_ip, a.dst_ip, 17, udp)) + udp[8:]
    frame = mac_bytes(a.dst_mac) + mac_bytes(a.src_mac) + b"\x08\x00" + ipv4(
        a.src_ip, a.dst_ip, 17, udp)
    s.send(frame)

    def reply(pkt):
        return (pkt[12:14] == b"\x08\x00" and pkt[23] == 17
                and struct.unpack("!H", pkt[34:36])[0] == a.dport)
    got = listen_for(s, reply, a.timeout)
    out({"ok": True, "sent": True, "reply": got is not None})


def cmd_raw_syn(a):
    s = raw_socket()
    tcp = struct.pack("!HHIIBBHHH", a.sport, a.dport, 1000, 0, 5 << 4, 0x02, 64240, 0, 0)
    tcp = tcp[:16] + struct.pack("!H", l4_csum(a.src_ip, a.dst_ip, 6, tcp)) + tcp[18:]
    frame = mac_bytes(a.dst_mac) + mac_bytes(a.src_mac) + b"\x08\x00" + ipv4(
        a.src_ip, a.dst_ip, 6, tcp)
    s.send(frame)

    def reply(pkt):
        if pkt[12:14] != b"\x08\x00" or pkt[23] != 6:
            return False
        ihl = (pkt[14] & 0x0F) * 4
        t = pkt[14 + ihl:]
        return struct.unpack("!H", t[2:4])[0] == a.sport
    got = listen_for(s, reply, a.timeout)
    out({"ok": True, "sent": True, "reply": got is not None})


def cmd_arp(a):
    s = raw_socket()
    op = 1 if a.op == "request" else 2
    target_mac = b"\0" * 6 if op == 1 else mac_bytes(a.dst_mac)
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, mac_bytes(a.sender_mac),
                      socket.inet_aton(a.sender_ip), target_mac, socket.inet_aton(a.target_ip))
    frame = mac_bytes(a.dst_mac) + mac_bytes(a.sender_mac) + b"\x08\x06" + arp
    s.send(frame)

    def reply(pkt):
        return pkt[12:14] == b"\x08\x06" and struct.unpack("!H", pkt[20:22])[0] == 2 \
            and pkt[38:42] == socket.inet_aton(a.sender_ip)
    got = listen_for(s, reply, a.timeout)
    out({"ok": True, "sent": True, "reply": got is not None})


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("dns")
    p.add_argument("name")
    p.add_argument("--type", default="A")
    p.add_argument("--server", default="10.0.0.1")
    p.add_argument("--port", type=int, default=53)
    p.add_argument("--tcp", action="store_true")
    p.add_argument("--edns", action="store_true")
    p.add_argument("--timeout", type=float, default=4)

    p = sub.add_parser("req")
    p.add_argument("addr")
    p.add_argument("port", type=int)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--sni")
    p.add_argument("--no-sni", action="store_true")
    p.add_argument("--cacert")
    p.add_argument("--alpn")
    p.add_argument("--req", action="append")
    p.add_argument("--handshake-only", action="store_true")
    p.add_argument("--header", action="append")
    p.add_argument("--body")

    p = sub.add_parser("ws")
    p.add_argument("addr")
    p.add_argument("port", type=int)
    p.add_argument("--host", required=True)
    p.add_argument("--path", default="/ws")
    p.add_argument("--tls", action="store_true")
    p.add_argument("--cacert")
    p.add_argument("--message", default="hello")

    p = sub.add_parser("udp")
    p.add_argument("ip")
    p.add_argument("port", type=int)
    p.add_argument("--payload", default="ping")
    p.add_argument("--timeout", type=float, default=2)

    p = sub.add_parser("tcp")
    p.add_argument("addr")
    p.add_argument("port", type=int)
    p.add_argument("--send")
    p.add_argument("--timeout", type=float, default=4)

    p = sub.add_parser("requests")
    p.add_argument("url")
    p.add_argument("--cacert", required=True)
    p.add_argument("--header", action="append")

    for name in ("raw-udp", "raw-syn"):
        p = sub.add_parser(name)
        p.add_argument("--src-ip", required=True)
        p.add_argument("--src-mac", required=True)
        p.add_argument("--dst-mac", required=True)
        p.add_argument("--dst-ip", required=True)
        p.add_argument("--dport", type=int, required=True)
        p.add_argument("--sport", type=int, default=40000)
        p.add_argument("--payload-hex", default="")
        p.add_argument("--timeout", type=float, default=2)

    p = sub.add_parser("arp")
    p.add_argument("--sender-ip", required=True)
    p.add_argument("--sender-mac", required=True)
    p.add_argument("--target-ip", required=True)
    p.add_argument("--dst-mac", required=True)
    p.add_argument("--op", choices=("request", "reply"), default="reply")
    p.add_argument("--timeout", type=float, default=1)

    a = ap.parse_args()
    {"dns": cmd_dns, "req": cmd_req, "ws": cmd_ws, "udp": cmd_udp, "tcp": cmd_tcp,
     "requests": cmd_requests, "raw-udp": cmd_raw_udp, "raw-syn": cmd_raw_syn,
     "arp": cmd_arp}[a.cmd](a)


if __name__ == "__main__":
    main()
