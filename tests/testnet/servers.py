#!/usr/bin/env python3
"""Fixture servers of the test internet (started by testnet.py, one process
per namespace; test fixtures, not product code).

  --role internet   (in airlock-tnet) every service of the outside world
  --role host       (in airlock-tup)  listeners on the gateway host's own
                    addresses: airlockd's API stand-in on 7070 and others

Every TCP listener binds the wildcard address and decides what to be from
the destination address of the connection (testnet.ADDR), so a connection
to any address, even one no test expected, reaches a server that logs it.
TCP to ports without a service is redirected by nftables to the catch-all
(port 9), which logs the original destination. A packet sniffer on tnet0
logs every SYN, UDP datagram, ICMP message and any packet whose source is
not the gateway host.

Logs: DIR/logs/<role>.log, JSON lines {"t": unix time, "event": ..., ...}.
Events: conn (TCP accepted), tls (handshake: sni, alpn, or error), request
(HTTP: method, target, host, headers, body), ws (WebSocket message),
connect (proxy CONNECT), query (DNS), udp (datagram), packet (sniffer).
"""
import argparse
import base64
import hashlib
import ipaddress
import json
import os
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dnsmsg  # noqa: E402
import testnet as tn  # noqa: E402

LOGDIR = None
_loglocks = {}
_loglock = threading.Lock()
_conn_seq = [0]


def log(role, event, at=None, **fields):
    rec = {"t": round(at or time.time(), 6), "role": role, "event": event}
    rec.update(fields)
    line = json.dumps(rec, separators=(",", ":"), default=str) + "\n"
    with _loglock:
        lock = _loglocks.setdefault(role, threading.Lock())
    with lock:
        with open(os.path.join(LOGDIR, role + ".log"), "a") as f:
            f.write(line)


def next_conn():
    with _loglock:
        _conn_seq[0] += 1
        return _conn_seq[0]


# --- who answers where -----------------------------------------------------

ROLE_BY_ADDR = {}
for _role, _a in tn.ADDR.items():
    for _x in (_a if isinstance(_a, list) else [_a]):
        ROLE_BY_ADDR[str(ipaddress.ip_address(_x))] = _role
for _n in ("127.0.0.1", "::1"):
    ROLE_BY_ADDR[_n] = "private"


def role_for(ip):
    try:
        ip = str(ipaddress.ip_address(ip.split("%")[0]))
    except ValueError:
        return "catchall"
    if ip.startswith("::ffff:"):
        ip = ip[7:]
    return ROLE_BY_ADDR.get(ip, "catchall")


# --- TLS -------------------------------------------------------------------

CTX = {}          # cert role -> SSLContext
NAME_CTX = {}     # DNS name -> SSLContext


def tls_setup(certdir):
    for role, sans in tn.CERTS.items():
        for alpn in ("http", "dot"):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(os.path.join(certdir, role + ".pem"),
                                os.path.join(certdir, role + ".key"))
            ctx.set_alpn_protocols(["http/1.1"] if alpn == "http" else ["dot"])
            ctx.sni_callback = _sni_cb
            CTX[(role, alpn)] = ctx
        for s in sans:
            NAME_CTX[s.lower()] = role


def _sni_cb(sslsock, server_name, ctx):
    sslsock._tn_sni = server_name
    if server_name and server_name.lower() in NAME_CTX:
        alpn = "dot" if getattr(sslsock, "_tn_alpn", "http") == "dot" else "http"
        sslsock.context = CTX[(NAME_CTX[server_name.lower()], alpn)]
    return None


def tls_wrap(sock, role, info, alpn="http"):
    """Handshake as the server for role (cert by SNI). None on failure."""
    cert_role = role if (role, alpn) in CTX else "catchall"
    if role == "cdn":
        cert_role = "cdn-a"
    ctx = CTX[(cert_role, alpn)]
    try:
        ss = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        ss._tn_alpn = alpn
        ss._tn_sni = None
        ss.do_handshake()
    except (ssl.SSLError, OSError) as e:
        log(role, "tls", ok=False, error=str(e), **info)
        return None
    info["sni"] = ss._tn_sni
    info["tls"] = True
    log(role, "tls", ok=True, alpn=ss.selected_alpn_protocol(), version=ss.version(), **info)
    return ss


# --- HTTP ------------------------------------------------------------------

MAX_BODY = 1 << 20


class HTTPError(Exception):
    pass


def read_request(f):
    line = f.readline(8192)
    while line in (b"\r\n", b"\n"):
        line = f.readline(8192)
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise HTTPError("request line too long")
    parts = line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) != 3:
        raise HTTPError("bad request line %r" % line[:100])
    method, target, version = parts
    headers = []
    for _ in range(200):
        h = f.readline(65536)
        if not h:
            raise HTTPError("eof in headers")
        if h in (b"\r\n", b"\n"):
            break
        k, sep, v = h.decode("latin-1").partition(":")
        if not sep:
            raise HTTPError("bad header %r" % h[:100])
        headers.append([k.strip(), v.strip()])
    else:
        raise HTTPError("too many headers")
    return method, target, version, headers


def hget(headers, name):
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def read_body(f, headers):
    te = (hget(headers, "transfer-encoding") or "").lower()
    if "chunked" in te:
        body = b""
        while True:
            size = int(f.readline(1024).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while f.readline(8192) not in (b"\r\n", b"\n", b""):
                    pass
                return body
            body += f.read(size)
            f.readline(8)
            if len(body) > MAX_BODY:
                raise HTTPError("body too large")
    n = int(hget(headers, "content-length") or 0)
    if n > MAX_BODY:
        raise HTTPError("body too large")
    return f.read(n) if n else b""


def send_response(sock, status, body, ctype="application/json", close=False, extra=()):
    reason = {200: "OK", 101: "Switching Protocols", 400: "Bad Request", 404: "Not Found",
              405: "Method Not Allowed", 502: "Bad Gateway"}.get(status, "Status")
    head = "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: %s\r\n" % (
        status, reason, ctype, len(body), "close" if close else "keep-alive")
    for k, v in extra:
        head += "%s: %s\r\n" % (k, v)
    sock.sendall(head.encode("latin-1") + b"\r\n" + body)


def serve_http(sock, role, info):
    f = sock.makefile("rb")
    n = 0
    while True:
        try:
            req = read_request(f)
        except (HTTPError, OSError, ValueError) as e:
            log(role, "http-error", error=str(e), **info)
            return
        if req is None:
            return
        method, target, version, headers = req
        n += 1
        try:
            body = b"" if method == "CONNECT" else read_body(f, headers)
        except (HTTPError, OSError, ValueError) as e:
            log(role, "http-error", error=str(e), **info)
            return
        path = urllib.parse.urlsplit(target).path if "://" in target else target.split("?")[0]
        rec = dict(info, req=n, method=method, target=target, path=path, version=version,
                   host=hget(headers, "host"), headers=headers,
                   body=body[:65536].decode("latin-1"))
        log(role, "request", **rec)
        close = (hget(headers, "connection") or "").lower() == "close" or version == "HTTP/1.0"

        if method == "CONNECT":
            if role == "proxy":
                return proxy_connect(sock, f, role, info, target)
            send_response(sock, 405, b'{"error":"no CONNECT here"}\n', close=True)
            return
        upgrade = (hget(headers, "upgrade") or "").lower()
        if upgrade == "websocket" and path.startswith("/ws"):
            return ws_echo(sock, f, role, info, headers)
        if role == "doh" and path == "/dns-query":
            doh(sock, role, info, method, target, body, close)
        elif path.startswith("/bytes/") and path[7:].isdigit():
            # Bulk download for bench/gateway.py: N bytes, streamed.
            total = min(int(path[7:]), 1 << 31)
            sock.sendall(("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                          "Content-Length: %d\r\nConnection: %s\r\n\r\n"
                          % (total, "close" if close else "keep-alive")).encode())
            chunk = bytes(1 << 20)
            while total > 0:
                k = min(total, len(chunk))
                sock.sendall(chunk[:k])
                total -= k
        else:
            out = {k: rec[k] for k in ("role", "sni", "tls", "method", "target", "path", "version",
                                       "host", "headers", "body", "conn", "req", "peer", "dst")
                   if k in rec}
            out["role"] = role
            if path.startswith("/cred"):
                # A credential test: the log has the headers; the answer
                # only their names and hashes, so the guest never reads a
                # secret back from an echo.
                out["headers"] = [[k, "sha256:" + hashlib.sha256(v.encode()).hexdigest()]
                                  for k, v in headers]
                out.pop("body", None)
            if role in ("metadata", "metadata6"):
                out["AccessKeyId"] = "ASIATESTNETMETADATA"
                out["SecretAccessKey"] = "testnet-metadata-secret"
            send_response(sock, 200, json.dumps(out).encode() + b"\n", close=close,
                          extra=[("X-Testnet-Role", role)])
        if close:
            return


# --- WebSocket echo (RFC 6455, enough for tests) ---------------------------

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_echo(sock, f, role, info, headers):
    key = hget(headers, "sec-websocket-key") or ""
    accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
    sock.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
    log(role, "ws-open", **info)
    while True:
        hdr = f.read(2)
        if len(hdr) < 2:
            return
        op = hdr[0] & 0x0F
        masked = hdr[1] & 0x80
        ln = hdr[1] & 0x7F
        if ln == 126:
            ln = struct.unpack("!H", f.read(2))[0]
        elif ln == 127:
            ln = struct.unpack("!Q", f.read(8))[0]
        if ln > MAX_BODY:
            return
        mask = f.read(4) if masked else b"\0\0\0\0"
        data = bytearray(f.read(ln))
        for i in range(len(data)):
            data[i] ^= mask[i % 4]
        if op == 8:
            sock.sendall(bytes([0x88, 0]))
            return
        if op == 9:
            op = 10
        log(role, "ws", opcode=op, data=data.decode("latin-1"), **info)
        sock.sendall(ws_frame(op, bytes(data)))


def ws_frame(op, data):
    n = len(data)
    if n < 126:
        head = bytes([0x80 | op, n])
    elif n < 65536:
        head = bytes([0x80 | op, 126]) + struct.pack("!H", n)
    else:
        head = bytes([0x80 | op, 127]) + struct.pack("!Q", n)
    return head + data


# --- open proxy ------------------------------------------------------------

def proxy_connect(sock, f, role, info, target):
    host, _, port = target.rpartition(":")
    host = host.strip("[]")
    log(role, "connect", target=target, **info)
    addr = host
    if not _is_ip(host):
        rc, answers, _ = zone_resolve(host, dnsmsg.TYPES["A"])
        addrs = [a for a in answers if a[1] == dnsmsg.TYPES["A"]]
        if not addrs:
            send_response(sock, 502, b'{"error":"cannot resolve"}\n', close=True)
            return
        addr = str(ipaddress.IPv4Address(addrs[-1][3]))
    try:
        up = socket.create_connection((addr, int(port)), timeout=10)
    except (OSError, ValueError) as e:
        send_response(sock, 502, json.dumps({"error": str(e)}).encode(), close=True)
        return
    sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    log(role, "tunnel", target=target, **info)
    splice(f, sock, up)


def splice(f, sock, up):
    def pump_up():
        try:
            while True:
                d = f.read1(65536)
                if not d:
                    break
                up.sendall(d)
        except OSError:
            pass
        try:
            up.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    t = threading.Thread(target=pump_up, daemon=True)
    t.start()
    try:
        while True:
            d = up.recv(65536)
            if not d:
                break
            sock.sendall(d)
    except OSError:
        pass
    t.join(30)
    up.close()


def _is_ip(s):
    try:
        ipaddress.ip_address(s)
        return True
    except ValueError:
        return False


# --- DNS -------------------------------------------------------------------

TTL = 30
_flip = {"n": 0}
_flip_lock = threading.Lock()


def zone_records(qn):
    """Records of one owner name: {type code: [rdata]} or None (no such name)."""
    T = dnsmsg.TYPES
    if qn == tn.ZONE:
        return {T["SOA"]: [dnsmsg.rdata_soa(tn.name("ns"), "hostmaster." + tn.ZONE)],
                T["NS"]: [dnsmsg.encode_name(tn.name("ns"))]}
    label = qn[:-len(tn.ZONE) - 1]
    if label == "flip":
        with _flip_lock:
            _flip["n"] += 1
            odd = _flip["n"] % 2 == 1
        return {T["A"]: [dnsmsg.rdata_a(tn.ADDR["allowed"] if odd else tn.ADDR["metadata"])]}
    if label.endswith(".tunnel"):
        return {T["A"]: [dnsmsg.rdata_a(tn.ADDR["allowed"])],
                T["TXT"]: [dnsmsg.rdata_txt("tunnel-reply")]}
    spec = tn.NAMES.get(label)
    if spec is None:
        return None
    out = {}
    for t, v in spec.items():
        code = T[t]
        if t == "HTTPS" or t == "SVCB":
            params = [(1, dnsmsg.svc_alpn("h2", "h3")),
                      (4, ipaddress.IPv4Address(tn.ADDR["forbidden"]).packed),
                      (5, b"\x00\x08fake-ech")]
            out[code] = [dnsmsg.rdata_svcb(1, ".", params)]
        elif t == "CNAME":
            out[code] = [dnsmsg.encode_name(v)]
        else:
            out[code] = [dnsmsg.rdata_for(code, x) for x in v]
    return out


def zone_resolve(qname, qtype):
    """(rcode, answers, authority) as a recursive resolver would answer:
    CNAME chains are followed inside the zone."""
    T = dnsmsg.TYPES
    qn = qname.lower().rstrip(".")
    if not (qn == tn.ZONE or qn.endswith("." + tn.ZONE)):
        return 5, [], []
    soa = [(tn.ZONE, T["SOA"], TTL, dnsmsg.rdata_soa(tn.name("ns"), "hostmaster." + tn.ZONE))]
    answers = []
    cur = qn
    ttl = 1 if qn == tn.name("flip") else TTL
    for _ in range(8):
        recs = zone_records(cur)
        if recs is None:
            return 3, answers, soa
        if T["CNAME"] in recs and qtype != T["CNAME"]:
            target = recs[T["CNAME"]][0]
            answers.append((cur, T["CNAME"], ttl, target))
            cur = dnsmsg.decode_name(target, 0)[0].lower()
            continue
        for t, rdatas in recs.items():
            if qtype == t or qtype == T["ANY"]:
                answers.extend((cur, t, ttl, r) for r in rdatas)
        break
    return 0, answers, ([] if answers else soa)


def dns_answer(wire, role, info, transport, max_size=None):
    try:
        q = dnsmsg.parse(wire)
    except dnsmsg.DNSError as e:
        log(role, "query", transport=transport, error=str(e), size=len(wire), **info)
        return None
    if q["qr"] or len(q["qd"]) != 1 or q["opcode"] != 0:
        log(role, "query", transport=transport, error="not a plain query", **info)
        return dnsmsg.build_response(q, 1, max_size=max_size)
    qname, qtype, _ = q["qd"][0]
    rcode, answers, auth = zone_resolve(qname, qtype)
    log(role, "query", transport=transport, qname=qname, qtype=dnsmsg.type_name(qtype),
        rcode=dnsmsg.RCODES.get(rcode), answers=len(answers), **info)
    edns = dnsmsg.has_edns(q)
    if max_size is not None:
        max_size = 1232 if edns else 512
    return dnsmsg.build_response(q, rcode, answers, auth, edns=edns, max_size=max_size)


def dns_tcp(sock, role, info, transport="tcp"):
    f = sock.makefile("rb")
    while True:
        n = f.read(2)
        if len(n) < 2:
            return
        wire = f.read(struct.unpack("!H", n)[0])
        out = dns_answer(wire, role, info, transport)
        if out is None:
            return
        sock.sendall(struct.pack("!H", len(out)) + out)


def doh(sock, role, info, method, target, body, close):
    if method == "GET":
        qs = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
        b64 = (qs.get("dns") or [""])[0]
        wire = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))
    else:
        wire = body
    out = dns_answer(wire, role, info, "doh")
    if out is None:
        send_response(sock, 400, b"bad dns message\n", ctype="text/plain", close=True)
        return
    send_response(sock, 200, out, ctype="application/dns-message", close=close)


# --- TCP dispatch ----------------------------------------------------------

SOL_IPV6 = 41
SO_ORIGINAL_DST = 80


def original_dst(sock, family):
    if family == socket.AF_INET:
        raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        port = struct.unpack("!H", raw[2:4])[0]
        return str(ipaddress.IPv4Address(raw[4:8])), port
    raw = sock.getsockopt(SOL_IPV6, SO_ORIGINAL_DST, 28)
    port = struct.unpack("!H", raw[2:4])[0]
    return str(ipaddress.IPv6Address(raw[8:24])), port


def fmt(ip, port):
    return ("[%s]:%d" if ":" in ip else "%s:%d") % (ip, port)


def raw_capture(sock, role, info, banner=None):
    """Log the first bytes the client sends (no protocol), then close."""
    if banner:
        try:
            sock.sendall(banner)
        except OSError:
            return
    sock.settimeout(3)
    try:
        data = sock.recv(4096)
    except OSError:
        data = b""
    log(role, "data", data=data[:512].decode("latin-1"), size=len(data), **info)


def handle_internet(sock, port, family):
    peer = sock.getpeername()
    dst = sock.getsockname()
    dst_ip, dst_port = dst[0], dst[1]
    if port == tn.CATCHALL_PORT:
        try:
            dst_ip, dst_port = original_dst(sock, family)
        except OSError:
            pass
    role = role_for(dst_ip)
    if port == tn.CATCHALL_PORT:
        role = "catchall"
    info = {"conn": next_conn(), "peer": fmt(peer[0], peer[1]), "dst": fmt(dst_ip, dst_port),
            "tls": False}
    log(role, "conn", **info)
    sock.settimeout(30)
    try:
        if port == tn.CATCHALL_PORT:
            raw_capture(sock, role, info, b"catchall\n")
        elif port == 53:
            if role in ("dns", "dns-alt"):
                dns_tcp(sock, role, info)
            else:
                raw_capture(sock, role, info)
        elif port == 80:
            serve_http(sock, role, info)
        elif port in (443, 8443):
            ss = tls_wrap(sock, role, info)
            if ss:
                serve_http(ss, role, info)
        elif port == 853:
            ss = tls_wrap(sock, role, info, alpn="dot")
            if ss:
                dns_tcp(ss, role, info, transport="dot")
        elif port == 3128:
            if role == "proxy":
                serve_http(sock, role, info)
            else:
                raw_capture(sock, role, info)
        elif port == 5432:
            if role == "db":
                db_service(sock, role, info)
            else:
                raw_capture(sock, role, info)
    except OSError as e:
        log(role, "conn-error", error=str(e), **info)
    finally:
        try:
            sock.close()
        except OSError:
            pass


def db_service(sock, role, info):
    """A line echo behind a banner (the host:port rule target)."""
    sock.sendall(b"TESTNET-DB ready\n")
    f = sock.makefile("rb")
    while True:
        line = f.readline(65536)
        if not line:
            return
        log(role, "data", data=line.decode("latin-1"), **info)
        sock.sendall(b"echo " + line)


def handle_host(sock, port, family):
    peer = sock.getpeername()
    dst = sock.getsockname()
    info = {"conn": next_conn(), "peer": fmt(peer[0], peer[1]), "dst": fmt(dst[0], dst[1]),
            "tls": False}
    log("host", "conn", **info)
    sock.settimeout(30)
    try:
        if port in (80, 7070):
            serve_http(sock, "host", info)
        else:
            raw_capture(sock, "host", info)
    except OSError as e:
        log("host", "conn-error", error=str(e), **info)
    finally:
        sock.close()


def tcp_listen(port, family, handler):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", port))
    s.listen(128)

    def loop():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                continue
            threading.Thread(target=handler, args=(c, port, family), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


# --- UDP -------------------------------------------------------------------

def udp_listen(addr, port, kind):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    role = role_for(addr)

    def loop():
        while True:
            try:
                data, peer = s.recvfrom(65535)
            except OSError:
                continue
            info = {"peer": fmt(peer[0], peer[1]), "dst": fmt(addr, port)}
            if kind == "dns":
                out = dns_answer(data, role, info, "udp", max_size=512)
                if out is not None:
                    s.sendto(out, peer)
            else:
                log(role, "udp", size=len(data), data=data[:256].hex(), **info)
                s.sendto(data, peer)
    threading.Thread(target=loop, daemon=True).start()


# --- packet log ------------------------------------------------------------

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
GATEWAY_SOURCES = {tn.UP_ADDR, tn.UP_ADDR6}


SO_TIMESTAMPNS = 35


def sniff(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((ifname, 0))
    # The kernel's arrival time, not when this thread got to the packet:
    # tests compare it with the time they started an attack.
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def loop():
        while True:
            try:
                pkt, anc, _, addr = s.recvmsg(65535, 64)
            except OSError:
                continue
            if addr[2] == PACKET_OUTGOING:
                continue
            when = None
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
                    sec, nsec = struct.unpack("qq", data[:16])
                    when = sec + nsec / 1e9
            try:
                rec = packet_summary(pkt)
            except (struct.error, ValueError, IndexError):
                rec = {"proto": "unparsed", "len": len(pkt)}
            if rec is None:
                continue
            log("packets", "packet", at=when, **rec)
    threading.Thread(target=loop, daemon=True).start()


def packet_summary(pkt):
    """A dict for packets worth logging (SYN, UDP, ICMP, anything foreign)."""
    etype = struct.unpack("!H", pkt[12:14])[0]
    smac = ":".join("%02x" % b for b in pkt[6:12])
    if etype == 0x0806:
        sip = str(ipaddress.IPv4Address(pkt[28:32]))
        if sip in GATEWAY_SOURCES:
            return None
        return {"proto": "arp", "src": sip, "dst": str(ipaddress.IPv4Address(pkt[38:42])),
                "smac": smac, "foreign": True}
    if etype == 0x0800:
        ip = pkt[14:]
        ihl = (ip[0] & 0x0F) * 4
        proto = ip[9]
        src = str(ipaddress.IPv4Address(ip[12:16]))
        dst = str(ipaddress.IPv4Address(ip[16:20]))
        l4 = ip[ihl:]
    elif etype == 0x86DD:
        ip = pkt[14:]
        proto = ip[6]
        src = str(ipaddress.IPv6Address(ip[8:24]))
        dst = str(ipaddress.IPv6Address(ip[24:40]))
        l4 = ip[40:]
    else:
        return {"proto": "ethertype-%04x" % etype, "smac": smac, "len": len(pkt), "foreign": True}
    # The link's own IPv6 housekeeping (DAD from ::, link-local ND/MLD)
    # comes from the gateway host too.
    link = src == "::" or src.startswith("fe80:")
    if link and (proto in (0, 58)):
        return None
    foreign = src not in GATEWAY_SOURCES and not link
    rec = {"src": src, "dst": dst, "len": len(pkt), "smac": smac, "foreign": foreign}
    if proto == 6:
        flags = l4[13]
        rec.update(proto="tcp", sport=struct.unpack("!H", l4[0:2])[0],
                   dport=struct.unpack("!H", l4[2:4])[0], flags=flags)
        if not (flags & 0x02 and not flags & 0x10) and not foreign:
            return None  # only SYNs, unless foreign
    elif proto == 17:
        rec.update(proto="udp", sport=struct.unpack("!H", l4[0:2])[0],
                   dport=struct.unpack("!H", l4[2:4])[0])
    elif proto == 1:
        rec.update(proto="icmp", type=l4[0], code=l4[1])
    elif proto == 58:
        if l4[0] in (133, 134, 135, 136, 143) and not foreign:
            return None  # neighbour discovery / MLD of the link itself
        rec.update(proto="icmpv6", type=l4[0], code=l4[1])
    else:
        rec.update(proto="ip-%d" % proto)
    return rec


# --- main ------------------------------------------------------------------

def main():
    global LOGDIR
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", choices=("internet", "host"), required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    p = tn.paths(args.dir)
    LOGDIR = p["logs"]
    os.makedirs(LOGDIR, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    if args.role == "internet":
        tls_setup(p["certs"])
        for port in tn.TCP_PORTS + [tn.CATCHALL_PORT]:
            for fam in (socket.AF_INET, socket.AF_INET6):
                tcp_listen(port, fam, handle_internet)
        for a in (tn.ADDR["dns"], tn.ADDR["dns-alt"]):
            udp_listen(a, 53, "dns")
        for a, port in ((tn.ADDR["allowed"], 7), (tn.ADDR["allowed"], 443),
                        (tn.ADDR["cdn"], 443), (tn.ADDR["forbidden"], 443),
                        (tn.ADDR["unlisted"], 443), (tn.ADDR["v6"], 443),
                        (tn.ADDR["doh"], 853), (tn.ADDR["doh"], 443)):
            udp_listen(a, port, "echo")
        sniff(tn.VETH_NET)
        ready = p["ready_net"]
    else:
        for port in tn.HOST_PORTS:
            for fam in (socket.AF_INET, socket.AF_INET6):
                tcp_listen(port, fam, handle_host)
        ready = p["ready_up"]
    with open(ready, "w") as f:
        f.write("%d\n" % os.getpid())
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
