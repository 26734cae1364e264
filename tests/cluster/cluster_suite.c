/*
 * MPI collectives, a ring and one-sided operations across the hosts of tests/cluster/cluster.sh,
 * every result checked (any mismatch aborts the job naming the rank, the test and the size):
 *
 *   cluster_suite            ring, bcast, allreduce, alltoall, alltoallv at 8 B - 4 MiB, then
 *                            MPI_Put / MPI_Get / MPI_Accumulate (fence and lock epochs)
 *   cluster_suite loop <s> [bytes]   allreduces of 64 KiB (or <bytes>) for <s> seconds (the
 *                            fault cases), each result checked; rank 0 decides when to stop
 *
 * Rank 0 reports which libfabric.so.1 the MPI library loaded, how many hosts the ranks ran on
 * (distinct MPI_Get_processor_name: each host has its own UTS namespace) and, at the end, which
 * libfabric files every rank has mapped (../mpi/mapped.h).
 * Builds with Open MPI's and MPICH's mpicc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, nranks;

#include "../mpi/mapped.h"

#define CHECK(cond, ...)                                                                     \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "rank %d: ", rank);                                  \
			fprintf(stderr, __VA_ARGS__);                                        \
			fprintf(stderr, "\n");                                               \
			MPI_Abort(MPI_COMM_WORLD, 1);                                        \
		}                                                                            \
	} while (0)

static unsigned char pat(int src, int dst, size_t i, int r)
{
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull + (uint64_t)src * 131 + (uint64_t)dst * 7 +
		     (uint64_t)r * 1000003;
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
		CHECK(b[i] == pat(src, dst, i, r), "%s: %zu bytes from %d: byte %zu wrong", what, n,
		      src, i);
}

/* 8 B to 4 MiB, by factors of 8 (8 B, 64 B, 512 B, 4 KiB, 32 KiB, 256 KiB, 2 MiB) and 4 MiB. */
static const size_t sizes[] = {8, 64, 512, 4096, 32768, 262144, 2 << 20, 4 << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define MAXSZ (4 << 20)

static void ring(unsigned char *s, unsigned char *d)
{
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];
		fill(s, n, rank, next, (int)k);
		memset(d, 0, n);
		MPI_Status st;
		MPI_Sendrecv(s, (int)n, MPI_BYTE, next, 10, d, (int)n, MPI_BYTE, prev, 10,
			     MPI_COMM_WORLD, &st);
		int count;
		MPI_Get_count(&st, MPI_BYTE, &count);
		CHECK((size_t)count == n, "ring: %zu bytes expected, %d arrived", n, count);
		verify(d, n, prev, rank, (int)k, "ring");
	}
}

static void bcast(unsigned char *b)
{
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];
		int root = (int)k % nranks;
		if (rank == root)
			fill(b, n, root, 0, (int)k);
		else
			memset(b, 0, n);
		MPI_Bcast(b, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
		verify(b, n, root, 0, (int)k, "bcast");
	}
}

/* Sums of 64-bit integers: exact whatever the reduction order. */
static void allreduce(void)
{
	int64_t *x = malloc(MAXSZ), *y = malloc(MAXSZ);
	for (size_t k = 0; k < NSIZES; k++) {
		int cnt = (int)(sizes[k] / sizeof(int64_t));
		for (int i = 0; i < cnt; i++)
			x[i] = (int64_t)(rank + 1) * (i + 1) + (int64_t)k * rank;
		MPI_Allreduce(x, y, cnt, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
		int64_t r = nranks * (nranks + 1) / 2, ks = (int64_t)k * (nranks - 1) * nranks / 2;
		for (int i = 0; i < cnt; i++)
			CHECK(y[i] == r * (i + 1) + ks, "allreduce: %zu bytes: element %d is %lld",
			      sizes[k], i, (long long)y[i]);
	}
	free(x);
	free(y);
}

/* Alltoall: each rank sends size / nranks bytes to each rank (size bytes in all). */
static void alltoall(unsigned char *s, unsigned char *d)
{
	for (size_t k = 0; k < NSIZES; k++) {
		size_t blk = sizes[k] / (size_t)nranks;
		if (blk == 0)
			blk = 1;
		for (int p = 0; p < nranks; p++)
			fill(s + blk * p, blk, rank, p, (int)k);
		memset(d, 0, blk * nranks);
		MPI_Alltoall(s, (int)blk, MPI_BYTE, d, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
		for (int p = 0; p < nranks; p++)
			verify(d + blk * p, blk, p, rank, (int)k, "alltoall");
	}
}

/* Alltoallv: src sends ((src + dst) % 3) / 2 of a block to dst: none, half or all of it. */
static size_t vlen(size_t blk, int src, int dst)
{
	return blk * (size_t)((src + dst) % 3) / 2;
}

static void alltoallv(unsigned char *s, unsigned char *d)
{
	int *sc = malloc(sizeof(int) * nranks), *sd = malloc(sizeof(int) * nranks);
	int *rc = malloc(sizeof(int) * nranks), *rd = malloc(sizeof(int) * nranks);
	for (size_t k = 0; k < NSIZES; k++) {
		size_t blk = sizes[k] / (size_t)nranks, so = 0, ro = 0;
		for (int p = 0; p < nranks; p++) {
			sc[p] = (int)vlen(blk, rank, p);
			sd[p] = (int)so;
			fill(s + so, (size_t)sc[p], rank, p, 20 + (int)k);
			so += (size_t)sc[p];
			rc[p] = (int)vlen(blk, p, rank);
			rd[p] = (int)ro;
			ro += (size_t)rc[p];
		}
		memset(d, 0, ro);
		MPI_Alltoallv(s, sc, sd, MPI_BYTE, d, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
		for (int p = 0; p < nranks; p++)
			verify(d + rd[p], (size_t)rc[p], p, rank, 20 + (int)k, "alltoallv");
	}
	free(sc);
	free(sd);
	free(rc);
	free(rd);
}

/*
 * One-sided, 8 B to 1 MiB per operation: each rank's window has one slot per rank.
 *   fence epoch: MPI_Put of our pattern into slot `rank` of the next rank's window;
 *   fence epoch: MPI_Get of that slot back from the next rank, checked;
 *   lock epoch:  MPI_Accumulate (MPI_SUM, int64) of (rank + 1) * (i + 1) into rank 0's window
 *                from every rank, under MPI_Win_lock(MPI_LOCK_SHARED); rank 0 checks the sums.
 */
static void onesided(void)
{
	const size_t rsizes[] = {8, 4096, 65536, 1 << 20};
	size_t slot = 1 << 20;
	unsigned char *win_buf;
	MPI_Win win;
	MPI_Alloc_mem((MPI_Aint)(slot * nranks), MPI_INFO_NULL, &win_buf);
	memset(win_buf, 0, slot * nranks);
	MPI_Win_create(win_buf, (MPI_Aint)(slot * nranks), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	unsigned char *s = malloc(slot), *g = malloc(slot);
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	for (size_t k = 0; k < sizeof(rsizes) / sizeof(rsizes[0]); k++) {
		size_t n = rsizes[k];
		fill(s, n, rank, next, 40 + (int)k);
		MPI_Win_fence(0, win);
		MPI_Put(s, (int)n, MPI_BYTE, next, (MPI_Aint)(slot * rank), (int)n, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		verify(win_buf + slot * prev, n, prev, rank, 40 + (int)k, "put");
		memset(g, 0, n);
		MPI_Get(g, (int)n, MPI_BYTE, next, (MPI_Aint)(slot * rank), (int)n, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		verify(g, n, rank, next, 40 + (int)k, "get");
		/* Accumulate into slot 0.. of rank 0, zeroed first. */
		if (rank == 0)
			memset(win_buf, 0, n);
		MPI_Win_fence(0, win);
		int cnt = (int)(n / sizeof(int64_t));
		int64_t *a = (int64_t *)s;
		for (int i = 0; i < cnt; i++)
			a[i] = (int64_t)(rank + 1) * (i + 1);
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		MPI_Accumulate(a, cnt, MPI_INT64_T, 0, 0, cnt, MPI_INT64_T, MPI_SUM, win);
		MPI_Win_unlock(0, win);
		MPI_Win_fence(0, win);
		if (rank == 0) {
			int64_t r = nranks * (nranks + 1) / 2, *w = (int64_t *)win_buf;
			MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
			for (int i = 0; i < cnt; i++)
				CHECK(w[i] == r * (i + 1), "accumulate: %zu bytes: element %d is %lld", n,
				      i, (long long)w[i]);
			MPI_Win_unlock(0, win);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_Win_free(&win);
	MPI_Free_mem(win_buf);
	free(s);
	free(g);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Allreduces of `CNT` int64 (64 KiB by default) for `secs` seconds; element 0 carries rank
 * 0's stop flag. */
static long loop(double secs, int CNT)
{
	int64_t *x = malloc(sizeof(int64_t) * CNT), *y = malloc(sizeof(int64_t) * CNT);
	double t0 = now();
	long it = 0;
	for (;; it++) {
		x[0] = rank == 0 && now() - t0 > secs;
		for (int i = 1; i < CNT; i++)
			x[i] = (int64_t)(rank + 1) * i + it;
		MPI_Allreduce(x, y, CNT, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
		int64_t r = nranks * (nranks + 1) / 2;
		for (int i = 1; i < CNT; i++)
			CHECK(y[i] == r * i + it * nranks, "loop: iteration %ld: element %d is %lld", it,
			      i, (long long)y[i]);
		if (y[0])
			break;
	}
	free(x);
	free(y);
	return it + 1;
}

/* How many distinct hosts the ranks run on. */
static int hosts(void)
{
	char name[MPI_MAX_PROCESSOR_NAME] = {0};
	int len;
	MPI_Get_processor_name(name, &len);
	char *all = calloc((size_t)nranks, MPI_MAX_PROCESSOR_NAME);
	MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
		      MPI_COMM_WORLD);
	int distinct = 0;
	for (int i = 0; i < nranks; i++) {
		int seen = 0;
		for (int j = 0; j < i; j++)
			seen |= !strcmp(all + (size_t)i * MPI_MAX_PROCESSOR_NAME,
					all + (size_t)j * MPI_MAX_PROCESSOR_NAME);
		distinct += !seen;
	}
	free(all);
	return distinct;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (rank == 0) {
		void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_NOLOAD);
		Dl_info info = {0};
		void *sym = h ? dlsym(h, "fi_getinfo") : NULL;
		if (sym && dladdr(sym, &info) && info.dli_fname)
			printf("cluster_suite: libfabric %s\n", info.dli_fname);
		else
			printf("cluster_suite: libfabric not loaded\n");
		fflush(stdout);
	}
	int nhosts = hosts();
	double t0 = now();
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "loop")) {
		int cnt = argc == 4 ? atoi(argv[3]) / 8 : 8192;
		CHECK(cnt >= 2, "loop: at least 16 bytes");
		long it = loop(atof(argv[2]), cnt);
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0)
			printf("cluster_suite: %d ranks on %d hosts: %ld allreduces of %d B in %.1f s, "
			       "every element checked\n",
			       nranks, nhosts, it, cnt * 8, now() - t0);
	} else {
		unsigned char *s = malloc(MAXSZ), *d = malloc(MAXSZ);
		CHECK(s && d, "out of memory");
		ring(s, d);
		bcast(d);
		allreduce();
		alltoall(s, d);
		alltoallv(s, d);
		onesided();
		free(s);
		free(d);
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0)
			printf("cluster_suite: %d ranks on %d hosts: ring, bcast, allreduce, alltoall, "
			       "alltoallv 8 B - 4 MiB, put/get/accumulate 8 B - 1 MiB: every byte "
			       "checked (%.1f s)\n",
			       nranks, nhosts, now() - t0);
	}
	report_mapped("cluster_suite");
	MPI_Finalize();
	return 0;
}
