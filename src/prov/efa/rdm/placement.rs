//! Direct placement of long-CTS data (`device::Placement`). Before each poll the endpoint
//! names where the next CTSDATA packets will go: the consecutive segments past everything
//! received of each receive (and each read we asked for), within the window granted, in the
//! order the windows were granted (a sender streams them in that order, `Inner::parked`).
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

/// Where long-CTS data goes: a receive (message or remote write, a `rxes` id) or a read we
/// asked for (a `txes` id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Recv(u64),
    Read(u64),
}

pub(super) struct Placing {
    /// The device places (`Device::places`): otherwise nothing is planned or kept, and a
    /// poll costs no planning (Ethernet's GRO runs, the hardware device).
    on: bool,
    /// Receives and reads in the order their latest window was granted (CTS, or a read
    /// request's first window): the order their senders stream them (`Inner::parked`).
    pub order: VecDeque<Target>,
    pub list: Vec<Placement>,
    /// Per placement, by token: what it names, offset and length.
    pub of: Vec<(Target, usize, usize)>,
}

impl Placing {
    pub fn new(on: bool) -> Placing {
        Placing {
            on,
            order: VecDeque::new(),
            list: Vec::new(),
            of: Vec::new(),
        }
    }
}

impl Inner {
    /// Names the next segments of the receives in `placing.order` for the coming poll.
    pub fn plan_placements(&mut self) {
        if !self.placing.on {
            return;
        }
        self.placing.list.clear();
        self.placing.of.clear();
        // Those that finished leave the front.
        while let Some(&t) = self.placing.order.front() {
            let open = match t {
                Target::Recv(id) => self.rxes.get(id).is_some_and(|r| r.got < r.total),
                Target::Read(id) => self.txes.get(id).is_some_and(|t| t.got < t.len),
            };
            if open {
                break;
            }
            self.placing.order.pop_front();
        }
        for i in 0..self.placing.order.len() {
            if self.placing.list.len() >= AHEAD {
                break;
            }
            let t = self.placing.order[i];
            self.plan_one(t);
        }
    }

    /// The segments of `t` past its edge, within its window.
    fn plan_one(&mut self, t: Target) {
        // (memory, peer, edge, end of the window, total, the id CTSDATA carries)
        let (dest, p, edge, end, total, wire): (&[IoVec], _, _, _, _, _) = match t {
            Target::Recv(id) => {
                let Some(r) = self.rxes.get(id) else { return };
                if r.discard || r.lr.is_some() || !r.longcts || r.granted == 0 {
                    return;
                }
                let dest: &[IoVec] = match &r.kind {
                    RxKind::Write { dest } => dest,
                    RxKind::Recv(_) => &r.target,
                    _ => return,
                };
                // The window granted ends at `got + granted` (a CTS goes out only once the
                // previous window is all in, when `got` was the edge).
                let end = r.total.min(r.got + r.granted);
                (dest, r.peer, r.edge, end, r.total, rx_wire(id))
            }
            Target::Read(id) => {
                let Some(t) = self.txes.get(id) else { return };
                if t.kind != TxKind::Read || t.failed.is_some() || t.window == 0 {
                    return;
                }
                let end = t.len.min(t.got + t.window);
                (&t.iov[..], t.peer, t.edge, end, t.len, tx_wire(id))
            }
        };
        let peer = &self.peers[p];
        if peer.dead {
            return;
        }
        // What the sender cuts its CTSDATA to (`send_window`, `send_read_data`: our packet
        // size as it knows it).
        let room = self.ctsdata_room_to(p);
        let mut off = edge;
        while room > 0 && off < end && self.placing.list.len() < AHEAD {
            let n = room.min(total - off);
            let Some(dst) = piece(dest, off, n) else {
                break;
            };
            let mut hdr = [0u8; PLACED_HDR];
            pkt::write_ctsdata(&mut hdr, wire, n as u64, off as u64, peer.addr.qkey);
            self.placing.list.push(Placement {
                hdr,
                dst,
                token: self.placing.of.len() as u64,
            });
            self.placing.of.push((t, off, n));
            off += n;
        }
    }

    /// A window was granted for `t`: its data comes after the windows granted before it (the
    /// sender serves windows in the order their CTS arrive, `Inner::parked`), so a transfer
    /// granted its next window goes to the back.
    pub fn granted(&mut self, t: Target) {
        if !self.placing.on {
            return;
        }
        if let Some(i) = self.placing.order.iter().position(|&x| x == t) {
            self.placing.order.remove(i);
        }
        self.placing.order.push_back(t);
    }
}

impl RdmEndpoint {
    /// A CTSDATA packet the device put in place (`Completion::Placed`): the checks a CTSDATA
    /// gets (`handle_ctrl`: a known sender, the receive's own peer), then its accounting.
    pub(super) fn placed(&self, g: &mut Inner, token: u64, src: EfaAddr) {
        let Some(&(t, off, n)) = g.placing.of.get(token as usize) else {
            g.dropped += 1;
            return;
        };
        let Some(p) = g.known_peer(&src) else {
            g.dropped += 1;
            return;
        };
        let owner = match t {
            Target::Recv(id) => g.rxes.get(id).map(|r| r.peer),
            Target::Read(id) => g.txes.get(id).map(|t| t.peer),
        };
        if owner != Some(p) {
            g.dropped += 1;
            return;
        }
        match t {
            Target::Recv(id) => self.rx_placed(g, id, off, n),
            Target::Read(id) => self.read_landed(g, id, off, n),
        }
    }
}
