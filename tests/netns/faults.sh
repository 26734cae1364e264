#!/usr/bin/env bash
# Faults between two hosts, played by two network namespaces joined by a veth pair (issues 4
# and 8): rma_bw and rdm_tagged_bw over efa (software SRD on the veth) with every operation's data checked, under
# random loss from nftables in each receiver's input hook, under the device's seeded fault
# injector (FABRIC_SRD_FAULTS: loss, duplication, corruption, reordering by delay), across a
# link that goes down for less than the unreachable timeout (5 s) and for longer, behind a
# rate-limited link (tc tbf), with the server killed mid-transfer (efa and shm), and with the
# server restarted on the same address (a stale QKEY). A case passes when the transfer completes with its data intact,
# or, where the fault is fatal, when both sides end with an error within a bounded time (never
# a hang, never a silent success). Every case must have its row in RELIABILITY.md.
#
#   faults.sh <bindir with rma_bw, rdm_tagged_bw> <libdir>       (root: creates and removes the namespaces)
#   CASES=<regex> faults.sh …                    only the cases whose name matches
set -uo pipefail
bindir=$(cd "${1:?usage: faults.sh <bindir> <libdir>}" && pwd)
libdir=$(cd "${2:?}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
reliability="$here/../../RELIABILITY.md"
A=fabA$$
B=fabB$$
# Below the kernel's ephemeral ports (32768-60999), which outgoing connections take.
port=$((20000 + RANDOM % 10000))
fails=0
log=$(mktemp -d)

cleanup() {
	ip netns pids "$A" 2>/dev/null | xargs -r kill -9 2>/dev/null
	ip netns pids "$B" 2>/dev/null | xargs -r kill -9 2>/dev/null
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
	rm -rf "$log"
}
trap cleanup EXIT

ip netns add "$A" && ip netns add "$B" &&
	ip link add "va$$" type veth peer name "vb$$" &&
	ip link set "va$$" netns "$A" && ip link set "vb$$" netns "$B" &&
	ip -n "$A" addr add 10.77.0.1/24 dev "va$$" && ip -n "$B" addr add 10.77.0.2/24 dev "vb$$" &&
	ip -n "$A" link set "va$$" up && ip -n "$B" link set "vb$$" up &&
	ip -n "$A" link set lo up && ip -n "$B" link set lo up || {
	echo "FAIL: cannot create network namespaces (root and iproute2 needed)"
	exit 1
}
for ns in "$A" "$B"; do
	ip netns exec "$ns" nft add table inet fab &&
		ip netns exec "$ns" nft add chain inet fab in '{ type filter hook input priority 0; }' || {
		echo "FAIL: nftables unusable in $ns"
		exit 1
	}
done

# $1: the rate each end of the veth sends at (tc tbf: a bottleneck that queues, then drops;
# 0: unlimited).
set_rate() {
	local nd ns dev
	for nd in "$A:va$$" "$B:vb$$"; do
		ns=${nd%%:*} dev=${nd#*:}
		ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null
		if [ "$1" != 0 ]; then
			ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$1" burst 64kb latency 20ms || {
				echo "FAIL: tc tbf unusable in $ns"
				exit 1
			}
		fi
	done
}

# $1: percent of UDP datagrams each namespace drops on input (0: none).
set_loss() {
	for ns in "$A" "$B"; do
		ip netns exec "$ns" nft flush chain inet fab in
		if [ "$1" != 0 ]; then
			ip netns exec "$ns" nft add rule inet fab in meta l4proto udp numgen random mod 100 '<' "$1" drop
		fi
	done
}

# case <name> <expect ok|error> <limit s> <fault env or -> <during: shell run while the client
# runs, or -> -- <rma_bw args>
case_() {
	local name=$1 expect=$2 limit=$3 fenv=$4 during=$5
	shift 6
	[[ $name =~ ${CASES:-.} ]] || return 0
	port=$((port + 1))
	grep -q "^| $name |" "$reliability" || {
		echo "FAIL: $name: no row in RELIABILITY.md"
		fails=$((fails + 1))
	}
	local fe=() prog=rma_bw prov=(-p efa)
	[ "$fenv" != - ] && fe=("FABRIC_SRD_FAULTS=$fenv")
	# Another provider than efa (shm: both processes on one host, across the namespaces).
	if [ "$1" = -p ]; then
		prov=("$1" "$2")
		shift 2
	fi
	# Tagged messages are rdm_tagged_bw's (the same options, without -o).
	if [ "$1" = -o ] && [ "$2" = tsend ]; then
		prog=rdm_tagged_bw
		shift 2
	fi
	# (In a subshell: a server killed on purpose is not reported as a killed job.)
	# The server logs at info level, so that a fault can wait for the transfer to begin
	# (`started`).
	(ip netns exec "$A" env LD_LIBRARY_PATH="$libdir" FI_EFA_IFACE="va$$" FI_LOG_LEVEL=info "${fe[@]}" \
		timeout "$limit" "$bindir/$prog" "${prov[@]}" -B $port "$@" >"$log/srv" 2>&1; exit $?) 2>/dev/null &
	local spid=$!
	sleep 0.3
	ip netns exec "$B" env LD_LIBRARY_PATH="$libdir" FI_EFA_IFACE="vb$$" "${fe[@]}" \
		timeout "$limit" "$bindir/$prog" "${prov[@]}" -P $port "$@" 10.77.0.1 >"$log/cli" 2>&1 &
	local cpid=$!
	local t0=$SECONDS
	local dpid=
	if [ "$during" != - ]; then
		eval "$during" &
		dpid=$!
	fi
	local crc src ctook took
	wait $cpid
	crc=$?
	ctook=$((SECONDS - t0))
	wait $spid
	src=$?
	took=$((SECONDS - t0))
	[ -n "$dpid" ] && wait "$dpid"
	local result
	if [ $crc = 124 ] || [ $src = 124 ]; then
		result="hang (killed after ${limit} s)"
	elif [ $crc = 0 ] && [ $src = 0 ]; then
		result=ok
	elif [ $crc != 0 ]; then
		# The client (the initiator) saw the failure and ended.
		result=error
	else
		result="server-side error only"
	fi
	if [ "$result" = "$expect" ]; then
		echo "ok: $name: $result (client ended after ${ctook} s, server after ${took} s)$(awk '$1 == "1m" || $1 == "8m" { printf ", %s %s MB/s", $1, $5 }' "$log/cli")"
	else
		echo "FAIL: $name: expected $expect, got $result (client rc=$crc, server rc=$src)"
		tail -n 5 "$log/cli" "$log/srv"
		fails=$((fails + 1))
	fi
	[ -n "${VERBOSE:-}" ] && tail -n 3 "$log/cli" "$log/srv"
	return 0
}

# Run by a case's fault: returns once the transfer has begun — the server's efa endpoint has
# chosen the client's path, which it logs at info level when the first packet comes — and half
# a second more. A fixed delay from the client's start once let a loaded machine's client
# still be in its out-of-band (TCP) address exchange when the link went down: TCP rode out
# the 12 s outage, no libfabric traffic was outstanding during it, and the case saw success.
# $1: the server's log (default: the case's).
started() {
	local w
	for w in $(seq 100); do
		grep -q ' route .*: device' "${1:-$log/srv}" 2>/dev/null && break
		sleep 0.1
	done
	sleep 0.5
}

ops=(write read writedata tsend)
set_loss 0
for op in "${ops[@]}"; do
	case_ "veth-$op" ok 120 - - -- -o "$op" -S all -I 5 -w 1 -v
done
set_loss 5
for op in "${ops[@]}"; do
	case_ "nft-loss-5-$op" ok 180 - - -- -o "$op" -S all -I 3 -w 1 -v
done
set_loss 20
case_ "nft-loss-20-write" ok 180 - - -- -o write -S 1m -I 3 -w 1 -v
case_ "nft-loss-20-tsend" ok 180 - - -- -o tsend -S 64k -I 20 -w 1 -v
set_loss 0
case_ "injector-mixed" ok 180 "loss=3,dup=3,corrupt=3,delay_us=300,seed=11" - -- \
	-o write -S all -I 3 -w 1 -v
case_ "injector-mixed-read" ok 180 "loss=3,dup=3,corrupt=3,delay_us=300,seed=12" - -- \
	-o read -S all -I 3 -w 1 -v
# The link goes down for 2 s in the middle of the transfer, then comes back: it completes.
case_ "link-down-2s" ok 120 - \
	'started; ip -n "$A" link set "va$$" down; sleep 2; ip -n "$A" link set "va$$" up' -- \
	-o write -S 8m -I 150 -w 1 -v
# Down for 12 s (past the 5 s unreachable timeout): both sides end with an error.
case_ "link-down-12s" error 60 - \
	'started; ip -n "$A" link set "va$$" down; sleep 12; ip -n "$A" link set "va$$" up' -- \
	-o write -S 8m -I 1000 -w 1
# The server is killed (SIGKILL) in the middle: the client ends with an error.
case_ "peer-killed" error 60 - 'started; pkill -9 -f "^$bindir/rma_bw -p efa -B $port "' -- -o write -S 8m -I 1000 -w 1

set_rate 200mbit
case_ "tbf-200mbit-write" ok 180 - - -- -o write -S all -I 3 -w 1 -v
case_ "tbf-200mbit-tsend" ok 180 - - -- -o tsend -S all -I 3 -w 1 -v
set_rate 0
# shm (server and client on one host, in the two namespaces): the server killed mid-transfer.
case_ "shm-peer-killed" error 60 - 'sleep 1; pkill -9 -f "^$bindir/rma_bw -p shm -B $port "' -- \
	-p shm -o write -S 8m -I 100000 -w 1

# The server is killed and a new one started on the same address (same UDP port, new QKEY)
# while the first client still sends to the old one. That client ends with an error (its
# datagrams carry the stale QKEY: the new server drops and counts them, and nobody acks), and a
# second client's transfer with the new server, running meanwhile, completes intact.
restart_case() {
	local name=restart-stale-qkey
	[[ $name =~ ${CASES:-.} ]] || return 0
	port=$((port + 1))
	grep -q "^| $name |" "$reliability" || {
		echo "FAIL: $name: no row in RELIABILITY.md"
		fails=$((fails + 1))
	}
	local srv=(ip netns exec "$A" env LD_LIBRARY_PATH="$libdir" FI_EFA_IFACE="va$$" FI_LOG_LEVEL=info
		timeout 60 "$bindir/rma_bw" -p efa -s 10.77.0.1 -B $port -o write -w 1)
	local cli=(ip netns exec "$B" env LD_LIBRARY_PATH="$libdir" FI_EFA_IFACE="vb$$"
		timeout 60 "$bindir/rma_bw" -p efa -P $port -o write -w 1)
	local t0=$SECONDS
	("${srv[@]}" -S 8m -I 1000 >"$log/srv1" 2>&1; exit $?) 2>/dev/null &
	local s1=$!
	sleep 0.3
	"${cli[@]}" -S 8m -I 1000 10.77.0.1 >"$log/cli1" 2>&1 &
	local c1=$!
	# Killed mid-transfer: once the server has chosen the client's path (its first packet
	# came; logged at info), and half a second more. A fixed second once found both sides
	# still filling their 1 GiB of buffers, and no datagram left to go stale.
	started "$log/srv1"
	pkill -9 -f "^$bindir/rma_bw -p efa -s 10.77.0.1 -B $port "
	wait $s1
	"${srv[@]}" -S 1m -I 2000 -v >"$log/srv2" 2>&1 &
	local s2=$!
	sleep 0.3
	"${cli[@]}" -S 1m -I 2000 -v 10.77.0.1 >"$log/cli2" 2>&1 &
	local c2=$!
	local rc1 rc2 rs2 took1 dropped
	wait $c1
	rc1=$?
	took1=$((SECONDS - t0))
	wait $c2
	rc2=$?
	wait $s2
	rs2=$?
	# The transport's counters, logged when the endpoint closes (FI_LOG_LEVEL=info).
	dropped=$(grep -o 'dropped_bad_qkey: [0-9]*' "$log/srv2" | awk '{ n += $2 } END { print n + 0 }')
	if [ $rc1 != 0 ] && [ $rc1 != 124 ] && [ $rc2 = 0 ] && [ $rs2 = 0 ] && [ "$dropped" -gt 0 ]; then
		echo "ok: $name: first client error after ${took1} s; the new server dropped $dropped stale datagram(s); second transfer intact$(awk '$1 == "1m" { printf ", %s MB/s", $5 }' "$log/cli2")"
	else
		echo "FAIL: $name: first client rc=$rc1 (expected an error), second client rc=$rc2, new server rc=$rs2 (expected 0), stale datagrams dropped: $dropped (expected > 0)"
		tail -n 5 "$log/cli1" "$log/cli2" "$log/srv2"
		fails=$((fails + 1))
	fi
}
restart_case

if [ $fails -ne 0 ]; then
	echo "netns faults: $fails case(s) failed"
	exit 1
fi
echo "netns faults: all cases passed"
