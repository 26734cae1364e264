//! The segmented path, for when cross-memory attach is refused: the sink of a transfer asks
//! (GO), the source pushes chunks through its bounce buffers (DATA), and the sink copies them
//! out. Used by large messages, remote writes and remote reads alike.

use super::share::SharedRecv;
use super::tx::TxKind;
use super::{Inner, ShmEndpoint};
use crate::prov::shm::cmd::*;
use crate::prov::shm::region::BOUNCE_SIZE;
use crate::sys::mem::{IoVec, gather, scatter};
use crate::util::rxq::Recv;

/// A segmented push: the sink's op, bytes sent, bytes the sink asked for.
#[derive(Clone, Copy, Debug)]
pub(super) struct Push {
    sink: u64,
    sent: usize,
    limit: usize,
}

/// Data arriving into our memory through the segmented path (a receive or a remote write), or
/// our data going out to a peer that is reading from us.
pub(super) struct RxOp {
    pub(super) peer: usize,
    /// The sender's operation (for the final ACK).
    pub(super) sender_op: u64,
    pub(super) dest: Vec<IoVec>,
    pub(super) len: usize,
    pub(super) got: usize,
    pub(super) done: RxDone,
    /// A receive both sides copy (`share`), until the sender's part is done: the segmented
    /// path's DATA does not apply to it.
    pub(super) shared: Option<Box<SharedRecv>>,
}

pub(super) enum RxDone {
    /// A message: complete the receive (with truncation details) and ACK the sender.
    Recv {
        recv: Recv,
        tagged: bool,
        src: u64,
        tag: u64,
        data: u64,
        cq_data: bool,
        olen: usize,
    },
    /// A remote write: count it, report CQ data if any, ACK the initiator.
    RemoteWrite { cq_data: Option<u64> },
    /// We are the source of a remote read: push `dest` (our memory) to the initiator's op.
    PushRead { initiator_op: u64 },
}

impl Inner {
    /// Asks peer `p` to push `len` bytes of its op `sender_op` to our rx op `id` (GO).
    pub(super) fn go(&mut self, p: usize, sender_op: u64, id: u64, len: usize) {
        let mut go = Cmd::new(OP_GO, self.token);
        go.op_id = sender_op;
        go.aux = id;
        go.len = len as u64;
        self.respond(p, &go);
    }
}

impl RxOp {
    /// The receive `recv` of the first `take` bytes of message `c` from peer `p` into `dest`,
    /// nothing of which has arrived yet.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn message(
        p: usize,
        c: &Cmd,
        dest: Vec<IoVec>,
        take: usize,
        recv: Recv,
        tagged: bool,
        src: u64,
    ) -> RxOp {
        RxOp {
            peer: p,
            sender_op: c.op_id,
            dest,
            len: take,
            got: 0,
            done: RxDone::Recv {
                recv,
                tagged,
                src,
                tag: c.tag,
                data: c.data,
                cq_data: c.flags & F_CQ_DATA != 0,
                olen: (c.len as usize).saturating_sub(take),
            },
            shared: None,
        }
    }
}

impl ShmEndpoint {
    /// Asks the source of `sender_op` to push `rx.len` bytes to a new rx op.
    pub(super) fn start_pull(&self, g: &mut Inner, p: usize, sender_op: u64, rx: RxOp) {
        let len = rx.len;
        let id = g.rx_ops.insert(rx);
        if len == 0 {
            self.finish_rx(g, id);
            return;
        }
        g.go(p, sender_op, id, len);
    }

    pub(super) fn finish_rx(&self, g: &mut Inner, id: u64) {
        let Some(rx) = g.rx_ops.remove(id) else {
            return;
        };
        match rx.done {
            RxDone::Recv {
                recv,
                tagged,
                src,
                tag,
                data,
                cq_data,
                olen,
            } => {
                g.complete_recv(
                    &recv,
                    tagged,
                    src,
                    tag,
                    data,
                    cq_data,
                    rx.len + olen,
                    rx.got,
                );
                g.ack(rx.peer, rx.sender_op, Ok(()), rx.got);
            }
            RxDone::RemoteWrite { cq_data } => {
                self.remote_write_done(g, rx.len, cq_data);
                g.ack(rx.peer, rx.sender_op, Ok(()), rx.len);
            }
            RxDone::PushRead { .. } => {}
        }
    }

    /// The sink of a segmented transfer is ready: start pushing.
    pub(super) fn handle_go(&self, g: &mut Inner, p: usize, c: &Cmd) {
        match g.tx_ops.get_mut(c.op_id) {
            Some(tx)
                if tx.peer == p
                    && tx.push.is_none()
                    && matches!(tx.kind, TxKind::Msg | TxKind::Write) =>
            {
                // The sink may want less than everything (a truncated receive).
                tx.push = Some(Push {
                    sink: c.aux,
                    sent: 0,
                    limit: tx.len.min(c.len as usize),
                });
                g.tx_pushing.push(c.op_id);
            }
            _ => g.dropped += 1,
        }
    }

    /// A chunk of a segmented transfer arrived in the source's bounce buffer.
    pub(super) fn handle_data(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let Some(region) = g.peers[p].region.clone() else {
            return;
        };
        let buf = c.aux as u32;
        let off = c.aux2 as usize;
        let n = c.len as usize;
        if c.flags & F_TO_TX != 0 {
            // Data for one of our reads.
            let ok = match g.tx_ops.get(c.op_id) {
                Some(tx)
                    if tx.peer == p
                        && tx.kind == TxKind::Read
                        && off.checked_add(n).is_some_and(|e| e <= tx.len) =>
                {
                    let dest = tx.iov.to_vec();
                    region.buf_with(buf, 0, n, |s| scatter(&dest, off, s)) == Some(n)
                }
                _ => false,
            };
            region.buf_release(buf);
            if !ok {
                g.dropped += 1;
            }
            return;
        }
        let done = match g.rx_ops.get_mut(c.op_id) {
            Some(rx)
                if rx.peer == p
                    && rx.shared.is_none()
                    && off == rx.got
                    && off.checked_add(n).is_some_and(|e| e <= rx.len) =>
            {
                let dest = rx.dest.clone();
                let copied = region.buf_with(buf, 0, n, |s| scatter(&dest, off, s));
                if copied == Some(n) {
                    rx.got += n;
                }
                rx.got == rx.len
            }
            _ => {
                g.dropped += 1;
                false
            }
        };
        region.buf_release(buf);
        if done {
            self.finish_rx(g, c.op_id);
        }
    }

    /// Pushes chunks of segmented transfers while bounce buffers are free.
    pub(super) fn push_segments(&self, g: &mut Inner) {
        if g.tx_pushing.is_empty() && g.rx_pushing.is_empty() {
            return;
        }
        let Some(region) = g.region.clone() else {
            return;
        };
        // Our sends and writes the sink asked for.
        let mut ids = std::mem::take(&mut g.tx_pushing);
        'tx: for &id in &ids {
            while let Some(tx) = g.tx_ops.get(id) {
                let Some(Push { sink, sent, limit }) = tx.push else {
                    break;
                };
                if sent >= limit {
                    break;
                }
                let p = tx.peer;
                let n = (limit - sent).min(BOUNCE_SIZE);
                let Some(b) = region.buf_alloc() else {
                    break 'tx;
                };
                region.buf_fill(b, n, |dst| {
                    gather(&tx.iov, sent, dst);
                });
                let mut d = Cmd::new(OP_DATA, g.token);
                d.op_id = sink;
                d.aux = u64::from(b);
                d.aux2 = sent as u64;
                d.len = n as u64;
                if g.push_cmd(p, &d).is_err() {
                    region.buf_release(b);
                    break;
                }
                if let Some(tx) = g.tx_ops.get_mut(id) {
                    tx.push = Some(Push {
                        sink,
                        sent: sent + n,
                        limit,
                    });
                }
            }
        }
        // Pushed to the end (or gone): the ACK is all that is left of them.
        ids.retain(|&id| {
            g.tx_ops
                .get(id)
                .is_some_and(|t| t.push.is_some_and(|x| x.sent < x.limit))
        });
        ids.append(&mut g.tx_pushing);
        g.tx_pushing = ids;
        // Reads of our memory pushed to the initiator.
        let mut ids = std::mem::take(&mut g.rx_pushing);
        'rx: for &id in &ids {
            while let Some(rx) = g.rx_ops.get(id) {
                let RxDone::PushRead { initiator_op } = rx.done else {
                    break;
                };
                let (p, got, len) = (rx.peer, rx.got, rx.len);
                if got >= len {
                    g.rx_ops.remove(id);
                    g.ack(p, initiator_op, Ok(()), len);
                    break;
                }
                let n = (len - got).min(BOUNCE_SIZE);
                let Some(b) = region.buf_alloc() else {
                    break 'rx;
                };
                region.buf_fill(b, n, |dst| {
                    gather(&rx.dest, got, dst);
                });
                let mut d = Cmd::new(OP_DATA, g.token);
                d.op_id = initiator_op;
                d.flags = F_TO_TX;
                d.aux = u64::from(b);
                d.aux2 = got as u64;
                d.len = n as u64;
                if g.push_cmd(p, &d).is_err() {
                    region.buf_release(b);
                    break;
                }
                if let Some(rx) = g.rx_ops.get_mut(id) {
                    rx.got += n;
                }
            }
        }
        ids.retain(|&id| g.rx_ops.get(id).is_some());
        ids.append(&mut g.rx_pushing);
        g.rx_pushing = ids;
    }
}
