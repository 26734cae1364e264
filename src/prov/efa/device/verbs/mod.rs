//! The EFA hardware device: an SRD queue pair of an EFA NIC through rdma-core (libibverbs and
//! libefa), opened with `dlopen` on first use ([`ffi::load`]), so the library loads and runs
//! with software SRD alone where rdma-core or an EFA device is absent.
//!
//! Per endpoint, one SRD QP (`efadv_create_qp_ex`, EFADV_QP_DRIVER_TYPE_SRD) taken through
//! INIT (the endpoint's QKEY) → RTR → RTS (`rnr_retry` from `FI_OPT_EFA_RNR_RETRY`, so RTS
//! waits for the first send or poll: the option is set after the QP exists), and one
//! extended CQ that reports the sender's GID (`efadv_create_cq`, EFADV_WC_EX_WITH_SGID).
//! Address handles are per peer GID, shared by the endpoints of a domain and refcounted.
//! Datagrams go through two registered pools of MTU-sized slots, one for sends and one for
//! receives: the RDM layer's buffers are plain memory, so each datagram is copied once into
//! (or out of) a slot — no registration and no allocation per message. (Zero-copy sends from
//! registered application memory come with a later slice.)
//!
//! Application memory is registered per domain ([`HwContext::reg_mr`], `ibv_reg_mr` with
//! local write, and remote read / remote write where the device does them and the
//! application asked for them); the rkey is the key the application sees. Device RDMA read,
//! write and write with immediate ([`Device::post_rdma`]) move registered memory between
//! queue pairs with no packet of the RDM protocol; a write with immediate takes one of the
//! target's posted receives and reports its data there ([`Completion::WriteData`]).
//!
//! Completion errors carry EFA's status in `vendor_err` (efa-reference §6) and map to the
//! same [`DevError`] as the software device's: RNR (10) → `Rnr`, bad length (6, 11) →
//! `TooBig`, remote bad address (7: an RDMA key, bound or access refused) → `RemoteAccess`,
//! invalid lkey (5) → `LocalKey`, unresponsive or unreachable remote (13, 15) and every
//! other error → `Unreachable`.
//!
//! The hardware does not say which QKEY a datagram came from, only its QPN and address
//! handle (or GID): receive completions carry the QKEY this endpoint last sent to at that
//! GID and QPN, or 0 when it has sent nothing there; the RDM layer then takes the sender's
//! QKEY from the packet's raw-address or connid header (efa-reference §7).
//!
//! All verbs calls go through one table ([`ffi::Verbs`]): libibverbs and libefa, or the
//! emulated NIC of [`emul`] that tests install.

#![allow(unsafe_code)]

#[doc(hidden)]
pub mod emul;
pub mod ffi;

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::{
    Completion, DevError, Device, DeviceCaps, EfaAddr, HEADROOM, MIN_MTU, RdmaOp, RdmaReq, Staging,
    recv_buf_len,
};
use crate::abi::consts::{FI_REMOTE_READ, FI_REMOTE_WRITE, FI_SEND, FI_WRITE};
use crate::core::Errno;
use crate::prov::efa::srd;
use crate::sys::mem::IoVec;
use crate::sys::pages::Pages;
use crate::util::hash::FastMap;
use ffi::*;

static INSTALLED: Mutex<Option<&'static Verbs>> = Mutex::new(None);

/// Makes discovery and domains use `v` instead of rdma-core (tests: the emulated NIC).
pub fn install(v: &'static Verbs) {
    *INSTALLED.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
}

/// The verbs table: the installed one, else rdma-core's if it loads.
pub fn table() -> Result<&'static Verbs, String> {
    if let Some(v) = *INSTALLED.lock().unwrap_or_else(|e| e.into_inner()) {
        return Ok(v);
    }
    ffi::load()
}

/// An EFA device as discovery found it.
#[derive(Clone)]
pub struct HwDeviceInfo {
    /// The verbs device name (`efa0`, `rdmap0s31`); domains are `<name>-rdm`, `<name>-dgrm`.
    pub name: String,
    pub gid: [u8; 16],
    /// Largest datagram: the port's `max_msg_sz`, lowered by `FI_EFA_MTU_SIZE`.
    pub mtu: usize,
    /// Bytes a send can carry inline (efadv `inline_buf_size`).
    pub inline_size: usize,
    /// Largest device RDMA transfer (efadv `max_rdma_size`).
    pub max_rdma_size: usize,
    pub caps: DeviceCaps,
    /// The QP takes an RNR retry count (efadv `EFADV_DEVICE_ATTR_CAPS_RNR_RETRY`).
    pub rnr_retry_cap: bool,
    /// The device can take a write with immediate data without a posted receive
    /// (`EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV`, for a QP created with
    /// `EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV`). Reported, not used: our QPs are created
    /// without the flag and never advertise extra-info bit 8, so writes with immediate
    /// always take a posted receive (`docs/hardware.md`).
    pub unsolicited_write_recv: bool,
    pub max_sq_wr: usize,
    pub max_rq_wr: usize,
    pub vendor_part_id: u32,
    /// Port speed in bits/s (width × lane rate).
    pub speed_bps: u64,
    pub up: bool,
    /// The device's PCI function (sysfs), for `fi_nic`'s bus attributes.
    pub pci: Option<crate::sys::netif::PciAddr>,
    verbs: &'static Verbs,
}

impl core::fmt::Debug for HwDeviceInfo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HwDeviceInfo")
            .field("name", &self.name)
            .field("mtu", &self.mtu)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

/// `active_width` × `active_speed` of ibv_port_attr in bits/s (ibv_query_port(3)).
fn port_speed(width: u8, speed: u8) -> u64 {
    let lanes = match width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => 0,
    };
    let gbps_x10: u64 = match speed {
        1 => 25,
        2 => 50,
        4 | 8 => 100,
        16 => 140,
        32 => 250,
        64 => 500,
        128 => 1000,
        _ => 0,
    };
    lanes * gbps_x10 * 100_000_000
}

/// The EFA devices of this host: every verbs device on which `efadv_query_device`
/// succeeds (others, and everything when rdma-core is absent, are skipped). `filter`
/// (`FI_EFA_IFACE`) names devices to keep; `mtu_override` (`FI_EFA_MTU_SIZE`) lowers the MTU.
pub fn discover(filter: Option<&str>, mtu_override: Option<usize>) -> Vec<HwDeviceInfo> {
    let v = match table() {
        Ok(v) => v,
        Err(e) => {
            crate::fi_info!(
                "efa",
                crate::core::log::Subsys::Core,
                "rdma-core not loaded ({e}): software SRD devices only"
            );
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    let mut n = 0;
    // SAFETY: a valid out-pointer; the list is freed below.
    let list = unsafe { (v.get_device_list)(&mut n) };
    if list.is_null() {
        return out;
    }
    for i in 0..n.max(0) as usize {
        // SAFETY: `list` holds `n` device pointers.
        let dev = unsafe { *list.add(i) };
        if let Some(d) = probe(v, dev, mtu_override) {
            let keep = filter.is_none_or(|f| f.split(',').map(str::trim).any(|x| x == d.name));
            if keep {
                out.push(d);
            }
        }
    }
    // SAFETY: the list from get_device_list, no longer used.
    unsafe { (v.free_device_list)(list) };
    out
}

fn probe(
    v: &'static Verbs,
    dev: *mut IbvDevice,
    mtu_override: Option<usize>,
) -> Option<HwDeviceInfo> {
    // SAFETY: `dev` is an entry of a live device list; the name is copied at once.
    let name = unsafe {
        let p = (v.get_device_name)(dev);
        if p.is_null() {
            return None;
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    };
    // SAFETY: as above; the context is closed before returning.
    let ctx = unsafe { (v.open_device)(dev) };
    if ctx.is_null() {
        return None;
    }
    let mut efa = EfadvDeviceAttr::default();
    let mut attr = IbvDeviceAttr::default();
    let mut port = IbvPortAttr::default();
    let mut gid = IbvGid::default();
    // SAFETY: `ctx` is open; every out-pointer is a local of the right type and size.
    let ok = unsafe {
        (v.efadv_query_device)(
            ctx,
            &mut efa,
            core::mem::size_of::<EfadvDeviceAttr>() as u32,
        ) == 0
            && (v.query_device)(ctx, &mut attr) == 0
            && (v.query_port)(ctx, 1, &mut port) == 0
            && (v.query_gid)(ctx, 1, 0, &mut gid) == 0
    };
    // SAFETY: the context opened above, used by nothing else.
    unsafe { (v.close_device)(ctx) };
    if !ok {
        return None;
    }
    let mut mtu = port.max_msg_sz as usize;
    if let Some(m) = mtu_override {
        mtu = mtu.min(m.max(MIN_MTU));
    }
    Some(HwDeviceInfo {
        gid: gid.raw,
        mtu,
        inline_size: usize::from(efa.inline_buf_size),
        max_rdma_size: efa.max_rdma_size as usize,
        caps: DeviceCaps {
            rdma_read: efa.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ != 0,
            rdma_write: efa.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE != 0,
        },
        rnr_retry_cap: efa.device_caps & EFADV_DEVICE_ATTR_CAPS_RNR_RETRY != 0,
        unsolicited_write_recv: efa.device_caps & EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV
            != 0,
        max_sq_wr: efa.max_sq_wr as usize,
        max_rq_wr: efa.max_rq_wr as usize,
        vendor_part_id: attr.vendor_part_id,
        speed_bps: port_speed(port.active_width, port.active_speed),
        up: port.state == IBV_PORT_ACTIVE,
        pci: crate::sys::netif::ib_device_pci(&name),
        name,
        verbs: v,
    })
}

/// A raw verbs handle that may move between threads: rdma-core's objects are thread-safe
/// (verbs calls may come from any thread), and each one here is used under its owner's lock.
struct H<T>(*mut T);
// SAFETY: see the type's docs.
unsafe impl<T> Send for H<T> {}
// SAFETY: see the type's docs.
unsafe impl<T> Sync for H<T> {}

/// An address handle shared by the endpoints of one context.
struct AhEntry {
    ah: H<Ah>,
    ahn: u16,
    refs: usize,
}

#[derive(Default)]
struct Ahs {
    by_gid: FastMap<[u8; 16], AhEntry>,
    gid_of: FastMap<u16, [u8; 16]>,
}

/// An open device: its context, protection domain and address handles, shared by a domain
/// and its endpoints.
pub struct HwContext {
    pub info: HwDeviceInfo,
    v: &'static Verbs,
    ctx: H<Ctx>,
    pd: H<Pd>,
    ahs: Mutex<Ahs>,
    /// Application registrations by (start address, id): end address, lkey, and the rkey if
    /// remote reads are allowed, for the local side of device RDMA ([`HwContext::lkey_for`])
    /// and the memory long-read requests hand out ([`HwContext::rkey_for`]).
    regs: RwLock<BTreeMap<(usize, u64), Reg>>,
    next_reg: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Reg {
    end: usize,
    lkey: u32,
    readable: Option<u32>,
}

/// An application region registered with the device (`ibv_reg_mr`); deregistered when
/// dropped (the domain's MR goes with `fi_close`).
#[derive(Debug)]
pub struct HwMr {
    hw: Arc<HwContext>,
    mr: H<Mr>,
    id: u64,
    start: usize,
    pub lkey: u32,
    pub rkey: u32,
    /// What `efadv_query_mr` said (zeros where libefa lacks it).
    attr: EfadvMrAttr,
}

impl core::fmt::Debug for HwContext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HwContext")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl<T> core::fmt::Debug for H<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:p}", self.0)
    }
}

impl Drop for HwMr {
    fn drop(&mut self) {
        self.hw
            .regs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(self.start, self.id));
        // SAFETY: the registration made by reg_mr, dropped once: by fi_close of its region
        // (fi_mr(3): no operation may use a region being closed), or, for a staging buffer,
        // after its reads completed or their QP was destroyed.
        unsafe { (self.hw.v.dereg_mr)(self.mr.0) };
    }
}

impl crate::util::mr::DeviceMr for HwMr {
    fn ic_ids(&self) -> [u16; 4] {
        let a = &self.attr;
        [
            a.ic_id_validity,
            a.recv_ic_id,
            a.rdma_read_ic_id,
            a.rdma_recv_ic_id,
        ]
    }
}

impl HwContext {
    /// Opens device `info` (found again by name: device pointers live only as long as the
    /// list that gave them).
    pub fn open(info: &HwDeviceInfo) -> crate::core::Result<Arc<HwContext>> {
        let v = info.verbs;
        let mut n = 0;
        // SAFETY: a valid out-pointer; the list is freed below.
        let list = unsafe { (v.get_device_list)(&mut n) };
        if list.is_null() {
            return Err(Errno::NODEV);
        }
        let mut ctx = core::ptr::null_mut();
        for i in 0..n.max(0) as usize {
            // SAFETY: `list` holds `n` devices; names are copied at once.
            let (dev, name) = unsafe {
                let d = *list.add(i);
                let p = (v.get_device_name)(d);
                (
                    d,
                    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned()),
                )
            };
            if name.as_deref() == Some(info.name.as_str()) {
                // SAFETY: a device of the live list.
                ctx = unsafe { (v.open_device)(dev) };
                break;
            }
        }
        // SAFETY: the list from get_device_list; the opened context does not depend on it.
        unsafe { (v.free_device_list)(list) };
        if ctx.is_null() {
            return Err(Errno::NODEV);
        }
        // SAFETY: `ctx` is open.
        let pd = unsafe { (v.alloc_pd)(ctx) };
        if pd.is_null() {
            // SAFETY: closing the context just opened.
            unsafe { (v.close_device)(ctx) };
            return Err(Errno::NOMEM);
        }
        Ok(Arc::new(HwContext {
            info: info.clone(),
            v,
            ctx: H(ctx),
            pd: H(pd),
            ahs: Mutex::new(Ahs::default()),
            regs: RwLock::new(BTreeMap::new()),
            next_reg: AtomicU64::new(1),
        }))
    }

    /// Registers application memory `mem` (`ibv_reg_mr`): always local write (device reads
    /// land in it), remote read and remote write only where the device does them and
    /// `fi_access` asks for them, so the NIC refuses what the MR map would: remote write for
    /// `FI_REMOTE_WRITE`, remote read for `FI_REMOTE_READ` and for `FI_SEND` / `FI_WRITE`
    /// (the source of a long-read message or write is read by the peer's device).
    pub fn reg_mr(self: &Arc<Self>, mem: IoVec, fi_access: u64) -> crate::core::Result<HwMr> {
        let caps = self.info.caps;
        let mut access = IBV_ACCESS_LOCAL_WRITE;
        if caps.rdma_read && fi_access & (FI_REMOTE_READ | FI_SEND | FI_WRITE) != 0 {
            access |= IBV_ACCESS_REMOTE_READ;
        }
        if caps.rdma_write && fi_access & FI_REMOTE_WRITE != 0 {
            access |= IBV_ACCESS_REMOTE_WRITE;
        }
        // SAFETY: the PD is live; fi_mr(3) keeps the region valid until the MR is closed,
        // which drops the HwMr and deregisters it.
        let mr = unsafe { (self.v.reg_mr)(self.pd.0, mem.as_ptr().cast(), mem.len(), access) };
        if mr.is_null() {
            crate::fi_warn!(
                "efa",
                crate::core::log::Subsys::Mr,
                "{}: ibv_reg_mr of {} bytes failed",
                self.info.name,
                mem.len()
            );
            return Err(Errno::NOMEM);
        }
        // SAFETY: the MR just registered.
        let (lkey, rkey) = unsafe { (self.v.mr_keys)(mr) };
        let mut attr = EfadvMrAttr::default();
        // SAFETY: as above; `attr` is a local of the size passed.
        let rc = unsafe {
            (self.v.efadv_query_mr)(mr, &mut attr, core::mem::size_of::<EfadvMrAttr>() as u32)
        };
        if rc != 0 {
            attr = EfadvMrAttr::default();
        }
        let id = self.next_reg.fetch_add(1, Ordering::Relaxed);
        let start = mem.addr();
        self.regs.write().unwrap_or_else(|e| e.into_inner()).insert(
            (start, id),
            Reg {
                end: start + mem.len(),
                lkey,
                readable: (access & IBV_ACCESS_REMOTE_READ != 0).then_some(rkey),
            },
        );
        Ok(HwMr {
            hw: self.clone(),
            mr: H(mr),
            id,
            start,
            lkey,
            rkey,
            attr,
        })
    }

    /// The lkey of a registration covering `[addr, addr + len)`: the nearest few starting at
    /// or below `addr` are looked at (overlapping registrations of one buffer are rare).
    pub fn lkey_for(&self, addr: usize, len: usize) -> Option<u32> {
        self.reg_for(addr, len, |r| Some(r.lkey))
    }

    /// The rkey of a registration covering `[addr, addr + len)` that peers may read.
    pub fn rkey_for(&self, addr: usize, len: usize) -> Option<u32> {
        self.reg_for(addr, len, |r| r.readable)
    }

    fn reg_for(&self, addr: usize, len: usize, f: impl Fn(&Reg) -> Option<u32>) -> Option<u32> {
        let end = addr.checked_add(len)?;
        let regs = self.regs.read().unwrap_or_else(|e| e.into_inner());
        regs.range(..=(addr, u64::MAX))
            .rev()
            .take(8)
            .filter(|(_, r)| r.end >= end)
            .find_map(|(_, r)| f(r))
    }

    fn ahs(&self) -> std::sync::MutexGuard<'_, Ahs> {
        self.ahs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The address handle for `gid`, created on first use; one more reference.
    fn ah_get(&self, gid: [u8; 16]) -> Option<(*mut Ah, u16)> {
        let mut a = self.ahs();
        if let Some(e) = a.by_gid.get_mut(&gid) {
            e.refs += 1;
            return Some((e.ah.0, e.ahn));
        }
        let mut attr = IbvAhAttr {
            is_global: 1,
            port_num: 1,
            ..IbvAhAttr::default()
        };
        attr.grh.dgid = IbvGid { raw: gid };
        // SAFETY: the PD is live; `attr` is a local.
        let ah = unsafe { (self.v.create_ah)(self.pd.0, &mut attr) };
        if ah.is_null() {
            return None;
        }
        let mut q = EfadvAhAttr::default();
        // SAFETY: `ah` was just created; `q` is a local of the size passed.
        let rc = unsafe {
            (self.v.efadv_query_ah)(ah, &mut q, core::mem::size_of::<EfadvAhAttr>() as u32)
        };
        let ahn = if rc == 0 {
            q.ahn
        } else {
            EFA_AHN_UNKNOWN as u16
        };
        a.by_gid.insert(
            gid,
            AhEntry {
                ah: H(ah),
                ahn,
                refs: 1,
            },
        );
        if rc == 0 {
            a.gid_of.insert(ahn, gid);
        }
        Some((ah, ahn))
    }

    /// Drops one reference to `gid`'s address handle; the last destroys it.
    fn ah_put(&self, gid: [u8; 16]) {
        let mut a = self.ahs();
        let Some(e) = a.by_gid.get_mut(&gid) else {
            return;
        };
        e.refs -= 1;
        if e.refs == 0 {
            let e = a.by_gid.remove(&gid).expect("present");
            a.gid_of.remove(&e.ahn);
            // SAFETY: no endpoint holds the handle any more.
            unsafe { (self.v.destroy_ah)(e.ah.0) };
        }
    }

    fn gid_of_ahn(&self, ahn: u16) -> Option<[u8; 16]> {
        self.ahs().gid_of.get(&ahn).copied()
    }
}

impl Drop for HwContext {
    fn drop(&mut self) {
        let ahs = core::mem::take(&mut *self.ahs());
        for (_, e) in ahs.by_gid {
            // SAFETY: endpoints are gone (they hold the Arc); nothing uses the handle.
            unsafe { (self.v.destroy_ah)(e.ah.0) };
        }
        // SAFETY: every QP, CQ and MR of this PD went with its endpoint.
        unsafe {
            (self.v.dealloc_pd)(self.pd.0);
            (self.v.close_device)(self.ctx.0);
        }
    }
}

/// A registered pool of equal slots, and what each slot holds while the device has it.
struct Pool {
    /// The registered memory (huge pages where `FI_EFA_USE_HUGE_PAGE` allows and the system
    /// has them), reached only through `base`: the device writes into it behind Rust's back,
    /// so no reference to the whole is made.
    mem: Pages,
    base: *mut u8,
    mr: H<Mr>,
    lkey: u32,
    slot: usize,
    free: Vec<u32>,
    held: Vec<Option<(u64, Vec<u8>)>>,
}

impl Pool {
    fn new(hw: &HwContext, slots: usize, slot: usize, huge: bool) -> crate::core::Result<Pool> {
        let len = slots.checked_mul(slot).ok_or(Errno::NOMEM)?;
        let mem = Pages::map(len, huge)?;
        let base = mem.as_ptr();
        // SAFETY: the PD is live; `mem` (at least `len` bytes) is never unmapped before the
        // MR is deregistered (Pool::release, then the Pool drops), so the registration stays
        // valid.
        let mr = unsafe { (hw.v.reg_mr)(hw.pd.0, base.cast(), len, IBV_ACCESS_LOCAL_WRITE) };
        if mr.is_null() {
            return Err(Errno::NOMEM);
        }
        // SAFETY: the MR just registered.
        let (lkey, _) = unsafe { (hw.v.mr_keys)(mr) };
        Ok(Pool {
            mem,
            base,
            mr: H(mr),
            lkey,
            slot,
            free: (0..slots as u32).rev().collect(),
            held: (0..slots).map(|_| None).collect(),
        })
    }

    fn sge(&self, i: u32, len: usize) -> IbvSge {
        IbvSge {
            addr: self.base.wrapping_add(i as usize * self.slot) as u64,
            length: len.min(self.slot) as u32,
            lkey: self.lkey,
        }
    }

    /// Slot `i`, which the caller owns (free, or its completion just came): the device does
    /// not touch it meanwhile.
    fn bytes(&mut self, i: u32) -> &mut [u8] {
        assert!((i as usize) < self.held.len());
        // SAFETY: slot `i` lies inside the pool's memory (checked above), which lives as long
        // as `self`; the device has no work request on it (caller's contract), and `&mut self`
        // keeps the slice the only reference.
        unsafe { core::slice::from_raw_parts_mut(self.base.add(i as usize * self.slot), self.slot) }
    }

    fn release(&mut self, v: &Verbs) {
        // SAFETY: the QP using the pool is destroyed first (VerbsDevice::drop).
        unsafe { (v.dereg_mr)(self.mr.0) };
    }
}

/// A staging buffer registered with the device (`Device::staging`): the registration goes
/// before the memory (fields drop in order).
struct HwStaging {
    mr: HwMr,
    iov: IoVec,
    _mem: Vec<u8>,
}

impl Staging for HwStaging {
    fn mem(&self) -> IoVec {
        self.iov
    }
    fn lkey(&self) -> u32 {
        self.mr.lkey
    }
}

/// Send work requests carry their slot with this bit set, receives their bare slot: a failed
/// completion (whose opcode verbs leaves undefined) still says which pool it belongs to.
const TX_TAG: u64 = 1 << 63;
/// RDMA work requests carry their slot with this bit set (and `TX_TAG`).
const RDMA_TAG: u64 = 1 << 62;

/// Most sends and receives one endpoint keeps on the device (bounded by the device's queues).
const SEND_SLOTS: usize = 512;
const RECV_SLOTS: usize = 1024;
/// Most RDMA work requests one endpoint keeps on the device (they share the send queue).
const RDMA_SLOTS: usize = 128;

/// One endpoint's SRD queue pair on an EFA device.
pub struct VerbsDevice {
    hw: Arc<HwContext>,
    v: &'static Verbs,
    cq: H<Cq>,
    qp: H<Qp>,
    addr: EfaAddr,
    mtu: usize,
    rts: bool,
    rnr_retry: u32,
    tx: Pool,
    rx: Pool,
    /// The caller's `wr_id` of each RDMA work request on the device, by slot.
    rdma: Vec<Option<u64>>,
    rdma_free: Vec<u32>,
    /// Address handles this endpoint holds a reference to, by peer GID.
    ahs: FastMap<[u8; 16], *mut Ah>,
    /// The QKEY last sent to at each (GID, QPN): what receive completions report.
    qkeys: FastMap<([u8; 16], u16), u32>,
    stats: srd::Stats,
}

// SAFETY: the raw handles in `ahs` are rdma-core objects (thread-safe) owned through `hw`;
// the pools' base pointers point into memory the device owns (its mappings), moved with it.
unsafe impl Send for VerbsDevice {}

impl VerbsDevice {
    /// Whether the registered send and receive pools are huge pages (`FI_EFA_USE_HUGE_PAGE`
    /// allowed them and the system had them), each.
    pub fn huge_pages(&self) -> (bool, bool) {
        (self.tx.mem.is_huge(), self.rx.mem.is_huge())
    }

    /// Opens an SRD QP with a fresh QKEY on `hw`.
    pub fn open(hw: &Arc<HwContext>, rnr_retry: u32) -> crate::core::Result<VerbsDevice> {
        let v = hw.v;
        let info = &hw.info;
        let huge = crate::prov::efa::use_huge_page();
        // The send queue holds datagrams and, where the device does RDMA, up to a quarter of
        // it RDMA work requests.
        let sq = (SEND_SLOTS + RDMA_SLOTS).min(info.max_sq_wr.max(1));
        let rdmas = if info.caps.rdma_read || info.caps.rdma_write {
            RDMA_SLOTS.min(sq / 4)
        } else {
            0
        };
        let sends = sq - rdmas;
        let recvs = RECV_SLOTS.min(info.max_rq_wr.max(1));
        let mut cq_attr = IbvCqInitAttrEx {
            cqe: (sq + recvs) as u32,
            cq_context: core::ptr::null_mut(),
            channel: core::ptr::null_mut(),
            comp_vector: 0,
            wc_flags: IBV_WC_EX_WITH_BYTE_LEN
                | IBV_WC_EX_WITH_IMM
                | IBV_WC_EX_WITH_SRC_QP
                | IBV_WC_EX_WITH_SLID,
            comp_mask: 0,
            flags: 0,
            parent_domain: core::ptr::null_mut(),
        };
        let mut efa_cq = EfadvCqInitAttr {
            comp_mask: 0,
            wc_flags: EFADV_WC_EX_WITH_SGID,
        };
        // SAFETY: the context is open; the attributes are locals of the size passed.
        let cq = unsafe {
            (v.efadv_create_cq)(
                hw.ctx.0,
                &mut cq_attr,
                &mut efa_cq,
                core::mem::size_of::<EfadvCqInitAttr>() as u32,
            )
        };
        if cq.is_null() {
            return Err(Errno::NOMEM);
        }
        let mut qp_attr = IbvQpInitAttrEx {
            send_cq: cq,
            recv_cq: cq,
            cap: IbvQpCap {
                max_send_wr: sq as u32,
                max_recv_wr: recvs as u32,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_DRIVER,
            comp_mask: IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            pd: hw.pd.0,
            // RDMA builders only where the device has them (a QP asking for more fails).
            send_ops_flags: IBV_QP_EX_WITH_SEND
                | IBV_QP_EX_WITH_SEND_WITH_IMM
                | if info.caps.rdma_read {
                    IBV_QP_EX_WITH_RDMA_READ
                } else {
                    0
                }
                | if info.caps.rdma_write {
                    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
                } else {
                    0
                },
            ..IbvQpInitAttrEx::default()
        };
        let mut efa_qp = EfadvQpInitAttr {
            driver_qp_type: EFADV_QP_DRIVER_TYPE_SRD,
            ..EfadvQpInitAttr::default()
        };
        // SAFETY: as above.
        let qp = unsafe {
            (v.efadv_create_qp_ex)(
                hw.ctx.0,
                &mut qp_attr,
                &mut efa_qp,
                core::mem::size_of::<EfadvQpInitAttr>() as u32,
            )
        };
        let destroy_cq = || {
            // SAFETY: the CQ just created, used by no QP.
            unsafe { (v.destroy_cq)(cq) };
        };
        if qp.is_null() {
            destroy_cq();
            return Err(Errno::NOMEM);
        }
        // 31 random bits, never 0 (efa-reference §1: the connid).
        let qkey = (crate::sys::random::u32() & 0x7fff_ffff).max(1);
        let mut a = IbvQpAttr {
            qp_state: IBV_QPS_INIT,
            pkey_index: 0,
            port_num: 1,
            qkey,
            ..IbvQpAttr::default()
        };
        let mut ok = {
            // SAFETY: the QP just created; `a` a local.
            let rc = unsafe {
                (v.modify_qp)(
                    qp,
                    &mut a,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
                )
            };
            rc == 0
        };
        if ok {
            a.qp_state = IBV_QPS_RTR;
            // SAFETY: as above.
            ok = unsafe { (v.modify_qp)(qp, &mut a, IBV_QP_STATE) } == 0;
        }
        // SAFETY: the live QP.
        let qpn = unsafe { (v.qp_num)(qp) };
        let pools = if ok {
            Pool::new(hw, sends, info.mtu, huge).and_then(|tx| {
                match Pool::new(hw, recvs, info.mtu, huge) {
                    Ok(rx) => Ok((tx, rx)),
                    Err(e) => {
                        let mut tx = tx;
                        tx.release(v);
                        Err(e)
                    }
                }
            })
        } else {
            Err(Errno::INVAL)
        };
        let (tx, rx) = match pools {
            Ok(p) if qpn <= u32::from(u16::MAX) => p,
            other => {
                if let Ok((mut tx, mut rx)) = other {
                    tx.release(v);
                    rx.release(v);
                }
                // SAFETY: the QP and CQ just created, used by nothing else.
                unsafe { (v.destroy_qp)(qp) };
                destroy_cq();
                return Err(Errno::INVAL);
            }
        };
        if huge && !(tx.mem.is_huge() && rx.mem.is_huge()) {
            crate::fi_info!(
                "efa",
                crate::core::log::Subsys::Core,
                "{}: no huge pages for the packet pools (none reserved?): normal pages",
                info.name
            );
        }
        Ok(VerbsDevice {
            hw: hw.clone(),
            v,
            cq: H(cq),
            qp: H(qp),
            addr: EfaAddr {
                gid: info.gid,
                qpn: qpn as u16,
                qkey,
            },
            mtu: info.mtu,
            rts: false,
            rnr_retry: rnr_retry.min(7),
            tx,
            rx,
            rdma: vec![None; rdmas],
            rdma_free: (0..rdmas as u32).rev().collect(),
            ahs: FastMap::default(),
            qkeys: FastMap::default(),
            stats: srd::Stats::default(),
        })
    }

    /// RTR → RTS with the RNR retry count now settled (`FI_OPT_EFA_RNR_RETRY` comes after the
    /// QP exists, before the first send).
    fn ready(&mut self) -> bool {
        if self.rts {
            return true;
        }
        let mut a = IbvQpAttr {
            qp_state: IBV_QPS_RTS,
            sq_psn: 0,
            rnr_retry: self.rnr_retry as u8,
            ..IbvQpAttr::default()
        };
        // A device without the RNR-retry capability keeps its own count (as upstream, the
        // attribute is passed only where it is offered).
        let mask = if self.hw.info.rnr_retry_cap {
            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY
        } else {
            IBV_QP_STATE | IBV_QP_SQ_PSN
        };
        // SAFETY: the live QP; `a` a local.
        let rc = unsafe { (self.v.modify_qp)(self.qp.0, &mut a, mask) };
        self.rts = rc == 0;
        self.rts
    }

    fn ah(&mut self, gid: [u8; 16]) -> Option<*mut Ah> {
        if let Some(&ah) = self.ahs.get(&gid) {
            return Some(ah);
        }
        let (ah, _) = self.hw.ah_get(gid)?;
        self.ahs.insert(gid, ah);
        Some(ah)
    }

    fn send(
        &mut self,
        dest: EfaAddr,
        buf: Vec<u8>,
        len: usize,
        tail: IoVec,
        wr_id: u64,
    ) -> Result<(), (Errno, Vec<u8>)> {
        let total = len + tail.len();
        if total > self.mtu || buf.len() < HEADROOM + len {
            return Err((Errno::MSGSIZE, buf));
        }
        if !self.ready() {
            return Err((Errno::OPBADSTATE, buf));
        }
        let Some(ah) = self.ah(dest.gid) else {
            return Err((Errno::AGAIN, buf));
        };
        let Some(slot) = self.tx.free.pop() else {
            return Err((Errno::AGAIN, buf));
        };
        let b = self.tx.bytes(slot);
        b[..len].copy_from_slice(&buf[HEADROOM..HEADROOM + len]);
        tail.read_at(0, &mut b[len..total]);
        let sge = self.tx.sge(slot, total);
        // SAFETY: the QP is in RTS; `ah` is held by this endpoint; the SGE lies in the
        // registered send pool, whose slot stays ours until the completion.
        let rc = unsafe {
            (self.v.wr_start)(self.qp.0);
            (self.v.wr_send)(self.qp.0, TX_TAG | u64::from(slot), IBV_SEND_SIGNALED, None);
            (self.v.wr_set_ud_addr)(self.qp.0, ah, u32::from(dest.qpn), dest.qkey);
            (self.v.wr_set_sge_list)(self.qp.0, 1, &sge);
            (self.v.wr_complete)(self.qp.0)
        };
        if rc != 0 {
            self.tx.free.push(slot);
            return Err((Errno::AGAIN, buf));
        }
        self.tx.held[slot as usize] = Some((wr_id, buf));
        if self.qkeys.get(&(dest.gid, dest.qpn)) != Some(&dest.qkey) {
            self.qkeys.insert((dest.gid, dest.qpn), dest.qkey);
        }
        self.stats.data_sent += 1;
        Ok(())
    }

    fn post_slot(&mut self, slot: u32) -> bool {
        let mut sge = self.rx.sge(slot, self.mtu);
        let mut wr = IbvRecvWr {
            wr_id: u64::from(slot),
            next: core::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad = core::ptr::null_mut();
        // SAFETY: the live QP; the SGE lies in the registered receive pool, whose slot
        // stays the device's until its completion.
        unsafe { (self.v.post_recv)(self.qp.0, &mut wr, &mut bad) == 0 }
    }

    fn source(&mut self, wc: &Wc) -> EfaAddr {
        let ahn = wc.slid as u16;
        let gid = if wc.slid == EFA_AHN_UNKNOWN {
            None
        } else {
            self.hw.gid_of_ahn(ahn)
        };
        let gid = gid.or_else(|| {
            let mut g = IbvGid::default();
            // SAFETY: inside a poll, on the current completion.
            (unsafe { (self.v.wc_read_sgid)(self.cq.0, &mut g) } == 0).then_some(g.raw)
        });
        let gid = gid.unwrap_or_default();
        let qpn = wc.src_qp as u16;
        EfaAddr {
            gid,
            qpn,
            qkey: self.qkeys.get(&(gid, qpn)).copied().unwrap_or(0),
        }
    }

    /// What a failed send or RDMA completion means (efa-reference §6).
    fn status(&mut self, wc: &Wc) -> Result<(), DevError> {
        match (wc.status, wc.vendor_err) {
            (IBV_WC_SUCCESS, _) => Ok(()),
            (_, efa_status::REMOTE_ERROR_RNR) | (IBV_WC_RNR_RETRY_EXC_ERR, _) => {
                self.stats.rnr_received += 1;
                Err(DevError::Rnr)
            }
            (_, efa_status::LOCAL_ERROR_BAD_LENGTH | efa_status::REMOTE_ERROR_BAD_LENGTH) => {
                Err(DevError::TooBig)
            }
            (_, efa_status::REMOTE_ERROR_BAD_ADDRESS) => Err(DevError::RemoteAccess),
            (_, efa_status::LOCAL_ERROR_INVALID_LKEY) => Err(DevError::LocalKey),
            _ => Err(DevError::Unreachable),
        }
    }

    fn completion(&mut self, wc: Wc, out: &mut Vec<Completion>) {
        let slot = wc.wr_id as u32;
        if wc.wr_id & (TX_TAG | RDMA_TAG) == TX_TAG | RDMA_TAG {
            let Some(wr_id) = self.rdma.get_mut(slot as usize).and_then(Option::take) else {
                return;
            };
            self.rdma_free.push(slot);
            let status = self.status(&wc);
            if status.is_ok() {
                match wc.opcode {
                    IBV_WC_RDMA_READ => self.stats.rdma_reads += 1,
                    _ => self.stats.rdma_writes += 1,
                }
            }
            out.push(Completion::Rdma { wr_id, status });
            return;
        }
        if wc.wr_id & TX_TAG == 0 {
            let Some((wr_id, mut buf)) = self.rx.held.get_mut(slot as usize).and_then(Option::take)
            else {
                return;
            };
            if wc.status != IBV_WC_SUCCESS {
                // A receive that failed (flushed): the buffer goes back on the device.
                self.rx.held[slot as usize] = Some((wr_id, buf));
                self.post_slot(slot);
                return;
            }
            let src = self.source(&wc);
            if wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM {
                // A peer's RDMA write with data: the bytes went to our registered memory,
                // the receive only carries the notice.
                self.rx.free.push(slot);
                self.stats.rdma_writes_received += 1;
                out.push(Completion::WriteData {
                    wr_id,
                    buf,
                    len: wc.byte_len as usize,
                    data: wc.imm,
                    src,
                });
                return;
            }
            let len = (wc.byte_len as usize).min(self.mtu);
            if buf.len() < recv_buf_len(self.mtu) {
                buf.resize(recv_buf_len(self.mtu), 0);
            }
            buf[HEADROOM..HEADROOM + len].copy_from_slice(&self.rx.bytes(slot)[..len]);
            self.rx.free.push(slot);
            self.stats.delivered += 1;
            out.push(Completion::Recv {
                wr_id,
                buf,
                off: HEADROOM,
                len,
                src,
            });
            return;
        }
        let Some((wr_id, buf)) = self.tx.held.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        self.tx.free.push(slot);
        let status = self.status(&wc);
        out.push(Completion::Send { wr_id, status, buf });
    }
}

impl Drop for VerbsDevice {
    fn drop(&mut self) {
        // SAFETY: the QP and CQ are ours; the QP goes first (it uses the CQ and the pools).
        unsafe {
            (self.v.destroy_qp)(self.qp.0);
            (self.v.destroy_cq)(self.cq.0);
        }
        self.tx.release(self.v);
        self.rx.release(self.v);
        for gid in self.ahs.keys() {
            self.hw.ah_put(*gid);
        }
    }
}

impl Device for VerbsDevice {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn addr(&self) -> EfaAddr {
        self.addr
    }

    fn caps(&self) -> DeviceCaps {
        self.hw.info.caps
    }

    fn max_send(&self) -> usize {
        self.tx.held.len()
    }

    fn max_recv(&self) -> usize {
        self.rx.held.len()
    }

    fn post_send(
        &mut self,
        dest: EfaAddr,
        buf: Vec<u8>,
        len: usize,
        tail: IoVec,
        wr_id: u64,
    ) -> Result<(), (Errno, Vec<u8>)> {
        self.send(dest, buf, len, tail, wr_id)
    }

    /// SRD is reliable anyway: DGRAM endpoints on the device use the same QP.
    fn post_send_unreliable(
        &mut self,
        dest: EfaAddr,
        buf: Vec<u8>,
        len: usize,
        wr_id: u64,
    ) -> Result<(), (Errno, Vec<u8>)> {
        self.send(dest, buf, len, IoVec::EMPTY, wr_id)
    }

    fn post_recv(&mut self, buf: Vec<u8>, wr_id: u64) -> Result<(), (Errno, Vec<u8>)> {
        let Some(slot) = self.rx.free.pop() else {
            return Err((Errno::AGAIN, buf));
        };
        if !self.post_slot(slot) {
            self.rx.free.push(slot);
            return Err((Errno::AGAIN, buf));
        }
        self.rx.held[slot as usize] = Some((wr_id, buf));
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) {
        let cq = self.cq.0;
        // SAFETY: the live CQ; every completion is read between start and end of the poll.
        if unsafe { (self.v.start_poll)(cq) } != 0 {
            return;
        }
        loop {
            // SAFETY: as above.
            let wc = unsafe { (self.v.wc)(cq) };
            self.completion(wc, out);
            // SAFETY: as above.
            if out.len() >= max || unsafe { (self.v.next_poll)(cq) } != 0 {
                break;
            }
        }
        // SAFETY: closes the poll started above.
        unsafe { (self.v.end_poll)(cq) };
    }

    fn set_rnr_retry(&mut self, n: u32) {
        self.rnr_retry = n.min(7);
    }

    fn max_rdma_size(&self) -> usize {
        let c = self.hw.info.caps;
        if c.rdma_read || c.rdma_write {
            self.hw.info.max_rdma_size.min(u32::MAX as usize)
        } else {
            0
        }
    }

    fn local_key(&self, mem: IoVec) -> Option<u32> {
        self.hw.lkey_for(mem.addr(), mem.len())
    }

    fn remote_key(&self, mem: IoVec) -> Option<u32> {
        self.hw.rkey_for(mem.addr(), mem.len())
    }

    fn staging(&mut self, len: usize) -> Option<Box<dyn Staging>> {
        let mut mem = vec![0u8; len];
        // SAFETY: `mem` is owned by the staging buffer with its registration, never resized,
        // and freed only after the registration (field order of HwStaging); the IoVec is
        // used only while the buffer lives (Staging's contract).
        let iov = unsafe { IoVec::new(mem.as_mut_ptr(), len) };
        let mr = self.hw.reg_mr(iov, 0).ok()?;
        Some(Box::new(HwStaging { mr, iov, _mem: mem }))
    }

    fn post_rdma(&mut self, r: RdmaReq) -> Result<(), Errno> {
        let caps = self.hw.info.caps;
        let (kind, offered) = match r.op {
            RdmaOp::Read => (RdmaKind::Read, caps.rdma_read),
            RdmaOp::Write => (RdmaKind::Write, caps.rdma_write),
            RdmaOp::WriteData(d) => (RdmaKind::WriteImm(d), caps.rdma_write),
        };
        if !offered {
            return Err(Errno::NOSYS);
        }
        if r.local.len() > self.max_rdma_size() {
            return Err(Errno::MSGSIZE);
        }
        if !self.ready() {
            return Err(Errno::OPBADSTATE);
        }
        let Some(ah) = self.ah(r.dest.gid) else {
            return Err(Errno::AGAIN);
        };
        let Some(slot) = self.rdma_free.pop() else {
            return Err(Errno::AGAIN);
        };
        let sge = IbvSge {
            addr: r.local.addr() as u64,
            length: r.local.len() as u32,
            lkey: r.lkey,
        };
        // SAFETY: the QP is in RTS, created with the builders of the device's RDMA caps
        // (checked above); `ah` is held by this endpoint; the SGE names application memory
        // the caller keeps valid (and registered under `lkey`) until the completion.
        let rc = unsafe {
            (self.v.wr_start)(self.qp.0);
            (self.v.wr_rdma)(
                self.qp.0,
                TX_TAG | RDMA_TAG | u64::from(slot),
                IBV_SEND_SIGNALED,
                kind,
                r.rkey,
                r.raddr,
            );
            (self.v.wr_set_ud_addr)(self.qp.0, ah, u32::from(r.dest.qpn), r.dest.qkey);
            (self.v.wr_set_sge_list)(self.qp.0, 1, &sge);
            (self.v.wr_complete)(self.qp.0)
        };
        if rc != 0 {
            self.rdma_free.push(slot);
            return Err(Errno::AGAIN);
        }
        self.rdma[slot as usize] = Some(r.wr_id);
        Ok(())
    }

    fn stats(&self) -> srd::Stats {
        self.stats
    }

    /// The NIC keeps retrying by itself and reports what it gives up on: nothing to cancel.
    fn abandon(&mut self, _dest: EfaAddr) {}
}

#[cfg(test)]
mod tests;
