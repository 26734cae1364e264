//! `struct fi_info` lists in C memory: reading hints, building results, `fi_dupinfo`,
//! `fi_freeinfo`. Everything here is allocated with the C library's `malloc` because
//! applications free what they `strdup`ed into hints with `fi_freeinfo`, and free our strings
//! with `free` (abi-reference §5).

use core::ffi::{c_char, c_int, c_void};
use core::mem::{size_of, zeroed};
use core::ptr::{self, null_mut};
use std::ffi::CStr;

use crate::abi::compat::{AbiNode, InfoLayout};
use crate::abi::consts::*;
use crate::abi::ops::fi_ops;
use crate::abi::types::*;
use crate::core::info::*;

/// The `fi_info` layout a caller of API `version` owns (struct growth follows releases).
pub fn node_for_api(version: u32) -> AbiNode {
    if version < fi_version(1, 5) {
        AbiNode::V1_0
    } else if version < fi_version(1, 7) {
        AbiNode::V1_1
    } else if version < fi_version(1, 9) {
        AbiNode::V1_2
    } else if version < fi_version(1, 20) {
        AbiNode::V1_3
    } else if version < fi_version(2, 0) {
        AbiNode::V1_7
    } else if version < fi_version(2, 5) {
        AbiNode::V1_8
    } else {
        AbiNode::V1_9
    }
}

/// Reads the first `bytes` of `*p` into a zeroed `T` (newer fields stay 0).
///
/// # Safety
/// `p` is valid for reads of `bytes` bytes and `bytes <= size_of::<T>()`.
unsafe fn read_prefix<T: Copy>(p: *const T, bytes: usize) -> T {
    // SAFETY: all the structs read this way are plain C data for which all-zero is valid.
    let mut v: T = unsafe { zeroed() };
    // SAFETY: `bytes` readable at `p` (contract) and writable in `v` (bytes ≤ size_of T).
    unsafe {
        ptr::copy_nonoverlapping(
            p.cast::<u8>(),
            (&mut v as *mut T).cast::<u8>(),
            bytes.min(size_of::<T>()),
        )
    };
    v
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the contract.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// # Safety
/// `p` is NULL or valid for `len` bytes.
unsafe fn c_bytes(p: *const c_void, len: usize) -> Option<Vec<u8>> {
    if p.is_null() || len == 0 {
        return None;
    }
    // SAFETY: valid for `len` bytes per the contract.
    Some(unsafe { core::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec())
}

/// Converts one C `fi_info` (not its successors) into an [`Info`]; NULL attributes read as
/// zeroed ones ("no constraint").
///
/// # Safety
/// `p` points to an `fi_info` whose structs are at least `layout`-sized and whose pointers are
/// NULL or valid.
pub unsafe fn info_from_c(p: *const fi_info, layout: InfoLayout) -> Info {
    // SAFETY: `p` is valid for `layout.info` bytes (contract).
    let i: fi_info = unsafe { read_prefix(p, layout.info) };
    let nic = if layout.info > core::mem::offset_of!(fi_info, nic) {
        i.nic
    } else {
        null_mut()
    };
    let mut out = Info {
        caps: i.caps,
        mode: i.mode,
        addr_format: i.addr_format,
        // SAFETY: address pointers are valid for their lengths (contract).
        src_addr: unsafe { c_bytes(i.src_addr, i.src_addrlen) },
        // SAFETY: as above.
        dest_addr: unsafe { c_bytes(i.dest_addr, i.dest_addrlen) },
        handle: i.handle as usize,
        ..Default::default()
    };
    if !i.tx_attr.is_null() {
        // SAFETY: non-null attrs are valid for their layout size.
        out.tx_attr = unsafe { read_prefix(i.tx_attr, layout.tx_attr) };
    }
    if !i.rx_attr.is_null() {
        // SAFETY: as above.
        out.rx_attr = unsafe { read_prefix(i.rx_attr, layout.rx_attr) };
    }
    if !i.ep_attr.is_null() {
        // SAFETY: as above.
        let e: fi_ep_attr = unsafe { read_prefix(i.ep_attr, layout.ep_attr) };
        out.ep_attr = EpAttr {
            type_: e.type_,
            protocol: e.protocol,
            protocol_version: e.protocol_version,
            max_msg_size: e.max_msg_size,
            msg_prefix_size: e.msg_prefix_size,
            max_order_raw_size: e.max_order_raw_size,
            max_order_war_size: e.max_order_war_size,
            max_order_waw_size: e.max_order_waw_size,
            mem_tag_format: e.mem_tag_format,
            tx_ctx_cnt: e.tx_ctx_cnt,
            rx_ctx_cnt: e.rx_ctx_cnt,
            // SAFETY: auth_key valid for auth_key_size bytes (contract).
            auth_key: unsafe { c_bytes(e.auth_key as *const c_void, e.auth_key_size) },
        };
    }
    if !i.domain_attr.is_null() {
        // SAFETY: as above.
        let d: fi_domain_attr = unsafe { read_prefix(i.domain_attr, layout.domain_attr) };
        out.domain_attr = DomainAttr {
            domain: d.domain as usize,
            // SAFETY: name is NULL or a C string (contract).
            name: unsafe { c_string(d.name) },
            threading: d.threading,
            control_progress: d.control_progress,
            progress: d.progress,
            resource_mgmt: d.resource_mgmt,
            av_type: d.av_type,
            mr_mode: d.mr_mode,
            mr_key_size: d.mr_key_size,
            cq_data_size: d.cq_data_size,
            cq_cnt: d.cq_cnt,
            ep_cnt: d.ep_cnt,
            tx_ctx_cnt: d.tx_ctx_cnt,
            rx_ctx_cnt: d.rx_ctx_cnt,
            max_ep_tx_ctx: d.max_ep_tx_ctx,
            max_ep_rx_ctx: d.max_ep_rx_ctx,
            max_ep_stx_ctx: d.max_ep_stx_ctx,
            max_ep_srx_ctx: d.max_ep_srx_ctx,
            cntr_cnt: d.cntr_cnt,
            mr_iov_limit: d.mr_iov_limit,
            caps: d.caps,
            mode: d.mode,
            // SAFETY: auth_key valid for auth_key_size bytes (contract).
            auth_key: unsafe { c_bytes(d.auth_key as *const c_void, d.auth_key_size) },
            max_err_data: d.max_err_data,
            mr_cnt: d.mr_cnt,
            tclass: d.tclass,
            max_ep_auth_key: d.max_ep_auth_key,
            max_group_id: d.max_group_id,
            max_cntr_value: d.max_cntr_value,
            max_err_cntr_value: d.max_err_cntr_value,
        };
    }
    if !i.fabric_attr.is_null() {
        // SAFETY: as above.
        let f: fi_fabric_attr = unsafe { read_prefix(i.fabric_attr, layout.fabric_attr) };
        out.fabric_attr = FabricAttr {
            fabric: f.fabric as usize,
            // SAFETY: NULL or C strings (contract).
            name: unsafe { c_string(f.name) },
            // SAFETY: as above.
            prov_name: unsafe { c_string(f.prov_name) },
            prov_version: f.prov_version,
            api_version: f.api_version,
        };
    }
    if !nic.is_null() {
        // SAFETY: a non-null nic is a valid fid_nic (contract).
        out.nic = Some(unsafe { nic_from_c(nic) });
    }
    out
}

/// # Safety
/// `n` is a valid `fid_nic` whose attribute pointers are NULL or valid.
unsafe fn nic_from_c(n: *const fid_nic) -> Nic {
    // SAFETY: valid per the contract (also for the three attribute structs below).
    let n = unsafe { &*n };
    let mut out = Nic::default();
    if !n.device_attr.is_null() {
        // SAFETY: see function contract.
        let d = unsafe { &*n.device_attr };
        // SAFETY: strings are NULL or NUL-terminated.
        unsafe {
            out.device = Some(DeviceAttr {
                name: c_string(d.name),
                device_id: c_string(d.device_id),
                device_version: c_string(d.device_version),
                vendor_id: c_string(d.vendor_id),
                driver: c_string(d.driver),
                firmware: c_string(d.firmware),
            });
        }
    }
    if !n.bus_attr.is_null() {
        // SAFETY: see function contract.
        let b = unsafe { &*n.bus_attr };
        out.bus = Some(BusAttr {
            bus_type: b.bus_type,
            pci_domain_id: b.pci.domain_id,
            pci_bus_id: b.pci.bus_id,
            pci_device_id: b.pci.device_id,
            pci_function_id: b.pci.function_id,
        });
    }
    if !n.link_attr.is_null() {
        // SAFETY: see function contract.
        let l = unsafe { &*n.link_attr };
        out.link = Some(LinkAttr {
            // SAFETY: strings are NULL or NUL-terminated.
            address: unsafe { c_string(l.address) },
            mtu: l.mtu,
            speed: l.speed,
            state: l.state,
            // SAFETY: as above.
            network_type: unsafe { c_string(l.network_type) },
        });
    }
    out
}

// ---- building C memory ----

/// A zeroed `malloc`ed `T`, or NULL.
fn calloc_one<T>() -> *mut T {
    // SAFETY: calloc has no preconditions; NULL is handled by callers.
    unsafe { libc::calloc(1, size_of::<T>()).cast() }
}

/// `malloc`ed copy of a string (NULL for None).
fn c_strdup(s: Option<&str>) -> *mut c_char {
    let Some(s) = s else { return null_mut() };
    let bytes = s.as_bytes();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    // SAFETY: allocate end+1 bytes, copy `end` bytes of a valid slice, terminate.
    unsafe {
        let p = libc::malloc(end + 1).cast::<u8>();
        if p.is_null() {
            return null_mut();
        }
        ptr::copy_nonoverlapping(bytes.as_ptr(), p, end);
        *p.add(end) = 0;
        p.cast()
    }
}

/// `malloc`ed copy of bytes (NULL for None or empty), with its length.
fn c_memdup(b: Option<&[u8]>) -> (*mut c_void, usize) {
    let Some(b) = b else { return (null_mut(), 0) };
    if b.is_empty() {
        return (null_mut(), 0);
    }
    // SAFETY: allocate b.len() bytes and copy a valid slice into them.
    unsafe {
        let p = libc::malloc(b.len());
        if p.is_null() {
            return (null_mut(), 0);
        }
        ptr::copy_nonoverlapping(b.as_ptr(), p.cast::<u8>(), b.len());
        (p, b.len())
    }
}

/// One `fi_info` (with all five attribute structs) in C memory, or NULL if out of memory.
pub fn info_to_c(i: &Info) -> *mut fi_info {
    let p = calloc_one::<fi_info>();
    if p.is_null() {
        return p;
    }
    // SAFETY: `p` is a fresh zeroed fi_info; each attr pointer is a fresh zeroed struct or NULL
    // (on allocation failure the partly built info is freed with free_info).
    unsafe {
        let out = &mut *p;
        out.caps = i.caps;
        out.mode = i.mode;
        out.addr_format = i.addr_format;
        (out.src_addr, out.src_addrlen) = c_memdup(i.src_addr.as_deref());
        (out.dest_addr, out.dest_addrlen) = c_memdup(i.dest_addr.as_deref());
        out.handle = i.handle as fid_t;
        out.tx_attr = calloc_one();
        out.rx_attr = calloc_one();
        out.ep_attr = calloc_one();
        out.domain_attr = calloc_one();
        out.fabric_attr = calloc_one();
        if out.tx_attr.is_null()
            || out.rx_attr.is_null()
            || out.ep_attr.is_null()
            || out.domain_attr.is_null()
            || out.fabric_attr.is_null()
        {
            free_info(p);
            return null_mut();
        }
        *out.tx_attr = i.tx_attr;
        *out.rx_attr = i.rx_attr;
        let e = &i.ep_attr;
        let (key, key_len) = c_memdup(e.auth_key.as_deref());
        *out.ep_attr = fi_ep_attr {
            type_: e.type_,
            protocol: e.protocol,
            protocol_version: e.protocol_version,
            max_msg_size: e.max_msg_size,
            msg_prefix_size: e.msg_prefix_size,
            max_order_raw_size: e.max_order_raw_size,
            max_order_war_size: e.max_order_war_size,
            max_order_waw_size: e.max_order_waw_size,
            mem_tag_format: e.mem_tag_format,
            tx_ctx_cnt: e.tx_ctx_cnt,
            rx_ctx_cnt: e.rx_ctx_cnt,
            auth_key_size: key_len,
            auth_key: key.cast(),
        };
        let d = &i.domain_attr;
        let (key, key_len) = c_memdup(d.auth_key.as_deref());
        *out.domain_attr = fi_domain_attr {
            domain: d.domain as *mut fid_domain,
            name: c_strdup(d.name.as_deref()),
            threading: d.threading,
            control_progress: d.control_progress,
            progress: d.progress,
            resource_mgmt: d.resource_mgmt,
            av_type: d.av_type,
            mr_mode: d.mr_mode,
            mr_key_size: d.mr_key_size,
            cq_data_size: d.cq_data_size,
            cq_cnt: d.cq_cnt,
            ep_cnt: d.ep_cnt,
            tx_ctx_cnt: d.tx_ctx_cnt,
            rx_ctx_cnt: d.rx_ctx_cnt,
            max_ep_tx_ctx: d.max_ep_tx_ctx,
            max_ep_rx_ctx: d.max_ep_rx_ctx,
            max_ep_stx_ctx: d.max_ep_stx_ctx,
            max_ep_srx_ctx: d.max_ep_srx_ctx,
            cntr_cnt: d.cntr_cnt,
            mr_iov_limit: d.mr_iov_limit,
            caps: d.caps,
            mode: d.mode,
            auth_key: key.cast(),
            auth_key_size: key_len,
            max_err_data: d.max_err_data,
            mr_cnt: d.mr_cnt,
            tclass: d.tclass,
            max_ep_auth_key: d.max_ep_auth_key,
            max_group_id: d.max_group_id,
            max_cntr_value: d.max_cntr_value,
            max_err_cntr_value: d.max_err_cntr_value,
        };
        let f = &i.fabric_attr;
        *out.fabric_attr = fi_fabric_attr {
            fabric: f.fabric as *mut fid_fabric,
            name: c_strdup(f.name.as_deref()),
            prov_name: c_strdup(f.prov_name.as_deref()),
            prov_version: f.prov_version,
            api_version: f.api_version,
        };
        if let Some(n) = &i.nic {
            out.nic = nic_to_c(n);
        }
    }
    p
}

/// A list of infos in C memory, in order; NULL if empty or out of memory.
pub fn info_list_to_c(list: &[Info]) -> *mut fi_info {
    let mut head: *mut fi_info = null_mut();
    let mut tail: *mut fi_info = null_mut();
    for i in list {
        let p = info_to_c(i);
        if p.is_null() {
            // SAFETY: `head` is the partial list we built.
            unsafe { free_info(head) };
            return null_mut();
        }
        if tail.is_null() {
            head = p;
        } else {
            // SAFETY: `tail` is the last node we built.
            unsafe { (*tail).next = p };
        }
        tail = p;
    }
    head
}

/// The `fi_ops` of the NICs this library builds: close frees, `FI_DUP` copies.
pub static NIC_FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close: Some(nic_close),
    bind: Some(super::object::fid_no_bind),
    control: Some(nic_control),
    ops_open: Some(super::object::fid_no_ops_open),
    tostr: Some(super::tostr::nic_tostr),
    ops_set: Some(super::object::fid_no_ops_set),
};

fn nic_to_c(n: &Nic) -> *mut fid_nic {
    let p = calloc_one::<fid_nic>();
    if p.is_null() {
        return p;
    }
    // SAFETY: `p` and each attr are fresh zeroed allocations (or NULL, left NULL).
    unsafe {
        let out = &mut *p;
        out.fid = fid {
            fclass: FI_CLASS_NIC,
            context: null_mut(),
            ops: &NIC_FI_OPS,
        };
        if let Some(d) = &n.device {
            let a = calloc_one::<fi_device_attr>();
            if !a.is_null() {
                *a = fi_device_attr {
                    name: c_strdup(d.name.as_deref()),
                    device_id: c_strdup(d.device_id.as_deref()),
                    device_version: c_strdup(d.device_version.as_deref()),
                    vendor_id: c_strdup(d.vendor_id.as_deref()),
                    driver: c_strdup(d.driver.as_deref()),
                    firmware: c_strdup(d.firmware.as_deref()),
                };
            }
            out.device_attr = a;
        }
        if let Some(b) = &n.bus {
            let a = calloc_one::<fi_bus_attr>();
            if !a.is_null() {
                *a = fi_bus_attr {
                    bus_type: b.bus_type,
                    pci: fi_pci_attr {
                        domain_id: b.pci_domain_id,
                        bus_id: b.pci_bus_id,
                        device_id: b.pci_device_id,
                        function_id: b.pci_function_id,
                    },
                };
            }
            out.bus_attr = a;
        }
        if let Some(l) = &n.link {
            let a = calloc_one::<fi_link_attr>();
            if !a.is_null() {
                *a = fi_link_attr {
                    address: c_strdup(l.address.as_deref()),
                    mtu: l.mtu,
                    speed: l.speed,
                    state: l.state,
                    network_type: c_strdup(l.network_type.as_deref()),
                };
            }
            out.link_attr = a;
        }
    }
    p
}

/// # Safety
/// `n` is a NIC built by `nic_to_c` (or NULL).
unsafe fn free_nic(n: *mut fid_nic) {
    if n.is_null() {
        return;
    }
    // SAFETY: every pointer in a NIC we built is NULL or from malloc.
    unsafe {
        let nic = &*n;
        if let Some(d) = nic.device_attr.as_ref() {
            for s in [
                d.name,
                d.device_id,
                d.device_version,
                d.vendor_id,
                d.driver,
                d.firmware,
            ] {
                libc::free(s.cast());
            }
        }
        libc::free(nic.device_attr.cast());
        libc::free(nic.bus_attr.cast());
        if let Some(l) = nic.link_attr.as_ref() {
            libc::free(l.address.cast());
            libc::free(l.network_type.cast());
        }
        libc::free(nic.link_attr.cast());
        libc::free(n.cast());
    }
}

unsafe extern "C" fn nic_close(f: *mut fid) -> c_int {
    super::int_ret(|| {
        // SAFETY: reached only through NIC_FI_OPS, i.e. for NICs built by nic_to_c.
        unsafe { free_nic(f.cast()) };
        Ok(())
    })
}

unsafe extern "C" fn nic_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    super::int_ret(|| {
        if command != FI_DUP || arg.is_null() {
            return Err(crate::core::Errno::NOSYS);
        }
        // SAFETY: reached through NIC_FI_OPS, so `f` is one of our NICs; `arg` is the
        // `struct fid **` FI_DUP writes (non-null checked).
        unsafe {
            let copy = nic_to_c(&nic_from_c(f.cast()));
            if copy.is_null() {
                return Err(crate::core::Errno::NOMEM);
            }
            *arg.cast::<*mut fid>() = copy.cast();
        }
        Ok(())
    })
}

/// `fi_freeinfo`: frees a list and everything it owns, with `free`.
///
/// # Safety
/// `p` is NULL or a list whose members were allocated with `malloc` (ours, or the
/// application's, as fi_freeinfo(3) requires), not used after this call.
pub unsafe fn free_info(mut p: *mut fi_info) {
    while !p.is_null() {
        // SAFETY: `p` is an fi_info list built by this library or by the application with
        // malloc'd members (the fi_freeinfo contract); each node is freed once.
        unsafe {
            let i = &*p;
            let next = i.next;
            libc::free(i.src_addr);
            libc::free(i.dest_addr);
            if let Some(e) = i.ep_attr.as_ref() {
                libc::free(e.auth_key.cast());
            }
            if let Some(d) = i.domain_attr.as_ref() {
                libc::free(d.name.cast());
                libc::free(d.auth_key.cast());
            }
            if let Some(f) = i.fabric_attr.as_ref() {
                libc::free(f.name.cast());
                libc::free(f.prov_name.cast());
            }
            libc::free(i.tx_attr.cast());
            libc::free(i.rx_attr.cast());
            libc::free(i.ep_attr.cast());
            libc::free(i.domain_attr.cast());
            libc::free(i.fabric_attr.cast());
            if !i.nic.is_null() {
                let nic = &*i.nic;
                if let Some(ops) = nic.fid.ops.as_ref()
                    && let Some(close) = ops.close
                {
                    close(i.nic.cast());
                }
            }
            libc::free(p.cast());
            p = next;
        }
    }
}

/// `fi_dupinfo`: a deep copy of one info (not its successors). The source structs are read as
/// `layout` (older callers own shorter structs); the copy always has the current layout.
/// NULL gives a zeroed info with zeroed attributes (`fi_allocinfo`).
///
/// # Safety
/// `src` is NULL or a valid info of at least `layout` size.
pub unsafe fn dup_info(src: *const fi_info, layout: InfoLayout) -> *mut fi_info {
    if src.is_null() {
        return info_to_c(&Info::default());
    }
    // SAFETY: forwarded contract.
    let info = unsafe { info_from_c(src, layout) };
    let p = info_to_c(&info);
    if p.is_null() {
        return p;
    }
    // Attributes that were NULL in the source stay NULL in the copy.
    // SAFETY: `src` is readable for `layout.info` bytes; `p` is the info just built.
    unsafe {
        let s: fi_info = read_prefix(src, layout.info);
        let d = &mut *p;
        macro_rules! keep_null {
            ($f:ident) => {
                if s.$f.is_null() {
                    libc::free(d.$f.cast());
                    d.$f = null_mut();
                }
            };
        }
        keep_null!(tx_attr);
        keep_null!(rx_attr);
        keep_null!(ep_attr);
        keep_null!(domain_attr);
        keep_null!(fabric_attr);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_free() {
        let mut i = Info {
            caps: FI_MSG,
            src_addr: Some(vec![1, 2, 3]),
            ..Default::default()
        };
        i.domain_attr.name = Some("dom".into());
        i.fabric_attr.prov_name = Some("shm".into());
        i.ep_attr.auth_key = Some(vec![9; 4]);
        i.nic = Some(Nic {
            link: Some(LinkAttr {
                mtu: 9000,
                address: Some("x".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let list = info_list_to_c(&[i.clone(), Info::default()]);
        assert!(!list.is_null());
        // SAFETY: test: `list` was just built with two nodes.
        let back = unsafe { info_from_c(list, AbiNode::V1_9.layout()) };
        assert_eq!(back, i);
        // SAFETY: as above.
        let dup = unsafe { dup_info(list, AbiNode::V1_9.layout()) };
        // SAFETY: as above.
        assert_eq!(unsafe { info_from_c(dup, AbiNode::V1_9.layout()) }, i);
        // SAFETY: as above.
        assert!(unsafe { (*dup).next }.is_null());
        // SAFETY: test: both lists are ours and not used afterwards.
        unsafe {
            free_info(dup);
            free_info(list);
        }
    }

    #[test]
    fn infos_built_by_the_library() {
        let mut i = Info {
            caps: FI_MSG,
            addr_format: FI_ADDR_STR,
            src_addr: Some(b"fi_shm://42\0".to_vec()),
            ..Default::default()
        };
        i.domain_attr.name = Some("shm".into());
        i.fabric_attr.prov_name = Some("shm".into());
        i.nic = Some(Nic {
            link: Some(LinkAttr {
                mtu: 1500,
                state: FI_LINK_UP,
                ..Default::default()
            }),
            ..Default::default()
        });
        let c = info_to_c(&i);
        assert!(!c.is_null());
        let text = crate::ffi::tostr::tostr_of(c.cast(), FI_TYPE_INFO);
        // The same text as the Rust view of the same info (the nic through its tostr slot).
        assert_eq!(text, crate::core::tostr::info_to_string(&i));
        assert!(
            text.contains("    src_addrlen: 12\n    dest_addrlen: 0\n    src_addr: fi_shm://42\n")
        );
        assert!(text.contains("    nic:\n        fi_device_attr: (null)\n"));
        assert!(text.contains("            mtu: 1500\n"));
        // SAFETY: test: the info is ours; fid is its NIC.
        unsafe {
            let nic = (*c).nic;
            let t = crate::ffi::tostr::tostr_of(nic.cast(), FI_TYPE_FID);
            assert!(t.starts_with("    nic:\n"), "{t}");
            free_info(c);
        }
    }

    #[test]
    fn api_versions_map_to_layouts() {
        assert_eq!(node_for_api(fi_version(1, 4)), AbiNode::V1_0);
        assert_eq!(node_for_api(fi_version(1, 17)), AbiNode::V1_3);
        assert_eq!(node_for_api(fi_version(1, 21)), AbiNode::V1_7);
        assert_eq!(node_for_api(fi_version(2, 6)), AbiNode::V1_9);
    }
}
