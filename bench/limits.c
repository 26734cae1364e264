/*
 * What this machine allows, measured in the same run as the library benchmarks (make bench):
 *   memcpy      single-thread copy bandwidth
 *   cma         cross-process single copy (process_vm_writev) bandwidth
 *   udp         raw UDP loopback goodput at a given datagram size (sendmmsg/recvmmsg, and
 *               UDP GSO when the kernel has it), between two processes, from and into 32
 *               datagrams' worth of memory that stays in the caches
 *   udp-sweep   the same, moving fi_rma_bw's one-way 1 MiB traffic: each 1 MiB slot of a
 *               64-slot source (64 MiB, as fi_rma_bw's window sweeps) cut into datagrams of
 *               at most <datagram bytes>, received into the same slots of a 64-slot
 *               destination: the ceiling of a one-way 1 MiB write over UDP that copies each
 *               byte in the sender's kernel and in the receiver's, from and into cold memory
 *   udp-both    fi_rma_bw's 1 MiB write traffic both ways over raw UDP: two processes, each
 *               sending its 64-slot sweep to the other in datagrams of at most <datagram bytes>
 *               while receiving the other's into its own 64-slot destination, with a window
 *               of 32 datagrams each way (one sent per one received), receiving by polling
 *               as a library's progress does; GB/s per side (the slower one). The ceiling of a both-ways write over UDP, each CPU copying its
 *               own sends into the kernel and its peer's datagrams out of it
 *   udp-veth    raw UDP between two network namespaces (over a veth pair, MTU 1500): datagrams
 *               of <datagram bytes> in GSO runs of as many as fit 65,000 bytes, each run one
 *               iovec out of a cached 1 MiB source, received whole runs at a time (UDP GRO)
 *               into 64 KiB buffers; the ceiling of a one-way 1 MiB transfer over UDP on an
 *               Ethernet-sized link, one kernel copy per byte on each side
 *   udp-veth-headed  the same with an 8-byte header apart from each datagram's payload (two
 *               iovecs a datagram): what any protocol with a header per datagram sending from
 *               the application's memory hands the kernel; payload bytes counted
 *   udp-veth-both  fi_rma_bw's 1 MiB write traffic both ways over the veth pair: a process in
 *               each namespace sends its 64-slot sweep to the other in GSO runs of datagrams
 *               with an 8-byte header apart from each payload, while it receives the other's
 *               GRO runs into a 64 KiB buffer and copies their payloads into its own 64-slot
 *               destination; a window of 256 datagrams each way; GB/s of payload per side
 *               (the slower one). -placed: each run received by the kernel straight into
 *               header slots and the payloads' places (two iovecs a datagram). -whole: no
 *               header, each run received straight into place, one copy per byte on each side
 *               as a byte stream gets. The ceilings of a both-ways write over UDP on an
 *               Ethernet-sized link
 *   both-cma    fi_rma_bw's write traffic with nothing else: two processes at once, each
 *               writing <bytes> at a time into the other (process_vm_writev) from slot j of a
 *               64-slot source into slot j of the other's 64-slot destination; GB/s per side
 *               (the slower one). The ceiling of any shared-memory RMA write between two
 *               processes that both post at once, as cross-memory attach allows.
 *   both-memcpy the same sweep with each process copying inside its own memory (no kernel):
 *               the ceiling of one copy per byte with both CPUs busy.
 *   handoff     how long a store by one process takes to be seen by another spinning on it:
 *               two processes pass a counter back and forth through two cache lines of a
 *               shared page, <rounds> times; the floor of any shared-memory latency
 * Usage: limits memcpy <bytes> | cma <bytes> | both-cma <bytes> | both-memcpy <bytes>
 *             | udp <datagram bytes> [seconds] | udp-sweep <datagram bytes> [seconds]
 *             | udp-both <datagram bytes> [seconds]
 *             | udp-veth|udp-veth-headed <datagram bytes> <rx netns> <tx netns> <rx address>
 *               [seconds]
 *             | udp-veth-both[-placed|-whole] <datagram bytes> <netns a> <netns b> <address a>
 *               <address b> [seconds]
 *             | handoff <rounds>
 * Prints one line: "<name> <bytes> <GB/s>" ("handoff <rounds> <ns per one-way handoff>").
 * Part of the fabric project.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <netinet/udp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *xalloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(p, 1, n);
	return p;
}

/* Repeats `once` until at least `secs` have passed; returns bytes per second. */
static double copy_rate(size_t size, double secs, int (*once)(void *, void *, size_t, void *), void *dst, void *src,
			void *arg)
{
	size_t total = 0;
	double t0 = now(), t;

	do {
		for (int i = 0; i < 16; i++) {
			if (once(dst, src, size, arg))
				return -1;
			total += size;
		}
		t = now() - t0;
	} while (t < secs);
	return total / t;
}

static int do_memcpy(void *dst, void *src, size_t n, void *arg)
{
	(void)arg;
	memcpy(dst, src, n);
	__asm__ volatile("" ::: "memory");
	return 0;
}

static int do_cma(void *dst, void *src, size_t n, void *arg)
{
	pid_t pid = *(pid_t *)arg;
	struct iovec local = { src, n }, remote = { dst, n };
	ssize_t r = process_vm_writev(pid, &local, 1, &remote, 1, 0);

	return r == (ssize_t)n ? 0 : -1;
}

static int bench_memcpy(size_t size)
{
	void *a = xalloc(size), *b = xalloc(size);

	printf("memcpy %zu %.3f\n", size, copy_rate(size, 0.5, do_memcpy, b, a, NULL) / 1e9);
	return 0;
}

static int bench_cma(size_t size)
{
	/* The child owns the destination; the parent copies into it at the same address (the
	 * mapping is inherited by fork, so the address is valid in both). */
	void *dst = xalloc(size), *src = xalloc(size);
	int pipefd[2];
	pid_t pid;
	double rate;
	char c;

	if (pipe(pipefd))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(pipefd[1]);
		if (read(pipefd[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(pipefd[0]);
	rate = copy_rate(size, 0.5, do_cma, dst, src, &pid);
	if (write(pipefd[1], "x", 1) < 0)
		perror("write");
	waitpid(pid, NULL, 0);
	if (rate < 0) {
		fprintf(stderr, "process_vm_writev: %s\n", strerror(errno));
		printf("cma %zu 0\n", size);
		return 1;
	}
	printf("cma %zu %.3f\n", size, rate / 1e9);
	return 0;
}

#define SLOTS 64

/* One side of both-cma / both-memcpy: `iters` copies of `size` bytes, slot after slot. */
static double sweep(int cma, pid_t peer, char *src, char *dst, size_t size, int iters)
{
	double t0 = now();

	for (int i = 0; i < iters; i++) {
		size_t off = (size_t)(i % SLOTS) * size;

		if (cma ? do_cma(dst + off, src + off, size, &peer) : do_memcpy(dst + off, src + off, size, NULL))
			return -1;
	}
	return (double)iters * size / (now() - t0);
}

static int bench_both(int cma, size_t size)
{
	/* Both mappings are inherited by fork at the same addresses: each side writes into the
	 * other's copy of `dst` (or its own, for memcpy). Pipes start both sides together and
	 * carry the child's rate back. */
	char *src = xalloc(size * SLOTS), *dst = xalloc(size * SLOTS);
	int go[2], back[2], iters = (int)((4ull << 30) / size);
	double mine, theirs = -1;
	pid_t parent = getpid(), pid;
	char c = 0;

	if (iters < 4 * SLOTS)
		iters = 4 * SLOTS;
	if (pipe(go) || pipe(back))
		return 1;
	pid = fork();
	if (pid == 0) {
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		mine = sweep(cma, parent, src, dst, size, iters);
		/* Keep the mapping alive until the parent is done with it too. */
		if (write(back[1], &mine, sizeof mine) != sizeof mine || read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	if (write(go[1], &c, 1) != 1)
		return 1;
	mine = sweep(cma, pid, src, dst, size, iters);
	if (read(back[0], &theirs, sizeof theirs) != sizeof theirs)
		theirs = -1;
	if (write(go[1], &c, 1) != 1)
		perror("write");
	waitpid(pid, NULL, 0);
	if (mine < 0 || theirs < 0) {
		fprintf(stderr, "%s: %s\n", cma ? "process_vm_writev" : "memcpy", strerror(errno));
		printf("%s %zu 0\n", cma ? "both-cma" : "both-memcpy", size);
		return 1;
	}
	printf("%s %zu %.3f\n", cma ? "both-cma" : "both-memcpy", size, (mine < theirs ? mine : theirs) / 1e9);
	return 0;
}

#define BATCH 32
/* udp-sweep: fi_rma_bw's window of 64 operations of 1 MiB, each in its own slot. */
#define SWEEP_SLOT (1 << 20)
#define SWEEP_SLOTS 64

/* The next datagram of a sweep: at *off (within slot *slot), at most dgram bytes, never
 * across the end of a slot. */
static size_t sweep_next(size_t dgram, size_t *slot, size_t *off, size_t *at)
{
	size_t len = SWEEP_SLOT - *off < dgram ? SWEEP_SLOT - *off : dgram;

	*at = *slot * SWEEP_SLOT + *off;
	*off += len;
	if (*off == SWEEP_SLOT) {
		*off = 0;
		*slot = (*slot + 1) % SWEEP_SLOTS;
	}
	return len;
}

static int bench_udp(size_t dgram, double secs, int sweep)
{
	int rx = socket(AF_INET, SOCK_DGRAM, 0), tx = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(addr);
	int buf = 64 << 20, gso = 0, pipefd[2];
	pid_t pid;

	setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(tx, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
	setsockopt(tx, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (bind(rx, (struct sockaddr *)&addr, sizeof(addr)) || getsockname(rx, (struct sockaddr *)&addr, &alen)) {
		perror("bind");
		return 1;
	}
	if (connect(tx, (struct sockaddr *)&addr, sizeof(addr))) {
		perror("connect");
		return 1;
	}
	if (pipe(pipefd))
		return 1;

	pid = fork();
	if (pid == 0) {
		/* Sender: batches of BATCH datagrams, as one GSO super-datagram when possible. */
		char *data = xalloc(sweep ? (size_t)SWEEP_SLOT * SWEEP_SLOTS : dgram * BATCH);
		int seg = (int)dgram;
		size_t slot = 0, off = 0;

		close(pipefd[0]);
		gso = !sweep && dgram * BATCH <= 65000 &&
		      !setsockopt(tx, IPPROTO_UDP, UDP_SEGMENT, &seg, sizeof(seg));
		for (;;) {
			if (gso) {
				if (send(tx, data, dgram * BATCH, 0) < 0 && errno != ENOBUFS && errno != EAGAIN)
					_exit(0);
			} else {
				struct mmsghdr msgs[BATCH];
				struct iovec iov[BATCH];

				size_t s0 = slot, o0 = off;
				int sent;

				for (int i = 0; i < BATCH; i++) {
					size_t at, len = dgram;

					if (sweep)
						len = sweep_next(dgram, &slot, &off, &at);
					else
						at = i * dgram;
					iov[i] = (struct iovec){ data + at, len };
					memset(&msgs[i], 0, sizeof(msgs[i]));
					msgs[i].msg_hdr.msg_iov = &iov[i];
					msgs[i].msg_hdr.msg_iovlen = 1;
				}
				sent = sendmmsg(tx, msgs, BATCH, 0);
				if (sent < 0 && errno != ENOBUFS && errno != EAGAIN)
					_exit(0);
				if (sweep) {
					/* Resume after the last datagram the kernel took. */
					slot = s0;
					off = o0;
					for (int i = 0; i < (sent > 0 ? sent : 0); i++) {
						size_t at;

						sweep_next(dgram, &slot, &off, &at);
					}
				}
			}
		}
	}

	/* Receiver: count delivered payload for `secs`. */
	char *rbuf = xalloc(sweep ? (size_t)SWEEP_SLOT * SWEEP_SLOTS : dgram * BATCH);
	size_t slot = 0, off = 0;
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct timeval tv = { 0, 100000 };
	size_t total = 0;
	double t0 = 0, t = 0;

	setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		size_t s0 = slot, o0 = off;

		for (int i = 0; i < BATCH; i++) {
			size_t at, len = dgram;

			if (sweep) {
				/* Where the sender's datagrams land if none is lost; a whole
				 * datagram's room, so that one that is not where expected (a
				 * loss before it) still arrives whole. */
				sweep_next(dgram, &slot, &off, &at);
				if (at > (size_t)SWEEP_SLOT * SWEEP_SLOTS - dgram)
					at = (size_t)SWEEP_SLOT * SWEEP_SLOTS - dgram;
			} else {
				at = i * dgram;
			}
			iov[i] = (struct iovec){ rbuf + at, len };
			memset(&msgs[i], 0, sizeof(msgs[i]));
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		int n = recvmmsg(rx, msgs, BATCH, MSG_WAITFORONE, NULL);

		if (sweep) {
			/* The next receive starts after the last datagram received. */
			slot = s0;
			off = o0;
			for (int i = 0; i < (n > 0 ? n : 0); i++) {
				size_t at;

				sweep_next(dgram, &slot, &off, &at);
			}
		}

		if (n > 0) {
			if (t0 == 0)
				t0 = now();
			else
				for (int i = 0; i < n; i++)
					total += msgs[i].msg_len;
		}
		if (t0 != 0 && (t = now() - t0) >= secs)
			break;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("%s %zu %.3f\n", sweep ? "udp-sweep" : "udp", dgram, total / t / 1e9);
	return 0;
}

/* After an empty poll of a both-ways measurement: whether the peer is gone (or a datagram was
 * lost for good), once nothing came for 0.1 s; before the first arrival, 10 s, as the peer
 * may still be filling its buffers on a loaded machine. `last`: when the quiet began. A side
 * that ends before its first arrival has counted nothing, and its figure is then -1. */
static int peer_gone(double *last, double t0)
{
	if (*last == 0) {
		*last = now();
		return 0;
	}
	return now() - *last > (t0 == 0 ? 10.0 : 0.1);
}

/* udp-both: one side of fi_rma_bw's write traffic both ways over raw UDP. Sends its sweep to
 * the peer and receives the peer's into its own 64-slot destination, with a window of
 * 2 * BOTH_BATCH datagrams each way (one batch sent for each one received, as an ack-clocked
 * protocol keeps them), so that neither socket buffer overflows. Payload received per second,
 * over `secs` from the first arrival; then it goes on for a while uncounted, so that the
 * peer's count ends while this side still sends. */
#define BOTH_BATCH 16

static double udp_both_side(int s, size_t dgram, double secs)
{
	char *src = xalloc((size_t)SWEEP_SLOT * SWEEP_SLOTS), *dst = xalloc((size_t)SWEEP_SLOT * SWEEP_SLOTS);
	size_t ts = 0, to = 0, rs = 0, ro = 0, total = 0;
	double t0 = 0, t = 0, end = 0, last = 0;
	int owed = 2 * BOTH_BATCH;

	for (;;) {
		struct mmsghdr msgs[BOTH_BATCH];
		struct iovec iov[BOTH_BATCH];
		int n = owed < BOTH_BATCH ? owed : BOTH_BATCH;

		/* Send what the window allows. */
		while (n > 0) {
			size_t s0 = ts, o0 = to;
			int sent;

			for (int i = 0; i < n; i++) {
				size_t at, len = sweep_next(dgram, &ts, &to, &at);

				iov[i] = (struct iovec){ src + at, len };
				memset(&msgs[i], 0, sizeof(msgs[i]));
				msgs[i].msg_hdr.msg_iov = &iov[i];
				msgs[i].msg_hdr.msg_iovlen = 1;
			}
			sent = sendmmsg(s, msgs, n, 0);
			if (sent < 0 && errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
				return t > 0 ? total / t : -1;
			ts = s0;
			to = o0;
			for (int i = 0; i < (sent > 0 ? sent : 0); i++) {
				size_t at;

				sweep_next(dgram, &ts, &to, &at);
			}
			owed -= sent > 0 ? sent : 0;
			n -= sent > 0 ? sent : 0;
		}
		/* Receive; each datagram received lets one more go. */
		size_t s0 = rs, o0 = ro;

		for (int i = 0; i < BOTH_BATCH; i++) {
			size_t at;

			sweep_next(dgram, &rs, &ro, &at);
			if (at > (size_t)SWEEP_SLOT * SWEEP_SLOTS - dgram)
				at = (size_t)SWEEP_SLOT * SWEEP_SLOTS - dgram;
			iov[i] = (struct iovec){ dst + at, dgram };
			memset(&msgs[i], 0, sizeof(msgs[i]));
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		/* Polled, as a library's progress polls: a receive that sleeps until a datagram
		 * comes pays a wakeup for each. */
		int got = recvmmsg(s, msgs, BOTH_BATCH, MSG_DONTWAIT, NULL);

		rs = s0;
		ro = o0;
		if (got <= 0) {
			if (got < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
			if (peer_gone(&last, t0))
				break;
			continue;
		}
		last = 0;
		for (int i = 0; i < got; i++) {
			size_t at;

			sweep_next(dgram, &rs, &ro, &at);
		}
		owed += got;
		if (t0 == 0) {
			t0 = now();
			continue;
		}
		if (end == 0) {
			for (int i = 0; i < got; i++)
				total += msgs[i].msg_len;
			if ((t = now() - t0) >= secs)
				end = now();
		} else if (now() - end > 0.3) {
			break;
		}
	}
	/* Nothing counted (the peer went quiet before its first arrival or right after): no figure. */
	return total > 0 && t > 0 ? total / t : -1;
}

static int bench_udp_both(size_t dgram, double secs)
{
	int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in aa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }, ba = aa;
	socklen_t alen = sizeof(aa);
	int buf = 64 << 20, back[2];
	double mine, theirs = -1;
	pid_t pid;

	for (int i = 0; i < 2; i++) {
		int s = i ? b : a;

		setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
		setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
	}
	if (bind(a, (struct sockaddr *)&aa, sizeof(aa)) || getsockname(a, (struct sockaddr *)&aa, &alen) ||
	    bind(b, (struct sockaddr *)&ba, sizeof(ba)) || getsockname(b, (struct sockaddr *)&ba, &alen) ||
	    connect(a, (struct sockaddr *)&ba, sizeof(ba)) || connect(b, (struct sockaddr *)&aa, sizeof(aa))) {
		perror("udp-both sockets");
		return 1;
	}
	if (pipe(back))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(a);
		mine = udp_both_side(b, dgram, secs);
		if (write(back[1], &mine, sizeof mine) != sizeof mine)
			_exit(1);
		_exit(0);
	}
	close(b);
	mine = udp_both_side(a, dgram, secs);
	if (read(back[0], &theirs, sizeof theirs) != sizeof theirs)
		theirs = -1;
	waitpid(pid, NULL, 0);
	if (mine < 0 || theirs < 0) {
		fprintf(stderr, "udp-both: a side moved nothing\n");
		printf("udp-both %zu 0\n", dgram);
		return 1;
	}
	printf("udp-both %zu %.3f\n", dgram, (mine < theirs ? mine : theirs) / 1e9);
	return 0;
}

/* Enters network namespace `name` (ip-netns(8) keeps them under /run/netns). */
static int enter_netns(const char *name)
{
	char path[256];
	int fd, r;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		return -1;
	}
	r = setns(fd, CLONE_NEWNET);
	close(fd);
	if (r)
		perror("setns");
	return r;
}

/* udp-veth: see the top of the file. A GSO run: as many datagrams as fit 65,000 bytes. */
#define VETH_HDR 8
#define VETH_MSGS 4

static int bench_udp_veth(size_t dgram, const char *ns_rx, const char *ns_tx, const char *rx_addr, int headed,
			  double secs)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t alen = sizeof(addr);
	size_t run = 65000 / dgram, total = 0;
	int buf = 64 << 20, on = 1, rx, seg = (int)dgram;
	double t0 = 0, t = 0;
	pid_t pid;

	if (dgram <= VETH_HDR || dgram > 65000 || run > 64 || inet_pton(AF_INET, rx_addr, &addr.sin_addr) != 1) {
		fprintf(stderr, "udp-veth: bad datagram size or address\n");
		return 2;
	}
	if (enter_netns(ns_rx))
		return 1;
	rx = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	if (setsockopt(rx, IPPROTO_UDP, UDP_GRO, &on, sizeof(on)) ||
	    bind(rx, (struct sockaddr *)&addr, sizeof(addr)) || getsockname(rx, (struct sockaddr *)&addr, &alen)) {
		perror("udp-veth receiver");
		return 1;
	}
	pid = fork();
	if (pid == 0) {
		/* Sender: VETH_MSGS runs per sendmmsg, cycling through a 1 MiB source. */
		size_t src_len = 1 << 20, at = 0, pay = headed ? dgram - VETH_HDR : dgram;
		char *src = xalloc(src_len), hdr[64][VETH_HDR];
		struct iovec iov[VETH_MSGS][128];
		struct mmsghdr msgs[VETH_MSGS];
		int tx;

		memset(hdr, 0xF5, sizeof(hdr));
		if (enter_netns(ns_tx))
			_exit(1);
		tx = socket(AF_INET, SOCK_DGRAM, 0);
		setsockopt(tx, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
		if (setsockopt(tx, IPPROTO_UDP, UDP_SEGMENT, &seg, sizeof(seg)) ||
		    connect(tx, (struct sockaddr *)&addr, sizeof(addr))) {
			perror("udp-veth sender");
			_exit(1);
		}
		for (;;) {
			for (int m = 0; m < VETH_MSGS; m++) {
				int k = 0;

				if (at + run * pay > src_len)
					at = 0;
				if (headed) {
					for (size_t d = 0; d < run; d++) {
						iov[m][k++] = (struct iovec){ hdr[d], VETH_HDR };
						iov[m][k++] = (struct iovec){ src + at + d * pay, pay };
					}
				} else {
					iov[m][k++] = (struct iovec){ src + at, run * pay };
				}
				at += run * pay;
				memset(&msgs[m], 0, sizeof(msgs[m]));
				msgs[m].msg_hdr.msg_iov = iov[m];
				msgs[m].msg_hdr.msg_iovlen = k;
			}
			if (sendmmsg(tx, msgs, VETH_MSGS, 0) < 0 && errno != ENOBUFS && errno != EAGAIN)
				_exit(0);
		}
	}

	/* Receiver: whole GRO runs; payload bytes counted for `secs` from the first arrival. */
	static char rbuf[8][65536];
	struct mmsghdr msgs[8];
	struct iovec iov[8];
	struct timeval tv = { 0, 100000 };

	setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		for (int i = 0; i < 8; i++) {
			iov[i] = (struct iovec){ rbuf[i], sizeof(rbuf[i]) };
			memset(&msgs[i], 0, sizeof(msgs[i]));
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		int n = recvmmsg(rx, msgs, 8, MSG_WAITFORONE, NULL);

		if (n > 0) {
			if (t0 == 0) {
				t0 = now();
			} else {
				for (int i = 0; i < n; i++) {
					size_t len = msgs[i].msg_len;

					total += headed ? len - (len + dgram - 1) / dgram * VETH_HDR : len;
				}
			}
		} else if (t0 == 0 && waitpid(pid, NULL, WNOHANG) == pid) {
			fprintf(stderr, "udp-veth: the sender stopped before anything arrived\n");
			return 1;
		}
		if (t0 != 0 && (t = now() - t0) >= secs)
			break;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("%s %zu %.3f\n", headed ? "udp-veth-headed" : "udp-veth", dgram, total / t / 1e9);
	return 0;
}

/* udp-veth-both: fi_rma_bw's 1 MiB write traffic both ways over a veth pair in raw UDP, one
 * process in each namespace, each sending its 64-slot sweep to the other in GSO runs of
 * <datagram bytes> datagrams while it receives the other's GRO runs into its own 64-slot
 * destination, VETH_BOTH_WINDOW datagrams in flight each way (one sent for each one received,
 * as an ack-clocked protocol keeps them), polling as a library's progress does. How each side
 * receives (`mode`):
 *   VETH_WHOLE   datagrams without a header, each GRO run received straight into the
 *                destination: one kernel copy per byte on each side, as a byte stream gets
 *                (a transport that may lose or reorder datagrams cannot work so: nothing in
 *                a datagram says where it belongs);
 *   VETH_COPY    an 8-byte header apart from each payload (two iovecs a datagram, from the
 *                source), each GRO run received into a 64 KiB buffer, its headers checked and
 *                its payloads copied into the destination: a second copy of each byte;
 *   VETH_PLACED  the same datagrams, each GRO run received by the kernel straight into
 *                header slots and the payloads' places in the destination (two iovecs a
 *                datagram), its headers checked after.
 * GB/s of payload per side (the slower one). */
#define VETH_BOTH_WINDOW 256
#define VETH_BOTH_PORT 47999
/* Most datagrams in a GSO run (and a GRO one): 44 of 1,472 bytes fill 64 KiB. */
#define VETH_BOTH_RUN 44
enum veth_mode { VETH_WHOLE, VETH_COPY, VETH_PLACED };

static double veth_both_side(int s, size_t dgram, enum veth_mode mode, double secs)
{
	size_t area = (size_t)SWEEP_SLOT * SWEEP_SLOTS, hdr = mode == VETH_WHOLE ? 0 : VETH_HDR;
	size_t pay = dgram - hdr, ts = 0, to = 0, rs = 0, ro = 0, total = 0;
	uint64_t tseq = 0, rseq = 0, th[VETH_BOTH_RUN], rh[VETH_BOTH_RUN];
	char *src = xalloc(area), *dst = xalloc(area);
	static char rbuf[65536];
	struct iovec iov[2 * VETH_BOTH_RUN];
	double t0 = 0, t = 0, end = 0, last = 0;
	int owed = VETH_BOTH_WINDOW, run = 65000 / dgram < VETH_BOTH_RUN ? (int)(65000 / dgram) : VETH_BOTH_RUN;

	for (;;) {
		/* Send whole GSO runs while the window has room for one (as acks covering many
		 * datagrams let a sender); a run ends early at a slot's short datagram. */
		while (owed >= run) {
			size_t s0 = ts, o0 = to;
			int k = 0, n = 0;

			while (n < owed && n < run) {
				size_t at, len = sweep_next(pay, &ts, &to, &at);

				if (hdr) {
					th[n] = tseq + n;
					iov[k++] = (struct iovec){ &th[n], hdr };
				}
				iov[k++] = (struct iovec){ src + at, len };
				n++;
				if (len < pay)
					break;
			}
			struct msghdr m = { .msg_iov = iov, .msg_iovlen = k };

			if (sendmsg(s, &m, MSG_DONTWAIT) < 0) {
				if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
					return -1;
				ts = s0;
				to = o0;
				break;
			}
			tseq += n;
			owed -= n;
		}
		/* Receive one GRO run where the mode puts it. */
		size_t s0 = rs, o0 = ro, at, want = 0;
		int k = 0, n = 0;

		if (mode == VETH_WHOLE) {
			at = rs * SWEEP_SLOT + ro;
			want = SWEEP_SLOT - ro < sizeof(rbuf) ? SWEEP_SLOT - ro : sizeof(rbuf);
			iov[k++] = (struct iovec){ dst + at, want };
		} else if (mode == VETH_COPY) {
			iov[k++] = (struct iovec){ rbuf, sizeof(rbuf) };
		} else {
			while (n < run) {
				size_t len = sweep_next(pay, &rs, &ro, &at);

				iov[k++] = (struct iovec){ &rh[n], hdr };
				iov[k++] = (struct iovec){ dst + at, len };
				n++;
				if (len < pay)
					break;
			}
			rs = s0;
			ro = o0;
		}
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = k };
		ssize_t got = recvmsg(s, &m, MSG_DONTWAIT);

		if (got <= 0) {
			if (got < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
			if (peer_gone(&last, t0))
				break;
			continue;
		}
		last = 0;
		if (m.msg_flags & MSG_TRUNC) {
			fprintf(stderr, "udp-veth-both: a GRO run was larger than its buffer\n");
			return -1;
		}
		/* Walk the run's datagrams in the order sent; anything else is a loss or a
		 * reordering, which this measurement does not recover from. */
		size_t left = (size_t)got, payload = 0;
		int d = 0;

		while (left > 0) {
			size_t len = sweep_next(pay, &rs, &ro, &at), off = (size_t)got - left;

			if (left < hdr + len) {
				fprintf(stderr, "udp-veth-both: a datagram lost or reordered\n");
				return -1;
			}
			if (mode == VETH_COPY) {
				uint64_t h;

				memcpy(&h, rbuf + off, sizeof(h));
				if (h != rseq + d) {
					fprintf(stderr, "udp-veth-both: datagram %llu where %llu was due\n",
						(unsigned long long)h, (unsigned long long)(rseq + d));
					return -1;
				}
				memcpy(dst + at, rbuf + off + hdr, len);
			} else if (mode == VETH_PLACED && rh[d] != rseq + d) {
				fprintf(stderr, "udp-veth-both: a datagram lost or reordered\n");
				return -1;
			}
			left -= hdr + len;
			payload += len;
			d++;
		}
		rseq += d;
		owed += d;
		if (t0 == 0) {
			t0 = now();
			continue;
		}
		if (end == 0) {
			total += payload;
			if ((t = now() - t0) >= secs)
				end = now();
		} else if (now() - end > 0.3) {
			break;
		}
	}
	return total > 0 && t > 0 ? total / t : -1;
}

static int bench_udp_veth_both(size_t dgram, enum veth_mode mode, char *const ns[2], char *const addr[2],
			       double secs)
{
	static const char *const name[] = { "udp-veth-both-whole", "udp-veth-both", "udp-veth-both-placed" };
	struct sockaddr_in sa[2];
	int buf = 64 << 20, on = 1, seg = (int)dgram, back[2], go[2];
	double mine, theirs = -1;
	char c = 0;
	pid_t pid;

	for (int i = 0; i < 2; i++) {
		sa[i] = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(VETH_BOTH_PORT) };
		if (inet_pton(AF_INET, addr[i], &sa[i].sin_addr) != 1 || dgram <= VETH_HDR || dgram > 65000 / 2) {
			fprintf(stderr, "%s: bad datagram size or address\n", name[mode]);
			return 2;
		}
	}
	if (pipe(back) || pipe(go))
		return 1;
	pid = fork();
	int me = pid == 0, s;

	if (enter_netns(ns[me]))
		_exit(1);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
	if (setsockopt(s, IPPROTO_UDP, UDP_GRO, &on, sizeof(on)) ||
	    setsockopt(s, IPPROTO_UDP, UDP_SEGMENT, &seg, sizeof(seg)) ||
	    bind(s, (struct sockaddr *)&sa[me], sizeof(sa[me])) ||
	    connect(s, (struct sockaddr *)&sa[!me], sizeof(sa[!me]))) {
		perror(name[mode]);
		if (me)
			_exit(1);
		waitpid(pid, NULL, 0);
		return 1;
	}
	/* Both bound before either sends: a datagram to an unbound port would be lost. */
	if (me ? write(back[1], &c, 1) != 1 || read(go[0], &c, 1) != 1 :
		 read(back[0], &c, 1) != 1 || write(go[1], &c, 1) != 1) {
		fprintf(stderr, "%s: the other side did not start\n", name[mode]);
		if (me)
			_exit(1);
		waitpid(pid, NULL, 0);
		return 1;
	}
	mine = veth_both_side(s, dgram, mode, secs);
	if (me) {
		if (write(back[1], &mine, sizeof mine) != sizeof mine)
			_exit(1);
		_exit(0);
	}
	if (read(back[0], &theirs, sizeof theirs) != sizeof theirs)
		theirs = -1;
	waitpid(pid, NULL, 0);
	if (mine < 0 || theirs < 0) {
		fprintf(stderr, "%s: a side moved nothing\n", name[mode]);
		printf("%s %zu 0\n", name[mode], dgram);
		return 1;
	}
	printf("%s %zu %.3f\n", name[mode], dgram, (mine < theirs ? mine : theirs) / 1e9);
	return 0;
}

static int bench_handoff(long rounds)
{
	/* Two lines, one written by each side, so that each handoff moves one line one way. */
	_Atomic long *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	_Atomic long *ping, *pong;
	double t0, t;
	pid_t pid;

	if (page == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	ping = page;
	pong = page + 64 / sizeof(long);
	*ping = 0;
	*pong = 0;
	pid = fork();
	if (pid == 0) {
		for (long i = 1; i <= rounds; i++) {
			while (*ping != i)
				;
			*pong = i;
		}
		_exit(0);
	}
	t0 = now();
	for (long i = 1; i <= rounds; i++) {
		*ping = i;
		while (*pong != i)
			;
	}
	t = now() - t0;
	waitpid(pid, NULL, 0);
	printf("handoff %ld %.1f\n", rounds, t / rounds / 2 * 1e9);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s memcpy|cma|both-cma|both-memcpy|udp|udp-sweep|udp-both <bytes> [seconds] | handoff <rounds> | udp-veth|udp-veth-headed <bytes> <rx netns> <tx netns> <rx address> [seconds] | udp-veth-both[-placed|-whole] <bytes> <netns a> <netns b> <address a> <address b> [seconds]\n", argv[0]);
		return 2;
	}
	size_t n = strtoull(argv[2], NULL, 0);
	if (!strcmp(argv[1], "memcpy"))
		return bench_memcpy(n);
	if (!strcmp(argv[1], "cma"))
		return bench_cma(n);
	if (!strcmp(argv[1], "both-cma"))
		return bench_both(1, n);
	if (!strcmp(argv[1], "both-memcpy"))
		return bench_both(0, n);
	if (!strcmp(argv[1], "udp"))
		return bench_udp(n, argc > 3 ? atof(argv[3]) : 1.0, 0);
	if (!strcmp(argv[1], "udp-sweep"))
		return bench_udp(n, argc > 3 ? atof(argv[3]) : 1.0, 1);
	if (!strcmp(argv[1], "udp-both"))
		return bench_udp_both(n, argc > 3 ? atof(argv[3]) : 1.0);
	if (!strcmp(argv[1], "handoff"))
		return bench_handoff((long)n);
	if (!strcmp(argv[1], "udp-veth") || !strcmp(argv[1], "udp-veth-headed")) {
		if (argc < 6) {
			fprintf(stderr, "usage: %s %s <datagram bytes> <rx netns> <tx netns> <rx address> [seconds]\n",
				argv[0], argv[1]);
			return 2;
		}
		return bench_udp_veth(n, argv[3], argv[4], argv[5], !strcmp(argv[1], "udp-veth-headed"),
				      argc > 6 ? atof(argv[6]) : 1.0);
	}
	if (!strncmp(argv[1], "udp-veth-both", 13)) {
		enum veth_mode mode = !strcmp(argv[1], "udp-veth-both-whole") ? VETH_WHOLE :
				      !strcmp(argv[1], "udp-veth-both-placed") ? VETH_PLACED : VETH_COPY;

		if (argc < 7 || (mode == VETH_COPY && strcmp(argv[1], "udp-veth-both"))) {
			fprintf(stderr, "usage: %s udp-veth-both[-whole|-placed] <datagram bytes> <ns a> <ns b> <address a> <address b> [seconds]\n",
				argv[0]);
			return 2;
		}
		return bench_udp_veth_both(n, mode, &argv[3], &argv[5], argc > 7 ? atof(argv[7]) : 1.0);
	}
	fprintf(stderr, "unknown measurement %s\n", argv[1]);
	return 2;
}
