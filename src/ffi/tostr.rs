//! `fi_tostr`, `fi_tostr_r` (fi_fabric(3)), the NIC's `tostr` slot, and `fi_open`
//! (fi_provider(3)).
//!
//! The text itself is `core::tostr`'s; this file reads the C data each `FI_TYPE_*` points to
//! (an `fi_info` with the current layout) and reaches C objects' own `tostr` operations.

use core::cell::UnsafeCell;
use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of, zeroed};
use core::ptr;
use std::ffi::CStr;

use crate::abi::consts::*;
use crate::abi::ops::fi_ops;
use crate::abi::types::*;
use crate::core::Errno;
use crate::core::info::{BusAttr, DeviceAttr, LinkAttr, Nic};
use crate::core::tostr::{
    self, AddrView, AvAttrView, Buf, DomainView, FabricView, FidText, InfoView, Kind, NicView,
    TOSTR_BUF_LEN, Value,
};

/// Reads the first `bytes` bytes of `*p` into a zeroed `T` (the fields a caller's older or
/// partial structure holds; the rest reads as 0).
///
/// # Safety
/// `p` is valid for reads of `bytes` bytes, `bytes <= size_of::<T>()`, and all-zero is a valid
/// `T` (plain C data).
unsafe fn read_prefix<T>(p: *const T, bytes: usize) -> T {
    // SAFETY: plain C data for which all-zero is valid (contract).
    let mut v: T = unsafe { zeroed() };
    // SAFETY: `bytes` readable at `p`, writable in `v` (contract); byte copies need no alignment.
    unsafe {
        ptr::copy_nonoverlapping(
            p.cast::<u8>(),
            (&mut v as *mut T).cast::<u8>(),
            bytes.min(size_of::<T>()),
        )
    };
    v
}

/// A whole C structure (possibly unaligned).
///
/// # Safety
/// `p` is valid for reads of a `T`, and all-zero is a valid `T`.
unsafe fn read_all<T>(p: *const T) -> T {
    // SAFETY: forwarded.
    unsafe { read_prefix(p, size_of::<T>()) }
}

/// The bytes of a C string (NULL: None).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives `'a`.
unsafe fn c_bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null C string per the contract.
    Some(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// The bytes of an address of `format` at `p` that `core::tostr::straddr` reads.
///
/// # Safety
/// `p` is NULL or an address of `format` (readable for as many bytes as the format says).
unsafe fn addr_bytes(format: u32, p: *const c_void) -> Option<Vec<u8>> {
    if p.is_null() {
        return None;
    }
    let sockaddr = matches!(
        format,
        FI_SOCKADDR | FI_SOCKADDR_IP | FI_SOCKADDR_IN | FI_SOCKADDR_IN6
    );
    let family = if sockaddr {
        // SAFETY: a socket address starts with its 2-byte family (contract).
        u16::from_ne_bytes(unsafe { read_all(p.cast::<[u8; 2]>()) })
    } else {
        0
    };
    let bytes = match tostr::straddr_len(format, family) {
        // SAFETY: an FI_ADDR_STR address is a C string (contract).
        None => unsafe { CStr::from_ptr(p.cast()) }.to_bytes().to_vec(),
        // SAFETY: the format's size is readable at `p` (contract).
        Some(n) => unsafe { core::slice::from_raw_parts(p.cast::<u8>(), n) }.to_vec(),
    };
    Some(bytes)
}

/// The C objects named in `fi_info` (`handle`, `nic`) and `FI_TYPE_FID` data: an object whose
/// `fi_ops` has a `tostr` (`FI_CHECK_OP`) appends its own text. Like upstream, the operation
/// gets the start of the buffer and the room left.
struct CFids;

impl FidText for CFids {
    fn tostr(&mut self, buf: &mut Buf, fid: usize) -> bool {
        let f = fid as *const fid;
        // SAFETY: `fid` is non-zero and, per fi_tostr(3), a valid object whose `ops` is NULL or
        // a table of at least `size` bytes.
        unsafe {
            let ops = (*f).ops;
            if ops.is_null() || (*ops).size <= offset_of!(fi_ops, tostr) {
                return false;
            }
            let Some(op) = (*ops).tostr else {
                return false;
            };
            let room = buf.cap() - buf.len();
            op(f, buf.as_mut_ptr().cast(), room);
        }
        true
    }
}

/// The attributes of a C `fid_nic`.
///
/// # Safety
/// `n` is a valid `fid_nic` whose attribute pointers are NULL or valid.
unsafe fn nic_from_c(n: *const fid_nic) -> Nic {
    // SAFETY: per the contract (also for the attributes and their strings).
    unsafe {
        let n = &*n;
        let s = |p: *const c_char| c_bytes(p).map(|b| String::from_utf8_lossy(b).into_owned());
        Nic {
            device: n.device_attr.as_ref().map(|d| DeviceAttr {
                name: s(d.name),
                device_id: s(d.device_id),
                device_version: s(d.device_version),
                vendor_id: s(d.vendor_id),
                driver: s(d.driver),
                firmware: s(d.firmware),
            }),
            bus: n.bus_attr.as_ref().map(|b| BusAttr {
                bus_type: b.bus_type,
                pci_domain_id: b.pci.domain_id,
                pci_bus_id: b.pci.bus_id,
                pci_device_id: b.pci.device_id,
                pci_function_id: b.pci.function_id,
            }),
            link: n.link_attr.as_ref().map(|l| LinkAttr {
                address: s(l.address),
                mtu: l.mtu,
                speed: l.speed,
                state: l.state,
                network_type: s(l.network_type),
            }),
        }
    }
}

/// The `tostr` slot of the NICs this library builds: appends the `nic:` block.
pub(crate) unsafe extern "C" fn nic_tostr(f: *const fid, buf: *mut c_char, len: usize) -> c_int {
    super::int_ret(|| {
        if f.is_null() || buf.is_null() || len == 0 {
            return Err(Errno::INVAL);
        }
        // SAFETY: reached through a NIC's ops, so `f` is a `fid_nic`; `buf` is writable for
        // `len` bytes (the tostr contract).
        unsafe {
            if (*f).fclass != FI_CLASS_NIC {
                return Err(Errno::INVAL);
            }
            let nic = nic_from_c(f.cast());
            let data = core::slice::from_raw_parts_mut(buf.cast::<u8>(), len);
            tostr::nic(&mut Buf::new(data), &nic);
        }
        Ok(())
    })
}

/// Formats `data` as `datatype` into `out` (fi_tostr_r's work once its arguments are checked).
///
/// # Safety
/// `data` points to what `datatype` names (fi_fabric(3)), an `fi_info` with the current
/// layout, with every pointer in it NULL or valid.
unsafe fn format(out: &mut Buf, data: *const c_void, datatype: u32) {
    let fids = &mut CFids;
    // SAFETY: (every arm) `data` points to the type `kind` says (contract); structures are
    // read whole, or by the prefix the type's printer uses where older callers own less.
    unsafe {
        match tostr::kind(datatype) {
            Kind::Info => {
                let i: fi_info = read_all(data.cast());
                let src = addr_bytes(i.addr_format, i.src_addr);
                let dest = addr_bytes(i.addr_format, i.dest_addr);
                let tx = i.tx_attr.as_ref().map(|p| read_all(p));
                let rx = i.rx_attr.as_ref().map(|p| read_all(p));
                let ep = i.ep_attr.as_ref().map(|p| read_all(p));
                let dom: Option<fi_domain_attr> = i.domain_attr.as_ref().map(|p| read_all(p));
                let fab: Option<fi_fabric_attr> = i.fabric_attr.as_ref().map(|p| read_all(p));
                let view = InfoView {
                    caps: i.caps,
                    mode: i.mode,
                    addr_format: i.addr_format,
                    src_addrlen: i.src_addrlen,
                    dest_addrlen: i.dest_addrlen,
                    src_addr: src.as_deref().map(|bytes| AddrView {
                        ptr: i.src_addr as usize,
                        bytes,
                    }),
                    dest_addr: dest.as_deref().map(|bytes| AddrView {
                        ptr: i.dest_addr as usize,
                        bytes,
                    }),
                    handle: i.handle as usize,
                    tx_attr: tx.as_ref(),
                    rx_attr: rx.as_ref(),
                    ep_attr: ep.as_ref(),
                    domain_attr: dom.as_ref().map(|d| DomainView {
                        attr: d,
                        name: c_bytes(d.name),
                    }),
                    fabric_attr: fab.as_ref().map(|f| FabricView {
                        attr: f,
                        name: c_bytes(f.name),
                        prov_name: c_bytes(f.prov_name),
                    }),
                    nic: if i.nic.is_null() {
                        NicView::Null
                    } else {
                        NicView::Fid(i.nic as usize)
                    },
                };
                tostr::tostr(out, datatype, Value::Info(&view), fids);
            }
            Kind::Int => {
                let v = read_all(data.cast::<c_int>());
                tostr::tostr(out, datatype, Value::Int(v), fids)
            }
            Kind::U32 => {
                let v = read_all(data.cast::<u32>());
                tostr::tostr(out, datatype, Value::U32(v), fids)
            }
            Kind::U64 => {
                let v = read_all(data.cast::<u64>());
                tostr::tostr(out, datatype, Value::U64(v), fids)
            }
            Kind::TxAttr => {
                let a = read_all(data.cast::<fi_tx_attr>());
                tostr::tostr(out, datatype, Value::TxAttr(&a), fids)
            }
            Kind::RxAttr => {
                let a = read_all(data.cast::<fi_rx_attr>());
                tostr::tostr(out, datatype, Value::RxAttr(&a), fids)
            }
            Kind::EpAttr => {
                let a = read_all(data.cast::<fi_ep_attr>());
                tostr::tostr(out, datatype, Value::EpAttr(&a), fids)
            }
            Kind::DomainAttr => {
                let a = read_all(data.cast::<fi_domain_attr>());
                let v = DomainView {
                    attr: &a,
                    name: c_bytes(a.name),
                };
                tostr::tostr(out, datatype, Value::DomainAttr(v), fids)
            }
            Kind::FabricAttr => {
                let a = read_all(data.cast::<fi_fabric_attr>());
                let v = FabricView {
                    attr: &a,
                    name: c_bytes(a.name),
                    prov_name: c_bytes(a.prov_name),
                };
                tostr::tostr(out, datatype, Value::FabricAttr(v), fids)
            }
            Kind::Fid => tostr::tostr(out, datatype, Value::Fid(data as usize), fids),
            Kind::AvAttr => {
                let a = read_all(data.cast::<fi_av_attr>());
                let v = AvAttrView {
                    type_: a.type_,
                    count: a.count,
                    ep_per_node: a.ep_per_node,
                    name: c_bytes(a.name),
                    flags: a.flags,
                };
                tostr::tostr(out, datatype, Value::AvAttr(&v), fids)
            }
            Kind::CqAttr => {
                let a = read_all(data.cast::<fi_cq_attr>());
                tostr::tostr(out, datatype, Value::CqAttr(&a), fids)
            }
            Kind::MrAttr => {
                // The printed fields end with `iface`; 1.x callers own a shorter structure.
                let a = read_prefix(data.cast::<fi_mr_attr>(), offset_of!(fi_mr_attr, device));
                tostr::tostr(out, datatype, Value::MrAttr(&a), fids)
            }
            Kind::CntrAttr => {
                let a = read_all(data.cast::<fi_cntr_attr>());
                tostr::tostr(out, datatype, Value::CntrAttr(&a), fids)
            }
            Kind::CqErrEntry => {
                // Printed up to `err_data_size`; callers below API 1.20 own 80 bytes.
                let a = read_prefix(
                    data.cast::<fi_cq_err_entry>(),
                    offset_of!(fi_cq_err_entry, src_addr),
                );
                tostr::tostr(out, datatype, Value::CqErrEntry(&a), fids)
            }
            Kind::Nothing => tostr::tostr(out, datatype, Value::Nothing, fids),
        }
    }
}

/// # Safety
/// fi_tostr_r(3): `buf` writable for `len` bytes; `data` points to what `datatype` names.
/// NULL `buf` or `data`, or `len` 0, give NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_tostr_r(
    buf: *mut c_char,
    len: usize,
    data: *const c_void,
    datatype: u32,
) -> *mut c_char {
    super::guard(ptr::null_mut(), || {
        if buf.is_null() || len == 0 || data.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: `buf` is writable for `len` bytes (contract).
        let bytes = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        let mut out = Buf::new(bytes);
        out.clear();
        // SAFETY: forwarded contract.
        unsafe { format(&mut out, data, datatype) };
        buf
    })
}

/// This thread's `fi_tostr` buffer.
struct TostrBuf(Box<UnsafeCell<[u8; TOSTR_BUF_LEN]>>);

thread_local! {
    static TOSTR: TostrBuf = TostrBuf(Box::new(UnsafeCell::new([0; TOSTR_BUF_LEN])));
}

/// # Safety
/// fi_tostr(3): `data` points to what `datatype` names. The text lives in a buffer of the
/// calling thread, valid until its next `fi_tostr` call (upstream shares one buffer between
/// threads; one per thread keeps concurrent callers apart).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_tostr(data: *const c_void, datatype: u32) -> *mut c_char {
    super::guard(ptr::null_mut(), || {
        let Ok(buf) = TOSTR.try_with(|b| b.0.get().cast::<c_char>()) else {
            return ptr::null_mut();
        };
        // SAFETY: `buf` is this thread's buffer of TOSTR_BUF_LEN bytes; `data` per contract.
        unsafe { fi_tostr_r(buf, TOSTR_BUF_LEN, data, datatype) }
    })
}

/// # Safety
/// fi_open(3) (fi_provider(3) "fi_open"): `name` a C string, `fid` writable.
///
/// Names (case-insensitive): `"logging"` gives the logging object whose bind imports an
/// application's `fid_logging`. `"mr_cache"` is `-FI_ENOSYS`, as any other name: this library
/// keeps no registration cache, so there is no cache object to hand out and no memory monitor
/// it could use; callers such as Open MPI treat the error as "no cache to feed" and go on.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_open(
    version: u32,
    name: *const c_char,
    _attr: *mut c_void,
    attr_len: usize,
    flags: u64,
    fid: *mut *mut fid,
    context: *mut c_void,
) -> c_int {
    super::int_ret(|| {
        // SAFETY: NULL or a C string per fi_open(3).
        let name = unsafe { super::opt_str(name) }?.ok_or(Errno::INVAL)?;
        if fid.is_null() {
            return Err(Errno::INVAL);
        }
        if name.eq_ignore_ascii_case("logging") {
            let obj = super::log::open_logging(version, attr_len, flags, context)?;
            // SAFETY: checked non-null out-parameter.
            unsafe { *fid = obj };
            return Ok(());
        }
        Err(Errno::NOSYS)
    })
}

/// The text `fi_tostr` gives for `data` as type `t` (tests here and in `info`).
#[cfg(test)]
pub(super) fn tostr_of(data: *const c_void, t: u32) -> String {
    // SAFETY: test: `data` points to the named type; the result is a C string.
    unsafe {
        let p = fi_tostr(data, t);
        assert!(!p.is_null());
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn null_arguments() {
        let v = FI_MSG;
        let mut b = [0 as c_char; 8];
        // SAFETY: test: NULL and zero-length arguments are refused before any access.
        unsafe {
            assert!(fi_tostr(ptr::null(), FI_TYPE_CAPS).is_null());
            assert!(
                fi_tostr_r(ptr::null_mut(), 8, (&v as *const u64).cast(), FI_TYPE_CAPS).is_null()
            );
            assert!(
                fi_tostr_r(b.as_mut_ptr(), 0, (&v as *const u64).cast(), FI_TYPE_CAPS).is_null()
            );
            assert!(fi_tostr_r(b.as_mut_ptr(), 8, ptr::null(), FI_TYPE_CAPS).is_null());
        }
    }

    #[test]
    fn scalars_and_truncation() {
        let v = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC;
        assert_eq!(
            tostr_of((&v as *const u64).cast(), FI_TYPE_CAPS),
            "FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC"
        );
        let mut b = [0x55 as c_char; 16];
        // SAFETY: test: a 16-byte buffer and a u64.
        let s = unsafe {
            let bp = b.as_mut_ptr();
            let p = fi_tostr_r(bp, 16, (&v as *const u64).cast(), FI_TYPE_CAPS);
            assert_eq!(p, bp);
            CStr::from_ptr(p).to_str().unwrap().to_string()
        };
        assert_eq!(s, "FI_MSG, FI_RMA");
        let t: c_int = FI_THREAD_DOMAIN as c_int;
        assert_eq!(
            tostr_of((&t as *const c_int).cast(), FI_TYPE_THREADING),
            "FI_THREAD_DOMAIN"
        );
        let f: u32 = FI_ADDR_EFA;
        assert_eq!(
            tostr_of((&f as *const u32).cast(), FI_TYPE_ADDR_FORMAT),
            "FI_ADDR_EFA"
        );
        assert_eq!(
            tostr_of((&f as *const u32).cast(), FI_TYPE_VERSION),
            "2.6.0"
        );
        assert_eq!(tostr_of((&f as *const u32).cast(), 1000), "Unknown type");
    }

    #[test]
    fn c_attributes() {
        let name = CString::new("dom").unwrap();
        // SAFETY: test: all-zero is a valid fi_domain_attr.
        let mut d: fi_domain_attr = unsafe { zeroed() };
        d.name = name.as_ptr().cast_mut();
        d.threading = FI_THREAD_SAFE;
        let t = tostr_of((&d as *const fi_domain_attr).cast(), FI_TYPE_DOMAIN_ATTR);
        assert!(t.starts_with(
            "fi_domain_attr:\n    domain: (nil)\n    name: dom\n    threading: FI_THREAD_SAFE\n"
        ));
        // An error entry of a 1.x caller (80 bytes) is read without its last field.
        let mut e = [0u8; 80];
        e[56..60].copy_from_slice(&265i32.to_ne_bytes());
        let t = tostr_of(e.as_ptr().cast(), FI_TYPE_CQ_ERR_ENTRY);
        assert!(t.contains("    err: 265\n"));
        // A fid without tostr operation prints its address.
        static OPS: fi_ops = fi_ops {
            size: offset_of!(fi_ops, tostr),
            close: None,
            bind: None,
            control: None,
            ops_open: None,
            tostr: None,
            ops_set: None,
        };
        let f = fid {
            fclass: FI_CLASS_CQ,
            context: ptr::null_mut(),
            ops: &OPS,
        };
        let t = tostr_of((&f as *const fid).cast(), FI_TYPE_FID);
        assert_eq!(t, format!("fid: {:#x}\n", &f as *const fid as usize));
    }

    unsafe extern "C" {
        fn inet_ntop(af: c_int, src: *const c_void, dst: *mut c_char, size: u32) -> *const c_char;
    }

    #[test]
    #[cfg_attr(miri, ignore = "calls the C library's inet_ntop")]
    fn ipv6_text_matches_the_c_library() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for n in 0..4000 {
            let mut a = [0u8; 16];
            for (k, w) in a.chunks_mut(2).enumerate() {
                // Plenty of zero groups, so that runs and their ties get exercised.
                let r = next();
                if r % 3 != 0 || (n % 5 == 0 && k < 6) {
                    w.copy_from_slice(&[0, 0]);
                } else {
                    w.copy_from_slice(&(r as u16).to_be_bytes());
                }
            }
            if n % 7 == 0 {
                a[10] = 0xff;
                a[11] = 0xff;
            }
            let mut out = [0 as c_char; 64];
            // SAFETY: test: 16 address bytes and a 64-byte output buffer.
            let c = unsafe {
                inet_ntop(libc::AF_INET6, a.as_ptr().cast(), out.as_mut_ptr(), 64);
                CStr::from_ptr(out.as_ptr()).to_str().unwrap().to_string()
            };
            assert_eq!(tostr::ntop6(&a), c, "{a:?}");
        }
    }

    #[test]
    fn fi_open_arguments() {
        let mut f: *mut fid = ptr::null_mut();
        let name = CString::new("mr_cache").unwrap();
        let other = CString::new("nope").unwrap();
        let logging = CString::new("LOGGING").unwrap();
        // SAFETY: test: valid or NULL arguments as fi_open(3) allows.
        unsafe {
            assert_eq!(
                fi_open(
                    FI_VERSION_CURRENT,
                    ptr::null(),
                    ptr::null_mut(),
                    0,
                    0,
                    &mut f,
                    ptr::null_mut()
                ),
                -FI_EINVAL
            );
            assert_eq!(
                fi_open(
                    FI_VERSION_CURRENT,
                    logging.as_ptr(),
                    ptr::null_mut(),
                    0,
                    0,
                    ptr::null_mut(),
                    ptr::null_mut()
                ),
                -FI_EINVAL
            );
            assert_eq!(
                fi_open(
                    FI_VERSION_CURRENT,
                    name.as_ptr(),
                    ptr::null_mut(),
                    0,
                    0,
                    &mut f,
                    ptr::null_mut()
                ),
                -FI_ENOSYS
            );
            assert_eq!(
                fi_open(
                    FI_VERSION_CURRENT,
                    other.as_ptr(),
                    ptr::null_mut(),
                    0,
                    0,
                    &mut f,
                    ptr::null_mut()
                ),
                -FI_ENOSYS
            );
            assert!(f.is_null());
        }
    }
}
