/*
 * rdm_tagged_bw: tagged-message bandwidth and message rate between two processes, as
 * upstream fabtests' fi_rdm_tagged_bw measures them (common options in common.h). The client
 * sends windows of tagged messages; the server keeps a window of tagged receives posted, and
 * checks each message's tag, length and (-v) data. Each size ends with an untagged message.
 */
#include "common.h"

/*
 * One tag for every message, matched exactly: Debian's libfabric 1.17 shm stops delivering
 * under this flood when the receives carry ignore bits (so the tag cannot number the
 * messages without losing the upstream row of `make bench`).
 */
#define TAG 0x7a6700000000ULL

static void run_size(size_t size, int first)
{
	int iters = ft_iterations(size, 10000, 2000, 200), total = iters + ft_opt.warmup;
	uint8_t *ctrl = ft_buf + ft_buf_size;
	double start = 0, elapsed = 0;

	if (ft_client() && ft_opt.check)
		ft_fill(ft_buf, size, size);
	if (!ft_client())
		FT_POST(fi_recv(ft_ep, ctrl, FT_CTRL_SIZE, ft_desc, ft_peer, NULL));
	ft_sync();
	if (ft_client()) {
		int outstanding = 0;

		for (int i = 0; i < total; i++) {
			if (i == ft_opt.warmup) {
				ft_wait(outstanding, NULL);
				outstanding = 0;
				start = ft_now();
			}
			/* fi_tsend, not fi_tinject, even for small messages: its completions pace
			 * the sender to what the receiver has taken in. */
			FT_POST(fi_tsend(ft_ep, ft_buf, size, ft_desc, ft_peer, TAG,
					 NULL));
			outstanding++;
			if (outstanding == ft_opt.window) {
				ft_wait(outstanding, NULL);
				outstanding = 0;
			}
		}
		ft_wait(outstanding, NULL);
		elapsed = ft_now() - start;
		FT_POST(fi_send(ft_ep, ctrl, 4, ft_desc, ft_peer, NULL));
		ft_wait(1, NULL);
		ft_show(size, iters, elapsed, 1, first);
		return;
	}
	/* Every message arrives with its size and tag. (Those that came before their receive
	 * was posted complete after the end-of-size message, which had its receive.) */
	int posted = 0, got = 0, ctrl_in = 0;

	while (got < total || !ctrl_in) {
		struct fi_cq_tagged_entry e;

		while (posted < total && posted - got < ft_opt.window) {
			FT_POST(fi_trecv(ft_ep, ft_buf, size, ft_desc, ft_peer, TAG, 0, NULL));
			posted++;
		}
		ft_next(&e, NULL);
		if (!(e.flags & FI_TAGGED)) {
			ctrl_in = 1;
			continue;
		}
		if (e.len != size || e.tag != TAG)
			FT_DIE("tagged message %d of %zu B: len %zu, tag 0x%" PRIx64, got, size,
			       e.len, e.tag);
		got++;
	}
	if (ft_opt.check)
		ft_verify(ft_buf, size, size, "tagged receive");
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_tagged_bw [-p prov] [-d domain] [-s src] [-e rdm] [-S size|all] "
			"[-I iters] [-w warmup] [-W window] [-B port] [-P port] [-E] [-v] "
			"[server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const size_t defaults[] = { 8, 64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10,
					   256 << 10, 1 << 20 };

	ft_prog = "rdm_tagged_bw";
	ft_parse(argc, argv, "", NULL, usage);
	ft_run_sizes(FI_MSG | FI_TAGGED, 1, defaults, sizeof(defaults) / sizeof(defaults[0]),
		     "tagged", run_size);
	return 0;
}
