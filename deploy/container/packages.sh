#!/bin/sh
# Print the Debian packages of one section of scripts/packages.txt, one a
# line: the Containerfile installs section "build" in its build stage and
# section "run" in the image. Every comment line of its own starts a
# section, named by its first word ("# run: VM engine, ..." is "run").
# Usage: packages.sh SECTION [PACKAGES_TXT]
set -eu
section=$1
file=${2:-scripts/packages.txt}
awk -v want="$section" '
	/^#/ { name = $2; sub(/[:(].*$/, "", name); insec = (name == want); next }
	insec { sub(/#.*/, ""); for (i = 1; i <= NF; i++) print $i }
' "$file" | grep . || { echo "packages.sh: no packages in section \"$section\" of $file" >&2; exit 1; }
