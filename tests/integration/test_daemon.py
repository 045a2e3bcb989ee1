#!/usr/bin/env python3
"""airlockd end to end: the real daemon, real microVMs (TCG here), over HTTP.

Lifecycle (create, exec, files, pause, suspend, resume, delete with no
leftovers), concurrency, restart recovery after SIGKILL (mid-create,
mid-suspend, and adoption of running and paused VMs), and a bad-input
sweep, secrets and the audit query. Usage:
test_daemon.py AIRLOCKD [DATA_ROOT] [--only SECTION,...]"""
import base64, concurrent.futures, json, os, signal, subprocess, sys, time, traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_client import ApiError, Client, Daemon

failures = []

def check(name, cond, detail=""):
    print(("ok: " if cond else "FAIL: ") + name + ("" if cond else f" ({detail})"), flush=True)
    if not cond:
        failures.append(name)

def qemu_pids(sid):
    """QEMU processes serving a sandbox: the jail runs them as -name <id>
    (their paths are the jail's /sandbox/..., not the host's)."""
    out = subprocess.run(["pgrep", "-f", f"^qemu-system-x86_64 .*-name {sid} "],
                         capture_output=True, text=True)
    return sorted(p for p in out.stdout.split() if p)

def cgroup_dirs(sid):
    """The sandbox's cgroups: below the daemon's own, which it inherits from us."""
    found = []
    for line in open("/proc/self/cgroup").read().splitlines():
        _, ctrls, path = line.split(":", 2)
        path = "" if path == "/" else path
        if ctrls == "":
            bases = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        else:
            bases = [f"/sys/fs/cgroup/{c}" for c in ("memory", "cpu", "pids") if c in ctrls.split(",")]
        for b in bases:
            p = f"{b}{path}/airlock/{sid}"
            if os.path.isdir(p):
                found.append(p)
    return found

def uid_claims(d, sid):
    dirp = os.path.join(d.dir, "run", "uids")
    try:
        names = os.listdir(dirp)
    except OSError:
        return []
    found = []
    for n in names:
        try:
            if open(os.path.join(dirp, n)).read().strip() == sid:
                found.append(n)
        except OSError:
            pass
    return found

def leftovers(d, sid):
    found = []
    if os.path.exists(os.path.join(d.dir, "sandboxes", sid)):
        found.append("sandbox dir")
    if os.path.exists(f"/run/netns/airlock-{sid}"):
        found.append("netns")
    if qemu_pids(sid):
        found.append("qemu process")
    if cgroup_dirs(sid):
        found.append("cgroup " + " ".join(cgroup_dirs(sid)))
    if uid_claims(d, sid):
        found.append("uid claim")
    return found

def expect_error(c, method, path, obj, status, code, raw=None, headers=None, auth=True):
    if raw is not None:
        st, ct, data = c.raw(method, path, raw, headers or {"Content-Type": "application/json"}, auth)
    elif obj is None and not auth:
        st, ct, data = c.raw(method, path, None, headers, auth=False)
    else:
        try:
            c.call(method, path, obj, expect=())
        except ApiError as e:
            st, data, ct = e.status, e.body, "application/json"
            data = json.dumps(data).encode() if isinstance(data, dict) else data
    try:
        body = json.loads(data)
        ok = st == status and body["error"]["code"] == code and body["error"]["message"]
    except Exception:
        ok, body = False, data
    check(f"{method} {path} -> {status} {code}", ok, f"got {st} {body}")

def test_bad_input(c):
    expect_error(c, "GET", "/v1/sandboxes", None, 401, "unauthorized", auth=False)
    bad = Client(c.port, "al_wrong")
    try:
        bad.call("GET", "/v1/sandboxes", expect=())
        check("unknown key -> 401", False)
    except ApiError as e:
        check("unknown key -> 401", e.status == 401)
    expect_error(c, "POST", "/v1/sandboxes", {"vcpus": "two"}, 400, "bad_request")
    expect_error(c, "POST", "/v1/sandboxes", {"vcpu": 2}, 400, "bad_request")
    expect_error(c, "POST", "/v1/sandboxes", {"memory_mb": 1}, 400, "bad_request")
    expect_error(c, "POST", "/v1/sandboxes", {"env": {"1X": "a"}}, 400, "bad_request")
    expect_error(c, "POST", "/v1/sandboxes", {"network": {"mode": "open"}}, 400, "bad_request")
    # Network policies are refused exactly as the gateway would parse them, naming the field.
    for net, field in (({"mode": "allowlist", "allow": ["10.0.0.0/8"]}, "network.allow[0]"),
                       ({"mode": "allowlist", "allow": ["*.com"]}, "network.allow[0]"),
                       ({"mode": "allowlist", "allow": ["a.example:99999"]}, "network.allow[0]"),
                       ({"mode": "allowlist", "allow": [{"host": "a.example", "verbs": []}]},
                        "network.allow[0]"),
                       ({"mode": "full", "allow": ["a.example"]}, "network.allow"),
                       ({"mode": "allowlist", "rate": {"rps": -1}}, "network.rate")):
        try:
            c.call("POST", "/v1/sandboxes", {"network": net}, expect=())
            check(f"bad network {net} -> 400", False)
        except ApiError as e:
            msg = e.body.get("error", {}).get("message", "") if isinstance(e.body, dict) else ""
            check(f"bad network {net} -> 400 naming {field}",
                  e.status == 400 and msg.startswith(field), (e.status, e.body))
    expect_error(c, "POST", "/v1/sandboxes", {"template": "../etc"}, 400, "bad_request")
    expect_error(c, "POST", "/v1/sandboxes", {"template": "nosuchtemplate"}, 422, "unprocessable")
    expect_error(c, "POST", "/v1/sandboxes", None, 400, "bad_request", raw=b"{\"a\":")
    expect_error(c, "POST", "/v1/sandboxes", None, 400, "bad_request", raw=b"[1,2]")
    expect_error(c, "POST", "/v1/sandboxes", None, 400, "bad_request", raw=b"{\"template\":\"\xff\xfe\"}")
    expect_error(c, "POST", "/v1/sandboxes", None, 415, "unsupported_media_type", raw=b"{}",
                 headers={"Content-Type": "text/plain"})
    expect_error(c, "POST", "/v1/sandboxes", None, 413, "too_large",
                 raw=b"{\"x\":\"" + b"a" * (2 << 20) + b"\"}")
    expect_error(c, "GET", "/v1/sandboxes/doesnotexist", None, 404, "not_found")
    expect_error(c, "DELETE", "/v1/sandboxes/%2e%2e", None, 404, "not_found")
    expect_error(c, "GET", "/v1/nothing", None, 404, "not_found")
    expect_error(c, "PUT", "/v1/sandboxes", {}, 405, "method_not_allowed")
    st, _, _ = c.raw("GET", "/healthz", auth=False)
    check("daemon still serving after the sweep", st == 200)

def wait_gone(pred, secs=30):
    end = time.time() + secs
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.2)
    return pred()

def test_lifecycle(d, c):
    sb = c.call("POST", "/v1/sandboxes", {"template": "base", "memory_mb": 512,
                                          "env": {"GREETING": "hello"}, "metadata": {"t": "life"}})
    sid = sb["id"]
    check("create -> running", sb["state"] == "running", sb)
    code, sig, out, err = c.exec(sid, ["echo", "hi"])
    check("exec echo hi", code == 0 and out == b"hi\n", (code, out, err))
    code, sig, out, err = c.exec(sid, ["sh", "-c", "exit 3"])
    check("exec exit 3", code == 3, (code, sig))
    code, sig, out, err = c.exec(sid, ["sh", "-c", "echo $GREETING; id -un"])
    check("sandbox env and default user", out == b"hello\nuser\n", out)
    payload = os.urandom(300000)
    st, _, body = c.raw("PUT", f"/v1/sandboxes/{sid}/files?path=/home/user/data.bin", payload,
                        {"Content-Type": "application/octet-stream"})
    check("upload a file", st == 201, (st, body))
    st, _, got = c.raw("GET", f"/v1/sandboxes/{sid}/files?path=/home/user/data.bin")
    check("download it back", st == 200 and got == payload, (st, len(got)))
    # A background process whose state must survive suspend/resume.
    c.exec(sid, ["sh", "-c", "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.2; done' >/dev/null 2>&1 &"])
    time.sleep(1)
    sb = c.call("POST", f"/v1/sandboxes/{sid}/pause")
    check("pause", sb["state"] == "paused", sb)
    try:
        c.exec(sid, ["true"])
        check("exec on a paused sandbox is refused", False, "accepted")
    except ApiError as e:
        check("exec on a paused sandbox is refused (409)", e.status == 409, e)
    sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
    check("resume from pause", sb["state"] == "running", sb)
    code, sig, before, _ = c.exec(sid, ["cat", "/tmp/counter"])
    sb = c.call("POST", f"/v1/sandboxes/{sid}/suspend")
    check("suspend", sb["state"] == "suspended", sb)
    check("suspend releases the VM (no QEMU process)", wait_gone(lambda: not qemu_pids(sid)),
          qemu_pids(sid))
    sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
    check("resume from suspend", sb["state"] == "running", sb)
    st, _, got = c.raw("GET", f"/v1/sandboxes/{sid}/files?path=/home/user/data.bin")
    check("file survives suspend/resume", st == 200 and got == payload, (st, len(got)))
    time.sleep(1)
    code, sig, after, _ = c.exec(sid, ["cat", "/tmp/counter"])
    check("background process continues after resume",
          code == 0 and int(after or 0) > int(before or 0), (before, after))
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    check("delete leaves nothing behind", wait_gone(lambda: not leftovers(d, sid)),
          leftovers(d, sid))
    try:
        c.call("GET", f"/v1/sandboxes/{sid}", expect=())
        check("deleted sandbox is gone", False)
    except ApiError as e:
        check("deleted sandbox is gone (404)", e.status == 404)

def test_idle(d, c, idle_s=6):
    """A guest busy with a background job is not idle; once the job ends the
    sandbox is suspended. The daemon sweeps every second (main)."""
    sb = c.call("POST", "/v1/sandboxes", {"template": "base", "idle_timeout_s": idle_s})
    sid = sb["id"]
    code, _, out, _ = c.exec(sid, ["sh", "-c",
                                   "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!"])
    pid = out.decode().strip()
    check("busy loop started in the background", code == 0 and pid.isdigit(), (code, out))
    # GET does not count as activity: only the guest's CPU keeps it running.
    end, states = time.time() + idle_s * 3, set()
    while time.time() < end:
        states.add(c.call("GET", f"/v1/sandboxes/{sid}")["state"])
        time.sleep(1)
    check(f"busy guest still running after 3x its idle timeout", states == {"running"}, states)
    sb = c.call("GET", f"/v1/sandboxes/{sid}")
    code, _, _, _ = c.exec(sid, ["kill", pid])
    check("busy loop stopped", code == 0, code)
    check("idle guest is suspended", wait_gone(
        lambda: c.call("GET", f"/v1/sandboxes/{sid}")["state"] == "suspended", idle_s + 90),
        c.call("GET", f"/v1/sandboxes/{sid}")["state"])
    ev = None
    for name, data in c.sse("GET", f"/v1/sandboxes/{sid}/events"):
        if name == "idle_suspend":
            ev = data["data"]
            break
    check("idle_suspend event names the guest's low CPU use",
          ev is not None and ev["idle_s"] >= idle_s and ev.get("guest_cpu_pct", 100) < 2, ev)
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    check("idle test leaves nothing", wait_gone(lambda: not leftovers(d, sid)), leftovers(d, sid))

def test_concurrency(c, n=10):
    def one(i):
        sb = c.call("POST", "/v1/sandboxes", {"memory_mb": 256, "metadata": {"batch": "c"}})
        code, _, out, _ = c.exec(sb["id"], ["echo", str(i)])
        return sb["id"], code == 0 and out == f"{i}\n".encode()
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        results = list(ex.map(one, range(n)))
    check(f"{n} concurrent creates and execs", all(ok for _, ok in results), results)
    st, _, metrics = c.raw("GET", "/metrics", auth=False)
    text = metrics.decode()
    check("metrics count the creates", "airlock_sandbox_creates_total" in text and
          'airlock_sandboxes{state="running"} %d' % n in text, text[-400:])
    for sid, _ in results:
        c.call("DELETE", f"/v1/sandboxes/{sid}")

SECRET = "s3cr3t-VALUE-" + os.urandom(6).hex()

def user_key(c, project, role="user"):
    return Client(c.port, c.call("POST", "/v1/keys", {"name": f"t-{project}-{role}",
                                                      "project": project, "role": role})["key"])

def raw_json(c, method, path, obj=None):
    """(status, body bytes, parsed JSON) without raising."""
    body = None if obj is None else json.dumps(obj).encode()
    st, _, data = c.raw(method, path, body, {"Content-Type": "application/json"} if body else {})
    try:
        return st, data, json.loads(data) if data else None
    except ValueError:
        return st, data, None

def test_secrets(d, c):
    """Write-only secrets: CRUD, the value never comes back, validation, scoping."""
    seen = []   # every raw answer, searched for the value at the end
    def call(cl, method, path, obj=None):
        st, data, j = raw_json(cl, method, path, obj)
        seen.append(data)
        return st, j
    put = {"value": SECRET, "hosts": ["api.github.com", "*.GitHub.com."]}
    st, j = call(c, "PUT", "/v1/secrets/GITHUB_TOKEN", put)
    check("secret put -> 201", st == 201 and j["name"] == "GITHUB_TOKEN" and
          j["scope"] == "project" and j["scope_id"] == "default", (st, j))
    check("secret answer has no value field", j is not None and "value" not in j, j)
    check("hosts normalized as the gateway matches them",
          j and j["hosts"] == ["api.github.com", "*.github.com"], j)
    check("header and format defaults filled in", j and j["header"] == "Authorization" and
          j["format"] == "Bearer {value}", j)
    created = j["created_at"] if j else None
    time.sleep(0.01)
    st, j = call(c, "PUT", "/v1/secrets/GITHUB_TOKEN", dict(put, header="X-Token", format="{value}"))
    check("secret replace -> 200, created_at kept", st == 200 and j["created_at"] == created and
          j["header"] == "X-Token" and j["format"] == "{value}", (st, j))
    st, j = call(c, "PUT", "/v1/secrets/OPENAI_KEY", {"value": SECRET + "-g", "hosts": ["api.openai.com"],
                                                     "scope": "global"})
    check("admin puts a global secret", st == 201 and j["scope"] == "global" and j["scope_id"] is None,
          (st, j))
    st, j = call(c, "GET", "/v1/secrets")
    names = sorted((s["scope"], s["name"]) for s in (j or {}).get("secrets", []))
    check("list shows global and project secrets", st == 200 and
          names == [("global", "OPENAI_KEY"), ("project", "GITHUB_TOKEN")], (st, j))
    check("list entries carry metadata only", st == 200 and all(set(s) == {"name", "scope",
          "scope_id", "hosts", "header", "format", "created_at", "updated_at"} for s in j["secrets"]), j)
    st, j = call(c, "GET", "/v1/secrets?scope=global")
    check("list ?scope=global", st == 200 and [s["name"] for s in j["secrets"]] == ["OPENAI_KEY"], j)
    st, j = call(c, "GET", "/v1/secrets/GITHUB_TOKEN")
    check("get one secret (metadata)", st == 200 and j["name"] == "GITHUB_TOKEN" and "value" not in j, j)
    st, j = call(c, "GET", "/v1/secrets/OPENAI_KEY?scope=global")
    check("get a global secret", st == 200 and j["scope"] == "global", j)
    st, j = call(c, "GET", "/v1/secrets/OPENAI_KEY")
    check("a global secret is not found in the project scope", st == 404, (st, j))

    # Bad input: field-level 400s that never quote the value.
    bad = [("/v1/secrets/lower", put, "name"),
           ("/v1/secrets/1ABC", put, "name"),
           ("/v1/secrets/" + "A" * 65, put, "name"),
           ("/v1/secrets/A-B", put, "name"),
           ("/v1/secrets/T", {"value": SECRET + "\r\nX-Evil: 1", "hosts": ["a.example.com"]}, "value"),
           ("/v1/secrets/T", {"value": "", "hosts": ["a.example.com"]}, "value"),
           ("/v1/secrets/T", {"value": 42, "hosts": ["a.example.com"]}, "value"),
           ("/v1/secrets/T", {"hosts": ["a.example.com"]}, "value"),
           ("/v1/secrets/T", dict(put, extra=1), "extra"),
           ("/v1/secrets/T", {"value": SECRET}, "hosts"),
           ("/v1/secrets/T", {"value": SECRET, "hosts": []}, "hosts"),
           ("/v1/secrets/T", {"value": SECRET, "hosts": "a.example.com"}, "hosts"),
           ("/v1/secrets/T", {"value": SECRET, "hosts": ["https://a.example.com/"]}, "hosts[0]"),
           ("/v1/secrets/T", {"value": SECRET, "hosts": ["a.example.com:443"]}, "hosts[0]"),
           ("/v1/secrets/T", {"value": SECRET, "hosts": ["10.0.0.0/8"]}, "hosts[0]"),
           ("/v1/secrets/T", {"value": SECRET, "hosts": ["*.com"]}, "hosts[0]"),
           ("/v1/secrets/T", dict(put, header="X Bad"), "header"),
           ("/v1/secrets/T", dict(put, format="token"), "format"),
           ("/v1/secrets/T", dict(put, format="{value}\r\n"), "format"),
           ("/v1/secrets/T", dict(put, scope="world"), "scope"),
           ("/v1/secrets/T", dict(put, scope="sandbox"), "sandbox"),
           ("/v1/secrets/T", dict(put, scope="project", sandbox="x"), "sandbox")]
    for path, obj, field in bad:
        st, j = call(c, "PUT", path, obj)
        msg = (j or {}).get("error", {}).get("message", "")
        check(f"PUT {path[:30]} {sorted(obj)} -> 400 naming {field}",
              st == 400 and j["error"]["code"] == "bad_request" and
              (msg.startswith(field + ":") or f'"{field}"' in msg) and SECRET not in msg, (st, j))
    st, j = call(c, "PUT", "/v1/secrets/T", dict(put, sandbox="nosuchsandbox00000000"))
    check("sandbox scope with an unknown sandbox -> 404", st == 404, (st, j))
    for q in ("?scope=world", "?scope=global&sandbox=x", "?scope=sandbox"):
        st, j = call(c, "GET", "/v1/secrets/GITHUB_TOKEN" + q)
        check(f"GET secret {q} -> 400", st == 400, (st, j))
    st, j = call(c, "GET", "/v1/secrets/bad-name")
    check("GET a bad name -> 400", st == 400, (st, j))
    st, j = call(c, "DELETE", "/v1/secrets/NOPE")
    check("DELETE an unknown secret -> 404", st == 404, (st, j))

    # Scoping: a user key may not write globals; another project sees nothing of ours.
    user = user_key(c, "default")
    other = user_key(c, "other")
    st, j = call(user, "PUT", "/v1/secrets/G2", dict(put, scope="global"))
    check("non-admin global put -> 403", st == 403 and j["error"]["code"] == "forbidden", (st, j))
    st, j = call(user, "DELETE", "/v1/secrets/OPENAI_KEY?scope=global")
    check("non-admin global delete -> 403", st == 403, (st, j))
    st, j = call(user, "GET", "/v1/secrets/GITHUB_TOKEN")
    check("a user key of the same project sees the project secret", st == 200, (st, j))
    st, j = call(other, "GET", "/v1/secrets")
    check("another project lists only the globals", st == 200 and
          [s["name"] for s in j["secrets"]] == ["OPENAI_KEY"], (st, j))
    st, j = call(other, "GET", "/v1/secrets/GITHUB_TOKEN")
    check("another project cannot get our secret (404)", st == 404, (st, j))
    st, j = call(other, "DELETE", "/v1/secrets/GITHUB_TOKEN")
    check("another project cannot delete our secret (404)", st == 404, (st, j))
    st, j = call(other, "PUT", "/v1/secrets/GITHUB_TOKEN", dict(put, value=SECRET + "-o"))
    check("another project has its own namespace", st == 201 and j["scope_id"] == "other", (st, j))
    st, j = call(c, "GET", "/v1/secrets/GITHUB_TOKEN")
    check("our secret is untouched by theirs", st == 200 and j["header"] == "X-Token", (st, j))

    st, j = call(c, "DELETE", "/v1/secrets/GITHUB_TOKEN")
    check("delete -> 204", st == 204, (st, j))
    st, j = call(c, "GET", "/v1/secrets/GITHUB_TOKEN")
    check("deleted secret -> 404", st == 404, (st, j))
    st, j = call(c, "DELETE", "/v1/secrets/GITHUB_TOKEN")
    check("delete again -> 404", st == 404, (st, j))
    st, j = call(other, "GET", "/v1/secrets/GITHUB_TOKEN")
    check("their secret survives our delete", st == 200, (st, j))

    # The value is nowhere: not in answers, the log, or the store file in clear.
    leaked = [x[:200] for x in seen if x and SECRET.encode() in x]
    check("no answer ever contained the value", not leaked, leaked)
    check("the daemon log never contains the value", SECRET not in d.logtail(1 << 24))
    db = b""
    for f in ("state.db", "state.db-wal"):
        try:
            db += open(os.path.join(d.dir, f), "rb").read()
        except OSError:
            pass
    check("the store holds the value sealed, not in clear", db and SECRET.encode() not in db, len(db))
    st_key = os.stat(os.path.join(d.dir, "secrets.key"))
    check("secrets.key is 0600 and 32 bytes", (st_key.st_mode & 0o777) == 0o600 and
          st_key.st_size == 32, oct(st_key.st_mode))

AUD_A, AUD_B = "audaaaaaaaaaaaaaaaa1", "audbbbbbbbbbbbbbbbb2"   # in no project's store
AUD_UNTIL = "2001-02-03T05:00:00Z"    # keeps out anything a real gateway logs meanwhile

def audit_rec(i, sandbox, kind, decision, **kw):
    r = {"time": f"2001-02-03T04:00:0{i}.000Z", "sandbox": sandbox, "kind": kind,
         "decision": decision, "n": i}
    r.update(kw)
    return json.dumps(r, separators=(",", ":"))

def audit_append(d, name, lines):
    os.makedirs(os.path.join(d.dir, "audit"), exist_ok=True)
    with open(os.path.join(d.dir, "audit", name), "a") as f:
        f.write("".join(l + "\n" for l in lines))

def audit_ns(c, query, expect=200):
    st, _, j = raw_json(c, "GET", "/v1/audit" + query)
    if st != expect:
        return (st, j)
    return [r.get("n") for r in j["records"]] if st == 200 else st

def test_audit(d, c):
    """GET /v1/audit over hand-written gateway files: order, filters, limit, scoping."""
    audit_append(d, "audit.log.1", [
        audit_rec(0, AUD_A, "dns", "allow", qname="a.example.com", qtype="A"),
        "garbage that is not JSON",
        audit_rec(1, AUD_B, "tls", "deny", sni="evil.example.com", reason="sni not allowed"),
        audit_rec(2, AUD_A, "http", "allow", host="api.example.com", rule="api.example.com")])
    audit_append(d, "audit.log", [
        audit_rec(3, AUD_A, "dns", "deny", qname="x.evil.com", reason="not allowed"),
        "", "[1,2]", '{"time":"yesterday","sandbox":"%s","decision":"deny"}' % AUD_A,
        audit_rec(4, AUD_B, "http", "allow", host="api.example.com", method="GET", path="/"),
        "x" * 300000,
        audit_rec(5, AUD_A, "l4", "deny", ip="203.0.113.9", port=5432, reason="no rule"),
        '{"time":"2001-02-03T04:00:05.500Z","sandbox":"%s","decision":"deny"' % AUD_A,
        audit_rec(6, AUD_B, "dns", "allow", qname="b.example.com"),
        audit_rec(7, AUD_A, "http", "deny", host="x.example.com", reason="host not allowed")])
    u = "&until=" + AUD_UNTIL
    got = audit_ns(c, "?" + u[1:])
    check("audit: newest first across audit.log and .1, malformed lines skipped",
          got == [7, 6, 5, 4, 3, 2, 1, 0], got)
    st, _, j = raw_json(c, "GET", "/v1/audit?sandbox=" + AUD_A + "&limit=1")
    check("audit: records come back as the gateway wrote them", st == 200 and j["records"] ==
          [json.loads(audit_rec(7, AUD_A, "http", "deny", host="x.example.com",
                                reason="host not allowed"))], j)
    for q, want in (("?limit=3" + u, [7, 6, 5]),
                    ("?sandbox=" + AUD_A, [7, 5, 3, 2, 0]),
                    ("?sandbox=" + AUD_B + "&limit=10", [6, 4, 1]),
                    ("?decision=deny" + u, [7, 5, 3, 1]),
                    ("?decision=allow&sandbox=" + AUD_B, [6, 4]),
                    ("?kind=dns&sandbox=" + AUD_A, [3, 0]),
                    ("?since=2001-02-03T04:00:02Z&until=2001-02-03T04:00:05Z", [5, 4, 3, 2]),
                    ("?since=2001-02-03T05:00:04%2B01:00&until=2001-02-03T04:00:06.5Z", [6, 5, 4]),
                    ("?since=2001-02-03T04:00:06Z&sandbox=" + AUD_A, [7]),
                    ("?sandbox=" + AUD_A + "&kind=tls", [])):
        got = audit_ns(c, q)
        check(f"audit {q} -> {want}", got == want, got)
    for q in ("?decision=maybe", "?since=yesterday", "?until=2001-02-03", "?limit=0",
              "?limit=1001", "?limit=x", "?kind=ftp",
              "?since=2001-02-03T04:00:05Z&until=2001-02-03T04:00:01Z"):
        got = audit_ns(c, q, expect=400)
        check(f"audit {q} -> 400", got == 400, got)
    other = user_key(c, "audit-other")
    got = audit_ns(other, "?" + u[1:])
    check("audit: another project's key sees none of these records", got == [], got)
    got = audit_ns(other, "?sandbox=" + AUD_A, expect=404)
    check("audit: another project's key cannot name a sandbox it does not own (404)", got == 404, got)

def test_secrets_sandbox(d, c):
    """Sandbox scope and audit scoping need a real sandbox in the store (boots a VM)."""
    sid = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
    other = user_key(c, "sbx-other")
    user = user_key(c, "default")
    try:
        put = {"value": SECRET + "-sb", "hosts": ["api.example.com"], "scope": "sandbox",
               "sandbox": sid}
        st, data, j = raw_json(c, "PUT", "/v1/secrets/SB_TOKEN", put)
        check("sandbox-scoped secret put -> 201", st == 201 and j["scope"] == "sandbox" and
              j["scope_id"] == sid and SECRET.encode() not in data, (st, j))
        st, _, j = raw_json(user, "GET", f"/v1/secrets?sandbox={sid}")
        check("list ?sandbox= shows it to the project", st == 200 and
              [s["name"] for s in j["secrets"]] == ["SB_TOKEN"], (st, j))
        st, _, j = raw_json(c, "GET", "/v1/secrets?scope=sandbox")
        check("list ?scope=sandbox shows the project's sandbox secrets", st == 200 and
              [(s["name"], s["scope_id"]) for s in j["secrets"]] == [("SB_TOKEN", sid)], (st, j))
        st, _, j = raw_json(other, "GET", "/v1/secrets")
        check("another project does not list it", st == 200 and
              "SB_TOKEN" not in [s["name"] for s in j["secrets"]], (st, j))
        st, _, j = raw_json(other, "PUT", "/v1/secrets/SB_TOKEN", put)
        check("another project cannot put on our sandbox (404)", st == 404, (st, j))
        st, _, j = raw_json(other, "DELETE", f"/v1/secrets/SB_TOKEN?sandbox={sid}")
        check("another project cannot delete it (404)", st == 404, (st, j))
        audit_append(d, "audit.log", [audit_rec(8, sid, "dns", "deny", qname="q.example.com"),
                                      audit_rec(9, AUD_A, "dns", "deny", qname="q.example.com")])
        got = audit_ns(user, "?until=" + AUD_UNTIL)
        check("audit: a user key sees its project's sandbox records only", got == [8], got)
        got = audit_ns(user, f"?sandbox={sid}")
        check("audit: ?sandbox= of its own sandbox", got == [8], got)
        got = audit_ns(other, f"?sandbox={sid}", expect=404)
        check("audit: another project cannot query our sandbox", got == 404, got)
        st, _, j = raw_json(c, "DELETE", f"/v1/secrets/SB_TOKEN?sandbox={sid}")
        check("sandbox-scoped secret delete -> 204", st == 204, (st, j))
    finally:
        c.call("DELETE", f"/v1/sandboxes/{sid}")

def test_restart(d, c):
    # SIGKILL while a create is in flight.
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(lambda: c.call("POST", "/v1/sandboxes", {"memory_mb": 256}, expect=(201, 500, 502, 504)))
        time.sleep(0.8)
        d.kill()
        try:
            fut.result(timeout=60)
        except Exception:
            pass
    c = d.start()
    sbs = c.call("GET", "/v1/sandboxes")["sandboxes"]
    check("after SIGKILL mid-create: every sandbox usable or cleanly failed",
          all(s["state"] in ("running", "failed", "suspended") for s in sbs), sbs)
    for s in sbs:
        check(f"no QEMU left for failed {s['id']}", s["state"] != "failed" or not qemu_pids(s["id"]))
        c.call("DELETE", f"/v1/sandboxes/{s['id']}")
    # SIGKILL during a suspend.
    sb = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})
    sid = sb["id"]
    c.exec(sid, ["sh", "-c", "echo kept > /home/user/kept"])
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        ex.submit(lambda: c.call("POST", f"/v1/sandboxes/{sid}/suspend", expect=(200, 500)))
        time.sleep(0.3)
        d.kill()
    c = d.start()
    sb = c.call("GET", f"/v1/sandboxes/{sid}")
    check("after SIGKILL mid-suspend: suspended or failed", sb["state"] in ("suspended", "failed"), sb)
    check("no QEMU left after restart", not qemu_pids(sid), qemu_pids(sid))
    if sb["state"] == "suspended":
        sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
        _, _, out, _ = c.exec(sid, ["cat", "/home/user/kept"])
        check("resumed after restart with its files", out == b"kept\n", out)
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    check("restart test leaves nothing", wait_gone(lambda: not leftovers(d, sid)), leftovers(d, sid))
    return c

def exec_retry(c, sid, cmd, secs=60, **kw):
    """exec, waiting out 503 while the agent channel comes (back) up."""
    end = time.time() + secs
    while True:
        try:
            return c.exec(sid, cmd, **kw)
        except ApiError as e:
            if e.status != 503 or time.time() > end:
                raise
            time.sleep(0.5)

def counter(c, sid):
    code, _, out, _ = c.exec(sid, ["cat", "/tmp/counter"])
    return int(out) if code == 0 and out.strip().isdigit() else -1

def test_adopt(d, c):
    """SIGKILL airlockd with one sandbox running and one paused: the next
    airlockd adopts both live VMs (no new QEMU), states and guests intact."""
    a = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
    b = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
    # Written by rename: a reader never sees the file truncated between two values.
    c.exec(a, ["sh", "-c", "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; "
               "mv /tmp/counter.new /tmp/counter; sleep 0.2; done' >/dev/null 2>&1 &"])
    c.exec(a, ["sh", "-c", "echo adopt-marker-before > /dev/console"], user="root")
    c.exec(b, ["sh", "-c", "echo kept-b > /home/user/kept"])
    check("pause the second sandbox", c.call("POST", f"/v1/sandboxes/{b}/pause")["state"] == "paused")
    time.sleep(1)
    before = counter(c, a)
    pids = {a: qemu_pids(a), b: qemu_pids(b)}
    check("one QEMU per sandbox before the kill", len(pids[a]) == 1 and len(pids[b]) == 1, pids)
    d.kill()
    time.sleep(2)   # the guests run on without a daemon
    check("the VMs outlive the SIGKILLed daemon",
          qemu_pids(a) == pids[a] and qemu_pids(b) == pids[b], (pids, qemu_pids(a), qemu_pids(b)))
    c = d.start()
    sa, sb = c.call("GET", f"/v1/sandboxes/{a}"), c.call("GET", f"/v1/sandboxes/{b}")
    check("running sandbox adopted as running", sa["state"] == "running", sa)
    check("paused sandbox adopted as paused", sb["state"] == "paused", sb)
    check("no second QEMU was started (same pids)",
          qemu_pids(a) == pids[a] and qemu_pids(b) == pids[b], (pids, qemu_pids(a), qemu_pids(b)))
    code, _, out, _ = c.exec(a, ["echo", "adopted"])
    check("exec works in the adopted sandbox", code == 0 and out == b"adopted\n", (code, out))
    mid = counter(c, a)
    time.sleep(1)
    after = counter(c, a)
    check("the guest's background counter kept counting across the restart",
          before > 0 and mid > before and after > mid, (before, mid, after))
    c.exec(a, ["sh", "-c", "echo adopt-marker-after > /dev/console"], user="root")
    time.sleep(0.5)
    _, _, log = c.raw("GET", f"/v1/sandboxes/{a}/logs")
    log = log.decode(errors="replace")
    check("the console log continues in the same file",
          "adopt-marker-before" in log and "adopt-marker-after" in log and
          log.index("adopt-marker-before") < log.index("adopt-marker-after"), log[-600:])
    sb = c.call("POST", f"/v1/sandboxes/{b}/resume")
    check("resume works on the adopted paused sandbox", sb["state"] == "running", sb)
    code, _, out, _ = exec_retry(c, b, ["cat", "/home/user/kept"])
    check("the resumed sandbox kept its files", code == 0 and out == b"kept-b\n", (code, out))
    # The adopted VM is a full VM: it can be snapshotted and restored.
    sa = c.call("POST", f"/v1/sandboxes/{a}/suspend")
    check("suspend an adopted sandbox", sa["state"] == "suspended", sa)
    check("its QEMU is gone", wait_gone(lambda: not qemu_pids(a)), qemu_pids(a))
    sa = c.call("POST", f"/v1/sandboxes/{a}/resume")
    check("resume it from the snapshot", sa["state"] == "running", sa)
    time.sleep(1)
    check("its counter continues after suspend/resume", counter(c, a) > after, after)
    for sid in (a, b):
        c.call("DELETE", f"/v1/sandboxes/{sid}")
        check(f"delete of adopted {sid} leaves nothing behind",
              wait_gone(lambda: not leftovers(d, sid)), leftovers(d, sid))
    return c

def main():
    args = [a for i, a in enumerate(sys.argv) if a != "--only" and sys.argv[i - 1] != "--only"]
    binary = args[1]
    root = args[2] if len(args) > 2 else os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    # --only a,b runs just those sections (the VM-free ones take seconds).
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1].split(",")
    d = Daemon(binary, root)
    try:
        # Sweep idle and lifetime timeouts every second, so the idle test is quick.
        c = d.start({"AIRLOCK_SWEEP_INTERVAL_S": "1"})
        # The lambdas read c when called: sections that restart the daemon
        # hand back the new client.
        for name, fn in (("bad input", lambda: test_bad_input(c)),
                         ("secrets", lambda: test_secrets(d, c)),
                         ("audit", lambda: test_audit(d, c)),
                         ("secrets sandbox", lambda: test_secrets_sandbox(d, c)),
                         ("lifecycle", lambda: test_lifecycle(d, c)),
                         ("idle", lambda: test_idle(d, c)),
                         ("concurrency", lambda: test_concurrency(c)),
                         ("restart", lambda: test_restart(d, c)),
                         ("adopt", lambda: test_adopt(d, c))):
            if only is not None and name not in only:
                continue
            print(f"-- {name}", flush=True)
            try:
                c = fn() or c
            except Exception as e:
                traceback.print_exc()
                check(f"{name} raised no exception", False, repr(e))
        d.kill(signal.SIGTERM)
        report = d.sanitizer_report()
        check("airlockd ran clean under ASan/UBSan/LSan", report is None, report)
    finally:
        if failures:
            print("airlockd log tail:\n" + d.logtail(), flush=True)
        d.cleanup()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
