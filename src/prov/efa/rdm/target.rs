//! The target side of one-sided operations (efa-reference §5): remote writes, reads and
//! atomics touch our memory only after the domain's MR map accepted the key, the range and
//! the access. A refusal reaches the initiator as an ERR packet when it understands them
//! (extra-info bit 9), and is counted either way. A read is answered with READRSP, then
//! CTSDATA, within the windows the requester grants.

use super::ep::*;
use super::pkt::{self, Req};
use super::tx::BULK_ZERO_COPY_MIN;
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::efa::device::HEADROOM;
use crate::sys::mem::{IoVec, gather, piece};
use crate::util::ep::AtomicKind;

impl RdmEndpoint {
    /// Checks every target entry of a remote access against the MR map (§5).
    pub(super) fn verify(
        &self,
        rma: &[pkt::RmaIov],
        elem: usize,
        access: u64,
    ) -> Result<(Vec<IoVec>, usize)> {
        let mut out = Vec::with_capacity(rma.len());
        let mut total = 0usize;
        for r in rma {
            let bytes = usize::try_from(r.len)
                .ok()
                .and_then(|n| n.checked_mul(elem))
                .ok_or(Errno::INVAL)?;
            total = total.checked_add(bytes).ok_or(Errno::INVAL)?;
            self.domain
                .mr_map
                .verify_into(r.key, r.addr, bytes, access, &mut out)?;
        }
        Ok((out, total))
    }

    /// A remote access was refused: tell the initiator (when it understands ERR) and count it.
    pub(super) fn refuse(&self, g: &mut Inner, p: usize, tx_id: u32, err: Errno) {
        g.refused += 1;
        self.refuse_quietly(g, p, tx_id, err);
    }

    /// `refuse` without counting (the caller counted).
    pub(super) fn refuse_quietly(&self, g: &mut Inner, p: usize, tx_id: u32, err: Errno) {
        if g.peers[p].error_responses() {
            let connid = g.connid();
            let mut b = g.buf();
            let n = pkt::write_err(&mut b[HEADROOM..], tx_id, err.0 as u32, connid);
            g.send_pkt(p, b, n, Owner::Ctrl, 0);
        }
    }

    pub(super) fn recv_write(&self, g: &mut Inner, p: usize, req: &Req, data: &[u8]) {
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
            lr: None,
            edge: 0,
            nacked: false,
        });
        if total == 0 {
            self.finish(g, id);
            return;
        }
        self.rx_data(g, id, 0, &[data]);
    }

    pub(super) fn recv_read(&self, g: &mut Inner, p: usize, req: &Req) {
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
            lr: None,
            edge: 0,
            nacked: false,
        });
        self.send_read_data(g, id);
    }

    /// Answers a read within the window the requester granted: READRSP first (it carries our
    /// id for the requester's CTS), CTSDATA after.
    pub(super) fn send_read_data(&self, g: &mut Inner, id: u64) {
        let connid = g.connid();
        // Sized for the requester, which may receive less than we do.
        let Some(mtu) = g.rxes.get(id).map(|r| g.peer_pkt(r.peer)) else {
            return;
        };
        loop {
            let full = g.bulk_full_for(mtu) || g.must_queue();
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
            let piece = (n >= BULK_ZERO_COPY_MIN)
                .then(|| piece(src, off, n))
                .flatten();
            let (peer, to) = (r.peer, r.send_id);
            let mut b = g.buf_to(peer);
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

    pub(super) fn recv_atomic(&self, g: &mut Inner, p: usize, req: &Req, data: &[u8]) {
        let h = &req.hdr;
        if req.ty == pkt::WRITE_RTA && req.rma.is_empty() && data.is_empty() {
            // The msg_id of an atomic its initiator failed (too large for us): nothing to do.
            return;
        }
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
