//! Fabric and domain objects (fi_fabric(3), fi_domain(3)) and the generic `-FI_ENOSYS` slots.

use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;
use std::sync::Arc;

use super::info::{info_from_c, node_for_api};
use super::object::{
    DomainObj, FabricObj, close_obj, fi_ops_with, fid_header, fid_kind, fid_no_bind, fid_no_control,
};
use super::{int_ret, opt_str, put};
use crate::abi::consts::*;
use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::{Errno, Info, Result};
use crate::util::av::AvAttr;
use crate::util::cntr::{Cntr, CntrAttr};
use crate::util::cq::{Cq, CqAttr};
use crate::util::ep::AtomicKind;
use crate::util::eq::{Eq, EqAttr};
use crate::util::{Domain, Fabric};

// ---- fabric ----

pub static FABRIC_FI_OPS: fi_ops =
    fi_ops_with(fabric_close, fid_no_bind, fid_no_control, fabric_ops_open);
fid_kind!(fid_fabric, FI_CLASS_FABRIC, FABRIC_FI_OPS);

pub static FABRIC_OPS: fi_ops_fabric = fi_ops_fabric {
    size: size_of::<fi_ops_fabric>(),
    domain: Some(fabric_domain),
    passive_ep: Some(fabric_passive_ep),
    eq_open: Some(fabric_eq_open),
    wait_open: Some(fabric_wait_open),
    trywait: Some(fabric_trywait),
    domain2: Some(fabric_domain2),
};

/// Wraps a provider fabric for C (fi_fabric).
pub fn fabric_to_c(
    imp: Arc<dyn Fabric>,
    api_version: u32,
    context: *mut c_void,
) -> *mut fid_fabric {
    let header = fid_fabric {
        fid: fid_header(FI_CLASS_FABRIC, context, &FABRIC_FI_OPS),
        ops: &FABRIC_OPS,
        api_version,
    };
    FabricObj::create(header, None, api_version, imp).cast()
}

/// `fi_open_ops(fabric, FI_EFA_FEATURE_OPS)` (fi_ext_efa.h).
pub static EFA_FEATURE_OPS: fi_efa_feature_ops = fi_efa_feature_ops {
    query: Some(efa_feature_query),
};

unsafe extern "C" fn efa_feature_query(feature: *const c_char) -> bool {
    // SAFETY: NULL or a C string (fi_ext_efa.h); NULL and non-UTF-8 names are no feature.
    match unsafe { opt_str(feature) } {
        Ok(Some(name)) => crate::prov::efa::has_feature(name),
        _ => false,
    }
}

/// `fi_open_ops`: the table `table` when the caller names `want` and `supports` accepts it;
/// another name is `-FI_ENOSYS`, a NULL name or out-parameter or any flag `-FI_EINVAL`.
///
/// # Safety
/// `name` is NULL or a C string; `ops` is NULL or writable.
unsafe fn open_named_ops<T>(
    name: *const c_char,
    flags: u64,
    ops: *mut *mut c_void,
    want: &str,
    supports: impl Fn(&str) -> bool,
    table: &'static T,
) -> Result<()> {
    // SAFETY: C string argument (contract).
    let name = unsafe { opt_str(name)? }.ok_or(Errno::INVAL)?;
    if ops.is_null() || flags != 0 {
        return Err(Errno::INVAL);
    }
    if name != want || !supports(name) {
        return Err(Errno::NOSYS);
    }
    // SAFETY: non-null out-parameter; the table is static and never written through.
    unsafe { put(ops, (table as *const T).cast_mut().cast()) };
    Ok(())
}

unsafe extern "C" fn fabric_ops_open(
    f: *mut fid,
    name: *const c_char,
    flags: u64,
    ops: *mut *mut c_void,
    _ctx: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_fid.
        let fab = unsafe { FabricObj::from_fid(f)? };
        let supports = |n: &str| fab.inner.supports_ops(n);
        // SAFETY: the arguments C passed to fi_open_ops.
        unsafe {
            open_named_ops(
                name,
                flags,
                ops,
                FI_EFA_FEATURE_OPS,
                supports,
                &EFA_FEATURE_OPS,
            )
        }
    })
}

unsafe extern "C" fn fabric_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the pointer C passed to fi_close.
    int_ret(|| unsafe { close_obj::<fid_fabric, Arc<dyn Fabric>>(f, |_| Ok(())) })
}

/// Reads an `fi_info` that belongs to an object of API `version`.
///
/// # Safety
/// `info` is NULL or a valid info for that API version.
pub(crate) unsafe fn read_info(info: *const fi_info, version: u32) -> Result<Info> {
    if info.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: forwarded contract.
    Ok(unsafe { info_from_c(info, node_for_api(version).layout()) })
}

unsafe extern "C" fn fabric_domain(
    fabric: *mut fid_fabric,
    info: *mut fi_info,
    dom: *mut *mut fid_domain,
    context: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: C passes its fabric pointer; `from_ptr` checks it.
        let fab = unsafe { FabricObj::from_ptr(fabric)? };
        if dom.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: `info` is the application's fi_info for this fabric.
        let info = unsafe { read_info(info, fab.api_version)? };
        let imp = fab.inner.domain(&info)?;
        let header = fid_domain {
            fid: fid_header(FI_CLASS_DOMAIN, context, &DOMAIN_FI_OPS),
            ops: &DOMAIN_OPS,
            mr: &super::mr::MR_OPS,
        };
        let obj = DomainObj::create(header, Some(&fab.refs), fab.api_version, imp);
        // SAFETY: `dom` checked non-null; out-parameter written on success only.
        unsafe { put(dom, obj.cast()) };
        Ok(())
    })
}

unsafe extern "C" fn fabric_domain2(
    fabric: *mut fid_fabric,
    info: *mut fi_info,
    dom: *mut *mut fid_domain,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    if flags != 0 {
        // FI_PEER domains (fi_peer(3)) are not offered.
        return Errno::NOSYS.neg();
    }
    // SAFETY: same arguments as fi_domain.
    unsafe { fabric_domain(fabric, info, dom, context) }
}

unsafe extern "C" fn fabric_passive_ep(
    _fabric: *mut fid_fabric,
    _info: *mut fi_info,
    _pep: *mut *mut fid_pep,
    _context: *mut c_void,
) -> c_int {
    // Connection-oriented (FI_EP_MSG) endpoints are not offered.
    Errno::NOSYS.neg()
}

unsafe extern "C" fn fabric_eq_open(
    fabric: *mut fid_fabric,
    attr: *mut fi_eq_attr,
    eq: *mut *mut fid_eq,
    context: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_ptr.
        let fab = unsafe { FabricObj::from_ptr(fabric)? };
        if attr.is_null() || eq.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: non-null attr supplied by the application for this call.
        let a = unsafe { &*attr };
        if !a.wait_set.is_null() || a.wait_obj == FI_WAIT_SET {
            return Err(Errno::NOSYS);
        }
        let imp = Eq::new(&EqAttr {
            size: a.size,
            flags: a.flags,
            wait_obj: a.wait_obj,
        })?;
        let obj = super::queues::eq_to_c(imp, &fab.refs, fab.api_version, context);
        // SAFETY: `eq` checked non-null.
        unsafe { put(eq, obj) };
        Ok(())
    })
}

unsafe extern "C" fn fabric_wait_open(
    _fabric: *mut fid_fabric,
    _attr: *mut fi_wait_attr,
    _waitset: *mut *mut fid_wait,
) -> c_int {
    // Wait sets are deprecated since 2.0 and not offered; per-object wait fds are.
    Errno::NOSYS.neg()
}

unsafe extern "C" fn fabric_trywait(
    fabric: *mut fid_fabric,
    fids: *mut *mut fid,
    count: c_int,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_ptr.
        unsafe { FabricObj::from_ptr(fabric)? };
        // SAFETY: `fids` holds `count` object pointers for this call.
        let fids = unsafe {
            super::app_slice(
                fids.cast_const(),
                usize::try_from(count).map_err(|_| Errno::INVAL)?,
            )?
        };
        for &f in fids {
            // SAFETY: each entry is an object pointer the application owns.
            unsafe { super::queues::trywait_one(f)? };
        }
        Ok(())
    })
}

// ---- domain ----

pub static DOMAIN_FI_OPS: fi_ops =
    fi_ops_with(domain_close, domain_bind, fid_no_control, domain_ops_open);
fid_kind!(fid_domain, FI_CLASS_DOMAIN, DOMAIN_FI_OPS);

pub static DOMAIN_OPS: fi_ops_domain = fi_ops_domain {
    size: size_of::<fi_ops_domain>(),
    av_open: Some(domain_av_open),
    cq_open: Some(domain_cq_open),
    endpoint: Some(domain_endpoint),
    scalable_ep: Some(domain_scalable_ep),
    cntr_open: Some(domain_cntr_open),
    poll_open: Some(domain_poll_open),
    stx_ctx: Some(domain_stx_ctx),
    srx_ctx: Some(domain_srx_ctx),
    query_atomic: Some(domain_query_atomic),
    query_collective: Some(domain_query_collective),
    endpoint2: Some(domain_endpoint2),
};

unsafe extern "C" fn domain_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the pointer C passed to fi_close.
    int_ret(|| unsafe { close_obj::<fid_domain, Arc<dyn Domain>>(f, |_| Ok(())) })
}

unsafe extern "C" fn domain_bind(f: *mut fid, b: *mut fid, _flags: u64) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_fid.
        unsafe { DomainObj::from_fid(f)? };
        // SAFETY: `b` is checked as an EQ of ours.
        unsafe { super::queues::EqObj::from_fid(b)? };
        // Asynchronous memory registration (events on an EQ) is not offered: registrations
        // complete synchronously, so a bound EQ would never receive anything.
        Err(Errno::NOSYS)
    })
}

/// `fi_open_ops(domain, FI_EFA_DOMAIN_OPS)`.
pub static EFA_DOMAIN_OPS: fi_efa_ops_domain = fi_efa_ops_domain {
    query_mr: Some(efa_query_mr),
};

unsafe extern "C" fn efa_query_mr(mr: *mut fid_mr, attr: *mut fi_efa_mr_attr) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_ptr.
        let m = unsafe { super::object::MrObj::from_ptr(mr)? };
        if attr.is_null() {
            return Err(Errno::INVAL);
        }
        // An EFA device's registration answers for itself (efadv_query_mr); the software
        // device has no interconnects: no interconnect id is valid (fi_efa(7)).
        let [ic_id_validity, recv_ic_id, rdma_read_ic_id, rdma_recv_ic_id] =
            m.inner.device().map_or([0; 4], |d| d.ic_ids());
        // SAFETY: non-null out-parameter.
        unsafe {
            put(
                attr,
                fi_efa_mr_attr {
                    ic_id_validity,
                    recv_ic_id,
                    rdma_read_ic_id,
                    rdma_recv_ic_id,
                },
            )
        };
        Ok(())
    })
}

unsafe extern "C" fn domain_ops_open(
    f: *mut fid,
    name: *const c_char,
    flags: u64,
    ops: *mut *mut c_void,
    _ctx: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_fid.
        let d = unsafe { DomainObj::from_fid(f)? };
        let supports = |n: &str| d.inner.supports_ops(n);
        // SAFETY: the arguments C passed to fi_open_ops.
        unsafe {
            open_named_ops(
                name,
                flags,
                ops,
                FI_EFA_DOMAIN_OPS,
                supports,
                &EFA_DOMAIN_OPS,
            )
        }
    })
}

unsafe extern "C" fn domain_av_open(
    domain: *mut fid_domain,
    attr: *mut fi_av_attr,
    av: *mut *mut fid_av,
    context: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_ptr.
        let d = unsafe { DomainObj::from_ptr(domain)? };
        if attr.is_null() || av.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: non-null attribute of this call.
        let a = unsafe { &*attr };
        let rattr = AvAttr {
            type_: a.type_,
            count: a.count,
            flags: a.flags,
            // SAFETY: NULL or a C string.
            name: unsafe { opt_str(a.name)? }.map(str::to_string),
            ep_per_node: a.ep_per_node,
            rx_ctx_bits: a.rx_ctx_bits,
        };
        let imp = d.inner.av_open(&rattr)?;
        let obj = super::av::av_to_c(imp, &d.refs, d.api_version, context);
        // SAFETY: non-null out-parameter.
        unsafe { put(av, obj) };
        Ok(())
    })
}

unsafe extern "C" fn domain_cq_open(
    domain: *mut fid_domain,
    attr: *mut fi_cq_attr,
    cq: *mut *mut fid_cq,
    context: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_ptr.
        let d = unsafe { DomainObj::from_ptr(domain)? };
        if attr.is_null() || cq.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: non-null attribute of this call.
        let a = unsafe { &*attr };
        if !a.wait_set.is_null() || a.wait_obj == FI_WAIT_SET {
            return Err(Errno::NOSYS);
        }
        if a.wait_cond != FI_CQ_COND_NONE && a.wait_cond != FI_CQ_COND_THRESHOLD {
            return Err(Errno::INVAL);
        }
        let imp = Cq::new_serial(
            &CqAttr {
                size: a.size,
                flags: a.flags,
                format: a.format,
                wait_obj: a.wait_obj,
                wait_cond: a.wait_cond,
            },
            d.inner.serialized(),
        )?;
        let obj = super::queues::cq_to_c(imp, &d.refs, d.api_version, context);
        // SAFETY: non-null out-parameter.
        unsafe { put(cq, obj) };
        Ok(())
    })
}

unsafe extern "C" fn domain_cntr_open(
    domain: *mut fid_domain,
    attr: *mut fi_cntr_attr,
    cntr: *mut *mut fid_cntr,
    context: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_ptr.
        let d = unsafe { DomainObj::from_ptr(domain)? };
        if cntr.is_null() {
            return Err(Errno::INVAL);
        }
        // fi_cntr(3): a NULL attr gives the defaults.
        let a = if attr.is_null() {
            CntrAttr {
                events: FI_CNTR_EVENTS_COMP,
                wait_obj: FI_WAIT_UNSPEC,
                flags: 0,
            }
        } else {
            // SAFETY: non-null attribute of this call.
            let a = unsafe { &*attr };
            if !a.wait_set.is_null() || a.wait_obj == FI_WAIT_SET {
                return Err(Errno::NOSYS);
            }
            CntrAttr {
                events: a.events,
                wait_obj: a.wait_obj,
                flags: a.flags,
            }
        };
        let imp = Cntr::new(&a)?;
        let obj = super::queues::cntr_to_c(imp, &d.refs, d.api_version, context);
        // SAFETY: non-null out-parameter.
        unsafe { put(cntr, obj) };
        Ok(())
    })
}

unsafe extern "C" fn domain_endpoint(
    domain: *mut fid_domain,
    info: *mut fi_info,
    ep: *mut *mut fid_ep,
    context: *mut c_void,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_ptr.
        let d = unsafe { DomainObj::from_ptr(domain)? };
        if ep.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: the application's info for this domain.
        let info = unsafe { read_info(info, d.api_version)? };
        let imp = d.inner.endpoint(&info)?;
        let obj = super::ep::ep_to_c(imp, &d.refs, d.api_version, context);
        // SAFETY: non-null out-parameter.
        unsafe { put(ep, obj) };
        Ok(())
    })
}

unsafe extern "C" fn domain_endpoint2(
    domain: *mut fid_domain,
    info: *mut fi_info,
    ep: *mut *mut fid_ep,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    if flags != 0 {
        return Errno::NOSYS.neg();
    }
    // SAFETY: same arguments as fi_endpoint.
    unsafe { domain_endpoint(domain, info, ep, context) }
}

unsafe extern "C" fn domain_scalable_ep(
    _d: *mut fid_domain,
    _i: *mut fi_info,
    _ep: *mut *mut fid_ep,
    _c: *mut c_void,
) -> c_int {
    Errno::NOSYS.neg()
}
unsafe extern "C" fn domain_poll_open(
    _d: *mut fid_domain,
    _a: *mut fi_poll_attr,
    _p: *mut *mut fid_poll,
) -> c_int {
    Errno::NOSYS.neg()
}
unsafe extern "C" fn domain_stx_ctx(
    _d: *mut fid_domain,
    _a: *mut fi_tx_attr,
    _s: *mut *mut fid_stx,
    _c: *mut c_void,
) -> c_int {
    Errno::NOSYS.neg()
}
unsafe extern "C" fn domain_srx_ctx(
    _d: *mut fid_domain,
    _a: *mut fi_rx_attr,
    _s: *mut *mut fid_ep,
    _c: *mut c_void,
) -> c_int {
    Errno::NOSYS.neg()
}
unsafe extern "C" fn domain_query_collective(
    _d: *mut fid_domain,
    _coll: u32,
    _a: *mut fi_collective_attr,
    _flags: u64,
) -> c_int {
    Errno::NOSYS.neg()
}

unsafe extern "C" fn domain_query_atomic(
    domain: *mut fid_domain,
    datatype: u32,
    op: u32,
    attr: *mut fi_atomic_attr,
    flags: u64,
) -> c_int {
    int_ret(|| {
        // SAFETY: checked by from_ptr.
        let d = unsafe { DomainObj::from_ptr(domain)? };
        if attr.is_null() {
            return Err(Errno::INVAL);
        }
        let kind = match flags & (FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC) {
            0 => AtomicKind::Write,
            FI_FETCH_ATOMIC => AtomicKind::Fetch,
            FI_COMPARE_ATOMIC => AtomicKind::Compare,
            _ => return Err(Errno::INVAL),
        };
        let a = d.inner.query_atomic(datatype, op, kind, flags)?;
        // SAFETY: non-null out-parameter.
        unsafe {
            put(
                attr,
                fi_atomic_attr {
                    count: a.count,
                    size: a.size,
                },
            )
        };
        Ok(())
    })
}
