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
