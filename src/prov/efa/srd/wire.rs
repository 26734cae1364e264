//! The software SRD wire format, version 2 (this library's own). All fields little-endian.
//!
//! | bytes | DATA / UNRELIABLE | ACK | RNR |
//! | --- | --- | --- | --- |
//! | 0 | version (1) | version | version |
//! | 1 | kind | kind | kind |
//! | 2 | flags | flags | flags |
//! | 3 | reserved | reserved | reserved |
//! | 4..8 | destination QKEY | destination QKEY | destination QKEY |
//! | 8..12 | source QKEY | source QKEY | source QKEY |
//! | 12..16 | sequence number | cumulative ack: next expected | refused sequence |
//! | 16..20 | checksum | checksum | checksum |
//! | 20..24 | sender's base: lowest sequence not yet settled | — | — |
//! | 20..52 | — | selective acks: bit i = `cum + 1 + i` received | — |
//! | 24.. | payload | | |
//!
//! DATA_ACK is a DATA datagram that also acknowledges (the receiver had an ack due and data to
//! send the same way): its last 36 bytes are a trailer, the cumulative ack (4 bytes) and the
//! selective acks (32), as in ACK. A trailer rather than a longer header keeps the payload
//! where the sender put it.
//!
//! The checksum (CRC-32C, `sys::checksum`) covers the header and a DATA_ACK's trailer, and the
//! payload too unless the sender sets [`FLAG_PAYLOAD_UNCHECKED`]: a damaged datagram is
//! dropped like a lost one. With the flag the payload's integrity is the network's: UDP's
//! checksum, which the kernel verifies for datagrams from other hosts (as TCP's covers
//! `tcp;ofi_rxm`), while loopback and veth pairs cannot damage them. The device sets it unless
//! its own fault injector may damage payloads. (A flag for leaving payloads out, rather than
//! one for putting them in, keeps datagrams of earlier builds, whose checksum covers everything
//! and whose byte 2 is zero, valid.) (Checking every payload cost each side about a tenth
//! of its time in bulk transfers: 64 KiB datagrams, 3.5 GB/s.)
//!
//! In the smoltcp style: [`Packet`] wraps bytes and `new_checked` guarantees that no accessor
//! panics; [`Repr`] is the parsed form; `emit` writes exactly `buffer_len()` bytes.

use core::fmt;

/// Version 2 widened the selective acks from 64 bits to 128, so that a window of 128 datagrams
/// can be acknowledged (MTU-sized datagrams on Ethernet: 64 of 1,472 bytes kept a sender
/// waiting on every round trip). Version 3 widened them to 256: over a veth pair, 1 MiB
/// writes both ways and tagged sends still waited on the round trip at 128 (at 256, writes
/// rose 9 % and tagged sends 4 %). Earlier versions are refused as unknown.
pub const VERSION: u8 = 3;
pub use super::sack::{SACK_BITS, SACK_BYTES, SACK_WORDS, Sack};
pub const KIND_DATA: u8 = 1;
pub const KIND_ACK: u8 = 2;
pub const KIND_RNR: u8 = 3;
/// A datagram outside the reliable protocol (efa DGRAM endpoints).
pub const KIND_UNRELIABLE: u8 = 4;
/// DATA with a piggybacked acknowledgement in a trailer.
pub const KIND_DATA_ACK: u8 = 5;

pub const DATA_HEADER: usize = 24;
pub const ACK_LEN: usize = 20 + SACK_BYTES;
pub const RNR_LEN: usize = 20;
/// The acknowledgement trailer of DATA_ACK.
pub const ACK_TRAILER: usize = 4 + SACK_BYTES;
/// Flag: the checksum leaves the payload out.
pub const FLAG_PAYLOAD_UNCHECKED: u8 = 1;

mod field {
    use core::ops::Range;
    pub const VERSION: usize = 0;
    pub const KIND: usize = 1;
    pub const FLAGS: usize = 2;
    pub const DST_QKEY: Range<usize> = 4..8;
    pub const SRC_QKEY: Range<usize> = 8..12;
    pub const SEQ: Range<usize> = 12..16;
    pub const CHECKSUM: Range<usize> = 16..20;
    pub const BASE: Range<usize> = 20..24;
    pub const SACK: Range<usize> = 20..20 + super::SACK_BYTES;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    Truncated,
    Version,
    Kind,
    Checksum,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated SRD datagram",
            Error::Version => "unknown SRD version",
            Error::Kind => "unknown SRD datagram kind",
            Error::Checksum => "SRD datagram damaged",
        })
    }
}

/// A view of an SRD datagram.
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

fn u32_at(b: &[u8], r: core::ops::Range<usize>) -> u32 {
    u32::from_le_bytes([b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3]])
}

/// The 8 bytes at `at` (callers checked the length).
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_unchecked(buf: T) -> Packet<T> {
        Packet { buf }
    }

    /// A packet whose accessors cannot panic.
    pub fn new_checked(buf: T) -> Result<Packet<T>, Error> {
        let p = Packet::new_unchecked(buf);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buf.as_ref();
        if b.len() < RNR_LEN {
            return Err(Error::Truncated);
        }
        if b[field::VERSION] != VERSION {
            return Err(Error::Version);
        }
        let need = match b[field::KIND] {
            KIND_DATA | KIND_UNRELIABLE => DATA_HEADER,
            KIND_DATA_ACK => DATA_HEADER + ACK_TRAILER,
            KIND_ACK => ACK_LEN,
            KIND_RNR => RNR_LEN,
            _ => return Err(Error::Kind),
        };
        if b.len() < need {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn kind(&self) -> u8 {
        self.buf.as_ref()[field::KIND]
    }

    pub fn dst_qkey(&self) -> u32 {
        u32_at(self.buf.as_ref(), field::DST_QKEY)
    }

    pub fn src_qkey(&self) -> u32 {
        u32_at(self.buf.as_ref(), field::SRC_QKEY)
    }

    pub fn seq(&self) -> u32 {
        u32_at(self.buf.as_ref(), field::SEQ)
    }

    /// DATA/UNRELIABLE only.
    pub fn base(&self) -> u32 {
        u32_at(self.buf.as_ref(), field::BASE)
    }

    /// ACK only.
    pub fn sack(&self) -> Sack {
        Sack::read(&self.buf.as_ref()[field::SACK])
    }

    /// DATA/UNRELIABLE/DATA_ACK only.
    pub fn payload(&self) -> &[u8] {
        let b = self.buf.as_ref();
        let end = b.len()
            - if self.kind() == KIND_DATA_ACK {
                ACK_TRAILER
            } else {
                0
            };
        &b[DATA_HEADER..end]
    }

    /// DATA_ACK only: the piggybacked (cumulative, selective) acknowledgement.
    pub fn trailer_ack(&self) -> (u32, Sack) {
        let b = self.buf.as_ref();
        let t = b.len() - ACK_TRAILER;
        (u32_at(b, t..t + 4), Sack::read(&b[t + 4..]))
    }

    /// Whether the checksum matches what it covers.
    pub fn verify(&self) -> bool {
        let b = self.buf.as_ref();
        u32_at(b, field::CHECKSUM) == checksum(b, header_len(self.kind()))
    }

    /// Whether the checksum covers the payload (no [`FLAG_PAYLOAD_UNCHECKED`]).
    pub fn payload_checked(&self) -> bool {
        self.buf.as_ref()[field::FLAGS] & FLAG_PAYLOAD_UNCHECKED == 0
    }
}

/// Header bytes of a datagram of `kind` (what the checksum treats as header).
fn header_len(kind: u8) -> usize {
    match kind {
        KIND_ACK => ACK_LEN,
        KIND_RNR => RNR_LEN,
        _ => DATA_HEADER,
    }
}

/// The checksum of a datagram whose header is `hdr` bytes long (its own field excluded): the
/// header, then the rest if the flags say so, else only a DATA_ACK's trailer.
fn checksum(b: &[u8], hdr: usize) -> u32 {
    let (head, rest) = (&b[..field::CHECKSUM.start], &b[field::CHECKSUM.end..hdr]);
    let body = &b[hdr..];
    if b[field::FLAGS] & FLAG_PAYLOAD_UNCHECKED != 0 {
        let trailer = match b[field::KIND] {
            KIND_DATA_ACK => &body[body.len().saturating_sub(ACK_TRAILER)..],
            _ => &[],
        };
        // Data headers (alone or with an ack trailer), one of every datagram of a bulk
        // transfer: read as words, the same CRC in a few instructions.
        if hdr == DATA_HEADER {
            let (w0, w1) = (u64_at(b, 0), u64_at(b, 8));
            let base = u32_at(b, field::BASE);
            match trailer.len() {
                0 => return data_crc(w0, w1, base, None),
                ACK_TRAILER => {
                    let ack = (u32_at(trailer, 0..4), Sack::read(&trailer[4..]));
                    return data_crc(w0, w1, base, Some(ack));
                }
                _ => {}
            }
        }
        return crate::sys::checksum::crc32c(&[head, rest, trailer]);
    }
    let head = crate::sys::checksum::crc32c(&[head, rest]);
    if body.is_empty() {
        head
    } else {
        head ^ crate::sys::checksum::lanes(body)
    }
}

/// Writes the checksum of a complete datagram (header emitted, payload in place), covering
/// the payload if `payload_checked` (else it sets [`FLAG_PAYLOAD_UNCHECKED`]). A buffer shorter than its
/// kind's header is left alone (it fails `new_checked` anyway).
pub fn seal(buf: &mut [u8], payload_checked: bool) {
    let hdr = header_len(buf.get(field::KIND).copied().unwrap_or(KIND_DATA));
    if buf.len() < hdr {
        return;
    }
    if payload_checked {
        buf[field::FLAGS] &= !FLAG_PAYLOAD_UNCHECKED;
    } else {
        buf[field::FLAGS] |= FLAG_PAYLOAD_UNCHECKED;
    }
    let c = checksum(buf, hdr);
    buf[field::CHECKSUM].copy_from_slice(&c.to_le_bytes());
}

/// The checksum of a data header with its payload unchecked, from its words: bytes 0..16 as
/// `w0` and `w1`, then the base, then a DATA_ACK's trailer (cumulative and selective acks).
fn data_crc(w0: u64, w1: u64, base: u32, ack: Option<(u32, Sack)>) -> u32 {
    match ack {
        None => crate::sys::checksum::crc32c_words([w0, w1], Some(base)),
        Some((cum, sack)) => {
            let mut words = [0u64; 3 + SACK_WORDS];
            words[..3].copy_from_slice(&[w0, w1, u64::from(base) | u64::from(cum) << 32]);
            words[3..].copy_from_slice(&sack.words());
            crate::sys::checksum::crc32c_words(words, None)
        }
    }
}

/// `Repr::Data { .. }.emit(buf)` then `seal(buf, false)` (payload unchecked), in one pass:
/// the header is assembled in registers, checksummed from them and stored a word at a time.
/// Every datagram of a bulk transfer goes through here, where the general path spent ~120
/// instructions matching on the kind and placing fields one by one. With `ack`, `buf` ends in
/// its trailer.
pub fn emit_data_unchecked(
    buf: &mut [u8],
    dst_qkey: u32,
    src_qkey: u32,
    seq: u32,
    base: u32,
    ack: Option<(u32, Sack)>,
) {
    let kind = if ack.is_some() {
        KIND_DATA_ACK
    } else {
        KIND_DATA
    };
    // Bytes 0..16 (version, kind, flags, reserved, QKEYs, sequence) as two words.
    let w0 = u64::from(u32::from_le_bytes([
        VERSION,
        kind,
        FLAG_PAYLOAD_UNCHECKED,
        0,
    ])) | u64::from(dst_qkey) << 32;
    let w1 = u64::from(src_qkey) | u64::from(seq) << 32;
    if let Some((cum, sack)) = ack {
        let t = buf.len() - ACK_TRAILER;
        buf[t..t + 4].copy_from_slice(&cum.to_le_bytes());
        sack.write(&mut buf[t + 4..t + ACK_TRAILER]);
    }
    let c = data_crc(w0, w1, base, ack);
    buf[..8].copy_from_slice(&w0.to_le_bytes());
    buf[8..field::CHECKSUM.start].copy_from_slice(&w1.to_le_bytes());
    buf[field::CHECKSUM].copy_from_slice(&c.to_le_bytes());
    buf[field::BASE].copy_from_slice(&base.to_le_bytes());
}

/// [`Repr::parse`] of a datagram whose checksum matches ([`Packet::verify`]), or the first
/// error of `Packet::new_checked`, `verify` and `parse` in that order. Data whose payload the
/// checksum leaves out, every datagram of a bulk transfer, is read and checked from its header
/// words in one pass: the general path reads the header three times over (callgrind, both-ways
/// writes over a veth pair: about 180 instructions per datagram).
pub fn parse_verified(b: &[u8]) -> Result<Repr, Error> {
    if b.len() >= DATA_HEADER {
        let (w0, w1, w2) = (u64_at(b, 0), u64_at(b, 8), u64_at(b, 16));
        // Version and kind, then the flags' bit.
        let (kind, flags) = ((w0 & 0xffff) as u16, (w0 >> 16) as u8);
        let ack_at = b.len().wrapping_sub(ACK_TRAILER);
        let ack = if kind == u16::from_le_bytes([VERSION, KIND_DATA]) {
            Some(None)
        } else if kind == u16::from_le_bytes([VERSION, KIND_DATA_ACK])
            && b.len() >= DATA_HEADER + ACK_TRAILER
        {
            Some(Some((
                u32_at(b, ack_at..ack_at + 4),
                Sack::read(&b[ack_at + 4..]),
            )))
        } else {
            None
        };
        if let Some(ack) = ack
            && flags & FLAG_PAYLOAD_UNCHECKED != 0
        {
            let base = (w2 >> 32) as u32;
            if w2 as u32 != data_crc(w0, w1, base, ack) {
                return Err(Error::Checksum);
            }
            return Ok(Repr::Data {
                dst_qkey: (w0 >> 32) as u32,
                src_qkey: w1 as u32,
                seq: (w1 >> 32) as u32,
                base,
                ack,
            });
        }
    }
    let p = Packet::new_checked(b)?;
    if !p.verify() {
        return Err(Error::Checksum);
    }
    Repr::parse(&p)
}

/// A parsed SRD header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr {
    Data {
        dst_qkey: u32,
        src_qkey: u32,
        seq: u32,
        base: u32,
        /// A piggybacked acknowledgement (cumulative, selective): DATA_ACK.
        ack: Option<(u32, Sack)>,
    },
    Unreliable {
        dst_qkey: u32,
        src_qkey: u32,
    },
    Ack {
        dst_qkey: u32,
        src_qkey: u32,
        cum: u32,
        sack: Sack,
    },
    Rnr {
        dst_qkey: u32,
        src_qkey: u32,
        seq: u32,
    },
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, Error> {
        p.check_len()?;
        let (dst_qkey, src_qkey) = (p.dst_qkey(), p.src_qkey());
        Ok(match p.kind() {
            KIND_DATA | KIND_DATA_ACK => Repr::Data {
                dst_qkey,
                src_qkey,
                seq: p.seq(),
                base: p.base(),
                ack: (p.kind() == KIND_DATA_ACK).then(|| p.trailer_ack()),
            },
            KIND_UNRELIABLE => Repr::Unreliable { dst_qkey, src_qkey },
            KIND_ACK => Repr::Ack {
                dst_qkey,
                src_qkey,
                cum: p.seq(),
                sack: p.sack(),
            },
            KIND_RNR => Repr::Rnr {
                dst_qkey,
                src_qkey,
                seq: p.seq(),
            },
            _ => return Err(Error::Kind),
        })
    }

    /// Header bytes (payload and a DATA_ACK trailer excluded).
    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::Data { .. } | Repr::Unreliable { .. } => DATA_HEADER,
            Repr::Ack { .. } => ACK_LEN,
            Repr::Rnr { .. } => RNR_LEN,
        }
    }

    /// Writes the header into the first `buffer_len()` bytes of `buf`, and a DATA_ACK's
    /// trailer into its last `ACK_TRAILER` bytes (`buf` is then the whole datagram).
    pub fn emit(&self, buf: &mut [u8]) {
        let (kind, dst, src, seq) = match *self {
            Repr::Data {
                dst_qkey,
                src_qkey,
                seq,
                ack,
                ..
            } => (
                if ack.is_some() {
                    KIND_DATA_ACK
                } else {
                    KIND_DATA
                },
                dst_qkey,
                src_qkey,
                seq,
            ),
            Repr::Unreliable { dst_qkey, src_qkey } => (KIND_UNRELIABLE, dst_qkey, src_qkey, 0),
            Repr::Ack {
                dst_qkey,
                src_qkey,
                cum,
                ..
            } => (KIND_ACK, dst_qkey, src_qkey, cum),
            Repr::Rnr {
                dst_qkey,
                src_qkey,
                seq,
            } => (KIND_RNR, dst_qkey, src_qkey, seq),
        };
        buf[field::VERSION] = VERSION;
        buf[field::KIND] = kind;
        buf[2] = 0;
        buf[3] = 0;
        buf[field::DST_QKEY].copy_from_slice(&dst.to_le_bytes());
        buf[field::SRC_QKEY].copy_from_slice(&src.to_le_bytes());
        buf[field::SEQ].copy_from_slice(&seq.to_le_bytes());
        buf[field::CHECKSUM].copy_from_slice(&[0; 4]);
        match *self {
            Repr::Data { base, ack, .. } => {
                buf[field::BASE].copy_from_slice(&base.to_le_bytes());
                if let Some((cum, sack)) = ack {
                    let t = buf.len() - ACK_TRAILER;
                    buf[t..t + 4].copy_from_slice(&cum.to_le_bytes());
                    sack.write(&mut buf[t + 4..]);
                }
            }
            Repr::Unreliable { .. } => buf[field::BASE].copy_from_slice(&0u32.to_le_bytes()),
            Repr::Ack { sack, .. } => sack.write(&mut buf[field::SACK]),
            Repr::Rnr { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_ack() -> impl Strategy<Value = Option<(u32, Sack)>> {
        any::<Option<(u32, [u64; SACK_WORDS])>>()
            .prop_map(|a| a.map(|(cum, w)| (cum, Sack::from_words(w))))
    }

    fn round_trip(r: Repr) {
        let trailer = match r {
            Repr::Data { ack: Some(_), .. } => ACK_TRAILER,
            _ => 0,
        };
        let mut b = vec![0u8; r.buffer_len() + 3 + trailer];
        for checked in [true, false] {
            r.emit(&mut b);
            seal(&mut b, checked);
            let p = Packet::new_checked(&b[..]).unwrap();
            assert!(p.verify());
            assert_eq!(p.payload_checked(), checked);
            assert_eq!(Repr::parse(&p).unwrap(), r);
            // The last byte is past the header (a DATA_ACK's trailer, always covered, or
            // payload); the header's last byte is its last field.
            let covered = checked || trailer > 0;
            let last = b.len() - 1;
            b[last] ^= 1;
            assert_eq!(
                !Packet::new_checked(&b[..]).unwrap().verify(),
                covered,
                "last byte"
            );
            b[last] ^= 1;
            let h = r.buffer_len() - 1;
            b[h] ^= 0x10;
            assert!(
                !Packet::new_checked(&b[..]).unwrap().verify(),
                "header damage"
            );
            b[h] ^= 0x10;
        }
    }

    /// Without the flag, the payload is outside the checksum but the header, the flag
    /// itself and a DATA_ACK's trailer stay inside it.
    #[test]
    fn unchecked_payload() {
        let r = Repr::Data {
            dst_qkey: 1,
            src_qkey: 2,
            seq: 3,
            base: 3,
            ack: Some((9, Sack::of(&[0, 2, SACK_BITS - 1]))),
        };
        let mut b = vec![7u8; DATA_HEADER + 100 + ACK_TRAILER];
        r.emit(&mut b);
        seal(&mut b, false);
        b[DATA_HEADER + 50] ^= 4;
        assert!(
            Packet::new_checked(&b[..]).unwrap().verify(),
            "payload not covered"
        );
        for at in [field::FLAGS, 5, 13, 21, DATA_HEADER + 100, b.len() - 1] {
            b[at] ^= 1;
            assert!(
                !Packet::new_checked(&b[..]).unwrap().verify(),
                "byte {at} covered"
            );
            b[at] ^= 1;
        }
    }

    #[test]
    fn every_kind_round_trips() {
        round_trip(Repr::Data {
            dst_qkey: 1,
            src_qkey: 2,
            seq: u32::MAX,
            base: 7,
            ack: None,
        });
        round_trip(Repr::Data {
            dst_qkey: 1,
            src_qkey: 2,
            seq: 5,
            base: 3,
            ack: Some((77, Sack::of(&[0, 2, SACK_BITS / 2 + 63]))),
        });
        round_trip(Repr::Unreliable {
            dst_qkey: 1,
            src_qkey: 2,
        });
        round_trip(Repr::Ack {
            dst_qkey: 3,
            src_qkey: 4,
            cum: 9,
            sack: Sack::of(&[0, SACK_BITS - 1]),
        });
        round_trip(Repr::Rnr {
            dst_qkey: 5,
            src_qkey: 6,
            seq: 0,
        });
    }

    #[test]
    fn short_or_foreign_bytes_are_refused() {
        assert_eq!(Packet::new_checked(&[][..]).err(), Some(Error::Truncated));
        let mut b = [0u8; ACK_LEN];
        Repr::Ack {
            dst_qkey: 0,
            src_qkey: 0,
            cum: 0,
            sack: Sack::EMPTY,
        }
        .emit(&mut b);
        assert_eq!(
            Packet::new_checked(&b[..ACK_LEN - 4]).err(),
            Some(Error::Truncated)
        );
        b[0] = 9;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Version));
        b[0] = VERSION;
        b[1] = 77;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Kind));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
                let _ = p.verify();
                let _ = (p.seq(), p.dst_qkey(), p.src_qkey());
                if matches!(p.kind(), KIND_DATA | KIND_UNRELIABLE | KIND_DATA_ACK) {
                    let _ = (p.base(), p.payload().len());
                }
                if p.kind() == KIND_DATA_ACK {
                    let _ = p.trailer_ack();
                }
                if p.kind() == KIND_ACK {
                    let _ = p.sack();
                }
            }
        }

        /// The one-pass parse gives what the general path gives, for any bytes: valid data
        /// headers (DATA and DATA_ACK, payload checked or not), each with one byte damaged or
        /// cut short, and noise.
        #[test]
        fn one_pass_parse_is_verify_then_parse(
            d in any::<u32>(), s in any::<u32>(), q in any::<u32>(), b in any::<u32>(),
            ack in any_ack(), payload in 0usize..40, checked in any::<bool>(),
            at in any::<usize>(), flip in any::<u8>(), cut in any::<usize>(),
            noise in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let general = |b: &[u8]| {
                let p = Packet::new_checked(b)?;
                if !p.verify() {
                    return Err(Error::Checksum);
                }
                Repr::parse(&p)
            };
            let r = Repr::Data { dst_qkey: d, src_qkey: s, seq: q, base: b, ack };
            let len = DATA_HEADER + payload + if ack.is_some() { ACK_TRAILER } else { 0 };
            let mut bytes = vec![flip; len];
            r.emit(&mut bytes);
            seal(&mut bytes, checked);
            prop_assert_eq!(parse_verified(&bytes), Ok(r));
            let i = at % len;
            bytes[i] ^= flip;
            prop_assert_eq!(parse_verified(&bytes), general(&bytes));
            let short = &bytes[..cut % (len + 1)];
            prop_assert_eq!(parse_verified(short), general(short));
            prop_assert_eq!(parse_verified(&noise), general(&noise));
        }

        #[test]
        fn data_round_trips(d in any::<u32>(), s in any::<u32>(), q in any::<u32>(), b in any::<u32>()) {
            round_trip(Repr::Data { dst_qkey: d, src_qkey: s, seq: q, base: b, ack: None });
            round_trip(Repr::Data { dst_qkey: d, src_qkey: s, seq: q, base: b, ack: Some((q ^ b, Sack::of(&[s % SACK_BITS, d % SACK_BITS, q % SACK_BITS]))) });
        }

        #[test]
        fn one_pass_data_header_is_emit_then_seal(
            d in any::<u32>(), s in any::<u32>(), q in any::<u32>(), b in any::<u32>(),
            ack in any_ack(), payload in 0usize..40, fill in any::<u8>(),
        ) {
            let r = Repr::Data { dst_qkey: d, src_qkey: s, seq: q, base: b, ack };
            let len = DATA_HEADER + payload + if ack.is_some() { ACK_TRAILER } else { 0 };
            let mut general = vec![fill; len];
            r.emit(&mut general);
            seal(&mut general, false);
            let mut one_pass = vec![fill; len];
            emit_data_unchecked(&mut one_pass, d, s, q, b, ack);
            prop_assert_eq!(&one_pass, &general);
            prop_assert!(Packet::new_checked(&one_pass[..]).unwrap().verify());
        }
    }
}
