#!/usr/bin/env bash
# Everything a host needs before airlockd runs, each step cached and idempotent:
# data dir (reflink), guest kernel, CA, guest binaries, initramfs, base template.
# Used by both `make up` and `make check`. Needs the release build in $BUILD.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
BUILD=${BUILD:-$top/build}
DATA=${AIRLOCK_DATA_DIR:-/var/lib/airlock}
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

# Rebuild base only when its recipe, the agent, the kernel or the CA changed.
meta="$DATA/templates/base/template.json"
want_recipe=$(sha256sum "$top/images/base.json" | cut -d' ' -f1)
want_agent=$(sha256sum "$DATA/bin/airlock-agent" | cut -d' ' -f1)
want_ca=$(sha256sum "$DATA/ca/ca.crt" | cut -d' ' -f1)
want_kernel=$(python3 -c 'import json,sys; k=json.load(open(sys.argv[1])); print("%s (%s)" % (k["release"], k["version"]))' "$kdir/kernel.json")
have=$(python3 -c 'import json,sys
try:
    m=json.load(open(sys.argv[1])); print(m["recipe_sha256"], m["agent_sha256"], m["kernel_release"], m.get("ca_sha256", ""), sep="|")
except Exception: print("")' "$meta")
if [ "$have" != "$want_recipe|$want_agent|$want_kernel|$want_ca" ]; then
	"$BUILD/src/cli/airlock" template build base --recipe "$top/images/base.json" \
		--agent "$DATA/bin/airlock-agent"
else
	echo "template base: up to date"
fi
