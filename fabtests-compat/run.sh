#!/usr/bin/env bash
# Runs our fabtests-style programs (built against Debian's installed libfabric headers and
# linked against Debian's libfabric.so.1) on our library, server and client as two processes.
#
#   run.sh demo <bindir> <libdir>   the README's demo: write bandwidth over efa and shm
#   run.sh test <bindir> <libdir>   every RMA operation and tagged sends over every provider,
#                                   data checked,
#                                   loaded by library path and by LD_PRELOAD
#   run.sh smoke <bindir> <libdir>  write and read over every provider at a few sizes, data
#                                   checked (for a build against our installed headers)
set -uo pipefail
mode=${1:?usage: run.sh demo|test <bindir> <libdir>}
bindir=$(cd "${2:?}" && pwd)
libdir=$(cd "${3:?}" && pwd)
# Below the kernel's ephemeral ports (32768-60999), which outgoing connections take.
port=$((20000 + RANDOM % 10000))
fails=0

# What runs, as "label|environment|rma_bw arguments": efa on the software SRD device on
# loopback with local shm off, so that the two processes talk over UDP as they would between
# hosts; efa as it runs by default, its local peers reached through shm; and shm itself.
targets=(
	"efa-srd|FI_EFA_ENABLE_SHM_TRANSFER=0|-p efa -d srd_lo-rdm"
	"efa|FI_EFA_ENABLE_SHM_TRANSFER=1|-p efa -d srd_lo-rdm"
	"shm||-p shm"
)
label() { echo "${1%%|*}"; }
# Exports the target's environment (in the subshell that runs it).
use_env() {
	local r=${1#*|}
	r=${r%%|*}
	[ -z "$r" ] || export "${r?}"
}
targs() { echo "${1##*|}"; }

# $1: env assignment that loads our library; then rma_bw arguments. Prints the client's
# table; returns non-zero (and shows both sides) when either side fails or the loaded library
# is not ours.
pair() {
	local load=$1; shift
	port=$((port + 1))
	local srv out rc src
	srv=$(mktemp)
	env "$load" timeout 120 "$bindir/rma_bw" -B $port "$@" >"$srv" 2>&1 &
	local spid=$!
	out=$(env "$load" timeout 120 "$bindir/rma_bw" -P $port "$@" 127.0.0.1 2>&1)
	rc=$?
	wait $spid
	src=$?
	if [ $rc -ne 0 ] || [ $src -ne 0 ] || ! grep -q "^rma_bw: libfabric 2\.6," <<<"$out"; then
		echo "FAIL: rma_bw $* [$load] (client rc=$rc, server rc=$src)"
		echo "--- client:"; echo "$out"; echo "--- server:"; cat "$srv"
		rm -f "$srv"
		return 1
	fi
	rm -f "$srv"
	grep -v '^rma_bw: ' <<<"$out"
}

case $mode in
demo)
	for t in "${targets[@]}"; do
		case $(label "$t") in
		efa-srd) what="efa over the software SRD device (UDP on loopback, local shm off)" ;;
		efa) what="efa as by default: a local peer is reached through shm" ;;
		*) what=$(label "$t") ;;
		esac
		echo "== rma_bw -o write, $what (two processes, $(nproc) cores)"
		# shellcheck disable=SC2046
		(use_env "$t"; pair "LD_LIBRARY_PATH=$libdir" $(targs "$t") -o write) || fails=$((fails + 1))
		echo
	done
	;;
test)
	for load in "LD_LIBRARY_PATH=$libdir" "LD_PRELOAD=$libdir/libfabric.so.1"; do
		for t in "${targets[@]}"; do
			for op in write read writedata tsend; do
				# shellcheck disable=SC2046
				if out=$(use_env "$t"; pair "$load" $(targs "$t") -o $op -S all -I 20 -w 2 -v); then
					echo "ok: ${load%%=*} $(label "$t") $op: 1 B .. 8 MiB, data checked; 1m: $(awk '$1 == "1m" { print $5 " MB/s" }' <<<"$out")"
				else
					echo "$out"
					fails=$((fails + 1))
				fi
			done
		done
	done
	# The software SRD under a faulty network (dropped, duplicated, corrupted and delayed
	# datagrams, injected by the UDP device): every byte still arrives intact.
	faults="loss=3,dup=1,corrupt=1,delay_us=200,seed=7"
	for op in write read writedata; do
		if out=$(FI_EFA_ENABLE_SHM_TRANSFER=0 FABRIC_SRD_FAULTS=$faults pair "LD_LIBRARY_PATH=$libdir" -p efa -d srd_lo-rdm -o $op -S all -I 20 -w 2 -v); then
			echo "ok: efa-srd $op with FABRIC_SRD_FAULTS=$faults: 1 B .. 8 MiB, data checked"
		else
			echo "$out"
			fails=$((fails + 1))
		fi
	done
	;;
smoke)
	for t in "${targets[@]}"; do
		for op in write read; do
			for size in 1 4096 1048576; do
				# shellcheck disable=SC2046
				if (use_env "$t"; pair "LD_LIBRARY_PATH=$libdir" $(targs "$t") -o $op -S $size -I 10 -v >/dev/null); then
					echo "ok: $(label "$t") $op $size B, data checked"
				else
					fails=$((fails + 1))
				fi
			done
		done
	done
	;;
*) echo "usage: run.sh demo|test|smoke <bindir> <libdir>"; exit 2 ;;
esac
[ $fails -eq 0 ] || { echo "fabtests-compat: $fails run(s) failed"; exit 1; }
[ "$mode" != demo ] && echo "fabtests-compat: all runs passed"
exit 0
