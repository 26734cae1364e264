//! Fragments below the transport, for the UDP device on links of a small MTU (Ethernet).
//!
//! Why: over a 1,500-byte link the transport and the RDM layer above it pay their
//! per-datagram work (some 2,300 instructions a datagram pair) once per 1,472 bytes, where
//! 2.5.1's tcp pays nothing per segment in user space (`docs/internals.md`, "What still
//! separates us from 2.5.1 tcp on Ethernet"). Letting IP fragment larger datagrams is three
//! times dearer in the kernel (no GSO or GRO). So the device cuts a transport datagram larger
//! than the link takes into up to [`MAX_COUNT`] UDP datagrams of the link's size, each with a
//! [`HDR`]-byte header, sent as one GSO run; the receiver finds them in one GRO run
//! ([`whole_in_run`]) and hands the datagram up where its pieces lie ([`InPieces`]: a payload
//! outside the transport's checksum is copied once, from the pieces to where it goes) or joins
//! them there ([`join_in_run`]); or, when they arrive apart (a run boundary between them, a
//! socket without GRO, reordering), copies them together by source and id, in any order
//! ([`Reassembly`]).
//!
//! The header, our SRD-over-UDP encapsulation's own (not EFA's RDM protocol):
//!
//! | byte | field |
//! | --- | --- |
//! | 0 | [`MAGIC`] (never `srd::wire::VERSION`: a fragment is never taken for a datagram) |
//! | 1 | index (0-based) << 4, count (2..=[`MAX_COUNT`]) |
//! | 2..4 | piece: datagram bytes in each fragment but the last (which has 1..=piece), u16 LE |
//! | 4..8 | the datagram's id, u32 LE: per sending device, new for every transmission |
//!
//! Fragment `index` carries bytes `index * piece ..` of the datagram, so a receiver needs no
//! knowledge of the sender's link. The id keeps the fragments of two datagrams from ever
//! joining after a loss. Fragments go only to a peer that took them in its handshake (its
//! `max_pkt` larger than the link), and never before the handshake
//! (`rdm::peer::Inner::peer_pkt`).

use std::net::SocketAddr;
use std::ops::Range;

/// First byte of every fragment.
pub const MAGIC: u8 = 0xF5;
/// Bytes of a fragment's header.
pub const HDR: usize = 8;
/// Most fragments of one datagram.
pub const MAX_COUNT: usize = 8;
/// Fragments of a datagram of full size by default (`FI_EFA_UDP_FRAGMENTS`): five of 1,472
/// bytes make 7,320-byte datagrams, eight of which fill one GSO run of 40 segments, so that
/// runs end where datagrams do.
pub const DEFAULT_COUNT: usize = 5;

/// A fragment's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub index: u8,
    pub count: u8,
    pub piece: u16,
    pub id: u32,
}

impl Header {
    pub fn encode(&self) -> [u8; HDR] {
        let (p, id) = (self.piece.to_le_bytes(), self.id.to_le_bytes());
        [
            MAGIC,
            self.index << 4 | self.count,
            p[0],
            p[1],
            id[0],
            id[1],
            id[2],
            id[3],
        ]
    }

    /// The header of `frag`, a fragment with its header; None if it is not one: not our
    /// magic, an index or count out of range, or a length its piece size rules out.
    #[inline]
    pub fn parse(frag: &[u8]) -> Option<Header> {
        if frag.len() <= HDR || frag[0] != MAGIC {
            return None;
        }
        let (index, count) = (frag[1] >> 4, frag[1] & 0xf);
        let piece = u16::from_le_bytes([frag[2], frag[3]]);
        let len = frag.len() - HDR;
        let fits = if index + 1 < count {
            len == usize::from(piece)
        } else {
            len <= usize::from(piece)
        };
        if !(2..=MAX_COUNT as u8).contains(&count) || index >= count || !fits {
            return None;
        }
        Some(Header {
            index,
            count,
            piece,
            id: u32::from_le_bytes([frag[4], frag[5], frag[6], frag[7]]),
        })
    }

    /// Where its bytes go in the datagram.
    pub fn offset(&self) -> usize {
        usize::from(self.index) * usize::from(self.piece)
    }
}

/// How a link carries fragments: `payload` bytes of UDP payload each, header included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub payload: usize,
    pub max_count: usize,
}

impl Link {
    /// Datagram bytes per fragment (a UDP payload is at most 65,527 bytes: a u16).
    pub fn piece(&self) -> usize {
        (self.payload - HDR).min(usize::from(u16::MAX))
    }

    /// The header of fragment `index` of `count` of datagram `id`.
    pub fn header(&self, index: usize, count: usize, id: u32) -> [u8; HDR] {
        Header {
            index: index as u8,
            count: count as u8,
            piece: self.piece() as u16,
            id,
        }
        .encode()
    }

    /// The largest datagram the link carries in fragments.
    pub fn max_datagram(&self) -> usize {
        self.max_count * self.piece()
    }

    /// How many fragments a datagram of `total` bytes goes out in: 1 when the link takes
    /// it whole (it is sent as it is), 0 when it is too large to fragment.
    #[inline]
    pub fn count(&self, total: usize) -> usize {
        if total <= self.payload {
            1
        } else if total <= self.max_datagram() {
            total.div_ceil(self.piece())
        } else {
            0
        }
    }

    /// The fragments' bytes of a datagram given in two parts (either may be empty), in order:
    /// [`Link::piece`] bytes of their concatenation each, as (part of the first, part of the
    /// second), the last one shorter. As many as [`Link::count`] gives for a datagram it cuts.
    /// Cut in one walk: worked out per fragment from its index, each took a dozen compares.
    #[inline]
    pub fn pieces<'a>(&self, parts: [&'a [u8]; 2]) -> Pieces<'a> {
        Pieces {
            piece: self.piece(),
            head: parts[0],
            tail: parts[1],
        }
    }
}

/// The fragments' bytes of one datagram ([`Link::pieces`]).
#[derive(Debug, Clone)]
pub struct Pieces<'a> {
    piece: usize,
    head: &'a [u8],
    tail: &'a [u8],
}

impl<'a> Iterator for Pieces<'a> {
    type Item = [&'a [u8]; 2];

    #[inline]
    fn next(&mut self) -> Option<[&'a [u8]; 2]> {
        if self.head.is_empty() && self.tail.is_empty() {
            return None;
        }
        let (a, head) = self.head.split_at(self.piece.min(self.head.len()));
        let (b, tail) = self
            .tail
            .split_at((self.piece - a.len()).min(self.tail.len()));
        (self.head, self.tail) = (head, tail);
        Some([a, b])
    }
}

/// Whether the datagram whose first fragment starts `run` at `off` lies whole in it: its
/// `count` fragments at `off`, `off + seg`, … (a GRO run's datagrams are `seg` bytes each but
/// the last), all of one id and in order. Returns the fragment count and where the last ends.
#[inline]
pub fn whole_in_run(run: &[u8], off: usize, seg: usize) -> Option<(usize, usize)> {
    let len = run.len();
    let first = Header::parse(&run[off..(off + seg).min(len)])?;
    if first.index != 0 || usize::from(first.piece) + HDR != seg {
        return None;
    }
    let count = usize::from(first.count);
    for j in 1..count {
        let at = off + j * seg;
        if at >= len {
            return None;
        }
        let h = Header::parse(&run[at..(at + seg).min(len)])?;
        if usize::from(h.index) != j
            || (h.count, h.piece, h.id) != (first.count, first.piece, first.id)
        {
            return None;
        }
    }
    Some((count, (off + count * seg).min(len)))
}

/// Joins the fragments [`whole_in_run`] found, in place: each piece moves down over the
/// headers before it. Returns where the datagram now lies.
pub fn join_in_run(
    run: &mut [u8],
    off: usize,
    seg: usize,
    count: usize,
    end: usize,
) -> Range<usize> {
    let start = off + HDR;
    let mut at = off + seg;
    for j in 1..count {
        let from = off + j * seg + HDR;
        let to = (off + (j + 1) * seg).min(end);
        run.copy_within(from..to, at);
        at += to - from;
    }
    start..at
}

/// The bytes `range` of a datagram whose `count` fragments lie whole in a run from `off`,
/// `seg` bytes apart, up to `end` ([`whole_in_run`]): the slices of the run that hold them, in
/// order, without joining them first. Empty past the datagram's end.
pub fn pieces_in_run(
    run: &[u8],
    off: usize,
    seg: usize,
    end: usize,
    range: Range<usize>,
) -> impl Iterator<Item = &[u8]> {
    let piece = seg.saturating_sub(HDR).max(1);
    let end = end.min(run.len());
    // Fragment `k`, and where in its piece the range begins: one division, then each next
    // piece from its start.
    let mut k = range.start / piece;
    let mut at = off + k * seg + HDR + range.start % piece;
    let mut left = range.end.saturating_sub(range.start);
    core::iter::from_fn(move || {
        let stop = (off + (k + 1) * seg).min(end);
        if left == 0 || at >= stop {
            return None;
        }
        let n = (stop - at).min(left);
        let bytes = &run[at..at + n];
        left -= n;
        k += 1;
        at = off + k * seg + HDR;
        Some(bytes)
    })
}

/// The length of the datagram whose `count` fragments lie whole in a run from `off` up to
/// `end` ([`whole_in_run`]).
pub fn len_in_run(off: usize, end: usize, count: usize) -> usize {
    (end - off).saturating_sub(count * HDR)
}

/// Where a packet lies in a run when the datagram that carries it is left in its fragments
/// (`device::Completion::RecvInPieces`): bytes `start..start + len` of the datagram whose
/// `count` fragments lie from `off` to `end` of the run, `seg` bytes apart
/// ([`whole_in_run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPieces {
    pub off: usize,
    pub end: usize,
    pub seg: usize,
    pub count: usize,
    pub start: usize,
    pub len: usize,
}

impl InPieces {
    /// The packet's bytes in the datagram's first fragment (its headers, where the link's
    /// fragments are larger than they): empty if the run is not the one it was found in.
    pub fn first<'a>(&self, run: &'a [u8]) -> &'a [u8] {
        let at = self.off + HDR + self.start;
        let stop = (self.off + self.seg)
            .min(self.end)
            .min(at.saturating_add(self.len));
        run.get(at..stop).unwrap_or(&[])
    }

    /// The packet's bytes `range` (clipped to the packet) as the slices of `run` that hold
    /// them, in order: at most one per fragment, so at most [`MAX_COUNT`].
    pub fn parts<'a>(&self, run: &'a [u8], range: Range<usize>) -> impl Iterator<Item = &'a [u8]> {
        let end = range.end.min(self.len);
        let range = self.start + range.start.min(end)..self.start + end;
        pieces_in_run(run, self.off, self.seg, self.end.min(run.len()), range)
    }

    /// Joins the fragments where they lie ([`join_in_run`]); returns where the packet now
    /// lies, or `None` if `run` is not the one it was found in.
    pub fn join(&self, run: &mut [u8]) -> Option<Range<usize>> {
        if self.end > run.len() || self.seg <= HDR {
            return None;
        }
        let at = join_in_run(run, self.off, self.seg, self.count, self.end).start + self.start;
        run.get(at..at + self.len).map(|_| at..at + self.len)
    }
}

/// A device's fragmentation: the link, the next datagram id, and the fragments that arrived
/// apart.
#[derive(Debug)]
pub struct Fragmenting {
    pub link: Link,
    /// Fragments per GSO message: whole datagrams of full size (`UdpSock::batch`, `SendBatch`).
    pub run: usize,
    pub apart: Reassembly,
    next_id: u32,
    /// Datagrams sent in fragments.
    pub sent: u64,
    /// Datagrams joined in place in a GRO run.
    pub joined_in_run: u64,
    /// Datagrams of a GRO run handed up in their fragments (`InPieces`).
    pub left_in_pieces: u64,
}

impl Fragmenting {
    /// For `link`, taking datagrams up to `cap` bytes; `run_datagrams`: how many
    /// link-sized datagrams one GSO message holds.
    pub fn new(link: Link, cap: usize, run_datagrams: usize, first_id: u32) -> Fragmenting {
        Fragmenting {
            link,
            run: (run_datagrams / link.max_count * link.max_count).max(1),
            apart: Reassembly::new(cap),
            next_id: first_id,
            sent: 0,
            joined_in_run: 0,
            left_in_pieces: 0,
        }
    }

    /// The id of the next datagram sent in fragments.
    pub fn new_id(&mut self) -> u32 {
        self.sent += 1;
        self.next_id = self.next_id.wrapping_add(1);
        self.next_id
    }
}

/// Fragments that arrived apart, copied together by source and datagram id, in any order.
/// A datagram one of whose fragments was lost takes its slot until a newer one needs it (the
/// transport sends the datagram again, with a new id).
#[derive(Debug)]
pub struct Reassembly {
    slots: Vec<Slot>,
    /// Largest datagram taken.
    cap: usize,
    /// Uses, to find the least recently used slot.
    clock: u64,
    /// Fragments dropped: repeated, malformed, or of a datagram whose slot was taken.
    pub dropped: u64,
    /// Datagrams joined.
    pub joined: u64,
}

#[derive(Debug)]
struct Slot {
    from: SocketAddr,
    id: u32,
    count: u8,
    piece: u16,
    /// Fragments received, by index; 0: the slot is free.
    have: u8,
    /// The datagram's length, once its last fragment arrived.
    len: usize,
    buf: Vec<u8>,
    used: u64,
}

/// Datagrams in reassembly at once (of all sources); the least recently used gives way.
const MAX_SLOTS: usize = 32;

impl Reassembly {
    /// For datagrams up to `cap` bytes.
    pub fn new(cap: usize) -> Reassembly {
        Reassembly {
            slots: Vec::new(),
            cap,
            clock: 0,
            dropped: 0,
            joined: 0,
        }
    }

    /// Takes `frag` (header included) from `from`. Returns the slot of the datagram it
    /// completed: its bytes are [`Reassembly::datagram`] until [`Reassembly::release`].
    pub fn add(&mut self, from: SocketAddr, frag: &[u8]) -> Option<usize> {
        let Some(h) = Header::parse(frag) else {
            self.dropped += 1;
            return None;
        };
        let piece = &frag[HDR..];
        let (at, end) = (h.offset(), h.offset() + piece.len());
        if end > self.cap {
            self.dropped += 1;
            return None;
        }
        self.clock += 1;
        let found = self
            .slots
            .iter()
            .position(|s| s.have != 0 && s.id == h.id && s.from == from);
        let s = match found {
            Some(s) => s,
            None => self.free_slot(),
        };
        let slot = &mut self.slots[s];
        if slot.have == 0 {
            slot.from = from;
            slot.id = h.id;
            slot.count = h.count;
            slot.piece = h.piece;
            slot.len = 0;
        } else if (slot.count, slot.piece) != (h.count, h.piece) || slot.have & 1 << h.index != 0 {
            // Repeated, or contradicting the fragments before it.
            self.dropped += 1;
            return None;
        }
        slot.used = self.clock;
        slot.buf[at..end].copy_from_slice(piece);
        slot.have |= 1 << h.index;
        if h.index + 1 == h.count {
            slot.len = end;
        }
        if u32::from(slot.have) + 1 != 1 << slot.count {
            return None;
        }
        self.joined += 1;
        Some(s)
    }

    /// A free slot, made if there are fewer than `MAX_SLOTS`, else the least recently used
    /// one emptied (its fragments dropped).
    fn free_slot(&mut self) -> usize {
        if let Some(s) = self.slots.iter().position(|s| s.have == 0) {
            return s;
        }
        if self.slots.len() < MAX_SLOTS {
            self.slots.push(Slot {
                from: SocketAddr::from(([0, 0, 0, 0], 0)),
                id: 0,
                count: 0,
                piece: 0,
                have: 0,
                len: 0,
                buf: vec![0; self.cap],
                used: 0,
            });
            return self.slots.len() - 1;
        }
        let (s, _) = self
            .slots
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| s.used)
            .expect("MAX_SLOTS > 0");
        self.dropped += u64::from(self.slots[s].have.count_ones());
        self.slots[s].have = 0;
        s
    }

    /// The datagram [`Reassembly::add`] completed in slot `s`: its buffer (at least `cap`
    /// bytes; a caller may swap in another of that size) and its length.
    pub fn datagram(&mut self, s: usize) -> (&mut Vec<u8>, usize) {
        let slot = &mut self.slots[s];
        (&mut slot.buf, slot.len)
    }

    /// Frees slot `s` for another datagram.
    pub fn release(&mut self, s: usize) {
        let slot = &mut self.slots[s];
        slot.have = 0;
        if slot.buf.len() < self.cap {
            slot.buf.resize(self.cap, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: Link = Link {
        payload: 100,
        max_count: 5,
    };

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    /// The fragments of `d` as the wire carries them.
    fn fragments(d: &[u8], id: u32, split_at: usize) -> Vec<Vec<u8>> {
        let parts = [&d[..split_at], &d[split_at..]];
        let count = LINK.count(d.len());
        assert!(count > 1);
        LINK.pieces(parts)
            .enumerate()
            .map(|(k, [a, b])| [&LINK.header(k, count, id)[..], a, b].concat())
            .collect()
    }

    fn datagram(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
    }

    #[test]
    fn headers_round_trip_and_reject_what_is_not_a_fragment() {
        let h = Header {
            index: 3,
            count: 5,
            piece: 4,
            id: 0xdead_beef,
        };
        let mut b = h.encode().to_vec();
        b.extend([1, 2, 3, 4]);
        assert_eq!(Header::parse(&b), Some(h));
        assert_eq!(h.offset(), 12);
        // No payload, a datagram's version byte, a piece of the wrong size, bad index or
        // count.
        assert_eq!(Header::parse(&b[..HDR]), None);
        assert_eq!(Header::parse(&b[..HDR + 3]), None, "short, not the last");
        for (at, v) in [
            (0, crate::prov::efa::srd::wire::VERSION),
            (1, 5 << 4 | 5),
            (1, 0x01),
            (1, 0x09),
            (2, 5),
        ] {
            let mut x = b.clone();
            x[at] = v;
            assert_eq!(Header::parse(&x), None, "byte {at} = {v}");
        }
        // The last fragment may be short, never longer than a piece.
        let last = Header { index: 4, ..h }.encode();
        assert!(Header::parse(&[&last[..], &[9; 3]].concat()).is_some());
        assert_eq!(Header::parse(&[&last[..], &[9; 5]].concat()), None);
    }

    #[test]
    fn counts_and_pieces_cover_the_datagram_exactly() {
        assert_eq!(LINK.count(100), 1);
        assert_eq!(LINK.count(101), 2);
        assert_eq!(LINK.count(5 * 92), 5);
        assert_eq!(LINK.count(5 * 92 + 1), 0);
        for n in [101, 184, 185, 300, 460] {
            let d = datagram(n, 1);
            for split in [0, 1, 24, 92, 93, n] {
                let pieces: Vec<Vec<u8>> = LINK
                    .pieces([&d[..split], &d[split..]])
                    .map(|p| p.concat())
                    .collect();
                assert_eq!(pieces.len(), LINK.count(n), "{n} bytes split at {split}");
                let (last, full) = pieces.split_last().unwrap();
                assert!(full.iter().all(|p| p.len() == LINK.piece()));
                assert!((1..=LINK.piece()).contains(&last.len()));
                assert_eq!(pieces.concat(), d, "{n} bytes split at {split}");
            }
        }
    }

    /// A GRO run of `datagrams`' fragments back to back, as the kernel hands it up.
    fn run_of(frags: &[Vec<u8>]) -> Vec<u8> {
        frags.concat()
    }

    #[test]
    fn a_datagram_whole_in_a_run_is_joined_in_place() {
        let a = datagram(460, 1);
        let b = datagram(250, 2);
        let mut frags = fragments(&a, 7, 24);
        frags.extend(fragments(&b, 8, 0));
        let mut run = run_of(&frags);
        let seg = LINK.payload;
        let (count, end) = whole_in_run(&run, 0, seg).unwrap();
        assert_eq!((count, end), (5, 500));
        let r = join_in_run(&mut run, 0, seg, count, end);
        assert_eq!(run[r], a[..]);
        // The second starts where the first ended: its last fragment is short.
        let (count, end) = whole_in_run(&run, 500, seg).unwrap();
        assert_eq!((count, end), (3, run.len()));
        let r = join_in_run(&mut run, 500, seg, count, end);
        assert_eq!(run[r], b[..]);
    }

    #[test]
    fn pieces_in_a_run_read_the_datagram_without_joining_it() {
        let a = datagram(460, 1);
        let b = datagram(250, 2);
        let mut frags = fragments(&a, 7, 24);
        frags.extend(fragments(&b, 8, 0));
        let run = run_of(&frags);
        let seg = LINK.payload;
        for (d, off) in [(&a, 0), (&b, 500)] {
            let (count, end) = whole_in_run(&run, off, seg).unwrap();
            let len = len_in_run(off, end, count);
            assert_eq!(len, d.len());
            // Every range, across the fragments' headers or within one piece.
            for range in [0..len, 0..1, 91..93, 92..184, 30..250, len - 5..len, 7..7] {
                let got: Vec<u8> = pieces_in_run(&run, off, seg, end, range.clone())
                    .flatten()
                    .copied()
                    .collect();
                assert_eq!(got, d[range.clone()], "{range:?} of {len}");
            }
            // Past the end: nothing more than the datagram holds.
            let past: usize = pieces_in_run(&run, off, seg, end, len - 3..len + 50)
                .map(<[u8]>::len)
                .sum();
            assert_eq!(past, 3);
            // A packet at byte 5 of the datagram, 7 bytes short of its end (a trailer).
            let p = InPieces {
                off,
                end,
                seg,
                count,
                start: 5,
                len: len - 12,
            };
            let packet = &d[5..len - 7];
            assert_eq!(p.first(&run), &packet[..seg - HDR - 5]);
            let all: Vec<u8> = p.parts(&run, 0..usize::MAX).flatten().copied().collect();
            assert_eq!(all, packet);
            let mid: Vec<u8> = p.parts(&run, 80..200).flatten().copied().collect();
            assert_eq!(mid, packet[80..200]);
            let mut joined = run.clone();
            let r = p.join(&mut joined).unwrap();
            assert_eq!(joined[r], *packet);
            // Not this run.
            assert_eq!(p.first(&[]), &[] as &[u8]);
            assert_eq!(p.join(&mut []), None);
        }
    }

    #[test]
    fn a_run_missing_a_fragment_or_mixing_ids_is_not_whole() {
        let a = datagram(460, 1);
        let seg = LINK.payload;
        let mut frags = fragments(&a, 7, 0);
        // Cut short by the run's end.
        assert_eq!(whole_in_run(&run_of(&frags[..4]), 0, seg), None);
        // A fragment of another datagram (same size) in its place.
        let other = fragments(&datagram(460, 2), 9, 0);
        frags[2] = other[2].clone();
        assert_eq!(whole_in_run(&run_of(&frags), 0, seg), None);
        // Starting mid-datagram.
        assert_eq!(whole_in_run(&run_of(&other[1..]), 0, seg), None);
    }

    /// Joins what `r` completes from `frags` (in the order given), with the source of each.
    fn feed(r: &mut Reassembly, frags: &[(u16, &Vec<u8>)]) -> Vec<(u16, Vec<u8>)> {
        let mut done = Vec::new();
        for (p, f) in frags {
            if let Some(s) = r.add(addr(*p), f) {
                let (buf, n) = r.datagram(s);
                done.push((*p, buf[..n].to_vec()));
                r.release(s);
            }
        }
        done
    }

    #[test]
    fn fragments_apart_are_joined_by_source_and_id_in_any_order() {
        let mut r = Reassembly::new(LINK.max_datagram());
        let a = datagram(460, 1);
        let b = datagram(200, 2);
        let c = datagram(300, 3);
        let (fa, fb, fc) = (
            fragments(&a, 1, 0),
            fragments(&b, 1, 0),
            fragments(&c, 2, 7),
        );
        // Two sources with the same id interleaved, a second datagram of one of them, and
        // every datagram's fragments out of order.
        let order = [
            (1, &fa[4]),
            (2, &fb[1]),
            (1, &fc[3]),
            (1, &fa[0]),
            (2, &fb[2]),
            (1, &fc[0]),
            (1, &fa[2]),
            (1, &fa[1]),
            (1, &fc[2]),
            (2, &fb[0]),
            (1, &fc[1]),
            (1, &fa[3]),
        ];
        let done = feed(&mut r, &order);
        assert_eq!(done, vec![(2, b), (1, c), (1, a)]);
        assert_eq!((r.joined, r.dropped), (3, 0));
    }

    #[test]
    fn loss_and_duplicates_never_join_wrong_bytes() {
        let mut r = Reassembly::new(LINK.max_datagram());
        let a = datagram(460, 1);
        let b = datagram(460, 2);
        let fa = fragments(&a, 1, 0);
        let fb = fragments(&b, 2, 0);
        // a loses fragment 2; b, of the same size, comes whole, with a fragment repeated.
        let order = [
            (1, &fa[0]),
            (1, &fa[1]),
            (1, &fb[0]),
            (1, &fa[3]),
            (1, &fb[1]),
            (1, &fb[1]),
            (1, &fa[4]),
            (1, &fb[2]),
            (1, &fb[3]),
            (1, &fb[4]),
            (1, &fb[4]),
        ];
        assert_eq!(feed(&mut r, &order), vec![(1, b.clone())]);
        assert_eq!(r.dropped, 1, "the repeated fragment inside b");
        // b's fragment again after it was joined starts a slot that never completes.
        assert_eq!(feed(&mut r, &[(1, &fb[4]), (1, &fb[3])]), vec![]);
        // A datagram that claims more than fits, and a malformed fragment: dropped.
        let mut r = Reassembly::new(100);
        assert_eq!(feed(&mut r, &[(1, &fa[2])]), vec![]);
        assert_eq!(r.add(addr(9), &[MAGIC; 4]), None);
        assert_eq!((r.joined, r.dropped), (0, 2));
    }

    #[test]
    fn datagrams_past_the_slots_evict_the_least_recently_used() {
        let mut r = Reassembly::new(LINK.max_datagram());
        let a = datagram(200, 1);
        let fa = fragments(&a, 1, 0);
        for p in 0..=MAX_SLOTS as u16 {
            assert_eq!(r.add(addr(p), &fa[0]), None);
        }
        assert_eq!(r.slots.len(), MAX_SLOTS);
        assert_eq!(
            r.dropped, 1,
            "source 0's fragment gave way to the last source's"
        );
        // Source 0 starts again (and evicts source 1); source 2 still completes.
        assert_eq!(feed(&mut r, &[(0, &fa[1]), (2, &fa[1])]), vec![]);
        assert_eq!(feed(&mut r, &[(2, &fa[2])]), vec![(2, a)]);
    }
}
