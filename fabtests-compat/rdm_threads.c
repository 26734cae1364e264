/*
 * rdm_threads: several threads posting and reading one FI_THREAD_SAFE endpoint's CQ at once
 * (common options in common.h; -S is ignored). On each side THREADS threads share the
 * endpoint and its CQ: client threads send tagged messages of three sizes, server threads
 * post tagged receives for their own client thread's tag, and every thread reads the CQ and
 * settles whichever completion it gets, its own or another thread's. The server checks that
 * every message arrives once, in order per sending thread (send-after-send), with its bytes.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

#define THREADS 4
#define MSGS 2000
#define WINDOW 16
#define SLOT 20000

static const size_t msg_sizes[3] = { 8, 1000, SLOT };

struct op {
	int thread, slot;
	int seq; /* which of its thread's messages it was posted for */
	atomic_int busy;
};

struct worker {
	int id;
	pthread_t tid;
	struct op ops[WINDOW];
	atomic_int done; /* operations of this thread completed (by any thread) */
	int next;	 /* messages this thread expects next (server) */
	uint8_t *bufs;
};

static struct worker workers[THREADS];

static size_t size_of(int i)
{
	return msg_sizes[i % 3];
}

static uint64_t tag_of(int t, int i)
{
	return ((uint64_t)(t + 1) << 32) | (uint32_t)i;
}

/* Reads one completion if there is one and settles it; returns 1 if it read one. */
static int reap(void)
{
	struct fi_cq_tagged_entry e;
	ssize_t r = fi_cq_read(ft_cq, &e, 1);

	if (r == -FI_EAGAIN)
		return 0;
	if (r != 1) {
		struct fi_cq_err_entry err = { 0 };

		if (r == -FI_EAVAIL && fi_cq_readerr(ft_cq, &err, 0) == 1)
			FT_DIE("completion error %d (%s)", err.err, fi_strerror(err.err));
		FT_DIE("fi_cq_read: %zd", r);
	}
	struct op *op = e.op_context;
	struct worker *w = &workers[op->thread];

	if (!ft_client()) {
		int t = op->thread, i = (int)(uint32_t)e.tag;
		uint8_t *p = w->bufs + (size_t)op->slot * SLOT;

		/* The receives of one thread match its sender's messages in order. */
		if ((e.tag >> 32) != (uint64_t)(t + 1) || i != op->seq || e.len != size_of(i))
			FT_DIE("thread %d: receive %d got tag 0x%" PRIx64 " len %zu", t, op->seq,
			       e.tag, e.len);
		ft_verify(p, e.len, (size_t)t * MSGS + i, "a message between threads");
	}
	atomic_store(&op->busy, 0);
	atomic_fetch_add(&w->done, 1);
	return 1;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	int posted = 0;
	double since = ft_now();

	while (atomic_load(&w->done) < MSGS) {
		for (int s = 0; s < WINDOW && posted < MSGS; s++) {
			struct op *op = &w->ops[s];
			uint8_t *p = w->bufs + (size_t)s * SLOT;
			ssize_t r;

			if (atomic_load(&op->busy))
				continue;
			atomic_store(&op->busy, 1);
			op->seq = posted;
			if (ft_client()) {
				ft_fill(p, size_of(posted), (size_t)w->id * MSGS + posted);
				r = fi_tsend(ft_ep, p, size_of(posted), ft_desc, ft_peer,
					     tag_of(w->id, posted), op);
			} else {
				r = fi_trecv(ft_ep, p, SLOT, ft_desc, ft_peer, tag_of(w->id, 0),
					     0xffffffffULL, op);
			}
			if (r == -FI_EAGAIN) {
				atomic_store(&op->busy, 0);
				break;
			}
			if (r)
				FT_DIE("thread %d: posting: %s", w->id, fi_strerror((int)-r));
			posted++;
		}
		if (reap())
			since = ft_now();
		else if (ft_now() - since > 30)
			FT_DIE("thread %d: no completion for 30 s (%d of %d done)", w->id,
			       atomic_load(&w->done), MSGS);
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_threads [-p prov] [-d domain] [-s src] [-e rdm] [-B port] "
			"[-P port] [-E] [server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	ft_prog = "rdm_threads";
	ft_threading = FI_THREAD_SAFE;
	ft_parse(argc, argv, "", NULL, usage);
	ft_oob_connect();
	ft_open(FI_MSG | FI_TAGGED, (size_t)THREADS * WINDOW * SLOT);
	ft_banner("threads functional test");
	ft_exchange();
	for (int t = 0; t < THREADS; t++) {
		workers[t].id = t;
		workers[t].bufs = ft_buf + (size_t)t * WINDOW * SLOT;
		for (int s = 0; s < WINDOW; s++)
			workers[t].ops[s] = (struct op){ .thread = t, .slot = s };
	}
	/* The server's receives are posted by its threads; the client starts once it is up. */
	ft_sync();
	for (int t = 0; t < THREADS; t++)
		if (pthread_create(&workers[t].tid, NULL, run, &workers[t]))
			FT_DIE("pthread_create failed");
	for (int t = 0; t < THREADS; t++)
		pthread_join(workers[t].tid, NULL);
	if (ft_client())
		printf("ok: %d threads x %d tagged messages (8 B, 1000 B, 20000 B) posted and reaped "
		       "at once on one FI_THREAD_SAFE endpoint; each arrived once, in order, intact\n",
		       THREADS, MSGS);
	ft_close();
	if (ft_client())
		printf("rdm_threads: all steps passed\n");
	return 0;
}
