//! What the fuzz targets run (`fuzz/fuzz_targets/*`, driven by `cargo fuzz`) and what
//! `tests/fuzz_corpus.rs` replays from their committed corpora in every `cargo test`. Each
//! entry point takes arbitrary bytes: whatever they are, it must neither panic nor hang, and
//! it must not let a hostile peer touch memory it was not granted.
//!
//! Inputs are scripts rather than single packets, so that the fuzzer reaches the state behind
//! the parsers: a header the harness may "repair" (right version, QKEY and checksum, a real MR
//! key) gets past the first check and into the protocol.
#![doc(hidden)]

use std::sync::Arc;

use crate::abi::consts::*;
use crate::core::info::Info;
use crate::core::provider::InfoProvider;
use crate::prov::efa::rdm::pkt;
use crate::prov::efa::srd::{Config, PeerKey, Time, Transport, US, wire};
use crate::prov::shm::{CMD_SIZE, Cmd, OP_CONNECT, SHM, ShmEndpoint, ShmProvider};
use crate::sys::mem::IoVec;
use crate::util::cq::{Cq, CqAttr};
use crate::util::ep::{Call, MsgOp};
use crate::util::mr::MrRequest;
use crate::util::provider::{Bind, Endpoint, Provider};

/// Reads the script one byte (or chunk) at a time; zero once it is used up.
struct Script<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Script<'_> {
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from(self.byte()) | u16::from(self.byte()) << 8
    }

    fn chunk(&mut self, n: usize) -> &[u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos = end;
        &self.data[start..end]
    }
}

/// The SRD transport against three hostile peers: datagrams (raw, or with version, QKEYs and
/// checksum repaired), time passing, local sends, and draining of transmits and completions
/// (with the acks kept on data applied first, for inputs of odd length).
pub fn srd_transport(data: &[u8]) {
    const QKEY: u32 = 0x5eed_0001;
    let peer_qkey = |p: u8| 0x7000_0000 + u32::from(p);
    let mut t: Transport<u8> = Transport::new(
        Config {
            qkey: QKEY,
            // Half the inputs keep acks that come on data until the owner's flush, as the
            // UDP device does.
            defer_acks: data.len() % 2 == 1,
            ..Config::default()
        },
        1,
    );
    let mut s = Script { data, pos: 0 };
    let mut now: Time = 0;
    let mut wr_id = 0u64;
    while !s.done() {
        let op = s.byte();
        let peer = (op >> 5) & 3;
        match op % 5 {
            0 | 1 => {
                let len = usize::from(s.u16() % 2048);
                let mut d = s.chunk(len).to_vec();
                if op & 0x08 != 0 && d.len() >= wire::RNR_LEN {
                    d[0] = wire::VERSION;
                    d[4..8].copy_from_slice(&QKEY.to_le_bytes());
                    d[8..12].copy_from_slice(&peer_qkey(peer).to_le_bytes());
                    wire::seal(&mut d, op & 0x04 != 0);
                }
                let _ = t.handle_datagram(now, peer, &d, op & 0x10 != 0);
            }
            2 => {
                now += Time::from(s.u16()) * 10 * US;
                t.handle_timeout(now);
            }
            3 => {
                let len = usize::from(s.byte()) * 8;
                wr_id += 1;
                let dest = PeerKey {
                    addr: peer,
                    qkey: peer_qkey(peer),
                };
                t.send(now, dest, wr_id, vec![0u8; wire::DATA_HEADER + len]);
            }
            _ => {
                t.settle_acks();
                t.flush_acks();
                while t.poll_transmit().is_some() {}
                while t.poll_completion().is_some() {}
            }
        }
        assert!(
            t.outstanding() as u64 <= wr_id,
            "more in flight than was sent"
        );
    }
    // Every send ends, one way or another, once enough time passes with no answers.
    for _ in 0..100_000 {
        while t.poll_transmit().is_some() {}
        while t.poll_completion().is_some() {}
        match t.poll_timeout() {
            Some(at) => {
                now = now.max(at);
                t.handle_timeout(now);
            }
            None => break,
        }
    }
    while t.poll_completion().is_some() {}
    assert_eq!(
        t.outstanding(),
        0,
        "sends left hanging after the peers went silent"
    );
}

/// The RDM packet parser; a packet it accepts is taken apart field by field.
pub fn rdm_packet(data: &[u8]) {
    if let Ok(p) = pkt::parse(data) {
        let _ = format!("{p:?}");
    }
}

/// Fragments below the transport (`efa::device::fragment`), as the UDP device takes them from
/// hostile peers: each step is a raw fragment (often repaired to our magic, a valid
/// index/count byte and a piece size that fits its length) from one of three sources, or a
/// GRO run of such fragments joined in place. Nothing may panic, and no datagram may come
/// out longer than the reassembly's capacity or, joined in a run, past the run's bytes.
/// Then the fragments of two known datagrams, in an order, with losses and repeats the script
/// chooses, must join to exactly those datagrams (at most once each) and nothing else.
pub fn udp_fragments(data: &[u8]) {
    use crate::prov::efa::device::fragment::{
        HDR, Link, MAGIC, Reassembly, join_in_run, len_in_run, whole_in_run,
    };
    const CAP: usize = 2048;
    let mut s = Script { data, pos: 0 };
    let mut r = Reassembly::new(CAP);
    let src = |b: u8| std::net::SocketAddr::from(([10, 0, 0, 1], 1 + u16::from(b % 3)));
    let raw = usize::from(s.byte() % 32);
    for _ in 0..raw {
        let op = s.byte();
        let n = usize::from(s.byte()) * 4 % 700;
        let mut frag = s.chunk(n).to_vec();
        if op & 1 != 0 && frag.len() > HDR {
            frag[0] = MAGIC;
            frag[1] = ((frag[1] >> 4) % 8) << 4 | (2 + frag[1] % 7);
            let piece = if op & 2 != 0 {
                frag.len() - HDR
            } else {
                frag.len() - HDR + 3
            };
            frag[2..4].copy_from_slice(&(piece as u16).to_le_bytes());
        }
        if op & 4 != 0 {
            let mut run = [frag.clone(), frag.clone(), frag].concat();
            let seg = run.len() / 3;
            if seg > 0
                && let Some((count, end)) = whole_in_run(&run, 0, seg)
            {
                assert!(end <= run.len());
                // Read where the pieces lie, from a scripted byte on: what joining gives.
                let start = usize::from(op >> 3) % (len_in_run(0, end, count) + 1);
                let (_, parts) = read_in_pieces(&run, seg, count, end, start);
                let at = join_in_run(&mut run, 0, seg, count, end);
                assert!(at.end <= end && at.start == HDR);
                assert_eq!(parts, run[at.start + start..at.end]);
            }
        } else if let Some(slot) = r.add(src(op >> 3), &frag) {
            let (buf, len) = r.datagram(slot);
            assert!(len <= CAP && buf.len() >= len);
            r.release(slot);
        }
    }
    // Known datagrams: every one that completes is exact.
    let link = Link {
        payload: 64 + usize::from(s.byte() % 64),
        max_count: 8,
    };
    let datagrams: Vec<Vec<u8>> = (0..2u8)
        .map(|d| {
            let n = link.payload + 1 + usize::from(s.u16()) % (link.max_datagram() - link.payload);
            (0..n).map(|i| (i as u8).wrapping_mul(31) ^ d).collect()
        })
        .collect();
    let mut frags: Vec<(u32, Vec<u8>)> = Vec::new();
    for (id, d) in datagrams.iter().enumerate() {
        let count = link.count(d.len());
        for (k, [a, b]) in link.pieces([d, &[]]).enumerate() {
            frags.push((
                id as u32,
                [&link.header(k, count, id as u32)[..], a, b].concat(),
            ));
        }
    }
    // The first datagram's fragments as a GRO run holds them: read in pieces from any byte,
    // and joined, exactly the datagram.
    let first: Vec<u8> = frags
        .iter()
        .filter(|f| f.0 == 0)
        .flat_map(|f| f.1.iter().copied())
        .collect();
    let seg = frags[0].1.len();
    let (count, end) = whole_in_run(&first, 0, seg).expect("a datagram's fragments in order");
    let d = &datagrams[0];
    let start = usize::from(s.u16()) % d.len();
    assert_eq!(len_in_run(0, end, count), d.len());
    let (p, parts) = read_in_pieces(&first, seg, count, end, start);
    assert_eq!(parts, d[start..], "read in pieces from byte {start}");
    let mut joined = first.clone();
    assert_eq!(
        p.join(&mut joined).map(|at| joined[at].to_vec()),
        Some(d[start..].to_vec())
    );
    let mut r = Reassembly::new(link.max_datagram());
    // Adds one known fragment; the datagram it completes must be exactly the one sent.
    let mut join = |id: u32, f: &[u8]| -> bool {
        let Some(slot) = r.add(src(0), f) else {
            return false;
        };
        let (buf, len) = r.datagram(slot);
        assert_eq!(
            &buf[..len],
            &datagrams[id as usize][..],
            "datagram {id} joined wrong"
        );
        r.release(slot);
        true
    };
    if s.byte() == 0 {
        // The whole set in a scripted order, none lost: both must come out.
        let mut done = [false; 2];
        let mut order: Vec<usize> = (0..frags.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, usize::from(s.byte()) % (i + 1));
        }
        for &k in &order {
            let (id, f) = &frags[k];
            if join(*id, f) {
                done[*id as usize] = true;
            }
        }
        assert_eq!(
            done, [true; 2],
            "fragments all there, in any order, and not joined"
        );
        return;
    }
    while !s.done() && !frags.is_empty() {
        let pick = usize::from(s.byte()) % frags.len();
        let (id, f) = match s.byte() % 4 {
            0 => frags.remove(pick),
            1 => frags[pick].clone(),
            _ => frags.swap_remove(pick),
        };
        join(id, &f);
    }
}

/// The bytes from `start` on of the datagram whose `count` fragments lie from the start of
/// `run` to `end`, `seg` bytes apart, read where the pieces lie (`fragment::InPieces`).
fn read_in_pieces(
    run: &[u8],
    seg: usize,
    count: usize,
    end: usize,
    start: usize,
) -> (crate::prov::efa::device::fragment::InPieces, Vec<u8>) {
    use crate::prov::efa::device::fragment::{InPieces, len_in_run};
    let p = InPieces {
        off: 0,
        end,
        seg,
        count,
        start,
        len: len_in_run(0, end, count) - start,
    };
    let parts = p.parts(run, 0..usize::MAX).flatten().copied().collect();
    (p, parts)
}

/// Memory the shm harness registers and receives into, leaked once per thread (the endpoint
/// that used it is closed before the next input).
fn harness_memory() -> (IoVec, IoVec) {
    thread_local! {
        static MEM: (IoVec, IoVec) = (
            IoVec::from_mut_slice(Box::leak(vec![0u8; 64 << 10].into_boxed_slice())),
            IoVec::from_mut_slice(Box::leak(vec![0u8; 16 << 10].into_boxed_slice())),
        );
    }
    MEM.with(|m| *m)
}

/// A fresh shm endpoint fed hostile commands from a peer that connected (under a name whose
/// region does not exist, so nothing is read from or written to another process): messages
/// against posted receives of every kind, RMA and atomics against a registered region (entries
/// repaired to its key and nearby addresses), acknowledgements of operations that do not
/// exist. Completions are drained; every posted receive is cancelled at the end. Returns how
/// many completions and error completions were seen (none if the endpoint could not be opened).
pub fn shm_commands(data: &[u8]) -> (usize, usize) {
    const TOKEN: u64 = 0xf022_0000_0000_0001;
    let hints = Info {
        caps: FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_MULTI_RECV | FI_SOURCE,
        ..Default::default()
    };
    let Ok(info) = SHM.getinfo(fi_version(2, 6), None, None, 0, Some(&hints)) else {
        return (0, 0);
    };
    let info = &info[0];
    // Opening the fabric sweeps regions of dead processes, as in a real program.
    if SHM.fabric(&info.fabric_attr).is_err() {
        return (0, 0);
    }
    let Ok(domain) = ShmProvider::open_domain(info) else {
        return (0, 0);
    };
    let Ok(ep) = domain.open_endpoint(info) else {
        return (0, 0);
    };
    let (mem, rbuf) = harness_memory();
    let Ok(cq) = Cq::new(&CqAttr {
        size: 64,
        flags: 0,
        format: FI_CQ_FORMAT_TAGGED,
        wait_obj: FI_WAIT_NONE,
        wait_cond: 0,
    }) else {
        return (0, 0);
    };
    let setup = (|| {
        use crate::util::provider::Domain;
        ep.bind(Bind::Cq(cq.clone()), FI_TRANSMIT | FI_RECV)?;
        ep.bind(Bind::Av(domain.av_open(&Default::default())?), 0)?;
        ep.enable()?;
        domain.mr_reg(&MrRequest {
            iov: vec![mem],
            access: FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE,
            offset: 0,
            requested_key: 7,
            flags: 0,
            context: 0,
            iface: 0,
            device: 0,
        })
    })();
    let Ok(mr) = setup else {
        return (0, 0);
    };
    // Receives of every kind: plain, tagged (one matches tag 0 only, one anything), and a
    // multi-receive buffer.
    let pieces = [
        rbuf.sub(0, 1024),
        rbuf.sub(1024, 4096),
        rbuf.sub(5120, 64),
        rbuf.sub(5184, 11200),
    ];
    for (i, (piece, (tagged, ignore, flags))) in pieces
        .iter()
        .zip([
            (false, 0, 0),
            (true, 0, 0),
            (true, u64::MAX, 0),
            (false, 0, FI_MULTI_RECV),
        ])
        .enumerate()
    {
        let Some(piece) = piece else { continue };
        let op = MsgOp {
            iov: &[*piece],
            desc: &[],
            addr: FI_ADDR_UNSPEC,
            context: 0x100 + i,
            data: 0,
            tag: 0,
            ignore,
            flags,
            call: if flags != 0 { Call::Msg } else { Call::Plain },
        };
        let _ = ep.recv(&op, tagged);
    }
    connect_fuzz_peer(&ep, TOKEN);
    let mut seen = (0, 0);
    let mut s = Script { data, pos: 0 };
    while !s.done() {
        let ctl = s.byte();
        let mut raw = [0u8; CMD_SIZE];
        let chunk = s.chunk(CMD_SIZE);
        raw[..chunk.len()].copy_from_slice(chunk);
        if ctl & 3 != 0 {
            let mut c = Cmd::decode(&raw);
            if ctl & 1 != 0 {
                c.sender = TOKEN;
            }
            if ctl & 2 != 0 {
                repair_rma_entries(&mut c, mem, mr.key(), ctl);
            }
            c.encode(&mut raw);
        }
        ep.handle_raw(&raw);
        if ctl & 4 != 0 {
            add(&mut seen, drain(&ep, &cq));
        }
    }
    add(&mut seen, drain(&ep, &cq));
    for i in 0..pieces.len() {
        let _ = ep.cancel(0x100 + i);
    }
    add(&mut seen, drain(&ep, &cq));
    let _ = ep.close();
    seen
}

/// Makes a peer known under `token`, as its CONNECT would.
fn connect_fuzz_peer(ep: &Arc<ShmEndpoint>, token: u64) {
    let name = b"fi_shm://fuzz-peer-without-a-region";
    let mut c = Cmd::new(OP_CONNECT, token);
    c.len = name.len() as u64;
    c.body[..name.len()].copy_from_slice(name);
    let mut raw = [0u8; CMD_SIZE];
    c.encode(&mut raw);
    ep.handle_raw(&raw);
}

/// Points the RMA entries (up to four of address, length, key) at the registered region, near
/// and across its edges, and makes the entry count and total length agree with them, so that
/// the command reaches the MR checks and, when they pass, the copy.
fn repair_rma_entries(c: &mut Cmd, mem: IoVec, key: u64, ctl: u8) {
    let count = 1 + usize::from((ctl >> 4) & 3);
    let Some(mut rma) = c.rma(count) else {
        return;
    };
    for e in &mut rma {
        *e = (
            mem.addr() as u64 + e.0 % (mem.len() as u64 + 64),
            e.1 % 4096,
            key,
        );
    }
    c.put_rma(&rma);
    c.len = rma.iter().map(|e| e.1).sum();
    c.aux2 = c.aux2 & !0xff | count as u64;
}

fn add(sum: &mut (usize, usize), n: (usize, usize)) {
    sum.0 += n.0;
    sum.1 += n.1;
}

/// Progress, then every completion and error completion waiting: (completions, errors).
fn drain(ep: &Arc<ShmEndpoint>, cq: &Arc<Cq>) -> (usize, usize) {
    use crate::util::provider::Progress;
    ep.progress();
    let mut n = (0, 0);
    while let Ok(k) = cq.read(16, |_| {}) {
        n.0 += k;
    }
    while cq.readerr().is_ok() {
        n.1 += 1;
    }
    n
}
