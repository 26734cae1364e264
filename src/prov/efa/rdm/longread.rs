//! The long-read protocols (efa-reference §3, §5), for peers whose devices both do RDMA read
//! (extra-info bit 0). A long message's sender hands out its registered memory: a
//! LONGREAD_MSGRTM/TAGRTM request carries `read_iov` entries (address, length, rkey) in place
//! of data; the receiver matches it as any message, reads the sender's memory with device RDMA
//! straight into the receive buffer (or into a registered staging buffer when that buffer is
//! not registered with the device), and answers EOR, on which the sender completes. The
//! receiving side also serves LONGREAD_RTW (an upstream initiator's write when the devices
//! read but do not both write): the target reads the initiator's memory into its own
//! registration, then EOR. A read the device refuses fails the receive (and the sender, when
//! it understands ERR packets) instead of leaving anyone waiting.
//!
//! READ_NACK, both ways: a receiver that cannot register the memory a read lands in (no
//! staging buffer: the NIC refused the registration) tells a sender that advertised
//! extra-info bit 6 so, and keeps the message's entry for the long-CTS request, flagged
//! READ_NACK, that the sender sends instead (`read_nack`, `resume_nacked`); a sender told so
//! goes on by long-CTS from where its runt bytes ended (`read_nacked`). To a sender without
//! the bit such a receive fails as a refused read does.

use super::ep::*;
use super::pkt::{self, Req, ReqHdr, RmaIov};
use crate::abi::consts::*;
use crate::core::Errno;
use crate::prov::efa::device::{DevError, HEADROOM, RdmaOp, RdmaReq};
use crate::sys::mem::{IoVec, iov_len, piece_upto, scatter};
use crate::util::cq::CqErrEntry;

impl Inner {
    /// Sends message `id` as a long-read request if it can be one: at least
    /// `FI_EFA_INTER_MIN_READ_MESSAGE_SIZE` bytes, both devices read, and every piece of the
    /// source registered for remote reads (no injected copy). Returns false otherwise.
    pub fn start_longread_msg(&mut self, id: u64) -> bool {
        let Some(t) = self.txes.get(id) else {
            return false;
        };
        if !self.rdma.rdma_read
            || !self.peers[t.peer].rdma_read()
            || t.inject
            || t.len < self.knobs.min_read_msg
        {
            return false;
        }
        let Some(iov) = self.read_iov_of(id) else {
            return false;
        };
        if self.start_runtread_msg(id, &iov) {
            return true;
        }
        let Some(t) = self.txes.get(id) else {
            return false;
        };
        let tagged = t.kind == TxKind::Tagged;
        let (ty, flags) = if tagged {
            (pkt::LONGREAD_TAGRTM, pkt::REQ_TAGGED)
        } else {
            (pkt::LONGREAD_MSGRTM, pkt::REQ_MSG)
        };
        let h = ReqHdr {
            msg_id: t.msg_id,
            tag: t.tag,
            send_id: tx_wire(id),
            msg_length: t.len as u64,
            read_iov_count: iov.len() as u32,
            ..Default::default()
        };
        let mut data = [0u8; pkt::MAX_RMA_IOV * pkt::RMA_IOV_LEN];
        let n = pkt::write_read_iovs(&mut data, &iov);
        if let Some(t) = self.txes.get_mut(id) {
            // The receiver's device reads our memory until its EOR.
            t.lent = true;
            t.longread = true;
            t.await_response = true;
        }
        self.send_req(id, ty, flags, &h, &[], 0, 0, &data[..n]);
        if let Some(t) = self.txes.get_mut(id) {
            t.queued = t.len;
            t.state = TxState::WaitResponse;
        }
        true
    }

    /// Sends write `id` as LONGREAD_RTW if it can be one (efa-reference §5): both devices read
    /// but do not both write, at least `FI_EFA_INTER_MIN_READ_WRITE_SIZE` bytes, one target
    /// entry, and the source registered for remote reads. Returns false otherwise.
    pub fn start_longread_write(&mut self, id: u64) -> bool {
        let Some(t) = self.txes.get(id) else {
            return false;
        };
        let peer = &self.peers[t.peer];
        if !self.rdma.rdma_read
            || !peer.rdma_read()
            || (self.rdma.rdma_write && peer.rdma_write())
            || t.inject
            || t.len < self.knobs.min_read_write
            || t.rma.len() != 1
        {
            return false;
        }
        let Some(iov) = self.read_iov_of(id) else {
            return false;
        };
        let Some(t) = self.txes.get_mut(id) else {
            return false;
        };
        t.lent = true;
        t.longread = true;
        t.await_response = true;
        let h = ReqHdr {
            rma_iov_count: 1,
            msg_length: t.len as u64,
            send_id: tx_wire(id),
            read_iov_count: iov.len() as u32,
            ..Default::default()
        };
        let rma = t.rma.clone();
        let mut data = [0u8; pkt::MAX_RMA_IOV * pkt::RMA_IOV_LEN];
        let n = pkt::write_read_iovs(&mut data, &iov);
        self.send_req(
            id,
            pkt::LONGREAD_RTW,
            pkt::REQ_RMA,
            &h,
            &rma,
            0,
            0,
            &data[..n],
        );
        if let Some(t) = self.txes.get_mut(id) {
            t.queued = t.len;
            t.state = TxState::WaitResponse;
        }
        true
    }

    /// The `read_iov` entries of operation `id`'s source: every piece registered for remote
    /// reads, at most `MAX_RMA_IOV` of them.
    fn read_iov_of(&self, id: u64) -> Option<Vec<RmaIov>> {
        let t = self.txes.get(id)?;
        let iov = t
            .iov
            .iter()
            .filter(|v| !v.is_empty())
            .map(|v| {
                Some(RmaIov {
                    addr: v.addr() as u64,
                    len: v.len() as u64,
                    key: u64::from(self.dev.remote_key(*v)?),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        (iov.len() <= pkt::MAX_RMA_IOV).then_some(iov)
    }

    /// READ_NACK: the receiver of long-read (or runt-read) operation `id` cannot read our
    /// memory (efa-reference §3). The operation goes on by long-CTS: a LONGCTS_MSGRTM /
    /// TAGRTM (a message, keeping its msg_id, whose turn in the receiver's order it already
    /// had) or LONGCTS_RTW (a write) flagged READ_NACK and carrying no data, then CTSDATA
    /// from where the runt bytes, if any, ended, within the receiver's windows.
    pub fn read_nacked(&mut self, id: u64) {
        let min_credits = self.knobs.tx_min_credits as u32;
        let Some(t) = self.txes.get_mut(id) else {
            return;
        };
        if !t.longread || t.state != TxState::WaitResponse || t.failed.is_some() {
            self.dropped += 1;
            return;
        }
        t.longread = false;
        t.response = false;
        t.queued = t.runt;
        let (peer, kind, runt) = (t.peer, t.kind, t.runt);
        let mut dc = t.flags & FI_DELIVERY_COMPLETE != 0;
        if kind == TxKind::Write {
            // As `start` sends emulated writes: confirmed when the target reports refusals.
            dc |= self.peers[peer].error_responses();
        }
        let Some(t) = self.txes.get_mut(id) else {
            return;
        };
        t.await_response = dc;
        let mut h = ReqHdr {
            msg_id: t.msg_id,
            tag: t.tag,
            send_id: tx_wire(id),
            msg_length: t.len as u64,
            credit_request: min_credits,
            ..Default::default()
        };
        let rma = t.rma.clone();
        let (ty, flags) = match kind {
            TxKind::Msg => (
                if dc {
                    pkt::DC_LONGCTS_MSGRTM
                } else {
                    pkt::LONGCTS_MSGRTM
                },
                pkt::REQ_MSG,
            ),
            TxKind::Tagged => (
                if dc {
                    pkt::DC_LONGCTS_TAGRTM
                } else {
                    pkt::LONGCTS_TAGRTM
                },
                pkt::REQ_TAGGED,
            ),
            TxKind::Write => {
                h.rma_iov_count = rma.len() as u32;
                (
                    if dc {
                        pkt::DC_LONGCTS_RTW
                    } else {
                        pkt::LONGCTS_RTW
                    },
                    pkt::REQ_RMA,
                )
            }
            _ => return,
        };
        self.nacks.1 += 1;
        self.send_req(id, ty, flags | pkt::REQ_READ_NACK, &h, &rma, runt, 0, &[]);
        self.set_state(id, TxState::WaitCts);
    }

    /// EOR: the receiver read everything of long-read message `id`.
    pub fn eor(&mut self, id: u64) {
        let Some(t) = self.txes.get_mut(id) else {
            return;
        };
        if !t.longread {
            self.dropped += 1;
            return;
        }
        t.done = t.len;
        t.response = true;
        self.maybe_complete_tx(id);
    }
}

/// The memory a long read lands in: the matched receive's, or a write's target.
fn local_of(r: &Rxe) -> Vec<IoVec> {
    match &r.kind {
        RxKind::Recv(_) => r.target.clone(),
        RxKind::Write { dest } => dest.clone(),
        _ => Vec::new(),
    }
}

/// The sender's memory at byte `off` of a long read: (address, bytes left in its entry, key).
fn remote_at(iov: &[RmaIov], off: usize) -> Option<(u64, usize, u64)> {
    let mut o = off as u64;
    for r in iov {
        if o < r.len {
            let left = usize::try_from(r.len - o).ok()?;
            return Some((r.addr.checked_add(o)?, left, r.key));
        }
        o -= r.len;
    }
    None
}

impl RdmEndpoint {
    /// LONGREAD_RTW: a peer writes into our memory by having us read its own.
    pub(super) fn recv_long_write(&self, g: &mut Inner, p: usize, req: &Req, data: &[u8]) {
        let h = &req.hdr;
        let (dest, total) = match self.verify(&req.rma, 1, FI_REMOTE_WRITE) {
            Ok(v) => v,
            Err(e) => return self.refuse(g, p, h.send_id, e),
        };
        let iov = pkt::read_iovs(data, h.read_iov_count)
            .filter(|iov| pkt::read_iov_total(iov) == Some(total as u64));
        let (Some(iov), true) = (iov, total as u64 == h.msg_length) else {
            return self.refuse(g, p, h.send_id, Errno::INVAL);
        };
        let id = g.rxes.insert(Rxe {
            peer: p,
            kind: RxKind::Write { dest },
            msg_id: 0,
            total,
            got: 0,
            send_id: h.send_id,
            granted: 0,
            dc: false,
            tag: 0,
            cq_data: req.cq_data,
            tagged: false,
            medium: false,
            longcts: false,
            credits: 0,
            staging: Vec::new(),
            target: Vec::new(),
            released: false,
            discard: false,
            lr: Some(LongRead::new(iov)),
            edge: 0,
            nacked: false,
        });
        self.start_long_read(g, id);
    }

    /// Starts the reads of long-read entry `id` once its memory is known (matched receive or
    /// checked write target). Idempotent: called again (a runt read's later packets), it
    /// finishes the entry if nothing is left to wait for.
    pub(super) fn start_long_read(&self, g: &mut Inner, id: u64) {
        let Some(r) = g.rxes.get_mut(id) else { return };
        let local = local_of(r);
        let total = r.total;
        let Some(lr) = r.lr.as_mut() else { return };
        if lr.started {
            return self.maybe_finish_long_read(g, id);
        }
        lr.started = true;
        let from = lr.from;
        let want = total.min(iov_len(&local)).max(from);
        lr.want = want;
        lr.posted = from;
        // Memory the device does not know is read into a registered staging buffer, then
        // copied (upstream registers it on the fly through its MR cache instead).
        let mut off = from;
        let registered = loop {
            if off >= want {
                break true;
            }
            match piece_upto(&local, off, want - off) {
                Some(p) if g.dev.local_key(p).is_some() => off += p.len(),
                _ => break false,
            }
        };
        if want > from && !registered {
            let staging = g.dev.staging(want - from);
            let p = g.rxes.get(id).map_or(0, |r| r.peer);
            // A sender that understands READ_NACK goes on by long-CTS instead (§3).
            let nack = g.peers[p].extra_info & pkt::EXTRA_READ_NACK != 0;
            let Some(lr) = g.rxes.get_mut(id).and_then(|r| r.lr.as_mut()) else {
                return;
            };
            match staging {
                Some(s) => lr.staging = Some(s),
                None if nack => {
                    lr.nack = true;
                    return self.maybe_finish_long_read(g, id);
                }
                None => {
                    lr.failed = Some(DevError::LocalKey);
                    return self.maybe_finish_long_read(g, id);
                }
            }
        }
        self.post_long_reads(g, id);
    }

    /// Posts the device reads of a long read from where it stopped: one per stretch that is
    /// contiguous on both sides, at most `max_rdma_size`. A full send queue leaves the rest
    /// for the next progress pass.
    pub(super) fn post_long_reads(&self, g: &mut Inner, id: u64) {
        let max = g.dev.max_rdma_size().max(1);
        let Some(r) = g.rxes.get(id) else { return };
        let (p, local) = (r.peer, local_of(r));
        let dest = g.peers[p].addr;
        loop {
            let Some(lr) = g.rxes.get_mut(id).and_then(|r| r.lr.as_mut()) else {
                return;
            };
            if lr.failed.is_some() || lr.posted >= lr.want {
                break;
            }
            let off = lr.posted;
            let room = lr.want - off;
            let remote =
                remote_at(&lr.iov, off).and_then(|(a, n, k)| Some((a, n, u32::try_from(k).ok()?)));
            let Some((raddr, rleft, rkey)) = remote else {
                lr.failed = Some(DevError::RemoteAccess);
                break;
            };
            let n = room.min(rleft).min(max);
            let piece = match &lr.staging {
                Some(s) => s.mem().sub(off - lr.from, n).map(|m| (m, Some(s.lkey()))),
                None => piece_upto(&local, off, n).map(|m| (m, None)),
            };
            let Some((mem, lkey)) = piece else {
                lr.failed = Some(DevError::LocalKey);
                break;
            };
            let Some(lkey) = lkey.or_else(|| g.dev.local_key(mem)) else {
                if let Some(lr) = g.rxes.get_mut(id).and_then(|r| r.lr.as_mut()) {
                    lr.failed = Some(DevError::LocalKey);
                }
                break;
            };
            let wr = g.sent.insert(Sent {
                owner: Owner::Rx(id),
                peer: p,
                payload: mem.len(),
                len: 0,
                tail: mem,
                rnr_again: false,
            });
            let posted = g.dev.post_rdma(RdmaReq {
                op: RdmaOp::Read,
                dest,
                local: mem,
                lkey,
                raddr,
                rkey,
                wr_id: wr,
            });
            let Some(lr) = g.rxes.get_mut(id).and_then(|r| r.lr.as_mut()) else {
                return;
            };
            match posted {
                Ok(()) => {
                    lr.posted += mem.len();
                    lr.in_flight += 1;
                }
                Err(e) => {
                    g.sent.remove(wr);
                    if e == Errno::AGAIN {
                        if !g.rdma_waiting.contains(&Owner::Rx(id)) {
                            g.rdma_waiting.push_back(Owner::Rx(id));
                        }
                        return;
                    }
                    lr.failed = Some(DevError::LocalKey);
                    break;
                }
            }
        }
        self.maybe_finish_long_read(g, id);
    }

    /// One device read of long-read entry `id` finished.
    pub(super) fn long_read_done(
        &self,
        g: &mut Inner,
        id: u64,
        bytes: usize,
        status: core::result::Result<(), DevError>,
    ) {
        let Some(r) = g.rxes.get_mut(id) else { return };
        let Some(lr) = r.lr.as_mut() else { return };
        lr.in_flight = lr.in_flight.saturating_sub(1);
        match status {
            Ok(()) => {
                r.got += bytes;
                lr.read += bytes;
            }
            Err(e) => {
                lr.failed.get_or_insert(e);
            }
        }
        self.maybe_finish_long_read(g, id);
    }

    /// Once nothing is in the device (and a runt read's packets have all arrived): EOR and
    /// the message's (or write's) completion, or its failure.
    fn maybe_finish_long_read(&self, g: &mut Inner, id: u64) {
        let Some(r) = g.rxes.get_mut(id) else { return };
        let Some(lr) = r.lr.as_ref() else { return };
        if lr.in_flight > 0 || (lr.failed.is_none() && !lr.nack && lr.posted < lr.want) {
            return;
        }
        // What did not come by read came in packets: the runt bytes, all of them first.
        if r.got.saturating_sub(lr.read) < lr.from {
            return;
        }
        let Some(lr) = r.lr.take() else { return };
        if let Some(e) = lr.failed {
            return self.long_read_failed(g, id, e);
        }
        if lr.nack {
            return self.read_nack(g, id);
        }
        if let Some(s) = &lr.staging {
            let local = local_of(r);
            s.mem()
                .with_slice(|b| scatter(&local, lr.from, &b[..lr.want - lr.from]));
        }
        r.got = r.total;
        let (p, send_id) = (r.peer, r.send_id);
        drop(lr);
        let connid = g.connid();
        let mut b = g.buf();
        let n = pkt::write_eor(&mut b[HEADROOM..], send_id, rx_wire(id), connid);
        g.send_pkt(p, b, n, Owner::Ctrl, 0);
        self.finish(g, id);
    }

    /// READ_NACK (efa-reference §3): entry `id`'s memory could not be registered, so the
    /// sender is asked to go on by long-CTS. A message keeps its entry (matched, its runt
    /// bytes in place), found again by msg_id when the sender's long-CTS request, flagged
    /// READ_NACK, comes (`resume_nacked`); a write's entry ends here, as its long-CTS
    /// request starts a write afresh.
    fn read_nack(&self, g: &mut Inner, id: u64) {
        let Some(r) = g.rxes.get_mut(id) else { return };
        let (p, send_id) = (r.peer, r.send_id);
        if matches!(r.kind, RxKind::Write { .. }) {
            g.rxes.remove(id);
        } else {
            r.nacked = true;
            r.granted = 0;
            if !r.medium {
                r.medium = true;
                let msg_id = r.msg_id;
                g.peers[p].rx_map.insert(msg_id, id);
            }
        }
        g.nacks.0 += 1;
        let connid = g.connid();
        let mut b = g.buf();
        let n = pkt::write_read_nack(&mut b[HEADROOM..], send_id, rx_wire(id), connid);
        g.send_pkt(p, b, n, Owner::Ctrl, 0);
    }

    /// A long-CTS message request flagged READ_NACK: the rest of message `msg_id`, whose
    /// long or runt read we refused, by long-CTS. It bypasses the message order (its msg_id
    /// had its turn with the first request) and joins the entry we kept; it carries no
    /// data (the runt bytes, if any, came before), so our CTS asks for the rest.
    pub(super) fn resume_nacked(&self, g: &mut Inner, p: usize, req: &Req) {
        let h = &req.hdr;
        let dc = matches!(req.ty, pkt::DC_LONGCTS_MSGRTM | pkt::DC_LONGCTS_TAGRTM);
        let id = g.peers[p].rx_map.get(&h.msg_id).copied();
        let ok = id.and_then(|id| g.rxes.get(id)).is_some_and(|r| {
            r.nacked && r.total as u64 == h.msg_length && r.tagged == pkt::is_tagged(req.ty)
        });
        let (Some(id), true) = (id, ok) else {
            g.dropped += 1;
            return;
        };
        let Some(r) = g.rxes.get_mut(id) else { return };
        r.nacked = false;
        r.longcts = true;
        r.send_id = h.send_id;
        r.credits = h.credit_request as usize;
        r.dc |= dc;
        self.advance(g, id);
    }

    /// A long read the device refused (or could not start): the receive fails here, and the
    /// sender learns of it if it understands ERR (else it waits for an EOR that never comes,
    /// as upstream's would).
    fn long_read_failed(&self, g: &mut Inner, id: u64, e: DevError) {
        let Some(r) = g.rxes.remove(id) else { return };
        if r.medium {
            g.peers[r.peer].rx_map.remove(&r.msg_id);
        }
        g.refused += 1;
        if let RxKind::Recv(recv) = &r.kind
            && !r.discard
        {
            if let Some(cq) = &g.rx_cq {
                let mut ce = CqErrEntry::new(
                    recv.context,
                    FI_RECV | if r.tagged { FI_TAGGED } else { FI_MSG },
                    e.errno(),
                );
                ce.prov_errno = e.prov_errno();
                ce.tag = r.tag;
                cq.push_err(ce);
            }
            if let Some(c) = &g.cntr.recv {
                c.fail();
            }
        }
        self.refuse_quietly(g, r.peer, r.send_id, e.errno());
    }
}

impl LongRead {
    pub(super) fn new(iov: Vec<RmaIov>) -> Box<LongRead> {
        Box::new(LongRead {
            iov,
            from: 0,
            want: 0,
            posted: 0,
            read: 0,
            in_flight: 0,
            started: false,
            staging: None,
            failed: None,
            nack: false,
        })
    }
}
