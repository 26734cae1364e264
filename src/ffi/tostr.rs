//! `fi_tostr`, `fi_tostr_r` and the NIC's `tostr` slot.

use core::ffi::{c_char, c_int, c_void};

use crate::abi::types::fid;
use crate::core::Errno;

/// # Safety
/// fi_tostr(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_tostr(_data: *const c_void, _datatype: u32) -> *mut c_char {
    core::ptr::null_mut()
}

/// # Safety
/// fi_tostr_r(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_tostr_r(
    _buf: *mut c_char,
    _len: usize,
    _data: *const c_void,
    _datatype: u32,
) -> *mut c_char {
    core::ptr::null_mut()
}

pub(crate) unsafe extern "C" fn nic_tostr(_f: *const fid, _buf: *mut c_char, _len: usize) -> c_int {
    Errno::NOSYS.neg()
}

/// # Safety
/// fi_open(3) (fi_provider(3) "fi_open"): `name` a C string, `fid` writable.
///
/// Names (case-insensitive): `"logging"` gives the logging object whose bind imports an
/// application's `fid_logging`. `"mr_cache"` is `-FI_ENOSYS`, as any other name: this library
/// keeps no registration cache, so there is no cache object to hand out and no memory monitor
/// it could use; callers such as Open MPI treat the error as "no cache to feed" and go on.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_open(
    version: u32,
    name: *const c_char,
    _attr: *mut c_void,
    attr_len: usize,
    flags: u64,
    fid: *mut *mut fid,
    context: *mut c_void,
) -> c_int {
    super::int_ret(|| {
        // SAFETY: NULL or a C string per fi_open(3).
        let name = unsafe { super::opt_str(name) }?.ok_or(Errno::INVAL)?;
        if fid.is_null() {
            return Err(Errno::INVAL);
        }
        if name.eq_ignore_ascii_case("logging") {
            let obj = super::log::open_logging(version, attr_len, flags, context)?;
            // SAFETY: checked non-null out-parameter.
            unsafe { *fid = obj };
            return Ok(());
        }
        Err(Errno::NOSYS)
    })
}
