//! Cross-memory attach (process_vm_readv(2), process_vm_writev(2)): one copy between the address
//! spaces of two processes of the same user.
//!
//! The kernel copies with `rep movsb`, which on AMD Zen runs several times slower when the
//! destination lies 1 to 31 bytes past the source modulo 4 KiB (`sys::mem::copy_bytes`): 64
//! KiB and 1 MiB moved at 1.6–1.9 GB/s at those distances, 6.7–9.5 at others, on this
//! project's EPYC host. A transfer with a part at such a distance takes a detour for that
//! part: through a scratch buffer of this thread placed at no distance from the other
//! process's memory, and a copy of ours between the scratch and the application's memory,
//! which avoids `rep movsb` there.

use std::cell::RefCell;

use super::mem::{IoVec, aliased_at, copy_bytes};
use crate::error::{Errno, Result};

/// Bytes a detour moves per system call.
const DETOUR: usize = 64 << 10;
/// Parts shorter than this go straight, whatever their distance: the detour's extra system
/// calls would cost more than the slow copy.
const DETOUR_FROM: usize = 2048;

/// A range of another process's memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Remote {
    pub addr: u64,
    pub len: usize,
}

/// Our own memory, as a peer names it for cross-memory attach.
impl From<&IoVec> for Remote {
    fn from(v: &IoVec) -> Remote {
        Remote {
            addr: v.addr() as u64,
            len: v.len(),
        }
    }
}

fn iovecs_local(iov: &[IoVec], mut off: usize, mut len: usize, out: &mut Vec<libc::iovec>) {
    out.clear();
    for v in iov {
        if len == 0 {
            break;
        }
        if off >= v.len() {
            off -= v.len();
            continue;
        }
        let n = (v.len() - off).min(len);
        out.push(libc::iovec {
            iov_base: v.as_ptr().wrapping_add(off).cast(),
            iov_len: n,
        });
        len -= n;
        off = 0;
    }
}

fn iovecs_remote(r: &[Remote], mut off: usize, mut len: usize, out: &mut Vec<libc::iovec>) {
    out.clear();
    for v in r {
        if len == 0 {
            break;
        }
        if off >= v.len {
            off -= v.len;
            continue;
        }
        let n = (v.len - off).min(len);
        out.push(libc::iovec {
            iov_base: (v.addr as usize + off) as *mut libc::c_void,
            iov_len: n,
        });
        len -= n;
        off = 0;
    }
}

/// Pid 0 is a peer this process cannot attach to (another pid namespace): refused as the
/// kernel refuses (`FI_EPERM`), so that callers fall back to bounce buffers.
fn no_process(pid: i32) -> Result<()> {
    if pid <= 0 { Err(Errno::PERM) } else { Ok(()) }
}

/// One process_vm_writev (`write`) or process_vm_readv call: the bytes moved, or -1 (errno).
fn call(pid: i32, l: &[libc::iovec], r: &[libc::iovec], write: bool) -> isize {
    let f = if write {
        libc::process_vm_writev
    } else {
        libc::process_vm_readv
    };
    // SAFETY: `l` names memory of this process valid for the operation (the callers' IoVec
    // contract, or this thread's scratch buffer) and `r` another process's memory, which the
    // kernel checks; both arrays live across the call.
    unsafe {
        f(
            pid,
            l.as_ptr(),
            l.len() as u64,
            r.as_ptr(),
            r.len() as u64,
            0,
        )
    }
}

/// [`call`] judged: the bytes moved, `None` if interrupted (to be called again), an error if it
/// failed or moved nothing (a fault).
fn call_checked(
    pid: i32,
    l: &[libc::iovec],
    r: &[libc::iovec],
    write: bool,
) -> Result<Option<usize>> {
    match call(pid, l, r, write) {
        n if n > 0 => Ok(Some(n as usize)),
        0 => Err(Errno::FAULT),
        _ => match Errno::last_os() {
            e if e.0 == libc::EINTR => Ok(None),
            e => Err(e),
        },
    }
}

/// The parts of a transfer over which both sides are contiguous: (our address, theirs, bytes).
fn parts(l: &[libc::iovec], r: &[libc::iovec]) -> impl Iterator<Item = (usize, usize, usize)> {
    let (mut li, mut ri, mut lo, mut ro) = (0, 0, 0, 0);
    std::iter::from_fn(move || {
        while li < l.len() && lo == l[li].iov_len {
            (li, lo) = (li + 1, 0);
        }
        while ri < r.len() && ro == r[ri].iov_len {
            (ri, ro) = (ri + 1, 0);
        }
        if li == l.len() || ri == r.len() {
            return None;
        }
        let n = (l[li].iov_len - lo).min(r[ri].iov_len - ro);
        let part = (
            l[li].iov_base as usize + lo,
            r[ri].iov_base as usize + ro,
            n,
        );
        lo += n;
        ro += n;
        Some(part)
    })
}

/// Whether a part is long and at a distance the kernel's copy is slow at.
fn slow(ours: usize, theirs: usize, n: usize, write: bool) -> bool {
    let (src, dst) = if write {
        (ours, theirs)
    } else {
        (theirs, ours)
    };
    n >= DETOUR_FROM && aliased_at(src, dst)
}

/// Moves one part whole, straight or by the detour (see the module's notes).
fn move_part(pid: i32, ours: usize, theirs: usize, n: usize, write: bool) -> Result<()> {
    thread_local! {
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    let detour = slow(ours, theirs, n, write);
    SCRATCH.with_borrow_mut(|scratch| {
        if detour && scratch.is_empty() {
            scratch.resize(DETOUR + 4096, 0);
        }
        let mut done = 0;
        while done < n {
            let (o, t) = (ours + done, theirs + done);
            let (local, len) = if detour {
                // Scratch at no distance from their bytes modulo 4 KiB.
                let base = scratch.as_mut_ptr();
                let at = t.wrapping_sub(base as usize) % 4096;
                let s = base.wrapping_add(at);
                let len = (n - done).min(DETOUR);
                if write {
                    // SAFETY: `o..o + len` is the caller's memory (IoVec contract); `s..s +
                    // len` lies in the scratch (at < 4096, len <= DETOUR); distinct buffers.
                    unsafe { copy_bytes(o as *const u8, s, len) };
                }
                (s as usize, len)
            } else {
                (o, n - done)
            };
            let l = [libc::iovec {
                iov_base: local as *mut libc::c_void,
                iov_len: len,
            }];
            let r = [libc::iovec {
                iov_base: t as *mut libc::c_void,
                iov_len: len,
            }];
            let Some(got) = call_checked(pid, &l, &r, write)? else {
                continue;
            };
            if detour && !write {
                // SAFETY: as above, the other way: `got <= len` bytes read into the scratch.
                unsafe { copy_bytes(local as *const u8, o as *mut u8, got) };
            }
            done += got;
        }
        Ok(())
    })
}

fn transfer(
    pid: i32,
    local: &[IoVec],
    local_off: usize,
    remote: &[Remote],
    remote_off: usize,
    len: usize,
    write: bool,
) -> Result<()> {
    no_process(pid)?;
    let (mut l, mut r) = (Vec::with_capacity(4), Vec::with_capacity(4));
    let mut done = 0;
    while done < len {
        iovecs_local(local, local_off + done, len - done, &mut l);
        iovecs_remote(remote, remote_off + done, len - done, &mut r);
        if l.is_empty() || r.is_empty() {
            return Err(Errno::INVAL);
        }
        if parts(&l, &r).any(|(o, t, n)| slow(o, t, n, write)) {
            // Part by part, the slow ones by the detour (rare: one pair of buffers in ~65).
            let covered = parts(&l, &r).map(|(_, _, n)| n).sum::<usize>();
            if covered != len - done {
                return Err(Errno::INVAL);
            }
            for (o, t, n) in parts(&l, &r) {
                move_part(pid, o, t, n, write)?;
            }
            return Ok(());
        }
        if let Some(n) = call_checked(pid, &l, &r, write)? {
            done += n;
        }
    }
    Ok(())
}

/// Copies `len` bytes from `remote` (from offset `remote_off`) in process `pid` into `local`
/// (from `local_off`).
pub fn read_from(
    pid: i32,
    local: &[IoVec],
    local_off: usize,
    remote: &[Remote],
    remote_off: usize,
    len: usize,
) -> Result<()> {
    transfer(pid, local, local_off, remote, remote_off, len, false)
}

/// Copies `len` bytes from `local` into `remote` in process `pid`.
pub fn write_to(
    pid: i32,
    local: &[IoVec],
    local_off: usize,
    remote: &[Remote],
    remote_off: usize,
    len: usize,
) -> Result<()> {
    transfer(pid, local, local_off, remote, remote_off, len, true)
}

/// Copies the runs `(off, len)` of one transfer (each at `off` in both `local` and `remote`)
/// from `remote` into `local` (`write`: the other way), in one system call while the
/// iovec arrays stay within the kernel's limit and nothing faults.
pub fn transfer_runs(
    pid: i32,
    local: &[IoVec],
    remote: &[Remote],
    runs: &[(usize, usize)],
    write: bool,
) -> Result<()> {
    const UIO_MAXIOV: usize = 1024;
    no_process(pid)?;
    let (mut l, mut r) = (Vec::new(), Vec::new());
    let (mut one_l, mut one_r) = (Vec::with_capacity(4), Vec::with_capacity(4));
    let mut total = 0;
    for &(off, len) in runs {
        iovecs_local(local, off, len, &mut one_l);
        iovecs_remote(remote, off, len, &mut one_r);
        let (nl, nr) = (one_l.iter(), one_r.iter());
        if nl.map(|v| v.iov_len).sum::<usize>() != len
            || nr.map(|v| v.iov_len).sum::<usize>() != len
        {
            return Err(Errno::INVAL);
        }
        l.extend_from_slice(&one_l);
        r.extend_from_slice(&one_r);
        total += len;
    }
    let mut done = 0;
    // A part at a slow distance: run by run below, where `transfer` takes the detour.
    if total > 0
        && l.len() <= UIO_MAXIOV
        && r.len() <= UIO_MAXIOV
        && !parts(&l, &r).any(|(o, t, n)| slow(o, t, n, write))
    {
        let n = call(pid, &l, &r, write);
        if n < 0 {
            let e = Errno::last_os();
            if e.0 != libc::EINTR {
                return Err(e);
            }
        } else {
            done = n as usize;
        }
    }
    // What is left (an interrupted or short call, or too many pieces): run by run.
    for &(off, len) in runs {
        let skip = done.min(len);
        done -= skip;
        if skip < len {
            transfer(
                pid,
                local,
                off + skip,
                remote,
                off + skip,
                len - skip,
                write,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_within_this_process() {
        let src: &'static mut [u8] = Box::leak((0..=255u8).collect::<Vec<_>>().into_boxed_slice());
        let dst: &'static mut [u8] = Box::leak(vec![0u8; 256].into_boxed_slice());
        let remote = [
            Remote {
                addr: src.as_ptr() as u64,
                len: 100,
            },
            Remote {
                addr: src.as_ptr() as u64 + 100,
                len: 156,
            },
        ];
        let d = IoVec::from_mut_slice(dst);
        let pid = std::process::id() as i32;
        read_from(pid, &[d], 10, &remote, 5, 200).unwrap();
        let mut out = [0u8; 256];
        d.read_at(0, &mut out);
        assert_eq!(out[10], 5);
        assert_eq!(out[209], 204);
        assert_eq!(out[9], 0);
        assert!(read_from(pid, &[d], 0, &remote, 0, 300).is_err());
        assert!(read_from(pid, &[d], 0, &[Remote { addr: 8, len: 8 }], 0, 8).is_err());
        // No process to attach to (a peer in another pid namespace): refused, so that the
        // caller takes its bounce-buffer path.
        assert_eq!(
            read_from(0, &[d], 0, &remote, 0, 8).unwrap_err(),
            Errno::PERM
        );
        assert_eq!(
            transfer_runs(0, &[d], &remote, &[(0, 8)], true).unwrap_err(),
            Errno::PERM
        );
    }

    /// `len` bytes of a pattern (leaked: a test's).
    fn pattern(len: usize) -> &'static mut [u8] {
        Box::leak(
            (0..len)
                .map(|i| (i * 13 + i / 509) as u8)
                .collect::<Box<[u8]>>(),
        )
    }

    /// A zeroed buffer of `len` bytes whose first lies `d` bytes past `from` modulo 4 KiB.
    fn zeroed_at_distance(len: usize, from: usize, d: usize) -> IoVec {
        let b: &'static mut [u8] = Box::leak(vec![0u8; len + 4096].into_boxed_slice());
        let first = (from + d).wrapping_sub(b.as_ptr() as usize) % 4096;
        IoVec::from_mut_slice(&mut b[first..first + len])
    }

    fn bytes_of(v: &[IoVec]) -> Vec<u8> {
        let mut out = Vec::new();
        for x in v {
            let mut b = vec![0u8; x.len()];
            x.read_at(0, &mut b);
            out.extend_from_slice(&b);
        }
        out
    }

    /// A part at a distance the kernel copies slowly at goes by the detour (in `DETOUR` steps
    /// and a remainder); every byte lands once, in place, both ways, and in a transfer whose
    /// other part goes straight.
    #[test]
    fn transfers_at_a_slow_distance_copy_exactly() {
        let pid = std::process::id() as i32;
        let len = 3 * DETOUR + 1234;
        for d in [0, 8, 31, 63, 64] {
            // Read: their pattern into our buffer (bytes 100.. of it).
            let src = pattern(len);
            let ours = zeroed_at_distance(len + 200, src.as_ptr() as usize + 4096 - 100, d);
            let at = ours.addr() + 100;
            assert_eq!(slow(at, src.as_ptr() as usize, len, false), d % 64 != 0);
            let theirs = [Remote::from(&IoVec::from_mut_slice(src))];
            read_from(pid, &[ours], 100, &theirs, 0, len).unwrap();
            let got = bytes_of(&[ours]);
            assert!(got[100..100 + len] == theirs_bytes(&theirs), "read, d {d}");
            assert!(got[..100].iter().chain(&got[100 + len..]).all(|&b| b == 0));
            // Write: our pattern into their buffer.
            let src = IoVec::from_mut_slice(pattern(len));
            let dst = zeroed_at_distance(len, src.addr(), d);
            assert_eq!(slow(src.addr(), dst.addr(), len, true), d % 64 != 0);
            write_to(pid, &[src], 0, &[Remote::from(&dst)], 0, len).unwrap();
            assert!(bytes_of(&[dst]) == bytes_of(&[src]), "write, d {d}");
        }
        // Ours in two parts, the first 8 bytes past theirs, the second at no distance; in
        // runs, whose one call gives way to part by part.
        let src = IoVec::from_mut_slice(pattern(len));
        let half = len / 2;
        let ours = [
            zeroed_at_distance(half, src.addr(), 8),
            zeroed_at_distance(len - half, src.addr() + half, 0),
        ];
        transfer_runs(pid, &ours, &[Remote::from(&src)], &[(0, len)], false).unwrap();
        assert!(bytes_of(&ours) == bytes_of(&[src]), "two parts in runs");
    }

    fn theirs_bytes(r: &[Remote]) -> Vec<u8> {
        // SAFETY: a test's own leaked buffer, named by `r`.
        r.iter()
            .flat_map(|x| unsafe { core::slice::from_raw_parts(x.addr as *const u8, x.len) })
            .copied()
            .collect()
    }

    #[test]
    fn runs_of_one_transfer() {
        let src: &'static mut [u8] = Box::leak((0..=255u8).collect::<Vec<_>>().into_boxed_slice());
        let dst: &'static mut [u8] = Box::leak(vec![0u8; 256].into_boxed_slice());
        let remote = [
            Remote {
                addr: src.as_ptr() as u64,
                len: 100,
            },
            Remote {
                addr: src.as_ptr() as u64 + 100,
                len: 156,
            },
        ];
        let (a, b) = dst.split_at_mut(60);
        let local = [IoVec::from_mut_slice(a), IoVec::from_mut_slice(b)];
        let pid = std::process::id() as i32;
        let runs = [(0, 10), (50, 70), (200, 56)];
        transfer_runs(pid, &local, &remote, &runs, false).unwrap();
        let mut out = [0u8; 256];
        local[0].read_at(0, &mut out[..60]);
        local[1].read_at(0, &mut out[60..]);
        for (i, x) in out.iter().enumerate() {
            let inside = runs.iter().any(|&(o, n)| (o..o + n).contains(&i));
            assert_eq!(*x, if inside { i as u8 } else { 0 }, "byte {i}");
        }
        assert!(transfer_runs(pid, &local, &remote, &[(250, 10)], false).is_err());
    }
}
