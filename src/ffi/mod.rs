//! The C boundary: every exported `fi_*` function and every ops-table slot.
//!
//! Contract (the same for every entry point):
//! - pointers are checked (NULL, object class) before use; a bad one is `-FI_EINVAL`;
//! - arguments are decoded into Rust values and the work is done by `core`, `util` or a provider;
//! - out-parameters are written only on success;
//! - errors are returned as `-FI_E*`; a panic never crosses: it becomes `-FI_EOTHER`.
//!
//! Objects handed to C are `#[repr(C)]` Rust structs whose first field is the public `fid_*`
//! header (see `object`), so the ops tables here are the only place that turns a C pointer back
//! into Rust.
#![allow(unsafe_code)]

use core::ffi::{c_char, c_int, c_void};
use std::ffi::CStr;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi::types::iovec;
use crate::core::{Errno, Result};
use crate::sys::mem::IoVec;

pub mod av;
pub mod domain;
pub mod ep;
pub mod exports;
pub mod info;
pub mod log;
pub mod mr;
pub mod object;
pub mod queues;
pub mod symver;
pub mod tostr;

/// Runs an entry-point body; a panic becomes `on_panic`.
#[inline(always)]
pub(crate) fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// Body returning `int`: 0 or `-FI_E*`.
#[inline(always)]
pub(crate) fn int_ret(f: impl FnOnce() -> Result<()>) -> c_int {
    guard(Errno::OTHER.neg(), || match f() {
        Ok(()) => 0,
        Err(e) => e.neg(),
    })
}

/// Body returning `ssize_t`: a count or `-FI_E*`.
#[inline(always)]
pub(crate) fn ssize_ret(f: impl FnOnce() -> Result<usize>) -> isize {
    guard(Errno::OTHER.neg() as isize, || match f() {
        Ok(n) => n as isize,
        Err(e) => e.neg() as isize,
    })
}

/// A C string argument: None for NULL, `EINVAL` for invalid UTF-8.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
pub(crate) unsafe fn opt_str<'a>(p: *const c_char) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map(Some).map_err(|_| Errno::INVAL)
}

/// One application buffer (`buf`, `len`); NULL with a non-zero length is `EINVAL`.
///
/// # Safety
/// The libfabric contract of the calling entry point: `buf..buf+len` stays valid until the
/// operation completes.
pub(crate) unsafe fn app_buf(buf: *const c_void, len: usize) -> Result<IoVec> {
    if buf.is_null() && len != 0 {
        return Err(Errno::INVAL);
    }
    // SAFETY: forwarded from the caller's contract.
    Ok(unsafe { IoVec::new(buf as *mut u8, len) })
}

/// An application iovec array, viewed in place (`IoVec` has the layout of `struct iovec`).
///
/// # Safety
/// `iov` is NULL or points to `count` iovecs that stay valid for the call, each naming memory
/// valid until the operation completes (the libfabric contract).
pub(crate) unsafe fn app_iov<'a>(iov: *const iovec, count: usize) -> Result<&'a [IoVec]> {
    if count == 0 {
        return Ok(&[]);
    }
    if iov.is_null() || count > 1 << 16 {
        return Err(Errno::INVAL);
    }
    // SAFETY: IoVec is #[repr(C)] {*mut u8, usize}, the layout of struct iovec; the array is
    // valid for `count` elements per the caller's contract. Entries with NULL bases and non-zero
    // lengths are rejected below so that no IoVec names memory at address 0.
    let v = unsafe { core::slice::from_raw_parts(iov.cast::<IoVec>(), count) };
    if v.iter().any(|e| e.as_ptr().is_null() && !e.is_empty()) {
        return Err(Errno::INVAL);
    }
    Ok(v)
}

/// A descriptor array (`void **desc`) of `count` entries, as opaque words; empty for NULL.
///
/// # Safety
/// `desc` is NULL or valid for `count` pointers for the call.
pub(crate) unsafe fn app_desc<'a>(desc: *mut *mut c_void, count: usize) -> &'a [usize] {
    if desc.is_null() || count == 0 {
        return &[];
    }
    // SAFETY: pointers and usize share size and alignment; valid for `count` per the contract.
    unsafe { core::slice::from_raw_parts(desc.cast::<usize>(), count) }
}

/// A typed array argument; empty for count 0, `EINVAL` for NULL with a count.
///
/// # Safety
/// `p` is NULL or valid for `count` elements for the call.
pub(crate) unsafe fn app_slice<'a, T>(p: *const T, count: usize) -> Result<&'a [T]> {
    if count == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: non-null and valid for `count` elements per the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(p, count) })
}

/// Writes an out-parameter if it is non-NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-null and writable per the caller's contract.
        unsafe { p.write(v) };
    }
}
