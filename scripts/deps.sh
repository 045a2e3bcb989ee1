#!/usr/bin/env bash
# Install the Debian packages in scripts/packages.txt. Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")"
[ "$(id -u)" = 0 ] || { echo "deps.sh: run as root (apt-get install)" >&2; exit 1; }
mapfile -t pkgs < <(sed 's/#.*//' packages.txt | tr ' ' '\n' | sed '/^$/d')
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# node/npm may come from elsewhere (nvm, the image); do not fight them.
if command -v node >/dev/null && command -v npm >/dev/null; then
	missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
# kubectl renders the kustomizations of deploy/ (tests/deploy). Debian's is
# kubernetes-client; a kubectl from elsewhere (the `kubectl` package of
# pkgs.k8s.io, a cloud SDK) owns /usr/bin/kubectl too, so Debian's is
# installed only when no kubectl that renders is there.
if ! kubectl kustomize --help >/dev/null 2>&1; then
	missing+=(kubernetes-client)
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sed '/^$/d')
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#pkgs[@]} packages present"
	exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
