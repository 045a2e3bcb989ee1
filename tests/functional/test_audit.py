#!/usr/bin/env python3
"""GET /v1/audit over hand-written gateway audit files (no VM): newest first
across audit.log and audit.log.1, malformed lines skipped, records as the
gateway wrote them, the sandbox/decision/kind/since/until/limit filters,
400 for bad filters, and another project's key sees none of the records.
Usage: test_audit.py AIRLOCKD [DATA_ROOT]"""
import json, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, main, raw_json, user_key
from audit_files import AUD_A, AUD_B, AUD_UNTIL, audit_append, audit_ns, audit_rec

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

if __name__ == "__main__":
    sys.exit(main([("audit", test_audit)],
                  env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))   # sweeps every second, as in test_daemon.py
