#!/usr/bin/env python3
"""Beyond one host (issue 16), on this machine: a private PostgreSQL, two
workers (airlockd --role worker, each its own data dir), two API replicas
(airlockd --role api) behind HAProxy, real TCG microVMs.

  - the replicas are unprivileged and answer /healthz, /readyz, and
    GET /v1/workers (admin keys only) from the store: both workers live,
    with capacity, use and the snapshot ABI;
  - creates through the load balancer spread over both workers, each row
    owned by exactly one worker (checked in SQL);
  - a sandbox created through one replica is served through the other:
    exec output streams (its first byte before the command ends) and is
    byte-identical; a file goes up and comes back through different replicas;
  - E2B envd traffic routed by Host ({port}-{id}.{domain}) reaches the
    sandbox's worker;
  - lists merge every worker's sandboxes (airlock's and E2B's);
  - 12 concurrent creates across both replicas: 12 sandboxes, 12 rows, each
    on one worker, none twice;
  - a worker killed with SIGKILL: creates placed on it before its
    heartbeat goes stale move on to the other worker; GET /v1/workers says
    it is not live within the heartbeat window, its sandboxes read as
    "unreachable" (for their own project) and other calls on them answer
    503 with Retry-After, new creates go to the other worker;
  - placement: creates of a template only one worker holds go there; a
    named snapshot records its worker, creates from it and its delete
    are sent there, another worker refuses it with a 409 naming it; the
    same for a volume and the creates that attach it;
  - a replica SIGKILLed mid-exec-stream: the client reattaches to the
    process through the other replica and gets all of its output;
  - a worker stopped (SIGSTOP) past the heartbeat window is not live, its
    sandbox reads as unreachable and creates go elsewhere; resumed, it is
    live again (not fenced) and its sandbox runs commands;
  - envd calls with only X-Access-Token (the Python SDK after connect)
    reach the sandbox's worker, found by its token in the store;
  - a project with a quota of 4 and 2 sandboxes on w1, then 20 concurrent
    creates sent to both workers: 2 more made, 18 refused 429 (by both),
    4 live rows in SQL;
  - replica↔worker traffic is mutual TLS from a cluster CA made by
    `airlock cluster`: a worker refuses clients with no certificate, with
    the worker role's, with one from another CA, and plain HTTP;
  - `airlock worker drain`: the worker says draining, suspends its
    sandboxes and refuses creates (503), which placement no longer sends it;
  - a second worker registering under a live worker's name fences the
    first: it stops serving (two never serve one name).

Usage: test_cluster.py AIRLOCKD [DATA_ROOT]"""
import base64, concurrent.futures, json, os, signal, socket, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, Client, args, check, failures, summary, wait_for
from cluster_harness import Cluster, ClusterCA, cli_path, tls_context

DOMAIN = "airlock.localhost"

def owners(cl):
    return {r[0]: r[1] for r in cl.pg.sql("SELECT id, worker FROM sandboxes")}

def test_replicas(cl, c):
    for r in cl.replicas:
        st = open(f"/proc/{r.proc.pid}/status").read()
        uid = next(l.split()[1] for l in st.splitlines() if l.startswith("Uid:"))
        check(f"replica {r.name} runs unprivileged", uid != "0", uid)
        check(f"replica {r.name} answers /healthz",
              Client(r.port, None).raw("GET", "/healthz", auth=False)[0] == 200)
    st, _, body = c.raw("GET", "/readyz", auth=False)
    check("through the LB: /readyz ready", st == 200, body)
    ws = c.call("GET", "/v1/workers")["workers"]
    names = sorted(w["name"] for w in ws if w["live"])
    check("GET /v1/workers: both workers live", names == ["w1", "w2"], ws)
    w = next((w for w in ws if w["name"] == "w1"), {})
    check("... with capacity, use and the snapshot ABI",
          w.get("capacity", {}).get("vcpus", 0) > 0 and "used" in w and
          w.get("abi", {}).get("accel") in ("tcg", "kvm") and "base" in w.get("templates", []), w)
    cli = cli_path(cl.binary)
    r = subprocess.run([cli, "worker", "ls", "--json"], capture_output=True, text=True,
                       env=dict(os.environ, AIRLOCK_URL=f"http://127.0.0.1:{cl.lb.port}",
                                AIRLOCK_API_KEY=cl.key))
    got = sorted(w["name"] for w in json.loads(r.stdout)) if r.returncode == 0 else r.stderr
    check("airlock worker ls lists them", got == ["w1", "w2"], got)
    st, _, body = c.raw("GET", "/metrics", auth=False)
    text = body.decode(errors="replace")
    check("a replica's /metrics has each worker's liveness and capacity",
          st == 200 and 'airlock_worker_live{worker="w1"} 1' in text and
          'airlock_worker_live{worker="w2"} 1' in text and
          "airlock_worker_capacity_memory_mb{worker=" in text, (st, text[:300]))
    w1h = Client(cl.workers["w1"].health_port, None)
    st, _, body = w1h.raw("GET", "/metrics", auth=False)
    check("a worker's own /metrics (its sandboxes, pools) on its health_listen",
          st == 200 and b"airlock_sandboxes{state=" in body, (st, body[:200]))
    check("... beside /readyz", w1h.raw("GET", "/readyz", auth=False)[0] == 200)
    user = c.call("POST", "/v1/keys", {"name": "u", "role": "user"})["key"]
    st = Client(cl.lb.port, user).raw("GET", "/v1/workers")[0]
    check("GET /v1/workers refuses a user key (403)", st == 403, st)
    st = Client(cl.lb.port, "al_nope").raw("GET", "/v1/workers")[0]
    check("... and an unknown key (401)", st == 401, st)

def create(c):
    return c.call("POST", "/v1/sandboxes", {})["id"]

def test_spread(cl, c):
    ids = [create(c) for _ in range(4)]
    own = owners(cl)
    used = {own.get(i) for i in ids}
    check("creates through the LB spread over both workers", used == {"w1", "w2"}, own)
    cl.spread = ids

def test_cross_replica(cl, c):
    a, b = Client(cl.replicas[0].port, cl.key), Client(cl.replicas[1].port, cl.key)
    sid = a.call("POST", "/v1/sandboxes", {})["id"]
    t0, first, out = time.time(), None, b""
    for ev, d in b.sse("POST", f"/v1/sandboxes/{sid}/exec",
                       {"cmd": ["sh", "-c", "seq 1 2000; sleep 3; echo end"]}):
        if ev == "stdout":
            if first is None:
                first = time.time() - t0
            out += base64.b64decode(d["data"])
    total = time.time() - t0
    want = ("".join(f"{i}\n" for i in range(1, 2001)) + "end\n").encode()
    check("exec through the other replica streams (first byte before the end)",
          first is not None and first < total - 2, (first, total))
    check("... byte-identical output", out == want, (len(out), out[-20:]))
    blob = os.urandom(3 << 20)
    st = a.raw("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/blob", blob,
               {"Content-Type": "application/octet-stream"})[0]
    got = b.raw("GET", f"/v1/sandboxes/{sid}/files?path=/tmp/blob")
    check("a file up through one replica comes back through the other",
          st == 201 and got[0] == 200 and got[2] == blob, (st, got[0], len(got[2])))
    # E2B envd by Host through the LB: routed to the sandbox's worker.
    hdr = {"Host": f"49983-{sid}.{DOMAIN}"}
    st, _, body = c.raw("GET", "/health", headers=hdr, auth=False)
    check("E2B envd /health by Host reaches the sandbox's worker", st in (200, 204), (st, body))
    cl.cross = sid

def test_lists(cl, c):
    ids = set(cl.spread) | {cl.cross}
    got = {s["id"] for s in c.call("GET", "/v1/sandboxes")["sandboxes"]}
    check("GET /v1/sandboxes merges every worker's", ids <= got, (ids, got))
    page = c.call("GET", "/v1/sandboxes?limit=2")
    check("... ordered by id, cut at its limit with a cursor",
          len(page["sandboxes"]) == 2 and page["next"] == page["sandboxes"][1]["id"] and
          page["sandboxes"][0]["id"] < page["sandboxes"][1]["id"], page)
    st, _, body = c.raw("GET", "/v2/sandboxes", headers={"X-API-KEY": cl.key}, auth=False)
    e2b = {s["sandboxID"] for s in json.loads(body)} if st == 200 else set()
    check("E2B's GET /v2/sandboxes merges them too", ids <= e2b, (st, body[:200]))

def test_bad_ids(cl, c):
    for path in ("/v1/sandboxes/nosuchsandbox0000000", "/v1/sandboxes/%C3%A9t%C3%A9",
                 "/v1/sandboxes/" + "a" * 70, "/v1/sandboxes/UPPER"):
        st, _, body = c.raw("GET", path)
        check(f"GET {path[:40]}: a worker's own 4xx, not a 503", 400 <= st < 500, (st, body[:200]))

def test_concurrent(cl, c):
    before = set(owners(cl))
    clients = [Client(r.port, cl.key) for r in cl.replicas]
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        made = list(ex.map(lambda i: clients[i % 2].call("POST", "/v1/sandboxes", {})["id"],
                           range(12)))
    rows = cl.pg.sql("SELECT id, worker FROM sandboxes")
    new = [r for r in rows if r[0] not in before]
    check("12 concurrent creates over both replicas: 12 sandboxes, 12 rows",
          len(set(made)) == 12 and len(new) == 12, (made, new))
    check("... each row on one live worker", all(r[1] in ("w1", "w2") for r in new), new)
    for sid in made:
        c.call("DELETE", f"/v1/sandboxes/{sid}")

def test_replica_killed(cl, c):
    # An exec streamed through replica a1, which is SIGKILLed mid-stream;
    # the client reattaches to the process through a2 and gets all of it.
    sid = create(c)
    a1, a2 = cl.replicas
    want = "".join(f"line{i}\n" for i in range(1, 41)).encode()
    stream = Client(a1.port, cl.key).sse("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": [
        "sh", "-c", "for i in $(seq 1 40); do echo line$i; sleep 0.1; done"]})
    pid, got = None, b""
    for ev, d in stream:
        if ev == "start":
            pid = d["pid"]
        elif ev == "stdout":
            got += base64.b64decode(d["data"])
            break
    a1.kill(signal.SIGKILL)
    try:
        rest = list(stream)
    except Exception:
        rest = []
    check("a replica killed mid-stream cuts the stream before the end",
          pid is not None and not any(ev == "exit" for ev, _ in rest), (pid, rest[-2:]))
    out, code = b"", None
    for ev, d in Client(a2.port, cl.key).sse("GET", f"/v1/sandboxes/{sid}/processes/{pid}/stream"):
        if ev == "stdout":
            out += base64.b64decode(d["data"])
        elif ev == "exit":
            code = d.get("code")
    check("... reattached through the other replica: all of the output, then the exit",
          out == want and code == 0, (code, len(out), out[-30:]))
    a1.start(cl.logdir, port=a1.port)
    up = wait_for(lambda: all(c.raw("GET", "/healthz", auth=False)[0] == 200
                              for _ in range(4)), 20, 0.5)
    check("the restarted replica serves behind the LB again", up)
    c.call("DELETE", f"/v1/sandboxes/{sid}")

def test_worker_paused(cl, c):
    # A worker that stops answering for a while (SIGSTOP: a long GC-like
    # stall, a partition) and comes back under the same registration.
    own = owners(cl)
    victim = next(i for i in cl.spread if own.get(i) == "w2")
    live = lambda: next(w["live"] for w in c.call("GET", "/v1/workers")["workers"]
                        if w["name"] == "w2")
    pid = cl.workers["w2"].proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        gone = wait_for(lambda: not live(), 20, 0.5)
        check("a stopped worker is not live within the heartbeat window", gone)
        st, _, body = c.raw("GET", f"/v1/sandboxes/{victim}")
        check("... its sandbox reads as unreachable meanwhile",
              st == 200 and json.loads(body).get("state") == "unreachable", (st, body[:200]))
        sid = create(c)
        check("... creates go to the other worker", owners(cl).get(sid) == "w1", owners(cl))
        c.call("DELETE", f"/v1/sandboxes/{sid}")
    finally:
        os.kill(pid, signal.SIGCONT)
    back = wait_for(live, 20, 0.5)
    check("resumed, it is live again under its registration (not fenced)",
          back and cl.workers["w2"].proc.poll() is None, cl.workers["w2"].logtail(600))
    # Each replica sees the heartbeat at its next refresh (≤ 1 s after it).
    state = lambda: json.loads(c.raw("GET", f"/v1/sandboxes/{victim}")[2]).get("state")
    check("... its sandbox reads as running again", wait_for(lambda: all(
        state() == "running" for _ in range(4)), 10, 0.5), state())
    code, _, out, _ = c.exec(victim, ["echo", "back"])
    check("... and runs commands", code == 0 and out == b"back\n", (code, out))

def test_worker_lost(cl, c):
    own = owners(cl)
    victim = next(i for i in cl.spread if own.get(i) == "w2")
    # Make w2 the one placement prefers (more free memory): more VMs on w1,
    # made on w1 directly, then a heartbeat and a refresh for the replicas to see it.
    running = lambda w: sum(1 for r in cl.pg.sql("SELECT worker FROM sandboxes WHERE state = "
                                                 "'running'") if r[0] == w)
    extra = []
    w1 = cl.worker_client("w1")
    while running("w1") <= running("w2"):
        extra.append(w1.call("POST", "/v1/sandboxes", {})["id"])
    time.sleep(4)
    logs = lambda: "".join(open(os.path.join(cl.logdir, f"replica-{r.name}.log"),
                                errors="replace").read() for r in cl.replicas)
    cl.workers["w2"].kill(signal.SIGKILL)
    # Still listed as live for a few heartbeats: a create placed on it moves on.
    made = [create(c) for _ in range(2)]
    check("creates right after the kill succeed, on the live worker",
          all(owners(cl).get(i) == "w1" for i in made), owners(cl))
    check("... the first tried the dead one and moved on to the next",
          "create on worker w2" in logs() and "next worker" in logs(), logs()[-1500:])
    for i in made + extra:
        c.call("DELETE", f"/v1/sandboxes/{i}")
    gone = wait_for(lambda: not next(w["live"] for w in c.call("GET", "/v1/workers")["workers"]
                                     if w["name"] == "w2"), 20, 0.5)
    check("a SIGKILLed worker is not live within the heartbeat window", gone)
    st, _, body = c.raw("GET", f"/v1/sandboxes/{victim}")
    got = json.loads(body) if st == 200 else {}
    check("reading its sandbox still works, from the store: state unreachable, not a lie",
          st == 200 and got.get("state") == "unreachable" and got.get("worker") == "w2", (st, body))
    user = Client(cl.lb.port, c.call("POST", "/v1/keys", {"name": "other", "role": "user",
                                                         "project": "other"})["key"])
    st = user.raw("GET", f"/v1/sandboxes/{victim}")[0]
    check("... for its own project only (another project's key: 404)", st == 404, st)
    st, _, body = c.raw("POST", f"/v1/sandboxes/{victim}/exec", json.dumps(
        {"cmd": ["true"]}).encode(), {"Content-Type": "application/json"})
    check("calls on it answer 503 (its worker is unreachable)", st == 503 and
          b"unreachable" in body, (st, body))
    sid = create(c)
    check("new creates go to the live worker", owners(cl).get(sid) == "w1", owners(cl))
    c.call("DELETE", f"/v1/sandboxes/{sid}")

def handshake(port, ctx):
    """"ok" when a TLS handshake with the worker completes and it answers, else why not."""
    import ssl as _ssl
    try:
        with socket.create_connection(("127.0.0.1", port), 10) as raw:
            with ctx.wrap_socket(raw) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                got = s.recv(100)
                return "ok" if got.startswith(b"HTTP/1.1") else f"no answer ({got!r})"
    except (OSError, _ssl.SSLError) as e:
        return f"refused ({e})"

def test_placement(cl, c):
    # A template only w1 holds (its files linked in, as a build there would
    # leave them). The workers' templates/ is a link to the shared one: w1
    # gets a folder of its own in its place, with links to the shared ones.
    w1dir = cl.workers["w1"].dir
    shared = os.path.realpath(os.path.join(w1dir, "templates"))
    own = os.path.join(w1dir, "templates.own")
    os.makedirs(os.path.join(own, "onlyw1"))
    for t in os.listdir(shared):
        os.symlink(os.path.join(shared, t), os.path.join(own, t))
    for f in os.listdir(os.path.join(shared, "base")):
        if os.path.isfile(os.path.join(shared, "base", f)):
            os.link(os.path.join(shared, "base", f), os.path.join(own, "onlyw1", f))
    os.unlink(os.path.join(w1dir, "templates"))	# a dir cannot be renamed over a link
    os.rename(own, os.path.join(w1dir, "templates"))
    seen = wait_for(lambda: all("onlyw1" in w["templates"] for w in c.call("GET", "/v1/workers")
                                ["workers"] if w["name"] == "w1"), 15, 0.5)
    time.sleep(1.5)	# the replicas' worker list refreshes every second
    check("a worker's heartbeat lists the templates it holds", seen)
    made = [c.call("POST", "/v1/sandboxes", {"template": "onlyw1"})["id"] for _ in range(2)]
    check("creates of a template only w1 holds are placed on w1",
          all(owners(cl).get(i) == "w1" for i in made), owners(cl))
    # A named snapshot lives in its worker's data dir: creates from it go there.
    sid = made[0]
    snap = c.call("POST", f"/v1/sandboxes/{sid}/snapshots", {"name": "snap-w1"})
    check("a named snapshot records its worker", snap.get("worker") == "w1", snap)
    kids = [c.call("POST", "/v1/sandboxes", {"template": "snap-w1"})["id"] for _ in range(2)]
    check("creates from it through the LB are placed on its worker",
          all(owners(cl).get(i) == "w1" for i in kids), owners(cl))
    st, _, body = cl.worker_client("w2").raw("POST", "/v1/sandboxes",
                                              json.dumps({"template": "snap-w1"}).encode(),
                                              {"Content-Type": "application/json"})
    check("another worker asked directly refuses it (409, naming the worker)",
          st == 409 and b"w1" in body, (st, body))
    for i in kids + made:
        c.call("DELETE", f"/v1/sandboxes/{i}")
    files = os.path.join(w1dir, "named", snap["id"])
    st = c.raw("DELETE", "/v1/snapshots/snap-w1")[0]
    check("its delete through the LB reaches its worker: the files are gone",
          st == 204 and not os.path.exists(files), (st, os.path.exists(files)))
    # A volume is one worker's file too: sandboxes that attach it go there.
    vol = c.call("POST", "/v1/volumes", {"name": "vol-c", "size_mb": 64})
    home = vol.get("worker")
    other = {"w1": "w2", "w2": "w1"}.get(home)
    check("a volume made through the LB records its worker", other is not None, vol)
    if other is None:
        return
    spec = {"volumes": [{"name": "vol-c", "path": "/mnt/data"}]}
    sid = c.call("POST", "/v1/sandboxes", spec)["id"]
    check("a create that attaches it is placed on its worker", owners(cl).get(sid) == home,
          (home, owners(cl).get(sid)))
    st, _, body = cl.worker_client(other).raw("POST", "/v1/sandboxes", json.dumps(spec).encode(),
                                               {"Content-Type": "application/json"})
    check("the other worker asked directly refuses it (409, naming the worker)",
          st == 409 and home.encode() in body, (st, body))
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    got = c.call("GET", "/v1/volumes/vol-c")
    check("GET of it through the LB is its worker's (it sees the file)",
          "allocated_bytes" in got, got)
    vfile = os.path.join(cl.workers[home].dir, "volumes", "default", "vol-c.ext4")
    existed = os.path.exists(vfile)
    st = c.raw("DELETE", "/v1/volumes/vol-c")[0]
    check("its delete through the LB reaches its worker: the file is gone",
          existed and st == 204 and not os.path.exists(vfile), (existed, st, vfile))

def test_envd_token(cl, c):
    # An E2B sandbox on w2 (not the worker "anything else" goes to), then
    # envd calls carrying only its X-Access-Token through the LB.
    w2 = cl.worker_client("w2")
    st, _, body = w2.raw("POST", "/sandboxes", json.dumps({"templateID": "base",
                         "secure": True}).encode(), {"Content-Type": "application/json",
                         "X-API-KEY": cl.key}, auth=False)
    sb = json.loads(body) if st == 201 else {}
    check("an E2B create on w2 gives an envd access token", "envdAccessToken" in sb, (st, body))
    if "envdAccessToken" not in sb:
        return
    hdr = {"Content-Type": "application/json", "Connect-Protocol-Version": "1",
           "X-Access-Token": sb["envdAccessToken"]}
    st, _, body = c.raw("POST", "/filesystem.Filesystem/Stat", b'{"path": "/home/user"}',
                        hdr, auth=False)
    got = json.loads(body) if st == 200 else {}
    check("envd by X-Access-Token alone through the LB reaches the sandbox's worker (Stat)",
          got.get("entry", {}).get("path") == "/home/user", (st, body[:200]))
    hdr["X-Access-Token"] = "x" * len(sb["envdAccessToken"])
    st = c.raw("POST", "/filesystem.Filesystem/Stat", b'{"path": "/"}', hdr, auth=False)[0]
    check("... an unknown token is still refused (502 sandbox not found)", st == 502, st)
    c.call("DELETE", f"/v1/sandboxes/{sb['sandboxID']}")

def test_quota_race(cl, c):
    LIMIT, TRIES = 4, 20
    c.call("PUT", "/v1/projects/race/quota", {"max_sandboxes": LIMIT})
    key = c.call("POST", "/v1/keys", {"name": "race", "project": "race", "role": "user"})["key"]
    # Straight to the two workers (placement would send a burst to one of
    # them): the race is between two processes checking one project's quota.
    clients = []
    for name in ("w1", "w2"):
        w = cl.worker_client(name)
        w.key = key
        clients.append(w)
    # Half the quota on w1 first, so that w2 can only get it right by
    # counting w1's rows; then both race for the rest.
    first = [clients[0].call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
             for _ in range(LIMIT // 2)]

    def one(i):
        try:
            return clients[i % 2].call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
        except ApiError as e:
            return e.status
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        got = list(ex.map(one, range(TRIES)))
    made = [g for g in got if isinstance(g, str)]
    check(f"{LIMIT // 2} made on w1, then {TRIES} concurrent creates on both workers under "
          f"a quota of {LIMIT}: {LIMIT - LIMIT // 2} more made, the rest 429",
          len(made) == LIMIT - LIMIT // 2 and
          all(g == 429 for g in got if not isinstance(g, str)), got)
    live = cl.pg.sql("SELECT count(*) FROM sandboxes WHERE project = 'race' AND state IN "
                     "('creating','running','paused','suspending','resuming')")
    check("... no overrun in the store (SQL)", live == [[str(LIMIT)]], live)
    refused = {n for n, g in zip(("w1", "w2") * TRIES, got) if g == 429}
    check("... both workers refused some (each counted the other's rows)",
          refused == {"w1", "w2"}, list(zip(("w1", "w2") * TRIES, got)))
    lb = Client(cl.lb.port, key)
    for sid in first + made:
        lb.call("DELETE", f"/v1/sandboxes/{sid}")
    c.call("DELETE", "/v1/projects/race/quota")

def test_mtls(cl, c):
    port = cl.workers["w1"].port
    api_cert, api_key, ca = cl.ca.files("api")
    wk_cert, wk_key, _ = cl.ca.files("worker")
    check("a worker serves an API replica's certificate", handshake(port, tls_context(
        api_cert, api_key, ca)) == "ok")
    r = handshake(port, tls_context(None, None, ca))
    check("a client without a certificate is refused", r.startswith("refused"), r)
    r = handshake(port, tls_context(wk_cert, wk_key, ca))
    check("a client with another role's certificate (worker) is refused",
          r.startswith("refused"), r)
    other = ClusterCA(cl.binary, os.path.join(cl.logdir, "other"))
    o_cert, o_key, _ = other.files("api")
    r = handshake(port, tls_context(o_cert, o_key, ca))
    check("an api certificate from another CA is refused", r.startswith("refused"), r)
    try:
        plain = Client(port, cl.key).raw("GET", "/healthz", auth=False)
        r = f"answered {plain[0]}"
    except Exception as e:
        r = f"refused ({e})"
    check("plain HTTP to a worker gets no answer", r.startswith("refused"), r)
    check("the worker logged the refusals", "cluster tls: refused" in cl.workers["w1"].logtail(20000))

def test_drain(cl, c):
    sid = create(c)
    cli = cli_path(cl.binary)
    env = dict(os.environ, AIRLOCK_URL=f"http://127.0.0.1:{cl.lb.port}", AIRLOCK_API_KEY=cl.key)
    r = subprocess.run([cli, "worker", "drain", "w1"], capture_output=True, text=True, env=env)
    check("airlock worker drain w1", r.returncode == 0, r.stderr)
    state = lambda: next((w["state"] for w in c.call("GET", "/v1/workers")["workers"]
                          if w["name"] == "w1"), None)
    check("... GET /v1/workers says draining", wait_for(lambda: state() == "draining", 10, 0.3),
          state())
    check("... its sandboxes are suspended",
          wait_for(lambda: c.call("GET", f"/v1/sandboxes/{sid}")["state"] == "suspended", 60, 0.5),
          c.call("GET", f"/v1/sandboxes/{sid}")["state"])
    st, _, body = c.raw("POST", "/v1/sandboxes", b"{}", {"Content-Type": "application/json"})
    check("with every worker draining or gone, a create answers 503", st == 503, (st, body))
    st, _, body = cl.worker_client("w1").raw("POST", "/v1/sandboxes", b"{}",
                                              {"Content-Type": "application/json"})
    check("a draining worker refuses a create sent to it (503, draining)",
          st == 503 and b"draining" in body, (st, body))
    r = subprocess.run([cli, "worker", "drain", "nosuchworker"], capture_output=True, text=True,
                       env=env)
    check("draining an unknown worker fails (404)", r.returncode != 0 and "no such worker" in
          r.stderr, (r.returncode, r.stderr))
    c.call("DELETE", f"/v1/sandboxes/{sid}")

def test_fencing(cl, c):
    w1 = cl.workers["w1"]
    # An impostor takes w1's name (a second host misconfigured, or w1 declared gone).
    imp = cl.start_worker("w1b", {"AIRLOCK_WORKER_NAME": "w1"})
    died = wait_for(lambda: w1.proc.poll() is not None, 20, 0.2)
    check("a worker whose name registers again elsewhere stops serving", died,
          w1.logtail(800))
    check("... and says why", "another worker took it" in w1.logtail(4000))
    check("the new registration serves", imp.proc.poll() is None)

def main():
    binary, root, only = args()
    try:
        cl = Cluster(binary, root)
    except Exception as e:
        check("the cluster's certificates were made", False, repr(e))
        return summary()
    cases = [("replicas", test_replicas), ("spread", test_spread),
             ("cross replica", test_cross_replica), ("lists", test_lists), ("bad ids", test_bad_ids),
             ("concurrent", test_concurrent), ("placement", test_placement),
             ("envd token", test_envd_token),
             ("quota race", test_quota_race),
             ("mtls", test_mtls),
             ("replica killed", test_replica_killed), ("worker paused", test_worker_paused), ("worker lost", test_worker_lost), ("drain", test_drain),
             ("fencing", test_fencing)]
    try:
        cl.start()
        c = cl.client()
        for name, fn in cases:
            if only is not None and name not in only:
                continue
            print(f"-- {name}", flush=True)
            try:
                fn(cl, c)
            except Exception as e:
                import traceback
                traceback.print_exc()
                check(f"{name} raised no exception", False, repr(e))
    except Exception as e:
        import traceback
        traceback.print_exc()
        check("the cluster started", False, repr(e))
    finally:
        for r in cl.replicas:
            r.kill()
        for n, d in cl.workers.items():
            d.kill(signal.SIGTERM)
            rep = d.sanitizer_report()
            check(f"worker {n} ran clean under ASan/UBSan/LSan", rep is None, rep)
        for r in cl.replicas:
            rep = r.sanitizer_report(cl.logdir)
            check(f"replica {r.name} ran clean under ASan/UBSan/LSan", rep is None, rep)
        if failures:
            for n, d in cl.workers.items():
                print(f"worker {n} log tail:\n" + d.logtail(3000), flush=True)
        try:
            cl.stop()
        except AssertionError as e:
            check("the cluster left nothing on the host", False, str(e))
    return summary()

if __name__ == "__main__":
    sys.exit(main())
