#!/usr/bin/env bash
# Create the host's airlock CA once (the gateway mints leaf certificates from
# it; templates trust its certificate). The key never leaves the host: 0600, root.
set -euo pipefail
DATA=${AIRLOCK_DATA_DIR:-/var/lib/airlock}
dir="$DATA/ca"
if [ -s "$dir/ca.key" ] && [ -s "$dir/ca.crt" ]; then
	chmod 0600 "$dir/ca.key"
	echo "ca: $dir/ca.crt present"
	exit 0
fi
mkdir -p "$dir"
chmod 0700 "$dir"
umask 077
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	-keyout "$dir/ca.key.tmp" -out "$dir/ca.crt.tmp" -days 3650 \
	-subj "/O=airlock/CN=airlock sandbox egress CA ($(hostname))" \
	-addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
	-addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
chmod 0600 "$dir/ca.key.tmp"
chmod 0644 "$dir/ca.crt.tmp"
mv "$dir/ca.key.tmp" "$dir/ca.key"
mv "$dir/ca.crt.tmp" "$dir/ca.crt"
echo "ca: created $dir/ca.crt (key $dir/ca.key, mode 0600)"
