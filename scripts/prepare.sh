#!/usr/bin/env bash
# Everything a host needs before airlockd runs, each step cached and idempotent:
# data dir (reflink), guest kernel, CA, guest binaries, initramfs, base template.
# Used by both `make up` and `make check`. Needs the release build in $BUILD.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
BUILD=${BUILD:-$top/build}
DATA=${AIRLOCK_DATA_DIR:-/var/lib/airlock}
CACHE=${AIRLOCK_CACHE_DIR:-/var/cache/airlock}
export AIRLOCK_DATA_DIR=$DATA

bash "$here/datadir.sh"
bash "$here/kernel.sh"
bash "$here/ca.sh"

# Guest binaries: templates and the initramfs embed these copies.
mkdir -p "$DATA/bin"
for b in "$BUILD/src/guest/agent/airlock-agent" "$BUILD/src/guest/init/airlock-init"; do
	[ -x "$b" ] || { echo "prepare: $b missing; build first (make build)" >&2; exit 1; }
	if ! cmp -s "$b" "$DATA/bin/$(basename "$b")"; then
		install -m 0755 "$b" "$DATA/bin/$(basename "$b").new"
		mv "$DATA/bin/$(basename "$b").new" "$DATA/bin/$(basename "$b")"
	fi
done

kdir="$DATA/kernel/current"
init_sha=$(sha256sum "$DATA/bin/airlock-init" | cut -d' ' -f1)
if [ ! -f "$kdir/initramfs.cpio" ] || [ "$(cat "$kdir/initramfs.init.sha256" 2>/dev/null)" != "$init_sha" ]; then
	"$BUILD/src/cli/airlock" initramfs --init "$DATA/bin/airlock-init" \
		--modules "$kdir/modules" --out "$kdir/initramfs.cpio"
	echo "$init_sha" > "$kdir/initramfs.init.sha256"
else
	echo "initramfs: up to date"
fi

# Rebuild a template only when its recipe, the files it copies in, the agent,
# the kernel or the CA changed.
want_agent=$(sha256sum "$DATA/bin/airlock-agent" | cut -d' ' -f1)
want_ca=$(sha256sum "$DATA/ca/ca.crt" | cut -d' ' -f1)
want_kernel=$(python3 -c 'import json,sys; k=json.load(open(sys.argv[1])); print("%s (%s)" % (k["release"], k["version"]))' "$kdir/kernel.json")
template() { # name recipe
	local name=$1 recipe=$2 meta want have key cached tmp
	meta="$DATA/templates/$name/template.json"
	want=$(python3 - "$recipe" <<'PY'
import hashlib, json, os, sys
path = sys.argv[1]
r = json.load(open(path))
files = {}
for f in r.get("files", []):
    src = f["src"] if f["src"].startswith("/") else os.path.join(os.path.dirname(path), f["src"])
    files[os.path.normpath(f["dst"])] = hashlib.sha256(open(src, "rb").read()).hexdigest()
print(hashlib.sha256(open(path, "rb").read()).hexdigest(), json.dumps(files, sort_keys=True), sep="|")
PY
)
	have=$(python3 -c 'import json,sys
try:
    m=json.load(open(sys.argv[1])); print(m["recipe_sha256"], json.dumps(m.get("files_sha256", {}), sort_keys=True), m["agent_sha256"], m["kernel_release"], m.get("ca_sha256", ""), sep="|")
except Exception: print("")' "$meta")
	if [ "$have" = "$want|$want_agent|$want_kernel|$want_ca" ]; then
		echo "template $name: up to date"
		return
	fi
	# The built template is cached under $CACHE/templates, keyed by all of
	# the above, so another data dir or a fresh clone on this host (CI)
	# copies it instead of building it again; one entry per template name.
	key=$(printf '%s' "$want|$want_agent|$want_kernel|$want_ca" | sha256sum | cut -c1-16)
	cached="$CACHE/templates/$name-$key"
	if [ -f "$cached/.airlock-complete" ]; then
		tmp="$DATA/templates/.$name.cache-tmp"    # not a template name
		rm -rf "$tmp" && mkdir -p "$tmp"
		cp --sparse=always --reflink=auto "$cached/rootfs.ext4" "$cached/template.json" "$tmp/"
		rm -rf "$DATA/templates/$name"
		mv -T "$tmp" "$DATA/templates/$name"
		echo "template $name: copied from the cache ($cached)"
		return
	fi
	"$BUILD/src/cli/airlock" template build "$name" --recipe "$recipe" \
		--agent "$DATA/bin/airlock-agent"
	# Best effort: a full disk or a concurrent prepare only costs the next build.
	if ! { rm -rf "$CACHE/templates/$name"-* && mkdir -p "$cached.tmp" &&
		cp --sparse=always --reflink=auto "$DATA/templates/$name/rootfs.ext4" \
			"$DATA/templates/$name/template.json" "$cached.tmp/" &&
		touch "$cached.tmp/.airlock-complete" && mv -T "$cached.tmp" "$cached"; }; then
		echo "template $name: not cached (see above)" >&2
		rm -rf "$cached.tmp"
	fi
}
template base "$top/images/base.json"
# The E2B code interpreter's template (docs/templates.md, docs/e2b.md): its
# debootstrap tree (about 300 packages) is cached in $CACHE/rootfs and the
# built image in $CACHE/templates, so only a host's first run pays the
# uncached build (about 4 min here, docs/performance.md "Code interpreter");
# then about a minute when only the agent changed, a copy when nothing did.
# make check runs its SDK suite (e2b:e2b_interp); AIRLOCK_PREPARE_INTERP=0
# leaves the template out (and the suite is skipped).
if [ "${AIRLOCK_PREPARE_INTERP:-1}" != 0 ]; then
	template code-interpreter-v1 "$top/images/code-interpreter.json"
fi
