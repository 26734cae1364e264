//! The device layer under the RDM protocol: what EFA gives it (efa-reference §10, last
//! paragraph) — reliable but unordered datagrams up to an MTU between (GID, QPN) pairs with a
//! QKEY check, completions with length and source, receiver-not-ready and unreachable errors.
//!
//! Devices: [`udp::UdpDevice`], the software SRD over UDP sockets (any Ethernet host),
//! [`sim::SimDevice`], the same transport over an in-memory network with a seeded fault
//! injector (tests), and [`verbs::VerbsDevice`], an SRD queue pair of an EFA NIC through
//! rdma-core loaded at run time (tests run it over an emulated NIC, `verbs::emul`). A device
//! that says so in its [`DeviceCaps`] also reads and writes registered memory of a peer
//! directly ([`Device::post_rdma`]); the RDM protocol uses that where both sides can, and
//! emulates one-sided operations with its own packets everywhere else.

pub mod faults;
pub mod fragment;
pub mod sim;
pub mod udp;
pub mod verbs;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::RawFd;

use super::srd;
use crate::core::Errno;
use crate::sys::mem::IoVec;

/// Bytes at the front of every send buffer reserved for the device's own header.
pub const HEADROOM: usize = srd::wire::DATA_HEADER;

/// The smallest MTU a device has: `FI_EFA_MTU_SIZE` is floored at it, and an interface whose
/// own MTU leaves less is given it anyway (IP fragments the rare datagram larger than such a
/// link). A packet of this size fits every peer, whatever its device: the RDM protocol sends
/// none larger to a peer whose handshake it has not seen (`rdm::peer::PRE_HANDSHAKE_PKT`).
pub const MIN_MTU: usize = 512;

/// Datagrams that arrived larger than the device's MTU (a peer that ignored the size we
/// advertise, or misconfigured): dropped, counted (`Stats::dropped_too_big`), and logged at
/// warn once per device, never a silent loss. The sender's transport is never acknowledged
/// and in the end reports the peer unreachable: an error completion, not a hang.
#[derive(Debug, Default)]
pub struct TooBig {
    pub count: u64,
}

impl TooBig {
    pub fn dropped(&mut self, me: &EfaAddr, from: &dyn fmt::Display, len: usize, mtu: usize) {
        self.count += 1;
        if self.count == 1 {
            crate::fi_warn!(
                "efa",
                crate::core::log::Subsys::EpData,
                "{}: dropped a {len}-byte datagram from {from}, larger than our MTU ({mtu} + \
                 {HEADROOM} bytes of header); further ones are only counted",
                me.straddr()
            );
        }
    }
}

/// EFA's 32-byte raw address (`FI_ADDR_EFA`, efa-reference §1): GID, QPN, QKEY.
#[derive(Clone, Copy, Eq, PartialOrd, Ord)]
pub struct EfaAddr {
    pub gid: [u8; 16],
    pub qpn: u16,
    pub qkey: u32,
}

pub const EFA_ADDR_LEN: usize = 32;

impl EfaAddr {
    pub fn to_bytes(&self) -> [u8; EFA_ADDR_LEN] {
        let mut b = [0u8; EFA_ADDR_LEN];
        b[..16].copy_from_slice(&self.gid);
        b[16..18].copy_from_slice(&self.qpn.to_le_bytes());
        b[20..24].copy_from_slice(&self.qkey.to_le_bytes());
        b
    }

    /// Parses the first 32 bytes (the reserved tail is ignored, as EFA does).
    pub fn from_bytes(b: &[u8]) -> Option<EfaAddr> {
        if b.len() < EFA_ADDR_LEN {
            return None;
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[..16]);
        Some(EfaAddr {
            gid,
            qpn: u16::from_le_bytes([b[16], b[17]]),
            qkey: u32::from_le_bytes([b[20], b[21], b[22], b[23]]),
        })
    }

    /// The GID as an IP address (IPv4-mapped GIDs give IPv4).
    pub fn ip(&self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.gid);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }

    pub fn gid_of(ip: IpAddr) -> [u8; 16] {
        match ip {
            IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            IpAddr::V6(v6) => v6.octets(),
        }
    }

    pub fn from_socket(a: SocketAddr, qkey: u32) -> EfaAddr {
        EfaAddr {
            gid: Self::gid_of(a.ip()),
            qpn: a.port(),
            qkey,
        }
    }

    pub fn socket(&self) -> SocketAddr {
        SocketAddr::new(self.ip(), self.qpn)
    }

    /// The same GID and QPN with QKEY 0: the address of a peer known only by node and service
    /// (`srd` module docs).
    pub fn unkeyed(&self) -> EfaAddr {
        EfaAddr { qkey: 0, ..*self }
    }

    /// `fi_addr_efa://[gid]:qpn:qkey` (upstream's straddr form).
    pub fn straddr(&self) -> String {
        format!(
            "fi_addr_efa://[{}]:{}:{}",
            Ipv6Addr::from(self.gid),
            self.qpn,
            self.qkey
        )
    }

    /// The GID text that `fi_getinfo(node)` takes.
    pub fn gid_text(&self) -> String {
        Ipv6Addr::from(self.gid).to_string()
    }
}

// Every send compares its destination with the last one (`udp::UdpDevice::route`): the GID as
// one 128-bit word, where the derived comparison went byte by byte. The same fields as the
// derived `Ord` and as `Hash`, so they agree with it.
impl PartialEq for EfaAddr {
    #[inline]
    fn eq(&self, other: &EfaAddr) -> bool {
        u128::from_ne_bytes(self.gid) == u128::from_ne_bytes(other.gid)
            && self.qpn == other.qpn
            && self.qkey == other.qkey
    }
}

impl std::hash::Hash for EfaAddr {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.gid.hash(h);
        self.qpn.hash(h);
        self.qkey.hash(h);
    }
}

impl fmt::Debug for EfaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.straddr())
    }
}

impl Default for EfaAddr {
    fn default() -> Self {
        EfaAddr {
            gid: Self::gid_of(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            qpn: 0,
            qkey: 0,
        }
    }
}

/// Why a send failed (EFA completion statuses, mapped to `FI_E*` by the RDM layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevError {
    /// Receiver not ready after the retries (EFA status 10).
    Rnr,
    /// The remote stopped answering (EFA status 13, unresponsive remote).
    Unreachable,
    /// The datagram is larger than the MTU.
    TooBig,
    /// RDMA to a remote range its key does not cover or allow (EFA status 7, remote bad
    /// address: a wrong rkey, bounds, or access the registration lacks).
    RemoteAccess,
    /// A local buffer not covered by a registration with that lkey (EFA status 5).
    LocalKey,
}

impl DevError {
    pub fn errno(self) -> Errno {
        match self {
            DevError::Rnr => Errno::NORX,
            DevError::Unreachable => Errno::CONNABORTED,
            DevError::TooBig => Errno::MSGSIZE,
            DevError::RemoteAccess | DevError::LocalKey => Errno::INVAL,
        }
    }

    /// EFA's provider error number for `fi_cq_strerror` (efa-reference §6).
    pub fn prov_errno(self) -> i32 {
        match self {
            DevError::Rnr => 10,
            DevError::Unreachable => 13,
            DevError::TooBig => 3,
            DevError::RemoteAccess => 7,
            DevError::LocalKey => 5,
        }
    }
}

/// Memory the device registered for its caller's own use (a staging buffer that device RDMA
/// reads into when the application's memory is not registered); deregistered and freed when
/// dropped, which the caller does only once no work request uses it.
pub trait Staging: Send {
    fn mem(&self) -> IoVec;
    fn lkey(&self) -> u32;
}

/// What a device RDMA work request does ([`Device::post_rdma`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RdmaOp {
    /// The peer's registered memory into `local`.
    Read,
    /// `local` into the peer's registered memory; the peer's CQ sees nothing.
    Write,
    /// As `Write`, then the peer gets [`Completion::WriteData`] with this value (it takes one
    /// of the peer's posted receives, as a datagram would).
    WriteData(u32),
}

/// One device RDMA work request: `local` (registered, `lkey`) to or from `len(local)` bytes
/// at `raddr` of the peer `dest`'s registration `rkey`.
#[derive(Debug, Clone, Copy)]
pub struct RdmaReq {
    pub op: RdmaOp,
    pub dest: EfaAddr,
    pub local: IoVec,
    pub lkey: u32,
    pub raddr: u64,
    pub rkey: u32,
    pub wr_id: u64,
}

/// Bytes of packet header a [`Placement`] names: an RDM CTSDATA header with its connid.
pub const PLACED_HDR: usize = 32;

/// Where the upper layer expects the payload of an arriving datagram to go
/// ([`Device::poll_placed`]): a datagram whose packet begins with exactly `hdr` and carries
/// exactly `dst.len()` bytes after it is received with those bytes straight into `dst` — the
/// kernel's copy out of the socket is the only one, where the upper layer would copy the
/// payload a second time — and completes as [`Completion::Placed`]. Any other datagram is
/// received as usual; whatever of it the kernel put into `dst` on the way is copied back out
/// first. So `dst` may be left holding any bytes: the caller names only memory whose contents
/// nobody is owed yet (the part of a transfer past everything received so far, which the
/// transfer's own data overwrites before it completes).
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    pub hdr: [u8; PLACED_HDR],
    pub dst: IoVec,
    /// Handed back in the completion.
    pub token: u64,
}

/// A finished work request.
#[derive(Debug)]
pub enum Completion {
    Send {
        wr_id: u64,
        status: Result<(), DevError>,
        buf: Vec<u8>,
    },
    /// `buf[off..off + len]` is the payload, from `src`.
    Recv {
        wr_id: u64,
        buf: Vec<u8>,
        off: usize,
        len: usize,
        src: EfaAddr,
    },
    /// Datagrams the socket took as one run (UDP GRO): the `RecvInRun` completions after it,
    /// up to the next `Run`, point into `buf`. Handed back with [`Device::return_run`] once
    /// they are handled, so that a run's datagrams reach the RDM layer without a copy.
    Run { buf: Vec<u8> },
    /// As `Recv`, with the payload at `run[off..off + len]` of the latest `Run`. It counted
    /// against the posted receives as a credit for this poll (with none left, datagrams are
    /// refused with RNR) but took none: the buffers, which a run never touches, are all
    /// posted again for the next poll. (Handing each one up to be posted again at once cost
    /// the receiver about 60 instructions per datagram, callgrind, tagged 1 MiB over veth.)
    RecvInRun {
        off: usize,
        len: usize,
        src: EfaAddr,
    },
    /// As `RecvInRun`, for a datagram whose fragments lie whole in the latest `Run`, left in
    /// them: the packet is where `pieces` says. The upper layer copies a CTSDATA payload from
    /// the pieces to where it goes, and joins any other packet first
    /// ([`fragment::InPieces::join`]): joining every datagram in the run and copying its
    /// payload out after moved each byte twice (callgrind, the receiver of tagged 1 MiB sends
    /// over a veth pair: `memcpy` 64.5 M instructions before, 38.4 M after).
    RecvInPieces {
        pieces: fragment::InPieces,
        src: EfaAddr,
    },
    /// A datagram that matched the [`Placement`] handed back as `token`: its payload is in
    /// that placement's `dst` already. It used up the posted receive `wr_id`, whose buffer
    /// comes back untouched.
    Placed {
        wr_id: u64,
        buf: Vec<u8>,
        token: u64,
        src: EfaAddr,
    },
    /// A device RDMA work request finished (`post_rdma`'s `wr_id`).
    Rdma {
        wr_id: u64,
        status: Result<(), DevError>,
    },
    /// A peer's RDMA write with data (`RdmaOp::WriteData`) of `len` bytes landed in our
    /// memory; it took the posted receive `wr_id`, whose buffer comes back unused.
    WriteData {
        wr_id: u64,
        buf: Vec<u8>,
        len: usize,
        data: u32,
        src: EfaAddr,
    },
}

/// What a device can do beyond datagrams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceCaps {
    pub rdma_read: bool,
    pub rdma_write: bool,
}

/// One queue pair of a device.
pub trait Device: Send {
    /// Largest payload of one datagram.
    fn mtu(&self) -> usize;

    /// Largest payload of one datagram to and from `peer`: [`Device::mtu`], unless the device
    /// reaches that peer over a path of larger datagrams (the software device: an address of
    /// this host, which the kernel routes over loopback whatever interface we are on).
    fn path_mtu(&self, peer: &EfaAddr) -> usize {
        let _ = peer;
        self.mtu()
    }

    /// Largest payload a peer takes that did not say what it takes (a handshake without
    /// `max_pkt`): [`Device::mtu`], unless this device carries larger datagrams in fragments
    /// only peers that said so join (the software device on a small-MTU link).
    fn plain_mtu(&self) -> usize {
        self.mtu()
    }

    fn addr(&self) -> EfaAddr;

    fn caps(&self) -> DeviceCaps {
        DeviceCaps::default()
    }

    /// Most outstanding sends / posted receives.
    fn max_send(&self) -> usize;
    fn max_recv(&self) -> usize;

    /// Sends `buf[HEADROOM..HEADROOM + len]` followed by `tail` (application memory sent from
    /// where it lies, valid until the completion) reliably to `dest`. The buffer comes back in the completion. `AGAIN`
    /// when the send queue is full. The datagram may wait for the next `poll` or `flush`, so
    /// that one system call carries several.
    fn post_send(
        &mut self,
        dest: EfaAddr,
        buf: Vec<u8>,
        len: usize,
        tail: IoVec,
        wr_id: u64,
    ) -> std::result::Result<(), (Errno, Vec<u8>)>;

    /// As `post_send` of a packet whose part before `tail` is a header of `head_len` bytes
    /// (a few dozen at most), which `write` writes, lent no buffer: a device may keep those
    /// bytes itself and have them written where it keeps them, so that the bulk of a transfer
    /// takes no buffer and copies no header per datagram. The completion's buffer is then
    /// empty, unless the send failed: it holds the packet as `post_send` takes it (`HEADROOM`
    /// bytes, then the header), to be sent again. By default, `post_send` of a buffer made
    /// for it.
    fn post_send_head(
        &mut self,
        dest: EfaAddr,
        head_len: usize,
        tail: IoVec,
        wr_id: u64,
        write: &mut dyn FnMut(&mut [u8]),
    ) -> std::result::Result<(), Errno> {
        let mut buf = vec![0; HEADROOM + head_len];
        write(&mut buf[HEADROOM..]);
        self.post_send(dest, buf, head_len, tail, wr_id)
            .map_err(|(e, _)| e)
    }

    /// Sends without reliability (DGRAM endpoints); completes once handed to the network.
    fn post_send_unreliable(
        &mut self,
        dest: EfaAddr,
        buf: Vec<u8>,
        len: usize,
        wr_id: u64,
    ) -> std::result::Result<(), (Errno, Vec<u8>)>;

    /// Posts a receive buffer (resized to hold a whole datagram). Buffers are not consumed
    /// in the order posted: the completion's `wr_id` says which one was filled.
    fn post_recv(&mut self, buf: Vec<u8>, wr_id: u64) -> std::result::Result<(), (Errno, Vec<u8>)>;

    /// Drives I/O and timers; appends up to `max` completions.
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize);

    /// Whether `poll_placed` receives into the memory its placements name; the endpoint
    /// plans none for a device that does not.
    fn places(&self) -> bool {
        false
    }

    /// As `poll`, receiving datagrams that match `place` into the memory each names (used in
    /// order: each at most once, and only within this call). A device that cannot receive
    /// into chosen memory ignores them; a datagram that matches none arrives as usual. `now`
    /// is `sys::os::monotonic_ns` as the caller just read it: a device on that clock takes it
    /// rather than reading the clock again on every poll.
    fn poll_placed(
        &mut self,
        out: &mut Vec<Completion>,
        max: usize,
        _place: &[Placement],
        _now: u64,
    ) {
        self.poll(out, max)
    }

    /// Puts on the wire whatever `post_send` queued, and the acknowledgements owed for what
    /// `poll` received (held until now so that answers sent in the same pass carry them). The
    /// caller calls it at the end of each pass. A device may keep some acknowledgements back a
    /// little longer (for more arrivals, or for the application's answer, to carry them) and
    /// then returns true: the caller must see that `flush_all` runs soon even if the
    /// application makes no further call (`rdm::ack_timer`).
    fn flush(&mut self) -> bool {
        false
    }

    /// `flush` at the end of a call that only posted (it did not `poll`): the device may also
    /// keep back datagrams that can wait for the next poll (`Transport::may_hold`), and then
    /// returns true, as `flush` does for acks.
    fn flush_posted(&mut self) -> bool {
        self.flush()
    }

    /// As `flush`, keeping nothing back.
    fn flush_all(&mut self) {
        self.flush();
    }

    /// What a NIC does without the host: acknowledges arrivals into posted receives (their
    /// completions wait for the next `poll`), refuses the rest with RNR, retransmits. Called
    /// when the application has not polled for a while (`rdm::ack_timer`), so that a busy
    /// application is neither given up as unreachable by its peers nor flooded past its
    /// buffers. A device whose hardware does this itself does nothing here.
    fn service(&mut self) {}

    /// Takes back the buffer of a [`Completion::Run`] whose datagrams were handled.
    fn return_run(&mut self, _buf: Vec<u8>) {}

    /// A burst of sends starts (`on`) or ends: posted back to back, with nothing but their
    /// headers written in between, they may share the time their retransmission timers start
    /// from. A device that reads no clock per send ignores it.
    fn send_burst(&mut self, _on: bool) {}

    /// `FI_OPT_EFA_RNR_RETRY`.
    fn set_rnr_retry(&mut self, n: u32);

    /// The largest transfer of one RDMA work request (0: the device has no RDMA).
    fn max_rdma_size(&self) -> usize {
        0
    }

    /// The local key of registered memory covering all of `mem` (device RDMA reads into it
    /// and writes from it), if there is one. Application memory is registered per domain,
    /// not per queue pair (a protection domain's, at `fi_mr_reg`, before any endpoint may
    /// exist: `verbs::HwContext::reg_mr`); a device answers from its domain's registrations.
    fn local_key(&self, _mem: IoVec) -> Option<u32> {
        None
    }

    /// The rkey under which a peer's device may read all of `mem` (a registration covering it
    /// with remote read access), if there is one: the long-read protocols hand it out.
    fn remote_key(&self, _mem: IoVec) -> Option<u32> {
        None
    }

    /// A registered buffer of `len` bytes for device RDMA reads.
    fn staging(&mut self, _len: usize) -> Option<Box<dyn Staging>> {
        None
    }

    /// Posts a device RDMA work request (only where `caps` offers its kind); it completes as
    /// [`Completion::Rdma`]. `AGAIN` when the send queue is full.
    fn post_rdma(&mut self, _req: RdmaReq) -> std::result::Result<(), Errno> {
        Err(Errno::NOSYS)
    }

    /// A file descriptor readable when `poll` may have work.
    fn wait_fd(&self) -> Option<RawFd> {
        None
    }

    /// The caller is about to block on `wait_fd`: make it readable when the next timer is due
    /// (timers are not armed while the application polls).
    fn prepare_wait(&mut self) {}

    fn stats(&self) -> srd::Stats;

    /// Gives up on everything pending to `dest` (its completions report `status`).
    fn abandon(&mut self, dest: EfaAddr);
}

/// Makes `buf`, just handed up in a [`Completion::Run`], the run that the `RecvInRun`
/// completions after it point into, and gives the previous one back to the device.
pub fn next_run(dev: &mut dyn Device, run: &mut Vec<u8>, buf: Vec<u8>) {
    let done = core::mem::replace(run, buf);
    if !done.is_empty() {
        dev.return_run(done);
    }
}

/// Size every receive buffer must have.
pub fn recv_buf_len(mtu: usize) -> usize {
    mtu + HEADROOM
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let a = EfaAddr::from_socket("10.1.2.3:4791".parse().unwrap(), 0x1234_5678);
        assert_eq!(a.ip().to_string(), "10.1.2.3");
        assert_eq!(a.socket().to_string(), "10.1.2.3:4791");
        assert_eq!(EfaAddr::from_bytes(&a.to_bytes()), Some(a));
        assert_eq!(
            a.straddr(),
            "fi_addr_efa://[::ffff:10.1.2.3]:4791:305419896"
        );
        assert!(EfaAddr::from_bytes(&[0; 31]).is_none());
        let b = EfaAddr::from_socket("[fd00::2]:7".parse().unwrap(), 1);
        assert_eq!(b.ip().to_string(), "fd00::2");
    }
}
