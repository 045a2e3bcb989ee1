#!/bin/sh
# The worker's initContainer (deploy/kubernetes/base/worker.yaml): the
# repository's scripts/prepare.sh as installed in the image, with the same
# environment as the worker. It fills the data dir when something is
# missing: the pinned guest kernel, the host CA, the guest binaries, the
# initramfs and the base template (seconds when all are present; minutes
# the first time on a node, with egress to the Debian mirror).
set -eu
share=/usr/local/share/airlock
. "$share/scripts/versions.env"
data=${AIRLOCK_DATA_DIR:-/var/lib/airlock}
cache=${AIRLOCK_CACHE_DIR:-/var/cache/airlock}
# kernel.sh downloads the kernel with apt-get, and the image carries no
# package lists: fetch them only when it will download (its paths, below).
release=${KERNEL_PKG#linux-image-}
if [ ! -f "$data/kernel/${release}_$KERNEL_VERSION/kernel.json" ] &&
   [ ! -s "$cache/kernel/${KERNEL_PKG}_${KERNEL_VERSION}_amd64.deb" ]; then
	apt-get update -q >/dev/null
fi
exec bash "$share/scripts/prepare.sh"
