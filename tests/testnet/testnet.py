#!/usr/bin/env python3
"""The test internet: network namespaces acting as the outside world.

    testnet.py up       create (or verify) everything; idempotent
    testnet.py down     remove everything up created; idempotent

Tests use acquire()/release() instead of up()/down(): the last live user
takes it down, so tests running at the same time do not pull it away from
each other, and one brought up with `up` (by hand, or up()) stays up until
`testnet.py down`, which removes it regardless.
    testnet.py status   exit 0 if up and healthy, 1 if not
    testnet.py env      shell variables describing it (for scripts)

Two namespaces, connected by a veth pair, nothing else touched:

  airlock-tup  (the gateway's upstream side: the gateway runs here in tests)
      tup0  192.0.2.2/24  2001:db8:1::2/64   default routes via tnet0
      fixture "host" servers (airlockd's API stand-in at 127.0.0.1:7070 and
      192.0.2.2:7070, and anything listening on the host's own addresses)
      /etc/netns/airlock-tup/resolv.conf -> the test DNS
  airlock-tnet (the internet)
      tnet0 192.0.2.1/24  2001:db8:1::1/64
      every other address is local here ("AnyIP" local routes): whatever
      the gateway dials ends up at a fixture
      server that logs it; the well-known fixture addresses are also on lo.

Only documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
2001:db8::/32) are used for the internet, plus the private/link-local
addresses the rebinding tests point at (they exist only inside airlock-tnet).
The host's own network namespace, routes and files are never modified,
except the /etc/netns/airlock-tup directory `ip netns exec` reads.

Servers log every connection, TLS handshake, request, DNS query and packet
as JSON lines in $DIR/logs/<role>.log (see servers.py). $DIR defaults to
/run/airlock-testnet (AIRLOCK_TESTNET_DIR overrides); down removes it.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

NS_NET = "airlock-tnet"
NS_UP = "airlock-tup"
VETH_UP = "tup0"
VETH_NET = "tnet0"
UP_ADDR = "192.0.2.2"
NET_ADDR = "192.0.2.1"
UP_ADDR6 = "2001:db8:1::2"
NET_ADDR6 = "2001:db8:1::1"

ZONE = "test-airlock.example"

# Well-known addresses inside the internet namespace and the role that
# answers there (servers.py dispatches on the destination address).
ADDR = {
    "dns": "198.51.100.53",        # authoritative DNS for ZONE (UDP+TCP 53)
    "dns-alt": "198.51.100.1",     # a second, "public" resolver (same data)
    "allowed": "203.0.113.10",     # HTTPS echo (443, 8443), HTTP 80, WebSocket /ws, UDP echo 7/443
    "cdn": "203.0.113.20",         # cdn-a and cdn-b by SNI, same address
    "forbidden": "203.0.113.30",
    "proxy": "203.0.113.40",       # open proxy: CONNECT on 80, 443 (TLS) and 3128
    "db": "203.0.113.50",          # TCP 5432 banner + echo
    "doh": "203.0.113.53",         # DoH (443 /dns-query), DoT (853), DoQ probe log (UDP 853)
    "unlisted": "203.0.113.60",    # HTTPS/HTTP echo never in an allowlist (full mode tests)
    "v6": "2001:db8:2::10",        # HTTPS/HTTP echo, IPv6 only
    "metadata": "169.254.169.254",  # cloud metadata look-alike (HTTP 80)
    "metadata6": "fd00:ec2::254",
    "private": ["10.0.0.1", "10.0.0.2", "192.168.1.1", "100.64.0.1"],
}


def name(label):
    return "%s.%s" % (label, ZONE) if label else ZONE


# Names and what they resolve to (servers.py builds the zone from this).
NAMES = {
    "allowed": {"A": [ADDR["allowed"]]},
    "cdn-a": {"A": [ADDR["cdn"]]},
    "cdn-b": {"A": [ADDR["cdn"]]},
    "forbidden": {"A": [ADDR["forbidden"]]},
    "proxy": {"A": [ADDR["proxy"]]},
    "db": {"A": [ADDR["db"]]},
    "doh": {"A": [ADDR["doh"]]},
    "unlisted": {"A": [ADDR["unlisted"]]},
    "unlisted2": {"A": [ADDR["unlisted"]]},
    "v6": {"AAAA": [ADDR["v6"]]},
    "v6dual": {"A": [ADDR["allowed"]], "AAAA": [ADDR["v6"]]},
    "rebind-private": {"A": ["10.0.0.1"]},
    "rebind-loopback": {"A": ["127.0.0.1"]},
    "rebind-metadata": {"A": [ADDR["metadata"]]},
    "rebind-rfc1918": {"A": ["192.168.1.1"]},
    "rebind-cgnat": {"A": ["100.64.0.1"]},
    "rebind-mixed": {"A": [ADDR["allowed"], "10.0.0.1", "192.168.1.1", ADDR["metadata"]]},
    "rebind-v6": {"AAAA": [ADDR["metadata6"], "::1"]},
    "metadata": {"A": [ADDR["metadata"]]},
    "host": {"A": [UP_ADDR]},          # the gateway host's own (upstream) address
    "sandbox": {"A": ["10.0.0.2"]},    # where every guest lives
    "cname1": {"CNAME": name("cname2")},
    "cname2": {"CNAME": name("cname3")},
    "cname3": {"CNAME": name("allowed")},
    "cname-private": {"CNAME": name("rebind-metadata")},
    "cname-forbidden": {"CNAME": name("forbidden")},
    "svcb": {"A": [ADDR["allowed"]], "TXT": ["v=airlock-test svcb"], "HTTPS": True, "SVCB": True},
    "txt": {"A": [ADDR["allowed"]], "TXT": ["v=airlock-test txt"]},
    "tunnel": {"A": [ADDR["allowed"]], "TXT": ["tunnel"]},
    "ns": {"A": [ADDR["dns"]]},
}
# *.tunnel.ZONE answers A allowed + TXT; "flip" answers public and private
# in turn with TTL 1 (rebinding after the check). See servers.py.

# Certificates minted from the test CA (not airlock's): role -> SAN names.
CERTS = {
    "allowed": [name(n) for n in ("allowed", "cname1", "cname2", "cname3", "svcb", "txt",
                                  "v6dual", "rebind-mixed", "flip", "tunnel")] + [ADDR["allowed"]],
    "cdn-a": [name("cdn-a")],
    "cdn-b": [name("cdn-b")],
    "forbidden": [name("forbidden"), name("cname-forbidden"), ADDR["forbidden"]],
    "proxy": [name("proxy"), ADDR["proxy"]],
    "db": [name("db"), ADDR["db"]],
    "doh": [name("doh"), ADDR["doh"]],
    "unlisted": [name("unlisted"), name("unlisted2"), ADDR["unlisted"]],
    "v6": [name("v6"), ADDR["v6"]],
    "catchall": [name("catchall"), name("rebind-private"), name("rebind-loopback"),
                 name("rebind-metadata"), name("rebind-rfc1918"), name("rebind-cgnat"),
                 name("metadata"), name("host"), name("sandbox"), name("cname-private"),
                 name("rebind-v6")],
}

# TCP ports with a real service; anything else is redirected to the
# catch-all (port 9, which reads SO_ORIGINAL_DST and logs).
TCP_PORTS = [53, 80, 443, 853, 3128, 5432, 8443]
CATCHALL_PORT = 9
# Ports the fixture "host" listens on in airlock-tup (0.0.0.0 and ::).
HOST_PORTS = [22, 80, 443, 5432, 7070, 8443]


def state_dir():
    return os.environ.get("AIRLOCK_TESTNET_DIR", "/run/airlock-testnet")


def paths(d=None):
    d = d or state_dir()
    return {
        "dir": d,
        "logs": os.path.join(d, "logs"),
        "ca": os.path.join(d, "ca", "ca.pem"),
        "ca_key": os.path.join(d, "ca", "ca.key"),
        "certs": os.path.join(d, "certs"),
        "ready_net": os.path.join(d, "ready.internet"),
        "ready_up": os.path.join(d, "ready.host"),
        "pid_net": os.path.join(d, "internet.pid"),
        "pid_up": os.path.join(d, "host.pid"),
    }


# --- helpers ---------------------------------------------------------------

def run(*argv, check=True, quiet=False, input=None):
    r = subprocess.run(argv, capture_output=True, text=True, input=input)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                                r.stderr.strip() or r.stdout.strip()))
    return r


def nsrun(ns, *argv, check=True, input=None):
    return run("ip", "netns", "exec", ns, *argv, check=check, input=input)


def netns_exists(ns):
    return os.path.exists(os.path.join("/run/netns", ns))


def pid_alive(pidfile):
    """The pid in pidfile if it is alive and is our servers.py, else None."""
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read()
    except (OSError, ValueError):
        return None
    return pid if b"servers.py" in cmd else None


# --- certificates ----------------------------------------------------------

def openssl(*args):
    run("openssl", *args, quiet=True)


def make_ca(d, cn, key, cert, days=30):
    os.makedirs(d, exist_ok=True)
    openssl("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", key, "-out", cert, "-days", str(days), "-subj", "/CN=" + cn,
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    os.chmod(key, 0o600)


def make_cert(ca_cert, ca_key, key, cert, cn, sans=(), ca=False, days=30):
    """A leaf (or, with ca=True, an intermediate CA) signed by ca_cert."""
    csr = cert + ".csr"
    ext = cert + ".ext"
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + cn)
    with open(ext, "w") as f:
        if ca:
            f.write("basicConstraints=critical,CA:TRUE,pathlen:0\n"
                    "keyUsage=critical,keyCertSign,cRLSign\n")
        else:
            alt = ",".join(("IP:" if _is_ip(s) else "DNS:") + s for s in sans)
            f.write("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature,keyEncipherment\n"
                    "extendedKeyUsage=serverAuth\n"
                    "subjectAltName=%s\n" % alt)
    openssl("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
            "-out", cert, "-days", str(days), "-extfile", ext)
    os.unlink(csr)
    os.unlink(ext)
    os.chmod(key, 0o600)


def _is_ip(s):
    import ipaddress
    try:
        ipaddress.ip_address(s)
        return True
    except ValueError:
        return False


def make_certs(p):
    make_ca(os.path.dirname(p["ca"]), "airlock test internet CA", p["ca_key"], p["ca"])
    os.makedirs(p["certs"], exist_ok=True)
    for role, sans in CERTS.items():
        make_cert(p["ca"], p["ca_key"], os.path.join(p["certs"], role + ".key"),
                  os.path.join(p["certs"], role + ".pem"), sans[0], sans)


def make_gateway_ca(d):
    """A throwaway root and an intermediate for the gateway's leaf minting
    (the gateway is given the intermediate, never a root). Returns paths."""
    os.makedirs(d, exist_ok=True)
    out = {"root": os.path.join(d, "root.pem"), "root_key": os.path.join(d, "root.key"),
           "cert": os.path.join(d, "intermediate.pem"), "key": os.path.join(d, "intermediate.key"),
           "chain": os.path.join(d, "chain.pem")}
    make_ca(d, "airlock test gateway root", out["root_key"], out["root"])
    make_cert(out["root"], out["root_key"], out["key"], out["cert"],
              "airlock test gateway intermediate", ca=True)
    with open(out["chain"], "w") as f:
        f.write(open(out["cert"]).read() + open(out["root"]).read())
    return out


# --- namespaces ------------------------------------------------------------

def setup_namespaces():
    run("ip", "netns", "add", NS_NET)
    run("ip", "netns", "add", NS_UP)
    # Created directly inside the two namespaces: never in the host's.
    run("ip", "link", "add", VETH_UP, "netns", NS_UP, "type", "veth",
        "peer", "name", VETH_NET, "netns", NS_NET)

    for ns in (NS_NET, NS_UP):
        nsrun(ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=0",
              "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0",
              "net.ipv6.conf.default.accept_ra=0")
        nsrun(ns, "ip", "link", "set", "lo", "up")

    # The internet.
    nsrun(NS_NET, "ip", "addr", "add", NET_ADDR + "/24", "dev", VETH_NET)
    nsrun(NS_NET, "ip", "-6", "addr", "add", NET_ADDR6 + "/64", "dev", VETH_NET, "nodad")
    nsrun(NS_NET, "ip", "link", "set", VETH_NET, "up")
    for role, a in ADDR.items():
        for addr in (a if isinstance(a, list) else [a]):
            six = ":" in addr
            nsrun(NS_NET, "ip", "-6" if six else "-4", "addr", "add",
                  addr + ("/128" if six else "/32"), "dev", "lo", *(["nodad"] if six else []))
    # AnyIP: every other destination is local too. IPv4 needs the routes in
    # the local table (the kernel sends no reply from an address it finds
    # only in another table): local routes for everything but the link's
    # 192.0.2.0/24, so replies to the gateway host still leave through tnet0.
    # IPv6 takes a table consulted after main.
    import ipaddress
    for net in ipaddress.ip_network("0.0.0.0/0").address_exclude(
            ipaddress.ip_network(NET_ADDR + "/24", strict=False)):
        nsrun(NS_NET, "ip", "-4", "route", "add", "local", str(net), "dev", "lo",
              "table", "local")
    nsrun(NS_NET, "ip", "-6", "route", "add", "local", "::/0", "dev", "lo", "table", "100")
    nsrun(NS_NET, "ip", "-6", "rule", "add", "pref", "40000", "lookup", "100")
    ports = ", ".join(str(p) for p in TCP_PORTS + [CATCHALL_PORT])
    nsrun(NS_NET, "nft", "-f", "-", input=(
        "table inet airlock_tnet {\n"
        "  chain pre { type nat hook prerouting priority dstnat;\n"
        "    iifname \"%s\" tcp dport != { %s } redirect to :%d; }\n"
        "}\n" % (VETH_NET, ports, CATCHALL_PORT)))

    # The gateway's upstream side.
    nsrun(NS_UP, "ip", "addr", "add", UP_ADDR + "/24", "dev", VETH_UP)
    nsrun(NS_UP, "ip", "-6", "addr", "add", UP_ADDR6 + "/64", "dev", VETH_UP, "nodad")
    nsrun(NS_UP, "ip", "link", "set", VETH_UP, "up")
    nsrun(NS_UP, "ip", "-4", "route", "add", "default", "via", NET_ADDR)
    nsrun(NS_UP, "ip", "-6", "route", "add", "default", "via", NET_ADDR6)
    etc = "/etc/netns/" + NS_UP
    os.makedirs(etc, exist_ok=True)
    with open(os.path.join(etc, "resolv.conf"), "w") as f:
        f.write("# airlock test internet (tests/testnet)\nnameserver %s\n" % ADDR["dns"])


def start_servers(p, role, ns, pidfile, ready):
    log = open(os.path.join(p["logs"], "servers-%s.err" % role), "ab")
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, os.path.join(HERE, "servers.py"),
         "--role", role, "--dir", p["dir"]],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    log.close()
    with open(pidfile, "w") as f:
        f.write("%d\n" % proc.pid)
    deadline = time.time() + 20
    while not os.path.exists(ready):
        if proc.poll() is not None:
            raise RuntimeError("servers.py --role %s exited %s (see %s)" % (
                role, proc.returncode, os.path.join(p["logs"], "servers-%s.err" % role)))
        if time.time() > deadline:
            raise RuntimeError("servers.py --role %s not ready after 20 s" % role)
        time.sleep(0.05)


def healthy(p=None):
    p = p or paths()
    return (netns_exists(NS_NET) and netns_exists(NS_UP)
            and pid_alive(p["pid_net"]) is not None and pid_alive(p["pid_up"]) is not None
            and os.path.exists(p["ready_net"]) and os.path.exists(p["ready_up"]))


class _Lock:
    """An exclusive flock next to the state dir (which down removes), so
    concurrent up/down/acquire/release from several tests do not interleave."""

    def __enter__(self):
        import fcntl
        self.f = open(state_dir().rstrip("/") + ".lock", "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.f.close()


def up():
    """Bring the test internet up and keep it up (until down()), whoever
    else acquires and releases it. Returns True if this call created it."""
    if os.geteuid() != 0:
        raise RuntimeError("testnet: must run as root")
    with _Lock():
        created = _up()
        open(os.path.join(_leases(paths()), "held"), "w").close()
        return created


def _up():
    p = paths()
    if healthy(p):
        return False
    _down()  # a half-made one from an interrupted run
    os.makedirs(p["logs"], exist_ok=True)
    try:
        make_certs(p)
        setup_namespaces()
        start_servers(p, "internet", NS_NET, p["pid_net"], p["ready_net"])
        start_servers(p, "host", NS_UP, p["pid_up"], p["ready_up"])
    except BaseException:
        _down()
        raise
    return True


class exclusive:
    """Sole use of the test internet for a whole test run (a context
    manager): tests that assert what reached the outside (the egress
    matrix checks that nothing at all was dialled) cannot share the fixture
    logs with another test's gateway. A second run waits for the first."""

    PATH = "/run/airlock-testnet.excl"

    def __init__(self, timeout=1200):
        self.timeout = timeout

    def __enter__(self):
        import fcntl
        self.f = open(self.PATH, "a")
        deadline = time.time() + self.timeout
        said = False
        while True:
            try:
                fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.time() > deadline:
                    self.f.close()
                    raise RuntimeError("testnet: still in use by another test after %ds"
                                       % self.timeout)
                if not said:
                    print("testnet: waiting for another test that uses it exclusively",
                          flush=True)
                    said = True
                time.sleep(1)

    def __exit__(self, *exc):
        self.f.close()


def _leases(p):
    d = os.path.join(p["dir"], "leases")
    os.makedirs(d, exist_ok=True)
    return d


def acquire():
    """up() for a test, holding a lease (this pid) so that another test's
    release() leaves the internet up while this one still uses it."""
    if os.geteuid() != 0:
        raise RuntimeError("testnet: must run as root")
    with _Lock():
        created = _up()
        open(os.path.join(_leases(paths()), str(os.getpid())), "w").close()
        return created


def release():
    """Drop this process's lease; bring the internet down when no live lease
    remains. Returns True if it went down."""
    with _Lock():
        p = paths()
        if not os.path.isdir(p["dir"]):
            return True
        d = _leases(p)
        try:
            os.unlink(os.path.join(d, str(os.getpid())))
        except FileNotFoundError:
            pass
        for name in os.listdir(d):
            if name == "held" or (name.isdigit() and os.path.exists("/proc/" + name)):
                return False
        _down()
        return True


def _kill(pid):
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def ns_pids(ns):
    if not netns_exists(ns):
        return []
    r = run("ip", "netns", "pids", ns, check=False)
    return [int(x) for x in r.stdout.split() if x.isdigit()]


def down():
    """Remove everything, whoever still uses it (testnet.sh down)."""
    with _Lock():
        _down()


def _down():
    p = paths()
    for pidfile in (p["pid_net"], p["pid_up"]):
        pid = pid_alive(pidfile)
        if pid is not None:
            _kill(pid)
    # Whatever else still runs inside our two namespaces was started into
    # them by tests (a gateway left by a killed test run): theirs to end.
    for ns in (NS_NET, NS_UP):
        for pid in ns_pids(ns):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if netns_exists(ns):
            run("ip", "netns", "del", ns, check=False)
    etc = "/etc/netns/" + NS_UP
    if os.path.isdir(etc):
        shutil.rmtree(etc, ignore_errors=True)
    if os.path.isdir(p["dir"]):
        shutil.rmtree(p["dir"], ignore_errors=True)


class Logs:
    """Read the fixture logs: mark() now, since(mark) what was logged after.

        m = logs.mark()
        ...attack...
        logs.since(m, "forbidden")            # records of one role
        logs.since(m, "packets", dst="203.0.113.30")
    """

    def __init__(self, d=None):
        self.dir = paths(d)["logs"]

    def _files(self):
        try:
            return [f for f in os.listdir(self.dir) if f.endswith(".log")]
        except OSError:
            return []

    def mark(self):
        out = {"_t": time.time()}
        for f in self._files():
            try:
                out[f[:-4]] = os.path.getsize(os.path.join(self.dir, f))
            except OSError:
                pass
        return out

    def since(self, mark, role=None, **match):
        recs = []
        roles = [role] if role else [f[:-4] for f in self._files()]
        for r in roles:
            path = os.path.join(self.dir, r + ".log")
            try:
                with open(path, "rb") as fh:
                    fh.seek(mark.get(r, 0))
                    data = fh.read()
            except OSError:
                continue
            for line in data.splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                # A record written after the mark about something that
                # happened before it (a busy logger) is not "since".
                if rec.get("t", 0) < mark.get("_t", 0):
                    continue
                if all(rec.get(k) == v for k, v in match.items()):
                    recs.append(rec)
        recs.sort(key=lambda x: x.get("t", 0))
        return recs

    def raw_since(self, mark):
        """Every byte logged after mark, all roles (to grep for a secret)."""
        out = b""
        for f in self._files():
            r = f[:-4]
            try:
                with open(os.path.join(self.dir, f), "rb") as fh:
                    fh.seek(mark.get(r, 0))
                    out += fh.read()
            except OSError:
                pass
        return out


def env():
    p = paths()
    out = {
        "TESTNET_DIR": p["dir"], "TESTNET_LOGS": p["logs"], "TESTNET_CA": p["ca"],
        "TESTNET_NS_NET": NS_NET, "TESTNET_NS_UP": NS_UP,
        "TESTNET_DNS": ADDR["dns"], "TESTNET_ZONE": ZONE, "TESTNET_UP_ADDR": UP_ADDR,
    }
    return "".join("%s=%s\n" % kv for kv in out.items())


def main(argv):
    if len(argv) != 2 or argv[1] not in ("up", "down", "status", "env"):
        sys.stderr.write("usage: testnet.py up|down|status|env\n")
        return 2
    cmd = argv[1]
    try:
        if cmd == "up":
            created = up()
            print("testnet: %s (%s)" % ("up" if created else "already up", state_dir()))
        elif cmd == "down":
            down()
            print("testnet: down")
        elif cmd == "status":
            ok = healthy()
            print("testnet: %s" % ("up" if ok else "down"))
            return 0 if ok else 1
        else:
            sys.stdout.write(env())
    except RuntimeError as e:
        sys.stderr.write("testnet: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
