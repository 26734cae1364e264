//! The RDM endpoint: operations posted by the application, the per-peer state, and packet
//! transmission. Packet reception is in `rx.rs`.
//!
//! Protocol choice for a message of `len` bytes (efa-reference §3): eager when it fits one
//! packet, medium up to `FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE` (all segments at once), long-CTS
//! beyond (the first chunk with the request, the rest under the receiver's CTS windows);
//! delivery-complete variants when asked. One-sided operations are emulated (§5): EAGER_RTW or
//! LONGCTS_RTW for writes, SHORT_RTR or LONGCTS_RTR for reads, WRITE/FETCH/COMPARE_RTA for
//! atomics, after a handshake with the peer (§2). The device has no RDMA read, so the long-read
//! and runt-read protocols are never chosen and their feature bit is not advertised.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::pkt::{self, ReqHdr, RmaIov};
use super::quiet::{DEVICE_QUIET, QUIET_POLL_PERIOD, Quiet};
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::efa::device::{Completion, DevError, Device, EfaAddr, HEADROOM};
use crate::prov::efa::{EfaDomain, Knobs};
use crate::prov::shm::{Pending, ShmEndpoint};
use crate::sys::mem::{IoVec, gather, iov_len};
use crate::util::av::Av;
use crate::util::cntr::Cntr;
use crate::util::cq::{Cq, CqEntry, CqErrEntry};
use crate::util::ep::{AtomicKind, AtomicOp, MsgOp, OpFlags, PREFIXED_IOV_MAX, RmaOp};
use crate::util::hash::U64Map;
use crate::util::provider::Idle;
use crate::util::rxq::{MAX_IOV, SharedRxQueue};
use crate::util::slab::Slab;
use crate::util::{Bind, Endpoint, Progress};

/// Feature bits this endpoint advertises in its handshake (efa-reference §2: 1, 3, 4 and 6 are
/// baseline in 2.6; 9 is this library's error responses).
pub const EXTRA_INFO: u64 = pkt::EXTRA_DELIVERY_COMPLETE
    | pkt::EXTRA_CONNID_HEADER
    | pkt::EXTRA_RUNT
    | pkt::EXTRA_READ_NACK
    | pkt::EXTRA_ERROR_RESPONSE;

/// Device completions handled per progress call.
const POLL_BATCH: usize = 64;
/// A device not polled for this long is serviced by the ack timer's thread (`Device::service`):
/// well inside a sender's shortest give-up time (`srd::Config::unreachable`, 5 s) and its
/// longest retransmission timeout (200 ms), far above the gaps of an application that polls.
pub(super) const UNATTENDED: Duration = Duration::from_millis(20);

/// Bytes of packets handed to the device and not yet completed before bulk data (CTSDATA of
/// long messages and writes, read responses) waits for completions (as a packet count, at
/// least two SRD windows, at most 1,024). Without a bound every granted window became packets
/// at once — 64 concurrent 1 MiB writes are 1,024 buffers of 64 KiB on loopback, each filled
/// long before the socket took it, so the copies and checksums ran from memory instead of the
/// cache (1 MiB writes 2.9 → 3.2–3.6 GB/s, reads 1.6 → 2.6–3.3 GB/s). Upstream efa bounds
/// outstanding sends by the device's send queue the same way (efa-reference §6).
const BULK_SEND_BYTES: usize = 8 << 20;

/// Payloads at least this long go to the device as the application's memory, not copied
/// into the packet (zero-copy send): the copy cost the sender as much as the kernel's own
/// (perf at 1 MiB over loopback), while a short one costs less than the iovec it saves.
pub(super) const ZERO_COPY_MIN: usize = 4096;

fn bulk_send_cap(mtu: usize) -> usize {
    (BULK_SEND_BYTES / mtu.max(1)).clamp(128, 1024)
}

/// A bulk sender stopped at `BULK_SEND_BYTES`, resumed as completions free room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Parked {
    /// CTSDATA of a long-CTS transfer we send (a `txes` id).
    Tx(u64),
    /// The response to a read we serve (an `rxes` id).
    Read(u64),
}

/// Receive buffers posted to the device at first (it grows to `Inner::rx_max` under load).
const RX_START: usize = 64;
#[derive(Default)]
pub(super) struct Counters {
    pub send: Option<Arc<Cntr>>,
    pub recv: Option<Arc<Cntr>>,
    pub read: Option<Arc<Cntr>>,
    pub write: Option<Arc<Cntr>>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum TxKind {
    Msg,
    Tagged,
    Write,
    Read,
    Atomic(AtomicKind),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum TxState {
    /// Waiting for the peer's handshake (RMA and atomics).
    Handshake,
    /// Packets being sent / waiting for device completions.
    Sending,
    /// Long-CTS: waiting for the receiver's next CTS.
    WaitCts,
    /// Waiting for a RECEIPT, READRSP/CTSDATA data or ATOMRSP.
    WaitResponse,
}

/// An operation the application posted (or an internal one).
pub(super) struct Txe {
    pub kind: TxKind,
    pub peer: usize,
    pub context: usize,
    /// Resolved flags: FI_COMPLETION set iff a completion is due.
    pub flags: u64,
    pub iov: Vec<IoVec>,
    pub len: usize,
    pub tag: u64,
    pub cq_data: Option<u64>,
    pub msg_id: u32,
    pub rma: Vec<RmaIov>,
    /// Payload bytes handed to the device / confirmed sent by it.
    pub queued: usize,
    pub done: usize,
    /// Packets in the device not yet completed.
    pub in_flight: usize,
    /// Long-CTS: bytes the receiver granted beyond `queued`, and its operation id.
    pub window: usize,
    pub recv_id: u32,
    /// Delivery complete: completes on RECEIPT (or, for reads and fetches, the response).
    pub await_response: bool,
    pub response: bool,
    /// Read: bytes received into `iov`.
    pub got: usize,
    /// Atomics.
    pub datatype: u32,
    pub atomic_op: u32,
    pub operand: Vec<u8>,
    pub result: Vec<IoVec>,
    pub state: TxState,
    pub inject: bool,
    /// Injected data, copied at post time (the application's buffer is free at once).
    pub owned: Vec<u8>,
    /// Packets that end in the application's memory were posted (`source_piece`): while any
    /// is in the device, the buffer stays the operation's, even if it has failed.
    pub lent: bool,
    /// An error to report once the device has let go of the buffer (`Inner::fail_tx`).
    pub failed: Option<(Errno, i32)>,
}

impl Txe {
    /// Copies `dst.len()` bytes of the operation's source data from offset `off`.
    pub fn copy_out(&self, off: usize, dst: &mut [u8]) {
        if self.inject {
            dst.copy_from_slice(&self.owned[off..off + dst.len()]);
        } else {
            gather(&self.iov, off, dst);
        }
    }

    /// The source bytes `[off, off + n)` as one piece of the application's memory, when they
    /// lie in one iov entry and are not injected data (which we hold ourselves).
    pub fn source_piece(&self, off: usize, n: usize) -> Option<IoVec> {
        if self.inject {
            return None;
        }
        crate::sys::mem::piece(&self.iov, off, n)
    }
}

/// A message, write or read this endpoint is receiving data for, or a read it is answering.
pub(super) struct Rxe {
    pub peer: usize,
    pub kind: RxKind,
    pub msg_id: u32,
    pub total: usize,
    pub got: usize,
    /// The other side's operation id (CTS, RECEIPT, READRSP/CTSDATA of a read).
    pub send_id: u32,
    /// Bytes granted by our last CTS and not yet received.
    pub granted: usize,
    pub dc: bool,
    pub tag: u64,
    pub cq_data: Option<u64>,
    pub tagged: bool,
    pub medium: bool,
    pub longcts: bool,
    /// Long-CTS credits the sender asked for (packets per window).
    pub credits: usize,
    /// Data that arrived before a receive matched (unexpected messages).
    pub staging: Vec<u8>,
    /// Where a matched message goes (a multi-receive buffer's reserved part).
    pub target: Vec<IoVec>,
    /// The multi-receive buffer was released by this message.
    pub released: bool,
    /// FI_DISCARD: received and dropped without a completion.
    pub discard: bool,
}

pub(super) enum RxKind {
    /// Not yet matched: data is staged.
    Unexpected,
    /// Matched to a posted receive.
    Recv(Box<crate::util::rxq::Recv>),
    /// A remote write into our memory.
    Write { dest: Vec<IoVec> },
    /// A remote read of our memory: we send `src` to the requester's op `send_id`.
    Read {
        src: Vec<IoVec>,
        sent: usize,
        window: usize,
    },
}

/// The top bit of a 32-bit operation id on the wire says which table it names: set for our
/// transmit operations, clear for our receive-side ones. CTS and CTSDATA flow both ways (long
/// messages and writes, long reads), so the receiver of one needs to tell them apart.
pub(super) const TX_BIT: u32 = 0x8000_0000;

pub(super) fn tx_wire(id: u64) -> u32 {
    Slab::<Txe>::wire_id(id).map_or(u32::MAX, |w| w | TX_BIT)
}

pub(super) fn rx_wire(id: u64) -> u32 {
    Slab::<Rxe>::wire_id(id).map_or(0x7fff_ffff, |w| w & !TX_BIT)
}

/// The msg_id after `id` (0xFFFFFFFF is never used, efa-reference §4).
pub(super) fn next_msg_id(id: u32) -> u32 {
    match id.wrapping_add(1) {
        u32::MAX => 0,
        n => n,
    }
}

/// What an unexpected message is in the receive queue, which our shm endpoint shares: ours are
/// `Pending::Foreign(rx entry)`, the others shm's.
pub(super) type Unexp = Pending;

pub(super) struct Peer {
    pub addr: EfaAddr,
    pub fi_addr: u64,
    pub next_msg_id: u32,
    pub expected_msg_id: u32,
    /// Ordered packets that arrived early, by msg_id (copies).
    pub ooo: BTreeMap<u32, Vec<Vec<u8>>>,
    /// Messages being received in several packets (medium), by msg_id.
    pub rx_map: HashMap<u32, u64>,
    pub hs_sent: bool,
    pub hs_received: bool,
    pub extra_info: u64,
    /// Something was sent to it (the handshake trigger is needed only once).
    pub contacted: bool,
    /// Operations waiting for the handshake.
    pub waiting: VecDeque<u64>,
    pub dead: bool,
    /// Reached through shm (decided on the first operation to it; `local.rs`).
    pub via_shm: Option<bool>,
    /// RNR back-off: no new packet goes out before this.
    pub backoff_until: Option<Instant>,
    pub backoff_us: u64,
}

impl Peer {
    fn new(addr: EfaAddr, fi_addr: u64) -> Peer {
        Peer {
            addr,
            fi_addr,
            next_msg_id: 0,
            expected_msg_id: 0,
            ooo: BTreeMap::new(),
            rx_map: HashMap::new(),
            hs_sent: false,
            hs_received: false,
            extra_info: 0,
            contacted: false,
            waiting: VecDeque::new(),
            dead: false,
            via_shm: None,
            backoff_until: None,
            backoff_us: 0,
        }
    }

    pub fn error_responses(&self) -> bool {
        self.extra_info & pkt::EXTRA_ERROR_RESPONSE != 0
    }
}

/// Who a packet in the device belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Owner {
    Tx(u64),
    /// Data of a read we answer.
    Rx(u64),
    /// Handshake, CTS, RECEIPT, ERR...: resent on RNR, dropped when the peer is gone.
    Ctrl,
}

pub(super) struct Sent {
    pub owner: Owner,
    pub peer: usize,
    pub payload: usize,
    /// Packet length after HEADROOM: the device gives the buffer back whole.
    pub len: usize,
    /// Payload sent from the application's memory after the packet (zero-copy), kept to send
    /// again after an RNR.
    pub tail: IoVec,
}

/// A packet waiting to go (device queue full, peer in RNR back-off).
pub(super) struct Queued {
    pub peer: usize,
    pub buf: Vec<u8>,
    pub len: usize,
    pub sent: Sent,
}

/// The endpoint's state, locked. Packets posted while it is held leave in one batch when it is
/// released (the device may hold them until `flush`), so a call that answers several packets or
/// a progress pass costs one system call, not one per packet.
pub(super) struct Locked<'a>(MutexGuard<'a, Inner>);

impl core::ops::Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl core::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.0
    }
}

impl Drop for Locked<'_> {
    /// Every call ends with a flush. Acks the device keeps back are the ack timer's to flush
    /// if the application makes no further call (`ack_timer`).
    fn drop(&mut self) {
        let g = &mut *self.0;
        // Published before the mutex is released: updates are ordered as the lock orders them.
        // Entering quiet, the device's timers are armed on its fd and the fd is watched
        // (`quiet`): nothing else looks at the device until then.
        let quiet =
            g.shm_on && g.dev_idle && g.txes.is_empty() && g.rxes.is_empty() && g.queued.is_empty();
        if quiet && (!g.was_quiet || !g.watching) {
            g.dev.prepare_wait();
            if !g.watching {
                g.watching = g.quiet.watch(g.dev.wait_fd());
            }
        }
        g.was_quiet = quiet;
        g.quiet.publish(quiet, g.watching);
        // A call that only posted may leave small sends for the next poll (`flush_posted`);
        // one that polled puts everything on the wire.
        let held = if core::mem::take(&mut g.polled) {
            g.dev.flush()
        } else {
            g.dev.flush_posted()
        };
        if held {
            if !super::ack_timer::keeping_allowed() {
                g.dev.flush_all();
            } else if !g.acks_kept.load(Ordering::Relaxed) {
                g.acks_kept.store(true, Ordering::SeqCst);
                super::ack_timer::kept();
            }
        } else if g.acks_kept.load(Ordering::Relaxed) {
            g.acks_kept.store(false, Ordering::Relaxed);
        }
    }
}

pub(super) struct Inner {
    pub dev: Box<dyn Device>,
    /// The device kept acks back at the end of the last call (see `ack_timer`).
    acks_kept: Arc<AtomicBool>,
    pub mtu: usize,
    pub knobs: Knobs,
    pub enabled: bool,
    pub av: Option<Arc<Av>>,
    pub tx_cq: Option<Arc<Cq>>,
    pub rx_cq: Option<Arc<Cq>>,
    pub cntr: Counters,
    pub rxq: SharedRxQueue<Unexp>,
    pub peers: Vec<Peer>,
    pub by_addr: HashMap<EfaAddr, usize>,
    pub by_fi: U64Map<usize>,
    /// AV removals seen (`Av::removed_since`) when `by_fi` and the peers' `fi_addr` were last
    /// made right (`sync_av`).
    pub av_removals: u64,
    pub txes: Slab<Txe>,
    pub rxes: Slab<Rxe>,
    pub sent: Slab<Sent>,
    pub queued: VecDeque<Queued>,
    /// Bulk senders waiting for room under `BULK_SEND_BYTES`, in the order they stopped.
    pub parked: VecDeque<Parked>,
    pub pool: Vec<Vec<u8>>,
    pub posted_rx: usize,
    pub rx_target: usize,
    /// What `rx_target` may grow to.
    pub rx_max: usize,
    pub comps: Vec<Completion>,
    /// Malformed, spoofed or unroutable packets dropped.
    pub dropped: u64,
    /// Remote accesses refused (bad key, bounds, access).
    pub refused: u64,
    /// FI_OPT_EFA_RNR_RETRY.
    pub rnr_retry: u32,
    /// `domain_attr->resource_mgmt` is `FI_RM_ENABLED`: a packet refused for lack of a receive
    /// buffer is sent again after a back-off, forever; disabled, the operation fails with
    /// `FI_ENORX` once the device gave up (fi_domain(3), efa-reference §6).
    pub rm_enabled: bool,
    /// When the device was last polled, and last gave a completion (see `DEVICE_QUIET`).
    pub dev_polled: Instant,
    /// This call polled the device (see `Locked`'s drop).
    pub polled: bool,
    pub dev_heard: Instant,
    /// The device has given nothing for `DEVICE_QUIET`.
    pub dev_idle: bool,
    /// Local peers go through shm (`RdmEndpoint::shm_on`, as the lock sees it).
    pub shm_on: bool,
    /// What pollers see without the lock (`Locked::drop` keeps it).
    pub quiet: Arc<Quiet>,
    /// Quiet as of the last release of the lock.
    pub was_quiet: bool,
    /// The watcher watches the device (until it reports it readable).
    pub watching: bool,
}

pub struct RdmEndpoint {
    pub(super) me: Weak<RdmEndpoint>,
    pub(super) domain: Arc<EfaDomain>,
    pub(super) caps: u64,
    pub(super) flags: OpFlags,
    /// `msg_prefix_size` when the application took FI_MSG_PREFIX, else 0: cut from every
    /// send and receive buffer before it is posted.
    prefix: usize,
    pub(super) inner: Mutex<Inner>,
    wait_fd: Option<std::os::fd::RawFd>,
    /// The shm endpoint for local peers (`local.rs`), used once enabled (`shm_on`) unless the
    /// application said FI_OPT_SHARED_MEMORY_PERMITTED false first (`shm_permitted`).
    pub(super) shm: Option<Arc<ShmEndpoint>>,
    pub(super) shm_on: AtomicBool,
    pub(super) shm_permitted: AtomicBool,
    /// `Inner::quiet`, readable without the lock.
    quiet: Arc<Quiet>,
}

impl RdmEndpoint {
    pub fn new(
        domain: Arc<EfaDomain>,
        caps: u64,
        tx_op_flags: u64,
        rx_op_flags: u64,
        prefix: usize,
        dev: Box<dyn Device>,
    ) -> Arc<RdmEndpoint> {
        let knobs = domain.knobs.clone();
        let rm_enabled = domain.rm_enabled;
        let mtu = dev.mtu();
        let rxq = SharedRxQueue::new(caps & FI_DIRECTED_RECV != 0);
        // Upstream uses shm unless the application asked for remote communication only.
        let local_comm = caps & (FI_LOCAL_COMM | FI_REMOTE_COMM) != FI_REMOTE_COMM;
        let shm = (local_comm && crate::prov::efa::shm_transfer_enabled())
            .then(|| {
                domain.shm_domain().open_peer_endpoint(
                    caps,
                    (tx_op_flags, rx_op_flags),
                    super::local::shm_name(&dev.addr()),
                    rxq.clone(),
                    super::local::PEER_MODE,
                )
            })
            .and_then(|r| r.ok());
        let wait_fd = dev.wait_fd();
        // Enough posted buffers to absorb a window from a few peers without RNR, bounded in
        // memory (64 KiB datagrams on loopback).
        let rx_max = (knobs.rx_size.max(64) * 8192 / mtu.max(1))
            .clamp(64, 1024)
            .min(dev.max_recv());
        let quiet = Quiet::new(shm.as_ref().and_then(|s| s.idle_hint()));
        Arc::new_cyclic(|me| RdmEndpoint {
            me: me.clone(),
            domain,
            caps,
            flags: OpFlags::new(tx_op_flags, rx_op_flags),
            prefix,
            wait_fd,
            shm,
            shm_on: AtomicBool::new(false),
            quiet: quiet.clone(),
            shm_permitted: AtomicBool::new(true),
            inner: Mutex::new(Inner {
                dev,
                acks_kept: Arc::new(AtomicBool::new(false)),
                mtu,
                knobs,
                enabled: false,
                av: None,
                tx_cq: None,
                rx_cq: None,
                cntr: Counters::default(),
                rxq,
                peers: Vec::new(),
                by_addr: HashMap::new(),
                by_fi: U64Map::default(),
                av_removals: 0,
                txes: Slab::new(),
                rxes: Slab::new(),
                sent: Slab::new(),
                queued: VecDeque::new(),
                parked: VecDeque::new(),
                pool: Vec::new(),
                posted_rx: 0,
                // Few buffers first (64 KiB each on loopback, and idle while shm carries the
                // local peers); more when a progress pass finds half of them filled.
                rx_target: rx_max.min(RX_START),
                rx_max,
                comps: Vec::with_capacity(POLL_BATCH),
                dropped: 0,
                refused: 0,
                rnr_retry: 3,
                rm_enabled,
                dev_polled: Instant::now(),
                polled: false,
                dev_heard: Instant::now(),
                dev_idle: false,
                shm_on: false,
                quiet,
                was_quiet: false,
                watching: false,
            }),
        })
    }

    pub(super) fn lock(&self) -> Locked<'_> {
        Locked(self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The ack timer's tick: sends the acks the device still keeps back, unless the
    /// application is inside the library (its call ends with a flush).
    pub(super) fn flush_kept_acks(&self) {
        let Some(mut g) = self.try_inner() else {
            return;
        };
        g.dev.flush_all();
        g.acks_kept.store(false, Ordering::Relaxed);
    }

    /// The endpoint's state unless the application holds it (then its call ends with a
    /// flush): for the ack timer's thread, which must never wait for the application.
    fn try_inner(&self) -> Option<std::sync::MutexGuard<'_, Inner>> {
        match self.inner.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// The ack timer's slow tick: a device the application has not polled for
    /// `UNATTENDED` is serviced as a NIC would be (`Device::service`): arrivals acknowledged
    /// into posted buffers or refused with RNR, retransmissions sent.
    pub(super) fn service_unattended(&self) {
        let Some(mut g) = self.try_inner() else {
            return;
        };
        if g.enabled && g.dev_polled.elapsed() >= UNATTENDED {
            g.dev.service();
            g.acks_kept.store(false, Ordering::Relaxed);
        }
    }

    /// Packets dropped as malformed or spoofed, and remote accesses refused.
    pub fn drop_counts(&self) -> (u64, u64) {
        let g = self.lock();
        (g.dropped, g.refused)
    }

    pub fn device_stats(&self) -> crate::prov::efa::srd::Stats {
        self.lock().dev.stats()
    }

    /// Whether polls now leave the device alone (`quiet`), and whether the watcher watches it
    /// (else it is still looked at every `QUIET_POLL_PERIOD`).
    pub fn device_quiet_state(&self) -> (bool, bool) {
        let g = self.lock();
        (g.was_quiet, g.watching)
    }
}

// ---- completions ----

impl Inner {
    pub fn cq_flags(kind: TxKind) -> u64 {
        match kind {
            TxKind::Msg => FI_SEND | FI_MSG,
            TxKind::Tagged => FI_SEND | FI_TAGGED,
            TxKind::Write => FI_WRITE | FI_RMA,
            TxKind::Read => FI_READ | FI_RMA,
            TxKind::Atomic(AtomicKind::Write) => FI_WRITE | FI_ATOMIC,
            TxKind::Atomic(_) => FI_READ | FI_ATOMIC,
        }
    }

    fn tx_cntr(&self, kind: TxKind) -> Option<&Arc<Cntr>> {
        match kind {
            TxKind::Msg | TxKind::Tagged => self.cntr.send.as_ref(),
            TxKind::Write | TxKind::Atomic(AtomicKind::Write) => self.cntr.write.as_ref(),
            TxKind::Read | TxKind::Atomic(_) => self.cntr.read.as_ref(),
        }
    }

    /// Finishes a transmit operation successfully.
    pub fn complete_tx(&mut self, id: u64) {
        let Some(t) = self.txes.remove(id) else {
            return;
        };
        if t.flags & FI_COMPLETION != 0
            && let Some(cq) = &self.tx_cq
        {
            cq.push(CqEntry {
                op_context: t.context,
                flags: Self::cq_flags(t.kind),
                len: t.len,
                src_addr: FI_ADDR_NOTAVAIL,
                ..Default::default()
            });
        }
        if let Some(c) = self.tx_cntr(t.kind) {
            c.complete(t.len);
        }
    }

    /// Fails a transmit operation (error completions are always reported, fi_cq(3)).
    pub fn fail_tx(&mut self, id: u64, err: Errno, prov_errno: i32) {
        if let Some(t) = self.txes.get_mut(id)
            && t.lent
            && t.in_flight > 0
        {
            // The device still sends from the application's buffer, which the application may
            // free once told: the error waits until the last of those packets is done, and
            // nothing more goes out.
            t.failed.get_or_insert((err, prov_errno));
            t.window = 0;
            t.queued = t.len;
            return;
        }
        let Some(t) = self.txes.remove(id) else {
            return;
        };
        let (err, prov_errno) = t.failed.unwrap_or((err, prov_errno));
        if let Some(cq) = &self.tx_cq {
            let mut e = CqErrEntry::new(t.context, Self::cq_flags(t.kind), err);
            e.prov_errno = prov_errno;
            e.tag = t.tag;
            cq.push_err(e);
        }
        if let Some(c) = self.tx_cntr(t.kind) {
            c.fail();
        }
    }

    pub fn source_id(&self, fi_addr: u64) -> u64 {
        match &self.av {
            Some(av) if fi_addr != FI_ADDR_NOTAVAIL => av.source_id(fi_addr),
            _ => FI_ADDR_NOTAVAIL,
        }
    }
}

impl Inner {
    /// Nothing of ours is in the device, it has given nothing for `DEVICE_QUIET`, and the
    /// watcher has not seen it readable (or, unwatched, it was looked at less than
    /// `QUIET_POLL_PERIOD` ago): this progress call may skip it. (Most calls skip before the
    /// lock: `Quiet::skip`.)
    fn device_quiet(&mut self) -> bool {
        if !self.dev_idle
            || !self.txes.is_empty()
            || !self.rxes.is_empty()
            || !self.queued.is_empty()
        {
            return false;
        }
        if self.watching {
            if !self.quiet.take_input() {
                return true;
            }
            // Its watch ended: watched again when the lock is released, if still quiet.
            self.watching = false;
            return false;
        }
        self.dev_polled.elapsed() < QUIET_POLL_PERIOD
    }
}

// ---- peers ----

impl Inner {
    /// After entries were removed from the AV (`Av::removed_since`), what each peer's `fi_addr`
    /// is now: an index may since name another address (fi_av(3) lets inserts reuse removed
    /// ones), and a removed peer is no longer a source anyone asked for.
    pub fn sync_av(&mut self) {
        let Some(av) = &self.av else { return };
        if !av.removed_since(&mut self.av_removals) {
            return;
        }
        self.by_fi.clear();
        for (p, peer) in self.peers.iter_mut().enumerate() {
            peer.fi_addr = av
                .reverse(&peer.addr.to_bytes())
                .unwrap_or(FI_ADDR_NOTAVAIL);
            if peer.fi_addr != FI_ADDR_NOTAVAIL {
                self.by_fi.insert(peer.fi_addr, p);
            }
        }
    }

    /// The peer of an AV entry.
    pub fn peer_for(&mut self, fi_addr: u64) -> Result<usize> {
        self.sync_av();
        if let Some(&p) = self.by_fi.get(&fi_addr) {
            return Ok(p);
        }
        let av = self.av.as_ref().ok_or(Errno::NOAV)?;
        let bytes = av.lookup(fi_addr)?;
        let addr = EfaAddr::from_bytes(&bytes).ok_or(Errno::INVAL)?;
        let p = self.peer_by_addr(addr);
        self.peers[p].fi_addr = fi_addr;
        self.by_fi.insert(fi_addr, p);
        Ok(p)
    }

    /// The peer at a raw address (created on first contact).
    pub fn peer_by_addr(&mut self, addr: EfaAddr) -> usize {
        if let Some(&p) = self.by_addr.get(&addr) {
            return p;
        }
        if let Some(p) = self.learn_qkey(addr) {
            return p;
        }
        let fi_addr = self
            .av
            .as_ref()
            .and_then(|av| av.reverse(&addr.to_bytes()))
            .unwrap_or(FI_ADDR_NOTAVAIL);
        self.peers.push(Peer::new(addr, fi_addr));
        let p = self.peers.len() - 1;
        self.by_addr.insert(addr, p);
        if fi_addr != FI_ADDR_NOTAVAIL {
            self.by_fi.insert(fi_addr, p);
        }
        p
    }

    /// A first packet from `addr`: if the application inserted that peer by node and service
    /// (QKEY 0, see the `srd` module), it is this one. The peer and its AV entry take the
    /// full address, so that sources, `fi_av_lookup` and later inserts of it agree.
    pub(super) fn learn_qkey(&mut self, addr: EfaAddr) -> Option<usize> {
        if addr.qkey == 0 {
            return None;
        }
        let unkeyed = addr.unkeyed();
        let p = self.by_addr.remove(&unkeyed)?;
        self.peers[p].addr = addr;
        self.by_addr.insert(addr, p);
        if let Some(av) = &self.av {
            av.resolve_entry(&unkeyed.to_bytes(), &addr.to_bytes());
        }
        crate::fi_info!(
            "efa",
            crate::core::log::Subsys::Av,
            "{} answered as {}",
            unkeyed.straddr(),
            addr.straddr()
        );
        Some(p)
    }
}

// ---- packets out ----

impl Inner {
    pub fn buf(&mut self) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.resize(HEADROOM + self.mtu, 0);
        b
    }

    /// Whether bulk data must wait for completions (`BULK_SEND_BYTES`).
    pub fn bulk_full(&self) -> bool {
        self.sent.len() + self.queued.len() >= bulk_send_cap(self.mtu)
    }

    pub fn park(&mut self, p: Parked) {
        if !self.parked.contains(&p) {
            self.parked.push_back(p);
        }
    }

    pub fn recycle(&mut self, b: Vec<u8>) {
        if self.pool.len() < 256 {
            self.pool.push(b);
        }
    }

    /// Posts a packet (`buf[HEADROOM..HEADROOM + len]`) to a peer, or queues it if the device
    /// or the peer cannot take it now.
    pub fn send_pkt(
        &mut self,
        peer: usize,
        buf: Vec<u8>,
        len: usize,
        owner: Owner,
        payload: usize,
    ) {
        self.send_pkt_tail(peer, buf, len, IoVec::EMPTY, owner, payload);
    }

    /// `send_pkt` of a packet whose payload ends in `tail`, application memory sent from where
    /// it lies (`Txe::tail`).
    pub fn send_pkt_tail(
        &mut self,
        peer: usize,
        buf: Vec<u8>,
        len: usize,
        tail: IoVec,
        owner: Owner,
        payload: usize,
    ) {
        self.peers[peer].contacted = true;
        let q = Queued {
            peer,
            buf,
            len,
            sent: Sent {
                owner,
                peer,
                payload,
                len,
                tail,
            },
        };
        if !self.queued.is_empty() || self.peers[peer].backoff_until.is_some() {
            self.queued.push_back(q);
            return;
        }
        self.post_queued(q);
    }

    fn post_queued(&mut self, q: Queued) {
        let dest = self.peers[q.peer].addr;
        let tail = q.sent.tail;
        let wr = self.sent.insert(q.sent);
        match self.dev.post_send(dest, q.buf, q.len, tail, wr) {
            Ok(()) => {}
            Err((e, buf)) => {
                let sent = self.sent.remove(wr).unwrap_or(Sent {
                    owner: Owner::Ctrl,
                    peer: q.peer,
                    payload: 0,
                    len: q.len,
                    tail,
                });
                if e == Errno::AGAIN {
                    self.queued.push_front(Queued {
                        peer: q.peer,
                        buf,
                        len: q.len,
                        sent,
                    });
                } else {
                    self.pkt_failed(sent, e, 0);
                    self.recycle(buf);
                }
            }
        }
    }

    /// Retries queued packets (after device completions freed room or a back-off ended).
    pub fn flush_queued(&mut self) {
        let now = Instant::now();
        let mut rest = VecDeque::new();
        while let Some(q) = self.queued.pop_front() {
            let peer = &mut self.peers[q.peer];
            if peer.dead {
                let sent = q.sent;
                self.pkt_failed(sent, Errno::CONNABORTED, 13);
                continue;
            }
            if let Some(t) = peer.backoff_until {
                if t > now {
                    rest.push_back(q);
                    continue;
                }
                peer.backoff_until = None;
            }
            let dest = peer.addr;
            let tail = q.sent.tail;
            let wr = self.sent.insert(q.sent);
            if let Err((e, buf)) = self.dev.post_send(dest, q.buf, q.len, tail, wr) {
                let sent = self.sent.remove(wr).unwrap_or(Sent {
                    owner: Owner::Ctrl,
                    peer: q.peer,
                    payload: 0,
                    len: q.len,
                    tail,
                });
                if e == Errno::AGAIN {
                    rest.push_back(Queued {
                        peer: q.peer,
                        buf,
                        len: q.len,
                        sent,
                    });
                    rest.extend(self.queued.drain(..));
                    break;
                }
                self.pkt_failed(sent, e, 0);
            }
        }
        self.queued = rest;
    }

    /// A packet could not be delivered.
    pub fn pkt_failed(&mut self, sent: Sent, err: Errno, prov_errno: i32) {
        match sent.owner {
            Owner::Tx(id) => {
                // This packet is done with, delivered or not.
                if let Some(t) = self.txes.get_mut(id) {
                    t.in_flight = t.in_flight.saturating_sub(1);
                }
                self.fail_tx(id, err, prov_errno)
            }
            Owner::Rx(id) => {
                self.rxes.remove(id);
            }
            Owner::Ctrl => {}
        }
    }

    /// The connid we put in packets to peers that know us (our QKEY).
    pub fn connid(&self) -> u32 {
        self.dev.addr().qkey
    }

    /// Sends our HANDSHAKE to a peer once (efa-reference §2).
    pub fn handshake(&mut self, peer: usize) {
        if self.peers[peer].hs_sent || self.peers[peer].dead {
            return;
        }
        self.peers[peer].hs_sent = true;
        let mut b = self.buf();
        let connid = self.connid();
        let n = pkt::write_handshake(&mut b[HEADROOM..], EXTRA_INFO, connid, 0);
        self.send_pkt(peer, b, n, Owner::Ctrl, 0);
    }

    /// Sends a request packet: `data` (from the op's iov at `off`, `data_len` bytes) after the
    /// headers. Returns false (nothing sent) if the headers do not fit.
    #[allow(clippy::too_many_arguments)]
    pub fn send_req(
        &mut self,
        id: u64,
        ty: u8,
        flags: u16,
        h: &ReqHdr,
        rma: &[RmaIov],
        off: usize,
        data_len: usize,
        extra: &[u8],
    ) {
        let Some(t) = self.txes.get(id) else { return };
        let peer = t.peer;
        let cq_data = t.cq_data.filter(|_| matches!(ty, pkt::EAGER_MSGRTM..=pkt::LONGCTS_RTW | pkt::DC_EAGER_MSGRTM..=pkt::DC_LONGCTS_RTW));
        let hs = self.peers[peer].hs_received;
        let me = self.dev.addr();
        let connid = self.connid();
        let mut b = self.buf();
        let hdr = pkt::write_req(
            &mut b[HEADROOM..],
            ty,
            flags,
            h,
            rma,
            (!hs).then_some(&me),
            cq_data,
            hs.then_some(connid),
        );
        let Some(t) = self.txes.get_mut(id) else {
            return;
        };
        t.queued = t.queued.max(off + data_len);
        t.in_flight += 1;
        // The payload ends the packet unless `extra` follows it.
        let piece = (data_len >= ZERO_COPY_MIN && extra.is_empty())
            .then(|| t.source_piece(off, data_len))
            .flatten();
        if let Some(tail) = piece {
            t.lent = true;
            self.send_pkt_tail(peer, b, hdr, tail, Owner::Tx(id), data_len);
            return;
        }
        if data_len > 0 {
            t.copy_out(off, &mut b[HEADROOM + hdr..HEADROOM + hdr + data_len]);
        }
        b[HEADROOM + hdr + data_len..HEADROOM + hdr + data_len + extra.len()]
            .copy_from_slice(extra);
        self.send_pkt(
            peer,
            b,
            hdr + data_len + extra.len(),
            Owner::Tx(id),
            data_len,
        );
    }

    /// Header bytes of a request of type `ty` to `peer` (raw address until the handshake).
    pub fn req_overhead(&self, peer: usize, ty: u8, rma: usize, cq_data: bool) -> usize {
        let hs = self.peers[peer].hs_received;
        pkt::req_len(ty, rma, !hs, cq_data, hs)
    }
}

// ---- starting operations ----

impl Inner {
    /// Sends a message operation (eager, medium or long-CTS).
    pub fn start_msg(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let (peer, len, tagged, dc, cq) = (
            t.peer,
            t.len,
            t.kind == TxKind::Tagged,
            t.await_response,
            t.cq_data.is_some(),
        );
        let tag_ty = |msg: u8| if tagged { msg + 1 } else { msg };
        let mut flags = pkt::REQ_MSG;
        if tagged {
            flags = pkt::REQ_TAGGED;
        }
        let (msg_id, tag) = (t.msg_id, t.tag);
        let send_id = tx_wire(id);
        let eager_ty = tag_ty(if dc {
            pkt::DC_EAGER_MSGRTM
        } else {
            pkt::EAGER_MSGRTM
        });
        let eager_room = self
            .mtu
            .saturating_sub(self.req_overhead(peer, eager_ty, 0, cq));
        if len <= eager_room {
            let h = ReqHdr {
                msg_id,
                tag,
                send_id,
                ..Default::default()
            };
            self.send_req(id, eager_ty, flags, &h, &[], 0, len, &[]);
            self.set_state(id, TxState::Sending);
            return;
        }
        if len <= self.knobs.max_medium {
            let ty = tag_ty(if dc {
                pkt::DC_MEDIUM_MSGRTM
            } else {
                pkt::MEDIUM_MSGRTM
            });
            let room = self
                .mtu
                .saturating_sub(self.req_overhead(peer, ty, 0, cq))
                .max(1);
            let mut off = 0;
            while off < len {
                let n = room.min(len - off);
                let h = ReqHdr {
                    msg_id,
                    tag,
                    send_id,
                    msg_length: len as u64,
                    seg_offset: off as u64,
                    ..Default::default()
                };
                self.send_req(id, ty, flags, &h, &[], off, n, &[]);
                off += n;
            }
            self.set_state(id, TxState::Sending);
            return;
        }
        let ty = tag_ty(if dc {
            pkt::DC_LONGCTS_MSGRTM
        } else {
            pkt::LONGCTS_MSGRTM
        });
        let room = self.mtu.saturating_sub(self.req_overhead(peer, ty, 0, cq));
        let h = ReqHdr {
            msg_id,
            tag,
            send_id,
            msg_length: len as u64,
            credit_request: self.knobs.tx_min_credits as u32,
            ..Default::default()
        };
        self.send_req(id, ty, flags, &h, &[], 0, room.min(len), &[]);
        self.set_state(id, TxState::WaitCts);
    }

    pub fn set_state(&mut self, id: u64, s: TxState) {
        if let Some(t) = self.txes.get_mut(id) {
            t.state = s;
        }
    }

    /// Data payload room in a CTSDATA packet.
    pub fn ctsdata_room(&self) -> usize {
        self.mtu.saturating_sub(32)
    }

    /// Sends CTSDATA for what the receiver granted.
    pub fn send_window(&mut self, id: u64) {
        let room = self.ctsdata_room().max(1);
        let connid = self.connid();
        loop {
            let full = self.bulk_full();
            let Some(t) = self.txes.get_mut(id) else {
                return;
            };
            if t.window == 0 || t.queued >= t.len {
                if t.queued >= t.len && t.state == TxState::WaitCts {
                    t.state = TxState::Sending;
                }
                return;
            }
            if full {
                self.park(Parked::Tx(id));
                return;
            }
            let n = room.min(t.window).min(t.len - t.queued);
            let off = t.queued;
            let (peer, recv_id) = (t.peer, t.recv_id);
            t.window -= n;
            t.queued += n;
            t.in_flight += 1;
            let piece = (n >= ZERO_COPY_MIN)
                .then(|| t.source_piece(off, n))
                .flatten();
            t.lent |= piece.is_some();
            let mut b = self.pool.pop().unwrap_or_default();
            b.resize(HEADROOM + self.mtu, 0);
            let hdr = pkt::write_ctsdata(&mut b[HEADROOM..], recv_id, n as u64, off as u64, connid);
            match piece {
                Some(tail) => self.send_pkt_tail(peer, b, hdr, tail, Owner::Tx(id), n),
                None => {
                    if let Some(t) = self.txes.get(id) {
                        t.copy_out(off, &mut b[HEADROOM + hdr..HEADROOM + hdr + n]);
                    }
                    self.send_pkt(peer, b, hdr + n, Owner::Tx(id), n);
                }
            }
        }
    }

    /// Sends an RMA write (after the handshake).
    pub fn start_write(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let (peer, len, cq) = (t.peer, t.len, t.cq_data.is_some());
        let rma = t.rma.clone();
        let send_id = tx_wire(id);
        // With error responses the target confirms every write (DC variants): a refused write
        // then reaches the initiator as an error completion.
        let dc = t.await_response;
        let eager_ty = if dc {
            pkt::DC_EAGER_RTW
        } else {
            pkt::EAGER_RTW
        };
        let room = self
            .mtu
            .saturating_sub(self.req_overhead(peer, eager_ty, rma.len(), cq));
        let flags = pkt::REQ_RMA;
        if len <= room {
            let h = ReqHdr {
                rma_iov_count: rma.len() as u32,
                send_id,
                ..Default::default()
            };
            self.send_req(id, eager_ty, flags, &h, &rma, 0, len, &[]);
            self.set_state(id, TxState::Sending);
            return;
        }
        let ty = if dc {
            pkt::DC_LONGCTS_RTW
        } else {
            pkt::LONGCTS_RTW
        };
        let room = self
            .mtu
            .saturating_sub(self.req_overhead(peer, ty, rma.len(), cq));
        let h = ReqHdr {
            rma_iov_count: rma.len() as u32,
            msg_length: len as u64,
            send_id,
            credit_request: self.knobs.tx_min_credits as u32,
            ..Default::default()
        };
        self.send_req(id, ty, flags, &h, &rma, 0, room.min(len), &[]);
        self.set_state(id, TxState::WaitCts);
    }

    /// Sends an RMA read request.
    pub fn start_read(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let len = t.len;
        let rma = t.rma.clone();
        let recv_id = tx_wire(id);
        // SHORT_RTR when the answer fits one READRSP (efa-reference §5), else LONGCTS_RTR with a
        // first window.
        let short = len + 24 <= self.mtu;
        let ty = if short {
            pkt::SHORT_RTR
        } else {
            pkt::LONGCTS_RTR
        };
        let window = if short {
            len
        } else {
            (self.knobs.tx_min_credits * self.ctsdata_room()).min(len)
        };
        let h = ReqHdr {
            rma_iov_count: rma.len() as u32,
            msg_length: len as u64,
            recv_id,
            recv_length: window as u64,
            ..Default::default()
        };
        self.send_req(id, ty, pkt::REQ_RMA, &h, &rma, 0, 0, &[]);
        if let Some(t) = self.txes.get_mut(id) {
            t.window = window;
            t.state = TxState::WaitResponse;
        }
    }

    /// Sends an atomic request (operand, then compare data, in the packet).
    pub fn start_atomic(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let TxKind::Atomic(kind) = t.kind else { return };
        let rma = t.rma.clone();
        let operand = t.operand.clone();
        let wire = tx_wire(id);
        let ty = match kind {
            AtomicKind::Write if t.await_response => pkt::DC_WRITE_RTA,
            AtomicKind::Write => pkt::WRITE_RTA,
            AtomicKind::Fetch => pkt::FETCH_RTA,
            AtomicKind::Compare => pkt::COMPARE_RTA,
        };
        let h = ReqHdr {
            msg_id: t.msg_id,
            rma_iov_count: rma.len() as u32,
            datatype: t.datatype,
            atomic_op: t.atomic_op,
            recv_id: wire,
            send_id: wire,
            ..Default::default()
        };
        self.send_req(id, ty, pkt::REQ_ATOMIC, &h, &rma, 0, 0, &operand);
        let await_response = ty != pkt::WRITE_RTA;
        self.set_state(
            id,
            if await_response {
                TxState::WaitResponse
            } else {
                TxState::Sending
            },
        );
    }

    /// Starts an operation, or parks it until the peer's handshake arrives (one-sided ones).
    pub fn start(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let (kind, peer) = (t.kind, t.peer);
        let one_sided = matches!(kind, TxKind::Write | TxKind::Read | TxKind::Atomic(_));
        if one_sided && !self.peers[peer].hs_received {
            // efa-reference §2: a zero-byte EAGER_RTW makes the peer answer with its handshake
            // without disturbing message order.
            if !self.peers[peer].contacted {
                let me = self.dev.addr();
                let mut b = self.buf();
                let n = pkt::write_req(
                    &mut b[HEADROOM..],
                    pkt::EAGER_RTW,
                    pkt::REQ_RMA,
                    &ReqHdr::default(),
                    &[],
                    Some(&me),
                    None,
                    None,
                );
                self.send_pkt(peer, b, n, Owner::Ctrl, 0);
            }
            self.set_state(id, TxState::Handshake);
            self.peers[peer].waiting.push_back(id);
            return;
        }
        match kind {
            TxKind::Msg | TxKind::Tagged => self.start_msg(id),
            TxKind::Write => {
                let dc = self.peers[peer].error_responses();
                if let Some(t) = self.txes.get_mut(id) {
                    t.await_response |= dc;
                }
                self.start_write(id)
            }
            TxKind::Read => self.start_read(id),
            TxKind::Atomic(_) => {
                let dc = self.peers[peer].error_responses();
                if let Some(t) = self.txes.get_mut(id) {
                    t.await_response |= dc;
                }
                self.start_atomic(id)
            }
        }
    }

    /// A transmit op may be complete: all its packets done and (if it waits for one) the
    /// response arrived.
    pub fn maybe_complete_tx(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        if let Some((err, prov_errno)) = t.failed {
            if t.in_flight == 0 {
                self.fail_tx(id, err, prov_errno);
            }
            return;
        }
        let sent_all = t.done >= t.len && t.in_flight == 0 && t.queued >= t.len;
        let ready = match t.kind {
            TxKind::Read => t.response && t.got >= t.len,
            TxKind::Atomic(AtomicKind::Write) if !t.await_response => t.in_flight == 0,
            TxKind::Atomic(_) => t.response,
            _ => sent_all && (!t.await_response || t.response),
        };
        if ready && t.state != TxState::Handshake {
            if t.inject && t.flags & FI_COMPLETION == 0 {
                // Injected operations complete silently but still count.
                let kind = t.kind;
                let len = t.len;
                self.txes.remove(id);
                if let Some(c) = self.tx_cntr(kind) {
                    c.complete(len);
                }
                return;
            }
            self.complete_tx(id);
        }
    }
}

// ---- posting (application calls) ----

impl RdmEndpoint {
    fn check(&self, g: &Inner, iov: &[IoVec]) -> Result<()> {
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if iov.len() > MAX_IOV {
            return Err(Errno::INVAL);
        }
        Ok(())
    }

    fn new_txe(
        kind: TxKind,
        peer: usize,
        context: usize,
        flags: u64,
        iov: &[IoVec],
        len: usize,
    ) -> Txe {
        Txe {
            kind,
            peer,
            context,
            flags,
            iov: iov.to_vec(),
            len,
            tag: 0,
            cq_data: None,
            msg_id: 0,
            rma: Vec::new(),
            queued: 0,
            done: 0,
            in_flight: 0,
            window: 0,
            recv_id: 0,
            await_response: false,
            response: false,
            got: 0,
            datatype: 0,
            atomic_op: 0,
            operand: Vec::new(),
            result: Vec::new(),
            state: TxState::Sending,
            inject: false,
            owned: Vec::new(),
            lent: false,
            failed: None,
        }
    }

    /// Copies inject data so that the application's buffer is free on return (fi_msg(3)).
    fn inject_copy(t: &mut Txe, iov: &[IoVec]) {
        t.owned = vec![0u8; iov_len(iov)];
        gather(iov, 0, &mut t.owned);
        t.iov.clear();
        t.inject = true;
    }

    pub(super) fn post_send(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        if (tagged && self.caps & FI_TAGGED == 0) || (!tagged && self.caps & FI_MSG == 0) {
            return Err(Errno::NOSYS);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let len = iov_len(op.iov);
        let mut g = self.lock();
        self.check(&g, op.iov)?;
        // fi_inject and the FI_INJECT flag (on the call or in op_flags) alike.
        if flags & FI_INJECT != 0 && len > super::inject_size(g.mtu) {
            return Err(Errno::MSGSIZE);
        }
        if g.txes.len() >= g.knobs.tx_size.max(1) * 4 {
            return Err(Errno::AGAIN);
        }
        let peer = g.peer_for(op.addr)?;
        if let Some(shm) = self.route(&mut g, peer) {
            drop(g);
            return shm.send(op, tagged);
        }
        if g.peers[peer].dead {
            return Err(Errno::CONNABORTED);
        }
        let inject = flags & FI_INJECT != 0;
        let mut t = Self::new_txe(
            if tagged { TxKind::Tagged } else { TxKind::Msg },
            peer,
            op.context,
            flags,
            op.iov,
            len,
        );
        if inject {
            Self::inject_copy(&mut t, op.iov);
        }
        t.tag = op.tag;
        t.cq_data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(op.data);
        t.await_response = flags & FI_DELIVERY_COMPLETE != 0 && !inject;
        t.msg_id = g.peers[peer].next_msg_id;
        g.peers[peer].next_msg_id = next_msg_id(t.msg_id);
        let id = g.txes.insert(t);
        g.start(id);
        self.posted(&mut g, id);
        Ok(())
    }

    pub(super) fn post_rma(&self, op: &RmaOp<'_>, read: bool) -> Result<()> {
        if self.caps & FI_RMA == 0 {
            return Err(Errno::NOSYS);
        }
        if op.rma_iov.len() != 1 {
            // rma_iov_limit is 1 (efa-reference §10).
            return Err(Errno::INVAL);
        }
        let len = iov_len(op.iov);
        if op.rma_iov[0].len != len {
            return Err(Errno::INVAL);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let mut g = self.lock();
        self.check(&g, op.iov)?;
        // fi_inject and the FI_INJECT flag (on the call or in op_flags) alike.
        if flags & FI_INJECT != 0 && len > super::inject_size(g.mtu) {
            return Err(Errno::MSGSIZE);
        }
        let peer = g.peer_for(op.addr)?;
        if let Some(shm) = self.route(&mut g, peer) {
            drop(g);
            return if read { shm.read(op) } else { shm.write(op) };
        }
        if g.peers[peer].dead {
            return Err(Errno::CONNABORTED);
        }
        let inject = !read && flags & FI_INJECT != 0;
        let mut t = Self::new_txe(
            if read { TxKind::Read } else { TxKind::Write },
            peer,
            op.context,
            flags,
            op.iov,
            len,
        );
        if inject {
            Self::inject_copy(&mut t, op.iov);
        }
        t.rma = op
            .rma_iov
            .iter()
            .map(|r| RmaIov {
                addr: r.addr,
                len: r.len as u64,
                key: r.key,
            })
            .collect();
        t.cq_data = (!read && flags & FI_REMOTE_CQ_DATA != 0).then_some(op.data);
        t.await_response = flags & FI_DELIVERY_COMPLETE != 0 && !read;
        let id = g.txes.insert(t);
        g.start(id);
        self.posted(&mut g, id);
        Ok(())
    }

    pub(super) fn post_atomic(&self, op: &AtomicOp<'_>) -> Result<()> {
        if self.caps & FI_ATOMIC == 0 {
            return Err(Errno::NOSYS);
        }
        if !crate::util::atomic::valid(op.kind, op.datatype, op.op) {
            return Err(Errno::OPNOTSUPP);
        }
        let size = crate::util::atomic::datatype_size(op.datatype).ok_or(Errno::INVAL)?;
        if op.rma_ioc.len() != 1 || op.iov.len() > MAX_IOV {
            return Err(Errno::INVAL);
        }
        let count = op.rma_ioc[0].count;
        let len = count.checked_mul(size).ok_or(Errno::INVAL)?;
        let reads_only = op.kind == AtomicKind::Fetch && op.op == FI_ATOMIC_READ;
        if (!reads_only && iov_len(op.iov) != len)
            || (op.kind == AtomicKind::Compare && iov_len(op.compare) != len)
            || (op.kind != AtomicKind::Write && iov_len(op.result) != len)
        {
            return Err(Errno::INVAL);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let mut g = self.lock();
        self.check(&g, op.iov)?;
        if len > super::max_atomic_bytes(g.mtu)
            || flags & FI_INJECT != 0 && len > super::inject_size(g.mtu)
        {
            return Err(Errno::MSGSIZE);
        }
        let peer = g.peer_for(op.addr)?;
        if let Some(shm) = self.route(&mut g, peer) {
            drop(g);
            return shm.atomic(op);
        }
        if g.peers[peer].dead {
            return Err(Errno::CONNABORTED);
        }
        let mut operand = vec![0u8; if reads_only { 0 } else { len }];
        gather(op.iov, 0, &mut operand);
        if op.kind == AtomicKind::Compare {
            let mut c = vec![0u8; len];
            gather(op.compare, 0, &mut c);
            operand.extend(c);
        }
        let mut t = Self::new_txe(TxKind::Atomic(op.kind), peer, op.context, flags, &[], len);
        t.rma = vec![RmaIov {
            addr: op.rma_ioc[0].addr,
            len: count as u64,
            key: op.rma_ioc[0].key,
        }];
        t.datatype = op.datatype;
        t.atomic_op = op.op;
        t.operand = operand;
        t.result = op.result.to_vec();
        t.inject = flags & FI_INJECT != 0;
        t.owned = Vec::new();
        t.await_response = flags & FI_DELIVERY_COMPLETE != 0;
        // Atomics share the message order (efa-reference §4).
        let p = &mut g.peers[peer];
        t.msg_id = p.next_msg_id;
        p.next_msg_id = next_msg_id(t.msg_id);
        let id = g.txes.insert(t);
        g.start(id);
        self.posted(&mut g, id);
        Ok(())
    }
}

// ---- progress ----

impl RdmEndpoint {
    /// After a post. An operation whose packets are all handed to the device (an eager or
    /// medium message or write) skips the device poll: a poll is a system call (half a
    /// microsecond on loopback) that would delay its packets, which leave when the lock is
    /// released (`Locked`'s flush), and what it finds waits for the next CQ read anyway
    /// (fi_pingpong's 8-byte half round trip over SRD: 8.6 -> 6.8 us). A bulk operation, which
    /// waits for its peer's answers (CTS, read data, handshake), polls: taking them while the
    /// application is still posting keeps data flowing (1 MiB writes ran 20 % slower without).
    fn posted(&self, g: &mut Inner, id: u64) {
        if g.txes.get(id).is_none_or(|t| t.state == TxState::Sending) {
            Self::replenish_rx(g);
        } else {
            self.progress_locked(g);
        }
    }

    /// Keeps `rx_target` receive buffers posted.
    fn replenish_rx(g: &mut Inner) {
        while g.posted_rx < g.rx_target {
            let b = g.buf();
            match g.dev.post_recv(b, 0) {
                Ok(()) => g.posted_rx += 1,
                Err((_, b)) => {
                    g.recycle(b);
                    break;
                }
            }
        }
    }

    /// Keeps receive buffers posted, polls the device, handles what completed.
    pub(super) fn progress_locked(&self, g: &mut Inner) {
        if !g.enabled {
            return;
        }
        // Arrivals report their sender's index as the AV has it now.
        g.sync_av();
        Self::replenish_rx(g);
        let now = Instant::now();
        g.dev_polled = now;
        g.polled = true;
        g.dev_idle = now.duration_since(g.dev_heard) >= DEVICE_QUIET;
        let mut received = 0;
        for _ in 0..4 {
            let mut comps = core::mem::take(&mut g.comps);
            comps.clear();
            g.dev.poll(&mut comps, POLL_BATCH);
            let n = comps.len();
            if n > 0 {
                g.dev_heard = now;
                g.dev_idle = false;
            }
            for c in comps.drain(..) {
                match c {
                    Completion::Recv {
                        buf, off, len, src, ..
                    } => {
                        g.posted_rx -= 1;
                        received += 1;
                        self.handle_packet(g, src, &buf[off..off + len]);
                        // Repost the same buffer at once.
                        match g.dev.post_recv(buf, 0) {
                            Ok(()) => g.posted_rx += 1,
                            Err((_, b)) => g.recycle(b),
                        }
                    }
                    Completion::Send { wr_id, status, buf } => {
                        self.send_done(g, wr_id, status, buf)
                    }
                }
            }
            g.comps = comps;
            if !g.queued.is_empty() {
                g.flush_queued();
            }
            if n < POLL_BATCH {
                break;
            }
        }
        // Completions freed room: parked bulk senders go on, in turn (one that fills the
        // room again parks at the back).
        while !g.bulk_full()
            && let Some(p) = g.parked.pop_front()
        {
            match p {
                Parked::Tx(id) => g.send_window(id),
                Parked::Read(id) => self.send_read_data(g, id),
            }
        }
        // Half the posted buffers filled in one pass: the next burst may find none (the
        // transport then refuses datagrams with RNR and the sender backs off). Post more.
        if received * 2 >= g.rx_target && g.rx_target < g.rx_max {
            g.rx_target = (g.rx_target * 2).min(g.rx_max);
        }
    }

    fn send_done(
        &self,
        g: &mut Inner,
        wr_id: u64,
        status: core::result::Result<(), DevError>,
        buf: Vec<u8>,
    ) {
        let Some(sent) = g.sent.remove(wr_id) else {
            g.recycle(buf);
            return;
        };
        match status {
            Ok(()) => {
                g.recycle(buf);
                match sent.owner {
                    Owner::Tx(id) => {
                        if let Some(t) = g.txes.get_mut(id) {
                            t.in_flight = t.in_flight.saturating_sub(1);
                            t.done += sent.payload;
                        }
                        g.maybe_complete_tx(id);
                    }
                    Owner::Rx(id) => {
                        // A read we answered: done once everything went out.
                        if let Some(r) = g.rxes.get(id)
                            && let RxKind::Read { sent: s, .. } = r.kind
                            && s >= r.total
                        {
                            g.rxes.remove(id);
                        }
                    }
                    Owner::Ctrl => {}
                }
            }
            Err(DevError::Rnr) if g.rm_enabled => {
                // efa-reference §6: resource management enabled — queue the packet again and
                // back off from this peer.
                let p = sent.peer;
                let peer = &mut g.peers[p];
                peer.backoff_us = if peer.backoff_us == 0 {
                    if g.knobs.timeout_interval_us > 0 {
                        g.knobs.timeout_interval_us
                    } else {
                        40 + crate::sys::random::u64() % 81
                    }
                } else {
                    (peer.backoff_us * 2).min(g.knobs.max_timeout_us.max(1))
                };
                peer.backoff_until =
                    Some(Instant::now() + std::time::Duration::from_micros(peer.backoff_us));
                let len = sent.len;
                g.queued.push_back(Queued {
                    peer: p,
                    buf,
                    len,
                    sent,
                });
            }
            Err(e) => {
                g.recycle(buf);
                let p = sent.peer;
                if e == DevError::Unreachable {
                    self.peer_died(g, p);
                }
                g.pkt_failed(sent, e.errno(), e.prov_errno());
            }
        }
    }

    /// A peer stopped answering: every operation waiting on it fails (efa-reference §6).
    pub(super) fn peer_died(&self, g: &mut Inner, p: usize) {
        if g.peers[p].dead {
            return;
        }
        g.peers[p].dead = true;
        let addr = g.peers[p].addr;
        g.dev.abandon(addr);
        for id in g.txes.ids_where(|t| t.peer == p) {
            g.fail_tx(id, Errno::CONNABORTED, 13);
        }
        let rx_cq = g.rx_cq.clone();
        for id in g.rxes.ids_where(|r| r.peer == p) {
            if let Some(r) = g.rxes.remove(id)
                && let RxKind::Recv(recv) = r.kind
                && let Some(cq) = &rx_cq
            {
                let mut e = CqErrEntry::new(
                    recv.context,
                    FI_RECV | if r.tagged { FI_TAGGED } else { FI_MSG },
                    Errno::CONNABORTED,
                );
                e.prov_errno = 13;
                cq.push_err(e);
            }
        }
        let rxes = &g.rxes;
        g.rxq.lock().drain_unexpected(|u| match u.payload {
            Pending::Foreign(id) => rxes.get(id).is_none_or(|r| r.peer == p),
            _ => false,
        });
        g.peers[p].waiting.clear();
    }
}

impl Progress for RdmEndpoint {
    fn progress(&self) {
        if let Some(shm) = self.shm() {
            shm.progress();
            if self.quiet.skip() {
                return;
            }
        }
        // Another thread holding the lock is progressing already.
        let Ok(g) = self.inner.try_lock() else {
            return;
        };
        // Through `Locked`, so what this pass answered leaves when it ends.
        let mut g = Locked(g);
        if self.shm().is_some() && g.device_quiet() {
            return;
        }
        self.progress_locked(&mut g);
    }

    fn idle_hint(&self) -> Option<Arc<dyn Idle>> {
        Some(self.quiet.clone())
    }

    /// Asked right before a wait on the fd (CQ and counter waits, `fi_trywait`): the device
    /// arms its timer then, so that a retransmission or the end of a back-off wakes the waiter.
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        let fd = self.wait_fd?;
        if let Ok(mut g) = self.inner.try_lock() {
            g.dev.prepare_wait();
        }
        Some(fd)
    }
    /// The device's fd does not tell of what arrives through shm, which has none.
    fn wait_fd_complete(&self) -> bool {
        self.shm().is_none()
    }
}

impl RdmEndpoint {
    /// fi_ep_bind(3) on this endpoint itself.
    fn bind_own(&self, g: &mut Inner, target: Bind, flags: u64) -> Result<()> {
        let me: Weak<dyn Progress> = self.me.clone();
        match target {
            Bind::Av(av) => {
                if flags != 0 {
                    return Err(Errno::BADFLAGS);
                }
                if av.codec().addr_format() != FI_ADDR_EFA {
                    return Err(Errno::INVAL);
                }
                g.av = Some(av);
            }
            Bind::Cq(cq) => {
                let (tx, rx) = self.flags.bind_cq(flags)?;
                cq.add_source(me);
                cq.set_prov_strerror(super::super::prov_strerror);
                if tx {
                    g.tx_cq = Some(cq.clone());
                }
                if rx {
                    g.rx_cq = Some(cq);
                }
            }
            Bind::Cntr(c) => {
                // Remote counters need FI_RMA_EVENT, which efa does not offer (§5).
                let known = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
                if flags & !known != 0 || flags == 0 {
                    return Err(Errno::BADFLAGS);
                }
                c.add_source(me);
                if flags & FI_SEND != 0 {
                    g.cntr.send = Some(c.clone());
                }
                if flags & FI_RECV != 0 {
                    g.cntr.recv = Some(c.clone());
                }
                if flags & FI_READ != 0 {
                    g.cntr.read = Some(c.clone());
                }
                if flags & FI_WRITE != 0 {
                    g.cntr.write = Some(c);
                }
            }
            Bind::Eq(_) => return Err(Errno::NOSYS),
        }
        Ok(())
    }
}

impl Endpoint for RdmEndpoint {
    fn bind(&self, target: Bind, flags: u64) -> Result<()> {
        let mut g = self.lock();
        if g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        self.bind_own(&mut g, target.clone(), flags)?;
        // What we accepted, our shm endpoint takes as well (it reports into the same objects).
        if let Some(shm) = &self.shm
            && let Err(e) = shm.bind(target, flags)
        {
            crate::fi_warn!(
                "efa",
                crate::core::log::Subsys::EpCtrl,
                "shm endpoint refused a binding ({e}): local peers go through the device"
            );
            self.shm_permitted.store(false, Ordering::Release);
        }
        Ok(())
    }

    fn enable(&self) -> Result<()> {
        let mut g = self.lock();
        if g.enabled {
            return Ok(());
        }
        if g.av.is_none() {
            return Err(Errno::NOAV);
        }
        if g.tx_cq.is_none() && g.rx_cq.is_none() && g.cntr.send.is_none() && g.cntr.recv.is_none()
        {
            return Err(Errno::NOCQ);
        }
        if let Some(shm) = &self.shm
            && self.shm_permitted.load(Ordering::Acquire)
        {
            match shm.enable() {
                Ok(()) => {
                    self.shm_on.store(true, Ordering::Release);
                    g.shm_on = true;
                }
                Err(e) => crate::fi_warn!(
                    "efa",
                    crate::core::log::Subsys::EpCtrl,
                    "no shm endpoint ({e}): local peers go through the device"
                ),
            }
        }
        g.enabled = true;
        super::ack_timer::register(g.acks_kept.clone(), self.me.clone());
        self.progress_locked(&mut g);
        Ok(())
    }
    fn getname(&self) -> Result<Vec<u8>> {
        Ok(self.lock().dev.addr().to_bytes().to_vec())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn getopt(&self, level: i32, name: i32, val: &mut [u8], needed: &mut usize) -> Result<usize> {
        super::getopt(self, level, name, val, needed)
    }

    fn setopt(&self, level: i32, name: i32, val: &[u8]) -> Result<()> {
        super::setopt(self, level, name, val)
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let g = self.lock();
        g.rxq.cancel_into(context, g.rx_cq.as_deref())
    }

    fn tx_size_left(&self) -> Result<usize> {
        let g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        Ok((g.knobs.tx_size * 4).saturating_sub(g.txes.len()))
    }

    fn rx_size_left(&self) -> Result<usize> {
        let g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        Ok(g.knobs.rx_size.saturating_sub(g.rxq.lock().posted()))
    }

    fn recv(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        if self.prefix != 0 {
            let mut iov = [IoVec::EMPTY; PREFIXED_IOV_MAX];
            return self.post_recv(&op.without_prefix(self.prefix, &mut iov)?, tagged);
        }
        self.post_recv(op, tagged)
    }

    fn send(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        if self.prefix != 0 {
            let mut iov = [IoVec::EMPTY; PREFIXED_IOV_MAX];
            return self.post_send(&op.without_prefix(self.prefix, &mut iov)?, tagged);
        }
        self.post_send(op, tagged)
    }

    fn read(&self, op: &RmaOp<'_>) -> Result<()> {
        self.post_rma(op, true)
    }

    fn write(&self, op: &RmaOp<'_>) -> Result<()> {
        self.post_rma(op, false)
    }

    fn atomic(&self, op: &AtomicOp<'_>) -> Result<()> {
        self.post_atomic(op)
    }

    fn atomic_valid(&self, kind: AtomicKind, datatype: u32, op: u32) -> Result<usize> {
        if self.caps & FI_ATOMIC == 0 {
            return Err(Errno::NOSYS);
        }
        let mtu = self.lock().mtu;
        super::atomic_count(kind, datatype, op, mtu)
    }

    fn close(&self) -> Result<()> {
        let mut g = self.lock();
        g.enabled = false;
        g.shm_on = false;
        g.quiet.forget(g.dev.wait_fd());
        g.watching = false;
        if let Some(shm) = &self.shm {
            self.shm_on.store(false, Ordering::Release);
            shm.close()?;
        }
        // What arrived since the last poll is acknowledged, as a NIC acknowledges what lands
        // in its posted buffers, so that no sender retransmits to a closed queue pair until it
        // gives us up (and fails what it has pending to us) as unreachable.
        g.dev.service();
        g.dev.flush_all();
        // What the transport went through (FI_LOG_LEVEL=info): retransmissions, RNR, drops.
        crate::fi_info!(
            "efa",
            crate::core::log::Subsys::EpData,
            "endpoint closed; transport: {:?}",
            g.dev.stats()
        );
        Ok(())
    }
}
