"""A cluster on one machine for tests/cluster: a private PostgreSQL (the
shared store), workers (airlockd --role worker, each its own data dir and
name), API replicas (airlockd --role api) and Debian's HAProxy in front of
the replicas. Everything listens on loopback and is torn down by stop()."""
import glob, http.client, os, pwd, signal, socket, ssl, subprocess, tempfile, time

from daemon_client import Client, Daemon

def cli_path(airlockd):
    """The airlock CLI of the build that made airlockd."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(airlockd))),
                        "src", "cli", "airlock")

def tls_context(cert=None, key=None, ca=None):
    """A client context for a worker's mutual TLS: our cert (if any), its CA (if any)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False      # role certificates name no host (docs/security.md)
    if ca is not None:
        ctx.load_verify_locations(ca)
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if cert is not None:
        ctx.load_cert_chain(cert, key)
    return ctx

class TLSClient(Client):
    """The REST client over a worker's mutual TLS, with a role certificate."""
    def __init__(self, port, key, ctx, timeout=600):
        super().__init__(port, key, timeout)
        self.ctx = ctx

    def conn(self):
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=self.timeout,
                                           context=self.ctx)

class ClusterCA:
    """The cluster CA and one certificate per role, made with the airlock CLI."""
    def __init__(self, airlockd, dirname):
        cli = cli_path(airlockd)
        self.dir = dirname
        def run(*args):
            r = subprocess.run([cli, "cluster"] + list(args), capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("airlock cluster " + " ".join(args) + ": " + r.stderr)
        run("ca", "init", "--out", os.path.join(dirname, "ca"))
        for role in ("api", "worker"):
            run("cert", "--ca", os.path.join(dirname, "ca"), "--role", role,
                "--out", os.path.join(dirname, role))

    def files(self, role):
        d = os.path.join(self.dir, role)
        return os.path.join(d, "tls.crt"), os.path.join(d, "tls.key"), os.path.join(d, "ca.crt")

    def env(self, role):
        cert, key, ca = self.files(role)
        return {"AIRLOCK_CLUSTER_CERT": cert, "AIRLOCK_CLUSTER_KEY": key, "AIRLOCK_CLUSTER_CA": ca}

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port

class Postgres:
    """initdb + postgres as the postgres user, TCP on 127.0.0.1 and a unix socket."""
    def __init__(self):
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not bins:
            raise RuntimeError("no PostgreSQL server in /usr/lib/postgresql")
        self.bin = bins[-1]
        self.dir = tempfile.mkdtemp(prefix="airlock-cluster-pg-")
        self.port = free_port()
        pw = pwd.getpwnam("postgres")
        os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.proc = None
        self.url = f"postgresql://airlock@127.0.0.1:{self.port}/airlock"

    def _as_pg(self, argv, **kw):
        return subprocess.run(["runuser", "-u", "postgres", "--"] + argv, **kw)

    def start(self):
        data = os.path.join(self.dir, "data")
        r = self._as_pg([f"{self.bin}/initdb", "-D", data, "-U", "airlock", "-A", "trust",
                         "-E", "UTF8", "--no-sync"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("initdb: " + r.stderr[-2000:])
        self.log = open(os.path.join(self.dir, "server.log"), "ab")
        self.proc = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", f"{self.bin}/postgres", "-D", data,
             "-k", self.dir, "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "max_connections=200"],
            stdout=self.log, stderr=self.log)
        end = time.time() + 60
        while time.time() < end:
            r = self._as_pg([f"{self.bin}/psql", "-h", self.dir, "-p", str(self.port), "-U",
                             "airlock", "-d", "postgres", "-c", "CREATE DATABASE airlock"],
                            capture_output=True, text=True)
            if r.returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("postgres did not start")

    def sql(self, query):
        """Rows of a query as lists of strings (psql, unaligned)."""
        r = self._as_pg([f"{self.bin}/psql", "-h", self.dir, "-p", str(self.port), "-U",
                         "airlock", "-d", "airlock", "-At", "-F", "\t", "-c", query],
                        capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("psql: " + r.stderr)
        return [l.split("\t") for l in r.stdout.splitlines() if l]

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        subprocess.run(["rm", "-rf", self.dir])

class Replica:
    """An API replica: airlockd --role api on its own port."""
    def __init__(self, binary, store, name, env=None):
        self.binary, self.store, self.name = binary, store, name
        self.env = env or {}
        self.proc, self.port = None, None

    def start(self, logdir, port=0):
        """Start it (again: port is the one it had, so the LB finds it)."""
        self.logf = open(os.path.join(logdir, f"replica-{self.name}.log"), "ab")
        env = dict(os.environ, **self.env)
        self.proc = subprocess.Popen([self.binary, "-c", "/dev/null", "--role", "api",
                                      "--store", self.store, "--listen", f"127.0.0.1:{port}"],
                                     stdout=subprocess.PIPE, stderr=self.logf, env=env)
        line = self.proc.stdout.readline().decode()
        if "ready:" not in line:
            raise RuntimeError(f"replica {self.name} did not start: {line}")
        self.port = int(line.rsplit(":", 1)[1])
        return self

    def kill(self, sig=signal.SIGTERM):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)

    def sanitizer_report(self, logdir):
        """ASan/UBSan/LSan findings in the replica's log, or None."""
        try:
            log = open(os.path.join(logdir, f"replica-{self.name}.log"), "rb").read()
        except OSError:
            return None
        log = log[-(1 << 22):].decode(errors="replace")
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            i = log.find(marker)
            if i >= 0:
                return log[max(0, i - 200):i + 3000]
        return None

class HAProxy:
    """Debian's HAProxy 2.6 in front of the replicas (round robin, tunnels kept)."""
    def __init__(self, replicas, logdir):
        self.port = free_port()
        self.cfg = os.path.join(logdir, "haproxy.cfg")
        backends = "\n".join(f"    server {r.name} 127.0.0.1:{r.port} check inter 1s"
                             for r in replicas)
        with open(self.cfg, "w") as f:
            f.write(f"""global
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    timeout tunnel 1h
frontend api
    bind 127.0.0.1:{self.port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /healthz
{backends}
""")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", self.cfg],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.time() + 20
        while time.time() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("haproxy did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

class Cluster:
    def __init__(self, binary, root, nworkers=2, nreplicas=2, env=None):
        self.binary, self.root = binary, root
        self.pg = Postgres()
        self.env = env or {}
        self.workers, self.replicas, self.lb = {}, [], None
        self.nworkers, self.nreplicas = nworkers, nreplicas
        self.logdir = tempfile.mkdtemp(prefix="airlock-cluster-")
        self.key = None
        self.ca = ClusterCA(binary, self.logdir)

    def start_worker(self, name, extra=None):
        d = Daemon(self.binary, self.root, name=name)
        d.health_port = free_port()
        env = dict(self.env, AIRLOCK_ROLE="worker", AIRLOCK_STORE=self.pg.url,
                   AIRLOCK_WORKER_NAME=name,
                   AIRLOCK_HEALTH_LISTEN=f"127.0.0.1:{d.health_port}",
                   AIRLOCK_SECRETS_KEY=os.path.join(self.logdir, "secrets.key"),
                   **self.ca.env("worker"))
        env.update(extra or {})
        d.start(env)
        self.workers[name] = d
        if self.key is None:
            self.key = d.key
        return d

    def start(self):
        self.pg.start()
        for i in range(self.nworkers):
            self.start_worker(f"w{i + 1}")
        for i in range(self.nreplicas):
            self.replicas.append(Replica(self.binary, self.pg.url, f"a{i + 1}",
                                         dict(self.env, **self.ca.env("api"))).start(self.logdir))
        self.lb = HAProxy(self.replicas, self.logdir)

    def client(self, port=None):
        return Client(port or self.lb.port, self.key)

    def worker_client(self, name, role="api"):
        """A client straight to a worker, over mutual TLS with a role's certificate."""
        cert, key, ca = self.ca.files(role)
        return TLSClient(self.workers[name].port, self.key, tls_context(cert, key, ca))

    def stop(self):
        """Everything down; the workers' cleanup checks they left nothing (raised)."""
        errors = []
        if self.lb is not None:
            self.lb.stop()
        for r in self.replicas:
            r.kill()
        for d in self.workers.values():
            try:
                d.cleanup()
            except AssertionError as e:
                errors.append(str(e))
        self.pg.stop()
        subprocess.run(["rm", "-rf", self.logdir])
        if errors:
            raise AssertionError("; ".join(errors))
