/*
 * rma_bw: RMA bandwidth between two processes, with the command line and output columns of
 * upstream fabtests' fi_rma_bw (common options in common.h).
 *
 *   -o write|read|writedata    RMA operation (default write)
 *
 * The client posts a window of RMA operations at a time and times the transfers, one row per
 * size; as in fabtests, it ends each size with a message the server receives, since an RMA
 * target has to be progressed (FI_PROGRESS_MANUAL) and the server waits on its CQ.
 */
#include "common.h"

enum op { OP_WRITE, OP_READ, OP_WRITEDATA };
static enum op op = OP_WRITE;
static const char *const op_names[] = { "write", "read", "writedata" };

static void post_rma(size_t size, uint64_t seq)
{
	switch (op) {
	case OP_WRITE:
		FT_POST(fi_write(ft_ep, ft_buf, size, ft_desc, ft_peer, ft_peer_addr, ft_peer_key,
				 NULL));
		break;
	case OP_READ:
		FT_POST(fi_read(ft_ep, ft_buf, size, ft_desc, ft_peer, ft_peer_addr, ft_peer_key,
				NULL));
		break;
	case OP_WRITEDATA:
		FT_POST(fi_writedata(ft_ep, ft_buf, size, ft_desc, seq, ft_peer, ft_peer_addr,
				     ft_peer_key, NULL));
		break;
	}
}

static void run_size(size_t size, int first)
{
	int iters = ft_iterations(size, 10000, 2000, 200), total = iters + ft_opt.warmup;
	int outstanding = 0;
	double start = 0, elapsed = 0;
	uint8_t *ctrl = ft_buf + ft_buf_size;

	/* Who owns the data: the writer fills its buffer, the reader's peer fills its. */
	if (ft_opt.check && (ft_client() != (op == OP_READ)))
		ft_fill(ft_buf, size, size);
	if (!ft_client())
		FT_POST(fi_recv(ft_ep, ctrl, FT_CTRL_SIZE, ft_desc, ft_peer, NULL));
	ft_sync();
	if (ft_client()) {
		for (int i = 0; i < total; i++) {
			if (i == ft_opt.warmup) {
				ft_wait(outstanding, NULL);
				outstanding = 0;
				start = ft_now();
			}
			post_rma(size, (uint64_t)i);
			if (++outstanding == ft_opt.window) {
				ft_wait(outstanding, NULL);
				outstanding = 0;
			}
		}
		ft_wait(outstanding, NULL);
		elapsed = ft_now() - start;
		FT_POST(fi_send(ft_ep, ctrl, 4, ft_desc, ft_peer, NULL));
		ft_wait(1, NULL);
	} else {
		/* Every writedata also leaves a remote completion carrying its data. */
		int expect = 1 + (op == OP_WRITEDATA ? total : 0);
		uint64_t data = 0, flags = ft_wait(expect, &data);

		if (op == OP_WRITEDATA &&
		    (!(flags & FI_REMOTE_CQ_DATA) || data != (uint64_t)(total - 1)))
			FT_DIE("writedata completions: flags 0x%" PRIx64 ", last data %" PRIu64,
			       flags, data);
	}
	if (ft_opt.check && (ft_client() == (op == OP_READ)))
		ft_verify(ft_buf, size, size, op_names[op]);
	if (ft_client())
		ft_show(size, iters, elapsed, 1, first);
}

static void own_option(int c, const char *arg)
{
	(void)c;
	for (op = OP_WRITE; op <= OP_WRITEDATA; op++)
		if (!strcmp(arg, op_names[op]))
			return;
	FT_DIE("unknown operation '%s'", arg);
}

static void usage(void)
{
	fprintf(stderr, "usage: rma_bw [-p prov] [-d domain] [-s src] [-e rdm] [-o write|read|writedata] "
			"[-S size|all] [-I iters] [-w warmup] [-W window] [-B port] [-P port] "
			"[-E] [-v] [server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const size_t defaults[] = { 64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10,
					   256 << 10, 1 << 20, 4 << 20 };

	ft_prog = "rma_bw";
	ft_parse(argc, argv, "o:", own_option, usage);
	ft_run_sizes(FI_MSG | FI_RMA, 1, defaults, sizeof(defaults) / sizeof(defaults[0]),
		     op_names[op], run_size);
	return 0;
}
