#!/usr/bin/env python3
"""The REST API's error answers against the real airlockd (no VM): no key
or an unknown key is a 401, bad bodies and bad network policies a 400 naming
the field, an unknown template a 422, a wrong media type a 415, a 2 MiB
body a 413, unknown paths a 404, a wrong method a 405, and the daemon
serves on. Usage: test_api_errors.py AIRLOCKD [DATA_ROOT]"""
import json, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, Client, check, main

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
                       ({"mode": "allowlist", "rate": {"rps": -1}}, "network.rate"),
                       # network.headers: framing headers, non-token names, CR/LF in values
                       ({"mode": "full", "headers": [{"host": "a.example.com",
                         "set": {"Host": "b.example.com"}}]}, "network.headers[0].set.Host"),
                       ({"mode": "full", "headers": [{"host": "a.example.com",
                         "set": {"X Y": "v"}}]}, "network.headers[0].set.X Y"),
                       ({"mode": "full", "headers": [{"host": "a.example.com",
                         "set": {"X": "v\r\nEvil: 1"}}]}, "network.headers[0].set.X"),
                       ({"mode": "full", "headers": [{"host": "*.com", "set": {"X": "v"}}]},
                        "network.headers[0].host"),
                       ({"mode": "none", "headers": [{"host": "a.example.com", "set": {"X": "v"}}]},
                        "network.headers"),
                       ({"mode": "full", "headers": {}}, "network.headers")):
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

if __name__ == "__main__":
    sys.exit(main([("bad input", lambda d, c: test_bad_input(c))],
                  env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))   # sweeps every second, as in test_daemon.py
