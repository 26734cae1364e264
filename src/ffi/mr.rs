//! Memory regions (fi_mr(3)).

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use std::sync::Arc;

use super::object::{
    DomainObj, EpObj, MrObj, close_obj, fi_ops_with, fid_header, fid_kind, fid_no_ops_open,
};
use super::{app_buf, app_iov, int_ret, put};
use crate::abi::compat::mr_attr_size;
use crate::abi::consts::*;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::sys::mem::IoVec;
use crate::util::mr::{Mr, MrRequest};

pub static MR_FI_OPS: fi_ops = fi_ops_with(mr_close, mr_bind, mr_control, fid_no_ops_open);
fid_kind!(fid_mr, FI_CLASS_MR, MR_FI_OPS);

pub static MR_OPS: fi_ops_mr = fi_ops_mr {
    size: size_of::<fi_ops_mr>(),
    reg: Some(mr_reg),
    regv: Some(mr_regv),
    regattr: Some(mr_regattr),
};

/// Registration flags accepted (fi_mr(3)); device-memory flags are refused with the rest.
const REG_FLAGS: u64 = 0;

fn register(
    d: &DomainObj,
    req: MrRequest,
    context: *mut c_void,
    out: *mut *mut fid_mr,
) -> Result<()> {
    if out.is_null() {
        return Err(Errno::INVAL);
    }
    if req.flags & !REG_FLAGS != 0 {
        return Err(Errno::BADFLAGS);
    }
    let mr = d.inner.mr_reg(&req)?;
    let header = fid_mr {
        fid: fid_header(FI_CLASS_MR, context, &MR_FI_OPS),
        mem_desc: core::ptr::null_mut(),
        key: mr.key(),
    };
    let obj = MrObj::create(header, Some(&d.refs), d.api_version, mr);
    // The descriptor is the object itself: providers that want it can map it back.
    // SAFETY: `obj` was just created and is exclusively ours until handed out.
    unsafe {
        (*obj).fid.mem_desc = obj.cast();
        put(out, obj.cast());
    }
    Ok(())
}

/// # Safety
/// `f` is the domain pointer passed to fi_mr_reg and friends.
unsafe fn domain<'a>(f: *mut fid) -> Result<&'a DomainObj> {
    // SAFETY: checked cast.
    unsafe { DomainObj::from_fid(f) }
}

unsafe extern "C" fn mr_reg(
    f: *mut fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast; the region stays valid until the MR is closed (fi_mr(3)).
        let (d, iov) = unsafe { (domain(f)?, app_buf(buf, len)?) };
        let req = MrRequest {
            iov: vec![iov],
            access,
            offset,
            requested_key,
            flags,
            context: context as usize,
            ..Default::default()
        };
        register(d, req, context, mr)
    })
}

unsafe extern "C" fn mr_regv(
    f: *mut fid,
    iov: *const iovec,
    count: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast; regions valid until the MR is closed.
        let (d, iov) = unsafe { (domain(f)?, app_iov(iov, count)?) };
        let req = MrRequest {
            iov: iov.to_vec(),
            access,
            offset,
            requested_key,
            flags,
            context: context as usize,
            ..Default::default()
        };
        register(d, req, context, mr)
    })
}

unsafe extern "C" fn mr_regattr(
    f: *mut fid,
    attr: *const fi_mr_attr,
    flags: u64,
    mr: *mut *mut fid_mr,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let d = unsafe { domain(f)? };
        if attr.is_null() {
            return Err(Errno::INVAL);
        }
        // Read only what the caller's API version defines (abi-reference §1).
        let size = mr_attr_size(d.api_version);
        // SAFETY: `attr` is valid for `size` bytes; the rest of `a` stays zeroed.
        let a: fi_mr_attr = unsafe {
            let mut a: fi_mr_attr = core::mem::zeroed();
            core::ptr::copy_nonoverlapping(
                attr.cast::<u8>(),
                (&mut a as *mut fi_mr_attr).cast::<u8>(),
                size,
            );
            a
        };
        if flags & FI_MR_DMABUF != 0 {
            return Err(Errno::NOSYS);
        }
        // SAFETY: `mr_iov` valid for `iov_count` entries naming memory valid until close.
        let iov: Vec<IoVec> = unsafe { app_iov(a.mr_iov, a.iov_count)? }.to_vec();
        let req = MrRequest {
            iov,
            access: a.access,
            offset: a.offset,
            requested_key: a.requested_key,
            flags,
            context: a.context as usize,
            iface: a.iface,
            device: a.device,
        };
        if a.auth_key_size != 0 {
            return Err(Errno::NOSYS);
        }
        register(d, req, a.context, mr)
    })
}

unsafe extern "C" fn mr_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the pointer C passed to fi_close.
    int_ret(|| unsafe {
        close_obj::<fid_mr, Arc<Mr>>(f, |o| {
            o.inner.deregister();
            Ok(())
        })
    })
}

unsafe extern "C" fn mr_bind(f: *mut fid, b: *mut fid, _flags: u64) -> c_int {
    int_ret(|| {
        // SAFETY: checked casts.
        let (m, e) = unsafe { (MrObj::from_fid(f)?, EpObj::from_fid(b)?) };
        // FI_MR_ENDPOINT: binding to an endpoint is accepted; the region is usable from any
        // endpoint of the domain once enabled.
        m.hold(&e.refs);
        Ok(())
    })
}

unsafe extern "C" fn mr_control(f: *mut fid, command: c_int, _arg: *mut c_void) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let m = unsafe { MrObj::from_fid(f)? };
        match command {
            FI_ENABLE => {
                m.inner.enable();
                Ok(())
            }
            _ => Err(Errno::NOSYS),
        }
    })
}
