#!/usr/bin/env python3
"""Request rate per API key against the real daemon (no VMs): a key over
api_rate_per_key (+ its burst) answers 429 rate_limited with Retry-After
and nothing is done; another key is not slowed by it; after the wait the
key is served again; the E2B front counts the same bucket.

Usage: test_ratelimit.py AIRLOCKD [DATA_ROOT]"""
import http.client, json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import Client, check, main

RATE, BURST = 5, 10

def test_ratelimit(d, admin):
    made = admin.call("POST", "/v1/keys", {"name": "busy", "role": "user"})
    busy = Client(d.port, made["key"])
    # The burst is served, the next one refused while the bucket is empty.
    statuses = [busy.raw("GET", "/v1/sandboxes")[0] for _ in range(BURST + 5)]
    check("burst served", statuses[:BURST - 1] == [200] * (BURST - 1), statuses)
    check("over the burst: 429", 429 in statuses[BURST - 1:], statuses)
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
    c.request("GET", "/v1/sandboxes", headers={"Authorization": "Bearer " + made["key"]})
    r = c.getresponse()
    body = json.loads(r.read())
    ra = r.getheader("Retry-After")
    c.close()
    check("429 names the limit", r.status == 429 and body["error"]["code"] == "rate_limited"
          and "api_rate_per_key" in body["error"]["message"], body)
    check("Retry-After given", ra is not None and ra.isdigit() and 1 <= int(ra) <= 2, ra)
    # A refused create does nothing.
    st = busy.raw("POST", "/v1/sandboxes", json.dumps({"template": "base"}).encode(),
                  {"Content-Type": "application/json"})[0]
    check("refused create answers 429", st == 429, st)
    # The admin key has its own bucket.
    check("another key is served", admin.raw("GET", "/v1/sandboxes")[0] == 200)
    check("nothing was created", admin.call("GET", "/v1/sandboxes")["sandboxes"] == [])
    # The E2B front takes from the same bucket (X-API-KEY).
    st = busy.raw("GET", "/v2/sandboxes", headers={"X-API-KEY": made["key"]}, auth=False)[0]
    check("E2B front limited too", st == 429, st)
    # After the wait: served again.
    time.sleep(int(ra or 1) + 0.2)
    check("served after Retry-After", busy.raw("GET", "/v1/sandboxes")[0] == 200)

if __name__ == "__main__":
    sys.exit(main([("rate limit", test_ratelimit)],
                  env={"AIRLOCK_API_RATE_PER_KEY": str(RATE),
                       "AIRLOCK_API_BURST_PER_KEY": str(BURST)}))
