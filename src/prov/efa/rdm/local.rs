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
use std::sync::atomic::Ordering;

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

impl RdmEndpoint {
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
