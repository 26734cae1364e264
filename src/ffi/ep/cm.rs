//! `fi_ops_cm` (fi_cm(3)): naming an endpoint (`fi_setname`, `fi_getname`); the connection
//! calls, which reliable-datagram endpoints do not have, answer `-FI_ENOSYS`.

use core::ffi::{c_int, c_void};
use core::mem::size_of;

use super::ep_fid;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::ffi::{app_slice, int_ret};

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
        // SAFETY: `len` is a valid in/out size; `addr` writable for the given size.
        unsafe { put_name(&e.getname()?, addr, len) }
    })
}

/// Copies a name out (fi_cm(3)): `*len` becomes its size; `-FI_ETOOSMALL` if it does not fit
/// in `*len` bytes at `addr` (or `addr` is NULL).
///
/// # Safety
/// `len` is readable and writable; `addr` is NULL or writable for `*len` bytes.
unsafe fn put_name(name: &[u8], addr: *mut c_void, len: *mut usize) -> Result<()> {
    // SAFETY: as the caller promises.
    unsafe {
        let room = *len;
        *len = name.len();
        if room < name.len() || addr.is_null() {
            return Err(Errno::TOOSMALL);
        }
        core::ptr::copy_nonoverlapping(name.as_ptr(), addr.cast::<u8>(), name.len());
    }
    Ok(())
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
