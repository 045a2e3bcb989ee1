#!/usr/bin/env python3
"""Disk (issue 11): what a sandbox costs the host's disk, end to end with
the real airlockd and real microVMs (TCG here).

- floor: with disk_free_floor_mb above the data dir's free space, a create
  and a template build get 507 insufficient_storage naming the floor and the
  free space, and leave nothing (no record, no file); /metrics reports the
  free space and the floor.
- disk_mb: validated (400 naming the field); a sandbox created with
  disk_mb above its template's image gets exactly that block device and a
  filesystem grown to it.
- bound: a guest writing until its disk is full gets ENOSPC inside the guest
  (its root stays read-write, exec still answers) and the host file stays at
  the size of the disk; freeing and trimming in the guest gives the space back.
- nothing left: the data dir tree (paths and sizes; the store and the daemon
  log excepted: events outlive sandboxes by design) before a sandbox is
  created equals the tree after it is deleted, for one that wrote files,
  filled its disk, was suspended and resumed twice and adopted by a restarted
  airlockd, and for one that failed mid-create.

Usage: test_disk.py AIRLOCKD [DATA_ROOT]"""
import json, os, re, shutil, signal, subprocess, sys, time, traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from daemon_client import ApiError, args, check, exec_retry, run_cases, session, summary, wait_for

SMALL_MB = 768          # the test template's image: ~150 MiB free for the fill
DISK_MB = 1024          # the sandbox's disk_mb: grown from SMALL_MB
SLACK = 4 << 20         # host-side allocation beyond the image size we tolerate



def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def make_templates(d, shared):
    """A private templates dir: base (shared, read-only link), small (a
    reflinked base shrunk to SMALL_MB on the host: the test's own trusted
    image) and broken (zeros: the guest's init cannot mount it)."""
    tdir = os.path.join(d.dir, "templates")
    if os.path.islink(tdir):
        os.unlink(tdir)
    os.makedirs(tdir, exist_ok=True)
    base = os.path.join(shared, "templates", "base")
    if not os.path.lexists(os.path.join(tdir, "base")):
        os.symlink(base, os.path.join(tdir, "base"))
    meta = json.load(open(os.path.join(base, "template.json")))
    small = os.path.join(tdir, "small")
    os.makedirs(small, exist_ok=True)
    img = os.path.join(small, "rootfs.ext4")
    run("cp", "--reflink=always", os.path.join(base, "rootfs.ext4"), img)
    # 0: clean, 1: fixed something; resize2fs wants a freshly checked filesystem.
    rc = subprocess.run(["e2fsck", "-fy", img], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    if rc > 1:
        raise RuntimeError(f"e2fsck {img}: exit {rc}")
    run("resize2fs", img, f"{SMALL_MB}M")
    m = dict(meta, name="small", image_size_bytes=os.path.getsize(img), disk_size_mb=SMALL_MB)
    json.dump(m, open(os.path.join(small, "template.json"), "w"))
    broken = os.path.join(tdir, "broken")
    os.makedirs(broken, exist_ok=True)
    with open(os.path.join(broken, "rootfs.ext4"), "wb") as f:
        f.truncate(64 << 20)
    json.dump(dict(meta, name="broken"), open(os.path.join(broken, "template.json"), "w"))

# Files whose size changes by design while sandboxes come and go: the store
# keeps every sandbox's events after delete (docs/api.md), and the logs of
# the daemon itself. Their paths are still compared.
GROWING = re.compile(r"^(state\.db(-wal|-shm|-journal)?|airlockd\.log)$")
# Directories made once per data dir on first need, shared by all sandboxes.
SHARED_DIRS = {"logs", "sandboxes", "snapshots", "run", "run/uids"}

def tree(d):
    """{relative path: (kind, size, allocated bytes)} of the data dir, not
    following links (kernel, ca, bin and templates/base are shared links;
    the test's own templates never change)."""
    out = {}
    for top, dirs, files in os.walk(d.dir):
        rel = os.path.relpath(top, d.dir)
        if rel == "templates":
            dirs[:] = []
            continue
        for n in dirs + files:
            p = os.path.join(top, n)
            r = os.path.normpath(os.path.join(rel, n))
            st = os.lstat(p)
            if os.path.islink(p):
                out[r] = ("link", 0, 0)
            elif os.path.isdir(p):
                out[r] = ("dir", 0, 0)
            elif GROWING.match(r):
                out[r] = ("file", -1, -1)
            else:
                out[r] = ("file", st.st_size, st.st_blocks * 512)
    return out

def tree_diff(a, b):
    diff = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) == b.get(k):
            continue
        if k not in a and k in SHARED_DIRS and b[k][0] == "dir":
            continue
        diff.append(f"{k}: {a.get(k)} -> {b.get(k)}")
    return diff

def allocated(t):
    return sum(v[2] for v in t.values() if v[2] > 0)

def btrfs_du(path):
    out = subprocess.run(["btrfs", "filesystem", "du", "-s", "--raw", path],
                         capture_output=True, text=True)
    nums = out.stdout.strip().splitlines()[-1].split() if out.returncode == 0 else []
    return int(nums[0]) if nums and nums[0].isdigit() else None

def files_apparent(t):
    return sum(v[1] for v in t.values() if v[0] == "file" and v[1] > 0)

def du_apparent(d):
    """du --apparent-size --block-size=1 without the growing files (btrfs
    counts a directory's entries in its size: the shared dirs made on first
    use add their names once)."""
    excl = ["--exclude=state.db*", "--exclude=airlockd.log", "--exclude=templates"]
    out = subprocess.run(["du", "-s", "--apparent-size", "--block-size=1"] + excl + [d.dir],
                         capture_output=True, text=True)
    return int(out.stdout.split()[0])

def statvfs_free(path):
    sv = os.statvfs(path)
    return sv.f_bavail * sv.f_frsize



def expect_error(c, method, path, obj, status, code, words=()):
    try:
        c.call(method, path, obj, expect=())
        check(f"{method} {path} {obj} refused with {status}", False, "it succeeded")
        return None
    except ApiError as e:
        err = e.body.get("error", {}) if isinstance(e.body, dict) else {}
        msg = err.get("message", "")
        check(f"{method} {path} {json.dumps(obj)[:60]} -> {status} {code}",
              e.status == status and err.get("code") == code and all(w in msg for w in words),
              (e.status, e.body))
        return msg

def snapshots(d):
    p = os.path.join(d.dir, "snapshots")
    return sorted(os.listdir(p)) if os.path.isdir(p) else []

def test_floor(d, root):
    free_mb = statvfs_free(root) >> 20
    floor_mb = free_mb + (1 << 20)   # 1 TiB above what is free: nothing gets filled
    c = d.start({"AIRLOCK_DISK_FREE_FLOOR_MB": str(floor_mb)})
    before = tree(d)
    msg = expect_error(c, "POST", "/v1/sandboxes", {"template": "small"}, 507,
                       "insufficient_storage", ("floor", f"{floor_mb} MiB", "disk_free_floor_mb"))
    if msg:
        m = re.search(r"has (\d+) MiB free", msg)
        check("the refusal names the free space (within 1 GiB of statvfs)",
              m is not None and abs(int(m.group(1)) - free_mb) < 1024, msg)
    # A valid recipe: a bad one is refused (400) before the floor is looked at.
    recipe = {"from": {"distro": "debian", "suite": "bookworm", "variant": "minbase"}}
    expect_error(c, "POST", "/v1/templates", {"name": "floor-test", "recipe": recipe}, 507,
                 "insufficient_storage", ("floor",))
    check("no sandbox record was made", c.call("GET", "/v1/sandboxes")["sandboxes"] == [])
    build = os.path.join(d.dir, "build")
    check("no template build was started",
          not os.path.exists(os.path.join(d.dir, "templates", "floor-test")) and
          not (os.path.isdir(build) and [n for n in os.listdir(build)
                                         if n.startswith("floor-test")]))
    check("the refused create left the data dir as it was", not tree_diff(before, tree(d)),
          tree_diff(before, tree(d)))
    _, _, text = c.raw("GET", "/metrics", auth=False)
    text = text.decode()
    vals = dict(re.findall(r"^(airlock_(?:data_free|data_size|disk_free_floor)_bytes) (\d+)$",
                           text, re.M))
    free_now = statvfs_free(root)
    check("/metrics reports the data dir's free space",
          "airlock_data_free_bytes" in vals and
          abs(int(vals["airlock_data_free_bytes"]) - free_now) < (1 << 30), (vals, free_now))
    check("/metrics reports the floor", vals.get("airlock_disk_free_floor_bytes") ==
          str(floor_mb << 20), vals)
    check("/metrics reports the data dir's size",
          int(vals.get("airlock_data_size_bytes", 0)) >= int(vals.get("airlock_data_free_bytes", 1)),
          vals)
    d.kill(signal.SIGTERM)

def test_validation(c):
    expect_error(c, "POST", "/v1/sandboxes", {"template": "small", "disk_mb": SMALL_MB - 1}, 400,
                 "bad_request", ("disk_mb", "grow"))
    expect_error(c, "POST", "/v1/sandboxes", {"template": "small", "disk_mb": 65537}, 400,
                 "bad_request", ("disk_mb", "max_disk_mb"))
    expect_error(c, "POST", "/v1/sandboxes", {"template": "small", "disk_mb": "1G"}, 400,
                 "bad_request", ("disk_mb",))
    expect_error(c, "POST", "/v1/sandboxes", {"template": "small", "disk_mb": 0}, 400,
                 "bad_request", ("disk_mb",))
    check("refused creates made no record", c.call("GET", "/v1/sandboxes")["sandboxes"] == [])

def guest_sh(c, sid, script, user="root"):
    code, _, out, err = c.exec(sid, ["sh", "-c", script], user=user)
    return code, out.decode(errors="replace"), err.decode(errors="replace")

def test_bound(d, c, sid):
    img = os.path.join(d.dir, "sandboxes", sid, "vm", "rootfs.ext4")
    st = os.stat(img)
    check(f"the host image is exactly disk_mb ({DISK_MB} MiB)", st.st_size == DISK_MB << 20,
          st.st_size)
    code, out, _ = guest_sh(c, sid, "cat /sys/block/vda/size; df -k / | tail -1")
    lines = out.split("\n")
    check("the guest's block device is disk_mb",
          code == 0 and int(lines[0]) * 512 == DISK_MB << 20, out)
    fs_kb = int(lines[1].split()[1]) if code == 0 else 0
    check(f"the guest's root filesystem was grown beyond the template's {SMALL_MB} MiB",
          fs_kb > SMALL_MB * 1024 and fs_kb <= DISK_MB * 1024, out)
    t0 = time.time()
    code, out, err = guest_sh(c, sid, "dd if=/dev/zero of=/big bs=1M 2>&1; echo rc=$?; sync")
    print(f"   fill: {time.time() - t0:.1f} s: {out.strip().splitlines()[-2:]}", flush=True)
    check("dd in the guest ends with ENOSPC", "No space left on device" in out and
          "rc=0" not in out, out[-400:])
    alloc = os.stat(img).st_blocks * 512
    size = os.stat(img).st_size
    print(f"   host: image {size >> 20} MiB, allocated {alloc / 1048576:.1f} MiB "
          f"(btrfs du {btrfs_du(img)})", flush=True)
    check("the host image did not grow past disk_mb", size == DISK_MB << 20, size)
    check("host allocation of the full disk <= disk_mb + slack",
          alloc <= (DISK_MB << 20) + SLACK, alloc)
    code, out, _ = guest_sh(c, sid, "echo alive; awk '$2 == \"/\" {print $4}' /proc/mounts")
    check("the full sandbox still answers exec, root still read-write",
          code == 0 and out.startswith("alive") and out.split("\n")[1].split(",")[0] == "rw", out)
    # ext4 frees the blocks when the journal commits: sync before trimming.
    code, out, _ = guest_sh(c, sid, "rm /big && sync && fstrim -v / && "
                            "echo ok > /home/user/after-full && cat /home/user/after-full")
    check("freeing space in the guest works (no read-only remount)",
          code == 0 and out.strip().endswith("ok"), out)
    time.sleep(1)
    after = os.stat(img).st_blocks * 512
    print(f"   after rm + fstrim ({out.splitlines()[0] if out else ''}): "
          f"allocated {after / 1048576:.1f} MiB", flush=True)
    check("fstrim in the guest hands the space back on the host (discard=unmap)",
          after < alloc - (64 << 20), (alloc, after))

def test_nothing_left(d, c):
    before = tree(d)
    before_alloc, before_app = allocated(before), du_apparent(d)
    before_btrfs = btrfs_du(d.dir)
    print(f"   before: {len(before)} paths, {before_alloc} bytes allocated, "
          f"du --apparent {before_app}, btrfs du {before_btrfs}", flush=True)
    sb = c.call("POST", "/v1/sandboxes", {"template": "small", "disk_mb": DISK_MB,
                                          "memory_mb": 256})
    sid = sb["id"]
    check("create with disk_mb runs and reports it", sb["state"] == "running" and
          sb.get("disk_mb") == DISK_MB, sb)
    code, _, _, _ = c.exec(sid, ["sh", "-c", "echo hello > /home/user/f1; "
                                 "head -c 20000000 /dev/urandom > /home/user/f2"])
    check("the guest writes files", code == 0)
    test_bound(d, c, sid)
    for i in (1, 2):
        s = c.call("POST", f"/v1/sandboxes/{sid}/suspend")
        check(f"suspend {i}", s["state"] == "suspended" and s.get("disk_mb") == DISK_MB, s)
        check(f"suspend {i}: exactly one snapshot on disk", len(snapshots(d)) == 1,
              snapshots(d))
        s = c.call("POST", f"/v1/sandboxes/{sid}/resume")
        check(f"resume {i}", s["state"] == "running", s)
        code, _, out, _ = exec_retry(c, sid, ["cat", "/home/user/f1"])
        check(f"resume {i}: the files are there", code == 0 and out == b"hello\n", out)
        check(f"resume {i}: the snapshot it resumed from is gone", snapshots(d) == [],
              snapshots(d))
    # Adopted by the next airlockd: its dir, uid claim, cgroup stay in use.
    # What a crash leaves in snapshots/: a half-written suspend of this
    # sandbox, a complete one of a sandbox with no record, and a dir that is
    # not airlockd's (kept: never touch what others made).
    sdir = os.path.join(d.dir, "snapshots")
    planted = {f".tmp-{sid}-1": False, "zzzzzzzzzzzzzzzzzzzz-2": False, "not-airlocks": True}
    for n in planted:
        os.makedirs(os.path.join(sdir, n))
        open(os.path.join(sdir, n, "mem"), "wb").write(b"x" * 4096)
    d.kill()
    c = d.start()
    for n, kept in planted.items():
        check(f"restart recovery {'keeps' if kept else 'removes'} snapshots/{n}",
              os.path.exists(os.path.join(sdir, n)) == kept, snapshots(d))
    shutil.rmtree(os.path.join(sdir, "not-airlocks"), ignore_errors=True)
    s = c.call("GET", f"/v1/sandboxes/{sid}")
    check("adopted after an airlockd SIGKILL", s["state"] == "running", s)
    code, _, out, _ = exec_retry(c, sid, ["cat", "/home/user/f1"])
    check("the adopted sandbox answers", code == 0 and out == b"hello\n", out)
    c.call("DELETE", f"/v1/sandboxes/{sid}")
    check("the sandbox is gone", wait_for(
        lambda: not os.path.exists(os.path.join(d.dir, "sandboxes", sid)), 60))
    after = tree(d)
    diff = tree_diff(before, after)
    print("   shared dirs made on first use: " +
          " ".join(sorted(k for k in set(after) - set(before) if k in SHARED_DIRS)), flush=True)
    print(f"   after: {len(after)} paths, {allocated(after)} bytes allocated, "
          f"du --apparent {du_apparent(d)}, btrfs du {btrfs_du(d.dir)}", flush=True)
    check("delete after writes, a full disk, 2 suspends, resumes and adoption: the data dir "
          "tree is as before", not diff, "\n      ".join(diff))
    check("allocated bytes as before", allocated(after) == before_alloc,
          (before_alloc, allocated(after)))
    check("apparent size of every file as before", files_apparent(after) ==
          files_apparent(before), (files_apparent(before), files_apparent(after)))
    check("du --apparent-size as before within noise (the shared dirs' own entries)",
          0 <= du_apparent(d) - before_app <= 4096, (before_app, du_apparent(d)))
    # Failed mid-create: the guest's init cannot mount a zeroed rootfs.
    before = tree(d)
    t0 = time.time()
    try:
        c.call("POST", "/v1/sandboxes", {"template": "broken", "memory_mb": 256})
        check("a create from a zeroed image fails", False, "it succeeded")
    except ApiError as e:
        msg = e.body.get("error", {}).get("message", "") if isinstance(e.body, dict) else ""
        check("a create from a zeroed image fails: the VM exited before its agent answered",
              e.status == 500 and "exited before its guest agent answered" in msg and
              "mount root" in msg, (e.status, e.body))
    # Not the 180 s boot deadline: the VMM's exit ends the create.
    check("it fails as soon as the guest powers off", time.time() - t0 < 120, time.time() - t0)
    failed = [s for s in c.call("GET", "/v1/sandboxes")["sandboxes"] if s["state"] == "failed"]
    check("it is kept as failed", len(failed) == 1, failed)
    for s in failed:
        c.call("DELETE", f"/v1/sandboxes/{s['id']}")
    diff = tree_diff(before, tree(d))
    check("delete of the failed sandbox: the data dir tree is as before", not diff,
          "\n      ".join(diff))
    return c

def main():
    binary, root, _ = args()
    if os.geteuid() != 0 or not os.access(binary, os.X_OK) or \
            not os.path.exists(os.path.join(root, "templates", "base", "rootfs.ext4")):
        print("skip: needs root, airlockd and a prepared data dir")
        return 77
    for tool in ("e2fsck", "resize2fs", "btrfs"):
        if shutil.which(tool) is None:
            print(f"skip: {tool} missing")
            return 77

    def body(d, _):
        make_templates(d, root)
        print("-- floor", flush=True)
        try:
            test_floor(d, root)
        except Exception as e:
            traceback.print_exc()
            check("floor raised no exception", False, repr(e))
            d.kill()
        # The default floor from here on (passed explicitly: restarts reuse it).
        c = d.start({"AIRLOCK_DISK_FREE_FLOOR_MB": "2048"})
        run_cases((("disk_mb", lambda d, c: test_validation(c)),
                   ("nothing left", test_nothing_left)), d, c)

    session(binary, root, body, start=False)
    return summary()

if __name__ == "__main__":
    sys.exit(main())
