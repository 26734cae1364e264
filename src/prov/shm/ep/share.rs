//! Large messages copied by both cores. The receiver of a large message copies it out of the
//! sender's memory (the iov path), while the sender, waiting for its ACK, has a core with
//! nothing to do. A sender that can write into the receiver offers it (`F_SHARED` on
//! `OP_MSG`); the receiver that matches such a message to a posted receive names that
//! receive's memory (`OP_SHARE`) and copies its blocks of it (`cmd::share_runs`, as shared
//! RMA copies split them), the sender writes the other blocks and says so (`OP_SHARED`), and
//! the receiver then completes the receive and ACKs the send as for any iov message.
//!
//! Whatever one side's copy could not do, the receiver does itself: the sender's buffer stays
//! untouched until the ACK, so a refused or failed part is copied again by the receiver (by
//! the segmented path if the kernel refuses the receiver too). One-way tagged sends of 1 MiB
//! (fabtests' `fi_rdm_tagged_bw`) moved about a fifth more per second so.

use super::segment::{RxDone, RxOp};
use super::tx::TxKind;
use super::{Inner, ShmEndpoint};
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::shm::cmd::*;
use crate::sys::cma::{self, Remote};
use crate::sys::mem::IoVec;
use crate::util::rxq::{MAX_IOV, Recv};

/// Messages of at least this many bytes are offered for sharing: below two blocks one side
/// would often have nothing to copy, and the extra round trip would cost more than it saves.
pub(super) const SHARE_MIN: usize = 2 * SHARE_BLOCK as usize;

// A receive's ranges all fit in one `OP_SHARE` (`Cmd::iovs` reads at most 8).
const _: () = assert!(MAX_IOV <= 8);

/// A receive whose message both sides copy, waiting for the sender's `OP_SHARED`.
pub(super) struct SharedRecv {
    /// The sender's memory (the message's iov list).
    theirs: Vec<Remote>,
    /// How the receiver's own blocks went.
    ours: Result<()>,
}

/// The first `take` bytes of `dest`, as the ranges a peer writes to.
fn clipped(dest: &[IoVec], take: usize) -> Vec<Remote> {
    let mut left = take;
    let mut out = Vec::with_capacity(dest.len());
    for v in dest {
        if left == 0 {
            break;
        }
        let n = v.len().min(left);
        if n > 0 {
            out.push(Remote {
                addr: v.addr() as u64,
                len: n,
            });
        }
        left -= n;
    }
    out
}

impl ShmEndpoint {
    /// Receiver: shares the copy of iov message `c` from peer `p` into `recv` (the first `take`
    /// bytes of its `total`), if the sender offered it and both sides have blocks to copy.
    /// Gives `recv` back when it does not share (the caller copies as usual).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn share_recv(
        &self,
        g: &mut Inner,
        p: usize,
        c: &Cmd,
        recv: Recv,
        tagged: bool,
        src: u64,
        take: usize,
    ) -> Option<Recv> {
        let peer = &g.peers[p];
        // pid 0: a peer in another pid namespace, which cross-memory attach cannot name. A
        // multi-receive buffer is not shared: a later message's completion may release it
        // (FI_MULTI_RECV) before this one would complete.
        if c.flags & F_SHARED == 0
            || take < SHARE_MIN
            || peer.share_refused
            || peer.pid <= 0
            || recv.flags & FI_MULTI_RECV != 0
        {
            return Some(recv);
        }
        let target = recv.target();
        let ours = clipped(&target, take);
        let theirs = c.iovs(0, (c.aux as usize).min(MAX_IOV)).unwrap_or_default();
        let mine = share_runs(ours.iter().copied(), true);
        if mine.is_empty() || share_runs(ours.iter().copied(), false).is_empty() {
            return Some(recv);
        }
        let rx = RxOp::message(p, c, target.to_vec(), take, recv, tagged, src);
        let id = g.rx_ops.insert(rx);
        // Asked first, so that the sender copies while we do.
        let mut ask = Cmd::new(OP_SHARE, g.token);
        ask.op_id = c.op_id;
        ask.len = take as u64;
        ask.aux = ours.len() as u64;
        ask.aux2 = id;
        ask.put_iovs(0, ours.iter().copied());
        g.respond(p, &ask);
        let pid = g.peers[p].pid;
        let r = cma::transfer_runs(pid, &target, &theirs, &mine, false);
        if let Err(e) = r
            && super::rma::refused(e)
        {
            g.peers[p].share_refused = true;
        }
        if let Some(rx) = g.rx_ops.get_mut(id) {
            rx.shared = Some(Box::new(SharedRecv { theirs, ours: r }));
        }
        None
    }

    /// Sender: the receiver of our message `c.op_id` asks us to write our blocks of it into
    /// its ranges; we answer `OP_SHARED` with how it went (the ACK still completes the send).
    pub(super) fn handle_share(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let Some(tx) = g
            .tx_ops
            .get(c.op_id)
            .filter(|tx| tx.peer == p && tx.kind == TxKind::Msg)
        else {
            g.dropped += 1;
            return;
        };
        let take = c.len as usize;
        // Ranges that do not add up: refused, and the receiver copies everything itself.
        let r = match c.iovs(0, c.aux as usize) {
            Some(theirs)
                if take <= tx.len && theirs.iter().map(|t| t.len).sum::<usize>() == take =>
            {
                let runs = share_runs(theirs.iter().copied(), false);
                cma::transfer_runs(g.peers[p].pid, &tx.iov, &theirs, &runs, true)
            }
            _ => Err(Errno::PROTO),
        };
        let mut done = Cmd::new(OP_SHARED, g.token);
        done.op_id = c.aux2;
        if let Err(e) = r {
            done.status = e.0;
            if super::rma::refused(e) {
                g.peers[p].share_refused = true;
            }
        }
        g.respond(p, &done);
    }

    /// Receiver: the sender's blocks of shared receive `c.op_id` are written (or not): copy
    /// what is missing, then complete the receive and ACK the send.
    pub(super) fn handle_shared(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let sh = match g.rx_ops.get_mut(c.op_id) {
            Some(rx) if rx.peer == p => rx.shared.take(),
            _ => None,
        };
        let Some(sh) = sh else {
            g.dropped += 1;
            return;
        };
        let Some(rx) = g.rx_ops.get(c.op_id) else {
            return;
        };
        let pid = g.peers[p].pid;
        let SharedRecv { theirs, ours } = *sh;
        let mut r = ours;
        if r.is_ok() && c.status != 0 {
            // The sender's blocks are ours to copy too.
            let runs = share_runs(clipped(&rx.dest, rx.len), false);
            r = cma::transfer_runs(pid, &rx.dest, &theirs, &runs, false);
        }
        match r {
            Ok(()) => {
                if let Some(rx) = g.rx_ops.get_mut(c.op_id) {
                    rx.got = rx.len;
                }
                self.finish_rx(g, c.op_id);
            }
            // The kernel refuses us: the sender pushes the whole message through its bounce
            // buffers (its bytes are unchanged until our ACK).
            Err(e) if super::rma::refused(e) => {
                let (sender_op, len) = (rx.sender_op, rx.len);
                g.go(p, sender_op, c.op_id, len);
            }
            Err(e) => {
                if let Some(rx) = g.rx_ops.remove(c.op_id)
                    && let RxDone::Recv { recv, tagged, .. } = &rx.done
                {
                    g.copy_into_recv_failed(p, rx.sender_op, recv, *tagged, e);
                }
            }
        }
    }
}
