//! Direct placement (`rdm::placement`, `device::Placement`): over the loopback software-SRD
//! device at its full MTU (64 KiB datagrams, no GRO), long-CTS data is received by the kernel
//! straight into its destination. Writes and reads both ways at once, and long tagged messages into
//! receive buffers of several pieces, some shorter than the message, arrive byte-exact on a
//! clean network and under loss, duplication and reordering (the device's fault injector);
//! on the clean network the device's count shows that the data was placed, not copied.

mod common;

use std::sync::Arc;

use common::node::*;
use fabric::abi::consts::*;
use fabric::core::Info;
use fabric::prov::efa::EfaDomain;
use fabric::prov::efa::device::faults::Faults;
use fabric::prov::efa::device::udp::{self, DeviceConfig, UdpDevice};
use fabric::prov::efa::rdm::RdmEndpoint;
use fabric::sys::mem::IoVec;
use fabric::util::cq::CqEntry;
use fabric::util::ep::{Call, MsgOp};

const CAPS: u64 = FI_MSG | FI_TAGGED | FI_RMA | FI_SOURCE;
const MIB: usize = 1 << 20;

fn domain() -> (Arc<dyn fabric::util::Domain>, Info) {
    loopback_domain(CAPS)
}

/// An RDM endpoint on its own UDP device on loopback, with `faults` injected on its sends.
fn node(domain: &Arc<dyn fabric::util::Domain>, info: &Info, faults: Option<Faults>) -> Node {
    let efa = domain
        .as_any()
        .and_then(|d| d.downcast_ref::<EfaDomain>())
        .expect("an efa domain");
    let lo = udp::discover(Some("lo"), 1, None)
        .into_iter()
        .next()
        .expect("a loopback device");
    let cfg = DeviceConfig {
        faults,
        ..DeviceConfig::default()
    };
    let dev = UdpDevice::open(&lo, 0, &cfg).expect("device");
    let ep = efa.endpoint_on(info, Box::new(dev)).expect("endpoint");
    Node::with_endpoint(domain, info, ep)
}

fn rdm(n: &Node) -> &RdmEndpoint {
    n.ep.as_any().and_then(|a| a.downcast_ref()).unwrap()
}

fn wait_ok(n: &Node, other: &Node) -> CqEntry {
    n.wait_driving(other, 60)
        .unwrap_or_else(|e| panic!("error completion {e:?}"))
}

/// `n` completions of `node` with contexts `base..base + n`, each once, in any order; the
/// completions of the other kind (contexts outside the range) are returned.
fn complete(node: &Node, other: &Node, base: usize, n: usize, what: &str) {
    let mut done = vec![false; n];
    for _ in 0..n {
        let c = wait_ok(node, other).op_context;
        let i = c.checked_sub(base).filter(|&i| i < n);
        let i = i.unwrap_or_else(|| panic!("{what}: unexpected completion {c}"));
        assert!(!done[i], "{what} {i} completed twice");
        done[i] = true;
    }
}

/// `k` writes of `len` bytes from `from` into `to`'s memory, while `to` writes as many into
/// `from`'s (fi_rma_bw's traffic): every target holds its pattern afterwards.
fn writes_both_ways(a: &Node, b: &Node, k: usize, len: usize, seed: u8) {
    let ab = a.insert_hex(&b.name_hex());
    let ba = b.insert_hex(&a.name_hex());
    let side = |me: &Node, peer: &Node, addr: u64, s: u8| {
        let targets: Vec<_> = (0..k).map(|_| buf(len)).collect();
        let mrs: Vec<_> = targets
            .iter()
            .map(|(_, v)| peer.reg(*v, FI_REMOTE_READ | FI_REMOTE_WRITE, 0))
            .collect();
        let rmas: Vec<[fi_rma_iov; 1]> = (0..k)
            .map(|i| {
                [fi_rma_iov {
                    addr: targets[i].0.as_ptr() as u64,
                    len,
                    key: mrs[i].key(),
                }]
            })
            .collect();
        let sources: Vec<IoVec> = (0..k)
            .map(|i| {
                let (s0, v) = buf(len);
                s0.copy_from_slice(&pattern(len, s.wrapping_add(i as u8)));
                v
            })
            .collect();
        for i in 0..k {
            me.ep
                .write(&rma_op(&[sources[i]], addr, &rmas[i], 1000 + i))
                .unwrap();
        }
        (targets, mrs, rmas)
    };
    let (into_b, _mb, rma_b) = side(a, b, ab, seed);
    let (into_a, _ma, rma_a) = side(b, a, ba, seed.wrapping_add(100));
    complete(a, b, 1000, k, "a's write");
    complete(b, a, 1000, k, "b's write");
    let want = |s: u8, i: usize| pattern(len, s.wrapping_add(i as u8));
    for (i, (t, _)) in into_b.iter().enumerate() {
        assert!(**t == want(seed, i)[..], "a's write {i}");
    }
    for (i, (t, _)) in into_a.iter().enumerate() {
        assert!(**t == want(seed.wrapping_add(100), i)[..], "b's write {i}");
    }
    // And read back, both ways at once (fi_rma_bw -o read): READRSP, then CTSDATA placed.
    let read = |me: &Node, addr: u64, rmas: &[[fi_rma_iov; 1]]| -> Vec<&'static mut [u8]> {
        (0..k)
            .map(|i| {
                let (d, v) = buf(len);
                me.ep.read(&rma_op(&[v], addr, &rmas[i], 2000 + i)).unwrap();
                d
            })
            .collect()
    };
    let from_b = read(a, ab, &rma_b);
    let from_a = read(b, ba, &rma_a);
    complete(a, b, 2000, k, "a's read");
    complete(b, a, 2000, k, "b's read");
    for i in 0..k {
        assert!(from_b[i][..] == want(seed, i)[..], "a's read {i}");
        assert!(
            from_a[i][..] == want(seed.wrapping_add(100), i)[..],
            "b's read {i}"
        );
    }
}

/// Long tagged messages a→b into receive buffers of two pieces: one as long as the message,
/// one 64 KiB short (truncated: what fits arrives, nothing past the buffer is touched).
fn tagged_into_pieces(a: &Node, b: &Node, seed: u8) {
    let ab = a.insert_hex(&b.name_hex());
    for (i, (len, cap)) in [(3 * MIB + 5, 3 * MIB + 5), (2 * MIB, 2 * MIB - 65_536)]
        .into_iter()
        .enumerate()
    {
        let seed = seed.wrapping_add(i as u8);
        let (src, sv) = buf(len);
        src.copy_from_slice(&pattern(len, seed));
        // Two pieces, split off an odd offset, with a guard byte past the second.
        let first = MIB + 333;
        let (d1, v1) = buf(first);
        let (d2, whole2) = buf(cap - first + 1);
        let v2 = whole2.sub(0, cap - first).unwrap();
        d2[cap - first] = 0xA5;
        let iov = [v1, v2];
        let tag = 0x77 + i as u64;
        b.ep.recv(
            &MsgOp {
                iov: &iov,
                desc: &[],
                addr: FI_ADDR_UNSPEC,
                context: 2,
                data: 0,
                tag,
                ignore: 0,
                flags: 0,
                call: Call::Plain,
            },
            true,
        )
        .unwrap();
        a.ep.send(
            &MsgOp {
                iov: &[sv],
                desc: &[],
                addr: ab,
                context: 1,
                data: 0,
                tag,
                ignore: 0,
                flags: 0,
                call: Call::Plain,
            },
            true,
        )
        .unwrap();
        let want = pattern(len, seed);
        match b.wait_driving(a, 60) {
            Ok(r) => {
                assert_eq!(cap, len, "a truncated message completed without an error");
                assert_eq!((r.op_context, r.len), (2, len));
            }
            Err(e) => {
                assert!(cap < len, "error completion {e:?}");
                assert_eq!(e.err, FI_ETRUNC);
            }
        }
        assert_eq!(wait_ok(a, b).op_context, 1);
        assert!(d1[..] == want[..first], "message {i}, first piece");
        assert!(
            d2[..cap - first] == want[first..cap],
            "message {i}, second piece"
        );
        assert_eq!(d2[cap - first], 0xA5, "message {i}: past the buffer");
    }
}

#[test]
fn long_transfers_placed_straight_into_their_destination_arrive_intact() {
    let (d, info) = domain();
    // A clean network: the writes' CTSDATA are placed, not copied. Each 1 MiB write sends its
    // first 64 KiB with the request and 16 CTSDATA after it; both senders stream one write
    // at a time (`Inner::parked`), so nearly all of them arrive where they were named.
    let (a, b) = (node(&d, &info, None), node(&d, &info, None));
    const K: usize = 16;
    writes_both_ways(&a, &b, K, MIB, 1);
    // Reads: a READRSP with the first 64 KiB, then 16 CTSDATA.
    let ctsdata = 2 * K as u64 * 16;
    for (who, n) in [("a", &a), ("b", &b)] {
        let placed = rdm(n).device_stats().placed;
        assert!(
            placed * 4 >= ctsdata * 3,
            "{who}: {placed} of {ctsdata} CTSDATA placed"
        );
    }
    // Writes longer than one CTS window (32 datagrams, 2 MiB): a sender serves windows in the
    // order their CTS came, so a write granted its next window queues behind the others.
    let before = [&a, &b].map(|n| rdm(n).device_stats().placed);
    const LONG: usize = 5 * MIB;
    writes_both_ways(&a, &b, 4, LONG, 9);
    // Writes and reads: 4 × 5 MiB each, all but the first packet's 64 KiB in CTSDATA.
    let ctsdata = (2 * 4 * LONG / 65_451) as u64;
    for (i, (who, n)) in [("a", &a), ("b", &b)].into_iter().enumerate() {
        let placed = rdm(n).device_stats().placed - before[i];
        assert!(
            placed * 4 >= ctsdata * 3,
            "{who}: {placed} of about {ctsdata} CTSDATA of long writes placed"
        );
    }
    let before = rdm(&b).device_stats().placed;
    tagged_into_pieces(&a, &b, 40);
    assert!(
        rdm(&b).device_stats().placed > before,
        "tagged messages were not placed"
    );

    // Loss, duplicates and reordering: datagrams arrive late, twice or not at all, and land
    // in memory named for others before their own; everything still arrives exact.
    let faults = Faults {
        loss: 2.0,
        dup: 2.0,
        delay_us: 300,
        seed: 7,
        ..Faults::default()
    };
    let (a, b) = (node(&d, &info, Some(faults)), node(&d, &info, Some(faults)));
    writes_both_ways(&a, &b, 8, MIB, 60);
    tagged_into_pieces(&a, &b, 90);
    assert!(rdm(&b).device_stats().placed > 0);
}
