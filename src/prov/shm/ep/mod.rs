//! The shm endpoint (`FI_EP_RDM`): messages, tagged messages, RMA and atomics between processes
//! of one host.
//!
//! Every endpoint owns a region (`region.rs`) whose ring receives commands from its peers. Data
//! moves by one of four paths, chosen per operation:
//! - **inline** — in the command itself (small payloads);
//! - **bounce** — in one of the sender's bounce buffers, copied out by the receiver (up to the
//!   inject size; the sender's buffer is reusable at once);
//! - **iov** — one copy straight between the two address spaces with cross-memory attach
//!   (`process_vm_readv/writev`), for large messages and RMA. The receiver of a message copies,
//!   with the sender's help from 128 KiB (`share`: each side copies every other 64 KiB block).
//!   An RMA larger than the inject size is copied by its initiator once the target has checked
//!   its keys (CLEARED / COPIED): measured here, the kernel copies 10–15 % faster for the
//!   process that starts the transfer than for its peer, and upstream's shm copies there too.
//!   What the initiator posts after such an RMA waits until it is copied, so RMA still lands
//!   in posted order;
//! - **segmented** — when cross-memory attach is refused (or `FI_SHM_DISABLE_CMA=1`), the data
//!   source pushes chunks through its bounce buffers and the sink copies them out (GO / DATA).
//!
//! Remote accesses are checked against the target's MR map before anything moves; a refused one
//! is answered with an error ACK and the initiator gets an error completion. A peer whose process
//! dies fails every operation waiting on it.
//!
//! This file holds the endpoint's state and its `Endpoint` implementation; the rest is told by
//! concern, each file adding its methods to `ShmEndpoint` and `Inner`: `peer` (connecting,
//! pushing commands, liveness), `tx` (sends), `rx` (receives, matching, unexpected messages),
//! `segment` (the segmented path), `share` (large messages copied by both sides), `rma` and
//! `atomic` (initiator and target halves), and
//! `progress` (taking commands off the ring and dispatching them).

mod atomic;
mod peer;
mod progress;
mod rma;
mod rx;
mod segment;
mod share;
mod tx;

pub use rx::Pending;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use crate::sys::lock::{DomainGuard, DomainLock};

use super::cmd::*;
use super::region::{BOUNCE_BUFS, BOUNCE_SIZE, BufLease, Region};
use super::{PROV_NAME, ShmDomain, region_name};
use crate::abi::consts::*;
use crate::core::{Errno, Info, Result};
use crate::sys::mem::IoVec;
use crate::util::av::Av;
use crate::util::cntr::Cntr;
use crate::util::cq::Cq;
use crate::util::ep::{AtomicKind, AtomicOp, MsgOp, OpFlags, RmaOp};
use crate::util::mr::MrCache;
use crate::util::rxq::{Recv, SharedRxQueue, Unexpected};
use crate::util::slab::Slab;
use crate::util::{Bind, Endpoint, Progress};
use peer::{Peer, PeerIndex};
use segment::RxOp;
use tx::TxOp;

/// Largest message sent inline.
pub const INLINE_MAX: usize = BODY;
/// fi_inject and sends up to this size complete at once (bounce path).
pub const INJECT_SIZE: usize = 4096;

static EP_INDEX: AtomicUsize = AtomicUsize::new(0);

/// Counters an endpoint may be bound to (fi_ep_bind flags).
#[derive(Default)]
struct Counters {
    send: Option<Arc<Cntr>>,
    recv: Option<Arc<Cntr>>,
    read: Option<Arc<Cntr>>,
    write: Option<Arc<Cntr>>,
    remote_read: Option<Arc<Cntr>>,
    remote_write: Option<Arc<Cntr>>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CntrKind {
    Send,
    Read,
    Write,
}

impl Counters {
    fn get(&self, k: CntrKind) -> Option<&Arc<Cntr>> {
        match k {
            CntrKind::Send => self.send.as_ref(),
            CntrKind::Read => self.read.as_ref(),
            CntrKind::Write => self.write.as_ref(),
        }
    }
}

/// Peer mode: this endpoint carries the local peers of another provider's endpoint (efa), as
/// upstream's shm does for efa. It is bound to that endpoint's AV, CQs and counters, shares its
/// receive queue, and is progressed by it. Its name and its peers' names derive from the
/// owner's addresses, so that an AV entry leads to a region and a CONNECT back to an AV entry.
#[derive(Clone, Copy, Debug)]
pub struct PeerMode {
    /// The shm name of the peer at an AV address (None: not a local peer's address).
    pub name_of: fn(&[u8]) -> Option<String>,
    /// The AV address of the peer with a shm name.
    pub addr_of: fn(&str) -> Option<Vec<u8>>,
    /// The partial address under which the application may have inserted that peer before
    /// it knew the whole (efa: its node and service, QKEY 0); an arrival resolves it.
    pub partial_of: fn(&[u8]) -> Option<Vec<u8>>,
}

struct Inner {
    enabled: bool,
    closed: bool,
    name: String,
    region: Option<Arc<Region>>,
    token: u64,
    av: Option<Arc<Av>>,
    peer_mode: Option<PeerMode>,
    tx_cq: Option<Arc<Cq>>,
    rx_cq: Option<Arc<Cq>>,
    cntr: Counters,
    rxq: SharedRxQueue<Pending>,
    peers: Vec<Peer>,
    by_addr: PeerIndex,
    /// AV removals seen (`Av::removed_since`) when `by_addr` and the peers' `fi_addr` were last
    /// made right (`sync_av`).
    av_removals: u64,
    by_token: PeerIndex,
    tx_ops: Slab<TxOp>,
    rx_ops: Slab<RxOp>,
    /// Ids of the `tx_ops` that push segments (a GO came) and of the `rx_ops` that push a read
    /// of our memory: `push_segments` runs on every progress call and walks only these, not
    /// every operation waiting for an ACK (thousands under a stream of small writes).
    tx_pushing: Vec<u64>,
    rx_pushing: Vec<u64>,
    /// Responses (ACK, GO, DATA, CONNECT) that found the peer's ring full.
    outbox: VecDeque<(usize, Box<Cmd>)>,
    /// When peers' liveness was last checked (`sys::os::coarse_clock_ms`): read on every
    /// progress call while operations wait.
    last_liveness_ms: u64,
    /// Progress passes made (`progress_locked`), for reading the clock on some of them.
    passes: u32,
    /// Malformed, forged or misdirected commands dropped.
    dropped: u64,
    /// Which peer each of our bounce buffers was last lent to without an operation of ours
    /// waiting on it (bounce sends, injected writes): the reader releases it, but one that
    /// dies first never will, so its leases are taken back when it is found dead.
    lent_to: [Option<(usize, BufLease)>; BOUNCE_BUFS],
    /// Whether bounce fills take our buffers in turn (traffic both ways) or the lowest free.
    fill_turn: tx::FillTurn,
    /// When `lent_to` was last searched for peers that are gone (`coarse_clock_ms`).
    last_reclaim_ms: u64,
    /// The region our last RMA target check found (`MrMap::verify_cached`).
    mr_cache: MrCache,
    /// The memory a write to us or a read of us covers, kept between commands.
    iov_scratch: Vec<IoVec>,
    /// What `take_commands` pops commands into, kept between passes (None while in use).
    cmd_scratch: Option<Box<Cmd>>,
}

pub struct ShmEndpoint {
    me: Weak<ShmEndpoint>,
    domain: Arc<ShmDomain>,
    caps: u64,
    flags: OpFlags,
    cma: bool,
    /// The largest message `fi_inject` and `FI_INJECT` take: ours, or in peer mode the
    /// owner's when smaller (its `inject_size` is what the application was told).
    inject_limit: usize,
    inner: DomainLock<Inner>,
    idle: Arc<IdleHint>,
    /// `Inner::rxq`, reachable without the endpoint's lock: a receive that matches nothing
    /// waiting is posted under the queue's lock alone (`post_recv`).
    rxq: SharedRxQueue<Pending>,
    /// `Inner::enabled`, readable without the lock.
    live: AtomicBool,
}

/// Whether a progress call would find nothing to do, for pollers that have not locked the
/// endpoint (see `util::provider::Idle`): set from `Inner` each time its lock is released.
pub struct IdleHint {
    state: AtomicU8,
    /// Our region once enabled (kept here so that it can be looked at without the lock).
    ring: OnceLock<Arc<Region>>,
}

/// Operations or responses of our own are pending: progress has work without input.
const BUSY: u8 = 0;
/// Progress has work only if a peer pushed a command (or we have slots to hand back).
const WATCH_RING: u8 = 1;
/// Not enabled, or closed: progress does nothing.
const ASLEEP: u8 = 2;

impl IdleHint {
    /// `Idle::idle`, callable without a virtual call (efa's own hint asks ours first).
    #[inline]
    pub fn idle_now(&self) -> bool {
        match self.state.load(Ordering::Acquire) {
            BUSY => false,
            WATCH_RING => self.ring.get().is_none_or(|r| r.idle()),
            _ => true,
        }
    }
}

impl crate::util::provider::Idle for IdleHint {
    fn idle(&self) -> bool {
        self.idle_now()
    }
}

impl Inner {
    fn idle_state(&self) -> u8 {
        if self.region.is_none() {
            ASLEEP
        } else if self.outbox.is_empty() && self.tx_ops.is_empty() && self.rx_ops.is_empty() {
            WATCH_RING
        } else {
            BUSY
        }
    }
}

/// The endpoint's state, locked; on release it tells the idle hint what is left to do.
struct Locked<'a> {
    g: DomainGuard<'a, Inner>,
    idle: &'a IdleHint,
}

impl core::ops::Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.g
    }
}

impl core::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.g
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Stored before the mutex is released: updates are ordered as the lock orders them.
        self.idle
            .state
            .store(self.g.idle_state(), Ordering::Release);
    }
}

impl Drop for ShmEndpoint {
    /// An endpoint dropped without `fi_close` closes its region all the same (the idle hint,
    /// which a CQ may keep a while longer, holds the mapping, not the region's life).
    fn drop(&mut self) {
        if let Some(r) = self.idle.ring.get() {
            r.close();
        }
    }
}

/// Whether `FI_SHM_DISABLE_CMA` asks for the segmented path.
pub(crate) fn cma_enabled() -> bool {
    !crate::core::params::knob_bool(
        PROV_NAME,
        "disable_cma",
        "Disable cross-memory attach (use bounce buffers)",
        false,
    )
}

/// The endpoint name for a getinfo source address (upstream's `<addr>:<uid>:<index>` form for
/// `fi_shm://` addresses, the address itself otherwise).
fn endpoint_name(src: Option<&[u8]>) -> String {
    let addr = src
        .map(|s| String::from_utf8_lossy(s.split(|&b| b == 0).next().unwrap_or(&[])).into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("fi_shm://{}", std::process::id()));
    if addr.starts_with("fi_shm://") {
        format!(
            "{addr}:{}:{}",
            crate::sys::os::uid(),
            EP_INDEX.fetch_add(1, Ordering::Relaxed)
        )
    } else {
        addr
    }
}

impl ShmEndpoint {
    pub fn new(domain: Arc<ShmDomain>, info: &Info) -> Result<Arc<ShmEndpoint>> {
        if info.ep_attr.type_ != FI_EP_RDM && info.ep_attr.type_ != FI_EP_UNSPEC {
            return Err(Errno::INVAL);
        }
        let caps = if info.caps == 0 {
            super::SHM_CAPS
        } else {
            info.caps
        };
        if caps & !super::SHM_CAPS != 0 {
            return Err(Errno::NODATA);
        }
        let rxq = SharedRxQueue::new_serial(caps & FI_DIRECTED_RECV != 0, domain.serialized);
        let name = endpoint_name(info.src_addr.as_deref());
        let (tx, rx) = (info.tx_attr.op_flags, info.rx_attr.op_flags);
        Ok(Self::build(
            domain,
            caps,
            (tx, rx),
            name,
            rxq,
            None,
            INJECT_SIZE,
        ))
    }

    /// An endpoint in peer mode (see [`PeerMode`]) named `name`, matching in `rxq`.
    pub fn new_peer(
        domain: Arc<ShmDomain>,
        caps: u64,
        op_flags: (u64, u64),
        name: String,
        rxq: SharedRxQueue<Pending>,
        mode: PeerMode,
        inject_limit: usize,
    ) -> Arc<ShmEndpoint> {
        let caps = caps & super::SHM_CAPS & !(FI_RMA_EVENT | FI_AV_USER_ID);
        let inject_limit = inject_limit.min(INJECT_SIZE);
        Self::build(domain, caps, op_flags, name, rxq, Some(mode), inject_limit)
    }

    fn build(
        domain: Arc<ShmDomain>,
        caps: u64,
        (tx_flags, rx_flags): (u64, u64),
        name: String,
        rxq: SharedRxQueue<Pending>,
        peer_mode: Option<PeerMode>,
        inject_limit: usize,
    ) -> Arc<ShmEndpoint> {
        let serial = domain.serialized;
        Arc::new_cyclic(|me| ShmEndpoint {
            me: me.clone(),
            domain,
            caps,
            flags: OpFlags::new(tx_flags, rx_flags),
            cma: cma_enabled(),
            inject_limit,
            rxq: rxq.clone(),
            live: AtomicBool::new(false),
            inner: DomainLock::new(
                Inner {
                    enabled: false,
                    closed: false,
                    name,
                    region: None,
                    token: 0,
                    av: None,
                    peer_mode,
                    tx_cq: None,
                    rx_cq: None,
                    cntr: Counters::default(),
                    rxq,
                    peers: Vec::new(),
                    by_addr: PeerIndex::default(),
                    av_removals: 0,
                    by_token: PeerIndex::default(),
                    tx_ops: Slab::new(),
                    rx_ops: Slab::new(),
                    tx_pushing: Vec::new(),
                    rx_pushing: Vec::new(),
                    outbox: VecDeque::new(),
                    last_liveness_ms: crate::sys::os::coarse_clock_ms(),
                    passes: 0,
                    dropped: 0,
                    lent_to: [None; BOUNCE_BUFS],
                    fill_turn: tx::FillTurn::default(),
                    last_reclaim_ms: 0,
                    mr_cache: MrCache::default(),
                    iov_scratch: Vec::new(),
                    cmd_scratch: None,
                },
                serial,
            ),
            idle: Arc::new(IdleHint {
                state: AtomicU8::new(ASLEEP),
                ring: OnceLock::new(),
            }),
        })
    }

    fn lock(&self) -> Locked<'_> {
        Locked {
            g: self.inner.lock(),
            idle: &self.idle,
        }
    }

    /// Our idle hint, as its own type (`Progress::idle_hint` gives it as `dyn Idle`).
    pub fn idle_state(&self) -> Arc<IdleHint> {
        self.idle.clone()
    }

    /// Commands dropped because they were malformed, forged or for unknown operations.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }
}

/// What the endpoint this one serves in peer mode calls (see [`PeerMode`]).
impl ShmEndpoint {
    /// Moves a message of ours, taken from the shared queue by the owner's receive, into it.
    pub fn deliver_unexpected(&self, recv: Recv, tagged: bool, u: Unexpected<Pending>) {
        let mut g = self.lock();
        self.deliver(&mut g, recv, tagged, u);
    }

    /// Drops a message of ours that the owner's `FI_DISCARD` took from the shared queue.
    pub fn discard_unexpected(&self, u: Unexpected<Pending>) {
        let mut g = self.lock();
        self.discard(&mut g, u);
    }

    /// The AV index of our peer `origin` (a message's sender), once the application has
    /// inserted it.
    pub fn resolve_origin(&self, origin: usize) -> Option<u64> {
        let mut g = self.lock();
        (origin < g.peers.len())
            .then(|| g.refresh_fi_addr(origin))
            .filter(|a| *a != FI_ADDR_NOTAVAIL)
    }

    /// Whether the peer at `fi_addr` has an endpoint on this host we can reach (its region
    /// exists and is mapped).
    pub fn reachable(&self, fi_addr: u64) -> bool {
        let mut g = self.lock();
        g.enabled && g.peer_for(fi_addr).and_then(|p| g.connect(p)).is_ok()
    }
}

impl Progress for ShmEndpoint {
    fn progress(&self) {
        // Called directly by the efa endpoint we serve in peer mode, which has no hint.
        if crate::util::provider::Idle::idle(&*self.idle) {
            return;
        }
        self.progress_busy();
    }

    /// Through a CQ or counter, whose `Source` has just asked our idle hint.
    fn progress_busy(&self) {
        // A thread already progressing this endpoint does the work for everyone.
        let Some(g) = self.inner.try_lock() else {
            return;
        };
        let mut g = Locked {
            g,
            idle: &self.idle,
        };
        self.progress_locked(&mut g);
    }

    fn idle_hint(&self) -> Option<Arc<dyn crate::util::provider::Idle>> {
        Some(self.idle.clone())
    }
}

impl Endpoint for ShmEndpoint {
    fn bind(&self, target: Bind, flags: u64) -> Result<()> {
        let mut g = self.lock();
        if g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        // In peer mode the owner progresses us, and its AV holds its own address format.
        let me: Option<Weak<dyn Progress>> = match g.peer_mode {
            Some(_) => None,
            None => Some(self.me.clone()),
        };
        match target {
            Bind::Av(av) => {
                if flags != 0 {
                    return Err(Errno::BADFLAGS);
                }
                if av.codec().addr_format() != FI_ADDR_STR && g.peer_mode.is_none() {
                    return Err(Errno::INVAL);
                }
                g.av = Some(av);
            }
            Bind::Cq(cq) => {
                let (tx, rx) = self.flags.bind_cq(flags)?;
                if let Some(me) = me {
                    cq.add_source(me);
                }
                if tx {
                    g.tx_cq = Some(cq.clone());
                }
                if rx {
                    g.rx_cq = Some(cq);
                }
            }
            Bind::Cntr(c) => {
                let known =
                    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
                if flags & !known != 0 || flags == 0 {
                    return Err(Errno::BADFLAGS);
                }
                if let Some(me) = me {
                    c.add_source(me);
                }
                let set = |slot: &mut Option<Arc<Cntr>>, bit: u64| {
                    if flags & bit != 0 {
                        *slot = Some(c.clone());
                    }
                };
                set(&mut g.cntr.send, FI_SEND);
                set(&mut g.cntr.recv, FI_RECV);
                set(&mut g.cntr.read, FI_READ);
                set(&mut g.cntr.write, FI_WRITE);
                set(&mut g.cntr.remote_read, FI_REMOTE_READ);
                set(&mut g.cntr.remote_write, FI_REMOTE_WRITE);
            }
            Bind::Eq(_) => return Err(Errno::NOSYS),
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
        let token = loop {
            let t = crate::sys::random::u64();
            if t != 0 {
                break t;
            }
        };
        let region = Arc::new(Region::create(&region_name(&g.name), token)?);
        // An endpoint is enabled once (`enabled` stays false after close).
        let _ = self.idle.ring.set(region.clone());
        g.token = token;
        g.region = Some(region);
        g.enabled = true;
        self.live.store(true, Ordering::Release);
        Ok(())
    }

    fn getname(&self) -> Result<Vec<u8>> {
        let g = self.lock();
        let mut n = g.name.as_bytes().to_vec();
        n.push(0);
        Ok(n)
    }

    fn setname(&self, addr: &[u8]) -> Result<()> {
        let mut g = self.lock();
        if g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let s = std::str::from_utf8(addr.split(|&b| b == 0).next().unwrap_or(&[]))
            .map_err(|_| Errno::INVAL)?;
        if s.is_empty() || s.len() > super::NAME_MAX {
            return Err(Errno::INVAL);
        }
        g.name = s.to_string();
        Ok(())
    }

    fn getopt(&self, level: i32, name: i32, val: &mut [u8], needed: &mut usize) -> Result<usize> {
        if level != FI_OPT_ENDPOINT {
            return Err(Errno::NOPROTOOPT);
        }
        let g = self.lock();
        let v: u64 = match name {
            FI_OPT_MIN_MULTI_RECV => g.rxq.lock().min_multi_recv() as u64,
            FI_OPT_MAX_MSG_SIZE | FI_OPT_MAX_TAGGED_SIZE | FI_OPT_MAX_RMA_SIZE => usize::MAX as u64,
            FI_OPT_MAX_ATOMIC_SIZE => (BOUNCE_SIZE / 2) as u64,
            FI_OPT_INJECT_MSG_SIZE | FI_OPT_INJECT_TAGGED_SIZE | FI_OPT_INJECT_RMA_SIZE => {
                INJECT_SIZE as u64
            }
            FI_OPT_INJECT_ATOMIC_SIZE => RMA_INLINE as u64,
            _ => return Err(Errno::NOPROTOOPT),
        };
        *needed = 8;
        if val.len() < 8 {
            return Err(Errno::TOOSMALL);
        }
        val[..8].copy_from_slice(&v.to_ne_bytes());
        Ok(8)
    }

    fn setopt(&self, level: i32, name: i32, val: &[u8]) -> Result<()> {
        if level != FI_OPT_ENDPOINT {
            return Err(Errno::NOPROTOOPT);
        }
        let g = self.lock();
        match name {
            FI_OPT_MIN_MULTI_RECV => {
                let v: [u8; 8] = val.try_into().map_err(|_| Errno::INVAL)?;
                g.rxq.lock().set_min_multi_recv(usize::from_ne_bytes(v));
                Ok(())
            }
            // As upstream shm (and fi_endpoint(3)): no CUDA library or device is available,
            // so the option cannot be set either way.
            FI_OPT_CUDA_API_PERMITTED => {
                crate::fi_warn!(
                    crate::prov::shm::PROV_NAME,
                    crate::core::log::Subsys::Core,
                    "FI_OPT_CUDA_API_PERMITTED cannot be set: no CUDA library or device is available"
                );
                Err(Errno::INVAL)
            }
            // shm is shared memory itself.
            FI_OPT_SHARED_MEMORY_PERMITTED => {
                if val.is_empty() {
                    return Err(Errno::INVAL);
                }
                if val[0] == 0 {
                    // An shm endpoint cannot work without shared memory.
                    return Err(Errno::OPNOTSUPP);
                }
                Ok(())
            }
            FI_OPT_MAX_MSG_SIZE
            | FI_OPT_MAX_TAGGED_SIZE
            | FI_OPT_MAX_RMA_SIZE
            | FI_OPT_MAX_ATOMIC_SIZE => {
                let v: [u8; 8] = val.try_into().map_err(|_| Errno::INVAL)?;
                let limit = if name == FI_OPT_MAX_ATOMIC_SIZE {
                    BOUNCE_SIZE / 2
                } else {
                    usize::MAX
                };
                if usize::from_ne_bytes(v) > limit {
                    Err(Errno::INVAL)
                } else {
                    Ok(())
                }
            }
            FI_OPT_INJECT_MSG_SIZE
            | FI_OPT_INJECT_TAGGED_SIZE
            | FI_OPT_INJECT_RMA_SIZE
            | FI_OPT_INJECT_ATOMIC_SIZE => {
                let v: [u8; 8] = val.try_into().map_err(|_| Errno::INVAL)?;
                if usize::from_ne_bytes(v) > INJECT_SIZE {
                    Err(Errno::INVAL)
                } else {
                    Ok(())
                }
            }
            _ => Err(Errno::NOPROTOOPT),
        }
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
        Ok(super::TX_SIZE.saturating_sub(g.tx_ops.len()))
    }

    fn rx_size_left(&self) -> Result<usize> {
        let g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        Ok(super::RX_SIZE.saturating_sub(g.rxq.lock().posted()))
    }

    /// Posting runs no progress: messages taken off the ring while an application posts a
    /// batch of receives would find the rest not yet posted and take the unexpected path
    /// (a copy, then a second match); the CQ read that follows finds them posted. A message
    /// already waiting is matched at once (`post_recv`), and progress runs on every CQ read.
    fn recv(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        self.post_recv(op, tagged)
    }

    fn send(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        let r = self.send_msg(op, tagged);
        if r == Err(Errno::AGAIN) {
            self.progress();
        }
        r
    }

    fn read(&self, op: &RmaOp<'_>) -> Result<()> {
        if self.caps & FI_READ == 0 && self.caps & (FI_READ | FI_WRITE) != 0 {
            return Err(Errno::NOSYS);
        }
        self.rma(op, true)
    }

    fn write(&self, op: &RmaOp<'_>) -> Result<()> {
        if self.caps & FI_WRITE == 0 && self.caps & (FI_READ | FI_WRITE) != 0 {
            return Err(Errno::NOSYS);
        }
        self.rma(op, false)
    }

    fn atomic(&self, op: &AtomicOp<'_>) -> Result<()> {
        let r = self.do_atomic(op);
        self.progress();
        r
    }

    fn atomic_valid(&self, kind: AtomicKind, datatype: u32, op: u32) -> Result<usize> {
        if self.caps & FI_ATOMIC == 0 {
            return Err(Errno::NOSYS);
        }
        super::atomic_count(kind, datatype, op)
    }

    fn close(&self) -> Result<()> {
        let mut g = self.lock();
        g.closed = true;
        g.enabled = false;
        self.live.store(false, Ordering::Release);
        // Responses still waiting for room (an ACK) get one more chance: a peer may be
        // waiting for them.
        if !g.outbox.is_empty() {
            g.flush_outbox();
        }
        if let Some(r) = g.region.take() {
            r.close();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let a = endpoint_name(Some(b"fi_shm://42\0"));
        assert!(a.starts_with(&format!("fi_shm://42:{}:", crate::sys::os::uid())));
        assert_eq!(endpoint_name(Some(b"fi_ns://host:7\0")), "fi_ns://host:7");
        assert!(endpoint_name(None).starts_with("fi_shm://"));
    }
}
