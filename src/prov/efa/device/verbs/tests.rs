//! The hardware device over the emulated NIC (`emul`, a test double): discovery, the data
//! path both ways, RNR, a peer that is gone, and address handles shared and released.

use super::*;

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
    assert_eq!(d.inline_size, 32);
    assert_eq!(d.speed_bps, 100_000_000_000);
    assert!(d.up);
    assert_eq!(port_speed(1, 1), 2_500_000_000);
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
            Completion::Run { .. } | Completion::RecvInRun { .. } => {
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
