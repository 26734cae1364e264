//! `fi_ops_rma` (fi_rma(3)): every call becomes one `RmaOp` for `Endpoint::read` or
//! `Endpoint::write`.

use core::ffi::c_void;
use core::mem::size_of;

use super::{check_flags, ep};
use crate::abi::consts::*;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::ffi::{app_buf, app_desc, app_iov, app_slice, ssize_ret};
use crate::sys::mem::{IoVec, iov_len};
use crate::util::Endpoint;
use crate::util::ep::{Call, RmaOp};

pub static RMA_OPS: fi_ops_rma = fi_ops_rma {
    size: size_of::<fi_ops_rma>(),
    read: Some(rma_read),
    readv: Some(rma_readv),
    readmsg: Some(rma_readmsg),
    write: Some(rma_write),
    writev: Some(rma_writev),
    writemsg: Some(rma_writemsg),
    inject: Some(rma_inject),
    writedata: Some(rma_writedata),
    injectdata: Some(rma_injectdata),
};

/// Everything an RMA call carries besides the endpoint, the buffers and the target.
struct RmaArgs {
    addr: fi_addr_t,
    context: *mut c_void,
    data: u64,
    flags: u64,
    call: Call,
}

impl RmaArgs {
    /// A plain call (`fi_read`, `fi_write`, ...): no CQ data, no flags.
    fn plain(addr: fi_addr_t, context: *mut c_void) -> RmaArgs {
        RmaArgs {
            addr,
            context,
            data: 0,
            flags: 0,
            call: Call::Plain,
        }
    }

    /// `fi_inject_write`: no context (nothing completes).
    fn inject(addr: fi_addr_t) -> RmaArgs {
        RmaArgs {
            call: Call::Inject,
            ..RmaArgs::plain(addr, core::ptr::null_mut())
        }
    }

    /// The `*data` forms: remote CQ data.
    fn with_data(self, data: u64) -> RmaArgs {
        RmaArgs {
            data,
            flags: FI_REMOTE_CQ_DATA,
            ..self
        }
    }
}

/// Posts one decoded call to the endpoint.
#[inline(always)]
fn rma(
    e: &dyn Endpoint,
    iov: &[IoVec],
    desc: &[usize],
    rma_iov: &[fi_rma_iov],
    a: RmaArgs,
    read: bool,
) -> Result<usize> {
    let op = RmaOp {
        iov,
        desc,
        addr: a.addr,
        rma_iov,
        context: a.context as usize,
        data: a.data,
        flags: a.flags,
        call: a.call,
    };
    if read {
        e.read(&op)?
    } else {
        e.write(&op)?
    }
    Ok(0)
}

/// A call on one buffer of `target.len` bytes, to or from one target range.
///
/// # Safety
/// `p` is an application pointer; `buf` is valid for `target.len` bytes until the operation
/// completes (for the call, for the inject forms).
#[inline(always)]
unsafe fn rma_buf(
    p: *mut fid_ep,
    buf: *const c_void,
    desc: &[usize],
    target: fi_rma_iov,
    a: RmaArgs,
    read: bool,
) -> Result<usize> {
    // SAFETY: checked cast; `buf` as the caller promises (fi_rma(3)).
    let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, target.len)?]) };
    rma(&**e, &iov, desc, &[target], a, read)
}

/// A call on an iovec array, to or from one target range (`key`, `addr`) as long as the array.
///
/// # Safety
/// `p` is an application pointer; `iov` and `desc` are valid for `count` entries.
unsafe fn rma_iov(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    (addr, key): (u64, u64),
    a: RmaArgs,
    read: bool,
) -> Result<usize> {
    // SAFETY: checked cast; arrays valid for `count`.
    let (e, iov, desc) = unsafe { (ep(p)?, app_iov(iov, count)?, app_desc(desc, count)) };
    let len = iov_len(iov);
    rma(&**e, iov, desc, &[fi_rma_iov { addr, len, key }], a, read)
}

/// `fi_readmsg`, `fi_writemsg`.
///
/// # Safety
/// `m` is NULL or the application's `fi_msg_rma` for this call.
unsafe fn rma_msg(p: *mut fid_ep, m: *const fi_msg_rma, flags: u64, read: bool) -> Result<usize> {
    // SAFETY: checked cast; descriptor valid for this call.
    let (e, m) = unsafe { (ep(p)?, m.as_ref().ok_or(Errno::INVAL)?) };
    // SAFETY: arrays inside `m` valid for their counts.
    let (iov, desc, r) = unsafe {
        (
            app_iov(m.msg_iov, m.iov_count)?,
            app_desc(m.desc, m.iov_count),
            app_slice(m.rma_iov, m.rma_iov_count)?,
        )
    };
    let a = RmaArgs {
        addr: m.addr,
        context: m.context,
        data: m.data,
        flags: check_flags(flags)?,
        call: Call::Msg,
    };
    rma(&**e, iov, desc, r, a, read)
}

unsafe extern "C" fn rma_read(
    p: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let (r, a) = (fi_rma_iov { addr, len, key }, RmaArgs::plain(src, context));
    // SAFETY: `buf` valid until completion (fi_rma(3)).
    ssize_ret(|| unsafe { rma_buf(p, buf, &[desc as usize], r, a, true) })
}

unsafe extern "C" fn rma_readv(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let a = RmaArgs::plain(src, context);
    // SAFETY: arrays valid for `count`.
    ssize_ret(|| unsafe { rma_iov(p, iov, desc, count, (addr, key), a, true) })
}

unsafe extern "C" fn rma_readmsg(p: *mut fid_ep, m: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: forwarded arguments.
    ssize_ret(|| unsafe { rma_msg(p, m, flags, true) })
}

unsafe extern "C" fn rma_write(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let (r, a) = (fi_rma_iov { addr, len, key }, RmaArgs::plain(dest, context));
    // SAFETY: `buf` valid until completion.
    ssize_ret(|| unsafe { rma_buf(p, buf, &[desc as usize], r, a, false) })
}

unsafe extern "C" fn rma_writev(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let a = RmaArgs::plain(dest, context);
    // SAFETY: arrays valid for `count`.
    ssize_ret(|| unsafe { rma_iov(p, iov, desc, count, (addr, key), a, false) })
}

unsafe extern "C" fn rma_writemsg(p: *mut fid_ep, m: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: forwarded arguments.
    ssize_ret(|| unsafe { rma_msg(p, m, flags, false) })
}

unsafe extern "C" fn rma_inject(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    let (r, a) = (fi_rma_iov { addr, len, key }, RmaArgs::inject(dest));
    // SAFETY: `buf` valid for the call.
    ssize_ret(|| unsafe { rma_buf(p, buf, &[], r, a, false) })
}

unsafe extern "C" fn rma_writedata(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let r = fi_rma_iov { addr, len, key };
    let a = RmaArgs::plain(dest, context).with_data(data);
    // SAFETY: `buf` valid until completion.
    ssize_ret(|| unsafe { rma_buf(p, buf, &[desc as usize], r, a, false) })
}

unsafe extern "C" fn rma_injectdata(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    let (r, a) = (
        fi_rma_iov { addr, len, key },
        RmaArgs::inject(dest).with_data(data),
    );
    // SAFETY: `buf` valid for the call.
    ssize_ret(|| unsafe { rma_buf(p, buf, &[], r, a, false) })
}
