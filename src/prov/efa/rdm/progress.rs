//! The RDM endpoint and its device: packets handed to it (queued while it or the peer cannot
//! take them; bulk data bounded by `BULK_SEND_BYTES`), the progress loop that polls it, send
//! completions (an RNR sends again after a back-off, efa-reference §6), and the receive
//! buffers kept posted.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::ep::*;
use super::quiet::{DEVICE_QUIET, QUIET_POLL_PERIOD};
use crate::core::Errno;
use crate::prov::efa::device::{self, Completion, DevError, HEADROOM, MIN_MTU};
use crate::prov::efa::srd::wire::ACK_TRAILER;
use crate::prov::efa::{rnr_backoff_us, rnr_jitter_us};
use crate::prov::shm::ShmEndpoint;
use crate::sys::mem::IoVec;
use crate::util::Progress;
use crate::util::provider::Idle;

/// Device completions handled per progress call.
pub(super) const POLL_BATCH: usize = 64;

/// Bytes of packets handed to the device and not yet completed before bulk data (CTSDATA of
/// long messages and writes, read responses) waits for completions (as a packet count, at
/// least two SRD windows, at most 1,024). Without a bound every granted window became packets
/// at once — 64 concurrent 1 MiB writes are 1,024 buffers of 64 KiB on loopback, each filled
/// long before the socket took it, so the copies and checksums ran from memory instead of the
/// cache (1 MiB writes 2.9 → 3.2–3.6 GB/s, reads 1.6 → 2.6–3.3 GB/s). Upstream efa bounds
/// outstanding sends by the device's send queue the same way (efa-reference §6).
const BULK_SEND_BYTES: usize = 8 << 20;

/// Packets of at most this many bytes (past `HEADROOM`) take buffers of this size, not of the
/// MTU: control packets, and requests with up to the inject size of data. On loopback the
/// MTU is 64 KiB, and a stream of 8-byte injected writes (both ways, as fi_rma_bw) keeps
/// more packets queued than `POOL` holds: each packet past it was a fresh 64 KiB buffer,
/// zeroed and faulted in page by page (half the sender's time in `perf`, 50-100 us a write).
const SMALL_PKT: usize = crate::prov::efa::INJECT_SIZE + 512;
/// Spare buffers of our MTU kept for reuse.
const POOL: usize = 256;
/// Spare small buffers kept for reuse (4.5 MiB at most).
const SMALL_POOL: usize = 1024;

fn bulk_send_cap(mtu: usize) -> usize {
    (BULK_SEND_BYTES / mtu.max(1)).clamp(128, 1024)
}

/// A spare buffer from `pool` (else a new one), `len` bytes long.
#[inline]
fn pooled(pool: &mut Vec<Vec<u8>>, len: usize) -> Vec<u8> {
    let mut b = pool.pop().unwrap_or_default();
    b.resize(len, 0);
    b
}

/// Which spare pool a buffer of capacity `cap` goes back to, on a device of MTU `mtu`.
#[derive(Debug, PartialEq, Eq)]
enum Pool {
    Small,
    Mtu,
}

/// Small buffers are taken for small packets where the MTU is larger than they are.
fn small_bufs(mtu: usize) -> bool {
    SMALL_PKT < mtu
}

fn pool_for(cap: usize, mtu: usize) -> Option<Pool> {
    // None, or one made for a header alone (`Device::post_send_head`): too small to reuse.
    if cap < HEADROOM + MIN_MTU {
        return None;
    }
    // A small buffer goes back to `small_pool`, also one `buf_for` took for a peer on a path
    // larger than our MTU (this host's own addresses over a 1,500-byte link: the UDP device's
    // `LocalPath`). Sent back to `pool` instead, every small send there allocated and zeroed
    // a new one (8-byte ping-pong over eth0, callgrind: 5,000 of 14,000 instructions an
    // iteration). The MTU buffers of such a link are no larger than its MTU and go back to
    // `pool`, or `buf_to` would allocate anew.
    if cap <= HEADROOM + SMALL_PKT && (small_bufs(mtu) || cap > HEADROOM + mtu) {
        Some(Pool::Small)
    } else {
        Some(Pool::Mtu)
    }
}

// ---- packets out ----

impl Inner {
    /// A buffer for a control packet (CTS, receipt, EOR, handshake, error): all of them are
    /// far below `SMALL_PKT`.
    pub fn buf(&mut self) -> Vec<u8> {
        if self.small_bufs() {
            self.small_buf()
        } else {
            self.rx_buf()
        }
    }

    /// A buffer of our MTU, as the device receives into.
    pub fn rx_buf(&mut self) -> Vec<u8> {
        pooled(&mut self.pool, HEADROOM + self.mtu)
    }

    /// A send buffer for a packet to `peer`, no longer than the largest packet it receives
    /// (`peer_pkt`). The transport appends an ack trailer to a datagram whose buffer has room
    /// for it (srd::wire, DATA_ACK): a buffer of our MTU would let a full packet to a peer with
    /// a smaller one outgrow what the peer receives.
    #[inline]
    pub fn buf_to(&mut self, peer: usize) -> Vec<u8> {
        let len = HEADROOM + self.peer_pkt(peer);
        pooled(&mut self.pool, len)
    }

    /// `buf_to` for a packet known to take `len` bytes: a small buffer when it fits one with
    /// room for an ack trailer.
    pub fn buf_for(&mut self, peer: usize, len: usize) -> Vec<u8> {
        if len + ACK_TRAILER <= SMALL_PKT && SMALL_PKT < self.peer_pkt(peer) {
            self.small_buf()
        } else {
            self.buf_to(peer)
        }
    }

    /// Small buffers exist only where the MTU is larger than they are.
    fn small_bufs(&self) -> bool {
        small_bufs(self.mtu)
    }

    fn small_buf(&mut self) -> Vec<u8> {
        pooled(&mut self.small_pool, HEADROOM + SMALL_PKT)
    }

    /// Packets handed to the device and not completed, and those queued for it.
    #[inline]
    pub fn packets_out(&self) -> usize {
        self.sent.len() + self.queued.len()
    }

    /// Whether bulk data must wait for completions (`BULK_SEND_BYTES`), counted in packets
    /// of our MTU.
    pub fn bulk_full(&self) -> bool {
        self.bulk_full_for(self.mtu)
    }

    /// `bulk_full` for a sender whose packets are `pkt` bytes (a peer that receives less
    /// than our MTU: `peer_pkt`).
    #[inline]
    pub fn bulk_full_for(&self, pkt: usize) -> bool {
        self.packets_out() >= bulk_send_cap(pkt)
    }

    /// A bulk sender that is not the one being resumed must queue behind those parked.
    #[inline]
    pub fn must_queue(&self) -> bool {
        !self.resuming && !self.parked.is_empty()
    }

    pub fn park(&mut self, p: Parked) {
        if !self.parked.contains(&p) {
            self.parked.push_back(p);
        }
    }

    #[inline]
    pub fn recycle(&mut self, b: Vec<u8>) {
        match pool_for(b.capacity(), self.mtu) {
            Some(Pool::Small) if self.small_pool.len() < SMALL_POOL => self.small_pool.push(b),
            Some(Pool::Mtu) if self.pool.len() < POOL => self.pool.push(b),
            _ => {}
        }
    }

    /// Posts a packet (`buf[HEADROOM..HEADROOM + len]`) to a peer, or queues it if the device
    /// or the peer cannot take it now.
    pub fn send_pkt(
        &mut self,
        peer: usize,
        buf: Vec<u8>,
        len: usize,
        owner: Owner,
        payload: usize,
    ) {
        self.send_pkt_tail(peer, buf, len, IoVec::EMPTY, owner, payload);
    }

    /// `send_pkt` of a packet whose payload ends in `tail`, application memory sent from where
    /// it lies (`Txe::tail`).
    pub fn send_pkt_tail(
        &mut self,
        peer: usize,
        buf: Vec<u8>,
        len: usize,
        tail: IoVec,
        owner: Owner,
        payload: usize,
    ) {
        self.peers[peer].contacted = true;
        // No room past what the peer receives (`buf_to`): a trailer the transport adds must
        // not make the datagram larger than that.
        let mut buf = buf;
        buf.truncate(HEADROOM + len.max(self.peer_pkt(peer)));
        let q = Queued {
            peer,
            buf,
            len,
            sent: Sent {
                owner,
                peer,
                payload,
                len,
                tail,
                rnr_again: false,
            },
        };
        if !self.queued.is_empty() || self.peers[peer].backoff_until.is_some() {
            self.queued.push_back(q);
            return;
        }
        self.post_queued(q);
    }

    fn post_queued(&mut self, q: Queued) {
        let dest = self.peers[q.peer].addr;
        let (len, tail) = (q.len, q.sent.tail);
        let wr = self.sent.insert(q.sent);
        if let Err((e, buf)) = self.dev.post_send(dest, q.buf, len, tail, wr) {
            self.refused(wr, e, buf);
        }
    }

    /// `send_pkt_tail` of a packet whose bytes before `tail` are a header of `head_len`
    /// bytes, which `write` writes: where the device keeps it (`Device::post_send_head`), so
    /// that the bulk of a transfer takes no buffer per packet, unless it must wait in the queue.
    pub fn send_head_tail(
        &mut self,
        peer: usize,
        head_len: usize,
        tail: IoVec,
        owner: Owner,
        payload: usize,
        write: &mut dyn FnMut(&mut [u8]),
    ) {
        if !self.queued.is_empty() || self.peers[peer].backoff_until.is_some() {
            let mut b = self.buf_to(peer);
            write(&mut b[HEADROOM..HEADROOM + head_len]);
            self.send_pkt_tail(peer, b, head_len, tail, owner, payload);
            return;
        }
        self.peers[peer].contacted = true;
        let wr = self.sent.insert(Sent {
            owner,
            peer,
            payload,
            len: head_len,
            tail,
            rnr_again: false,
        });
        let dest = self.peers[peer].addr;
        if let Err(e) = self.dev.post_send_head(dest, head_len, tail, wr, write) {
            let mut b = self.buf_to(peer);
            write(&mut b[HEADROOM..HEADROOM + head_len]);
            self.refused(wr, e, b);
        }
    }

    /// The device refused packet `wr` (its record says which peer and how long): it goes back
    /// to the front of the queue to wait for room (`AGAIN`), or fails.
    fn refused(&mut self, wr: u64, e: Errno, buf: Vec<u8>) {
        // The caller inserted the record just before posting: it is there.
        let Some(sent) = self.sent.remove(wr) else {
            self.recycle(buf);
            return;
        };
        if e == Errno::AGAIN {
            self.queued.push_front(Queued {
                peer: sent.peer,
                buf,
                len: sent.len,
                sent,
            });
        } else {
            self.pkt_failed(sent, e, 0);
            self.recycle(buf);
        }
    }

    /// Retries queued packets (after device completions freed room or a back-off ended), in
    /// order. The device's refusal stops it with the rest left where they are: moving the
    /// whole queue on every call cost a stream of injected 8-byte writes, whose queue holds
    /// hundreds of packets, most of its time in `perf` (a quadratic copy).
    fn flush_queued(&mut self) {
        let now = Instant::now();
        // Packets of peers still backing off, kept in order ahead of those not yet tried.
        let mut waiting = VecDeque::new();
        while let Some(q) = self.queued.pop_front() {
            let peer = &mut self.peers[q.peer];
            if peer.dead {
                let sent = q.sent;
                self.pkt_failed(sent, Errno::CONNABORTED, 13);
                continue;
            }
            if let Some(t) = peer.backoff_until {
                if t > now {
                    waiting.push_back(q);
                    continue;
                }
                peer.backoff_until = None;
            }
            let dest = peer.addr;
            let tail = q.sent.tail;
            let wr = self.sent.insert(q.sent);
            if let Err((e, buf)) = self.dev.post_send(dest, q.buf, q.len, tail, wr) {
                let sent = self.sent.remove(wr).unwrap_or(Sent {
                    owner: Owner::Ctrl,
                    peer: q.peer,
                    payload: 0,
                    len: q.len,
                    tail,
                    rnr_again: false,
                });
                if e == Errno::AGAIN {
                    self.queued.push_front(Queued {
                        peer: q.peer,
                        buf,
                        len: q.len,
                        sent,
                    });
                    break;
                }
                self.pkt_failed(sent, e, 0);
            }
        }
        while let Some(q) = waiting.pop_back() {
            self.queued.push_front(q);
        }
    }

    /// A packet could not be delivered.
    fn pkt_failed(&mut self, sent: Sent, err: Errno, prov_errno: i32) {
        match sent.owner {
            Owner::Tx(id) => {
                // This packet is done with, delivered or not.
                if let Some(t) = self.txes.get_mut(id) {
                    t.in_flight = t.in_flight.saturating_sub(1);
                }
                self.fail_tx(id, err, prov_errno)
            }
            Owner::Rx(id) => {
                self.rxes.remove(id);
            }
            Owner::Ctrl => {}
        }
    }
}

// ---- the device loop ----

impl Inner {
    /// Nothing of ours is in the device, it has given nothing for `DEVICE_QUIET`, and the
    /// watcher has not seen it readable (or, unwatched, it was looked at less than
    /// `QUIET_POLL_PERIOD` ago): this progress call may skip it. (Most calls skip before the
    /// lock: `Quiet::skip`.)
    fn device_quiet(&mut self) -> bool {
        if !self.dev_idle
            || !self.txes.is_empty()
            || !self.rxes.is_empty()
            || !self.queued.is_empty()
        {
            return false;
        }
        if self.watching {
            if !self.quiet.take_input() {
                return true;
            }
            // Its watch ended: watched again when the lock is released, if still quiet.
            self.watching = false;
            return false;
        }
        crate::sys::os::monotonic_ns().saturating_sub(self.dev_polled)
            < QUIET_POLL_PERIOD.as_nanos() as u64
    }
}

impl RdmEndpoint {
    /// After a post. An operation whose packets are all handed to the device (an eager or
    /// medium message or write) skips the device poll: a poll is a system call (half a
    /// microsecond on loopback) that would delay its packets, which leave when the lock is
    /// released (`Locked`'s flush), and what it finds waits for the next CQ read anyway
    /// (fi_pingpong's 8-byte half round trip over SRD: 8.6 -> 6.8 us). A bulk operation, which
    /// waits for its peer's answers (CTS, read data, handshake), polls: taking them while the
    /// application is still posting keeps data flowing (1 MiB writes ran 20 % slower without).
    pub(super) fn posted(&self, g: &mut Inner, id: u64) {
        if g.txes.get(id).is_none_or(|t| t.state == TxState::Sending) {
            Self::replenish_rx(g);
        } else {
            self.progress_locked(g);
        }
    }

    /// Keeps `rx_target` receive buffers posted.
    fn replenish_rx(g: &mut Inner) {
        while g.posted_rx < g.rx_target {
            let b = g.rx_buf();
            match g.dev.post_recv(b, 0) {
                Ok(()) => g.posted_rx += 1,
                Err((_, b)) => {
                    g.recycle(b);
                    break;
                }
            }
        }
    }

    /// Keeps receive buffers posted, polls the device, handles what completed.
    pub(super) fn progress_locked(&self, g: &mut Inner) {
        if !g.enabled {
            return;
        }
        // Arrivals report their sender's index as the AV has it now.
        g.sync_av();
        Self::replenish_rx(g);
        // One reading of the clock for a device poll and what it hands up, the device's
        // included. A poll after a full batch reads it again: handling a batch of bulk data
        // (copies of up to 64 KiB each) takes long enough to age the transport's round-trip
        // samples and timers.
        let mut now = crate::sys::os::monotonic_ns();
        g.dev_polled = now;
        g.polled = true;
        g.dev_idle = now.saturating_sub(g.dev_heard) >= DEVICE_QUIET.as_nanos() as u64;
        let mut received = 0;
        for pass in 0..4 {
            if pass > 0 {
                now = crate::sys::os::monotonic_ns();
            }
            let mut comps = core::mem::take(&mut g.comps);
            comps.clear();
            g.plan_placements();
            let place = core::mem::take(&mut g.placing.list);
            g.dev.poll_placed(&mut comps, POLL_BATCH, &place, now);
            g.placing.list = place;
            let n = comps.len();
            if n > 0 {
                g.dev_heard = now;
                g.dev_idle = false;
            }
            // The send records these completions end, asked for before the loop reaches them:
            // each was written when its packet went out, and a bulk transfer's copies have
            // pushed it out of the caches since (a miss per send completion, `perf annotate`).
            for c in comps.iter() {
                if let Completion::Send { wr_id, .. } = c {
                    g.sent.prefetch(*wr_id);
                }
            }
            // The latest run of datagrams (UDP GRO) the device handed up.
            let mut run = Vec::new();
            // By reference: a source address read from the completion where the device wrote
            // it, not from a copy this loop just stored field by field (a wider load of fresh
            // narrower stores waits for them to reach the cache).
            for c in comps.iter_mut() {
                match c {
                    Completion::Recv {
                        buf, off, len, src, ..
                    } => {
                        let buf = core::mem::take(buf);
                        g.posted_rx -= 1;
                        received += 1;
                        self.handle_packet(g, src, &buf[*off..*off + *len]);
                        // Repost the same buffer at once.
                        match g.dev.post_recv(buf, 0) {
                            Ok(()) => g.posted_rx += 1,
                            Err((_, b)) => g.recycle(b),
                        }
                    }
                    Completion::Placed {
                        buf, token, src, ..
                    } => {
                        let buf = core::mem::take(buf);
                        g.posted_rx -= 1;
                        received += 1;
                        self.placed(g, *token, *src);
                        match g.dev.post_recv(buf, 0) {
                            Ok(()) => g.posted_rx += 1,
                            Err((_, b)) => g.recycle(b),
                        }
                    }
                    Completion::Run { buf } => {
                        device::next_run(&mut *g.dev, &mut run, core::mem::take(buf))
                    }
                    Completion::RecvInPieces { pieces, src } => {
                        received += 1;
                        self.handle_in_pieces(g, src, &mut run, *pieces);
                    }
                    Completion::RecvInRun { off, len, src } => {
                        received += 1;
                        if let Some(pkt) = run.get(*off..*off + *len) {
                            self.handle_packet(g, src, pkt);
                        }
                    }
                    Completion::Send { wr_id, status, buf } => {
                        self.send_done(g, *wr_id, *status, core::mem::take(buf))
                    }
                    Completion::Rdma { wr_id, status } => self.rdma_done(g, *wr_id, *status),
                    Completion::WriteData {
                        buf,
                        len,
                        data,
                        src,
                        ..
                    } => {
                        let buf = core::mem::take(buf);
                        g.posted_rx -= 1;
                        g.write_data_arrived(*src, *len, *data);
                        match g.dev.post_recv(buf, 0) {
                            Ok(()) => g.posted_rx += 1,
                            Err((_, b)) => g.recycle(b),
                        }
                    }
                }
            }
            comps.clear();
            if !run.is_empty() {
                g.dev.return_run(run);
            }
            // Put back without a drop when what `take` left in its place still owns no memory
            // (always, unless a pass nested in this one used it): the drop of a
            // `Vec<Completion>` is a call, 23 instructions a pass.
            let left = core::mem::replace(&mut g.comps, comps);
            if left.capacity() == 0 {
                core::mem::forget(left);
            } else {
                drop(left);
            }
            if !g.rdma_waiting.is_empty() {
                self.post_waiting_rdma(g);
            }
            if !g.queued.is_empty() {
                g.flush_queued();
            }
            if n < POLL_BATCH {
                break;
            }
        }
        // Completions freed room: parked bulk senders go on in the order they came; one that
        // fills the room again keeps its place at the front, and the rest wait behind it (its
        // room may be smaller than `bulk_full`'s: a peer with larger packets).
        while !g.bulk_full()
            && let Some(p) = g.parked.pop_front()
        {
            g.resuming = true;
            match p {
                Parked::Tx(id) => g.send_window(id),
                Parked::Read(id) => self.send_read_data(g, id),
            }
            g.resuming = false;
            if g.parked.back() == Some(&p) {
                g.parked.pop_back();
                g.parked.push_front(p);
                break;
            }
        }
        // Half the posted buffers filled in one pass: the next burst may find none (the
        // transport then refuses datagrams with RNR and the sender backs off). Post more.
        if received * 2 >= g.rx_target && g.rx_target < g.rx_max {
            g.rx_target = (g.rx_target * 2).min(g.rx_max);
        }
    }

    fn send_done(
        &self,
        g: &mut Inner,
        wr_id: u64,
        status: core::result::Result<(), DevError>,
        buf: Vec<u8>,
    ) {
        let Some(sent) = g.sent.remove(wr_id) else {
            g.recycle(buf);
            return;
        };
        match status {
            Ok(()) => {
                g.recycle(buf);
                if sent.rnr_again {
                    // A packet sent again after an RNR got through: the peer has room again,
                    // and its next back-off starts from the shortest wait.
                    let peer = &mut g.peers[sent.peer];
                    peer.backoff_us = 0;
                    peer.backoff_until = None;
                }
                match sent.owner {
                    Owner::Tx(id) => {
                        if let Some(t) = g.txes.get_mut(id) {
                            t.in_flight = t.in_flight.saturating_sub(1);
                            t.done += sent.payload;
                            if t.awaits_packets() {
                                return;
                            }
                        }
                        g.maybe_complete_tx(id);
                    }
                    Owner::Rx(id) => {
                        // A read we answered: done once everything went out.
                        if let Some(r) = g.rxes.get(id)
                            && let RxKind::Read { sent: s, .. } = r.kind
                            && s >= r.total
                        {
                            g.rxes.remove(id);
                        }
                    }
                    Owner::Ctrl => {}
                }
            }
            Err(DevError::Rnr) if g.rm_enabled => {
                // efa-reference §6: resource management enabled, so the packet is queued to go
                // again. Its first RNR sends it again at once; a second one puts the peer in
                // back-off, for a wait that starts at 40-120 µs (or FI_EFA_TIMEOUT_INTERVAL)
                // and doubles each time the peer enters back-off again, until a packet sent
                // again completes. RNRs of packets already in flight when the peer entered
                // back-off only restart the wait: doubling on each of them made a window
                // refused at once wait 40 µs * 2^(its size) (0.3 s for 14 packets).
                let p = sent.peer;
                let mut sent = sent;
                if core::mem::replace(&mut sent.rnr_again, true) {
                    let now = Instant::now();
                    let peer = &mut g.peers[p];
                    if peer.backoff_until.is_none_or(|t| t <= now) {
                        peer.backoff_us = rnr_backoff_us(
                            peer.backoff_us,
                            g.knobs.timeout_interval_us,
                            g.knobs.max_timeout_us,
                            rnr_jitter_us(crate::sys::random::u64()),
                        );
                    }
                    peer.backoff_until =
                        Some(now + std::time::Duration::from_micros(peer.backoff_us));
                }
                let len = sent.len;
                g.queued.push_back(Queued {
                    peer: p,
                    buf,
                    len,
                    sent,
                });
            }
            Err(e) => {
                g.recycle(buf);
                let p = sent.peer;
                if e == DevError::Unreachable {
                    self.peer_died(g, p);
                }
                g.pkt_failed(sent, e.errno(), e.prov_errno());
            }
        }
    }
}

impl RdmEndpoint {
    /// Progress: shm's by `shm_step`, then the device's unless it is left alone (`Quiet`).
    /// `hinted`: the idle hint has just let this call through (it counted the poll).
    #[inline(always)]
    fn progress_with(&self, shm_step: impl FnOnce(&ShmEndpoint), hinted: bool) {
        if let Some(shm) = self.shm() {
            shm_step(shm);
            let skip = if hinted {
                self.quiet.skip_again()
            } else {
                self.quiet.skip()
            };
            if skip {
                return;
            }
        }
        self.progress_device();
    }

    /// Progress of the device, unless another thread is at it or it is quiet.
    fn progress_device(&self) {
        // Another thread holding the lock is progressing already.
        let Ok(g) = self.inner.try_lock() else {
            return;
        };
        // Through `Locked`, so what this pass answered leaves when it ends.
        let mut g = Locked(g);
        if self.shm().is_some() && g.device_quiet() {
            return;
        }
        self.progress_locked(&mut g);
    }
}

impl Progress for RdmEndpoint {
    fn progress(&self) {
        self.progress_with(|shm| shm.progress(), false);
    }

    /// Our idle hint (`Quiet`) has just said there is work, and most often it is shm's: shm
    /// is progressed without asking its own hint again (a fifth of what progress cost here,
    /// in an 8-byte ping-pong through shm).
    fn progress_busy(&self) {
        self.progress_with(|shm| shm.progress_busy(), true);
    }

    fn idle_hint(&self) -> Option<Arc<dyn Idle>> {
        Some(self.quiet.clone())
    }

    /// Asked right before a wait on the fd (CQ and counter waits, `fi_trywait`): the device
    /// arms its timer then, so that a retransmission or the end of a back-off wakes the waiter.
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        let fd = self.wait_fd?;
        if let Ok(mut g) = self.inner.try_lock() {
            g.dev.prepare_wait();
        }
        Some(fd)
    }
    /// The device's fd does not tell of what arrives through shm, which has none.
    fn wait_fd_complete(&self) -> bool {
        self.shm().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_go_back_to_the_pool_they_are_taken_from() {
        let small = HEADROOM + SMALL_PKT;
        // Loopback: a 64 KiB MTU, small buffers for small packets.
        let lo = 65_000;
        assert_eq!(pool_for(small, lo), Some(Pool::Small));
        assert_eq!(pool_for(HEADROOM + lo, lo), Some(Pool::Mtu));
        // A 1,500-byte link: MTU buffers go back to `pool`; small ones, taken by `buf_for`
        // for this host's own addresses (a larger path), to `small_pool`.
        for mtu in [1_400, 1_500, 4_000] {
            assert_eq!(pool_for(HEADROOM + mtu, mtu), Some(Pool::Mtu), "mtu {mtu}");
            assert_eq!(pool_for(small, mtu), Some(Pool::Small), "mtu {mtu}");
            // A buffer that grew to the larger path's packets.
            assert_eq!(pool_for(HEADROOM + lo, mtu), Some(Pool::Mtu), "mtu {mtu}");
        }
        // A header alone is not kept.
        assert_eq!(pool_for(HEADROOM + 64, 1_500), None);
    }
}
