#!/usr/bin/env bash
# airlockd serving its API over TLS and the CLI talking https to it:
# tls = ca (certificate minted from the host's root CA, trusted by the CLI
# on this host by itself or through AIRLOCK_CA_FILE), tls = file (an
# operator's certificate), and the refusals: a certificate from a CA the
# client does not trust, plain HTTP on the TLS port, bad tls settings.
# No VM needed. Usage: cli_tls.sh AIRLOCK AIRLOCKD [DATA_ROOT].
set -uo pipefail
airlock=${1:?airlock binary}
airlockd=${2:?airlockd binary}
root=${3:-${AIRLOCK_DATA_DIR:-/var/lib/airlock}}

failures=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n"; fi; }

dir=$root/test-cli-tls-$$
work=$(mktemp -d)
daemon_pid=
stop_daemon() {
	if [ -n "$daemon_pid" ]; then
		kill -TERM "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	daemon_pid=
}
cleanup() {
	stop_daemon
	rm -rf --one-file-system "$dir" "$work"
}
trap cleanup EXIT
mkdir -p "$dir"
for n in kernel templates ca bin; do
	ln -s "$root/$n" "$dir/$n"
done
export AIRLOCK_DATA_DIR=$dir
unset AIRLOCK_API_KEY AIRLOCK_CA_FILE

# start_daemon ENV...: airlockd on a free port with the given settings.
start_daemon() {
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	env "$@" "$airlockd" -c /dev/null --data-dir "$dir" --listen "127.0.0.1:$port" \
		>"$dir/stdout" 2>>"$dir/airlockd.log" &
	daemon_pid=$!
	for _ in $(seq 1 100); do
		grep -q "ready: http" "$dir/stdout" 2>/dev/null && return 0
		kill -0 "$daemon_pid" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}
run() { "$airlock" "$@" >"$work/out" 2>"$work/err"; rc=$?; }

# A CA of our own, and an operator certificate for 127.0.0.1 from it.
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	-keyout "$work/other.key" -out "$work/other.crt" -days 2 -subj "/CN=not the airlock CA" \
	-addext "basicConstraints=critical,CA:TRUE" 2>/dev/null
openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	-keyout "$work/op.key" -out "$work/op.csr" -subj "/CN=operator" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$work/op.ext"
openssl x509 -req -in "$work/op.csr" -CA "$work/other.crt" -CAkey "$work/other.key" \
	-CAcreateserial -days 2 -extfile "$work/op.ext" -out "$work/op.crt" 2>/dev/null

echo "-- tls = ca"
if ! start_daemon AIRLOCK_TLS=ca; then
	fail "airlockd starts with tls = ca"
	tail -20 "$dir/airlockd.log"
	exit 1
fi
check "the ready line says https" grep -q "ready: https://127.0.0.1:$port" "$dir/stdout"
check "the API certificate was minted into DATA/tls (key 0600)" \
	[ -s "$dir/tls/api.crt" ] && [ "$(stat -c %a "$dir/tls/api.key")" = 600 ]
check "the certificate chains to the host's root CA" \
	openssl verify -CAfile "$dir/ca/ca.crt" "$dir/tls/api.crt"
AIRLOCK_URL=https://127.0.0.1:$port run ls --json
check "airlock ls over https (the local CA found by itself)" [ "$rc" -eq 0 ]
check "... and the answer is the sandbox list" grep -q '^\[' "$work/out"
AIRLOCK_URL=https://localhost:$port run ls
check "https://localhost matches the certificate too" [ "$rc" -eq 0 ]
AIRLOCK_URL=https://127.0.0.1:$port AIRLOCK_CA_FILE=$dir/ca/ca.crt run ls
check "AIRLOCK_CA_FILE naming the airlock CA works" [ "$rc" -eq 0 ]
AIRLOCK_URL=https://127.0.0.1:$port AIRLOCK_CA_FILE=$work/other.crt run ls
check "a certificate from a CA the client does not trust is refused" [ "$rc" -ne 0 ]
check "... saying why (TLS) and naming AIRLOCK_CA_FILE" \
	grep -q "TLS with airlockd.*AIRLOCK_CA_FILE" "$work/err"
AIRLOCK_URL=http://127.0.0.1:$port run ls
check "plain HTTP to the TLS port gets no answer from the API" [ "$rc" -ne 0 ]
AIRLOCK_URL=https://127.0.0.1:$port AIRLOCK_CA_FILE=$work/missing.crt run ls
check "a missing AIRLOCK_CA_FILE is a clear error" grep -q "AIRLOCK_CA_FILE $work/missing.crt" "$work/err"
# Below the CLI: a TLS 1.2 client is served (the server's minimum; Debian's
# OpenSSL policy refuses older versions even without it), and HTTP/1.1 is
# the ALPN answer.
check "a TLS 1.2 client is served" sh -c "printf '' | openssl s_client -connect 127.0.0.1:$port \
	-tls1_2 -CAfile $dir/ca/ca.crt -verify_return_error >/dev/null 2>&1"
printf '' | openssl s_client -connect "127.0.0.1:$port" -alpn h2,http/1.1 \
	-CAfile "$dir/ca/ca.crt" 2>/dev/null >"$work/alpn"
check "ALPN picks http/1.1" grep -q "ALPN protocol: http/1.1" "$work/alpn"
stop_daemon

echo "-- tls = file"
if start_daemon AIRLOCK_TLS=file AIRLOCK_TLS_CERT="$work/op.crt" AIRLOCK_TLS_KEY="$work/op.key"; then
	ok "airlockd starts with an operator certificate"
else
	fail "airlockd starts with an operator certificate"
fi
AIRLOCK_URL=https://127.0.0.1:$port AIRLOCK_CA_FILE=$work/other.crt run ls
check "the CLI trusts the operator's CA when told (AIRLOCK_CA_FILE)" [ "$rc" -eq 0 ]
AIRLOCK_URL=https://127.0.0.1:$port run ls
check "... and refuses it otherwise (not the airlock CA, not the system store)" [ "$rc" -ne 0 ]
stop_daemon

echo "-- bad settings"
for bad in "AIRLOCK_TLS=bogus|must be off, ca or file" \
    "AIRLOCK_TLS=file|needs tls_cert and tls_key" \
    "AIRLOCK_TLS=file AIRLOCK_TLS_CERT=$work/op.crt AIRLOCK_TLS_KEY=$work/other.key|tls_key" \
    "AIRLOCK_TLS=off AIRLOCK_TLS_CERT=$work/op.crt|tls = off"; do
	settings=${bad%%|*}
	want=${bad#*|}
	: > "$dir/airlockd.log.bad"
	# shellcheck disable=SC2086
	env $settings "$airlockd" -c /dev/null --data-dir "$dir" --listen 127.0.0.1:0 \
		>/dev/null 2>"$dir/airlockd.log.bad"
	brc=$?
	if [ "$brc" -ne 0 ] && grep -q -- "$want" "$dir/airlockd.log.bad"; then
		ok "airlockd refuses $settings ($want)"
	else
		fail "airlockd refuses $settings ($want): rc $brc, $(tail -2 "$dir/airlockd.log.bad")"
	fi
done

if grep -q -e "ERROR: AddressSanitizer" -e "ERROR: LeakSanitizer" -e "runtime error:" \
    "$dir/airlockd.log"; then
	fail "airlockd ran clean under the sanitizers"
	grep -A20 -e "ERROR: " -e "runtime error:" "$dir/airlockd.log" | head -40
else
	ok "airlockd ran clean under the sanitizers"
fi
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
