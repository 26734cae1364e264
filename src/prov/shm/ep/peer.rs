//! Peers: the endpoints we talk to, found by AV address (we send to them) or by token (they
//! sent to us); mapping their regions and connecting (CONNECT), keeping their AV indices right
//! as the AV changes, pushing commands into their rings (with an outbox for responses that
//! find a ring full), and failing what waits on a peer whose process is gone.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::Arc;

use super::rx::Pending;
use super::segment::RxDone;
use super::{Inner, ShmEndpoint};
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::shm::cmd::*;
use crate::prov::shm::region::Region;
use crate::prov::shm::region_name;
use crate::util::cq::CqErrEntry;
use crate::util::hash::U64Map;

/// Peer indexes by a 64-bit key (AV address or token), keeping the last key found: consecutive
/// operations mostly name one peer, and a hash lookup's lines missed the L1 cache under a stream
/// of small messages (perf: a fifth of handling a command, as much of posting a send).
#[derive(Default)]
pub(super) struct PeerIndex {
    map: U64Map<usize>,
    last: Cell<Option<(u64, usize)>>,
}

impl PeerIndex {
    #[inline]
    pub(super) fn get(&self, key: u64) -> Option<usize> {
        if let Some((k, p)) = self.last.get()
            && k == key
        {
            return Some(p);
        }
        let p = *self.map.get(&key)?;
        self.last.set(Some((key, p)));
        Some(p)
    }

    pub(super) fn insert(&mut self, key: u64, p: usize) {
        self.map.insert(key, p);
        self.last.set(None);
    }

    pub(super) fn clear(&mut self) {
        self.map.clear();
        self.last.set(None);
    }
}

/// A peer endpoint: known by address (we send to it) and/or by token (it sent to us).
pub(super) struct Peer {
    /// Its address, as inserted in the AV or announced by CONNECT.
    pub(super) addr: String,
    pub(super) region: Option<Arc<Region>>,
    /// Whether our CONNECT has been queued to it.
    connected: bool,
    /// Its token once known (from its region or its CONNECT).
    token: u64,
    pub(super) pid: i32,
    /// Its fi_addr in our AV (FI_ADDR_NOTAVAIL if not inserted).
    pub(super) fi_addr: u64,
    /// Set when its process or endpoint is gone.
    pub(super) dead: bool,
    /// Our RMA operations to it whose data may still move after what we post next: copies we
    /// do ourselves once cleared (`OP_CLEARED`), transfers through bounce buffers. What we post
    /// next waits (`EAGAIN`) until they are done, so that RMA lands in posted order (the RAW,
    /// WAR, WAW orders we advertise); the target handles everything else in ring order.
    pub(super) unordered: u32,
    /// Those of them waiting for `OP_CLEARED`: another copy of ours may follow them (the
    /// target clears in ring order, and we copy in the order it clears).
    pub(super) uncleared: u32,
    /// The kernel refused our part of a shared copy (`F_SHARED`) with this peer: we share no
    /// more (each side's blocks must keep being copied by that side, in order).
    pub(super) share_refused: bool,
    /// One of our RMA commands sent again for the target to copy (our own copy was refused) is
    /// not done yet; the next ones wait in `held_retries`. Serialized, because the target may
    /// move them through bounce buffers, several of which would otherwise interleave.
    pub(super) retrying: bool,
    pub(super) held_retries: VecDeque<Box<Cmd>>,
}

impl Peer {
    /// A peer not connected yet, at `fi_addr` in our AV (or `FI_ADDR_NOTAVAIL`).
    fn new(addr: String, fi_addr: u64) -> Peer {
        Peer {
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
        }
    }
}

impl Inner {
    /// The AV index of peer `p`, looked up again while it is unknown: the application may have
    /// inserted the peer since it first wrote to us. `FI_ADDR_NOTAVAIL` while it has not.
    pub(super) fn refresh_fi_addr(&mut self, p: usize) -> u64 {
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
                av.reverse_resolving(&a, (m.partial_of)(&a).as_deref())
            }
            None => av.reverse(name.as_bytes()),
        }
    }

    pub(super) fn source_id(&self, fi_addr: u64) -> u64 {
        match (&self.av, fi_addr) {
            (_, FI_ADDR_NOTAVAIL) => FI_ADDR_NOTAVAIL,
            (Some(av), a) => av.source_id(a),
            (None, _) => FI_ADDR_NOTAVAIL,
        }
    }

    /// After entries were removed from the AV (`Av::removed_since`), what each peer's
    /// `fi_addr` is now: an index may since name another address (fi_av(3) lets inserts reuse
    /// removed ones), and a removed peer is no longer a source anyone asked for.
    /// (Inlined: every send asks, and almost never finds a removal.)
    #[inline]
    pub(super) fn sync_av(&mut self) {
        let Some(av) = &self.av else { return };
        if av.removed_since(&mut self.av_removals) {
            self.resync_av();
        }
    }

    #[cold]
    fn resync_av(&mut self) {
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
    /// (Inlined: a known peer, the common case, is one look at `PeerIndex`.)
    #[inline]
    pub(super) fn peer_for(&mut self, fi_addr: u64) -> Result<usize> {
        self.sync_av();
        match self.by_addr.get(fi_addr) {
            Some(p) => Ok(p),
            None => self.new_peer_for(fi_addr),
        }
    }

    #[cold]
    fn new_peer_for(&mut self, fi_addr: u64) -> Result<usize> {
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
                self.peers.push(Peer::new(addr, fi_addr));
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
    #[inline]
    pub(super) fn connect(&mut self, p: usize) -> Result<&Region> {
        let peer = &self.peers[p];
        if !peer.connected || peer.dead {
            return self.connect_first(p);
        }
        // A connected peer has its region (set before `connected`, never taken back).
        self.peers[p].region.as_deref().ok_or(Errno::CONNABORTED)
    }

    /// `connect` for a peer not connected yet (or dead).
    #[cold]
    fn connect_first(&mut self, p: usize) -> Result<&Region> {
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
            // 0 (no attach: bounce buffers) for an owner in another pid namespace.
            peer.pid = r.owner_pid().unwrap_or(0);
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
    pub(super) fn push_cmd(&mut self, p: usize, c: &Cmd) -> Result<()> {
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
    pub(super) fn respond(&mut self, p: usize, c: &Cmd) {
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

    pub(super) fn flush_outbox(&mut self) {
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

    pub(super) fn ack(&mut self, p: usize, op_id: u64, status: Result<()>, len: usize) {
        let mut c = Cmd::new(OP_ACK, self.token);
        c.op_id = op_id;
        c.len = len as u64;
        c.status = status.err().map_or(0, |e| e.0);
        self.respond(p, &c);
    }
}

impl ShmEndpoint {
    pub(super) fn handle_connect(&self, g: &mut Inner, c: &Cmd) {
        let n = (c.len as usize).min(BODY);
        let addr = String::from_utf8_lossy(&c.body[..n]).into_owned();
        // The sender's region is mapped to answer it. If it is already gone (the sender sent and
        // exited), what it sent inline is still delivered but nothing can be answered; a region
        // under that name with another token is a different endpoint and is not attached. A
        // region we mapped already (we sent to it first) and that has the sender's token is
        // the sender's, even if its name is gone by now: what it pushed before closing (an
        // ACK) is still to be handled, and the liveness check handles it before failing
        // anything.
        let existing = g.peers.iter().position(|p| p.addr == addr);
        let mapped = existing
            .and_then(|i| g.peers[i].region.clone())
            .filter(|r| r.token() == c.sender);
        let region = match mapped {
            Some(r) => Some(r),
            None => match Region::open(&region_name(&addr)) {
                Ok(r) if r.token() == c.sender => Some(Arc::new(r)),
                _ => None,
            },
        };
        let fi_addr = g.av_index(&addr).unwrap_or(FI_ADDR_NOTAVAIL);
        let idx = match existing {
            Some(i) => i,
            None => {
                g.peers.push(Peer::new(addr, fi_addr));
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
        peer.pid = region.as_ref().and_then(|r| r.owner_pid()).unwrap_or(0);
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

    /// Fails everything waiting on peers that are gone. What a peer pushed into our ring
    /// before it closed or exited (an ACK, its last data) is handled first: it may complete
    /// what would otherwise fail. Its pushes precede its going, which we have just seen, so
    /// they are in the ring now, at most a ring's worth of commands from its head.
    pub(super) fn check_liveness(&self, g: &mut Inner) {
        let gone: Vec<usize> = (0..g.peers.len())
            .filter(|&i| {
                let peer = &g.peers[i];
                !peer.dead && peer.region.as_ref().is_some_and(|r| r.owner_gone())
            })
            .collect();
        if !gone.is_empty() {
            self.drain_ring(g);
            for i in gone {
                g.peers[i].dead = true;
            }
        }
        let mut dead = Vec::new();
        for (i, peer) in g.peers.iter_mut().enumerate() {
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
        // Buffers lent to dead peers with nothing of ours waiting on them.
        g.reclaim_lent(|p| dead.contains(&p));
        for id in g.tx_ops.ids_where(|t| dead.contains(&t.peer)) {
            if let Some(tx) = g.tx_ops.remove(id) {
                if let (Some(b), Some(r)) = (tx.bounce, &g.region) {
                    r.buf_reclaim(b);
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
