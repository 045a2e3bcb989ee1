"""What the warm-pool tests (tests/functional/test_pool.py, test_spare.py)
share: the one pool of the "base" template, creates of its shape, a base
made stale by hand, and the checks of a NIC claim."""
import json, os, time

from daemon_client import check, leftovers, wait_for

SHAPE = {"template": "base", "vcpus": 2, "memory_mb": 512}

def pool(c):
    return c.call("GET", "/v1/pools")["pools"][0]

def wait_ready(c, n=1, secs=900):
    """Until the pool holds n ready members (a base build is ~20 s idle, minutes loaded)."""
    end = time.time() + secs
    while time.time() < end:
        p = pool(c)
        if p["ready"] >= n:
            return p
        time.sleep(1)
    return pool(c)

def create(c, **kw):
    return c.call("POST", "/v1/sandboxes", dict(SHAPE, **kw))

def make_stale(man):
    """Rewrite a base's manifest as if the agent had been rebuilt since."""
    m = json.load(open(man))
    m["agent_sha256"] = "0" * 64
    os.chmod(man, 0o644)
    with open(man, "w") as f:
        json.dump(m, f)

def check_nic_claim(d, c, sb):
    """sb was claimed with an allowlist of pypi.org: the guest has its NIC, the
    policy is the owner's, its egress is counted under sb's id; then sb is
    deleted and nothing of it may be left."""
    code, _, out, _ = c.exec(sb["id"], ["sh", "-c", "ip -br addr show eth0; getent hosts denied.example; echo rc=$?"])
    check("the guest has its NIC", b"10.0.0.2/30" in out, out)
    check("a name off the allowlist does not resolve", b"rc=2" in out, out)
    # The gateway's counters reach airlockd through its background stats refresh
    # (sbm_egress.c, every few seconds): poll until they are in, or give up.
    eg = {}
    for _ in range(60):
        eg = c.call("GET", f"/v1/sandboxes/{sb['id']}/metrics").get("egress") or {}
        if eg.get("dns_denied", 0) >= 1:
            break
        time.sleep(0.5)
    check("its egress is the gateway's under its own id (policy attached at claim)",
          eg.get("dns_denied", 0) >= 1, eg)
    c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
    check("deleted: nothing left", wait_for(lambda: not leftovers(d, sb["id"])), leftovers(d, sb["id"]))
