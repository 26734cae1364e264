//! Endpoints (fi_endpoint(3)): the endpoint object, `fi_ep_bind`, `fi_control`, and the
//! `fi_ops_ep` table (cancel, options, sizes). Each other ops table of an endpoint has its file:
//! `cm`, `msg`, `tagged`, `rma`, `atomic`, `collective`.
//!
//! Every data call is decoded into one `MsgOp`/`RmaOp`/`AtomicOp` and handed to the provider's
//! endpoint; `op.call` says which family of entry point was used.

mod atomic;
mod cm;
mod collective;
mod msg;
mod rma;
mod tagged;

pub use atomic::ATOMIC_OPS;
pub use cm::CM_OPS;
pub use collective::COLLECTIVE_OPS;
pub use msg::MSG_OPS;
pub use rma::RMA_OPS;
pub use tagged::TAGGED_OPS;

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use std::sync::Arc;

use super::object::{
    AvObj, CntrObj, EpObj, Refs, close_obj, fid_header, fid_kind, fid_no_ops_open, fid_no_ops_set,
    fid_no_tostr,
};
use super::queues::{CqObj, EqObj};
use super::{app_slice, int_ret, ssize_ret};
use crate::abi::consts::*;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::util::ep::USER_OP_FLAGS;
use crate::util::{Bind, Endpoint};

pub static EP_FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close: Some(ep_close),
    bind: Some(ep_bind),
    control: Some(ep_control),
    ops_open: Some(fid_no_ops_open),
    tostr: Some(fid_no_tostr),
    ops_set: Some(fid_no_ops_set),
};
fid_kind!(fid_ep, FI_CLASS_EP, EP_FI_OPS);

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
        // SAFETY: checked casts of the application's object pointers.
        let (obj, (target, refs)) = unsafe { (EpObj::from_fid(f)?, bind_target(b)?) };
        obj.inner.bind(target, flags)?;
        obj.hold(refs);
        Ok(())
    })
}

/// What `fi_ep_bind` binds: a CQ, counter, AV or EQ, and the references that hold it.
///
/// # Safety
/// `b` is an application pointer.
unsafe fn bind_target<'a>(b: *mut fid) -> Result<(Bind, &'a Refs)> {
    if b.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: non-null object pointer; the class picks the checked cast below.
    let class = unsafe { (*b).fclass };
    Ok(match class {
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
    // SAFETY: checked cast; the out-parameters as fi_endpoint(3) defines them.
    int_ret(|| unsafe { getopt(ep_fid(f)?, level, name, val, len) })
}

/// `fi_getopt` into the application's `val` of `*len` bytes; `*len` becomes the option's size
/// (or, with `-FI_ETOOSMALL`, the size needed).
///
/// # Safety
/// `len` is NULL or readable and writable; `val` is NULL or writable for `*len` bytes.
unsafe fn getopt(
    e: &Arc<dyn Endpoint>,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut usize,
) -> Result<()> {
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
