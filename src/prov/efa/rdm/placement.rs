//! Direct placement of long-CTS data (`device::Placement`). Before each poll the endpoint
//! names where the next CTSDATA packets will go: the consecutive segments past everything
//! received of each receive, within the window its CTS granted, receives in the order their
//! CTS went out (a sender streams them in that order, `Inner::parked`).
//! A device that can receive into chosen memory (the UDP device without GRO: loopback) puts
//! each matching payload there itself, and the receiving side copies every byte once (the
//! kernel's copy out of the socket) instead of twice. `perf`, 1 MiB writes both ways over
//! loopback: the kernel's copy in, the kernel's copy out and our copy into the target were
//! 26 %, 14 % and 26 % of all samples.
//!
//! Why memory past the furthest byte received may be named: nothing of it is owed to anyone
//! yet — the operation completes only once every byte of it has arrived, and the bytes it
//! names are then written by their own datagram after whatever a mismatched datagram left
//! there (the device copies a mismatched datagram's bytes back out at once, and SRD never
//! delivers one datagram twice).

use std::collections::VecDeque;

use super::ep::*;
use super::pkt;
use crate::prov::efa::device::{EfaAddr, PLACED_HDR, Placement};
use crate::sys::mem::{IoVec, piece};

/// Segments named ahead of one poll: a 1 MiB transfer in loopback's 64 KiB datagrams.
const AHEAD: usize = 16;

#[derive(Default)]
pub(super) struct Placing {
    /// Long-CTS receives (messages and remote writes) in the order their CTS went out: the
    /// order their senders stream them (`Inner::parked`).
    pub order: VecDeque<u64>,
    pub list: Vec<Placement>,
    /// Per placement, by token: the receive, offset and length it names.
    pub of: Vec<(u64, usize, usize)>,
}

impl Inner {
    /// Names the next segments of the receives in `placing.order` for the coming poll.
    pub fn plan_placements(&mut self) {
        self.placing.list.clear();
        self.placing.of.clear();
        // Receives that finished leave the front.
        while let Some(&id) = self.placing.order.front() {
            if self.rxes.get(id).is_some_and(|r| r.got < r.total) {
                break;
            }
            self.placing.order.pop_front();
        }
        for i in 0..self.placing.order.len() {
            if self.placing.list.len() >= AHEAD {
                break;
            }
            let id = self.placing.order[i];
            self.plan_one(id);
        }
    }

    /// The segments of receive `id` past its edge, within its window.
    fn plan_one(&mut self, id: u64) {
        let Some(r) = self.rxes.get(id) else { return };
        if r.discard || r.lr.is_some() || !r.longcts || r.granted == 0 {
            return;
        }
        let dest: &[IoVec] = match &r.kind {
            RxKind::Write { dest } => dest,
            RxKind::Recv(_) => &r.target,
            _ => return,
        };
        let peer = &self.peers[r.peer];
        if peer.dead {
            return;
        }
        // What the sender cuts its CTSDATA to (`send_window`: our packet size as it knows it).
        let room = self.ctsdata_room_to(r.peer);
        // The window granted ends at `got + granted` (a CTS goes out only once the previous
        // window is all in, when `got` was the edge).
        let end = r.total.min(r.got + r.granted);
        let mut off = r.edge;
        while room > 0 && off < end && self.placing.list.len() < AHEAD {
            let n = room.min(r.total - off);
            let Some(dst) = piece(dest, off, n) else {
                break;
            };
            let mut hdr = [0u8; PLACED_HDR];
            pkt::write_ctsdata(&mut hdr, rx_wire(id), n as u64, off as u64, peer.addr.qkey);
            self.placing.list.push(Placement {
                hdr,
                dst,
                token: self.placing.of.len() as u64,
            });
            self.placing.of.push((id, off, n));
            off += n;
        }
    }

    /// A CTS went out for receive `id`.
    pub fn granted(&mut self, id: u64) {
        if !self.placing.order.contains(&id) {
            self.placing.order.push_back(id);
        }
    }
}

impl RdmEndpoint {
    /// A CTSDATA packet the device put in place (`Completion::Placed`): the checks a CTSDATA
    /// gets (`handle_ctrl`: a known sender, the receive's own peer), then its accounting.
    pub(super) fn placed(&self, g: &mut Inner, token: u64, src: EfaAddr) {
        let Some(&(id, off, n)) = g.placing.of.get(token as usize) else {
            g.dropped += 1;
            return;
        };
        let Some(&p) = g.by_addr.get(&src) else {
            g.dropped += 1;
            return;
        };
        if g.rxes.get(id).is_none_or(|r| r.peer != p) {
            g.dropped += 1;
            return;
        }
        self.rx_placed(g, id, off, n);
    }
}
