#!/usr/bin/env bash
# Upstream fabtests, built elsewhere against our headers or upstream's, run on our library:
#
#   FABTESTS_BIN=<dir with fi_rma_bw …> tests/upstream/fabtests.sh <dir with our libfabric.so.1>
#   FABTESTS_BIN=<…/bin> tests/upstream/fabtests.sh <libdir> runfabtests [suite …]
#
# Not part of `make test` (this repository neither fetches nor builds upstream code): build
# fabtests yourself, e.g. from a libfabric release tarball, `./configure
# --with-libfabric=<make install PREFIX> && make install`, and point FABTESTS_BIN at its bin
# directory. The first form runs our own selection of pairs (server and client locally). The
# second runs upstream's runfabtests.sh as upstream's CI does, from the installed
# share/fabtests (so that test_configs/<prov>/*.exclude apply), server and client on
# 127.0.0.1, inside `unshare --pid --fork --mount-proc` (its cleanup kills only its own
# processes), and prints a pass/fail/not-run table. A suite is "<set> <provider> [-b]", e.g.
# "quick efa" or "all shm -b" (default: quick and all, with and without -b, for efa and shm);
# RUNFABTESTS_ARGS adds options (e.g. "-T 60"), FABTESTS_LOGS keeps each suite's log there.
set -uo pipefail
bin=${FABTESTS_BIN:?set FABTESTS_BIN to the directory holding the fabtests binaries}
libdir=$(cd "${1:?usage: FABTESTS_BIN=… fabtests.sh <libdir> [runfabtests [suite …]]}" && pwd)
export LD_LIBRARY_PATH=$libdir

# upstream's runfabtests.sh, suite by suite; one table row each.
runfabtests() {
	local share logs suites=("$@") total_fail=0
	share=$(cd "$bin/../share/fabtests" 2>/dev/null && pwd) ||
		{ echo "no share/fabtests beside $bin (install fabtests with make install)"; return 2; }
	logs=${FABTESTS_LOGS:-$(mktemp -d)}
	mkdir -p "$logs"
	[ ${#suites[@]} -gt 0 ] || suites=("quick efa" "quick efa -b" "all efa" "all efa -b"
		"quick shm" "quick shm -b" "all shm" "all shm -b")
	printf '| suite | pass | fail | not run | excluded |\n| --- | --- | --- | --- | --- |\n'
	for suite in "${suites[@]}"; do
		# shellcheck disable=SC2086
		set -- $suite
		local set=$1 prov=$2 oob=${3:-} log
		log="$logs/${set}-${prov}${oob:+-b}.log"
		# shellcheck disable=SC2086
		(cd "$share" && PATH="$bin:$PATH" unshare --pid --fork --mount-proc \
			"$bin/runfabtests.sh" -v ${RUNFABTESTS_ARGS:-} $oob -t "$set" \
			-s 127.0.0.1 -c 127.0.0.1 "$prov") >"$log" 2>&1
		local p f n x
		p=$(grep -c '^  result: Pass' "$log")
		f=$(grep -c '^  result: Fail' "$log")
		n=$(grep -c '^  result: Notrun' "$log")
		x=$(grep -c '^  result: Excluded' "$log")
		printf '| `-t %s %s%s` | %s | %s | %s | %s |\n' "$set" "${oob:+-b }" "$prov" "$p" "$f" "$n" "$x"
		total_fail=$((total_fail + f))
	done
	echo
	for log in "$logs"/*.log; do
		awk -v suite="$(basename "$log" .log)" '/^- name:/ { sub(/^- name: +/, ""); name = $0 }
			/^  result: (Fail|Notrun)/ { print "  " suite ": " $2 ": " name }' "$log"
	done
	echo "logs: $logs"
	[ $total_fail -eq 0 ]
}
if [ "${2:-}" = runfabtests ]; then
	shift 2
	runfabtests "$@"
	exit
fi
# Below the kernel's ephemeral ports (32768-60999), which outgoing connections take.
port=$((20000 + RANDOM % 10000))
pass=0 fail=0 failed=()

# $1: provider arguments; the rest: the test and its arguments (the same for both sides).
pair() {
	local prov=$1; shift
	local exe=$1; shift
	port=$((port + 1))
	local srv out rc src
	srv=$(mktemp)
	# shellcheck disable=SC2086
	timeout 120 "$bin/$exe" $prov "$@" -E -B $port >"$srv" 2>&1 &
	local spid=$!
	sleep 0.5
	# shellcheck disable=SC2086
	out=$(timeout 120 "$bin/$exe" $prov "$@" -E -P $port 127.0.0.1 2>&1)
	rc=$?
	wait $spid
	src=$?
	if [ $rc -eq 0 ] && [ $src -eq 0 ]; then
		pass=$((pass + 1))
		echo "ok: $exe $prov $*"
	else
		fail=$((fail + 1))
		failed+=("$exe $prov $* (client $rc, server $src)")
		echo "FAIL: $exe $prov $* (client rc=$rc, server rc=$src)"
		echo "$out" | tail -5 | sed 's/^/    client: /'
		tail -5 "$srv" | sed 's/^/    server: /'
	fi
	rm -f "$srv"
}

# Single-process tests.
solo() {
	local prov=$1; shift
	local exe=$1; shift
	# shellcheck disable=SC2086
	if out=$(timeout 120 "$bin/$exe" $prov "$@" 2>&1); then
		pass=$((pass + 1))
		echo "ok: $exe $prov $*"
	else
		fail=$((fail + 1))
		failed+=("$exe $prov $*")
		echo "FAIL: $exe $prov $*"
		echo "$out" | tail -5 | sed 's/^/    /'
	fi
}

# efa twice: as by default (the peer is on this host, so it is reached through shm) and with
# FI_EFA_ENABLE_SHM_TRANSFER=0 (through the software SRD device on loopback).
for target in "1|-p shm" "1|-p efa -d srd_lo-rdm" "0|-p efa -d srd_lo-rdm"; do
	export FI_EFA_ENABLE_SHM_TRANSFER=${target%%|*}
	prov=${target#*|}
	[ "$FI_EFA_ENABLE_SHM_TRANSFER" = 0 ] && echo "# FI_EFA_ENABLE_SHM_TRANSFER=0"
	for op in write read writedata; do
		pair "$prov" fi_rma_bw -e rdm -o $op -S all -v -I 50
	done
	pair "$prov" fi_rdm_tagged_bw -S all -v
	pair "$prov" fi_rdm_pingpong -S all -v
	pair "$prov" fi_rdm_tagged_pingpong -S all -v
	# rma_pingpong checks data only for writedata (it polls the last byte otherwise).
	pair "$prov" fi_rma_pingpong -e rdm -o writedata -S all -v
	pair "$prov" fi_rma_pingpong -e rdm -o write -S all
	pair "$prov" fi_rdm
	pair "$prov" fi_rdm_atomic -o all -I 10 -v
	pair "$prov" fi_rdm_cntr_pingpong -S all -v
	pair "$prov" fi_cq_data -e rdm
	# Without -N the flag is asked of fi_getinfo as a default op_flag, which upstream's shm
	# (no FI_INJECT) and efa (no FI_INJECT_COMPLETE) do not offer, and neither do we (upstream
	# excludes inject_test for both); with -N it is passed to fi_sendmsg.
	pair "$prov" fi_inject_test -N -A inject -v
	pair "$prov" fi_inject_test -N -A inj_complete -v
	pair "$prov" fi_multi_recv -e rdm
	pair "$prov" fi_unexpected_msg -e rdm -I 10
	pair "$prov" fi_rdm_tagged_peek
	pair "$prov" fi_av_xfer -e rdm
	# (fi_av_test is left out: it asks for FI_SOCKADDR addresses, which shm and efa do not use.)
	solo "$prov" fi_cq_test
	solo "$prov" fi_cntr_test
	solo "$prov" fi_mr_test
	solo "$prov" fi_eq_test
	solo "$prov" fi_dom_test -n 2
	solo "$prov" fi_getinfo_test -s 127.0.0.1
	solo "$prov" fi_setopt_test
done

echo "fabtests: $pass passed, $fail failed"
for f in "${failed[@]}"; do echo "  failed: $f"; done
[ $fail -eq 0 ]
