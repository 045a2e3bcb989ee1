"""Gateway audit records written by hand into a daemon's data dir (the
GET /v1/audit tests): sandboxes no store knows, times far in the past."""
import json, os

from daemon_client import raw_json

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
