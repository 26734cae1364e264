/* The API misuse matrix on a real provider (issue 8): every posting slot of fi_ops_msg,
 * fi_ops_tagged, fi_ops_rma and fi_ops_atomic, called through the public inline wrappers with
 * each kind of bad input that applies to it. A refused call must return the documented error
 * and leave no completion behind; a request the target must refuse (a closed MR's key, out of
 * bounds) must end in an error completion (an inject's too, with a NULL context) with no byte
 * of the target changed. After every
 * case the same slot is called correctly and its data checked, so the endpoint is still usable.
 *
 * The rows come from one table; main() checks that the table names every slot of each ops
 * struct (by the struct's size), so a slot added to the headers cannot be forgotten.
 *
 *   misuse <provider>      e.g. shm, efa (FI_EFA_ENABLE_SHM_TRANSFER=0: over the SRD device)
 *
 * Two endpoints in one process (A initiates, B receives and is the RMA target) and a third
 * that is bound but never enabled. Run by mk/abi.mk under valgrind and AddressSanitizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "misuse: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                 \
			fputc('\n', stderr);                                          \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

#define LEN 64		/* bytes moved by each valid call (8 u64 for atomics) */
#define REGION 16384	/* B's registered RMA/atomic target */
#define TAG 0x77
#define SLOTS(t) ((sizeof(struct t) - sizeof(size_t)) / sizeof(void (*)(void)))

/* ---- objects ---- */

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_ep *ep_a, *ep_b, *ep_idle;
static struct fid_cq *cq_a, *cq_b;
static struct fid_av *av_a, *av_b;
static struct fid_mr *mr_a, *mr_b;
static fi_addr_t addr_b, addr_a;	/* B as A knows it, A as B knows it */
static uint64_t key_b, closed_key;
static uint8_t *src, *dst, *res, *cmp;	/* A's buffers (registered as one MR), B's receive */
static uint8_t *region;			/* B's RMA target */
static uint64_t region_addr;		/* its remote address (0 without FI_MR_VIRT_ADDR) */
static void *desc_a;

/* ---- completions: both CQs are read together (manual progress needs both sides) ---- */

struct comp {
	int err;		/* 0 or the positive fi_errno of an error entry */
	void *ctx;
	uint64_t flags, len, data, tag;
};
#define QN 64
static struct comp q[2][QN];
static int qn[2];

static void poll_cq(int side)
{
	struct fid_cq *cq = side ? cq_b : cq_a;
	struct fi_cq_tagged_entry e;
	ssize_t n = fi_cq_read(cq, &e, 1);

	if (n == 1) {
		CHECK(qn[side] < QN, "completion queue overflow");
		q[side][qn[side]++] = (struct comp){ 0, e.op_context, e.flags, e.len, e.data, e.tag };
	} else if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };

		CHECK(fi_cq_readerr(cq, &err, 0) == 1, "readerr");
		CHECK(qn[side] < QN, "completion queue overflow");
		q[side][qn[side]++] = (struct comp){ err.err, err.op_context, err.flags, err.len, 0, 0 };
	} else {
		CHECK(n == -FI_EAGAIN, "fi_cq_read: %zd", n);
	}
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The next completion of `side`, polling both for up to 10 s. */
static struct comp take(int side, const char *what)
{
	double end = now() + 10;
	struct comp c;

	while (qn[side] == 0) {
		CHECK(now() < end, "%s: no completion within 10 s", what);
		poll_cq(0);
		poll_cq(1);
	}
	c = q[side][0];
	memmove(&q[side][0], &q[side][1], --qn[side] * sizeof c);
	return c;
}

/* Nothing arrives on either CQ for a while (a refused call leaves no completion). */
static void quiet(const char *what)
{
	double end = now() + 0.002;

	while (now() < end) {
		poll_cq(0);
		poll_cq(1);
	}
	CHECK(qn[0] == 0 && qn[1] == 0, "%s: stray completion (A %d, B %d, ctx %p)", what, qn[0],
	      qn[1], qn[0] ? q[0][0].ctx : q[1][0].ctx);
}

/* ---- the slots ---- */

/* What a slot is. */
#define RECV 1		/* posts a receive on B */
#define VEC 2		/* iovec (or fi_ioc) array and count */
#define MSG 4		/* struct fi_msg* and flags */
#define INJ 8		/* inject: bounded by inject_size, no completion */
#define FETCH 16	/* RMA read or fetching atomic: data comes back into res */
#define DATA 32		/* carries remote CQ data */
#define CMPW 64		/* compare atomic */

enum table { T_MSG, T_TAGGED, T_RMA, T_ATOMIC };
static const char *const table_name[] = { "fi_ops_msg", "fi_ops_tagged", "fi_ops_rma",
					  "fi_ops_atomic" };

/* One call's arguments; the misuse under test bends one of them. */
struct args {
	struct fid_ep *ep;
	void *buf;		/* send/recv/source buffer */
	size_t len;		/* bytes (RMA, messages) or elements (atomics) */
	void *desc;
	size_t count;		/* iov count for VEC and MSG slots */
	int null_iov, null_msg;
	fi_addr_t addr;
	uint64_t flags;		/* MSG slots */
	uint64_t raddr, key;
	enum fi_datatype dt;
	enum fi_op op;
	size_t unit;		/* bytes per element: 8 for atomics (FI_UINT64), else 1 */
	void *ctx;
};

/* Splits buf/len into `count` iovecs (the last takes the rest; entries past len are empty). */
static void split(struct args *a, struct iovec *iov, void **descs, struct fi_ioc *ioc, size_t unit)
{
	size_t i, per = a->count ? a->len / a->count : 0;

	for (i = 0; i < a->count && i < 16; i++) {
		size_t n = i + 1 == a->count ? a->len - per * i : per;

		iov[i].iov_base = a->buf ? (uint8_t *)a->buf + per * i * unit : NULL;
		iov[i].iov_len = n * unit;
		ioc[i].addr = iov[i].iov_base;
		ioc[i].count = n;
		descs[i] = a->desc;
	}
}

#define IOVS                                                                 \
	struct iovec iov[16];                                                \
	void *descs[16];                                                     \
	struct fi_ioc ioc[16];                                               \
	split(a, iov, descs, ioc, a->unit);                                  \
	struct iovec *iovp = a->null_iov ? NULL : iov;                       \
	struct fi_ioc *iocp = a->null_iov ? NULL : ioc;                      \
	(void)iovp;                                                          \
	(void)iocp
#define RMA_IOV struct fi_rma_iov rma = { a->raddr, a->len, a->key }
#define RMA_IOC struct fi_rma_ioc rioc = { a->raddr, a->len, a->key }
#define MSGP(m) (a->null_msg ? NULL : &(m))

static ssize_t msg_recv(struct args *a)
{
	return fi_recv(a->ep, a->buf, a->len, a->desc, a->addr, a->ctx);
}
static ssize_t msg_recvv(struct args *a)
{
	IOVS;
	return fi_recvv(a->ep, iovp, descs, a->count, a->addr, a->ctx);
}
static ssize_t msg_recvmsg(struct args *a)
{
	IOVS;
	struct fi_msg m = { iovp, descs, a->count, a->addr, a->ctx, 0 };
	return fi_recvmsg(a->ep, MSGP(m), a->flags);
}
static ssize_t msg_send(struct args *a)
{
	return fi_send(a->ep, a->buf, a->len, a->desc, a->addr, a->ctx);
}
static ssize_t msg_sendv(struct args *a)
{
	IOVS;
	return fi_sendv(a->ep, iovp, descs, a->count, a->addr, a->ctx);
}
static ssize_t msg_sendmsg(struct args *a)
{
	IOVS;
	struct fi_msg m = { iovp, descs, a->count, a->addr, a->ctx, 0 };
	return fi_sendmsg(a->ep, MSGP(m), a->flags);
}
static ssize_t msg_inject(struct args *a)
{
	return fi_inject(a->ep, a->buf, a->len, a->addr);
}
static ssize_t msg_senddata(struct args *a)
{
	return fi_senddata(a->ep, a->buf, a->len, a->desc, 0xda7a, a->addr, a->ctx);
}
static ssize_t msg_injectdata(struct args *a)
{
	return fi_injectdata(a->ep, a->buf, a->len, 0xda7a, a->addr);
}

static ssize_t tag_recv(struct args *a)
{
	return fi_trecv(a->ep, a->buf, a->len, a->desc, a->addr, TAG, 0, a->ctx);
}
static ssize_t tag_recvv(struct args *a)
{
	IOVS;
	return fi_trecvv(a->ep, iovp, descs, a->count, a->addr, TAG, 0, a->ctx);
}
static ssize_t tag_recvmsg(struct args *a)
{
	IOVS;
	struct fi_msg_tagged m = { iovp, descs, a->count, a->addr, TAG, 0, a->ctx, 0 };
	return fi_trecvmsg(a->ep, MSGP(m), a->flags);
}
static ssize_t tag_send(struct args *a)
{
	return fi_tsend(a->ep, a->buf, a->len, a->desc, a->addr, TAG, a->ctx);
}
static ssize_t tag_sendv(struct args *a)
{
	IOVS;
	return fi_tsendv(a->ep, iovp, descs, a->count, a->addr, TAG, a->ctx);
}
static ssize_t tag_sendmsg(struct args *a)
{
	IOVS;
	struct fi_msg_tagged m = { iovp, descs, a->count, a->addr, TAG, 0, a->ctx, 0 };
	return fi_tsendmsg(a->ep, MSGP(m), a->flags);
}
static ssize_t tag_inject(struct args *a)
{
	return fi_tinject(a->ep, a->buf, a->len, a->addr, TAG);
}
static ssize_t tag_senddata(struct args *a)
{
	return fi_tsenddata(a->ep, a->buf, a->len, a->desc, 0xda7a, a->addr, TAG, a->ctx);
}
static ssize_t tag_injectdata(struct args *a)
{
	return fi_tinjectdata(a->ep, a->buf, a->len, 0xda7a, a->addr, TAG);
}

static ssize_t rma_read(struct args *a)
{
	return fi_read(a->ep, a->buf, a->len, a->desc, a->addr, a->raddr, a->key, a->ctx);
}
static ssize_t rma_readv(struct args *a)
{
	IOVS;
	return fi_readv(a->ep, iovp, descs, a->count, a->addr, a->raddr, a->key, a->ctx);
}
static ssize_t rma_readmsg(struct args *a)
{
	IOVS;
	RMA_IOV;
	struct fi_msg_rma m = { iovp, descs, a->count, a->addr, &rma, 1, a->ctx, 0 };
	return fi_readmsg(a->ep, MSGP(m), a->flags);
}
static ssize_t rma_write(struct args *a)
{
	return fi_write(a->ep, a->buf, a->len, a->desc, a->addr, a->raddr, a->key, a->ctx);
}
static ssize_t rma_writev(struct args *a)
{
	IOVS;
	return fi_writev(a->ep, iovp, descs, a->count, a->addr, a->raddr, a->key, a->ctx);
}
static ssize_t rma_writemsg(struct args *a)
{
	IOVS;
	RMA_IOV;
	struct fi_msg_rma m = { iovp, descs, a->count, a->addr, &rma, 1, a->ctx, 0 };
	return fi_writemsg(a->ep, MSGP(m), a->flags);
}
static ssize_t rma_inject(struct args *a)
{
	return fi_inject_write(a->ep, a->buf, a->len, a->addr, a->raddr, a->key);
}
static ssize_t rma_writedata(struct args *a)
{
	return fi_writedata(a->ep, a->buf, a->len, a->desc, 0xda7a, a->addr, a->raddr, a->key,
			    a->ctx);
}
static ssize_t rma_injectdata(struct args *a)
{
	return fi_inject_writedata(a->ep, a->buf, a->len, 0xda7a, a->addr, a->raddr, a->key);
}

static ssize_t at_write(struct args *a)
{
	return fi_atomic(a->ep, a->buf, a->len, a->desc, a->addr, a->raddr, a->key, a->dt, a->op,
			 a->ctx);
}
static ssize_t at_writev(struct args *a)
{
	IOVS;
	return fi_atomicv(a->ep, iocp, descs, a->count, a->addr, a->raddr, a->key, a->dt, a->op,
			  a->ctx);
}
static ssize_t at_writemsg(struct args *a)
{
	IOVS;
	RMA_IOC;
	struct fi_msg_atomic m = { iocp, descs, a->count, a->addr, &rioc, 1, a->dt, a->op, a->ctx, 0 };
	return fi_atomicmsg(a->ep, MSGP(m), a->flags);
}
static ssize_t at_inject(struct args *a)
{
	return fi_inject_atomic(a->ep, a->buf, a->len, a->addr, a->raddr, a->key, a->dt, a->op);
}
static ssize_t at_readwrite(struct args *a)
{
	return fi_fetch_atomic(a->ep, a->buf, a->len, a->desc, res, desc_a, a->addr, a->raddr,
			       a->key, a->dt, a->op, a->ctx);
}
static ssize_t at_readwritev(struct args *a)
{
	IOVS;
	struct fi_ioc r = { res, a->len };
	void *rd = desc_a;
	return fi_fetch_atomicv(a->ep, iocp, descs, a->count, &r, &rd, 1, a->addr, a->raddr,
				a->key, a->dt, a->op, a->ctx);
}
static ssize_t at_readwritemsg(struct args *a)
{
	IOVS;
	RMA_IOC;
	struct fi_ioc r = { res, a->len };
	void *rd = desc_a;
	struct fi_msg_atomic m = { iocp, descs, a->count, a->addr, &rioc, 1, a->dt, a->op, a->ctx, 0 };
	return fi_fetch_atomicmsg(a->ep, MSGP(m), &r, &rd, 1, a->flags);
}
static ssize_t at_compwrite(struct args *a)
{
	return fi_compare_atomic(a->ep, a->buf, a->len, a->desc, cmp, desc_a, res, desc_a,
				 a->addr, a->raddr, a->key, a->dt, a->op, a->ctx);
}
static ssize_t at_compwritev(struct args *a)
{
	IOVS;
	struct fi_ioc c = { cmp, a->len }, r = { res, a->len };
	void *cd = desc_a, *rd = desc_a;
	return fi_compare_atomicv(a->ep, iocp, descs, a->count, &c, &cd, 1, &r, &rd, 1, a->addr,
				  a->raddr, a->key, a->dt, a->op, a->ctx);
}
static ssize_t at_compwritemsg(struct args *a)
{
	IOVS;
	RMA_IOC;
	struct fi_ioc c = { cmp, a->len }, r = { res, a->len };
	void *cd = desc_a, *rd = desc_a;
	struct fi_msg_atomic m = { iocp, descs, a->count, a->addr, &rioc, 1, a->dt, a->op, a->ctx, 0 };
	return fi_compare_atomicmsg(a->ep, MSGP(m), &c, &cd, 1, &r, &rd, 1, a->flags);
}

struct slot {
	enum table table;
	const char *name;
	unsigned kind;
	ssize_t (*call)(struct args *);
};

/* Every posting slot. fi_ops_atomic's writevalid/readwritevalid/compwritevalid are queries,
 * not posts: query() below calls them. */
static const struct slot slots[] = {
	{ T_MSG, "recv", RECV, msg_recv },
	{ T_MSG, "recvv", RECV | VEC, msg_recvv },
	{ T_MSG, "recvmsg", RECV | VEC | MSG, msg_recvmsg },
	{ T_MSG, "send", 0, msg_send },
	{ T_MSG, "sendv", VEC, msg_sendv },
	{ T_MSG, "sendmsg", VEC | MSG, msg_sendmsg },
	{ T_MSG, "inject", INJ, msg_inject },
	{ T_MSG, "senddata", DATA, msg_senddata },
	{ T_MSG, "injectdata", INJ | DATA, msg_injectdata },
	{ T_TAGGED, "recv", RECV, tag_recv },
	{ T_TAGGED, "recvv", RECV | VEC, tag_recvv },
	{ T_TAGGED, "recvmsg", RECV | VEC | MSG, tag_recvmsg },
	{ T_TAGGED, "send", 0, tag_send },
	{ T_TAGGED, "sendv", VEC, tag_sendv },
	{ T_TAGGED, "sendmsg", VEC | MSG, tag_sendmsg },
	{ T_TAGGED, "inject", INJ, tag_inject },
	{ T_TAGGED, "senddata", DATA, tag_senddata },
	{ T_TAGGED, "injectdata", INJ | DATA, tag_injectdata },
	{ T_RMA, "read", FETCH, rma_read },
	{ T_RMA, "readv", FETCH | VEC, rma_readv },
	{ T_RMA, "readmsg", FETCH | VEC | MSG, rma_readmsg },
	{ T_RMA, "write", 0, rma_write },
	{ T_RMA, "writev", VEC, rma_writev },
	{ T_RMA, "writemsg", VEC | MSG, rma_writemsg },
	{ T_RMA, "inject", INJ, rma_inject },
	{ T_RMA, "writedata", DATA, rma_writedata },
	{ T_RMA, "injectdata", INJ | DATA, rma_injectdata },
	{ T_ATOMIC, "write", 0, at_write },
	{ T_ATOMIC, "writev", VEC, at_writev },
	{ T_ATOMIC, "writemsg", VEC | MSG, at_writemsg },
	{ T_ATOMIC, "inject", INJ, at_inject },
	{ T_ATOMIC, "readwrite", FETCH, at_readwrite },
	{ T_ATOMIC, "readwritev", FETCH | VEC, at_readwritev },
	{ T_ATOMIC, "readwritemsg", FETCH | VEC | MSG, at_readwritemsg },
	{ T_ATOMIC, "compwrite", FETCH | CMPW, at_compwrite },
	{ T_ATOMIC, "compwritev", FETCH | CMPW | VEC, at_compwritev },
	{ T_ATOMIC, "compwritemsg", FETCH | CMPW | VEC | MSG, at_compwritemsg },
};
#define NSLOTS (sizeof slots / sizeof slots[0])

/* ---- a valid call of a slot, with its data checked ---- */

static uint8_t pat(size_t i, int seed)
{
	return (uint8_t)(i * 31 + seed);
}

static struct args valid_args(const struct slot *s, void *ctx)
{
	struct args a = { 0 };

	a.ep = s->kind & RECV ? ep_b : ep_a;
	a.buf = s->kind & RECV ? dst : s->table == T_RMA && (s->kind & FETCH) ? res : src;
	a.len = s->table == T_ATOMIC ? LEN / 8 : LEN;
	a.desc = s->kind & RECV ? NULL : desc_a;
	a.count = 2;
	a.addr = s->kind & RECV ? FI_ADDR_UNSPEC : addr_b;
	a.flags = s->kind & RECV ? 0 : FI_COMPLETION;
	a.raddr = region_addr;
	a.key = key_b;
	a.dt = s->table == T_ATOMIC ? FI_UINT64 : FI_INT8;
	a.op = s->kind & CMPW ? FI_CSWAP : FI_SUM;
	a.unit = s->table == T_ATOMIC ? 8 : 1;
	a.ctx = ctx;
	return a;
}

/* Fills the buffers with a fresh pattern. */
static void refill(int seed)
{
	size_t i;

	for (i = 0; i < REGION; i++) {
		src[i] = pat(i, seed);
		dst[i] = 0;
		res[i] = 0xee;
		region[i] = pat(i, seed + 101);
	}
	memcpy(cmp, region, REGION);	/* compare atomics: equal, so the swap happens */
}

enum expect { REFUSED, ERROR_COMPLETION, ACCEPTED };

struct misuse {
	const char *name;
	enum expect expect;
	int err;	/* REFUSED: the return value's negation */
	/* Applies to the slot? Bends the args. */
	int (*apply)(const struct slot *, struct args *);
};

/* Calls `s` correctly (or bent by an accepted misuse `m`) and checks the bytes it moved and
 * the completions it gave. */
static void valid_call(const struct slot *s, int seed, const char *after, const struct misuse *m)
{
	static int ctx;
	struct args a = valid_args(s, &ctx);
	size_t moved;
	uint64_t before[LEN / 8], operand[LEN / 8];
	struct comp c;
	double end;
	size_t i;
	ssize_t r;

	if (m)
		m->apply(s, &a);
	moved = a.len ? LEN : 0;
	refill(seed);
	memcpy(before, region, sizeof before);
	memcpy(operand, src, sizeof operand);
	if (s->table <= T_TAGGED && !(s->kind & RECV)) {
		/* The receive is posted first so that the message is matched at once. */
		r = s->table == T_TAGGED ? fi_trecv(ep_b, dst, REGION, NULL, FI_ADDR_UNSPEC, TAG, 0, &a)
					 : fi_recv(ep_b, dst, REGION, NULL, FI_ADDR_UNSPEC, &a);
		CHECK(r == 0, "recv: %zd", r);
	}
	do {
		r = s->call(&a);
		if (r == -FI_EAGAIN) {
			poll_cq(0);
			poll_cq(1);
		}
	} while (r == -FI_EAGAIN);
	CHECK(r == 0, "%s.%s after %s: %zd (%s)", table_name[s->table], s->name, after, r,
	      fi_strerror(-r));
	if (s->table <= T_TAGGED && (s->kind & RECV)) {
		r = s->table == T_TAGGED ? fi_tsend(ep_a, src, LEN, desc_a, addr_b, TAG, &a)
					 : fi_send(ep_a, src, LEN, desc_a, addr_b, &a);
		CHECK(r == 0, "send: %zd", r);
	}
	/* The initiator's completion (none for inject). */
	if (!(s->kind & INJ)) {
		c = take(s->kind & RECV ? 1 : 0, after);
		CHECK(c.err == 0 && c.ctx == &ctx, "%s.%s after %s: completion err %d ctx %p",
		      table_name[s->table], s->name, after, c.err, c.ctx);
	}
	if (s->table <= T_TAGGED) {
		c = take(s->kind & RECV ? 0 : 1, after);	/* the other side */
		CHECK(c.err == 0, "%s.%s after %s: peer completion err %d", table_name[s->table],
		      s->name, after, c.err);
		if (!(s->kind & RECV)) {
			CHECK(c.len == moved, "received %llu bytes", (unsigned long long)c.len);
			if (s->kind & DATA)
				CHECK((c.flags & FI_REMOTE_CQ_DATA) && c.data == 0xda7a, "cq data");
			if (s->table == T_TAGGED)
				CHECK(c.tag == TAG, "tag");
		}
		for (i = 0; i < moved; i++)
			CHECK(dst[i] == pat(i, seed), "%s.%s after %s: byte %zu", table_name[s->table],
			      s->name, after, i);
		return;
	}
	if (s->kind & DATA) {
		c = take(1, after);
		CHECK(c.err == 0 && (c.flags & FI_REMOTE_CQ_DATA) && c.data == 0xda7a,
		      "%s.%s: remote CQ data", table_name[s->table], s->name);
	}
	/* RMA and atomics: wait until the target region shows the result (an inject has no
	 * completion to say it landed). */
	end = now() + 10;
	for (;;) {
		int done = 1;

		for (i = 0; i < moved / 8 && done; i++) {
			uint64_t got, want;

			if (s->table == T_RMA && (s->kind & FETCH)) {
				memcpy(&got, res + 8 * i, 8);
				memcpy(&want, region + 8 * i, 8);
			} else if (s->table == T_RMA) {
				memcpy(&got, region + 8 * i, 8);
				want = operand[i];
			} else {
				memcpy(&got, region + 8 * i, 8);
				want = s->kind & CMPW ? operand[i] : before[i] + operand[i];
				if (s->kind & FETCH) {
					uint64_t old;

					memcpy(&old, res + 8 * i, 8);
					done = done && old == before[i];
				}
			}
			done = done && got == want;
		}
		if (done)
			break;
		CHECK(now() < end, "%s.%s after %s: data not as expected", table_name[s->table],
		      s->name, after);
		poll_cq(0);
		poll_cq(1);
	}
	quiet(after);
}

/* ---- the misuses ---- */


static int m_not_enabled(const struct slot *s, struct args *a)
{
	(void)s;
	a->ep = ep_idle;
	return 1;
}
static int m_unknown_addr(const struct slot *s, struct args *a)
{
	if (s->kind & RECV)
		return 0;	/* a source address filters only with FI_DIRECTED_RECV */
	a->addr = 4242;
	return 1;
}
static int m_null_buf(const struct slot *s, struct args *a)
{
	if (s->kind & (VEC | MSG))
		a->null_iov = 0;
	a->buf = NULL;	/* with a non-zero length (the iovecs' bases when VEC) */
	return 1;
}
static int m_null_iov(const struct slot *s, struct args *a)
{
	if (!(s->kind & VEC))
		return 0;
	a->null_iov = 1;
	return 1;
}
static int m_null_msg(const struct slot *s, struct args *a)
{
	if (!(s->kind & MSG))
		return 0;
	a->null_msg = 1;
	return 1;
}
static int m_iov_over_limit(const struct slot *s, struct args *a)
{
	if (!(s->kind & VEC))
		return 0;
	a->count = (s->kind & RECV ? info->rx_attr->iov_limit : info->tx_attr->iov_limit) + 1;
	if (a->count > 16)
		return 0;
	return 1;
}
static int m_bad_flags(const struct slot *s, struct args *a)
{
	if (!(s->kind & MSG))
		return 0;
	a->flags |= FI_REMOTE_READ;	/* an access bit, not an operation flag */
	return 1;
}
static int m_inject_too_big(const struct slot *s, struct args *a)
{
	if (!(s->kind & (INJ | MSG)) || (s->kind & (RECV | FETCH)))
		return 0;
	if (s->kind & MSG)
		a->flags |= FI_INJECT;
	a->len = info->tx_attr->inject_size + 1;
	if (s->table == T_ATOMIC)
		a->len = info->tx_attr->inject_size / 8 + 1;
	return a->len * (s->table == T_ATOMIC ? 8 : 1) <= REGION;
}
static int m_too_long(const struct slot *s, struct args *a)
{
	if (info->ep_attr->max_msg_size >= SIZE_MAX / 2 || s->table == T_ATOMIC || (s->kind & INJ))
		return 0;
	a->len = info->ep_attr->max_msg_size + 1;
	return 1;
}
static int m_closed_key(const struct slot *s, struct args *a)
{
	if (s->table < T_RMA)
		return 0;
	a->key = closed_key;
	return 1;
}
static int m_past_the_end(const struct slot *s, struct args *a)
{
	if (s->table < T_RMA)
		return 0;
	a->raddr = region_addr + REGION - 8;	/* the last 8 bytes in, the rest out */
	return 1;
}
static int m_bad_datatype(const struct slot *s, struct args *a)
{
	if (s->table != T_ATOMIC)
		return 0;
	a->dt = (enum fi_datatype)1000;
	return 1;
}
static int m_bad_op(const struct slot *s, struct args *a)
{
	if (s->table != T_ATOMIC)
		return 0;
	a->op = (enum fi_op)1000;
	return 1;
}
static int m_foreign_desc(const struct slot *s, struct args *a)
{
	if (s->kind & INJ)
		return 0;
	/* Not a descriptor of this domain (an address nothing is mapped at): the providers here
	 * need no local registration, so it must be ignored, never dereferenced. */
	a->desc = (void *)(uintptr_t)0x10;
	return 1;
}
static int m_zero_length(const struct slot *s, struct args *a)
{
	if (s->table == T_ATOMIC || (s->kind & (RECV | FETCH)))
		return 0;
	a->buf = NULL;
	a->len = 0;
	a->count = 0;
	return 1;
}

static const struct misuse misuses[] = {
	{ "endpoint not enabled", REFUSED, FI_EOPBADSTATE, m_not_enabled },
	{ "unknown fi_addr_t", REFUSED, FI_EINVAL, m_unknown_addr },
	{ "NULL buffer with a length", REFUSED, FI_EINVAL, m_null_buf },
	{ "NULL iovec array", REFUSED, FI_EINVAL, m_null_iov },
	{ "NULL message", REFUSED, FI_EINVAL, m_null_msg },
	{ "iov count over iov_limit", REFUSED, FI_EINVAL, m_iov_over_limit },
	{ "flags that are not operation flags", REFUSED, FI_EBADFLAGS, m_bad_flags },
	{ "inject over inject_size", REFUSED, FI_EMSGSIZE, m_inject_too_big },
	{ "length over max_msg_size", REFUSED, FI_EINVAL, m_too_long },
	{ "unknown datatype", REFUSED, FI_EOPNOTSUPP, m_bad_datatype },
	{ "unknown atomic op", REFUSED, FI_EOPNOTSUPP, m_bad_op },
	{ "key of a closed MR", ERROR_COMPLETION, 0, m_closed_key },
	{ "overlapping the region's end", ERROR_COMPLETION, 0, m_past_the_end },
	{ "descriptor of no MR", ACCEPTED, 0, m_foreign_desc },
	{ "zero length, NULL buffer", ACCEPTED, 0, m_zero_length },
};
#define NMISUSES (sizeof misuses / sizeof misuses[0])


static void try_misuse(const struct slot *s, const struct misuse *m, int seed)
{
	static int ctx;
	struct args a = valid_args(s, &ctx);
	char what[160];
	struct comp c;
	ssize_t r;

	if (!m->apply(s, &a))
		return;
	if (m->expect == ACCEPTED) {
		valid_call(s, seed, m->name, m);
		return;
	}
	snprintf(what, sizeof what, "%s.%s with %s", table_name[s->table], s->name, m->name);
	refill(seed);
	r = s->call(&a);
	if (m->expect == REFUSED) {
		CHECK(r == -m->err, "%s: returned %zd (%s), expected -%s", what, r, fi_strerror(-r),
		      fi_strerror(m->err));
		quiet(what);
		return;
	}
	/* ERROR_COMPLETION: accepted, refused by the target, reported to the initiator, and not
	 * a byte of the region (nor of the result buffer) changed. */
	CHECK(r == 0, "%s: returned %zd (%s)", what, r, fi_strerror(-r));
	c = take(0, what);
	/* An inject has no context of its own: its error entry carries NULL. */
	CHECK(c.err != 0 && c.ctx == (s->kind & INJ ? NULL : (void *)&ctx),
	      "%s: completion err %d ctx %p", what, c.err, c.ctx);
	{
		uint8_t want[REGION];
		size_t i;

		for (i = 0; i < REGION; i++)
			want[i] = pat(i, seed + 101);
		CHECK(memcmp(region, want, REGION) == 0, "%s: the target region changed", what);
		for (i = 0; i < REGION; i++)
			CHECK(res[i] == 0xee, "%s: the result buffer changed", what);
	}
	quiet(what);
}

/* ---- set-up ---- */

static struct fid_ep *open_ep(struct fid_cq *cq, struct fid_av *av, int enable)
{
	struct fid_ep *ep;

	CHECK(fi_endpoint(domain, info, &ep, NULL) == 0, "fi_endpoint");
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) == 0, "bind cq");
	CHECK(fi_ep_bind(ep, &av->fid, 0) == 0, "bind av");
	if (enable)
		CHECK(fi_enable(ep) == 0, "fi_enable");
	return ep;
}

static fi_addr_t insert(struct fid_av *av, struct fid_ep *ep)
{
	char name[256];
	size_t len = sizeof name;
	fi_addr_t a;

	CHECK(fi_getname(&ep->fid, name, &len) == 0, "fi_getname");
	CHECK(fi_av_insert(av, name, 1, &a, 0, NULL) == 1, "fi_av_insert");
	return a;
}

static void setup(const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .size = 256 };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	uint8_t *a_bufs;
	int ret;

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov);
	ret = fi_getinfo(FI_VERSION(1, 21), NULL, NULL, 0, hints, &info);
	CHECK(ret == 0, "fi_getinfo(%s): %d", prov, ret);
	fi_freeinfo(hints);
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL) == 0, "fi_fabric");
	CHECK(fi_domain(fabric, info, &domain, NULL) == 0, "fi_domain");
	CHECK(fi_cq_open(domain, &cq_attr, &cq_a, NULL) == 0, "cq");
	CHECK(fi_cq_open(domain, &cq_attr, &cq_b, NULL) == 0, "cq");
	CHECK(fi_av_open(domain, &av_attr, &av_a, NULL) == 0, "av");
	CHECK(fi_av_open(domain, &av_attr, &av_b, NULL) == 0, "av");
	ep_a = open_ep(cq_a, av_a, 1);
	ep_b = open_ep(cq_b, av_b, 1);
	ep_idle = open_ep(cq_a, av_a, 0);
	addr_b = insert(av_a, ep_b);
	addr_a = insert(av_b, ep_a);

	/* A's source, result and compare buffers as one registration; B's receive buffer. */
	a_bufs = aligned_alloc(64, 3 * REGION);
	src = a_bufs;
	res = a_bufs + REGION;
	cmp = a_bufs + 2 * REGION;
	dst = aligned_alloc(64, REGION);
	region = aligned_alloc(64, REGION);
	CHECK(a_bufs && dst && region, "alloc");
	CHECK(fi_mr_reg(domain, a_bufs, 3 * REGION, FI_SEND | FI_RECV | FI_READ | FI_WRITE, 0, 1, 0,
			&mr_a, NULL) == 0, "fi_mr_reg");
	desc_a = fi_mr_desc(mr_a);
	CHECK(fi_mr_reg(domain, region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 2, 0, &mr_b,
			NULL) == 0, "fi_mr_reg");
	key_b = fi_mr_key(mr_b);
	region_addr = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? (uintptr_t)region : 0;
	{
		/* A key that was valid once. */
		struct fid_mr *gone;

		CHECK(fi_mr_reg(domain, dst, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 3, 0, &gone,
				NULL) == 0, "fi_mr_reg");
		closed_key = fi_mr_key(gone);
		CHECK(fi_close(&gone->fid) == 0, "close mr");
	}
}

static void teardown(void)
{
	CHECK(fi_close(&ep_idle->fid) == 0, "close");
	CHECK(fi_close(&ep_a->fid) == 0, "close");
	CHECK(fi_close(&ep_b->fid) == 0, "close");
	CHECK(fi_close(&mr_a->fid) == 0, "close");
	CHECK(fi_close(&mr_b->fid) == 0, "close");
	CHECK(fi_close(&av_a->fid) == 0, "close");
	CHECK(fi_close(&av_b->fid) == 0, "close");
	CHECK(fi_close(&cq_a->fid) == 0, "close");
	CHECK(fi_close(&cq_b->fid) == 0, "close");
	CHECK(fi_close(&domain->fid) == 0, "close");
	CHECK(fi_close(&fabric->fid) == 0, "close");
	fi_freeinfo(info);
	free(src);
	free(dst);
	free(region);
}

/* The atomic table's query slots: a real op × datatype is valid, made-up ones are not. */
static void query(void)
{
	size_t count = 0;

	CHECK(fi_atomicvalid(ep_a, FI_UINT64, FI_SUM, &count) == 0 && count > 0, "atomicvalid");
	CHECK(fi_fetch_atomicvalid(ep_a, FI_UINT64, FI_SUM, &count) == 0 && count > 0, "fetch");
	CHECK(fi_compare_atomicvalid(ep_a, FI_UINT64, FI_CSWAP, &count) == 0 && count > 0, "cmp");
	CHECK(fi_atomicvalid(ep_a, (enum fi_datatype)1000, FI_SUM, &count) < 0, "bad datatype");
	CHECK(fi_fetch_atomicvalid(ep_a, FI_UINT64, (enum fi_op)1000, &count) < 0, "bad op");
	CHECK(fi_compare_atomicvalid(ep_a, FI_UINT64, FI_SUM, &count) < 0, "SUM is not compare");
	CHECK(fi_atomicvalid(ep_a, FI_UINT64, FI_SUM, NULL) == -FI_EINVAL, "NULL count");
}

int main(int argc, char **argv)
{
	size_t t, i, j;
	int seed = 1, refused = 0, errors = 0, accepted = 0;

	CHECK(argc == 2, "usage: misuse <provider>");
	CHECK(FI_MAJOR(fi_version()) == 2, "not our library (fi_version %#x)", fi_version());
	/* The table lists every slot of each ops struct. */
	{
		const size_t want[] = { SLOTS(fi_ops_msg), SLOTS(fi_ops_tagged), SLOTS(fi_ops_rma),
					SLOTS(fi_ops_atomic) - 3 };

		for (t = 0; t < 4; t++) {
			size_t n = 0;

			for (i = 0; i < NSLOTS; i++)
				n += slots[i].table == t;
			CHECK(n == want[t], "%s has %zu posting slots, the table lists %zu",
			      table_name[t], want[t], n);
		}
	}
	setup(argv[1]);
	query();
	for (i = 0; i < NSLOTS; i++) {
		valid_call(&slots[i], seed++, "nothing", NULL);
		for (j = 0; j < NMISUSES; j++) {
			struct args probe = valid_args(&slots[i], NULL);

			if (!misuses[j].apply(&slots[i], &probe))
				continue;
			try_misuse(&slots[i], &misuses[j], seed++);
			valid_call(&slots[i], seed++, misuses[j].name, NULL);
			refused += misuses[j].expect == REFUSED;
			errors += misuses[j].expect == ERROR_COMPLETION;
			accepted += misuses[j].expect == ACCEPTED;
		}
	}
	teardown();
	printf("misuse: %s: %zu slots, %d calls refused, %d error completions, %d accepted as "
	       "documented; each slot worked after each\n",
	       argv[1], NSLOTS, refused, errors, accepted);
	return 0;
}
