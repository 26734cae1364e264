//! The objects handed to C.
//!
//! Each is an [`Obj<F, I>`]: `#[repr(C)]` with the public header `F` (`fid_ep`, `fid_cq`, ...)
//! first, so the C pointer is the pointer to the whole object. A C pointer is turned back into a
//! reference only by [`Obj::from_ptr`], which checks it is non-NULL, of the right class, and
//! carries our own ops table for that class (so a foreign or closed object is refused rather
//! than trusted). `fi_close` refuses an object others still depend on with `-FI_EBUSY`.
//!
//! This module is the bottom of `ffi`: the other modules import the object plumbing and the
//! default slots from here, and none of it imports them (each declares its own kind with
//! `fid_kind!`).

use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::abi::consts::*;
use crate::abi::ops::fi_ops;
use crate::abi::types::*;
use crate::core::{Errno, Result};
use crate::util::av::Av;
use crate::util::cntr::Cntr;
use crate::util::mr::Mr;
use crate::util::{Domain, Endpoint, Fabric};

/// How many objects depend on an object (its children and the objects bound to it).
pub type Refs = Arc<AtomicUsize>;

/// A public object header type, with its class and the `fi_ops` table this library gives it.
pub trait FidKind: Sized {
    const CLASS: usize;
    fn fi_ops() -> &'static fi_ops;
}

/// Declares a header type's class and `fi_ops` table; each module that owns an object kind
/// declares its own: `fid_kind!(fid_av, FI_CLASS_AV, AV_FI_OPS)`.
macro_rules! fid_kind {
    ($t:ty, $class:expr, $ops:path) => {
        impl $crate::ffi::object::FidKind for $t {
            const CLASS: usize = $class;
            fn fi_ops() -> &'static $crate::abi::ops::fi_ops {
                &$ops
            }
        }
    };
}
pub(crate) use fid_kind;

/// The objects whose Rust side is a `util` or provider object. (CQs and EQs also keep buffers
/// that their ops hand out: `queues::{CqObj, EqObj}`.)
pub type FabricObj = Obj<fid_fabric, Arc<dyn Fabric>>;
pub type DomainObj = Obj<fid_domain, Arc<dyn Domain>>;
pub type EpObj = Obj<fid_ep, Arc<dyn Endpoint>>;
pub type AvObj = Obj<fid_av, Arc<Av>>;
pub type MrObj = Obj<fid_mr, Arc<Mr>>;
pub type CntrObj = Obj<fid_cntr, Arc<Cntr>>;

#[repr(C)]
pub struct Obj<F, I> {
    pub fid: F,
    /// Objects that depend on this one; `fi_close` is `-FI_EBUSY` while non-zero.
    pub refs: Refs,
    /// The reference counts this object holds (its parent, what it is bound to).
    held: Mutex<Vec<Refs>>,
    /// API version of the `fi_getinfo` call this object descends from (sizes some structs).
    pub api_version: u32,
    pub inner: I,
}

impl<F: FidKind, I> Obj<F, I> {
    /// Boxes a new object for C. `parent` (if any) gains a reference until close.
    pub fn create(fid: F, parent: Option<&Refs>, api_version: u32, inner: I) -> *mut Obj<F, I> {
        let held = match parent {
            Some(p) => {
                p.fetch_add(1, Ordering::AcqRel);
                vec![p.clone()]
            }
            None => Vec::new(),
        };
        let obj = Box::new(Obj {
            fid,
            refs: Arc::new(AtomicUsize::new(0)),
            held: Mutex::new(held),
            api_version,
            inner,
        });
        Box::into_raw(obj)
    }

    /// The object behind a C pointer of its header type.
    ///
    /// # Safety
    /// `p` is NULL or points to readable memory at least as large as a `struct fid`; if its
    /// class and ops match ours, it was created by [`Obj::create`] and is not yet destroyed.
    pub unsafe fn from_ptr<'a>(p: *const F) -> Result<&'a Obj<F, I>> {
        // SAFETY: forwarded; every F starts with a `struct fid`.
        unsafe { Self::from_fid(p.cast::<fid>()) }
    }

    /// As `from_ptr`, from a generic `struct fid *`.
    ///
    /// # Safety
    /// As [`Obj::from_ptr`].
    pub unsafe fn from_fid<'a>(p: *const fid) -> Result<&'a Obj<F, I>> {
        if p.is_null() {
            return Err(Errno::INVAL);
        }
        // SAFETY: non-null and readable as a `struct fid` per the contract.
        let f = unsafe { &*p };
        if f.fclass != F::CLASS || !core::ptr::eq(f.ops, F::fi_ops()) {
            return Err(Errno::INVAL);
        }
        // SAFETY: class and ops identify an object this library created as Obj<F, I> (each
        // header type has exactly one Obj type and one fi_ops table), and it is live.
        Ok(unsafe { &*p.cast::<Obj<F, I>>() })
    }

    /// Records that this object now depends on another (a bind).
    pub fn hold(&self, other: &Refs) {
        other.fetch_add(1, Ordering::AcqRel);
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(other.clone());
    }

    /// Whether anything still depends on this object.
    pub fn busy(&self) -> bool {
        self.refs.load(Ordering::Acquire) != 0
    }

    /// Frees an object after `fi_close` decided it may go: drops its references and poisons the
    /// header so that a stale pointer is refused by `from_fid` while the memory is not reused.
    ///
    /// # Safety
    /// `p` came from [`Obj::create`], is not used by C after this call, and no other reference
    /// to it is live.
    pub unsafe fn destroy(p: *const Obj<F, I>) {
        let p = p as *mut Obj<F, I>;
        // SAFETY: `p` came from Box::into_raw in `create` and is destroyed only once.
        let obj = unsafe { Box::from_raw(p) };
        for r in obj.held.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            r.fetch_sub(1, Ordering::AcqRel);
        }
        // SAFETY: the header starts with a `struct fid` we own; poisoning it is a plain write.
        unsafe { (*(p as *mut fid)).fclass = FI_CLASS_UNSPEC };
        drop(obj);
    }

    /// The object as the `struct fid *` C sees.
    pub fn as_fid(&self) -> *mut fid {
        self as *const Self as *mut fid
    }
}

/// A public `struct fid` header for a new object.
pub fn fid_header(class: usize, context: *mut c_void, ops: &'static fi_ops) -> fid {
    fid {
        fclass: class,
        context,
        ops,
    }
}

/// Releases any objects bound to `p` and closes it: shared close logic for `fi_close` slots.
///
/// # Safety
/// `p` is a pointer C passed to `fi_close`.
pub unsafe fn close_obj<F: FidKind, I>(
    p: *mut fid,
    before: impl FnOnce(&Obj<F, I>) -> Result<()>,
) -> Result<()> {
    // SAFETY: forwarded from the caller.
    let obj = unsafe { Obj::<F, I>::from_fid(p)? };
    if obj.busy() {
        return Err(Errno::BUSY);
    }
    before(obj)?;
    // SAFETY: C handed the object to fi_close; after success it must not use it again.
    unsafe { Obj::<F, I>::destroy(obj) };
    Ok(())
}

// ---- generic stubs for slots an object does not implement ----

pub(crate) unsafe extern "C" fn fid_no_bind(_f: *mut fid, _b: *mut fid, _flags: u64) -> c_int {
    Errno::NOSYS.neg()
}
pub(crate) unsafe extern "C" fn fid_no_control(
    _f: *mut fid,
    _cmd: c_int,
    _arg: *mut c_void,
) -> c_int {
    Errno::NOSYS.neg()
}
pub(crate) unsafe extern "C" fn fid_no_ops_open(
    _f: *mut fid,
    _name: *const c_char,
    _flags: u64,
    _ops: *mut *mut c_void,
    _ctx: *mut c_void,
) -> c_int {
    Errno::NOSYS.neg()
}
pub(crate) unsafe extern "C" fn fid_no_tostr(
    _f: *const fid,
    _buf: *mut c_char,
    _len: usize,
) -> c_int {
    Errno::NOSYS.neg()
}
pub(crate) unsafe extern "C" fn fid_no_ops_set(
    _f: *mut fid,
    _name: *const c_char,
    _flags: u64,
    _ops: *mut c_void,
    _ctx: *mut c_void,
) -> c_int {
    Errno::NOSYS.neg()
}

/// An `fi_ops` table with the given close and bind/control slots, everything else `ENOSYS`.
pub const fn fi_ops_with(
    close: unsafe extern "C" fn(*mut fid) -> c_int,
    bind: unsafe extern "C" fn(*mut fid, *mut fid, u64) -> c_int,
    control: unsafe extern "C" fn(*mut fid, c_int, *mut c_void) -> c_int,
    ops_open: unsafe extern "C" fn(
        *mut fid,
        *const c_char,
        u64,
        *mut *mut c_void,
        *mut c_void,
    ) -> c_int,
) -> fi_ops {
    fi_ops {
        size: size_of::<fi_ops>(),
        close: Some(close),
        bind: Some(bind),
        control: Some(control),
        ops_open: Some(ops_open),
        tostr: Some(fid_no_tostr),
        ops_set: Some(fid_no_ops_set),
    }
}
