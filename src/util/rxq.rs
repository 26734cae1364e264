//! Receive matching (fi_msg(3), fi_tagged(3)): posted receives waiting for messages, and
//! unexpected messages waiting for receives. Shared by every provider; efa uses one queue for
//! messages that arrive over its device and over shm (upstream's "peer SRX").
//!
//! The queue knows nothing about data: an unexpected message carries a provider payload `U`
//! (an inline copy, a reference to a sender's buffer, packets to reassemble...) and the
//! provider moves the bytes once a match is made.

use std::collections::VecDeque;
use std::sync::Arc;

use super::push_back_at_front_if_empty;
use crate::sys::lock::{SpinGuard, SpinLock};

use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::sys::mem::{IoVec, iov_len};
use crate::util::cq::{Cq, CqEntry, CqErrEntry};

/// The most iov entries a receive may have (every provider here has `iov_limit` 4).
pub const MAX_IOV: usize = 4;

/// Removes entry `i`; the first (nearly always the one that matches) without `VecDeque::remove`'s
/// general shifting: matching a message of an 8-byte ping-pong took 138 instructions, now 98
/// (callgrind).
#[inline]
fn take_at<T>(q: &mut VecDeque<T>, i: usize) -> Option<T> {
    if i == 0 { q.pop_front() } else { q.remove(i) }
}

/// Posted receives in the order they were posted: a ring over slots that stay allocated, so
/// that a receive is stored field by field straight into its slot (`push_back`, in line), and
/// taking the first is two stores. A `VecDeque` made both calls: its `push_back` copied a
/// receive built on the stack with loads that straddled its fields' stores (a
/// store-forwarding stall, perf), and appending a blank entry to fill in place cost some 35
/// instructions of every post (callgrind). An empty ring starts again at its first slot, so
/// that receives posted and taken one at a time reuse the same cached lines.
#[derive(Debug, Default)]
struct Posted {
    /// A power of two in length (or empty), every slot a receive or `Recv::EMPTY`.
    slots: Vec<Recv>,
    head: usize,
    len: usize,
}

impl Posted {
    fn len(&self) -> usize {
        self.len
    }

    /// The slot of the `i`-th receive (`i < len`).
    #[inline(always)]
    fn slot(&self, i: usize) -> usize {
        (self.head + i) & (self.slots.len() - 1)
    }

    #[inline(always)]
    fn front(&self) -> Option<&Recv> {
        (self.len > 0).then(|| &self.slots[self.head])
    }

    #[inline(always)]
    fn iter(&self) -> impl Iterator<Item = &Recv> {
        (0..self.len).map(|i| &self.slots[self.slot(i)])
    }

    /// A plain loop: `Iterator::position` over `iter`, and `find` over the indexes, were each
    /// a call to a `try_fold` that was not inlined (some 30 instructions per message).
    #[inline(always)]
    #[allow(clippy::manual_find)]
    fn position(&self, mut pred: impl FnMut(&Recv) -> bool) -> Option<usize> {
        for i in 0..self.len {
            if pred(&self.slots[self.slot(i)]) {
                return Some(i);
            }
        }
        None
    }

    #[inline(always)]
    fn push_back(&mut self, recv: Recv) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let i = self.slot(self.len);
        self.slots[i] = recv;
        self.len += 1;
    }

    #[cold]
    fn grow(&mut self) {
        let mut slots = vec![Recv::EMPTY; (self.slots.len() * 2).max(8)];
        for (i, s) in slots.iter_mut().enumerate().take(self.len) {
            *s = self.slots[self.slot(i)].clone();
        }
        self.slots = slots;
        self.head = 0;
    }

    /// Drops the first receive.
    #[inline(always)]
    fn pop_front(&mut self) {
        if self.len > 0 {
            self.len -= 1;
            self.head = if self.len == 0 { 0 } else { self.slot(1) };
        }
    }

    /// Takes the `i`-th receive out; those after it move up.
    fn remove(&mut self, i: usize) -> Option<Recv> {
        if i >= self.len {
            return None;
        }
        let r = self.slots[self.slot(i)].clone();
        for k in i..self.len - 1 {
            let (to, from) = (self.slot(k), self.slot(k + 1));
            self.slots[to] = self.slots[from].clone();
        }
        self.len -= 1;
        if self.len == 0 {
            self.head = 0;
        }
        Some(r)
    }

    /// Takes the `i`-th receive out; the first (nearly always the one that matches) without
    /// moving the others.
    #[inline(always)]
    fn take(&mut self, i: usize) -> Option<Recv> {
        if i == 0 {
            let r = self.front()?.clone();
            self.pop_front();
            Some(r)
        } else {
            self.remove(i)
        }
    }
}

impl std::ops::Index<usize> for Posted {
    type Output = Recv;
    #[inline(always)]
    fn index(&self, i: usize) -> &Recv {
        assert!(i < self.len, "posted receive {i} of {}", self.len);
        &self.slots[self.slot(i)]
    }
}

impl std::ops::IndexMut<usize> for Posted {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut Recv {
        assert!(i < self.len, "posted receive {i} of {}", self.len);
        let s = self.slot(i);
        &mut self.slots[s]
    }
}

/// A posted receive buffer (fi_recv/fi_trecv and their msg variants).
#[derive(Clone, Debug)]
pub struct Recv {
    pub iov: [IoVec; MAX_IOV],
    pub iov_count: usize,
    /// Source filter (`FI_ADDR_UNSPEC`: any).
    pub src: u64,
    pub tag: u64,
    pub ignore: u64,
    pub context: usize,
    /// Resolved operation flags (`FI_COMPLETION`, `FI_MULTI_RECV`, ...).
    pub flags: u64,
    /// Bytes of a multi-receive buffer already consumed.
    pub consumed: usize,
    /// Set on the match that used up a multi-receive buffer: the buffer is no longer posted and
    /// this message's completion carries `FI_MULTI_RECV`.
    pub released: bool,
}

impl Recv {
    const EMPTY: Recv = Recv {
        iov: [IoVec::EMPTY; MAX_IOV],
        iov_count: 0,
        src: 0,
        tag: 0,
        ignore: 0,
        context: 0,
        flags: 0,
        consumed: 0,
        released: false,
    };

    pub fn new(iov: &[IoVec], src: u64, tag: u64, ignore: u64, context: usize, flags: u64) -> Recv {
        let mut r = Recv {
            iov: [IoVec::EMPTY; MAX_IOV],
            iov_count: iov.len().min(MAX_IOV),
            src,
            tag,
            ignore,
            context,
            flags,
            consumed: 0,
            released: false,
        };
        // Element by element, not a variable-length copy: that was a call to memcpy (29
        // instructions of every post, callgrind), and it kept `r` in memory, to be copied
        // again with loads that straddled its fields' stores (a store-forwarding stall, perf).
        for (i, v) in r.iov.iter_mut().enumerate() {
            if i < r.iov_count {
                *v = iov[i];
            }
        }
        r
    }

    pub fn iov(&self) -> &[IoVec] {
        &self.iov[..self.iov_count]
    }

    pub fn len(&self) -> usize {
        iov_len(self.iov())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes still free in a multi-receive buffer.
    pub fn remaining(&self) -> usize {
        self.len().saturating_sub(self.consumed)
    }

    /// Takes `len` bytes (at most what is left) of a multi-receive buffer. True when the buffer
    /// is used up: less than `min` (FI_OPT_MIN_MULTI_RECV) is left.
    fn reserve(&mut self, len: usize, min: usize) -> bool {
        self.consumed += len.min(self.remaining());
        self.remaining() < min.max(1)
    }

    /// Whether a message from `src` with `tag` matches this receive (`directed`: whether the
    /// endpoint honours source filters, FI_DIRECTED_RECV).
    pub fn matches(&self, src: u64, tag: u64, tagged: bool, directed: bool) -> bool {
        self.key().matches(src, tag, tagged, directed)
    }

    /// What a message must have to match this receive.
    pub fn key(&self) -> RecvKey {
        RecvKey {
            src: self.src,
            tag: self.tag,
            ignore: self.ignore,
        }
    }

    /// Copies `data` into this receive, `self.consumed` bytes in (where `target` begins);
    /// returns the bytes copied. No `Target` is built: that took some 25 instructions of every
    /// small message (callgrind).
    #[inline]
    pub fn place(&self, data: &[u8]) -> usize {
        crate::sys::mem::scatter(self.iov(), self.consumed, data)
    }

    /// The address a message placed into this receive begins at (`target`'s first byte; 0 when
    /// the receive has no room left), for the completion's `buf`.
    #[inline]
    pub fn first_addr(&self) -> usize {
        let mut off = self.consumed;
        for v in self.iov() {
            if off < v.len() {
                return v.addr() + off;
            }
            off -= v.len();
        }
        0
    }

    /// The destination of a message placed `self.consumed` bytes into this receive: for a
    /// multi-receive buffer, the sub-range still free; otherwise the whole buffer.
    pub fn target(&self) -> Target {
        let mut t = Target {
            iov: [IoVec::EMPTY; MAX_IOV],
            n: 0,
        };
        let mut off = self.consumed;
        for v in self.iov() {
            if off >= v.len() {
                off -= v.len();
                continue;
            }
            if let Some(s) = v.sub(off, v.len() - off) {
                t.iov[t.n] = s;
                t.n += 1;
            }
            off = 0;
        }
        t
    }
}

/// A receive's filter: source (`FI_ADDR_UNSPEC`: any), tag and ignored tag bits.
#[derive(Clone, Copy, Debug)]
pub struct RecvKey {
    src: u64,
    tag: u64,
    ignore: u64,
}

impl RecvKey {
    /// Whether a message from `src` with `tag` passes (`directed`: whether the endpoint honours
    /// source filters, FI_DIRECTED_RECV).
    #[inline]
    pub fn matches(&self, src: u64, tag: u64, tagged: bool, directed: bool) -> bool {
        let src_ok = !directed || self.src == FI_ADDR_UNSPEC || self.src == src;
        let tag_ok = !tagged || (self.tag | self.ignore) == (tag | self.ignore);
        src_ok && tag_ok
    }
}

/// Where a matched message goes (at most `MAX_IOV` entries, no allocation per message).
#[derive(Clone, Copy, Debug)]
pub struct Target {
    iov: [IoVec; MAX_IOV],
    n: usize,
}

impl std::ops::Deref for Target {
    type Target = [IoVec];
    fn deref(&self) -> &[IoVec] {
        &self.iov[..self.n]
    }
}

/// An unexpected message, with what the provider needs to deliver it later.
#[derive(Clone, Debug)]
pub struct Unexpected<U> {
    pub src: u64,
    pub tag: u64,
    pub len: usize,
    pub data: u64,
    pub flags: u64,
    /// Set by a `FI_PEEK | FI_CLAIM` receive: only a `FI_CLAIM` receive with that context takes it.
    pub claimed_by: Option<usize>,
    /// The provider's handle for the sender (its peer index): a message that arrived before
    /// the application inserted the sender's address (`src` is `FI_ADDR_NOTAVAIL`) gets its
    /// address through it once the sender is in the AV ([`RxQueue::resolve_sources`]).
    pub origin: usize,
    pub payload: U,
}

/// What a posted receive found.
pub enum PostOutcome<U> {
    /// Queued; nothing waiting matched.
    Queued,
    /// An unexpected message matched: deliver `U` into the receive. Not boxed: small
    /// messages that arrive before their receive (fabtests' 8-byte `fi_rdm_tagged_bw`, most
    /// of them) all come this way, and a box cost each an allocation and a free.
    Matched(Recv, Unexpected<U>),
}

/// What a `FI_PEEK` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peek {
    NoMatch,
    Found {
        src: u64,
        tag: u64,
        len: usize,
        data: u64,
        flags: u64,
    },
}

#[derive(Debug)]
pub struct RxQueue<U> {
    msg: Posted,
    tagged: Posted,
    msg_unexp: VecDeque<Unexpected<U>>,
    tag_unexp: VecDeque<Unexpected<U>>,
    directed: bool,
    /// FI_OPT_MIN_MULTI_RECV: a multi-receive buffer with less room is released.
    min_multi_recv: usize,
}

impl<U> RxQueue<U> {
    pub fn new(directed: bool) -> RxQueue<U> {
        RxQueue {
            msg: Posted::default(),
            tagged: Posted::default(),
            msg_unexp: VecDeque::new(),
            tag_unexp: VecDeque::new(),
            directed,
            min_multi_recv: 16384,
        }
    }

    pub fn set_directed(&mut self, directed: bool) {
        self.directed = directed;
    }

    pub fn min_multi_recv(&self) -> usize {
        self.min_multi_recv
    }

    pub fn set_min_multi_recv(&mut self, v: usize) {
        self.min_multi_recv = v;
    }

    /// Posted receives (both kinds).
    pub fn posted(&self) -> usize {
        self.msg.len() + self.tagged.len()
    }

    /// Unexpected messages (both kinds).
    pub fn unexpected(&self) -> usize {
        self.msg_unexp.len() + self.tag_unexp.len()
    }

    /// Whether a waiting message came from a sender whose address was unknown when it arrived
    /// (no allocation: checked on every directed receive).
    pub fn has_unknown_sources(&self) -> bool {
        self.msg_unexp
            .iter()
            .chain(self.tag_unexp.iter())
            .any(|u| u.src == FI_ADDR_NOTAVAIL)
    }

    /// The senders (`origin`s) of waiting messages whose address was unknown when they arrived,
    /// among the messages `mine` accepts (a shared queue holds two providers' messages).
    pub fn unknown_origins(&self, mine: impl Fn(&U) -> bool) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .msg_unexp
            .iter()
            .chain(self.tag_unexp.iter())
            .filter(|u| u.src == FI_ADDR_NOTAVAIL && mine(&u.payload))
            .map(|u| u.origin)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Gives waiting messages from then-unknown senders the address `resolve(payload, origin)`
    /// now finds, so that a directed receive for the sender matches them (fabtests'
    /// unexpected_msg: a message arrives, then the application inserts its sender, then posts
    /// a receive directed at it).
    pub fn resolve_sources(&mut self, mut resolve: impl FnMut(&U, usize) -> Option<u64>) {
        for u in self.msg_unexp.iter_mut().chain(self.tag_unexp.iter_mut()) {
            if u.src == FI_ADDR_NOTAVAIL
                && let Some(a) = resolve(&u.payload, u.origin)
            {
                u.src = a;
            }
        }
    }

    /// Posts a receive. An unexpected message that matches is handed back to be delivered.
    #[inline(always)]
    pub fn post(&mut self, recv: Recv, tagged: bool) -> PostOutcome<U> {
        let directed = self.directed;
        // The scan borrows a copy of the filter, not the receive: a borrowed receive is kept
        // in memory, and then copied into the queue with loads that straddle its fields'
        // stores (a store-forwarding stall on every post, perf).
        let key = recv.key();
        let unexp = if tagged {
            &mut self.tag_unexp
        } else {
            &mut self.msg_unexp
        };
        // An empty queue (the common case when receives are posted ahead) is not scanned:
        // `VecDeque`'s iterator was two calls, some 45 instructions of every post (callgrind).
        let found = if unexp.is_empty() {
            None
        } else {
            unexp
                .iter()
                .position(|u| u.claimed_by.is_none() && key.matches(u.src, u.tag, tagged, directed))
        };
        match found.and_then(|i| take_at(unexp, i)) {
            Some(u) => {
                let mut recv = recv;
                // A multi-receive buffer stays posted for the messages after this one, less the
                // space this one takes.
                if recv.flags & FI_MULTI_RECV != 0 && !tagged {
                    let mut rest = recv.clone();
                    let min = self.min_multi_recv;
                    recv.released = rest.reserve(u.len, min);
                    if !recv.released {
                        self.msg.push_back(rest);
                    }
                }
                PostOutcome::Matched(recv, u)
            }
            None => {
                let q = if tagged {
                    &mut self.tagged
                } else {
                    &mut self.msg
                };
                q.push_back(recv);
                PostOutcome::Queued
            }
        }
    }

    /// The posted receives of a message's kind, and where the first that matches it is.
    #[inline(always)]
    fn find_posted(&mut self, src: u64, tag: u64, tagged: bool) -> Option<(&mut Posted, usize)> {
        let directed = self.directed;
        let q = if tagged {
            &mut self.tagged
        } else {
            &mut self.msg
        };
        let i = q.position(|r| r.matches(src, tag, tagged, directed))?;
        Some((q, i))
    }

    /// Finds the receive for an arriving message of `len` bytes. A multi-receive buffer stays
    /// posted with the message's space taken from it at once (the returned receive says where
    /// the message goes), so that a message matched next, by another thread or the other
    /// provider of a shared queue, never lands on the same bytes.
    pub fn match_incoming(&mut self, src: u64, tag: u64, tagged: bool, len: usize) -> Option<Recv> {
        let min = self.min_multi_recv;
        let (q, i) = self.find_posted(src, tag, tagged)?;
        if q[i].flags & FI_MULTI_RECV != 0 {
            let mut r = q[i].clone();
            r.released = q[i].reserve(len, min);
            if r.released {
                q.remove(i);
            }
            return Some(r);
        }
        q.take(i)
    }

    /// Like `match_incoming`, but the receive is handed to `place` where it sits in the queue
    /// instead of being moved out: a receive moved out and on through the provider's delivery
    /// was some 20 instructions of copying per small message (callgrind). `Some(true)`: `place`
    /// placed the message and the receive is gone; `Some(false)`: a receive matched but was
    /// left posted, because `place` declined it or it is a multi-receive buffer (`place` is
    /// not called): take it with `match_incoming`. `place` runs with the queue locked: it must
    /// not lock it again.
    #[inline(always)]
    pub fn match_incoming_with(
        &mut self,
        src: u64,
        tag: u64,
        tagged: bool,
        place: impl FnOnce(&Recv) -> bool,
    ) -> Option<bool> {
        let (q, i) = self.find_posted(src, tag, tagged)?;
        if q[i].flags & FI_MULTI_RECV != 0 || !place(&q[i]) {
            return Some(false);
        }
        if i == 0 {
            q.pop_front();
        } else {
            q.remove(i);
        }
        Some(true)
    }

    /// The next unexpected message for the still-posted multi-receive buffer `context` (after
    /// [`RxQueue::post`] matched one), with the buffer as it is now; the message's space is
    /// taken from the buffer.
    pub fn rematch_multi(&mut self, context: usize) -> Option<(Recv, Unexpected<U>)> {
        let directed = self.directed;
        let min = self.min_multi_recv;
        let pos = self
            .msg
            .iter()
            .position(|r| r.context == context && r.flags & FI_MULTI_RECV != 0)?;
        let i = self.msg_unexp.iter().position(|u| {
            u.claimed_by.is_none() && self.msg[pos].matches(u.src, u.tag, false, directed)
        })?;
        let u = self.msg_unexp.remove(i)?;
        let mut r = self.msg[pos].clone();
        r.released = self.msg[pos].reserve(u.len, min);
        if r.released {
            self.msg.remove(pos);
        }
        Some((r, u))
    }

    /// Parks an unexpected message.
    pub fn add_unexpected(&mut self, u: Unexpected<U>, tagged: bool) {
        self.add_unexpected_with(tagged, u, |_| {});
    }

    /// Parks an unexpected message written into its queue slot: `blank` is appended and `fill`
    /// completes it there. With a `blank` of constants, nothing built on the stack is copied
    /// in: a message handed over whole was copied with loads straddling its fields' stores (a
    /// store-forwarding stall per message, perf).
    #[inline(always)]
    pub fn add_unexpected_with(
        &mut self,
        tagged: bool,
        blank: Unexpected<U>,
        fill: impl FnOnce(&mut Unexpected<U>),
    ) {
        let q = if tagged {
            &mut self.tag_unexp
        } else {
            &mut self.msg_unexp
        };
        push_back_at_front_if_empty(q, blank);
        if let Some(u) = q.back_mut() {
            fill(u);
        }
    }

    /// fi_tagged(3) `FI_PEEK`: looks for an unexpected message matching `recv`. With `claim`
    /// it is reserved for a later `FI_CLAIM` receive with the same context; with `discard` it is
    /// dropped (and returned so the provider can release it).
    pub fn peek(
        &mut self,
        recv: &Recv,
        claim: bool,
        discard: bool,
    ) -> (Peek, Option<Unexpected<U>>) {
        let directed = self.directed;
        let Some(i) = self
            .tag_unexp
            .iter()
            .position(|u| u.claimed_by.is_none() && recv.matches(u.src, u.tag, true, directed))
        else {
            return (Peek::NoMatch, None);
        };
        let u = &mut self.tag_unexp[i];
        let found = Peek::Found {
            src: u.src,
            tag: u.tag,
            len: u.len,
            data: u.data,
            flags: u.flags,
        };
        if discard {
            return (found, self.tag_unexp.remove(i));
        }
        if claim {
            u.claimed_by = Some(recv.context);
        }
        (found, None)
    }

    /// fi_tagged(3) `FI_CLAIM`: takes the message a previous peek claimed for `context`.
    pub fn claim(&mut self, context: usize) -> Option<Unexpected<U>> {
        let i = self
            .tag_unexp
            .iter()
            .position(|u| u.claimed_by == Some(context))?;
        self.tag_unexp.remove(i)
    }

    /// fi_cancel(3): removes the receive posted with `context`.
    pub fn cancel(&mut self, context: usize) -> Option<(Recv, bool)> {
        if let Some(i) = self.msg.position(|r| r.context == context) {
            return self.msg.remove(i).map(|r| (r, false));
        }
        let i = self.tagged.position(|r| r.context == context)?;
        self.tagged.remove(i).map(|r| (r, true))
    }

    /// Removes every unexpected message matching `pred` (e.g. from a peer that died).
    pub fn drain_unexpected(
        &mut self,
        mut pred: impl FnMut(&Unexpected<U>) -> bool,
    ) -> Vec<Unexpected<U>> {
        let mut out = Vec::new();
        for q in [&mut self.msg_unexp, &mut self.tag_unexp] {
            let mut i = 0;
            while i < q.len() {
                if pred(&q[i]) {
                    out.extend(q.remove(i));
                } else {
                    i += 1;
                }
            }
        }
        out
    }
}

/// Whether a receive with `flags` may be posted under the queue's lock alone
/// (`SharedRxQueue::post_alone`): not a peek or claim, which look at what has arrived, nor a
/// multi-receive buffer, which may take several waiting messages. Posting each receive under
/// two locks, four locked instructions, was a third of a receiver's time in the library at
/// 8 bytes (shm).
pub fn posts_alone(flags: u64, tagged: bool) -> bool {
    let special = if tagged {
        FI_PEEK | FI_CLAIM
    } else {
        FI_MULTI_RECV
    };
    flags & special == 0
}

/// A receive queue two providers share (upstream's peer SRX): the efa endpoint and the shm
/// endpoint that carries its local peers match against the same posted receives. Lock order:
/// an endpoint's own lock first, then this one; nothing else is locked while this is held.
#[derive(Debug)]
///
/// Its lock is a `SpinLock`: every message and every posted receive takes it.
pub struct SharedRxQueue<U>(Arc<SpinLock<RxQueue<U>>>);

impl<U> Clone for SharedRxQueue<U> {
    fn clone(&self) -> Self {
        SharedRxQueue(self.0.clone())
    }
}

impl<U> SharedRxQueue<U> {
    pub fn new(directed: bool) -> SharedRxQueue<U> {
        Self::new_serial(directed, false)
    }

    /// A queue whose callers the application serializes when `serial` (`sys::lock`).
    pub fn new_serial(directed: bool, serial: bool) -> SharedRxQueue<U> {
        SharedRxQueue(Arc::new(SpinLock::new_serial(
            RxQueue::new(directed),
            serial,
        )))
    }

    pub fn lock(&self) -> SpinGuard<'_, RxQueue<U>> {
        self.0.lock()
    }

    /// Posts a receive under this queue's lock alone, as endpoints post the common receive
    /// (`posts_alone`): the queue's lock orders it against arrivals, which match under it, and
    /// the endpoint's lock is needed only to deliver a waiting message that matched. None when
    /// the endpoint's lock is needed first (a directed receive while waiting messages have
    /// sources still unknown); `AGAIN` when `max_posted` receives wait already. The receive is
    /// taken by value, not built by a closure: efa's post did not inline the closure, and built
    /// the receive in memory to copy it twice (a call to memcpy and a store-forwarding stall).
    #[inline(always)]
    pub fn post_alone(
        &self,
        recv: Recv,
        directed: bool,
        tagged: bool,
        max_posted: usize,
    ) -> Option<Result<PostOutcome<U>>> {
        let mut q = self.lock();
        if directed && q.has_unknown_sources() {
            return None;
        }
        if q.posted() >= max_posted {
            return Some(Err(Errno::AGAIN));
        }
        Some(Ok(q.post(recv, tagged)))
    }

    /// fi_cancel(3) of the receive posted with `context`: it leaves the queue and completes
    /// in `cq` with `FI_ECANCELED` (fi_endpoint(3)); `NOENT` if no such receive waits.
    pub fn cancel_into(&self, context: usize, cq: Option<&Cq>) -> Result<()> {
        let (recv, tagged) = self.lock().cancel(context).ok_or(Errno::NOENT)?;
        if let Some(cq) = cq {
            let mut e = CqErrEntry::new(
                recv.context,
                FI_RECV | if tagged { FI_TAGGED } else { FI_MSG },
                Errno::CANCELED,
            );
            e.tag = recv.tag;
            cq.push_err(e);
        }
        Ok(())
    }
}

/// The completion of an `FI_CLAIM | FI_DISCARD` receive: it carries the discarded message's
/// tag (fi_tagged(3); fabtests' rdm_tagged_peek waits for a completion with that tag).
pub fn complete_discard(cq: Option<&Cq>, context: usize, tag: u64) {
    if let Some(cq) = cq {
        cq.push(CqEntry {
            op_context: context,
            flags: FI_RECV | FI_TAGGED,
            tag,
            src_addr: FI_ADDR_NOTAVAIL,
            ..Default::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(n: usize) -> IoVec {
        IoVec::from_mut_slice(Box::leak(vec![0u8; n].into_boxed_slice()))
    }

    fn recv(src: u64, tag: u64, ignore: u64, ctx: usize, flags: u64) -> Recv {
        Recv::new(&[buf(64)], src, tag, ignore, ctx, flags)
    }

    fn unexp(src: u64, tag: u64, payload: u32) -> Unexpected<u32> {
        Unexpected {
            src,
            tag,
            len: 8,
            data: 0,
            flags: 0,
            claimed_by: None,
            origin: 0,
            payload,
        }
    }

    #[test]
    fn tags_ignore_bits_and_sources() {
        let mut q: RxQueue<u32> = RxQueue::new(true);
        assert!(matches!(
            q.post(recv(FI_ADDR_UNSPEC, 0x10, 0x0f, 1, 0), true),
            PostOutcome::Queued
        ));
        assert!(matches!(
            q.post(recv(7, 0x20, 0, 2, 0), true),
            PostOutcome::Queued
        ));
        assert!(q.match_incoming(3, 0x21, true, 8).is_none());
        assert_eq!(q.match_incoming(3, 0x1f, true, 8).unwrap().context, 1);
        assert!(
            q.match_incoming(3, 0x20, true, 8).is_none(),
            "directed receive must not match another source"
        );
        assert_eq!(q.match_incoming(7, 0x20, true, 8).unwrap().context, 2);
        // Untagged receives ignore tags; order is FIFO.
        q.post(recv(FI_ADDR_UNSPEC, 0, 0, 3, 0), false);
        q.post(recv(FI_ADDR_UNSPEC, 0, 0, 4, 0), false);
        assert_eq!(q.match_incoming(1, 99, false, 8).unwrap().context, 3);
        // Without FI_DIRECTED_RECV the source filter is not applied.
        let mut q: RxQueue<u32> = RxQueue::new(false);
        q.post(recv(7, 0, 0, 5, 0), false);
        assert_eq!(q.match_incoming(8, 0, false, 8).unwrap().context, 5);
    }

    #[test]
    fn unexpected_then_posted() {
        let mut q: RxQueue<u32> = RxQueue::new(true);
        q.add_unexpected(unexp(1, 5, 100), true);
        q.add_unexpected(unexp(2, 5, 200), true);
        match q.post(recv(2, 5, 0, 1, 0), true) {
            PostOutcome::Matched(r, u) => assert_eq!((r.context, u.payload), (1, 200)),
            PostOutcome::Queued => panic!("should match the second message"),
        }
        assert_eq!(q.unexpected(), 1);
    }

    #[test]
    fn a_plain_receive_posts_under_the_queues_lock_alone() {
        assert!(posts_alone(0, true) && posts_alone(FI_COMPLETION, false));
        assert!(posts_alone(FI_MULTI_RECV, true), "not a tagged flag");
        for (flags, tagged) in [(FI_PEEK, true), (FI_CLAIM, true), (FI_MULTI_RECV, false)] {
            assert!(!posts_alone(flags, tagged), "{flags:#x}");
        }
        let q: SharedRxQueue<u32> = SharedRxQueue::new(true);
        let post =
            |src, ctx, max| q.post_alone(recv(src, 5, 0, ctx, 0), src != FI_ADDR_UNSPEC, true, max);
        assert!(matches!(
            post(FI_ADDR_UNSPEC, 1, 2),
            Some(Ok(PostOutcome::Queued))
        ));
        assert!(matches!(
            post(FI_ADDR_UNSPEC, 2, 2),
            Some(Ok(PostOutcome::Queued))
        ));
        assert!(
            matches!(post(FI_ADDR_UNSPEC, 3, 2), Some(Err(Errno::AGAIN))),
            "two wait"
        );
        // A waiting message matches (the caller delivers it under its endpoint's lock).
        q.lock().add_unexpected(unexp(4, 5, 400), true);
        match post(4, 4, 8) {
            Some(Ok(PostOutcome::Matched(r, u))) => assert_eq!((r.context, u.payload), (4, 400)),
            _ => panic!("should match the waiting message"),
        }
        // A directed receive waits for the endpoint to learn unknown sources first.
        q.lock()
            .add_unexpected(unexp(FI_ADDR_NOTAVAIL, 5, 500), true);
        assert!(post(4, 5, 8).is_none());
        assert!(matches!(
            post(FI_ADDR_UNSPEC, 6, 8),
            Some(Ok(PostOutcome::Matched(..)))
        ));
    }

    #[test]
    fn peek_claim_discard() {
        let mut q: RxQueue<u32> = RxQueue::new(false);
        assert_eq!(
            q.peek(&recv(FI_ADDR_UNSPEC, 9, 0, 1, 0), false, false).0,
            Peek::NoMatch
        );
        q.add_unexpected(unexp(1, 9, 100), true);
        q.add_unexpected(unexp(1, 9, 200), true);
        assert!(matches!(
            q.peek(&recv(FI_ADDR_UNSPEC, 9, 0, 1, 0), false, false).0,
            Peek::Found { tag: 9, .. }
        ));
        // Claim the first; a plain receive then gets the second, the claim gets the first.
        q.peek(&recv(FI_ADDR_UNSPEC, 9, 0, 42, 0), true, false);
        match q.post(recv(FI_ADDR_UNSPEC, 9, 0, 2, 0), true) {
            PostOutcome::Matched(_, u) => assert_eq!(u.payload, 200),
            PostOutcome::Queued => panic!(),
        }
        assert_eq!(q.claim(42).unwrap().payload, 100);
        assert!(q.claim(42).is_none());
        q.add_unexpected(unexp(1, 9, 300), true);
        let (p, dropped) = q.peek(&recv(FI_ADDR_UNSPEC, 9, 0, 3, 0), false, true);
        assert!(matches!(p, Peek::Found { .. }));
        assert_eq!(dropped.unwrap().payload, 300);
        assert_eq!(q.unexpected(), 0);
    }

    #[test]
    fn a_receive_is_placed_where_it_sits_and_then_leaves() {
        let mut q: RxQueue<u32> = RxQueue::new(false);
        q.post(recv(FI_ADDR_UNSPEC, 1, 0, 1, 0), true);
        q.post(recv(FI_ADDR_UNSPEC, 2, 0, 2, 0), true);
        // The second receive matches: placed from its slot, the first stays posted.
        let mut seen = vec![];
        let placed = q.match_incoming_with(7, 2, true, |r| {
            seen.push(r.context);
            true
        });
        assert_eq!((placed, seen.as_slice()), (Some(true), &[2][..]));
        assert_eq!(q.posted(), 1);
        // Declined: the receive stays posted, for `match_incoming` to take.
        assert_eq!(q.match_incoming_with(7, 1, true, |_| false), Some(false));
        assert_eq!(q.posted(), 1);
        assert_eq!(q.match_incoming(7, 1, true, 8).map(|r| r.context), Some(1));
        assert_eq!(q.match_incoming_with(7, 1, true, |_| true), None);
        // A multi-receive buffer is never handed over in place: its space is taken by
        // `match_incoming`.
        q.set_min_multi_recv(16);
        q.post(recv(FI_ADDR_UNSPEC, 0, 0, 3, FI_MULTI_RECV), false);
        let placed = q.match_incoming_with(7, 0, false, |_| panic!("placed in place"));
        assert_eq!(placed, Some(false));
        assert_eq!(
            q.match_incoming(7, 0, false, 8).map(|r| r.consumed),
            Some(0)
        );
        assert_eq!(
            q.match_incoming(7, 0, false, 8).map(|r| r.consumed),
            Some(8)
        );
    }

    #[test]
    fn posted_receives_keep_their_order_as_the_ring_wraps_and_grows() {
        let mut q: RxQueue<u32> = RxQueue::new(false);
        let mut want: std::collections::VecDeque<usize> = Default::default();
        let mut next = 0;
        let mut post = |q: &mut RxQueue<u32>, want: &mut std::collections::VecDeque<usize>| {
            next += 1;
            q.post(recv(FI_ADDR_UNSPEC, next as u64 % 3, 0, next, 0), true);
            want.push_back(next);
        };
        // Wrap around an 8-slot ring, then grow it while it is wrapped.
        for _ in 0..6 {
            post(&mut q, &mut want);
        }
        for _ in 0..5 {
            let r = q.match_incoming(1, want[0] as u64 % 3, true, 8).unwrap();
            assert_eq!(Some(r.context), want.pop_front());
        }
        for _ in 0..20 {
            post(&mut q, &mut want);
        }
        // Out of the middle: a tag whose first receive is not the first one.
        let (t, i) = (0..3u64)
            .filter_map(|t| Some((t, want.iter().position(|c| *c as u64 % 3 == t)?)))
            .find(|(_, i)| *i > 0)
            .unwrap();
        let r = q.match_incoming(1, t, true, 8).unwrap();
        assert_eq!(Some(r.context), want.remove(i));
        let c = want[want.len() / 2];
        assert_eq!(q.cancel(c).map(|(r, _)| r.context), Some(c));
        want.retain(|x| *x != c);
        // Everything left comes out in order, whatever its tag; then the ring is empty.
        assert_eq!(q.posted(), want.len());
        while let Some(w) = want.pop_front() {
            let r = q.match_incoming(1, w as u64 % 3, true, 8).unwrap();
            assert_eq!(r.context, w);
        }
        assert_eq!(q.posted(), 0);
        assert!(q.match_incoming(1, 0, true, 8).is_none());
        post(&mut q, &mut want);
        assert_eq!(
            q.match_incoming(1, next as u64 % 3, true, 8)
                .map(|r| r.context),
            Some(next)
        );
    }

    #[test]
    fn place_and_first_addr_agree_with_target() {
        let (a, b) = (buf(16), buf(32));
        let mut r = Recv::new(&[a, b], FI_ADDR_UNSPEC, 0, 0, 1, 0);
        let data: Vec<u8> = (1..=24).collect();
        for consumed in [0, 5, 16, 20, 48] {
            r.consumed = consumed;
            let t = r.target();
            assert_eq!(
                r.first_addr(),
                t.first().map_or(0, IoVec::addr),
                "at {consumed}"
            );
            // The bytes land where `target` begins, and as many as it holds.
            let room: usize = t.iter().map(IoVec::len).sum();
            assert_eq!(r.place(&data), data.len().min(room), "at {consumed}");
            let mut back = vec![0u8; data.len().min(room)];
            crate::sys::mem::gather(&t, 0, &mut back);
            assert_eq!(back, data[..back.len()], "at {consumed}");
        }
    }

    #[test]
    fn multi_recv_and_cancel() {
        let mut q: RxQueue<u32> = RxQueue::new(false);
        q.set_min_multi_recv(16);
        q.post(recv(FI_ADDR_UNSPEC, 0, 0, 1, FI_MULTI_RECV), false);
        let r = q.match_incoming(1, 0, false, 40).unwrap();
        assert_eq!(r.target().iter().map(IoVec::len).sum::<usize>(), 64);
        assert!(!r.released);
        // The space is taken at the match: the next message goes after it.
        let r = q.match_incoming(1, 0, false, 10).unwrap();
        assert_eq!(r.consumed, 40);
        assert_eq!(r.target().iter().map(IoVec::len).sum::<usize>(), 24);
        assert!(r.released, "14 bytes left < 16: released");
        assert!(q.match_incoming(1, 0, false, 8).is_none());
        q.post(recv(FI_ADDR_UNSPEC, 0, 0, 9, 0), true);
        assert_eq!(q.cancel(9).map(|(r, t)| (r.context, t)), Some((9, true)));
        assert!(q.cancel(9).is_none());
    }

    #[test]
    fn multi_recv_takes_waiting_messages_one_after_another() {
        let mut q: RxQueue<u32> = RxQueue::new(false);
        q.set_min_multi_recv(16);
        for p in [1, 2, 3] {
            let mut u = unexp(1, 0, p);
            u.len = 20;
            q.add_unexpected(u, false);
        }
        let PostOutcome::Matched(r, u) =
            q.post(recv(FI_ADDR_UNSPEC, 0, 0, 7, FI_MULTI_RECV), false)
        else {
            panic!("a waiting message must match");
        };
        assert_eq!((r.consumed, r.released, u.payload), (0, false, 1));
        let m = q.rematch_multi(7).unwrap();
        assert_eq!((m.0.consumed, m.0.released, m.1.payload), (20, false, 2));
        let m = q.rematch_multi(7).unwrap();
        assert_eq!((m.0.consumed, m.0.released, m.1.payload), (40, true, 3));
        assert!(q.rematch_multi(7).is_none());
        assert_eq!(q.posted(), 0);
    }
}
