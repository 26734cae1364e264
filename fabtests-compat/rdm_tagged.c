/*
 * rdm_tagged: functional test of tagged messages over an RDM endpoint (fi_tagged(3)), in the
 * manner of upstream fabtests' functional tests (common options in common.h; -S is ignored):
 * tag matching and ignore bits, unexpected messages, FI_PEEK, FI_CLAIM, FI_DISCARD, cancel,
 * remote CQ data and inject. The client sends, the server receives and checks every
 * completion field and byte; each step is synchronised over the out-of-band channel. The
 * client prints one "ok:" line per step; any failure ends both sides with exit status 1.
 */
#include "common.h"

#define REGION (1u << 20)

static int tx_ctx, slot_ctx[4];

/* Client side of a step: sends n bytes of pattern `seed` with `tag` and reaps the send. */
static void tsend(size_t n, uint64_t tag, size_t seed)
{
	ft_fill(ft_buf, n, seed);
	FT_POST(fi_tsend(ft_ep, ft_buf, n, ft_desc, ft_peer, tag, &tx_ctx));
	ft_expect(&tx_ctx, FI_SEND | FI_TAGGED, "fi_tsend");
}

static void check_rx(struct fi_cq_tagged_entry *e, uint8_t *at, size_t n, uint64_t tag,
		     size_t seed, const char *what)
{
	if (!(e->flags & FI_RECV) || !(e->flags & FI_TAGGED) || e->len != n || e->tag != tag)
		FT_DIE("%s: flags 0x%" PRIx64 " len %zu tag 0x%" PRIx64 ", expected len %zu tag "
		       "0x%" PRIx64, what, e->flags, e->len, e->tag, n, tag);
	ft_verify(at, n, seed, what);
}

static void sizes(void)
{
	static const size_t list[] = { 0, 1, 64, 4097, 65536, 65537, REGION };

	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
		uint64_t tag = 0x5000 + i;

		if (ft_client()) {
			ft_sync();
			tsend(list[i], tag, i + 40);
		} else {
			struct fi_cq_tagged_entry e;

			FT_POST(fi_trecv(ft_ep, ft_buf, REGION, ft_desc, ft_peer, tag, 0,
					 &slot_ctx[0]));
			ft_sync();
			e = ft_expect(&slot_ctx[0], FI_RECV | FI_TAGGED, "tagged sizes");
			check_rx(&e, ft_buf, list[i], tag, i + 40, "tagged sizes");
		}
		ft_sync();
	}
	ft_ok("fi_tsend/fi_trecv from 0 B to 1 MiB: lengths, tags, flags and bytes");
}

/* Receives posted for tags B then A; messages sent A then B each find their own. */
static void matching(void)
{
	uint8_t *a = ft_buf, *b = ft_buf + 65536;

	if (ft_client()) {
		ft_sync();
		tsend(3000, 0xa, 1);
		tsend(5000, 0xb, 2);
	} else {
		int done = 0;

		FT_POST(fi_trecv(ft_ep, b, 65536, ft_desc, ft_peer, 0xb, 0, &slot_ctx[1]));
		FT_POST(fi_trecv(ft_ep, a, 65536, ft_desc, ft_peer, 0xa, 0, &slot_ctx[0]));
		ft_sync();
		while (done != 3) {
			struct fi_cq_tagged_entry e;

			ft_next(&e, NULL);
			if (e.op_context == &slot_ctx[0] && !(done & 1))
				check_rx(&e, a, 3000, 0xa, 1, "receive for tag A");
			else if (e.op_context == &slot_ctx[1] && !(done & 2))
				check_rx(&e, b, 5000, 0xb, 2, "receive for tag B");
			else
				FT_DIE("tag matching: completion for context %p", e.op_context);
			done |= e.op_context == &slot_ctx[0] ? 1 : 2;
		}
	}
	ft_sync();
	ft_ok("receives posted for tags B, A; sends A, B: each matched by tag");

	/* Ignore bits: a receive for 0x5500 ignoring the low byte takes tag 0x55ab. */
	if (ft_client()) {
		ft_sync();
		tsend(100, 0x55ab, 3);
	} else {
		struct fi_cq_tagged_entry e;

		FT_POST(fi_trecv(ft_ep, ft_buf, 4096, ft_desc, ft_peer, 0x5500, 0xff,
				 &slot_ctx[2]));
		ft_sync();
		e = ft_expect(&slot_ctx[2], FI_RECV | FI_TAGGED, "ignore bits");
		check_rx(&e, ft_buf, 100, 0x55ab, 3, "ignore bits");
	}
	ft_sync();
	ft_ok("ignore bits: a receive for 0x5500/0xff completes with the sender's tag 0x55ab");
}

/* Peeks for `tag` until the message is there (FI_ENOMSG meanwhile); returns the entry. */
static struct fi_cq_tagged_entry peek(uint64_t tag, uint64_t flags, struct fi_context2 *ctx)
{
	struct fi_msg_tagged m = { .addr = ft_peer, .tag = tag, .context = ctx };
	double since = ft_now();

	for (;;) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;

		FT_POST(fi_trecvmsg(ft_ep, &m, FI_PEEK | flags));
		if (ft_next(&e, &err) == 0) {
			if (e.op_context != ctx)
				FT_DIE("FI_PEEK: completion for context %p", e.op_context);
			return e;
		}
		if (err.err != FI_ENOMSG || err.op_context != ctx)
			FT_DIE("FI_PEEK: error %d (%s)", err.err, fi_strerror(err.err));
		if (ft_now() - since > 10)
			FT_DIE("FI_PEEK: message with tag 0x%" PRIx64 " not there after 10 s", tag);
	}
}

static void peek_claim_discard(void)
{
	struct fi_context2 ctx;

	/* A message that arrived before its receive waits for it. */
	if (ft_client()) {
		tsend(2000, 0x77, 4);
		ft_sync();
	} else {
		struct fi_cq_tagged_entry e;

		ft_sync();
		FT_POST(fi_trecv(ft_ep, ft_buf, 4096, ft_desc, ft_peer, 0x77, 0, &slot_ctx[0]));
		e = ft_expect(&slot_ctx[0], FI_RECV | FI_TAGGED, "unexpected tagged message");
		check_rx(&e, ft_buf, 2000, 0x77, 4, "unexpected tagged message");
	}
	ft_sync();
	ft_ok("a tagged message sent before its receive was posted");

	/* FI_PEEK for a tag nobody sent: FI_ENOMSG. */
	if (!ft_client()) {
		struct fi_msg_tagged m = { .addr = ft_peer, .tag = 0xdead, .context = &ctx };
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;

		FT_POST(fi_trecvmsg(ft_ep, &m, FI_PEEK));
		if (ft_next(&e, &err) != 1 || err.err != FI_ENOMSG || err.op_context != &ctx)
			FT_DIE("FI_PEEK of an absent tag: no FI_ENOMSG error completion");
	}
	ft_sync();
	ft_ok("FI_PEEK of a tag nobody sent: FI_ENOMSG");

	/* FI_PEEK finds the message and its size; FI_PEEK|FI_CLAIM reserves it; FI_CLAIM
	 * receives it into the buffer given then. */
	if (ft_client()) {
		tsend(1500, 0x88, 5);
		ft_sync();
	} else {
		struct fi_cq_tagged_entry e;
		struct iovec v = { ft_buf, 4096 };
		struct fi_msg_tagged m = { .msg_iov = &v, .desc = &ft_desc, .iov_count = 1,
					   .addr = ft_peer, .tag = 0x88, .context = &ctx };

		ft_sync();
		e = peek(0x88, 0, &ctx);
		if (e.len != 1500 || e.tag != 0x88)
			FT_DIE("FI_PEEK: len %zu tag 0x%" PRIx64 ", expected 1500, 0x88", e.len,
			       e.tag);
		peek(0x88, FI_CLAIM, &ctx);
		memset(ft_buf, 0, 4096);
		FT_POST(fi_trecvmsg(ft_ep, &m, FI_CLAIM));
		e = ft_expect(&ctx, FI_RECV | FI_TAGGED, "FI_CLAIM receive");
		check_rx(&e, ft_buf, 1500, 0x88, 5, "FI_CLAIM receive");
	}
	ft_sync();
	ft_ok("FI_PEEK reports the waiting message's size and tag; FI_PEEK|FI_CLAIM then FI_CLAIM "
	   "receives it");

	/* FI_DISCARD drops a claimed message; it is gone for later receives. */
	if (ft_client()) {
		tsend(700, 0x99, 6);
		tsend(80, 0x9a, 7);
		ft_sync();
	} else {
		struct fi_cq_tagged_entry e;
		struct fi_msg_tagged m = { .addr = ft_peer, .tag = 0x99, .context = &ctx };
		struct fi_cq_err_entry err;

		ft_sync();
		peek(0x99, FI_CLAIM, &ctx);
		FT_POST(fi_trecvmsg(ft_ep, &m, FI_CLAIM | FI_DISCARD));
		ft_expect(&ctx, 0, "FI_DISCARD");
		m.tag = 0x99;
		FT_POST(fi_trecvmsg(ft_ep, &m, FI_PEEK));
		if (ft_next(&e, &err) != 1 || err.err != FI_ENOMSG)
			FT_DIE("a discarded message was still found by FI_PEEK");
		FT_POST(fi_trecv(ft_ep, ft_buf, 4096, ft_desc, ft_peer, 0x9a, 0, &slot_ctx[3]));
		e = ft_expect(&slot_ctx[3], FI_RECV | FI_TAGGED, "receive after a discard");
		check_rx(&e, ft_buf, 80, 0x9a, 7, "receive after a discard");
	}
	ft_sync();
	ft_ok("FI_CLAIM|FI_DISCARD drops the message; the next one is received intact");
}

static void cancel_data_inject(void)
{
	size_t bytes = ft_info->domain_attr->cq_data_size;
	uint64_t data = 0x0badcafe;
	size_t n = ft_info->tx_attr->inject_size < 32 ? ft_info->tx_attr->inject_size : 32;

	if (!ft_client()) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;

		FT_POST(fi_trecv(ft_ep, ft_buf, 64, ft_desc, ft_peer, 0x1, 0, &slot_ctx[0]));
		FT_CHECK(fi_cancel(&ft_ep->fid, &slot_ctx[0]));
		if (ft_next(&e, &err) != 1 || err.err != FI_ECANCELED ||
		    err.op_context != &slot_ctx[0])
			FT_DIE("cancelled tagged receive: no FI_ECANCELED error completion");
	}
	ft_sync();
	ft_ok("fi_cancel of a tagged receive: FI_ECANCELED");

	if (bytes) {
		if (bytes < 8)
			data &= (1ULL << (8 * bytes)) - 1;
		if (ft_client()) {
			ft_sync();
			ft_fill(ft_buf, 24, 8);
			FT_POST(fi_tsenddata(ft_ep, ft_buf, 24, ft_desc, data, ft_peer, 0x2,
					     &tx_ctx));
			ft_expect(&tx_ctx, FI_SEND | FI_TAGGED, "fi_tsenddata");
		} else {
			struct fi_cq_tagged_entry e;

			FT_POST(fi_trecv(ft_ep, ft_buf, 64, ft_desc, ft_peer, 0x2, 0,
					 &slot_ctx[1]));
			ft_sync();
			e = ft_expect(&slot_ctx[1], FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA,
				   "fi_tsenddata");
			check_rx(&e, ft_buf, 24, 0x2, 8, "fi_tsenddata");
			if (e.data != data)
				FT_DIE("fi_tsenddata: data 0x%" PRIx64 ", expected 0x%" PRIx64,
				       e.data, data);
		}
		ft_sync();
		ft_ok("fi_tsenddata: remote CQ data and tag delivered");
	}

	if (ft_client()) {
		ft_sync();
		ft_fill(ft_buf, n, 9);
		FT_POST(fi_tinject(ft_ep, ft_buf, n, ft_peer, 0x3));
		memset(ft_buf, 0, n);
	} else {
		struct fi_cq_tagged_entry e;

		FT_POST(fi_trecv(ft_ep, ft_buf, 64, ft_desc, ft_peer, 0x3, 0, &slot_ctx[2]));
		ft_sync();
		e = ft_expect(&slot_ctx[2], FI_RECV | FI_TAGGED, "fi_tinject");
		check_rx(&e, ft_buf, n, 0x3, 9, "fi_tinject");
	}
	ft_sync();
	if (ft_client() && ft_nearly)
		FT_DIE("fi_tinject generated a completion");
	ft_ok("fi_tinject: delivered with its tag, no completion");
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_tagged [-p prov] [-d domain] [-s src] [-e rdm] [-B port] [-P port] "
			"[-E] [server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	ft_prog = "rdm_tagged";
	ft_parse(argc, argv, "", NULL, usage);
	ft_oob_connect();
	ft_open(FI_MSG | FI_TAGGED, REGION);
	ft_banner("tagged functional test");
	ft_exchange();
	sizes();
	matching();
	peek_claim_discard();
	cancel_data_inject();
	ft_close();
	if (ft_client())
		printf("rdm_tagged: all steps passed\n");
	return 0;
}
