/*
 * Resident memory of endpoints and address vectors, on whichever libfabric.so.1 the loader
 * picks (make bench switches it by library path).
 *   ep_memory <provider> [domain]
 * Opens 16 enabled RDM endpoints (each with its own CQ and AV) and reports the growth of the
 * resident set per endpoint, then inserts 1,000 and 10,000 distinct peer addresses into one AV
 * (made from the endpoint's own name with the peer-identifying bytes varied) and reports the
 * growth for each. Prints one line:
 *   "memory <provider> <KiB per endpoint> <KiB for 1000 AV entries> <KiB for 10000> <version>"
 * where an AV figure is "full@<n>" when the provider refused the n-th insert.
 * Part of the fabric project.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#define ENDPOINTS 16

#define CHECK(call)                                                                    \
	do {                                                                           \
		int ret_ = (int)(call);                                                \
		if (ret_) {                                                            \
			fprintf(stderr, "ep_memory: %s: %s\n", #call, fi_strerror(-ret_)); \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

static long rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2)
		exit(1);
	fclose(f);
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static struct fid_domain *domain;
static struct fi_info *info;

static struct fid_ep *open_ep(struct fid_av **av_out)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA, .size = 1024 };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;

	CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	CHECK(fi_av_open(domain, &av_attr, &av, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(ep));
	if (av_out)
		*av_out = av;
	return ep;
}

/* The i-th made-up peer address, derived from our own name. */
static size_t peer_name(uint8_t *out, const uint8_t *own, size_t len, uint32_t i)
{
	memcpy(out, own, len);
	switch (info->addr_format) {
	case FI_ADDR_EFA: /* gid[16], qpn u16, pad u16, qkey u32 */
		out[16] = i & 0xff;
		out[17] = (i >> 8) & 0xff;
		memcpy(out + 20, &(uint32_t){ 0x10000 + i }, 4);
		return len;
	case FI_SOCKADDR_IN: /* vary the port (at the same place in both) */
	case FI_SOCKADDR_IN6:
		out[2] = ((20000 + i) >> 8) & 0xff;
		out[3] = (20000 + i) & 0xff;
		return len;
	case FI_ADDR_STR: /* shm: fi_shm://<pid>:0:0 with pids nobody has */
		return (size_t)snprintf((char *)out, 64, "fi_shm://%u:0:0", 4000000u + i) + 1;
	default:
		fprintf(stderr, "ep_memory: address format %u not handled\n", info->addr_format);
		exit(1);
	}
}

/* Inserts peers [from, to); returns the first one refused, or 0. */
static uint32_t insert(struct fid_av *av, const uint8_t *own, size_t len, uint32_t from,
		       uint32_t to)
{
	uint8_t name[256];

	for (uint32_t i = from; i < to; i++) {
		fi_addr_t a;

		peer_name(name, own, len, i);
		if (fi_av_insert(av, name, 1, &a, 0, NULL) != 1)
			return i;
	}
	return 0;
}

static void figure(char *out, size_t n, uint32_t refused, long kib)
{
	if (refused)
		snprintf(out, n, "full@%u", refused);
	else
		snprintf(out, n, "%ld", kib);
}

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo();
	struct fid_fabric *fabric;
	struct fid_av *av;
	uint8_t own[256];
	size_t len = sizeof(own);
	long base, eps;
	uint32_t refused;
	char av1k[32], av10k[32];

	if (argc < 2 || !hints)
		return 2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->fabric_attr->prov_name = strdup(argv[1]);
	if (argc > 2)
		hints->domain_attr->name = strdup(argv[2]);
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	/* The first endpoint pays for one-time setup (threads, pools): not counted. */
	open_ep(&av);
	base = rss_kib();
	for (int i = 0; i < ENDPOINTS; i++)
		open_ep(NULL);
	eps = rss_kib() - base;

	struct fid_ep *ep = open_ep(&av);
	CHECK(fi_getname(&ep->fid, own, &len));
	base = rss_kib();
	refused = insert(av, own, len, 1, 1001);
	figure(av1k, sizeof(av1k), refused, rss_kib() - base);
	if (!refused)
		refused = insert(av, own, len, 1001, 10001);
	figure(av10k, sizeof(av10k), refused, rss_kib() - base);
	printf("memory %s %.1f %s %s %u.%u\n", argv[1], (double)eps / ENDPOINTS, av1k, av10k,
	       FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
	return 0; /* the process exit releases everything */
}
