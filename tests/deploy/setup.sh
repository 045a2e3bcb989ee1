#!/usr/bin/env bash
# node_modules for validate.mjs exactly as package-lock.json says
# (kubernetes-models 5.1.0, ajv), installed once per lockfile under
# $AIRLOCK_CACHE_DIR/npm/deploy-<lockfile sha256>/, outside the repository:
# a fresh clone (CI) finds it there and runs no npm at all. Prints that
# directory. npm itself keeps its download cache as usual (~/.npm).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${AIRLOCK_CACHE_DIR:-/var/cache/airlock}/npm
sha=$(sha256sum "$here/package-lock.json" | cut -c1-16)
dir=$cache/deploy-$sha
if [ ! -f "$dir/.complete" ]; then
	command -v npm >/dev/null || { echo "setup: npm missing (scripts/deps.sh installs it)" >&2; exit 1; }
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.deploy-$sha.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	cp "$here/package.json" "$here/package-lock.json" "$tmp/"
	# kubernetes-models declares node >= 22; its validators are ES2022 and
	# run on Debian 12's node 18 too (checked), so the engine warning is noise.
	(cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error >&2)
	touch "$tmp/.complete"
	# Another run may have won the race: its copy is the same.
	mv -T "$tmp" "$dir" 2>/dev/null || true
	# Installs for older lockfiles are of no use any more.
	find "$cache" -maxdepth 1 -name 'deploy-*' ! -name "deploy-$sha" -exec rm -rf {} + 2>/dev/null || true
fi
echo "$dir"
