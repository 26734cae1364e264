//! The runt-read protocol (efa-reference §1, §3, §4): RUNTREAD_MSGRTM and RUNTREAD_TAGRTM,
//! which upstream senders use for long messages when both devices do RDMA read and a runt
//! budget is set (`FI_EFA_RUNT_SIZE`, and always from device memory).
//!
//! A runt-read message is a long read whose first `runt_length` bytes travel in request
//! packets. Each packet carries the whole header (msg_id, msg_length, send_id, the sender's
//! `read_iov` entries, `runt_length`) and the runt bytes at its `seg_offset`. The first one
//! to be processed goes through the peer's message order and matches a receive (or waits
//! unexpected, its runt bytes staged), as any message; the others find it by msg_id in the
//! peer's `rx_map` and bypass the order, as medium segments do. The rest of the message,
//! `[runt_length, msg_length)`, is read from the sender's memory by the long-read machinery
//! (`longread.rs`), whose reads simply start at `runt_length`; the message ends — EOR to the
//! sender, then our completion — once the runt bytes have all arrived and the reads are done.

//!
//! We send runt reads only when `FI_EFA_RUNT_SIZE` asks for them (upstream's default for host
//! memory is none): a message that would go by long read sends its first runt bytes (at most
//! the budget, cut to a multiple of 64 and short of the whole message) in RUNTREAD packets
//! filled to the peer's packet size, unless it wants delivery complete or another read
//! message of ours still waits for its EOR, as upstream chooses (its budget is per peer and
//! its in-flight count per domain; with one read message in flight per endpoint, the runt
//! bytes in flight never exceed the budget). It completes on EOR, as a long read does.

use super::ep::*;
use super::pkt::{self, ReqHdr, RmaIov};

/// The largest runt accepted: it is staged whole while the message waits unexpected.
/// Upstream's budgets are a few hundred KiB. We never send more either.
const MAX_RUNT: u64 = 16 << 20;

/// Runt lengths and the runt bytes of each packet are multiples of this (upstream aligns its
/// runt to the memory's alignment, 64 bytes for host memory).
const RUNT_ALIGN: usize = 64;

/// What one runt-read packet carries after its headers.
pub(super) struct RuntPkt<'a> {
    /// The sender's memory holding the whole message.
    pub iov: Vec<RmaIov>,
    /// Bytes of the message sent in packets.
    pub runt: usize,
    /// This packet's runt bytes, at `off` of the message.
    pub off: usize,
    pub bytes: &'a [u8],
}

/// Takes a runt-read packet's data apart: `read_iov_count` entries (all there, at most
/// `pkt::MAX_RMA_IOV`) that add up to `msg_length`, then runt bytes lying within
/// `[0, runt_length)`, with `runt_length` at most `msg_length`. None for anything else.
pub(super) fn parts<'a>(h: &ReqHdr, data: &'a [u8]) -> Option<RuntPkt<'a>> {
    let iov = pkt::read_iovs(data, h.read_iov_count)?;
    if pkt::read_iov_total(&iov)? != h.msg_length
        || h.runt_length > h.msg_length
        || h.runt_length > MAX_RUNT
    {
        return None;
    }
    usize::try_from(h.msg_length).ok()?;
    let bytes = data.get(iov.len() * pkt::RMA_IOV_LEN..)?;
    let end = h.seg_offset.checked_add(bytes.len() as u64)?;
    if end > h.runt_length {
        return None;
    }
    Some(RuntPkt {
        iov,
        runt: usize::try_from(h.runt_length).ok()?,
        off: usize::try_from(h.seg_offset).ok()?,
        bytes,
    })
}

impl RdmEndpoint {
    /// A later packet of runt-read message `id`: its runt bytes, if it describes the same
    /// message as the first one did (else it is dropped and counted).
    pub(super) fn runt_segment(&self, g: &mut Inner, id: u64, h: &ReqHdr, rp: &RuntPkt<'_>) {
        let same = g.rxes.get(id).is_some_and(|r| {
            r.total as u64 == h.msg_length
                && r.lr
                    .as_ref()
                    .is_some_and(|lr| lr.from == rp.runt && lr.iov == rp.iov)
        });
        if !same {
            g.dropped += 1;
            return;
        }
        self.rx_data(g, id, rp.off, &[rp.bytes]);
    }
}

impl Inner {
    /// Sends message `id`, which can go by long read from `iov`, as a runt read if it should
    /// (see the module's documentation). Returns false otherwise, having sent nothing.
    pub fn start_runtread_msg(&mut self, id: u64, iov: &[RmaIov]) -> bool {
        let Some(t) = self.txes.get(id) else {
            return false;
        };
        let peer = t.peer;
        let budget = self.knobs.runt_size.min(MAX_RUNT as usize);
        let runt = budget.min(t.len.saturating_sub(1)) / RUNT_ALIGN * RUNT_ALIGN;
        if runt == 0 || t.await_response || self.peers[peer].extra_info & pkt::EXTRA_RUNT == 0 {
            return false;
        }
        let reading = |o: &Txe| o.longread && matches!(o.kind, TxKind::Msg | TxKind::Tagged);
        if !self.txes.ids_where(reading).is_empty() {
            return false;
        }
        let tagged = t.kind == TxKind::Tagged;
        let (ty, flags) = if tagged {
            (pkt::RUNTREAD_TAGRTM, pkt::REQ_TAGGED)
        } else {
            (pkt::RUNTREAD_MSGRTM, pkt::REQ_MSG)
        };
        let mut data = [0u8; pkt::MAX_RMA_IOV * pkt::RMA_IOV_LEN];
        let n = pkt::write_read_iovs(&mut data, iov);
        let over = self.req_overhead(peer, ty, 0, t.cq_data.is_some()) + n;
        let room = self.peer_pkt(peer).saturating_sub(over) / RUNT_ALIGN * RUNT_ALIGN;
        if room == 0 {
            return false;
        }
        let mut h = ReqHdr {
            msg_id: t.msg_id,
            tag: t.tag,
            send_id: tx_wire(id),
            msg_length: t.len as u64,
            read_iov_count: iov.len() as u32,
            runt_length: runt as u64,
            ..Default::default()
        };
        if let Some(t) = self.txes.get_mut(id) {
            // The receiver's device reads our memory until its EOR.
            t.lent = true;
            t.longread = true;
            t.await_response = true;
            t.runt = runt;
        }
        let mut off = 0;
        while off < runt {
            let k = room.min(runt - off);
            h.seg_offset = off as u64;
            self.send_req(id, ty, flags, &h, &[], off, k, &data[..n]);
            off += k;
        }
        if let Some(t) = self.txes.get_mut(id) {
            t.queued = t.len;
            t.state = TxState::WaitResponse;
        }
        true
    }
}

impl LongRead {
    /// The reads of a runt-read message: everything after its first `runt` bytes.
    pub(super) fn runt(iov: Vec<RmaIov>, runt: usize) -> Box<LongRead> {
        let mut lr = LongRead::new(iov);
        lr.from = runt;
        lr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(iov: &[RmaIov], runt: &[u8]) -> Vec<u8> {
        let mut d = vec![0u8; iov.len() * pkt::RMA_IOV_LEN];
        pkt::write_read_iovs(&mut d, iov);
        d.extend_from_slice(runt);
        d
    }

    /// A runt-read packet's data is taken apart only when it is whole and consistent.
    #[test]
    fn runt_packets_are_checked_before_use() {
        let iov = [
            RmaIov {
                addr: 0x1000,
                len: 10_000,
                key: 1,
            },
            RmaIov {
                addr: 0x9000,
                len: 5_000,
                key: 1,
            },
        ];
        let h = ReqHdr {
            msg_length: 15_000,
            read_iov_count: 2,
            seg_offset: 1000,
            runt_length: 3000,
            ..Default::default()
        };
        let d = packet(&iov, &[7; 2000]);
        let rp = parts(&h, &d).unwrap();
        assert_eq!((rp.iov.as_slice(), rp.runt, rp.off), (&iov[..], 3000, 1000));
        assert_eq!(rp.bytes, &[7; 2000][..]);
        // No runt bytes at all is still a packet (a runt of nothing).
        assert!(parts(&h, &packet(&iov, &[])).is_some());
        let bad = |h: ReqHdr, d: &[u8]| assert!(parts(&h, d).is_none(), "{h:?}");
        // Bytes past the runt, an offset that overflows.
        bad(h, &packet(&iov, &[7; 2001]));
        bad(
            ReqHdr {
                seg_offset: u64::MAX - 10,
                ..h
            },
            &d,
        );
        // A runt longer than the message, or than we stage.
        bad(
            ReqHdr {
                runt_length: 15_001,
                ..h
            },
            &d,
        );
        let big = [RmaIov {
            len: MAX_RUNT + 2,
            ..iov[0]
        }];
        bad(
            ReqHdr {
                msg_length: MAX_RUNT + 2,
                runt_length: MAX_RUNT + 1,
                read_iov_count: 1,
                seg_offset: 0,
                ..h
            },
            &packet(&big, &[0; 8]),
        );
        // Entries missing, too many, or not adding up to the message.
        bad(
            ReqHdr {
                read_iov_count: 3,
                ..h
            },
            &d[..3 * pkt::RMA_IOV_LEN - 1],
        );
        bad(
            ReqHdr {
                read_iov_count: 5,
                ..h
            },
            &[0; 5 * pkt::RMA_IOV_LEN + 10],
        );
        bad(
            ReqHdr {
                msg_length: 15_001,
                ..h
            },
            &d,
        );
    }
}
