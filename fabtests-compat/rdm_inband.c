/*
 * The in-band address flow of upstream fabtests (runfabtests.sh without -b), over every efa
 * RDM domain in turn: no out-of-band channel, each side names the other by node and service.
 *
 *   server: fi_getinfo(node, service, FI_SOURCE) -> an endpoint bound to that service
 *   client: fi_getinfo(node, NULL, FI_SOURCE) for its source address, then
 *           fi_getinfo(node, service, 0) with that address in hints->src_addr; inserts the
 *           resulting dest_addr (node and service only, no QKEY) and sends its own name
 *   server: receives it from an unknown source, inserts it, answers with its own name
 *   client: the answer comes from the inserted peer, whose AV entry now holds the server's
 *           full address; then a multi-packet message each way, checked byte for byte.
 *
 * Also checked: the device is chosen by the source and the destination (the domain that owns
 * the node, never one that cannot reach it), and a second endpoint on a service already bound
 * fails at fi_endpoint. Usage (run.sh's pair): rdm_inband -p efa -B <port> (server),
 * rdm_inband -p efa -P <port> <any host> (client); -d and the host are ignored: every efa RDM
 * domain is tried, at ports <port>, <port>+1, ...
 */
#include "common.h"

#include <arpa/inet.h>

#define BIG (200 * 1024)
#define FT_FIVERSION FI_VERSION(1, 9)
#define MAX_DOMAINS 16

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *txcq, *rxcq;
static struct fid_av *av;
static uint8_t *buf;

static void usage(void)
{
	fprintf(stderr, "usage: rdm_inband -p efa [-B|-P port] [host]\n");
	exit(2);
}

/* The IPv4 or IPv6 text of an FI_ADDR_EFA address's GID. */
static void efa_node(const void *addr, char *out, size_t n)
{
	const uint8_t *gid = addr;
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(gid, v4mapped, 12))
		inet_ntop(AF_INET, gid + 12, out, n);
	else
		inet_ntop(AF_INET6, gid, out, n);
}

static uint16_t efa_qpn(const void *addr)
{
	const uint8_t *a = addr;
	return a[16] | a[17] << 8;
}

static uint32_t efa_qkey(const void *addr)
{
	const uint8_t *a = addr;
	return a[20] | a[21] << 8 | a[22] << 16 | (uint32_t)a[23] << 24;
}

static struct fi_info *base_hints(void)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		FT_DIE("fi_allocinfo");
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG | FI_SOURCE;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	h->addr_format = FI_ADDR_EFA;
	h->fabric_attr->prov_name = strdup(ft_opt.prov ? ft_opt.prov : "efa");
	return h;
}

/* Waits for one completion; returns its source (FI_SOURCE). */
static fi_addr_t wait_comp(struct fid_cq *cq, void *ctx, const char *what)
{
	struct fi_cq_tagged_entry e;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	double until = ft_now() + 20;

	for (;;) {
		ssize_t n = fi_cq_readfrom(cq, &e, 1, &src);

		if (n == 1) {
			if (e.op_context != ctx)
				FT_DIE("%s: completion of another operation", what);
			return src;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };

			fi_cq_readerr(cq, &err, 0);
			FT_DIE("%s: error completion: %s (prov_errno %d)", what,
			       fi_strerror(err.err), err.prov_errno);
		}
		if (n != -FI_EAGAIN)
			FT_DIE("%s: fi_cq_readfrom: %s", what, fi_strerror((int)-n));
		if (ft_now() > until)
			FT_DIE("%s: no completion in 20 s", what);
	}
}

static void open_ep(struct fi_info *fi)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .size = 64 };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };

	FT_CHECK(fi_fabric(fi->fabric_attr, &fabric, NULL));
	FT_CHECK(fi_domain(fabric, fi, &domain, NULL));
	FT_CHECK(fi_cq_open(domain, &cq_attr, &txcq, NULL));
	FT_CHECK(fi_cq_open(domain, &cq_attr, &rxcq, NULL));
	FT_CHECK(fi_av_open(domain, &av_attr, &av, NULL));
	FT_CHECK(fi_endpoint(domain, fi, &ep, NULL));
	FT_CHECK(fi_ep_bind(ep, &txcq->fid, FI_TRANSMIT));
	FT_CHECK(fi_ep_bind(ep, &rxcq->fid, FI_RECV));
	FT_CHECK(fi_ep_bind(ep, &av->fid, 0));
	FT_CHECK(fi_enable(ep));
}

static void close_ep(void)
{
	FT_CHECK(fi_close(&ep->fid));
	FT_CHECK(fi_close(&av->fid));
	FT_CHECK(fi_close(&txcq->fid));
	FT_CHECK(fi_close(&rxcq->fid));
	FT_CHECK(fi_close(&domain->fid));
	FT_CHECK(fi_close(&fabric->fid));
}

static void post_recv(size_t len, void *ctx)
{
	ssize_t r;

	while ((r = fi_recv(ep, buf, len, NULL, FI_ADDR_UNSPEC, ctx)) == -FI_EAGAIN)
		fi_cq_read(rxcq, NULL, 0);
	FT_CHECK(r);
}

static void send_to(fi_addr_t to, const void *p, size_t len, void *ctx)
{
	ssize_t r;

	memcpy(buf + BIG, p, len);
	while ((r = fi_send(ep, buf + BIG, len, NULL, to, ctx)) == -FI_EAGAIN)
		fi_cq_read(txcq, NULL, 0);
	FT_CHECK(r);
	wait_comp(txcq, ctx, "send");
}

/* One domain: `node` is its address, `port` the service the server binds. */
static void run(const char *dom, const char *node, int port)
{
	char service[16], name[256], want_node[64];
	struct fi_info *hints = base_hints(), *fi, *src_fi;
	struct fi_context2 rctx, sctx;
	size_t len = sizeof(name);
	fi_addr_t peer, from;
	static uint8_t big[BIG];

	snprintf(service, sizeof(service), "%d", port);
	if (!ft_client()) {
		struct fid_ep *twin;

		FT_CHECK(fi_getinfo(FT_FIVERSION, node, service, FI_SOURCE, hints, &fi));
		if (strcmp(fi->domain_attr->name, dom))
			FT_DIE("%s: FI_SOURCE %s gave domain %s", dom, node, fi->domain_attr->name);
		efa_node(fi->src_addr, want_node, sizeof(want_node));
		if (strcmp(want_node, node) || efa_qpn(fi->src_addr) != port)
			FT_DIE("%s: source address %s:%u, not %s:%d", dom, want_node,
			       efa_qpn(fi->src_addr), node, port);
		open_ep(fi);
		/* A service is bound by one endpoint at a time. */
		if (fi_endpoint(domain, fi, &twin, NULL) != -FI_EADDRINUSE)
			FT_DIE("%s: a second endpoint on service %d was not refused", dom, port);
		post_recv(BIG, &rctx);
		from = wait_comp(rxcq, &rctx, "the client's name");
		if (from != FI_ADDR_NOTAVAIL)
			FT_DIE("%s: a sender not yet inserted reported as %llu", dom,
			       (unsigned long long)from);
		if (fi_av_insert(av, buf, 1, &peer, 0, NULL) != 1)
			FT_DIE("%s: fi_av_insert of the client's name", dom);
		FT_CHECK(fi_getname(&ep->fid, name, &len));
		post_recv(BIG, &rctx);
		send_to(peer, name, len, &sctx);
		/* The client's big message, echoed back. */
		from = wait_comp(rxcq, &rctx, "the client's message");
		if (from != peer)
			FT_DIE("%s: message source %llu, not %llu", dom, (unsigned long long)from,
			       (unsigned long long)peer);
		memcpy(big, buf, BIG);
		send_to(peer, big, BIG, &sctx);
		post_recv(16, &rctx);
		wait_comp(rxcq, &rctx, "the client's last word");
	} else {
		char dest_node[64];

		FT_CHECK(fi_getinfo(FT_FIVERSION, node, NULL, FI_SOURCE, hints, &src_fi));
		hints->src_addr = malloc(src_fi->src_addrlen);
		memcpy(hints->src_addr, src_fi->src_addr, src_fi->src_addrlen);
		hints->src_addrlen = src_fi->src_addrlen;
		hints->addr_format = src_fi->addr_format;
		fi_freeinfo(src_fi);
		FT_CHECK(fi_getinfo(FT_FIVERSION, node, service, 0, hints, &fi));
		if (strcmp(fi->domain_attr->name, dom))
			FT_DIE("%s: source and destination %s gave domain %s", dom, node,
			       fi->domain_attr->name);
		if (!fi->dest_addr)
			FT_DIE("%s: no dest_addr", dom);
		efa_node(fi->dest_addr, dest_node, sizeof(dest_node));
		if (strcmp(dest_node, node) || efa_qpn(fi->dest_addr) != port ||
		    efa_qkey(fi->dest_addr) != 0)
			FT_DIE("%s: dest_addr %s:%u:%u for %s:%d", dom, dest_node,
			       efa_qpn(fi->dest_addr), efa_qkey(fi->dest_addr), node, port);
		open_ep(fi);
		if (fi_av_insert(av, fi->dest_addr, 1, &peer, 0, NULL) != 1)
			FT_DIE("%s: fi_av_insert of the server's node and service", dom);
		FT_CHECK(fi_getname(&ep->fid, name, &len));
		post_recv(BIG, &rctx);
		send_to(peer, name, len, &sctx);
		from = wait_comp(rxcq, &rctx, "the server's name");
		if (from != peer)
			FT_DIE("%s: answer from %llu, not the inserted server %llu", dom,
			       (unsigned long long)from, (unsigned long long)peer);
		/* The AV entry now holds the server's full address (its QKEY learned). */
		{
			char got[256];
			size_t glen = sizeof(got);

			FT_CHECK(fi_av_lookup(av, peer, got, &glen));
			if (glen != 32 || memcmp(got, buf, 32))
				FT_DIE("%s: the AV entry is not the server's name after its answer", dom);
		}
		for (size_t i = 0; i < BIG; i++)
			big[i] = (uint8_t)(i * 7 + port);
		post_recv(BIG, &rctx);
		send_to(peer, big, BIG, &sctx);
		from = wait_comp(rxcq, &rctx, "the echo");
		if (from != peer || memcmp(buf, big, BIG))
			FT_DIE("%s: the echo differs", dom);
		send_to(peer, "bye", 4, &sctx);
		printf("ok: %s: in-band addresses at %s:%d\n", dom, node, port);
	}
	close_ep();
	fi_freeinfo(fi);
	fi_freeinfo(hints);
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *list, *i;
	char doms[MAX_DOMAINS][64], nodes[MAX_DOMAINS][64];
	int n = 0;

	ft_prog = "rdm_inband";
	ft_parse(argc, argv, "", NULL, usage);
	hints = base_hints();
	FT_CHECK(fi_getinfo(FT_FIVERSION, NULL, NULL, 0, hints, &list));
	for (i = list; i && n < MAX_DOMAINS; i = i->next) {
		if (!i->src_addr || i->addr_format != FI_ADDR_EFA)
			continue;
		snprintf(doms[n], sizeof(doms[n]), "%s", i->domain_attr->name);
		efa_node(i->src_addr, nodes[n], sizeof(nodes[n]));
		n++;
	}
	if (ft_client())
		fprintf(stderr, "%s: libfabric %u.%u, provider %s, %d domain(s), in-band addresses\n",
			ft_prog, FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
			list ? list->fabric_attr->prov_name : "none", n);
	fi_freeinfo(list);
	fi_freeinfo(hints);
	if (n == 0)
		FT_DIE("no efa RDM domain");
	buf = calloc(1, 2 * BIG);
	if (!buf)
		FT_DIE("out of memory");
	for (int d = 0; d < n; d++)
		run(doms[d], nodes[d], ft_opt.port + d);
	free(buf);
	return 0;
}
