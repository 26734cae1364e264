#!/usr/bin/env bash
# Upstream fabtests, built elsewhere against our headers or upstream's, run on our library:
#
#   FABTESTS_BIN=<dir with fi_rma_bw …> tests/upstream/fabtests.sh <dir with our libfabric.so.1>
#
# Not part of `make test` (this repository neither fetches nor builds upstream code): build
# fabtests yourself, e.g. from a libfabric release tarball, `./configure
# --with-libfabric=<make install PREFIX> && make`, and point FABTESTS_BIN at its bin directory
# (runfabtests.sh needs ssh; this runs server and client locally instead).
set -uo pipefail
bin=${FABTESTS_BIN:?set FABTESTS_BIN to the directory holding the fabtests binaries}
libdir=$(cd "${1:?usage: FABTESTS_BIN=… fabtests.sh <libdir>}" && pwd)
export LD_LIBRARY_PATH=$libdir
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
