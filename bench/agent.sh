#!/usr/bin/env bash
# Agent channel latency (tiny exec round trip, PING, /health), agent on the
# host and in a TCG microVM. Results go to bench/results/agent.md.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results
{
	build/bench/bench_agent -n "${RUNS:-200}" --host build/src/guest/agent/airlock-agent-host \
		build/src/link/airlock-agentctl
	echo
	build/bench/bench_agent -n "${RUNS:-200}" build/src/link/airlock-agentctl
} | tee bench/results/agent.md
