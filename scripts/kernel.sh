#!/usr/bin/env bash
# Fetch the pinned Debian cloud kernel, extract the PVH ELF and the virtio
# modules into $DATA/kernel/<release>, and point kernel/current at it.
# The .deb is cached in $CACHE/kernel keyed by package and version.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.env"
DATA=${AIRLOCK_DATA_DIR:-/var/lib/airlock}
CACHE=${AIRLOCK_CACHE_DIR:-/var/cache/airlock}
release=${KERNEL_PKG#linux-image-}
dest="$DATA/kernel/${release}_${KERNEL_VERSION}"
modules="virtio_ring virtio virtio_mmio virtio_blk failover net_failover virtio_net virtio_console virtio-rng"

if [ -f "$dest/kernel.json" ]; then
	echo "kernel: $release ($KERNEL_VERSION) ready in $dest"
else
	mkdir -p "$CACHE/kernel" "$DATA/kernel"
	deb="$CACHE/kernel/${KERNEL_PKG}_${KERNEL_VERSION}_amd64.deb"
	if [ ! -s "$deb" ]; then
		echo "kernel: downloading $KERNEL_PKG=$KERNEL_VERSION"
		tmpd=$(mktemp -d "$CACHE/kernel/dl.XXXXXX")
		# apt-get download writes to the cwd; -q keeps the _apt sandbox warning short.
		if ! (cd "$tmpd" && apt-get download -q "$KERNEL_PKG=$KERNEL_VERSION" 2>&1 | grep -v '^W: Download is performed unsandboxed'); then :; fi
		f=$(ls "$tmpd"/*.deb 2>/dev/null | head -n1 || true)
		if [ -z "$f" ]; then
			rm -rf "$tmpd"
			echo "kernel: cannot download $KERNEL_PKG=$KERNEL_VERSION (apt-get update? is the pin in scripts/versions.env still on the mirror?)" >&2
			exit 1
		fi
		mv "$f" "$deb"
		rm -rf "$tmpd"
	fi
	work=$(mktemp -d "$DATA/kernel/.work.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	echo "kernel: unpacking $(basename "$deb")"
	dpkg-deb -x "$deb" "$work/pkg"
	vmlinuz="$work/pkg/boot/vmlinuz-$release"
	[ -f "$vmlinuz" ] || { echo "kernel: $vmlinuz missing from the package" >&2; exit 1; }
	# PVH boot needs the uncompressed ELF: it sits LZ4-compressed after the 02 21 4C 18 magic.
	off=$(grep -obUaP '\x02\x21\x4c\x18' "$vmlinuz" | head -n1 | cut -d: -f1 || true)
	[ -n "$off" ] || { echo "kernel: no LZ4 payload in $vmlinuz (kernel not LZ4-compressed?)" >&2; exit 1; }
	mkdir -p "$work/out/modules"
	tail -c +$((off + 1)) "$vmlinuz" | lz4 -dc > "$work/out/vmlinux" 2>/dev/null || true
	[ "$(head -c 4 "$work/out/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] ||
		{ echo "kernel: extracted vmlinux is not an ELF" >&2; exit 1; }
	for m in $modules; do
		f=$(find "$work/pkg/lib/modules/$release" -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" | head -n1)
		[ -n "$f" ] || { echo "kernel: module $m not found in $KERNEL_PKG" >&2; exit 1; }
		case "$f" in
		*.xz) xz -dc "$f" > "$work/out/modules/$m.ko" ;;
		*.zst) zstd -qdc "$f" > "$work/out/modules/$m.ko" ;;
		*) cp "$f" "$work/out/modules/$m.ko" ;;
		esac
	done
	cp "$vmlinuz" "$work/out/vmlinuz"
	cat > "$work/out/kernel.json" <<JSON
{"release": "$release", "package": "$KERNEL_PKG", "version": "$KERNEL_VERSION",
 "vmlinux_sha256": "$(sha256sum "$work/out/vmlinux" | cut -d' ' -f1)",
 "modules": "$modules"}
JSON
	rm -rf "$dest"
	mv "$work/out" "$dest"
	echo "kernel: $release ($KERNEL_VERSION) extracted to $dest"
fi
ln -sfn "$(basename "$dest")" "$DATA/kernel/current.tmp"
mv -T "$DATA/kernel/current.tmp" "$DATA/kernel/current"
