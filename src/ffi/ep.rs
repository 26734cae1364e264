//! Endpoints (fi_endpoint(3), fi_cm(3), fi_msg(3), fi_tagged(3), fi_rma(3), fi_atomic(3)).
//!
//! Every data call is decoded into one `MsgOp`/`RmaOp`/`AtomicOp` and handed to the provider's
//! endpoint; `op.call` says which family of entry point was used.

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use std::sync::Arc;

use super::av::AvObj;
use super::domain::{fid_no_ops_open, fid_no_ops_set, fid_no_tostr};
use super::object::{Obj, Refs, close_obj, fid_header};
use super::queues::{CntrObj, CqObj, EqObj};
use super::{app_buf, app_desc, app_iov, app_slice, int_ret, put, ssize_ret};
use crate::abi::consts::*;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::sys::mem::IoVec;
use crate::util::ep::{AtomicKind, AtomicOp, Call, MsgOp, RmaOp, USER_OP_FLAGS};
use crate::util::{Bind, Endpoint};

pub type EpObj = Obj<fid_ep, Arc<dyn Endpoint>>;

pub static EP_FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close: Some(ep_close),
    bind: Some(ep_bind),
    control: Some(ep_control),
    ops_open: Some(fid_no_ops_open),
    tostr: Some(fid_no_tostr),
    ops_set: Some(fid_no_ops_set),
};

pub fn ep_to_c(
    imp: Arc<dyn Endpoint>,
    parent: &Refs,
    api_version: u32,
    context: *mut c_void,
) -> *mut fid_ep {
    let header = fid_ep {
        fid: fid_header(FI_CLASS_EP, context, &EP_FI_OPS),
        ops: &EP_OPS,
        cm: &CM_OPS,
        msg: &MSG_OPS,
        rma: &RMA_OPS,
        tagged: &TAGGED_OPS,
        atomic: &ATOMIC_OPS,
        collective: &COLLECTIVE_OPS,
    };
    EpObj::create(header, Some(parent), api_version, imp).cast()
}

/// The provider endpoint behind a C endpoint pointer.
///
/// # Safety
/// `p` is an application pointer.
#[inline(always)]
unsafe fn ep<'a>(p: *mut fid_ep) -> Result<&'a Arc<dyn Endpoint>> {
    // SAFETY: checked cast.
    Ok(&unsafe { EpObj::from_ptr(p)? }.inner)
}

/// As `ep`, from the `fid_t` some slots take.
///
/// # Safety
/// `p` is an application pointer.
unsafe fn ep_fid<'a>(p: *mut fid) -> Result<&'a Arc<dyn Endpoint>> {
    // SAFETY: checked cast.
    Ok(&unsafe { EpObj::from_fid(p)? }.inner)
}

fn check_flags(flags: u64) -> Result<u64> {
    if flags & !USER_OP_FLAGS != 0 {
        Err(Errno::BADFLAGS)
    } else {
        Ok(flags)
    }
}

unsafe extern "C" fn ep_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the pointer C passed to fi_close.
    int_ret(|| unsafe { close_obj::<fid_ep, Arc<dyn Endpoint>>(f, |o| o.inner.close()) })
}

unsafe extern "C" fn ep_bind(f: *mut fid, b: *mut fid, flags: u64) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let obj = unsafe { EpObj::from_fid(f)? };
        if b.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: non-null object pointer; the class picks the checked cast below.
        let class = unsafe { (*b).fclass };
        let (target, refs) = match class {
            FI_CLASS_CQ => {
                // SAFETY: checked cast of the application's object pointer.
                let o = unsafe { CqObj::from_fid(b)? };
                (Bind::Cq(o.inner.cq.clone()), &o.refs)
            }
            FI_CLASS_CNTR => {
                // SAFETY: checked cast of the application's object pointer.
                let o = unsafe { CntrObj::from_fid(b)? };
                (Bind::Cntr(o.inner.clone()), &o.refs)
            }
            FI_CLASS_AV => {
                // SAFETY: checked cast of the application's object pointer.
                let o = unsafe { AvObj::from_fid(b)? };
                (Bind::Av(o.inner.clone()), &o.refs)
            }
            FI_CLASS_EQ => {
                // SAFETY: checked cast of the application's object pointer.
                let o = unsafe { EqObj::from_fid(b)? };
                (Bind::Eq(o.inner.eq.clone()), &o.refs)
            }
            _ => return Err(Errno::INVAL),
        };
        obj.inner.bind(target, flags)?;
        obj.hold(refs);
        Ok(())
    })
}

unsafe extern "C" fn ep_control(f: *mut fid, command: c_int, _arg: *mut c_void) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let e = unsafe { ep_fid(f)? };
        match command {
            FI_ENABLE => e.enable(),
            _ => Err(Errno::NOSYS),
        }
    })
}

// ---- fi_ops_ep ----

pub static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: size_of::<fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(ep_tx_ctx),
    rx_ctx: Some(ep_rx_ctx),
    rx_size_left: Some(ep_rx_size_left),
    tx_size_left: Some(ep_tx_size_left),
};

unsafe extern "C" fn ep_cancel(f: fid_t, context: *mut c_void) -> isize {
    // SAFETY: checked cast.
    ssize_ret(|| unsafe { ep_fid(f)? }.cancel(context as usize).map(|()| 0))
}

unsafe extern "C" fn ep_getopt(
    f: fid_t,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut usize,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let e = unsafe { ep_fid(f)? };
        if val.is_null() || len.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: `len` is readable and writable; `val` writable for `*len` bytes (fi_endpoint(3)).
        unsafe {
            let buf = core::slice::from_raw_parts_mut(val.cast::<u8>(), *len);
            let mut needed = 0;
            match e.getopt(level, name, buf, &mut needed) {
                Ok(n) => {
                    *len = n;
                    Ok(())
                }
                Err(Errno::TOOSMALL) => {
                    *len = needed;
                    Err(Errno::TOOSMALL)
                }
                Err(err) => Err(err),
            }
        }
    })
}

unsafe extern "C" fn ep_setopt(
    f: fid_t,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: usize,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let e = unsafe { ep_fid(f)? };
        // SAFETY: `val` readable for `len` bytes.
        let v = unsafe { app_slice(val.cast::<u8>(), len)? };
        e.setopt(level, name, v)
    })
}

unsafe extern "C" fn ep_tx_ctx(
    _s: *mut fid_ep,
    _i: c_int,
    _a: *mut fi_tx_attr,
    _t: *mut *mut fid_ep,
    _c: *mut c_void,
) -> c_int {
    // Scalable endpoints are not offered.
    Errno::NOSYS.neg()
}
unsafe extern "C" fn ep_rx_ctx(
    _s: *mut fid_ep,
    _i: c_int,
    _a: *mut fi_rx_attr,
    _r: *mut *mut fid_ep,
    _c: *mut c_void,
) -> c_int {
    Errno::NOSYS.neg()
}

unsafe extern "C" fn ep_rx_size_left(p: *mut fid_ep) -> isize {
    // SAFETY: checked cast.
    ssize_ret(|| unsafe { ep(p)? }.rx_size_left())
}
unsafe extern "C" fn ep_tx_size_left(p: *mut fid_ep) -> isize {
    // SAFETY: checked cast.
    ssize_ret(|| unsafe { ep(p)? }.tx_size_left())
}

// ---- fi_ops_cm ----

pub static CM_OPS: fi_ops_cm = fi_ops_cm {
    size: size_of::<fi_ops_cm>(),
    setname: Some(cm_setname),
    getname: Some(cm_getname),
    getpeer: Some(cm_getpeer),
    connect: Some(cm_connect),
    listen: Some(cm_listen),
    accept: Some(cm_accept),
    reject: Some(cm_reject),
    shutdown: Some(cm_shutdown),
    join: Some(cm_join),
};

unsafe extern "C" fn cm_setname(f: fid_t, addr: *mut c_void, len: usize) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let e = unsafe { ep_fid(f)? };
        // SAFETY: `addr` readable for `len` bytes.
        e.setname(unsafe { app_slice(addr.cast::<u8>(), len)? })
    })
}

unsafe extern "C" fn cm_getname(f: fid_t, addr: *mut c_void, len: *mut usize) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let e = unsafe { ep_fid(f)? };
        if len.is_null() {
            return Err(Errno::INVAL);
        }
        let name = e.getname()?;
        // SAFETY: `len` is a valid in/out size; `addr` writable for the given size
        // (fi_cm(3): -FI_ETOOSMALL with the needed size when short).
        unsafe {
            let room = *len;
            *len = name.len();
            if room < name.len() || addr.is_null() {
                return Err(Errno::TOOSMALL);
            }
            core::ptr::copy_nonoverlapping(name.as_ptr(), addr.cast::<u8>(), name.len());
        }
        Ok(())
    })
}

unsafe extern "C" fn cm_getpeer(_e: *mut fid_ep, _a: *mut c_void, _l: *mut usize) -> c_int {
    // Reliable-datagram endpoints have no connected peer.
    Errno::NOSYS.neg()
}
unsafe extern "C" fn cm_connect(
    _e: *mut fid_ep,
    _a: *const c_void,
    _p: *const c_void,
    _l: usize,
) -> c_int {
    Errno::NOSYS.neg()
}
unsafe extern "C" fn cm_listen(_p: *mut fid_pep) -> c_int {
    Errno::NOSYS.neg()
}
unsafe extern "C" fn cm_accept(_e: *mut fid_ep, _p: *const c_void, _l: usize) -> c_int {
    Errno::NOSYS.neg()
}
unsafe extern "C" fn cm_reject(
    _p: *mut fid_pep,
    _h: fid_t,
    _pa: *const c_void,
    _l: usize,
) -> c_int {
    Errno::NOSYS.neg()
}
unsafe extern "C" fn cm_shutdown(_e: *mut fid_ep, _f: u64) -> c_int {
    Errno::NOSYS.neg()
}
unsafe extern "C" fn cm_join(
    _e: *mut fid_ep,
    _a: *const c_void,
    _f: u64,
    _mc: *mut *mut fid_mc,
    _c: *mut c_void,
) -> c_int {
    Errno::NOSYS.neg()
}

// ---- messages (fi_ops_msg and fi_ops_tagged) ----

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

/// Everything a message call carries besides the endpoint and the buffers.
struct MsgArgs {
    addr: fi_addr_t,
    context: *mut c_void,
    data: u64,
    tag: u64,
    ignore: u64,
    flags: u64,
    call: Call,
}

#[inline(always)]
fn msg(
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

fn plain(addr: fi_addr_t, context: *mut c_void, tag: u64, ignore: u64) -> MsgArgs {
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

unsafe extern "C" fn msg_recv(
    p: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: fi_addr_t,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` stays valid until the receive completes (fi_msg(3)).
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        msg(
            &**e,
            &iov,
            &[desc as usize],
            plain(src, context, 0, 0),
            true,
            false,
        )
    })
}

unsafe extern "C" fn msg_recvv(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; iov/desc arrays valid for `count` (fi_msg(3)).
        let (e, iov, desc) = unsafe { (ep(p)?, app_iov(iov, count)?, app_desc(desc, count)) };
        msg(&**e, iov, desc, plain(src, context, 0, 0), true, false)
    })
}

unsafe extern "C" fn msg_recvmsg(p: *mut fid_ep, m: *const fi_msg, flags: u64) -> isize {
    ssize_ret(|| {
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
        msg(&**e, iov, desc, a, true, false)
    })
}

unsafe extern "C" fn msg_send(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until the send completes.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        msg(
            &**e,
            &iov,
            &[desc as usize],
            plain(dest, context, 0, 0),
            false,
            false,
        )
    })
}

unsafe extern "C" fn msg_sendv(
    p: *mut fid_ep,
    iov: *const iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for `count`.
        let (e, iov, desc) = unsafe { (ep(p)?, app_iov(iov, count)?, app_desc(desc, count)) };
        msg(&**e, iov, desc, plain(dest, context, 0, 0), false, false)
    })
}

unsafe extern "C" fn msg_sendmsg(p: *mut fid_ep, m: *const fi_msg, flags: u64) -> isize {
    ssize_ret(|| {
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
            tag: 0,
            ignore: 0,
            flags: check_flags(flags)?,
            call: Call::Msg,
        };
        msg(&**e, iov, desc, a, false, false)
    })
}

unsafe extern "C" fn msg_inject(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid for the call (inject copies before returning).
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let a = MsgArgs {
            addr: dest,
            context: core::ptr::null_mut(),
            data: 0,
            tag: 0,
            ignore: 0,
            flags: 0,
            call: Call::Inject,
        };
        msg(&**e, &iov, &[], a, false, false)
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until completion.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let a = MsgArgs {
            addr: dest,
            context,
            data,
            tag: 0,
            ignore: 0,
            flags: FI_REMOTE_CQ_DATA,
            call: Call::Plain,
        };
        msg(&**e, &iov, &[desc as usize], a, false, false)
    })
}

unsafe extern "C" fn msg_injectdata(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid for the call.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let a = MsgArgs {
            addr: dest,
            context: core::ptr::null_mut(),
            data,
            tag: 0,
            ignore: 0,
            flags: FI_REMOTE_CQ_DATA,
            call: Call::Inject,
        };
        msg(&**e, &iov, &[], a, false, false)
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until completion.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        msg(
            &**e,
            &iov,
            &[desc as usize],
            plain(src, context, tag, ignore),
            true,
            true,
        )
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for `count`.
        let (e, iov, desc) = unsafe { (ep(p)?, app_iov(iov, count)?, app_desc(desc, count)) };
        msg(
            &**e,
            iov,
            desc,
            plain(src, context, tag, ignore),
            true,
            true,
        )
    })
}

unsafe extern "C" fn tagged_recvmsg(p: *mut fid_ep, m: *const fi_msg_tagged, flags: u64) -> isize {
    ssize_ret(|| {
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
            ignore: m.ignore,
            flags: check_flags(flags)?,
            call: Call::Msg,
        };
        msg(&**e, iov, desc, a, true, true)
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until completion.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        msg(
            &**e,
            &iov,
            &[desc as usize],
            plain(dest, context, tag, 0),
            false,
            true,
        )
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for `count`.
        let (e, iov, desc) = unsafe { (ep(p)?, app_iov(iov, count)?, app_desc(desc, count)) };
        msg(&**e, iov, desc, plain(dest, context, tag, 0), false, true)
    })
}

unsafe extern "C" fn tagged_sendmsg(p: *mut fid_ep, m: *const fi_msg_tagged, flags: u64) -> isize {
    ssize_ret(|| {
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
            ignore: 0,
            flags: check_flags(flags)?,
            call: Call::Msg,
        };
        msg(&**e, iov, desc, a, false, true)
    })
}

unsafe extern "C" fn tagged_inject(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid for the call.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let a = MsgArgs {
            addr: dest,
            context: core::ptr::null_mut(),
            data: 0,
            tag,
            ignore: 0,
            flags: 0,
            call: Call::Inject,
        };
        msg(&**e, &iov, &[], a, false, true)
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until completion.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let a = MsgArgs {
            addr: dest,
            context,
            data,
            tag,
            ignore: 0,
            flags: FI_REMOTE_CQ_DATA,
            call: Call::Plain,
        };
        msg(&**e, &iov, &[desc as usize], a, false, true)
    })
}

unsafe extern "C" fn tagged_injectdata(
    p: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid for the call.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let a = MsgArgs {
            addr: dest,
            context: core::ptr::null_mut(),
            data,
            tag,
            ignore: 0,
            flags: FI_REMOTE_CQ_DATA,
            call: Call::Inject,
        };
        msg(&**e, &iov, &[], a, false, true)
    })
}

// ---- RMA ----

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

struct RmaArgs {
    addr: fi_addr_t,
    context: *mut c_void,
    data: u64,
    flags: u64,
    call: Call,
}

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

fn rma_plain(addr: fi_addr_t, context: *mut c_void) -> RmaArgs {
    RmaArgs {
        addr,
        context,
        data: 0,
        flags: 0,
        call: Call::Plain,
    }
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
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until completion (fi_rma(3)).
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let r = [fi_rma_iov { addr, len, key }];
        rma(
            &**e,
            &iov,
            &[desc as usize],
            &r,
            rma_plain(src, context),
            true,
        )
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for `count`.
        let (e, iov, desc) = unsafe { (ep(p)?, app_iov(iov, count)?, app_desc(desc, count)) };
        let r = [fi_rma_iov {
            addr,
            len: crate::sys::mem::iov_len(iov),
            key,
        }];
        rma(&**e, iov, desc, &r, rma_plain(src, context), true)
    })
}

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
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until completion.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let r = [fi_rma_iov { addr, len, key }];
        rma(
            &**e,
            &iov,
            &[desc as usize],
            &r,
            rma_plain(dest, context),
            false,
        )
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for `count`.
        let (e, iov, desc) = unsafe { (ep(p)?, app_iov(iov, count)?, app_desc(desc, count)) };
        let r = [fi_rma_iov {
            addr,
            len: crate::sys::mem::iov_len(iov),
            key,
        }];
        rma(&**e, iov, desc, &r, rma_plain(dest, context), false)
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid for the call.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let r = [fi_rma_iov { addr, len, key }];
        let a = RmaArgs {
            addr: dest,
            context: core::ptr::null_mut(),
            data: 0,
            flags: 0,
            call: Call::Inject,
        };
        rma(&**e, &iov, &[], &r, a, false)
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until completion.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let r = [fi_rma_iov { addr, len, key }];
        let a = RmaArgs {
            addr: dest,
            context,
            data,
            flags: FI_REMOTE_CQ_DATA,
            call: Call::Plain,
        };
        rma(&**e, &iov, &[desc as usize], &r, a, false)
    })
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
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid for the call.
        let (e, iov) = unsafe { (ep(p)?, [app_buf(buf, len)?]) };
        let r = [fi_rma_iov { addr, len, key }];
        let a = RmaArgs {
            addr: dest,
            context: core::ptr::null_mut(),
            data,
            flags: FI_REMOTE_CQ_DATA,
            call: Call::Inject,
        };
        rma(&**e, &iov, &[], &r, a, false)
    })
}

// ---- atomics ----

pub static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: size_of::<fi_ops_atomic>(),
    write: Some(atomic_write),
    writev: Some(atomic_writev),
    writemsg: Some(atomic_writemsg),
    inject: Some(atomic_inject),
    readwrite: Some(atomic_readwrite),
    readwritev: Some(atomic_readwritev),
    readwritemsg: Some(atomic_readwritemsg),
    compwrite: Some(atomic_compwrite),
    compwritev: Some(atomic_compwritev),
    compwritemsg: Some(atomic_compwritemsg),
    writevalid: Some(atomic_writevalid),
    readwritevalid: Some(atomic_readwritevalid),
    compwritevalid: Some(atomic_compwritevalid),
};

/// Byte size of one element of an atomic datatype. An unknown type is an atomic the endpoint
/// does not support: `FI_EOPNOTSUPP` (fi_atomic(3), as `fi_atomicvalid` answers for it).
fn dt_size(datatype: u32) -> Result<usize> {
    crate::util::atomic::datatype_size(datatype).ok_or(Errno::OPNOTSUPP)
}

/// One buffer of `count` elements.
///
/// # Safety
/// As `app_buf`.
unsafe fn ioc_buf(buf: *const c_void, count: usize, datatype: u32) -> Result<IoVec> {
    let len = count.checked_mul(dt_size(datatype)?).ok_or(Errno::INVAL)?;
    // SAFETY: forwarded.
    unsafe { app_buf(buf, len) }
}

/// Up to 4 `fi_ioc` entries as byte buffers (iov_limit of every provider here is ≤ 4).
///
/// # Safety
/// `ioc` NULL or valid for `count` entries, each naming memory valid until completion.
unsafe fn ioc_list(ioc: *const fi_ioc, count: usize, datatype: u32) -> Result<([IoVec; 4], usize)> {
    // SAFETY: forwarded.
    let v = unsafe { app_slice(ioc, count)? };
    if v.len() > 4 {
        return Err(Errno::INVAL);
    }
    let mut out = [IoVec::EMPTY; 4];
    for (o, i) in out.iter_mut().zip(v) {
        // SAFETY: forwarded.
        *o = unsafe { ioc_buf(i.addr, i.count, datatype)? };
    }
    Ok((out, v.len()))
}

struct AtomicArgs<'a> {
    kind: AtomicKind,
    iov: &'a [IoVec],
    desc: &'a [usize],
    compare: &'a [IoVec],
    compare_desc: &'a [usize],
    result: &'a [IoVec],
    result_desc: &'a [usize],
    addr: fi_addr_t,
    rma_ioc: &'a [fi_rma_ioc],
    datatype: u32,
    op: u32,
    context: *mut c_void,
    data: u64,
    flags: u64,
    call: Call,
}

fn atomic(e: &dyn Endpoint, a: AtomicArgs<'_>) -> Result<usize> {
    e.atomic(&AtomicOp {
        kind: a.kind,
        iov: a.iov,
        desc: a.desc,
        compare: a.compare,
        compare_desc: a.compare_desc,
        result: a.result,
        result_desc: a.result_desc,
        addr: a.addr,
        rma_ioc: a.rma_ioc,
        datatype: a.datatype,
        op: a.op,
        context: a.context as usize,
        data: a.data,
        flags: a.flags,
        call: a.call,
    })?;
    Ok(0)
}

unsafe extern "C" fn atomic_write(
    p: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until completion (fi_atomic(3)).
        let (e, iov) = unsafe { (ep(p)?, [ioc_buf(buf, count, datatype)?]) };
        let r = [fi_rma_ioc { addr, count, key }];
        let a = AtomicArgs {
            kind: AtomicKind::Write,
            iov: &iov,
            desc: &[desc as usize],
            compare: &[],
            compare_desc: &[],
            result: &[],
            result_desc: &[],
            addr: dest,
            rma_ioc: &r,
            datatype,
            op,
            context,
            data: 0,
            flags: 0,
            call: Call::Plain,
        };
        atomic(&**e, a)
    })
}

unsafe extern "C" fn atomic_writev(
    p: *mut fid_ep,
    iov: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for `count`.
        let (e, (v, n), desc) = unsafe {
            (
                ep(p)?,
                ioc_list(iov, count, datatype)?,
                app_desc(desc, count),
            )
        };
        let total = v[..n].iter().map(IoVec::len).sum::<usize>() / dt_size(datatype)?;
        let r = [fi_rma_ioc {
            addr,
            count: total,
            key,
        }];
        let a = AtomicArgs {
            kind: AtomicKind::Write,
            iov: &v[..n],
            desc,
            compare: &[],
            compare_desc: &[],
            result: &[],
            result_desc: &[],
            addr: dest,
            rma_ioc: &r,
            datatype,
            op,
            context,
            data: 0,
            flags: 0,
            call: Call::Plain,
        };
        atomic(&**e, a)
    })
}

/// Shared body of the three `*msg` atomic calls.
///
/// # Safety
/// Arguments as fi_atomic(3) defines them for the `*msg` calls.
#[allow(clippy::too_many_arguments)]
unsafe fn atomic_msg(
    p: *mut fid_ep,
    m: *const fi_msg_atomic,
    kind: AtomicKind,
    comparev: *const fi_ioc,
    compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> Result<usize> {
    // SAFETY: checked cast; descriptor valid for this call.
    let (e, m) = unsafe { (ep(p)?, m.as_ref().ok_or(Errno::INVAL)?) };
    // SAFETY: arrays inside `m` and the compare/result arrays are valid for their counts.
    unsafe {
        let (v, n) = ioc_list(m.msg_iov, m.iov_count, m.datatype)?;
        let (c, cn) = ioc_list(comparev, compare_count, m.datatype)?;
        let (r, rn) = ioc_list(resultv, result_count, m.datatype)?;
        let a = AtomicArgs {
            kind,
            iov: &v[..n],
            desc: app_desc(m.desc, m.iov_count),
            compare: &c[..cn],
            compare_desc: app_desc(compare_desc, compare_count),
            result: &r[..rn],
            result_desc: app_desc(result_desc, result_count),
            addr: m.addr,
            rma_ioc: app_slice(m.rma_iov, m.rma_iov_count)?,
            datatype: m.datatype,
            op: m.op,
            context: m.context,
            data: m.data,
            flags: check_flags(flags)?,
            call: Call::Msg,
        };
        atomic(&**e, a)
    }
}

unsafe extern "C" fn atomic_writemsg(p: *mut fid_ep, m: *const fi_msg_atomic, flags: u64) -> isize {
    ssize_ret(|| {
        // SAFETY: forwarded arguments; no compare/result arrays.
        unsafe {
            atomic_msg(
                p,
                m,
                AtomicKind::Write,
                core::ptr::null(),
                core::ptr::null_mut(),
                0,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
                0,
                flags,
            )
        }
    })
}

unsafe extern "C" fn atomic_inject(
    p: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid for the call.
        let (e, iov) = unsafe { (ep(p)?, [ioc_buf(buf, count, datatype)?]) };
        let r = [fi_rma_ioc { addr, count, key }];
        let a = AtomicArgs {
            kind: AtomicKind::Write,
            iov: &iov,
            desc: &[],
            compare: &[],
            compare_desc: &[],
            result: &[],
            result_desc: &[],
            addr: dest,
            rma_ioc: &r,
            datatype,
            op,
            context: core::ptr::null_mut(),
            data: 0,
            flags: 0,
            call: Call::Inject,
        };
        atomic(&**e, a)
    })
}

unsafe extern "C" fn atomic_readwrite(
    p: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    result: *mut c_void,
    result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; buffers valid until completion. FI_ATOMIC_READ has no operand,
        // so `buf` may be NULL for it.
        let (e, iov, res) = unsafe {
            let operand = if buf.is_null() && op == FI_ATOMIC_READ {
                IoVec::EMPTY
            } else {
                ioc_buf(buf, count, datatype)?
            };
            (ep(p)?, [operand], [ioc_buf(result, count, datatype)?])
        };
        let r = [fi_rma_ioc { addr, count, key }];
        let a = AtomicArgs {
            kind: AtomicKind::Fetch,
            iov: if iov[0].is_empty() { &[] } else { &iov },
            desc: &[desc as usize],
            compare: &[],
            compare_desc: &[],
            result: &res,
            result_desc: &[result_desc as usize],
            addr: dest,
            rma_ioc: &r,
            datatype,
            op,
            context,
            data: 0,
            flags: 0,
            call: Call::Plain,
        };
        atomic(&**e, a)
    })
}

unsafe extern "C" fn atomic_readwritev(
    p: *mut fid_ep,
    iov: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for their counts.
        unsafe {
            let e = ep(p)?;
            let (v, n) = ioc_list(iov, count, datatype)?;
            let (r, rn) = ioc_list(resultv, result_count, datatype)?;
            let total = r[..rn].iter().map(IoVec::len).sum::<usize>() / dt_size(datatype)?;
            let t = [fi_rma_ioc {
                addr,
                count: total,
                key,
            }];
            let a = AtomicArgs {
                kind: AtomicKind::Fetch,
                iov: &v[..n],
                desc: app_desc(desc, count),
                compare: &[],
                compare_desc: &[],
                result: &r[..rn],
                result_desc: app_desc(result_desc, result_count),
                addr: dest,
                rma_ioc: &t,
                datatype,
                op,
                context,
                data: 0,
                flags: 0,
                call: Call::Plain,
            };
            atomic(&**e, a)
        }
    })
}

unsafe extern "C" fn atomic_readwritemsg(
    p: *mut fid_ep,
    m: *const fi_msg_atomic,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    ssize_ret(|| {
        // SAFETY: forwarded arguments.
        unsafe {
            atomic_msg(
                p,
                m,
                AtomicKind::Fetch,
                core::ptr::null(),
                core::ptr::null_mut(),
                0,
                resultv,
                result_desc,
                result_count,
                flags,
            )
        }
    })
}

unsafe extern "C" fn atomic_compwrite(
    p: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    compare: *const c_void,
    compare_desc: *mut c_void,
    result: *mut c_void,
    result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; buffers valid until completion.
        let (e, iov, cmp, res) = unsafe {
            (
                ep(p)?,
                [ioc_buf(buf, count, datatype)?],
                [ioc_buf(compare, count, datatype)?],
                [ioc_buf(result, count, datatype)?],
            )
        };
        let r = [fi_rma_ioc { addr, count, key }];
        let a = AtomicArgs {
            kind: AtomicKind::Compare,
            iov: &iov,
            desc: &[desc as usize],
            compare: &cmp,
            compare_desc: &[compare_desc as usize],
            result: &res,
            result_desc: &[result_desc as usize],
            addr: dest,
            rma_ioc: &r,
            datatype,
            op,
            context,
            data: 0,
            flags: 0,
            call: Call::Plain,
        };
        atomic(&**e, a)
    })
}

unsafe extern "C" fn atomic_compwritev(
    p: *mut fid_ep,
    iov: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    comparev: *const fi_ioc,
    compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for their counts.
        unsafe {
            let e = ep(p)?;
            let (v, n) = ioc_list(iov, count, datatype)?;
            let (c, cn) = ioc_list(comparev, compare_count, datatype)?;
            let (r, rn) = ioc_list(resultv, result_count, datatype)?;
            let total = v[..n].iter().map(IoVec::len).sum::<usize>() / dt_size(datatype)?;
            let t = [fi_rma_ioc {
                addr,
                count: total,
                key,
            }];
            let a = AtomicArgs {
                kind: AtomicKind::Compare,
                iov: &v[..n],
                desc: app_desc(desc, count),
                compare: &c[..cn],
                compare_desc: app_desc(compare_desc, compare_count),
                result: &r[..rn],
                result_desc: app_desc(result_desc, result_count),
                addr: dest,
                rma_ioc: &t,
                datatype,
                op,
                context,
                data: 0,
                flags: 0,
                call: Call::Plain,
            };
            atomic(&**e, a)
        }
    })
}

unsafe extern "C" fn atomic_compwritemsg(
    p: *mut fid_ep,
    m: *const fi_msg_atomic,
    comparev: *const fi_ioc,
    compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    ssize_ret(|| {
        // SAFETY: forwarded arguments.
        unsafe {
            atomic_msg(
                p,
                m,
                AtomicKind::Compare,
                comparev,
                compare_desc,
                compare_count,
                resultv,
                result_desc,
                result_count,
                flags,
            )
        }
    })
}

/// # Safety
/// `count` NULL or writable.
unsafe fn valid(
    p: *mut fid_ep,
    kind: AtomicKind,
    datatype: u32,
    op: u32,
    count: *mut usize,
) -> Result<()> {
    // SAFETY: checked cast.
    let e = unsafe { ep(p)? };
    if count.is_null() {
        return Err(Errno::INVAL);
    }
    let n = e.atomic_valid(kind, datatype, op)?;
    // SAFETY: non-null out-parameter.
    unsafe { put(count, n) };
    Ok(())
}

unsafe extern "C" fn atomic_writevalid(
    p: *mut fid_ep,
    datatype: u32,
    op: u32,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded.
    int_ret(|| unsafe { valid(p, AtomicKind::Write, datatype, op, count) })
}
unsafe extern "C" fn atomic_readwritevalid(
    p: *mut fid_ep,
    datatype: u32,
    op: u32,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded.
    int_ret(|| unsafe { valid(p, AtomicKind::Fetch, datatype, op, count) })
}
unsafe extern "C" fn atomic_compwritevalid(
    p: *mut fid_ep,
    datatype: u32,
    op: u32,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded.
    int_ret(|| unsafe { valid(p, AtomicKind::Compare, datatype, op, count) })
}

// ---- collectives: not offered (no FI_COLLECTIVE capability) ----

pub static COLLECTIVE_OPS: fi_ops_collective = fi_ops_collective {
    size: size_of::<fi_ops_collective>(),
    barrier: Some(coll_barrier),
    broadcast: Some(coll_none),
    alltoall: Some(coll_none),
    allreduce: Some(coll_none),
    allgather: Some(coll_none),
    reduce_scatter: Some(coll_none),
    reduce: Some(coll_none),
    scatter: Some(coll_none),
    gather: Some(coll_none),
    msg: Some(coll_none),
    barrier2: Some(coll_barrier2),
};

unsafe extern "C" fn coll_barrier(_e: *mut fid_ep, _a: fi_addr_t, _c: *mut c_void) -> isize {
    Errno::NOSYS.neg() as isize
}
unsafe extern "C" fn coll_barrier2(
    _e: *mut fid_ep,
    _a: fi_addr_t,
    _f: u64,
    _c: *mut c_void,
) -> isize {
    Errno::NOSYS.neg() as isize
}
unsafe extern "C" fn coll_none(_e: *mut fid_ep) -> isize {
    Errno::NOSYS.neg() as isize
}
