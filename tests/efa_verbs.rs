//! The efa provider's RDM tests (`common/efa_cases.rs`) over the EFA hardware device
//! (`device::verbs`) on the emulated EFA NIC (`device::verbs::emul`, a test double installed
//! in place of rdma-core): discovery lists its domain `efa0-rdm` first, and every case runs
//! through the device's SRD QP, registered pools, address handles and extended CQ. Local
//! peers stay on the device (FI_EFA_ENABLE_SHM_TRANSFER=0): every emulated QP is on this
//! host.

#![allow(unsafe_code)]

mod common;

const SHM_TRANSFER: &str = "0";
const RDM_DOMAIN: &str = "efa0-rdm";
/// The hardware device has no wait fd yet (a completion channel comes with a later slice).
const DEVICE_WAIT_FD: bool = false;
fn device_setup() {
    fabric::prov::efa::device::verbs::emul::install();
}
include!("common/efa_cases.rs");

/// Discovery: the emulated device's domains come first, with its attributes (efa-reference
/// §10), then the software SRD devices.
#[test]
fn the_emulated_device_is_listed_first_with_its_attributes() {
    init();
    let list =
        fabric::core::provider::InfoProvider::getinfo(&EFA, fi_version(2, 0), None, None, 0, None)
            .unwrap();
    let names: Vec<&str> = list
        .iter()
        .map(|i| i.domain_attr.name.as_deref().unwrap())
        .collect();
    assert_eq!(&names[..2], ["efa0-rdm", "efa0-dgrm"], "{names:?}");
    assert!(
        names[2..].iter().all(|n| n.starts_with("srd_")),
        "{names:?}"
    );
    let (rdm, dgrm) = (&list[0], &list[1]);
    // FI_EFA_MTU_SIZE=8192 (init) lowers the port's 8928.
    let nic = rdm.nic.as_ref().unwrap();
    let link = nic.link.as_ref().unwrap();
    assert_eq!(link.mtu, 8192);
    assert_eq!(link.speed, 100_000_000_000);
    assert_eq!(link.state, FI_LINK_UP);
    let dev = nic.device.as_ref().unwrap();
    assert_eq!(dev.name.as_deref(), Some("efa0"));
    assert_eq!(dev.device_id.as_deref(), Some("0xefa1"));
    // The PCI function comes from /sys/class/infiniband/efa0/device, which the emulated NIC
    // has not: unknown, not made up.
    assert_eq!(nic.bus.as_ref().unwrap().bus_type, FI_BUS_UNSPEC);
    assert_eq!(rdm.tx_attr.inject_size, 4096);
    assert_eq!(dgrm.tx_attr.inject_size, 32, "the device's inline size");
    assert_eq!(dgrm.ep_attr.max_msg_size, 8192);
    let src =
        fabric::prov::efa::device::EfaAddr::from_bytes(rdm.src_addr.as_deref().unwrap()).unwrap();
    assert_eq!(src.gid, fabric::prov::efa::device::verbs::emul::GID);
}

/// FI_OPT_EFA_RNR_RETRY is a QP attribute: set before fi_enable (the device applies it when
/// the QP goes to RTS), refused after. FI_OPT_EFA_USE_DEVICE_RDMA = true is accepted: the
/// emulated device offers RDMA read in its efadv caps (the software device refuses it).
#[test]
fn queue_pair_options_follow_the_device() {
    let a = lo_node(CAPS, |ep| {
        ep.setopt(FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &0usize.to_ne_bytes())
            .unwrap();
        ep.setopt(FI_OPT_ENDPOINT, FI_OPT_EFA_USE_DEVICE_RDMA, &[1])
            .unwrap();
    });
    let mut out = [0u8; 8];
    let mut need = 0;
    a.ep.getopt(FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &mut out, &mut need)
        .unwrap();
    assert_eq!(u64::from_ne_bytes(out), 0);
    assert_eq!(
        a.ep.setopt(FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &3usize.to_ne_bytes()),
        Err(Errno::OPBADSTATE)
    );
    // Messages still flow with no RNR retries (the receiver has buffers posted).
    let b = lo_node(CAPS, |_| ());
    let ab = a.insert_hex(&b.name_hex());
    b.insert_hex(&a.name_hex());
    exchange(&a, &b, ab, 3000, false, true, 3);
}

// ---- device RDMA (the emulated NIC performs it: a test double) ----

fn rdm(n: &Node) -> &RdmEndpoint {
    n.ep.as_any()
        .and_then(|e| e.downcast_ref::<RdmEndpoint>())
        .expect("an RDM endpoint")
}

fn getbool(n: &Node, opt: i32) -> bool {
    let mut v = [0u8; 1];
    let mut need = 0;
    n.ep.getopt(FI_OPT_ENDPOINT, opt, &mut v, &mut need)
        .unwrap();
    v[0] != 0
}

/// Completes a first write (its handshake needs the target to progress) so that later
/// operations need nothing from the target.
fn handshaken(a: &Node, b: &Node, ab: u64) {
    let (t, tv) = buf(8);
    let mr = b.reg(tv, FI_REMOTE_WRITE, 0);
    let (_s, sv) = buf(8);
    let rma = [fi_rma_iov {
        addr: t.as_ptr() as u64,
        len: 8,
        key: mr.key(),
    }];
    a.ep.write(&rma_op(&[sv], ab, &rma, 1)).unwrap();
    wait_ok(a, b);
}

/// fi_write and fi_read of registered memory to a peer whose device does RDMA are device work
/// requests: the target never polls (true one-sided operations), the initiator's device
/// counts one work request per operation, and the bytes are right, up to 4 MiB.
#[test]
fn registered_reads_and_writes_go_through_device_rdma() {
    let (a, b, ab, _) = pair();
    handshaken(&a, &b, ab);
    assert!(!getbool(&a, FI_OPT_EFA_EMULATED_READ));
    assert!(!getbool(&a, FI_OPT_EFA_EMULATED_WRITE));
    assert!(getbool(&a, FI_OPT_EFA_EMULATED_ATOMICS));
    assert!(getbool(&a, FI_OPT_EFA_USE_DEVICE_RDMA));
    let b_heard = rdm(&b).device_stats().delivered;
    for (i, &len) in [1usize, 5000, 100_000, 1 << 20, 4 << 20].iter().enumerate() {
        let (target, tv) = buf(len);
        let tmr = b.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
        let (src, sv) = buf(len);
        src.copy_from_slice(&pattern(len, i as u8));
        let _smr = a.reg(sv, FI_WRITE, 0);
        let (back, bv) = buf(len);
        let _bmr = a.reg(bv, FI_READ, 0);
        let rma = [fi_rma_iov {
            addr: target.as_ptr() as u64,
            len,
            key: tmr.key(),
        }];
        let s0 = rdm(&a).device_stats();
        a.ep.write(&rma_op(&[sv], ab, &rma, 10 + i)).unwrap();
        let w = a
            .wait(10)
            .expect("write completes without the target polling");
        assert_eq!(
            (w.op_context, w.flags & FI_WRITE, w.len),
            (10 + i, FI_WRITE, len)
        );
        assert!(target == &pattern(len, i as u8)[..], "write of {len}");
        target.copy_from_slice(&pattern(len, 100 + i as u8));
        a.ep.read(&rma_op(&[bv], ab, &rma, 20 + i)).unwrap();
        let r = a
            .wait(10)
            .expect("read completes without the target polling");
        assert_eq!((r.op_context, r.flags & FI_READ), (20 + i, FI_READ));
        assert!(back == &pattern(len, 100 + i as u8)[..], "read of {len}");
        let s1 = rdm(&a).device_stats();
        assert_eq!(
            (
                s1.rdma_writes - s0.rdma_writes,
                s1.rdma_reads - s0.rdma_reads
            ),
            (1, 1)
        );
        // No packet of the protocol went out for them.
        assert_eq!(s1.data_sent, s0.data_sent, "RMA of {len} sent datagrams");
    }
    assert_eq!(rdm(&b).device_stats().delivered, b_heard);
}

/// A source in two registered pieces is two work requests into one target range.
#[test]
fn a_write_from_two_registrations_is_two_work_requests() {
    let (a, b, ab, _) = pair();
    handshaken(&a, &b, ab);
    let (target, tv) = buf(30_000);
    let tmr = b.reg(tv, FI_REMOTE_WRITE, 0);
    let (s1, v1) = buf(10_000);
    let (s2, v2) = buf(20_000);
    let want = pattern(30_000, 9);
    s1.copy_from_slice(&want[..10_000]);
    s2.copy_from_slice(&want[10_000..]);
    let (_m1, _m2) = (a.reg(v1, FI_WRITE, 0), a.reg(v2, FI_WRITE, 0));
    let rma = [fi_rma_iov {
        addr: target.as_ptr() as u64,
        len: 30_000,
        key: tmr.key(),
    }];
    let s0 = rdm(&a).device_stats().rdma_writes;
    a.ep.write(&rma_op(&[v1, v2], ab, &rma, 3)).unwrap();
    assert_eq!(a.wait(10).unwrap().op_context, 3);
    assert_eq!(rdm(&a).device_stats().rdma_writes - s0, 2);
    assert!(target == &want[..]);
}

/// fi_writedata of registered memory is an RDMA write with immediate: it completes at the
/// target with its data, length, flags and source, through one of the target's receives.
#[test]
fn writedata_through_device_rdma_completes_at_the_target() {
    let (a, b, ab, ba) = pair();
    handshaken(&a, &b, ab);
    let (target, tv) = buf(3000);
    let mr = b.reg(tv, FI_REMOTE_WRITE, 0);
    let (src, sv) = buf(3000);
    src.copy_from_slice(&pattern(3000, 4));
    let _smr = a.reg(sv, FI_WRITE, 0);
    let rma = [fi_rma_iov {
        addr: target.as_ptr() as u64,
        len: 3000,
        key: mr.key(),
    }];
    let iov = [sv];
    let mut op = rma_op(&iov, ab, &rma, 5);
    op.data = 0xfeed_beef;
    op.flags = FI_REMOTE_CQ_DATA;
    let (s0, r0) = (
        rdm(&a).device_stats().rdma_writes,
        rdm(&b).device_stats().rdma_writes_received,
    );
    a.ep.write(&op).unwrap();
    let t = wait_ok(&b, &a);
    assert_eq!(t.data, 0xfeed_beef);
    assert_eq!(
        t.flags,
        FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA,
        "flags {:#x}",
        t.flags
    );
    assert_eq!(t.len, 3000);
    assert_eq!(t.src_addr, ba, "FI_SOURCE names the writer");
    assert_eq!(wait_ok(&a, &b).op_context, 5);
    assert!(target == &pattern(3000, 4)[..]);
    assert_eq!(rdm(&a).device_stats().rdma_writes - s0, 1);
    assert_eq!(rdm(&b).device_stats().rdma_writes_received - r0, 1);
}

/// What the target's NIC refuses (wrong key, out of bounds, access the registration lacks)
/// completes with an error at the initiator — FI_EINVAL with EFA's status 7 as prov_errno,
/// which fi_cq_strerror names — and changes nothing; the endpoint keeps working.
#[test]
fn device_rdma_refusals_are_error_completions() {
    let (a, b, ab, _) = pair();
    handshaken(&a, &b, ab);
    let (target, tv) = buf(4096);
    let ro = b.reg(tv, FI_REMOTE_READ, 0);
    let (wo_t, wov) = buf(64);
    let wo = b.reg(wov, FI_REMOTE_WRITE, 0);
    let (src, sv) = buf(4096);
    src.fill(0x5a);
    let _smr = a.reg(sv, FI_WRITE | FI_READ, 0);
    let base = target.as_ptr() as u64;
    let bad = |addr: u64, len: usize, key: u64| [fi_rma_iov { addr, len, key }];
    let cases: [(bool, [fi_rma_iov; 1]); 5] = [
        (false, bad(base, 4096, ro.key() ^ 0x55)),
        (false, bad(base, 4096, ro.key())),
        (true, bad(base + 1, 4096, ro.key())),
        (true, bad(wo_t.as_ptr() as u64, 64, wo.key())),
        (true, bad(base, 64, u64::from(u32::MAX) ^ ro.key())),
    ];
    let s0 = rdm(&a).device_stats();
    for (i, (read, rma)) in cases.iter().enumerate() {
        let local = sv.sub(0, rma[0].len).unwrap();
        let op = rma_op(std::slice::from_ref(&local), ab, rma, 100 + i);
        if *read {
            a.ep.read(&op).unwrap();
        } else {
            a.ep.write(&op).unwrap();
        }
        let e = a
            .wait(10)
            .expect_err("a refused RDMA completes with an error");
        assert_eq!(e.op_context, 100 + i);
        assert_eq!((e.err, e.prov_errno), (FI_EINVAL, 7), "case {i}");
        assert!(fabric::prov::efa::prov_strerror(e.prov_errno).is_some());
    }
    let s1 = rdm(&a).device_stats();
    assert_eq!(
        s1.rdma_reads + s1.rdma_writes,
        s0.rdma_reads + s0.rdma_writes
    );
    assert!(target.iter().all(|&x| x == 0));
    assert!(src.iter().all(|&x| x == 0x5a));
    // Still working.
    let ok = [fi_rma_iov {
        addr: base,
        len: 16,
        key: ro.key(),
    }];
    a.ep.read(&rma_op(&[sv.sub(0, 16).unwrap()], ab, &ok, 9))
        .unwrap();
    assert_eq!(a.wait(10).unwrap().op_context, 9);
    assert!(src[..16].iter().all(|&x| x == 0));
}

/// Local memory not registered with the device (no descriptor, no registration covering it)
/// is emulated with packets, as with a peer or device without RDMA; so is everything when the
/// application turns device RDMA off before fi_enable.
#[test]
fn unregistered_memory_and_rdma_off_are_emulated() {
    let (a, b, ab, _) = pair();
    handshaken(&a, &b, ab);
    let (target, tv) = buf(20_000);
    let tmr = b.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    let rma = [fi_rma_iov {
        addr: target.as_ptr() as u64,
        len: 20_000,
        key: tmr.key(),
    }];
    let (src, sv) = buf(20_000);
    src.copy_from_slice(&pattern(20_000, 1));
    let s0 = rdm(&a).device_stats();
    a.ep.write(&rma_op(&[sv], ab, &rma, 1)).unwrap();
    wait_ok(&a, &b);
    assert!(target == &pattern(20_000, 1)[..]);
    let s1 = rdm(&a).device_stats();
    assert_eq!(s1.rdma_writes, s0.rdma_writes);
    assert!(s1.data_sent > s0.data_sent);

    let c = lo_node(CAPS, |ep| {
        ep.setopt(FI_OPT_ENDPOINT, FI_OPT_EFA_USE_DEVICE_RDMA, &[0])
            .unwrap();
    });
    assert!(getbool(&c, FI_OPT_EFA_EMULATED_READ) && getbool(&c, FI_OPT_EFA_EMULATED_WRITE));
    assert!(!getbool(&c, FI_OPT_EFA_USE_DEVICE_RDMA));
    assert_eq!(
        c.ep.setopt(FI_OPT_ENDPOINT, FI_OPT_EFA_USE_DEVICE_RDMA, &[1]),
        Err(Errno::OPBADSTATE)
    );
    let cb = c.insert_hex(&b.name_hex());
    b.insert_hex(&c.name_hex());
    let (src2, sv2) = buf(20_000);
    src2.copy_from_slice(&pattern(20_000, 2));
    let _m = c.reg(sv2, FI_WRITE, 0);
    c.ep.write(&rma_op(&[sv2], cb, &rma, 2)).unwrap();
    wait_ok(&c, &b);
    assert!(target == &pattern(20_000, 2)[..]);
    assert_eq!(rdm(&c).device_stats().rdma_writes, 0);
}

/// A region of a verbs domain is registered with the NIC: its key is the rkey (32 bits),
/// and fi_efa_ops_domain::query_mr's interconnect ids come from its registration.
#[test]
fn registrations_are_the_nics() {
    let (a, _b, _, _) = pair();
    let (_m, v) = buf(4096);
    let mr = a.reg(v, FI_REMOTE_READ, 0);
    assert!(mr.key() <= u64::from(u32::MAX));
    let dev = mr.device().expect("registered with the device");
    assert_eq!(dev.ic_ids()[0], 0b111, "every interconnect id valid");
}

// ---- long-read messages (device RDMA read by the receiver) ----

/// Next completion of `n` and of `m`, driving both (in either order of arrival).
fn both_done(n: &Node, m: &Node) -> (CqEntry, CqEntry) {
    let first = wait_ok(n, m);
    let second = wait_ok(m, n);
    (first, second)
}

/// Messages of registered memory from FI_EFA_INTER_MIN_READ_MESSAGE_SIZE (1 MiB) on go by
/// long read: one LONGREAD request, the receiver's device reads the sender's memory (into a
/// registered receive buffer directly, else through a staging buffer), EOR completes the
/// send; tagged and untagged, expected and unexpected, from one or two registered pieces,
/// delivery complete too. Below the threshold messages stay long-CTS.
#[test]
fn long_messages_of_registered_memory_go_by_long_read() {
    let (a, b, ab, _) = pair();
    handshaken(&a, &b, ab);
    let cases: [(usize, bool, bool, bool, u64); 6] = [
        // (length, tagged, receive registered, receive posted first, flags)
        (1 << 20, false, true, true, 0),
        (3 << 20, true, false, true, 0),
        ((2 << 20) + 7, false, false, false, 0),
        (1 << 20, true, true, false, FI_DELIVERY_COMPLETE),
        (5 << 20, false, true, true, 0),
        (700_000, false, true, true, 0),
    ];
    for (i, &(len, tagged, reg_recv, early, flags)) in cases.iter().enumerate() {
        let want = pattern(len, 40 + i as u8);
        // Two pieces for the odd length, one otherwise.
        let (iov, _mrs) = a.registered_source(&want, len % 2 == 1);
        let (dst, dv) = buf(len);
        let _rm = reg_recv.then(|| b.reg(dv, FI_RECV, 0));
        let tag = tagged.then_some(0x77);
        let post_recv = || b.recv_any(dv, tag, 500 + i);
        let (sa, sb) = (rdm(&a).device_stats(), rdm(&b).device_stats());
        if early {
            post_recv();
        }
        let call = if flags == 0 { Call::Plain } else { Call::Msg };
        a.send(&iov, ab, tag, 400 + i, flags, call).unwrap();
        if !early {
            // The request arrives, waits unexpected, and is read once the receive is posted.
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(50) {
                b.cq.progress();
                a.cq.progress();
            }
            post_recv();
        }
        let (s, r) = both_done(&a, &b);
        assert_eq!((s.op_context, r.op_context), (400 + i, 500 + i), "case {i}");
        assert_eq!(r.len, len);
        assert!(dst == &want[..], "case {i}: bytes");
        let (da, db) = (rdm(&a).device_stats(), rdm(&b).device_stats());
        let reads = db.rdma_reads - sb.rdma_reads;
        if len >= 1 << 20 {
            assert_eq!(reads, iov.len() as u64, "case {i}: one read per piece");
            assert_eq!(
                da.data_sent - sa.data_sent,
                1,
                "case {i}: the request alone"
            );
        } else {
            assert_eq!(reads, 0, "case {i}: below the threshold");
        }
        assert_eq!(da.rdma_reads, sa.rdma_reads);
    }
}

/// A long read the sender's NIC refuses (its registration went away before the receiver
/// read) fails at the receiver — FI_EINVAL, EFA status 7 — and at the sender, told by an ERR
/// packet: nobody waits for ever.
#[test]
fn a_refused_long_read_fails_both_sides() {
    let (a, b, ab, _) = pair();
    handshaken(&a, &b, ab);
    let len = 1 << 20;
    let (_s, sv) = buf(len);
    let m = a.reg(sv, FI_SEND, 0);
    a.send(&[sv], ab, None, 1, 0, Call::Plain).unwrap();
    m.deregister();
    drop(m);
    let (_d, dv) = buf(len);
    b.recv(&[dv], FI_ADDR_UNSPEC, None, 2, 0, Call::Plain)
        .unwrap();
    let e = wait(&b, &a).expect_err("the receive fails");
    assert_eq!((e.op_context, e.err, e.prov_errno), (2, FI_EINVAL, 7));
    let e = wait(&a, &b).expect_err("the send fails");
    assert_eq!(e.op_context, 1);
    // Both still work.
    exchange(&a, &b, ab, 3000, false, true, 5);
}

/// A receiver whose NIC refuses to register memory (the emulated NIC told so, as at a NIC's
/// registration limit) cannot read a long-read message into a receive buffer the device does
/// not know: it answers READ_NACK, and the sender goes on by long-CTS (a LONGCTS request
/// flagged READ_NACK with the same msg_id, then CTSDATA), efa-reference §3. Both sides
/// complete without error and the bytes are right: tagged and not, expected and unexpected,
/// delivery complete, two source pieces; the receiver's device read nothing. A message sent
/// right after each still matches the receive posted after its own, and once registrations are accepted again long reads resume.
#[test]
fn a_receiver_that_cannot_register_gets_long_reads_by_long_cts() {
    use fabric::prov::efa::device::verbs::emul;
    let (a, b, ab, _) = pair();
    handshaken(&a, &b, ab);
    let cases: [(usize, bool, bool, u64); 4] = [
        // (length, tagged, receive posted first, flags)
        ((1 << 20) + 3, false, true, 0),
        (3 << 20, true, false, 0),
        (2 << 20, false, true, FI_DELIVERY_COMPLETE),
        ((1 << 20) + 1, true, true, 0),
    ];
    for (i, &(len, tagged, early, flags)) in cases.iter().enumerate() {
        let want = pattern(len, 70 + i as u8);
        let (iov, _mrs) = a.registered_source(&want, len % 2 == 1);
        // From here on b's NIC registers nothing (the sender's memory is registered above).
        emul::refuse_registrations(true);
        let (dst, dv) = buf(len);
        let tag = tagged.then_some(0x99);
        let post_recv = || b.recv_any(dv, tag, 600 + i);
        let (na, nb) = (rdm(&a).read_nacks(), rdm(&b).read_nacks());
        let reads = rdm(&b).device_stats().rdma_reads;
        if early {
            post_recv();
        }
        let call = if flags == 0 { Call::Plain } else { Call::Msg };
        a.send(&iov, ab, tag, 800 + i, flags, call).unwrap();
        // A small message right behind it must not overtake it.
        let (small, smv) = buf(64);
        small.fill(9);
        a.send(&[smv], ab, tag, 900 + i, 0, Call::Plain).unwrap();
        if !early {
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(50) {
                b.cq.progress();
                a.cq.progress();
            }
            post_recv();
        }
        let (_after, av) = buf(64);
        b.recv(
            &[av],
            FI_ADDR_UNSPEC,
            tag.map(|t| (t, 0)),
            700 + i,
            0,
            Call::Plain,
        )
        .unwrap();
        let mut sends = [wait_ok(&a, &b).op_context, wait_ok(&a, &b).op_context];
        let mut recvs: Vec<(usize, usize)> = (0..2)
            .map(|_| wait_ok(&b, &a))
            .map(|e| (e.op_context, e.len))
            .collect();
        // Completions come as messages end; the matching kept the order.
        recvs.sort_unstable();
        sends.sort_unstable();
        assert_eq!(sends, [800 + i, 900 + i], "case {i}");
        assert_eq!(
            recvs,
            [(600 + i, len), (700 + i, 64)],
            "case {i}: matched in order"
        );
        assert!(dst == &want[..], "case {i}: bytes");
        assert_eq!(
            rdm(&b).read_nacks().0 - nb.0,
            1,
            "case {i}: one READ_NACK sent"
        );
        assert_eq!(rdm(&a).read_nacks().1 - na.1, 1, "case {i}: acted on");
        assert_eq!(
            rdm(&b).device_stats().rdma_reads,
            reads,
            "case {i}: no read"
        );
        emul::refuse_registrations(false);
    }
    // Registrations accepted again: the next long message is read.
    let want = pattern(1 << 20, 5);
    let (iov, _mrs) = a.registered_source(&want, false);
    let (dst, dv) = buf(1 << 20);
    let reads = rdm(&b).device_stats().rdma_reads;
    b.recv(&[dv], FI_ADDR_UNSPEC, None, 1, 0, Call::Plain)
        .unwrap();
    a.send(&iov, ab, None, 2, 0, Call::Plain).unwrap();
    both_done(&a, &b);
    assert!(dst == &want[..]);
    assert_eq!(rdm(&b).device_stats().rdma_reads, reads + 1);
}

/// Against a device with RDMA read but not write (an earlier EFA generation, modelled by
/// limiting an endpoint's use of the emulated NIC), writes of at least 64 KiB
/// (FI_EFA_INTER_MIN_READ_WRITE_SIZE) of registered memory go by LONGREAD_RTW both ways: the
/// target's device reads the initiator's memory, then EOR; remote CQ data completes at the
/// target. Smaller writes are emulated; reads stay device reads.
#[test]
fn without_device_write_long_writes_go_by_long_read() {
    let (a, b, ab, _) = pair();
    let c = Node::open_configured(&EFA, &rdm_hints(), on_rdm_domain, |ep| {
        ep.as_any()
            .and_then(|e| e.downcast_ref::<RdmEndpoint>())
            .unwrap()
            .limit_device_rdma(true, false);
    });
    assert!(getbool(&c, FI_OPT_EFA_EMULATED_WRITE));
    assert!(!getbool(&c, FI_OPT_EFA_EMULATED_READ));
    let cb = c.insert_hex(&b.name_hex());
    let bc = b.insert_hex(&c.name_hex());
    handshaken(&c, &b, cb);
    handshaken(&b, &c, bc);
    drop((a, ab));
    // c → b and b → c, 100,000 bytes with data, then 1,000 bytes.
    for (i, (from, to, dest)) in [(&c, &b, cb), (&b, &c, bc)].into_iter().enumerate() {
        for (j, &len) in [100_000usize, 1000].iter().enumerate() {
            let (t, tv) = buf(len);
            let tmr = to.reg(tv, FI_REMOTE_WRITE, 0);
            let (s, sv) = buf(len);
            s.copy_from_slice(&pattern(len, (10 * i + j) as u8));
            let _smr = from.reg(sv, FI_WRITE, 0);
            let rma = [fi_rma_iov {
                addr: t.as_ptr() as u64,
                len,
                key: tmr.key(),
            }];
            let (f0, t0) = (rdm(from).device_stats(), rdm(to).device_stats());
            from.rma(&[sv], dest, &rma, false, Some(0x1234), 7).unwrap();
            let at_target = wait_ok(to, from);
            assert_eq!((at_target.data, at_target.len), (0x1234, len));
            assert_eq!(wait_ok(from, to).op_context, 7);
            assert!(t == &pattern(len, (10 * i + j) as u8)[..], "{i}/{j}");
            let (f1, t1) = (rdm(from).device_stats(), rdm(to).device_stats());
            assert_eq!(f1.rdma_writes, f0.rdma_writes, "no device write");
            let reads = t1.rdma_reads - t0.rdma_reads;
            assert_eq!(reads, u64::from(len >= 65536), "{i}/{j}: the target reads");
        }
    }
    // c still reads with its device.
    let (t, tv) = buf(4096);
    t.fill(3);
    let tmr = b.reg(tv, FI_REMOTE_READ, 0);
    let (back, bv) = buf(4096);
    let _m = c.reg(bv, FI_READ, 0);
    let r0 = rdm(&c).device_stats().rdma_reads;
    let rma = [fi_rma_iov {
        addr: t.as_ptr() as u64,
        len: 4096,
        key: tmr.key(),
    }];
    c.rma(&[bv], cb, &rma, true, None, 9).unwrap();
    assert_eq!(c.wait(10).unwrap().op_context, 9);
    assert!(back.iter().all(|&x| x == 3));
    assert_eq!(rdm(&c).device_stats().rdma_reads - r0, 1);
}

/// A domain whose keys are the application's and whose addresses are offsets (no
/// FI_MR_PROV_KEY / FI_MR_VIRT_ADDR) cannot be addressed with device RDMA: its endpoints do
/// not advertise it, so RMA to them is emulated and lands right.
#[test]
fn offset_addressed_targets_are_served_by_emulation() {
    let (a, _b, _, _) = pair();
    let c = lo_node(CAPS, |_| ());
    let ac = a.insert_hex(&c.name_hex());
    c.insert_hex(&a.name_hex());
    let (target, tv) = buf(10_000);
    let mr = c.reg(tv, FI_REMOTE_READ | FI_REMOTE_WRITE, 0x77);
    assert_eq!(mr.key(), 0x77);
    let (src, sv) = buf(6000);
    src.copy_from_slice(&pattern(6000, 8));
    let _m = a.reg(sv, FI_WRITE, 0);
    let rma = [fi_rma_iov {
        addr: 1000,
        len: 6000,
        key: 0x77,
    }];
    let w0 = rdm(&a).device_stats().rdma_writes;
    a.ep.write(&rma_op(&[sv], ac, &rma, 4)).unwrap();
    assert_eq!(wait_ok(&a, &c).op_context, 4);
    assert!(target[1000..7000] == pattern(6000, 8)[..]);
    assert_eq!(rdm(&a).device_stats().rdma_writes, w0);
}

/// fi_efa_ops_domain::query_mr through the C ops tables, as an application calls it: a region
/// registered on the hardware domain answers with its registration's interconnect ids (the
/// emulated NIC's efadv_query_mr: all three valid), its key is the NIC's rkey, and it closes.
#[test]
fn query_mr_through_the_c_ops_answers_from_the_registration() {
    use core::ptr::null_mut;
    use fabric::abi::ops::fi_efa_ops_domain;
    use fabric::abi::types::{fi_efa_mr_attr, fid_domain, fid_mr};
    use fabric::util::Provider;
    init();
    let info = fabric::core::provider::InfoProvider::getinfo(
        &EFA,
        fi_version(2, 6),
        None,
        None,
        0,
        Some(&rdm_hints()),
    )
    .unwrap()
    .into_iter()
    .find(on_rdm_domain)
    .unwrap();
    let fab = EFA.fabric(&info.fabric_attr).unwrap();
    let (mem, _) = buf(4096);
    // SAFETY: test: every pointer comes from the library and is used as fi_*(3) describes;
    // `mem` is leaked, valid for the process.
    unsafe {
        let f = fabric::ffi::domain::fabric_to_c(fab, fi_version(2, 6), null_mut());
        let ci = fabric::ffi::info::info_to_c(&info);
        let mut d: *mut fid_domain = null_mut();
        assert_eq!(((*(*f).ops).domain.unwrap())(f, ci, &mut d, null_mut()), 0);
        let mut mr: *mut fid_mr = null_mut();
        let reg = (*(*d).mr).reg.unwrap();
        let rc = reg(
            &mut (*d).fid,
            mem.as_ptr().cast(),
            mem.len(),
            FI_REMOTE_READ | FI_REMOTE_WRITE,
            0,
            0,
            0,
            &mut mr,
            null_mut(),
        );
        assert_eq!(rc, 0);
        assert!((*mr).key <= u64::from(u32::MAX), "the key is an rkey");
        let mut ops: *mut core::ffi::c_void = null_mut();
        let name = std::ffi::CString::new(FI_EFA_DOMAIN_OPS).unwrap();
        let open = (*(*d).fid.ops).ops_open.unwrap();
        assert_eq!(
            open(&mut (*d).fid, name.as_ptr(), 0, &mut ops, null_mut()),
            0
        );
        let q = (*(ops as *const fi_efa_ops_domain)).query_mr.unwrap();
        let mut attr = fi_efa_mr_attr {
            ic_id_validity: 0,
            recv_ic_id: 9,
            rdma_read_ic_id: 9,
            rdma_recv_ic_id: 9,
        };
        assert_eq!(q(mr, &mut attr), 0);
        assert_eq!(
            (
                attr.ic_id_validity,
                attr.recv_ic_id,
                attr.rdma_read_ic_id,
                attr.rdma_recv_ic_id
            ),
            (0b111, 0, 0, 0)
        );
        assert_eq!(((*(*mr).fid.ops).close.unwrap())(&mut (*mr).fid), 0);
        assert_eq!(((*(*d).fid.ops).close.unwrap())(&mut (*d).fid), 0);
        assert_eq!(((*(*f).fid.ops).close.unwrap())(&mut (*f).fid), 0);
        fabric::ffi::info::free_info(ci);
    }
}
