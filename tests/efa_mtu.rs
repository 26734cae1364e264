//! Peers whose devices have different MTUs (issue 28): two RDM endpoints over the simulated
//! device (`device::sim`, virtual clock), one with an 8 KiB MTU and one with 1,400 bytes,
//! exchange messages, tagged messages, writes and reads of every size class both ways. Each
//! side learns the other's receive size from its handshake (`pkt::HS_MAX_PKT`) and never
//! sends it a larger packet. A datagram too large for its receiver is dropped there, counted
//! and reported to the sender as an error, never a hang; an atomic too large for its peer
//! fails with FI_EMSGSIZE and does not hold up what follows it.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::node::*;
use fabric::abi::consts::*;
use fabric::abi::types::fi_rma_ioc;
use fabric::core::{Errno, Info};
use fabric::prov::efa::device::sim::{SimDevice, SimNet};
use fabric::prov::efa::device::{Completion, DevError, Device, HEADROOM};
use fabric::prov::efa::rdm::RdmEndpoint;
use fabric::prov::efa::srd::{Config, US};
use fabric::prov::efa::{EfaDomain, inject_size};
use fabric::sys::mem::IoVec;
use fabric::util::cq::{CqEntry, CqErrEntry};
use fabric::util::ep::{AtomicKind, AtomicOp, Call, MsgOp};

const CAPS: u64 = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SOURCE;
const BIG: usize = 8192;
const SMALL: usize = 1400;

fn domain() -> (Arc<dyn fabric::util::Domain>, Info) {
    loopback_domain(CAPS)
}

/// An RDM endpoint of `domain` on a simulated device of `mtu` bytes.
fn sim_node(
    domain: &Arc<dyn fabric::util::Domain>,
    info: &Info,
    net: &Arc<SimNet>,
    mtu: usize,
) -> Node {
    let efa = domain
        .as_any()
        .and_then(|d| d.downcast_ref::<EfaDomain>())
        .expect("an efa domain");
    let dev = SimDevice::open(net, mtu, Config::default());
    let ep = efa.endpoint_on(info, Box::new(dev)).expect("endpoint");
    Node::with_endpoint(domain, info, ep)
}

fn rdm(n: &Node) -> &RdmEndpoint {
    n.ep.as_any().and_then(|a| a.downcast_ref()).unwrap()
}

/// A pair on one simulated network: (net, big, small, small's address at big, big's at small).
fn mixed_pair() -> (Arc<SimNet>, Node, Node, u64, u64) {
    let (d, info) = domain();
    let net = SimNet::new(Default::default());
    let a = sim_node(&d, &info, &net, BIG);
    let b = sim_node(&d, &info, &net, SMALL);
    let ab = a.insert_hex(&b.name_hex());
    let ba = b.insert_hex(&a.name_hex());
    (net, a, b, ab, ba)
}

/// The next completion of `n`, moving the virtual clock and driving both endpoints.
fn wait(net: &SimNet, n: &Node, other: &Node) -> Result<CqEntry, CqErrEntry> {
    let t = Instant::now();
    loop {
        let mut got = None;
        match n.cq.read(1, |e| got = Some(*e)) {
            Ok(_) => return Ok(got.unwrap()),
            Err(Errno::AVAIL) => return Err(n.cq.readerr().unwrap()),
            Err(_) => {}
        }
        net.advance(20 * US);
        other.cq.progress();
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no completion: a hang"
        );
    }
}

fn wait_ok(net: &SimNet, n: &Node, other: &Node) -> CqEntry {
    wait(net, n, other).unwrap_or_else(|e| panic!("error completion {e:?}"))
}

fn msg<'a>(iov: &'a [IoVec], addr: u64, tag: u64, ctx: usize) -> MsgOp<'a> {
    MsgOp {
        iov,
        desc: &[],
        addr,
        context: ctx,
        data: 0,
        tag,
        ignore: 0,
        flags: 0,
        call: Call::Plain,
    }
}

/// Every size class of a pair with MTUs `BIG` and `SMALL`: empty, one byte, each side's
/// inject and eager limits and MTU ± 1, the medium limit, 1 MiB and 8 MiB.
fn sizes() -> Vec<usize> {
    let mut v = vec![0, 1, 64 << 10, (64 << 10) + 1, 1 << 20, 8 << 20];
    for mtu in [BIG, SMALL] {
        // Eager room after the handshake: header (8 msg, 16 tagged) and connid (4).
        for edge in [inject_size(mtu), mtu - 12, mtu - 20, mtu - 32, mtu] {
            v.extend([edge - 1, edge, edge + 1]);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

fn exchange(net: &SimNet, a: &Node, b: &Node, ab: u64, len: usize, tagged: bool, seed: u8) {
    let (src, sv) = buf(len);
    src.copy_from_slice(&pattern(len, seed));
    let (dst, dv) = buf(len);
    let tag = 0x77_0000 + len as u64;
    b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, tag, 2), tagged)
        .unwrap();
    a.retry(|| a.ep.send(&msg(&[sv], ab, tag, 1), tagged))
        .unwrap();
    let r = wait_ok(net, b, a);
    assert_eq!((r.op_context, r.len), (2, len), "{len}-byte message");
    assert_eq!(wait_ok(net, a, b).op_context, 1);
    assert!(
        dst == &pattern(len, seed)[..],
        "data of a {len}-byte message"
    );
}

fn write_read(net: &SimNet, a: &Node, b: &Node, ab: u64, len: usize, seed: u8) {
    let (target, tv) = buf(len.max(1));
    let mr = b.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    let rma = [fi_rma_iov {
        addr: target.as_ptr() as u64,
        len,
        key: mr.key(),
    }];
    let (src, sv) = buf(len);
    src.copy_from_slice(&pattern(len, seed));
    a.ep.write(&rma_op(&[sv], ab, &rma, 11)).unwrap();
    assert_eq!(wait_ok(net, a, b).op_context, 11, "write of {len}");
    assert!(
        target[..len] == pattern(len, seed)[..],
        "data of a {len}-byte write"
    );
    target[..len].copy_from_slice(&pattern(len, seed ^ 0x55));
    let (back, bv) = buf(len);
    a.ep.read(&rma_op(&[bv], ab, &rma, 12)).unwrap();
    assert_eq!(wait_ok(net, a, b).op_context, 12, "read of {len}");
    assert!(
        back == &pattern(len, seed ^ 0x55)[..],
        "data of a {len}-byte read"
    );
}

#[test]
fn every_size_crosses_between_different_mtus_both_ways() {
    let (net, big, small, to_small, to_big) = mixed_pair();
    for (i, &len) in sizes().iter().enumerate() {
        let seed = i as u8;
        for tagged in [false, true] {
            exchange(&net, &big, &small, to_small, len, tagged, seed);
            exchange(
                &net,
                &small,
                &big,
                to_big,
                len,
                tagged,
                seed.wrapping_add(1),
            );
        }
        write_read(&net, &big, &small, to_small, len, seed);
        write_read(&net, &small, &big, to_big, len, seed.wrapping_add(2));
    }
    for n in [&big, &small] {
        let s = rdm(n).device_stats();
        assert_eq!(s.dropped_too_big, 0, "{s:?}");
        assert_eq!(s.retransmits, 0, "nothing was lost: {s:?}");
    }
}

/// A first message larger than the peer's MTU, sent before any handshake (a fresh pair, the
/// receive posted late): the sender's first packets must fit whatever device the peer has.
#[test]
fn first_messages_fit_a_peer_not_yet_heard_from() {
    for len in [SMALL + 1, 30_000, 200_000] {
        let (net, big, small, to_small, _) = mixed_pair();
        let (src, sv) = buf(len);
        src.copy_from_slice(&pattern(len, 9));
        big.ep.send(&msg(&[sv], to_small, 0, 1), false).unwrap();
        for _ in 0..20 {
            net.advance(20 * US);
            small.cq.progress();
            big.cq.progress();
        }
        let (dst, dv) = buf(len);
        small
            .ep
            .recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 2), false)
            .unwrap();
        assert_eq!(wait_ok(&net, &small, &big).len, len);
        assert_eq!(wait_ok(&net, &big, &small).op_context, 1);
        assert!(dst == &pattern(len, 9)[..]);
        assert_eq!(rdm(&small).device_stats().dropped_too_big, 0);
    }
}

/// A datagram larger than the receiver's MTU (a sender that ignores the size it was told) is
/// dropped at the receiver and counted there; its sender is never acknowledged and gets an
/// error (unreachable) in bounded time, not a hang.
#[test]
fn oversized_datagram_is_counted_and_fails_its_sender() {
    let (d, info) = domain();
    let net = SimNet::new(Default::default());
    let small = sim_node(&d, &info, &net, SMALL);
    let mut raw = SimDevice::open(&net, BIG, Config::default());
    let dest =
        fabric::prov::efa::device::EfaAddr::from_bytes(&small.ep.getname().unwrap()).unwrap();
    let len = SMALL + 100;
    raw.post_send(dest, vec![0u8; HEADROOM + len], len, IoVec::EMPTY, 7)
        .unwrap();
    let mut out = Vec::new();
    let t = Instant::now();
    let status = loop {
        net.advance(1000 * US);
        small.cq.progress();
        raw.poll(&mut out, 16);
        if let Some(Completion::Send {
            wr_id: 7, status, ..
        }) = out.pop()
        {
            break status;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "the sender hangs");
    };
    assert_eq!(status.unwrap_err(), DevError::Unreachable);
    let s = rdm(&small).device_stats();
    assert!(s.dropped_too_big >= 1, "{s:?}");
    assert_eq!(s.delivered, 0);
}

/// An atomic whose operand fits our packets but not the peer's fails with FI_EMSGSIZE once
/// the handshake told the peer's size; the messages and atomics after it still arrive (its
/// place in the peer's message order is filled).
#[test]
fn atomic_too_large_for_the_peer_fails_and_order_goes_on() {
    let (net, big, small, to_small, _) = mixed_pair();
    let count = 400; // 3,200 bytes of u64: fits 8 KiB, not 1,400
    let (target, tv) = buf(count * 8);
    let mr = small.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    let (_o, ov) = buf(count * 8);
    let ioc = |count| {
        [fi_rma_ioc {
            addr: target.as_ptr() as u64,
            count,
            key: mr.key(),
        }]
    };
    let atomic = |ioc: &[fi_rma_ioc], ctx| {
        let iov = [ov.sub(0, ioc[0].count * 8).unwrap()];
        big.ep.atomic(&AtomicOp {
            kind: AtomicKind::Write,
            iov: &iov,
            desc: &[],
            compare: &[],
            compare_desc: &[],
            result: &[],
            result_desc: &[],
            addr: to_small,
            rma_ioc: ioc,
            datatype: FI_UINT64,
            op: FI_SUM,
            context: ctx,
            data: 0,
            flags: 0,
            call: Call::Plain,
        })
    };
    // Before and after the handshake alike.
    for round in 0..2 {
        atomic(&ioc(count), 30).unwrap();
        let e = wait(&net, &big, &small).unwrap_err();
        assert_eq!(
            (e.op_context, e.err),
            (30, Errno::MSGSIZE.0),
            "round {round}"
        );
        atomic(&ioc(4), 31).unwrap();
        assert_eq!(wait_ok(&net, &big, &small).op_context, 31);
        exchange(&net, &big, &small, to_small, 5000, false, round);
    }
    assert_eq!(rdm(&small).drop_counts(), (0, 0));
}
