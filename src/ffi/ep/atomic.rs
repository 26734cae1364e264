//! `fi_ops_atomic` (fi_atomic(3)): every call becomes one `AtomicOp` for `Endpoint::atomic`;
//! the `*valid` calls ask `Endpoint::atomic_valid`.

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr::null_mut;

use super::{check_flags, ep};
use crate::abi::consts::*;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::ffi::{app_buf, app_desc, app_slice, int_ret, put, ssize_ret};
use crate::sys::mem::IoVec;
use crate::util::Endpoint;
use crate::util::ep::{AtomicKind, AtomicOp, Call};

pub static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: size_of::<fi_ops_atomic>(),
    write: Some(atomic_write),
    writev: Some(atomic_writev),
    writemsg: Some(atomic_writemsg),
    inject: Some(atomic_inject),
    readwrite: Some(atomic_readwrite),
    readwritev: Some(atomic_readwritev),
    readwritemsg: Some(atomic_readwritemsg),
    compwrite: Some(atomic_compwrite),
    compwritev: Some(atomic_compwritev),
    compwritemsg: Some(atomic_compwritemsg),
    writevalid: Some(atomic_writevalid),
    readwritevalid: Some(atomic_readwritevalid),
    compwritevalid: Some(atomic_compwritevalid),
};

/// Byte size of one element of an atomic datatype. An unknown type is an atomic the endpoint
/// does not support: `FI_EOPNOTSUPP` (fi_atomic(3), as `fi_atomicvalid` answers for it).
fn dt_size(datatype: u32) -> Result<usize> {
    crate::util::atomic::datatype_size(datatype).ok_or(Errno::OPNOTSUPP)
}

/// How many elements of `datatype` the buffers hold.
fn elems(v: &[IoVec], datatype: u32) -> Result<usize> {
    Ok(v.iter().map(IoVec::len).sum::<usize>() / dt_size(datatype)?)
}

/// One buffer of `count` elements.
///
/// # Safety
/// As `app_buf`.
unsafe fn ioc_buf(buf: *const c_void, count: usize, datatype: u32) -> Result<IoVec> {
    let len = count.checked_mul(dt_size(datatype)?).ok_or(Errno::INVAL)?;
    // SAFETY: forwarded.
    unsafe { app_buf(buf, len) }
}

/// Up to 4 `fi_ioc` entries as byte buffers (iov_limit of every provider here is ≤ 4).
///
/// # Safety
/// `ioc` NULL or valid for `count` entries, each naming memory valid until completion.
unsafe fn ioc_list(ioc: *const fi_ioc, count: usize, datatype: u32) -> Result<([IoVec; 4], usize)> {
    // SAFETY: forwarded.
    let v = unsafe { app_slice(ioc, count)? };
    if v.len() > 4 {
        return Err(Errno::INVAL);
    }
    let mut out = [IoVec::EMPTY; 4];
    for (o, i) in out.iter_mut().zip(v) {
        // SAFETY: forwarded.
        *o = unsafe { ioc_buf(i.addr, i.count, datatype)? };
    }
    Ok((out, v.len()))
}

/// An `fi_ioc` array with its descriptors, as the `*msg` calls take the compare and result
/// buffers.
#[derive(Clone, Copy)]
struct IocArray {
    ioc: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
}

impl IocArray {
    fn new(ioc: *const fi_ioc, desc: *mut *mut c_void, count: usize) -> IocArray {
        IocArray { ioc, desc, count }
    }

    /// No buffers (the calls that have no compare or no result).
    const NONE: IocArray = IocArray {
        ioc: core::ptr::null(),
        desc: core::ptr::null_mut(),
        count: 0,
    };
}

/// Where an atomic call applies and what it applies there.
#[derive(Clone, Copy)]
struct Target {
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
}

impl Target {
    fn new(dest: fi_addr_t, addr: u64, key: u64, datatype: u32, op: u32) -> Target {
        Target {
            dest,
            addr,
            key,
            datatype,
            op,
        }
    }

    /// The target range of `count` elements.
    fn ioc(&self, count: usize) -> [fi_rma_ioc; 1] {
        [fi_rma_ioc {
            addr: self.addr,
            count,
            key: self.key,
        }]
    }
}

struct AtomicArgs<'a> {
    kind: AtomicKind,
    iov: &'a [IoVec],
    desc: &'a [usize],
    compare: &'a [IoVec],
    compare_desc: &'a [usize],
    result: &'a [IoVec],
    result_desc: &'a [usize],
    addr: fi_addr_t,
    rma_ioc: &'a [fi_rma_ioc],
    datatype: u32,
    op: u32,
    context: *mut c_void,
    data: u64,
    flags: u64,
    call: Call,
}

impl<'a> AtomicArgs<'a> {
    /// A call of `kind` at `t` on `rma_ioc`, with no buffers yet, no CQ data and no flags.
    fn new(
        kind: AtomicKind,
        t: &Target,
        rma_ioc: &'a [fi_rma_ioc],
        context: *mut c_void,
        call: Call,
    ) -> AtomicArgs<'a> {
        AtomicArgs {
            kind,
            iov: &[],
            desc: &[],
            compare: &[],
            compare_desc: &[],
            result: &[],
            result_desc: &[],
            addr: t.dest,
            rma_ioc,
            datatype: t.datatype,
            op: t.op,
            context,
            data: 0,
            flags: 0,
            call,
        }
    }
}

impl<'a> AtomicArgs<'a> {
    /// With the operand buffers.
    fn operand(self, iov: &'a [IoVec], desc: &'a [usize]) -> AtomicArgs<'a> {
        AtomicArgs { iov, desc, ..self }
    }

    /// With the compare buffers.
    fn compare(self, compare: &'a [IoVec], compare_desc: &'a [usize]) -> AtomicArgs<'a> {
        AtomicArgs {
            compare,
            compare_desc,
            ..self
        }
    }

    /// With the result buffers.
    fn result(self, result: &'a [IoVec], result_desc: &'a [usize]) -> AtomicArgs<'a> {
        AtomicArgs {
            result,
            result_desc,
            ..self
        }
    }
}

/// Posts one decoded call to the endpoint.
fn atomic(e: &dyn Endpoint, a: AtomicArgs<'_>) -> Result<usize> {
    e.atomic(&AtomicOp {
        kind: a.kind,
        iov: a.iov,
        desc: a.desc,
        compare: a.compare,
        compare_desc: a.compare_desc,
        result: a.result,
        result_desc: a.result_desc,
        addr: a.addr,
        rma_ioc: a.rma_ioc,
        datatype: a.datatype,
        op: a.op,
        context: a.context as usize,
        data: a.data,
        flags: a.flags,
        call: a.call,
    })?;
    Ok(0)
}

/// Shared body of the three `*msg` atomic calls.
///
/// # Safety
/// Arguments as fi_atomic(3) defines them for the `*msg` calls.
unsafe fn atomic_msg(
    p: *mut fid_ep,
    m: *const fi_msg_atomic,
    kind: AtomicKind,
    compare: IocArray,
    result: IocArray,
    flags: u64,
) -> Result<usize> {
    // SAFETY: checked cast; descriptor valid for this call.
    let (e, m) = unsafe { (ep(p)?, m.as_ref().ok_or(Errno::INVAL)?) };
    // SAFETY: arrays inside `m` and the compare/result arrays are valid for their counts.
    unsafe {
        let (v, n) = ioc_list(m.msg_iov, m.iov_count, m.datatype)?;
        let (c, cn) = ioc_list(compare.ioc, compare.count, m.datatype)?;
        let (r, rn) = ioc_list(result.ioc, result.count, m.datatype)?;
        let a = AtomicArgs {
            kind,
            iov: &v[..n],
            desc: app_desc(m.desc, m.iov_count),
            compare: &c[..cn],
            compare_desc: app_desc(compare.desc, compare.count),
            result: &r[..rn],
            result_desc: app_desc(result.desc, result.count),
            addr: m.addr,
            rma_ioc: app_slice(m.rma_iov, m.rma_iov_count)?,
            datatype: m.datatype,
            op: m.op,
            context: m.context,
            data: m.data,
            flags: check_flags(flags)?,
            call: Call::Msg,
        };
        atomic(&**e, a)
    }
}

unsafe extern "C" fn atomic_write(
    p: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    let t = Target::new(dest, addr, key, datatype, op);
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid until completion (fi_atomic(3)).
        let (e, iov) = unsafe { (ep(p)?, [ioc_buf(buf, count, datatype)?]) };
        let (r, d) = (t.ioc(count), [desc as usize]);
        let a = AtomicArgs::new(AtomicKind::Write, &t, &r, context, Call::Plain);
        atomic(&**e, a.operand(&iov, &d))
    })
}

unsafe extern "C" fn atomic_writev(
    p: *mut fid_ep,
    iov: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    let t = Target::new(dest, addr, key, datatype, op);
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for `count`.
        let (e, (v, n), desc) = unsafe {
            (
                ep(p)?,
                ioc_list(iov, count, datatype)?,
                app_desc(desc, count),
            )
        };
        let r = t.ioc(elems(&v[..n], datatype)?);
        let a = AtomicArgs::new(AtomicKind::Write, &t, &r, context, Call::Plain);
        atomic(&**e, a.operand(&v[..n], desc))
    })
}

unsafe extern "C" fn atomic_writemsg(p: *mut fid_ep, m: *const fi_msg_atomic, flags: u64) -> isize {
    let none = IocArray::NONE;
    // SAFETY: forwarded arguments; no compare/result arrays.
    ssize_ret(|| unsafe { atomic_msg(p, m, AtomicKind::Write, none, none, flags) })
}

unsafe extern "C" fn atomic_inject(
    p: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
) -> isize {
    let t = Target::new(dest, addr, key, datatype, op);
    ssize_ret(|| {
        // SAFETY: checked cast; `buf` valid for the call.
        let (e, iov) = unsafe { (ep(p)?, [ioc_buf(buf, count, datatype)?]) };
        let r = t.ioc(count);
        let a = AtomicArgs::new(AtomicKind::Write, &t, &r, null_mut(), Call::Inject);
        atomic(&**e, a.operand(&iov, &[]))
    })
}

unsafe extern "C" fn atomic_readwrite(
    p: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    result: *mut c_void,
    result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    let t = Target::new(dest, addr, key, datatype, op);
    ssize_ret(|| {
        // SAFETY: checked cast; buffers valid until completion. FI_ATOMIC_READ has no operand,
        // so `buf` may be NULL for it.
        let (e, iov, res) = unsafe {
            let operand = if buf.is_null() && op == FI_ATOMIC_READ {
                IoVec::EMPTY
            } else {
                ioc_buf(buf, count, datatype)?
            };
            (ep(p)?, [operand], [ioc_buf(result, count, datatype)?])
        };
        let iov: &[IoVec] = if iov[0].is_empty() { &[] } else { &iov };
        let (r, d) = (t.ioc(count), [desc as usize, result_desc as usize]);
        let a = AtomicArgs::new(AtomicKind::Fetch, &t, &r, context, Call::Plain);
        atomic(&**e, a.operand(iov, &d[..1]).result(&res, &d[1..]))
    })
}

unsafe extern "C" fn atomic_readwritev(
    p: *mut fid_ep,
    iov: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    let t = Target::new(dest, addr, key, datatype, op);
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for their counts.
        unsafe {
            let e = ep(p)?;
            let (v, n) = ioc_list(iov, count, datatype)?;
            let (r, rn) = ioc_list(resultv, result_count, datatype)?;
            let tr = t.ioc(elems(&r[..rn], datatype)?);
            let a = AtomicArgs::new(AtomicKind::Fetch, &t, &tr, context, Call::Plain)
                .operand(&v[..n], app_desc(desc, count))
                .result(&r[..rn], app_desc(result_desc, result_count));
            atomic(&**e, a)
        }
    })
}

unsafe extern "C" fn atomic_readwritemsg(
    p: *mut fid_ep,
    m: *const fi_msg_atomic,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    let result = IocArray::new(resultv, result_desc, result_count);
    let none = IocArray::NONE;
    // SAFETY: forwarded arguments.
    ssize_ret(|| unsafe { atomic_msg(p, m, AtomicKind::Fetch, none, result, flags) })
}

unsafe extern "C" fn atomic_compwrite(
    p: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    compare: *const c_void,
    compare_desc: *mut c_void,
    result: *mut c_void,
    result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    let t = Target::new(dest, addr, key, datatype, op);
    let d = [desc as usize, compare_desc as usize, result_desc as usize];
    ssize_ret(|| {
        // SAFETY: checked cast; buffers valid until completion.
        let (e, iov, cmp, res) = unsafe {
            let one = |b| ioc_buf(b, count, datatype);
            (ep(p)?, [one(buf)?], [one(compare)?], [one(result)?])
        };
        let r = t.ioc(count);
        let a = AtomicArgs::new(AtomicKind::Compare, &t, &r, context, Call::Plain);
        let a = a.operand(&iov, &d[..1]).compare(&cmp, &d[1..2]);
        atomic(&**e, a.result(&res, &d[2..]))
    })
}

unsafe extern "C" fn atomic_compwritev(
    p: *mut fid_ep,
    iov: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    comparev: *const fi_ioc,
    compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> isize {
    let t = Target::new(dest, addr, key, datatype, op);
    ssize_ret(|| {
        // SAFETY: checked cast; arrays valid for their counts.
        unsafe {
            let e = ep(p)?;
            let (v, n) = ioc_list(iov, count, datatype)?;
            let (c, cn) = ioc_list(comparev, compare_count, datatype)?;
            let (r, rn) = ioc_list(resultv, result_count, datatype)?;
            let tr = t.ioc(elems(&v[..n], datatype)?);
            let a = AtomicArgs::new(AtomicKind::Compare, &t, &tr, context, Call::Plain)
                .operand(&v[..n], app_desc(desc, count))
                .compare(&c[..cn], app_desc(compare_desc, compare_count))
                .result(&r[..rn], app_desc(result_desc, result_count));
            atomic(&**e, a)
        }
    })
}

unsafe extern "C" fn atomic_compwritemsg(
    p: *mut fid_ep,
    m: *const fi_msg_atomic,
    comparev: *const fi_ioc,
    compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    let compare = IocArray::new(comparev, compare_desc, compare_count);
    let result = IocArray::new(resultv, result_desc, result_count);
    // SAFETY: forwarded arguments.
    ssize_ret(|| unsafe { atomic_msg(p, m, AtomicKind::Compare, compare, result, flags) })
}

/// # Safety
/// `count` NULL or writable.
unsafe fn valid(
    p: *mut fid_ep,
    kind: AtomicKind,
    datatype: u32,
    op: u32,
    count: *mut usize,
) -> Result<()> {
    // SAFETY: checked cast.
    let e = unsafe { ep(p)? };
    if count.is_null() {
        return Err(Errno::INVAL);
    }
    let n = e.atomic_valid(kind, datatype, op)?;
    // SAFETY: non-null out-parameter.
    unsafe { put(count, n) };
    Ok(())
}

unsafe extern "C" fn atomic_writevalid(
    p: *mut fid_ep,
    datatype: u32,
    op: u32,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded.
    int_ret(|| unsafe { valid(p, AtomicKind::Write, datatype, op, count) })
}
unsafe extern "C" fn atomic_readwritevalid(
    p: *mut fid_ep,
    datatype: u32,
    op: u32,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded.
    int_ret(|| unsafe { valid(p, AtomicKind::Fetch, datatype, op, count) })
}
unsafe extern "C" fn atomic_compwritevalid(
    p: *mut fid_ep,
    datatype: u32,
    op: u32,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded.
    int_ret(|| unsafe { valid(p, AtomicKind::Compare, datatype, op, count) })
}
