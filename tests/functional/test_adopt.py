#!/usr/bin/env python3
"""Adoption: SIGKILL airlockd with one sandbox running and one paused; the
next airlockd adopts both live VMs (same QEMU pids, no new one), states kept,
the guest's counter kept counting, the console log continues, resume works,
the adopted VM suspends and resumes, and delete leaves nothing.
Usage: test_adopt.py AIRLOCKD [DATA_ROOT]"""
import os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import check, exec_retry, leftovers, main, qemu_pids, wait_for

def counter(c, sid):
    code, _, out, _ = c.exec(sid, ["cat", "/tmp/counter"])
    return int(out) if code == 0 and out.strip().isdigit() else -1

def test_adopt(d, c):
    """SIGKILL airlockd with one sandbox running and one paused: the next
    airlockd adopts both live VMs (no new QEMU), states and guests intact."""
    a = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
    b = c.call("POST", "/v1/sandboxes", {"memory_mb": 256})["id"]
    # Written by rename: a reader never sees the file truncated between two values.
    c.exec(a, ["sh", "-c", "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; "
               "mv /tmp/counter.new /tmp/counter; sleep 0.2; done' >/dev/null 2>&1 &"])
    c.exec(a, ["sh", "-c", "echo adopt-marker-before > /dev/console"], user="root")
    c.exec(b, ["sh", "-c", "echo kept-b > /home/user/kept"])
    check("pause the second sandbox", c.call("POST", f"/v1/sandboxes/{b}/pause")["state"] == "paused")
    time.sleep(1)
    before = counter(c, a)
    pids = {a: qemu_pids(a), b: qemu_pids(b)}
    check("one QEMU per sandbox before the kill", len(pids[a]) == 1 and len(pids[b]) == 1, pids)
    d.kill()
    time.sleep(2)   # the guests run on without a daemon
    check("the VMs outlive the SIGKILLed daemon",
          qemu_pids(a) == pids[a] and qemu_pids(b) == pids[b], (pids, qemu_pids(a), qemu_pids(b)))
    c = d.start()
    sa, sb = c.call("GET", f"/v1/sandboxes/{a}"), c.call("GET", f"/v1/sandboxes/{b}")
    check("running sandbox adopted as running", sa["state"] == "running", sa)
    check("paused sandbox adopted as paused", sb["state"] == "paused", sb)
    check("no second QEMU was started (same pids)",
          qemu_pids(a) == pids[a] and qemu_pids(b) == pids[b], (pids, qemu_pids(a), qemu_pids(b)))
    code, _, out, _ = c.exec(a, ["echo", "adopted"])
    check("exec works in the adopted sandbox", code == 0 and out == b"adopted\n", (code, out))
    mid = counter(c, a)
    time.sleep(1)
    after = counter(c, a)
    check("the guest's background counter kept counting across the restart",
          before > 0 and mid > before and after > mid, (before, mid, after))
    c.exec(a, ["sh", "-c", "echo adopt-marker-after > /dev/console"], user="root")
    time.sleep(0.5)
    _, _, log = c.raw("GET", f"/v1/sandboxes/{a}/logs")
    log = log.decode(errors="replace")
    check("the console log continues in the same file",
          "adopt-marker-before" in log and "adopt-marker-after" in log and
          log.index("adopt-marker-before") < log.index("adopt-marker-after"), log[-600:])
    sb = c.call("POST", f"/v1/sandboxes/{b}/resume")
    check("resume works on the adopted paused sandbox", sb["state"] == "running", sb)
    code, _, out, _ = exec_retry(c, b, ["cat", "/home/user/kept"])
    check("the resumed sandbox kept its files", code == 0 and out == b"kept-b\n", (code, out))
    # The adopted VM is a full VM: it can be snapshotted and restored.
    sa = c.call("POST", f"/v1/sandboxes/{a}/suspend")
    check("suspend an adopted sandbox", sa["state"] == "suspended", sa)
    check("its QEMU is gone", wait_for(lambda: not qemu_pids(a)), qemu_pids(a))
    sa = c.call("POST", f"/v1/sandboxes/{a}/resume")
    check("resume it from the snapshot", sa["state"] == "running", sa)
    time.sleep(1)
    check("its counter continues after suspend/resume", counter(c, a) > after, after)
    for sid in (a, b):
        c.call("DELETE", f"/v1/sandboxes/{sid}")
        check(f"delete of adopted {sid} leaves nothing behind",
              wait_for(lambda: not leftovers(d, sid)), leftovers(d, sid))
    return c

if __name__ == "__main__":
    sys.exit(main([("adopt", test_adopt)],
                  env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))   # sweeps every second, as in test_daemon.py
