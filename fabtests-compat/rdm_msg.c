/*
 * rdm_msg: functional test of untagged messages over an RDM endpoint (fi_msg(3)), in the
 * manner of upstream fabtests' functional tests (common options in common.h; -S is ignored).
 * The client sends, the server receives and checks every completion field and byte; each
 * step is synchronised over the out-of-band channel. The client prints one "ok:" line per
 * step; any failure ends both sides with a message and exit status 1.
 */
#include "common.h"

#define REGION (16u << 20)

static int rx_ctx, tx_ctx, slot_ctx[8];

static void expect_recv(size_t len, size_t seed, const char *what)
{
	struct fi_cq_tagged_entry e = ft_expect(&rx_ctx, FI_RECV | FI_MSG, what);

	if (e.len != len)
		FT_DIE("%s: received %zu bytes, expected %zu", what, e.len, len);
	ft_verify(ft_buf, len, seed, what);
}

static void sizes(void)
{
	static const size_t list[] = { 0, 1, 63, 64, 4095, 4096, 4097, 65535, 65536, 65537,
				       1 << 20, 4 << 20, REGION };
	char what[64];

	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
		size_t n = list[i];

		snprintf(what, sizeof(what), "fi_send/fi_recv of %zu B", n);
		if (ft_client()) {
			ft_fill(ft_buf, n, n + 1);
			ft_sync();
			FT_POST(fi_send(ft_ep, ft_buf, n, ft_desc, ft_peer, &tx_ctx));
			ft_expect(&tx_ctx, FI_SEND | FI_MSG, what);
		} else {
			memset(ft_buf, 0, n);
			FT_POST(fi_recv(ft_ep, ft_buf, REGION, ft_desc, ft_peer, &rx_ctx));
			ft_sync();
			expect_recv(n, n + 1, what);
		}
		ft_sync();
	}
	ft_ok("fi_send/fi_recv from 0 B to 16 MiB: lengths, flags, contexts and bytes");
}

/* Three send segments into two receive segments with other boundaries. */
static void iov(void)
{
	static const size_t tx[3] = { 100, 5000, 70000 }, rx[2] = { 30000, 45100 };
	uint8_t *ref = ft_buf + REGION / 2;

	if (ft_info->tx_attr->iov_limit < 3 || ft_info->rx_attr->iov_limit < 2) {
		ft_ok("fi_sendv/fi_recvv skipped: iov_limit below 3 (tx) or 2 (rx)");
		return;
	}
	ft_fill(ref, 75100, 31);
	if (ft_client()) {
		struct iovec v[3];
		void *d[3] = { ft_desc, ft_desc, ft_desc };
		size_t at[3] = { 0, 200000, 100000 }, off = 0;

		for (int i = 0; i < 3; i++) {
			v[i].iov_base = ft_buf + at[i];
			v[i].iov_len = tx[i];
			memcpy(v[i].iov_base, ref + off, tx[i]);
			off += tx[i];
		}
		ft_sync();
		FT_POST(fi_sendv(ft_ep, v, d, 3, ft_peer, &tx_ctx));
		ft_expect(&tx_ctx, FI_SEND | FI_MSG, "fi_sendv");
	} else {
		struct iovec v[2] = { { ft_buf + 300000, rx[0] }, { ft_buf, rx[1] } };
		void *d[2] = { ft_desc, ft_desc };
		struct fi_cq_tagged_entry e;

		FT_POST(fi_recvv(ft_ep, v, d, 2, ft_peer, &rx_ctx));
		ft_sync();
		e = ft_expect(&rx_ctx, FI_RECV | FI_MSG, "fi_recvv");
		if (e.len != 75100 || memcmp(ft_buf + 300000, ref, rx[0]) ||
		    memcmp(ft_buf, ref + rx[0], rx[1]))
			FT_DIE("fi_sendv into fi_recvv: %zu bytes or their order wrong", e.len);
	}
	ft_sync();
	ft_ok("fi_sendv (3 segments) into fi_recvv (2 segments)");
}

static void senddata(void)
{
	size_t bytes = ft_info->domain_attr->cq_data_size;
	uint64_t data = 0x1122334455667788ULL;

	if (!bytes) {
		ft_ok("fi_senddata skipped: cq_data_size 0");
		return;
	}
	if (bytes < 8)
		data &= (1ULL << (8 * bytes)) - 1;
	if (ft_client()) {
		ft_fill(ft_buf, 40, 5);
		ft_sync();
		FT_POST(fi_senddata(ft_ep, ft_buf, 40, ft_desc, data, ft_peer, &tx_ctx));
		ft_expect(&tx_ctx, FI_SEND, "fi_senddata");
	} else {
		struct fi_cq_tagged_entry e;

		FT_POST(fi_recv(ft_ep, ft_buf, REGION, ft_desc, ft_peer, &rx_ctx));
		ft_sync();
		e = ft_expect(&rx_ctx, FI_RECV | FI_REMOTE_CQ_DATA, "fi_senddata");
		if (e.data != data || e.len != 40)
			FT_DIE("fi_senddata: data 0x%" PRIx64 " len %zu, expected 0x%" PRIx64
			       " len 40", e.data, e.len, data);
		ft_verify(ft_buf, 40, 5, "fi_senddata");
	}
	ft_sync();
	ft_ok("fi_senddata: remote CQ data delivered with the message");
}

/* fi_inject leaves no completion behind; the buffer can be reused at once. */
static void inject(void)
{
	size_t n = ft_info->tx_attr->inject_size < 64 ? ft_info->tx_attr->inject_size : 64;
	struct fi_cq_tagged_entry e;

	if (ft_client()) {
		ft_fill(ft_buf, n, 9);
		ft_sync();
		FT_POST(fi_inject(ft_ep, ft_buf, n, ft_peer));
		memset(ft_buf, 0xee, n);
	} else {
		FT_POST(fi_recv(ft_ep, ft_buf, REGION, ft_desc, ft_peer, &rx_ctx));
		ft_sync();
		expect_recv(n, 9, "fi_inject");
	}
	ft_sync();
	if (ft_client() && ft_nearly == 0 && fi_cq_read(ft_cq, &e, 1) != -FI_EAGAIN)
		FT_DIE("fi_inject generated a completion");
	if (ft_client() && ft_nearly)
		FT_DIE("fi_inject generated a completion");
	ft_ok("fi_inject: delivered, no completion, buffer reusable at once");
}

/* Messages sent before any receive is posted wait at the target and match in order. */
static void unexpected(void)
{
	int ordered = (ft_info->tx_attr->msg_order & FI_ORDER_SAS) != 0;
	int seen[8] = { 0 };

	if (ft_client()) {
		ft_sync();
		for (int i = 0; i < 8; i++) {
			ft_fill(ft_buf + i * 4096, 1000, 100 + i);
			FT_POST(fi_send(ft_ep, ft_buf + i * 4096, 1000, ft_desc, ft_peer, &tx_ctx));
		}
		for (int i = 0; i < 8; i++)
			ft_expect(&tx_ctx, FI_SEND, "unexpected sends");
		ft_sync();
	} else {
		ft_sync();
		ft_sync();
		for (int i = 0; i < 8; i++)
			FT_POST(fi_recv(ft_ep, ft_buf + i * 4096, 4096, ft_desc, ft_peer,
					&slot_ctx[i]));
		for (int i = 0; i < 8; i++) {
			struct fi_cq_tagged_entry e;
			int slot, sender = -1;

			ft_next(&e, NULL);
			slot = (int *)e.op_context - slot_ctx;
			if (slot < 0 || slot >= 8 || e.len != 1000)
				FT_DIE("unexpected messages: completion context %p len %zu",
				       e.op_context, e.len);
			for (int s = 0; s < 8; s++)
				if (ft_buf[slot * 4096] == ft_pattern(100 + s, 0) &&
				    ft_buf[slot * 4096 + 1] == ft_pattern(100 + s, 1))
					sender = s;
			if (sender < 0 || seen[sender]++ || (ordered && sender != slot))
				FT_DIE("unexpected messages: receive %d got message %d%s", slot,
				       sender, ordered ? " (FI_ORDER_SAS)" : "");
			ft_verify(ft_buf + slot * 4096, 1000, 100 + sender, "unexpected message");
		}
	}
	ft_sync();
	ft_ok(ordered ? "8 unexpected messages matched in send order (FI_ORDER_SAS)"
		   : "8 unexpected messages each delivered once");
}

/* A message larger than the receive buffer: FI_ETRUNC with the overflow in olen. */
static void truncation(void)
{
	if (ft_client()) {
		ft_fill(ft_buf, 64, 3);
		ft_sync();
		FT_POST(fi_send(ft_ep, ft_buf, 64, ft_desc, ft_peer, &tx_ctx));
		ft_wait(1, NULL);
	} else {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;

		FT_POST(fi_recv(ft_ep, ft_buf, 16, ft_desc, ft_peer, &rx_ctx));
		ft_sync();
		if (ft_next(&e, &err) != 1)
			FT_DIE("truncated receive: completed without error, len %zu", e.len);
		if (err.err != FI_ETRUNC || err.op_context != &rx_ctx || err.olen != 48)
			FT_DIE("truncated receive: error %d (%s), context %p, olen %zu; expected "
			       "FI_ETRUNC, olen 48", err.err, fi_strerror(err.err), err.op_context,
			       err.olen);
		ft_verify(ft_buf, 16, 3, "truncated receive");
	}
	ft_sync();
	ft_ok("64 B into a 16 B receive: FI_ETRUNC, olen 48, first 16 B delivered");
}

/* One FI_MULTI_RECV buffer takes ten messages, then is released with FI_MULTI_RECV. */
static void multi_recv(void)
{
	const size_t msg = 300, count = 10, space = msg * count;

	if (!(ft_info->caps & FI_MULTI_RECV)) {
		ft_ok("FI_MULTI_RECV skipped: not in the provider's caps");
		return;
	}
	if (ft_client()) {
		ft_sync();
		for (size_t i = 0; i < count; i++) {
			ft_fill(ft_buf + i * msg, msg, 200 + i);
			FT_POST(fi_send(ft_ep, ft_buf + i * msg, msg, ft_desc, ft_peer, &tx_ctx));
		}
		for (size_t i = 0; i < count; i++)
			ft_expect(&tx_ctx, FI_SEND, "sends into a multi-receive buffer");
	} else {
		size_t min = msg, got = 0, released = 0;
		uint8_t *base = ft_buf + 8192;
		struct iovec v = { base, space };
		struct fi_msg m = { .msg_iov = &v, .desc = &ft_desc, .iov_count = 1,
				    .addr = ft_peer, .context = &rx_ctx };
		uint8_t used[10] = { 0 };

		FT_CHECK(fi_setopt(&ft_ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min,
				   sizeof(min)));
		FT_POST(fi_recvmsg(ft_ep, &m, FI_MULTI_RECV));
		ft_sync();
		while (!released) {
			struct fi_cq_tagged_entry e;
			uint8_t *p;
			size_t who = count;

			ft_next(&e, NULL);
			if (e.op_context != &rx_ctx)
				FT_DIE("multi-receive: completion for context %p", e.op_context);
			released = (e.flags & FI_MULTI_RECV) != 0;
			if (!e.len)
				continue;
			p = e.buf;
			if (e.len != msg || p < base || p + msg > base + space)
				FT_DIE("multi-receive: %zu B at offset %td of a %zu B buffer", e.len,
				       p - base, space);
			for (size_t s = 0; s < count; s++)
				if (p[0] == ft_pattern(200 + s, 0) && p[1] == ft_pattern(200 + s, 1))
					who = s;
			if (who == count || used[who]++)
				FT_DIE("multi-receive: message at offset %td unknown or twice",
				       p - base);
			ft_verify(p, msg, 200 + who, "multi-receive message");
			got++;
		}
		if (got != count)
			FT_DIE("multi-receive: buffer released after %zu of %zu messages", got,
			       count);
	}
	ft_sync();
	ft_ok("FI_MULTI_RECV: 10 messages in one buffer, released with FI_MULTI_RECV");
}

/* A cancelled receive completes with FI_ECANCELED and takes no later message. */
static void cancel(void)
{
	if (ft_client()) {
		ft_sync();
		ft_fill(ft_buf, 64, 77);
		FT_POST(fi_send(ft_ep, ft_buf, 64, ft_desc, ft_peer, &tx_ctx));
		ft_expect(&tx_ctx, FI_SEND, "send after a cancel");
	} else {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;

		FT_POST(fi_recv(ft_ep, ft_buf + 8192, 64, ft_desc, ft_peer, &slot_ctx[0]));
		FT_CHECK(fi_cancel(&ft_ep->fid, &slot_ctx[0]));
		if (ft_next(&e, &err) != 1 || err.err != FI_ECANCELED ||
		    err.op_context != &slot_ctx[0])
			FT_DIE("cancelled receive: no FI_ECANCELED error completion for it");
		FT_POST(fi_recv(ft_ep, ft_buf, REGION, ft_desc, ft_peer, &rx_ctx));
		ft_sync();
		expect_recv(64, 77, "receive after a cancel");
	}
	ft_sync();
	ft_ok("fi_cancel of a receive: FI_ECANCELED, the next message goes to the next receive");
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_msg [-p prov] [-d domain] [-s src] [-e rdm] [-B port] [-P port] [-E] "
			"[server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	ft_prog = "rdm_msg";
	ft_parse(argc, argv, "", NULL, usage);
	ft_oob_connect();
	ft_open(FI_MSG | FI_MULTI_RECV, REGION);
	ft_banner("message functional test");
	ft_exchange();
	sizes();
	iov();
	senddata();
	inject();
	unexpected();
	truncation();
	multi_recv();
	cancel();
	ft_close();
	if (ft_client())
		printf("rdm_msg: all steps passed\n");
	return 0;
}
