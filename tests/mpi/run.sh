#!/usr/bin/env bash
# Open MPI from Debian (4.1, built against libfabric 1.x) runs tests/mpi/mpi_suite.c over our
# library with its OFI MTL (`--mca pml cm --mca mtl ofi`), 2 and 4 ranks on this host:
#   - over efa as by default (ranks on one host reach each other through shm underneath), and
#     with FI_EFA_ENABLE_SHM_TRANSFER=0 (everything through the software SRD device);
#   - loaded through the library path, and with LD_PRELOAD while Debian's libfabric1 is what
#     Open MPI links: the suite reports which libfabric.so.1 is loaded and it must be ours;
#   - `mtl_ofi_provider_include shm` must be refused, as Debian's libfabric refuses it: the
#     MTL asks for FI_REMOTE_COMM, which a shared-memory provider cannot offer.
# Then MPICH from PyPI (5.x, ch4:ofi, built against libfabric 2.x, bundling its own
# libfabric.so.1) runs tests/mpi/mpi4py_suite.py with mpi4py and numpy, 2 and 4 ranks, over
# efa (local shm on and off) and over shm, with its bundled library replaced by ours through
# the library path and through LD_PRELOAD. MPIR_CVAR_NOLOCAL=1 makes MPICH send local messages
# through libfabric instead of its own shared memory.
#
#   run.sh <mpi_suite binary> <dir with our libfabric.so.1> [<venv with mpich, mpi4py, numpy>]
set -uo pipefail
usage="usage: run.sh <mpi_suite> <libdir> [<venv>]"
suite=${1:?$usage}
libdir=$(cd "${2:?$usage}" && pwd)
venv=${3:-}
fails=0
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca pml cm --mca mtl ofi)

# Judges one job: $1 what ran, $2 its exit status, $3 its output, $4 the suite's name, $5 ranks,
# $6 seconds it took. Passes when it exited 0, mapped only our libfabric.so.1 and finished.
verdict() {
	local what=$1 rc=$2 out=$3 name=$4 np=$5 secs=$6
	if [ "$rc" -ne 0 ] || ! grep -Eq "^$name: libfabric $libdir/libfabric\.so[.0-9]*$" <<<"$out" ||
		! grep -q "^$name: $np ranks: .* checked" <<<"$out"; then
		echo "FAIL: $what (rc=$rc)"
		tail -20 <<<"$out" | sed 's/^/    /'
		fails=$((fails + 1))
		return
	fi
	echo "ok: $what: $(sed -n "s/^$name: [0-9]* ranks: //p" <<<"$out") ($secs s)"
}

# $1: ranks; $2: env assignment that loads our library; the rest: more `-x VAR=value`.
run() {
	local np=$1 load=$2; shift 2
	local out rc t0
	t0=$(date +%s)
	out=$(timeout 300 "${mpirun[@]}" -np "$np" --mca mtl_ofi_provider_include efa \
		-x "$load" "$@" "$suite" 2>&1)
	rc=$?
	verdict "$np ranks, efa, ${load%%=*}${*:+ $*}" $rc "$out" mpi_suite "$np" $(($(date +%s) - t0))
}

for np in 2 4; do
	run $np "LD_LIBRARY_PATH=$libdir"
	run $np "LD_LIBRARY_PATH=$libdir" -x FI_EFA_ENABLE_SHM_TRANSFER=0
done
run 2 "LD_PRELOAD=$libdir/libfabric.so.1"

# shm alone offers no remote communication: the MTL must find no provider.
out=$(timeout 120 "${mpirun[@]}" -np 2 --mca mtl_ofi_provider_include shm \
	-x "LD_LIBRARY_PATH=$libdir" "$suite" 2>&1)
if [ $? -ne 0 ] && grep -q "PML cm cannot be selected\|No components were able to be opened" <<<"$out"; then
	echo "ok: 2 ranks, shm only: refused (the OFI MTL needs FI_REMOTE_COMM)"
else
	echo "FAIL: 2 ranks over shm alone should be refused"
	tail -20 <<<"$out" | sed 's/^/    /'
	fails=$((fails + 1))
fi

# MPICH: $1 ranks, $2 provider, $3 FI_EFA_ENABLE_SHM_TRANSFER, $4 env assignment loading us.
mpich() {
	local np=$1 prov=$2 shm=$3 load=$4 out rc t0
	t0=$(date +%s)
	out=$(timeout 300 "$venv/bin/mpiexec" -n "$np" -genv MPIR_CVAR_CH4_NETMOD ofi \
		-genv MPIR_CVAR_NOLOCAL 1 -genv FI_PROVIDER "$prov" \
		-genv FI_EFA_ENABLE_SHM_TRANSFER "$shm" -genv "${load%%=*}" "${load#*=}" \
		"$venv/bin/python" "$(dirname "$0")/mpi4py_suite.py" 2>&1)
	rc=$?
	local what="MPICH $np ranks, $prov"
	[ "$shm" = 0 ] && what+=" (FI_EFA_ENABLE_SHM_TRANSFER=0)"
	what+=", ${load%%=*}"
	verdict "$what" $rc "$out" mpi4py_suite "$np" $(($(date +%s) - t0))
}

if [ -n "$venv" ]; then
	for np in 2 4; do
		mpich $np efa 1 "LD_LIBRARY_PATH=$libdir"
		mpich $np efa 0 "LD_LIBRARY_PATH=$libdir"
		mpich $np shm 1 "LD_LIBRARY_PATH=$libdir"
	done
	mpich 2 efa 1 "LD_PRELOAD=$libdir/libfabric.so.1"
fi

[ $fails -eq 0 ] || { echo "mpi: $fails run(s) failed"; exit 1; }
echo "mpi: all runs passed"
