#!/bin/sh
# The test internet (see testnet.py): testnet.sh up|down|status|env
exec python3 "$(dirname "$0")/testnet.py" "$@"
