/*
 * rdm_mtu: two processes whose devices have different MTUs (run.sh starts them with different
 * FI_EFA_MTU_SIZE, or on different devices) exchange messages, tagged messages, writes and
 * reads of every size both ways: empty, one byte, every power of two to 8 MiB, and each
 * side's inject size and MTU (and the eager limits just under the MTU) plus and minus one.
 * The sides tell each other their MTU (nic->link_attr->mtu) and inject size over the
 * out-of-band channel. Every byte is checked. The client prints one "ok:" line per step.
 */
#include "common.h"

#define HALF (8u << 20)
/* The registered buffer: what a side sends or reads into, then what it receives or is
 * written to (the peer's target). */
#define REGION (2 * HALF)

static int rx_ctx, tx_ctx;
static size_t sizes[128], nsizes;

static void add(size_t n)
{
	for (size_t i = 0; i < nsizes; i++)
		if (sizes[i] == n)
			return;
	if (n <= HALF && nsizes < sizeof(sizes) / sizeof(sizes[0]))
		sizes[nsizes++] = n;
}

static int cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/* The sizes of both sides' limits: theirs and ours. */
static void make_sizes(void)
{
	uint64_t mine[2] = { 0, ft_info->tx_attr->inject_size }, theirs[2];

	if (ft_info->nic && ft_info->nic->link_attr)
		mine[0] = ft_info->nic->link_attr->mtu;
	ft_oob_send(mine, sizeof(mine));
	ft_oob_recv(theirs, sizeof(theirs));
	add(0);
	for (size_t s = 1; s <= HALF; s <<= 1)
		add(s);
	add((64 << 10) - 1);
	add((64 << 10) + 1);
	for (int side = 0; side < 2; side++) {
		uint64_t *v = side ? theirs : mine;
		/* Eager limits below the MTU: message and tagged headers, CTSDATA's. */
		uint64_t edges[] = { v[1], v[0], v[0] - 12, v[0] - 20, v[0] - 32 };

		for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]); e++) {
			if (!v[0] || edges[e] < 2)
				continue;
			add(edges[e] - 1);
			add(edges[e]);
			add(edges[e] + 1);
		}
	}
	qsort(sizes, nsizes, sizeof(sizes[0]), cmp);
	if (ft_client())
		printf("ok: %zu sizes; MTU %" PRIu64 " and %" PRIu64 ", inject %" PRIu64
		       " and %" PRIu64 "\n", nsizes, mine[0], theirs[0], mine[1], theirs[1]);
}

/* One message of `n` bytes from the side that `sends` to the other. */
static void message(size_t n, int tagged, int sends, size_t seed)
{
	char what[80];
	uint64_t tag = 0x3100 + n;

	snprintf(what, sizeof(what), "%s of %zu B %s", tagged ? "fi_tsend" : "fi_send", n,
		 ft_client() == sends ? "to the server" : "to the client");
	if (sends) {
		ft_fill(ft_buf, n, seed);
		ft_sync();
		if (tagged)
			FT_POST(fi_tsend(ft_ep, ft_buf, n, ft_desc, ft_peer, tag, &tx_ctx));
		else
			FT_POST(fi_send(ft_ep, ft_buf, n, ft_desc, ft_peer, &tx_ctx));
		ft_expect(&tx_ctx, FI_SEND | (tagged ? FI_TAGGED : FI_MSG), what);
	} else {
		uint8_t *dst = ft_buf + HALF;
		struct fi_cq_tagged_entry e;

		memset(dst, 0, n + 1);
		if (tagged)
			FT_POST(fi_trecv(ft_ep, dst, HALF, ft_desc, ft_peer, tag, 0, &rx_ctx));
		else
			FT_POST(fi_recv(ft_ep, dst, HALF, ft_desc, ft_peer, &rx_ctx));
		ft_sync();
		e = ft_expect(&rx_ctx, FI_RECV | (tagged ? FI_TAGGED : FI_MSG), what);
		if (e.len != n)
			FT_DIE("%s: received %zu bytes", what, e.len);
		ft_verify(dst, n, seed, what);
		if (dst[n])
			FT_DIE("%s: a byte past the message was written", what);
	}
	ft_sync();
}

/* A write of `n` bytes into the other side's target half, then a read of them back. */
static void rma(size_t n, int acts, size_t seed)
{
	char what[80];

	snprintf(what, sizeof(what), "fi_write of %zu B by the %s", n,
		 ft_client() == acts ? "client" : "server");
	if (!acts)
		memset(ft_buf + HALF, 0, n + 1);
	ft_sync();
	if (acts) {
		struct iovec v = { ft_buf, n };
		struct fi_rma_iov r = { ft_peer_addr + HALF, n, ft_peer_key };
		struct fi_msg_rma m = { .msg_iov = &v, .desc = &ft_desc, .iov_count = 1,
					.addr = ft_peer, .rma_iov = &r, .rma_iov_count = 1,
					.context = &tx_ctx };

		ft_fill(ft_buf, n, seed);
		/* Delivery complete: the bytes are in the peer's memory when this completes. */
		FT_POST(fi_writemsg(ft_ep, &m, FI_DELIVERY_COMPLETE));
		ft_expect(&tx_ctx, FI_WRITE | FI_RMA, what);
		ft_sync();
		/* The peer checked them and put another pattern there: read it back. */
		ft_sync();
		memset(ft_buf, 0, n + 1);
		FT_POST(fi_read(ft_ep, ft_buf, n, ft_desc, ft_peer, ft_peer_addr + HALF,
				ft_peer_key, &tx_ctx));
		snprintf(what, sizeof(what), "fi_read of %zu B by the %s", n,
			 ft_client() ? "client" : "server");
		ft_expect(&tx_ctx, FI_READ | FI_RMA, what);
		ft_verify(ft_buf, n, seed + 1, what);
		if (ft_buf[n])
			FT_DIE("%s: a byte past the read was written", what);
	} else {
		ft_sync();
		ft_verify(ft_buf + HALF, n, seed, what);
		if (ft_buf[HALF + n])
			FT_DIE("%s: a byte past the write was written", what);
		ft_fill(ft_buf + HALF, n, seed + 1);
		ft_sync();
	}
	ft_sync();
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_mtu [-p prov] [-d domain] [-s src] [-e rdm] [-B port] [-P port] "
			"[-E] [server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	char what[96];

	ft_prog = "rdm_mtu";
	ft_parse(argc, argv, "", NULL, usage);
	ft_oob_connect();
	ft_open(FI_MSG | FI_TAGGED | FI_RMA, REGION);
	ft_banner("every size both ways between devices of different MTUs");
	ft_exchange();
	make_sizes();
	for (size_t i = 0; i < nsizes; i++) {
		size_t n = sizes[i];

		for (int client_acts = 1; client_acts >= 0; client_acts--) {
			int acts = ft_client() == client_acts;

			message(n, 0, acts, i);
			message(n, 1, acts, i + 1);
			rma(n, acts, i + 2);
		}
		snprintf(what, sizeof(what), "%zu B: messages, tagged, write and read both ways", n);
		ft_ok(what);
	}
	ft_close();
	if (ft_client())
		printf("rdm_mtu: all steps passed\n");
	return 0;
}
