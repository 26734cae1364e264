//! Peers on this host go through shm, as upstream efa does (fi_efa(7)
//! `FI_EFA_ENABLE_SHM_TRANSFER`, efa-reference §11): each RDM endpoint owns a hidden shm
//! endpoint in peer mode, bound to the same AV, CQs and counters, matching in the same receive
//! queue, and checking remote accesses against the same registrations.
//!
//! A peer is local when its GID is ours (the same interface address) and its shm endpoint can
//! be reached; that is decided on the first operation to it and kept, so that all of an
//! ordered stream to one peer takes one path (send-after-send order). A peer whose shm
//! endpoint cannot be found (it runs with shm off, or under another `/dev/shm`) is reached
//! through the device as any remote peer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::ep::{Inner, RdmEndpoint};
use crate::prov::efa::device::EfaAddr;
use crate::prov::shm::{PeerMode, ShmEndpoint};

/// How our shm endpoints and their peers are named: after their efa address.
pub(super) const PEER_MODE: PeerMode = PeerMode {
    name_of: shm_name_of,
    addr_of: efa_addr_of,
    partial_of: unkeyed_of,
};

const SCHEME: &str = "efa://";

/// The shm name of the endpoint at efa address `a`: `efa://<gid hex>:<qpn>:<qkey hex>`.
pub(super) fn shm_name(a: &EfaAddr) -> String {
    format!("{}{:08x}", unkeyed_prefix(a), a.qkey)
}

/// The start of the shm names of every endpoint at `a`'s GID and QPN, whatever its QKEY.
fn unkeyed_prefix(a: &EfaAddr) -> String {
    let gid: String = a.gid.iter().map(|b| format!("{b:02x}")).collect();
    format!("{SCHEME}{gid}:{}:", a.qpn)
}

/// The address an application that knew only the node and service inserted (QKEY 0).
fn unkeyed_of(addr: &[u8]) -> Option<Vec<u8>> {
    let a = EfaAddr::from_bytes(addr)?;
    (a.qkey != 0).then(|| a.unkeyed().to_bytes().to_vec())
}

fn shm_name_of(addr: &[u8]) -> Option<String> {
    EfaAddr::from_bytes(addr).map(|a| shm_name(&a))
}

fn efa_addr_of(name: &str) -> Option<Vec<u8>> {
    let mut parts = name.strip_prefix(SCHEME)?.split(':');
    let (gid_hex, qpn, qkey) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || gid_hex.len() != 32 {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, b) in gid.iter_mut().enumerate() {
        *b = u8::from_str_radix(gid_hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    let a = EfaAddr {
        gid,
        qpn: qpn.parse().ok()?,
        qkey: u32::from_str_radix(qkey, 16).ok()?,
    };
    Some(a.to_bytes().to_vec())
}

/// Destinations last found to go through shm, readable without the endpoint's lock: a send
/// to one goes straight to shm, skipping our lock, the peer lookup and the route. Between two
/// processes on one host, that lock pair (two locked instructions) on each send and each
/// posted receive was most of what efa added to shm's 8-byte ping-pong. Direct-mapped by
/// `fi_addr`: a miss only takes the locked path, which learns the destination again.
pub(super) struct ShmRoutes {
    /// `(AV removals seen) << 32 | (fi_addr + 1)`, or 0 when empty. A removal from the AV may
    /// give an `fi_addr` to another peer: an entry learnt before it no longer matches.
    slots: [AtomicU64; ROUTE_SLOTS],
}

/// As many local peers as a node's ranks in a common job (a miss costs only the lock).
const ROUTE_SLOTS: usize = 16;

impl ShmRoutes {
    pub(super) fn new() -> ShmRoutes {
        ShmRoutes {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The slot and its entry for `fi_addr` as of `removals`, if it can have one.
    fn entry(fi_addr: u64, removals: u64) -> Option<(usize, u64)> {
        let a = u32::try_from(fi_addr).ok().filter(|&a| a != u32::MAX)?;
        let e = (removals & 0xffff_ffff) << 32 | u64::from(a + 1);
        Some((a as usize % ROUTE_SLOTS, e))
    }

    /// Whether `fi_addr` was learnt to go through shm while the AV had seen `removals`.
    pub(super) fn knows(&self, fi_addr: u64, removals: u64) -> bool {
        Self::entry(fi_addr, removals)
            .is_some_and(|(i, e)| self.slots[i].load(Ordering::Acquire) == e)
    }

    /// `fi_addr` goes through shm (decided under the endpoint's lock, with the AV synced to
    /// `removals`).
    pub(super) fn learn(&self, fi_addr: u64, removals: u64) {
        if let Some((i, e)) = Self::entry(fi_addr, removals) {
            self.slots[i].store(e, Ordering::Release);
        }
    }

    pub(super) fn forget_all(&self) {
        for s in &self.slots {
            s.store(0, Ordering::Release);
        }
    }
}

impl RdmEndpoint {
    /// The shm endpoint for `fi_addr` if it is known to go there, found without our lock
    /// (see `ShmRoutes`).
    pub(super) fn known_route(&self, fi_addr: u64) -> Option<&Arc<ShmEndpoint>> {
        let shm = self.shm()?;
        let removals = self.bound_av.get()?.removals();
        self.routes.knows(fi_addr, removals).then_some(shm)
    }

    /// Our shm endpoint, once enabled.
    pub(super) fn shm(&self) -> Option<&Arc<ShmEndpoint>> {
        self.shm
            .as_ref()
            .filter(|_| self.shm_on.load(Ordering::Acquire))
    }

    /// The shm endpoint if peer `p` is reached through it (decided on first use, then kept).
    pub(super) fn route(&self, g: &mut Inner, p: usize) -> Option<&Arc<ShmEndpoint>> {
        let shm = self.shm()?;
        let peer = &g.peers[p];
        let local = match peer.via_shm {
            Some(v) => v,
            None => {
                let here = peer.addr.gid == g.dev.addr().gid;
                if here && peer.addr.qkey == 0 {
                    // Inserted by node and service: the endpoint bound there, if it is on
                    // this host, says its QKEY through its shm name.
                    if let [name] = &crate::prov::shm::live_names(&unkeyed_prefix(&peer.addr))[..]
                        && let Some(a) = efa_addr_of(name).as_deref().and_then(EfaAddr::from_bytes)
                    {
                        g.learn_qkey(a);
                    }
                }
                let peer = &g.peers[p];
                let v = here && peer.addr.qkey != 0 && shm.reachable(peer.fi_addr);
                if !v && peer.addr.gid == g.dev.addr().gid {
                    crate::fi_info!(
                        "efa",
                        crate::core::log::Subsys::EpData,
                        "peer {} is on this host but has no shm endpoint: using the device",
                        peer.addr.straddr()
                    );
                }
                // Which path each peer takes, for tests across hosts (tests/cluster): shm
                // only ever for a peer at our own GID.
                crate::fi_info!(
                    "efa",
                    crate::core::log::Subsys::EpData,
                    "route {} -> {}: {}",
                    g.dev.addr().straddr(),
                    peer.addr.straddr(),
                    if v { "shm" } else { "device" }
                );
                g.peers[p].via_shm = Some(v);
                v
            }
        };
        local.then_some(shm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::consts::FI_ADDR_UNSPEC;

    #[test]
    fn a_route_is_known_for_its_address_until_the_av_removes_anything() {
        let r = ShmRoutes::new();
        assert!(!r.knows(0, 0), "nothing learnt");
        r.learn(3, 7);
        assert!(r.knows(3, 7));
        assert!(!r.knows(3, 8), "an AV removal since");
        assert!(!r.knows(4, 7));
        // Direct-mapped: an address in the same slot takes it over.
        r.learn(3 + ROUTE_SLOTS as u64, 7);
        assert!(r.knows(3 + ROUTE_SLOTS as u64, 7));
        assert!(!r.knows(3, 7));
        // Counts past 32 bits still tell a removal apart.
        r.learn(5, 1 << 32);
        assert!(r.knows(5, 1 << 32) && !r.knows(5, (1 << 32) + 1));
        // FI_ADDR_UNSPEC, FI_ADDR_NOTAVAIL and other addresses past 32 bits are never known.
        for a in [FI_ADDR_UNSPEC, u64::from(u32::MAX), 1 << 40] {
            r.learn(a, 0);
            assert!(!r.knows(a, 0), "{a:#x}");
        }
        r.forget_all();
        assert!(!r.knows(3 + ROUTE_SLOTS as u64, 7) && !r.knows(5, 1 << 32));
    }

    #[test]
    fn shm_names_lead_back_to_the_efa_address() {
        let a = EfaAddr {
            gid: EfaAddr::gid_of("10.1.2.3".parse().unwrap()),
            qpn: 4791,
            qkey: 0xdead_beef,
        };
        let n = shm_name(&a);
        assert_eq!(n, "efa://00000000000000000000ffff0a010203:4791:deadbeef");
        assert_eq!(efa_addr_of(&n).unwrap(), a.to_bytes().to_vec());
        assert_eq!(shm_name_of(&a.to_bytes()).unwrap(), n);
        for bad in [
            "fi_shm://1",
            "efa://00:1:2",
            "efa://00000000000000000000ffff0a010203:99999:0",
            "efa://00000000000000000000ffff0a010203:1:2:3",
            "efa://zz000000000000000000ffff0a010203:1:2",
        ] {
            assert!(efa_addr_of(bad).is_none(), "{bad}");
        }
        assert!(shm_name_of(&[0u8; 8]).is_none());
    }
}
