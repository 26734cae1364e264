//! `fabric`: a drop-in `libfabric.so.1` written in Rust.
//!
//! Layers (each uses only the ones listed before it; see `docs/internals.md`):
//! `abi` (C layouts) → `error` (`Errno`) → `sys` (platform) → `core` (getinfo, params, logging,
//! strings) → `util` (objects every provider reuses) → `prov` (efa, shm) → `ffi` (C entry points).
#![deny(unsafe_code)]

pub mod abi;
pub mod core;
pub mod error;
pub mod ffi;
pub mod fuzzing;
pub mod prov;
pub mod sys;
pub mod util;
