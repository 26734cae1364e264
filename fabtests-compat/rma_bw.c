/*
 * rma_bw: RMA bandwidth between two processes, moving the traffic of upstream fabtests'
 * fi_rma_bw, with its command line and output columns (common options in common.h).
 *
 *   -o write|read|writedata    RMA operation (default write)
 *   -u                         one way: only the client posts write or read (not in fabtests)
 *
 * write and read go both ways at once, as in fabtests: each side posts windows of -W
 * operations into (or from) the other's memory and waits for its own completions after each
 * window, so each side's target work competes with its own posts; each side times its own
 * transfers (the client prints). Slot j of a window uses bytes [j * size, (j + 1) * size) of
 * a receive area (written by the peer's writes, filled by our reads) and of a send area (the
 * source of our writes, read by the peer's reads), so a window touches window * size bytes.
 * Writes no larger than the endpoint's RMA inject size go out as fi_inject_write (not with
 * -v). writedata goes one way, client to server: after each window the server, once it has
 * the window's remote completions, answers with a 4-byte message the client waits for.
 * With -v every transfer asks for FI_DELIVERY_COMPLETE and each window's received bytes are
 * checked.
 */
#include "common.h"

enum op { OP_WRITE, OP_READ, OP_WRITEDATA };
static enum op op = OP_WRITE;
static const char *const op_names[] = { "write", "read", "writedata" };
static int one_way;
static size_t slots, area; /* window slots in each area; bytes of each area */

/* The receive area starts the buffer, the send area follows it (the peer's too). */
static uint8_t *rx_area(size_t size, int j)
{
	return ft_buf + (size_t)j * size;
}

static uint8_t *tx_area(size_t size, int j)
{
	return ft_buf + area + (size_t)j * size;
}

static void post_rma(size_t size, int j, size_t inject, uint64_t seq)
{
	uint64_t to = ft_peer_addr + (size_t)j * size;

	switch (op) {
	case OP_WRITE:
		if (size <= inject)
			FT_POST(fi_inject_write(ft_ep, tx_area(size, j), size, ft_peer, to,
						ft_peer_key));
		else
			FT_POST(fi_write(ft_ep, tx_area(size, j), size, ft_desc, ft_peer, to,
					 ft_peer_key, NULL));
		break;
	case OP_READ:
		FT_POST(fi_read(ft_ep, rx_area(size, j), size, ft_desc, ft_peer, to + area,
				ft_peer_key, NULL));
		break;
	case OP_WRITEDATA:
		if (size <= inject)
			FT_POST(fi_inject_writedata(ft_ep, tx_area(size, j), size, seq, ft_peer, to,
						    ft_peer_key));
		else
			FT_POST(fi_writedata(ft_ep, tx_area(size, j), size, ft_desc, seq, ft_peer,
					     to, ft_peer_key, NULL));
		break;
	}
}

/* Which side's receive area gets data: a write's target, a read's initiator. */
static int receives(void)
{
	if (!one_way && op != OP_WRITEDATA)
		return 1;
	return ft_client() == (op == OP_READ);
}

static int posts(void)
{
	return ft_client() || (!one_way && op != OP_WRITEDATA);
}

/*
 * The end of a window of n: the poster waits for its own completions (injects have none);
 * for writedata the server takes the window's remote completions and answers. With -v both
 * sides meet, the receiving side checks, and both meet again before the next window.
 */
static void end_window(size_t size, int n, int counted, uint64_t *seq, int last)
{
	uint8_t *ctrl = ft_buf + 2 * area + FT_CTRL_SIZE / 2;

	if (op == OP_WRITEDATA) {
		if (ft_client()) {
			/* The window's completions and the answer, whose receive was posted before
			 * the window; then the next one's. */
			ft_wait(counted + 1, NULL);
			if (!last)
				FT_POST(fi_recv(ft_ep, ctrl, FT_CTRL_SIZE / 2, ft_desc, ft_peer,
						NULL));
		} else {
			uint64_t data = 0;

			if (n && !(ft_wait(n, &data) & FI_REMOTE_CQ_DATA))
				FT_DIE("writedata: no remote CQ data");
			if (n && data != *seq + n - 1)
				FT_DIE("writedata: last data %" PRIu64 ", expected %" PRIu64, data,
				       *seq + n - 1);
			FT_POST(fi_send(ft_ep, ctrl, 4, ft_desc, ft_peer, NULL));
			ft_wait(1, NULL);
		}
		*seq += n;
	} else if (posts()) {
		ft_wait(counted, NULL);
	}
	if (ft_opt.check && n) {
		ft_sync();
		if (receives())
			for (int j = 0; j < n; j++)
				ft_verify(rx_area(size, j), size, size + j, op_names[op]);
		if (receives())
			memset(rx_area(size, 0), 0, (size_t)n * size);
		ft_sync();
	}
}

static void run_size(size_t size, int first)
{
	int iters = ft_iterations(size, 20000, 2000, 200), total = iters + ft_opt.warmup;
	/* fabtests sends writes by inject up to the endpoint's RMA inject size, except with -v
	 * (it then needs completions that say the data arrived). Reads never. */
	size_t inject = op == OP_READ || ft_opt.check ? 0 : ft_inject_size(FT_OPT_INJECT_RMA_SIZE);
	int j = 0, counted = 0;
	uint64_t seq = 0;
	double start = 0, elapsed;
	uint8_t *ctrl = ft_buf + 2 * area + FT_CTRL_SIZE / 2;

	/* The data: each side's send area holds the pattern of (size, slot). */
	if (ft_opt.check)
		for (size_t k = 0; k < slots; k++)
			ft_fill(tx_area(size, k), size, size + k);
	ft_sync_inband();
	if (op == OP_WRITEDATA && ft_client())
		FT_POST(fi_recv(ft_ep, ctrl, FT_CTRL_SIZE / 2, ft_desc, ft_peer, NULL));
	for (int i = 0; i < total; i++) {
		if (i == ft_opt.warmup) {
			end_window(size, j, counted, &seq, 0);
			j = counted = 0;
			start = ft_now();
		}
		if (posts()) {
			post_rma(size, j, inject, seq + j);
			counted += size > inject;
		}
		if (++j == ft_opt.window) {
			end_window(size, j, counted, &seq, i + 1 == total);
			j = counted = 0;
		}
	}
	if (j)
		end_window(size, j, counted, &seq, 1);
	elapsed = ft_now() - start;
	if (ft_client())
		ft_show(size, iters, elapsed, 1, first);
}

/* Two areas of the window's slots of the largest size (fewer slots when no size posts a
 * whole window), then the control bytes. */
static size_t buf_size(size_t max)
{
	int most = ft_opt.iters ? ft_opt.iters : 20000;

	if (ft_opt.warmup > most)
		most = ft_opt.warmup;
	slots = (size_t)(most < ft_opt.window ? most : ft_opt.window);
	if (!slots)
		slots = 1;
	area = slots * max;
	return 2 * area;
}

static void own_option(int c, const char *arg)
{
	if (c == 'u') {
		one_way = 1;
		return;
	}
	for (op = OP_WRITE; op <= OP_WRITEDATA; op++)
		if (!strcmp(arg, op_names[op]))
			return;
	FT_DIE("unknown operation '%s'", arg);
}

static void usage(void)
{
	fprintf(stderr, "usage: rma_bw [-p prov] [-d domain] [-s src] [-e rdm] [-o write|read|writedata] "
			"[-u] [-S size|all|r:..|l:..] [-I iters] [-w warmup] [-W window] [-j inject] "
			"[-B port] [-P port] [-E] [-v] [server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const size_t defaults[] = { 64, 256, 1 << 10, 4 << 10, 64 << 10, 1 << 20 };

	static char what[32];

	ft_prog = "rma_bw";
	ft_parse(argc, argv, "o:u", own_option, usage);
	if (ft_opt.check && op != OP_WRITEDATA)
		ft_tx_op_flags = FI_DELIVERY_COMPLETE;
	snprintf(what, sizeof(what), "%s, %s", op_names[op],
		 one_way || op == OP_WRITEDATA ? "one way" : "both ways");
	ft_run_sizes(FI_MSG | FI_RMA, buf_size, defaults, sizeof(defaults) / sizeof(defaults[0]),
		     what, run_size);
	return 0;
}
