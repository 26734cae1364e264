//! Atomic datatypes and operations (fi_atomic(3)), applied to local memory by whichever side
//! executes an operation (the target, for shared-memory and emulated atomics).
//!
//! Which op applies to which datatype: MIN, MAX and the ordered compare-swaps to real numbers;
//! SUM, PROD, the logical ops, READ, WRITE, CSWAP and CSWAP_NE to every type; the bitwise ops and
//! MSWAP to integers. `long double` (x87 80-bit, stored in 16 bytes) has no Rust type, so its
//! arithmetic is done by a few lines of C (`c/long_double.c`).

use crate::abi::consts::*;
use crate::core::{Errno, Result};

use super::ep::AtomicKind;

/// Byte size of one element of `datatype`, or None for datatypes this library does not know.
pub fn datatype_size(datatype: u32) -> Option<usize> {
    Some(match datatype {
        FI_INT8 | FI_UINT8 => 1,
        FI_INT16 | FI_UINT16 => 2,
        FI_INT32 | FI_UINT32 | FI_FLOAT => 4,
        FI_INT64 | FI_UINT64 | FI_DOUBLE | FI_FLOAT_COMPLEX => 8,
        FI_DOUBLE_COMPLEX | FI_LONG_DOUBLE | FI_INT128 | FI_UINT128 => 16,
        FI_LONG_DOUBLE_COMPLEX => 32,
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Int,
    Real,
    Complex,
}

fn class(datatype: u32) -> Option<Class> {
    Some(match datatype {
        FI_INT8..=FI_UINT64 | FI_INT128 | FI_UINT128 => Class::Int,
        FI_FLOAT | FI_DOUBLE | FI_LONG_DOUBLE => Class::Real,
        FI_FLOAT_COMPLEX | FI_DOUBLE_COMPLEX | FI_LONG_DOUBLE_COMPLEX => Class::Complex,
        _ => return None,
    })
}

/// Whether `op` on `datatype` exists for calls of `kind` (fi_atomicvalid(3) and friends).
pub fn valid(kind: AtomicKind, datatype: u32, op: u32) -> bool {
    let Some(c) = class(datatype) else {
        return false;
    };
    let all = true;
    let real = c != Class::Complex;
    let int = c == Class::Int;
    match kind {
        AtomicKind::Write | AtomicKind::Fetch => match op {
            FI_MIN | FI_MAX => real,
            FI_SUM | FI_PROD | FI_LOR | FI_LAND | FI_LXOR | FI_ATOMIC_WRITE => all,
            FI_BOR | FI_BAND | FI_BXOR => int,
            FI_ATOMIC_READ => kind == AtomicKind::Fetch,
            _ => false,
        },
        AtomicKind::Compare => match op {
            FI_CSWAP | FI_CSWAP_NE => all,
            FI_CSWAP_LE | FI_CSWAP_LT | FI_CSWAP_GE | FI_CSWAP_GT => real,
            FI_MSWAP => int,
            _ => false,
        },
    }
}

/// Applies `op` element by element to `dst` (the target memory): `src` is the operand (empty
/// for FI_ATOMIC_READ), `cmp` the compare values (compare kind only); the prior values are
/// written to `result` (fetch and compare kinds). All slices hold whole elements of
/// `datatype`; `dst`, `result` and non-empty `src`/`cmp` have the same length.
pub fn apply(
    kind: AtomicKind,
    datatype: u32,
    op: u32,
    dst: &mut [u8],
    src: &[u8],
    cmp: &[u8],
    result: &mut [u8],
) -> Result<()> {
    if !valid(kind, datatype, op) {
        return Err(Errno::OPNOTSUPP);
    }
    let size = datatype_size(datatype).ok_or(Errno::OPNOTSUPP)?;
    let n = dst.len();
    let needs_src = !(kind == AtomicKind::Fetch && op == FI_ATOMIC_READ);
    if !n.is_multiple_of(size)
        || (needs_src && src.len() != n)
        || (kind == AtomicKind::Compare && cmp.len() != n)
        || (kind != AtomicKind::Write && result.len() != n)
    {
        return Err(Errno::INVAL);
    }
    if kind != AtomicKind::Write {
        result.copy_from_slice(dst);
    }
    if kind == AtomicKind::Fetch && op == FI_ATOMIC_READ {
        return Ok(());
    }
    match datatype {
        FI_INT8 => ints::<i8, 1>(op, dst, src, cmp),
        FI_UINT8 => ints::<u8, 1>(op, dst, src, cmp),
        FI_INT16 => ints::<i16, 2>(op, dst, src, cmp),
        FI_UINT16 => ints::<u16, 2>(op, dst, src, cmp),
        FI_INT32 => ints::<i32, 4>(op, dst, src, cmp),
        FI_UINT32 => ints::<u32, 4>(op, dst, src, cmp),
        FI_INT64 => ints::<i64, 8>(op, dst, src, cmp),
        FI_UINT64 => ints::<u64, 8>(op, dst, src, cmp),
        FI_INT128 => ints::<i128, 16>(op, dst, src, cmp),
        FI_UINT128 => ints::<u128, 16>(op, dst, src, cmp),
        FI_FLOAT => reals::<f32, 4>(op, dst, src, cmp),
        FI_DOUBLE => reals::<f64, 8>(op, dst, src, cmp),
        FI_FLOAT_COMPLEX => complexes::<f32, 4>(op, dst, src, cmp),
        FI_DOUBLE_COMPLEX => complexes::<f64, 8>(op, dst, src, cmp),
        FI_LONG_DOUBLE | FI_LONG_DOUBLE_COMPLEX => {
            if !crate::sys::long_double::apply(
                op,
                datatype == FI_LONG_DOUBLE_COMPLEX,
                dst,
                src,
                cmp,
            ) {
                return Err(Errno::OPNOTSUPP);
            }
        }
        _ => return Err(Errno::OPNOTSUPP),
    }
    Ok(())
}

/// Fixed-size element conversions.
trait Elem<const N: usize>: Copy {
    fn from_bytes(b: [u8; N]) -> Self;
    fn to_bytes(self) -> [u8; N];
}

macro_rules! elem {
    ($($t:ty => $n:expr),*) => {$(
        impl Elem<$n> for $t {
            fn from_bytes(b: [u8; $n]) -> Self { <$t>::from_ne_bytes(b) }
            fn to_bytes(self) -> [u8; $n] { self.to_ne_bytes() }
        }
    )*};
}
elem!(i8 => 1, u8 => 1, i16 => 2, u16 => 2, i32 => 4, u32 => 4, i64 => 8, u64 => 8, i128 => 16, u128 => 16, f32 => 4, f64 => 8);

fn get<T: Elem<N>, const N: usize>(b: &[u8], i: usize) -> T {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[i * N..(i + 1) * N]);
    T::from_bytes(a)
}

fn put<T: Elem<N>, const N: usize>(b: &mut [u8], i: usize, v: T) {
    b[i * N..(i + 1) * N].copy_from_slice(&v.to_bytes());
}

trait Int:
    Copy
    + PartialOrd
    + Default
    + core::ops::BitOr<Output = Self>
    + core::ops::BitAnd<Output = Self>
    + core::ops::BitXor<Output = Self>
    + core::ops::Not<Output = Self>
{
    fn wrapping_add(self, o: Self) -> Self;
    fn wrapping_mul(self, o: Self) -> Self;
    fn one() -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            fn wrapping_add(self, o: Self) -> Self { <$t>::wrapping_add(self, o) }
            fn wrapping_mul(self, o: Self) -> Self { <$t>::wrapping_mul(self, o) }
            fn one() -> Self { 1 }
        }
    )*};
}
int!(i8, u8, i16, u16, i32, u32, i64, u64, i128, u128);

fn ints<T: Int + Elem<N>, const N: usize>(op: u32, dst: &mut [u8], src: &[u8], cmp: &[u8]) {
    let zero = T::default();
    let truth = |b: bool| if b { T::one() } else { zero };
    for i in 0..dst.len() / N {
        let d: T = get(dst, i);
        let s: T = get(src, i);
        let c: T = if cmp.is_empty() { zero } else { get(cmp, i) };
        let v = match op {
            FI_MIN => {
                if d > s {
                    s
                } else {
                    d
                }
            }
            FI_MAX => {
                if d < s {
                    s
                } else {
                    d
                }
            }
            FI_SUM => d.wrapping_add(s),
            FI_PROD => d.wrapping_mul(s),
            FI_LOR => truth(d != zero || s != zero),
            FI_LAND => truth(d != zero && s != zero),
            FI_LXOR => truth((d != zero) != (s != zero)),
            FI_BOR => d | s,
            FI_BAND => d & s,
            FI_BXOR => d ^ s,
            FI_ATOMIC_WRITE => s,
            FI_CSWAP => swap_if(c == d, s, d),
            FI_CSWAP_NE => swap_if(c != d, s, d),
            FI_CSWAP_LE => swap_if(c <= d, s, d),
            FI_CSWAP_LT => swap_if(c < d, s, d),
            FI_CSWAP_GE => swap_if(c >= d, s, d),
            FI_CSWAP_GT => swap_if(c > d, s, d),
            FI_MSWAP => (s & c) | (d & !c),
            _ => d,
        };
        put(dst, i, v);
    }
}

fn swap_if<T>(cond: bool, new: T, old: T) -> T {
    if cond { new } else { old }
}

trait Real:
    Copy
    + PartialOrd
    + core::ops::Add<Output = Self>
    + core::ops::Mul<Output = Self>
    + core::ops::Sub<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
}
impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
}
impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
}

fn reals<T: Real + Elem<N>, const N: usize>(op: u32, dst: &mut [u8], src: &[u8], cmp: &[u8]) {
    let truth = |b: bool| if b { T::ONE } else { T::ZERO };
    for i in 0..dst.len() / N {
        let d: T = get(dst, i);
        let s: T = get(src, i);
        let c: T = if cmp.is_empty() { T::ZERO } else { get(cmp, i) };
        let v = match op {
            FI_MIN => swap_if(d > s, s, d),
            FI_MAX => swap_if(d < s, s, d),
            FI_SUM => d + s,
            FI_PROD => d * s,
            FI_LOR => truth(d != T::ZERO || s != T::ZERO),
            FI_LAND => truth(d != T::ZERO && s != T::ZERO),
            FI_LXOR => truth((d != T::ZERO) != (s != T::ZERO)),
            FI_ATOMIC_WRITE => s,
            FI_CSWAP => swap_if(c == d, s, d),
            FI_CSWAP_NE => swap_if(c != d, s, d),
            FI_CSWAP_LE => swap_if(c <= d, s, d),
            FI_CSWAP_LT => swap_if(c < d, s, d),
            FI_CSWAP_GE => swap_if(c >= d, s, d),
            FI_CSWAP_GT => swap_if(c > d, s, d),
            _ => d,
        };
        put(dst, i, v);
    }
}

/// Complex numbers: `N` is the size of one part; an element is (re, im).
fn complexes<T: Real + Elem<N>, const N: usize>(op: u32, dst: &mut [u8], src: &[u8], cmp: &[u8]) {
    let truth = |b: bool| {
        if b {
            (T::ONE, T::ZERO)
        } else {
            (T::ZERO, T::ZERO)
        }
    };
    let nonzero = |(re, im): (T, T)| re != T::ZERO || im != T::ZERO;
    for i in 0..dst.len() / (2 * N) {
        let d: (T, T) = (get(dst, 2 * i), get(dst, 2 * i + 1));
        let s: (T, T) = (get(src, 2 * i), get(src, 2 * i + 1));
        let c: (T, T) = if cmp.is_empty() {
            (T::ZERO, T::ZERO)
        } else {
            (get(cmp, 2 * i), get(cmp, 2 * i + 1))
        };
        let v = match op {
            FI_SUM => (d.0 + s.0, d.1 + s.1),
            FI_PROD => (d.0 * s.0 - d.1 * s.1, d.0 * s.1 + d.1 * s.0),
            FI_LOR => truth(nonzero(d) || nonzero(s)),
            FI_LAND => truth(nonzero(d) && nonzero(s)),
            FI_LXOR => truth(nonzero(d) != nonzero(s)),
            FI_ATOMIC_WRITE => s,
            FI_CSWAP => swap_if(c == d, s, d),
            FI_CSWAP_NE => swap_if(c != d, s, d),
            _ => d,
        };
        put(dst, 2 * i, v.0);
        put(dst, 2 * i + 1, v.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Elem<N>, const N: usize>(v: &[T]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_bytes()).collect()
    }

    fn run<T: Elem<N>, const N: usize>(
        kind: AtomicKind,
        dt: u32,
        op: u32,
        d: &[T],
        s: &[T],
        c: &[T],
    ) -> (Vec<u8>, Vec<u8>) {
        let mut dst = bytes(d);
        let mut res = if kind == AtomicKind::Write {
            vec![]
        } else {
            vec![0; dst.len()]
        };
        apply(kind, dt, op, &mut dst, &bytes(s), &bytes(c), &mut res).unwrap();
        (dst, res)
    }

    #[test]
    fn integer_ops() {
        use AtomicKind::*;
        let d = [5i32, -3, 0, 7];
        let s = [3i32, -4, 0, 7];
        assert_eq!(
            run(Write, FI_INT32, FI_MIN, &d, &s, &[]).0,
            bytes(&[3i32, -4, 0, 7])
        );
        assert_eq!(
            run(Write, FI_INT32, FI_MAX, &d, &s, &[]).0,
            bytes(&[5i32, -3, 0, 7])
        );
        assert_eq!(
            run(Write, FI_INT32, FI_SUM, &d, &s, &[]).0,
            bytes(&[8i32, -7, 0, 14])
        );
        assert_eq!(
            run(Write, FI_INT32, FI_PROD, &d, &s, &[]).0,
            bytes(&[15i32, 12, 0, 49])
        );
        assert_eq!(
            run(Write, FI_INT32, FI_LOR, &d, &s, &[]).0,
            bytes(&[1i32, 1, 0, 1])
        );
        assert_eq!(
            run(Write, FI_INT32, FI_LXOR, &[1i32, 0], &[1, 5], &[]).0,
            bytes(&[0i32, 1])
        );
        assert_eq!(
            run(Write, FI_UINT8, FI_BXOR, &[0xf0u8], &[0xffu8], &[]).0,
            [0x0f]
        );
        let (dst, res) = run(Fetch, FI_UINT64, FI_SUM, &[u64::MAX], &[2u64], &[]);
        assert_eq!((dst, res), (bytes(&[1u64]), bytes(&[u64::MAX])));
        let (dst, res) = run(
            Compare,
            FI_INT64,
            FI_CSWAP,
            &[10i64, 11],
            &[99, 98],
            &[10, 10],
        );
        assert_eq!((dst, res), (bytes(&[99i64, 11]), bytes(&[10i64, 11])));
        let (dst, _) = run(
            Compare,
            FI_UINT16,
            FI_MSWAP,
            &[0xff00u16],
            &[0x0ff0],
            &[0x00ff],
        );
        assert_eq!(dst, bytes(&[0xfff0u16]));
        let (dst, _) = run(Compare, FI_INT8, FI_CSWAP_LT, &[5i8, 5], &[1, 1], &[4, 6]);
        assert_eq!(dst, bytes(&[1i8, 5]));
        let (dst, res) = run(Fetch, FI_UINT128, FI_ATOMIC_READ, &[7u128], &[], &[]);
        assert_eq!((dst, res), (bytes(&[7u128]), bytes(&[7u128])));
    }

    #[test]
    fn float_and_complex_ops() {
        use AtomicKind::*;
        assert_eq!(
            run(Write, FI_DOUBLE, FI_PROD, &[1.5f64], &[2.0], &[]).0,
            bytes(&[3.0f64])
        );
        assert_eq!(
            run(Write, FI_FLOAT, FI_MIN, &[1.5f32], &[-2.0], &[]).0,
            bytes(&[-2.0f32])
        );
        // (1+2i)(3+4i) = -5+10i
        assert_eq!(
            run(
                Write,
                FI_FLOAT_COMPLEX,
                FI_PROD,
                &[1.0f32, 2.0],
                &[3.0, 4.0],
                &[]
            )
            .0,
            bytes(&[-5.0f32, 10.0])
        );
        let (dst, _) = run(
            Compare,
            FI_DOUBLE_COMPLEX,
            FI_CSWAP,
            &[1.0f64, 2.0],
            &[9.0, 9.0],
            &[1.0, 2.0],
        );
        assert_eq!(dst, bytes(&[9.0f64, 9.0]));
    }

    #[test]
    fn validity_table() {
        use AtomicKind::*;
        assert!(valid(Write, FI_INT8, FI_BAND));
        assert!(!valid(Write, FI_FLOAT, FI_BAND));
        assert!(!valid(Write, FI_FLOAT_COMPLEX, FI_MIN));
        assert!(valid(Write, FI_LONG_DOUBLE_COMPLEX, FI_SUM));
        assert!(!valid(Write, FI_INT32, FI_ATOMIC_READ));
        assert!(valid(Fetch, FI_INT32, FI_ATOMIC_READ));
        assert!(!valid(Fetch, FI_INT32, FI_CSWAP));
        assert!(valid(Compare, FI_DOUBLE_COMPLEX, FI_CSWAP_NE));
        assert!(!valid(Compare, FI_DOUBLE_COMPLEX, FI_CSWAP_LE));
        assert!(!valid(Compare, FI_DOUBLE, FI_MSWAP));
        assert!(!valid(Write, FI_FLOAT16, FI_SUM));
        let mut d = [0u8; 8];
        assert_eq!(
            apply(Write, FI_UINT64, FI_SUM, &mut d, &[0; 4], &[], &mut []),
            Err(Errno::INVAL)
        );
        assert_eq!(
            apply(Write, 99, FI_SUM, &mut d, &[0; 8], &[], &mut []),
            Err(Errno::OPNOTSUPP)
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "long double arithmetic is C code (sys/c)")]
    fn long_double_through_c() {
        use AtomicKind::*;
        // 80-bit extended values in 16-byte slots: 1.5 + 2.25 = 3.75, read back as f64 by C.
        let a = crate::sys::long_double::from_f64(1.5);
        let b = crate::sys::long_double::from_f64(2.25);
        let mut d = a.to_vec();
        apply(Write, FI_LONG_DOUBLE, FI_SUM, &mut d, &b, &[], &mut []).unwrap();
        assert_eq!(crate::sys::long_double::to_f64(&d), 3.75);
        // CSWAP_GT swaps when cmp > dst: 2.25 > 3.75 is false, 5 > 3.75 is true.
        let mut res = vec![0; 16];
        apply(
            Compare,
            FI_LONG_DOUBLE,
            FI_CSWAP_GT,
            &mut d,
            &a,
            &b,
            &mut res,
        )
        .unwrap();
        assert_eq!(crate::sys::long_double::to_f64(&d), 3.75);
        let five = crate::sys::long_double::from_f64(5.0);
        apply(
            Compare,
            FI_LONG_DOUBLE,
            FI_CSWAP_GT,
            &mut d,
            &a,
            &five,
            &mut res,
        )
        .unwrap();
        assert_eq!(
            (
                crate::sys::long_double::to_f64(&d),
                crate::sys::long_double::to_f64(&res)
            ),
            (1.5, 3.75)
        );
    }
}
