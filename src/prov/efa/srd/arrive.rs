//! What an arriving datagram does to the transport (`Transport::handle_datagram`): checked
//! (checksum, QKEY; an unknown sender may be a peer learning its QKEY), then by kind — data
//! delivered the first time and owed an acknowledgement (refused with RNR when no receive
//! buffer is posted), acknowledgements that complete sends, time the round trip, find losses
//! and grow the window, and RNR that backs a send off or fails it (efa-reference §6).

use std::hash::Hash;

use super::wire::{self, ACK_TRAILER, DATA_HEADER, Repr, SACK_BITS, Sack};
use super::{Arrival, PeerKey, Status, Time, Transport, US, seq_lt};

impl<A: Copy + Eq + Hash + core::fmt::Debug> Transport<A> {
    /// Processes one datagram from `from`. `rx_ready` tells whether a receive buffer is posted
    /// (otherwise new data is refused with RNR).
    pub fn handle_datagram(&mut self, now: Time, from: A, bytes: &[u8], rx_ready: bool) -> Arrival {
        let repr = match wire::parse_verified(bytes) {
            Ok(r) => r,
            Err(_) => {
                self.stats.dropped_malformed += 1;
                return Arrival::Nothing;
            }
        };
        let (dst, src) = match repr {
            Repr::Data {
                dst_qkey, src_qkey, ..
            }
            | Repr::Unreliable { dst_qkey, src_qkey }
            | Repr::Ack {
                dst_qkey, src_qkey, ..
            }
            | Repr::Rnr {
                dst_qkey, src_qkey, ..
            } => (dst_qkey, src_qkey),
        };
        // A source QKEY of 0 names no endpoint: nobody could answer it.
        if (dst != self.cfg.qkey && !(dst == 0 && self.cfg.accept_unkeyed)) || src == 0 {
            self.stats.dropped_bad_qkey += 1;
            return Arrival::Nothing;
        }
        let key = PeerKey {
            addr: from,
            qkey: src,
        };
        // One lookup per datagram: the peer's index, once learned, serves the ack, the data
        // and the back-off below.
        let known = match self.find(key) {
            Some(p) => Some(p),
            None => {
                self.learn(key);
                self.find(key)
            }
        };
        match repr {
            Repr::Unreliable { .. } => {
                if !rx_ready {
                    return Arrival::Nothing;
                }
                self.stats.delivered += 1;
                Arrival::Deliver {
                    src_qkey: src,
                    payload: DATA_HEADER..bytes.len(),
                }
            }
            Repr::Data { seq, base, ack, .. } => {
                let mut end = bytes.len();
                if let Some((cum, sack)) = ack {
                    end -= ACK_TRAILER;
                    if let Some(p) = known {
                        self.stats.acks_received += 1;
                        self.keep_ack(now, p, cum, sack);
                    }
                }
                let p = known.unwrap_or_else(|| self.peer(key, now));
                self.on_data(now, p, seq, base, end, rx_ready)
            }
            Repr::Ack { cum, sack, .. } => {
                if let Some(p) = known {
                    self.stats.acks_received += 1;
                    self.settle_peer(p);
                    self.on_ack(now, p, cum, sack);
                }
                Arrival::Nothing
            }
            Repr::Rnr { seq, .. } => {
                if let Some(p) = known {
                    self.stats.rnr_received += 1;
                    self.settle_peer(p);
                    self.on_rnr(now, p, seq);
                }
                Arrival::Nothing
            }
        }
    }

    /// Data from peer `p`.
    fn on_data(
        &mut self,
        now: Time,
        p: usize,
        seq: u32,
        base: u32,
        len: usize,
        rx_ready: bool,
    ) -> Arrival {
        let peer = &mut self.peers[p];
        let key = peer.key;
        peer.known_receiver = true;
        // The sender has settled everything below `base`: slide past it.
        if seq_lt(peer.expected, base) {
            let shift = base.wrapping_sub(peer.expected);
            peer.received.shift_down(shift);
            peer.expected = base;
            peer.settle();
        }
        if seq_lt(seq, peer.expected) {
            // A copy of what we have: our ack was lost or late; the sender needs one now.
            self.stats.duplicates += 1;
            peer.ack_urgent = true;
            Self::due(&mut self.acks_due, peer, p);
            return Arrival::Nothing;
        }
        let off = seq.wrapping_sub(peer.expected);
        if off >= SACK_BITS {
            self.stats.dropped_window += 1;
            return Arrival::Nothing;
        }
        if peer.received.contains(off) {
            self.stats.duplicates += 1;
            peer.ack_urgent = true;
            Self::due(&mut self.acks_due, peer, p);
            return Arrival::Nothing;
        }
        if !rx_ready {
            let r = Repr::Rnr {
                dst_qkey: key.qkey,
                src_qkey: self.cfg.qkey,
                seq,
            };
            self.ctrl(key.addr, r);
            self.stats.rnr_sent += 1;
            return Arrival::Nothing;
        }
        peer.mark_received(off);
        if peer.ack_new == 0 {
            peer.ack_first = now;
        }
        peer.ack_new += 1;
        // A gap below what arrived (a loss, or reordering): the selective ack is news.
        if !peer.received.is_empty() {
            peer.ack_urgent = true;
        }
        Self::due(&mut self.acks_due, peer, p);
        self.stats.delivered += 1;
        Arrival::Deliver {
            src_qkey: key.qkey,
            payload: DATA_HEADER..len,
        }
    }

    pub(super) fn on_ack(&mut self, now: Time, p: usize, cum: u32, sack: Sack) {
        let max_rto = self.cfg.max_rto;
        let min_rto = self.cfg.min_rto;
        let Transport {
            peers, completions, ..
        } = self;
        let peer = &mut peers[p];
        let mut newly = 0u32;
        let mut sample = None;
        let mut spurious = false;
        // Only the slots this ack names are visited, in the window's order: those below `cum`
        // (a prefix of the window) and those its selective bits name. Each one newly
        // acknowledged completes at once (a selective ack frees its buffer early, too).
        let len = peer.slots.len();
        let below = (cum.wrapping_sub(peer.base) as i32).clamp(0, len as i32) as usize;
        let mut mark = |i: usize| {
            let slot = &mut peer.slots[i];
            if slot.acked {
                return;
            }
            newly += 1;
            completions.push_back(slot.settle(Status::Ok));
            spurious |= peer
                .undo
                .is_some_and(|(_, _, order)| slot.sent_order < order);
            if slot.transmissions == 1 && !slot.rnr_wait && slot.rnr == 0 {
                sample = Some(now.saturating_sub(slot.first_sent));
            }
            // An ack that comes sooner than the shortest round trip after a
            // retransmission answers an earlier copy: it says nothing about when the last
            // one left, and the retransmission was spurious (late, not lost).
            if slot.transmissions == 1 || now.saturating_sub(slot.last_sent) >= peer.min_rtt {
                peer.rack_sent = peer.rack_sent.max(slot.last_sent);
                peer.rack_order = peer.rack_order.max(slot.sent_order);
            } else if !slot.rnr_wait && slot.rnr == 0 {
                peer.reo_quarters = (peer.reo_quarters * 2).min(64);
                peer.recoveries = 0;
            }
        };
        for i in 0..below {
            mark(i);
        }
        // Bit k: `cum + 1 + k`, at index `cum + 1 + k - base` (below the window when the ack
        // is older than the window's start).
        for k in sack.iter() {
            let at = cum.wrapping_add(1 + k).wrapping_sub(peer.base) as i32;
            if at >= 0 && (at as usize) < len {
                mark(at as usize);
            }
        }
        peer.acked_in_window += newly as usize;
        if newly == 0 {
            return;
        }
        peer.last_progress = now;
        peer.timer_backed_off = false;
        peer.probed = false;
        if let Some((cwnd, ssthresh, _)) = peer.undo.take()
            && spurious
        {
            peer.cwnd = peer.cwnd.max(cwnd);
            peer.ssthresh = peer.ssthresh.max(ssthresh);
            self.stats.timeouts_undone += 1;
        }
        peer.rnr_backoff = 0;
        if let Some(rtt) = sample {
            peer.min_rtt = peer.min_rtt.min(rtt);
            // RFC 6298.
            match peer.srtt {
                None => {
                    peer.srtt = Some(rtt);
                    peer.rttvar = rtt / 2;
                }
                Some(s) => {
                    let d = s.abs_diff(rtt);
                    peer.rttvar = (3 * peer.rttvar + d) / 4;
                    peer.srtt = Some((7 * s + rtt) / 8);
                }
            }
        }
        // Progress ends any exponential back-off of the timer (as TCP does on new acks).
        if let Some(srtt) = peer.srtt {
            peer.rto = (srtt + 4 * peer.rttvar).clamp(min_rto, max_rto);
        }
        // The probe is allowed again, perhaps for an older datagram and a shorter round trip.
        peer.wake_by_probe();
        // Slow start adds one per datagram acknowledged up to the threshold; past it, what
        // is left adds `left / cwnd` at once (one division, where one per datagram, each
        // waiting on the last, was a quarter of this function's time).
        let mut left = f64::from(newly);
        if peer.cwnd < peer.ssthresh {
            let slow = (peer.ssthresh - peer.cwnd).ceil().min(left);
            peer.cwnd += slow;
            left -= slow;
        }
        if left > 0.0 {
            peer.cwnd += left / peer.cwnd;
        }
        peer.cwnd = peer.cwnd.min(self.cfg.max_window as f64);
        // Time-based loss detection (RFC 8985, simplified). A datagram still unacknowledged
        // that left a reordering window before one that has been acknowledged is lost and goes
        // again at once; one that left about when it did is suspect and goes again if no ack
        // comes within a round trip (`handle_timeout`). The new send time keeps a datagram
        // from going again until something sent after it is acknowledged, so one lost twice is
        // found twice without waiting for the retransmission timer.
        let srtt = peer.srtt.unwrap_or(min_rto);
        let reo_wnd = peer.reo_wnd(min_rto);
        // A datagram sent once with three later ones acknowledged is lost too, whatever the
        // clock says (the classic duplicate threshold: a burst leaves within microseconds),
        // unless the path was seen to reorder (RFC 8985 §6.2 turns it off then as well).
        let use_dup_thresh = peer.reo_quarters == 1;
        peer.pop_acked_prefix();
        // In order, the common case: no acknowledged slot is left behind an unacknowledged
        // one, and the oldest left was sent once and after everything acknowledged. First
        // sends go out in the window's order, so no slot was sent before an acknowledged one
        // and nothing is lost or suspect: the walk below would find nothing.
        let in_order = peer.acked_in_window == 0
            && peer
                .slots
                .front()
                .is_none_or(|s| s.transmissions == 1 && s.sent_order > peer.rack_order);
        let mut lost = false;
        let mut acked_after = 0;
        let mut suspect_due = Time::MAX;
        let walk = if in_order { 0 } else { peer.slots.len() };
        for i in (0..walk).rev() {
            let slot = &mut peer.slots[i];
            if slot.acked {
                acked_after += 1;
                continue;
            }
            let dup_thresh = use_dup_thresh && acked_after >= 3 && slot.transmissions == 1;
            if slot.rnr_wait || (slot.sent_order > peer.rack_order && !dup_thresh) {
                continue;
            }
            if slot.last_sent + reo_wnd > peer.rack_sent && !dup_thresh {
                slot.suspect = true;
                slot.due = slot.due.min(slot.last_sent + srtt + reo_wnd);
                suspect_due = suspect_due.min(slot.due);
                continue;
            }
            self.transmits.push_back(peer.resend(p, i, now));
            self.stats.retransmits += 1;
            lost = true;
        }
        peer.wake_by(suspect_due);
        if lost {
            peer.on_loss(now);
        }
        self.fill_window(now, p);
    }

    fn on_rnr(&mut self, now: Time, p: usize, seq: u32) {
        let jitter = crate::prov::efa::rnr_jitter_us(self.random());
        let (interval, max, retries) = (
            self.cfg.rnr_timeout_interval_us,
            self.cfg.rnr_max_timeout_us,
            self.cfg.rnr_retry,
        );
        let peer = &mut self.peers[p];
        let i = seq.wrapping_sub(peer.base) as usize;
        let Some(slot) = peer.slots.get_mut(i) else {
            return;
        };
        if slot.acked || slot.rnr_wait {
            return;
        }
        slot.rnr += 1;
        // The receiver answered: it is alive.
        peer.last_progress = now;
        if retries != 7 && slot.rnr > retries {
            self.completions.push_back(slot.settle(Status::Rnr));
            peer.acked_in_window += 1;
            // The receiver never got it: later datagrams carry a base past it.
            peer.pop_acked_prefix();
            // It no longer counts for the probe either, which may now follow an older
            // datagram and be due before the peer's wake (found by the fuzzer: the probe was
            // skipped until the retransmission timer, and in the harness, whose clock only
            // moves to the next deadline, never).
            peer.wake_by_probe();
            self.fill_window(now, p);
            return;
        }
        // Back off: the first interval is configured or random (efa-reference §6), doubling
        // with each episode. The datagrams of a window the receiver refused at once are one
        // episode and go again together when it ends: doubling for each of them made a
        // refused window of 32 wait 40 µs * 2^31, the 1 s cap.
        if now >= peer.rnr_until {
            peer.rnr_backoff =
                crate::prov::efa::rnr_backoff_us(peer.rnr_backoff, interval, max, jitter);
            peer.rnr_until = now + peer.rnr_backoff * US;
        }
        slot.rnr_wait = true;
        slot.due = peer.rnr_until;
        let due = slot.due;
        peer.wake_by(due);
        // It no longer counts for the probe, which may now follow an older datagram.
        peer.wake_by_probe();
    }
}
