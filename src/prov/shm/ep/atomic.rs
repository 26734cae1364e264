//! Atomics: posting one (its operands travel inline or in a bounce buffer), and applying it
//! at the target against our MR map, answering with the fetched values.

use super::tx::{TxKind, TxOp, copy_in};
use super::{CntrKind, INJECT_SIZE, Inner, ShmEndpoint};
use crate::abi::consts::*;
use crate::core::{Errno, Result};
use crate::prov::shm::cmd::*;
use crate::prov::shm::region::BOUNCE_SIZE;
use crate::sys::mem::iov_len;
use crate::util::atomic;
use crate::util::cq::CqEntry;
use crate::util::ep::{AtomicKind, AtomicOp};
use crate::util::rxq::MAX_IOV;

impl ShmEndpoint {
    pub(super) fn do_atomic(&self, op: &AtomicOp<'_>) -> Result<()> {
        if self.caps & FI_ATOMIC == 0 {
            return Err(Errno::NOSYS);
        }
        if !atomic::valid(op.kind, op.datatype, op.op) {
            return Err(Errno::OPNOTSUPP);
        }
        let size = atomic::datatype_size(op.datatype).ok_or(Errno::INVAL)?;
        if op.rma_ioc.is_empty() || op.rma_ioc.len() > MAX_IOV || op.iov.len() > MAX_IOV {
            return Err(Errno::INVAL);
        }
        let count: usize = op.rma_ioc.iter().map(|r| r.count).sum();
        let len = count.checked_mul(size).ok_or(Errno::INVAL)?;
        let reads_only = op.kind == AtomicKind::Fetch && op.op == FI_ATOMIC_READ;
        if (!reads_only && iov_len(op.iov) != len)
            || (op.kind == AtomicKind::Compare && iov_len(op.compare) != len)
            || (op.kind != AtomicKind::Write && iov_len(op.result) != len)
        {
            return Err(Errno::INVAL);
        }
        let payload = if op.kind == AtomicKind::Compare {
            2 * len
        } else if reads_only {
            0
        } else {
            len
        };
        let flags = self.flags.resolve_tx(op.call, op.flags);
        if payload > BOUNCE_SIZE || len > BOUNCE_SIZE || flags & FI_INJECT != 0 && len > INJECT_SIZE
        {
            return Err(Errno::MSGSIZE);
        }
        let mut g = self.lock();
        if !g.enabled {
            return Err(Errno::OPBADSTATE);
        }
        let p = g.peer_for(op.addr)?;
        let mut c = Cmd::new(OP_ATOMIC, g.token);
        c.len = len as u64;
        c.aux2 =
            (op.rma_ioc.len() as u64) | (u64::from(op.datatype) << 8) | (u64::from(op.op) << 32);
        c.flags |= F_ACK;
        match op.kind {
            AtomicKind::Fetch => c.flags |= F_FETCH,
            AtomicKind::Compare => c.flags |= F_COMPARE,
            AtomicKind::Write => {}
        }
        if flags & FI_REMOTE_CQ_DATA != 0 {
            c.flags |= F_CQ_DATA;
            c.data = op.data;
        }
        let rma: Vec<(u64, u64, u64)> = op
            .rma_ioc
            .iter()
            .map(|r| (r.addr, r.count as u64, r.key))
            .collect();
        c.put_rma(&rma);
        let mut data = copy_in(op.iov, if reads_only { 0 } else { len });
        if op.kind == AtomicKind::Compare {
            data.extend(copy_in(op.compare, len));
        }
        let mut bounce = None;
        if data.len() <= RMA_INLINE {
            c.body[RMA_AREA..RMA_AREA + data.len()].copy_from_slice(&data);
        } else {
            let b = g
                .buf_filled(data.len(), |dst| dst.copy_from_slice(&data))
                .ok_or(Errno::AGAIN)?;
            c.proto = PROTO_BOUNCE;
            c.aux = u64::from(b.idx);
            bounce = Some(b);
        }
        let cq_flags = FI_ATOMIC
            | match op.kind {
                AtomicKind::Write => FI_WRITE,
                _ => FI_READ,
            };
        let cntr = if op.kind == AtomicKind::Write {
            CntrKind::Write
        } else {
            CntrKind::Read
        };
        let tx = TxOp {
            result: op.result.to_vec(),
            bounce,
            ..TxOp::new(p, TxKind::Atomic, cntr, op.context, flags, cq_flags, len)
        };
        g.post_op(p, tx, &mut c)?;
        Ok(())
    }

    pub(super) fn handle_atomic(&self, g: &mut Inner, p: usize, c: &Cmd) {
        let count = (c.aux2 & 0xff) as usize;
        let datatype = ((c.aux2 >> 8) & 0xff_ffff) as u32;
        let op = (c.aux2 >> 32) as u32;
        let kind = if c.flags & F_COMPARE != 0 {
            AtomicKind::Compare
        } else if c.flags & F_FETCH != 0 {
            AtomicKind::Fetch
        } else {
            AtomicKind::Write
        };
        let release = |g: &Inner| {
            if c.proto == PROTO_BOUNCE
                && let Some(r) = &g.peers[p].region
            {
                r.buf_release(c.aux as u32);
            }
        };
        let Some(size) = atomic::datatype_size(datatype)
            .filter(|_| atomic::valid(kind, datatype, op) && count > 0)
        else {
            release(g);
            g.ack(p, c.op_id, Err(Errno::OPNOTSUPP), 0);
            return;
        };
        let access = match (kind, op) {
            (AtomicKind::Fetch, FI_ATOMIC_READ) => FI_REMOTE_READ,
            (AtomicKind::Write, _) => FI_REMOTE_WRITE,
            _ => FI_REMOTE_READ | FI_REMOTE_WRITE,
        };
        let len = c.len as usize;
        let targets = match self.verify(g, c, access, size) {
            Ok(t) if len <= BOUNCE_SIZE => t,
            Ok(_) => {
                release(g);
                g.ack(p, c.op_id, Err(Errno::MSGSIZE), 0);
                return;
            }
            Err(e) => {
                release(g);
                g.ack(p, c.op_id, Err(e), 0);
                return;
            }
        };
        let reads_only = kind == AtomicKind::Fetch && op == FI_ATOMIC_READ;
        let plen = if kind == AtomicKind::Compare {
            2 * len
        } else if reads_only {
            0
        } else {
            len
        };
        let data = match c.proto {
            PROTO_INLINE if plen <= RMA_INLINE => Some(c.body[RMA_AREA..RMA_AREA + plen].to_vec()),
            PROTO_BOUNCE => g.peers[p]
                .region
                .as_ref()
                .and_then(|r| r.buf_with(c.aux as u32, 0, plen, |s| s.to_vec())),
            _ => None,
        };
        release(g);
        let Some(data) = data else {
            g.ack(p, c.op_id, Err(Errno::INVAL), 0);
            return;
        };
        let (src, cmp) = if kind == AtomicKind::Compare {
            data.split_at(len)
        } else {
            (&data[..], &[][..])
        };
        let mut result = if kind == AtomicKind::Write {
            Vec::new()
        } else {
            vec![0u8; len]
        };
        let mut off = 0;
        let mut status = Ok(());
        for t in &targets {
            let n = t.len();
            let s = if src.is_empty() {
                &[][..]
            } else {
                &src[off..off + n]
            };
            let k = if cmp.is_empty() {
                &[][..]
            } else {
                &cmp[off..off + n]
            };
            let r = if result.is_empty() {
                &mut [][..]
            } else {
                &mut result[off..off + n]
            };
            if let Err(e) = t.with_mut_slice(|dst| atomic::apply(kind, datatype, op, dst, s, k, r))
            {
                status = Err(e);
                break;
            }
            off += n;
        }
        if status.is_ok() {
            let cntr = if access == FI_REMOTE_READ {
                &g.cntr.remote_read
            } else {
                &g.cntr.remote_write
            };
            if let Some(cn) = cntr {
                cn.complete(len);
            }
            if c.flags & F_CQ_DATA != 0
                && let Some(cq) = &g.rx_cq
            {
                cq.push(CqEntry {
                    op_context: 0,
                    flags: FI_REMOTE_WRITE | FI_ATOMIC | FI_REMOTE_CQ_DATA,
                    len,
                    data: c.data,
                    src_addr: FI_ADDR_NOTAVAIL,
                    ..Default::default()
                });
            }
        }
        let mut ack = Cmd::new(OP_ACK, g.token);
        ack.op_id = c.op_id;
        ack.status = status.err().map_or(0, |e| e.0);
        ack.len = result.len() as u64;
        if ack.status == 0 && !result.is_empty() {
            ack.flags = F_RETURN_DATA;
            if result.len() <= BODY {
                ack.body[..result.len()].copy_from_slice(&result);
            } else {
                match g.lend_with(p, result.len(), |dst| dst.copy_from_slice(&result)) {
                    Some(b) => {
                        ack.proto = PROTO_BOUNCE;
                        ack.aux = u64::from(b);
                    }
                    None => ack.status = Errno::AGAIN.0,
                }
            }
        }
        g.respond(p, &ack);
    }
}
