#!/usr/bin/env python3
"""200 claims from a warm pool at concurrency 10 give 200 distinct VMs
(issue 13's acceptance), through the real daemon with real VMs.

A pool of 10; before each round the test waits until all 10 are ready, then
claims 10 at once. Every claim must be served by the pool, and the ten
sandboxes of a round, alive together, must be ten QEMU processes; each guest
must carry its own identity from /init: hostname = its sandbox id, its own
machine-id, its own owner env. Over the 200: 200 ids, 200 machine-ids and
200 first reads of the kernel's random uuid, all distinct. Each round is
deleted before the next, with nothing left of it. Latency is not asserted
here (bench/create.py measures it).
Usage: test_pool_claims.py AIRLOCKD [DATA_ROOT]"""
import concurrent.futures, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, leftovers, main, qemu_pids, wait_for
from pool_helpers import create, pool

ROUNDS, CONC = 20, 10
POOL_ENV = {"AIRLOCK_POOL": f"base={CONC}", "AIRLOCK_POOL_REFILLS": "2",
            "AIRLOCK_POOL_SPARES": "0", "AIRLOCK_SWEEP_INTERVAL_S": "1"}
PROBE = "hostname; cat /etc/machine-id; cat /proc/sys/kernel/random/uuid; echo $WHO"

def claim(c, n):
    sb = create(c, env={"WHO": f"owner-{n}"})
    code, _, out, _ = c.exec(sb["id"], ["sh", "-c", PROBE])
    return sb, code, out.decode(errors="replace").split()

def test_claims(d, c):
    ids, machine_ids, uuids, bad = set(), set(), set(), []
    for r in range(ROUNDS):
        p = wait_for(lambda: (lambda p: p if p["ready"] >= CONC else None)(pool(c)), 900, 0.5)
        if not p:
            check(f"round {r}: the pool refilled to {CONC}", False, pool(c))
            break
        with concurrent.futures.ThreadPoolExecutor(CONC) as ex:
            got = list(ex.map(lambda n: claim(c, r * CONC + n), range(CONC)))
        pids = set()
        for n, (sb, code, out) in enumerate(got):
            want = [sb["id"], None, None, f"owner-{r * CONC + n}"]
            if (sb.get("tier") != "pool" or code != 0 or len(out) != 4 or out[0] != want[0]
                    or out[3] != want[3]):
                bad.append((sb["id"], sb.get("tier"), code, out))
                continue
            ids.add(sb["id"])
            machine_ids.add(out[1])
            uuids.add(out[2])
            pids.update(qemu_pids(sb["id"]))
        check(f"round {r}: {CONC} claims alive together are {CONC} QEMU processes",
              len(pids) == CONC, sorted(pids))
        for sb, _, _ in got:
            c.call("DELETE", f"/v1/sandboxes/{sb['id']}")
        gone = wait_for(lambda: not any(leftovers(d, sb["id"]) for sb, _, _ in got), 120)
        check(f"round {r}: deleted, nothing left", gone,
              [(sb["id"], leftovers(d, sb["id"])) for sb, _, _ in got if leftovers(d, sb["id"])])
    n = ROUNDS * CONC
    check(f"every claim served by the pool, with its own hostname and env ({n})", not bad, bad[:5])
    check(f"{n} distinct sandbox ids", len(ids) == n, len(ids))
    check(f"{n} distinct machine-ids", len(machine_ids) == n, len(machine_ids))
    check(f"{n} distinct kernel random uuids", len(uuids) == n, len(uuids))

if __name__ == "__main__":
    sys.exit(main([("200 claims", test_claims)], env=POOL_ENV))
