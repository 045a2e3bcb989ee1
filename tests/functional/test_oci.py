#!/usr/bin/env python3
"""OCI import (issue 15 item 4), end to end with the real airlockd, CLI and
a real microVM. The images are written by oci_image.py (no Docker, no
registry): a usrmerged base of this host's bash and coreutils, a gzip layer
with a hard link pair, a symlink, a set-uid file with an owner and an
xattr and a 48 MiB file, and a layer with a whiteout and an opaque dir.

- the OCI layout directory imports with the CLI (--local), the docker save
  tarball and the OCI layout tar through PUT /v1/templates/NAME/image;
- in each rootfs.ext4 (debugfs): the whiteout deleted gone.txt, the opaque
  dir lost old.txt and kept new.txt, link1/link2 are one inode with two
  links, /app/suid is 04755 1234:5678 with user.airlock=yes, big.bin whole;
- template.json: the entrypoint + cmd became the start command, USER,
  WorkingDir and Env recorded;
- a sandbox from the imported template runs: the files, the hard link, the
  symlink and the env as the guest sees them;
- a layer with a ".." entry is a 400 naming the layer and the entry, a
  symlink planted to escape fails the import, an upload over the cap is a
  413, and none of them writes outside the import's own directory (which
  is gone after).

Usage: test_oci.py AIRLOCKD AIRLOCK_CLI [DATA_ROOT]"""
import json, os, shutil, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_client import ApiError, check, session, summary
import oci_image

def upload(c, name, path):
    """PUT the file; (status, events or the error body as text)."""
    try:
        with open(path, "rb") as f:
            return 200, list(c.sse("PUT", f"/v1/templates/{name}/image", raw=f,
                                   ctype="application/x-tar"))
    except ApiError as e:
        return e.status, e.body if isinstance(e.body, str) else json.dumps(e.body) \
            if not isinstance(e.body, bytes) else e.body.decode(errors="replace")

def debugfs(img, cmd):
    return subprocess.run(["debugfs", "-R", cmd, img], capture_output=True,
                          text=True).stdout

def check_image(tag, tdir):
    img = os.path.join(tdir, "rootfs.ext4")
    app = debugfs(img, "ls /app")
    opq = debugfs(img, "ls /app/opq")
    check(f"{tag}: whiteout deleted gone.txt", "hello.txt" in app and "gone.txt" not in app, app)
    check(f"{tag}: opaque dir hides old.txt, keeps new.txt",
          "new.txt" in opq and "old.txt" not in opq, opq)
    l1, l2 = debugfs(img, "stat /app/link1"), debugfs(img, "stat /app/link2")
    ino = lambda s: s.split("Inode:")[1].split()[0] if "Inode:" in s else None
    check(f"{tag}: hard links stay one inode with 2 links",
          ino(l1) and ino(l1) == ino(l2) and "Links: 2" in l1, l1[:200])
    su = debugfs(img, "stat /app/suid")
    check(f"{tag}: mode, owner and xattr kept",
          "Mode:  04755" in su and "User:  1234" in su and "Group:  5678" in su and
          'user.airlock (3) = "yes"' in su, su[:600])
    big = debugfs(img, "stat /app/big.bin")
    check(f"{tag}: the large file whole", f"Size: {oci_image.BIG}" in big, big[:200])
    meta = json.load(open(os.path.join(tdir, "template.json")))
    check(f"{tag}: entrypoint + cmd became the start command",
          meta.get("start") == "/bin/sh -c 'echo started'", meta.get("start"))
    check(f"{tag}: USER, WorkingDir, Env recorded",
          meta.get("start_user") == "1234" and meta.get("workdir") == "/app" and
          meta.get("env", {}).get("FOO") == "bar", json.dumps(meta)[:400])
    check(f"{tag}: the agent was added",
          "airlock-agent" in debugfs(img, "ls /usr/local/bin"))

def tree(root):
    out = set()
    for dp, dn, fn in os.walk(root):
        for n in dn + fn:
            out.add(os.path.relpath(os.path.join(dp, n), root))
    return out

def main():
    airlockd, cli = sys.argv[1], sys.argv[2]
    root = sys.argv[3] if len(sys.argv) > 3 else os.environ.get("AIRLOCK_DATA_DIR",
                                                                  "/var/lib/airlock")
    escape = os.path.join(root, f"oci-escape-{os.getpid()}")

    def body(d, _):
        tdir = os.path.join(d.dir, "templates")
        if os.path.islink(tdir):
            os.unlink(tdir)
        os.makedirs(tdir, exist_ok=True)
        if not os.path.lexists(os.path.join(tdir, "base")):
            os.symlink(os.path.join(root, "templates", "base"), os.path.join(tdir, "base"))
        work = os.path.join(d.dir, "img")
        os.makedirs(work, exist_ok=True)
        paths = {k: os.path.join(work, k) for k in ("oci-dir", "oci.tar", "docker.tar",
                                                    "dotdot.tar", "symlink.tar", "big.tar")}
        oci_image.write("oci-dir", paths["oci-dir"])
        oci_image.write("oci-tar", paths["oci.tar"])
        oci_image.write("docker", paths["docker.tar"])
        oci_image.hostile(paths["dotdot.tar"], "dotdot", escape + "/a")
        oci_image.hostile(paths["symlink.tar"], "symlink", escape + "/b")
        with open(paths["big.tar"], "wb") as f:
            f.truncate(70 << 20)
        c = d.start({"AIRLOCK_TEMPLATE_UPLOAD_MAX_MB": "64"})
        c.timeout = 900
        env = dict(os.environ, AIRLOCK_DATA_DIR=d.dir)
        r = subprocess.run([cli, "template", "import", "oci-dir", paths["oci-dir"], "--local"],
                           env=env, capture_output=True, text=True)
        check("CLI imports an OCI layout directory", r.returncode == 0, r.stderr[-800:])
        if r.returncode == 0:
            check_image("oci-dir", os.path.join(tdir, "oci-dir"))
        for name, key in (("docker-img", "docker.tar"), ("oci-tar", "oci.tar")):
            st, evs = upload(c, name, paths[key])
            done = st == 200 and any(e == "done" for e, _ in evs)
            check(f"API imports {key}", done, f"{st} {evs if st != 200 else evs[-3:]}")
            if done:
                check(f"{key}: progress streamed", any(e == "progress" for e, _ in evs))
                check_image(key, os.path.join(tdir, name))

        before = tree(d.dir)
        st, body = upload(c, "evil", paths["dotdot.tar"])
        msg = json.loads(body).get("error", {}).get("message", "") if st == 400 else body
        check("a '..' layer entry is a 400 naming layer and entry",
              st == 400 and "layer 1" in msg and "entry \"../" in msg and "\"..\"" in msg,
              f"{st} {msg}")
        st, evs = upload(c, "evil2", paths["symlink.tar"])
        msg = [x.get("message", "") for e, x in evs if e == "error"] if st == 200 else [evs]
        check("a symlink planted to escape fails the import", st >= 400 or (
              msg and "esc/b" in msg[0]), f"{st} {msg}")
        st, body = upload(c, "huge", paths["big.tar"])
        check("an upload over template_upload_max_mb is a 413", st == 413, f"{st} {body[:200]}")
        check("nothing escaped the build dir", not os.path.exists(escape), escape)
        after = tree(d.dir)
        extra = sorted(p for p in after - before if not p.startswith(("airlockd", "store",
                                                                      "run", "logs")))
        check("the refused imports left nothing behind", not extra, extra[:10])
        check("no template from a refused image",
              not any(os.path.exists(os.path.join(tdir, n)) for n in ("evil", "evil2", "huge")))

        sb = c.call("POST", "/v1/sandboxes", {"template": "docker-img"})
        sid = sb["id"]
        code, _, out, err = c.exec(sid, ["/bin/bash", "-c",
                                         "cat /app/hello.txt; stat -c %i:%h /app/link1 /app/link2;"
                                         " ls /app/opq; test -e /app/gone.txt || echo nogone;"
                                         " readlink /app/sym; cat /app/sym; echo FOO=$FOO"])
        lines = out.decode(errors="replace").splitlines()
        check("a sandbox from the imported template runs", code == 0 and len(lines) == 8,
              f"{code} {out} {err}")
        if code == 0 and len(lines) == 8:
            a, b = lines[1].split(":"), lines[2].split(":")
            check("guest: the files of the layers", lines[0] == "hello from layer 2" and
                  lines[3] == "new.txt" and lines[4] == "nogone", lines)
            check("guest: one inode, two links", a == b and a[1] == "2", lines[1:3])
            check("guest: the symlink", lines[5] == "hello.txt" and
                  lines[6] == "hello from layer 2", lines[5:7])
            check("guest: the image's env", lines[7] == "FOO=bar", lines[7])
        c.call("DELETE", f"/v1/sandboxes/{sid}")

    # The session starts nothing itself (the data dir is set up first), then
    # stops the daemon, checks its sanitizers and removes all it made.
    session(airlockd, root, body, start=False)
    shutil.rmtree(escape, ignore_errors=True)
    return summary()

if __name__ == "__main__":
    sys.exit(main())
