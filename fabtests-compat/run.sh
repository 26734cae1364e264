#!/usr/bin/env bash
# Runs our fabtests-style programs on our library, server and client as two processes (and
# rdm_attrs, the NIC attributes and option answers, as one).
#
#   run.sh demo <bindir> <libdir>   the README's demo: write bandwidth over efa and shm
#   run.sh test <bindir> <libdir>   every program over every provider: the benchmarks at every
#                                   size with data checks, the functional tests; loaded by
#                                   library path and by LD_PRELOAD; then the software SRD
#                                   under injected faults
#   run.sh smoke <bindir> <libdir>  every program over every provider at a few sizes (for the
#                                   build against our installed headers)
# <bindir> holds the programs (built against Debian's headers and library for `test`, against
# ours for `smoke`); <libdir> holds our libfabric.so.1. WRAP, if set, is a command that runs
# each program (e.g. valgrind with its options).
set -uo pipefail
mode=${1:?usage: run.sh demo|test|smoke <bindir> <libdir>}
bindir=$(cd "${2:?}" && pwd)
libdir=$(cd "${3:?}" && pwd)
# Below the kernel's ephemeral ports (32768-60999), which outgoing connections take.
port=$((20000 + RANDOM % 10000))
fails=0
read -ra wrap <<<"${WRAP:-}"

# What runs, as "label|environment|provider arguments": efa on the software SRD device on
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

# The benchmarks, every size of fabtests' -S all with data checks (write and read both ways,
# as fabtests moves them, and one way), small writes by inject (fabtests does not inject with
# -v), and the functional tests.
perf_cases=(
	"rma_bw -o write -S all -I 20 -w 2 -v"
	"rma_bw -o read -S all -I 20 -w 2 -v"
	"rma_bw -o write -u -S all -I 20 -w 2 -v"
	"rma_bw -o write -S r:1,9,100 -I 200 -w 2"
	"rma_bw -o writedata -S all -I 20 -w 2 -v"
	"rdm_tagged_bw -S all -I 20 -w 2 -v"
	"rdm_pingpong -o msg -S all -I 10 -w 1 -v"
	"rdm_pingpong -o tagged -S all -I 10 -w 1 -v"
)
functional=(rdm_msg rdm_tagged rdm_rma rdm_atomic rdm_threads rdm_peer_death rdm_multi)

# $1: env assignment that loads our library; $2: program; then its arguments. Prints the
# client's output; returns non-zero (and shows both sides) when either side fails or the
# loaded library is not ours.
pair() {
	local load=$1 prog=$2; shift 2
	case $prog in
	rdm_multi) several "$load" "$prog" "$@"; return ;;
	rdm_attrs) alone "$load" "$prog"; return ;;
	esac
	port=$((port + 1))
	local srv out rc src want=0
	# rdm_peer_death's server kills itself (SIGKILL: 137 through timeout).
	[ "$prog" = rdm_peer_death ] && want=137
	srv=$(mktemp)
	env "$load" timeout 300 "${wrap[@]}" "$bindir/$prog" -B $port "$@" >"$srv" 2>&1 &
	local spid=$!
	out=$(env "$load" timeout 300 "${wrap[@]}" "$bindir/$prog" -P $port "$@" 127.0.0.1 2>&1)
	rc=$?
	wait $spid 2>/dev/null
	src=$?
	if [ $rc -ne 0 ] || [ $src -ne $want ] || ! grep -q "^$prog: libfabric 2\.6," <<<"$out"; then
		echo "FAIL: $prog $* [$load] (client rc=$rc, server rc=$src, expected $want)"
		echo "--- client:"; echo "$out"; echo "--- server:"; cat "$srv"
		rm -f "$srv"
		return 1
	fi
	rm -f "$srv"
	grep -v "^$prog: libfabric" <<<"$out"
}

# As pair, for a program that runs as one process and picks its own providers and domains
# (rdm_attrs). Prints its output.
alone() {
	local load=$1 prog=$2 out rc
	out=$(env "$load" timeout 300 "${wrap[@]}" "$bindir/$prog" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] || ! grep -q "^$prog: libfabric 2\.6," <<<"$out"; then
		echo "FAIL: $prog [$load] (rc=$rc)"
		echo "$out"
		return 1
	fi
	grep -v "^$prog: libfabric" <<<"$out"
}

# As pair, for a program of one server and three clients (rdm_multi -n 4). Prints the
# clients' output.
several() {
	local load=$1 prog=$2; shift 2
	port=$((port + 1))
	local dir rc=0 i
	dir=$(mktemp -d)
	env "$load" timeout 300 "${wrap[@]}" "$bindir/$prog" -n 4 -B $port "$@" >"$dir/server" 2>&1 &
	local pids=($!)
	for i in 1 2 3; do
		env "$load" timeout 300 "${wrap[@]}" "$bindir/$prog" -P $port "$@" 127.0.0.1 >"$dir/client$i" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	if [ $rc -ne 0 ] || [ "$(cat "$dir"/client* | grep -c "^$prog: libfabric 2\.6,")" != 3 ]; then
		echo "FAIL: $prog -n 4 $* [$load]"
		for i in "$dir"/*; do echo "--- ${i##*/}:"; cat "$i"; done
		rm -rf "$dir"
		return 1
	fi
	cat "$dir"/client* | grep -v "^$prog: libfabric"
	rm -rf "$dir"
}

# The table's sizes, and column $1 (unit $2) of its last row; $3: what was checked.
figures() {
	awk -v col="$1" -v unit="$2" -v checked="$3" '$1 ~ /^[0-9.]+[kmg]?$/ && NF >= 7 { n++; last = "at " $1 ": " $col " " unit }
		END { print n " size(s)" checked "; " last }'
}

# rdm_mtu between two processes that differ: $1 what to call the run, $2 and $3 the server's
# environment and provider arguments, $4 and $5 the client's. One "ok:" line.
mixed() {
	local name=$1 senv=$2 sargs=$3 cenv=$4 cargs=$5 srv out rc src
	port=$((port + 1))
	srv=$(mktemp)
	# shellcheck disable=SC2086
	env LD_LIBRARY_PATH="$libdir" $senv timeout 300 "${wrap[@]}" "$bindir/rdm_mtu" -B $port $sargs >"$srv" 2>&1 &
	local spid=$!
	# shellcheck disable=SC2086
	out=$(env LD_LIBRARY_PATH="$libdir" $cenv timeout 300 "${wrap[@]}" "$bindir/rdm_mtu" -P $port $cargs 127.0.0.1 2>&1)
	rc=$?
	wait $spid 2>/dev/null
	src=$?
	if [ $rc -ne 0 ] || [ $src -ne 0 ] || ! grep -q "^rdm_mtu: all steps passed" <<<"$out"; then
		echo "FAIL: $name (client rc=$rc, server rc=$src)"
		echo "--- client:"; echo "$out"; echo "--- server:"; cat "$srv"
		rm -f "$srv"
		fails=$((fails + 1))
		return 1
	fi
	rm -f "$srv"
	echo "ok: $name: $(grep -c '^ok: .* B: ' <<<"$out") size(s) both ways, data checked ($(grep -m1 '^ok: .* sizes;' <<<"$out" | cut -d';' -f2- | sed 's/^ //'))"
}

# $1: what to call the run; $2: target; $3: load; then the program and its arguments. One
# "ok:" line with the figure at the largest size (benchmarks) or the number of steps
# (functional tests).
run_case() {
	local name=$1 t=$2 load=$3; shift 3
	local out checked=""
	[[ " $* " == *" -v "* ]] && checked=", data checked"
	# shellcheck disable=SC2046
	if out=$(use_env "$t"; pair "$load" "$1" $(targs "$t") "${@:2}"); then
		case $1 in
		rdm_*_bw | rma_bw) echo "ok: $name: $(figures 5 MB/s "$checked" <<<"$out")" ;;
		rdm_pingpong) echo "ok: $name: $(figures 6 us "$checked" <<<"$out")" ;;
		rdm_multi) echo "ok: $name: 4 processes, $(grep -c '^ok: ' <<<"$out") step(s) passed" ;;
		rdm_attrs)
			echo "ok: $name: $(grep -c '^ok: ' <<<"$out") check(s) passed"
			grep '^skip: ' <<<"$out" | sed 's/^/    /'
			;;
		*) echo "ok: $name: $(grep -c '^ok: ' <<<"$out") step(s) passed" ;;
		esac
	else
		echo "$out"
		fails=$((fails + 1))
		return 1
	fi
}

case $mode in
demo)
	for t in "${targets[@]}"; do
		case $(label "$t") in
		efa-srd) what="efa over the software SRD device (UDP on loopback, local shm off)" ;;
		efa) what="efa as by default: a local peer is reached through shm" ;;
		*) what=$(label "$t") ;;
		esac
		echo "== rma_bw -o write (both sides write, as fabtests' fi_rma_bw), $what (two processes, $(nproc) cores)"
		# shellcheck disable=SC2046
		(use_env "$t"; pair "LD_LIBRARY_PATH=$libdir" rma_bw $(targs "$t") -o write) || fails=$((fails + 1))
		echo
	done
	;;
test)
	for load in "LD_LIBRARY_PATH=$libdir" "LD_PRELOAD=$libdir/libfabric.so.1"; do
		for t in "${targets[@]}"; do
			for c in "${perf_cases[@]}" "${functional[@]}"; do
				# shellcheck disable=SC2086
				run_case "${load%%=*} $(label "$t") ${c%% -S*}" "$t" "$load" $c
			done
		done
	done
	# fabtests' in-band address flow (runfabtests.sh without -b) over every efa domain: the
	# peer named by node and service, its QKEY learned from its answer.
	for t in "${targets[@]:0:2}"; do
		run_case "$(label "$t") rdm_inband" "$t" "LD_LIBRARY_PATH=$libdir" rdm_inband
	done
	# One process: the NIC attributes and option answers NCCL's plugin reads (efa and shm),
	# with efa's local peers through shm and not, loaded both ways.
	for t in "${targets[@]:0:2}"; do
		run_case "$(label "$t") rdm_attrs" "$t" "LD_LIBRARY_PATH=$libdir" rdm_attrs
	done
	run_case "LD_PRELOAD rdm_attrs" "${targets[1]}" "LD_PRELOAD=$libdir/libfabric.so.1" rdm_attrs
	# FI_EFA_NIC_PCI: the PCI function under the interface in the bus attributes (off by
	# default: MPICH asserts on a PCI NIC its hwloc cannot find).
	export FI_EFA_NIC_PCI=1
	run_case "efa FI_EFA_NIC_PCI=1 rdm_attrs" "${targets[1]}" "LD_LIBRARY_PATH=$libdir" rdm_attrs
	unset FI_EFA_NIC_PCI
	# fabtests' -s: the source address given to fi_getinfo (FI_SOURCE) picks the device.
	run_case "efa-srd rma_bw -s 127.0.0.1" "efa-srd|FI_EFA_ENABLE_SHM_TRANSFER=0|-p efa -s 127.0.0.1" \
		"LD_LIBRARY_PATH=$libdir" rma_bw -o write -S 64k -I 20 -v
	# Devices of different MTUs (issue 28), local shm off: srd_lo against srd_lo with its MTU
	# lowered to 1,400 bytes, both ways round; and srd_lo against the first non-loopback srd
	# domain, when the host has one (an address of this host: both sides move loopback's
	# packets, `docs/internals.md`).
	lo="-p efa -d srd_lo-rdm"
	mixed "efa-srd rdm_mtu srd_lo / srd_lo with FI_EFA_MTU_SIZE=1400" \
		"FI_EFA_ENABLE_SHM_TRANSFER=0" "$lo" "FI_EFA_ENABLE_SHM_TRANSFER=0 FI_EFA_MTU_SIZE=1400" "$lo"
	mixed "efa-srd rdm_mtu srd_lo with FI_EFA_MTU_SIZE=1400 / srd_lo" \
		"FI_EFA_ENABLE_SHM_TRANSFER=0 FI_EFA_MTU_SIZE=1400" "$lo" "FI_EFA_ENABLE_SHM_TRANSFER=0" "$lo"
	eth=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" { print $2; exit }')
	if [ -n "$eth" ]; then
		mixed "efa-srd rdm_mtu srd_lo / srd_$eth" \
			"FI_EFA_ENABLE_SHM_TRANSFER=0" "$lo" "FI_EFA_ENABLE_SHM_TRANSFER=0" "-p efa -d srd_$eth-rdm"
		# Two processes of this host on the Ethernet domain (fabtests' first efa domain),
		# local shm off: each reaches the other's address over loopback, with loopback's
		# 64 KiB packets (device::udp::LocalPath), both ways at every size, data checked.
		t="efa-srd-$eth|FI_EFA_ENABLE_SHM_TRANSFER=0|-p efa -d srd_$eth-rdm"
		for c in "${perf_cases[@]:0:2}" "${perf_cases[@]:5:1}"; do
			# shellcheck disable=SC2086
			run_case "efa-srd srd_$eth ${c%% -S*}" "$t" "LD_LIBRARY_PATH=$libdir" $c
		done
	else
		echo "skipped: srd_lo / srd_<eth> and srd_<eth> pairs: no non-loopback interface with an IPv4 address"
	fi
	# The software SRD under a faulty network (dropped, duplicated, corrupted and delayed
	# datagrams, injected by the UDP device): every byte still arrives intact, every
	# functional step still passes.
	faults="loss=3,dup=1,corrupt=1,delay_us=200,seed=7"
	t="efa-srd|FABRIC_SRD_FAULTS=$faults|-p efa -d srd_lo-rdm"
	for c in "${perf_cases[@]:0:2}" "${perf_cases[@]:3:3}" "${functional[@]}"; do
		# shellcheck disable=SC2086
		(export FI_EFA_ENABLE_SHM_TRANSFER=0
		 run_case "efa-srd ${c%% -S*} with FABRIC_SRD_FAULTS=$faults" "$t" "LD_LIBRARY_PATH=$libdir" $c) ||
			fails=$((fails + 1))
	done
	;;
smoke)
	for t in "${targets[@]}"; do
		for c in "rma_bw -o write -S 1m -I 10 -v" "rma_bw -o read -S 4k -I 10 -v" \
			"rdm_tagged_bw -S 64 -I 100 -v" "rdm_pingpong -S 4k -I 100 -v" "${functional[@]}"; do
			# shellcheck disable=SC2086
			run_case "$(label "$t") $c" "$t" "LD_LIBRARY_PATH=$libdir" $c
		done
		case $(label "$t") in efa*)
			run_case "$(label "$t") rdm_inband" "$t" "LD_LIBRARY_PATH=$libdir" rdm_inband
			run_case "$(label "$t") rdm_attrs" "$t" "LD_LIBRARY_PATH=$libdir" rdm_attrs
			;;
		esac
	done
	;;
*) echo "usage: run.sh demo|test|smoke <bindir> <libdir>"; exit 2 ;;
esac
[ $fails -eq 0 ] || { echo "fabtests-compat: $fails run(s) failed"; exit 1; }
[ "$mode" != demo ] && echo "fabtests-compat: all runs passed"
exit 0
