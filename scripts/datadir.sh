#!/usr/bin/env bash
# Make $AIRLOCK_DATA_DIR reflink-capable. If the filesystem under it cannot
# reflink (ext4), create a sparse btrfs image beside it and loop-mount it
# there. Idempotent: an existing image is only mounted.
set -euo pipefail
DATA=${AIRLOCK_DATA_DIR:-/var/lib/airlock}
IMG=${AIRLOCK_DATA_IMAGE:-$DATA.btrfs}
SIZE=${AIRLOCK_DATA_SIZE:-64G}

probe() {
	local a="$DATA/.reflink-probe.$$"
	echo airlock > "$a" 2>/dev/null || return 1
	if cp --reflink=always "$a" "$a.clone" 2>/dev/null; then
		rm -f "$a" "$a.clone"; return 0
	fi
	rm -f "$a" "$a.clone"; return 1
}

mkdir -p "$DATA"
if mountpoint -q "$DATA"; then
	probe || { echo "datadir: $DATA is a mount without reflink support; use btrfs or XFS (reflink=1)" >&2; exit 1; }
	echo "datadir: $DATA ($(findmnt -no FSTYPE "$DATA"), reflink ok)"
	exit 0
fi
if [ ! -f "$IMG" ] && probe; then
	echo "datadir: $DATA ($(findmnt -no FSTYPE -T "$DATA"), reflink ok)"
	exit 0
fi
if [ ! -f "$IMG" ]; then
	if [ -n "$(ls -A "$DATA" 2>/dev/null)" ]; then
		echo "datadir: $DATA is not empty and its filesystem cannot reflink; move its content away or set AIRLOCK_DATA_DIR" >&2
		exit 1
	fi
	echo "datadir: $(findmnt -no FSTYPE -T "$DATA") cannot reflink; creating a $SIZE sparse btrfs image $IMG"
	truncate -s "$SIZE" "$IMG.tmp"
	mkfs.btrfs -q -L airlock-data "$IMG.tmp" >/dev/null
	mv "$IMG.tmp" "$IMG"
fi
mount -o loop,noatime "$IMG" "$DATA"
probe || { echo "datadir: mounted $IMG but reflink still fails" >&2; exit 1; }
echo "datadir: mounted $IMG on $DATA (btrfs, reflink ok)"
