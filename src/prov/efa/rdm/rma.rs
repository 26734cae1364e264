//! One-sided operations the RDM endpoint initiates, emulated with packets (efa-reference §5)
//! after a handshake with the peer (§2): EAGER_RTW or LONGCTS_RTW for writes, SHORT_RTR or
//! LONGCTS_RTR for reads, WRITE/FETCH/COMPARE_RTA for atomics. The target's side is in
//! `target.rs`; responses arrive in `ctrl.rs`.

use super::ep::*;
use super::pkt::{self, ReqHdr, RmaIov};
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::sys::mem::{gather, iov_len};
use crate::util::Endpoint;
use crate::util::ep::{AtomicKind, AtomicOp, RmaOp};
use crate::util::rxq::MAX_IOV;

impl Inner {
    /// Sends an RMA write (after the handshake).
    pub fn start_write(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let (peer, len, cq) = (t.peer, t.len, t.cq_data.is_some());
        let rma = t.rma.clone();
        let send_id = tx_wire(id);
        // With error responses the target confirms every write (DC variants): a refused write
        // then reaches the initiator as an error completion.
        let dc = t.await_response;
        let eager_ty = if dc {
            pkt::DC_EAGER_RTW
        } else {
            pkt::EAGER_RTW
        };
        let pkt_max = self.peer_pkt(peer);
        let room = pkt_max.saturating_sub(self.req_overhead(peer, eager_ty, rma.len(), cq));
        let flags = pkt::REQ_RMA;
        if len <= room {
            let h = ReqHdr {
                rma_iov_count: rma.len() as u32,
                send_id,
                ..Default::default()
            };
            self.send_req(id, eager_ty, flags, &h, &rma, 0, len, &[]);
            self.set_state(id, TxState::Sending);
            return;
        }
        let ty = if dc {
            pkt::DC_LONGCTS_RTW
        } else {
            pkt::LONGCTS_RTW
        };
        let room = pkt_max.saturating_sub(self.req_overhead(peer, ty, rma.len(), cq));
        let h = ReqHdr {
            rma_iov_count: rma.len() as u32,
            msg_length: len as u64,
            send_id,
            credit_request: self.knobs.tx_min_credits as u32,
            ..Default::default()
        };
        self.send_req(id, ty, flags, &h, &rma, 0, room.min(len), &[]);
        self.set_state(id, TxState::WaitCts);
    }

    /// Sends an RMA read request.
    pub fn start_read(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let (len, peer) = (t.len, t.peer);
        let rma = t.rma.clone();
        let recv_id = tx_wire(id);
        // SHORT_RTR when the answer fits one READRSP (efa-reference §5) of the size the
        // responder sends us, else LONGCTS_RTR with a first window (bytes we receive).
        let short = len + 24 <= self.peer_pkt(peer);
        let ty = if short {
            pkt::SHORT_RTR
        } else {
            pkt::LONGCTS_RTR
        };
        let window = if short {
            len
        } else {
            (self.knobs.tx_min_credits * self.ctsdata_room()).min(len)
        };
        let h = ReqHdr {
            rma_iov_count: rma.len() as u32,
            msg_length: len as u64,
            recv_id,
            recv_length: window as u64,
            ..Default::default()
        };
        self.send_req(id, ty, pkt::REQ_RMA, &h, &rma, 0, 0, &[]);
        if let Some(t) = self.txes.get_mut(id) {
            t.window = window;
            t.state = TxState::WaitResponse;
        }
    }

    /// Sends an atomic request (operand, then compare data, in the packet).
    pub fn start_atomic(&mut self, id: u64) {
        let Some(t) = self.txes.get(id) else { return };
        let TxKind::Atomic(kind) = t.kind else { return };
        let rma = t.rma.clone();
        let operand = t.operand.clone();
        let wire = tx_wire(id);
        let peer = t.peer;
        // One packet or none: an operand the peer cannot receive fails the operation. Its
        // msg_id still reaches the peer, as a WRITE_RTA with no target (`recv_atomic` skips
        // it), or every later message and atomic would wait for it there.
        let need = self.req_overhead(peer, pkt::FETCH_RTA, rma.len(), false) + operand.len();
        if need > self.peer_pkt(peer) {
            let h = ReqHdr {
                msg_id: t.msg_id,
                ..Default::default()
            };
            let connid = self.connid();
            let mut b = self.buf();
            let n = pkt::write_req(
                &mut b[crate::prov::efa::device::HEADROOM..],
                pkt::WRITE_RTA,
                pkt::REQ_ATOMIC,
                &h,
                &[],
                None,
                None,
                Some(connid),
            );
            self.send_pkt(peer, b, n, Owner::Ctrl, 0);
            self.fail_tx(id, Errno::MSGSIZE, 0);
            return;
        }
        let ty = match kind {
            AtomicKind::Write if t.await_response => pkt::DC_WRITE_RTA,
            AtomicKind::Write => pkt::WRITE_RTA,
            AtomicKind::Fetch => pkt::FETCH_RTA,
            AtomicKind::Compare => pkt::COMPARE_RTA,
        };
        let h = ReqHdr {
            msg_id: t.msg_id,
            rma_iov_count: rma.len() as u32,
            datatype: t.datatype,
            atomic_op: t.atomic_op,
            recv_id: wire,
            send_id: wire,
            ..Default::default()
        };
        self.send_req(id, ty, pkt::REQ_ATOMIC, &h, &rma, 0, 0, &operand);
        let await_response = ty != pkt::WRITE_RTA;
        self.set_state(
            id,
            if await_response {
                TxState::WaitResponse
            } else {
                TxState::Sending
            },
        );
    }
}

impl RdmEndpoint {
    pub(super) fn post_rma(&self, op: &RmaOp<'_>, read: bool) -> Result<()> {
        if self.caps & FI_RMA == 0 {
            return Err(Errno::NOSYS);
        }
        if op.rma_iov.len() != 1 {
            // rma_iov_limit is 1 (efa-reference §10).
            return Err(Errno::INVAL);
        }
        let len = iov_len(op.iov);
        if op.rma_iov[0].len != len {
            return Err(Errno::INVAL);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let mut g = self.lock();
        self.check(&g, op.iov)?;
        // fi_inject and the FI_INJECT flag (on the call or in op_flags) alike.
        if flags & FI_INJECT != 0 && len > super::inject_size(g.mtu) {
            return Err(Errno::MSGSIZE);
        }
        let peer = g.peer_for(op.addr)?;
        if let Some(shm) = self.route(&mut g, peer) {
            drop(g);
            return if read { shm.read(op) } else { shm.write(op) };
        }
        if g.peers[peer].dead {
            return Err(Errno::CONNABORTED);
        }
        let inject = !read && flags & FI_INJECT != 0;
        let mut t = Self::new_txe(
            if read { TxKind::Read } else { TxKind::Write },
            peer,
            op.context,
            flags,
            op.iov,
            len,
        );
        if inject {
            Self::inject_copy(&mut t, op.iov);
        }
        t.rma = op
            .rma_iov
            .iter()
            .map(|r| RmaIov {
                addr: r.addr,
                len: r.len as u64,
                key: r.key,
            })
            .collect();
        t.cq_data = (!read && flags & FI_REMOTE_CQ_DATA != 0).then_some(op.data);
        t.await_response = flags & FI_DELIVERY_COMPLETE != 0 && !read;
        let id = g.txes.insert(t);
        g.start(id);
        self.posted(&mut g, id);
        Ok(())
    }

    pub(super) fn post_atomic(&self, op: &AtomicOp<'_>) -> Result<()> {
        if self.caps & FI_ATOMIC == 0 {
            return Err(Errno::NOSYS);
        }
        if !crate::util::atomic::valid(op.kind, op.datatype, op.op) {
            return Err(Errno::OPNOTSUPP);
        }
        let size = crate::util::atomic::datatype_size(op.datatype).ok_or(Errno::INVAL)?;
        if op.rma_ioc.len() != 1 || op.iov.len() > MAX_IOV {
            return Err(Errno::INVAL);
        }
        let count = op.rma_ioc[0].count;
        let len = count.checked_mul(size).ok_or(Errno::INVAL)?;
        let reads_only = op.kind == AtomicKind::Fetch && op.op == FI_ATOMIC_READ;
        if (!reads_only && iov_len(op.iov) != len)
            || (op.kind == AtomicKind::Compare && iov_len(op.compare) != len)
            || (op.kind != AtomicKind::Write && iov_len(op.result) != len)
        {
            return Err(Errno::INVAL);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let mut g = self.lock();
        self.check(&g, op.iov)?;
        if len > super::max_atomic_bytes(g.mtu)
            || flags & FI_INJECT != 0 && len > super::inject_size(g.mtu)
        {
            return Err(Errno::MSGSIZE);
        }
        let peer = g.peer_for(op.addr)?;
        if let Some(shm) = self.route(&mut g, peer) {
            drop(g);
            return shm.atomic(op);
        }
        if g.peers[peer].dead {
            return Err(Errno::CONNABORTED);
        }
        let mut operand = vec![0u8; if reads_only { 0 } else { len }];
        gather(op.iov, 0, &mut operand);
        if op.kind == AtomicKind::Compare {
            let mut c = vec![0u8; len];
            gather(op.compare, 0, &mut c);
            operand.extend(c);
        }
        let mut t = Self::new_txe(TxKind::Atomic(op.kind), peer, op.context, flags, &[], len);
        t.rma = vec![RmaIov {
            addr: op.rma_ioc[0].addr,
            len: count as u64,
            key: op.rma_ioc[0].key,
        }];
        t.datatype = op.datatype;
        t.atomic_op = op.op;
        t.operand = operand;
        t.result = op.result.to_vec();
        t.inject = flags & FI_INJECT != 0;
        t.owned = Vec::new();
        t.await_response = flags & FI_DELIVERY_COMPLETE != 0;
        // Atomics share the message order (efa-reference §4).
        let p = &mut g.peers[peer];
        t.msg_id = p.next_msg_id;
        p.next_msg_id = next_msg_id(t.msg_id);
        let id = g.txes.insert(t);
        g.start(id);
        self.posted(&mut g, id);
        Ok(())
    }
}
