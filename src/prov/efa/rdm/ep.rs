//! The RDM endpoint's state: the operations it carries (`Txe`, `Rxe`), the packets it owns
//! in the device, `Inner` and the flush when its lock is released, construction, and the
//! `Endpoint` trait (bind, enable, options; the posting calls lead to their files).
//!
//! The protocol's parts (efa-reference §1–§7) are beside it: `peer.rs` (peers, AV, handshake
//! §2, connid §7), `tx.rs` (sends §3, completion of transmit operations), `rma.rs` (writes,
//! reads and atomics we initiate, §5), `rx.rs` (receives, order §4), `target.rs` (remote
//! accesses to our memory, §5), `ctrl.rs` (control packets), and `progress.rs` (the device:
//! packets out, the poll loop, RNR back-off §6).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use super::ack_timer::{self, EndpointTimer};
use super::local::ShmRoutes;
use super::peer::Peer;
use super::pkt::RmaIov;
use super::progress::POLL_BATCH;
use super::quiet::Quiet;
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::efa::device::{Completion, DevError, Device, DeviceCaps, EfaAddr, Staging};
use crate::prov::efa::{EfaDomain, Knobs};
use crate::prov::shm::{Pending, ShmEndpoint};
use crate::sys::mem::{IoVec, gather};
use crate::util::av::Av;
use crate::util::cntr::Cntr;
use crate::util::cq::Cq;
use crate::util::ep::{AtomicKind, AtomicOp, MsgOp, OpFlags, PREFIXED_IOV_MAX, RmaOp};
use crate::util::hash::{FastMap, U64Map};
use crate::util::rxq::SharedRxQueue;
use crate::util::slab::Slab;
use crate::util::{Bind, Endpoint, Progress};

/// A device not polled for this long is serviced by the ack timer's thread (`Device::service`):
/// well inside a sender's shortest give-up time (`srd::Config::unreachable`, 5 s) and its
/// longest retransmission timeout (200 ms), far above the gaps of an application that polls.
pub(super) const UNATTENDED: Duration = Duration::from_millis(20);

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
    /// Sent as a long-read request: completes on the receiver's EOR (or goes on by
    /// long-CTS after its READ_NACK).
    pub longread: bool,
    /// Runt read: the bytes sent in its request packets (a READ_NACK's long-CTS goes on
    /// from there).
    pub runt: usize,
    /// Read: the end of the furthest bytes received (`Rxe::edge`).
    pub edge: usize,
}

impl Txe {
    /// Whether the operation cannot be ready yet because packets of it are still out: a
    /// message or write completes (or fails) only once all of them are, whatever else it
    /// waits for (`Inner::maybe_complete_tx`). Reads and atomics also complete on their
    /// response, so they never say so.
    pub fn awaits_packets(&self) -> bool {
        self.in_flight > 0 && matches!(self.kind, TxKind::Msg | TxKind::Tagged | TxKind::Write)
    }

    /// Copies `dst.len()` bytes of the operation's source data from offset `off`.
    pub fn copy_out(&self, off: usize, dst: &mut [u8]) {
        // Injected data is in `owned` once `detach_inject` took it; until then (within the
        // fi_inject call) it is still read from the application's iov.
        if self.inject && self.iov.is_empty() {
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

/// The vectors of finished operations, kept for the next ones: a message posted, sent and
/// completed otherwise allocates and frees its iov list, its injected copy and (receiving) its
/// matched receive, several times per message on the data path.
#[derive(Default)]
pub(super) struct Spare {
    iovs: Vec<Vec<IoVec>>,
    rmas: Vec<Vec<RmaIov>>,
    bytes: Vec<Vec<u8>>,
    // The boxes themselves are what is kept: `RxKind::Recv` holds one.
    #[allow(clippy::vec_box)]
    recvs: Vec<Box<crate::util::rxq::Recv>>,
}

impl Spare {
    /// Kept of each kind: a window of operations in flight.
    const KEEP: usize = 64;
    /// Injected copies larger than this are not kept (inject sizes are a few KiB).
    const KEEP_BYTES: usize = 16 << 10;
    /// Longer lists are not kept (iov counts are at most 4).
    const KEEP_LEN: usize = 16;

    /// A copy of `iov`.
    pub fn iov(&mut self, iov: &[IoVec]) -> Vec<IoVec> {
        let mut v = self.iovs.pop().unwrap_or_default();
        v.extend_from_slice(iov);
        v
    }

    /// An empty list of remote segments.
    pub fn rma(&mut self) -> Vec<RmaIov> {
        self.rmas.pop().unwrap_or_default()
    }

    /// `len` zeroed bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = self.bytes.pop().unwrap_or_default();
        v.resize(len, 0);
        v
    }

    /// `recv` in a box.
    pub fn recv(&mut self, recv: crate::util::rxq::Recv) -> Box<crate::util::rxq::Recv> {
        match self.recvs.pop() {
            Some(mut b) => {
                *b = recv;
                b
            }
            None => Box::new(recv),
        }
    }

    /// Keeps `v`, emptied, in `pool` unless it is unused, larger than `max` or the pool full.
    fn keep<T>(pool: &mut Vec<Vec<T>>, mut v: Vec<T>, max: usize) {
        if v.capacity() != 0 && v.capacity() <= max && pool.len() < Self::KEEP {
            v.clear();
            pool.push(v);
        }
    }

    /// What a finished transmit operation held.
    pub fn keep_txe(&mut self, mut t: Txe) {
        self.keep_txe_parts(&mut t);
    }

    /// `keep_txe` of an operation where it lies (`Slab::remove_with`): its vectors are taken.
    pub fn keep_txe_parts(&mut self, t: &mut Txe) {
        Self::keep(&mut self.iovs, core::mem::take(&mut t.iov), Self::KEEP_LEN);
        Self::keep(&mut self.rmas, core::mem::take(&mut t.rma), Self::KEEP_LEN);
        Self::keep(
            &mut self.bytes,
            core::mem::take(&mut t.owned),
            Self::KEEP_BYTES,
        );
    }

    /// What a finished receive held.
    pub fn keep_rxe(&mut self, r: Rxe) {
        Self::keep(&mut self.iovs, r.target, Self::KEEP_LEN);
        if let RxKind::Recv(b) = r.kind
            && self.recvs.len() < Self::KEEP
        {
            self.recvs.push(b);
        }
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
    /// A message in several packets (medium, runt read), found by msg_id in the peer's
    /// `rx_map` until it ends.
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
    /// Long read (LONGREAD requests): the data is read from the sender's memory.
    pub lr: Option<Box<LongRead>>,
    /// A long or runt read we answered with READ_NACK: the sender's long-CTS request
    /// (flagged READ_NACK, found by msg_id in the peer's `rx_map`) is awaited.
    pub nacked: bool,
    /// The end of the furthest bytes received: everything past it is still owed (a device
    /// may be told to receive there directly, `placement`).
    pub edge: usize,
}

/// The reads of a long-read request we receive (efa-reference §3, §5): device RDMA reads of
/// the sender's `iov` into the receive buffer or write target (or a registered staging
/// buffer when that memory is not registered), then EOR. A runt read (`runt.rs`) is one
/// whose first `from` bytes come in its request packets instead.
pub(super) struct LongRead {
    pub iov: Vec<RmaIov>,
    /// Where the reads start in the message: 0, or a runt read's runt length.
    pub from: usize,
    /// Where they end: the message, cut to the receive buffer (never below `from`).
    pub want: usize,
    /// Offset in the message up to which reads were posted.
    pub posted: usize,
    /// Bytes the finished reads brought (the rest of `Rxe::got` came in packets).
    pub read: usize,
    pub in_flight: usize,
    pub started: bool,
    pub staging: Option<Box<dyn Staging>>,
    pub failed: Option<DevError>,
    /// The memory could not be registered with the device and the sender understands
    /// READ_NACK: it is told so, and sends by long-CTS instead (efa-reference §3).
    pub nack: bool,
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
    /// Refused with RNR before and sent again (efa-reference §6: a second RNR backs off).
    pub rnr_again: bool,
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
pub(super) struct Locked<'a>(pub(super) MutexGuard<'a, Inner>);

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
    /// Every call ends with a flush. What the device keeps back is the ack timer's to send if
    /// the application makes no further call, and its timer is pushed back while it calls
    /// (`ack_timer`).
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
        let unserviced = quiet && g.watching;
        let left_quiet = g.unserviced && !unserviced;
        g.unserviced = unserviced;
        // A call that only posted may leave small sends for the next poll (`flush_posted`);
        // one that polled puts everything on the wire.
        let polled = core::mem::take(&mut g.polled);
        let held = if polled {
            g.dev.flush()
        } else {
            g.dev.flush_posted()
        };
        let Some(timer) = &g.ack_timer else {
            // Nothing would send it later.
            if held {
                g.dev.flush_all();
            }
            return;
        };
        // The thread must take the endpoint within `TICK` of this call if anything is kept
        // back, and a device attended to by the ack timer (not quiet and watched) must have a
        // deadline. A call that polled pushes the deadline to a tick after its poll (an
        // atomic store: `EndpointTimer::set_due`). One that only posted has an older clock:
        // it reads the clock only when it must pull a far deadline in.
        let tick = ack_timer::TICK.as_nanos() as u64;
        if polled && !unserviced {
            timer.set_due(g.dev_polled.saturating_add(tick), g.dev_polled);
        } else if (held || left_quiet) && timer.due() > g.dev_polled.saturating_add(tick) {
            let now = crate::sys::os::monotonic_ns();
            timer.set_due(now.saturating_add(tick), now);
        }
    }
}

pub(super) struct Inner {
    pub dev: Box<dyn Device>,
    /// What of the device's RDMA this endpoint uses (its caps, unless `FI_EFA_USE_DEVICE_RDMA`
    /// or `FI_OPT_EFA_USE_DEVICE_RDMA` said no): advertised in our handshake, and used for
    /// reads and writes to peers that advertise it too (`rma.rs`).
    pub rdma: DeviceCaps,
    /// Our MR keys are the device's rkeys and remote addresses are virtual (`FI_MR_PROV_KEY`
    /// and `FI_MR_VIRT_ADDR`, or `FI_MR_BASIC`): only then may peers address our memory with
    /// device RDMA, so only then does the handshake advertise it.
    pub rdma_target: bool,
    /// Reads, writes (`Owner::Tx`) and long reads (`Owner::Rx`) with device work requests
    /// still to post (the send queue was full).
    pub rdma_waiting: VecDeque<Owner>,
    /// The ack timer's timer for this endpoint (`ack_timer::register`, when enabled); without
    /// it nothing is kept back.
    ack_timer: Option<Arc<EndpointTimer>>,
    pub mtu: usize,
    /// What a peer whose handshake names no size receives (`Device::plain_mtu`).
    pub plain_pkt: usize,
    pub knobs: Knobs,
    pub enabled: bool,
    pub av: Option<Arc<Av>>,
    pub tx_cq: Option<Arc<Cq>>,
    pub rx_cq: Option<Arc<Cq>>,
    pub cntr: Counters,
    pub rxq: SharedRxQueue<Unexp>,
    pub peers: Vec<Peer>,
    pub by_addr: FastMap<EfaAddr, usize>,
    /// The peer the last packet came from (`known_peer`): a bulk transfer's packets all
    /// come from one, and comparing its address costs less than hashing it per packet.
    pub last_src: usize,
    pub by_fi: U64Map<usize>,
    /// The peer `peer_for` found last (sends to one peer in a row skip `by_fi`).
    pub last_dest: usize,
    /// AV removals seen (`Av::removed_since`) when `by_fi` and the peers' `fi_addr` were last
    /// made right (`sync_av`).
    pub av_removals: u64,
    pub txes: Slab<Txe>,
    pub rxes: Slab<Rxe>,
    pub spare: Spare,
    pub sent: Slab<Sent>,
    pub queued: VecDeque<Queued>,
    /// Bulk senders waiting for room under `BULK_SEND_BYTES`, served first come first
    /// served: a transfer's data goes out before the next one's, as a NIC's send queue takes
    /// them, so that a receiver gets each transfer's segments in order (`placement`).
    pub parked: VecDeque<Parked>,
    /// The head of `parked` is being resumed (it may send although others wait).
    pub resuming: bool,
    /// Spare send and receive buffers of our MTU, and small ones (`progress::SMALL_PKT`).
    pub pool: Vec<Vec<u8>>,
    pub small_pool: Vec<Vec<u8>>,
    pub posted_rx: usize,
    pub rx_target: usize,
    /// What `rx_target` may grow to.
    pub rx_max: usize,
    pub comps: Vec<Completion>,
    /// Where the next long-CTS data is expected (`placement`).
    pub placing: super::placement::Placing,
    /// Malformed, spoofed or unroutable packets dropped.
    pub dropped: u64,
    /// Remote accesses refused (bad key, bounds, access).
    pub refused: u64,
    /// READ_NACKs sent (long or runt reads we could not serve) and acted on (our long or
    /// runt reads that went on by long-CTS).
    pub nacks: (u64, u64),
    /// FI_OPT_EFA_RNR_RETRY.
    pub rnr_retry: u32,
    /// `domain_attr->resource_mgmt` is `FI_RM_ENABLED`: a packet refused for lack of a receive
    /// buffer is sent again after a back-off, forever; disabled, the operation fails with
    /// `FI_ENORX` once the device gave up (fi_domain(3), efa-reference §6).
    pub rm_enabled: bool,
    /// When the device was last polled, and last gave a completion (see `DEVICE_QUIET`), in
    /// `sys::os::monotonic_ns`.
    pub dev_polled: u64,
    /// This call polled the device (see `Locked`'s drop).
    pub polled: bool,
    pub dev_heard: u64,
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
    /// Quiet and watched as of the last release of the lock: the ack timer's service tick
    /// leaves the device alone (`Quiet::needs_no_service`).
    pub unserviced: bool,
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
    pub(super) wait_fd: Option<std::os::fd::RawFd>,
    /// The shm endpoint for local peers (`local.rs`), used once enabled (`shm_on`) unless the
    /// application said FI_OPT_SHARED_MEMORY_PERMITTED false first (`shm_permitted`).
    pub(super) shm: Option<Arc<ShmEndpoint>>,
    pub(super) shm_on: AtomicBool,
    pub(super) shm_permitted: AtomicBool,
    /// `Inner::quiet`, readable without the lock.
    pub(super) quiet: Arc<Quiet>,
    /// `Inner::enabled`, readable without the lock.
    pub(super) live: AtomicBool,
    /// The AV bound when the endpoint was enabled (`Inner::av`), readable without the lock.
    pub(super) bound_av: OnceLock<Arc<Av>>,
    /// Destinations known to go through shm (`local.rs`).
    pub(super) routes: ShmRoutes,
    /// `Inner::rxq`, reachable without the lock: a receive that matches nothing waiting is
    /// posted under the queue's lock alone (`post_recv`).
    pub(super) rxq: SharedRxQueue<Unexp>,
    /// `inject_size` of our MTU, and `Knobs::rx_size`: for the calls that skip the lock.
    pub(super) inject_limit: usize,
    pub(super) rx_size: usize,
}

impl RdmEndpoint {
    /// `fi_recv` with `FI_MSG_PREFIX`: the prefix cut from the iov first (out of line, so
    /// that the common call stays small).
    #[inline(never)]
    fn recv_prefixed(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        let mut iov = [IoVec::EMPTY; PREFIXED_IOV_MAX];
        self.post_recv(&op.without_prefix(self.prefix, &mut iov)?, tagged)
    }

    /// `fi_send` with `FI_MSG_PREFIX` (see `recv_prefixed`).
    #[inline(never)]
    fn send_prefixed(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        let mut iov = [IoVec::EMPTY; PREFIXED_IOV_MAX];
        self.post_send(&op.without_prefix(self.prefix, &mut iov)?, tagged)
    }

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
        let plain_pkt = dev.plain_mtu();
        let rdma = if knobs.use_device_rdma {
            dev.caps()
        } else {
            DeviceCaps::default()
        };
        let mr_mode = domain.mr_map.mr_mode();
        let has = |bits: u32| mr_mode & (bits | FI_MR_BASIC) as i32 != 0;
        let rdma_target = has(FI_MR_PROV_KEY) && has(FI_MR_VIRT_ADDR);
        let rxq = SharedRxQueue::new_serial(caps & FI_DIRECTED_RECV != 0, domain.serialized);
        // Upstream uses shm unless the application asked for remote communication only.
        let local_comm = caps & (FI_LOCAL_COMM | FI_REMOTE_COMM) != FI_REMOTE_COMM;
        // Ours, and the limit shm holds routed sends and RMA to (it checks them alone).
        let inject_limit = super::inject_size(mtu);
        let shm = (local_comm && crate::prov::efa::shm_transfer_enabled())
            .then(|| {
                domain.shm_domain().open_peer_endpoint(
                    caps,
                    (tx_op_flags, rx_op_flags),
                    super::local::shm_name(&dev.addr()),
                    rxq.clone(),
                    super::local::PEER_MODE,
                    inject_limit,
                )
            })
            .and_then(|r| r.ok());
        let wait_fd = dev.wait_fd();
        let places = dev.places();
        // Enough posted buffers to absorb a window from a few peers without RNR, bounded in
        // memory (64 KiB datagrams on loopback).
        let rx_max = (knobs.rx_size.max(64) * 8192 / mtu.max(1))
            .clamp(64, 1024)
            .min(dev.max_recv());
        let quiet = Quiet::new(shm.as_ref().map(|s| s.idle_state()));
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
            live: AtomicBool::new(false),
            bound_av: OnceLock::new(),
            routes: ShmRoutes::new(),
            rxq: rxq.clone(),
            inject_limit,
            rx_size: knobs.rx_size,
            inner: Mutex::new(Inner {
                dev,
                rdma,
                rdma_target,
                rdma_waiting: VecDeque::new(),
                ack_timer: None,
                mtu,
                plain_pkt,
                knobs,
                enabled: false,
                av: None,
                tx_cq: None,
                rx_cq: None,
                cntr: Counters::default(),
                rxq,
                peers: Vec::new(),
                by_addr: FastMap::default(),
                last_src: 0,
                by_fi: U64Map::default(),
                last_dest: 0,
                av_removals: 0,
                txes: Slab::new(),
                rxes: Slab::new(),
                spare: Spare::default(),
                sent: Slab::new(),
                queued: VecDeque::new(),
                parked: VecDeque::new(),
                resuming: false,
                pool: Vec::new(),
                small_pool: Vec::new(),
                posted_rx: 0,
                // Few buffers first (64 KiB each on loopback, and idle while shm carries the
                // local peers); more when a progress pass finds half of them filled.
                rx_target: rx_max.min(RX_START),
                rx_max,
                comps: Vec::with_capacity(POLL_BATCH),
                placing: super::placement::Placing::new(places),
                dropped: 0,
                refused: 0,
                nacks: (0, 0),
                rnr_retry: 3,
                rm_enabled,
                dev_polled: crate::sys::os::monotonic_ns(),
                polled: false,
                dev_heard: crate::sys::os::monotonic_ns(),
                dev_idle: false,
                shm_on: false,
                quiet,
                was_quiet: false,
                watching: false,
                unserviced: false,
            }),
        })
    }

    pub(super) fn lock(&self) -> Locked<'_> {
        Locked(self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The endpoint's timer fired (`ack_timer`): its application has made no call for a
    /// while, or its quiet device turned readable. Sends what the device still keeps back;
    /// services a device left alone for `UNATTENDED` as a NIC would be (`Device::service`:
    /// arrivals acknowledged into posted buffers or refused with RNR, retransmissions sent);
    /// and sets the timer again while the endpoint needs it.
    pub(super) fn on_ack_timer(&self, timer: &EndpointTimer) {
        let now = crate::sys::os::monotonic_ns();
        let Some(mut g) = self.try_inner() else {
            // The application is inside: its call ends with a flush and sets the deadline,
            // unless it only posts. Look again in a tick.
            timer.set_due_in_round(now.saturating_add(ack_timer::TICK.as_nanos() as u64));
            return;
        };
        let g = &mut *g;
        if !g.enabled {
            timer.set_due_in_round(u64::MAX);
            return;
        }
        g.dev.flush_all();
        if !self.needs_service() {
            // Quiet and watched: the watcher, or the call that ends quiet, sets it again.
            timer.set_due_in_round(u64::MAX);
            return;
        }
        let idle = Duration::from_nanos(now.saturating_sub(g.dev_polled));
        let after = if idle >= UNATTENDED {
            g.dev.service();
            ack_timer::SERVICE_TICK
        } else if idle < ack_timer::TICK {
            // Taken early (the round gathers the deadlines due soon) or polled since the
            // round began: its next polls push the deadline from a tick after now.
            ack_timer::TICK
        } else {
            UNATTENDED - idle
        };
        timer.set_due_in_round(now.saturating_add(after.as_nanos() as u64));
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

    /// Whether the ack timer has anything to watch for here: not for an endpoint closed or
    /// not yet enabled, nor for one whose device is quiet and watched (anything it must
    /// attend to wakes the watcher first: `Quiet::needs_no_service`). A program whose peers
    /// all go through shm then sees none of our threads run: ticking, the thread preempted
    /// its busy-polling ping-pong some 200 times a second per process.
    fn needs_service(&self) -> bool {
        self.live.load(Ordering::SeqCst) && !self.quiet.needs_no_service()
    }

    /// Times the ack timer's thread has run in this process so far (`ack_timer::rounds`):
    /// tests check that it does not while applications keep calling, nor for a device that
    /// is quiet and watched.
    #[doc(hidden)]
    pub fn ack_timer_rounds() -> u64 {
        super::ack_timer::rounds()
    }

    /// Times the ack timer was set in this process so far (`ack_timer::arms`, a system call
    /// each): tests check that this does not grow with the endpoints an application polls.
    #[doc(hidden)]
    pub fn ack_timer_arms() -> u64 {
        super::ack_timer::arms()
    }

    /// Uses at most this of the device's RDMA (before `fi_enable`): tests model a device
    /// whose efadv caps offer RDMA read without write (an earlier EFA generation) with it.
    #[doc(hidden)]
    pub fn limit_device_rdma(&self, read: bool, write: bool) {
        let mut g = self.lock();
        g.rdma.rdma_read &= read;
        g.rdma.rdma_write &= write;
    }

    /// Packets dropped as malformed or spoofed, and remote accesses refused.
    pub fn drop_counts(&self) -> (u64, u64) {
        let g = self.lock();
        (g.dropped, g.refused)
    }

    /// READ_NACKs this endpoint sent, and those it acted on (efa-reference §3).
    pub fn read_nacks(&self) -> (u64, u64) {
        self.lock().nacks
    }

    pub fn device_stats(&self) -> crate::prov::efa::srd::Stats {
        self.lock().dev.stats()
    }

    /// How many peers went through shm and how many through the device (as logged at close).
    pub fn peer_paths(&self) -> (usize, usize) {
        self.lock().paths()
    }

    /// Whether polls now leave the device alone (`quiet`), and whether the watcher watches it
    /// (else it is still looked at every `QUIET_POLL_PERIOD`).
    pub fn device_quiet_state(&self) -> (bool, bool) {
        let g = self.lock();
        (g.was_quiet, g.watching)
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
        if let Some(av) = &g.av {
            // The AV cannot change once enabled (`bind` refuses), nor after a close.
            let _ = self.bound_av.set(av.clone());
        }
        self.live.store(true, Ordering::Release);
        if g.ack_timer.is_none() {
            g.ack_timer = ack_timer::register(g.quiet.token(), self.me.clone());
        }
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
        Ok((g.knobs.tx_size.max(1) * 4).saturating_sub(g.txes.len()))
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
            return self.recv_prefixed(op, tagged);
        }
        self.post_recv(op, tagged)
    }

    fn send(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        if self.prefix != 0 {
            return self.send_prefixed(op, tagged);
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
        self.live.store(false, Ordering::Release);
        self.routes.forget_all();
        g.shm_on = false;
        g.quiet.forget(g.dev.wait_fd());
        g.watching = false;
        if let Some(timer) = g.ack_timer.take() {
            ack_timer::forget(&timer);
        }
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
        // And which path its peers took (shm or the device), to check from outside which
        // peers were found to be on this host (tests/cluster).
        let (via_shm, via_dev) = g.paths();
        crate::fi_info!(
            "efa",
            crate::core::log::Subsys::EpData,
            "endpoint {} closed; peers: {via_shm} through shm, {via_dev} through the device; \
             transport: {:?}; ack timer run {} times in this process",
            g.dev.addr().straddr(),
            g.dev.stats(),
            ack_timer::rounds()
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished operation's vectors serve the next one: the same memory comes back, holding
    /// only what the new operation put there; injected copies too large to be worth keeping
    /// are freed.
    #[test]
    fn finished_operations_give_their_vectors_back() {
        let mut spare = Spare::default();
        let data: &'static mut [u8] = Box::leak(vec![7u8; 100].into_boxed_slice());
        let iov = [IoVec::from_mut_slice(data)];
        let mut t = RdmEndpoint::new_txe(&mut spare, TxKind::Msg, 0, 0, 0, &iov, 100);
        RdmEndpoint::inject_copy(&mut spare, &mut t, &iov);
        assert_eq!(t.owned, [7u8; 100]);
        assert!(
            t.iov.is_empty(),
            "an injected operation keeps its own copy only"
        );
        let (iov_mem, copy_mem) = (t.iov.as_ptr(), t.owned.as_ptr());
        spare.keep_txe(t);

        let t = RdmEndpoint::new_txe(&mut spare, TxKind::Tagged, 0, 0, 0, &iov, 100);
        assert_eq!((t.iov.as_ptr(), &t.iov[..]), (iov_mem, &iov[..]));
        let b = spare.bytes(10);
        assert_eq!((b.as_ptr(), &b[..]), (copy_mem, &[0u8; 10][..]));

        let big: &'static mut [u8] = Box::leak(vec![1u8; 32 << 10].into_boxed_slice());
        let big = [IoVec::from_mut_slice(big)];
        let mut t = RdmEndpoint::new_txe(&mut spare, TxKind::Msg, 0, 0, 0, &big, 32 << 10);
        RdmEndpoint::inject_copy(&mut spare, &mut t, &big);
        spare.keep_txe(t);
        assert!(spare.bytes.is_empty(), "a 32 KiB copy is not kept");

        for _ in 0..2 * Spare::KEEP {
            Spare::keep(&mut spare.iovs, Vec::with_capacity(1), Spare::KEEP_LEN);
        }
        assert_eq!(spare.iovs.len(), Spare::KEEP);
    }
}
