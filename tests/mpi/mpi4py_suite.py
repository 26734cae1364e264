"""mpi4py programs for MPICH (PyPI) over our library (tests/mpi/run.sh): a ring, an allreduce of
numpy arrays, a large send, and a wildcard receive, every element checked. Prints which
libfabric.so.1 the process mapped, so that the runner can check it is ours."""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def fail(msg):
    print(f"rank {rank}: {msg}", file=sys.stderr, flush=True)
    comm.Abort(1)


def pattern(n, src, dst, r):
    i = np.arange(n, dtype=np.uint64)
    return ((i * np.uint64(2654435761) + np.uint64(src * 131 + dst * 7 + r)) >> np.uint64(3)).astype(np.uint8)


# Ring of messages from 0 B to 16 MiB.
nxt, prv = (rank + 1) % size, (rank - 1) % size
for k, n in enumerate([0, 1, 8, 4096, 65536, 1 << 20, 16 << 20]):
    out = pattern(n, rank, nxt, k)
    got = np.empty(n, dtype=np.uint8)
    comm.Sendrecv(out, dest=nxt, sendtag=k, recvbuf=got, source=prv, recvtag=k)
    if not np.array_equal(got, pattern(n, prv, rank, k)):
        fail(f"ring: {n}-byte message from {prv} differs")

# Allreduce of a numpy array of a million doubles.
x = np.arange(1 << 20, dtype=np.float64) * (rank + 1)
y = np.empty_like(x)
comm.Allreduce(x, y, op=MPI.SUM)
if not np.array_equal(y, np.arange(1 << 20, dtype=np.float64) * (size * (size + 1) / 2)):
    fail("allreduce: wrong sum")

# A large send: 64 MiB from rank 0 to the last rank.
n = 64 << 20
if rank == 0:
    comm.Send(pattern(n, 0, size - 1, 9), dest=size - 1, tag=77)
elif rank == size - 1:
    got = np.empty(n, dtype=np.uint8)
    comm.Recv(got, source=0, tag=77)
    if not np.array_equal(got, pattern(n, 0, size - 1, 9)):
        fail("large send: 64 MiB differ")

# Wildcards: rank 0 hears from everyone, in whatever order.
if rank == 0:
    seen = set()
    for _ in range(size - 1):
        st = MPI.Status()
        msg = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        if msg != ("hello", st.Get_source()) or st.Get_tag() != 500 + st.Get_source():
            fail(f"wildcard: {msg} with tag {st.Get_tag()}")
        seen.add(st.Get_source())
    if seen != set(range(1, size)):
        fail(f"wildcard: heard from {sorted(seen)}")
else:
    comm.send(("hello", rank), dest=0, tag=500 + rank)

comm.Barrier()
if rank == 0:
    maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libfabric.so" in l})
    print(f"mpi4py_suite: libfabric {' '.join(maps) if maps else 'none'}")
    print(f"mpi4py_suite: {size} ranks: ring, allreduce, 64 MiB send, wildcards: every element checked")
