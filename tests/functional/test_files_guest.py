#!/usr/bin/env python3
"""Guest file operations through the real airlockd and a real microVM
(TCG here): they cannot lose data or freeze the agent (issues #10, #11).

- an upload cut off part-way (Content-Length 1000 with 7 bytes sent, or a
  chunked body reset mid-chunk) keeps the old file and leaves no temporary;
- a FIFO in the guest: download and upload answer 4xx at once, while exec
  keeps working (before, the agent blocked in open() and every call hung);
- client mistakes are 4xx naming the errno, not 502: a move across
  filesystems (EXDEV), a directory moved onto a non-empty one or removed
  with recursive false while not empty (ENOTEMPTY), removing a busy mount
  point (EBUSY), a missing path (ENOENT).

Needs a data dir whose base template carries this agent (AIRLOCK_DATA_DIR,
or the second argument). Usage: test_files_guest.py AIRLOCKD [DATA_ROOT]"""
import concurrent.futures, os, socket, sys, time, traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, Client, args, check, session, summary, wait_for


class Stuck(Exception):
    pass
QUICK_S = 10	# "at once": far below any timeout, far above a TCG round trip


def error_of(fn):
    """(status, message) of an API call expected to fail."""
    try:
        fn()
    except ApiError as e:
        err = e.body.get("error", {}) if isinstance(e.body, dict) else {}
        return e.status, f"{err.get('code')}: {err.get('message')}"
    return None, "succeeded"

def cut_off(c, path, head_extra, body):
    """Send a PUT head and part of its body, then reset the connection."""
    s = socket.create_connection(("127.0.0.1", c.port))
    s.sendall((f"PUT {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {c.key}\r\n"
               f"Content-Type: application/octet-stream\r\n{head_extra}\r\n").encode() + body)
    time.sleep(1.0)	# the bytes reached the guest (and its temporary file)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()	# linger 0: RST

def guest_sh(c, sid, script, user="root"):
    code, _, out, err = c.exec(sid, ["sh", "-c", script], user=user)
    return code, out.decode(errors="replace"), err.decode(errors="replace")

def temps(c, sid, d):
    _, out, _ = guest_sh(c, sid, f"ls -A {d}")
    return [n for n in out.split() if ".airlock-upload-" in n]


def test_aborted_upload(c, sid):
    url = f"/v1/sandboxes/{sid}/files?path=/home/user/keep.txt"
    st, _, _ = c.raw("PUT", url, b"old content\n", {"Content-Type": "application/octet-stream"})
    check("upload the original file", st == 201, st)
    cut_off(c, url, "Content-Length: 1000\r\n", b"partial")
    check("Content-Length upload cut off: no temporary left",
          wait_for(lambda: not temps(c, sid, "/home/user"), 20), temps(c, sid, "/home/user"))
    st, _, got = c.raw("GET", url)
    check("Content-Length upload cut off: the old file is intact", st == 200 and got == b"old content\n",
          (st, got))
    cut_off(c, url, "Transfer-Encoding: chunked\r\n", b"7\r\nchunk-1\r\n100\r\nhalf a chu")
    check("chunked upload cut off: no temporary left",
          wait_for(lambda: not temps(c, sid, "/home/user"), 20), temps(c, sid, "/home/user"))
    st, _, got = c.raw("GET", url)
    check("chunked upload cut off: the old file is intact", st == 200 and got == b"old content\n",
          (st, got))
    st, _, _ = c.raw("PUT", url, b"new content\n", {"Content-Type": "application/octet-stream"})
    st2, _, got = c.raw("GET", url)
    check("a complete upload replaces it", st == 201 and got == b"new content\n", (st, st2, got))
    code, out, _ = guest_sh(c, sid, "stat -c '%U %a' /home/user/keep.txt")
    check("owned by the user, mode 0644", out.strip() == "user 644", out)

def test_fifo(c, sid):
    code, _, err = guest_sh(c, sid, "mkfifo /home/user/fifo && chown user: /home/user/fifo")
    check("mkfifo in the guest", code == 0, err)
    url = f"/v1/sandboxes/{sid}/files?path=/home/user/fifo"
    # A short client timeout: a stuck agent (the bug) fails these instead of hanging the test.
    q = Client(c.port, c.key, timeout=3 * QUICK_S)
    calls = (("FIFO download: 400 at once, naming the FIFO", lambda: q.raw("GET", url)),
             ("FIFO upload: 400 at once, naming the FIFO",
              lambda: q.raw("PUT", url, b"x", {"Content-Type": "application/octet-stream"})),
             ("exec true beside them", lambda: q.exec(sid, ["true"])))
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futs = [(name, pool.submit(fn)) for name, fn in calls]
        for name, f in futs:
            try:
                r = f.result()
                ok = r[0] == 0 if name.startswith("exec") else r[0] == 400 and b"FIFO" in r[2]
                check(name, ok and time.time() - t0 < QUICK_S, (r[:1], r[2:], time.time() - t0))
            except Exception as e:
                check(name, False, repr(e))
    print(f"   answered in {time.time() - t0:.2f} s", flush=True)
    if time.time() - t0 >= QUICK_S:
        # The agent is stuck in open() (the bug): nothing after this could answer.
        raise Stuck("the guest agent stopped answering")
    code, _, _ = guest_sh(c, sid, "test -p /home/user/fifo")
    check("the FIFO is still a FIFO", code == 0, code)
    code = c.exec(sid, ["true"])[0]
    check("exec still works after", code == 0, code)

def test_errnos(c, sid):
    base = f"/v1/sandboxes/{sid}/files"
    # /dev/shm and /tmp are two tmpfs mounts in the guest.
    guest_sh(c, sid, "echo x > /dev/shm/across && mkdir -p /tmp/ne-a/sub /tmp/ne-b/sub "
             "&& mkdir -p /mnt/busy && mount -t tmpfs tmpfs /mnt/busy")
    st, msg = error_of(lambda: c.call("POST", base + "/move", {"from": "/dev/shm/across",
                                                               "to": "/tmp/across"}))
    check("move across filesystems: 400 naming EXDEV", st == 400 and "EXDEV" in msg, (st, msg))
    st, msg = error_of(lambda: c.call("POST", base + "/move", {"from": "/tmp/ne-a", "to": "/tmp/ne-b"}))
    check("a directory onto a non-empty one: 409 naming ENOTEMPTY", st == 409 and "ENOTEMPTY" in msg,
          (st, msg))
    st, msg = error_of(lambda: c.call("POST", base + "/remove", {"path": "/tmp/ne-b", "recursive": False}))
    check("rmdir of a non-empty directory: 409 naming ENOTEMPTY", st == 409 and "ENOTEMPTY" in msg,
          (st, msg))
    c.call("POST", base + "/remove", {"path": "/tmp/ne-b/sub", "recursive": False})
    code, _, _ = guest_sh(c, sid, "test -d /tmp/ne-b && test ! -e /tmp/ne-b/sub")
    check("rmdir of an empty one removes just it", code == 0, code)
    st, msg = error_of(lambda: c.call("POST", base + "/remove", {"path": "/mnt/busy"}))
    check("remove a busy mount point: 409 naming EBUSY", st == 409 and "EBUSY" in msg, (st, msg))
    st, msg = error_of(lambda: c.call("GET", base + "/stat?path=/no/such/file"))
    check("stat of a missing path: 404 naming ENOENT", st == 404 and "ENOENT" in msg, (st, msg))
    st, _, body = c.raw("GET", base + "?path=/tmp")
    check("download of a directory: 400 naming EISDIR", st == 400 and b"EISDIR" in body, (st, body))
    guest_sh(c, sid, "umount /mnt/busy")

def main():
    binary, root, _ = args()
    if os.geteuid() != 0:
        print("needs root (airlockd jails QEMU)")
        return 77

    def body(d, c):
        sid = c.call("POST", "/v1/sandboxes", {"template": "base"})["id"]
        for name, fn in (("aborted upload", test_aborted_upload), ("fifo", test_fifo),
                         ("errnos", test_errnos)):
            print(f"-- {name}", flush=True)
            try:
                fn(c, sid)
            except Stuck as e:
                check(f"{name}: the agent still answers", False, str(e))
                break
            except Exception as e:
                traceback.print_exc()
                check(f"{name} raised no exception", False, repr(e))
        c.call("DELETE", f"/v1/sandboxes/{sid}")

    session(binary, root, body)
    return summary()

if __name__ == "__main__":
    sys.exit(main())
