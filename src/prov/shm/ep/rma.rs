//! RMA: posting reads and writes (initiator), checking and applying them (target), and the
//! copy an initiator makes itself once the target has cleared its keys (CLEARED / COPIED),
//! shared between both sides' cores (PART) when the kernel lets both copy.

use super::segment::{RxDone, RxOp};
use super::tx::{TxKind, TxOp, remotes};
use super::{CntrKind, INJECT_SIZE, Inner, ShmEndpoint};
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::shm::cmd::*;
use crate::sys::cma::{self, Remote};
use crate::sys::mem::{IoVec, IovList, gather, iov_len, scatter};
use crate::util::cq::CqEntry;
use crate::util::ep::{Call, RmaOp};
use crate::util::rxq::MAX_IOV;

/// Most target ranges an `OP_CLEARED` carries (more: the target copies itself).
const MAX_CLEARED: usize = 8;

/// Our side of a shared copy (`F_SHARED`), between `OP_CLEARED` and the target's `OP_PART`.
pub(super) struct Shared {
    /// The target's ranges.
    theirs: Vec<Remote>,
    /// How our blocks went.
    ours: Result<()>,
    /// The command, to send again if a side's copy is refused.
    retry: Option<Box<Cmd>>,
}

/// Whether the kernel refused a cross-memory copy (rather than the memory being bad).
pub(super) fn refused(e: Errno) -> bool {
    e == Errno::PERM || e == Errno::NOSYS
}

/// A cross-memory copy's error as the operation reports it: the peer's process gone (ESRCH)
/// fails it as any dead peer does.
pub(super) fn copy_error(e: Errno) -> Errno {
    if e.0 == libc::ESRCH {
        Errno::CONNABORTED
    } else {
        e
    }
}

impl ShmEndpoint {
    pub(super) fn rma(&self, op: &RmaOp<'_>, read: bool) -> Result<()> {
        self.check_iov(op.iov)?;
        if self.caps & FI_RMA == 0 {
            return Err(Errno::NOSYS);
        }
        if op.rma_iov.is_empty() || op.rma_iov.len() > MAX_IOV {
            return Err(Errno::INVAL);
        }
        let len = iov_len(op.iov);
        if op.rma_iov.iter().map(|r| r.len).sum::<usize>() != len {
            return Err(Errno::INVAL);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        if flags & FI_INJECT != 0 && len > self.inject_limit {
            return Err(Errno::MSGSIZE);
        }
        // Posted and progressed under one hold of the lock: a stream of small writes took it
        // twice per post.
        let mut g = self.lock();
        let r = self.post_rma(&mut g, op, read, flags, len);
        self.progress_locked(&mut g);
        r
    }

    fn post_rma(
        &self,
        g: &mut Inner,
        op: &RmaOp<'_>,
        read: bool,
        flags: u64,
        len: usize,
    ) -> Result<()> {
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let p = g.peer_for(op.addr)?;
        let mut c = Cmd::new(if read { OP_READ } else { OP_WRITE }, g.token);
        c.len = len as u64;
        c.tag = op.rma_iov.len() as u64;
        c.flags |= F_ACK;
        let mut rma = [(0u64, 0u64, 0u64); RMA_AREA / 24];
        for (e, r) in rma.iter_mut().zip(op.rma_iov) {
            *e = (r.addr, r.len as u64, r.key);
        }
        // More entries than the body holds: refused, as before, by the target's count check.
        c.put_rma(&rma[..op.rma_iov.len().min(rma.len())]);
        if !read && flags & FI_REMOTE_CQ_DATA != 0 {
            c.flags |= F_CQ_DATA;
            c.data = op.data;
        }
        // An injected write with no completion due is done once it is in the target's ring,
        // as upstream's shm does it: no operation to keep, no ACK to wait for (the target
        // reports a refusal as an error completion without context). Counted now.
        let injected =
            !read && flags & FI_INJECT != 0 && flags & (FI_COMPLETION | FI_DELIVERY_COMPLETE) == 0;
        let mut bounce = None;
        if read {
            c.proto = if self.cma { PROTO_IOV } else { PROTO_SEG };
            c.aux = op.iov.len() as u64;
            c.put_iovs(RMA_AREA, op.iov.iter().map(Remote::from));
            if len <= INJECT_SIZE {
                c.flags |= F_RETURN_DATA;
            } else if self.cma {
                c.flags |= F_MAY_COPY;
            }
        } else if len <= RMA_INLINE {
            let at = c.inline_at();
            gather(op.iov, 0, &mut c.body[at..at + len]);
        } else if injected {
            // Read and released by the target, without an ACK (`lend`).
            c.proto = PROTO_BOUNCE;
            c.set_write_bounce(self.lend(g, p, len, op.iov)?);
        } else if op.call == Call::Inject || len <= INJECT_SIZE {
            let b = g
                .buf_filled(len, |dst| {
                    gather(op.iov, 0, dst);
                })
                .ok_or(Errno::AGAIN)?;
            c.proto = PROTO_BOUNCE;
            c.set_write_bounce(b.idx);
            bounce = Some(b);
        } else if self.cma {
            c.proto = PROTO_IOV;
            c.aux = op.iov.len() as u64;
            c.put_iovs(RMA_AREA, op.iov.iter().map(Remote::from));
            c.flags |= F_MAY_COPY;
        } else {
            c.proto = PROTO_SEG;
        }
        let (cq_flags, cntr, kind) = if read {
            (FI_READ | FI_RMA, CntrKind::Read, TxKind::Read)
        } else {
            (FI_WRITE | FI_RMA, CntrKind::Write, TxKind::Write)
        };
        if injected {
            c.flags = (c.flags & !F_ACK) | F_INJECTED;
            if let Err(e) = g.push_cmd(p, &c) {
                if c.proto == PROTO_BOUNCE {
                    g.unlend(c.write_bounce());
                }
                return Err(e);
            }
            g.complete_tx(0, 0, cq_flags, len, cntr);
            return Ok(());
        }
        let tx = TxOp {
            iov: if op.call == Call::Inject {
                IovList::default()
            } else {
                IovList::new(op.iov).ok_or(Errno::INVAL)?
            },
            bounce,
            ..TxOp::new(p, kind, cntr, op.context, flags, cq_flags, len)
        };
        let id = g.post_op(p, tx, &mut c)?;
        let may_copy = c.flags & F_MAY_COPY != 0;
        if may_copy || c.proto == PROTO_SEG {
            let peer = &mut g.peers[p];
            peer.unordered += 1;
            peer.uncleared += u32::from(may_copy);
            if let Some(tx) = g.tx_ops.get_mut(id) {
                tx.unordered = true;
                tx.may_copy = may_copy.then(|| Box::new(c));
            }
        }
        Ok(())
    }

    /// Validates every target entry of an RMA/atomic command against our MR map.
    pub(super) fn verify(
        &self,
        g: &mut Inner,
        c: &Cmd,
        access: u64,
        elem: usize,
    ) -> Result<Vec<IoVec>> {
        let mut out = Vec::with_capacity(c.rma_count());
        self.verify_to(g, c, access, elem, &mut out)?;
        Ok(out)
    }

    /// `verify`, appending the memory to `out` (our scratch list on the paths of small
    /// writes and reads: no allocation per RMA), through our cache of the last region named.
    fn verify_to(
        &self,
        g: &mut Inner,
        c: &Cmd,
        access: u64,
        elem: usize,
        out: &mut Vec<IoVec>,
    ) -> Result<()> {
        let count = c.rma_count();
        let rma = c.rma_entries(count).ok_or(Errno::INVAL)?;
        let mut total = 0usize;
        for (addr, n, key) in rma {
            let bytes = usize::try_from(n)
                .ok()
                .and_then(|n| n.checked_mul(elem))
                .ok_or(Errno::INVAL)?;
            total = total.checked_add(bytes).ok_or(Errno::INVAL)?;
            self.domain
                .mr_map
                .verify_cached(&mut g.mr_cache, key, addr, bytes, access, out)?;
        }
        if total != c.len as usize {
            return Err(Errno::INVAL);
        }
        Ok(())
    }

    pub(super) fn handle_write(&self, g: &mut Inner, p: usize, c: &Cmd) {
        self.with_scratch(g, p, c, Self::write_to);
    }

    pub(super) fn handle_read(&self, g: &mut Inner, p: usize, c: &Cmd) {
        self.with_scratch(g, p, c, Self::read_from);
    }

    /// Runs a target handler with our kept list for the memory it covers (emptied first).
    fn with_scratch(
        &self,
        g: &mut Inner,
        p: usize,
        c: &Cmd,
        handler: fn(&Self, &mut Inner, usize, &Cmd, &mut Vec<IoVec>),
    ) {
        let mut iov = std::mem::take(&mut g.iov_scratch);
        iov.clear();
        handler(self, g, p, c, &mut iov);
        g.iov_scratch = iov;
    }

    /// The ACK of a write: none for an injected one that succeeded (`F_INJECTED`).
    fn answer_write(g: &mut Inner, p: usize, c: &Cmd, status: Result<()>, len: usize) {
        if c.flags & F_INJECTED == 0 {
            g.ack(p, c.op_id, status, len);
        } else if let Err(e) = status {
            let mut r = Cmd::new(OP_ACK, g.token);
            r.flags = F_INJECTED;
            r.status = e.0;
            g.respond(p, &r);
        }
    }

    /// A write to us, checked into `dest` (taken for a segmented transfer).
    fn write_to(&self, g: &mut Inner, p: usize, c: &Cmd, dest: &mut Vec<IoVec>) {
        let cq_data = (c.flags & F_CQ_DATA != 0).then_some(c.data);
        match self.verify_to(g, c, FI_REMOTE_WRITE, 1, dest) {
            Ok(()) => {}
            Err(e) => {
                if c.proto == PROTO_BOUNCE
                    && let Some(r) = &g.peers[p].region
                {
                    r.buf_release(c.write_bounce());
                }
                Self::answer_write(g, p, c, Err(e), 0);
                return;
            }
        };
        let len = c.len as usize;
        if self.clear(g, p, c, dest) {
            return;
        }
        let r = match c.proto {
            PROTO_INLINE if len <= RMA_INLINE => {
                let at = c.inline_at();
                scatter(dest, 0, &c.body[at..at + len]);
                Ok(())
            }
            PROTO_BOUNCE => {
                g.fill_turn.copied_out(len);
                let region = g.peers[p].region.clone();
                let r = region
                    .as_ref()
                    .and_then(|r| r.buf_with(c.write_bounce(), 0, len, |s| scatter(dest, 0, s)))
                    .map(|_| ())
                    .ok_or(Errno::INVAL);
                if let Some(region) = region {
                    region.buf_release(c.write_bounce());
                }
                r
            }
            PROTO_IOV if self.cma => {
                let remote = c
                    .iovs(RMA_AREA, (c.aux as usize).min(MAX_IOV))
                    .unwrap_or_default();
                // Sent again after a shared copy: our blocks are done (cmd::SHARE_BLOCK).
                let r = if c.flags & F_INITIATOR_BLOCKS != 0 {
                    let runs = share_runs(remotes(dest), false);
                    cma::transfer_runs(g.peers[p].pid, dest, &remote, &runs, false)
                } else {
                    cma::read_from(g.peers[p].pid, dest, 0, &remote, 0, len)
                };
                match r {
                    Err(e) if refused(e) => Err(Errno::AGAIN),
                    r => r,
                }
            }
            PROTO_IOV | PROTO_SEG => Err(Errno::AGAIN),
            _ => Err(Errno::INVAL),
        };
        match r {
            Ok(()) => {
                self.remote_write_done(g, len, cq_data);
                Self::answer_write(g, p, c, Ok(()), len);
            }
            Err(Errno::AGAIN) => {
                // Segmented: pull the data from the initiator through its bounce buffers.
                let rx = RxOp {
                    peer: p,
                    sender_op: c.op_id,
                    dest: std::mem::take(dest),
                    len,
                    got: 0,
                    done: RxDone::RemoteWrite { cq_data },
                    shared: None,
                };
                self.start_pull(g, p, c.op_id, rx);
            }
            Err(e) => Self::answer_write(g, p, c, Err(e), 0),
        }
    }

    /// Lets the initiator of an RMA that offers to copy itself (`F_MAY_COPY`) do so, once its
    /// keys are checked: answers `OP_CLEARED` with our side of the copy (`ours`, already verified)
    /// and returns true. The initiator reports the copy with `OP_COPIED`. False: we copy.
    fn clear(&self, g: &mut Inner, p: usize, c: &Cmd, ours: &[IoVec]) -> bool {
        if c.flags & F_MAY_COPY == 0
            || c.proto != PROTO_IOV
            || !self.cma
            || ours.len() > MAX_CLEARED
        {
            return false;
        }
        let mut r = Cmd::new(OP_CLEARED, g.token);
        r.op_id = c.op_id;
        r.len = c.len;
        r.aux = ours.len() as u64;
        let ranges = remotes(ours);
        r.put_iovs(0, ranges.iter().copied());
        // Our core would spin while the initiator copies: take our blocks of it (the kernel's
        // copy between processes is bound per core, so two halves at once take half the time).
        let runs = if g.peers[p].share_refused {
            Vec::new()
        } else {
            share_runs(ranges.iter().copied(), true)
        };
        if runs.is_empty() {
            g.respond(p, &r);
            return true;
        }
        r.flags |= F_SHARED;
        g.respond(p, &r);
        let theirs = c
            .iovs(RMA_AREA, (c.aux as usize).min(MAX_IOV))
            .unwrap_or_default();
        let pid = g.peers[p].pid;
        let copied = cma::transfer_runs(pid, ours, &theirs, &runs, c.op == OP_READ);
        let mut part = Cmd::new(OP_PART, g.token);
        part.op_id = c.op_id;
        if let Err(e) = copied {
            part.status = e.0;
            if refused(e) {
                g.peers[p].share_refused = true;
            }
        }
        g.respond(p, &part);
        true
    }

    /// A read of our memory, checked into `src` (taken for a segmented transfer).
    fn read_from(&self, g: &mut Inner, p: usize, c: &Cmd, src: &mut Vec<IoVec>) {
        if let Err(e) = self.verify_to(g, c, FI_REMOTE_READ, 1, src) {
            g.ack(p, c.op_id, Err(e), 0);
            return;
        }
        let len = c.len as usize;
        if self.clear(g, p, c, src) || self.return_data(g, p, c, src) {
            return;
        }
        if c.proto == PROTO_IOV && self.cma {
            let remote = c
                .iovs(RMA_AREA, (c.aux as usize).min(MAX_IOV))
                .unwrap_or_default();
            let copied = if c.flags & F_INITIATOR_BLOCKS != 0 {
                let runs = share_runs(remotes(src), false);
                cma::transfer_runs(g.peers[p].pid, src, &remote, &runs, true)
            } else {
                cma::write_to(g.peers[p].pid, src, 0, &remote, 0, len)
            };
            match copied {
                Ok(()) => {
                    if let Some(cn) = &g.cntr.remote_read {
                        cn.complete(len);
                    }
                    g.ack(p, c.op_id, Ok(()), len);
                    return;
                }
                Err(e) if e != Errno::PERM && e != Errno::NOSYS => {
                    g.ack(p, c.op_id, Err(e), 0);
                    return;
                }
                Err(_) => {}
            }
        }
        // Segmented: push our memory into the initiator's read op.
        if let Some(cn) = &g.cntr.remote_read {
            cn.complete(len);
        }
        let rx = RxOp {
            peer: p,
            sender_op: c.op_id,
            dest: std::mem::take(src),
            len,
            got: 0,
            done: RxDone::PushRead {
                initiator_op: c.op_id,
            },
            shared: None,
        };
        let id = g.rx_ops.insert(rx);
        g.rx_pushing.push(id);
    }

    /// Answers a small read that allows it (`F_RETURN_DATA`) with the data in the ACK: inline
    /// up to the body's size, else in one of our bounce buffers (the initiator releases it).
    /// False when it does not allow it or no bounce buffer is free: the read goes the long way.
    fn return_data(&self, g: &mut Inner, p: usize, c: &Cmd, src: &[IoVec]) -> bool {
        let len = c.len as usize;
        if c.flags & F_RETURN_DATA == 0 || len > INJECT_SIZE {
            return false;
        }
        let mut ack = Cmd::new(OP_ACK, g.token);
        ack.op_id = c.op_id;
        ack.len = len as u64;
        ack.flags = F_RETURN_DATA;
        if len <= BODY {
            gather(src, 0, &mut ack.body[..len]);
        } else {
            let Some(b) = g.lend_with(p, len, |dst| {
                gather(src, 0, dst);
            }) else {
                return false;
            };
            ack.proto = PROTO_BOUNCE;
            ack.aux = u64::from(b);
        }
        if let Some(cn) = &g.cntr.remote_read {
            cn.complete(len);
        }
        g.respond(p, &ack);
        true
    }

    /// The target cleared our RMA: copy it ourselves (our blocks of it, if shared), report it
    /// (`OP_COPIED`) and complete.
    pub(super) fn handle_cleared(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let retry = match g.tx_ops.get_mut(c.op_id) {
            Some(tx) if tx.peer == p && tx.may_copy.is_some() => tx.may_copy.take(),
            _ => {
                g.dropped += 1;
                return;
            }
        };
        g.peers[p].uncleared = g.peers[p].uncleared.saturating_sub(1);
        let Some(tx) = g.tx_ops.get(c.op_id) else {
            return;
        };
        let (read, len) = (tx.kind == TxKind::Read, tx.len);
        let theirs = c.iovs(0, c.aux as usize).unwrap_or_default();
        let shared = c.flags & F_SHARED != 0;
        let pid = g.peers[p].pid;
        let r = if theirs.iter().map(|t| t.len).sum::<usize>() != len || c.len as usize != len {
            Err(Errno::PROTO)
        } else if shared {
            let runs = share_runs(theirs.iter().copied(), false);
            cma::transfer_runs(pid, &tx.iov, &theirs, &runs, !read)
        } else if read {
            cma::read_from(pid, &tx.iov, 0, &theirs, 0, len)
        } else {
            cma::write_to(pid, &tx.iov, 0, &theirs, 0, len)
        };
        if shared {
            // The target may still be copying into or out of our buffer: whatever happened
            // here, the operation ends when its OP_PART (next in our ring) says it is done.
            if let Some(tx) = g.tx_ops.get_mut(c.op_id) {
                tx.shared = Some(Box::new(Shared {
                    theirs,
                    ours: r,
                    retry,
                }));
            }
            return;
        }
        match r {
            Ok(()) => g.copied(p, c.op_id, read, len, retry.as_deref()),
            // The kernel refuses us: the target copies instead (or falls back to segments).
            Err(e) if refused(e) && retry.is_some() => {
                if let Some(mut rc) = retry {
                    rc.flags &= !F_MAY_COPY;
                    g.send_retry(p, rc);
                }
            }
            Err(e) => g.copy_failed(c.op_id, e),
        }
    }

    /// The target's part of a shared copy: complete, or copy what a side could not.
    pub(super) fn handle_part(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let sh = match g.tx_ops.get_mut(c.op_id) {
            Some(tx) if tx.peer == p => tx.shared.take(),
            _ => None,
        };
        let Some(sh) = sh else {
            g.dropped += 1;
            return;
        };
        let Some(tx) = g.tx_ops.get(c.op_id) else {
            return;
        };
        let (read, len) = (tx.kind == TxKind::Read, tx.len);
        let Shared {
            theirs,
            ours,
            retry,
        } = *sh;
        let target = if c.status == 0 {
            Ok(())
        } else {
            Err(Errno(c.status))
        };
        match (ours, target) {
            (Ok(()), Ok(())) => g.copied(p, c.op_id, read, len, retry.as_deref()),
            // The kernel refused the target: its blocks are ours to copy too.
            (Ok(()), Err(e)) if refused(e) => {
                let runs = share_runs(theirs.iter().copied(), true);
                match cma::transfer_runs(g.peers[p].pid, &tx.iov, &theirs, &runs, !read) {
                    Ok(()) => g.copied(p, c.op_id, read, len, retry.as_deref()),
                    Err(e) => g.copy_failed(c.op_id, e),
                }
            }
            // The kernel refused us: the target copies our blocks (its own are done); with
            // both refused, everything (the target falls back to segments).
            (Err(e), t) if refused(e) && t.err().is_none_or(refused) => match retry {
                Some(mut rc) => {
                    rc.flags &= !F_MAY_COPY;
                    if t.is_ok() {
                        rc.flags |= F_INITIATOR_BLOCKS;
                    }
                    g.send_retry(p, rc);
                }
                None => g.copy_failed(c.op_id, e),
            },
            (Err(e), _) | (Ok(()), Err(e)) => g.copy_failed(c.op_id, e),
        }
    }

    /// The initiator copied an RMA we cleared: count it, report its CQ data.
    pub(super) fn handle_copied(&self, g: &mut Inner, c: &Cmd) {
        let len = c.len as usize;
        if c.flags & F_READ != 0 {
            if let Some(cn) = &g.cntr.remote_read {
                cn.complete(len);
            }
        } else {
            self.remote_write_done(g, len, (c.flags & F_CQ_DATA != 0).then_some(c.data));
        }
    }

    pub(super) fn remote_write_done(&self, g: &Inner, len: usize, cq_data: Option<u64>) {
        if let Some(c) = &g.cntr.remote_write {
            c.complete(len);
        }
        if let Some(data) = cq_data
            && let Some(cq) = &g.rx_cq
        {
            cq.push(CqEntry {
                op_context: 0,
                flags: FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA,
                len,
                data,
                src_addr: FI_ADDR_NOTAVAIL,
                ..Default::default()
            });
        }
    }
}

impl Inner {
    /// Our copy of a cleared RMA is done: report it to the target (`OP_COPIED`: it counts it
    /// and reports CQ data) and complete.
    fn copied(&mut self, p: usize, op_id: u64, read: bool, len: usize, cmd: Option<&Cmd>) {
        let mut done = Cmd::new(OP_COPIED, self.token);
        done.len = len as u64;
        if read {
            done.flags |= F_READ;
        } else if let Some(rc) = cmd
            && rc.flags & F_CQ_DATA != 0
        {
            done.flags |= F_CQ_DATA;
            done.data = rc.data;
        }
        self.respond(p, &done);
        if let Some(tx) = self.tx_ops.remove(op_id) {
            self.release_order(&tx);
            self.complete_tx(tx.context, tx.flags, tx.cq_flags, tx.len, tx.cntr);
        }
    }

    /// A cleared RMA could not be copied: it fails (a target process gone since it answered
    /// fails it as any dead peer does).
    fn copy_failed(&mut self, op_id: u64, e: Errno) {
        let e = copy_error(e);
        if let Some(tx) = self.tx_ops.remove(op_id) {
            self.release_order(&tx);
            self.fail_tx(tx.context, tx.cq_flags, e, tx.cntr);
        }
    }

    /// An operation counted in its peer's `unordered` is done (or failed).
    pub(super) fn release_order(&mut self, tx: &TxOp) {
        if tx.unordered {
            let peer = &mut self.peers[tx.peer];
            peer.unordered = peer.unordered.saturating_sub(1);
        }
        if tx.retried {
            self.peers[tx.peer].retrying = false;
            if let Some(next) = self.peers[tx.peer].held_retries.pop_front() {
                self.peers[tx.peer].retrying = true;
                self.respond(tx.peer, &next);
            }
        }
    }

    /// Sends an RMA command of ours again, for the target to copy (ours was refused), once the
    /// previous such command to that peer is done.
    fn send_retry(&mut self, p: usize, rc: Box<Cmd>) {
        if let Some(tx) = self.tx_ops.get_mut(rc.op_id) {
            tx.retried = true;
        }
        if self.peers[p].retrying {
            self.peers[p].held_retries.push_back(rc);
        } else {
            self.peers[p].retrying = true;
            self.respond(p, &rc);
        }
    }
}
