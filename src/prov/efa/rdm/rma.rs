//! One-sided operations the RDM endpoint initiates (efa-reference §5), after a handshake with
//! the peer (§2). Where our device and the peer both do device RDMA (its handshake's RDMA
//! read / write bits) and the local buffers are registered with the device, reads and writes
//! are device work requests straight into the target's registered memory (a write with remote
//! CQ data is a write with immediate, which completes at the target); everything else is
//! emulated with packets: EAGER_RTW or LONGCTS_RTW for writes, SHORT_RTR or LONGCTS_RTR for
//! reads, WRITE/FETCH/COMPARE_RTA for atomics. The target's side is in `target.rs`; responses
//! arrive in `ctrl.rs`.

use super::ep::*;
use super::pkt::{self, ReqHdr, RmaIov};
use super::placement::Target;
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::efa::device::{DevError, EfaAddr, RdmaOp, RdmaReq};
use crate::sys::mem::{gather, iov_len, piece_upto};
use crate::util::Endpoint;
use crate::util::cq::CqEntry;
use crate::util::ep::{AtomicKind, AtomicOp, RmaOp};
use crate::util::rxq::MAX_IOV;

impl Inner {
    /// Starts a read or write as device RDMA if it can be one: our device and the peer both
    /// do it, one target entry whose key is a device key, and local memory registered with
    /// the device (device RDMA moves the application's memory itself; injected data is
    /// ours, so it is emulated). Remote CQ data rides a write with immediate: one work
    /// request, so one source piece, data of 32 bits (`cq_data_size` 4), and a peer that
    /// takes it into a posted receive (not "unsolicited", extra-info bit 8). Returns false
    /// (nothing done) when the operation is to be emulated.
    pub fn start_device_rdma(&mut self, id: u64) -> bool {
        let max = self.dev.max_rdma_size();
        let Some(t) = self.txes.get(id) else {
            return false;
        };
        let peer = &self.peers[t.peer];
        let read = t.kind == TxKind::Read;
        let both = if read {
            self.rdma.rdma_read && peer.rdma_read()
        } else {
            self.rdma.rdma_write && peer.rdma_write()
        };
        if !both || max == 0 || t.inject || t.len == 0 || t.rma.len() != 1 {
            return false;
        }
        if u32::try_from(t.rma[0].key).is_err() {
            return false;
        }
        if let Some(d) = t.cq_data
            && (u32::try_from(d).is_err()
                || t.iov.iter().filter(|v| !v.is_empty()).count() != 1
                || t.len > max
                || peer.extra_info & pkt::EXTRA_UNSOLICITED_WRITE_RECV != 0)
        {
            return false;
        }
        if !t
            .iov
            .iter()
            .all(|v| v.is_empty() || self.dev.local_key(*v).is_some())
        {
            return false;
        }
        let Some(t) = self.txes.get_mut(id) else {
            return false;
        };
        t.state = TxState::Sending;
        t.await_response = false;
        t.lent = true;
        t.queued = 0;
        self.post_rdma_wrs(id);
        true
    }

    /// Posts the device work requests of a device read or write from where it stopped: one
    /// per piece of a local iov entry, at most `max_rdma_size` each. A full send queue leaves
    /// the rest for the next progress pass (`rdma_waiting`).
    pub fn post_rdma_wrs(&mut self, id: u64) {
        let max = self.dev.max_rdma_size().max(1);
        loop {
            let Some(t) = self.txes.get(id) else { return };
            if t.queued >= t.len || t.failed.is_some() {
                return;
            }
            let off = t.queued;
            let Some(local) = piece_upto(&t.iov, off, max) else {
                return self.fail_tx(id, Errno::INVAL, 0);
            };
            let n = local.len();
            let Some(lkey) = self.dev.local_key(local) else {
                // Deregistered since the operation started.
                return self.fail_tx(id, Errno::INVAL, 5);
            };
            let op = match (t.kind, t.cq_data) {
                (TxKind::Read, _) => RdmaOp::Read,
                (_, Some(d)) => RdmaOp::WriteData(d as u32),
                _ => RdmaOp::Write,
            };
            let (p, raddr, rkey) = (t.peer, t.rma[0].addr.wrapping_add(off as u64), t.rma[0].key);
            let wr = self.sent.insert(Sent {
                owner: Owner::Tx(id),
                peer: p,
                payload: n,
                len: 0,
                tail: local,
                rnr_again: false,
            });
            let r = self.dev.post_rdma(RdmaReq {
                op,
                dest: self.peers[p].addr,
                local,
                lkey,
                raddr,
                rkey: rkey as u32,
                wr_id: wr,
            });
            match r {
                Ok(()) => {
                    if let Some(t) = self.txes.get_mut(id) {
                        t.queued += n;
                        t.in_flight += 1;
                    }
                    self.peers[p].contacted = true;
                }
                Err(e) => {
                    self.sent.remove(wr);
                    if e == Errno::AGAIN {
                        if !self.rdma_waiting.contains(&Owner::Tx(id)) {
                            self.rdma_waiting.push_back(Owner::Tx(id));
                        }
                    } else {
                        self.fail_tx(id, e, 0);
                    }
                    return;
                }
            }
        }
    }

    /// A peer's device RDMA write with data (write with immediate) landed in our memory: it
    /// completes here as an emulated one does at its end (`finish`, §5).
    pub fn write_data_arrived(&mut self, src: EfaAddr, len: usize, data: u32) {
        // EFA does not say the sender's QKEY: the peer at that GID and QPN.
        let p = self.by_addr.get(&src).copied().or_else(|| {
            self.peers
                .iter()
                .position(|p| p.addr.gid == src.gid && p.addr.qpn == src.qpn && !p.dead)
        });
        let src_addr = p.map_or(FI_ADDR_NOTAVAIL, |p| self.source_id(self.peers[p].fi_addr));
        if let Some(cq) = &self.rx_cq {
            cq.push(CqEntry {
                op_context: 0,
                flags: FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA,
                len,
                data: u64::from(data),
                src_addr,
                ..Default::default()
            });
        }
    }

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
            (self.knobs.tx_min_credits * self.grant_room(peer)).min(len)
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
        if !short {
            self.granted(Target::Read(id));
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
    /// Device work requests that waited for room in the send queue.
    pub(super) fn post_waiting_rdma(&self, g: &mut Inner) {
        for _ in 0..g.rdma_waiting.len() {
            match g.rdma_waiting.pop_front() {
                Some(Owner::Tx(id)) => g.post_rdma_wrs(id),
                Some(Owner::Rx(id)) => self.post_long_reads(g, id),
                _ => return,
            }
        }
    }

    /// A device read or write work request finished.
    pub(super) fn rdma_done(
        &self,
        g: &mut Inner,
        wr_id: u64,
        status: core::result::Result<(), DevError>,
    ) {
        let Some(sent) = g.sent.remove(wr_id) else {
            return;
        };
        let id = match sent.owner {
            Owner::Tx(id) => id,
            Owner::Rx(id) => return self.long_read_done(g, id, sent.payload, status),
            Owner::Ctrl => return,
        };
        if let Some(t) = g.txes.get_mut(id) {
            t.in_flight = t.in_flight.saturating_sub(1);
        }
        match status {
            Ok(()) => {
                if let Some(t) = g.txes.get_mut(id) {
                    t.done += sent.payload;
                    if t.kind == TxKind::Read {
                        t.got += sent.payload;
                        t.response = t.got >= t.len && t.in_flight == 0;
                    }
                }
                g.maybe_complete_tx(id);
            }
            Err(e) => {
                if e == DevError::Unreachable {
                    self.peer_died(g, sent.peer);
                }
                g.fail_tx(id, e.errno(), e.prov_errno());
            }
        }
    }

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
        // A local peer already routed goes straight to shm, which makes the rest of our
        // checks (iov count, inject size, enabled: `open_peer_endpoint`), as a send does.
        if let Some(shm) = self.known_route(op.addr) {
            return if read { shm.read(op) } else { shm.write(op) };
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let mut g = self.lock();
        self.check(&g, op.iov)?;
        // fi_inject and the FI_INJECT flag (on the call or in op_flags) alike.
        if flags & FI_INJECT != 0 && len > super::inject_size(g.mtu) {
            return Err(Errno::MSGSIZE);
        }
        // The transmit queue is as deep for one-sided operations as for sends
        // (fi_tx_size_left): past it the application polls and retries (fi_rma(3) EAGAIN).
        if g.tx_full() {
            return Err(Errno::AGAIN);
        }
        let peer = g.peer_for(op.addr)?;
        if let Some(shm) = self.route(&mut g, peer) {
            self.routes.learn(op.addr, g.av_removals);
            drop(g);
            return if read { shm.read(op) } else { shm.write(op) };
        }
        if g.peers[peer].dead {
            return Err(Errno::CONNABORTED);
        }
        let inject = !read && flags & FI_INJECT != 0;
        let mut t = Self::new_txe(
            &mut g.spare,
            if read { TxKind::Read } else { TxKind::Write },
            peer,
            op.context,
            flags,
            op.iov,
            len,
        );
        if inject {
            Self::inject_copy(&mut g.spare, &mut t, op.iov);
        }
        t.rma = g.spare.rma();
        t.rma.extend(op.rma_iov.iter().map(|r| RmaIov {
            addr: r.addr,
            len: r.len as u64,
            key: r.key,
        }));
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
        if g.tx_full() {
            return Err(Errno::AGAIN);
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
        let mut t = Self::new_txe(
            &mut g.spare,
            TxKind::Atomic(op.kind),
            peer,
            op.context,
            flags,
            &[],
            len,
        );
        t.rma = g.spare.rma();
        t.rma.push(RmaIov {
            addr: op.rma_ioc[0].addr,
            len: count as u64,
            key: op.rma_ioc[0].key,
        });
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
