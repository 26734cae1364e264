/*
 * MPI point-to-point and collectives with data checks, for running real MPI implementations
 * over our library (tests/mpi/run.sh). Every rank checks every byte it receives; any mismatch
 * aborts the job with a message naming the rank, the test and the size.
 *
 * Also reports which libfabric.so.1 the MPI library loaded (run.sh checks it is ours) and, at
 * the end, which libfabric files every rank has mapped (mapped.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

#include "mapped.h"

#define CHECK(cond, ...)                                                                     \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "rank %d: ", rank);                                  \
			fprintf(stderr, __VA_ARGS__);                                        \
			fprintf(stderr, "\n");                                               \
			MPI_Abort(MPI_COMM_WORLD, 1);                                        \
		}                                                                            \
	} while (0)

/* The byte at offset i of a message from src to dst in round r. */
static unsigned char pat(int src, int dst, size_t i, int r)
{
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull + (uint64_t)src * 131 + (uint64_t)dst * 7 + (uint64_t)r;
	return (unsigned char)(x >> 56 ^ x);
}

static void fill(unsigned char *b, size_t n, int src, int dst, int r)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(src, dst, i, r);
}

static void verify(const unsigned char *b, size_t n, int src, int dst, int r, const char *what)
{
	for (size_t i = 0; i < n; i++)
		CHECK(b[i] == pat(src, dst, i, r), "%s: %zu-byte message from %d: byte %zu wrong",
		      what, n, src, i);
}

static const size_t sizes[] = {0, 1, 8, 100, 4096, 65536, 1 << 20, 16 << 20, 64 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Blocking ring: each rank sends to the next and receives from the previous. */
static void ring(unsigned char *s, unsigned char *d)
{
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];
		fill(s, n, rank, next, (int)k);
		memset(d, 0, n);
		MPI_Status st;
		MPI_Sendrecv(s, (int)n, MPI_BYTE, next, 10 + (int)k, d, (int)n, MPI_BYTE, prev,
			     10 + (int)k, MPI_COMM_WORLD, &st);
		int count;
		MPI_Get_count(&st, MPI_BYTE, &count);
		CHECK((size_t)count == n && st.MPI_SOURCE == prev, "ring: count %d source %d", count,
		      st.MPI_SOURCE);
		verify(d, n, prev, rank, (int)k, "ring");
	}
}

/* Blocking send/recv pairs, rank 0 against every other, both directions. */
static void blocking(unsigned char *s, unsigned char *d)
{
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];
		for (int peer = 1; peer < nranks; peer++) {
			if (rank == 0) {
				fill(s, n, 0, peer, (int)k);
				MPI_Send(s, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
				MPI_Recv(d, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				verify(d, n, peer, 0, (int)k, "blocking");
			} else if (rank == peer) {
				MPI_Recv(d, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				verify(d, n, 0, peer, (int)k, "blocking");
				fill(s, n, peer, 0, (int)k);
				MPI_Send(s, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
			}
		}
	}
}

/* Many non-blocking messages in flight to and from every rank, completed with Waitall. */
static void nonblocking(void)
{
	enum { PER_PEER = 32, LEN = 3000 };
	int npeers = nranks - 1;
	unsigned char *s = malloc((size_t)npeers * PER_PEER * LEN);
	unsigned char *d = malloc((size_t)npeers * PER_PEER * LEN);
	MPI_Request *req = malloc(sizeof(*req) * 2 * npeers * PER_PEER);
	int nr = 0;
	for (int p = 0, j = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		for (int m = 0; m < PER_PEER; m++, j++)
			MPI_Irecv(d + (size_t)j * LEN, LEN, MPI_BYTE, p, 100 + m, MPI_COMM_WORLD, &req[nr++]);
	}
	for (int p = 0, j = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		for (int m = 0; m < PER_PEER; m++, j++) {
			fill(s + (size_t)j * LEN, LEN, rank, p, m);
			MPI_Isend(s + (size_t)j * LEN, LEN, MPI_BYTE, p, 100 + m, MPI_COMM_WORLD, &req[nr++]);
		}
	}
	MPI_Waitall(nr, req, MPI_STATUSES_IGNORE);
	for (int p = 0, j = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		for (int m = 0; m < PER_PEER; m++, j++)
			verify(d + (size_t)j * LEN, LEN, p, rank, m, "non-blocking");
	}
	free(s);
	free(d);
	free(req);
}

/* Rank 0 receives with MPI_ANY_SOURCE / MPI_ANY_TAG and learns who sent what. */
static void wildcards(void)
{
	enum { LEN = 777 };
	unsigned char b[LEN];
	if (rank == 0) {
		int seen = 0;
		for (int i = 0; i < nranks - 1; i++) {
			MPI_Status st;
			MPI_Recv(b, LEN, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			CHECK(st.MPI_TAG == 1000 + st.MPI_SOURCE, "wildcard: tag %d from %d", st.MPI_TAG,
			      st.MPI_SOURCE);
			verify(b, LEN, st.MPI_SOURCE, 0, 99, "wildcard");
			seen |= 1 << st.MPI_SOURCE;
		}
		CHECK(seen == ((1 << nranks) - 2), "wildcard: senders seen %#x", seen);
	} else {
		fill(b, LEN, rank, 0, 99);
		MPI_Send(b, LEN, MPI_BYTE, 0, 1000 + rank, MPI_COMM_WORLD);
	}
}

static void collectives(void)
{
	/* Bcast of 4 MiB from each root in turn. */
	size_t n = 4 << 20;
	unsigned char *b = malloc(n);
	for (int root = 0; root < nranks; root++) {
		if (rank == root)
			fill(b, n, root, 0, 7);
		else
			memset(b, 0, n);
		MPI_Bcast(b, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
		verify(b, n, root, 0, 7, "bcast");
	}
	free(b);
	/* Allreduce of 1M doubles: sum of (rank + 1) * i. */
	int cnt = 1 << 20;
	double *x = malloc(sizeof(double) * cnt), *y = malloc(sizeof(double) * cnt);
	for (int i = 0; i < cnt; i++)
		x[i] = (double)(rank + 1) * i;
	MPI_Allreduce(x, y, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	double f = nranks * (nranks + 1) / 2.0;
	for (int i = 0; i < cnt; i++)
		CHECK(y[i] == f * i, "allreduce: element %d is %g, not %g", i, y[i], f * i);
	free(x);
	free(y);
	/* Alltoall of 64 KiB blocks. */
	size_t blk = 64 << 10;
	unsigned char *s = malloc(blk * nranks), *d = malloc(blk * nranks);
	for (int p = 0; p < nranks; p++)
		fill(s + blk * p, blk, rank, p, 5);
	MPI_Alltoall(s, (int)blk, MPI_BYTE, d, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
	for (int p = 0; p < nranks; p++)
		verify(d + blk * p, blk, p, rank, 5, "alltoall");
	free(s);
	free(d);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	CHECK(nranks >= 2 && nranks <= 16, "run with 2 to 16 ranks");
	if (rank == 0) {
		/* Which libfabric the MPI library loaded (it is already loaded: no new load). */
		void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_NOLOAD);
		Dl_info info = {0};
		void *sym = h ? dlsym(h, "fi_getinfo") : NULL;
		if (sym && dladdr(sym, &info) && info.dli_fname)
			printf("mpi_suite: libfabric %s\n", info.dli_fname);
		else
			printf("mpi_suite: libfabric not loaded\n");
	}
	size_t max = sizes[NSIZES - 1];
	unsigned char *s = malloc(max), *d = malloc(max);
	CHECK(s && d, "out of memory");
	ring(s, d);
	blocking(s, d);
	nonblocking();
	wildcards();
	collectives();
	free(s);
	free(d);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_suite: %d ranks: ring, blocking, non-blocking, wildcards, bcast, allreduce, "
		       "alltoall: 0 B to 64 MiB, every byte checked\n", nranks);
	report_mapped("mpi_suite");
	MPI_Finalize();
	return 0;
}
