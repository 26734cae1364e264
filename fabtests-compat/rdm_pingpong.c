/*
 * rdm_pingpong: message latency between two processes, as upstream fabtests'
 * fi_rdm_pingpong measures it (common options in common.h): the client sends, the server
 * answers with a message of the same size, and usec/xfer is half a round trip.
 *
 *   -o msg|tagged   fi_send/fi_recv (default) or fi_tsend/fi_trecv
 *
 * As in fabtests: messages no larger than the endpoint's message inject size (fi_getopt
 * FI_OPT_INJECT_MSG_SIZE, else tx_attr->inject_size; -j sets it) go out with
 * fi_inject/fi_tinject, larger ones with fi_send/fi_tsend whose completion the sender waits for
 * before it waits for the answer; each side keeps one receive posted (at least 1 KiB long) and
 * posts the next as soon as a message arrives; the clock runs from the end of the -w warm-up
 * round trips. With -v every message received is checked.
 */
#include "common.h"

#define TAG 0x9099

static int tagged;

/* Completions are told apart by context: a reply may complete before our send does. */
static int tx_ctx, rx_ctx;
static long tx_posted, tx_done, rx_posted, rx_done;
static size_t cur_size, inject;

static void post_recv(size_t size)
{
	uint8_t *rx = ft_buf + ft_buf_size / 2;
	size_t len = size > 1024 ? size : 1024;

	if (tagged)
		FT_POST(fi_trecv(ft_ep, rx, len, ft_desc, ft_peer, TAG, 0, &rx_ctx));
	else
		FT_POST(fi_recv(ft_ep, rx, len, ft_desc, ft_peer, &rx_ctx));
	rx_posted++;
}

/* Reads one completion; checks a receive's length, tag and (-v) bytes. */
static void reap_one(void)
{
	struct fi_cq_tagged_entry e;

	ft_next(&e, NULL);
	if (e.op_context == &tx_ctx) {
		tx_done++;
		return;
	}
	if (e.op_context != &rx_ctx || !(e.flags & FI_RECV) || e.len != cur_size ||
	    (tagged && e.tag != TAG))
		FT_DIE("receive of %zu B: flags 0x%" PRIx64 ", len %zu, context %p", cur_size,
		       e.flags, e.len, e.op_context);
	if (ft_opt.check)
		ft_verify(ft_buf + ft_buf_size / 2, cur_size, cur_size, "ping-pong message");
	rx_done++;
}

static void send_one(size_t size)
{
	if (size <= inject) {
		if (tagged)
			FT_POST(fi_tinject(ft_ep, ft_buf, size, ft_peer, TAG));
		else
			FT_POST(fi_inject(ft_ep, ft_buf, size, ft_peer));
		return;
	}
	if (tagged)
		FT_POST(fi_tsend(ft_ep, ft_buf, size, ft_desc, ft_peer, TAG, &tx_ctx));
	else
		FT_POST(fi_send(ft_ep, ft_buf, size, ft_desc, ft_peer, &tx_ctx));
	tx_posted++;
	/* The answer may complete first: reap_one tells them apart. */
	while (tx_done < tx_posted)
		reap_one();
}

static void recv_one(void)
{
	while (rx_done < rx_posted)
		reap_one();
}

static void run_size(size_t size, int first)
{
	int iters = ft_iterations(size, 10000, 1000, 100), total = iters + ft_opt.warmup;
	double start = 0, elapsed;

	cur_size = size;
	inject = ft_inject_size(FT_OPT_INJECT_MSG_SIZE);
	ft_fill(ft_buf, size, size);
	post_recv(size);
	ft_sync();
	for (int i = 0; i < total; i++) {
		if (i == ft_opt.warmup)
			start = ft_now();
		if (ft_client())
			send_one(size);
		recv_one();
		/* The next receive is posted before this side's message can be answered. */
		if (i + 1 < total)
			post_recv(size);
		if (!ft_client())
			send_one(size);
	}
	elapsed = ft_now() - start;
	if (ft_client())
		ft_show(size, iters, elapsed, 2, first);
}

static size_t buf_size(size_t max)
{
	return 2 * (max > 1024 ? max : 1024);
}

static void own_option(int c, const char *arg)
{
	(void)c;
	if (!strcmp(arg, "tagged"))
		tagged = 1;
	else if (strcmp(arg, "msg"))
		FT_DIE("unknown mode '%s' (msg or tagged)", arg);
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_pingpong [-p prov] [-d domain] [-s src] [-e rdm] [-o msg|tagged] "
			"[-S size|all] [-I iters] [-w warmup] [-j inject] [-B port] [-P port] [-E] [-v] "
			"[server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const size_t defaults[] = { 64, 256, 1 << 10, 4 << 10, 64 << 10, 1 << 20 };

	ft_prog = "rdm_pingpong";
	ft_parse(argc, argv, "o:", own_option, usage);
	/* Sends from the first half of the buffer, receives into the second. */
	ft_run_sizes(FI_MSG | (tagged ? FI_TAGGED : 0), buf_size, defaults,
		     sizeof(defaults) / sizeof(defaults[0]), tagged ? "tagged" : "msg", run_size);
	return 0;
}
