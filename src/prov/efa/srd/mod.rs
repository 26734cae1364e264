//! Software SRD: reliable, unordered, datagram delivery between queue pairs — EFA's Scalable
//! Reliable Datagram semantics — as a sans-IO state machine.
//!
//! No sockets, no clock and no threads here: the device feeds datagrams and the current time in
//! (`handle_datagram`, `handle_timeout`) and takes datagrams to send and completions out
//! (`poll_transmit`, `poll_completion`, `poll_timeout`), in the shape of quinn-proto.
//!
//! Per peer (its address and QKEY) a sender numbers datagrams, keeps each until acknowledged,
//! retransmits on timeout (RTT-estimated, exponential back-off) and on selective-ack gaps, and
//! bounds what is in flight by a congestion window (AIMD). A receiver delivers each datagram
//! the first time it arrives — in any order: ordering is the RDM protocol's job — suppresses
//! duplicates, and acknowledges cumulatively plus 128 selective bits when its owner flushes
//! ([`Transport::flush_acks`], at the end of each pass over arrivals); data that goes back to
//! the sender before then carries the ack (DATA_ACK: a request answered in the same pass costs
//! one datagram each way). A datagram that finds no
//! receive buffer posted is refused with RNR; the sender backs off and retries up to `rnr_retry`
//! times, then fails that send with [`Status::Rnr`]. A peer that acknowledges nothing for
//! `unreachable` is declared unreachable and everything pending to it fails. Datagrams with a
//! wrong QKEY or that do not parse are dropped and counted.
//!
//! QKEY 0 is never an endpoint's own: it means "the endpoint at this address, whichever it
//! is" (a peer known only by node and service, fi_getinfo(3)). Only an endpoint whose address
//! the application named ([`Config::accept_unkeyed`]) accepts datagrams sent to it, and a
//! sender learns the real QKEY from the first datagram that comes back ([`Transport::learn`]);
//! `docs/addressing.md` says what this gives up.
//!
//! This file holds the peers' state, sending, the acks owed and the timers; what an arriving
//! datagram does is in `arrive.rs`.

mod arrive;
mod sack;
mod window;
pub mod wire;

use std::collections::VecDeque;

use crate::util::hash::FastMap;
use std::hash::Hash;
use std::ops::Range;

use wire::{ACK_TRAILER, DATA_HEADER, Repr, Sack};

use crate::sys::mem::IoVec;

/// Nanoseconds on the caller's monotonic clock.
pub type Time = u64;

pub const MS: Time = 1_000_000;
pub const US: Time = 1_000;

/// How a send ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Delivered and acknowledged.
    Ok,
    /// Refused for lack of a receive buffer more than `rnr_retry` times.
    Rnr,
    /// The peer stopped answering.
    Unreachable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Our QKEY (never 0); datagrams addressed to another one are dropped.
    pub qkey: u32,
    /// Also accept datagrams addressed to QKEY 0: this endpoint is bound to a service the
    /// application asked for, so peers may know it by node and service alone.
    pub accept_unkeyed: bool,
    /// Most datagrams in flight per peer (≤ [`wire::SACK_BITS`]: what one ack can cover).
    pub max_window: u32,
    /// Most bytes a peer may have in flight, whatever its datagrams' sizes (the receiver's
    /// socket buffer holds that much): peers of one device may differ in datagram size.
    pub max_window_bytes: usize,
    pub initial_window: u32,
    pub min_rto: Time,
    pub max_rto: Time,
    /// No acknowledgement for this long with data outstanding: the peer is unreachable.
    pub unreachable: Time,
    /// RNR retries before a send fails (`FI_OPT_EFA_RNR_RETRY`; 7 means forever, as on EFA).
    pub rnr_retry: u32,
    /// First RNR back-off (`FI_EFA_TIMEOUT_INTERVAL`, µs; 0: random 40–120 µs).
    pub rnr_timeout_interval_us: u64,
    /// Delayed acknowledgements ([`Transport::flush_acks_delaying`]): an ack for datagrams
    /// that arrived in order may wait until this many are unacknowledged …
    pub ack_every: u32,
    /// … or until the first of them has waited this long (0: never delay).
    pub ack_delay: Time,
    /// Longest RNR back-off (`FI_EFA_MAX_TIMEOUT`, µs).
    pub rnr_max_timeout_us: u64,
    /// Whether the checksum of what we send covers payloads too (else
    /// [`wire::FLAG_PAYLOAD_UNCHECKED`]):
    /// needed where something between us and the network may damage them (a fault injector).
    pub checksum_payloads: bool,
    /// Whether an ack that rides on data waits for [`Transport::settle_acks`] (see
    /// `Peer::ack_in`); the owner then calls it once the answer to that data has left.
    pub defer_acks: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            qkey: 0,
            accept_unkeyed: false,
            max_window: 64,
            max_window_bytes: usize::MAX,
            initial_window: 32,
            min_rto: MS,
            max_rto: 200 * MS,
            unreachable: 5_000 * MS,
            rnr_retry: 3,
            rnr_timeout_interval_us: 0,
            rnr_max_timeout_us: 1_000_000,
            ack_every: 2,
            ack_delay: 100 * US,
            checksum_payloads: true,
            defer_acks: false,
        }
    }
}

/// Counters (monotonic).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub data_sent: u64,
    pub retransmits: u64,
    /// Retransmission timer expiries (a peer silent for a whole RTO).
    pub timeouts: u64,
    /// Silences that ended with an acknowledgement of what was sent before them: the window
    /// cut for them was restored.
    pub timeouts_undone: u64,
    /// Tail-loss probes (of `retransmits`): the newest datagram in flight sent again when
    /// no ack came for two round trips.
    pub probes: u64,
    pub acks_sent: u64,
    /// Of `acks_sent`, those that rode on a data datagram (DATA_ACK).
    pub acks_piggybacked: u64,
    pub acks_received: u64,
    pub rnr_sent: u64,
    pub rnr_received: u64,
    pub delivered: u64,
    pub duplicates: u64,
    pub dropped_bad_qkey: u64,
    /// Peers first addressed by node and service whose QKEY was learned from their answer.
    pub qkeys_learned: u64,
    pub dropped_malformed: u64,
    pub dropped_window: u64,
    /// Datagrams larger than the device's MTU, dropped before the transport saw them (kept
    /// by the device: `device::TooBig`).
    pub dropped_too_big: u64,
    /// Device RDMA work requests completed successfully (the hardware device only): reads
    /// and writes this endpoint posted, and writes with data that landed here.
    pub rdma_reads: u64,
    pub rdma_writes: u64,
    pub rdma_writes_received: u64,
    /// Datagrams whose payload the device received straight into the memory the upper layer
    /// named for it (`device::Placement`; the UDP device without GRO).
    pub placed: u64,
    /// The UDP device on a small-MTU link (`device::fragment`): datagrams sent in
    /// fragments, those received joined in place in a GRO run, handed up in their fragments
    /// from a GRO run (`device::fragment::InPieces`) or copied together from fragments that
    /// arrived apart, and fragments dropped (lost partners, out of order).
    pub fragmented: u64,
    pub joined_in_run: u64,
    pub left_in_pieces: u64,
    pub joined_apart: u64,
    pub fragments_dropped: u64,
}

/// A peer queue pair: where it is and which incarnation (QKEY) it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerKey<A> {
    pub addr: A,
    pub qkey: u32,
}

/// A datagram to put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transmit<A> {
    /// An outstanding data datagram: fetch its bytes with [`Transport::datagram`] and its
    /// destination with [`Transport::peer_addr`]. (Its address is not carried here: copied in
    /// with every send, it was read back while its stores were in flight.)
    Data { peer: usize, seq: u32 },
    /// A control datagram (ACK or RNR).
    Ctrl {
        dest: A,
        bytes: [u8; wire::ACK_LEN],
        len: usize,
    },
}

/// What an arriving datagram means for the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// New data for the upper layer: `payload` bytes of the datagram, from `src_qkey`.
    Deliver {
        src_qkey: u32,
        payload: Range<usize>,
    },
    /// Nothing to deliver (control, duplicate, refused or dropped).
    Nothing,
}

/// Bytes of a datagram's head that a slot keeps itself ([`Transport::send_head_to`]): the SRD
/// header, an RDM data header (up to 36 bytes) and an ack trailer.
pub const INLINE_HEAD: usize = DATA_HEADER + 36 + ACK_TRAILER;

/// The part of a datagram before its tail.
#[derive(Debug)]
enum Head {
    /// The caller's buffer, handed back in the completion.
    Buf(Vec<u8>),
    /// Bytes the slot holds: the bulk of a transfer, a header before application memory, takes
    /// no buffer from the caller's pool and gives none back, and its header is written beside
    /// the slot's own state rather than in a buffer elsewhere in memory.
    Inline([u8; INLINE_HEAD]),
}

impl Default for Head {
    fn default() -> Head {
        Head::Buf(Vec::new())
    }
}

/// What a send's head is made from ([`Transport::launch`]).
enum Fill<'a> {
    /// A head made already: the caller's buffer, or bytes held while the send waited.
    Head(Head),
    /// Bytes `DATA_HEADER..len` of a head the slot holds, which the caller writes in place.
    Write(&'a mut dyn FnMut(&mut [u8])),
}

impl Head {
    /// Room for the datagram's head.
    fn bytes(&self) -> &[u8] {
        match self {
            Head::Buf(b) => b,
            Head::Inline(a) => a,
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Head::Buf(b) => b,
            Head::Inline(a) => a,
        }
    }

    /// What the completion gives back: the caller's buffer; for bytes held here, nothing when
    /// the datagram arrived, and its first `len` bytes when it failed (what the caller posts
    /// to send it again: `device::HEADROOM`, then its header).
    fn give_back(&mut self, len: usize, status: Status) -> Vec<u8> {
        match self {
            Head::Buf(b) => core::mem::take(b),
            Head::Inline(_) if status == Status::Ok => Vec::new(),
            Head::Inline(a) => a[..len].to_vec(),
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    wr_id: u64,
    /// The datagram is the first `len` bytes of this, then `tail`.
    datagram: Head,
    len: usize,
    tail: IoVec,
    first_sent: Time,
    /// When it was last put on the wire (first send or retransmission).
    last_sent: Time,
    /// Where that was in the order of everything put on the wire to this peer: a burst shares
    /// one `last_sent`, so this is what says which of two went first.
    sent_order: u64,
    /// When the next retransmission is due (for one in flight) or when an RNR back-off ends.
    due: Time,
    transmissions: u32,
    rnr: u32,
    acked: bool,
    /// Waiting out an RNR back-off.
    rnr_wait: bool,
    /// Sent before a datagram that was acknowledged: lost if still unacknowledged at
    /// `due` (set a round trip and a reordering window after `last_sent`).
    suspect: bool,
}

impl Slot {
    /// Settles the slot (acknowledged, or failed for good) and gives its completion: the
    /// buffer goes back with it, and the slot only keeps its place in the window.
    fn settle(&mut self, status: Status) -> (u64, Status, Vec<u8>) {
        self.acked = true;
        let wr_id = core::mem::replace(&mut self.wr_id, u64::MAX);
        (wr_id, status, self.datagram.give_back(self.len, status))
    }
}

#[derive(Debug)]
struct Peer<A> {
    key: PeerKey<A>,
    // --- sending ---
    next_seq: u32,
    /// Sequence of `slots[0]`.
    base: u32,
    slots: window::Window<Slot>,
    /// Bytes of the datagrams in `slots`.
    slot_bytes: usize,
    /// Slots in `slots` acknowledged (or failed) and not yet dropped: behind the head, they
    /// are what can show an older one lost.
    acked_in_window: usize,
    /// Sends waiting for window room: (wr_id, head, datagram length before the tail, tail).
    queued: VecDeque<(u64, Head, usize, IoVec)>,
    cwnd: f64,
    ssthresh: f64,
    srtt: Option<Time>,
    rttvar: Time,
    rto: Time,
    /// The latest `last_sent` of any datagram acknowledged so far: a datagram sent (a
    /// reordering window) before it and still unacknowledged is lost (time-based loss
    /// detection, as RACK in RFC 8985).
    rack_sent: Time,
    /// The latest `sent_order` of any datagram acknowledged so far: one sent after it is not
    /// suspect, whatever its send time (RFC 8985 §6.2 breaks ties of send time by sequence).
    rack_order: u64,
    /// Datagrams put on the wire to this peer so far (first sends and retransmissions), plus
    /// one: the `sent_order` of the next, so that all of them come after `rack_order` 0.
    next_order: u64,
    /// The window is cut at most once per round trip of losses: until this time.
    recovery_until: Time,
    /// The reordering window in quarters of the smoothed RTT: doubled when a retransmission
    /// proves spurious (the network reorders more than assumed), back to 1 after 16 loss
    /// recoveries (RFC 8985 §6.2, with an early ack standing in for a DSACK).
    reo_quarters: u32,
    recoveries: u32,
    /// The shortest round trip measured: an ack that follows a retransmission sooner than
    /// this answers an earlier copy.
    min_rtt: Time,
    /// Last time an acknowledgement made progress (or the first send after idle).
    last_progress: Time,
    /// The retransmission timer expired in silence since the last progress: `ssthresh`
    /// already remembers the window from before that silence.
    timer_backed_off: bool,
    /// The window and threshold before that silence, and the `next_order` at its first
    /// expiry: an acknowledgement of a copy put on the wire before then shows the timeout
    /// spurious (the peer was slow to answer, not the network losing), and they are restored.
    undo: Option<(f64, f64, u64)>,
    /// A tail-loss probe went out since the last progress.
    probed: bool,
    /// The current RNR back-off (µs), 0 once an acknowledgement came after it.
    rnr_backoff: Time,
    /// When the back-off begun by the last RNR ends: RNRs before then are the same episode.
    rnr_until: Time,
    /// No timer of this peer expires before this time (a lower bound: [`Peer::next_event`]
    /// is exact), so that `handle_timeout`, called on every poll, walks the slots of a peer
    /// only when something may be due or an acknowledgement changed what is. Whatever makes
    /// an event earlier lowers it ([`Peer::wake_by`]); an acknowledgement clears it.
    wake: Time,
    /// An ack that came on data (arrival time, cumulative sequence, selective bits) and is
    /// not yet applied (`Config::defer_acks`). What it settles is our own sends' bookkeeping
    /// (their completions, the window, the timers); the data it came with is what the
    /// application waits for, and in a request-response exchange the application answers
    /// that data at once. Applied after the answer has left, the bookkeeping is off that
    /// round trip's path. Anything that reads or changes this peer's send state applies it
    /// first ([`Transport::settle_peer`]); a send, only when the window looks full.
    ack_in: Option<(Time, u32, Sack)>,
    // --- receiving ---
    /// Every sequence below this has been received (or given up by the sender).
    expected: u32,
    /// Bit i: `expected + i` received (bit 0 is always clear after [`Peer::settle`]).
    received: Sack,
    ack_due: bool,
    /// Datagrams delivered since the last ack, the arrival of the first of them, and whether
    /// the ack owed must not be delayed (a duplicate or a gap: the sender needs it to recover).
    ack_new: u32,
    ack_first: Time,
    ack_urgent: bool,
    known_receiver: bool,
}

/// The smallest congestion window: with fewer datagrams in flight, losses are found only by
/// the timer.
const MIN_WINDOW: f64 = 4.0;
/// What the window keeps of itself on a round trip with losses found by acknowledgements.
const LOSS_BETA: f64 = 0.85;
/// The smallest reordering window of loss detection.
const REORDER_WINDOW_MIN: Time = 50 * US;

/// `a < b` in sequence space.
fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl<A: Copy + Eq + Hash> Peer<A> {
    fn new(key: PeerKey<A>, cfg: &Config, now: Time) -> Peer<A> {
        Peer {
            key,
            next_seq: 0,
            base: 0,
            slots: window::Window::new(),
            slot_bytes: 0,
            acked_in_window: 0,
            queued: VecDeque::new(),
            cwnd: cfg.initial_window.min(cfg.max_window) as f64,
            ssthresh: cfg.max_window as f64,
            srtt: None,
            rttvar: 0,
            rto: cfg.min_rto.max(10 * MS),
            rack_sent: 0,
            rack_order: 0,
            next_order: 1,
            recovery_until: 0,
            reo_quarters: 1,
            recoveries: 0,
            min_rtt: Time::MAX,
            last_progress: now,
            timer_backed_off: false,
            undo: None,
            probed: false,
            rnr_backoff: 0,
            rnr_until: 0,
            wake: 0,
            ack_in: None,
            expected: 0,
            received: Sack::EMPTY,
            ack_due: false,
            ack_new: 0,
            ack_first: 0,
            ack_urgent: false,
            known_receiver: false,
        }
    }

    /// Narrows the window for lost datagrams, once per round trip of losses (not once per
    /// datagram lost in it), and gently: on these paths a datagram is more often lost at
    /// random than to a full queue, and a queue that overflows shows itself by silence (the
    /// timer), which still halves it.
    fn on_loss(&mut self, now: Time) {
        if now >= self.recovery_until {
            self.ssthresh = (self.cwnd * LOSS_BETA).max(MIN_WINDOW);
            self.cwnd = self.ssthresh;
            self.recovery_until = now + self.srtt.unwrap_or(self.rto);
            self.recoveries += 1;
            if self.recoveries >= 16 {
                self.recoveries = 0;
                self.reo_quarters = 1;
            }
        }
    }

    /// Readies slot `i` (this is peer `p`) to go on the wire again and names it for
    /// `poll_transmit`.
    fn resend(&mut self, p: usize, i: usize, now: Time) -> Transmit<A> {
        let slot = &mut self.slots[i];
        slot.suspect = false;
        slot.transmissions += 1;
        slot.last_sent = now;
        slot.sent_order = self.next_order;
        self.next_order += 1;
        slot.due = now + self.rto;
        self.wake_by_send(now);
        Transmit::Data {
            peer: p,
            seq: self.base.wrapping_add(i as u32),
        }
    }

    /// The reordering window of loss detection.
    fn reo_wnd(&self, min_rto: Time) -> Time {
        (self.srtt.unwrap_or(min_rto) / 4 * Time::from(self.reo_quarters)).max(REORDER_WINDOW_MIN)
    }

    /// Lowers [`Peer::wake`] to `at`, when something of this peer becomes due then.
    fn wake_by(&mut self, at: Time) {
        self.wake = self.wake.min(at);
    }

    /// Lowers [`Peer::wake`] for a datagram put on the wire now: its retransmission timer,
    /// and the tail-loss probe it may now be the newest for (two round trips on).
    fn wake_by_send(&mut self, now: Time) {
        let probe = self.srtt.map_or(Time::MAX, |s| now + 2 * s);
        self.wake_by((now + self.rto).min(probe));
    }

    /// Lowers [`Peer::wake`] for the tail-loss probe, when the newest datagram in flight may
    /// have changed other than by a send (an acknowledgement, an RNR back-off) or the round
    /// trip estimate shrank. The probe follows the newest datagram's send time, and any
    /// datagram in flight left no later than it: the last one in sequence that is neither
    /// acknowledged nor backing off gives a bound without a pass over the slots.
    fn wake_by_probe(&mut self) {
        let Some(srtt) = self.srtt else {
            return;
        };
        let newest = self.slots.iter().rev().find(|s| !s.acked && !s.rnr_wait);
        if let Some(sent) = newest.map(|s| s.last_sent) {
            self.wake_by(sent + 2 * srtt);
        }
    }

    /// The earliest time `handle_timeout` has something to do for this peer: a slot due
    /// (retransmission, suspect loss, end of an RNR back-off), the tail-loss probe, or the
    /// unreachable deadline. One pass over the slots.
    fn next_event(&self, ack_delay: Time, unreachable: Time) -> Time {
        if !self.busy() {
            return Time::MAX;
        }
        let (first_due, newest) = self.scan();
        let probe = self.probe_time(ack_delay, first_due, newest);
        first_due
            .min(probe.map_or(Time::MAX, |(at, _)| at))
            .min(self.last_progress + unreachable)
    }

    /// One pass over the slots in flight: the earliest due of those unacknowledged, and the
    /// newest on the wire of those neither acknowledged nor waiting out an RNR back-off (its
    /// index and send time).
    fn scan(&self) -> (Time, Option<(usize, Time)>) {
        let mut first_due = Time::MAX;
        let mut newest: Option<(usize, u64, Time)> = None;
        for (i, s) in self.slots.iter().enumerate() {
            if s.acked {
                continue;
            }
            first_due = first_due.min(s.due);
            if !s.rnr_wait && newest.is_none_or(|(_, order, _)| s.sent_order > order) {
                newest = Some((i, s.sent_order, s.last_sent));
            }
        }
        (first_due, newest.map(|(i, _, sent)| (i, sent)))
    }

    /// The tail-loss probe from a [`Peer::scan`]: when, and for which slot.
    fn probe_time(
        &self,
        ack_delay: Time,
        first_due: Time,
        newest: Option<(usize, Time)>,
    ) -> Option<(Time, usize)> {
        if self.probed {
            return None;
        }
        let srtt = self.srtt?;
        let (i, last_sent) = newest?;
        let at = last_sent + 2 * srtt + ack_delay;
        (at < first_due).then_some((at, i))
    }

    /// When a tail-loss probe is due, and for which slot (RFC 8985 §7): the newest datagram in
    /// flight goes again two round trips and an ack delay after it left, if no ack came and
    /// the retransmission timer is not due first. A loss at the tail of a burst — or of the
    /// only datagram, a request — then costs about a round trip instead of an RTO (whose
    /// variance term, on a host that schedules the peer late, is many round trips), and
    /// without the window cut of a timeout: the probe's ack reveals the rest to the ack
    /// clock. One per progress.
    fn probe_at(&self, ack_delay: Time) -> Option<(Time, usize)> {
        if self.probed {
            return None;
        }
        let (first_due, newest) = self.scan();
        self.probe_time(ack_delay, first_due, newest)
    }

    /// Drops the acknowledged (or failed) slots at the head of the window: each completed
    /// when it was settled, the sequence moves past them.
    fn pop_acked_prefix(&mut self) {
        while self.slots.front().is_some_and(|s| s.acked) {
            self.pop_slot();
            self.base = self.base.wrapping_add(1);
        }
    }

    /// Drops the (settled) slot at the head of the window.
    fn pop_slot(&mut self) {
        if let Some(s) = self.slots.pop_front() {
            self.slot_bytes -= s.len + s.tail.len();
            self.acked_in_window -= usize::from(s.acked);
        }
    }

    fn in_flight(&self) -> usize {
        self.slots.len()
    }

    fn busy(&self) -> bool {
        !self.slots.is_empty() || !self.queued.is_empty()
    }

    /// Records `expected + off` as received and slides `expected` over what is then
    /// contiguous.
    fn mark_received(&mut self, off: u32) {
        if off == 0 && self.received.is_empty() {
            // In order, nothing held past a gap: the usual case, with no set to slide.
            self.expected = self.expected.wrapping_add(1);
            return;
        }
        self.received.insert(off);
        self.settle();
    }

    /// Slides `expected` over what has been received contiguously.
    fn settle(&mut self) {
        let n = self.received.trailing_ones();
        self.received.shift_down(n);
        self.expected = self.expected.wrapping_add(n);
    }

    /// Selective acknowledgement bits: bit i = `expected + 1 + i` received.
    fn sack(&self) -> Sack {
        let mut s = self.received;
        if !s.is_empty() {
            s.shift_down(1);
        }
        s
    }

    /// An acknowledgement left (alone or on data): nothing is owed.
    fn acked(&mut self) {
        self.ack_due = false;
        self.ack_new = 0;
        self.ack_urgent = false;
    }

    /// Whether the ack owed may wait longer at `now`.
    fn ack_may_wait(&self, every: u32, delay: Time, now: Time) -> bool {
        delay > 0 && !self.ack_urgent && self.ack_new < every && now < self.ack_first + delay
    }
}

/// One queue pair's reliable datagram state: every peer it talks to.
pub struct Transport<A> {
    cfg: Config,
    peers: Vec<Peer<A>>,
    index: FastMap<PeerKey<A>, usize>,
    /// The peer found last: a window of sends, or a stream of arrivals, names the same one
    /// over and over (peers are never dropped; only `learn` changes a key's index).
    last_found: Option<(PeerKey<A>, usize)>,
    /// Changes whenever `learn` moves a key to another peer: an index a caller keeps from
    /// [`Transport::peer_index`] is good while this is unchanged.
    epoch: u32,
    transmits: VecDeque<Transmit<A>>,
    /// Peers whose `ack_due` is set.
    acks_due: Vec<usize>,
    /// Peers whose `ack_in` may be set.
    acks_in: Vec<usize>,
    completions: VecDeque<(u64, Status, Vec<u8>)>,
    stats: Stats,
    rng: u64,
}

impl<A: Copy + Eq + Hash + core::fmt::Debug> Transport<A> {
    pub fn new(cfg: Config, seed: u64) -> Transport<A> {
        let max_window = cfg.max_window.clamp(1, wire::SACK_BITS);
        let cfg = Config { max_window, ..cfg };
        Transport {
            cfg,
            peers: Vec::new(),
            index: FastMap::default(),
            last_found: None,
            epoch: 0,
            transmits: VecDeque::new(),
            acks_due: Vec::new(),
            acks_in: Vec::new(),
            completions: VecDeque::new(),
            stats: Stats::default(),
            rng: seed | 1,
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn set_rnr_retry(&mut self, n: u32) {
        self.cfg.rnr_retry = n;
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    fn random(&mut self) -> u64 {
        // xorshift64*: only for back-off jitter.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The index of the peer `key`, if it is one.
    fn find(&mut self, key: PeerKey<A>) -> Option<usize> {
        if let Some((k, i)) = self.last_found
            && k == key
        {
            return Some(i);
        }
        let i = *self.index.get(&key)?;
        self.last_found = Some((key, i));
        Some(i)
    }

    fn peer(&mut self, key: PeerKey<A>, now: Time) -> usize {
        if let Some(i) = self.find(key) {
            return i;
        }
        self.peers.push(Peer::new(key, &self.cfg, now));
        self.index.insert(key, self.peers.len() - 1);
        self.peers.len() - 1
    }

    /// A first datagram from `key`: if we address its sender as QKEY 0 (by node and service
    /// only), that peer is this one. Its state (datagrams in flight, window, timers) carries
    /// on under the real QKEY, so retransmissions and acknowledgements match from now on.
    fn learn(&mut self, key: PeerKey<A>) {
        let unkeyed = PeerKey {
            addr: key.addr,
            qkey: 0,
        };
        if let Some(p) = self.index.remove(&unkeyed) {
            self.last_found = None;
            self.epoch = self.epoch.wrapping_add(1);
            self.peers[p].key = key;
            self.index.insert(key, p);
            self.stats.qkeys_learned += 1;
        }
    }

    /// Datagrams (sent or waiting) not yet settled.
    /// Datagrams on the wire and not yet acknowledged, to every peer.
    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        self.peers.iter().map(|p| p.in_flight()).sum()
    }

    /// The counts each peer keeps of its window agree with the window (tests: on_ack trusts
    /// `acked_in_window` to skip its loss walk).
    #[cfg(test)]
    pub fn check_window_counts(&self) {
        for p in &self.peers {
            let acked = p.slots.iter().filter(|s| s.acked).count();
            assert_eq!(p.acked_in_window, acked, "acknowledged slots in the window");
            let bytes: usize = p.slots.iter().map(|s| s.len + s.tail.len()).sum();
            assert_eq!(p.slot_bytes, bytes, "bytes in the window");
            assert!(p.slots.iter().all(|s| !s.acked || s.wr_id == u64::MAX));
        }
    }

    pub fn outstanding(&self) -> usize {
        self.peers
            .iter()
            .map(|p| p.slots.len() + p.queued.len())
            .sum()
    }

    /// Sends `datagram` (whose first [`wire::DATA_HEADER`] bytes are ours to fill) reliably to
    /// `dest`; its completion carries `wr_id` and gives the buffer back.
    pub fn send(&mut self, now: Time, dest: PeerKey<A>, wr_id: u64, datagram: Vec<u8>) {
        let len = datagram.len();
        self.send_prefix(now, dest, wr_id, datagram, len, IoVec::EMPTY);
    }

    /// [`Transport::send`] of the first `len` bytes of `buf`. The buffer comes back whole in
    /// the completion, so a caller can reuse it without re-initialising it.
    pub fn send_prefix(
        &mut self,
        now: Time,
        dest: PeerKey<A>,
        wr_id: u64,
        buf: Vec<u8>,
        len: usize,
        tail: IoVec,
    ) {
        let p = self.peer(dest, now);
        self.send_prefix_to(now, p, wr_id, buf, len, tail);
    }

    /// The index of peer `key` (made on first use), which [`Transport::send_prefix_to`]
    /// takes: it names that peer for as long as [`Transport::epoch`] stays the same. A caller
    /// that sends a window to one peer keeps it, rather than have every send look the key up.
    pub fn peer_index(&mut self, key: PeerKey<A>, now: Time) -> usize {
        self.peer(key, now)
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// [`Transport::send_prefix`] to the peer of index `p` ([`Transport::peer_index`]).
    pub fn send_prefix_to(
        &mut self,
        now: Time,
        p: usize,
        wr_id: u64,
        mut buf: Vec<u8>,
        len: usize,
        mut tail: IoVec,
    ) {
        let mut len = len.clamp(DATA_HEADER, buf.len().max(DATA_HEADER));
        if buf.len() < len {
            buf.resize(len, 0);
        }
        if self.cfg.checksum_payloads && !tail.is_empty() {
            // The checksum covers the payload: computed once, over bytes we hold (in place when
            // the buffer has room, which may leave room for an ack trailer too).
            let end = len + tail.len();
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[len..end].copy_from_slice(tail.as_bytes());
            len = end;
            tail = IoVec::EMPTY;
        }
        self.enter(now, p, wr_id, Fill::Head(Head::Buf(buf)), len, tail);
    }

    /// [`Transport::send_prefix_to`] of a datagram whose part before `tail` is a head of
    /// `head_len` bytes (an upper layer's header), which `write` writes: where it fits
    /// ([`INLINE_HEAD`]) the slot holds it and `write` writes it in place, so the caller lends
    /// no buffer and nothing is copied. Its completion's buffer is empty, unless the send
    /// failed: then it holds [`wire::DATA_HEADER`] bytes, then the head, as `send_prefix_to`
    /// would take it to send again.
    pub fn send_head_to(
        &mut self,
        now: Time,
        p: usize,
        wr_id: u64,
        head_len: usize,
        tail: IoVec,
        write: &mut dyn FnMut(&mut [u8]),
    ) {
        let len = DATA_HEADER + head_len;
        // A checksummed payload is copied in beside the header (`send_prefix_to`).
        if self.cfg.checksum_payloads || len + ACK_TRAILER > INLINE_HEAD {
            let mut buf = vec![0; len];
            write(&mut buf[DATA_HEADER..]);
            self.send_prefix_to(now, p, wr_id, buf, len, tail);
            return;
        }
        self.enter(now, p, wr_id, Fill::Write(write), len, tail);
    }

    /// Puts a send into peer `p`'s window, or in its queue behind those waiting for room. A
    /// head to be written is written where it goes, in either.
    fn enter(&mut self, now: Time, p: usize, wr_id: u64, fill: Fill<'_>, len: usize, tail: IoVec) {
        let peer = &mut self.peers[p];
        if !peer.busy() {
            peer.last_progress = now;
        }
        // Nothing waits before it and the window has room: straight onto the wire.
        let open = |t: &Self| t.peers[p].queued.is_empty() && t.window_room(p);
        if !open(self) {
            // Not before an ack kept back has freed what it covers (`Peer::ack_in`).
            self.settle_peer(p);
        }
        if open(self) {
            self.launch(now, p, wr_id, fill, len, tail);
            return;
        }
        let queued = &mut self.peers[p].queued;
        match fill {
            Fill::Head(head) => queued.push_back((wr_id, head, len, tail)),
            Fill::Write(write) => {
                queued.push_back((wr_id, Head::Inline([0; INLINE_HEAD]), len, tail));
                if let Some((_, head, _, _)) = queued.back_mut() {
                    write(&mut head.bytes_mut()[DATA_HEADER..len]);
                }
            }
        }
        self.fill_window(now, p);
    }

    /// Sends a datagram outside the reliable protocol (no sequence, no ack, no retry).
    pub fn unreliable(&mut self, dest: PeerKey<A>, datagram: &mut [u8]) {
        Repr::Unreliable {
            dst_qkey: dest.qkey,
            src_qkey: self.cfg.qkey,
        }
        .emit(datagram);
        wire::seal(datagram, self.cfg.checksum_payloads);
    }

    /// Whether peer `p`'s window has room for one more datagram.
    fn window_room(&self, p: usize) -> bool {
        let peer = &self.peers[p];
        peer.in_flight() < (peer.cwnd as usize).max(1)
            && peer.in_flight() < self.cfg.max_window as usize
            && peer.slot_bytes < self.cfg.max_window_bytes
    }

    /// Moves queued sends into the window while there is room.
    fn fill_window(&mut self, now: Time, p: usize) {
        while self.window_room(p) {
            let Some((wr_id, datagram, len, tail)) = self.peers[p].queued.pop_front() else {
                break;
            };
            self.launch(now, p, wr_id, Fill::Head(datagram), len, tail);
        }
    }

    /// Puts a send into peer `p`'s window (which has room) and names it for `poll_transmit`.
    /// The slot's fields and its header are written where the slot lives (`window`).
    fn launch(&mut self, now: Time, p: usize, wr_id: u64, fill: Fill<'_>, len: usize, tail: IoVec) {
        let qkey = self.cfg.qkey;
        let checksum_payloads = self.cfg.checksum_payloads;
        let peer = &mut self.peers[p];
        let seq = peer.next_seq;
        peer.next_seq = seq.wrapping_add(1);
        let sent_order = peer.next_order;
        peer.next_order += 1;
        if peer.slots.is_empty() {
            peer.base = seq;
        }
        let room = match &fill {
            Fill::Head(h) => h.bytes().len(),
            Fill::Write(_) => INLINE_HEAD,
        };
        // An ack owed to this peer is the trailer, which ends the datagram: a tail that
        // fits is copied in first. A request-response exchange (a pingpong) would otherwise
        // leave every ack to wait `ack_delay` for a datagram that carries no tail.
        let copy_tail = peer.ack_due && !tail.is_empty() && len + tail.len() + ACK_TRAILER <= room;
        let (mut dlen, dtail) = if copy_tail {
            (len + tail.len(), IoVec::EMPTY)
        } else {
            (len, tail)
        };
        let ack = (peer.ack_due && dtail.is_empty() && dlen + ACK_TRAILER <= room).then(|| {
            peer.acked();
            dlen += ACK_TRAILER;
            self.stats.acks_sent += 1;
            self.stats.acks_piggybacked += 1;
            (peer.expected, peer.sack())
        });
        let (dst_qkey, base, due) = (peer.key.qkey, peer.base, now + peer.rto);
        peer.slot_bytes += dlen + dtail.len();
        let slot = peer.slots.push_back();
        slot.wr_id = wr_id;
        slot.len = dlen;
        slot.tail = dtail;
        slot.first_sent = now;
        slot.last_sent = now;
        slot.sent_order = sent_order;
        slot.due = due;
        slot.transmissions = 1;
        slot.rnr = 0;
        slot.acked = false;
        slot.rnr_wait = false;
        slot.suspect = false;
        match fill {
            Fill::Head(h) => slot.datagram = h,
            Fill::Write(write) => {
                if !matches!(slot.datagram, Head::Inline(_)) {
                    slot.datagram = Head::Inline([0; INLINE_HEAD]);
                }
                write(&mut slot.datagram.bytes_mut()[DATA_HEADER..len]);
            }
        }
        let datagram = &mut slot.datagram.bytes_mut()[..dlen];
        if copy_tail {
            datagram[len..len + tail.len()].copy_from_slice(tail.as_bytes());
        }
        if checksum_payloads {
            Repr::Data {
                dst_qkey,
                src_qkey: qkey,
                seq,
                base,
                ack,
            }
            .emit(datagram);
            // With a tail the payload is unchecked (`send_prefix`): the seal covers the header.
            wire::seal(datagram, true);
        } else {
            wire::emit_data_unchecked(datagram, dst_qkey, qkey, seq, base, ack);
        }
        peer.wake_by_send(now);
        self.transmits.push_back(Transmit::Data { peer: p, seq });
        self.stats.data_sent += 1;
    }

    /// Where peer `peer` (a [`Transmit::Data`]'s) is.
    pub fn peer_addr(&self, peer: usize) -> &A {
        &self.peers[peer].key.addr
    }

    /// The bytes of an outstanding datagram named by a [`Transmit::Data`], in two parts: the
    /// head in the caller's buffer and the tail in the caller's memory (often empty).
    pub fn datagram(&self, peer: usize, seq: u32) -> Option<[&[u8]; 2]> {
        let p = self.peers.get(peer)?;
        let i = seq.wrapping_sub(p.base) as usize;
        p.slots
            .get(i)
            .filter(|s| !s.acked)
            .map(|s| [&s.datagram.bytes()[..s.len], s.tail.as_bytes()])
    }

    /// Where a queued [`Transmit`] goes and its bytes, in two parts as [`Transport::datagram`]
    /// gives them; None for a data datagram settled since it was queued.
    #[inline]
    pub fn transmit_bytes<'a>(&'a self, t: &'a Transmit<A>) -> Option<(&'a A, [&'a [u8]; 2])> {
        match t {
            Transmit::Data { peer, seq } => self
                .datagram(*peer, *seq)
                .map(|b| (self.peer_addr(*peer), b)),
            Transmit::Ctrl { dest, bytes, len } => Some((dest, [&bytes[..*len], &[]])),
        }
    }

    /// Whether datagrams wait for the wire and every one may wait for the owner's next poll
    /// rather than go now: fewer than `max` of them, each a first transmission carrying no ack, and
    /// each behind an older datagram to its peer that is already on the wire (whose ack brings
    /// the owner back to poll). A burst of small posts then leaves in one batch instead of a
    /// system call per datagram.
    pub fn may_hold(&self, max: usize) -> bool {
        !self.transmits.is_empty()
            && self.transmits.len() < max
            && self.transmits.iter().all(|t| match *t {
                Transmit::Data { peer, seq, .. } => {
                    let p = &self.peers[peer];
                    seq != p.base
                        && p.slots
                            .get(seq.wrapping_sub(p.base) as usize)
                            .is_some_and(|s| {
                                s.transmissions == 1
                                    && (s.acked
                                        || s.datagram.bytes().get(1) != Some(&wire::KIND_DATA_ACK))
                            })
                }
                Transmit::Ctrl { .. } => false,
            })
    }

    /// Whether `poll_transmit` has anything (data or pending acknowledgements).
    pub fn has_transmits(&self) -> bool {
        !self.transmits.is_empty()
    }

    /// The next datagram to put on the wire. Acknowledgements owed are not among them until
    /// [`Transport::flush_acks`]: until then they may ride on data.
    pub fn poll_transmit(&mut self) -> Option<Transmit<A>> {
        self.transmits.pop_front()
    }

    /// What `poll_transmit` would give, oldest first, left in place: a caller that sends them
    /// from here takes those that went with [`Transport::consume_transmits`].
    pub fn transmits(&self) -> std::collections::vec_deque::Iter<'_, Transmit<A>> {
        self.transmits.iter()
    }

    /// Takes the first `n` of [`Transport::transmits`].
    pub fn consume_transmits(&mut self, n: usize) {
        self.transmits.drain(..n.min(self.transmits.len()));
    }

    /// Whether completions wait for `poll_completion`.
    pub fn has_completions(&self) -> bool {
        !self.completions.is_empty()
    }

    pub fn poll_completion(&mut self) -> Option<(u64, Status, Vec<u8>)> {
        self.completions.pop_front()
    }

    fn ctrl(&mut self, dest: A, r: Repr) {
        self.transmits.push_back(Self::ctrl_transmit(dest, r));
    }

    fn ctrl_transmit(dest: A, r: Repr) -> Transmit<A> {
        let mut bytes = [0u8; wire::ACK_LEN];
        r.emit(&mut bytes);
        wire::seal(&mut bytes[..r.buffer_len()], false);
        Transmit::Ctrl {
            dest,
            bytes,
            len: r.buffer_len(),
        }
    }

    /// Notes that `peer` (index `p`) owes an acknowledgement.
    fn due(list: &mut Vec<usize>, peer: &mut Peer<A>, p: usize) {
        if !peer.ack_due {
            peer.ack_due = true;
            list.push(p);
        }
    }

    /// Whether some acknowledgement is owed (its peer's ack not yet sent nor carried).
    pub fn acks_owed(&self) -> bool {
        !self.acks_due.is_empty()
    }

    /// Whether an ack that came on data may wait to be applied (`Config::defer_acks`); for
    /// tests (`settle_acks` asks the same itself).
    #[cfg(test)]
    pub fn acks_kept_in(&self) -> bool {
        !self.acks_in.is_empty()
    }

    /// Applies the acks that came on data and were kept back (`Peer::ack_in`): their
    /// completions, window room and timers follow. The owner calls this once what it sends
    /// in answer has left, and before it reads completions or waits.
    pub fn settle_acks(&mut self) {
        if self.acks_in.is_empty() {
            return;
        }
        let mut kept = core::mem::take(&mut self.acks_in);
        for &p in &kept {
            self.settle_peer(p);
        }
        kept.clear();
        self.acks_in = kept;
    }

    /// Applies peer `p`'s kept ack, if any, at the time it arrived.
    fn settle_peer(&mut self, p: usize) {
        if let Some((at, cum, sack)) = self.peers[p].ack_in.take() {
            self.on_ack(at, p, cum, sack);
        }
    }

    /// An ack that came on data from peer `p` at `now`: kept for `settle_acks` when that
    /// is allowed and nothing of this peer waits for the room it may free; else applied.
    fn keep_ack(&mut self, now: Time, p: usize, cum: u32, sack: Sack) {
        if !self.cfg.defer_acks || !self.peers[p].queued.is_empty() {
            self.settle_peer(p);
            self.on_ack(now, p, cum, sack);
            return;
        }
        // Acks are applied in the order they came: an older one first.
        match self.peers[p].ack_in.take() {
            Some((at, c, s)) => self.on_ack(at, p, c, s),
            None => self.acks_in.push(p),
        }
        self.peers[p].ack_in = Some((now, cum, sack));
    }

    /// Emits every acknowledgement owed (one per peer) that no data carried. The owner calls
    /// this at the end of each pass over arrivals when it does not delay acks: an ack never
    /// waits for the application.
    pub fn flush_acks(&mut self) {
        self.emit_acks(|_| true);
    }

    /// As [`Transport::flush_acks`], but an ack for datagrams that arrived in order may wait
    /// (up to `ack_every` datagrams or `ack_delay`, whichever comes first) for more arrivals
    /// or for data going back to carry it. Returns whether some ack waits: the owner must
    /// then see that [`Transport::handle_timeout`] (the deadline is in `poll_timeout`) or
    /// `flush_acks` runs even if the application stops calling it.
    pub fn flush_acks_delaying(&mut self, now: Time) -> bool {
        let (every, delay) = (self.cfg.ack_every, self.cfg.ack_delay);
        self.emit_acks(|p| !p.ack_may_wait(every, delay, now))
    }

    /// Emits the owed acks `now_due` selects; returns whether any is left owed.
    fn emit_acks(&mut self, now_due: impl Fn(&Peer<A>) -> bool) -> bool {
        let qkey = self.cfg.qkey;
        let mut due = core::mem::take(&mut self.acks_due);
        due.retain(|&i| {
            let p = &mut self.peers[i];
            if !p.ack_due {
                return false;
            }
            if !now_due(p) {
                return true;
            }
            p.acked();
            let r = Repr::Ack {
                dst_qkey: p.key.qkey,
                src_qkey: qkey,
                cum: p.expected,
                sack: p.sack(),
            };
            self.transmits.push_back(Self::ctrl_transmit(p.key.addr, r));
            self.stats.acks_sent += 1;
            false
        });
        let held = !due.is_empty();
        self.acks_due = due;
        held
    }
    /// The next time `handle_timeout` has work.
    pub fn poll_timeout(&self) -> Option<Time> {
        // Acks left to wait by `flush_acks_delaying`.
        let mut t: Option<Time> = self
            .acks_due
            .iter()
            .map(|&i| &self.peers[i])
            .filter(|p| p.ack_due)
            .map(|p| p.ack_first + self.cfg.ack_delay)
            .min();
        for p in &self.peers {
            for s in p.slots.iter().filter(|s| !s.acked) {
                t = Some(t.map_or(s.due, |t| t.min(s.due)));
            }
            if let Some((u, _)) = p.probe_at(self.cfg.ack_delay) {
                t = Some(t.map_or(u, |t| t.min(u)));
            }
            if p.busy() {
                let u = p.last_progress + self.cfg.unreachable;
                t = Some(t.map_or(u, |t| t.min(u)));
            }
        }
        t
    }

    /// Retransmits what timed out, ends RNR back-offs, declares silent peers unreachable,
    /// sends the delayed acks whose time has come.
    pub fn handle_timeout(&mut self, now: Time) {
        // (Without delay, what is owed waits for the owner's flush at the end of its pass.)
        let delay = self.cfg.ack_delay;
        if delay > 0 && !self.acks_due.is_empty() {
            self.emit_acks(|p| now >= p.ack_first + delay);
        }
        let unreachable = self.cfg.unreachable;
        for p in 0..self.peers.len() {
            let peer = &mut self.peers[p];
            if !peer.busy() {
                continue;
            }
            if now < peer.wake {
                // The bound is kept by every change that makes an event earlier: the unit
                // tests (the simulated networks) check it on every skip.
                #[cfg(test)]
                assert!(
                    now < peer.next_event(delay, unreachable),
                    "Peer::wake too late"
                );
                continue;
            }
            // An ack kept back may answer what is due.
            self.settle_peer(p);
            if self.peers[p].busy() {
                self.timeouts_of(p, now);
            }
            let peer = &mut self.peers[p];
            peer.wake = peer.next_event(delay, unreachable);
        }
    }

    /// `handle_timeout` for peer `p`, whose slots may have something due.
    fn timeouts_of(&mut self, p: usize, now: Time) {
        let delay = self.cfg.ack_delay;
        let max_rto = self.cfg.max_rto;
        let peer = &mut self.peers[p];
        if now >= peer.last_progress + self.cfg.unreachable {
            self.fail_peer(p, Status::Unreachable);
            return;
        }
        // A timer that expires while the peer keeps acknowledging other datagrams found a
        // lost one at the tail, where nothing sent later could reveal it: a loss like any
        // other. Only silence for a whole RTO means a congested or broken path: then the
        // window collapses and the timer backs off.
        if let Some((at, i)) = peer.probe_at(delay)
            && now >= at
        {
            peer.probed = true;
            // The timer keeps its time: the probe is no retransmission by it.
            let due = peer.slots[i].due;
            self.transmits.push_back(peer.resend(p, i, now));
            peer.slots[i].due = due;
            self.stats.retransmits += 1;
            self.stats.probes += 1;
        }
        let silent = now >= peer.last_progress + peer.rto;
        // What was on the wire before this expiry (for the undo below).
        let order = peer.next_order;
        let mut timed_out = false;
        let mut lost = false;
        let mut probed = false;
        for i in 0..peer.slots.len() {
            let slot = &mut peer.slots[i];
            if slot.acked || now < slot.due {
                continue;
            }
            if slot.rnr_wait {
                slot.rnr_wait = false;
            } else if slot.suspect {
                // Found lost by the ack clock, not by silence: no back-off.
                lost = true;
            } else {
                timed_out = true;
                // At the first expiry of a silence only the oldest goes again (F-RTO,
                // RFC 5682): the rest wait for its answer, which tells whether they were
                // lost. Later expiries send everything due (the probe may be lost too).
                if silent && !peer.timer_backed_off && core::mem::replace(&mut probed, true) {
                    continue;
                }
            }
            self.transmits.push_back(peer.resend(p, i, now));
            self.stats.retransmits += 1;
        }
        if timed_out && silent {
            self.stats.timeouts += 1;
            // The window before the silence is remembered once: the expiries that follow
            // in the same silence find it collapsed already, and a threshold taken from
            // that would leave the window to grow back one datagram per round trip.
            if !peer.timer_backed_off {
                peer.timer_backed_off = true;
                peer.undo = Some((peer.cwnd, peer.ssthresh, order));
                peer.ssthresh = (peer.cwnd / 2.0).max(MIN_WINDOW);
            }
            peer.cwnd = MIN_WINDOW;
            peer.rto = (peer.rto * 2).min(max_rto);
            // Nothing goes again before the backed-off timer, the probe included: an
            // expiry in between would find the peer not yet silent for the longer RTO and
            // send everything again as lost, leaving no original to tell a spurious
            // timeout by.
            let due = now + peer.rto;
            for s in peer.slots.iter_mut().filter(|s| !s.acked && !s.rnr_wait) {
                s.due = s.due.max(due);
            }
        } else if timed_out || lost {
            peer.on_loss(now);
        }
    }

    /// Fails everything pending to a peer; its sequence numbers move on (later datagrams carry
    /// a base past the failed ones, so the receiver does not wait for them).
    fn fail_peer(&mut self, p: usize, status: Status) {
        // What the peer acknowledged completes as delivered, not as failed.
        self.settle_peer(p);
        let peer = &mut self.peers[p];
        peer.slot_bytes = 0;
        peer.acked_in_window = 0;
        for slot in peer.slots.iter_mut() {
            if !slot.acked && slot.wr_id != u64::MAX {
                let buf = slot.datagram.give_back(slot.len, status);
                self.completions.push_back((slot.wr_id, status, buf));
            }
        }
        peer.slots.clear();
        peer.base = peer.next_seq;
        for (wr_id, mut head, len, _) in peer.queued.drain(..) {
            self.completions
                .push_back((wr_id, status, head.give_back(len, status)));
        }
        peer.cwnd = self.cfg.initial_window.min(self.cfg.max_window) as f64;
        peer.rto = self.cfg.min_rto.max(10 * MS);
        peer.wake = 0;
        peer.srtt = None;
        peer.timer_backed_off = false;
        peer.undo = None;
        peer.probed = false;
        peer.rnr_backoff = 0;
    }

    /// Fails everything pending to `dest` (the upper layer gave up on it).
    pub fn abandon(&mut self, dest: PeerKey<A>, status: Status) {
        if let Some(p) = self.find(dest) {
            self.fail_peer(p, status);
        }
    }
}

#[cfg(test)]
mod tests;
