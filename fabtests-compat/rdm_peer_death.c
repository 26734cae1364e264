/*
 * rdm_peer_death: a peer killed in the middle of transfers (common options in common.h; -S is
 * ignored). The server kills itself with SIGKILL right after telling the client, over the
 * out-of-band channel, to go on; the client then has a large send and an RMA read to it in
 * flight, neither of which the dead server can take part in. Each must end in an error
 * completion, not a hang and not a success, and a later send to the dead peer must fail too
 * (an error from the call or an error completion). The runner expects the server to die by
 * SIGKILL; the client prints the verdict.
 */
#include <signal.h>

#include "common.h"

#define BIG (8u << 20)

static int send_ctx, read_ctx, late_ctx;

/* Waits up to 30 s for the next completion, which must be an error for one of the contexts
 * `ctx[0..n)`; returns its index and stores its error in *errnum. */
static int expect_error(void *const *ctx, int n, int *errnum, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	double since = ft_now();

	for (;;) {
		ssize_t r = fi_cq_read(ft_cq, &e, 1);

		if (r == 1)
			FT_DIE("%s to a dead peer completed successfully (context %p)", what,
			       e.op_context);
		if (r == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(ft_cq, &err, 0) != 1)
				FT_DIE("fi_cq_readerr returned no entry after -FI_EAVAIL");
			if (!err.err)
				FT_DIE("%s: error completion with error 0", what);
			for (int i = 0; i < n; i++)
				if (err.op_context == ctx[i]) {
					*errnum = err.err;
					return i;
				}
			FT_DIE("%s: error completion for context %p", what, err.op_context);
		}
		if (r != -FI_EAGAIN)
			FT_DIE("fi_cq_read: %s", fi_strerror((int)-r));
		if (ft_now() - since > 30)
			FT_DIE("%s to a dead peer: no completion after 30 s", what);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_peer_death [-p prov] [-d domain] [-s src] [-e rdm] [-B port] "
			"[-P port] [-E] [server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint8_t go = 1;

	ft_prog = "rdm_peer_death";
	ft_parse(argc, argv, "", NULL, usage);
	ft_oob_connect();
	ft_open(FI_MSG | FI_RMA, BIG);
	ft_banner("killed peer functional test");
	ft_exchange();
	/* One message both ways first: the peers know each other before one dies. */
	if (ft_client()) {
		FT_POST(fi_send(ft_ep, ft_buf, 64, ft_desc, ft_peer, &send_ctx));
		ft_wait(1, NULL);
	} else {
		FT_POST(fi_recv(ft_ep, ft_buf, 64, ft_desc, ft_peer, &send_ctx));
		ft_wait(1, NULL);
	}
	ft_sync();
	if (!ft_client()) {
		ft_oob_send(&go, 1);
		raise(SIGKILL);
		FT_DIE("still alive after SIGKILL");
	}
	ft_oob_recv(&go, 1);
	/* The server is dead or about to be, and never progresses again. */
	FT_POST(fi_send(ft_ep, ft_buf, BIG, ft_desc, ft_peer, &send_ctx));
	FT_POST(fi_read(ft_ep, ft_buf + BIG / 2, 1 << 20, ft_desc, ft_peer, ft_peer_addr,
			ft_peer_key, &read_ctx));
	double t0 = ft_now();
	void *const both[2] = { &send_ctx, &read_ctx };
	int errs[2] = { 0, 0 }, e, first;

	first = expect_error(both, 2, &e, "an 8 MiB send or a 1 MiB read");
	errs[first] = e;
	if (expect_error(&both[1 - first], 1, &e, "an 8 MiB send or a 1 MiB read") != 0)
		FT_DIE("unreachable");
	errs[1 - first] = e;
	printf("ok: an 8 MiB send and a 1 MiB read to a killed peer: error completions (%s; %s) "
	       "after %.1f s\n", fi_strerror(errs[0]), fi_strerror(errs[1]), ft_now() - t0);

	/* A later send: refused by the call, or an error completion. */
	double since = ft_now();
	ssize_t r;

	while ((r = fi_send(ft_ep, ft_buf, 64, ft_desc, ft_peer, &late_ctx)) == -FI_EAGAIN) {
		fi_cq_read(ft_cq, NULL, 0);
		if (ft_now() - since > 30)
			FT_DIE("a send to a dead peer: -FI_EAGAIN for 30 s");
	}
	if (r == 0) {
		void *const late[1] = { &late_ctx };

		expect_error(late, 1, &e, "a later send");
		printf("ok: a later send to it: error completion (%s)\n", fi_strerror(e));
	} else
		printf("ok: a later send to it: refused (%s)\n", fi_strerror((int)-r));
	printf("rdm_peer_death: all steps passed\n");
	ft_teardown();
	return 0;
}
