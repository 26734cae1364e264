//! The hardware device over the emulated NIC (`emul`, a test double): discovery, the data
//! path both ways, RNR, a peer that is gone, and address handles shared and released.

use super::*;
use crate::abi::consts::{FI_REMOTE_READ, FI_REMOTE_WRITE};

fn emulated() -> HwDeviceInfo {
    let v = emul::verbs();
    let mut n = 0;
    // SAFETY: the emulator's list, freed below.
    let list = unsafe { (v.get_device_list)(&mut n) };
    assert_eq!(n, 1);
    // SAFETY: one entry.
    let d = probe(v, unsafe { *list }, Some(8192)).expect("efadv_query_device succeeds");
    // SAFETY: the list just used.
    unsafe { (v.free_device_list)(list) };
    d
}

fn pump(
    devs: &mut [&mut VerbsDevice],
    out: &mut Vec<Completion>,
    until: impl Fn(&[Completion]) -> bool,
) {
    let t = std::time::Instant::now();
    while !until(out) {
        for d in devs.iter_mut() {
            d.poll(out, 64);
        }
        assert!(t.elapsed().as_secs() < 10, "timed out: {out:?}");
    }
}

#[test]
fn discovery_reads_the_device_attributes() {
    let d = emulated();
    assert_eq!(d.name, "efa0");
    assert_eq!(d.mtu, 8192);
    assert_eq!(d.gid, emul::GID);
    assert!(d.caps.rdma_read && d.caps.rdma_write);
    assert!(d.unsolicited_write_recv, "efadv caps bit 4");
    assert_eq!(d.inline_size, 32);
    assert_eq!(d.speed_bps, 100_000_000_000);
    assert!(d.up);
    assert_eq!(port_speed(1, 1), 2_500_000_000);
}

/// The packet pools ask for huge pages by default (FI_EFA_USE_HUGE_PAGE); where the system
/// has none reserved (this host, most hosts by default) they are normal pages, and datagrams
/// flow through them all the same (every test here runs over them).
#[test]
fn packet_pools_fall_back_to_normal_pages_without_huge_pages() {
    let hw = HwContext::open(&emulated()).unwrap();
    let a = VerbsDevice::open(&hw, 3).unwrap();
    let free = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if free == 0 {
        assert_eq!(a.huge_pages(), (false, false), "normal pages");
    }
    // The pools are whole pages, registered as one region each.
    assert!(a.tx.mem.len() >= a.tx.held.len() * a.tx.slot);
    assert!(a.rx.mem.len() >= a.rx.held.len() * a.rx.slot);
}

#[test]
fn datagrams_cross_and_report_their_source() {
    let hw = HwContext::open(&emulated()).unwrap();
    let mut a = VerbsDevice::open(&hw, 3).unwrap();
    let mut b = VerbsDevice::open(&hw, 3).unwrap();
    assert_ne!(a.addr().qpn, b.addr().qpn);
    assert_ne!(a.addr().qkey, 0);
    for i in 0..8 {
        b.post_recv(Vec::new(), 100 + i).unwrap();
    }
    let mut buf = vec![0u8; HEADROOM + 5000];
    for (k, x) in buf[HEADROOM..].iter_mut().enumerate() {
        *x = k as u8;
    }
    a.post_send(b.addr(), buf, 5000, IoVec::EMPTY, 7).unwrap();
    let mut out = Vec::new();
    pump(&mut [&mut a, &mut b], &mut out, |o| o.len() >= 2);
    let mut saw = 0;
    for c in out.drain(..) {
        match c {
            Completion::Send { wr_id, status, .. } => {
                assert_eq!((wr_id, status), (7, Ok(())));
                saw |= 1;
            }
            c @ (Completion::Rdma { .. }
            | Completion::WriteData { .. }
            | Completion::Placed { .. }) => {
                panic!("no RDMA nor placement here: {c:?}")
            }
            Completion::Recv {
                wr_id,
                buf,
                off,
                len,
                src,
            } => {
                assert!((100..108).contains(&wr_id));
                assert_eq!(len, 5000);
                assert!(
                    buf[off..off + len]
                        .iter()
                        .enumerate()
                        .all(|(k, &x)| x == k as u8)
                );
                // a's AH is in the shared PD (a sent to b's GID, which is its own): the
                // source comes from the AH number; the QKEY is unknown to b (it never sent
                // to a) and left 0 for the RDM layer to take from the packet.
                assert_eq!(
                    (src.gid, src.qpn, src.qkey),
                    (a.addr().gid, a.addr().qpn, 0)
                );
                saw |= 2;
            }
            Completion::Run { .. }
            | Completion::RecvInRun { .. }
            | Completion::RecvInPieces { .. } => {
                panic!("the verbs device hands up no runs")
            }
        }
    }
    assert_eq!(saw, 3);
    assert_eq!(a.stats().data_sent, 1);
    // b answers: now a's datagrams carry a's QKEY as b last sent to it.
    a.post_recv(Vec::new(), 1).unwrap();
    b.post_send(a.addr(), vec![0; HEADROOM + 10], 10, IoVec::EMPTY, 9)
        .unwrap();
    a.post_send(b.addr(), vec![0; HEADROOM + 10], 10, IoVec::EMPTY, 8)
        .unwrap();
    pump(&mut [&mut a, &mut b], &mut out, |o| o.len() >= 4);
    for c in &out {
        if let Completion::Recv { src, wr_id, .. } = c {
            if *wr_id == 1 {
                assert_eq!(*src, b.addr());
            } else {
                assert_eq!(*src, a.addr());
            }
        }
    }
}

#[test]
fn no_receive_is_rnr_and_a_gone_peer_is_unreachable() {
    let hw = HwContext::open(&emulated()).unwrap();
    let mut a = VerbsDevice::open(&hw, 3).unwrap();
    a.set_rnr_retry(1);
    let b = VerbsDevice::open(&hw, 3).unwrap();
    let dest = b.addr();
    a.post_send(dest, vec![0; HEADROOM + 10], 10, IoVec::EMPTY, 1)
        .unwrap();
    let mut out = Vec::new();
    pump(&mut [&mut a], &mut out, |o| !o.is_empty());
    assert!(matches!(
        out[0],
        Completion::Send {
            wr_id: 1,
            status: Err(DevError::Rnr),
            ..
        }
    ));
    assert_eq!(a.stats().rnr_received, 1);
    // The receiver checks the QKEY: a wrong one is never answered.
    out.clear();
    let wrong = EfaAddr {
        qkey: dest.qkey ^ 1,
        ..dest
    };
    a.post_send(wrong, vec![0; HEADROOM + 10], 10, IoVec::EMPTY, 4)
        .unwrap();
    pump(&mut [&mut a], &mut out, |o| !o.is_empty());
    assert!(matches!(
        out[0],
        Completion::Send {
            wr_id: 4,
            status: Err(DevError::Unreachable),
            ..
        }
    ));
    drop(b);
    out.clear();
    a.post_send(dest, vec![0; HEADROOM + 10], 10, IoVec::EMPTY, 2)
        .unwrap();
    pump(&mut [&mut a], &mut out, |o| !o.is_empty());
    assert!(matches!(
        out[0],
        Completion::Send {
            wr_id: 2,
            status: Err(DevError::Unreachable),
            ..
        }
    ));
    // Too large for the device.
    let big = vec![0; HEADROOM + 9000];
    assert_eq!(
        a.post_send(dest, big, 9000, IoVec::EMPTY, 3).unwrap_err().0,
        Errno::MSGSIZE
    );
}

#[test]
fn address_handles_are_shared_and_released() {
    let hw = HwContext::open(&emulated()).unwrap();
    let mut a = VerbsDevice::open(&hw, 3).unwrap();
    let mut b = VerbsDevice::open(&hw, 3).unwrap();
    let mut c = VerbsDevice::open(&hw, 7).unwrap();
    c.post_recv(Vec::new(), 0).unwrap();
    c.post_recv(Vec::new(), 0).unwrap();
    a.post_send(c.addr(), vec![0; HEADROOM + 1], 1, IoVec::EMPTY, 1)
        .unwrap();
    b.post_send(c.addr(), vec![0; HEADROOM + 1], 1, IoVec::EMPTY, 1)
        .unwrap();
    assert_eq!(hw.ahs().by_gid[&emul::GID].refs, 2);
    drop(a);
    assert_eq!(hw.ahs().by_gid[&emul::GID].refs, 1);
    drop(b);
    assert!(hw.ahs().by_gid.is_empty());
    let mut out = Vec::new();
    c.poll(&mut out, 8);
    assert_eq!(out.len(), 2);
}

/// Application memory for RDMA tests (leaked: registrations outlive the test's borrows).
fn app_mem(len: usize, fill: u8) -> IoVec {
    IoVec::from_mut_slice(Box::leak(vec![fill; len].into_boxed_slice()))
}

fn rdma(
    op: RdmaOp,
    dest: EfaAddr,
    local: IoVec,
    lkey: u32,
    raddr: u64,
    rkey: u32,
    wr_id: u64,
) -> RdmaReq {
    RdmaReq {
        op,
        dest,
        local,
        lkey,
        raddr,
        rkey,
        wr_id,
    }
}

/// The one RDMA completion `d` gives next.
fn rdma_status(d: &mut VerbsDevice, wr: u64) -> Result<(), DevError> {
    let mut out = Vec::new();
    pump(&mut [d], &mut out, |o| !o.is_empty());
    match out.remove(0) {
        Completion::Rdma { wr_id, status } if wr_id == wr => status,
        c => panic!("expected the RDMA completion of {wr}: {c:?}"),
    }
}

/// Two domains (a PD each, as two processes would have) on the emulated NIC: an RDMA write
/// and read move registered memory between them, counted by the device and the NIC.
#[test]
fn rdma_write_and_read_move_registered_memory() {
    let (ha, hb) = (
        HwContext::open(&emulated()).unwrap(),
        HwContext::open(&emulated()).unwrap(),
    );
    let mut a = VerbsDevice::open(&ha, 3).unwrap();
    let b = VerbsDevice::open(&hb, 3).unwrap();
    assert_eq!(a.max_rdma_size(), emul::MAX_RDMA as usize);
    let target = app_mem(100_000, 0);
    let tmr = hb.reg_mr(target, FI_REMOTE_READ | FI_REMOTE_WRITE).unwrap();
    let src = app_mem(100_000, 0);
    src.with_mut_slice(|s| s.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8));
    let smr = ha.reg_mr(src, 0).unwrap();
    assert_eq!(a.local_key(src), Some(smr.lkey));
    assert_eq!(a.local_key(src.sub(10, 50).unwrap()), Some(smr.lkey));
    assert_eq!(a.local_key(target), None, "another domain's registration");
    let before = emul::rdma_ops();
    // Write 60,000 bytes at offset 1,000 of the target.
    let piece = src.sub(0, 60_000).unwrap();
    let raddr = target.addr() as u64 + 1000;
    a.post_rdma(rdma(
        RdmaOp::Write,
        b.addr(),
        piece,
        smr.lkey,
        raddr,
        tmr.rkey,
        5,
    ))
    .unwrap();
    assert_eq!(rdma_status(&mut a, 5), Ok(()));
    target.with_slice(|t| {
        assert!(t[..1000].iter().all(|&x| x == 0));
        assert!(
            t[1000..61_000]
                .iter()
                .enumerate()
                .all(|(i, &x)| x == i as u8)
        );
        assert!(t[61_000..].iter().all(|&x| x == 0));
    });
    // Read it back into another registered buffer.
    let back = app_mem(60_000, 0xee);
    let bmr = ha.reg_mr(back, 0).unwrap();
    a.post_rdma(rdma(
        RdmaOp::Read,
        b.addr(),
        back,
        bmr.lkey,
        raddr,
        tmr.rkey,
        6,
    ))
    .unwrap();
    assert_eq!(rdma_status(&mut a, 6), Ok(()));
    back.with_slice(|t| assert!(t.iter().enumerate().all(|(i, &x)| x == i as u8)));
    assert_eq!((a.stats().rdma_writes, a.stats().rdma_reads), (1, 1));
    let after = emul::rdma_ops();
    assert!(after.0 > before.0 && after.1 > before.1);
    // Deregistered memory is no longer the device's.
    drop(bmr);
    assert_eq!(a.local_key(back), None);
}

/// What the target's NIC refuses fails at the initiator with "remote bad address" (EFA status
/// 7, FI_EINVAL), and a local buffer outside its registration with "invalid lkey" (5); the
/// target's memory is untouched and the QP keeps working.
#[test]
fn rdma_checks_key_bounds_and_access() {
    let (ha, hb) = (
        HwContext::open(&emulated()).unwrap(),
        HwContext::open(&emulated()).unwrap(),
    );
    let mut a = VerbsDevice::open(&ha, 3).unwrap();
    let b = VerbsDevice::open(&hb, 3).unwrap();
    let target = app_mem(4096, 0);
    let ro = hb.reg_mr(target, FI_REMOTE_READ).unwrap();
    let wo_mem = app_mem(4096, 0);
    let wo = hb.reg_mr(wo_mem, FI_REMOTE_WRITE).unwrap();
    let src = app_mem(4096, 0x77);
    let smr = ha.reg_mr(src, 0).unwrap();
    let base = target.addr() as u64;
    let cases = [
        (RdmaOp::Write, base, ro.rkey ^ 0x55, 4096), // wrong key
        (RdmaOp::Read, base + 1, ro.rkey, 4096),     // past the end
        (RdmaOp::Read, base - 8, ro.rkey, 16),       // before the start
        (RdmaOp::Write, base, ro.rkey, 4096),        // no remote write
        (RdmaOp::WriteData(1), base, ro.rkey, 64),   // no remote write, with data
        (RdmaOp::Read, wo_mem.addr() as u64, wo.rkey, 8), // no remote read
        (RdmaOp::Read, base, ro.lkey, 8),            // the lkey is not an rkey
    ];
    for (i, &(op, raddr, rkey, len)) in cases.iter().enumerate() {
        let local = src.sub(0, len).unwrap();
        a.post_rdma(rdma(op, b.addr(), local, smr.lkey, raddr, rkey, i as u64))
            .unwrap();
        let e = rdma_status(&mut a, i as u64).unwrap_err();
        assert_eq!(e, DevError::RemoteAccess, "case {i}");
        assert_eq!((e.errno(), e.prov_errno()), (Errno::INVAL, 7));
    }
    target.with_slice(|t| assert!(t.iter().all(|&x| x == 0)));
    wo_mem.with_slice(|t| assert!(t.iter().all(|&x| x == 0)));
    // A local buffer the lkey does not cover.
    let unreg = app_mem(16, 0);
    a.post_rdma(rdma(
        RdmaOp::Read,
        b.addr(),
        unreg,
        smr.lkey,
        base,
        ro.rkey,
        20,
    ))
    .unwrap();
    let e = rdma_status(&mut a, 20).unwrap_err();
    assert_eq!(
        (e, e.errno(), e.prov_errno()),
        (DevError::LocalKey, Errno::INVAL, 5)
    );
    // Still working: a good read.
    let back = src.sub(0, 8).unwrap();
    a.post_rdma(rdma(
        RdmaOp::Read,
        b.addr(),
        back,
        smr.lkey,
        base,
        ro.rkey,
        22,
    ))
    .unwrap();
    assert_eq!(rdma_status(&mut a, 22), Ok(()));
    src.with_slice(|s| assert!(s[..8].iter().all(|&x| x == 0)));
    // A peer that is gone: unresponsive remote.
    let dest = b.addr();
    drop(b);
    a.post_rdma(rdma(RdmaOp::Read, dest, back, smr.lkey, base, ro.rkey, 23))
        .unwrap();
    assert_eq!(rdma_status(&mut a, 23), Err(DevError::Unreachable));
}

/// An RDMA write with data lands in registered memory and takes one posted receive at the
/// target, which reports the data, the length and the sender; with no receive posted it is
/// refused as a datagram would be (RNR).
#[test]
fn rdma_write_with_data_completes_at_the_target() {
    let (ha, hb) = (
        HwContext::open(&emulated()).unwrap(),
        HwContext::open(&emulated()).unwrap(),
    );
    let mut a = VerbsDevice::open(&ha, 3).unwrap();
    a.set_rnr_retry(0);
    let mut b = VerbsDevice::open(&hb, 3).unwrap();
    let target = app_mem(256, 0);
    let tmr = hb.reg_mr(target, FI_REMOTE_WRITE).unwrap();
    let src = app_mem(256, 0x42);
    let smr = ha.reg_mr(src, 0).unwrap();
    let req = rdma(
        RdmaOp::WriteData(0xfeed_beef),
        b.addr(),
        src,
        smr.lkey,
        target.addr() as u64,
        tmr.rkey,
        1,
    );
    a.post_rdma(req).unwrap();
    assert_eq!(rdma_status(&mut a, 1), Err(DevError::Rnr));
    b.post_recv(Vec::new(), 77).unwrap();
    a.post_rdma(RdmaReq { wr_id: 2, ..req }).unwrap();
    assert_eq!(rdma_status(&mut a, 2), Ok(()));
    let mut out = Vec::new();
    pump(&mut [&mut b], &mut out, |o| !o.is_empty());
    match &out[0] {
        Completion::WriteData {
            wr_id,
            len,
            data,
            src,
            ..
        } => {
            assert_eq!((*wr_id, *len, *data), (77, 256, 0xfeed_beef));
            assert_eq!((src.gid, src.qpn), (a.addr().gid, a.addr().qpn));
        }
        c => panic!("{c:?}"),
    }
    target.with_slice(|t| assert!(t.iter().all(|&x| x == 0x42)));
    assert_eq!(b.stats().rdma_writes_received, 1);
}

/// Registrations: access follows the request, the emulated `efadv_query_mr` answers, and the
/// NIC refuses remote write without local write (ibv_reg_mr(3)).
#[test]
fn registrations_answer_query_mr_and_check_access() {
    let hw = HwContext::open(&emulated()).unwrap();
    let mem = app_mem(64, 0);
    let mr = hw.reg_mr(mem, FI_REMOTE_READ).unwrap();
    assert_ne!(mr.lkey, mr.rkey);
    use crate::util::mr::DeviceMr;
    assert_eq!(mr.ic_ids(), [7, 0, 0, 0]);
    let v = emul::verbs();
    // SAFETY: the live PD of `hw`; `mem` is valid.
    let bad = unsafe { (v.reg_mr)(hw.pd.0, mem.as_ptr().cast(), 64, IBV_ACCESS_REMOTE_WRITE) };
    assert!(bad.is_null());
}

/// What a registration lets peers do follows what the application asked for: remote read
/// for FI_REMOTE_READ and for the sources of long reads (FI_SEND, FI_WRITE), remote write for
/// FI_REMOTE_WRITE, neither for a receive buffer; the local key covers any registration.
#[test]
fn registration_access_follows_the_request() {
    let hw = HwContext::open(&emulated()).unwrap();
    let cases = [
        (FI_REMOTE_READ, true, false),
        (FI_SEND, true, false),
        (crate::abi::consts::FI_WRITE, true, false),
        (FI_REMOTE_WRITE, false, true),
        (crate::abi::consts::FI_RECV, false, false),
    ];
    for (access, read, write) in cases {
        let mem = app_mem(128, 0);
        let mr = hw.reg_mr(mem, access).unwrap();
        assert_eq!(hw.lkey_for(mem.addr(), 128), Some(mr.lkey));
        assert_eq!(hw.lkey_for(mem.addr() + 64, 64), Some(mr.lkey));
        assert_eq!(hw.lkey_for(mem.addr() + 64, 65), None, "past the end");
        let rkey = hw.rkey_for(mem.addr(), 128);
        assert_eq!(rkey.is_some(), read, "access {access:#x}: remote read");
        let m = emul::access_of(mr.mr.0);
        assert_eq!(m & IBV_ACCESS_REMOTE_READ != 0, read, "access {access:#x}");
        assert_eq!(
            m & IBV_ACCESS_REMOTE_WRITE != 0,
            write,
            "access {access:#x}"
        );
        assert_ne!(m & IBV_ACCESS_LOCAL_WRITE, 0);
    }
    // efadv_mr_attr as efadv_query_mr(3) gives it (rdma-core 49; not in Debian's headers).
    assert_eq!(core::mem::size_of::<EfadvMrAttr>(), 16);
    assert_eq!(core::mem::offset_of!(EfadvMrAttr, ic_id_validity), 8);
    assert_eq!(core::mem::offset_of!(EfadvMrAttr, rdma_recv_ic_id), 14);
}
