#!/usr/bin/env python3
"""daemon_client's cleanup after airlockd died: airlockd leaves its VMs
running when it exits (a restart adopts them), so a test whose daemon
crashed or was SIGKILLed used to leave a jailed QEMU, its cgroup and its
network namespace behind on the shared machine. Here a sandbox is created,
airlockd is SIGKILLed, and Daemon.cleanup() must take them down and say
nothing leaked; a second daemon stopped with SIGTERM (which suspends its
sandboxes) while a sandbox runs must leave nothing and report no leak. Usage: test_cleanup.py AIRLOCKD [DATA_ROOT]"""
import os, signal, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import Daemon, check, summary

def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:    # a zombie is gone for our purposes
        return open(f"/proc/{pid}/stat").read().split(") ")[1][0] != "Z"
    except OSError:
        return False

def run_case(binary, root, name, stop, outlives):
    d = Daemon(binary, root)  # the previous case's cleanup removed the dir
    c = d.start()
    sid = c.call("POST", "/v1/sandboxes", {"template": "base", "memory_mb": 256})["id"]
    claims, ids = d.sandbox_ids()
    pids = d.jail_pids(claims, ids)
    cgs = d.sandbox_cgroups(ids)
    check(f"{name}: the sandbox's QEMU is found by its jail uid and cgroup",
          sid in ids and len(pids) >= 1 and cgs, (sid, ids, pids, cgs))
    stop(d)
    if outlives:
        check(f"{name}: the QEMU outlives airlockd (what cleanup must handle)",
              pids and all(alive(p) for p in pids), pids)
    err = None
    try:
        d.cleanup()
    except AssertionError as e:
        err = str(e)
    check(f"{name}: cleanup reports no leak", err is None, err)
    time.sleep(0.5)
    check(f"{name}: no QEMU left", not any(alive(p) for p in pids),
          [p for p in pids if alive(p)])
    check(f"{name}: no cgroup left", not any(os.path.isdir(g) for g in cgs), cgs)
    check(f"{name}: no netns left", not os.path.exists(f"/run/netns/airlock-{sid}"), sid)
    check(f"{name}: data dir removed", not os.path.exists(d.dir), d.dir)

def main():
    binary = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("AIRLOCK_DATA_DIR", "/var/lib/airlock")
    if os.geteuid() != 0 or not os.path.exists(binary):
        print("skip: needs root and a built airlockd")
        return 77
    run_case(binary, root, "sigkill", lambda d: d.kill(signal.SIGKILL), True)
    # SIGTERM suspends every sandbox before exiting: nothing to kill, nothing reported.
    run_case(binary, root, "sigterm", lambda d: d.kill(signal.SIGTERM), False)
    return summary()

if __name__ == "__main__":
    sys.exit(main())
