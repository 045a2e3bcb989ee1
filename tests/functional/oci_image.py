#!/usr/bin/env python3
"""Test OCI images, written here without Docker or a registry.

The base layer is a tiny root made of this host's own bash, coreutils and
their shared libraries (found with ldd), so a sandbox from the image runs
commands. The layers above exercise what an import must get right:
  layer 2 (gzip): /app/hello.txt, /app/gone.txt, /app/opq/old.txt, a hard
    link pair /app/link1 + /app/link2, a symlink /app/sym -> hello.txt,
    /app/suid (04755, owner 1234:5678, an xattr user.airlock=yes), and
    /app/big.bin (BIG bytes, not all zeros)
  layer 3: a whiteout /app/.wh.gone.txt, an opaque /app/opq/.wh..wh..opq
    and /app/opq/new.txt
The config: Env FOO=bar, Entrypoint ["/bin/sh","-c"], Cmd ["echo started"],
WorkingDir /app, User 1234.

write(kind, path): kind is "oci-dir", "oci-tar" or "docker" (docker save).
hostile(path, how): a docker-save tar whose layer has a ".." entry
("dotdot") or plants a symlink and writes through it ("symlink")."""
import gzip, hashlib, io, json, os, shutil, subprocess, sys, tarfile

BIG = 48 << 20
BINS = ["/bin/bash", "/bin/sh", "/bin/cat", "/bin/ls", "/usr/bin/stat", "/bin/echo",
        "/usr/bin/id", "/usr/bin/env", "/bin/sleep", "/usr/bin/test", "/bin/mkdir",
        "/bin/rm", "/usr/bin/sync", "/bin/mount", "/usr/bin/tee", "/usr/bin/head",
        "/usr/bin/md5sum", "/bin/dd", "/usr/bin/true", "/bin/df", "/usr/bin/readlink"]

def _libs(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        for p in parts:
            if p.startswith("/"):
                yield p

def _add_file(t, name, data, mode=0o644, uid=0, gid=0, pax=None):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.uid, ti.gid = len(data), mode, uid, gid
    ti.mtime = 1700000000
    if pax:
        ti.pax_headers = pax
    t.addfile(ti, io.BytesIO(data))

def _add_dir(t, name, mode=0o755):
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, mode, 1700000000
    t.addfile(ti)

def _add_link(t, name, target, hard=False):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    ti.linkname, ti.mtime = target, 1700000000
    t.addfile(ti)

def _tar(build):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        build(t)
    return buf.getvalue()

def base_layer():
    """usrmerged like Debian: /bin, /lib, /lib64, /sbin are symlinks into /usr,
    and the ld.so link /lib64/ld-linux-x86-64.so.2 is written through them."""
    def build(t):
        for d in ("usr", "usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc", "tmp", "root",
                  "proc", "sys", "dev", "run", "home", "var", "var/tmp"):
            _add_dir(t, d, 0o1777 if d in ("tmp", "var/tmp") else 0o755)
        for l in ("bin", "lib", "lib64", "sbin"):
            _add_link(t, l, "usr/" + l)
        files, links, dirs = set(), {}, set()
        for b in BINS:
            if not os.path.exists(b):
                continue
            files.add(os.path.realpath(b))
            if os.path.islink(b):    # /bin/sh -> dash: the name, as a link to the file
                links["/usr/bin/" + os.path.basename(b)] = os.path.realpath(b)
            for l in _libs(b):
                files.add(os.path.realpath(l))
                if os.path.realpath(l) != os.path.realpath(os.path.dirname(l)) + "/" + \
                        os.path.basename(l):
                    links[os.path.realpath(os.path.dirname(l)) + "/" + os.path.basename(l)] = \
                        os.readlink(l)
        for f in sorted(files):
            d = os.path.dirname(f).lstrip("/")
            parts = d.split("/")
            for i in range(1, len(parts) + 1):
                sub = "/".join(parts[:i])
                if sub not in dirs and sub not in ("usr", "usr/bin", "usr/sbin", "usr/lib",
                                                   "usr/lib64"):
                    dirs.add(sub)
                    _add_dir(t, sub)
            with open(f, "rb") as fh:
                _add_file(t, f.lstrip("/"), fh.read(), os.stat(f).st_mode & 0o7777)
        # Through the /lib64 symlink, as a real image's ld.so link is.
        for name, target in sorted(links.items()):
            _add_link(t, name.lstrip("/").replace("usr/lib64", "lib64", 1), target)
        _add_file(t, "etc/passwd", b"root:x:0:0:root:/root:/bin/bash\n"
                  b"app:x:1234:5678::/app:/bin/sh\n")
        _add_file(t, "etc/group", b"root:x:0:\napp:x:5678:\n")
        _add_file(t, "etc/shadow", b"root:*:19000:0:99999:7:::\n", 0o640)
    return _tar(build)

def app_layer():
    def build(t):
        _add_dir(t, "app")
        _add_file(t, "app/hello.txt", b"hello from layer 2\n")
        _add_file(t, "app/gone.txt", b"whited out by layer 3\n")
        _add_dir(t, "app/opq")
        _add_file(t, "app/opq/old.txt", b"hidden by the opaque dir\n")
        _add_file(t, "app/link1", b"one inode, two names\n")
        _add_link(t, "app/link2", "app/link1", hard=True)
        _add_link(t, "app/sym", "hello.txt")
        _add_file(t, "app/suid", b"#!/bin/sh\n", 0o4755, 1234, 5678,
                  {"SCHILY.xattr.user.airlock": "yes"})
        block = hashlib.sha256(b"airlock").digest() * 2048   # 64 KiB, not zeros
        _add_file(t, "app/big.bin", block * (BIG // len(block)))
    return gzip.compress(_tar(build), 1)

def top_layer():
    def build(t):
        _add_file(t, "app/.wh.gone.txt", b"")
        _add_file(t, "app/opq/.wh..wh..opq", b"")
        _add_file(t, "app/opq/new.txt", b"new in layer 3\n")
    return _tar(build)

CONFIG = {"architecture": "amd64", "os": "linux",
          "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                             "FOO=bar"],
                     "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo started"],
                     "WorkingDir": "/app", "User": "1234"},
          "rootfs": {"type": "layers", "diff_ids": []}}

def _sha(b):
    return hashlib.sha256(b).hexdigest()

def _layout(files, layers, config):
    """OCI layout members: {path: bytes}."""
    out = {"oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode()}
    descs = []
    for data, mt in layers:
        out["blobs/sha256/" + _sha(data)] = data
        descs.append({"mediaType": mt, "digest": "sha256:" + _sha(data), "size": len(data)})
    cfg = json.dumps(config).encode()
    out["blobs/sha256/" + _sha(cfg)] = cfg
    man = json.dumps({"schemaVersion": 2,
                      "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": "sha256:" + _sha(cfg), "size": len(cfg)},
                      "layers": descs}).encode()
    out["blobs/sha256/" + _sha(man)] = man
    out["index.json"] = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": "sha256:" + _sha(man), "size": len(man),
         "platform": {"architecture": "amd64", "os": "linux"}}]}).encode()
    return out

def _docker(layers, config):
    out, names = {}, []
    for i, data in enumerate(layers):
        d = _sha(data)
        out[f"{d}/layer.tar"] = data
        out[f"{d}/VERSION"] = b"1.0"
        names.append(f"{d}/layer.tar")
    cfg = json.dumps(config).encode()
    out[_sha(cfg) + ".json"] = cfg
    out["manifest.json"] = json.dumps([{"Config": _sha(cfg) + ".json",
                                        "RepoTags": ["test:latest"], "Layers": names}]).encode()
    return out

def _write_tar(path, members):
    with tarfile.open(path, "w") as t:
        for name in sorted(members):
            _add_file(t, name, members[name])

def write(kind, path):
    layers = [(base_layer(), "application/vnd.oci.image.layer.v1.tar"),
              (app_layer(), "application/vnd.oci.image.layer.v1.tar+gzip"),
              (top_layer(), "application/vnd.oci.image.layer.v1.tar")]
    if kind == "docker":
        plain = [gzip.decompress(d) if mt.endswith("gzip") else d for d, mt in layers]
        _write_tar(path, _docker(plain, CONFIG))
        return
    members = _layout(None, layers, CONFIG)
    if kind == "oci-tar":
        _write_tar(path, members)
        return
    shutil.rmtree(path, ignore_errors=True)
    for name, data in members.items():
        os.makedirs(os.path.dirname(os.path.join(path, name)) or path, exist_ok=True)
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)

def hostile(path, how, escape):
    """escape: an absolute host path the image tries to write."""
    def build(t):
        if how == "dotdot":
            _add_file(t, "app/ok.txt", b"fine\n")
            _add_file(t, "../" * 12 + escape.lstrip("/"), b"escaped\n")
        else:
            _add_link(t, "esc", "../" * 12 + os.path.dirname(escape).lstrip("/"))
            _add_file(t, "esc/" + os.path.basename(escape), b"escaped\n")
    _write_tar(path, _docker([_tar(build)], CONFIG))

if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2])
