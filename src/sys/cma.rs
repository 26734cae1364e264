//! Cross-memory attach (process_vm_readv(2), process_vm_writev(2)): one copy between the address
//! spaces of two processes of the same user.

use super::mem::IoVec;
use crate::error::{Errno, Result};

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
        // SAFETY: `l` names application memory valid for the operation (IoVec contract) and
        // `r` another process's memory, which the kernel checks; both arrays live across the call.
        let n = unsafe {
            if write {
                libc::process_vm_writev(
                    pid,
                    l.as_ptr(),
                    l.len() as u64,
                    r.as_ptr(),
                    r.len() as u64,
                    0,
                )
            } else {
                libc::process_vm_readv(
                    pid,
                    l.as_ptr(),
                    l.len() as u64,
                    r.as_ptr(),
                    r.len() as u64,
                    0,
                )
            }
        };
        if n < 0 {
            let e = Errno::last_os();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(Errno::FAULT);
        }
        done += n as usize;
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
    if total > 0 && l.len() <= UIO_MAXIOV && r.len() <= UIO_MAXIOV {
        // SAFETY: as in `transfer`: `l` names application memory valid for the operation,
        // `r` the other process's memory, which the kernel checks; both live across the call.
        let n = unsafe {
            if write {
                libc::process_vm_writev(
                    pid,
                    l.as_ptr(),
                    l.len() as u64,
                    r.as_ptr(),
                    r.len() as u64,
                    0,
                )
            } else {
                libc::process_vm_readv(
                    pid,
                    l.as_ptr(),
                    l.len() as u64,
                    r.as_ptr(),
                    r.len() as u64,
                    0,
                )
            }
        };
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
