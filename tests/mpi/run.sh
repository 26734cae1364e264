#!/usr/bin/env bash
# Open MPI from Debian (4.1, built against libfabric 1.x) runs tests/mpi/mpi_suite.c over our
# library with its OFI MTL (`--mca pml cm --mca mtl ofi`), 2 and 4 ranks on this host:
#   - over efa as by default (ranks on one host reach each other through shm underneath), and
#     with FI_EFA_ENABLE_SHM_TRANSFER=0 (everything through the software SRD device);
#   - loaded through the library path, and with LD_PRELOAD while Debian's libfabric1 is what
#     Open MPI links: the suite reports which libfabric.so.1 is loaded and it must be ours;
#   - `mtl_ofi_provider_include shm` must be refused, as Debian's libfabric refuses it: the
#     MTL asks for FI_REMOTE_COMM, which a shared-memory provider cannot offer.
#
#   run.sh <mpi_suite binary> <dir with our libfabric.so.1>
set -uo pipefail
suite=${1:?usage: run.sh <mpi_suite> <libdir>}
libdir=$(cd "${2:?usage: run.sh <mpi_suite> <libdir>}" && pwd)
fails=0
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca pml cm --mca mtl ofi)

# $1: ranks; $2: env assignment that loads our library; the rest: more `-x VAR=value`.
run() {
	local np=$1 load=$2; shift 2
	local out rc t0
	t0=$(date +%s)
	out=$(timeout 300 "${mpirun[@]}" -np "$np" --mca mtl_ofi_provider_include efa \
		-x "$load" "$@" "$suite" 2>&1)
	rc=$?
	local what="$np ranks, efa, ${load%%=*}${*:+ $*}"
	if [ $rc -ne 0 ] || ! grep -q "^mpi_suite: libfabric $libdir/libfabric.so.1$" <<<"$out" ||
		! grep -q "^mpi_suite: $np ranks: .* every byte checked" <<<"$out"; then
		echo "FAIL: $what (rc=$rc)"
		tail -20 <<<"$out" | sed 's/^/    /'
		fails=$((fails + 1))
		return
	fi
	echo "ok: $what: $(sed -n "s/^mpi_suite: [0-9]* ranks: //p" <<<"$out") ($(($(date +%s) - t0)) s)"
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

[ $fails -eq 0 ] || { echo "mpi: $fails run(s) failed"; exit 1; }
echo "mpi: all runs passed"
