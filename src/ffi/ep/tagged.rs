//! `fi_ops_tagged` (fi_tagged(3)): the message calls with tags, decoded as `msg` decodes the
//! untagged ones.

use core::ffi::c_void;
use core::mem::size_of;

use super::msg::{MsgArgs, msg, msg_buf, msg_iov};
use super::{check_flags, ep};
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::ffi::{app_desc, app_iov, ssize_ret};
use crate::util::ep::Call;

pub static TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: size_of::<fi_ops_tagged>(),
    recv: Some(tagged_recv),
    recvv: Some(tagged_recvv),
    recvmsg: Some(tagged_recvmsg),
    send: Some(tagged_send),
    sendv: Some(tagged_sendv),
    sendmsg: Some(tagged_sendmsg),
    inject: Some(tagged_inject),
    senddata: Some(tagged_senddata),
    injectdata: Some(tagged_injectdata),
};

/// `fi_tsendmsg`, `fi_trecvmsg` (a send ignores no tag bits).
///
/// # Safety
/// As `msg_msg`, for an `fi_msg_tagged`.
unsafe fn tagged_msg(
    p: *mut fid_ep,
    m: *const fi_msg_tagged,
    flags: u64,
    recv: bool,
) -> Result<usize> {
    // SAFETY: checked cast; descriptor valid for this call.
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
        tag: m.tag,
        ignore: if recv { m.ignore } else { 0 },
        flags: check_flags(flags)?,
        call: Call::Msg,
    };
    msg(&**e, iov, desc, a, recv, true)
}

unsafe extern "C" fn tagged_recv(
    p: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(src, context, tag, ignore);
    // SAFETY: `buf` valid until completion.
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[desc as usize], a, true, true) })
}

unsafe extern "C" fn tagged_recvv(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(src, context, tag, ignore);
    // SAFETY: arrays valid for `count`.
    ssize_ret(|| unsafe { msg_iov(p, iov, desc, count, a, true, true) })
}

unsafe extern "C" fn tagged_recvmsg(p: *mut fid_ep, m: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: forwarded arguments.
    ssize_ret(|| unsafe { tagged_msg(p, m, flags, true) })
}

unsafe extern "C" fn tagged_send(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(dest, context, tag, 0);
    // SAFETY: `buf` valid until completion.
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[desc as usize], a, false, true) })
}

unsafe extern "C" fn tagged_sendv(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(dest, context, tag, 0);
    // SAFETY: arrays valid for `count`.
    ssize_ret(|| unsafe { msg_iov(p, iov, desc, count, a, false, true) })
}

unsafe extern "C" fn tagged_sendmsg(p: *mut fid_ep, m: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: forwarded arguments.
    ssize_ret(|| unsafe { tagged_msg(p, m, flags, false) })
}

unsafe extern "C" fn tagged_inject(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    let a = MsgArgs::inject(dest, tag);
    // SAFETY: `buf` valid for the call.
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[], a, false, true) })
}

unsafe extern "C" fn tagged_senddata(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let a = MsgArgs::plain(dest, context, tag, 0).with_data(data);
    // SAFETY: `buf` valid until completion.
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[desc as usize], a, false, true) })
}

unsafe extern "C" fn tagged_injectdata(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    let a = MsgArgs::inject(dest, tag).with_data(data);
    // SAFETY: `buf` valid for the call.
    ssize_ret(|| unsafe { msg_buf(p, buf, len, &[], a, false, true) })
}
