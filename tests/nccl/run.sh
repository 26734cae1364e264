#!/usr/bin/env bash
# NCCL's libfabric plugin (aws-ofi-nccl), built elsewhere against this library, and its own
# unit tests (`make check`) run on it:
#
#   tests/nccl/run.sh <aws-ofi-nccl source directory>
#
# Not part of `make test`: this repository neither fetches nor holds the plugin's code. Get
# it yourself (a release tarball or a checkout of a tag, e.g. v1.21.1) and give its
# directory. The script copies it into a scratch directory (NCCL_WORK, default a new
# mktemp directory; never inside this repository), installs our library there with `make
# install PREFIX=<scratch>/prefix`, builds the plugin with `./autogen.sh && ./configure
# --with-libfabric=<prefix> --enable-neuron` (the flavour that needs no CUDA), and runs
# `make check` with our library first on the library path, then probe.c (init, devices,
# getProperties and fini of the plugin's ncclNet v6 table, with its log lines), then
# harness.c (two processes exchanging host buffers through that table on every pair of
# devices, with and without shm; a pass/fail table by pair and size). Without a directory it
# prints why it skips and exits 0. NCCL_CONFIGURE_ARGS adds configure options; JOBS sets make -j;
# NCCL_PLUGIN_VERSION names the version of a tree with neither .git nor .release_version;
# NCCL_HARNESS_ARGS adds options to the harness.
set -uo pipefail
src=${1:-}
if [ -z "$src" ]; then
	echo "skip: tests/nccl/run.sh: no aws-ofi-nccl source directory given (usage: $0 <dir>)"
	exit 0
fi
[ -f "$src/configure.ac" ] && [ -x "$src/autogen.sh" ] ||
	{ echo "$src: not an aws-ofi-nccl source tree (no configure.ac and autogen.sh)"; exit 2; }
src=$(cd "$src" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${NCCL_WORK:-$(mktemp -d -t fabric-nccl.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
case $work/ in "$repo"/*) echo "NCCL_WORK=$work is inside the repository; choose another"; exit 2 ;; esac
jobs=${JOBS:-$(nproc)}
log=$work/log
mkdir -p "$log"

step() {
	local name=$1; shift
	echo "== $name"
	if ! "$@" >"$log/$name.log" 2>&1; then
		echo "FAIL: $name (last lines of $log/$name.log):"
		tail -40 "$log/$name.log"
		exit 1
	fi
}

prefix=$work/prefix
step install make -C "$repo" -s install PREFIX="$prefix"
rm -rf "$work/src"
step copy cp -a "$src" "$work/src"
cd "$work/src" || exit 1
# The plugin's configure takes its version from git or from .release_version (release
# tarballs); an exported tree (git archive) has neither: NCCL_PLUGIN_VERSION gives it.
if [ ! -f .release_version ] && ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	[ -n "${NCCL_PLUGIN_VERSION:-}" ] ||
		{ echo "$src has no .git and no .release_version: set NCCL_PLUGIN_VERSION (e.g. 1.21.1)"; exit 2; }
	echo "$NCCL_PLUGIN_VERSION" >.release_version
fi
step autogen ./autogen.sh
# shellcheck disable=SC2086
step configure ./configure --prefix="$work/plugin" --with-libfabric="$prefix" --enable-neuron \
	${NCCL_CONFIGURE_ARGS:-}
step build make -j"$jobs"
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rc=0
echo "== check"
make -j"$jobs" check >"$log/check.log" 2>&1 || rc=$?
# Every test's result line (automake's parallel harness), and the summary.
grep -E '^(PASS|FAIL|XFAIL|XPASS|SKIP|ERROR):' "$log/check.log"
grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' "$log/check.log"
# Which libfabric the plugin loads: ours (the install above) or another. Then the start of
# its ncclNet v6 table as NCCL drives it (probe.c): init, devices, getProperties, fini, with
# the plugin's log lines.
lib=$(find "$work/src/src" -path '*/.libs/*' \( -name 'libnccl-net.so' -o -name 'libnccom-net.so' \) | head -1)
if [ -z "$lib" ]; then
	echo "FAIL: no libnccl-net.so or libnccom-net.so built"
	rc=1
else
	echo "plugin: $lib, libfabric: $(ldd "$lib" | awk '/libfabric/ { print $3 }')"
	echo "== probe"
	if ! cc -O2 -Wall -Wextra -Werror -o "$work/probe" "$repo/tests/nccl/probe.c" -ldl ||
		! timeout 300 "$work/probe" "$lib"; then
		echo "FAIL: probe"
		rc=1
	fi
fi
# Then two processes moving host buffers through the plugin (harness.c): every ordered pair
# of devices, sizes around the inject size and MTU of each, up to 8 MiB. Once with
# FI_EFA_ENABLE_SHM_TRANSFER=0, so that efa's SRD device carries everything, once as by
# default (local peers over shm). NCCL_HARNESS_ARGS adds options (-t seconds, -s sizes, -v).
harness_rc=0
if [ -n "$lib" ]; then
	echo "== harness"
	if ! cc -O2 -Wall -Wextra -Werror -I"$prefix/include" -o "$work/harness" \
		"$repo/tests/nccl/harness.c" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lfabric -ldl; then
		echo "FAIL: harness does not build"
		harness_rc=1
	else
		for shm in 0 default; do
			name=harness-shm-$shm
			echo "== $name"
			if [ $shm = default ]; then
				set -- env -u FI_EFA_ENABLE_SHM_TRANSFER
			else
				set -- env FI_EFA_ENABLE_SHM_TRANSFER=$shm
			fi
			# shellcheck disable=SC2086
			"$@" timeout 1800 "$work/harness" ${NCCL_HARNESS_ARGS:-} "$lib" \
				>"$log/$name.log" 2>&1
			r=$?
			# The devices, each failed cell (the children's lines of the first one), the
			# table; the whole in the log.
			awk '/^FAIL / { n++; print; next }
			     /^    discovery\| / || (/^    [a-z]+\| / && n == 1) { print }' "$log/$name.log"
			sed -n '/^sender -> receiver/,$p' "$log/$name.log"
			[ $r -eq 0 ] || { echo "FAIL: $name (exit $r, log $log/$name.log)"; harness_rc=1; }
		done
	fi
fi
if [ $rc -ne 0 ]; then
	for f in $(find "$work/src/tests" -name '*.log' ! -name 'test-suite.log'); do
		grep -qE '^(FAIL|ERROR)' "${f%.log}.trs" 2>/dev/null || continue
		echo "--- $f"
		tail -30 "$f"
	done
	echo "nccl: make check or probe failed (logs in $log and $work/src/tests)"
	exit 1
fi
if [ $harness_rc -ne 0 ]; then
	echo "nccl: make check and probe passed, the harness failed (logs in $log)"
	exit 1
fi
echo "nccl: make check, probe and harness passed (scratch directory $work)"
