#!/usr/bin/env bash
# make bench: run every benchmark; results go to bench/results/<name>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results
python3 bench/api_bench.py --airlockd build/src/airlockd/airlockd > bench/results/api.json
python3 bench/e2b_bench.py --airlockd build/src/airlockd/airlockd > bench/results/e2b.json
python3 bench/gateway.py > bench/results/gateway.json
python3 bench/gateway_scale.py > bench/results/gateway_scale.json
for b in bench/*.sh; do
	[ "$(basename "$b")" = run.sh ] && continue
	bash "$b"
done
