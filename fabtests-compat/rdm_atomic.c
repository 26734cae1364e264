/*
 * rdm_atomic: functional test of atomics over an RDM endpoint (fi_atomic(3)), in the manner of
 * upstream fabtests' fi_rdm_atomic (common options in common.h; -S is ignored). For every
 * operation and datatype the provider calls valid (fi_atomicvalid, fi_fetch_atomicvalid,
 * fi_compare_atomicvalid) the client sets four elements of the server's region with a
 * delivery-complete write, applies the atomic, checks the fetched old values, reads the
 * elements back and compares them with the result computed here by fi_atomic(3)'s
 * definitions. An atomic with a wrong key must fail with an error completion.
 */
#include "common.h"

#define N 4

static int ctx;
static const char *const op_names[] = {
	"MIN", "MAX", "SUM", "PROD", "LOR", "LAND", "BOR", "BAND", "LXOR", "BXOR",
	"ATOMIC_READ", "ATOMIC_WRITE", "CSWAP", "CSWAP_NE", "CSWAP_LE", "CSWAP_LT",
	"CSWAP_GE", "CSWAP_GT", "MSWAP",
};
static const char *const type_names[] = {
	"INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64", "FLOAT",
	"DOUBLE",
};
static const size_t type_sizes[] = { 1, 1, 2, 2, 4, 4, 8, 8, 4, 8 };

/* Target values, operands and compare values: compare equals, exceeds, is below and equals
 * the target, so every CSWAP variant both swaps and keeps. */
static const int init_v[N] = { 5, 2, 9, 0 }, operand_v[N] = { 3, 7, 4, 1 },
		 compare_v[N] = { 5, 3, 1, 0 };

/* t = op(t, o, c) by fi_atomic(3); returns 0, or -1 for an operation undefined on floats. */
#define APPLY_COMMON(T)                                                                \
	case FI_MIN: if (o < *t) *t = o; break;                                        \
	case FI_MAX: if (o > *t) *t = o; break;                                        \
	case FI_SUM: *t = (T)(*t + o); break;                                          \
	case FI_PROD: *t = (T)(*t * o); break;                                         \
	case FI_LOR: *t = (T)(o || *t); break;                                         \
	case FI_LAND: *t = (T)(o && *t); break;                                        \
	case FI_LXOR: *t = (T)((o && !*t) || (!o && *t)); break;                       \
	case FI_ATOMIC_READ: break;                                                    \
	case FI_ATOMIC_WRITE: *t = o; break;                                           \
	case FI_CSWAP: if (c == *t) *t = o; break;                                     \
	case FI_CSWAP_NE: if (c != *t) *t = o; break;                                  \
	case FI_CSWAP_LE: if (c <= *t) *t = o; break;                                  \
	case FI_CSWAP_LT: if (c < *t) *t = o; break;                                   \
	case FI_CSWAP_GE: if (c >= *t) *t = o; break;                                  \
	case FI_CSWAP_GT: if (c > *t) *t = o; break;

#define APPLY_INT(T)                                                                   \
	static int apply_##T(enum fi_op op, T *t, T o, T c)                            \
	{                                                                              \
		switch (op) {                                                          \
		APPLY_COMMON(T)                                                        \
		case FI_BOR: *t = (T)(*t | o); break;                                  \
		case FI_BAND: *t = (T)(*t & o); break;                                 \
		case FI_BXOR: *t = (T)(*t ^ o); break;                                 \
		case FI_MSWAP: *t = (T)((o & c) | (*t & ~c)); break;                   \
		default: return -1;                                                    \
		}                                                                      \
		return 0;                                                              \
	}
#define APPLY_FLOAT(T)                                                                 \
	static int apply_##T(enum fi_op op, T *t, T o, T c)                            \
	{                                                                              \
		switch (op) {                                                          \
		APPLY_COMMON(T)                                                        \
		default: return -1;                                                    \
		}                                                                      \
		return 0;                                                              \
	}
APPLY_INT(int8_t)
APPLY_INT(uint8_t)
APPLY_INT(int16_t)
APPLY_INT(uint16_t)
APPLY_INT(int32_t)
APPLY_INT(uint32_t)
APPLY_INT(int64_t)
APPLY_INT(uint64_t)
APPLY_FLOAT(float)
APPLY_FLOAT(double)

/* Element i of `p`, of datatype dt, set from an int / updated by op. */
static void set(enum fi_datatype dt, void *p, int i, int v)
{
	switch (dt) {
	case FI_INT8: ((int8_t *)p)[i] = v; break;
	case FI_UINT8: ((uint8_t *)p)[i] = v; break;
	case FI_INT16: ((int16_t *)p)[i] = v; break;
	case FI_UINT16: ((uint16_t *)p)[i] = v; break;
	case FI_INT32: ((int32_t *)p)[i] = v; break;
	case FI_UINT32: ((uint32_t *)p)[i] = v; break;
	case FI_INT64: ((int64_t *)p)[i] = v; break;
	case FI_UINT64: ((uint64_t *)p)[i] = v; break;
	case FI_FLOAT: ((float *)p)[i] = v; break;
	case FI_DOUBLE: ((double *)p)[i] = v; break;
	default: FT_DIE("datatype %d", dt);
	}
}

static int apply(enum fi_datatype dt, enum fi_op op, void *t, const void *o, const void *c,
		 int i)
{
#define CASE(D, T) \
	case D: return apply_##T(op, &((T *)t)[i], ((const T *)o)[i], ((const T *)c)[i]);
	switch (dt) {
	CASE(FI_INT8, int8_t)
	CASE(FI_UINT8, uint8_t)
	CASE(FI_INT16, int16_t)
	CASE(FI_UINT16, uint16_t)
	CASE(FI_INT32, int32_t)
	CASE(FI_UINT32, uint32_t)
	CASE(FI_INT64, int64_t)
	CASE(FI_UINT64, uint64_t)
	CASE(FI_FLOAT, float)
	CASE(FI_DOUBLE, double)
	default: return -1;
	}
#undef CASE
}

enum kind { PLAIN, FETCH, COMPARE };

/* Runs one operation of one kind on N elements; returns 1 if run, 0 if not valid. */
static int one(enum kind kind, enum fi_op op, enum fi_datatype dt)
{
	size_t count = 0, sz = type_sizes[dt], n;
	uint8_t *operand = ft_buf, *compare = ft_buf + 64, *result = ft_buf + 128,
		*back = ft_buf + 192, *init = ft_buf + 256, expect[64];
	char what[96];
	int ret;

	ret = kind == PLAIN   ? fi_atomicvalid(ft_ep, dt, op, &count)
	      : kind == FETCH ? fi_fetch_atomicvalid(ft_ep, dt, op, &count)
			      : fi_compare_atomicvalid(ft_ep, dt, op, &count);
	if (ret || count == 0)
		return 0;
	n = count < N ? count : N;
	snprintf(what, sizeof(what), "%s %s %s", kind == PLAIN ? "fi_atomic" :
		 kind == FETCH ? "fi_fetch_atomic" : "fi_compare_atomic", op_names[op],
		 type_names[dt]);
	for (size_t i = 0; i < n; i++) {
		set(dt, init, i, init_v[i]);
		set(dt, operand, i, operand_v[i]);
		set(dt, compare, i, compare_v[i]);
	}
	memcpy(expect, init, n * sz);
	for (size_t i = 0; i < n; i++)
		if (apply(dt, op, expect, operand, compare, i))
			FT_DIE("%s: valid by the provider, undefined by fi_atomic(3)", what);

	/* The target's elements, placed before the atomic (delivery complete). */
	{
		struct iovec v = { init, n * sz };
		struct fi_rma_iov r = { ft_peer_addr, n * sz, ft_peer_key };
		struct fi_msg_rma m = { .msg_iov = &v, .desc = &ft_desc, .iov_count = 1,
					.addr = ft_peer, .rma_iov = &r, .rma_iov_count = 1,
					.context = &ctx };

		FT_POST(fi_writemsg(ft_ep, &m, FI_DELIVERY_COMPLETE));
		ft_expect(&ctx, 0, "setting the target");
	}
	memset(result, 0, 64);
	if (kind == PLAIN) {
		struct fi_ioc ioc = { operand, n };
		struct fi_rma_ioc rioc = { ft_peer_addr, n, ft_peer_key };
		struct fi_msg_atomic m = { .msg_iov = &ioc, .desc = &ft_desc, .iov_count = 1,
					   .addr = ft_peer, .rma_iov = &rioc, .rma_iov_count = 1,
					   .datatype = dt, .op = op, .context = &ctx };

		FT_POST(fi_atomicmsg(ft_ep, &m, FI_DELIVERY_COMPLETE));
	} else if (kind == FETCH) {
		FT_POST(fi_fetch_atomic(ft_ep, operand, n, ft_desc, result, ft_desc, ft_peer,
					ft_peer_addr, ft_peer_key, dt, op, &ctx));
	} else {
		FT_POST(fi_compare_atomic(ft_ep, operand, n, ft_desc, compare, ft_desc, result,
					  ft_desc, ft_peer, ft_peer_addr, ft_peer_key, dt, op, &ctx));
	}
	ft_expect(&ctx, 0, what);
	if (kind != PLAIN && memcmp(result, init, n * sz))
		FT_DIE("%s: fetched values are not the target's old ones", what);
	memset(back, 0, 64);
	FT_POST(fi_read(ft_ep, back, n * sz, ft_desc, ft_peer, ft_peer_addr, ft_peer_key, &ctx));
	ft_expect(&ctx, 0, "reading the target back");
	if (memcmp(back, expect, n * sz))
		FT_DIE("%s: target holds the wrong result", what);
	return 1;
}

static void client(void)
{
	int ran[3] = { 0 }, skipped = 0;
	size_t count;

	for (int kind = PLAIN; kind <= COMPARE; kind++)
		for (int op = FI_MIN; op <= FI_MSWAP; op++)
			for (int dt = FI_INT8; dt <= FI_DOUBLE; dt++) {
				if (one(kind, op, dt))
					ran[kind]++;
				else
					skipped++;
			}
	if (!ran[PLAIN] || !ran[FETCH] || !ran[COMPARE])
		FT_DIE("the provider offers FI_ATOMIC but no valid operation of some kind "
		       "(%d, %d, %d)", ran[PLAIN], ran[FETCH], ran[COMPARE]);
	printf("ok: %d fi_atomic, %d fi_fetch_atomic, %d fi_compare_atomic operation/datatype "
	       "pairs, results and fetched values checked (%d not valid here)\n", ran[PLAIN],
	       ran[FETCH], ran[COMPARE], skipped);

	/* A wrong key: an error completion, and the target keeps its value. */
	if (fi_atomicvalid(ft_ep, FI_UINT64, FI_SUM, &count) == 0 && count) {
		uint64_t *operand = (uint64_t *)ft_buf, *back = (uint64_t *)(ft_buf + 192);

		*operand = 1;
		FT_POST(fi_atomic(ft_ep, operand, 1, ft_desc, ft_peer, ft_peer_addr,
				  ft_peer_key ^ 0x77000, FI_UINT64, FI_SUM, &ctx));
		ft_expect_error(&ctx, "fi_atomic with a wrong key");
		FT_POST(fi_fetch_atomic(ft_ep, operand, 1, ft_desc, back, ft_desc, ft_peer,
					ft_peer_addr + ft_buf_size + FT_CTRL_SIZE, ft_peer_key,
					FI_UINT64, FI_SUM, &ctx));
		ft_expect_error(&ctx, "fi_fetch_atomic past the region's end");
		FT_POST(fi_read(ft_ep, back, 8, ft_desc, ft_peer, ft_peer_addr, ft_peer_key,
				&ctx));
		ft_expect(&ctx, 0, "reading the target back");
		printf("ok: atomics with a wrong key or past the region's end: error completions\n");
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: rdm_atomic [-p prov] [-d domain] [-s src] [-e rdm] [-B port] [-P port] "
			"[-E] [server]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	ft_prog = "rdm_atomic";
	ft_parse(argc, argv, "", NULL, usage);
	ft_oob_connect();
	ft_open(FI_MSG | FI_RMA | FI_ATOMIC, 4096);
	ft_banner("atomic functional test");
	ft_exchange();
	if (ft_client())
		client();
	ft_close();
	if (ft_client())
		printf("rdm_atomic: all steps passed\n");
	return 0;
}
