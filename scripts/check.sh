#!/usr/bin/env bash
# make check: install what tests need, build (release + ASan/UBSan + fuzz),
# prepare the host, run every test, print "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
cd "$top"
results=$(mktemp)
trap 'rm -f "$results"' EXIT

step() { printf '\n== %s\n' "$*"; }
fail_setup() { echo "check: $*" >&2; echo "0 passed, 1 failed"; exit 1; }

step "dependencies"
bash scripts/deps.sh || fail_setup "installing dependencies failed"
step "build (release, asan+ubsan, fuzz)"
make --no-print-directory build || fail_setup "release build failed"
make --no-print-directory build-asan || fail_setup "sanitizer build failed"
make --no-print-directory build-fuzz || fail_setup "fuzz build failed"
step "prepare host (data dir, kernel, CA, initramfs, base template)"
bash scripts/prepare.sh || fail_setup "host preparation failed"

step "tests (ASan+UBSan build)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
meson test -C build-asan --print-errorlogs --no-rebuild ${MESON_TEST_ARGS:-}
python3 - build-asan/meson-logs/testlog.json >> "$results" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    ok = t["result"] in ("OK", "EXPECTEDFAIL")
    skip = t["result"] == "SKIP"
    print(("skip" if skip else "pass" if ok else "fail"), "meson:" + t["name"])
PY

step "fuzz smoke (each harness over its corpus plus random inputs)"
bash tests/fuzz.sh build-fuzz smoke >> "$results"

passed=$(grep -c '^pass' "$results")
failed=$(grep -c '^fail' "$results")
# A run that executed nothing (a killed meson, an empty fuzz build) is a failure.
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
	echo "check: no test ran" >&2
	failed=1
fi
skipped=$(grep -c '^skip' "$results")
if [ "$failed" -gt 0 ]; then
	# CI keeps only the tail of the output: repeat each failed test's last
	# lines here, then, last of all, a compact digest of the failing checks
	# (lines that say FAIL) and the list, where even a short tail keeps them.
	python3 - build-asan/meson-logs/testlog.json "$results" <<'PY'
import json, re, sys
failed = []
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t["result"] in ("OK", "EXPECTEDFAIL", "SKIP"):
        continue
    out = (t.get("stdout") or "") + (t.get("stderr") or "")
    lines = [l for l in out.splitlines() if l.strip()]
    failed.append((t["name"], t["result"], lines))
    print("\n--- %s (%s), last lines:" % (t["name"], t["result"]))
    for l in lines[-25:]:
        print("    " + l[:300])
print("\n== digest of the failures")
for name, result, lines in failed:
    bad = [l for l in lines if re.search(r"\bFAIL|CHECK failed|not ok|ERROR|Assertion|AddressSanitizer", l)]
    print("%s (%s): %d failing line(s)" % (name, result, len(bad)))
    for l in bad[:6]:
        print("    " + l.strip()[:200])
print("failed:")
for l in open(sys.argv[2]):
    if l.startswith("fail"):
        print("  " + l[5:].rstrip())
PY
fi
echo
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
