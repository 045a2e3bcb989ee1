#!/usr/bin/env python3
"""A sandbox's life through the real airlockd and a real microVM: create,
exec (output, exit codes, env, user), files, pause, suspend, resume, delete,
and nothing left on the host afterwards. Usage: test_lifecycle.py AIRLOCKD [DATA_ROOT]"""
import os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, check, leftovers, main, qemu_pids, wait_for

def test_lifecycle(d, c):
    sb = c.call("POST", "/v1/sandboxes", {"template": "base", "memory_mb": 512,
                                          "env": {"GREETING": "hello"}, "metadata": {"t": "life"}})
    sid = sb["id"]
    check("create -> running", sb["state"] == "running", sb)
    code, sig, out, err = c.exec(sid, ["echo", "hi"])
    check("exec echo hi", code == 0 and out == b"hi\n", (code, out, err))
    code, sig, out, err = c.exec(sid, ["sh", "-c", "exit 3"])
    check("exec exit 3", code == 3, (code, sig))
    code, sig, out, err = c.exec(sid, ["sh", "-c", "echo $GREETING; id -un"])
    check("sandbox env and default user", out == b"hello\nuser\n", out)
    payload = os.urandom(300000)
    st, _, body = c.raw("PUT", f"/v1/sandboxes/{sid}/files?path=/home/user/data.bin", payload,
                        {"Content-Type": "application/octet-stream"})
    check("upload a file", st == 201, (st, body))
    st, _, got = c.raw("GET", f"/v1/sandboxes/{sid}/files?path=/home/user/data.bin")
    check("download it back", st == 200 and got == payload, (st, len(got)))
    # A background process whose state must survive suspend/resume.
    c.exec(sid, ["sh", "-c", "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.2; done' >/dev/null 2>&1 &"])
    time.sleep(1)
    sb = c.call("POST", f"/v1/sandboxes/{sid}/pause")
    check("pause", sb["state"] == "paused", sb)
    try:
        c.exec(sid, ["true"])
        check("exec on a paused sandbox is refused", False, "accepted")
    except ApiError as e:
        check("exec on a paused sandbox is refused (409)", e.status == 409, e)
    sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
    check("resume from pause", sb["state"] == "running", sb)
    code, sig, before, _ = c.exec(sid, ["cat", "/tmp/counter"])
    sb = c.call("POST", f"/v1/sandboxes/{sid}/suspend")
    check("suspend", sb["state"] == "suspended", sb)
    check("suspend releases the VM (no QEMU process)", wait_for(lambda: not qemu_pids(sid)),
          qemu_pids(sid))
    sb = c.call("POST", f"/v1/sandboxes/{sid}/resume")
    check("resume from suspend", sb["state"] == "running", sb)
    st, _, got = c.raw("GET", f"/v1/sandboxes/{sid}/files?path=/home/user/data.bin")
    check("file survives suspend/resume", st == 200 and got == payload, (st, len(got)))
    time.sleep(1)
    code, sig, after, _ = c.exec(sid, ["cat", "/tmp/counter"])
    check("background process continues after resume",
          code == 0 and int(after or 0) > int(before or 0), (before, after))
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    check("delete leaves nothing behind", wait_for(lambda: not leftovers(d, sid)),
          leftovers(d, sid))
    try:
        c.call("GET", f"/v1/sandboxes/{sid}", expect=())
        check("deleted sandbox is gone", False)
    except ApiError as e:
        check("deleted sandbox is gone (404)", e.status == 404)

if __name__ == "__main__":
    sys.exit(main([("lifecycle", test_lifecycle)],
                  env={"AIRLOCK_SWEEP_INTERVAL_S": "1"}))   # sweeps every second, as in test_daemon.py
