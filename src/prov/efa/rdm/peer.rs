//! The peers of the RDM endpoint: one per address sent to or heard from, kept in step with the
//! AV (`sync_av`; an entry inserted by node and service learns its QKEY from the first
//! packet), the handshake that tells each side the other's features (efa-reference §2), the
//! connid our packets carry (§7), and the end of a peer that stopped answering (§6).

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use super::ep::*;
use super::pkt;
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::efa::device::{EfaAddr, HEADROOM, MIN_MTU};
use crate::prov::shm::Pending;
use crate::util::cq::CqErrEntry;
use crate::util::hash::FastMap;

/// Feature bits this endpoint advertises in its handshake (efa-reference §2: 1, 3, 4 and 6 are
/// baseline in 2.6 — READ_NACK, 6, is sent and acted on, `longread.rs`; 9 is this library's
/// error responses). Never 8, unsolicited write receive: our QPs are created without it, so
/// a write with immediate to us takes a posted receive (and toward a peer that asks for it,
/// `rma.rs` emulates such writes).
const EXTRA_INFO: u64 = pkt::EXTRA_DELIVERY_COMPLETE
    | pkt::EXTRA_CONNID_HEADER
    | pkt::EXTRA_RUNT
    | pkt::EXTRA_READ_NACK
    | pkt::EXTRA_ERROR_RESPONSE;

/// The largest packet sent to a peer whose handshake has not arrived: one that every device
/// of ours receives (`device::MIN_MTU`), since the peer's handshake, which tells its size, is
/// only sent in answer to our first packet.
pub(super) const PRE_HANDSHAKE_PKT: usize = MIN_MTU;

pub(super) struct Peer {
    pub addr: EfaAddr,
    pub fi_addr: u64,
    pub next_msg_id: u32,
    pub expected_msg_id: u32,
    /// Ordered packets that arrived early, by msg_id (copies).
    pub ooo: BTreeMap<u32, Vec<Vec<u8>>>,
    /// Messages being received in several packets (medium), by msg_id.
    pub rx_map: FastMap<u32, u64>,
    pub hs_sent: bool,
    pub hs_received: bool,
    pub extra_info: u64,
    /// The largest packet the peer receives, from its handshake (`pkt::HS_MAX_PKT`); `None`
    /// in a handshake without it: the same as ours.
    pub max_pkt: Option<usize>,
    /// The largest packet our device carries to and from it (`Device::path_mtu`): our MTU,
    /// or more for a peer at one of this host's addresses reached over loopback. It is what
    /// our handshake tells it we receive.
    pub path_mtu: usize,
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
    fn new(addr: EfaAddr, fi_addr: u64, path_mtu: usize) -> Peer {
        Peer {
            addr,
            fi_addr,
            path_mtu,
            next_msg_id: 0,
            expected_msg_id: 0,
            ooo: BTreeMap::new(),
            rx_map: FastMap::default(),
            hs_sent: false,
            hs_received: false,
            extra_info: 0,
            max_pkt: None,
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

    /// The peer lets us read its registered memory with device RDMA, and reads ours for the
    /// long-read protocols (efa-reference §2).
    pub fn rdma_read(&self) -> bool {
        self.extra_info & pkt::EXTRA_RDMA_READ != 0
    }

    pub fn rdma_write(&self) -> bool {
        self.extra_info & pkt::EXTRA_RDMA_WRITE != 0
    }
}

impl Inner {
    /// How many peers were reached through shm, and how many through the device (sent to or
    /// heard from there).
    pub fn paths(&self) -> (usize, usize) {
        let shm = self
            .peers
            .iter()
            .filter(|p| p.via_shm == Some(true))
            .count();
        let dev = self
            .peers
            .iter()
            .filter(|p| p.via_shm != Some(true) && (p.contacted || p.hs_received))
            .count();
        (shm, dev)
    }

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
        // The last destination first: a peer's `fi_addr` is set only together with its entry
        // in `by_fi` (and both again by `sync_av`), so a match is what the map would say,
        // without hashing for every send to the same peer.
        if fi_addr != FI_ADDR_NOTAVAIL
            && self
                .peers
                .get(self.last_dest)
                .is_some_and(|p| p.fi_addr == fi_addr)
        {
            debug_assert_eq!(self.by_fi.get(&fi_addr), Some(&self.last_dest));
            return Ok(self.last_dest);
        }
        if let Some(&p) = self.by_fi.get(&fi_addr) {
            self.last_dest = p;
            return Ok(p);
        }
        let av = self.av.as_ref().ok_or(Errno::NOAV)?;
        let bytes = av.lookup(fi_addr)?;
        let addr = EfaAddr::from_bytes(&bytes).ok_or(Errno::INVAL)?;
        let p = self.peer_by_addr(addr);
        self.peers[p].fi_addr = fi_addr;
        self.by_fi.insert(fi_addr, p);
        self.last_dest = p;
        Ok(p)
    }

    /// The peer at a raw address, if we know it. The last source found is checked by its
    /// address first: it is found again only while `by_addr` still names it for that address
    /// (`learn_qkey` gives an address to another peer, and then points the cache there).
    #[inline]
    pub fn known_peer(&mut self, addr: &EfaAddr) -> Option<usize> {
        if self
            .peers
            .get(self.last_src)
            .is_some_and(|p| p.addr == *addr)
        {
            debug_assert_eq!(self.by_addr.get(addr), Some(&self.last_src));
            return Some(self.last_src);
        }
        let p = *self.by_addr.get(addr)?;
        self.last_src = p;
        Some(p)
    }

    /// The peer at a raw address (created on first contact).
    pub fn peer_by_addr(&mut self, addr: EfaAddr) -> usize {
        if let Some(p) = self.known_peer(&addr) {
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
        let path_mtu = self.dev.path_mtu(&addr);
        self.peers.push(Peer::new(addr, fi_addr, path_mtu));
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
        // A peer first heard from at `addr` may be `known_peer`'s last source: `addr` is p's
        // now.
        self.last_src = p;
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

    pub fn source_id(&self, fi_addr: u64) -> u64 {
        match &self.av {
            Some(av) if fi_addr != FI_ADDR_NOTAVAIL => av.source_id(fi_addr),
            _ => FI_ADDR_NOTAVAIL,
        }
    }

    /// The connid we put in packets to peers that know us (our QKEY).
    pub fn connid(&self) -> u32 {
        self.dev.addr().qkey
    }

    /// The largest packet we send `peer` (every packet builder sizes its packets by it): what
    /// our device carries to it (`Peer::path_mtu`) capped by what its handshake said it
    /// receives, or by `PRE_HANDSHAKE_PKT` until then; a handshake that says nothing means
    /// our device's plain MTU (the peer's device is like ours, but may not join fragments:
    /// `Device::plain_mtu`).
    #[inline]
    pub fn peer_pkt(&self, peer: usize) -> usize {
        let p = &self.peers[peer];
        let theirs = match (p.hs_received, p.max_pkt) {
            (false, _) => PRE_HANDSHAKE_PKT,
            (true, Some(m)) => m,
            (true, None) => self.plain_pkt,
        };
        p.path_mtu.min(theirs)
    }

    /// Payload bytes per CTSDATA packet by which we count the windows we grant `peer` as a
    /// receiver: packets of our MTU, or of the peer's when they are larger (a peer on a
    /// larger path: a window of credits in our smaller packets would hold few of its own).
    pub fn grant_room(&self, peer: usize) -> usize {
        self.mtu.max(self.peer_pkt(peer)).saturating_sub(32).max(1)
    }

    /// Sends our HANDSHAKE to a peer once (efa-reference §2).
    pub fn handshake(&mut self, peer: usize) {
        if self.peers[peer].hs_sent || self.peers[peer].dead {
            return;
        }
        self.peers[peer].hs_sent = true;
        let mut b = self.buf();
        let connid = self.connid();
        let mtu = u32::try_from(self.peers[peer].path_mtu).unwrap_or(u32::MAX);
        let mut extra = EXTRA_INFO;
        if self.rdma.rdma_read && self.rdma_target {
            extra |= pkt::EXTRA_RDMA_READ;
        }
        if self.rdma.rdma_write && self.rdma_target {
            extra |= pkt::EXTRA_RDMA_WRITE;
        }
        let n = pkt::write_handshake(&mut b[HEADROOM..], extra, connid, 0, mtu);
        self.send_pkt(peer, b, n, Owner::Ctrl, 0);
    }
}

impl RdmEndpoint {
    /// A peer stopped answering: every operation waiting on it fails (efa-reference §6).
    pub(super) fn peer_died(&self, g: &mut Inner, p: usize) {
        if g.peers[p].dead {
            return;
        }
        g.peers[p].dead = true;
        let addr = g.peers[p].addr;
        g.dev.abandon(addr);
        let txes = g.txes.ids_where(|t| t.peer == p);
        crate::fi_warn!(
            "efa",
            crate::core::log::Subsys::EpData,
            "peer {} stopped answering: {} pending operation(s) to it fail",
            addr.straddr(),
            txes.len()
        );
        for id in txes {
            g.fail_tx(id, Errno::CONNABORTED, 13);
        }
        let rx_cq = g.rx_cq.clone();
        for id in g.rxes.ids_where(|r| r.peer == p) {
            // A long read still in the device keeps its memory until the device lets go: its
            // reads fail too, and their completions end it (`longread.rs`).
            if let Some(lr) = g
                .rxes
                .get_mut(id)
                .and_then(|r| r.lr.as_mut())
                .filter(|lr| lr.in_flight > 0)
            {
                lr.failed
                    .get_or_insert(crate::prov::efa::device::DevError::Unreachable);
                continue;
            }
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
