#!/usr/bin/env bash
# Debian's fi_pingpong (libfabric-bin, built against libfabric 1.17) on our library: every
# provider we offer, every endpoint type it supports, message and tagged modes, all sizes,
# with data checks; loaded through the library path and through LD_PRELOAD while Debian's own
# libfabric1 stays installed. Usage: pingpong.sh <dir holding our libfabric.so.1>
set -uo pipefail
libdir=$(cd "${1:?usage: pingpong.sh <libdir>}" && pwd)
ours="$libdir/libfabric.so.1"
fails=0
# Below the kernel's ephemeral ports (32768-60999), which outgoing connections take.
port=$((20000 + RANDOM % 10000))

# fi_info --version prints the loaded library's fi_tostr(FI_TYPE_VERSION): ours says 2.6.0,
# Debian's 1.17.0.
check_loaded() { # $@: env assignments
	local v
	v=$(env "$@" fi_info --version 2>&1 | awk '$1 == "libfabric:" { print $2 }')
	case "$v" in
	2.6.0*) ;;
	*) echo "FAIL: fi_info with [$*] loaded a libfabric reporting '$v', not ours (2.6.0)"; return 1 ;;
	esac
}

run_pair() { # $1: label, $2: largest size the run must reach, then fi_pingpong arguments
	local label=$1 largest=$2; shift 2
	port=$((port + 1))
	local out srv
	srv=$(mktemp)
	env $envs timeout 60 fi_pingpong -B $port "$@" >"$srv" 2>&1 &
	local spid=$!
	sleep 0.3
	out=$(env $envs timeout 60 fi_pingpong -P $port "$@" 127.0.0.1 2>&1)
	local rc=$?
	wait $spid
	local src=$?
	if [ $rc -ne 0 ] || [ $src -ne 0 ] || ! grep -q "^$largest " <<<"$out"; then
		echo "FAIL: $label (client rc=$rc, server rc=$src)"
		echo "--- client:"; echo "$out"; echo "--- server:"; cat "$srv"
		fails=$((fails + 1))
	else
		echo "ok: $label: $(grep -E '^(64|1m) ' <<<"$out" | awk '{ printf "%s B %s us/xfer  ", $1, $7 }')"
	fi
	rm -f "$srv"
}

# fi_info's other listings go through fi_tostr (-v) and fi_getparams (-e).
fi_info_lists() {
	local out
	out=$(LD_LIBRARY_PATH=$libdir fi_info -v 2>&1) && grep -q "^fi_info:" <<<"$out" &&
		grep -q "domain_attr:" <<<"$out" && grep -q "prov_name: efa" <<<"$out" ||
		{ echo "FAIL: fi_info -v"; echo "$out" | head -20; return 1; }
	out=$(LD_LIBRARY_PATH=$libdir fi_info -e 2>&1) && grep -q "FI_LOG_LEVEL" <<<"$out" &&
		grep -q "FI_EFA_TX_SIZE" <<<"$out" && grep -q "FI_SHM_" <<<"$out" ||
		{ echo "FAIL: fi_info -e"; echo "$out" | head -20; return 1; }
	echo "ok: fi_info -v and -e"
}

# fi_info's listing and its filters: every provider, -p efa (RDM and DGRAM entries of the
# software SRD device on loopback), -t FI_EP_RDM (only RDM entries, from efa and shm), and a
# filter nothing matches (shm offers no DGRAM endpoint).
fi_info_filters() {
	local all efa rdm none rc
	all=$(LD_LIBRARY_PATH=$libdir fi_info 2>&1)
	efa=$(LD_LIBRARY_PATH=$libdir fi_info -p efa 2>&1)
	rdm=$(LD_LIBRARY_PATH=$libdir fi_info -t FI_EP_RDM 2>&1)
	none=$(LD_LIBRARY_PATH=$libdir fi_info -p shm -t FI_EP_DGRAM 2>&1)
	rc=$?
	if ! grep -q "^provider: efa" <<<"$all" || ! grep -q "^provider: shm" <<<"$all"; then
		echo "FAIL: fi_info does not list efa and shm"; echo "$all" | head -20; return 1
	fi
	if grep "^provider:" <<<"$efa" | grep -qv "provider: efa$" ||
		! grep -q "domain: srd_lo-rdm" <<<"$efa" || ! grep -q "domain: srd_lo-dgrm" <<<"$efa" ||
		grep "protocol:" <<<"$efa" | grep -qv "FI_PROTO_EFA"; then
		echo "FAIL: fi_info -p efa"; echo "$efa" | head -30; return 1
	fi
	if grep "type:" <<<"$rdm" | grep -qv "FI_EP_RDM$" || ! grep -q "^provider: efa" <<<"$rdm" ||
		! grep -q "^provider: shm" <<<"$rdm"; then
		echo "FAIL: fi_info -t FI_EP_RDM"; echo "$rdm" | head -30; return 1
	fi
	if [ $rc -eq 0 ] || ! grep -q -e "-61" -e "No data available" <<<"$none"; then
		echo "FAIL: fi_info -p shm -t FI_EP_DGRAM (rc $rc) should find nothing"; echo "$none"; return 1
	fi
	echo "ok: fi_info lists efa and shm; -p efa, -t FI_EP_RDM and -p shm -t FI_EP_DGRAM filter as asked"
}
fi_info_filters || fails=$((fails + 1))
fi_info_lists || fails=$((fails + 1))

provs=$(LD_LIBRARY_PATH=$libdir fi_info -l 2>/dev/null | sed -n 's/^\([a-z0-9_;]*\):$/\1/p')
[ -n "$provs" ] || { echo "FAIL: our library lists no provider"; exit 1; }

for how in path preload; do
	if [ $how = path ]; then envs="LD_LIBRARY_PATH=$libdir"; else envs="LD_PRELOAD=$ours"; fi
	check_loaded $envs || fails=$((fails + 1))
	for p in $provs; do
		for ep in rdm dgram; do
			# Only endpoint types the provider offers.
			env $envs fi_info -p "$p" -t "FI_EP_$(tr a-z A-Z <<<$ep)" >/dev/null 2>&1 || continue
			for mode in msg tagged; do
				[ $ep = dgram ] && [ $mode = tagged ] && continue
				# DGRAM messages are single datagrams: fi_pingpong stops below the MTU.
				largest=1m
				[ $ep = dgram ] && largest=1k
				run_pair "$how $p $ep $mode" $largest -p "$p" -e $ep -m $mode -S all -I 50 -c
			done
		done
	done
done
[ $fails -eq 0 ] && echo "fi_pingpong: all runs passed" || echo "fi_pingpong: $fails failed"
exit $fails
