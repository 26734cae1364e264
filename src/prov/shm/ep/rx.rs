//! Receiving messages: posted receives, matching arrivals against them (straight into the
//! receive's buffer when one is posted), unexpected messages (`Pending`) until a receive
//! takes them, FI_PEEK / FI_CLAIM / FI_DISCARD, and receive completions.

use super::segment::RxOp;
use super::{Inner, ShmEndpoint};
use crate::abi::consts::*;
use crate::core::log::Subsys;
use crate::core::{Errno, Result};
use crate::prov::shm::PROV_NAME;
use crate::prov::shm::cmd::*;
use crate::prov::shm::region::BOUNCE_SIZE;
use crate::sys::cma;
use crate::sys::mem::{iov_len, scatter};
use crate::util::cq::{CqEntry, CqErrEntry};
use crate::util::ep::MsgOp;
use std::sync::atomic::Ordering;

use crate::util::rxq::{
    MAX_IOV, Peek, PostOutcome, Recv, Unexpected, complete_discard, posts_alone,
};

/// What an unexpected message holds until a receive matches it.
pub enum Pending {
    /// Up to `SMALL_INLINE` bytes, held here: no allocation for the small messages that
    /// arrive before their receive (fabtests' `fi_rdm_tagged_bw` at 8 B: most of them).
    Small {
        len: u8,
        data: [u8; SMALL_INLINE],
    },
    Inline(Vec<u8>),
    /// The sender's data stays in its memory (iov or segmented path): the command describes it.
    Remote(Box<Cmd>),
    /// A message the endpoint this one serves (peer mode) received over its own transport, by
    /// that endpoint's handle: it shares our receive queue, and takes these out itself.
    Foreign(u64),
}

/// An unexpected message before `handle_msg` fills it in, in its queue slot: a constant, copied
/// from read-only data (built on the stack, its parts were read back with loads straddling
/// their stores: a store-forwarding stall, perf).
const BLANK: Unexpected<Pending> = Unexpected {
    src: 0,
    tag: 0,
    len: 0,
    data: 0,
    flags: 0,
    claimed_by: None,
    origin: 0,
    payload: Pending::Foreign(0),
};

/// The largest unexpected message held in `Pending::Small` (`handle_msg` writes it into its
/// queue slot). 56, not 64: an unexpected entry then fits 128 bytes, which moves without a call
/// to memcpy.
const SMALL_INLINE: usize = 56;

impl Pending {
    /// The bytes of a message held here (`Small`, `Inline`); None when they are elsewhere.
    fn held(&self) -> Option<&[u8]> {
        match self {
            Pending::Small { len, data } => Some(&data[..usize::from(*len)]),
            Pending::Inline(data) => Some(data),
            Pending::Remote(_) | Pending::Foreign(_) => None,
        }
    }
}

impl Inner {
    /// The copy of message `sender_op` from peer `p` into `recv` failed with `e`: the receive
    /// fails, and so does the send.
    pub(super) fn copy_into_recv_failed(
        &mut self,
        p: usize,
        sender_op: u64,
        recv: &Recv,
        tagged: bool,
        e: Errno,
    ) {
        let e = super::rma::copy_error(e);
        self.fail_recv(recv, tagged, e);
        self.ack(p, sender_op, Err(e), 0);
    }

    /// An error completion of `recv` with `e`.
    pub(super) fn fail_recv(&self, recv: &Recv, tagged: bool, e: Errno) {
        if let Some(cq) = &self.rx_cq {
            cq.push_err(CqErrEntry::new(
                recv.context,
                FI_RECV | if tagged { FI_TAGGED } else { FI_MSG },
                e,
            ));
        }
    }

    /// Completes a receive that got `len` bytes of a `total`-byte message.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn complete_recv(
        &mut self,
        recv: &Recv,
        tagged: bool,
        src: u64,
        tag: u64,
        data: u64,
        cq_data: bool,
        total: usize,
        got: usize,
    ) {
        let mut cq_flags = FI_RECV | if tagged { FI_TAGGED } else { FI_MSG };
        if cq_data {
            cq_flags |= FI_REMOTE_CQ_DATA;
        }
        let multi = recv.flags & FI_MULTI_RECV != 0;
        let buf = recv.first_addr();
        let released = multi && recv.released;
        if released {
            cq_flags |= FI_MULTI_RECV;
        }
        let src_addr = self.source_id(src);
        let rx_cq = &self.rx_cq;
        if total > got {
            if let Some(cq) = rx_cq {
                cq.push_err(CqErrEntry {
                    op_context: recv.context,
                    flags: cq_flags,
                    len: got,
                    buf,
                    data,
                    tag,
                    olen: total - got,
                    err: Errno::TRUNC.0,
                    src_addr,
                    ..Default::default()
                });
            }
            if let Some(c) = &self.cntr.recv {
                c.fail();
            }
            return;
        }
        if recv.flags & FI_COMPLETION != 0
            && let Some(cq) = rx_cq
        {
            cq.push(CqEntry {
                op_context: recv.context,
                flags: cq_flags,
                len: got,
                buf,
                data,
                tag,
                src_addr,
            });
        } else if released && let Some(cq) = rx_cq {
            // A released multi-receive buffer is always reported (fi_msg(3)).
            cq.push(CqEntry {
                op_context: recv.context,
                flags: FI_MULTI_RECV,
                ..Default::default()
            });
        }
        if let Some(c) = &self.cntr.recv {
            c.complete(got);
        }
    }
}

impl ShmEndpoint {
    pub(super) fn post_recv(&self, op: &MsgOp<'_>, tagged: bool) -> Result<()> {
        self.check_iov(op.iov)?;
        if tagged && self.caps & FI_TAGGED == 0 || !tagged && self.caps & FI_MSG == 0 {
            return Err(Errno::NOSYS);
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
        // The common receive takes only the queue's lock (`handle_msg` matches and parks
        // under it too); the endpoint's lock only when a waiting message matched.
        if posts_alone(flags, tagged) {
            if !self.live.load(Ordering::Acquire) {
                return Err(Errno::OPBADSTATE);
            }
            let recv = Recv::new(op.iov, src, op.tag, op.ignore, op.context, flags);
            if let Some(posted) =
                self.rxq
                    .post_alone(recv, src != FI_ADDR_UNSPEC, tagged, usize::MAX)
            {
                if let PostOutcome::Matched(recv, u) = posted? {
                    let mut g = self.lock();
                    self.deliver(&mut g, recv, tagged, u);
                }
                return Ok(());
            }
        }
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        if src != FI_ADDR_UNSPEC && g.rxq.lock().has_unknown_sources() {
            self.resolve_sources(&mut g);
        }
        let recv = Recv::new(op.iov, src, op.tag, op.ignore, op.context, flags);
        if tagged && flags & (FI_PEEK | FI_CLAIM) != 0 {
            // A peek looks at what has arrived: take in what is waiting in the ring first.
            self.progress_locked(&mut g);
            return self.peek_or_claim(&mut g, recv, flags);
        }
        let context = recv.context;
        let mut outcome = g.rxq.lock().post(recv, tagged);
        // A multi-receive buffer takes every waiting message that fits, not just the first
        // (fabtests' multi_recv hung: messages that arrived while both halves were full stayed
        // unexpected after the application reposted a half).
        while let PostOutcome::Matched(recv, u) = outcome {
            self.deliver(&mut g, recv, tagged, u);
            if flags & FI_MULTI_RECV == 0 {
                break;
            }
            outcome = match g.rxq.lock().rematch_multi(context) {
                Some((r, u)) => PostOutcome::Matched(r, u),
                None => PostOutcome::Queued,
            };
        }
        Ok(())
    }

    /// Senders of waiting messages that were not in the AV when the messages arrived may be
    /// now: give those messages their address before a directed receive looks for them.
    fn resolve_sources(&self, g: &mut Inner) {
        let mine = |u: &Pending| !matches!(u, Pending::Foreign(_));
        let origins = g.rxq.lock().unknown_origins(mine);
        for p in origins {
            if p < g.peers.len() {
                g.refresh_fi_addr(p);
            }
        }
        let peers = &g.peers;
        g.rxq.lock().resolve_sources(|u, p| {
            peers
                .get(p)
                .filter(|_| mine(u))
                .map(|peer| peer.fi_addr)
                .filter(|a| *a != FI_ADDR_NOTAVAIL)
        });
    }

    /// fi_tagged(3) FI_PEEK (with FI_CLAIM / FI_DISCARD) and FI_CLAIM receives.
    fn peek_or_claim(&self, g: &mut Inner, recv: Recv, flags: u64) -> Result<()> {
        let cq = g.rx_cq.clone();
        if flags & FI_PEEK == 0 {
            // A claim: take the message a peek reserved for this context.
            let u = g.rxq.lock().claim(recv.context).ok_or(Errno::NOMSG)?;
            if flags & FI_DISCARD != 0 {
                let tag = u.tag;
                self.discard(g, u);
                complete_discard(cq.as_deref(), recv.context, tag);
                return Ok(());
            }
            self.deliver(g, recv, true, u);
            return Ok(());
        }
        let (found, dropped) =
            g.rxq
                .lock()
                .peek(&recv, flags & FI_CLAIM != 0, flags & FI_DISCARD != 0);
        match found {
            Peek::NoMatch => {
                if let Some(cq) = &cq {
                    let mut e = CqErrEntry::new(recv.context, FI_RECV | FI_TAGGED, Errno::NOMSG);
                    e.tag = recv.tag;
                    cq.push_err(e);
                }
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
                if let Some(cq) = &cq {
                    let src_addr = g.source_id(src);
                    cq.push(CqEntry {
                        op_context: recv.context,
                        flags: FI_RECV | FI_TAGGED | f,
                        len,
                        buf: 0,
                        data,
                        tag,
                        src_addr,
                    });
                }
            }
        }
        Ok(())
    }

    /// Drops an unexpected message (FI_DISCARD): a waiting sender is told it was delivered.
    pub(super) fn discard(&self, g: &mut Inner, u: Unexpected<Pending>) {
        if let Pending::Remote(c) = u.payload
            && let Some(p) = g.by_token.get(c.sender)
        {
            g.ack(p, c.op_id, Ok(()), 0);
        }
    }

    /// Moves an unexpected message into a receive that matched it.
    pub(super) fn deliver(&self, g: &mut Inner, recv: Recv, tagged: bool, u: Unexpected<Pending>) {
        let cq_data = u.flags & FI_REMOTE_CQ_DATA != 0;
        match u.payload {
            Pending::Small { .. } | Pending::Inline(_) => {
                let data = u.payload.held().unwrap_or_default();
                let got = recv.place(data);
                g.complete_recv(
                    &recv,
                    tagged,
                    u.src,
                    u.tag,
                    u.data,
                    cq_data,
                    data.len(),
                    got,
                );
            }
            Pending::Remote(c) => match g.by_token.get(c.sender) {
                Some(p) => self.receive_from(g, p, &c, recv, tagged, u.src),
                None => g.fail_recv(&recv, tagged, Errno::CONNABORTED),
            },
            // Never matched here: the endpoint we serve takes its own messages out itself.
            Pending::Foreign(_) => g.dropped += 1,
        }
    }

    /// A message from peer `p` whose data is still in its memory (or in its command, for a
    /// delivery-complete one): a receive fails at once if the peer is gone.
    fn receive_from(&self, g: &mut Inner, p: usize, c: &Cmd, recv: Recv, tagged: bool, src: u64) {
        if g.peers[p].dead {
            g.fail_recv(&recv, tagged, Errno::CONNABORTED);
        } else {
            self.receive_remote(g, p, c, recv, tagged, src);
        }
    }

    /// A message whose data is still in the sender's memory (iov or segmented path).
    fn receive_remote(
        &self,
        g: &mut Inner,
        p: usize,
        c: &Cmd,
        mut recv: Recv,
        tagged: bool,
        src: u64,
    ) {
        let total = c.len as usize;
        let dest = recv.target();
        let room = iov_len(&dest);
        let take = total.min(room);
        let cq_data = c.flags & F_CQ_DATA != 0;
        if c.proto == PROTO_INLINE {
            let got = scatter(&dest, 0, &c.body[..total.min(BODY)]);
            g.complete_recv(&recv, tagged, src, c.tag, c.data, cq_data, total, got);
            g.ack(p, c.op_id, Ok(()), got);
            return;
        }
        if c.proto == PROTO_IOV && self.cma {
            recv = match self.share_recv(g, p, c, recv, tagged, src, take) {
                Some(recv) => recv,
                None => return,
            };
            let remote = c.iovs(0, (c.aux as usize).min(MAX_IOV)).unwrap_or_default();
            let pid = g.peers[p].pid;
            match cma::read_from(pid, &dest, 0, &remote, 0, take) {
                Ok(()) => {
                    g.complete_recv(&recv, tagged, src, c.tag, c.data, cq_data, total, take);
                    g.ack(p, c.op_id, Ok(()), take);
                    return;
                }
                Err(e) if e == Errno::PERM || e == Errno::NOSYS => {
                    crate::fi_warn!(
                        PROV_NAME,
                        Subsys::EpData,
                        "cross-memory attach refused ({e}); using bounce buffers"
                    );
                }
                Err(e) => {
                    // The sender's memory is unreadable (bad iov) or the sender is gone.
                    g.copy_into_recv_failed(p, c.op_id, &recv, tagged, e);
                    return;
                }
            }
        }
        // Segmented: ask the sender to push the first `take` bytes.
        let rx = RxOp::message(p, c, dest.to_vec(), take, recv, tagged, src);
        self.start_pull(g, p, c.op_id, rx);
    }

    #[inline(always)]
    pub(super) fn handle_msg(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let tagged = c.flags & F_TAGGED != 0;
        if (tagged && self.caps & FI_TAGGED == 0) || (!tagged && self.caps & FI_MSG == 0) {
            g.dropped += 1;
            return;
        }
        let total = c.len as usize;
        let known = match c.proto {
            PROTO_INLINE => total <= BODY,
            PROTO_BOUNCE => total <= BOUNCE_SIZE,
            PROTO_IOV | PROTO_SEG => true,
            _ => false,
        };
        if !known {
            g.dropped += 1;
            return;
        }
        if c.proto == PROTO_BOUNCE && g.peers[p].region.is_none() {
            // The sender's region was gone before we could map it (removed by hand or by a
            // sweep): the data is unreachable.
            g.dropped += 1;
            crate::fi_warn!(
                PROV_NAME,
                Subsys::EpData,
                "message of {total} bytes from {} lost: its region is gone",
                g.peers[p].addr
            );
            return;
        }
        let src = g.refresh_fi_addr(p);
        // One match, and the queue stays locked until the message is placed or parked: a
        // receive posted in between (by another thread, or by the endpoint we serve) would
        // otherwise miss it. `self.rxq` is `g.rxq`, reached without borrowing `g`; matching
        // twice (once to place, once to park) was some 80 instructions of every unexpected
        // small message (callgrind).
        let mut q = self.rxq.lock();
        match q.match_incoming_with(src, c.tag, tagged, |recv| {
            Self::place(g, p, c, recv, src, tagged)
        }) {
            Some(true) => return,
            Some(false) => {
                // A multi-receive buffer, or data still with the sender: the receive is taken
                // out (the queue is still locked: the same one matches), the message placed or
                // received once the queue is unlocked.
                if let Some(recv) = q.match_incoming(src, c.tag, tagged, total) {
                    drop(q);
                    if !Self::place(g, p, c, &recv, src, tagged) {
                        self.receive_from(g, p, c, recv, tagged, src);
                    }
                    return;
                }
            }
            None => {}
        }
        // A small inline message's bytes go straight into its queue slot (`Pending::Small`,
        // below); anything else is held as `hold` says.
        let held = if c.proto == PROTO_INLINE && c.flags & F_ACK == 0 && total <= SMALL_INLINE {
            None
        } else {
            match Self::hold(g, p, c) {
                Some(payload) => Some(payload),
                None => {
                    g.dropped += 1;
                    return;
                }
            }
        };
        q.add_unexpected_with(tagged, BLANK, |u| {
            u.src = src;
            u.tag = c.tag;
            u.len = total;
            u.data = c.data;
            if c.flags & F_CQ_DATA != 0 {
                u.flags = FI_REMOTE_CQ_DATA;
            }
            u.origin = p;
            u.payload = match held {
                Some(payload) => payload,
                None => Pending::Small {
                    len: total as u8,
                    data: [0; SMALL_INLINE],
                },
            };
            if let Pending::Small { data, .. } = &mut u.payload {
                data[..total].copy_from_slice(&c.body[..total]);
            }
        });
    }

    /// What an unexpected message keeps until a receive takes it; None: its bytes are
    /// unreachable (a bounce index out of range).
    fn hold(g: &mut Inner, p: usize, c: &Cmd) -> Option<Pending> {
        let total = c.len as usize;
        Some(match c.proto {
            // Delivery-complete small messages are acknowledged when placed: keep the command.
            PROTO_INLINE if c.flags & F_ACK != 0 => Pending::Remote(Box::new(*c)),
            // Larger than `SMALL_INLINE` (`handle_msg` holds the smaller in their slot).
            PROTO_INLINE => Pending::Inline(c.body[..total].to_vec()),
            PROTO_BOUNCE => {
                g.fill_turn.copied_out(total);
                let r = g.peers[p].region.as_deref()?;
                let data = r.buf_with(c.aux as u32, 0, total, |s| s.to_vec());
                r.buf_release(c.aux as u32);
                Pending::Inline(data?)
            }
            // PROTO_IOV, PROTO_SEG: the data stays in the sender's memory.
            _ => Pending::Remote(Box::new(*c)),
        })
    }

    /// Puts a message into the receive it matched on arrival (where the receive sits in its
    /// locked queue, or taken out of it). A small one goes straight from the command or the
    /// sender's bounce buffer into the receive's buffer (without this it went through a
    /// temporary Vec: an allocation and a second copy per message). False, touching nothing:
    /// the message is to be received from the sender (`receive_from`), with the queue unlocked.
    fn place(g: &mut Inner, p: usize, c: &Cmd, recv: &Recv, src: u64, tagged: bool) -> bool {
        let total = c.len as usize;
        let got = match c.proto {
            PROTO_INLINE if c.flags & F_ACK == 0 => Some(recv.place(&c.body[..total])),
            PROTO_BOUNCE => {
                g.fill_turn.copied_out(total);
                g.peers[p].region.as_deref().and_then(|r| {
                    let got = r.buf_with(c.aux as u32, 0, total, |s| recv.place(s));
                    r.buf_release(c.aux as u32);
                    got
                })
            }
            // Delivery-complete inline messages, and data still in the sender's memory.
            _ => return false,
        };
        let cq_data = c.flags & F_CQ_DATA != 0;
        match got {
            Some(got) => g.complete_recv(recv, tagged, src, c.tag, c.data, cq_data, total, got),
            // A bounce index out of range: the sender is broken; the receive fails.
            None => {
                g.dropped += 1;
                g.fail_recv(recv, tagged, Errno::IO);
            }
        }
        true
    }
}
