//! Address vectors (fi_av(3)).

use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;
use core::ptr;
use std::ffi::CStr;
use std::sync::Arc;

use super::object::{
    AvObj, Refs, close_obj, fi_ops_with, fid_header, fid_kind, fid_no_bind, fid_no_control,
    fid_no_ops_open,
};
use super::{int_ret, opt_str};
use crate::abi::consts::*;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::util::av::Av;

pub static AV_FI_OPS: fi_ops = fi_ops_with(av_close, fid_no_bind, fid_no_control, fid_no_ops_open);
fid_kind!(fid_av, FI_CLASS_AV, AV_FI_OPS);

pub static AV_OPS: fi_ops_av = fi_ops_av {
    size: size_of::<fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(av_insertsvc),
    insertsym: Some(av_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: Some(av_set),
    insert_auth_key: Some(av_insert_auth_key),
    lookup_auth_key: Some(av_lookup_auth_key),
    set_user_id: Some(av_set_user_id),
};

pub fn av_to_c(av: Arc<Av>, parent: &Refs, api_version: u32, context: *mut c_void) -> *mut fid_av {
    let header = fid_av {
        fid: fid_header(FI_CLASS_AV, context, &AV_FI_OPS),
        ops: &AV_OPS,
    };
    AvObj::create(header, Some(parent), api_version, av).cast()
}

unsafe extern "C" fn av_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the pointer C passed to fi_close.
    int_ret(|| unsafe { close_obj::<fid_av, Arc<Av>>(f, |_| Ok(())) })
}

/// # Safety
/// Application pointer.
unsafe fn av<'a>(p: *mut fid_av) -> Result<&'a Arc<Av>> {
    // SAFETY: checked cast.
    Ok(&unsafe { AvObj::from_ptr(p)? }.inner)
}

const INSERT_FLAGS: u64 = FI_MORE | FI_SYNC_ERR | FI_AV_USER_ID | FI_FIREWALL_ADDR;

/// Inserts `addrs` one by one, filling `fi_addr` (and the FI_SYNC_ERR array in `context`);
/// returns how many succeeded (fi_av(3)).
///
/// # Safety
/// `fi_addr` NULL or valid for `addrs.len()` entries (read too, with FI_AV_USER_ID);
/// with FI_SYNC_ERR, `context` valid for `addrs.len()` ints.
unsafe fn insert_all(
    av: &Av,
    addrs: &[Result<Vec<u8>>],
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> Result<usize> {
    if flags & !INSERT_FLAGS != 0 {
        return Err(Errno::BADFLAGS);
    }
    if flags & FI_AV_USER_ID != 0 && fi_addr.is_null() {
        return Err(Errno::INVAL);
    }
    let mut ok = 0;
    for (i, a) in addrs.iter().enumerate() {
        // SAFETY: `fi_addr` valid for addrs.len() entries per the contract.
        let user = (flags & FI_AV_USER_ID != 0).then(|| unsafe { *fi_addr.add(i) });
        let r = a.as_ref().map_err(|e| *e).and_then(|a| av.insert(a, user));
        // SAFETY: per the contract.
        unsafe {
            if !fi_addr.is_null() {
                *fi_addr.add(i) = *r.as_ref().unwrap_or(&FI_ADDR_NOTAVAIL);
            }
            if flags & FI_SYNC_ERR != 0 && !context.is_null() {
                *context.cast::<c_int>().add(i) = r.as_ref().map_or_else(|e| e.neg(), |_| 0);
            }
        }
        if r.is_ok() {
            ok += 1;
        }
    }
    Ok(ok)
}

unsafe extern "C" fn av_insert(
    p: *mut fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    super::guard(Errno::OTHER.neg(), || {
        let r = (|| {
            // SAFETY: checked cast.
            let av = unsafe { av(p)? };
            if addr.is_null() && count != 0 {
                return Err(Errno::INVAL);
            }
            let mut list = Vec::with_capacity(count);
            let mut off = 0usize;
            for _ in 0..count {
                // SAFETY: `addr` holds `count` packed addresses (fi_av(3)): fixed-size ones, or
                // NUL-terminated strings for FI_ADDR_STR.
                let bytes = unsafe {
                    let at = addr.cast::<u8>().add(off);
                    match av.codec().addrlen() {
                        Some(n) => core::slice::from_raw_parts(at, n),
                        None => CStr::from_ptr(at.cast::<c_char>()).to_bytes(),
                    }
                };
                off += bytes.len() + usize::from(av.codec().addrlen().is_none());
                list.push(Ok(bytes.to_vec()));
            }
            // SAFETY: out arrays valid for `count` per fi_av_insert(3).
            unsafe { insert_all(av, &list, fi_addr, flags, context) }
        })();
        match r {
            Ok(n) => n as c_int,
            Err(e) => e.neg(),
        }
    })
}

unsafe extern "C" fn av_insertsvc(
    p: *mut fid_av,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    super::guard(Errno::OTHER.neg(), || {
        let r = (|| {
            // SAFETY: checked cast; C strings.
            let (av, node, service) = unsafe { (av(p)?, opt_str(node)?, opt_str(service)?) };
            let (Some(node), Some(service)) = (node, service) else {
                return Err(Errno::INVAL);
            };
            let a = av.codec().resolve(node, service);
            // SAFETY: out arrays valid for one entry.
            unsafe { insert_all(av, &[a], fi_addr, flags, context) }
        })();
        match r {
            Ok(n) => n as c_int,
            Err(e) => e.neg(),
        }
    })
}

/// The `i`-th name of a symmetric range: the trailing number of `base` plus `i`.
fn nth_name(base: &str, i: usize) -> Option<String> {
    let digits = base.len() - base.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return if i == 0 { Some(base.to_string()) } else { None };
    }
    let (head, num) = base.split_at(base.len() - digits);
    let n: u64 = num.parse().ok()?;
    Some(format!("{head}{}", n.checked_add(i as u64)?))
}

unsafe extern "C" fn av_insertsym(
    p: *mut fid_av,
    node: *const c_char,
    nodecnt: usize,
    service: *const c_char,
    svccnt: usize,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    super::guard(Errno::OTHER.neg(), || {
        let r = (|| {
            // SAFETY: checked cast; C strings.
            let (av, node, service) = unsafe { (av(p)?, opt_str(node)?, opt_str(service)?) };
            let (Some(node), Some(service)) = (node, service) else {
                return Err(Errno::INVAL);
            };
            if nodecnt == 0 || svccnt == 0 {
                return Err(Errno::INVAL);
            }
            let mut list = Vec::new();
            for n in 0..nodecnt {
                for s in 0..svccnt {
                    list.push(match (nth_name(node, n), nth_name(service, s)) {
                        (Some(n), Some(s)) => av.codec().resolve(&n, &s),
                        _ => Err(Errno::INVAL),
                    });
                }
            }
            // SAFETY: out arrays valid for nodecnt × svccnt entries (fi_av(3)).
            unsafe { insert_all(av, &list, fi_addr, flags, context) }
        })();
        match r {
            Ok(n) => n as c_int,
            Err(e) => e.neg(),
        }
    })
}

unsafe extern "C" fn av_remove(
    p: *mut fid_av,
    fi_addr: *mut fi_addr_t,
    count: usize,
    flags: u64,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast; `fi_addr` valid for `count`.
        let (av, list) = unsafe { (av(p)?, super::app_slice(fi_addr.cast_const(), count)?) };
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        let mut first_err = Ok(());
        for &a in list {
            if let Err(e) = av.remove(a) {
                first_err = first_err.and(Err(e));
            }
        }
        first_err
    })
}

unsafe extern "C" fn av_lookup(
    p: *mut fid_av,
    fi_addr: fi_addr_t,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let av = unsafe { av(p)? };
        if addrlen.is_null() {
            return Err(Errno::INVAL);
        }
        let a = av.lookup(fi_addr)?;
        // FI_ADDR_STR names are returned with their terminating NUL.
        let mut bytes = a.to_vec();
        if av.codec().addrlen().is_none() {
            bytes.push(0);
        }
        // SAFETY: `addrlen` in/out; `addr` writable for the given size (fi_av(3): truncated,
        // with the full size reported).
        unsafe {
            let room = *addrlen;
            if !addr.is_null() {
                ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), room.min(bytes.len()));
            }
            *addrlen = bytes.len();
        }
        Ok(())
    })
}

unsafe extern "C" fn av_straddr(
    p: *mut fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    super::guard(ptr::null(), || {
        // SAFETY: checked cast.
        let Ok(av) = (unsafe { av(p) }) else {
            return ptr::null();
        };
        if addr.is_null() || len.is_null() {
            return ptr::null();
        }
        // SAFETY: `addr` is one address of the AV's format.
        let bytes = unsafe {
            match av.codec().addrlen() {
                Some(n) => core::slice::from_raw_parts(addr.cast::<u8>(), n),
                None => CStr::from_ptr(addr.cast::<c_char>()).to_bytes(),
            }
        };
        let text = av.codec().straddr(bytes);
        // SAFETY: `len` in/out; `buf` writable for `*len` bytes (fi_av(3): truncated, NUL
        // terminated, full size incl. NUL reported).
        unsafe {
            let room = *len;
            if !buf.is_null() && room > 0 {
                let n = text.len().min(room - 1);
                ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
            *len = text.len() + 1;
        }
        buf
    })
}

unsafe extern "C" fn av_set(
    _p: *mut fid_av,
    _a: *mut fi_av_set_attr,
    _s: *mut *mut fid_av_set,
    _c: *mut c_void,
) -> c_int {
    // AV sets serve collectives, which are not offered.
    Errno::NOSYS.neg()
}

unsafe extern "C" fn av_insert_auth_key(
    _p: *mut fid_av,
    _k: *const c_void,
    _s: usize,
    _a: *mut fi_addr_t,
    _f: u64,
) -> c_int {
    // Authorization keys (FI_AV_AUTH_KEY) are not offered.
    Errno::NOSYS.neg()
}

unsafe extern "C" fn av_lookup_auth_key(
    _p: *mut fid_av,
    _a: fi_addr_t,
    _k: *mut c_void,
    _s: *mut usize,
) -> c_int {
    Errno::NOSYS.neg()
}

unsafe extern "C" fn av_set_user_id(
    p: *mut fid_av,
    fi_addr: fi_addr_t,
    user_id: fi_addr_t,
    flags: u64,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let av = unsafe { av(p)? };
        if flags != 0 {
            return Err(Errno::BADFLAGS);
        }
        av.set_user_id(fi_addr, user_id)
    })
}

#[cfg(test)]
mod tests {
    use super::nth_name;

    #[test]
    fn symmetric_names() {
        assert_eq!(nth_name("10.0.0.9", 2).as_deref(), Some("10.0.0.11"));
        assert_eq!(nth_name("4000", 1).as_deref(), Some("4001"));
        assert_eq!(nth_name("host", 0).as_deref(), Some("host"));
        assert_eq!(nth_name("host", 1), None);
    }
}
