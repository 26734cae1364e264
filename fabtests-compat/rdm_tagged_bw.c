/*
 * rdm_tagged_bw: tagged-message bandwidth and message rate between two processes, moving the
 * traffic of upstream fabtests' fi_rdm_tagged_bw (common options in common.h). The client
 * sends windows of -W tagged messages from one buffer (fi_tinject up to the endpoint's inject
 * size), then waits for their completions and for a 4-byte answer; the server posts a window
 * of receives into one buffer, waits for the window's messages (checking each one's tag and
 * length, and with -v the bytes), then answers. The clock runs from the end of the -w warm-up
 * messages to the last answer (the client prints). Not in fabtests: -O puts the receive buffer
 * that many bytes further (both buffers otherwise start pages), as an application's buffers lie
 * at any offset from each other.
 */
#include "common.h"

/* -O: bytes by which the receive buffer is moved (less than a page); where it starts without. */
static size_t rx_offset, rx_start;

/*
 * Data messages carry the tag TAG + their number within the size, matched exactly (no ignore
 * bits: Debian's libfabric 1.17 shm stops delivering under this flood when receives carry
 * them); the receiver's answers carry ACK.
 */
#define TAG 0x7a6700000000ULL
#define ACK 0x7a6800000000ULL

static void run_size(size_t size, int first)
{
	int iters = ft_iterations(size, 20000, 2000, 200), total = iters + ft_opt.warmup;
	/* The send buffer, then the receive buffer (receives at least fabtests' 1 KiB control
	 * size): every message of a window uses the same one, as in fabtests. The answers use the
	 * second half of the control bytes (ft_sync_inband the first). */
	size_t rx_len = size > 1024 ? size : 1024;
	uint8_t *tx = ft_buf, *rx = ft_buf + rx_start + rx_offset;
	uint8_t *ack = ft_buf + ft_buf_size + FT_CTRL_SIZE / 2;
	/* fabtests asks the endpoint's message inject size (FI_OPT_INJECT_MSG_SIZE, also for
	 * tagged messages) and injects up to it, with -v too. */
	size_t inject = ft_inject_size(FT_OPT_INJECT_MSG_SIZE);
	double start = 0, elapsed;
	int j = 0, counted = 0;

	if (ft_client() && ft_opt.check)
		ft_fill(tx, size, size);
	ft_sync_inband();
	/* The sender keeps a receive posted for the next answer. */
	if (ft_client())
		FT_POST(fi_trecv(ft_ep, ack, FT_CTRL_SIZE / 2, ft_desc, ft_peer, ACK, 0, NULL));
	for (int i = 0; i < total; i++) {
		if (i == ft_opt.warmup)
			start = ft_now();
		if (ft_client()) {
			if (size <= inject) {
				FT_POST(fi_tinject(ft_ep, tx, size, ft_peer, TAG + i));
			} else {
				FT_POST(fi_tsend(ft_ep, tx, size, ft_desc, ft_peer, TAG + i, NULL));
				counted++;
			}
		} else {
			FT_POST(fi_trecv(ft_ep, rx, rx_len, ft_desc, ft_peer, TAG + i, 0, NULL));
		}
		if (++j < ft_opt.window && i + 1 < total)
			continue;
		/*
		 * The end of a window: the sender waits for its sends' completions, then for the
		 * receiver's answer (and posts the receive for the next); the receiver waits for
		 * the window's messages, checks them and answers with 4 bytes.
		 */
		if (ft_client()) {
			ft_wait(counted + 1, NULL);
			if (i + 1 < total)
				FT_POST(fi_trecv(ft_ep, ack, FT_CTRL_SIZE / 2, ft_desc, ft_peer, ACK,
						 0, NULL));
		} else {
			for (int k = 0; k < j; k++) {
				struct fi_cq_tagged_entry e;

				ft_next(&e, NULL);
				if (!(e.flags & FI_TAGGED) || !(e.flags & FI_RECV) || e.len != size ||
				    e.tag < TAG + i + 1 - j || e.tag > TAG + i)
					FT_DIE("tagged message %d of %zu B: flags 0x%" PRIx64
					       ", len %zu, tag 0x%" PRIx64, i + 1 - j + k, size,
					       e.flags, e.len, e.tag);
			}
			if (ft_opt.check)
				ft_verify(rx, size, size, "tagged receive");
			FT_POST(fi_tsend(ft_ep, ack, 4, ft_desc, ft_peer, ACK, NULL));
			ft_wait(1, NULL);
		}
		j = counted = 0;
	}
	elapsed = ft_now() - start;
	if (ft_client())
		ft_show(size, iters, elapsed, 1, first);
}

static size_t buf_size(size_t max)
{
	/* The send buffer, the receive buffer, and room for -O past it. */
	rx_start = max > 1024 ? max : 1024;
	return 2 * rx_start + 4096;
}

static void own_option(int c, const char *arg)
{
	if (c != 'O' || atol(arg) < 0 || atol(arg) >= 4096)
		FT_DIE("-O takes 0 to 4095 bytes");
	rx_offset = (size_t)atol(arg);
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_tagged_bw [-p prov] [-d domain] [-s src] [-e rdm] [-S size|all] "
			"[-I iters] [-w warmup] [-W window] [-j inject] [-B port] [-P port] [-E] [-v] "
			"[-O rx offset] [server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const size_t defaults[] = { 64, 256, 1 << 10, 4 << 10, 64 << 10, 1 << 20 };

	ft_prog = "rdm_tagged_bw";
	ft_parse(argc, argv, "O:", own_option, usage);
	ft_run_sizes(FI_MSG | FI_TAGGED, buf_size, defaults,
		     sizeof(defaults) / sizeof(defaults[0]), "tagged", run_size);
	return 0;
}
