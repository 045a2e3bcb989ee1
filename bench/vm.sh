#!/usr/bin/env bash
# VM engine benchmarks: cold boot, restore, pause/resume, VMM memory.
# Medians and p90 over RUNS (default 20) go to bench/results/vm.md.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results
build/bench/bench_vm -n "${RUNS:-20}" | tee bench/results/vm.md
