#!/usr/bin/env bash
# make up: install, build, prepare the host, then run the daemon in the foreground.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
bash "$here/deps.sh"
make -C "$top" --no-print-directory build
bash "$here/prepare.sh"
AIRLOCK=$top/build/src/cli/airlock
"$AIRLOCK" doctor || true
if [ -x "$top/build/src/airlockd/airlockd" ]; then
	# Serve the base template from a warm pool sized to the host (docs/architecture.md
	# "Create tiers"); AIRLOCK_POOL=none turns it off, AIRLOCK_POOL=base=N sizes it.
	export AIRLOCK_POOL=${AIRLOCK_POOL:-auto}
	exec "$top/build/src/airlockd/airlockd" "$@"
fi
# Until the daemon lands: prove the host runs sandboxes by booting the base template.
echo
echo "airlockd is not built yet; booting the base template to show the host works."
exec "$AIRLOCK" boot --template base --keep
