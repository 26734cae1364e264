//! Control packets arriving at the RDM endpoint: HANDSHAKE (efa-reference §2), CTS and
//! CTSDATA of long-CTS messages, writes and reads (§3, §5), READRSP, ATOMRSP, RECEIPT, EOR,
//! READ_NACK and ERR.
//! All but the handshake answer something we started, and must come from its peer.

use super::ep::*;
use super::pkt::{self, Ctrl};
use super::placement::Target;
use crate::core::Errno;
use crate::prov::efa::PROV_ERR_REMOTE_ACCESS;
use crate::prov::efa::device::{EfaAddr, HEADROOM, MIN_MTU};
use crate::sys::mem::{iov_len, parts_len, scatter, scatter_parts};

// ---- control packets ----

impl RdmEndpoint {
    pub(super) fn handle_ctrl(&self, g: &mut Inner, src: &EfaAddr, c: Ctrl, b: &[u8]) {
        let Some(p) = self.ctrl_sender(g, src, c) else {
            return;
        };
        match c {
            Ctrl::Cts {
                send_id,
                recv_id,
                recv_length,
                ..
            } => {
                if send_id & TX_BIT != 0 {
                    let Some(id) = self.txe_of(g, p, send_id) else {
                        return;
                    };
                    if let Some(t) = g.txes.get_mut(id) {
                        t.recv_id = recv_id;
                        t.window += recv_length as usize;
                    }
                    g.send_window(id);
                } else if let Some(id) = self.rxe_of(g, p, send_id) {
                    if let Some(r) = g.rxes.get_mut(id)
                        && let RxKind::Read { window, .. } = &mut r.kind
                    {
                        *window += recv_length as usize;
                    }
                    self.send_read_data(g, id);
                }
            }
            Ctrl::CtsData {
                recv_id,
                seg_length,
                seg_offset,
                data_off,
                ..
            } => {
                let Some(data) = seg(b, data_off, seg_length) else {
                    g.dropped += 1;
                    return;
                };
                self.ctsdata(g, p, recv_id, seg_offset, &[data]);
            }
            Ctrl::ReadRsp {
                recv_id,
                send_id,
                seg_length,
                data_off,
                ..
            } => {
                let Some(data) = seg(b, data_off, seg_length) else {
                    g.dropped += 1;
                    return;
                };
                let Some(id) = self.txe_of(g, p, recv_id) else {
                    return;
                };
                self.read_data(g, id, 0, &[data], Some(send_id));
            }
            Ctrl::AtomRsp {
                recv_id,
                seg_length,
                data_off,
            } => {
                let Some(data) = seg(b, data_off, seg_length) else {
                    g.dropped += 1;
                    return;
                };
                let Some(id) = self.txe_of(g, p, recv_id) else {
                    return;
                };
                if let Some(t) = g.txes.get_mut(id) {
                    if !matches!(t.kind, TxKind::Atomic(_)) || data.len() != iov_len(&t.result) {
                        g.dropped += 1;
                        return;
                    }
                    scatter(&t.result, 0, data);
                    t.response = true;
                }
                g.maybe_complete_tx(id);
            }
            Ctrl::Receipt { tx_id, .. } => {
                let Some(id) = self.txe_of(g, p, tx_id) else {
                    return;
                };
                if let Some(t) = g.txes.get_mut(id) {
                    t.response = true;
                }
                g.maybe_complete_tx(id);
            }
            Ctrl::Err { tx_id, status } => {
                let Some(id) = self.txe_of(g, p, tx_id) else {
                    return;
                };
                let err = match i32::try_from(status) {
                    Ok(e) if e > 0 => Errno(e),
                    _ => Errno::REMOTEIO,
                };
                g.fail_tx(id, err, PROV_ERR_REMOTE_ACCESS);
            }
            Ctrl::Eor { send_id, .. } => {
                if let Some(id) = self.txe_of(g, p, send_id) {
                    g.eor(id);
                }
            }
            Ctrl::ReadNack { send_id, .. } => {
                if let Some(id) = self.txe_of(g, p, send_id) {
                    g.read_nacked(id);
                }
            }
            Ctrl::Handshake { .. } => g.dropped += 1,
        }
    }

    /// The peer a control packet `c` from `src` comes from, after the checks every control
    /// packet gets; `None` for a handshake (handled here) or a packet to drop.
    #[inline(always)]
    pub(super) fn ctrl_sender(&self, g: &mut Inner, src: &EfaAddr, c: Ctrl) -> Option<usize> {
        let connid = match c {
            Ctrl::Cts { connid, .. } | Ctrl::ReadRsp { connid, .. } => Some(connid),
            Ctrl::CtsData { connid, .. }
            | Ctrl::Handshake { connid, .. }
            | Ctrl::ReadNack { connid, .. } => connid,
            _ => None,
        };
        // QKEY 0: the device does not know the sender's (EFA hardware); its connid says it.
        // By reference: see `handle_packet`.
        let keyed;
        let src = match connid {
            Some(c) if src.qkey == 0 => {
                keyed = EfaAddr { qkey: c, ..*src };
                &keyed
            }
            _ => src,
        };
        if connid.is_some_and(|c| c != src.qkey) {
            g.dropped += 1;
            return None;
        }
        if let Ctrl::Handshake {
            extra_info,
            max_pkt,
            ..
        } = c
        {
            let p = g.peer_by_addr(*src);
            let peer = &mut g.peers[p];
            if peer.dead {
                return None;
            }
            peer.extra_info = extra_info;
            // No peer of ours receives less than MIN_MTU; a smaller claim is not honoured
            // (headers alone may need more).
            peer.max_pkt = max_pkt.map(|m| (m as usize).max(MIN_MTU));
            // Answer with ours if the peer has not had it: a target needs the initiator's
            // features too (whether it understands ERR responses).
            g.handshake(p);
            let peer = &mut g.peers[p];
            if !peer.hs_received {
                peer.hs_received = true;
                let waiting: Vec<u64> = peer.waiting.drain(..).collect();
                for id in waiting {
                    g.start(id);
                }
            }
            return None;
        }
        // Everything else answers something we started: the sender must be known.
        let p = g.known_peer(src);
        if p.is_none() {
            g.dropped += 1;
        }
        p
    }

    /// A CTSDATA packet from peer `p` whose data is `data`, in order: one slice, or the
    /// pieces of a datagram left in its fragments (`RdmEndpoint::handle_in_pieces`).
    pub(super) fn ctsdata(&self, g: &mut Inner, p: usize, recv_id: u32, off: u64, data: &[&[u8]]) {
        if recv_id & TX_BIT != 0 {
            let Some(id) = self.txe_of(g, p, recv_id) else {
                return;
            };
            self.read_data(g, id, off as usize, data, None);
        } else if let Some(id) = self.rxe_of(g, p, recv_id) {
            self.rx_data(g, id, off as usize, data);
        }
    }

    /// Our transmit operation named by a wire id, if it exists and belongs to peer `p`.
    fn txe_of(&self, g: &mut Inner, p: usize, wire: u32) -> Option<u64> {
        let id = g
            .txes
            .from_wire(wire)
            .filter(|&id| g.txes.get(id).is_some_and(|t| t.peer == p));
        if id.is_none() {
            g.dropped += 1;
        }
        id
    }

    fn rxe_of(&self, g: &mut Inner, p: usize, wire: u32) -> Option<u64> {
        let id = g
            .rxes
            .from_wire(wire)
            .filter(|&id| g.rxes.get(id).is_some_and(|r| r.peer == p));
        if id.is_none() {
            g.dropped += 1;
        }
        id
    }

    /// Data of a read we asked for; grants the responder more when the window is used up.
    fn read_data(
        &self,
        g: &mut Inner,
        id: u64,
        off: usize,
        data: &[&[u8]],
        responder: Option<u32>,
    ) {
        let Some(t) = g.txes.get_mut(id) else { return };
        let n = parts_len(data);
        if t.kind != TxKind::Read || off.checked_add(n).is_none_or(|e| e > t.len) {
            g.dropped += 1;
            return;
        }
        scatter_parts(&t.iov, off, data);
        if let Some(r) = responder {
            t.recv_id = r;
        }
        self.read_landed(g, id, off, n);
    }

    /// `n` bytes at `off` of read `id` arrived (copied, or put in place by the device:
    /// `placement`).
    pub(super) fn read_landed(&self, g: &mut Inner, id: u64, off: usize, n: usize) {
        let Some(room) = g.txes.get(id).map(|t| g.grant_room(t.peer)) else {
            return;
        };
        let credits = g.knobs.tx_min_credits;
        let connid = g.connid();
        let Some(t) = g.txes.get_mut(id) else { return };
        if t.kind != TxKind::Read || off.checked_add(n).is_none_or(|e| e > t.len) {
            g.dropped += 1;
            return;
        }
        t.got += n;
        t.window = t.window.saturating_sub(n);
        t.edge = t.edge.max(off + n);
        if t.got >= t.len {
            t.response = true;
            g.maybe_complete_tx(id);
            return;
        }
        if t.window == 0 {
            let w = (t.len - t.got).min(credits * room);
            t.window = w;
            let (peer, to) = (t.peer, t.recv_id);
            let mut b = g.buf();
            let n = pkt::write_cts(&mut b[HEADROOM..], true, connid, to, tx_wire(id), w as u64);
            g.send_pkt(peer, b, n, Owner::Ctrl, 0);
            g.granted(Target::Read(id));
        }
    }
}

/// `seg_length` bytes of `b` from `off`, if the packet holds them.
fn seg(b: &[u8], off: usize, len: u64) -> Option<&[u8]> {
    let end = off.checked_add(usize::try_from(len).ok()?)?;
    b.get(off..end)
}
