//! Deterministic simulations of the transport: two (or more) queue pairs on a virtual clock over
//! a network that loses, duplicates, reorders, delays and corrupts datagrams by a seeded RNG.

use super::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn chance(&mut self, pct: f64) -> bool {
        (self.next() % 1_000_000) as f64 / 10_000.0 < pct
    }
}

#[derive(Clone, Copy, Default)]
struct Faults {
    loss: f64,
    dup: f64,
    corrupt: f64,
    /// Extra random delay up to this many µs (reorders).
    jitter_us: u64,
}

/// Two queue pairs (addresses 0 and 1) on a virtual network.
struct Sim {
    now: Time,
    qp: [Transport<u8>; 2],
    /// In flight: (arrival time, destination, source, bytes).
    wire: Vec<(Time, u8, u8, Vec<u8>)>,
    faults: Faults,
    rng: Rng,
    /// Receive buffers posted at each side.
    rx_credits: [usize; 2],
    delivered: [Vec<Vec<u8>>; 2],
    done: Vec<(u64, Status)>,
    /// The buffer each completion gave back, by `wr_id`.
    returned: Vec<(u64, Vec<u8>)>,
    latency: Time,
    /// The test flushes acknowledgements itself (as a device does at the end of its owner's
    /// pass, after answers went out) instead of the harness after every arrival.
    manual_acks: bool,
    /// The harness ends a pass with `flush_acks_delaying` (as the UDP device does) instead of
    /// `flush_acks`.
    delay_acks: bool,
    /// Queue pair 1 runs only the first `.1` of every `.0` (a receiver descheduled on a busy
    /// host): what reaches it in between waits for its next turn.
    deschedule: Option<(Time, Time)>,
    /// Steps after whose arrivals some queue pair kept an ack.
    steps_with_kept_acks: usize,
    /// The queue pair whose kept acks the next step leaves alone.
    unsettled: Option<usize>,
}

const QKEYS: [u32; 2] = [0x1111, 0x2222];

impl Sim {
    fn new(seed: u64, faults: Faults) -> Sim {
        Sim::with_window(seed, faults, Config::default().max_window)
    }

    fn with_window(seed: u64, faults: Faults, max_window: u32) -> Sim {
        let cfg = |q| Config {
            qkey: q,
            max_window,
            ..Config::default()
        };
        Sim {
            now: 0,
            qp: [
                Transport::new(cfg(QKEYS[0]), seed),
                Transport::new(cfg(QKEYS[1]), seed + 1),
            ],
            wire: Vec::new(),
            faults,
            rng: Rng(seed.wrapping_mul(2654435761) | 1),
            rx_credits: [usize::MAX; 2],
            delivered: [Vec::new(), Vec::new()],
            done: Vec::new(),
            returned: Vec::new(),
            latency: 10 * US,
            manual_acks: false,
            delay_acks: false,
            deschedule: None,
            steps_with_kept_acks: 0,
            unsettled: None,
        }
    }

    /// Both queue pairs keep the acks that come on data (`Config::defer_acks`).
    fn deferring_acks(mut self) -> Sim {
        for q in &mut self.qp {
            let cfg = Config {
                defer_acks: true,
                ..q.config().clone()
            };
            *q = Transport::new(cfg, self.rng.next());
        }
        self
    }

    /// Both queue pairs time out no sooner than `min_rto`.
    fn with_min_rto(mut self, min_rto: Time) -> Sim {
        for q in &mut self.qp {
            let cfg = Config {
                min_rto,
                ..q.config().clone()
            };
            *q = Transport::new(cfg, self.rng.next());
        }
        self
    }

    /// Like `send`, in a buffer with room for a piggybacked ack (as the efa devices give).
    fn send_roomy(&mut self, from: usize, wr_id: u64, payload: &[u8]) {
        let mut d = vec![0u8; DATA_HEADER];
        d.extend_from_slice(payload);
        let len = d.len();
        d.resize(len + ACK_TRAILER, 0);
        let dest = PeerKey {
            addr: (1 - from) as u8,
            qkey: QKEYS[1 - from],
        };
        self.qp[from].send_prefix(self.now, dest, wr_id, d, len, IoVec::EMPTY);
    }

    fn send(&mut self, from: usize, wr_id: u64, payload: &[u8]) {
        let mut d = vec![0u8; DATA_HEADER];
        d.extend_from_slice(payload);
        let dest = PeerKey {
            addr: (1 - from) as u8,
            qkey: QKEYS[1 - from],
        };
        self.qp[from].send(self.now, dest, wr_id, d);
    }

    /// Moves transmissions onto the wire with the network's faults.
    fn pump(&mut self, from: usize) {
        while let Some(t) = self.qp[from].poll_transmit() {
            let (dest, bytes) = match t {
                Transmit::Data { peer, seq } => match self.qp[from].datagram(peer, seq) {
                    Some(parts) => (*self.qp[from].peer_addr(peer), parts.concat()),
                    None => continue,
                },
                Transmit::Ctrl { dest, bytes, len } => (dest, bytes[..len].to_vec()),
            };
            if self.rng.chance(self.faults.loss) {
                continue;
            }
            let copies = if self.rng.chance(self.faults.dup) {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let mut b = bytes.clone();
                if self.rng.chance(self.faults.corrupt) {
                    let i = (self.rng.next() as usize) % b.len();
                    b[i] ^= 1 << (self.rng.next() % 8);
                }
                let jitter = if self.faults.jitter_us > 0 {
                    self.rng.next() % (self.faults.jitter_us * US)
                } else {
                    0
                };
                self.wire
                    .push((self.now + self.latency + jitter, dest, from as u8, b));
            }
        }
        while let Some((wr, st, buf)) = self.qp[from].poll_completion() {
            self.done.push((wr, st));
            self.returned.push((wr, buf));
        }
    }

    /// Advances to the next event (an arrival or a timer) and handles it.
    fn step(&mut self) -> bool {
        // Acks kept on data (`deferring_acks`) are applied at the start of each step, as the
        // UDP device does at its next poll; without `defer_acks` there are none.
        for (i, q) in self.qp.iter_mut().enumerate() {
            if self.unsettled != Some(i) {
                q.settle_acks();
            }
        }
        self.pump(0);
        self.pump(1);
        let next_arrival = self.wire.iter().map(|w| self.handled_at(w.0, w.1)).min();
        let next_timer = [self.qp[0].poll_timeout(), self.qp[1].poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = [next_arrival, next_timer].into_iter().flatten().min() else {
            return false;
        };
        self.now = self.now.max(t);
        let mut i = 0;
        let mut arrived = [false; 2];
        while i < self.wire.len() {
            if self.handled_at(self.wire[i].0, self.wire[i].1) <= self.now {
                let (_, dest, src, bytes) = self.wire.swap_remove(i);
                let d = dest as usize;
                let ready = self.rx_credits[d] > 0;
                if let Arrival::Deliver { payload, src_qkey } =
                    self.qp[d].handle_datagram(self.now, src, &bytes, ready)
                {
                    assert_eq!(src_qkey, QKEYS[src as usize]);
                    self.rx_credits[d] = self.rx_credits[d].saturating_sub(1);
                    self.delivered[d].push(bytes[payload].to_vec());
                }
                arrived[d] = true;
            } else {
                i += 1;
            }
        }
        if self.qp.iter().any(|q| q.acks_kept_in()) {
            self.steps_with_kept_acks += 1;
        }
        for (q, a) in self.qp.iter_mut().zip(arrived) {
            if a && !self.manual_acks {
                if self.delay_acks {
                    q.flush_acks_delaying(self.now);
                } else {
                    q.flush_acks();
                }
            }
            q.handle_timeout(self.now);
            q.check_window_counts();
        }
        true
    }

    /// When a datagram arriving at `t` for `dest` is taken in.
    fn handled_at(&self, t: Time, dest: u8) -> Time {
        match self.deschedule {
            Some((period, runs)) if dest == 1 && t % period >= runs => t - t % period + period,
            _ => t,
        }
    }

    /// A step in which queue pair `q` applies none of the acks it kept (its owner answered
    /// nothing in between).
    fn step_without_settling(&mut self, q: usize) -> bool {
        self.unsettled = Some(q);
        let more = self.step();
        self.unsettled = None;
        more
    }

    fn run_until_idle(&mut self, limit: Time) {
        while self.now < limit && self.step() {}
        for q in &mut self.qp {
            q.settle_acks();
        }
        self.pump(0);
        self.pump(1);
    }
}

/// Distinct for every `i`: the index, then a varying-length pattern.
fn payload(i: u64) -> Vec<u8> {
    let n = 1 + (i as usize * 37) % 300;
    let mut v = i.to_le_bytes().to_vec();
    v.extend((0..n).map(|k| (k as u64 ^ i) as u8));
    v
}

/// Every datagram arrives exactly once with the right bytes, or its sender gets an error.
fn check_exactly_once(sim: &Sim, n: u64) {
    let mut seen = std::collections::HashSet::new();
    for d in &sim.delivered[1] {
        assert!(seen.insert(d.clone()), "duplicate delivery");
    }
    let ok: Vec<u64> = sim
        .done
        .iter()
        .filter(|(_, s)| *s == Status::Ok)
        .map(|(w, _)| *w)
        .collect();
    for w in &ok {
        assert!(
            seen.contains(&payload(*w)),
            "completed send {w} was not delivered intact"
        );
    }
    assert_eq!(sim.done.len() as u64, n, "every send completes once");
    assert!(sim.delivered[1].len() >= ok.len());
    let sent: std::collections::HashSet<Vec<u8>> = (0..n).map(payload).collect();
    for d in &sim.delivered[1] {
        assert!(sent.contains(d), "corrupted datagram delivered");
    }
}

#[test]
fn lossless_in_order() {
    let mut sim = Sim::new(1, Faults::default());
    for i in 0..1000 {
        sim.send(0, i, &payload(i));
    }
    sim.run_until_idle(10_000 * MS);
    check_exactly_once(&sim, 1000);
    assert!(sim.done.iter().all(|(_, s)| *s == Status::Ok));
    let st = sim.qp[0].stats();
    assert_eq!(st.retransmits, 0);
    assert!(
        sim.qp[1].stats().acks_sent < 1000,
        "acks are coalesced per batch"
    );
}

/// 500 datagrams through `loss` % loss, 5 % duplication, 2 % corruption and 200 µs of jitter:
/// each arrives exactly once, every send succeeds.
fn lossy_run(seed: u64, loss: f64, delay_acks: bool) -> Sim {
    let faults = Faults {
        loss,
        dup: 5.0,
        corrupt: 2.0,
        jitter_us: 200,
    };
    let mut sim = Sim::new(seed, faults);
    sim.delay_acks = delay_acks;
    for i in 0..500 {
        sim.send(0, i, &payload(i));
    }
    sim.run_until_idle(600_000 * MS);
    check_exactly_once(&sim, 500);
    let ok = sim.done.iter().filter(|(_, s)| *s == Status::Ok).count();
    assert_eq!(ok, 500, "at {loss}% loss every datagram still gets through");
    sim
}

#[test]
fn loss_reordering_duplication_corruption() {
    for (seed, loss) in [(2u64, 1.0), (3, 5.0), (4, 10.0), (5, 20.0), (6, 30.0)] {
        let sim = lossy_run(seed, loss, false);
        let st = sim.qp[0].stats();
        assert!(st.retransmits > 0, "loss {loss}%: retransmissions expected");
        assert!(
            sim.qp[1].stats().dropped_malformed + sim.qp[0].stats().dropped_malformed > 0
                || loss < 5.0
        );
    }
}

/// A window as wide as one ack covers (256, the Ethernet-MTU case): it opens past 64
/// datagrams in flight, and through loss, duplication, corruption and jitter each
/// still arrives exactly once — the selective acks past each 64-bit word are read right.
#[test]
fn a_window_as_wide_as_one_ack_fills_and_stays_exact_under_loss() {
    let mut sim = Sim::with_window(31, Faults::default(), wire::SACK_BITS);
    sim.latency = 500 * US;
    for i in 0..800 {
        sim.send(0, i, &payload(i));
    }
    let mut widest = 0;
    while sim.now < 60_000 * MS && sim.step() {
        widest = widest.max(sim.qp[0].in_flight());
    }
    sim.run_until_idle(60_000 * MS);
    assert_eq!(
        widest,
        wire::SACK_BITS as usize,
        "the window opens to what one ack covers"
    );
    check_exactly_once(&sim, 800);
    assert_eq!(
        sim.qp[0].stats().retransmits,
        0,
        "a clean network needs none"
    );
    for (seed, loss) in [(32u64, 3.0), (33, 20.0)] {
        let faults = Faults {
            loss,
            dup: 5.0,
            corrupt: 2.0,
            jitter_us: 200,
        };
        let mut sim = Sim::with_window(seed, faults, wire::SACK_BITS);
        for i in 0..600 {
            sim.send(0, i, &payload(i));
        }
        sim.run_until_idle(600_000 * MS);
        check_exactly_once(&sim, 600);
        let ok = sim.done.iter().filter(|(_, s)| *s == Status::Ok).count();
        assert_eq!(ok, 600, "at {loss}% loss every datagram still gets through");
    }
}

#[test]
fn rnr_storm_then_recovery() {
    let mut sim = Sim::new(7, Faults::default());
    sim.qp[0].set_rnr_retry(7); // retry forever
    sim.rx_credits[1] = 0;
    for i in 0..50 {
        sim.send(0, i, &payload(i));
    }
    // No buffers for a while: everything is refused and retried with back-off.
    for _ in 0..2000 {
        sim.step();
    }
    assert!(sim.qp[1].stats().rnr_sent > 0);
    assert!(
        sim.done.is_empty(),
        "nothing completes while the receiver has no buffers"
    );
    sim.rx_credits[1] = usize::MAX;
    sim.run_until_idle(sim.now + 60_000 * MS);
    check_exactly_once(&sim, 50);
    assert!(sim.done.iter().all(|(_, s)| *s == Status::Ok));
}

/// A receiver out of buffers refuses a whole window at once: that is one back-off (40-120 µs),
/// after which the window goes again, not a back-off doubled for each refused datagram (the
/// 32nd would have waited 40 µs * 2^31, the 1 s cap).
#[test]
fn a_window_refused_at_once_backs_off_once() {
    let mut sim = Sim::new(9, Faults::default());
    sim.qp[0].set_rnr_retry(7);
    sim.rx_credits[1] = 0;
    for i in 0..32 {
        sim.send(0, i, &payload(i));
    }
    while sim.qp[0].stats().rnr_received < 32 {
        assert!(sim.step(), "the refusals arrive");
    }
    let refused = sim.now;
    sim.rx_credits[1] = usize::MAX;
    while sim.delivered[1].len() < 32 {
        assert!(sim.step(), "the window goes again");
    }
    assert!(
        sim.now - refused < MS,
        "delivered {} µs after the refusals",
        (sim.now - refused) / US
    );
    sim.run_until_idle(sim.now + 1_000 * MS);
    check_exactly_once(&sim, 32);
}

#[test]
fn rnr_retries_exhausted() {
    let mut sim = Sim::new(8, Faults::default());
    sim.qp[0].set_rnr_retry(3);
    sim.rx_credits[1] = 0;
    sim.send(0, 1, &payload(1));
    sim.run_until_idle(60_000 * MS);
    assert_eq!(sim.done, vec![(1, Status::Rnr)]);
    assert_eq!(
        sim.qp[0].stats().rnr_received,
        4,
        "three retries after the first refusal"
    );
    // The window moved on: a later send (with buffers) gets through.
    sim.rx_credits[1] = usize::MAX;
    sim.send(0, 2, &payload(2));
    sim.run_until_idle(sim.now + 60_000 * MS);
    assert_eq!(sim.done.last(), Some(&(2, Status::Ok)));
    assert_eq!(sim.delivered[1], vec![payload(2)]);
}

/// A head the slot holds (`send_head_to`: an upper layer's header before application memory,
/// payload unchecked) arrives whole with its tail, and its completion gives back no buffer when
/// acknowledged, and what the caller posts to send it again when it failed: room for the SRD
/// header, then the head.
#[test]
fn a_held_head_comes_back_only_when_its_send_failed() {
    let mut sim = Sim::new(18, Faults::default());
    let cfg = Config {
        qkey: QKEYS[0],
        checksum_payloads: false,
        ..Config::default()
    };
    sim.qp[0] = Transport::new(cfg, 18);
    sim.qp[0].set_rnr_retry(1);
    let tail = payload(7).repeat(40);
    let tail_mem = IoVec::from_mut_slice(Vec::leak(tail.clone()));
    let head = [0xA5u8; 32];
    let dest = PeerKey {
        addr: 1u8,
        qkey: QKEYS[1],
    };
    let p = sim.qp[0].peer_index(dest, sim.now);
    let mut write = |b: &mut [u8]| b.copy_from_slice(&head);
    sim.qp[0].send_head_to(sim.now, p, 1, head.len(), tail_mem, &mut write);
    sim.run_until_idle(1_000 * MS);
    assert_eq!(sim.done, vec![(1, Status::Ok)]);
    assert_eq!(sim.delivered[1], vec![[&head[..], &tail[..]].concat()]);
    assert_eq!(
        sim.returned,
        vec![(1, Vec::new())],
        "nothing lent, nothing back"
    );
    // Refused until the retries run out: the bytes to send it again come back.
    sim.rx_credits[1] = 0;
    sim.qp[0].send_head_to(sim.now, p, 2, head.len(), tail_mem, &mut write);
    sim.run_until_idle(sim.now + 60_000 * MS);
    assert_eq!(sim.done.last(), Some(&(2, Status::Rnr)));
    let (wr, back) = sim.returned.last().unwrap();
    assert_eq!((*wr, back.len()), (2, DATA_HEADER + head.len()));
    assert_eq!(&back[DATA_HEADER..], &head[..]);
    // A head too long to hold, and any head where payloads are checked, go in a buffer of
    // their own, which comes back.
    sim.rx_credits[1] = usize::MAX;
    let long = [0x5Au8; INLINE_HEAD];
    let mut write_long = |b: &mut [u8]| b.copy_from_slice(&long);
    sim.qp[0].send_head_to(sim.now, p, 3, long.len(), tail_mem, &mut write_long);
    sim.run_until_idle(sim.now + 1_000 * MS);
    assert_eq!(sim.done.last(), Some(&(3, Status::Ok)));
    assert_eq!(
        sim.delivered[1].last(),
        Some(&[&long[..], &tail[..]].concat())
    );
    let (wr, back) = sim.returned.last().unwrap();
    assert_eq!((*wr, back.len()), (3, DATA_HEADER + long.len()));
}

#[test]
fn dead_peer_fails_everything_in_bounded_time() {
    let mut sim = Sim::new(
        9,
        Faults {
            loss: 100.0,
            ..Faults::default()
        },
    );
    for i in 0..100 {
        sim.send(0, i, &payload(i));
    }
    sim.run_until_idle(60_000 * MS);
    assert_eq!(sim.done.len(), 100);
    assert!(sim.done.iter().all(|(_, s)| *s == Status::Unreachable));
    assert!(
        sim.now <= 10_000 * MS,
        "declared unreachable after the configured silence ({} ms)",
        sim.now / MS
    );
}

#[test]
fn sequence_numbers_wrap() {
    let mut sim = Sim::new(
        10,
        Faults {
            loss: 5.0,
            jitter_us: 50,
            ..Faults::default()
        },
    );
    // Establish both directions' state, then move it near the wrap point.
    sim.send(0, 0, &payload(0));
    sim.run_until_idle(10_000 * MS);
    let p = sim.qp[0].index[&PeerKey {
        addr: 1,
        qkey: QKEYS[1],
    }];
    sim.qp[0].peers[p].next_seq = u32::MAX - 100;
    sim.qp[0].peers[p].base = u32::MAX - 100;
    let r = sim.qp[1].index[&PeerKey {
        addr: 0,
        qkey: QKEYS[0],
    }];
    sim.qp[1].peers[r].expected = u32::MAX - 100;
    for i in 1..400 {
        sim.send(0, i, &payload(i));
    }
    sim.run_until_idle(sim.now + 600_000 * MS);
    check_exactly_once(&sim, 400);
    assert!(sim.done.iter().all(|(_, s)| *s == Status::Ok));
    assert!(
        sim.qp[0].peers[p].next_seq < 1000,
        "sequence numbers wrapped past zero"
    );
}

#[test]
fn wrong_qkey_and_garbage_are_dropped_and_counted() {
    let mut t: Transport<u8> = Transport::new(
        Config {
            qkey: 5,
            ..Config::default()
        },
        1,
    );
    let mut d = [0u8; 40];
    Repr::Data {
        dst_qkey: 6,
        src_qkey: 1,
        seq: 0,
        base: 0,
        ack: None,
    }
    .emit(&mut d);
    wire::seal(&mut d, true);
    assert_eq!(t.handle_datagram(0, 1, &d, true), Arrival::Nothing);
    assert_eq!(t.stats().dropped_bad_qkey, 1);
    assert_eq!(t.handle_datagram(0, 1, &d[..7], true), Arrival::Nothing);
    assert_eq!(t.handle_datagram(0, 1, &[0xff; 40], true), Arrival::Nothing);
    assert_eq!(t.stats().dropped_malformed, 2);
    // A damaged one too.
    let mut bad = d;
    Repr::Data {
        dst_qkey: 5,
        src_qkey: 1,
        seq: 3,
        base: 0,
        ack: None,
    }
    .emit(&mut bad);
    wire::seal(&mut bad, true);
    bad[30] ^= 4;
    assert_eq!(t.handle_datagram(0, 1, &bad, true), Arrival::Nothing);
    assert_eq!(t.stats().dropped_malformed, 3);
    Repr::Data {
        dst_qkey: 5,
        src_qkey: 1,
        seq: 0,
        base: 0,
        ack: None,
    }
    .emit(&mut d);
    wire::seal(&mut d, true);
    assert!(matches!(
        t.handle_datagram(0, 1, &d, true),
        Arrival::Deliver { .. }
    ));
    assert_eq!(
        t.handle_datagram(0, 1, &d, true),
        Arrival::Nothing,
        "duplicate"
    );
    // A restarted peer (new QKEY, same address) starts fresh: its sequence 0 is new data.
    Repr::Data {
        dst_qkey: 5,
        src_qkey: 2,
        seq: 0,
        base: 0,
        ack: None,
    }
    .emit(&mut d);
    wire::seal(&mut d, true);
    assert!(matches!(
        t.handle_datagram(0, 1, &d, true),
        Arrival::Deliver { .. }
    ));
    // A forged ACK for a peer we never sent to changes nothing.
    let mut a = [0u8; wire::ACK_LEN];
    Repr::Ack {
        dst_qkey: 5,
        src_qkey: 9,
        cum: 100,
        sack: wire::Sack::of(&(0..wire::SACK_BITS).collect::<Vec<_>>()),
    }
    .emit(&mut a);
    wire::seal(&mut a, true);
    assert_eq!(t.handle_datagram(0, 3, &a, true), Arrival::Nothing);
    assert_eq!(t.outstanding(), 0);
}

/// A data datagram from `src` to `dst` with sequence `seq`, sealed.
fn data(dst: u32, src: u32, seq: u32) -> [u8; 40] {
    let mut d = [0u8; 40];
    Repr::Data {
        dst_qkey: dst,
        src_qkey: src,
        seq,
        base: 0,
        ack: None,
    }
    .emit(&mut d);
    wire::seal(&mut d, true);
    d
}

/// `docs/addressing.md`: QKEY 0 reaches only an endpoint bound to a service the application
/// named; the sender learns the real QKEY from the first answer and carries on under it.
#[test]
fn a_peer_known_by_node_and_service_is_reached_and_learned() {
    let cfg = |qkey, accept_unkeyed| Config {
        qkey,
        accept_unkeyed,
        ..Config::default()
    };
    // An endpoint on a random port refuses QKEY 0; a named one accepts it.
    let mut unnamed: Transport<u8> = Transport::new(cfg(5, false), 1);
    assert_eq!(
        unnamed.handle_datagram(0, 1, &data(0, 7, 0), true),
        Arrival::Nothing
    );
    assert_eq!(unnamed.stats().dropped_bad_qkey, 1);
    let mut server: Transport<u8> = Transport::new(cfg(5, true), 2);
    // A source QKEY of 0 names nobody: refused even by a named endpoint.
    assert_eq!(
        server.handle_datagram(0, 1, &data(0, 0, 0), true),
        Arrival::Nothing
    );
    // The client (QKEY 7, at address 1) knows the server (address 2) by address only.
    let mut client: Transport<u8> = Transport::new(cfg(7, false), 3);
    let unkeyed = PeerKey { addr: 2u8, qkey: 0 };
    client.send(0, unkeyed, 11, vec![0u8; 64]);
    let Some(Transmit::Data { peer, seq, .. }) = client.poll_transmit() else {
        panic!("nothing sent");
    };
    let [head, tail] = client.datagram(peer, seq).unwrap();
    let first = [head, tail].concat();
    assert!(matches!(
        server.handle_datagram(0, 1, &first, true),
        Arrival::Deliver { src_qkey: 7, .. }
    ));
    server.flush_acks();
    // The server's ack carries its real QKEY: the client takes it, completes the send and
    // addresses the server by it from now on.
    let mut learned = false;
    while let Some(t) = server.poll_transmit() {
        if let Transmit::Ctrl { bytes, len, .. } = t {
            client.handle_datagram(1, 2, &bytes[..len], true);
            learned = true;
        }
    }
    assert!(learned, "the server acknowledged");
    assert_eq!(client.stats().qkeys_learned, 1);
    assert!(matches!(
        client.poll_completion(),
        Some((11, Status::Ok, _))
    ));
    client.send(2, PeerKey { addr: 2u8, qkey: 5 }, 12, vec![0u8; 64]);
    let Some(Transmit::Data { peer, seq, .. }) = client.poll_transmit() else {
        panic!("nothing sent");
    };
    let next = client.datagram(peer, seq).unwrap().concat();
    assert!(matches!(
        server.handle_datagram(3, 1, &next, true),
        Arrival::Deliver { .. }
    ));
    assert_eq!(
        server.handle_datagram(3, 1, &next, true),
        Arrival::Nothing,
        "the same sequence space: a copy is a duplicate"
    );
}

#[test]
fn ack_overhead_is_low_in_bulk() {
    let mut sim = Sim::new(11, Faults::default());
    sim.latency = 50 * US;
    for i in 0..20_000 {
        sim.send(0, i, &payload(i));
    }
    sim.run_until_idle(100_000 * MS);
    check_exactly_once(&sim, 20_000);
    let acks = sim.qp[1].stats().acks_sent as f64;
    assert!(
        acks / 20_000.0 < 0.5,
        "acks per datagram: {}",
        acks / 20_000.0
    );
}

/// Losses are found by the acknowledgements of later datagrams, not by the retransmission
/// timer (whose back-off random loss would stretch to max_rto): 6,000 datagrams through 20 %
/// loss take well under a second of simulated time (8.6 s before time-based loss detection).
/// Reordering is told from loss: retransmissions that prove spurious widen the reordering
/// window instead of repeating (with 3 % loss and 300 µs of jitter, ~250 retransmissions, not
/// the ~3,000 of a fixed window).
#[test]
fn losses_are_found_by_the_ack_clock_and_reordering_is_not_loss() {
    for (seed, loss, jitter_us, max_ms, max_retransmits) in
        [(1u64, 20.0, 0, 2_000, 4_000), (2, 3.0, 300, 1_000, 600)]
    {
        let mut sim = Sim::new(
            seed,
            Faults {
                loss,
                jitter_us,
                ..Faults::default()
            },
        );
        sim.latency = 20 * US;
        for i in 0..6000 {
            sim.send(0, i, &payload(i));
        }
        sim.run_until_idle(600_000 * MS);
        check_exactly_once(&sim, 6000);
        assert!(sim.done.iter().all(|(_, s)| *s == Status::Ok));
        let retransmits = sim.qp[0].stats().retransmits;
        assert!(
            sim.now < max_ms * MS,
            "loss {loss} %, jitter {jitter_us} µs: {} ms of simulated time",
            sim.now / MS
        );
        assert!(
            retransmits < max_retransmits,
            "loss {loss} %, jitter {jitter_us} µs: {retransmits} retransmissions"
        );
    }
}

#[test]
fn an_answer_in_the_same_pass_carries_the_ack() {
    let mut sim = Sim::new(11, Faults::default());
    sim.manual_acks = true;
    sim.send_roomy(0, 1, b"request");
    sim.step();
    assert_eq!(sim.delivered[1], vec![b"request".to_vec()]);
    // b answers in the pass that received the request, then ends the pass.
    sim.send_roomy(1, 2, b"answer");
    sim.qp[1].flush_acks();
    let b = sim.qp[1].stats();
    assert_eq!(
        (b.acks_sent, b.acks_piggybacked),
        (1, 1),
        "one ack, on the answer"
    );
    sim.step();
    assert_eq!(sim.delivered[0], vec![b"answer".to_vec()]);
    // a has nothing to answer with: its pass ends with a plain ack.
    sim.qp[0].flush_acks();
    sim.run_until_idle(1000 * MS);
    let a = sim.qp[0].stats();
    assert_eq!((a.acks_sent, a.acks_piggybacked), (1, 0));
    let mut done = sim.done.clone();
    done.sort_unstable_by_key(|d| d.0);
    assert_eq!(done, vec![(1, Status::Ok), (2, Status::Ok)]);
    assert_eq!((a.retransmits, sim.qp[1].stats().retransmits), (0, 0));
    // An ack is never left for later: a pass that received and answered nothing acks at its end.
    sim.send_roomy(0, 3, b"lone");
    sim.step();
    sim.qp[1].flush_acks();
    assert_eq!(sim.qp[1].stats().acks_sent, 2);
    sim.run_until_idle(1000 * MS);
    assert_eq!(sim.done.len(), 3);
}

/// Delayed acks: a stream is acked every `ack_every` datagrams (or after `ack_delay`), the
/// last datagram's ack leaves at its deadline (the timer the owner drives: `poll_timeout`),
/// nothing is retransmitted on a clean path, and everything still arrives exactly once
/// through loss, duplication and reordering (a gap or a duplicate is acked at once).
#[test]
fn delayed_acks_thin_the_stream_and_lose_nothing() {
    let mut sim = Sim::new(21, Faults::default());
    sim.delay_acks = true;
    for i in 0..4_000 {
        sim.send(0, i, &payload(i));
    }
    sim.run_until_idle(100_000 * MS);
    check_exactly_once(&sim, 4_000);
    let (a, b) = (sim.qp[0].stats(), sim.qp[1].stats());
    assert_eq!(a.retransmits, 0);
    let per = b.acks_sent as f64 / 4_000.0;
    assert!(per <= 0.3, "acks per datagram with delayed acks: {per}");

    // A lone datagram: nothing to carry its ack, which leaves at the deadline.
    let mut sim = Sim::new(22, Faults::default());
    sim.delay_acks = true;
    sim.send(0, 1, b"lone");
    sim.step(); // the datagram arrives; the pass ends with the ack kept back
    assert_eq!(sim.qp[1].stats().acks_sent, 0);
    let deadline = sim.qp[1]
        .poll_timeout()
        .expect("the kept ack has a deadline");
    assert_eq!(deadline, sim.now + Config::default().ack_delay);
    sim.run_until_idle(1_000 * MS);
    assert_eq!(sim.done, vec![(1, Status::Ok)]);
    assert_eq!(sim.qp[1].stats().acks_sent, 1);
    assert_eq!(sim.qp[0].stats().retransmits, 0);

    for (seed, loss) in [(23u64, 5.0), (24, 20.0)] {
        lossy_run(seed, loss, true);
    }
}

/// Datagrams put on the wire in one burst share their send time. An ack for the first of them
/// says nothing about the rest, whose ack the receiver may rightly keep back for `ack_delay`
/// when they land in its next pass: they were sent after the acknowledged ones (RFC 8985
/// §6.2 orders equal send times by sequence) and are not suspect. Before, each such tail was
/// retransmitted a round trip and a reordering window later: 2–4 % of the datagrams of a
/// stream of small writes on loopback, each also narrowing the window.
#[test]
fn the_rest_of_a_burst_waits_for_its_delayed_ack() {
    let mut sim = Sim::new(31, Faults::default());
    sim.manual_acks = true;
    // One exchange gives the sender a round-trip estimate (20 µs).
    sim.send(0, 0, &payload(0));
    sim.step();
    sim.qp[1].flush_acks();
    sim.step();
    sim.pump(0);
    assert_eq!(sim.done, vec![(0, Status::Ok)]);
    // A burst of three; the third reaches the receiver in its next pass.
    for i in 1..=3 {
        sim.send(0, i, &payload(i));
    }
    sim.pump(0);
    assert_eq!(sim.wire.len(), 3);
    sim.wire[2].0 += US;
    sim.step();
    assert_eq!(sim.delivered[1].len(), 3);
    assert!(
        !sim.qp[1].flush_acks_delaying(sim.now),
        "two in order are acked at once"
    );
    sim.step();
    assert_eq!(sim.delivered[1].len(), 4);
    assert!(
        sim.qp[1].flush_acks_delaying(sim.now),
        "the ack of a lone third waits"
    );
    sim.run_until_idle(100 * MS);
    let mut done = sim.done.clone();
    done.sort_unstable_by_key(|d| d.0);
    assert_eq!(done, (0..=3).map(|i| (i, Status::Ok)).collect::<Vec<_>>());
    assert_eq!(sim.qp[0].stats().retransmits, 0);
    assert_eq!(sim.delivered[1].len(), 4, "nothing delivered twice");
}

/// A datagram that ends in the caller's memory (a tail, sent from where it lies) arrives as
/// its head and tail together, exactly once through loss, duplication and reordering, and
/// never carries a piggybacked ack (the trailer would land before the tail); when payloads
/// are checksummed the tail is copied in at post time and the datagram has none.
#[test]
fn tails_arrive_whole_and_make_room_for_acks() {
    let faults = Faults {
        loss: 10.0,
        dup: 5.0,
        corrupt: 0.0,
        jitter_us: 200,
    };
    let tails: Vec<Vec<u8>> = (0..300u64).map(payload).collect();
    for checked in [false, true] {
        let mut sim = Sim::new(31, faults);
        for q in &mut sim.qp {
            q.cfg.checksum_payloads = checked;
        }
        // b has data of its own going back, so acks are due when a's datagrams leave (acks
        // flushed by hand meanwhile, so that they can wait for a datagram to ride on).
        sim.manual_acks = true;
        let (mut kept, mut carried) = (0, 0);
        for i in 0..300u64 {
            sim.send_roomy(1, 1000 + i, b"back");
            while (sim.delivered[0].len() as u64) <= i {
                sim.step();
            }
            // Even: a buffer as the efa devices give, room for the payload and a trailer.
            // Odd: room for the head only.
            let roomy = i % 2 == 0;
            let cap = if roomy { 400 + ACK_TRAILER } else { 0 };
            let mut d = vec![0u8; DATA_HEADER + 8 + cap];
            d[DATA_HEADER..DATA_HEADER + 8].copy_from_slice(&i.to_be_bytes());
            // Leaked: memory the transport may read until its send completes.
            let tail = IoVec::from_mut_slice(Vec::leak(tails[i as usize].clone()));
            let dest = PeerKey {
                addr: 1,
                qkey: QKEYS[1],
            };
            let due = sim.qp[0].acks_owed();
            let before = sim.qp[0].stats().acks_piggybacked;
            sim.qp[0].send_prefix(sim.now, dest, i, d, DATA_HEADER + 8, tail);
            let rode = sim.qp[0].stats().acks_piggybacked > before;
            if let Some(s) = sim.qp[0].peers[0].slots.back()
                && s.wr_id == i
            {
                if checked {
                    assert!(s.tail.is_empty(), "checksummed payloads are copied in");
                } else if roomy {
                    assert_eq!(s.tail.is_empty(), rode, "copied in only to carry an ack");
                } else {
                    assert!(!s.tail.is_empty() && !rode, "no room: the tail stays out");
                    kept += 1;
                }
                assert!(!rode || due, "an ack rides only when owed");
                carried += usize::from(rode);
            }
            sim.qp[0].flush_acks();
            sim.qp[1].flush_acks();
        }
        assert!(carried > 50, "acks rode on roomy datagrams ({carried})");
        if !checked {
            assert!(kept > 50, "tails sent in place ({kept})");
        }
        sim.manual_acks = false;
        sim.run_until_idle(600_000 * MS);
        let mut got: Vec<Vec<u8>> = sim.delivered[1].clone();
        got.sort();
        got.dedup();
        assert_eq!(got.len(), 300, "each arrives once");
        for d in &sim.delivered[1] {
            let i = u64::from_be_bytes(d[..8].try_into().unwrap());
            assert_eq!(&d[8..], &tails[i as usize][..], "head then tail, intact");
        }
        assert_eq!(sim.delivered[1].len(), 300, "no duplicate delivered");
        assert!(sim.done.iter().all(|(_, s)| *s == Status::Ok));
    }
}

/// What a device may keep back for its owner's next poll (`may_hold`): only first
/// transmissions without an ack, each behind an older datagram of its peer already on the
/// wire, fewer than the limit. The first datagram to an idle peer always goes at once (a
/// ping-pong never waits), and a retransmission or a datagram carrying an ack never waits.
#[test]
fn only_datagrams_behind_one_on_the_wire_may_wait_for_the_next_poll() {
    let mut sim = Sim::new(31, Faults::default());
    sim.manual_acks = true;
    sim.send(0, 1, b"first");
    assert!(
        !sim.qp[0].may_hold(32),
        "the first datagram to an idle peer goes at once"
    );
    sim.pump(0);
    assert!(!sim.qp[0].may_hold(32), "nothing waits: nothing to hold");
    for i in 2..=4 {
        sim.send(0, i, b"more");
    }
    assert!(
        sim.qp[0].may_hold(32),
        "behind `first`, on the wire and unacknowledged"
    );
    assert!(
        !sim.qp[0].may_hold(3),
        "three waiting: the limit is reached"
    );
    // `first` is acknowledged: the oldest waiting datagram is now the first unacknowledged.
    sim.step();
    sim.qp[1].flush_acks();
    sim.pump(1);
    sim.step();
    assert!(
        !sim.qp[0].may_hold(32),
        "nothing of this peer is on the wire any more"
    );
    sim.run_until_idle(1000 * MS);
    // b has `answer` on the wire, unacknowledged, when a datagram from a arrives: what b sends
    // next carries the ack it owes, and goes at once.
    sim.send_roomy(1, 10, b"answer");
    sim.pump(1);
    sim.send(0, 5, b"to b");
    sim.pump(0);
    while sim.delivered[1].last().map(Vec::as_slice) != Some(b"to b".as_slice()) {
        assert!(sim.step(), "`to b` arrives");
    }
    sim.send_roomy(1, 11, b"answer 2");
    assert!(!sim.qp[1].may_hold(32), "it carries an ack");
    sim.pump(1);
    sim.send_roomy(1, 12, b"answer 3");
    assert!(sim.qp[1].may_hold(32), "no ack owed now, behind `answer`");
    sim.pump(1);
    sim.qp[0].flush_acks();
    sim.pump(0);
    sim.run_until_idle(1000 * MS);
    // A retransmission never waits: lose everything a sends for a while.
    sim.faults.loss = 100.0;
    sim.send(0, 20, b"lost");
    sim.pump(0);
    sim.send(0, 21, b"lost too");
    sim.pump(0);
    sim.faults.loss = 0.0;
    sim.now += 200 * MS;
    sim.qp[0].handle_timeout(sim.now);
    assert!(sim.qp[0].has_transmits());
    assert!(!sim.qp[0].may_hold(32), "retransmissions go at once");
    sim.run_until_idle(1000 * MS);
    let mut done = sim.done.clone();
    done.sort_unstable_by_key(|d| d.0);
    assert!(done.iter().all(|d| d.1 == Status::Ok), "{done:?}");
    assert_eq!(done.len(), 10);
}

/// A receiver that runs 2 ms of every 10 (descheduled on a loaded host) under 3 % loss,
/// duplication and corruption with 300 µs of jitter: each of its silences expires the sender's
/// timer several times, but the threshold is taken once per silence (halving it at each expiry
/// left it at the minimum and the window to crawl back one datagram per round trip), so each
/// turn still moves a good part of a window; and every datagram arrives exactly once.
#[test]
fn a_descheduled_receiver_does_not_collapse_the_window() {
    let mut sim = Sim::new(
        11,
        Faults {
            loss: 3.0,
            dup: 3.0,
            corrupt: 3.0,
            jitter_us: 300,
        },
    );
    sim.latency = 20 * US;
    sim.delay_acks = true;
    sim.deschedule = Some((10 * MS, 2 * MS));
    for i in 0..6000 {
        sim.send(0, i, &payload(i));
    }
    sim.run_until_idle(600_000 * MS);
    check_exactly_once(&sim, 6000);
    assert!(sim.done.iter().all(|(_, s)| *s == Status::Ok));
    let st = sim.qp[0].stats();
    // Every silence shows as timeouts, but the window grows back within a turn: more than the
    // 4 datagrams a collapsed one allows.
    let turns = sim.now / (10 * MS) + 1;
    assert!(
        6000 / turns >= 15,
        "{} datagrams per turn ({} ms, {st:?})",
        6000 / turns,
        sim.now / MS
    );
    assert!(st.retransmits < 6000, "{st:?}");
}

/// A receiver silent 2.5 ms of every 4 (busy sending a window of its own, or descheduled),
/// nothing lost: a minimum RTO longer than the silences (5 ms, the UDP device's) sends nothing
/// twice but tail-loss probes, where the default 1 ms times out in them and sends datagrams
/// again that arrive twice.
#[test]
fn a_silence_shorter_than_the_minimum_rto_is_no_timeout() {
    for (min_rto, rides_out) in [(MS, false), (5 * MS, true)] {
        let mut sim = Sim::new(21, Faults::default()).with_min_rto(min_rto);
        sim.latency = 20 * US;
        sim.delay_acks = true;
        sim.deschedule = Some((4 * MS, 3 * MS / 2));
        for i in 0..20_000 {
            sim.send(0, i, &payload(i));
        }
        sim.run_until_idle(600_000 * MS);
        check_exactly_once(&sim, 20_000);
        let st = sim.qp[0].stats();
        let dups = sim.qp[1].stats().duplicates;
        if rides_out {
            assert_eq!(st.timeouts, 0, "min RTO {} ms: {st:?}", min_rto / MS);
            assert_eq!(
                st.retransmits,
                st.probes,
                "min RTO {} ms: {st:?}",
                min_rto / MS
            );
        } else {
            assert!(
                st.timeouts > 0 && dups > st.probes,
                "min RTO 1 ms: {st:?}, {dups} duplicates"
            );
        }
    }
}

/// Requests one at a time (a CTS, a handshake: one datagram, then silence until it is
/// answered) through 10 % loss: a lost one is found by a tail-loss probe after about two
/// round trips, not by the retransmission timer.
#[test]
fn a_lost_request_is_found_by_a_probe_not_the_timer() {
    let mut sim = Sim::new(
        5,
        Faults {
            loss: 10.0,
            ..Faults::default()
        },
    );
    sim.latency = 50 * US;
    sim.delay_acks = true;
    for i in 0..500 {
        sim.send(0, i, &payload(i));
        sim.run_until_idle(sim.now + 60_000 * MS);
    }
    check_exactly_once(&sim, 500);
    let st = sim.qp[0].stats();
    assert!(st.probes > 20, "{st:?}");
    assert!(
        st.timeouts * 4 < st.probes,
        "most losses are found by the probe: {st:?}"
    );
}

/// An ack that comes on data (`Config::defer_acks`) is kept until the owner applies it: the
/// data goes up at once, the send it acknowledges completes at `settle_acks`, with the round
/// trip measured to the ack's arrival. A timer that comes due meanwhile applies it first
/// instead of retransmitting, and a second ack on data applies the first before it is kept.
#[test]
fn an_ack_on_data_waits_for_settle_and_no_timer_fires_for_it() {
    let mut sim = Sim::new(41, Faults::default()).deferring_acks();
    sim.manual_acks = true;
    sim.send_roomy(0, 1, b"request");
    sim.step();
    sim.send_roomy(1, 2, b"answer");
    sim.qp[1].flush_acks();
    assert_eq!(sim.qp[1].stats().acks_piggybacked, 1);
    let answered_at = sim.now;
    sim.step();
    assert_eq!(sim.delivered[0], vec![b"answer".to_vec()]);
    // The answer went up; the request's completion waits with its ack.
    assert!(sim.qp[0].acks_kept_in());
    assert!(sim.qp[0].poll_completion().is_none());
    assert!(sim.done.is_empty());
    // Long past the request's retransmission timer: the kept ack is applied, not the timer.
    let late = sim.now + 500 * MS;
    sim.qp[0].handle_timeout(late);
    assert_eq!(sim.qp[0].stats().retransmits, 0);
    let (wr, status, _) = sim.qp[0].poll_completion().expect("the request completed");
    assert_eq!((wr, status), (1, Status::Ok));
    sim.qp[0].settle_acks();
    assert!(sim.qp[0].poll_completion().is_none(), "it completed once");
    // The round trip counts to the ack's arrival, not to the late timer.
    let srtt = sim.qp[0].peers[0].srtt.expect("a round-trip sample");
    assert!(srtt <= answered_at + sim.latency, "srtt {srtt}");

    // Two acks on data in a row, nothing applied in between: the first is applied when the
    // second comes, the second at `settle_acks`.
    sim.qp[0].flush_acks();
    sim.run_until_idle(sim.now + 1000 * MS);
    sim.done.clear();
    sim.send_roomy(0, 3, b"first");
    sim.step();
    // The answer to "first" carries its ack; "second" crosses it.
    sim.send_roomy(1, 5, b"one");
    sim.send_roomy(0, 4, b"second");
    sim.step_without_settling(0);
    assert!(sim.qp[0].acks_kept_in());
    // The answer to "second" carries the ack of both.
    sim.send_roomy(1, 6, b"two");
    sim.step_without_settling(0);
    assert_eq!(sim.delivered[0].len(), 3);
    let completed = |q: &mut Transport<u8>| {
        std::iter::from_fn(|| q.poll_completion())
            .map(|(w, s, _)| (w, s))
            .collect::<Vec<_>>()
    };
    let first = completed(&mut sim.qp[0]);
    assert_eq!(first, vec![(3, Status::Ok)], "the first ack, applied");
    sim.qp[0].settle_acks();
    let second = completed(&mut sim.qp[0]);
    assert_eq!(second, vec![(4, Status::Ok)], "the second, at settle_acks");
    assert_eq!(sim.qp[0].stats().retransmits, 0);
}

/// Both ways at once through loss, duplication, corruption and jitter, with acks kept on
/// data: every datagram arrives exactly once each way, every send completes once, and no
/// window count goes wrong (`check_window_counts` after each step).
#[test]
fn acks_kept_on_data_lose_nothing_both_ways_under_loss() {
    let faults = Faults {
        loss: 10.0,
        dup: 5.0,
        corrupt: 2.0,
        jitter_us: 200,
    };
    let mut sim = Sim::new(43, faults).deferring_acks();
    // Acks go on the next datagram back, or alone after `ack_delay` (`handle_timeout`).
    sim.manual_acks = true;
    let n = 400u64;
    // One datagram each way per 30 µs (a few round trips' worth of arrivals between): the
    // windows stay open, so acks ride on data and are kept.
    for i in 0..n {
        sim.send_roomy(0, i, &payload(i));
        sim.send_roomy(1, n + i, &payload(n + i));
        let until = sim.now + 30 * US;
        while sim.now < until && sim.step() {}
    }
    sim.run_until_idle(sim.now + 600_000 * MS);
    assert!(
        sim.steps_with_kept_acks > 50,
        "acks kept in {} steps, {:?}",
        sim.steps_with_kept_acks,
        sim.qp[0].stats()
    );
    let mut done: Vec<(u64, Status)> = sim.done.clone();
    done.sort_unstable_by_key(|d| d.0);
    assert_eq!(
        done,
        (0..2 * n).map(|w| (w, Status::Ok)).collect::<Vec<_>>()
    );
    for (side, from) in [(1usize, 0u64), (0, n)] {
        let mut got = sim.delivered[side].clone();
        got.sort();
        let mut want: Vec<Vec<u8>> = (from..from + n).map(payload).collect();
        want.sort();
        assert_eq!(got, want, "side {side} received each datagram exactly once");
    }
    assert!(sim.qp[0].stats().retransmits > 0);
}

/// A send that finds the window full while an ack that frees it is kept applies that ack and
/// goes on the wire at once, instead of waiting in the queue for the next `settle_acks`.
#[test]
fn a_send_into_a_window_a_kept_ack_frees_goes_at_once() {
    let mut sim = Sim::with_window(47, Faults::default(), 1).deferring_acks();
    sim.manual_acks = true;
    sim.send_roomy(0, 1, b"request");
    sim.step();
    sim.send_roomy(1, 2, b"answer");
    sim.step_without_settling(0);
    assert!(sim.qp[0].acks_kept_in());
    // The window (one datagram) holds the request until its kept ack is applied.
    sim.send_roomy(0, 3, b"next");
    assert!(
        matches!(sim.qp[0].poll_transmit(), Some(Transmit::Data { .. })),
        "the next request is on the wire"
    );
    assert_eq!(
        sim.qp[0].poll_completion().map(|(w, s, _)| (w, s)),
        Some((1, Status::Ok))
    );
}
