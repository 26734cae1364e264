//! The exported functions (abi-reference §1). Versioned ones are defined here under internal
//! names and bound to `name@FABRIC_1.x` by `symver`; the rest carry their public names.

use core::ffi::{c_char, c_int, c_void};
use core::ptr;

use super::info::{dup_info, free_info, info_list_to_c};
use super::{int_ret, opt_str, put};
use crate::abi::compat::AbiNode;
use crate::abi::consts::*;
use crate::abi::types::*;
use crate::core::info::FabricAttr;
use crate::core::{Errno, Result};

/// `fi_getinfo` for a caller bound to `node` (its hints are read with that node's layout).
///
/// # Safety
/// Arguments as fi_getinfo(3) defines them.
unsafe fn getinfo(
    node: AbiNode,
    version: u32,
    host: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    int_ret(|| {
        if info.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: `info` checked non-null; cleared so that a failed call leaves it NULL.
        unsafe { *info = ptr::null_mut() };
        // SAFETY: C strings per fi_getinfo(3).
        let (host, service) = unsafe { (opt_str(host)?, opt_str(service)?) };
        let hints = if hints.is_null() {
            None
        } else {
            // SAFETY: `hints` is a valid info of the caller's layout.
            Some(unsafe { super::info::info_from_c(hints, node.layout()) })
        };
        let list = crate::core::getinfo::getinfo(
            &crate::prov::info_providers(),
            version,
            host,
            service,
            flags,
            hints.as_ref(),
        )?;
        let c = info_list_to_c(&list);
        if c.is_null() {
            return Err(Errno::NOMEM);
        }
        // SAFETY: non-null out-parameter.
        unsafe { *info = c };
        Ok(())
    })
}

macro_rules! abi_node_entry_points {
    ($node:expr, $getinfo:ident, $freeinfo:ident, $dupinfo:ident) => {
        /// # Safety
        /// fi_getinfo(3).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $getinfo(
            version: u32,
            node: *const c_char,
            service: *const c_char,
            flags: u64,
            hints: *const fi_info,
            info: *mut *mut fi_info,
        ) -> c_int {
            // SAFETY: forwarded arguments.
            unsafe { getinfo($node, version, node, service, flags, hints, info) }
        }

        /// # Safety
        /// fi_freeinfo(3).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $freeinfo(info: *mut fi_info) {
            // SAFETY: `info` is a list for fi_freeinfo(3).
            super::guard((), || unsafe { free_info(info) })
        }

        /// # Safety
        /// fi_dupinfo(3): NULL gives a zeroed current-layout info (`fi_allocinfo`).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $dupinfo(info: *const fi_info) -> *mut fi_info {
            // SAFETY: `info` is NULL or a valid info of the caller's layout.
            super::guard(ptr::null_mut(), || unsafe {
                dup_info(info, $node.layout())
            })
        }
    };
}

abi_node_entry_points!(
    AbiNode::V1_0,
    fabric_getinfo_1_0,
    fabric_freeinfo_1_0,
    fabric_dupinfo_1_0
);
abi_node_entry_points!(
    AbiNode::V1_1,
    fabric_getinfo_1_1,
    fabric_freeinfo_1_1,
    fabric_dupinfo_1_1
);
abi_node_entry_points!(
    AbiNode::V1_2,
    fabric_getinfo_1_2,
    fabric_freeinfo_1_2,
    fabric_dupinfo_1_2
);
abi_node_entry_points!(
    AbiNode::V1_3,
    fabric_getinfo_1_3,
    fabric_freeinfo_1_3,
    fabric_dupinfo_1_3
);
abi_node_entry_points!(
    AbiNode::V1_7,
    fabric_getinfo_1_7,
    fabric_freeinfo_1_7,
    fabric_dupinfo_1_7
);
abi_node_entry_points!(
    AbiNode::V1_8,
    fabric_getinfo_1_8,
    fabric_freeinfo_1_8,
    fabric_dupinfo_1_8
);
abi_node_entry_points!(
    AbiNode::V1_9,
    fabric_getinfo_1_9,
    fabric_freeinfo_1_9,
    fabric_dupinfo_1_9
);

/// Opens a fabric of the provider named in `attr`.
///
/// # Safety
/// `attr` valid for `attr_size` bytes; `fabric` writable.
unsafe fn open_fabric(
    attr: *const fi_fabric_attr,
    legacy: bool,
    fabric: *mut *mut fid_fabric,
    context: *mut c_void,
) -> Result<()> {
    if attr.is_null() || fabric.is_null() {
        return Err(Errno::INVAL);
    }
    // SAFETY: non-null attribute of this call.
    let a = unsafe { &*attr };
    // SAFETY: NULL or C strings.
    let (name, prov_name) = unsafe { (opt_str(a.name)?, opt_str(a.prov_name)?) };
    let (Some(name), Some(prov_name)) = (name, prov_name) else {
        return Err(Errno::INVAL);
    };
    // fi_fabric(3): the provider is the last of a `;`-layered name.
    let core_name = prov_name.rsplit(';').next().unwrap_or(prov_name);
    let prov = crate::prov::registry()
        .iter()
        .find(|p| p.name().eq_ignore_ascii_case(core_name))
        .ok_or(Errno::NODEV)?;
    // The 1.0 layout has no api_version (its bytes are padding).
    let api_version = if legacy {
        crate::abi::consts::fi_version(1, 0)
    } else {
        a.api_version
    };
    let rattr = FabricAttr {
        fabric: 0,
        name: Some(name.to_string()),
        prov_name: Some(prov_name.to_string()),
        prov_version: a.prov_version,
        api_version,
    };
    let imp = prov.fabric(&rattr)?;
    let obj = super::domain::fabric_to_c(imp, api_version, context);
    // SAFETY: non-null out-parameter.
    unsafe { put(fabric, obj) };
    Ok(())
}

/// # Safety
/// fi_fabric(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fabric_fabric_1_1(
    attr: *mut fi_fabric_attr,
    fabric: *mut *mut fid_fabric,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded.
    int_ret(|| unsafe { open_fabric(attr, false, fabric, context) })
}

/// # Safety
/// fi_fabric(3), 1.0 layout.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fabric_fabric_1_0(
    attr: *mut fi_fabric_attr,
    fabric: *mut *mut fid_fabric,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded; the 1.0 struct has the same prefix and only `api_version` is ignored.
    int_ret(|| unsafe { open_fabric(attr, true, fabric, context) })
}

/// # Safety
/// fi_fabric2(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_fabric2(
    info: *mut fi_info,
    fabric: *mut *mut fid_fabric,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    int_ret(|| {
        if info.is_null() || flags != 0 {
            return Err(Errno::INVAL);
        }
        // SAFETY: non-null info of the caller; its fabric_attr is NULL or valid.
        let attr = unsafe { (*info).fabric_attr };
        // SAFETY: forwarded.
        unsafe { open_fabric(attr, false, fabric, context) }
    })
}

/// fi_version(3): the API version this library implements.
#[unsafe(no_mangle)]
pub extern "C" fn fi_version() -> u32 {
    FI_VERSION_CURRENT
}

/// fi_strerror(3).
#[unsafe(no_mangle)]
pub extern "C" fn fi_strerror(errnum: c_int) -> *const c_char {
    super::guard(c"Unspecified error".as_ptr(), || {
        crate::core::errno::strerror_c(errnum).as_ptr()
    })
}
