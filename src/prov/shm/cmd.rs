//! Commands exchanged through region rings: a 48-byte header, a 248-byte body, and two
//! auxiliary words behind the body.
//!
//! The fields a small message needs come first: the ring copies only the bytes a command uses
//! (`wire_len`), and with the slot's 8-byte sequence word, the header and up to 8 payload bytes
//! fill one 64-byte cache line, so the receiver of a small message waits for one line to cross
//! between cores instead of two.
//!
//! | bytes | field |
//! | --- | --- |
//! | 0 | op (`OP_*`) |
//! | 1 | proto: where the payload is (`PROTO_*`) |
//! | 2..4 | flags (`F_*`) |
//! | 4..8 | status (ACK: 0 or a positive `FI_E*`) |
//! | 8..16 | sender token (identifies the sending endpoint) |
//! | 16..24 | op id (the sender's operation, echoed back in ACK/GO/DATA) |
//! | 24..32 | len (payload bytes) |
//! | 32..40 | tag (messages); the RMA target entry count (`OP_WRITE`, `OP_READ`), and above bit 32 a write's bounce buffer index |
//! | 40..48 | CQ data |
//! | 48..296 | body: inline bytes, iov lists, rma lists |
//! | 296..304 | aux (bounce buffer index, iov count, peer op id...) |
//! | 304..312 | aux2 (rma entry count, datatype/op, offset...) |
//!
//! Decoding never fails: every field is checked where it is used (a peer may be hostile).
//!
//! `Cmd` is laid out as its own wire image (`repr(C)`, no padding, little-endian fields), so
//! the ring copies commands in and out of slots directly: no encode or decode pass, and no
//! staging buffer, on the path of every message.
#![allow(unsafe_code)]

use super::region::{CMD_PREFIX, CMD_SIZE};
use crate::sys::cma::Remote;

pub const HDR: usize = 48;
// The ring reads the header first to learn the command's length (`wire_len`).
const _: () = assert!(HDR == CMD_PREFIX);
pub const BODY: usize = CMD_SIZE - HDR - 16;
const AUX: usize = HDR + BODY;

/// First command to a peer: the sender's name (body) and pid (aux).
pub const OP_CONNECT: u8 = 1;
/// A message (fi_send, fi_tsend...).
pub const OP_MSG: u8 = 2;
/// RMA write: target entries in the body, then the payload description.
pub const OP_WRITE: u8 = 3;
/// RMA read: target entries in the body, then the initiator's destination iovs.
pub const OP_READ: u8 = 4;
/// Atomic: target entries (addr, count, key) in the body, operands inline or in a bounce buffer.
pub const OP_ATOMIC: u8 = 5;
/// Completion of the sender's op `op_id`, with a status; fetch results inline or bounced.
pub const OP_ACK: u8 = 6;
/// Segmented path: the sink is ready; the source may push DATA for op `op_id` to sink op `aux`.
pub const OP_GO: u8 = 7;
/// Segmented path: `len` bytes at offset `aux2` of the transfer are in the source's bounce
/// buffer `aux`, for sink op `op_id`.
pub const OP_DATA: u8 = 8;

/// RMA with `F_MAY_COPY`: the target checked the keys and lets the initiator copy op `op_id`
/// itself; the target's `aux` ranges (the body's iov list) are the other end of the copy.
pub const OP_CLEARED: u8 = 9;
/// The initiator copied a cleared RMA (`len` bytes; a read if `F_READ`, else a write, with CQ
/// data if `F_CQ_DATA`): the target counts it and reports the CQ data.
pub const OP_COPIED: u8 = 10;
/// After an `OP_CLEARED` with `F_SHARED`: the target copied its blocks of op `op_id` (status 0)
/// or could not (a positive `FI_E*`; EPERM or ENOSYS: the kernel refused it).
pub const OP_PART: u8 = 11;
/// A message sent with `F_SHARED` matched a receive: the sender writes its blocks of op
/// `op_id` ([`share_runs`], initiator side) into the receive's ranges (the body's iov list,
/// `aux` of them, `len` bytes), then answers `OP_SHARED` for the receiver's op `aux2`.
pub const OP_SHARE: u8 = 12;
/// After an `OP_SHARE`: the sender wrote its blocks for the receiver's op `op_id` (status 0)
/// or could not (a positive `FI_E*`).
pub const OP_SHARED: u8 = 13;

/// Payload in the body.
pub const PROTO_INLINE: u8 = 0;
/// Payload in the sender's bounce buffer `aux`.
pub const PROTO_BOUNCE: u8 = 1;
/// Payload in the sender's memory, named by an iov list; the handler copies it with CMA.
pub const PROTO_IOV: u8 = 2;
/// Payload pushed later through bounce buffers (GO / DATA).
pub const PROTO_SEG: u8 = 3;

pub const F_TAGGED: u16 = 1 << 0;
pub const F_CQ_DATA: u16 = 1 << 1;
/// The sender waits for an ACK before completing.
pub const F_ACK: u16 = 1 << 2;
/// DATA for an initiator's (tx) operation rather than a receiver's (rx) one.
pub const F_TO_TX: u16 = 1 << 3;
pub const F_FETCH: u16 = 1 << 4;
pub const F_COMPARE: u16 = 1 << 5;
/// On a `PROTO_IOV` RMA: the initiator can copy itself once the target clears the keys
/// (`OP_CLEARED`); the kernel copies faster for the process that starts the transfer.
pub const F_MAY_COPY: u16 = 1 << 6;
/// On `OP_COPIED`: the copy was a read.
pub const F_READ: u16 = 1 << 7;
/// On `OP_CLEARED`: the copy is shared; the target copies its blocks ([`share_runs`]) itself
/// and reports them with `OP_PART`, the initiator copies the others. On an iov `OP_MSG`: the
/// sender offers to write its blocks into the receive (`OP_SHARE`).
pub const F_SHARED: u16 = 1 << 8;
/// On an RMA sent again after the target shared its copy: copy only the initiator's blocks.
pub const F_INITIATOR_BLOCKS: u16 = 1 << 9;
/// On a small `OP_READ`: the target may answer with the data in its ACK (inline, or in its
/// bounce buffer `aux`) instead of copying into the initiator's memory; on an ACK: it carries
/// data (a read's, or an atomic's fetched values).
/// The kernel's copy between processes is a system call per read; two memory copies are not.
pub const F_RETURN_DATA: u16 = 1 << 10;
/// On an inline `OP_WRITE`: injected, with no completion due; the target answers only if it
/// refuses the write, with an `OP_ACK` carrying this flag and the error (op id 0).
pub const F_INJECTED: u16 = 1 << 11;

/// Shared copies split the target's memory into blocks of this many bytes by address: the
/// target copies the odd ones, the initiator the even ones, for every RMA. Each byte of
/// target memory is thus always copied by the same side, and each side copies in posting
/// order, so writes and reads of the same bytes keep their order (RAW, WAR, WAW). Splitting an
/// operation's own bytes (first half, second half) would not: a later write's half could land
/// before an earlier one's.
pub const SHARE_BLOCK: u64 = 64 << 10;

/// The runs `(offset, len)` of a transfer to or from the target ranges `target` (in transfer
/// order) that the target copies (`target_side`) or the initiator does.
pub fn share_runs(
    target: impl IntoIterator<Item = Remote>,
    target_side: bool,
) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut off = 0usize;
    for r in target {
        let mut at = r.addr;
        let end = r.addr.saturating_add(r.len as u64);
        while at < end {
            let block_end = (at / SHARE_BLOCK + 1).saturating_mul(SHARE_BLOCK).min(end);
            let n = (block_end - at) as usize;
            if ((at / SHARE_BLOCK) & 1 == 1) == target_side {
                match runs.last_mut() {
                    Some((o, l)) if *o + *l == off => *l += n,
                    _ => runs.push((off, n)),
                }
            }
            off += n;
            at = block_end;
        }
    }
    runs
}

/// Room for RMA target entries at the start of the body (4 × 24 bytes).
pub const RMA_AREA: usize = 96;
/// Inline bytes after the RMA area.
pub const RMA_INLINE: usize = BODY - RMA_AREA;

#[derive(Clone, Copy)]
#[repr(C)]
pub struct Cmd {
    pub op: u8,
    pub proto: u8,
    pub flags: u16,
    pub status: i32,
    pub sender: u64,
    pub op_id: u64,
    pub len: u64,
    pub tag: u64,
    pub data: u64,
    pub body: [u8; BODY],
    pub aux: u64,
    pub aux2: u64,
}

impl core::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cmd")
            .field("op", &self.op)
            .field("proto", &self.proto)
            .field("flags", &self.flags)
            .field("op_id", &self.op_id)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

// The wire layout of the table above, checked field by field.
#[cfg(not(target_endian = "little"))]
compile_error!("shm commands are little-endian: their layout is the wire format");
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Cmd>() == CMD_SIZE);
    assert!(offset_of!(Cmd, flags) == 2 && offset_of!(Cmd, status) == 4);
    assert!(offset_of!(Cmd, sender) == 8 && offset_of!(Cmd, op_id) == 16);
    assert!(offset_of!(Cmd, len) == 24 && offset_of!(Cmd, tag) == 32);
    assert!(offset_of!(Cmd, data) == 40 && offset_of!(Cmd, body) == HDR);
    assert!(offset_of!(Cmd, aux) == AUX && offset_of!(Cmd, aux2) == AUX + 8);
};

fn rd(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap_or([0; 8]))
}

impl Cmd {
    pub fn new(op: u8, sender: u64) -> Cmd {
        Cmd {
            op,
            proto: PROTO_INLINE,
            flags: 0,
            status: 0,
            sender,
            op_id: 0,
            len: 0,
            tag: 0,
            data: 0,
            body: [0; BODY],
            aux: 0,
            aux2: 0,
        }
    }

    /// The command as it goes on the wire.
    pub fn as_bytes(&self) -> &[u8; CMD_SIZE] {
        // SAFETY: `Cmd` is `repr(C)` with no padding (size and offsets checked above), so all
        // of its CMD_SIZE bytes are initialized; u8 arrays need no alignment.
        unsafe { &*(self as *const Cmd).cast::<[u8; CMD_SIZE]>() }
    }

    /// The command's bytes, to be filled from the wire (a ring slot).
    pub fn as_bytes_mut(&mut self) -> &mut [u8; CMD_SIZE] {
        // SAFETY: as in `as_bytes`; and every field is an integer or a byte array, valid for
        // any bit pattern, so whatever a peer wrote is a `Cmd`.
        unsafe { &mut *(self as *mut Cmd).cast::<[u8; CMD_SIZE]>() }
    }

    pub fn encode(&self, out: &mut [u8; CMD_SIZE]) {
        *out = *self.as_bytes();
    }

    pub fn decode(b: &[u8; CMD_SIZE]) -> Cmd {
        let mut c = Cmd::new(0, 0);
        *c.as_bytes_mut() = *b;
        c
    }

    /// Bytes of an encoded command that carry meaning, from its header: an inline message, an
    /// inline write or an ACK returning data inline uses the body only up to its payload; any
    /// other inline ACK, the header alone; every other command, all of it (its `aux` words
    /// sit behind the body). (A peer's header may say anything: the ring bounds the result.)
    pub fn wire_len(b: &[u8; CMD_SIZE]) -> usize {
        let returns = u16::from_le_bytes([b[2], b[3]]) & F_RETURN_DATA != 0;
        match (b[0], b[1]) {
            (OP_MSG, PROTO_INLINE) => HDR + rd(b, 24).min(BODY as u64) as usize,
            // Its target entries, then its bytes (`Cmd::inline_at`).
            (OP_WRITE, PROTO_INLINE) => {
                let entries = 24 * (rd(b, 32) & 0xff);
                HDR + entries.saturating_add(rd(b, 24)).min(BODY as u64) as usize
            }
            // Its target entries; the bytes are in a bounce buffer (`Cmd::set_write_bounce`).
            (OP_WRITE, PROTO_BOUNCE) => HDR + (24 * (rd(b, 32) & 0xff)).min(BODY as u64) as usize,
            (OP_ACK, PROTO_INLINE) if returns => HDR + rd(b, 24).min(BODY as u64) as usize,
            (OP_ACK, PROTO_INLINE) | (OP_COPIED | OP_PART | OP_SHARED, _) => HDR,
            _ => CMD_SIZE,
        }
    }

    /// Writes `(addr, len)` pairs at `off` of the body; returns false if they do not fit.
    pub fn put_iovs(&mut self, off: usize, ranges: impl ExactSizeIterator<Item = Remote>) -> bool {
        if off + ranges.len() * 16 > BODY {
            return false;
        }
        for (i, r) in ranges.enumerate() {
            let o = off + 16 * i;
            self.body[o..o + 8].copy_from_slice(&r.addr.to_le_bytes());
            self.body[o + 8..o + 16].copy_from_slice(&(r.len as u64).to_le_bytes());
        }
        true
    }

    /// Reads `count` `(addr, len)` pairs at `off` (None if they would not fit in the body).
    pub fn iovs(&self, off: usize, count: usize) -> Option<Vec<Remote>> {
        if count > 8 || off + count * 16 > BODY {
            return None;
        }
        Some(
            (0..count)
                .map(|i| Remote {
                    addr: rd(&self.body, off + 16 * i),
                    len: rd(&self.body, off + 16 * i + 8) as usize,
                })
                .collect(),
        )
    }

    /// How many RMA target entries the body starts with: in the header (`tag`) for writes
    /// and reads, so that an inline write crosses without the words behind its body; in
    /// `aux2`'s low byte for atomics.
    pub fn rma_count(&self) -> usize {
        match self.op {
            OP_WRITE | OP_READ => (self.tag & 0xff) as usize,
            _ => (self.aux2 & 0xff) as usize,
        }
    }

    /// Sets a write's bounce buffer: its index rides in `tag` above the entry count, so that a
    /// bounced write's command ends with its target entries (`wire_len`: two cache lines
    /// with one entry, not five).
    pub fn set_write_bounce(&mut self, idx: u32) {
        self.tag = (self.tag & 0xffff_ffff) | (u64::from(idx) << 32);
    }

    /// A write's bounce buffer index (`set_write_bounce`).
    pub fn write_bounce(&self) -> u32 {
        (self.tag >> 32) as u32
    }

    /// Where an inline write's bytes start in the body: right after its target entries, so
    /// that an 8-byte write and its slot's sequence word fill two cache lines, not five.
    pub fn inline_at(&self) -> usize {
        24 * self.rma_count()
    }

    /// Writes RMA target entries `(addr, len-or-count, key)` at the start of the body.
    pub fn put_rma(&mut self, rma: &[(u64, u64, u64)]) -> bool {
        if rma.len() * 24 > RMA_AREA {
            return false;
        }
        for (i, (a, l, k)) in rma.iter().enumerate() {
            let o = 24 * i;
            self.body[o..o + 8].copy_from_slice(&a.to_le_bytes());
            self.body[o + 8..o + 16].copy_from_slice(&l.to_le_bytes());
            self.body[o + 16..o + 24].copy_from_slice(&k.to_le_bytes());
        }
        true
    }

    pub fn rma(&self, count: usize) -> Option<Vec<(u64, u64, u64)>> {
        Some(self.rma_entries(count)?.collect())
    }

    /// The RMA target entries, read in place.
    pub fn rma_entries(&self, count: usize) -> Option<impl Iterator<Item = (u64, u64, u64)> + '_> {
        if count == 0 || count * 24 > RMA_AREA {
            return None;
        }
        Some((0..count).map(|i| {
            (
                rd(&self.body, 24 * i),
                rd(&self.body, 24 * i + 8),
                rd(&self.body, 24 * i + 16),
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bounds() {
        let mut c = Cmd::new(OP_WRITE, 0xdead);
        c.proto = PROTO_IOV;
        c.flags = F_ACK | F_CQ_DATA;
        c.status = -5;
        c.len = 1 << 40;
        c.aux2 = 3;
        assert!(c.put_rma(&[(1, 2, 3), (4, 5, 6)]));
        assert!(!c.put_rma(&[(0, 0, 0); 5]));
        assert!(c.put_iovs(RMA_AREA, [Remote { addr: 9, len: 10 }].into_iter()));
        assert!(!c.put_iovs(BODY - 8, [Remote { addr: 9, len: 10 }].into_iter()));
        let mut b = [0u8; CMD_SIZE];
        c.encode(&mut b);
        let d = Cmd::decode(&b);
        assert_eq!(
            (d.op, d.proto, d.flags, d.status, d.sender, d.len, d.aux2),
            (
                OP_WRITE,
                PROTO_IOV,
                F_ACK | F_CQ_DATA,
                -5,
                0xdead,
                1 << 40,
                3
            )
        );
        assert_eq!(d.rma(2).unwrap(), [(1, 2, 3), (4, 5, 6)]);
        assert_eq!(d.iovs(RMA_AREA, 1).unwrap(), [Remote { addr: 9, len: 10 }]);
        assert!(d.rma(0).is_none() && d.rma(5).is_none());
        assert!(d.iovs(0, 100).is_none());
        // Any bytes decode without panicking.
        let junk = [0xffu8; CMD_SIZE];
        let j = Cmd::decode(&junk);
        assert!(j.iovs(240, 2).is_none());
    }

    #[test]
    fn small_message_fits_one_cache_line_with_the_slot_sequence() {
        let mut c = Cmd::new(OP_MSG, 7);
        c.len = 8;
        c.aux = 1;
        c.aux2 = 2;
        let mut b = [0u8; CMD_SIZE];
        c.encode(&mut b);
        assert_eq!(8 + Cmd::wire_len(&b), 64);
        // So does an inline write of 8 bytes to one target entry.
        c.op = OP_WRITE;
        c.tag = 1;
        c.encode(&mut b);
        assert_eq!(8 + Cmd::wire_len(&b), 8 + HDR + 24 + 8);
        assert!(8 + Cmd::wire_len(&b) <= 128);
        assert_eq!(Cmd::decode(&b).inline_at(), 24);
        // A peer's entry count and length are bounded by the body.
        c.tag = 0xff;
        c.len = u64::MAX;
        c.encode(&mut b);
        assert_eq!(Cmd::wire_len(&b), HDR + BODY);
        // Every other command is copied whole: its aux words sit behind the body.
        c.proto = PROTO_IOV;
        c.encode(&mut b);
        assert_eq!(Cmd::wire_len(&b), CMD_SIZE);
        let d = Cmd::decode(&b);
        assert_eq!((d.aux, d.aux2), (1, 2));
    }

    #[test]
    fn an_ack_crosses_with_its_header_and_only_the_data_it_returns() {
        let mut b = [0u8; CMD_SIZE];
        let mut ack = Cmd::new(OP_ACK, 7);
        ack.len = 1 << 20;
        ack.encode(&mut b);
        assert_eq!(
            Cmd::wire_len(&b),
            HDR,
            "a plain ACK: status and length only"
        );
        ack.flags = F_RETURN_DATA;
        ack.len = 8;
        ack.encode(&mut b);
        assert_eq!(Cmd::wire_len(&b), HDR + 8, "a small read's bytes inline");
        ack.len = u64::MAX;
        ack.encode(&mut b);
        assert_eq!(
            Cmd::wire_len(&b),
            HDR + BODY,
            "a peer's length is bounded by the body"
        );
        ack.proto = PROTO_BOUNCE;
        ack.len = 4096;
        ack.aux = 3;
        ack.encode(&mut b);
        assert_eq!(
            Cmd::wire_len(&b),
            CMD_SIZE,
            "a bounce buffer's index is behind the body"
        );
        // A bounced write: its entries, with the buffer's index beside their count.
        let mut w = Cmd::new(OP_WRITE, 1);
        w.proto = PROTO_BOUNCE;
        w.len = 4096;
        w.tag = 2;
        assert!(w.put_rma(&[(0x1000, 4000, 7), (0x9000, 96, 8)]));
        w.set_write_bounce(63);
        w.encode(&mut b);
        assert_eq!(
            Cmd::wire_len(&b),
            HDR + 48,
            "a bounced write ends with its entries"
        );
        let mut got = Cmd::new(0, 0);
        got.as_bytes_mut()[..HDR + 48].copy_from_slice(&b[..HDR + 48]);
        assert_eq!((got.write_bounce(), got.rma_count()), (63, 2));
        assert_eq!(
            got.rma_entries(2).map(|e| e.collect::<Vec<_>>()),
            Some(vec![(0x1000, 4000, 7), (0x9000, 96, 8)])
        );
    }

    #[test]
    fn shared_copies_split_by_target_address() {
        const B: u64 = SHARE_BLOCK;
        let r = |addr, len| Remote { addr, len };
        // One range from the middle of block 0 to the middle of block 3: the initiator takes
        // blocks 0 and 2, the target 1 and 3; together every byte, once.
        let one = [r(B / 2, 3 * B as usize)];
        let half = (B / 2) as usize;
        let b = B as usize;
        assert_eq!(share_runs(one, false), [(0, half), (half + b, b)]);
        assert_eq!(share_runs(one, true), [(half, b), (half + 2 * b, half)]);
        // Two ranges: offsets run on across them, and adjacent pieces merge.
        let two = [r(B + 10, 100), r(3 * B, 50), r(0, 20)];
        assert_eq!(share_runs(two, true), [(0, 150)]);
        assert_eq!(share_runs(two, false), [(150, 20)]);
        // Whatever the ranges, the two sides cover the transfer exactly once.
        let odd = [
            r(7, 5 * B as usize + 3),
            r(B * 9 - 1, 2),
            r(u64::MAX - 10, 10),
        ];
        let total: usize = odd.iter().map(|x| x.len).sum();
        let mut seen = vec![0u8; total];
        for side in [true, false] {
            for (o, n) in share_runs(odd, side) {
                seen[o..o + n].iter_mut().for_each(|x| *x += 1);
            }
        }
        assert!(seen.iter().all(|&x| x == 1));
    }
}
