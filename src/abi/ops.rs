//! Ops tables: every table starts with `size`, members in header order (abi-reference §2).
//!
//! Slots are `Option<fn>` so that a table read from C may hold NULL; the tables this library
//! publishes never do (the inline wrappers call most slots without checking).

use core::ffi::{c_char, c_int, c_void};

use super::types::*;

type Ssize = isize;

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops {
    pub size: usize,
    pub close: Option<unsafe extern "C" fn(fid: *mut fid) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(fid: *mut fid, bfid: *mut fid, flags: u64) -> c_int>,
    pub control:
        Option<unsafe extern "C" fn(fid: *mut fid, command: c_int, arg: *mut c_void) -> c_int>,
    pub ops_open: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            name: *const c_char,
            flags: u64,
            ops: *mut *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub tostr: Option<unsafe extern "C" fn(fid: *const fid, buf: *mut c_char, len: usize) -> c_int>,
    pub ops_set: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            name: *const c_char,
            flags: u64,
            ops: *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_fabric {
    pub size: usize,
    pub domain: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            info: *mut fi_info,
            dom: *mut *mut fid_domain,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub passive_ep: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            info: *mut fi_info,
            pep: *mut *mut fid_pep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub eq_open: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            attr: *mut fi_eq_attr,
            eq: *mut *mut fid_eq,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub wait_open: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            attr: *mut fi_wait_attr,
            waitset: *mut *mut fid_wait,
        ) -> c_int,
    >,
    pub trywait: Option<
        unsafe extern "C" fn(fabric: *mut fid_fabric, fids: *mut *mut fid, count: c_int) -> c_int,
    >,
    pub domain2: Option<
        unsafe extern "C" fn(
            fabric: *mut fid_fabric,
            info: *mut fi_info,
            dom: *mut *mut fid_domain,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_domain {
    pub size: usize,
    pub av_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_av_attr,
            av: *mut *mut fid_av,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cq_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_cq_attr,
            cq: *mut *mut fid_cq,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub endpoint: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            info: *mut fi_info,
            ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub scalable_ep: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            info: *mut fi_info,
            sep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub cntr_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_cntr_attr,
            cntr: *mut *mut fid_cntr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub poll_open: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_poll_attr,
            pollset: *mut *mut fid_poll,
        ) -> c_int,
    >,
    pub stx_ctx: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_tx_attr,
            stx: *mut *mut fid_stx,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub srx_ctx: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            attr: *mut fi_rx_attr,
            rx_ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub query_atomic: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            datatype: u32,
            op: u32,
            attr: *mut fi_atomic_attr,
            flags: u64,
        ) -> c_int,
    >,
    pub query_collective: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            coll: u32,
            attr: *mut fi_collective_attr,
            flags: u64,
        ) -> c_int,
    >,
    pub endpoint2: Option<
        unsafe extern "C" fn(
            domain: *mut fid_domain,
            info: *mut fi_info,
            ep: *mut *mut fid_ep,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_mr {
    pub size: usize,
    pub reg: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            buf: *const c_void,
            len: usize,
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            mr: *mut *mut fid_mr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub regv: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            iov: *const iovec,
            count: usize,
            access: u64,
            offset: u64,
            requested_key: u64,
            flags: u64,
            mr: *mut *mut fid_mr,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub regattr: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            attr: *const fi_mr_attr,
            flags: u64,
            mr: *mut *mut fid_mr,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_av {
    pub size: usize,
    pub insert: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            addr: *const c_void,
            count: usize,
            fi_addr: *mut fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub insertsvc: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            node: *const c_char,
            service: *const c_char,
            fi_addr: *mut fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub insertsym: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            node: *const c_char,
            nodecnt: usize,
            service: *const c_char,
            svccnt: usize,
            fi_addr: *mut fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub remove: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            fi_addr: *mut fi_addr_t,
            count: usize,
            flags: u64,
        ) -> c_int,
    >,
    pub lookup: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            fi_addr: fi_addr_t,
            addr: *mut c_void,
            addrlen: *mut usize,
        ) -> c_int,
    >,
    pub straddr: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            addr: *const c_void,
            buf: *mut c_char,
            len: *mut usize,
        ) -> *const c_char,
    >,
    pub av_set: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            attr: *mut fi_av_set_attr,
            av_set: *mut *mut fid_av_set,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub insert_auth_key: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            auth_key: *const c_void,
            auth_key_size: usize,
            fi_addr: *mut fi_addr_t,
            flags: u64,
        ) -> c_int,
    >,
    pub lookup_auth_key: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            fi_addr: fi_addr_t,
            auth_key: *mut c_void,
            auth_key_size: *mut usize,
        ) -> c_int,
    >,
    pub set_user_id: Option<
        unsafe extern "C" fn(
            av: *mut fid_av,
            fi_addr: fi_addr_t,
            user_id: fi_addr_t,
            flags: u64,
        ) -> c_int,
    >,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_av_set {
    pub size: usize,
    pub set_union:
        Option<unsafe extern "C" fn(dst: *mut fid_av_set, src: *const fid_av_set) -> c_int>,
    pub intersect:
        Option<unsafe extern "C" fn(dst: *mut fid_av_set, src: *const fid_av_set) -> c_int>,
    pub diff: Option<unsafe extern "C" fn(dst: *mut fid_av_set, src: *const fid_av_set) -> c_int>,
    pub insert: Option<unsafe extern "C" fn(set: *mut fid_av_set, addr: fi_addr_t) -> c_int>,
    pub remove: Option<unsafe extern "C" fn(set: *mut fid_av_set, addr: fi_addr_t) -> c_int>,
    pub addr:
        Option<unsafe extern "C" fn(set: *mut fid_av_set, coll_addr: *mut fi_addr_t) -> c_int>,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_ep {
    pub size: usize,
    pub cancel: Option<unsafe extern "C" fn(fid: fid_t, context: *mut c_void) -> Ssize>,
    pub getopt: Option<
        unsafe extern "C" fn(
            fid: fid_t,
            level: c_int,
            optname: c_int,
            optval: *mut c_void,
            optlen: *mut usize,
        ) -> c_int,
    >,
    pub setopt: Option<
        unsafe extern "C" fn(
            fid: fid_t,
            level: c_int,
            optname: c_int,
            optval: *const c_void,
            optlen: usize,
        ) -> c_int,
    >,
    pub tx_ctx: Option<
        unsafe extern "C" fn(
            sep: *mut fid_ep,
            index: c_int,
            attr: *mut fi_tx_attr,
            tx_ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub rx_ctx: Option<
        unsafe extern "C" fn(
            sep: *mut fid_ep,
            index: c_int,
            attr: *mut fi_rx_attr,
            rx_ep: *mut *mut fid_ep,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub rx_size_left: Option<unsafe extern "C" fn(ep: *mut fid_ep) -> Ssize>,
    pub tx_size_left: Option<unsafe extern "C" fn(ep: *mut fid_ep) -> Ssize>,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_cm {
    pub size: usize,
    pub setname:
        Option<unsafe extern "C" fn(fid: fid_t, addr: *mut c_void, addrlen: usize) -> c_int>,
    pub getname:
        Option<unsafe extern "C" fn(fid: fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int>,
    pub getpeer: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, addr: *mut c_void, addrlen: *mut usize) -> c_int,
    >,
    pub connect: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            addr: *const c_void,
            param: *const c_void,
            paramlen: usize,
        ) -> c_int,
    >,
    pub listen: Option<unsafe extern "C" fn(pep: *mut fid_pep) -> c_int>,
    pub accept: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, param: *const c_void, paramlen: usize) -> c_int,
    >,
    pub reject: Option<
        unsafe extern "C" fn(
            pep: *mut fid_pep,
            handle: fid_t,
            param: *const c_void,
            paramlen: usize,
        ) -> c_int,
    >,
    pub shutdown: Option<unsafe extern "C" fn(ep: *mut fid_ep, flags: u64) -> c_int>,
    pub join: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            addr: *const c_void,
            flags: u64,
            mc: *mut *mut fid_mc,
            context: *mut c_void,
        ) -> c_int,
    >,
}

/// `fi_ops_msg` and `fi_ops_tagged` share their shape except for tag arguments.
#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_msg {
    pub size: usize,
    pub recv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            len: usize,
            desc: *mut c_void,
            src_addr: fi_addr_t,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub recvv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            src_addr: fi_addr_t,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub recvmsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> Ssize>,
    pub send: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub sendv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            dest_addr: fi_addr_t,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub sendmsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> Ssize>,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            dest_addr: fi_addr_t,
        ) -> Ssize,
    >,
    pub senddata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            data: u64,
            dest_addr: fi_addr_t,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub injectdata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            data: u64,
            dest_addr: fi_addr_t,
        ) -> Ssize,
    >,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_tagged {
    pub size: usize,
    pub recv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            len: usize,
            desc: *mut c_void,
            src_addr: fi_addr_t,
            tag: u64,
            ignore: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub recvv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            src_addr: fi_addr_t,
            tag: u64,
            ignore: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub recvmsg: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> Ssize,
    >,
    pub send: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
            tag: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub sendv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            dest_addr: fi_addr_t,
            tag: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub sendmsg: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> Ssize,
    >,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            dest_addr: fi_addr_t,
            tag: u64,
        ) -> Ssize,
    >,
    pub senddata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            data: u64,
            dest_addr: fi_addr_t,
            tag: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub injectdata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            data: u64,
            dest_addr: fi_addr_t,
            tag: u64,
        ) -> Ssize,
    >,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_rma {
    pub size: usize,
    pub read: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *mut c_void,
            len: usize,
            desc: *mut c_void,
            src_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub readv: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            src_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub readmsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> Ssize>,
    pub write: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub writev: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            iov: *const iovec,
            desc: *mut *mut c_void,
            count: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub writemsg:
        Option<unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> Ssize>,
    pub inject: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
        ) -> Ssize,
    >,
    pub writedata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            desc: *mut c_void,
            data: u64,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
    pub injectdata: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            buf: *const c_void,
            len: usize,
            data: u64,
            dest_addr: fi_addr_t,
            addr: u64,
            key: u64,
        ) -> Ssize,
    >,
}

/// Shared signature pieces of the atomic ops (fi_atomic(3)).
pub type AtomicWriteFn = unsafe extern "C" fn(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    dest_addr: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> Ssize;
pub type AtomicWritevFn = unsafe extern "C" fn(
    ep: *mut fid_ep,
    iov: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    dest_addr: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> Ssize;
pub type AtomicWritemsgFn =
    unsafe extern "C" fn(ep: *mut fid_ep, msg: *const fi_msg_atomic, flags: u64) -> Ssize;
pub type AtomicInjectFn = unsafe extern "C" fn(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    dest_addr: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
) -> Ssize;
pub type AtomicReadwriteFn = unsafe extern "C" fn(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    result: *mut c_void,
    result_desc: *mut c_void,
    dest_addr: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> Ssize;
pub type AtomicReadwritevFn = unsafe extern "C" fn(
    ep: *mut fid_ep,
    iov: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    dest_addr: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> Ssize;
pub type AtomicReadwritemsgFn = unsafe extern "C" fn(
    ep: *mut fid_ep,
    msg: *const fi_msg_atomic,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> Ssize;
pub type AtomicCompwriteFn = unsafe extern "C" fn(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    desc: *mut c_void,
    compare: *const c_void,
    compare_desc: *mut c_void,
    result: *mut c_void,
    result_desc: *mut c_void,
    dest_addr: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> Ssize;
pub type AtomicCompwritevFn = unsafe extern "C" fn(
    ep: *mut fid_ep,
    iov: *const fi_ioc,
    desc: *mut *mut c_void,
    count: usize,
    comparev: *const fi_ioc,
    compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    dest_addr: fi_addr_t,
    addr: u64,
    key: u64,
    datatype: u32,
    op: u32,
    context: *mut c_void,
) -> Ssize;
pub type AtomicCompwritemsgFn = unsafe extern "C" fn(
    ep: *mut fid_ep,
    msg: *const fi_msg_atomic,
    comparev: *const fi_ioc,
    compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> Ssize;
pub type AtomicValidFn =
    unsafe extern "C" fn(ep: *mut fid_ep, datatype: u32, op: u32, count: *mut usize) -> c_int;

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_atomic {
    pub size: usize,
    pub write: Option<AtomicWriteFn>,
    pub writev: Option<AtomicWritevFn>,
    pub writemsg: Option<AtomicWritemsgFn>,
    pub inject: Option<AtomicInjectFn>,
    pub readwrite: Option<AtomicReadwriteFn>,
    pub readwritev: Option<AtomicReadwritevFn>,
    pub readwritemsg: Option<AtomicReadwritemsgFn>,
    pub compwrite: Option<AtomicCompwriteFn>,
    pub compwritev: Option<AtomicCompwritevFn>,
    pub compwritemsg: Option<AtomicCompwritemsgFn>,
    pub writevalid: Option<AtomicValidFn>,
    pub readwritevalid: Option<AtomicValidFn>,
    pub compwritevalid: Option<AtomicValidFn>,
}

/// Collective slots; this library offers no collectives, so every slot is a `-FI_ENOSYS` stub
/// and the exact argument lists are kept as raw pointers-sized words.
#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_collective {
    pub size: usize,
    pub barrier: Option<
        unsafe extern "C" fn(ep: *mut fid_ep, coll_addr: fi_addr_t, context: *mut c_void) -> Ssize,
    >,
    pub broadcast: Option<CollectiveStub>,
    pub alltoall: Option<CollectiveStub>,
    pub allreduce: Option<CollectiveStub>,
    pub allgather: Option<CollectiveStub>,
    pub reduce_scatter: Option<CollectiveStub>,
    pub reduce: Option<CollectiveStub>,
    pub scatter: Option<CollectiveStub>,
    pub gather: Option<CollectiveStub>,
    pub msg: Option<CollectiveStub>,
    pub barrier2: Option<
        unsafe extern "C" fn(
            ep: *mut fid_ep,
            coll_addr: fi_addr_t,
            flags: u64,
            context: *mut c_void,
        ) -> Ssize,
    >,
}

/// Every collective op except barrier takes the endpoint first and returns `ssize_t`; under the
/// SysV x86-64 calling convention a stub that reads only its first argument is callable with any
/// of their argument lists.
pub type CollectiveStub = unsafe extern "C" fn(ep: *mut fid_ep) -> Ssize;

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_eq {
    pub size: usize,
    pub read: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: *mut u32,
            buf: *mut c_void,
            len: usize,
            flags: u64,
        ) -> Ssize,
    >,
    pub readerr: Option<
        unsafe extern "C" fn(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> Ssize,
    >,
    pub write: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: u32,
            buf: *const c_void,
            len: usize,
            flags: u64,
        ) -> Ssize,
    >,
    pub sread: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            event: *mut u32,
            buf: *mut c_void,
            len: usize,
            timeout: c_int,
            flags: u64,
        ) -> Ssize,
    >,
    pub strerror: Option<
        unsafe extern "C" fn(
            eq: *mut fid_eq,
            prov_errno: c_int,
            err_data: *const c_void,
            buf: *mut c_char,
            len: usize,
        ) -> *const c_char,
    >,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_cq {
    pub size: usize,
    pub read:
        Option<unsafe extern "C" fn(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> Ssize>,
    pub readfrom: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: usize,
            src_addr: *mut fi_addr_t,
        ) -> Ssize,
    >,
    pub readerr: Option<
        unsafe extern "C" fn(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, flags: u64) -> Ssize,
    >,
    pub sread: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: usize,
            cond: *const c_void,
            timeout: c_int,
        ) -> Ssize,
    >,
    pub sreadfrom: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            buf: *mut c_void,
            count: usize,
            src_addr: *mut fi_addr_t,
            cond: *const c_void,
            timeout: c_int,
        ) -> Ssize,
    >,
    pub signal: Option<unsafe extern "C" fn(cq: *mut fid_cq) -> c_int>,
    pub strerror: Option<
        unsafe extern "C" fn(
            cq: *mut fid_cq,
            prov_errno: c_int,
            err_data: *const c_void,
            buf: *mut c_char,
            len: usize,
        ) -> *const c_char,
    >,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_cntr {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(cntr: *mut fid_cntr) -> u64>,
    pub readerr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr) -> u64>,
    pub add: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub set: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub wait:
        Option<unsafe extern "C" fn(cntr: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int>,
    pub adderr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
    pub seterr: Option<unsafe extern "C" fn(cntr: *mut fid_cntr, value: u64) -> c_int>,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_wait {
    pub size: usize,
    pub wait: Option<unsafe extern "C" fn(waitset: *mut fid_wait, timeout: c_int) -> c_int>,
}

#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_poll {
    pub size: usize,
    pub poll: Option<
        unsafe extern "C" fn(
            pollset: *mut fid_poll,
            context: *mut *mut c_void,
            count: c_int,
        ) -> c_int,
    >,
    pub poll_add: Option<
        unsafe extern "C" fn(pollset: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int,
    >,
    pub poll_del: Option<
        unsafe extern "C" fn(pollset: *mut fid_poll, event_fid: *mut fid, flags: u64) -> c_int,
    >,
}

/// fi_ext.h logging ops (the `fid_logging` object).
#[repr(C)]
#[derive(Debug)]
pub struct fi_ops_log {
    pub size: usize,
    pub enabled: Option<
        unsafe extern "C" fn(
            prov: *const fi_provider,
            level: u32,
            subsys: u32,
            flags: u64,
        ) -> c_int,
    >,
    pub ready: Option<
        unsafe extern "C" fn(
            prov: *const fi_provider,
            level: u32,
            subsys: u32,
            flags: u64,
            showtime: *mut u64,
        ) -> c_int,
    >,
    pub log: Option<
        unsafe extern "C" fn(
            prov: *const fi_provider,
            level: u32,
            subsys: u32,
            func: *const c_char,
            line: c_int,
            msg: *const c_char,
        ),
    >,
}

/// fi_ext_efa.h: `fi_open_ops(domain, FI_EFA_DOMAIN_OPS, ...)` (no `size` member).
#[repr(C)]
#[derive(Debug)]
pub struct fi_efa_ops_domain {
    pub query_mr:
        Option<unsafe extern "C" fn(mr: *mut fid_mr, mr_attr: *mut fi_efa_mr_attr) -> c_int>,
}

/// fi_ext_efa.h: `fi_open_ops(fabric, FI_EFA_FEATURE_OPS, ...)` (no `size` member): whether
/// the fabric has a behaviour, by name.
#[repr(C)]
#[derive(Debug)]
pub struct fi_efa_feature_ops {
    pub query: Option<unsafe extern "C" fn(feature: *const c_char) -> bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    #[test]
    fn table_sizes() {
        assert_eq!(size_of::<fi_ops>(), 56);
        assert_eq!(size_of::<fi_ops_fabric>(), 56);
        assert_eq!(size_of::<fi_ops_domain>(), 96);
        assert_eq!(size_of::<fi_ops_mr>(), 32);
        assert_eq!(size_of::<fi_ops_av>(), 88);
        assert_eq!(size_of::<fi_ops_ep>(), 64);
        assert_eq!(size_of::<fi_ops_msg>(), 80);
        assert_eq!(size_of::<fi_ops_tagged>(), 80);
        assert_eq!(size_of::<fi_ops_rma>(), 80);
        assert_eq!(size_of::<fi_ops_atomic>(), 112);
        assert_eq!(size_of::<fi_ops_cm>(), 80);
        assert_eq!(size_of::<fi_ops_collective>(), 96);
        assert_eq!(size_of::<fi_ops_av_set>(), 56);
        assert_eq!(size_of::<fi_ops_eq>(), 48);
        assert_eq!(size_of::<fi_ops_cq>(), 64);
        assert_eq!(size_of::<fi_ops_cntr>(), 64);
    }
}
