/*
 * fi_atomic(3) on FI_LONG_DOUBLE and FI_LONG_DOUBLE_COMPLEX: Rust has no x87 extended type, so
 * these few loops are C. Values are stored as the C ABI stores them (16 bytes each part).
 * Op numbers are enum fi_op values. Part of the fabric project.
 */
#include <stddef.h>
#include <string.h>

enum { OP_MIN, OP_MAX, OP_SUM, OP_PROD, OP_LOR, OP_LAND, OP_BOR, OP_BAND, OP_LXOR, OP_BXOR, OP_READ, OP_WRITE,
       OP_CSWAP, OP_CSWAP_NE, OP_CSWAP_LE, OP_CSWAP_LT, OP_CSWAP_GE, OP_CSWAP_GT, OP_MSWAP };

typedef long double ld;

static ld get(const unsigned char *p, size_t i)
{
	ld v;

	memcpy(&v, p + i * sizeof(ld), sizeof(ld));
	return v;
}

static void put(unsigned char *p, size_t i, ld v)
{
	memcpy(p + i * sizeof(ld), &v, sizeof(ld));
}

/* Returns 0, or -1 for an op that does not apply. `cmp` may be NULL for non-compare ops. */
int fabric_long_double_op(int op, int complex, unsigned char *dst, const unsigned char *src,
			  const unsigned char *cmp, size_t bytes)
{
	size_t n = bytes / sizeof(ld), i;

	if (!complex) {
		for (i = 0; i < n; i++) {
			ld d = get(dst, i), s = get(src, i), c = cmp ? get(cmp, i) : 0;

			switch (op) {
			case OP_MIN: if (d > s) d = s; break;
			case OP_MAX: if (d < s) d = s; break;
			case OP_SUM: d += s; break;
			case OP_PROD: d *= s; break;
			case OP_LOR: d = (d != 0) || (s != 0); break;
			case OP_LAND: d = (d != 0) && (s != 0); break;
			case OP_LXOR: d = (d != 0) != (s != 0); break;
			case OP_WRITE: d = s; break;
			case OP_CSWAP: if (c == d) d = s; break;
			case OP_CSWAP_NE: if (c != d) d = s; break;
			case OP_CSWAP_LE: if (c <= d) d = s; break;
			case OP_CSWAP_LT: if (c < d) d = s; break;
			case OP_CSWAP_GE: if (c >= d) d = s; break;
			case OP_CSWAP_GT: if (c > d) d = s; break;
			default: return -1;
			}
			put(dst, i, d);
		}
		return 0;
	}
	for (i = 0; i + 1 < n; i += 2) {
		ld dr = get(dst, i), di = get(dst, i + 1), sr = get(src, i), si = get(src, i + 1);
		ld cr = cmp ? get(cmp, i) : 0, ci = cmp ? get(cmp, i + 1) : 0;
		int dz = dr != 0 || di != 0, sz = sr != 0 || si != 0;

		switch (op) {
		case OP_SUM: dr += sr; di += si; break;
		case OP_PROD: { ld r = dr * sr - di * si; di = dr * si + di * sr; dr = r; break; }
		case OP_LOR: dr = dz || sz; di = 0; break;
		case OP_LAND: dr = dz && sz; di = 0; break;
		case OP_LXOR: dr = dz != sz; di = 0; break;
		case OP_WRITE: dr = sr; di = si; break;
		case OP_CSWAP: if (cr == dr && ci == di) { dr = sr; di = si; } break;
		case OP_CSWAP_NE: if (cr != dr || ci != di) { dr = sr; di = si; } break;
		default: return -1;
		}
		put(dst, i, dr);
		put(dst, i + 1, di);
	}
	return 0;
}

double fabric_long_double_to_double(const unsigned char *p)
{
	return (double)get(p, 0);
}

void fabric_long_double_from_double(double v, unsigned char *p)
{
	memset(p, 0, sizeof(ld));
	put(p, 0, (ld)v);
}
