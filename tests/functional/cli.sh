#!/usr/bin/env bash
# The airlock CLI end to end against a real airlockd and real microVMs:
# every daemon-facing command, its output, its exit code, and its errors.
# The daemon gets a private data dir (kernel, templates, ca, bin shared
# read-only by symlink), a free port and its own admin key, which the CLI
# finds through AIRLOCK_DATA_DIR as it would on a host.
# Usage: cli.sh AIRLOCK AIRLOCKD [DATA_ROOT]. Exits 77 (skip) only when
# the daemon binary is not built. CLI_ONLY=1 stops after the sections that
# need no VM (secrets, audit).
set -uo pipefail
airlock=${1:?airlock binary}
airlockd=${2:?airlockd binary}
root=${3:-${AIRLOCK_DATA_DIR:-/var/lib/airlock}}
if [ ! -x "$airlockd" ]; then
	echo "skip: $airlockd is not built"
	exit 77
fi

failures=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# check NAME CMD...: CMD must succeed. expect NAME 'CONDITION': a shell
# condition (evaluated at the call, so quote it with single quotes).
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n"; fi; }
expect() { local n=$1; shift; if eval "$*"; then ok "$n"; else fail "$n"; fi; }

dir=$root/test-cli-$$
work=$(mktemp -d)
daemon_pid=
cleanup() {
	if [ -n "$daemon_pid" ]; then
		kill -TERM "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	rm -rf --one-file-system "$dir" "$work"
	# A remote template build that a failure left behind (templates are shared).
	[ -z "${tb:-}" ] || rm -rf --one-file-system "$root/templates/$tb"
}
trap cleanup EXIT
mkdir -p "$dir"
for n in kernel templates ca bin; do
	ln -s "$root/$n" "$dir/$n"
done

# A free port: bind 0, read it back, release it for the daemon.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
AIRLOCK_DATA_DIR=$dir "$airlockd" -c /dev/null --data-dir "$dir" --listen "127.0.0.1:$port" \
	>"$dir/stdout" 2>"$dir/airlockd.log" &
daemon_pid=$!
for _ in $(seq 1 100); do
	grep -q "ready: http" "$dir/stdout" 2>/dev/null && break
	kill -0 "$daemon_pid" 2>/dev/null || break
	sleep 0.1
done
if ! grep -q "ready: http" "$dir/stdout"; then
	echo "FAIL: airlockd did not start"
	tail -20 "$dir/airlockd.log"
	exit 1
fi
export AIRLOCK_URL=http://127.0.0.1:$port AIRLOCK_DATA_DIR=$dir
unset AIRLOCK_API_KEY

# Stop the daemon, check its log for sanitizer reports, and report.
finish() {
	kill -TERM "$daemon_pid"
	wait "$daemon_pid" 2>/dev/null
	daemon_pid=
	if grep -q -e "ERROR: AddressSanitizer" -e "ERROR: LeakSanitizer" -e "runtime error:" \
	    "$dir/airlockd.log"; then
		fail "airlockd ran clean under the sanitizers"
	fi
	if [ "$failures" -gt 0 ]; then
		echo "airlockd log tail:"
		tail -30 "$dir/airlockd.log"
	fi
	echo "$failures failure(s)"
	[ "$failures" -eq 0 ]
}

# run NAME: run the rest, keeping stdout, stderr and the exit code.
run() { "$airlock" "$@" >"$work/out" 2>"$work/err"; rc=$?; }
out() { cat "$work/out"; }
err() { cat "$work/err"; }
json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }

echo "-- no daemon, no sandboxes"
AIRLOCK_URL=http://127.0.0.1:1 "$airlock" ls >/dev/null 2>"$work/err"
check "daemon not running: exit 1 and a hint" [ $? -eq 1 ]
check "daemon not running: the hint names make up" grep -q "is it running? (make up)" "$work/err"
run ls --json
check "ls --json on an empty daemon is []" [ "$rc" -eq 0 -a "$(out | tr -d ' \n')" = "[]" ]
run template ls
check "template ls through the API lists base" grep -q "^base " "$work/out"

echo "-- secrets"
value="cli-s3cr3t-$$-$RANDOM"
printf '%s\n' "$value" | "$airlock" secret set CLI_TOKEN --host api.example.com \
	--host '*.example.org' >"$work/out" 2>"$work/err"
rc=$?
check "secret set from stdin" [ "$rc" -eq 0 ]
check "secret set says what it created" grep -q "^created secret CLI_TOKEN (project default) for api.example.com \*.example.org$" "$work/out"
printf '%s' "$value-2" >"$work/value"
run secret set CLI_TOKEN --host api.example.com --header X-Api-Key --format '{value}' \
	--value-file "$work/value" --json
check "secret set --value-file --json replaces it, metadata only" [ "$rc" -eq 0 -a \
	"$(out | json_field '["header"]')" = X-Api-Key -a "$(out | json_field '.get("value")')" = None ]
run secret set CLI_TOKEN </dev/null
check "secret set without --host is a usage error" [ "$rc" -eq 2 ]
run secret set CLI_TOKEN --host api.example.com </dev/null
expect "secret set with an empty value: exit 1, says so" '[ "$rc" -eq 1 ] && grep -q empty "$work/err"'
printf 'x' | "$airlock" secret set bad-name --host api.example.com >"$work/out" 2>"$work/err"
rc=$?
expect "secret set with a bad name: exit 1, the API names the field" \
	'[ "$rc" -eq 1 ] && grep -q "name: must match" "$work/err"'
printf 'x' | "$airlock" secret set OTHER --host https://api.example.com/ >"$work/out" 2>"$work/err"
rc=$?
expect "secret set with a bad host: exit 1, the API names it" \
	'[ "$rc" -eq 1 ] && grep -q "hosts\[0\]" "$work/err"'
run secret ls
check "secret ls shows the secret" grep -q "^CLI_TOKEN  *project  *default  *api.example.com  *X-Api-Key" "$work/out"
run secret ls --json
check "secret ls --json" [ "$(out | json_field '[0]["name"]')" = CLI_TOKEN ]
run secret ls --scope global --json
check "secret ls --scope global is empty" [ "$(out | tr -d ' \n')" = "[]" ]
run secret ls --scope nowhere
expect "secret ls with a bad scope: exit 1, the API's message" \
	'[ "$rc" -eq 1 ] && grep -q "scope: must be" "$work/err"'
run secret rm CLI_TOKEN
check "secret rm" [ "$rc" -eq 0 -a "$(out)" = "removed secret CLI_TOKEN" ]
run secret rm CLI_TOKEN
expect "secret rm again: exit 1, not found" '[ "$rc" -eq 1 ] && grep -q "not found" "$work/err"'
expect "the value never appears in any output or the daemon log" \
	'! grep -rqF "$value" "$work" "$dir/airlockd.log" --exclude=value'

echo "-- audit"
mkdir -p "$dir/audit"
cat >"$dir/audit/audit.log" <<'EOF2'
{"time":"2001-02-03T04:00:01.000Z","sandbox":"clisbxaaaaaaaaaaaaa1","kind":"dns","qname":"a.example.com","decision":"allow","rule":"a.example.com"}
not json
{"time":"2001-02-03T04:00:02.000Z","sandbox":"clisbxaaaaaaaaaaaaa1","kind":"http","host":"evil.example.com","port":443,"decision":"deny","reason":"host not allowed"}
EOF2
run audit --json --until 2001-02-04T00:00:00Z
check "audit --json: the records, newest first" [ "$rc" -eq 0 -a \
	"$(out | python3 -c 'import json,sys; print([r["kind"] for r in json.load(sys.stdin)])')" = "['http', 'dns']" ]
run audit --decision deny --sandbox clisbxaaaaaaaaaaaaa1 --limit 5 --json
check "audit --decision deny" [ "$(out | json_field '[0]["reason"]')" = "host not allowed" -a \
	"$(out | json_field '.__len__()')" = 1 ]
run audit --until 2001-02-04T00:00:00Z
check "audit table: host:port, decision and reason" \
	grep -q "^2001-02-03T04:00:02.000Z  *clisbxaaaaaaaaaaaaa1 http evil.example.com:443  *deny  *host not allowed" "$work/out"
check "audit table: a DNS decision names the query" grep -q "dns  *a.example.com  *allow" "$work/out"
run audit --since 1h --json
check "audit --since 1h: nothing that old" [ "$rc" -eq 0 -a "$(out | tr -d ' \n')" = "[]" ]
run audit --decision maybe
check "audit --decision maybe is a usage error" [ "$rc" -eq 2 ]
run audit --since yesterday
expect "audit --since yesterday: exit 1, the API names the parameter" \
	'[ "$rc" -eq 1 ] && grep -q "since: must be" "$work/err"'
echo "-- template build through the API"
tb=cli-tb-$$
# base's recipe with a smaller disk: the same debootstrap key, so the cached tree is reused.
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["disk_size_mb"]=1024; json.dump(r, sys.stdout)' \
	"$(dirname "$0")/../../images/base.json" >"$work/tb-good.json"
echo '{"from":{"distro":"debian","suite":"bookworm"},"pakages":["bash"]}' >"$work/tb-field.json"
echo '{"from":{"distro":"debian","suite":"bookworm"},"files":[{"src":"x","dst":"/etc/x"}]}' \
	>"$work/tb-files.json"
echo '{"from":' >"$work/tb-json.json"
run template build "$tb" --recipe "$work/tb-field.json" --remote
expect "remote build of a bad recipe: exit 1, the field named" \
	'[ "$rc" -eq 1 ] && grep -q "template $tb: .*unknown field \"pakages\"" "$work/err"'
run template build "$tb" --recipe "$work/tb-files.json" --remote
expect "remote build with files: refused (400), said clearly, --local suggested" \
	'[ "$rc" -eq 1 ] && grep -q "recipe.files: not accepted over the API" "$work/err" &&
	 grep -q -- "--local" "$work/err"'
run template build "$tb" --recipe "$work/tb-json.json" --remote
expect "remote build of broken JSON: exit 1, line and column" \
	'[ "$rc" -eq 1 ] && grep -q "line 2 column 0" "$work/err"'
run template build "$tb" --recipe "$work/tb-good.json" --remote --agent /bin/true
check "remote build with --agent is a usage error" [ "$rc" -eq 2 ]
# Not root: remote by default (the key from the environment; nobody cannot read admin.key).
chmod 755 "$work"
chmod 644 "$work/tb-files.json"
AIRLOCK_API_KEY=$(cat "$dir/admin.key") setpriv --reuid 65534 --regid 65534 --clear-groups \
	"$airlock" template build "$tb" --recipe "$work/tb-files.json" >"$work/out" 2>"$work/err"
rc=$?
expect "not root: the build goes to the API" \
	'[ "$rc" -eq 1 ] && grep -q "recipe.files: not accepted over the API" "$work/err"'
run template build "$tb" --recipe "$work/tb-good.json" --remote --json
expect "remote build: exit 0, the template as JSON" \
	'[ "$rc" -eq 0 ] && [ "$(out | json_field "[\"name\"]")" = "$tb" ]'
expect "remote build: progress lines for every step (on stderr with --json)" \
	'grep -q "^\[7/7\] " "$work/err" && grep -q "built in .*on airlockd at" "$work/err"'
[ "$rc" -eq 0 ] || { err; tail -5 "$dir/airlockd.log"; }
run template ls
check "template ls lists the remote build" grep -q "^$tb " "$work/out"
run template rm "$tb"
check "template rm removes it" [ "$rc" -eq 0 ]

if [ -n "${CLI_ONLY:-}" ]; then
	finish
	exit $?
fi

echo "-- create"
run create --meta t=cli --env GREETING=hello --timeout 3600
sid=$(out)
check "create prints the id (admin key from the data dir)" [ "$rc" -eq 0 -a -n "$sid" ]
if [ "$rc" -ne 0 ]; then
	err
	echo "cannot go on without a sandbox"
	# A failed create leaves a failed sandbox: delete it so nothing leaks.
	for s in $("$airlock" ls --json | python3 -c \
	    'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)))'); do
		"$airlock" rm "$s" >/dev/null
	done
	tail -20 "$dir/airlockd.log"
	exit 1
fi
run get "$sid"
check "get shows it running" grep -q "^state *running" "$work/out"
run get --json "$sid"
check "get --json" [ "$(out | json_field '["metadata"]["t"]')" = cli ]
run ls
check "ls lists it" grep -q "^$sid *running" "$work/out"
run ls --state paused --json
check "ls --state filters" [ "$(out | tr -d ' \n')" = "[]" ]
run create --network bogus
check "create --network bogus is a usage error" [ "$rc" -eq 2 ]
run create --template nosuchtemplate
check "create with an unknown template: exit 1, the API's message" \
	[ "$rc" -eq 1 -a -n "$(grep '^airlock: ' "$work/err")" ]

echo "-- exec"
run exec "$sid" -- echo hi
check "exec echo hi" [ "$rc" -eq 0 -a "$(out)" = hi ]
run exec "$sid" -- python3 -c 'print(1)'
check "exec python3 (the README's example)" [ "$rc" -eq 0 -a "$(out)" = 1 ]
run exec "$sid" -- sh -c 'exit 3'
check "exec exit 3 exits 3" [ "$rc" -eq 3 ]
run exec "$sid" -- sh -c 'echo out; echo err >&2'
check "exec splits stdout and stderr" [ "$(out)" = out -a "$(err)" = err ]
run exec "$sid" -- sh -c 'kill -9 $$'
check "exec killed by SIGKILL exits 137" [ "$rc" -eq 137 ]
run exec --env X=42 "$sid" -- sh -c 'echo $X $GREETING'
check "exec --env and the sandbox env" [ "$(out)" = "42 hello" ]
run exec --user root "$sid" -- id -un
check "exec --user root" [ "$(out)" = root ]
run exec --cwd /tmp "$sid" -- pwd
check "exec --cwd" [ "$(out)" = /tmp ]
head -c 200000 /dev/urandom >"$work/stdin.bin"
"$airlock" exec -i "$sid" -- cat <"$work/stdin.bin" >"$work/stdin.out" 2>"$work/err"
check "exec -i forwards stdin and its EOF" cmp -s "$work/stdin.bin" "$work/stdin.out"
run exec "$sid" -- /no/such/program
check "exec of a missing program fails with 127 or 126" [ "$rc" -eq 127 -o "$rc" -eq 126 ]
run exec nosuchsandbox -- true
expect "exec in a missing sandbox: 255 and not found" '[ "$rc" -eq 255 ] && grep -q "not found" "$work/err"'
timeout 60 "$airlock" exec "$sid" -- yes 2>"$work/err" | head -1 >"$work/out"
check "exec into a pipe that closes ends" [ "$(out)" = y ]
sleep 1
run exec "$sid" -- sh -c \
	'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = yes ] && echo $p; done; true'
check "... and stops the command in the sandbox" [ "$rc" -eq 0 -a -z "$(out)" ]
# Two Ctrl-C detach (the command ignores the forwarded signal); ps shows it,
# attach follows it to its exit code.
"$airlock" exec "$sid" -- sh -c 'trap "" INT TERM; sleep 4; echo finished; exit 6' \
	>"$work/out" 2>"$work/err" &
bg=$!
sleep 2
kill -INT "$bg"
sleep 0.5
kill -INT "$bg"
wait "$bg"
rc=$?
pid=$(sed -n 's/.*(airlock attach [^ ]* \([0-9]*\)).*/\1/p' "$work/err")
expect "a second Ctrl-C detaches (130) and says how to attach" '[ "$rc" -eq 130 -a -n "$pid" ]'
run ps "$sid"
check "ps lists the detached process" grep -q "sleep 4" "$work/out"
run attach "$sid" "${pid:-0}"
check "attach follows it to its output and exit code" [ "$rc" -eq 6 -a "$(out)" = finished ]
echo 'echo $((6 * 7))' | "$airlock" shell "$sid" >"$work/out" 2>"$work/err"
check "shell reads commands from a pipe" grep -qx 42 "$work/out"

echo "-- cp"
head -c 3000000 /dev/urandom >"$work/data.bin"
chmod 640 "$work/data.bin"
run cp "$work/data.bin" "$sid:/home/user/data.bin"
check "cp up" [ "$rc" -eq 0 ]
run cp "$sid:/home/user/data.bin" "$work/back.bin"
check "cp down, byte for byte" cmp -s "$work/data.bin" "$work/back.bin"
run exec "$sid" -- stat -c %a /home/user/data.bin
check "cp keeps the mode" [ "$(out)" = 640 ]
run cp "$work/data.bin" "$sid:/tmp/"
expect "cp into a directory keeps the name" \
	'[ "$rc" -eq 0 ] && "$airlock" exec "$sid" -- test -f /tmp/data.bin'
mkdir "$work/dl"
run cp "$sid:/home/user/data.bin" "$work/dl"
check "cp down into a directory" cmp -s "$work/data.bin" "$work/dl/data.bin"
run cp "$sid:/no/such/file" "$work/dl/missing"
check "cp of a missing file: exit 1, nothing left behind" \
	[ "$rc" -eq 1 -a "$(ls "$work/dl" | wc -l)" -eq 1 ]
echo hello | "$airlock" cp - "$sid:/tmp/from-stdin" 2>"$work/err"
"$airlock" cp "$sid:/tmp/from-stdin" - >"$work/out" 2>>"$work/err"
check "cp from stdin and to stdout" [ "$(out)" = hello ]

echo "-- lifecycle"
run exec "$sid" -- sh -c 'echo kept > /home/user/state'
run pause "$sid"
check "pause" [ "$rc" -eq 0 -a "$(out)" = "paused $sid" ]
run exec "$sid" -- true
expect "exec on a paused sandbox: 255 and the state in the message" \
	'[ "$rc" -eq 255 ] && grep -q paused "$work/err"'
run resume "$sid"
check "resume" [ "$rc" -eq 0 ]
run suspend "$sid"
expect "suspend" '[ "$rc" -eq 0 ] && "$airlock" get "$sid" | grep -q "^state *suspended"'
run resume "$sid"
check "resume from suspended" [ "$rc" -eq 0 ]
run exec "$sid" -- cat /home/user/state
check "files survive suspend and resume" [ "$(out)" = kept ]
run logs "$sid"
check "logs prints the console" [ "$rc" -eq 0 -a -s "$work/out" ]
timeout 5 "$airlock" events --after 0 "$sid" >"$work/out" 2>"$work/err"
check "events replays the sandbox's events" grep -q " created" "$work/out"
timeout 5 "$airlock" events --json --after 0 >"$work/out" 2>"$work/err"
check "events --json: one JSON object per line" \
	python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$work/out"

echo "-- keys"
run key create cli-test
key=$(out)
check "key create prints the key" [ "$rc" -eq 0 -a -n "$key" ]
run key ls
check "key ls lists it" grep -q cli-test "$work/out"
AIRLOCK_API_KEY=$key "$airlock" key ls >/dev/null 2>"$work/err"
check "a user key cannot list keys (exit 1)" [ $? -eq 1 ]
AIRLOCK_API_KEY=$key "$airlock" get "$sid" >/dev/null 2>&1
check "a user key in the same project sees the sandbox" [ $? -eq 0 ]
AIRLOCK_API_KEY=al_bogus "$airlock" ls >/dev/null 2>"$work/err"
rc=$?
expect "an unknown key: exit 1 and where the key came from" \
	'[ "$rc" -eq 1 ] && grep -q AIRLOCK_API_KEY "$work/err"'
kid=$("$airlock" key ls --json | python3 -c \
	'import json,sys; print([k["id"] for k in json.load(sys.stdin) if k["name"] == "cli-test"][0])')
run key rm "$kid"
check "key rm" [ "$rc" -eq 0 ]

echo "-- rm"
run rm "$sid"
check "rm" [ "$rc" -eq 0 -a "$(out)" = "removed $sid" ]
run get "$sid"
expect "get after rm: exit 1, not found" '[ "$rc" -eq 1 ] && grep -q "not found" "$work/err"'

finish
