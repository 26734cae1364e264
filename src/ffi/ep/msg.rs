//! `fi_ops_msg` (fi_msg(3)), and the decoding that `fi_ops_tagged` shares with it: every call
//! becomes one `MsgOp` for `Endpoint::send` or `Endpoint::recv`.

use core::ffi::c_void;
use core::mem::size_of;

use super::{check_flags, ep};
use crate::abi::consts::*;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::ffi::{app_buf, app_desc, app_iov, ssize_ret};
use crate::sys::mem::IoVec;
use crate::util::Endpoint;
use crate::util::ep::{Call, MsgOp};

pub static MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: size_of::<fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
};

/// Everything a message call carries besides the endpoint and the buffers.
pub(super) struct MsgArgs {
    pub(super) addr: fi_addr_t,
    pub(super) context: *mut c_void,
    pub(super) data: u64,
    pub(super) tag: u64,
    pub(super) ignore: u64,
    pub(super) flags: u64,
    pub(super) call: Call,
}

impl MsgArgs {
    /// A plain call (`fi_send`, `fi_trecv`, ...): no CQ data, no flags.
    pub(super) fn plain(addr: fi_addr_t, context: *mut c_void, tag: u64, ignore: u64) -> MsgArgs {
        MsgArgs {
            addr,
            context,
            data: 0,
            tag,
            ignore,
            flags: 0,
            call: Call::Plain,
        }
    }

    /// `fi_inject`, `fi_tinject`: no context (nothing completes).
    pub(super) fn inject(addr: fi_addr_t, tag: u64) -> MsgArgs {
        MsgArgs {
            call: Call::Inject,
            ..MsgArgs::plain(addr, core::ptr::null_mut(), tag, 0)
        }
    }

    /// The `*data` forms: remote CQ data.
    pub(super) fn with_data(self, data: u64) -> MsgArgs {
        MsgArgs {
            data,
            flags: FI_REMOTE_CQ_DATA,
            ..self
        }
    }
}

/// Posts one decoded call to the endpoint.
#[inline(always)]
pub(super) fn msg(
    e: &dyn Endpoint,
    iov: &[IoVec],
    desc: &[usize],
    a: MsgArgs,
    recv: bool,
    tagged: bool,
) -> Result<usize> {
    let op = MsgOp {
        iov,
        desc,
        addr: a.addr,
        context: a.context as usize,
        data: a.data,
        tag: a.tag,
        ignore: a.ignore,
        flags: a.flags,
        call: a.call,
    };
    if recv {
        e.recv(&op, tagged)?
    } else {
        e.send(&op, tagged)?
    }
    Ok(0)
}

/// A call on one buffer (`fi_send`, `fi_recv`, `fi_inject`, ... and their tagged forms).
///
/// # Safety
/// `p` is an application pointer; `buf` is valid for `len` bytes until the operation
/// completes (for the call, for the inject forms).
#[inline(always)]
pub(super) unsafe fn msg_buf(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: &[usize],
    a: MsgArgs,
    recv: bool,
    tagged: bool,
) -> Result<usize> {
    // SAFETY: checked cast; `buf` as the caller promises.
    let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
    msg(&**e, &iov, desc, a, recv, tagged)
}

/// A call on an iovec array (`fi_sendv`, `fi_recvv`, and their tagged forms).
///
/// # Safety
/// `p` is an application pointer; `iov` and `desc` are valid for `count` entries (fi_msg(3)).
#[inline(always)]
pub(super) unsafe fn msg_iov(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    a: MsgArgs,
    recv: bool,
    tagged: bool,
) -> Result<usize> {
    // SAFETY: checked cast; arrays valid for `count`.
    let (e, iov, desc) = unsafe { (ep(p)?, app_iov(iov, count)?, app_desc(desc, count)) };
    msg(&**e, iov, desc, a, recv, tagged)
}

/// `fi_sendmsg`, `fi_recvmsg`.
///
/// # Safety
/// `p` is an application pointer; `m` is NULL or the application's message descriptor for
/// this call, its arrays valid for `iov_count`.
unsafe fn msg_msg(p: *mut fid_ep, m: *const fi_msg, flags: u64, recv: bool) -> Result<usize> {
    // SAFETY: checked cast; `m` is the application's message descriptor for this call.
    let (e, m) = unsafe { (ep(p)?, m.as_ref().ok_or(Errno::INVAL)?) };
    // SAFETY: arrays inside `m` valid for `iov_count`.
    let (iov, desc) = unsafe {
        (
            app_iov(m.msg_iov, m.iov_count)?,
            app_desc(m.desc, m.iov_count),
        )
    };
    let a = MsgArgs {
        addr: m.addr,
        context: m.context,
        data: m.data,
        tag: 0,
        ignore: 0,
        flags: check_flags(flags)?,
        call: Call::Msg,
    };
    msg(&**e, iov, desc, a, recv, false)
}

unsafe extern "C" fn msg_recv(
    p: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: fi_addr_t,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(src, context, 0, 0);
    // SAFETY: `buf` stays valid until the receive completes (fi_msg(3)).
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[desc as usize], a, true, false) })
}

unsafe extern "C" fn msg_recvv(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(src, context, 0, 0);
    // SAFETY: iov/desc arrays valid for `count` (fi_msg(3)).
    ssize_ret(|| unsafe { msg_iov(p, iov, desc, count, a, true, false) })
}

unsafe extern "C" fn msg_recvmsg(p: *mut fid_ep, m: *const fi_msg, flags: u64) -> isize {
    // SAFETY: forwarded arguments.
    ssize_ret(|| unsafe { msg_msg(p, m, flags, true) })
}

unsafe extern "C" fn msg_send(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(dest, context, 0, 0);
    // SAFETY: `buf` valid until the send completes.
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[desc as usize], a, false, false) })
}

unsafe extern "C" fn msg_sendv(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(dest, context, 0, 0);
    // SAFETY: arrays valid for `count`.
    ssize_ret(|| unsafe { msg_iov(p, iov, desc, count, a, false, false) })
}

unsafe extern "C" fn msg_sendmsg(p: *mut fid_ep, m: *const fi_msg, flags: u64) -> isize {
    // SAFETY: forwarded arguments.
    ssize_ret(|| unsafe { msg_msg(p, m, flags, false) })
}

unsafe extern "C" fn msg_inject(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
) -> isize {
    let a = MsgArgs::inject(dest, 0);
    // SAFETY: `buf` valid for the call (inject copies before returning).
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[], a, false, false) })
}

unsafe extern "C" fn msg_senddata(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(dest, context, 0, 0).with_data(data);
    // SAFETY: `buf` valid until completion.
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[desc as usize], a, false, false) })
}

unsafe extern "C" fn msg_injectdata(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
) -> isize {
    let a = MsgArgs::inject(dest, 0).with_data(data);
    // SAFETY: `buf` valid for the call.
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[], a, false, false) })
}
