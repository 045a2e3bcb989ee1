#!/usr/bin/python3
"""Property-based fuzzing of the REST API against the real airlockd.

The operations come from /v1/openapi.json as the running daemon serves it.
For each one a valid request is built (schema + the live objects below),
then hypothesis applies one mutation: a field of the wrong type, null, an
unknown field, a huge or negative number, 2^63, deep nesting, invalid
UTF-8 or NUL in a string (raw bytes), an overlong string; a bad path
parameter or query value (%zz, %00, %ff, +1, duplicates, unknown names,
unknown enum values); a wrong content type, method, protocol version or
key. The daemon runs with its own data dir and a live sandbox (base
template, no network), a secret, a user key and a running process.

Oracle, per request: no 5xx; no dropped connection or empty reply; every
4xx body is {"error":{"code","message"}} with the code of its status, and
for a field error the message names the field or parameter; a mutation
the API must refuse is refused (4xx); a refused request changes no
listable state (sandboxes and their state, secrets, keys, templates).
Throughout: the daemon's pid is alive, /healthz answers, the live sandbox
still execs, and at the end ASan/UBSan/LSan found nothing.

Failures are shrunk by hypothesis and all reported in one summary.
Usage: test_api_fuzz.py AIRLOCKD [DATA_ROOT]
AIRLOCK_FUZZ_SECONDS (default 90) bounds the run; AIRLOCK_FUZZ_SEED fixes it.
Runs with Debian's python3 (python3-hypothesis)."""
import json, os, random, re, signal, socket, sys, time, traceback, urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import Daemon

try:
    from hypothesis import HealthCheck, Phase, given, settings, strategies as st
    from hypothesis.errors import HypothesisException
except ImportError:
    print("SKIP: python3-hypothesis is not installed (scripts/packages.txt)")
    sys.exit(77)

SECRET = "FUZZ_SECRET"
LIVE_TEMPLATES = set()
CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
         405: "method_not_allowed", 409: "conflict", 413: "too_large",
         415: "unsupported_media_type", 422: "unprocessable", 429: "rate_limited"}
# Query parameters the daemon reads that the OpenAPI document does not list
# (docs/api.md): valid values for them.
EXTRA_QUERY = {
    ("GET", "/v1/events"): {"after": "0"},
    ("GET", "/v1/sandboxes/{id}/events"): {"after": "0"},
    ("GET", "/v1/sandboxes/{id}/logs"): {"tail": "100"},
    ("GET", "/v1/sandboxes/{id}/files/list"): {"depth": "1"},
    ("GET", "/v1/sandboxes/{id}/files/watch"): {"recursive": "false"},
    ("PUT", "/v1/sandboxes/{id}/files"): {"mode": "0644"},
}
RAW_BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80",
                b"a\xe2\x82"]
BIG_INTS = [-1, -2**31, 2**31, 2**53 + 1, 2**63 - 1, -2**63, 2**63, 2**64, 10**30]

class Failure(AssertionError):
    pass

class DaemonDied(BaseException):
    """Not an Exception: hypothesis must not shrink against a dead daemon."""

# --- raw HTTP: one request per connection, bytes as given --------------------

class Reply:
    def __init__(self, status, headers, body, streamed):
        self.status, self.headers, self.body, self.streamed = status, headers, body, streamed

    def ctype(self):
        return self.headers.get("content-type", "")

def recv_reply(s, deadline_stream=0.5):
    """Read one response; an SSE or other streaming answer is cut after deadline_stream s."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            return None if not buf else Reply(-1, {}, buf, False)
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", lines[0] + b" ")
    if not m:
        return Reply(-1, {}, buf, False)
    status = int(m.group(1))
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        hdrs[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    if "content-length" in hdrs:
        n = int(hdrs["content-length"])
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return Reply(status, hdrs, rest[:n], False)
    if hdrs.get("transfer-encoding", "").lower() == "chunked":
        # A stream (SSE, exec, download): read for a while, then leave.
        s.settimeout(0.2)
        end = time.time() + deadline_stream
        while time.time() < end and not rest.endswith(b"0\r\n\r\n"):
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            rest += chunk
        return Reply(status, hdrs, rest, True)
    return Reply(status, hdrs, rest, False)

def send_raw(port, data, timeout=60):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except ConnectionRefusedError:
        return None
    try:
        s.sendall(data)
        return recv_reply(s)
    except (ConnectionResetError, BrokenPipeError):
        return None
    except socket.timeout:
        return Reply(-2, {}, b"", False)
    finally:
        s.close()

def build_request(method, target, headers, body):
    """method: str or bytes; target: bytes; headers: list of (name, value) str; body: bytes|None."""
    m = method.encode() if isinstance(method, str) else method
    version = b"HTTP/1.1"
    out = [m + b" " + target + b" " + version]
    for k, v in headers:
        if k == "_version":
            out[0] = m + b" " + target + b" " + v.encode()
            continue
        out.append(k.encode() + b": " + v.encode("latin-1"))
    if body is not None and not any(k.lower() == "content-length" for k, _ in headers):
        out.append(b"Content-Length: " + str(len(body)).encode())
    out.append(b"Connection: close")
    return b"\r\n".join(out) + b"\r\n\r\n" + (body or b"")

# --- the spec -----------------------------------------------------------------

def resolve(spec, schema):
    while isinstance(schema, dict) and "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].split("/")[-1]]
    return schema or {}

def operations(spec):
    ops = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            params = op.get("parameters", [])
            body = None
            ctypes = op.get("requestBody", {}).get("content", {})
            if "application/json" in ctypes:
                body = resolve(spec, ctypes["application/json"].get("schema"))
            ops.append({"method": method.upper(), "path": path,
                        "path_params": [p for p in params if p["in"] == "path"],
                        "query": [p for p in params if p["in"] == "query"],
                        "json": "application/json" in ctypes,
                        "octet": "application/octet-stream" in ctypes,
                        "schema": body, "spec": spec})
    return ops

# --- the world the requests act on --------------------------------------------

class World:
    def __init__(self, d, c):
        self.d, self.c = d, c
        self.port = c.port
        self.admin = c.key
        self.sid = None
        self.pid = None
        self.user_key = None
        self.victim_key = None
        self.admin_id = None

    def setup(self):
        c = self.c
        c.call("PUT", f"/v1/secrets/{SECRET}", {"value": "fuzz-value", "hosts": ["api.example.com"]})
        k = c.call("POST", "/v1/keys", {"name": "fuzz-user", "role": "user"})
        self.user_key, self.user_key_id = k["key"], k["id"]
        self.ensure_victim()
        t0 = time.time()
        sb = c.call("POST", "/v1/sandboxes", {"template": "base", "memory_mb": 256, "vcpus": 1,
                                              "network": {"mode": "none"}})
        self.sid = sb["id"]
        print(f"live sandbox {self.sid} up in {time.time() - t0:.0f} s", flush=True)
        for t in c.call("GET", "/v1/templates")["templates"]:
            LIVE_TEMPLATES.add(t.get("name", ""))
        self.ensure_process()

    def ensure_victim(self):
        keys = self.c.call("GET", "/v1/keys")["keys"]
        if self.victim_key is None or not any(k["id"] == self.victim_key for k in keys):
            self.victim_key = self.c.call("POST", "/v1/keys", {"name": "fuzz-victim"})["id"]
        if not any(k["id"] == self.user_key_id for k in keys):
            k = self.c.call("POST", "/v1/keys", {"name": "fuzz-user", "role": "user"})
            self.user_key, self.user_key_id = k["key"], k["id"]

    def ensure_process(self):
        """A long-lived process for the processes/{pid} routes (signals ignored but KILL)."""
        if self.pid is not None:
            procs = self.c.call("GET", f"/v1/sandboxes/{self.sid}/processes")["processes"]
            if any(p.get("pid") == self.pid for p in procs):
                return
        h = {"Authorization": "Bearer " + self.admin, "Content-Type": "application/json"}
        conn = self.c.conn()
        conn.request("POST", f"/v1/sandboxes/{self.sid}/exec",
                     body=json.dumps({"cmd": ["sh", "-c", "trap '' HUP INT TERM; exec sleep 1000000"],
                                      "stdin": True}).encode(), headers=h)
        r = conn.getresponse()
        line = b""
        while not line.startswith(b"data: "):
            line = r.readline()
            if not line:
                raise RuntimeError("exec of the fuzz process gave no start event")
        self.pid = json.loads(line[6:])["pid"]
        conn.close()

    def ensure_secret(self):
        st_, _, _ = self.c.raw("GET", f"/v1/secrets/{SECRET}")
        if st_ == 404:
            self.c.call("PUT", f"/v1/secrets/{SECRET}", {"value": "fuzz-value",
                                                         "hosts": ["api.example.com"]})

    def restore(self):
        """Undo what an accepted mutation did to the objects the run depends on."""
        sb = self.c.call("GET", f"/v1/sandboxes/{self.sid}", expect=(200, 404))
        if isinstance(sb, dict) and sb.get("error"):
            raise Failure(f"the live sandbox {self.sid} is gone")
        end = time.time() + 300
        while sb["state"] in ("suspending", "resuming", "creating") and time.time() < end:
            time.sleep(0.5)
            sb = self.c.call("GET", f"/v1/sandboxes/{self.sid}")
        if sb["state"] in ("paused", "suspended"):
            self.c.call("POST", f"/v1/sandboxes/{self.sid}/resume")
        if sb.get("network", {}).get("mode") != "none":
            raise Failure("the live sandbox's network changed")
        self.ensure_secret()
        self.ensure_victim()
        self.ensure_process()

    def snapshot(self):
        """The listable state a refused request must leave alone."""
        c = self.c
        sbs = c.call("GET", "/v1/sandboxes?limit=1000")["sandboxes"]
        sbs = sorted((s["id"], s["state"], json.dumps({k: v for k, v in s.items()
                      if k not in ("last_active_at", "updated_at")}, sort_keys=True)) for s in sbs)
        secrets = sorted(json.dumps(s, sort_keys=True) for s in c.call("GET", "/v1/secrets")["secrets"])
        keys = sorted((k["id"], k["name"], k["role"], k["project"])
                      for k in c.call("GET", "/v1/keys")["keys"])
        # Only the templates of the start (the shared dir may gain others' builds).
        tmpls = sorted(json.dumps(t, sort_keys=True) for t in c.call("GET", "/v1/templates")["templates"]
                       if t.get("name") in LIVE_TEMPLATES)
        return {"sandboxes": sbs, "secrets": secrets, "keys": keys, "templates": tmpls}

    def healthy(self):
        if self.d.proc.poll() is not None:
            raise Failure(f"airlockd exited with {self.d.proc.returncode}")
        r = send_raw(self.port, build_request("GET", b"/healthz", [("Host", "x")], None), timeout=30)
        if r is None or r.status != 200:
            raise Failure("/healthz does not answer 200: " + (repr(r.status) if r else "no reply"))

    def execs(self):
        code, _, out, _ = self.c.exec(self.sid, ["echo", "alive"])
        if code != 0 or out != b"alive\n":
            raise Failure(f"the live sandbox no longer execs: {code} {out!r}")

# --- valid requests -------------------------------------------------------------

NET_ALLOW = {"mode": "allowlist", "allow": ["api.example.com", "*.example.org", "db.example.com:5432",
             "203.0.113.0/24:22", {"host": "a.example.com", "port": 443, "methods": ["GET"],
                                    "paths": ["/v1/*"], "rate": {"rps": 5, "bps": 100000}}],
             "rate": {"rps": 10, "bps": 100000}}

def valid_body(op, w):
    """A request body the API accepts for this operation (refused only by state)."""
    m, p = op["method"], op["path"]
    key = (m, p)
    bodies = {
        ("POST", "/v1/sandboxes"): {"template": "base", "vcpus": 1, "memory_mb": 256,
                                    "env": {"A": "b"}, "metadata": {"k": "v"}, "timeout_s": 60,
                                    "idle_timeout_s": 60, "auto_pause": False, "network": NET_ALLOW},
        ("PATCH", "/v1/sandboxes/{id}"): {"timeout_s": 0, "idle_timeout_s": 21600,
                                          "auto_pause": False, "metadata": {"k": "v"},
                                          "network": {"mode": "none", "allow": []}},
        ("POST", "/v1/sandboxes/{id}/exec"): {"cmd": ["true", "x"], "env": {"A": "b"}, "cwd": "/tmp",
                                              "user": "user", "stdin": False,
                                              "pty": {"cols": 80, "rows": 24}, "timeout_s": 10},
        ("POST", "/v1/sandboxes/{id}/files/mkdir"): {"path": "/tmp/fuzz-dir"},
        ("POST", "/v1/sandboxes/{id}/files/move"): {"from": "/tmp/fuzz-nothing", "to": "/tmp/fuzz-b"},
        ("POST", "/v1/sandboxes/{id}/files/remove"): {"path": "/tmp/fuzz-nothing"},
        ("POST", "/v1/sandboxes/{id}/processes/{pid}/stdin"): {"data": "aGkK"},
        ("POST", "/v1/sandboxes/{id}/processes/{pid}/signal"): {"signal": "SIGHUP"},
        ("POST", "/v1/sandboxes/{id}/processes/{pid}/resize"): {"cols": 80, "rows": 24},
        ("PUT", "/v1/secrets/{name}"): {"value": "fuzz-value", "hosts": ["api.example.com"],
                                        "header": "Authorization", "format": "Bearer {value}",
                                        "scope": "project"},
        ("POST", "/v1/keys"): {"name": "fuzz-new", "project": "default", "role": "user"},
        # A NIC the live sandbox lacks: always refused (network.mode), never a real fork.
        ("POST", "/v1/sandboxes/{id}/fork"): {"count": 1, "network": NET_ALLOW, "metadata": {"k": "v"},
                                              "timeout_s": 60},
        ("POST", "/v1/sandboxes/{id}/snapshots"): {"name": "fuzz-snap"},
        # recipe.files is always refused over the API: a build never starts (guard_body).
        ("POST", "/v1/templates"): {"name": "fuzz-tmpl", "recipe": {"base": "debian",
                                    "files": [{"src": "/etc/hostname", "dst": "/x"}]}},
    }
    if key in bodies:
        return json.loads(json.dumps(bodies[key]))
    if m == "POST" and p.endswith(("/pause", "/resume", "/suspend")):
        return {}
    return None

def valid_params(op, w):
    out = {}
    for prm in op["path_params"]:
        n = prm["name"]
        if n == "id" and op["path"].startswith("/v1/keys"):
            out[n] = w.victim_key
        elif n == "id" and op["method"] == "DELETE" and op["path"] == "/v1/sandboxes/{id}":
            out[n] = "zzzzzzzzzzzzzzzzzzzz"	# never the live one
        elif n == "id":
            out[n] = w.sid
        elif n == "pid":
            out[n] = str(w.pid)
        elif n == "name" and op["path"].startswith("/v1/secrets"):
            out[n] = SECRET
        elif n in ("name", "template"):
            out[n] = "fuzz-no-such-template"	# never resizes a real pool
        elif n == "project":
            out[n] = "fuzz-quota-project"	# holds no sandboxes: its quota limits nothing
    return out

def valid_query(op, w):
    q = []
    vals = {"state": "running,paused", "metadata": "k%3Dv", "limit": "10", "after": "a",
            "sandbox": w.sid, "decision": "deny", "kind": "dns", "since": "2026-01-01T00:00:00Z",
            "until": "2030-01-01T00:00:00Z", "scope": "project"}
    for prm in op["query"]:
        n = prm["name"]
        if n == "path":
            v = {"GET": "/etc/hostname", "PUT": "/tmp/fuzz-upload"}[op["method"]]
            if op["path"].endswith(("/list", "/watch")):
                v = "/tmp"
            elif op["path"].endswith("/stat"):
                v = "/etc/hostname"
            q.append((n, urllib.parse.quote(v, safe="/")))
        elif n == "sandbox" and op["path"].startswith("/v1/secrets"):
            continue	# scope=project with a sandbox is refused; leave it out
        elif n in vals:
            q.append((n, vals[n]))
    if "events" in op["path"]:
        q = [(n, "0" if n == "after" else v) for n, v in q]	# an event sequence number
    for n, v in EXTRA_QUERY.get((op["method"], op["path"]), {}).items():
        if not any(n == k for k, _ in q):	# the document may list it by now
            q.append((n, v))
    return q

# --- mutations ------------------------------------------------------------------

def alternative(spec, schema, value):
    """For a oneOf (a rule: string or object), the alternative value is of."""
    for alt in schema.get("oneOf", []) if isinstance(schema, dict) else []:
        alt = resolve(spec, alt)
        if (alt.get("type") == "object") == isinstance(value, dict):
            return alt
    return schema

def field_paths(obj, schema, spec, prefix=()):
    """(path tuple, schema) of every field in a valid body, nested ones too.
    A oneOf field keeps its oneOf (any other type is wrong); its insides
    follow the alternative it matches."""
    out = []
    schema = alternative(spec, resolve(spec, schema), obj)
    if isinstance(obj, dict):
        props = schema.get("properties", {}) if isinstance(schema, dict) else {}
        for k, v in obj.items():
            sub = resolve(spec, props.get(k, {}))
            out.append((prefix + (k,), sub))
            out.extend(field_paths(v, sub, spec, prefix + (k,)))
    elif isinstance(obj, list):
        items = resolve(spec, schema.get("items", {})) if isinstance(schema, dict) else {}
        for i, v in enumerate(obj):
            out.append((prefix + (i,), items))
            out.extend(field_paths(v, items, spec, prefix + (i,)))
    return out

def get_in(obj, path):
    for k in path:
        obj = obj[k]
    return obj

def set_in(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value

def field_name(path):
    """The name an error message must mention: the last key (not an index)."""
    for k in reversed(path):
        if isinstance(k, str):
            return k
    return None

def wrong_values(schema, current):
    """Values of another JSON type than the field takes (all must be refused)."""
    t = schema.get("type") if isinstance(schema, dict) else None
    if t is None:
        t = {str: "string", bool: "boolean", int: "integer", float: "number", dict: "object",
             list: "array"}.get(type(current))
    vals = {"string": [1, True, [], {}, 1.5], "integer": ["1", 1.5, True, [], {}, "x"],
            "number": ["1", True, [], {}], "boolean": ["true", 1, 0, [], {}],
            "object": ["x", 1, [], True], "array": ["x", 1, {}, True]}.get(t, [])
    if "oneOf" in (schema or {}):
        vals = [1, True, 1.5]	# a rule is a string or an object
    return vals

PLACEHOLDER = "\u0001FUZZRAW\u0001"

def encode_body(body, raw=None):
    """raw: bytes spliced in as the placeholder string's content, or
    ("bare", bytes) spliced in as a JSON value (deep nesting)."""
    text = json.dumps(body, ensure_ascii=False).encode()
    if raw is not None:
        bare = raw[1] if isinstance(raw, tuple) else b'"' + raw + b'"'
        text = text.replace(json.dumps(PLACEHOLDER, ensure_ascii=False).encode(), bare)
    return text

BODY_KINDS = ["type", "null", "unknown", "number", "utf8", "nul", "long", "deep", "enum", "shape"]
QUERY_KINDS = ["escape", "unknown", "dup", "enum", "int", "nul", "ff", "plus"]

@st.composite
def body_mutation(draw, op, w, kind):
    """(body, raw bytes or None, strict, field name to mention or None, label)."""
    body = valid_body(op, w)
    if body is None:
        body = {}
    paths = field_paths(body, op["schema"] or {}, op["spec"])
    if kind == "unknown" or not paths:
        objs = [()] + [p for p, _ in paths if isinstance(get_in(body, p), dict)
                       and p[-1] not in ("env", "metadata")]
        where = draw(st.sampled_from(objs))
        name = draw(st.sampled_from(["zz_unknown", "Cmd", "x", "template ", "__proto__"]))
        get_in(body, where)[name] = draw(st.sampled_from([1, None, "v", {}]))
        return body, None, True, name, f"unknown field {'.'.join(map(str, where + (name,)))}"
    path, schema = draw(st.sampled_from(paths))
    cur = get_in(body, path)
    fname = field_name(path)
    label = ".".join(map(str, path))
    if kind == "type":
        vals = wrong_values(schema, cur)
        if not vals:
            kind = "null"
        else:
            set_in(body, path, draw(st.sampled_from(vals)))
            return body, None, True, fname, f"wrong type at {label}"
    if kind == "null":
        set_in(body, path, None)
        return body, None, True, fname, f"null at {label}"
    if kind == "number":
        n = draw(st.sampled_from(BIG_INTS + [-5, 0, 1.0e308, -0.5]))
        set_in(body, path, n)
        if isinstance(n, int) and abs(n) >= 2**63:
            # jansson refuses it while parsing: a 400 at a line and column, no field name.
            return body, None, True, None, f"number {n} at {label}"
        t = (schema or {}).get("type")
        strict = abs(n) >= 2**63 if isinstance(n, int) else t == "integer"
        if t in ("integer", "number") and (("minimum" in schema and n < schema["minimum"]) or
                                           ("maximum" in schema and n > schema["maximum"])):
            strict = True
        if t not in ("integer", "number"):
            strict = True	# a number where it takes no number
        return body, None, strict, fname, f"number {n} at {label}"
    if kind == "utf8":
        set_in(body, path, PLACEHOLDER)
        return body, draw(st.sampled_from(RAW_BAD_UTF8)), True, None, f"invalid UTF-8 at {label}"
    if kind == "nul":
        # jansson refuses \u0000 while parsing: a 400 at a line and column, no field name.
        if not isinstance(cur, str):
            set_in(body, path, "a\u0000b")
            return body, None, True, None, f"NUL string at {label}"
        set_in(body, path, cur + "\u0000x")
        return body, None, True, None, f"NUL in {label}"
    if kind == "long":
        n = draw(st.sampled_from([300, 5000, 70000, 200000]))
        set_in(body, path, "A" * n)
        return body, None, False, fname, f"{n}-byte string at {label}"
    if kind == "deep":
        n = draw(st.sampled_from([64, 3000]))
        # Built as bytes: json.dumps would hit Python's recursion limit.
        set_in(body, path, PLACEHOLDER)
        if draw(st.sampled_from(["array", "object"])) == "array":
            nest = b"[" * n + b"]" * n
        else:
            nest = b'{"a":' * n + b"{}" + b"}" * n
        # 3000 levels pass jansson's depth limit (a parse error, no field); 64 are a wrong type.
        return body, ("bare", nest), True, fname if n < 1000 else None, f"{n}-deep nesting at {label}"
    if kind == "enum":
        enum_paths = [(p, s) for p, s in paths if isinstance(s, dict) and "enum" in s]
        if not enum_paths:
            set_in(body, path, [cur])
            return body, None, True, fname, f"wrapped in an array at {label}"
        path, schema = draw(st.sampled_from(enum_paths))
        v = draw(st.sampled_from(["", "ROOT", "none ", "x" * 40, "Allowlist"]))
        set_in(body, path, v)
        return body, None, True, field_name(path), f"unknown enum value {v!r} at {'.'.join(map(str, path))}"
    # shape: the body as a whole
    raw = draw(st.sampled_from([b"[1,2]", b"\"x\"", b"1", b"null", b"{\"a\":", b"{,}",
                                b"{\"a\":1,\"a\":2}", b"\xef\xbb\xbf{}", b"{}}", b"{\"a\":1}x"]))
    return raw, "whole", True, None, f"body {raw!r}"

BAD_PATH_VALUES = ["%zz", "%00", "%ff", "%c3%28", "+1", "a%2fb", "..", "%2e%2e", "-1", "0",
                   "99999999999999999999999", "A" * 300, "%e2%82", "x%20y", "\u00e9", "*"]

@st.composite
def path_mutation(draw, op, w):
    prm = draw(st.sampled_from(op["path_params"]))
    vals = BAD_PATH_VALUES
    if prm["name"] == "pid" and op["path"].endswith("/signal"):
        vals = [v for v in vals if v != "+1"]	# +1 parses as pid 1: the guest's init
    if prm["name"] == "project":	# "0", "-1" and a long digit run are valid project names
        vals = [v for v in vals if not re.fullmatch(r"[a-z0-9_-]{1,63}", v)]
    v = draw(st.sampled_from(vals))
    return prm["name"], v

@st.composite
def query_mutation(draw, op, w, kind):
    """(query list, strict, name to mention, label)."""
    q = valid_query(op, w)
    if kind == "unknown" or not q:
        name = draw(st.sampled_from(["zz_unknown", "Limit", "Path", "_"]))
        return q + [(name, "1")], True, name, f"unknown query parameter {name!r}"
    i = draw(st.integers(0, len(q) - 1))
    name, val = q[i]
    schema = next((p.get("schema", {}) for p in op["query"] if p["name"] == name), {})
    if kind == "escape":
        q[i] = (name, val + draw(st.sampled_from(["%zz", "%", "%4", "%g0"])))
        return q, True, name, f"bad escape in {name}"
    if kind == "nul":
        q[i] = (name, val + "%00")
        return q, True, name, f"%00 in {name}"
    if kind == "ff":
        q[i] = (name, val + "%ff")
        return q, False, name, f"%ff in {name}"
    if kind == "dup":
        q.append((name, val))
        return q, False, None, f"{name} twice"
    if kind == "enum" and "enum" in schema:
        v = draw(st.sampled_from(["", "ALLOW", "x", "dns,tls"]))
        q[i] = (name, v)
        return q, True, name, f"unknown value {v!r} for {name}"
    if kind in ("int", "enum") and (schema.get("type") == "integer" or name in ("limit", "tail", "after", "depth")):
        v = draw(st.sampled_from(["-1", "0", "9223372036854775808", "1e3", "0x10", "", "1.5", "%201"]))
        q[i] = (name, v)
        # limit and tail have documented ranges (1..); after is a cursor, depth is lenient.
        strict = name in ("limit", "tail") and v != "%201"
        return q, strict, name, f"{name}={v}"
    q[i] = (name, "+" + val)
    return q, False, None, f"+ before {name}"

@st.composite
def cases(draw, op, w, mode):
    """One mutated request: dict with method, target, headers, body, strict, mention, label."""
    method = op["method"]
    params = valid_params(op, w)
    query = valid_query(op, w)
    body = valid_body(op, w)
    raw = None
    ctype = "application/json" if op["json"] or body is not None else None
    strict, mention, label = True, None, mode
    key = w.admin
    version = None
    full_mode = mode
    mode, _, kind = mode.partition(":")
    if mode == "body":
        body, raw, strict, mention, label = draw(body_mutation(op, w, kind))
        if op["path"] == "/v1/templates" and "recipe" in label and mention is not None:
            # The recipe is parsed in the build child; over the API only
            # recipe.files is checked, and it refuses first.
            mention = "recipe"
    elif mode == "path":
        name, v = draw(path_mutation(op, w))
        params[name] = v
        label = f"path {name}={v!r}"
        # A bad pid is refused; any non-existent name/id is 404 (400 for a bad format).
    elif mode == "query":
        query, strict, mention, label = draw(query_mutation(op, w, kind))
    elif mode == "ctype":
        ctype = draw(st.sampled_from(["text/plain", "application/jsonx", "application/x-www-form-urlencoded",
                                      None, "multipart/form-data; boundary=x"]))
        if body is None:
            body = {}
        label = f"content type {ctype!r} with a JSON body"
        lifecycle = method == "POST" and op["path"].endswith(("/pause", "/resume", "/suspend"))
        strict = (op["json"] and not op["octet"]) or lifecycle
        if not op["json"] and not lifecycle:
            # A body where the route takes none: ignoring it is fine.
            strict = False
    elif mode == "method":
        method = draw(st.sampled_from(["PATCH", "PUT", "DELETE", "POST", "GET", "FOO", "get", "OPTIONS",
                                       "TRACE", "CONNECT"]))
        allowed = {m.upper() for m in op["spec"]["paths"][op["path"]] if m != "parameters"}
        if method in allowed or (method == "HEAD" and "GET" in allowed):
            method = "FOO"
        label = f"method {method}"
    elif mode == "version":
        # Malformed versions (400), not other versions (505 is right for HTTP/2.0).
        version = draw(st.sampled_from(["http/1.1", "Http/1.1", "HTTP/1", "HTTP/1.1 ", "HTTP /1.1"]))
        label = f"version {version!r}"
    elif mode == "auth":
        keys = [None, "", "al_wrong", "user", w.admin + "x", w.admin.upper()]
        if op["path"].endswith(("/pause", "/resume", "/suspend")):
            keys.remove("user")	# it may: a real suspend per example would eat the run
        key = draw(st.sampled_from(keys))
        label = f"key {key!r}"
        if key == "user":
            key = w.user_key
            admin_only = op["path"].startswith("/v1/keys") or (op["path"] == "/v1/templates" and method == "POST") \
                or (op["path"].startswith("/v1/templates/") and method == "DELETE")
            if not admin_only:
                # The user key sees the same project: refusals come from elsewhere.
                strict = False
            label = "user key on an admin route" if admin_only else "user key"
        if op["path"] in ("/healthz", "/metrics", "/v1/openapi.json"):
            strict = False	# no key needed
    path = op["path"]
    for n, v in params.items():
        path = path.replace("{" + n + "}", v if mode == "path" else urllib.parse.quote(v, safe=""))
    target = path
    if query:
        target += "?" + "&".join(f"{n}={v}" for n, v in query)
    if mode == "path":
        target = target.encode("utf-8")
    else:
        target = target.encode()
    if isinstance(body, (bytes, bytearray)) and raw == "whole":
        data = bytes(body)
    elif body is not None:
        data = encode_body(body, raw if isinstance(raw, (bytes, tuple)) else None)
    else:
        data = None
    if op["octet"] and mode not in ("ctype",):
        data, ctype = b"fuzz-bytes\n", "application/octet-stream"
    headers = [("Host", "127.0.0.1")]
    if key is not None:
        headers.append(("Authorization", "Bearer " + key))
    if ctype is not None and data is not None:
        headers.append(("Content-Type", ctype))
    if version is not None:
        headers.append(("_version", version))
    return {"method": method, "target": target, "headers": headers, "body": data, "strict": strict,
            "mention": mention, "label": label, "op": f"{op['method']} {op['path']}", "mode": full_mode}

def guard(case, w):
    """Requests that would wreck the run or the shared host are never sent."""
    t = case["target"]
    dec = urllib.parse.unquote_to_bytes(t.split(b"?")[0]).decode("latin-1").lower()
    if case["method"].upper() == "DELETE" and "/v1/templates/" in dec:
        name = dec.split("/v1/templates/", 1)[1].strip("/")
        if any(n and n.lower() in dec for n in LIVE_TEMPLATES) or name in ("", ".", ".."):
            return False
    if case["method"].upper() == "DELETE" and w.admin_id and w.admin_id.lower() in dec:
        return False
    if case["method"].upper() == "DELETE" and dec.rstrip("/").endswith(w.sid.lower()):
        return False
    # A fork or snapshot the API would accept runs for real (VMs, GiB of RAM files): never sent.
    if case["method"].upper() == "POST" and dec.rstrip("/").endswith(("/fork", "/snapshots")):
        try:
            b = json.loads(case["body"]) if case["body"] else {}
        except Exception:
            return True
        if not isinstance(b, dict):
            return True
        if dec.rstrip("/").endswith("/fork"):
            n = b.get("count", 1)
            net = b.get("network")
            could = set(b) <= {"count", "network", "metadata", "timeout_s"} and \
                type(n) is int and 1 <= n <= 16 and (net is None or (isinstance(net, dict) and
                                                                    net.get("mode", "none") == "none"))
        else:
            could = set(b) == {"name"} and isinstance(b["name"], str) and \
                re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,62}", b["name"]) is not None
        if could:
            return False
    if case["method"].upper() == "POST" and dec.rstrip("/") == "/v1/templates" and case["body"]:
        try:
            b = json.loads(case["body"])
        except Exception:
            return True
        if isinstance(b, dict) and isinstance(b.get("recipe"), dict) and "files" not in b["recipe"]:
            return False
    return True

# --- the oracle -----------------------------------------------------------------

def show(case):
    b = case["body"]
    if b is not None and len(b) > 300:
        b = b[:300] + b"...(%d bytes)" % len(b)
    return f"{case['method']} {case['target'][:300]!r} body={b!r} headers={case['headers'][1:]}"

def failure_head(msg):
    """The kind of a failure: its text before the request, numbers folded."""
    return re.sub(r"\d+", "N", msg.split(": [", 1)[0])[:90]

def judge(case, r, w, before):
    where = f"[{case['op']} / {case['label']}] {show(case)}"
    if r is None:
        raise Failure(f"dropped connection / empty reply: {where}")
    if r.status == -2:
        raise Failure(f"no reply within 60 s: {where}")
    if r.status == -1:
        raise Failure(f"unparseable reply {r.body[:200]!r}: {where}")
    if r.status >= 500:
        quota = (r.status == 503 and case["op"] == "POST /v1/sandboxes" and b"maximum" in r.body)
        if not quota:
            raise Failure(f"{r.status} {r.body[:300]!r}: {where}")
        if case["strict"]:
            raise Failure(f"accepted (passed validation, stopped only by the sandbox quota): {where}")
        return
    if 400 <= r.status < 500:
        try:
            j = json.loads(r.body)
            e = j["error"]
            ok = isinstance(e["code"], str) and isinstance(e["message"], str) and e["message"]
        except Exception:
            ok = False
        if not ok:
            raise Failure(f"{r.status} without the error shape: {r.body[:300]!r}: {where}")
        if not r.ctype().startswith("application/json"):
            raise Failure(f"{r.status} error with Content-Type {r.ctype()!r}: {where}")
        if r.status in CODES and e["code"] != CODES[r.status]:
            raise Failure(f"{r.status} with code {e['code']!r} (want {CODES[r.status]!r}): {where}")
        if r.status == 400 and case["mention"] and case["mention"].lower() not in e["message"].lower():
            raise Failure(f"400 does not name {case['mention']!r}: {e['message']!r}: {where}")
        after = w.snapshot()
        if after != before:
            diff = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
            raise Failure(f"refused ({r.status}) but the state changed {json.dumps(diff)[:600]}: {where}")
        return
    if case["strict"]:
        raise Failure(f"accepted ({r.status}) a request that must be refused: {where}")

# --- driving hypothesis ------------------------------------------------------------

class Run:
    def __init__(self, w, seconds):
        self.w, self.end = w, time.time() + seconds
        self.failures = {}	# (op, mode) -> message
        self.sent = 0
        self.statuses = {}
        self.baseline = None
        self.since_check = 0
        self.first = {}		# the first failure of each pair, in case shrinking turns flaky
        self.seen = {}		# (op, mode, kind of failure) -> first message

    def one(self, case):
        w = self.w
        if not guard(case, w):
            return
        if self.baseline is None:
            self.baseline = w.snapshot()
        req = build_request(case["method"], case["target"], case["headers"], case["body"])
        r = send_raw(w.port, req)
        self.sent += 1
        if r is None or r.status == -2:
            time.sleep(0.2)
            if w.d.proc.poll() is not None:
                raise DaemonDied(f"[{case['op']} / {case['label']}] {show(case)}")
        if r is not None:
            self.statuses[r.status] = self.statuses.get(r.status, 0) + 1
        try:
            judge(case, r, w, self.baseline)
        except Failure as e:
            self.first.setdefault((case["op"], case["mode"]), str(e))
            # hypothesis reports one bug per test; keep the others it met while shrinking.
            self.seen.setdefault((case["op"], case["mode"], failure_head(str(e))), str(e))
            raise
        finally:
            if r is None or not (400 <= r.status < 500):
                w.healthy()
                w.restore()
                self.baseline = w.snapshot()
            self.since_check += 1
            if self.since_check >= 40:
                self.since_check = 0
                w.healthy()
                w.execs()

    def fuzz(self, op, mode, examples):
        @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                  phases=[Phase.generate, Phase.shrink], print_blob=False)
        @given(cases(op, self.w, mode))
        def test(case):
            self.one(case)
        test()

def modes_for(op):
    m = ["method", "auth", "ctype"]
    # The version is read before routing: a few operations are enough.
    if op["path"] in ("/healthz", "/v1/sandboxes", "/v1/sandboxes/{id}/exec"):
        m.append("version")
    if op["path_params"]:
        m.append("path")
    if op["query"] or (op["method"], op["path"]) in EXTRA_QUERY:
        m += ["query:" + k for k in QUERY_KINDS]
    if op["json"] or (op["method"] == "POST" and op["path"].endswith(("/pause", "/resume", "/suspend"))):
        # A body without fields (pause, resume, suspend) can only grow one or lose its shape.
        kinds = BODY_KINDS if valid_body(op, None) else ["unknown", "shape"]
        m += ["body:" + k for k in kinds]
    return m

def main():
    binary = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    seconds = float(os.environ.get("AIRLOCK_FUZZ_SECONDS", "90"))
    seed = int(os.environ.get("AIRLOCK_FUZZ_SEED", str(random.randrange(1 << 30))))
    random.seed(seed)
    print(f"api fuzz: {seconds:.0f} s, seed {seed}", flush=True)
    if not os.path.exists(os.path.join(root, "templates", "base")):
        print(f"SKIP: no base template under {root} (make prepare)")
        return 77
    d = Daemon(binary, root)
    fatal = []
    run = None
    restarts, log_from = 0, 0
    try:
        # One sandbox at most: a create that passes validation stops at the quota (503).
        # The per-key request rate is security:ratelimit's; here it would
        # only turn a fast host's fuzzing into 429s (the run sends what it can).
        c = d.start({"AIRLOCK_MAX_SANDBOXES": "1", "AIRLOCK_API_RATE_PER_KEY": "0"})
        w = World(d, c)
        w.admin_id = next((k["id"] for k in c.call("GET", "/v1/keys")["keys"] if k["role"] == "admin"), None)
        w.setup()
        spec = json.loads(send_raw(c.port, build_request("GET", b"/v1/openapi.json",
                                                         [("Host", "x")], None)).body)
        ops = operations(spec)
        print(f"{len(ops)} operations from /v1/openapi.json", flush=True)
        run = Run(w, seconds)
        combos = [(op, m) for op in ops for m in modes_for(op)]
        rng = random.Random(seed)
        rounds = 0
        while time.time() < run.end:
            rng.shuffle(combos)
            rounds += 1
            for op, mode in combos:
                if time.time() >= run.end:
                    break
                k = (f"{op['method']} {op['path']}", mode)
                if k in run.failures:
                    continue
                try:
                    run.fuzz(op, mode, 4 if rounds == 1 else 8)
                except DaemonDied as e:
                    # The request that killed it, and what the sanitizer said; then go on.
                    report = d.sanitizer_report(log_from) or d.logtail(1500)
                    run.failures[k] = f"airlockd died: {e}\n{report}"
                    print(f"FAIL: airlockd died on {e}\n{report}", flush=True)
                    restarts += 1
                    if restarts > 5:
                        raise Failure("airlockd died more than 5 times; giving up")
                    log_from = d.log_size()
                    d.kill()
                    c = d.start()
                    w.c, w.port = c, c.port
                    w.restore()
                    run.baseline = w.snapshot()
                except Failure as e:
                    run.failures[k] = str(e)
                    print(f"FAIL: {e}", flush=True)
                    w.healthy()
                    w.restore()
                    run.baseline = w.snapshot()
                except HypothesisException as e:
                    if k in run.first:
                        run.failures[k] = run.first[k]
                        print(f"FAIL (not reproducible while shrinking): {run.first[k]}", flush=True)
                    else:
                        print(f"note: hypothesis: {k}: {e}", flush=True)
        w.healthy()
        w.execs()
        print(f"sent {run.sent} requests in {rounds} round(s) over {len(combos)} operation/mutation "
              f"pairs, {restarts} daemon restart(s); statuses {dict(sorted(run.statuses.items()))}",
              flush=True)
    except Exception as e:
        traceback.print_exc()
        fatal.append(repr(e))
    finally:
        d.kill(signal.SIGTERM)
        report = d.sanitizer_report(log_from)
        if report:
            fatal.append("sanitizer: " + report)
        if fatal or (run and run.failures):
            print("airlockd log tail:\n" + d.logtail(3000), flush=True)
        d.cleanup()
    fails = dict(run.failures) if run else {}
    if run:
        # Failures of another kind met while hypothesis shrank a pair's first one.
        for (op, mode, head), msg in sorted(run.seen.items()):
            k = (op, mode)
            if k in fails and failure_head(fails[k]) != head:
                n = 2
                while (op, f"{mode}#{n}") in fails:
                    n += 1
                if not any(failure_head(m) == head for (o, md), m in fails.items()
                           if o == op and md.split("#")[0] == mode):
                    fails[(op, f"{mode}#{n}")] = msg
    print(f"\n== api fuzz summary: {len(fails)} failing operation/mutation pair(s), "
          f"{len(fatal)} fatal", flush=True)
    groups = {}
    for (op, mode), msg in sorted(fails.items()):
        print(f"FAIL {op} [{mode}]: {msg}", flush=True)
        groups.setdefault((mode.split("#")[0], failure_head(msg)), []).append(op)
    if groups:
        print(f"\n{len(groups)} distinct failure(s):", flush=True)
        for (mode, head), opl in sorted(groups.items()):
            print(f"  [{mode}] {head}  ({len(opl)} operation(s): {', '.join(opl[:4])}"
                  f"{' ...' if len(opl) > 4 else ''})", flush=True)
    for f in fatal:
        print(f"FATAL: {f}", flush=True)
    return 1 if fails or fatal else 0

if __name__ == "__main__":
    sys.exit(main())
