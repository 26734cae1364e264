/*
 * rma_bw: RMA bandwidth between two processes, with the command line and output columns of
 * upstream fabtests' fi_rma_bw. Written for this project; it uses only the public libfabric
 * API, so it builds against Debian's installed headers (binary compatibility) and runs on any
 * libfabric.
 *
 *   server:  rma_bw [options]
 *   client:  rma_bw [options] <server host>
 *
 * Options (as fabtests):
 *   -p <provider>  -d <domain>  -e rdm
 *   -o write|read|writedata    RMA operation (default write)
 *   -o tsend                   tagged sends into posted tagged receives instead (message rate,
 *                              as fabtests' fi_tagged_bw would measure it)
 *   -S <size>|all              one transfer size (k/m suffixes) or every power of two
 *   -I <iterations>  -w <warmup iterations>  -W <window>
 *   -B <port>  server's out-of-band TCP port (default 9228)
 *   -P <port>  port the client connects to (default 9228)
 *   -E         out-of-band address exchange over TCP (always on here; accepted for fabtests)
 *   -v         check the data of every size
 *
 * Addresses, buffer addresses and keys are exchanged over the TCP connection, which also
 * carries the synchronisation between sizes. The client times the transfers and prints one
 * row per size; the server prints nothing but errors.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

enum op { OP_WRITE, OP_READ, OP_WRITEDATA, OP_TSEND };

#define TAG 0x7a67

#define CTRL_SIZE 64

static struct {
	const char *prov, *domain, *host;
	enum op op;
	size_t size; /* 0: the default sizes, SIZE_MAX: all */
	int iters, warmup, window, port, check;
} opt = { .iters = 0, .warmup = 10, .window = 64, .port = 9228 };

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;
static struct fid_mr *mr;
static void *desc;
static uint8_t *buf;
static size_t buf_size;
static fi_addr_t peer;
static uint64_t peer_addr, peer_key;
static int sock = -1;
/* Completions read while waiting on the TCP channel (progress_fabric). */
static struct fi_cq_data_entry early[1024];
static int nearly;

#define DIE(...)                                                  \
	do {                                                      \
		fprintf(stderr, "rma_bw: " __VA_ARGS__);          \
		fputc('\n', stderr);                              \
		exit(1);                                          \
	} while (0)

#define CHECK(call)                                                                   \
	do {                                                                          \
		int ret_ = (int)(call);                                               \
		if (ret_)                                                             \
			DIE("%s: %s (%d)", #call, fi_strerror(-ret_), ret_);          \
	} while (0)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	case '\0': break;
	default: DIE("bad size '%s'", s);
	}
	return v;
}

/* ---- out-of-band TCP channel ---- */

static void progress_fabric(void);

static void oob_all(int send_dir, void *p, size_t n)
{
	uint8_t *b = p;

	while (n) {
		ssize_t r;

		if (!send_dir) {
			/*
			 * Keep the endpoint progressing while waiting on the peer: with manual
			 * progress it may still owe the peer acknowledgements (as fabtests do,
			 * never block without driving the CQ).
			 */
			struct pollfd pfd = { .fd = sock, .events = POLLIN };

			while (poll(&pfd, 1, 0) == 0)
				progress_fabric();
		}
		r = send_dir ? send(sock, b, n, MSG_NOSIGNAL) : recv(sock, b, n, 0);

		if (r <= 0)
			DIE("out-of-band connection: %s", r ? strerror(errno) : "closed by peer");
		b += r;
		n -= r;
	}
}

static void oob_send(const void *p, size_t n) { oob_all(1, (void *)p, n); }
static void oob_recv(void *p, size_t n) { oob_all(0, p, n); }

static void oob_sync(void)
{
	uint8_t b = 1;

	oob_send(&b, 1);
	oob_recv(&b, 1);
}

static void oob_connect(void)
{
	char port[16];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *a;
	int one = 1;

	snprintf(port, sizeof(port), "%d", opt.port);
	if (opt.host) {
		if (getaddrinfo(opt.host, port, &hints, &res))
			DIE("cannot resolve %s", opt.host);
		/* The server may still be starting: retry for a few seconds. */
		for (int tries = 0; sock < 0 && tries < 100; tries++) {
			for (a = res; a; a = a->ai_next) {
				int s = socket(a->ai_family, a->ai_socktype, 0);

				if (s >= 0 && connect(s, a->ai_addr, a->ai_addrlen) == 0) {
					sock = s;
					break;
				}
				if (s >= 0)
					close(s);
			}
			if (sock < 0)
				usleep(50000);
		}
		freeaddrinfo(res);
		if (sock < 0)
			DIE("cannot connect to %s:%d", opt.host, opt.port);
	} else {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(opt.port) };
		int l = socket(AF_INET, SOCK_STREAM, 0);

		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, (struct sockaddr *)&sin, sizeof(sin)) || listen(l, 1))
			DIE("cannot listen on port %d: %s", opt.port, strerror(errno));
		sock = accept(l, NULL, NULL);
		if (sock < 0)
			DIE("accept: %s", strerror(errno));
		close(l);
	}
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- fabric setup ---- */

static void open_fabric(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	uint64_t access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

	if (!hints)
		DIE("fi_allocinfo failed");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA | (opt.op == OP_TSEND ? FI_TAGGED : 0);
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	if (opt.prov)
		hints->fabric_attr->prov_name = strdup(opt.prov);
	if (opt.domain)
		hints->domain_attr->name = strdup(opt.domain);
	CHECK(fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);

	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	cq_attr.size = info->tx_attr->size + info->rx_attr->size;
	CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	CHECK(fi_av_open(domain, &av_attr, &av, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(ep));

	/* The transfer area, then CTRL_SIZE bytes for the end-of-size message. */
	if (posix_memalign((void **)&buf, 4096, buf_size + CTRL_SIZE))
		DIE("out of memory for a %zu-byte buffer", buf_size);
	memset(buf, 0, buf_size + CTRL_SIZE);
	CHECK(fi_mr_reg(domain, buf, buf_size + CTRL_SIZE, access | FI_SEND | FI_RECV, 0, 0x5eed, 0,
			&mr, NULL));
	if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CHECK(fi_mr_bind(mr, &ep->fid, 0));
		CHECK(fi_mr_enable(mr));
	}
	desc = fi_mr_desc(mr);
}

/* Swaps endpoint names, buffer addresses and keys with the peer. */
static void exchange_addresses(void)
{
	char name[256];
	size_t len = sizeof(name);
	uint64_t mine[2], theirs[2];
	uint32_t n;

	CHECK(fi_getname(&ep->fid, name, &len));
	n = len;
	oob_send(&n, sizeof(n));
	oob_send(name, len);
	oob_recv(&n, sizeof(n));
	if (n > sizeof(name))
		DIE("peer's address is %u bytes", n);
	oob_recv(name, n);
	if (fi_av_insert(av, name, 1, &peer, 0, NULL) != 1)
		DIE("fi_av_insert of the peer's address failed");

	mine[0] = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)buf : 0;
	mine[1] = fi_mr_key(mr);
	oob_send(mine, sizeof(mine));
	oob_recv(theirs, sizeof(theirs));
	peer_addr = theirs[0];
	peer_key = theirs[1];
}

/* ---- completions ---- */

static void cq_error(void)
{
	struct fi_cq_err_entry e = { 0 };

	if (fi_cq_readerr(cq, &e, 0) > 0)
		DIE("completion error: %s (%d) provider: %s", fi_strerror(e.err), e.err,
		    fi_cq_strerror(cq, e.prov_errno, e.err_data, NULL, 0));
	DIE("completion error that fi_cq_readerr did not return");
}

/*
 * Waits for n completions, up to 30 s without any. Returns the entries' flags or'ed; *data
 * (if given) gets the largest remote CQ data seen.
 */
static uint64_t wait_completions(int n, uint64_t *data)
{
	struct fi_cq_data_entry e[16];
	uint64_t flags = 0;
	double idle_since = now();

	while (n > 0 && nearly > 0) {
		struct fi_cq_data_entry *x = &early[--nearly];

		flags |= x->flags;
		if (data && (x->flags & FI_REMOTE_CQ_DATA) && x->data > *data)
			*data = x->data;
		n--;
	}
	while (n > 0) {
		ssize_t r = fi_cq_read(cq, e, n < 16 ? n : 16);

		if (r > 0) {
			for (ssize_t i = 0; i < r; i++) {
				flags |= e[i].flags;
				if (data && (e[i].flags & FI_REMOTE_CQ_DATA) && e[i].data > *data)
					*data = e[i].data;
			}
			n -= r;
			idle_since = now();
		} else if (r == -FI_EAVAIL) {
			cq_error();
		} else if (r != -FI_EAGAIN) {
			DIE("fi_cq_read: %s", fi_strerror(-r));
		} else if (now() - idle_since > 30) {
			DIE("no completion for 30 s (%d outstanding)", n);
		}
	}
	return flags;
}

/*
 * Drives the endpoint while waiting on the TCP channel. The peer may already be sending (its
 * side of a sync ended first), so completions read here are kept for wait_completions.
 */
static void progress_fabric(void)
{
	ssize_t r;

	if (!cq || nearly == (int)(sizeof(early) / sizeof(early[0])))
		return;
	r = fi_cq_read(cq, &early[nearly], 1);
	if (r == -FI_EAVAIL)
		cq_error();
	if (r > 0)
		nearly += r;
}

static void post_rma(size_t size, uint64_t seq)
{
	ssize_t r;
	double since = now();

	for (;;) {
		switch (opt.op) {
		case OP_WRITE:
			r = fi_write(ep, buf, size, desc, peer, peer_addr, peer_key, NULL);
			break;
		case OP_READ:
			r = fi_read(ep, buf, size, desc, peer, peer_addr, peer_key, NULL);
			break;
		case OP_TSEND:
			r = fi_tsend(ep, buf, size, desc, peer, TAG, NULL);
			break;
		default:
			r = fi_writedata(ep, buf, size, desc, seq, peer, peer_addr, peer_key, NULL);
			break;
		}
		if (r != -FI_EAGAIN)
			break;
		/* Queue full: reap to make room (completions counted by the caller). */
		fi_cq_read(cq, NULL, 0);
		if (now() - since > 30)
			DIE("RMA queue full for 30 s");
	}
	if (r)
		DIE("posting the RMA: %s (%zd)", fi_strerror(-r), r);
}

/* ---- data check ---- */

static uint8_t pattern(size_t size, size_t i)
{
	return (uint8_t)(i * 7 + size * 13 + (i >> 8));
}

static void fill(size_t size)
{
	for (size_t i = 0; i < size; i++)
		buf[i] = pattern(size, i);
}

static void verify(size_t size)
{
	for (size_t i = 0; i < size; i++)
		if (buf[i] != pattern(size, i))
			DIE("data check failed at %zu bytes: byte %zu is 0x%02x, expected 0x%02x", size,
			    i, buf[i], pattern(size, i));
}

/* ---- the test ---- */

static void size_str(char *s, size_t n, double v)
{
	if (v >= (1 << 30))
		snprintf(s, n, "%.0fg", v / (1 << 30));
	else if (v >= (1 << 20))
		snprintf(s, n, "%.0fm", v / (1 << 20));
	else if (v >= (1 << 10))
		snprintf(s, n, "%.0fk", v / (1 << 10));
	else
		snprintf(s, n, "%.0f", v);
}

static int iterations_for(size_t size)
{
	if (opt.iters)
		return opt.iters;
	/* Enough transfers for a stable number without making large sizes slow. */
	if (size >= (1 << 20))
		return 200;
	if (size >= (64 << 10))
		return 2000;
	return 10000;
}

static void run_size(size_t size, int first)
{
	int iters = iterations_for(size), total = iters + opt.warmup;
	int client = opt.host != NULL;
	int outstanding = 0;
	double start = 0, elapsed = 0;
	uint64_t data = 0;

	/* Who owns the data: the writer fills its buffer, the reader's peer fills its. */
	if (opt.check && (client != (opt.op == OP_READ)))
		fill(size);
	/*
	 * The server waits on its CQ, not on the TCP channel: RMA targets need their endpoint
	 * progressed (FI_PROGRESS_MANUAL), so, as in fabtests, the client ends each size with a
	 * message that the server receives.
	 */
	if (!client)
		CHECK(fi_recv(ep, buf + buf_size, CTRL_SIZE, desc, peer, NULL));
	oob_sync();
	if (client) {
		for (int i = 0; i < total; i++) {
			if (i == opt.warmup) {
				wait_completions(outstanding, NULL);
				outstanding = 0;
				start = now();
			}
			post_rma(size, (uint64_t)i);
			if (++outstanding == opt.window) {
				wait_completions(outstanding, NULL);
				outstanding = 0;
			}
		}
		wait_completions(outstanding, NULL);
		elapsed = now() - start;
		CHECK(fi_send(ep, buf + buf_size, 4, desc, peer, NULL));
		wait_completions(1, NULL);
	} else if (opt.op == OP_TSEND) {
		/* Keep up to a window of tagged receives posted until every message and the
		 * end-of-size message are in. */
		int posted = 0, got = 0, ctrl = 0;

		while (got < total || !ctrl) {
			while (posted < total && posted - got < opt.window) {
				CHECK(fi_trecv(ep, buf, size, desc, peer, TAG, 0, NULL));
				posted++;
			}
			if (wait_completions(1, NULL) & FI_TAGGED)
				got++;
			else
				ctrl = 1;
		}
	} else {
		/* Every writedata also leaves a remote completion carrying its data. */
		int expect = 1 + (opt.op == OP_WRITEDATA ? total : 0);
		uint64_t flags = wait_completions(expect, &data);

		if (opt.op == OP_WRITEDATA &&
		    (!(flags & FI_REMOTE_CQ_DATA) || data != (uint64_t)(total - 1)))
			DIE("writedata completions: flags 0x%" PRIx64 ", last data %" PRIu64, flags,
			    data);
	}
	if (opt.check && (client == (opt.op == OP_READ)))
		verify(size);
	if (!client)
		return;

	if (first)
		printf("%-8s%-8s%-8s%8s %10s%13s%13s\n", "bytes", "iters", "total", "time",
		       "MB/sec", "usec/xfer", "Mxfers/sec");
	char b[16], it[16], tot[16];

	size_str(b, sizeof(b), size);
	size_str(it, sizeof(it), iters);
	size_str(tot, sizeof(tot), (double)size * iters);
	printf("%-8s%-8s%-8s%7.2fs %10.2f%13.2f%13.2f\n", b, it, tot, elapsed,
	       size * (double)iters / elapsed / 1e6, elapsed * 1e6 / iters, iters / elapsed / 1e6);
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr, "usage: rma_bw [-p prov] [-d domain] [-e rdm] [-o write|read|writedata|tsend] "
			"[-S size|all] [-I iters] [-w warmup] [-W window] [-B port] [-P port] "
			"[-E] [-v] [server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const size_t defaults[] = { 64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10,
					   256 << 10, 1 << 20, 4 << 20 };
	size_t sizes[40], nsizes = 0, max = 0;
	int c;

	while ((c = getopt(argc, argv, "p:d:e:o:S:I:w:W:B:P:Evh")) != -1) {
		switch (c) {
		case 'p': opt.prov = optarg; break;
		case 'd': opt.domain = optarg; break;
		case 'e':
			if (strcmp(optarg, "rdm"))
				DIE("only -e rdm is supported");
			break;
		case 'o':
			if (!strcmp(optarg, "write"))
				opt.op = OP_WRITE;
			else if (!strcmp(optarg, "read"))
				opt.op = OP_READ;
			else if (!strcmp(optarg, "writedata"))
				opt.op = OP_WRITEDATA;
			else if (!strcmp(optarg, "tsend"))
				opt.op = OP_TSEND;
			else
				DIE("unknown operation '%s'", optarg);
			break;
		case 'S': opt.size = strcmp(optarg, "all") ? parse_size(optarg) : SIZE_MAX; break;
		case 'I': opt.iters = atoi(optarg); break;
		case 'w': opt.warmup = atoi(optarg); break;
		case 'W': opt.window = atoi(optarg); break;
		case 'B': case 'P': opt.port = atoi(optarg); break;
		case 'E': break;
		case 'v': opt.check = 1; break;
		default: usage();
		}
	}
	if (optind < argc)
		opt.host = argv[optind];
	if (opt.window < 1 || opt.warmup < 0 || opt.iters < 0)
		usage();

	if (opt.size == SIZE_MAX)
		for (size_t s = 1; s <= (8 << 20); s <<= 1)
			sizes[nsizes++] = s;
	else if (opt.size)
		sizes[nsizes++] = opt.size;
	else
		for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
			sizes[nsizes++] = defaults[i];
	for (size_t i = 0; i < nsizes; i++)
		if (sizes[i] > max)
			max = sizes[i];
	buf_size = max;

	oob_connect();
	open_fabric();
	if (opt.host)
		fprintf(stderr, "rma_bw: libfabric %u.%u, provider %s, domain %s, %s\n",
			FI_MAJOR(fi_version()), FI_MINOR(fi_version()), info->fabric_attr->prov_name,
			info->domain_attr->name,
			opt.op == OP_WRITE  ? "write"
			: opt.op == OP_READ ? "read"
			: opt.op == OP_TSEND ? "tsend"
					     : "writedata");
	exchange_addresses();
	for (size_t i = 0; i < nsizes; i++) {
		if (sizes[i] > info->ep_attr->max_msg_size)
			break;
		run_size(sizes[i], i == 0);
	}
	oob_sync();

	fi_close(&mr->fid);
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	free(buf);
	close(sock);
	return 0;
}
