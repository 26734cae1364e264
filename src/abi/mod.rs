//! C layouts of libfabric's public API (v2.6, and the older layouts that compat symbols accept).
//!
//! Nothing here has logic: `#[repr(C)]` mirrors of every public struct and ops table, and the
//! constants of the headers. Names follow the C names so that a reader can grep both sides.
//! The layouts are checked against Debian's 1.17 headers and ours by `abi-tests/`.
#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    clippy::upper_case_acronyms
)]

pub mod compat;
pub mod consts;
pub mod ops;
pub mod types;

pub use consts::*;
pub use ops::*;
pub use types::*;
