//! The efa provider's RDM tests (`common/efa_cases.rs`) with local peers through shm, as by
//! default (FI_EFA_ENABLE_SHM_TRANSFER=1): the hidden shm endpoint, the receive queue it shares
//! with the efa endpoint, and the MR keys it checks against the efa domain's registrations.

mod common;

const SHM_TRANSFER: &str = "1";
const RDM_DOMAIN: &str = "srd_lo-rdm";
const DEVICE_WAIT_FD: bool = true;
fn device_setup() {}
include!("common/efa_cases.rs");

/// A send or RMA to a local peer whose route is known is checked by shm, which holds our
/// limits (`open_peer_endpoint`): on a device whose MTU makes our inject size smaller than
/// shm's own, an inject past ours still fails with FI_EMSGSIZE, and one at it arrives whole;
/// an RMA with more than our one remote iov is refused.
#[test]
fn an_inject_through_shm_is_held_to_our_inject_size() {
    use fabric::prov::efa::device::sim::{SimDevice, SimNet};
    use fabric::prov::efa::srd::Config;
    use fabric::prov::efa::{EfaDomain, inject_size};

    init();
    let (domain, info) = domain_of(&EFA, &rdm_hints(), on_rdm_domain);
    let efa = domain
        .as_any()
        .and_then(|d| d.downcast_ref::<EfaDomain>())
        .expect("an efa domain");
    let net = SimNet::new(Default::default());
    let mtu = 1400;
    let node = || {
        let dev = SimDevice::open(&net, mtu, Config::default());
        let ep = efa.endpoint_on(&info, Box::new(dev)).expect("endpoint");
        Node::with_endpoint(&domain, &info, ep)
    };
    let (a, b) = (node(), node());
    let ab = a.insert_hex(&b.name_hex());
    b.insert_hex(&a.name_hex());
    let limit = inject_size(mtu);
    assert!(limit < 4096, "our inject size ({limit}) is below shm's");
    let data_sent = || {
        a.ep.as_any()
            .and_then(|e| e.downcast_ref::<RdmEndpoint>())
            .map(|e| e.device_stats().data_sent)
            .unwrap()
    };

    // The first send learns the route; the ones after it take the known one.
    for (round, len) in [(0u8, 8), (1, limit), (2, limit)] {
        let (src, sv) = buf(len);
        src.copy_from_slice(&pattern(len, round));
        let (dst, dv) = buf(len);
        b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 2, 0), false)
            .unwrap();
        let call = if round == 0 {
            Call::Plain
        } else {
            Call::Inject
        };
        let sv = [sv];
        let op = MsgOp {
            call,
            ..msg(&sv, ab, 0, 1, 0)
        };
        a.retry(|| a.ep.send(&op, false)).unwrap();
        src.fill(0xee);
        let r = wait_ok(&b, &a);
        assert_eq!((r.op_context, r.len), (2, len), "round {round}");
        assert!(dst == &pattern(len, round)[..], "data of round {round}");
    }
    assert_eq!(data_sent(), 0, "the peer was reached through shm");
    for len in [limit + 1, 4096] {
        let (_big, bigv) = buf(len);
        let bigv = [bigv];
        let op = MsgOp {
            call: Call::Inject,
            ..msg(&bigv, ab, 0, 1, 0)
        };
        assert_eq!(
            a.ep.send(&op, false),
            Err(Errno::MSGSIZE),
            "fi_inject of {len}"
        );
        let flagged = msg(&bigv, ab, 0, 1, FI_INJECT);
        assert_eq!(
            a.ep.send(&flagged, true),
            Err(Errno::MSGSIZE),
            "FI_INJECT on a {len}-byte tagged send"
        );
    }

    // Injected writes: the first learns the route, the second takes it; then the limits.
    let (target, tv) = buf(8192);
    let mr = b.reg(tv, FI_REMOTE_WRITE, 0);
    let rma_at = |len: usize| fabric::abi::types::fi_rma_iov {
        addr: target.as_ptr() as u64,
        len,
        key: mr.key(),
    };
    for round in 0..2u8 {
        let (src, sv) = buf(limit);
        src.copy_from_slice(&pattern(limit, 10 + round));
        let (sv, rma) = ([sv], [rma_at(limit)]);
        let op = fabric::util::ep::RmaOp {
            call: Call::Inject,
            ..rma_op(&sv, ab, &rma, 0)
        };
        a.retry(|| a.ep.write(&op)).unwrap();
        src.fill(0xee);
        let t = Instant::now();
        while target[..limit] != pattern(limit, 10 + round)[..] {
            b.cq.progress();
            a.cq.progress();
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "injected write {round}"
            );
        }
    }
    for len in [limit + 1, 4096] {
        let (_big, bigv) = buf(len);
        let (bigv, rma) = ([bigv], [rma_at(len)]);
        let op = fabric::util::ep::RmaOp {
            call: Call::Inject,
            ..rma_op(&bigv, ab, &rma, 0)
        };
        assert_eq!(
            a.ep.write(&op),
            Err(Errno::MSGSIZE),
            "fi_inject_write of {len}"
        );
    }
    let (_two, twov) = buf(16);
    let twov = [twov];
    let halves = [rma_at(8), rma_at(8)];
    assert_eq!(
        a.ep.write(&rma_op(&twov, ab, &halves, 3)),
        Err(Errno::INVAL),
        "two remote iovs (our rma_iov_limit is 1)"
    );
    assert_eq!(data_sent(), 0, "the writes went through shm");
}

/// A program whose local peers all go through shm never sees the ack timer's thread run once
/// its device is quiet and watched (`rdm::ack_timer`: ticking every 10 ms it preempted a
/// busy-polling ping-pong through shm some 200 times a second per process). The device is
/// still attended to as a NIC would be: with its process making no call at all, a message from
/// a peer that must use the device reaches the posted receive and the peer's send completes
/// (the watcher wakes the thread: `ack_timer::service_needed`). In a process of its own, so
/// that no other test's endpoint keeps the thread ticking.
#[test]
fn the_ack_timer_stays_parked_for_a_quiet_device_and_wakes_for_an_arrival() {
    const TEST: &str = "the_ack_timer_stays_parked_for_a_quiet_device_and_wakes_for_an_arrival";
    if role().as_deref() == Some("quiet") {
        let b = lo_node(CAPS, |_| ());
        child_say(&b.name_hex());
        // A first message while b polls: the peers know each other.
        let (d0, dv0) = buf(64);
        b.ep.recv(&msg(&[dv0], FI_ADDR_UNSPEC, 0, 80, 0), false)
            .unwrap();
        let r = b.wait(10).expect("the first message");
        assert_eq!((r.op_context, r.len), (80, 64));
        assert!(d0 == &pattern(64, 50)[..]);
        let (d, dv) = buf(64);
        b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 82, 0), false)
            .unwrap();
        // b polls as a program waiting on shm does, until its device is quiet and watched and
        // the thread has stopped: no round of it in 50 ms of polling.
        let quiet = || quiet_state(&b);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let before = RdmEndpoint::ack_timer_rounds();
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(50) {
                b.cq.progress();
            }
            if quiet() == (true, true) && RdmEndpoint::ack_timer_rounds() == before {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the ack timer's thread still runs for a quiet, watched device ({:?}, {} rounds)",
                quiet(),
                RdmEndpoint::ack_timer_rounds() - before
            );
        }
        child_say("quiet");
        // No call of ours until c's send has completed.
        assert_eq!(child_line(), "sent");
        let r = b.wait(10).expect("the second message");
        assert_eq!((r.op_context, r.len), (82, 64));
        assert!(d == &pattern(64, 51)[..], "the message intact");
        child_say("done");
        return;
    }
    let mut b = Peer::spawn(TEST, "quiet", &[]);
    let c = lo_node(CAPS, without_shm);
    let cb = c.insert_hex(&b.line());
    for (ctx, seed) in [(81, 50u8), (83, 51)] {
        if ctx == 83 {
            assert_eq!(b.line(), "quiet");
        }
        let (s, sv) = buf(64);
        s.copy_from_slice(&pattern(64, seed));
        c.ep.send(&msg(&[sv], cb, 0, ctx, 0), false).unwrap();
        let done = c.wait(10).expect("c's send completes");
        assert_eq!(done.op_context, ctx);
    }
    b.send_line("sent");
    assert_eq!(b.line(), "done");
    assert!(b.wait());
}

/// Configures an endpoint to reach local peers over its device, not through shm.
fn without_shm(ep: &dyn fabric::util::Endpoint) {
    ep.setopt(FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED, &[0])
        .unwrap()
}

/// Whether a node's device is quiet, and whether a watcher watches it.
fn quiet_state(n: &Node) -> (bool, bool) {
    n.ep.as_any()
        .and_then(|e| e.downcast_ref::<RdmEndpoint>())
        .expect("an efa RDM endpoint")
        .device_quiet_state()
}

/// Runs `step` over and over for `ms`: how many times, and how many runs of the ack timer's
/// thread (or settings of its timer) gaps of this process excuse: a gap of half a tick or more
/// between steps may let the timer fire, and again every tick while it lasts.
fn repeat_for(ms: u64, mut step: impl FnMut()) -> (u64, u64) {
    let (start, mut last) = (Instant::now(), Instant::now());
    let (mut steps, mut excused) = (0u64, 0u64);
    while start.elapsed() < Duration::from_millis(ms) {
        step();
        steps += 1;
        let gap = last.elapsed();
        if gap >= Duration::from_millis(1) {
            excused += 2 * (1 + gap.as_millis() as u64 / 2);
        }
        last = Instant::now();
    }
    (steps, excused)
}

/// While the applications keep calling, the ack timer's thread does not run (`rdm::ack_timer`):
/// each call pushes its endpoint's timer back, and the thread runs only when an application
/// stops calling (`acks_leave_even_when_the_receiver_stops_calling` and the others after it
/// check that it still does). A ping-pong over the device keeps an ack back at nearly every
/// call, for the answer to carry: ticking every 2 ms while anything was kept back, the thread
/// ran some 500 times a second, each time preempting a busy-polling process. In a process of
/// its own, so that no other test's endpoint fires its timer.
#[test]
fn the_ack_timer_does_not_run_while_the_applications_keep_calling() {
    const TEST: &str = "the_ack_timer_does_not_run_while_the_applications_keep_calling";
    if role().as_deref() == Some("pingpong") {
        let (a, b) = (lo_node(CAPS, without_shm), lo_node(CAPS, without_shm));
        let ab = a.insert_hex(&b.name_hex());
        let ba = b.insert_hex(&a.name_hex());
        let (_, sv) = buf(8);
        let (_, dv) = buf(8);
        let hop = |from: &Node, to: &Node, addr: u64| {
            to.ep
                .recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 1, 0), false)
                .unwrap();
            from.ep.send(&msg(&[sv], addr, 0, 2, 0), false).unwrap();
            assert_eq!(wait_ok(to, from).op_context, 1);
            assert_eq!(wait_ok(from, to).op_context, 2);
        };
        let ping_pong = |ms: u64| {
            repeat_for(ms, || {
                hop(&a, &b, ab);
                hop(&b, &a, ba);
            })
        };
        ping_pong(50);
        let before = RdmEndpoint::ack_timer_rounds();
        let (rounds, excused) = ping_pong(300);
        let ran = RdmEndpoint::ack_timer_rounds() - before;
        assert!(rounds > 100, "{rounds} round trips in 300 ms");
        assert!(
            ran <= excused + 2,
            "the ack timer's thread ran {ran} times in 300 ms of ping-pong ({rounds} round \
             trips, {excused} runs excused by gaps of this process)"
        );
        child_say("done");
        return;
    }
    let mut p = Peer::spawn(TEST, "pingpong", &[]);
    assert_eq!(p.line(), "done");
    assert!(p.wait());
}

/// Many endpoints called in turn set the ack timer no more often than one does: a process has
/// one timer, due at the earliest of its endpoints' deadlines, and a call moves it only when
/// that deadline was its own and is near. With a timer per endpoint, each pushed its own back
/// once a millisecond while called: `bench/many_peers` (65 endpoints) made 1.5
/// `timerfd_settime` calls a message and ran 1.2× as long. Its traffic here, smaller: a
/// sender sends 8-byte messages to 16 receivers in turn, and every receiver's CQ is read
/// between sends. In a process of its own.
#[test]
fn the_ack_timer_is_set_no_more_often_for_many_endpoints_than_for_one() {
    const TEST: &str = "the_ack_timer_is_set_no_more_often_for_many_endpoints_than_for_one";
    const SINKS: usize = 16;
    if role().as_deref() == Some("sinks") {
        let sender = lo_node(CAPS, without_shm);
        let sinks: Vec<(Node, u64)> = (0..SINKS)
            .map(|_| {
                let sink = lo_node(CAPS, without_shm);
                let addr = sender.insert_hex(&sink.name_hex());
                (sink, addr)
            })
            .collect();
        let (_, sv) = buf(8);
        let (_, dv) = buf(8);
        for (sink, _) in &sinks {
            sink.ep
                .recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 1, 0), false)
                .unwrap();
        }
        // One send to each receiver in turn, waited for while every CQ is read.
        let mut next = 0;
        let mut traffic = |ms: u64| {
            repeat_for(ms, || {
                let (sink, addr) = &sinks[next % SINKS];
                next += 1;
                sender
                    .retry(|| sender.ep.send(&msg(&[sv], *addr, 0, 2, 0), false))
                    .unwrap();
                let (mut sent_done, mut arrived) = (false, false);
                while !(sent_done && arrived) {
                    sent_done |= sender.cq.read(1, |e| assert_eq!(e.op_context, 2)).is_ok();
                    for (other, _) in &sinks {
                        if other.cq.read(1, |e| assert_eq!(e.op_context, 1)).is_ok() {
                            assert!(std::ptr::eq(other, sink), "arrived at another receiver");
                            arrived = true;
                            other
                                .ep
                                .recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 1, 0), false)
                                .unwrap();
                        }
                    }
                }
            })
        };
        traffic(50);
        let (arms, ran) = (
            RdmEndpoint::ack_timer_arms(),
            RdmEndpoint::ack_timer_rounds(),
        );
        let (sent, excused) = traffic(300);
        let arms = RdmEndpoint::ack_timer_arms() - arms;
        let ran = RdmEndpoint::ack_timer_rounds() - ran;
        assert!(sent > 1000, "{sent} messages in 300 ms");
        assert!(
            ran <= excused + 2,
            "the ack timer's thread ran {ran} times in 300 ms of calls ({excused} runs \
             excused by gaps of this process)"
        );
        // Each call that pushes the process's deadline moves it about a millisecond: a
        // setting a millisecond, and a little more, as the receivers' calls lag the sender's.
        // A timer for each endpoint was set 17 times a millisecond.
        assert!(
            arms <= 600 + excused,
            "the ack timer was set {arms} times in 300 ms ({sent} messages to {SINKS} \
             receivers in turn, {excused} settings excused by gaps of this process)"
        );
        child_say("done");
        return;
    }
    let mut p = Peer::spawn(TEST, "sinks", &[]);
    assert_eq!(p.line(), "done");
    assert!(p.wait());
}

/// A child forked after the watcher of quiet devices started has the watcher's registry but
/// not its thread: a device it left quiet must be looked at on its own schedule
/// (`QUIET_POLL_PERIOD`), not left to a watcher that does not run there. In a process of its
/// own, which starts the watcher and then forks; the forked child opens a receiver (local
/// peers through shm, so its device goes quiet) and a sender that must use the device, and
/// waits up to 5 s for the message. It guards two faults, each of which left the receiver's
/// device unread for good: a poll counted twice, so that the one let through in eight never
/// reached the device (`Quiet::skip_again`), and a device counted as watched by the parent's
/// thread, which ignores the child's token (the watcher's pid check).
#[test]
fn a_forked_child_still_sees_arrivals_on_a_quiet_device() {
    const TEST: &str = "a_forked_child_still_sees_arrivals_on_a_quiet_device";
    if role().as_deref() == Some("forks") {
        // The watcher starts with the first quiet device that has a wait fd.
        let a = lo_node(CAPS, |_| ());
        let deadline = Instant::now() + Duration::from_secs(5);
        while quiet_state(&a) != (true, true) {
            a.cq.progress();
            assert!(Instant::now() < deadline, "never quiet and watched");
        }
        // SAFETY: the forked child runs only this test's code and ends with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let got = std::panic::catch_unwind(|| {
                let b = lo_node(CAPS, |_| ());
                let c = lo_node(CAPS, without_shm);
                let cb = c.insert_hex(&b.name_hex());
                let (d, dv) = buf(64);
                b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 90, 0), false)
                    .unwrap();
                let t = Instant::now();
                while !quiet_state(&b).0 {
                    b.cq.progress();
                    assert!(t.elapsed() < Duration::from_secs(5), "never quiet");
                }
                let (s, sv) = buf(64);
                s.copy_from_slice(&pattern(64, 52));
                c.retry(|| c.ep.send(&msg(&[sv], cb, 0, 91, 0), false))
                    .unwrap();
                let t = Instant::now();
                let mut got = None;
                while got.is_none() && t.elapsed() < Duration::from_secs(5) {
                    c.cq.progress();
                    let _ = b.cq.read(1, |e| got = Some(*e));
                }
                got.is_some_and(|e| e.op_context == 90 && d == &pattern(64, 52)[..])
            });
            // SAFETY: ends the forked child without running the parent's exit handlers.
            unsafe { libc::_exit(if matches!(got, Ok(true)) { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above; `status` is a valid out-pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the forked child's receiver did not get the message through its quiet device \
             (status {status:#x})"
        );
        child_say("done");
        return;
    }
    let mut p = Peer::spawn(TEST, "forks", &[]);
    assert_eq!(p.line(), "done");
    assert!(p.wait());
}
