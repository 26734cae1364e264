/*
 * What every fabtests-compat program shares: upstream fabtests' command-line conventions,
 * the out-of-band TCP channel (-E), opening an RDM endpoint with one registered buffer,
 * exchanging names, buffer addresses and keys, reading completions, data patterns and the
 * output columns (bytes, iters, total, time, MB/sec, usec/xfer, Mxfers/sec).
 *
 * Written for this project against the public libfabric API only, so that each program builds
 * against Debian's installed headers (binary compatibility) and against ours (source
 * compatibility). Header-only: every program is one C file, and `static inline` keeps the
 * helpers a program does not call from warning.
 *
 *   server:  <program> [options]
 *   client:  <program> [options] <server host>
 *
 * Common options:
 *   -p <provider>  -d <domain>  -e rdm
 *   -s <address>   source address: the node given to fi_getinfo with FI_SOURCE (the server
 *                  gives its -B port as the service), and the address the server's
 *                  out-of-band socket listens on
 *   -S <size>|all|r:<first>,<step>,<last>|l:<size>,<size>...
 *                  one transfer size (k/m/g suffixes allowed), fabtests' full list (every power
 *                  of two from 1 B to 8 MiB and the point half-way to the next, 1 B to 8 MiB),
 *                  a range or a list; without -S, the program's defaults (fabtests': 64 B,
 *                  256 B, 1 KiB, 4 KiB, 64 KiB, 1 MiB)
 *   -I <iterations>  -w <warmup iterations (10)>  -W <window (64)>
 *   -j <bytes>     largest size sent by inject (default: the endpoint's, as fabtests asks it)
 *   -B <port>  server's out-of-band TCP port (default 9228)
 *   -P <port>  port the client connects to (default 9228)
 *   -E         out-of-band address exchange over TCP (always on here; accepted for fabtests)
 *   -v         check the data
 * Addresses, buffer addresses and keys travel over the TCP connection, which also carries
 * the synchronisation between steps. The client prints; the server prints nothing but errors.
 */
#ifndef FABTESTS_COMPAT_COMMON_H
#define FABTESTS_COMPAT_COMMON_H

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
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

/* Bytes after the transfer area for control messages, then an unregistered guard area that
 * remote accesses past the region's end must leave untouched. */
#define FT_CTRL_SIZE 64
#define FT_GUARD_SIZE 4096
#define FT_GUARD_BYTE 0xa5

static const char *ft_prog = "fabtests-compat";
/* The threading model asked of fi_getinfo (a program may change it before ft_open). */
static enum fi_threading ft_threading = FI_THREAD_DOMAIN;

static struct {
	const char *prov, *domain, *host, *src;
	size_t size; /* 0: the program's default sizes, SIZE_MAX: the list in `sizes` */
	size_t sizes[64], nsizes;
	long inject; /* -j; -1: the endpoint's */
	int iters, warmup, window, port, check;
} ft_opt = { .warmup = 10, .window = 64, .port = 9228, .inject = -1 };
/* Operation flags asked of the transmit context (e.g. FI_DELIVERY_COMPLETE). */
static uint64_t ft_tx_op_flags;

static struct fi_info *ft_info;
static struct fid_fabric *ft_fabric;
static struct fid_domain *ft_domain;
static struct fid_ep *ft_ep;
static struct fid_cq *ft_cq;
static struct fid_av *ft_av;
static struct fid_mr *ft_mr;
static void *ft_desc;
static uint8_t *ft_buf;		/* transfer area, then FT_CTRL_SIZE bytes, then the guard */
static size_t ft_buf_size;	/* the transfer area */
static fi_addr_t ft_peer;
static uint64_t ft_peer_addr, ft_peer_key;
static int ft_sock = -1;
/* Completions read while waiting on the TCP channel (ft_progress). */
static struct fi_cq_tagged_entry ft_early[1024];
static int ft_nearly;

#define FT_DIE(...)                                               \
	do {                                                      \
		fprintf(stderr, "%s: ", ft_prog);                 \
		fprintf(stderr, __VA_ARGS__);                     \
		fputc('\n', stderr);                              \
		exit(1);                                          \
	} while (0)

#define FT_CHECK(call)                                                                \
	do {                                                                          \
		int ret_ = (int)(call);                                               \
		if (ret_)                                                             \
			FT_DIE("%s: %s (%d)", #call, fi_strerror(-ret_), ret_);       \
	} while (0)

static inline int ft_client(void)
{
	return ft_opt.host != NULL;
}

static inline double ft_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * A guard against a hang in a completion loop: upstream's loops read no clock (fabtests'
 * timeout is off unless -T is given), and ours read it on every poll, a tenth of a stream of
 * 8-byte messages on each side. The clock is read on every 1024th empty poll only.
 */
struct ft_idle {
	double since;
	unsigned polls;
};

/* Progress was made: the 30 s start again. */
static inline void ft_idle_reset(struct ft_idle *t)
{
	t->since = 0;
	t->polls = 0;
}

/* An empty poll: true once 30 s have passed without progress. */
static inline int ft_idle_expired(struct ft_idle *t)
{
	if (t->polls++ % 1024)
		return 0;
	if (t->since == 0) {
		t->since = ft_now();
		return 0;
	}
	return ft_now() - t->since > 30;
}

static inline size_t ft_parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	case '\0': break;
	default: FT_DIE("bad size '%s'", s);
	}
	return v;
}

/* -S: one size, "all" (fabtests' list: 1, then each power of two from 2 B to 8 MiB followed by
 * the point half-way to the next, up to 8 MiB), "r:first,step,last" or "l:a,b,c". */
static inline void ft_parse_sizes(const char *arg)
{
	ft_opt.size = SIZE_MAX;
	ft_opt.nsizes = 0;
	if (!strcmp(arg, "all")) {
		ft_opt.sizes[ft_opt.nsizes++] = 1;
		for (size_t s = 2; s <= (8 << 20); s <<= 1) {
			ft_opt.sizes[ft_opt.nsizes++] = s;
			if (s < (8 << 20))
				ft_opt.sizes[ft_opt.nsizes++] = s + s / 2;
		}
	} else if (!strncmp(arg, "r:", 2)) {
		size_t first, step, last;

		if (sscanf(arg + 2, "%zu,%zu,%zu", &first, &step, &last) != 3 || !step ||
		    last < first)
			FT_DIE("bad size range '%s'", arg);
		for (size_t s = first; s <= last; s += step) {
			if (ft_opt.nsizes == sizeof(ft_opt.sizes) / sizeof(ft_opt.sizes[0]))
				FT_DIE("size range '%s' has too many sizes", arg);
			ft_opt.sizes[ft_opt.nsizes++] = s;
		}
	} else if (!strncmp(arg, "l:", 2)) {
		char list[256], *save = NULL;

		snprintf(list, sizeof(list), "%s", arg + 2);
		for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			if (ft_opt.nsizes == sizeof(ft_opt.sizes) / sizeof(ft_opt.sizes[0]))
				FT_DIE("size list '%s' has too many sizes", arg);
			ft_opt.sizes[ft_opt.nsizes++] = ft_parse_size(t);
		}
	} else {
		ft_opt.size = ft_parse_size(arg);
	}
	if (ft_opt.size == 0 || (ft_opt.size == SIZE_MAX && ft_opt.nsizes == 0))
		FT_DIE("bad size '%s'", arg);
}

/*
 * Parses the common options and, for the letters in `extra` (getopt syntax), calls `own`.
 * Leaves the server host, if any, in ft_opt.host.
 */
static inline void ft_parse(int argc, char **argv, const char *extra,
			    void (*own)(int c, const char *arg), void (*usage)(void))
{
	char optstring[64];
	int c;

	snprintf(optstring, sizeof(optstring), "p:d:e:s:S:I:w:W:B:P:j:Evh%s", extra);
	while ((c = getopt(argc, argv, optstring)) != -1) {
		switch (c) {
		case 'p': ft_opt.prov = optarg; break;
		case 'd': ft_opt.domain = optarg; break;
		case 's': ft_opt.src = optarg; break;
		case 'e':
			if (strcmp(optarg, "rdm"))
				FT_DIE("only -e rdm is supported");
			break;
		case 'S':
			ft_parse_sizes(optarg);
			break;
		case 'j': ft_opt.inject = atol(optarg); break;
		case 'I': ft_opt.iters = atoi(optarg); break;
		case 'w': ft_opt.warmup = atoi(optarg); break;
		case 'W': ft_opt.window = atoi(optarg); break;
		case 'B': case 'P': ft_opt.port = atoi(optarg); break;
		case 'E': break;
		case 'v': ft_opt.check = 1; break;
		case '?': case 'h': usage(); break;
		default:
			if (own)
				own(c, optarg);
			else
				usage();
		}
	}
	if (optind < argc)
		ft_opt.host = argv[optind];
	if (ft_opt.window < 1 || ft_opt.warmup < 0 || ft_opt.iters < 0)
		usage();
}

/* The sizes a run covers: -S's one size or list, else the defaults. */
static inline size_t ft_sizes(size_t *sizes, size_t cap, const size_t *defaults, size_t ndefaults)
{
	size_t n = 0;

	if (ft_opt.size == SIZE_MAX)
		for (size_t i = 0; i < ft_opt.nsizes && n < cap; i++)
			sizes[n++] = ft_opt.sizes[i];
	else if (ft_opt.size)
		sizes[n++] = ft_opt.size;
	else
		for (size_t i = 0; i < ndefaults && n < cap; i++)
			sizes[n++] = defaults[i];
	return n;
}

/* Transfers per size: -I's, else `small` below 64 KiB, `mid` below 1 MiB, `big` from there
 * (fabtests: 20000/2000/200 for bandwidth tests, 10000/1000/100 for ping-pongs). */
static inline int ft_iterations(size_t size, int small, int mid, int big)
{
	if (ft_opt.iters)
		return ft_opt.iters;
	return size >= (1 << 20) ? big : size >= (64 << 10) ? mid : small;
}

/* ---- out-of-band TCP channel ---- */

static void ft_progress(void);

static inline void ft_oob_all(int send_dir, void *p, size_t n)
{
	uint8_t *b = p;

	while (n) {
		ssize_t r;

		if (!send_dir) {
			/*
			 * Keep the endpoint progressing while waiting on the peer: with manual
			 * progress it may still owe the peer acknowledgements or be the target of
			 * its RMA (as fabtests do, never block without driving the CQ).
			 */
			struct pollfd pfd = { .fd = ft_sock, .events = POLLIN };

			while (poll(&pfd, 1, 0) == 0)
				ft_progress();
		}
		r = send_dir ? send(ft_sock, b, n, MSG_NOSIGNAL) : recv(ft_sock, b, n, 0);

		if (r <= 0)
			FT_DIE("out-of-band connection: %s", r ? strerror(errno) : "closed by peer");
		b += r;
		n -= r;
	}
}

static inline void ft_oob_send(const void *p, size_t n)
{
	ft_oob_all(1, (void *)p, n);
}

static inline void ft_oob_recv(void *p, size_t n)
{
	ft_oob_all(0, p, n);
}

static inline void ft_sync(void)
{
	uint8_t b = 1;

	ft_oob_send(&b, 1);
	ft_oob_recv(&b, 1);
}

/* The server's listening socket (on -s's address, else every address; port -B). */
static inline int ft_oob_listen(void)
{
	char port[16];
	struct addrinfo passive = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
				    .ai_flags = AI_PASSIVE }, *res;
	int l, one = 1;

	snprintf(port, sizeof(port), "%d", ft_opt.port);
	if (getaddrinfo(ft_opt.src, port, &passive, &res))
		FT_DIE("cannot resolve %s", ft_opt.src ? ft_opt.src : "the wildcard address");
	l = socket(res->ai_family, res->ai_socktype, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, res->ai_addr, res->ai_addrlen) || listen(l, 16))
		FT_DIE("cannot listen on port %d: %s", ft_opt.port, strerror(errno));
	freeaddrinfo(res);
	return l;
}

static inline int ft_oob_accept(int l)
{
	int s = accept(l, NULL, NULL), one = 1;

	if (s < 0)
		FT_DIE("accept: %s", strerror(errno));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return s;
}

static inline void ft_oob_connect(void)
{
	char port[16];
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *a;
	int one = 1;

	snprintf(port, sizeof(port), "%d", ft_opt.port);
	if (ft_opt.host) {
		if (getaddrinfo(ft_opt.host, port, &hints, &res))
			FT_DIE("cannot resolve %s", ft_opt.host);
		/* The server may still be starting: retry for a few seconds. */
		for (int tries = 0; ft_sock < 0 && tries < 100; tries++) {
			for (a = res; a; a = a->ai_next) {
				int s = socket(a->ai_family, a->ai_socktype, 0);

				if (s >= 0 && connect(s, a->ai_addr, a->ai_addrlen) == 0) {
					ft_sock = s;
					break;
				}
				if (s >= 0)
					close(s);
			}
			if (ft_sock < 0)
				usleep(50000);
		}
		freeaddrinfo(res);
		if (ft_sock < 0)
			FT_DIE("cannot connect to %s:%d", ft_opt.host, ft_opt.port);
	} else {
		int l = ft_oob_listen();

		ft_sock = ft_oob_accept(l);
		close(l);
	}
	setsockopt(ft_sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- fabric setup ---- */

/*
 * Opens an RDM endpoint with `caps` (fi_getinfo hints) and registers a buffer of `size`
 * transfer bytes plus the control area, for local and remote access. The guard after it is
 * not registered.
 */
static inline void ft_open(uint64_t caps, size_t size)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

	if (!hints)
		FT_DIE("fi_allocinfo failed");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->domain_attr->threading = ft_threading;
	hints->tx_attr->op_flags = ft_tx_op_flags;
	if (ft_opt.prov)
		hints->fabric_attr->prov_name = strdup(ft_opt.prov);
	if (ft_opt.domain)
		hints->domain_attr->name = strdup(ft_opt.domain);
	/* As in fabtests, a server given a source address also names its service by its port:
	 * over efa that is the QPN (the software device's UDP port), so a restarted server comes
	 * back on the same address. */
	char service[16];

	snprintf(service, sizeof service, "%d", ft_opt.port);
	FT_CHECK(fi_getinfo(FI_VERSION(1, 9), ft_opt.src,
			    ft_opt.src && !ft_opt.host ? service : NULL, ft_opt.src ? FI_SOURCE : 0,
			    hints, &ft_info));
	fi_freeinfo(hints);

	FT_CHECK(fi_fabric(ft_info->fabric_attr, &ft_fabric, NULL));
	FT_CHECK(fi_domain(ft_fabric, ft_info, &ft_domain, NULL));
	cq_attr.size = ft_info->tx_attr->size + ft_info->rx_attr->size;
	FT_CHECK(fi_cq_open(ft_domain, &cq_attr, &ft_cq, NULL));
	FT_CHECK(fi_av_open(ft_domain, &av_attr, &ft_av, NULL));
	FT_CHECK(fi_endpoint(ft_domain, ft_info, &ft_ep, NULL));
	FT_CHECK(fi_ep_bind(ft_ep, &ft_av->fid, 0));
	FT_CHECK(fi_ep_bind(ft_ep, &ft_cq->fid, FI_TRANSMIT | FI_RECV));
	FT_CHECK(fi_enable(ft_ep));

	ft_buf_size = size;
	if (posix_memalign((void **)&ft_buf, 4096, size + FT_CTRL_SIZE + FT_GUARD_SIZE))
		FT_DIE("out of memory for a %zu-byte buffer", size);
	memset(ft_buf, 0, size + FT_CTRL_SIZE);
	memset(ft_buf + size + FT_CTRL_SIZE, FT_GUARD_BYTE, FT_GUARD_SIZE);
	FT_CHECK(fi_mr_reg(ft_domain, ft_buf, size + FT_CTRL_SIZE, access, 0, 0x5eed, 0, &ft_mr,
			   NULL));
	if (ft_info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		FT_CHECK(fi_mr_bind(ft_mr, &ft_ep->fid, 0));
		FT_CHECK(fi_mr_enable(ft_mr));
	}
	ft_desc = fi_mr_desc(ft_mr);
}

/* Prints, on the client, which library and provider run (the runners check the version). */
static inline void ft_banner(const char *what)
{
	if (ft_client())
		fprintf(stderr, "%s: libfabric %u.%u, provider %s, domain %s, %s\n", ft_prog,
			FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
			ft_info->fabric_attr->prov_name, ft_info->domain_attr->name, what);
}

/* Swaps endpoint names, buffer addresses and keys with the peer. */
static inline void ft_exchange(void)
{
	char name[256];
	size_t len = sizeof(name);
	uint64_t mine[2], theirs[2];
	uint32_t n;

	FT_CHECK(fi_getname(&ft_ep->fid, name, &len));
	n = len;
	ft_oob_send(&n, sizeof(n));
	ft_oob_send(name, len);
	ft_oob_recv(&n, sizeof(n));
	if (n > sizeof(name))
		FT_DIE("peer's address is %u bytes", n);
	ft_oob_recv(name, n);
	if (fi_av_insert(ft_av, name, 1, &ft_peer, 0, NULL) != 1)
		FT_DIE("fi_av_insert of the peer's address failed");

	mine[0] = (ft_info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)ft_buf : 0;
	mine[1] = fi_mr_key(ft_mr);
	ft_oob_send(mine, sizeof(mine));
	ft_oob_recv(theirs, sizeof(theirs));
	ft_peer_addr = theirs[0];
	ft_peer_key = theirs[1];
}

/* Closes everything this side opened (no synchronisation with the peer). */
static inline void ft_teardown(void)
{
	fi_close(&ft_mr->fid);
	fi_close(&ft_ep->fid);
	fi_close(&ft_av->fid);
	fi_close(&ft_cq->fid);
	fi_close(&ft_domain->fid);
	fi_close(&ft_fabric->fid);
	fi_freeinfo(ft_info);
	free(ft_buf);
}

/* Waits for the peer to be done too, then closes everything. */
static inline void ft_close(void)
{
	ft_sync();
	ft_teardown();
	close(ft_sock);
}

/*
 * A benchmark's whole run: connects, opens an endpoint with `caps` and a buffer of
 * `buf_size(largest size, number of sizes)` bytes, says `what` it measures, exchanges
 * addresses, calls `run_size` for every size the options ask for (the provider's max_msg_size
 * allowing), closes.
 */
static inline void ft_run_sizes(uint64_t caps, size_t (*buf_size)(size_t max),
				const size_t *defaults, size_t ndefaults, const char *what,
				void (*run_size)(size_t size, int first))
{
	size_t sizes[64], n = ft_sizes(sizes, 64, defaults, ndefaults), max = 0;

	for (size_t i = 0; i < n; i++)
		if (sizes[i] > max)
			max = sizes[i];
	ft_oob_connect();
	ft_open(caps, buf_size(max));
	ft_banner(what);
	ft_exchange();
	for (size_t i = 0; i < n && sizes[i] <= ft_info->ep_attr->max_msg_size; i++)
		run_size(sizes[i], i == 0);
	ft_close();
}

/*
 * The largest size a program sends by inject, as fabtests decides it: -j if given, else the
 * endpoint's answer to fi_getopt(FI_OPT_ENDPOINT, `opt`) (FI_OPT_INJECT_MSG_SIZE or
 * FI_OPT_INJECT_RMA_SIZE, libfabric 2.x), else the tx_attr's inject_size (libraries that do
 * not know the option, such as 1.x).
 */
#define FT_OPT_INJECT_MSG_SIZE 16 /* the 2.x API's values, absent from 1.x headers */
#define FT_OPT_INJECT_RMA_SIZE 18
#if FI_MAJOR_VERSION >= 2
_Static_assert(FT_OPT_INJECT_MSG_SIZE == FI_OPT_INJECT_MSG_SIZE &&
	       FT_OPT_INJECT_RMA_SIZE == FI_OPT_INJECT_RMA_SIZE, "the 2.x option numbers");
#endif
static inline size_t ft_inject_size(int opt)
{
	size_t v = ft_info->tx_attr->inject_size, len = sizeof(v);

	if (ft_opt.inject >= 0)
		return (size_t)ft_opt.inject;
	if (fi_getopt(&ft_ep->fid, FI_OPT_ENDPOINT, opt, &v, &len))
		v = ft_info->tx_attr->inject_size;
	return v;
}

/* ---- completions ---- */

static inline void ft_cq_error(void)
{
	struct fi_cq_err_entry e = { 0 };

	if (fi_cq_readerr(ft_cq, &e, 0) > 0)
		FT_DIE("completion error: %s (%d) provider: %s", fi_strerror(e.err), e.err,
		       fi_cq_strerror(ft_cq, e.prov_errno, e.err_data, NULL, 0));
	FT_DIE("completion error that fi_cq_readerr did not return");
}

/*
 * The next completion: 0 with *e filled, or, when `err` is given, 1 with *err filled for an
 * error completion (without `err` an error completion ends the program). Gives up after 30 s
 * without any.
 */
static inline int ft_next(struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err)
{
	struct ft_idle idle = { 0, 0 };

	if (ft_nearly > 0) {
		*e = ft_early[0];
		memmove(&ft_early[0], &ft_early[1], --ft_nearly * sizeof(ft_early[0]));
		return 0;
	}
	for (;;) {
		ssize_t r = fi_cq_read(ft_cq, e, 1);

		if (r == 1)
			return 0;
		if (r == -FI_EAVAIL) {
			if (!err)
				ft_cq_error();
			memset(err, 0, sizeof(*err));
			if (fi_cq_readerr(ft_cq, err, 0) != 1)
				FT_DIE("fi_cq_readerr returned no entry after -FI_EAVAIL");
			return 1;
		}
		if (r != -FI_EAGAIN)
			FT_DIE("fi_cq_read: %s", fi_strerror((int)-r));
		if (ft_idle_expired(&idle))
			FT_DIE("no completion for 30 s");
	}
}

/*
 * Waits for n completions, up to 30 s without any. Returns the entries' flags or'ed; *data
 * (if given) gets the largest remote CQ data seen.
 */
static inline uint64_t ft_wait(int n, uint64_t *data)
{
	struct fi_cq_tagged_entry e;
	uint64_t flags = 0;
	struct ft_idle idle = { 0, 0 };

	while (n > 0) {
		if (ft_nearly > 0) {
			e = ft_early[--ft_nearly];
		} else {
			/* One at a time, as upstream's completion loops read them. */
			ssize_t r = fi_cq_read(ft_cq, &e, 1);

			if (r == -FI_EAVAIL)
				ft_cq_error();
			else if (r == -FI_EAGAIN && ft_idle_expired(&idle))
				FT_DIE("no completion for 30 s (%d outstanding)", n);
			else if (r != 1 && r != -FI_EAGAIN)
				FT_DIE("fi_cq_read: %s", fi_strerror((int)-r));
			if (r != 1)
				continue;
			ft_idle_reset(&idle);
		}
		flags |= e.flags;
		if (data && (e.flags & FI_REMOTE_CQ_DATA) && e.data > *data)
			*data = e.data;
		n--;
	}
	return flags;
}

/*
 * Drives the endpoint while waiting on the TCP channel. The peer may already be sending (its
 * side of a sync ended first), so completions read here are kept for ft_wait/ft_next. An
 * error completion is left in the CQ (it may be the one the test expects next, as a
 * truncation is): ft_next returns it, ft_wait fails on it, in its place after those kept.
 */
static void ft_progress(void)
{
	ssize_t r;

	if (!ft_cq || ft_nearly == (int)(sizeof(ft_early) / sizeof(ft_early[0])))
		return;
	r = fi_cq_read(ft_cq, &ft_early[ft_nearly], 1);
	if (r > 0)
		ft_nearly += r;
}

/*
 * Retries a post that returns -FI_EAGAIN (queue full) while driving progress, for 30 s
 * (`ft_idle`: upstream's posts read no clock, and one read per post was a tenth of a stream
 * of 8-byte writes).
 */
#define FT_POST(call)                                                                   \
	do {                                                                            \
		struct ft_idle idle_ = { 0, 0 };                                        \
		ssize_t r_;                                                             \
		while ((r_ = (call)) == -FI_EAGAIN) {                                   \
			ft_progress();                                                  \
			if (ft_idle_expired(&idle_))                                    \
				FT_DIE("%s: queue full for 30 s", #call);               \
		}                                                                       \
		if (r_)                                                                 \
			FT_DIE("%s: %s (%zd)", #call, fi_strerror((int)-r_), r_);       \
	} while (0)

/*
 * Waits for the completion of the operation posted with context `ctx`; other completions
 * read meanwhile are kept for ft_wait/ft_next.
 */
static inline void ft_wait_ctx(void *ctx)
{
	struct ft_idle idle = { 0, 0 };

	for (int i = 0; i < ft_nearly; i++) {
		if (ft_early[i].op_context == ctx) {
			memmove(&ft_early[i], &ft_early[i + 1], (--ft_nearly - i) * sizeof(ft_early[0]));
			return;
		}
	}
	for (;;) {
		struct fi_cq_tagged_entry e;
		ssize_t r = fi_cq_read(ft_cq, &e, 1);

		if (r == 1) {
			if (e.op_context == ctx)
				return;
			if (ft_nearly == (int)(sizeof(ft_early) / sizeof(ft_early[0])))
				FT_DIE("too many completions while waiting for one");
			ft_early[ft_nearly++] = e;
		} else if (r == -FI_EAVAIL) {
			ft_cq_error();
		} else if (r != -FI_EAGAIN) {
			FT_DIE("fi_cq_read: %s", fi_strerror((int)-r));
		} else if (ft_idle_expired(&idle)) {
			FT_DIE("no completion for 30 s");
		}
	}
}

/*
 * fabtests' in-band sync (its default with -E): the client sends the server a message and
 * waits for the server's, which the server sends once it has the client's. Messages cross the
 * fabric behind what each side posted before, where ft_sync's socket does not wait for them.
 * (fabtests sends 0 bytes with FI_DELIVERY_COMPLETE; Debian 1.17's shm never delivers that
 * one here, so 4 bytes.) Uses the first half of the control bytes; waits for its own
 * operations by context, as the peer may already be sending what comes next.
 */
static inline void ft_sync_inband(void)
{
	static int rx_ctx, tx_ctx;
	uint8_t *c = ft_buf + ft_buf_size;

	FT_POST(fi_recv(ft_ep, c, FT_CTRL_SIZE / 4, ft_desc, ft_peer, &rx_ctx));
	if (!ft_client())
		ft_wait_ctx(&rx_ctx);
	FT_POST(fi_send(ft_ep, c + FT_CTRL_SIZE / 4, 4, ft_desc, ft_peer, &tx_ctx));
	if (ft_client())
		ft_wait_ctx(&rx_ctx);
	ft_wait_ctx(&tx_ctx);
}

/* ---- functional tests ---- */

/* One "ok:" line per step, printed by the client. */
static inline void ft_ok(const char *what)
{
	if (ft_client())
		printf("ok: %s\n", what);
}

/* The next completion must be a successful one for `ctx` with all of `flags`. */
static inline struct fi_cq_tagged_entry ft_expect(void *ctx, uint64_t flags, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;

	if (ft_next(&e, &err))
		FT_DIE("%s: error completion %d (%s)", what, err.err, fi_strerror(err.err));
	if (e.op_context != ctx || (e.flags & flags) != flags)
		FT_DIE("%s: completion for context %p flags 0x%" PRIx64
		       ", expected context %p flags 0x%" PRIx64, what, e.op_context, e.flags, ctx,
		       flags);
	return e;
}

/* The next completion must be an error one for `ctx`. */
static inline struct fi_cq_err_entry ft_expect_error(void *ctx, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;

	if (ft_next(&e, &err) != 1)
		FT_DIE("%s: completed successfully", what);
	if (err.op_context != ctx || !err.err)
		FT_DIE("%s: error entry for context %p, error %d", what, err.op_context, err.err);
	return err;
}

/* ---- data ---- */

static inline uint8_t ft_pattern(size_t seed, size_t i)
{
	return (uint8_t)(i * 7 + seed * 13 + (i >> 8));
}

static inline void ft_fill(uint8_t *p, size_t n, size_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = ft_pattern(seed, i);
}

static inline void ft_verify(const uint8_t *p, size_t n, size_t seed, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ft_pattern(seed, i))
			FT_DIE("%s: data check failed at byte %zu of %zu: 0x%02x, expected 0x%02x",
			       what, i, n, p[i], ft_pattern(seed, i));
}

/* ---- output, as fabtests' performance tests ---- */

/* Bytes as fabtests writes them: binary units, one decimal below 10 of a unit ("1.5k"). */
static inline void ft_size_str(char *s, size_t n, unsigned long long v)
{
	static const char mag[] = { 'g', 'm', 'k' };
	unsigned long long base = 1ULL << 30;

	for (int i = 0; i < 3; i++, base >>= 10) {
		if (v < base)
			continue;
		unsigned long long whole = v / base, tenth = whole < 10 ? (v % base) * 10 / base : 0;

		if (tenth)
			snprintf(s, n, "%llu.%llu%c", whole, tenth, mag[i]);
		else
			snprintf(s, n, "%llu%c", whole, mag[i]);
		return;
	}
	snprintf(s, n, "%llu", v);
}

/* Counts as fabtests writes them: decimal units, truncated ("20k"). */
static inline void ft_count_str(char *s, size_t n, unsigned long long v)
{
	if (v >= 1000000000)
		snprintf(s, n, "%llub", v / 1000000000);
	else if (v >= 1000000)
		snprintf(s, n, "%llum", v / 1000000);
	else if (v >= 1000)
		snprintf(s, n, "%lluk", v / 1000);
	else
		snprintf(s, n, "%llu", v);
}

/*
 * One row in fabtests' columns; `xfers` transfers of `size` bytes per iteration (2 for a
 * ping-pong, whose usec/xfer is then half a round trip). MB is 10^6 bytes; the data columns
 * are narrower than their headings, as in fabtests. usec/xfer has three decimals where
 * fabtests prints two: a shared-memory ping-pong takes about 0.17 µs, which two decimals
 * round by up to 3 % (and a ratio of two such figures by up to 6 %).
 */
static inline void ft_show(size_t size, int iters, double elapsed, int xfers, int first)
{
	char b[32], it[32], tot[32];
	double n = (double)iters * xfers, usec = elapsed * 1e6 / n;

	if (first)
		printf("%-8s%-8s%-8s%8s %10s%13s%13s\n", "bytes", "iters", "total", "time",
		       "MB/sec", "usec/xfer", "Mxfers/sec");
	ft_size_str(b, sizeof(b), size);
	ft_count_str(it, sizeof(it), iters);
	ft_size_str(tot, sizeof(tot), (unsigned long long)size * iters * xfers);
	printf("%-8s%-8s%-8s%8.2fs%10.2f%11.3f%11.2f\n", b, it, tot, elapsed,
	       size * n / elapsed / 1e6, usec, 1 / usec);
	fflush(stdout);
}

#endif
