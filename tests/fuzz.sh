#!/usr/bin/env bash
# Run every libFuzzer harness in BUILD/fuzz. Mode "smoke": a bounded run per
# harness for make check (20000 inputs, at most 60 s), printing "pass|fail
# fuzz:NAME". A number: seconds per harness for real fuzzing (make fuzz),
# crashes kept in fuzz/crashes/. Seeds come from fuzz/corpus/NAME/, and
# fuzz/dict/NAME.dict is passed as -dict= when it exists.
set -uo pipefail
build=${1:?build dir}
mode=${2:-smoke}
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$top/fuzz/crashes"
for h in "$build"/fuzz/fuzz_*; do
	[ -f "$h" ] && [ -x "$h" ] || continue
	name=$(basename "$h")
	seeds="$top/fuzz/corpus/${name#fuzz_}"
	work=$(mktemp -d)
	[ -d "$seeds" ] && cp -r "$seeds"/. "$work"/ 2>/dev/null
	if [ "$mode" = smoke ]; then
		args=(-runs=20000 -max_total_time=60 -max_len=65536)
	else
		args=(-max_total_time="$mode" -max_len=65536)
	fi
	dict="$top/fuzz/dict/${name#fuzz_}.dict"
	[ -f "$dict" ] && args+=(-dict="$dict")
	if "$h" "${args[@]}" -artifact_prefix="$top/fuzz/crashes/$name-" "$work" >"$work.log" 2>&1; then
		echo "pass fuzz:$name"
		[ "$mode" != smoke ] && tail -n 3 "$work.log" >&2
	else
		echo "fail fuzz:$name"
		tail -n 30 "$work.log" >&2
	fi
	rm -rf "$work" "$work.log"
done
