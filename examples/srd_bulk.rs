//! The software SRD device alone (no RDM protocol above it): bulk throughput between two queue
//! pairs on loopback, one thread each, for `make bench`'s comparison with raw UDP at the same
//! datagram size (bench/limits). Prints
//! `srd_bulk <datagram bytes> <GB/s> <acks per datagram> <retransmits per datagram>`.
//!
//!   cargo run --release --example srd_bulk [seconds]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use fabric::prov::efa::device::udp::{DeviceConfig, UdpDevice, discover};
use fabric::prov::efa::device::{Completion, Device, HEADROOM};
use fabric::sys::mem::IoVec;

/// Datagrams in flight: enough to fill the window, few enough (8 MiB) to stay in the cache as
/// the raw UDP measurement does.
const IN_FLIGHT: usize = 128;

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let Some(lo) = discover(Some("lo"), 1, None).into_iter().next() else {
        eprintln!("srd_bulk: no loopback device");
        std::process::exit(1);
    };
    let cfg = DeviceConfig {
        faults: None,
        ..DeviceConfig::default()
    };
    let (mut tx, mut rx) = match (UdpDevice::open(&lo, 0, &cfg), UdpDevice::open(&lo, 0, &cfg)) {
        (Ok(a), Ok(b)) => (a, b),
        _ => {
            eprintln!("srd_bulk: cannot open the loopback device");
            std::process::exit(1);
        }
    };
    let mtu = tx.mtu();
    let dest = rx.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(2));

    let receiver = {
        let (stop, received, start) = (stop.clone(), received.clone(), start.clone());
        std::thread::spawn(move || {
            for i in 0..rx.max_recv().min(1024) {
                let _ = rx.post_recv(Vec::new(), i as u64);
            }
            start.wait();
            let mut out = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                out.clear();
                rx.poll(&mut out, 256);
                for c in out.drain(..) {
                    match c {
                        Completion::Recv {
                            wr_id, buf, len, ..
                        } => {
                            received.fetch_add(len as u64, Ordering::Relaxed);
                            let _ = rx.post_recv(buf, wr_id);
                        }
                        // A run's datagrams take no posted receive.
                        Completion::RecvInRun { len, .. } => {
                            received.fetch_add(len as u64, Ordering::Relaxed);
                        }
                        Completion::RecvInPieces { pieces, .. } => {
                            received.fetch_add(pieces.len as u64, Ordering::Relaxed);
                        }
                        Completion::Run { buf } => rx.return_run(buf),
                        // No RDMA on the software device, and no placements named here.
                        Completion::Send { .. }
                        | Completion::Rdma { .. }
                        | Completion::WriteData { .. }
                        | Completion::Placed { .. } => {}
                    }
                }
                rx.flush();
            }
            rx.stats()
        })
    };

    // The sender keeps its send queue full of MTU-sized datagrams.
    let mut free: Vec<Vec<u8>> = (0..tx.max_send().min(IN_FLIGHT))
        .map(|_| vec![7u8; HEADROOM + mtu])
        .collect();
    let mut out = Vec::new();
    start.wait();
    let t0 = Instant::now();
    let mut measured_from = None;
    let deadline = Duration::from_secs_f64(secs + 0.2);
    while t0.elapsed() < deadline {
        // The first 0.2 s warm up the window; bytes are counted from there.
        if measured_from.is_none() && t0.elapsed() >= Duration::from_millis(200) {
            measured_from = Some((Instant::now(), received.load(Ordering::Relaxed)));
        }
        while let Some(buf) = free.pop() {
            if let Err((_, buf)) = tx.post_send(dest, buf, mtu, IoVec::EMPTY, 0) {
                free.push(buf);
                break;
            }
        }
        out.clear();
        tx.poll(&mut out, 256);
        for c in out.drain(..) {
            if let Completion::Send { buf, .. } = c {
                free.push(buf);
            }
        }
        tx.flush();
    }
    let (since, at) = measured_from.unwrap_or((t0, 0));
    let bytes = received.load(Ordering::Relaxed) - at;
    let gbps = bytes as f64 / since.elapsed().as_secs_f64() / 1e9;
    stop.store(true, Ordering::Relaxed);
    let rs = receiver.join().unwrap_or_default();
    let ts = tx.stats();
    let delivered = rs.delivered.max(1) as f64;
    println!(
        "srd_bulk {mtu} {gbps:.3} {:.4} {:.4}",
        (rs.acks_sent - rs.acks_piggybacked) as f64 / delivered,
        ts.retransmits as f64 / delivered
    );
}
