//! Application memory named by libfabric calls.
//!
//! A buffer handed to `fi_send`, `fi_recv`, `fi_read`, an MR region, a CQ `buf`... belongs to the
//! application, which promises (fi_msg(3), fi_rma(3), fi_mr(3)) to keep it valid and not to
//! touch it until the operation completes or the region is closed. An [`IoVec`] carries that
//! promise: it is created only by `unsafe fn new` (in the C entry points, which are where the
//! promise is made) and from then on its copying methods are safe and bounds-checked. Providers
//! never see raw pointers.

use core::ptr;

/// One piece of application memory; same layout as `struct iovec`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoVec {
    base: *mut u8,
    len: usize,
}

// SAFETY: an IoVec is a promise about memory the application keeps valid for the operation; the
// library may touch that memory from whichever thread drives progress (FI_THREAD_SAFE).
unsafe impl Send for IoVec {}
// SAFETY: as above; shared access only copies in or out, never hands out references.
unsafe impl Sync for IoVec {}

impl Default for IoVec {
    fn default() -> Self {
        IoVec::EMPTY
    }
}

impl IoVec {
    pub const EMPTY: IoVec = IoVec {
        base: ptr::null_mut(),
        len: 0,
    };

    /// # Safety
    /// `base..base+len` must be valid for reads and writes (reads only, if only read methods are
    /// used) for as long as this value or any copy or sub-range of it is used: the libfabric
    /// contract for the call that named the memory. `len` may be 0 with any `base`.
    pub unsafe fn new(base: *mut u8, len: usize) -> IoVec {
        if len == 0 {
            IoVec::EMPTY
        } else {
            IoVec { base, len }
        }
    }

    /// Memory owned by the library itself (a bounce buffer, a test buffer).
    pub fn from_mut_slice(s: &'static mut [u8]) -> IoVec {
        IoVec {
            base: s.as_mut_ptr(),
            len: s.len(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address, as the application sees it (FI_MR_VIRT_ADDR keys, CQ `buf` fields).
    pub fn addr(&self) -> usize {
        self.base as usize
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.base
    }

    /// The sub-range `[off, off+len)`, or None if it does not fit.
    pub fn sub(&self, off: usize, len: usize) -> Option<IoVec> {
        let end = off.checked_add(len)?;
        if end > self.len {
            return None;
        }
        if len == 0 {
            return Some(IoVec::EMPTY);
        }
        // The range was checked to lie inside `self`, which carries the validity promise.
        Some(IoVec {
            base: self.base.wrapping_add(off),
            len,
        })
    }

    /// Copies `dst.len()` bytes starting at `off` out of this memory. Returns false (and copies
    /// nothing) if the range is out of bounds.
    pub fn read_at(&self, off: usize, dst: &mut [u8]) -> bool {
        match off.checked_add(dst.len()) {
            Some(end) if end <= self.len => {}
            _ => return false,
        }
        if !dst.is_empty() {
            // SAFETY: the range is in bounds of memory valid for reads (constructor contract);
            // `dst` is a distinct Rust buffer, so the two cannot overlap.
            unsafe { copy_bytes(self.base.add(off), dst.as_mut_ptr(), dst.len()) };
        }
        true
    }

    /// Copies `src` into this memory at `off`. Returns false (and copies nothing) if out of bounds.
    pub fn write_at(&self, off: usize, src: &[u8]) -> bool {
        match off.checked_add(src.len()) {
            Some(end) if end <= self.len => {}
            _ => return false,
        }
        if !src.is_empty() {
            // SAFETY: the range is in bounds of memory valid for writes (constructor contract);
            // `src` is a Rust buffer, distinct from application memory we were handed.
            unsafe { copy_bytes(src.as_ptr(), self.base.add(off), src.len()) };
        }
        true
    }

    /// Copies `len` bytes from `src` at `src_off` into this memory at `off` (memmove semantics,
    /// since both may be application memory). Returns false if either range is out of bounds.
    pub fn copy_from(&self, off: usize, src: &IoVec, src_off: usize, len: usize) -> bool {
        let (Some(d), Some(s)) = (self.sub(off, len), src.sub(src_off, len)) else {
            return false;
        };
        if len != 0 {
            // SAFETY: both ranges were bounds-checked against memory valid for the operation;
            // `ptr::copy` tolerates overlap.
            unsafe { ptr::copy(s.base, d.base, len) };
        }
        true
    }

    /// The bytes of this memory, for as long as this value is borrowed (the send of a datagram
    /// that ends with them: the application promised not to modify them meanwhile).
    pub fn as_bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: valid for reads for `len` bytes for as long as this value is used
        // (constructor contract); the slice borrows it.
        unsafe { core::slice::from_raw_parts(self.base, self.len) }
    }

    /// Runs `f` over the bytes of this memory. The slice must not escape `f`; the application
    /// promised not to modify the memory while the operation is pending.
    pub fn with_slice<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        if self.len == 0 {
            return f(&[]);
        }
        // SAFETY: valid for reads for `len` bytes (constructor contract); the slice lives only for
        // the duration of `f`.
        let s = unsafe { core::slice::from_raw_parts(self.base, self.len) };
        f(s)
    }

    /// Runs `f` over the bytes of this memory, mutably (used to apply atomics and to receive into
    /// application buffers in place).
    pub fn with_mut_slice<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        if self.len == 0 {
            return f(&mut []);
        }
        // SAFETY: valid for reads and writes for `len` bytes (constructor contract); the library
        // holds at most one such view at a time per operation, for the duration of `f`.
        let s = unsafe { core::slice::from_raw_parts_mut(self.base, self.len) };
        f(s)
    }
}

/// `ptr::copy_nonoverlapping` of `n` bytes, copies of up to 16 bytes done in line: a small
/// message's bytes went through a call to memcpy at every step (taken off the ring, into the
/// receive, out of the send), some 12 instructions each (callgrind, 8-byte ping-pong).
///
/// # Safety
/// As `ptr::copy_nonoverlapping`: `src` valid for reads and `dst` for writes of `n` bytes, not
/// overlapping.
#[inline(always)]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: in every branch, every access lies in `src[..n]` or `dst[..n]` (the second of
    // each pair ends at `n`, overlapping the first when `n` is not twice the width); unaligned
    // accesses are allowed by `read_unaligned` / `write_unaligned`. `copy_in_pieces` has the
    // contract of this function.
    unsafe {
        if n > 16 {
            if n > PIECE && n <= PIECES_UP_TO && aliased(src, dst) {
                copy_in_pieces(src, dst, n);
            } else {
                ptr::copy_nonoverlapping(src, dst, n);
            }
        } else if n >= 8 {
            let (a, b) = (
                src.cast::<u64>().read_unaligned(),
                src.add(n - 8).cast::<u64>().read_unaligned(),
            );
            dst.cast::<u64>().write_unaligned(a);
            dst.add(n - 8).cast::<u64>().write_unaligned(b);
        } else if n >= 4 {
            let (a, b) = (
                src.cast::<u32>().read_unaligned(),
                src.add(n - 4).cast::<u32>().read_unaligned(),
            );
            dst.cast::<u32>().write_unaligned(a);
            dst.add(n - 4).cast::<u32>().write_unaligned(b);
        } else if n >= 2 {
            let (a, b) = (
                src.cast::<u16>().read_unaligned(),
                src.add(n - 2).cast::<u16>().read_unaligned(),
            );
            dst.cast::<u16>().write_unaligned(a);
            dst.add(n - 2).cast::<u16>().write_unaligned(b);
        } else if n == 1 {
            *dst = *src;
        }
    }
}

/// `rep movsb`, which glibc's memcpy uses from 2,113 bytes up to the L2's size on a processor
/// with fast short `rep movsb` (FSRM), runs 15–25 times slower on AMD Zen when the destination
/// lies 1 to 31 bytes past the source modulo 4 KiB (glibc bug 30994; Debian 12's glibc 2.36
/// has it): 2–3 GB/s against 30–60 for copies of 4 KiB to 500 KiB on this project's EPYC
/// host, at every such distance (and copies over 200 KiB at 21–24 GB/s at 38–69). An
/// application buffer may lie at any offset from ours: one in some 130 met every copy at
/// 2 GB/s (a receive buffer 8 bytes into its page, the sender's at the start of one). Copies
/// at such a distance go in pieces too short for `rep movsb`, which glibc moves with vector
/// loads and stores at full speed whatever the distance; and only up to 1 MiB, past which
/// glibc moves data by other means (and non-temporal stores that pieces would give up).
const PIECE: usize = 2048;
const PIECES_UP_TO: usize = 1 << 20;

/// Whether `dst` lies 1 to 63 bytes past `src` modulo 4 KiB (see `PIECE`: the window is
/// widened from 31, as some sizes were still slowed at 38–69).
#[inline(always)]
fn aliased(src: *const u8, dst: *mut u8) -> bool {
    aliased_at(src as usize, dst as usize)
}

/// [`aliased`] for addresses, of this process or another (`sys::cma`: the kernel's copies
/// are `rep movsb` too).
#[inline(always)]
pub(crate) fn aliased_at(src: usize, dst: usize) -> bool {
    let d = dst.wrapping_sub(src) % 4096;
    d != 0 && d < 64
}

/// [`copy_bytes`] in `PIECE`-byte copies.
///
/// # Safety
/// As [`copy_bytes`].
#[cold]
#[inline(never)]
unsafe fn copy_in_pieces(src: *const u8, dst: *mut u8, n: usize) {
    let mut at = 0;
    while at < n {
        let len = PIECE.min(n - at);
        // SAFETY: `at + len <= n`: inside both buffers (the caller's contract).
        unsafe { ptr::copy_nonoverlapping(src.add(at), dst.add(at), len) };
        at += len;
    }
}

/// `dst.copy_from_slice(src)` by [`copy_bytes`], for copies that may be long.
///
/// # Panics
/// If the lengths differ, as `copy_from_slice`.
pub fn copy_slice(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_slice: lengths differ");
    // SAFETY: two slices of `src.len()` bytes; `&mut` keeps them apart.
    unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// Total length of an iovec list.
pub fn iov_len(iov: &[IoVec]) -> usize {
    iov.iter().map(|v| v.len).sum()
}

/// The entry holding logical offset `off`, and the offset within it.
fn entry_at(iov: &[IoVec], mut off: usize) -> Option<(&IoVec, usize)> {
    for v in iov {
        if off < v.len {
            return Some((v, off));
        }
        off -= v.len;
    }
    None
}

/// The bytes `[off, off + n)` of the list as one piece of memory, when they lie in one entry
/// (what a zero-copy send can hand the kernel as it is).
pub fn piece(iov: &[IoVec], off: usize, n: usize) -> Option<IoVec> {
    entry_at(iov, off).and_then(|(v, o)| v.sub(o, n))
}

/// The piece of the list from `off` to the end of the entry holding it, at most `max` bytes
/// (one device work request's worth of contiguous memory).
pub fn piece_upto(iov: &[IoVec], off: usize, max: usize) -> Option<IoVec> {
    entry_at(iov, off).and_then(|(v, o)| v.sub(o, (v.len - o).min(max)))
}

/// An operation's copy of the application's iov list, kept inline (no allocation per
/// operation): providers take at most `IovList::CAP` pieces (`tx_attr.iov_limit`).
#[derive(Clone, Copy, Debug, Default)]
pub struct IovList {
    len: u8,
    items: [IoVec; IovList::CAP],
}

impl IovList {
    pub const CAP: usize = 4;

    /// The list, or None if it has more than `CAP` pieces.
    pub fn new(iov: &[IoVec]) -> Option<IovList> {
        let mut items = [IoVec::EMPTY; IovList::CAP];
        items.get_mut(..iov.len())?.copy_from_slice(iov);
        Some(IovList {
            len: iov.len() as u8,
            items,
        })
    }
}

impl core::ops::Deref for IovList {
    type Target = [IoVec];
    fn deref(&self) -> &[IoVec] {
        &self.items[..self.len as usize]
    }
}

/// Copies bytes of the list, starting at logical offset `off`, into `dst`; returns bytes copied.
#[inline]
pub fn gather(iov: &[IoVec], mut off: usize, dst: &mut [u8]) -> usize {
    let mut done = 0;
    for v in iov {
        if done == dst.len() {
            break;
        }
        if off >= v.len {
            off -= v.len;
            continue;
        }
        let n = (v.len - off).min(dst.len() - done);
        v.read_at(off, &mut dst[done..done + n]);
        done += n;
        off = 0;
    }
    done
}

/// Copies `src` into the list starting at logical offset `off`; returns bytes copied (less than
/// `src.len()` if the list is too short).
#[inline]
pub fn scatter(iov: &[IoVec], mut off: usize, src: &[u8]) -> usize {
    let mut done = 0;
    for v in iov {
        if done == src.len() {
            break;
        }
        if off >= v.len {
            off -= v.len;
            continue;
        }
        let n = (v.len - off).min(src.len() - done);
        v.write_at(off, &src[done..done + n]);
        done += n;
        off = 0;
    }
    done
}

/// Asks the core for the cache line at `p`, with intent to write (`write`) or not. Only a
/// hint: nothing is read or written, any address is allowed, and a wrong guess costs a line
/// transfer. The write hint becomes a plain `prefetcht0` unless the crate is built for
/// PREFETCHW (the default x86_64 target is not).
#[inline(always)]
pub fn prefetch_addr(p: *const u8, write: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
        let p = p.cast::<i8>();
        // SAFETY: a prefetch dereferences nothing and never faults, whatever the address
        // (SSE, part of x86_64).
        unsafe {
            if write {
                _mm_prefetch::<_MM_HINT_ET0>(p);
            } else {
                _mm_prefetch::<_MM_HINT_T0>(p);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, write);
}

/// Asks the core for the cache lines of `v` (its first and last byte's), ahead of a read.
#[inline(always)]
pub fn prefetch<V>(v: &V) {
    let p = (v as *const V).cast::<u8>();
    prefetch_addr(p, false);
    prefetch_addr(p.wrapping_add(core::mem::size_of::<V>().max(1) - 1), false);
}

/// [`scatter`] of `parts`, one after the other, as if they were one slice: the list is walked
/// once, not once per part.
pub fn scatter_parts(iov: &[IoVec], mut off: usize, parts: &[&[u8]]) -> usize {
    let mut i = 0;
    while i < iov.len() && off >= iov[i].len {
        off -= iov[i].len;
        i += 1;
    }
    let mut done = 0;
    for part in parts {
        let mut src = *part;
        while !src.is_empty() {
            let Some(v) = iov.get(i) else {
                return done;
            };
            let n = (v.len - off).min(src.len());
            v.write_at(off, &src[..n]);
            done += n;
            off += n;
            src = &src[n..];
            if off == v.len {
                i += 1;
                off = 0;
            }
        }
    }
    done
}

/// The bytes of `parts` together.
pub fn parts_len(parts: &[&[u8]]) -> usize {
    parts.iter().map(|p| p.len()).sum()
}

/// Copies `len` bytes from list `src` (from offset `src_off`) to list `dst` (from `dst_off`);
/// returns bytes copied (stops at the end of either list).
pub fn copy_iov(
    dst: &[IoVec],
    mut dst_off: usize,
    src: &[IoVec],
    mut src_off: usize,
    len: usize,
) -> usize {
    let mut done = 0;
    let (mut di, mut si) = (0, 0);
    while done < len && di < dst.len() && si < src.len() {
        let (d, s) = (&dst[di], &src[si]);
        if dst_off >= d.len {
            dst_off -= d.len;
            di += 1;
            continue;
        }
        if src_off >= s.len {
            src_off -= s.len;
            si += 1;
            continue;
        }
        let n = (d.len - dst_off).min(s.len - src_off).min(len - done);
        d.copy_from(dst_off, s, src_off, n);
        done += n;
        dst_off += n;
        src_off += n;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leak(n: usize, fill: u8) -> IoVec {
        IoVec::from_mut_slice(Box::leak(vec![fill; n].into_boxed_slice()))
    }

    #[test]
    fn copy_bytes_copies_exactly_n_bytes_at_every_length_and_alignment() {
        let src: Vec<u8> = (1..=64).collect();
        for n in 0..=40 {
            for at in 0..3 {
                let mut dst = [0xeeu8; 48];
                // SAFETY: `at + n <= 43` bytes of both buffers; distinct buffers.
                unsafe { copy_bytes(src.as_ptr().add(at), dst.as_mut_ptr().add(at), n) };
                assert_eq!(&dst[at..at + n], &src[at..at + n], "n {n} at {at}");
                assert!(
                    dst[..at].iter().all(|&b| b == 0xee),
                    "before, n {n} at {at}"
                );
                assert!(
                    dst[at + n..].iter().all(|&b| b == 0xee),
                    "after, n {n} at {at}"
                );
            }
        }
    }

    /// Copies at the distances `rep movsb` is slow at go in pieces; every byte still lands
    /// once, in place (lengths around the piece size and the limit, every distance 0..72).
    #[test]
    fn copies_at_a_short_distance_modulo_a_page_are_exact() {
        let src: Vec<u8> = (0..PIECES_UP_TO + 4096 + 64)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        let mut dst = vec![0u8; PIECES_UP_TO + 2 * 4096 + 128];
        // The destination's offset that puts it `d` bytes past the source modulo 4 KiB.
        let base = |d: usize, dst: &[u8]| {
            let want = (src.as_ptr() as usize + d) % 4096;
            (want + 4096 - dst.as_ptr() as usize % 4096) % 4096
        };
        for n in [PIECE - 1, PIECE, PIECE + 1, 3 * PIECE + 17, PIECES_UP_TO] {
            for d in [0, 1, 8, 31, 32, 63, 64, 72] {
                let at = base(d, &dst);
                assert_eq!(
                    aliased(src.as_ptr(), dst[at..].as_mut_ptr()),
                    d != 0 && d < 64,
                    "d {d}"
                );
                dst.fill(0xee);
                // SAFETY: `at + n` lies inside `dst` (at < 4096); `n` inside `src`.
                unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr().add(at), n) };
                assert!(dst[at..at + n] == src[..n], "n {n} d {d}");
                assert!(dst[..at].iter().all(|&b| b == 0xee), "before, n {n} d {d}");
                assert!(
                    dst[at + n..].iter().all(|&b| b == 0xee),
                    "after, n {n} d {d}"
                );
            }
        }
    }

    #[test]
    fn bounds_are_checked() {
        let v = leak(16, 0);
        assert!(v.write_at(12, &[1, 2, 3, 4]));
        assert!(!v.write_at(13, &[1, 2, 3, 4]));
        assert!(!v.write_at(usize::MAX, &[1]));
        let mut out = [0u8; 4];
        assert!(v.read_at(12, &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(v.sub(16, 0).is_some());
        assert!(v.sub(16, 1).is_none());
        assert!(v.sub(usize::MAX, 2).is_none());
    }

    #[test]
    fn scatter_gather_across_pieces() {
        let iov = [leak(3, 0), leak(0, 0), leak(5, 0)];
        assert_eq!(iov_len(&iov), 8);
        assert_eq!(scatter(&iov, 1, &[1, 2, 3, 4, 5, 6, 7, 8]), 7);
        let mut out = [0u8; 8];
        assert_eq!(gather(&iov, 0, &mut out), 8);
        assert_eq!(out, [0, 1, 2, 3, 4, 5, 6, 7]);
        let dst = [leak(2, 0), leak(6, 0)];
        assert_eq!(copy_iov(&dst, 0, &iov, 2, 6), 6);
        let mut out = [0u8; 8];
        gather(&dst, 0, &mut out);
        assert_eq!(out, [2, 3, 4, 5, 6, 7, 0, 0]);
    }

    #[test]
    fn parts_scatter_as_one_slice_would() {
        let bytes: Vec<u8> = (1..=12).collect();
        // Parts of every cut, into entries of other cuts (an empty one among them), from
        // every offset: the same bytes as one `scatter`, stopping where the list ends.
        for cut in [0, 1, 4, 7, 12] {
            let parts: [&[u8]; 3] = [&bytes[..cut], &[], &bytes[cut..]];
            assert_eq!(parts_len(&parts), 12);
            for off in 0..10 {
                let one = [leak(3, 0), leak(0, 0), leak(4, 0), leak(3, 0)];
                let many = [leak(3, 0), leak(0, 0), leak(4, 0), leak(3, 0)];
                let n = scatter(&one, off, &bytes);
                assert_eq!(scatter_parts(&many, off, &parts), n, "cut {cut} off {off}");
                let (mut a, mut b) = ([0u8; 10], [0u8; 10]);
                gather(&one, 0, &mut a);
                gather(&many, 0, &mut b);
                assert_eq!(a, b, "cut {cut} off {off}");
            }
        }
        assert_eq!(scatter_parts(&[leak(2, 0)], 5, &[&[1]]), 0, "past the list");
    }

    #[test]
    fn an_iov_list_keeps_up_to_four_pieces() {
        let pieces = [leak(1, 1), leak(2, 2), leak(3, 3), leak(4, 4), leak(5, 5)];
        for n in 0..=IovList::CAP {
            assert_eq!(&IovList::new(&pieces[..n]).unwrap()[..], &pieces[..n]);
        }
        assert!(IovList::new(&pieces).is_none(), "five pieces do not fit");
        assert!(IovList::default().is_empty());
    }
}
