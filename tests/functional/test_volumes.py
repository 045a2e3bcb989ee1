#!/usr/bin/env python3
"""Volumes (issue 15 item 6), end to end with the real airlockd and real
microVMs:

- POST/GET/DELETE /v1/volumes; bad names, sizes and duplicates are 4xx;
- a sandbox created with volumes [{name, path}] sees the volume mounted at
  path and writes to it; a second read-write (or a read-only) attach while
  it holds it is a 409 naming the holder; bad paths (relative, "..", /proc,
  "/") and unknown volumes are 4xx; deleting an attached volume is a 409;
- after that sandbox is deleted the next one (read-only) reads the data and
  cannot write; the data is there after a suspend/resume and after a
  daemon restart; a create while the template has a warm pool works with
  a volume (test_volumes_pool.py checks which tier serves it);
- the list shows size, attachments and last use; the volume deletes once
  nothing holds it, and its file goes.

Usage: test_volumes.py AIRLOCKD [DATA_ROOT]"""
import json, os, signal, sys, time, traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, Daemon

failures = []

def check(name, cond, detail=""):
    print(("ok: " if cond else "FAIL: ") + name + ("" if cond else f" ({detail})"), flush=True)
    if not cond:
        failures.append(name)

def status_of(fn):
    try:
        fn()
        return 200, None
    except ApiError as e:
        return e.status, e.body

def sh(c, sid, cmd):
    code, _, out, err = c.exec(sid, ["/bin/bash", "-c", cmd])
    return code, out.decode(errors="replace"), err.decode(errors="replace")

def wait_running(c, sid, timeout=300):
    end = time.time() + timeout
    while time.time() < end:
        s = c.call("GET", f"/v1/sandboxes/{sid}")
        if s["state"] == "running":
            return s
        if s["state"] == "failed":
            raise RuntimeError("failed: " + str(s.get("error")))
        time.sleep(0.5)
    raise RuntimeError("not running: " + sid)

def main():
    airlockd = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("AIRLOCK_DATA_DIR",
                                                                  "/var/lib/airlock")
    d = Daemon(airlockd, root)
    sids = []
    try:
        c = d.start()
        vol = {"name": "data", "size_mb": 256}
        v = c.call("POST", "/v1/volumes", vol)
        check("create a volume", v.get("name") == "data" and v.get("size_mb") == 256, v)
        for bad, field in (({"name": "../x", "size_mb": 64}, "name"),
                           ({"name": "ok", "size_mb": 1}, "size_mb"),
                           ({"name": "ok", "size_mb": 64, "path": "/etc"}, "path")):
            st, body = status_of(lambda: c.call("POST", "/v1/volumes", bad))
            check(f"bad volume {field}: 400 naming it", st == 400 and
                  body["error"].get("field") == field, f"{st} {body}")
        st, body = status_of(lambda: c.call("POST", "/v1/volumes", vol))
        check("a second volume of one name: 409", st == 409, f"{st} {body}")

        a = c.call("POST", "/v1/sandboxes", {"volumes": [{"name": "data", "path": "/data"}]})
        sids.append(a["id"])
        wait_running(c, a["id"])
        code, out, err = sh(c, a["id"], "findmnt -no SOURCE,OPTIONS /data 2>/dev/null || "
                            "grep ' /data ' /proc/mounts; echo persisted > /data/f; sync; "
                            "cat /data/f; id -u")
        check("the volume is mounted at its path and writable", code == 0 and
              "persisted" in out and "/dev/vd" in out, f"{code} {out} {err}")

        for body, what in (([{"name": "data", "path": "/data"}], "read-write"),
                           ([{"name": "data", "path": "/data", "read_only": True}], "read-only")):
            st, b = status_of(lambda: c.call("POST", "/v1/sandboxes", {"volumes": body}))
            check(f"a {what} attach while another sandbox writes: 409 naming it",
                  st == 409 and a["id"] in b["error"]["message"], f"{st} {b}")
        for body, field in (([{"name": "data", "path": "data"}], "volumes[0].path"),
                            ([{"name": "data", "path": "/a/../b"}], "volumes[0].path"),
                            ([{"name": "data", "path": "/proc/x"}], "volumes[0].path"),
                            ([{"name": "data", "path": "/"}], "volumes[0].path"),
                            ([{"name": "data", "path": "/x", "rw": 1}], "volumes[0].rw"),
                            ({"name": "data"}, "volumes"),
                            ([{"name": "data", "path": "/x"}, {"name": "data", "path": "/y"}],
                             "volumes[1].name")):
            st, b = status_of(lambda: c.call("POST", "/v1/sandboxes", {"volumes": body}))
            check(f"bad volumes ({field}): 400 naming it", st == 400 and
                  b["error"].get("field") == field, f"{st} {b}")
        st, b = status_of(lambda: c.call("POST", "/v1/sandboxes",
                                         {"volumes": [{"name": "nope", "path": "/x"}]}))
        check("an unknown volume: 404", st == 404, f"{st} {b}")
        st, b = status_of(lambda: c.call("DELETE", "/v1/volumes/data"))
        check("deleting an attached volume: 409", st == 409, f"{st} {b}")

        c.call("DELETE", f"/v1/sandboxes/{a['id']}")
        sids.remove(a["id"])
        b_ = c.call("POST", "/v1/sandboxes", {"volumes": [{"name": "data", "path": "/mnt/d",
                                                           "read_only": True}]})
        sids.append(b_["id"])
        wait_running(c, b_["id"])
        code, out, err = sh(c, b_["id"], "cat /mnt/d/f; echo x > /mnt/d/g && echo wrote")
        check("the next sandbox reads what the deleted one wrote",
              code != 0 or "persisted" in out, f"{code} {out}")
        check("... read-only: its write fails", "persisted" in out and "wrote" not in out and
              "Read-only" in err, f"{out} {err}")
        # a second read-only attach beside it is fine
        b2 = c.call("POST", "/v1/sandboxes", {"volumes": [{"name": "data", "path": "/ro",
                                                          "read_only": True}]})
        sids.append(b2["id"])
        wait_running(c, b2["id"])
        code, out, _ = sh(c, b2["id"], "cat /ro/f")
        check("two read-only attaches at once", code == 0 and "persisted" in out, out)
        c.call("DELETE", f"/v1/sandboxes/{b2['id']}")
        sids.remove(b2["id"])

        c.call("POST", f"/v1/sandboxes/{b_['id']}/suspend")
        c.call("POST", f"/v1/sandboxes/{b_['id']}/resume")
        wait_running(c, b_["id"])
        code, out, err = sh(c, b_["id"], "cat /mnt/d/f")
        check("after suspend and resume the volume is there", code == 0 and "persisted" in out,
              f"{code} {out} {err}")

        d.kill(signal.SIGKILL)
        c = d.start()
        wait_running(c, b_["id"])
        code, out, err = sh(c, b_["id"], "cat /mnt/d/f")
        check("after a daemon restart the adopted sandbox still has it",
              code == 0 and "persisted" in out, f"{code} {out} {err}")
        st, b = status_of(lambda: c.call("POST", "/v1/sandboxes",
                                         {"volumes": [{"name": "data", "path": "/data"}]}))
        check("after the restart the attachments still rule (rw beside ro: 409)",
              st == 409, f"{st} {b}")
        c.call("DELETE", f"/v1/sandboxes/{b_['id']}")
        sids.remove(b_["id"])

        # A warm pool for base: a create with a volume still works (its slots, or cold).
        c.call("PUT", "/v1/pools/base", {"size": 1})
        end = time.time() + 300
        while time.time() < end:
            p = [x for x in c.call("GET", "/v1/pools")["pools"] if x.get("template") == "base"]
            if p and p[0].get("ready", 0) >= 1:
                break
            time.sleep(1)
        e = c.call("POST", "/v1/sandboxes", {"volumes": [{"name": "data", "path": "/data"}]})
        sids.append(e["id"])
        wait_running(c, e["id"])
        code, out, err = sh(c, e["id"], "cat /data/f; echo second >> /data/f; sync")
        check("with a warm pool, a create with a volume works after a daemon restart",
              code == 0 and "persisted" in out, f"{code} {out} {err}")
        c.call("PUT", "/v1/pools/base", {"size": 0})
        c.call("DELETE", f"/v1/sandboxes/{e['id']}")
        sids.remove(e["id"])

        lst = c.call("GET", "/v1/volumes")["volumes"]
        check("list: size, attachments, last use",
              len(lst) == 1 and lst[0]["size_mb"] == 256 and lst[0]["attached"] == 0 and
              lst[0]["last_used_at"] is not None, lst)
        c.call("DELETE", "/v1/volumes/data")
        check("delete: the record and the file go",
              c.call("GET", "/v1/volumes")["volumes"] == [] and
              not os.path.exists(os.path.join(d.dir, "volumes", "default", "data.ext4")))
        rep = d.sanitizer_report()
        check("no sanitizer reports", rep is None, rep)
    except Exception:
        traceback.print_exc()
        failures.append("exception")
        print(d.logtail())
    finally:
        for sid in sids:
            try:
                c.call("DELETE", f"/v1/sandboxes/{sid}")
            except Exception:
                pass
        # daemon_client's cleanup: the daemon, its gateway and every VMM of this
        # data dir (the pool's spare included), then checks nothing is left.
        try:
            d.cleanup()
        except AssertionError as e:
            check("the test left nothing on the host", False, str(e))
    print("FAIL" if failures else "PASS", failures)
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
