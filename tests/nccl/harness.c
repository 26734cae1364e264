/*
 * Two processes moving host buffers through a built aws-ofi-nccl plugin's ncclNet v6 table,
 * as NCCL's proxy threads do: for every ordered pair of the plugin's devices (receiver on
 * device i, sender on device j) and every size, the driver forks a server (init, devices,
 * getProperties, listen, accept, regMr, irecv, test) and a client (the same with connect and
 * isend), passes the listen handle from one to the other through a pipe, and the server
 * checks every received byte and the guard bytes past the buffer. Used by tests/nccl/run.sh:
 *
 *   harness [-t seconds] [-s size,size,...] [-v] <path to libnccl-net.so or libnccom-net.so>
 *
 * Sizes (unless -s): 0, 1, each device's efa inject size ± 1 and MTU ± 1 (what fi_getinfo
 * gives for the RDM domain the plugin names the device after, by domain or NIC device name:
 * tx_attr->inject_size, nic->link_attr->mtu), 1 MiB and 8 MiB. Each cell gets two fresh processes, so a failed
 * transfer cannot poison the next one. Every wait is bounded by -t (default 20 s): a child
 * that runs out prints a FAIL line saying what it waited for; the driver kills a child whose
 * peer failed after a grace of 2 s, and both at -t + 5 s. A PASS or FAIL line per cell (with
 * the children's lines other than the plugin's INFO lines when it fails; all of them with
 * -v), then a table of sizes by pair. Exit status 0 when every cell passed.
 *
 * The structures below are NCCL's net v6 ABI (ncclNet_v6_t and ncclNetProperties_v6_t, with
 * NCCL_PTR_HOST and NCCL_NET_HANDLE_MAXSIZE), declared here so that nothing of the plugin is
 * needed to build.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#define PTR_HOST 0x1
#define HANDLE_MAXSIZE 128
#define GUARD 64
#define MAX_DEVS 16
#define MAX_SIZES 64

typedef void (*logger_t)(int level, unsigned long flags, const char *file, int line,
			 const char *fmt, ...);

struct props_v6 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	size_t max_write_inline_size;
	size_t max_mr_key_size;
	int rma_supported;
};

struct net_v6 {
	const char *name;
	int (*init)(logger_t log);
	int (*fini)(void);
	int (*devices)(int *ndev);
	int (*get_properties)(int dev, struct props_v6 *props);
	int (*listen)(int dev, void *handle, void **listen_comm);
	int (*connect)(int dev, void *handle, void **send_comm);
	int (*accept)(void *listen_comm, void **recv_comm);
	int (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
	int (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
			     int fd, void **mhandle);
	int (*dereg_mr)(void *comm, void *mhandle);
	int (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle,
		     void **request);
	int (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles,
		     void **request);
	int (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
		      void **request);
	int (*test)(void *request, int *done, int *sizes);
	int (*close_send)(void *send_comm);
	int (*close_recv)(void *recv_comm);
	int (*close_listen)(void *listen_comm);
	int (*get_mr_key)(void *mhandle, uint64_t *mr_key);
	int (*iwrite)(void *send_comm, void *src, size_t size, void *src_mhandle, uint64_t dest,
		      uint64_t mr_key, void **request);
	int (*iwrite_inline)(void *send_comm, void *src, size_t size, uint64_t dest,
			     uint64_t mr_key, void **request);
	int (*iread)(void *recv_comm, void *dest, size_t size, void *dest_mhandle, uint64_t src,
		     uint64_t mr_key, void **request);
};

static struct net_v6 *net;
static double timeout_s = 20;
static int verbose;

/* ---- time, logging ---------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *level_name(int level)
{
	static const char *names[] = { "NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE" };

	return level >= 0 && level < 6 ? names[level] : "?";
}

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt,
		   ...)
{
	va_list ap;

	(void)flags;
	printf("plugin %s %s:%d: ", level_name(level), file ? file : "?", line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static const char *role = "harness";

static void say(const char *fmt, ...)
{
	va_list ap;

	printf("harness %s: ", role);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* A child's last word: its FAIL line, exit status 1. */
static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("harness %s: FAIL: ", role);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	_exit(1);
}

/* ---- the data ---------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Byte k of the message of `size` bytes: a position-dependent stream, so that a misplaced
 * chunk of any size is seen. */
static uint8_t expected(size_t size, size_t k)
{
	return (uint8_t)(splitmix(((uint64_t)size << 40) ^ (k / 8)) >> (8 * (k % 8)));
}

static uint8_t *alloc_buf(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("mmap %zu bytes: %s", len, strerror(errno));
	return p;
}

/* ---- the plugin --------------------------------------------------------------------------- */

static void load(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		fail("dlopen: %s", dlerror());
	net = dlsym(h, "ncclNetPlugin_v6");
	if (!net)
		fail("no ncclNetPlugin_v6 in %s", path);
}

/* init, devices, getProperties(dev): what NCCL does before it listens or connects. */
static void start(int dev, int ndev_expected, const char *name_expected)
{
	struct props_v6 p = { 0 };
	int ndev = 0, ret;

	ret = net->init(logger);
	if (ret)
		fail("init returned %d", ret);
	ret = net->devices(&ndev);
	if (ret || ndev != ndev_expected)
		fail("devices returned %d with %d device(s), %d expected", ret, ndev,
		     ndev_expected);
	ret = net->get_properties(dev, &p);
	if (ret)
		fail("getProperties(%d) returned %d", dev, ret);
	if (!p.name || strcmp(p.name, name_expected))
		fail("device %d is %s, %s expected", dev, p.name ? p.name : "(null)",
		     name_expected);
	if (!(p.ptr_support & PTR_HOST))
		fail("device %d (%s): ptrSupport %#x lacks NCCL_PTR_HOST", dev, p.name,
		     (unsigned)p.ptr_support);
}

static int wait_readable(int fd, double deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	for (;;) {
		int left = (int)((deadline - now_s()) * 1000);

		if (left <= 0)
			return 0;
		int r = poll(&pfd, 1, left);

		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return 0;
	}
}

/* Drives test() on a request until done, an error or the deadline; returns the size. */
static int complete(void *req, const char *what, double t0, double deadline)
{
	int done = 0, size = -1, ret;
	unsigned long polls = 0;

	for (;;) {
		ret = net->test(req, &done, &size);
		polls++;
		if (ret)
			fail("%s: test returned %d after %.0f ms (%lu calls)", what, ret,
			     (now_s() - t0) * 1000, polls);
		if (done)
			return size;
		if (now_s() > deadline)
			fail("%s: not complete after %.1f s (%lu test calls): timeout", what,
			     now_s() - t0, polls);
		if ((polls & 63) == 0)
			sched_yield();
	}
}

struct cell {
	int recv_dev, send_dev, ndev;
	const char *recv_name, *send_name;
	size_t size;
};

static void server(const char *plugin, const struct cell *c, int handle_fd, int result_fd)
{
	char handle[HANDLE_MAXSIZE] = { 0 };
	void *lcomm = NULL, *rcomm = NULL, *mh = NULL, *req = NULL;
	double t0 = now_s(), deadline = t0 + timeout_s;
	size_t len = c->size + GUARD, bad = 0, first_bad = 0;
	int ret, got, size = (int)c->size, tag = 1;
	uint8_t *buf;

	role = "server";
	load(plugin);
	start(c->recv_dev, c->ndev, c->recv_name);
	ret = net->listen(c->recv_dev, handle, &lcomm);
	if (ret || !lcomm)
		fail("listen(%d) returned %d", c->recv_dev, ret);
	if (write(handle_fd, handle, sizeof(handle)) != (ssize_t)sizeof(handle))
		fail("handing the listen handle over: %s", strerror(errno));
	close(handle_fd);
	say("listening on device %d (%s), accepting", c->recv_dev, c->recv_name);
	while (!rcomm) {
		ret = net->accept(lcomm, &rcomm);
		if (ret)
			fail("accept returned %d", ret);
		if (!rcomm && now_s() > deadline)
			fail("accept: no connection after %.1f s: timeout", now_s() - t0);
	}
	buf = alloc_buf(len);
	/* What the message does not overwrite must not look like it. */
	for (size_t k = 0; k < c->size; k++)
		buf[k] = expected(c->size, k) ^ 0xff;
	memset(buf + c->size, 0xa5, GUARD);
	ret = net->reg_mr(rcomm, buf, len, PTR_HOST, &mh);
	if (ret || !mh)
		fail("regMr(%zu bytes, NCCL_PTR_HOST) returned %d", len, ret);
	while (!req) {
		void *data = buf;

		ret = net->irecv(rcomm, 1, &data, &size, &tag, &mh, &req);
		if (ret)
			fail("irecv(%zu) returned %d", c->size, ret);
		if (!req && now_s() > deadline)
			fail("irecv(%zu): no request after %.1f s: timeout", c->size,
			     now_s() - t0);
	}
	say("accepted; irecv of %zu bytes posted, testing", c->size);
	got = complete(req, "irecv", t0, deadline);
	if (got != (int)c->size)
		fail("received %d bytes, %zu sent", got, c->size);
	for (size_t k = 0; k < c->size; k++)
		if (buf[k] != expected(c->size, k) && !bad++)
			first_bad = k;
	if (bad)
		fail("%zu of %zu bytes wrong, the first at offset %zu (%#x, %#x expected)", bad,
		     c->size, first_bad, buf[first_bad], expected(c->size, first_bad));
	for (size_t k = c->size; k < len; k++)
		if (buf[k] != 0xa5)
			fail("byte %zu past the message was overwritten", k - c->size);
	/* The client closes only after this, so that nothing is torn down under the receive. */
	if (write(result_fd, "k", 1) != 1)
		fail("telling the client: %s", strerror(errno));
	if ((ret = net->dereg_mr(rcomm, mh)) || (ret = net->close_recv(rcomm)) ||
	    (ret = net->close_listen(lcomm)))
		fail("deregMr/closeRecv/closeListen returned %d", ret);
	ret = net->fini ? net->fini() : 0;
	if (ret)
		fail("fini returned %d", ret);
	say("received and checked %zu bytes in %.0f ms", c->size, (now_s() - t0) * 1000);
	_exit(0);
}

static void client(const char *plugin, const struct cell *c, int handle_fd, int result_fd)
{
	char handle[HANDLE_MAXSIZE];
	void *scomm = NULL, *mh = NULL, *req = NULL;
	double t0 = now_s(), deadline = t0 + timeout_s;
	size_t len = c->size ? c->size : 1;
	int ret, got;
	ssize_t n;
	char k;
	uint8_t *buf;

	role = "client";
	load(plugin);
	start(c->send_dev, c->ndev, c->send_name);
	if (!wait_readable(handle_fd, deadline))
		fail("no listen handle from the server after %.1f s: timeout", now_s() - t0);
	n = read(handle_fd, handle, sizeof(handle));
	if (n != (ssize_t)sizeof(handle))
		fail("listen handle: read %zd bytes (server gone?)", n);
	say("connecting from device %d (%s)", c->send_dev, c->send_name);
	while (!scomm) {
		ret = net->connect(c->send_dev, handle, &scomm);
		if (ret)
			fail("connect returned %d", ret);
		if (!scomm && now_s() > deadline)
			fail("connect: not connected after %.1f s: timeout", now_s() - t0);
	}
	buf = alloc_buf(len);
	for (size_t i = 0; i < c->size; i++)
		buf[i] = expected(c->size, i);
	ret = net->reg_mr(scomm, buf, len, PTR_HOST, &mh);
	if (ret || !mh)
		fail("regMr(%zu bytes, NCCL_PTR_HOST) returned %d", len, ret);
	while (!req) {
		ret = net->isend(scomm, buf, (int)c->size, 1, mh, &req);
		if (ret)
			fail("isend(%zu) returned %d", c->size, ret);
		if (!req && now_s() > deadline)
			fail("isend(%zu): no request after %.1f s: timeout", c->size, now_s() - t0);
	}
	say("connected; isend of %zu bytes posted, testing", c->size);
	got = complete(req, "isend", t0, deadline);
	if (got != (int)c->size)
		fail("send completed with %d bytes, %zu sent", got, c->size);
	if (!wait_readable(result_fd, deadline) || read(result_fd, &k, 1) != 1)
		fail("sent %zu bytes, but no word from the server after %.1f s", c->size,
		     now_s() - t0);
	if ((ret = net->dereg_mr(scomm, mh)) || (ret = net->close_send(scomm)))
		fail("deregMr/closeSend returned %d", ret);
	ret = net->fini ? net->fini() : 0;
	if (ret)
		fail("fini returned %d", ret);
	say("sent %zu bytes in %.0f ms", c->size, (now_s() - t0) * 1000);
	_exit(0);
}

/* ---- discovery: device names from the plugin, inject size and MTU from efa --------------- */

struct dev {
	char name[64];
	size_t inject, mtu;
};

static void discover_child(const char *plugin, int fd)
{
	struct dev devs[MAX_DEVS];
	struct fi_info *hints, *info = NULL;
	int ndev = 0, ret;

	role = "discovery";
	load(plugin);
	if ((ret = net->init(logger)))
		fail("init returned %d", ret);
	if ((ret = net->devices(&ndev)) || ndev <= 0 || ndev > MAX_DEVS)
		fail("devices returned %d with %d device(s)", ret, ndev);
	memset(devs, 0, sizeof(devs));
	hints = fi_allocinfo();
	if (!hints)
		fail("fi_allocinfo");
	hints->fabric_attr->prov_name = strdup("efa");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | FI_MSG;
	ret = fi_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, hints, &info);
	if (ret)
		fail("fi_getinfo(efa, FI_EP_RDM) returned %d", ret);
	for (int d = 0; d < ndev; d++) {
		struct props_v6 p = { 0 };

		if ((ret = net->get_properties(d, &p)) || !p.name)
			fail("getProperties(%d) returned %d", d, ret);
		snprintf(devs[d].name, sizeof(devs[d].name), "%s", p.name);
		/* The plugin names a device after the NIC's device name when there is one (as
		 * upstream efa's verbs name), else after the domain. */
		for (struct fi_info *i = info; i; i = i->next)
			if (!strcmp(i->domain_attr->name, p.name) ||
			    (i->nic && i->nic->device_attr && i->nic->device_attr->name &&
			     !strcmp(i->nic->device_attr->name, p.name))) {
				devs[d].inject = i->tx_attr->inject_size;
				if (i->nic && i->nic->link_attr)
					devs[d].mtu = i->nic->link_attr->mtu;
			}
		if (!devs[d].mtu)
			fail("device %d (%s): no efa domain of that name with an MTU", d, p.name);
		say("device %d: %s, inject size %zu, MTU %zu", d, p.name, devs[d].inject,
		    devs[d].mtu);
	}
	fi_freeinfo(info);
	fi_freeinfo(hints);
	if (net->fini && (ret = net->fini()))
		fail("fini returned %d", ret);
	if (write(fd, &ndev, sizeof(ndev)) != sizeof(ndev) ||
	    write(fd, devs, sizeof(devs)) != sizeof(devs))
		fail("write: %s", strerror(errno));
	_exit(0);
}

/* ---- the driver ------------------------------------------------------------------------- */

struct child {
	pid_t pid;
	int out; /* its stdout and stderr, or -1 at end of file */
	int status, exited, killed;
	char *text;
	size_t len, cap;
};

static pid_t spawn(struct child *ch, int *close_in_child, int nclose)
{
	int p[2];

	if (pipe(p))
		return -1;
	fflush(stdout);
	ch->pid = fork();
	if (ch->pid == 0) {
		for (int i = 0; i < nclose; i++)
			close(close_in_child[i]);
		close(p[0]);
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[1]);
		setvbuf(stdout, NULL, _IOLBF, 0);
		return 0;
	}
	close(p[1]);
	ch->out = p[0];
	fcntl(ch->out, F_SETFL, O_NONBLOCK);
	return ch->pid;
}

static void drain(struct child *ch)
{
	char tmp[4096];
	ssize_t n;

	while (ch->out >= 0 && (n = read(ch->out, tmp, sizeof(tmp))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				close(ch->out), ch->out = -1;
			return;
		}
		if (ch->len + n + 1 > ch->cap) {
			ch->cap = (ch->len + n + 1) * 2;
			ch->text = realloc(ch->text, ch->cap);
			if (!ch->text)
				abort();
		}
		memcpy(ch->text + ch->len, tmp, n);
		ch->len += n;
		ch->text[ch->len] = 0;
	}
	if (ch->out >= 0 && n == 0)
		close(ch->out), ch->out = -1;
}

/* The child's lines, all with -v or when it failed, but the plugin's INFO lines only with
 * -v. */
static void show(const struct child *ch, const char *who, int all)
{
	const char *s = ch->text ? ch->text : "";

	while (*s) {
		const char *e = strchr(s, '\n');
		int n = e ? (int)(e - s) : (int)strlen(s);

		if (all || strncmp(s, "plugin INFO ", 12))
			printf("    %s| %.*s\n", who, n, s);
		s += n + (e ? 1 : 0);
	}
}

static const char *reason(const struct child *ch)
{
	const char *s = ch->text ? strstr(ch->text, ": FAIL: ") : NULL;
	static char buf[2][512];
	static int which;
	char *b = buf[which ^= 1];

	if (s) {
		snprintf(b, sizeof(buf[0]), "%s", s + 8);
		b[strcspn(b, "\n")] = 0;
	} else if (ch->killed) {
		snprintf(b, sizeof(buf[0]), "killed %s", ch->killed == 1 ?
			 "2 s after its peer failed" : "at the driver's deadline");
	} else if (WIFSIGNALED(ch->status)) {
		snprintf(b, sizeof(buf[0]), "killed by signal %d", WTERMSIG(ch->status));
	} else {
		snprintf(b, sizeof(buf[0]), "exit status %d", WEXITSTATUS(ch->status));
	}
	return b;
}

/* One cell: 1 when both children passed. */
static int run_cell(const char *plugin, const struct cell *c)
{
	struct child ch[2] = { { .out = -1 }, { .out = -1 } };
	int hp[2], rp[2], ok;
	double t0 = now_s(), kill_at = t0 + timeout_s + 5;
	int killed = 0, peer_failed = 0;

	if (pipe(hp) || pipe(rp)) {
		perror("pipe");
		return 0;
	}
	{
		int cl[] = { hp[0], rp[0] };

		if (spawn(&ch[0], cl, 2) == 0)
			server(plugin, c, hp[1], rp[1]);
	}
	{
		int cl[] = { hp[1], rp[1], ch[0].out };

		if (spawn(&ch[1], cl, 3) == 0)
			client(plugin, c, hp[0], rp[0]);
	}
	close(hp[0]), close(hp[1]), close(rp[0]), close(rp[1]);
	while (!ch[0].exited || !ch[1].exited) {
		struct pollfd pfd[2];
		int n = 0;

		for (int i = 0; i < 2; i++)
			if (ch[i].out >= 0)
				pfd[n].fd = ch[i].out, pfd[n].events = POLLIN, n++;
		poll(pfd, n, 50);
		for (int i = 0; i < 2; i++) {
			drain(&ch[i]);
			if (!ch[i].exited && waitpid(ch[i].pid, &ch[i].status, WNOHANG) == ch[i].pid) {
				ch[i].exited = 1;
				drain(&ch[i]);
				/* A peer that failed leaves the other waiting: 2 s to finish. */
				if (!WIFEXITED(ch[i].status) || WEXITSTATUS(ch[i].status))
					if (kill_at > now_s() + 2)
						kill_at = now_s() + 2, peer_failed = 1;
			}
		}
		if (now_s() > kill_at && !killed) {
			for (int i = 0; i < 2; i++)
				if (!ch[i].exited) {
					kill(ch[i].pid, SIGKILL);
					ch[i].killed = peer_failed ? 1 : 2;
				}
			killed = 1;
		}
	}
	for (int i = 0; i < 2; i++)
		drain(&ch[i]);
	ok = WIFEXITED(ch[0].status) && !WEXITSTATUS(ch[0].status) && WIFEXITED(ch[1].status) &&
	     !WEXITSTATUS(ch[1].status);
	if (ok) {
		printf("PASS %s -> %s, %zu B (%.0f ms)\n", c->send_name, c->recv_name, c->size,
		       (now_s() - t0) * 1000);
	} else {
		printf("FAIL %s -> %s, %zu B (%.0f ms): client: %s; server: %s\n", c->send_name,
		       c->recv_name, c->size, (now_s() - t0) * 1000, reason(&ch[1]),
		       reason(&ch[0]));
	}
	if (!ok || verbose) {
		show(&ch[1], "client", verbose);
		show(&ch[0], "server", verbose);
	}
	fflush(stdout);
	free(ch[0].text);
	free(ch[1].text);
	return ok;
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

static int add_size(size_t *sizes, int n, size_t s)
{
	for (int i = 0; i < n; i++)
		if (sizes[i] == s)
			return n;
	if (n < MAX_SIZES && s <= 0x7fffffff)
		sizes[n++] = s;
	return n;
}

/* "srd_eth0-rdm" as "eth0", for the table's headings. */
static void short_name(char *out, size_t len, const char *name)
{
	const char *s = strncmp(name, "srd_", 4) ? name : name + 4;
	size_t n = strcspn(s, "-");

	snprintf(out, len, "%.*s", (int)n, s);
}

int main(int argc, char **argv)
{
	size_t sizes[MAX_SIZES];
	struct dev devs[MAX_DEVS];
	const char *plugin, *size_list = NULL;
	int nsizes = 0, ndev = 0, opt, p[2], failed = 0, cells = 0;
	struct child disc = { .out = -1 };
	static char result[MAX_DEVS][MAX_DEVS][MAX_SIZES];

	while ((opt = getopt(argc, argv, "t:s:v")) != -1) {
		switch (opt) {
		case 't':
			timeout_s = atof(optarg);
			break;
		case 's':
			size_list = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc - 1 || timeout_s <= 0) {
usage:
		fprintf(stderr, "usage: %s [-t seconds] [-s size,size,...] [-v] <plugin.so>\n",
			argv[0]);
		return 2;
	}
	plugin = argv[optind];
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* Discovery in a child of its own: the driver forks every cell from a process that
	 * never loaded the plugin or libfabric. */
	if (pipe(p))
		return perror("pipe"), 1;
	if (spawn(&disc, p, 1) == 0)
		discover_child(plugin, p[1]);
	close(p[1]);
	{
		double deadline = now_s() + timeout_s;
		int st = 0;

		while (waitpid(disc.pid, &st, WNOHANG) == 0) {
			drain(&disc);
			if (now_s() > deadline) {
				kill(disc.pid, SIGKILL);
				waitpid(disc.pid, &st, 0);
				break;
			}
			usleep(20000);
		}
		drain(&disc);
		disc.status = st;
		show(&disc, "discovery", verbose);
		if (!WIFEXITED(st) || WEXITSTATUS(st) || read(p[0], &ndev, sizeof(ndev)) !=
		    sizeof(ndev) || read(p[0], devs, sizeof(devs)) != sizeof(devs)) {
			printf("FAIL: discovery: %s\n", reason(&disc));
			return 1;
		}
		close(p[0]);
	}

	if (size_list) {
		for (char *s = strdup(size_list), *tok; (tok = strsep(&s, ","));)
			if (*tok)
				nsizes = add_size(sizes, nsizes, strtoull(tok, NULL, 0));
	} else {
		nsizes = add_size(sizes, nsizes, 0);
		nsizes = add_size(sizes, nsizes, 1);
		for (int d = 0; d < ndev; d++)
			for (int k = -1; k <= 1; k++) {
				if (devs[d].inject)
					nsizes = add_size(sizes, nsizes, devs[d].inject + k);
				nsizes = add_size(sizes, nsizes, devs[d].mtu + k);
			}
		nsizes = add_size(sizes, nsizes, 1 << 20);
		nsizes = add_size(sizes, nsizes, 8 << 20);
	}
	qsort(sizes, nsizes, sizeof(sizes[0]), cmp_size);
	printf("harness: %s: %d device(s), %d size(s), %d cells, timeout %.0f s\n", plugin, ndev,
	       nsizes, ndev * ndev * nsizes, timeout_s);

	for (int s = 0; s < ndev; s++)
		for (int r = 0; r < ndev; r++)
			for (int z = 0; z < nsizes; z++) {
				struct cell c = { .recv_dev = r, .send_dev = s, .ndev = ndev,
						  .recv_name = devs[r].name,
						  .send_name = devs[s].name, .size = sizes[z] };

				result[r][s][z] = run_cell(plugin, &c) ? 'P' : 'F';
				failed += result[r][s][z] == 'F';
				cells++;
			}

	/* The table: a row per size, a column per pair (sender -> receiver). */
	printf("\nsender -> receiver by size (%s)\n", failed ? "FAIL" : "PASS");
	printf("%10s", "size");
	for (int s = 0; s < ndev; s++)
		for (int r = 0; r < ndev; r++) {
			char a[32], b[32], h[80];

			short_name(a, sizeof(a), devs[s].name);
			short_name(b, sizeof(b), devs[r].name);
			snprintf(h, sizeof(h), "%s->%s", a, b);
			printf(" %12s", h);
		}
	putchar('\n');
	for (int z = 0; z < nsizes; z++) {
		printf("%10zu", sizes[z]);
		for (int s = 0; s < ndev; s++)
			for (int r = 0; r < ndev; r++)
				printf(" %12s", result[r][s][z] == 'P' ? "PASS" : "FAIL");
		putchar('\n');
	}
	printf("harness: %d of %d cells passed\n", cells - failed, cells);
	return failed ? 1 : 0;
}
