#!/usr/bin/env bash
# Create the host's airlock root CA once. airlockd mints the gateway's
# intermediate issuer from it (the gateway never sees this key); templates
# trust this certificate. The key never leaves the host: 0600, root.
set -euo pipefail
DATA=${AIRLOCK_DATA_DIR:-/var/lib/airlock}
dir="$DATA/ca"
if [ -s "$dir/ca.key" ] && [ -s "$dir/ca.crt" ]; then
	# The gateway's leaf issuer is an intermediate below this root: a root
	# from before that (pathlen:0) cannot sign it and is replaced; templates
	# trusting the old one are rebuilt by prepare.sh (ca_sha256).
	if openssl x509 -in "$dir/ca.crt" -noout -ext basicConstraints 2>/dev/null | grep -q 'pathlen:0'; then
		echo "ca: $dir/ca.crt cannot sign an intermediate (pathlen:0); replacing it"
		rm -f "$dir/gateway.crt" "$dir/gateway.key"
	else
		chmod 0600 "$dir/ca.key"
		echo "ca: $dir/ca.crt present"
		exit 0
	fi
fi
mkdir -p "$dir"
chmod 0700 "$dir"
umask 077
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	-keyout "$dir/ca.key.tmp" -out "$dir/ca.crt.tmp" -days 3650 \
	-subj "/O=airlock/CN=airlock sandbox egress CA ($(hostname))" \
	-addext "basicConstraints=critical,CA:TRUE,pathlen:1" \
	-addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
chmod 0600 "$dir/ca.key.tmp"
chmod 0644 "$dir/ca.crt.tmp"
mv "$dir/ca.key.tmp" "$dir/ca.key"
mv "$dir/ca.crt.tmp" "$dir/ca.crt"
echo "ca: created $dir/ca.crt (key $dir/ca.key, mode 0600)"
