#!/usr/bin/env bash
# Incast across the hosts of a namespace cluster (issue 30, the bench half): every other host
# sends 1 MiB tagged messages (fabtests-compat/rdm_tagged_bw, windows of 64) over efa (software
# SRD on the hosts' bridge) to host 0 at once, against one sender alone. Prints a Markdown table
# (bench/bench.py puts it in the bench report): MB/s of one sender alone, the aggregate of the
# incast (all the bytes over the time from the first start to the last end), each sender's
# share (min and max of its bytes / its time against the fair share), and retransmissions per
# delivered datagram (the transports' counters, logged when the endpoints close).
#
#   incast.sh <dir with rdm_tagged_bw> <libdir> [iterations per sender, default 1000]
#   HOSTS=<n> (default 4: 3 senders)                    (root: creates and removes namespaces)
set -uo pipefail
usage="usage: incast.sh <bindir> <libdir> [iterations]"
bindir=$(cd "${1:?$usage}" && pwd)
libdir=$(cd "${2:?$usage}" && pwd)
iters=${3:-1000}
hosts=${HOSTS:-4}
pfx="cl30i-$$-"
sw=${pfx}sw
tmp=$(mktemp -d)
port=$((20000 + RANDOM % 10000))

ns_of() { echo "${pfx}h$1"; }
cleanup() {
	local i
	for i in $(seq 0 $((hosts - 1))); do
		ip netns pids "$(ns_of "$i")" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$(ns_of "$i")" 2>/dev/null
	done
	ip netns del "$sw" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

ip netns add "$sw" && ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || {
	echo "incast: cannot create namespaces (root and iproute2 needed)" >&2
	exit 1
}
for i in $(seq 0 $((hosts - 1))); do
	ns=$(ns_of "$i")
	ip netns add "$ns" &&
		ip -n "$sw" link add "h$i" type veth peer name eth0 netns "$ns" &&
		ip -n "$sw" link set "h$i" master br0 up &&
		ip -n "$ns" addr add "10.31.0.$((i + 1))/24" dev eth0 &&
		ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || exit 1
done

# run <name> <sender hosts…>: one server per sender in host 0, all senders at once. Writes
# $tmp/<name>.<host>.{cli,srv} and $tmp/<name>.times (start and end of each sender, ns).
run() {
	local name=$1 h p pids=() spids=()
	shift
	for h in "$@"; do
		p=$((port + h))
		ip netns exec "$(ns_of 0)" env LD_LIBRARY_PATH="$libdir" FI_LOG_LEVEL=info FI_LOG_PROV=efa \
			timeout 300 "$bindir/rdm_tagged_bw" -p efa -B "$p" -S 1m -I "$iters" -w 1 \
			>"$tmp/$name.$h.srv" 2>&1 &
		spids+=($!)
	done
	sleep 0.5
	for h in "$@"; do
		p=$((port + h))
		(
			s=$(date +%s%N)
			ip netns exec "$(ns_of "$h")" env LD_LIBRARY_PATH="$libdir" FI_LOG_LEVEL=info \
				FI_LOG_PROV=efa timeout 300 "$bindir/rdm_tagged_bw" -p efa -P "$p" -S 1m \
				-I "$iters" -w 1 10.31.0.1 >"$tmp/$name.$h.cli" 2>&1
			rc=$?
			echo "$h $s $(date +%s%N) $rc" >>"$tmp/$name.times"
		) &
		pids+=($!)
	done
	wait "${pids[@]}" "${spids[@]}"
	port=$((port + hosts))
}

# The counters of the endpoints that closed in these logs: sums of a field.
stat() { # <field> <files…>
	local f=$1
	shift
	cat "$@" | grep -o "$f: [0-9]*" | awk '{ n += $2 } END { print n + 0 }'
}

run alone 1
senders=()
for i in $(seq 1 $((hosts - 1))); do senders+=("$i"); done
run incast "${senders[@]}"

mb=$((iters * 1048576))
awk -v mb="$mb" -v n="${#senders[@]}" '
	FILENAME ~ /alone/ { if ($4 != 0) bad = 1; alone = mb / (($3 - $2) / 1e9) / 1e6; next }
	{
		if ($4 != 0) bad = 1
		if (!first || $2 < first) first = $2
		if ($3 > last) last = $3
		r = mb / (($3 - $2) / 1e9) / 1e6; rate[$1] = r; sum += r
	}
	END {
		if (bad) { print "incast: a transfer failed" > "/dev/stderr"; exit 1 }
		agg = n * mb / ((last - first) / 1e9) / 1e6
		min = 1e18; max = 0
		for (h in rate) { s = rate[h] / sum * n; if (s < min) min = s; if (s > max) max = s }
		printf "%.0f %.0f %.2f %.2f\n", alone, agg, min, max
	}' "$tmp/alone.times" "$tmp/incast.times" >"$tmp/figures" || {
	tail -n 5 "$tmp"/*.cli "$tmp"/*.srv >&2
	exit 1
}
read -r alone agg smin smax <"$tmp/figures"
rx_alone=$(stat retransmits "$tmp"/alone.*.cli)
dl_alone=$(stat delivered "$tmp"/alone.*.srv)
rx_inc=$(stat retransmits "$tmp"/incast.*.cli)
dl_inc=$(stat delivered "$tmp"/incast.*.srv)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.4f", a / b; else print "—" }'; }
echo "| senders | MB/s in all | each sender's share of a fair split (min – max) | retransmissions per delivered datagram |"
echo "|---|---|---|---|"
echo "| 1 alone | $alone | 1 | $(ratio "$rx_alone" "$dl_alone") ($rx_alone / $dl_alone) |"
echo "| ${#senders[@]} at once to host 0 | $agg | $smin – $smax | $(ratio "$rx_inc" "$dl_inc") ($rx_inc / $dl_inc) |"
