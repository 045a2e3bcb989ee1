#!/usr/bin/env python3
"""The pinned real E2B JS SDKs (tests/e2b/package-lock.json) against the real
airlockd with real microVMs: sdk.mjs once per SDK version, one line per case.

The SDKs reach airlockd by the documented environment variables only
(docs/e2b.md): E2B_API_URL = E2B_SANDBOX_URL = http://127.0.0.1:PORT and an
E2B-format key minted by airlock (POST /v1/keys {"format":"e2b"}). Then a
second airlockd serves TLS (tls = ca, e2b_domain = TLS_DOMAIN) and the SDKs
get only E2B_DOMAIN, E2B_API_KEY and NODE_EXTRA_CA_CERTS: https to api.{d}
and {port}-{id}.{d}, which sdk.mjs connects to that daemon (no DNS here).
Usage: run_e2b.py AIRLOCKD [DATA_ROOT]; E2B_ONLY=prefix,... narrows the cases.
@e2b/code-interpreter has its own test, run_interp.py (e2b:e2b_interp)."""
import http.client, json, os, re, ssl, struct, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(here), "lib"))
from daemon_client import Daemon

SDKS = ["e2b", "e2b-2.20.1"]
DOMAIN = "airlock.localhost"            # e2b_domain's default
TLS_DOMAIN = "e2b-test.airlock.internal"  # resolves nowhere: sdk.mjs routes it

def run_sdk(node, pkg, env):
    """One sdk.mjs run: (passed, failed), its lines printed."""
    passed = failed = 0
    p = subprocess.run([node, os.path.join(here, "sdk.mjs")], env=env, cwd=here,
                       capture_output=True, text=True, timeout=3000)
    lines = p.stdout.splitlines()
    for line in lines:
        print(line, flush=True)
        if line.startswith("ok: "):
            passed += 1
        elif line.startswith("FAIL: "):
            failed += 1
    if p.returncode != 0 and not any(l.startswith("FAIL: ") for l in lines):
        print(f"FAIL: {pkg}: node exited {p.returncode}: {p.stderr[-2000:]}")
        failed += 1
    return passed, failed

def https_mint_key(port, admin_key, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    c = http.client.HTTPSConnection("127.0.0.1", port, timeout=600, context=ctx)
    c.request("POST", "/v1/keys", body=json.dumps({"name": "e2b-tls", "format": "e2b"}),
              headers={"Authorization": "Bearer " + admin_key, "Content-Type": "application/json"})
    r = c.getresponse()
    body = json.loads(r.read())
    c.close()
    return body["key"]

def tls_front(binary, root, node):
    """The SDKs without E2B_SANDBOX_URL: the TLS front and the Host route."""
    passed = failed = 0
    d = Daemon(binary, root)
    try:
        d.start({"AIRLOCK_TLS": "ca", "AIRLOCK_E2B_DOMAIN": TLS_DOMAIN})
        cafile = os.path.join(d.dir, "ca", "ca.crt")
        key = https_mint_key(d.port, d.key, cafile)
        for pkg in SDKS:
            env = dict(os.environ, E2B_PKG=pkg, E2B_API_KEY=key, E2B_DOMAIN=TLS_DOMAIN,
                       E2B_EXPECT_DOMAIN=TLS_DOMAIN, NODE_EXTRA_CA_CERTS=cafile,
                       E2B_CONNECT_TO=f"127.0.0.1:{d.port}")
            for k in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DEBUG"):
                env.pop(k, None)
            p, f = run_sdk(node, pkg + " (tls)", env)
            passed, failed = passed + p, failed + f
        rep = d.sanitizer_report()
        if rep:
            print("FAIL: airlockd (tls) sanitizer report:\n" + rep)
            failed += 1
    except Exception as e:
        print(f"FAIL: tls harness: {e!r}\n{d.logtail()}")
        failed += 1
    finally:
        d.cleanup()
    return passed, failed

class Wire:
    """Requests as the Python SDK 2.21.1 sends them (e2b-compat.md §1.2, §2; e2b-delta.md §2):
    it cannot be installed here (no PyPI), so its wire differences are replayed by hand."""
    def __init__(self, port, key):
        self.port, self.key, self.results = port, key, []

    def check(self, name, cond, detail=""):
        line = ("ok: " if cond else "FAIL: ") + "wire: " + name + ("" if cond else f" ({detail})")
        print(line, flush=True)
        self.results.append(bool(cond))

    def req(self, method, path, body=None, headers=None, api=True, chunked=False):
        h = {"User-Agent": "e2b-python-sdk/2.21.1", "lang": "python"}
        if api:
            h["X-API-KEY"] = self.key
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        try:
            if chunked:
                conn.request(method, path, body=iter([body[:5], body[5:]]), headers=h,
                             encode_chunked=True)
            else:
                conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
        except (OSError, http.client.HTTPException) as e:
            return None, f"connection failed: {e!r}", {}
        finally:
            conn.close()
        try:
            return r.status, json.loads(data), hdrs
        except ValueError:
            return r.status, data, hdrs

    def refused(self, name, method, path, body, status, needle):
        st, j, _ = self.req(method, path, body)
        ok = (st == status and isinstance(j, dict) and j.get("code") == status and
              needle in j.get("message", ""))
        self.check(f"{name} -> {status} naming {needle}", ok, f"got {st} {j}")

def python_wire(port, key):
    w = Wire(port, key)
    w.check("minted key has E2B's format", re.fullmatch(r"e2b_[0-9a-f]{40}", key), key)
    st, j, _ = w.req("GET", "/v2/sandboxes", api=False)
    w.check("no X-API-KEY: 401 with code 401", st == 401 and j.get("code") == 401, f"{st} {j}")
    body = {"templateID": "base", "timeout": 300, "metadata": {"py": "1"}, "envVars": {},
            "secure": True, "allow_internet_access": False, "autoPause": False}
    st, sb, _ = w.req("POST", "/sandboxes", body, chunked=True)
    need = ["templateID", "sandboxID", "clientID", "envdVersion", "envdAccessToken"]
    w.check("create (chunked body) is 201 with every Sandbox key Python requires",
            st == 201 and all(k in sb for k in need), f"{st} {sb}")
    if st != 201:
        return w.results
    sid, tok = sb["sandboxID"], sb["envdAccessToken"]
    w.check("envdVersion is semver >= 0.5.7",
            re.fullmatch(r"\d+\.\d+\.\d+", sb["envdVersion"]) and
            tuple(map(int, sb["envdVersion"].split("."))) >= (0, 5, 7), sb["envdVersion"])
    st, j, _ = w.req("POST", f"/sandboxes/{sid}/connect", {"timeout": 300},
                     headers={"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"})
    w.check("connect with the sandbox headers (PY) is the API: 200",
            st == 200 and j.get("sandboxID") == sid, f"{st} {j}")
    # PY after Sandbox.connect(id): envd calls carry only X-Access-Token; pretty JSON.
    st, j, _ = w.req("POST", "/filesystem.Filesystem/Stat", b'{\n  "path": "/home/user"\n}',
                     headers={"Content-Type": "application/json", "Connect-Protocol-Version": "1",
                              "content-encoding": "identity", "X-Access-Token": tok}, api=False)
    w.check("envd by X-Access-Token alone, pretty-printed JSON: Stat",
            st == 200 and j.get("entry", {}).get("path") == "/home/user", f"{st} {j}")
    st, j, _ = w.req("POST", "/filesystem.Filesystem/Stat", b'{"path": "/"}',
                     headers={"Content-Type": "application/json", "Connect-Protocol-Version": "1",
                              "X-Access-Token": "x" * len(tok)}, api=False)
    w.check("envd with an unknown token: 502 sandbox not found", st == 502 and
            j.get("code") == 502, f"{st} {j}")
    st, j, _ = w.req("POST", "/init", b"{}", headers={"E2b-Sandbox-Id": sid,
                     "E2b-Sandbox-Port": "49983", "X-Access-Token": tok,
                     "Content-Type": "application/json"}, api=False)
    w.check("envd /init (sets the token) is not reachable", st == 404, f"{st} {j}")
    env = b'{"process":{"cmd":"/bin/bash","args":["-l","-c","echo py"]},"stdin":false}'
    st, raw, hd = w.req("POST", "/process.Process/Start", struct.pack(">BI", 0, len(env)) + env,
                        headers={"Content-Type": "application/connect+json",
                                 "Connect-Protocol-Version": "1", "Connect-Timeout-Ms": "60000",
                                 "connect-content-encoding": "identity", "X-Access-Token": tok,
                                 "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"}, api=False)
    frames, i = [], 0
    while isinstance(raw, bytes) and i + 5 <= len(raw):
        fl, n = struct.unpack(">BI", raw[i:i + 5])
        frames.append((fl, json.loads(raw[i + 5:i + 5 + n] or b"{}")))
        i += 5 + n
    w.check("Process.Start stream: start first, stdout, end, end-stream",
            st == 200 and hd.get("content-type") == "application/connect+json" and
            frames and "start" in frames[0][1].get("event", {}) and
            any(f[1].get("event", {}).get("data", {}).get("stdout") == "cHkK" for f in frames) and
            frames[-1][0] == 2, f"{st} {frames or raw}")
    now = int(time.time())
    st, j, _ = w.req("GET", f"/sandboxes/{sid}/metrics?start={now - 60}&end={now + 60}&source=ci")
    need = ["timestamp", "timestampUnix", "cpuCount", "cpuUsedPct", "memUsed", "memTotal",
            "memCache", "diskUsed", "diskTotal"]
    w.check("metrics with start/end: every field incl. timestampUnix and memCache",
            st == 200 and isinstance(j, list) and len(j) == 1 and all(k in j[0] for k in need),
            f"{st} {j}")
    # The guest's page cache, from an agent that reports it (templates built since mem_cache).
    w.check("metrics: memCache is the guest's page cache (> 0)",
            st == 200 and isinstance(j, list) and j and isinstance(j[0].get("memCache"), int) and
            j[0]["memCache"] > 0 and j[0]["memUsed"] > 0, f"{st} {j}")
    st, j, hd = w.req("GET", "/v2/sandboxes?metadata=py%3D1&state=running&limit=100&junk=1")
    need = ["templateID", "sandboxID", "clientID", "startedAt", "endAt", "cpuCount",
            "memoryMB", "diskSizeMB", "state", "envdVersion"]
    w.check("list v2 (unknown parameter ignored): ListedSandbox keys, state running",
            st == 200 and [s["sandboxID"] for s in j] == [sid] and
            all(k in j[0] for k in need) and j[0]["state"] == "running", f"{st} {j}")
    st, j, _ = w.req("GET", "/sandboxes?metadata=py%3D1")
    w.check("list v1", st == 200 and [s["sandboxID"] for s in j] == [sid], f"{st} {j}")
    st, j, _ = w.req("GET", "/templates")
    w.check("templates lists base", st == 200 and any(t.get("templateID") == "base" for t in j),
            f"{st} {j}")
    w.refused("create with egressProxy", "POST", "/v2/sandboxes",
              {"templateID": "base", "egressProxy": {"address": "h:1"}}, 400, "egressProxy")
    w.refused("create with iam", "POST", "/v2/sandboxes",
              {"templateID": "base", "iam": {"tokens": {}}}, 400, "iam")
    w.refused("create with a bare address in network.allowOut (airlock wants its port)", "POST",
              "/v2/sandboxes", {"templateID": "base", "network": {"allowOut": ["1.1.1.1"]}}, 400,
              "1.1.1.1:443")
    w.refused("create with network.rules setting a framing header", "POST", "/v2/sandboxes",
              {"templateID": "base", "network": {"allowOut": ["api.example.com"], "rules": {
                  "api.example.com": [{"transform": {"headers": {"Host": "x"}}}]}}},
              400, "network.rules.api.example.com[0].transform.headers.Host")
    w.refused("create with network.rules using iam", "POST", "/v2/sandboxes",
              {"templateID": "base", "network": {"rules": {
                  "api.example.com": [{"transform": {"headers": {"A": "x"}}, "iam": {}}]}}},
              400, "network.rules.api.example.com[0].iam")
    w.refused("create denying part of the internet", "POST", "/v2/sandboxes",
              {"templateID": "base", "network": {"denyOut": ["203.0.113.0/24"]}}, 400,
              "network.denyOut[0]")
    # PUT .../network on the wire sandbox (no interface: internet off, no network object).
    st, j, _ = w.req("PUT", f"/sandboxes/{sid}/network", {"allow_internet_access": False})
    w.check("PUT network allowing nothing on a sandbox without an interface: 204", st == 204,
            f"{st} {j}")
    w.refused("PUT network opening a sandbox without an interface", "PUT",
              f"/sandboxes/{sid}/network", {"allowOut": ["api.example.com"],
                                              "allow_internet_access": False}, 409, "interface")
    w.refused("PUT network with header rules on a sandbox without an interface", "PUT",
              f"/sandboxes/{sid}/network", {"allow_internet_access": False, "rules": {
                  "h.example.com": [{"transform": {"headers": {"X-K": "v"}}}]}}, 409, "interface")
    w.refused("PUT network with a bad header rule", "PUT", f"/sandboxes/{sid}/network",
              {"rules": {"h.example.com": [{"transform": {"headers": {"X K": "v"}}}]}}, 400,
              "rules.h.example.com[0].transform.headers.X K")
    w.refused("PUT network with an unknown field", "PUT", f"/sandboxes/{sid}/network",
              {"allowout": []}, 400, "allowout")
    w.refused("PUT network on an unknown sandbox", "PUT", "/sandboxes/nosuchsandbox00000000/network",
              {}, 404, "not found")
    w.refused("create with a string timeout", "POST", "/sandboxes",
              {"templateID": "base", "timeout": "300"}, 400, "timeout")
    w.refused("create with an unknown field", "POST", "/sandboxes",
              {"templateID": "base", "cpus": 2}, 400, "cpus")
    w.refused("create with a tag airlock lacks", "POST", "/sandboxes",
              {"templateID": "base:v9"}, 400, "templateID")
    w.refused("create with autoResume but no autoPause", "POST", "/sandboxes",
              {"templateID": "base", "autoPause": False, "autoResume": {"enabled": True}}, 400,
              "autoResume.enabled: needs autoPause")
    w.refused("create with a non-object autoResume", "POST", "/sandboxes",
              {"templateID": "base", "autoPause": True, "autoResume": True}, 400, "autoResume")
    w.refused("create with a non-boolean autoResume.enabled", "POST", "/sandboxes",
              {"templateID": "base", "autoPause": True, "autoResume": {"enabled": "yes"}}, 400,
              "autoResume.enabled")
    w.refused("list with a bad state", "GET", "/v2/sandboxes?state=killed", None, 400, "state")
    w.refused("list with a bad startedAfter", "GET", "/v2/sandboxes?startedAfter=yesterday",
              None, 400, "startedAfter")
    w.refused("list with a bad nextToken", "GET", "/v2/sandboxes?nextToken=zz", None, 400,
              "nextToken")
    w.refused("fork of none", "POST", f"/sandboxes/{sid}/fork", {"count": 0}, 400, "count")
    w.refused("snapshot with a bad name", "POST", f"/sandboxes/{sid}/snapshots", {"name": "a/b/c"},
              400, "name")
    # The deprecated /refreshes and /resume (no SDK sends them; E2B's API has them).
    st, j, _ = w.req("POST", f"/sandboxes/{sid}/refreshes", {"duration": 3000})
    st2, d, _ = w.req("GET", f"/sandboxes/{sid}")
    end = d.get("endAt", "") if isinstance(d, dict) else ""
    want = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 2900))
    w.check("refreshes {duration: 3000}: 204, endAt at least ~now + 3000 s",
            st == 204 and st2 == 200 and end[:19] >= want, f"{st} {j} {end} < {want}")
    w.refused("refreshes over 3600 s", "POST", f"/sandboxes/{sid}/refreshes", {"duration": 3601},
              400, "duration")
    w.refused("refreshes with an unknown field", "POST", f"/sandboxes/{sid}/refreshes",
              {"timeout": 5}, 400, "timeout")
    w.refused("refreshes of an unknown sandbox", "POST", "/sandboxes/nosuchsandbox00000000/refreshes",
              {}, 404, "not found")
    w.refused("resume of a running sandbox", "POST", f"/sandboxes/{sid}/resume", {}, 409,
              "already running")
    w.refused("resume with a bad timeout", "POST", f"/sandboxes/{sid}/resume", {"timeout": "x"},
              400, "timeout")
    st, j, _ = w.req("POST", f"/sandboxes/{sid}/pause")
    st2, j2, _ = w.req("POST", f"/sandboxes/{sid}/resume", {"timeout": 600})
    st3, d, _ = w.req("GET", f"/sandboxes/{sid}")
    w.check("pause, then resume: 204, 201 with the Sandbox, running again",
            st == 204 and st2 == 201 and isinstance(j2, dict) and j2.get("sandboxID") == sid and
            st3 == 200 and d.get("state") == "running", f"{st} {j} / {st2} {j2} / {st3} {d}")
    # GET /snapshots pages as /v2/sandboxes does: limit, X-Next-Token, nextToken.
    made = []
    for n in ("wire-page-a", "wire-page-b"):
        st, j, _ = w.req("POST", f"/sandboxes/{sid}/snapshots", {"name": n})
        w.check(f"snapshot {n}: 201", st == 201, f"{st} {j}")
        made.append(f"{n}:default")
    st, j, hd = w.req("GET", f"/snapshots?sandboxID={sid}&limit=1")
    tok = hd.get("x-next-token")
    w.check("snapshots page 1 of limit 1: the newest and an X-Next-Token",
            st == 200 and [s["snapshotID"] for s in j] == [made[1]] and tok, f"{st} {j} {hd}")
    st, j, hd = w.req("GET", f"/snapshots?sandboxID={sid}&limit=1&nextToken={tok}")
    w.check("snapshots page 2: the older one, no token (the last page)",
            st == 200 and [s["snapshotID"] for s in j] == [made[0]] and
            "x-next-token" not in hd, f"{st} {j} {hd}")
    w.refused("snapshots with a bad nextToken", "GET", "/snapshots?nextToken=zz", None, 400,
              "nextToken")
    for m in made:
        st, j, _ = w.req("DELETE", f"/templates/{m}")
        w.check(f"delete snapshot {m}: 204", st == 204, f"{st} {j}")
    st, j, _ = w.req("DELETE", f"/sandboxes/{sid}")
    w.check("kill: 204", st == 204, f"{st} {j}")
    st, j, _ = w.req("DELETE", f"/sandboxes/{sid}")
    w.check("kill twice: 404 with code 404", st == 404 and j.get("code") == 404, f"{st} {j}")
    st, j, _ = w.req("GET", f"/sandboxes/{sid}")
    w.check("get after kill: 404", st == 404 and j.get("code") == 404, f"{st} {j}")
    st, j, _ = w.req("POST", "/filesystem.Filesystem/Stat", b'{"path": "/"}',
                     headers={"Content-Type": "application/json", "Connect-Protocol-Version": "1",
                              "E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
                              "X-Access-Token": tok}, api=False)
    w.check("envd after kill: 502 with the sandbox id", st == 502 and
            j.get("sandboxId") == sid, f"{st} {j}")
    return w.results

def traffic_restart(d, c, key):
    """allowPublicTraffic false: the traffic token is the store's, so a SIGKILLed
    airlockd, started again (the VM adopted), still asks the same one. The port
    has no server: a request the token check passes gets 502 "port is not open"."""
    w = Wire(c.port, key)
    st, sb, _ = w.req("POST", "/sandboxes", {"templateID": "base", "timeout": 600,
                      "allow_internet_access": False, "network": {"allowPublicTraffic": False}})
    tok = sb.get("trafficAccessToken") if isinstance(sb, dict) else None
    w.check("create with allowPublicTraffic false: 201 with a trafficAccessToken",
            st == 201 and isinstance(tok, str) and len(tok) >= 20, f"{st} {sb}")
    if st != 201:
        return w.results, c
    sid = sb["sandboxID"]
    d.kill()
    c = d.start()
    w.port = c.port
    st, j, _ = w.req("POST", f"/sandboxes/{sid}/connect", {})
    w.check("after a restart: connect answers the same trafficAccessToken",
            st == 200 and j.get("trafficAccessToken") == tok, f"{st} {j}")
    route = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "3000"}
    st, j, _ = w.req("GET", "/", headers=route, api=False)
    w.check("after a restart: no token: 403 in E2B's shape", st == 403 and
            isinstance(j, dict) and j.get("code") == 403, f"{st} {j}")
    st, j, _ = w.req("GET", "/", headers=dict(route, **{"e2b-traffic-access-token": tok}),
                     api=False)
    w.check("after a restart: the token passes (502: nothing listens)", st == 502, f"{st} {j}")
    st, j, _ = w.req("DELETE", f"/sandboxes/{sid}")
    w.check("kill: 204", st == 204, f"{st} {j}")
    return w.results, c

def network(binary, root, node):
    """The network mapping end to end: a second airlockd whose egress gateway dials
    from the test internet (tests/testnet, held exclusively as the egress suites do),
    sdk.mjs's network: cases with 2.51.0 (updateNetwork is 2.25+)."""
    sys.path.insert(0, os.path.join(os.path.dirname(here), "testnet"))
    import testnet
    from egress_harness import gateway_env
    gwbin = os.path.join(os.path.dirname(os.path.dirname(binary)), "gateway", "airlock-gateway")
    if not os.access(gwbin, os.X_OK):
        print("FAIL: network: airlock-gateway not built")
        return 0, 1
    names = json.dumps({k: testnet.name(k) for k in ("allowed", "forbidden", "unlisted", "metadata")})
    with testnet.exclusive():
        testnet.acquire()
        d = Daemon(binary, root)
        try:
            c = d.start(gateway_env())
            key = c.call("POST", "/v1/keys", {"name": "e2b-net-test", "format": "e2b"})["key"]
            url = f"http://127.0.0.1:{c.port}"
            env = dict(os.environ, E2B_PKG="e2b", E2B_API_URL=url, E2B_SANDBOX_URL=url,
                       E2B_API_KEY=key, E2B_TESTNET=names, E2B_ONLY="network")
            for k in ("E2B_DOMAIN", "E2B_DEBUG", "E2B_CONNECT_TO", "E2B_EXPECT_DOMAIN"):
                env.pop(k, None)
            return run_sdk(node, "e2b", env)
        except Exception as e:
            print(f"FAIL: network: harness: {e!r}\n{d.logtail()}")
            return 0, 1
        finally:
            d.cleanup()
            testnet.release()

def main():
    binary = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    setup = subprocess.run(["bash", os.path.join(here, "setup.sh")], capture_output=True, text=True)
    if setup.returncode != 0:
        print("FAIL: setup: " + setup.stderr[-2000:])
        print("0 passed, 1 failed")
        return 1
    node = setup.stdout.strip().splitlines()[-1]
    passed = failed = 0
    d = Daemon(binary, root)
    try:
        c = d.start()
        try:
            key = c.call("POST", "/v1/keys", {"name": "e2b-sdk-test", "format": "e2b"})["key"]
        except Exception as e:
            # A server without E2B keys: go on with a plain key, so each case says what fails.
            print(f"FAIL: keys: minting an E2B-format key: {e!r}")
            failed += 1
            key = c.call("POST", "/v1/keys", {"name": "e2b-sdk-test"})["key"]
        url = f"http://127.0.0.1:{c.port}"
        if os.environ.get("E2B_ONLY") in (None, "", "wire"):
            for r in python_wire(c.port, key):
                passed, failed = passed + r, failed + (not r)
            results, c = traffic_restart(d, c, key)
            url = f"http://127.0.0.1:{c.port}"
            for r in results:
                passed, failed = passed + r, failed + (not r)
        for pkg in SDKS if os.environ.get("E2B_ONLY") not in ("wire", "network") else []:
            env = dict(os.environ, E2B_PKG=pkg, E2B_API_URL=url, E2B_SANDBOX_URL=url,
                       E2B_API_KEY=key, E2B_EXPECT_DOMAIN=DOMAIN)
            for k in ("E2B_DOMAIN", "E2B_DEBUG", "E2B_CONNECT_TO"):
                env.pop(k, None)
            p, f = run_sdk(node, pkg, env)
            passed, failed = passed + p, failed + f
        rep = d.sanitizer_report()
        if rep:
            print("FAIL: airlockd sanitizer report:\n" + rep)
            failed += 1
        else:
            print("ok: airlockd: no sanitizer report")
            passed += 1
    except Exception as e:
        print(f"FAIL: harness: {e!r}\n{d.logtail()}")
        failed += 1
    finally:
        d.cleanup()
    if os.environ.get("E2B_ONLY") not in ("wire", "network") and os.environ.get("E2B_TLS", "1") != "0":
        p, f = tls_front(binary, root, node)
        passed, failed = passed + p, failed + f
    if os.environ.get("E2B_ONLY") in (None, "", "network"):
        p, f = network(binary, root, node)
        passed, failed = passed + p, failed + f
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
