//! Decoded data-path calls and the completion-flag rules every provider shares.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::abi::consts::*;
use crate::abi::types::{fi_rma_ioc, fi_rma_iov};
use crate::sys::mem::IoVec;

/// Which family of C entry point a data call came through (fi_msg(3)): the plain calls use the
/// endpoint's default `op_flags`, the `*msg` calls their explicit flags, `inject` never completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Plain,
    Msg,
    Inject,
}

/// `fi_send`/`fi_recv`/`fi_tsend`/... decoded. For receives `addr` is the source filter
/// (`FI_ADDR_UNSPEC` = any), for sends the destination.
#[derive(Clone, Copy, Debug)]
pub struct MsgOp<'a> {
    pub iov: &'a [IoVec],
    /// MR descriptors, one per iov entry, or empty.
    pub desc: &'a [usize],
    pub addr: u64,
    pub context: usize,
    pub data: u64,
    pub tag: u64,
    pub ignore: u64,
    pub flags: u64,
    pub call: Call,
}

/// The most iov entries an operation in FI_MSG_PREFIX mode may name: efa's `iov_limit`.
pub const PREFIXED_IOV_MAX: usize = 4;

impl<'a> MsgOp<'a> {
    /// The operation without its message prefix (fi_getinfo(3) `FI_MSG_PREFIX`): the buffer
    /// starts with `prefix` bytes that belong to the provider, all in the first entry, and the
    /// message is what follows. The stripped entries are written to `out`; descriptors stay
    /// one per entry. A first entry shorter than the prefix is `FI_EINVAL`.
    pub fn without_prefix<'b>(
        &self,
        prefix: usize,
        out: &'b mut [IoVec; PREFIXED_IOV_MAX],
    ) -> crate::core::Result<MsgOp<'b>>
    where
        'a: 'b,
    {
        let first = self.iov.first().ok_or(crate::core::Errno::INVAL)?;
        if self.iov.len() > out.len() {
            return Err(crate::core::Errno::INVAL);
        }
        let rest = first
            .len()
            .checked_sub(prefix)
            .ok_or(crate::core::Errno::INVAL)?;
        out[..self.iov.len()].copy_from_slice(self.iov);
        out[0] = first.sub(prefix, rest).ok_or(crate::core::Errno::INVAL)?;
        Ok(MsgOp {
            iov: &out[..self.iov.len()],
            ..*self
        })
    }
}

/// `fi_read`/`fi_write` family decoded. `addr` is the peer.
#[derive(Clone, Copy, Debug)]
pub struct RmaOp<'a> {
    pub iov: &'a [IoVec],
    pub desc: &'a [usize],
    pub addr: u64,
    pub rma_iov: &'a [fi_rma_iov],
    pub context: usize,
    pub data: u64,
    pub flags: u64,
    pub call: Call,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicKind {
    /// fi_atomic: update only.
    Write,
    /// fi_fetch_atomic: update, return the old value.
    Fetch,
    /// fi_compare_atomic: conditional update, return the old value.
    Compare,
}

/// The fi_atomic(3) family decoded. Buffers are in bytes (`count × datatype size`).
#[derive(Clone, Copy, Debug)]
pub struct AtomicOp<'a> {
    pub kind: AtomicKind,
    pub iov: &'a [IoVec],
    pub desc: &'a [usize],
    pub compare: &'a [IoVec],
    pub compare_desc: &'a [usize],
    pub result: &'a [IoVec],
    pub result_desc: &'a [usize],
    pub addr: u64,
    /// Remote targets with counts in elements.
    pub rma_ioc: &'a [fi_rma_ioc],
    pub datatype: u32,
    pub op: u32,
    pub context: usize,
    pub data: u64,
    pub flags: u64,
    pub call: Call,
}

/// Flags that an application may pass on a data call; anything else is `FI_EBADFLAGS`.
pub const USER_OP_FLAGS: u64 = FI_COMPLETION
    | FI_INJECT
    | FI_INJECT_COMPLETE
    | FI_TRANSMIT_COMPLETE
    | FI_DELIVERY_COMPLETE
    | FI_MATCH_COMPLETE
    | FI_COMMIT_COMPLETE
    | FI_REMOTE_CQ_DATA
    | FI_MORE
    | FI_FENCE
    | FI_MULTI_RECV
    | FI_PEEK
    | FI_CLAIM
    | FI_DISCARD
    | FI_TRIGGER
    | FI_AUTH_KEY
    | FI_PEER_TRANSFER
    | 0xf << 60;

/// An endpoint's default operation flags and completion selection (fi_endpoint(3) `op_flags`,
/// `FI_SELECTIVE_COMPLETION` on the CQ bind).
#[derive(Debug, Default)]
pub struct OpFlags {
    tx: AtomicU64,
    rx: AtomicU64,
    /// Bit 0: tx CQ bound with FI_SELECTIVE_COMPLETION; bit 1: rx likewise.
    selective: AtomicU64,
}

impl OpFlags {
    pub fn new(tx_op_flags: u64, rx_op_flags: u64) -> OpFlags {
        OpFlags {
            tx: AtomicU64::new(tx_op_flags),
            rx: AtomicU64::new(rx_op_flags),
            selective: AtomicU64::new(0),
        }
    }

    /// Checks the flags of a CQ binding (fi_endpoint(3) `fi_ep_bind`: FI_TRANSMIT and/or
    /// FI_RECV, optionally FI_SELECTIVE_COMPLETION) and records selective completion. Returns
    /// whether the CQ takes transmit and receive completions.
    pub fn bind_cq(&self, flags: u64) -> crate::core::Result<(bool, bool)> {
        if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0
            || flags & (FI_TRANSMIT | FI_RECV) == 0
        {
            return Err(crate::core::Errno::BADFLAGS);
        }
        let (tx, rx) = (flags & FI_TRANSMIT != 0, flags & FI_RECV != 0);
        let selective = flags & FI_SELECTIVE_COMPLETION != 0;
        self.set_selective(selective && tx, selective && rx);
        Ok((tx, rx))
    }

    pub fn set_selective(&self, tx: bool, rx: bool) {
        let mut v = self.selective.load(Ordering::Relaxed);
        if tx {
            v |= 1;
        }
        if rx {
            v |= 2;
        }
        self.selective.store(v, Ordering::Relaxed);
    }

    pub fn set_tx(&self, flags: u64) {
        self.tx.store(flags, Ordering::Relaxed);
    }

    pub fn set_rx(&self, flags: u64) {
        self.rx.store(flags, Ordering::Relaxed);
    }

    pub fn tx(&self) -> u64 {
        self.tx.load(Ordering::Relaxed)
    }

    pub fn rx(&self) -> u64 {
        self.rx.load(Ordering::Relaxed)
    }

    /// The flags a transmit call acts on, with `FI_COMPLETION` set iff a completion is due.
    pub fn resolve_tx(&self, call: Call, flags: u64) -> u64 {
        let selective = self.selective.load(Ordering::Relaxed) & 1 != 0;
        resolve(call, flags, self.tx(), selective)
    }

    /// The flags a receive call acts on, with `FI_COMPLETION` set iff a completion is due.
    pub fn resolve_rx(&self, call: Call, flags: u64) -> u64 {
        let selective = self.selective.load(Ordering::Relaxed) & 2 != 0;
        resolve(call, flags, self.rx(), selective)
    }
}

fn resolve(call: Call, flags: u64, defaults: u64, selective: bool) -> u64 {
    match call {
        // Plain calls: the endpoint's op_flags, plus what the call itself implies (e.g.
        // FI_REMOTE_CQ_DATA for *data). Completion unless selective and not in op_flags.
        Call::Plain => {
            let f = defaults | flags;
            if selective { f } else { f | FI_COMPLETION }
        }
        Call::Msg => {
            if selective {
                flags
            } else {
                flags | FI_COMPLETION
            }
        }
        // fi_inject: "no completion is generated" (fi_msg(3)), whatever the bind said.
        Call::Inject => (defaults | flags | FI_INJECT) & !FI_COMPLETION,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_selection() {
        let f = OpFlags::new(FI_TRANSMIT_COMPLETE, 0);
        assert_eq!(
            f.resolve_tx(Call::Plain, 0),
            FI_TRANSMIT_COMPLETE | FI_COMPLETION
        );
        assert_eq!(f.resolve_tx(Call::Msg, 0), FI_COMPLETION);
        assert_eq!(f.resolve_tx(Call::Inject, 0) & FI_COMPLETION, 0);
        f.set_selective(true, false);
        assert_eq!(f.resolve_tx(Call::Plain, 0) & FI_COMPLETION, 0);
        assert_eq!(
            f.resolve_tx(Call::Msg, FI_COMPLETION) & FI_COMPLETION,
            FI_COMPLETION
        );
        assert_eq!(f.resolve_rx(Call::Plain, 0) & FI_COMPLETION, FI_COMPLETION);
        f.set_tx(FI_COMPLETION);
        assert_eq!(f.resolve_tx(Call::Plain, 0) & FI_COMPLETION, FI_COMPLETION);
    }

    #[test]
    fn a_message_prefix_is_cut_from_the_first_entry() {
        let a: &'static mut [u8] = Box::leak(vec![0u8; 64].into_boxed_slice());
        let b: &'static mut [u8] = Box::leak(vec![0u8; 16].into_boxed_slice());
        let (a_addr, b_addr) = (a.as_ptr() as usize, b.as_ptr() as usize);
        let iov = [IoVec::from_mut_slice(a), IoVec::from_mut_slice(b)];
        let desc = [7usize, 8];
        let op = MsgOp {
            iov: &iov,
            desc: &desc,
            addr: 3,
            context: 9,
            data: 0,
            tag: 0,
            ignore: 0,
            flags: 0,
            call: Call::Plain,
        };
        let mut out = [IoVec::EMPTY; PREFIXED_IOV_MAX];
        let cut = op.without_prefix(40, &mut out).unwrap();
        assert_eq!(cut.iov.len(), 2);
        assert_eq!((cut.iov[0].addr(), cut.iov[0].len()), (a_addr + 40, 24));
        assert_eq!((cut.iov[1].addr(), cut.iov[1].len()), (b_addr, 16));
        assert_eq!((cut.desc, cut.addr, cut.context), (&desc[..], 3, 9));
        // A prefix that fills the first entry leaves it empty; a longer one is refused.
        let mut out = [IoVec::EMPTY; PREFIXED_IOV_MAX];
        assert_eq!(op.without_prefix(64, &mut out).unwrap().iov[0].len(), 0);
        let mut out = [IoVec::EMPTY; PREFIXED_IOV_MAX];
        assert_eq!(
            op.without_prefix(65, &mut out).unwrap_err(),
            crate::core::Errno::INVAL
        );
        let none = MsgOp { iov: &[], ..op };
        let mut out = [IoVec::EMPTY; PREFIXED_IOV_MAX];
        assert!(none.without_prefix(8, &mut out).is_err());
    }
}
