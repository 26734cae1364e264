//! Runt-read messages (RUNTREAD_MSGRTM / RUNTREAD_TAGRTM, efa-reference §1, §3, §4) received
//! from an upstream-style sender, over the emulated EFA NIC (`device::verbs::emul`, a test
//! double for rdma-core).
//!
//! The sender is written by hand here: a queue pair of its own on the emulated NIC (its own
//! context and protection domain, as another process's would be), memory registered there for
//! remote reads, and packets built with the wire format of `rdm::pkt`. It sends what an
//! upstream endpoint sends when `FI_EFA_RUNT_SIZE` is set (or from device memory): the first
//! `runt_length` bytes of the message in several RUNTREAD packets, each with the whole header,
//! the `read_iov` entries of its registered memory and runt bytes at its `seg_offset`; the
//! receiver reads the rest with device RDMA and answers EOR. Its packets are sent in any
//! order, and carry the raw address (before the receiver's handshake) or the connid.
//!
//! This binary sets `FI_EFA_RUNT_SIZE`, so our endpoints send runt reads too: the last tests
//! have two of them talk.

#![allow(unsafe_code)]

mod common;

use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use common::node::*;
use fabric::abi::consts::*;
use fabric::core::Errno;
use fabric::prov::efa::EFA;
use fabric::prov::efa::device::verbs::{self, HwContext, HwMr, VerbsDevice};
use fabric::prov::efa::device::{Completion, Device, EfaAddr, HEADROOM};
use fabric::prov::efa::rdm::RdmEndpoint;
use fabric::prov::efa::rdm::pkt::{self, Ctrl, Pkt, ReqHdr, RmaIov};
use fabric::sys::mem::IoVec;
use fabric::util::cq::{CqEntry, CqErrEntry};
use fabric::util::ep::Call;

const RDM_DOMAIN: &str = "efa0-rdm";
/// Cut to 9,984 (a multiple of 64): two packets of at most 8,064 bytes of runt each.
const RUNT_SIZE: &str = "10000";

fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        verbs::emul::install();
        // SAFETY: runs once, before any test of this binary reads the environment (every test
        // calls init() first and the Once blocks the others until it is done).
        unsafe {
            std::env::set_var("FI_EFA_MTU_SIZE", "8192");
            std::env::set_var("FI_EFA_ENABLE_SHM_TRANSFER", "0");
            std::env::set_var("FI_EFA_RUNT_SIZE", RUNT_SIZE);
        };
    });
}

/// Our RDM endpoint on the emulated NIC, as an application that lets peers read its memory
/// opens it (provider keys, virtual addresses).
fn receiver() -> Node {
    init();
    let mut hints = fabric::core::Info {
        caps: FI_MSG | FI_TAGGED | FI_RMA | FI_SOURCE,
        ..Default::default()
    };
    hints.domain_attr.mr_mode = (FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR) as i32;
    Node::open_hints(&EFA, &hints, |i| {
        i.domain_attr.name.as_deref() == Some(RDM_DOMAIN)
    })
}

fn rdm(n: &Node) -> &RdmEndpoint {
    n.ep.as_any()
        .and_then(|e| e.downcast_ref::<RdmEndpoint>())
        .expect("an RDM endpoint")
}

/// A sender that speaks the wire protocol by hand over its own queue pair.
struct Upstream {
    hw: Arc<HwContext>,
    dev: VerbsDevice,
    to: EfaAddr,
    /// Requests carry the connid header instead of the raw address (what a sender does once
    /// it has the receiver's handshake).
    connid: bool,
    next_wr: u64,
    /// Every packet the receiver sent us (its handshake, EORs).
    heard: Vec<Vec<u8>>,
    out: Vec<Completion>,
}

impl Upstream {
    fn new(to: &Node) -> Upstream {
        let info = verbs::discover(Some(verbs::emul::NAME), Some(8192))
            .into_iter()
            .next()
            .expect("the emulated NIC");
        let hw = HwContext::open(&info).unwrap();
        let mut dev = VerbsDevice::open(&hw, 7).unwrap();
        for i in 0..32 {
            dev.post_recv(Vec::new(), i).unwrap();
        }
        Upstream {
            hw,
            dev,
            to: EfaAddr::from_bytes(&to.ep.getname().unwrap()).unwrap(),
            connid: false,
            next_wr: 1000,
            heard: Vec::new(),
            out: Vec::new(),
        }
    }

    /// `len` bytes of memory registered with our device for remote reads.
    fn memory(&self, len: usize) -> (&'static mut [u8], IoVec, HwMr) {
        let (m, v) = buf(len);
        let mr = self.hw.reg_mr(v, FI_SEND).unwrap();
        (m, v, mr)
    }

    fn send(&mut self, p: &[u8]) {
        let mut b = vec![0u8; HEADROOM + p.len()];
        b[HEADROOM..].copy_from_slice(p);
        self.next_wr += 1;
        self.dev
            .post_send(self.to, b, p.len(), IoVec::EMPTY, self.next_wr)
            .map_err(|(e, _)| e)
            .unwrap();
        self.dev.flush();
    }

    fn poll(&mut self) {
        self.dev.poll(&mut self.out, 64);
        for c in core::mem::take(&mut self.out) {
            match c {
                Completion::Recv {
                    wr_id,
                    buf,
                    off,
                    len,
                    ..
                } => {
                    self.heard.push(buf[off..off + len].to_vec());
                    self.dev.post_recv(buf, wr_id).unwrap();
                }
                Completion::Send { status, .. } => assert_eq!(status, Ok(()), "a send failed"),
                c => panic!("unexpected completion {c:?}"),
            }
        }
    }

    /// A request of type `ty` with header `h` and data `data` after the headers.
    fn req(&self, ty: u8, h: &ReqHdr, data: &[u8]) -> Vec<u8> {
        let me = self.dev.addr();
        let flags = if pkt::is_tagged(ty) {
            pkt::REQ_TAGGED
        } else {
            pkt::REQ_MSG
        };
        let mut b = vec![0u8; 256];
        let n = pkt::write_req(
            &mut b,
            ty,
            flags,
            h,
            &[],
            (!self.connid).then_some(&me),
            None,
            self.connid.then_some(me.qkey),
        );
        b.truncate(n);
        b.extend_from_slice(data);
        b
    }

    /// A request as `req` makes it, with `more` flags, `rma` entries and no raw address
    /// once `connid` is set.
    fn req_with(&self, ty: u8, more: u16, h: &ReqHdr, rma: &[RmaIov], data: &[u8]) -> Vec<u8> {
        let me = self.dev.addr();
        let flags = if pkt::is_tagged(ty) {
            pkt::REQ_TAGGED
        } else if rma.is_empty() {
            pkt::REQ_MSG
        } else {
            pkt::REQ_RMA
        };
        let mut b = vec![0u8; 256];
        let n = pkt::write_req(
            &mut b,
            ty,
            flags | more,
            h,
            rma,
            (!self.connid).then_some(&me),
            None,
            self.connid.then_some(me.qkey),
        );
        b.truncate(n);
        b.extend_from_slice(data);
        b
    }

    /// Our handshake with feature bits `extra` (efa-reference §2), as an upstream endpoint
    /// sends it; requests carry the connid from now on.
    fn handshake(&mut self, extra: u64) {
        let mut b = vec![0u8; 64];
        let n = pkt::write_handshake(&mut b, extra, self.dev.addr().qkey, 0xefa1, 8192);
        b.truncate(n);
        self.send(&b);
        self.connid = true;
    }

    /// Drives `b` and us until we heard a control packet `want` picks; removes and returns
    /// it.
    fn expect<T>(&mut self, b: &Node, what: &str, want: impl Fn(&Ctrl) -> Option<T>) -> T {
        let t = Instant::now();
        loop {
            let found = self.heard.iter().position(|p| match pkt::parse(p) {
                Ok(Pkt::Ctrl(c)) => want(&c).is_some(),
                _ => false,
            });
            if let Some(i) = found {
                let p = self.heard.remove(i);
                let Ok(Pkt::Ctrl(c)) = pkt::parse(&p) else {
                    unreachable!()
                };
                return want(&c).unwrap();
            }
            b.cq.progress();
            self.poll();
            assert!(t.elapsed() < Duration::from_secs(10), "no {what}");
        }
    }

    /// The requests `b` sent us so far (removed from what we heard).
    fn requests(&mut self) -> Vec<(pkt::Req, Vec<u8>)> {
        let mut out = Vec::new();
        self.heard.retain(|p| match pkt::parse(p) {
            Ok(Pkt::Req(r)) => {
                out.push((r.clone(), p[r.data_off..].to_vec()));
                false
            }
            _ => true,
        });
        out
    }

    /// Drives `b` and us until `b` sent us a request; returns it and its data.
    fn expect_req(&mut self, b: &Node) -> (pkt::Req, Vec<u8>) {
        let t = Instant::now();
        loop {
            let mut r = self.requests();
            if !r.is_empty() {
                assert_eq!(r.len(), 1, "one request at a time");
                return r.remove(0);
            }
            b.cq.progress();
            self.poll();
            assert!(t.elapsed() < Duration::from_secs(10), "no request");
        }
    }

    /// Receives `len` bytes of CTSDATA for our receive `recv_id` into `into`, from `from` on,
    /// driving `b`; every segment must lie in `[from, len)`.
    fn ctsdata(&mut self, b: &Node, recv_id: u32, into: &mut [u8], from: usize) {
        let mut got = from;
        let t = Instant::now();
        while got < into.len() {
            let mut rest = Vec::new();
            for p in core::mem::take(&mut self.heard) {
                match pkt::parse(&p) {
                    Ok(Pkt::Ctrl(Ctrl::CtsData {
                        recv_id: r,
                        seg_length,
                        seg_offset,
                        data_off,
                        ..
                    })) => {
                        assert_eq!(r, recv_id);
                        let (o, n) = (seg_offset as usize, seg_length as usize);
                        assert!(o >= from && o + n <= into.len(), "segment {o}+{n}");
                        into[o..o + n].copy_from_slice(&p[data_off..data_off + n]);
                        got += n;
                    }
                    _ => rest.push(p),
                }
            }
            self.heard = rest;
            b.cq.progress();
            self.poll();
            assert!(t.elapsed() < Duration::from_secs(10), "CTSDATA: {got}");
        }
    }

    fn eager(&self, msg_id: u32, data: &[u8]) -> Vec<u8> {
        let h = ReqHdr {
            msg_id,
            ..Default::default()
        };
        self.req(pkt::EAGER_MSGRTM, &h, data)
    }

    /// The send ids of the EORs heard so far.
    fn eors(&self) -> Vec<u32> {
        self.heard
            .iter()
            .filter_map(|p| match pkt::parse(p) {
                Ok(Pkt::Ctrl(Ctrl::Eor { send_id, .. })) => Some(send_id),
                _ => None,
            })
            .collect()
    }
}

/// A runt-read message of the upstream sender: `data` is the whole message, `runt` its
/// first bytes sent in packets of `segs` bytes each (adding up to `runt`); its registered
/// memory holds the rest where the message says, and garbage over the runt's place, so that
/// bytes read from there instead of taken from the packets show.
struct RuntMsg {
    tag: Option<u64>,
    msg_id: u32,
    send_id: u32,
    data: Vec<u8>,
    runt: usize,
    segs: Vec<usize>,
    iov: Vec<RmaIov>,
    _mr: HwMr,
}

impl RuntMsg {
    fn new(
        up: &Upstream,
        msg_id: u32,
        tag: Option<u64>,
        len: usize,
        segs: &[usize],
        seed: u8,
    ) -> RuntMsg {
        let data = pattern(len, seed);
        let runt: usize = segs.iter().sum();
        let (mem, _, mr) = up.memory(len);
        mem[..runt].fill(0xee);
        mem[runt..].copy_from_slice(&data[runt..]);
        // Two pieces, the second starting past the runt.
        let cut = runt + (len - runt) / 3;
        let base = mem.as_ptr() as u64;
        let key = u64::from(mr.rkey);
        let iov = vec![
            RmaIov {
                addr: base,
                len: cut as u64,
                key,
            },
            RmaIov {
                addr: base + cut as u64,
                len: (len - cut) as u64,
                key,
            },
        ];
        RuntMsg {
            tag,
            msg_id,
            send_id: 40 + msg_id,
            data,
            runt,
            segs: segs.to_vec(),
            iov,
            _mr: mr,
        }
    }

    fn ty(&self) -> u8 {
        if self.tag.is_some() {
            pkt::RUNTREAD_TAGRTM
        } else {
            pkt::RUNTREAD_MSGRTM
        }
    }

    fn header(&self, seg_offset: u64) -> ReqHdr {
        ReqHdr {
            msg_id: self.msg_id,
            tag: self.tag.unwrap_or(0),
            msg_length: self.data.len() as u64,
            send_id: self.send_id,
            read_iov_count: self.iov.len() as u32,
            seg_offset,
            runt_length: self.runt as u64,
            ..Default::default()
        }
    }

    /// Packet `i` of the runt: the header, the read_iov entries, its runt bytes.
    fn packet(&self, up: &Upstream, i: usize) -> Vec<u8> {
        let off: usize = self.segs[..i].iter().sum();
        self.packet_with(up, &self.header(off as u64), off, self.segs[i])
    }

    /// A packet with header `h` carrying the message's bytes `[off, off + n)`.
    fn packet_with(&self, up: &Upstream, h: &ReqHdr, off: usize, n: usize) -> Vec<u8> {
        let mut data = vec![0u8; self.iov.len() * pkt::RMA_IOV_LEN];
        pkt::write_read_iovs(&mut data, &self.iov);
        data.extend_from_slice(&self.data[off..off + n]);
        up.req(self.ty(), h, &data)
    }

    /// Sends the runt packets in the order `order` gives.
    fn send(&self, up: &mut Upstream, order: &[usize]) {
        assert_eq!(order.len(), self.segs.len());
        for &i in order {
            let p = self.packet(up, i);
            up.send(&p);
        }
    }
}

/// The receiver's next completion (Ok) or error completion (Err), the sender polling its
/// device meanwhile.
fn next(b: &Node, up: &mut Upstream) -> Result<CqEntry, CqErrEntry> {
    let t = Instant::now();
    loop {
        let mut got = None;
        match b.cq.read(1, |e| got = Some(*e)) {
            Ok(_) => return Ok(got.unwrap()),
            Err(Errno::AVAIL) => return Err(b.cq.readerr().unwrap()),
            Err(_) => {}
        }
        up.poll();
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no completion within 10 s"
        );
    }
}

fn next_ok(b: &Node, up: &mut Upstream) -> CqEntry {
    next(b, up).unwrap_or_else(|e| panic!("error completion {e:?}"))
}

/// Drives both sides for `ms` milliseconds; nothing may complete meanwhile.
fn idle(b: &Node, up: &mut Upstream, ms: u64) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(ms) {
        let mut got = None;
        let r = b.cq.read(1, |e| got = Some(*e));
        assert!(
            matches!(r, Err(Errno::AGAIN)),
            "nothing should complete yet: {r:?} {got:?}"
        );
        up.poll();
    }
}

/// Drives both sides until the sender has heard `n` EORs; returns their send ids.
fn eors(b: &Node, up: &mut Upstream, n: usize) -> Vec<u32> {
    let t = Instant::now();
    while up.eors().len() < n {
        b.cq.progress();
        up.poll();
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no EOR: {:?}",
            up.eors()
        );
    }
    up.eors()
}

fn recv(b: &Node, v: IoVec, tag: Option<u64>, ctx: usize) {
    b.recv(
        &[v],
        FI_ADDR_UNSPEC,
        tag.map(|t| (t, 0)),
        ctx,
        0,
        Call::Plain,
    )
    .unwrap();
}

/// Runt-read messages arrive whole and byte-exact: untagged and tagged, matched on arrival
/// and waiting unexpected, into registered receive buffers (read straight into them) and
/// unregistered ones (read through a staging buffer), with their runt packets out of order.
/// The runt comes from the packets, the rest from the sender's memory from `runt_length` on
/// (one device read per piece of it); EOR goes back with the sender's id.
#[test]
fn runt_read_messages_arrive_whole_with_packets_out_of_order() {
    let b = receiver();
    let mut up = Upstream::new(&b);
    // (tag, length, runt segments and the order they are sent in, receive registered,
    // receive posted first)
    type Case = (
        Option<u64>,
        usize,
        (&'static [usize], &'static [usize]),
        bool,
        bool,
    );
    let cases: [Case; 4] = [
        (None, 300_005, (&[4096, 4096, 1600], &[2, 0, 1]), true, true),
        (
            Some(0x5151),
            1 << 20,
            (&[4096, 2048, 4096], &[1, 2, 0]),
            false,
            false,
        ),
        (None, 200_000, (&[4096], &[0]), false, true),
        (Some(7), 700_001, (&[1024; 4], &[3, 1, 2, 0]), true, false),
    ];
    for (i, &(tag, len, (segs, order), registered, early)) in cases.iter().enumerate() {
        // The second half of the messages come with the connid header, as after the
        // receiver's handshake.
        up.connid = i >= 2;
        let m = RuntMsg::new(&up, i as u32, tag, len, segs, 60 + i as u8);
        let (dst, dv) = buf(len);
        let _mr = registered.then(|| b.reg(dv, FI_RECV, 0));
        let reads0 = rdm(&b).device_stats().rdma_reads;
        if early {
            recv(&b, dv, tag, 100 + i);
        }
        m.send(&mut up, order);
        if !early {
            idle(&b, &mut up, 30);
            recv(&b, dv, tag, 100 + i);
        }
        let r = next_ok(&b, &mut up);
        assert_eq!((r.op_context, r.len), (100 + i, len), "case {i}");
        let kind = if tag.is_some() { FI_TAGGED } else { FI_MSG };
        assert_eq!(r.flags & (FI_RECV | kind), FI_RECV | kind, "case {i}");
        assert_eq!(r.tag, tag.unwrap_or(0), "case {i}");
        assert!(dst == &m.data[..], "case {i}: bytes");
        assert_eq!(
            rdm(&b).device_stats().rdma_reads - reads0,
            2,
            "case {i}: one read per piece past the runt"
        );
        assert_eq!(eors(&b, &mut up, i + 1)[i], m.send_id, "case {i}: EOR");
    }
    assert_eq!(rdm(&b).drop_counts(), (0, 0));
}

/// The bug runt-read packets caused while they were refused: the message's msg_id never
/// came, and every later message of that sender waited behind it. Here an eager message sent
/// after a runt-read one arrives first, waits its turn, and is delivered right after it, in
/// order (the runt-read message takes the first receive posted); a third follows.
#[test]
fn a_message_after_a_runt_read_one_is_not_held_back() {
    let b = receiver();
    let mut up = Upstream::new(&b);
    let m = RuntMsg::new(&up, 0, None, 400_000, &[4096, 4096], 9);
    let (big, bv) = buf(400_000);
    let (small, sv) = buf(400_000);
    let (third, tv) = buf(64);
    recv(&b, bv, None, 1);
    recv(&b, sv, None, 2);
    recv(&b, tv, None, 3);
    let p = up.eager(1, b"after the runt read");
    up.send(&p);
    m.send(&mut up, &[1, 0]);
    let mut done: Vec<CqEntry> = (0..2).map(|_| next_ok(&b, &mut up)).collect();
    done.sort_by_key(|e| e.op_context);
    assert_eq!((done[0].op_context, done[0].len), (1, 400_000));
    assert_eq!((done[1].op_context, done[1].len), (2, 19));
    assert!(big == &m.data[..]);
    assert_eq!(&small[..19], b"after the runt read");
    let p = up.eager(2, b"and another");
    up.send(&p);
    let r = next_ok(&b, &mut up);
    assert_eq!((r.op_context, r.len), (3, 11));
    assert_eq!(&third[..11], b"and another");
    assert_eq!(eors(&b, &mut up, 1), [m.send_id]);
}

/// A runt-read message longer than its receive buffer is cut as a long-read one is: what
/// fits arrives, the receive completes with FI_ETRUNC (length received, overflow length),
/// and the sender still gets its EOR. Cut within the read part (reads stop at the buffer's
/// end) and within the runt (nothing is read at all).
#[test]
fn a_truncated_runt_read_message_is_cut_at_the_buffer() {
    let b = receiver();
    let mut up = Upstream::new(&b);
    let len = 250_000;
    for (i, cap) in [len - 1000, 5000].into_iter().enumerate() {
        let m = RuntMsg::new(&up, i as u32, None, len, &[4096, 4096, 2048], 20 + i as u8);
        let (dst, dv) = buf(cap);
        let reads0 = rdm(&b).device_stats().rdma_reads;
        recv(&b, dv, None, 10 + i);
        m.send(&mut up, &[1, 2, 0]);
        let e = next(&b, &mut up).expect_err("truncated");
        assert_eq!(
            (e.op_context, e.err, e.len, e.olen),
            (10 + i, FI_ETRUNC, cap, len - cap),
            "case {i}"
        );
        assert!(dst == &m.data[..cap], "case {i}: bytes up to the cut");
        let reads = rdm(&b).device_stats().rdma_reads - reads0;
        assert_eq!(reads, if cap > m.runt { 2 } else { 0 }, "case {i}");
        assert_eq!(eors(&b, &mut up, i + 1)[i], m.send_id, "case {i}: EOR");
    }
    // The next message of the sender.
    let (d, dv) = buf(16);
    recv(&b, dv, None, 20);
    let p = up.eager(2, b"next");
    up.send(&p);
    assert_eq!(next_ok(&b, &mut up).op_context, 20);
    assert_eq!(&d[..4], b"next");
}

/// Malformed runt-read packets are dropped and counted, never acted on: read_iov entries
/// missing from the packet or too many, entries that do not add up to the message (or
/// overflow), a runt longer than the message, runt bytes past the runt or at an offset that
/// overflows, a header cut short, and a later packet that disagrees with the first about the
/// message. A well-formed runt-read message then still arrives, as does the next message.
#[test]
fn malformed_runt_read_packets_are_dropped_and_counted() {
    let b = receiver();
    let mut up = Upstream::new(&b);
    let drops0 = rdm(&b).drop_counts().0;
    let mut id = 0u32;
    let mut bad = 0;
    // Each malformed first packet takes a msg_id in turn, as a message that never was.
    for k in 0..7 {
        let m = RuntMsg::new(&up, id, None, 100_000, &[4096], k);
        let mut h = m.header(0);
        let mut iov_bytes = vec![0u8; 2 * pkt::RMA_IOV_LEN];
        pkt::write_read_iovs(&mut iov_bytes, &m.iov);
        let mut data = iov_bytes.clone();
        data.extend_from_slice(&m.data[..100]);
        match k {
            // Three entries announced, two there and no runt byte.
            0 => {
                h.read_iov_count = 3;
                data.truncate(2 * pkt::RMA_IOV_LEN);
            }
            // More entries than a request may carry.
            1 => {
                h.read_iov_count = 7;
                data.resize(7 * pkt::RMA_IOV_LEN, 0);
            }
            2 => h.msg_length += 1,
            3 => {
                let huge = [
                    RmaIov {
                        len: u64::MAX,
                        ..m.iov[0]
                    },
                    RmaIov { len: 2, ..m.iov[1] },
                ];
                pkt::write_read_iovs(&mut data, &huge);
                data.truncate(2 * pkt::RMA_IOV_LEN + 1);
                h.msg_length = 1;
                h.runt_length = 1;
            }
            4 => h.runt_length = h.msg_length + 1,
            5 => h.seg_offset = 4096 - 99,
            _ => h.seg_offset = u64::MAX - 50,
        }
        let p = up.req(m.ty(), &h, &data);
        up.send(&p);
        id += 1;
        bad += 1;
    }
    // A header cut short (takes no msg_id: it is not a request at all).
    let m = RuntMsg::new(&up, id, None, 100_000, &[4096], 1);
    let p = m.packet(&up, 0);
    up.send(&p[..30]);
    bad += 1;
    idle(&b, &mut up, 30);
    assert_eq!(rdm(&b).drop_counts().0 - drops0, bad);

    // A good message, with a stray packet between its own that disagrees about the message
    // (another runt length) and one with bytes past its runt.
    let m = RuntMsg::new(&up, id, Some(3), 300_000, &[2048, 2048, 2048], 77);
    let (dst, dv) = buf(300_000);
    recv(&b, dv, Some(3), 5);
    let first = m.packet(&up, 1);
    up.send(&first);
    let mut h = m.header(0);
    h.runt_length = 4096;
    let stray = m.packet_with(&up, &h, 0, 2048);
    up.send(&stray);
    let past = m.packet_with(&up, &m.header(4096), 4096, 2049);
    up.send(&past);
    bad += 2;
    let p = m.packet(&up, 2);
    up.send(&p);
    idle(&b, &mut up, 30);
    let p = m.packet(&up, 0);
    up.send(&p);
    let r = next_ok(&b, &mut up);
    assert_eq!((r.op_context, r.len, r.tag), (5, 300_000, 3));
    assert!(dst == &m.data[..]);
    assert_eq!(rdm(&b).drop_counts().0 - drops0, bad);
    assert_eq!(eors(&b, &mut up, 1), [m.send_id]);
    // And the next message of the sender.
    let (d, dv) = buf(16);
    recv(&b, dv, None, 6);
    let p = up.eager(id + 1, b"still here");
    up.send(&p);
    assert_eq!(next_ok(&b, &mut up).op_context, 6);
    assert_eq!(&d[..10], b"still here");
}

/// A runt-read message whose reads the sender's NIC refuses (a wrong rkey) fails the receive
/// as a refused long read does — FI_EINVAL, EFA status 7 — once its runt packets are all in
/// (none is left over to be dropped), and no EOR goes back; the sender's next message
/// arrives.
#[test]
fn a_runt_read_whose_reads_are_refused_fails_the_receive() {
    let b = receiver();
    let mut up = Upstream::new(&b);
    let mut m = RuntMsg::new(&up, 0, None, 150_000, &[4096, 4096], 5);
    for r in &mut m.iov {
        r.key ^= 0x55;
    }
    let (_d, dv) = buf(150_000);
    recv(&b, dv, None, 1);
    let drops0 = rdm(&b).drop_counts().0;
    let p = m.packet(&up, 0);
    up.send(&p);
    idle(&b, &mut up, 30);
    let p = m.packet(&up, 1);
    up.send(&p);
    let e = next(&b, &mut up).expect_err("the receive fails");
    assert_eq!((e.op_context, e.err, e.prov_errno), (1, FI_EINVAL, 7));
    let (d, dv) = buf(16);
    recv(&b, dv, None, 2);
    let p = up.eager(1, b"next");
    up.send(&p);
    assert_eq!(next_ok(&b, &mut up).op_context, 2);
    assert_eq!(&d[..4], b"next");
    assert!(up.eors().is_empty());
    assert_eq!(rdm(&b).drop_counts().0, drops0);
}

// ---- runt reads we send (FI_EFA_RUNT_SIZE) ----

/// Two of our endpoints on the emulated NIC, each with the other's handshake (a first
/// write waits for it): (a, b, b's address at a).
fn pair() -> (Node, Node, u64) {
    let a = receiver();
    let b = receiver();
    let ab = a.insert_hex(&b.name_hex());
    b.insert_hex(&a.name_hex());
    let (t, tv) = buf(8);
    let mr = b.reg(tv, FI_REMOTE_WRITE, 0);
    let (_s, sv) = buf(8);
    let rma = [fi_rma_iov {
        addr: t.as_ptr() as u64,
        len: 8,
        key: mr.key(),
    }];
    a.rma(&[sv], ab, &rma, false, None, 99).unwrap();
    assert_eq!(a.wait_driving(&b, 10).unwrap().op_context, 99);
    (a, b, ab)
}

/// With `FI_EFA_RUNT_SIZE` set, a message that would go by long read sends its first 9,984
/// bytes in two RUNTREAD packets and has the receiver read the rest: tagged and untagged,
/// expected and unexpected, from one or two registered pieces, into registered and
/// unregistered buffers; the send completes on EOR. A message posted while another read
/// message still waits for its EOR, and a delivery-complete one, go by plain long read (one
/// request packet).
#[test]
fn with_fi_efa_runt_size_long_messages_go_by_runt_read() {
    let (a, b, ab) = pair();
    let cases: [(usize, bool, bool, bool); 3] = [
        // (length, tagged, receive registered, receive posted first)
        (1 << 20, false, true, true),
        ((3 << 20) + 5, true, false, false),
        (2 << 20, false, false, true),
    ];
    for (i, &(len, tagged, reg_recv, early)) in cases.iter().enumerate() {
        let want = pattern(len, 90 + i as u8);
        // Two pieces for the odd length, one otherwise.
        let (iov, _mrs) = a.registered_source(&want, len % 2 == 1);
        let (dst, dv) = buf(len);
        let _rm = reg_recv.then(|| b.reg(dv, FI_RECV, 0));
        let tag = tagged.then_some(0x99);
        let post_recv = || b.recv_any(dv, tag, 200 + i);
        let (sa, sb) = (rdm(&a).device_stats(), rdm(&b).device_stats());
        if early {
            post_recv();
        }
        a.send(&iov, ab, tag, 100 + i, 0, Call::Plain).unwrap();
        if !early {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(30) {
                b.cq.progress();
                a.cq.progress();
            }
            post_recv();
        }
        let r = b.wait_driving(&a, 10).unwrap();
        let s = a.wait_driving(&b, 10).unwrap();
        assert_eq!((s.op_context, r.op_context, r.len), (100 + i, 200 + i, len));
        assert!(dst == &want[..], "case {i}: bytes");
        let (da, db) = (rdm(&a).device_stats(), rdm(&b).device_stats());
        assert_eq!(da.data_sent - sa.data_sent, 2, "case {i}: two runt packets");
        assert_eq!(
            db.rdma_reads - sb.rdma_reads,
            iov.len() as u64,
            "case {i}: the rest read, one read per piece"
        );
    }
    // Two at once: the second waits for no EOR of the first and goes by long read; so does
    // a delivery-complete one.
    let len = 1 << 20;
    let (s, sv) = buf(len);
    s.copy_from_slice(&pattern(len, 3));
    let _m = a.reg(sv, FI_SEND, 0);
    let (d1, v1) = buf(len);
    let (d2, v2) = buf(len);
    let (d3, v3) = buf(len);
    for (k, v) in [v1, v2, v3].into_iter().enumerate() {
        b.recv(&[v], FI_ADDR_UNSPEC, None, 20 + k, 0, Call::Plain)
            .unwrap();
    }
    let sa = rdm(&a).device_stats();
    a.send(&[sv], ab, None, 10, 0, Call::Plain).unwrap();
    a.send(&[sv], ab, None, 11, 0, Call::Plain).unwrap();
    a.send(&[sv], ab, None, 12, FI_DELIVERY_COMPLETE, Call::Msg)
        .unwrap();
    assert_eq!(rdm(&a).device_stats().data_sent - sa.data_sent, 2 + 1 + 1);
    let mut got: Vec<usize> = (0..3)
        .map(|_| b.wait_driving(&a, 10).unwrap().op_context)
        .collect();
    got.sort();
    assert_eq!(got, [20, 21, 22]);
    let mut sent: Vec<usize> = (0..3)
        .map(|_| a.wait_driving(&b, 10).unwrap().op_context)
        .collect();
    sent.sort();
    assert_eq!(sent, [10, 11, 12]);
    for d in [d1, d2, d3] {
        assert!(d == &pattern(len, 3)[..]);
    }
    assert_eq!(rdm(&b).drop_counts(), (0, 0));
}

// ---- READ_NACK (efa-reference §3): reads the receiver cannot serve ----

/// Two of our endpoints, the receiver's NIC refusing registrations (the emulated NIC told
/// so): a runt-read message into a receive buffer the device does not know cannot be read,
/// so after its runt packets the receiver answers READ_NACK, and the sender goes on by
/// long-CTS from the end of the runt (a LONGCTS request flagged READ_NACK with no data, then
/// CTSDATA). Both complete without error, the bytes are right, the receiver's device read
/// nothing. Registrations accepted again, the next message goes by runt read: the sender
/// gave its read slot back.
#[test]
fn a_runt_read_the_receiver_cannot_register_goes_on_by_long_cts() {
    use verbs::emul;
    let (a, b, ab) = pair();
    for (i, &(len, tagged)) in [(2 << 20, false), ((3 << 20) + 5, true)].iter().enumerate() {
        let want = pattern(len, 60 + i as u8);
        let (iov, _mrs) = a.registered_source(&want, len % 2 == 1);
        let (dst, dv) = buf(len);
        let tag = tagged.then_some(0x31);
        recv(&b, dv, tag, 300 + i);
        let (sa, sb) = (rdm(&a).device_stats(), rdm(&b).device_stats());
        let (na, nb) = (rdm(&a).read_nacks(), rdm(&b).read_nacks());
        emul::refuse_registrations(true);
        a.send(&iov, ab, tag, 400 + i, 0, Call::Plain).unwrap();
        let r = b.wait_driving(&a, 10).unwrap();
        let s = a.wait_driving(&b, 10).unwrap();
        emul::refuse_registrations(false);
        assert_eq!((s.op_context, r.op_context, r.len), (400 + i, 300 + i, len));
        assert!(dst == &want[..], "case {i}: bytes");
        assert_eq!(rdm(&b).read_nacks().0 - nb.0, 1, "case {i}: READ_NACK sent");
        assert_eq!(rdm(&a).read_nacks().1 - na.1, 1, "case {i}: and acted on");
        let (da, db) = (rdm(&a).device_stats(), rdm(&b).device_stats());
        assert_eq!(db.rdma_reads, sb.rdma_reads, "case {i}: nothing read");
        // Two runt packets, the flagged request, then the rest in CTSDATA.
        let rest = (len - 9984).div_ceil(8192 - 32) as u64;
        assert!(da.data_sent - sa.data_sent >= 3 + rest, "case {i}");
    }
    let len = 1 << 20;
    let want = pattern(len, 7);
    let (iov, _mrs) = a.registered_source(&want, false);
    let (dst, dv) = buf(len);
    recv(&b, dv, None, 1);
    let (sa, sb) = (rdm(&a).device_stats(), rdm(&b).device_stats());
    a.send(&iov, ab, None, 2, 0, Call::Plain).unwrap();
    b.wait_driving(&a, 10).unwrap();
    a.wait_driving(&b, 10).unwrap();
    assert!(dst == &want[..]);
    assert_eq!(
        rdm(&a).device_stats().data_sent - sa.data_sent,
        2,
        "runt read"
    );
    assert_eq!(rdm(&b).device_stats().rdma_reads - sb.rdma_reads, 1);
    assert_eq!(rdm(&b).drop_counts(), (0, 0));
}

/// Our receiver and an upstream-style runt-read sender, the receiver's NIC refusing
/// registrations. A sender that never said it understands READ_NACK (no handshake) gets
/// none: the receive fails, as before. One whose handshake has extra-info bit 6 gets
/// READ_NACK {its send_id, our recv_id, our connid} after its runt packets; its long-CTS
/// request flagged READ_NACK (no data, same msg_id, bypassing the message order) joins the
/// receive, our CTS asks for the rest from the end of the runt, and its CTSDATA completes
/// the message byte-exact. No EOR, nothing dropped.
#[test]
fn runt_reads_we_cannot_register_for_are_nacked_to_senders_that_understand_it() {
    use verbs::emul;
    let b = receiver();
    let len = 150_000;
    let me = EfaAddr::from_bytes(&b.ep.getname().unwrap()).unwrap();
    {
        let mut up = Upstream::new(&b);
        let m = RuntMsg::new(&up, 0, None, len, &[4096, 4096], 11);
        let (_d, dv) = buf(len);
        recv(&b, dv, None, 1);
        emul::refuse_registrations(true);
        m.send(&mut up, &[1, 0]);
        let e = next(&b, &mut up).expect_err("the receive fails");
        emul::refuse_registrations(false);
        assert_eq!(e.op_context, 1);
        assert!(
            !up.heard.iter().any(|p| p[0] == pkt::READ_NACK),
            "no READ_NACK to a sender that did not ask"
        );
    }
    let mut up = Upstream::new(&b);
    up.handshake(
        pkt::EXTRA_RDMA_READ | pkt::EXTRA_RUNT | pkt::EXTRA_READ_NACK | pkt::EXTRA_CONNID_HEADER,
    );
    let m = RuntMsg::new(&up, 0, Some(0x42), len, &[4096, 4096], 12);
    let (dst, dv) = buf(len);
    recv(&b, dv, Some(0x42), 2);
    let drops = rdm(&b).drop_counts();
    emul::refuse_registrations(true);
    m.send(&mut up, &[1, 0]);
    let (send_id, recv_id, connid) = up.expect(&b, "READ_NACK", |c| match *c {
        Ctrl::ReadNack {
            send_id,
            recv_id,
            connid,
        } => Some((send_id, recv_id, connid)),
        _ => None,
    });
    assert_eq!((send_id, connid), (m.send_id, Some(me.qkey)));
    // An eager message behind it (msg_id 1) is not held back by the flagged request.
    let (small, sv) = buf(16);
    recv(&b, sv, Some(0x42), 3);
    let h = ReqHdr {
        msg_id: 1,
        tag: 0x42,
        ..Default::default()
    };
    let p = up.req_with(pkt::EAGER_TAGRTM, 0, &h, &[], b"behind");
    up.send(&p);
    assert_eq!(next_ok(&b, &mut up).op_context, 3);
    assert_eq!(&small[..6], b"behind");
    let h = ReqHdr {
        msg_id: 0,
        tag: 0x42,
        msg_length: len as u64,
        send_id: m.send_id,
        credit_request: 32,
        ..Default::default()
    };
    let p = up.req_with(pkt::LONGCTS_TAGRTM, pkt::REQ_READ_NACK, &h, &[], &[]);
    up.send(&p);
    let (to, from, window) = up.expect(&b, "CTS", |c| match *c {
        Ctrl::Cts {
            send_id,
            recv_id,
            recv_length,
            ..
        } => Some((send_id, recv_id, recv_length)),
        _ => None,
    });
    assert_eq!((to, from), (m.send_id, recv_id));
    assert_eq!(
        window,
        (len - m.runt) as u64,
        "the rest, from the end of the runt"
    );
    let qkey = up.dev.addr().qkey;
    let mut off = m.runt;
    while off < len {
        let n = 8000.min(len - off);
        let mut p = vec![0u8; 32];
        let hl = pkt::write_ctsdata(&mut p, recv_id, n as u64, off as u64, qkey);
        p.truncate(hl);
        p.extend_from_slice(&m.data[off..off + n]);
        up.send(&p);
        off += n;
    }
    let r = next_ok(&b, &mut up);
    emul::refuse_registrations(false);
    assert_eq!((r.op_context, r.len, r.tag), (2, len, 0x42));
    assert!(dst == &m.data[..], "bytes");
    assert!(up.eors().is_empty());
    assert_eq!(rdm(&b).read_nacks().0, 1);
    assert_eq!(rdm(&b).drop_counts(), drops);
}

/// Our sender and an upstream-style receiver that cannot register memory: it answers our
/// LONGREAD_TAGRTM, and our LONGREAD_RTW (its device reads but does not write), with
/// READ_NACK. Each goes on by long-CTS: a LONGCTS_TAGRTM / LONGCTS_RTW flagged READ_NACK,
/// same msg_id, send_id, length (and tag, target entry), no data; then CTSDATA for the
/// window the receiver grants, byte-exact; the send and the write complete.
#[test]
fn a_sender_nacked_by_its_receiver_goes_on_by_long_cts() {
    let a = receiver();
    let mut up = Upstream::new(&a);
    for i in 32..300 {
        up.dev.post_recv(Vec::new(), i).unwrap();
    }
    up.handshake(pkt::EXTRA_RDMA_READ | pkt::EXTRA_READ_NACK | pkt::EXTRA_CONNID_HEADER);
    // Our endpoint has the handshake once it answered with its own, which says it
    // understands READ_NACK (bit 6) and never asks for unsolicited write receive (bit 8).
    let extra = up.expect(&a, "handshake", |c| match *c {
        Ctrl::Handshake { extra_info, .. } => Some(extra_info),
        _ => None,
    });
    assert_ne!(extra & pkt::EXTRA_READ_NACK, 0);
    assert_eq!(extra & pkt::EXTRA_UNSOLICITED_WRITE_RECV, 0);
    let hex: String = up
        .dev
        .addr()
        .to_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let au = a.insert_hex(&hex);
    let qkey = up.dev.addr().qkey;
    let nack = |up: &mut Upstream, send_id: u32| {
        let mut p = vec![0u8; 16];
        let n = pkt::write_read_nack(&mut p, send_id, 77, qkey);
        up.send(&p[..n]);
    };
    let cts = |up: &mut Upstream, send_id: u32, len: usize| {
        let mut p = vec![0u8; 24];
        let n = pkt::write_cts(&mut p, false, qkey, send_id, 77, len as u64);
        up.send(&p[..n]);
    };

    // A tagged message of 1 MiB: long read, then long-CTS.
    let len = 1 << 20;
    let want = pattern(len, 21);
    let (iov, _mrs) = a.registered_source(&want, false);
    a.send(&iov, au, Some(5), 1, 0, Call::Plain).unwrap();
    let (req, _) = up.expect_req(&a);
    assert_eq!(req.ty, pkt::LONGREAD_TAGRTM);
    let (msg_id, send_id) = (req.hdr.msg_id, req.hdr.send_id);
    nack(&mut up, send_id);
    let (req, data) = up.expect_req(&a);
    assert_eq!(req.ty, pkt::LONGCTS_TAGRTM);
    assert_ne!(req.flags & pkt::REQ_READ_NACK, 0, "flagged READ_NACK");
    let h = req.hdr;
    assert_eq!(
        (h.msg_id, h.send_id, h.msg_length, h.tag),
        (msg_id, send_id, len as u64, 5)
    );
    assert!(data.is_empty(), "no data");
    cts(&mut up, send_id, len);
    let mut got = vec![0u8; len];
    up.ctsdata(&a, 77, &mut got, 0);
    assert!(got == want, "message bytes");
    assert_eq!(a.wait(10).unwrap().op_context, 1);

    // A write of 100,000 bytes: LONGREAD_RTW, then long-CTS.
    let wlen = 100_000;
    let wsrc = pattern(wlen, 22);
    let (s, sv) = buf(wlen);
    s.copy_from_slice(&wsrc);
    let _m = a.reg(sv, FI_WRITE, 0);
    let target = RmaIov {
        addr: 0x10_0000,
        len: wlen as u64,
        key: 0x1234,
    };
    let rma = [fi_rma_iov {
        addr: target.addr,
        len: wlen,
        key: target.key,
    }];
    a.rma(&[sv], au, &rma, false, None, 2).unwrap();
    let (req, _) = up.expect_req(&a);
    assert_eq!(req.ty, pkt::LONGREAD_RTW);
    let send_id = req.hdr.send_id;
    nack(&mut up, send_id);
    let (req, data) = up.expect_req(&a);
    assert_eq!(req.ty, pkt::LONGCTS_RTW);
    assert_ne!(req.flags & pkt::REQ_READ_NACK, 0, "flagged READ_NACK");
    assert_eq!(
        (req.hdr.send_id, req.hdr.msg_length, req.rma.as_slice()),
        (send_id, wlen as u64, &[target][..])
    );
    assert!(data.is_empty(), "no data");
    cts(&mut up, send_id, wlen);
    let mut got = vec![0u8; wlen];
    up.ctsdata(&a, 77, &mut got, 0);
    assert!(got == wsrc, "written bytes");
    assert_eq!(a.wait(10).unwrap().op_context, 2);
    assert_eq!(rdm(&a).read_nacks(), (0, 2));
}
