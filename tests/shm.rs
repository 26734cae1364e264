//! The shm provider between real processes: every test runs two children (re-runs of this test
//! binary) that exchange their names through the parent and then talk over shared memory.
//! Paths are exercised both with cross-memory attach and with it disabled (bounce buffers).

mod common;

use std::time::{Duration, Instant};

use common::node::*;
use fabric::abi::consts::*;
use fabric::core::Errno;
use fabric::prov::shm::SHM;
use fabric::sys::mem::IoVec;
use fabric::util::ep::{AtomicKind, AtomicOp, Call};

const CAPS: u64 =
    FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_MULTI_RECV | FI_SOURCE | FI_DIRECTED_RECV;

/// Runs `server` and `client` in two child processes with `env`.
fn pair(test: &str, env: &[(&str, &str)]) {
    let s = Peer::spawn(test, "server", env);
    let c = Peer::spawn(test, "client", env);
    assert!(relay(vec![s, c]), "a child failed");
}

/// Opens the node and exchanges names; returns the node and the peer's fi_addr.
fn setup() -> (Node, u64) {
    let n = Node::open(&SHM, CAPS);
    child_send(&n.name_hex());
    let peer = n.insert_hex(&child_line());
    (n, peer)
}

fn sync() {
    child_say("sync");
    assert_eq!(child_line(), "go");
}

/// A barrier during which this process keeps serving its peer (manual progress: an RMA target
/// must poll for remote operations to advance).
fn sync_serving(n: &Node) {
    child_say("sync");
    assert_eq!(child_line_progressing(n), "go");
}

/// 56 and 57 sit on either side of the largest unexpected message held in its queue slot
/// (`Pending::Small`); both at odd indexes, so not delivery-complete in the second round.
const SIZES: [usize; 14] = [
    0,
    56,
    1,
    57,
    64,
    248,
    249,
    1000,
    4096,
    4097,
    65536,
    65537,
    1 << 20,
    16 << 20,
];

/// Large messages, which both sides copy (`len`, receive bytes, receive pieces): the receive in
/// pieces, one truncated (the bytes behind it must stay as they were), one exactly at the
/// size from which sends are shared, one just below it.
const LARGE: [(usize, usize, usize); 5] = [
    ((1 << 20) + 12_345, (1 << 20) + 12_345, 4),
    ((3 << 20) + 7, 700_001, 2),
    (200_000, 200_000, 3),
    (128 << 10, 128 << 10, 1),
    ((128 << 10) - 1, (128 << 10) - 1, 1),
];

/// `v` cut into `k` pieces (the last takes the remainder).
fn pieces(v: &IoVec, k: usize) -> Vec<IoVec> {
    let each = v.len() / k;
    (0..k)
        .map(|i| {
            let len = if i + 1 == k { v.len() - each * i } else { each };
            v.sub(each * i, len).unwrap()
        })
        .collect()
}

fn messages_scenario() {
    // Which side's own cross-memory copies the kernel refuses: "client" (the sender), "server"
    // or "both".
    let deny = std::env::var("SHM_TEST_DENY_OWN_CMA").ok();
    if deny.is_some() && (deny == role() || deny.as_deref() == Some("both")) {
        deny_own_cma();
    }
    let (n, peer) = setup();
    let server = role().as_deref() == Some("server");
    if server {
        // Expected: posted before the sends. Then unexpected: posted after them.
        let mut bufs = Vec::new();
        for (i, &len) in SIZES.iter().enumerate() {
            let (s, v) = buf(len.max(1));
            n.recv(&[v], FI_ADDR_UNSPEC, None, i, 0, Call::Plain)
                .unwrap();
            bufs.push(s);
        }
        sync();
        let got = n.wait_n(SIZES.len());
        for e in &got {
            let i = e.op_context;
            assert_eq!(e.len, SIZES[i], "length of message {i}");
            assert_eq!(e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
            assert_eq!(e.src_addr, peer, "FI_SOURCE");
            assert_eq!(
                &bufs[i][..SIZES[i]],
                &pattern(SIZES[i], i as u8)[..],
                "data of message {i}"
            );
        }
        sync(); // client sends the second round now
        sync(); // and it has been sent
        for (i, &len) in SIZES.iter().enumerate() {
            let (s, v) = buf(len.max(1));
            // Two-piece receive buffers for the second round.
            let half = len / 2;
            let iov = [
                v.sub(0, half).unwrap(),
                v.sub(half, len.max(1) - half).unwrap(),
            ];
            n.recv(&iov, peer, None, 100 + i, 0, Call::Msg).unwrap();
            let e = n.wait(30).unwrap();
            assert_eq!((e.op_context, e.len), (100 + i, len));
            assert_eq!(
                &s[..len],
                &pattern(len, 100 + i as u8)[..],
                "unexpected message {i}"
            );
        }
        // Third round: large messages into posted receives (shared copies).
        const GUARD: usize = 4096;
        let mut held = Vec::new();
        for (i, &(_, room, k)) in LARGE.iter().enumerate() {
            let (s, v) = buf(room + GUARD);
            s.fill(0xEE);
            let iov = pieces(&v.sub(0, room).unwrap(), k);
            n.recv(&iov, peer, None, 200 + i, 0, Call::Msg).unwrap();
            held.push(s);
        }
        sync();
        for _ in LARGE {
            // Shared receives may complete after later ones.
            let (ctx, got) = match n.wait(30) {
                Ok(e) => (e.op_context, e.len),
                Err(e) => {
                    let (len, room, _) = LARGE[e.op_context - 200];
                    assert_eq!(
                        (e.err, e.len, e.olen),
                        (FI_ETRUNC, room, len - room),
                        "truncated large message"
                    );
                    (e.op_context, e.len)
                }
            };
            let i = ctx - 200;
            let (len, room, _) = LARGE[i];
            assert_eq!(got, len.min(room), "length of large message {i}");
            let s = &held[i];
            assert!(
                s[..got] == pattern(len, 200 + i as u8)[..got],
                "data of large message {i}"
            );
            assert!(
                s[got..].iter().all(|&b| b == 0xEE),
                "bytes behind large message {i}"
            );
        }
        sync();
    } else {
        sync();
        for (i, &len) in SIZES.iter().enumerate() {
            let (s, v) = buf(len.max(1));
            s[..len].copy_from_slice(&pattern(len, i as u8));
            n.send(&[v.sub(0, len).unwrap()], peer, None, i, 0, Call::Plain)
                .unwrap();
        }
        let done = n.wait_n(SIZES.len());
        assert!(done.iter().all(|e| e.flags & FI_SEND != 0));
        sync();
        for (i, &len) in SIZES.iter().enumerate() {
            let (s, v) = buf(len.max(1));
            s[..len].copy_from_slice(&pattern(len, 100 + i as u8));
            // Three pieces on the send side, delivery-complete on half of them.
            let a = len / 3;
            let iov = [
                v.sub(0, a).unwrap(),
                v.sub(a, a).unwrap(),
                v.sub(2 * a, len - 2 * a).unwrap(),
            ];
            let flags = if i % 2 == 0 { FI_DELIVERY_COMPLETE } else { 0 };
            n.send(&iov, peer, None, 100 + i, flags, Call::Msg).unwrap();
        }
        sync();
        // Delivery-complete sends finish only once the server received them.
        n.wait_n(SIZES.len());
        sync();
        for (i, &(len, _, _)) in LARGE.iter().enumerate() {
            let (s, v) = buf(len);
            s.copy_from_slice(&pattern(len, 200 + i as u8));
            n.send(&[v], peer, None, 200 + i, 0, Call::Plain).unwrap();
        }
        let done = n.wait_n(LARGE.len());
        assert!(done.iter().all(|e| e.flags & FI_SEND != 0));
        sync();
    }
    child_done();
}

#[test]
fn messages_every_size_and_path() {
    if role().is_some() {
        return messages_scenario();
    }
    pair("messages_every_size_and_path", &[]);
}

#[test]
fn messages_when_the_kernel_refuses_the_senders_own_copies() {
    if role().is_some() {
        return messages_scenario();
    }
    pair(
        "messages_when_the_kernel_refuses_the_senders_own_copies",
        &[("SHM_TEST_DENY_OWN_CMA", "client")],
    );
}

#[test]
fn messages_when_the_kernel_refuses_the_receivers_own_copies() {
    if role().is_some() {
        return messages_scenario();
    }
    pair(
        "messages_when_the_kernel_refuses_the_receivers_own_copies",
        &[("SHM_TEST_DENY_OWN_CMA", "server")],
    );
}

#[test]
fn messages_when_the_kernel_refuses_every_copy_between_them() {
    if role().is_some() {
        return messages_scenario();
    }
    pair(
        "messages_when_the_kernel_refuses_every_copy_between_them",
        &[("SHM_TEST_DENY_OWN_CMA", "both")],
    );
}

#[test]
fn messages_without_cross_memory_attach() {
    if role().is_some() {
        return messages_scenario();
    }
    pair(
        "messages_without_cross_memory_attach",
        &[("FI_SHM_DISABLE_CMA", "1")],
    );
}

fn tagged_scenario() {
    let (n, peer) = setup();
    if role().as_deref() == Some("server") {
        sync(); // all sent, all unexpected now
        // Peek finds the first tag-7 message without taking it.
        let (_s, v) = buf(64);
        n.recv(&[v], FI_ADDR_UNSPEC, Some((7, 0)), 1, FI_PEEK, Call::Msg)
            .unwrap();
        let e = n.wait(10).unwrap();
        assert_eq!((e.op_context, e.tag, e.len), (1, 7, 10));
        // Peek for something absent: FI_ENOMSG error completion.
        n.recv(&[v], FI_ADDR_UNSPEC, Some((99, 0)), 2, FI_PEEK, Call::Msg)
            .unwrap();
        assert_eq!(n.wait(10).unwrap_err().err, FI_ENOMSG);
        // Claim the tag-7 message, then take it with FI_CLAIM.
        n.recv(
            &[v],
            FI_ADDR_UNSPEC,
            Some((7, 0)),
            3,
            FI_PEEK | FI_CLAIM,
            Call::Msg,
        )
        .unwrap();
        assert_eq!(n.wait(10).unwrap().op_context, 3);
        let (s, v2) = buf(64);
        n.recv(&[v2], FI_ADDR_UNSPEC, Some((7, 0)), 3, FI_CLAIM, Call::Msg)
            .unwrap();
        let e = n.wait(10).unwrap();
        assert_eq!((e.op_context, e.tag, e.len), (3, 7, 10));
        assert_eq!(&s[..10], &pattern(10, 7)[..]);
        // Discard the tag-8 message.
        n.recv(
            &[v],
            FI_ADDR_UNSPEC,
            Some((8, 0)),
            4,
            FI_PEEK | FI_DISCARD,
            Call::Msg,
        )
        .unwrap();
        assert_eq!(n.wait(10).unwrap().tag, 8);
        // Claim the tag-10 message, then drop it with FI_CLAIM | FI_DISCARD: the completion
        // names the message's tag.
        n.recv(
            &[v],
            FI_ADDR_UNSPEC,
            Some((10, 0)),
            10,
            FI_PEEK | FI_CLAIM,
            Call::Msg,
        )
        .unwrap();
        assert_eq!(n.wait(10).unwrap().op_context, 10);
        n.recv(
            &[],
            FI_ADDR_UNSPEC,
            Some((10, 0)),
            10,
            FI_CLAIM | FI_DISCARD,
            Call::Msg,
        )
        .unwrap();
        let e = n.wait(10).unwrap();
        assert_eq!((e.op_context, e.tag), (10, 10));
        // Ignore bits: 0x100 | x matches tags 0x101 and 0x102 in order.
        for ctx in [5, 6] {
            let (s, v) = buf(64);
            n.recv(&[v], peer, Some((0x100, 0xff)), ctx, 0, Call::Plain)
                .unwrap();
            let e = n.wait(10).unwrap();
            let want = if ctx == 5 { 0x101 } else { 0x102 };
            assert_eq!((e.op_context, e.tag), (ctx, want));
            assert_eq!(&s[..10], &pattern(10, want as u8)[..]);
        }
        // A directed receive for another source does not match.
        let (_s, v) = buf(64);
        n.recv(&[v], peer + 1000, Some((9, 0)), 7, 0, Call::Plain)
            .ok();
        n.recv(&[v], peer, Some((9, 0)), 8, 0, Call::Plain).unwrap();
        let e = n.wait(10).unwrap();
        assert_eq!(e.op_context, 8);
        assert_eq!(e.data, 0xdada, "remote CQ data");
        assert_ne!(e.flags & FI_REMOTE_CQ_DATA, 0);
        // The tag-8 message was discarded: a receive for it finds nothing; cancel it.
        let (_s, v) = buf(64);
        n.recv(&[v], FI_ADDR_UNSPEC, Some((8, 0)), 9, 0, Call::Plain)
            .unwrap();
        n.ep.cancel(9).unwrap();
        let e = n.wait(10).unwrap_err();
        assert_eq!((e.op_context, e.err), (9, FI_ECANCELED));
        assert_eq!(n.ep.cancel(9), Err(Errno::NOENT));
    } else {
        for tag in [7u64, 8, 10, 0x101, 0x102] {
            let (s, v) = buf(10);
            s.copy_from_slice(&pattern(10, tag as u8));
            n.send(&[v], peer, Some(tag), tag as usize, 0, Call::Plain)
                .unwrap();
        }
        let (_s, v) = buf(10);
        let op = fabric::util::ep::MsgOp {
            iov: &[v],
            desc: &[],
            addr: peer,
            context: 1,
            data: 0xdada,
            tag: 9,
            ignore: 0,
            flags: FI_REMOTE_CQ_DATA,
            call: Call::Plain,
        };
        n.retry(|| n.ep.send(&op, true)).unwrap();
        n.wait_n(6);
        sync();
    }
    child_done();
}

#[test]
fn tagged_matching_peek_claim_discard_cancel() {
    if role().is_some() {
        return tagged_scenario();
    }
    pair("tagged_matching_peek_claim_discard_cancel", &[]);
}

/// Makes this process's own cross-memory attach calls fail with EPERM, as a kernel that refuses
/// them would (a seccomp filter): its peer must then copy for it, or use bounce buffers.
fn deny_own_cma() {
    use libc::sock_filter;
    const LOAD_NR: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS, offset 0: seccomp_data.nr
    const JUMP_IF_EQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;
    let f = |code, jt, k| sock_filter { code, jt, jf: 0, k };
    let filter = [
        f(LOAD_NR, 0, 0),
        f(JUMP_IF_EQ, 2, libc::SYS_process_vm_readv as u32),
        f(JUMP_IF_EQ, 1, libc::SYS_process_vm_writev as u32),
        f(RET, 0, ALLOW),
        f(RET, 0, ERRNO | libc::EPERM as u32),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with a valid filter program that lives across the call; the filter only
    // changes what two system calls return in this (child test) process.
    let r = unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog)
    };
    assert_eq!(r, 0, "seccomp filter");
    let mut b = [0u8; 1];
    let (local, remote) = (
        libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: 1,
        },
        libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: 1,
        },
    );
    // SAFETY: both iovecs name `b`, of this process.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    assert_eq!(
        (n, Errno::last_os().0),
        (-1, libc::EPERM),
        "the filter applies"
    );
}

fn rma_scenario() {
    const ORDERED: usize = (3 << 20) - 400_000;
    // Which side's own cross-memory copies the kernel refuses: "client", "server" or "both".
    let deny = std::env::var("SHM_TEST_DENY_OWN_CMA").ok();
    if deny.is_some() && (deny == role() || deny.as_deref() == Some("both")) {
        deny_own_cma();
    }
    // Writes of 1 MiB posted back to back, each over the last at another offset (so they cut
    // the target's memory at different places), then a read of the span: the last write wins
    // wherever they overlap.
    const SHIFTED: [usize; 5] = [0, 100_000, 37, 300_001, 65_536];
    const SHIFTED_AT: usize = 1 << 20;
    const SHIFTED_LEN: usize = 1 << 20;
    let (n, peer) = setup();
    const LEN: usize = 3 << 20;
    if role().as_deref() == Some("server") {
        let (target, tv) = buf(LEN);
        target.copy_from_slice(&pattern(LEN, 1));
        let mr = n.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 11);
        let (ro, rov) = buf(4096);
        ro.copy_from_slice(&pattern(4096, 9));
        let ro_mr = n.reg(rov, FI_REMOTE_READ, 12);
        let base = if n.domain.mr_mode() & FI_MR_VIRT_ADDR as i32 != 0 {
            tv.addr() as u64
        } else {
            0
        };
        let ro_base = if n.domain.mr_mode() & FI_MR_VIRT_ADDR as i32 != 0 {
            rov.addr() as u64
        } else {
            0
        };
        child_send(&format!(
            "{} {} {} {}",
            mr.key(),
            base,
            ro_mr.key(),
            ro_base
        ));
        sync_serving(&n); // client has written
        // Writes landed; the refused ones changed nothing.
        let mut want = pattern(LEN, 1);
        want[..100].copy_from_slice(&pattern(100, 2));
        want[1000..1000 + 200_000].copy_from_slice(&pattern(200_000, 3));
        want[LEN - 10..].copy_from_slice(&pattern(10, 4));
        want[ORDERED..ORDERED + 300_000].copy_from_slice(&pattern(300_000, 5));
        want[ORDERED..ORDERED + 100].copy_from_slice(&pattern(100, 6));
        for (i, &off) in SHIFTED.iter().enumerate() {
            let at = SHIFTED_AT + off;
            want[at..at + SHIFTED_LEN].copy_from_slice(&pattern(SHIFTED_LEN, 20 + i as u8));
        }
        assert!(target[..] == want[..], "target memory");
        assert_eq!(ro, &pattern(4096, 9)[..], "read-only region unchanged");
        // writedata produced a remote completion with the data.
        let e = n.wait(10).unwrap();
        assert_eq!(e.data, 0xfeed);
        assert_eq!(
            e.flags & (FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
            FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA
        );
        assert!(n.rcntr.read() >= 4, "remote write/read counter");
        sync_serving(&n);
    } else {
        let l = child_line();
        let v: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
        let (key, base, ro_key, ro_base) = (v[0], v[1], v[2], v[3]);
        let rma = |off: u64, len: usize, key: u64| {
            [fi_rma_iov {
                addr: base + off,
                len,
                key,
            }]
        };
        let write = |data: Vec<u8>, r: [fi_rma_iov; 1], cq_data: Option<u64>| {
            let (s, v) = buf(data.len());
            s.copy_from_slice(&data);
            n.rma(&[v], peer, &r, false, cq_data, 1).unwrap();
            n.wait(10)
        };
        write(pattern(100, 2), rma(0, 100, key), None).unwrap();
        write(pattern(200_000, 3), rma(1000, 200_000, key), None).unwrap();
        write(
            pattern(10, 4),
            rma((LEN - 10) as u64, 10, key),
            Some(0xfeed),
        )
        .unwrap();
        // Posted back to back, a large write, a small one over its start, and a large read of
        // it all land in order (the large ones may be copied by us, after the target's answer).
        let (big, bigv) = buf(300_000);
        big.copy_from_slice(&pattern(300_000, 5));
        let (small, smallv) = buf(100);
        small.copy_from_slice(&pattern(100, 6));
        let (back, backv) = buf(300_000);
        let at = rma(ORDERED as u64, 300_000, key);
        n.rma(&[bigv], peer, &at, false, None, 4).unwrap();
        n.rma(
            &[smallv],
            peer,
            &rma(ORDERED as u64, 100, key),
            false,
            None,
            5,
        )
        .unwrap();
        n.rma(&[backv], peer, &at, true, None, 6).unwrap();
        assert_eq!(n.wait_n(3).len(), 3);
        let mut want = pattern(300_000, 5);
        want[..100].copy_from_slice(&pattern(100, 6));
        assert!(
            back[..] == want[..],
            "write, write, read of one range in posted order"
        );
        let mut bufs = Vec::new();
        for (i, &off) in SHIFTED.iter().enumerate() {
            let (s, v) = buf(SHIFTED_LEN);
            s.copy_from_slice(&pattern(SHIFTED_LEN, 20 + i as u8));
            let at = rma((SHIFTED_AT + off) as u64, SHIFTED_LEN, key);
            n.rma(&[v], peer, &at, false, None, 10 + i).unwrap();
            bufs.push(s);
        }
        let span = SHIFTED.iter().max().unwrap() + SHIFTED_LEN;
        let (back, backv) = buf(span);
        n.rma(
            &[backv],
            peer,
            &rma(SHIFTED_AT as u64, span, key),
            true,
            None,
            16,
        )
        .unwrap();
        assert_eq!(n.wait_n(SHIFTED.len() + 1).len(), SHIFTED.len() + 1);
        let mut want = pattern(LEN, 1)[SHIFTED_AT..SHIFTED_AT + span].to_vec();
        for (i, &off) in SHIFTED.iter().enumerate() {
            want[off..off + SHIFTED_LEN].copy_from_slice(&pattern(SHIFTED_LEN, 20 + i as u8));
        }
        assert!(
            back[..] == want[..],
            "overlapping writes, then a read, in posted order"
        );
        drop(bufs);
        // Refused: wrong key, past the end, no write access. Nothing is written.
        assert_eq!(
            write(vec![0xee; 16], rma(0, 16, key ^ 0x5555), None)
                .unwrap_err()
                .err,
            FI_EACCES
        );
        assert_eq!(
            write(vec![0xee; 16], rma(LEN as u64 - 8, 16, key), None)
                .unwrap_err()
                .err,
            FI_EACCES
        );
        let r = [fi_rma_iov {
            addr: ro_base,
            len: 16,
            key: ro_key,
        }];
        assert_eq!(write(vec![0xee; 16], r, None).unwrap_err().err, FI_EACCES);
        // The same refusals for writes large enough for the one-copy path.
        assert_eq!(
            write(vec![0xee; 100_000], rma(0, 100_000, key ^ 0x5555), None)
                .unwrap_err()
                .err,
            FI_EACCES
        );
        assert_eq!(
            write(
                vec![0xee; 100_000],
                rma(LEN as u64 - 50_000, 100_000, key),
                None
            )
            .unwrap_err()
            .err,
            FI_EACCES
        );
        // Reads, small and large, and a refused one.
        for (off, len) in [(0usize, 100usize), (500, 2 << 20)] {
            let (s, v) = buf(len);
            n.rma(&[v], peer, &rma(off as u64, len, key), true, None, 2)
                .unwrap();
            n.wait(10).unwrap();
            let mut want = pattern(LEN, 1);
            want[..100].copy_from_slice(&pattern(100, 2));
            want[1000..1000 + 200_000].copy_from_slice(&pattern(200_000, 3));
            for (i, &o) in SHIFTED.iter().enumerate() {
                let at = SHIFTED_AT + o;
                want[at..at + SHIFTED_LEN].copy_from_slice(&pattern(SHIFTED_LEN, 20 + i as u8));
            }
            assert!(s[..] == want[off..off + len], "read {off}+{len}");
        }
        // Injected inline writes are done when posted (counted then, no ACK awaited); the
        // target answers only a refusal, an error completion without context.
        let inject = |data: &[u8], to: [fi_rma_iov; 1]| {
            let (s, v) = buf(data.len());
            s.copy_from_slice(data);
            n.retry(|| {
                n.ep.write(&fabric::util::ep::RmaOp {
                    call: Call::Inject,
                    ..rma_op(&[v], peer, &to, 0)
                })
            })
        };
        let at = 2_500_000usize;
        let counted = n.cntr.read();
        inject(&pattern(64, 40), rma(at as u64, 64, key)).unwrap();
        assert_eq!(
            n.cntr.read(),
            counted + 1,
            "an injected write counts when posted"
        );
        let (back, backv) = buf(64);
        n.rma(&[backv], peer, &rma(at as u64, 64, key), true, None, 32)
            .unwrap();
        n.wait(10).unwrap();
        assert!(back[..] == pattern(64, 40)[..], "injected write landed");
        inject(&pattern(LEN, 1)[at..at + 64], rma(at as u64, 64, key)).unwrap();
        inject(&[0xee; 16], rma(0, 16, key ^ 0x5555)).unwrap();
        let refused = n.wait(10).unwrap_err();
        assert_eq!((refused.err, refused.op_context), (FI_EACCES, 0));
        // The same for injected writes up to the inject size, which travel in our bounce
        // buffers: they land; refused, each is an error completion and its buffer comes back
        // (more refusals than there are buffers, then a write that needs one).
        for (i, len) in [249usize, 1000, 4096].into_iter().enumerate() {
            inject(&pattern(len, 50 + i as u8), rma(at as u64, len, key)).unwrap();
            let (back, backv) = buf(len);
            n.rma(&[backv], peer, &rma(at as u64, len, key), true, None, 33)
                .unwrap();
            n.wait(10).unwrap();
            assert!(
                back[..] == pattern(len, 50 + i as u8)[..],
                "injected {len} B landed"
            );
        }
        const REFUSALS: usize = fabric::prov::shm::BOUNCE_BUFS + 44;
        for _ in 0..REFUSALS {
            inject(&[0xee; 4096], rma(0, 4096, key ^ 0x5555)).unwrap();
            let refused = n.wait(10).unwrap_err();
            assert_eq!((refused.err, refused.op_context), (FI_EACCES, 0));
        }
        inject(&pattern(LEN, 1)[at..at + 4096], rma(at as u64, 4096, key)).unwrap();
        // An inline write to three target entries (its bytes follow the entries in the
        // command), read back, then the original bytes written back the same way.
        let entries = [(2_400_000usize, 30usize), (2_400_100, 50), (2_400_300, 20)];
        let rma3: Vec<fi_rma_iov> = entries
            .iter()
            .map(|&(off, len)| rma(off as u64, len, key)[0])
            .collect();
        let original: Vec<u8> = entries
            .iter()
            .flat_map(|&(off, len)| pattern(LEN, 1)[off..off + len].to_vec())
            .collect();
        for data in [pattern(100, 8), original] {
            let (s, v) = buf(data.len());
            s.copy_from_slice(&data);
            n.rma(&[v], peer, &rma3, false, None, 30).unwrap();
            n.wait(10).unwrap();
            let (back, backv) = buf(data.len());
            n.rma(&[backv], peer, &rma3, true, None, 31).unwrap();
            n.wait(10).unwrap();
            assert!(back[..] == data[..], "inline write to three entries");
        }
        // Small reads come back in the target's answer (inline up to its command body, else
        // in one of its bounce buffers); posted all at once, more of them than the target has
        // bounce buffers, the others go the long way. Each lands in two pieces of memory.
        let ro_want = pattern(4096, 9);
        let sizes = [1usize, 8, 247, 248, 249, 1000, 4095, 4096];
        let mut reads = Vec::new();
        for (i, &len) in sizes.iter().cycle().take(600).enumerate() {
            let off = (i * 37) % (4096 - len + 1);
            let (s, _) = buf(len);
            let (a, b) = s.split_at_mut(len / 2);
            // SAFETY: both halves are of the leaked buffer `s`, valid for the whole test.
            let halves = unsafe {
                [
                    IoVec::new(a.as_mut_ptr(), a.len()),
                    IoVec::new(b.as_mut_ptr(), b.len()),
                ]
            };
            let from = [fi_rma_iov {
                addr: ro_base + off as u64,
                len,
                key: ro_key,
            }];
            n.rma(&halves, peer, &from, true, None, 100 + i).unwrap();
            reads.push((s, off, len));
        }
        assert_eq!(n.wait_n(reads.len()).len(), reads.len());
        for (s, off, len) in reads {
            assert!(s[..] == ro_want[off..off + len], "small read {off}+{len}");
        }
        let (_s, v) = buf(16);
        n.rma(
            &[v],
            peer,
            &[fi_rma_iov {
                addr: ro_base + 4090,
                len: 16,
                key: ro_key,
            }],
            true,
            None,
            3,
        )
        .unwrap();
        assert_eq!(n.wait(10).unwrap_err().err, FI_EACCES);
        // REFUSALS of them the refused injected writes to bounce buffers.
        assert_eq!(
            n.cntr.readerr(),
            REFUSALS as u64 + 7,
            "failed operations are counted"
        );
        sync();
        sync();
    }
    child_done();
}

#[test]
fn rma_checked_at_the_target() {
    if role().is_some() {
        return rma_scenario();
    }
    pair("rma_checked_at_the_target", &[]);
}

#[test]
fn rma_when_the_kernel_refuses_the_initiators_own_copies() {
    if role().is_some() {
        return rma_scenario();
    }
    pair(
        "rma_when_the_kernel_refuses_the_initiators_own_copies",
        &[("SHM_TEST_DENY_OWN_CMA", "client")],
    );
}

#[test]
fn rma_when_the_kernel_refuses_the_targets_own_copies() {
    if role().is_some() {
        return rma_scenario();
    }
    pair(
        "rma_when_the_kernel_refuses_the_targets_own_copies",
        &[("SHM_TEST_DENY_OWN_CMA", "server")],
    );
}

#[test]
fn rma_when_the_kernel_refuses_every_copy_between_them() {
    if role().is_some() {
        return rma_scenario();
    }
    pair(
        "rma_when_the_kernel_refuses_every_copy_between_them",
        &[("SHM_TEST_DENY_OWN_CMA", "both")],
    );
}

#[test]
fn rma_without_cross_memory_attach() {
    if role().is_some() {
        return rma_scenario();
    }
    pair(
        "rma_without_cross_memory_attach",
        &[("FI_SHM_DISABLE_CMA", "1")],
    );
}

fn atomics_scenario() {
    let (n, peer) = setup();
    if role().as_deref() == Some("server") {
        let (t, tv) = buf(64);
        t.copy_from_slice(&[0u8; 64]);
        let mr = n.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
        let virt = n.domain.mr_mode() & FI_MR_VIRT_ADDR as i32 != 0;
        let base = if virt { tv.addr() as u64 } else { 0 };
        // 1,024 counters for a fetch larger than the inject size (its result comes back in
        // a bounce buffer).
        let (many, manyv) = buf(8 * 1024);
        for (i, w) in many.chunks_mut(8).enumerate() {
            w.copy_from_slice(&(i as u64 * 3).to_ne_bytes());
        }
        let many_mr = n.reg(manyv, FI_REMOTE_READ, 1);
        let many_base = if virt { manyv.addr() as u64 } else { 0 };
        child_send(&format!(
            "{} {} {} {}",
            mr.key(),
            base,
            many_mr.key(),
            many_base
        ));
        sync_serving(&n);
        let v = u64::from_ne_bytes(t[..8].try_into().unwrap());
        assert_eq!(
            v,
            1000 + 5 * 7 + 1,
            "sum of the client's atomics then a swap"
        );
        sync_serving(&n);
    } else {
        let l = child_line();
        let v: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
        let (key, base) = (v[0], v[1]);
        let ioc = [fabric::abi::types::fi_rma_ioc {
            addr: base,
            count: 1,
            key,
        }];
        let run = |kind: AtomicKind, op: u32, operand: u64, compare: u64| -> u64 {
            let (s, sv) = buf(8);
            s.copy_from_slice(&operand.to_ne_bytes());
            let (c, cv) = buf(8);
            c.copy_from_slice(&compare.to_ne_bytes());
            let (r, rv) = buf(8);
            let a = AtomicOp {
                kind,
                iov: &[sv],
                desc: &[],
                compare: if kind == AtomicKind::Compare {
                    std::slice::from_ref(&cv)
                } else {
                    &[]
                },
                compare_desc: &[],
                result: if kind == AtomicKind::Write {
                    &[]
                } else {
                    std::slice::from_ref(&rv)
                },
                result_desc: &[],
                addr: peer,
                rma_ioc: &ioc,
                datatype: FI_UINT64,
                op,
                context: 5,
                data: 0,
                flags: 0,
                call: Call::Plain,
            };
            n.retry(|| n.ep.atomic(&a)).unwrap();
            n.wait(10).unwrap();
            u64::from_ne_bytes(r.try_into().unwrap())
        };
        run(AtomicKind::Write, FI_ATOMIC_WRITE, 1000, 0);
        for _ in 0..5 {
            run(AtomicKind::Write, FI_SUM, 7, 0);
        }
        assert_eq!(run(AtomicKind::Fetch, FI_SUM, 0, 0), 1035);
        assert_eq!(
            run(AtomicKind::Compare, FI_CSWAP, 1036, 999),
            1035,
            "failed compare returns the old value"
        );
        assert_eq!(run(AtomicKind::Compare, FI_CSWAP, 1036, 1035), 1035);
        assert_eq!(run(AtomicKind::Fetch, FI_ATOMIC_READ, 0, 0), 1036);
        // A fetch of 8 KiB: its result comes back in the target's bounce buffer.
        let (r, rv) = buf(8 * 1024);
        let fetch = AtomicOp {
            kind: AtomicKind::Fetch,
            iov: &[],
            desc: &[],
            compare: &[],
            compare_desc: &[],
            result: std::slice::from_ref(&rv),
            result_desc: &[],
            addr: peer,
            rma_ioc: &[fabric::abi::types::fi_rma_ioc {
                addr: v[3],
                count: 1024,
                key: v[2],
            }],
            datatype: FI_UINT64,
            op: FI_ATOMIC_READ,
            context: 6,
            data: 0,
            flags: 0,
            call: Call::Plain,
        };
        n.retry(|| n.ep.atomic(&fetch)).unwrap();
        n.wait(10).unwrap();
        for (i, w) in r.chunks(8).enumerate() {
            assert_eq!(u64::from_ne_bytes(w.try_into().unwrap()), i as u64 * 3);
        }
        // Every valid op × datatype is reported with a count.
        for dt in [
            FI_INT8,
            FI_UINT32,
            FI_DOUBLE,
            FI_LONG_DOUBLE,
            FI_FLOAT_COMPLEX,
            FI_UINT128,
        ] {
            assert!(n.ep.atomic_valid(AtomicKind::Write, dt, FI_SUM).unwrap() > 0);
        }
        assert_eq!(
            n.ep.atomic_valid(AtomicKind::Write, FI_DOUBLE, FI_BXOR),
            Err(Errno::OPNOTSUPP)
        );
        sync();
        sync();
    }
    child_done();
}

#[test]
fn atomics_between_processes() {
    if role().is_some() {
        return atomics_scenario();
    }
    pair("atomics_between_processes", &[]);
}

/// Messages into one multi-receive buffer: one that both sides could copy, then one that
/// leaves less than the minimum (100 bytes) behind.
const LARGE_MULTI: [usize; 2] = [300 << 10, 100 << 10];

fn multi_recv_scenario() {
    let (n, peer) = setup();
    if role().as_deref() == Some("server") {
        n.ep.setopt(
            FI_OPT_ENDPOINT,
            FI_OPT_MIN_MULTI_RECV,
            &100usize.to_ne_bytes(),
        )
        .unwrap();
        let (s, v) = buf(1000);
        n.recv(&[v], FI_ADDR_UNSPEC, None, 1, FI_MULTI_RECV, Call::Msg)
            .unwrap();
        sync();
        // 3 × 300 bytes fit; after them 100 bytes remain (not below the minimum) so the buffer
        // stays until a 4th message leaves less.
        let mut off = 0;
        let mut released = false;
        for i in 0..4 {
            let e = n.wait(10).unwrap();
            let len = if i < 3 { 300 } else { 50 };
            assert_eq!((e.op_context, e.len), (1, len));
            assert_eq!(
                e.buf,
                v.addr() + off,
                "multi-recv places messages back to back"
            );
            assert_eq!(&s[off..off + len], &pattern(len, i as u8)[..]);
            off += len;
            released = e.flags & FI_MULTI_RECV != 0;
        }
        assert!(released, "the last completion releases the buffer");
        // Truncation: a 300-byte message into a 100-byte buffer.
        let (_s, v) = buf(100);
        n.recv(&[v], FI_ADDR_UNSPEC, None, 2, 0, Call::Plain)
            .unwrap();
        let e = n.wait(10).unwrap_err();
        assert_eq!(
            (e.op_context, e.err, e.len, e.olen),
            (2, FI_ETRUNC, 100, 200)
        );
        // Large messages into a multi-receive buffer complete in order, the one that releases
        // the buffer last (a large message's copy, shared with the sender, must not end after
        // the buffer was handed back).
        let (s, v) = buf(LARGE_MULTI.iter().sum::<usize>() + 50);
        n.recv(&[v], FI_ADDR_UNSPEC, None, 3, FI_MULTI_RECV, Call::Msg)
            .unwrap();
        sync();
        let mut off = 0;
        for (i, &len) in LARGE_MULTI.iter().enumerate() {
            let e = n.wait(30).unwrap();
            assert_eq!((e.op_context, e.len, e.buf), (3, len, v.addr() + off));
            let last = i + 1 == LARGE_MULTI.len();
            assert_eq!(e.flags & FI_MULTI_RECV != 0, last, "released by the last");
            assert!(s[off..off + len] == pattern(len, 10 + i as u8)[..]);
            off += len;
        }
        sync();
    } else {
        sync();
        for (i, len) in [300, 300, 300, 50, 300].into_iter().enumerate() {
            let (s, v) = buf(len);
            s.copy_from_slice(&pattern(len, i as u8));
            n.send(&[v], peer, None, i, 0, Call::Plain).unwrap();
        }
        n.wait_n(5);
        sync();
        for (i, &len) in LARGE_MULTI.iter().enumerate() {
            let (s, v) = buf(len);
            s.copy_from_slice(&pattern(len, 10 + i as u8));
            n.send(&[v], peer, None, i, 0, Call::Plain).unwrap();
        }
        n.wait_n(LARGE_MULTI.len());
        sync();
    }
    child_done();
}

#[test]
fn multi_recv_and_truncation() {
    if role().is_some() {
        return multi_recv_scenario();
    }
    pair("multi_recv_and_truncation", &[]);
}

fn threads_scenario() {
    let (n, peer) = setup();
    const THREADS: usize = 4;
    const PER: usize = 500;
    let n = std::sync::Arc::new(n);
    if role().as_deref() == Some("server") {
        for i in 0..THREADS * PER {
            let (_s, v) = buf(64);
            n.recv(&[v], FI_ADDR_UNSPEC, Some((0, u64::MAX)), i, 0, Call::Plain)
                .unwrap();
        }
        sync();
        // Several threads read the CQ at once; every completion is seen exactly once.
        let seen = std::sync::Arc::new(std::sync::Mutex::new(vec![false; THREADS * PER]));
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                let (n, seen) = (n.clone(), seen.clone());
                std::thread::spawn(move || {
                    let t = Instant::now();
                    while seen.lock().unwrap().iter().any(|s| !s) {
                        assert!(t.elapsed() < Duration::from_secs(30));
                        let mut got = Vec::new();
                        let _ = n.cq.read(8, |e| got.push(e.op_context));
                        let mut s = seen.lock().unwrap();
                        for c in got {
                            assert!(!s[c], "completion {c} seen twice");
                            s[c] = true;
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        sync();
    } else {
        sync();
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let n = n.clone();
                std::thread::spawn(move || {
                    for i in 0..PER {
                        let (_s, v) = buf(64);
                        n.send(
                            &[v],
                            peer,
                            Some((t * PER + i) as u64),
                            t * PER + i,
                            0,
                            Call::Plain,
                        )
                        .unwrap();
                        let _ = n.cq.read(4, |_| {});
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        sync();
    }
    child_done();
}

#[test]
fn threads_post_and_read_at_once() {
    if role().is_some() {
        return threads_scenario();
    }
    pair("threads_post_and_read_at_once", &[]);
}

/// The server dies with a large send of the client's pending: the client gets an error
/// completion within a bound, never a hang.
#[test]
fn killed_peer_fails_pending_operations() {
    if role().as_deref() == Some("server") {
        let (_n, _peer) = setup();
        child_say("ready");
        // Wait to be killed.
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    if role().as_deref() == Some("client") {
        let (n, peer) = setup();
        assert_eq!(child_line(), "killed");
        let (_s, v) = buf(8 << 20);
        match n.send(&[v], peer, None, 42, 0, Call::Plain) {
            Ok(()) => {
                let e = n.wait(10).unwrap_err();
                assert_eq!((e.op_context, e.err), (42, FI_ECONNABORTED));
            }
            Err(e) => assert_eq!(e, Errno::CONNABORTED),
        }
        child_say("done");
        return;
    }
    let mut s = Peer::spawn("killed_peer_fails_pending_operations", "server", &[]);
    let mut c = Peer::spawn("killed_peer_fails_pending_operations", "client", &[]);
    let (sn, cn) = (s.line(), c.line());
    s.send_line(
        sn.strip_prefix("msg ")
            .map(|_| cn.strip_prefix("msg ").unwrap())
            .unwrap(),
    );
    c.send_line(sn.strip_prefix("msg ").unwrap());
    assert_eq!(s.line(), "ready");
    s.kill();
    c.send_line("killed");
    assert_eq!(c.line(), "done");
    assert!(c.wait());
}

/// Messages that arrive before the application inserted their sender: the first is taken by an
/// undirected receive (no source address), then the sender is inserted, and a receive directed
/// at it must find the second one, already waiting (fabtests' fi_unexpected_msg does this).
fn late_insert_scenario() {
    let n = Node::open(&SHM, CAPS);
    child_send(&n.name_hex());
    let peer_name = child_line();
    if role().as_deref() == Some("server") {
        sync();
        // Both messages are sent; take them in as unexpected before inserting the sender.
        sync_serving(&n);
        for _ in 0..50 {
            n.cq.progress();
            std::thread::sleep(Duration::from_millis(2));
        }
        let (s1, v1) = buf(64);
        n.recv(&[v1], FI_ADDR_UNSPEC, Some((7, 0)), 1, 0, Call::Plain)
            .unwrap();
        let e = n.wait(10).unwrap();
        assert_eq!((e.op_context, e.len), (1, 64));
        assert_eq!(
            e.src_addr, FI_ADDR_NOTAVAIL,
            "the sender was not in the AV yet"
        );
        assert_eq!(&s1[..], &pattern(64, 1)[..]);
        let peer = n.insert_hex(&peer_name);
        let (s2, v2) = buf(64);
        n.recv(&[v2], peer, Some((7, 0)), 2, 0, Call::Plain)
            .unwrap();
        let e = n
            .wait(10)
            .expect("a directed receive finds the waiting message");
        assert_eq!((e.op_context, e.len, e.src_addr), (2, 64, peer));
        assert_eq!(&s2[..], &pattern(64, 2)[..]);
        sync();
    } else {
        let peer = n.insert_hex(&peer_name);
        sync();
        for i in 1..=2u8 {
            let (s, v) = buf(64);
            s.copy_from_slice(&pattern(64, i));
            n.send(&[v], peer, Some(7), i as usize, 0, Call::Plain)
                .unwrap();
        }
        n.wait_n(2);
        sync_serving(&n);
        sync_serving(&n);
    }
    child_done();
}

#[test]
fn directed_receive_finds_messages_from_senders_inserted_late() {
    if role().is_some() {
        return late_insert_scenario();
    }
    pair(
        "directed_receive_finds_messages_from_senders_inserted_late",
        &[],
    );
}

/// A multi-receive buffer posted after several messages arrived takes all of them that fit,
/// back to back (fabtests' multi_recv reposts a half while messages wait).
fn multi_recv_late_scenario() {
    let (n, peer) = setup();
    if role().as_deref() == Some("server") {
        sync_serving(&n);
        // The client's sends are complete: the messages wait here, unexpected.
        for _ in 0..50 {
            n.cq.progress();
            std::thread::sleep(Duration::from_millis(2));
        }
        n.ep.setopt(
            FI_OPT_ENDPOINT,
            FI_OPT_MIN_MULTI_RECV,
            &100usize.to_ne_bytes(),
        )
        .unwrap();
        let (s, v) = buf(1000);
        n.recv(&[v], FI_ADDR_UNSPEC, None, 1, FI_MULTI_RECV, Call::Msg)
            .unwrap();
        let mut off = 0;
        for i in 0..3u8 {
            let e = n
                .wait(10)
                .expect("every waiting message lands in the buffer");
            assert_eq!((e.op_context, e.len, e.buf), (1, 300, v.addr() + off));
            assert_eq!(&s[off..off + 300], &pattern(300, i)[..]);
            off += 300;
        }
        sync();
    } else {
        for i in 0..3u8 {
            let (s, v) = buf(300);
            s.copy_from_slice(&pattern(300, i));
            n.send(&[v], peer, None, i as usize, 0, Call::Plain)
                .unwrap();
        }
        n.wait_n(3);
        sync_serving(&n);
        sync();
    }
    child_done();
}

#[test]
fn multi_recv_posted_after_messages_arrived() {
    if role().is_some() {
        return multi_recv_late_scenario();
    }
    pair("multi_recv_posted_after_messages_arrived", &[]);
}

/// A sender that closes its endpoint right after its sends completed, before the receiver ever
/// looked at it (the receiver has not even mapped the sender's region yet): every message still
/// arrives intact. Upstream's fi_cq_data does this (its server hung when the 1000-byte message
/// sat in a bounce buffer of a region already removed).
fn sender_closes_early_scenario() {
    const LENS: [usize; 3] = [64, 1000, 4096];
    let (n, peer) = setup();
    if role().as_deref() == Some("server") {
        // No progress before the sender has closed.
        sync();
        let mut bufs = Vec::new();
        for (i, &len) in LENS.iter().enumerate() {
            let (s, v) = buf(len);
            n.recv(&[v], FI_ADDR_UNSPEC, None, i, 0, Call::Plain)
                .unwrap();
            bufs.push(s);
        }
        for e in n.wait_n(LENS.len()) {
            let i = e.op_context;
            assert_eq!(e.len, LENS[i], "length of message {i}");
            assert_eq!(e.src_addr, peer);
            assert_eq!(&bufs[i][..], &pattern(LENS[i], i as u8)[..], "message {i}");
        }
    } else {
        for (i, &len) in LENS.iter().enumerate() {
            let (s, v) = buf(len);
            s.copy_from_slice(&pattern(len, i as u8));
            n.send(&[v], peer, None, i, 0, Call::Plain).unwrap();
        }
        n.wait_n(LENS.len());
        n.ep.close().unwrap();
        sync();
    }
    child_done();
}

#[test]
fn messages_survive_a_sender_that_closed_at_once() {
    if role().is_some() {
        return sender_closes_early_scenario();
    }
    pair("messages_survive_a_sender_that_closed_at_once", &[]);
}

/// A buffer of `len` bytes whose first byte is `at` bytes into a page (leaked: a test's).
fn buf_at(len: usize, at: usize) -> (&'static mut [u8], IoVec) {
    let (s, _) = buf(len + 8192);
    let first = (at + 4096 - s.as_ptr() as usize % 4096) % 4096;
    let s = &mut s[first..first + len];
    let v = IoVec::from_mut_slice(s);
    // SAFETY: the same leaked bytes as `v`, for the test to read and fill.
    (
        unsafe { std::slice::from_raw_parts_mut(v.as_ptr(), len) },
        v,
    )
}

/// Receive buffers 8 and 24 bytes into their pages, send buffers at the start of theirs: a
/// distance at which the kernel's cross-memory copies run at a fifth of their speed on AMD Zen
/// (`sys::cma`), so the copies between them take the detour. Messages of 64 KiB and 1 MiB,
/// whose copies both sides share, and one cut into pieces of which one is at no distance;
/// every byte arrives in place. Both sides again without cross-memory attach.
fn slow_distance_scenario() {
    const MSGS: [(usize, usize); 3] = [(64 << 10, 8), (1 << 20, 24), ((1 << 20) + 4097, 8)];
    let (n, peer) = setup();
    if role().as_deref() == Some("server") {
        let mut bufs = Vec::new();
        for (i, &(len, at)) in MSGS.iter().enumerate() {
            let (s, v) = buf_at(len, at);
            let iov = if i == 2 {
                // The second piece at the start of a page: its part goes straight.
                let (_, w) = buf_at(len - 4097, 0);
                vec![v.sub(0, 4097).unwrap(), w]
            } else {
                vec![v]
            };
            n.recv(&iov, FI_ADDR_UNSPEC, None, i, 0, Call::Msg).unwrap();
            bufs.push((s, iov));
        }
        sync();
        for e in n.wait_n(MSGS.len()) {
            let i = e.op_context;
            assert_eq!(e.len, MSGS[i].0, "length of message {i}");
            let mut got = vec![0u8; MSGS[i].0];
            let mut off = 0;
            for v in &bufs[i].1 {
                v.read_at(0, &mut got[off..off + v.len()]);
                off += v.len();
            }
            assert!(got == pattern(MSGS[i].0, i as u8), "message {i}");
        }
    } else {
        sync();
        for (i, &(len, _)) in MSGS.iter().enumerate() {
            let (s, v) = buf_at(len, 0);
            s.copy_from_slice(&pattern(len, i as u8));
            n.send(&[v], peer, None, i, 0, Call::Plain).unwrap();
        }
        n.wait_n(MSGS.len());
    }
    child_done();
}

#[test]
fn messages_between_buffers_at_a_slow_distance_arrive_whole() {
    if role().is_some() {
        return slow_distance_scenario();
    }
    let test = "messages_between_buffers_at_a_slow_distance_arrive_whole";
    pair(test, &[]);
    pair(test, &[("FI_SHM_DISABLE_CMA", "1")]);
}

/// `removed_address_is_forgotten_and_its_index_reused` (common/node.rs) between three endpoints
/// of this process; the messages are small enough to travel inline.
#[test]
fn a_removed_address_is_forgotten_and_its_index_reused() {
    let (a, b, c) = (
        Node::open(&SHM, CAPS),
        Node::open(&SHM, CAPS),
        Node::open(&SHM, CAPS),
    );
    removed_address_is_forgotten_and_its_index_reused(&a, &b, &c);
}

/// A receiver that lives but takes nothing: the sender's posts fill the receiver's command
/// ring and then answer `FI_EAGAIN` (fi_msg(3)), never a connection error; once the receiver
/// drains, every message arrives.
fn full_ring_scenario() {
    let (n, peer) = setup();
    const MAX: usize = 8192;
    if role().as_deref() == Some("server") {
        sync(); // the client fills our ring meanwhile, while we stay out of the library
        let sent: usize = child_line().parse().unwrap();
        let mut bufs = Vec::new();
        for i in 0..sent {
            let (s, v) = buf(8);
            n.recv(&[v], FI_ADDR_UNSPEC, None, i, 0, Call::Plain)
                .unwrap();
            bufs.push(s);
        }
        let got = n.wait_n(sent);
        for e in &got {
            assert_eq!(e.len, 8);
            assert_eq!(&bufs[e.op_context][..], &pattern(8, e.op_context as u8)[..]);
        }
    } else {
        let mut sent = 0;
        let refusal = loop {
            let (s, v) = buf(8);
            s.copy_from_slice(&pattern(8, sent as u8));
            // The endpoint itself: `Node::send` retries on FI_EAGAIN.
            let op = fabric::util::ep::MsgOp {
                iov: &[v],
                desc: &[],
                addr: peer,
                context: sent,
                data: 0,
                tag: 0,
                ignore: 0,
                flags: 0,
                call: Call::Plain,
            };
            match n.ep.send(&op, false) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
            assert!(
                sent < MAX,
                "{MAX} sends to a receiver that takes nothing all accepted"
            );
        };
        assert_eq!(refusal, Errno::AGAIN, "after {sent} sends");
        assert!(sent > 0);
        sync();
        child_send(&sent.to_string());
        n.wait_n(sent);
    }
    child_done();
}

#[test]
fn a_full_ring_is_eagain_while_the_receiver_lives() {
    if role().is_some() {
        return full_ring_scenario();
    }
    pair("a_full_ring_is_eagain_while_the_receiver_lives", &[]);
}

/// The server in a pid namespace of its own, sharing /dev/shm (as containers may): its pid
/// means nothing to the client and the client's nothing to it, so neither probes nor attaches
/// to the other by pid (bounce buffers instead of cross-memory attach), and nothing is lost.
/// Needs `unshare --pid` (root), as the network-namespace tests do. One test, the scenarios
/// in turn: servers in fresh namespaces have the same pid, hence the same default name.
#[test]
fn messages_and_rma_between_pid_namespaces() {
    const TEST: &str = "messages_and_rma_between_pid_namespaces";
    if role().is_some() {
        return match std::env::var("SCENARIO").as_deref() {
            Ok("messages") => messages_scenario(),
            _ => rma_scenario(),
        };
    }
    for scenario in ["messages", "rma"] {
        let env = [("SCENARIO", scenario)];
        let s = Peer::spawn_under(&["unshare", "--pid", "--fork"], TEST, "server", &env);
        let c = Peer::spawn(TEST, "client", &env);
        assert!(relay(vec![s, c]), "{scenario}: a child failed");
    }
}

/// One server endpoint answering client endpoints of the same process that come and go in
/// turn (fabtests' `fi_rdm_multi_client -U`): each client receives the server's
/// delivery-complete send, which it acknowledges, and closes at once. The server's send must
/// complete, not fail as sent to a peer that is gone: the client acknowledged before closing,
/// so its ACK is in the server's ring when the server sees it closed. The client's messages
/// ahead of the ACK (more than one progress call takes) put the ACK past the first batch, where
/// the server's periodic liveness check runs; every other client's CONNECT, too, reaches
/// the server only after that client closed.
#[test]
fn a_delivery_complete_send_completes_when_its_receiver_closes_at_once() {
    const AHEAD: usize = 100;
    let s = Node::open(&SHM, CAPS);
    for k in 0..4u8 {
        let c = Node::open(&SHM, CAPS);
        let sc = s.insert_hex(&c.name_hex());
        let cs = c.insert_hex(&s.name_hex());
        let (sb, sv) = buf(16);
        sb.copy_from_slice(&pattern(16, k));
        s.send(
            &[sv],
            sc,
            None,
            7,
            FI_DELIVERY_COMPLETE | FI_COMPLETION,
            Call::Msg,
        )
        .unwrap();
        for i in 0..AHEAD {
            let (b, v) = buf(8);
            b.copy_from_slice(&pattern(8, i as u8));
            c.send(&[v], cs, None, i, 0, Call::Plain).unwrap();
            if i == 0 && k % 2 == 0 {
                // The server takes the client's CONNECT while the client lives (as in a
                // ping-pong); otherwise only after the client closed.
                s.cq.progress();
            }
        }
        c.wait_n(AHEAD);
        let (rb, rv) = buf(16);
        c.recv(&[rv], FI_ADDR_UNSPEC, None, 1, 0, Call::Plain)
            .unwrap();
        let e = c.wait(30).expect("the client's receive");
        assert_eq!(e.op_context, 1);
        assert_eq!(&rb[..], &pattern(16, k)[..]);
        c.ep.close().unwrap();
        drop(c);
        // The server's liveness check is due on its next progress call.
        std::thread::sleep(Duration::from_millis(150));
        let e = s
            .wait(30)
            .unwrap_or_else(|e| panic!("client {k}: the server's send failed: {e:?}"));
        assert_eq!(e.op_context, 7);
        for i in 0..AHEAD {
            let (b, v) = buf(8);
            s.recv(&[v], FI_ADDR_UNSPEC, None, i, 0, Call::Plain)
                .unwrap();
            let e = s.wait(30).expect("the client's message");
            assert_eq!(e.op_context, i);
            assert_eq!(&b[..], &pattern(8, i as u8)[..]);
        }
    }
}

/// fabtests' `fi_rdm_bw_mt -g` at 1 MiB: many endpoint pairs, each pair driven by its own two
/// threads, exchange 1 MiB messages both ways at once (rendezvous, cross-memory attach),
/// more threads than cores. Every send and receive completes, with the data sent.
#[test]
fn many_endpoints_exchange_mebibyte_messages_at_once() {
    const PAIRS: usize = 12;
    const ROUNDS: usize = 3;
    const LEN: usize = 1 << 20;
    let nodes: Vec<(Node, Node)> = (0..PAIRS)
        .map(|_| (Node::open(&SHM, CAPS), Node::open(&SHM, CAPS)))
        .collect();
    std::thread::scope(|sc| {
        for (k, (a, b)) in nodes.iter().enumerate() {
            let ab = a.insert_hex(&b.name_hex());
            let ba = b.insert_hex(&a.name_hex());
            for (me, peer, first) in [(a, ab, true), (b, ba, false)] {
                sc.spawn(move || {
                    for r in 0..ROUNDS {
                        let seed = (k * 31 + r) as u8;
                        let (tx, txv) = buf(LEN);
                        tx.copy_from_slice(&pattern(LEN, seed.wrapping_add(u8::from(first))));
                        let (rx, rxv) = buf(LEN);
                        me.recv(&[rxv], peer, None, 1, 0, Call::Plain).unwrap();
                        me.send(&[txv], peer, None, 2, 0, Call::Plain).unwrap();
                        let mut got = [false; 2];
                        for _ in 0..2 {
                            let e = me.wait(120).unwrap_or_else(|e| {
                                panic!("pair {k} round {r}: error completion {e:?}")
                            });
                            got[e.op_context - 1] = true;
                            if e.op_context == 1 {
                                assert_eq!(e.len, LEN);
                            }
                        }
                        assert_eq!(got, [true, true]);
                        assert!(
                            rx[..] == pattern(LEN, seed.wrapping_add(u8::from(!first)))[..],
                            "pair {k} round {r}: data"
                        );
                    }
                });
            }
        }
    });
}

/// The bounce buffer a small write's bytes travel in is released by the target once it has
/// copied them out, and by nobody else: released again when the ACK came, it could already
/// carry a later write's bytes, and another write would take it before the target read them.
/// Two endpoints of this process, the target progressed by hand to make that order.
#[test]
fn a_small_writes_bounce_buffer_is_released_once() {
    const LEN: usize = 4096;
    const BUFS: usize = fabric::prov::shm::BOUNCE_BUFS; // the initiator's bounce buffers
    const WRITES: usize = 2 * BUFS + 1;
    let (a, b) = (Node::open(&SHM, CAPS), Node::open(&SHM, CAPS));
    let to_b = a.insert_hex(&b.name_hex());
    let (target, tv) = buf(WRITES * LEN);
    let mr = b.reg(tv, FI_REMOTE_WRITE, 0);
    let base = if b.domain.mr_mode() & FI_MR_VIRT_ADDR as i32 != 0 {
        tv.addr() as u64
    } else {
        0
    };
    let write = |i: usize| {
        let (s, v) = buf(LEN);
        s.copy_from_slice(&pattern(LEN, i as u8));
        let to = [fi_rma_iov {
            addr: base + (i * LEN) as u64,
            len: LEN,
            key: mr.key(),
        }];
        let t = Instant::now();
        // EAGAIN (every bounce buffer lent): the target reads some, we hear of it.
        while let Err(e) = a.ep.write(&rma_op(&[v], to_b, &to, i)) {
            assert_eq!(e, Errno::AGAIN);
            assert!(t.elapsed() < Duration::from_secs(20), "write {i} refused");
            b.cq.progress();
        }
    };
    // Every buffer lent; the target copies them all out, releases them and answers.
    for i in 0..BUFS {
        write(i);
    }
    for _ in 0..10 {
        b.cq.progress();
    }
    // This write takes buffer 0 again; the progress after its post reads the ACKs of the
    // first round. The target does not run until every buffer is lent once more: a write
    // that found buffer 0 free would overwrite this one's bytes before the target read them.
    for i in BUFS..WRITES {
        write(i);
    }
    for i in 0..WRITES {
        a.wait_driving(&b, 20)
            .unwrap_or_else(|e| panic!("write {i}: {e:?}"));
    }
    for i in 0..WRITES {
        assert!(
            target[i * LEN..(i + 1) * LEN] == pattern(LEN, i as u8)[..],
            "write {i} landed with another write's bytes"
        );
    }
}

/// An injected write up to the inject size travels in one of the initiator's bounce buffers
/// and completes when posted; the target releases the buffer. A target that dies holding
/// some never will: the initiator takes them back once it finds it dead, and goes on
/// writing to others (before, every buffer stayed lent and each later write was refused).
#[test]
fn bounce_buffers_lent_to_a_peer_that_dies_come_back() {
    const LEN: usize = 4096;
    const BUFS: usize = fabric::prov::shm::BOUNCE_BUFS; // the initiator's bounce buffers
    let (a, b, c) = (
        Node::open(&SHM, CAPS),
        Node::open(&SHM, CAPS),
        Node::open(&SHM, CAPS),
    );
    let (to_b, to_c) = (a.insert_hex(&b.name_hex()), a.insert_hex(&c.name_hex()));
    let target = |n: &Node| {
        let (t, tv) = buf(BUFS * LEN);
        let mr = n.reg(tv, FI_REMOTE_WRITE, 0);
        let base = if n.domain.mr_mode() & FI_MR_VIRT_ADDR as i32 != 0 {
            tv.addr() as u64
        } else {
            0
        };
        (t, base, mr)
    };
    let ((_, b_base, b_mr), (c_mem, c_base, c_mr)) = (target(&b), target(&c));
    let inject = |to: u64, base: u64, key: u64, i: usize| {
        let (s, v) = buf(LEN);
        s.copy_from_slice(&pattern(LEN, i as u8));
        let at = [fi_rma_iov {
            addr: base + (i * LEN) as u64,
            len: LEN,
            key,
        }];
        a.ep.write(&fabric::util::ep::RmaOp {
            call: Call::Inject,
            ..rma_op(&[v], to, &at, 0)
        })
    };
    // b never runs: every buffer is lent to it, and the next write waits for one.
    let counted = a.cntr.read();
    for i in 0..BUFS {
        inject(to_b, b_base, b_mr.key(), i).unwrap_or_else(|e| panic!("write {i}: {e:?}"));
    }
    assert_eq!(a.cntr.read(), counted + BUFS as u64, "counted when posted");
    assert_eq!(inject(to_b, b_base, b_mr.key(), 0), Err(Errno::AGAIN));
    assert_eq!(inject(to_c, c_base, c_mr.key(), 0), Err(Errno::AGAIN));
    b.ep.close().unwrap();
    drop(b);
    // a finds b gone at its next liveness check and takes its buffers back.
    let t = Instant::now();
    for i in 0..BUFS {
        loop {
            match inject(to_c, c_base, c_mr.key(), i) {
                Ok(()) => break,
                Err(e) => assert_eq!(e, Errno::AGAIN),
            }
            a.cq.progress();
            c.cq.progress();
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "write {i} to the live peer refused: buffers lent to the dead one never came back"
            );
        }
    }
    let t = Instant::now();
    while c_mem[..]
        != (0..BUFS)
            .flat_map(|i| pattern(LEN, i as u8))
            .collect::<Vec<_>>()[..]
    {
        c.cq.progress();
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "writes to the live peer landed"
        );
    }
}

/// A fetch larger than a command's body gets its result in one of the target's bounce
/// buffers, which the initiator releases once it has read it. An initiator that dies first
/// never will: the target takes its buffers back once it finds it dead, and fetches from
/// others keep working (before, each was refused with FI_EAGAIN once all were lent).
#[test]
fn result_buffers_lent_to_an_initiator_that_dies_come_back() {
    const WORDS: usize = 1024; // 8 KiB of results: more than a command's body
    const BUFS: usize = fabric::prov::shm::BOUNCE_BUFS; // the target's bounce buffers
    let (a, b, c) = (
        Node::open(&SHM, CAPS),
        Node::open(&SHM, CAPS),
        Node::open(&SHM, CAPS),
    );
    let (t, tv) = buf(WORDS * 8);
    for (i, w) in t.chunks_mut(8).enumerate() {
        w.copy_from_slice(&(i as u64 * 7).to_ne_bytes());
    }
    let mr = b.reg(tv, FI_REMOTE_READ, 0);
    let base = if b.domain.mr_mode() & FI_MR_VIRT_ADDR as i32 != 0 {
        tv.addr() as u64
    } else {
        0
    };
    let fetch = |n: &Node, to: u64, result: &IoVec| {
        let op = AtomicOp {
            kind: AtomicKind::Fetch,
            iov: &[],
            desc: &[],
            compare: &[],
            compare_desc: &[],
            result: std::slice::from_ref(result),
            result_desc: &[],
            addr: to,
            rma_ioc: &[fabric::abi::types::fi_rma_ioc {
                addr: base,
                count: WORDS,
                key: mr.key(),
            }],
            datatype: FI_UINT64,
            op: FI_ATOMIC_READ,
            context: 1,
            data: 0,
            flags: 0,
            call: Call::Plain,
        };
        n.ep.atomic(&op)
    };
    // a fetches BUFS times; b answers each in one of its buffers; a never reads the answers.
    let a_to_b = a.insert_hex(&b.name_hex());
    for i in 0..BUFS {
        let (_, rv) = buf(WORDS * 8);
        fetch(&a, a_to_b, &rv).unwrap_or_else(|e| panic!("fetch {i}: {e:?}"));
    }
    for _ in 0..10 {
        b.cq.progress();
    }
    a.ep.close().unwrap();
    drop(a);
    // b finds a gone at a liveness check (due after 100 ms, on a 64th pass).
    std::thread::sleep(Duration::from_millis(150));
    for _ in 0..256 {
        b.cq.progress();
    }
    let c_to_b = c.insert_hex(&b.name_hex());
    let (r, rv) = buf(WORDS * 8);
    c.retry(|| fetch(&c, c_to_b, &rv)).unwrap();
    let e = c
        .wait_driving(&b, 10)
        .unwrap_or_else(|e| panic!("fetch from the live initiator failed: err {}", e.err));
    assert_eq!(e.op_context, 1);
    for (i, w) in r.chunks(8).enumerate() {
        assert_eq!(u64::from_ne_bytes(w.try_into().unwrap()), i as u64 * 7);
    }
}
