//! Object machinery every provider reuses: completion and event queues, counters, address
//! vectors, memory registration, wait objects, and the traits a provider implements.
//!
//! `util` knows no provider and no C entry point.

pub mod atomic;
pub mod av;
pub mod cntr;
pub mod cq;
pub mod ep;
pub mod eq;
pub mod hash;
pub mod huge_pages;
pub mod mr;
pub mod progress;
pub mod provider;
pub mod rxq;
pub mod slab;
pub mod wait;

pub use provider::{Bind, Domain, Endpoint, Fabric, Progress, Provider};

/// Appends `v` to a queue; an empty queue starts again at the front of its buffer (`clear`
/// resets a `VecDeque`'s head), so that entries taken as fast as they come reuse the same few
/// cached lines instead of walking the whole buffer (a CQ's is 64 KiB at the default size:
/// every push missed the L1 cache under an 8-byte message stream, perf).
#[inline(always)]
pub(crate) fn push_back_at_front_if_empty<T>(q: &mut std::collections::VecDeque<T>, v: T) {
    if q.is_empty() {
        q.clear();
    }
    q.push_back(v);
}
