//! Logging and parameter entry points (fi_log(3)-style calls of `providers/fi_log.h`,
//! fi_provider(3) parameters, `fi_getparams`). `fi_log` and `fi_param_define` are variadic and
//! live in `c/variadic.c`, which formats and calls the `fabric_*` functions here.

use core::ffi::{c_char, c_int, c_void};
use core::ptr;
use std::ffi::{CStr, CString};

use super::{int_ret, opt_str};
use crate::abi::types::{fi_param, fi_provider};
use crate::core::Errno;
use crate::core::log::{self, Level, Subsys};
use crate::core::params::{self, ParamType};

/// The provider name of a `struct fi_provider` (NULL: the core).
///
/// # Safety
/// `prov` is NULL or a valid provider whose name is NULL or a C string.
unsafe fn prov_name(prov: *const fi_provider) -> Option<String> {
    // SAFETY: per the contract.
    unsafe {
        let p = prov.as_ref()?;
        if p.name.is_null() {
            return None;
        }
        Some(CStr::from_ptr(p.name).to_string_lossy().into_owned())
    }
}

fn subsys(v: u32) -> Option<Subsys> {
    Some(match v {
        0 => Subsys::Core,
        1 => Subsys::Fabric,
        2 => Subsys::Domain,
        3 => Subsys::EpCtrl,
        4 => Subsys::EpData,
        5 => Subsys::Av,
        6 => Subsys::Cq,
        7 => Subsys::Eq,
        8 => Subsys::Mr,
        9 => Subsys::Cntr,
        _ => return None,
    })
}

/// # Safety
/// fi_log_enabled as declared in `rdma/providers/fi_log.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_log_enabled(prov: *const fi_provider, level: u32, sub: u32) -> c_int {
    super::guard(0, || {
        // SAFETY: forwarded.
        let name = unsafe { prov_name(prov) }.unwrap_or_else(|| "core".into());
        match (Level::from_u32(level), subsys(sub)) {
            (Some(l), Some(s)) => c_int::from(log::enabled(&name, l, s)),
            _ => 0,
        }
    })
}

/// # Safety
/// fi_log_ready as declared in `rdma/providers/fi_log.h`: enabled and the rate limit allows
/// another line now (`showtime` holds the next allowed time in ms).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_log_ready(prov: *const fi_provider, level: u32, sub: u32, showtime: *mut u64) -> c_int {
    super::guard(0, || {
        // SAFETY: forwarded.
        if unsafe { fi_log_enabled(prov, level, sub) } == 0 {
            return 0;
        }
        if showtime.is_null() {
            return 1;
        }
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        // SAFETY: non-null in/out parameter.
        unsafe {
            if now < *showtime {
                return 0;
            }
            *showtime = now + log::interval_ms();
        }
        1
    })
}

/// Called by `fi_log` in `c/variadic.c` with the formatted message.
///
/// # Safety
/// Pointers are NULL or C strings; `prov` NULL or a valid provider.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fabric_log_message(
    prov: *const fi_provider,
    level: c_int,
    sub: c_int,
    func: *const c_char,
    line: c_int,
    msg: *const c_char,
) {
    super::guard((), || {
        // SAFETY: per the contract.
        let name = unsafe { prov_name(prov) }.unwrap_or_else(|| "core".into());
        let (Some(l), Some(s)) = (Level::from_u32(level as u32), subsys(sub as u32)) else {
            return;
        };
        if !log::enabled(&name, l, s) {
            return;
        }
        // SAFETY: C strings or NULL.
        let (func, msg) =
            unsafe { (opt_str(func).ok().flatten().unwrap_or(""), opt_str(msg).ok().flatten().unwrap_or("")) };
        log::write(&name, l, s, func, line.max(0) as u32, format_args!("{msg}"));
    })
}

/// Called by `fi_param_define` in `c/variadic.c` with the formatted help text.
///
/// # Safety
/// Pointers are NULL or C strings; `prov` NULL or a valid provider.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fabric_param_define(
    prov: *const fi_provider,
    name: *const c_char,
    type_: c_int,
    help: *const c_char,
) -> c_int {
    int_ret(|| {
        // SAFETY: per the contract.
        let (pname, name, help) = unsafe { (prov_name(prov), opt_str(name)?, opt_str(help)?) };
        let name = name.ok_or(Errno::INVAL)?;
        let t = ParamType::from_u32(type_ as u32).ok_or(Errno::INVAL)?;
        params::define(pname.as_deref(), name, t, help.unwrap_or(""))
    })
}

/// # Safety
/// fi_param_get(3): `value` points to a `char *`, `int`, `int` (bool) or `size_t` per the
/// parameter's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_param_get(prov: *mut fi_provider, name: *const c_char, value: *mut c_void) -> c_int {
    int_ret(|| {
        // SAFETY: per the contract.
        let (pname, name) = unsafe { (prov_name(prov), opt_str(name)?) };
        let name = name.ok_or(Errno::INVAL)?;
        if value.is_null() {
            return Err(Errno::INVAL);
        }
        let (t, raw) = params::get_raw(pname.as_deref(), name)?;
        // SAFETY: `value` is writable as the parameter's C type (fi_provider(3)).
        unsafe {
            match t {
                ParamType::String => {
                    // The value stays valid for the life of the process, as upstream's getenv
                    // pointer does.
                    let s = CString::new(raw).map_err(|_| Errno::INVAL)?;
                    *value.cast::<*const c_char>() = Box::leak(s.into_boxed_c_str()).as_ptr();
                }
                ParamType::Int => *value.cast::<c_int>() = params::parse_long(&raw) as c_int,
                ParamType::Bool => *value.cast::<c_int>() = c_int::from(params::parse_bool(&raw)?),
                ParamType::SizeT => *value.cast::<usize>() = params::parse_long(&raw).max(0) as usize,
            }
        }
        Ok(())
    })
}

/// # Safety
/// fi_getparams(3): `params` and `count` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_getparams(out: *mut *mut fi_param, count: *mut c_int) -> c_int {
    int_ret(|| {
        if out.is_null() || count.is_null() {
            return Err(Errno::INVAL);
        }
        crate::prov::define_params();
        let list = params::list();
        // A NULL-terminated calloc'd array of count + 1 entries, strings malloc'd (freed by
        // fi_freeparams).
        // SAFETY: calloc of (n + 1) entries; each string is a fresh malloc'd copy.
        unsafe {
            let arr = libc::calloc(list.len() + 1, core::mem::size_of::<fi_param>()).cast::<fi_param>();
            if arr.is_null() {
                return Err(Errno::NOMEM);
            }
            for (i, p) in list.iter().enumerate() {
                let value = std::env::var(&p.name).ok();
                *arr.add(i) = fi_param {
                    name: dup(&p.name).cast_const(),
                    type_: p.type_ as u32,
                    help_string: dup(&p.help).cast_const(),
                    value: value.as_deref().map_or(ptr::null(), |v| dup(v).cast_const()),
                };
            }
            *out = arr;
            *count = list.len() as c_int;
        }
        Ok(())
    })
}

fn dup(s: &str) -> *mut c_char {
    let c = CString::new(s.replace('\0', "")).unwrap_or_default();
    // SAFETY: strdup of a valid C string.
    unsafe { libc::strdup(c.as_ptr()) }
}

/// # Safety
/// fi_freeparams(3): `params` came from `fi_getparams`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_freeparams(params: *mut fi_param) {
    super::guard((), || {
        if params.is_null() {
            return;
        }
        // SAFETY: an array built by fi_getparams, terminated by an entry with a NULL name.
        unsafe {
            let mut p = params;
            while !(*p).name.is_null() {
                libc::free((*p).name as *mut c_void);
                libc::free((*p).help_string as *mut c_void);
                libc::free((*p).value as *mut c_void);
                p = p.add(1);
            }
            libc::free(params.cast());
        }
    })
}
