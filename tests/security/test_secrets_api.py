#!/usr/bin/env python3
"""Write-only secrets through the real airlockd (no VM): create, replace,
list and get return metadata only; bad names, values, hosts, headers and
formats are 400s naming the field without quoting the value; a user key may
not write globals; another project sees, gets and deletes nothing of ours;
the value is in no answer, not in the daemon log, not in clear in the store,
and secrets.key is 0600. Usage: test_secrets_api.py AIRLOCKD [DATA_ROOT]"""
import os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, main, raw_json, user_key

SECRET = "s3cr3t-VALUE-" + os.urandom(6).hex()

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

if __name__ == "__main__":
    sys.exit(main([("secrets", test_secrets)],
                  env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))   # sweeps every second, as in test_daemon.py
