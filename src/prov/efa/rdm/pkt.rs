//! EFA RDM protocol v4 packets (efa-reference §1): header layouts, encoding and parsing.
//!
//! Every packet starts with a 4-byte base header (type, version 4, flags). REQ packets (types
//! 64–76, 128–147) carry a mandatory header for their type (the tag, if any, is its last 8
//! bytes), then `rma_iov` entries (RTW/RTR/RTA), then optional headers in a fixed order (raw
//! address, CQ data, connid), then application data. All fields little-endian, natural
//! alignment. [`parse`] never panics: every length is checked against the packet.

use crate::prov::efa::device::{EFA_ADDR_LEN, EfaAddr};

pub const VERSION: u8 = 4;

// Packet types (efa-reference §1).
pub const CTS: u8 = 3;
pub const CTSDATA: u8 = 4;
pub const READRSP: u8 = 5;
pub const EOR: u8 = 7;
pub const ATOMRSP: u8 = 8;
pub const HANDSHAKE: u8 = 9;
pub const RECEIPT: u8 = 10;
pub const READ_NACK: u8 = 11;
pub const EAGER_MSGRTM: u8 = 64;
pub const EAGER_TAGRTM: u8 = 65;
pub const MEDIUM_MSGRTM: u8 = 66;
pub const MEDIUM_TAGRTM: u8 = 67;
pub const LONGCTS_MSGRTM: u8 = 68;
pub const LONGCTS_TAGRTM: u8 = 69;
pub const EAGER_RTW: u8 = 70;
pub const LONGCTS_RTW: u8 = 71;
pub const SHORT_RTR: u8 = 72;
pub const LONGCTS_RTR: u8 = 73;
pub const WRITE_RTA: u8 = 74;
pub const FETCH_RTA: u8 = 75;
pub const COMPARE_RTA: u8 = 76;
/// Long-read requests (need the receiver's device RDMA read, extra-info bit 0): the data stays
/// in the sender's registered memory, described by `read_iov` entries after the headers.
pub const LONGREAD_MSGRTM: u8 = 128;
pub const LONGREAD_TAGRTM: u8 = 129;
pub const LONGREAD_RTW: u8 = 130;
pub const DC_EAGER_MSGRTM: u8 = 133;
pub const DC_EAGER_TAGRTM: u8 = 134;
pub const DC_MEDIUM_MSGRTM: u8 = 135;
pub const DC_MEDIUM_TAGRTM: u8 = 136;
pub const DC_LONGCTS_MSGRTM: u8 = 137;
pub const DC_LONGCTS_TAGRTM: u8 = 138;
pub const DC_EAGER_RTW: u8 = 139;
pub const DC_LONGCTS_RTW: u8 = 140;
pub const DC_WRITE_RTA: u8 = 141;
/// Runt-read requests (need device RDMA read, as long read): the first `runt_length` bytes of
/// the message travel in one or more of these packets, each carrying the sender's `read_iov`
/// entries and then runt bytes at its `seg_offset`; the receiver reads the rest from the
/// sender's memory.
pub const RUNTREAD_MSGRTM: u8 = 145;
pub const RUNTREAD_TAGRTM: u8 = 146;
/// This library's extension (negotiated with [`EXTRA_ERROR_RESPONSE`]): a refused remote
/// access (bad key, bounds, access rights, unsupported atomic) reported back to the initiator.
pub const ERR: u8 = 200;

// Base header flags.
pub const REQ_RAW_ADDR_HDR: u16 = 1 << 0;
pub const REQ_CQ_DATA_HDR: u16 = 1 << 1;
pub const REQ_MSG: u16 = 1 << 2;
pub const REQ_TAGGED: u16 = 1 << 3;
pub const REQ_RMA: u16 = 1 << 4;
pub const REQ_ATOMIC: u16 = 1 << 5;
pub const REQ_READ_NACK: u16 = 1 << 13;
pub const CONNID_HDR: u16 = 1 << 15;
/// CTS flag: the CTS of an emulated read (requester → responder).
pub const CTS_READ_REQ: u16 = 1 << 7;

// Handshake extra-info feature bits (efa-reference §2).
pub const EXTRA_RDMA_READ: u64 = 1 << 0;
pub const EXTRA_DELIVERY_COMPLETE: u64 = 1 << 1;
pub const EXTRA_CONSTANT_HEADER_LENGTH: u64 = 1 << 2;
pub const EXTRA_CONNID_HEADER: u64 = 1 << 3;
pub const EXTRA_RUNT: u64 = 1 << 4;
pub const EXTRA_RDMA_WRITE: u64 = 1 << 5;
pub const EXTRA_READ_NACK: u64 = 1 << 6;
pub const EXTRA_UNSOLICITED_WRITE_RECV: u64 = 1 << 8;
/// This library: understands [`ERR`] packets.
pub const EXTRA_ERROR_RESPONSE: u64 = 1 << 9;

// Handshake optional-header flags.
pub const HS_HOST_ID: u16 = 1 << 0;
pub const HS_DEVICE_VERSION: u16 = 1 << 1;
pub const HS_USER_RECV_QP: u16 = 1 << 2;
/// This library's extension: the handshake ends with an 8-byte field {u32 largest RDM packet
/// the sender receives, u32 pad}. It is the last field, after every other optional field,
/// and read from the end of the packet, so that a field a later upstream version defines
/// between them does not move it for a reader that does not know that field. A peer that
/// does not know the bit ignores the trailing bytes (upstream reads optional fields by their
/// own flags only). Without it, the peer receives what we do: upstream and older peers, and
/// EFA hardware, whose devices share one MTU. The bit is far from upstream's (0–2), as
/// [`EXTRA_ERROR_RESPONSE`] is from upstream's feature bits.
pub const HS_MAX_PKT: u16 = 1 << 12;

/// Size of the raw-address optional header (u32 length + 32-byte address, padded to 8).
pub const RAW_ADDR_HDR_LEN: usize = 40;
/// Size of one `efa_rma_iov` / rma_ioc entry (addr, len-or-count, key).
pub const RMA_IOV_LEN: usize = 24;
/// Largest number of rma entries a request may carry.
pub const MAX_RMA_IOV: usize = 4;

// Inlined: a few instructions each, where a call per field cost more than the read
// (callgrind: `rd32` was 49 instructions of every bulk datagram's parse).
#[inline]
fn rd16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
#[inline]
fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
#[inline]
fn rd64(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// A little-endian writer over a packet buffer.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Writer<'a> {
        Writer { buf, pos: 0 }
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf[self.pos] = v;
        self.pos += 1;
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf[self.pos..self.pos + 2].copy_from_slice(&v.to_le_bytes());
        self.pos += 2;
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf[self.pos..self.pos + 4].copy_from_slice(&v.to_le_bytes());
        self.pos += 4;
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf[self.pos..self.pos + 8].copy_from_slice(&v.to_le_bytes());
        self.pos += 8;
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
        self
    }
    pub fn base(&mut self, ty: u8, flags: u16) -> &mut Self {
        self.u8(ty).u8(VERSION).u16(flags)
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
}

/// An RMA target entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RmaIov {
    pub addr: u64,
    /// Bytes (RTW/RTR) or elements (RTA).
    pub len: u64,
    pub key: u64,
}

/// The mandatory-header fields of a REQ packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReqHdr {
    pub msg_id: u32,
    pub tag: u64,
    pub msg_length: u64,
    pub seg_offset: u64,
    pub send_id: u32,
    pub recv_id: u32,
    pub credit_request: u32,
    /// RTR: bytes the requester is ready to receive.
    pub recv_length: u64,
    pub rma_iov_count: u32,
    pub datatype: u32,
    pub atomic_op: u32,
    /// Long-read and runt-read: `read_iov` entries in the application data.
    pub read_iov_count: u32,
    /// Runt-read: bytes of the message sent in runt packets (the rest is read).
    pub runt_length: u64,
}

/// Size of the mandatory header of REQ type `ty`.
pub fn req_hdr_len(ty: u8) -> Option<usize> {
    Some(match ty {
        EAGER_MSGRTM => 8,
        EAGER_TAGRTM => 16,
        MEDIUM_MSGRTM => 24,
        MEDIUM_TAGRTM => 32,
        LONGCTS_MSGRTM | DC_LONGCTS_MSGRTM => 24,
        LONGCTS_TAGRTM | DC_LONGCTS_TAGRTM => 32,
        DC_EAGER_MSGRTM => 16,
        DC_EAGER_TAGRTM => 24,
        DC_MEDIUM_MSGRTM => 32,
        DC_MEDIUM_TAGRTM => 40,
        EAGER_RTW => 8,
        DC_EAGER_RTW => 16,
        LONGCTS_RTW | DC_LONGCTS_RTW => 24,
        SHORT_RTR | LONGCTS_RTR => 24,
        WRITE_RTA | FETCH_RTA | COMPARE_RTA | DC_WRITE_RTA => 24,
        LONGREAD_MSGRTM | LONGREAD_RTW => 24,
        LONGREAD_TAGRTM => 32,
        RUNTREAD_MSGRTM => 40,
        RUNTREAD_TAGRTM => 48,
        _ => return None,
    })
}

pub fn is_req(ty: u8) -> bool {
    req_hdr_len(ty).is_some()
}

pub fn is_tagged(ty: u8) -> bool {
    matches!(
        ty,
        EAGER_TAGRTM
            | MEDIUM_TAGRTM
            | LONGCTS_TAGRTM
            | LONGREAD_TAGRTM
            | RUNTREAD_TAGRTM
            | DC_EAGER_TAGRTM
            | DC_MEDIUM_TAGRTM
            | DC_LONGCTS_TAGRTM
    )
}

/// Messages and atomics share the per-peer msg_id order; RMA requests do not.
pub fn is_ordered(ty: u8) -> bool {
    matches!(
        ty,
        EAGER_MSGRTM
            | EAGER_TAGRTM
            | MEDIUM_MSGRTM
            | MEDIUM_TAGRTM
            | LONGCTS_MSGRTM
            | LONGCTS_TAGRTM
            | LONGREAD_MSGRTM
            | LONGREAD_TAGRTM
            | RUNTREAD_MSGRTM
            | RUNTREAD_TAGRTM
            | DC_EAGER_MSGRTM
            | DC_EAGER_TAGRTM
            | DC_MEDIUM_MSGRTM
            | DC_MEDIUM_TAGRTM
            | DC_LONGCTS_MSGRTM
            | DC_LONGCTS_TAGRTM
            | WRITE_RTA
            | FETCH_RTA
            | COMPARE_RTA
            | DC_WRITE_RTA
    )
}

/// Encodes a REQ packet's headers into `buf` and returns where application data starts.
/// `raw_addr` and `connid` are mutually exclusive (the raw address carries the QKEY).
#[allow(clippy::too_many_arguments)]
pub fn write_req(
    buf: &mut [u8],
    ty: u8,
    mut flags: u16,
    h: &ReqHdr,
    rma: &[RmaIov],
    raw_addr: Option<&EfaAddr>,
    cq_data: Option<u64>,
    connid: Option<u32>,
) -> usize {
    if raw_addr.is_some() {
        flags |= REQ_RAW_ADDR_HDR;
    } else if connid.is_some() {
        flags |= CONNID_HDR;
    }
    if cq_data.is_some() {
        flags |= REQ_CQ_DATA_HDR;
    }
    let mut w = Writer::new(buf);
    w.base(ty, flags);
    match ty {
        EAGER_MSGRTM | EAGER_TAGRTM => {
            w.u32(h.msg_id);
        }
        MEDIUM_MSGRTM | MEDIUM_TAGRTM => {
            w.u32(h.msg_id).u64(h.msg_length).u64(h.seg_offset);
        }
        LONGCTS_MSGRTM | LONGCTS_TAGRTM | DC_LONGCTS_MSGRTM | DC_LONGCTS_TAGRTM => {
            w.u32(h.msg_id)
                .u64(h.msg_length)
                .u32(h.send_id)
                .u32(h.credit_request);
        }
        DC_EAGER_MSGRTM | DC_EAGER_TAGRTM => {
            w.u32(h.msg_id).u32(h.send_id).u32(0);
        }
        DC_MEDIUM_MSGRTM | DC_MEDIUM_TAGRTM => {
            w.u32(h.msg_id)
                .u32(h.send_id)
                .u32(0)
                .u64(h.msg_length)
                .u64(h.seg_offset);
        }
        EAGER_RTW => {
            w.u32(h.rma_iov_count);
        }
        DC_EAGER_RTW => {
            w.u32(h.rma_iov_count).u32(h.send_id).u32(0);
        }
        LONGCTS_RTW | DC_LONGCTS_RTW => {
            w.u32(h.rma_iov_count)
                .u64(h.msg_length)
                .u32(h.send_id)
                .u32(h.credit_request);
        }
        LONGREAD_MSGRTM | LONGREAD_TAGRTM => {
            w.u32(h.msg_id)
                .u64(h.msg_length)
                .u32(h.send_id)
                .u32(h.read_iov_count);
        }
        RUNTREAD_MSGRTM | RUNTREAD_TAGRTM => {
            w.u32(h.msg_id)
                .u64(h.msg_length)
                .u32(h.send_id)
                .u32(h.read_iov_count)
                .u64(h.seg_offset)
                .u64(h.runt_length);
        }
        LONGREAD_RTW => {
            w.u32(h.rma_iov_count)
                .u64(h.msg_length)
                .u32(h.send_id)
                .u32(h.read_iov_count);
        }
        SHORT_RTR | LONGCTS_RTR => {
            w.u32(h.rma_iov_count)
                .u64(h.msg_length)
                .u32(h.recv_id)
                .u32(h.recv_length as u32);
        }
        WRITE_RTA | FETCH_RTA | COMPARE_RTA | DC_WRITE_RTA => {
            w.u32(h.msg_id)
                .u32(h.rma_iov_count)
                .u32(h.datatype)
                .u32(h.atomic_op)
                .u32(match ty {
                    FETCH_RTA | COMPARE_RTA => h.recv_id,
                    DC_WRITE_RTA => h.send_id,
                    _ => 0,
                });
        }
        _ => {}
    }
    if is_tagged(ty) {
        w.u64(h.tag);
    }
    for r in rma {
        w.u64(r.addr).u64(r.len).u64(r.key);
    }
    if let Some(a) = raw_addr {
        w.u32((RAW_ADDR_HDR_LEN - 4) as u32)
            .bytes(&a.to_bytes())
            .bytes(&[0u8; RAW_ADDR_HDR_LEN - 4 - EFA_ADDR_LEN]);
    }
    if let Some(d) = cq_data {
        w.u64(d);
    }
    if let (None, Some(c)) = (raw_addr, connid) {
        w.u32(c);
    }
    w.pos()
}

/// Header bytes a REQ of type `ty` needs with these options (data excluded).
pub fn req_len(ty: u8, rma_count: usize, raw_addr: bool, cq_data: bool, connid: bool) -> usize {
    req_hdr_len(ty).unwrap_or(0)
        + rma_count * RMA_IOV_LEN
        + if raw_addr { RAW_ADDR_HDR_LEN } else { 0 }
        + if cq_data { 8 } else { 0 }
        + if connid && !raw_addr { 4 } else { 0 }
}

/// A parsed REQ packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Req {
    pub ty: u8,
    pub flags: u16,
    pub hdr: ReqHdr,
    pub rma: Vec<RmaIov>,
    pub raw_addr: Option<EfaAddr>,
    pub cq_data: Option<u64>,
    pub connid: Option<u32>,
    /// Where application data starts in the packet.
    pub data_off: usize,
}

/// A parsed non-REQ packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctrl {
    Cts {
        connid: u32,
        send_id: u32,
        recv_id: u32,
        recv_length: u64,
    },
    /// `data_off` is where the segment's bytes start.
    CtsData {
        recv_id: u32,
        seg_length: u64,
        seg_offset: u64,
        connid: Option<u32>,
        data_off: usize,
    },
    ReadRsp {
        connid: u32,
        recv_id: u32,
        send_id: u32,
        seg_length: u64,
        data_off: usize,
    },
    Eor {
        send_id: u32,
        recv_id: u32,
    },
    AtomRsp {
        recv_id: u32,
        seg_length: u64,
        data_off: usize,
    },
    Handshake {
        extra_info: u64,
        connid: Option<u32>,
        host_id: Option<u64>,
        device_version: Option<u32>,
        /// [`HS_MAX_PKT`]: the largest RDM packet the sender receives.
        max_pkt: Option<u32>,
    },
    Receipt {
        tx_id: u32,
        msg_id: u32,
    },
    ReadNack {
        send_id: u32,
        recv_id: u32,
        connid: Option<u32>,
    },
    Err {
        tx_id: u32,
        status: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pkt {
    Req(Req),
    Ctrl(Ctrl),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    Truncated,
    Version,
    UnknownType(u8),
    BadField,
}

/// A CTSDATA packet's fields (`b` is at least 4 bytes, its type CTSDATA, its version ours),
/// from `b`, the first bytes of a packet of `len` bytes (all of it, unless it came in
/// fragments).
#[inline(always)]
fn parse_ctsdata(b: &[u8], len: usize, flags: u16) -> Result<Ctrl, ParseError> {
    let data_off = if flags & CONNID_HDR != 0 { 32 } else { 24 };
    if b.len() < data_off {
        return Err(ParseError::Truncated);
    }
    let connid = (data_off == 32).then(|| rd32(b, 24));
    let seg_length = rd64(b, 8);
    if (data_off as u64)
        .checked_add(seg_length)
        .is_none_or(|e| e > len as u64)
    {
        return Err(ParseError::Truncated);
    }
    Ok(Ctrl::CtsData {
        recv_id: rd32(b, 4),
        seg_length,
        seg_offset: rd64(b, 16),
        connid,
        data_off,
    })
}

/// A CTSDATA packet's fields, or `None` for any other packet (`parse` says what it is).
/// Bulk transfers are mostly CTSDATA: the receiver takes this path first, so that the fields
/// go straight to their handler in registers rather than through a whole `Pkt` in memory.
#[inline(always)]
pub fn parse_if_ctsdata(b: &[u8]) -> Option<Result<Ctrl, ParseError>> {
    parse_if_ctsdata_in(b, b.len())
}

/// As [`parse_if_ctsdata`], from `head`, the first bytes of a packet of `len` bytes (one
/// that came in fragments: its headers are in the first).
#[inline(always)]
pub fn parse_if_ctsdata_in(head: &[u8], len: usize) -> Option<Result<Ctrl, ParseError>> {
    if head.len() < 4 || head[0] != CTSDATA || head[1] != VERSION || len < head.len() {
        return None;
    }
    Some(parse_ctsdata(head, len, rd16(head, 2)))
}

/// Parses a packet. Never panics, whatever the bytes.
pub fn parse(b: &[u8]) -> Result<Pkt, ParseError> {
    if b.len() < 4 {
        return Err(ParseError::Truncated);
    }
    let (ty, ver, flags) = (b[0], b[1], rd16(b, 2));
    if ver != VERSION {
        return Err(ParseError::Version);
    }
    // Every datagram of a bulk transfer but its first: straight to its few fields.
    if ty == CTSDATA {
        return parse_ctsdata(b, b.len(), flags).map(Pkt::Ctrl);
    }
    let need = |n: usize| {
        if b.len() < n {
            Err(ParseError::Truncated)
        } else {
            Ok(())
        }
    };
    if let Some(hlen) = req_hdr_len(ty) {
        need(hlen)?;
        let mut h = ReqHdr::default();
        match ty {
            EAGER_MSGRTM | EAGER_TAGRTM => h.msg_id = rd32(b, 4),
            MEDIUM_MSGRTM | MEDIUM_TAGRTM => {
                h.msg_id = rd32(b, 4);
                h.msg_length = rd64(b, 8);
                h.seg_offset = rd64(b, 16);
            }
            LONGCTS_MSGRTM | LONGCTS_TAGRTM | DC_LONGCTS_MSGRTM | DC_LONGCTS_TAGRTM => {
                h.msg_id = rd32(b, 4);
                h.msg_length = rd64(b, 8);
                h.send_id = rd32(b, 16);
                h.credit_request = rd32(b, 20);
            }
            DC_EAGER_MSGRTM | DC_EAGER_TAGRTM => {
                h.msg_id = rd32(b, 4);
                h.send_id = rd32(b, 8);
            }
            DC_MEDIUM_MSGRTM | DC_MEDIUM_TAGRTM => {
                h.msg_id = rd32(b, 4);
                h.send_id = rd32(b, 8);
                h.msg_length = rd64(b, 16);
                h.seg_offset = rd64(b, 24);
            }
            EAGER_RTW => h.rma_iov_count = rd32(b, 4),
            DC_EAGER_RTW => {
                h.rma_iov_count = rd32(b, 4);
                h.send_id = rd32(b, 8);
            }
            LONGCTS_RTW | DC_LONGCTS_RTW => {
                h.rma_iov_count = rd32(b, 4);
                h.msg_length = rd64(b, 8);
                h.send_id = rd32(b, 16);
                h.credit_request = rd32(b, 20);
            }
            SHORT_RTR | LONGCTS_RTR => {
                h.rma_iov_count = rd32(b, 4);
                h.msg_length = rd64(b, 8);
                h.recv_id = rd32(b, 16);
                h.recv_length = u64::from(rd32(b, 20));
            }
            LONGREAD_MSGRTM | LONGREAD_TAGRTM => {
                h.msg_id = rd32(b, 4);
                h.msg_length = rd64(b, 8);
                h.send_id = rd32(b, 16);
                h.read_iov_count = rd32(b, 20);
            }
            RUNTREAD_MSGRTM | RUNTREAD_TAGRTM => {
                h.msg_id = rd32(b, 4);
                h.msg_length = rd64(b, 8);
                h.send_id = rd32(b, 16);
                h.read_iov_count = rd32(b, 20);
                h.seg_offset = rd64(b, 24);
                h.runt_length = rd64(b, 32);
            }
            LONGREAD_RTW => {
                h.rma_iov_count = rd32(b, 4);
                h.msg_length = rd64(b, 8);
                h.send_id = rd32(b, 16);
                h.read_iov_count = rd32(b, 20);
            }
            _ => {
                // RTA
                h.msg_id = rd32(b, 4);
                h.rma_iov_count = rd32(b, 8);
                h.datatype = rd32(b, 12);
                h.atomic_op = rd32(b, 16);
                match ty {
                    FETCH_RTA | COMPARE_RTA => h.recv_id = rd32(b, 20),
                    DC_WRITE_RTA => h.send_id = rd32(b, 20),
                    _ => {}
                }
            }
        }
        if is_tagged(ty) {
            h.tag = rd64(b, hlen - 8);
        }
        let mut off = hlen;
        let count = h.rma_iov_count as usize;
        if count > MAX_RMA_IOV {
            return Err(ParseError::BadField);
        }
        need(off + count * RMA_IOV_LEN)?;
        let rma = (0..count)
            .map(|i| {
                let o = off + i * RMA_IOV_LEN;
                RmaIov {
                    addr: rd64(b, o),
                    len: rd64(b, o + 8),
                    key: rd64(b, o + 16),
                }
            })
            .collect();
        off += count * RMA_IOV_LEN;
        let mut raw_addr = None;
        if flags & REQ_RAW_ADDR_HDR != 0 {
            need(off + 4)?;
            let alen = rd32(b, off) as usize;
            // Old peers used other sizes: honour the length, but it must hold an address.
            if !(EFA_ADDR_LEN..=256).contains(&alen) {
                return Err(ParseError::BadField);
            }
            need(off + 4 + alen)?;
            raw_addr = EfaAddr::from_bytes(&b[off + 4..off + 4 + EFA_ADDR_LEN]);
            off += (4 + alen).div_ceil(8) * 8;
            need(off)?;
        }
        let mut cq_data = None;
        if flags & REQ_CQ_DATA_HDR != 0 {
            need(off + 8)?;
            cq_data = Some(rd64(b, off));
            off += 8;
        }
        let mut connid = None;
        if flags & CONNID_HDR != 0 && flags & REQ_RAW_ADDR_HDR == 0 {
            need(off + 4)?;
            connid = Some(rd32(b, off));
            off += 4;
        }
        return Ok(Pkt::Req(Req {
            ty,
            flags,
            hdr: h,
            rma,
            raw_addr,
            cq_data,
            connid,
            data_off: off,
        }));
    }
    let ctrl = match ty {
        CTS => {
            need(24)?;
            Ctrl::Cts {
                connid: rd32(b, 4),
                send_id: rd32(b, 8),
                recv_id: rd32(b, 12),
                recv_length: rd64(b, 16),
            }
        }
        READRSP => {
            need(24)?;
            let seg_length = rd64(b, 16);
            if 24u64
                .checked_add(seg_length)
                .is_none_or(|e| e > b.len() as u64)
            {
                return Err(ParseError::Truncated);
            }
            Ctrl::ReadRsp {
                connid: rd32(b, 4),
                recv_id: rd32(b, 8),
                send_id: rd32(b, 12),
                seg_length,
                data_off: 24,
            }
        }
        EOR => {
            need(16)?;
            Ctrl::Eor {
                send_id: rd32(b, 4),
                recv_id: rd32(b, 8),
            }
        }
        ATOMRSP => {
            need(24)?;
            let seg_length = rd64(b, 16);
            if 24u64
                .checked_add(seg_length)
                .is_none_or(|e| e > b.len() as u64)
            {
                return Err(ParseError::Truncated);
            }
            Ctrl::AtomRsp {
                recv_id: rd32(b, 12),
                seg_length,
                data_off: 24,
            }
        }
        HANDSHAKE => {
            need(8)?;
            let nextra = rd32(b, 4).checked_sub(3).ok_or(ParseError::BadField)? as usize;
            if nextra > 64 {
                return Err(ParseError::BadField);
            }
            need(8 + nextra * 8)?;
            let extra_info = if nextra > 0 { rd64(b, 8) } else { 0 };
            let mut off = 8 + nextra * 8;
            let mut opt = |present: bool| -> Result<Option<u64>, ParseError> {
                if !present {
                    return Ok(None);
                }
                need(off + 8)?;
                let v = rd64(b, off);
                off += 8;
                Ok(Some(v))
            };
            // Optional fields in fixed order: connid, host id, device version, user recv QP.
            let connid = opt(flags & CONNID_HDR != 0)?.map(|v| v as u32);
            let host_id = opt(flags & HS_HOST_ID != 0)?;
            let device_version = opt(flags & HS_DEVICE_VERSION != 0)?.map(|v| v as u32);
            opt(flags & HS_USER_RECV_QP != 0)?;
            // Ours is the packet's last 8 bytes, after the fields we know of and any we do not.
            let max_pkt = if flags & HS_MAX_PKT != 0 {
                need(off + 8)?;
                Some(rd32(b, b.len() - 8))
            } else {
                None
            };
            Ctrl::Handshake {
                extra_info,
                connid,
                host_id,
                device_version,
                max_pkt,
            }
        }
        RECEIPT => {
            need(16)?;
            Ctrl::Receipt {
                tx_id: rd32(b, 4),
                msg_id: rd32(b, 8),
            }
        }
        READ_NACK => {
            need(16)?;
            Ctrl::ReadNack {
                send_id: rd32(b, 4),
                recv_id: rd32(b, 8),
                connid: (flags & CONNID_HDR != 0).then(|| rd32(b, 12)),
            }
        }
        ERR => {
            need(16)?;
            Ctrl::Err {
                tx_id: rd32(b, 4),
                status: rd32(b, 8),
            }
        }
        t => return Err(ParseError::UnknownType(t)),
    };
    Ok(Pkt::Ctrl(ctrl))
}

/// CTS: {connid|pad, send_id, recv_id, recv_length}.
pub fn write_cts(
    buf: &mut [u8],
    read_req: bool,
    connid: u32,
    send_id: u32,
    recv_id: u32,
    recv_length: u64,
) -> usize {
    let mut w = Writer::new(buf);
    w.base(CTS, CONNID_HDR | if read_req { CTS_READ_REQ } else { 0 })
        .u32(connid)
        .u32(send_id)
        .u32(recv_id)
        .u64(recv_length);
    w.pos()
}

/// Bytes of a CTSDATA header with the connid option (`write_ctsdata`).
pub const CTSDATA_HDR: usize = 32;

/// CTSDATA header with the connid option: returns where data starts (32).
pub fn write_ctsdata(
    buf: &mut [u8],
    recv_id: u32,
    seg_length: u64,
    seg_offset: u64,
    connid: u32,
) -> usize {
    let mut w = Writer::new(buf);
    w.base(CTSDATA, CONNID_HDR)
        .u32(recv_id)
        .u64(seg_length)
        .u64(seg_offset)
        .u32(connid)
        .u32(0);
    w.pos()
}

/// READRSP header (code order: connid, recv_id, send_id, seg_length): data at 24.
pub fn write_readrsp(
    buf: &mut [u8],
    connid: u32,
    recv_id: u32,
    send_id: u32,
    seg_length: u64,
) -> usize {
    let mut w = Writer::new(buf);
    w.base(READRSP, CONNID_HDR)
        .u32(connid)
        .u32(recv_id)
        .u32(send_id)
        .u64(seg_length);
    w.pos()
}

/// ATOMRSP header {connid, reserved, recv_id, seg_length}: data at 24.
pub fn write_atomrsp(buf: &mut [u8], connid: u32, recv_id: u32, seg_length: u64) -> usize {
    let mut w = Writer::new(buf);
    w.base(ATOMRSP, CONNID_HDR)
        .u32(connid)
        .u32(0)
        .u32(recv_id)
        .u64(seg_length);
    w.pos()
}

/// RECEIPT {tx_id, msg_id, connid}.
pub fn write_receipt(buf: &mut [u8], tx_id: u32, msg_id: u32, connid: u32) -> usize {
    let mut w = Writer::new(buf);
    w.base(RECEIPT, CONNID_HDR)
        .u32(tx_id)
        .u32(msg_id)
        .u32(connid);
    w.pos()
}

/// The `read_iov` entries a long-read request carries as its data: `count` of them, at most
/// [`MAX_RMA_IOV`], all there; None otherwise.
pub fn read_iovs(data: &[u8], count: u32) -> Option<Vec<RmaIov>> {
    let count = count as usize;
    if count > MAX_RMA_IOV || data.len() < count * RMA_IOV_LEN {
        return None;
    }
    Some(
        (0..count)
            .map(|i| {
                let o = i * RMA_IOV_LEN;
                RmaIov {
                    addr: rd64(data, o),
                    len: rd64(data, o + 8),
                    key: rd64(data, o + 16),
                }
            })
            .collect(),
    )
}

/// The bytes `iov` describes in all, if that fits in a u64.
pub fn read_iov_total(iov: &[RmaIov]) -> Option<u64> {
    iov.iter().try_fold(0u64, |t, r| t.checked_add(r.len))
}

/// `read_iov` entries as a long-read request's data.
pub fn write_read_iovs(buf: &mut [u8], iov: &[RmaIov]) -> usize {
    let mut w = Writer::new(buf);
    for r in iov {
        w.u64(r.addr).u64(r.len).u64(r.key);
    }
    w.pos()
}

/// EOR {send_id, recv_id, connid}: the receiver of a long-read request has read everything.
pub fn write_eor(buf: &mut [u8], send_id: u32, recv_id: u32, connid: u32) -> usize {
    let mut w = Writer::new(buf);
    w.base(EOR, CONNID_HDR)
        .u32(send_id)
        .u32(recv_id)
        .u32(connid);
    w.pos()
}

/// READ_NACK {send_id, recv_id, connid}: the receiver of a long-read or runt-read request
/// cannot read the sender's memory (it could not register its own); the sender goes on by
/// long-CTS (efa-reference §3).
pub fn write_read_nack(buf: &mut [u8], send_id: u32, recv_id: u32, connid: u32) -> usize {
    let mut w = Writer::new(buf);
    w.base(READ_NACK, CONNID_HDR)
        .u32(send_id)
        .u32(recv_id)
        .u32(connid);
    w.pos()
}

/// ERR {tx_id, status, connid}.
pub fn write_err(buf: &mut [u8], tx_id: u32, status: u32, connid: u32) -> usize {
    let mut w = Writer::new(buf);
    w.base(ERR, CONNID_HDR).u32(tx_id).u32(status).u32(connid);
    w.pos()
}

/// HANDSHAKE with one extra-info word, the connid and device-version options, and the
/// largest packet we receive ([`HS_MAX_PKT`]).
pub fn write_handshake(
    buf: &mut [u8],
    extra_info: u64,
    connid: u32,
    device_version: u32,
    max_pkt: u32,
) -> usize {
    let mut w = Writer::new(buf);
    w.base(HANDSHAKE, CONNID_HDR | HS_DEVICE_VERSION | HS_MAX_PKT)
        .u32(1 + 3)
        .u64(extra_info)
        .u32(connid)
        .u32(0)
        .u32(device_version)
        .u32(0)
        .u32(max_pkt)
        .u32(0);
    w.pos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_sizes_match_the_protocol() {
        let h = ReqHdr {
            msg_id: 7,
            tag: 0xabc,
            msg_length: 99,
            seg_offset: 5,
            send_id: 3,
            credit_request: 32,
            ..Default::default()
        };
        for (ty, size) in [
            (EAGER_MSGRTM, 8),
            (EAGER_TAGRTM, 16),
            (MEDIUM_MSGRTM, 24),
            (MEDIUM_TAGRTM, 32),
            (LONGCTS_MSGRTM, 24),
            (LONGCTS_TAGRTM, 32),
            (DC_EAGER_MSGRTM, 16),
            (DC_EAGER_TAGRTM, 24),
            (DC_MEDIUM_MSGRTM, 32),
            (DC_MEDIUM_TAGRTM, 40),
            (EAGER_RTW, 8),
            (DC_EAGER_RTW, 16),
            (LONGCTS_RTW, 24),
            (SHORT_RTR, 24),
            (WRITE_RTA, 24),
            (LONGREAD_MSGRTM, 24),
            (LONGREAD_TAGRTM, 32),
            (LONGREAD_RTW, 24),
            (RUNTREAD_MSGRTM, 40),
            (RUNTREAD_TAGRTM, 48),
        ] {
            let mut b = [0u8; 256];
            assert_eq!(
                write_req(&mut b, ty, 0, &h, &[], None, None, None),
                size,
                "type {ty}"
            );
        }
    }

    #[test]
    fn requests_round_trip_with_options() {
        let addr = EfaAddr {
            gid: [1; 16],
            qpn: 9,
            qkey: 77,
        };
        let h = ReqHdr {
            msg_id: 1,
            tag: 0xfeed,
            msg_length: 1 << 20,
            send_id: 4,
            credit_request: 32,
            ..Default::default()
        };
        let rma = [RmaIov {
            addr: 1,
            len: 2,
            key: 3,
        }];
        let mut b = [0u8; 512];
        for (raw, cq, conn) in [
            (Some(&addr), Some(5u64), None),
            (None, None, Some(42u32)),
            (None, Some(6), Some(43)),
        ] {
            let n = write_req(&mut b, LONGCTS_TAGRTM, REQ_TAGGED, &h, &[], raw, cq, conn);
            assert_eq!(
                n,
                req_len(
                    LONGCTS_TAGRTM,
                    0,
                    raw.is_some(),
                    cq.is_some(),
                    conn.is_some()
                )
            );
            let Pkt::Req(r) = parse(&b[..n + 10]).unwrap() else {
                panic!()
            };
            assert_eq!(
                (r.hdr, r.raw_addr, r.cq_data, r.connid, r.data_off),
                (h, raw.copied(), cq, conn, n)
            );
            let hr = ReqHdr {
                rma_iov_count: 1,
                datatype: 7,
                atomic_op: 2,
                recv_id: 11,
                msg_id: 3,
                ..Default::default()
            };
            let n = write_req(&mut b, FETCH_RTA, REQ_ATOMIC, &hr, &rma, raw, cq, conn);
            let Pkt::Req(r) = parse(&b[..n]).unwrap() else {
                panic!()
            };
            assert_eq!((r.hdr, r.rma.as_slice()), (hr, &rma[..]));
        }
    }

    /// Long-read requests: their headers, the read_iov data after the optional headers, and
    /// EOR (efa-reference §1 layouts).
    #[test]
    fn long_read_requests_and_eor_round_trip() {
        let iov = [
            RmaIov {
                addr: 0x1000,
                len: 1 << 20,
                key: 0x5a01,
            },
            RmaIov {
                addr: 0x9000,
                len: 77,
                key: 0x5a02,
            },
        ];
        let mut b = [0u8; 256];
        let h = ReqHdr {
            msg_id: 9,
            tag: 0xbeef,
            msg_length: (1 << 20) + 77,
            send_id: 0x8000_0003,
            read_iov_count: 2,
            ..Default::default()
        };
        let n = write_req(
            &mut b,
            LONGREAD_TAGRTM,
            REQ_TAGGED,
            &h,
            &[],
            None,
            Some(8),
            Some(5),
        );
        let m = write_read_iovs(&mut b[n..], &iov);
        let Pkt::Req(r) = parse(&b[..n + m]).unwrap() else {
            panic!()
        };
        assert_eq!((r.hdr, r.cq_data, r.connid), (h, Some(8), Some(5)));
        assert_eq!(read_iovs(&b[r.data_off..n + m], 2).unwrap(), iov);
        assert!(read_iovs(&b[r.data_off..n + m - 1], 2).is_none());
        assert!(read_iovs(&b[..200], 5).is_none());
        assert!(is_ordered(LONGREAD_MSGRTM) && is_tagged(LONGREAD_TAGRTM));
        assert!(!is_ordered(LONGREAD_RTW));
        let hw = ReqHdr {
            rma_iov_count: 1,
            msg_length: 64,
            send_id: 3,
            read_iov_count: 1,
            ..Default::default()
        };
        let n = write_req(
            &mut b,
            LONGREAD_RTW,
            REQ_RMA,
            &hw,
            &iov[..1],
            None,
            None,
            Some(1),
        );
        let Pkt::Req(r) = parse(&b[..n]).unwrap() else {
            panic!()
        };
        assert_eq!((r.hdr, r.rma.as_slice()), (hw, &iov[..1]));
        let n = write_eor(&mut b, 7, 8, 9);
        assert_eq!(n, 16);
        assert_eq!(
            parse(&b[..n]).unwrap(),
            Pkt::Ctrl(Ctrl::Eor {
                send_id: 7,
                recv_id: 8
            })
        );
    }

    /// Runt-read requests (efa-reference §1): the long-read fields, then seg_offset and
    /// runt_length, the tag last; the read_iov entries and runt bytes after the optional
    /// headers. Both are ordered messages, the tagged one tagged.
    #[test]
    fn runt_read_requests_round_trip() {
        let iov = [RmaIov {
            addr: 0x7000,
            len: 300_000,
            key: 0x11,
        }];
        let h = ReqHdr {
            msg_id: 0x0102_0304,
            tag: 0xa5a5,
            msg_length: 300_000,
            send_id: 12,
            read_iov_count: 1,
            seg_offset: 4096,
            runt_length: 12_288,
            ..Default::default()
        };
        let addr = EfaAddr {
            gid: [3; 16],
            qpn: 4,
            qkey: 5,
        };
        let mut b = [0u8; 256];
        for (ty, flags) in [(RUNTREAD_MSGRTM, REQ_MSG), (RUNTREAD_TAGRTM, REQ_TAGGED)] {
            let n = write_req(&mut b, ty, flags, &h, &[], Some(&addr), None, None);
            assert_eq!(n, req_len(ty, 0, true, false, false));
            // The fields where upstream's struct puts them.
            assert_eq!(rd32(&b, 4), 0x0102_0304);
            assert_eq!(rd64(&b, 8), 300_000);
            assert_eq!(rd32(&b, 16), 12);
            assert_eq!(rd32(&b, 20), 1);
            assert_eq!(rd64(&b, 24), 4096);
            assert_eq!(rd64(&b, 32), 12_288);
            let m = write_read_iovs(&mut b[n..], &iov);
            b[n + m..n + m + 5].copy_from_slice(b"runt!");
            let Pkt::Req(r) = parse(&b[..n + m + 5]).unwrap() else {
                panic!()
            };
            let want = ReqHdr {
                tag: if ty == RUNTREAD_TAGRTM { h.tag } else { 0 },
                ..h
            };
            assert_eq!((r.ty, r.hdr, r.raw_addr), (ty, want, Some(addr)));
            assert_eq!(read_iovs(&b[r.data_off..], 1).unwrap(), iov);
            assert_eq!(&b[r.data_off + RMA_IOV_LEN..n + m + 5], b"runt!");
            assert!(is_ordered(ty));
            assert_eq!(is_tagged(ty), ty == RUNTREAD_TAGRTM);
            assert_eq!(parse(&b[..39]), Err(ParseError::Truncated));
        }
        assert_eq!(
            read_iov_total(&[iov[0], RmaIov { len: 1, ..iov[0] }]),
            Some(300_001)
        );
        assert_eq!(
            read_iov_total(&[
                iov[0],
                RmaIov {
                    len: u64::MAX,
                    ..iov[0]
                }
            ]),
            None
        );
    }

    #[test]
    fn control_packets_round_trip() {
        let mut b = [0u8; 64];
        let n = write_cts(&mut b, true, 1, 2, 3, 4);
        assert_eq!(
            parse(&b[..n]).unwrap(),
            Pkt::Ctrl(Ctrl::Cts {
                connid: 1,
                send_id: 2,
                recv_id: 3,
                recv_length: 4
            })
        );
        let n = write_ctsdata(&mut b, 5, 3, 100, 9);
        assert_eq!(n, 32);
        assert!(
            parse(&b[..n + 2]).is_err(),
            "declared data longer than the packet"
        );
        assert_eq!(
            parse(&b[..n + 3]).unwrap(),
            Pkt::Ctrl(Ctrl::CtsData {
                recv_id: 5,
                seg_length: 3,
                seg_offset: 100,
                connid: Some(9),
                data_off: 32
            })
        );
        let n = write_readrsp(&mut b, 1, 2, 3, 0);
        assert_eq!(
            parse(&b[..n]).unwrap(),
            Pkt::Ctrl(Ctrl::ReadRsp {
                connid: 1,
                recv_id: 2,
                send_id: 3,
                seg_length: 0,
                data_off: 24
            })
        );
        let n = write_handshake(&mut b, 0x5a, 7, 0xefa0, 1348);
        assert_eq!(
            parse(&b[..n]).unwrap(),
            Pkt::Ctrl(Ctrl::Handshake {
                extra_info: 0x5a,
                connid: Some(7),
                host_id: None,
                device_version: Some(0xefa0),
                max_pkt: Some(1348),
            })
        );
        let n = write_receipt(&mut b, 8, 9, 1);
        assert_eq!(
            parse(&b[..n]).unwrap(),
            Pkt::Ctrl(Ctrl::Receipt {
                tx_id: 8,
                msg_id: 9
            })
        );
        let n = write_read_nack(&mut b, 0x8000_0003, 4, 0x1234);
        assert_eq!(n, 16, "READ_NACK is 16 bytes");
        assert_eq!(
            &b[..4],
            &[READ_NACK, VERSION, 0, 0x80],
            "type 11, CONNID_HDR"
        );
        assert_eq!(
            parse(&b[..n]).unwrap(),
            Pkt::Ctrl(Ctrl::ReadNack {
                send_id: 0x8000_0003,
                recv_id: 4,
                connid: Some(0x1234),
            })
        );
        assert_eq!(parse(&b[..n - 1]), Err(ParseError::Truncated));
        // Without CONNID_HDR the last word is padding.
        b[3] = 0;
        assert_eq!(
            parse(&b[..n]).unwrap(),
            Pkt::Ctrl(Ctrl::ReadNack {
                send_id: 0x8000_0003,
                recv_id: 4,
                connid: None,
            })
        );
        let n = write_err(&mut b, 8, 13, 1);
        assert_eq!(
            parse(&b[..n]).unwrap(),
            Pkt::Ctrl(Ctrl::Err {
                tx_id: 8,
                status: 13
            })
        );
        assert_eq!(parse(&[99, 4, 0, 0]), Err(ParseError::UnknownType(99)));
        assert_eq!(parse(&[64, 3, 0, 0, 0, 0, 0, 0]), Err(ParseError::Version));
    }

    /// The packet-size field of a handshake ([`HS_MAX_PKT`]): emitted and parsed back, absent
    /// from an upstream handshake, found at the end after a field we do not know, and a
    /// flagged handshake too short to hold it refused.
    #[test]
    fn handshake_max_pkt_field_round_trips() {
        let mut b = [0u8; 96];
        let n = write_handshake(&mut b, 1, 9, 0, 65_483);
        assert_eq!(n, 8 + 8 + 8 + 8 + 8);
        assert_eq!(rd16(&b, 2) & HS_MAX_PKT, HS_MAX_PKT);
        let Ok(Pkt::Ctrl(Ctrl::Handshake { max_pkt, .. })) = parse(&b[..n]) else {
            panic!()
        };
        assert_eq!(max_pkt, Some(65_483));
        // As upstream 2.6 sends it: connid and device version, no size.
        let mut u = [0u8; 64];
        let mut w = Writer::new(&mut u);
        w.base(HANDSHAKE, CONNID_HDR | HS_DEVICE_VERSION)
            .u32(4)
            .u64(0x5a)
            .u64(7)
            .u64(0xefa1);
        let un = w.pos();
        let Ok(Pkt::Ctrl(Ctrl::Handshake {
            max_pkt,
            device_version,
            ..
        })) = parse(&u[..un])
        else {
            panic!()
        };
        assert_eq!((max_pkt, device_version), (None, Some(0xefa1)));
        // A user-recv-QP field (and anything unknown) before ours does not move it.
        let mut x = [0u8; 64];
        let mut w = Writer::new(&mut x);
        w.base(HANDSHAKE, CONNID_HDR | HS_USER_RECV_QP | HS_MAX_PKT)
            .u32(4)
            .u64(0)
            .u64(7)
            .u64(0x1234)
            .u64(0xdead_beef)
            .u32(1400)
            .u32(0);
        let xn = w.pos();
        let Ok(Pkt::Ctrl(Ctrl::Handshake { max_pkt, .. })) = parse(&x[..xn]) else {
            panic!()
        };
        assert_eq!(max_pkt, Some(1400));
        assert_eq!(parse(&b[..n - 8]), Err(ParseError::Truncated));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn parse_never_panics_on_plausible_headers(ty in prop::sample::select(vec![3u8, 4, 5, 7, 8, 9, 10, 11, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 128, 129, 130, 133, 134, 135, 136, 137, 138, 139, 140, 141, 145, 146, 200]),
                                                    flags in any::<u16>(), rest in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut b = vec![ty, VERSION];
            b.extend_from_slice(&flags.to_le_bytes());
            b.extend(rest);
            if let Ok(Pkt::Req(r)) = parse(&b) {
                prop_assert!(r.data_off <= b.len());
            }
            if let Ok(Pkt::Ctrl(Ctrl::CtsData { data_off, seg_length, .. })) = parse(&b) {
                prop_assert!(data_off as u64 + seg_length <= b.len() as u64);
            }
        }
    }
}
