#!/usr/bin/env bash
# Template builds: a good recipe builds with per-step progress; broken recipes
# (unknown field, missing package, bad path, run steps built locally) fail with an error
# naming the field, and the previous template of that name stays intact.
# Usage: template_build.sh AIRLOCK_CLI SOURCE_ROOT
set -uo pipefail
cli=$1
src=$2
name=test-tb-$$
work=$(mktemp -d)
data=${AIRLOCK_DATA_DIR:-/var/lib/airlock}
failed=0
trap '"$cli" template rm "$name" >/dev/null 2>&1; rm -rf "$work"' EXIT

check() { # description, command...
	local d=$1; shift
	if "$@"; then echo "ok: $d"; else echo "FAIL: $d"; failed=1; fi
}
# Build must fail and its error must contain the needle.
expect_fail() { # recipe-file needle
	local out
	if out=$("$cli" template build "$name" --recipe "$1" 2>&1); then
		echo "FAIL: $(basename "$1") built but should fail"; failed=1; return
	fi
	if grep -qF -- "$2" <<<"$out"; then
		echo "ok: $(basename "$1") rejected with \"$2\""
	else
		echo "FAIL: $(basename "$1"): error lacks \"$2\":"; echo "$out"; failed=1
	fi
}

# A good build (the debootstrap tree of base is cached by make prepare).
cp "$src/images/base.json" "$work/good.json"
out=$("$cli" template build "$name" --recipe "$work/good.json" 2>&1)
rc=$?
echo "$out"
check "good recipe builds" [ $rc -eq 0 ]
check "progress shows every step" grep -q '^\[7/7\]' <<<"$out"
meta="$data/templates/$name/template.json"
check "template.json written" [ -s "$meta" ]
check "image is sparse" python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); sys.exit(0 if m["image_allocated_bytes"] < m["image_size_bytes"]//2 else 1)' "$meta"
before=$(sha256sum "$meta" "$data/templates/$name/rootfs.ext4" | cut -d' ' -f1)

cat > "$work/unknown-field.json" <<'J'
{"from":{"distro":"debian","suite":"bookworm"},"pakages":["bash"]}
J
expect_fail "$work/unknown-field.json" 'unknown field "pakages"'
cat > "$work/bad-path.json" <<'J'
{"from":{"distro":"debian","suite":"bookworm"},"files":[{"src":"does-not-exist.txt","dst":"/etc/x"}]}
J
expect_fail "$work/bad-path.json" 'files[0].src'
cat > "$work/bad-dst.json" <<'J'
{"from":{"distro":"debian","suite":"bookworm"},"files":[{"src":"bad-dst.json","dst":"/etc/../../x"}]}
J
expect_fail "$work/bad-dst.json" 'files[0].dst'
cat > "$work/run-steps.json" <<'J'
{"from":{"distro":"debian","suite":"bookworm"},"run":["apt-get install -y vim"]}
J
# Run steps execute only in airlockd's build VM (test_template_steps.py): a
# local build refuses them, naming where they run.
if out=$("$cli" template build "$name" --recipe "$work/run-steps.json" --local 2>&1); then
	echo "FAIL: run-steps.json built locally"; failed=1
elif grep -qF 'run steps execute only inside a build microVM that airlockd hosts' <<<"$out"; then
	echo "ok: run-steps.json refused locally, pointing at airlockd"
else
	echo "FAIL: run-steps.json: $out"; failed=1
fi
cat > "$work/missing-package.json" <<'J'
{"from":{"distro":"debian","suite":"bookworm"},"packages":["bash","airlock-no-such-package"]}
J
AIRLOCK_CACHE_DIR="$work/cache" expect_fail "$work/missing-package.json" 'packages: not found in the distribution: airlock-no-such-package'

after=$(sha256sum "$meta" "$data/templates/$name/rootfs.ext4" | cut -d' ' -f1)
check "previous template intact after failed builds" [ "$before" = "$after" ]
check "no build scratch left behind" [ -z "$(ls -A "$data/build" 2>/dev/null | grep "^$name")" ]
check "template ls lists it" grep -q "$name" <<<"$("$cli" template ls)"
check "template rm removes it" "$cli" template rm "$name"
check "gone after rm" [ ! -e "$data/templates/$name" ]
exit $failed
