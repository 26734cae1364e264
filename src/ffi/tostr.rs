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
/// fi_open(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_open(
    _version: u32,
    _name: *const c_char,
    _attr: *mut c_void,
    _attr_len: usize,
    _flags: u64,
    _fid: *mut *mut fid,
    _context: *mut c_void,
) -> c_int {
    Errno::NOSYS.neg()
}
