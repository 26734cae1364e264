//! The software SRD device: the transport of `srd` over one UDP socket per queue pair.
//!
//! The queue pair number is the socket's port, the GID the interface's address (IPv4-mapped for
//! IPv4), the QKEY random. Datagrams go out in `sendmmsg` batches and come in by `recvmmsg`;
//! a received datagram is handed to the upper layer by swapping buffers with a posted receive,
//! so the payload is never copied on the way up. On interfaces with a small MTU (Ethernet) the
//! socket takes runs of datagrams whole (UDP GRO) into 64 KiB buffers instead, and each
//! datagram of a run is copied into a posted receive: a copy of a few KiB costs less than the
//! trip through the stack it saves.

use core::mem::MaybeUninit;
use std::collections::{BinaryHeap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;

use super::faults::{Faults, Injector};
use super::fragment::{self, Fragmenting};
use super::{
    Completion, DevError, Device, EfaAddr, HEADROOM, MIN_MTU, PLACED_HDR, Placement, TooBig,
    recv_buf_len,
};
use crate::core::{Errno, Result};
use crate::prov::efa::srd::{self, Arrival, Config, PeerKey, Status, Time, Transport};
use crate::sys::mem::IoVec;
use crate::sys::netif::{Iface, LinkInfo};
use crate::sys::poll::{Epoll, EventFd, TimerFd};
use crate::sys::udp::{BATCH, PeerSockError, SEND_BATCH, StackList, UdpSock, gso_run_datagrams};

/// Datagrams up to this size are received in runs (GRO) when the kernel can.
const GRO_MAX_DATAGRAM: usize = 16 << 10;
/// A GRO receive buffer: a coalesced run is at most 64 KiB.
const GRO_BUF: usize = 64 << 10;

/// Bytes a peer may have in flight. More only waits in the receiver's socket: on loopback
/// (64 KiB datagrams) a receiver drains about 2.5 GB/s while it also sends, so 4 MiB in flight
/// queued for 1.7 ms, past the 1 ms minimum RTO of then, and with 1 MiB writes both ways 6 % of all
/// datagrams went out twice (spurious timeouts and time-based losses; the kernel's UDP counters
/// showed no drop). At 1 MiB: 0.4 %, and 12 % more throughput (9 pinned runs, near vCPUs);
/// one-way writes and tagged sends unchanged. A socket buffer takes it without root.
const WINDOW_BYTES: usize = 1 << 20;

/// The shortest retransmission timeout of this device's transport (`srd::Config::min_rto`,
/// 1 ms by default). Processes late to answer (busy sending their own window, or on a vCPU
/// the host took away) went silent for longer than that: at 1 ms, 1 MiB writes both ways
/// over a veth pair timed out 3–19 times per 400 MiB, nearly all undone (the acks came,
/// late), and 0.4–2.2 % of the datagrams arrived twice. At 5 ms: no timeout in 8 runs of 9,
/// and at most 0.03 % arrived twice. Losses are found by acks and the tail-loss probe (two
/// round trips), not by this timer, which only bounds a silence.
const MIN_RTO: Time = 5 * srd::MS;

/// The congestion window's ceiling in datagrams for an MTU: 16 of loopback's 64 KiB fill
/// [`WINDOW_BYTES`]; smaller datagrams get up to what one ack covers (256), so that Ethernet's
/// 1,472-byte datagrams keep a round trip's worth in flight on a fast link (over a veth pair,
/// 128 of them still kept 1 MiB writes both ways waiting: 256 moved them 9 % faster).
fn window_for(mtu: usize) -> u32 {
    (WINDOW_BYTES / (mtu + HEADROOM).max(1)).clamp(1, srd::wire::SACK_BITS as usize) as u32
}

/// Largest UDP payload by address family (IPv4 65535 − 20 − 8; IPv6 65535 − 8).
fn udp_max(ip: IpAddr) -> usize {
    if ip.is_ipv4() { 65_507 } else { 65_527 }
}

/// The largest RDM packet over a link of `link_mtu` bytes for addresses like `ip`.
fn packet_mtu(link_mtu: usize, ip: IpAddr) -> usize {
    let ip_hdr = if ip.is_ipv4() { 20 } else { 40 };
    link_mtu
        .saturating_sub(ip_hdr + 8)
        .min(udp_max(ip))
        .saturating_sub(HEADROOM)
}

/// The largest RDM packet of a device on `iface` and the most fragments a datagram goes out
/// in (1: none; `FI_EFA_UDP_FRAGMENTS` asks for `fragments`). A link whose datagrams are small
/// carries transport datagrams of up to `fragments` of them (`device::fragment`), as many as
/// a GRO receive takes in one datagram's buffer; loopback's are large already.
/// `mtu_override` (`FI_EFA_MTU_SIZE`) lowers the result, never below `MIN_MTU`.
fn device_mtu(iface: &Iface, fragments: usize, mtu_override: Option<usize>) -> (usize, usize) {
    let plain = packet_mtu(iface.mtu, iface.addr);
    let link = plain + HEADROOM;
    let fit = GRO_MAX_DATAGRAM / link.saturating_sub(fragment::HDR).max(1);
    let count = fragments.min(fragment::MAX_COUNT).min(fit);
    let (mut mtu, count) = if !iface.loopback && count >= 2 && plain >= MIN_MTU {
        (count * (link - fragment::HDR) - HEADROOM, count)
    } else {
        (plain, 1)
    };
    if let Some(m) = mtu_override {
        mtu = mtu.min(m);
    }
    (mtu.max(MIN_MTU), count)
}

/// Peers at this host's own addresses, as a device on another interface reaches them: the
/// kernel routes datagrams to any local address over loopback, so they may be as large as
/// loopback's (`packet_mtu` of lo) rather than the interface's. Without this two processes
/// of one host on `srd_eth0` (fabtests' first efa domain, with local shm off) moved 1,348-byte
/// packets: writes both ways at 1,200 MB/s, where `srd_lo` moves 64 KiB ones at twice that.
#[derive(Debug, Clone)]
struct LocalPath {
    addrs: Vec<IpAddr>,
    mtu: usize,
}

impl LocalPath {
    /// For a device on `dev`, when loopback carries larger packets than its interface and
    /// the device receives them whole (`rx_len`: its socket buffers). None on loopback itself,
    /// or when `FI_EFA_MTU_SIZE` lowered the device's MTU (the user asked for that size).
    fn of(dev: &UdpDeviceInfo, rx_len: usize) -> Option<LocalPath> {
        if dev.iface.loopback || dev.mtu < device_mtu(&dev.iface, dev.fragments, None).0 {
            return None;
        }
        let ifaces = crate::sys::netif::interfaces();
        let lo = ifaces.iter().find(|i| i.up && i.loopback)?;
        let mtu = packet_mtu(lo.mtu, dev.iface.addr).min(rx_len.saturating_sub(HEADROOM));
        let addrs: Vec<IpAddr> = ifaces.iter().filter(|i| i.up).map(|i| i.addr).collect();
        (mtu > dev.mtu && !addrs.is_empty()).then_some(LocalPath { addrs, mtu })
    }

    fn reaches(&self, ip: IpAddr) -> bool {
        self.addrs.contains(&ip)
    }
}

/// A usable interface as a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpDeviceInfo {
    /// `srd_<interface>`.
    pub name: String,
    pub iface: Iface,
    /// Largest RDM packet.
    pub mtu: usize,
    /// Most link-sized fragments one of its datagrams goes out in (1: none; `device_mtu`).
    pub fragments: usize,
    /// The hardware under the interface (PCI function, speed, state) as sysfs tells it.
    pub link: LinkInfo,
}

/// The devices of this host: one per interface that is up and has an address, non-loopback
/// first (`FI_EFA_IFACE` filters by interface or device name, comma-separated). `fragments`
/// (`FI_EFA_UDP_FRAGMENTS`) and `mtu_override` (`FI_EFA_MTU_SIZE`) shape the MTU
/// (`device_mtu`).
pub fn discover(
    filter: Option<&str>,
    fragments: usize,
    mtu_override: Option<usize>,
) -> Vec<UdpDeviceInfo> {
    let mut list: Vec<UdpDeviceInfo> = crate::sys::netif::interfaces()
        .into_iter()
        .filter(|i| i.up)
        .filter(|i| match filter {
            None => true,
            Some(f) => f
                .split(',')
                .map(str::trim)
                .any(|n| n == i.name || n == format!("srd_{}", i.name)),
        })
        .map(|iface| {
            // Never below MIN_MTU, which every peer relies on before our handshake.
            let (mtu, fragments) = device_mtu(&iface, fragments, mtu_override);
            UdpDeviceInfo {
                name: format!("srd_{}", iface.name),
                link: crate::sys::netif::link_info(&iface.name, iface.up),
                iface,
                mtu,
                fragments,
            }
        })
        .collect();
    list.sort_by_key(|d| d.iface.loopback);
    list
}

/// Device settings from the efa parameters.
#[derive(Debug, Clone)]
pub struct DeviceConfig {
    pub rnr_retry: u32,
    pub timeout_interval_us: u64,
    pub max_timeout_us: u64,
    pub max_send: usize,
    pub max_recv: usize,
    pub faults: Option<Faults>,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            rnr_retry: 3,
            timeout_interval_us: 0,
            max_timeout_us: 1_000_000,
            max_send: 8192,
            max_recv: 8192,
            faults: Faults::from_env(),
        }
    }
}

/// Most bytes of socket buffers one receive call fills: a batch is checked and copied out
/// by the RDM layer while it is still in the core's cache — 32 datagrams of 64 KiB on loopback
/// would be 2 MiB, past a 1 MiB L2, and every check would read from L3 or memory.
const RX_BATCH_BYTES: usize = 512 * 1024;
/// Most batches one poll takes from the socket before the upper layer handles them.
const RECV_BATCHES_PER_POLL: usize = 8;
/// Datagrams of a burst that share a clock reading (`UdpDevice::send_time`), and the bytes
/// written into their buffers meanwhile (about 5 µs of copying).
const SEND_CLOCK_USES: u32 = 16;
const SEND_CLOCK_BYTES: usize = 64 << 10;

pub struct UdpDevice {
    sock: UdpSock,
    addr: EfaAddr,
    mtu: usize,
    t: Transport<SocketAddr>,
    /// `sys::os::monotonic_ns` when the device opened: the transport's time 0.
    origin: u64,
    /// Within a burst of sends (`Device::send_burst`): the clock reading its sends share, how
    /// many used it and the bytes written into their buffers.
    burst: Option<(Time, u32, usize)>,
    recvs: VecDeque<(u64, Vec<u8>)>,
    rx_bufs: Vec<Vec<u8>>,
    rx_meta: Vec<(usize, SocketAddr, usize)>,
    /// Whether the socket coalesces runs of datagrams (UDP GRO): `rx_bufs` then hold 64 KiB
    /// each and go up whole as [`Completion::Run`]s.
    gro: bool,
    /// Run buffers given back by the upper layer, to replace the next ones handed up.
    spare_runs: Vec<Vec<u8>>,
    /// Posted receives that datagrams of runs count against ([`Completion::RecvInRun`]):
    /// those held (`service`) or handed up by the last poll, which the upper layer has handled
    /// by the next.
    run_credits: usize,
    /// Of `run_credits`, those of the datagrams the last poll handed up.
    run_credits_up: usize,
    /// The socket refused part of the last batch (its buffer was full); the rest waits in the
    /// transport's queue.
    socket_full: bool,
    /// Unreliable datagrams waiting for the socket, and their completions.
    unreliable: VecDeque<(SocketAddr, u64, Vec<u8>)>,
    unreliable_done: VecDeque<(u64, Vec<u8>)>,
    sends: usize,
    max_send: usize,
    max_recv: usize,
    injector: Option<Injector>,
    /// Delayed (injected) datagrams: release time, destination, bytes.
    delayed: BinaryHeap<core::cmp::Reverse<(Time, SocketAddrOrd, Vec<u8>)>>,
    timer: TimerFd,
    /// The deadline the timer is armed for (device time), if any.
    armed: Option<Time>,
    wait: Epoll,
    /// Receives completed by [`Device::service`] while the application was away, handed up
    /// by the next `poll`; `held_signal` (in the wait set) is readable while there are any.
    held: Vec<Completion>,
    held_signal: EventFd,
    too_big: TooBig,
    /// Datagrams received into a [`Placement`]'s memory and delivered.
    placed: u64,
    /// This host's own addresses, reached with loopback's larger datagrams.
    local: Option<LocalPath>,
    /// The last receive found the socket empty: the next datagram is likely alone (an
    /// answer awaited), and is taken by itself (`receive`).
    was_empty: bool,
    /// While the first socket is quiet (only the connected peer sends), it is read when this
    /// time has come, then again `FIRST_SOCKET_EVERY` later (`receive`).
    first_due: Time,
    /// The destination of the last send: a window of sends names one peer, whose GID need not
    /// be turned into an IP address and looked for among this host's each time, nor its
    /// transport peer looked up by socket address.
    last_route: Option<Route>,
    /// The connected socket's sends when last looked at, and when (`connect_peer`).
    peer_sends: (u64, Time),
    /// Routes taken to peers other than the connected socket's (`route`).
    indirect_routes: u32,
    /// The connected socket could not be made: not tried again.
    no_peer_sock: bool,
    /// Datagrams larger than the link takes go out in fragments (`device::fragment`).
    frag: Option<Fragmenting>,
}

/// A peer whose connected socket has had no send for this long gives it up to another peer
/// sent to (`UdpDevice::connect_peer`).
const PEER_SOCK_IDLE: Time = 10_000_000;
/// How often a quiet first socket is read while the connected one takes every datagram: a
/// busy-polling receiver otherwise pays an empty recvmmsg(2) on it per poll (about 450 ns
/// here, as much as the read that finds data). A new peer's first datagram waits up to this
/// long; the socket is read at every poll again once it has had one.
const FIRST_SOCKET_EVERY: Time = 20 * srd::US;
/// Routes to other peers between two looks at whether the connected socket is idle.
const PEER_SOCK_CHECK: u32 = 256;

/// Where sends to one destination go ([`UdpDevice::route`]).
#[derive(Clone, Copy)]
struct Route {
    dest: EfaAddr,
    path_mtu: usize,
    /// The transport's index of that peer, and the transport's epoch it is good for.
    peer: usize,
    epoch: u32,
    /// Sends to it go through the connected socket (`UdpDevice::connect_peer`).
    direct: bool,
}

/// SocketAddr with an order, for the delay heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SocketAddrOrd(SocketAddr);

impl UdpDevice {
    /// Opens a queue pair on `dev` (port 0: any free port). A port the application named
    /// makes the endpoint reachable by node and service alone (QKEY 0, `srd` module docs).
    pub fn open(dev: &UdpDeviceInfo, port: u16, cfg: &DeviceConfig) -> Result<UdpDevice> {
        let mut sock = UdpSock::bind(dev.iface.addr, port, 16 << 20)?;
        // 31 random bits, never 0 (the "any QKEY at this address" of a peer that knows only
        // our node and service).
        let qkey = (crate::sys::random::u32() & 0x7fff_ffff).max(1);
        let addr = EfaAddr::from_socket(sock.local_addr(), qkey);
        let tcfg = Config {
            qkey,
            accept_unkeyed: port != 0,
            rnr_retry: cfg.rnr_retry,
            rnr_timeout_interval_us: cfg.timeout_interval_us,
            rnr_max_timeout_us: cfg.max_timeout_us,
            // Payloads are UDP's to protect (srd::wire), unless our injector damages them.
            checksum_payloads: cfg.faults.is_some_and(|f| f.corrupt > 0.0),
            max_window: window_for(dev.mtu),
            max_window_bytes: WINDOW_BYTES,
            min_rto: MIN_RTO,
            // Applied at the next poll or after the next send goes out (`flush`).
            defer_acks: true,
            ..Config::default()
        };
        let timer = TimerFd::new()?;
        let held_signal = EventFd::new()?;
        let wait = Epoll::new()?;
        wait.add(sock.fd())?;
        wait.add(timer.raw())?;
        wait.add(held_signal.raw())?;
        let buf_len = recv_buf_len(dev.mtu);
        // Runs are worth taking whole when datagrams are small; on loopback they are 64 KiB
        // already, and handing the socket buffer up saves the copy.
        let gro = buf_len <= GRO_MAX_DATAGRAM && sock.enable_gro();
        let rx_len = if gro { GRO_BUF } else { buf_len };
        let local = LocalPath::of(dev, rx_len);
        let link = packet_mtu(dev.iface.mtu, dev.iface.addr) + HEADROOM;
        let frag = (dev.fragments >= 2 && dev.mtu + HEADROOM > link).then(|| {
            let link = fragment::Link {
                payload: link,
                max_count: dev.fragments,
            };
            let runs = gso_run_datagrams(link.payload);
            Fragmenting::new(link, buf_len, runs, crate::sys::random::u32())
        });
        Ok(UdpDevice {
            sock,
            addr,
            mtu: dev.mtu,
            t: Transport::new(tcfg, crate::sys::random::u64()),
            origin: crate::sys::os::monotonic_ns(),
            burst: None,
            recvs: VecDeque::new(),
            rx_bufs: (0..(RX_BATCH_BYTES / rx_len).clamp(1, BATCH))
                .map(|_| vec![0u8; rx_len])
                .collect(),
            rx_meta: Vec::with_capacity(BATCH),
            gro,
            spare_runs: Vec::new(),
            run_credits: 0,
            run_credits_up: 0,
            socket_full: false,
            unreliable: VecDeque::new(),
            unreliable_done: VecDeque::new(),
            sends: 0,
            max_send: cfg.max_send,
            max_recv: cfg.max_recv,
            injector: cfg.faults.map(Injector::new),
            delayed: BinaryHeap::new(),
            timer,
            armed: None,
            wait,
            held: Vec::new(),
            held_signal,
            too_big: TooBig::default(),
            placed: 0,
            was_empty: false,
            first_due: 0,
            local,
            last_route: None,
            peer_sends: (0, 0),
            indirect_routes: 0,
            no_peer_sock: false,
            frag,
        })
    }

    /// The socket address of `dest` and the largest datagram its path takes.
    fn route(&mut self, dest: &EfaAddr) -> Route {
        match self.last_route {
            Some(r) if r.dest == *dest && r.epoch == self.t.epoch() => {
                if !r.direct {
                    self.indirect_routes = self.indirect_routes.wrapping_add(1);
                    if self.indirect_routes.is_multiple_of(PEER_SOCK_CHECK) {
                        let now = self.now();
                        self.connect_peer(dest.socket(), now);
                    }
                }
                r
            }
            _ => self.new_route(dest),
        }
    }

    /// Sends to `to` go through a socket connected to it (`UdpSock::connect_peer`: the
    /// kernel routes each datagram of an unconnected socket) if there is none yet, or if the
    /// one there is had no send for `PEER_SOCK_IDLE`. One peer at a time: a ping-pong or a
    /// transfer between two processes, the traffic that waits on each send.
    #[cold]
    fn connect_peer(&mut self, to: SocketAddr, now: Time) {
        if self.no_peer_sock {
            return;
        }
        match self.sock.connected_peer() {
            Some((p, _)) if p == to => return,
            Some((_, sends)) if sends != self.peer_sends.0 => {
                self.peer_sends = (sends, now);
                return;
            }
            Some(_) if now.saturating_sub(self.peer_sends.1) < PEER_SOCK_IDLE => return,
            _ => {}
        }
        match self.sock.connect_peer(to) {
            // Its datagrams arrive there: blocking waits must wake on them.
            Ok(Some(fd)) => {
                if self.wait.add(fd).is_err() {
                    self.sock.disconnect_peer();
                    self.no_peer_sock = true;
                }
            }
            Ok(None) | Err(PeerSockError::Peer(_)) => {}
            Err(PeerSockError::Socket(_)) => self.no_peer_sock = true,
        }
        self.peer_sends = (self.sock.connected_peer().map_or(0, |p| p.1), now);
        self.last_route = None;
    }

    /// Kept out of line: inlined, its byte-wise reading of the GID was hoisted above the
    /// comparison that nearly always spares it.
    #[cold]
    #[inline(never)]
    fn new_route(&mut self, dest: &EfaAddr) -> Route {
        let key = PeerKey {
            addr: dest.socket(),
            qkey: dest.qkey,
        };
        let now = self.now();
        self.connect_peer(key.addr, now);
        let r = Route {
            dest: *dest,
            path_mtu: self.path_mtu_ip(dest.ip()),
            peer: self.t.peer_index(key, now),
            epoch: self.t.epoch(),
            direct: self.sock.connected_peer().is_some_and(|p| p.0 == key.addr),
        };
        self.last_route = Some(r);
        r
    }

    /// [`Device::path_mtu`] by IP address.
    fn path_mtu_ip(&self, ip: IpAddr) -> usize {
        match &self.local {
            Some(l) if l.reaches(ip) => l.mtu,
            _ => self.mtu,
        }
    }

    fn now(&self) -> Time {
        self.since_origin(crate::sys::os::monotonic_ns())
    }

    /// A `sys::os::monotonic_ns` reading as the transport's time.
    fn since_origin(&self, monotonic: u64) -> Time {
        monotonic.saturating_sub(self.origin)
    }

    /// When a datagram of `copied` bytes in its buffer (its payload, if not in place, and
    /// its header) posted now leaves, for its retransmission timer and loss detection. In a
    /// burst (a window of long-CTS data) the clock is read once per `SEND_CLOCK_USES`
    /// datagrams or `SEND_CLOCK_BYTES` written into their buffers, whichever comes first: a
    /// reading per 1,472-byte datagram was 5 % of a veth sender's time (`perf`, tagged 1 MiB).
    /// A shared reading is then a few microseconds old at most, against a reordering window
    /// of 50 µs or more (`srd::REORDER_WINDOW_MIN`); datagrams sent at the same time are
    /// ordered by their sequence (RFC 8985 §6.2).
    fn send_time(&mut self, copied: usize) -> Time {
        if let Some((t, uses, bytes)) = &mut self.burst
            && *uses < SEND_CLOCK_USES
            && *bytes + copied <= SEND_CLOCK_BYTES
        {
            *uses += 1;
            *bytes += copied;
            return *t;
        }
        let t = self.now();
        if let Some(shared) = &mut self.burst {
            *shared = (t, 1, copied);
        }
        t
    }

    /// The next timer (retransmission, back-off, delayed ack, injected delay).
    fn next_deadline(&self) -> Option<Time> {
        [self.t.poll_timeout(), self.delayed.peek().map(|r| r.0.0)]
            .into_iter()
            .flatten()
            .min()
    }

    /// Keeps the timer at or before `next`. Re-arming costs two system calls, so an earlier
    /// deadline still pending is kept: waking early costs one poll. A deadline that passed is
    /// drained (or the wait fd would stay readable) and replaced.
    fn arm(&mut self, now: Time, next: Option<Time>) {
        let keep = match (self.armed, next) {
            (Some(a), Some(n)) => a > now && a <= n,
            (Some(a), None) => a > now,
            (None, None) => true,
            (None, Some(_)) => false,
        };
        if !keep {
            self.timer.set(next.map(|t| t.saturating_sub(now)));
            self.armed = next;
        }
    }

    /// Receives what the socket has. While `place` lists placements (not with GRO, whose
    /// runs arrive whole), datagrams are taken one at a time,
    /// each with the bytes past its packet header going into the next placement's memory
    /// ([`Placement`]); a placement is used up only by the datagram it names, so that acks and
    /// other packets in between cost one system call each and no prediction.
    fn receive(&mut self, now: Time, out: &mut Vec<Completion>, place: &[Placement]) {
        // An injector may delay, drop or repeat datagrams, which placement allows; one that
        // damages payloads makes the transport check them (`checksum_payloads`), and such
        // datagrams never match (`receive_placed`).
        let mut place = if self.places() { place } else { &[][..] };
        let placing = !place.is_empty();
        let mut stale = false;
        let mut batches = 0;
        // Datagrams taken one by one with a placement: as many as there are placements and a
        // few over (the packets between them), before batches as usual.
        let mut singles = 2 * place.len() + 4;
        let quiet = self.sock.first_socket_quiet();
        let first = !quiet || now >= self.first_due;
        if quiet && first {
            self.first_due = now + FIRST_SOCKET_EVERY;
        }
        loop {
            let split = match place.first() {
                Some(p) if singles > 0 => {
                    singles -= 1;
                    Some((HEADROOM + PLACED_HDR, p.dst))
                }
                _ => None,
            };
            // After an empty receive, the first datagram is most likely an answer that came
            // alone: asking for a batch would have the kernel try a second, empty receive on
            // the critical path of every request-reply (recvmmsg(2) goes on until one fails).
            // A stream finds its next receive non-empty and takes batches again.
            let alone = !placing && batches == 0 && self.was_empty;
            let want = if split.is_some() || alone {
                1
            } else if !self.gro && !self.recvs.is_empty() {
                // No more datagrams than posted receives: those past them wait in the socket
                // until the upper layer posts again (the end of this pass), not refused with
                // RNR, which would send their peer into back-off for a burst longer than the
                // posted buffers. With none posted at all, arrivals are refused as on EFA.
                self.rx_bufs.len().min(self.recvs.len())
            } else {
                self.rx_bufs.len()
            };
            let n = match split {
                Some(s) => self.sock.recv_batch_split(
                    &mut self.rx_bufs[..1],
                    &[s],
                    &mut self.rx_meta,
                    first,
                ),
                None => {
                    batches += 1;
                    self.sock.recv_batch_split(
                        &mut self.rx_bufs[..want],
                        &[],
                        &mut self.rx_meta,
                        first,
                    )
                }
            };
            if split.is_none() && batches == 1 {
                self.was_empty = n == 0;
            }
            for i in 0..n {
                let (len, from, seg) = self.rx_meta[i];
                if len > self.rx_bufs[i].len() {
                    // Cut short by the buffer (`recv_batch` reports the whole length): larger
                    // than our MTU allows.
                    self.too_big
                        .dropped(&self.addr, &from, len - HEADROOM, self.mtu);
                    continue;
                }
                if let (Some(p), Some(_)) = (place.first(), split) {
                    if self.receive_placed(now, len, from, p, out) {
                        place = &place[1..];
                        continue;
                    }
                    // Bulk data meant elsewhere: the upper layer's plan is behind (the first
                    // packet of a transfer, which it cannot name, moved it on). It plans
                    // again before more is taken.
                    stale |= len >= HEADROOM + PLACED_HDR + p.dst.len();
                }
                if self.gro {
                    self.receive_run(now, i, len, from, seg, out);
                    continue;
                }
                if self.frag.is_some() && len > 0 && self.rx_bufs[i][0] == fragment::MAGIC {
                    self.take_apart(now, from, i, 0..len, out);
                    continue;
                }
                let ready = !self.recvs.is_empty();
                let arrival = self
                    .t
                    .handle_datagram(now, from, &self.rx_bufs[i][..len], ready);
                if let Arrival::Deliver { src_qkey, payload } = arrival
                    // The buffer posted last first: usually the one just handed up and
                    // reposted, still in cache (first-in-first-out rotates through them all).
                    && let Some((wr_id, mut buf)) = self.recvs.pop_back()
                {
                    // Hand the socket buffer up and keep the posted one for the next datagram.
                    core::mem::swap(&mut self.rx_bufs[i], &mut buf);
                    out.push(Completion::Recv {
                        wr_id,
                        buf,
                        off: payload.start,
                        len: payload.len(),
                        src: EfaAddr::from_socket(from, src_qkey),
                    });
                }
            }
            // Placements all used: the upper layer names the next ones before more arrive.
            if n < want
                || alone
                || batches >= RECV_BATCHES_PER_POLL
                || (placing && (place.is_empty() || stale))
                || (!self.gro && self.recvs.is_empty())
            {
                break;
            }
        }
    }

    /// A datagram received with its bytes past `HEADROOM + PLACED_HDR` in `p.dst`
    /// (`rx_bufs[0]` holds the rest, in place). If it is the one `p` names, the transport
    /// takes its header (and a DATA_ACK's trailer) as a datagram of its own with the packet
    /// header as payload — the payload is outside the checksum (`FLAG_PAYLOAD_UNCHECKED`,
    /// always set here, without an injector) — and a delivery completes as
    /// [`Completion::Placed`]; returns true (the placement is used up, delivered or not: a
    /// duplicate or a refused datagram put the same bytes where they belong). Otherwise the
    /// bytes in `p.dst` are copied back so that `rx_bufs[0]` holds the datagram whole, and
    /// false.
    fn receive_placed(
        &mut self,
        now: Time,
        len: usize,
        from: SocketAddr,
        p: &Placement,
        out: &mut Vec<Completion>,
    ) -> bool {
        let head = HEADROOM + PLACED_HDR;
        let body = p.dst.len();
        let b = &mut self.rx_bufs[0];
        let trailer = match b[1] {
            srd::wire::KIND_DATA => 0,
            srd::wire::KIND_DATA_ACK => srd::wire::ACK_TRAILER,
            _ => usize::MAX,
        };
        let named = trailer != usize::MAX
            && len == head + body + trailer
            && b[2] & srd::wire::FLAG_PAYLOAD_UNCHECKED != 0
            && b[HEADROOM..head] == p.hdr;
        if !named {
            let spilled = len.saturating_sub(head).min(body);
            p.dst.read_at(0, &mut b[head..head + spilled]);
            return false;
        }
        // Header, packet header and trailer, without the payload between them.
        let mut short = [0u8; HEADROOM + PLACED_HDR + srd::wire::ACK_TRAILER];
        short[..head].copy_from_slice(&b[..head]);
        short[head..head + trailer].copy_from_slice(&b[head + body..head + body + trailer]);
        let ready = !self.recvs.is_empty();
        if let Arrival::Deliver { src_qkey, .. } =
            self.t
                .handle_datagram(now, from, &short[..head + trailer], ready)
            && let Some((wr_id, buf)) = self.recvs.pop_back()
        {
            self.placed += 1;
            out.push(Completion::Placed {
                wr_id,
                buf,
                token: p.token,
                src: EfaAddr::from_socket(from, src_qkey),
            });
        }
        true
    }

    /// The datagrams of socket buffer `i` when GRO is on: `len` bytes, `seg`-byte datagrams
    /// (the last one shorter). The buffer goes up whole as a [`Completion::Run`] and each
    /// datagram delivered as a `RecvInRun` into it, counting against the posted receives as
    /// the credit each is (none left: RNR) without copying into one: the upper layer copies the
    /// payload out once, where it goes (`perf`, both-ways writes over a veth pair: the copy
    /// into posted receives was half of the library's `memmove` time). A datagram whose
    /// fragments the run holds whole goes up as a `RecvInPieces`, not joined
    /// (`arrive_in_pieces`), unless the transport must check its payload.
    fn receive_run(
        &mut self,
        now: Time,
        i: usize,
        len: usize,
        from: SocketAddr,
        seg: usize,
        out: &mut Vec<Completion>,
    ) {
        let seg = seg.max(1);
        let mut off = 0;
        let mut run_at = None;
        while off < len {
            let mut end = (off + seg).min(len);
            let mut at = off..end;
            if self.frag.is_some() && self.rx_bufs[i][off] == fragment::MAGIC {
                // A datagram's fragments: joined where they lie when the run holds them all,
                // else copied together with those of other runs.
                match fragment::whole_in_run(&self.rx_bufs[i][..len], off, seg) {
                    Some((count, last)) => {
                        // The whole datagram, until the transport says where its packet is.
                        let mut pieces = fragment::InPieces {
                            off,
                            end: last,
                            seg,
                            count,
                            start: 0,
                            len: fragment::len_in_run(off, last, count),
                        };
                        if let Some(arrival) = self.arrive_in_pieces(now, i, &mut pieces, from) {
                            if let Some(src_qkey) = arrival {
                                self.run_credits += 1;
                                if run_at.is_none() {
                                    run_at = Some(out.len());
                                    out.push(Completion::Run { buf: Vec::new() });
                                }
                                out.push(Completion::RecvInPieces {
                                    pieces,
                                    src: EfaAddr::from_socket(from, src_qkey),
                                });
                            }
                            off = last;
                            continue;
                        }
                        at = fragment::join_in_run(&mut self.rx_bufs[i], off, seg, count, last);
                        end = last;
                        if let Some(f) = self.frag.as_mut() {
                            f.joined_in_run += 1;
                        }
                    }
                    None => {
                        self.take_apart(now, from, i, off..end, out);
                        off = end;
                        continue;
                    }
                }
            }
            let datagram = &self.rx_bufs[i][at.clone()];
            if datagram.len() > recv_buf_len(self.mtu)
                && datagram.len() > recv_buf_len(self.path_mtu_ip(from.ip()))
            {
                // Larger than our MTU allows (a peer that ignores it): dropped before the
                // transport sees it, as a socket buffer of that size would have cut it short.
                self.too_big
                    .dropped(&self.addr, &from, datagram.len() - HEADROOM, self.mtu);
                off = end;
                continue;
            }
            let ready = self.run_credits < self.recvs.len();
            if let Arrival::Deliver { src_qkey, payload } =
                self.t.handle_datagram(now, from, datagram, ready)
            {
                self.run_credits += 1;
                // The run's own completion comes first; its buffer is put in at the end.
                if run_at.is_none() {
                    run_at = Some(out.len());
                    out.push(Completion::Run { buf: Vec::new() });
                }
                out.push(Completion::RecvInRun {
                    off: at.start + payload.start,
                    len: payload.len(),
                    src: EfaAddr::from_socket(from, src_qkey),
                });
            }
            off = end;
        }
        if let Some(at) = run_at {
            // A spare the upper layer gave back, else a new one (only until enough circulate).
            let spare = self.spare_runs.pop().unwrap_or_else(|| vec![0u8; GRO_BUF]);
            out[at] = Completion::Run {
                buf: core::mem::replace(&mut self.rx_bufs[i], spare),
            };
        }
    }

    /// The datagram whose fragments lie whole in run `i` where `p` says (all of it), to the
    /// transport without joining them: its header and trailer (a DATA_ACK's) are all the
    /// transport reads of a datagram whose payload is outside the checksum, as in
    /// `receive_placed`.
    /// Returns `None` if the fragments must be joined first (a checksum over the payload: a
    /// fault injector that damages them; or not a data datagram), else the sender's QKEY if
    /// the transport delivers it, with `p` naming the packet.
    fn arrive_in_pieces(
        &mut self,
        now: Time,
        i: usize,
        p: &mut fragment::InPieces,
        from: SocketAddr,
    ) -> Option<Option<u32>> {
        let run = &self.rx_bufs[i];
        let first = p.first(run);
        if first.len() < HEADROOM || first[2] & srd::wire::FLAG_PAYLOAD_UNCHECKED == 0 {
            return None;
        }
        let trailer = match first[1] {
            srd::wire::KIND_DATA => 0,
            srd::wire::KIND_DATA_ACK => srd::wire::ACK_TRAILER,
            _ => return None,
        };
        let len = p.len;
        if len < HEADROOM + trailer {
            return None;
        }
        if len > recv_buf_len(self.mtu) && len > recv_buf_len(self.path_mtu_ip(from.ip())) {
            // As in `receive_run`: larger than our MTU allows.
            self.too_big
                .dropped(&self.addr, &from, len - HEADROOM, self.mtu);
            return Some(None);
        }
        let mut short = [0u8; HEADROOM + srd::wire::ACK_TRAILER];
        short[..HEADROOM].copy_from_slice(&first[..HEADROOM]);
        let mut at = HEADROOM;
        for piece in fragment::pieces_in_run(run, p.off, p.seg, p.end, len - trailer..len) {
            short[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        }
        let ready = self.run_credits < self.recvs.len();
        match self.t.handle_datagram(now, from, &short[..at], ready) {
            Arrival::Deliver { src_qkey, .. } => {
                p.start = HEADROOM;
                p.len = len - HEADROOM - trailer;
                if let Some(f) = self.frag.as_mut() {
                    f.left_in_pieces += 1;
                }
                Some(Some(src_qkey))
            }
            _ => Some(None),
        }
    }

    /// A fragment that arrived apart from the rest of its datagram, at `rx_bufs[i][at]`:
    /// copied to the others from its source (`fragment::Reassembly`). The datagram it
    /// completes goes up in a posted receive, which takes the reassembly buffer's place.
    fn take_apart(
        &mut self,
        now: Time,
        from: SocketAddr,
        i: usize,
        at: core::ops::Range<usize>,
        out: &mut Vec<Completion>,
    ) {
        let Some(f) = self.frag.as_mut() else {
            return;
        };
        let Some(slot) = f.apart.add(from, &self.rx_bufs[i][at]) else {
            return;
        };
        let ready = if self.gro {
            self.run_credits < self.recvs.len()
        } else {
            !self.recvs.is_empty()
        };
        let (buf, len) = f.apart.datagram(slot);
        if let Arrival::Deliver { src_qkey, payload } =
            self.t.handle_datagram(now, from, &buf[..len], ready)
            && let Some((wr_id, mut posted)) = self.recvs.pop_back()
        {
            core::mem::swap(buf, &mut posted);
            out.push(Completion::Recv {
                wr_id,
                buf: posted,
                off: payload.start,
                len: payload.len(),
                src: EfaAddr::from_socket(from, src_qkey),
            });
        }
        f.apart.release(slot);
    }

    /// How many fragments a datagram of `total` bytes to `dest` goes out in: 1 when the link
    /// takes it whole, or when `dest` is this host's (loopback carries it whole), or when it
    /// is too large even for fragments (it goes whole, as it would without them).
    #[inline]
    fn fragments_for(&self, dest: &SocketAddr, total: usize) -> usize {
        match &self.frag {
            Some(f) if total > f.link.payload => {
                if self.local.as_ref().is_some_and(|l| l.reaches(dest.ip())) {
                    1
                } else {
                    f.link.count(total).max(1)
                }
            }
            _ => 1,
        }
    }

    /// Sends `bytes` to `dest` in fragments when the link needs them (the injector's and
    /// unreliable datagrams; the transport's go out in `transmit_queued`'s batches). Returns
    /// whether the socket took any of it.
    fn send_datagram(&mut self, dest: &SocketAddr, bytes: &[u8]) -> bool {
        let count = self.fragments_for(dest, bytes.len());
        let Some(f) = self.frag.as_mut().filter(|_| count > 1) else {
            return self.sock.send_batch(&[(dest, [bytes, &[], &[]])]) > 0;
        };
        let id = f.new_id();
        let mut hdrs = [[0u8; fragment::HDR]; fragment::MAX_COUNT];
        for (k, h) in hdrs.iter_mut().enumerate().take(count) {
            *h = f.link.header(k, count, id);
        }
        let mut batch = self.sock.batch(count);
        for (h, [a, b]) in hdrs.iter().zip(f.link.pieces([bytes, &[]])) {
            batch.push(dest, [&h[..], a, b]);
        }
        self.sock.send_prepared(&batch) > 0
    }

    /// Hands a datagram to the fault injector, in the fragments the link needs: each is
    /// lost, repeated, damaged or delayed on its own, as on a real link.
    fn inject_datagram(&mut self, now: Time, dest: SocketAddr, bytes: &[u8]) {
        let count = self.fragments_for(&dest, bytes.len());
        let Some(f) = self.frag.as_mut().filter(|_| count > 1) else {
            self.inject(now, dest, bytes);
            return;
        };
        let (id, link) = (f.new_id(), f.link);
        for (k, [a, b]) in link.pieces([bytes, &[]]).enumerate() {
            let h = link.header(k, count, id);
            self.inject(now, dest, &[&h[..], a, b].concat());
        }
    }

    /// Puts a datagram on the wire, through the fault injector when one is configured.
    fn inject(&mut self, now: Time, dest: SocketAddr, bytes: &[u8]) {
        if let Some(inj) = self.injector.as_mut() {
            let heap = &mut self.delayed;
            inj.apply(bytes, |b, delay| {
                heap.push(core::cmp::Reverse((now + delay, SocketAddrOrd(dest), b)))
            });
        }
    }

    /// Puts what the transport queued on the wire. Inline, the check that nothing is queued
    /// (every poll, most of them with nothing to send): the call, the frame of the send lists
    /// and the empty walk were 60 instructions of an empty poll (callgrind).
    #[inline]
    fn transmit(&mut self, now: Time) {
        if self.injector.is_none() && !self.t.has_transmits() {
            self.socket_full = false;
            return;
        }
        self.transmit_queued(now);
    }

    fn transmit_queued(&mut self, now: Time) {
        // Faulty network: everything goes through the injector and its delay queue.
        if self.injector.is_some() {
            while let Some(t) = self.t.poll_transmit() {
                let Some((dest, parts)) = self.t.transmit_bytes(&t) else {
                    continue;
                };
                let (dest, bytes) = (*dest, parts.concat());
                self.inject_datagram(now, dest, &bytes);
            }
            while let Some(core::cmp::Reverse((t, _, _))) = self.delayed.peek() {
                if *t > now {
                    break;
                }
                let Some(core::cmp::Reverse((_, SocketAddrOrd(dest), b))) = self.delayed.pop()
                else {
                    break;
                };
                // Loss at the socket is acceptable here: the transport recovers.
                self.sock.send_batch(&[(&dest, [&b[..], &[], &[]])]);
            }
            return;
        }
        // With fragments, a batch holds whole GSO runs (`Fragmenting::run`: 40 fragments,
        // eight datagrams): 64 items made runs of 40 and 20, a third more messages through
        // the stack and the link for the same bytes (over a veth pair, tagged 1 MiB sends
        // went 1.14x as fast, run by run, with every run full).
        let cap = self.frag.as_ref().map_or(SEND_BATCH, |f| {
            (SEND_BATCH / f.run * f.run).max(fragment::MAX_COUNT)
        });
        // A lone datagram that goes whole (an answer, an ack: the latency path) is sent as it
        // is: a batch's lists cost each round trip of an efa ping-pong some 130 instructions
        // (callgrind).
        if let (1, Some(t)) = (self.t.transmits().len(), self.t.transmits().next()) {
            let sent = match self.t.transmit_bytes(t) {
                Some((dest, [a, b])) if self.fragments_for(dest, a.len() + b.len()) == 1 => {
                    self.sock.send_batch(&[(dest, [a, b, &[]])])
                }
                Some(_) => usize::MAX,
                // Settled since it was queued.
                None => 1,
            };
            if sent != usize::MAX {
                self.t.consume_transmits(sent);
                self.socket_full = sent == 0;
                return;
            }
        }
        let run = self.frag.as_ref().map_or(SEND_BATCH, |f| f.run);
        loop {
            // The transport's queue is read in place and only what went out is taken from it:
            // moved into a batch of its own, each entry was read back right after its copy was
            // stored (a stall per datagram in `perf annotate`), and what the socket refused had
            // to be kept aside. No allocation per batch: the lists live on the stack, and each
            // datagram becomes its iovecs as it is read (`SendBatch`).
            // Fragments' headers, one per datagram at most, written only where used: zeroing
            // them all was a 512-byte memset on every lone answer's send.
            let mut frag_hdrs =
                [const { MaybeUninit::<[u8; fragment::HDR]>::uninit() }; SEND_BATCH];
            let mut free_hdrs = &mut frag_hdrs[..];
            let mut batch = self.sock.batch(run);
            // For each datagram, how many queue entries it and those before it took (entries
            // of datagrams settled since are skipped).
            let mut upto = StackList::<usize, SEND_BATCH>::new();
            let mut examined = 0;
            for t in self.t.transmits() {
                let item = self.t.transmit_bytes(t);
                let count = item.map_or(1, |(dest, [a, b])| {
                    self.fragments_for(dest, a.len() + b.len())
                });
                // A datagram's fragments go in one batch.
                if batch.len() + count > cap {
                    break;
                }
                examined += 1;
                let Some((dest, parts)) = item else {
                    continue;
                };
                if count == 1 {
                    batch.push(dest, [parts[0], parts[1], &[]]);
                    upto.push(examined);
                    continue;
                }
                let Some(f) = self.frag.as_mut() else {
                    unreachable!("fragments only with fragmentation on")
                };
                let id = f.new_id();
                for (k, [a, b]) in f.link.pieces(parts).enumerate() {
                    let (h, rest) = core::mem::take(&mut free_hdrs)
                        .split_first_mut()
                        .expect("a header for every datagram");
                    free_hdrs = rest;
                    let h = h.write(f.link.header(k, count, id));
                    batch.push(dest, [&h[..], a, b]);
                    // The datagram is taken from the queue only with its last fragment: one
                    // whose fragments the socket took in part goes again whole, with a new id.
                    upto.push(if k + 1 == count {
                        examined
                    } else {
                        examined - 1
                    });
                }
            }
            if examined == 0 {
                self.socket_full = false;
                return;
            }
            let n = batch.len();
            let sent = self.sock.send_prepared(&batch);
            if sent < n {
                // The socket buffer is full: the rest stays queued, in order, for the next poll.
                let taken = sent.checked_sub(1).map_or(0, |i| upto.as_slice()[i]);
                self.t.consume_transmits(taken);
                self.socket_full = true;
                return;
            }
            self.t.consume_transmits(examined);
            // Everything went out: done, without setting up another batch to find that.
            if !self.t.has_transmits() {
                self.socket_full = false;
                return;
            }
        }
    }

    #[inline]
    fn send_unreliable(&mut self, now: Time) {
        if !self.unreliable.is_empty() {
            self.send_unreliable_queued(now);
        }
    }

    fn send_unreliable_queued(&mut self, now: Time) {
        while let Some((dest, wr_id, buf)) = self.unreliable.pop_front() {
            if self.injector.is_some() {
                self.inject_datagram(now, dest, &buf);
            } else if !self.send_datagram(&dest, &buf) {
                self.unreliable.push_front((dest, wr_id, buf));
                return;
            }
            self.unreliable_done.push_back((wr_id, buf));
        }
    }
}

impl Device for UdpDevice {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn path_mtu(&self, peer: &EfaAddr) -> usize {
        self.path_mtu_ip(peer.ip())
    }

    fn plain_mtu(&self) -> usize {
        match &self.frag {
            Some(f) => self.mtu.min(f.link.payload - HEADROOM).max(MIN_MTU),
            None => self.mtu,
        }
    }

    fn addr(&self) -> EfaAddr {
        self.addr
    }

    fn max_send(&self) -> usize {
        self.max_send
    }

    fn max_recv(&self) -> usize {
        self.max_recv
    }

    fn post_send(
        &mut self,
        dest: EfaAddr,
        buf: Vec<u8>,
        len: usize,
        tail: IoVec,
        wr_id: u64,
    ) -> std::result::Result<(), (Errno, Vec<u8>)> {
        let route = self.route(&dest);
        if len + tail.len() > route.path_mtu {
            return Err((Errno::MSGSIZE, buf));
        }
        if self.sends >= self.max_send {
            return Err((Errno::AGAIN, buf));
        }
        self.sends += 1;
        let now = self.send_time(HEADROOM + len);
        // The buffer stays whole: it comes back for reuse without being zeroed again.
        self.t
            .send_prefix_to(now, route.peer, wr_id, buf, HEADROOM + len, tail);
        Ok(())
    }

    fn post_send_head(
        &mut self,
        dest: EfaAddr,
        head_len: usize,
        tail: IoVec,
        wr_id: u64,
        write: &mut dyn FnMut(&mut [u8]),
    ) -> std::result::Result<(), Errno> {
        let route = self.route(&dest);
        if head_len + tail.len() > route.path_mtu {
            return Err(Errno::MSGSIZE);
        }
        if self.sends >= self.max_send {
            return Err(Errno::AGAIN);
        }
        self.sends += 1;
        let now = self.send_time(HEADROOM + head_len);
        self.t
            .send_head_to(now, route.peer, wr_id, head_len, tail, write);
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
        if self.unreliable.len() >= self.max_send {
            return Err((Errno::AGAIN, buf));
        }
        buf.truncate(HEADROOM + len);
        self.t.unreliable(
            PeerKey {
                addr: dest.socket(),
                qkey: dest.qkey,
            },
            &mut buf,
        );
        self.unreliable.push_back((dest.socket(), wr_id, buf));
        let now = self.now();
        self.send_unreliable(now);
        Ok(())
    }

    fn post_recv(
        &mut self,
        mut buf: Vec<u8>,
        wr_id: u64,
    ) -> std::result::Result<(), (Errno, Vec<u8>)> {
        if self.recvs.len() >= self.max_recv {
            return Err((Errno::AGAIN, buf));
        }
        buf.resize(recv_buf_len(self.mtu), 0);
        self.recvs.push_back((wr_id, buf));
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) {
        self.poll_placed(out, max, &[], crate::sys::os::monotonic_ns());
    }

    /// Runs coalesced by GRO arrive whole, so only a device without GRO (loopback) places;
    /// nor one whose datagrams come in fragments.
    fn places(&self) -> bool {
        !self.gro && self.frag.is_none()
    }

    fn poll_placed(
        &mut self,
        out: &mut Vec<Completion>,
        max: usize,
        place: &[Placement],
        monotonic: u64,
    ) {
        // The upper layer handled what the last poll handed up: those credits are back.
        self.run_credits -= core::mem::take(&mut self.run_credits_up);
        if !self.held.is_empty() {
            out.append(&mut self.held);
            self.held_signal.drain();
        }
        let now = self.since_origin(monotonic);
        // Acks that came on data since the last poll, before anything new: their sends'
        // completions go up in this poll.
        self.t.settle_acks();
        // Acks for what arrived wait for `flush`, at the end of the caller's pass: answers the
        // caller sends in that pass carry them.
        self.receive(now, out, place);
        self.run_credits_up = self.run_credits;
        self.t.handle_timeout(now);
        self.transmit(now);
        self.send_unreliable(now);
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
        // A timer that fired (someone was about to wait: `prepare_wait`) is drained and set
        // for the next deadline; otherwise the timer is left alone, so that an application
        // polling its CQ pays no timer system calls.
        if self.armed.is_some_and(|a| a <= now) {
            let next = self.next_deadline();
            self.arm(now, next);
        }
    }

    fn prepare_wait(&mut self) {
        self.t.settle_acks();
        let now = self.now();
        // A wake may be for the first socket's datagrams: the next poll reads it.
        self.first_due = 0;
        // Completions not yet handed up (those of acks kept until now, or of the ack timer's
        // `flush_all`) are the next poll's: the timer wakes the waiter for them at once.
        let next = if self.t.has_completions() {
            Some(now)
        } else {
            self.next_deadline()
        };
        self.arm(now, next);
    }

    fn flush(&mut self) -> bool {
        // Every library call ends here: with nothing owed or queued, not even the clock is read.
        let owed = self.t.acks_owed();
        if !owed && !self.t.has_transmits() {
            return false;
        }
        let now = self.now();
        let held = owed && self.t.flush_acks_delaying(now);
        if self.t.has_transmits() {
            self.transmit(now);
            // The answer is out: now the acks that came with what it answers (`defer_acks`);
            // the room they free may send more at once.
            self.t.settle_acks();
            if self.t.has_transmits() {
                self.transmit(now);
            }
        }
        held
    }

    fn flush_posted(&mut self) -> bool {
        // Only while the socket takes everything at once (no injector, not full) and no ack
        // is owed: held datagrams then delay nothing but themselves.
        if self.injector.is_none()
            && !self.socket_full
            && !self.t.acks_owed()
            && self.t.may_hold(SEND_BATCH)
        {
            return true;
        }
        self.flush()
    }

    fn flush_all(&mut self) {
        self.t.settle_acks();
        self.t.flush_acks();
        if self.t.has_transmits() {
            let now = self.now();
            self.transmit(now);
        }
    }

    fn service(&mut self) {
        self.t.settle_acks();
        let now = self.now();
        let before = self.held.len();
        let mut held = core::mem::take(&mut self.held);
        self.receive(now, &mut held, &[]);
        self.held = held;
        self.t.handle_timeout(now);
        self.send_unreliable(now);
        self.flush_all();
        if before == 0 && !self.held.is_empty() {
            self.held_signal.signal();
        }
    }

    fn send_burst(&mut self, on: bool) {
        // Spent from the start: the burst's first send reads the clock.
        self.burst = on.then_some((0, SEND_CLOCK_USES, 0));
    }

    fn return_run(&mut self, buf: Vec<u8>) {
        // Kept while fewer spares wait than one poll can hand up (a run held longer is
        // dropped): with fewer, the runs past them were freed and made again, zeroed, on the
        // next poll (callgrind, both-ways writes over a veth pair: 151 of 64 KiB in 2,384
        // polls, 2.4 % of the process's instructions).
        let most = self.rx_bufs.len() * RECV_BATCHES_PER_POLL;
        if self.gro && buf.len() == GRO_BUF && self.spare_runs.len() < most {
            self.spare_runs.push(buf);
        }
    }

    fn set_rnr_retry(&mut self, n: u32) {
        self.t.set_rnr_retry(n);
    }

    fn wait_fd(&self) -> Option<RawFd> {
        Some(self.wait.raw())
    }

    fn stats(&self) -> srd::Stats {
        let f = self.frag.as_ref();
        srd::Stats {
            dropped_too_big: self.too_big.count,
            placed: self.placed,
            fragmented: f.map_or(0, |f| f.sent),
            joined_in_run: f.map_or(0, |f| f.joined_in_run),
            left_in_pieces: f.map_or(0, |f| f.left_in_pieces),
            joined_apart: f.map_or(0, |f| f.apart.joined),
            fragments_dropped: f.map_or(0, |f| f.apart.dropped),
            ..self.t.stats()
        }
    }

    fn abandon(&mut self, dest: EfaAddr) {
        self.t.abandon(
            PeerKey {
                addr: dest.socket(),
                qkey: dest.qkey,
            },
            Status::Unreachable,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Sends 16 bytes of `byte` to `to` (work request `byte`) and flushes.
    fn send16(d: &mut UdpDevice, to: EfaAddr, byte: u8) {
        let mut buf = vec![0u8; HEADROOM + 16];
        buf[HEADROOM..].fill(byte);
        d.post_send(to, buf, 16, IoVec::EMPTY, u64::from(byte))
            .unwrap();
        d.flush_all();
    }

    /// Two devices on loopback with 4 receives posted each, after `a` sent `b` 16 bytes of 1
    /// (work request 1).
    fn pair_after_a_first_send() -> (UdpDevice, UdpDevice) {
        let cfg = DeviceConfig::default();
        let mut a = UdpDevice::open(&lo(), 0, &cfg).unwrap();
        let mut b = UdpDevice::open(&lo(), 0, &cfg).unwrap();
        for i in 0..4 {
            a.post_recv(Vec::new(), i).unwrap();
            b.post_recv(Vec::new(), i).unwrap();
        }
        send16(&mut a, b.addr(), 1);
        (a, b)
    }

    /// Whether `d`'s wait fd, prepared as a blocking CQ read prepares it, wakes within 3 s.
    fn wakes(d: &mut UdpDevice) -> bool {
        let waiter = Epoll::new().unwrap();
        waiter.add(d.wait_fd().unwrap()).unwrap();
        d.prepare_wait();
        waiter.wait(3000)
    }

    fn lo() -> UdpDeviceInfo {
        discover(None, 1, None)
            .into_iter()
            .find(|d| d.iface.loopback && d.iface.addr.is_ipv4())
            .expect("loopback device")
    }

    fn pump(
        a: &mut UdpDevice,
        b: &mut UdpDevice,
        out: &mut Vec<Completion>,
        until: impl Fn(&[Completion]) -> bool,
    ) {
        let t = Instant::now();
        while !until(out) {
            a.poll(out, 256);
            b.poll(out, 256);
            assert!(t.elapsed().as_secs() < 20, "timed out");
        }
    }

    /// Sends 3,000 datagrams of 1 to `info.mtu` bytes from one device on `info` to another,
    /// each posted receive handed back at once, and checks every byte of every datagram and
    /// that each arrives once. Returns the sender's and receiver's stats, and the runs the
    /// receiver handed up.
    fn transfer_exactly(
        info: &UdpDeviceInfo,
        faults: Option<Faults>,
    ) -> (srd::Stats, srd::Stats, usize, bool) {
        let cfg = DeviceConfig {
            faults,
            rnr_retry: 7,
            ..DeviceConfig::default()
        };
        let max = info.mtu;
        let mut a = UdpDevice::open(info, 0, &cfg).unwrap();
        let mut b = UdpDevice::open(info, 0, &cfg).unwrap();
        const N: usize = 3000;
        for i in 0..64 {
            b.post_recv(Vec::new(), i).unwrap();
        }
        let dest = b.addr();
        let size = |i: usize| (1 + (i * 131) % max).max(8);
        for i in 0..N {
            let mut buf = vec![0u8; HEADROOM + max];
            let len = size(i);
            for (k, x) in buf[HEADROOM..HEADROOM + len].iter_mut().enumerate() {
                *x = (k ^ i) as u8;
            }
            buf[HEADROOM..HEADROOM + 8].copy_from_slice(&(i as u64).to_le_bytes());
            a.post_send(dest, buf, len, IoVec::EMPTY, i as u64).unwrap();
        }
        let mut out = Vec::new();
        let mut got = vec![false; N];
        let mut sent = 0;
        let mut runs = 0;
        let t = Instant::now();
        while sent < N || got.iter().any(|g| !g) {
            a.poll(&mut out, 256);
            b.poll(&mut out, 256);
            // The end of a pass, as the RDM endpoint's lock release does: acks go out.
            a.flush();
            b.flush();
            let mut run = Vec::new();
            for c in out.drain(..) {
                let (posted, off, len, src) = match c {
                    Completion::Send { status, .. } => {
                        assert_eq!(status, Ok(()));
                        sent += 1;
                        continue;
                    }
                    Completion::Run { buf } => {
                        runs += 1;
                        b.return_run(core::mem::replace(&mut run, buf));
                        continue;
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
                    } => (Some((wr_id, buf)), off, len, src),
                    Completion::RecvInRun { off, len, src } => (None, off, len, src),
                    Completion::RecvInPieces { pieces, src } => {
                        // Read where the pieces lie, and joined: the same bytes.
                        let parts: Vec<u8> = pieces
                            .parts(&run, 0..pieces.len)
                            .flatten()
                            .copied()
                            .collect();
                        let r = pieces.join(&mut run).expect("in the latest run");
                        assert_eq!(run[r.clone()], parts[..]);
                        (None, r.start, r.len(), src)
                    }
                };
                let bytes = match &posted {
                    Some((_, buf)) => &buf[..],
                    None => &run[..],
                };
                assert_eq!(src, a.addr());
                let i = u64::from_le_bytes(bytes[off..off + 8].try_into().unwrap()) as usize;
                assert!(!got[i], "datagram {i} delivered twice");
                got[i] = true;
                assert_eq!(len, size(i));
                for (k, x) in bytes[off + 8..off + len].iter().enumerate() {
                    assert_eq!(*x, ((k + 8) ^ i) as u8, "byte {k} of datagram {i}");
                }
                if let Some((wr_id, buf)) = posted {
                    b.post_recv(buf, wr_id).unwrap();
                }
            }
            b.return_run(run);
            assert!(
                t.elapsed().as_secs() < 60,
                "transfer stalled (faults {faults:?})"
            );
        }
        (a.stats(), b.stats(), runs, b.gro)
    }

    #[test]
    fn loopback_transfer_is_exact_with_and_without_faults() {
        for faults in [None, Some(SOME_FAULTS)] {
            let info = UdpDeviceInfo { mtu: 8000, ..lo() };
            let (st, _, runs, gro) = transfer_exactly(&info, faults);
            if faults.is_some() {
                assert!(st.retransmits > 0);
            }
            // 8,000-byte datagrams take the GRO path where the kernel has it.
            assert_eq!(runs > 0, gro, "runs handed up: {runs}");
        }
    }

    const SOME_FAULTS: Faults = Faults {
        loss: 5.0,
        dup: 2.0,
        corrupt: 2.0,
        delay_us: 200,
        seed: 3,
    };

    /// A device like one on a 1,500-byte Ethernet link, on loopback's address, whose
    /// datagrams go out in fragments: the MTU one below its own, so that peers at this
    /// host's addresses are not reached over loopback's larger datagrams (`LocalPath`).
    fn fragmenting_device() -> UdpDeviceInfo {
        let lo = lo();
        let iface = Iface {
            mtu: 1500,
            loopback: false,
            ..lo.iface.clone()
        };
        let (mtu, fragments) = device_mtu(&iface, fragment::DEFAULT_COUNT, None);
        assert_eq!(
            (mtu, fragments),
            (5 * (1472 - fragment::HDR) - HEADROOM, 5),
            "five fragments of a 1,472-byte UDP payload"
        );
        UdpDeviceInfo {
            name: "srd_eth_like".into(),
            iface,
            mtu: mtu - 1,
            fragments,
            ..lo
        }
    }

    /// Datagrams larger than the link are sent in fragments and arrive exact and once: joined
    /// in place when a GRO run holds them (no faults: the sender's GSO runs end where
    /// datagrams do), and copied together when they arrive apart (the injector sends each
    /// fragment alone, losing, repeating, damaging and delaying them one by one).
    #[test]
    fn fragments_carry_datagrams_larger_than_the_link_exactly() {
        let info = fragmenting_device();
        let (a, b, _, gro) = transfer_exactly(&info, None);
        assert!(a.fragmented > 1000, "sent in fragments: {a:?}");
        // Every datagram larger than the link came joined or left in its fragments (a
        // repeated one may be joined and then refused as a duplicate), and nothing was joined
        // that was not sent.
        let joined = b.joined_in_run + b.left_in_pieces + b.joined_apart;
        assert!(joined >= b.delivered - small(&info), "{b:?}");
        assert!(joined <= a.fragmented, "{a:?} {b:?}");
        if gro {
            // Their payloads outside the checksum: the transport reads no more than header
            // and trailer, and the datagrams go up where their fragments lie.
            assert!(b.left_in_pieces > b.joined_apart, "{b:?}");
            assert_eq!(b.joined_in_run, 0, "{b:?}");
        }
        let (a, b, _, _) = transfer_exactly(&info, Some(SOME_FAULTS));
        assert!(a.retransmits > 0 && a.fragmented > 1000, "{a:?}");
        assert!(b.joined_apart > 0 && b.fragments_dropped > 0, "{b:?}");
        // The injector damages payloads: the checksum covers them, so a datagram is joined
        // whole for the transport to check, never handed up in pieces.
        assert_eq!(b.left_in_pieces, 0, "{b:?}");
    }

    /// Of `transfer_exactly`'s datagrams, those the link takes whole.
    fn small(info: &UdpDeviceInfo) -> u64 {
        let link = packet_mtu(info.iface.mtu, info.iface.addr);
        (0..3000)
            .filter(|i| (1 + (i * 131) % info.mtu).max(8) <= link)
            .count() as u64
    }

    /// A window of datagrams leaves in GSO runs that are all whole: a batch ends where a run
    /// does (40 fragments), not at 64 fragments, which cut every other run short. Datagrams
    /// of four full fragments (a device that takes five, its MTU lowered), so that the
    /// fragments of a run are all of one size and a run holds ten datagrams.
    #[test]
    fn fragments_leave_in_whole_runs() {
        let five = fragmenting_device();
        let info = UdpDeviceInfo {
            mtu: 4 * (1472 - fragment::HDR) - HEADROOM,
            ..five
        };
        let cfg = DeviceConfig {
            faults: None,
            ..DeviceConfig::default()
        };
        let mut a = UdpDevice::open(&info, 0, &cfg).unwrap();
        let mut b = UdpDevice::open(&info, 0, &cfg).unwrap();
        assert!(b.gro, "UDP GRO (Linux 5.0 and later)");
        assert_eq!(a.frag.as_ref().map(|f| f.run), Some(40));
        for i in 0..64 {
            b.post_recv(Vec::new(), i).unwrap();
        }
        // Within the initial window (32 datagrams): all of them leave in one flush.
        const N: usize = 30;
        for i in 0..N {
            let buf = vec![i as u8; HEADROOM + info.mtu];
            a.post_send(b.addr(), buf, info.mtu, IoVec::EMPTY, i as u64)
                .unwrap();
        }
        a.flush();
        assert_eq!(a.stats().fragmented, N as u64, "each went in fragments");
        let mut out = Vec::new();
        let mut per_run: Vec<usize> = Vec::new();
        let t = Instant::now();
        while per_run.iter().sum::<usize>() < N {
            b.poll(&mut out, 256);
            for c in out.drain(..) {
                match c {
                    Completion::Run { buf } => {
                        per_run.push(0);
                        b.return_run(buf);
                    }
                    // Their payloads outside the checksum: left in their fragments.
                    Completion::RecvInPieces { pieces, .. } => {
                        assert_eq!(pieces.len, info.mtu);
                        *per_run.last_mut().expect("a run first") += 1;
                    }
                    c => panic!("only runs here: {c:?}"),
                }
            }
            assert!(t.elapsed().as_secs() < 10, "received {per_run:?}");
        }
        assert_eq!(per_run, [10, 10, 10]);
    }

    /// Unreliable datagrams (DGRAM endpoints) larger than the link go in fragments too, and
    /// arrive whole and exact (loopback loses none).
    #[test]
    fn unreliable_datagrams_larger_than_the_link_arrive_whole() {
        let info = fragmenting_device();
        let cfg = DeviceConfig {
            faults: None,
            ..DeviceConfig::default()
        };
        let mut a = UdpDevice::open(&info, 0, &cfg).unwrap();
        let mut b = UdpDevice::open(&info, 0, &cfg).unwrap();
        for i in 0..8 {
            b.post_recv(Vec::new(), i).unwrap();
        }
        let sizes = [100, 1448, 1449, 4000, info.mtu];
        for (i, &n) in sizes.iter().enumerate() {
            let mut buf = vec![0u8; HEADROOM + n];
            for (k, x) in buf[HEADROOM..].iter_mut().enumerate() {
                *x = (k * 7 + i) as u8;
            }
            a.post_send_unreliable(b.addr(), buf, n, i as u64).unwrap();
        }
        let mut out = Vec::new();
        let mut got = Vec::new();
        let t = Instant::now();
        while got.len() < sizes.len() {
            a.poll(&mut out, 64);
            b.poll(&mut out, 64);
            let mut run = Vec::new();
            for c in out.drain(..) {
                match c {
                    Completion::Run { buf } => {
                        crate::prov::efa::device::next_run(&mut b, &mut run, buf)
                    }
                    Completion::Send { status, .. } => assert_eq!(status, Ok(())),
                    c => got.push(received(c, &run).1),
                }
            }
            assert!(
                t.elapsed().as_secs() < 10,
                "got {} of {}",
                got.len(),
                sizes.len()
            );
        }
        got.sort_by_key(Vec::len);
        for (i, (&n, d)) in sizes.iter().zip(&got).enumerate() {
            assert_eq!(d.len(), n);
            assert!(
                d.iter().enumerate().all(|(k, x)| *x == (k * 7 + i) as u8),
                "datagram {i}"
            );
        }
        assert_eq!(a.stats().fragmented, 3, "the three larger than the link");
    }

    /// A peer on loopback's larger path takes datagrams whole, and a device without
    /// fragments never sends them: `FI_EFA_UDP_FRAGMENTS=1` gives the link's own MTU.
    #[test]
    fn fragments_only_where_the_link_needs_them() {
        let frag = fragmenting_device();
        let d = UdpDevice::open(&frag, 0, &DeviceConfig::default()).unwrap();
        let far: SocketAddr = SocketAddr::from(([192, 0, 2, 7], 9));
        assert_eq!(d.fragments_for(&far, 1472), 1);
        assert_eq!(d.fragments_for(&far, 1473), 2);
        assert_eq!(d.fragments_for(&far, frag.mtu + HEADROOM), 5);
        assert_eq!(d.plain_mtu(), 1472 - HEADROOM);
        // The same link at its own MTU reaches this host's addresses over loopback.
        let near = UdpDeviceInfo {
            mtu: frag.mtu + 1,
            ..frag.clone()
        };
        let d = UdpDevice::open(&near, 0, &DeviceConfig::default()).unwrap();
        if d.local.is_some() {
            assert_eq!(d.fragments_for(&d.addr.socket(), near.mtu + HEADROOM), 1);
        }
        assert_eq!(d.fragments_for(&far, near.mtu + HEADROOM), 5);
        let (mtu, n) = device_mtu(&frag.iface, 1, None);
        assert_eq!((mtu, n), (1472 - HEADROOM, 1));
        let (mtu, n) = device_mtu(&lo().iface, 5, None);
        assert_eq!((mtu, n), (lo().mtu, 1), "loopback takes large datagrams");
        let jumbo = Iface {
            mtu: 9000,
            ..frag.iface.clone()
        };
        assert_eq!(
            device_mtu(&jumbo, 5, None).1,
            1,
            "two 9 KiB fragments pass GRO's 16 KiB"
        );
        assert_eq!(device_mtu(&frag.iface, 5, Some(4000)), (4000, 5));
    }

    /// Sends to a peer go through a socket connected to it, whose datagrams arrive there: the
    /// device's wait fd (what blocking CQ reads wait on) becomes readable when that peer's
    /// answer comes, and the answer is received.
    #[test]
    fn the_wait_fd_wakes_for_the_connected_peer() {
        let (mut a, mut b) = pair_after_a_first_send();
        assert_eq!(
            a.sock.connected_peer().map(|p| p.0),
            Some(b.addr().socket())
        );
        // b receives and acknowledges at once; a takes the ack: nothing of a's is pending,
        // so no timer of a's can wake it below.
        let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
        let t = Instant::now();
        while !out_a.iter().any(|c| matches!(c, Completion::Send { .. })) {
            b.poll(&mut out_b, 16);
            b.flush_all();
            a.poll(&mut out_a, 16);
            assert!(
                t.elapsed().as_secs() < 10,
                "a's datagram never acknowledged"
            );
        }
        assert!(out_b.iter().any(|c| matches!(c, Completion::Recv { .. })));
        // b answers; a does not poll until its wait fd says so.
        send16(&mut b, a.addr(), 2);
        assert!(
            wakes(&mut a),
            "the wait fd did not wake for the connected peer's datagram"
        );
        let mut out = Vec::new();
        let t = Instant::now();
        loop {
            a.poll(&mut out, 16);
            if let Some(Completion::Recv {
                buf, off, len, src, ..
            }) = out.iter().find(|c| matches!(c, Completion::Recv { .. }))
            {
                assert_eq!(*src, b.addr());
                assert_eq!(&buf[*off..*off + *len], &[2u8; 16][..]);
                break;
            }
            assert!(t.elapsed().as_secs() < 10, "a never received the answer");
        }
    }

    /// An ack that came on data is kept past the poll that received the data; a wait
    /// prepared after it was applied (here by `flush_all`, as the ack timer's thread would)
    /// wakes at once for the completion it gave, which no socket or timer would announce.
    #[test]
    fn a_wait_wakes_for_the_completion_of_a_kept_ack() {
        let (mut a, mut b) = pair_after_a_first_send();
        let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
        // A poll sets a's timers for its datagram in flight (`Peer::wake`): the poll that
        // receives the answer then has nothing due.
        a.poll(&mut out_a, 16);
        let t = Instant::now();
        while !out_b.iter().any(|c| matches!(c, Completion::Recv { .. })) {
            b.poll(&mut out_b, 16);
            assert!(t.elapsed().as_secs() < 10, "b never received");
        }
        // b's answer carries its ack of a's datagram (its buffer has room for it, as the
        // RDM layer's have).
        let buf = vec![2u8; HEADROOM + 16 + srd::wire::ACK_TRAILER];
        b.post_send(a.addr(), buf, 16, IoVec::EMPTY, 2).unwrap();
        b.flush();
        assert_eq!(b.t.stats().acks_piggybacked, 1);
        while !out_a.iter().any(|c| matches!(c, Completion::Recv { .. })) {
            a.poll(&mut out_a, 16);
            assert!(t.elapsed().as_secs() < 10, "a never received the answer");
        }
        assert!(
            !out_a.iter().any(|c| matches!(c, Completion::Send { .. })),
            "the ack on the answer is kept past the poll that received it"
        );
        assert!(a.t.acks_kept_in());
        a.flush_all();
        assert!(wakes(&mut a), "no wake for the kept ack's completion");
        out_a.clear();
        a.poll(&mut out_a, 16);
        assert!(
            matches!(
                out_a.as_slice(),
                [Completion::Send {
                    wr_id: 1,
                    status: Ok(()),
                    ..
                }]
            ),
            "{out_a:?}"
        );
    }

    /// While only the connected peer sends, the first socket is read less often
    /// (`FIRST_SOCKET_EVERY`); another peer's datagrams are still received, both by a device
    /// polled without pause and by the first poll after its wait fd woke.
    #[test]
    fn other_peers_are_heard_while_the_connected_one_is_the_only_sender() {
        let cfg = DeviceConfig::default();
        let mut a = UdpDevice::open(&lo(), 0, &cfg).unwrap();
        let b = UdpDevice::open(&lo(), 0, &cfg).unwrap();
        let mut c = UdpDevice::open(&lo(), 0, &cfg).unwrap();
        for i in 0..8 {
            a.post_recv(Vec::new(), i).unwrap();
        }
        send16(&mut a, b.addr(), 1);
        assert_eq!(
            a.sock.connected_peer().map(|p| p.0),
            Some(b.addr().socket())
        );
        let mut out = Vec::new();
        let received_from = |out: &[Completion], from: EfaAddr, byte: u8| {
            out.iter().any(|c| {
                matches!(c, Completion::Recv { buf, off, len, src, .. }
                    if *src == from && buf[*off..*off + *len] == [byte; 16])
            })
        };
        for (round, byte) in [(0, 3u8), (1, 4)] {
            // Polled empty until the first socket counts as quiet.
            let t = Instant::now();
            while !a.sock.first_socket_quiet() {
                a.poll(&mut out, 16);
                assert!(
                    t.elapsed().as_secs() < 10,
                    "the first socket never went quiet"
                );
            }
            // This poll still reads it (it was due) and sets when it is next.
            a.poll(&mut out, 16);
            out.clear();
            send16(&mut c, a.addr(), byte);
            if round == 0 {
                let t = Instant::now();
                while !received_from(&out, c.addr(), byte) {
                    a.poll(&mut out, 16);
                    assert!(t.elapsed().as_secs() < 10, "c's datagram never received");
                }
            } else {
                // As if the last read of the first socket were just now.
                a.first_due = a.now() + 60_000 * srd::MS;
                assert!(wakes(&mut a), "the wait fd did not wake for c's datagram");
                a.poll(&mut out, 16);
                assert!(
                    received_from(&out, c.addr(), byte),
                    "the poll after the wake missed c's datagram"
                );
            }
        }
    }

    /// A device on an Ethernet-like interface (MTU 1500) whose address is this host's own:
    /// peers there are reached over loopback, so datagrams to them may be as large as
    /// loopback's, both ways, and arrive whole; a datagram that large from any other address
    /// is still refused. (The interface is loopback's address described as Ethernet: what
    /// the device decides from is the address, not the wire.)
    #[test]
    fn peers_at_our_own_addresses_take_loopback_sized_datagrams() {
        let lo = lo();
        let eth = UdpDeviceInfo {
            name: "srd_eth_like".into(),
            iface: Iface {
                mtu: 1500,
                loopback: false,
                ..lo.iface.clone()
            },
            mtu: packet_mtu(1500, lo.iface.addr),
            ..lo.clone()
        };
        let cfg = DeviceConfig::default();
        let mut a = UdpDevice::open(&eth, 0, &cfg).unwrap();
        let mut b = UdpDevice::open(&eth, 0, &cfg).unwrap();
        assert_eq!(a.mtu(), 1500 - 28 - HEADROOM);
        let big = a.path_mtu(&b.addr());
        assert!(a.gro, "this kernel has UDP GRO");
        assert_eq!(
            big, lo.mtu,
            "loopback's packets to a peer at our own address"
        );
        let stranger = EfaAddr::from_socket(SocketAddr::from(([192, 0, 2, 77], 9)), 1);
        assert_eq!(a.path_mtu(&stranger), a.mtu());
        for i in 0..64 {
            b.post_recv(vec![0u8; HEADROOM + a.mtu()], i).unwrap();
        }
        const N: usize = 3000;
        let dest = b.addr();
        let mut sent_bytes = Vec::new();
        for i in 0..N {
            let len = big - (i * 37) % 5000;
            let mut buf = vec![0u8; HEADROOM + big];
            for (k, x) in buf[HEADROOM..HEADROOM + len].iter_mut().enumerate() {
                *x = (k * 7 + i) as u8;
            }
            sent_bytes.push(buf[HEADROOM..HEADROOM + len].to_vec());
            a.post_send(dest, buf, len, IoVec::EMPTY, i as u64).unwrap();
        }
        // One byte past loopback's size is refused at once.
        let over = vec![0u8; HEADROOM + big + 1];
        assert_eq!(
            a.post_send(dest, over, big + 1, IoVec::EMPTY, 999)
                .unwrap_err()
                .0,
            Errno::MSGSIZE
        );
        let mut out = Vec::new();
        let mut got = vec![false; N];
        let (mut sent, mut run) = (0, Vec::new());
        let t = Instant::now();
        while sent < N || got.iter().any(|g| !g) {
            a.poll(&mut out, 256);
            b.poll(&mut out, 256);
            a.flush();
            b.flush();
            for c in out.drain(..) {
                let (posted, pkt) = match c {
                    Completion::Send { status, .. } => {
                        assert_eq!(status, Ok(()));
                        sent += 1;
                        continue;
                    }
                    Completion::Run { buf } => {
                        crate::prov::efa::device::next_run(&mut b, &mut run, buf);
                        continue;
                    }
                    c => received(c, &run),
                };
                let i = sent_bytes
                    .iter()
                    .position(|s| *s == pkt)
                    .expect("a datagram arrived whole and exact");
                assert!(!got[i], "delivered once");
                got[i] = true;
                if let Some((wr_id, buf)) = posted {
                    b.post_recv(buf, wr_id).unwrap();
                }
            }
            assert!(t.elapsed().as_secs() < 20, "timed out");
        }
        assert_eq!(b.stats().dropped_too_big, 0);
    }

    /// A received datagram's bytes, and the posted buffer it took with its `wr_id` (a `Recv`'s,
    /// to be posted again; a `RecvInRun`, whose bytes are in `run`, takes none).
    fn received(c: Completion, run: &[u8]) -> (Option<(u64, Vec<u8>)>, Vec<u8>) {
        match c {
            Completion::RecvInRun { off, len, .. } => (None, run[off..off + len].to_vec()),
            Completion::Recv {
                wr_id,
                buf,
                off,
                len,
                ..
            } => {
                let pkt = buf[off..off + len].to_vec();
                (Some((wr_id, buf)), pkt)
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Two devices on loopback that give up on a receiver without buffers after one retry.
    fn quick_rnr_pair() -> (UdpDevice, UdpDevice) {
        let cfg = DeviceConfig {
            rnr_retry: 1,
            timeout_interval_us: 100,
            ..DeviceConfig::default()
        };
        let a = UdpDevice::open(&lo(), 0, &cfg).unwrap();
        (a, UdpDevice::open(&lo(), 0, &cfg).unwrap())
    }

    #[test]
    fn rnr_then_error_without_buffers() {
        let (mut a, mut b) = quick_rnr_pair();
        a.post_send(b.addr(), vec![0; HEADROOM + 10], 10, IoVec::EMPTY, 1)
            .unwrap();
        let mut out = Vec::new();
        pump(&mut a, &mut b, &mut out, |o| !o.is_empty());
        assert!(matches!(
            out[0],
            Completion::Send {
                wr_id: 1,
                status: Err(DevError::Rnr),
                ..
            }
        ));
    }

    /// A run's datagrams count against the posted receives for the poll that hands them up and
    /// take none of them: past the posted count, a run's datagrams are refused with RNR (their
    /// sender sends them again), and every buffer stays posted for the next poll. (Without GRO
    /// each datagram takes a buffer, which is posted again here: the same bound holds.)
    #[test]
    fn runs_count_against_posted_receives_and_take_none() {
        let cfg = DeviceConfig {
            rnr_retry: 7,
            timeout_interval_us: 100,
            ..DeviceConfig::default()
        };
        let info = UdpDeviceInfo { mtu: 1500, ..lo() };
        let mut a = UdpDevice::open(&info, 0, &cfg).unwrap();
        let mut b = UdpDevice::open(&info, 0, &cfg).unwrap();
        const POSTED: usize = 4;
        const N: usize = 40;
        for i in 0..POSTED {
            b.post_recv(Vec::new(), i as u64).unwrap();
        }
        let dest = b.addr();
        for i in 0..N {
            let buf = vec![i as u8; HEADROOM + 1000];
            a.post_send(dest, buf, 1000, IoVec::EMPTY, i as u64)
                .unwrap();
        }
        let (mut got, mut run, mut runs) = (vec![false; N], Vec::new(), 0);
        let mut out = Vec::new();
        let t = Instant::now();
        while got.iter().any(|g| !g) {
            a.poll(&mut out, 256);
            a.flush();
            out.clear();
            b.poll(&mut out, 256);
            b.flush();
            let mut delivered = 0;
            for c in out.drain(..) {
                let (posted, pkt) = match c {
                    Completion::Run { buf } => {
                        runs += 1;
                        crate::prov::efa::device::next_run(&mut b, &mut run, buf);
                        continue;
                    }
                    c => received(c, &run),
                };
                delivered += 1;
                let i = pkt[0] as usize;
                assert_eq!(pkt.len(), 1000);
                assert!(pkt.iter().all(|&x| x == i as u8), "datagram {i} exact");
                assert!(!got[i], "datagram {i} delivered once");
                got[i] = true;
                if let Some((wr_id, buf)) = posted {
                    b.post_recv(buf, wr_id).unwrap();
                }
            }
            assert!(
                delivered <= POSTED,
                "{delivered} in one poll, {POSTED} posted"
            );
            assert!(t.elapsed().as_secs() < 20, "timed out");
        }
        assert_eq!(runs > 0, b.gro, "runs handed up: {runs}");
        assert_eq!(b.recvs.len(), POSTED, "every buffer still posted");
        if b.gro {
            assert!(b.stats().rnr_sent > 0, "the rest of a run was refused");
        }
    }

    /// A send lent no buffer (`post_send_head`) completes with none. Refused until its retries
    /// run out, it gives back the packet as `post_send` takes it, which sent again arrives
    /// whole.
    #[test]
    fn a_head_send_gives_back_a_buffer_only_to_send_again() {
        let (mut a, mut b) = quick_rnr_pair();
        let head = [0x3Cu8; 32];
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let tail = IoVec::from_mut_slice(Vec::leak(data.clone()));
        let whole = [&head[..], &data[..]].concat();
        let is_send =
            |c: &Completion, id: u64| matches!(c, Completion::Send { wr_id, .. } if *wr_id == id);
        let mut out = Vec::new();
        let mut write = |b: &mut [u8]| b.copy_from_slice(&head);
        a.post_send_head(b.addr(), head.len(), tail, 1, &mut write)
            .unwrap();
        pump(&mut a, &mut b, &mut out, |o| {
            o.iter().any(|c| is_send(c, 1))
        });
        let Some(Completion::Send { status, buf, .. }) = out.pop() else {
            panic!("{out:?}")
        };
        assert_eq!(status, Err(DevError::Rnr));
        assert_eq!(buf.len(), HEADROOM + head.len());
        assert_eq!(&buf[HEADROOM..], &head[..]);
        for (id, again) in [(2, Some(buf)), (3, None)] {
            b.post_recv(vec![0; HEADROOM + 2000], 10 + id).unwrap();
            match again {
                Some(buf) => a.post_send(b.addr(), buf, head.len(), tail, id).unwrap(),
                None => a
                    .post_send_head(b.addr(), head.len(), tail, id, &mut write)
                    .unwrap(),
            }
            out.clear();
            pump(&mut a, &mut b, &mut out, |o| {
                o.iter().any(|c| is_send(c, id))
                    && o.iter().any(|c| matches!(c, Completion::Recv { .. }))
            });
            for c in &out {
                match c {
                    Completion::Recv { buf, off, len, .. } => {
                        assert_eq!(&buf[*off..off + len], &whole[..], "send {id}")
                    }
                    Completion::Send { status, buf, .. } => {
                        assert_eq!(*status, Ok(()));
                        // The buffer lent comes back; none was lent for a head.
                        assert_eq!(buf.is_empty(), id == 3, "send {id}");
                    }
                    c => panic!("{c:?}"),
                }
            }
        }
    }

    #[test]
    fn a_burst_shares_a_clock_reading_for_a_bounded_run_of_sends() {
        let mut d = UdpDevice::open(&lo(), 0, &DeviceConfig::default()).unwrap();
        let pause = || std::thread::sleep(std::time::Duration::from_millis(1));
        // Outside a burst every send reads the clock.
        let t0 = d.send_time(64);
        pause();
        assert!(d.send_time(64) > t0);
        d.send_burst(true);
        let first = d.send_time(64);
        pause();
        for i in 1..SEND_CLOCK_USES {
            assert_eq!(d.send_time(64), first, "send {i} of the burst");
        }
        let next = d.send_time(64);
        assert!(next > first, "read again after SEND_CLOCK_USES sends");
        pause();
        // Bytes copied into the buffers count too: a reading covers at most SEND_CLOCK_BYTES.
        assert_eq!(d.send_time(SEND_CLOCK_BYTES / 2), next);
        assert!(d.send_time(SEND_CLOCK_BYTES / 2) > next);
        d.send_burst(false);
        let after = d.send_time(64);
        pause();
        assert!(d.send_time(64) > after, "the burst ended");
        // A new burst starts from a fresh reading, not the last one's.
        d.send_burst(true);
        assert!(d.send_time(64) > after);
    }

    /// Arrivals past the posted receives wait in the socket for the next ones, not refused
    /// with RNR: a burst longer than the posted buffers costs its sender no back-off.
    #[test]
    fn a_burst_past_the_posted_receives_waits_for_them() {
        let cfg = DeviceConfig::default();
        let mut a = UdpDevice::open(&lo(), 0, &cfg).unwrap();
        let mut b = UdpDevice::open(&lo(), 0, &cfg).unwrap();
        const N: u64 = 24;
        for i in 0..N {
            a.post_send(b.addr(), vec![i as u8; HEADROOM + 10], 10, IoVec::EMPTY, i)
                .unwrap();
        }
        let mut out = Vec::new();
        a.poll(&mut out, 256);
        let (mut got, mut acked) = (0, 0);
        let t = Instant::now();
        while acked < N {
            // Four posted at a time: each poll takes what they hold and no more.
            for k in 0..4 {
                b.post_recv(vec![0; HEADROOM + 10], k).unwrap();
            }
            let mut rx = Vec::new();
            b.poll(&mut rx, 256);
            b.flush();
            let n = rx
                .iter()
                .filter(|c| matches!(c, Completion::Recv { .. }))
                .count();
            assert!(n <= 4, "{n} taken with four posted");
            got += n;
            // What was not taken keeps its posted buffer for the next poll.
            b.recvs.clear();
            let mut tx = Vec::new();
            a.poll(&mut tx, 256);
            for c in &tx {
                assert!(
                    matches!(c, Completion::Send { status: Ok(()), .. }),
                    "{c:?}"
                );
            }
            acked += tx.len() as u64;
            assert!(t.elapsed().as_secs() < 20, "timed out");
        }
        assert_eq!(got as u64, N);
        assert_eq!(b.stats().rnr_sent, 0, "nothing refused");
    }

    /// Ethernet-sized datagrams get a window as wide as one ack covers; loopback's 64 KiB
    /// ones get what fills `WINDOW_BYTES`.
    #[test]
    fn the_window_is_what_one_ack_covers_or_what_fills_the_byte_cap() {
        assert_eq!(
            window_for(packet_mtu(1500, IpAddr::from([10, 0, 0, 1]))),
            srd::wire::SACK_BITS
        );
        assert_eq!(
            window_for(packet_mtu(65536, IpAddr::from([127, 0, 0, 1]))),
            16
        );
        assert_eq!(window_for(usize::MAX / 2), 1);
    }

    #[test]
    fn dead_peer_is_unreachable() {
        let cfg = DeviceConfig::default();
        let mut a = UdpDevice::open(&lo(), 0, &cfg).unwrap();
        let gone = {
            let b = UdpDevice::open(&lo(), 0, &cfg).unwrap();
            b.addr()
        };
        a.t = Transport::new(
            Config {
                qkey: a.addr.qkey,
                unreachable: 300 * srd::MS,
                ..Config::default()
            },
            1,
        );
        a.post_send(gone, vec![0; HEADROOM + 10], 10, IoVec::EMPTY, 7)
            .unwrap();
        let mut out = Vec::new();
        let t = Instant::now();
        while out.is_empty() {
            a.poll(&mut out, 16);
            assert!(t.elapsed().as_secs() < 10);
        }
        assert!(matches!(
            out[0],
            Completion::Send {
                wr_id: 7,
                status: Err(DevError::Unreachable),
                ..
            }
        ));
    }
}
