//! Sending messages: the operations we started that wait on a peer (`TxOp`), posting a send
//! by the inline, bounce or rendezvous path, its ACK, and send-side completions.

use super::rma::Shared;
use super::segment::Push;
use super::{CntrKind, INJECT_SIZE, INLINE_MAX, Inner, ShmEndpoint};
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::shm::cmd::*;
use crate::prov::shm::region::BufLease;
use crate::sys::cma::Remote;
use crate::sys::mem::{IoVec, IovList, gather, iov_len, scatter};
use crate::util::cq::{CqEntry, CqErrEntry};
use crate::util::ep::{Call, MsgOp};
use crate::util::rxq::MAX_IOV;

/// How often, at most, buffers lent to peers that are gone are looked for (`reclaim_from_gone`).
const RECLAIM_PERIOD_MS: u64 = 100;

/// Our operation waiting for a peer (an ACK, a GO, or bounce buffers to push data).
pub(super) struct TxOp {
    pub(super) peer: usize,
    pub(super) kind: TxKind,
    pub(super) context: usize,
    /// Resolved flags: FI_COMPLETION set iff a completion is due.
    pub(super) flags: u64,
    /// CQ flags of the completion (FI_SEND | FI_MSG, FI_WRITE | FI_RMA, ...).
    pub(super) cq_flags: u64,
    pub(super) len: usize,
    /// Source data (send, write) or destination (read).
    pub(super) iov: IovList,
    /// Atomic fetch/compare result buffers.
    pub(super) result: Vec<IoVec>,
    /// Our bounce buffer carrying its bytes. The target releases it once it has read them,
    /// and nobody else: by the time its ACK comes, we may have lent it again. We take it back
    /// only if the command never reached the target, or the target died (`buf_reclaim`).
    pub(super) bounce: Option<BufLease>,
    /// Segmented push in progress.
    pub(super) push: Option<Push>,
    /// An RMA waiting for `OP_CLEARED`: its command, sent again without `F_MAY_COPY` if our own
    /// copy is refused (the target then copies or falls back to the segmented path).
    pub(super) may_copy: Option<Box<Cmd>>,
    /// Counted in its peer's `unordered`.
    pub(super) unordered: bool,
    /// Cleared with `F_SHARED`: our part is done (or refused); waiting for the target's.
    pub(super) shared: Option<Box<Shared>>,
    /// Sent again for the target to copy ([`Peer::retrying`]).
    pub(super) retried: bool,
    pub(super) cntr: CntrKind,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum TxKind {
    Msg,
    Write,
    Read,
    Atomic,
}

/// Remote ranges of an iov list (for the handler's cross-memory attach).
pub(super) fn remotes(iov: &[IoVec]) -> Vec<Remote> {
    iov.iter().map(Remote::from).collect()
}

pub(super) fn copy_in(iov: &[IoVec], copy_len: usize) -> Vec<u8> {
    let mut v = vec![0u8; copy_len];
    gather(iov, 0, &mut v);
    v
}

impl TxOp {
    /// An operation to peer `peer` with no buffers, of which nothing has happened yet.
    pub(super) fn new(
        peer: usize,
        kind: TxKind,
        cntr: CntrKind,
        context: usize,
        flags: u64,
        cq_flags: u64,
        len: usize,
    ) -> TxOp {
        TxOp {
            peer,
            kind,
            context,
            flags,
            cq_flags,
            len,
            iov: IovList::default(),
            result: Vec::new(),
            bounce: None,
            push: None,
            may_copy: None,
            shared: None,
            retried: false,
            unordered: false,
            cntr,
        }
    }
}

/// Which of our bounce buffers a fill takes (`Region::buf_lease`): the lowest free one, or,
/// while this endpoint also copies out of its peers' bounce buffers (traffic both ways), the
/// next one in turn. Decided again every `WINDOW` fills of `MIN` bytes or more.
#[derive(Debug, Default)]
pub(super) struct FillTurn {
    fills: u32,
    copied_out: u32,
    in_turn: bool,
}

impl FillTurn {
    /// Smaller fills always take the lowest free buffer: in turn, 512 B and 1 KiB writes both
    /// ways lost a third (their few lines are cheap to take back from a busy peer).
    const MIN: usize = 4096;
    const WINDOW: u32 = 64;

    /// A fill of `len` bytes is about to take a buffer: whether it takes the next in turn.
    pub(super) fn fill(&mut self, len: usize) -> bool {
        if len < Self::MIN {
            return false;
        }
        self.fills += 1;
        if self.fills >= Self::WINDOW {
            // Both ways: at least one copy out for every four fills.
            self.in_turn = self.copied_out * 4 >= self.fills;
            self.fills = 0;
            self.copied_out = 0;
        }
        self.in_turn
    }

    /// We copied `len` bytes out of a peer's bounce buffer.
    pub(super) fn copied_out(&mut self, len: usize) {
        if len >= Self::MIN {
            self.copied_out = self.copied_out.saturating_add(1);
        }
    }
}

impl Inner {
    /// Lends one of our bounce buffers to peer `p`, `len` bytes of it filled by `fill`, with a
    /// command after which nothing of ours waits on it (a bounce send, an injected write, a
    /// read's or an atomic's result): the reader releases it; `lent_to` remembers the lease in
    /// case the peer dies first (`check_liveness` takes it back). None when none is free.
    pub(super) fn lend_with(
        &mut self,
        p: usize,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Option<u32> {
        let lease = self.buf_filled(len, fill)?;
        self.lent_to[lease.idx as usize] = Some((p, lease));
        Some(lease.idx)
    }

    /// One of our bounce buffers, `len` bytes of it filled by `fill`; None when none is free
    /// even after taking back those lent to peers that are gone.
    pub(super) fn buf_filled(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Option<BufLease> {
        let in_turn = self.fill_turn.fill(len);
        let mut lease = self.region.as_deref()?.buf_lease(in_turn);
        if lease.is_none() {
            self.reclaim_from_gone();
            lease = self.region.as_deref()?.buf_lease(in_turn);
        }
        let lease = lease?;
        self.region.as_deref()?.buf_fill(lease.idx, len, fill);
        Some(lease)
    }

    /// With every buffer lent: takes back those lent to peers whose process is gone (at most
    /// every `RECLAIM_PERIOD_MS`; a lease the peer released before going fails to reclaim,
    /// as it must). Done here, when a buffer is wanted, because an endpoint that only answers
    /// (an atomic's or a read's result) may never run the liveness check of waiting operations.
    fn reclaim_from_gone(&mut self) {
        let now = crate::sys::os::coarse_clock_ms();
        if now.wrapping_sub(self.last_reclaim_ms) < RECLAIM_PERIOD_MS {
            return;
        }
        self.last_reclaim_ms = now;
        let gone: Vec<bool> = self
            .peers
            .iter()
            .map(|peer| peer.dead || peer.region.as_ref().is_some_and(|r| r.owner_gone()))
            .collect();
        self.reclaim_lent(|p| gone.get(p).copied().unwrap_or(true));
    }

    /// Takes back the buffers `lend_with` lent to the peers `dead` names; a lease the peer
    /// released before it went fails to reclaim, as it must (`Region::buf_reclaim`).
    pub(super) fn reclaim_lent(&mut self, dead: impl Fn(usize) -> bool) {
        for slot in &mut self.lent_to {
            if let Some((p, lease)) = *slot
                && dead(p)
            {
                *slot = None;
                if let Some(r) = &self.region {
                    r.buf_reclaim(lease);
                }
            }
        }
    }

    /// Takes back a buffer `ShmEndpoint::lend` lent whose command never reached the peer.
    pub(super) fn unlend(&mut self, idx: u32) {
        if let Some(slot) = self.lent_to.get_mut(idx as usize) {
            *slot = None;
        }
        if let Some(r) = &self.region {
            r.buf_release(idx);
        }
    }

    /// Records `tx` and pushes its command `c` to peer `p`; if the push fails, forgets `tx`
    /// again (releasing its bounce buffer) and returns the error.
    pub(super) fn post_op(&mut self, p: usize, tx: TxOp, c: &mut Cmd) -> Result<u64> {
        let bounce = tx.bounce;
        let id = self.tx_ops.insert(tx);
        c.op_id = id;
        if let Err(e) = self.push_cmd(p, c) {
            self.tx_ops.remove(id);
            if let (Some(b), Some(r)) = (bounce, &self.region) {
                r.buf_reclaim(b);
            }
            return Err(e);
        }
        Ok(id)
    }

    /// Completes an operation of ours: a CQ entry if one is due, a count if a counter is
    /// bound. The check is inlined: an injected send, which completes nothing unless a counter
    /// is bound, made a call for it (some 25 instructions per send, callgrind).
    #[inline(always)]
    pub(super) fn complete_tx(
        &self,
        context: usize,
        flags: u64,
        cq_flags: u64,
        len: usize,
        cntr: CntrKind,
    ) {
        if flags & FI_COMPLETION != 0 || self.cntr.get(cntr).is_some() {
            self.complete_tx_due(context, flags, cq_flags, len, cntr);
        }
    }

    fn complete_tx_due(
        &self,
        context: usize,
        flags: u64,
        cq_flags: u64,
        len: usize,
        cntr: CntrKind,
    ) {
        if flags & FI_COMPLETION != 0
            && let Some(cq) = &self.tx_cq
        {
            cq.push(CqEntry {
                op_context: context,
                flags: cq_flags,
                len,
                src_addr: FI_ADDR_NOTAVAIL,
                ..Default::default()
            });
        }
        if let Some(c) = self.cntr.get(cntr) {
            c.complete(len);
        }
    }

    pub(super) fn fail_tx(&self, context: usize, cq_flags: u64, err: Errno, cntr: CntrKind) {
        if let Some(cq) = &self.tx_cq {
            cq.push_err(CqErrEntry::new(context, cq_flags, err));
        }
        if let Some(c) = self.cntr.get(cntr) {
            c.fail();
        }
    }
}

impl ShmEndpoint {
    pub(super) fn check_iov(&self, iov: &[IoVec]) -> Result<()> {
        if iov.len() > MAX_IOV {
            Err(Errno::INVAL)
        } else {
            Ok(())
        }
    }

    pub(super) fn send_msg(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        self.check_iov(op.iov)?;
        if tagged && self.caps & FI_TAGGED == 0 || !tagged && self.caps & FI_MSG == 0 {
            return Err(Errno::NOSYS);
        }
        let flags = self.flags.resolve_tx(op.call, op.flags);
        let len = iov_len(op.iov);
        // fi_inject and the FI_INJECT flag (on the call or in op_flags) alike.
        if flags & FI_INJECT != 0 && len > self.inject_limit {
            return Err(Errno::MSGSIZE);
        }
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let p = g.peer_for(op.addr)?;
        let mut c = Cmd::new(OP_MSG, g.token);
        c.len = len as u64;
        c.tag = op.tag;
        c.data = op.data;
        if tagged {
            c.flags |= F_TAGGED;
        }
        if flags & FI_REMOTE_CQ_DATA != 0 {
            c.flags |= F_CQ_DATA;
        }
        let cq_flags = FI_SEND | if tagged { FI_TAGGED } else { FI_MSG };
        // An injected buffer is copied before the call returns, so it completes then.
        let delivery = flags & FI_DELIVERY_COMPLETE != 0 && flags & FI_INJECT == 0;
        if len <= INLINE_MAX && !delivery {
            gather(op.iov, 0, &mut c.body[..len]);
            g.push_cmd(p, &c)?;
            g.complete_tx(op.context, flags, cq_flags, len, CntrKind::Send);
            return Ok(());
        }
        if len <= INJECT_SIZE && !delivery {
            let b = self.lend(&mut g, p, len, op.iov)?;
            c.proto = PROTO_BOUNCE;
            c.aux = u64::from(b);
            if let Err(e) = g.push_cmd(p, &c) {
                g.unlend(b);
                return Err(e);
            }
            g.complete_tx(op.context, flags, cq_flags, len, CntrKind::Send);
            return Ok(());
        }
        // Rendezvous: the receiver copies from our memory (or asks us to push it), then ACKs.
        let mut tx = TxOp {
            iov: IovList::new(op.iov).ok_or(Errno::INVAL)?,
            ..TxOp::new(
                p,
                TxKind::Msg,
                CntrKind::Send,
                op.context,
                flags,
                cq_flags,
                len,
            )
        };
        c.flags |= F_ACK;
        if len <= INLINE_MAX {
            gather(op.iov, 0, &mut c.body[..len]);
        } else if self.cma {
            c.proto = PROTO_IOV;
            c.aux = op.iov.len() as u64;
            if len >= super::share::SHARE_MIN && !g.peers[p].share_refused && g.peers[p].pid > 0 {
                c.flags |= F_SHARED;
            }
            c.put_iovs(0, op.iov.iter().map(Remote::from));
        } else {
            c.proto = PROTO_SEG;
        }
        if op.call == Call::Inject {
            tx.flags &= !FI_COMPLETION;
        }
        g.post_op(p, tx, &mut c)?;
        Ok(())
    }

    /// Lends one of our bounce buffers to peer `p` holding the `len` bytes of `iov`, for an
    /// operation that completes once its command is in the peer's ring (`Inner::lend_with`).
    pub(super) fn lend(&self, g: &mut Inner, p: usize, len: usize, iov: &[IoVec]) -> Result<u32> {
        g.lend_with(p, len, |dst| {
            gather(iov, 0, dst);
        })
        .ok_or(Errno::AGAIN)
    }

    pub(super) fn handle_ack(&self, g: &mut Inner, p: usize, c: &Cmd) {
        if c.flags & F_INJECTED != 0 {
            // One of our injected writes was refused (nothing is sent for those that land).
            if c.status != 0 {
                g.fail_tx(0, FI_WRITE | FI_RMA, Errno(c.status), CntrKind::Write);
            }
            return;
        }
        let Some(tx) = g.tx_ops.get(c.op_id) else {
            g.dropped += 1;
            return;
        };
        if tx.peer != p {
            g.dropped += 1;
            return;
        }
        let Some(tx) = g.tx_ops.remove(c.op_id) else {
            return;
        };
        if tx.may_copy.is_some() {
            g.peers[p].uncleared = g.peers[p].uncleared.saturating_sub(1);
        }
        g.release_order(&tx);
        if c.status != 0 {
            g.fail_tx(tx.context, tx.cq_flags, Errno(c.status), tx.cntr);
            return;
        }
        // Data that came back in the ACK: fetched atomic results, or a small read's bytes.
        let returned = if tx.kind == TxKind::Atomic && !tx.result.is_empty() {
            Some((&tx.result[..], (c.len as usize).min(tx.len)))
        } else if tx.kind == TxKind::Read && c.flags & F_RETURN_DATA != 0 {
            // All of it, or the read fails: a peer may say anything.
            Some((
                &tx.iov[..],
                if c.len as usize == tx.len {
                    tx.len
                } else {
                    usize::MAX
                },
            ))
        } else {
            None
        };
        if let Some((dest, n)) = returned {
            let copied = match c.proto {
                PROTO_INLINE if n <= BODY => scatter(dest, 0, &c.body[..n]) == n,
                PROTO_BOUNCE => {
                    g.fill_turn.copied_out(n);
                    let r = g.peers[p].region.clone();
                    let ok = r
                        .as_ref()
                        .and_then(|r| r.buf_with(c.aux as u32, 0, n, |s| scatter(dest, 0, s)))
                        == Some(n);
                    if let Some(r) = r {
                        r.buf_release(c.aux as u32);
                    }
                    ok
                }
                _ => false,
            };
            if !copied {
                g.fail_tx(tx.context, tx.cq_flags, Errno::PROTO, tx.cntr);
                return;
            }
        }
        g.complete_tx(tx.context, tx.flags, tx.cq_flags, tx.len, tx.cntr);
    }
}

#[cfg(test)]
mod tests {
    use super::FillTurn;

    #[test]
    fn fills_go_in_turn_only_while_traffic_goes_both_ways() {
        let mut t = FillTurn::default();
        // One way: only fills, never a copy out of a peer's buffer.
        assert!((0..3 * FillTurn::WINDOW).all(|_| !t.fill(4096)));
        // Both ways: a copy out per fill; the next decision turns to taking them in turn.
        let took: Vec<bool> = (0..2 * FillTurn::WINDOW)
            .map(|_| {
                t.copied_out(4096);
                t.fill(4096)
            })
            .collect();
        assert!(!took[0], "decided only at the end of a window");
        assert!(took[FillTurn::WINDOW as usize..].iter().all(|&x| x));
        // Small fills take the lowest free buffer whatever the traffic.
        assert!(!t.fill(FillTurn::MIN - 1));
        // Copies out of small buffers do not count; a window without copies out turns back.
        t.copied_out(FillTurn::MIN - 1);
        let last = (0..FillTurn::WINDOW).map(|_| t.fill(4096)).last();
        assert_eq!(last, Some(false));
        // Fewer than one copy out per four fills is one way.
        for i in 0..FillTurn::WINDOW {
            if i % 5 == 0 {
                t.copied_out(4096);
            }
            t.fill(4096);
        }
        assert!(!t.fill(4096));
    }
}
