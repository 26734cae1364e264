//! The Rust face of a provider: the objects `ffi` wraps in `fid_*` structs and ops tables.
//!
//! Generic objects (CQ, EQ, counters, AV, MR map, wait sets) are concrete types of `util`;
//! what differs per provider (fabric, domain, endpoint) is a trait here. Every method has a
//! default that reports `FI_ENOSYS`, so a provider states only what it implements.

use std::sync::Arc;

use super::av::{Av, AvAttr};
use super::cntr::Cntr;
use super::cq::Cq;
use super::ep::{AtomicKind, AtomicOp, MsgOp, RmaOp};
use super::eq::Eq;
use super::mr::{Mr, MrRequest};
pub use super::progress::{Idle, Progress, Sources};
use crate::core::info::FabricAttr;
use crate::core::provider::InfoProvider;
use crate::core::{Errno, Info, Result};

/// A provider: discovery plus `fi_fabric`.
pub trait Provider: InfoProvider {
    fn fabric(&self, attr: &FabricAttr) -> Result<Arc<dyn Fabric>>;
}

pub trait Fabric: Send + Sync {
    /// fi_domain(3).
    fn domain(&self, info: &Info) -> Result<Arc<dyn Domain>>;

    fn name(&self) -> &str;

    /// Names accepted by `fi_open_ops` on the fabric (e.g. `FI_EFA_FEATURE_OPS`).
    fn supports_ops(&self, _name: &str) -> bool {
        false
    }
}

/// Result of `fi_query_atomic` (fi_atomic(3)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicAttr {
    pub count: usize,
    pub size: usize,
}

pub trait Domain: Send + Sync {
    /// fi_endpoint(3), for `info` (already matched against this domain).
    fn endpoint(&self, info: &Info) -> Result<Arc<dyn Endpoint>>;

    /// fi_av_open(3).
    fn av_open(&self, attr: &AvAttr) -> Result<Arc<Av>>;

    /// The concrete domain, for a provider's own extensions and its tests.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// fi_mr_reg(3) family.
    fn mr_reg(&self, req: &MrRequest) -> Result<Arc<Mr>>;

    /// Whether the application serializes every call into this domain's objects (fi_domain(3)
    /// `FI_THREAD_DOMAIN`) and the provider runs no thread of its own on them: their queues'
    /// locks may then skip their locked instructions (`sys::lock`), as upstream's do.
    fn serialized(&self) -> bool {
        false
    }

    /// fi_query_atomic(3): `kind` from the flags (`FI_FETCH_ATOMIC`, `FI_COMPARE_ATOMIC`).
    fn query_atomic(
        &self,
        _datatype: u32,
        _op: u32,
        _kind: AtomicKind,
        _flags: u64,
    ) -> Result<AtomicAttr> {
        Err(Errno::NOSYS)
    }

    /// Names accepted by `fi_open_ops` on the domain (e.g. `FI_EFA_DOMAIN_OPS`).
    fn supports_ops(&self, _name: &str) -> bool {
        false
    }

    /// The `mr_mode` bits in force (decides virtual-address vs offset RMA addressing).
    fn mr_mode(&self) -> i32;

    /// CQ data size the domain supports (for `fi_cq_open` checks).
    fn cq_data_size(&self) -> usize {
        8
    }
}

/// What `fi_ep_bind` attaches (fi_endpoint(3)).
#[derive(Clone)]
pub enum Bind {
    Cq(Arc<Cq>),
    Cntr(Arc<Cntr>),
    Av(Arc<Av>),
    Eq(Arc<Eq>),
}

/// An endpoint. Data-path methods take fully decoded arguments; `op.call` tells which C
/// entry point was used so that the provider resolves flags with `util::ep::OpFlags`.
pub trait Endpoint: Send + Sync {
    fn bind(&self, target: Bind, flags: u64) -> Result<()>;

    /// `fi_enable`.
    fn enable(&self) -> Result<()>;

    /// `fi_getname`: the endpoint's address in the provider's format.
    fn getname(&self) -> Result<Vec<u8>>;

    fn setname(&self, _addr: &[u8]) -> Result<()> {
        Err(Errno::NOSYS)
    }

    /// The concrete endpoint, for a provider's own extensions and its tests.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// `fi_getopt`: writes the option into `val`, returns its length; `Errno::TOOSMALL` with
    /// the needed length reported through `needed` when `val` is short.
    fn getopt(
        &self,
        _level: i32,
        _name: i32,
        _val: &mut [u8],
        _needed: &mut usize,
    ) -> Result<usize> {
        Err(Errno::NOPROTOOPT)
    }

    fn setopt(&self, _level: i32, _name: i32, _val: &[u8]) -> Result<()> {
        Err(Errno::NOPROTOOPT)
    }

    /// `fi_cancel`: cancels a pending receive posted with `context`.
    fn cancel(&self, _context: usize) -> Result<()> {
        Err(Errno::NOENT)
    }

    fn tx_size_left(&self) -> Result<usize> {
        Err(Errno::NOSYS)
    }

    fn rx_size_left(&self) -> Result<usize> {
        Err(Errno::NOSYS)
    }

    fn recv(&self, _op: &MsgOp<'_>, _tagged: bool) -> Result<()> {
        Err(Errno::NOSYS)
    }

    fn send(&self, _op: &MsgOp<'_>, _tagged: bool) -> Result<()> {
        Err(Errno::NOSYS)
    }

    fn read(&self, _op: &RmaOp<'_>) -> Result<()> {
        Err(Errno::NOSYS)
    }

    fn write(&self, _op: &RmaOp<'_>) -> Result<()> {
        Err(Errno::NOSYS)
    }

    fn atomic(&self, _op: &AtomicOp<'_>) -> Result<()> {
        Err(Errno::NOSYS)
    }

    /// `fi_atomicvalid` and kin: the largest element count one call may carry.
    fn atomic_valid(&self, _kind: AtomicKind, _datatype: u32, _op: u32) -> Result<usize> {
        Err(Errno::NOSYS)
    }

    /// `fi_close`: release resources; the object is dropped after this returns Ok.
    fn close(&self) -> Result<()> {
        Ok(())
    }
}
