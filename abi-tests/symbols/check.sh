#!/usr/bin/env bash
# The exported (symbol, version) set of libfabric.so.1 must equal expected.txt exactly
# (upstream 2.6's nodes FABRIC_1.0 … 1.9, abi-reference §1), and the soname must be
# libfabric.so.1. Usage: check.sh <path to libfabric.so.1>
set -euo pipefail
lib=${1:?usage: check.sh <libfabric.so.1>}
here=$(cd "$(dirname "$0")" && pwd)

soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
if [ "$soname" != "libfabric.so.1" ]; then
	echo "FAIL: soname is '$soname', expected libfabric.so.1"
	exit 1
fi

# Defined dynamic symbols as name@VER (compat) or name@@VER (default); version-node
# definitions (*ABS*) are not symbols.
actual=$(objdump -T "$lib" | awk '
	$0 ~ /\*UND\*/ || $0 ~ /\*ABS\*/ { next }
	NF >= 7 && ($2 == "g" || $2 == "w") {
		ver = $(NF - 1); name = $NF
		if (ver ~ /^\(/) { gsub(/[()]/, "", ver); print name "@" ver }
		else { print name "@@" ver }
	}' | LC_ALL=C sort)
expected=$(LC_ALL=C sort "$here/expected.txt")
if [ "$actual" != "$expected" ]; then
	echo "FAIL: exported symbols differ from expected.txt (< missing, > extra):"
	diff <(echo "$expected") <(echo "$actual") || true
	exit 1
fi

# Symbol versions must chain as upstream's do: each node inherits the previous one.
defs=$(objdump -p "$lib" | sed -n '/Version definitions:/,/Version References:/p')
for v in 1.1 1.2 1.3 1.4 1.5 1.6 1.7 1.8 1.9; do
	prev=$(awk -v v="$v" 'BEGIN { split("1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.7 1.8 1.9", a, " "); for (i = 2; i <= 10; i++) if (a[i] == v) print a[i-1] }')
	if ! echo "$defs" | grep -A1 "FABRIC_$v\$" | grep -q "FABRIC_$prev"; then
		echo "FAIL: FABRIC_$v does not inherit FABRIC_$prev"
		exit 1
	fi
done
echo "symbols: $(echo "$actual" | wc -l) exported (symbol, version) pairs match; soname libfabric.so.1"
