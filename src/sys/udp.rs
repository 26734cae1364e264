//! Nonblocking UDP sockets with batched I/O (sendmmsg(2), recvmmsg(2)), IPv4 and IPv6, and
//! UDP generic segmentation offload (GSO, udp(7) `UDP_SEGMENT`) on send where the kernel has
//! it: a run of datagrams of one size to one destination leaves in one message that the
//! kernel cuts back into those datagrams, so the stack is walked once per run, not once per
//! datagram (MTU-sized datagrams on Ethernet); and generic receive offload (GRO, `UDP_GRO`)
//! where asked for: the kernel hands up such runs as one buffer, with their segment size.

use core::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{Errno, Result};
use crate::sys::mem::IoVec;

/// Most datagrams received per system call.
pub const BATCH: usize = 32;
/// Most datagrams sent per system call: as many as one GSO message may hold, so that a run of
/// Ethernet-sized datagrams (44 of 1,472 bytes fit in `GSO_MAX_BYTES`) leaves in one message
/// instead of being cut at 32 (each message walks the stack and the link once).
pub const SEND_BATCH: usize = GSO_MAX_SEGMENTS;

/// How many datagrams of `seg` bytes one GSO message holds.
pub fn gso_run_datagrams(seg: usize) -> usize {
    (GSO_MAX_BYTES / seg.max(1)).clamp(1, GSO_MAX_SEGMENTS)
}

/// linux/udp.h: the cmsg (level `SOL_UDP`) giving a GSO message's segment size.
const UDP_SEGMENT: i32 = 103;
/// linux/udp.h: the socket option turning GRO on, and the cmsg giving a coalesced buffer's
/// segment size.
const UDP_GRO: i32 = 104;
/// Most segments in one GSO message (the kernel's `UDP_MAX_SEGMENTS` since Linux 4.18).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes in one GSO message: its segments' payloads and headers must fit in one IP
/// packet's 16-bit length before the kernel cuts it.
const GSO_MAX_BYTES: usize = 65_000;
/// Empty reads in a row after which the first socket counts as quiet
/// (`UdpSock::first_socket_quiet`).
pub const FIRST_QUIET_READS: u32 = 8;

/// One datagram for [`UdpSock::send_batch`]: destination, and its bytes in three parts, any of
/// which may be empty (a header and a payload sent from where it lies; a fragment's header
/// first, `efa::device::fragment`). The destination is borrowed
/// from where the caller keeps it: copied into each item, it was read back while its stores
/// were in flight (a stall per datagram in `perf annotate`).
pub type SendItem<'a> = (&'a SocketAddr, [&'a [u8]; 3]);

/// At most `N` values on the stack, of which only those pushed are written: the lists a send
/// builds (its datagrams, their GSO runs, their iovecs) are sized for 64 datagrams, and
/// initializing all of them (some 6 KiB) would cost a lone answer's send more than its
/// datagram.
pub struct StackList<T: Copy, const N: usize> {
    items: [MaybeUninit<T>; N],
    len: usize,
}

impl<T: Copy, const N: usize> StackList<T, N> {
    pub fn new() -> Self {
        StackList {
            items: [const { MaybeUninit::uninit() }; N],
            len: 0,
        }
    }

    /// Adds a value; returns false (and drops it) when the list is full.
    pub fn push(&mut self, item: T) -> bool {
        let Some(slot) = self.items.get_mut(self.len) else {
            return false;
        };
        slot.write(item);
        self.len += 1;
        true
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn last_mut(&mut self) -> Option<&mut T> {
        let last = self.items[..self.len].last_mut()?;
        // SAFETY: the first `len` entries were written by `push`.
        Some(unsafe { last.assume_init_mut() })
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` entries were written by `push` (never more than the array
        // holds), and `MaybeUninit<T>` has the layout of `T`.
        unsafe { core::slice::from_raw_parts(self.items.as_ptr().cast(), self.len) }
    }
}

impl<T: Copy, const N: usize> Default for StackList<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The datagrams of one send, gathered in one pass ([`UdpSock::batch`],
/// [`UdpSock::send_prepared`]): each datagram's parts become iovecs as it is added, and it
/// joins the GSO message before it when it can (the same destination, no longer than that
/// message's first datagram; a shorter one ends the message). Listed first and grouped into
/// messages after, each datagram was written, then read back twice (its length, then its
/// parts): the device's sending of tagged 1 MiB over a veth pair, in fragments, took 6 % more
/// instructions that way (callgrind, 42.0 M against 39.4 M for 300 MiB).
pub struct SendBatch<'a> {
    iov: StackList<libc::iovec, { 3 * SEND_BATCH }>,
    msgs: StackList<BatchMsg<'a>, SEND_BATCH>,
    datagrams: usize,
    max_run: usize,
}

/// One message of a [`SendBatch`]: `count` datagrams to `dest`, each `seg` bytes but the
/// last, from `iov_at` in the batch's iovecs to the next message's.
#[derive(Clone, Copy)]
struct BatchMsg<'a> {
    dest: &'a SocketAddr,
    iov_at: usize,
    count: usize,
    seg: usize,
    bytes: usize,
    /// Every datagram so far is `seg` bytes (none empty): another may join.
    open: bool,
}

impl BatchMsg<'_> {
    /// Message `g`'s iovecs: from its `iov_at` to the next message's (or the end of `iov`).
    fn iovecs<'i>(msgs: &[BatchMsg<'_>], g: usize, iov: &'i [libc::iovec]) -> &'i [libc::iovec] {
        let end = msgs.get(g + 1).map_or(iov.len(), |n| n.iov_at);
        &iov[msgs[g].iov_at..end]
    }
}

/// `send_msgs` found GSO refused on this socket (more datagrams than any batch holds).
const GSO_REFUSED: usize = usize::MAX;

impl<'a> SendBatch<'a> {
    /// Adds a datagram of (up to) three parts, any of which may be empty; returns false (and
    /// leaves it out) when the batch holds [`SEND_BATCH`] datagrams already.
    #[inline(always)]
    pub fn push(&mut self, dest: &'a SocketAddr, parts: [&'a [u8]; 3]) -> bool {
        if self.datagrams == SEND_BATCH {
            return false;
        }
        let len = parts[0].len() + parts[1].len() + parts[2].len();
        let iov_at = self.iov.len();
        match self.msgs.last_mut() {
            // Items of one peer mostly borrow one address: the pointers answer first.
            Some(m)
                if m.open
                    && len <= m.seg
                    && len > 0
                    && m.count < self.max_run
                    && m.bytes + len <= GSO_MAX_BYTES
                    && (core::ptr::eq(m.dest, dest) || *m.dest == *dest) =>
            {
                m.count += 1;
                m.bytes += len;
                m.open = len == m.seg;
            }
            _ => {
                self.msgs.push(BatchMsg {
                    dest,
                    iov_at,
                    count: 1,
                    seg: len,
                    bytes: len,
                    open: len > 0,
                });
            }
        }
        for (j, part) in parts.iter().enumerate() {
            // An empty datagram still needs one (empty) iovec; an empty part none.
            if j == 0 || !part.is_empty() {
                self.iov.push(libc::iovec {
                    iov_base: part.as_ptr() as *mut libc::c_void,
                    iov_len: part.len(),
                });
            }
        }
        self.datagrams += 1;
        true
    }

    /// The batch's messages cut into one per datagram (for a socket that refuses GSO). A
    /// message's datagrams are consecutive iovecs, `seg` bytes each but the last, and only a
    /// datagram's first iovec may be empty: each ends where the bytes summed since the one
    /// before reach `seg`.
    fn one_per_datagram(&self) -> StackList<BatchMsg<'a>, SEND_BATCH> {
        let (iov, msgs) = (self.iov.as_slice(), self.msgs.as_slice());
        let mut singles = StackList::new();
        for (g, m) in msgs.iter().enumerate() {
            let own = BatchMsg::iovecs(msgs, g, iov);
            let (mut at, mut bytes) = (0, 0);
            for (j, v) in own.iter().enumerate() {
                bytes += v.iov_len;
                if bytes == m.seg || j + 1 == own.len() {
                    singles.push(BatchMsg {
                        iov_at: m.iov_at + at,
                        count: 1,
                        seg: bytes,
                        bytes,
                        open: false,
                        ..*m
                    });
                    (at, bytes) = (j + 1, 0);
                }
            }
        }
        singles
    }

    /// Datagrams added.
    pub fn len(&self) -> usize {
        self.datagrams
    }

    pub fn is_empty(&self) -> bool {
        self.datagrams == 0
    }
}

#[derive(Debug)]
pub struct UdpSock {
    fd: OwnedFd,
    local: SocketAddr,
    /// Whether GSO is still tried: cleared for good when the kernel refuses it.
    gso: AtomicBool,
    /// Where `recv_batch` has the kernel write sources and cmsgs: kept between calls so that
    /// a poll that finds nothing (most of them, when busy-polling) does not clear 5 KiB first.
    rx_scratch: Box<RecvScratch>,
    /// The buffer size asked for at bind, for a peer socket to ask the same.
    buf: usize,
    /// GRO is on (`enable_gro`), for a peer socket to have it too.
    gro: bool,
    /// A second socket on this one's address and port, connected to one peer
    /// ([`connect_peer`](Self::connect_peer)).
    peer_sock: Option<PeerSock>,
    /// Reads of this socket in a row that found nothing while the second one was connected
    /// ([`first_socket_quiet`](Self::first_socket_quiet)).
    first_empty: u32,
}

/// Why [`UdpSock::connect_peer`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerSockError {
    /// The peer could not be connected to (no route to it now): another may be.
    Peer(Errno),
    /// No second socket could be made here (`SO_REUSEPORT` refused, no descriptor left).
    Socket(Errno),
}

/// A socket bound to its [`UdpSock`]'s address and port and connected to one peer. Sends to
/// that peer go out through it: the kernel routes a connected socket's datagrams once, at
/// connect(2), where an unconnected one routes each, and on a host's own address allocates a
/// route each time (it does not cache a local route whose device is not the one it goes out
/// of: eth0's address over loopback) and frees it through RCU. 64-byte send and receive, one
/// process, to eth0's address: 3.35-3.43 µs connected, 4.26-4.51 not. The peer's datagrams
/// arrive on it (the kernel prefers the socket whose connection matches them); the others'
/// on the first.
#[derive(Debug)]
struct PeerSock {
    fd: OwnedFd,
    peer: SocketAddr,
    /// Send calls that went through it (relaxed load and store: sends hold `&UdpSock` under
    /// the device's lock).
    sends: AtomicU64,
}

/// What a receive call hands the kernel besides the buffers: kept with the socket, so that a
/// call (most of them find nothing, while an application polls) fills in only the entries it
/// uses instead of building and zeroing 32 of each on the stack.
struct RecvScratch {
    names: [libc::sockaddr_storage; BATCH],
    cmsgs: [SegmentCmsg; BATCH],
    iov: [[libc::iovec; 3]; BATCH],
    hdrs: [libc::mmsghdr; BATCH],
}

impl core::fmt::Debug for RecvScratch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("RecvScratch")
    }
}

// SAFETY: the raw pointers in `iov` and `hdrs` are only ever set and used within one receive
// call, under `&mut UdpSock`; between calls they are stale and never read.
unsafe impl Send for RecvScratch {}
// SAFETY: as above; a shared reference never touches the scratch.
unsafe impl Sync for RecvScratch {}

/// Room for one `UDP_SEGMENT` cmsg, aligned for `cmsghdr`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct SegmentCmsg([u8; 32]);

impl core::fmt::Debug for SegmentCmsg {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("SegmentCmsg")
    }
}

fn to_sockaddr(a: &SocketAddr, out: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in.
            let s =
                unsafe { &mut *(out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = v4.port().to_be();
            s.sin_addr = libc::in_addr {
                s_addr: u32::from_ne_bytes(v4.ip().octets()),
            };
            core::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(v6) => {
            // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in6.
            let s =
                unsafe { &mut *(out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = v6.port().to_be();
            s.sin6_flowinfo = 0;
            s.sin6_addr = libc::in6_addr {
                s6_addr: v6.ip().octets(),
            };
            s.sin6_scope_id = v6.scope_id();
            core::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

fn from_sockaddr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                0,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, v: i32) -> bool {
    // SAFETY: passes a valid int and its size.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            core::mem::size_of::<i32>() as u32,
        ) == 0
    }
}

/// One recvmmsg(2) on `fd` into `bufs` (see [`UdpSock::recv_batch_split`]); appends to `out`.
fn recv_into(
    fd: RawFd,
    scratch: &mut RecvScratch,
    bufs: &mut [Vec<u8>],
    split: &[(usize, IoVec)],
    out: &mut Vec<(usize, SocketAddr, usize)>,
) -> usize {
    let n = bufs.len().min(BATCH);
    if n == 0 {
        return 0;
    }
    let RecvScratch {
        names,
        cmsgs,
        iov,
        hdrs,
    } = scratch;
    for i in 0..n {
        let buf = &mut bufs[i];
        let parts = match split.get(i) {
            Some(&(head, dst)) if head + dst.len() <= buf.len() && !dst.is_empty() => {
                let rest = head + dst.len();
                iov[i] = [
                    libc::iovec {
                        iov_base: buf.as_mut_ptr().cast(),
                        iov_len: head,
                    },
                    libc::iovec {
                        iov_base: dst.as_ptr().cast(),
                        iov_len: dst.len(),
                    },
                    libc::iovec {
                        iov_base: buf[rest..].as_mut_ptr().cast(),
                        iov_len: buf.len() - rest,
                    },
                ];
                3
            }
            _ => {
                iov[i][0] = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                };
                1
            }
        };
        let h = &mut hdrs[i].msg_hdr;
        h.msg_iov = iov[i].as_mut_ptr();
        h.msg_iovlen = parts;
        h.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
        h.msg_namelen = core::mem::size_of::<libc::sockaddr_storage>() as u32;
        h.msg_control = cmsgs[i].0.as_mut_ptr().cast();
        h.msg_controllen = cmsgs[i].0.len();
    }
    // SAFETY: every header points at live buffers of the stated lengths (a split's `dst` is
    // memory the caller may write, `IoVec`'s contract), a name slot and a control block;
    // all of them outlive the call. Through syscall(2) rather than libc's wrapper, which is a
    // cancellation point: in a process of several threads (the ack timer is one) the wrapper
    // turns asynchronous cancellation on and off around every call, 2 % of an efa ping-pong
    // client's time (`perf`), and a nonblocking call needs no cancellation point.
    let r = unsafe {
        libc::syscall(
            libc::SYS_recvmmsg,
            fd,
            hdrs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            core::ptr::null_mut::<libc::timespec>(),
        )
    };
    if r <= 0 {
        return 0;
    }
    for i in 0..r as usize {
        let len = hdrs[i].msg_len as usize;
        let mut seg = len;
        let h = &hdrs[i].msg_hdr;
        // SAFETY: the kernel filled `msg_controllen` bytes of the control block; the
        // CMSG_* walk stays inside it, and a UDP_GRO cmsg carries an int.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                    let s = libc::CMSG_DATA(c).cast::<i32>().read_unaligned();
                    if s > 0 {
                        seg = s as usize;
                    }
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        // A name the kernel did not write this time would be a stale one.
        let name = (h.msg_namelen > 0)
            .then(|| from_sockaddr(&names[i]))
            .flatten();
        match name {
            Some(a) => out.push((len, a, seg)),
            None => out.push((0, SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0), 0)),
        }
    }
    r as usize
}

/// A nonblocking UDP socket for `ip`'s family with buffers of about `buf` bytes, not bound.
fn new_socket(ip: IpAddr, buf: usize) -> Result<OwnedFd> {
    let domain = if ip.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: no memory preconditions; the fd is checked.
    let fd = unsafe {
        libc::socket(
            domain,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(Errno::last_os());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = fd.as_raw_fd();
    let size = i32::try_from(buf).unwrap_or(i32::MAX);
    // The FORCE variants exceed rmem_max/wmem_max when permitted (root); otherwise the plain
    // ones take what the system allows.
    if !setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, size) {
        setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, size);
    }
    if !setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, size) {
        setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, size);
    }
    if ip.is_ipv6() {
        setsockopt_int(raw, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1);
    }
    Ok(fd)
}

/// The system call that gives a socket its local (bind(2)) or remote (connect(2)) address.
type AddrCall =
    unsafe extern "C" fn(libc::c_int, *const libc::sockaddr, libc::socklen_t) -> libc::c_int;

fn call_with_addr(fd: RawFd, a: &SocketAddr, call: AddrCall) -> Result<()> {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut ss: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    let len = to_sockaddr(a, &mut ss);
    // SAFETY: `call` is bind or connect; `ss` holds a sockaddr of `len` bytes that outlives it.
    if unsafe { call(fd, (&ss as *const libc::sockaddr_storage).cast(), len) } != 0 {
        return Err(Errno::last_os());
    }
    Ok(())
}

fn bind_to(fd: RawFd, a: &SocketAddr) -> Result<()> {
    call_with_addr(fd, a, libc::bind)
}

fn connect_to(fd: RawFd, a: &SocketAddr) -> Result<()> {
    call_with_addr(fd, a, libc::connect)
}

impl UdpSock {
    /// A nonblocking socket bound to `ip:port` (port 0: any) with buffers of about `buf` bytes.
    pub fn bind(ip: IpAddr, port: u16, buf: usize) -> Result<UdpSock> {
        let fd = new_socket(ip, buf)?;
        let raw = fd.as_raw_fd();
        // SAFETY: an all-zero sockaddr_storage is valid.
        let mut ss: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
        bind_to(raw, &SocketAddr::new(ip, port))?;
        let mut alen = core::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `ss`/`alen` describe a writable sockaddr_storage.
        if unsafe {
            libc::getsockname(
                raw,
                (&mut ss as *mut libc::sockaddr_storage).cast(),
                &mut alen,
            )
        } != 0
        {
            return Err(Errno::last_os());
        }
        let local = from_sockaddr(&ss).ok_or(Errno::INVAL)?;
        Ok(UdpSock {
            fd,
            local,
            gso: AtomicBool::new(true),
            rx_scratch: Box::new(RecvScratch {
                // SAFETY: an all-zero sockaddr_storage is valid.
                names: unsafe { core::mem::zeroed() },
                cmsgs: [SegmentCmsg([0; 32]); BATCH],
                iov: [[libc::iovec {
                    iov_base: core::ptr::null_mut(),
                    iov_len: 0,
                }; 3]; BATCH],
                // SAFETY: all-zero mmsghdrs are valid (null pointers, zero lengths).
                hdrs: unsafe { core::mem::zeroed() },
            }),
            buf,
            gro: false,
            peer_sock: None,
            first_empty: 0,
        })
    }

    /// Sends to `peer` through a socket connected to it, on this socket's address and port (so
    /// that the peer sees the same source): made at the first call, connected again to a new
    /// peer at a later one. Returns the new socket's fd the first time (its datagrams arrive
    /// there: it belongs in the caller's wait set), None after. On an error nothing changes,
    /// and sends go on as before.
    ///
    /// Both sockets share the port by `SO_REUSEPORT`, set only while the second binds: with
    /// it off again on both, no other socket can bind the port, as before (a socket that asks
    /// to share it meets sockets that do not).
    pub fn connect_peer(
        &mut self,
        peer: SocketAddr,
    ) -> core::result::Result<Option<RawFd>, PeerSockError> {
        if let Some(p) = &mut self.peer_sock {
            if p.peer != peer {
                connect_to(p.fd.as_raw_fd(), &peer).map_err(PeerSockError::Peer)?;
                p.peer = peer;
                // The old peer's datagrams now come to the first socket: not quiet any more.
                self.first_empty = 0;
            }
            return Ok(None);
        }
        let main = self.fd();
        let share = |fd: RawFd, on: bool| {
            setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, i32::from(on))
        };
        if !share(main, true) {
            return Err(PeerSockError::Socket(Errno::last_os()));
        }
        let made = (|| {
            let fd = new_socket(self.local.ip(), self.buf).map_err(PeerSockError::Socket)?;
            let raw = fd.as_raw_fd();
            if !share(raw, true) {
                return Err(PeerSockError::Socket(Errno::last_os()));
            }
            if self.gro {
                setsockopt_int(raw, libc::SOL_UDP, UDP_GRO, 1);
            }
            bind_to(raw, &self.local).map_err(PeerSockError::Socket)?;
            share(raw, false);
            // Closed again on an error: a bound socket that is not connected would take
            // datagrams from every peer.
            connect_to(raw, &peer).map_err(PeerSockError::Peer)?;
            Ok(fd)
        })();
        share(main, false);
        let fd = made?;
        let raw = fd.as_raw_fd();
        self.peer_sock = Some(PeerSock {
            fd,
            peer,
            sends: AtomicU64::new(0),
        });
        Ok(Some(raw))
    }

    /// Closes the connected socket (`connect_peer`): everything goes through this one again.
    pub fn disconnect_peer(&mut self) {
        self.peer_sock = None;
    }

    /// The peer of the connected socket (`connect_peer`), and how many sends went through it.
    pub fn connected_peer(&self) -> Option<(SocketAddr, u64)> {
        self.peer_sock
            .as_ref()
            .map(|p| (p.peer, p.sends.load(Ordering::Relaxed)))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Turns GRO on; false if the kernel has none. Every receive buffer must then hold 64 KiB:
    /// a coalesced run is cut short by a smaller one.
    pub fn enable_gro(&mut self) -> bool {
        self.gro = setsockopt_int(self.fd(), libc::SOL_UDP, UDP_GRO, 1);
        self.gro
    }

    /// Receives up to `bufs.len()` messages into `bufs` (each buffer's whole length is
    /// usable); fills `out` with (length, source, segment size) and returns how many arrived.
    /// A datagram longer than its buffer is cut short and reports its whole length (larger
    /// than the buffer): the caller drops it.
    /// The segment size is the length, but for a run of datagrams GRO coalesced: the datagrams
    /// are then the consecutive `segment`-byte pieces of the buffer, the last one shorter.
    pub fn recv_batch(
        &mut self,
        bufs: &mut [Vec<u8>],
        out: &mut Vec<(usize, SocketAddr, usize)>,
    ) -> usize {
        self.recv_batch_split(bufs, &[], out, true)
    }

    /// As [`recv_batch`](Self::recv_batch), but message `i < split.len()` is received with
    /// its bytes `[head, head + dst.len())` in `dst` (`split[i] = (head, dst)`) rather than in
    /// `bufs[i]`: the buffer keeps the rest in place, `[..head]` and from `head + dst.len()`
    /// on, so that copying `dst` back into the gap makes the datagram whole. A split that does
    /// not fit its buffer receives into the buffer alone. With `first` false and a connected
    /// socket ([`connect_peer`](Self::connect_peer)), only the connected socket is read.
    pub fn recv_batch_split(
        &mut self,
        bufs: &mut [Vec<u8>],
        split: &[(usize, IoVec)],
        out: &mut Vec<(usize, SocketAddr, usize)>,
        first: bool,
    ) -> usize {
        out.clear();
        let n = bufs.len().min(BATCH);
        if n == 0 {
            return 0;
        }
        let bufs = &mut bufs[..n];
        let mut got = 0;
        // The connected socket first: while it exists, most datagrams come to it.
        if let Some(p) = &self.peer_sock {
            got = recv_into(p.fd.as_raw_fd(), &mut self.rx_scratch, bufs, split, out);
            if got == n || !first {
                return got;
            }
        }
        let split = split.get(got..).unwrap_or(&[]);
        let more = recv_into(
            self.fd.as_raw_fd(),
            &mut self.rx_scratch,
            &mut bufs[got..],
            split,
            out,
        );
        if self.peer_sock.is_some() {
            self.first_empty = if more == 0 {
                self.first_empty.saturating_add(1)
            } else {
                0
            };
        }
        got + more
    }

    /// Whether this socket has found nothing on its last [`FIRST_QUIET_READS`] reads while
    /// the second one was connected: the connected peer is then the only one sending, and
    /// a caller may read this socket less often (`recv_batch_split`'s `first`), saving an
    /// empty system call per poll. Its datagrams wait in its buffer meanwhile.
    pub fn first_socket_quiet(&self) -> bool {
        self.peer_sock.is_some() && self.first_empty >= FIRST_QUIET_READS
    }

    /// Sends datagrams (destination, bytes in three parts, see [`SendItem`]); returns how
    /// many the kernel took (the rest should be retried: the socket buffer is full).
    /// Consecutive datagrams to one destination, each as long as the first but the last
    /// (which may be shorter), go out as one GSO message.
    pub fn send_batch(&self, items: &[SendItem<'_>]) -> usize {
        match items {
            [] => 0,
            [(dest, parts)] => self.send_one(dest, parts),
            _ => {
                let mut batch = self.batch(GSO_MAX_SEGMENTS);
                for &(dest, parts) in items.iter().take(SEND_BATCH) {
                    batch.push(dest, parts);
                }
                self.send_prepared(&batch)
            }
        }
    }

    /// An empty [`SendBatch`] for this socket, with GSO messages of at most `max_run`
    /// datagrams (one while the kernel refuses GSO here).
    pub fn batch<'a>(&self, max_run: usize) -> SendBatch<'a> {
        let gso = self.gso.load(Ordering::Relaxed);
        SendBatch {
            iov: StackList::new(),
            msgs: StackList::new(),
            datagrams: 0,
            max_run: if gso {
                max_run.clamp(1, GSO_MAX_SEGMENTS)
            } else {
                1
            },
        }
    }

    /// Sends what `batch` gathered; returns how many of its datagrams the kernel took, in
    /// order (the rest should be retried: the socket buffer is full). A datagram the network
    /// refuses for good counts as taken, as a lost one would (`refused_for_good`).
    pub fn send_prepared(&self, batch: &SendBatch<'_>) -> usize {
        let sent = self.send_msgs(batch.iov.as_slice(), batch.msgs.as_slice());
        if sent != GSO_REFUSED {
            return sent;
        }
        // No GSO here (an old kernel, or a device without checksum offload): stop trying it
        // on this socket and send the datagrams one message each.
        self.gso.store(false, Ordering::Relaxed);
        self.send_msgs(batch.iov.as_slice(), batch.one_per_datagram().as_slice())
    }

    /// sendmmsg(2) (sendmsg(2) for one) of `msgs`, whose iovecs are `iov[msgs[g].iov_at..]` up
    /// to the next message's; returns how many datagrams went, or `GSO_REFUSED`.
    fn send_msgs(&self, iov: &[libc::iovec], msgs: &[BatchMsg<'_>]) -> usize {
        let nruns = msgs.len();
        if nruns == 0 {
            return 0;
        }
        // A batch all to the connected socket's peer goes through it, unnamed: no route
        // lookup per datagram (`PeerSock`).
        let via_peer = self
            .peer_sock
            .as_ref()
            .filter(|p| msgs.iter().all(|m| *m.dest == p.peer));
        let fd = via_peer.map_or(self.fd(), |p| {
            p.sends
                .store(p.sends.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            p.fd.as_raw_fd()
        });
        // Only the headers, names and control blocks of the `nruns` messages are initialized:
        // zeroing all 64 of them (14 KiB) would cost more than a small datagram's whole send.
        let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; SEND_BATCH];
        let mut names = [const { MaybeUninit::<libc::sockaddr_storage>::uninit() }; SEND_BATCH];
        let mut cmsgs = [const { MaybeUninit::<SegmentCmsg>::uninit() }; SEND_BATCH];
        let mut coalesced = false;
        for (g, m) in msgs.iter().enumerate() {
            let own = BatchMsg::iovecs(msgs, g, iov);
            let h = &mut hdrs[g]
                .write(
                    // SAFETY: an all-zero mmsghdr is valid (null pointers, zero lengths).
                    unsafe { core::mem::zeroed() },
                )
                .msg_hdr;
            // The kernel only reads the iovecs: a pointer made mutable for the C type.
            h.msg_iov = own.as_ptr().cast_mut();
            h.msg_iovlen = own.len();
            if via_peer.is_none() {
                let name = names[g].write(
                    // SAFETY: an all-zero sockaddr_storage is valid.
                    unsafe { core::mem::zeroed() },
                );
                h.msg_namelen = to_sockaddr(m.dest, name);
                h.msg_name = (name as *mut libc::sockaddr_storage).cast();
            }
            if m.count > 1 {
                coalesced = true;
                let buf = &mut cmsgs[g].write(SegmentCmsg([0; 32])).0;
                // SAFETY: CMSG_SPACE(2) is 24 bytes on 64-bit Linux, within the 32-byte,
                // 8-aligned buffer; the header and its data are written inside it.
                unsafe {
                    h.msg_control = buf.as_mut_ptr().cast();
                    h.msg_controllen = libc::CMSG_SPACE(2) as usize;
                    let c = libc::CMSG_FIRSTHDR(h);
                    (*c).cmsg_level = libc::SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    (*c).cmsg_len = libc::CMSG_LEN(2) as usize;
                    libc::CMSG_DATA(c)
                        .cast::<u16>()
                        .write_unaligned(m.seg as u16);
                }
            }
        }
        // SAFETY: the first `nruns` (at least one) headers are initialized (the loop above)
        // and each points at live buffers, an address and a control block that outlive the
        // call; the kernel only reads them, and no more than `nruns` of them.
        let r = unsafe {
            if nruns == 1 {
                // One message (a request or an answer): sendmsg(2) spares the kernel
                // sendmmsg's per-message bookkeeping on the latency path. Through syscall(2),
                // as `recv_into`'s receive is.
                let h = &(*hdrs[0].as_ptr()).msg_hdr;
                match libc::syscall(libc::SYS_sendmsg, fd, h, libc::MSG_DONTWAIT) {
                    r if r < 0 => -1,
                    _ => 1,
                }
            } else {
                libc::syscall(
                    libc::SYS_sendmmsg,
                    fd,
                    hdrs.as_mut_ptr().cast::<libc::mmsghdr>(),
                    nruns as libc::c_uint,
                    libc::MSG_DONTWAIT,
                ) as i32
            }
        };
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if coalesced && (e == libc::EINVAL || e == libc::EIO || e == libc::ENOPROTOOPT) {
                return GSO_REFUSED;
            }
            if refused_for_good(e) {
                return msgs[0].count;
            }
            return 0;
        }
        msgs.iter().take(r as usize).map(|m| m.count).sum()
    }

    /// `send_batch` of one datagram (a request or an answer, on the latency path): its two
    /// parts go out by sendmsg(2) without the batch's lists of runs, iovecs and headers, some
    /// 150 instructions of every lone send (callgrind). Returns 1 if it went out or was
    /// dropped as a lost one would be, 0 if the socket is full.
    fn send_one(&self, dest: &SocketAddr, parts: &[&[u8]; 3]) -> usize {
        // The kernel only reads the iovecs: pointers made mutable for the C type. An empty
        // datagram still needs one (empty) iovec; empty parts none.
        let mut iov = [libc::iovec {
            iov_base: core::ptr::null_mut(),
            iov_len: 0,
        }; 3];
        let mut used = 0;
        for p in parts.iter().filter(|p| !p.is_empty()) {
            iov[used] = libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            };
            used += 1;
        }
        // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
        let mut h: libc::msghdr = unsafe { core::mem::zeroed() };
        h.msg_iov = iov.as_ptr().cast_mut();
        h.msg_iovlen = used.max(1);
        // SAFETY: an all-zero sockaddr_storage is valid.
        let mut name: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
        // To the connected socket's peer through it, unnamed (`PeerSock`).
        let fd = match self.peer_sock.as_ref().filter(|p| p.peer == *dest) {
            Some(p) => {
                p.sends
                    .store(p.sends.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                p.fd.as_raw_fd()
            }
            None => {
                h.msg_namelen = to_sockaddr(dest, &mut name);
                h.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
                self.fd()
            }
        };
        // SAFETY: `h` points at `iov` (whose parts are live slices) and, named, at `name`;
        // all outlive the call, and the kernel only reads them. Through syscall(2), as
        // `recv_into`'s receive is.
        let r = unsafe { libc::syscall(libc::SYS_sendmsg, fd, &h, libc::MSG_DONTWAIT) };
        if r >= 0 {
            return 1;
        }
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        usize::from(refused_for_good(e))
    }
}

/// A send that failed with `e` for a reason other than a full socket: the network refuses the
/// datagram (unreachable, too big), which is then dropped like a lost one (the transport
/// retransmits or fails the send) rather than kept to go again.
fn refused_for_good(e: i32) -> bool {
    e != libc::EAGAIN && e != libc::ENOBUFS && e != libc::EINTR
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list of datagrams as `send_batch` takes them, on the stack.
    type SendList<'a> = StackList<SendItem<'a>, SEND_BATCH>;

    #[test]
    fn loopback_batches_v4_and_v6() {
        for ip in [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ] {
            let (a, mut b) = match (UdpSock::bind(ip, 0, 1 << 20), UdpSock::bind(ip, 0, 1 << 20)) {
                (Ok(a), Ok(b)) => (a, b),
                _ if ip.is_ipv6() => continue, // no IPv6 on this host
                (Err(e), _) | (_, Err(e)) => panic!("bind {ip}: {e}"),
            };
            let msgs: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100 + i as usize]).collect();
            let to = b.local_addr();
            let items: Vec<SendItem> = msgs
                .iter()
                .map(|m| (&to, [&m[..], &[][..], &[][..]]))
                .collect();
            assert_eq!(a.send_batch(&items), 5);
            let mut bufs = vec![vec![0u8; 2048]; 8];
            let mut out = Vec::new();
            let mut got = 0;
            for _ in 0..1000 {
                got += b.recv_batch(&mut bufs[got..], &mut out);
                if got == 5 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert_eq!(got, 5);
            for (i, buf) in bufs.iter().take(5).enumerate() {
                assert_eq!(buf[0], i as u8);
            }
            assert_eq!(out.last().unwrap().1, a.local_addr());
            assert!(
                out.iter().all(|m| m.2 == m.0),
                "no GRO asked: one datagram each"
            );
        }
    }

    /// A lone datagram (`send_one`) arrives as its two parts joined, an empty one as an empty
    /// datagram, and one to an address nothing can reach counts as sent (dropped like a lost
    /// one), not as a full socket.
    #[test]
    fn lone_datagrams_arrive_whole() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let (a, mut b) = (
            UdpSock::bind(ip, 0, 1 << 20).unwrap(),
            UdpSock::bind(ip, 0, 1 << 20).unwrap(),
        );
        let to = b.local_addr();
        let (head, tail) = (vec![1u8; 24], vec![2u8; 100]);
        assert_eq!(a.send_batch(&[(&to, [&head[..], &tail[..], &[][..]])]), 1);
        assert_eq!(a.send_batch(&[(&to, [&[][..], &[][..], &[][..]])]), 1);
        let mut bufs = vec![vec![0u8; 2048]; 2];
        let (mut out, mut all) = (Vec::new(), Vec::new());
        let mut got = 0;
        for _ in 0..1000 {
            got += b.recv_batch(&mut bufs[got..], &mut out);
            all.extend_from_slice(&out);
            if got == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got, 2);
        assert_eq!(
            (all[0].0, all[1].0),
            (124, 0),
            "the joined parts, then the empty one"
        );
        assert_eq!(all[0].1, a.local_addr());
        assert_eq!(&bufs[0][..124], &[&head[..], &tail[..]].concat()[..]);
        assert!(bufs[0][124..].iter().all(|&x| x == 0));
        // Port 0 is no destination: refused at once (EINVAL), dropped, not retried.
        let nowhere = SocketAddr::new(ip, 0);
        assert_eq!(
            a.send_batch(&[(&nowhere, [&head[..], &[][..], &[][..]])]),
            1
        );
    }

    /// A run of equal datagrams to one peer (GSO where the kernel has it) still arrives as the
    /// separate datagrams that were sent, in order, the shorter last one included, whether the
    /// receiver takes runs whole (GRO) or not; a run to another destination in the same batch
    /// too.
    #[test]
    fn runs_of_datagrams_arrive_as_sent() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let (a, mut b, mut c) = (
            UdpSock::bind(ip, 0, 1 << 22).unwrap(),
            UdpSock::bind(ip, 0, 1 << 22).unwrap(),
            UdpSock::bind(ip, 0, 1 << 22).unwrap(),
        );
        // b takes runs coalesced (GRO), c one datagram per buffer.
        assert!(b.enable_gro(), "the kernel has UDP GRO (Linux 5.0+)");
        let mut msgs: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 1400]).collect();
        msgs[19].truncate(300);
        msgs.push(vec![99; 1400]);
        msgs.push(vec![100; 1400]);
        // Every other datagram in two parts (a header and a payload sent where it lies): the
        // kernel cuts a run's iovecs into the datagrams that were meant.
        fn parts(i: usize, m: &[u8]) -> [&[u8]; 3] {
            let (head, tail) = m.split_at(if i.is_multiple_of(2) { m.len() } else { 40 });
            [head, tail, &[]]
        }
        let (to_b, to_c) = (b.local_addr(), c.local_addr());
        let mut items: Vec<SendItem> = msgs[..20]
            .iter()
            .enumerate()
            .map(|(i, m)| (&to_b, parts(i, m)))
            .collect();
        items.extend(
            msgs[20..]
                .iter()
                .enumerate()
                .map(|(i, m)| (&to_c, parts(i + 1, m))),
        );
        assert_eq!(a.send_batch(&items), items.len());
        assert!(
            a.gso.load(Ordering::Relaxed),
            "loopback takes GSO messages (Linux 4.18+)"
        );
        let receive = |s: &mut UdpSock, want: usize| {
            let mut bufs = vec![vec![0u8; 65536]; BATCH];
            let (mut out, mut got, mut runs) = (Vec::new(), Vec::new(), 0);
            for _ in 0..1000 {
                s.recv_batch(&mut bufs, &mut out);
                for (k, (len, _, seg)) in out.iter().enumerate() {
                    // With GRO a buffer may hold a run: its datagrams are `seg`-byte pieces.
                    got.extend(bufs[k][..*len].chunks((*seg).max(1)).map(<[u8]>::to_vec));
                    runs += usize::from(seg < len);
                }
                if got.len() >= want {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            (got, runs)
        };
        let (got, runs) = receive(&mut b, 20);
        assert_eq!(got, msgs[..20].to_vec());
        assert!(runs > 0, "a GSO run on loopback reaches a GRO socket whole");
        let (got, runs) = receive(&mut c, 2);
        assert_eq!(got, msgs[20..].to_vec());
        assert_eq!(runs, 0);
    }

    /// A run of Ethernet-sized datagrams as long as one GSO message may be (44 of 1,472 bytes)
    /// is taken by one call, and arrives as sent. Cut at 32 items a call, the run left as two
    /// messages, each walking the stack and the link (veth tagged 1 MiB about 10 % slower).
    #[test]
    fn an_ethernet_run_as_long_as_gso_allows_leaves_in_one_call() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let (a, mut b) = (
            UdpSock::bind(ip, 0, 1 << 22).unwrap(),
            UdpSock::bind(ip, 0, 1 << 22).unwrap(),
        );
        let n = GSO_MAX_BYTES / 1472;
        assert_eq!(n, 44);
        let msgs: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 1472]).collect();
        let mut list = SendList::new();
        let to = b.local_addr();
        for m in &msgs {
            assert!(list.push((&to, [&m[..40], &m[40..], &[]])));
        }
        assert_eq!(list.len(), n);
        assert_eq!(
            a.send_batch(list.as_slice()),
            n,
            "all of the run in one call"
        );
        let mut bufs = vec![vec![0u8; 2048]; BATCH];
        let (mut out, mut got) = (Vec::new(), Vec::new());
        for _ in 0..1000 {
            let k = b.recv_batch(&mut bufs, &mut out);
            got.extend(
                bufs.iter()
                    .zip(&out)
                    .take(k)
                    .map(|(buf, m)| buf[..m.0].to_vec()),
            );
            if got.len() >= n {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got, msgs);
    }

    /// A batch groups datagrams into GSO messages as it is filled: one destination, no more
    /// than `max_run`, a shorter datagram (or an empty one) ending its message; and, cut one
    /// per datagram for a socket without GSO, every datagram's own iovecs, whatever its parts.
    #[test]
    fn a_batch_groups_datagrams_into_messages_and_cuts_them_back() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let (a, mut b) = (
            UdpSock::bind(ip, 0, 1 << 22).unwrap(),
            UdpSock::bind(ip, 0, 1 << 22).unwrap(),
        );
        let (to, other) = (b.local_addr(), SocketAddr::from(([127, 0, 0, 1], 9)));
        let full = [7u8; 100];
        let short = [8u8; 30];
        let mut batch = a.batch(3);
        // Parts as the device gives them: a header apart, a piece in one or two parts, a
        // datagram whose first part is empty.
        let datagrams: [(&SocketAddr, [&[u8]; 3]); 9] = [
            (&to, [&full[..8], &full[8..], &[]]),
            (&to, [&full[..8], &full[8..50], &full[50..]]),
            (&to, [&[], &full[..], &[]]),
            (&to, [&full[..], &[], &[]]),  // max_run: a new message
            (&to, [&short[..], &[], &[]]), // shorter: ends it
            (&to, [&full[..], &[], &[]]),
            (&other, [&full[..], &[], &[]]), // another destination
            (&other, [&[], &[], &[]]),       // empty: alone
            (&other, [&full[..], &[], &[]]),
        ];
        for (dest, parts) in datagrams {
            assert!(batch.push(dest, parts));
        }
        assert_eq!(batch.len(), 9);
        let runs: Vec<(SocketAddr, usize, usize)> = batch
            .msgs
            .as_slice()
            .iter()
            .map(|m| (*m.dest, m.count, m.seg))
            .collect();
        assert_eq!(
            runs,
            [
                (to, 3, 100),
                (to, 2, 100),
                (to, 1, 100),
                (other, 1, 100),
                (other, 1, 0),
                (other, 1, 100)
            ]
        );
        let singles = batch.one_per_datagram();
        let iov = batch.iov.as_slice();
        let cut: Vec<Vec<u8>> = singles
            .as_slice()
            .iter()
            .enumerate()
            .map(|(g, _)| {
                BatchMsg::iovecs(singles.as_slice(), g, iov)
                    .iter()
                    // SAFETY: each iovec was made from a live slice of this test's arrays.
                    .flat_map(|v| unsafe {
                        core::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len)
                    })
                    .copied()
                    .collect()
            })
            .collect();
        let want: Vec<Vec<u8>> = datagrams.iter().map(|(_, p)| p.concat()).collect();
        assert_eq!(cut, want);
        // Sent one per datagram, the first six (those to `b`) arrive as they were meant.
        let to_b = &singles.as_slice()[..6];
        assert_eq!(a.send_msgs(&iov[..singles.as_slice()[6].iov_at], to_b), 6);
        let got: Vec<Vec<u8>> = take(&mut b, 6).into_iter().map(|(_, d)| d).collect();
        assert_eq!(got, want[..6].to_vec());
        // A full batch refuses more.
        let mut batch = a.batch(64);
        for _ in 0..SEND_BATCH {
            assert!(batch.push(&to, [b"x", b"", b""]));
        }
        assert!(!batch.push(&to, [b"y", b"", b""]));
        assert_eq!(batch.len(), SEND_BATCH);
    }

    /// A full list refuses more instead of writing past its end.
    #[test]
    fn a_send_list_holds_at_most_one_batch() {
        let to = SocketAddr::from(([127, 0, 0, 1], 9));
        let mut list = SendList::new();
        for _ in 0..SEND_BATCH {
            assert!(list.push((&to, [b"x", b"", b""])));
        }
        assert!(!list.push((&to, [b"y", b"", b""])));
        assert_eq!(list.len(), SEND_BATCH);
        assert!(list.as_slice().iter().all(|i| i.1[0] == b"x"));
    }

    /// Receives until `want` datagrams came (or a second passed): their sources and bytes.
    fn take(sock: &mut UdpSock, want: usize) -> Vec<(SocketAddr, Vec<u8>)> {
        let mut bufs = vec![vec![0u8; 2048]; 4];
        let (mut out, mut got) = (Vec::new(), Vec::new());
        for _ in 0..1000 {
            let k = sock.recv_batch(&mut bufs, &mut out);
            got.extend((0..k).map(|i| (out[i].1, bufs[i][..out[i].0].to_vec())));
            if got.len() >= want {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        got
    }

    /// The first socket found empty `FIRST_QUIET_READS` times in a row while the second is
    /// connected is quiet. Read without it, only the connected peer's datagrams come; another
    /// peer's wait in the first socket, and come with the next read that asks for it, which
    /// ends the quiet.
    #[test]
    fn a_quiet_first_socket_may_be_skipped_and_keeps_its_datagrams() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let mut a = UdpSock::bind(lo, 0, 1 << 20).unwrap();
        let b = UdpSock::bind(lo, 0, 1 << 20).unwrap();
        let c = UdpSock::bind(lo, 0, 1 << 20).unwrap();
        let (ta, tb, tc) = (a.local_addr(), b.local_addr(), c.local_addr());
        let mut bufs = vec![vec![0u8; 2048]; 4];
        let mut out = Vec::new();
        for _ in 0..FIRST_QUIET_READS {
            assert_eq!(a.recv_batch_split(&mut bufs, &[], &mut out, true), 0);
        }
        assert!(
            !a.first_socket_quiet(),
            "nothing is quiet without a connected socket"
        );
        a.connect_peer(tb).unwrap();
        for _ in 0..FIRST_QUIET_READS {
            assert_eq!(a.recv_batch_split(&mut bufs, &[], &mut out, true), 0);
        }
        assert!(a.first_socket_quiet());
        assert_eq!(c.send_batch(&[(&ta, [b"c1", b"", b""])]), 1);
        assert_eq!(b.send_batch(&[(&ta, [b"b1", b"", b""])]), 1);
        // Loopback delivers within the send: both are there now.
        assert_eq!(a.recv_batch_split(&mut bufs, &[], &mut out, false), 1);
        assert_eq!((out[0].1, &bufs[0][..out[0].0]), (tb, &b"b1"[..]));
        assert_eq!(a.recv_batch_split(&mut bufs, &[], &mut out, false), 0);
        assert!(a.first_socket_quiet());
        assert_eq!(a.recv_batch_split(&mut bufs, &[], &mut out, true), 1);
        assert_eq!((out[0].1, &bufs[0][..out[0].0]), (tc, &b"c1"[..]));
        assert!(!a.first_socket_quiet());
        // Quiet again, then the connected socket moves to c: b's datagrams come to the first
        // socket from now on, so it is read at every poll at once.
        for _ in 0..FIRST_QUIET_READS {
            assert_eq!(a.recv_batch_split(&mut bufs, &[], &mut out, true), 0);
        }
        assert!(a.first_socket_quiet());
        a.connect_peer(tc).unwrap();
        assert!(
            !a.first_socket_quiet(),
            "moving the connected socket ends the quiet"
        );
        assert_eq!(b.send_batch(&[(&ta, [b"b2", b"", b""])]), 1);
        assert_eq!(a.recv_batch_split(&mut bufs, &[], &mut out, true), 1);
        assert_eq!((out[0].1, &bufs[0][..out[0].0]), (tb, &b"b2"[..]));
    }

    /// Sends to the connected peer leave from the same address and port, unnamed; what that
    /// peer and the others send still arrives, whichever socket it comes to; the port stays
    /// closed to other sockets, sharing or not; connecting to another peer moves the socket.
    #[test]
    fn a_connected_peer_socket_shares_the_address_and_nothing_is_lost() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let mut a = UdpSock::bind(lo, 0, 1 << 20).unwrap();
        let mut b = UdpSock::bind(lo, 0, 1 << 20).unwrap();
        let mut c = UdpSock::bind(lo, 0, 1 << 20).unwrap();
        let (ta, tb, tc) = (a.local_addr(), b.local_addr(), c.local_addr());
        // A peer loopback cannot reach: refused, and no socket is left bound.
        let far = SocketAddr::from(([192, 0, 2, 77], 9));
        assert!(matches!(a.connect_peer(far), Err(PeerSockError::Peer(_))));
        assert_eq!(a.connected_peer(), None);
        let fd = a.connect_peer(tb).unwrap();
        assert!(fd.is_some_and(|fd| fd != a.fd()));
        assert_eq!(a.connected_peer(), Some((tb, 0)));
        // Already connected there: nothing new.
        assert_eq!(a.connect_peer(tb).unwrap(), None);

        assert_eq!(a.send_batch(&[(&tb, [b"to b", b"", b""])]), 1);
        assert_eq!(a.connected_peer(), Some((tb, 1)));
        assert_eq!(take(&mut b, 1), vec![(ta, b"to b".to_vec())]);
        // A batch that names another peer goes out unconnected, from the same address.
        assert_eq!(
            a.send_batch(&[(&tb, [b"b2", b"", b""]), (&tc, [b"c1", b"", b""])]),
            2
        );
        assert_eq!(a.connected_peer(), Some((tb, 1)));
        assert_eq!(take(&mut b, 1), vec![(ta, b"b2".to_vec())]);
        assert_eq!(take(&mut c, 1), vec![(ta, b"c1".to_vec())]);

        // Both peers' datagrams arrive, each once.
        for i in 0..3u8 {
            assert_eq!(b.send_batch(&[(&ta, [&[b'b', i][..], b"", b""])]), 1);
            assert_eq!(c.send_batch(&[(&ta, [&[b'c', i][..], b"", b""])]), 1);
        }
        let mut got = take(&mut a, 6);
        got.sort();
        let mut want: Vec<_> = (0..3u8)
            .flat_map(|i| [(tb, vec![b'b', i]), (tc, vec![b'c', i])])
            .collect();
        want.sort();
        assert_eq!(got, want);
        assert!(take(&mut a, 1).is_empty());

        // The port is still ours alone.
        for share in [false, true] {
            let fd = new_socket(lo, 1 << 16).unwrap();
            if share {
                assert!(setsockopt_int(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_REUSEPORT,
                    1
                ));
            }
            assert_eq!(
                bind_to(fd.as_raw_fd(), &ta),
                Err(Errno::ADDRINUSE),
                "{share}"
            );
        }

        // Moved to c: sends to c go through it, and both peers still reach us.
        assert_eq!(a.connect_peer(tc).unwrap(), None);
        assert_eq!(a.connected_peer(), Some((tc, 1)));
        assert_eq!(a.send_batch(&[(&tc, [b"c2", b"", b""])]), 1);
        assert_eq!(a.connected_peer(), Some((tc, 2)));
        assert_eq!(take(&mut c, 1), vec![(ta, b"c2".to_vec())]);
        assert_eq!(b.send_batch(&[(&ta, [b"b9", b"", b""])]), 1);
        assert_eq!(c.send_batch(&[(&ta, [b"c9", b"", b""])]), 1);
        let mut got = take(&mut a, 2);
        got.sort();
        let mut want = vec![(tb, b"b9".to_vec()), (tc, b"c9".to_vec())];
        want.sort();
        assert_eq!(got, want);

        a.disconnect_peer();
        assert_eq!(a.connected_peer(), None);
        assert_eq!(a.send_batch(&[(&tb, [b"b3", b"", b""])]), 1);
        assert_eq!(take(&mut b, 1), vec![(ta, b"b3".to_vec())]);
    }
}
