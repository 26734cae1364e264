//! A simulated device: the SRD transport over an in-memory network with a virtual clock and a
//! seeded fault injector, so that everything above it runs deterministically in tests.

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::faults::{Faults, Injector};
use super::{Completion, DevError, Device, EfaAddr, HEADROOM, TooBig, recv_buf_len};
use crate::core::Errno;
use crate::prov::efa::srd::{self, Arrival, Config, PeerKey, Status, Time, Transmit, Transport};
use crate::sys::mem::IoVec;

/// A datagram on the simulated wire: (arrival, tie-break sequence, destination qpn, source qpn,
/// bytes), ordered by arrival.
type InFlight = core::cmp::Reverse<(Time, u64, u16, u16, Vec<u8>)>;

/// The network: mailboxes by queue pair number, one clock, one injector.
pub struct SimNet {
    inner: Mutex<NetInner>,
}

struct NetInner {
    now: Time,
    latency: Time,
    injector: Injector,
    wire: BinaryHeap<InFlight>,
    boxes: HashMap<u16, VecDeque<(u16, Vec<u8>)>>,
    seq: u64,
    next_qpn: u16,
    /// Queue pairs that no longer receive (a dead host).
    down: Vec<u16>,
}

impl SimNet {
    pub fn new(faults: Faults) -> Arc<SimNet> {
        Arc::new(SimNet {
            inner: Mutex::new(NetInner {
                now: 0,
                latency: 5 * srd::US,
                injector: Injector::new(faults),
                wire: BinaryHeap::new(),
                boxes: HashMap::new(),
                seq: 0,
                next_qpn: 1,
                down: Vec::new(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, NetInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn now(&self) -> Time {
        self.lock().now
    }

    /// Moves the clock forward and delivers what arrived by then.
    pub fn advance(&self, dt: Time) {
        let mut n = self.lock();
        n.now += dt;
        let now = n.now;
        while let Some(core::cmp::Reverse((t, _, _, _, _))) = n.wire.peek() {
            if *t > now {
                break;
            }
            let Some(core::cmp::Reverse((_, _, to, from, b))) = n.wire.pop() else {
                break;
            };
            if !n.down.contains(&to) {
                n.boxes.entry(to).or_default().push_back((from, b));
            }
        }
    }

    /// Cuts a queue pair off (its host died): it receives nothing more.
    pub fn kill(&self, qpn: u16) {
        self.lock().down.push(qpn);
    }

    fn send(&self, from: u16, to: u16, bytes: &[u8]) {
        let mut n = self.lock();
        let (now, latency) = (n.now, n.latency);
        let mut out = Vec::new();
        n.injector.apply(bytes, |b, d| out.push((b, d)));
        for (b, d) in out {
            n.seq += 1;
            let s = n.seq;
            n.wire
                .push(core::cmp::Reverse((now + latency + d, s, to, from, b)));
        }
    }

    fn take(&self, qpn: u16) -> Vec<(u16, Vec<u8>)> {
        self.lock()
            .boxes
            .get_mut(&qpn)
            .map(|q| q.drain(..).collect())
            .unwrap_or_default()
    }
}

/// The GID every simulated queue pair shares (one "host" per network; the QPN tells them apart).
const SIM_GID: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x51];

pub struct SimDevice {
    net: Arc<SimNet>,
    addr: EfaAddr,
    mtu: usize,
    t: Transport<u16>,
    recvs: VecDeque<(u64, Vec<u8>)>,
    unreliable_done: VecDeque<(u64, Vec<u8>)>,
    sends: usize,
    max_send: usize,
    too_big: TooBig,
}

impl SimDevice {
    pub fn open(net: &Arc<SimNet>, mtu: usize, cfg: Config) -> SimDevice {
        let qpn = {
            let mut n = net.lock();
            let q = n.next_qpn;
            n.next_qpn += 1;
            q
        };
        let qkey = 0x1000 + u32::from(qpn);
        SimDevice {
            net: net.clone(),
            addr: EfaAddr {
                gid: SIM_GID,
                qpn,
                qkey,
            },
            mtu,
            t: Transport::new(Config { qkey, ..cfg }, u64::from(qpn)),
            recvs: VecDeque::new(),
            unreliable_done: VecDeque::new(),
            sends: 0,
            max_send: 4096,
            too_big: TooBig::default(),
        }
    }

    fn flush(&mut self) {
        while let Some(t) = self.t.poll_transmit() {
            match t {
                Transmit::Data { peer, seq } => {
                    let dest = *self.t.peer_addr(peer);
                    match self.t.datagram(peer, seq) {
                        Some([head, []]) => self.net.send(self.addr.qpn, dest, head),
                        Some(parts) => self.net.send(self.addr.qpn, dest, &parts.concat()),
                        None => {}
                    }
                }
                Transmit::Ctrl { dest, bytes, len } => {
                    self.net.send(self.addr.qpn, dest, &bytes[..len])
                }
            }
        }
    }
}

impl Device for SimDevice {
    /// The end of the caller's pass: acknowledgements no answer carried go out now.
    fn flush(&mut self) -> bool {
        self.t.flush_acks();
        SimDevice::flush(self);
        false
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn addr(&self) -> EfaAddr {
        self.addr
    }

    fn max_send(&self) -> usize {
        self.max_send
    }

    fn max_recv(&self) -> usize {
        4096
    }

    fn post_send(
        &mut self,
        dest: EfaAddr,
        buf: Vec<u8>,
        len: usize,
        tail: IoVec,
        wr_id: u64,
    ) -> std::result::Result<(), (Errno, Vec<u8>)> {
        if len + tail.len() > self.mtu {
            return Err((Errno::MSGSIZE, buf));
        }
        if self.sends >= self.max_send {
            return Err((Errno::AGAIN, buf));
        }
        self.sends += 1;
        // The buffer stays whole: it comes back for reuse without being zeroed again.
        self.t.send_prefix(
            self.net.now(),
            PeerKey {
                addr: dest.qpn,
                qkey: dest.qkey,
            },
            wr_id,
            buf,
            HEADROOM + len,
            tail,
        );
        self.flush();
        Ok(())
    }

    fn post_send_unreliable(
        &mut self,
        dest: EfaAddr,
        mut buf: Vec<u8>,
        len: usize,
        wr_id: u64,
    ) -> std::result::Result<(), (Errno, Vec<u8>)> {
        if len > self.mtu {
            return Err((Errno::MSGSIZE, buf));
        }
        buf.truncate(HEADROOM + len);
        self.t.unreliable(
            PeerKey {
                addr: dest.qpn,
                qkey: dest.qkey,
            },
            &mut buf,
        );
        self.net.send(self.addr.qpn, dest.qpn, &buf);
        self.unreliable_done.push_back((wr_id, buf));
        Ok(())
    }

    fn post_recv(
        &mut self,
        mut buf: Vec<u8>,
        wr_id: u64,
    ) -> std::result::Result<(), (Errno, Vec<u8>)> {
        buf.resize(recv_buf_len(self.mtu), 0);
        self.recvs.push_back((wr_id, buf));
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) {
        let now = self.net.now();
        for (from, bytes) in self.net.take(self.addr.qpn) {
            if bytes.len() > recv_buf_len(self.mtu) {
                // A posted receive could not hold it (as a NIC drops it): counted, not seen.
                let from = format!("qpn {from}");
                self.too_big
                    .dropped(&self.addr, &from, bytes.len() - HEADROOM, self.mtu);
                continue;
            }
            let ready = !self.recvs.is_empty();
            if let Arrival::Deliver { src_qkey, payload } =
                self.t.handle_datagram(now, from, &bytes, ready)
                && let Some((wr_id, mut buf)) = self.recvs.pop_front()
            {
                let len = payload.len();
                buf[HEADROOM..HEADROOM + len].copy_from_slice(&bytes[payload]);
                let src = EfaAddr {
                    gid: SIM_GID,
                    qpn: from,
                    qkey: src_qkey,
                };
                out.push(Completion::Recv {
                    wr_id,
                    buf,
                    off: HEADROOM,
                    len,
                    src,
                });
            }
        }
        self.t.handle_timeout(now);
        self.flush();
        while out.len() < max {
            let Some((wr_id, status, buf)) = self.t.poll_completion() else {
                break;
            };
            self.sends = self.sends.saturating_sub(1);
            let status = match status {
                Status::Ok => Ok(()),
                Status::Rnr => Err(DevError::Rnr),
                Status::Unreachable => Err(DevError::Unreachable),
            };
            out.push(Completion::Send { wr_id, status, buf });
        }
        while out.len() < max {
            let Some((wr_id, buf)) = self.unreliable_done.pop_front() else {
                break;
            };
            out.push(Completion::Send {
                wr_id,
                status: Ok(()),
                buf,
            });
        }
    }

    fn set_rnr_retry(&mut self, n: u32) {
        self.t.set_rnr_retry(n);
    }

    fn stats(&self) -> srd::Stats {
        srd::Stats {
            dropped_too_big: self.too_big.count,
            ..self.t.stats()
        }
    }

    fn abandon(&mut self, dest: EfaAddr) {
        self.t.abandon(
            PeerKey {
                addr: dest.qpn,
                qkey: dest.qkey,
            },
            Status::Unreachable,
        );
    }
}
