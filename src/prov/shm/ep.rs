//! The shm endpoint (`FI_EP_RDM`): messages, tagged messages, RMA and atomics between processes
//! of one host.
//!
//! Every endpoint owns a region (`region.rs`) whose ring receives commands from its peers. Data
//! moves by one of four paths, chosen per operation:
//! - **inline** — in the command itself (small payloads);
//! - **bounce** — in one of the sender's bounce buffers, copied out by the receiver (up to the
//!   inject size; the sender's buffer is reusable at once);
//! - **iov** — one copy straight between the two address spaces with cross-memory attach
//!   (`process_vm_readv/writev`), for large messages and RMA. The receiver of a message copies.
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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::cmd::*;
use super::region::{BOUNCE_SIZE, CMD_SIZE, Region};
use super::{PROV_NAME, ShmDomain, region_name};
use crate::abi::consts::*;
use crate::core::log::Subsys;
use crate::core::{Errno, Info, Result};
use crate::sys::cma::{self, Remote};
use crate::sys::mem::{IoVec, gather, iov_len, scatter};
use crate::util::atomic;
use crate::util::av::Av;
use crate::util::cntr::Cntr;
use crate::util::cq::{Cq, CqEntry, CqErrEntry};
use crate::util::ep::{AtomicKind, AtomicOp, Call, MsgOp, OpFlags, RmaOp};
use crate::util::hash::U64Map;
use crate::util::rxq::{MAX_IOV, Peek, PostOutcome, Recv, SharedRxQueue, Unexpected};
use crate::util::slab::Slab;
use crate::util::{Bind, Endpoint, Progress};

/// Largest message sent inline.
pub const INLINE_MAX: usize = BODY;
/// fi_inject and sends up to this size complete at once (bounce path).
pub const INJECT_SIZE: usize = 4096;
/// Most target ranges an `OP_CLEARED` carries (more: the target copies itself).
const MAX_CLEARED: usize = 8;
/// Commands handled per progress call.
const PROGRESS_BATCH: usize = 64;
/// How often peers of waiting operations are checked for liveness.
const LIVENESS_PERIOD: Duration = Duration::from_millis(100);

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

/// A peer endpoint: known by address (we send to it) and/or by token (it sent to us).
struct Peer {
    /// Its address, as inserted in the AV or announced by CONNECT.
    addr: String,
    region: Option<Arc<Region>>,
    /// Whether our CONNECT has been queued to it.
    connected: bool,
    /// Its token once known (from its region or its CONNECT).
    token: u64,
    pid: i32,
    /// Its fi_addr in our AV (FI_ADDR_NOTAVAIL if not inserted).
    fi_addr: u64,
    /// Set when its process or endpoint is gone.
    dead: bool,
    /// Our RMA operations to it whose data may still move after what we post next: copies we
    /// do ourselves once cleared (`OP_CLEARED`), transfers through bounce buffers. What we post
    /// next waits (`EAGAIN`) until they are done, so that RMA lands in posted order (the RAW,
    /// WAR, WAW orders we advertise); the target handles everything else in ring order.
    unordered: u32,
    /// Those of them waiting for `OP_CLEARED`: another copy of ours may follow them (the
    /// target clears in ring order, and we copy in the order it clears).
    uncleared: u32,
    /// The kernel refused our part of a shared copy (`F_SHARED`) with this peer: we share no
    /// more (each side's blocks must keep being copied by that side, in order).
    share_refused: bool,
    /// One of our RMA commands sent again for the target to copy (our own copy was refused) is
    /// not done yet; the next ones wait in `held_retries`. Serialized, because the target may
    /// move them through bounce buffers, several of which would otherwise interleave.
    retrying: bool,
    held_retries: VecDeque<Box<Cmd>>,
}

/// Our operation waiting for a peer (an ACK, a GO, or bounce buffers to push data).
struct TxOp {
    peer: usize,
    kind: TxKind,
    context: usize,
    /// Resolved flags: FI_COMPLETION set iff a completion is due.
    flags: u64,
    /// CQ flags of the completion (FI_SEND | FI_MSG, FI_WRITE | FI_RMA, ...).
    cq_flags: u64,
    len: usize,
    /// Source data (send, write) or destination (read).
    iov: Vec<IoVec>,
    /// Atomic fetch/compare result buffers.
    result: Vec<IoVec>,
    /// Our bounce buffer to release when done.
    bounce: Option<u32>,
    /// Segmented push in progress.
    push: Option<Push>,
    /// An RMA waiting for `OP_CLEARED`: its command, sent again without `F_MAY_COPY` if our own
    /// copy is refused (the target then copies or falls back to the segmented path).
    may_copy: Option<Box<Cmd>>,
    /// Counted in its peer's `unordered`.
    unordered: bool,
    /// Cleared with `F_SHARED`: our part is done (or refused); waiting for the target's.
    shared: Option<Box<Shared>>,
    /// Sent again for the target to copy ([`Peer::retrying`]).
    retried: bool,
    cntr: CntrKind,
}

/// Our side of a shared copy (`F_SHARED`), between `OP_CLEARED` and the target's `OP_PART`.
struct Shared {
    /// The target's ranges.
    theirs: Vec<Remote>,
    /// How our blocks went.
    ours: Result<()>,
    /// The command, to send again if a side's copy is refused.
    retry: Option<Box<Cmd>>,
}

/// Whether the kernel refused a cross-memory copy (rather than the memory being bad).
fn refused(e: Errno) -> bool {
    e == Errno::PERM || e == Errno::NOSYS
}

/// A segmented push: the sink's op, bytes sent, bytes the sink asked for.
#[derive(Clone, Copy, Debug)]
struct Push {
    sink: u64,
    sent: usize,
    limit: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum TxKind {
    Msg,
    Write,
    Read,
    Atomic,
}

/// Data arriving into our memory through the segmented path (a receive or a remote write), or
/// our data going out to a peer that is reading from us.
struct RxOp {
    peer: usize,
    /// The sender's operation (for the final ACK).
    sender_op: u64,
    dest: Vec<IoVec>,
    len: usize,
    got: usize,
    done: RxDone,
}

enum RxDone {
    /// A message: complete the receive (with truncation details) and ACK the sender.
    Recv {
        recv: Recv,
        tagged: bool,
        src: u64,
        tag: u64,
        data: u64,
        cq_data: bool,
        olen: usize,
    },
    /// A remote write: count it, report CQ data if any, ACK the initiator.
    RemoteWrite { cq_data: Option<u64> },
    /// We are the source of a remote read: push `dest` (our memory) to the initiator's op.
    PushRead { initiator_op: u64 },
}

/// What an unexpected message holds until a receive matches it.
pub enum Pending {
    Inline(Vec<u8>),
    /// The sender's data stays in its memory (iov or segmented path): the command describes it.
    Remote(Box<Cmd>),
    /// A message the endpoint this one serves (peer mode) received over its own transport, by
    /// that endpoint's handle: it shares our receive queue, and takes these out itself.
    Foreign(u64),
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
    by_addr: U64Map<usize>,
    /// AV removals seen (`Av::removed_since`) when `by_addr` and the peers' `fi_addr` were last
    /// made right (`sync_av`).
    av_removals: u64,
    by_token: U64Map<usize>,
    tx_ops: Slab<TxOp>,
    rx_ops: Slab<RxOp>,
    /// Responses (ACK, GO, DATA, CONNECT) that found the peer's ring full.
    outbox: VecDeque<(usize, Box<Cmd>)>,
    last_liveness: Instant,
    /// Malformed, forged or misdirected commands dropped.
    dropped: u64,
}

pub struct ShmEndpoint {
    me: Weak<ShmEndpoint>,
    domain: Arc<ShmDomain>,
    caps: u64,
    flags: OpFlags,
    cma: bool,
    inner: Mutex<Inner>,
    idle: Arc<IdleHint>,
}

/// Whether a progress call would find nothing to do, for pollers that have not locked the
/// endpoint (see `util::provider::Idle`): set from `Inner` each time its lock is released.
struct IdleHint {
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

impl crate::util::provider::Idle for IdleHint {
    fn idle(&self) -> bool {
        match self.state.load(Ordering::Acquire) {
            BUSY => false,
            WATCH_RING => self.ring.get().is_none_or(|r| r.idle()),
            _ => true,
        }
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
    g: MutexGuard<'a, Inner>,
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
        let rxq = SharedRxQueue::new(caps & FI_DIRECTED_RECV != 0);
        let name = endpoint_name(info.src_addr.as_deref());
        let (tx, rx) = (info.tx_attr.op_flags, info.rx_attr.op_flags);
        Ok(Self::build(domain, caps, (tx, rx), name, rxq, None))
    }

    /// An endpoint in peer mode (see [`PeerMode`]) named `name`, matching in `rxq`.
    pub fn new_peer(
        domain: Arc<ShmDomain>,
        caps: u64,
        op_flags: (u64, u64),
        name: String,
        rxq: SharedRxQueue<Pending>,
        mode: PeerMode,
    ) -> Arc<ShmEndpoint> {
        let caps = caps & super::SHM_CAPS & !(FI_RMA_EVENT | FI_AV_USER_ID);
        Self::build(domain, caps, op_flags, name, rxq, Some(mode))
    }

    fn build(
        domain: Arc<ShmDomain>,
        caps: u64,
        (tx_flags, rx_flags): (u64, u64),
        name: String,
        rxq: SharedRxQueue<Pending>,
        peer_mode: Option<PeerMode>,
    ) -> Arc<ShmEndpoint> {
        Arc::new_cyclic(|me| ShmEndpoint {
            me: me.clone(),
            domain,
            caps,
            flags: OpFlags::new(tx_flags, rx_flags),
            cma: cma_enabled(),
            inner: Mutex::new(Inner {
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
                by_addr: U64Map::default(),
                av_removals: 0,
                by_token: U64Map::default(),
                tx_ops: Slab::new(),
                rx_ops: Slab::new(),
                outbox: VecDeque::new(),
                last_liveness: Instant::now(),
                dropped: 0,
            }),
            idle: Arc::new(IdleHint {
                state: AtomicU8::new(ASLEEP),
                ring: OnceLock::new(),
            }),
        })
    }

    fn lock(&self) -> Locked<'_> {
        Locked {
            g: self.inner.lock().unwrap_or_else(|e| e.into_inner()),
            idle: &self.idle,
        }
    }

    /// Commands dropped because they were malformed, forged or for unknown operations.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }
}

// ---- completions ----

impl Inner {
    /// The AV index of peer `p`, looked up again while it is unknown: the application may have
    /// inserted the peer since it first wrote to us. `FI_ADDR_NOTAVAIL` while it has not.
    fn refresh_fi_addr(&mut self, p: usize) -> u64 {
        if self.peers[p].fi_addr == FI_ADDR_NOTAVAIL {
            let a = self.av_index(&self.peers[p].addr);
            if let Some(a) = a {
                self.peers[p].fi_addr = a;
                self.by_addr.insert(a, p);
            }
        }
        self.peers[p].fi_addr
    }

    /// The AV index of the peer named `name` (in peer mode, of its owner's address).
    fn av_index(&self, name: &str) -> Option<u64> {
        let av = self.av.as_ref()?;
        match &self.peer_mode {
            Some(m) => {
                let a = (m.addr_of)(name)?;
                av.reverse(&a)
                    .or_else(|| av.resolve_entry(&(m.partial_of)(&a)?, &a))
            }
            None => av.reverse(name.as_bytes()),
        }
    }

    fn complete_tx(&self, context: usize, flags: u64, cq_flags: u64, len: usize, cntr: CntrKind) {
        if flags & FI_COMPLETION != 0
            && let Some(cq) = &self.tx_cq
        {
            cq.push(CqEntry {
                op_context: context,
                flags: cq_flags,
                len,
                src_addr: FI_ADDR_NOTAVAIL,
                ..Default::default()
            });
        }
        if let Some(c) = self.cntr.get(cntr) {
            c.complete(len);
        }
    }

    fn fail_tx(&self, context: usize, cq_flags: u64, err: Errno, cntr: CntrKind) {
        if let Some(cq) = &self.tx_cq {
            cq.push_err(CqErrEntry::new(context, cq_flags, err));
        }
        if let Some(c) = self.cntr.get(cntr) {
            c.fail();
        }
    }

    fn source_id(&self, fi_addr: u64) -> u64 {
        match (&self.av, fi_addr) {
            (_, FI_ADDR_NOTAVAIL) => FI_ADDR_NOTAVAIL,
            (Some(av), a) => av.source_id(a),
            (None, _) => FI_ADDR_NOTAVAIL,
        }
    }

    /// Completes a receive that got `len` bytes of a `total`-byte message.
    #[allow(clippy::too_many_arguments)]
    fn complete_recv(
        &mut self,
        recv: &Recv,
        tagged: bool,
        src: u64,
        tag: u64,
        data: u64,
        cq_data: bool,
        total: usize,
        got: usize,
    ) {
        let mut cq_flags = FI_RECV | if tagged { FI_TAGGED } else { FI_MSG };
        if cq_data {
            cq_flags |= FI_REMOTE_CQ_DATA;
        }
        let multi = recv.flags & FI_MULTI_RECV != 0;
        let buf = recv.target().first().map_or(0, IoVec::addr);
        let released = multi && recv.released;
        if released {
            cq_flags |= FI_MULTI_RECV;
        }
        let src_addr = self.source_id(src);
        let rx_cq = &self.rx_cq;
        if total > got {
            if let Some(cq) = rx_cq {
                cq.push_err(CqErrEntry {
                    op_context: recv.context,
                    flags: cq_flags,
                    len: got,
                    buf,
                    data,
                    tag,
                    olen: total - got,
                    err: Errno::TRUNC.0,
                    src_addr,
                    ..Default::default()
                });
            }
            if let Some(c) = &self.cntr.recv {
                c.fail();
            }
            return;
        }
        if recv.flags & FI_COMPLETION != 0
            && let Some(cq) = rx_cq
        {
            cq.push(CqEntry {
                op_context: recv.context,
                flags: cq_flags,
                len: got,
                buf,
                data,
                tag,
                src_addr,
            });
        } else if released && let Some(cq) = rx_cq {
            // A released multi-receive buffer is always reported (fi_msg(3)).
            cq.push(CqEntry {
                op_context: recv.context,
                flags: FI_MULTI_RECV,
                ..Default::default()
            });
        }
        if let Some(c) = &self.cntr.recv {
            c.complete(got);
        }
    }
}

// ---- peers and sending commands ----

impl Inner {
    fn region(&self) -> Result<&Arc<Region>> {
        self.region.as_ref().ok_or(Errno::OPBADSTATE)
    }

    /// After entries were removed from the AV (`Av::removed_since`), what each peer's
    /// `fi_addr` is now: an index may since name another address (fi_av(3) lets inserts reuse
    /// removed ones), and a removed peer is no longer a source anyone asked for.
    fn sync_av(&mut self) {
        let Some(av) = &self.av else { return };
        if !av.removed_since(&mut self.av_removals) {
            return;
        }
        self.by_addr.clear();
        for p in 0..self.peers.len() {
            let a = self
                .av_index(&self.peers[p].addr)
                .unwrap_or(FI_ADDR_NOTAVAIL);
            self.peers[p].fi_addr = a;
            if a != FI_ADDR_NOTAVAIL {
                self.by_addr.insert(a, p);
            }
        }
    }

    /// The peer for an AV address, opening its region on first use.
    fn peer_for(&mut self, fi_addr: u64) -> Result<usize> {
        self.sync_av();
        if let Some(&p) = self.by_addr.get(&fi_addr) {
            return Ok(p);
        }
        let av = self.av.as_ref().ok_or(Errno::NOAV)?;
        let bytes = av.lookup(fi_addr)?;
        let addr = match &self.peer_mode {
            Some(m) => (m.name_of)(&bytes).ok_or(Errno::INVAL)?,
            None => String::from_utf8_lossy(&bytes).into_owned(),
        };
        let idx = match self.peers.iter().position(|p| p.addr == addr) {
            Some(i) => {
                self.peers[i].fi_addr = fi_addr;
                i
            }
            None => {
                self.peers.push(Peer {
                    addr,
                    region: None,
                    connected: false,
                    token: 0,
                    pid: 0,
                    fi_addr,
                    dead: false,
                    unordered: 0,
                    uncleared: 0,
                    share_refused: false,
                    retrying: false,
                    held_retries: VecDeque::new(),
                });
                self.peers.len() - 1
            }
        };
        self.by_addr.insert(fi_addr, idx);
        Ok(idx)
    }

    /// Whether a name of the default form `fi_shm://<pid>:…` names a process that is gone.
    fn owner_gone(addr: &str) -> bool {
        addr.strip_prefix("fi_shm://")
            .and_then(|b| b.split(':').next())
            .and_then(|pid| pid.parse::<i32>().ok())
            .is_some_and(|pid| pid > 0 && !crate::sys::os::process_alive(pid))
    }

    /// Maps a peer's region (lazily) and sends it our CONNECT once. Borrowed, not cloned: a
    /// reference count's locked instruction right after a push would wait for the store to
    /// the peer's ring to leave our core.
    fn connect(&mut self, p: usize) -> Result<&Region> {
        if self.peers[p].dead {
            return Err(Errno::CONNABORTED);
        }
        if self.peers[p].region.is_none() {
            let r = Region::open(&region_name(&self.peers[p].addr)).map_err(|e| {
                if e != Errno::NOENT {
                    e
                } else if Self::owner_gone(&self.peers[p].addr) {
                    // Its region was cleaned up after it died: it never comes back.
                    Errno::CONNABORTED
                } else {
                    // Not created yet: the peer may still be starting (as upstream).
                    Errno::AGAIN
                }
            })?;
            let peer = &mut self.peers[p];
            peer.token = r.token();
            peer.pid = r.pid() as i32;
            peer.region = Some(Arc::new(r));
        }
        let peer = &self.peers[p];
        let Some(r) = peer.region.as_deref() else {
            return Err(Errno::CONNABORTED);
        };
        if !peer.connected {
            let mut c = Cmd::new(OP_CONNECT, self.token);
            let name = self.name.as_bytes();
            let n = name.len().min(BODY);
            c.body[..n].copy_from_slice(&name[..n]);
            c.len = n as u64;
            c.aux = u64::from(crate::sys::os::pid());
            let b = c.as_bytes();
            if !r.push(b, Cmd::wire_len(b)) {
                return Err(Errno::AGAIN);
            }
            self.peers[p].connected = true;
        }
        // Reborrowed after the flag above is set.
        self.peers[p].region.as_deref().ok_or(Errno::CONNABORTED)
    }

    /// Pushes a data-path command; `AGAIN` if the ring is full, an error if the peer is gone.
    fn push_cmd(&mut self, p: usize, c: &Cmd) -> Result<()> {
        // A posted operation waits behind our copies still to be cleared, and behind responses
        // queued for the peer (a COPIED must reach it before what we post next).
        let posted = matches!(c.op, OP_MSG | OP_WRITE | OP_READ | OP_ATOMIC);
        let peer = &self.peers[p];
        let passes =
            peer.unordered == 0 || (c.flags & F_MAY_COPY != 0 && peer.unordered == peer.uncleared);
        if posted && (!passes || self.queued_for(p)) {
            return Err(Errno::AGAIN);
        }
        let b = c.as_bytes();
        let r = self.connect(p)?;
        if r.push(b, Cmd::wire_len(b)) {
            return Ok(());
        }
        if r.owner_gone() {
            self.peers[p].dead = true;
            return Err(Errno::CONNABORTED);
        }
        Err(Errno::AGAIN)
    }

    /// Whether responses to peer `p` wait in the outbox (what follows must queue behind them).
    fn queued_for(&self, p: usize) -> bool {
        !self.outbox.is_empty() && self.outbox.iter().any(|(q, _)| *q == p)
    }

    /// Sends a response; queues it when the peer's ring is full.
    fn respond(&mut self, p: usize, c: &Cmd) {
        let b = c.as_bytes();
        if !self.queued_for(p)
            && let Ok(r) = self.connect(p)
            && r.push(b, Cmd::wire_len(b))
        {
            return;
        }
        // Boxed only when it has to wait: a full ring is rare.
        self.outbox.push_back((p, Box::new(*c)));
    }

    fn flush_outbox(&mut self) {
        let mut left = VecDeque::new();
        while let Some((p, b)) = self.outbox.pop_front() {
            if self.peers[p].dead {
                continue;
            }
            let sent = !left.iter().any(|(q, _): &(usize, Box<Cmd>)| *q == p)
                && self
                    .connect(p)
                    .is_ok_and(|r| r.push(b.as_bytes(), Cmd::wire_len(b.as_bytes())));
            if !sent {
                left.push_back((p, b));
            }
        }
        self.outbox = left;
    }

    /// Our copy of a cleared RMA is done: report it to the target (`OP_COPIED`: it counts it
    /// and reports CQ data) and complete.
    fn copied(&mut self, p: usize, op_id: u64, read: bool, len: usize, cmd: Option<&Cmd>) {
        let mut done = Cmd::new(OP_COPIED, self.token);
        done.len = len as u64;
        if read {
            done.flags |= F_READ;
        } else if let Some(rc) = cmd
            && rc.flags & F_CQ_DATA != 0
        {
            done.flags |= F_CQ_DATA;
            done.data = rc.data;
        }
        self.respond(p, &done);
        if let Some(tx) = self.tx_ops.remove(op_id) {
            self.release_order(&tx);
            self.complete_tx(tx.context, tx.flags, tx.cq_flags, tx.len, tx.cntr);
        }
    }

    /// A cleared RMA could not be copied: it fails (a target process gone since it answered
    /// fails it as any dead peer does).
    fn copy_failed(&mut self, op_id: u64, e: Errno) {
        let e = if e.0 == libc::ESRCH {
            Errno::CONNABORTED
        } else {
            e
        };
        if let Some(tx) = self.tx_ops.remove(op_id) {
            self.release_order(&tx);
            self.fail_tx(tx.context, tx.cq_flags, e, tx.cntr);
        }
    }

    /// An operation counted in its peer's `unordered` is done (or failed).
    fn release_order(&mut self, tx: &TxOp) {
        if tx.unordered {
            let peer = &mut self.peers[tx.peer];
            peer.unordered = peer.unordered.saturating_sub(1);
        }
        if tx.retried {
            self.peers[tx.peer].retrying = false;
            if let Some(next) = self.peers[tx.peer].held_retries.pop_front() {
                self.peers[tx.peer].retrying = true;
                self.respond(tx.peer, &next);
            }
        }
    }

    /// Sends an RMA command of ours again, for the target to copy (ours was refused), once the
    /// previous such command to that peer is done.
    fn send_retry(&mut self, p: usize, rc: Box<Cmd>) {
        if let Some(tx) = self.tx_ops.get_mut(rc.op_id) {
            tx.retried = true;
        }
        if self.peers[p].retrying {
            self.peers[p].held_retries.push_back(rc);
        } else {
            self.peers[p].retrying = true;
            self.respond(p, &rc);
        }
    }

    fn ack(&mut self, p: usize, op_id: u64, status: Result<()>, len: usize) {
        let mut c = Cmd::new(OP_ACK, self.token);
        c.op_id = op_id;
        c.len = len as u64;
        c.status = status.err().map_or(0, |e| e.0);
        self.respond(p, &c);
    }
}

/// Remote ranges of an iov list (for the handler's cross-memory attach).
fn remotes(iov: &[IoVec]) -> Vec<Remote> {
    iov.iter()
        .map(|v| Remote {
            addr: v.addr() as u64,
            len: v.len(),
        })
        .collect()
}

fn copy_in(iov: &[IoVec], copy_len: usize) -> Vec<u8> {
    let mut v = vec![0u8; copy_len];
    gather(iov, 0, &mut v);
    v
}

// ---- posting ----

impl ShmEndpoint {
    fn check_iov(&self, iov: &[IoVec]) -> Result<()> {
        if iov.len() > MAX_IOV {
            Err(Errno::INVAL)
        } else {
            Ok(())
        }
    }

    fn send_msg(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        self.check_iov(op.iov)?;
        if tagged && self.caps & FI_TAGGED == 0 || !tagged && self.caps & FI_MSG == 0 {
            return Err(Errno::NOSYS);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let len = iov_len(op.iov);
        // fi_inject and the FI_INJECT flag (on the call or in op_flags) alike.
        if flags & FI_INJECT != 0 && len > INJECT_SIZE {
            return Err(Errno::MSGSIZE);
        }
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let p = g.peer_for(op.addr)?;
        let mut c = Cmd::new(OP_MSG, g.token);
        c.len = len as u64;
        c.tag = op.tag;
        c.data = op.data;
        if tagged {
            c.flags |= F_TAGGED;
        }
        if flags & FI_REMOTE_CQ_DATA != 0 {
            c.flags |= F_CQ_DATA;
        }
        let cq_flags = FI_SEND | if tagged { FI_TAGGED } else { FI_MSG };
        // An injected buffer is copied before the call returns, so it completes then.
        let delivery = flags & FI_DELIVERY_COMPLETE != 0 && flags & FI_INJECT == 0;
        if len <= INLINE_MAX && !delivery {
            gather(op.iov, 0, &mut c.body[..len]);
            g.push_cmd(p, &c)?;
            g.complete_tx(op.context, flags, cq_flags, len, CntrKind::Send);
            return Ok(());
        }
        if len <= INJECT_SIZE && !delivery {
            let region = g.region()?.clone();
            let b = region.buf_alloc().ok_or(Errno::AGAIN)?;
            region.buf_fill(b, len, |dst| {
                gather(op.iov, 0, dst);
            });
            c.proto = PROTO_BOUNCE;
            c.aux = u64::from(b);
            if let Err(e) = g.push_cmd(p, &c) {
                region.buf_release(b);
                return Err(e);
            }
            g.complete_tx(op.context, flags, cq_flags, len, CntrKind::Send);
            return Ok(());
        }
        // Rendezvous: the receiver copies from our memory (or asks us to push it), then ACKs.
        let mut tx = TxOp {
            peer: p,
            kind: TxKind::Msg,
            context: op.context,
            flags,
            cq_flags,
            len,
            iov: op.iov.to_vec(),
            result: Vec::new(),
            bounce: None,
            push: None,
            may_copy: None,
            shared: None,
            retried: false,
            unordered: false,
            cntr: CntrKind::Send,
        };
        c.flags |= F_ACK;
        if len <= INLINE_MAX {
            gather(op.iov, 0, &mut c.body[..len]);
        } else if self.cma {
            c.proto = PROTO_IOV;
            c.aux = op.iov.len() as u64;
            c.put_iovs(0, &remotes(op.iov));
        } else {
            c.proto = PROTO_SEG;
        }
        if op.call == Call::Inject {
            tx.flags &= !FI_COMPLETION;
        }
        let id = g.tx_ops.insert(tx);
        c.op_id = id;
        if let Err(e) = g.push_cmd(p, &c) {
            g.tx_ops.remove(id);
            return Err(e);
        }
        Ok(())
    }

    fn post_recv(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        self.check_iov(op.iov)?;
        if tagged && self.caps & FI_TAGGED == 0 || !tagged && self.caps & FI_MSG == 0 {
            return Err(Errno::NOSYS);
        }
        let flags = self.flags.resolve_rx(op.call, op.flags);
        if flags & FI_MULTI_RECV != 0 && (tagged || self.caps & FI_MULTI_RECV == 0) {
            return Err(Errno::BADFLAGS);
        }
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let src = if self.caps & FI_DIRECTED_RECV != 0 {
            op.addr
        } else {
            FI_ADDR_UNSPEC
        };
        if src != FI_ADDR_UNSPEC && g.rxq.lock().has_unknown_sources() {
            self.resolve_sources(&mut g);
        }
        let recv = Recv::new(op.iov, src, op.tag, op.ignore, op.context, flags);
        if tagged && flags & (FI_PEEK | FI_CLAIM) != 0 {
            // A peek looks at what has arrived: take in what is waiting in the ring first.
            self.progress_locked(&mut g);
            return self.peek_or_claim(&mut g, recv, flags);
        }
        let context = recv.context;
        let mut outcome = g.rxq.lock().post(recv, tagged);
        // A multi-receive buffer takes every waiting message that fits, not just the first
        // (fabtests' multi_recv hung: messages that arrived while both halves were full stayed
        // unexpected after the application reposted a half).
        while let PostOutcome::Matched(m) = outcome {
            let (recv, u) = *m;
            self.deliver(&mut g, recv, tagged, u);
            if flags & FI_MULTI_RECV == 0 {
                break;
            }
            outcome = match g.rxq.lock().rematch_multi(context) {
                Some(m) => PostOutcome::Matched(m),
                None => PostOutcome::Queued,
            };
        }
        Ok(())
    }

    /// Senders of waiting messages that were not in the AV when the messages arrived may be
    /// now: give those messages their address before a directed receive looks for them.
    fn resolve_sources(&self, g: &mut Inner) {
        let mine = |u: &Pending| !matches!(u, Pending::Foreign(_));
        let origins = g.rxq.lock().unknown_origins(mine);
        for p in origins {
            if p < g.peers.len() {
                g.refresh_fi_addr(p);
            }
        }
        let peers = &g.peers;
        g.rxq.lock().resolve_sources(|u, p| {
            peers
                .get(p)
                .filter(|_| mine(u))
                .map(|peer| peer.fi_addr)
                .filter(|a| *a != FI_ADDR_NOTAVAIL)
        });
    }

    /// fi_tagged(3) FI_PEEK (with FI_CLAIM / FI_DISCARD) and FI_CLAIM receives.
    fn peek_or_claim(&self, g: &mut Inner, recv: Recv, flags: u64) -> Result<()> {
        let cq = g.rx_cq.clone();
        if flags & FI_PEEK == 0 {
            // A claim: take the message a peek reserved for this context.
            let u = g.rxq.lock().claim(recv.context).ok_or(Errno::NOMSG)?;
            if flags & FI_DISCARD != 0 {
                let tag = u.tag;
                self.discard(g, u);
                // The completion carries the message's tag (fi_tagged(3); fabtests'
                // rdm_tagged_peek waits for a completion with that tag).
                if let Some(cq) = &cq {
                    cq.push(CqEntry {
                        op_context: recv.context,
                        flags: FI_RECV | FI_TAGGED,
                        tag,
                        src_addr: FI_ADDR_NOTAVAIL,
                        ..Default::default()
                    });
                }
                return Ok(());
            }
            self.deliver(g, recv, true, u);
            return Ok(());
        }
        let (found, dropped) =
            g.rxq
                .lock()
                .peek(&recv, flags & FI_CLAIM != 0, flags & FI_DISCARD != 0);
        match found {
            Peek::NoMatch => {
                if let Some(cq) = &cq {
                    let mut e = CqErrEntry::new(recv.context, FI_RECV | FI_TAGGED, Errno::NOMSG);
                    e.tag = recv.tag;
                    cq.push_err(e);
                }
            }
            Peek::Found {
                src,
                tag,
                len,
                data,
                flags: f,
            } => {
                if let Some(u) = dropped {
                    self.discard(g, u);
                }
                if let Some(cq) = &cq {
                    let src_addr = g.source_id(src);
                    cq.push(CqEntry {
                        op_context: recv.context,
                        flags: FI_RECV | FI_TAGGED | f,
                        len,
                        buf: 0,
                        data,
                        tag,
                        src_addr,
                    });
                }
            }
        }
        Ok(())
    }

    /// Drops an unexpected message (FI_DISCARD): a waiting sender is told it was delivered.
    fn discard(&self, g: &mut Inner, u: Unexpected<Pending>) {
        if let Pending::Remote(c) = u.payload
            && let Some(&p) = g.by_token.get(&c.sender)
        {
            g.ack(p, c.op_id, Ok(()), 0);
        }
    }

    /// Moves an unexpected message into a receive that matched it.
    fn deliver(&self, g: &mut Inner, recv: Recv, tagged: bool, u: Unexpected<Pending>) {
        let cq_data = u.flags & FI_REMOTE_CQ_DATA != 0;
        match u.payload {
            Pending::Inline(data) => {
                let got = scatter(&recv.target(), 0, &data);
                g.complete_recv(
                    &recv,
                    tagged,
                    u.src,
                    u.tag,
                    u.data,
                    cq_data,
                    data.len(),
                    got,
                );
            }
            Pending::Remote(c) => match g.by_token.get(&c.sender) {
                Some(&p) if !g.peers[p].dead => self.receive_remote(g, p, &c, recv, tagged, u.src),
                _ => {
                    if let Some(cq) = &g.rx_cq {
                        cq.push_err(CqErrEntry::new(
                            recv.context,
                            FI_RECV | if tagged { FI_TAGGED } else { FI_MSG },
                            Errno::CONNABORTED,
                        ));
                    }
                }
            },
            // Never matched here: the endpoint we serve takes its own messages out itself.
            Pending::Foreign(_) => g.dropped += 1,
        }
    }

    /// A message whose data is still in the sender's memory (iov or segmented path).
    fn receive_remote(&self, g: &mut Inner, p: usize, c: &Cmd, recv: Recv, tagged: bool, src: u64) {
        let total = c.len as usize;
        let dest = recv.target();
        let room = iov_len(&dest);
        let take = total.min(room);
        let cq_data = c.flags & F_CQ_DATA != 0;
        if c.proto == PROTO_INLINE {
            let got = scatter(&dest, 0, &c.body[..total.min(BODY)]);
            g.complete_recv(&recv, tagged, src, c.tag, c.data, cq_data, total, got);
            g.ack(p, c.op_id, Ok(()), got);
            return;
        }
        if c.proto == PROTO_IOV && self.cma {
            let remote = c.iovs(0, (c.aux as usize).min(MAX_IOV)).unwrap_or_default();
            let pid = g.peers[p].pid;
            match cma::read_from(pid, &dest, 0, &remote, 0, take) {
                Ok(()) => {
                    g.complete_recv(&recv, tagged, src, c.tag, c.data, cq_data, total, take);
                    g.ack(p, c.op_id, Ok(()), take);
                    return;
                }
                Err(e) if e == Errno::PERM || e == Errno::NOSYS => {
                    crate::fi_warn!(
                        PROV_NAME,
                        Subsys::EpData,
                        "cross-memory attach refused ({e}); using bounce buffers"
                    );
                }
                Err(e) => {
                    // The sender's memory is unreadable (bad iov) or the sender is gone.
                    if let Some(cq) = &g.rx_cq {
                        cq.push_err(CqErrEntry::new(
                            recv.context,
                            FI_RECV | if tagged { FI_TAGGED } else { FI_MSG },
                            e,
                        ));
                    }
                    g.ack(p, c.op_id, Err(e), 0);
                    return;
                }
            }
        }
        // Segmented: ask the sender to push the first `take` bytes.
        let olen = total - take;
        let rx = RxOp {
            peer: p,
            sender_op: c.op_id,
            dest: dest.to_vec(),
            len: take,
            got: 0,
            done: RxDone::Recv {
                recv,
                tagged,
                src,
                tag: c.tag,
                data: c.data,
                cq_data,
                olen,
            },
        };
        self.start_pull(g, p, c.op_id, rx);
    }

    /// Asks the source of `sender_op` to push `rx.len` bytes to a new rx op.
    fn start_pull(&self, g: &mut Inner, p: usize, sender_op: u64, rx: RxOp) {
        let len = rx.len;
        let id = g.rx_ops.insert(rx);
        if len == 0 {
            self.finish_rx(g, id);
            return;
        }
        let mut go = Cmd::new(OP_GO, g.token);
        go.op_id = sender_op;
        go.aux = id;
        go.len = len as u64;
        g.respond(p, &go);
    }

    fn finish_rx(&self, g: &mut Inner, id: u64) {
        let Some(rx) = g.rx_ops.remove(id) else {
            return;
        };
        match rx.done {
            RxDone::Recv {
                recv,
                tagged,
                src,
                tag,
                data,
                cq_data,
                olen,
            } => {
                g.complete_recv(
                    &recv,
                    tagged,
                    src,
                    tag,
                    data,
                    cq_data,
                    rx.len + olen,
                    rx.got,
                );
                g.ack(rx.peer, rx.sender_op, Ok(()), rx.got);
            }
            RxDone::RemoteWrite { cq_data } => {
                self.remote_write_done(g, rx.len, cq_data);
                g.ack(rx.peer, rx.sender_op, Ok(()), rx.len);
            }
            RxDone::PushRead { .. } => {}
        }
    }

    fn remote_write_done(&self, g: &Inner, len: usize, cq_data: Option<u64>) {
        if let Some(c) = &g.cntr.remote_write {
            c.complete(len);
        }
        if let Some(data) = cq_data
            && let Some(cq) = &g.rx_cq
        {
            cq.push(CqEntry {
                op_context: 0,
                flags: FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA,
                len,
                data,
                src_addr: FI_ADDR_NOTAVAIL,
                ..Default::default()
            });
        }
    }

    fn rma(&self, op: &RmaOp<'_>, read: bool) -> Result<()> {
        self.check_iov(op.iov)?;
        if self.caps & FI_RMA == 0 {
            return Err(Errno::NOSYS);
        }
        if op.rma_iov.is_empty() || op.rma_iov.len() > MAX_IOV {
            return Err(Errno::INVAL);
        }
        let len = iov_len(op.iov);
        if op.rma_iov.iter().map(|r| r.len).sum::<usize>() != len {
            return Err(Errno::INVAL);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        if flags & FI_INJECT != 0 && len > INJECT_SIZE {
            return Err(Errno::MSGSIZE);
        }
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let p = g.peer_for(op.addr)?;
        let mut c = Cmd::new(if read { OP_READ } else { OP_WRITE }, g.token);
        c.len = len as u64;
        c.aux2 = op.rma_iov.len() as u64;
        c.flags |= F_ACK;
        let rma: Vec<(u64, u64, u64)> = op
            .rma_iov
            .iter()
            .map(|r| (r.addr, r.len as u64, r.key))
            .collect();
        c.put_rma(&rma);
        if !read && flags & FI_REMOTE_CQ_DATA != 0 {
            c.flags |= F_CQ_DATA;
            c.data = op.data;
        }
        let mut bounce = None;
        if read {
            c.proto = if self.cma { PROTO_IOV } else { PROTO_SEG };
            c.aux = op.iov.len() as u64;
            c.put_iovs(RMA_AREA, &remotes(op.iov));
            if self.cma && len > INJECT_SIZE {
                c.flags |= F_MAY_COPY;
            }
        } else if len <= RMA_INLINE {
            gather(op.iov, 0, &mut c.body[RMA_AREA..RMA_AREA + len]);
        } else if op.call == Call::Inject || len <= INJECT_SIZE {
            let region = g.region()?.clone();
            let b = region.buf_alloc().ok_or(Errno::AGAIN)?;
            region.buf_write(b, 0, &copy_in(op.iov, len));
            c.proto = PROTO_BOUNCE;
            c.aux = u64::from(b);
            bounce = Some(b);
        } else if self.cma {
            c.proto = PROTO_IOV;
            c.aux = op.iov.len() as u64;
            c.put_iovs(RMA_AREA, &remotes(op.iov));
            c.flags |= F_MAY_COPY;
        } else {
            c.proto = PROTO_SEG;
        }
        let (cq_flags, cntr, kind) = if read {
            (FI_READ | FI_RMA, CntrKind::Read, TxKind::Read)
        } else {
            (FI_WRITE | FI_RMA, CntrKind::Write, TxKind::Write)
        };
        let tx = TxOp {
            peer: p,
            kind,
            context: op.context,
            flags,
            cq_flags,
            len,
            iov: if op.call == Call::Inject {
                Vec::new()
            } else {
                op.iov.to_vec()
            },
            result: Vec::new(),
            bounce,
            push: None,
            may_copy: None,
            shared: None,
            retried: false,
            unordered: false,
            cntr,
        };
        let id = g.tx_ops.insert(tx);
        c.op_id = id;
        if let Err(e) = g.push_cmd(p, &c) {
            g.tx_ops.remove(id);
            if let (Some(b), Some(r)) = (bounce, &g.region) {
                r.buf_release(b);
            }
            return Err(e);
        }
        let may_copy = c.flags & F_MAY_COPY != 0;
        if may_copy || c.proto == PROTO_SEG {
            let peer = &mut g.peers[p];
            peer.unordered += 1;
            peer.uncleared += u32::from(may_copy);
            if let Some(tx) = g.tx_ops.get_mut(id) {
                tx.unordered = true;
                tx.may_copy = may_copy.then(|| Box::new(c));
            }
        }
        Ok(())
    }

    fn do_atomic(&self, op: &AtomicOp<'_>) -> Result<()> {
        if self.caps & FI_ATOMIC == 0 {
            return Err(Errno::NOSYS);
        }
        if !atomic::valid(op.kind, op.datatype, op.op) {
            return Err(Errno::OPNOTSUPP);
        }
        let size = atomic::datatype_size(op.datatype).ok_or(Errno::INVAL)?;
        if op.rma_ioc.is_empty() || op.rma_ioc.len() > MAX_IOV || op.iov.len() > MAX_IOV {
            return Err(Errno::INVAL);
        }
        let count: usize = op.rma_ioc.iter().map(|r| r.count).sum();
        let len = count.checked_mul(size).ok_or(Errno::INVAL)?;
        let reads_only = op.kind == AtomicKind::Fetch && op.op == FI_ATOMIC_READ;
        if (!reads_only && iov_len(op.iov) != len)
            || (op.kind == AtomicKind::Compare && iov_len(op.compare) != len)
            || (op.kind != AtomicKind::Write && iov_len(op.result) != len)
        {
            return Err(Errno::INVAL);
        }
        let payload = if op.kind == AtomicKind::Compare {
            2 * len
        } else if reads_only {
            0
        } else {
            len
        };
        let flags = self.flags.resolve_tx(op.call, op.flags);
        if payload > BOUNCE_SIZE || len > BOUNCE_SIZE || flags & FI_INJECT != 0 && len > INJECT_SIZE
        {
            return Err(Errno::MSGSIZE);
        }
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let p = g.peer_for(op.addr)?;
        let mut c = Cmd::new(OP_ATOMIC, g.token);
        c.len = len as u64;
        c.aux2 =
            (op.rma_ioc.len() as u64) | (u64::from(op.datatype) << 8) | (u64::from(op.op) << 32);
        c.flags |= F_ACK;
        match op.kind {
            AtomicKind::Fetch => c.flags |= F_FETCH,
            AtomicKind::Compare => c.flags |= F_COMPARE,
            AtomicKind::Write => {}
        }
        if flags & FI_REMOTE_CQ_DATA != 0 {
            c.flags |= F_CQ_DATA;
            c.data = op.data;
        }
        let rma: Vec<(u64, u64, u64)> = op
            .rma_ioc
            .iter()
            .map(|r| (r.addr, r.count as u64, r.key))
            .collect();
        c.put_rma(&rma);
        let mut data = copy_in(op.iov, if reads_only { 0 } else { len });
        if op.kind == AtomicKind::Compare {
            data.extend(copy_in(op.compare, len));
        }
        let mut bounce = None;
        if data.len() <= RMA_INLINE {
            c.body[RMA_AREA..RMA_AREA + data.len()].copy_from_slice(&data);
        } else {
            let region = g.region()?.clone();
            let b = region.buf_alloc().ok_or(Errno::AGAIN)?;
            region.buf_write(b, 0, &data);
            c.proto = PROTO_BOUNCE;
            c.aux = u64::from(b);
            bounce = Some(b);
        }
        let cq_flags = FI_ATOMIC
            | match op.kind {
                AtomicKind::Write => FI_WRITE,
                _ => FI_READ,
            };
        let tx = TxOp {
            peer: p,
            kind: TxKind::Atomic,
            context: op.context,
            flags,
            cq_flags,
            len,
            iov: Vec::new(),
            result: op.result.to_vec(),
            bounce,
            push: None,
            may_copy: None,
            shared: None,
            retried: false,
            unordered: false,
            cntr: if op.kind == AtomicKind::Write {
                CntrKind::Write
            } else {
                CntrKind::Read
            },
        };
        let id = g.tx_ops.insert(tx);
        c.op_id = id;
        if let Err(e) = g.push_cmd(p, &c) {
            g.tx_ops.remove(id);
            if let (Some(b), Some(r)) = (bounce, &g.region) {
                r.buf_release(b);
            }
            return Err(e);
        }
        Ok(())
    }
}

// ---- progress: handling commands ----

impl ShmEndpoint {
    fn progress_locked(&self, g: &mut Inner) {
        // Borrowed per use, not cloned: this runs on every CQ poll, and an `Arc` clone and drop
        // are two locked instructions, each waiting for our stores to peers' rings to drain.
        match g.region.as_deref() {
            Some(r) => r.release_consumed(),
            None => return,
        }
        // Arrivals report their sender's index as the AV has it now.
        g.sync_av();
        if !g.outbox.is_empty() {
            g.flush_outbox();
        }
        // Commands are taken straight into `c`; past what each one used, it holds bytes of an
        // earlier one, which no handler reads (see `Region::pop`).
        let mut c = Cmd::new(0, 0);
        for _ in 0..PROGRESS_BATCH {
            if !g
                .region
                .as_deref()
                .is_some_and(|r| r.pop(c.as_bytes_mut(), Cmd::wire_len))
            {
                break;
            }
            self.handle(g, &c);
        }
        self.push_segments(g);
        if (!g.tx_ops.is_empty() || !g.rx_ops.is_empty())
            && g.last_liveness.elapsed() >= LIVENESS_PERIOD
        {
            g.last_liveness = Instant::now();
            self.check_liveness(g);
        }
    }

    fn handle(&self, g: &mut Inner, c: &Cmd) {
        if c.op == OP_CONNECT {
            self.handle_connect(g, c);
            return;
        }
        let Some(&p) = g.by_token.get(&c.sender) else {
            g.dropped += 1;
            return;
        };
        match c.op {
            OP_MSG => self.handle_msg(g, p, c),
            OP_WRITE => self.handle_write(g, p, c),
            OP_READ => self.handle_read(g, p, c),
            OP_ATOMIC => self.handle_atomic(g, p, c),
            OP_ACK => self.handle_ack(g, p, c),
            OP_GO => self.handle_go(g, p, c),
            OP_DATA => self.handle_data(g, p, c),
            OP_CLEARED => self.handle_cleared(g, p, c),
            OP_COPIED => self.handle_copied(g, c),
            OP_PART => self.handle_part(g, p, c),
            _ => g.dropped += 1,
        }
    }

    fn handle_connect(&self, g: &mut Inner, c: &Cmd) {
        let n = (c.len as usize).min(BODY);
        let addr = String::from_utf8_lossy(&c.body[..n]).into_owned();
        // The sender's region is mapped to answer it. If it is already gone (the sender sent and
        // exited), what it sent inline is still delivered but nothing can be answered; a region
        // under that name with another token is a different endpoint and is not attached.
        let region = match Region::open(&region_name(&addr)) {
            Ok(r) if r.token() == c.sender => Some(Arc::new(r)),
            _ => None,
        };
        let fi_addr = g.av_index(&addr).unwrap_or(FI_ADDR_NOTAVAIL);
        let existing = g.peers.iter().position(|p| p.addr == addr);
        let idx = match existing {
            Some(i) => i,
            None => {
                g.peers.push(Peer {
                    addr,
                    region: None,
                    connected: false,
                    token: 0,
                    pid: 0,
                    fi_addr,
                    dead: false,
                    unordered: 0,
                    uncleared: 0,
                    share_refused: false,
                    retrying: false,
                    held_retries: VecDeque::new(),
                });
                g.peers.len() - 1
            }
        };
        let peer = &mut g.peers[idx];
        if peer.token != c.sender {
            // A restarted peer under the same name: a new connection.
            peer.connected = false;
            peer.dead = false;
        }
        peer.token = c.sender;
        peer.pid = region.as_ref().map_or(0, |r| r.pid() as i32);
        peer.dead = region.is_none();
        peer.connected = region.is_some() && peer.connected;
        peer.region = region;
        if peer.fi_addr == FI_ADDR_NOTAVAIL {
            peer.fi_addr = fi_addr;
        }
        if peer.fi_addr != FI_ADDR_NOTAVAIL {
            let a = peer.fi_addr;
            g.by_addr.insert(a, idx);
        }
        g.by_token.insert(c.sender, idx);
    }

    fn handle_msg(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let tagged = c.flags & F_TAGGED != 0;
        if (tagged && self.caps & FI_TAGGED == 0) || (!tagged && self.caps & FI_MSG == 0) {
            g.dropped += 1;
            return;
        }
        let src = g.refresh_fi_addr(p);
        let total = c.len as usize;
        let cq_data = c.flags & F_CQ_DATA != 0;
        if self.place_small(g, p, c, src, tagged) {
            return;
        }
        let payload = match c.proto {
            // Delivery-complete small messages are acknowledged when placed: keep the command.
            PROTO_INLINE if total <= BODY && c.flags & F_ACK != 0 => Pending::Remote(Box::new(*c)),
            PROTO_INLINE if total <= BODY => Pending::Inline(c.body[..total].to_vec()),
            PROTO_BOUNCE if total <= BOUNCE_SIZE => {
                let Some(r) = g.peers[p].region.clone() else {
                    // The sender's region was gone before we could map it (removed by hand or
                    // by a sweep): the data is unreachable.
                    g.dropped += 1;
                    crate::fi_warn!(
                        PROV_NAME,
                        Subsys::EpData,
                        "message of {total} bytes from {} lost: its region is gone",
                        g.peers[p].addr
                    );
                    return;
                };
                let data = r.buf_with(c.aux as u32, 0, total, |s| s.to_vec());
                r.buf_release(c.aux as u32);
                match data {
                    Some(d) => Pending::Inline(d),
                    None => {
                        g.dropped += 1;
                        return;
                    }
                }
            }
            PROTO_IOV | PROTO_SEG => Pending::Remote(Box::new(*c)),
            _ => {
                g.dropped += 1;
                return;
            }
        };
        let u = Unexpected {
            src,
            tag: c.tag,
            len: total,
            data: c.data,
            flags: if cq_data { FI_REMOTE_CQ_DATA } else { 0 },
            claimed_by: None,
            origin: p,
            payload,
        };
        // Matching and parking happen under one lock: a receive posted in between (by another
        // thread, or by the endpoint we serve) would otherwise miss this message.
        let mut q = g.rxq.lock();
        match q.match_incoming(src, c.tag, tagged, total) {
            Some(recv) => {
                drop(q);
                self.deliver(g, recv, tagged, u);
            }
            None => q.add_unexpected(u, tagged),
        }
    }

    /// A small message (inline, or in one of the sender's bounce buffers) that a posted receive
    /// matches goes straight into that receive's buffer; without this it went through a
    /// temporary Vec (an allocation and a second copy per message). False: not placed here.
    fn place_small(&self, g: &mut Inner, p: usize, c: &Cmd, src: u64, tagged: bool) -> bool {
        let total = c.len as usize;
        let small = match c.proto {
            PROTO_INLINE => total <= BODY && c.flags & F_ACK == 0,
            PROTO_BOUNCE => total <= BOUNCE_SIZE,
            _ => false,
        };
        if !small {
            return false;
        }
        let region = if c.proto == PROTO_BOUNCE {
            match g.peers[p].region.clone() {
                Some(r) => Some(r),
                None => return false,
            }
        } else {
            None
        };
        let Some(recv) = g.rxq.lock().match_incoming(src, c.tag, tagged, total) else {
            return false;
        };
        let dest = recv.target();
        let got = match &region {
            None => Some(scatter(&dest, 0, &c.body[..total])),
            Some(r) => {
                let got = r.buf_with(c.aux as u32, 0, total, |s| scatter(&dest, 0, s));
                r.buf_release(c.aux as u32);
                got
            }
        };
        let cq_data = c.flags & F_CQ_DATA != 0;
        match got {
            Some(got) => g.complete_recv(&recv, tagged, src, c.tag, c.data, cq_data, total, got),
            // A bounce index out of range: the sender is broken; the receive fails.
            None => {
                g.dropped += 1;
                if let Some(cq) = &g.rx_cq {
                    cq.push_err(CqErrEntry::new(
                        recv.context,
                        FI_RECV | if tagged { FI_TAGGED } else { FI_MSG },
                        Errno::IO,
                    ));
                }
            }
        }
        true
    }

    /// Validates every target entry of an RMA/atomic command against our MR map.
    fn verify(&self, c: &Cmd, access: u64, elem: usize) -> Result<Vec<IoVec>> {
        let count = (c.aux2 & 0xff) as usize;
        let rma = c.rma(count).ok_or(Errno::INVAL)?;
        let mut out = Vec::with_capacity(count);
        let mut total = 0usize;
        for (addr, n, key) in rma {
            let bytes = usize::try_from(n)
                .ok()
                .and_then(|n| n.checked_mul(elem))
                .ok_or(Errno::INVAL)?;
            total = total.checked_add(bytes).ok_or(Errno::INVAL)?;
            out.extend(self.domain.mr_map.verify(key, addr, bytes, access)?);
        }
        if total != c.len as usize {
            return Err(Errno::INVAL);
        }
        Ok(out)
    }

    fn handle_write(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let cq_data = (c.flags & F_CQ_DATA != 0).then_some(c.data);
        let dest = match self.verify(c, FI_REMOTE_WRITE, 1) {
            Ok(d) => d,
            Err(e) => {
                if c.proto == PROTO_BOUNCE
                    && let Some(r) = &g.peers[p].region
                {
                    r.buf_release(c.aux as u32);
                }
                g.ack(p, c.op_id, Err(e), 0);
                return;
            }
        };
        let len = c.len as usize;
        if self.clear(g, p, c, &dest) {
            return;
        }
        let r = match c.proto {
            PROTO_INLINE if len <= RMA_INLINE => {
                scatter(&dest, 0, &c.body[RMA_AREA..RMA_AREA + len]);
                Ok(())
            }
            PROTO_BOUNCE => {
                let region = g.peers[p].region.clone();
                let r = region
                    .as_ref()
                    .and_then(|r| r.buf_with(c.aux as u32, 0, len, |s| scatter(&dest, 0, s)))
                    .map(|_| ())
                    .ok_or(Errno::INVAL);
                if let Some(region) = region {
                    region.buf_release(c.aux as u32);
                }
                r
            }
            PROTO_IOV if self.cma => {
                let remote = c
                    .iovs(RMA_AREA, (c.aux as usize).min(MAX_IOV))
                    .unwrap_or_default();
                // Sent again after a shared copy: our blocks are done (cmd::SHARE_BLOCK).
                let r = if c.flags & F_INITIATOR_BLOCKS != 0 {
                    let runs = share_runs(remotes(&dest), false);
                    cma::transfer_runs(g.peers[p].pid, &dest, &remote, &runs, false)
                } else {
                    cma::read_from(g.peers[p].pid, &dest, 0, &remote, 0, len)
                };
                match r {
                    Err(e) if refused(e) => Err(Errno::AGAIN),
                    r => r,
                }
            }
            PROTO_IOV | PROTO_SEG => Err(Errno::AGAIN),
            _ => Err(Errno::INVAL),
        };
        match r {
            Ok(()) => {
                self.remote_write_done(g, len, cq_data);
                g.ack(p, c.op_id, Ok(()), len);
            }
            Err(Errno::AGAIN) => {
                // Segmented: pull the data from the initiator through its bounce buffers.
                let rx = RxOp {
                    peer: p,
                    sender_op: c.op_id,
                    dest,
                    len,
                    got: 0,
                    done: RxDone::RemoteWrite { cq_data },
                };
                self.start_pull(g, p, c.op_id, rx);
            }
            Err(e) => g.ack(p, c.op_id, Err(e), 0),
        }
    }

    /// Lets the initiator of an RMA that offers to copy itself (`F_MAY_COPY`) do so, once its
    /// keys are checked: answers `OP_CLEARED` with our side of the copy (`ours`, already verified)
    /// and returns true. The initiator reports the copy with `OP_COPIED`. False: we copy.
    fn clear(&self, g: &mut Inner, p: usize, c: &Cmd, ours: &[IoVec]) -> bool {
        if c.flags & F_MAY_COPY == 0
            || c.proto != PROTO_IOV
            || !self.cma
            || ours.len() > MAX_CLEARED
        {
            return false;
        }
        let mut r = Cmd::new(OP_CLEARED, g.token);
        r.op_id = c.op_id;
        r.len = c.len;
        r.aux = ours.len() as u64;
        let ranges = remotes(ours);
        r.put_iovs(0, &ranges);
        // Our core would spin while the initiator copies: take our blocks of it (the kernel's
        // copy between processes is bound per core, so two halves at once take half the time).
        let runs = if g.peers[p].share_refused {
            Vec::new()
        } else {
            share_runs(ranges.iter().copied(), true)
        };
        if runs.is_empty() {
            g.respond(p, &r);
            return true;
        }
        r.flags |= F_SHARED;
        g.respond(p, &r);
        let theirs = c
            .iovs(RMA_AREA, (c.aux as usize).min(MAX_IOV))
            .unwrap_or_default();
        let pid = g.peers[p].pid;
        let copied = cma::transfer_runs(pid, ours, &theirs, &runs, c.op == OP_READ);
        let mut part = Cmd::new(OP_PART, g.token);
        part.op_id = c.op_id;
        if let Err(e) = copied {
            part.status = e.0;
            if refused(e) {
                g.peers[p].share_refused = true;
            }
        }
        g.respond(p, &part);
        true
    }

    fn handle_read(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let src = match self.verify(c, FI_REMOTE_READ, 1) {
            Ok(s) => s,
            Err(e) => {
                g.ack(p, c.op_id, Err(e), 0);
                return;
            }
        };
        let len = c.len as usize;
        if self.clear(g, p, c, &src) {
            return;
        }
        if c.proto == PROTO_IOV && self.cma {
            let remote = c
                .iovs(RMA_AREA, (c.aux as usize).min(MAX_IOV))
                .unwrap_or_default();
            let copied = if c.flags & F_INITIATOR_BLOCKS != 0 {
                let runs = share_runs(remotes(&src), false);
                cma::transfer_runs(g.peers[p].pid, &src, &remote, &runs, true)
            } else {
                cma::write_to(g.peers[p].pid, &src, 0, &remote, 0, len)
            };
            match copied {
                Ok(()) => {
                    if let Some(cn) = &g.cntr.remote_read {
                        cn.complete(len);
                    }
                    g.ack(p, c.op_id, Ok(()), len);
                    return;
                }
                Err(e) if e != Errno::PERM && e != Errno::NOSYS => {
                    g.ack(p, c.op_id, Err(e), 0);
                    return;
                }
                Err(_) => {}
            }
        }
        // Segmented: push our memory into the initiator's read op.
        if let Some(cn) = &g.cntr.remote_read {
            cn.complete(len);
        }
        let rx = RxOp {
            peer: p,
            sender_op: c.op_id,
            dest: src,
            len,
            got: 0,
            done: RxDone::PushRead {
                initiator_op: c.op_id,
            },
        };
        g.rx_ops.insert(rx);
    }

    fn handle_atomic(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let count = (c.aux2 & 0xff) as usize;
        let datatype = ((c.aux2 >> 8) & 0xff_ffff) as u32;
        let op = (c.aux2 >> 32) as u32;
        let kind = if c.flags & F_COMPARE != 0 {
            AtomicKind::Compare
        } else if c.flags & F_FETCH != 0 {
            AtomicKind::Fetch
        } else {
            AtomicKind::Write
        };
        let release = |g: &Inner| {
            if c.proto == PROTO_BOUNCE
                && let Some(r) = &g.peers[p].region
            {
                r.buf_release(c.aux as u32);
            }
        };
        let Some(size) = atomic::datatype_size(datatype)
            .filter(|_| atomic::valid(kind, datatype, op) && count > 0)
        else {
            release(g);
            g.ack(p, c.op_id, Err(Errno::OPNOTSUPP), 0);
            return;
        };
        let access = match (kind, op) {
            (AtomicKind::Fetch, FI_ATOMIC_READ) => FI_REMOTE_READ,
            (AtomicKind::Write, _) => FI_REMOTE_WRITE,
            _ => FI_REMOTE_READ | FI_REMOTE_WRITE,
        };
        let len = c.len as usize;
        let targets = match self.verify(c, access, size) {
            Ok(t) if len <= BOUNCE_SIZE => t,
            Ok(_) => {
                release(g);
                g.ack(p, c.op_id, Err(Errno::MSGSIZE), 0);
                return;
            }
            Err(e) => {
                release(g);
                g.ack(p, c.op_id, Err(e), 0);
                return;
            }
        };
        let reads_only = kind == AtomicKind::Fetch && op == FI_ATOMIC_READ;
        let plen = if kind == AtomicKind::Compare {
            2 * len
        } else if reads_only {
            0
        } else {
            len
        };
        let data = match c.proto {
            PROTO_INLINE if plen <= RMA_INLINE => Some(c.body[RMA_AREA..RMA_AREA + plen].to_vec()),
            PROTO_BOUNCE => g.peers[p]
                .region
                .as_ref()
                .and_then(|r| r.buf_with(c.aux as u32, 0, plen, |s| s.to_vec())),
            _ => None,
        };
        release(g);
        let Some(data) = data else {
            g.ack(p, c.op_id, Err(Errno::INVAL), 0);
            return;
        };
        let (src, cmp) = if kind == AtomicKind::Compare {
            data.split_at(len)
        } else {
            (&data[..], &[][..])
        };
        let mut result = if kind == AtomicKind::Write {
            Vec::new()
        } else {
            vec![0u8; len]
        };
        let mut off = 0;
        let mut status = Ok(());
        for t in &targets {
            let n = t.len();
            let s = if src.is_empty() {
                &[][..]
            } else {
                &src[off..off + n]
            };
            let k = if cmp.is_empty() {
                &[][..]
            } else {
                &cmp[off..off + n]
            };
            let r = if result.is_empty() {
                &mut [][..]
            } else {
                &mut result[off..off + n]
            };
            if let Err(e) = t.with_mut_slice(|dst| atomic::apply(kind, datatype, op, dst, s, k, r))
            {
                status = Err(e);
                break;
            }
            off += n;
        }
        if status.is_ok() {
            let cntr = if access == FI_REMOTE_READ {
                &g.cntr.remote_read
            } else {
                &g.cntr.remote_write
            };
            if let Some(cn) = cntr {
                cn.complete(len);
            }
            if c.flags & F_CQ_DATA != 0
                && let Some(cq) = &g.rx_cq
            {
                cq.push(CqEntry {
                    op_context: 0,
                    flags: FI_REMOTE_WRITE | FI_ATOMIC | FI_REMOTE_CQ_DATA,
                    len,
                    data: c.data,
                    src_addr: FI_ADDR_NOTAVAIL,
                    ..Default::default()
                });
            }
        }
        let mut ack = Cmd::new(OP_ACK, g.token);
        ack.op_id = c.op_id;
        ack.status = status.err().map_or(0, |e| e.0);
        ack.len = result.len() as u64;
        if ack.status == 0 && !result.is_empty() {
            if result.len() <= BODY {
                ack.body[..result.len()].copy_from_slice(&result);
            } else {
                match g
                    .region
                    .as_ref()
                    .and_then(|r| r.buf_alloc().map(|b| (r.clone(), b)))
                {
                    Some((r, b)) => {
                        r.buf_write(b, 0, &result);
                        ack.proto = PROTO_BOUNCE;
                        ack.aux = u64::from(b);
                    }
                    None => ack.status = Errno::AGAIN.0,
                }
            }
        }
        g.respond(p, &ack);
    }

    fn handle_ack(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let Some(tx) = g.tx_ops.get(c.op_id) else {
            g.dropped += 1;
            return;
        };
        if tx.peer != p {
            g.dropped += 1;
            return;
        }
        let Some(tx) = g.tx_ops.remove(c.op_id) else {
            return;
        };
        if tx.may_copy.is_some() {
            g.peers[p].uncleared = g.peers[p].uncleared.saturating_sub(1);
        }
        g.release_order(&tx);
        if let (Some(b), Some(r)) = (tx.bounce, &g.region) {
            r.buf_release(b);
        }
        if c.status != 0 {
            g.fail_tx(tx.context, tx.cq_flags, Errno(c.status), tx.cntr);
            return;
        }
        if tx.kind == TxKind::Atomic && !tx.result.is_empty() {
            let n = (c.len as usize).min(tx.len);
            let copied = match c.proto {
                PROTO_INLINE if n <= BODY => scatter(&tx.result, 0, &c.body[..n]) == n,
                PROTO_BOUNCE => {
                    let r = g.peers[p].region.clone();
                    let ok = r.as_ref().and_then(|r| {
                        r.buf_with(c.aux as u32, 0, n, |s| scatter(&tx.result, 0, s))
                    }) == Some(n);
                    if let Some(r) = r {
                        r.buf_release(c.aux as u32);
                    }
                    ok
                }
                _ => false,
            };
            if !copied {
                g.fail_tx(tx.context, tx.cq_flags, Errno::PROTO, tx.cntr);
                return;
            }
        }
        g.complete_tx(tx.context, tx.flags, tx.cq_flags, tx.len, tx.cntr);
    }

    /// The target cleared our RMA: copy it ourselves (our blocks of it, if shared), report it
    /// (`OP_COPIED`) and complete.
    fn handle_cleared(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let retry = match g.tx_ops.get_mut(c.op_id) {
            Some(tx) if tx.peer == p && tx.may_copy.is_some() => tx.may_copy.take(),
            _ => {
                g.dropped += 1;
                return;
            }
        };
        g.peers[p].uncleared = g.peers[p].uncleared.saturating_sub(1);
        let Some(tx) = g.tx_ops.get(c.op_id) else {
            return;
        };
        let (read, len) = (tx.kind == TxKind::Read, tx.len);
        let theirs = c.iovs(0, c.aux as usize).unwrap_or_default();
        let shared = c.flags & F_SHARED != 0;
        let pid = g.peers[p].pid;
        let r = if theirs.iter().map(|t| t.len).sum::<usize>() != len || c.len as usize != len {
            Err(Errno::PROTO)
        } else if shared {
            let runs = share_runs(theirs.iter().copied(), false);
            cma::transfer_runs(pid, &tx.iov, &theirs, &runs, !read)
        } else if read {
            cma::read_from(pid, &tx.iov, 0, &theirs, 0, len)
        } else {
            cma::write_to(pid, &tx.iov, 0, &theirs, 0, len)
        };
        if shared {
            // The target may still be copying into or out of our buffer: whatever happened
            // here, the operation ends when its OP_PART (next in our ring) says it is done.
            if let Some(tx) = g.tx_ops.get_mut(c.op_id) {
                tx.shared = Some(Box::new(Shared {
                    theirs,
                    ours: r,
                    retry,
                }));
            }
            return;
        }
        match r {
            Ok(()) => g.copied(p, c.op_id, read, len, retry.as_deref()),
            // The kernel refuses us: the target copies instead (or falls back to segments).
            Err(e) if refused(e) && retry.is_some() => {
                if let Some(mut rc) = retry {
                    rc.flags &= !F_MAY_COPY;
                    g.send_retry(p, rc);
                }
            }
            Err(e) => g.copy_failed(c.op_id, e),
        }
    }

    /// The target's part of a shared copy: complete, or copy what a side could not.
    fn handle_part(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let sh = match g.tx_ops.get_mut(c.op_id) {
            Some(tx) if tx.peer == p => tx.shared.take(),
            _ => None,
        };
        let Some(sh) = sh else {
            g.dropped += 1;
            return;
        };
        let Some(tx) = g.tx_ops.get(c.op_id) else {
            return;
        };
        let (read, len) = (tx.kind == TxKind::Read, tx.len);
        let Shared {
            theirs,
            ours,
            retry,
        } = *sh;
        let target = if c.status == 0 {
            Ok(())
        } else {
            Err(Errno(c.status))
        };
        match (ours, target) {
            (Ok(()), Ok(())) => g.copied(p, c.op_id, read, len, retry.as_deref()),
            // The kernel refused the target: its blocks are ours to copy too.
            (Ok(()), Err(e)) if refused(e) => {
                let runs = share_runs(theirs.iter().copied(), true);
                match cma::transfer_runs(g.peers[p].pid, &tx.iov, &theirs, &runs, !read) {
                    Ok(()) => g.copied(p, c.op_id, read, len, retry.as_deref()),
                    Err(e) => g.copy_failed(c.op_id, e),
                }
            }
            // The kernel refused us: the target copies our blocks (its own are done); with
            // both refused, everything (the target falls back to segments).
            (Err(e), t) if refused(e) && t.err().is_none_or(refused) => match retry {
                Some(mut rc) => {
                    rc.flags &= !F_MAY_COPY;
                    if t.is_ok() {
                        rc.flags |= F_INITIATOR_BLOCKS;
                    }
                    g.send_retry(p, rc);
                }
                None => g.copy_failed(c.op_id, e),
            },
            (Err(e), _) | (Ok(()), Err(e)) => g.copy_failed(c.op_id, e),
        }
    }

    /// The initiator copied an RMA we cleared: count it, report its CQ data.
    fn handle_copied(&self, g: &mut Inner, c: &Cmd) {
        let len = c.len as usize;
        if c.flags & F_READ != 0 {
            if let Some(cn) = &g.cntr.remote_read {
                cn.complete(len);
            }
        } else {
            self.remote_write_done(g, len, (c.flags & F_CQ_DATA != 0).then_some(c.data));
        }
    }

    /// The sink of a segmented transfer is ready: start pushing.
    fn handle_go(&self, g: &mut Inner, p: usize, c: &Cmd) {
        match g.tx_ops.get_mut(c.op_id) {
            Some(tx)
                if tx.peer == p
                    && tx.push.is_none()
                    && matches!(tx.kind, TxKind::Msg | TxKind::Write) =>
            {
                // The sink may want less than everything (a truncated receive).
                tx.push = Some(Push {
                    sink: c.aux,
                    sent: 0,
                    limit: tx.len.min(c.len as usize),
                });
            }
            _ => g.dropped += 1,
        }
    }

    /// A chunk of a segmented transfer arrived in the source's bounce buffer.
    fn handle_data(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let Some(region) = g.peers[p].region.clone() else {
            return;
        };
        let buf = c.aux as u32;
        let off = c.aux2 as usize;
        let n = c.len as usize;
        if c.flags & F_TO_TX != 0 {
            // Data for one of our reads.
            let ok = match g.tx_ops.get(c.op_id) {
                Some(tx)
                    if tx.peer == p
                        && tx.kind == TxKind::Read
                        && off.checked_add(n).is_some_and(|e| e <= tx.len) =>
                {
                    let dest = tx.iov.clone();
                    region.buf_with(buf, 0, n, |s| scatter(&dest, off, s)) == Some(n)
                }
                _ => false,
            };
            region.buf_release(buf);
            if !ok {
                g.dropped += 1;
            }
            return;
        }
        let done = match g.rx_ops.get_mut(c.op_id) {
            Some(rx)
                if rx.peer == p
                    && off == rx.got
                    && off.checked_add(n).is_some_and(|e| e <= rx.len) =>
            {
                let dest = rx.dest.clone();
                let copied = region.buf_with(buf, 0, n, |s| scatter(&dest, off, s));
                if copied == Some(n) {
                    rx.got += n;
                }
                rx.got == rx.len
            }
            _ => {
                g.dropped += 1;
                false
            }
        };
        region.buf_release(buf);
        if done {
            self.finish_rx(g, c.op_id);
        }
    }

    /// Pushes chunks of segmented transfers while bounce buffers are free.
    fn push_segments(&self, g: &mut Inner) {
        if g.tx_ops.is_empty() && g.rx_ops.is_empty() {
            return;
        }
        let Some(region) = g.region.clone() else {
            return;
        };
        // Our sends and writes the sink asked for.
        for id in g
            .tx_ops
            .ids_where(|t| t.push.is_some_and(|x| x.sent < x.limit))
        {
            while let Some(tx) = g.tx_ops.get(id) {
                let Some(Push { sink, sent, limit }) = tx.push else {
                    break;
                };
                if sent >= limit {
                    break;
                }
                let p = tx.peer;
                let n = (limit - sent).min(BOUNCE_SIZE);
                let Some(b) = region.buf_alloc() else { return };
                let mut chunk = vec![0u8; n];
                gather(&tx.iov, sent, &mut chunk);
                region.buf_write(b, 0, &chunk);
                let mut d = Cmd::new(OP_DATA, g.token);
                d.op_id = sink;
                d.aux = u64::from(b);
                d.aux2 = sent as u64;
                d.len = n as u64;
                if g.push_cmd(p, &d).is_err() {
                    region.buf_release(b);
                    break;
                }
                if let Some(tx) = g.tx_ops.get_mut(id) {
                    tx.push = Some(Push {
                        sink,
                        sent: sent + n,
                        limit,
                    });
                }
            }
        }
        // Reads of our memory pushed to the initiator.
        for id in g
            .rx_ops
            .ids_where(|r| matches!(r.done, RxDone::PushRead { .. }))
        {
            while let Some(rx) = g.rx_ops.get(id) {
                let RxDone::PushRead { initiator_op } = rx.done else {
                    break;
                };
                let (p, got, len) = (rx.peer, rx.got, rx.len);
                if got >= len {
                    g.rx_ops.remove(id);
                    g.ack(p, initiator_op, Ok(()), len);
                    break;
                }
                let n = (len - got).min(BOUNCE_SIZE);
                let Some(b) = region.buf_alloc() else { return };
                let mut chunk = vec![0u8; n];
                gather(&rx.dest, got, &mut chunk);
                region.buf_write(b, 0, &chunk);
                let mut d = Cmd::new(OP_DATA, g.token);
                d.op_id = initiator_op;
                d.flags = F_TO_TX;
                d.aux = u64::from(b);
                d.aux2 = got as u64;
                d.len = n as u64;
                if g.push_cmd(p, &d).is_err() {
                    region.buf_release(b);
                    break;
                }
                if let Some(rx) = g.rx_ops.get_mut(id) {
                    rx.got += n;
                }
            }
        }
    }

    /// Fails everything waiting on peers that are gone.
    fn check_liveness(&self, g: &mut Inner) {
        let mut dead = Vec::new();
        for (i, peer) in g.peers.iter_mut().enumerate() {
            if !peer.dead && peer.region.as_ref().is_some_and(|r| r.owner_gone()) {
                peer.dead = true;
            }
            if peer.dead {
                peer.unordered = 0;
                peer.uncleared = 0;
                peer.retrying = false;
                peer.held_retries.clear();
                dead.push(i);
            }
        }
        if dead.is_empty() {
            return;
        }
        for id in g.tx_ops.ids_where(|t| dead.contains(&t.peer)) {
            if let Some(tx) = g.tx_ops.remove(id) {
                if let (Some(b), Some(r)) = (tx.bounce, &g.region) {
                    r.buf_release(b);
                }
                g.fail_tx(tx.context, tx.cq_flags, Errno::CONNABORTED, tx.cntr);
            }
        }
        for id in g.rx_ops.ids_where(|r| dead.contains(&r.peer)) {
            if let Some(rx) = g.rx_ops.remove(id)
                && let RxDone::Recv { recv, tagged, .. } = rx.done
                && let Some(cq) = &g.rx_cq
            {
                cq.push_err(CqErrEntry::new(
                    recv.context,
                    FI_RECV | if tagged { FI_TAGGED } else { FI_MSG },
                    Errno::CONNABORTED,
                ));
            }
        }
        // Unexpected rendezvous messages from dead senders can never be delivered.
        let tokens: Vec<u64> = dead.iter().map(|&i| g.peers[i].token).collect();
        g.rxq.lock().drain_unexpected(
            |u| matches!(&u.payload, Pending::Remote(c) if tokens.contains(&c.sender)),
        );
        g.outbox.retain(|(p, _)| !dead.contains(p));
    }
}

impl ShmEndpoint {
    /// Runs one raw command through the handlers as if a peer had pushed it into our ring
    /// (the fuzz target `shm_commands` drives hostile input through here).
    #[doc(hidden)]
    pub fn handle_raw(&self, raw: &[u8; CMD_SIZE]) {
        let c = Cmd::decode(raw);
        let mut g = self.lock();
        self.handle(&mut g, &c);
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
        // A thread already progressing this endpoint does the work for everyone.
        let Ok(g) = self.inner.try_lock() else {
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
            // bool options: shm has no CUDA path and is shared memory itself.
            FI_OPT_CUDA_API_PERMITTED | FI_OPT_SHARED_MEMORY_PERMITTED => {
                if val.is_empty() {
                    return Err(Errno::INVAL);
                }
                if name == FI_OPT_SHARED_MEMORY_PERMITTED && val[0] == 0 {
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
        let (recv, tagged) = g.rxq.lock().cancel(context).ok_or(Errno::NOENT)?;
        if let Some(cq) = &g.rx_cq {
            let mut e = CqErrEntry::new(
                recv.context,
                FI_RECV | if tagged { FI_TAGGED } else { FI_MSG },
                Errno::CANCELED,
            );
            e.tag = recv.tag;
            cq.push_err(e);
        }
        Ok(())
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

    fn recv(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        let r = self.post_recv(op, tagged);
        self.progress();
        r
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
        let r = self.rma(op, true);
        self.progress();
        r
    }

    fn write(&self, op: &RmaOp<'_>) -> Result<()> {
        if self.caps & FI_WRITE == 0 && self.caps & (FI_READ | FI_WRITE) != 0 {
            return Err(Errno::NOSYS);
        }
        let r = self.rma(op, false);
        self.progress();
        r
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
