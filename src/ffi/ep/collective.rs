//! `fi_ops_collective`: not offered (no provider has `FI_COLLECTIVE`); every slot answers
//! `-FI_ENOSYS`.

use core::ffi::c_void;
use core::mem::size_of;

use crate::abi::ops::*;
use crate::abi::types::*;
use crate::core::Errno;

pub static COLLECTIVE_OPS: fi_ops_collective = fi_ops_collective {
    size: size_of::<fi_ops_collective>(),
    barrier: Some(coll_barrier),
    broadcast: Some(coll_none),
    alltoall: Some(coll_none),
    allreduce: Some(coll_none),
    allgather: Some(coll_none),
    reduce_scatter: Some(coll_none),
    reduce: Some(coll_none),
    scatter: Some(coll_none),
    gather: Some(coll_none),
    msg: Some(coll_none),
    barrier2: Some(coll_barrier2),
};

unsafe extern "C" fn coll_barrier(_e: *mut fid_ep, _a: fi_addr_t, _c: *mut c_void) -> isize {
    Errno::NOSYS.neg() as isize
}
unsafe extern "C" fn coll_barrier2(
    _e: *mut fid_ep,
    _a: fi_addr_t,
    _f: u64,
    _c: *mut c_void,
) -> isize {
    Errno::NOSYS.neg() as isize
}
unsafe extern "C" fn coll_none(_e: *mut fid_ep) -> isize {
    Errno::NOSYS.neg() as isize
}
