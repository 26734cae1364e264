//! The receive side of the RDM endpoint: posted receives, and every packet that arrives —
//! checked against its sender (raw address / connid, efa-reference §7), put back in message
//! order (§4), matched, and answered (handshake, CTS, RECEIPT, READRSP, ATOMRSP, ERR).
//!
//! Remote writes, reads and atomics touch our memory only after the domain's MR map accepted
//! the key, the range and the access (§5). A refusal reaches the initiator as an ERR packet
//! when it understands them (extra-info bit 9), and is counted either way.

use super::ep::*;
use super::pkt::{self, Ctrl, Pkt, Req};
use super::tx::ZERO_COPY_MIN;
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::efa::PROV_ERR_REMOTE_ACCESS;
use crate::prov::efa::device::{EfaAddr, HEADROOM};
use crate::prov::shm::Pending;
use crate::sys::mem::{IoVec, gather, iov_len, piece, scatter};
use crate::util::Progress;
use crate::util::cq::{CqEntry, CqErrEntry};
use crate::util::ep::{AtomicKind, MsgOp};
use crate::util::rxq::{MAX_IOV, Peek, PostOutcome, Recv, Unexpected, complete_discard};

/// Largest message staged whole while unexpected (medium protocol); larger claims are bogus.
const MAX_STAGED: usize = 16 << 20;

// ---- posted receives ----

impl RdmEndpoint {
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
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let src = if self.caps & FI_DIRECTED_RECV != 0 {
            op.addr
        } else {
            FI_ADDR_UNSPEC
        };
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
            if q.posted() >= g.knobs.rx_size {
                return Err(Errno::AGAIN);
            }
            q.post(recv, tagged)
        };
        while let PostOutcome::Matched(m) = outcome {
            let (recv, u) = *m;
            self.deliver_unexpected(&mut g, recv, tagged, u);
            if flags & FI_MULTI_RECV == 0 {
                break;
            }
            let next = g.rxq.lock().rematch_multi(context);
            outcome = match next {
                Some(m) => PostOutcome::Matched(m),
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
        let target = recv.target();
        let released = recv.released;
        let Some(r) = g.rxes.get_mut(id) else { return };
        if !r.staging.is_empty() {
            scatter(&target, 0, &r.staging);
            r.staging = Vec::new();
        }
        r.target = target.to_vec();
        r.released = released;
        r.kind = RxKind::Recv(Box::new(recv));
    }

    /// After data or a match: completes the message, or grants the sender its next window.
    fn advance(&self, g: &mut Inner, id: u64) {
        let Some(r) = g.rxes.get(id) else { return };
        if matches!(r.kind, RxKind::Unexpected | RxKind::Read { .. }) {
            return;
        }
        if r.got >= r.total {
            self.finish(g, id);
        } else if r.longcts && r.granted == 0 {
            self.send_cts(g, id);
        }
    }

    /// Long-CTS: grants the sender the next window (efa-reference §3).
    fn send_cts(&self, g: &mut Inner, id: u64) {
        let room = g.ctsdata_room().max(1);
        let min_credits = g.knobs.tx_min_credits;
        let connid = g.connid();
        let Some(r) = g.rxes.get_mut(id) else { return };
        let window = (r.total - r.got).min(r.credits.max(min_credits) * room);
        r.granted = window;
        let (peer, send_id) = (r.peer, r.send_id);
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
    fn finish(&self, g: &mut Inner, id: u64) {
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
        let src_addr = g.source_id(g.peers[r.peer].fi_addr);
        match r.kind {
            RxKind::Recv(recv) if !r.discard => {
                let mut flags = FI_RECV | if r.tagged { FI_TAGGED } else { FI_MSG };
                if r.cq_data.is_some() {
                    flags |= FI_REMOTE_CQ_DATA;
                }
                if r.released {
                    flags |= FI_MULTI_RECV;
                }
                let cap = iov_len(&r.target);
                let got = r.total.min(cap);
                let buf = r.target.first().map_or(0, IoVec::addr);
                let data = r.cq_data.unwrap_or(0);
                let rx_cq = g.rx_cq.clone();
                if r.total > cap {
                    if let Some(cq) = &rx_cq {
                        cq.push_err(CqErrEntry {
                            op_context: recv.context,
                            flags,
                            len: got,
                            buf,
                            data,
                            tag: r.tag,
                            olen: r.total - got,
                            err: Errno::TRUNC.0,
                            src_addr,
                            ..Default::default()
                        });
                    }
                    if let Some(c) = &g.cntr.recv {
                        c.fail();
                    }
                    return;
                }
                if let Some(cq) = &rx_cq {
                    if recv.flags & FI_COMPLETION != 0 {
                        cq.push(CqEntry {
                            op_context: recv.context,
                            flags,
                            len: got,
                            buf,
                            data,
                            tag: r.tag,
                            src_addr,
                        });
                    } else if r.released {
                        // A released multi-receive buffer is always reported (fi_msg(3)).
                        cq.push(CqEntry {
                            op_context: recv.context,
                            flags: FI_MULTI_RECV,
                            src_addr: FI_ADDR_NOTAVAIL,
                            ..Default::default()
                        });
                    }
                }
                if let Some(c) = &g.cntr.recv {
                    c.complete(got);
                }
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

    /// Places `data` at `off` of a message or write.
    fn rx_data(&self, g: &mut Inner, id: u64, off: usize, data: &[u8]) {
        let Some(r) = g.rxes.get_mut(id) else { return };
        if off.checked_add(data.len()).is_none_or(|end| end > r.total) {
            g.dropped += 1;
            return;
        }
        match &r.kind {
            RxKind::Unexpected => {
                if off + data.len() <= r.staging.len() {
                    r.staging[off..off + data.len()].copy_from_slice(data);
                }
            }
            RxKind::Recv(_) => {
                scatter(&r.target, off, data);
            }
            RxKind::Write { dest } => {
                scatter(dest, off, data);
            }
            RxKind::Read { .. } => {
                g.dropped += 1;
                return;
            }
        }
        r.got += data.len();
        r.granted = r.granted.saturating_sub(data.len());
        self.advance(g, id);
    }
}

// ---- arriving packets ----

impl RdmEndpoint {
    /// Handles one packet from the device.
    pub(super) fn handle_packet(&self, g: &mut Inner, src: EfaAddr, b: &[u8]) {
        let Ok(pkt) = pkt::parse(b) else {
            g.dropped += 1;
            return;
        };
        match pkt {
            Pkt::Req(req) => {
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
                if pkt::is_ordered(req.ty) {
                    self.ordered(g, p, req, b);
                } else {
                    self.process_req(g, p, &req, b);
                }
            }
            Pkt::Ctrl(c) => self.handle_ctrl(g, src, c, b),
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
        let medium = matches!(
            req.ty,
            pkt::MEDIUM_MSGRTM | pkt::MEDIUM_TAGRTM | pkt::DC_MEDIUM_MSGRTM | pkt::DC_MEDIUM_TAGRTM
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
            | pkt::DC_EAGER_MSGRTM..=pkt::DC_LONGCTS_TAGRTM => self.recv_msg(g, p, req, data),
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

    /// A message's first packet (or a medium segment).
    fn recv_msg(&self, g: &mut Inner, p: usize, req: &Req, data: &[u8]) {
        let ty = req.ty;
        let dc = ty >= pkt::DC_EAGER_MSGRTM;
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
        let h = &req.hdr;
        let Ok(total) = usize::try_from(if medium || longcts {
            h.msg_length
        } else {
            data.len() as u64
        }) else {
            g.dropped += 1;
            return;
        };
        let off = if medium { h.seg_offset as usize } else { 0 };
        if medium {
            if let Some(&id) = g.peers[p].rx_map.get(&h.msg_id) {
                self.rx_data(g, id, off, data);
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
        let recv = q.match_incoming(src, h.tag, tagged, total);
        let staging = match (&recv, longcts) {
            (Some(_), _) => Vec::new(),
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
            medium,
            longcts,
            credits: h.credit_request as usize,
            staging,
            target: Vec::new(),
            released: false,
            discard: false,
        });
        if medium {
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
        self.rx_data(g, id, off, data);
    }

    /// Checks every target entry of a remote access against the MR map (§5).
    fn verify(&self, rma: &[pkt::RmaIov], elem: usize, access: u64) -> Result<(Vec<IoVec>, usize)> {
        let mut out = Vec::with_capacity(rma.len());
        let mut total = 0usize;
        for r in rma {
            let bytes = usize::try_from(r.len)
                .ok()
                .and_then(|n| n.checked_mul(elem))
                .ok_or(Errno::INVAL)?;
            total = total.checked_add(bytes).ok_or(Errno::INVAL)?;
            out.extend(self.domain.mr_map.verify(r.key, r.addr, bytes, access)?);
        }
        Ok((out, total))
    }

    /// A remote access was refused: tell the initiator (when it understands ERR) and count it.
    fn refuse(&self, g: &mut Inner, p: usize, tx_id: u32, err: Errno) {
        g.refused += 1;
        if g.peers[p].error_responses() {
            let connid = g.connid();
            let mut b = g.buf();
            let n = pkt::write_err(&mut b[HEADROOM..], tx_id, err.0 as u32, connid);
            g.send_pkt(p, b, n, Owner::Ctrl, 0);
        }
    }

    fn recv_write(&self, g: &mut Inner, p: usize, req: &Req, data: &[u8]) {
        let longcts = matches!(req.ty, pkt::LONGCTS_RTW | pkt::DC_LONGCTS_RTW);
        let dc = matches!(req.ty, pkt::DC_EAGER_RTW | pkt::DC_LONGCTS_RTW);
        if req.rma.is_empty() && data.is_empty() && !longcts {
            // The zero-byte write that asks for our handshake (§2): nothing to do.
            return;
        }
        let h = &req.hdr;
        let (dest, total) = match self.verify(&req.rma, 1, FI_REMOTE_WRITE) {
            Ok(v) => v,
            Err(e) => return self.refuse(g, p, h.send_id, e),
        };
        let expect = if longcts {
            h.msg_length
        } else {
            data.len() as u64
        };
        if total as u64 != expect {
            return self.refuse(g, p, h.send_id, Errno::INVAL);
        }
        let id = g.rxes.insert(Rxe {
            peer: p,
            kind: RxKind::Write { dest },
            msg_id: h.msg_id,
            total,
            got: 0,
            send_id: h.send_id,
            granted: 0,
            dc,
            tag: 0,
            cq_data: req.cq_data,
            tagged: false,
            medium: false,
            longcts,
            credits: h.credit_request as usize,
            staging: Vec::new(),
            target: Vec::new(),
            released: false,
            discard: false,
        });
        if total == 0 {
            self.finish(g, id);
            return;
        }
        self.rx_data(g, id, 0, data);
    }

    fn recv_read(&self, g: &mut Inner, p: usize, req: &Req) {
        let h = &req.hdr;
        let (src, total) = match self.verify(&req.rma, 1, FI_REMOTE_READ) {
            Ok(v) => v,
            Err(e) => return self.refuse(g, p, h.recv_id, e),
        };
        if total as u64 != h.msg_length {
            return self.refuse(g, p, h.recv_id, Errno::INVAL);
        }
        let id = g.rxes.insert(Rxe {
            peer: p,
            kind: RxKind::Read {
                src,
                sent: 0,
                window: h.recv_length as usize,
            },
            msg_id: 0,
            total,
            got: 0,
            send_id: h.recv_id,
            granted: 0,
            dc: false,
            tag: 0,
            cq_data: None,
            tagged: false,
            medium: false,
            longcts: true,
            credits: 0,
            staging: Vec::new(),
            target: Vec::new(),
            released: false,
            discard: false,
        });
        self.send_read_data(g, id);
    }

    /// Answers a read within the window the requester granted: READRSP first (it carries our
    /// id for the requester's CTS), CTSDATA after.
    pub(super) fn send_read_data(&self, g: &mut Inner, id: u64) {
        let connid = g.connid();
        let mtu = g.mtu;
        loop {
            let full = g.bulk_full();
            let Some(r) = g.rxes.get_mut(id) else { return };
            let RxKind::Read { src, sent, window } = &mut r.kind else {
                return;
            };
            if r.total > 0 && (*sent >= r.total || *window == 0) {
                return;
            }
            if full {
                g.park(Parked::Read(id));
                return;
            }
            let first = *sent == 0;
            let hdr = if first { 24 } else { 32 };
            let n = mtu.saturating_sub(hdr).min(*window).min(r.total - *sent);
            let off = *sent;
            *sent += n;
            *window -= n;
            // Our registered memory goes out as it lies (zero-copy, as for sends). Memory the
            // application unmapped under a pending read is refused by the kernel (EFAULT),
            // which the transport takes for a lost datagram: the read fails, nothing crashes.
            let piece = (n >= ZERO_COPY_MIN).then(|| piece(src, off, n)).flatten();
            let (peer, to) = (r.peer, r.send_id);
            let mut b = g.buf();
            let h = if first {
                pkt::write_readrsp(&mut b[HEADROOM..], connid, to, rx_wire(id), n as u64)
            } else {
                pkt::write_ctsdata(&mut b[HEADROOM..], to, n as u64, off as u64, connid)
            };
            match piece {
                Some(tail) => g.send_pkt_tail(peer, b, h, tail, Owner::Rx(id), n),
                None => {
                    if let Some(r) = g.rxes.get(id)
                        && let RxKind::Read { src, .. } = &r.kind
                    {
                        gather(src, off, &mut b[HEADROOM + h..HEADROOM + h + n]);
                    }
                    g.send_pkt(peer, b, h + n, Owner::Rx(id), n);
                }
            }
            if n == 0 {
                return;
            }
        }
    }

    fn recv_atomic(&self, g: &mut Inner, p: usize, req: &Req, data: &[u8]) {
        let h = &req.hdr;
        let kind = match req.ty {
            pkt::WRITE_RTA | pkt::DC_WRITE_RTA => AtomicKind::Write,
            pkt::FETCH_RTA => AtomicKind::Fetch,
            _ => AtomicKind::Compare,
        };
        // The op's id travels in one field: recv_id for replies, send_id for receipts.
        let tx_id = if req.ty == pkt::DC_WRITE_RTA {
            h.send_id
        } else {
            h.recv_id
        };
        let Some(size) = crate::util::atomic::datatype_size(h.datatype) else {
            return self.refuse(g, p, tx_id, Errno::OPNOTSUPP);
        };
        let access = match kind {
            AtomicKind::Write => FI_REMOTE_WRITE,
            AtomicKind::Fetch if h.atomic_op == FI_ATOMIC_READ => FI_REMOTE_READ,
            _ => FI_REMOTE_READ | FI_REMOTE_WRITE,
        };
        let (dest, bytes) = match self.verify(&req.rma, size, access) {
            Ok(v) => v,
            Err(e) => return self.refuse(g, p, tx_id, e),
        };
        let reads_only = kind == AtomicKind::Fetch && h.atomic_op == FI_ATOMIC_READ;
        let need = match kind {
            _ if reads_only => 0,
            AtomicKind::Compare => 2 * bytes,
            _ => bytes,
        };
        if data.len() < need || dest.len() != 1 {
            return self.refuse(g, p, tx_id, Errno::INVAL);
        }
        let (operand, cmp) = match kind {
            _ if reads_only => (&data[..0], &data[..0]),
            AtomicKind::Compare => (&data[..bytes], &data[bytes..2 * bytes]),
            _ => (&data[..bytes], &data[..0]),
        };
        let mut result = vec![0u8; if kind == AtomicKind::Write { 0 } else { bytes }];
        let r = dest[0].with_mut_slice(|dst| {
            crate::util::atomic::apply(
                kind,
                h.datatype,
                h.atomic_op,
                dst,
                operand,
                cmp,
                &mut result,
            )
        });
        if let Err(e) = r {
            return self.refuse(g, p, tx_id, e);
        }
        let connid = g.connid();
        let mut b = g.buf();
        let n = match req.ty {
            pkt::WRITE_RTA => {
                g.recycle(b);
                return;
            }
            pkt::DC_WRITE_RTA => pkt::write_receipt(&mut b[HEADROOM..], tx_id, h.msg_id, connid),
            _ => {
                let n = pkt::write_atomrsp(&mut b[HEADROOM..], connid, tx_id, bytes as u64);
                b[HEADROOM + n..HEADROOM + n + bytes].copy_from_slice(&result);
                n + bytes
            }
        };
        g.send_pkt(p, b, n, Owner::Ctrl, 0);
    }
}

// ---- control packets ----

impl RdmEndpoint {
    fn handle_ctrl(&self, g: &mut Inner, src: EfaAddr, c: Ctrl, b: &[u8]) {
        let connid = match c {
            Ctrl::Cts { connid, .. } | Ctrl::ReadRsp { connid, .. } => Some(connid),
            Ctrl::CtsData { connid, .. } | Ctrl::Handshake { connid, .. } => connid,
            _ => None,
        };
        if connid.is_some_and(|c| c != src.qkey) {
            g.dropped += 1;
            return;
        }
        if let Ctrl::Handshake { extra_info, .. } = c {
            let p = g.peer_by_addr(src);
            let peer = &mut g.peers[p];
            if peer.dead {
                return;
            }
            peer.extra_info = extra_info;
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
            return;
        }
        // Everything else answers something we started: the sender must be known.
        let Some(&p) = g.by_addr.get(&src) else {
            g.dropped += 1;
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
                if recv_id & TX_BIT != 0 {
                    let Some(id) = self.txe_of(g, p, recv_id) else {
                        return;
                    };
                    self.read_data(g, id, seg_offset as usize, data, None);
                } else if let Some(id) = self.rxe_of(g, p, recv_id) {
                    self.rx_data(g, id, seg_offset as usize, data);
                }
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
                self.read_data(g, id, 0, data, Some(send_id));
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
            // Not used by this endpoint (no RDMA read): nothing of ours is waiting for them.
            Ctrl::Eor { .. } | Ctrl::ReadNack { .. } | Ctrl::Handshake { .. } => g.dropped += 1,
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
    fn read_data(&self, g: &mut Inner, id: u64, off: usize, data: &[u8], responder: Option<u32>) {
        let room = g.ctsdata_room().max(1);
        let credits = g.knobs.tx_min_credits;
        let connid = g.connid();
        let Some(t) = g.txes.get_mut(id) else { return };
        if t.kind != TxKind::Read || off.checked_add(data.len()).is_none_or(|e| e > t.len) {
            g.dropped += 1;
            return;
        }
        scatter(&t.iov, off, data);
        if let Some(r) = responder {
            t.recv_id = r;
        }
        t.got += data.len();
        t.window = t.window.saturating_sub(data.len());
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
        }
    }
}

/// `seg_length` bytes of `b` from `off`, if the packet holds them.
fn seg(b: &[u8], off: usize, len: u64) -> Option<&[u8]> {
    let end = off.checked_add(usize::try_from(len).ok()?)?;
    b.get(off..end)
}
