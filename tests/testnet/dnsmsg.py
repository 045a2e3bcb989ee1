"""Minimal DNS wire format (RFC 1035, 3596, 9460) for the test internet.

Used by the authoritative test server (servers.py) and by the test clients
that run inside the stand-in guest (tests/lib/egress_guest.py). Test
fixture code, not product code: bounded and strict enough not to hang on a
malformed message, nothing more.
"""
import ipaddress
import random
import struct

TYPES = {
    "A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15, "TXT": 16,
    "AAAA": 28, "SRV": 33, "OPT": 41, "SVCB": 64, "HTTPS": 65, "ANY": 255,
}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
CLASS_IN = 1


class DNSError(Exception):
    pass


def type_code(t):
    if isinstance(t, int):
        return t
    t = t.upper()
    if t in TYPES:
        return TYPES[t]
    if t.startswith("TYPE") and t[4:].isdigit():
        return int(t[4:])
    raise DNSError("unknown type %s" % t)


def type_name(code):
    return TYPE_NAMES.get(code, "TYPE%d" % code)


def encode_name(name):
    name = name.rstrip(".")
    out = b""
    if name:
        for label in name.split("."):
            raw = label.encode("ascii")
            if not 0 < len(raw) < 64:
                raise DNSError("bad label length in %r" % name)
            out += bytes([len(raw)]) + raw
    return out + b"\0"


def decode_name(msg, off):
    """Returns (name, offset after the name in the original position)."""
    labels = []
    end = None
    jumps = 0
    while True:
        if off >= len(msg):
            raise DNSError("name past end")
        n = msg[off]
        if n & 0xC0 == 0xC0:
            if off + 1 >= len(msg):
                raise DNSError("pointer past end")
            if end is None:
                end = off + 2
            off = ((n & 0x3F) << 8) | msg[off + 1]
            jumps += 1
            if jumps > 32:
                raise DNSError("pointer loop")
            continue
        if n & 0xC0:
            raise DNSError("bad label type")
        off += 1
        if n == 0:
            break
        if off + n > len(msg):
            raise DNSError("label past end")
        labels.append(msg[off:off + n].decode("latin-1"))
        off += n
    return ".".join(labels), (end if end is not None else off)


# --- rdata -----------------------------------------------------------------

def rdata_a(addr):
    return ipaddress.IPv4Address(addr).packed


def rdata_aaaa(addr):
    return ipaddress.IPv6Address(addr).packed


def rdata_txt(*strings):
    out = b""
    for s in strings:
        raw = s.encode() if isinstance(s, str) else s
        while True:
            out += bytes([min(len(raw), 255)]) + raw[:255]
            raw = raw[255:]
            if not raw:
                break
    return out


def rdata_soa(mname, rname, serial=1, refresh=3600, retry=600, expire=86400, minimum=30):
    return encode_name(mname) + encode_name(rname) + struct.pack(
        "!IIIII", serial, refresh, retry, expire, minimum)


def rdata_svcb(priority, target, params):
    """params: list of (key, value bytes), sorted by key as RFC 9460 requires."""
    out = struct.pack("!H", priority) + encode_name(target)
    for key, val in sorted(params):
        out += struct.pack("!HH", key, len(val)) + val
    return out


def svc_alpn(*ids):
    return b"".join(bytes([len(i)]) + i.encode() for i in ids)


def rdata_for(rtype, value):
    """rdata bytes from a presentation-ish value (what the zone tables hold)."""
    if rtype == TYPES["A"]:
        return rdata_a(value)
    if rtype == TYPES["AAAA"]:
        return rdata_aaaa(value)
    if rtype in (TYPES["CNAME"], TYPES["NS"], TYPES["PTR"]):
        return encode_name(value)
    if rtype == TYPES["TXT"]:
        return rdata_txt(*(value if isinstance(value, (list, tuple)) else [value]))
    if isinstance(value, bytes):
        return value
    raise DNSError("no encoder for type %d" % rtype)


def rdata_text(rtype, msg, off, rdlen):
    """Readable form of one record's data (for test assertions)."""
    raw = msg[off:off + rdlen]
    if rtype == TYPES["A"] and rdlen == 4:
        return str(ipaddress.IPv4Address(raw))
    if rtype == TYPES["AAAA"] and rdlen == 16:
        return str(ipaddress.IPv6Address(raw))
    if rtype in (TYPES["CNAME"], TYPES["NS"], TYPES["PTR"]):
        return decode_name(msg, off)[0]
    if rtype == TYPES["TXT"]:
        parts, i = [], 0
        while i < len(raw):
            n = raw[i]
            parts.append(raw[i + 1:i + 1 + n].decode("latin-1"))
            i += 1 + n
        return " ".join('"%s"' % p for p in parts)
    return raw.hex()


# --- messages --------------------------------------------------------------

def build_query(name, qtype="A", qid=None, rd=True, edns=False):
    if qid is None:
        qid = random.randrange(0, 65536)
    flags = 0x0100 if rd else 0
    msg = struct.pack("!HHHHHH", qid, flags, 1, 0, 0, 1 if edns else 0)
    msg += encode_name(name) + struct.pack("!HH", type_code(qtype), CLASS_IN)
    if edns:
        msg += b"\0" + struct.pack("!HHIH", TYPES["OPT"], 1232, 0, 0)
    return msg


def parse(msg):
    """A dict: id, flags, rcode, qd [(name, type, class)], an/ns/ar [records]."""
    if len(msg) < 12:
        raise DNSError("short message")
    qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", msg[:12])
    off = 12
    out = {"id": qid, "flags": flags, "qr": bool(flags & 0x8000), "opcode": (flags >> 11) & 0xF,
           "aa": bool(flags & 0x0400), "tc": bool(flags & 0x0200), "rd": bool(flags & 0x0100),
           "ra": bool(flags & 0x0080), "rcode": flags & 0xF,
           "qd": [], "an": [], "ns": [], "ar": []}
    for _ in range(qd):
        name, off = decode_name(msg, off)
        if off + 4 > len(msg):
            raise DNSError("question past end")
        t, c = struct.unpack("!HH", msg[off:off + 4])
        off += 4
        out["qd"].append((name, t, c))
    for sect, count in (("an", an), ("ns", ns), ("ar", ar)):
        for _ in range(count):
            name, off = decode_name(msg, off)
            if off + 10 > len(msg):
                raise DNSError("record past end")
            t, c, ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
            off += 10
            if off + rdlen > len(msg):
                raise DNSError("rdata past end")
            out[sect].append({"name": name, "type": type_name(t), "class": c, "ttl": ttl,
                              "data": rdata_text(t, msg, off, rdlen),
                              "raw": msg[off:off + rdlen]})
            off += rdlen
    out["rcode_name"] = RCODES.get(out["rcode"], str(out["rcode"]))
    return out


def build_response(query, rcode, answers=(), authority=(), aa=True, ra=True, edns=False,
                   max_size=None):
    """answers/authority: (name, type code, ttl, rdata bytes). query: parse() dict.

    With max_size set (UDP), an answer that does not fit is sent truncated
    (TC, no records) so the client retries over TCP."""
    flags = 0x8000 | (query["opcode"] << 11) | (0x0100 if query["rd"] else 0) | (rcode & 0xF)
    if aa:
        flags |= 0x0400
    if ra:
        flags |= 0x0080

    def header(fl, an, ns, ar):
        return struct.pack("!HHHHHH", query["id"], fl, len(query["qd"]), an, ns, ar)

    qsec = b"".join(encode_name(n) + struct.pack("!HH", t, c) for n, t, c in query["qd"])

    def rr(r):
        name, t, ttl, rdata = r
        return encode_name(name) + struct.pack("!HHIH", t, CLASS_IN, ttl, len(rdata)) + rdata

    opt = b"\0" + struct.pack("!HHIH", TYPES["OPT"], 1232, 0, 0) if edns else b""
    body = qsec + b"".join(rr(r) for r in answers) + b"".join(rr(r) for r in authority) + opt
    msg = header(flags, len(answers), len(authority), 1 if edns else 0) + body
    if max_size is not None and len(msg) > max_size:
        msg = header(flags | 0x0200, 0, 0, 1 if edns else 0) + qsec + opt
    return msg


def has_edns(query):
    return any(r["type"] == "OPT" for r in query["ar"])
