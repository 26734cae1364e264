//! The receive side of the RDM endpoint: posted receives, and every packet that arrives —
//! checked against its sender (raw address / connid, efa-reference §7), put back in message
//! order (§4) and matched. Messages are received here (§3: CTS and RECEIPT answered); remote
//! accesses to our memory are in `target.rs`, control packets in `ctrl.rs`.

use std::sync::atomic::Ordering;

use super::ep::*;
use super::pkt::{self, Pkt, Req};
use super::placement::Target;
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::efa::device::{EfaAddr, HEADROOM, fragment};
use crate::prov::shm::Pending;
use crate::sys::mem::{IoVec, copy_slice, iov_len, parts_len, scatter, scatter_parts};
use crate::util::Progress;
use crate::util::cq::{CqEntry, CqErrEntry};
use crate::util::ep::MsgOp;
use crate::util::rxq::{
    MAX_IOV, Peek, PostOutcome, Recv, Unexpected, complete_discard, posts_alone,
};

/// Largest message staged whole while unexpected (medium protocol); larger claims are bogus.
const MAX_STAGED: usize = 16 << 20;

// ---- posted receives ----

impl RdmEndpoint {
    #[inline]
    pub(super) fn post_recv(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        if (tagged && self.caps & FI_TAGGED == 0) || (!tagged && self.caps & FI_MSG == 0) {
            return Err(Errno::NOSYS);
        }
        if op.iov.len() > MAX_IOV {
            return Err(Errno::INVAL);
        }
        let flags = self.flags.resolve_rx(op.call, op.flags);
        if flags & FI_MULTI_RECV != 0 && (tagged || self.caps & FI_MULTI_RECV == 0) {
            return Err(Errno::BADFLAGS);
        }
        let src = if self.caps & FI_DIRECTED_RECV != 0 {
            op.addr
        } else {
            FI_ADDR_UNSPEC
        };
        // As shm's: the common receive takes only the queue's lock (arrivals from the device
        // and from shm match under it too); our lock only when a waiting message matched.
        if posts_alone(flags, tagged) && self.live.load(Ordering::Acquire) {
            let recv = Recv::new(op.iov, src, op.tag, op.ignore, op.context, flags);
            if let Some(posted) =
                self.rxq
                    .post_alone(recv, src != FI_ADDR_UNSPEC, tagged, self.rx_size)
            {
                // Taken apart at once: the whole outcome moved into a variable was a copy of
                // some 260 bytes on every post (callgrind).
                let PostOutcome::Matched(mut recv, mut u) = posted? else {
                    return Ok(());
                };
                let mut g = self.lock();
                loop {
                    match u.payload {
                        // Its peer died between the match and our lock, and took the message
                        // with it (`peer_died`): the receive waits again.
                        Pending::Foreign(id) if g.rxes.get(id).is_none() => {
                            match g.rxq.lock().post(recv, tagged) {
                                PostOutcome::Matched(r, v) => (recv, u) = (r, v),
                                PostOutcome::Queued => return Ok(()),
                            }
                        }
                        _ => {
                            self.deliver_unexpected(&mut g, recv, tagged, u);
                            return Ok(());
                        }
                    }
                }
            }
        }
        self.post_recv_locked(op, tagged, flags, src)
    }

    /// `post_recv` under our lock: before the endpoint is enabled, with unknown sources to
    /// resolve, a peek or claim, a multi-receive buffer, or a full queue.
    #[inline(never)]
    fn post_recv_locked(&self, op: &MsgOp<'_>, tagged: bool, flags: u64, src: u64) -> Result<()> {
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if src != FI_ADDR_UNSPEC && g.rxq.lock().has_unknown_sources() {
            self.resolve_sources(&mut g);
        }
        let recv = Recv::new(op.iov, src, op.tag, op.ignore, op.context, flags);
        if tagged && flags & (FI_PEEK | FI_CLAIM) != 0 {
            // A peek looks at what has arrived: take in what the device and shm hold first.
            if let Some(shm) = self.shm() {
                shm.progress();
            }
            self.progress_locked(&mut g);
            return self.peek_or_claim(&mut g, recv, flags);
        }
        let context = recv.context;
        let mut outcome = {
            let mut q = g.rxq.lock();
            if q.posted() >= self.rx_size {
                return Err(Errno::AGAIN);
            }
            q.post(recv, tagged)
        };
        while let PostOutcome::Matched(recv, u) = outcome {
            self.deliver_unexpected(&mut g, recv, tagged, u);
            if flags & FI_MULTI_RECV == 0 {
                break;
            }
            let next = g.rxq.lock().rematch_multi(context);
            outcome = match next {
                Some((r, u)) => PostOutcome::Matched(r, u),
                None => PostOutcome::Queued,
            };
        }
        Ok(())
    }

    /// A message waiting in the shared queue found its receive: ours, or shm's (moved by it).
    fn deliver_unexpected(&self, g: &mut Inner, recv: Recv, tagged: bool, u: Unexpected<Unexp>) {
        match u.payload {
            Pending::Foreign(id) => self.deliver(g, id, recv),
            _ => match self.shm.as_ref() {
                Some(shm) => shm.deliver_unexpected(recv, tagged, u),
                None => g.dropped += 1,
            },
        }
    }

    /// Waiting messages from senders inserted into the AV since they arrived get their
    /// address, so that a directed receive finds them (as shm's `resolve_sources`).
    fn resolve_sources(&self, g: &mut Inner) {
        let ours = |u: &Unexp| matches!(u, Pending::Foreign(_));
        let origins = g.rxq.lock().unknown_origins(ours);
        for p in origins {
            if p < g.peers.len() {
                self.refresh_fi_addr(g, p);
            }
        }
        // shm's senders are resolved by shm, without the queue locked (lock order).
        let mut shm_found = Vec::new();
        if let Some(shm) = self.shm() {
            let origins = g.rxq.lock().unknown_origins(|u| !ours(u));
            shm_found = origins
                .into_iter()
                .filter_map(|p| Some((p, shm.resolve_origin(p)?)))
                .collect();
        }
        let peers = &g.peers;
        g.rxq.lock().resolve_sources(|u, p| {
            if ours(u) {
                peers
                    .get(p)
                    .map(|peer| peer.fi_addr)
                    .filter(|a| *a != FI_ADDR_NOTAVAIL)
            } else {
                shm_found.iter().find(|(o, _)| *o == p).map(|(_, a)| *a)
            }
        });
    }

    /// fi_tagged(3) FI_PEEK (with FI_CLAIM / FI_DISCARD) and FI_CLAIM receives.
    fn peek_or_claim(&self, g: &mut Inner, recv: Recv, flags: u64) -> Result<()> {
        let cq = g.rx_cq.clone();
        if flags & FI_PEEK == 0 {
            let claimed = g.rxq.lock().claim(recv.context);
            let u = claimed.ok_or(Errno::NOMSG)?;
            if flags & FI_DISCARD != 0 {
                let tag = u.tag;
                self.discard(g, u);
                complete_discard(cq.as_deref(), recv.context, tag);
                return Ok(());
            }
            self.deliver_unexpected(g, recv, true, u);
            return Ok(());
        }
        let (found, dropped) =
            g.rxq
                .lock()
                .peek(&recv, flags & FI_CLAIM != 0, flags & FI_DISCARD != 0);
        let Some(cq) = &cq else { return Ok(()) };
        match found {
            Peek::NoMatch => {
                let mut e = CqErrEntry::new(recv.context, FI_RECV | FI_TAGGED, Errno::NOMSG);
                e.tag = recv.tag;
                cq.push_err(e);
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
                cq.push(CqEntry {
                    op_context: recv.context,
                    flags: FI_RECV | FI_TAGGED | f,
                    len,
                    data,
                    tag,
                    src_addr: g.source_id(src),
                    ..Default::default()
                });
            }
        }
        Ok(())
    }

    /// FI_DISCARD: the message is received into nothing (a long one still has to be drained
    /// from the sender, which completes normally).
    fn discard(&self, g: &mut Inner, u: Unexpected<Unexp>) {
        let Pending::Foreign(id) = u.payload else {
            if let Some(shm) = &self.shm {
                shm.discard_unexpected(u);
            }
            return;
        };
        if let Some(r) = g.rxes.get_mut(id) {
            r.discard = true;
        }
        let recv = Recv::new(&[], FI_ADDR_UNSPEC, 0, 0, 0, 0);
        self.deliver(g, id, recv);
    }

    /// An unexpected message found its receive.
    fn deliver(&self, g: &mut Inner, id: u64, recv: Recv) {
        self.attach(g, id, recv);
        self.advance(g, id);
    }

    /// Binds a receive to a message: reserves its space (multi-receive) and moves staged data.
    fn attach(&self, g: &mut Inner, id: u64, recv: Recv) {
        let released = recv.released;
        let target = g.spare.iov(&recv.target());
        let recv = g.spare.recv(recv);
        let Some(r) = g.rxes.get_mut(id) else { return };
        if !r.staging.is_empty() {
            scatter(&target, 0, &r.staging);
            r.staging = Vec::new();
        }
        r.target = target;
        r.released = released;
        r.kind = RxKind::Recv(recv);
    }

    /// After data or a match: completes the message, or grants the sender its next window.
    pub(super) fn advance(&self, g: &mut Inner, id: u64) {
        let Some(r) = g.rxes.get(id) else { return };
        if matches!(r.kind, RxKind::Unexpected | RxKind::Read { .. }) {
            return;
        }
        if r.lr.is_some() {
            // A long read: matched now, its reads start (EOR and completion when they end).
            return self.start_long_read(g, id);
        }
        if r.got >= r.total {
            self.finish(g, id);
        } else if r.longcts && r.granted == 0 {
            self.send_cts(g, id);
        }
    }

    /// Long-CTS: grants the sender the next window (efa-reference §3).
    fn send_cts(&self, g: &mut Inner, id: u64) {
        let Some(room) = g.rxes.get(id).map(|r| g.grant_room(r.peer)) else {
            return;
        };
        let min_credits = g.knobs.tx_min_credits;
        let connid = g.connid();
        let Some(r) = g.rxes.get_mut(id) else { return };
        let window = (r.total - r.got).min(r.credits.max(min_credits) * room);
        r.granted = window;
        let (peer, send_id) = (r.peer, r.send_id);
        g.granted(Target::Recv(id));
        let mut b = g.buf();
        let n = pkt::write_cts(
            &mut b[HEADROOM..],
            false,
            connid,
            send_id,
            rx_wire(id),
            window as u64,
        );
        g.send_pkt(peer, b, n, Owner::Ctrl, 0);
    }

    /// The last byte of a message or write arrived.
    pub(super) fn finish(&self, g: &mut Inner, id: u64) {
        let Some(r) = g.rxes.remove(id) else { return };
        if r.medium {
            g.peers[r.peer].rx_map.remove(&r.msg_id);
        }
        if r.dc {
            let connid = g.connid();
            let mut b = g.buf();
            let n = pkt::write_receipt(&mut b[HEADROOM..], r.send_id, r.msg_id, connid);
            g.send_pkt(r.peer, b, n, Owner::Ctrl, 0);
        }
        self.report_finished(g, &r);
        g.spare.keep_rxe(r);
    }

    /// The completion of a message or write whose last byte arrived (`finish`).
    fn report_finished(&self, g: &mut Inner, r: &Rxe) {
        let src_addr = g.source_id(g.peers[r.peer].fi_addr);
        match &r.kind {
            RxKind::Recv(recv) if !r.discard => {
                let cap = iov_len(&r.target);
                g.complete_recv(&RecvDone {
                    context: recv.context,
                    rflags: recv.flags,
                    released: r.released,
                    tagged: r.tagged,
                    tag: r.tag,
                    cq_data: r.cq_data,
                    src_addr,
                    buf: r.target.first().map_or(0, IoVec::addr),
                    total: r.total,
                    got: r.total.min(cap),
                });
            }
            RxKind::Write { .. } => {
                // Only writes with remote CQ data complete at the target (§5).
                if let Some(data) = r.cq_data
                    && let Some(cq) = &g.rx_cq
                {
                    cq.push(CqEntry {
                        op_context: 0,
                        flags: FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA,
                        len: r.total,
                        data,
                        src_addr,
                        ..Default::default()
                    });
                }
            }
            _ => {}
        }
    }

    /// Places `data` at `off` of a message or write: its parts in order (one slice, or the
    /// pieces of a datagram left in its fragments).
    pub(super) fn rx_data(&self, g: &mut Inner, id: u64, off: usize, data: &[&[u8]]) {
        let Some(r) = g.rxes.get_mut(id) else { return };
        let n = parts_len(data);
        if off.checked_add(n).is_none_or(|end| end > r.total) {
            g.dropped += 1;
            return;
        }
        match &r.kind {
            RxKind::Unexpected => {
                if off + n <= r.staging.len() {
                    let mut at = off;
                    for part in data {
                        copy_slice(&mut r.staging[at..at + part.len()], part);
                        at += part.len();
                    }
                }
            }
            RxKind::Recv(_) => {
                scatter_parts(&r.target, off, data);
            }
            RxKind::Write { dest } => {
                scatter_parts(dest, off, data);
            }
            RxKind::Read { .. } => {
                g.dropped += 1;
                return;
            }
        }
        self.rx_landed(g, id, off, n);
    }

    /// Data the device put in place itself (`placement`): `rx_data` without the copy.
    pub(super) fn rx_placed(&self, g: &mut Inner, id: u64, off: usize, n: usize) {
        let Some(r) = g.rxes.get(id) else { return };
        if off.checked_add(n).is_none_or(|end| end > r.total)
            || !matches!(r.kind, RxKind::Write { .. } | RxKind::Recv(_))
        {
            g.dropped += 1;
            return;
        }
        self.rx_landed(g, id, off, n);
    }

    /// `n` bytes at `off` of a receive arrived.
    fn rx_landed(&self, g: &mut Inner, id: u64, off: usize, n: usize) {
        let Some(r) = g.rxes.get_mut(id) else { return };
        r.got += n;
        r.granted = r.granted.saturating_sub(n);
        r.edge = r.edge.max(off + n);
        self.advance(g, id);
    }
}

/// A message received into a posted receive, to complete (`Inner::complete_recv`).
pub(super) struct RecvDone {
    pub context: usize,
    /// The receive's resolved flags (`FI_COMPLETION`).
    pub rflags: u64,
    /// The message used up a multi-receive buffer.
    pub released: bool,
    pub tagged: bool,
    pub tag: u64,
    pub cq_data: Option<u64>,
    pub src_addr: u64,
    /// Where the message begins.
    pub buf: usize,
    /// The message's length, and how much of it the receive held.
    pub total: usize,
    pub got: usize,
}

impl Inner {
    /// Reports a received message: its completion, or an `FI_ETRUNC` error if the receive
    /// held less than all of it (fi_cq(3)), and the receive counter.
    pub(super) fn complete_recv(&self, d: &RecvDone) {
        let mut flags = FI_RECV | if d.tagged { FI_TAGGED } else { FI_MSG };
        if d.cq_data.is_some() {
            flags |= FI_REMOTE_CQ_DATA;
        }
        if d.released {
            flags |= FI_MULTI_RECV;
        }
        let data = d.cq_data.unwrap_or(0);
        if d.total > d.got {
            if let Some(cq) = &self.rx_cq {
                cq.push_err(CqErrEntry {
                    op_context: d.context,
                    flags,
                    len: d.got,
                    buf: d.buf,
                    data,
                    tag: d.tag,
                    olen: d.total - d.got,
                    err: Errno::TRUNC.0,
                    src_addr: d.src_addr,
                    ..Default::default()
                });
            }
            if let Some(c) = &self.cntr.recv {
                c.fail();
            }
            return;
        }
        if let Some(cq) = &self.rx_cq {
            if d.rflags & FI_COMPLETION != 0 {
                cq.push(CqEntry {
                    op_context: d.context,
                    flags,
                    len: d.got,
                    buf: d.buf,
                    data,
                    tag: d.tag,
                    src_addr: d.src_addr,
                });
            } else if d.released {
                // A released multi-receive buffer is always reported (fi_msg(3)).
                cq.push(CqEntry {
                    op_context: d.context,
                    flags: FI_MULTI_RECV,
                    src_addr: FI_ADDR_NOTAVAIL,
                    ..Default::default()
                });
            }
        }
        if let Some(c) = &self.cntr.recv {
            c.complete(d.got);
        }
    }
}

// ---- arriving packets ----

impl RdmEndpoint {
    /// Handles one packet from the device.
    /// `src` by reference: the device wrote it in its completion, and a copy stored field by
    /// field just before would stall the wider loads that compare it (`known_peer`), a
    /// store-forwarding failure seen on every bulk packet.
    pub(super) fn handle_packet(&self, g: &mut Inner, src: &EfaAddr, b: &[u8]) {
        if let Some(c) = pkt::parse_if_ctsdata(b) {
            match c {
                Ok(c) => self.handle_ctrl(g, src, c, b),
                Err(_) => g.dropped += 1,
            }
            return;
        }
        let src = *src;
        let Ok(pkt) = pkt::parse(b) else {
            g.dropped += 1;
            return;
        };
        match pkt {
            Pkt::Req(req) => {
                // A device that cannot say the sender's QKEY (EFA hardware reports GID and
                // QPN only, `device::verbs`) gives 0: the packet's raw address or connid
                // header says it (efa-reference §7).
                let src = if src.qkey == 0 {
                    match (req.raw_addr, req.connid) {
                        (Some(a), _) if a.gid == src.gid && a.qpn == src.qpn => a,
                        (None, Some(c)) => EfaAddr { qkey: c, ..src },
                        _ => src,
                    }
                } else {
                    src
                };
                // The sender is who the transport says; a raw address or connid that disagrees
                // is a spoof (efa-reference §7).
                if req.raw_addr.is_some_and(|a| a != src)
                    || req.connid.is_some_and(|c| c != src.qkey)
                {
                    g.dropped += 1;
                    return;
                }
                let p = g.peer_by_addr(src);
                if g.peers[p].dead {
                    return;
                }
                self.refresh_fi_addr(g, p);
                // Any first packet from a peer gets our handshake back (§2).
                g.handshake(p);
                if req.flags & pkt::REQ_READ_NACK != 0
                    && matches!(
                        req.ty,
                        pkt::LONGCTS_MSGRTM
                            | pkt::LONGCTS_TAGRTM
                            | pkt::DC_LONGCTS_MSGRTM
                            | pkt::DC_LONGCTS_TAGRTM
                    )
                {
                    // The rest of a message whose read we refused (§3): not ordered again.
                    self.resume_nacked(g, p, &req);
                } else if pkt::is_ordered(req.ty) {
                    self.ordered(g, p, req, b);
                } else {
                    self.process_req(g, p, &req, b);
                }
            }
            Pkt::Ctrl(c) => self.handle_ctrl(g, &src, c, b),
        }
    }

    /// A packet whose datagram the device left in its fragments, in `run`
    /// (`Completion::RecvInPieces`). A CTSDATA packet (bulk data: almost every one that comes
    /// in fragments) has its data copied from where the pieces lie to where it goes; any
    /// other packet is joined first, and handled as one that came whole.
    pub(super) fn handle_in_pieces(
        &self,
        g: &mut Inner,
        src: &EfaAddr,
        run: &mut [u8],
        p: fragment::InPieces,
    ) {
        let head = p.first(run);
        if let Some(c) = pkt::parse_if_ctsdata_in(head, p.len) {
            let Ok(
                c @ pkt::Ctrl::CtsData {
                    recv_id,
                    seg_length,
                    seg_offset,
                    data_off,
                    ..
                },
            ) = c
            else {
                g.dropped += 1;
                return;
            };
            let Some(peer) = self.ctrl_sender(g, src, c) else {
                return;
            };
            // The data's pieces: at most one per fragment (`parse_ctsdata` checked that the
            // packet holds `seg_length` bytes past its header).
            let mut parts: [&[u8]; fragment::MAX_COUNT] = [&[]; fragment::MAX_COUNT];
            let mut n = 0;
            for part in p.parts(run, data_off..data_off + seg_length as usize) {
                if n == parts.len() {
                    g.dropped += 1;
                    return;
                }
                parts[n] = part;
                n += 1;
            }
            self.ctsdata(g, peer, recv_id, seg_offset, &parts[..n]);
            return;
        }
        match p.join(run) {
            Some(at) => self.handle_packet(g, src, &run[at]),
            None => g.dropped += 1,
        }
    }

    /// A peer first heard from before the application inserted its address gets its AV index
    /// once it is there (FI_SOURCE, directed receives).
    fn refresh_fi_addr(&self, g: &mut Inner, p: usize) {
        if g.peers[p].fi_addr != FI_ADDR_NOTAVAIL {
            return;
        }
        let addr = g.peers[p].addr.to_bytes();
        if let Some(fi) = g.av.as_ref().and_then(|av| av.reverse(&addr)) {
            g.peers[p].fi_addr = fi;
            g.by_fi.insert(fi, p);
        }
    }

    /// Messages and atomics are processed in msg_id order (§4).
    fn ordered(&self, g: &mut Inner, p: usize, req: Req, b: &[u8]) {
        let id = req.hdr.msg_id;
        // Medium and runt-read messages come in several packets: the later ones join the
        // first, past the window.
        let medium = matches!(
            req.ty,
            pkt::MEDIUM_MSGRTM
                | pkt::MEDIUM_TAGRTM
                | pkt::DC_MEDIUM_MSGRTM
                | pkt::DC_MEDIUM_TAGRTM
                | pkt::RUNTREAD_MSGRTM
                | pkt::RUNTREAD_TAGRTM
        );
        if medium && g.peers[p].rx_map.contains_key(&id) {
            self.process_req(g, p, &req, b);
            return;
        }
        let expected = g.peers[p].expected_msg_id;
        if id != expected {
            let ahead = id.wrapping_sub(expected);
            if (ahead as usize) < g.knobs.recvwin {
                g.peers[p].ooo.entry(id).or_default().push(b.to_vec());
            } else {
                // Already processed (or absurdly far ahead): a duplicate or a forgery.
                g.dropped += 1;
            }
            return;
        }
        self.process_req(g, p, &req, b);
        g.peers[p].expected_msg_id = next_msg_id(expected);
        loop {
            let e = g.peers[p].expected_msg_id;
            let Some(list) = g.peers[p].ooo.remove(&e) else {
                break;
            };
            g.peers[p].expected_msg_id = next_msg_id(e);
            for pk in list {
                if let Ok(Pkt::Req(r)) = pkt::parse(&pk) {
                    self.process_req(g, p, &r, &pk);
                }
            }
        }
    }

    fn process_req(&self, g: &mut Inner, p: usize, req: &Req, b: &[u8]) {
        let data = &b[req.data_off.min(b.len())..];
        match req.ty {
            pkt::EAGER_MSGRTM..=pkt::LONGCTS_TAGRTM
            | pkt::LONGREAD_MSGRTM
            | pkt::LONGREAD_TAGRTM
            | pkt::RUNTREAD_MSGRTM
            | pkt::RUNTREAD_TAGRTM
            | pkt::DC_EAGER_MSGRTM..=pkt::DC_LONGCTS_TAGRTM => self.recv_msg(g, p, req, data),
            pkt::LONGREAD_RTW => self.recv_long_write(g, p, req, data),
            pkt::EAGER_RTW | pkt::DC_EAGER_RTW | pkt::LONGCTS_RTW | pkt::DC_LONGCTS_RTW => {
                self.recv_write(g, p, req, data)
            }
            pkt::SHORT_RTR | pkt::LONGCTS_RTR => self.recv_read(g, p, req),
            pkt::WRITE_RTA | pkt::DC_WRITE_RTA | pkt::FETCH_RTA | pkt::COMPARE_RTA => {
                self.recv_atomic(g, p, req, data)
            }
            _ => g.dropped += 1,
        }
    }

    /// A message's first packet (or a medium or runt segment).
    fn recv_msg(&self, g: &mut Inner, p: usize, req: &Req, data: &[u8]) {
        let ty = req.ty;
        let dc = (pkt::DC_EAGER_MSGRTM..=pkt::DC_LONGCTS_TAGRTM).contains(&ty);
        let base = if dc {
            ty - pkt::DC_EAGER_MSGRTM + pkt::EAGER_MSGRTM
        } else {
            ty
        };
        let tagged = pkt::is_tagged(ty);
        let (medium, longcts) = match base {
            pkt::MEDIUM_MSGRTM | pkt::MEDIUM_TAGRTM => (true, false),
            pkt::LONGCTS_MSGRTM | pkt::LONGCTS_TAGRTM => (false, true),
            _ => (false, false),
        };
        let longread = matches!(base, pkt::LONGREAD_MSGRTM | pkt::LONGREAD_TAGRTM);
        let runt = matches!(base, pkt::RUNTREAD_MSGRTM | pkt::RUNTREAD_TAGRTM);
        let h = &req.hdr;
        let mut data = data;
        let mut lr = None;
        if runt {
            // The sender's memory, then runt bytes (`runt.rs`); later packets join the first.
            let Some(rp) = super::runt::parts(h, data) else {
                g.dropped += 1;
                return;
            };
            if let Some(&id) = g.peers[p].rx_map.get(&h.msg_id) {
                return self.runt_segment(g, id, h, &rp);
            }
            data = rp.bytes;
            lr = Some(LongRead::runt(rp.iov, rp.runt));
        }
        // A long read's data is where to read it: the sender's registered memory.
        if longread {
            let iov = pkt::read_iovs(data, h.read_iov_count)
                .filter(|iov| pkt::read_iov_total(iov) == Some(h.msg_length));
            let Some(iov) = iov else {
                g.dropped += 1;
                return;
            };
            lr = Some(LongRead::new(iov));
        }
        // Runt bytes wait staged (with the rest of an unexpected long read in the sender).
        let runt_len = lr.as_ref().map_or(0, |l| l.from);
        let Ok(total) = usize::try_from(if medium || longcts || longread || runt {
            h.msg_length
        } else {
            data.len() as u64
        }) else {
            g.dropped += 1;
            return;
        };
        let off = if medium || runt {
            h.seg_offset as usize
        } else {
            0
        };
        if medium {
            if let Some(&id) = g.peers[p].rx_map.get(&h.msg_id) {
                self.rx_data(g, id, off, &[data]);
                return;
            }
            if total > MAX_STAGED {
                g.dropped += 1;
                return;
            }
        }
        let src = g.peers[p].fi_addr;
        // Matched and, if nothing matches, parked under one lock of the queue shm shares: a
        // receive posted in between would otherwise miss this message.
        let mut q = g.rxq.lock();
        // A message whole in this packet (eager, no receipt owed) goes into the receive it
        // matches where that receive sits, and completes at once: no `Rxe` is made and filled,
        // and the receive is not moved. About 500 instructions less per small message
        // (callgrind, each side of an 8-byte fi_rdm_pingpong over SRD). The CQ's lock, taken
        // inside, is a leaf.
        if !(medium || longcts || longread || runt || dc) {
            let inner: &Inner = g;
            let placed = q.match_incoming_with(src, h.tag, tagged, |recv| {
                let got = recv.place(data);
                inner.complete_recv(&RecvDone {
                    context: recv.context,
                    rflags: recv.flags,
                    released: false,
                    tagged,
                    tag: h.tag,
                    cq_data: req.cq_data,
                    src_addr: inner.source_id(src),
                    buf: recv.first_addr(),
                    total,
                    got,
                });
                true
            });
            if placed == Some(true) {
                return;
            }
        }
        let recv = q.match_incoming(src, h.tag, tagged, total);
        let staging = match (&recv, longcts) {
            (Some(_), _) => Vec::new(),
            _ if lr.is_some() => vec![0u8; runt_len],
            (None, true) => vec![0u8; data.len()],
            (None, false) => vec![0u8; total],
        };
        let id = g.rxes.insert(Rxe {
            peer: p,
            kind: RxKind::Unexpected,
            msg_id: h.msg_id,
            total,
            got: 0,
            send_id: h.send_id,
            granted: 0,
            dc,
            tag: if tagged { h.tag } else { 0 },
            cq_data: req.cq_data,
            tagged,
            medium: medium || runt,
            longcts,
            credits: h.credit_request as usize,
            staging,
            target: Vec::new(),
            released: false,
            discard: false,
            lr,
            edge: 0,
            nacked: false,
        });
        if medium || runt {
            g.peers[p].rx_map.insert(h.msg_id, id);
        }
        match recv {
            Some(recv) => {
                drop(q);
                self.attach(g, id, recv);
            }
            None => {
                q.add_unexpected(
                    Unexpected::<Unexp> {
                        src,
                        tag: h.tag,
                        len: total,
                        data: req.cq_data.unwrap_or(0),
                        flags: if req.cq_data.is_some() {
                            FI_REMOTE_CQ_DATA
                        } else {
                            0
                        },
                        claimed_by: None,
                        origin: p,
                        payload: Pending::Foreign(id),
                    },
                    tagged,
                );
                drop(q);
            }
        }
        if longread {
            self.advance(g, id);
        } else {
            self.rx_data(g, id, off, &[data]);
        }
    }
}
