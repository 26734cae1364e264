/*
 * An endpoint with many peers in its AV (issue 30): does the cost of a message, or memory,
 * grow with the AV? One process, one thread, efa over the software SRD device on loopback
 * (FI_EFA_ENABLE_SHM_TRANSFER=0, so every message crosses the efa peer table and the
 * transport):
 *   - 64 receiving endpoints ("sinks", each with its CQ and receives posted);
 *   - a sender whose AV holds only the 64 sinks, then a second sender whose AV holds 10,000
 *     made-up peers first and the 64 sinks after them;
 * each sender sends 8-byte messages to the 64 sinks in turn (a window of 64 in flight).
 *
 *   many_peers [messages per sender, default 50000]
 * prints one line:
 *   "many_peers <µs/msg, 64 peers> <µs/msg, 10,064> <KiB for the 10,000 inserts>
 *    <KiB grown during the traffic, 64 peers> <the same, 10,064>"
 * Part of the fabric project.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define SINKS 64
#define MADE_UP 10000
#define RX_PER_SINK 64
#define WINDOW 64

#define CHECK(call)                                                                    \
	do {                                                                           \
		int ret_ = (int)(call);                                                \
		if (ret_) {                                                            \
			fprintf(stderr, "many_peers: %s: %s\n", #call, fi_strerror(-ret_)); \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

static struct fid_domain *domain;
static struct fi_info *info;

struct node {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	uint8_t name[64];
	size_t len;
};

static void open_node(struct node *n)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 1024 };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };

	CHECK(fi_cq_open(domain, &cq_attr, &n->cq, NULL));
	CHECK(fi_av_open(domain, &av_attr, &n->av, NULL));
	CHECK(fi_endpoint(domain, info, &n->ep, NULL));
	CHECK(fi_ep_bind(n->ep, &n->av->fid, 0));
	CHECK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(n->ep));
	n->len = sizeof(n->name);
	CHECK(fi_getname(&n->ep->fid, n->name, &n->len));
}

static long rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2)
		exit(1);
	fclose(f);
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct node sinks[SINKS];
static char rxbuf[SINKS][RX_PER_SINK][8];

static void post_rx(int s, int i)
{
	int ret;

	while ((ret = (int)fi_recv(sinks[s].ep, rxbuf[s][i], 8, NULL, FI_ADDR_UNSPEC,
				   (void *)(uintptr_t)i)) == -FI_EAGAIN)
		fi_cq_read(sinks[s].cq, NULL, 0);
	CHECK(ret);
}

/* Reaps the sinks' receives (reposting them); returns how many arrived. */
static long reap_sinks(void)
{
	struct fi_cq_entry e[16];
	long got = 0;

	for (int s = 0; s < SINKS; s++) {
		ssize_t n = fi_cq_read(sinks[s].cq, e, 16);

		if (n == -FI_EAVAIL) {
			fprintf(stderr, "many_peers: a receive failed\n");
			exit(1);
		}
		for (ssize_t k = 0; k < n; k++)
			post_rx(s, (int)(uintptr_t)e[k].op_context);
		if (n > 0)
			got += n;
	}
	return got;
}

/* `count` messages from `snd` to the sinks in turn (addresses `dest`); µs per message. */
static double traffic(struct node *snd, const fi_addr_t *dest, long count)
{
	static const char msg[8] = "8 bytes";
	struct fi_cq_entry e[64];
	long sent = 0, done = 0, arrived = 0;
	double t0 = now();

	while (done < count || arrived < count) {
		while (sent < count && sent - done < WINDOW) {
			ssize_t r = fi_send(snd->ep, msg, 8, NULL, dest[sent % SINKS], NULL);

			if (r == -FI_EAGAIN)
				break;
			CHECK(r);
			sent++;
		}
		ssize_t n = fi_cq_read(snd->cq, e, 64);

		if (n == -FI_EAVAIL) {
			fprintf(stderr, "many_peers: a send failed\n");
			exit(1);
		}
		if (n > 0)
			done += n;
		arrived += reap_sinks();
	}
	return (now() - t0) * 1e6 / (double)count;
}

/* The i-th made-up peer: our own address with the QPN and QKEY varied (no such endpoint). */
static void made_up(uint8_t *out, const struct node *n, uint32_t i)
{
	memcpy(out, n->name, n->len);
	out[16] = i & 0xff;
	out[17] = (i >> 8) & 0xff;
	memcpy(out + 20, &(uint32_t){ 0x10000 + i }, 4);
}

/* A sender with `extra` made-up peers in its AV before the sinks; prints its figures. */
static void run(long count, int extra, double *us, long *grown, long *inserts)
{
	struct node snd;
	fi_addr_t dest[SINKS];
	uint8_t name[64];
	long base;

	open_node(&snd);
	base = rss_kib();
	for (int i = 0; i < extra; i++) {
		fi_addr_t a;

		made_up(name, &snd, (uint32_t)i + 1);
		if (fi_av_insert(snd.av, name, 1, &a, 0, NULL) != 1) {
			fprintf(stderr, "many_peers: insert %d refused\n", i);
			exit(1);
		}
	}
	*inserts = rss_kib() - base;
	for (int s = 0; s < SINKS; s++)
		if (fi_av_insert(snd.av, sinks[s].name, 1, &dest[s], 0, NULL) != 1)
			exit(1);
	/* A first round to every sink: handshakes, first packets. */
	traffic(&snd, dest, SINKS * 4);
	base = rss_kib();
	*us = traffic(&snd, dest, count);
	*grown = rss_kib() - base;
}

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo();
	struct fid_fabric *fabric;
	long count = argc > 1 ? atol(argv[1]) : 50000;
	double us_small, us_big;
	long grown_small, grown_big, ins_small, ins_big;

	setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 1);
	if (!hints)
		return 2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->domain_attr->mr_mode = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->fabric_attr->prov_name = strdup("efa");
	hints->domain_attr->name = strdup("srd_lo-rdm");
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	if (info->addr_format != FI_ADDR_EFA) {
		fprintf(stderr, "many_peers: not efa addresses\n");
		return 1;
	}
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	for (int s = 0; s < SINKS; s++) {
		open_node(&sinks[s]);
		for (int i = 0; i < RX_PER_SINK; i++)
			post_rx(s, i);
	}
	run(count, 0, &us_small, &grown_small, &ins_small);
	run(count, MADE_UP, &us_big, &grown_big, &ins_big);
	printf("many_peers %.2f %.2f %ld %ld %ld\n", us_small, us_big, ins_big, grown_small,
	       grown_big);
	return 0; /* the process exit releases everything */
}
