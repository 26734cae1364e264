/*
 * rdm_rma: functional test of RMA over an RDM endpoint (fi_rma(3)), in the manner of upstream
 * fabtests' functional tests (common options in common.h; -S is ignored). The client reads
 * and writes the server's registered region; after every step the server compares its whole
 * region with a shadow copy kept from what the client says it wrote, so a stray byte anywhere
 * fails the test, and checks that the unregistered guard after the region is untouched.
 * Accesses with a wrong key, past the region's end, or that the region's access flags do not
 * allow (a write to a region registered for remote reads only, a read from one registered for
 * remote writes only) must fail with an error completion at the client and change nothing at
 * the server. The client prints one "ok:" line per step.
 */
#include "common.h"

#define REGION (1u << 20)
/* The server's registered region: the transfer area and the control bytes after it. */
#define REMOTE_LEN (REGION + FT_CTRL_SIZE)

/* What the client tells the server after a step: bytes [off, off+len) of the main region
 * (`wo` 0) or of the write-only one (`wo` 1) now hold pattern `seed` (len 0: nothing
 * changed); a non-zero `cq_data` is the remote CQ data the server's completion must carry;
 * `end` finishes the test. */
struct change {
	uint64_t off, len, seed, cq_data, end, wo;
};

/* Two more regions of ACCESS_LEN bytes at the server: one registered for FI_REMOTE_READ
 * only, one for FI_REMOTE_WRITE only. */
#define ACCESS_LEN 4096
static uint8_t *ro_buf, *wo_buf, *wo_shadow;
static struct fid_mr *ro_mr, *wo_mr;
static uint64_t ro_addr, ro_key, wo_addr, wo_key;

static int ctx;
static uint8_t *shadow;

/* Client: tells the server what changed and waits for its check. */
static void changed(uint64_t off, uint64_t len, uint64_t seed, uint64_t cq_data)
{
	struct change c = { off, len, seed, cq_data, 0, 0 };
	uint8_t verdict;

	ft_oob_send(&c, sizeof(c));
	ft_oob_recv(&verdict, 1);
}

/* Server: applies each change to the shadow and compares the region until the end. */
static void serve(void)
{
	for (;;) {
		struct change c;
		uint8_t verdict = 1;

		ft_oob_recv(&c, sizeof(c));
		if (c.end)
			return;
		if (c.off + c.len > (c.wo ? ACCESS_LEN : REMOTE_LEN))
			FT_DIE("client reports a change outside the region");
		ft_fill((c.wo ? wo_shadow : shadow) + c.off, c.len, c.seed);
		if (c.cq_data) {
			struct fi_cq_tagged_entry e;

			ft_next(&e, NULL);
			if (!(e.flags & FI_REMOTE_CQ_DATA) || !(e.flags & FI_REMOTE_WRITE) ||
			    e.data != c.cq_data)
				FT_DIE("remote write completion: flags 0x%" PRIx64 " data 0x%" PRIx64
				       ", expected FI_REMOTE_WRITE|FI_REMOTE_CQ_DATA, 0x%" PRIx64,
				       e.flags, e.data, c.cq_data);
		}
		for (size_t i = 0; i < REMOTE_LEN; i++)
			if (ft_buf[i] != shadow[i])
				FT_DIE("region byte %zu is 0x%02x, expected 0x%02x (after a change of "
				       "%" PRIu64 " B at %" PRIu64 ")", i, ft_buf[i], shadow[i], c.len,
				       c.off);
		for (size_t i = 0; i < FT_GUARD_SIZE; i++)
			if (ft_buf[REMOTE_LEN + i] != FT_GUARD_BYTE)
				FT_DIE("the guard after the region was written at byte %zu", i);
		for (size_t i = 0; i < ACCESS_LEN; i++)
			if (ro_buf[i] != ft_pattern(90, i) || wo_buf[i] != wo_shadow[i])
				FT_DIE("byte %zu of the %s region changed", i,
				       ro_buf[i] != ft_pattern(90, i) ? "read-only" : "write-only");
		ft_oob_send(&verdict, 1);
	}
}

/* Delivery complete: the bytes are in the target's memory when this completes. */
static void write_dc_to(void *local, size_t n, uint64_t addr, uint64_t key)
{
	struct iovec v = { local, n };
	struct fi_rma_iov r = { addr, n, key };
	struct fi_msg_rma m = { .msg_iov = &v, .desc = &ft_desc, .iov_count = 1,
				.addr = ft_peer, .rma_iov = &r, .rma_iov_count = 1,
				.context = &ctx };

	FT_POST(fi_writemsg(ft_ep, &m, FI_DELIVERY_COMPLETE));
}

static void write_dc(void *local, size_t n, uint64_t off)
{
	write_dc_to(local, n, ft_peer_addr + off, ft_peer_key);
}

static void client(void)
{
	static const size_t sizes[] = { 1, 8, 4095, 4097, 65537, REGION };
	static const size_t offs[] = { 0, 3, 4096, 7, 100, 0 };
	uint8_t *lb = ft_buf;
	char what[80];

	/* Reads: the server filled its region with pattern 0. */
	for (size_t i = 0; i < 6; i++) {
		size_t n = sizes[i], off = offs[i] + n > REGION ? 0 : offs[i];

		memset(lb, 0, n);
		FT_POST(fi_read(ft_ep, lb, n, ft_desc, ft_peer, ft_peer_addr + off, ft_peer_key,
				&ctx));
		snprintf(what, sizeof(what), "fi_read of %zu B at offset %zu", n, off);
		ft_expect(&ctx, 0, what);
		for (size_t j = 0; j < n; j++)
			if (lb[j] != ft_pattern(0, off + j))
				FT_DIE("%s: byte %zu wrong", what, j);
	}
	ft_ok("fi_read from 1 B to 1 MiB at various offsets");

	/* Writes at offsets, delivery complete, checked by the server. */
	for (size_t i = 0; i < 6; i++) {
		size_t n = sizes[i], off = offs[i] + n > REGION ? 0 : offs[i];

		ft_fill(lb, n, 10 + i);
		write_dc(lb, n, off);
		snprintf(what, sizeof(what), "fi_writemsg of %zu B at offset %zu", n, off);
		ft_expect(&ctx, 0, what);
		changed(off, n, 10 + i, 0);
	}
	ft_ok("fi_writemsg (FI_DELIVERY_COMPLETE) from 1 B to 1 MiB; the rest of the region intact");

	/* Vectored: two local segments into one remote range, and back. */
	if (ft_info->tx_attr->rma_iov_limit >= 1 && ft_info->tx_attr->iov_limit >= 2) {
		struct iovec v[2] = { { lb + 200000, 3000 }, { lb, 9000 } };
		void *d[2] = { ft_desc, ft_desc };

		ft_fill(lb + 300000, 12000, 21);
		memcpy(lb + 200000, lb + 300000, 3000);
		memcpy(lb, lb + 300000 + 3000, 9000);
		FT_POST(fi_writev(ft_ep, v, d, 2, ft_peer, ft_peer_addr + 5000, ft_peer_key, &ctx));
		ft_expect(&ctx, 0, "fi_writev");
		/* A writev completes when transmitted: read it back to know it is placed. */
		memset(lb + 400000, 0, 12000);
		FT_POST(fi_read(ft_ep, lb + 400000, 12000, ft_desc, ft_peer, ft_peer_addr + 5000,
				ft_peer_key, &ctx));
		ft_expect(&ctx, 0, "fi_read after fi_writev");
		changed(5000, 12000, 21, 0);
		memset(lb, 0, 9000);
		memset(lb + 200000, 0, 3000);
		FT_POST(fi_readv(ft_ep, v, d, 2, ft_peer, ft_peer_addr + 5000, ft_peer_key, &ctx));
		ft_expect(&ctx, 0, "fi_readv");
		if (memcmp(lb + 200000, lb + 300000, 3000) || memcmp(lb, lb + 303000, 9000))
			FT_DIE("fi_readv: segments hold the wrong bytes");
		ft_ok("fi_writev and fi_readv with two local segments");
	}

	/* Remote CQ data: the server sees the write's completion with the data. */
	if (ft_info->domain_attr->cq_data_size) {
		uint64_t off = 70000, seed = 22;

		ft_fill(lb, 5000, seed);
		FT_POST(fi_writedata(ft_ep, lb, 5000, ft_desc, 0x5eed5eed, ft_peer,
				     ft_peer_addr + off, ft_peer_key, &ctx));
		ft_expect(&ctx, 0, "fi_writedata");
		changed(off, 5000, seed, 0x5eed5eed);
		ft_ok("fi_writedata: the target's completion carries the data; bytes placed");
	}

	/* Inject write: no completion; poll with reads until the bytes are there. */
	{
		uint64_t off = 90000;
		double since = ft_now();

		ft_fill(lb, 32, 23);
		FT_POST(fi_inject_write(ft_ep, lb, 32, ft_peer, ft_peer_addr + off, ft_peer_key));
		memset(lb, 0, 32);
		for (;;) {
			FT_POST(fi_read(ft_ep, lb + 4096, 32, ft_desc, ft_peer, ft_peer_addr + off,
					ft_peer_key, &ctx));
			ft_expect(&ctx, 0, "fi_read after fi_inject_write");
			if (lb[4096] == ft_pattern(23, 0) && lb[4096 + 31] == ft_pattern(23, 31))
				break;
			if (ft_now() - since > 10)
				FT_DIE("fi_inject_write: bytes not at the target after 10 s");
		}
		changed(off, 32, 23, 0);
		ft_ok("fi_inject_write: placed, no completion");
	}

	/* Refused accesses: nothing changes at the target or in the local buffer. */
	ft_fill(lb, 64, 24);
	FT_POST(fi_write(ft_ep, lb, 64, ft_desc, ft_peer, ft_peer_addr + REMOTE_LEN - 8,
			 ft_peer_key, &ctx));
	ft_expect_error(&ctx, "fi_write across the region's end");
	changed(0, 0, 0, 0);
	FT_POST(fi_write(ft_ep, lb, 64, ft_desc, ft_peer, ft_peer_addr + 100,
			 ft_peer_key ^ 0x5a5a5a5a00ULL, &ctx));
	ft_expect_error(&ctx, "fi_write with a wrong key");
	changed(0, 0, 0, 0);
	memset(lb, 0xcc, 64);
	FT_POST(fi_read(ft_ep, lb, 64, ft_desc, ft_peer, ft_peer_addr + REMOTE_LEN, ft_peer_key,
			&ctx));
	ft_expect_error(&ctx, "fi_read past the region's end");
	FT_POST(fi_read(ft_ep, lb, 64, ft_desc, ft_peer, ft_peer_addr, ft_peer_key + 1, &ctx));
	ft_expect_error(&ctx, "fi_read with a wrong key");
	for (size_t j = 0; j < 64; j++)
		if (lb[j] != 0xcc)
			FT_DIE("a refused fi_read wrote the local buffer");
	changed(0, 0, 0, 0);
	ft_ok("writes and reads with a wrong key or past the region's end: error completions, no "
	   "byte changed");

	/* Access flags: a region registered for remote reads only cannot be written, one for
	 * remote writes only cannot be read; what each allows works. */
	ft_fill(lb, 64, 25);
	FT_POST(fi_write(ft_ep, lb, 64, ft_desc, ft_peer, ro_addr, ro_key, &ctx));
	ft_expect_error(&ctx, "fi_write to a region registered with FI_REMOTE_READ only");
	changed(0, 0, 0, 0);
	memset(lb, 0xcc, 64);
	FT_POST(fi_read(ft_ep, lb, 64, ft_desc, ft_peer, wo_addr, wo_key, &ctx));
	ft_expect_error(&ctx, "fi_read from a region registered with FI_REMOTE_WRITE only");
	for (size_t j = 0; j < 64; j++)
		if (lb[j] != 0xcc)
			FT_DIE("a refused fi_read wrote the local buffer");
	FT_POST(fi_read(ft_ep, lb, 64, ft_desc, ft_peer, ro_addr + 8, ro_key, &ctx));
	ft_expect(&ctx, 0, "fi_read from the read-only region");
	for (size_t j = 0; j < 64; j++)
		if (lb[j] != ft_pattern(90, 8 + j))
			FT_DIE("fi_read from the read-only region: byte %zu wrong", j);
	ft_fill(lb, 100, 26);
	write_dc_to(lb, 100, wo_addr + 16, wo_key);
	ft_expect(&ctx, 0, "fi_writemsg to the write-only region");
	{
		struct change c = { 16, 100, 26, 0, 0, 1 };
		uint8_t verdict;

		ft_oob_send(&c, sizeof(c));
		ft_oob_recv(&verdict, 1);
	}
	ft_ok("FI_REMOTE_READ-only and FI_REMOTE_WRITE-only regions: the other access refused, "
	   "nothing changed; the allowed one works");

	struct change end = { 0, 0, 0, 0, 1, 0 };
	ft_oob_send(&end, sizeof(end));
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_rma [-p prov] [-d domain] [-s src] [-e rdm] [-B port] [-P port] [-E] "
			"[server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	ft_prog = "rdm_rma";
	ft_parse(argc, argv, "", NULL, usage);
	ft_oob_connect();
	ft_open(FI_MSG | FI_RMA, REGION);
	ft_banner("RMA functional test");
	if (!ft_client()) {
		ft_fill(ft_buf, REMOTE_LEN, 0);
		shadow = malloc(REMOTE_LEN);
		if (!shadow)
			FT_DIE("out of memory");
		memcpy(shadow, ft_buf, REMOTE_LEN);
	}
	ft_exchange();
	if (ft_client()) {
		uint64_t keys[4];

		ft_oob_recv(keys, sizeof(keys));
		ro_addr = keys[0], ro_key = keys[1], wo_addr = keys[2], wo_key = keys[3];
		client();
	} else {
		uint64_t keys[4];
		int virt = (ft_info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;

		ro_buf = malloc(ACCESS_LEN);
		wo_buf = malloc(ACCESS_LEN);
		wo_shadow = malloc(ACCESS_LEN);
		if (!ro_buf || !wo_buf || !wo_shadow)
			FT_DIE("out of memory");
		ft_fill(ro_buf, ACCESS_LEN, 90);
		ft_fill(wo_buf, ACCESS_LEN, 91);
		memcpy(wo_shadow, wo_buf, ACCESS_LEN);
		FT_CHECK(fi_mr_reg(ft_domain, ro_buf, ACCESS_LEN, FI_REMOTE_READ, 0, 0x7e01, 0,
				   &ro_mr, NULL));
		FT_CHECK(fi_mr_reg(ft_domain, wo_buf, ACCESS_LEN, FI_REMOTE_WRITE, 0, 0x7e02, 0,
				   &wo_mr, NULL));
		if (ft_info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
			FT_CHECK(fi_mr_bind(ro_mr, &ft_ep->fid, 0));
			FT_CHECK(fi_mr_enable(ro_mr));
			FT_CHECK(fi_mr_bind(wo_mr, &ft_ep->fid, 0));
			FT_CHECK(fi_mr_enable(wo_mr));
		}
		keys[0] = virt ? (uintptr_t)ro_buf : 0;
		keys[1] = fi_mr_key(ro_mr);
		keys[2] = virt ? (uintptr_t)wo_buf : 0;
		keys[3] = fi_mr_key(wo_mr);
		ft_oob_send(keys, sizeof(keys));
		serve();
		fi_close(&ro_mr->fid);
		fi_close(&wo_mr->fid);
	}
	ft_close();
	if (ft_client())
		printf("rdm_rma: all steps passed\n");
	return 0;
}
