//! An emulated EFA NIC: a TEST DOUBLE for the hardware device, not a transport. It fills the
//! verbs table ([`super::ffi::Verbs`]) with in-process functions, so the hardware device and
//! the RDM protocol above it run their real code paths (discovery, PD, registered pools,
//! SRD QP with its state changes, address handles, extended CQ with source GID, completion
//! errors) in `cargo test`, on hosts without EFA.
//!
//! What it models, from efa-reference §6, §10 and the verbs man pages:
//! - one device, `efa0`, one port (active, 8 KiB messages, 100 Gb/s), a GID, efadv caps
//!   (RDMA read and write, RNR retry, CQ with SGID, unsolicited write receive — reported
//!   only: QPs are created without its flag, and then a write with immediate takes a posted
//!   receive, as modelled);
//! - PDs; MRs with lkey/rkey and access flags, checked (key, PD, bounds) on every gather and
//!   scatter, as the NIC's DMA would; `efadv_query_mr` answers one interconnect; a thread
//!   may have registrations refused ([`refuse_registrations`]), as at a NIC's limit;
//! - RDMA read, write and write with immediate between QPs of this process, against
//!   registered memory only: the target range must lie inside a registration of the target
//!   QP's PD with that rkey and remote read (or write) access, else the initiator's
//!   completion fails with "remote bad address" (EFA status 7); a local buffer outside a
//!   registration with that lkey fails with "invalid lkey" (5); a write with immediate takes
//!   a posted receive at the target (RNR as a send when none is) and completes there with
//!   its immediate data. Every successful RDMA work request is counted ([`rdma_ops`]);
//! - SRD QPs between QPs of this process: reliable, unordered (a send waiting for a
//!   receive buffer is overtaken by later ones), the receiver's QKEY checked, a send to a QP
//!   with no receive posted retried and failed with RNR (EFA status 10) once `rnr_retry`
//!   retries are spent (7: forever), a send to a QP that is gone (destroyed) failed with
//!   "unresponsive remote" (13), a datagram larger than the receive buffer with "remote bad
//!   length" (11);
//! - CQs with `wr_id`, status, vendor error, opcode, byte length, source QPN, and the
//!   sender's AH number when the receiving PD has an AH for its GID (else 0xffff, and
//!   `efadv_wc_read_sgid` gives the GID), as EFA reports them. The sender's QKEY is not
//!   reported: hardware does not either.
//!
//! Work happens when the program calls in (posting, polling): there is no thread. Handles
//! are numbers, never dereferenced.

#![allow(unsafe_code)]

use core::ffi::{c_char, c_int, c_void};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::ffi::*;

/// The emulated device's GID (a link-local address, as EFA's are).
pub const GID: [u8; 16] = [
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0e, 0xfa, 0, 0xff, 0xfe, 0, 0, 0x01,
];
pub const NAME: &str = "efa0";
const NAME_C: &core::ffi::CStr = c"efa0";
/// The port's largest message (EFA's is 8 KiB and a bit).
pub const MAX_MSG: u32 = 8928;
const MAX_SQ_WR: u32 = 1024;
const MAX_RQ_WR: u32 = 4096;
const INLINE: u16 = 32;
/// Time between RNR retries of one send.
const RNR_INTERVAL: Duration = Duration::from_micros(500);
/// Largest RDMA transfer (efadv `max_rdma_size`).
pub const MAX_RDMA: u32 = 1 << 30;

static RDMA_READS: AtomicU64 = AtomicU64::new(0);
static RDMA_WRITES: AtomicU64 = AtomicU64::new(0);

/// RDMA reads and writes (with or without immediate) the emulated NIC performed, since the
/// process started, all QPs together.
pub fn rdma_ops() -> (u64, u64) {
    (
        RDMA_READS.load(Ordering::Relaxed),
        RDMA_WRITES.load(Ordering::Relaxed),
    )
}

/// The access flags an MR of the emulated NIC was registered with (0 for no such MR).
pub fn access_of(m: *mut Mr) -> c_int {
    with(|n| n.mrs.get(&id(m)).map_or(0, |m| m.access))
}

thread_local! {
    static REFUSE_REG: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Makes the emulated NIC refuse (`on`) or accept again the memory registrations the calling
/// thread asks for: `ibv_reg_mr` returns NULL, as a NIC whose registration limit is reached
/// does. Per thread, so that tests running in parallel do not see each other's refusals.
pub fn refuse_registrations(on: bool) {
    REFUSE_REG.with(|r| r.set(on));
}

/// The verbs table over the emulated NIC.
pub fn verbs() -> &'static Verbs {
    &EMUL
}

/// Makes discovery use the emulated NIC instead of rdma-core, for the rest of the process
/// (call before the first `fi_getinfo`).
pub fn install() {
    super::install(verbs());
}

#[derive(Default)]
struct Nic {
    next: usize,
    next_qpn: u32,
    next_key: u32,
    ctxs: HashMap<usize, ()>,
    pds: HashMap<usize, usize>,
    mrs: HashMap<usize, MrS>,
    cqs: HashMap<usize, CqS>,
    qps: HashMap<usize, QpS>,
    by_qpn: HashMap<u32, usize>,
    ahs: HashMap<usize, AhS>,
    next_ahn: u16,
    /// Sends waiting for a receive buffer at their destination.
    rnr: VecDeque<Pending>,
}

struct MrS {
    pd: usize,
    addr: usize,
    len: usize,
    lkey: u32,
    rkey: u32,
    access: c_int,
}

#[derive(Default)]
struct CqS {
    entries: VecDeque<Entry>,
    current: Option<Entry>,
}

#[derive(Clone, Copy, Default)]
struct Entry {
    wc: Wc,
    sgid: Option<[u8; 16]>,
}

struct QpS {
    pd: usize,
    send_cq: usize,
    recv_cq: usize,
    qpn: u32,
    qkey: u32,
    state: u32,
    rnr_retry: u8,
    max_send: usize,
    max_recv: usize,
    outstanding: usize,
    recvs: VecDeque<(u64, Vec<IbvSge>)>,
    /// The work request being built between wr_start and wr_complete.
    building: Vec<Wr>,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum WrKind {
    #[default]
    Send,
    Read {
        rkey: u32,
        raddr: u64,
    },
    Write {
        rkey: u32,
        raddr: u64,
        imm: Option<u32>,
    },
}

#[derive(Clone, Default)]
struct Wr {
    wr_id: u64,
    kind: WrKind,
    ah: usize,
    qpn: u32,
    qkey: u32,
    sges: Vec<IbvSge>,
}

struct AhS {
    pd: usize,
    gid: [u8; 16],
    ahn: u16,
}

struct Pending {
    from: usize,
    wr_id: u64,
    /// An RDMA write with immediate (rkey, remote address, data), else a send.
    write: Option<(u32, u64, u32)>,
    to_qpn: u32,
    qkey: u32,
    data: Vec<u8>,
    retries_left: Option<u8>,
    next_try: Instant,
}

static NIC: Mutex<Option<Nic>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Nic) -> R) -> R {
    let mut g = NIC.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(|| Nic {
        next: 1,
        next_qpn: 1,
        next_key: 0x100,
        next_ahn: 1,
        ..Nic::default()
    }))
}

fn handle<T>(id: usize) -> *mut T {
    core::ptr::without_provenance_mut(id << 4)
}

fn id<T>(p: *mut T) -> usize {
    p.addr() >> 4
}

impl Nic {
    fn new_id(&mut self) -> usize {
        self.next += 1;
        self.next
    }

    /// The bytes `sges` describe, gathered through the MRs of `pd` (None: a key, PD or bound
    /// does not check out).
    fn gather(&self, pd: usize, sges: &[IbvSge]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for s in sges {
            self.mr_for(pd, s)?;
            // SAFETY: the range lies inside a live registration of this PD (mr_for checked
            // key and bounds); whoever registered it keeps the memory valid until
            // ibv_dereg_mr, the contract of ibv_reg_mr(3) the hardware relies on too.
            let bytes = unsafe {
                core::slice::from_raw_parts(s.addr as usize as *const u8, s.length as usize)
            };
            out.extend_from_slice(bytes);
        }
        Some(out)
    }

    fn mr_for(&self, pd: usize, s: &IbvSge) -> Option<&MrS> {
        let (a, l) = (s.addr as usize, s.length as usize);
        self.mrs
            .values()
            .find(|m| m.lkey == s.lkey && m.pd == pd)
            .filter(|m| a >= m.addr && a.checked_add(l).is_some_and(|e| e <= m.addr + m.len))
    }

    /// The target QP `to_qpn` if it exists, takes `qkey` and is ready to receive.
    fn target(&self, to_qpn: u32, qkey: u32) -> Option<usize> {
        let t = self.by_qpn.get(&to_qpn).copied()?;
        self.qps
            .get(&t)
            .is_some_and(|q| q.qkey == qkey && q.state >= IBV_QPS_RTR && q.state <= IBV_QPS_RTS)
            .then_some(t)
    }

    /// The start of `[raddr, raddr + len)` if a registration of `pd` with `rkey` covers it and
    /// allows `need` (remote read or write), as the target NIC checks an RDMA request.
    fn remote(&self, pd: usize, rkey: u32, raddr: u64, len: usize, need: c_int) -> Option<usize> {
        let a = usize::try_from(raddr).ok()?;
        self.mrs
            .values()
            .find(|m| m.rkey == rkey && m.pd == pd && m.access & need == need)
            .filter(|m| a >= m.addr && a.checked_add(len).is_some_and(|e| e <= m.addr + m.len))
            .map(|_| a)
    }

    /// Checks the local SGEs of an RDMA work request (registered in `pd` under their lkeys,
    /// with local write when the device writes into them).
    fn local_ok(&self, pd: usize, sges: &[IbvSge], write: bool) -> bool {
        sges.iter().all(|s| {
            self.mr_for(pd, s)
                .is_some_and(|m| !write || m.access & IBV_ACCESS_LOCAL_WRITE != 0)
        })
    }

    /// Performs an RDMA read or write (without immediate) of QP `qi` at once.
    fn rdma(&mut self, qi: usize, pd: usize, w: &Wr) {
        let len: usize = w.sges.iter().map(|s| s.length as usize).sum();
        let (read, rkey, raddr) = match w.kind {
            WrKind::Read { rkey, raddr } => (true, rkey, raddr),
            WrKind::Write { rkey, raddr, .. } => (false, rkey, raddr),
            WrKind::Send => return,
        };
        let opcode = if read {
            IBV_WC_RDMA_READ
        } else {
            IBV_WC_RDMA_WRITE
        };
        if len > MAX_RDMA as usize {
            return self.send_done_op(qi, w.wr_id, efa_status::LOCAL_ERROR_BAD_LENGTH, opcode);
        }
        if !self.local_ok(pd, &w.sges, read) {
            return self.send_done_op(qi, w.wr_id, efa_status::LOCAL_ERROR_INVALID_LKEY, opcode);
        }
        let Some(tq) = self.target(w.qpn, w.qkey) else {
            return self.send_done_op(qi, w.wr_id, efa_status::LOCAL_ERROR_UNRESP_REMOTE, opcode);
        };
        let tpd = self.qps[&tq].pd;
        let need = if read {
            IBV_ACCESS_REMOTE_READ
        } else {
            IBV_ACCESS_REMOTE_WRITE
        };
        let Some(remote) = self.remote(tpd, rkey, raddr, len, need) else {
            return self.send_done_op(qi, w.wr_id, efa_status::REMOTE_ERROR_BAD_ADDRESS, opcode);
        };
        let mut off = 0;
        for s in &w.sges {
            let (l, r) = (s.addr as usize, remote + off);
            // SAFETY: both ranges lie inside live registrations (checked just above: the local
            // SGE under its lkey in our PD, the remote range under the rkey in the target's
            // PD, with the access the direction needs); ibv_reg_mr(3)'s contract keeps them
            // valid until deregistered. They may overlap (one buffer read into itself):
            // `copy` is a memmove.
            unsafe {
                if read {
                    core::ptr::copy(r as *const u8, l as *mut u8, s.length as usize);
                } else {
                    core::ptr::copy(l as *const u8, r as *mut u8, s.length as usize);
                }
            }
            off += s.length as usize;
        }
        if read {
            RDMA_READS.fetch_add(1, Ordering::Relaxed);
        } else {
            RDMA_WRITES.fetch_add(1, Ordering::Relaxed);
        }
        self.send_done_op(qi, w.wr_id, 0, opcode);
    }

    fn complete(&mut self, cq: usize, e: Entry) {
        if let Some(c) = self.cqs.get_mut(&cq) {
            c.entries.push_back(e);
        }
    }

    fn send_done(&mut self, qp: usize, wr_id: u64, vendor_err: u32) {
        self.send_done_op(qp, wr_id, vendor_err, IBV_WC_SEND);
    }

    fn send_done_op(&mut self, qp: usize, wr_id: u64, vendor_err: u32, opcode: u32) {
        let Some(q) = self.qps.get_mut(&qp) else {
            return;
        };
        q.outstanding = q.outstanding.saturating_sub(1);
        // The verbs status rdma-core gives each EFA status.
        let status = match vendor_err {
            0 => IBV_WC_SUCCESS,
            efa_status::REMOTE_ERROR_RNR => IBV_WC_RNR_RETRY_EXC_ERR,
            efa_status::REMOTE_ERROR_BAD_ADDRESS => IBV_WC_REM_ACCESS_ERR,
            efa_status::LOCAL_ERROR_INVALID_LKEY => IBV_WC_LOC_PROT_ERR,
            _ => IBV_WC_GENERAL_ERR,
        };
        let cq = q.send_cq;
        self.complete(
            cq,
            Entry {
                wc: Wc {
                    wr_id,
                    status,
                    vendor_err,
                    opcode,
                    ..Wc::default()
                },
                sgid: None,
            },
        );
    }

    /// One attempt to deliver `p`: Ok(()) when done (delivered or failed), Err(p) when the
    /// receiver has no buffer posted.
    fn deliver(&mut self, p: Pending) -> Result<(), Pending> {
        let Some(tq) = self.target(p.to_qpn, p.qkey) else {
            // Gone, never there, or the wrong QKEY (the receiver drops it): the sender's NIC
            // hears nothing back.
            self.send_done(p.from, p.wr_id, efa_status::LOCAL_ERROR_UNRESP_REMOTE);
            return Ok(());
        };
        if let Some((rkey, raddr, imm)) = p.write {
            return self.deliver_write(p, tq, rkey, raddr, imm);
        }
        let Some((rwr, sges)) = self.qps.get_mut(&tq).and_then(|q| q.recvs.pop_front()) else {
            return Err(p);
        };
        let room: usize = sges.iter().map(|s| s.length as usize).sum();
        if p.data.len() > room {
            // Put back: the buffer stays posted, the sender learns of the bad length.
            if let Some(q) = self.qps.get_mut(&tq) {
                q.recvs.push_front((rwr, sges));
            }
            self.send_done(p.from, p.wr_id, efa_status::REMOTE_ERROR_BAD_LENGTH);
            return Ok(());
        }
        let (tpd, rcq) = {
            let q = &self.qps[&tq];
            (q.pd, q.recv_cq)
        };
        if sges.iter().any(|s| self.mr_for(tpd, s).is_none()) {
            self.send_done(p.from, p.wr_id, efa_status::REMOTE_ERROR_BAD_LENGTH);
            return Ok(());
        }
        let mut off = 0;
        for s in &sges {
            let n = (s.length as usize).min(p.data.len() - off);
            // SAFETY: the range lies inside a live registration of the receiver's PD
            // (checked just above); ibv_reg_mr(3)'s contract keeps it valid and writable
            // (LOCAL_WRITE) until deregistered.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    p.data[off..].as_ptr(),
                    s.addr as usize as *mut u8,
                    n,
                )
            };
            off += n;
            if off == p.data.len() {
                break;
            }
        }
        let e = self.recv_entry(&p, tpd, rwr, IBV_WC_RECV, 0);
        self.complete(rcq, e);
        self.send_done(p.from, p.wr_id, 0);
        Ok(())
    }

    /// The receive completion of `p` on a QP of protection domain `tpd`: the sender named by
    /// its address handle there, or by its GID when the receiver has none (as EFA reports).
    fn recv_entry(&self, p: &Pending, tpd: usize, wr_id: u64, opcode: u32, imm: u32) -> Entry {
        let src_qp = self.qps.get(&p.from).map_or(0, |q| q.qpn);
        let ahn = self
            .ahs
            .values()
            .find(|a| a.pd == tpd && a.gid == GID)
            .map(|a| u32::from(a.ahn));
        Entry {
            wc: Wc {
                wr_id,
                status: IBV_WC_SUCCESS,
                vendor_err: 0,
                opcode,
                byte_len: p.data.len() as u32,
                src_qp,
                slid: ahn.unwrap_or(EFA_AHN_UNKNOWN),
                imm,
            },
            sgid: ahn.is_none().then_some(GID),
        }
    }

    /// An RDMA write with immediate: the target range is checked first (a bad one fails
    /// whatever the receive queue holds), then a posted receive carries the notice.
    fn deliver_write(
        &mut self,
        p: Pending,
        tq: usize,
        rkey: u32,
        raddr: u64,
        imm: u32,
    ) -> Result<(), Pending> {
        let (tpd, rcq) = {
            let q = &self.qps[&tq];
            (q.pd, q.recv_cq)
        };
        let Some(remote) = self.remote(tpd, rkey, raddr, p.data.len(), IBV_ACCESS_REMOTE_WRITE)
        else {
            self.send_done_op(
                p.from,
                p.wr_id,
                efa_status::REMOTE_ERROR_BAD_ADDRESS,
                IBV_WC_RDMA_WRITE,
            );
            return Ok(());
        };
        let Some((rwr, _)) = self.qps.get_mut(&tq).and_then(|q| q.recvs.pop_front()) else {
            return Err(p);
        };
        // SAFETY: the range lies inside a live registration of the target's PD with remote
        // write access (checked just above), valid until deregistered (ibv_reg_mr(3)).
        unsafe { core::ptr::copy(p.data.as_ptr(), remote as *mut u8, p.data.len()) };
        RDMA_WRITES.fetch_add(1, Ordering::Relaxed);
        let e = self.recv_entry(&p, tpd, rwr, IBV_WC_RECV_RDMA_WITH_IMM, imm);
        self.complete(rcq, e);
        self.send_done_op(p.from, p.wr_id, 0, IBV_WC_RDMA_WRITE);
        Ok(())
    }

    /// Retries the sends that met RNR, in an order that lets later ones overtake.
    fn progress(&mut self) {
        let now = Instant::now();
        for _ in 0..self.rnr.len() {
            let Some(mut p) = self.rnr.pop_front() else {
                break;
            };
            if p.next_try > now {
                self.rnr.push_back(p);
                continue;
            }
            match self.deliver(p) {
                Ok(()) => {}
                Err(back) => {
                    p = back;
                    match p.retries_left {
                        Some(0) => {
                            let op = if p.write.is_some() {
                                IBV_WC_RDMA_WRITE
                            } else {
                                IBV_WC_SEND
                            };
                            self.send_done_op(p.from, p.wr_id, efa_status::REMOTE_ERROR_RNR, op);
                        }
                        n => {
                            p.retries_left = n.map(|n| n - 1);
                            p.next_try = now + RNR_INTERVAL;
                            self.rnr.push_back(p);
                        }
                    }
                }
            }
        }
    }
}

static EMUL: Verbs = Verbs {
    get_device_list: e_get_device_list,
    free_device_list: e_free_device_list,
    get_device_name: e_get_device_name,
    open_device: e_open_device,
    close_device: e_close_device,
    query_device: e_query_device,
    query_port: e_query_port,
    query_gid: e_query_gid,
    efadv_query_device: e_efadv_query_device,
    alloc_pd: e_alloc_pd,
    dealloc_pd: e_dealloc_pd,
    reg_mr: e_reg_mr,
    dereg_mr: e_dereg_mr,
    mr_keys: e_mr_keys,
    efadv_query_mr: e_query_mr,
    efadv_create_cq: e_create_cq,
    destroy_cq: e_destroy_cq,
    efadv_create_qp_ex: e_create_qp,
    modify_qp: e_modify_qp,
    destroy_qp: e_destroy_qp,
    qp_num: e_qp_num,
    create_ah: e_create_ah,
    destroy_ah: e_destroy_ah,
    efadv_query_ah: e_query_ah,
    post_recv: e_post_recv,
    wr_start: e_wr_start,
    wr_send: e_wr_send,
    wr_rdma: e_wr_rdma,
    wr_set_ud_addr: e_wr_set_ud_addr,
    wr_set_sge_list: e_wr_set_sge_list,
    wr_complete: e_wr_complete,
    start_poll: e_start_poll,
    next_poll: e_next_poll,
    end_poll: e_end_poll,
    wc: e_wc,
    wc_read_sgid: e_wc_read_sgid,
};

/// The device "pointer" in the list (never dereferenced).
const DEV: usize = 1;

unsafe fn e_get_device_list(n: *mut c_int) -> *mut *mut IbvDevice {
    let list: Box<[*mut IbvDevice]> = vec![handle(DEV), core::ptr::null_mut()].into_boxed_slice();
    if !n.is_null() {
        // SAFETY: `n` is a valid out-pointer (ibv_get_device_list(3)).
        unsafe { n.write(1) };
    }
    Box::into_raw(list) as *mut *mut IbvDevice
}

unsafe fn e_free_device_list(l: *mut *mut IbvDevice) {
    // SAFETY: `l` is the two-entry list e_get_device_list boxed.
    drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(l, 2)) });
}

unsafe fn e_get_device_name(_d: *mut IbvDevice) -> *const c_char {
    NAME_C.as_ptr()
}

unsafe fn e_open_device(d: *mut IbvDevice) -> *mut Ctx {
    if id(d) != DEV {
        return core::ptr::null_mut();
    }
    with(|n| {
        let i = n.new_id();
        n.ctxs.insert(i, ());
        handle(i)
    })
}

unsafe fn e_close_device(c: *mut Ctx) -> c_int {
    with(|n| {
        if n.ctxs.remove(&id(c)).is_some() {
            0
        } else {
            libc::EINVAL
        }
    })
}

unsafe fn e_query_device(_c: *mut Ctx, a: *mut IbvDeviceAttr) -> c_int {
    let attr = IbvDeviceAttr {
        vendor_id: 0x1d0f,
        vendor_part_id: 0xefa1,
        max_qp: 256,
        max_qp_wr: MAX_RQ_WR as c_int,
        max_sge: 2,
        max_cq: 512,
        max_cqe: 32768,
        max_mr: 65536,
        max_pd: 256,
        max_ah: 1024,
        phys_port_cnt: 1,
        max_mr_size: 1 << 40,
        ..IbvDeviceAttr::default()
    };
    // SAFETY: `a` is a valid out-pointer (ibv_query_device(3)).
    unsafe { a.write(attr) };
    0
}

unsafe fn e_query_port(_c: *mut Ctx, port: u8, a: *mut IbvPortAttr) -> c_int {
    if port != 1 {
        return libc::EINVAL;
    }
    let attr = IbvPortAttr {
        state: IBV_PORT_ACTIVE,
        max_mtu: 5,
        active_mtu: 5,
        gid_tbl_len: 1,
        max_msg_sz: MAX_MSG,
        // 4 lanes of 25 Gb/s: 100 Gb/s.
        active_width: 2,
        active_speed: 32,
        phys_state: 5,
        link_layer: 2,
        ..IbvPortAttr::default()
    };
    // SAFETY: `a` is a valid out-pointer (ibv_query_port(3)).
    unsafe { a.write(attr) };
    0
}

unsafe fn e_query_gid(_c: *mut Ctx, port: u8, i: c_int, g: *mut IbvGid) -> c_int {
    if port != 1 || i != 0 {
        return libc::EINVAL;
    }
    // SAFETY: `g` is a valid out-pointer (ibv_query_gid(3)).
    unsafe { g.write(IbvGid { raw: GID }) };
    0
}

unsafe fn e_efadv_query_device(_c: *mut Ctx, a: *mut EfadvDeviceAttr, len: u32) -> c_int {
    if (len as usize) < core::mem::size_of::<EfadvDeviceAttr>() {
        return libc::EINVAL;
    }
    let attr = EfadvDeviceAttr {
        max_sq_wr: MAX_SQ_WR,
        max_rq_wr: MAX_RQ_WR,
        max_sq_sge: 2,
        max_rq_sge: 1,
        inline_buf_size: INLINE,
        device_caps: EFADV_DEVICE_ATTR_CAPS_RDMA_READ
            | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY
            | EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID
            | EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE
            | EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV,
        max_rdma_size: MAX_RDMA,
        ..EfadvDeviceAttr::default()
    };
    // SAFETY: `a` is a valid out-pointer of `len` bytes (efadv_query_device(3)).
    unsafe { a.write(attr) };
    0
}

unsafe fn e_alloc_pd(c: *mut Ctx) -> *mut Pd {
    with(|n| {
        if !n.ctxs.contains_key(&id(c)) {
            return core::ptr::null_mut();
        }
        let i = n.new_id();
        n.pds.insert(i, id(c));
        handle(i)
    })
}

unsafe fn e_dealloc_pd(p: *mut Pd) -> c_int {
    with(|n| {
        let p = id(p);
        let busy = n.mrs.values().any(|m| m.pd == p)
            || n.qps.values().any(|q| q.pd == p)
            || n.ahs.values().any(|a| a.pd == p);
        if busy {
            return libc::EBUSY;
        }
        if n.pds.remove(&p).is_some() {
            0
        } else {
            libc::EINVAL
        }
    })
}

unsafe fn e_reg_mr(p: *mut Pd, addr: *mut c_void, len: usize, access: c_int) -> *mut Mr {
    if REFUSE_REG.with(|r| r.get()) {
        return core::ptr::null_mut();
    }
    // Remote write needs local write (ibv_reg_mr(3): EINVAL otherwise).
    if access & IBV_ACCESS_REMOTE_WRITE != 0 && access & IBV_ACCESS_LOCAL_WRITE == 0 {
        return core::ptr::null_mut();
    }
    with(|n| {
        if !n.pds.contains_key(&id(p)) || addr.is_null() {
            return core::ptr::null_mut();
        }
        let i = n.new_id();
        n.next_key += 1;
        let key = n.next_key;
        n.mrs.insert(
            i,
            MrS {
                pd: id(p),
                addr: addr.addr(),
                len,
                lkey: key,
                rkey: key ^ 0x5a00_0000,
                access,
            },
        );
        handle(i)
    })
}

unsafe fn e_dereg_mr(m: *mut Mr) -> c_int {
    with(|n| {
        if n.mrs.remove(&id(m)).is_some() {
            0
        } else {
            libc::EINVAL
        }
    })
}

unsafe fn e_mr_keys(m: *mut Mr) -> (u32, u32) {
    with(|n| n.mrs.get(&id(m)).map_or((0, 0), |m| (m.lkey, m.rkey)))
}

/// One interconnect: every id valid and 0.
unsafe fn e_query_mr(m: *mut Mr, a: *mut EfadvMrAttr, len: u32) -> c_int {
    if (len as usize) < core::mem::size_of::<EfadvMrAttr>() {
        return libc::EINVAL;
    }
    if !with(|n| n.mrs.contains_key(&id(m))) {
        return libc::EINVAL;
    }
    let attr = EfadvMrAttr {
        ic_id_validity: EFADV_MR_ATTR_VALIDITY_RECV_IC_ID
            | EFADV_MR_ATTR_VALIDITY_RDMA_READ_IC_ID
            | EFADV_MR_ATTR_VALIDITY_RDMA_RECV_IC_ID,
        ..EfadvMrAttr::default()
    };
    // SAFETY: `a` is a valid out-pointer of `len` bytes (efadv_query_mr(3)).
    unsafe { a.write(attr) };
    0
}

unsafe fn e_create_cq(
    c: *mut Ctx,
    _a: *mut IbvCqInitAttrEx,
    e: *mut EfadvCqInitAttr,
    _len: u32,
) -> *mut Cq {
    // The device reports source GIDs only to a CQ that asked for them, as EFA does; the
    // hardware device always asks.
    // SAFETY: `e` is NULL or a valid efadv_cq_init_attr (efadv_create_cq(3)).
    if e.is_null() || unsafe { (*e).wc_flags } & EFADV_WC_EX_WITH_SGID == 0 {
        return core::ptr::null_mut();
    }
    with(|n| {
        if !n.ctxs.contains_key(&id(c)) {
            return core::ptr::null_mut();
        }
        let i = n.new_id();
        n.cqs.insert(i, CqS::default());
        handle(i)
    })
}

unsafe fn e_destroy_cq(c: *mut Cq) -> c_int {
    with(|n| {
        let c = id(c);
        if n.qps.values().any(|q| q.send_cq == c || q.recv_cq == c) {
            return libc::EBUSY;
        }
        if n.cqs.remove(&c).is_some() {
            0
        } else {
            libc::EINVAL
        }
    })
}

unsafe fn e_create_qp(
    _c: *mut Ctx,
    a: *mut IbvQpInitAttrEx,
    e: *mut EfadvQpInitAttr,
    _len: u32,
) -> *mut Qp {
    // SAFETY: both are valid (efadv_create_qp_ex(3)).
    let (a, e) = unsafe { (*a, *e) };
    if a.qp_type != IBV_QPT_DRIVER
        || e.driver_qp_type != EFADV_QP_DRIVER_TYPE_SRD
        || a.comp_mask & IBV_QP_INIT_ATTR_PD == 0
        || a.cap.max_send_wr > MAX_SQ_WR
        || a.cap.max_recv_wr > MAX_RQ_WR
    {
        return core::ptr::null_mut();
    }
    with(|n| {
        let (pd, scq, rcq) = (id(a.pd), id(a.send_cq), id(a.recv_cq));
        if !n.pds.contains_key(&pd) || !n.cqs.contains_key(&scq) || !n.cqs.contains_key(&rcq) {
            return core::ptr::null_mut();
        }
        let i = n.new_id();
        n.next_qpn += 1;
        let qpn = n.next_qpn;
        n.qps.insert(
            i,
            QpS {
                pd,
                send_cq: scq,
                recv_cq: rcq,
                qpn,
                qkey: 0,
                state: IBV_QPS_RESET,
                rnr_retry: 0,
                max_send: a.cap.max_send_wr as usize,
                max_recv: a.cap.max_recv_wr as usize,
                outstanding: 0,
                recvs: VecDeque::new(),
                building: Vec::new(),
            },
        );
        n.by_qpn.insert(qpn, i);
        handle(i)
    })
}

unsafe fn e_modify_qp(q: *mut Qp, a: *mut IbvQpAttr, mask: c_int) -> c_int {
    // SAFETY: `a` is valid (ibv_modify_qp(3)).
    let a = unsafe { *a };
    with(|n| {
        let Some(qp) = n.qps.get_mut(&id(q)) else {
            return libc::EINVAL;
        };
        if mask & IBV_QP_STATE == 0 {
            return libc::EINVAL;
        }
        // The transitions an SRD QP makes (RESET → INIT → RTR → RTS), each with the
        // attributes it needs.
        let ok = match (qp.state, a.qp_state) {
            (IBV_QPS_RESET, IBV_QPS_INIT) => {
                mask & (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)
                    == IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY
                    && a.port_num == 1
            }
            (IBV_QPS_INIT, IBV_QPS_RTR) => true,
            (IBV_QPS_RTR, IBV_QPS_RTS) => mask & IBV_QP_SQ_PSN != 0,
            _ => false,
        };
        if !ok {
            return libc::EINVAL;
        }
        if mask & IBV_QP_QKEY != 0 {
            qp.qkey = a.qkey;
        }
        if mask & IBV_QP_RNR_RETRY != 0 {
            qp.rnr_retry = a.rnr_retry;
        }
        qp.state = a.qp_state;
        0
    })
}

unsafe fn e_destroy_qp(q: *mut Qp) -> c_int {
    with(|n| {
        let Some(qp) = n.qps.remove(&id(q)) else {
            return libc::EINVAL;
        };
        n.by_qpn.remove(&qp.qpn);
        n.rnr.retain(|p| p.from != id(q));
        0
    })
}

unsafe fn e_qp_num(q: *mut Qp) -> u32 {
    with(|n| n.qps.get(&id(q)).map_or(0, |q| q.qpn))
}

unsafe fn e_create_ah(p: *mut Pd, a: *mut IbvAhAttr) -> *mut Ah {
    // SAFETY: `a` is valid (ibv_create_ah(3)).
    let a = unsafe { *a };
    if a.is_global != 1 || a.port_num != 1 {
        return core::ptr::null_mut();
    }
    with(|n| {
        if !n.pds.contains_key(&id(p)) {
            return core::ptr::null_mut();
        }
        let i = n.new_id();
        let ahn = n.next_ahn;
        n.next_ahn = n.next_ahn.wrapping_add(1).max(1);
        n.ahs.insert(
            i,
            AhS {
                pd: id(p),
                gid: a.grh.dgid.raw,
                ahn,
            },
        );
        handle(i)
    })
}

unsafe fn e_destroy_ah(a: *mut Ah) -> c_int {
    with(|n| {
        if n.ahs.remove(&id(a)).is_some() {
            0
        } else {
            libc::EINVAL
        }
    })
}

unsafe fn e_query_ah(a: *mut Ah, at: *mut EfadvAhAttr, _len: u32) -> c_int {
    with(|n| match n.ahs.get(&id(a)) {
        Some(ah) => {
            // SAFETY: `at` is a valid out-pointer (efadv_query_ah(3)).
            unsafe {
                at.write(EfadvAhAttr {
                    ahn: ah.ahn,
                    ..EfadvAhAttr::default()
                })
            };
            0
        }
        None => libc::EINVAL,
    })
}

unsafe fn e_post_recv(q: *mut Qp, wr: *mut IbvRecvWr, bad: *mut *mut IbvRecvWr) -> c_int {
    with(|n| {
        let Some(qp) = n.qps.get_mut(&id(q)) else {
            return libc::EINVAL;
        };
        let mut w = wr;
        while !w.is_null() {
            // SAFETY: a valid list of receive work requests with `num_sge` entries each
            // (ibv_post_recv(3)).
            let (wr_id, sges, next) = unsafe {
                let r = &*w;
                let s = core::slice::from_raw_parts(r.sg_list, r.num_sge.max(0) as usize);
                (r.wr_id, s.to_vec(), r.next)
            };
            if qp.state == IBV_QPS_RESET || qp.recvs.len() >= qp.max_recv {
                if !bad.is_null() {
                    // SAFETY: `bad` is a valid out-pointer.
                    unsafe { bad.write(w) };
                }
                return libc::ENOMEM;
            }
            qp.recvs.push_back((wr_id, sges));
            w = next;
        }
        0
    })
}

unsafe fn e_wr_start(q: *mut Qp) {
    with(|n| {
        if let Some(qp) = n.qps.get_mut(&id(q)) {
            qp.building.clear();
        }
    })
}

unsafe fn e_wr_send(q: *mut Qp, wr_id: u64, _flags: u32, _imm: Option<u32>) {
    with(|n| {
        if let Some(qp) = n.qps.get_mut(&id(q)) {
            qp.building.push(Wr {
                wr_id,
                ..Wr::default()
            });
        }
    })
}

unsafe fn e_wr_rdma(q: *mut Qp, wr_id: u64, _flags: u32, kind: RdmaKind, rkey: u32, raddr: u64) {
    let kind = match kind {
        RdmaKind::Read => WrKind::Read { rkey, raddr },
        RdmaKind::Write => WrKind::Write {
            rkey,
            raddr,
            imm: None,
        },
        RdmaKind::WriteImm(i) => WrKind::Write {
            rkey,
            raddr,
            imm: Some(i),
        },
    };
    with(|n| {
        if let Some(qp) = n.qps.get_mut(&id(q)) {
            qp.building.push(Wr {
                wr_id,
                kind,
                ..Wr::default()
            });
        }
    })
}

unsafe fn e_wr_set_ud_addr(q: *mut Qp, ah: *mut Ah, qpn: u32, qkey: u32) {
    with(|n| {
        if let Some(w) = n.qps.get_mut(&id(q)).and_then(|qp| qp.building.last_mut()) {
            (w.ah, w.qpn, w.qkey) = (id(ah), qpn, qkey);
        }
    })
}

unsafe fn e_wr_set_sge_list(q: *mut Qp, k: usize, sge: *const IbvSge) {
    // SAFETY: `sge` points to `k` entries (ibv_wr_set_sge_list(3)).
    let sges = unsafe { core::slice::from_raw_parts(sge, k) }.to_vec();
    with(|n| {
        if let Some(w) = n.qps.get_mut(&id(q)).and_then(|qp| qp.building.last_mut()) {
            w.sges = sges;
        }
    })
}

unsafe fn e_wr_complete(q: *mut Qp) -> c_int {
    with(|n| {
        let qi = id(q);
        let Some(qp) = n.qps.get_mut(&qi) else {
            return libc::EINVAL;
        };
        if qp.state != IBV_QPS_RTS {
            qp.building.clear();
            return libc::EINVAL;
        }
        if qp.outstanding + qp.building.len() > qp.max_send {
            qp.building.clear();
            return libc::ENOMEM;
        }
        let wrs = core::mem::take(&mut qp.building);
        let (pd, rnr_retry) = (qp.pd, qp.rnr_retry);
        qp.outstanding += wrs.len();
        for w in wrs {
            let ah_ok = n.ahs.get(&w.ah).is_some_and(|a| a.pd == pd && a.gid == GID);
            let write_imm = match w.kind {
                WrKind::Send => None,
                WrKind::Write {
                    rkey,
                    raddr,
                    imm: Some(imm),
                } => Some((rkey, raddr, imm)),
                _ if !ah_ok => {
                    n.send_done_op(qi, w.wr_id, efa_status::LOCAL_ERROR_UNRESP_REMOTE, 0);
                    continue;
                }
                _ => {
                    // Read and write complete at once: the NIC moves the bytes itself.
                    n.rdma(qi, pd, &w);
                    continue;
                }
            };
            if write_imm.is_some() {
                let len: usize = w.sges.iter().map(|s| s.length as usize).sum();
                if !ah_ok || len > MAX_RDMA as usize || !n.local_ok(pd, &w.sges, false) {
                    let st = if ah_ok && len <= MAX_RDMA as usize {
                        efa_status::LOCAL_ERROR_INVALID_LKEY
                    } else {
                        efa_status::LOCAL_ERROR_BAD_LENGTH
                    };
                    n.send_done_op(qi, w.wr_id, st, IBV_WC_RDMA_WRITE);
                    continue;
                }
            }
            let data = n.gather(pd, &w.sges);
            let too_big =
                write_imm.is_none() && data.as_ref().is_some_and(|d| d.len() > MAX_MSG as usize);
            let (Some(data), true, false) = (data, ah_ok, too_big) else {
                n.send_done(qi, w.wr_id, efa_status::LOCAL_ERROR_BAD_LENGTH);
                continue;
            };
            let p = Pending {
                from: qi,
                wr_id: w.wr_id,
                write: write_imm,
                to_qpn: w.qpn,
                qkey: w.qkey,
                data,
                // IB's rnr_retry 7 means retry for ever.
                retries_left: (rnr_retry < 7).then_some(rnr_retry),
                next_try: Instant::now() + RNR_INTERVAL,
            };
            if let Err(p) = n.deliver(p) {
                n.rnr.push_back(p);
            }
        }
        0
    })
}

unsafe fn e_start_poll(c: *mut Cq) -> c_int {
    with(|n| {
        n.progress();
        let Some(cq) = n.cqs.get_mut(&id(c)) else {
            return libc::EINVAL;
        };
        cq.current = cq.entries.pop_front();
        if cq.current.is_some() {
            0
        } else {
            libc::ENOENT
        }
    })
}

unsafe fn e_next_poll(c: *mut Cq) -> c_int {
    with(|n| {
        let Some(cq) = n.cqs.get_mut(&id(c)) else {
            return libc::EINVAL;
        };
        cq.current = cq.entries.pop_front();
        if cq.current.is_some() {
            0
        } else {
            libc::ENOENT
        }
    })
}

unsafe fn e_end_poll(c: *mut Cq) {
    with(|n| {
        if let Some(cq) = n.cqs.get_mut(&id(c)) {
            cq.current = None;
        }
    })
}

unsafe fn e_wc(c: *mut Cq) -> Wc {
    with(|n| {
        n.cqs
            .get(&id(c))
            .and_then(|cq| cq.current)
            .map_or_else(Wc::default, |e| e.wc)
    })
}

unsafe fn e_wc_read_sgid(c: *mut Cq, g: *mut IbvGid) -> c_int {
    let sgid = with(|n| {
        n.cqs
            .get(&id(c))
            .and_then(|cq| cq.current)
            .and_then(|e| e.sgid)
    });
    match sgid {
        Some(raw) => {
            // SAFETY: `g` is a valid out-pointer (efadv_wc_read_sgid).
            unsafe { g.write(IbvGid { raw }) };
            0
        }
        None => -libc::ENOENT,
    }
}
