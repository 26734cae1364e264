//! Sends of the RDM endpoint (efa-reference §3): the application's messages posted as transmit
//! operations, started (one-sided ones once the peer's handshake is in, §2), sent as request
//! packets and CTSDATA windows, and completed — the completion of every transmit operation,
//! one-sided ones too, is here.
//!
//! Protocol choice for a message of `len` bytes: eager when it fits one packet, medium up to
//! `FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE` (all segments at once), long-CTS beyond (the first
//! chunk with the request, the rest under the receiver's CTS windows); delivery-complete
//! variants when asked. Before all of these, long read (`longread.rs`) where both devices do
//! RDMA read and the message is long enough, or runt read (`runt.rs`) when `FI_EFA_RUNT_SIZE`
//! is set.

use std::sync::Arc;

use super::ep::*;
use super::pkt::{self, ReqHdr, RmaIov};
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::efa::device::HEADROOM;
use crate::sys::mem::{IoVec, gather, iov_len};
use crate::util::Endpoint;
use crate::util::cntr::Cntr;
use crate::util::cq::{CqEntry, CqErrEntry};
use crate::util::ep::{AtomicKind, MsgOp};
use crate::util::rxq::MAX_IOV;

/// Payloads at least this long go to the device as the application's memory, not copied
/// into the packet (zero-copy send): the copy cost the sender as much as the kernel's own
/// (perf at 1 MiB over loopback), while a short one costs less than the iovec it saves.
pub(super) const ZERO_COPY_MIN: usize = 4096;

/// The same for the data packets of bulk transfers (CTSDATA, read responses), which fill
/// MTU-sized datagrams: on Ethernet (1,472 bytes) copying them made up half of the library's
/// `memmove` time in both-ways writes over a veth pair, and sending them as they lie gave
/// 7-11 % more bandwidth; a lone eager message of that size stays cheaper copied (2 KiB
/// tagged messages on loopback: 3 % fewer per second as they lie).
pub(super) const BULK_ZERO_COPY_MIN: usize = 1024;

/// Packets handed to the device and not completed, or waiting for it, past which new
/// operations are refused with `FI_EAGAIN` until completions come (upstream efa refuses them
/// when the device's send queue is full). Without it, a stream of injected writes queued up
/// to four transmit contexts of packets (16,384, 70 MiB of buffers). Above the bulk bound
/// (`BULK_SEND_BYTES`, at most 1,024 packets), so that a bulk transfer under way still
/// leaves room for new operations.
pub(super) const PACKETS_MAX: usize = 2048;

// ---- completions ----

impl Inner {
    /// Whether the transmit queue is full: operations in progress up to four times the
    /// transmit context size (`tx_size_left` counts the same); sends, writes, reads and
    /// atomics past it are refused with `FI_EAGAIN`, never queued without bound.
    pub(super) fn tx_full(&self) -> bool {
        self.txes.len() >= self.knobs.tx_size.max(1) * 4 || self.packets_out() >= PACKETS_MAX
    }

    fn cq_flags(kind: TxKind) -> u64 {
        match kind {
            TxKind::Msg => FI_SEND | FI_MSG,
            TxKind::Tagged => FI_SEND | FI_TAGGED,
            TxKind::Write => FI_WRITE | FI_RMA,
            TxKind::Read => FI_READ | FI_RMA,
            TxKind::Atomic(AtomicKind::Write) => FI_WRITE | FI_ATOMIC,
            TxKind::Atomic(_) => FI_READ | FI_ATOMIC,
        }
    }

    fn tx_cntr(&self, kind: TxKind) -> Option<&Arc<Cntr>> {
        match kind {
            TxKind::Msg | TxKind::Tagged => self.cntr.send.as_ref(),
            TxKind::Write | TxKind::Atomic(AtomicKind::Write) => self.cntr.write.as_ref(),
            TxKind::Read | TxKind::Atomic(_) => self.cntr.read.as_ref(),
        }
    }

    /// Finishes a transmit operation successfully.
    fn complete_tx(&mut self, id: u64) {
        let Some(t) = self.txes.remove(id) else {
            return;
        };
        if t.flags & FI_COMPLETION != 0
            && let Some(cq) = &self.tx_cq
        {
            cq.push(CqEntry {
                op_context: t.context,
                flags: Self::cq_flags(t.kind),
                len: t.len,
                src_addr: FI_ADDR_NOTAVAIL,
                ..Default::default()
            });
        }
        if let Some(c) = self.tx_cntr(t.kind) {
            c.complete(t.len);
        }
        self.spare.keep_txe(t);
    }

    /// Fails a transmit operation (error completions are always reported, fi_cq(3)).
    pub fn fail_tx(&mut self, id: u64, err: Errno, prov_errno: i32) {
        if let Some(t) = self.txes.get_mut(id)
            && t.lent
            && t.in_flight > 0
        {
            // The device still sends from the application's buffer, which the application may
            // free once told: the error waits until the last of those packets is done, and
            // nothing more goes out.
            t.failed.get_or_insert((err, prov_errno));
            t.window = 0;
            t.queued = t.len;
            return;
        }
        let Some(t) = self.txes.remove(id) else {
            return;
        };
        let (err, prov_errno) = t.failed.unwrap_or((err, prov_errno));
        if let Some(cq) = &self.tx_cq {
            let mut e = CqErrEntry::new(t.context, Self::cq_flags(t.kind), err);
            e.prov_errno = prov_errno;
            e.tag = t.tag;
            cq.push_err(e);
        }
        if let Some(c) = self.tx_cntr(t.kind) {
            c.fail();
        }
        self.spare.keep_txe(t);
    }
}

// ---- request packets ----

impl Inner {
    /// Sends a request packet: after the headers `extra` (rma entries of an atomic's operand,
    /// a long or runt read's `read_iov`), then `data_len` bytes of the op's data from `off`.
    #[allow(clippy::too_many_arguments)]
    pub fn send_req(
        &mut self,
        id: u64,
        ty: u8,
        flags: u16,
        h: &ReqHdr,
        rma: &[RmaIov],
        off: usize,
        data_len: usize,
        extra: &[u8],
    ) {
        let Some(t) = self.txes.get(id) else { return };
        let peer = t.peer;
        let cq_data = t.cq_data.filter(|_| {
            matches!(
                ty,
                pkt::EAGER_MSGRTM..=pkt::LONGCTS_RTW
                    | pkt::LONGREAD_MSGRTM..=pkt::LONGREAD_RTW
                    | pkt::DC_EAGER_MSGRTM..=pkt::DC_LONGCTS_RTW
                    | pkt::RUNTREAD_MSGRTM
                    | pkt::RUNTREAD_TAGRTM
            )
        });
        let hs = self.peers[peer].hs_received;
        let me = self.dev.addr();
        let connid = self.connid();
        let need = self.req_overhead(peer, ty, rma.len(), cq_data.is_some()) + extra.len();
        let mut b = self.buf_for(peer, need + data_len);
        let hdr = pkt::write_req(
            &mut b[HEADROOM..],
            ty,
            flags,
            h,
            rma,
            (!hs).then_some(&me),
            cq_data,
            hs.then_some(connid),
        );
        let Some(t) = self.txes.get_mut(id) else {
            return;
        };
        t.queued = t.queued.max(off + data_len);
        t.in_flight += 1;
        let hdr = hdr + extra.len();
        debug_assert_eq!(hdr, need, "req_overhead sized the buffer");
        b[HEADROOM + hdr - extra.len()..HEADROOM + hdr].copy_from_slice(extra);
        // The payload ends the packet.
        let piece = (data_len >= ZERO_COPY_MIN)
            .then(|| t.source_piece(off, data_len))
            .flatten();
        if let Some(tail) = piece {
            t.lent = true;
            self.send_pkt_tail(peer, b, hdr, tail, Owner::Tx(id), data_len);
            return;
        }
        if data_len > 0 {
            t.copy_out(off, &mut b[HEADROOM + hdr..HEADROOM + hdr + data_len]);
        }
        self.send_pkt(peer, b, hdr + data_len, Owner::Tx(id), data_len);
    }

    /// Header bytes of a request of type `ty` to `peer` (raw address until the handshake).
    pub fn req_overhead(&self, peer: usize, ty: u8, rma: usize, cq_data: bool) -> usize {
        let hs = self.peers[peer].hs_received;
        pkt::req_len(ty, rma, !hs, cq_data, hs)
    }
}

// ---- starting operations ----

impl Inner {
    /// Sends a message operation (eager, medium or long-CTS).
    fn start_msg(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let (peer, len, tagged, dc, cq) = (
            t.peer,
            t.len,
            t.kind == TxKind::Tagged,
            t.await_response,
            t.cq_data.is_some(),
        );
        let tag_ty = |msg: u8| if tagged { msg + 1 } else { msg };
        let mut flags = pkt::REQ_MSG;
        if tagged {
            flags = pkt::REQ_TAGGED;
        }
        let (msg_id, tag) = (t.msg_id, t.tag);
        let send_id = tx_wire(id);
        if self.start_longread_msg(id) {
            return;
        }
        let eager_ty = tag_ty(if dc {
            pkt::DC_EAGER_MSGRTM
        } else {
            pkt::EAGER_MSGRTM
        });
        let pkt_max = self.peer_pkt(peer);
        let eager_room = pkt_max.saturating_sub(self.req_overhead(peer, eager_ty, 0, cq));
        if len <= eager_room {
            let h = ReqHdr {
                msg_id,
                tag,
                send_id,
                ..Default::default()
            };
            self.send_req(id, eager_ty, flags, &h, &[], 0, len, &[]);
            self.set_state(id, TxState::Sending);
            return;
        }
        if len <= self.knobs.max_medium {
            let ty = tag_ty(if dc {
                pkt::DC_MEDIUM_MSGRTM
            } else {
                pkt::MEDIUM_MSGRTM
            });
            let room = pkt_max
                .saturating_sub(self.req_overhead(peer, ty, 0, cq))
                .max(1);
            let mut off = 0;
            while off < len {
                let n = room.min(len - off);
                let h = ReqHdr {
                    msg_id,
                    tag,
                    send_id,
                    msg_length: len as u64,
                    seg_offset: off as u64,
                    ..Default::default()
                };
                self.send_req(id, ty, flags, &h, &[], off, n, &[]);
                off += n;
            }
            self.set_state(id, TxState::Sending);
            return;
        }
        let ty = tag_ty(if dc {
            pkt::DC_LONGCTS_MSGRTM
        } else {
            pkt::LONGCTS_MSGRTM
        });
        let room = pkt_max.saturating_sub(self.req_overhead(peer, ty, 0, cq));
        let h = ReqHdr {
            msg_id,
            tag,
            send_id,
            msg_length: len as u64,
            credit_request: self.knobs.tx_min_credits as u32,
            ..Default::default()
        };
        self.send_req(id, ty, flags, &h, &[], 0, room.min(len), &[]);
        self.set_state(id, TxState::WaitCts);
    }

    pub fn set_state(&mut self, id: u64, s: TxState) {
        if let Some(t) = self.txes.get_mut(id) {
            t.state = s;
        }
    }

    /// Data payload room in a CTSDATA packet to `peer` (`peer_pkt`).
    pub fn ctsdata_room_to(&self, peer: usize) -> usize {
        self.peer_pkt(peer).saturating_sub(32)
    }

    /// Sends CTSDATA for what the receiver granted.
    pub fn send_window(&mut self, id: u64) {
        // Headers only between the sends (payloads leave in place, or copied from a piece
        // smaller than a datagram): they may share a clock reading (`Device::send_burst`).
        self.dev.send_burst(true);
        self.send_window_burst(id);
        self.dev.send_burst(false);
    }

    fn send_window_burst(&mut self, id: u64) {
        let Some(peer) = self.txes.get(id).map(|t| t.peer) else {
            return;
        };
        let pkt_max = self.peer_pkt(peer);
        let room = self.ctsdata_room_to(peer).max(1);
        let connid = self.connid();
        loop {
            let full = self.bulk_full_for(pkt_max) || self.must_queue();
            let Some(t) = self.txes.get_mut(id) else {
                return;
            };
            if t.window == 0 || t.queued >= t.len {
                if t.queued >= t.len && t.state == TxState::WaitCts {
                    t.state = TxState::Sending;
                }
                return;
            }
            if full {
                self.park(Parked::Tx(id));
                return;
            }
            let n = room.min(t.window).min(t.len - t.queued);
            let off = t.queued;
            let (peer, recv_id) = (t.peer, t.recv_id);
            t.window -= n;
            t.queued += n;
            t.in_flight += 1;
            let piece = (n >= BULK_ZERO_COPY_MIN)
                .then(|| t.source_piece(off, n))
                .flatten();
            t.lent |= piece.is_some();
            match piece {
                Some(tail) => {
                    let mut write = |b: &mut [u8]| {
                        pkt::write_ctsdata(b, recv_id, n as u64, off as u64, connid);
                    };
                    let hdr = pkt::CTSDATA_HDR;
                    self.send_head_tail(peer, hdr, tail, Owner::Tx(id), n, &mut write);
                }
                None => {
                    let mut b = self.buf_to(peer);
                    let hdr = pkt::write_ctsdata(
                        &mut b[HEADROOM..],
                        recv_id,
                        n as u64,
                        off as u64,
                        connid,
                    );
                    if let Some(t) = self.txes.get(id) {
                        t.copy_out(off, &mut b[HEADROOM + hdr..HEADROOM + hdr + n]);
                    }
                    self.send_pkt(peer, b, hdr + n, Owner::Tx(id), n);
                }
            }
        }
    }

    /// Starts an operation, or parks it until the peer's handshake arrives (one-sided ones).
    pub fn start(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let (kind, peer) = (t.kind, t.peer);
        let one_sided = matches!(kind, TxKind::Write | TxKind::Read | TxKind::Atomic(_));
        if one_sided && !self.peers[peer].hs_received {
            // efa-reference §2: a zero-byte EAGER_RTW makes the peer answer with its handshake
            // without disturbing message order.
            if !self.peers[peer].contacted {
                let me = self.dev.addr();
                let mut b = self.buf();
                let n = pkt::write_req(
                    &mut b[HEADROOM..],
                    pkt::EAGER_RTW,
                    pkt::REQ_RMA,
                    &ReqHdr::default(),
                    &[],
                    Some(&me),
                    None,
                    None,
                );
                self.send_pkt(peer, b, n, Owner::Ctrl, 0);
            }
            self.set_state(id, TxState::Handshake);
            self.peers[peer].waiting.push_back(id);
            return;
        }
        match kind {
            TxKind::Msg | TxKind::Tagged => self.start_msg(id),
            TxKind::Read | TxKind::Write if self.start_device_rdma(id) => {}
            TxKind::Write if self.start_longread_write(id) => {}
            TxKind::Write => {
                let dc = self.peers[peer].error_responses();
                if let Some(t) = self.txes.get_mut(id) {
                    t.await_response |= dc;
                }
                self.start_write(id)
            }
            TxKind::Read => self.start_read(id),
            TxKind::Atomic(_) => {
                let dc = self.peers[peer].error_responses();
                if let Some(t) = self.txes.get_mut(id) {
                    t.await_response |= dc;
                }
                self.start_atomic(id)
            }
        }
    }

    /// A transmit op may be complete: all its packets done and (if it waits for one) the
    /// response arrived.
    pub fn maybe_complete_tx(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        if let Some((err, prov_errno)) = t.failed {
            if t.in_flight == 0 {
                self.fail_tx(id, err, prov_errno);
            }
            return;
        }
        let sent_all = t.done >= t.len && t.in_flight == 0 && t.queued >= t.len;
        let ready = match t.kind {
            TxKind::Read => t.response && t.got >= t.len,
            TxKind::Atomic(AtomicKind::Write) if !t.await_response => t.in_flight == 0,
            TxKind::Atomic(_) => t.response,
            _ => sent_all && (!t.await_response || t.response),
        };
        if ready && t.state != TxState::Handshake {
            if t.inject && t.flags & FI_COMPLETION == 0 {
                // Injected operations complete silently but still count.
                let kind = t.kind;
                let len = t.len;
                let spare = &mut self.spare;
                self.txes.remove_with(id, |t| spare.keep_txe_parts(t));
                if let Some(c) = self.tx_cntr(kind) {
                    c.complete(len);
                }
                return;
            }
            self.complete_tx(id);
        }
    }
}

// ---- posting (application calls) ----

impl RdmEndpoint {
    pub(super) fn check(&self, g: &Inner, iov: &[IoVec]) -> Result<()> {
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if iov.len() > MAX_IOV {
            return Err(Errno::INVAL);
        }
        Ok(())
    }

    /// A transmit operation of `iov` (its list kept in a vector of `spare`'s).
    pub(super) fn new_txe(
        spare: &mut Spare,
        kind: TxKind,
        peer: usize,
        context: usize,
        flags: u64,
        iov: &[IoVec],
        len: usize,
    ) -> Txe {
        Txe {
            kind,
            peer,
            context,
            flags,
            iov: spare.iov(iov),
            len,
            tag: 0,
            cq_data: None,
            msg_id: 0,
            rma: Vec::new(),
            queued: 0,
            done: 0,
            in_flight: 0,
            window: 0,
            recv_id: 0,
            await_response: false,
            response: false,
            got: 0,
            datatype: 0,
            atomic_op: 0,
            operand: Vec::new(),
            result: Vec::new(),
            state: TxState::Sending,
            inject: false,
            owned: Vec::new(),
            lent: false,
            failed: None,
            longread: false,
            runt: 0,
            edge: 0,
        }
    }

    /// Copies inject data so that the application's buffer is free on return (fi_msg(3)).
    pub(super) fn inject_copy(spare: &mut Spare, t: &mut Txe, iov: &[IoVec]) {
        t.owned = spare.bytes(iov_len(iov));
        gather(iov, 0, &mut t.owned);
        t.iov.clear();
        t.inject = true;
    }

    #[inline]
    pub(super) fn post_send(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        // A local peer already routed (which implies enabled) skips our lock, and shm makes
        // every check of ours: it has our caps, op flags, iov limit and inject size
        // (`open_peer_endpoint`). Checked twice, the send cost a fifth more than shm's own.
        if let Some(shm) = self.known_route(op.addr) {
            return shm.send(op, tagged);
        }
        self.post_send_routing(op, tagged)
    }

    /// `post_send` to a peer not known to go through shm: routed under our lock.
    #[inline(never)]
    fn post_send_routing(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        if (tagged && self.caps & FI_TAGGED == 0) || (!tagged && self.caps & FI_MSG == 0) {
            return Err(Errno::NOSYS);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let len = iov_len(op.iov);
        // fi_inject and the FI_INJECT flag (on the call or in op_flags) alike.
        let too_big = flags & FI_INJECT != 0 && len > self.inject_limit;
        let mut g = self.lock();
        self.check(&g, op.iov)?;
        if too_big {
            return Err(Errno::MSGSIZE);
        }
        if g.tx_full() {
            return Err(Errno::AGAIN);
        }
        let peer = g.peer_for(op.addr)?;
        if let Some(shm) = self.route(&mut g, peer) {
            self.routes.learn(op.addr, g.av_removals);
            drop(g);
            return shm.send(op, tagged);
        }
        if g.peers[peer].dead {
            return Err(Errno::CONNABORTED);
        }
        let inject = flags & FI_INJECT != 0;
        let msg_id = g.peers[peer].next_msg_id;
        g.peers[peer].next_msg_id = next_msg_id(msg_id);
        let Inner { spare, txes, .. } = &mut *g;
        let id = txes.insert_with(|| {
            let mut t = Self::new_txe(
                spare,
                if tagged { TxKind::Tagged } else { TxKind::Msg },
                peer,
                op.context,
                flags,
                op.iov,
                len,
            );
            // An injected message is built from the application's buffer, which it leaves
            // before this call returns (`detach_inject`): copying it aside first was a copy
            // and a pooled buffer per message that the packet's own copy made useless.
            t.inject = inject;
            t.tag = op.tag;
            t.cq_data = (flags & FI_REMOTE_CQ_DATA != 0).then_some(op.data);
            t.await_response = flags & FI_DELIVERY_COMPLETE != 0 && !inject;
            t.msg_id = msg_id;
            t
        });
        g.start(id);
        if inject {
            g.detach_inject(id);
        }
        self.posted(&mut g, id);
        Ok(())
    }
}

impl Inner {
    /// An injected send may not read the application's buffer after the call returns
    /// (fi_msg(3)): what `start` did not already copy into packets (none of a message that fits
    /// in one) is copied into the operation's own buffer, and the application's iov is
    /// forgotten.
    fn detach_inject(&mut self, id: u64) {
        let Some(t) = self.txes.get_mut(id) else {
            return;
        };
        if t.queued < t.len {
            let mut owned = self.spare.bytes(t.len);
            gather(&t.iov, 0, &mut owned);
            t.owned = owned;
        }
        t.iov.clear();
    }
}
