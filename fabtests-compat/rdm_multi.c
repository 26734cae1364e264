/*
 * rdm_multi: one server and several clients (-n <processes>, default 4) on one RDM endpoint
 * each (common options in common.h; -S is ignored). Start the server with -n, then n-1
 * clients; the server hands each its rank over the out-of-band channel.
 *   1. Many to one: every client sends MSGS tagged messages; the server's receives name no
 *      source, and each completion's source (fi_cq_readfrom, FI_SOURCE) must be the sender's
 *      AV entry, with every sender's messages matched in order (FI_ORDER_SAS: message j+1 of
 *      a sender takes a later receive than message j) and intact. Completions may come in
 *      another order (comp_order FI_ORDER_NONE): a medium message whose last segment is
 *      late completes after the next message, as upstream's efa does.
 *   2. Directed receive: every client sends one message; a receive directed at the last client
 *      must take its message whatever arrived first; the others then go to undirected ones.
 *   3. One to many: the server sends every client a message naming its rank.
 */
#include "common.h"

#define MAX_PROCS 16
#define MSGS 100
#define MSG_MAX 6000

static int nprocs = 4, rank;
static int conns[MAX_PROCS];
static fi_addr_t addrs[MAX_PROCS]; /* server: the clients' AV entries, by rank */

static size_t size_of(int j)
{
	return (size_t)(j * 61) % MSG_MAX;
}

static void own_option(int c, const char *arg)
{
	(void)c;
	nprocs = atoi(arg);
	if (nprocs < 2 || nprocs > MAX_PROCS)
		FT_DIE("-n: 2 to %d processes", MAX_PROCS);
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_multi [-p prov] [-d domain] [-s src] [-e rdm] [-n procs] "
			"[-B port] [-P port] [-E] [server]\n");
	exit(2);
}

/* Server: talks to client `r` on the out-of-band channel. */
static void to(int r)
{
	ft_sock = conns[r];
}

static void sync_all(void)
{
	if (ft_client()) {
		ft_sync();
		return;
	}
	for (int r = 1; r < nprocs; r++) {
		uint8_t b;

		to(r);
		ft_oob_recv(&b, 1);
	}
	for (int r = 1; r < nprocs; r++) {
		uint8_t b = 1;

		to(r);
		ft_oob_send(&b, 1);
	}
}

/* Names: every client sends its own to the server, which answers with its name and rank. */
static void exchange(void)
{
	char name[256];
	size_t len = sizeof(name);
	uint32_t n;

	FT_CHECK(fi_getname(&ft_ep->fid, name, &len));
	if (ft_client()) {
		n = len;
		ft_oob_send(&n, sizeof(n));
		ft_oob_send(name, len);
		ft_oob_recv(&rank, sizeof(rank));
		ft_oob_recv(&n, sizeof(n));
		if (n > sizeof(name))
			FT_DIE("server's address is %u bytes", n);
		ft_oob_recv(name, n);
		if (fi_av_insert(ft_av, name, 1, &ft_peer, 0, NULL) != 1)
			FT_DIE("fi_av_insert of the server's address failed");
		return;
	}
	for (int r = 1; r < nprocs; r++) {
		char peer[256];
		uint32_t m;

		to(r);
		ft_oob_recv(&m, sizeof(m));
		if (m > sizeof(peer))
			FT_DIE("client %d's address is %u bytes", r, m);
		ft_oob_recv(peer, m);
		if (fi_av_insert(ft_av, peer, 1, &addrs[r], 0, NULL) != 1)
			FT_DIE("fi_av_insert of client %d failed", r);
		n = len;
		ft_oob_send(&r, sizeof(r));
		ft_oob_send(&n, sizeof(n));
		ft_oob_send(name, len);
	}
}

static int rank_of(fi_addr_t src)
{
	for (int r = 1; r < nprocs; r++)
		if (addrs[r] == src)
			return r;
	return -1;
}

/* Server: reads one completion with its source. */
static void next_from(struct fi_cq_tagged_entry *e, fi_addr_t *src)
{
	double since = ft_now();

	for (;;) {
		ssize_t r = fi_cq_readfrom(ft_cq, e, 1, src);

		if (r == 1)
			return;
		if (r == -FI_EAVAIL)
			ft_cq_error();
		if (r != -FI_EAGAIN)
			FT_DIE("fi_cq_readfrom: %s", fi_strerror((int)-r));
		if (ft_now() - since > 30)
			FT_DIE("no completion for 30 s");
	}
}

static void many_to_one(void)
{
	int total = (nprocs - 1) * MSGS;
	static struct fi_context slots[MAX_PROCS * MSGS];
	/* The receive (slot) each sender's message j took; -1 while not arrived. */
	static int slot_of[MAX_PROCS][MSGS];

	if (ft_client()) {
		sync_all();
		for (int j = 0; j < MSGS; j++) {
			uint8_t *p = ft_buf + (size_t)(j % 8) * MSG_MAX;

			ft_fill(p, size_of(j), (size_t)rank * 1000 + j);
			FT_POST(fi_tsend(ft_ep, p, size_of(j), ft_desc, ft_peer,
					 ((uint64_t)rank << 16) | j, NULL));
			if (j % 8 == 7)
				ft_wait(8, NULL);
		}
		ft_wait(MSGS % 8, NULL);
		sync_all();
		return;
	}
	memset(slot_of, -1, sizeof(slot_of));
	for (int i = 0; i < total; i++)
		FT_POST(fi_trecv(ft_ep, ft_buf + (size_t)i * MSG_MAX, MSG_MAX, ft_desc,
				 FI_ADDR_UNSPEC, 0, ~0ULL, &slots[i]));
	sync_all();
	for (int i = 0; i < total; i++) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src;
		int r, j, slot;

		next_from(&e, &src);
		r = rank_of(src);
		j = (int)(e.tag & 0xffff);
		slot = (int)((struct fi_context *)e.op_context - slots);
		if (r < 1 || (uint64_t)r != e.tag >> 16 || j >= MSGS || slot_of[r][j] >= 0 ||
		    e.len != size_of(j) || slot < 0 || slot >= total)
			FT_DIE("many to one: message tag 0x%" PRIx64 " len %zu from fi_addr %" PRIu64
			       " (rank %d): unknown, repeated or of the wrong size", e.tag, e.len,
			       (uint64_t)src, r);
		ft_verify(ft_buf + (size_t)slot * MSG_MAX, e.len, (size_t)r * 1000 + j,
			  "many to one");
		slot_of[r][j] = slot;
	}
	/* Receives are taken in the order posted, so a sender's messages must hold rising slots. */
	for (int r = 1; r < nprocs; r++)
		for (int j = 1; j < MSGS; j++)
			if (slot_of[r][j] <= slot_of[r][j - 1])
				FT_DIE("many to one: rank %d's message %d took receive %d, before its "
				       "message %d's (%d)", r, j, slot_of[r][j], j - 1,
				       slot_of[r][j - 1]);
	sync_all();
}

static void directed(void)
{
	int last = nprocs - 1;

	if (!(ft_info->caps & FI_DIRECTED_RECV)) {
		sync_all();
		sync_all();
		return;
	}
	if (ft_client()) {
		sync_all();
		ft_fill(ft_buf, 100, 500 + rank);
		FT_POST(fi_tsend(ft_ep, ft_buf, 100, ft_desc, ft_peer, 0xd1, NULL));
		ft_wait(1, NULL);
		sync_all();
		return;
	}
	struct fi_context ctx[MAX_PROCS];
	struct fi_cq_tagged_entry e;
	fi_addr_t src;

	FT_POST(fi_trecv(ft_ep, ft_buf, MSG_MAX, ft_desc, addrs[last], 0xd1, 0, &ctx[0]));
	sync_all();
	next_from(&e, &src);
	if (e.op_context != &ctx[0] || src != addrs[last])
		FT_DIE("directed receive: completed from fi_addr %" PRIu64 ", expected %" PRIu64,
		       (uint64_t)src, (uint64_t)addrs[last]);
	ft_verify(ft_buf, 100, 500 + last, "directed receive");
	for (int r = 1; r < last; r++)
		FT_POST(fi_trecv(ft_ep, ft_buf + (size_t)r * MSG_MAX, MSG_MAX, ft_desc,
				 FI_ADDR_UNSPEC, 0xd1, 0, &ctx[r]));
	for (int i = 1; i < last; i++) {
		int r;

		next_from(&e, &src);
		r = rank_of(src);
		if (r < 1 || r == last)
			FT_DIE("undirected receive after the directed one: from fi_addr %" PRIu64,
			       (uint64_t)src);
		ft_verify(ft_buf + (size_t)((struct fi_context *)e.op_context - ctx) * MSG_MAX,
			  100, 500 + r, "undirected receive");
	}
	sync_all();
}

static void one_to_many(void)
{
	if (ft_client()) {
		struct fi_cq_tagged_entry e;

		FT_POST(fi_recv(ft_ep, ft_buf, MSG_MAX, ft_desc, ft_peer, NULL));
		sync_all();
		ft_next(&e, NULL);
		if (e.len != 4 || *(int *)ft_buf != rank)
			FT_DIE("one to many: got %zu bytes naming rank %d, I am %d", e.len,
			       *(int *)ft_buf, rank);
		sync_all();
		return;
	}
	sync_all();
	for (int r = 1; r < nprocs; r++) {
		memcpy(ft_buf + (size_t)r * 64, &r, sizeof(r));
		FT_POST(fi_send(ft_ep, ft_buf + (size_t)r * 64, 4, ft_desc, addrs[r], NULL));
	}
	ft_wait(nprocs - 1, NULL);
	sync_all();
}

int main(int argc, char **argv)
{
	ft_prog = "rdm_multi";
	ft_parse(argc, argv, "n:", own_option, usage);
	if (ft_client()) {
		ft_oob_connect();
	} else {
		int l = ft_oob_listen();

		for (int r = 1; r < nprocs; r++)
			conns[r] = ft_oob_accept(l);
		close(l);
	}
	ft_open(FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV,
		(size_t)MAX_PROCS * MSGS * MSG_MAX);
	ft_banner("several processes functional test");
	exchange();
	many_to_one();
	directed();
	one_to_many();
	if (ft_client()) {
		if (rank == 1)
			printf("ok: %d processes: %d tagged messages from each client with their "
			       "source (FI_SOURCE) and order checked; a receive directed at one "
			       "client; a message from the server to each\n", nprocs, MSGS);
		printf("rdm_multi: all steps passed (rank %d)\n", rank);
	}
	sync_all();
	return 0;
}
