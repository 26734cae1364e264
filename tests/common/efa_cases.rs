// The efa provider's RDM tests, included by `tests/efa.rs` (local peers through the software
// SRD device) and `tests/efa_shm.rs` (local peers through shm, as by default): every case runs
// both ways, and by `tests/efa_verbs.rs` (the hardware device over the emulated EFA NIC).
// The including test binary defines `SHM_TRANSFER` (FI_EFA_ENABLE_SHM_TRANSFER), `RDM_DOMAIN`
// (the domain the cases open), `DEVICE_WAIT_FD` (whether the device has a wait fd) and
// `device_setup()` (run once before anything else).

use std::sync::Once;
use std::time::{Duration, Instant};

use common::node::*;
use fabric::abi::consts::*;
use fabric::abi::types::fi_rma_ioc;
use fabric::core::Errno;
use fabric::prov::efa::EFA;
use fabric::prov::efa::rdm::RdmEndpoint;
use fabric::util::cq::{CqEntry, CqErrEntry};
use fabric::util::ep::{AtomicKind, AtomicOp, Call, MsgOp};

const CAPS: u64 = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SOURCE | FI_DIRECTED_RECV;

fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        device_setup();
        // SAFETY: runs once, before any test of this binary reads the environment (every test
        // calls init() first and the Once blocks the others until it is done).
        unsafe {
            std::env::set_var("FI_EFA_MTU_SIZE", "8192");
            std::env::set_var("FI_EFA_ENABLE_SHM_TRANSFER", SHM_TRANSFER);
        };
    });
}

/// Our caps and what efa asks of applications (fi_efa(7)): provider keys and virtual
/// addresses.
fn rdm_hints() -> fabric::core::Info {
    let mut hints = fabric::core::Info {
        caps: CAPS,
        ..Default::default()
    };
    hints.domain_attr.mr_mode = (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32;
    hints
}

/// The RDM domain of the device this binary tests.
fn on_rdm_domain(i: &fabric::core::Info) -> bool {
    i.domain_attr.name.as_deref() == Some(RDM_DOMAIN)
}

/// Two connected endpoints on the loopback device: (a, b, b's address at a, a's at b).
fn pair() -> (Node, Node, u64, u64) {
    init();
    let hints = rdm_hints();
    let a = Node::open_hints(&EFA, &hints, on_rdm_domain);
    let b = Node::open_hints(&EFA, &hints, on_rdm_domain);
    let ab = a.insert_hex(&b.name_hex());
    let ba = b.insert_hex(&a.name_hex());
    (a, b, ab, ba)
}

/// An endpoint on the loopback device for `caps`; `configure` runs before `fi_enable`.
fn lo_node(caps: u64, configure: impl FnOnce(&dyn fabric::util::Endpoint)) -> Node {
    init();
    let lo = |i: &fabric::core::Info| i.domain_attr.name.as_deref() == Some(RDM_DOMAIN);
    let hints = fabric::core::Info {
        caps,
        ..Default::default()
    };
    Node::open_configured(&EFA, &hints, lo, configure)
}

/// Next completion of `n`, driving `other` meanwhile.
fn wait(n: &Node, other: &Node) -> Result<CqEntry, CqErrEntry> {
    n.wait_driving(other, 30)
}

fn wait_ok(n: &Node, other: &Node) -> CqEntry {
    wait(n, other).unwrap_or_else(|e| panic!("error completion {e:?}"))
}

fn msg<'a>(
    iov: &'a [fabric::sys::mem::IoVec],
    addr: u64,
    tag: u64,
    ctx: usize,
    flags: u64,
) -> MsgOp<'a> {
    MsgOp {
        iov,
        desc: &[],
        addr,
        context: ctx,
        data: 0,
        tag,
        ignore: 0,
        flags,
        call: if flags == 0 { Call::Plain } else { Call::Msg },
    }
}

/// `n` receives of `size` bytes posted at `node` (contexts `ctx0`, `ctx0 + 1`...); their
/// buffers, in posting order.
fn post_receives(node: &Node, n: usize, size: usize, ctx0: usize) -> Vec<&'static mut [u8]> {
    (0..n)
        .map(|i| {
            let (d, dv) = buf(size);
            node.ep
                .recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, ctx0 + i, 0), false)
                .unwrap();
            d
        })
        .collect()
}

/// `n` send buffers, the i-th of `len(i)` bytes holding `pattern(len(i), i)`.
fn patterned(n: usize, len: impl Fn(usize) -> usize) -> Vec<fabric::sys::mem::IoVec> {
    (0..n)
        .map(|i| {
            let (s, v) = buf(len(i));
            s.copy_from_slice(&pattern(s.len(), i as u8));
            v
        })
        .collect()
}

/// Sends `len` bytes a→b and checks them; `early`: the receive is posted before the send.
fn exchange(a: &Node, b: &Node, ab: u64, len: usize, tagged: bool, early: bool, seed: u8) {
    let (src, sv) = buf(len);
    src.copy_from_slice(&pattern(len, seed));
    let (dst, dv) = buf(len);
    let tag = 0x5eed_0000 + len as u64;
    let post_recv = || {
        b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, tag, 2, 0), tagged)
            .unwrap()
    };
    if early {
        post_recv();
    }
    a.ep.send(&msg(&[sv], ab, tag, 1, 0), tagged).unwrap();
    if !early {
        // Let the message arrive unexpected first.
        for _ in 0..50 {
            b.cq.progress();
            a.cq.progress();
        }
        post_recv();
    }
    let r = wait_ok(b, a);
    assert_eq!((r.op_context, r.len), (2, len), "len {len}");
    assert_ne!(r.flags & FI_RECV, 0);
    assert_eq!(r.flags & FI_TAGGED != 0, tagged);
    if tagged {
        assert_eq!(r.tag, tag);
    }
    let s = wait_ok(a, b);
    assert_eq!(s.op_context, 1);
    assert!(
        dst == &pattern(len, seed)[..],
        "data of a {len}-byte message"
    );
}

#[test]
fn messages_of_every_protocol_arrive_intact() {
    let (a, b, ab, _) = pair();
    // 8 KiB MTU: eager ≤ ~8 KiB, medium ≤ 64 KiB, long-CTS beyond.
    for (i, &len) in [0, 1, 7000, 8200, 30_000, 65_536, 200_001, 3 << 20]
        .iter()
        .enumerate()
    {
        for tagged in [false, true] {
            for early in [true, false] {
                exchange(&a, &b, ab, len, tagged, early, i as u8);
            }
        }
    }
}

#[test]
fn many_messages_keep_their_order() {
    let (a, b, ab, _) = pair();
    const N: usize = 300;
    let bufs = post_receives(&b, N, 3000, 1000);
    let srcs = patterned(N, |i| 100 + i * 9);
    for (i, v) in srcs.iter().enumerate() {
        a.retry(|| a.ep.send(&msg(&[*v], ab, 0, i, 0), false))
            .unwrap();
        b.cq.progress();
    }
    // Receives match in posting order, so message i lands in buffer i. Their completions may
    // come in another order: a message sent before the handshake goes in several packets
    // (medium) and completes with its last one, which an unordered device (EFA's SRD, the
    // emulated NIC retrying after RNR) may deliver after a later single-packet message.
    let mut done: Vec<_> = (0..N).map(|_| wait_ok(&b, &a)).collect();
    done.sort_by_key(|r| r.op_context);
    for (i, (r, dst)) in done.iter().zip(&bufs).enumerate() {
        assert_eq!((r.op_context, r.len), (1000 + i, 100 + i * 9));
        assert_eq!(&dst[..r.len], &pattern(r.len, i as u8)[..]);
    }
    for _ in 0..N {
        wait_ok(&a, &b);
    }
}

/// Messages that arrive before the receiver inserted their sender: an undirected receive takes
/// the first (no source address), then the sender is inserted and a receive directed at it
/// finds the second, already waiting (fabtests' fi_unexpected_msg).
#[test]
fn directed_receive_finds_messages_from_senders_inserted_late() {
    let a = lo_node(CAPS, |_| ());
    let b = lo_node(CAPS, |_| ());
    let ab = a.insert_hex(&b.name_hex());
    let mut keep = Vec::new();
    for i in 1..=2u8 {
        let (s, v) = buf(64);
        s.copy_from_slice(&pattern(64, i));
        a.ep.send(&msg(&[v], ab, 7, i as usize, 0), true).unwrap();
        keep.push(v);
    }
    // Both sends complete once b has taken them in (as unexpected messages).
    for _ in 0..2 {
        wait_ok(&a, &b);
    }
    let (d1, v1) = buf(64);
    b.ep.recv(&msg(&[v1], FI_ADDR_UNSPEC, 7, 11, 0), true)
        .unwrap();
    let e = wait_ok(&b, &a);
    assert_eq!(
        (e.op_context, e.len, e.src_addr),
        (11, 64, FI_ADDR_NOTAVAIL)
    );
    assert_eq!(d1, &pattern(64, 1)[..]);
    let ba = b.insert_hex(&a.name_hex());
    let (d2, v2) = buf(64);
    b.ep.recv(&msg(&[v2], ba, 7, 12, 0), true).unwrap();
    let e = wait(&b, &a).expect("a directed receive finds the waiting message");
    assert_eq!((e.op_context, e.len, e.src_addr), (12, 64, ba));
    assert_eq!(d2, &pattern(64, 2)[..]);
}

#[test]
fn truncation_and_source_address() {
    let (a, b, ab, ba) = pair();
    let (s, sv) = buf(20_000);
    s.copy_from_slice(&pattern(20_000, 9));
    let (d, dv) = buf(5000);
    b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 7, 0), false)
        .unwrap();
    a.ep.send(&msg(&[sv], ab, 0, 1, 0), false).unwrap();
    let e = wait(&b, &a).unwrap_err();
    assert_eq!(
        (e.op_context, e.err, e.len, e.olen),
        (7, FI_ETRUNC, 5000, 15_000)
    );
    assert_eq!(e.src_addr, ba, "FI_SOURCE reports the sender's AV index");
    assert_eq!(d, &pattern(20_000, 9)[..5000]);
    wait_ok(&a, &b);
}


/// A message whole in one packet goes straight into the receive it matches (`recv_msg`'s
/// eager path): one longer than its receive is cut to it and fails with FI_ETRUNC, nothing
/// past the receive touched; one into a receive of two pieces fills both; and a stream of
/// injected ones, more than the device takes at once, each lands whole in its own receive
/// although its buffer is overwritten as soon as the call returns.
#[test]
fn small_messages_land_in_place_truncated_split_or_injected() {
    let (a, b, ab, ba) = pair();
    let (s, sv) = buf(100);
    s.copy_from_slice(&pattern(100, 3));
    let (d, dv) = buf(61);
    d[60] = 0xA5;
    b.ep.recv(&msg(&[dv.sub(0, 60).unwrap()], FI_ADDR_UNSPEC, 0, 7, 0), false)
        .unwrap();
    a.ep.send(&msg(&[sv], ab, 0, 1, 0), false).unwrap();
    let e = wait(&b, &a).unwrap_err();
    assert_eq!((e.op_context, e.err, e.len, e.olen), (7, FI_ETRUNC, 60, 40));
    assert_eq!(e.src_addr, ba);
    assert_eq!(&d[..60], &pattern(100, 3)[..60]);
    assert_eq!(d[60], 0xA5, "past the receive");
    wait_ok(&a, &b);

    let (d1, v1) = buf(30);
    let (d2, v2) = buf(70);
    b.ep.recv(&msg(&[v1, v2], FI_ADDR_UNSPEC, 0, 8, 0), false)
        .unwrap();
    a.ep.send(&msg(&[sv], ab, 0, 2, 0), false).unwrap();
    let e = wait_ok(&b, &a);
    assert_eq!((e.op_context, e.len, e.src_addr), (8, 100, ba));
    assert_eq!(e.buf, v1.addr(), "the completion names where the message begins");
    assert_eq!([&d1[..], &d2[..]].concat(), pattern(100, 3));
    wait_ok(&a, &b);

    let n = 3000;
    let dest = post_receives(&b, n, 16, 100);
    let (i, iv) = buf(16);
    let iov = [iv];
    let mut op = msg(&iov, ab, 0, 0, 0);
    op.call = Call::Inject;
    for k in 0..n {
        i.copy_from_slice(&pattern(16, k as u8));
        loop {
            match a.ep.send(&op, false) {
                Ok(()) => break,
                Err(Errno::AGAIN) => {
                    a.cq.progress();
                    b.cq.progress();
                }
                Err(e) => panic!("inject {k}: {e:?}"),
            }
        }
        i.fill(0);
    }
    for (k, d) in dest.iter().enumerate() {
        let e = wait_ok(&b, &a);
        assert_eq!((e.op_context, e.len), (100 + k, 16), "message {k}");
        assert_eq!(&d[..], &pattern(16, k as u8)[..], "message {k}");
    }
    assert!(a.cq.is_empty(), "inject writes no completion");
}


/// Two senders' messages interleaved at one receiver, short ones and ones long enough to come
/// in many data packets: each lands whole in the receive directed at its sender and reports
/// that sender. The receiver remembers the peer of the last packet's source (`known_peer`)
/// and must never credit another sender's packet to it.
#[test]
fn two_senders_interleaved_each_land_in_their_own_receives() {
    let a = lo_node(CAPS, |_| ());
    let c = lo_node(CAPS, |_| ());
    let b = lo_node(CAPS, |_| ());
    let ab = a.insert_hex(&b.name_hex());
    let cb = c.insert_hex(&b.name_hex());
    let ba = b.insert_hex(&a.name_hex());
    let bc = b.insert_hex(&c.name_hex());
    const LENS: [usize; 4] = [64, 300_000, 9_000, 1 << 20];
    // (context, sender, length, seed, buffer) of each receive at b.
    let mut want = Vec::new();
    for (i, &len) in LENS.iter().enumerate() {
        for (k, from) in [ba, bc].into_iter().enumerate() {
            let (d, dv) = buf(len);
            let (ctx, seed) = (100 + 2 * i + k, (2 * i + k + 1) as u8);
            b.ep.recv(&msg(&[dv], from, 5, ctx, 0), true).unwrap();
            want.push((ctx, from, len, seed, d));
        }
    }
    for (i, &len) in LENS.iter().enumerate() {
        for (k, (node, to)) in [(&a, ab), (&c, cb)].into_iter().enumerate() {
            let (s, sv) = buf(len);
            s.copy_from_slice(&pattern(len, (2 * i + k + 1) as u8));
            node.ep.send(&msg(&[sv], to, 5, 1, 0), true).unwrap();
        }
    }
    // Every node is driven until b has all its receives and a and c all their sends.
    let mut got: Vec<Vec<CqEntry>> = vec![Vec::new(); 3];
    let t = Instant::now();
    while got[0].len() < 2 * LENS.len() || got[1].len() < LENS.len() || got[2].len() < LENS.len()
    {
        for (n, node) in [&b, &a, &c].into_iter().enumerate() {
            match node.cq.read(8, |e| got[n].push(*e)) {
                Ok(_) | Err(Errno::AGAIN) => {}
                Err(Errno::AVAIL) => panic!("error completion {:?}", node.cq.readerr()),
                Err(e) => panic!("cq read: {e:?}"),
            }
        }
        assert!(t.elapsed() < Duration::from_secs(30), "completions missing: {got:?}");
    }
    for e in &got[0] {
        let (_, from, len, seed, d) = want
            .iter()
            .find(|w| w.0 == e.op_context)
            .expect("a completion of a posted receive");
        assert_eq!((e.src_addr, e.len), (*from, *len), "receive {}", e.op_context);
        assert!(**d == pattern(*len, *seed)[..], "data of receive {}", e.op_context);
    }
}

#[test]
fn writes_and_reads_short_and_long() {
    let (a, b, ab, _) = pair();
    for &len in &[1usize, 5000, 100_000, 1 << 20] {
        let (target, tv) = buf(len);
        let mr = b.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
        let addr = target.as_ptr() as u64; // FI_MR_VIRT_ADDR
        let (src, sv) = buf(len);
        src.copy_from_slice(&pattern(len, 3));
        let rma = [fi_rma_iov {
            addr,
            len,
            key: mr.key(),
        }];
        a.ep.write(&rma_op(&[sv], ab, &rma, 11)).unwrap();
        let w = wait_ok(&a, &b);
        assert_eq!(w.op_context, 11);
        assert_ne!(w.flags & FI_WRITE, 0);
        assert!(target == &pattern(len, 3)[..], "write of {len}");
        // Change the target and read it back.
        target.copy_from_slice(&pattern(len, 77));
        let (back, bv) = buf(len);
        a.ep.read(&rma_op(&[bv], ab, &rma, 12)).unwrap();
        let r = wait_ok(&a, &b);
        assert_eq!(r.op_context, 12);
        assert!(back == &pattern(len, 77)[..], "read of {len}");
    }
}

/// More bulk data at once than the endpoint hands to the device (it holds senders back until
/// completions free room, for writes it sends and reads it answers): 48 concurrent 1 MiB
/// writes, then 48 reads of them, each through its own region, all complete and intact.
#[test]
fn concurrent_long_writes_and_reads_all_complete() {
    let (a, b, ab, _) = pair();
    const N: usize = 48;
    const LEN: usize = 1 << 20;
    let targets: Vec<_> = (0..N).map(|_| buf(LEN)).collect();
    let mrs: Vec<_> = targets
        .iter()
        .map(|(_, v)| b.reg(*v, FI_REMOTE_READ | FI_REMOTE_WRITE, 0))
        .collect();
    let rmas: Vec<[fi_rma_iov; 1]> = (0..N)
        .map(|i| {
            [fi_rma_iov {
                addr: targets[i].0.as_ptr() as u64,
                len: LEN,
                key: mrs[i].key(),
            }]
        })
        .collect();
    let sources: Vec<_> = (0..N)
        .map(|i| {
            let (s, v) = buf(LEN);
            s.copy_from_slice(&pattern(LEN, i as u8));
            v
        })
        .collect();
    for i in 0..N {
        a.ep.write(&rma_op(&[sources[i]], ab, &rmas[i], 100 + i)).unwrap();
    }
    // Each of the N operations (contexts base..base + N) completes once.
    let complete_all = |base: usize, what: &str| {
        let mut done = [false; N];
        for _ in 0..N {
            let i = wait_ok(&a, &b).op_context - base;
            assert!(!done[i], "{what} {i} completed twice");
            done[i] = true;
        }
    };
    complete_all(100, "write");
    for (i, (t, _)) in targets.iter().enumerate() {
        assert!(**t == pattern(LEN, i as u8)[..], "write {i}");
    }
    let backs: Vec<_> = (0..N).map(|_| buf(LEN)).collect();
    for i in 0..N {
        a.ep.read(&rma_op(&[backs[i].1], ab, &rmas[i], 200 + i)).unwrap();
    }
    complete_all(200, "read");
    for (i, (back, _)) in backs.iter().enumerate() {
        assert!(**back == pattern(LEN, i as u8)[..], "read {i}");
    }
}

#[test]
fn writedata_completes_at_the_target_with_its_data() {
    let (a, b, ab, _) = pair();
    let (target, tv) = buf(64);
    let mr = b.reg(tv, FI_REMOTE_WRITE, 0);
    let (_s, sv) = buf(64);
    let rma = [fi_rma_iov {
        addr: target.as_ptr() as u64,
        len: 64,
        key: mr.key(),
    }];
    let iov = [sv];
    let mut op = rma_op(&iov, ab, &rma, 5);
    op.data = 0xfeed;
    op.flags = FI_REMOTE_CQ_DATA;
    a.ep.write(&op).unwrap();
    let t = wait_ok(&b, &a);
    assert_eq!(t.data, 0xfeed);
    assert_eq!(t.flags & FI_REMOTE_CQ_DATA, FI_REMOTE_CQ_DATA);
    assert_eq!(t.len, 64);
    wait_ok(&a, &b);
}

#[test]
fn remote_access_is_checked_at_the_target() {
    let (a, b, ab, _) = pair();
    let (target, tv) = buf(4096);
    let ro = b.reg(tv, FI_REMOTE_READ, 0);
    let base = target.as_ptr() as u64;
    // Wrong key, out of bounds, and a write into read-only memory: each fails at the initiator
    // and leaves the target untouched.
    let cases = [
        fi_rma_iov {
            addr: base,
            len: 4096,
            key: ro.key() ^ 0x55,
        },
        fi_rma_iov {
            addr: base + 1,
            len: 4096,
            key: ro.key(),
        },
        fi_rma_iov {
            addr: base,
            len: 4096,
            key: ro.key(),
        },
    ];
    for (i, rma) in cases.iter().enumerate() {
        let (_s2, sv2) = buf(4096);
        a.ep.write(&rma_op(&[sv2], ab, std::slice::from_ref(rma), 100 + i))
            .unwrap();
        let e = wait(&a, &b).expect_err("refused write completes with an error");
        assert_eq!(e.op_context, 100 + i);
        assert!(e.err == FI_EACCES || e.err == FI_EINVAL, "err {}", e.err);
    }
    let bad_read = [fi_rma_iov {
        addr: base + 4000,
        len: 200,
        key: ro.key(),
    }];
    let (_r, rv) = buf(200);
    a.ep.read(&rma_op(&[rv], ab, &bad_read, 200)).unwrap();
    assert_eq!(wait(&a, &b).unwrap_err().op_context, 200);
    assert!(target.iter().all(|&x| x == 0));
}

#[test]
fn atomics_apply_at_the_target() {
    let (a, b, ab, _) = pair();
    let (target, tv) = buf(64);
    target[..8].copy_from_slice(&40u64.to_ne_bytes());
    let mr = b.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    let ioc = [fi_rma_ioc {
        addr: target.as_ptr() as u64,
        count: 1,
        key: mr.key(),
    }];
    let (op_s, ov) = buf(8);
    op_s.copy_from_slice(&2u64.to_ne_bytes());
    let (res, rv) = buf(8);
    let (cmp, cv) = buf(8);
    let atomic = |kind,
                  op,
                  ctx,
                  iov: &[fabric::sys::mem::IoVec],
                  cmpv: &[fabric::sys::mem::IoVec],
                  result: &[fabric::sys::mem::IoVec]| {
        a.ep.atomic(&AtomicOp {
            kind,
            iov,
            desc: &[],
            compare: cmpv,
            compare_desc: &[],
            result,
            result_desc: &[],
            addr: ab,
            rma_ioc: &ioc,
            datatype: FI_UINT64,
            op,
            context: ctx,
            data: 0,
            flags: 0,
            call: Call::Plain,
        })
    };
    atomic(AtomicKind::Write, FI_SUM, 1, &[ov], &[], &[]).unwrap();
    wait_ok(&a, &b);
    atomic(AtomicKind::Fetch, FI_SUM, 2, &[ov], &[], &[rv]).unwrap();
    wait_ok(&a, &b);
    assert_eq!(u64::from_ne_bytes(res[..].try_into().unwrap()), 42);
    cmp.copy_from_slice(&44u64.to_ne_bytes());
    op_s.copy_from_slice(&7u64.to_ne_bytes());
    atomic(AtomicKind::Compare, FI_CSWAP, 3, &[ov], &[cv], &[rv]).unwrap();
    wait_ok(&a, &b);
    assert_eq!(u64::from_ne_bytes(res[..].try_into().unwrap()), 44);
    assert_eq!(u64::from_ne_bytes(target[..8].try_into().unwrap()), 7);
    // An op the kind does not have is refused at the call.
    assert_eq!(
        atomic(AtomicKind::Write, FI_MSWAP, 4, &[ov], &[], &[]).unwrap_err(),
        Errno::OPNOTSUPP
    );
}

#[test]
fn delivery_complete_and_inject() {
    let (a, b, ab, _) = pair();
    let (_d, dv) = buf(100_000);
    let (s, sv) = buf(100_000);
    s.copy_from_slice(&pattern(100_000, 4));
    b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 9, 0), false)
        .unwrap();
    a.ep.send(&msg(&[sv], ab, 0, 8, FI_DELIVERY_COMPLETE), false)
        .unwrap();
    wait_ok(&b, &a);
    assert_eq!(wait_ok(&a, &b).op_context, 8);
    // Inject: the buffer is free at return and no completion is written.
    let (i, iv) = buf(64);
    i.copy_from_slice(&pattern(64, 5));
    let (d2, d2v) = buf(64);
    b.ep.recv(&msg(&[d2v], FI_ADDR_UNSPEC, 0, 10, 0), false)
        .unwrap();
    let iov = [iv];
    let mut op = msg(&iov, ab, 0, 0, 0);
    op.call = Call::Inject;
    a.ep.send(&op, false).unwrap();
    i.fill(0);
    wait_ok(&b, &a);
    assert_eq!(d2, &pattern(64, 5)[..]);
    for _ in 0..100 {
        a.cq.progress();
    }
    assert!(a.cq.is_empty(), "inject writes no completion");
}

/// Injected 8-byte writes both ways at once, far more than either side's device takes: the
/// rest wait in the endpoint's queue (device refusals, small packet buffers reused) and every
/// one lands in its own slot, as fi_rma_bw's small sizes move them.
#[test]
fn a_stream_of_injected_writes_both_ways_lands_whole() {
    let (a, b, ab, ba) = pair();
    const N: usize = 3000;
    let region = |n: &Node| {
        let (t, tv) = buf(N * 8);
        let mr = n.reg(tv, FI_REMOTE_WRITE, 0);
        (t, mr)
    };
    let (at, amr) = region(&a);
    let (bt, bmr) = region(&b);
    // What slot i of each side's region must end up holding.
    let slot = |side: u64, i: usize| ((side << 56) | (i as u64 * 0x9e37_79b9)).to_le_bytes();
    let post = |from: &Node, other: &Node, to: u64, side: u64, target: &[u8], key: u64, i| {
        let (s, sv) = buf(8);
        s.copy_from_slice(&slot(side, i));
        let rma = [fi_rma_iov {
            addr: target[i * 8..].as_ptr() as u64,
            len: 8,
            key,
        }];
        let iov = [sv];
        let mut op = rma_op(&iov, to, &rma, 0);
        op.call = Call::Inject;
        let t = Instant::now();
        loop {
            match from.ep.write(&op) {
                Err(Errno::AGAIN) if t.elapsed() < Duration::from_secs(20) => {
                    from.cq.progress();
                    other.cq.progress();
                }
                r => return r.unwrap(),
            }
        }
    };
    for i in 0..N {
        post(&a, &b, ab, 1, bt, bmr.key(), i);
        post(&b, &a, ba, 2, at, amr.key(), i);
    }
    let landed = |t: &[u8], side| (0..N).all(|i| t[i * 8..i * 8 + 8] == slot(side, i));
    let t = Instant::now();
    while !(landed(bt, 1) && landed(at, 2)) {
        assert!(t.elapsed() < Duration::from_secs(30), "writes missing after 30 s");
        a.cq.progress();
        b.cq.progress();
    }
    assert!(a.cq.is_empty() && b.cq.is_empty(), "inject writes no completion");
}

#[test]
fn peek_and_claim() {
    let (a, b, ab, _) = pair();
    let (s, sv) = buf(300);
    s.copy_from_slice(&pattern(300, 6));
    a.ep.send(&msg(&[sv], ab, 77, 1, 0), true).unwrap();
    wait_ok(&a, &b);
    let (d, dv) = buf(300);
    let t = Instant::now();
    loop {
        b.ep.recv(&msg(&[], FI_ADDR_UNSPEC, 77, 5, FI_PEEK | FI_CLAIM), true)
            .unwrap();
        match wait(&b, &a) {
            Ok(e) => {
                assert_eq!((e.op_context, e.len, e.tag), (5, 300, 77));
                break;
            }
            Err(e) => assert_eq!(e.err, FI_ENOMSG),
        }
        assert!(t.elapsed() < Duration::from_secs(10));
    }
    b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 77, 5, FI_CLAIM), true)
        .unwrap();
    assert_eq!(wait_ok(&b, &a).len, 300);
    assert_eq!(d, &pattern(300, 6)[..]);
}

#[test]
fn a_dead_peer_fails_pending_operations() {
    let (a, b, ab, _) = pair();
    drop(b);
    let (_s, sv) = buf(1 << 20);
    a.ep.send(&msg(&[sv], ab, 0, 1, 0), false).unwrap();
    let t = Instant::now();
    let e = loop {
        let mut got = None;
        match a.cq.read(1, |e| got = Some(*e)) {
            Err(Errno::AVAIL) => break a.cq.readerr().unwrap(),
            Ok(_) => panic!("a send to a closed endpoint completed: {got:?}"),
            Err(_) => {}
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no error completion");
    };
    assert_eq!(e.op_context, 1);
    assert!(
        e.err == FI_ECONNABORTED || e.err == FI_ENORX,
        "err {}",
        e.err
    );
}

#[test]
fn answers_leave_with_the_progress_pass_that_made_them() {
    // The target reads its completion and then never calls into the library again: the
    // RECEIPT it owes (delivery complete) must already be on the wire, or the initiator's send
    // never completes.
    let (a, b, ab, _) = pair();
    let (_d, dv) = buf(64);
    let (s, sv) = buf(64);
    s.copy_from_slice(&pattern(64, 11));
    b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 21, 0), false)
        .unwrap();
    a.ep.send(&msg(&[sv], ab, 0, 22, FI_DELIVERY_COMPLETE), false)
        .unwrap();
    assert_eq!(wait_ok(&b, &a).op_context, 21);
    let done = a.wait(10).expect("delivery-complete send succeeds");
    assert_eq!(done.op_context, 22);
}

#[test]
fn local_peers_take_the_path_the_knob_says() {
    let (a, b, ab, _) = pair();
    exchange(&a, &b, ab, 1 << 20, false, false, 9);
    let ep = a.ep.as_any().and_then(|e| e.downcast_ref::<RdmEndpoint>());
    let sent = ep.expect("an efa RDM endpoint").device_stats().data_sent;
    if SHM_TRANSFER == "1" {
        assert_eq!(sent, 0, "a message to a local peer went through the device");
    } else {
        assert!(sent >= 128, "1 MiB left in {sent} datagrams");
    }
}

/// "Same host" for efa is "same address" (the GID): a peer on another interface of this very
/// machine, which shares our kernel and /dev/shm (its shm endpoint is there to be found), as a
/// rank in another network namespace does, is reached through the device, never shm; a peer at
/// our own address takes shm when it is on. `tests/cluster` checks the same across namespaces.
#[test]
fn only_peers_at_our_own_address_take_shm() {
    init();
    let rdm = |i: &fabric::core::Info| {
        i.domain_attr
            .name
            .as_deref()
            .is_some_and(|n| n.ends_with("-rdm") && n != "srd_lo-rdm")
    };
    let hints = fabric::core::Info {
        caps: CAPS,
        ..Default::default()
    };
    let infos =
        fabric::core::provider::InfoProvider::getinfo(&EFA, fi_version(2, 6), None, None, 0, Some(&hints))
            .unwrap_or_default();
    if !infos.iter().any(rdm) {
        eprintln!("no interface but loopback: skipped");
        return;
    }
    let (a, b, ab, ba) = pair();
    let c = Node::open_hints(&EFA, &hints, rdm);
    let (ac, ca) = (a.insert_hex(&c.name_hex()), c.insert_hex(&a.name_hex()));
    exchange(&a, &c, ac, 64 << 10, true, true, 3);
    exchange(&c, &a, ca, 64 << 10, false, false, 4);
    exchange(&a, &b, ab, 64 << 10, true, true, 5);
    exchange(&b, &a, ba, 64 << 10, false, true, 6);
    let paths = |n: &Node| {
        n.ep.as_any()
            .and_then(|e| e.downcast_ref::<RdmEndpoint>())
            .map(|e| e.peer_paths())
            .unwrap()
    };
    let on = SHM_TRANSFER == "1";
    // a: b through shm (when on), c through the device; c: a through the device.
    assert_eq!(paths(&a), if on { (1, 1) } else { (0, 2) }, "a's peers");
    assert_eq!(paths(&c), (0, 1), "c's peer a");
}

/// One receive queue for both paths: b takes messages from a (through shm when local peers use
/// it) and from c, which may not use shared memory (FI_OPT_SHARED_MEMORY_PERMITTED false), so
/// reaches b through the device. Both land in one multi-receive buffer, each in its own bytes,
/// with its sender's address.
#[test]
fn messages_from_both_paths_share_one_multi_receive_buffer() {
    let a = lo_node(CAPS | FI_MULTI_RECV, |_| ());
    let b = lo_node(CAPS | FI_MULTI_RECV, |_| ());
    let c = lo_node(CAPS | FI_MULTI_RECV, |ep| {
        ep.setopt(FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED, &[0])
            .unwrap()
    });
    let (ab, cb) = (a.insert_hex(&b.name_hex()), c.insert_hex(&b.name_hex()));
    let (ba, bc) = (b.insert_hex(&a.name_hex()), b.insert_hex(&c.name_hex()));
    b.ep.setopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &64usize.to_ne_bytes())
        .unwrap();
    let (mbuf, mv) = buf(64 << 10);
    let base = mbuf.as_ptr() as usize;
    let mvs = [mv];
    let mut recv = msg(&mvs, FI_ADDR_UNSPEC, 0, 50, 0);
    recv.call = Call::Msg;
    recv.flags = FI_MULTI_RECV | FI_COMPLETION;
    b.ep.recv(&recv, false).unwrap();
    let mut keep = Vec::new();
    for i in 0..6u8 {
        let (from, to) = if i % 2 == 0 { (&a, ab) } else { (&c, cb) };
        let (s, v) = buf(1000);
        s.copy_from_slice(&pattern(1000, 100 + i));
        from.ep.send(&msg(&[v], to, 0, 60 + i as usize, 0), false)
            .unwrap();
        keep.push(v);
    }
    let mut seen = Vec::new();
    let t = Instant::now();
    while seen.len() < 6 {
        let mut got = None;
        match b.cq.read(1, |e| got = Some(*e)) {
            Ok(_) => {}
            Err(Errno::AVAIL) => panic!("error completion {:?}", b.cq.readerr()),
            Err(_) => {
                a.cq.progress();
                c.cq.progress();
                assert!(t.elapsed() < Duration::from_secs(30), "no completion in 30 s");
                continue;
            }
        }
        let e = got.unwrap();
        assert_eq!((e.op_context, e.len), (50, 1000));
        let off = e.buf - base;
        assert!(off + 1000 <= mbuf.len(), "completion outside the buffer");
        let got = &mbuf[off..off + 1000];
        let i = (0..6u8)
            .find(|&i| got == &pattern(1000, 100 + i)[..])
            .expect("a message's bytes intact in its own place");
        assert_eq!(e.src_addr, if i % 2 == 0 { ba } else { bc }, "message {i}");
        seen.push((off, i));
    }
    seen.sort_unstable();
    seen.dedup_by_key(|s| s.1);
    assert_eq!(seen.len(), 6, "six messages, six places: {seen:?}");
    for n in [&a, &c] {
        for _ in 0..3 {
            wait_ok(n, &b);
        }
    }
    let sent = |n: &Node| {
        n.ep.as_any()
            .and_then(|e| e.downcast_ref::<RdmEndpoint>())
            .map(|e| e.device_stats().data_sent)
            .unwrap()
    };
    assert!(sent(&c) > 0, "c may not use shared memory");
    assert_eq!(sent(&a) == 0, SHM_TRANSFER == "1");
}

/// FI_OPT_SHARED_MEMORY_PERMITTED: a C bool, set before fi_enable; asking for shm while
/// FI_EFA_ENABLE_SHM_TRANSFER=0 is refused (as upstream).
#[test]
fn shared_memory_permitted_is_an_option_before_enable() {
    let opt = FI_OPT_SHARED_MEMORY_PERMITTED;
    let n = lo_node(CAPS, |ep| {
        assert_eq!(ep.setopt(FI_OPT_ENDPOINT, opt, &[1, 0]), Err(Errno::INVAL));
        assert_eq!(ep.setopt(FI_OPT_ENDPOINT, opt, &[0]), Ok(()));
        let on = ep.setopt(FI_OPT_ENDPOINT, opt, &[1]);
        assert_eq!(on, if SHM_TRANSFER == "1" { Ok(()) } else { Err(Errno::INVAL) });
    });
    assert_eq!(n.ep.setopt(FI_OPT_ENDPOINT, opt, &[0]), Err(Errno::OPBADSTATE));
}

/// FI_OPT_CUDA_API_PERMITTED (fi_endpoint(3)): with no CUDA library or device the option
/// cannot be set, true or false, before or after fi_enable (-FI_EINVAL, as upstream efa);
/// a value that is not a C bool is -FI_EINVAL too.
#[test]
fn cuda_api_permitted_is_refused_without_cuda() {
    let opt = FI_OPT_CUDA_API_PERMITTED;
    let n = lo_node(CAPS, |ep| {
        for v in [&[0u8][..], &[1], &[1, 0, 0, 0], &[]] {
            assert_eq!(ep.setopt(FI_OPT_ENDPOINT, opt, v), Err(Errno::INVAL), "{v:?}");
        }
    });
    assert_eq!(n.ep.setopt(FI_OPT_ENDPOINT, opt, &[0]), Err(Errno::INVAL));
    assert_eq!(n.ep.setopt(FI_OPT_ENDPOINT, opt, &[1]), Err(Errno::INVAL));
}

/// The receiver reads its completion and never calls into the library again: the transport's
/// acknowledgement, which the device may keep back for the application's answer to carry,
/// must still leave (the ack timer's thread sends it), or the sender's send never completes
/// (it ends with "unresponsive remote" once the peer is given up).
#[test]
fn acks_leave_even_when_the_receiver_stops_calling() {
    let (a, b, ab, _) = pair();
    let (_d, dv) = buf(64);
    let (s, sv) = buf(64);
    s.copy_from_slice(&pattern(64, 12));
    b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 31, 0), false)
        .unwrap();
    a.ep.send(&msg(&[sv], ab, 0, 32, 0), false).unwrap();
    assert_eq!(wait_ok(&b, &a).op_context, 31);
    let done = a.wait(10).expect("the send completes");
    assert_eq!(done.op_context, 32);
}

/// Small sends posted back to back may wait in the device for the sender's next poll, to leave
/// in one batch. A sender that posts them and then makes no call at all still gets them out:
/// the ack timer flushes what the device holds.
#[test]
fn a_burst_of_sends_leaves_even_when_the_sender_stops_calling() {
    const N: usize = 16;
    let (a, b, ab, _) = pair();
    let dst = post_receives(&b, N, 64, 100);
    for (i, sv) in patterned(N, |_| 64).iter().enumerate() {
        a.ep.send(&msg(&[*sv], ab, 0, 200 + i, 0), false).unwrap();
    }
    // From here a makes no call until b has every message.
    for (i, d) in dst.iter().enumerate() {
        let r = b.wait(10).expect("a message");
        assert_eq!((r.op_context, r.len), (100 + i, 64), "in order");
        assert!(*d == &pattern(64, i as u8)[..], "data of message {i}");
    }
    for i in 0..N {
        assert_eq!(a.wait(10).expect("the send completes").op_context, 200 + i);
    }
}

/// fi_trywait's answer: blocking on the CQ's fd is safe over the device alone, not when shm
/// (which no fd tells of) may carry messages.
#[test]
fn a_cq_is_waitable_only_when_its_fd_tells_of_everything() {
    let (a, _b, _, _) = pair();
    assert_eq!(a.cq.waitable(), SHM_TRANSFER == "0" && DEVICE_WAIT_FD);
}

/// With local peers through shm, an endpoint whose device has been quiet leaves it alone on
/// its polls (`rdm::quiet`): a datagram from a peer that must use the device (c may not use
/// shared memory) still gets in, each time after a quiet spell, because a thread watches the
/// quiet device and tells the endpoint to look. (With local peers through the device, nothing
/// is quiet and every poll looks.)
#[test]
fn a_quiet_device_still_hears_from_the_network() {
    let b = lo_node(CAPS, |_| ());
    let c = lo_node(CAPS, |ep| {
        ep.setopt(FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED, &[0])
            .unwrap()
    });
    let cb = c.insert_hex(&b.name_hex());
    let quiet = || {
        b.ep.as_any()
            .and_then(|e| e.downcast_ref::<RdmEndpoint>())
            .expect("an efa RDM endpoint")
            .device_quiet_state()
    };
    for i in 0..4u8 {
        // A quiet spell: b polls, nothing arrives.
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(20) {
            b.cq.progress();
            c.cq.progress();
        }
        assert_eq!(
            quiet(),
            if SHM_TRANSFER == "1" { (true, true) } else { (false, false) },
            "b's device after a quiet spell"
        );
        let (d, dv) = buf(3000);
        let (s, sv) = buf(3000);
        s.copy_from_slice(&pattern(3000, 40 + i));
        b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 70, 0), false)
            .unwrap();
        c.ep.send(&msg(&[sv], cb, 0, 71, 0), false).unwrap();
        let r = wait_ok(&b, &c);
        assert_eq!((r.op_context, r.len), (70, 3000));
        assert!(d == &pattern(3000, 40 + i)[..], "message {i} intact");
        assert_eq!(wait_ok(&c, &b).op_context, 71);
    }
}

/// `removed_address_is_forgotten_and_its_index_reused` (common/node.rs) over the loopback
/// device.
#[test]
fn a_removed_address_is_forgotten_and_its_index_reused() {
    let a = lo_node(CAPS, |_| ());
    let b = lo_node(CAPS, |_| ());
    let c = lo_node(CAPS, |_| ());
    removed_address_is_forgotten_and_its_index_reused(&a, &b, &c);
}

/// A send to a local peer skips the endpoint's lock once its path is known (shm): an index
/// the AV gave back and then to a peer that cannot use shared memory must take the device, and
/// the skipped checks must still hold (an inject too large, too many iovecs).
#[test]
fn an_index_reused_for_a_peer_without_shm_takes_the_device() {
    let a = lo_node(CAPS, |_| ());
    let b = lo_node(CAPS, |_| ());
    let c = lo_node(CAPS, |ep| {
        ep.setopt(FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED, &[0])
            .unwrap()
    });
    let ab = a.insert_hex(&b.name_hex());
    let sent = |n: &Node| {
        n.ep.as_any()
            .and_then(|e| e.downcast_ref::<RdmEndpoint>())
            .map(|e| e.device_stats().data_sent)
            .unwrap()
    };
    for seed in 0..3 {
        exchange(&a, &b, ab, 100, seed % 2 == 0, seed == 1, seed);
    }
    assert_eq!(sent(&a) == 0, SHM_TRANSFER == "1", "a reached b through shm");
    let inject = a.info.tx_attr.inject_size;
    let (_big, bigv) = buf(inject + 1);
    assert_eq!(
        a.ep.send(&msg(&[bigv], ab, 0, 1, FI_INJECT), true),
        Err(Errno::MSGSIZE),
        "an inject larger than inject_size"
    );
    let many: Vec<_> = (0..a.info.tx_attr.iov_limit + 1).map(|_| buf(8).1).collect();
    assert_eq!(
        a.ep.send(&msg(&many, ab, 0, 1, 0), false),
        Err(Errno::INVAL),
        "more iovecs than iov_limit"
    );
    a.av.remove(ab).unwrap();
    let ac = a.insert_hex(&c.name_hex());
    assert_eq!(ac, ab, "the removed index is reused");
    exchange(&a, &c, ac, 100, false, true, 7);
    exchange(&a, &c, ac, 4000, true, false, 8);
    assert!(sent(&a) > 0, "a reached c, which has no shm, through the device");
    for _ in 0..100 {
        b.cq.progress();
    }
    let mut got = None;
    assert_eq!(b.cq.read(1, |e| got = Some(*e)), Err(Errno::AGAIN), "b got {got:?}");
}

/// An application that asked for `FI_THREAD_DOMAIN` serializes its calls: the domain's CQs,
/// receive queues and hidden shm endpoints then lock without locked instructions (only our
/// endpoint's own lock, which the ack timer's thread also takes, stays a full one). Messages
/// of every protocol still go both ways, over either path.
#[test]
fn a_thread_domain_domain_is_serialized_and_carries_everything() {
    init();
    let open = |threading| {
        let mut hints = rdm_hints();
        hints.domain_attr.threading = threading;
        Node::open_hints(&EFA, &hints, on_rdm_domain)
    };
    assert!(!open(FI_THREAD_SAFE).domain.serialized());
    let (a, b) = (open(FI_THREAD_DOMAIN), open(FI_THREAD_DOMAIN));
    assert!(a.domain.serialized() && b.domain.serialized());
    let (ab, ba) = (a.insert_hex(&b.name_hex()), b.insert_hex(&a.name_hex()));
    for (i, len) in [8, 4000, 100 << 10, 1 << 20].into_iter().enumerate() {
        exchange(&a, &b, ab, len, i % 2 == 0, i % 3 == 0, i as u8);
        exchange(&b, &a, ba, len, i % 2 == 1, i % 3 == 1, 10 + i as u8);
    }
}

/// FI_MSG_PREFIX (fi_getinfo(3)), granted when hinted: every send and receive buffer starts
/// with `msg_prefix_size` bytes of the provider's, and the message is what follows them.
#[test]
fn a_message_prefix_is_skipped_on_both_sides() {
    init();
    let lo = |i: &fabric::core::Info| i.domain_attr.name.as_deref() == Some(RDM_DOMAIN);
    let mut hints = fabric::core::Info {
        caps: FI_MSG | FI_SOURCE,
        ..Default::default()
    };
    let plain = fabric::core::provider::InfoProvider::getinfo(
        &EFA,
        fi_version(2, 6),
        None,
        None,
        0,
        Some(&hints),
    )
    .unwrap();
    assert!(
        plain
            .iter()
            .all(|i| i.mode & FI_MSG_PREFIX == 0 && i.ep_attr.msg_prefix_size == 0)
    );
    hints.mode = FI_MSG_PREFIX;
    let a = Node::open_hints(&EFA, &hints, lo);
    let b = Node::open_hints(&EFA, &hints, lo);
    let p = a.info.ep_attr.msg_prefix_size;
    assert_ne!(a.info.mode & a.info.tx_attr.mode & a.info.rx_attr.mode & FI_MSG_PREFIX, 0);
    assert!(p > 0 && p.is_multiple_of(8), "prefix size {p}");
    let ab = a.insert_hex(&b.name_hex());
    b.insert_hex(&a.name_hex());
    // Eager, medium and long-CTS at the 8 KiB MTU.
    for (i, len) in [0usize, 1, 5000, 40_000].into_iter().enumerate() {
        let (src, sv) = buf(p + len);
        src[..p].fill(0xee);
        src[p..].copy_from_slice(&pattern(len, i as u8));
        let (dst, dv) = buf(p + len + 16);
        b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 2, 0), false)
            .unwrap();
        a.ep.send(&msg(&[sv], ab, 0, 1, 0), false).unwrap();
        let r = wait_ok(&b, &a);
        assert_eq!((r.op_context, r.len), (2, len));
        assert!(dst[p..p + len] == pattern(len, i as u8)[..], "{len} bytes");
        assert!(dst[p + len..].iter().all(|&x| x == 0), "past the message");
        assert_eq!(wait_ok(&a, &b).op_context, 1);
    }
    // The inject limit counts the message, not the prefix.
    let inject = a.info.tx_attr.inject_size;
    let (src, sv) = buf(p + inject);
    src[p..].copy_from_slice(&pattern(inject, 9));
    let (dst, dv) = buf(p + inject);
    b.ep.recv(&msg(&[dv], FI_ADDR_UNSPEC, 0, 3, 0), false)
        .unwrap();
    let svs = [sv];
    let op = MsgOp {
        call: Call::Inject,
        ..msg(&svs, ab, 0, 0, 0)
    };
    a.ep.send(&op, false).unwrap();
    assert_eq!(wait_ok(&b, &a).len, inject);
    assert!(dst[p..] == pattern(inject, 9)[..]);
    // A first entry without room for the prefix is refused on both sides.
    let (_, short) = buf(p - 1);
    assert_eq!(
        a.ep.send(&msg(&[short], ab, 0, 1, 0), false).unwrap_err(),
        Errno::INVAL
    );
    assert_eq!(
        b.ep.recv(&msg(&[short], FI_ADDR_UNSPEC, 0, 1, 0), false)
            .unwrap_err(),
        Errno::INVAL
    );
}
