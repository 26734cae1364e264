//! Completion queues, event queues and counters (fi_cq(3), fi_eq(3), fi_cntr(3)).

use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;
use core::ptr;
use std::sync::{Arc, Mutex};

use super::object::{
    CntrObj, Obj, Refs, close_obj, fi_ops_with, fid_header, fid_kind, fid_no_bind, fid_no_ops_open,
};
use super::{int_ret, put, ssize_ret};
use crate::abi::compat::cq_err_entry_size;
use crate::abi::consts::*;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::util::cntr::Cntr;
use crate::util::cq::{Cq, CqEntry};
use crate::util::eq::{Eq, EqEvent};
use crate::util::wait::WaitObj;

/// A CQ plus the buffer that `err_data` points into until the next `fi_cq_readerr`.
pub struct CqInner {
    pub cq: Arc<Cq>,
    err_data: Mutex<Vec<u8>>,
    strerror_buf: Mutex<Vec<u8>>,
}

pub struct EqInner {
    pub eq: Arc<Eq>,
    err_data: Mutex<Vec<u8>>,
}

pub type CqObj = Obj<fid_cq, CqInner>;
pub type EqObj = Obj<fid_eq, EqInner>;

// ---- shared pieces ----

/// `fi_control(FI_GETWAIT / FI_GETWAITOBJ)` on an object with a wait object.
///
/// # Safety
/// `arg` is NULL or valid for the write the command implies (`int` fd or `enum fi_wait_obj`).
unsafe fn wait_control(wait: Option<&WaitObj>, command: c_int, arg: *mut c_void) -> Result<()> {
    let w = wait.ok_or(Errno::NOSYS)?;
    if arg.is_null() {
        return Err(Errno::INVAL);
    }
    match command {
        FI_GETWAIT => {
            // SAFETY: FI_GETWAIT with an fd wait object writes an `int` (fi_control(3)).
            unsafe { put(arg.cast::<c_int>(), w.fd()) };
            Ok(())
        }
        FI_GETWAITOBJ => {
            // SAFETY: FI_GETWAITOBJ writes an `enum fi_wait_obj`.
            unsafe { put(arg.cast::<u32>(), FI_WAIT_FD) };
            Ok(())
        }
        _ => Err(Errno::NOSYS),
    }
}

/// Copies `text` (NUL-terminated) into `buf` when given, and returns the pointer to hand out.
fn strerror_out(text: &str, buf: *mut c_char, len: usize, keep: &Mutex<Vec<u8>>) -> *const c_char {
    let mut k = keep.lock().unwrap_or_else(|e| e.into_inner());
    k.clear();
    k.extend_from_slice(text.as_bytes());
    k.push(0);
    if !buf.is_null() && len > 0 {
        let n = (k.len() - 1).min(len - 1);
        // SAFETY: the caller's `buf` is writable for `len` bytes (fi_cq_strerror(3)); we write
        // `n + 1 <= len` bytes.
        unsafe {
            ptr::copy_nonoverlapping(k.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
        return buf;
    }
    k.as_ptr().cast()
}

/// One object of `fi_trywait`: `-FI_EAGAIN` if it has something to read or cannot be waited on.
///
/// # Safety
/// `f` is an object pointer from the application.
pub unsafe fn trywait_one(f: *mut fid) -> Result<()> {
    if f.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: non-null object pointer; its class decides which checked cast applies.
    let class = unsafe { (*f).fclass };
    match class {
        FI_CLASS_CQ => {
            // SAFETY: checked cast.
            let cq = &unsafe { CqObj::from_fid(f)? }.inner.cq;
            let w = cq.wait().ok_or(Errno::INVAL)?;
            w.reset();
            cq.progress();
            if !cq.is_empty() || !cq.waitable() {
                Err(Errno::AGAIN)
            } else {
                Ok(())
            }
        }
        FI_CLASS_EQ => {
            // SAFETY: checked cast.
            let eq = &unsafe { EqObj::from_fid(f)? }.inner.eq;
            let w = eq.wait().ok_or(Errno::INVAL)?;
            w.reset();
            match eq.read(true) {
                Err(Errno::AGAIN) => Ok(()),
                _ => Err(Errno::AGAIN),
            }
        }
        FI_CLASS_CNTR => {
            // SAFETY: checked cast.
            let c = &unsafe { CntrObj::from_fid(f)? }.inner;
            let w = c.wait().ok_or(Errno::INVAL)?;
            w.reset();
            c.progress();
            if c.waitable() {
                Ok(())
            } else {
                Err(Errno::AGAIN)
            }
        }
        _ => Err(Errno::INVAL),
    }
}

// ---- CQ ----

pub static CQ_FI_OPS: fi_ops = fi_ops_with(cq_close, fid_no_bind, cq_control, fid_no_ops_open);
fid_kind!(fid_cq, FI_CLASS_CQ, CQ_FI_OPS);

pub static CQ_OPS: fi_ops_cq = fi_ops_cq {
    size: size_of::<fi_ops_cq>(),
    read: Some(cq_read),
    readfrom: Some(cq_readfrom),
    readerr: Some(cq_readerr),
    sread: Some(cq_sread),
    sreadfrom: Some(cq_sreadfrom),
    signal: Some(cq_signal),
    strerror: Some(cq_strerror),
};

pub fn cq_to_c(cq: Arc<Cq>, parent: &Refs, api_version: u32, context: *mut c_void) -> *mut fid_cq {
    let header = fid_cq {
        fid: fid_header(FI_CLASS_CQ, context, &CQ_FI_OPS),
        ops: &CQ_OPS,
    };
    let inner = CqInner {
        cq,
        err_data: Mutex::new(Vec::new()),
        strerror_buf: Mutex::new(Vec::new()),
    };
    CqObj::create(header, Some(parent), api_version, inner).cast()
}

unsafe extern "C" fn cq_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the pointer C passed to fi_close.
    int_ret(|| unsafe { close_obj::<fid_cq, CqInner>(f, |_| Ok(())) })
}

unsafe extern "C" fn cq_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let cq = unsafe { CqObj::from_fid(f)? };
        // SAFETY: `arg` is what fi_control's caller supplied for `command`.
        unsafe { wait_control(cq.inner.cq.wait(), command, arg) }
    })
}

/// Writes entry `i` of `buf` in the CQ's format.
///
/// # Safety
/// `buf` is valid for `i + 1` entries of `format`.
#[inline]
unsafe fn write_entry(buf: *mut c_void, i: usize, format: u32, e: &CqEntry) {
    let ctx = e.op_context as *mut c_void;
    let b = e.buf as *mut c_void;
    // SAFETY: in bounds per the contract; C entry arrays may be unaligned only if the
    // application made them so, which C itself would not allow either.
    unsafe {
        match format {
            FI_CQ_FORMAT_CONTEXT => buf
                .cast::<fi_cq_entry>()
                .add(i)
                .write(fi_cq_entry { op_context: ctx }),
            FI_CQ_FORMAT_MSG => buf.cast::<fi_cq_msg_entry>().add(i).write(fi_cq_msg_entry {
                op_context: ctx,
                flags: e.flags,
                len: e.len,
            }),
            FI_CQ_FORMAT_DATA => buf
                .cast::<fi_cq_data_entry>()
                .add(i)
                .write(fi_cq_data_entry {
                    op_context: ctx,
                    flags: e.flags,
                    len: e.len,
                    buf: b,
                    data: e.data,
                }),
            _ => buf
                .cast::<fi_cq_tagged_entry>()
                .add(i)
                .write(fi_cq_tagged_entry {
                    op_context: ctx,
                    flags: e.flags,
                    len: e.len,
                    buf: b,
                    data: e.data,
                    tag: e.tag,
                }),
        }
    }
}

/// Shared body of the four read calls. Inlined into each, and its sink a `move` closure with
/// its own count: an empty poll (the common call) then builds nothing on the stack for a sink
/// it does not use (some 30 of its instructions, callgrind).
///
/// # Safety
/// `buf` valid for `count` entries; `src` NULL or valid for `count` addresses; `cond` NULL or a
/// `size_t` threshold.
#[inline(always)]
unsafe fn cq_read_impl(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
    blocking: Option<(*const c_void, c_int)>,
) -> Result<usize> {
    // SAFETY: checked cast.
    let obj = unsafe { CqObj::from_ptr(cq)? };
    let cq = &obj.inner.cq;
    if buf.is_null() && count != 0 {
        return Err(Errno::INVAL);
    }
    let format = cq.format();
    let mut i = 0;
    let sink = move |e: &CqEntry| {
        // SAFETY: `i < count` since the queue hands out at most `count` entries.
        unsafe {
            write_entry(buf, i, format, e);
            if !src.is_null() {
                *src.add(i) = e.src_addr;
            }
        }
        i += 1;
    };
    match blocking {
        None => cq.read(count, sink),
        Some((cond, timeout)) => {
            let threshold = if cq.attr().wait_cond == FI_CQ_COND_THRESHOLD && !cond.is_null() {
                // SAFETY: with FI_CQ_COND_THRESHOLD, `cond` points to a size_t (fi_cq(3)).
                unsafe { *cond.cast::<usize>() }
            } else {
                1
            };
            cq.sread(count, threshold, timeout, sink)
        }
    }
}

unsafe extern "C" fn cq_read(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: arguments as fi_cq_read(3) defines them.
    ssize_ret(|| unsafe { cq_read_impl(cq, buf, count, ptr::null_mut(), None) })
}

unsafe extern "C" fn cq_readfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
) -> isize {
    // SAFETY: arguments as fi_cq_readfrom(3) defines them.
    ssize_ret(|| unsafe { cq_read_impl(cq, buf, count, src, None) })
}

unsafe extern "C" fn cq_sread(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: arguments as fi_cq_sread(3) defines them.
    ssize_ret(|| unsafe { cq_read_impl(cq, buf, count, ptr::null_mut(), Some((cond, timeout))) })
}

unsafe extern "C" fn cq_sreadfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: arguments as fi_cq_sreadfrom(3) defines them.
    ssize_ret(|| unsafe { cq_read_impl(cq, buf, count, src, Some((cond, timeout))) })
}

unsafe extern "C" fn cq_readerr(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, _flags: u64) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast.
        let obj = unsafe { CqObj::from_ptr(cq)? };
        if buf.is_null() {
            return Err(Errno::INVAL);
        }
        let api = obj.api_version;
        // The caller owns only the entry size of its API version (abi-reference §1).
        let size = cq_err_entry_size(api);
        // SAFETY: `buf` is valid for `size` bytes (the caller's API version); we read the
        // caller's err_data/err_data_size only if its layout has them.
        let (user_data, user_size) = unsafe {
            if size > core::mem::offset_of!(fi_cq_err_entry, err_data_size) {
                ((*buf).err_data, (*buf).err_data_size)
            } else {
                (ptr::null_mut(), 0)
            }
        };
        let e = obj.inner.cq.readerr()?;
        let mut keep = obj.inner.err_data.lock().unwrap_or_else(|e| e.into_inner());
        *keep = e.err_data.clone();
        let (err_data, err_data_size) = if e.err_data.is_empty() {
            (ptr::null_mut(), 0)
        } else if user_size > 0 && !user_data.is_null() {
            let n = user_size.min(e.err_data.len());
            // SAFETY: the application supplied `user_data` for `user_size` bytes.
            unsafe { ptr::copy_nonoverlapping(e.err_data.as_ptr(), user_data.cast::<u8>(), n) };
            (user_data, n)
        } else {
            (keep.as_mut_ptr().cast::<c_void>(), keep.len())
        };
        let full = fi_cq_err_entry {
            op_context: e.op_context as *mut c_void,
            flags: e.flags,
            len: e.len,
            buf: e.buf as *mut c_void,
            data: e.data,
            tag: e.tag,
            olen: e.olen,
            err: e.err,
            prov_errno: e.prov_errno,
            err_data,
            err_data_size,
            src_addr: e.src_addr,
        };
        // SAFETY: copy exactly the caller's entry size.
        unsafe {
            ptr::copy_nonoverlapping(
                (&full as *const fi_cq_err_entry).cast::<u8>(),
                buf.cast::<u8>(),
                size,
            )
        };
        Ok(1)
    })
}

unsafe extern "C" fn cq_signal(cq: *mut fid_cq) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        unsafe { CqObj::from_ptr(cq)? }.inner.cq.signal();
        Ok(())
    })
}

unsafe extern "C" fn cq_strerror(
    cq: *mut fid_cq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    super::guard(ptr::null(), || {
        // SAFETY: checked cast.
        let Ok(obj) = (unsafe { CqObj::from_ptr(cq) }) else {
            return ptr::null();
        };
        let text = obj
            .inner
            .cq
            .prov_strerror(prov_errno)
            .unwrap_or_else(|| crate::core::errno::strerror(prov_errno));
        strerror_out(text, buf, len, &obj.inner.strerror_buf)
    })
}

// ---- EQ ----

pub static EQ_FI_OPS: fi_ops = fi_ops_with(eq_close, fid_no_bind, eq_control, fid_no_ops_open);
fid_kind!(fid_eq, FI_CLASS_EQ, EQ_FI_OPS);

pub static EQ_OPS: fi_ops_eq = fi_ops_eq {
    size: size_of::<fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
};

pub fn eq_to_c(eq: Arc<Eq>, parent: &Refs, api_version: u32, context: *mut c_void) -> *mut fid_eq {
    let header = fid_eq {
        fid: fid_header(FI_CLASS_EQ, context, &EQ_FI_OPS),
        ops: &EQ_OPS,
    };
    EqObj::create(
        header,
        Some(parent),
        api_version,
        EqInner {
            eq,
            err_data: Mutex::new(Vec::new()),
        },
    )
    .cast()
}

unsafe extern "C" fn eq_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the pointer C passed to fi_close.
    int_ret(|| unsafe { close_obj::<fid_eq, EqInner>(f, |_| Ok(())) })
}

unsafe extern "C" fn eq_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let eq = unsafe { EqObj::from_fid(f)? };
        // SAFETY: `arg` is what fi_control's caller supplied for `command`.
        unsafe { wait_control(eq.inner.eq.wait(), command, arg) }
    })
}

/// Hands an event to the reader: `ETOOSMALL` if `buf` cannot hold it.
///
/// # Safety
/// `event` NULL or writable; `buf` writable for `len` bytes.
unsafe fn eq_deliver(ev: &EqEvent, event: *mut u32, buf: *mut c_void, len: usize) -> Result<usize> {
    if ev.data.len() > len {
        return Err(Errno::TOOSMALL);
    }
    // SAFETY: per the contract; `ev.data.len() <= len`.
    unsafe {
        put(event, ev.event);
        if !ev.data.is_empty() {
            ptr::copy_nonoverlapping(ev.data.as_ptr(), buf.cast::<u8>(), ev.data.len());
        }
    }
    Ok(ev.data.len())
}

unsafe extern "C" fn eq_read(
    eq: *mut fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast.
        let obj = unsafe { EqObj::from_ptr(eq)? };
        if buf.is_null() && len != 0 {
            return Err(Errno::INVAL);
        }
        let peek = flags & FI_PEEK != 0;
        let ev = obj.inner.eq.read(true)?;
        // SAFETY: arguments as fi_eq_read(3) defines them.
        let n = unsafe { eq_deliver(&ev, event, buf, len)? };
        if !peek {
            obj.inner.eq.read(false)?;
        }
        Ok(n)
    })
}

unsafe extern "C" fn eq_sread(
    eq: *mut fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast.
        let obj = unsafe { EqObj::from_ptr(eq)? };
        if buf.is_null() && len != 0 {
            return Err(Errno::INVAL);
        }
        let ev = obj.inner.eq.sread(true, timeout)?;
        // SAFETY: arguments as fi_eq_sread(3) defines them.
        let n = unsafe { eq_deliver(&ev, event, buf, len)? };
        if flags & FI_PEEK == 0 {
            obj.inner.eq.read(false)?;
        }
        Ok(n)
    })
}

unsafe extern "C" fn eq_write(
    eq: *mut fid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    flags: u64,
) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast.
        let obj = unsafe { EqObj::from_ptr(eq)? };
        if flags & !FI_PEEK != 0 {
            return Err(Errno::BADFLAGS);
        }
        // SAFETY: `buf` valid for `len` bytes for this call.
        let data = unsafe { super::app_slice(buf.cast::<u8>(), len)? }.to_vec();
        obj.inner.eq.write(EqEvent { event, data });
        Ok(len)
    })
}

unsafe extern "C" fn eq_readerr(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> isize {
    ssize_ret(|| {
        // SAFETY: checked cast.
        let obj = unsafe { EqObj::from_ptr(eq)? };
        if buf.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: the caller's entry; err_data fields exist in every layout of this struct but
        // are only honoured from API 1.5 on.
        let (user_data, user_size) = unsafe {
            if obj.api_version >= fi_version(1, 5) {
                ((*buf).err_data, (*buf).err_data_size)
            } else {
                (ptr::null_mut(), 0)
            }
        };
        let e = obj.inner.eq.readerr(flags & FI_PEEK != 0)?;
        let mut keep = obj.inner.err_data.lock().unwrap_or_else(|e| e.into_inner());
        *keep = e.err_data.clone();
        let (err_data, err_data_size) = if e.err_data.is_empty() {
            (ptr::null_mut(), 0)
        } else if user_size > 0 && !user_data.is_null() {
            let n = user_size.min(e.err_data.len());
            // SAFETY: the application supplied `user_data` for `user_size` bytes.
            unsafe { ptr::copy_nonoverlapping(e.err_data.as_ptr(), user_data.cast::<u8>(), n) };
            (user_data, n)
        } else {
            (keep.as_mut_ptr().cast::<c_void>(), keep.len())
        };
        // SAFETY: non-null entry of the caller.
        unsafe {
            buf.write(fi_eq_err_entry {
                fid: e.fid as fid_t,
                context: e.context as *mut c_void,
                data: e.data,
                err: e.err,
                prov_errno: e.prov_errno,
                err_data,
                err_data_size,
            })
        };
        Ok(size_of::<fi_eq_err_entry>())
    })
}

unsafe extern "C" fn eq_strerror(
    eq: *mut fid_eq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    super::guard(ptr::null(), || {
        // SAFETY: checked cast.
        let Ok(obj) = (unsafe { EqObj::from_ptr(eq) }) else {
            return ptr::null();
        };
        strerror_out(
            crate::core::errno::strerror(prov_errno),
            buf,
            len,
            &obj.inner.err_data,
        )
    })
}

// ---- counters ----

pub static CNTR_FI_OPS: fi_ops =
    fi_ops_with(cntr_close, fid_no_bind, cntr_control, fid_no_ops_open);
fid_kind!(fid_cntr, FI_CLASS_CNTR, CNTR_FI_OPS);

pub static CNTR_OPS: fi_ops_cntr = fi_ops_cntr {
    size: size_of::<fi_ops_cntr>(),
    read: Some(cntr_read),
    readerr: Some(cntr_readerr),
    add: Some(cntr_add),
    set: Some(cntr_set),
    wait: Some(cntr_wait),
    adderr: Some(cntr_adderr),
    seterr: Some(cntr_seterr),
};

pub fn cntr_to_c(
    c: Arc<Cntr>,
    parent: &Refs,
    api_version: u32,
    context: *mut c_void,
) -> *mut fid_cntr {
    let header = fid_cntr {
        fid: fid_header(FI_CLASS_CNTR, context, &CNTR_FI_OPS),
        ops: &CNTR_OPS,
    };
    CntrObj::create(header, Some(parent), api_version, c).cast()
}

unsafe extern "C" fn cntr_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the pointer C passed to fi_close.
    int_ret(|| unsafe { close_obj::<fid_cntr, Arc<Cntr>>(f, |_| Ok(())) })
}

unsafe extern "C" fn cntr_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    int_ret(|| {
        // SAFETY: checked cast.
        let c = unsafe { CntrObj::from_fid(f)? };
        // SAFETY: `arg` is what fi_control's caller supplied for `command`.
        unsafe { wait_control(c.inner.wait(), command, arg) }
    })
}

/// The counter behind `c`, or None (reads of a bad counter return 0: they have no error path).
///
/// # Safety
/// `c` is an application pointer.
unsafe fn cntr<'a>(c: *mut fid_cntr) -> Result<&'a Arc<Cntr>> {
    // SAFETY: checked cast.
    Ok(&unsafe { CntrObj::from_ptr(c)? }.inner)
}

unsafe extern "C" fn cntr_read(c: *mut fid_cntr) -> u64 {
    // SAFETY: checked inside.
    super::guard(0, || unsafe { cntr(c) }.map(|c| c.read()).unwrap_or(0))
}
unsafe extern "C" fn cntr_readerr(c: *mut fid_cntr) -> u64 {
    // SAFETY: checked inside.
    super::guard(0, || unsafe { cntr(c) }.map(|c| c.readerr()).unwrap_or(0))
}
unsafe extern "C" fn cntr_add(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked inside.
    int_ret(|| unsafe { cntr(c) }.map(|c| c.add(v)))
}
unsafe extern "C" fn cntr_set(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked inside.
    int_ret(|| unsafe { cntr(c) }.map(|c| c.set(v)))
}
unsafe extern "C" fn cntr_adderr(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked inside.
    int_ret(|| unsafe { cntr(c) }.map(|c| c.adderr(v)))
}
unsafe extern "C" fn cntr_seterr(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked inside.
    int_ret(|| unsafe { cntr(c) }.map(|c| c.seterr(v)))
}
unsafe extern "C" fn cntr_wait(c: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    // SAFETY: checked inside.
    int_ret(|| unsafe { cntr(c) }?.wait_until(threshold, timeout))
}
