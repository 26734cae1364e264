//! Logging and parameter entry points (fi_provider(3): `fi_log_enabled`, `fi_log_ready`,
//! `fi_log`, `fi_param_define`, `fi_param_get`, `fi_getparams`, `fi_freeparams`) and the
//! `"logging"` object of `fi_open` (fi_provider(3) "fi_import_log").
//!
//! `fi_log` and `fi_param_define` are variadic and live in `c/variadic.c`, which formats and
//! calls the `fabric_*` functions here.
//!
//! Importing an application's `fid_logging` replaces the library's `enabled`, `ready` and `log`
//! operations (those the application's table fills in) for every line: the C callers of
//! `fi_log*` and the Rust providers (through `core::log::set_sink`). Closing the imported object
//! restores the library's own operations.

use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;
use core::ptr;
use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex, Once};

use super::{int_ret, opt_str};
use crate::abi::consts::*;
use crate::abi::ops::{fi_ops, fi_ops_log};
use crate::abi::types::{fi_param, fi_provider, fid, fid_logging};
use crate::core::log::{self, Level, LogSink, Subsys};
use crate::core::params::{self, ParamType, Value};
use crate::core::{Errno, Result};

/// What the library does once before its first real work (upstream's `fi_ini`): the core
/// parameters, the logging configuration, the providers' parameters, the `FI_PROVIDER` check.
pub(crate) fn ensure_init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        params::define_core();
        log::init();
        crate::prov::define_params();
        let names: Vec<&str> = crate::prov::registry().iter().map(|p| p.name()).collect();
        crate::core::getinfo::check_provider_filter(&names);
    });
}

/// The provider name of a `struct fi_provider` (NULL, or a NULL name: the core).
///
/// # Safety
/// `prov` is NULL or a valid provider whose name is NULL or a C string.
unsafe fn prov_name(prov: *const fi_provider) -> String {
    // SAFETY: per the contract.
    unsafe {
        match prov.as_ref() {
            Some(p) if !p.name.is_null() => CStr::from_ptr(p.name).to_string_lossy().into_owned(),
            _ => "core".to_string(),
        }
    }
}

/// `FI_LOG_PROV_FILTERED` for a provider of this library that `FI_LOG_PROV` excludes. Like
/// upstream, the filter applies to registered providers only: the core and providers the
/// application describes itself are never filtered.
fn prov_flags(name: &str) -> u64 {
    if crate::prov::registry()
        .iter()
        .any(|p| p.name().eq_ignore_ascii_case(name))
    {
        log::prov_flags(name)
    } else {
        0
    }
}

// ---- the application's operations, once imported ----

type EnabledFn = unsafe extern "C" fn(*const fi_provider, u32, u32, u64) -> c_int;
type ReadyFn = unsafe extern "C" fn(*const fi_provider, u32, u32, u64, *mut u64) -> c_int;
type LogFn =
    unsafe extern "C" fn(*const fi_provider, u32, u32, *const c_char, c_int, *const c_char);

#[derive(Clone, Copy, Default)]
struct Imported {
    enabled: Option<EnabledFn>,
    ready: Option<ReadyFn>,
    log: Option<LogFn>,
}

impl Imported {
    fn any(&self) -> bool {
        self.enabled.is_some() || self.ready.is_some() || self.log.is_some()
    }
}

static IMPORTED: Mutex<Imported> = Mutex::new(Imported {
    enabled: None,
    ready: None,
    log: None,
});

fn imported() -> Imported {
    *IMPORTED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `struct fi_provider` naming `name`, for the application's operations to read (they receive
/// the provider of each line). One per name, alive for the whole process.
fn c_provider(name: &str) -> *const fi_provider {
    static MADE: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = made.iter().find(|(n, _)| n == name) {
        return *p as *const fi_provider;
    }
    let version = crate::prov::registry()
        .iter()
        .find(|p| p.name() == name)
        .map_or(
            fi_version(FI_MAJOR_VERSION * 100 + FI_MINOR_VERSION, 0),
            |p| p.version(),
        );
    let cname = CString::new(name.replace('\0', "")).unwrap_or_default();
    let p: &'static fi_provider = Box::leak(Box::new(fi_provider {
        version,
        fi_version: FI_VERSION_CURRENT,
        context: crate::abi::types::fi_context {
            internal: [ptr::null_mut(); 4],
        },
        name: Box::leak(cname.into_boxed_c_str()).as_ptr(),
        getinfo: ptr::null(),
        fabric: ptr::null(),
        cleanup: ptr::null(),
    }));
    let addr = p as *const fi_provider as usize;
    made.push((name.to_string(), addr));
    addr as *const fi_provider
}

/// The current `enabled` operation for a C caller.
///
/// # Safety
/// `prov` is NULL or a valid provider.
unsafe fn current_enabled(prov: *const fi_provider, level: u32, sub: u32, flags: u64) -> bool {
    if let Some(f) = imported().enabled {
        // SAFETY: the application's function, called with its documented arguments.
        return unsafe { f(prov, level, sub, flags) } != 0;
    }
    match (Level::from_u32(level), Subsys::from_u32(sub)) {
        (Some(l), Some(s)) => log::default_enabled(l, s, flags),
        _ => false,
    }
}

/// The current `ready` operation for a C caller.
///
/// # Safety
/// `prov` NULL or valid; `showtime` NULL or writable.
unsafe fn current_ready(
    prov: *const fi_provider,
    level: u32,
    sub: u32,
    flags: u64,
    showtime: *mut u64,
) -> bool {
    if let Some(f) = imported().ready {
        // SAFETY: the application's function, called with its documented arguments.
        return unsafe { f(prov, level, sub, flags, showtime) } != 0;
    }
    // SAFETY: forwarded.
    let enabled = unsafe { current_enabled(prov, level, sub, flags) };
    // SAFETY: NULL or writable per the contract.
    match unsafe { showtime.as_mut() } {
        Some(t) => log::default_ready(enabled, t),
        None => enabled,
    }
}

/// The current `log` operation for a C caller: writes `msg` verbatim (fi_log does not check
/// whether the level is enabled; the FI_LOG macros do before calling it).
///
/// # Safety
/// `prov` NULL or valid; `func` and `msg` NULL or C strings.
unsafe fn current_log(
    prov: *const fi_provider,
    level: u32,
    sub: u32,
    func: *const c_char,
    line: c_int,
    msg: *const c_char,
) {
    if let Some(f) = imported().log {
        // SAFETY: the application's function, called with its documented arguments.
        unsafe { f(prov, level, sub, func, line, msg) };
        return;
    }
    let (Some(l), Some(s)) = (Level::from_u32(level), Subsys::from_u32(sub)) else {
        return;
    };
    // SAFETY: per the contract.
    let (name, func, msg) = unsafe { (prov_name(prov), c_lossy(func), c_lossy(msg)) };
    log::default_log(&name, l, s, &func, line.max(0) as u32, &msg);
}

/// # Safety
/// `p` is NULL or a C string.
unsafe fn c_lossy(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null C string per the contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The application's operations seen from the Rust providers' lines.
struct ImportedSink;

impl LogSink for ImportedSink {
    fn enabled(&self, prov: &str, level: Level, subsys: Subsys, flags: u64) -> bool {
        match imported().enabled {
            // SAFETY: the application's function with a provider made for it.
            Some(f) => unsafe { f(c_provider(prov), level as u32, subsys as u32, flags) != 0 },
            None => log::default_enabled(level, subsys, flags),
        }
    }

    fn ready(
        &self,
        prov: &str,
        level: Level,
        subsys: Subsys,
        flags: u64,
        showtime: &mut u64,
    ) -> bool {
        match imported().ready {
            // SAFETY: the application's function; `showtime` is a valid u64.
            Some(f) => unsafe {
                f(
                    c_provider(prov),
                    level as u32,
                    subsys as u32,
                    flags,
                    showtime,
                ) != 0
            },
            None => log::default_ready(self.enabled(prov, level, subsys, flags), showtime),
        }
    }

    fn log(&self, prov: &str, level: Level, subsys: Subsys, func: &str, line: u32, msg: &str) {
        match imported().log {
            Some(f) => {
                let func = CString::new(func.replace('\0', "")).unwrap_or_default();
                let msg = CString::new(msg.replace('\0', "")).unwrap_or_default();
                // SAFETY: the application's function with valid C strings and provider.
                unsafe {
                    f(
                        c_provider(prov),
                        level as u32,
                        subsys as u32,
                        func.as_ptr(),
                        line.min(c_int::MAX as u32) as c_int,
                        msg.as_ptr(),
                    )
                }
            }
            None => log::default_log(prov, level, subsys, func, line, msg),
        }
    }
}

// ---- exported functions ----

/// # Safety
/// fi_log_enabled as declared in `rdma/providers/fi_log.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_log_enabled(prov: *const fi_provider, level: u32, sub: u32) -> c_int {
    super::guard(0, || {
        ensure_init();
        // SAFETY: forwarded.
        let flags = prov_flags(&unsafe { prov_name(prov) });
        // SAFETY: forwarded.
        c_int::from(unsafe { current_enabled(prov, level, sub, flags) })
    })
}

/// # Safety
/// fi_log_ready as declared in `rdma/providers/fi_log.h`: enabled and the rate limit allows
/// another line now (`showtime` holds the next allowed time in ms).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_log_ready(
    prov: *const fi_provider,
    level: u32,
    sub: u32,
    showtime: *mut u64,
) -> c_int {
    super::guard(0, || {
        ensure_init();
        // SAFETY: forwarded.
        let flags = prov_flags(&unsafe { prov_name(prov) });
        // SAFETY: forwarded.
        c_int::from(unsafe { current_ready(prov, level, sub, flags, showtime) })
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
        ensure_init();
        // SAFETY: forwarded.
        unsafe { current_log(prov, level as u32, sub as u32, func, line, msg) }
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
        let (Some(name), Some(help)) = (name, help) else {
            return Err(Errno::INVAL);
        };
        let t = ParamType::from_u32(type_ as u32).ok_or(Errno::INVAL)?;
        params::define(Some(&pname), name, t, help)
    })
}

/// # Safety
/// fi_param_get(3): `value` points to a `char *`, `int`, `int` (bool) or `size_t` per the
/// parameter's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_param_get(
    prov: *mut fi_provider,
    name: *const c_char,
    value: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: per the contract.
        let (pname, name) = unsafe { (prov_name(prov), opt_str(name)?) };
        let name = name.ok_or(Errno::INVAL)?;
        if value.is_null() {
            return Err(Errno::INVAL);
        }
        ensure_init();
        let (p, v) = params::value(Some(&pname), name)?;
        // SAFETY: `value` is writable as the parameter's C type (fi_provider(3)).
        unsafe {
            match p.type_ {
                ParamType::String => {
                    // As upstream: the environment's own string (or the configuration file's,
                    // which lives as long as the process).
                    let s = match v {
                        Value::Conf(c) => c.as_ptr(),
                        Value::Env(_) => {
                            let n = CString::new(p.name).map_err(|_| Errno::INVAL)?;
                            let s = libc::getenv(n.as_ptr());
                            if s.is_null() {
                                return Err(Errno::NODATA);
                            }
                            s.cast_const()
                        }
                    };
                    *value.cast::<*const c_char>() = s;
                }
                ParamType::Int => *value.cast::<c_int>() = params::to_int(&v.text()),
                ParamType::Bool => {
                    *value.cast::<c_int>() = c_int::from(params::parse_bool(&v.text())?)
                }
                ParamType::SizeT => *value.cast::<usize>() = params::to_size(&v.text()),
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
        ensure_init();
        let list = params::list();
        let arr = build_params(&list)?;
        // SAFETY: both out-parameters checked non-null.
        unsafe {
            *out = arr;
            *count = list.len() as c_int;
        }
        Ok(())
    })
}

/// A calloc'd, NULL-terminated array of `list.len() + 1` entries with malloc'd strings (freed by
/// `fi_freeparams`); values are the environment's (fi_getparams(3)).
fn build_params(list: &[params::Param]) -> Result<*mut fi_param> {
    // SAFETY: calloc of (n + 1) zeroed entries.
    let arr = unsafe { libc::calloc(list.len() + 1, size_of::<fi_param>()) }.cast::<fi_param>();
    if arr.is_null() {
        return Err(Errno::NOMEM);
    }
    for (i, p) in list.iter().enumerate() {
        let value = std::env::var(&p.name).ok();
        let entry = fi_param {
            name: dup(&p.name).cast_const(),
            type_: p.type_ as u32,
            help_string: dup(&p.help).cast_const(),
            value: value
                .as_deref()
                .map_or(ptr::null(), |v| dup(v).cast_const()),
        };
        let failed = entry.name.is_null()
            || entry.help_string.is_null()
            || (value.is_some() && entry.value.is_null());
        // SAFETY: `i` < list.len(): inside the array.
        unsafe { *arr.add(i) = entry };
        if failed {
            // SAFETY: the array built so far (an entry with a NULL name ends it).
            unsafe { free_params(arr, i + 1) };
            return Err(Errno::NOMEM);
        }
    }
    Ok(arr)
}

/// A malloc'd C copy of `s` (the application frees it with `free`, via fi_freeparams). Written
/// as malloc + copy rather than strdup so that Miri, which has malloc but not strdup, runs it.
fn dup(s: &str) -> *mut c_char {
    let c = CString::new(s.replace('\0', "")).unwrap_or_default();
    let bytes = c.as_bytes_with_nul();
    // SAFETY: a fresh allocation of bytes.len() bytes, filled from a slice of that length.
    unsafe {
        let p = libc::malloc(bytes.len()).cast::<u8>();
        if !p.is_null() {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        }
        p.cast()
    }
}

/// Frees the first `n` entries' strings (all three may be NULL) and the array.
///
/// # Safety
/// `arr` came from `build_params` and holds at least `n` entries.
unsafe fn free_params(arr: *mut fi_param, n: usize) {
    // SAFETY: per the contract; every string is malloc'd or NULL.
    unsafe {
        for i in 0..n {
            let e = &*arr.add(i);
            libc::free(e.name as *mut c_void);
            libc::free(e.help_string as *mut c_void);
            libc::free(e.value as *mut c_void);
        }
        libc::free(arr.cast());
    }
}

/// # Safety
/// fi_freeparams(3): `params` came from `fi_getparams` (NULL is ignored).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_freeparams(params: *mut fi_param) {
    super::guard((), || {
        if params.is_null() {
            return;
        }
        // SAFETY: an array built by fi_getparams, terminated by an entry with a NULL name.
        unsafe {
            let mut n = 0;
            while !(*params.add(n)).name.is_null() {
                n += 1;
            }
            free_params(params, n);
        }
    })
}

// ---- fi_open("logging") ----

/// The library's logging operations as a `fi_ops_log` table (what the opened object exposes);
/// each one runs the current operation (the application's once imported).
static LOG_OPS: fi_ops_log = fi_ops_log {
    size: size_of::<fi_ops_log>(),
    enabled: Some(ops_enabled),
    ready: Some(ops_ready),
    log: Some(ops_log),
};

unsafe extern "C" fn ops_enabled(
    prov: *const fi_provider,
    level: u32,
    sub: u32,
    flags: u64,
) -> c_int {
    super::guard(0, || {
        // SAFETY: forwarded.
        c_int::from(unsafe { current_enabled(prov, level, sub, flags) })
    })
}

unsafe extern "C" fn ops_ready(
    prov: *const fi_provider,
    level: u32,
    sub: u32,
    flags: u64,
    showtime: *mut u64,
) -> c_int {
    super::guard(0, || {
        // SAFETY: forwarded.
        c_int::from(unsafe { current_ready(prov, level, sub, flags, showtime) })
    })
}

unsafe extern "C" fn ops_log(
    prov: *const fi_provider,
    level: u32,
    sub: u32,
    func: *const c_char,
    line: c_int,
    msg: *const c_char,
) {
    // SAFETY: forwarded.
    super::guard((), || unsafe {
        current_log(prov, level, sub, func, line, msg)
    })
}

/// The object `fi_open("logging")` returns: bind imports, close frees.
static LOGGING_FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close: Some(logging_close),
    bind: Some(logging_bind),
    control: Some(super::object::fid_no_control),
    ops_open: Some(super::object::fid_no_ops_open),
    tostr: Some(super::object::fid_no_tostr),
    ops_set: Some(super::object::fid_no_ops_set),
};

/// Installed in the application's imported object: closing it restores the library's logging.
static IMPORTED_FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close: Some(imported_close),
    bind: Some(super::object::fid_no_bind),
    control: Some(super::object::fid_no_control),
    ops_open: Some(super::object::fid_no_ops_open),
    tostr: Some(super::object::fid_no_tostr),
    ops_set: Some(super::object::fid_no_ops_set),
};

/// `fi_open(version, "logging", attr, attr_len, flags, ...)`: a new logging object (fi_provider(3):
/// from API 1.13, no attributes, no flags; `EALREADY` once an import is in force).
pub(crate) fn open_logging(
    version: u32,
    attr_len: usize,
    flags: u64,
    context: *mut c_void,
) -> Result<*mut fid> {
    if version < fi_version(1, 13) || attr_len != 0 {
        return Err(Errno::INVAL);
    }
    if flags != 0 {
        return Err(Errno::BADFLAGS);
    }
    ensure_init();
    let imp = IMPORTED.lock().unwrap_or_else(|e| e.into_inner());
    if imp.any() {
        return Err(Errno::ALREADY);
    }
    let obj = Box::new(fid_logging {
        fid: fid {
            fclass: FI_CLASS_LOG,
            context,
            ops: &LOGGING_FI_OPS,
        },
        ops: &LOG_OPS,
    });
    Ok(Box::into_raw(obj).cast())
}

/// Whether `f` is a logging object made by `open_logging`.
///
/// # Safety
/// `f` is NULL or a valid fid.
unsafe fn is_logging_object(f: *const fid) -> bool {
    // SAFETY: per the contract.
    unsafe { f.as_ref() }.is_some_and(|f| ptr::eq(f.ops, &LOGGING_FI_OPS))
}

unsafe extern "C" fn logging_close(f: *mut fid) -> c_int {
    int_ret(|| {
        // SAFETY: reached through a fid's ops; `f` is NULL or that fid.
        if !unsafe { is_logging_object(f) } {
            return Err(Errno::INVAL);
        }
        // SAFETY: made by Box::into_raw in open_logging and closed once (fi_close contract).
        drop(unsafe { Box::from_raw(f.cast::<fid_logging>()) });
        Ok(())
    })
}

/// fi_import_fid: take the application's operations from `bfid` (a `fid_logging`).
unsafe extern "C" fn logging_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    int_ret(|| {
        // SAFETY: reached through a fid's ops; `f` is NULL or that fid.
        if !unsafe { is_logging_object(f) } || bfid.is_null() || flags != 0 {
            return Err(Errno::INVAL);
        }
        // SAFETY: `bfid` is the application's fid (non-null); its class says whether it heads a
        // `fid_logging`, whose `ops` is NULL or a table of at least `size` bytes.
        unsafe {
            if (*bfid).fclass != FI_CLASS_LOG {
                return Err(Errno::INVAL);
            }
            let app = bfid.cast::<fid_logging>();
            let Some(ops) = (*app).ops.as_ref() else {
                return Err(Errno::INVAL);
            };
            if ops.size < size_of::<fi_ops_log>() {
                return Err(Errno::INVAL);
            }
            let mut imp = IMPORTED.lock().unwrap_or_else(|e| e.into_inner());
            // The library's own dispatchers stand for "keep the default" (importing them would
            // make each call itself).
            if let Some(e) = ops
                .enabled
                .filter(|&e| e as *const () != ops_enabled as *const ())
            {
                imp.enabled = Some(e);
            }
            if let Some(r) = ops
                .ready
                .filter(|&r| r as *const () != ops_ready as *const ())
            {
                imp.ready = Some(r);
            }
            if let Some(l) = ops.log.filter(|&l| l as *const () != ops_log as *const ()) {
                imp.log = Some(l);
            }
            (*app).fid.ops = &IMPORTED_FI_OPS;
            let any = imp.any();
            drop(imp);
            if any {
                log::set_sink(Some(Arc::new(ImportedSink)));
            }
        }
        Ok(())
    })
}

unsafe extern "C" fn imported_close(_f: *mut fid) -> c_int {
    int_ret(|| {
        *IMPORTED.lock().unwrap_or_else(|e| e.into_inner()) = Imported::default();
        log::set_sink(None);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());
    static ENABLED_CALLS: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn app_enabled(p: *const fi_provider, _l: u32, _s: u32, _f: u64) -> c_int {
        ENABLED_CALLS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: test: the library passes a valid provider.
        c_int::from(!p.is_null())
    }

    unsafe extern "C" fn app_log(
        p: *const fi_provider,
        level: u32,
        sub: u32,
        func: *const c_char,
        line: c_int,
        msg: *const c_char,
    ) {
        // SAFETY: test: valid provider and C strings from the library.
        let (name, func, msg) = unsafe { (prov_name(p), c_lossy(func), c_lossy(msg)) };
        LINES
            .lock()
            .unwrap()
            .push(format!("{name}|{level}|{sub}|{func}|{line}|{msg}"));
    }

    /// The whole import cycle in one test (the import is process-wide).
    #[test]
    fn open_import_close() {
        assert_eq!(
            open_logging(fi_version(1, 12), 0, 0, ptr::null_mut()),
            Err(Errno::INVAL)
        );
        assert_eq!(
            open_logging(fi_version(1, 13), 4, 0, ptr::null_mut()),
            Err(Errno::INVAL)
        );
        assert_eq!(
            open_logging(fi_version(1, 13), 0, 1, ptr::null_mut()),
            Err(Errno::BADFLAGS)
        );

        let ctx = 0x1234usize as *mut c_void;
        let f = open_logging(fi_version(1, 13), 0, 0, ctx).unwrap();
        // SAFETY: test: `f` is the object just made; its fid is readable.
        unsafe {
            assert_eq!((*f).fclass, FI_CLASS_LOG);
            assert_eq!((*f).context, ctx);
        }

        static APP_OPS: fi_ops_log = fi_ops_log {
            size: size_of::<fi_ops_log>(),
            enabled: Some(app_enabled),
            ready: None,
            log: Some(app_log),
        };
        let mut app = fid_logging {
            fid: fid {
                fclass: FI_CLASS_LOG,
                context: ptr::null_mut(),
                ops: ptr::null(),
            },
            ops: &APP_OPS,
        };
        let appf = (&mut app as *mut fid_logging).cast::<fid>();
        // SAFETY: test: calling our own ops slots with valid objects.
        unsafe {
            // Bad arguments first.
            assert_eq!(logging_bind(f, ptr::null_mut(), 0), -FI_EINVAL);
            assert_eq!(logging_bind(f, appf, 1), -FI_EINVAL);
            assert_eq!(logging_bind(appf, appf, 0), -FI_EINVAL);
            // (Through the raw pointer: the library holds it, so `app` is not touched again.)
            (*appf).fclass = FI_CLASS_CQ;
            assert_eq!(logging_bind(f, appf, 0), -FI_EINVAL);
            (*appf).fclass = FI_CLASS_LOG;

            assert_eq!(logging_bind(f, appf, 0), 0);
            assert!(ptr::eq((*appf).ops, &IMPORTED_FI_OPS));
            assert_eq!(logging_close(f), 0);
        }
        // Opening again while the import is in force.
        assert_eq!(
            open_logging(fi_version(1, 13), 0, 0, ptr::null_mut()),
            Err(Errno::ALREADY)
        );

        // Rust-side lines and C-side lines both reach the application.
        crate::fi_warn!("efa", Subsys::Cq, "from rust {}", 7);
        let msg = CString::new("from c\n").unwrap();
        let func = CString::new("cfunc").unwrap();
        // SAFETY: test: valid arguments for the entry points.
        unsafe {
            // The application's operations receive the caller's provider as it is.
            assert_eq!(fi_log_enabled(ptr::null(), FI_LOG_DEBUG, FI_LOG_AV), 0);
            let core = c_provider("core");
            assert_eq!(fi_log_enabled(core, FI_LOG_DEBUG, FI_LOG_AV), 1);
            fabric_log_message(core, 0, 5, func.as_ptr(), 9, msg.as_ptr());
        }
        assert!(ENABLED_CALLS.load(Ordering::SeqCst) >= 2);
        let lines = LINES.lock().unwrap().clone();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("efa|0|6|") && l.ends_with("|from rust 7\n")),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"core|0|5|cfunc|9|from c\n".to_string()),
            "{lines:?}"
        );

        // Closing the application's object restores the library's logging.
        // SAFETY: test: the fid's ops are now IMPORTED_FI_OPS.
        unsafe {
            let close = (*(*appf).ops).close.unwrap();
            assert_eq!(close(appf), 0);
        }
        assert!(!imported().any());
        let f = open_logging(fi_version(2, 6), 0, 0, ptr::null_mut()).unwrap();
        // SAFETY: test: our object.
        assert_eq!(unsafe { logging_close(f) }, 0);
    }

    #[test]
    fn params_roundtrip_through_c() {
        let name = CString::new("log_level").unwrap();
        let mut s: *const c_char = ptr::null();
        // SAFETY: test: valid pointers.
        unsafe {
            assert_eq!(
                fi_param_get(
                    ptr::null_mut(),
                    ptr::null(),
                    (&mut s as *mut *const c_char).cast()
                ),
                -FI_EINVAL
            );
            assert_eq!(
                fi_param_get(ptr::null_mut(), name.as_ptr(), ptr::null_mut()),
                -FI_EINVAL
            );
            let undefined = CString::new("no_such_param").unwrap();
            assert_eq!(
                fi_param_get(
                    ptr::null_mut(),
                    undefined.as_ptr(),
                    (&mut s as *mut *const c_char).cast()
                ),
                -FI_ENOENT
            );
        }
        let mut arr: *mut fi_param = ptr::null_mut();
        let mut n: c_int = 0;
        // SAFETY: test: valid out-parameters; the array is freed once.
        unsafe {
            assert_eq!(fi_getparams(ptr::null_mut(), &mut n), -FI_EINVAL);
            assert_eq!(fi_getparams(&mut arr, &mut n), 0);
            assert!(n >= 22);
            assert!((*arr.add(n as usize)).name.is_null());
            let first = CStr::from_ptr((*arr).name).to_str().unwrap();
            assert_eq!(first, "FI_PREFER_SYSCONFIG");
            fi_freeparams(arr);
            fi_freeparams(ptr::null_mut());
        }
        let pname = CString::new("knob").unwrap();
        let help = CString::new("").unwrap();
        // SAFETY: test: valid C strings.
        unsafe {
            assert_eq!(
                fabric_param_define(ptr::null(), pname.as_ptr(), 1, help.as_ptr()),
                -FI_EINVAL
            );
            assert_eq!(
                fabric_param_define(ptr::null(), pname.as_ptr(), 1, ptr::null()),
                -FI_EINVAL
            );
            assert_eq!(
                fabric_param_define(ptr::null(), ptr::null(), 1, pname.as_ptr()),
                -FI_EINVAL
            );
            assert_eq!(
                fabric_param_define(ptr::null(), pname.as_ptr(), 9, pname.as_ptr()),
                -FI_EINVAL
            );
        }
    }
}
