#!/usr/bin/env bash
# Restore paths of fast create Tier 1: full restore vs restore into a spare
# VMM, snapshot time, idle spare memory. Medians and p90 over RUNS (default
# 20) go to bench/results/spare.md.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results
build/bench/bench_spare -n "${RUNS:-20}" -s "${SPARES:-4}" | tee bench/results/spare.md
